#!/bin/bash
# bigalloc.sh - file systems with clusters (-O bigalloc -C N): uext4 reads
# them as the kernel does, and `uext4 mkfs -O bigalloc -C N` makes mke2fs's
# layout.  Writing them is not done yet: it is refused (EROFS, the image
# untouched).
#
# For 4 KiB blocks with 16 KiB and 64 KiB clusters and 1 KiB blocks with
# 4 KiB clusters:
#   1. mkfs: `uext4 mkfs` and mke2fs with the same options, UUID, hash seed
#      and time: e2fsck -fn clean, `dumpe2fs` (header and every group:
#      bitmaps, free cluster counts, free ranges) identical.
#   2. on both images the kernel (loop mount, read-write) runs a workload
#      made for clusters: small files, appends across cluster boundaries,
#      sparse writes inside clusters, truncates to mid-cluster, punched
#      holes, unlinks, a directory of 400 entries, xattrs, symlinks,
#      a large file; unmount; e2fsck -fn clean.
#   3. uext4 reads both as the kernel does: `walk lib` (libuext4) equals
#      `walk posix` on a read-only kernel mount, every field (blocks, data,
#      xattrs); the FUSE mount (read-only) shows the same tree and the same
#      sha256 of every file, and statfs counts (in blocks) as the kernel's.
#      `uext4 info` shows free blocks, cluster size and clusters per group
#      as dumpe2fs -h.
#   4. writes are refused: `uext4 put`, `uext4 mkdir` and a read-write
#      FUSE mount fail naming bigalloc, and the image is byte-for-byte
#      unchanged; `uext4 mkfs -O bigalloc -d` fails and removes its image.
# run-in: release asan
set -uo pipefail
. "$(dirname "$0")/lib.sh"
setup_traps
[ "$(id -u)" = 0 ] || skip "needs root (kernel loop mounts)"
can_loop || skip "no loop devices (or UEXT4_NO_LOOP)"
need mke2fs:e2fsprogs dumpe2fs:e2fsprogs setfattr:attr fallocate:util-linux
need_built "$UEXT4" "$WALK"
export TZ=UTC LC_ALL=C
scratch_on_tmpfs
test_dir
FAILS=0
test_seed bigalloc.sh
RANDOM=$SEED
UUID=6f1d0c2e-5b4a-4e39-8d27-1c0b9a887766
HSEED=0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d
TIME=1700000000
FUSE=1
[ -e /dev/fuse ] && command -v fusermount3 > /dev/null || FUSE=0

# workload DIR: the kernel's writes, chosen to cross and split clusters.
workload() {
	local d=$1 i
	mkdir "$d/many" "$d/x"
	for ((i = 0; i < 400; i++)); do echo "entry $i" > "$d/many/name-$i-$RANDOM"; done
	for ((i = 0; i < 400; i += 3)); do rm -f "$d"/many/name-$i-*; done
	head -c 3000000 /dev/urandom > "$d/big"
	for ((i = 0; i < 20; i++)); do head -c $((RANDOM % 9000 + 1)) /dev/urandom >> "$d/append"; done
	# sparse writes inside clusters: 1 KiB pieces at odd offsets
	for off in 5 37 38 200 1023 4097; do
		dd if=/dev/urandom of="$d/sparse" bs=1k seek=$off count=1 conv=notrunc status=none
	done
	head -c 200000 /dev/urandom > "$d/trunc"
	truncate -s 70001 "$d/trunc"        # mid-cluster for every cluster size here
	head -c 300000 /dev/urandom > "$d/punch"
	fallocate -p -o 5120 -l 70000 "$d/punch"
	fallocate -p -o 131072 -l 65536 "$d/punch"
	echo small > "$d/x/small"
	ln -s ../big "$d/x/link"
	ln -s "$(printf 'l%.0s' {1..200})" "$d/x/longlink"
	setfattr -n user.one -v "$(head -c 100 /dev/zero | tr '\0' a)" "$d/big"
	setfattr -n user.two -v "$(head -c 900 /dev/zero | tr '\0' b)" "$d/x/small"
	for ((i = 0; i < 30; i++)); do head -c $((RANDOM % 20000)) /dev/urandom > "$d/x/f$i"; done
	rm -f "$d/x/f3" "$d/x/f7" "$d/x/f11"
}

# sums DIR: the sha256 of every regular file, by path.
sums() { (cd "$1" && find . -type f -print0 | sort -z | xargs -0 sha256sum); }

# read_check IMG LABEL: uext4 reads IMG as the kernel does (lib, FUSE, statfs).
read_check() {
	local img=$1 label=$2 k=$T/k u=$T/u
	mkdir -p "$k" "$u"
	kmount "$img" "$k" || { bad "$label: kernel read-only mount"; return; }
	"$WALK" posix "$k" > "$T/kernel.dump"
	sums "$k" > "$T/kernel.sums"
	stat -f -c '%S %b %f %c %d' "$k" > "$T/kernel.statfs"
	umount "$k"
	"$WALK" lib "$img" > "$T/lib.dump" 2> "$T/lib.err" || bad "$label: walk lib: $(head -3 "$T/lib.err")"
	compare_dumps "$label: libuext4 vs kernel" "$T/kernel.dump" "$T/lib.dump"
	[ $FUSE = 1 ] || return 0
	fuse_mount "$img" "$u" || { bad "$label: FUSE mount"; return; }
	sums "$u" > "$T/fuse.sums"
	stat -f -c '%S %b %f %c %d' "$u" > "$T/fuse.statfs"
	fuse_umount "$u"
	if cmp -s "$T/kernel.sums" "$T/fuse.sums"; then
		echo "ok: $label: FUSE sha256 of $(wc -l < "$T/kernel.sums") files as the kernel's"
	else
		bad "$label: FUSE file contents differ from the kernel's"
		diff "$T/kernel.sums" "$T/fuse.sums" | head -5
	fi
	if cmp -s "$T/kernel.statfs" "$T/fuse.statfs"; then
		echo "ok: $label: statfs $(cat "$T/fuse.statfs")"
	else
		bad "$label: statfs (bsize blocks free files ffree) kernel $(cat "$T/kernel.statfs"), FUSE $(cat "$T/fuse.statfs")"
	fi
}

# info_check IMG LABEL: `uext4 info` counts as dumpe2fs -h (free blocks in
# blocks though the groups count clusters).
info_check() {
	local f=Free\ blocks:\|Cluster\ size:\|Clusters\ per\ group:
	cli_run info "$1"
	if [ "$(grep -E "^($f)" "$T/out")" = "$(dumpe2fs -h "$1" 2> /dev/null | grep -E "^($f)")" ]; then
		echo "ok: $2: uext4 info: $(grep -E "^($f)" "$T/out" | tr -s ' ' | paste -sd' ')"
	else
		bad "$2: uext4 info differs from dumpe2fs -h:"
		diff <(grep -E "^($f)" "$T/out") <(dumpe2fs -h "$1" 2> /dev/null | grep -E "^($f)")
	fi
}

# refused_writes IMG LABEL: every write is refused, naming bigalloc, and the
# image is unchanged.
refused_writes() {
	local img=$1 label=$2 sum0 m=$T/rw
	sum0=$(md5sum < "$img")
	echo data > "$T/data"
	cli_run put "$img" "$T/data" /newfile
	if [ $RC = 0 ] || ! grep -q bigalloc "$T/err"; then bad "$label: put not refused by name (rc $RC): $ERR"; fi
	cli_run mkdir "$img" /newdir
	if [ $RC = 0 ] || ! grep -q bigalloc "$T/err"; then bad "$label: mkdir not refused by name (rc $RC): $ERR"; fi
	if [ $FUSE = 1 ]; then
		mkdir -p "$m"
		if timeout -k 5 30 "$UEXT4" mount "$img" "$m" > "$T/mnt.out" 2>&1 < /dev/null; then
			MOUNTS+=("$m")
			bad "$label: a read-write FUSE mount was accepted"
			fusermount3 -u "$m"
		elif ! grep -q bigalloc "$T/mnt.out"; then
			bad "$label: read-write mount refused without naming bigalloc: $(head -3 "$T/mnt.out")"
		fi
	fi
	[ "$(md5sum < "$img")" = "$sum0" ] || bad "$label: a refused write changed the image"
	echo "ok: $label: writes refused ($(head -c 120 "$T/err"))"
}

for cfg in "4096 16384" "4096 65536" "1024 4096"; do
	read -r bs cs <<< "$cfg"
	CASE="b$bs-c$cs"
	note "$CASE"
	opts=(-b "$bs" -O bigalloc -C "$cs")
	ours=$T/ours.img theirs=$T/theirs.img
	rm -f "$ours" "$theirs"
	SOURCE_DATE_EPOCH=$TIME "$UEXT4" mkfs -q -U $UUID -E hash_seed=$HSEED "${opts[@]}" "$ours" 256M ||
		{ bad "uext4 mkfs ${opts[*]} failed"; continue; }
	truncate -s 256M "$theirs"
	E2FSPROGS_FAKE_TIME=$TIME mke2fs -q -F -t ext4 -U $UUID -E hash_seed=$HSEED \
		-O orphan_file,metadata_csum_seed "${opts[@]}" "$theirs" > /dev/null 2>&1 ||
		{ bad "mke2fs ${opts[*]} failed (test bug?)"; continue; }
	fsck_clean "$ours" || bad "uext4 mkfs ${opts[*]}: e2fsck"
	d=$(diff <(dumpe2fs "$ours" 2>&1) <(dumpe2fs "$theirs" 2>&1) | grep '^[<>]' |
		grep -v -e '^. Lifetime writes:' -e '^. Checksum:  ')
	if [ -n "$d" ]; then
		bad "uext4 mkfs ${opts[*]}: dumpe2fs differs from mke2fs's:"
		echo "$d" | head -20
	else
		echo "ok: uext4 mkfs ${opts[*]}: dumpe2fs (header and $(dumpe2fs "$ours" 2> /dev/null | grep -c '^Group') groups) as mke2fs's"
	fi
	for img in "$ours" "$theirs"; do
		who=$([ "$img" = "$ours" ] && echo "uext4 mkfs" || echo "mke2fs")
		[ "$img" = "$ours" ] && read_check "$img" "$CASE $who, empty"
		mkdir -p "$T/w"
		kmount "$img" "$T/w" rw || { bad "$CASE $who: kernel read-write mount"; continue; }
		workload "$T/w"
		umount "$T/w"
		fsck_clean "$img" || bad "$CASE $who: e2fsck after the kernel's workload"
		read_check "$img" "$CASE $who, after the kernel's workload"
		info_check "$img" "$CASE $who"
		refused_writes "$img" "$CASE $who"
	done
done

CASE=mkfs-d
mkdir -p "$T/src"
echo hello > "$T/src/a"
cli_run mkfs -q -O bigalloc -d "$T/src" "$T/filled.img" 64M
if [ $RC = 0 ] || ! grep -q bigalloc "$T/err"; then bad "mkfs -O bigalloc -d not refused by name (rc $RC): $ERR"; fi
[ -e "$T/filled.img" ] && bad "mkfs -d left the image it could not fill"
cli_run mkfs -q -O ^extent,^64bit,bigalloc "$T/noext.img" 64M
if [ $RC = 0 ] || ! grep -q extent "$T/err"; then bad "mkfs -O bigalloc,^extent not refused (rc $RC): $ERR"; fi
cli_run mkfs -q -O bigalloc -C 3000 "$T/c.img" 64M
if [ $RC = 0 ] || ! grep -q -- "-C 3000" "$T/err"; then bad "mkfs -C 3000 not refused (rc $RC): $ERR"; fi
cli_run mkfs -q -C 16384 "$T/c.img" 64M
if [ $RC = 0 ] || ! grep -q bigalloc "$T/err"; then bad "mkfs -C without bigalloc not refused (rc $RC): $ERR"; fi

san_check
[ $FAILS -eq 0 ] || fail "$FAILS checks failed"
echo "bigalloc.sh: all checks passed"
