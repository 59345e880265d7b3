#!/bin/bash
# leaf_hint.sh - the htree leaf hints of creates (tests/leaf_hint.c): random
# creates, unlinks, renames and links in one htree directory against a
# model, with the default cache and with a 256 KiB one (hints lost and
# rebuilt all the time); both images must hold the same directory bytes
# (a hinted create puts an entry where the full scan would) and be
# e2fsck -fn clean.  4 KiB and 1 KiB blocks.
# test-timeout: 600
. "$(dirname "$0")/lib.sh"
helper_test P leaf_hint mke2fs debugfs
D=$(mktemp_dir)
test_seed leaf_hint
OPS=${OPS:-40000}
case "$UEXT4_BUILD" in *tsan* | *asan*) OPS=10000 ;; esac
for bs in 4096 1024; do
	note "block size $bs"
	for x in a b; do
		rm -f "$D/$x.img"
		truncate -s 64M "$D/$x.img"
		mke2fs -q -t ext4 -b $bs -N 20000 -U 11111111-2222-3333-4444-555555555555 \
			-E hash_seed=11111111-2222-3333-4444-666666666666 -F "$D/$x.img" || fail "mke2fs -b $bs"
	done
	"$P" "$D/a.img" "$D/b.img" "$SEED" "$OPS" || fail "leaf_hint (-b $bs)"
	for x in a b; do
		e2fsck -fn "$D/$x.img" > "$D/fsck.log" 2>&1 || { cat "$D/fsck.log"; fail "e2fsck -fn $x (-b $bs)"; }
		debugfs -R "cat /d" "$D/$x.img" > "$D/$x.dir" 2>/dev/null || fail "debugfs cat /d ($x)"
	done
	echo "ok   e2fsck -fn clean (both)"
	[ -s "$D/a.dir" ] || fail "empty directory dump"
	cmp "$D/a.dir" "$D/b.dir" || fail "directory bytes differ between the default and the small cache (-b $bs)"
	echo "ok   same directory bytes with both caches ($(stat -c %s "$D/a.dir") bytes)"
done
echo PASS
