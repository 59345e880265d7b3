#!/bin/bash
# hostile_damage.sh - damage that writes used to make
# worse, each built by a tests/images/mk_*.sh builder (so tests/sweep.sh
# runs every write command on it too).  Each section checks what the fix
# promises, then the sweep runs on this test's images alone with the
# commands that exposed them (mkdir, put of a 200 KiB file and of a small
# one into the damaged directory, truncate, rm, setfattr,
# chmod, chown): none may leave e2fsck -fn a kind of finding it did not
# have before.
#
#  bad-blocks inode  mk_badblocks_free (inode 1 lists blocks the bitmap
#                    marks free: a put must not take them),
#                    mk_badblocks_shared (inode 1 lists a block of /data:
#                    rm /data must leave it in use, and e2fsck clean),
#                    mk_badblocks_bogus (garbage in inode 1's map: every
#                    write refused naming inode 1, the image unchanged).
#  "." and ".."      mk_dir_dot_empty, mk_dir_dotdot_empty (/d's "." or
#                    ".." has inode 0): no new name may take its place
#                    (refused, naming the entry, and undone: no name left,
#                    no new e2fsck finding).
#  tree block in     mk_extent_in_itable, mk_indirect_in_itable (/bad's
#  the inode table   extent leaf or indirect block is a block of the inode
#                    table): truncate and rm of /bad refused, naming the
#                    inode and the block, the image unchanged.
#  empty values      mk_xattr_empty_value (an ea_inode image whose /f has
#                    xattrs of value size 0): chmod, chown and setfattr
#                    leave e2fsck clean and every value in place.
# test-timeout: 300
set -uo pipefail
. "$(dirname "$0")/lib.sh"
setup_traps
need mke2fs debugfs dumpe2fs e2fsck cmp comm
[ -x "$UEXT4" ] || skip "$UEXT4 not built"
T=$(mktemp_dir)
IMAGES=$TOP/tests/images
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=1"
CHECKS=0
ok() { CHECKS=$((CHECKS + 1)); }
head -c 204800 /dev/urandom > "$T/big"

build() { # build BUILDER OUT: run tests/images/mk_BUILDER.sh, print its line
	local line rc
	line=$("$IMAGES/mk_$1.sh" "$2" 2>&1)
	rc=$?
	[ $rc = 77 ] && skip "$line"
	[ $rc = 0 ] || fail "mk_$1.sh exited $rc: $line"
	echo "   $1: $line"
}

# fsck_kinds IMG: e2fsck -fn's findings with their numbers masked, sorted.
fsck_kinds() {
	e2fsck -fn "$1" 2>&1 | sed -e "s|$1|IMG|g" |
		grep -vE '^(e2fsck [0-9]|Pass [1-5]|IMG: [0-9]+/[0-9]+ files|$)' |
		sed -E 's/[0-9]+/N/g; s/[[:space:]]+$//' | sort -u
}
no_new_kinds() { # no_new_kinds BEFORE-FILE IMG
	local new
	new=$(fsck_kinds "$2" | comm -13 "$1" -)
	[ -z "$new" ] && ok || bad "e2fsck -fn finds new kinds of problem: $new"
}

# ---------------------------------------------------------------- inode 1
# listed IMG: the blocks inode 1 lists (data and indirect), one a line.
listed() {
	debugfs -R "blocks <1>" "$1" 2> /dev/null | tr ' ' '\n' | grep -E '^[0-9]+$' | sort -n
}

note "bad-blocks inode: listed blocks free in the bitmap"
CASE="badblocks_free"
build badblocks_free "$T/free.img"
fsck_kinds "$T/free.img" > "$T/free.kinds"
cli_run put "$T/free.img" "$T/big" /f
[ $RC = 0 ] && ok || bad "put refused on a well-formed bad-blocks list: $ERR"
debugfs -R "blocks /f" "$T/free.img" 2> /dev/null | tr ' ' '\n' | grep -E '^[0-9]+$' | sort -n > "$T/fblocks"
taken=$(comm -12 "$T/fblocks" <(listed "$T/free.img") | tr '\n' ' ')
[ -z "$taken" ] && ok || bad "put gave /f blocks inode 1 lists: $taken"
cmp -s "$T/big" <(debugfs -R "cat /f" "$T/free.img" 2> /dev/null) && ok || bad "/f does not read back"
no_new_kinds "$T/free.kinds" "$T/free.img"

note "bad-blocks inode: a listed block that /data uses too"
CASE="badblocks_shared"
build badblocks_shared "$T/shared.img"
blk=$(listed "$T/shared.img")
cli_run rm "$T/shared.img" /data
[ $RC = 0 ] && ok || bad "rm /data refused: $ERR"
debugfs -R "testb $blk" "$T/shared.img" 2>&1 | grep -q "marked in use" && ok ||
	bad "rm /data freed block $blk, which inode 1 still lists"
fsck_clean "$T/shared.img" > "$T/fsck.out" && ok || bad "e2fsck -fn not clean after rm: $(head -20 "$T/fsck.out")"

note "bad-blocks inode: garbage in its block map"
CASE="badblocks_bogus"
build badblocks_bogus "$T/bogus.img"
cp "$T/bogus.img" "$T/bogus.orig"
for cmd in "mkdir IMG /d" "put IMG $T/big /f" "rm IMG /hello.txt" "chmod IMG 600 /hello.txt"; do
	cp "$T/bogus.orig" "$T/bogus.img"
	# shellcheck disable=SC2086
	cli_run ${cmd/IMG/$T/bogus.img}
	if [ $RC = 0 ]; then
		bad "uext4 $cmd succeeded"
	elif ! echo "$ERR" | grep -q "bad-blocks inode (inode 1) lists block [0-9]* outside the file system"; then
		bad "uext4 $cmd: the message does not name inode 1's bad block: $ERR"
	else
		ok
	fi
	cmp -s "$T/bogus.img" "$T/bogus.orig" && ok || bad "uext4 $cmd changed the image"
done
cli_run cat "$T/bogus.img" /hello.txt
[ $RC = 0 ] && [ "$(cat "$T/out")" = hello ] && ok || bad "reading /hello.txt failed: $ERR"

# ---------------------------------------------------------------- "." and ".."
for which in dot dotdot; do
	note "directory /d with an empty '${which//dot/.}' entry"
	CASE="dir_${which}_empty"
	build "dir_${which}_empty" "$T/dots.img"
	cp "$T/dots.img" "$T/dots.orig"
	fsck_kinds "$T/dots.img" > "$T/dots.kinds"
	for cmd in "put IMG $T/big /d/f" "mkdir IMG /d/n" "ln -s IMG /x /d/l" "mv IMG /hello.txt /d/h"; do
		cp "$T/dots.orig" "$T/dots.img"
		# shellcheck disable=SC2086
		cli_run ${cmd/IMG/$T/dots.img}
		if [ $RC = 0 ]; then
			no_new_kinds "$T/dots.kinds" "$T/dots.img"
		elif echo "$ERR" | grep -q "directory inode [0-9]* block 0: the .* entry"; then
			# Refused after taking an inode: undone in the transaction.
			no_new_kinds "$T/dots.kinds" "$T/dots.img"
			debugfs -R "ls /d" "$T/dots.img" 2> /dev/null | grep -qE ' (f|n|l|h) ' &&
				bad "uext4 $cmd refused but left the name in /d" || ok
		else
			bad "uext4 $cmd: refused without naming the entry: $ERR"
		fi
	done
	cli_run put "$T/dots.img" "$T/big" /elsewhere
	[ $RC = 0 ] && ok || bad "put into / refused: $ERR"
done

# ---------------------------------------------------------------- tree blocks
# same_but_error_record A B: equal but for the superblock's error record
# (s_state, the error fields, their high bytes, the checksum: what an
# errors=continue refusal writes, as tests/sweep.sh allows).
same_but_error_record() {
	cmp -s "$1" "$2" && return 0
	{ cmp -l "$1" "$2" 2> /dev/null || true; } | awk '
	{ o = $1 - 1 - 1024
	  if ((o >= 58 && o <= 59) || (o >= 404 && o <= 511) || (o >= 628 && o <= 635) ||
	      (o >= 1020 && o <= 1023)) next
	  bad = 1; exit }
	END { exit bad }'
}

for kind in extent indirect; do
	note "/bad's $kind tree block lies in the inode table"
	CASE="${kind}_in_itable"
	build "${kind}_in_itable" "$T/tree.img"
	cp "$T/tree.img" "$T/tree.orig"
	fsck_kinds "$T/tree.img" > "$T/tree.kinds"
	# Each changes (or frees) the block: refused, naming inode and block.
	for cmd in "truncate -s 1 IMG /bad" "truncate -s 15000 IMG /bad" "rm IMG /bad"; do
		cp "$T/tree.orig" "$T/tree.img"
		# shellcheck disable=SC2086
		cli_run ${cmd/IMG/$T/tree.img}
		if [ $RC = 0 ]; then
			bad "uext4 $cmd succeeded"
		elif ! echo "$ERR" | grep -qE "of inode [0-9]+: (tree block lies in the inode table of group 0 \(block [0-9]+\)|indirect block [0-9]+ lies in the inode table of group 0)"; then
			bad "uext4 $cmd: the message does not name the inode and the block: $ERR"
		else
			ok
		fi
		same_but_error_record "$T/tree.img" "$T/tree.orig" && ok ||
			bad "uext4 $cmd changed the image (beyond the error record)"
	done
	# Writes elsewhere go on; reads of /bad may serve or refuse, no crash.
	cp "$T/tree.orig" "$T/tree.img"
	cli_run put "$T/tree.img" "$T/big" /f
	[ $RC = 0 ] && ok || bad "put elsewhere refused: $ERR"
	no_new_kinds "$T/tree.kinds" "$T/tree.img"
	cli_run cat "$T/tree.img" /bad
done

# ---------------------------------------------------------------- empty values
note "ea_inode: xattr entries of value size 0"
CASE="xattr_empty_value"
build xattr_empty_value "$T/xe.img"
cp "$T/xe.img" "$T/xe.orig"
for cmd in "chmod IMG 600 /f" "chown IMG 123:456 /f" "setfattr IMG -n trusted.sweep -v 1 /f" \
	"setfattr IMG -n user.empty3 /f" "setfattr IMG -x user.pad /f" "chmod IMG 600 /g"; do
	cp "$T/xe.orig" "$T/xe.img"
	# shellcheck disable=SC2086
	cli_run ${cmd/IMG/$T/xe.img}
	[ $RC = 0 ] && ok || bad "uext4 $cmd refused: $ERR"
	fsck_clean "$T/xe.img" > "$T/fsck.out" && ok || bad "uext4 $cmd: e2fsck -fn not clean: $(head -20 "$T/fsck.out")"
	cli_run getfattr "$T/xe.img" /f
	grep -qx user.empty "$T/out" && grep -qx user.empty2 "$T/out" && grep -qx user.big "$T/out" && ok ||
		bad "uext4 $cmd: /f lost an xattr: $(tr '\n' ' ' < "$T/out")"
done

# ---------------------------------------------------------------- the sweep
SWEEP_IMAGES="mk_badblocks_* mk_dir_dot_empty mk_dir_dotdot_empty mk_extent_in_itable mk_indirect_in_itable mk_xattr_empty_value"
note "tests/sweep.sh on this test's images"
# The columns that exposed these (the full sweep in make check runs all).
SWEEP_NO_CORRUPT=1 SWEEP_IMAGES="$SWEEP_IMAGES" SWEEP_SAMPLE=100 SWEEP_CMDS="md mds put pts tr rm sx chm cho" \
	bash "$TOP/tests/sweep.sh" > "$T/sweep.log" 2>&1
rc=$?
sed -n '/^image /,/^cells:/p' "$T/sweep.log"
if [ $rc = 0 ]; then
	ok
else
	bad "tests/sweep.sh failed (exit $rc)"
	sed -n '/^==== failing/,$p' "$T/sweep.log" | head -60
fi

echo "hostile_damage: $CHECKS checks passed, $FAILS failed"
[ $FAILS = 0 ]
