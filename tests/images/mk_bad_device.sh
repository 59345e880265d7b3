#!/bin/bash
# mk_bad_device.sh OUT.img - a character device /bad with the extents
# flag, which no device inode may have (e2fsck's device check); /file and
# /dir are healthy.
set -e
out=${1:?usage: mk_bad_device.sh OUT.img}
for t in mke2fs debugfs; do command -v $t >/dev/null || { echo "SKIP: $t not installed"; exit 77; }; done
rm -f "$out"
mke2fs -q -F -t ext4 -b 1024 "$out" 8M >/dev/null
echo healthy > "$out.tmp"
debugfs -w -f - "$out" >/dev/null 2>&1 <<CMDS
write $out.tmp file
mkdir dir
mknod bad c 1 3
sif bad flags 0x80000
CMDS
rm -f "$out.tmp"
echo "inode $(debugfs -R 'stat bad' "$out" 2>/dev/null | awk '/^Inode:/ {print $2; exit}'): character device /bad with the extents flag"
