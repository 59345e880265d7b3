#!/bin/bash
# mk_meta_bitmap_out_of_flex.sh OUT.img: flex groups of 2; group 0's inode
# bitmap in group 2, past the end of its flex group (groups 0-1)
#.
set -u
. "$(dirname "$0")/meta_common.inc"
[ $# = 1 ] || { echo "usage: $0 OUT.img"; exit 2; }
meta_multigroup "$1" -G 2
blk=$((2 * 8192 + 4000))
set_bg_csum "$1" 0 inode_bitmap $blk
echo "group 0: inode bitmap at block $blk (group 2), outside its flex group 0 (groups 0-1)"
