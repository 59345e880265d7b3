#!/bin/bash
# mk_itable_unused_live.sh OUT.img - group 0's bg_itable_unused claims that
# inodes are unused which the inode bitmap and the directories show live
# (issue 9, case 3: the never-read shortcut must not zero their block).
set -eu
out=${1:?usage: mk_itable_unused_live.sh OUT.img}
for t in mke2fs debugfs dumpe2fs; do
	command -v $t > /dev/null || { echo "SKIP: $t not installed"; exit 77; }
done
tmp=$(mktemp -d "${TMPDIR:-/tmp}/mk_img.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
t=$tmp/tree
mkdir -p "$t/dir" "$t/sub/deep"
echo hello > "$t/hello.txt"
for f in a b c; do echo "$f" > "$t/dir/$f"; done
echo deep > "$t/sub/deep/f"
ln -s hello.txt "$t/link"
mke2fs -q -F -t ext4 -b 4096 -g 4096 -N 2048 -d "$t" "$out" 32M > "$tmp/mke2fs.log" 2>&1 || { cat "$tmp/mke2fs.log"; exit 1; }
ipg=$(dumpe2fs -h "$out" 2> /dev/null | awk '/^Inodes per group:/ {print $4}')
# Only the first 12 inodes "used": every file made from the tree is above.
# One debugfs session: a second one would open the damaged descriptors.
printf "set_bg 0 itable_unused $((ipg - 12))\nset_bg 0 checksum calc\n" > "$tmp/cmds"
debugfs -w -f "$tmp/cmds" "$out" > /dev/null 2>&1
[ "$(dumpe2fs "$out" 2> /dev/null | awk '/^Group 0:/ {g = 1} g && /unused inodes/ {print $(NF-2); exit}')" = $((ipg - 12)) ] ||
	{ echo "mk_itable_unused_live: set_bg did not take"; exit 1; }
echo "group 0's bg_itable_unused = $((ipg - 12)) claims live inodes 13+ (/dir, /hello.txt, /link, /sub) unused"
