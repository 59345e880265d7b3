#!/bin/bash
# mk_dir_dotdot_empty.sh OUT.img: directory /d (linear, one block, with
# a file and a subdirectory) whose ".." entry is empty (inode 0).
# An insert must not put the new name in its place, where e2fsck wants
# "..". No metadata_csum: the entry is edited in place.
set -euo pipefail
out=${1:?usage: mk_dir_dotdot_empty.sh OUT.img}
. "$(dirname "$0")/mk_lib.inc"
mk_need mke2fs debugfs dd
b=$(mk_dir_entry_zeroed "$out" 12)
echo "directory /d: its ".." entry in block $b is empty (inode 0)"
