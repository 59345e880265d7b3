#!/bin/bash
# mk_err_htree_leaf.sh OUT.img: an htree directory (/big, 300 names) whose
# leaf blocks each have one byte of a name flipped, so their checksums fail:
# adding a name to it meets the damage inside the add's handle (the htree
# path looks the name up in its one leaf there), where the error policy
# applies (tests/errors.sh).  /ok is a healthy file.
set -euo pipefail
out=${1:?usage: mk_err_htree_leaf.sh OUT.img}
. "$(dirname "$0")/mk_lib.inc"
mk_need mke2fs debugfs e2fsck dd od
mk_scratch
mkdir -p "$tmp/root/big"
for ((i = 0; i < 300; i++)); do : > "$tmp/root/big/name_with_some_length_$i"; done
echo hello > "$tmp/root/ok"
rm -f "$out"; truncate -s 16M "$out"
mke2fs -q -F -t ext4 -b 4096 -O metadata_csum -d "$tmp/root" "$out"
e2fsck -fyD "$out" > /dev/null 2>&1 || [ $? -le 2 ]   # index /big
debugfs -R "htree big" "$out" 2>/dev/null | grep -q "Number of entries" ||
	{ echo "FAIL: /big is not an htree directory"; exit 1; }
nblk=$(( $(debugfs -R "stat big" "$out" 2>/dev/null | awk '/Size:/ {print $NF; exit}') / 4096 ))
for ((l = 1; l < nblk; l++)); do
	b=$(debugfs -R "bmap big $l" "$out" 2>/dev/null)
	off=$((b * 4096 + 22))   # in the first entries; any change fails the checksum
	v=$(od -An -tu1 -j $off -N1 "$out" | tr -d ' ')
	printf "$(printf '\\x%02x' $((v ^ 0x20)))" | dd of="$out" bs=1 seek=$off conv=notrunc status=none
done
echo "inode $(debugfs -R 'stat big' "$out" 2>/dev/null | awk '/^Inode:/ {print $2; exit}') (/big): htree leaf blocks 1-$((nblk - 1)) each with a flipped name byte (bad checksums)"
