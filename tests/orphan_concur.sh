#!/bin/bash
# orphan_concur.sh - concurrent orphan_add/orphan_del from several threads
# (tests/orphan_concur.c; also run under TSan): stress-orphan truncates of
# each thread's own file, then 4 x 100 inodes held on the orphan lists at
# once and released in random order, with the orphan file (32 blocks), a
# one-block orphan file (254 entries: the rest falls back to the legacy
# list) and the legacy list alone.  Lists empty after, e2fsck -fn clean.
# test-timeout: 300
# run-in: release asan tsan
. "$(dirname "$0")/lib.sh"
helper_test P orphan_concur mke2fs
D=$(mktemp_dir)
test_seed orphan_concur
for opts in "-O orphan_file" "-O orphan_file -E orphan_file_size=1" "-O ^orphan_file"; do
	note "mke2fs $opts"
	rm -f "$D/c.img"
	truncate -s 64M "$D/c.img"
	# shellcheck disable=SC2086
	mke2fs -q -t ext4 -b 1024 $opts -F "$D/c.img" || fail "mke2fs $opts"
	"$P" "$D/c.img" 4 10 100 "$SEED" || fail "orphan_concur ($opts)"
	e2fsck -fn "$D/c.img" > "$D/fsck.log" 2>&1 || { cat "$D/fsck.log"; fail "e2fsck -fn ($opts)"; }
	echo "ok   e2fsck -fn clean"
done
echo "orphan_concur.sh: all passed"
