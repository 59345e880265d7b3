#!/bin/bash
# hostile_meta.sh - inode and block bitmaps, descriptors and inode tables
# that disagree: metadata that contradicts itself must not make an image
# worse.
#
#  case 3  bg_itable_unused says live inodes were never used
#          (tests/images/mk_itable_unused_live.sh): a create must not build
#          their inode-table block zeroed (seed 002's shortcut) over them.
#  case 4  bitmaps / inode tables on the superblock, the descriptors, the
#          reserved GDT, each other, the journal, past the end, outside
#          their (flex) group (tests/images/mk_meta_*.sh): every write
#          command and a read-write FUSE mount are refused with a message
#          naming the group and the structure, leaving every byte as it
#          was; reads (ls, cat, info, a read-only FUSE mount) still work.
#          A clean image of every layout we know is still writable.
#  case 9  the inode bitmap marks a live inode free
#          (tests/images/mk_live_inode_free.sh): a create takes another
#          inode and the live one survives.
# Every write ends with: the live files and directories read back (by
# debugfs, not by us) as they were built, and e2fsck -fn finds no kind of
# problem it did not find before (its lines with numbers and the image
# name stripped, compared as sets).
set -u
. "$(dirname "$0")/lib.sh"
setup_traps
need mke2fs debugfs dumpe2fs e2fsck resize2fs cmp comm flock
[ -x "$UEXT4" ] || skip "$UEXT4 not built"
IMAGES=$TOP/tests/images
T=$(mktemp_dir)
MNT=$T/mnt
mkdir -p "$MNT"
FUSE=1
if [ ! -e /dev/fuse ] || ! command -v fusermount3 > /dev/null; then
	FUSE=0
	echo "note: no /dev/fuse or fusermount3: FUSE checks skipped"
fi
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=1"

CHECKS=0
ok() { CHECKS=$((CHECKS + 1)); }

# The reference tree every builder puts in its image (meta_tree).
REF=$T/ref
(. "$IMAGES/meta_common.inc" && meta_tree "$REF") || fail "could not make the reference tree"
echo "some host data" > "$T/hostfile"

build() { # build BUILDER OUT: run a builder, print its line
	local line
	line=$("$IMAGES/$1" "$2") || { echo "$line"; fail "$1 failed"; }
	echo "   $1: $line"
}

# fsck_kinds IMG: the kinds of problem e2fsck -fn reports, one a line.
# The "contains a file system with errors" banner is left out: recording
# an error (the error policy) is not a new problem.
fsck_kinds() {
	e2fsck -fn "$1" 2>&1 | sed -e "s|$1|IMG|g" |
		grep -vE '^(e2fsck [0-9]|Pass [1-5]|IMG: [0-9]+/[0-9]+ files|IMG contains a file system with errors|$)' |
		grep -vE '^(Fix|Clear|Salvage|Relocate|Recreate|Optimize|Connect to /lost\+found|Abort)\? no$' |
		sed -E 's/[0-9]+/N/g; s/[[:space:]]+$//' | sort -u
}

# no_new_kinds BEFORE-FILE IMG: e2fsck finds nothing new in IMG.
no_new_kinds() {
	local new
	new=$(fsck_kinds "$2" | comm -13 "$1" -)
	if [ -n "$new" ]; then
		bad "e2fsck -fn finds new kinds of problem: $new"
	else
		ok
	fi
}

# live_intact IMG: every file of the reference tree reads back (debugfs)
# with its content, every directory lists its reference entries.
live_intact() {
	local img=$1 f rel got want
	while IFS= read -r f; do
		rel=${f#"$REF"}
		if [ -d "$f" ]; then
			want=$(ls -A "$f" | sort)
			got=$(debugfs -R "ls $rel" "$img" 2> /dev/null | tr -s ' ' '\n' |
				grep -vE '^\(?[0-9]+\)?$|^$|^\.\.?$|^lost\+found$' | sort)
			# An entry the test added is not a loss; a missing one is.
			if [ -n "$(comm -23 <(echo "$want") <(echo "$got"))" ]; then
				bad "directory $rel lost entries: $(comm -23 <(echo "$want") <(echo "$got") | tr '\n' ' ')"
				return
			fi
		elif ! cmp -s "$f" <(debugfs -R "cat $rel" "$img" 2> /dev/null); then
			bad "file $rel does not read back as it was built"
			return
		fi
	done < <(find "$REF" -mindepth 1 | sort)
	ok
}

# new_inode_of IMG PATH: the inode debugfs finds at PATH (empty if none).
inode_of() {
	debugfs -R "stat $2" "$1" 2> /dev/null | awk '/^Inode:/ {print $2; exit}'
}

fuse_rw_mount() { # fuse_rw_mount IMG: read-write FUSE mount on $MNT
	timeout -k 5 60 "$UEXT4" mount "$1" "$MNT" > "$T/mout" 2>&1 < /dev/null
}
fuse_ro_mount() {
	timeout -k 5 60 "$UEXT4" mount -o ro "$1" "$MNT" > "$T/mout" 2>&1 < /dev/null
}
fuse_unmount() { # fuse_unmount IMG: unmount and wait for the write-back
	mountpoint -q "$MNT" && { fusermount3 -u "$MNT" 2> /dev/null || fusermount3 -uz "$MNT"; }
	flock "$1" true
}
MOUNTS+=("$MNT")

# recorded IMG FUNCTION: once the error policy records corruption on disk
# (s_error_count, s_first_error_*), the record names the function that
# met it.  With the fs_error() stand-in nothing is recorded: not checked.
RECORD_NOTED=0
recorded() {
	local h
	h=$(dumpe2fs -h "$1" 2> /dev/null)
	if ! echo "$h" | grep -q "^FS Error count"; then
		[ $RECORD_NOTED = 1 ] || echo "note: no error recorded on disk (fs_error() stand-in): record not checked"
		RECORD_NOTED=1
		return
	fi
	echo "$h" | grep -qE "^(First|Last) error function: *$2\b" && ok ||
		bad "the recorded error does not name $2: $(echo "$h" | grep -i 'error' | tr '\n' ';')"
}

# ---------------------------------------------------------------- case 3
# A write on the damaged image: the new name exists, nothing live is lost,
# e2fsck finds nothing new; or a refusal that names the group and field.
case3_write() { # case3_write LABEL CMD...
	local label=$1 img=$T/c3.img before=$T/c3.kinds
	shift
	CASE="case 3: $label"
	build mk_itable_unused_live.sh "$img"
	fsck_kinds "$img" > "$before"
	cli_run "$@"
	# A refusal (errors=remount-ro stops the command) names the problem.
	if [ $RC != 0 ] && ! echo "$ERR" | grep -qE "group 0.*bg_itable_unused|[Rr]ead-only"; then
		bad "uext4 $*: failed without naming group 0's bg_itable_unused: $ERR"
	else
		ok
	fi
	recorded "$img" report_itable_unused
	live_intact "$img"
	no_new_kinds "$before" "$img"
}
note "case 3: bg_itable_unused contradicts the inode bitmap"
case3_write "mkdir" mkdir "$T/c3.img" /newdir
[ $RC = 0 ] && { [ -n "$(inode_of "$T/c3.img" /newdir)" ] && ok || bad "mkdir succeeded but /newdir is missing"; }
case3_write "put into /dir" put "$T/c3.img" "$T/hostfile" /dir/newfile
if [ $RC = 0 ]; then
	cmp -s "$T/hostfile" <(debugfs -R "cat /dir/newfile" "$T/c3.img" 2> /dev/null) && ok ||
		bad "put succeeded but /dir/newfile does not read back"
fi
case3_write "mkdir -p of 20 directories" mkdir -p "$T/c3.img" /m/1 /m/2 /m/3 /m/4 /m/5 \
	/m/6 /m/7 /m/8 /m/9 /m/10 /m/11 /m/12 /m/13 /m/14 /m/15 /m/16 /m/17 /m/18 /m/19
if [ $FUSE = 1 ]; then
	CASE="case 3: FUSE"
	build mk_itable_unused_live.sh "$T/c3.img"
	fsck_kinds "$T/c3.img" > "$T/c3.kinds"
	if fuse_rw_mount "$T/c3.img"; then
		mkdir "$MNT/fdir" && echo data > "$MNT/fdir/f" && cat "$MNT/dir/a" > "$T/got" 2>&1
		[ "$(cat "$MNT/fdir/f" 2>&1)" = data ] && cmp -s "$T/got" "$REF/dir/a" && ok ||
			bad "FUSE: a new file or a live one does not read back"
		fuse_unmount "$T/c3.img"
		live_intact "$T/c3.img"
		no_new_kinds "$T/c3.kinds" "$T/c3.img"
	elif grep -q "group 0.*bg_itable_unused" "$T/mout"; then
		ok
	else
		bad "FUSE mount failed without naming the problem: $(cat "$T/mout")"
	fi
fi

# ---------------------------------------------------------------- case 9
case9_write() { # case9_write LABEL NEWPATH CMD...
	local label=$1 path=$2 img=$T/c9.img before=$T/c9.kinds live ino
	shift 2
	CASE="case 9: $label"
	build mk_live_inode_free.sh "$img"
	live=$(inode_of "$img" /dir/a)
	fsck_kinds "$img" > "$before"
	cli_run "$@"
	if [ $RC = 0 ]; then
		ino=$(inode_of "$img" "$path")
		if [ -z "$ino" ]; then
			bad "uext4 $* succeeded but $path is missing"
		elif [ "$ino" = "$live" ]; then
			bad "$path reused live inode $live"
		else
			ok
		fi
		# The live inode is in use in the bitmap now, as in the table.
		debugfs -R "testi <$live>" "$img" 2>&1 | grep -q "marked in use" && ok ||
			bad "inode $live is still free in the bitmap"
	elif echo "$ERR" | grep -qE "inode $live|[Rr]ead-only"; then
		ok
	else
		bad "uext4 $*: failed without naming inode $live: $ERR"
	fi
	recorded "$img" claim_not_live
	live_intact "$img"
	no_new_kinds "$before" "$img"
}
note "case 9: the inode bitmap marks a live inode free"
case9_write "mkdir" /newdir mkdir "$T/c9.img" /newdir
case9_write "put" /dir/newfile put "$T/c9.img" "$T/hostfile" /dir/newfile
case9_write "mkdir -p of 10" /n/9 mkdir -p "$T/c9.img" /n/1 /n/2 /n/3 /n/4 /n/5 /n/6 /n/7 /n/8 /n/9
if [ $FUSE = 1 ]; then
	CASE="case 9: FUSE"
	build mk_live_inode_free.sh "$T/c9.img"
	fsck_kinds "$T/c9.img" > "$T/c9.kinds"
	if fuse_rw_mount "$T/c9.img"; then
		echo data > "$MNT/ffile" && cat "$MNT/dir/a" > "$T/got" 2>&1
		[ "$(cat "$MNT/ffile" 2>&1)" = data ] && cmp -s "$T/got" "$REF/dir/a" && ok ||
			bad "FUSE: a new file or the live /dir/a does not read back"
		fuse_unmount "$T/c9.img"
		live_intact "$T/c9.img"
		no_new_kinds "$T/c9.kinds" "$T/c9.img"
	else
		bad "FUSE read-write mount failed: $(cat "$T/mout")"
	fi
fi

# ---------------------------------------------------------------- case 4
# refused IMG ORIG WANT CMD...: a write command fails naming WANT (regex)
# and the image is byte for byte as it was.
refused() {
	local img=$1 orig=$2 want=$3
	shift 3
	cli_run "$@"
	if [ $RC = 0 ]; then
		bad "uext4 $* succeeded on a bad layout"
	elif ! echo "$ERR" | grep -qE "$want"; then
		bad "uext4 $*: message does not say /$want/: $ERR"
	else
		ok
	fi
	cmp -s "$img" "$orig" && ok || bad "uext4 $* changed the image it refused to write"
}

# readable IMG: read commands still work.
readable() {
	local img=$1
	cli_run ls "$img" /dir
	[ $RC = 0 ] && [ "$(sort "$T/out")" = "$(ls -A "$REF/dir" | sort)" ] && ok ||
		bad "uext4 ls /dir on the read-only image: $RC $ERR"
	cli_run cat "$img" /big.bin
	[ $RC = 0 ] && cmp -s "$T/out" "$REF/big.bin" && ok || bad "uext4 cat /big.bin: $RC $ERR"
	cli_run info "$img"
	[ $RC = 0 ] && ok || bad "uext4 info: $RC $ERR"
}

case4() { # case4 BUILDER WANT
	local img=$T/c4.img orig=$T/c4.orig want=$2
	CASE="case 4: ${1%.sh}"
	build "$1" "$img"
	cp "$img" "$orig"
	refused "$img" "$orig" "$want" mkdir "$img" /newdir
	refused "$img" "$orig" "$want" put "$img" "$T/hostfile" /newfile
	refused "$img" "$orig" "$want" rm "$img" /hello.txt
	refused "$img" "$orig" "$want" chmod "$img" 600 /hello.txt
	readable "$img"
	if [ $FUSE = 1 ]; then
		if fuse_rw_mount "$img"; then
			bad "FUSE read-write mount accepted the bad layout"
			fuse_unmount "$img"
		elif grep -qE "$want" "$T/mout"; then
			ok
		else
			bad "FUSE read-write mount refused without saying /$want/: $(cat "$T/mout")"
		fi
		cmp -s "$img" "$orig" && ok || bad "the refused FUSE mount changed the image"
		if fuse_ro_mount "$img"; then
			cmp -s "$MNT/big.bin" "$REF/big.bin" && ok || bad "FUSE read-only: /big.bin differs"
			fuse_unmount "$img"
		else
			bad "FUSE read-only mount failed: $(cat "$T/mout")"
		fi
	fi
	cmp -s "$img" "$orig" && ok || bad "reading changed the image"
}
note "case 4: metadata locations checked against each other"
case4 mk_meta_bbitmap_zero.sh "group 1: block bitmap overlaps the superblock of group 0"
case4 mk_meta_bbitmap_zero_1k.sh "group 1: block bitmap at block 0 .*outside the file system"
case4 mk_meta_bitmaps_same.sh "group 1: (block|inode) bitmap overlaps the (inode|block) bitmap of group 1"
case4 mk_meta_itable_on_gdt.sh "group 2: inode table overlaps the group descriptor blocks of group 0"
case4 mk_meta_itable_on_rgdt.sh "group 2: inode table overlaps the reserved GDT blocks of group 0"
case4 mk_meta_bitmap_past_end.sh "group 1: inode bitmap at block [0-9]+ .*outside the file system"
case4 mk_meta_bitmap_out_of_flex.sh "group 0: inode bitmap at block [0-9]+ .*outside its flex group"
case4 mk_meta_bitmap_out_of_group.sh "group 1: block bitmap at block [0-9]+ .*outside its group"
case4 mk_meta_itable_on_journal.sh "group 2: inode table overlaps the journal"

# With needs_recovery the check comes before the replay writes anything.
CASE="case 4: needs_recovery"
build mk_meta_bitmaps_same.sh "$T/c4.img"
debugfs -w -R "feature needs_recovery" "$T/c4.img" > /dev/null 2>&1 || bad "debugfs feature failed"
cp "$T/c4.img" "$T/c4.orig"
refused "$T/c4.img" "$T/c4.orig" "group 1: (block|inode) bitmap overlaps" mkdir "$T/c4.img" /newdir

# No false alarm: clean layouts stay writable, and e2fsck stays clean.
note "case 4: clean layouts are still writable"
for opts in "-t ext4" "-t ext4 -b 1024" "-t ext4 -O meta_bg,^resize_inode" \
	"-t ext4 -b 1024 -O meta_bg,^resize_inode" "-t ext4 -O sparse_super2" \
	"-t ext4 -E num_backup_sb=0 -O sparse_super2" "-t ext4 -O ^flex_bg" "-t ext4 -G 4 -b 1024" \
	"-t ext4 -O ^sparse_super,^resize_inode" "-t ext4 -O 64bit -b 1024" "-t ext3" "-t ext2" \
	"-t ext4 -O ^has_journal" resized grown-1k shrunk; do
	CASE="case 4: clean $opts"
	img=$T/clean.img
	rm -f "$img"
	: > "$img"
	case $opts in
	resized) mke2fs -q -F -t ext4 "$img" 64M && resize2fs "$img" 700M > /dev/null 2>&1 ;;
	grown-1k) mke2fs -q -F -t ext4 -b 1024 "$img" 16M && resize2fs "$img" 300M > /dev/null 2>&1 ;;
	shrunk) mke2fs -q -F -t ext4 -b 1024 "$img" 300M && resize2fs "$img" 40M > /dev/null 2>&1 ;;
	*) mke2fs -q -F $opts "$img" 300M ;;
	esac || { bad "mke2fs/resize2fs $opts failed"; continue; }
	cli_run mkdir "$img" /x /x/y
	[ $RC = 0 ] && ok || bad "mkdir on a clean image refused: $ERR"
	fsck_clean "$img" > /dev/null && ok || bad "e2fsck -fn not clean after mkdir"
done

echo "hostile_meta: $CHECKS checks passed, $FAILS failed"
[ $FAILS = 0 ]
