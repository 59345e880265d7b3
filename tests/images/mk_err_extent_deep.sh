#!/bin/bash
# mk_err_extent_deep.sh OUT.img: a file whose extent tree claims to be deeper
# than the maximum (depth 6 in the root in i_block; at most 5 exist), so a
# write to it (append, truncate) meets corruption inside its handle: the
# error-policy test's trigger (tests/errors.sh).  Also /ok (a healthy file
# with an xattr) and /dir/inner for reads that must keep working.
set -euo pipefail
out=${1:?usage: mk_err_extent_deep.sh OUT.img}
for t in mke2fs debugfs; do
	command -v $t > /dev/null || { echo "SKIP: $t missing"; exit 77; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
head -c 20000 /dev/urandom > "$tmp/deep"
echo hello > "$tmp/ok"
rm -f "$out"; truncate -s 16M "$out"
mke2fs -q -F -t ext4 -b 4096 -O metadata_csum "$out"
debugfs -w -f - "$out" > /dev/null 2>&1 <<EOC
write $tmp/deep deep
write $tmp/ok ok
ea_set ok user.test value
mkdir dir
write $tmp/ok dir/inner
EOC
# i_block[1] is eh_max (low 16 bits) and eh_depth (high 16 bits): max 4,
# depth 6.  debugfs recomputes the inode checksum.
debugfs -w -R "sif deep block[1] 0x60004" "$out" > /dev/null 2>&1
echo "inode $(debugfs -R 'stat deep' "$out" 2>/dev/null | awk '/^Inode:/ {print $2; exit}') (/deep): extent tree depth 6 in the inode's root (the maximum is 5)"
