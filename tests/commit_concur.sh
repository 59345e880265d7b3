#!/bin/bash
# commit_concur.sh - commits with frozen copy-on-write buffers (tests/commit_concur.c):
# writer threads change metadata while a thread commits in a loop; every
# flush point of the recorded run is recovered and must be e2fsck -fn clean.
# Two images: 4 KiB blocks with metadata_csum and the orphan file (block
# checksums make any change after the close that leaks into a copy show),
# and 1 KiB blocks without metadata_csum.
# Environment: COW_SEED=N replays the operations (the interleaving differs).
# test-timeout: 600
# run-in: release asan tsan
set -uo pipefail
. "$(dirname "$0")/lib.sh"
helper_test BIN commit_concur e2fsck mke2fs
scratch_on_tmpfs
dir=$(mktemp_dir)
test_seed commit_concur COW_SEED
case "$UEXT4_BUILD" in
*asan* | *tsan*) COMMITS=40 STATES=25 ;;
*) COMMITS=150 STATES=60 ;;
esac
rc=0
run() { # run NAME SIZE MKE2FS-OPTIONS...
	local name=$1 size=$2
	shift 2
	rm -f "$dir/$name.img"
	mke2fs -q -F "$@" "$dir/$name.img" "$size" > "$dir/mkfs.log" 2>&1 ||
		{ cat "$dir/mkfs.log"; fail "mke2fs $* failed"; }
	echo "== $name: mke2fs $*"
	"$BIN" -s "$SEED" -t 4 -c "$COMMITS" -m "$STATES" "$dir/$name.img" || rc=1
}
run csum4k 32M -t ext4 -O orphan_file -b 4096 -N 4096
run nocsum1k 16M -t ext4 -O ^metadata_csum -b 1024 -N 4096
[ $rc = 0 ] && echo "PASS" || echo "FAIL"
exit $rc
