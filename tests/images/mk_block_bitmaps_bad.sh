#!/bin/bash
# mk_block_bitmaps_bad.sh OUT.img - every group's block bitmap fails its
# checksum (one byte flipped in a bitmap's unused tail): any block
# allocation fails, so mkdir fails after it took an inode.
# The inode bitmaps and the tree (/file, /dir) are healthy.
set -e
out=${1:?usage: mk_block_bitmaps_bad.sh OUT.img}
. "$(dirname "$0")/mk_lib.inc"
mk_need mke2fs debugfs dumpe2fs dd
rm -f "$out"
mke2fs -q -F -t ext4 -b 1024 "$out" 16M >/dev/null
echo healthy > "$out.tmp"
printf 'write %s file\nmkdir dir\n' "$out.tmp" | debugfs -w -f - "$out" >/dev/null 2>&1
rm -f "$out.tmp"
n=0
for b in $(dumpe2fs "$out" 2>/dev/null | sed -n 's/^ *Block bitmap at \([0-9]*\).*/\1/p'); do
	printf '\125' | dd of="$out" bs=1 seek=$((b * 1024 + 1020)) conv=notrunc status=none
	n=$((n + 1))
done
echo "block bitmaps of all $n groups fail their checksum"
