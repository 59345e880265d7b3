#!/bin/bash
# mk_badblocks_shared.sh OUT.img: the bad-blocks inode (inode 1) lists a
# block of /data (a 20 KiB file), so that block is claimed twice.  A write
# may go on, but freeing /data (rm, truncate) must leave that block in
# use, as inode 1 still lists it.
set -euo pipefail
out=${1:?usage: mk_badblocks_shared.sh OUT.img}
. "$(dirname "$0")/mk_lib.inc"
mk_need mke2fs debugfs
mk_hello_data "$out"
d=$(debugfs -R "bmap /data 0" "$out" 2> /dev/null)
[ -n "$d" ] || { echo "mk_badblocks_shared.sh: debugfs found no /data"; exit 1; }
debugfs -w -f - "$out" > /dev/null 2>&1 <<DBG
sif <1> block[0] $d
sif <1> blocks 2
sif <1> size 1024
DBG
echo "bad-blocks inode 1 lists block $d of /data"
