#!/bin/bash
# mk_extent_huge_claim.sh OUT.img: files whose extents claim the far end of
# the 2^32-block logical space.  /wrap: its one extent (in the inode)
# starts at logical block 2^32 - 16 with 32 blocks, so it runs past
# 2^32 (ee_block + ee_len wraps), and its i_size claims 2^44 bytes (2^32
# blocks of 4 KiB).  /far: a valid-looking extent at 2^32 - 17 (1 block)
# and i_size 2^44 too: a sparse file whose hole spans ~2^32 blocks.
# Reading near either end must cost one lookup, not a loop over 2^32
# blocks.  /keep is healthy.  16 MiB, 4 KiB blocks, metadata_csum (debugfs
# set_inode_field rewrites the inode checksum; i_block[3] is ee_block of
# the first extent, i_block[4] is ee_len | ee_start_hi << 16).
set -euo pipefail
out=${1:?usage: mk_extent_huge_claim.sh OUT.img}
. "$(dirname "$0")/mk_lib.inc"
mk_need mke2fs debugfs dumpe2fs
mk_scratch
mkdir -p "$tmp/root"
head -c 8192 /dev/zero | tr '\0' 'w' > "$tmp/root/wrap"
head -c 4096 /dev/zero | tr '\0' 'f' > "$tmp/root/far"
echo "kept" > "$tmp/root/keep"
rm -f "$out"; truncate -s 16M "$out"
mke2fs -q -F -t ext4 -b 4096 -O metadata_csum,huge_file -d "$tmp/root" "$out"
# /wrap's 2 blocks become 32: mark the 30 it gains in the block bitmap and
# in i_blocks, so that the claim past 2^32 is the image's only damage (a
# bitmap that leaves claimed blocks free is another builder's case, and
# any allocator, the kernel's too, would hand them out again).
wstart=$(debugfs -R "bmap /wrap 0" "$out" 2> /dev/null)
[ -n "$wstart" ] && [ "$wstart" -gt 0 ] ||
	{ echo "mk_extent_huge_claim.sh: no block for /wrap" >&2; exit 1; }
g0free=$(dumpe2fs "$out" 2> /dev/null | awk '/^Group 0:/ {g=1} g && /free blocks,/ {print $1; exit}')
sbfree=$(dumpe2fs -h "$out" 2> /dev/null | awk -F: '/^Free blocks:/ {print $2+0}')
debugfs -w -f - "$out" > /dev/null 2>&1 << EOC
setb $((wstart + 2)) 30
set_bg 0 free_blocks_count $((g0free - 30))
set_bg 0 checksum calc
ssv free_blocks_count $((sbfree - 30))
sif /wrap blocks 256
sif /wrap block[3] 0xfffffff0
sif /wrap block[4] 32
sif /wrap size 0x100000000000
sif /far block[3] 0xffffffef
sif /far size 0x100000000000
EOC
for f in wrap far; do
	debugfs -R "stat /$f" "$out" 2> /dev/null | grep -q "Size: 17592186044416" ||
		{ echo "mk_extent_huge_claim.sh: debugfs did not set /$f" >&2; exit 1; }
done
w=$(debugfs -R "stat /wrap" "$out" 2> /dev/null | awk '/^Inode:/ {print $2; exit}')
f=$(debugfs -R "stat /far" "$out" 2> /dev/null | awk '/^Inode:/ {print $2; exit}')
echo "inode $w (/wrap): extent at logical 2^32-16, 32 blocks (wraps past 2^32), i_size 2^44; inode $f (/far): extent at 2^32-17, i_size 2^44"
