#!/bin/bash
# fuse_loop.sh - compare FUSE request loops on bench/nullfs.
#
#   bench/fuse_loop.sh [BUILDDIR] [OPS]
#
# For each loop variant, mounts nullfs, runs fuse_loop_bench with 1, 2, 4
# and 8 client threads doing stat / open+close / 4 KiB direct reads, and
# prints ops/s (median of 3 runs).
set -e
B=${1:-build}
OPS=${2:-20000}
MNT=$(mktemp -d /tmp/nullfs.XXXXXX)
trap 'fusermount3 -u "$MNT" 2>/dev/null; rmdir "$MNT"' EXIT

median3() { printf '%s\n' "$@" | sort -n | sed -n 2p; }

# FUSE over io_uring needs enable_uring on (as root, restored at exit);
# without it the uring variant measures its fallback to st.
PARAM=/sys/module/fuse/parameters/enable_uring
OLD_URING=
if [ "$(id -u)" = 0 ] && [ -w "$PARAM" ]; then
	OLD_URING=$(cat "$PARAM")
	echo 1 > "$PARAM"
	trap 'fusermount3 -u "$MNT" 2>/dev/null; rmdir "$MNT"; case $OLD_URING in Y|1) echo 1 ;; *) echo 0 ;; esac > "$PARAM"' EXIT
fi
[ "$(cat "$PARAM" 2>/dev/null)" = Y ] || echo "fuse_loop.sh: FUSE over io_uring is off here: uring measures its fallback (st)"

# VARIANTS="--loop=st|--loop=uring" (|-separated) picks variants.
DEFAULT_VARIANTS="--loop=st|--loop=mt|--loop=mt --idle=1|--loop=mt --clone-fd|\
--loop=mt --clone-fd --idle=16 --threads=16|--loop=pool --threads=2|\
--loop=pool --threads=4|--loop=pool --threads=8|--loop=uring"
IFS='|' read -r -a VARIANT_LIST <<<"${VARIANTS:-$DEFAULT_VARIANTS}"

printf '%-26s %-5s %8s %8s %8s %8s\n' variant op 1thr 2thr 4thr 8thr
for variant in "${VARIANT_LIST[@]}"; do
	# shellcheck disable=SC2086
	"$B/bench/nullfs" $variant "$MNT"	# returns once mounted
	for op in stat open read; do
		line=""
		for t in 1 2 4 8; do
			r1=$("$B/bench/fuse_loop_bench" "$MNT" $t "$OPS" $op)
			r2=$("$B/bench/fuse_loop_bench" "$MNT" $t "$OPS" $op)
			r3=$("$B/bench/fuse_loop_bench" "$MNT" $t "$OPS" $op)
			line="$line $(printf '%8s' "$(median3 "$r1" "$r2" "$r3")")"
		done
		printf '%-26s %-5s%s\n' "$(echo "$variant" | sed 's/--loop=//; s/--//g')" $op "$line"
	done
	fusermount3 -u "$MNT"
done
