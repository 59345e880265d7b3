#!/bin/bash
# mk_no_ext_attr.sh OUT.img: an ext2 image made without the ext_attr feature
# and with 128-byte inodes (no room for xattrs in the inode), holding a
# file /f.  Setting an xattr needs an xattr block, and the feature must then
# be set, as the kernel does.
set -euo pipefail
out=${1:?usage: mk_no_ext_attr.sh OUT.img}
. "$(dirname "$0")/mk_lib.inc"
mk_need mke2fs debugfs
mk_scratch
rm -f "$out"
truncate -s 16M "$out"
mke2fs -q -F -t ext2 -O ^ext_attr -I 128 "$out" > "$tmp/mke2fs.err" 2>&1 || { cat "$tmp/mke2fs.err"; exit 1; }
echo "hello" > "$tmp/data"
debugfs -w -R "write $tmp/data f" "$out" > /dev/null 2>&1
echo "ext2 without the ext_attr feature, 128-byte inodes: an xattr needs a block and the feature"
