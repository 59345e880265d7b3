#!/bin/bash
# run-in: release asan
# casefold.sh - casefolded directories (mkfs -O casefold, chattr +F) through
# the CLI, with e2fsprogs as the oracle (this kernel has no CONFIG_UNICODE):
#   1. uext4 mkfs -O casefold / -E encoding= / encoding_flags=strict, 1 KiB
#      and 4 KiB blocks: dumpe2fs -h equals mke2fs's, s_encoding and
#      s_encoding_flags the same bytes, e2fsck clean; bad -E values refused.
#   2. On images of mke2fs -O casefold and of uext4 mkfs, 1 KiB and 4 KiB:
#      chattr +F only on an empty directory (and not on a file system
#      without casefold); names found under other cases and in NFC and NFD
#      form and with an ignorable code point; EEXIST under another case
#      (mkdir, ln, mv -n); the name stored is the name given; rename and
#      unlink under another case; subdirectories inherit +F; a name not
#      valid UTF-8 is refused with EINVAL in strict mode (the image
#      unchanged) and taken, matched by its bytes only, in non-strict mode.
#      debugfs lists the stored names; e2fsck -fn clean after each step
#      (it checks casefolded hashes and duplicates under casefold).
#   3. An htree directory of 50,000 casefolded names (10,000 under a
#      sanitizer) with upper case and non-ASCII letters: e2fsck checks every
#      entry's hash (a hash of the unfolded name puts names in leaves
#      e2fsck does not expect); lookups under another case find them.
. "$(dirname "$0")/lib.sh"
setup_traps
need mke2fs:e2fsprogs dumpe2fs:e2fsprogs e2fsck:e2fsprogs debugfs:e2fsprogs python3 bc
need_built "$UEXT4"
export TZ=UTC LC_ALL=C
scratch_on_tmpfs
test_dir
UUID=6f1d0c2e-5b4a-4e39-8d27-1c0b9a887766
SEED=0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d
TIME=1700000000
NBIG=50000
sanitized && NBIG=10000

# check CASE-STEP IMAGE: e2fsck -fn clean, else a failed check.
check() {
	fsck_clean "$2" > "$T/fsck.out" || { cat "$T/fsck.out"; bad "$1: e2fsck -fn not clean"; }
}
# ok DESC CMD...: the CLI must succeed.
ok() {
	local d=$1
	shift
	cli_run "$@"
	[ "$RC" = 0 ] || bad "$d: uext4 $* failed ($RC): $ERR"
}
# refused DESC TEXT CMD...: the CLI must fail with TEXT in its message.
refused() {
	local d=$1 want=$2
	shift 2
	cli_run "$@"
	[ "$RC" != 0 ] && grep -q -- "$want" "$T/err" || bad "$d: uext4 $* gave $RC, not '$want': $ERR"
}
# content IMG PATH WANT: cat PATH gives WANT.
content() {
	cli_run cat "$1" "$2"
	[ "$RC" = 0 ] && [ "$(cat "$T/out")" = "$3" ] || bad "cat $2: '$(head -c 80 "$T/out")' ($RC: $ERR), want '$3'"
}
# names IMG DIR: the names ls shows, one a line, sorted
names() { "$UEXT4" ls "$1" "$2" 2>&1 | LC_ALL=C sort; }

note "1. uext4 mkfs -O casefold against mke2fs"
for bs in 1024 4096; do
	for opts in "-O casefold" "-O casefold -E encoding_flags=strict" "-E encoding=utf8" \
		"-E encoding=utf8-12.1,encoding_flags=strict"; do
		CASE="mkfs -b $bs $opts"
		a=$T/ours.img b=$T/theirs.img
		# -E hash_seed= joins the -E given
		set -- $opts
		o=() e=hash_seed=$SEED
		while [ $# -gt 0 ]; do
			if [ "$1" = -E ]; then e+=",$2"; shift 2; else o+=("$1"); shift; fi
		done
		rm -f "$a" "$b"
		SOURCE_DATE_EPOCH=$TIME "$UEXT4" mkfs -q -b $bs -U $UUID "${o[@]}" -E "$e" "$a" 64M ||
			{ bad "uext4 mkfs failed"; continue; }
		truncate -s 64M "$b"
		E2FSPROGS_FAKE_TIME=$TIME mke2fs -q -F -t ext4 -b $bs -U $UUID \
			-Oorphan_file,metadata_csum_seed "${o[@]}" -E "$e" "$b" > "$T/mke2fs.log" 2>&1 ||
			{ cat "$T/mke2fs.log"; bad "mke2fs failed"; continue; }
		d=$(diff <(dumpe2fs -h "$a" 2>&1) <(dumpe2fs -h "$b" 2>&1) | grep '^[<>]' |
			grep -v -e '^. Lifetime writes:' -e '^. Checksum:  ')
		[ -z "$d" ] || { echo "$d"; bad "dumpe2fs -h differs from mke2fs's"; }
		cmp <(od -An -tx1 -j $((1024 + 0x27C)) -N4 "$a") \
			<(od -An -tx1 -j $((1024 + 0x27C)) -N4 "$b") > /dev/null ||
			bad "s_encoding/s_encoding_flags differ from mke2fs's"
		check "$CASE" "$a"
	done
done
CASE="mkfs refusals"
refused "unknown encoding" "unknown encoding" mkfs -q -E encoding=utf16 "$T/x.img" 8M
refused "unknown flag" "unknown encoding flag" mkfs -q -O casefold -E encoding_flags=loose "$T/x.img" 8M
refused "flags without casefold" "needs casefold" mkfs -q -E encoding_flags=strict "$T/x.img" 8M
CASE=

# make IMG MAKER BS [strict]: a casefold image by mke2fs or uext4 mkfs
make() {
	local img=$1 maker=$2 bs=$3 flags=
	[ "${4:-}" = strict ] && flags=,encoding_flags=strict
	rm -f "$img"
	if [ "$maker" = mke2fs ]; then
		mke2fs -q -F -t ext4 -b "$bs" -O casefold -E "encoding=utf8$flags" "$img" 64M > /dev/null 2>&1
	else
		"$UEXT4" mkfs -q -b "$bs" -O casefold ${flags:+-E ${flags#,}} "$img" 64M
	fi
}

echo hello > "$T/hello"
echo cafe > "$T/cafe"
NFC_LOWER=$'caf\xc3\xa9'        # café, é = U+00E9
NFD_UPPER=$'CAFE\xcc\x81'       # CAFE + U+0301
NFC_UPPER=$'CAF\xc3\x89'        # CAFÉ, É = U+00C9
ZWJ=$'caf\xe2\x80\x8d\xc3\xa9'  # caf + U+200D (ignorable) + é
BAD=$'bad\xffname'              # not UTF-8

# steps IMG LABEL STRICT: the operations, e2fsck after each
steps() {
	local img=$1 strict=$3
	CASE="$2: chattr"
	ok "mkdir" mkdir "$img" /d /plain
	ok "put in plain" put "$img" "$T/hello" /plain/x
	refused "+F on a non-empty directory" "not empty" chattr "$img" +F /plain
	ok "+F" chattr "$img" +F /d
	cli_run lsattr "$img" /d
	grep -q -- '-F-' "$T/out" || bad "lsattr /d shows no F: $(cat "$T/out")"
	check "$CASE" "$img"

	CASE="$2: lookups under other cases"
	ok "put Hello.TXT" put "$img" "$T/hello" /d/Hello.TXT
	content "$img" /d/hello.txt hello
	content "$img" /d/HELLO.TXT hello
	content "$img" /plain/x hello
	cli_run cat "$img" /plain/X
	[ "$RC" != 0 ] || bad "/plain is not casefolded, yet /plain/X is found"
	[ "$(names "$img" /d)" = "Hello.TXT" ] || bad "stored name: $(names "$img" /d), want Hello.TXT"
	ino1=$("$UEXT4" stat "$img" /d/Hello.TXT | sed -n 's/^Inode: *\([0-9]*\).*/\1/p')
	ino2=$("$UEXT4" stat "$img" /d/hELLO.txt | sed -n 's/^Inode: *\([0-9]*\).*/\1/p')
	[ -n "$ino1" ] && [ "$ino1" = "$ino2" ] || bad "stat under two cases: inodes '$ino1' '$ino2'"
	check "$CASE" "$img"

	CASE="$2: EEXIST under another case"
	refused "mkdir HELLO.txt" "File exists" mkdir "$img" /d/HELLO.txt
	refused "ln to hello.TXT" "File exists" ln "$img" /plain/x /d/hello.TXT
	ok "mkdir Sub" mkdir "$img" /d/Sub
	refused "mkdir sub" "File exists" mkdir "$img" /d/sub
	check "$CASE" "$img"

	CASE="$2: normalisation"
	ok "put NFC café" put "$img" "$T/cafe" "/d/$NFC_LOWER"
	content "$img" "/d/$NFD_UPPER" cafe
	content "$img" "/d/$NFC_UPPER" cafe
	content "$img" "/d/$ZWJ" cafe
	refused "mkdir NFD form" "File exists" mkdir "$img" "/d/$NFD_UPPER"
	debugfs -R "ls -p /d" "$img" 2> /dev/null | grep -q "/$NFC_LOWER/" ||
		bad "debugfs does not list the stored name $NFC_LOWER"
	check "$CASE" "$img"

	CASE="$2: inheritance"
	cli_run lsattr "$img" /d/Sub
	grep -q -- '-F-' "$T/out" || bad "new subdirectory without F: $(cat "$T/out")"
	ok "put in Sub" put "$img" "$T/hello" /d/Sub/File
	cli_run lsattr "$img" /d/Sub/File
	grep -q -- '-F-' "$T/out" && bad "a regular file took F: $(cat "$T/out")"
	content "$img" /d/SUB/file hello
	refused "-F on a non-empty directory" "not empty" chattr "$img" -F /d/sub
	check "$CASE" "$img"

	CASE="$2: rename and unlink under another case"
	ok "mv" mv "$img" /d/HELLO.txt /d/World.Txt
	content "$img" /d/world.txt hello
	names "$img" /d | grep -qx World.Txt || bad "renamed entry not stored as World.Txt: $(names "$img" /d)"
	names "$img" /d | grep -qix hello.txt && bad "old name left: $(names "$img" /d)"
	ok "mv into Sub under other case" mv "$img" /d/WORLD.TXT /d/sub/Moved
	content "$img" /d/Sub/MOVED hello
	ok "rm under other case" rm "$img" /d/SUB/MOVED
	cli_run cat "$img" /d/Sub/Moved
	[ "$RC" != 0 ] || bad "removed name still found"
	ok "rm dir under other case" rm -r "$img" /d/SUB
	[ "$(names "$img" /d)" = "$NFC_LOWER" ] || bad "left in /d: $(names "$img" /d)"
	check "$CASE" "$img"

	CASE="$2: invalid UTF-8 ($strict)"
	if [ "$strict" = strict ]; then
		cp "$img" "$T/before.img"
		refused "strict refuses $BAD" "Invalid argument" put "$img" "$T/hello" "/d/$BAD"
		refused "strict refuses mkdir $BAD" "Invalid argument" mkdir "$img" "/d/$BAD"
		cmp -s "$img" "$T/before.img" || bad "a refused name changed the image"
		ok "a non-casefolded directory takes it" put "$img" "$T/hello" "/plain/$BAD"
	else
		ok "non-strict takes $BAD" put "$img" "$T/hello" "/d/$BAD"
		content "$img" "/d/$BAD" hello
		cli_run cat "$img" "/d/BAD"$'\xff'"NAME"
		[ "$RC" != 0 ] || bad "an invalid name matched under another case"
		ok "and its other case as another name" put "$img" "$T/cafe" "/d/BAD"$'\xff'"NAME"
		content "$img" "/d/$BAD" hello
	fi
	check "$CASE" "$img"
	CASE=
}

note "2. operations on casefold images"
# Each maker and mode on each block size, in four runs.
for run in "1024 mke2fs strict" "1024 uext4 loose" "4096 mke2fs loose" "4096 uext4 strict"; do
	set -- $run
	img=$T/cf.img
	make "$img" $2 $1 $3 || { bad "making a $2 $1 image"; continue; }
	steps "$img" "$2 $1-byte $3" $3
done
CASE="+F needs casefold"
"$UEXT4" mkfs -q "$T/plain.img" 16M
ok "mkdir" mkdir "$T/plain.img" /d
refused "+F without casefold" "casefold feature" chattr "$T/plain.img" +F /d
CASE="unknown encoding refused"
make "$T/enc.img" mke2fs 4096
debugfs -w -R "ssv encoding 7" "$T/enc.img" > /dev/null 2>&1
refused "encoding 7" "unknown filename encoding 7" ls "$T/enc.img" /
CASE=

note "3. an htree directory of $NBIG casefolded names"
SRC=$T/src
mkdir -p "$SRC"
# FilNÄX: upper case and a letter that folds to two code points (ä: a + U+0308)
python3 -c 'import os, sys
for i in range(int(sys.argv[2])):
    open(os.path.join(sys.argv[1], "Fil%d\u00c4X" % i), "w").close()' "$SRC" "$NBIG" ||
	fail "making $NBIG files in $SRC"

for bs in 1024 4096; do
	CASE="$NBIG names, $bs-byte blocks"
	rm -f "$T/big.img"
	"$UEXT4" mkfs -q -b $bs -O casefold -N 60000 "$T/big.img" 256M || { bad "mkfs"; continue; }
	ok "mkdir" mkdir "$T/big.img" /big
	ok "+F" chattr "$T/big.img" +F /big
	start=$(date +%s.%N)
	ok "put $NBIG files" put "$T/big.img" "$SRC/." /big
	echo "put of $NBIG names: $(echo "$(date +%s.%N) - $start" | bc) s"
	cli_run lsattr "$T/big.img" /big
	grep -q -- '-I-' "$T/out" || bad "/big is not an htree directory: $(cat "$T/out")"
	n=$("$UEXT4" ls "$T/big.img" /big | wc -l)
	[ "$n" = "$NBIG" ] || bad "/big has $n names, want $NBIG"
	for k in 0 7 4242 $((NBIG - 1)); do
		cli_run stat "$T/big.img" "/big/fIL$k"$'\xc3\xa4'"x"
		[ "$RC" = 0 ] || bad "fIL${k}äx not found: $ERR"
	done
	refused "EEXIST in the htree" "File exists" mkdir "$T/big.img" "/big/FIL7"$'\xc3\xa4'"X"
	ok "rm under another case" rm "$T/big.img" "/big/fil4242"$'\xc3\xa4'"x"
	check "$CASE" "$T/big.img"
done
CASE=

[ "$FAILS" = 0 ] || fail "$FAILS checks failed"
echo PASS
