#!/bin/bash
# mk_badblocks_bogus.sh OUT.img: the bad-blocks inode (inode 1) has
# garbage in its block map: a direct pointer past the end of the file
# system and a single-indirect pointer to the first free block, which
# holds random numbers (outside the file system) between pointers to the
# free blocks after it, where the next file would go.  Writes must be
# refused, naming inode 1.
set -euo pipefail
out=${1:?usage: mk_badblocks_bogus.sh OUT.img}
. "$(dirname "$0")/mk_lib.inc"
mk_need mke2fs debugfs
mk_scratch
mk_fs "$out" 8M -t ext4 -b 1024
echo hello > "$tmp/hello"
debugfs -w -R "write $tmp/hello hello.txt" "$out" > /dev/null 2>&1
ind=$(debugfs -R "ffb 1" "$out" 2> /dev/null | sed 's/.*found: //; s/ *$//')
[ -n "$ind" ] || { echo "mk_badblocks_bogus.sh: no free block"; exit 1; }
# 256 little-endian pointers: even ones to the blocks after $ind, odd ones
# fixed pseudo-random numbers (the same on every build).
awk -v ind="$ind" 'function le(v,   k) { for (k = 0; k < 4; k++) { printf "%c", v % 256; v = int(v / 256) } }
	BEGIN { srand(29); for (i = 0; i < 256; i++) le(i % 2 ? int(rand() * 4294967295) : ind + 1 + i / 2) }' > "$tmp/garbage"
dd if="$tmp/garbage" of="$out" bs=1024 seek="$ind" count=1 conv=notrunc status=none
debugfs -w -f - "$out" > /dev/null 2>&1 <<DBG
sif <1> block[0] 4000000
sif <1> block[IND] $ind
sif <1> blocks 6
sif <1> size 3072
DBG
echo "bad-blocks inode 1: block map with a pointer past the end and a garbage indirect block $ind"
