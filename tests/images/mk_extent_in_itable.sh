#!/bin/bash
# mk_extent_in_itable.sh OUT.img: /bad is an extent-mapped file whose
# tree's leaf block lies inside the inode table: a copy of its real leaf
# (nine extents, checksum and all) in the last block of group 0's table,
# where no inode is in use, and the root's index entry pointing there (the
# real leaf is freed).  Reads find a well-formed tree; a write into it, or
# an inode written into that table block, damages the other.  Writes to
# /bad must be refused, naming the inode and the block.
set -euo pipefail
out=${1:?usage: mk_extent_in_itable.sh OUT.img}
. "$(dirname "$0")/mk_lib.inc"
mk_need mke2fs debugfs dumpe2fs dd
mk_scratch
mk_fs "$out" 8M -t ext4 -b 1024
# Nine 2 KiB runs 10 KiB apart: more extents than the inode's four, so
# the tree has a leaf block.
: > "$tmp/sparse"
for i in 0 1 2 3 4 5 6 7 8; do
	dd if=/dev/urandom of="$tmp/sparse" bs=1024 count=2 seek=$((i * 10)) conv=notrunc 2> /dev/null
done
echo hello > "$tmp/hello"
debugfs -w -f - "$out" > /dev/null 2>&1 <<DBG
write $tmp/hello hello.txt
write $tmp/sparse bad
DBG
ino=$(debugfs -R "stat /bad" "$out" 2> /dev/null | sed -n 's/^Inode: *\([0-9]*\).*/\1/p')
leaf=$(debugfs -R "dump_extents /bad" "$out" 2> /dev/null | awk '$1 == "0/" {print $8; exit}')
itab=$(dumpe2fs "$out" 2> /dev/null | sed -n 's/.*Inode table at [0-9]*-\([0-9]*\).*/\1/p' | head -1)
[ -n "$ino" ] && [ -n "$leaf" ] && [ -n "$itab" ] || { echo "mk_extent_in_itable.sh: no leaf block for /bad"; exit 1; }
dd if="$out" of="$out" bs=1024 skip="$leaf" seek="$itab" count=1 conv=notrunc status=none
# The root's only index entry: ei_leaf_lo is the le32 at byte 12+4 of i_block.
# freeb leaves the free counts as they were: one more free block.
free=$(dumpe2fs -h "$out" 2> /dev/null | awk '/^Free blocks:/ {print $3}')
gfree=$(dumpe2fs "$out" 2> /dev/null | sed -n 's/^ *\([0-9]*\) free blocks,.*/\1/p' | head -1)
debugfs -w -f - "$out" > /dev/null 2>&1 <<DBG
sif /bad block[4] $itab
freeb $leaf
set_bg 0 free_blocks_count $((gfree + 1))
ssv free_blocks_count $((free + 1))
DBG
echo "inode $ino (/bad): extent leaf block $itab inside the inode table of group 0"
