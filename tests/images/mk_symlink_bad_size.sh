#!/bin/bash
# mk_symlink_bad_size.sh OUT.img - the fast symlink /link ("hello.txt")
# says i_size 3, shorter than its target string: a corrupt symlink (every operation on it must take the same validity check).
set -eu
out=${1:?usage: mk_symlink_bad_size.sh OUT.img}
. "$(dirname "$0")/mk_lib.inc"
mk_need mke2fs debugfs
mk_scratch
t=$tmp/tree
mkdir -p "$t/dir"
echo hello > "$t/hello.txt"
for f in a b c; do echo "$f" > "$t/dir/$f"; done
ln -s hello.txt "$t/link"
mke2fs -q -F -t ext4 -b 4096 -N 2048 -d "$t" "$out" 16M > "$tmp/mke2fs.log" 2>&1 || { cat "$tmp/mke2fs.log"; exit 1; }
debugfs -w -R "sif /link size 3" "$out" > /dev/null 2>&1
debugfs -R "stat /link" "$out" 2> /dev/null | grep -q "Size: 3$" ||
	{ echo "mk_symlink_bad_size: sif did not take"; exit 1; }
echo "fast symlink /link to 'hello.txt' with i_size 3"
