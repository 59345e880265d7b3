#!/bin/bash
# memlimit.sh - the memory limit holds: with the buffer cache
# limit at 8 MiB (uext4_opts.cache_bytes), 200,000 empty files created
# through the library (tests/memlimit.c, 1000 per directory) keep the
# process's peak RSS (VmHWM) under MEMLIMIT_BOUND_KIB.
#
# The bound: measured 79-81 MiB peak with an 8 MiB cache (release build,
# 2026-12-01); with the limit effectively off (cache_bytes = 1 GiB, or the
# 256 MiB default) the same workload peaks at 136-139 MiB.  The rest of the
# 80 MiB is the inode cache, the name cache and the allocator's arenas for
# 200k inodes.  Bound = 110 MiB: ~35% over the measurement, and well under
# the no-limit figure, so the test fails if the cache limit is ignored (it
# checks that too: a run with a 1 GiB cache must exceed the bound, else the
# bound proves nothing).
#
# Under ASan/TSan RSS is the sanitizer's shadow and quarantine, not ours:
# there the workload runs with 20,000 files and only correctness and
# e2fsck are checked, and the peak is printed, not asserted.
# test-timeout: 120
set -uo pipefail
. "$(dirname "$0")/lib.sh"
helper_test BIN memlimit mke2fs
dir=$(mktemp_dir)
img=$dir/a.img
BOUND=${MEMLIMIT_BOUND_KIB:-$((110 * 1024))}
NFILES=200000
sanitized && NFILES=20000
rc=0

peak() { # peak CACHE_BYTES: run the workload on a fresh image, print VmHWM KiB
	mke2fs -q -F -t ext4 -N 250000 "$img" 1G > /dev/null || fail "mke2fs"
	local out
	out=$("$BIN" "$img" "$NFILES" "$1") || { echo "$out" >&2; fail "memlimit workload (cache $1)"; }
	fsck_clean "$img" >&2 || fail "e2fsck after $NFILES creates (cache $1)"
	echo "$out" | awk '$1 == "vmhwm_kib" { print $2 }'
}

limited=$(peak $((8 << 20)))
note "cache 8 MiB, $NFILES files: peak RSS $limited KiB (bound $BOUND KiB)"
if sanitized; then
	echo "memlimit.sh: sanitizer build, bound not asserted; pass"
	exit 0
fi
[ "$limited" -lt "$BOUND" ] || { echo "FAIL: peak $limited KiB >= bound $BOUND KiB"; rc=1; }
unlimited=$(peak $((1 << 30)))
note "cache 1 GiB (limit effectively off): peak RSS $unlimited KiB"
[ "$unlimited" -gt "$BOUND" ] || { echo "FAIL: without the limit the peak ($unlimited KiB) is under the bound too: the bound does not test the limit"; rc=1; }
[ $rc = 0 ] && echo "memlimit.sh: pass (8 MiB cache: $limited KiB < $BOUND KiB < $unlimited KiB without limit)"
exit $rc
