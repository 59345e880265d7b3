#!/bin/bash
# cli.sh - every `uext4` subcommand against an image made by mke2fs -d from a
# small tree: ls / ls -l against ls(1), cat against the files (cmp), stat
# against stat(1), getfattr against getfattr(1), info against dumpe2fs -h,
# usage errors (exit 2), missing image or path (exit 1), help texts.
# run-in: release asan-long
set -uo pipefail
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/cli_tree.inc"
setup_traps
need setfattr:attr
need_root "device nodes and chown"
export TZ=UTC LC_ALL=C

T=$(mktemp_dir)
SRC=$T/tree
IMG=$T/cli.img
make_tree "$SRC"
mke2fs -q -F -t ext4 -d "$SRC" "$IMG" 64M || fail "mke2fs"
note "image $IMG from $SRC"

# --- ls: names, per directory
note "ls matches ls -A for every directory"
while IFS= read -r -d '' dir; do
	rel=${dir#"$SRC"}
	want=$(cd "$dir" && ls -A)
	[ -z "$rel" ] && want=$(printf '%s\nlost+found' "$want" | sort)
	got=$("$UEXT4" ls "$IMG" "${rel:-/}") || bad "ls $rel exit $?"
	[ "$got" = "$want" ] || { bad "ls ${rel:-/}"; diff <(echo "$want") <(echo "$got") | head; }
done < <(find "$SRC" -type d -print0)
got=$("$UEXT4" ls -a "$IMG" /dir | head -2 | tr '\n' ' ')
[ "$got" = ". .. " ] || bad "ls -a shows . and .. ($got)"
got=$("$UEXT4" ls "$IMG" dir/sub/block)
[ "$got" = "dir/sub/block" ] || bad "ls of a file lists the file ($got)"

# --- ls -l: mode links uid gid size(or dev) date time name [-> target];
# directory sizes differ between filesystems, so they are left out.
note "ls -l matches ls -ln --time-style=long-iso"
norm_ll() {
	awk '$1 == "total" { next }
	     { if ($1 ~ /^d/) $5 = "-"; $1 = $1; print }'
}
for rel in / /dir /dir/sub /many; do
	want=$(cd "$SRC$rel" && ls -lnA --time-style=long-iso | norm_ll | grep -v ' lost+found$')
	got=$("$UEXT4" ls -l "$IMG" "$rel" | norm_ll | grep -v ' lost+found$')
	[ "$got" = "$want" ] || { bad "ls -l $rel"; diff <(echo "$want") <(echo "$got") | head; }
done
got=$("$UEXT4" ls -l "$IMG" /link | awk '{print $(NF-2), $(NF-1), $NF}')
[ "$got" = "/link -> small.txt" ] || bad "ls -l of a symlink ($got)"

# --- cat
note "cat matches every regular file (cmp)"
n=0
while IFS= read -r -d '' f; do
	rel=${f#"$SRC"}
	"$UEXT4" cat "$IMG" "$rel" | cmp -s - "$f" || bad "cat $rel differs"
	n=$((n + 1))
done < <(find "$SRC" -type f -print0)
echo "   $n files"
"$UEXT4" cat "$IMG" /link | cmp -s - "$SRC/small.txt" || bad "cat follows symlinks"
"$UEXT4" cat "$IMG" dir/big.bin | cmp -s - "$SRC/dir/big.bin" || bad "cat relative path"

# --- stat: fields against stat(1) (mke2fs -d keeps whole seconds only)
note "stat fields match stat(1)"
field() { sed -n "s/.*$1 *\([^ ]*\).*/\1/p" | head -1; }
while IFS= read -r -d '' f; do
	rel=${f#"$SRC"}
	out=$("$UEXT4" stat "$IMG" "$rel") || { bad "stat $rel exit $?"; continue; }
	want=$(stat -c 'size=%s mode=%04a/%A uid=%u gid=%g links=%h type=%F mtime=%Y' "$f")
	[ -d "$f" ] && want=$(echo "$want" | sed 's/size=[0-9]*/size=-/')
	# the image's root also holds lost+found, which mke2fs made later
	[ -z "$rel" ] && rel=/ && want=$(echo "$want" | sed "s/links=[0-9]*/links=$(($(stat -c %h "$f") + 1))/; s/mtime=.*/mtime=/")
	mtime=$(echo "$out" | sed -n 's/^Modify: \(.*\)\.[0-9]* \(.*\)/\1 \2/p')
	size=$(echo "$out" | field 'Size:')
	[ -d "$f" ] && size=-
	got="size=$size mode=$(echo "$out" | sed -n 's/^Access: (\([^)]*\)).*/\1/p')"
	got="$got uid=$(echo "$out" | sed -n 's/.*Uid: ( *\([0-9]*\)).*/\1/p')"
	got="$got gid=$(echo "$out" | sed -n 's/.*Gid: ( *\([0-9]*\)).*/\1/p')"
	got="$got links=$(echo "$out" | field 'Links:')"
	got="$got type=$(echo "$out" | sed -n '2s/.*Blocks: *[0-9]* *//p')"
	got="$got mtime=$(date -d "$mtime" +%s)"
	[ "$rel" = / ] && got=${got%mtime=*}mtime=
	[ "$got" = "$want" ] || bad "stat $rel: got '$got' want '$want'"
	case "$(stat -c %F "$f")" in
	*special*)
		dev=$(echo "$out" | sed -n 's/.*Device type: \([0-9,]*\).*/\1/p')
		[ "$dev" = "$(stat -c '%Hr,%Lr' "$f")" ] || bad "stat $rel device $dev"
		;;
	esac
done < <(find "$SRC" -print0)
"$UEXT4" stat "$IMG" /link | grep -q '^  File: /link -> small.txt$' || bad "stat symlink target"
"$UEXT4" stat "$IMG" /small.txt | grep -Eq '^Access: [0-9-]+ [0-9:]+\.[0-9]{9} \+0000$' ||
	bad "stat prints nanoseconds"

# --- getfattr
note "getfattr -d matches getfattr -d -m -"
for rel in /small.txt /empty /dir /dir/big.bin; do
	want=$(cd "$SRC" && getfattr -d -m - "${rel#/}" 2> /dev/null | sed 1d)
	got=$("$UEXT4" getfattr -d "$IMG" "$rel" | sed 1d)
	[ "$got" = "$want" ] || { bad "getfattr -d $rel"; diff <(echo "$want") <(echo "$got"); }
done
want=$(cd "$SRC" && getfattr -n user.text small.txt 2> /dev/null)
got=$("$UEXT4" getfattr -n user.text "$IMG" small.txt)
[ "$got" = "$want" ] || bad "getfattr -n: '$got' vs '$want'"
got=$("$UEXT4" getfattr "$IMG" /small.txt | sed 1d | tr '\n' ' ')
[ "$got" = "user.bin user.empty user.text  " ] || bad "getfattr names only: '$got'"
"$UEXT4" getfattr -n user.nope "$IMG" /small.txt > /dev/null 2> "$T/err"
rc=$?
[ $rc = 1 ] && grep -q 'uext4 getfattr: /small.txt: user.nope: No such attribute' "$T/err" ||
	bad "getfattr of a missing attribute: exit $rc, $(cat "$T/err")"

# --- info against dumpe2fs -h
note "info matches dumpe2fs -h"
"$UEXT4" info "$IMG" > "$T/info" || bad "info exit $?"
dumpe2fs -h "$IMG" > "$T/dumpe2fs" 2> /dev/null
for key in "Filesystem volume name" "Filesystem UUID" "Filesystem features" "Inode count" \
	   "Block count" "Reserved block count" "Free blocks" "Free inodes" "First block" \
	   "Block size" "Inode size" "Blocks per group" "Inodes per group" \
	   "Flex block group size" "Default directory hash" "Journal inode" "Mount count" \
	   "Maximum mount count" "Filesystem created" "Last write time" "First inode"; do
	want=$(grep "^$key:" "$T/dumpe2fs" | sed 's/^[^:]*:[[:space:]]*//')
	got=$(grep "^$key:" "$T/info" | sed 's/^[^:]*:[[:space:]]*//')
	[ "$got" = "$want" ] || bad "info '$key': '$got' vs dumpe2fs '$want'"
done

# --- usage errors: exit 2 and the usage line on stderr
note "usage errors exit 2 with usage text"
usage_case() {
	"$UEXT4" "$@" > /dev/null 2> "$T/err"
	local rc=$?
	[ $rc = 2 ] && grep -q '^usage: uext4' "$T/err" || bad "uext4 $*: exit $rc, stderr: $(head -2 "$T/err")"
}
usage_case
usage_case bogus
usage_case ls
usage_case ls -z "$IMG"
usage_case stat "$IMG"
usage_case stat "$IMG" /a /b
usage_case cat "$IMG"
usage_case info
usage_case getfattr -n
usage_case mount "$IMG"
usage_case mount -o loop=bogus "$IMG" "$T"

# --- missing image or path: exit 1, "uext4 CMD: PATH: message"
note "missing image or path exits 1 with a clear message"
err_case() {
	local pat=$1
	shift
	"$UEXT4" "$@" > /dev/null 2> "$T/err"
	local rc=$?
	[ $rc = 1 ] && grep -q "$pat" "$T/err" || bad "uext4 $*: exit $rc, stderr: $(cat "$T/err")"
}
err_case "^uext4 ls: $T/none.img: .*No such file" ls "$T/none.img" /
err_case "^uext4 info: $T/none.img: " info "$T/none.img"
err_case "^uext4 cat: /nope: " cat "$IMG" /nope
err_case "^uext4 stat: /dir/nope: " stat "$IMG" /dir/nope
err_case "^uext4 ls: /small.txt/x: " ls "$IMG" /small.txt/x
err_case "^uext4 cat: /dir: .*directory" cat "$IMG" /dir
err_case "^uext4 mount: $T/nodir: " mount "$IMG" "$T/nodir"

# --- help
note "help texts"
for args in "--help" "help" "help ls" "ls --help" "mount --help" "help getfattr"; do
	# shellcheck disable=SC2086
	out=$("$UEXT4" $args) || bad "uext4 $args exit $?"
	grep -q SYNOPSIS <<< "$out" || bad "uext4 $args has no SYNOPSIS"
	grep -q "EXIT STATUS" <<< "$out" || bad "uext4 $args has no EXIT STATUS"
done
"$UEXT4" version | grep -q '^uext4 ' || bad "version"

note "e2fsck -fn"
fsck_clean "$IMG" || bad "e2fsck"
[ $FAILS = 0 ] || fail "$FAILS checks failed"
echo "PASS"
