#!/bin/bash
# unlink_race.sh - unlinks that free the inode in their own handle, racing
# with opens of the number a lookup returned (tests/unlink_race.c; also
# run under TSan): 4 pairs of threads, 2000 rounds each, on an image with
# the orphan file and on one with the legacy list only; before that, the
# claim raced with a grab, and opens raced with the release that frees an
# unlinked file.  Every open gets a live file or ENOENT, the data written
# reads back, a file still held at unmount is freed by it, and e2fsck -fn
# is clean after: no block of a freed inode, no leaked number, no orphan
# left.
# test-timeout: 300
# run-in: release asan tsan
. "$(dirname "$0")/lib.sh"
helper_test P unlink_race mke2fs
D=$(mktemp_dir)
test_seed unlink_race
for opts in "-O orphan_file" "-O ^orphan_file"; do
	note "mke2fs $opts"
	rm -f "$D/r.img"
	truncate -s 64M "$D/r.img"
	# shellcheck disable=SC2086
	mke2fs -q -t ext4 $opts -F "$D/r.img" || fail "mke2fs $opts"
	"$P" "$D/r.img" 4 2000 "$SEED" || fail "unlink_race ($opts)"
	e2fsck -fn "$D/r.img" > "$D/fsck.log" 2>&1 || { cat "$D/fsck.log"; fail "e2fsck -fn ($opts)"; }
	echo "ok   e2fsck -fn clean"
done
echo "unlink_race.sh: all passed"
