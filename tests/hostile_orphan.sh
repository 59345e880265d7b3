#!/bin/bash
# hostile_orphan.sh - one stuck orphan must not wedge the
# file system.  Images from tests/images/mk_extent_too_deep.sh (a file
# whose extent tree is deeper than the maximum) and mk_orphan_stuck.sh
# (three good orphans and such a bad one, left by a crash), each with the
# orphan file and with the legacy list:
#  (a) CLI: cat, truncate and rm of the bad file fail naming its inode;
#      the refusals change no block a plain mount+unmount does not; then
#      put, mkdir and recover work, the live files are intact
#  (b) FUSE: a plain unlink of it is refused (EUCLEAN), the name stays;
#      unlinked while open, then closed: its free fails, it is taken off
#      the orphan list (no wedge): after the unmount recover and writes
#      work; e2fsck finds only what an unlinked inode it could not free
#      brings (its zero dtime and bitmap bits)
#  (c) the staged stuck orphan: `uext4 recover` frees the three good ones,
#      exits 1 naming the bad inode, the orphan list/file is empty; a second
#      recover and write commands work; a write command's mount-time cleanup
#      does the same
# Every case compares e2fsck -fn's problems, by kind (numbers stripped),
# before and after: no new kind (but for (b) as said).
# test-timeout: 600
. "$(dirname "$0")/lib.sh"
setup_traps
need mke2fs debugfs e2fsck dumpe2fs cmp
[ -x "$UEXT4" ] || skip "no $UEXT4: build first"
D=$(mktemp_dir)
MK=$TOP/tests/images

kinds() { # IMG: e2fsck -fn's findings, numbers stripped, one per line
	e2fsck -fn "$1" 2>&1 | sed "s|$1|IMG|g" | grep -v -e '^e2fsck [0-9]' -e '^Pass [0-9]' \
		-e 'WARNING: Filesystem still has errors' -e 'non-contiguous' |
		sed -E 's/(differences:).*/\1/; s/[0-9]+/N/g; s/^[[:space:]]+//' | grep -v '^$' | sort -u
}
no_new_kinds() { # BEFORE AFTER WHAT [ALLOWED-REGEX]
	local new
	new=$(comm -13 "$1" "$2")
	[ -n "$4" ] && new=$(echo "$new" | grep -v -E "$4")
	if [ -n "$new" ]; then
		echo "new kinds of e2fsck problems:"; echo "$new"
		fail "$3: e2fsck finds new kinds of problems"
	fi
	echo "ok   $3: no new kind of e2fsck problem ($(wc -l < "$2") kinds, $(wc -l < "$1") before)"
}
# Blocks that differ, but for the journal's (a refused operation may have
# logged a transaction that it then undid: the log is not the file system).
blocks_changed() {
	debugfs -R "stat <8>" "$1" 2> /dev/null | grep -o '[0-9]*-[0-9]*' | tr '-' ' ' > "$D/jranges"
	cmp -l "$1" "$2" | awk -v jr="$D/jranges" '
		BEGIN { while ((getline l < jr) > 0) { split(l, a, " "); lo[++n] = a[1]; hi[n] = a[2] } }
		{ b = int(($1 - 1) / 1024); for (i = 1; i <= n; i++) if (b >= lo[i] && b <= hi[i]) next; print b }' |
		sort -u
}
# IMG-BEFORE IMG-AFTER WHAT: AFTER differs from BEFORE only in blocks that a
# mount and unmount with no operation also write (superblock).
only_mount_writes() {
	cp --sparse=always "$1" "$D/noop.img"
	"$UEXT4" recover -q "$D/noop.img" > /dev/null 2>&1 || fail "$3: no-op recover"
	blocks_changed "$1" "$D/noop.img" > "$D/noop.blocks"
	blocks_changed "$1" "$2" > "$D/op.blocks"
	if [ -n "$(comm -13 "$D/noop.blocks" "$D/op.blocks")" ]; then
		echo "blocks written beyond a plain mount's: $(comm -13 "$D/noop.blocks" "$D/op.blocks" | head | tr '\n' ' ')"
		fail "$3: a refusal changed the image"
	fi
	echo "ok   $3: image unchanged but for what any mount writes ($(wc -l < "$D/op.blocks") blocks)"
}
expect_fail() { # WHAT INO CMD...: fails, and the message names inode INO
	local what=$1 ino=$2
	shift 2
	if "$@" > "$D/out" 2> "$D/err"; then
		cat "$D/out" "$D/err"; fail "$what succeeded"
	fi
	grep -q "inode $ino\b" "$D/err" || { cat "$D/err"; fail "$what: message does not name inode $ino"; }
	echo "ok   $what refused: $(head -c 200 "$D/err")"
}
must() { "$@" > "$D/out" 2>&1 || { cat "$D/out"; fail "$*"; }; }
save_live() { # IMG: the live files' contents
	debugfs -R "cat /keep" "$1" > "$D/keep.want" 2> /dev/null
	debugfs -R "cat /dir/keep2" "$1" > "$D/keep2.want" 2> /dev/null
	[ -s "$D/keep.want" ] && [ -s "$D/keep2.want" ] || fail "cannot read the live files"
}
check_live() { # IMG WHAT
	"$UEXT4" cat "$1" /keep > "$D/keep.got" && cmp -s "$D/keep.got" "$D/keep.want" &&
		"$UEXT4" cat "$1" /dir/keep2 > "$D/keep2.got" && cmp -s "$D/keep2.got" "$D/keep2.want" ||
		fail "$2: live files changed"
	echo "ok   $2: live files intact"
}
orphans_left() { # IMG FMT: entries in the orphan file / length of s_last_orphan
	local ofino
	if [ "$2" = file ]; then
		ofino=$(dumpe2fs -h "$1" 2> /dev/null | sed -n 's/^Orphan file inode: *//p')
		debugfs -R "dump <$ofino> $D/of.bin" "$1" > /dev/null 2>&1
		od -An -tu4 -v -w4 "$D/of.bin" | awk '(NR - 1) % 256 < 254 && $1 != 0' | wc -l
	else
		dumpe2fs -h "$1" 2> /dev/null | sed -n 's/^First orphan inode: *//p' | grep -c .
	fi
}
later_writes_work() { # IMG WHAT
	head -c 7000 /dev/urandom > "$D/new"
	must "$UEXT4" put "$1" "$D/new" /new
	must "$UEXT4" mkdir "$1" /newdir
	must "$UEXT4" recover "$1"
	grep -q "orphans: 0 truncated, 0 freed$" "$D/out" || { cat "$D/out"; fail "$2: recover output"; }
	"$UEXT4" cat "$1" /new | cmp -s - "$D/new" || fail "$2: /new reads back wrong"
	echo "ok   $2: put, mkdir and recover work afterwards"
}

# ---------------------------------------------------------------- (a)
for fmt in file list; do
	note "(a) CLI on a file with a too-deep extent tree, orphans: $fmt"
	img=$D/a-$fmt.img
	line=$("$MK/mk_extent_too_deep.sh" "$img" $fmt) || fail "mk_extent_too_deep.sh"
	echo "$line"
	ino=$(echo "$line" | sed -n 's/^inode \([0-9]*\).*/\1/p')
	kinds "$img" > "$D/k0"
	save_live "$img"
	cp --sparse=always "$img" "$D/pre.img"
	expect_fail "(a) cat" "$ino" "$UEXT4" cat "$img" /bad
	cmp -s "$img" "$D/pre.img" || fail "(a) cat changed the image"
	expect_fail "(a) truncate" "$ino" "$UEXT4" truncate -s 0 "$img" /bad
	only_mount_writes "$D/pre.img" "$img" "(a) $fmt truncate"
	cp --sparse=always "$img" "$D/pre.img"
	expect_fail "(a) rm" "$ino" "$UEXT4" rm "$img" /bad
	only_mount_writes "$D/pre.img" "$img" "(a) $fmt rm"
	"$UEXT4" stat "$img" /bad > /dev/null 2>&1 || fail "(a) /bad vanished after a refused rm"
	[ "$(orphans_left "$img" $fmt)" = 0 ] || fail "(a) an orphan was left"
	later_writes_work "$img" "(a) $fmt"
	check_live "$img" "(a) $fmt"
	kinds "$img" > "$D/k1"
	no_new_kinds "$D/k0" "$D/k1" "(a) $fmt"
done

# ---------------------------------------------------------------- (b)
wait_mount() { # DIR PID
	for ((i = 0; i < 300; i++)); do
		[ "$(findmnt -n -o TARGET "$1" 2> /dev/null)" = "$1" ] && return 0
		kill -0 "$2" 2> /dev/null || return 1
		sleep 0.1 # bounded poll for the mount to appear
	done
	return 1
}
if [ -e /dev/fuse ] && command -v fusermount3 > /dev/null && command -v python3 > /dev/null; then
	for fmt in file list; do
		note "(b) FUSE, orphans: $fmt"
		img=$D/b-$fmt.img
		line=$("$MK/mk_extent_too_deep.sh" "$img" $fmt) || fail "mk_extent_too_deep.sh"
		ino=$(echo "$line" | sed -n 's/^inode \([0-9]*\).*/\1/p')
		kinds "$img" > "$D/k0"
		save_live "$img"
		M=$D/m-$fmt
		mkdir -p "$M"
		"$UEXT4" mount -f "$img" "$M" > "$D/mount.log" 2>&1 &
		pid=$!
		MOUNTS+=("$M")
		wait_mount "$M" $pid || { cat "$D/mount.log"; fail "(b) mount"; }
		if rm "$M/bad" 2> "$D/err"; then fail "(b) plain unlink of /bad succeeded"; fi
		grep -q "Structure needs cleaning" "$D/err" || { cat "$D/err"; fail "(b) unlink error"; }
		[ -e "$M/bad" ] || fail "(b) /bad gone after a refused unlink"
		echo "ok   (b) plain unlink refused: $(cat "$D/err")"
		python3 -c '
import os, sys
p = sys.argv[1]
fd = os.open(p, os.O_RDONLY)
os.unlink(p)
os.close(fd)
' "$M/bad" || fail "(b) unlink while open"
		[ -e "$M/bad" ] && fail "(b) /bad still there after unlink"
		echo "ok   (b) unlinked while open, closed"
		fusermount3 -u "$M" || fail "(b) unmount"
		wait $pid || { cat "$D/mount.log"; fail "(b) server exit status"; }
		[ "$(orphans_left "$img" $fmt)" = 0 ] || fail "(b) inode $ino stayed on the orphan list"
		echo "ok   (b) inode $ino is on no orphan list (state: $(dumpe2fs -h "$img" 2> /dev/null | sed -n 's/^Filesystem state: *//p'))"
		later_writes_work "$img" "(b) $fmt"
		check_live "$img" "(b) $fmt"
		kinds "$img" > "$D/k1"
		no_new_kinds "$D/k0" "$D/k1" "(b) $fmt" \
			'^Deleted inode N has zero dtime|^Inode bitmap differences|^Block bitmap differences|^Fix\? no$'
	done
else
	echo "(b) skipped: needs /dev/fuse, fusermount3 and python3"
fi

# ---------------------------------------------------------------- (c)
for fmt in file list; do
	for how in recover mkdir; do
		note "(c) staged stuck orphan, $fmt, cleaned up by $how"
		img=$D/c-$fmt.img
		line=$("$MK/mk_orphan_stuck.sh" "$img" $fmt) || fail "mk_orphan_stuck.sh"
		echo "$line"
		bad=$(echo "$line" | sed -n 's/.*bad \([0-9]*\).*/\1/p')
		kinds "$img" > "$D/k0"
		save_live "$img"
		free0=$(dumpe2fs -h "$img" 2> /dev/null | sed -n 's/^Free inodes: *//p')
		if [ $how = recover ]; then
			expect_fail "(c) recover" "$bad" "$UEXT4" recover "$img"
			grep -q "orphans: 0 truncated, 3 freed, 1 left for e2fsck (first: inode $bad)" "$D/out" ||
				{ cat "$D/out"; fail "(c) recover output"; }
		elif ! "$UEXT4" mkdir "$img" /first > "$D/out" 2>&1; then
			# errors=remount-ro (the default policy) may turn this
			# mount read-only once cleanup records the error, as
			# the kernel's: only that refusal is allowed.
			grep -q "Read-only file system" "$D/out" || { cat "$D/out"; fail "(c) mkdir"; }
			echo "ok   (c) mkdir refused by the errors policy: $(head -c 160 "$D/out")"
			must "$UEXT4" mkdir "$img" /first
		fi
		free1=$(dumpe2fs -h "$img" 2> /dev/null | sed -n 's/^Free inodes: *//p')
		want=$((free0 + 3)); [ $how = mkdir ] && want=$((free0 + 2))
		[ "$free1" = $want ] || fail "(c) free inodes $free1, want $want (three orphans freed)"
		[ "$(orphans_left "$img" $fmt)" = 0 ] || fail "(c) orphans left on the list"
		echo "ok   (c) three good orphans freed, the list is empty"
		later_writes_work "$img" "(c) $fmt $how"
		check_live "$img" "(c) $fmt $how"
		kinds "$img" > "$D/k1"
		no_new_kinds "$D/k0" "$D/k1" "(c) $fmt $how"
	done
done
echo "hostile_orphan.sh: all passed"
