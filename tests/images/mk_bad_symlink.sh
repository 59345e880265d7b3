#!/bin/bash
# mk_bad_symlink.sh OUT.img - a fast symlink /lnk whose i_size (100) is
# more than i_block holds (59 bytes); /file and /dir are healthy.
set -e
out=${1:?usage: mk_bad_symlink.sh OUT.img}
. "$(dirname "$0")/mk_lib.inc"
mk_need mke2fs debugfs
mk_healthy "$out" <<CMDS
symlink lnk /file
sif lnk size 100
CMDS
echo "inode $(mk_ino "$out" lnk): fast symlink /lnk with i_size 100 (i_block holds 59)"
