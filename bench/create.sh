#!/bin/bash
# create.sh - the create-path benchmark (seed 002's workload; not a test,
# `make bench` runs it through bench/run.sh).
#
# Workload: THREADS threads each create FILES empty files in a directory of
# their own, siblings under one parent (/p/t00, /p/t01, ...), on a freshly
# made image (mke2fs -t ext4 -b 4096, 2 GiB, enough inodes for the largest
# point; the same geometry for every target).  Targets:
#   lib      libuext4 directly, uext4_create() (bench/create_bench.c lib);
#            also reports the inode-table blocks read during the creates
#   fuse     our FUSE mount (uext4 mount, read-write), open(O_CREAT|O_EXCL)
#            + close from THREADS client threads
#   nullfs   bench/nullfs --create: a FUSE server that does no work, the
#            ceiling of any FUSE create path on this machine
#   fuse-uring, nullfs-uring  the same two served over io_uring (-o
#            loop=uring; as root, create.sh turns enable_uring on for the
#            mount and restores it after; a point whose server fell back to
#            the classic loop fails).  fuse-uring against nullfs is the
#            io_uring transport's target (above the classic loop's null
#            ceiling at 8 clients); against nullfs-uring it shows what
#            the server's own work costs on the same transport
#   kernel   the kernel's ext4 on a loop device (root only)
#   fuse2fs  fuse2fs (-o fakeroot) on a fresh image; slow, so it runs fewer
#            files (FUSE2FS_FILES) and fewer thread counts
# Each point is a fresh image / mount after dropping the page cache (root).
# `secs` covers the creates; `sync` the uext4_sync()/syncfs() after them;
# `umount` the unmount including the server's exit (uext4's FUSE server
# writes back there: FUSE does not pass syncfs on to it; about 1 s of it is
# libfuse/kernel teardown that nullfs pays too).
# Median of RUNS runs (default 3; RUNS=5 for more), a table, and ratios
# against the targets: lib >= 300k creates/s on one thread; FUSE >= 80% of
# nullfs at 8 clients; FUSE >= 5x fuse2fs; fuse-uring above nullfs at 8.  The last image each of lib and
# fuse wrote is checked with e2fsck -fn.
#
# Environment: RUNS, FILES (per thread, default 20000), FUSE2FS_FILES
# (default 2000), TARGETS (default "lib fuse nullfs kernel fuse2fs"; also
# fuse-uring, nullfs-uring),
# CREATE_BENCH, NULLFS, UEXT4 (binaries), OUT (default bench/results),
# CREATE_THREADS (client counts for the mounts, default "1 2 4 8 16";
# LIB_THREADS for lib, default "1 2 4 16"; FUSE2FS_THREADS, default "1 8";
# BENCH_TMP: where the images go, default /tmp (bench/report.sh: tmpfs);
# UEXT4_FUSE_LOOP=st|pool|mt|uring picks the loop of uext4 and nullfs),
# POINT_TIMEOUT (seconds per run, default 300).
set -u
cd "$(dirname "$0")/.." || exit 1
TOP=$PWD
RUNS=${RUNS:-3}
FILES=${FILES:-20000}
FUSE2FS_FILES=${FUSE2FS_FILES:-2000}
TARGETS=${TARGETS:-lib fuse nullfs kernel fuse2fs}
OUT=${OUT:-$TOP/bench/results}
POINT_TIMEOUT=${POINT_TIMEOUT:-300}
pick() { for f in "$@"; do [ -x "$f" ] && { echo "$f"; return; }; done; }
CREATE_BENCH=${CREATE_BENCH:-$(pick build/bench/create_bench)}
NULLFS=${NULLFS:-$(pick build/bench/nullfs)}
UEXT4=${UEXT4:-$(pick build/uext4)}
abspath() { case $1 in /*) echo "$1" ;; ?*) echo "$TOP/$1" ;; esac; }
CREATE_BENCH=$(abspath "$CREATE_BENCH")
NULLFS=$(abspath "$NULLFS")
UEXT4=$(abspath "$UEXT4")
[ -x "$CREATE_BENCH" ] || { echo "create.sh: build create_bench first (make)"; exit 1; }

threads_of() {
	case $1 in
	lib) echo "${LIB_THREADS:-1 2 4 16}" ;;
	fuse2fs) echo "${FUSE2FS_THREADS:-1 8}" ;;
	*) echo "${CREATE_THREADS:-1 2 4 8 16}" ;;
	esac
}
files_of() { case $1 in fuse2fs) echo "$FUSE2FS_FILES" ;; *) echo "$FILES" ;; esac; }

W=$(mktemp -d "${BENCH_TMP:-/tmp}/uext4-create.XXXXXX")
MNT=$W/mnt
IMG=$W/create.img
mkdir -p "$MNT" "$OUT"
cleanup() {
	mountpoint -q "$MNT" && { fusermount3 -u "$MNT" 2>/dev/null || umount -l "$MNT"; }
	uring_switch restore
	rm -rf "$W"
}
trap cleanup EXIT
trap 'echo "create.sh: interrupted"; exit 1' INT TERM

ROOT=0
[ "$(id -u)" = 0 ] && ROOT=1
. "$TOP/bench/uring.inc"
uring_possible() { [ -e "$URING_PARAM" ] && { [ $ROOT = 1 ] || [ "$URING_OLD" = Y ]; }; }
drop_caches() {
	sync
	[ $ROOT = 1 ] && echo 3 >/proc/sys/vm/drop_caches
}

# Enough inodes for the largest point, same geometry for every target.
MAXT=16
NINODES=$((MAXT * FILES + MAXT + 1024))
fresh_image() {
	rm -f "$IMG"
	truncate -s 2G "$IMG" # (mke2fs -q still says "Creating regular file" otherwise)
	mke2fs -q -F -t ext4 -b 4096 -N "$NINODES" "$IMG" 2G
}

can_run() {
	case $1 in
	lib) return 0 ;;
	fuse) [ -x "$UEXT4" ] && [ -c /dev/fuse ] ;;
	nullfs) [ -x "$NULLFS" ] && [ -c /dev/fuse ] ;;
	fuse-uring) can_run fuse && uring_possible ;;
	nullfs-uring) can_run nullfs && uring_possible ;;
	kernel) [ $ROOT = 1 ] && losetup -f >/dev/null 2>&1 ;;
	fuse2fs) command -v fuse2fs >/dev/null && [ -c /dev/fuse ] ;;
	*) return 1 ;;
	esac
}

# The uext4 server of the current mount, to wait for it to finish writing
# back after fusermount3 -u (the unmount returns before the server exits).
SERVER_PID=
mount_target() {
	case $1 in
	fuse)
		"$UEXT4" mount "$IMG" "$MNT" || return 1
		SERVER_PID=$(pgrep -n -f -x "$UEXT4 mount $IMG $MNT")
		# The mount must be read-write (uext4 mount's default once writes exist).
		case ",$(findmnt -n -o OPTIONS "$MNT")," in
		*,ro,*) echo "create.sh: uext4 mount $IMG is read-only"; umount_target fuse; return 1 ;;
		esac ;;
	nullfs) "$NULLFS" --create "$MNT" ;;
	fuse-uring)
		uring_switch on
		"$UEXT4" mount -o loop=uring "$IMG" "$MNT" 2>"$W/mount.err" || { cat "$W/mount.err"; return 1; }
		SERVER_PID=$(pgrep -n -f -x "$UEXT4 mount -o loop=uring $IMG $MNT")
		if fell_back; then umount_target "$1"; return 1; fi ;;
	nullfs-uring)
		uring_switch on
		UEXT4_FUSE_LOOP=uring "$NULLFS" --create "$MNT" 2>"$W/mount.err" || { cat "$W/mount.err"; return 1; }
		if fell_back; then umount_target "$1"; return 1; fi ;;
	kernel) mount -t ext4 -o loop "$IMG" "$MNT" ;;
	fuse2fs)
		local o=fakeroot
		[ $ROOT = 1 ] && o=
		fuse2fs ${o:+-o $o} "$IMG" "$MNT" >/dev/null 2>&1 ;;
	esac || return 1
	mountpoint -q "$MNT"
}
# A *-uring server that says it uses the classic loop does not count.
fell_back() {
	grep -q "using the classic loop" "$W/mount.err" || return 1
	echo "create.sh: $(cat "$W/mount.err")"
}
umount_target() {
	local i
	case $1 in
	kernel) umount "$MNT" ;;
	*) fusermount3 -u "$MNT" || umount -l "$MNT" ;;
	esac
	case $1 in *-uring) uring_switch restore ;; esac
	if [ -n "$SERVER_PID" ]; then
		for ((i = 0; i < 24000; i++)); do
			kill -0 "$SERVER_PID" 2>/dev/null || break
			sleep 0.005 # polling for the server to exit (tail --pid polls once a second)
		done
		kill -0 "$SERVER_PID" 2>/dev/null &&
			echo "create.sh: uext4 server $SERVER_PID still running 120 s after unmount"
		SERVER_PID=
	fi
	# fuse2fs writes back after the unmount, too: wait for it.
	if [ "$1" = fuse2fs ]; then
		for ((i = 0; i < 1200; i++)); do
			pgrep -f -x "fuse2fs.* $IMG $MNT" >/dev/null || break
			sleep 0.1 # polling for the daemon to exit, 120 s deadline
		done
	fi
	return 0
}

RAW=$W/raw   # lines: target threads files_per_thread secs sync_secs itable_reads errors files umount_secs
FSCK_REPORT=$W/fsck
: >"$FSCK_REPORT"

# run_point TARGET THREADS FILES: one fresh run; appends to RAW.
run_point() {
	local tg=$1 th=$2 nf=$3 out rc t0 umount_s=0
	fresh_image || { echo "create.sh: mke2fs failed"; return 1; }
	drop_caches
	if [ "$tg" = lib ]; then
		out=$(timeout "$POINT_TIMEOUT" "$CREATE_BENCH" lib "$IMG" "$th" "$nf" 2>"$W/err")
		rc=$?
	else
		mount_target "$tg" || { echo "create.sh: mounting $tg failed"; return 1; }
		out=$(timeout "$POINT_TIMEOUT" "$CREATE_BENCH" posix "$MNT" "$th" "$nf" 2>"$W/err")
		rc=$?
		t0=$(date +%s.%N)
		umount_target "$tg"
		umount_s=$(echo "$(date +%s.%N) - $t0" | bc)
	fi
	if [ $rc != 0 ]; then
		echo "create.sh: $tg threads=$th failed (exit $rc): $(head -3 "$W/err")"
		[ $rc = 124 ] && echo "create.sh: (timed out after ${POINT_TIMEOUT}s)"
	fi
	awk -v tg="$tg" -v th="$th" -v nf="$nf" -v um="$umount_s" '/^RESULT/ {
		for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
		print tg, th, nf, v["secs"], v["sync_secs"], v["itable_reads"], v["errors"], v["files"], um
	}' <<<"$out" >>"$RAW"
	return $rc
}

# check_image TARGET: e2fsck -fn of the image the target just wrote.
check_image() {
	case $1 in lib | fuse | fuse-uring | kernel | fuse2fs) ;; *) return 0 ;; esac
	if e2fsck -fn "$IMG" >"$W/fsck.out" 2>&1; then
		echo "$1: e2fsck -fn clean after the last run" >>"$FSCK_REPORT"
	else
		echo "$1: e2fsck -fn NOT CLEAN after the last run:" >>"$FSCK_REPORT"
		head -20 "$W/fsck.out" | sed 's/^/    /' >>"$FSCK_REPORT"
	fi
}

echo "create.sh: $FILES files per thread (fuse2fs $FUSE2FS_FILES), $RUNS runs per point," \
	"2 GiB image with $NINODES inodes, root=$ROOT"
for tg in $TARGETS; do
	if ! can_run "$tg"; then echo "create.sh: skipping $tg (not available here)"; continue; fi
	for th in $(threads_of "$tg"); do
		for ((r = 1; r <= RUNS; r++)); do
			run_point "$tg" "$th" "$(files_of "$tg")" || break
		done
		printf '  %-8s threads=%-2d done\n' "$tg" "$th"
	done
	check_image "$tg"
done

# ---- report: medians and ratios ----------------------------------------------
STAMP=$(date +%Y%m%d-%H%M%S)
REPORT=$OUT/create-$STAMP.txt
touch "$RAW"
cp "$RAW" "$OUT/create-$STAMP.raw"
{
	echo "create $STAMP: THREADS x FILES empty files, one directory per thread, fresh 2 GiB image;"
	echo "median of $RUNS runs; secs = the creates, sync = writing back afterwards"
	awk '
	function median(list,   n, i, j, t, a) {
		n = split(list, a, " ")
		for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++)
			if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
		return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
	}
	{
		key = $1 SUBSEP $2
		S[key] = S[key] " " $4; Y[key] = Y[key] " " $5; IR[key] = IR[key] " " $6
		U[key] = U[key] " " $9
		NF_[key] = $3; ERR[key] += $7
		if (!(key in seen)) { seen[key] = 1; order[++nk] = key }
	}
	END {
		printf "%-12s %7s %10s %12s %10s %9s %9s %10s %7s\n", "target", "threads", "files/thr",
		       "creates/s", "secs", "sync_s", "umount_s", "itable_rd", "errors"
		for (k = 1; k <= nk; k++) {
			key = order[k]; split(key, f, SUBSEP)
			m = median(S[key]); if (m <= 0) m = 1e-9
			R[key] = f[2] * NF_[key] / m
			ir = median(IR[key])
			printf "%-12s %7s %10s %12.0f %10.4f %9.4f %9.4f %10s %7d\n", f[1], f[2], NF_[key],
			       R[key], m, median(Y[key]), median(U[key]), ir < 0 ? "-" : ir, ERR[key]
		}
		print ""
		print "ratios:"
		k = "lib" SUBSEP 1
		if (k in R)
			printf "  lib creates/s, 1 thread:      %10.0f   (target >= 300000) %s\n", R[k],
			       (R[k] >= 300000 ? "met" : "NOT MET")
		a = "fuse" SUBSEP 8; b = "nullfs" SUBSEP 8
		if ((a in R) && (b in R))
			printf "  FUSE / nullfs, 8 clients:     %9.0f%%   (target >= 80%%) %s\n",
			       100 * R[a] / R[b], (R[a] >= 0.8 * R[b] ? "met" : "NOT MET")
		a = "fuse-uring" SUBSEP 8; b = "nullfs" SUBSEP 8
		if ((a in R) && (b in R))
			printf "  FUSE over io_uring / nullfs (its loop), 8 clients: %5.0f%%   (target > 100%%) %s\n",
			       100 * R[a] / R[b], (R[a] > R[b] ? "met" : "NOT MET")
		for (t = 1; t <= 16; t *= 2) {
			a = "fuse-uring" SUBSEP t; b = "nullfs-uring" SUBSEP t
			if ((a in R) && (b in R))
				printf "  FUSE / nullfs, both over io_uring, %2d clients: %5.0f%%\n", t, 100 * R[a] / R[b]
		}
		for (t = 1; t <= 16; t *= 2) {
			a = "fuse" SUBSEP t; b = "fuse2fs" SUBSEP t
			if ((a in R) && (b in R))
				printf "  FUSE / fuse2fs, %2d clients:   %9.2fx   (target >= 5x) %s\n", t,
				       R[a] / R[b], (R[a] >= 5 * R[b] ? "met" : "NOT MET")
		}
		for (t = 1; t <= 16; t *= 2) {
			a = "fuse" SUBSEP t; b = "nullfs" SUBSEP t
			if ((a in R) && (b in R) && t != 8)
				printf "  FUSE / nullfs, %2d clients:    %9.0f%%\n", t, 100 * R[a] / R[b]
		}
		for (t = 1; t <= 16; t *= 2) {
			a = "lib" SUBSEP t; b = "kernel" SUBSEP t
			if ((a in R) && (b in R))
				printf "  lib / kernel, %2d threads:     %9.2fx\n", t, R[a] / R[b]
			a = "fuse" SUBSEP t
			if ((a in R) && (b in R))
				printf "  FUSE / kernel, %2d clients:    %9.2fx\n", t, R[a] / R[b]
		}
	}' "$RAW"
	echo ""
	cat "$FSCK_REPORT"
} | tee "$REPORT"
echo "create.sh: results in $REPORT"
