#!/bin/bash
# pressure_concur.sh - the write path with a 2 MiB buffer cache from four
# threads (tests/pressure_concur.c), then e2fsck -fn.
# test-timeout: 600
# run-in: release asan tsan
set -uo pipefail
. "$(dirname "$0")/lib.sh"
helper_test BIN pressure_concur
dir=$(mktemp_dir)
for opts in "-b 4096" "-b 1024"; do
	note "mke2fs -t ext4 $opts 512M"
	# shellcheck disable=SC2086
	mke2fs -q -F -t ext4 $opts "$dir/p.img" 512M || fail "mke2fs"
	"$BIN" "$dir/p.img" || exit 1
done
echo "pressure_concur.sh: pass"
