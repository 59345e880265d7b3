#!/bin/bash
# mk_extent_root_too_deep.sh OUT.img - /big's in-inode extent header says depth
# 6, above the maximum of 5 (rm must fail with the
# corruption message, and orphan cleanup must not wedge on it).
set -eu
out=${1:?usage: mk_extent_root_too_deep.sh OUT.img}
. "$(dirname "$0")/mk_lib.inc"
mk_need mke2fs debugfs
mk_scratch
t=$tmp/tree
mkdir -p "$t/dir"
echo hello > "$t/hello.txt"
for f in a b c; do echo "$f" > "$t/dir/$f"; done
yes 0123456789abcdef | head -c 200000 > "$t/big"
mke2fs -q -F -t ext4 -b 4096 -N 2048 -d "$t" "$out" 16M > "$tmp/mke2fs.log" 2>&1 || { cat "$tmp/mke2fs.log"; exit 1; }
# i_block[1] = eh_max (4) | eh_depth << 16
debugfs -w -R "sif /big block[1] 0x00060004" "$out" > /dev/null 2>&1
debugfs -R "id /big" "$out" 2> /dev/null | grep -q "^0040 .* 0af3 0100 0400 0600" ||
	{ echo "mk_extent_root_too_deep: sif did not take"; exit 1; }
echo "/big's extent tree claims depth 6 (the maximum is 5)"
