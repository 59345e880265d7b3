#!/bin/bash
# mk_itable_unused_live.sh OUT.img: group 0's bg_itable_unused claims that
# every inode past 12 was never used, while the inode bitmap marks inodes
# 12..24 (live files and directories) in use.  The first
# free inode (25) shares its inode-table block (inodes 17..32, 256-byte
# inodes, 4 KiB blocks) with live ones: a create that trusted the
# descriptor would build that block zeroed over them.
set -u
. "$(dirname "$0")/meta_common.inc"
[ $# = 1 ] || { echo "usage: $0 OUT.img"; exit 2; }
meta_mkfs "$1" 16M -t ext4 -b 4096 -I 256
ipg=$(sb_field "$1" "Inodes per group")
last=$(debugfs -R "ffi" "$1" 2> /dev/null | awk '/^Free inode found:/ {print $4 - 1}')
[ "$last" = 24 ] || { echo "expected inodes up to 24 in use, found ${last:-?}"; exit 1; }
set_bg_csum "$1" 0 itable_unused $((ipg - 12))
echo "group 0: bg_itable_unused $((ipg - 12)) says inodes 13..$ipg never used; the bitmap has 12..$last in use"
