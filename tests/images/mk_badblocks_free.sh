#!/bin/bash
# mk_badblocks_free.sh OUT.img: the bad-blocks inode (inode 1) lists
# three blocks the block bitmap marks free, the first free ones, where
# the next allocation would go.  Well-formed otherwise: writes may go on,
# but no allocator may hand out a listed block.
set -euo pipefail
out=${1:?usage: mk_badblocks_free.sh OUT.img}
. "$(dirname "$0")/mk_lib.inc"
mk_need mke2fs debugfs
mk_hello_data "$out"
# The first free blocks: where the next allocation goes.
read -r f1 f2 f3 < <(debugfs -R "ffb 3" "$out" 2> /dev/null | sed 's/.*found: //; s/ *$//')
[ -n "$f3" ] || { echo "mk_badblocks_free.sh: debugfs found no free block"; exit 1; }
debugfs -w -f - "$out" > /dev/null 2>&1 <<DBG
sif <1> block[0] $f1
sif <1> block[1] $f2
sif <1> block[2] $f3
sif <1> blocks 6
sif <1> size 3072
DBG
echo "bad-blocks inode 1 lists blocks $f1 $f2 $f3, free in the block bitmap"
