#!/bin/bash
# oom.sh - out of memory is an error, never a crash (tests/oom.c): the
# workload (mount, mkdir, create, write, rename, setxattr, unlink, umount)
# runs once for each N = 1.. with the Nth allocation failing, until it
# completes; each run must end in ENOMEM (not a crash or hang) and leave
# an image that is e2fsck -fn clean, or clean after recovery.
# OOM_START/OOM_STEP pick a subset of N (default every N from 1).
# test-timeout: 120
set -uo pipefail
. "$(dirname "$0")/lib.sh"
helper_test BIN oom
dir=$(mktemp_dir)
for bs in 1024 4096; do
	note "oom sweep, ext4 with $bs-byte blocks"
	mke2fs -q -F -t ext4 -b $bs "$dir/base.img" 8M > /dev/null || fail "mke2fs"
	"$BIN" "$dir/base.img" "$dir" "${OOM_STEP:-1}" "${OOM_START:-1}"
	rc=$?
	[ $rc = 77 ] && exit 77
	[ $rc = 0 ] || fail "oom sweep ($bs-byte blocks)"
done
echo "oom.sh: pass"
