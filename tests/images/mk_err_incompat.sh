#!/bin/bash
# mk_err_incompat.sh OUT.img: an incompat feature uext4 refuses (encrypt)
# on an otherwise healthy ext4 image: no mount, but `uext4 info` still
# shows the superblock (tests/errors.sh).
set -euo pipefail
out=${1:?usage: mk_err_incompat.sh OUT.img}
. "$(dirname "$0")/mk_lib.inc"
mk_need mke2fs debugfs
rm -f "$out"; truncate -s 16M "$out"
mke2fs -q -F -t ext4 -b 4096 "$out"
debugfs -w -R "feature encrypt" "$out" > /dev/null 2>&1
echo "incompat feature encrypt set (refused by uext4)"
