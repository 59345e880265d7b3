#!/bin/bash
# mk_bad_device.sh OUT.img - a character device /bad with the extents
# flag, which no device inode may have (e2fsck's device check); /file and
# /dir are healthy.
set -e
out=${1:?usage: mk_bad_device.sh OUT.img}
. "$(dirname "$0")/mk_lib.inc"
mk_need mke2fs debugfs
mk_healthy "$out" <<CMDS
mknod bad c 1 3
sif bad flags 0x80000
CMDS
echo "inode $(mk_ino "$out" bad): character device /bad with the extents flag"
