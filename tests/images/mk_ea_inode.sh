#!/bin/bash
# mk_ea_inode.sh OUT.img: an ext4 image (4 KiB blocks) with the ea_inode
# feature whose file /f has a 4096-byte user.big value, too large for the
# inode and for an xattr block, so it lives in an EA inode (made by
# debugfs, i.e. e2fsprogs' ext2fs_xattr_set, with its reference count and
# hash; debugfs's ea_set -f reads at most one block).  /g has a small
# xattr.  Deleting /f must free the EA inode.
set -euo pipefail
out=${1:?usage: mk_ea_inode.sh OUT.img}
. "$(dirname "$0")/mk_lib.inc"
mk_need mke2fs debugfs
mk_scratch
rm -f "$out"
truncate -s 64M "$out"
mke2fs -q -F -t ext4 -b 4096 -O ea_inode "$out" > "$tmp/mke2fs.err" 2>&1 || { cat "$tmp/mke2fs.err"; exit 1; }
echo "hello" > "$tmp/data"
# A fixed 4 KiB value, the same on every build.
awk 'BEGIN { for (i = 0; i < 4096; i++) printf "%c", 65 + (i * 7) % 26 }' > "$tmp/value"
debugfs -w "$out" > "$tmp/log" 2>&1 <<DBG
write $tmp/data f
write $tmp/data g
ea_set -f $tmp/value /f user.big
ea_set /g user.small tiny
DBG
if ! debugfs -R "inode_dump -x /f" "$out" 2> /dev/null |
	grep -q 'value_inum = [1-9][0-9]*, value_size = 4096'; then
	cat "$tmp/log"
	echo "mk_ea_inode.sh: debugfs did not put the value in an EA inode"
	exit 1
fi
# e2fsprogs 1.47.0's ext2fs_xattr_set does not charge the owner's i_blocks
# for the value, which its own e2fsck expects (as the kernel does): let
# e2fsck fix that, so the image starts clean.
e2fsck -fy "$out" > /dev/null 2>&1 || [ $? -le 1 ] || { echo "mk_ea_inode.sh: e2fsck -fy failed"; exit 1; }
echo "ea_inode file system: /f has a 4 KiB user.big value in an EA inode (set by debugfs)"
