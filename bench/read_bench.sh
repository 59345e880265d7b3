#!/bin/bash
# read_bench.sh - the read-path benchmark (not a test; `make bench` runs it).
#
# Image: mke2fs -d /usr/include (4 KiB blocks, default features).  Two
# workloads over the same entry list:
#   stat-all  lstat every entry (ops/s)
#   read-all  read every regular file to EOF (files/s and MB/s)
# through
#   lib      libuext4 directly (bench/read_bench.c), 1 and 2 threads
#   fuse     our FUSE mount (uext4 mount -o ro), 1, 2 and 8 client threads
#   kernel   the kernel's ext4 on a loop device (root only)
#   fuse2fs  fuse2fs -o ro,fakeroot
# Each run is a fresh mount after dropping the page cache (when root): pass 1
# is "cold", pass 2 on the same mount "warm".  RUNS runs (default 5); the
# median is reported, plus FUSE/fuse2fs and lib/kernel ratios.
#
# Environment: RUNS, BENCH_SRC (default /usr/include), READ_BENCH (binary),
# UEXT4 (binary for the mount), BENCH_TARGETS (default "lib fuse kernel
# fuse2fs"), OUT (results directory, default bench/results).
set -u
cd "$(dirname "$0")/.." || exit 1
TOP=$PWD
RUNS=${RUNS:-5}
SRC=${BENCH_SRC:-/usr/include}
TARGETS=${BENCH_TARGETS:-lib fuse kernel fuse2fs}
OUT=${OUT:-$TOP/bench/results}
pick() { for f in "$@"; do [ -x "$f" ] && { echo "$f"; return; }; done; }
READ_BENCH=${READ_BENCH:-$(pick build/bench/read_bench)}
UEXT4=${UEXT4:-$(pick build/uext4)}
case $READ_BENCH in /*) ;; ?*) READ_BENCH=$TOP/$READ_BENCH ;; esac
case $UEXT4 in /*) ;; ?*) UEXT4=$TOP/$UEXT4 ;; esac
[ -x "$READ_BENCH" ] || { echo "read_bench.sh: build read_bench first (make)"; exit 1; }

W=$(mktemp -d /tmp/uext4-bench.XXXXXX)
MNT=$W/mnt
mkdir -p "$MNT" "$OUT"
cleanup() {
	mountpoint -q "$MNT" && { fusermount3 -u "$MNT" 2>/dev/null || umount "$MNT"; }
	rm -rf "$W"
}
trap cleanup EXIT

ROOT=0
[ "$(id -u)" = 0 ] && ROOT=1
drop_caches() {
	sync
	[ $ROOT = 1 ] && echo 3 >/proc/sys/vm/drop_caches
}

IMG=$W/include.img
size_kb=$(du -sk "$SRC" | awk '{print $1}')
img_mb=$((size_kb * 3 / 2 / 1024 + 64))
echo "read_bench: image of $SRC (${size_kb} KiB, ${img_mb} MiB image, 4 KiB blocks)"
mke2fs -q -F -t ext4 -b 4096 -d "$SRC" "$IMG" "${img_mb}M" || exit 1
"$READ_BENCH" list "$IMG" >"$W/list" || { echo "read_bench list failed"; exit 1; }
nent=$(wc -l <"$W/list")
nfiles=$(grep -c '^f ' "$W/list")
echo "read_bench: $nent entries, $nfiles regular files; $RUNS runs per point; root=$ROOT"

RAW=$W/raw   # lines: target threads op pass secs ops bytes errors

# record TARGET THREADS OP < RESULT lines
record() {
	awk -v tg="$1" -v th="$2" -v op="$3" '/^RESULT/ {
		for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
		print tg, th, op, v["pass"], v["secs"], v["ops"], v["bytes"], v["errors"]
	}' >>"$RAW"
}

mount_target() {
	case $1 in
	fuse) "$UEXT4" mount -o ro "$IMG" "$MNT" ;;
	kernel) mount -t ext4 -o loop,ro "$IMG" "$MNT" ;;
	fuse2fs) fuse2fs -o ro,fakeroot "$IMG" "$MNT" >/dev/null 2>&1 ;;
	esac || return 1
	mountpoint -q "$MNT"
}
umount_target() {
	case $1 in
	kernel) umount "$MNT" ;;
	*) fusermount3 -u "$MNT" ;;
	esac
}

can_run() {
	case $1 in
	lib) return 0 ;;
	fuse) [ -x "$UEXT4" ] && [ -e /dev/fuse ] ;;
	kernel) [ $ROOT = 1 ] ;;
	fuse2fs) command -v fuse2fs >/dev/null && [ -e /dev/fuse ] ;;
	esac
}

threads_of() { case $1 in lib) echo "1 2" ;; *) echo "1 2 8" ;; esac; }

for tg in $TARGETS; do
	if ! can_run "$tg"; then echo "read_bench: skipping $tg (not available here)"; continue; fi
	for th in $(threads_of "$tg"); do
		for op in stat read; do
			for ((r = 1; r <= RUNS; r++)); do
				drop_caches
				if [ "$tg" = lib ]; then
					"$READ_BENCH" lib "$IMG" "$W/list" $op $th 2 | record $tg $th $op
				else
					mount_target $tg || { echo "read_bench: mounting $tg failed"; continue 3; }
					"$READ_BENCH" posix "$MNT" "$W/list" $op $th 2 | record $tg $th $op
					umount_target $tg
				fi
			done
			printf '  %-8s threads=%d %-4s done\n' $tg $th $op
		done
	done
done

# ---- report: medians and ratios ----------------------------------------------
STAMP=$(date +%Y%m%d-%H%M%S)
REPORT=$OUT/read_bench-$STAMP.txt
cp "$RAW" "$OUT/read_bench-$STAMP.raw"
{
	echo "read_bench $STAMP: $SRC, $nent entries, $nfiles files, median of $RUNS runs"
	echo "cold = first pass on a fresh mount after drop_caches; warm = second pass"
	awk '
	function median(key,   n, i, j, t, a) {
		n = split(S[key], a, " ")
		for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++)
			if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
		return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
	}
	{
		key = $1 SUBSEP $2 SUBSEP $3 SUBSEP $4
		S[key] = S[key] " " $5; OPS[key] = $6; BYTES[key] = $7; ERR[key] += $8
		if (!(key in seen)) { seen[key] = 1; order[++nk] = key }
	}
	END {
		printf "%-8s %7s %-5s %-5s %12s %10s %10s %7s\n", "target", "threads", "op", "pass",
		       "ops/s", "MB/s", "median_s", "errors"
		for (k = 1; k <= nk; k++) {
			key = order[k]; split(key, f, SUBSEP)
			m = median(key); if (m <= 0) m = 1e-9
			ops = OPS[key] / m; mb = BYTES[key] / m / 1e6
			R[key] = ops; RM[key] = mb
			printf "%-8s %7s %-5s %-5s %12.0f %10.1f %10.4f %7d\n", f[1], f[2], f[3],
			       f[4] == 1 ? "cold" : "warm", ops, mb, m, ERR[key]
		}
		print ""
		print "ratios (higher is better for us):"
		for (th = 1; th <= 8; th *= 2) for (p = 1; p <= 2; p++) {
			a = "fuse" SUBSEP th SUBSEP "stat" SUBSEP p; b = "fuse2fs" SUBSEP th SUBSEP "stat" SUBSEP p
			if ((a in R) && (b in R))
				printf "  FUSE/fuse2fs  stat-all %d thr %s: %6.2fx (target >= 3)\n", th,
				       p == 1 ? "cold" : "warm", R[a] / R[b]
			a = "fuse" SUBSEP th SUBSEP "read" SUBSEP p; b = "fuse2fs" SUBSEP th SUBSEP "read" SUBSEP p
			if ((a in R) && (b in R))
				printf "  FUSE/fuse2fs  read-all %d thr %s: %6.2fx\n", th,
				       p == 1 ? "cold" : "warm", RM[a] / RM[b]
		}
		for (th = 1; th <= 2; th++) for (p = 1; p <= 2; p++) for (o = 1; o <= 2; o++) {
			op = o == 1 ? "stat" : "read"
			a = "lib" SUBSEP th SUBSEP op SUBSEP p; b = "kernel" SUBSEP th SUBSEP op SUBSEP p
			if ((a in R) && (b in R))
				printf "  lib/kernel    %s-all %d thr %s: %6.2fx (target > 1)\n", op, th,
				       p == 1 ? "cold" : "warm", op == "stat" ? R[a] / R[b] : RM[a] / RM[b]
		}
	}' "$RAW"
} | tee "$REPORT"
echo "read_bench: results in $REPORT"
