#!/bin/bash
# fuse_uring.sh - the FUSE over io_uring transport (`uext4 mount -o loop=uring`,
# fuse/uring.c) and its fallback.
#
# As root, with a kernel that has FUSE over io_uring (6.14+:
# /sys/module/fuse/parameters/enable_uring exists); otherwise it skips and
# says why.  The old enable_uring value is restored at exit.
#   1. Fallback: enable_uring=0.  `-o loop=uring` still mounts, prints one
#      line saying why it uses the classic loop, has no io_uring open, and a
#      read-write round (files written, read back, unmounted) gives an image
#      e2fsck -fn finds clean.
#   2. enable_uring=1: the server says it serves over io_uring, holds one
#      io_uring per CPU queue (/proc/PID/fd), and the requests of 300
#      creates and stats really complete on those rings (the CqHead counters
#      in /proc/PID/fdinfo grow by at least 300), with no classic
#      read(2)-served fallback.  Content checks and e2fsck -fn as in 1.
#   3. The FUSE tests fuse_rw.sh, fuse_ro.sh and fuse_kill.sh run as they
#      are, over io_uring (UEXT4_FUSE_LOOP=uring makes it the default loop).
#      Under TSan in make check only fuse_rw.sh, the concurrent one (the
#      others' paths are the release run's).  With UEXT4_LONG=1 (make
#      check-long) killpriv.sh too, whose privilege rules do not depend on
#      the transport, in every mode.
# test-timeout: 1500
# run-in: release asan-long tsan
. "$(dirname "$0")/lib.sh"
setup_traps

[ "$(id -u)" = 0 ] || skip "needs root to switch /sys/module/fuse/parameters/enable_uring"
[ -c /dev/fuse ] || skip "no /dev/fuse"
command -v fusermount3 > /dev/null || skip "no fusermount3"
PARAM=/sys/module/fuse/parameters/enable_uring
[ -e "$PARAM" ] || skip "this kernel ($(uname -r)) lacks FUSE over io_uring (no $PARAM)"
OLD=$(cat "$PARAM")
[ -w "$PARAM" ] || skip "$PARAM is not writable"
restore() {
	cleanup_mounts
	case $OLD in Y | 1) echo 1 > "$PARAM" ;; *) echo 0 > "$PARAM" ;; esac
}
trap restore EXIT

T=$(mktemp_dir)
san_logs_in "$T"
IMG=$T/u.img
MNT=$T/mnt
mkdir "$MNT"
FAILS=0

# io_uring descriptors the server holds
rings_of() {
	local f n=0
	for f in /proc/"$1"/fd/*; do
		[ "$(readlink "$f" 2> /dev/null)" = "anon_inode:[io_uring]" ] && n=$((n + 1))
	done
	echo $n
}
# completions seen so far on all of the server's rings
completions_of() {
	local f sum=0 c
	for f in /proc/"$1"/fd/*; do
		[ "$(readlink "$f" 2> /dev/null)" = "anon_inode:[io_uring]" ] || continue
		c=$(sed -n 's/^CqHead:[[:space:]]*//p' "/proc/$1/fdinfo/${f##*/}")
		sum=$((sum + ${c:-0}))
	done
	echo $sum
}
server_pid() { pgrep -n -f -x "$UEXT4 mount -o loop=uring $IMG $MNT"; }
wait_gone() { # wait_gone PID: the server exits after writing back (60 s)
	local i
	for ((i = 0; i < 600; i++)); do
		kill -0 "$1" 2> /dev/null || return 0
		sleep 0.1 # polling for the server to exit, with a 60 s deadline
	done
	return 1
}

# round NAME: mount with -o loop=uring (stderr in $T/NAME.err), write and
# read back files, unmount, e2fsck.  Leaves PID set during the checks in
# the callback check_NAME.
round() {
	local name=$1 i
	rm -f "$IMG"
	mke2fs -q -F -t ext4 "$IMG" 64M || fail "mke2fs"
	"$UEXT4" mount -o loop=uring "$IMG" "$MNT" 2> "$T/$name.err" ||
		{ bad "$name: uext4 mount -o loop=uring exit $?: $(cat "$T/$name.err")"; return; }
	MOUNTS+=("$MNT")
	PID=$(server_pid)
	[ -n "$PID" ] || { bad "$name: no server process"; return; }
	"check_$name"
	head -c 3000000 /dev/urandom > "$T/data"
	cp "$T/data" "$MNT/data" || bad "$name: cp into the mount"
	mkdir -p "$MNT/d/e" && echo hi > "$MNT/d/e/f" || bad "$name: mkdir/write"
	mv "$MNT/d/e/f" "$MNT/d/g" || bad "$name: rename"
	cmp -s "$T/data" "$MNT/data" || bad "$name: data read back differs"
	[ "$(cat "$MNT/d/g")" = hi ] || bad "$name: small file read back differs"
	fusermount3 -u "$MNT" || bad "$name: fusermount3 -u"
	wait_gone "$PID" || bad "$name: server $PID still running 60 s after the unmount"
	e2fsck -fn "$IMG" > "$T/fsck" 2>&1 || { bad "$name: e2fsck -fn not clean"; head -20 "$T/fsck"; }
}

check_fallback() {
	local lines
	lines=$(grep -c . "$T/fallback.err")
	grep -q "loop=uring: .*enable_uring.*using the classic loop" "$T/fallback.err" ||
		bad "fallback: no line saying why: '$(cat "$T/fallback.err")'"
	[ "$lines" = 1 ] || bad "fallback: $lines lines on stderr, not one: $(cat "$T/fallback.err")"
	[ "$(rings_of "$PID")" = 0 ] || bad "fallback: the server has an io_uring open"
	echo "fallback message: $(cat "$T/fallback.err")"
}

check_uring() {
	local nq before after i
	nq=$(awk -F'[-,]' '{ print $NF + 1 }' /sys/devices/system/cpu/possible)
	grep -q "serving FUSE over io_uring: $nq queues" "$T/uring.err" ||
		bad "uring: server did not say it serves over io_uring: '$(cat "$T/uring.err")'"
	[ "$(rings_of "$PID")" = "$nq" ] ||
		bad "uring: $(rings_of "$PID") io_urings open, want one per CPU queue ($nq)"
	before=$(completions_of "$PID")
	for ((i = 0; i < 150; i++)); do
		: > "$MNT/f$i"
		stat "$MNT/f$i" > /dev/null
	done
	after=$(completions_of "$PID")
	echo "uring: $nq queues; 150 creates + stats completed $((after - before)) ring requests"
	[ $((after - before)) -ge 300 ] ||
		bad "uring: only $((after - before)) requests went through io_uring (want >= 300)"
}

note "1. enable_uring=0: -o loop=uring falls back"
echo 0 > "$PARAM"
round fallback

note "2. enable_uring=1: requests go through io_uring"
echo 1 > "$PARAM"
round uring

note "3. the FUSE tests over io_uring"
URING_TESTS="fuse_rw fuse_ro fuse_kill killpriv"
if [ "${UEXT4_LONG:-0}" != 1 ]; then
	case "$UEXT4_BUILD" in
	*tsan*) URING_TESTS=fuse_rw ;;
	*) URING_TESTS="fuse_rw fuse_ro fuse_kill" ;;
	esac
	echo "over io_uring: $URING_TESTS (all four with UEXT4_LONG=1)"
fi
for t in $URING_TESTS; do
	UEXT4_FUSE_LOOP=uring bash "$TOP/tests/$t.sh" > "$T/$t.log" 2>&1
	rc=$?
	case $rc in
	0) echo "$t.sh over io_uring: PASS" ;;
	77) echo "$t.sh over io_uring: SKIP ($(grep -m1 SKIP "$T/$t.log"))" ;;
	*) bad "$t.sh over io_uring: exit $rc"; tail -30 "$T/$t.log" ;;
	esac
done

if ls "$T"/san* > /dev/null 2>&1; then bad "sanitizer reports"; cat "$T"/san*; fi
[ $FAILS = 0 ] || fail "$FAILS check(s) failed"
echo "PASS"
