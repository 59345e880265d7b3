#!/bin/bash
# bench/mkfs.sh - image builders side by side, in one run, on the same
# sources, images on tmpfs:
#   sources:  gen (bench/gentree.py: ~60,000 files, ~1 GiB, seeded),
#             usr-share (/usr/share), usr-share-tar (a tarball of it)
#   methods:  uext4-j1   uext4 mkfs -j 1 -d SOURCE IMAGE SIZE
#             uext4-jN   uext4 mkfs -d (all CPUs)
#             mke2fs-d   mke2fs -t ext4 -d SOURCE IMAGE SIZE
#             kernel     (root) mke2fs, then mount -o loop, cp -a (tar x for
#                        the tarball), umount: the mount, copy and unmount
#                        are timed, not the mke2fs
# Medians of RUNS runs (default 3; MKE2FS_RUNS for mke2fs -d, which is
# slow, default RUNS), wall time and peak RSS (GNU time's %M: the largest
# resident set of the command's processes).  Ratios against mke2fs -d and
# against the kernel.  Writes bench/results/mkfs-DATE.md.
#
# Environment: BUILD (build dir, default build), RUNS, MKE2FS_RUNS, SOURCES
# (subset of "gen usr-share usr-share-tar"), METHODS, WORKDIR (a tmpfs,
# default /dev/shm), GEN_FILES, GEN_BYTES.
set -uo pipefail
TOP=$(cd "$(dirname "$0")/.." && pwd)
B=${BUILD:-$TOP/build}
case "$B" in /*) ;; *) B=$TOP/$B ;; esac
UEXT4=$B/uext4
RUNS=${RUNS:-3}
MKE2FS_RUNS=${MKE2FS_RUNS:-$RUNS}
SOURCES=${SOURCES:-gen usr-share usr-share-tar}
METHODS=${METHODS:-uext4-j1 uext4-jN mke2fs-d kernel}
WORKDIR=${WORKDIR:-/dev/shm}
TIME=/usr/bin/time
[ -x "$UEXT4" ] || { echo "build first: make (need $UEXT4)"; exit 1; }
[ -x "$TIME" ] || { echo "needs GNU time (apt-get install time)"; exit 1; }
W=$(mktemp -d "$WORKDIR/uext4-mkfs-bench.XXXXXX")
MNT=$W/mnt
mkdir -p "$MNT" "$TOP/bench/results"
cleanup() {
	mountpoint -q "$MNT" 2> /dev/null && umount "$MNT"
	rm -rf "$W"
}
trap cleanup EXIT
OUT=$TOP/bench/results/mkfs-$(date +%Y%m%d-%H%M%S).md
NOTES=()
CPUS=$(nproc)

# ---------------------------------------------------------------- sources
src_path() {
	case "$1" in
	gen) echo "$W/gen" ;;
	usr-share) echo /usr/share ;;
	usr-share-tar) echo "$W/usr-share.tar" ;;
	esac
}
prepare_sources() {
	local s
	for s in $SOURCES; do
		case "$s" in
		gen) python3 "$TOP/bench/gentree.py" "$W/gen" "${GEN_FILES:-60000}" "${GEN_BYTES:-1073741824}" ;;
		usr-share-tar) tar cf "$W/usr-share.tar" -C /usr share 2> /dev/null ;;
		esac
	done
}
# Image size: twice the data, at least 1 GiB, in GiB.
img_size() {
	local p bytes
	p=$(src_path "$1")
	if [ -f "$p" ]; then bytes=$(stat -c %s "$p"); else bytes=$(du -sb "$p" | cut -f1); fi
	echo "$(((bytes * 2 / 1073741824) + 1))G"
}

# ---------------------------------------------------------------- methods
# probe_mke2fs_tar: can this mke2fs read a tarball (1.47.1 and later)?
probe_mke2fs_tar() {
	mkdir -p "$W/probe" && echo x > "$W/probe/f"
	tar cf "$W/probe.tar" -C "$W/probe" f
	if mke2fs -q -F -t ext4 -d "$W/probe.tar" "$W/probe.img" 16M > /dev/null 2>&1; then
		MKE2FS_TAR=yes
	else
		MKE2FS_TAR=no
	fi
	rm -rf "$W/probe" "$W/probe.img" "$W/probe.tar"
}

# cmd_for METHOD SOURCE IMAGE SIZE: the shell command to time, or "" to skip.
cmd_for() {
	local m=$1 s=$2 img=$3 size=$4 src jopt
	src=$(src_path "$s")
	case "$m" in
	uext4-j1 | uext4-jN)
		# uext4 mkfs without -j uses every CPU.
		jopt="-j 1"
		[ "$m" = uext4-jN ] && jopt=
		echo "'$UEXT4' mkfs -q -F $jopt -d '$src' '$img' $size" ;;
	mke2fs-d)
		[ "$s" = usr-share-tar ] && [ "$MKE2FS_TAR" = no ] && return 0
		echo "mke2fs -q -F -t ext4 -d '$src' '$img' $size" ;;
	kernel)
		[ "$(id -u)" = 0 ] || return 0
		if [ "$s" = usr-share-tar ]; then
			echo "mount -o loop '$img' '$MNT' && tar xf '$src' -C '$MNT' && umount '$MNT'"
		else
			echo "mount -o loop '$img' '$MNT' && cp -a '$src/.' '$MNT/' && umount '$MNT'"
		fi ;;
	esac
}

# run_once METHOD SOURCE RUN: prints "SECS RSS_KB", or "" when it failed.
run_once() {
	local m=$1 s=$2 run=$3 img=$W/img size cmd
	size=$(img_size "$s")
	cmd=$(cmd_for "$m" "$s" "$img" "$size")
	[ -n "$cmd" ] || return 2
	rm -f "$img"
	if [ "$m" = kernel ]; then
		mke2fs -q -F -t ext4 "$img" "$size" > /dev/null 2>&1 || return 1
	fi
	if ! "$TIME" -f "%e %M" -o "$W/time" sh -c "$cmd" > "$W/cmd.out" 2>&1; then
		echo "  $m $s run $run failed: $(tail -3 "$W/cmd.out")" >&2
		mountpoint -q "$MNT" && umount "$MNT"
		return 1
	fi
	# The first run of each method is checked: a fast wrong image is no result.
	if [ "$run" = 1 ] && ! e2fsck -fn "$img" > "$W/fsck.out" 2>&1; then
		echo "  $m $s: e2fsck -fn is not clean:" >&2
		tail -5 "$W/fsck.out" >&2
		return 1
	fi
	tail -1 "$W/time"
}

median() { sort -g | awk '{v[NR] = $1} END {if (NR) print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2)}'; }

# ---------------------------------------------------------------- run
echo "bench/mkfs.sh: sources: $SOURCES; methods: $METHODS; runs: $RUNS (mke2fs -d: $MKE2FS_RUNS); work dir $W"
prepare_sources
probe_mke2fs_tar
declare -A MED RSS SKIP
for s in $SOURCES; do
	for m in $METHODS; do
		n=$RUNS
		[ "$m" = mke2fs-d ] && n=$MKE2FS_RUNS
		: > "$W/secs"
		: > "$W/rss"
		for ((r = 1; r <= n; r++)); do
			res=$(run_once "$m" "$s" "$r")
			rc=$?
			if [ "$rc" = 2 ]; then
				SKIP[$s,$m]="skipped"
				case "$m" in
				kernel) SKIP[$s,$m]="skipped (not root)" ;;
				mke2fs-d) SKIP[$s,$m]="skipped: $(mke2fs -V 2>&1 | head -1 | cut -d' ' -f1-2) reads no tarballs" ;;
				uext4*) SKIP[$s,$m]="skipped: uext4 mkfs -d of a tarball is not built (ENOSYS)" ;;
				esac
				break
			fi
			[ -n "$res" ] || { SKIP[$s,$m]="failed (see the output above)"; break; }
			echo "$res" | cut -d' ' -f1 >> "$W/secs"
			echo "$res" | cut -d' ' -f2 >> "$W/rss"
			echo "  $s $m run $r: $res"
		done
		if [ -z "${SKIP[$s,$m]:-}" ]; then
			MED[$s,$m]=$(median < "$W/secs")
			RSS[$s,$m]=$(sort -n "$W/rss" | tail -1)
			echo "$s $m: median ${MED[$s,$m]} s over $n runs, peak RSS $((RSS[$s,$m] / 1024)) MiB"
		else
			echo "$s $m: ${SKIP[$s,$m]}"
		fi
	done
done

# ---------------------------------------------------------------- report
ratio() { # ratio A B: A/B, or -
	[ -n "$1" ] && [ -n "$2" ] && awk -v a="$1" -v b="$2" 'BEGIN {if (a > 0) printf "%.1fx", b / a; else print "-"}' || echo "-"
}
{
	echo "# bench/mkfs.sh, $(date -u '+%Y-%m-%d %H:%M UTC')"
	echo
	echo "$(uname -sr), $CPUS CPUs, load before the run: $(cut -d' ' -f1-3 /proc/loadavg);" \
		"images on $(df -T "$WORKDIR" | awk 'NR == 2 {print $2}') ($WORKDIR); medians of $RUNS runs" \
		"(mke2fs -d: $MKE2FS_RUNS); speed-up = the other method's time / this one's."
	echo
	for s in $SOURCES; do
		p=$(src_path "$s")
		if [ -f "$p" ]; then d="$(du -h "$p" | cut -f1) tarball";
		else d="$(find "$p" | wc -l) entries, $(du -sh "$p" | cut -f1)"; fi
		echo "- $s: $p ($d)"
	done
	echo
	echo "| source | method | median s | vs mke2fs -d | vs kernel | peak RSS MiB |"
	echo "|---|---|---|---|---|---|"
	for s in $SOURCES; do
		for m in $METHODS; do
			if [ -n "${SKIP[$s,$m]:-}" ]; then
				echo "| $s | $m | ${SKIP[$s,$m]} | | | |"
				continue
			fi
			echo "| $s | $m | ${MED[$s,$m]} | $(ratio "${MED[$s,$m]}" "${MED[$s,mke2fs-d]:-}") |" \
				"$(ratio "${MED[$s,$m]}" "${MED[$s,kernel]:-}") | $((RSS[$s,$m] / 1024)) |"
		done
	done
	echo
	for n in "${NOTES[@]}"; do echo "- $n"; done
	echo "- uext4 rows include making the file system; the kernel rows exclude its mke2fs (mount, copy, unmount only)."
} > "$OUT"
cat "$OUT"
echo "written: $OUT"
