#!/bin/bash
# orphan.sh - the orphan-path benchmarks (seed 000's stress-orphan, an
# unlink-heavy workload, fsync latency); not a test, `make bench` runs it
# through bench/run.sh.
#
# Workloads (bench/orphan_bench.c; THREADS = 1 2 4 8, a directory and a file
# per thread):
#   truncate     stress-orphan: each thread truncates its 4 KiB file one byte
#                at a time from 4096 down to 1 (4095 shrinking truncates, each
#                an orphan add + delete), then extends it back with a 4 KiB
#                pwrite at offset 0 (EXTEND=truncate: a growing ftruncate
#                instead); TRUNC_PASSES passes.  lib: uext4_setattr(SIZE);
#                the others: ftruncate() on an fd in the mount.  truncates/s.
#   unlink       create, write one 4 KiB block, close, unlink; UNLINK_FILES
#                per thread.  unlinks/s.
#   unlink-open  the same, unlinking while the file is open, then closing
#                (the orphan path).  unlinks/s.
#   fsync        append 4 KiB + fsync, FSYNC_K times per thread; fsyncs/s and
#                the fsync call's median and p99 latency in microseconds.
# Each workload runs on two kinds of image, made fresh (sparse, in a mktemp
# directory under /tmp) for every run: "orph" = mke2fs -O orphan_file (the
# orphan file; this Debian's mke2fs.conf does not enable it by default) and
# "list" = mke2fs -O ^orphan_file (the legacy s_last_orphan list), both
# -t ext4 -b 4096, IMG_SIZE (default 512M).  Targets, all in the same run:
#   lib      libuext4 directly (orphan_bench lib)
#   fuse     our FUSE mount (uext4 mount, read-write)
#   kernel   the kernel's ext4 on a loop device (root only)
#   fuse2fs  fuse2fs; slow, so it runs fewer iterations (FUSE2FS_*) and
#            a shorter cap (FUSE2FS_SECS); it keeps no orphan list, so
#            orph/list only differ in the image for it
#   nullfs   bench/nullfs --create, a FUSE server that does no work: only
#            the unlink workloads, without the write (it has none): the
#            ceiling of FUSE create+unlink round trips, shown as "-" variant
# Every point is capped at SECS seconds (FUSE2FS_SECS for fuse2fs): the
# threads stop between operations once it passes, and the rate is ops over
# the elapsed time either way; the "capped" column counts the runs that hit
# the cap.  Median of RUNS runs (default 3).  The last image each target
# wrote, per variant, is checked with e2fsck -fn.
#
# Ratios printed at the end: lib (orphan file) truncates/s vs the kernel's
# (target >= 2x), orphan file vs legacy list at 8 threads (target >= 1.3x),
# and a table of fsync latencies.
#
# Environment: RUNS, THREADS (default "1 2 4 8"), TRUNC_PASSES (8),
# UNLINK_FILES (4000), FSYNC_K (300), SECS (1), FUSE2FS_RUNS (RUNS),
# FUSE2FS_TRUNC_PASSES (2), FUSE2FS_UNLINK_FILES (500), FUSE2FS_FSYNC_K
# (100), FUSE2FS_SECS (1), FUSE2FS_THREADS and NULLFS_THREADS (default
# THREADS), TARGETS (default "lib fuse kernel fuse2fs nullfs"),
# WORKLOADS (default "truncate unlink unlink-open fsync"), VARIANTS ("orph
# list"), EXTEND (write|truncate), IMG_SIZE, DROP_CACHES=1 (drop the page
# cache before every run; off by default: every workload makes its own
# files), BENCH_TMP (where the images go, default /tmp; bench/report.sh:
# tmpfs), ORPHAN_BENCH, NULLFS, UEXT4 (binaries), OUT (default
# bench/results), POINT_TIMEOUT (seconds per run, default 120).
# QUICK=1: a ~1 minute smoke run (1 run, threads 1 and 8 - fuse2fs and nullfs
# only 8 -, few iterations, 0.3 s cap).
set -u
cd "$(dirname "$0")/.." || exit 1
TOP=$PWD
if [ "${QUICK:-0}" = 1 ]; then
	: "${RUNS:=1}" "${THREADS:=1 8}" "${TRUNC_PASSES:=1}" "${UNLINK_FILES:=500}"
	: "${FSYNC_K:=50}" "${SECS:=0.3}" "${FUSE2FS_TRUNC_PASSES:=1}"
	: "${FUSE2FS_UNLINK_FILES:=100}" "${FUSE2FS_FSYNC_K:=20}" "${FUSE2FS_SECS:=0.3}"
	: "${FUSE2FS_THREADS:=8}" "${NULLFS_THREADS:=8}"
fi
RUNS=${RUNS:-3}
THREADS=${THREADS:-1 2 4 8}
TRUNC_PASSES=${TRUNC_PASSES:-8}
UNLINK_FILES=${UNLINK_FILES:-4000}
FSYNC_K=${FSYNC_K:-300}
SECS=${SECS:-1}
FUSE2FS_RUNS=${FUSE2FS_RUNS:-$RUNS}
FUSE2FS_TRUNC_PASSES=${FUSE2FS_TRUNC_PASSES:-2}
FUSE2FS_UNLINK_FILES=${FUSE2FS_UNLINK_FILES:-500}
FUSE2FS_FSYNC_K=${FUSE2FS_FSYNC_K:-100}
FUSE2FS_SECS=${FUSE2FS_SECS:-1}
FUSE2FS_THREADS=${FUSE2FS_THREADS:-$THREADS}
NULLFS_THREADS=${NULLFS_THREADS:-$THREADS}
TARGETS=${TARGETS:-lib fuse kernel fuse2fs nullfs}
WORKLOADS=${WORKLOADS:-truncate unlink unlink-open fsync}
VARIANTS=${VARIANTS:-orph list}
EXTEND=${EXTEND:-write}
IMG_SIZE=${IMG_SIZE:-512M}
DROP_CACHES=${DROP_CACHES:-0}
OUT=${OUT:-$TOP/bench/results}
POINT_TIMEOUT=${POINT_TIMEOUT:-120}
pick() { for f in "$@"; do [ -x "$f" ] && { echo "$f"; return; }; done; }
ORPHAN_BENCH=${ORPHAN_BENCH:-$(pick build/bench/orphan_bench)}
NULLFS=${NULLFS:-$(pick build/bench/nullfs)}
UEXT4=${UEXT4:-$(pick build/uext4)}
abspath() { case $1 in /*) echo "$1" ;; ?*) echo "$TOP/$1" ;; esac; }
ORPHAN_BENCH=$(abspath "$ORPHAN_BENCH")
NULLFS=$(abspath "$NULLFS")
UEXT4=$(abspath "$UEXT4")
[ -x "$ORPHAN_BENCH" ] || { echo "orphan.sh: build orphan_bench first (make)"; exit 1; }

W=$(mktemp -d "${BENCH_TMP:-/tmp}/uext4-orphan.XXXXXX")
MNT=$W/mnt
IMG=$W/orphan.img
mkdir -p "$MNT" "$OUT"

ROOT=0
[ "$(id -u)" = 0 ] && ROOT=1

# State of the current mount, for unmounting and for the trap.
LOOPDEV=     # kernel: the loop device we attached
SERVER_PID=  # fuse, fuse2fs, nullfs: the server process we started

cleanup() {
	if mountpoint -q "$MNT"; then
		umount "$MNT" 2>/dev/null || fusermount3 -u "$MNT" 2>/dev/null || umount -l "$MNT"
	fi
	[ -n "$LOOPDEV" ] && losetup -d "$LOOPDEV" 2>/dev/null
	if [ -n "$SERVER_PID" ] && alive "$SERVER_PID"; then
		sleep 1 # give it a moment to finish writing back after the unmount
		kill "$SERVER_PID" 2>/dev/null
	fi
	rm -rf "$W"
}
trap cleanup EXIT
trap 'echo "orphan.sh: interrupted"; exit 1' INT TERM

drop_caches() {
	[ "$DROP_CACHES" = 1 ] && [ $ROOT = 1 ] && { sync; echo 3 >/proc/sys/vm/drop_caches; }
	return 0
}

mkfs_opt() { case $1 in orph) echo orphan_file ;; list) echo ^orphan_file ;; esac; }
fresh_image() {
	rm -f "$IMG"
	truncate -s "$IMG_SIZE" "$IMG" # (mke2fs -q still says "Creating regular file" otherwise)
	mke2fs -q -F -t ext4 -b 4096 -O "$(mkfs_opt "$1")" "$IMG" "$IMG_SIZE"
}
# has_orphan_file: does the image's superblock list the orphan_file feature?
has_orphan_file() { dumpe2fs -h "$IMG" 2>/dev/null | grep -q '^Filesystem features:.* orphan_file'; }

can_run() {
	case $1 in
	lib) return 0 ;;
	fuse) [ -x "$UEXT4" ] && [ -c /dev/fuse ] ;;
	nullfs) [ -x "$NULLFS" ] && [ -c /dev/fuse ] ;;
	kernel) [ $ROOT = 1 ] && losetup -f >/dev/null 2>&1 ;;
	fuse2fs) command -v fuse2fs >/dev/null && [ -c /dev/fuse ] ;;
	*) return 1 ;;
	esac
}
# Which workloads / variants apply to a target.
workloads_of() {
	case $1 in
	nullfs) for wl in $WORKLOADS; do
			case $wl in unlink | unlink-open) echo "nowrite-$wl" ;; esac
		done ;;
	*) echo "$WORKLOADS" ;;
	esac
}
variants_of() { case $1 in nullfs) echo "-" ;; *) echo "$VARIANTS" ;; esac; }
threads_of() {
	case $1 in
	fuse2fs) echo "$FUSE2FS_THREADS" ;;
	nullfs) echo "$NULLFS_THREADS" ;;
	*) echo "$THREADS" ;;
	esac
}
runs_of() { case $1 in fuse2fs) echo "$FUSE2FS_RUNS" ;; *) echo "$RUNS" ;; esac; }
secs_of() { case $1 in fuse2fs) echo "$FUSE2FS_SECS" ;; *) echo "$SECS" ;; esac; }
iters_of() { # TARGET WORKLOAD
	local f=
	[ "$1" = fuse2fs ] && f=FUSE2FS_
	case $2 in
	truncate) eval echo "\$${f}TRUNC_PASSES" ;;
	*unlink*) eval echo "\$${f}UNLINK_FILES" ;;
	fsync) eval echo "\$${f}FSYNC_K" ;;
	esac
}

# pid of the newest process whose command line is exactly $1 (we started it).
newest_pid() { pgrep -n -f -x "$1"; }

mount_target() {
	case $1 in
	fuse)
		"$UEXT4" mount "$IMG" "$MNT" || return 1
		SERVER_PID=$(newest_pid "$UEXT4 mount $IMG $MNT")
		case ",$(findmnt -n -o OPTIONS "$MNT")," in
		*,ro,*) echo "orphan.sh: uext4 mount $IMG is read-only"; umount_target fuse; return 1 ;;
		esac ;;
	nullfs)
		"$NULLFS" --create "$MNT" || return 1
		SERVER_PID=$(newest_pid "$NULLFS --create $MNT") ;;
	kernel)
		LOOPDEV=$(losetup -f --show "$IMG") || { LOOPDEV=; return 1; }
		mount -t ext4 "$LOOPDEV" "$MNT" || return 1 ;;
	fuse2fs)
		local o=fakeroot
		[ $ROOT = 1 ] && o=
		fuse2fs ${o:+-o $o} "$IMG" "$MNT" >/dev/null 2>&1 || return 1
		SERVER_PID=$(newest_pid "fuse2fs ${o:+-o $o }$IMG $MNT") ;;
	esac
	mountpoint -q "$MNT"
}

# alive PID: the process runs.  A daemonized FUSE server that has exited
# stays a zombie until init reaps it, which takes up to ~2 s here, and kill -0
# succeeds on a zombie: look at its state instead.
alive() {
	local st
	st=$(awk '{ print $3 }' "/proc/$1/stat" 2>/dev/null) || return 1
	[ -n "$st" ] && [ "$st" != Z ] && [ "$st" != X ]
}

# Unmount, then wait (up to 120 s) for a FUSE server to finish writing back
# and exit; detach the loop device.
umount_target() {
	local i
	if mountpoint -q "$MNT"; then
		case $1 in
		kernel) umount "$MNT" || umount -l "$MNT" ;;
		*) fusermount3 -u "$MNT" || umount -l "$MNT" ;;
		esac
	fi
	if [ -n "$LOOPDEV" ]; then
		losetup -d "$LOOPDEV" || echo "orphan.sh: losetup -d $LOOPDEV failed"
		LOOPDEV=
	fi
	if [ -n "$SERVER_PID" ]; then
		for ((i = 0; i < 24000; i++)); do
			alive "$SERVER_PID" || break
			sleep 0.005 # polling for the server to exit (tail --pid polls once a second)
		done
		alive "$SERVER_PID" &&
			echo "orphan.sh: $1 server $SERVER_PID still running 120 s after unmount"
		SERVER_PID=
	fi
	return 0
}

RAW=$W/raw   # lines: target variant workload threads iters ops secs sync_secs errors capped p50 p99
FSCK_REPORT=$W/fsck
: >"$FSCK_REPORT"
: >"$RAW"
FAILURES=0

# run_point TARGET VARIANT WORKLOAD THREADS: one fresh run; appends to RAW.
run_point() {
	local tg=$1 var=$2 wl=$3 th=$4 it out rc
	it=$(iters_of "$tg" "$wl")
	local args=(-s "$(secs_of "$tg")" -x "$EXTEND")
	if [ "$var" != - ]; then
		fresh_image "$var" || { echo "orphan.sh: mke2fs failed"; return 1; }
		if has_orphan_file; then [ "$var" = orph ]; else [ "$var" = list ]; fi ||
			{ echo "orphan.sh: image for variant $var has the wrong orphan_file feature"; return 1; }
	fi
	drop_caches
	if [ "$tg" = lib ]; then
		out=$(timeout "$POINT_TIMEOUT" "$ORPHAN_BENCH" "${args[@]}" lib "$IMG" "$wl" "$th" "$it" 2>"$W/err")
		rc=$?
	else
		mount_target "$tg" || { echo "orphan.sh: mounting $tg failed"; umount_target "$tg"; return 1; }
		out=$(timeout "$POINT_TIMEOUT" "$ORPHAN_BENCH" "${args[@]}" posix "$MNT" "$wl" "$th" "$it" 2>"$W/err")
		rc=$?
		umount_target "$tg"
	fi
	if [ $rc != 0 ]; then
		echo "orphan.sh: $tg/$var $wl threads=$th failed (exit $rc): $(head -3 "$W/err")"
		[ $rc = 124 ] && echo "orphan.sh: (timed out after ${POINT_TIMEOUT}s)"
		FAILURES=$((FAILURES + 1))
	fi
	awk -v tg="$tg" -v var="$var" -v th="$th" -v it="$it" '/^RESULT/ {
		for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
		print tg, var, v["workload"], th, it, v["ops"], v["secs"], v["sync_secs"], v["errors"],
		      v["capped"], v["p50_us"], v["p99_us"]
	}' <<<"$out" >>"$RAW"
	return $rc
}

# check_image TARGET VARIANT: e2fsck -fn of the image the target just wrote.
check_image() {
	[ "$2" = - ] && return 0
	if e2fsck -fn "$IMG" >"$W/fsck.out" 2>&1; then
		echo "$1/$2: e2fsck -fn clean after the last run" >>"$FSCK_REPORT"
	else
		echo "$1/$2: e2fsck -fn NOT CLEAN after the last run:" >>"$FSCK_REPORT"
		head -20 "$W/fsck.out" | sed 's/^/    /' >>"$FSCK_REPORT"
	fi
}

T_START=$(date +%s)
echo "orphan.sh: threads '$THREADS' (fuse2fs '$FUSE2FS_THREADS', nullfs '$NULLFS_THREADS'), $RUNS runs per point (fuse2fs $FUSE2FS_RUNS)," \
	"cap ${SECS}s per run (fuse2fs ${FUSE2FS_SECS}s), $IMG_SIZE images, root=$ROOT"
echo "orphan.sh: per thread: truncate $TRUNC_PASSES passes of 4095 (extend by $EXTEND)," \
	"unlink $UNLINK_FILES files, fsync $FSYNC_K appends"
echo "orphan.sh: fuse2fs is slow: it runs fewer iterations: $FUSE2FS_TRUNC_PASSES passes," \
	"$FUSE2FS_UNLINK_FILES files, $FUSE2FS_FSYNC_K appends per thread"
for tg in $TARGETS; do
	if ! can_run "$tg"; then echo "orphan.sh: skipping $tg (not available here)"; continue; fi
	for var in $(variants_of "$tg"); do
		for wl in $(workloads_of "$tg"); do
			for th in $(threads_of "$tg"); do
				for ((r = 1; r <= $(runs_of "$tg"); r++)); do
					run_point "$tg" "$var" "$wl" "$th" || break
				done
			done
			printf '  %-8s %-4s %-20s done (%ds)\n' "$tg" "$var" "$wl" $(($(date +%s) - T_START))
		done
		check_image "$tg" "$var"
	done
done

# ---- report: medians, ratios, fsync latencies ----------------------------------
STAMP=$(date +%Y%m%d-%H%M%S)
REPORT=$OUT/orphan-$STAMP.txt
cp "$RAW" "$OUT/orphan-$STAMP.raw"
{
	echo "orphan $STAMP: orph = mke2fs -O orphan_file, list = -O ^orphan_file; fresh $IMG_SIZE image per run;"
	echo "median of $RUNS runs (fuse2fs: $FUSE2FS_RUNS, fewer iterations); ops/s = truncates/s, unlinks/s"
	echo "or fsyncs/s; truncate extends by $EXTEND; capped = runs stopped by the ${SECS}s cap"
	echo "(fuse2fs ${FUSE2FS_SECS}s); p50/p99 = fsync latency in microseconds"
	awk '
	function median(list,   n, i, j, t, a) {
		n = split(list, a, " ")
		for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++)
			if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
		return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
	}
	function ratio(name, a, b, target,   s) {
		if (!(a in R) || !(b in R) || R[b] <= 0) return
		s = target ? sprintf("(target >= %gx) %s", target, R[a] >= target * R[b] ? "met" : "NOT MET") : ""
		printf "  %-52s %8.2fx  %s\n", name, R[a] / R[b], s
	}
	{
		key = $3 SUBSEP $1 SUBSEP $2 SUBSEP $4
		secs = $7 > 0 ? $7 : 1e-9
		RATE[key] = RATE[key] " " $6 / secs
		SY[key] = SY[key] " " $8; P50[key] = P50[key] " " $11; P99[key] = P99[key] " " $12
		ERR[key] += $9; CAP[key] += $10; NRUN[key]++
		if (!(key in seen)) { seen[key] = 1; order[++nk] = key }
	}
	END {
		last = ""
		for (k = 1; k <= nk; k++) {
			key = order[k]; split(key, f, SUBSEP)
			R[key] = median(RATE[key])
		}
		# one table per workload, in the order the workloads ran
		for (k = 1; k <= nk; k++) {
			key = order[k]; split(key, f, SUBSEP); wl = f[1]
			if (wl in wdone) continue
			wdone[wl] = 1
			printf "\n%s\n%-8s %-4s %7s %12s %9s %5s %7s %6s\n", wl, "target", "var",
			       "threads", "ops/s", "sync_s", "runs", "capped", "errors"
			for (j = 1; j <= nk; j++) {
				key = order[j]; split(key, g, SUBSEP)
				if (g[1] != wl) continue
				printf "%-8s %-4s %7s %12.0f %9.4f %5d %7d %6d\n", g[2], g[3], g[4], R[key],
				       median(SY[key]), NRUN[key], CAP[key], ERR[key]
			}
		}
		print "\nratios (truncates/s of stress-orphan unless named):"
		for (t = 1; t <= 64; t *= 2) {
			ratio(sprintf("lib orph / kernel orph, %d threads", t), "truncate" SUBSEP "lib" SUBSEP "orph" SUBSEP t,
			      "truncate" SUBSEP "kernel" SUBSEP "orph" SUBSEP t, 2)
			ratio(sprintf("lib orph / kernel list, %d threads", t), "truncate" SUBSEP "lib" SUBSEP "orph" SUBSEP t,
			      "truncate" SUBSEP "kernel" SUBSEP "list" SUBSEP t, 2)
		}
		ratio("lib orph / lib list, 8 threads", "truncate" SUBSEP "lib" SUBSEP "orph" SUBSEP 8,
		      "truncate" SUBSEP "lib" SUBSEP "list" SUBSEP 8, 1.3)
		ratio("lib orph / lib list, 8 threads, unlink-open", "unlink-open" SUBSEP "lib" SUBSEP "orph" SUBSEP 8,
		      "unlink-open" SUBSEP "lib" SUBSEP "list" SUBSEP 8, 1.3)
		ratio("fuse orph / fuse list, 8 threads", "truncate" SUBSEP "fuse" SUBSEP "orph" SUBSEP 8,
		      "truncate" SUBSEP "fuse" SUBSEP "list" SUBSEP 8, 0)
		ratio("kernel orph / kernel list, 8 threads (reference)", "truncate" SUBSEP "kernel" SUBSEP "orph" SUBSEP 8,
		      "truncate" SUBSEP "kernel" SUBSEP "list" SUBSEP 8, 0)
		for (t = 1; t <= 64; t *= 2) {
			ratio(sprintf("fuse orph / fuse2fs orph, %d threads", t), "truncate" SUBSEP "fuse" SUBSEP "orph" SUBSEP t,
			      "truncate" SUBSEP "fuse2fs" SUBSEP "orph" SUBSEP t, 0)
			ratio(sprintf("lib orph / kernel orph, %d threads, unlink", t), "unlink" SUBSEP "lib" SUBSEP "orph" SUBSEP t,
			      "unlink" SUBSEP "kernel" SUBSEP "orph" SUBSEP t, 0)
		}
		print "\nfsync latency (append 4 KiB + fsync; the fsync call timed):"
		printf "%-8s %-4s %7s %12s %12s %12s\n", "target", "var", "threads", "fsyncs/s", "p50_us", "p99_us"
		for (k = 1; k <= nk; k++) {
			key = order[k]; split(key, f, SUBSEP)
			if (f[1] != "fsync") continue
			printf "%-8s %-4s %7s %12.0f %12.1f %12.1f\n", f[2], f[3], f[4], R[key],
			       median(P50[key]), median(P99[key])
		}
	}' "$RAW"
	echo ""
	cat "$FSCK_REPORT"
	[ $FAILURES = 0 ] || echo "$FAILURES runs FAILED (see the messages above the table)"
	echo "total time: $(($(date +%s) - T_START)) s"
} | tee "$REPORT"
echo "orphan.sh: results in $REPORT"
[ $FAILURES = 0 ] && ! grep -q 'NOT CLEAN' "$FSCK_REPORT"
