#!/bin/bash
# crash.sh - crash-state exploration (tests/crash.c) on small images:
#   4k        mke2fs -t ext4 -O orphan_file (metadata_csum), 4 KiB blocks, 16 MiB
#   1k        the same with 1 KiB blocks, 8 MiB
#   nocsum    -O ^metadata_csum,orphan_file, 4 KiB blocks, 16 MiB
#   legacy    no orphan_file (legacy orphan list), 1 KiB blocks, 8 MiB
# First a self-test of bdev_open_overlay (crash -O).  Each workload is recorded on a crash-recording device, then every flush
# point and a random sample of subsets of each epoch is recovered by the
# library, checked with e2fsck -fn and for fsynced contents.
#
# Environment: CRASH_SEED=N replays a run (single-thread workloads record
# the same writes; threaded ones may differ), CRASH_MAX_STATES caps the
# states per workload (release 200, sanitizer builds 40), CRASH_CONFIGS
# picks configurations ("4k 1k nocsum legacy"), CRASH_WORKLOADS the
# workloads ("all").  Failing crash images are kept in /tmp/uext4-crash-fail/.
# run-in: release asan-long
# test-timeout: 600
set -uo pipefail
. "$(dirname "$0")/lib.sh"
helper_test BIN crash e2fsck
scratch_on_tmpfs
dir=$(mktemp_dir)
test_seed crash CRASH_SEED
case "$UEXT4_BUILD" in
*asan* | *tsan*) MAX=${CRASH_MAX_STATES:-40} ;;
*) MAX=${CRASH_MAX_STATES:-200} ;;
esac
CONFIGS=${CRASH_CONFIGS:-4k 1k nocsum legacy}
echo "crash.sh: at most $MAX states per workload"

config() { # config NAME -> "SIZE WORKLOADS | MKE2FS-OPTIONS"
	case $1 in
	4k) echo "16M all|-t ext4 -O orphan_file -b 4096" ;;
	1k) echo "8M all|-t ext4 -O orphan_file -b 1024" ;;
	nocsum) echo "16M create_fsync rename unlink_open truncate threads|-t ext4 -O ^metadata_csum,orphan_file -b 4096" ;;
	legacy) echo "8M unlink_open first_orphan truncate dirgrow threads threads_dir|-t ext4 -O ^orphan_file -b 1024" ;;
	*) return 1 ;;
	esac
}

rc=0 total=0 passed=0
"$BIN" -s "$SEED" -O || { echo "FAIL: overlay self-test (seed $SEED)"; rc=1; }
for cfg in $CONFIGS; do
	spec=$(config "$cfg") || fail "unknown configuration $cfg"
	mkfs=${spec#*|}
	spec=${spec%%|*}
	size=${spec%% *}
	wls=${CRASH_WORKLOADS:-${spec#* }}
	img=$dir/$cfg.img
	note "$cfg: mke2fs $mkfs ($size); workloads: $wls"
	# shellcheck disable=SC2086
	mke2fs -q -F $mkfs "$img" "$size" || fail "mke2fs $mkfs"
	fsck_clean "$img" || fail "fresh $cfg image is not clean"
	# shellcheck disable=SC2086
	"$BIN" -s "$SEED" -m "$MAX" "$img" $wls > "$dir/out" 2>&1
	r=$?
	cat "$dir/out"
	line=$(grep '^crash: .* crash states checked' "$dir/out" | tail -1)
	n=$(echo "$line" | sed -n 's/.* \([0-9]*\) crash states checked, \([0-9]*\) pass.*/\1/p')
	p=$(echo "$line" | sed -n 's/.* \([0-9]*\) crash states checked, \([0-9]*\) pass.*/\2/p')
	total=$((total + ${n:-0}))
	passed=$((passed + ${p:-0}))
	if [ $r != 0 ]; then
		echo "FAIL: configuration $cfg (seed $SEED)"
		rc=1
	fi
	fsck_clean "$img" || rc=1   # the template itself is never written
done
echo "crash.sh: $total crash states checked, $passed pass, $((total - passed)) fail (seed $SEED)"
exit $rc
