#!/bin/bash
# mk_ext2_no_ext_attr.sh OUT.img - a clean ext2 image without the ext_attr
# feature and with 128-byte inodes (no room for in-inode xattrs): the first
# xattr must set the feature, as the kernel does (issue 9, case 2).
set -eu
out=${1:?usage: mk_ext2_no_ext_attr.sh OUT.img}
for t in mke2fs dumpe2fs; do
	command -v $t > /dev/null || { echo "SKIP: $t not installed"; exit 77; }
done
tmp=$(mktemp -d "${TMPDIR:-/tmp}/mk_img.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
t=$tmp/tree
mkdir -p "$t/dir"
echo hello > "$t/hello.txt"
for f in a b c; do echo "$f" > "$t/dir/$f"; done
ln -s hello.txt "$t/link"
mke2fs -q -F -t ext2 -O ^ext_attr -I 128 -N 2048 -d "$t" "$out" 16M > "$tmp/mke2fs.log" 2>&1 || { cat "$tmp/mke2fs.log"; exit 1; }
dumpe2fs -h "$out" 2> /dev/null | grep "^Filesystem features:" | grep -qw ext_attr &&
	{ echo "mk_ext2_no_ext_attr: ext_attr is still set"; exit 1; }
echo "clean ext2 without ext_attr, 128-byte inodes (/hello.txt has no xattrs)"
