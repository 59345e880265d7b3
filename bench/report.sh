#!/bin/bash
# report.sh - one command for the whole benchmark report:
# runs every workload of the seeds on every system, in one run, on images
# in tmpfs, and writes BENCHMARKS.md with tables, ratios, PNG plots
# (gnuplot) and the performance targets (its Targets table) evaluated from
# the numbers.
# `make bench` builds the release build and runs it.
#
#   bench/report.sh [--quick] [--out FILE.md] [--plots DIR] [--from RESULTS]
#   bench/report.sh --check FILE.md      check a report is well formed
#   bench/report.sh [--out FILE.md] --only nbd   only the NBD section (bench/nbd.sh), in place
#   bench/report.sh [--out FILE.md] --only casefold   only the casefolded-directory
#            section (bench/casefold.sh: +F against normal, lib/fuse/kernel), in place
# A full run keeps what it measured in bench/results/report-DATE/; --from
# that directory makes the report and plots again without measuring.
#
# Systems (columns):
#   lib      libuext4 directly (bench/fxmark lib, create_bench lib, ...)
#   fuse     our FUSE mount (uext4 mount, read-write, default transport:
#            -o loop=auto, io_uring where enable_uring is on, else the
#            classic loop; URING=1 as root switches enable_uring on)
#   kernel   the kernel's ext4 on a loop device (root only)
#   fuse2fs  Debian's fuse2fs
#   nullfs   bench/nullfs --create, the FUSE server that does no work (the
#            ceiling of any FUSE file system here), same transport as fuse;
#            only what it can serve
#   nullfs-wb the same stub with the kernel's writeback cache (--writeback),
#            as uext4's read-write mount has it: the kernel then sends a
#            SETATTR of the ctime after every unlink (fuse_update_ctime()),
#            which nullfs without the cache never gets; only MWUL and MWUM,
#            the ceiling of a server with uext4's cache settings
# Parts (PARTS, default all):
#   fxmark   bench/fxmark: MWCL MWCM MWUL MWUM MWRL MWRM DWTL MRPL MRPM
#            MRDL MRDM for THREADS (default 1 2 4 8 16), SECS seconds each
#   lockstats the lock and I/O statistics: one more fxmark run with -S
#            (statistics on) for lib and fuse at STATS_THREADS (default: 2
#            and 16 where THREADS has them), apart from part fxmark so that
#            counting never touches its numbers; the section "Lock and I/O
#            statistics" shows per workload the two most contended lock
#            classes, the journal (commits, blocks per commit, commit
#            latency, handles held back), metadata blocks read and written,
#            the ops/s of that run beside part fxmark's, and for fuse the
#            requests per operation
#   create   seed 002's sibling-directory creates (bench/create.sh), with
#            the library's inode-table reads
#   orphan   seed 000's stress-orphan, orphan file and legacy list
#            (bench/orphan.sh, its truncate workload)
#   stressng seed 004's stress-ng workloads on both orphan formats:
#            dnotify, and dentry standing in for unlink (Debian 12's
#            stress-ng 0.15 has no unlink stressor; dentry creates and
#            unlinks files)
#   dbench   seed 001's dbench, 1 to 16 clients (bench/real.sh)
# Every value is the median of RUNS runs (default 5), each on a fresh image.
# The last image every writing system left of each fxmark run is checked
# with e2fsck -fn (the other scripts check theirs).
#
# --quick: a smoke run in under a minute: RUNS=1, THREADS="1 2", tiny
# durations, lib/fuse/nullfs (+ kernel as root; create.sh lib and fuse,
# stress-ng fuse only, 1 instance), small parts; writes into a
# temporary directory (or --out) and then checks the result (--check):
# every table row has numbers, every plot exists and is a PNG.
#
# Environment: RUNS, THREADS, STATS_THREADS, SECS, SYSTEMS, PARTS, DBENCH_SECS,
# STRESS_SECS, CREATE_FILES, URING, BENCH_BUILD (default build, the
# release build).  The full run took 19-20 minutes on the 2 shared cores (load 6-16)
# with 3 runs per value, 28 minutes with the default 5.
set -u
cd "$(dirname "$0")/.." || exit 1
TOP=$PWD

QUICK=0 OUTMD= PLOTDIR= CHECK_ONLY= FROM=
while [ $# -gt 0 ]; do
	case $1 in
	--quick) QUICK=1 ;;
	--out) OUTMD=$2; shift ;;
	--plots) PLOTDIR=$2; shift ;;
	--check) CHECK_ONLY=$2; shift ;;
	--from) FROM=$(cd "$2" && pwd) || exit 2; shift ;;
	# Only the NBD section (bench/nbd.sh), replaced in place in the report.
	--only) case $2 in
		nbd) exec bench/nbd.sh --update "${OUTMD:-BENCHMARKS.md}" ;;
		casefold) exec bench/casefold.sh --update "${OUTMD:-BENCHMARKS.md}" ;;
		*) echo "report.sh: --only takes: nbd, casefold" >&2; exit 2 ;;
		esac ;;
	*) echo "usage: bench/report.sh [--quick] [--out FILE.md] [--plots DIR] [--from RESULTS] | --check FILE.md" >&2; exit 2 ;;
	esac
	shift
done

# ---- checking a report -----------------------------------------------------------

# check_report FILE: every table row has a number in every cell ("-" where a
# system did not run, but at least one number per row), every plot it links
# exists and is a PNG, and the sections are there.  Prints what is wrong.
check_report() {
	local md=$1 dir bad=0 img n
	dir=$(dirname "$md")
	[ -s "$md" ] || { echo "check: $md is missing or empty"; return 1; }
	awk '
	function check(line, lno,   n, c, i, v, nums) {
		n = split(line, c, "|"); nums = 0; rows++
		for (i = 3; i < n; i++) {
			v = c[i]; gsub(/^ +| +$/, "", v)
			if (v ~ /^[0-9]+(\.[0-9]+)?x?$/) nums++
			else if (v ~ /^[0-9]+\.[0-9]+x\.\.[0-9]+\.[0-9]+x$/) nums++
			else if (v != "-" && v != "met" && v != "MISSED" && v != "split") {
				printf "check: line %d: cell \"%s\" is not a number\n", lno, v; bad = 1
			}
		}
		if (!nums) { printf "check: line %d: a row without numbers: %s\n", lno, line; bad = 1 }
	}
	{ line[NR] = $0 }
	END {
		for (i = 1; i <= NR; i++) {
			if (line[i] !~ /^\|/ || line[i] ~ /^\|[-| :]+\|$/) continue   # not a table; separator
			if (line[i + 1] ~ /^\|[-| :]+\|$/) continue                    # header
			check(line[i], i)
		}
		if (!rows) { print "check: no table rows"; bad = 1 }
		exit bad
	}' "$md" || bad=1
	n=0
	while read -r img; do
		n=$((n + 1))
		if [ ! -s "$dir/$img" ]; then
			echo "check: plot $img is missing"; bad=1
		elif [ "$(head -c 8 "$dir/$img" | od -An -tx1 | tr -d ' \n')" != 89504e470d0a1a0a ]; then
			echo "check: plot $img is not a PNG"; bad=1
		fi
	done < <(grep -o '!\[[^]]*\]([^)]*)' "$md" | sed 's/.*(\(.*\))/\1/')
	[ $n -gt 0 ] || { echo "check: no plots"; bad=1; }
	for s in "## Targets" "## FxMark" "## Lock and I/O statistics"; do
		grep -q "^$s" "$md" || { echo "check: no section \"$s\""; bad=1; }
	done
	grep -q '^Commit measured: [0-9a-f]\{40\}' "$md" || { echo "check: no commit"; bad=1; }
	# The statistics section: a lock-class table and a journal table with rows.
	grep -qx '_No statistics: part lockstats was not in PARTS._' "$md" ||
	for s in "| workload, lock class |" "| workload | ops/s stats on |"; do
		awk -v h="$s" 'index($0, h) == 1 { getline; getline; if ($0 ~ /^\| [A-Z]/ && $0 !~ /^\| \(no /) f = 1 } END { exit !f }' "$md" ||
			{ echo "check: no statistics table \"$s ...\" with rows"; bad=1; }
	done
	[ $bad = 0 ] && echo "check: $md is well formed ($n plots)"
	return $bad
}
if [ -n "$CHECK_ONLY" ]; then
	check_report "$CHECK_ONLY"
	exit
fi

# ---- configuration -------------------------------------------------------------

ROOT=0
[ "$(id -u)" = 0 ] && ROOT=1
have() { command -v "$1" >/dev/null; }
pick() { for f in "$@"; do [ -x "$f" ] && { echo "$f"; return; }; done; }
B=${BENCH_BUILD:-$(pick build/bench/fxmark)}
B=${B%/bench/fxmark}
[ -d "${B:-/nonexistent}" ] || { echo "report.sh: no build with bench/fxmark: make"; exit 1; }
B=$(cd "$B" && pwd)
FXMARK=$B/bench/fxmark NULLFS=$B/bench/nullfs UEXT4=$B/uext4
for f in "$FXMARK" "$NULLFS" "$UEXT4" "$B/bench/create_bench" "$B/bench/orphan_bench"; do
	[ -x "$f" ] || { echo "report.sh: $f missing: build first (make)"; exit 1; }
done
have gnuplot || { echo "report.sh: gnuplot missing (apt-get install gnuplot-nox)"; exit 1; }

if [ $QUICK = 1 ]; then
	: "${RUNS:=1}" "${THREADS:=1 2}" "${SECS:=0.05}" "${DBENCH_SECS:=2}" "${STRESS_SECS:=1}"
	: "${CREATE_FILES:=200}" "${IMG_SIZE:=1G}" "${IMG_INODES:=262144}"
	: "${SYSTEMS:=lib fuse nullfs nullfs-wb kernel}"
else
	: "${RUNS:=5}" "${THREADS:=1 2 4 8 16}" "${SECS:=0.3}" "${DBENCH_SECS:=5}" "${STRESS_SECS:=1}"
	: "${CREATE_FILES:=5000}" "${IMG_SIZE:=8G}" "${IMG_INODES:=4000000}"
	: "${SYSTEMS:=lib fuse kernel fuse2fs nullfs nullfs-wb}"
fi
PARTS=${PARTS:-fxmark lockstats create orphan stressng dbench}
LOOP=auto
URING=${URING:-0}

W=$(mktemp -d /dev/shm/uext4-report.XXXXXX)
if [ -z "$OUTMD" ]; then
	if [ $QUICK = 1 ]; then OUTMD=$W/out/BENCHMARKS.md; else OUTMD=$TOP/BENCHMARKS.md; fi
fi
mkdir -p "$(dirname "$OUTMD")"
OUTMD=$(cd "$(dirname "$OUTMD")" && pwd)/$(basename "$OUTMD")
if [ -z "$PLOTDIR" ]; then
	if [ $QUICK = 1 ]; then PLOTDIR=$(dirname "$OUTMD")/plots; else PLOTDIR=$TOP/bench/plots; fi
fi
mkdir -p "$PLOTDIR"
PLOTDIR=$(cd "$PLOTDIR" && pwd)
MNT=$W/mnt IMG=$W/img
mkdir -p "$MNT"
RAW=$W/raw      # lines: WORKLOAD SYSTEM THREADS VALUE (one per run)
META=$W/meta    # lines: WORKLOAD THREADS META_READS ITABLE_READS (lib, one per run)
NOTES=$W/notes  # free text for the report's last section
CPU=$W/cpu      # lines: WORKLOAD THREADS OPS_PER_SEC CPU_SECS WORKER_CPU_SECS SECS (lib, one per run)
: >"$RAW"; : >"$META"; : >"$NOTES"; : >"$CPU"
LOG=$W/log

. "$TOP/bench/uring.inc"
cleanup() {
	if mountpoint -q "$MNT"; then fusermount3 -u "$MNT" 2>/dev/null || umount -l "$MNT"; fi
	[ "$URING" = 1 ] && uring_switch restore
	if [ "$KEEP" = 1 ]; then rm -rf "$W/img"; echo "report.sh: kept $W"
	elif [ $QUICK = 1 ]; then rm -rf "$W"
	else rm -rf "$W"; fi
}
KEEP=${KEEP:-0}
trap cleanup EXIT
trap 'echo "report.sh: interrupted"; exit 1' INT TERM
[ "$URING" = 1 ] && uring_switch on
export UEXT4_FUSE_LOOP=$LOOP   # nullfs takes the same default transport as uext4 mount

can_run() {
	case $1 in
	lib) return 0 ;;
	fuse | nullfs | nullfs-wb) [ -c /dev/fuse ] ;;
	kernel) [ $ROOT = 1 ] && losetup -f >/dev/null 2>&1 ;;
	fuse2fs) have fuse2fs && [ -c /dev/fuse ] ;;
	*) return 1 ;;
	esac
}
SYS=
for s in $SYSTEMS; do
	if can_run "$s"; then SYS="$SYS $s"; else echo "report.sh: no $s here (kernel: root and a loop device; fuse2fs: the package)" | tee -a "$NOTES"; fi
done

T_START=$(date +%s)
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
COMMIT=$(git -C "$TOP" rev-parse HEAD 2>/dev/null || echo unknown)
DIRTY=$(git -C "$TOP" status --porcelain --untracked-files=no 2>/dev/null | grep -v -e ' BENCHMARKS.md$' -e ' bench/plots/' | head -1)
say() { echo "report.sh [$(($(date +%s) - T_START))s]: $*"; }

# ---- systems: fresh image, mount, unmount --------------------------------------

# fresh_image [mke2fs -O FEATURES [SIZE]]: an image of IMG_SIZE with
# IMG_INODES inodes, or of SIZE with mke2fs's inode count.
fresh_image() {
	rm -f "$IMG"
	truncate -s "${2:-$IMG_SIZE}" "$IMG"
	mke2fs -q -F -t ext4 -b 4096 $([ -z "${2:-}" ] && echo "-N $IMG_INODES") ${1:+-O "$1"} "$IMG" >/dev/null
}
SERVER_PID=
alive() {
	local st
	st=$(awk '{ print $3 }' "/proc/$1/stat" 2>/dev/null) || return 1
	[ -n "$st" ] && [ "$st" != Z ] && [ "$st" != X ]
}
wait_exit() { # PID: up to 120 s for a FUSE server to finish writing back
	local i
	for ((i = 0; i < 1200; i++)); do alive "$1" || return 0; sleep 0.1; done # polling: no pidfd in bash
	echo "report.sh: server $1 still running 120 s after unmount" | tee -a "$NOTES"
}
# The transport "auto" picks follows enable_uring, which other work on the
# machine may switch: its value at every FUSE mount of this script and at
# every part's start and end goes into URING_SEEN, and the report counts them.
URING_SEEN=$W/uring_seen
: >"$URING_SEEN"
uring_sample() { cat "$URING_PARAM" 2>/dev/null >>"$URING_SEEN" || echo absent >>"$URING_SEEN"; }
# mount_sys SYSTEM: mount IMG (nullfs: nothing) on MNT.
mount_sys() {
	case $1 in fuse | nullfs*) uring_sample ;; esac
	SERVER_PID=
	case $1 in
	fuse) "$UEXT4" mount "$IMG" "$MNT" 2>>"$LOG" || return 1 ;;
	kernel) mount -t ext4 -o loop,noinit_itable "$IMG" "$MNT" || return 1 ;;
	fuse2fs)
		fuse2fs $([ $ROOT = 1 ] || echo "-o fakeroot") "$IMG" "$MNT" >>"$LOG" 2>&1 || return 1
		SERVER_PID=$(pgrep -n -f "fuse2fs.* $IMG $MNT") ;;
	nullfs)
		# The stub remembers no files: entries must stay in the kernel's
		# cache from the setup's create to the unlink or rename.
		"$NULLFS" --create --timeout=3600 "$MNT" 2>>"$LOG" || return 1
		SERVER_PID=$(pgrep -n -f -x "$NULLFS --create --timeout=3600 $MNT") ;;
	nullfs-wb)
		"$NULLFS" --create --timeout=3600 --writeback "$MNT" 2>>"$LOG" || return 1
		SERVER_PID=$(pgrep -n -f -x "$NULLFS --create --timeout=3600 --writeback $MNT") ;;
	esac
	mountpoint -q "$MNT"
}
umount_sys() {
	case $1 in
	fuse) "$UEXT4" umount "$MNT" 2>>"$LOG" || { echo "report.sh: uext4 umount failed: $(tail -1 "$LOG")" | tee -a "$NOTES"; return 1; } ;;
	kernel) umount "$MNT" ;;
	*) fusermount3 -u "$MNT" || umount -l "$MNT" ;;
	esac
	[ -n "$SERVER_PID" ] && wait_exit "$SERVER_PID"
	SERVER_PID=
	return 0
}
fsck_note() { # SYSTEM WHAT: e2fsck -fn of the image it left
	if e2fsck -fn "$IMG" >"$W/fsck.out" 2>&1; then
		echo "- $2 on $1: e2fsck -fn clean" >>"$W/fsck"
	else
		echo "- $2 on $1: e2fsck -fn NOT CLEAN: $(grep -v '^Pass\|^e2fsck' "$W/fsck.out" | head -3 | tr '\n' ' ')" >>"$W/fsck"
	fi
}
: >"$W/fsck"

# ---- part 1: fxmark ---------------------------------------------------------------

FX_ALL="MWCL MWCM MWUL MWUM MWRL MWRM DWTL MRPL MRPM MRDL MRDM"
fx_workloads() {
	case $1 in
	nullfs) echo "MWCL MWCM MWUL MWUM MRPL MRPM MRDL MRDM" ;;   # no rename, no write
	nullfs-wb) echo "MWUL MWUM" ;;   # where the writeback cache adds a request
	*) echo "$FX_ALL" ;;
	esac
}
# fx_point SYSTEM THREADS LAST: one fxmark process over every workload.
fx_point() {
	local sys=$1 n=$2 out rc cap
	cap=$((IMG_INODES / 8 / n))   # files per thread and workload: the image never fills
	fresh_image
	if [ "$sys" = lib ]; then
		out=$(timeout 600 "$FXMARK" -d "$SECS" -n "$cap" lib "$IMG" "$n" $(fx_workloads lib) 2>>"$LOG")
		rc=$?
	else
		mount_sys "$sys" || { echo "report.sh: mounting $sys failed" | tee -a "$NOTES"; return 1; }
		out=$(timeout 600 "$FXMARK" -d "$SECS" -n "$cap" posix "$MNT" "$n" $(fx_workloads "$sys") 2>>"$LOG")
		rc=$?
		umount_sys "$sys"
	fi
	[ $rc = 0 ] || echo "report.sh: fxmark $sys $n threads: exit $rc: $(grep fxmark "$LOG" | tail -1)" | tee -a "$NOTES"
	awk -v s="$sys" '/^RESULT/ {
		for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
		if (v["errors"] == 0) print v["workload"], s, v["threads"], v["ops_per_sec"]
	}' <<<"$out" >>"$RAW"
	[ "$sys" = lib ] && awk '/^RESULT/ {
		for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
		print v["workload"], v["threads"], v["meta_reads"], v["itable_reads"] }' <<<"$out" >>"$META"
	[ "$sys" = lib ] && awk '/^RESULT/ {
		for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
		if (v["errors"] == 0 && v["worker_cpu_secs"] != "")
			print v["workload"], v["threads"], v["ops_per_sec"], v["cpu_secs"], v["worker_cpu_secs"], v["secs"] }' <<<"$out" >>"$CPU"
	if [ "$3" = 1 ] && [ "${sys#nullfs}" = "$sys" ]; then fsck_note "$sys" "fxmark, $n threads"; fi
	return 0
}
part_fxmark() {
	local r sys n last maxn
	maxn=$(echo "$THREADS" | awk '{print $NF}')
	for ((r = 1; r <= RUNS; r++)); do
		for sys in $SYS; do
			for n in $THREADS; do
				last=0
				[ $r = "$RUNS" ] && [ "$n" = "$maxn" ] && last=1
				fx_point "$sys" "$n" "$last"
			done
			say "fxmark run $r/$RUNS: $sys done"
		done
	done
}

# ---- part 1b: lock and I/O statistics (a separate run, stats on) ----------------

# The statistics come from their own fxmark run per system and thread
# count (fxmark -S), so that counting never touches the throughput numbers
# of part 1; its ops/s are kept beside them to show what counting cost.
# lib: the library's stats API on fxmark's mount; fuse: the mount's virtual
# xattr (what `uext4 stats --json` reads).  One run (not RUNS): the
# statistics explain, the tables above measure.
STATS=$W/stats          # lines: SYSTEM THREADS WORKLOAD PATH VALUE (the JSON, flattened)
STATS_OPS=$W/stats_ops  # lines: SYSTEM THREADS WORKLOAD OPS_PER_SEC OPS
: >"$STATS"; : >"$STATS_OPS"
# The thread counts: those of "2 16" that THREADS has, else its largest.
stats_threads() {
	local n out=""
	for n in 2 16; do case " $THREADS " in *" $n "*) out="$out $n" ;; esac; done
	echo "${out:-$(echo "$THREADS" | awk '{print $NF}')}"
}
STATS_THREADS=${STATS_THREADS:-$(stats_threads)}
# json_flat: "PREFIX... {JSON}" lines in, "PREFIX... PATH VALUE" out, one
# per number, string or boolean (PATH: the keys joined by dots).  Enough
# for uext4_stats_format()'s objects (no arrays, no escapes in strings).
json_flat() {
	awk '
	function emit(v,   i, path) {
		path = key[1]
		for (i = 2; i <= d; i++) path = path "." key[i]
		print pre path, v
	}
	{
		i = index($0, "{"); if (!i) next
		pre = substr($0, 1, i - 1); s = substr($0, i); n = length(s); d = 0; p = 1
		while (p <= n) {
			c = substr(s, p, 1)
			if (c == "{") { d++; want_key = 1; p++ }
			else if (c == "}") { d--; p++ }
			else if (c == ",") { want_key = 1; p++ }
			else if (c == ":") { want_key = 0; p++ }
			else if (c == "\"") {
				q = index(substr(s, p + 1), "\""); str = substr(s, p + 1, q - 1); p += q + 1
				if (want_key) key[d] = str; else emit(str)
			} else if (match(substr(s, p), /^[-+0-9a-zA-Z.]+/)) {
				emit(substr(s, p, RLENGTH)); p += RLENGTH
			} else p++
		}
	}'
}
# stats_point SYSTEM THREADS: one fxmark -S run over every workload.
stats_point() {
	local sys=$1 n=$2 out cap
	cap=$((IMG_INODES / 8 / n))
	fresh_image
	if [ "$sys" = lib ]; then
		out=$(timeout 600 "$FXMARK" -S -d "$SECS" -n "$cap" lib "$IMG" "$n" $(fx_workloads lib) 2>>"$LOG")
	else
		mount_sys "$sys" || { echo "report.sh: mounting $sys failed (statistics run)" | tee -a "$NOTES"; return 1; }
		out=$(timeout 600 "$FXMARK" -S -d "$SECS" -n "$cap" posix "$MNT" "$n" $(fx_workloads "$sys") 2>>"$LOG")
		umount_sys "$sys"
	fi
	awk -v s="$sys" '/^RESULT/ {
		for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
		if (v["errors"] == 0) print s, v["threads"], v["workload"], v["ops_per_sec"], v["ops"] }' <<<"$out" >>"$STATS_OPS"
	grep '^STATS ' <<<"$out" | sed 's/^STATS workload=\([^ ]*\) threads=\([0-9]*\) /'"$sys"' \2 \1 /' | json_flat >>"$STATS"
	grep -q "^$sys $n " "$STATS" || echo "report.sh: the statistics run of $sys at $n threads gave no statistics" | tee -a "$NOTES"
	[ "$sys" != nullfs ] && fsck_note "$sys" "fxmark -S (statistics run), $n threads"
	return 0
}
part_lockstats() {
	local sys n
	for sys in $(sys_among "lib fuse"); do
		for n in $STATS_THREADS; do stats_point "$sys" "$n"; done
		say "statistics run: $sys done"
	done
}

# ---- parts 2-5: the seeds' benchmarks, through their own scripts -----------------

# Systems of SYS that a part knows (in SYS's order).
sys_among() { local s; for s in $SYS; do case " $1 " in *" $s "*) echo -n "$s " ;; esac; done; }
part_create() {
	local d=$W/parts/create
	mkdir -p "$d"
	BENCH_TMP=/dev/shm OUT=$d RUNS=$RUNS FILES=$CREATE_FILES FUSE2FS_FILES=$((CREATE_FILES / 5 + 1)) \
		TARGETS="$(sys_among "$([ $QUICK = 1 ] && echo "lib fuse" || echo "lib fuse nullfs kernel fuse2fs")")" \
		LIB_THREADS="$THREADS" \
		CREATE_THREADS="$THREADS" FUSE2FS_THREADS="$THREADS" \
		CREATE_BENCH=$B/bench/create_bench NULLFS=$NULLFS UEXT4=$UEXT4 \
		bench/create.sh >"$d/out" 2>&1 || echo "report.sh: create.sh failed (exit $?)" | tee -a "$NOTES"
	# raw: target threads files_per_thread secs sync itable errors files umount
	cat "$d"/create-*.raw 2>/dev/null | awk '$4 > 0 && $7 == 0 { print "sibling-creates", $1, $2, $8 / $4 }' >>"$RAW"
	cat "$d"/create-*.raw 2>/dev/null | awk '$1 == "lib" && $7 == 0 { print "sibling-creates-itable", $2, -1, $6 }' >>"$META"
	grep -h 'e2fsck' "$d"/create-*.txt 2>/dev/null | sed 's/^/- sibling creates: /' >>"$W/fsck"
}
part_orphan() {
	local d=$W/parts/orphan secs=0.5 passes=8
	[ $QUICK = 1 ] && { secs=0.1; passes=1; }
	mkdir -p "$d"
	BENCH_TMP=/dev/shm OUT=$d RUNS=$RUNS THREADS="$THREADS" FUSE2FS_THREADS="$THREADS" \
		WORKLOADS=truncate VARIANTS="orph list" SECS=$secs FUSE2FS_SECS=$secs \
		TRUNC_PASSES=$passes FUSE2FS_TRUNC_PASSES=1 \
		TARGETS="$(sys_among "lib fuse kernel fuse2fs")" \
		ORPHAN_BENCH=$B/bench/orphan_bench NULLFS=$NULLFS UEXT4=$UEXT4 \
		bench/orphan.sh >"$d/out" 2>&1 || echo "report.sh: orphan.sh failed (exit $?)" | tee -a "$NOTES"
	# raw: target variant workload threads iters ops secs sync errors capped p50 p99
	cat "$d"/orphan-*.raw 2>/dev/null | awk '$7 > 0 && $9 == 0 {
		print "stress-orphan-" ($2 == "orph" ? "file" : "list"), $1, $4, $6 / $7 }' >>"$RAW"
	grep -h 'e2fsck' "$d"/orphan-*.txt 2>/dev/null | sed 's/^/- stress-orphan: /' >>"$W/fsck"
}
# stress-ng STRESSOR for N instances on the mounted MNT: bogo ops/s (real time).
stress_point() {
	local y=$W/stress.yaml
	rm -f "$y"
	mkdir -p "$MNT/sng"
	timeout $((STRESS_SECS + 60)) stress-ng --"$1" "$2" --timeout "$STRESS_SECS" --temp-path "$MNT/sng" \
		--metrics-brief --yaml "$y" >>"$LOG" 2>&1 || return 1
	awk '/bogo-ops-per-second-real-time:/ { print $2; exit }' "$y"
}
part_stressng() {
	local r sys n var st v
	have stress-ng || { echo "report.sh: stress-ng missing (apt-get install stress-ng): its part is left out" | tee -a "$NOTES"; return; }
	for ((r = 1; r <= RUNS; r++)); do
		for sys in $(sys_among "$([ $QUICK = 1 ] && echo fuse || echo "fuse kernel fuse2fs")"); do
			for var in orph list; do
				for n in $THREADS; do
					[ $QUICK = 1 ] && [ "$n" != 1 ] && continue
					for st in dentry dnotify; do
						fresh_image "$([ $var = orph ] && echo orphan_file || echo ^orphan_file)" 1G
						mount_sys "$sys" || { echo "report.sh: mounting $sys failed" | tee -a "$NOTES"; continue; }
						v=$(stress_point "$st" "$n")
						umount_sys "$sys"
						[ -n "$v" ] && echo "stress-ng-$st-$var $sys $n $v" >>"$RAW"
					done
				done
			done
		done
		say "stress-ng run $r/$RUNS done"
	done
}
part_dbench() {
	local d=$W/parts/dbench wl="" n tg=""
	have dbench || { echo "report.sh: dbench missing (apt-get install dbench): its part is left out" | tee -a "$NOTES"; return; }
	for n in $THREADS; do wl="$wl dbench-$n"; done
	for s in $(sys_among "fuse kernel fuse2fs"); do case $s in fuse) tg="$tg uext4" ;; *) tg="$tg $s" ;; esac; done
	mkdir -p "$d"
	OUT=$d RUNS=$RUNS LOOPS=$LOOP TARGETS="$tg" WORKLOADS="$wl" DBENCH_SECS=$DBENCH_SECS UEXT4=$UEXT4 \
		bench/real.sh >"$d/out" 2>&1 || echo "report.sh: real.sh failed (exit $?)" | tee -a "$NOTES"
	# lines: workload target median flag
	cat "$d"/real-*.txt 2>/dev/null | awk -v loop="uext4-$LOOP" '$3 != "-" {
		sub(/^dbench-/, "", $1); t = $2 == loop ? "fuse" : $2; print "dbench", t, $1, $3 }' >>"$RAW"
	grep -h 'e2fsck found' "$d/out" | sed 's/^/- dbench: /' >>"$W/fsck"
}

# What the report is made from, kept (full runs: in bench/results/, which
# git ignores) so that `--from DIR` can make the report again without
# measuring (a change to the tables or plots).
SAVED="raw meta notes fsck uring_seen stats stats_ops cpu"
save_results() {
	local d=$1 f
	mkdir -p "$d"
	for f in $SAVED; do cp "$W/$f" "$d/$f"; done
	declare -p T_START T_END LOAD_START LOAD_END COMMIT DIRTY RUNS THREADS SECS IMG_SIZE IMG_INODES \
		PARTS STATS_THREADS CREATE_FILES STRESS_SECS DBENCH_SECS QUICK B >"$d/run.env"
}
if [ -n "$FROM" ]; then
	for f in $SAVED; do
		case $f in
		stats*) [ -e "$FROM/$f" ] || { : >"$W/$f"; OLD_RESULTS=1; continue; } ;;   # kept before part lockstats existed
		cpu) [ -e "$FROM/$f" ] || { : >"$W/$f"; continue; } ;;   # kept since the CPU section
		esac
		cp "$FROM/$f" "$W/$f" || exit 1
	done
	. "$FROM/run.env"
	[ "${OLD_RESULTS:-0}" = 1 ] && PARTS=$(echo " $PARTS " | sed 's/ lockstats / /')
	say "report from the results in $FROM"
else
	for p in $PARTS; do
		say "part $p"
		uring_sample
		"part_$p"
		uring_sample
	done
	T_END=$(date +%s)
	LOAD_END=$(cut -d' ' -f1-3 /proc/loadavg)
	say "measurements done"
	if [ $QUICK = 0 ]; then
		RESULTS=$TOP/bench/results/report-$(date -u -d "@$T_START" +%Y%m%d-%H%M%S)
		save_results "$RESULTS"
		say "results kept in $RESULTS (bench/report.sh --from $RESULTS makes the report again)"
	else
		save_results "$W/results"
	fi
fi

# ---- the report ------------------------------------------------------------------

# medians: WORKLOAD SYSTEM THREADS MEDIAN
MED=$W/medians
awk '
function median(list,   n, i, j, t, a) {
	n = split(list, a, " ")
	for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++)
		if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
	return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
$4 + 0 > 0 { k = $1 " " $2 " " $3; v[k] = v[k] " " $4; if (!(k in seen)) { seen[k] = 1; order[++nk] = k } }
END { for (i = 1; i <= nk; i++) print order[i], median(v[order[i]]) }' "$RAW" >"$MED"

val() { awk -v w="$1" -v s="$2" -v n="$3" '$1 == w && $2 == s && $3 == n { print $4 }' "$MED"; }
systems_of() { # WORKLOAD: the systems with values, in the columns' order
	local s
	for s in lib fuse kernel fuse2fs nullfs nullfs-wb; do
		awk -v w="$1" -v s="$s" '$1 == w && $2 == s { f = 1 } END { exit !f }' "$MED" && echo -n "$s "
	done
}
threads_in() { awk -v w="$1" '$1 == w { print $3 }' "$MED" | sort -n -u | tr '\n' ' '; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "" || b + 0 == 0) print "-"; else printf "%.2fx", a / b }'; }
fmt() { awk -v a="$1" 'BEGIN { if (a == "") print "-"; else if (a >= 100) printf "%.0f", a; else printf "%.1f", a }'; }

PLOTREL=$(realpath --relative-to="$(dirname "$OUTMD")" "$PLOTDIR")
# plot WORKLOAD TITLE UNIT: PLOTDIR/WORKLOAD.png, ops/s against threads, log scales.
plot() {
	local wl=$1 dat=$W/$1.dat s cmd="" i=2 systems
	systems=$(systems_of "$wl")
	{
		echo "# threads $systems"
		for n in $(threads_in "$wl"); do
			echo -n "$n"
			for s in $systems; do v=$(val "$wl" "$s" "$n"); echo -n " ${v:-NaN}"; done
			echo
		done
	} >"$dat"
	for s in $systems; do
		cmd="$cmd${cmd:+, }'$dat' using 1:$i with linespoints lw 2 pt 7 title '$s'"
		i=$((i + 1))
	done
	gnuplot <<EOF 2>>"$LOG"
set terminal png size 800,500
set output '$PLOTDIR/$wl.png'
set title "$2"
set xlabel 'threads (clients)'
set ylabel '$3 (log scale)'
set logscale x 2
set xrange [$(threads_in "$wl" | awk '{ printf "%g:%g", $1 * 0.8, $NF * 1.25 }')]
set logscale y
set format y '%.0s%c'
set xtics ($(threads_in "$wl" | sed 's/ *$//; s/ /, /g'))
set key outside right
set grid
plot $cmd
EOF
	echo "![$wl]($PLOTREL/$wl.png)"
}

# table WORKLOAD TITLE UNIT: the Markdown table (threads x systems, ratios) and its plot.
table() {
	local wl=$1 systems n s hdr sep row wb
	systems=$(systems_of "$wl")
	[ -n "$systems" ] || { echo "_No results: $2 did not run._"; echo; return; }
	hdr="| threads |" sep="|---|"
	for s in $systems; do hdr="$hdr $s |"; sep="$sep---|"; done
	hdr="$hdr lib/kernel | FUSE/kernel | FUSE/fuse2fs | FUSE/nullfs |"; sep="$sep---|---|---|---|"
	wb=0
	case " $systems " in *" nullfs-wb "*) wb=1; hdr="$hdr FUSE/nullfs-wb |"; sep="$sep---|" ;; esac
	echo "$3, median of $RUNS:"
	echo
	echo "$hdr"; echo "$sep"
	for n in $(threads_in "$wl"); do
		row="| $n |"
		for s in $systems; do row="$row $(fmt "$(val "$wl" "$s" "$n")") |"; done
		row="$row $(ratio "$(val "$wl" lib "$n")" "$(val "$wl" kernel "$n")") |"
		row="$row $(ratio "$(val "$wl" fuse "$n")" "$(val "$wl" kernel "$n")") |"
		row="$row $(ratio "$(val "$wl" fuse "$n")" "$(val "$wl" fuse2fs "$n")") |"
		row="$row $(ratio "$(val "$wl" fuse "$n")" "$(val "$wl" nullfs "$n")") |"
		[ $wb = 1 ] && row="$row $(ratio "$(val "$wl" fuse "$n")" "$(val "$wl" nullfs-wb "$n")") |"
		echo "$row"
	done
	echo
	plot "$wl" "$2" "$3"
	echo
}

# target LABEL "W S N" "W S N" FACTOR: a row of the Targets table for
# workload W, system S, N threads as A and B: met when median A >= FACTOR *
# median B.  This machine is noisy (a 1-thread create rate can be half of
# another run's, same binary and worker CPU), so the row also pairs the runs
# worst against best, min A / max B .. max A / min B, and says whether every
# pairing agrees: "met" or "MISSED" if all are on one side of FACTOR,
# "split" if the verdict depends on which runs are paired.
# A target whose numbers this run lacks goes to UNMEASURED instead.
UNMEASURED=$W/unmeasured
target() {
	local a b st ra rb
	a=$(val $2) b=$(val $3)
	if [ -z "$a" ] || [ -z "$b" ]; then
		echo "- $1 (needs $4x)" >>"$UNMEASURED"
		return
	fi
	st=$(awk -v a="$a" -v b="$b" -v f="$4" 'BEGIN { print (a >= f * b ? "met" : "MISSED") }')
	ra=$(run_range $2) rb=$(run_range $3)
	echo "| $1 | $(fmt "$a") | $(fmt "$b") | $(ratio "$a" "$b") | $4x | $st | $(pairings "$ra" "$rb" "$4") |"
}
# run_range W S N: the smallest and largest value of the runs, "MIN MAX".
run_range() {
	awk -v w="$1" -v s="$2" -v n="$3" '$1 == w && $2 == s && $3 == n && $4 + 0 > 0 {
		if (!k++ || $4 + 0 < lo) lo = $4 + 0; if (k == 1 || $4 + 0 > hi) hi = $4 + 0 }
		END { if (k) print lo, hi }' "$RAW"
}
# pairings "AMIN AMAX" "BMIN BMAX" FACTOR: "WORSTx..BESTx VERDICT" cells.
pairings() {
	awk -v ra="$1" -v rb="$2" -v f="$3" 'BEGIN {
		split(ra, a, " "); split(rb, b, " ")
		lo = a[1] / b[2]; hi = a[2] / b[1]
		printf "%.2fx..%.2fx | %s", lo, hi, (lo >= f ? "met" : hi < f ? "MISSED" : "split") }'
}
targets() {
	local n maxn=16 wl
	echo "Evaluated from the medians below (A >= factor x B); the last two columns pair the $RUNS runs"
	echo "of A and B worst against best: \"split\" is a verdict this machine's noise can turn."
	echo
	: >"$UNMEASURED"
	echo "| target | A | B | A/B | needed | result | A/B, runs paired worst..best | every pairing |"
	echo "|---|---|---|---|---|---|---|---|"
	target "lib MWCL: 2 threads (A) vs 1 (B)" "MWCL lib 2" "MWCL lib 1" 1.8
	target "lib MWUL: 2 threads vs 1" "MWUL lib 2" "MWUL lib 1" 1.8
	target "lib MWCM (one shared directory): 2 threads vs 1" "MWCM lib 2" "MWCM lib 1" 1.5
	for n in 1 $maxn; do
		target "lib MWCL vs kernel MWCL, $n threads" "MWCL lib $n" "MWCL kernel $n" 10
		target "lib sibling creates (seed 002) vs kernel, $n threads" "sibling-creates lib $n" "sibling-creates kernel $n" 10
	done
	target "lib MRPL (warm stat): 2 threads vs 1" "MRPL lib 2" "MRPL lib 1" 1.8
	target "lib MRPL vs kernel MRPL, 2 threads" "MRPL lib 2" "MRPL kernel 2" 2
	for wl in $FX_ALL sibling-creates stress-orphan-file; do
		target "lib $wl: 16 threads on $(nproc) CPUs vs 2 (loses <= 20%)" "$wl lib 16" "$wl lib 2" 0.8
	done
	for wl in $(fx_workloads nullfs) sibling-creates; do
		target "FUSE $wl vs nullfs, 8 threads" "$wl fuse 8" "$wl nullfs 8" 0.8
	done
	for wl in $(fx_workloads nullfs-wb); do
		target "FUSE $wl vs nullfs-wb (the stub with uext4's writeback cache), 8 threads" "$wl fuse 8" "$wl nullfs-wb 8" 0.8
	done
	if [ -s "$UNMEASURED" ]; then
		echo
		echo "Not measured in this run (a system or thread count missing):"
		echo
		cat "$UNMEASURED"
	fi
}

meta_table() {
	[ -s "$META" ] || return 0
	echo "Metadata blocks the library read from the device during the timed part (every kind but file"
	echo "data; from \`uext4_get_counters()\`), median of $RUNS; for seed 002's sibling creates, the"
	echo "inode-table blocks read (seed 002's measure: the kernel read 50,000 at 16 tasks before its fix):"
	echo
	local wl n hdr="| threads |" sep="|---|" row ths
	ths=$(awk '{ print $2 }' "$META" | sort -n -u | tr '\n' ' ')
	for wl in $FX_ALL sibling-creates-itable; do hdr="$hdr $wl |"; sep="$sep---|"; done
	echo "$hdr"; echo "$sep"
	for n in $ths; do
		row="| $n |"
		for wl in $FX_ALL sibling-creates-itable; do
			row="$row $(awk -v w="$wl" -v n="$n" '$1 == w && $2 == n { v[++k] = (w ~ /itable/ ? $4 : $3) }
				END { if (!k) { print "-"; exit } for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++)
					if (v[j] + 0 < v[i] + 0) { t = v[i]; v[i] = v[j]; v[j] = t }
					print v[int((k + 1) / 2)] }' "$META") |"
		done
		echo "$row"
	done
	echo
}

# cpu_table: where the library's CPU goes at 1 and 2 threads (lib, medians
# of RUNS), and what that leaves for scaling on this machine.  One worker
# gets the commit's CPU from another core; N workers on P CPUs share them
# with it, so N workers run at most min(N, P / (1 + other/worker)) times as
# fast as one (bench/fxmark.c: worker_cpu_secs).
cpu_table() {
	[ -s "$CPU" ] || return 0
	local P
	P=$(nproc)
	echo "CPU the lib path used per operation (median of $RUNS runs): the worker threads themselves,"
	echo "and everything else in the process (the commit thread, and the kernel's work for it, such as"
	echo "the writes into the image).  One worker gets the other CPU time from a second core; N workers"
	echo "on $P CPUs share them with it, so N workers can run at most min(N, $P / (1 + other/worker))"
	echo "times as fast as one: the ceiling column, for 2 workers against the 1-worker run."
	echo
	echo "| workload | threads | ops/s | worker µs/op | other µs/op | other/worker | CPUs busy | ceiling for 2 vs 1 | measured 2 vs 1 |"
	echo "|---|---|---|---|---|---|---|---|---|"
	awk -v P="$P" -v wls="$FX_ALL" '
	function med(list,   n, a, i, j, t) {
		n = split(list, a, " ")
		for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++)
			if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
		return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
	}
	$2 == 1 || $2 == 2 {
		k = $1 " " $2; ops[k] = ops[k] " " $3
		w[k] = w[k] " " ($5 / ($3 * $6) * 1e6); o[k] = o[k] " " (($4 - $5) / ($3 * $6) * 1e6)
		busy[k] = busy[k] " " ($4 / $6)
	}
	END {
		n = split(wls, wl, " ")
		for (i = 1; i <= n; i++) for (t = 1; t <= 2; t++) {
			k = wl[i] " " t
			if (!(k in ops)) continue
			wu = med(w[k]); ou = med(o[k]); r = wu > 0 ? ou / wu : 0
			ceil = "-"; got = "-"
			if (t == 1) {
				c = P / (1 + r); if (c > 2) c = 2; ceil = sprintf("%.2fx", c)
				k2 = wl[i] " 2"
				if (k2 in ops) got = sprintf("%.2fx", med(ops[k2]) / med(ops[k]))
			}
			printf "| %s | %d | %.0f | %.2f | %.2f | %.2f | %.2f | %s | %s |\n", wl[i], t,
			       med(ops[k]), wu, ou, r, med(busy[k]), ceil, got
		}
	}' "$CPU"
	echo
}

# ---- the statistics section ----------------------------------------------------

# lock_table SYSTEM THREADS: per workload, the two lock classes threads
# waited on longest (total wait, then contentions, then acquisitions), and
# the most often contended class as well where it is neither of those.
lock_table() {
	awk -v s="$1" -v n="$2" -v wls="$FX_ALL" '
	$1 == s && $2 == n && $4 ~ /^locks\./ {
		split($4, p, "."); k = $3 SUBSEP p[2]
		if (!(k in seen)) { seen[k] = 1; cls[$3] = cls[$3] " " p[2] }
		v[k, p[3]] = $5; any[$3] = 1
		if (p[3] == "acquisitions" && $5 > 0) used[$3] = used[$3] " " p[2]
	}
	function better(w, a, b) {   # did threads wait on class a more than on b?
		if (v[w, a, "wait_ns"] != v[w, b, "wait_ns"]) return v[w, a, "wait_ns"] > v[w, b, "wait_ns"]
		if (v[w, a, "contentions"] != v[w, b, "contentions"]) return v[w, a, "contentions"] > v[w, b, "contentions"]
		return v[w, a, "acquisitions"] > v[w, b, "acquisitions"]
	}
	function row(w, c,   acq, con) {
		acq = v[w, c, "acquisitions"] + 0; con = v[w, c, "contentions"] + 0
		printf "| %s %s | %d | %d | %.3f | %.3f | %.1f | %.1f |\n", w, c, acq, con,
			acq ? 100 * con / acq : 0, v[w, c, "wait_ns"] / 1e6,
			con ? v[w, c, "wait_ns"] / con / 1e3 : 0, v[w, c, "wait_max_ns"] / 1e3
		rows++
	}
	END {
		nw = split(wls, W, " ")
		for (i = 1; i <= nw; i++) {
			w = W[i]; if (!(w in any)) continue
			if (!(m = split(used[w], C, " "))) { printf "| %s (no lock taken) | 0 | 0 | 0 | 0 | 0 | 0 |\n", w; rows++; continue }
			for (a = 1; a <= m; a++) for (b = a + 1; b <= m; b++)
				if (better(w, C[b], C[a])) { t = C[a]; C[a] = C[b]; C[b] = t }
			top = 1
			for (a = 1; a <= m; a++) {
				if (a <= 2) row(w, C[a])
				if (v[w, C[a], "contentions"] > v[w, C[top], "contentions"]) top = a
			}
			if (top > 2) row(w, C[top])
		}
		exit !rows
	}' "$STATS"
}
# journal_table SYSTEM THREADS: journal, metadata blocks, and the throughput
# of the statistics run beside part 1's (the cost of counting).
journal_table() {
	awk -v s="$1" -v n="$2" -v wls="$FX_ALL" '
	FILENAME == ARGV[1] { if ($2 == s && $3 == n) off[$1] = $4; next }
	FILENAME == ARGV[2] { if ($1 == s && $2 == n) { on[$3] = $4; ops[$3] = $5 } next }
	$1 == s && $2 == n {
		w = $3; v[w, $4] = $5; have[w] = 1
		if ($4 ~ /^blocks\./ && $4 !~ /^blocks\.data\./) {
			if ($4 ~ /\.read$/) rd[w] += $5; else if ($4 ~ /\.written$/) wr[w] += $5
		}
	}
	function num(x) { return x == "" ? "-" : sprintf("%.0f", x) }
	END {
		nw = split(wls, W, " ")
		for (i = 1; i <= nw; i++) {
			w = W[i]; if (!(w in have)) continue
			c = v[w, "journal.commits"] + 0
			printf "| %s | %s | %s | %s | %d | %.1f | %d | %.0f | %.0f | %.3f | %d | %d | %d |\n", w,
				num(on[w]), num(off[w]), (on[w] != "" && off[w] + 0 > 0) ? sprintf("%.2fx", on[w] / off[w]) : "-",
				c, c ? v[w, "journal.blocks"] / c : 0, v[w, "journal.blocks_max"],
				c ? v[w, "journal.commit_ns"] / c / 1e3 : 0, v[w, "journal.commit_max_ns"] / 1e3,
				v[w, "journal.blocked_ns"] / 1e6, v[w, "journal.handle_waits"], rd[w], wr[w]
			rows++
		}
		exit !rows
	}' "$MED" "$STATS_OPS" "$STATS"
}
# request_table THREADS: the FUSE requests per operation of each workload
# (the statistics' own GETXATTR taken out) and the server's time per op.
FUSE_OPS="LOOKUP GETATTR SETATTR CREATE MKDIR UNLINK RENAME OPENDIR READDIR RELEASE WRITE FORGET"
request_table() {
	awk -v n="$1" -v wls="$FX_ALL" -v cols="$FUSE_OPS" '
	FILENAME == ARGV[1] { if ($1 == "fuse" && $2 == n) ops[$3] = $5; next }
	$1 == "fuse" && $2 == n && $4 ~ /^fuse\.requests\./ {
		split($4, p, "."); w = $3; op = p[3]; have[w] = 1
		if (p[4] == "latency_ns") lat[w] += $5
		if (p[4] != "count") next
		if (op == "GETXATTR") $5--          # the statistics read itself
		if (op == "BATCH_FORGET") op = "FORGET"
		if (op == "READDIRPLUS") op = "READDIR"
		if (op == "RELEASEDIR") op = "OPENDIR"
		if (op == "FLUSH") op = "RELEASE"
		if (!(op in known)) op = "other"
		cnt[w, op] += $5; tot[w] += $5
	}
	BEGIN { nc = split(cols, K, " "); for (i = 1; i <= nc; i++) known[K[i]] = 1 }
	END {
		nw = split(wls, W, " ")
		for (i = 1; i <= nw; i++) {
			w = W[i]; o = ops[w] + 0; if (!(w in have) || !o) continue
			row = "| " w " |"
			for (j = 1; j <= nc; j++) row = row sprintf(" %.2f |", cnt[w, K[j]] / o)
			row = row sprintf(" %.2f | %.2f | %.2f |", cnt[w, "other"] / o, tot[w] / o, lat[w] / o / 1e3)
			print row; rows++
		}
		exit !rows
	}' "$STATS_OPS" "$STATS"
}
lock_stats_section() {
	local sys n hdr sep k
	case " $PARTS " in
	*" lockstats "*) ;;
	*) echo "_No statistics: part lockstats was not in PARTS._"; echo; return ;;
	esac
	if [ ! -s "$STATS" ]; then
		echo "_No statistics: the statistics run gave none (see the notes)._"
		echo
		return
	fi
	echo "From a separate run of bench/fxmark -S per system and thread count (one run, $SECS s per"
	echo "workload, a fresh image), not from the runs of the tables above: counting stays off there."
	echo "lib: the library's stats API (\`uext4_stats_enable/reset/format\`) on fxmark's own mount; fuse:"
	echo "\`uext4 stats --json\` of the mount (its root's virtual xattr), zeroed just before each"
	echo "workload's timed part and read just after it.  The \"stats on\" column is that run's ops/s,"
	echo "beside the median of the runs above with statistics off: one unpaired run on a shared"
	echo "machine, so only a large gap would say that counting costs (it is a relaxed load per lock"
	echo "when off; when on, a trylock first and the clock only for a lock that was taken)."
	echo
	for sys in $(sys_among "lib fuse"); do
		for n in $STATS_THREADS; do
			grep -q "^$sys $n " "$STATS" || continue
			echo "### $sys, $n threads"
			echo
			echo "Lock classes: per workload the two that threads waited on longest, and the most often"
			echo "contended one where it is neither (lock classes count process-wide: for fuse, the server's):"
			echo
			echo "| workload, lock class | acquisitions | contentions | contended % | wait total ms | wait avg us | wait max us |"
			echo "|---|---|---|---|---|---|---|"
			lock_table "$sys" "$n" || echo "| (no lock statistics) | - | - | - | - | - | - |"
			echo
			echo "Journal and metadata blocks (blocks read and written: every kind but file data):"
			echo
			echo "| workload | ops/s stats on | ops/s stats off | on/off | commits | blocks/commit | blocks max | commit avg us | commit max us | handles held back ms | handle waits | meta blocks read | meta blocks written |"
			echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|"
			journal_table "$sys" "$n" || echo "| (no journal statistics) | - | - | - | - | - | - | - | - | - | - | - | - |"
			echo
			if [ "$sys" = fuse ]; then
				hdr="| workload |" sep="|---|"
				for k in $FUSE_OPS other total; do hdr="$hdr $k |"; sep="$sep---|"; done
				echo "FUSE requests the server got per operation (FORGET: FORGET and BATCH_FORGET requests;"
				echo "READDIR with READDIRPLUS; OPENDIR with RELEASEDIR; RELEASE with FLUSH), and the server's time per operation"
				echo "(from taking each request to its reply, summed over the requests):"
				echo
				echo "$hdr server us/op |"; echo "$sep---|"
				request_table "$n" || echo "| (no request statistics) |$(for k in $FUSE_OPS other total x; do echo -n " - |"; done)"
				echo
			fi
		done
	done
}

# "Y" (io_uring) / "N" (classic loop) counts over the run's samples.
uring_on=$(grep -c -x -e Y -e 1 "$URING_SEEN")
uring_all=$(grep -c . "$URING_SEEN")
if [ "$uring_on" = "$uring_all" ] && [ "$uring_all" -gt 0 ]; then
	transport="enable_uring was on at every sample, so FUSE over io_uring"
elif [ "$uring_on" = 0 ]; then
	transport="enable_uring was off at every sample, so the classic loop (pool)"
else
	transport="enable_uring was switched during the run by other work on the machine: on at $uring_on of $uring_all samples (FUSE mounts and part boundaries), so some FUSE numbers are over io_uring and some over the classic loop"
fi
{
	echo "# uext4 benchmarks"
	echo
	echo "Made by \`bench/report.sh$([ $QUICK = 1 ] && echo " --quick")\` (\`make bench\`); do not edit by hand."
	[ -n "$FROM" ] && echo "(Tables and plots made again from that run's kept results by \`bench/report.sh --from\`.)"
	echo
	echo "Commit measured: $COMMIT${DIRTY:+ (with uncommitted changes)}"
	echo
	echo "- machine: $(nproc) CPUs ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')), $(free -g | awk '/^Mem:/ {print $2}') GiB RAM, kernel $(uname -r)"
	echo "- date: $(date -u -d "@$T_START" '+%Y-%m-%d %H:%M UTC'), $((T_END - T_START)) s for the measurements"
	echo "- load average (1, 5, 15 min): $LOAD_START at the start, $LOAD_END at the end (the machine is shared: other work ran meanwhile)"
	echo "- every value: median of $RUNS runs, each on a fresh image in tmpfs (/dev/shm); threads: $THREADS"
	echo "- systems: lib = libuext4 through its API; fuse = \`uext4 mount\` (default transport, -o loop=$LOOP: $transport); kernel = the kernel's ext4 on a loop device; fuse2fs = Debian's fuse2fs; nullfs = bench/nullfs --create, a FUSE server doing no work on the same transport, the ceiling of any FUSE file system here; nullfs-wb = the same with the kernel's writeback cache, as uext4's read-write mount has it (MWUL, MWUM: the kernel sends it a SETATTR of the ctime after every unlink, as it does to uext4)"
	echo "- build: $(realpath --relative-to="$TOP" "$B")/ ($(case $B in */asan | */tsan | */fuzz) echo "a debug build, not the release build: numbers are lower" ;; *) echo "make, the release build" ;; esac))"
	echo
	echo "## Targets"
	echo
	targets
	echo
	echo "## FxMark"
	echo
	echo "bench/fxmark: every thread runs for $SECS s (or until it has done its share), on a fresh ext4 image"
	echo "(mke2fs defaults, 4 KiB blocks, $IMG_SIZE, $IMG_INODES inodes) per system and thread count; the workloads"
	echo "run one after another in one mount.  ops/s of all threads together.  nullfs serves the create,"
	echo "unlink, lookup and readdir workloads (no rename, no data); its readdir lists only . and .., and its"
	echo "entries stay cached for an hour (it remembers no files), so it is a ceiling, not a twin."
	echo "uext4's read-write mount uses the kernel's writeback cache, so the kernel owns regular files'"
	echo "times and sends a SETATTR of the new ctime right after every UNLINK (and RENAME) of one: two"
	echo "round trips per unlink where nullfs, without the cache, gets one (\"FUSE requests per operation\""
	echo "below).  nullfs-wb (MWUL, MWUM) is the stub with the cache: the ceiling of a server that has it."
	echo
	for wl in $FX_ALL; do
		case $wl in
		MWCL) d="create empty files, private directory per thread" ;;
		MWCM) d="create empty files, one shared directory" ;;
		MWUL) d="unlink files, private directories" ;;
		MWUM) d="unlink files, one shared directory" ;;
		MWRL) d="rename within a private directory" ;;
		MWRM) d="rename from a private directory into a shared one" ;;
		DWTL) d="truncate a private file by 4 KiB" ;;
		MRPL) d="stat a private path five directories deep (warm)" ;;
		MRPM) d="stat one shared path five directories deep (warm)" ;;
		MRDL) d="list a private directory of 100 files" ;;
		MRDM) d="list one shared directory of 100 files" ;;
		esac
		echo "### $wl: $d"
		echo
		table "$wl" "$wl: $d" "ops/s"
	done
	echo "## Seed 002: sibling-directory creates"
	echo
	echo "bench/create.sh: every thread creates $CREATE_FILES empty files (fuse2fs: $((CREATE_FILES / 5 + 1))) in its own directory,"
	echo "siblings under one parent, on a fresh image; creates/s.  The library's inode-table reads are in"
	echo "\"Lock and I/O statistics\"."
	echo
	table sibling-creates "seed 002: sibling-directory creates" "creates/s"
	echo "## Seed 000: stress-orphan"
	echo
	echo "bench/orphan.sh truncate: every thread truncates its 4 KiB file one byte at a time (each shrinking"
	echo "truncate puts the inode on the orphan list and takes it off), then writes it back; truncates/s."
	echo
	echo "### Orphan file (mke2fs -O orphan_file)"
	echo
	table stress-orphan-file "seed 000 stress-orphan, orphan file" "truncates/s"
	echo "### Legacy orphan list (mke2fs -O ^orphan_file)"
	echo
	table stress-orphan-list "seed 000 stress-orphan, legacy list" "truncates/s"
	echo "## Seed 004: stress-ng"
	echo
	echo "stress-ng $(stress-ng --version 2>/dev/null | awk '{print $3}') with N instances for $STRESS_SECS s on the mount, bogo ops/s (real time)."
	echo "Debian 12's stress-ng has no \`unlink\` stressor (seed 004's); \`dentry\` (create and unlink files)"
	echo "stands in for it.  Both orphan formats, as seed 004 measured.$([ $QUICK = 1 ] && echo " (--quick: 1 instance.)")"
	echo
	for st in dentry dnotify; do
		for var in orph list; do
			echo "### stress-ng $st, $([ $var = orph ] && echo "orphan file" || echo "legacy orphan list")"
			echo
			table "stress-ng-$st-$var" "stress-ng $st, $var" "bogo ops/s"
		done
	done
	echo "## Seed 001: dbench"
	echo
	echo "bench/real.sh: dbench -t $DBENCH_SECS with N clients (Debian's client.txt) on a fresh 4 GiB image; MB/s."
	echo
	table dbench "seed 001: dbench" "MB/s"
	echo "## Lock and I/O statistics"
	echo
	echo "<!-- LOCK-STATS: per lock class, journal, metadata blocks and FUSE requests (bench/report.sh: lock_stats_section) -->"
	echo
	lock_stats_section
	echo "### Metadata blocks read in the measured runs"
	echo
	meta_table
	echo "### CPU per operation, and the ceiling it sets for 2 threads"
	echo
	cpu_table
	echo "## Checks and notes"
	echo
	if [ -s "$W/fsck" ]; then cat "$W/fsck"; else echo "- no image was checked"; fi
	[ -s "$NOTES" ] && sed 's/^/- /' "$NOTES"
} >"$OUTMD"
say "wrote $OUTMD and plots in $PLOTDIR"
if [ $QUICK = 1 ]; then
	check_report "$OUTMD" || exit 1
fi
exit 0
