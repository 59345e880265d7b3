#!/bin/bash
# enospc.sh - fill small images until ENOSPC (tests/enospc.c): 8 MiB (1K
# blocks), 16 MiB with 4K blocks, 8 MiB with only 64 inodes, and the
# reserved-blocks check (mke2fs -m 5: a non-root caller stops at the
# reserve, root can still write), and one write into space an
# uncommitted unlink freed (busy blocks: the write must not stop short).  Every image ends e2fsck -fn clean.
# ENOSPC_SEED=N replays.
# test-timeout: 600
set -uo pipefail
. "$(dirname "$0")/lib.sh"
helper_test BIN enospc
dir=$(mktemp_dir)
test_seed enospc ENOSPC_SEED
rc=0
run() { # run NAME MODE SIZE MKE2FS-OPTIONS...
	local name=$1 mode=$2 size=$3 img=$dir/$1.img
	shift 3
	note "$name: mke2fs $* ($size), enospc $mode"
	mke2fs -q -F "$@" "$img" "$size" || fail "mke2fs $*"
	"$BIN" "$mode" "$img" "$SEED" || { echo "FAIL: $name (seed $SEED)"; rc=1; }
	fsck_clean "$img" || rc=1
	rm -f "$img"
}
run small   fill     8M  -t ext4
run small4k fill     16M -t ext4 -b 4096
run inodes  fill     8M  -t ext4 -N 64
run ext3    fill     8M  -t ext3
run reserve reserved 16M -t ext4 -m 5
run busy    busy     32M -t ext4 -m 0
[ $rc = 0 ] && echo "enospc.sh: all pass (seed $SEED)"
exit $rc
