#!/bin/bash
# mk_bad_symlink.sh OUT.img - a fast symlink /lnk whose i_size (100) is
# more than i_block holds (59 bytes); /file and /dir are healthy.
set -e
out=${1:?usage: mk_bad_symlink.sh OUT.img}
for t in mke2fs debugfs; do command -v $t >/dev/null || { echo "SKIP: $t not installed"; exit 77; }; done
rm -f "$out"
mke2fs -q -F -t ext4 -b 1024 "$out" 8M >/dev/null
echo healthy > "$out.tmp"
debugfs -w -f - "$out" >/dev/null 2>&1 <<CMDS
write $out.tmp file
mkdir dir
symlink lnk /file
sif lnk size 100
CMDS
rm -f "$out.tmp"
echo "inode $(debugfs -R 'stat lnk' "$out" 2>/dev/null | awk '/^Inode:/ {print $2; exit}'): fast symlink /lnk with i_size 100 (i_block holds 59)"
