#!/bin/bash
# mk_err_rocompat.sh OUT.img: a read-only-compatible feature uext4 cannot
# write (an unknown bit, FEATURE_R31; verity is written since issue 32) on an image with a few files: a read-write mount is
# refused, reads (ls, stat, cat, getfattr) must work (tests/errors.sh).
set -euo pipefail
out=${1:?usage: mk_err_rocompat.sh OUT.img}
. "$(dirname "$0")/mk_lib.inc"
mk_need mke2fs debugfs
mk_scratch
echo hello > "$tmp/ok"
rm -f "$out"; truncate -s 16M "$out"
mke2fs -q -F -t ext4 -b 4096 "$out"
debugfs -w -f - "$out" > /dev/null 2>&1 <<EOC
write $tmp/ok ok
ea_set ok user.test value
mkdir dir
write $tmp/ok dir/inner
feature FEATURE_R31
EOC
echo "ro_compat feature FEATURE_R31 set (uext4 reads it but refuses to write)"
