#!/bin/bash
# mk_htree_bad_leaves.sh OUT.img - /h is an htree directory of 200 names
# whose leaf blocks are all damaged (first entry's rec_len 0), its root
# intact: an insert hashes to a leaf and fails only after the new inode
# was taken (mkdir /h/new).  /file and /dir are healthy.
set -e
out=${1:?usage: mk_htree_bad_leaves.sh OUT.img}
. "$(dirname "$0")/mk_lib.inc"
mk_need mke2fs debugfs e2fsck dd
rm -f "$out"
mke2fs -q -F -t ext4 -b 1024 "$out" 8M >/dev/null
echo healthy > "$out.tmp"
{
	echo "write $out.tmp file"
	echo "mkdir dir"
	echo "mkdir h"
	echo "cd h"
	for i in $(seq 1 200); do echo "mknod name_with_some_length_$i p"; done
} | debugfs -w -f - "$out" >/dev/null 2>&1
rm -f "$out.tmp"
e2fsck -fyD "$out" >/dev/null 2>&1 || true
blocks=$(debugfs -R "blocks h" "$out" 2>/dev/null)
n=0
for b in ${blocks#* }; do   # every block but the first (the dx root)
	printf '\0\0\0\0\0\0' | dd of="$out" bs=1 seek=$((b * 1024)) conv=notrunc status=none
	n=$((n + 1))
done
echo "inode $(debugfs -R 'stat h' "$out" 2>/dev/null | awk '/^Inode:/ {print $2; exit}'): htree directory /h with its $n leaf blocks damaged (rec_len 0)"
