#!/bin/bash
# nbd.sh - images on an NBD export (src/nbd.c), served by nbdkit's file
# plugin on a Unix socket:
#   log     a read-write FUSE mount -o discard of nbd+unix:///?socket=...;
#           nbdkit's log filter must show Flush, FUA writes (the journal's
#           commit blocks) and Trim (of the blocks a deleted file freed);
#           then e2fsck -fn of the file, and the kernel's view of the file
#           equals what the library reads over NBD.
#   punch   the same -o discard on the image file: rm frees blocks, the file
#           loses that much allocation (fallocate PUNCH_HOLE).
#   kill    a writer on a FUSE mount of the export writes and fsyncs files;
#           nbdkit is killed (-9) under it: the writer gets an error within a
#           bound (no hang), the server's log names the URI and the NBD
#           failure; nbdkit restarts on the same file, `uext4 recover URI`
#           replays the journal, e2fsck -fn is clean, every file fsynced
#           before the kill has its contents, and the kernel sees the same
#           tree as the library.
#   cli     mkdir/put/rm/ls/info/recover/cat on the URI, a daemonized mount
#           and `uext4 umount` of it; mkfs onto the export is refused.
#   errors  connecting to a socket nobody serves is a clear error naming it.
#   variants  model.sh and oracle.sh with UEXT4_NBD=1 (the same test code on
#           the NBD backend; NBD_VARIANTS=0 leaves them out).
# test-timeout: 600
set -uo pipefail
. "$(dirname "$0")/lib.sh"
setup_traps
. "$(dirname "$0")/nbd.inc"
nbd_have || skip "nbdkit (with its file plugin) is not installed (Debian: nbdkit)"
need e2fsck
[ -x "$UEXT4" ] || fail "$UEXT4 not built (run make)"
[ -x "$WALK" ] || fail "$WALK not built (run make)"
[ -e /dev/fuse ] || skip "no /dev/fuse"
DIR=$(mktemp_dir)
test_seed nbd NBD_SEED
RANDOM=$SEED

# kernel_matches IMG URI WHAT: the kernel's tree of IMG equals the library's over URI.
kernel_matches() {
	local img=$1 uri=$2 what=$3 kmnt=$DIR/kmnt
	can_loop || { echo "no loop devices: kernel comparison ($what) skipped"; return 0; }
	mkdir -p "$kmnt"
	kmount "$img" "$kmnt" || { bad "$what: the kernel cannot mount the image"; return; }
	"$WALK" --exclude=lost+found posix "$kmnt" > "$DIR/kernel.txt"
	kumount "$kmnt"
	"$WALK" --exclude=lost+found lib "$uri" > "$DIR/lib.txt" || bad "$what: walk lib over NBD failed"
	if cmp -s "$DIR/kernel.txt" "$DIR/lib.txt"; then
		echo "ok: $what: the kernel's tree equals the library's over NBD ($(wc -l < "$DIR/lib.txt") paths)"
	else
		bad "$what: the kernel's tree differs from the library's over NBD:"
		diff -u "$DIR/kernel.txt" "$DIR/lib.txt" | head -20
	fi
}

# count LOG WORD...: requests in nbdkit's log whose line matches all words.
count() {
	local log=$1 n
	shift
	n=$(grep -E "connection=[0-9]+ $1 " "$log" | grep -cE -- "${2:-.}")
	echo "$n"
}

test_log() {
	note "log: Flush, FUA and Trim reach the server"
	local img=$DIR/log.img mnt=$DIR/mnt-log log=$DIR/nbdkit-requests.log n
	mke2fs -q -F -t ext4 "$img" 64M || fail "mke2fs"
	nbd_serve "$img" --filter=log -- logfile="$log" || { bad "nbdkit did not start"; return; }
	mkdir -p "$mnt"
	fuse_rw "$NBD_URI" "$mnt" discard || { bad "FUSE mount -o discard of $NBD_URI failed"; return; }
	head -c $((1024 * 1024 + RANDOM)) /dev/urandom > "$DIR/a"
	dd if="$DIR/a" of="$mnt/a" bs=64k conv=fsync status=none || bad "writing /a failed"
	mkdir "$mnt/d" && dd if="$DIR/a" of="$mnt/d/b" bs=64k conv=fsync status=none ||
		bad "writing /d/b failed"
	local trims_before
	trims_before=$(count "$log" Trim)
	rm "$mnt/a" || bad "rm /a failed"
	# The next commit (this fsync) releases /a's blocks: discarded then.
	dd if=/dev/zero of="$mnt/c" bs=4k count=1 conv=fsync status=none || bad "writing /c failed"
	fusermount3 -u "$mnt"
	wait "$FUSE_PID" || { bad "the FUSE server failed:"; cat "$mnt.log"; }
	FUSE_PID=
	nbd_stop
	n=$(count "$log" Flush)
	[ "$n" -gt 0 ] && echo "ok: $n Flush requests" || bad "no Flush request in the server's log"
	n=$(count "$log" Write 'fua=1')
	[ "$n" -gt 0 ] && echo "ok: $n FUA writes" || bad "no FUA write in the server's log"
	n=$(count "$log" Trim)
	# /a is > 1 MiB of 1 KiB blocks, freed by one commit: one trim of >= 1 MiB.
	local biggest=0 c
	for c in $(grep -E "connection=[0-9]+ Trim " "$log" | grep -oE 'count=0x[0-9a-f]+' | cut -d= -f2); do
		[ $((c)) -gt "$biggest" ] && biggest=$((c))
	done
	if [ "$n" -gt "$trims_before" ] && [ "$biggest" -ge $((1024 * 1024)) ]; then
		echo "ok: $((n - trims_before)) Trim requests after rm (-o discard), the biggest $biggest bytes"
	else
		bad "no Trim of /a's blocks after rm with -o discard ($n trims, $trims_before before rm, biggest $biggest bytes)"
	fi
	fsck_clean "$img" || bad "e2fsck -fn after the log test"
	nbd_serve "$img" -r || { bad "nbdkit did not restart"; return; }
	"$UEXT4" cat "$NBD_URI" /d/b | cmp -s - "$DIR/a" || bad "/d/b read back over NBD differs"
	kernel_matches "$img" "$NBD_URI" "log"
	nbd_stop
}

# The writer: files f0, f1, ... of random sizes, each fsynced, its name
# appended to $DIR/fsynced once fsync returned.  Stops at the first error.
writer() {
	local mnt=$1 i=0 size
	while [ $i -lt 100000 ]; do
		size=$(( (RANDOM * 7 + i * 4093) % 200000 + 1 ))
		head -c "$size" "$DIR/pool" > "$DIR/want-f$i" || return 2
		dd if="$DIR/want-f$i" of="$mnt/f$i" bs=64k conv=fsync status=none 2> "$DIR/writer.err" ||
			{ echo "f$i" > "$DIR/writer.failed"; return 1; }
		echo "f$i" >> "$DIR/fsynced"
		i=$((i + 1))
	done
	return 0
}

test_kill() {
	note "kill: nbdkit killed under a writer"
	local img=$DIR/kill.img mnt=$DIR/mnt-kill uri n wpid wrc i ok=0
	mke2fs -q -F -t ext4 "$img" 128M || fail "mke2fs"
	head -c 200000 /dev/urandom > "$DIR/pool"
	: > "$DIR/fsynced"
	nbd_serve "$img" || { bad "nbdkit did not start"; return; }
	uri=$NBD_URI
	mkdir -p "$mnt"
	fuse_rw "$uri" "$mnt" "commit=1" || { bad "FUSE mount of $uri failed"; return; }
	timeout 120 bash -c "$(declare -f writer); DIR=$DIR; RANDOM=$SEED; writer $mnt" &
	wpid=$!
	# Kill once 20 files are durable (polling the writer's progress file).
	for ((i = 0; i < 600; i++)); do
		[ "$(wc -l < "$DIR/fsynced")" -ge 20 ] && break
		kill -0 $wpid 2> /dev/null || break
		sleep 0.1 # polling the writer's progress, 60 s deadline
	done
	n=$(wc -l < "$DIR/fsynced")
	nbd_stop -9
	echo "killed nbdkit after $n fsynced files"
	wait $wpid
	wrc=$?
	case $wrc in
	1) echo "ok: the writer got an error after the kill ($(cat "$DIR/writer.failed"): $(head -1 "$DIR/writer.err"))" ;;
	124) bad "the writer hung: still running 120 s after the start" ;;
	*) bad "the writer ended with status $wrc, not an I/O error" ;;
	esac
	[ "$n" -ge 20 ] || bad "only $n files were fsynced before the kill"
	fusermount3 -u "$mnt" 2> /dev/null || umount -l "$mnt"
	if timeout 60 tail --pid="$FUSE_PID" -f /dev/null; then
		wait "$FUSE_PID"
		echo "FUSE server exited with status $? after the kill"
	else
		bad "the FUSE server did not exit within 60 s of the unmount"
		kill -9 "$FUSE_PID"
	fi
	FUSE_PID=
	# The URI, and the failed request with libnbd's own words (nbd_pwrite: ...).
	if grep -F "$uri" "$mnt.log" | grep -qE "NBD (read|write|FUA write|flush) of [0-9]+ bytes at offset [0-9]+ failed: nbd_"; then
		echo "ok: the server's message names the URI and libnbd's error: $(grep -F "$uri" "$mnt.log" | head -1)"
	else
		bad "no message naming $uri and the NBD failure in the server's log:"
		cat "$mnt.log"
	fi
	nbd_serve "$img" || { bad "nbdkit did not restart on $img"; return; }
	"$UEXT4" recover "$NBD_URI" || bad "uext4 recover $NBD_URI failed"
	nbd_stop
	fsck_clean "$img" || bad "e2fsck -fn after the kill and recovery"
	nbd_serve "$img" -r || { bad "nbdkit did not restart"; return; }
	while read -r f; do
		if "$UEXT4" cat "$NBD_URI" "/$f" 2> /dev/null | cmp -s - "$DIR/want-$f"; then
			ok=$((ok + 1))
		else
			bad "$f was fsynced before the kill but its contents differ after recovery"
		fi
	done < "$DIR/fsynced"
	echo "ok: $ok of $(wc -l < "$DIR/fsynced") fsynced files intact after recovery"
	kernel_matches "$img" "$NBD_URI" "kill"
	nbd_stop
}

test_cli() {
	note "cli: the write and read commands, mount and umount on a URI"
	local img=$DIR/cli.img mnt=$DIR/mnt-cli out
	mke2fs -q -F -t ext4 "$img" 32M || fail "mke2fs"
	head -c 300000 /dev/urandom > "$DIR/cli.data"
	nbd_serve "$img" || { bad "nbdkit did not start"; return; }
	"$UEXT4" mkdir "$NBD_URI" /dir || bad "uext4 mkdir over NBD"
	"$UEXT4" put "$NBD_URI" "$DIR/cli.data" /dir/data || bad "uext4 put over NBD"
	"$UEXT4" put "$NBD_URI" "$DIR/cli.data" /gone || bad "uext4 put over NBD"
	"$UEXT4" rm "$NBD_URI" /gone || bad "uext4 rm over NBD"
	"$UEXT4" ls "$NBD_URI" / | grep -qx dir || bad "uext4 ls over NBD does not list /dir"
	"$UEXT4" info "$NBD_URI" > /dev/null || bad "uext4 info over NBD"
	"$UEXT4" recover "$NBD_URI" > /dev/null || bad "uext4 recover over NBD (clean image)"
	"$UEXT4" cat "$NBD_URI" /dir/data | cmp -s - "$DIR/cli.data" || bad "uext4 cat over NBD differs"
	# A daemonized mount, and `uext4 umount` waiting for its write-back.
	mkdir -p "$mnt"
	"$UEXT4" mount "$NBD_URI" "$mnt" || bad "uext4 mount (daemon) of $NBD_URI"
	MOUNTS+=("$mnt")
	cp "$DIR/cli.data" "$mnt/dir/copy" || bad "cp into the mount"
	if out=$("$UEXT4" umount "$mnt" 2>&1); then
		echo "ok: uext4 umount of the NBD mount: ${out:-no message}"
	else
		bad "uext4 umount of the NBD mount: $out"
	fi
	# mkfs onto an export is refused (it would create a file named like the URI).
	if out=$(cd "$DIR" && "$UEXT4" mkfs "$NBD_URI" 2>&1); then
		bad "uext4 mkfs onto $NBD_URI succeeded"
	else
		grep -qF "NBD export" <<< "$out" && echo "ok: mkfs refused: $out" || bad "mkfs: $out"
	fi
	[ -e "$DIR/nbd+unix:" ] && bad "mkfs created a file named like the URI"
	nbd_stop
	fsck_clean "$img" || bad "e2fsck -fn after the CLI commands"
	nbd_serve "$img" -r || { bad "nbdkit did not restart"; return; }
	"$UEXT4" cat "$NBD_URI" /dir/copy | cmp -s - "$DIR/cli.data" || bad "/dir/copy (written by the mount) differs"
	kernel_matches "$img" "$NBD_URI" "cli"
	nbd_stop
}

# The same discard path on the file backend: a hole is punched in the image.
test_punch() {
	note "punch: -o discard on an image file punches holes"
	local img=$DIR/punch.img mnt=$DIR/mnt-punch before after
	head -c 8192 /dev/zero > "$DIR/probe"
	fallocate -p -o 0 -l 4096 "$DIR/probe" 2> /dev/null ||
		{ echo "SKIP (punch): $DIR's file system cannot punch holes"; return; }
	mke2fs -q -F -t ext4 "$img" 64M || fail "mke2fs"
	mkdir -p "$mnt"
	fuse_rw "$img" "$mnt" discard || { bad "FUSE mount -o discard of $img failed"; return; }
	head -c $((4 * 1024 * 1024)) /dev/urandom > "$mnt/big" && sync "$mnt/big" || bad "writing /big failed"
	before=$(stat -c %b "$img")
	rm "$mnt/big" || bad "rm /big"
	dd if=/dev/zero of="$mnt/c" bs=4k count=1 conv=fsync status=none || bad "writing /c failed"
	after=$(stat -c %b "$img")
	fusermount3 -u "$mnt"
	wait "$FUSE_PID" || { bad "the FUSE server failed:"; cat "$mnt.log"; }
	FUSE_PID=
	# 4 MiB = 8192 sectors freed by one commit; allow for metadata written meanwhile.
	if [ $((before - after)) -ge 7000 ]; then
		echo "ok: the image file lost $(( (before - after) / 2 )) KiB of allocation after rm (hole punched)"
	else
		bad "the image's allocation went from $before to $after sectors after rm with -o discard"
	fi
	fsck_clean "$img" || bad "e2fsck -fn after the punch test"
}

test_errors() {
	note "errors: no server behind the socket"
	local out uri="nbd+unix:///?socket=$DIR/nobody.sock"
	if out=$(timeout 30 "$UEXT4" ls "$uri" / 2>&1); then
		bad "uext4 ls on $uri succeeded"
	elif grep -qF "$uri" <<< "$out"; then
		echo "ok: $out"
	else
		bad "the error does not name $uri: $out"
	fi
}

variants() {
	[ "${NBD_VARIANTS:-1}" = 1 ] || { echo "NBD_VARIANTS=0: model/oracle over NBD skipped"; return; }
	note "variants: model.sh over NBD"
	UEXT4_NBD=1 MODEL_KINDS=default MODEL_OPS=${NBD_MODEL_OPS:-4000} MODEL_SEED=$SEED \
		bash "$TOP/tests/model.sh" || bad "model.sh over NBD"
	# The library and the CLI against the kernel; FUSE over NBD (a minute
	# for the 5 GiB image) only with NBD_ORACLE_FUSE=1: the cases above
	# already mount the export with FUSE.
	note "variants: oracle.sh over NBD (kind default)"
	local fk=none
	[ "${NBD_ORACLE_FUSE:-0}" = 1 ] && fk=default
	UEXT4_NBD=1 ORACLE_KINDS=default ORACLE_FUSE_KINDS=$fk bash "$TOP/tests/oracle.sh" ||
		bad "oracle.sh over NBD"
}

# Under ThreadSanitizer the variants (model, oracle) take minutes: only the
# NBD-specific cases run there (the pool of connections is what it checks).
DEFAULT_TESTS="log punch kill cli errors variants"
case "$UEXT4_BUILD" in *tsan*) DEFAULT_TESTS="log punch kill cli errors" ;; esac
for t in ${NBD_TESTS:-$DEFAULT_TESTS}; do
	case $t in
	punch) test_punch ;;
	cli) test_cli ;;
	log) test_log ;;
	kill) test_kill ;;
	errors) test_errors ;;
	variants) variants ;;
	*) fail "unknown NBD test $t" ;;
	esac
done
if [ "$FAILS" != 0 ]; then
	echo "$FAILS NBD check(s) failed (seed $SEED)"
	exit 1
fi
echo "all NBD checks passed (seed $SEED)"
