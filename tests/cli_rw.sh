#!/bin/bash
# cli_rw.sh - the write commands of `uext4` on a fresh mke2fs image: put (a
# tree with every file type, holes, hard links, modes, owners, ns times,
# xattrs and ACLs) checked with uext4 ls/cat/stat/getfattr and, as root
# with loop devices, against the kernel's view of the image (diff -r, stat,
# getfattr); get back out; mkdir, rm, mv, ln, chmod, chown, setfattr,
# truncate with their error cases (exit 1 and the message) and usage errors
# (exit 2); the image lock (one writer; a read-write mount holds it until
# its write-back is done); e2fsck -fn clean after the big copy and at the end.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/cli_tree.inc"
setup_traps
need setfattr:attr
need_root "device nodes and chown"
export TZ=UTC LC_ALL=C

T=$(mktemp_dir)
SRC=$T/src
IMG=$T/rw.img
ok() { "$UEXT4" "$@" > "$T/out" 2> "$T/err" || bad "uext4 $*: exit $?: $(cat "$T/err")"; }
# err_case EXIT PATTERN ARGS...: exit status and a stderr line matching PATTERN
err_case() {
	local want=$1 pat=$2 rc
	shift 2
	"$UEXT4" "$@" > /dev/null 2> "$T/err"
	rc=$?
	[ $rc = "$want" ] && grep -q -- "$pat" "$T/err" ||
		bad "uext4 $*: exit $rc (want $want), stderr: $(head -3 "$T/err")"
}
usage_case() { err_case 2 '^usage: uext4' "$@"; }
# What get must keep: type and mode, owner, size, links, mtime, device
# (atime is checked on the put side: reading the host copy moves it).
stat_line() { stat -c '%f %u %g %s %h %y %t:%T' "$1"; }
tree_stats() { (cd "$1" && find . -print0 | sort -z | xargs -0 stat -c '%n %f %u %g %s %h %x %y %t:%T'); }
tree_xattrs() {
	(cd "$1" && find . -print0 | sort -z | while IFS= read -r -d '' f; do
		echo "== $f"
		getfattr -h -d -m - --absolute-names "$f" 2> /dev/null | sed 1d
	done)
}
tree_links() { (cd "$1" && find . -type f -links +1 -printf '%n %p\n' | sort); }

# --- the source tree: cli_tree.inc plus what put must also keep
make_tree "$SRC"
mkdir "$SRC/dir/more"
ln "$SRC/dir/sub/block" "$SRC/many/link_to_block"
python3 -c "import socket, sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])" "$SRC/sock" 2> /dev/null
touch -d '2010-05-06 07:08:09.123456789' "$SRC/empty"
touch -a -d '2011-01-01 00:00:00.987654321' "$SRC/small.txt"
chown -h 77:88 "$SRC/link"
chmod 2750 "$SRC/dir/more"
HAVE_ACL=0
if command -v setfacl > /dev/null && setfacl -m u:1000:rwx "$SRC/dir/more" 2> /dev/null; then
	setfacl -d -m u:1000:r-x "$SRC/dir/more"
	HAVE_ACL=1
fi
touch -d '2005-05-05 05:05:05.5' "$SRC/dir/more" "$SRC/dir" "$SRC"
# Reading the source during put may move its atimes: remember them first.
tree_stats "$SRC" > "$T/src.stats"
tree_xattrs "$SRC" > "$T/src.xattrs"
tree_links "$SRC" > "$T/src.links"

mke2fs -q -F -t ext4 -b 4096 "$IMG" 128M || fail "mke2fs"
note "image $IMG, tree $SRC"

# --- put a tree
note "put copies a tree (progress with -v)"
"$UEXT4" put -v "$IMG" "$SRC" / > /dev/null 2> "$T/err" || bad "put tree: exit $?: $(cat "$T/err")"
grep -q '^uext4 put: [0-9]* files, [0-9]* bytes$' "$T/err" || bad "put -v progress: $(cat "$T/err")"
fsck_clean "$IMG" || bad "e2fsck after put"

note "the copy read back through uext4 (ls, cat, stat, getfattr)"
got=$("$UEXT4" ls "$IMG" /src)
want=$(cd "$SRC" && ls -A)
[ "$got" = "$want" ] || { bad "ls /src"; diff <(echo "$want") <(echo "$got") | head; }
while IFS= read -r -d '' f; do
	rel=${f#"$SRC"}
	"$UEXT4" cat "$IMG" "/src$rel" | cmp -s - "$f" || bad "cat /src$rel differs"
done < <(find "$SRC" -type f -print0)
out=$("$UEXT4" stat "$IMG" /src/empty)
grep -q '^Modify: 2010-05-06 07:08:09.123456789 +0000$' <<< "$out" || bad "stat keeps mtime ns: $out"
out=$("$UEXT4" stat "$IMG" /src/small.txt)
grep -q '^Access: 2011-01-01 00:00:00.987654321 +0000$' <<< "$out" || bad "stat keeps atime ns"
grep -q 'Uid: ( 1234)   Gid: ( 5678)' <<< "$out" || bad "owner of small.txt: $out"
grep -q 'Links: 2' <<< "$out" || bad "small.txt has 2 links"
out=$("$UEXT4" stat "$IMG" /src/dir/sub/block)
grep -q 'Access: (4755/-rwsr-xr-x)' <<< "$out" || bad "setuid mode kept: $out"
out=$("$UEXT4" stat "$IMG" /src/chardev)
grep -q 'Device type: 1,7' <<< "$out" || bad "char device numbers: $out"
"$UEXT4" stat "$IMG" /src/link | grep -q 'Uid: (   77)   Gid: (   88)' || bad "symlink owner kept"
want=$(cd "$SRC" && getfattr -d -m - small.txt 2> /dev/null | sed 1d)
got=$("$UEXT4" getfattr -d "$IMG" /src/small.txt | sed 1d)
[ "$got" = "$want" ] || bad "getfattr of the copy: '$got' vs '$want'"
"$UEXT4" getfattr -n user.big "$IMG" /src/empty > /dev/null || bad "600-byte xattr copied"
b1=$("$UEXT4" stat "$IMG" /src/sparse | sed -n 's/.*Blocks: *\([0-9]*\).*/\1/p')
[ "$b1" -le 32 ] || bad "sparse file stayed sparse ($b1 blocks)"

if can_loop; then
	note "the copy as the kernel sees it: diff -r, stat, xattrs, hard links"
	M=$T/kmnt
	mkdir "$M"
	if kmount "$IMG" "$M"; then
		diff -r --no-dereference "$SRC" "$M/src" > "$T/diff" 2>&1 ||
			grep -v 'is a \(fifo\|socket\|character special file\|block special file\) while file' "$T/diff" |
			grep -q . && bad "diff -r: $(head -5 "$T/diff")"
		tree_stats "$M/src" > "$T/img.stats"
		diff "$T/src.stats" "$T/img.stats" > "$T/d" || bad "stat of the copy: $(head -6 "$T/d")"
		tree_xattrs "$M/src" > "$T/img.xattrs"
		diff "$T/src.xattrs" "$T/img.xattrs" > "$T/d" || bad "xattrs of the copy: $(head -6 "$T/d")"
		tree_links "$M/src" > "$T/img.links"
		diff "$T/src.links" "$T/img.links" > /dev/null || bad "hard link counts"
		[ "$(stat -c %i "$M/src/small.txt")" = "$(stat -c %i "$M/src/dir/hardlink")" ] ||
			bad "hard link is one inode"
		[ "$(stat -c %i "$M/src/dir/sub/block")" = "$(stat -c %i "$M/src/many/link_to_block")" ] ||
			bad "hard link across directories is one inode"
		if [ $HAVE_ACL = 1 ]; then
			[ "$(getfacl -n "$SRC/dir/more" 2> /dev/null)" = "$(cd "$M/src/dir" && getfacl -n more 2> /dev/null | sed "s|^# file: more|# file: ${SRC#/}/dir/more|")" ] ||
				bad "ACL of dir/more: $(getfacl -n "$M/src/dir/more" 2>&1)"
		fi
		kumount "$M"
	else
		bad "kernel mount of the image"
	fi
else
	echo "   (no root/loop: kernel comparison skipped)"
fi

# --- put: single files, targets, merging, errors
note "put single files and error cases"
printf 'one\n' > "$T/one"
ok put "$IMG" "$T/one" /src/dir
[ "$("$UEXT4" cat "$IMG" /src/dir/one)" = one ] || bad "put into an existing directory"
ok put "$IMG" "$T/one" /renamed
[ "$("$UEXT4" cat "$IMG" /renamed)" = one ] || bad "put under a new name"
printf 'two\n' > "$T/one"
ok put "$IMG" "$T/one" /renamed
[ "$("$UEXT4" cat "$IMG" /renamed)" = two ] || bad "put replaces an existing file"
mkdir -p "$T/merge/sub"
echo m > "$T/merge/sub/m"
ok put "$IMG" "$T/merge/." /src/dir
[ "$("$UEXT4" cat "$IMG" /src/dir/sub/m)" = m ] || bad "put DIR/. merges into an existing directory"
"$UEXT4" cat "$IMG" /src/dir/sub/block | cmp -s - "$SRC/dir/sub/block" || bad "merge kept old files"
err_case 1 "^uext4 put: $T/nope: No such file or directory" put "$IMG" "$T/nope" /x
err_case 1 "^uext4 put: /no/such/dir: " put "$IMG" "$T/one" /no/such/dir
err_case 1 "^uext4 put: /src/small.txt/x: " put "$IMG" "$T/one" /src/small.txt/x
err_case 1 "^uext4 put: /src/dir/sub/deeper/one/..: Invalid argument" put "$IMG" "$T/one" /src/dir/sub/deeper/one/..
err_case 1 "^uext4 put: $T/none.img: " put "$T/none.img" "$T/one" /

# --- get
note "get copies a tree back out"
ok get "$IMG" /src "$T/back"
diff -r --no-dereference "$SRC" "$T/back" > "$T/diff" 2>&1 ||
	grep -v 'is a \(fifo\|socket\|character special file\|block special file\) while file' "$T/diff" |
	grep -v "^Only in $T/back/dir\(/sub\)*: \(one\|m\)$" | grep -q . && bad "get: diff -r: $(head -5 "$T/diff")"
for f in small.txt empty dir/sub/block link chardev sparse; do
	[ "$(stat_line "$SRC/$f")" = "$(stat_line "$T/back/$f")" ] ||
		bad "get: stat of $f: $(stat_line "$SRC/$f") vs $(stat_line "$T/back/$f")"
done
[ "$(stat -c %i "$T/back/small.txt")" = "$(stat -c %i "$T/back/dir/hardlink")" ] || bad "get: hard link"
[ "$(getfattr -d -m - "$T/back/small.txt" 2> /dev/null | sed 1d)" = \
  "$(getfattr -d -m - "$SRC/small.txt" 2> /dev/null | sed 1d)" ] || bad "get: xattrs"
ok get "$IMG" /renamed "$T"
[ "$(cat "$T/renamed")" = two ] || bad "get a file into a host directory"
err_case 1 "^uext4 get: /nope: " get "$IMG" /nope "$T/x"

# --- mkdir
note "mkdir"
ok mkdir "$IMG" /a /b
ok mkdir -m 700 "$IMG" /c
ok mkdir -p "$IMG" /a/x/y/z /a
"$UEXT4" stat "$IMG" /a/x/y/z | grep -q 'Access: (0755/drwxr-xr-x)' || bad "mkdir -p mode"
"$UEXT4" stat "$IMG" /c | grep -q 'Access: (0700/drwx------)' || bad "mkdir -m 700"
"$UEXT4" stat "$IMG" /a | grep -q 'Links: 3' || bad "mkdir: parent link count"
err_case 1 "^uext4 mkdir: /a: File exists" mkdir "$IMG" /a
err_case 1 "^uext4 mkdir: /nope/x: " mkdir "$IMG" /nope/x
err_case 1 "^uext4 mkdir: /renamed/x: Not a directory" mkdir -p "$IMG" /renamed/x
usage_case mkdir "$IMG"
usage_case mkdir -m 9 "$IMG" /q

# --- ln
note "ln and ln -s"
ok ln "$IMG" /renamed /a/hard
ok ln -s "$IMG" ../renamed /a/soft
ok ln "$IMG" /renamed /b
"$UEXT4" stat "$IMG" /renamed | grep -q 'Links: 3' || bad "ln: link count"
[ "$("$UEXT4" cat "$IMG" /a/soft)" = two ] || bad "ln -s: follows"
[ "$("$UEXT4" cat "$IMG" /b/renamed)" = two ] || bad "ln into a directory"
"$UEXT4" ls -l "$IMG" /a/soft | grep -q -- '-> ../renamed$' || bad "ln -s target text"
err_case 1 "^uext4 ln: /a/hard: File exists" ln "$IMG" /renamed /a/hard
err_case 1 "^uext4 ln: /nope: " ln "$IMG" /nope /a/h2
err_case 1 "^uext4 ln: /a/x2: " ln "$IMG" /a/x /a/x2
usage_case ln "$IMG" /renamed
usage_case ln -q "$IMG" /a /b

# --- mv
note "mv, mv -n, mv -x"
ok mv "$IMG" /a/hard /a/moved
ok mv "$IMG" /a/moved /b
[ "$("$UEXT4" cat "$IMG" /b/moved)" = two ] || bad "mv into a directory"
"$UEXT4" stat "$IMG" /a/hard > /dev/null 2>&1 && bad "mv left the old name"
echo 1 > "$T/f1"
echo 2 > "$T/f2"
ok put "$IMG" "$T/f1" /f1
ok put "$IMG" "$T/f2" /f2
ok mv -x "$IMG" /f1 /f2
[ "$("$UEXT4" cat "$IMG" /f1)$("$UEXT4" cat "$IMG" /f2)" = 21 ] || bad "mv -x exchanges"
err_case 1 "^uext4 mv: /f1 -> /f2: File exists" mv -n "$IMG" /f1 /f2
ok mv "$IMG" /f1 /f2
[ "$("$UEXT4" cat "$IMG" /f2)" = 2 ] || bad "mv replaces"
ok mv "$IMG" /a/x /c/x
"$UEXT4" stat "$IMG" /c | grep -q 'Links: 3' || bad "mv of a directory: new parent links"
"$UEXT4" stat "$IMG" /a | grep -q 'Links: 2' || bad "mv of a directory: old parent links"
err_case 1 "^uext4 mv: /nope: " mv "$IMG" /nope /x
err_case 1 "^uext4 mv: /c -> /c/x/c: " mv "$IMG" /c /c/x/c
usage_case mv "$IMG" /f2
usage_case mv -n -x "$IMG" /f2 /b

# --- chmod, chown
note "chmod and chown"
ok chmod "$IMG" 4711 /f2 /c
"$UEXT4" stat "$IMG" /f2 | grep -q 'Access: (4711/-rws--x--x)' || bad "chmod 4711"
ok chown "$IMG" 12:34 /f2
"$UEXT4" stat "$IMG" /f2 | grep -q 'Uid: (   12)   Gid: (   34)' || bad "chown 12:34"
ok chown "$IMG" :56 /f2
"$UEXT4" stat "$IMG" /f2 | grep -q 'Uid: (   12)   Gid: (   56)' || bad "chown :56"
ok chown -h "$IMG" 9 /a/soft
"$UEXT4" stat "$IMG" /a/soft | grep -q 'Uid: (    9)' || bad "chown -h changes the link"
err_case 1 "^uext4 chmod: /nope: " chmod "$IMG" 644 /nope
err_case 1 "^uext4 chown: /nope: " chown "$IMG" 1 /nope
usage_case chmod "$IMG" 8888 /f2
usage_case chmod "$IMG" u+x /f2
usage_case chown "$IMG" no_such_user_xyz /f2
usage_case chown "$IMG" 1

# --- setfattr
note "setfattr"
ok setfattr "$IMG" -n user.text -v hello /f2
ok setfattr "$IMG" -n user.hex -v 0x00ff10 /f2
ok setfattr "$IMG" -n user.b64 -v 0sAAECAw== /f2
ok setfattr "$IMG" -n user.empty /f2
ok setfattr "$IMG" -n trusted.t -v '"q\"uoted"' /f2
got=$("$UEXT4" getfattr -d "$IMG" /f2 | sed 1d | tr '\n' '|')
[ "$got" = 'trusted.t="q\"uoted"|user.b64=0sAAECAw==|user.empty=""|user.hex=0sAP8Q|user.text="hello"||' ] ||
	bad "setfattr values: $got"
ok setfattr "$IMG" -x user.text /f2
"$UEXT4" getfattr "$IMG" /f2 | grep -q user.text && bad "setfattr -x"
err_case 1 "^uext4 setfattr: /f2: user.text: " setfattr "$IMG" -x user.text /f2
err_case 1 "^uext4 setfattr: /nope: " setfattr "$IMG" -n user.a -v b /nope
usage_case setfattr "$IMG" -n user.a -x user.b /f2
usage_case setfattr "$IMG" /f2
usage_case setfattr "$IMG" -n user.a -v 0xZZ /f2

# --- truncate
note "truncate"
ok truncate -s 10K "$IMG" /f2
[ "$("$UEXT4" cat "$IMG" /f2 | wc -c)" = 10240 ] || bad "truncate -s 10K grows"
[ "$("$UEXT4" cat "$IMG" /f2 | head -c 1)" = 2 ] || bad "truncate keeps the start"
ok truncate -s 1 "$IMG" /f2
[ "$("$UEXT4" cat "$IMG" /f2)" = 2 ] || bad "truncate shrinks"
ok truncate -s 0 "$IMG" /src/dir/big.bin
"$UEXT4" stat "$IMG" /src/dir/big.bin | grep -q 'Size: 0 .*Blocks: 0 ' || bad "truncate -s 0 frees blocks"
ok truncate -s 5M "$IMG" /newfile
"$UEXT4" stat "$IMG" /newfile | grep -q 'Size: 5242880 ' || bad "truncate creates"
ok truncate -c -s 1 "$IMG" /nofile
"$UEXT4" stat "$IMG" /nofile > /dev/null 2>&1 && bad "truncate -c created a file"
err_case 1 "^uext4 truncate: /c: Is a directory" truncate -s 0 "$IMG" /c
usage_case truncate "$IMG" /f2
usage_case truncate -s 1Q "$IMG" /f2

# --- rm
note "rm, rm -r, rm -f"
ok rm "$IMG" /f2 /a/soft /src/link
"$UEXT4" stat "$IMG" /f2 > /dev/null 2>&1 && bad "rm left /f2"
err_case 1 "^uext4 rm: /c: Is a directory" rm "$IMG" /c
err_case 1 "^uext4 rm: /nope: " rm "$IMG" /nope
err_case 1 "^uext4 rm: /: " rm -r "$IMG" /
ok rm -f "$IMG" /nope /no/such
ok rm -r "$IMG" /c /src/many
"$UEXT4" stat "$IMG" /c > /dev/null 2>&1 && bad "rm -r left /c"
"$UEXT4" stat "$IMG" /src/dir/sub/block | grep -q 'Links: 1' || bad "rm -r dropped a hard link"
usage_case rm "$IMG"
usage_case rm -z "$IMG" /a

# --- help and usage
note "help texts of the write commands"
for cmd in put get mkdir rm mv ln chmod chown setfattr truncate; do
	out=$("$UEXT4" "$cmd" --help) || bad "uext4 $cmd --help exit $?"
	for sec in NAME SYNOPSIS DESCRIPTION EXIT\ STATUS EXAMPLES; do
		grep -q "^$sec" <<< "$out" || bad "uext4 $cmd --help has no $sec"
	done
	usage_case "$cmd"
done
usage_case put "$IMG" "$T/one"
usage_case get -q "$IMG" / "$T/x"

# --- one writer at a time; a read-write mount writes back before it lets go
note "a second writer is refused; flock waits for a mount's write-back"
flock "$IMG" "$UEXT4" mkdir "$IMG" /locked > /dev/null 2> "$T/err"
rc=$?
[ $rc = 1 ] && grep -q "^uext4 mkdir: $IMG: in use by another process" "$T/err" ||
	bad "write command on a locked image: exit $rc, $(cat "$T/err")"
if [ -c /dev/fuse ] && command -v fusermount3 > /dev/null; then
	mkdir "$T/fmnt"
	if "$UEXT4" mount "$IMG" "$T/fmnt" 2> "$T/err"; then
		MOUNTS+=("$T/fmnt")
		err_case 1 "in use by another process" mkdir "$IMG" /x
		head -c 3000000 /dev/urandom > "$T/rnd"
		cp "$T/rnd" "$T/fmnt/via_fuse" || bad "write through the mount"
		mkdir "$T/fmnt/fdir" || bad "mkdir through the mount"
		fusermount3 -u "$T/fmnt" || bad "fusermount3 -u"
		flock "$IMG" true
		"$UEXT4" cat "$IMG" /via_fuse | cmp -s - "$T/rnd" || bad "file written through the mount"
		"$UEXT4" stat "$IMG" /fdir | grep -q directory || bad "directory made through the mount"
	else
		bad "read-write mount: $(cat "$T/err")"
	fi
else
	echo "   (no /dev/fuse: mount part skipped)"
fi

note "e2fsck -fn"
fsck_clean "$IMG" || bad "e2fsck at the end"
if can_loop; then
	mkdir -p "$T/kmnt2"
	kmount "$IMG" "$T/kmnt2" && {
		[ "$(cat "$T/kmnt2/b/moved")" = two ] || bad "kernel reads /b/moved"
		[ -d "$T/kmnt2/a/x" ] && bad "kernel still sees /a/x"
		kumount "$T/kmnt2"
	}
fi
[ $FAILS = 0 ] || fail "$FAILS checks failed"
echo "PASS"
