#!/bin/bash
# mk_bbitmap_at_block0.sh OUT.img - 4 KiB blocks, group 0's block bitmap
# at block 0, the superblock's block (issue 9, case 4: a write put through
# it would land in the boot sector and the superblock).
set -eu
out=${1:?usage: mk_bbitmap_at_block0.sh OUT.img}
for t in mke2fs debugfs dumpe2fs; do
	command -v $t > /dev/null || { echo "SKIP: $t not installed"; exit 77; }
done
tmp=$(mktemp -d "${TMPDIR:-/tmp}/mk_img.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
t=$tmp/tree
mkdir -p "$t/dir"
echo hello > "$t/hello.txt"
for f in a b c; do echo "$f" > "$t/dir/$f"; done
mke2fs -q -F -t ext4 -b 4096 -g 4096 -N 2048 -d "$t" "$out" 32M > "$tmp/mke2fs.log" 2>&1 || { cat "$tmp/mke2fs.log"; exit 1; }
# One debugfs session: a second one would open the damaged descriptors.
printf "set_bg 0 block_bitmap 0\nset_bg 0 checksum calc\n" > "$tmp/cmds"
debugfs -w -f "$tmp/cmds" "$out" > /dev/null 2>&1
dumpe2fs "$out" 2> /dev/null | grep -q "Block bitmap at 0 " ||
	{ echo "mk_bbitmap_at_block0: set_bg did not take"; exit 1; }
echo "group 0's block bitmap at block 0 (the superblock's block, 4 KiB blocks)"
