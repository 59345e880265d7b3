#!/bin/bash
# mk_meta_bitmap_past_end.sh OUT.img: group 1's inode bitmap 100 blocks past
# the end of the file system.
set -u
. "$(dirname "$0")/meta_common.inc"
[ $# = 1 ] || { echo "usage: $0 OUT.img"; exit 2; }
meta_multigroup "$1"
n=$(sb_field "$1" "Block count")
set_bg_csum "$1" 1 inode_bitmap $((n + 100))
echo "group 1: inode bitmap at block $((n + 100)), past the end ($n blocks)"
