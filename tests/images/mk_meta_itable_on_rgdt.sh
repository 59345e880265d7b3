#!/bin/bash
# mk_meta_itable_on_rgdt.sh OUT.img: group 2's inode table starts inside the
# reserved GDT blocks after the primary descriptors.
set -u
. "$(dirname "$0")/meta_common.inc"
[ $# = 1 ] || { echo "usage: $0 OUT.img"; exit 2; }
meta_multigroup "$1"
rgdt=$(sb_field "$1" "Reserved GDT blocks")
[ "${rgdt:-0}" -gt 4 ] || { echo "the base image has no reserved GDT blocks"; exit 1; }
# 4 KiB blocks, 3 groups: one descriptor block (1), reserved from block 2.
set_bg_csum "$1" 2 inode_table 3
echo "group 2: inode table at block 3, inside the $rgdt reserved GDT blocks"
