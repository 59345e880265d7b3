#!/bin/bash
# seed002.sh - 16 threads x 20,000 empty files in sibling directories on a
# fresh flex_bg ext4 image (tests/seed002.c): no inode-table reads during the
# creates, no inode-table block shared between directories, e2fsck clean.
# SEED002_FILES=N changes the files per thread (default 20000; 5000 in
# sanitizer builds), SEED002_SIZE the image size (default 2G: 16 groups, one per directory,
# as the seed assumes; with fewer groups than directories two directories
# must share a group).
# test-timeout: 900
set -uo pipefail
. "$(dirname "$0")/lib.sh"
helper_test BIN seed002
case "$UEXT4_BUILD" in
*/asan | */tsan) FILES=${SEED002_FILES:-5000} ;;
*) FILES=${SEED002_FILES:-20000} ;;
esac
dir=$(mktemp_dir)
img=$dir/seed002.img
inodes=$((16 * FILES * 5 / 4 + 1000))
note "mke2fs -t ext4 -O flex_bg -N $inodes ${SEED002_SIZE:-2G}"
mke2fs -q -F -t ext4 -O flex_bg -N "$inodes" "$img" "${SEED002_SIZE:-2G}" || fail "mke2fs"
"$BIN" --threads 16 --files "$FILES" "$img" || exit 1
fsck_clean "$img" || exit 1
