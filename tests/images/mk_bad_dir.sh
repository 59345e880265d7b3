#!/bin/bash
# mk_bad_dir.sh OUT.img - a directory /bad whose i_size is 0 and whose
# extent tree maps nothing; /file and /dir are healthy.
set -e
out=${1:?usage: mk_bad_dir.sh OUT.img}
. "$(dirname "$0")/mk_lib.inc"
mk_need mke2fs debugfs
mk_healthy "$out" <<CMDS
mkdir bad
sif bad size 0
sif bad block[3] 0
sif bad block[4] 0
sif bad block[5] 0
sif bad block[2] 0xF30A
sif bad blocks 0
CMDS
echo "inode $(mk_ino "$out" bad): directory /bad of size 0 with no blocks"
