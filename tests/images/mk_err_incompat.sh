#!/bin/bash
# mk_err_incompat.sh OUT.img: an incompat feature uext4 refuses (encrypt)
# on an otherwise healthy ext4 image: no mount, but `uext4 info` still
# shows the superblock (tests/errors.sh).
set -euo pipefail
out=${1:?usage: mk_err_incompat.sh OUT.img}
for t in mke2fs debugfs; do
	command -v $t > /dev/null || { echo "SKIP: $t missing"; exit 77; }
done
rm -f "$out"; truncate -s 16M "$out"
mke2fs -q -F -t ext4 -b 4096 "$out"
debugfs -w -R "feature encrypt" "$out" > /dev/null 2>&1
echo "incompat feature encrypt set (refused by uext4)"
