#!/bin/bash
# mk_ibitmap_live_free.sh OUT.img - the inode bitmap marks a live inode
# (/dir/b: links 1, no dtime, in a directory) free (issue 9, case 9: the
# allocator must not hand it out again).
set -eu
out=${1:?usage: mk_ibitmap_live_free.sh OUT.img}
for t in mke2fs debugfs; do
	command -v $t > /dev/null || { echo "SKIP: $t not installed"; exit 77; }
done
tmp=$(mktemp -d "${TMPDIR:-/tmp}/mk_img.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
t=$tmp/tree
mkdir -p "$t/dir"
echo hello > "$t/hello.txt"
for f in a b c; do echo "$f" > "$t/dir/$f"; done
mke2fs -q -F -t ext4 -b 4096 -g 4096 -N 2048 -d "$t" "$out" 32M > "$tmp/mke2fs.log" 2>&1 || { cat "$tmp/mke2fs.log"; exit 1; }
debugfs -w -R "freei /dir/b" "$out" > /dev/null 2>&1
ino=$(debugfs -R "stat /dir/b" "$out" 2> /dev/null | awk '/^Inode:/ {print $2; exit}')
debugfs -R "testi /dir/b" "$out" 2>&1 | grep -q "is not in use" ||
	{ echo "mk_ibitmap_live_free: freei did not take"; exit 1; }
echo "inode bitmap marks live inode $ino (/dir/b) free"
