#!/bin/bash
# mk_bad_extent_header.sh OUT.img - a regular file /bad whose extent
# header (in i_block) has a wrong magic; /file and /dir are healthy.
set -e
out=${1:?usage: mk_bad_extent_header.sh OUT.img}
. "$(dirname "$0")/mk_lib.inc"
mk_need mke2fs debugfs
head -c 5000 /dev/zero | tr '\0' x > "$out.tmp2"
mk_healthy "$out" <<CMDS
write $out.tmp2 bad
sif bad block[0] 0x0001BEEF
CMDS
rm -f "$out.tmp2"
echo "inode $(mk_ino "$out" bad): regular file /bad with extent header magic 0xbeef"
