#!/bin/bash
# cache.sh - small writes through the FUSE mount, one uext4 binary against
# another in the same run (not a test).  For each VARIANT "label=binary[,opts]":
#   dd     dd if=/dev/zero bs=4k count=65536 of=a new file (256 MiB), to close
#   tar    tar x of /usr/include (as a tar file in memory) into the mount
#   umount fusermount3 -u plus the server's exit (its write-back), after tar
# on a fresh 2 GiB image in /dev/shm each run; median of RUNS (default 3),
# the variants taking turns.
# Usage: bench/cache.sh "old=/path/uext4" "new=build/uext4" "nowb=build/uext4,nowriteback"
set -u
RUNS=${RUNS:-3}
SRC=${BENCH_SRC:-/usr/include}
W=$(mktemp -d /dev/shm/uext4-cache.XXXXXX)
MNT=$W/mnt
mkdir -p "$MNT"
trap 'mountpoint -q "$MNT" && fusermount3 -u "$MNT"; rm -rf "$W"' EXIT
tar -C "$SRC" -cf "$W/src.tar" . || exit 1
now() { date +%s.%N; }
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

mount_it() { # BIN OPTS
	local i
	"$1" mount -f ${2:+-o "$2"} "$W/img" "$MNT" > "$W/log" 2>&1 &
	PID=$!
	for ((i = 0; i < 300; i++)); do
		mountpoint -q "$MNT" && return 0
		sleep 0.1
	done
	cat "$W/log"
	return 1
}

one() { # BIN OPTS -> "dd tar umount" seconds
	local t0 t1 t2 t3
	rm -f "$W/img"
	mke2fs -q -F -t ext4 "$W/img" 2G > /dev/null || return 1
	mount_it "$1" "$2" || return 1
	t0=$(now)
	dd if=/dev/zero of="$MNT/dd" bs=4k count=65536 status=none
	t1=$(now)
	tar -C "$MNT" -xf "$W/src.tar"
	t2=$(now)
	fusermount3 -u "$MNT"
	wait "$PID"
	t3=$(now)
	echo "$t0 $t1 $t2 $t3" | awk '{printf "%.3f %.3f %.3f\n", $2-$1, $3-$2, $4-$3}'
}

# Variants take turns within each run, so they share the machine's noise.
for ((r = 0; r < RUNS; r++)); do
	i=0
	for v in "$@"; do
		rest=${v#*=}
		bin=${rest%%,*} opts=
		[ "$bin" != "$rest" ] && opts=${rest#*,}
		one "$bin" "$opts" >> "$W/res.$i" || exit 1
		i=$((i + 1))
	done
done
printf '%-10s %8s %8s %8s   (seconds, median of %d)\n' variant dd tar umount "$RUNS"
i=0
for v in "$@"; do
	f=$W/res.$i
	printf '%-10s %8s %8s %8s\n' "${v%%=*}" "$(cut -d' ' -f1 < "$f" | median)" \
		"$(cut -d' ' -f2 < "$f" | median)" "$(cut -d' ' -f3 < "$f" | median)"
	i=$((i + 1))
done
