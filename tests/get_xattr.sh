#!/bin/bash
# get_xattr.sh - `uext4 get` copies a tree whose xattrs
# the host refuses in part (tests/images/mk_host_refused_xattrs.sh: user.*
# on a symlink, a 70000-byte value, a 260-byte name, the name "user.", an
# 8 KiB value that an ext4 host without ea_inode cannot hold).  For each
# host directory (one in $TMPDIR, a tmpfs, an ext4 loop mount, the last
# two as root):
#   - every file is copied, with its contents and symlink target;
#   - each refused attribute gets one warning on stderr that names the
#     host path and the attribute, and nothing else is reported;
#   - the exit status is 1;
#   - every other attribute is copied with its value;
# and `get -P` (no attributes) copies everything with exit 0.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
setup_traps
need getfattr:attr
export LC_ALL=C

T=$(mktemp_dir)
TMPDIRS+=("$T")   # mktemp_dir ran in a subshell: register it here
IMG=$T/x.img

desc=$("$TOP/tests/images/mk_host_refused_xattrs.sh" "$IMG") || {
	rc=$?
	echo "$desc"
	[ $rc = 77 ] && exit 77
	fail "mk_host_refused_xattrs.sh failed"
}
note "image: $desc"

FILES=". d dir|. f dir/a|. f dir/b|. f dir/c|. d lost+found|. f big70k|. f big8k|. f hello.txt|. l link|. d sub|. d sub/deep|. f sub/deep/f"
want_files() { echo "$FILES" | tr '|' '\n' | sed 's/^\. //' | sort; }
host_files() { (cd "$1" && find . -mindepth 1 -printf '%y %P\n' | sort); }

# Attributes every Linux host takes: path name value.
GOOD="link trusted.onlink ok
big8k user.good 8k
big70k user.small ok
hello.txt user.good hello
hello.txt trusted.good yes
dir/a user.good a
dir/b user.good b
sub/deep/f user.good f"
# Attributes no Linux host takes: path name (errno).
long=user.$(printf 'n%.0s' $(seq 255))
REFUSED="link user.onlink
big70k user.huge
hello.txt $long
dir/a user."

# check_copy DIR RC ERRFILE BIG8K: BIG8K = copied, refused or either.
check_copy() {
	local d=$1 rc=$2 err=$3 big=$4 p n v got lines want_lines f
	[ "$rc" = 1 ] || bad "$d: exit $rc, want 1 (attributes were refused)"
	[ "$(host_files "$d")" = "$(want_files)" ] ||
		{ bad "$d: not every file was copied"; diff <(want_files) <(host_files "$d"); }
	for f in hello.txt dir/a dir/b dir/c big8k big70k sub/deep/f; do
		cmp -s <("$UEXT4" cat "$IMG" "/$f") "$d/$f" || bad "$d/$f: contents differ"
	done
	[ "$(readlink "$d/link")" = hello.txt ] || bad "$d/link: target $(readlink "$d/link")"
	while read -r p n v; do
		got=$(getfattr -h --only-values -n "$n" "$d/$p" 2> /dev/null)
		[ "$got" = "$v" ] || bad "$d/$p: $n is '$got', want '$v'"
	done <<< "$GOOD"
	want_lines=$(echo "$REFUSED" | wc -l)
	while read -r p n; do
		grep -qF -e "$d/$p: attribute $n " -e ": /$p: attribute $n " "$err" ||
			bad "$d/$p: no warning naming attribute ${n:0:20}...: $(head -c 300 "$err")"
	done <<< "$REFUSED"
	if cmp -s <("$UEXT4" getfattr -n user.big "$IMG" /big8k) \
		<(cd "$d" && getfattr -h -n user.big big8k 2> /dev/null | sed 's|^# file: big8k|# file: /big8k|'); then
		v=copied
	elif grep -qF "$d/big8k: attribute user.big " "$err"; then
		v=refused
		want_lines=$((want_lines + 1))
	else
		v=lost
	fi
	[ "$big" = either ] && [ "$v" != lost ] && big=$v
	[ "$v" = "$big" ] || bad "$d/big8k: the 8 KiB value was $v, want $big"
	lines=$(wc -l < "$err")
	[ "$lines" = "$want_lines" ] || { bad "$d: $lines lines on stderr, want $want_lines"; cat "$err"; }
	note "$d: exit $rc, $lines warnings, the 8 KiB value $v"
}

# get_into DIR BIG8K: the whole tree, then one symlink alone, then -P.
get_into() {
	local host=$1 big=$2 rc
	"$UEXT4" get "$IMG" / "$host/r" 2> "$T/err"
	rc=$?
	head -c 2000 "$T/err" | cut -c1-200
	check_copy "$host/r" $rc "$T/err" "$big"

	"$UEXT4" get "$IMG" /link "$host/l" 2> "$T/err1"
	rc=$?
	[ $rc = 1 ] && [ -L "$host/l" ] && grep -qF "$host/l: attribute user.onlink " "$T/err1" &&
		[ "$(getfattr -h --only-values -n trusted.onlink "$host/l" 2> /dev/null)" = ok ] ||
		bad "get /link alone: exit $rc, $(cat "$T/err1")"

	"$UEXT4" get -P "$IMG" / "$host/p" 2> "$T/errp"
	rc=$?
	[ $rc = 0 ] && [ ! -s "$T/errp" ] || bad "get -P: exit $rc, $(cat "$T/errp")"
	[ "$(host_files "$host/p")" = "$(want_files)" ] || bad "get -P: not every file was copied"
}

note "into $T (a directory in ${TMPDIR:-/tmp}: $(stat -f -c %T "$T"))"
mkdir "$T/h"
get_into "$T/h" either

if [ "$(id -u)" = 0 ]; then
	mkdir "$T/tmpfs"
	if mount -t tmpfs -o size=64m tmpfs "$T/tmpfs" 2> /dev/null; then
		MOUNTS+=("$T/tmpfs")
		touch "$T/tmpfs/probe"
		if setfattr -n user.probe -v 1 "$T/tmpfs/probe" 2> /dev/null; then
			rm "$T/tmpfs/probe"
			note "into a tmpfs (it takes the 8 KiB value)"
			get_into "$T/tmpfs" copied
		else
			echo "note: this kernel's tmpfs has no user.* xattrs; tmpfs part skipped"
		fi
	fi
else
	echo "note: not root: tmpfs and ext4 hosts skipped"
fi
if can_loop; then
	mke2fs -q -F -t ext4 -b 4096 -O ^ea_inode "$T/host.img" 64M > /dev/null 2>&1 ||
		fail "mke2fs of the host image"
	mkdir "$T/ext4"
	kmount "$T/host.img" "$T/ext4" rw || fail "loop mount of the host image"
	note "into an ext4 loop mount without ea_inode (it refuses the 8 KiB value: ENOSPC)"
	get_into "$T/ext4" refused
	kumount "$T/ext4"
else
	echo "note: no loop devices: ext4 host skipped"
fi

# The image was only read.
fsck_clean "$IMG" || bad "e2fsck after get"
[ $FAILS = 0 ] || fail "$FAILS failures"
echo "get_xattr.sh: passed"
