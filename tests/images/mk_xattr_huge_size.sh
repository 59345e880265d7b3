#!/bin/bash
# mk_xattr_huge_size.sh OUT.img: xattr values that claim huge sizes.
# /ea: its user.big value lives in an EA inode (ea_inode feature), whose
# i_size is set to 2^40 while the entry says 4096.  /inl: its in-inode
# user.small entry's e_value_size is 0xfffffff0 (far past the inode).
# Getting either value must refuse it (EUCLEAN) or return at most what the
# entry says, never allocate or read 2^32..2^40 bytes.  /keep is healthy.
# 64 MiB, 4 KiB blocks, no metadata_csum (the in-inode entry is edited
# with dd; 256-byte inodes, i_extra_isize 32: the entry's e_value_size is
# at byte 128 + 32 + 4 + 8 of the inode).
set -euo pipefail
out=${1:?usage: mk_xattr_huge_size.sh OUT.img}
. "$(dirname "$0")/mk_lib.inc"
mk_need mke2fs debugfs dd
mk_scratch
rm -f "$out"; truncate -s 64M "$out"
mke2fs -q -F -t ext4 -b 4096 -I 256 -O ea_inode,^metadata_csum "$out"
echo "hello" > "$tmp/data"
awk 'BEGIN { for (i = 0; i < 4096; i++) printf "%c", 65 + (i * 7) % 26 }' > "$tmp/value"
debugfs -w "$out" > "$tmp/log" 2>&1 << DBG
write $tmp/data ea
write $tmp/data inl
write $tmp/data keep
ea_set -f $tmp/value /ea user.big
ea_set /inl user.small tiny
DBG
ea=$(debugfs -R "inode_dump -x /ea" "$out" 2> /dev/null | sed -n 's/.*value_inum = \([0-9]*\).*/\1/p' | head -1)
[ -n "$ea" ] && [ "$ea" != 0 ] || { cat "$tmp/log"; echo "mk_xattr_huge_size.sh: no EA inode for /ea" >&2; exit 1; }
e2fsck -fy "$out" > /dev/null 2>&1 || [ $? -le 1 ] || { echo "mk_xattr_huge_size.sh: e2fsck -fy failed" >&2; exit 1; }
debugfs -w -R "sif <$ea> size 0x10000000000" "$out" > /dev/null 2>&1
# The in-inode entry: "located at block B, offset 0xO" of /inl.
loc=$(debugfs -R "imap /inl" "$out" 2> /dev/null | sed -n 's/.*located at block \([0-9]*\), offset \(0x[0-9a-f]*\).*/\1 \2/p')
read -r blk off <<< "$loc"
[ -n "$blk" ] || { echo "mk_xattr_huge_size.sh: no location for /inl" >&2; exit 1; }
pos=$((blk * 4096 + off + 128 + 32 + 4 + 8))
printf '\360\377\377\377' | dd of="$out" bs=1 seek=$pos conv=notrunc status=none
inl=$(debugfs -R "stat /inl" "$out" 2> /dev/null | awk '/^Inode:/ {print $2; exit}')
echo "inode $ea (EA inode of /ea): i_size 2^40 (entry says 4096); inode $inl (/inl): in-inode entry e_value_size 0xfffffff0"
