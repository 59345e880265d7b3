#!/bin/bash
# mk_dir_huge_size.sh OUT.img: a directory (/d, 3 names) whose i_size
# claims 2^40 bytes (2^28 blocks of 4 KiB) while it has one block: listing
# it must stop at its last mapped block or refuse it, not walk 2^28
# holes.  /keep is a healthy file.  16 MiB, 4 KiB blocks, metadata_csum
# (debugfs's set_inode_field keeps the inode checksum right).
set -euo pipefail
out=${1:?usage: mk_dir_huge_size.sh OUT.img}
. "$(dirname "$0")/mk_lib.inc"
mk_need mke2fs debugfs
mk_scratch
mkdir -p "$tmp/root/d"
for n in a b c; do echo "$n" > "$tmp/root/d/$n"; done
echo "kept" > "$tmp/root/keep"
rm -f "$out"; truncate -s 16M "$out"
mke2fs -q -F -t ext4 -b 4096 -O metadata_csum -d "$tmp/root" "$out"
debugfs -w -R "sif /d size 0x10000000000" "$out" > /dev/null 2>&1
ino=$(debugfs -R "stat /d" "$out" 2> /dev/null | awk '/^Inode:/ {print $2; exit}')
debugfs -R "stat /d" "$out" 2> /dev/null | grep -q "Size: 1099511627776" ||
	{ echo "mk_dir_huge_size.sh: debugfs did not set the size" >&2; exit 1; }
echo "inode $ino (/d): directory i_size 2^40 bytes with 1 block"
