#!/bin/bash
# real.sh - real workloads on a mounted image (not a test; `make bench`
# runs it through bench/run.sh): how fast a mount is on real workloads.
#
# Workloads, each on a fresh 4 GiB image (mke2fs -t ext4) in tmpfs:
#   dbench-N  dbench -t DBENCH_SECS N clients (Debian's client.txt), MB/s
#   rsync     rsync -a SRC/ into the mount (SRC: /usr/include), s
#   tar-x     tar x of a tarball of SRC into the mount, s
#   tar-c     tar c of that tree, read back from a cold cache, s
#   rm-rf     rm -rf of that tree, s
#   git       git clone of a local repository (this one), then git status, s
#   sqlite    100k single-row inserts in one transaction into a new db, s
# Targets, in one run:
#   uext4-LOOP  our FUSE mount with -o loop=LOOP for each of LOOPS
#               (default "st pool mt uring"), plus MOUNT_OPTS (e.g.
#               MOUNT_OPTS=writeback).  For uring, as root, real.sh turns
#               /sys/module/fuse/parameters/enable_uring on for that mount
#               and restores it after; a mount that fell back to the
#               classic loop anyway (someone switched it off meanwhile) is
#               reported and its value marked with a trailing "!".
#   fuse2fs     Debian's fuse2fs (-o fakeroot when not root)
#   kernel      the kernel's ext4 on a loop device (root only)
# Median of RUNS runs (default 3).  Then a table and the ratios we aim
# for: dbench >= 50% of the kernel at 8 clients, >= 10x fuse2fs at 8 and
# 5x at 2; rsync, tar x, tar c and rm -rf within 2x of the kernel.  The
# image of the last uext4 run of each workload is checked with e2fsck -fn.
#
# REQUESTS=1 adds, for each uext4 target and workload, one more run with
# the server in the foreground under -o debug (libfuse's request trace),
# untimed: the FUSE requests of the workload's timed part, per entry of SRC
# (for rsync, tar x/c, rm -rf) and by opcode, in a second table.
# Environment: RUNS, LOOPS, MOUNT_OPTS, TARGETS (default "uext4 fuse2fs
# kernel"), WORKLOADS (default all), DBENCH_SECS (default 20), SRC, UEXT4,
# OUT (default bench/results), REQUESTS, HALTPOLL.  With RUNS=3 DBENCH_SECS=10 a full run took
# 19 minutes on the shared 2-core machine (load 3-4) before the unmount
# wait used the image's flock, about 2 minutes less since; dbench is 60% of
# it (DBENCH_SECS), and TARGETS without fuse2fs, fewer LOOPS or WORKLOADS,
# or RUNS=1 make it shorter.
# HALTPOLL=NS (root, guests with the haltpoll cpuidle driver) sets
# /sys/module/haltpoll/parameters/guest_halt_poll_ns to NS for the run and
# puts it back after.  It is a diagnosis, not a tuning uext4 needs: it shows
# how much of a workload is the wake-up of an idle virtual CPU (a halted
# vCPU costs ~20 us to wake here, and a FUSE round trip wakes one or two).
set -u
cd "$(dirname "$0")/.." || exit 1
TOP=$PWD
RUNS=${RUNS:-3}
LOOPS=${LOOPS:-st pool mt uring}
MOUNT_OPTS=${MOUNT_OPTS:-}
TARGETS=${TARGETS:-uext4 fuse2fs kernel}
WORKLOADS=${WORKLOADS:-dbench-1 dbench-2 dbench-8 rsync tar-x tar-c rm-rf git sqlite}
DBENCH_SECS=${DBENCH_SECS:-20}
SRC=${SRC:-/usr/include}
OUT=${OUT:-$TOP/bench/results}
REQUESTS=${REQUESTS:-0}
pick() { for f in "$@"; do [ -x "$f" ] && { echo "$f"; return; }; done; }
UEXT4=${UEXT4:-$(pick "$TOP/build/uext4")}
[ -x "$UEXT4" ] || { echo "real.sh: build uext4 first (make)"; exit 1; }

W=$(mktemp -d /dev/shm/uext4-real.XXXXXX)
MNT=$W/mnt
IMG=$W/real.img
mkdir -p "$MNT" "$OUT"
ROOT=0
[ "$(id -u)" = 0 ] && ROOT=1
. "$TOP/bench/uring.inc"
HALTPOLL=${HALTPOLL:-}
HALTPOLL_PARAM=/sys/module/haltpoll/parameters/guest_halt_poll_ns
HALTPOLL_OLD=
if [ -n "$HALTPOLL" ]; then
	[ $ROOT = 1 ] && [ -w "$HALTPOLL_PARAM" ] ||
		{ echo "real.sh: HALTPOLL needs root and $HALTPOLL_PARAM (the haltpoll cpuidle driver)"; exit 1; }
	HALTPOLL_OLD=$(cat "$HALTPOLL_PARAM")
	echo "$HALTPOLL" >"$HALTPOLL_PARAM"
fi
cleanup() {
	mountpoint -q "$MNT" && { fusermount3 -u "$MNT" 2>/dev/null || umount -l "$MNT"; }
	uring_switch restore
	[ -n "$HALTPOLL_OLD" ] && echo "$HALTPOLL_OLD" >"$HALTPOLL_PARAM"
	rm -rf "$W"
}
trap cleanup EXIT
trap 'echo "real.sh: interrupted"; exit 1' INT TERM

have() { command -v "$1" >/dev/null; }
for t in mke2fs e2fsck; do have $t || { echo "real.sh: $t missing"; exit 1; }; done

# Inputs made once: the tarball of SRC and a git repository to clone.
# (Only when a workload uses them: a dbench-only run, as bench/report.sh's,
# skips them.)
needs() { case " $WORKLOADS " in *" $1 "*) return 0 ;; esac; return 1; }
TARBALL=$W/src.tar
if needs tar-x || needs tar-c || needs rm-rf || [ "$REQUESTS" = 1 ]; then
	tar -C "$(dirname "$SRC")" -cf "$TARBALL" "$(basename "$SRC")" 2>/dev/null
fi
GITSRC=$W/repo.git
if needs git && have git; then
	git clone -q --bare "$TOP" "$GITSRC" 2>/dev/null || GITSRC=
fi

fresh_image() {
	rm -f "$IMG"
	truncate -s 4G "$IMG"
	mke2fs -q -F -t ext4 "$IMG" >/dev/null
}
drop_caches() { sync; [ $ROOT = 1 ] && echo 3 >/proc/sys/vm/drop_caches; }

# target names: uext4-st, uext4-pool, uext4-uring, fuse2fs, kernel
target_list() {
	local t l
	for t in $TARGETS; do
		case $t in
		uext4) for l in $LOOPS; do echo "uext4-$l"; done ;;
		kernel) [ $ROOT = 1 ] && losetup -f >/dev/null 2>&1 && echo kernel ;;
		fuse2fs) have fuse2fs && echo fuse2fs ;;
		esac
	done
}

# The request-counting run's server: foreground, -o debug, trace in TRACE.
TRACE=
mount_traced() {
	local i
	"$UEXT4" mount -f -o "debug,loop=${1#uext4-}${MOUNT_OPTS:+,$MOUNT_OPTS}" "$IMG" "$MNT" \
		>"$TRACE" 2>&1 &
	for ((i = 0; i < 300; i++)); do
		mountpoint -q "$MNT" && return 0
		sleep 0.1 # polling for the mount to appear, 30 s deadline
	done
	return 1
}
mount_target() {
	case $1 in
	uext4-*)
		[ "$1" = uext4-uring ] && uring_switch on
		if [ -n "$TRACE" ]; then mount_traced "$1"; return; fi
		"$UEXT4" mount -o "loop=${1#uext4-}${MOUNT_OPTS:+,$MOUNT_OPTS}" "$IMG" "$MNT" 2>"$W/mount.err" ||
			{ cat "$W/mount.err"; return 1; }
		if grep -q "using the classic loop" "$W/mount.err"; then
			echo "real.sh: $1: $(cat "$W/mount.err")" >&2
			FELL_BACK=1
		fi
		;;
	fuse2fs)
		local o=fakeroot
		[ $ROOT = 1 ] && o=
		fuse2fs ${o:+-o $o} "$IMG" "$MNT" >/dev/null 2>&1 ;;
	kernel) mount -t ext4 -o loop "$IMG" "$MNT" ;;
	esac || return 1
	mountpoint -q "$MNT"
}
# Unmount and wait until the server has written everything back.
umount_target() {
	local i
	case $1 in
	kernel) umount "$MNT" ;;
	uext4-*) fusermount3 -u "$MNT" 2>/dev/null || umount -l "$MNT"
		[ "$1" = uext4-uring ] && uring_switch restore ;;
	*) fusermount3 -u "$MNT" 2>/dev/null || umount -l "$MNT" ;;
	esac
	# The server holds an exclusive flock on the image until it has written
	# everything back (kill -0 on its pid would also wait for the reaping of
	# the daemon's zombie, up to a second more here).
	case $1 in
	uext4-*) flock -w 120 "$IMG" true || echo "real.sh: the $1 server still holds the image 120 s after unmount" ;;
	esac
	if [ "$1" = fuse2fs ]; then
		for ((i = 0; i < 1200; i++)); do
			pgrep -f "fuse2fs.* $IMG $MNT" >/dev/null || break
			sleep 0.1 # polling for the daemon to exit, 120 s deadline
		done
	fi
}

now() { date +%s.%N; }
# start: the timed part of a workload begins (prints the time; marks where
# its requests begin in the trace of a counting run).
start() {
	[ -n "$TRACE" ] && wc -l <"$TRACE" >"$W/trace.from"
	now
}
elapsed() { echo "$(now) $1" | awk '{printf "%.3f", $1 - $2}'; }

# settle DIR: sync -f DIR; a failure (the server refused to write something
# back) is noted in SYNC_FAILED: the run's time still counts, but its value
# is marked "E" in the table.
settle() { sync -f "$1" 2>>"$W/sync.err" || SYNC_FAILED=1; }

# run_workload NAME: prints the result (MB/s for dbench, seconds otherwise)
# of one run on the mounted target, or "-" when it failed.
run_workload() {
	local t0 n
	case $1 in
	dbench-*)
		have dbench || { echo -; return; }
		n=${1#dbench-}
		mkdir -p "$MNT/db"
		dbench -c /usr/share/dbench/client.txt -D "$MNT/db" -t "$DBENCH_SECS" "$n" 2>&1 |
			awk '/^Throughput/ {print $2; found=1} END {if (!found) print "-"}' ;;
	rsync)
		have rsync || { echo -; return; }
		t0=$(start); rsync -a "$SRC/" "$MNT/inc/" || { echo -; return; }; settle "$MNT/inc"; elapsed "$t0" ;;
	tar-x)
		t0=$(start); tar -C "$MNT" -xf "$TARBALL" || { echo -; return; }; settle "$MNT"; elapsed "$t0" ;;
	tar-c)
		tar -C "$MNT" -xf "$TARBALL" || { echo -; return; }; settle "$MNT"
		remount_cold || { echo -; return; }
		t0=$(start); tar -C "$MNT" -cf - . | cat >/dev/null; elapsed "$t0" ;;
	rm-rf)
		tar -C "$MNT" -xf "$TARBALL" || { echo -; return; }; settle "$MNT"
		t0=$(start); rm -rf "${MNT:?}/$(basename "$SRC")" || { echo -; return; }; settle "$MNT"; elapsed "$t0" ;;
	git)
		[ -n "$GITSRC" ] || { echo -; return; }
		t0=$(start)
		git clone -q "$GITSRC" "$MNT/repo" && git -C "$MNT/repo" status --porcelain >/dev/null ||
			{ echo -; return; }
		settle "$MNT"; elapsed "$t0" ;;
	sqlite)
		have sqlite3 || { echo -; return; }
		t0=$(start)
		{ echo "CREATE TABLE t(a INTEGER, b TEXT); BEGIN;"
		  seq 1 100000 | awk '{printf "INSERT INTO t VALUES(%d, \"row-%d\");\n", $1, $1}'
		  echo "COMMIT;"; } | sqlite3 "$MNT/db.sqlite" || { echo -; return; }
		elapsed "$t0" ;;
	esac
}
CUR_TARGET=
remount_cold() {
	umount_target "$CUR_TARGET"
	drop_caches
	mount_target "$CUR_TARGET"
}

median() { sort -g | awk '{v[NR]=$1} END {if (NR == 0) print "-"; else print v[int((NR+1)/2)]}'; }

RES=$W/results
: >"$RES"
echo "real.sh: $(git -C "$TOP" rev-parse --short HEAD 2>/dev/null), $(nproc) CPUs, $(uname -r), images in tmpfs, median of $RUNS${MOUNT_OPTS:+, uext4 with -o $MOUNT_OPTS}${HALTPOLL:+, guest_halt_poll_ns=$HALTPOLL}, load $(cut -d' ' -f1-3 /proc/loadavg)"
T_START=$(now)
for wl in $WORKLOADS; do
	for t in $(target_list); do
		vals=()
		flag=
		t_wl=$(now)
		for ((r = 0; r < RUNS; r++)); do
			FELL_BACK=0
			SYNC_FAILED=0
			fresh_image
			drop_caches
			CUR_TARGET=$t
			mount_target "$t" || { echo "real.sh: mount $t failed"; vals+=(-); break; }
			# Not in $(...): a remount inside must update FELL_BACK here.
			run_workload "$wl" >"$W/val"
			v=$(cat "$W/val")
			umount_target "$t"
			[ "$FELL_BACK" = 1 ] && [ "$v" != - ] && v="$v!"
			[ "$SYNC_FAILED" = 1 ] && [ "$v" != - ] && { v="${v}E"; flag=E; }
			vals+=("$v")
			if [ "${t%%-*}" = uext4 ] && [ $r = $((RUNS - 1)) ]; then
				e2fsck -fn "$IMG" >"$W/fsck.log" 2>&1 ||
					{ echo "real.sh: e2fsck found problems after $wl on $t:"; tail -5 "$W/fsck.log"; }
			fi
		done
		# A run that fell back to st does not count for uring.
		m=$(printf '%s\n' "${vals[@]}" | grep -v -e '^-$' -e '!$' | sed 's/E$//' | median)
		echo "$wl $t $m $flag" >>"$RES"
		printf '%-9s %-12s %10s   (runs: %s; %s s)\n' "$wl" "$t" "$m" "${vals[*]}" "$(elapsed "$t_wl")"
	done
done

# count_requests WORKLOAD TARGET: the counting run; a line for REQ.
REQ=$W/requests
: >"$REQ"
ENTRIES=$( [ -s "$TARBALL" ] && tar -tf "$TARBALL" | wc -l || echo 0)
count_requests() {
	local wl=$1 t=$2 from per
	TRACE=$W/trace.log
	: >"$TRACE"
	echo 0 >"$W/trace.from"
	fresh_image
	drop_caches
	CUR_TARGET=$t
	if mount_target "$t"; then
		run_workload "$wl" >/dev/null
		umount_target "$t"
		from=$(cat "$W/trace.from")
		tail -n +"$((from + 1))" "$TRACE" | awk '/^unique: [0-9]+, opcode: / {n[$4]++; all++}
			END {printf "%d", all; for (o in n) printf " %s=%d", o, n[o]; print ""}' >"$W/req.line"
		per=-
		case $wl in rsync | tar-x | tar-c | rm-rf) per=$(awk -v e="$ENTRIES" '{printf "%.2f", $1 / e}' "$W/req.line") ;; esac
		echo "$wl $t $per $(cat "$W/req.line")" >>"$REQ"
		printf '%-9s %-12s requests: %s (per entry of SRC: %s)\n' "$wl" "$t" "$(cut -d' ' -f1 "$W/req.line")" "$per"
	else
		echo "real.sh: counting run: mounting $t failed"
	fi
	TRACE=
}
if [ "$REQUESTS" = 1 ]; then
	for wl in $WORKLOADS; do
		for t in $(target_list); do
			case $t in uext4-*) count_requests "$wl" "$t" ;; esac
		done
	done
fi

# The table: one row per workload, one column per target.
report() {
targets=$(target_list | tr '\n' ' ')
printf '| workload | unit |'; for t in $targets; do printf ' %s |' "$t"; done; echo
printf '|---|---|'; for t in $targets; do printf -- '---|'; done; echo
for wl in $WORKLOADS; do
	unit=s; case $wl in dbench-*) unit=MB/s ;; esac
	printf '| %s | %s |' "$wl" "$unit"
	for t in $targets; do printf ' %s |' "$(awk -v w="$wl" -v t="$t" '$1==w && $2==t {print $3 $4}' "$RES")"; done
	echo
done
if [ -s "$REQ" ]; then
	echo
	echo "FUSE requests of the timed part (one untimed run under -o debug; per entry of SRC, $ENTRIES entries):"
	echo
	echo "| workload | target | per entry | requests | by opcode |"
	echo "|---|---|---|---|---|"
	awk '{ops = ""; for (i = 5; i <= NF; i++) ops = ops (i > 5 ? " " : "") $i
		printf "| %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, ops}' "$REQ"
fi
if grep -q 'E$' "$RES"; then
	echo
	echo "E: the final sync -f of at least one run failed: the server refused to write something back"
	echo "   (its first message: $(grep -m1 -v '^$' "$W/sync.err" 2>/dev/null))."
fi

# Ratios against the targets above, for the best uext4 loop.
val() { awk -v w="$1" -v t="$2" '$1==w && $2==t {print $3}' "$RES"; }
best_uext4() { # best_uext4 WORKLOAD higher|lower
	awk -v w="$1" -v dir="$2" '$1==w && $2 ~ /^uext4-/ && $3 != "-" {
		if (best == "" || (dir == "higher" ? $3 > best : $3 < best)) { best = $3; who = $2 } }
		END { print best, who }' "$RES"
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "" || b == 0) print "(no value)"; else printf "%.2fx", a / b }'; }
echo
echo "Targets (best uext4 loop):"
for n in 2 8; do
	read -r u who < <(best_uext4 "dbench-$n" higher)
	[ -n "${u:-}" ] || continue
	echo "  dbench-$n: $who $u MB/s = $(ratio "$u" "$(val "dbench-$n" kernel)") kernel (target at 8: >= 0.5)," \
		"$(ratio "$u" "$(val "dbench-$n" fuse2fs)") fuse2fs (target: >= $([ $n = 8 ] && echo 10 || echo 5))"
done
for wl in rsync tar-x tar-c rm-rf git sqlite; do
	read -r u who < <(best_uext4 "$wl" lower)
	[ -n "${u:-}" ] || continue
	echo "  $wl: $who $u s = $(ratio "$u" "$(val "$wl" kernel)") the kernel's time$(case $wl in git | sqlite) ;; *) echo " (target: <= 2)" ;; esac)"
done
}
echo
report | tee "$W/report"
echo
echo "real.sh: $(elapsed "$T_START") s in all, load now $(cut -d' ' -f1-3 /proc/loadavg)"
stamp=$(date +%Y%m%d-%H%M%S)
cp "$RES" "$OUT/real-$stamp.txt"
{ echo "real.sh $(git -C "$TOP" rev-parse --short HEAD 2>/dev/null), $(uname -r), $(nproc) CPUs," \
	"RUNS=$RUNS DBENCH_SECS=$DBENCH_SECS MOUNT_OPTS=$MOUNT_OPTS LOOPS=$LOOPS${HALTPOLL:+ HALTPOLL=$HALTPOLL}"; echo; cat "$W/report"; } \
	>"$OUT/real-$stamp.md"
echo "real.sh: results in $OUT/real-$stamp.txt and .md"
