#!/bin/bash
# mk_bad_extent_header.sh OUT.img - a regular file /bad whose extent
# header (in i_block) has a wrong magic; /file and /dir are healthy.
set -e
out=${1:?usage: mk_bad_extent_header.sh OUT.img}
for t in mke2fs debugfs; do command -v $t >/dev/null || { echo "SKIP: $t not installed"; exit 77; }; done
rm -f "$out"
mke2fs -q -F -t ext4 -b 1024 "$out" 8M >/dev/null
echo healthy > "$out.tmp"
head -c 5000 /dev/zero | tr '\0' x > "$out.tmp2"
debugfs -w -f - "$out" >/dev/null 2>&1 <<CMDS
write $out.tmp file
mkdir dir
write $out.tmp2 bad
sif bad block[0] 0x0001BEEF
CMDS
rm -f "$out.tmp" "$out.tmp2"
echo "inode $(debugfs -R 'stat bad' "$out" 2>/dev/null | awk '/^Inode:/ {print $2; exit}'): regular file /bad with extent header magic 0xbeef"
