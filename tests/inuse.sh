#!/bin/bash
# inuse.sh - uext4 does not write an image that is in use (mounted by the
# kernel or by another uext4 server; fstests generic/604).
#
# 1. The kernel has it mounted (root and loop devices; else skipped):
#    a. `mount -o loop k.img K`, the kernel writes a file;
#    b. losetup + mount of /dev/loopN, and uext4 given /dev/loopN.
#    With the kernel's mount frozen (fsfreeze: the kernel writes nothing
#    meanwhile), every write command (put, mkdir, rm, mv, ln, chmod, chown,
#    setfattr, truncate, chattr, recover, mkfs -F) and a read-write
#    `uext4 mount` must fail naming the mount point, and the image's bytes
#    stay the same (sha256 before and after).  Read-only commands (ls, cat,
#    stat, get, info, getfattr, lsattr) work and warn that the view may be
#    stale.  After the kernel unmounts, uext4 writes it again; e2fsck -fn
#    clean.
# 2. Two uext4 mounts of one image (FUSE; else skipped): a read-only mount
#    is refused while a read-write server holds the image, naming its pid
#    and mount point; the reverse too (a read-write mount and a write
#    command while a read-only mount holds it), as the kernel refuses a
#    mount that would change the read-only state (EBUSY).
# 3. generic/604: a mount right after umount waits for the old server.
#    The old server is stopped (SIGSTOP) so that its mount is gone but its
#    lock is not; the new mount must wait on the lock (seen as a waiter in
#    /proc/locks), and mount once the old server, continued, lets go.
#    3b: the same on a block device (which the old server holds O_EXCL),
#    the new mount started while the old mount is still listed.
# test-timeout: 120
set -uo pipefail
. "$(dirname "$0")/lib.sh"
setup_traps
need_built "$UEXT4"
test_dir
ok() { echo "ok: $*"; }
# ok_since N MSG: ok MSG if nothing failed since FAILS was N.
ok_since() { [ $FAILS = "$1" ] && ok "$2"; }
HAVE_FUSE=0
[ -c /dev/fuse ] && command -v fusermount3 > /dev/null && HAVE_FUSE=1

head -c 200000 /dev/urandom > "$T/src"
mkdir "$T/m"
# Every write command; @ stands for the image.
WRITES=(
	"put @ $T/src /new"
	"mkdir @ /udir"
	"rm @ /f"
	"mv @ /f /g"
	"ln @ /f /f2"
	"ln -s @ /f /sl"
	"chmod @ 600 /f"
	"chown @ 1:1 /f"
	"setfattr @ -n user.y -v 2 /f"
	"truncate -s 0 @ /f"
	"chattr @ +i /f"
	"recover @"
	"mkfs -q -F @"
)
READS=("ls @ /" "cat @ /f" "stat @ /f" "get @ /f $T/got" "info @" "getfattr -d @ /f"
	"lsattr @ /f")

# uext4 ARGS with @ replaced by the image; stderr to $T/err.
run() { # run IMAGE ARGS
	local img=$1 a args=()
	for a in $2; do [ "$a" = @ ] && args+=("$img") || args+=("$a"); done
	timeout 60 "$UEXT4" "${args[@]}" > "$T/out" 2> "$T/err"
}

# refused_all IMAGE MNT: every write is refused naming MNT, the bytes of
# IMAGE unchanged; reads work with a warning.
refused_all() {
	local img=$1 mnt=$2 cmd before after fails=$FAILS
	before=$(sha256sum < "$img")
	for cmd in "${WRITES[@]}"; do
		if run "$img" "$cmd"; then
			bad "uext4 $cmd worked on $img while the kernel has it mounted on $mnt"
		elif ! grep -qF "mounted on $mnt" "$T/err"; then
			bad "uext4 $cmd on $img: refused without naming $mnt: $(cat "$T/err")"
		fi
	done
	if [ $HAVE_FUSE = 1 ]; then
		if run "$img" "mount @ $T/m"; then
			MOUNTS+=("$T/m")
			bad "a read-write uext4 mount of $img worked while the kernel has it mounted"
			fusermount3 -u "$T/m"
		elif ! grep -qF "mounted on $mnt" "$T/err"; then
			bad "read-write mount of $img: refused without naming $mnt: $(cat "$T/err")"
		fi
	fi
	after=$(sha256sum < "$img")
	[ "$before" = "$after" ] || bad "$img changed while the kernel had it mounted"
	[ $FAILS = $fails ] &&
		ok "$img mounted on $mnt: ${#WRITES[@]} write commands and a read-write mount refused"
	fails=$FAILS
	for cmd in "${READS[@]}"; do
		run "$img" "$cmd" || bad "uext4 $cmd on $img failed: $(cat "$T/err")"
		grep -qF "mounted on $mnt" "$T/err" && grep -q "may be stale" "$T/err" ||
			bad "uext4 $cmd on $img: no warning that the kernel has it mounted: $(cat "$T/err")"
	done
	cmp -s "$T/got" "$T/src" || bad "get of /f while mounted"
	[ $FAILS = $fails ] && ok "read-only commands on $img work and warn"
}

note "1. the kernel has the image mounted"
if ! can_loop; then
	echo "SKIP part 1: needs root and a free loop device"
elif ! command -v fsfreeze > /dev/null; then
	echo "SKIP part 1: fsfreeze (util-linux) missing"
else
	IMG=$T/k.img
	"$UEXT4" mkfs -q "$IMG" 64M || fail "mkfs"
	"$UEXT4" put "$IMG" "$T/src" /f && "$UEXT4" setfattr "$IMG" -n user.x -v 1 /f ||
		fail "filling the image"
	K=$T/K
	mkdir "$K"
	note "1a. mount -o loop"
	mount -o loop,noatime "$IMG" "$K" || fail "mount -o loop"
	MOUNTS+=("$K")
	echo 1 > "$K/a" && sync -f "$K" || bad "the kernel's write"
	fsfreeze -f "$K" || fail "fsfreeze"
	refused_all "$IMG" "$K"
	fsfreeze -u "$K"
	umount "$K" || fail "umount of the loop mount"

	note "1b. a mounted block device"
	LOOP=$(losetup -f --show "$IMG") || fail "losetup"
	if mount -o noatime "$LOOP" "$K"; then
		fsfreeze -f "$K" || bad "fsfreeze"
		refused_all "$LOOP" "$K"
		# the image file behind it too
		run "$IMG" "mkdir @ /via_file" && bad "mkdir on the file behind $LOOP worked"
		grep -qF "mounted on $K by the kernel (via $LOOP)" "$T/err" ||
			bad "the file behind $LOOP: $(cat "$T/err")"
		fsfreeze -u "$K"
		umount "$K" || bad "umount $K"
	else
		bad "mount $LOOP"
	fi
	losetup -d "$LOOP"
	"$UEXT4" mkdir "$IMG" /after && "$UEXT4" ls "$IMG" / | grep -qx a ||
		bad "uext4 does not write the image once the kernel has let go"
	fsck_clean "$IMG" || bad "e2fsck after part 1"
fi

# The lock holder of image $1 (pid, from /proc/locks by device and inode).
lock_pid() {
	local ino d dev
	ino=$(stat -c %i "$1")
	d=$(stat -c %d "$1")
	dev=$(printf '%02x:%02x' $((d >> 8 & 0xfff)) $(((d & 0xff) | (d >> 12 & 0xfff00))))
	awk -v k="$dev:$ino" '$2 == "FLOCK" && $6 == k { print $5; exit }' /proc/locks
}
# Is someone waiting for the lock on image $1?
lock_waiter() {
	local ino
	ino=$(stat -c %i "$1")
	awk -v i=":$ino" '$2 == "->" && $3 == "FLOCK" && substr($7, length($7) - length(i) + 1) == i { f = 1 } END { exit !f }' /proc/locks
}

note "2. a read-only and a read-write mount of one image"
if [ $HAVE_FUSE = 0 ]; then
	echo "SKIP part 2 and 3: /dev/fuse or fusermount3 missing"
else
	f=$FAILS
	A=$T/a.img
	"$UEXT4" mkfs -q "$A" 32M || fail "mkfs a.img"
	mkdir "$T/rw" "$T/ro"
	"$UEXT4" mount "$A" "$T/rw" || fail "read-write mount"
	MOUNTS+=("$T/rw")
	echo hi > "$T/rw/f1" || bad "write through the mount"
	pid=$(lock_pid "$A")
	if "$UEXT4" mount -o ro "$A" "$T/ro" 2> "$T/err"; then
		MOUNTS+=("$T/ro")
		bad "a read-only mount worked while a read-write server holds the image"
		fusermount3 -u "$T/ro"
	else
		grep -qF "mounted on $T/rw" "$T/err" && grep -q "pid $pid" "$T/err" ||
			bad "read-only mount refused without naming the server (pid $pid, $T/rw): $(cat "$T/err")"
	fi
	"$UEXT4" umount "$T/rw" || bad "umount of the read-write mount"
	"$UEXT4" ls "$A" / | grep -qx f1 || bad "f1 written back"
	ok_since $f "a read-only mount is refused while a read-write server holds the image"
	f=$FAILS

	"$UEXT4" mount -o ro "$A" "$T/ro" || fail "read-only mount"
	MOUNTS+=("$T/ro")
	pid=$(lock_pid "$A")
	if "$UEXT4" mount "$A" "$T/rw" 2> "$T/err"; then
		bad "a read-write mount worked while a read-only server holds the image"
		"$UEXT4" umount "$T/rw"
	else
		grep -qF "mounted on $T/ro" "$T/err" && grep -q "pid $pid" "$T/err" ||
			bad "read-write mount refused without naming the read-only one: $(cat "$T/err")"
	fi
	"$UEXT4" mkdir "$A" /x 2> "$T/err" && bad "mkdir worked while a read-only mount holds the image"
	grep -qF "mounted on $T/ro" "$T/err" || bad "mkdir refused without naming the read-only mount: $(cat "$T/err")"
	fusermount3 -u "$T/ro" || bad "fusermount3 -u of the read-only mount"
	flock "$A" true
	ok_since $f "a read-write mount and write commands are refused while a read-only mount holds the image"
	f=$FAILS

	note "3. a mount right after umount waits for the old server (generic/604)"
	"$UEXT4" mount "$A" "$T/rw" || fail "mount"
	echo data > "$T/rw/g" && sync || bad "write g"
	pid=$(lock_pid "$A")
	# The old server stopped: its mount goes, its write-back cannot finish.
	kill -STOP "$pid"
	fusermount3 -u "$T/rw" || bad "fusermount3 -u with the server stopped"
	"$UEXT4" mount "$A" "$T/rw" 2> "$T/err" &
	new=$!
	for ((i = 0; i < 300; i++)); do # bounded poll for the new mount's wait on the lock
		lock_waiter "$A" && break
		kill -0 "$new" 2> /dev/null || break
		sleep 0.1
	done
	lock_waiter "$A" || bad "the new mount does not wait for the old server's lock"
	kill -CONT "$pid"
	if wait "$new"; then
		MOUNTS+=("$T/rw")
		[ "$(cat "$T/rw/g")" = data ] || bad "g after the remount"
		"$UEXT4" umount "$T/rw" || bad "umount after the remount"
	else
		bad "a mount right after umount failed: $(cat "$T/err")"
	fi
	ok_since $f "a mount right after umount waits for the old server"
	fsck_clean "$A" || bad "e2fsck of a.img"
	f=$FAILS

	# 3b. The same on a block device, the new mount started while the old
	# mount is still in the mount table (fstests' `_scratch_unmount &` just
	# before it): the old server holds the device O_EXCL until it has
	# written back, which is not a kernel mount; the new one waits.
	if can_loop; then
		"$UEXT4" mkfs -q "$T/b.img" 64M || fail "mkfs b.img"
		dev=$(losetup -f --show "$T/b.img") || fail "losetup"
		"$UEXT4" mount "$dev" "$T/rw" || fail "mount $dev"
		echo data > "$T/rw/g" || bad "write g on $dev"
		pid=$(lock_pid "$dev")
		mkdir -p "$T/rw2"
		kill -STOP "$pid"
		"$UEXT4" mount "$dev" "$T/rw2" 2> "$T/err" &
		new=$!
		fusermount3 -u "$T/rw" || bad "fusermount3 -u with the server stopped ($dev)"
		for ((i = 0; i < 300; i++)); do # bounded poll for the new mount's wait on the lock
			lock_waiter "$dev" && break
			kill -0 "$new" 2> /dev/null || break
			sleep 0.1
		done
		kill -CONT "$pid"
		if wait "$new"; then
			MOUNTS+=("$T/rw2")
			[ "$(cat "$T/rw2/g")" = data ] || bad "g after the remount of $dev"
			"$UEXT4" umount "$T/rw2" || bad "umount of $dev after the remount"
		else
			bad "a mount of $dev right after umount failed: $(cat "$T/err")"
		fi
		flock "$dev" true
		fsck_clean "$dev" || bad "e2fsck of $dev"
		losetup -d "$dev"
		ok_since $f "a block device: a mount started before the old one left the mount table waits for its server"
	else
		echo "SKIP part 3b: no root or free loop device"
	fi
fi

san_check
[ $FAILS = 0 ] || fail "$FAILS failures"
echo "PASS"
