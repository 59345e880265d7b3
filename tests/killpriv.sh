#!/bin/bash
# killpriv.sh - setuid, setgid and security.capability are dropped on write,
# truncate, chown, open(O_TRUNC) and fallocate (allocate, punch, zero:
# generic/683-685) through the uext4 mount as on the kernel's ext4.
#
# The mount claims FUSE_HANDLE_KILLPRIV_V2 (fuse/loop.c patches the INIT
# reply, as libfuse 3.14 cannot): the kernel leaves dropping them to the
# server, which reads the kill flags of WRITE, SETATTR and OPEN itself
# (fuse/fuse.c, peek_request).  Three fresh images made alike: the kernel's
# ext4 on a read-write loop mount (the reference), uext4 mounted -o
# allow_other with the writeback cache on, and with it off (-o nowriteback).
# On each, for every case
#     STATE x OP x USER
#   STATE: 4755 (setuid), 2755 (setgid, group-exec), 2745 (setgid without
#          group-exec: kept for a caller in the file's group), x2745 (the
#          same in a group the user is not in: dropped for the user, kept
#          for root), 6755, 0755 with a security.capability, 4755 with one;
#   OP:    write (appending), pwrite (in place), truncate (truncate -s),
#          otrunc (open O_TRUNC), chown (to the owner it has), falloc,
#          punch, zero (fallocate(1) of the first 4 KiB; FALLOCATE has no
#          kill flag: the server decides by the caller; collapse and
#          insert never reach a FUSE server), setfacl (an access ACL:
#          setgid goes for a caller outside the group, generic/375);
#   USER:  a non-root owner (setpriv: no CAP_FSETID), the same owner with
#          the x2745 files' group as a supplementary group, and root,
# root makes a file owned by the user with that mode (and setcap), the user
# runs the operation, and the mode (stat through the mount, right after:
# the kernel's cache must not be stale) and whether a capability is left
# (getcap) are noted.  The tables of the two uext4 mounts must equal the
# kernel's line by line (printed side by side), and a few lines must be
# what the VFS rules say (so that a broken setup cannot pass by comparing).
# Then everything is unmounted, each uext4 image reads back through the
# kernel with the same table, and e2fsck -fn is clean on all three.
# Last, that the kernel really left it to the server (else the tables
# would match anyway): on a foreground -o debug mount, 20 write(2)s to one
# descriptor make one GETXATTR (security.capability), not 20 (the kernel
# marks the inode S_NOSEC only with FUSE_HANDLE_KILLPRIV_V2).
set -uo pipefail
. "$(dirname "$0")/lib.sh"
setup_traps
need_root "setpriv to another user, setcap, loop mounts"
need_loop "no loop device for the kernel's ext4"
need_fuse
need setpriv:util-linux setcap:libcap2-bin getcap:libcap2-bin truncate setfacl:acl

work=$(mktemp_dir)
chmod 755 "$work"
san_logs_in "$work"
UID_A=2101 GID_A=3101
STATES="4755 2755 2745 x2745 6755 c0755 c4755"
OTHER_GID=3999  # a group the user is not in
# (No collapse or insert: the kernel's FUSE client refuses those modes
# itself, EOPNOTSUPP, before any request.)
OPS="write pwrite truncate otrunc chown falloc punch zero setfacl"
USERS="user member root"

as() { # as USER CMD...
	local who=$1
	shift
	case $who in
	user) setpriv --reuid=$UID_A --regid=$GID_A --clear-groups "$@" ;;
	member) setpriv --reuid=$UID_A --regid=$GID_A --groups=$OTHER_GID "$@" ;;
	root) "$@" ;;
	esac
}

run_op() { # run_op OP FILE
	case $1 in
	write) sh -c 'printf x >> "$1"' sh "$2" ;;
	pwrite) printf y | dd of="$2" conv=notrunc status=none ;;
	truncate) truncate -s 1 "$2" ;;
	otrunc) sh -c ': > "$1"' sh "$2" ;;
	chown) chown "$UID_A:$GID_A" "$2" ;;
	falloc) fallocate -o 0 -l 8192 "$2" ;;
	punch) fallocate -p -o 0 -l 4096 "$2" ;;
	zero) fallocate -z -o 0 -l 4096 "$2" ;;
	setfacl) setfacl -m u::rwx,g::rwx,o::rwx "$2" ;;
	esac
}

# cases ROOT: make every case's file, run its operation, print the table.
cases() {
	local root=$1 st op who f mode rc group
	mkdir "$root/t" && chmod 755 "$root/t" || return 1
	for st in $STATES; do
		for op in $OPS; do
			for who in $USERS; do
				f=$root/t/$st.$op.$who
				group=$GID_A
				case $st in x*) group=$OTHER_GID ;; esac
				printf 'hello\n' > "$f" && chown "$UID_A:$group" "$f" || return 1
				mode=${st#[cx]}
				chmod "$mode" "$f" || return 1
				case $st in c*) setcap cap_net_raw+ep "$f" || return 1 ;; esac
				if as "$who" bash -c "$(declare -f run_op); UID_A=$UID_A GID_A=$GID_A run_op $op '$f'" 2> /dev/null; then
					rc=ok
				else
					rc=err
				fi
				echo "$st $op $who: $rc $(stat -c %a "$f") $(getcap "$f" | grep -q cap_net_raw && echo cap || echo nocap)"
			done
		done
	done
}

# listing ROOT: mode and capability of every case file, as the image holds them.
listing() {
	local f
	for f in "$1"/t/*; do
		echo "${f##*/}: $(stat -c %a "$f") $(getcap "$f" | grep -q cap_net_raw && echo cap || echo nocap)"
	done
}


for i in k wb nowb; do
	mke2fs -q -F -t ext4 -I 256 "$work/$i.img" 64M || fail "mke2fs"
	mkdir "$work/$i"
done
kmount "$work/k.img" "$work/k" rw || fail "kernel mount of k.img"
for i in wb nowb; do
	o=allow_other
	[ $i = nowb ] && o=$o,nowriteback
	"$UEXT4" mount -o "$o" "$work/$i.img" "$work/$i" > "$work/$i.log" 2>&1 || {
		cat "$work/$i.log"
		fail "uext4 mount -o $o"
	}
	MOUNTS+=("$work/$i")
done

for i in k wb nowb; do
	cases "$work/$i" > "$work/$i.table" || bad "setting up the cases on $i"
done
n=$(wc -l < "$work/k.table")
nops=$(echo $OPS | wc -w)
[ "$n" = $((7 * nops * 3)) ] || bad "the kernel's table has $n lines, not $((7 * nops * 3))"
echo "case (state op user): kernel | uext4 writeback | uext4 nowriteback   (result mode capability)"
paste -d'|' "$work/k.table" <(cut -d: -f2 "$work/wb.table") <(cut -d: -f2 "$work/nowb.table")
for i in wb nowb; do
	if ! diff -u "$work/k.table" "$work/$i.table" > "$work/$i.diff"; then
		cat "$work/$i.diff"
		bad "uext4 ($i) differs from the kernel's ext4"
	fi
done

# What the rules say, on the kernel's table (and so on ours).
expect() { # expect "CASE" "RESULT": a line of the kernel's table
	grep -qxF "$1: $2" "$work/k.table" || bad "kernel: '$1' is not '$2': $(grep -F "$1:" "$work/k.table")"
}
expect "4755 write user" "ok 755 nocap"          # setuid dropped for a writer without CAP_FSETID
expect "4755 write root" "ok 4755 nocap"         # kept for root
expect "2755 truncate user" "ok 755 nocap"       # setgid with group-exec dropped
expect "2745 write user" "ok 2745 nocap"         # setgid without group-exec kept
expect "x2745 truncate user" "ok 745 nocap"      # ... but not for a caller outside the group
expect "x2745 chown root" "ok 2745 nocap"        # (root may keep it)
expect "x2745 write member" "ok 2745 nocap"      # (and a member of the group)
expect "4755 chown root" "ok 755 nocap"          # chown drops setuid even for root
expect "c0755 write root" "ok 755 nocap"         # a capability goes on any write
expect "c0755 otrunc user" "ok 755 nocap"
expect "4755 punch user" "ok 755 nocap"          # fallocate as a write (generic/684)
expect "2755 zero user" "ok 755 nocap"
expect "4755 punch root" "ok 4755 nocap"

kumount "$work/k"
for i in wb nowb; do
	"$UEXT4" umount "$work/$i" || bad "uext4 umount $i"
done
for i in k wb nowb; do
	fsck_clean "$work/$i.img" || bad "$i.img is not clean"
done
# The images, as the kernel reads them.
for i in k wb nowb; do
	kmount "$work/$i.img" "$work/$i" || { bad "kernel mount of $i.img"; continue; }
	listing "$work/$i" > "$work/$i.list"
	kumount "$work/$i"
done
for i in wb nowb; do
	diff -u "$work/k.list" "$work/$i.list" || bad "the $i image, read by the kernel, differs from the kernel's image"
done
for i in wb nowb; do
	if [ -s "$work/$i.log" ]; then
		cat "$work/$i.log"
		grep -qv "serving FUSE over io_uring" "$work/$i.log" && bad "the $i server printed messages"
	fi
done
note "the kernel leaves dropping privileges to the server"
mkdir "$work/dbg"
mke2fs -q -F -t ext4 "$work/dbg.img" 32M || fail "mke2fs"
"$UEXT4" mount -f -o debug "$work/dbg.img" "$work/dbg" > "$work/dbg.log" 2>&1 &
FUSE_PID=$!
MOUNTS+=("$work/dbg")
for ((i = 0; i < 300; i++)); do
	mountpoint -q "$work/dbg" && break
	kill -0 $FUSE_PID 2> /dev/null || break
	sleep 0.1 # polling for the mount to appear, with a 30 s deadline
done
mountpoint -q "$work/dbg" || { cat "$work/dbg.log"; fail "the -o debug mount did not appear"; }
bash -c 'exec 3>> "$1"; for i in $(seq 20); do printf x >&3; done; exec 3>&-' sh "$work/dbg/f" ||
	bad "writing through the debug mount"
fuse_umount "$work/dbg"
n=$(grep -c "opcode: GETXATTR" "$work/dbg.log")
echo "GETXATTR requests for 20 write(2)s on one descriptor: $n"
[ "$n" -le 1 ] || bad "$n GETXATTRs for 20 writes: FUSE_HANDLE_KILLPRIV_V2 is not in effect"
fsck_clean "$work/dbg.img" || bad "dbg.img is not clean"

san_check "$work"

[ $FAILS = 0 ] || fail "$FAILS check(s) failed"
echo "ok: setuid/setgid/capability after write, truncate, open(O_TRUNC) and chown equal the kernel's ext4 (writeback on and off), images clean"
