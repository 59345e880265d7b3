#!/bin/bash
# mk_extent_too_deep.sh OUT.img [file|list] - a file (/bad, inode printed)
# whose extent tree is deeper than the maximum: its root (depth 1) points
# to a leaf block whose header claims depth 6 (EXT4_MAX_EXTENT_DEPTH is 5),
# so reading, truncating or freeing it meets corruption below the inode
# (the inode itself passes the kernel's iget checks).  Besides it, /keep
# (a small file) and /dir/keep2 are intact.  Orphans go to the orphan file
# (file, default) or the legacy s_last_orphan list (list).  64 MiB, 1 KiB
# blocks, no metadata_csum (the leaf header is edited with dd).
set -e
out=${1:?usage: mk_extent_too_deep.sh OUT.img [file|list]}
fmt=${2:-file}
for t in mke2fs debugfs dd; do
	command -v $t > /dev/null || { echo "SKIP: no $t"; exit 77; }
done
case $fmt in
file) feat=orphan_file ;;
list) feat=^orphan_file ;;
*) echo "mk_extent_too_deep.sh: format must be file or list" >&2; exit 2 ;;
esac
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
rm -f "$out"
truncate -s 64M "$out"
mke2fs -q -t ext4 -b 1024 -O "^metadata_csum,$feat" -F "$out"
# Eight 2 KiB runs 10 KiB apart: nine extents, more than the inode's four,
# so the tree gets a leaf block.
: > "$tmp/sparse"
for i in 0 1 2 3 4 5 6 7; do
	dd if=/dev/urandom of="$tmp/sparse" bs=1024 count=2 seek=$((i * 10)) conv=notrunc 2> /dev/null
done
echo "kept data" > "$tmp/keep"
head -c 5000 /dev/urandom > "$tmp/keep2"
debugfs -w -f - "$out" > /dev/null 2>&1 << EOC
write $tmp/sparse bad
write $tmp/keep keep
mkdir dir
write $tmp/keep2 dir/keep2
EOC
ino=$(debugfs -R "stat /bad" "$out" 2> /dev/null | sed -n 's/^Inode: *\([0-9]*\).*/\1/p')
leaf=$(debugfs -R "dump_extents /bad" "$out" 2> /dev/null | awk '$1 == "0/" {print $8; exit}')
[ -n "$ino" ] && [ -n "$leaf" ] || { echo "mk_extent_too_deep.sh: no leaf block for /bad" >&2; exit 1; }
# eh_depth is the le16 at byte 6 of the node header.
printf '\006\000' | dd of="$out" bs=1 seek=$((leaf * 1024 + 6)) conv=notrunc 2> /dev/null
echo "inode $ino (/bad): extent leaf block $leaf claims depth 6 (max 5); orphans: $fmt"
