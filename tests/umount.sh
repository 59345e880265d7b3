#!/bin/bash
# umount.sh - `uext4 umount MOUNTPOINT` returns only once the server has
# written everything back and closed the image, and reports failures.
#
#   1. A read-write mount with -o commit=86400 (so nothing reaches the image
#      before the unmount) gets a lot written: 4,000 files in 40
#      directories, 40 MB of random data, renames and removals.  Right
#      after `uext4 umount` returns 0: the server process is gone, the image
#      has no needs_recovery (dumpe2fs -h), e2fsck -fn is clean, and a
#      read-only mount shows the files with their content.  The mount point
#      is given with a trailing slash and as a relative path in two rounds.
#   2. A read-only mount: umount exits 0 and the server is gone.
#   3. Errors, each exit 1 with a message naming the problem: a directory
#      that is no mount point, a missing path, a mount that is not uext4
#      (a tmpfs, as root), a mount whose server was killed (-9) before the
#      unmount ("needs recovery"; the mount point is unmounted anyway).
#   4. (root) A failing write-back: the image is a sparse file on a small
#      tmpfs that is then filled up, so writing back the journal gets
#      ENOSPC; umount exits 1 with the server's "writing back ... failed"
#      message.
#   5. (root, with a test user) A user without root mounts, writes, and
#      `uext4 umount`s through fusermount3 (status in /tmp/uext4-UID or
#      /run/user/UID/uext4): exit 0, e2fsck -fn clean, no needs_recovery.
#   6. Two read-only mounts of one image, unmounted in either order: each
#      umount exits 0 within 20 s (the status is kept per mount).
# test-timeout: 600
set -uo pipefail
. "$(dirname "$0")/lib.sh"
fuse_test
SEED=${UMOUNT_SEED:-$RANDOM}
echo "seed $SEED (UMOUNT_SEED=$SEED replays)"
RANDOM=$SEED
IMG=$T/u.img
MNT=$T/mnt
mkdir "$MNT"
# running PID: alive and not a zombie (an exited daemon waits to be reaped
# by whoever adopted it; it has closed everything by then)
running() { kill -0 "$1" 2> /dev/null && [ "$(ps -o stat= -p "$1" | cut -c1)" != Z ]; }

# fill DIR: the workload; keeps the expected content in $T/expect
fill() {
	local d=$1 i j
	rm -rf "$T/expect"
	mkdir -p "$T/expect"
	for ((i = 0; i < 40; i++)); do
		mkdir "$d/d$i" "$T/expect/d$i" || return 1
		for ((j = 0; j < 100; j++)); do
			echo "$SEED $i $j" > "$T/expect/d$i/f$j"
		done
		cp "$T/expect/d$i/"* "$d/d$i/" || return 1
	done
	head -c 40000000 /dev/urandom > "$T/expect/big"
	cp "$T/expect/big" "$d/big" || return 1
	mv "$d/d1" "$d/moved" && mv "$T/expect/d1" "$T/expect/moved" || return 1
	rm -r "$d/d2" && rm -r "$T/expect/d2" || return 1
}

round() { # round ARG-FOR-UMOUNT
	local pid out rc
	rm -f "$IMG"
	mke2fs -q -F -t ext4 -N 8192 "$IMG" 256M || fail "mke2fs"
	"$UEXT4" mount -o commit=86400 "$IMG" "$MNT" || { bad "mount exit $?"; return; }
	MOUNTS+=("$MNT")
	pid=$(pgrep -n -f -x "$UEXT4 mount -o commit=86400 $IMG $MNT")
	[ -n "$pid" ] || { bad "no server process"; return; }
	fill "$MNT" || bad "writing into the mount failed"
	out=$(cd "$T" && "$UEXT4" umount "$1" 2>&1)
	rc=$?
	# right after it returned: nothing may still be running or pending
	running "$pid" && bad "umount $1 returned while server $pid still runs"
	[ $rc = 0 ] || bad "uext4 umount $1 exit $rc: $out"
	mountpoint -q "$MNT" && bad "$MNT still mounted"
	if dumpe2fs -h "$IMG" 2> /dev/null | grep -q needs_recovery; then
		bad "needs_recovery set right after uext4 umount"
	fi
	e2fsck -fn "$IMG" > "$T/fsck" 2>&1 || { bad "e2fsck -fn not clean after umount $1"; head -20 "$T/fsck"; }
	"$UEXT4" mount -o ro "$IMG" "$MNT" || { bad "ro mount exit $?"; return; }
	diff -r -x lost+found "$T/expect" "$MNT" > "$T/diff" 2>&1 || { bad "content differs"; head "$T/diff"; }
	pid=$(pgrep -n -f -x "$UEXT4 mount -o ro $IMG $MNT")
	"$UEXT4" umount "$MNT" || bad "umount of the read-only mount exit $?"
	[ -n "$pid" ] && running "$pid" && bad "read-only server $pid still runs after umount"
	echo "round '$1': written, unmounted, clean"
}

note "1./2. write a lot, uext4 umount, check at once"
round "$MNT/"
round mnt

note "3. errors"
expect_error() { # expect_error PATTERN ARG: exit 1 and a message matching PATTERN
	local out rc
	out=$("$UEXT4" umount "$2" 2>&1)
	rc=$?
	[ $rc = 1 ] || bad "umount $2: exit $rc, want 1 ($out)"
	echo "$out" | grep -q -- "$1" || bad "umount $2: message '$out' lacks '$1'"
	echo "umount $2: $out"
}
expect_error "not a mount point" "$T"
expect_error "No such file or directory" "$T/none"
if [ "$(id -u)" = 0 ]; then
	mkdir "$T/tmpfs"
	mount -t tmpfs -o size=1M tmpfs "$T/tmpfs" && MOUNTS+=("$T/tmpfs")
	expect_error "not a uext4 mount (it is tmpfs)" "$T/tmpfs"
fi
rm -f "$IMG"
mke2fs -q -F -t ext4 "$IMG" 64M || fail "mke2fs"
"$UEXT4" mount "$IMG" "$MNT" || fail "mount exit $?"
MOUNTS+=("$MNT")
echo data > "$MNT/f" || bad "write before the kill"
pid=$(pgrep -n -f -x "$UEXT4 mount $IMG $MNT")
kill -9 "$pid"
while running "$pid"; do
	sleep 0.01 # polling for SIGKILL to land (bounded: SIGKILL always does)
done
expect_error "needs recovery" "$MNT"
mountpoint -q "$MNT" && bad "the dead mount is still mounted after umount"

if [ "$(id -u)" = 0 ]; then
	note "4. a write-back that fails (ENOSPC under the image)"
	mkdir "$T/small"
	mount -t tmpfs -o size=12M tmpfs "$T/small" || fail "tmpfs mount"
	MOUNTS+=("$T/small")
	SIMG=$T/small/s.img
	truncate -s 64M "$SIMG"
	mke2fs -q -F -t ext4 "$SIMG" || fail "mke2fs"
	"$UEXT4" mount -o commit=86400 "$SIMG" "$MNT" || fail "mount exit $?"
	for ((i = 0; i < 300; i++)); do mkdir "$MNT/d$i" || break; done
	head -c 4000000 /dev/urandom > "$MNT/f" || bad "write into the mount"
	dd if=/dev/zero of="$T/small/fill" bs=64k 2> /dev/null # until ENOSPC
	out=$("$UEXT4" umount "$MNT" 2>&1)
	rc=$?
	echo "umount with a full disk under the image: exit $rc: $out"
	[ $rc = 1 ] || bad "umount after a failed write-back: exit $rc, want 1"
	echo "$out" | grep -q "writing back $SIMG failed: ." || bad "no write-back message: '$out'"
	mountpoint -q "$MNT" && bad "still mounted after the failed write-back"
else
	echo "NOTE: not root: the failing write-back case (a full tmpfs) is skipped"
fi

note "6. two mounts of one image: each umount waits on its own server"
# The status is kept per mount: before, the second mount's status replaced
# the first's, and umount of the first waited on the second server (hung).
rm -f "$IMG"
mke2fs -q -F -t ext4 "$IMG" 64M || fail "mke2fs"
M2=$T/mnt2
mkdir -p "$M2"
for order in "$MNT $M2" "$M2 $MNT"; do
	"$UEXT4" mount -o ro "$IMG" "$MNT" || fail "ro mount 1 exit $?"
	MOUNTS+=("$MNT")
	"$UEXT4" mount -o ro "$IMG" "$M2" || fail "ro mount 2 exit $?"
	MOUNTS+=("$M2")
	for m in $order; do
		out=$(timeout 20 "$UEXT4" umount "$m" 2>&1)
		rc=$?
		[ $rc = 0 ] || bad "umount $m (order $order): exit $rc: $out"
		mountpoint -q "$m" && bad "$m still mounted after its umount"
	done
	echo "two read-only mounts, unmounted in the order $order"
done

if [ "$(id -u)" = 0 ] && { id uext4test > /dev/null 2>&1 || useradd -M -d /nonexistent -s /bin/sh uext4test; }; then
	note "5. a user without root: uext4 umount goes through fusermount3"
	old_mode=$(stat -c %a /dev/fuse)
	chmod 0666 /dev/fuse # as fuse_user.sh: some containers leave it 0600
	trap 'chmod "$old_mode" /dev/fuse; cleanup_mounts' EXIT
	U=$T/user
	mkdir -p "$U/mnt"
	chmod 0755 "$T" "$U"
	mke2fs -q -F -t ext4 -E root_owner="$(id -u uext4test):$(id -g uext4test)" "$U/img" 64M || fail "mke2fs"
	chown uext4test "$U/img" "$U/mnt"
	su -s /bin/sh uext4test -c "'$UEXT4' mount -o commit=86400 '$U/img' '$U/mnt' &&
		cp -r '$T/expect/d0' '$U/mnt/' && head -c 5000000 /dev/zero > '$U/mnt/z'" ||
		bad "user mount and writes failed"
	MOUNTS+=("$U/mnt")
	pid=$(pgrep -n -u uext4test -f -x "$UEXT4 mount -o commit=86400 $U/img $U/mnt")
	[ -n "$pid" ] || bad "no server of the user's mount"
	out=$(su -s /bin/sh uext4test -c "'$UEXT4' umount '$U/mnt'" 2>&1) || bad "umount as a user: $out"
	[ -n "$pid" ] && running "$pid" && bad "the user's umount returned while server $pid still runs"
	mountpoint -q "$U/mnt" && bad "still mounted after the user's umount"
	e2fsck -fn "$U/img" > "$T/fsck" 2>&1 || { bad "e2fsck -fn not clean after the user's umount"; head "$T/fsck"; }
	dumpe2fs -h "$U/img" 2> /dev/null | grep -q needs_recovery && bad "needs_recovery after the user's umount"
	chmod "$old_mode" /dev/fuse
	echo "user round: unmounted, clean"
fi

san_check
[ $FAILS = 0 ] || fail "$FAILS check(s) failed"
echo "PASS"
