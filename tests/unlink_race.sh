#!/bin/bash
# unlink_race.sh - tests/unlink_race.c (the unlink fast path against
# threads that open the inode by number while it goes) on a legacy
# orphan-list image and an orphan_file one; e2fsck -fn clean after each.
# Also run under TSan.  SEED=N replays (thread timing aside).
# test-timeout: 300
. "$(dirname "$0")/lib.sh"
setup_traps
P=$UEXT4_BUILD/tests/unlink_race
[ -x "$P" ] || skip "no $P: build first"
command -v mke2fs > /dev/null || skip "no mke2fs"
D=$(mktemp_dir)
SEED=${SEED:-$RANDOM}
echo "seed=$SEED"
rc=0
for opts in "-O ^orphan_file" "-O orphan_file"; do
	note "mke2fs -t ext4 $opts"
	mke2fs -q -F -t ext4 $opts "$D/r.img" 64M || fail "mke2fs $opts"
	"$P" "$D/r.img" "$SEED" || { echo "FAIL: unlink_race ($opts, seed $SEED)"; rc=1; }
	fsck_clean "$D/r.img" || { echo "FAIL: e2fsck -fn after unlink_race ($opts)"; rc=1; }
done
exit $rc
