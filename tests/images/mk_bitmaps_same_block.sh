#!/bin/bash
# mk_bitmaps_same_block.sh OUT.img - group 1's inode bitmap is at the same
# block as its block bitmap (issue 9, case 4: the descriptors must be
# cross-checked at mount).
set -eu
out=${1:?usage: mk_bitmaps_same_block.sh OUT.img}
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
bb=$(dumpe2fs "$out" 2> /dev/null | awk '/^Group 1:/ {g = 1} g && /Block bitmap at/ {print $4; exit}')
[ -n "$bb" ] || { echo "mk_bitmaps_same_block: no group 1"; exit 1; }
# One debugfs session: a second one would open the damaged descriptors.
printf "set_bg 1 inode_bitmap $bb\nset_bg 1 checksum calc\n" > "$tmp/cmds"
debugfs -w -f "$tmp/cmds" "$out" > /dev/null 2>&1
[ "$(dumpe2fs "$out" 2> /dev/null | awk '/^Group 1:/ {g = 1} g && /Inode bitmap at/ {print $4; exit}')" = "$bb" ] ||
	{ echo "mk_bitmaps_same_block: set_bg did not take"; exit 1; }
echo "group 1's inode bitmap and block bitmap both at block $bb"
