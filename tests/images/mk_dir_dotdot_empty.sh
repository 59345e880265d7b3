#!/bin/bash
# mk_dir_dotdot_empty.sh OUT.img: directory /d (linear, one block, with
# a file and a subdirectory) whose ".." entry is empty (inode 0).
# An insert must not put the new name in its place, where e2fsck wants
# "..". No metadata_csum: the entry is edited in place.
set -euo pipefail
out=${1:?usage: mk_dir_dotdot_empty.sh OUT.img}
for t in mke2fs debugfs dd; do
	command -v "$t" > /dev/null || { echo "SKIP: $t not installed"; exit 77; }
done
tmp=$(mktemp -d "${TMPDIR:-/tmp}/mk_dir_dots.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
rm -f "$out"
: > "$out"   # an existing file: mke2fs -q prints nothing
mke2fs -q -F -t ext4 -O ^metadata_csum -b 1024 "$out" 8M
echo hello > "$tmp/hello"
debugfs -w -f - "$out" > /dev/null 2>&1 <<DBG
mkdir d
write $tmp/hello d/a
mkdir d/sub
write $tmp/hello hello.txt
DBG
b=$(debugfs -R "bmap /d 0" "$out" 2> /dev/null)
[ -n "$b" ] || { echo "mk_dir_dotdot_empty.sh: /d has no block 0"; exit 1; }
# The entry's inode field (the first 4 bytes of the entry), zeroed.
dd if=/dev/zero of="$out" bs=1 seek=$((b * 1024 + 12)) count=4 conv=notrunc status=none
echo "directory /d: its ".." entry in block $b is empty (inode 0)"
