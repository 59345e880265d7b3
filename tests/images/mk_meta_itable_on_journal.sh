#!/bin/bash
# mk_meta_itable_on_journal.sh OUT.img: group 2's inode table inside the
# internal journal.
set -u
. "$(dirname "$0")/meta_common.inc"
[ $# = 1 ] || { echo "usage: $0 OUT.img"; exit 2; }
meta_multigroup "$1"
j=$(journal_first "$1")
[ -n "$j" ] && [ "$j" -gt 0 ] || { echo "no journal block found"; exit 1; }
set_bg_csum "$1" 2 inode_table $((j + 100))
echo "group 2: inode table at block $((j + 100)), inside the journal (from block $j)"
