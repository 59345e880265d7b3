#!/bin/bash
# mk_htree_deep.sh OUT.img: an htree directory (/big, 300 names) whose
# dx_root claims 7 indirect levels (the format allows 1, or 2 with
# large_dir, which this image has).  Lookups and listing must refuse it
# (or fall back to a linear scan), never descend 7 levels.  /ok is a
# healthy file.  16 MiB, 4 KiB blocks, no metadata_csum (the root block
# is edited with dd: dx_root_info.indirect_levels is byte 30 of block 0).
set -euo pipefail
out=${1:?usage: mk_htree_deep.sh OUT.img}
. "$(dirname "$0")/mk_lib.inc"
mk_need mke2fs debugfs e2fsck dd
mk_scratch
mkdir -p "$tmp/root/big"
for ((i = 0; i < 300; i++)); do : > "$tmp/root/big/name_with_some_length_$i"; done
echo hello > "$tmp/root/ok"
rm -f "$out"; truncate -s 16M "$out"
mke2fs -q -F -t ext4 -b 4096 -O ^metadata_csum,large_dir -d "$tmp/root" "$out"
e2fsck -fyD "$out" > /dev/null 2>&1 || [ $? -le 2 ]   # index /big
debugfs -R "htree big" "$out" 2> /dev/null | grep -q "Number of entries" ||
	{ echo "mk_htree_deep.sh: /big is not an htree directory" >&2; exit 1; }
b=$(debugfs -R "bmap big 0" "$out" 2> /dev/null)
printf '\007' | dd of="$out" bs=1 seek=$((b * 4096 + 30)) conv=notrunc status=none
ino=$(debugfs -R "stat big" "$out" 2> /dev/null | awk '/^Inode:/ {print $2; exit}')
echo "inode $ino (/big): htree root (block $b) claims 7 indirect levels (large_dir allows 2)"
