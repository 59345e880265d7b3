#!/bin/bash
# casefold.sh - what casefolded directories cost (chattr +F on a
# -O casefold file system) against normal ones, with bench/fxmark:
#   MRPL    stat a path five directories deep (names as made)
#   MRPL-U  the same path in upper case (fxmark -U): every name under
#           another case than the one it was made in (casefolded only)
#   MWCL    create files, each thread in its own directory
#   MWCM    create files, all threads in one shared directory
#   MWUM    unlink files of the shared directory
# on
#   lib     libuext4 directly, normal and casefolded (fxmark -F)
#   fuse    uext4 mount, normal and casefolded
#   kernel  the kernel's ext4 on a loop device (root only), normal
#           directories only: this kernel has no CONFIG_UNICODE, so it
#           cannot mount a casefold file system
# for THREADS (default "1 2").  Images in /dev/shm (mke2fs -O casefold,
# 4 KiB blocks; the kernel's image without casefold), one fresh image per
# run; runs interleaved, RUNS (default 5) each; the values are medians.
#
#   bench/casefold.sh [--out FILE.md]   print the section (or write it to FILE.md)
#   bench/casefold.sh --update FILE.md  replace the section in FILE.md (from
#                                       its heading to <!-- casefold:end -->),
#                                       or add it before "## Checks and notes"
#   bench/report.sh --only casefold     the same on BENCHMARKS.md
# Environment: RUNS, THREADS, SECS (per workload, default 0.5), SYSTEMS
# (default "lib fuse kernel"), BENCH_BUILD (default build; a path relative
# to the top or absolute).
set -u
cd "$(dirname "$0")/.." || exit 1
TOP=$PWD
OUTMD= UPDATE=
case ${1:-} in
--out) OUTMD=$2 ;;
--update) UPDATE=$2 ;;
esac
RUNS=${RUNS:-5}
THREADS=${THREADS:-1 2}
SECS=${SECS:-0.5}
SYSTEMS=${SYSTEMS:-lib fuse kernel}
B=${BENCH_BUILD:-build}
case $B in /*) ;; *) B=$TOP/$B ;; esac
FX=$B/bench/fxmark UEXT4=$B/uext4
[ -x "$FX" ] && [ -x "$UEXT4" ] || { echo "casefold.sh: build first: make" >&2; exit 1; }
SHM=/dev/shm
[ -w $SHM ] || SHM=${TMPDIR:-/tmp}
W=$(mktemp -d $SHM/uext4-cfbench.XXXXXX)
MNT=$W/mnt IMG=$W/img RAW=$W/raw
mkdir -p "$MNT"
: >"$RAW"
cleanup() {
	if mountpoint -q "$MNT"; then fusermount3 -u "$MNT" 2>/dev/null || umount "$MNT"; fi
	rm -rf "$W"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
WORKLOADS="MWCL MWCM MWUM MRPL"

# fresh IMAGE FEATURES
fresh() {
	rm -f "$IMG"
	truncate -s 1G "$IMG"
	mke2fs -q -F -t ext4 -b 4096 -N 400000 ${1:+-O "$1"} "$IMG" >/dev/null
}
# record SYSTEM KIND: fxmark's RESULT lines from stdin into RAW (as
# WORKLOAD SYSTEM/KIND THREADS OPS_PER_SEC); -U runs are MRPL-U.
record() {
	awk -v s="$1/$2" -v u="${3:-}" '/^RESULT/ {
		for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
		if (v["errors"] == 0) print v["workload"] u, s, v["threads"], v["ops_per_sec"]
	}' >>"$RAW"
}
# point SYSTEM KIND THREADS: one fresh image, one fxmark run of every workload
# (and for casefold MRPL -U in a second process on the same image).
point() {
	local sys=$1 kind=$2 n=$3 flag= cap=$((300000 / 8 / $3))
	[ "$kind" = casefold ] && flag=-F
	fresh "$([ "$sys" = kernel ] || echo casefold)"
	case $sys in
	lib)
		"$FX" $flag -d "$SECS" -n $cap lib "$IMG" "$n" $WORKLOADS 2>>"$W/log" | record lib "$kind"
		[ "$kind" = casefold ] && fresh casefold &&
			"$FX" -F -U -d "$SECS" -n $cap lib "$IMG" "$n" MRPL 2>>"$W/log" | record lib "$kind" -U ;;
	fuse | kernel)
		if [ "$sys" = fuse ]; then "$UEXT4" mount "$IMG" "$MNT" 2>>"$W/log" || return
		else mount -t ext4 -o loop "$IMG" "$MNT" || return; fi
		"$FX" $flag -d "$SECS" -n $cap posix "$MNT" "$n" $WORKLOADS 2>>"$W/log" | record "$sys" "$kind"
		if [ "$kind" = casefold ]; then
			rm -rf "$MNT/MRPL"
			"$FX" -F -U -d "$SECS" -n $cap posix "$MNT" "$n" MRPL 2>>"$W/log" | record "$sys" "$kind" -U
		fi
		if [ "$sys" = fuse ]; then "$UEXT4" umount "$MNT" 2>>"$W/log"; else umount "$MNT"; fi ;;
	esac
	e2fsck -fn "$IMG" >"$W/fsck" 2>&1 || echo "casefold.sh: $sys $kind $n threads: e2fsck -fn not clean: $(sed -n 2,4p "$W/fsck")" >&2
}

COLS=
for s in $SYSTEMS; do
	case $s in
	lib) COLS="$COLS lib/normal lib/casefold" ;;
	fuse) [ -c /dev/fuse ] && COLS="$COLS fuse/normal fuse/casefold" ;;
	kernel) [ "$(id -u)" = 0 ] && losetup -f >/dev/null 2>&1 && COLS="$COLS kernel/normal" ;;
	esac
done
for ((r = 1; r <= RUNS; r++)); do
	for n in $THREADS; do
		for c in $COLS; do point "${c%/*}" "${c#*/}" "$n"; done
	done
	echo "casefold.sh: run $r/$RUNS done" >&2
done

# median WORKLOAD COLUMN THREADS
median() {
	awk -v w="$1" -v s="$2" -v n="$3" '$1 == w && $2 == s && $3 == n { print $4 }' "$RAW" |
		sort -g | awk '{ v[NR] = $1 } END { if (!NR) print "-"; else if (NR % 2) printf "%.0f\n", v[(NR + 1) / 2]; else printf "%.0f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
section() {
	local w n c hdr sep row
	echo "## Casefolded directories"
	echo
	echo "bench/casefold.sh: bench/fxmark in directories with +F (chattr +F on the workload's"
	echo "directory of a \`mke2fs -O casefold\` image, inherited below it) against normal ones, ops/s,"
	echo "median of $RUNS runs of $SECS s, each on a fresh image in tmpfs. MRPL-U stats the"
	echo "same path in upper case (every name under another case than the one it was made in)."
	echo "kernel: normal directories only (this kernel has no CONFIG_UNICODE: it cannot mount a"
	echo "casefold file system). Commit measured: $(git -C "$TOP" rev-parse HEAD 2>/dev/null)."
	echo
	hdr="| workload | threads |" sep="|---|---:|"
	for c in $COLS; do hdr="$hdr $c |"; sep="$sep---:|"; done
	echo "$hdr"
	echo "$sep"
	for w in $WORKLOADS MRPL-U; do
		for n in $THREADS; do
			row="| $w | $n |"
			for c in $COLS; do row="$row $(median "$w" "$c" "$n") |"; done
			echo "$row"
		done
	done
	echo
	echo "<!-- casefold:end -->"
}
if [ -n "$UPDATE" ]; then
	section >"$W/section.md"
	touch "$UPDATE"
	awk -v f="$W/section.md" '
		function put() { while ((getline l < f) > 0) print l; done = 1 }
		/^## Casefolded directories$/ { skip = 1; put(); next }
		skip && /^<!-- casefold:end -->$/ { skip = 0; next }
		skip { next }
		!done && /^## Checks and notes/ { put(); print "" }
		{ print }
		END { if (!done) { print ""; put() } }' "$UPDATE" >"$W/new.md" && cat "$W/new.md" >"$UPDATE"
	echo "casefold.sh: section updated in $UPDATE" >&2
elif [ -n "$OUTMD" ]; then
	section >"$OUTMD"
else
	section
fi
