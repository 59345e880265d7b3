#!/bin/bash
# mk_err_extent_deep.sh OUT.img: a file (/deep, inode 12) whose extent tree
# claims to be deeper than the maximum below its root: the root (depth 1,
# valid, so the inode loads) points to a leaf block whose header says depth
# 6 (at most 5 exist).  A write to it (append, truncate) meets the
# corruption inside its handle: the error-policy test's trigger
# (tests/errors.sh).  Also /ok (a healthy file with an xattr) and
# /dir/inner for reads that must keep working.  No metadata_csum: the leaf
# header is edited with dd.
set -euo pipefail
out=${1:?usage: mk_err_extent_deep.sh OUT.img}
. "$(dirname "$0")/mk_lib.inc"
mk_need mke2fs debugfs dd
mk_scratch
# Six 4 KiB runs with holes between them: more extents than the root's
# four, so the tree gets a leaf block.
: > "$tmp/deep"
for i in 0 1 2 3 4 5; do
	dd if=/dev/urandom of="$tmp/deep" bs=4096 count=1 seek=$((i * 3)) conv=notrunc 2> /dev/null
done
echo hello > "$tmp/ok"
rm -f "$out"; truncate -s 16M "$out"
mke2fs -q -F -t ext4 -b 4096 -O ^metadata_csum "$out"
debugfs -w -f - "$out" > /dev/null 2>&1 <<EOC
write $tmp/deep deep
write $tmp/ok ok
ea_set ok user.test value
mkdir dir
write $tmp/ok dir/inner
EOC
ino=$(debugfs -R 'stat deep' "$out" 2>/dev/null | awk '/^Inode:/ {print $2; exit}')
leaf=$(debugfs -R "dump_extents /deep" "$out" 2> /dev/null | awk '$1 == "0/" {print $8; exit}')
[ -n "$ino" ] && [ -n "$leaf" ] || { echo "mk_err_extent_deep.sh: no leaf block for /deep" >&2; exit 1; }
# eh_depth is the le16 at byte 6 of the node header.
printf '\006\000' | dd of="$out" bs=1 seek=$((leaf * 4096 + 6)) conv=notrunc 2> /dev/null
echo "inode $ino (/deep): extent leaf block $leaf claims depth 6 (the maximum is 5)"
