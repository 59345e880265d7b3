#!/bin/bash
# acl.sh - POSIX ACLs on the uext4 mount, enforced and inherited as by the
# kernel's ext4.
#
# Two fresh images made alike (mke2fs -t ext4): one on a read-write loop
# mount of the kernel's ext4 (the reference), one on `uext4 mount -o
# allow_other` (as root, allow_other is what turns default_permissions on,
# and with it FUSE_CAP_POSIX_ACL: the kernel checks ACLs, the library keeps
# mode and ACLs in step and makes new inodes inherit default ACLs).  The same
# setup runs as root on both: files and directories owned by user A (group
# G1) with named-user and named-group entries that grant or deny read,
# write, exec and search, a mask limiting them, `group::---`, a chmod that
# rewrites the mask, and a directory with a default ACL.  Then:
#   - access table: every (user, operation, path) of the list below runs on
#     both mounts with setpriv as users A (owner), B (named user), C (in the
#     owning group G1), D (in the named group G2), E (other); the outcomes
#     (ok / EACCES) are printed side by side and must be equal line by line,
#     and a few must be what POSIX says (the kernel is right, but a test
#     that only compares would pass if the setup itself went wrong);
#   - inheritance: user A creates files, directories, fifos and symlinks in
#     the directory with a default ACL and in one without, with umask 022
#     and 077 (and root a device node): getfacl and stat of every path equal
#     the kernel's;
#   - setfacl that changes the mode: stat right after shows the new mode
#     (the kernel's attribute cache is not stale);
#   - both unmounted: e2fsck -fn clean; the CLI (`uext4 mkdir -m`, `uext4
#     truncate`, which create through the library with no umask) inherits
#     the default ACL as mkdir(2)/open(2) with those modes and umask 0 do on
#     the kernel; then the kernel mounts the uext4 image and shows the
#     getfacl/stat listing the uext4 mount showed, and the reference's;
#   - a malformed default ACL (tests/images/mk_bad_default_acl.sh): create
#     and mkdir below it are refused (EUCLEAN naming the directory), by the
#     CLI and through the mount, changing nothing but the error record.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
setup_traps
need_root "setpriv to other users, loop mounts"
need_loop "no loop device for the kernel's ext4"
need_fuse
need getfacl:acl setfacl:acl setpriv:util-linux python3

work=$(mktemp_dir)
chmod 755 "$work"
K=$work/k U=$work/u
mkdir -p "$K" "$U"
for i in k u; do
	mke2fs -q -F -t ext4 "$work/$i.img" 64M || fail "mke2fs"
done
kmount "$work/k.img" "$K" rw || fail "kernel mount of k.img"
"$UEXT4" mount -o allow_other "$work/u.img" "$U" > "$work/u.log" 2>&1 || {
	cat "$work/u.log"
	fail "uext4 mount -o allow_other"
}
MOUNTS+=("$U")
opts=$(findmnt -n -o OPTIONS "$U")
case ",$opts," in *,default_permissions,*) ;; *) fail "uext4 mount without default_permissions: $opts" ;; esac
echo "uext4 mount options: $opts"

# Users: numeric ids, no passwd entries needed.
UA=2001 UB=2002 UC=2003 UD=2004 UE=2005 G1=3001 G2=3002
as() { # as USER CMD...: run CMD as user A..E
	local who=$1
	shift
	case $who in
	A) setpriv --reuid=$UA --regid=$G1 --clear-groups "$@" ;;
	B) setpriv --reuid=$UB --regid=4002 --clear-groups "$@" ;;
	C) setpriv --reuid=$UC --regid=4003 --groups=$G1 "$@" ;;
	D) setpriv --reuid=$UD --regid=4004 --groups=$G2 "$@" ;;
	E) setpriv --reuid=$UE --regid=4005 --clear-groups "$@" ;;
	esac
}

# setup ROOT: the same files, modes and ACLs on either mount (as root).
setup() {
	cd "$1" || return 1
	mkdir t inh plain
	chmod 755 t
	chown $UA:$G1 t inh plain
	for f in u_r u_w u_none g_r g_w mask chm gobj gobj_mode; do
		echo data > t/$f
	done
	cp /bin/true t/u_x
	cp /bin/true t/g_x
	chown $UA:$G1 t/*
	chmod 600 t/u_r t/u_w t/g_r t/g_w t/mask t/chm
	chmod 700 t/u_x t/g_x
	chmod 644 t/u_none
	setfacl -m u:$UB:r t/u_r &&
		setfacl -m u:$UB:w t/u_w &&
		setfacl -m u:$UB:x t/u_x &&
		setfacl -m u:$UB:- t/u_none &&
		setfacl -m g:$G2:r t/g_r &&
		setfacl -m g:$G2:w t/g_w &&
		setfacl -m g:$G2:x t/g_x &&
		setfacl -m u:$UB:rw,g:$G2:rw,m::r t/mask &&
		setfacl -m u:$UB:rw,g:$G2:rw t/chm &&
		chmod 640 t/chm &&
		setfacl -m u::rw,g::-,o::r,u:$UB:r t/gobj || return 1
	chmod 604 t/gobj_mode
	mkdir t/d_rx t/d_wx t/d_none
	echo inner > t/d_rx/in
	echo inner > t/d_none/in
	chmod 644 t/d_rx/in t/d_none/in
	chown -R $UA:$G1 t/d_rx t/d_wx t/d_none
	chmod 700 t/d_rx t/d_wx
	chmod 755 t/d_none
	setfacl -m u:$UB:rx t/d_rx &&
		setfacl -m u:$UB:wx t/d_wx &&
		setfacl -m u:$UB:-,g::-,g:$G2:x t/d_none || return 1
	setfacl -d -m u:$UB:rwx,g:$G2:rx,o::- inh || return 1
	setfacl -m u:$UB:rwx,g:$G2:rx inh || return 1
	cd - > /dev/null
}

# The access list: USER OP PATH (r: read, w: open for append, x: exec,
# ls: list a directory, cd: search it, mk: create a file in it).
ACCESS="
A r t/u_r
B r t/u_r
B w t/u_r
E r t/u_r
B w t/u_w
B r t/u_w
B x t/u_x
E x t/u_x
A x t/u_x
B r t/u_none
E r t/u_none
C r t/u_none
D r t/g_r
D w t/g_r
C r t/g_r
D w t/g_w
D r t/g_w
D x t/g_x
E x t/g_x
B r t/mask
B w t/mask
D r t/mask
D w t/mask
B r t/chm
B w t/chm
D r t/chm
D w t/chm
C r t/gobj
B r t/gobj
E r t/gobj
A r t/gobj
C r t/gobj_mode
E r t/gobj_mode
B ls t/d_rx
B cd t/d_rx
E ls t/d_rx
B mk t/d_wx
B ls t/d_wx
E mk t/d_wx
B cd t/d_none
D cd t/d_none
D ls t/d_none
E cd t/d_none
C cd t/d_none
B mk inh
D mk inh
E mk inh
"

# try USER OP PATH (in the mount's root): prints ok, EACCES or the error.
try() {
	local who=$1 op=$2 p=$3 err rc
	case $op in
	r) err=$(as "$who" cat "$p" 2>&1 > /dev/null) ;;
	w) err=$(as "$who" sh -c ': >> "$1"' sh "$p" 2>&1) ;;
	x) err=$(as "$who" "./$p" 2>&1) ;;
	ls) err=$(as "$who" ls "$p" 2>&1 > /dev/null) ;;
	cd) err=$(as "$who" stat "$p/in" 2>&1 > /dev/null) ;;
	mk) err=$(as "$who" sh -c ': > "$1/new_$2"' sh "$p" "$who" 2>&1) ;;
	esac
	rc=$?
	if [ $rc = 0 ]; then
		echo ok
	else
		case $err in
		*"Permission denied"*) echo EACCES ;;
		*) echo "err($rc): ${err##*: }" ;;
		esac
	fi
}

# What POSIX ACL semantics must give for a few lines of the table.
expect() {
	case "$1" in
	"B r t/u_r" | "B w t/u_w" | "B x t/u_x" | "D r t/g_r" | "D w t/g_w" | "D x t/g_x") echo ok ;;
	"B r t/mask" | "D r t/mask" | "B r t/chm" | "B ls t/d_rx" | "B mk t/d_wx") echo ok ;;
	"E r t/u_r" | "B r t/u_none" | "B w t/mask" | "D w t/mask" | "B w t/chm") echo EACCES ;;
	"C r t/gobj" | "C r t/gobj_mode" | "D ls t/d_none" | "E mk inh") echo EACCES ;;
	"E r t/gobj" | "A r t/gobj" | "D cd t/d_none" | "B mk inh") echo ok ;;
	esac
}

# inherit ROOT: user A (and root) make nodes in inh/ and plain/.
inherit() {
	cd "$1" || return 1
	local m
	for m in 022 077; do
		as A sh -c "umask $m && for d in inh plain; do : > \$d/f$m && mkdir \$d/d$m &&
			mkfifo \$d/p$m && ln -s f$m \$d/l$m && mkdir \$d/d$m/sub; done" || return 1
	done
	(umask 022 && mknod inh/c022 c 1 3 && mknod plain/c022 c 1 3) || return 1
	cd - > /dev/null
}

# mode_after_setfacl ROOT: stat, setfacl that changes the mode, stat again.
mode_after_setfacl() {
	cd "$1" || return 1
	echo x > sf1
	echo x > sf2
	chmod 644 sf1 sf2
	stat -c '%a' sf1 sf2 > /dev/null
	setfacl -m u::r,g::r,o::- sf1
	setfacl -m u:$UB:rwx,m::rx sf2
	stat -c '%n %a' sf1 sf2
	cd - > /dev/null
}

# listing ROOT: per path (sorted) one line: stat fields and the ACL
# entries (getfacl, comma-separated; none for symlinks).
listing() {
	(cd "$1" && find . -path ./lost+found -prune -o -print | LC_ALL=C sort | while read -r p; do
		acl=
		[ -L "$p" ] || acl=$(getfacl -n -p -c "$p" 2>&1 | grep -v '^$' | tr '\t\n' ' ,')
		echo "$(stat -c '%n %F %A %u %g' "$p") $acl"
	done)
}

rc=0
setup "$K" || fail "setup on the kernel's mount"
setup "$U" || fail "setup on the uext4 mount"

echo "== access: user op path | kernel | uext4"
printf '%-22s %-10s %s\n' "user op path" kernel uext4
while read -r who op p; do
	[ -n "$who" ] || continue
	k=$(cd "$K" && try "$who" "$op" "$p")
	u=$(cd "$U" && try "$who" "$op" "$p")
	mark=
	[ "$k" = "$u" ] || { mark="  <-- differs"; rc=1; }
	want=$(expect "$who $op $p")
	if [ -n "$want" ] && [ "$k" != "$want" ]; then
		mark="$mark  <-- kernel gave $k, POSIX says $want (setup wrong?)"
		rc=1
	fi
	printf '%-22s %-10s %s%s\n' "$who $op $p" "$k" "$u" "$mark"
done <<< "$ACCESS"

inherit "$K" || fail "creating nodes on the kernel's mount"
inherit "$U" || { echo "FAIL: creating nodes on the uext4 mount"; rc=1; }

mode_after_setfacl "$K" > "$work/sf.k"
mode_after_setfacl "$U" > "$work/sf.u"
echo "== mode right after setfacl (kernel | uext4)"
paste "$work/sf.k" "$work/sf.u"
cmp -s "$work/sf.k" "$work/sf.u" || { echo "FAIL: stat after setfacl differs"; rc=1; }
grep -q '^sf1 440$' "$work/sf.u" && grep -q '^sf2 654$' "$work/sf.u" ||
	{ echo "FAIL: uext4 mount shows a stale mode after setfacl"; rc=1; }

listing "$K" > "$work/list.k"
listing "$U" > "$work/list.u"
if ! diff -u "$work/list.k" "$work/list.u" > "$work/list.diff"; then
	echo "FAIL: getfacl/stat listing differs (kernel -> uext4):"
	cat "$work/list.diff"
	rc=1
else
	echo "ok: getfacl and stat of $(grep -c '^\./' "$work/list.k") paths equal the kernel's"
fi
# Two inheritance cases, as a reader would check them.
(cd "$U" && getfacl -n inh/f022 inh/d077)

"$UEXT4" umount "$U" || { echo "FAIL: uext4 umount"; rc=1; }
kumount "$K" || fail "umount of the kernel's mount"
fsck_clean "$work/k.img" || rc=1
fsck_clean "$work/u.img" || rc=1

# The library through the CLI (no umask: the given mode, masked by the
# default ACL), against mkdir(2)/open(2) with umask 0 on the kernel.
for d in inh plain; do
	"$UEXT4" mkdir -m 755 "$work/u.img" /$d/clidir || { echo "FAIL: uext4 mkdir /$d/clidir"; rc=1; }
	"$UEXT4" truncate -s 0 "$work/u.img" /$d/clifile || { echo "FAIL: uext4 truncate /$d/clifile"; rc=1; }
done
kmount "$work/k.img" "$K" rw || fail "kernel mount of k.img"
python3 - "$K" << 'EOF' || fail "mkdir/open on the kernel's mount"
import os, sys
os.umask(0)
for d in ("inh", "plain"):
    os.mkdir(os.path.join(sys.argv[1], d, "clidir"), 0o755)
    os.close(os.open(os.path.join(sys.argv[1], d, "clifile"), os.O_CREAT | os.O_WRONLY, 0o644))
EOF
listing "$K" > "$work/list2.k"
kumount "$K"
fsck_clean "$work/k.img" || rc=1
fsck_clean "$work/u.img" || rc=1

kmount "$work/u.img" "$U" ro || fail "kernel mount of u.img"
listing "$U" > "$work/list2.u"
kumount "$U"
grep -v '/cli' "$work/list2.u" > "$work/list2.u.old"
if ! diff -u "$work/list.u" "$work/list2.u.old"; then
	echo "FAIL: the kernel shows other ACLs or modes on the uext4 image than the uext4 mount did"
	rc=1
fi
if ! diff -u "$work/list2.k" "$work/list2.u"; then
	echo "FAIL: the CLI's new nodes differ from the kernel's (kernel -> uext4)"
	rc=1
else
	echo "ok: CLI mkdir/truncate inherit as the kernel; the kernel reads the uext4 image as the mount showed it"
fi
# A malformed default ACL (tests/images/mk_bad_default_acl.sh): a create or
# mkdir below it is refused with EUCLEAN naming the directory, by the CLI
# and through the mount, and changes nothing but the superblock's error
# record (bytes past the first 2 KiB, 1 KiB blocks); /dir still takes one.
line=$("$TOP/tests/images/mk_bad_default_acl.sh" "$work/bad.img") || fail "mk_bad_default_acl.sh"
echo "image: $line"
ino=${line#inode }
ino=${ino%%:*}
for cmd in "mkdir IMG /d/x" "truncate -s 0 IMG /d/f"; do
	cp "$work/bad.img" "$work/bad2.img"
	# shellcheck disable=SC2086
	out=$("$UEXT4" ${cmd/IMG/$work/bad2.img} 2>&1) && { echo "FAIL: uext4 $cmd succeeded"; rc=1; }
	case "$out" in
	*"default ACL of inode $ino"*"Structure needs cleaning"* | *"Structure needs cleaning"*"default ACL of inode $ino"*) ;;
	*) echo "FAIL: uext4 $cmd: not the ACL's corruption: $out"; rc=1 ;;
	esac
	n=$(cmp -l "$work/bad.img" "$work/bad2.img" | awk '$1 > 2048' | wc -l)
	[ "$n" = 0 ] || { echo "FAIL: uext4 $cmd: the refusal changed $n bytes past the superblock"; rc=1; }
	"$UEXT4" mkdir "$work/bad2.img" /dir/ok 2> /dev/null || { echo "FAIL: mkdir /dir/ok after the refusal"; rc=1; }
done
echo "ok: a malformed default ACL refuses: $out"
"$UEXT4" mount -o allow_other "$work/bad.img" "$U" > "$work/u.log" 2>&1 || fail "uext4 mount of bad.img"
MOUNTS+=("$U")
for op in "mkdir $U/d/x" "touch $U/d/f" "mkfifo $U/d/p"; do
	# shellcheck disable=SC2086
	out=$(LC_ALL=C $op 2>&1) && { echo "FAIL: $op succeeded on the mount"; rc=1; }
	case "$out" in *"Structure needs cleaning"*) ;; *) echo "FAIL: $op: not EUCLEAN: $out"; rc=1 ;; esac
done
mkdir "$U/dir/ok" || { echo "FAIL: mkdir in the healthy /dir"; rc=1; }
"$UEXT4" umount "$U" || { echo "FAIL: uext4 umount of bad.img"; rc=1; }
e2fsck -fn "$work/bad.img" > "$work/bad.fsck" 2>&1
grep -v -e '^e2fsck' -e '^Pass' -e 'files (' -e 'contains a file system with errors' "$work/bad.fsck" |
	grep -q . && { echo "FAIL: e2fsck -fn finds problems in bad.img:"; cat "$work/bad.fsck"; rc=1; }

[ $rc = 0 ] && echo "ok: ACLs enforced and inherited as by the kernel's ext4"
exit $rc
