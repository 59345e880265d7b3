#!/bin/bash
# mk_meta_itable_on_gdt.sh OUT.img: group 2's inode table starts at the
# primary group descriptor block (block 1).
set -u
. "$(dirname "$0")/meta_common.inc"
[ $# = 1 ] || { echo "usage: $0 OUT.img"; exit 2; }
meta_multigroup "$1"
set_bg_csum "$1" 2 inode_table 1
echo "group 2: inode table at block 1, over the group descriptors"
