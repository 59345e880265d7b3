#!/bin/bash
# mk_xattr_empty_value.sh OUT.img: an ea_inode file system (4 KiB blocks,
# 256-byte inodes) whose file /f has xattr entries of value size 0
# (e_value_size 0, e_value_inum 0; e_value_offs at the end of the region,
# as e2fsprogs writes them) in the inode body, beside a 4 KiB user.big
# value in an EA inode and a 100-byte value in its xattr block; clean to
# e2fsck.  chmod, chown and setfattr on /f must keep the
# empty entries valid.
set -euo pipefail
out=${1:?usage: mk_xattr_empty_value.sh OUT.img}
. "$(dirname "$0")/mk_lib.inc"
mk_need mke2fs debugfs e2fsck
mk_scratch
rm -f "$out"
truncate -s 64M "$out"
mke2fs -q -F -t ext4 -b 4096 -I 256 -O ea_inode "$out" > "$tmp/mke2fs.err" 2>&1 || { cat "$tmp/mke2fs.err"; exit 1; }
echo hello > "$tmp/data"
# Fixed values, the same on every build.
awk 'BEGIN { for (i = 0; i < 4096; i++) printf "%c", 65 + (i * 7) % 26 }' > "$tmp/big"
awk 'BEGIN { for (i = 0; i < 100; i++) printf "%c", 97 + i % 26 }' > "$tmp/pad"
debugfs -w "$out" > "$tmp/log" 2>&1 <<DBG
write $tmp/data f
write $tmp/data g
ea_set -f $tmp/big /f user.big
ea_set /f user.empty ""
ea_set -f $tmp/pad /f user.pad
ea_set /f user.empty2 ""
ea_set /g user.empty ""
DBG
# e2fsprogs 1.47.0's ext2fs_xattr_set does not charge the owner's i_blocks
# for the EA inode's value (see mk_ea_inode.sh): e2fsck fixes that.
e2fsck -fy "$out" > /dev/null 2>&1 || [ $? -le 1 ] || { echo "mk_xattr_empty_value.sh: e2fsck -fy failed"; exit 1; }
n=$(debugfs -R "ea_list /f" "$out" 2> /dev/null | grep -c ' (0)$' || true)
[ "$n" = 2 ] || { cat "$tmp/log"; echo "mk_xattr_empty_value.sh: debugfs made $n empty values on /f, not 2"; exit 1; }
echo "ea_inode file system: /f has two xattrs of value size 0 beside a value in an EA inode; /g has one"
