#!/bin/bash
# mk_bad_dir.sh OUT.img - a directory /bad whose i_size is 0 and whose
# extent tree maps nothing; /file and /dir are healthy.
set -e
out=${1:?usage: mk_bad_dir.sh OUT.img}
for t in mke2fs debugfs; do command -v $t >/dev/null || { echo "SKIP: $t not installed"; exit 77; }; done
rm -f "$out"
mke2fs -q -F -t ext4 -b 1024 "$out" 8M >/dev/null
echo healthy > "$out.tmp"
debugfs -w -f - "$out" >/dev/null 2>&1 <<CMDS
write $out.tmp file
mkdir dir
mkdir bad
sif bad size 0
sif bad block[3] 0
sif bad block[4] 0
sif bad block[5] 0
sif bad block[2] 0xF30A
sif bad blocks 0
CMDS
rm -f "$out.tmp"
echo "inode $(debugfs -R 'stat bad' "$out" 2>/dev/null | awk '/^Inode:/ {print $2; exit}'): directory /bad of size 0 with no blocks"
