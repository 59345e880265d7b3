#!/bin/bash
# model.sh - the randomized model test (tests/model.c) on several image kinds,
# then the kernel's view of each result compared with the model.
#
# For each kind: mke2fs a fresh 1 GiB sparse image, run `model` (4 threads,
# random operations checked against an in-memory model, then umount,
# e2fsck -fn, read-only remount and a full comparison), and where root and
# loop devices exist mount the image with the kernel (ro) and diff
# `walk posix` of it against the model's canonical dump.
#
# Environment: MODEL_SEED=N replays (each kind uses N + its index),
# MODEL_KINDS="default 1k" limits the kinds, MODEL_OPS=N sets the operations
# of the default kind (the others run a quarter), MODEL_THREADS=N,
# MODEL_ARGS="--skip symlink" passes options to model (see tests/model.c).
# test-timeout: 1200
# run-in: release asan tsan
set -uo pipefail
. "$(dirname "$0")/lib.sh"
setup_traps
. "$(dirname "$0")/nbd.inc"   # UEXT4_NBD=1: model runs on an NBD export of the image
need_helper BIN model
[ -x "$WALK" ] || fail "$WALK not built (run make)"

# Sanitizer builds run several times slower: fewer operations.
case "$UEXT4_BUILD" in
*/asan) SCALE=2 ;;
*/tsan) SCALE=4 ;;
*) SCALE=1 ;;
esac
OPS=${MODEL_OPS:-$((20000 / SCALE))}
THREADS=${MODEL_THREADS:-4}
test_seed model MODEL_SEED
KINDS=${MODEL_KINDS:-default 1k ext3 nocsum inline}

kind_opts() {
	case "$1" in
	default) echo "-t ext4" ;;
	1k)      echo "-t ext4 -b 1024" ;;
	ext3)    echo "-t ext3" ;;
	nocsum)  echo "-t ext4 -O ^metadata_csum" ;;
	inline)  echo "-t ext4 -O inline_data" ;;
	*) return 1 ;;
	esac
}

dir=$(mktemp_dir)
rc=0
i=0
echo "model.sh: (replay: MODEL_SEED=$SEED MODEL_KINDS=\"$KINDS\" bash tests/model.sh)"
for kind in $KINDS; do
	opts=$(kind_opts "$kind") || fail "unknown kind $kind"
	img=$dir/$kind.img
	ops=$OPS
	[ "$kind" = default ] || ops=$((OPS / 4))
	seed=$((SEED + i))
	i=$((i + 1))
	note "$kind: mke2fs $opts, $ops operations, seed $seed"
	# shellcheck disable=SC2086
	mke2fs -q -F $opts "$img" 1G || fail "mke2fs $opts"
	nbd_target "$img"   # TARGET: img or its NBD URI
	nofsck=()   # model's own e2fsck needs a file: over NBD fsck_clean below does it
	[ "$TARGET" = "$img" ] || nofsck=(--no-fsck)
	# shellcheck disable=SC2086
	if ! "$BIN" ${MODEL_ARGS:-} "${nofsck[@]}" --threads "$THREADS" --ops "$ops" --seed "$seed" \
		--dump "$dir/$kind.model" "$TARGET"; then
		nbd_stop
		echo "FAIL: model on the $kind image (replay: $BIN --threads $THREADS --ops $ops --seed $seed IMAGE on a fresh mke2fs $opts image)"
		rc=1
		continue
	fi
	nbd_stop    # its flushes are done: the file is what the export held
	fsck_clean "$img" || { rc=1; continue; }
	if can_loop; then
		mnt=$dir/mnt-$kind
		mkdir -p "$mnt"
		if ! kmount "$img" "$mnt"; then
			echo "FAIL: the kernel cannot mount the $kind image"
			rc=1
			continue
		fi
		"$WALK" --no-blocks --no-mtime --no-ctime --no-atime --no-nsec --no-dirsize \
			--exclude=lost+found posix "$mnt" > "$dir/$kind.kernel"
		wrc=$?
		kumount "$mnt"
		if [ $wrc != 0 ] || ! diff -u "$dir/$kind.model" "$dir/$kind.kernel" > "$dir/$kind.diff"; then
			head -n 60 "$dir/$kind.diff"
			echo "FAIL: the kernel's view of the $kind image differs from the model (- model, + kernel)"
			rc=1
		else
			echo "kernel view of the $kind image matches the model ($(wc -l < "$dir/$kind.model") paths)"
		fi
		fsck_clean "$img" || rc=1
	else
		echo "no root or loop device: kernel comparison skipped"
	fi
	rm -f "$img"
done
[ $rc = 0 ] && echo "model.sh: all kinds pass (seed $SEED)"
exit $rc
