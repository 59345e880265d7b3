#!/bin/bash
# mk_indirect_in_itable.sh OUT.img: /bad is a block-mapped file (no
# extents feature) of 20 KiB whose single-indirect block lies inside the
# inode table: a copy of its real indirect block in the last block of
# group 0's table, where no inode is in use, and i_block[12] pointing
# there (the real one is freed).  Reads find a well-formed map; a write
# into it, or an inode written into that table block, damages the other.
# Writes to /bad must be refused, naming the inode and the block.
set -euo pipefail
out=${1:?usage: mk_indirect_in_itable.sh OUT.img}
. "$(dirname "$0")/mk_lib.inc"
mk_need mke2fs debugfs dumpe2fs dd
mk_scratch
mk_fs "$out" 8M -t ext4 -O ^extent,^64bit -b 1024
head -c 20480 /dev/urandom > "$tmp/data"
echo hello > "$tmp/hello"
debugfs -w -f - "$out" > /dev/null 2>&1 <<DBG
write $tmp/hello hello.txt
write $tmp/data bad
DBG
ino=$(debugfs -R "stat /bad" "$out" 2> /dev/null | sed -n 's/^Inode: *\([0-9]*\).*/\1/p')
ind=$(debugfs -R "stat /bad" "$out" 2> /dev/null | sed -n 's/.*(IND):\([0-9]*\).*/\1/p')
itab=$(dumpe2fs "$out" 2> /dev/null | sed -n 's/.*Inode table at [0-9]*-\([0-9]*\).*/\1/p' | head -1)
[ -n "$ino" ] && [ -n "$ind" ] && [ -n "$itab" ] || { echo "mk_indirect_in_itable.sh: no indirect block for /bad"; exit 1; }
dd if="$out" of="$out" bs=1024 skip="$ind" seek="$itab" count=1 conv=notrunc status=none
# freeb leaves the free counts as they were: one more free block.
free=$(dumpe2fs -h "$out" 2> /dev/null | awk '/^Free blocks:/ {print $3}')
gfree=$(dumpe2fs "$out" 2> /dev/null | sed -n 's/^ *\([0-9]*\) free blocks,.*/\1/p' | head -1)
debugfs -w -f - "$out" > /dev/null 2>&1 <<DBG
sif /bad block[IND] $itab
freeb $ind
set_bg 0 free_blocks_count $((gfree + 1))
ssv free_blocks_count $((free + 1))
DBG
echo "inode $ino (/bad): indirect block $itab inside the inode table of group 0"
