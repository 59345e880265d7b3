#!/bin/bash
# mk_live_inode_free.sh OUT.img: the inode bitmap marks the live inode of
# /dir/a (links 1, no dtime) free; it is the lowest free inode, so the next
# create would take it.
set -u
. "$(dirname "$0")/meta_common.inc"
[ $# = 1 ] || { echo "usage: $0 OUT.img"; exit 2; }
meta_mkfs "$1" 16M -t ext4 -b 4096 -I 256
ino=$(debugfs -R "stat /dir/a" "$1" 2> /dev/null | awk '/^Inode:/ {print $2; exit}')
[ -n "$ino" ] || { echo "no inode for /dir/a"; exit 1; }
debugfs -w -R "freei <$ino>" "$1" > /dev/null 2>&1 || { echo "debugfs freei failed"; exit 1; }
free=$(debugfs -R "ffi" "$1" 2> /dev/null | awk '/^Free inode found:/ {print $4}')
[ "$free" = "$ino" ] || { echo "inode $ino is not the first free one ($free)"; exit 1; }
echo "inode $ino (/dir/a, live) is free in the inode bitmap of group 0"
