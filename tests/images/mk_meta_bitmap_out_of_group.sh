#!/bin/bash
# mk_meta_bitmap_out_of_group.sh OUT.img: no flex_bg; group 1's block bitmap
# in group 2.
set -u
. "$(dirname "$0")/meta_common.inc"
[ $# = 1 ] || { echo "usage: $0 OUT.img"; exit 2; }
meta_multigroup "$1" -O ^flex_bg
blk=$((2 * 8192 + 4000))
set_bg_csum "$1" 1 block_bitmap $blk
echo "group 1: block bitmap at block $blk, in group 2 (no flex_bg)"
