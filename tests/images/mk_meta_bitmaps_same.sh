#!/bin/bash
# mk_meta_bitmaps_same.sh OUT.img: group 1's block bitmap at the block of its
# own inode bitmap.
set -u
. "$(dirname "$0")/meta_common.inc"
[ $# = 1 ] || { echo "usage: $0 OUT.img"; exit 2; }
meta_multigroup "$1"
ib=$(group_loc "$1" 1 "Inode bitmap")
[ -n "$ib" ] || { echo "no inode bitmap location for group 1"; exit 1; }
set_bg_csum "$1" 1 block_bitmap "$ib"
echo "group 1: block bitmap and inode bitmap both at block $ib"
