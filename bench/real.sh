#!/bin/bash
# real.sh - real workloads on a mounted image (not a test; `make bench`
# runs it through bench/run.sh).  Issue "Mount speed on real workloads".
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
#               (default "st pool uring"; uring falls back if the kernel
#               has it off, and the mount says so)
#   fuse2fs     Debian's fuse2fs (-o fakeroot when not root)
#   kernel      the kernel's ext4 on a loop device (root only)
# Median of RUNS runs (default 3).  Then a table and the ratios the issue
# sets: dbench >= 50% of the kernel at 8 clients, >= 10x fuse2fs at 8 and
# 5x at 2; rsync, tar x, tar c and rm -rf within 2x of the kernel.  The
# image of the last uext4 run of each workload is checked with e2fsck -fn.
#
# Environment: RUNS, LOOPS, TARGETS (default "uext4 fuse2fs kernel"),
# WORKLOADS (default all), DBENCH_SECS (default 20), SRC, UEXT4, OUT
# (default bench/results).
set -u
cd "$(dirname "$0")/.." || exit 1
TOP=$PWD
RUNS=${RUNS:-3}
LOOPS=${LOOPS:-st pool uring}
TARGETS=${TARGETS:-uext4 fuse2fs kernel}
WORKLOADS=${WORKLOADS:-dbench-1 dbench-2 dbench-8 rsync tar-x tar-c rm-rf git sqlite}
DBENCH_SECS=${DBENCH_SECS:-20}
SRC=${SRC:-/usr/include}
OUT=${OUT:-$TOP/bench/results}
pick() { for f in "$@"; do [ -x "$f" ] && { echo "$f"; return; }; done; }
UEXT4=${UEXT4:-$(pick "$TOP/build/fast/uext4" "$TOP/build/uext4")}
[ -x "$UEXT4" ] || { echo "real.sh: build uext4 first (make BUILD=fast)"; exit 1; }

W=$(mktemp -d /dev/shm/uext4-real.XXXXXX)
MNT=$W/mnt
IMG=$W/real.img
mkdir -p "$MNT" "$OUT"
ROOT=0
[ "$(id -u)" = 0 ] && ROOT=1
SERVER_PID=
cleanup() {
	mountpoint -q "$MNT" && { fusermount3 -u "$MNT" 2>/dev/null || umount -l "$MNT"; }
	rm -rf "$W"
}
trap cleanup EXIT
trap 'echo "real.sh: interrupted"; exit 1' INT TERM

have() { command -v "$1" >/dev/null; }
for t in mke2fs e2fsck; do have $t || { echo "real.sh: $t missing"; exit 1; }; done

# Inputs made once: the tarball of SRC and a git repository to clone.
TARBALL=$W/src.tar
tar -C "$(dirname "$SRC")" -cf "$TARBALL" "$(basename "$SRC")" 2>/dev/null
GITSRC=$W/repo.git
if have git; then
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

mount_target() {
	case $1 in
	uext4-*)
		"$UEXT4" mount -o "loop=${1#uext4-}" "$IMG" "$MNT" 2>"$W/mount.err" || { cat "$W/mount.err"; return 1; }
		SERVER_PID=$(pgrep -n -f "$UEXT4 mount .*$IMG $MNT") ;;
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
	*) fusermount3 -u "$MNT" 2>/dev/null || umount -l "$MNT" ;;
	esac
	if [ -n "$SERVER_PID" ]; then
		for ((i = 0; i < 24000; i++)); do
			kill -0 "$SERVER_PID" 2>/dev/null || break
			sleep 0.005 # polling for the server to exit, 120 s deadline
		done
		SERVER_PID=
	fi
	if [ "$1" = fuse2fs ]; then
		for ((i = 0; i < 1200; i++)); do
			pgrep -f "fuse2fs.* $IMG $MNT" >/dev/null || break
			sleep 0.1 # polling for the daemon to exit, 120 s deadline
		done
	fi
}

now() { date +%s.%N; }
elapsed() { echo "$(now) $1" | awk '{printf "%.3f", $1 - $2}'; }

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
		t0=$(now); rsync -a "$SRC/" "$MNT/inc/" || { echo -; return; }; sync -f "$MNT/inc"; elapsed "$t0" ;;
	tar-x)
		t0=$(now); tar -C "$MNT" -xf "$TARBALL" || { echo -; return; }; sync -f "$MNT"; elapsed "$t0" ;;
	tar-c)
		tar -C "$MNT" -xf "$TARBALL" && sync -f "$MNT" || { echo -; return; }
		remount_cold || { echo -; return; }
		t0=$(now); tar -C "$MNT" -cf - . | cat >/dev/null; elapsed "$t0" ;;
	rm-rf)
		tar -C "$MNT" -xf "$TARBALL" && sync -f "$MNT" || { echo -; return; }
		t0=$(now); rm -rf "${MNT:?}/$(basename "$SRC")" || { echo -; return; }; sync -f "$MNT"; elapsed "$t0" ;;
	git)
		[ -n "$GITSRC" ] || { echo -; return; }
		t0=$(now)
		git clone -q "$GITSRC" "$MNT/repo" && git -C "$MNT/repo" status --porcelain >/dev/null ||
			{ echo -; return; }
		sync -f "$MNT"; elapsed "$t0" ;;
	sqlite)
		have sqlite3 || { echo -; return; }
		t0=$(now)
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
echo "real.sh: $(git -C "$TOP" rev-parse --short HEAD 2>/dev/null), $(nproc) CPUs, $(uname -r), images in tmpfs, median of $RUNS"
for wl in $WORKLOADS; do
	for t in $(target_list); do
		vals=()
		for ((r = 0; r < RUNS; r++)); do
			fresh_image
			drop_caches
			CUR_TARGET=$t
			mount_target "$t" || { echo "real.sh: mount $t failed"; vals+=(-); break; }
			# Not in $(...): a remount inside must update SERVER_PID here.
			run_workload "$wl" >"$W/val"
			v=$(cat "$W/val")
			umount_target "$t"
			vals+=("$v")
			if [ "${t%%-*}" = uext4 ] && [ $r = $((RUNS - 1)) ]; then
				e2fsck -fn "$IMG" >"$W/fsck.log" 2>&1 ||
					{ echo "real.sh: e2fsck found problems after $wl on $t:"; tail -5 "$W/fsck.log"; }
			fi
		done
		m=$(printf '%s\n' "${vals[@]}" | grep -v '^-$' | median)
		echo "$wl $t $m" >>"$RES"
		printf '%-9s %-12s %10s   (runs: %s)\n' "$wl" "$t" "$m" "${vals[*]}"
	done
done

# The table: one row per workload, one column per target.
echo
targets=$(target_list | tr '\n' ' ')
printf '| workload | unit |'; for t in $targets; do printf ' %s |' "$t"; done; echo
printf '|---|---|'; for t in $targets; do printf -- '---|'; done; echo
for wl in $WORKLOADS; do
	unit=s; case $wl in dbench-*) unit=MB/s ;; esac
	printf '| %s | %s |' "$wl" "$unit"
	for t in $targets; do printf ' %s |' "$(awk -v w="$wl" -v t="$t" '$1==w && $2==t {print $3}' "$RES")"; done
	echo
done

# Ratios against the issue's targets, for the best uext4 loop.
val() { awk -v w="$1" -v t="$2" '$1==w && $2==t {print $3}' "$RES"; }
best_uext4() { # best_uext4 WORKLOAD higher|lower
	awk -v w="$1" -v dir="$2" '$1==w && $2 ~ /^uext4-/ && $3 != "-" {
		if (best == "" || (dir == "higher" ? $3 > best : $3 < best)) { best = $3; who = $2 } }
		END { print best, who }' "$RES"
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "" || b == 0) print "-"; else printf "%.2f", a / b }'; }
echo
echo "Targets (best uext4 loop):"
for n in 2 8; do
	read -r u who < <(best_uext4 "dbench-$n" higher)
	[ -n "${u:-}" ] || continue
	echo "  dbench-$n: $who $u MB/s = $(ratio "$u" "$(val "dbench-$n" kernel)")x kernel (target at 8: >= 0.5)," \
		"$(ratio "$u" "$(val "dbench-$n" fuse2fs)")x fuse2fs (target: >= $([ $n = 8 ] && echo 10 || echo 5))"
done
for wl in rsync tar-x tar-c rm-rf git sqlite; do
	read -r u who < <(best_uext4 "$wl" lower)
	[ -n "${u:-}" ] || continue
	echo "  $wl: $who $u s = $(ratio "$u" "$(val "$wl" kernel)")x the kernel's time$(case $wl in git | sqlite) ;; *) echo " (target: <= 2)" ;; esac)"
done
cp "$RES" "$OUT/real-$(date +%Y%m%d-%H%M%S).txt"
