#!/bin/bash
# hostile_ops.sh - operations that fail half-way leave nothing behind, and
# damaged inodes are refused the same way by every operation, on damaged
# images built by tests/images/mk_*.sh.
#
# Case 8 (one validity step for every operation): a fast symlink longer
# than i_block, a directory of size 0 with no blocks, a regular file with
# a bad extent header magic, a device inode with the extents flag.  Every CLI command on the damaged inode (stat,
# cat, chmod, chown -h, ln, mv as source and as target, rm, setfattr,
# truncate, getfattr), with the release and the ASan build, must fail
# with the same corruption message naming the inode, and leave every byte
# of the image as it was (plain cmp: the superblock and journal too).  The same
# operations through a read-write FUSE mount must fail with EUCLEAN, and
# the healthy /file must still read back.
#
# Case 5 (a failed operation leaves nothing behind): mkdir on images where
# it fails after it took an inode (every leaf of the parent htree damaged;
# every block bitmap failing its checksum; no free block left), by the
# CLI and through FUSE: the free block and inode counts (dumpe2fs -h) are
# unchanged, and e2fsck -fn finds no kind of problem it did not find
# before (lines with their numbers masked, compared as sets).  The
# failure-injection sweep of every namespace operation is tests/unit_undo.c.
# test-timeout: 600
set -uo pipefail
. "$(dirname "$0")/lib.sh"
setup_traps
need mke2fs debugfs dumpe2fs e2fsck cmp
need_built "$UEXT4"
T=$(mktemp_dir)
IMAGES=$TOP/tests/images
BINS=("$UEXT4")
ASAN_BIN=$TOP/build/asan/uext4
[ -x "$ASAN_BIN" ] && [ "$ASAN_BIN" != "$UEXT4" ] && BINS+=("$ASAN_BIN")
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}log_path=$T/san:detect_leaks=1"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:+$UBSAN_OPTIONS:}log_path=$T/san:print_stacktrace=1"
FUSE=1
{ [ -e /dev/fuse ] && command -v fusermount3 > /dev/null; } || { FUSE=0; echo "note: no FUSE, FUSE checks skipped"; }
FAILS=0 CHECKS=0
ok() { CHECKS=$((CHECKS + 1)); }

build() { # build BUILDER OUT: run tests/images/mk_BUILDER.sh
	local line
	line=$("$IMAGES/mk_$1.sh" "$2") || { local rc=$?; [ $rc = 77 ] && skip "$line"; fail "mk_$1.sh: exit $rc"; }
	echo "image $1: $line"
}

sanitizer_check() { # sanitizer_check WHAT
	if compgen -G "$T/san*" > /dev/null; then
		bad "$1: sanitizer report"
		cat "$T"/san* | head -30
		rm -f "$T"/san*
	fi
}

# same_image A B: every byte equal, the superblock's mount fields and the
# journal included (a mount that changes nothing writes nothing).
same_image() {
	cmp "$1" "$2" > "$T/cmpout" 2>&1 || { echo "  $(cat "$T/cmpout")"; return 1; }
}

# ---------------------------------------------------------------- case 8

# refuse_all IMG PATH KIND: every command on PATH gives the message of stat.
refuse_all() {
	local img=$1 p=$2 kind=$3 bin msg cmd out rc other
	"$UEXT4" stat "$img" "$p" > /dev/null 2> "$T/err" && { bad "$kind: stat $p succeeded"; return; }
	msg=$(sed -n 's/.*(\(corrupt inode [0-9]* .*\))$/\1/p' "$T/err")
	[ -n "$msg" ] || { bad "$kind: stat $p: no corruption message naming the inode: $(cat "$T/err")"; return; }
	echo "  $kind: $msg"
	other=/dir
	[ "$kind" = dir ] || other=/file
	for bin in "${BINS[@]}"; do
		for cmd in "stat IMG $p" "cat IMG $p" "getfattr -d IMG $p" "chmod IMG 600 $p" \
			"chown -h IMG 5:5 $p" "ln IMG $p /newlink" "mv IMG $p /moved" \
			"mv IMG $other $p" "rm -r IMG $p" "rm IMG $p" "setfattr -n user.x -v 1 IMG $p" \
			"truncate -s 0 IMG $p"; do
			cp "$img" "$T/work.img"
			# shellcheck disable=SC2086
			out=$(timeout 60 "$bin" ${cmd/IMG/$T/work.img} 2>&1 > /dev/null)
			rc=$?
			local what="$kind: $(basename "$(dirname "$bin")")/uext4 $cmd"
			sanitizer_check "$what"
			if [ $rc = 0 ]; then bad "$what: exit 0"; continue; fi
			[ $rc -lt 124 ] || { bad "$what: crashed or hung (exit $rc)"; continue; }
			case "$out" in
			*"$msg"*) ;;
			*) bad "$what: message is not the inode's corruption: $out"; continue ;;
			esac
			same_image "$img" "$T/work.img" || { bad "$what: the refusal changed the image"; continue; }
			ok
		done
	done
}

fuse_refuse_all() { # fuse_refuse_all IMG PATH KIND
	local img=$1 p=$2 kind=$3 mnt=$T/mnt op out
	[ $FUSE = 1 ] || return 0
	cp "$img" "$T/fuse.img"
	mkdir -p "$mnt"
	"$UEXT4" mount "$T/fuse.img" "$mnt" 2> "$T/mount.err" || { bad "$kind: uext4 mount: $(cat "$T/mount.err")"; return; }
	MOUNTS+=("$mnt")
	# The healthy file first: its RELEASE then reaches the server long
	# before the unmount (the server does not free files still open at
	# unmount, which ASan would report as a leak).
	[ "$(cat "$mnt/file" 2>&1)" = healthy ] || bad "$kind: FUSE: /file does not read back"
	for op in "stat $mnt$p" "cat $mnt$p" "readlink -v $mnt$p" "chmod 600 $mnt$p" \
		"chown -h 5:5 $mnt$p" "ln $mnt$p $mnt/newlink" "mv $mnt$p $mnt/moved" \
		"mv -T $mnt/dir $mnt$p" "rm -rf $mnt$p" "setfattr -n user.x -v 1 $mnt$p" \
		"truncate -s 0 $mnt$p" "ls -l $mnt$p"; do
		# shellcheck disable=SC2086
		out=$(LC_ALL=C timeout 60 $op 2>&1)
		case "$out" in
		*"Structure needs cleaning"*) ok ;;
		*) bad "$kind: FUSE $op: expected EUCLEAN, got: ${out:-exit 0}" ;;
		esac
	done
	stat "$mnt/file" > /dev/null || bad "$kind: FUSE: /file is gone"
	fusermount3 -u "$mnt" || umount -l "$mnt"
	flock "$T/fuse.img" true # the server holds the lock until it has written back
	sanitizer_check "$kind: FUSE server"
	same_image "$img" "$T/fuse.img" || bad "$kind: FUSE: the refused operations changed the image"
}

case8() { # case8 BUILDER PATH KIND
	build "$1" "$T/$3.img"
	refuse_all "$T/$3.img" "$2" "$3"
	fuse_refuse_all "$T/$3.img" "$2" "$3"
	[ "$("$UEXT4" cat "$T/$3.img" /file 2>&1)" = healthy ] || bad "$3: /file does not read back"
}

note "case 8: one validity step for every operation"
case8 bad_symlink /lnk symlink
case8 bad_dir /bad dir
case8 bad_extent_header /bad extent
case8 bad_device /bad device

# ---------------------------------------------------------------- case 5

counts() { dumpe2fs -h "$1" 2> /dev/null | grep -E '^Free (blocks|inodes):'; }
# e2fsck's findings, numbers masked, one kind per line.
fsck_kinds() {
	e2fsck -fn "$1" 2>&1 | grep -v -e '^e2fsck [0-9]' -e '^Pass [0-9]' -e 'files (.*blocks$' \
		-e 'WARNING: Filesystem still has errors' -e '^$' | sed 's/[0-9][0-9]*/N/g' | sort -u
}

# failed_mkdir IMG PATH WHAT: mkdir fails, by the CLI and through FUSE;
# nothing changes.
failed_mkdir() {
	local img=$1 p=$2 what=$3 bin out rc mnt=$T/mnt
	fsck_kinds "$img" > "$T/kinds.before"
	counts "$img" > "$T/counts.before"
	for bin in "${BINS[@]}"; do
		cp "$img" "$T/work.img"
		out=$(timeout 60 "$bin" mkdir "$T/work.img" "$p" 2>&1)
		rc=$?
		sanitizer_check "$what: mkdir"
		[ $rc != 0 ] || { bad "$what: mkdir succeeded"; continue; }
		[ $rc -lt 124 ] || { bad "$what: mkdir crashed or hung (exit $rc)"; continue; }
		echo "  $what: $(basename "$(dirname "$bin")")/uext4 mkdir: $out"
		counts "$T/work.img" | diff "$T/counts.before" - > "$T/cdiff" ||
			{ bad "$what: free counts changed by the failed mkdir: $(cat "$T/cdiff")"; continue; }
		fsck_kinds "$T/work.img" > "$T/kinds.after"
		if [ -n "$(comm -13 "$T/kinds.before" "$T/kinds.after")" ]; then
			bad "$what: e2fsck finds new kinds of problems after the failed mkdir:"
			comm -13 "$T/kinds.before" "$T/kinds.after"
			continue
		fi
		ok
	done
	[ $FUSE = 1 ] || return 0
	cp "$img" "$T/work.img"
	mkdir -p "$mnt"
	"$UEXT4" mount "$T/work.img" "$mnt" 2> "$T/mount.err" || { bad "$what: uext4 mount: $(cat "$T/mount.err")"; return; }
	MOUNTS+=("$mnt")
	mkdir "$mnt$p" 2> /dev/null && bad "$what: FUSE mkdir $p succeeded"
	df -i "$mnt" > /dev/null
	fusermount3 -u "$mnt" || umount -l "$mnt"
	flock "$T/work.img" true
	sanitizer_check "$what: FUSE server"
	counts "$T/work.img" | diff "$T/counts.before" - > "$T/cdiff" ||
		bad "$what: FUSE: free counts changed by the failed mkdir: $(cat "$T/cdiff")"
	fsck_kinds "$T/work.img" > "$T/kinds.after"
	[ -z "$(comm -13 "$T/kinds.before" "$T/kinds.after")" ] ||
		bad "$what: FUSE: e2fsck finds new kinds of problems: $(comm -13 "$T/kinds.before" "$T/kinds.after")"
	ok
}

note "case 5: a failed mkdir leaves nothing behind"
build htree_bad_leaves "$T/leaves.img"
failed_mkdir "$T/leaves.img" /h/newdir "htree with damaged leaves"
build block_bitmaps_bad "$T/bitmaps.img"
failed_mkdir "$T/bitmaps.img" /newdir "block bitmaps failing their checksum"

# No free block (a file filled the image), inodes free: the new directory's
# block is ENOSPC after its inode was taken.
mke2fs -q -F -t ext4 -b 1024 "$T/full.img" 8M > /dev/null
head -c 12M /dev/zero > "$T/big"
"$UEXT4" put "$T/full.img" "$T/big" /big > /dev/null 2>&1
out=$("$UEXT4" mkdir "$T/full.img" /probe 2>&1) && bad "full image: mkdir /probe succeeded (the image is not full)"
echo "image full: no free block, inodes free: mkdir says: $out"
fsck_clean "$T/full.img" || bad "full image: not clean before the test"
failed_mkdir "$T/full.img" /newdir "no free block"
fsck_clean "$T/work.img" || bad "full image: e2fsck not clean after the failed mkdir"

echo "hostile_ops.sh: $CHECKS checks passed, $FAILS failed"
[ $FAILS = 0 ]
