#!/bin/bash
# corrupt.sh - bad-input tests: corrupt exactly one on-disk structure of a
# small image per case and check that the CLI (release and, when built, the
# ASan build) and the FUSE mount report it cleanly:
#   - the CLI exits non-zero with a message naming the problem ("corrupt" or
#     "checksum" ...) and, where the case knows it, the inode/block number;
#   - never a crash (exit >= 128, sanitizer report) and never a hang (20 s);
#   - the FUSE mount answers EIO/EUCLEAN for the damaged path and keeps
#     serving the healthy ones; a damaged superblock refuses the mount.
# Wrong CLI arguments get a usage text or a clear message and exit 1 or 2.
#
# Structures are located with debugfs; bytes are written with dd.  Cases
# that test a structure check rather than a checksum either run on an image
# without metadata_csum ("N" base) or change fields through debugfs, which
# recomputes the checksum itself.
#
# Environment: UEXT4 (default build/uext4), UEXT4_ASAN (an ASan build run
# beside it when run by hand: by default build/asan/uext4 when it exists;
# under run.sh each build runs the script on its own binary, the asan build
# only in `make check-long`), CORRUPT_NO_FUSE=1 skips FUSE,
# NO_WRITE_PROBES=1 skips the write probes, SWEEP_SAVE=DIR keeps every
# damaged image (see save_case).
# run-in: release asan-long
set -u
RUN_BY_RUNSH=${UEXT4_BUILD:-}
. "$(dirname "$0")/lib.sh"
cd "$TOP" || exit 1
UEXT4_ASAN=${UEXT4_ASAN:-build/asan/uext4}
case $UEXT4_ASAN in /*) ;; *) UEXT4_ASAN=$TOP/$UEXT4_ASAN ;; esac

need mke2fs debugfs e2fsck dd od timeout
[ -x "$UEXT4" ] || skip "$UEXT4 not built"

BINS=("$UEXT4")
# Under run.sh (UEXT4_BUILD set) the asan mode covers the ASan binary.
if [ -n "$RUN_BY_RUNSH" ]; then UEXT4_ASAN=$UEXT4; fi
if [ -x "$UEXT4_ASAN" ] && [ "$UEXT4_ASAN" != "$UEXT4" ]; then
	BINS+=("$UEXT4_ASAN")
fi

T=$(mktemp -d /tmp/uext4-corrupt.XXXXXX)
MNT=$T/mnt
mkdir -p "$MNT"
# Sanitizer reports from the CLI and from the daemonized FUSE server land in
# files we check after every command.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}log_path=$T/san:detect_leaks=1:abort_on_error=0"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:+$UBSAN_OPTIONS:}log_path=$T/san:print_stacktrace=1"

cleanup() {
	mountpoint -q "$MNT" 2>/dev/null && fusermount3 -u "$MNT" 2>/dev/null
	rm -rf "$T"
	cleanup_mounts
}
trap cleanup EXIT

FUSE=1
if [ -n "${CORRUPT_NO_FUSE:-}" ] || [ ! -e /dev/fuse ] || ! command -v fusermount3 >/dev/null; then
	FUSE=0
	echo "note: FUSE checks skipped (no /dev/fuse, fusermount3 or CORRUPT_NO_FUSE set)"
fi

CHECKS=0
CASES=0
CASE=""
IMG=""
NUMS=""        # numbers of which one must appear in the message
KEYWORDS='corrupt|checksum'
BS=1024

pass() { CHECKS=$((CHECKS + 1)); }

# ---- byte helpers ---------------------------------------------------------

# poke IMG OFFSET HEXBYTES: write raw bytes ("0a0b...") at a byte offset.
poke() {
	local img=$1 off=$2 hex=$3 esc="" i
	for ((i = 0; i < ${#hex}; i += 2)); do esc+="\\x${hex:i:2}"; done
	printf "$esc" | dd of="$img" bs=1 seek="$off" conv=notrunc status=none
}
# le16/le32 as hex byte strings for poke.
hex16() { printf '%02x%02x' $(($1 & 255)) $((($1 >> 8) & 255)); }
hex32() { printf '%s%s' "$(hex16 $(($1 & 65535)))" "$(hex16 $((($1 >> 16) & 65535)))"; }
peek16() { od -A n -t u2 -j "$2" -N 2 "$1" | tr -d ' '; }
peek32() { od -A n -t u4 -j "$2" -N 4 "$1" | tr -d ' '; }

dbg() { debugfs -R "$2" "$1" 2>/dev/null; }
dbgw() { debugfs -w -R "$2" "$1" >/dev/null 2>&1 || bad "debugfs -w '$2' failed"; }
# fix_inode_csum IMG PATH: after a raw edit (-n: debugfs must not verify the
# checksum it is about to recompute).
fix_inode_csum() {
	debugfs -n -w -R "set_inode_field $2 checksum calc" "$1" 2>&1 | grep -q "Checksum set" ||
		bad "debugfs could not recompute the checksum of $2"
}
ino_of() { dbg "$1" "stat $2" | awk '/^Inode:/ {print $2; exit}'; }
bmap() { dbg "$1" "bmap $2 $3"; }
# inode_off IMG PATH: byte offset of the inode in the image.
inode_off() {
	local out blk off
	out=$(dbg "$1" "imap $2")
	blk=$(echo "$out" | awk '/located at block/ {sub(",", "", $4); print $4}')
	off=$(echo "$out" | awk '/located at block/ {print $6}')
	echo $((blk * BS + off))
}
# extent leaf block of a depth-1 file (the level-0 index entry's target).
ext_leaf() { dbg "$1" "ex $2" | awk '$1 ~ /^0\// {print $8; exit}'; }
file_acl() { dbg "$1" "stat $2" | awk '/File ACL:/ {print $3; exit}'; }

# ---- base images ----------------------------------------------------------

BIGNAME=entry_with_a_fairly_long_name_to_fill_blocks
make_tree() {
	local d=$T/tree i
	mkdir -p "$d/dir" "$d/bigdir" "$d/sub/deep"
	echo "hello world" >"$d/hello.txt"
	echo a >"$d/dir/a"; echo b >"$d/dir/b"; echo c >"$d/dir/c"
	for ((i = 1; i <= 3000; i++)); do : >"$d/bigdir/${BIGNAME}_$i"; done
	# frag: 40 one-KiB data blocks separated by holes -> 40 extents, which
	# do not fit in the inode: a depth-1 extent tree.
	: >"$d/frag"
	for ((i = 0; i < 40; i++)); do
		head -c 1024 /dev/zero | tr '\0' "\\$(printf '%03o' $((65 + i % 26)))" |
			dd of="$d/frag" bs=1024 seek=$((2 * i)) conv=notrunc status=none
	done
	truncate -s $((80 * 1024)) "$d/frag"
	ln -s hello.txt "$d/link"
	ln -s "$(head -c 200 /dev/zero | tr '\0' x)" "$d/longlink"
	echo small >"$d/xfile"
	echo tiny >"$d/sub/deep/f"
	yes 0123456789abcdef | tr -d '\n' | head -c 700 >"$T/xval"
}

# make_base NAME FEATURES: 1 KiB blocks (so the 3000-entry directory gets a
# two-level htree), xattr in an external block, directories indexed by
# e2fsck -D.
make_base() {
	local img=$T/$1.img
	# Fixed UUID and hash seed: the same layout and name hashes every run.
	mke2fs -q -F -t ext4 -b 1024 -O "$2" -U 6f1b2a3c-4d5e-4f60-8a71-92b3c4d5e6f7 \
		-E hash_seed=0d1c2b3a-4958-4776-8594-a3b2c1d0e9f8 -d "$T/tree" "$img" 16M ||
		{ echo "FAIL: mke2fs $2"; exit 1; }
	debugfs -w -R "ea_set -f $T/xval /xfile user.big" "$img" >/dev/null 2>&1
	e2fsck -fyD "$img" >/dev/null 2>&1
	e2fsck -fn "$img" >/dev/null 2>&1 || { echo "FAIL: base image $1 not clean"; exit 1; }
	[ "$(dbg "$img" 'htree /bigdir' | awk '/Indirect levels/ {print $3}')" = 1 ] ||
		{ echo "FAIL: base $1: /bigdir is not a two-level htree"; exit 1; }
	[ "$(dbg "$img" 'ex /frag' | awk '$1 == "0/" && $2 == "1" {n++} END {print n+0}')" -ge 1 ] ||
		{ echo "FAIL: base $1: /frag has no depth-1 extent tree"; exit 1; }
	[ -n "$(file_acl "$img" /xfile)" ] && [ "$(file_acl "$img" /xfile)" != 0 ] ||
		{ echo "FAIL: base $1: /xfile has no xattr block"; exit 1; }
}

make_inline_base() {
	local d=$T/itree img=$T/I.img
	mkdir -p "$d/idir"
	echo "hello world" >"$d/hello.txt"
	echo x >"$d/idir/x"; echo y >"$d/idir/y"
	echo "tiny inline file" >"$d/ifile"
	mke2fs -q -F -t ext4 -b 4096 -I 256 -O inline_data,metadata_csum,64bit -d "$d" "$img" 8M ||
		{ echo "FAIL: mke2fs inline_data"; exit 1; }
	e2fsck -fn "$img" >/dev/null 2>&1 || { echo "FAIL: inline base not clean"; exit 1; }
	dbg "$img" "stat /idir" | grep -q "Size of inline data" ||
		{ echo "FAIL: inline base: /idir is not inline"; exit 1; }
}

# ---- running the CLI --------------------------------------------------------

# sanitizer_report: print and remove any sanitizer log; return 0 if found.
sanitizer_report() {
	local f found=1
	for f in "$T"/san*; do
		[ -e "$f" ] || continue
		echo "---- sanitizer report ($f):"; head -30 "$f"
		rm -f "$f"; found=0
	done
	return $found
}

# run_cli BIN ARGS...: sets RC, ERR (stderr text).
run_cli() {
	local bin=$1; shift
	timeout -k 5 20 "$bin" "$@" >"$T/out" 2>"$T/err" </dev/null
	RC=$?
	ERR=$(head -c 2000 "$T/err")
}

# crash_checks: common never-crash/never-hang assertions after run_cli.
crash_checks() {
	local what=$1
	if [ $RC -eq 124 ] || [ $RC -eq 137 ]; then
		bad "$what: hang (timed out after 20 s)"; return 1
	fi
	if [ $RC -ge 128 ]; then bad "$what: crash (exit $RC): $ERR"; return 1; fi
	if grep -qE 'AddressSanitizer|LeakSanitizer|runtime error:' "$T/err" || sanitizer_report; then
		bad "$what: sanitizer report: $ERR"; return 1
	fi
	return 0
}

# cli_argv CMD [-opts] PATH...: argv with IMAGE after the command's options.
cli_argv() {
	ARGV=("$1"); shift
	while [ $# -gt 0 ] && [ "${1:0:1}" = - ]; do ARGV+=("$1"); shift; done
	ARGV+=("$IMG" "$@")
}

# expect_fail CMD PATH: every CLI build fails with a message naming the
# problem (KEYWORDS) and, if NUMS is set, one of those numbers.
expect_fail() {
	local bin what n ok
	for bin in "${BINS[@]}"; do
		what="$(basename "$(dirname "$bin")")/$(basename "$bin") $*"
		cli_argv "$@"; run_cli "$bin" "${ARGV[@]}"
		crash_checks "$what" || continue
		if [ $RC -eq 0 ]; then bad "$what: succeeded on a corrupt image"; continue; fi
		if [ -z "$ERR" ]; then bad "$what: exit $RC without a message"; continue; fi
		if ! echo "$ERR" | grep -qiE "$KEYWORDS"; then
			bad "$what: message does not name the problem (/$KEYWORDS/): $ERR"; continue
		fi
		if [ -n "$NUMS" ]; then
			ok=0
			for n in $NUMS; do echo "$ERR" | grep -qw -- "$n" && ok=1; done
			[ $ok = 1 ] || { bad "$what: message names none of [$NUMS]: $ERR"; continue; }
		fi
		[ -n "${VERBOSE:-}" ] && echo "    $what -> $RC: $ERR"
		pass
	done
}

# expect_robust CMD PATH: for damage that a reader cannot always tell from
# valid data (e.g. an htree leaf pointer aimed at another block of the same
# directory without checksums): no crash, no hang, and an error has a message.
expect_robust() {
	local bin what
	for bin in "${BINS[@]}"; do
		what="$(basename "$(dirname "$bin")")/$(basename "$bin") $*"
		cli_argv "$@"; run_cli "$bin" "${ARGV[@]}"
		crash_checks "$what" || continue
		if [ $RC -ne 0 ] && [ -z "$ERR" ]; then bad "$what: exit $RC without a message"; continue; fi
		pass
	done
}

# expect_fail_or_same CMD PATH: damage the kernel tolerates by falling back
# (a structurally bad htree index without checksums: the kernel scans the
# leaves linearly): an error with a message, or exactly the answer the
# clean base image gives.
expect_fail_or_same() {
	local bin what want
	for bin in "${BINS[@]}"; do
		what="$(basename "$(dirname "$bin")")/$(basename "$bin") $*"
		local saved=$IMG
		IMG=$BASE_IMG; cli_argv "$@"; IMG=$saved
		run_cli "$bin" "${ARGV[@]}"; want=$(cat "$T/out")
		cli_argv "$@"; run_cli "$bin" "${ARGV[@]}"
		crash_checks "$what" || continue
		if [ $RC -ne 0 ]; then
			[ -n "$ERR" ] || { bad "$what: exit $RC without a message"; continue; }
			[ -n "${VERBOSE:-}" ] && echo "    $what -> $RC: $ERR"
		elif [ "$(cat "$T/out")" != "$want" ]; then
			bad "$what: succeeded with a different answer than the clean image"; continue
		else
			[ -n "${VERBOSE:-}" ] && echo "    $what -> 0, same answer as the clean image (fallback)"
		fi
		pass
	done
}

# expect_ok CMD PATH: a healthy path of a damaged image still works.
expect_ok() {
	local bin what
	for bin in "${BINS[@]}"; do
		what="$(basename "$(dirname "$bin")")/$(basename "$bin") $*"
		cli_argv "$@"; run_cli "$bin" "${ARGV[@]}"
		crash_checks "$what" || continue
		[ $RC -eq 0 ] || { bad "$what: healthy path failed ($RC): $ERR"; continue; }
		pass
	done
}

# ---- FUSE -------------------------------------------------------------------

fuse_mount() {
	timeout -k 5 20 "$UEXT4" mount -o ro "$IMG" "$MNT" >"$T/mout" 2>&1 </dev/null
}
fuse_umount() {
	mountpoint -q "$MNT" && { fusermount3 -u "$MNT" 2>/dev/null || fusermount3 -uz "$MNT"; }
	sanitizer_report && bad "FUSE server: sanitizer report"
}

# fuse_op OP PATH: run a shell tool on the mounted path.
fuse_op() {
	local p=$MNT$2
	case $1 in
	stat) timeout 20 stat "$p" ;;
	ls) timeout 20 ls -l "$p" ;;
	cat) timeout 20 cat "$p" ;;
	readlink) timeout 20 readlink -v "$p" ;;
	getfattr) timeout 20 getfattr -n user.big "$p" ;;
	esac >/dev/null 2>"$T/ferr"
	FRC=$?
	FERR=$(head -c 1000 "$T/ferr")
}

# fuse_expect_eio OP PATH [HEALTHY=CONTENT]: mount, the damaged path gives
# EIO or EUCLEAN, the healthy file (default /hello.txt) still reads back.
fuse_expect_eio() {
	[ $FUSE = 1 ] || return 0
	local hspec=${3:-/hello.txt=hello world}
	local healthy=${hspec%%=*} want=${hspec#*=}
	if ! fuse_mount; then
		bad "FUSE mount refused an image with one damaged file: $(cat "$T/mout")"
		sanitizer_report
		return
	fi
	fuse_op "$1" "$2"
	if [ $FRC -eq 0 ]; then
		bad "FUSE $1 $2 succeeded on a damaged structure"
	elif ! echo "$FERR" | grep -qE 'Input/output error|Structure needs cleaning'; then
		bad "FUSE $1 $2: expected EIO/EUCLEAN, got: $FERR"
	else
		pass
	fi
	if [ "$(timeout 20 cat "$MNT$healthy" 2>&1)" = "$want" ]; then
		pass
	else
		bad "FUSE stopped serving $healthy after the error"
	fi
	fuse_umount
}

# fuse_expect_refused: a damaged global structure makes the mount fail.
fuse_expect_refused() {
	[ $FUSE = 1 ] || return 0
	if fuse_mount; then
		if mountpoint -q "$MNT"; then
			bad "FUSE mounted an image with a damaged ${CASE%%:*}"
			fuse_umount
			return
		fi
		bad "uext4 mount exited 0 but nothing is mounted"
	else
		local rc=$?
		[ $rc -lt 124 ] || bad "uext4 mount crashed or hung (exit $rc)"
		[ -s "$T/mout" ] || bad "uext4 mount failed without a message"
		[ $rc -lt 124 ] && [ -s "$T/mout" ] && pass
	fi
	sanitizer_report && bad "uext4 mount: sanitizer report"
}

# ---- cases ------------------------------------------------------------------

# begin BASE NAME: fresh copy of a base image.
# write_probes: the write commands on the damaged image of the case just
# run: each may fail (with a message) but never crash, hang or trip a
# sanitizer.  Damage a writer meets is reported, not spread.
write_probes() {
	local bin what
	echo probe > "$T/probe.txt"
	for bin in "${BINS[@]}"; do
		for argv in "mkdir $IMG /wp_dir" "put $IMG $T/probe.txt /wp_file" \
			"mkdir $IMG /dir/wp_sub" "put $IMG $T/probe.txt /bigdir/wp_name" \
			"setfattr -n user.wp -v 1 $IMG /hello.txt" "truncate -s 0 $IMG /frag" \
			"rm -r $IMG /dir" "mv $IMG /hello.txt /hello2.txt"; do
			what="write probe: $(basename "$(dirname "$bin")")/$(basename "$bin") $argv"
			# shellcheck disable=SC2086
			run_cli "$bin" $argv
			crash_checks "$what" || continue
			if [ $RC -ne 0 ] && [ -z "$ERR" ]; then bad "$what: exit $RC without a message"; continue; fi
			pass
		done
	done
}

# SWEEP_SAVE=DIR: each case's damaged image, as the write probes get it, is
# kept as DIR/corrupt-NN.img with its description in DIR/corrupt-NN.img.desc
# (for tests/sweep.sh).
TO_SAVE=""     # "NUMBER DESCRIPTION" of the case whose image is to be saved
save_case() {
	[ -n "${SWEEP_SAVE:-}" ] && [ -n "$TO_SAVE" ] || return 0
	local f
	f=$SWEEP_SAVE/corrupt-$(printf '%02d' "${TO_SAVE%% *}").img
	mkdir -p "$SWEEP_SAVE" && cp --sparse=always "$IMG" "$f" && echo "${TO_SAVE#* }" > "$f.desc" ||
		bad "cannot save the image to $f"
	TO_SAVE=""
}

begin() {
	save_case
	[ $CASES -gt 0 ] && [ -z "${NO_WRITE_PROBES:-}" ] && write_probes
	CASE=$2
	CASES=$((CASES + 1))
	IMG=$T/case.img
	BASE_IMG=$T/$1.img
	cp "$BASE_IMG" "$IMG"
	NUMS=""
	KEYWORDS='corrupt|checksum'
	BS=$(dumpe2fs -h "$IMG" 2>/dev/null | awk '/^Block size:/ {print $3}')
	[ -n "$BS" ] || BS=1024
	echo "case $CASES: $CASE"
	TO_SAVE="$CASES $CASE"
}

superblock_cases() {
	local b=C
	begin $b "superblock: checksum"
	poke "$IMG" $((1024 + 0x3FC)) "$(hex32 $(($(peek32 "$IMG" $((1024 + 0x3FC))) ^ 0x5a5a)))"
	expect_fail info; expect_fail ls /; fuse_expect_refused

	for kv in "inodes_per_group 0" "log_block_size 20" "blocks_count 99999999" \
		"blocks_per_group 0" "inode_size 7" "desc_size 1000" \
		"first_data_block 9999" "inodes_count 5" "first_ino 1"; do
		begin $b "superblock: $kv"
		KEYWORDS='corrupt|checksum|invalid|bad|superblock|unsupported'
		dbgw "$IMG" "ssv $kv"
		expect_fail info; fuse_expect_refused
	done
}

group_desc_cases() {
	local gd
	begin C "group descriptor: checksum"
	gd=$(((1 + 1) * 1024))   # 1 KiB blocks: descriptors start in block 2
	poke "$IMG" $((gd + 0x1E)) "$(hex16 $(($(peek16 "$IMG" $((gd + 0x1E))) ^ 0x1234)))"
	NUMS="0"
	expect_fail info; fuse_expect_refused

	# set_bg leaves the old descriptor checksum: recompute it (with -n, as
	# debugfs would otherwise refuse the mismatching descriptor) so that the
	# location check, not the checksum, is what fires.
	# A bitmap past the end matters only for writing (groupcheck.c:
	# read-only use still works; tests/hostile_meta.sh covers the rest).
	for f in inode_table block_bitmap inode_bitmap; do
		begin C "group descriptor: $f past the end"
		dbgw "$IMG" "set_bg 0 $f 0xFFFFFF00"
		debugfs -n -w -R "set_bg 0 checksum calc" "$IMG" 2>&1 | grep -q "Checksum set" ||
			bad "debugfs could not recompute the descriptor checksum"
		NUMS="4294967040"
		KEYWORDS='corrupt.*outside|corrupt.*past|corrupt.*beyond'
		if [ $f = inode_table ]; then
			expect_fail info; fuse_expect_refused
		else
			expect_ok info; expect_ok cat /hello.txt; expect_fail mkdir /newdir
		fi
	done
	begin C "group descriptor: inode table overlapping the end"
	dbgw "$IMG" "set_bg 1 inode_table $(($(dumpe2fs -h "$IMG" 2>/dev/null | awk '/^Block count:/ {print $3}') - 3))"
	debugfs -n -w -R "set_bg 1 checksum calc" "$IMG" >/dev/null 2>&1
	NUMS="1"
	KEYWORDS='corrupt.*outside|corrupt.*past|corrupt.*beyond'
	expect_fail info; fuse_expect_refused
}

inode_cases() {
	local ino
	begin C "inode: checksum"
	ino=$(ino_of "$IMG" /hello.txt)
	dbgw "$IMG" "set_inode_field /hello.txt checksum 0x1234"
	NUMS=$ino
	expect_fail stat /hello.txt; expect_fail cat /hello.txt; expect_ok stat /dir/a
	fuse_expect_eio stat /hello.txt "/sub/deep/f=tiny"

	begin C "inode: i_size absurd (2^63)"
	ino=$(ino_of "$IMG" /dir/a)
	dbgw "$IMG" "set_inode_field /dir/a size 0x8000000000000000"
	NUMS=$ino
	expect_fail cat /dir/a; fuse_expect_eio cat /dir/a

	begin C "inode: i_links_count 0"
	ino=$(ino_of "$IMG" /dir/b)
	dbgw "$IMG" "set_inode_field /dir/b links_count 0"
	NUMS=$ino
	expect_fail stat /dir/b; fuse_expect_eio stat /dir/b

	begin C "inode: file type 0 in i_mode"
	ino=$(ino_of "$IMG" /dir/c)
	dbgw "$IMG" "set_inode_field /dir/c mode 0644"
	NUMS=$ino
	expect_fail stat /dir/c; fuse_expect_eio stat /dir/c

	# The kernel skips directory holes in readdir and lookup, so only
	# robustness (no hang walking a million holes) is required.
	begin C "inode: directory i_size far beyond its blocks"
	dbgw "$IMG" "set_inode_field /dir size 1000000007"
	expect_robust ls /dir; expect_robust stat /dir/zzz
}

extent_cases() {
	local ino leaf b
	# In-inode header of a one-extent file, changed through debugfs so the
	# inode checksum stays valid and the structure check is what fires.
	for kv in "block[0] 0x0001F30B:extent header magic" \
		"block[0] 0x0005F30A:extent eh_entries > eh_max" \
		"block[1] 0x00060004:extent tree depth 6" \
		"block[5] 0x7FFFFFF0:extent pointing past the end of the fs" \
		"block[4] 0x00000000:extent of length 0"; do
		begin C "inode extents: ${kv#*:}"
		ino=$(ino_of "$IMG" /dir/a)
		dbgw "$IMG" "set_inode_field /dir/a ${kv%%:*}"
		NUMS=$ino
		expect_fail cat /dir/a; expect_ok cat /dir/b
		fuse_expect_eio cat /dir/a
	done

	# The leaf block of /frag's depth-1 tree: raw bytes, on the image
	# without checksums (structure check) and with (checksum or structure).
	for b in N C; do
		begin $b "extent leaf block ($b): header magic"
		ino=$(ino_of "$IMG" /frag); leaf=$(ext_leaf "$IMG" /frag)
		poke "$IMG" $((leaf * BS)) 0000
		NUMS="$ino $leaf"
		expect_fail cat /frag; fuse_expect_eio cat /frag

		begin $b "extent leaf block ($b): eh_entries > eh_max"
		ino=$(ino_of "$IMG" /frag); leaf=$(ext_leaf "$IMG" /frag)
		poke "$IMG" $((leaf * BS + 2)) ffff
		NUMS="$ino $leaf"
		expect_fail cat /frag; fuse_expect_eio cat /frag

		begin $b "extent leaf block ($b): extent past the end of the fs"
		ino=$(ino_of "$IMG" /frag); leaf=$(ext_leaf "$IMG" /frag)
		poke "$IMG" $((leaf * BS + 12 + 6)) "ff00$(hex32 0xFFFFFFF0)"
		NUMS="$ino $leaf"
		expect_fail cat /frag; fuse_expect_eio cat /frag

		begin $b "extent leaf block ($b): depth mismatch"
		ino=$(ino_of "$IMG" /frag); leaf=$(ext_leaf "$IMG" /frag)
		poke "$IMG" $((leaf * BS + 6)) 0300
		NUMS="$ino $leaf"
		expect_fail cat /frag; fuse_expect_eio cat /frag
	done

	# A loop: root says depth 2, the leaf block becomes an index node of
	# depth 1 whose only entry points to itself.
	begin N "extent tree loop (index block pointing to itself)"
	ino=$(ino_of "$IMG" /frag); leaf=$(ext_leaf "$IMG" /frag)
	dbgw "$IMG" "set_inode_field /frag block[1] 0x00020004"
	poke "$IMG" $((leaf * BS)) "0af30100$(hex16 $(( (BS - 12) / 12 )))0100$(hex32 0)00000000$(hex32 "$leaf")00000000"
	NUMS="$ino $leaf"
	expect_fail cat /frag; fuse_expect_eio cat /frag
}

dir_cases() {
	local ino d b
	for b in N C; do
		begin $b "dirent ($b): rec_len 0"
		ino=$(ino_of "$IMG" /dir); d=$(bmap "$IMG" /dir 0)
		poke "$IMG" $((d * BS + 24 + 4)) 0000
		NUMS="$ino $d"
		expect_fail ls /dir; expect_ok cat /hello.txt; fuse_expect_eio ls /dir

		begin $b "dirent ($b): rec_len past the block"
		ino=$(ino_of "$IMG" /dir); d=$(bmap "$IMG" /dir 0)
		poke "$IMG" $((d * BS + 24 + 4)) "$(hex16 $((BS * 2)))"
		NUMS="$ino $d"
		expect_fail ls /dir; fuse_expect_eio ls /dir

		begin $b "dirent ($b): name_len > rec_len"
		ino=$(ino_of "$IMG" /dir); d=$(bmap "$IMG" /dir 0)
		poke "$IMG" $((d * BS + 6)) c8
		NUMS="$ino $d"
		expect_fail ls /dir; fuse_expect_eio ls /dir

		begin $b "dirent ($b): rec_len not a multiple of 4"
		ino=$(ino_of "$IMG" /dir); d=$(bmap "$IMG" /dir 0)
		poke "$IMG" $((d * BS + 4)) 0d00
		NUMS="$ino $d"
		expect_fail ls /dir; fuse_expect_eio ls /dir
	done

	begin C "directory leaf checksum"
	ino=$(ino_of "$IMG" /dir); d=$(bmap "$IMG" /dir 0)
	poke "$IMG" $((d * BS + BS - 4)) "$(hex32 $(($(peek32 "$IMG" $((d * BS + BS - 4))) ^ 0x00ff00ff)))"
	NUMS="$ino $d"
	expect_fail ls /dir; expect_fail stat /dir/a; fuse_expect_eio ls /dir

	begin N "dirent: inode number beyond s_inodes_count"
	d=$(bmap "$IMG" /dir 0)
	# the third entry is one of a/b/c; point it at inode 0x0FFFFFFF.
	poke "$IMG" $((d * BS + 24)) "$(hex32 0x0FFFFFFF)"
	NUMS="268435455"
	KEYWORDS='corrupt|invalid|bad|range'
	expect_fail ls -l /dir
}

# htree_expect CMD PATH: with metadata_csum every change to an index block
# breaks its checksum, which the kernel reports (EFSBADCRC) without a
# fallback: must fail.  Without checksums the kernel falls back to a linear
# scan on a structurally bad index (dx_probe's ERR_BAD_DX_DIR): an error or
# the right answer.
htree_expect() {
	if [ "$(basename "$BASE_IMG")" = C.img ]; then
		expect_fail "$@"; fuse_expect_eio "$@"
	else
		expect_fail_or_same "$@"
	fi
}

# first_htree_name IMG: a name in the first leaf of the htree (reached
# through root entry 0 and that index node's entry 0), from debugfs's dump.
first_htree_name() {
	dbg "$1" "htree /bigdir" | awk '$2 ~ /^0x[0-9a-f]+-[0-9a-f]+$/ && $3 ~ /^\(/ {print $4; exit}'
}

htree_cases() {
	local ino r x b name
	name=/bigdir/$(first_htree_name "$T/C.img")
	[ "$name" = /bigdir/ ] && { bad "cannot find a name in the first htree leaf"; return; }
	echo "htree cases look up $name"
	for b in N C; do
		begin $b "htree ($b): root count > limit"
		ino=$(ino_of "$IMG" /bigdir); r=$(bmap "$IMG" /bigdir 0)
		poke "$IMG" $((r * BS + 34)) "$(hex16 $(($(peek16 "$IMG" $((r * BS + 32))) + 1)))"
		NUMS="$ino $r 0"
		htree_expect stat "$name"

		begin $b "htree ($b): indirect_levels 3 without large_dir"
		ino=$(ino_of "$IMG" /bigdir); r=$(bmap "$IMG" /bigdir 0)
		poke "$IMG" $((r * BS + 30)) 03
		NUMS="$ino $r 0"
		htree_expect stat "$name"

		begin $b "htree ($b): root index pointing back to the root"
		ino=$(ino_of "$IMG" /bigdir); r=$(bmap "$IMG" /bigdir 0)
		poke "$IMG" $((r * BS + 36)) "$(hex32 0)"
		NUMS="$ino $r 0"
		htree_expect stat "$name"

		begin $b "htree ($b): index node count > limit"
		ino=$(ino_of "$IMG" /bigdir); r=$(bmap "$IMG" /bigdir 0)
		x=$(bmap "$IMG" /bigdir "$(peek32 "$IMG" $((r * BS + 36)))")
		poke "$IMG" $((x * BS + 10)) "$(hex16 $(($(peek16 "$IMG" $((x * BS + 8))) + 7)))"
		NUMS="$ino $x $(peek32 "$IMG" $((r * BS + 36)))"
		htree_expect stat "$name"

		begin $b "htree ($b): block pointer past the directory end"
		ino=$(ino_of "$IMG" /bigdir); r=$(bmap "$IMG" /bigdir 0)
		poke "$IMG" $((r * BS + 36)) "$(hex32 0x00FFFFFF)"
		NUMS="$ino $r 0 16777215"
		KEYWORDS='corrupt|checksum|range|past|beyond'
		htree_expect stat "$name"
	done

	# An index node whose first pointer names itself: with checksums the
	# "leaf" fails its check; without, a loop check sends the lookup to the
	# linear fallback.
	for b in C N; do
		begin $b "htree ($b): index node pointing to itself"
		ino=$(ino_of "$IMG" /bigdir); r=$(bmap "$IMG" /bigdir 0)
		local lx; lx=$(peek32 "$IMG" $((r * BS + 36)))
		x=$(bmap "$IMG" /bigdir "$lx")
		poke "$IMG" $((x * BS + 12)) "$(hex32 "$lx")"
		NUMS="$ino $x $lx"
		htree_expect stat "$name"
		expect_robust ls /bigdir
	done
}

xattr_cases() {
	local ino a b
	for b in N C; do
		begin $b "xattr block ($b): magic"
		ino=$(ino_of "$IMG" /xfile); a=$(file_acl "$IMG" /xfile)
		poke "$IMG" $((a * BS)) 00000000
		NUMS="$ino $a"
		expect_fail getfattr /xfile; fuse_expect_eio getfattr /xfile

		begin $b "xattr block ($b): value offset past the block"
		ino=$(ino_of "$IMG" /xfile); a=$(file_acl "$IMG" /xfile)
		poke "$IMG" $((a * BS + 32 + 2)) f0ff
		NUMS="$ino $a"
		expect_fail getfattr /xfile; fuse_expect_eio getfattr /xfile

		begin $b "xattr block ($b): value size past the block"
		ino=$(ino_of "$IMG" /xfile); a=$(file_acl "$IMG" /xfile)
		poke "$IMG" $((a * BS + 32 + 8)) "$(hex32 0x7FFFFFFF)"
		NUMS="$ino $a"
		expect_fail getfattr /xfile; fuse_expect_eio getfattr /xfile

		begin $b "xattr block ($b): entry name_len runs off the block"
		ino=$(ino_of "$IMG" /xfile); a=$(file_acl "$IMG" /xfile)
		poke "$IMG" $((a * BS + 32)) ff
		NUMS="$ino $a"
		expect_fail getfattr /xfile; fuse_expect_eio getfattr /xfile
	done

	begin C "xattr block: checksum"
	ino=$(ino_of "$IMG" /xfile); a=$(file_acl "$IMG" /xfile)
	poke "$IMG" $((a * BS + 16)) "$(hex32 $(($(peek32 "$IMG" $((a * BS + 16))) ^ 0x01010101)))"
	NUMS="$ino $a"
	expect_fail getfattr /xfile; fuse_expect_eio getfattr /xfile

	begin C "inode: file_acl past the end of the fs"
	ino=$(ino_of "$IMG" /xfile)
	dbgw "$IMG" "set_inode_field /xfile file_acl 0xFFFFFFF0"
	NUMS="$ino 4294967280"
	expect_fail getfattr /xfile; fuse_expect_eio getfattr /xfile
}

# inline_xattr_poke IMG INODE_OFF PATH: give the first in-inode xattr entry
# (system.data) a value size running far past the inode (the kernel checks
# offset + size of in-inode entries with a value), fix the checksum.
inline_xattr_poke() {
	local isz extra ea
	isz=$(dumpe2fs -h "$1" 2>/dev/null | awk '/^Inode size:/ {print $3}')
	extra=$(peek16 "$1" $(($2 + 0x80)))
	ea=$(($2 + 0x80 + extra + 4))    # after i_extra_isize and the 4-byte magic
	poke "$1" $((ea + 8)) "$(hex32 0x7000)"   # e_value_size
	fix_inode_csum "$1" "$3"
	: "$isz"
}

inline_cases() {
	local ino off
	# Inline directory: i_block = parent inode (4 bytes), then dirents.
	# Raw edit of the inode, then debugfs recomputes the inode checksum.
	begin I "inline dirent: rec_len 0"
	ino=$(ino_of "$IMG" /idir); off=$(inode_off "$IMG" /idir)
	poke "$IMG" $((off + 0x28 + 4 + 4)) 0000
	fix_inode_csum "$IMG" /idir
	NUMS=$ino
	expect_fail ls /idir; fuse_expect_eio ls /idir

	begin I "inline dirent: name_len > rec_len"
	ino=$(ino_of "$IMG" /idir); off=$(inode_off "$IMG" /idir)
	poke "$IMG" $((off + 0x28 + 4 + 6)) ff
	fix_inode_csum "$IMG" /idir
	NUMS=$ino
	expect_fail ls /idir; fuse_expect_eio ls /idir

	begin I "inline dirent: rec_len past the inline area"
	ino=$(ino_of "$IMG" /idir); off=$(inode_off "$IMG" /idir)
	poke "$IMG" $((off + 0x28 + 4 + 4)) "$(hex16 4000)"
	fix_inode_csum "$IMG" /idir
	NUMS=$ino
	expect_fail ls /idir; fuse_expect_eio ls /idir

	# The kernel zero-fills past the inline data (ext4_readpage_inline), so
	# only robustness is required here.
	begin I "inline file: i_size beyond the inline data"
	dbgw "$IMG" "set_inode_field /ifile size 100000"
	expect_robust cat /ifile

	begin I "inline file: system.data xattr value running past the inode"
	ino=$(ino_of "$IMG" /ifile); off=$(inode_off "$IMG" /ifile)
	inline_xattr_poke "$IMG" "$off" /ifile
	NUMS=$ino
	# The kernel validates in-inode xattrs when it loads an inline inode.
	expect_fail getfattr /ifile; expect_fail cat /ifile; fuse_expect_eio cat /ifile
}

symlink_cases() {
	local ino
	begin C "fast symlink: absurd size"
	ino=$(ino_of "$IMG" /link)
	dbgw "$IMG" "set_inode_field /link size 1000000"
	NUMS=$ino
	expect_fail cat /link; fuse_expect_eio readlink /link

	begin C "slow symlink: absurd size"
	ino=$(ino_of "$IMG" /longlink)
	dbgw "$IMG" "set_inode_field /longlink size 0x7FFFFFFF"
	NUMS=$ino
	expect_fail cat /longlink; fuse_expect_eio readlink /longlink
}

# ---- wrong arguments ----------------------------------------------------

# expect_usage DESC ARGS...: exit 1 or 2 with a message, no crash.
expect_usage() {
	local desc=$1 bin what; shift
	for bin in "${BINS[@]}"; do
		what="$(basename "$(dirname "$bin")")/$(basename "$bin") $desc"
		run_cli "$bin" "$@"
		crash_checks "$what" || continue
		if [ $RC -ne 1 ] && [ $RC -ne 2 ]; then bad "$what: exit $RC, want 1 or 2"; continue; fi
		[ -n "$ERR" ] || { bad "$what: no message on stderr"; continue; }
		[ -n "${VERBOSE:-}" ] && echo "    $what -> $RC: $(echo "$ERR" | head -1)"
		pass
	done
}

argument_cases() {
	CASE="arguments"
	CASES=$((CASES + 1))
	echo "case $CASES: wrong CLI arguments"
	head -c 4M /dev/zero >"$T/zero.img"
	printf 'this is not a file system\n%.0s' {1..200} >"$T/text.img"
	: >"$T/empty.img"
	head -c 1500 /dev/urandom >"$T/tiny.img"
	mkdir -p "$T/adir"
	expect_usage "(no arguments)"
	expect_usage "unknown command" frobnicate "$T/C.img" /
	expect_usage "ls without operands" ls
	expect_usage "cat without path" cat "$T/C.img"
	expect_usage "stat without path" stat "$T/C.img"
	expect_usage "mount without mountpoint" mount "$T/C.img"
	expect_usage "nonexistent image" info "$T/does-not-exist.img"
	expect_usage "zero-filled image" info "$T/zero.img"
	expect_usage "text file as image" info "$T/text.img"
	expect_usage "empty file as image" info "$T/empty.img"
	expect_usage "1500-byte file as image" info "$T/tiny.img"
	expect_usage "directory as image" info "$T/adir"
	expect_usage "nonexistent path" stat "$T/C.img" /no/such/file
	expect_usage "cat of a directory" cat "$T/C.img" /dir
	expect_usage "ls of a file below a file" ls "$T/C.img" /hello.txt/x
	if [ $FUSE = 1 ]; then
		for bin in "$UEXT4"; do
			run_cli "$bin" mount -o ro "$T/zero.img" "$MNT"
			crash_checks "mount zero.img" && {
				if [ $RC -eq 0 ]; then bad "mount of a zero-filled image succeeded"; fuse_umount
				else pass; fi
			}
		done
	fi
}

# ---- main -------------------------------------------------------------------

echo "corrupt.sh: building base images in $T"
make_tree
make_base C metadata_csum,64bit
make_base N ^metadata_csum,64bit
make_inline_base

# The clean images must work, or every check below would pass vacuously.
CASE="clean images"
IMG=$T/C.img; expect_ok info; expect_ok cat /hello.txt; expect_ok stat "/bigdir/$(first_htree_name "$T/C.img")"
expect_ok cat /frag; expect_ok getfattr /xfile; expect_ok ls /dir
IMG=$T/N.img; expect_ok cat /frag; expect_ok ls /bigdir
IMG=$T/I.img; expect_ok ls /idir; expect_ok cat /ifile
if [ $FAILS -ne 0 ]; then
	echo "FAIL: the clean images do not read; not running the corruption cases"
	exit 1
fi

# SECTIONS="htree xattr ..." runs only those groups (for debugging).
for s in ${SECTIONS:-superblock group_desc inode extent dir htree xattr inline symlink argument}; do
	${s}_cases
done
save_case
[ -z "${NO_WRITE_PROBES:-}" ] && write_probes

echo "corrupt.sh: $CASES cases, $CHECKS checks passed, $FAILS failures (binaries: ${BINS[*]})"
[ $FAILS -eq 0 ] || exit 1
exit 0
