#!/bin/bash
# mmp.sh - multi-mount protection (-O mmp, src/mmp.c), as the kernel's
# fs/ext4/mmp.c: images made by mke2fs -O mmp -E mmp_update_interval=1
# (the check interval is then the kernel's minimum, 5 s: an opener that
# finds the block held waits 2 * 5 + 1 = 11 s), 1 KiB and 4 KiB blocks,
# the two sizes at once.  The image is served by nbdkit (the shared storage
# MMP is for): two uext4 processes reach it over NBD, where no local lock
# or mount table stands between them; the kernel mounts the file on a loop
# device.
#   held     a uext4 FUSE mount holds the image; a second uext4 (`uext4
#            mkdir`), a second FUSE mount and the kernel's mount are refused
#            after the wait, naming the holder's node; the holder still writes.
#   clean    its unmount leaves seq CLEAN (debugfs dump_mmp); e2fsck -fn clean.
#   crash    the holder is killed (-9) after an fsync: the next opener waits
#            the interval, takes over, recovers the journal, releases the
#            block; the fsynced file is there, e2fsck -fn clean.
#   kernel   (4 KiB) the kernel holds the image (loop mount): uext4 is refused naming
#            the node and the kernel's device; after the kernel's unmount
#            the block is CLEAN and e2fsck -fn clean.
#   ro       a read-only open of a held image reads it and writes nothing.
#   stall    (1 KiB) a holder frozen past an opener's wait loses the block;
#            resumed, it records the error and goes read-only (errors=remount-ro).
#   mkfs     uext4 mkfs -O mmp [-E mmp_update_interval=N] gives the MMP lines
#            of mke2fs's dumpe2fs -h, and the block dump_mmp shows.
# run-in: release asan-long
# test-timeout: 300
set -uo pipefail
. "$(dirname "$0")/lib.sh"
setup_traps
. "$(dirname "$0")/nbd.inc"
need mke2fs debugfs dumpe2fs e2fsck timeout
nbd_have || skip "nbdkit (with its file plugin) is not installed (Debian: nbdkit)"
need_fuse
need_built "$UEXT4"
DIR=$(mktemp_dir)
san_logs_in "$DIR"
NODE=$(uname -n)
CLEAN=ff4d4d50
WAIT=11 # 2 * max(s_mmp_update_interval, 5) + 1

mmp_field() { debugfs -R dump_mmp "$1" 2> /dev/null | sed -n "s/^$2: //p"; }

# refused_mmp WHAT RC LOG [DEVICE]: RC nonzero and LOG names our node (and DEVICE).
refused_mmp() {
	if [ "$2" = 0 ]; then
		bad "$1 was not refused"
	elif ! grep -q "in use by node $NODE, device ${4:-}" "$3"; then
		bad "$1: refused (exit $2) without naming node $NODE${4:+ and device $4}: $(head -c 600 "$3")"
	else
		echo "ok: $1 refused: $(grep -o 'in use by node [^:]*' "$3" | head -1)"
	fi
}

is_clean() { # is_clean IMG WHAT: seq CLEAN and e2fsck -fn clean
	local s
	s=$(mmp_field "$1" sequence)
	[ "$s" = $CLEAN ] || bad "$2: MMP sequence is $s, not CLEAN ($CLEAN)"
	fsck_clean "$1" || bad "$2: e2fsck -fn not clean"
}

# kernel_refused IMG WHAT: the kernel's loop mount of IMG fails with its MMP message.
kernel_refused() {
	local loop rc
	loop=$(losetup -f --show "$1") || { bad "$2: losetup failed"; return; }
	mkdir -p "$D/kmnt"
	mount -t ext4 "$loop" "$D/kmnt" > "$D/kmount.log" 2>&1
	rc=$?
	if [ $rc = 0 ]; then
		bad "$2: the kernel mounted an image a uext4 mount holds"
		umount "$D/kmnt"
	else
		dmesg | grep "(device ${loop#/dev/}): ext4_multi_mount_protect" > "$D/dmesg" || true
		if grep -q "already active" "$D/dmesg"; then
			echo "ok: $2: the kernel's mount refused: $(grep -o 'last update node.*' "$D/dmesg" | tail -1)"
		else
			bad "$2: the kernel's mount failed (exit $rc) but not by MMP: $(dmesg | grep "device ${loop#/dev/}" | tail -3)"
		fi
	fi
	losetup -d "$loop"
}

# held: a FUSE mount holds the image; three other openers at once.
case_held() {
	local t0 rc
	CASE="held $B"
	fuse_rw "$URI" "$D/m1" || { bad "FUSE mount of the export failed"; return; }
	[ "$(mmp_field "$IMG" sequence)" != $CLEAN ] || bad "the mount did not claim the MMP block"
	[ "$(mmp_field "$IMG" node_name)" = "$NODE" ] || bad "the MMP block does not name node $NODE"
	t0=$SECONDS
	(timeout -k 5 90 "$UEXT4" mkdir "$URI" /second > "$D/mkdir.log" 2>&1; echo $? > "$D/mkdir.rc") &
	p1=$!
	mkdir -p "$D/m2"
	MOUNTS+=("$D/m2")
	(timeout -k 5 90 "$UEXT4" mount -f -o rw "$URI" "$D/m2" > "$D/m2.log" 2>&1 < /dev/null
	 echo $? > "$D/m2.rc") &
	p2=$!
	can_loop && kernel_refused "$IMG" "kernel mount, uext4 holding"
	wait $p1 $p2
	refused_mmp "a second uext4 (mkdir)" "$(cat "$D/mkdir.rc")" "$D/mkdir.log"
	refused_mmp "a second FUSE mount" "$(cat "$D/m2.rc")" "$D/m2.log"
	rc=$((SECONDS - t0))
	[ $rc -ge $WAIT ] || bad "the refusals took $rc s, less than the $WAIT s wait"
	# The holder kept writing, and a read-only open reads the held image.
	mkdir "$D/m1/held" && echo data > "$D/m1/held/f" && sync "$D/m1/held/f" ||
		bad "the holder cannot write after the refusals"
	CASE="ro $B"
	s0=$(mmp_field "$IMG" sequence)
	timeout -k 5 30 "$UEXT4" ls "$URI" / > "$D/ls.log" 2>&1 || bad "read-only ls of a held image failed: $(cat "$D/ls.log")"
	grep -qw held "$D/ls.log" || bad "read-only ls does not show /held"
	CASE="clean $B"
	fusermount3 -u "$D/m1"
	wait "$FUSE_PID" || bad "the holder's server failed: $(cat "$D/m1.log")"
	is_clean "$IMG" "after the holder's unmount"
	debugfs -R "cat /held/f" "$IMG" 2> /dev/null | grep -q data || bad "/held/f lost"
	debugfs -R "ls /" "$IMG" 2> /dev/null | grep -qw second && bad "the refused mkdir made /second"
}

# crash: the holder is killed; the next opener takes over after the wait.
case_crash() {
	local t0 dt s
	CASE="crash $B"
	fuse_rw "$URI" "$D/m1" || { bad "FUSE mount of the export failed"; return; }
	echo kept > "$D/m1/fsynced" && sync "$D/m1/fsynced" || bad "write + fsync failed"
	kill -9 "$FUSE_PID"
	wait "$FUSE_PID" 2> /dev/null
	fusermount3 -u -z "$D/m1" 2> /dev/null
	s=$(mmp_field "$IMG" sequence)
	[ "$s" != $CLEAN ] || bad "the killed holder left the block CLEAN"
	t0=$SECONDS
	timeout -k 5 90 "$UEXT4" mkdir "$URI" /after > "$D/after.log" 2>&1 ||
		bad "the opener after the crash failed: $(cat "$D/after.log")"
	dt=$((SECONDS - t0))
	[ $dt -ge $WAIT ] || bad "the takeover took $dt s, less than the $WAIT s wait"
	grep -q "waiting $WAIT s" "$D/after.log" || bad "the opener did not say it waits: $(cat "$D/after.log")"
	echo "ok: took over a killed holder's image in $dt s"
	is_clean "$IMG" "after the takeover"
	debugfs -R "cat /fsynced" "$IMG" 2> /dev/null | grep -q kept || bad "/fsynced lost"
	debugfs -R "ls /" "$IMG" 2> /dev/null | grep -qw after || bad "/after missing"
}

# kernel: the kernel holds the image; uext4 over NBD is refused.
case_kernel() {
	local loop rc
	CASE="kernel $B"
	can_loop || { echo "no loop devices: kernel-held case skipped"; return; }
	loop=$(losetup -f --show "$IMG") || { bad "losetup failed"; return; }
	mkdir -p "$D/km"
	if ! mount -t ext4 "$loop" "$D/km"; then
		bad "the kernel cannot mount the image"; losetup -d "$loop"; return
	fi
	mkdir "$D/km/kdir"
	timeout -k 5 90 "$UEXT4" mkdir "$URI" /k > "$D/k.log" 2>&1
	rc=$?
	refused_mmp "uext4 mkdir, kernel holding" $rc "$D/k.log" "${loop#/dev/}"
	umount "$D/km"
	losetup -d "$loop"
	is_clean "$IMG" "after the kernel's unmount"
	debugfs -R "ls /" "$IMG" 2> /dev/null | grep -qw k && bad "the refused mkdir made /k"
}

# stall: the holder is frozen (SIGSTOP) longer than an opener waits; the
# opener takes the block; the holder, resumed, finds the block no longer
# its own: an error under errors=remount-ro, recorded in the superblock,
# and its writes are refused.  The image is then marked with errors, as
# the kernel marks it, so this case comes last and e2fsck is not asked.
case_stall() {
	local i
	CASE="stall $B"
	fuse_rw "$URI" "$D/m1" errors=remount-ro || { bad "FUSE mount of the export failed"; return; }
	echo x > "$D/m1/before" && sync "$D/m1/before" || bad "write + fsync failed"
	kill -STOP "$FUSE_PID"
	timeout -k 5 90 "$UEXT4" mkdir "$URI" /taken > "$D/taken.log" 2>&1 ||
		bad "the opener did not take the frozen holder's block: $(cat "$D/taken.log")"
	kill -CONT "$FUSE_PID"
	for ((i = 0; i < 200; i++)); do
		dumpe2fs -h "$IMG" 2> /dev/null | grep -q 'error function: *mmp_main' && break
		sleep 0.1 # polling for the resumed thread's error record, 20 s deadline
	done
	if [ $i = 200 ]; then
		bad "the resumed holder recorded no MMP error: $(dumpe2fs -h "$IMG" 2> /dev/null | grep -i error)"
	else
		echo "ok: the resumed holder found its MMP block taken and recorded the error"
	fi
	if mkdir "$D/m1/after-stall" 2> "$D/after-mkdir.log"; then
		bad "the holder still writes after losing the MMP block"
	elif grep -q "Read-only" "$D/after-mkdir.log"; then
		echo "ok: the holder went read-only (errors=remount-ro)"
	else
		bad "the holder's write failed, but not with EROFS: $(cat "$D/after-mkdir.log")"
	fi
	fusermount3 -u "$D/m1"
	wait "$FUSE_PID"
	[ "$(mmp_field "$IMG" sequence)" = $CLEAN ] || bad "the block is not left CLEAN by its last holder"
}

# run_size B: every case on a B-byte-block image, in the background with
# its own log and cleanup (its mounts, its nbdkit).
run_size() {
	B=$1
	D=$DIR/b$B
	IMG=$D/img
	mkdir -p "$D"
	TMPDIRS=() MOUNTS=()
	TMPDIR_LIST=$D/tmpdirs
	: > "$TMPDIR_LIST"
	trap nbd_cleanup EXIT
	mke2fs -q -F -t ext4 -b "$B" -O mmp -E mmp_update_interval=1 "$IMG" 32M ||
		fail "mke2fs -O mmp failed"
	nbd_serve "$IMG" || fail "nbdkit did not start"
	URI=$NBD_URI
	case_held
	case_crash
	# One of these each, to keep the test near a minute (the kernel also
	# meets a uext4 holder on both sizes, in case_held).
	if [ "$B" = 4096 ]; then case_kernel; else case_stall; fi
	nbd_stop
	exit $((FAILS > 0))
}

note "held, clean, crash, kernel, ro: 1 KiB and 4 KiB blocks at once"
(run_size 1024 > "$DIR/log.1024" 2>&1) &
P1=$!
(run_size 4096 > "$DIR/log.4096" 2>&1) &
P4=$!
wait $P1; R1=$?
wait $P4; R4=$?
for b in 1024 4096; do echo "---- $b-byte blocks"; cat "$DIR/log.$b"; done
[ $R1 = 0 ] || bad "1 KiB blocks: failed"
[ $R4 = 0 ] || bad "4 KiB blocks: failed"

note "mkfs: uext4 mkfs -O mmp against mke2fs"
CASE=mkfs
UUID=6f1c3a52-0d4e-4b8a-9c51-2e7f10a4b3c9
HSEED=1b2c3d4e-5f60-4718-8293-a4b5c6d7e8f9
TIME=1700000000
# dumpe2fs -h of both, minus what differs by nature: the lifetime writes
# and the superblock checksum over them (docs/mkfs.md), the MMP block's
# time (mke2fs writes the clock's, not E2FSPROGS_FAKE_TIME's).
header() {
	dumpe2fs -h "$1" 2>&1 | grep -v -e '^Lifetime writes:' -e '^Checksum:  ' -e 'mmp_update_'
}
mkdir -p "$DIR/k" "$DIR/u"
for v in 1024: 4096: 4096:,mmp_update_interval=1 1024:,mmp_update_interval=20; do
	opts="-b ${v%%:*} ${v#*:}" ext="hash_seed=$HSEED${v#*:}"
	# The same relative path in both: the block names the device as given.
	rm -f "$DIR/k/x.img" "$DIR/u/x.img"
	truncate -s 64M "$DIR/k/x.img"
	# shellcheck disable=SC2086
	(cd "$DIR/k" && E2FSPROGS_FAKE_TIME=$TIME mke2fs -q -F -t ext4 -U $UUID -E "$ext" \
		-O mmp,orphan_file,metadata_csum_seed -b "${v%%:*}" x.img > mke2fs.log 2>&1) ||
		{ bad "mke2fs $opts failed: $(cat "$DIR/k/mke2fs.log")"; continue; }
	# shellcheck disable=SC2086
	(cd "$DIR/u" && SOURCE_DATE_EPOCH=$TIME "$UEXT4" mkfs -q -U $UUID -E "$ext" \
		-O mmp -b "${v%%:*}" x.img 64M > mkfs.log 2>&1) ||
		{ bad "uext4 mkfs -O mmp $opts failed: $(cat "$DIR/u/mkfs.log")"; continue; }
	if diff <(header "$DIR/k/x.img") <(header "$DIR/u/x.img") > "$DIR/hdiff"; then
		echo "ok: -O mmp $opts: dumpe2fs -h equal to mke2fs's: $(header "$DIR/u/x.img" | grep -E '^MMP|mmp_(seq|check|node)' | tr -s ' ' | paste -sd';')"
	else
		bad "-O mmp $opts: dumpe2fs -h differs from mke2fs's:"
		cat "$DIR/hdiff"
	fi
	fsck_clean "$DIR/u/x.img" || bad "e2fsck -fn of uext4 mkfs -O mmp $opts"
	"$UEXT4" mkdir "$DIR/u/x.img" /d 2> "$DIR/mkdir.log" || bad "mkdir on our mmp image: $(cat "$DIR/mkdir.log")"
	is_clean "$DIR/u/x.img" "uext4 mkfs -O mmp $opts, then a write"
done
san_check "$DIR"
[ $FAILS = 0 ] || fail "$FAILS checks failed"
echo "PASS"
