#!/bin/bash
# nbd.sh - the NBD backend against the local file backend (what serving an
# image over NBD costs):
# the create and read benchmarks through libuext4 on
#   file    the image file itself (pread/pwrite)
#   nbd1    the same file exported by nbdkit's file plugin on a Unix socket,
#           one connection (UEXT4_NBD_CONNS=1)
#   nbd4    the same with a pool of 4 connections (the default when the
#           server offers multi-conn, as nbdkit's file plugin does)
# Images in /dev/shm (tmpfs) so the device is memory and what is measured
# is the backend's per-request cost.  Runs are interleaved (file nbd1 nbd4
# file nbd1 nbd4 ...), RUNS (default 5) each; the values are medians.
#
#   bench/nbd.sh [--out FILE.md]   print the section (or write it to FILE.md)
#   bench/nbd.sh --update FILE.md  replace the section in FILE.md (from its
#                                  heading to <!-- nbd:end -->), or add it
#                                  before "## Checks and notes" / at the end
#   bench/report.sh --only nbd     the same, replacing the section of
#                                  BENCHMARKS.md in place
# Environment: RUNS, CREATE_FILES (per thread, default 10000), BENCH_SRC
# (read tree, default /usr/include), PERF=1 adds a perf profile of the NBD
# read run (perf record -g), BENCH_BUILD (default build, the release build).
set -u
cd "$(dirname "$0")/.." || exit 1
TOP=$PWD
OUTMD= UPDATE=
case ${1:-} in
--out) OUTMD=$2 ;;
--update) UPDATE=$2 ;;   # replace the section in that report (or add it)
esac
RUNS=${RUNS:-5}
FILES=${CREATE_FILES:-10000}
SRC=${BENCH_SRC:-/usr/include}
B=${BENCH_BUILD:-build}
CB=$TOP/$B/bench/create_bench RB=$TOP/$B/bench/read_bench
[ -x "$CB" ] && [ -x "$RB" ] || { echo "nbd.sh: build first: make" >&2; exit 1; }
command -v nbdkit > /dev/null || { echo "nbd.sh: nbdkit is not installed" >&2; exit 1; }
SHM=/dev/shm
[ -w $SHM ] || SHM=${TMPDIR:-/tmp}
W=$(mktemp -d $SHM/uext4-nbdbench.XXXXXX)
NBDPID=
cleanup() { [ -n "$NBDPID" ] && kill "$NBDPID" 2> /dev/null; rm -rf "$W"; }
trap cleanup EXIT

# serve IMG: nbdkit on $W/sock, waiting for its pid file; sets URI.
serve() {
	rm -f "$W/sock" "$W/pid"
	nbdkit -f --exit-with-parent -U "$W/sock" -P "$W/pid" file "$1" &
	NBDPID=$!
	for ((i = 0; i < 300; i++)); do
		[ -s "$W/pid" ] && [ -S "$W/sock" ] && break
		sleep 0.1 # polling for nbdkit's pid file
	done
	URI="nbd+unix:///?socket=$W/sock"
}
unserve() { kill "$NBDPID"; wait "$NBDPID" 2> /dev/null; NBDPID=; }

# target SYS IMG: sets T (what the bench opens) and the connection count.
target() {
	case $1 in
	file) T=$2 ;;
	nbd1) serve "$2"; T=$URI; export UEXT4_NBD_CONNS=1 ;;
	nbd4) serve "$2"; T=$URI; export UEXT4_NBD_CONNS=4 ;;
	esac
}
untarget() { [ "$1" = file ] || unserve; unset UEXT4_NBD_CONNS; }

RAW=$W/raw   # lines: bench sys threads metric value
SYSTEMS="file nbd1 nbd4"

create_runs() {
	local th=$1 r sys line
	for ((r = 1; r <= RUNS; r++)); do
		for sys in $SYSTEMS; do
			mke2fs -q -F -t ext4 "$W/c.img" 1G || exit 1
			target $sys "$W/c.img"
			line=$("$CB" lib "$T" "$th" "$FILES" | grep '^RESULT')
			untarget $sys
			awk -v s=$sys -v th=$th '{ for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
				if (v["errors"] == 0) { print "create", s, th, "files/s", v["files"] / v["secs"]
					print "create", s, th, "sync_s", v["sync_secs"] } }' <<< "$line" >> "$RAW"
			e2fsck -fn "$W/c.img" > /dev/null 2>&1 || echo "nbd.sh: e2fsck -fn failed after create ($sys)" >&2
		done
	done
}

read_runs() {
	local th=$1 op=$2 r sys
	for ((r = 1; r <= RUNS; r++)); do
		for sys in $SYSTEMS; do
			target $sys "$W/r.img"
			"$RB" lib "$T" "$W/list" "$op" "$th" 2 | awk -v s=$sys -v th=$th -v op=$op '/^RESULT/ {
				for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
				if (v["errors"] == 0) print "read-" op, s, th, (v["pass"] == 1 ? "cold" : "warm"), v["ops"] / v["secs"] }' >> "$RAW"
			untarget $sys
		done
	done
}

med() { # med BENCH SYS THREADS METRIC: the median of the recorded values
	awk -v b="$1" -v s="$2" -v t="$3" -v m="$4" '$1 == b && $2 == s && $3 == t && $4 == m { print $5 }' "$RAW" |
		sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "-"; else if (NR % 2) printf "%.0f\n", v[(NR + 1) / 2];
			else printf "%.0f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.2f", b / a; else print "-" }'; }

echo "nbd.sh: $RUNS interleaved runs per point, images in $SHM; load before: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
for th in 1 4; do create_runs $th; echo "  create threads=$th done" >&2; done
size_kb=$(du -sk "$SRC" | awk '{print $1}')
mke2fs -q -F -t ext4 -b 4096 -d "$SRC" "$W/r.img" "$((size_kb * 3 / 2 / 1024 + 64))M" || exit 1
"$RB" list "$W/r.img" > "$W/list" || exit 1
NENT=$(wc -l < "$W/list")
for th in 1 4; do for op in stat read; do read_runs $th $op; echo "  read $op threads=$th done" >&2; done; done
LOAD1=$(cut -d' ' -f1-3 /proc/loadavg)

PROFILE=
if [ "${PERF:-1}" = 1 ] && command -v perf > /dev/null; then
	target nbd4 "$W/r.img"
	perf record -q -g -o "$W/perf.data" "$RB" lib "$T" "$W/list" read 4 2 > /dev/null 2>&1
	untarget nbd4
	PROFILE=$(perf report -i "$W/perf.data" --stdio --no-children --sort dso,symbol 2> /dev/null |
		grep -E '^ +[0-9.]+%' | head -12)
fi

section() {
	echo "## NBD backend vs the file backend"
	echo
	echo "<!-- nbd:begin (bench/report.sh --only nbd regenerates this section) -->"
	echo "Made by \`bench/report.sh --only nbd\` (bench/nbd.sh) on $(date -u +%Y-%m-%d), $(nproc) cores"
	echo "shared with other jobs: load average $LOAD0 before, $LOAD1 after; absolute numbers are"
	echo "noisy, the runs are interleaved (file, nbd1, nbd4, file, ...) so the ratios are fairer."
	echo "Medians of $RUNS runs, libuext4 directly (create_bench lib, read_bench lib), images in"
	echo "tmpfs. file: the image file; nbd1/nbd4: the same file through nbdkit's file plugin on a"
	echo "Unix socket, 1 connection or a pool of 4 (multi-conn, the default)."
	echo
	echo "Creates (seed 002's sibling directories, $FILES files per thread, fresh 1 GiB image):"
	echo
	echo "| threads | file files/s | nbd1 files/s | nbd4 files/s | nbd4/file | file sync s | nbd4 sync s |"
	echo "|---|---|---|---|---|---|---|"
	for th in 1 4; do
		local f n1 n4
		f=$(med create file $th files/s) n1=$(med create nbd1 $th files/s) n4=$(med create nbd4 $th files/s)
		echo "| $th | $f | $n1 | $n4 | $(ratio "$f" "$n4") | $(awk -v b=create -v s=file -v t=$th '$1==b&&$2==s&&$3==t&&$4=="sync_s"{print $5}' "$RAW" | sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}') | $(awk -v b=create -v s=nbd4 -v t=$th '$1==b&&$2==s&&$3==t&&$4=="sync_s"{print $5}' "$RAW" | sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}') |"
	done
	echo
	echo "Reads ($SRC as an image, $NENT entries; ops/s; cold = first pass on a fresh mount, every"
	echo "block from the device; warm = second pass, from the caches):"
	echo
	echo "| op, threads, pass | file | nbd1 | nbd4 | nbd1/file | nbd4/file |"
	echo "|---|---|---|---|---|---|"
	for op in stat read; do for th in 1 4; do for p in cold warm; do
		local f n1 n4
		f=$(med read-$op file $th $p) n1=$(med read-$op nbd1 $th $p) n4=$(med read-$op nbd4 $th $p)
		echo "| $op, $th, $p | $f | $n1 | $n4 | $(ratio "$f" "$n1") | $(ratio "$f" "$n4") |"
	done; done; done
	echo
	if [ -n "$PROFILE" ]; then
		echo "Profile (perf record -g of read_bench lib read over nbd4, 4 threads, cold + warm pass;"
		echo "self time, top entries; the client side only, nbdkit is another process):"
		echo
		echo '```'
		echo "$PROFILE"
		echo '```'
		echo
	fi
	echo "How to read it: every device request over NBD is one synchronous round trip (the"
	echo "calling thread writes the request to the socket and sleeps in poll until nbdkit"
	echo "answers), so the cost is latency, not CPU; the profile's top entries are the context"
	echo "switches of those waits.  Metadata is cached by the library (warm stat passes hardly"
	echo "touch the device), file data is not: a warm read pass reads every data block again,"
	echo "from the page cache for the file backend and through nbdkit for NBD, which is why"
	echo "warm reads show the biggest gap.  More requests in flight need more threads: with 4"
	echo "threads the pool of 4 connections (nbd4) did better than one serialised connection"
	echo "(nbd1) on reads in our runs.  Creates do device I/O only at commits, from one thread"
	echo "at a time, so the pool cannot help them: across our three runs the nbd1/nbd4 order"
	echo "of the create rows changed from run to run (noise on 2 shared cores).  The aio API"
	echo "(nbd_aio_pread) would only pay off if the library issued several requests per call"
	echo "(read-ahead, a commit's home writes in one batch); its device calls are synchronous."
	echo
	echo "<!-- nbd:end -->"
}

# update REPORT SECTION-FILE: the section replaced in place, or added.
update() {
	awk -v secf="$2" '
		function put() { while ((getline l < secf) > 0) print l; done = 1 }
		/^## NBD backend vs the file backend/ { skip = 1; next }
		skip && /<!-- nbd:end -->/ { skip = 0; put(); next }
		skip { next }
		!done && /^## Checks and notes/ { put(); print "" }
		{ print }
		END { if (!done) { print ""; put() } }' "$1" > "$1.new" && mv "$1.new" "$1"
}

if [ -n "$UPDATE" ]; then
	section > "$W/section.md"
	update "$UPDATE" "$W/section.md"
	echo "nbd.sh: section updated in $UPDATE" >&2
elif [ -n "$OUTMD" ]; then section > "$OUTMD"; else section; fi
