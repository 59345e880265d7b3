#!/bin/bash
# unlink_crash.sh - crash safety of the unlink that frees a small, unheld
# file in its own transaction (issue 12; src/inode.c inode_free_claimed()).
# tests/crash.c's workload unlink_small unlinks small files nobody holds
# (empty, inline/tiny, 1 and 3.5 blocks, in a linear and an htree
# directory) and one open file; it checks at run time that only the open
# one goes on an orphan list and that it stays there (synced) until its
# release.  Every flush point and a sample of subsets of each epoch is then
# recovered by the library AND (root, loop devices) by the kernel's ext4 (a
# loop mount + umount of the same crash state): each must pass e2fsck -fn
# (no leaked inode or block, no half-freed file), and every unlinked name
# that was durable must be whole or gone.  Images: legacy orphan list (1 KiB
# blocks) and orphan_file (4 KiB blocks).
# Environment: CRASH_SEED=N replays, CRASH_MAX_STATES caps the states.
# test-timeout: 600
set -uo pipefail
. "$(dirname "$0")/lib.sh"
setup_traps
BIN=$UEXT4_BUILD/tests/crash
[ -x "$BIN" ] || fail "$BIN not built (run make)"
command -v e2fsck > /dev/null || skip "e2fsck missing"
if [ -z "${TMPDIR:-}" ] && [ "$(stat -f -c %T /dev/shm 2> /dev/null)" = tmpfs ] &&
	[ -w /dev/shm ]; then
	export TMPDIR=/dev/shm
fi
dir=$(mktemp_dir)
SEED=${CRASH_SEED:-$(( $(od -An -N4 -tu4 /dev/urandom) % 1000000000 ))}
case "$UEXT4_BUILD" in
*asan* | *tsan*) MAX=${CRASH_MAX_STATES:-30} ;;
*) MAX=${CRASH_MAX_STATES:-120} ;;
esac
echo "unlink_crash.sh: seed $SEED (CRASH_SEED=$SEED replays), at most $MAX states per image"
kernel=no
if can_loop; then
	# crash.c mounts each worker's state image on $dir/mnt/IMAGE-NAME.
	mkdir -p "$dir/mnt"
	export CRASH_KERNEL_MNT=$dir/mnt
	kernel=yes
else
	note "no root or no loop device: the kernel's recovery is not checked"
fi
rc=0
for cfg in "legacy|8M|-t ext4 -O ^orphan_file -b 1024" \
	"orphan_file|16M|-t ext4 -O orphan_file,inline_data -b 4096"; do
	name=${cfg%%|*} rest=${cfg#*|}
	size=${rest%%|*} mkfs=${rest#*|}
	img=$dir/$name.img
	note "$name: mke2fs $mkfs ($size), kernel recovery: $kernel"
	# shellcheck disable=SC2086
	mke2fs -q -F $mkfs "$img" "$size" || fail "mke2fs $mkfs"
	"$BIN" -s "$SEED" -m "$MAX" "$img" unlink_small > "$dir/out" 2>&1
	r=$?
	cat "$dir/out"
	grep -q '^crash: .* crash states checked' "$dir/out" || { echo "FAIL: $name: no states checked"; rc=1; }
	if [ $r != 0 ]; then
		echo "FAIL: $name (seed $SEED)"
		rc=1
	fi
	for m in "$dir"/mnt/*; do
		if mountpoint -q "$m" 2> /dev/null; then
			echo "FAIL: $m left mounted"
			umount "$m"
			rc=1
		fi
	done
done
exit $rc
