#!/bin/bash
# populate_errors.sh - a fill that cannot finish stops with a message that
# names the source path and what ran out, promptly, without a crash:
#   - blocks: a tree with 40 MiB of data into a 16 MiB image;
#   - inodes: 300 files into an image with 128 inodes;
#   - an unreadable source file (mode 000, the fill run as nobody);
#   - a source directory that is not there.
# After each, e2fsck -fn finds no corruption (what was copied stays, the
# rest is simply absent; marking the image incomplete is the CLI's job).
# test-timeout: 300
set -uo pipefail
. "$(dirname "$0")/lib.sh"
setup_traps

POP=$UEXT4_BUILD/bench/populate_bench
[ -x "$POP" ] || fail "$POP not built (run make)"
WORK=$(mktemp_dir)

# expect_fail NAME IMG SRC PATTERN [populate options]
expect_fail() {
	local name=$1 img=$2 src=$3 pat=$4 rc start secs
	shift 4
	start=$(date +%s)
	"$POP" "$@" "$img" "$src" > "$WORK/$name.out" 2>&1
	rc=$?
	secs=$(($(date +%s) - start))
	echo "$name: exit $rc after ${secs}s: $(grep -v RESULT "$WORK/$name.out" | head -3)"
	if [ "$rc" != 1 ]; then
		bad "$name: exit $rc, want 1 (a clean failure)"
	elif ! grep -q -- "$pat" "$WORK/$name.out"; then
		bad "$name: message does not match '$pat'"
	fi
	[ "$secs" -le 30 ] || bad "$name: took ${secs}s to stop"
	if [ -f "$img" ]; then
		fsck_clean "$img" || bad "$name: e2fsck -fn is not clean after the failed fill"
	fi
}

# Blocks: 40 files of 1 MiB into 16 MiB.
SRC=$WORK/big
mkdir -p "$SRC/sub"
for i in $(seq -w 1 40); do head -c 1048576 /dev/urandom > "$SRC/sub/f$i"; done
for j in 1 2 8; do
	mke2fs -q -F -t ext4 "$WORK/small.img" 16M || fail "mke2fs"
	expect_fail "enospc-j$j" "$WORK/small.img" "$SRC" "$SRC/sub/f[0-9]*: .*no free blocks left" -j "$j"
done

# Inodes: 300 empty files into 128 inodes.
SRC=$WORK/many
mkdir -p "$SRC/d"
for i in $(seq -w 1 300); do : > "$SRC/d/e$i"; done
mke2fs -q -F -t ext4 -N 128 "$WORK/inodes.img" 16M || fail "mke2fs"
expect_fail inodes "$WORK/inodes.img" "$SRC" "$SRC/d/e[0-9]*: .*no free inodes left" -j 2

# An unreadable file, the fill run as an unprivileged user.
if [ "$(id -u)" = 0 ] && command -v setpriv > /dev/null; then
	SRC=$WORK/unreadable
	mkdir -p "$SRC/a" && echo ok > "$SRC/a/fine" && echo secret > "$SRC/a/secret"
	chmod 000 "$SRC/a/secret"
	chmod 755 "$WORK" "$SRC" "$SRC/a"
	mke2fs -q -F -t ext4 "$WORK/unread.img" 16M || fail "mke2fs"
	chmod 666 "$WORK/unread.img"
	start=$(date +%s)
	setpriv --reuid=65534 --regid=65534 --clear-groups "$POP" -j 2 "$WORK/unread.img" "$SRC" \
		> "$WORK/unread.out" 2>&1
	rc=$?
	echo "unreadable: exit $rc: $(grep -v RESULT "$WORK/unread.out" | head -3)"
	[ "$rc" = 1 ] || bad "unreadable: exit $rc, want 1"
	grep -q "$SRC/a/secret: cannot open it for reading: Permission denied" "$WORK/unread.out" ||
		bad "unreadable: message does not name the file and the reason"
	fsck_clean "$WORK/unread.img" || bad "unreadable: e2fsck -fn is not clean"
else
	echo "NOTE: not root or no setpriv: the unreadable-file case did not run"
fi

# A missing source.
mke2fs -q -F -t ext4 "$WORK/none.img" 16M || fail "mke2fs"
expect_fail missing "$WORK/none.img" "$WORK/does-not-exist" "$WORK/does-not-exist: .*No such file"

[ "$FAILS" = 0 ] || fail "$FAILS checks failed"
echo "PASS"
