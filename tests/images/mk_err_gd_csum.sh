#!/bin/bash
# mk_err_gd_csum.sh OUT.img: group descriptor 0's checksum (bg_checksum) is
# wrong, so a mount is refused while the superblock is fine: what
# `uext4 info` must still show (tests/errors.sh).
set -euo pipefail
out=${1:?usage: mk_err_gd_csum.sh OUT.img}
. "$(dirname "$0")/mk_lib.inc"
mk_need mke2fs dd od
rm -f "$out"; truncate -s 64M "$out"
mke2fs -q -F -t ext4 -b 4096 -O metadata_csum,64bit "$out"
# 4 KiB blocks: the descriptors start in block 1, 64 bytes each;
# bg_checksum is the 16 bits at 0x1E.
off=$((4096 + 0x1E))
v=$(od -An -tu2 -j $off -N2 "$out" | tr -d ' ')
v=$((v ^ 0x5a5a))
printf "$(printf '\\x%02x\\x%02x' $((v & 255)) $((v >> 8)))" |
	dd of="$out" bs=1 seek=$off conv=notrunc status=none
echo "group descriptor 0: bg_checksum flipped (0x$(printf %04x $v))"
