#!/bin/bash
# fuse_wbcache.sh - the default mount (FUSE writeback cache) against the
# kernel's ext4, where the cache used to make it differ (fstests generic/436,
# 490, 539, 706, 553, 423, 451).  tests/fuse_wbcache.c does each case on a
# kernel loop mount and on a uext4 mount; the outputs must be equal.
#   seek       SEEK_DATA/SEEK_HOLE of files whose data is still in dirty
#              pages (generic/436 & co. saw ENXIO for 8 KiB just written)
#   immutable  chattr +i on an open file with dirty pages, then
#              copy_file_range into it: EPERM at once, fsync fine, and the
#              data written before the flag on disk (generic/553)
#   tsorder    generic/423: objects made one after another (some stamped by
#              the server, the written file by the kernel's cache) never
#              have earlier times than the one made before
#   dio        AIO O_DIRECT writes racing buffered reads: a buffered read
#              after each write sees it (generic/451), on the default mount
#              and with -o nowriteback
#   maxsize    generic/308: writes at, across and up to ext4's largest file
#              size: EFBIG or a short count at write(2), as on the kernel,
#              not a cached write that write-back loses (uext4 umount must
#              report no failed write-back); a new file written at once
#              past it (which the cache cannot see) gets EFBIG at fsync
#   flagctime  generic/277: chattr +A then -A on a file changes the ctime
#              stat shows at once (the kernel's cache held the old one), and
#              that ctime is on disk
# e2fsck -fn must be clean after the uext4 mount.
# test-timeout: 120
# run-alone: seek failed once (2026-12-07) beside another test: SEEK_DATA on
# a file just written answered ENXIO, as if the server had not yet seen the
# WRITE the kernel's write-back sent before the LSEEK (a WRITE and the LSEEK
# on two server threads, or the page's write-back ended before its WRITE was
# served, so op_lseek()'s invalidation had nothing to wait for).  Alone it
# passed 7 of 7 runs, with a sync loop beside it 4 of 4.  Until op_lseek()
# waits for the inode's WRITEs under way, this test runs by itself.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
fuse_test
need_loop
need_helper H fuse_wbcache
KI=$T/k.img UI=$T/u.img K=$T/k U=$T/u
mkdir -p "$K" "$U"
mke2fs -q -F -t ext4 "$KI" 256M || fail "mke2fs"
cp "$KI" "$UI"

uext4_mount() { # the default read-write mount (or with OPTS), in the foreground
	local i
	"$UEXT4" mount -f "$@" "$UI" "$U" > "$T/u.log" 2>&1 &
	FUSE_PID=$!
	MOUNTS+=("$U")
	for ((i = 0; i < 300; i++)); do
		[ "$(findmnt -n -o TARGET "$U" 2> /dev/null)" = "$U" ] && return 0
		kill -0 "$FUSE_PID" 2> /dev/null || { cat "$T/u.log"; fail "uext4 mount failed"; }
		sleep 0.1 # polling for the mount to appear, with a 30 s deadline
	done
	fail "uext4 mount did not appear in 30 s"
}

# run CASE ARGS...: the helper's CASE in a fresh directory of each mount;
# outputs in $T/CASE.k and $T/CASE.u, which must be equal.
run() {
	local c=$1
	shift
	mkdir "$K/$c" "$U/$c" || fail "mkdir $c"
	"$H" "$c" "$K/$c" "$@" > "$T/$c.k" || fail "$c on the kernel's ext4"
	"$H" "$c" "$U/$c" "$@" > "$T/$c.u" || { cat "$T/$c.u"; fail "$c on the uext4 mount"; }
	if ! cmp -s "$T/$c.k" "$T/$c.u"; then
		diff "$T/$c.k" "$T/$c.u" | head -20
		fail "$c: the uext4 mount differs from the kernel's ext4"
	fi
	echo "$c: as on the kernel's ext4"
}

kmount "$KI" "$K" rw || fail "kernel mount"
uext4_mount

# FUSE_WBCACHE_CASES="seek ..." runs only those (to show one failing alone).
CASES=" ${FUSE_WBCACHE_CASES:-seek immutable tsorder maxsize dio flagctime} "
for c in seek immutable tsorder maxsize; do
	case "$CASES" in *" $c "*) run $c ;; esac
done
# No write the mount took may have failed at write-back (maxsize's).
if grep -E "writing back inode|write-back failed" "$T/u.log"; then
	fail "a write-back failed on the default mount"
fi
# A new file written at once past the largest size: the cache cannot tell
# (FUSE knows no largest size), so its fsync must fail with EFBIG, and the
# server must name it.
case "$CASES" in *" maxsize "*)
	run maxfresh
	grep -q "writing back inode .*: File too large" "$T/u.log" ||
		fail "maxfresh: the server did not report the refused write-back" ;;
esac
SEED=${SEED:-$RANDOM}
echo "dio: seed $SEED"
dio() { # dio OPTS: generic/451's race on a uext4 mount with -o OPTS
	"$H" dio "$U/dio.$1" "$SEED" > "$T/dio.$1" || { cat "$T/dio.$1"; fail "dio ($1): stale data"; }
	echo "dio ($1): $(tail -1 "$T/dio.$1")"
}
# flagctime DIR: "changed" if chattr moved the ctime stat shows; the new one
# in $T/flagctime.last.
flagctime() {
	local f=$1/fc c1 c2
	touch "$f" && c1=$(stat -c %Z "$f") || fail "touch $f"
	# Wait for the clock to pass c1's second: the ctime must be able to move.
	while [ "$(date +%s)" -le "$c1" ]; do sleep 0.05; done
	chattr +A "$f" && chattr -A "$f" || fail "chattr on $f"
	c2=$(stat -c %Z "$f")
	echo "$c2" > "$T/flagctime.last"
	[ "$c2" -gt "$c1" ] && echo changed || echo "unchanged ($c1)"
}
case "$CASES" in *" flagctime "*)
	flagctime "$K" > "$T/flagctime.k"
	flagctime "$U" > "$T/flagctime.u"
	[ "$(cat "$T/flagctime.k")" = changed ] || fail "flagctime: the kernel's ctime did not move"
	[ "$(cat "$T/flagctime.u")" = changed ] || fail "flagctime: the ctime stat shows on the uext4 mount did not move after chattr: $(cat "$T/flagctime.u")"
	echo "flagctime: as on the kernel's ext4" ;;
esac
case "$CASES" in *" dio "*)
	"$H" dio "$K/dio" "$SEED" > "$T/dio.k" || { cat "$T/dio.k"; fail "dio on the kernel's ext4"; }
	dio writeback
	fuse_umount "$U"
	uext4_mount -o nowriteback
	dio nowriteback ;;
esac

fuse_umount "$U"
umount "$K"
fsck_clean "$UI" || fail "e2fsck after the uext4 mount"
case "$CASES" in *" flagctime "*)
	ondisk=$(debugfs -R "stat /fc" "$UI" 2> /dev/null | sed -n 's/^ *ctime: *0x\([0-9a-f]*\).*/\1/p')
	[ -n "$ondisk" ] && [ $((16#$ondisk)) = "$(cat "$T/flagctime.last")" ] ||
		fail "flagctime: on disk ctime 0x$ondisk, the mount showed $(cat "$T/flagctime.last")" ;;
esac
# What each image holds, read by debugfs.
for f in /immutable/dst0; do
	case "$CASES" in *" immutable "*) ;; *) continue ;; esac
	k=$(debugfs -R "cat $f" "$KI" 2> /dev/null | md5sum) u=$(debugfs -R "cat $f" "$UI" 2> /dev/null | md5sum)
	[ "$k" = "$u" ] || fail "$f on disk differs from the kernel's"
done
san_check || fail "sanitizer reports"
echo "fuse_wbcache: OK"
