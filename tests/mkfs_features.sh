#!/bin/bash
# mkfs_features.sh - uext4 mkfs makes ea_inode, large_dir, stable_inodes,
# fast_commit, sparse_super2, meta_bg and 64 KiB blocks as mke2fs 1.47 does,
# and the library then reads and writes those images.
#
# For each feature (options below), on 1 KiB and 4 KiB blocks (64 KiB for
# -b 65536), with -U, -E hash_seed= and the time fixed:
#   1. `uext4 mkfs` and `mke2fs -t ext4 -O orphan_file,metadata_csum_seed`
#      (uext4's additions to mke2fs's ext4 defaults) with the same options:
#      full `dumpe2fs` output (header, journal superblock and every group:
#      superblock and descriptor copies, bitmaps, tables, free ranges) is
#      equal line for line, except
#        - "Lifetime writes" (s_kbytes_written: what each tool wrote) and
#          the superblock "Checksum" (it covers that count).
#      Nothing else is masked: free counts, descriptor and bitmap checksums
#      are equal.  The blocks of / and /lost+found are byte-identical to
#      mke2fs's (a whole 64 KiB block's rec_len is stored as 65535).
#      e2fsck -fn is clean.
#   2. A CLI workload (mkdir, put of a tree and a 300 KB file, mv, ln,
#      ln -s, rm, rm -r, ls, get compared with cmp) on our image; e2fsck -fn
#      clean after it.
#   3. The kernel (loop mount) mounts our image where it can: it sees the
#      same tree as libuext4 (walk posix = walk lib, every field), writes
#      into it read-write, and e2fsck is clean after.  With 64 KiB blocks
#      the kernel here refuses (block size over the page size); the test
#      asserts that it refuses mke2fs's image the same way (a kernel that
#      learns large blocks turns that check into the comparison above), and
#      debugfs is the oracle: it reads the workload's file and directory.
#   4. fast_commit: the journal has s_maxlen = log + fast-commit blocks and
#      s_num_fc_blks as mke2fs writes them (checked through dumpe2fs in 1);
#      after the kernel mounted it, uext4 still writes and e2fsck is clean.
#   5. Refusals as mke2fs: meta_bg with resize_inode, num_backup_sb=3,
#      -b 3000, an unknown -O name (each exit 2, message naming it).
# Sanitizer builds run fewer cases (no ^flex_bg, ^64bit, ^extent or
# ^metadata_csum variants).
# Before this change every `uext4 mkfs -O FEATURE` here exits 2 ("unknown
# or unsupported feature") and -b 65536 is refused: step 1 fails.
# run-in: release asan-long
# test-timeout: 300
set -uo pipefail
. "$(dirname "$0")/lib.sh"
setup_traps
need mke2fs:e2fsprogs dumpe2fs:e2fsprogs e2fsck:e2fsprogs debugfs:e2fsprogs
need_built "$UEXT4" "$WALK"
export TZ=UTC LC_ALL=C
scratch_on_tmpfs
D=$(mktemp_dir)
T=$D
FAILS=0
UUID=6f1d0c2e-5b4a-4e39-8d27-1c0b9a887766
SEED=0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d
TIME=1700000000
QUICK=0
case "$UEXT4_BUILD" in */asan | */tsan) QUICK=1 ;; esac

# a small source tree for the workload
SRC=$D/src
mkdir -p "$SRC/sub/deeper"
head -c 300000 /dev/urandom > "$SRC/big"
for i in $(seq 1 150); do echo "file $i" > "$SRC/sub/f$i"; done
echo deep > "$SRC/sub/deeper/x"
ln -s big "$SRC/link"

# make_pair SIZE OPTS...: $D/ours (uext4 mkfs) and $D/theirs (mke2fs), the
# same options, identity and time.  "-E X" options are merged into one -E
# after hash_seed= (mke2fs keeps only its last -E).
make_pair() {
	local size=$1 ext="hash_seed=$SEED" o=()
	shift
	while [ $# -gt 0 ]; do
		case "$1" in -E) ext+=",$2"; shift ;; *) o+=("$1") ;; esac
		shift
	done
	rm -f "$D/ours" "$D/theirs"
	SOURCE_DATE_EPOCH=$TIME "$UEXT4" mkfs -q -U "$UUID" -E "$ext" "${o[@]}" \
		"$D/ours" "$size" > "$D/ours.log" 2>&1 || { cat "$D/ours.log"; return 1; }
	truncate -s "$size" "$D/theirs"
	E2FSPROGS_FAKE_TIME=$TIME mke2fs -q -F -t ext4 -U "$UUID" -E "$ext" \
		-O orphan_file,metadata_csum_seed "${o[@]}" "$D/theirs" > "$D/theirs.log" 2>&1 ||
		{ cat "$D/theirs.log"; fail "mke2fs $size ${o[*]} -E $ext failed (test bug?)"; }
}

# dump IMG: full dumpe2fs, minus the documented lines
dump() {
	dumpe2fs "$1" 2>&1 | grep -v -e '^Lifetime writes:' -e '^Checksum:  '
}

# workload IMG: the CLI writes, reads back, removes
workload() {
	local img=$1
	cli_run mkdir "$img" /w /w/d2 /w/d2/d3 || { bad "mkdir: $ERR"; return 1; }
	cli_run put "$img" "$SRC" /w/src || { bad "put tree: $ERR"; return 1; }
	cli_run put "$img" "$SRC/big" /big || { bad "put file: $ERR"; return 1; }
	cli_run mv "$img" /big /w/big2 || { bad "mv: $ERR"; return 1; }
	cli_run ln "$img" /w/big2 /hard || { bad "ln: $ERR"; return 1; }
	cli_run ln -s "$img" /w/big2 /sym || { bad "ln -s: $ERR"; return 1; }
	cli_run rm "$img" /w/src/sub/f7 || { bad "rm: $ERR"; return 1; }
	cli_run rm -r "$img" /w/d2 || { bad "rm -r: $ERR"; return 1; }
	cli_run ls "$img" /w/src/sub || { bad "ls: $ERR"; return 1; }
	grep -q f150 "$T/out" && ! grep -qw f7 "$T/out" || { bad "ls: wrong listing"; return 1; }
	cli_run get "$img" /w/big2 "$D/got" || { bad "get: $ERR"; return 1; }
	cmp -s "$D/got" "$SRC/big" || { bad "get: data differs"; return 1; }
	return 0
}

# kernel_check LABEL IMG: the kernel sees libuext4's tree, then writes
kernel_check() {
	local label=$1 img=$2 mnt=$D/mnt
	can_loop || return 0
	mkdir -p "$mnt"
	kmount "$img" "$mnt" || { bad "$label: kernel mount"; return; }
	"$WALK" posix "$mnt" > "$D/k.dump" || bad "$label: walk posix reported errors"
	kumount "$mnt"
	"$WALK" lib "$img" > "$D/l.dump" 2> "$D/l.err" ||
		{ bad "$label: walk lib reported errors"; head "$D/l.err"; }
	compare_dumps "$label: kernel vs libuext4" "$D/k.dump" "$D/l.dump"
	kmount "$img" "$mnt" rw || { bad "$label: kernel read-write mount"; return; }
	{ cp -a "$SRC" "$mnt/kcopy" && rm -r "$mnt/w/src/sub" && sync; } ||
		bad "$label: kernel writes"
	kumount "$mnt" || bad "$label: umount"
	fsck_clean "$img" || bad "$label: e2fsck after the kernel wrote"
}

# debugfs_check LABEL IMG: where the kernel cannot mount, debugfs reads
# what the workload wrote (a file's bytes, a directory's names)
debugfs_check() {
	local label=$1 img=$2 n
	rm -f "$D/dbg"
	debugfs -R "dump /w/big2 $D/dbg" "$img" > /dev/null 2>&1
	cmp -s "$D/dbg" "$SRC/big" || bad "$label: debugfs reads other bytes in /w/big2"
	n=$(debugfs -R "ls /w/src/sub" "$img" 2> /dev/null | grep -o 'f[0-9]*' | sort -u | wc -l)
	[ "$n" = 149 ] || bad "$label: debugfs lists $n of 149 files in /w/src/sub"
}

# dir_blocks_equal: the blocks of / and /lost+found are byte-identical in
# ours and mke2fs's (entries, rec_len encoding, checksum tails)
dir_blocks_equal() {
	local bs d img blk
	bs=$(dumpe2fs -h "$D/ours" 2> /dev/null | awk '/^Block size:/ {print $3}')
	for d in / /lost+found; do
		for img in ours theirs; do
			for blk in $(debugfs -R "blocks $d" "$D/$img" 2> /dev/null); do
				dd if="$D/$img" bs="$bs" skip="$blk" count=1 status=none
			done > "$D/$img.dir"
		done
		[ -s "$D/ours.dir" ] && cmp -s "$D/ours.dir" "$D/theirs.dir" ||
			{ bad "the blocks of $d differ from mke2fs's"; return 1; }
	done
}

# check LABEL SIZE OPTS...
CASES=0
check() {
	local label=$1 size=$2 bs start=$SECONDS
	shift 2
	CASE=$label
	CASES=$((CASES + 1))
	make_pair "$size" "$@" || { bad "uext4 mkfs $size $* failed"; return; }
	if ! diff <(dump "$D/ours") <(dump "$D/theirs") > "$D/diff"; then
		bad "dumpe2fs differs from mke2fs's:"
		head -20 "$D/diff"
		return
	fi
	fsck_clean "$D/ours" || { bad "e2fsck of the new image"; return; }
	dir_blocks_equal || return
	workload "$D/ours" || return
	fsck_clean "$D/ours" || { bad "e2fsck after the workload"; return; }
	bs=$(dumpe2fs -h "$D/ours" 2> /dev/null | awk '/^Block size:/ {print $3}')
	if [ "$bs" -gt 4096 ]; then
		# this kernel refuses blocks over its page size: ours and mke2fs's alike
		if can_loop; then
			mkdir -p "$D/mnt"
			local a=0 b=0
			kmount "$D/ours" "$D/mnt" 2> /dev/null && { a=1; kumount "$D/mnt"; }
			kmount "$D/theirs" "$D/mnt" 2> /dev/null && { b=1; kumount "$D/mnt"; }
			[ $a = $b ] || bad "the kernel mounts one of ours ($a) and mke2fs's ($b)"
			if [ $a = 1 ]; then
				kernel_check "$label" "$D/ours"
			else
				echo "ok: $label: the kernel refuses $bs-byte blocks, ours and mke2fs's alike"
			fi
		fi
		debugfs_check "$label" "$D/ours"
	else
		kernel_check "$label" "$D/ours"
	fi
	echo "ok: $label ($((SECONDS - start)) s)"
	CASE=
}

note "1-3. each feature against mke2fs, then written by uext4 and the kernel"
for bs in 1024 4096; do
	# the feature bits together: mke2fs ties none of them to anything
	check "ea_inode,large_dir,stable_inodes b$bs" 256M -b $bs -O ea_inode,large_dir,stable_inodes
	check "fast_commit b$bs" 256M -b $bs -O fast_commit
	check "sparse_super2 b$bs" 256M -b $bs -O sparse_super2
	check "meta_bg b$bs" 256M -b $bs -O meta_bg,^resize_inode
done
check "fast_commit -J size=,fast_commit_size= b1024" 256M -b 1024 -O fast_commit \
	-J size=8,fast_commit_size=512
check "sparse_super2 one backup b1024" 256M -b 1024 -O sparse_super2 -E num_backup_sb=1
check "sparse_super2 no backup b4096" 256M -O sparse_super2,^resize_inode -E num_backup_sb=0
# several meta groups on 4 KiB blocks (64 groups each), and meta_bg without
# flex_bg or 64bit
check "meta_bg 3 meta groups" 17G -O meta_bg,^resize_inode
if [ "$QUICK" = 0 ]; then
	check "meta_bg ^flex_bg" 17G -O meta_bg,^resize_inode,^flex_bg
	check "meta_bg ^64bit b1024" 256M -b 1024 -O meta_bg,^resize_inode,^64bit
	check "all together" 17G \
		-O meta_bg,^resize_inode,sparse_super2,fast_commit,ea_inode,large_dir,stable_inodes
fi
check "64k blocks" 1G -b 65536
check "64k blocks fast_commit meta_bg" 1G -b 65536 -O fast_commit,meta_bg,^resize_inode
check "64k blocks 4k inodes" 1G -b 65536 -I 4096
[ "$QUICK" = 1 ] || check "64k blocks ^metadata_csum" 1G -b 65536 -O ^metadata_csum,^metadata_csum_seed
[ "$QUICK" = 0 ] && check "64k blocks ^extent" 1G -b 65536 -O ^extent,^64bit

note "4. fast_commit: the kernel mounted it, uext4 writes again"
if can_loop; then
	CASE="fast_commit after the kernel"
	make_pair 256M -O fast_commit
	mkdir -p "$D/mnt"
	if kmount "$D/ours" "$D/mnt" rw; then
		echo x > "$D/mnt/k" && sync
		kumount "$D/mnt"
		workload "$D/ours" && fsck_clean "$D/ours" || bad "uext4 after the kernel"
		echo "ok: $CASE"
	else
		bad "kernel mount"
	fi
	CASE=
fi

note "5. refusals"
refused() { # refused WHAT OPTS...: exit 2 and a message containing WHAT
	local what=$1
	shift
	rm -f "$D/r"
	cli_run mkfs -q "$@" "$D/r" 64M
	[ "$RC" = 2 ] && grep -q -- "$what" "$T/err" || bad "mkfs $*: exit $RC, wanted 2 naming '$what': $ERR"
	[ ! -e "$D/r" ] || bad "mkfs $*: left $D/r behind"
}
refused "meta_bg" -O meta_bg
refused "num_backup_sb" -O sparse_super2 -E num_backup_sb=3
refused "block size" -b 3000
refused "nosuchfeature" -O nosuchfeature
refused "fast_commit_size" -J fast_commit_size=x

echo "$CASES cases, $FAILS failed checks"
[ "$FAILS" = 0 ] || exit 1
