#!/bin/bash
# mk_meta_bbitmap_zero_1k.sh OUT.img: 1 KiB blocks; group 1's block bitmap
# at block 0, the boot block below the first data block (1), outside the
# file system.
set -u
. "$(dirname "$0")/meta_common.inc"
[ $# = 1 ] || { echo "usage: $0 OUT.img"; exit 2; }
meta_mkfs "$1" 32M -t ext4 -b 1024
set_bg_csum "$1" 1 block_bitmap 0
echo "group 1: block bitmap at block 0 (1 KiB blocks: the boot block, before the first data block)"
