#!/bin/bash
# mk_meta_bbitmap_zero.sh OUT.img: group 1's block bitmap at block 0, which
# on a 4 KiB file system is the primary superblock's block.
set -u
. "$(dirname "$0")/meta_common.inc"
[ $# = 1 ] || { echo "usage: $0 OUT.img"; exit 2; }
meta_multigroup "$1"
set_bg_csum "$1" 1 block_bitmap 0
echo "group 1: block bitmap at block 0 (the superblock's block, 4 KiB blocks)"
