#!/bin/bash
# chattr.sh - inode flags (lsattr/chattr) and the immutable and append-only
# rules, on the uext4 mount and through the library, against the kernel.
#
# 1. tests/chattr.c builds the same tree on the kernel's ext4 (loop mount),
#    on a uext4 mount (system calls) and through the library, sets +i and +a
#    on files and directories and tries every operation they restrict
#    (open for writing, O_TRUNC, write, fallocate, truncate, unlink, rmdir,
#    rename in/out/over, link, create, mkdir, symlink, chmod, chown, touch,
#    setxattr, removexattr): the errno of each must be the kernel's (table
#    printed), with the mount's writeback cache off (-o nowriteback) and
#    on (the default).  With it on, the kernel's page cache takes writes
#    through a descriptor opened before chattr +i (the kernel's FUSE does not
#    know the flag); the server refuses their write-back, so the data stays
#    as the kernel's, and fsync of that descriptor fails (EPERM): those three
#    rows are the only ones allowed to differ, and only as described.
# 2. Each chattr flag letter, set and cleared on a file and a directory
#    with chattr(1): exit status and lsattr output equal the kernel's
#    (except +j: uext4 does not journal file data, and -e: it does not
#    turn extents into block maps; both EOPNOTSUPP).  chattr sets ctime.
# 3. FS_IOC_FSGETXATTR/FSSETXATTR (xflags) equal the kernel's; lsattr -R
#    (sorted: the kernel lists in hash order) of the uext4 image
#    on the kernel equals lsattr on the uext4 mount, and flags the kernel set read back the same through uext4.
# 4. Who may set flags: a non-owner nobody (EPERM), the owner but not +i/+a
#    (EPERM), on both mounts and through the library.
# 5. +S files and +D directories: a write or a new entry is durable when
#    the call returns (kill -9 of the server, commit timer off).
# 6. The CLI: uext4 lsattr prints what the kernel's lsattr -d does; uext4
#    rm refuses an immutable file until uext4 chattr -i.
# Every image ends e2fsck -fn clean.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
fuse_test chattr lsattr setpriv:util-linux
need_loop
need_helper HELPER chattr
km=$T/k fm=$T/f
mkdir -p "$km" "$fm"

# umount with the server's write-back finished (the image is then ours).
umount_uext4() {
	"$UEXT4" umount "$1" || { fusermount3 -u "$1"; fail "uext4 umount $1"; }
}
mount_uext4() { # IMAGE DIR [OPTS]
	"$UEXT4" mount ${3:+-o "$3"} "$1" "$2" || fail "uext4 mount $1"
	MOUNTS+=("$2")
}
fsck_clean() {
	e2fsck -fn "$1" > "$T/fsck.out" 2>&1 || { cat "$T/fsck.out"; bad "e2fsck -fn $2"; }
}
newimg() { rm -f "$1"; mke2fs -q -t ext4 -F "$1" 64M > /dev/null || fail "mke2fs"; }

# ---------------------------------------------------------------- 1. ops
note "1. operations on immutable and append-only files and directories"
newimg "$T/k.img"
newimg "$T/u.img"
newimg "$T/l.img"
kmount "$T/k.img" "$km" rw || fail "kernel mount"
"$HELPER" sys "$km" > "$T/ops.k" || fail "helper on the kernel mount"
umount "$km"
newimg "$T/n.img"
mount_uext4 "$T/n.img" "$fm" nowriteback
"$HELPER" sys "$fm" > "$T/ops.n" || fail "helper on the uext4 mount (nowriteback)"
umount_uext4 "$fm"
mount_uext4 "$T/u.img" "$fm"
"$HELPER" sys "$fm" > "$T/ops.u" || fail "helper on the uext4 mount"
umount_uext4 "$fm"
"$HELPER" lib "$T/l.img" > "$T/ops.l" || fail "helper through the library"
# writeback_known OP KERNEL MOUNT: a difference the writeback cache makes.
writeback_known() {
	case "$1:$2:$3" in
	i.old_fd_write_end:EPERM:OK | i.old_fd_write_mid:EPERM:OK | i.old_fd_fsync:OK:EPERM | i.old_fd_fsync:OK:EIO) return 0 ;;
	esac
	return 1
}
printf '%-28s %-10s %-10s %-10s %-10s\n' OPERATION KERNEL MOUNT MOUNT-NOWB LIBRARY
while read -r op k && read -r op2 u <&3 && read -r op3 l <&4 && read -r op4 n <&5; do
	[ "$op" = "$op2" ] && [ "$op" = "$op3" ] && [ "$op" = "$op4" ] ||
		fail "helper outputs out of step: $op $op2 $op3 $op4"
	mark=
	if [ "$k" != "$n" ] || [ "$k" != "$l" ]; then
		mark=DIFFERS
		bad "$op: kernel $k, mount (nowriteback) $n, library $l"
	elif [ "$k" != "$u" ]; then
		if writeback_known "$op" "$k" "$u"; then
			mark="(writeback cache: the kernel's page cache took it; the server refused it)"
		else
			mark=DIFFERS
			bad "$op: kernel $k, mount $u"
		fi
	fi
	printf '%-28s %-10s %-10s %-10s %-10s %s\n' "$op" "$k" "$u" "$n" "$l" "$mark"
done < "$T/ops.k" 3< "$T/ops.u" 4< "$T/ops.l" 5< "$T/ops.n"
[ "$(wc -l < "$T/ops.k")" -ge 60 ] || bad "too few operations ($(wc -l < "$T/ops.k"))"
grep -q 'i.unlink EPERM' "$T/ops.u" || bad "immutable file unlinked on the mount"
grep -q 'a.append_write OK' "$T/ops.u" || bad "append refused on the mount"
for x in k u n l; do fsck_clean "$T/$x.img" "ops image $x"; done
# Same contents on all four: the appends landed, the refused writes (also
# the write-back the server refused) changed nothing.
for x in k u n l; do
	kmount "$T/$x.img" "$km" || fail "kernel mount of $x.img"
	(cd "$km" && find . -path ./lost+found -prune -o -type f -print0 | sort -z |
		xargs -0 md5sum) > "$T/sum.$x"
	umount "$km"
done
for x in u n l; do
	diff "$T/sum.k" "$T/sum.$x" || bad "file contents differ between the kernel and $x.img"
done

# ---------------------------------------------------------- 2. each flag
note "2. each chattr flag on a file and a directory, against the kernel"
LETTERS="a A c C d D e E F i j m P s S t T u x"
# letters DIR: set and clear each letter on a fresh file and directory
# of its own (so that one refusal does not carry over), recording chattr's
# exit status and lsattr after each step.
letters() {
	local d=$1 L obj rc
	for L in $LETTERS; do
		echo data > "$d/f$L" && mkdir "$d/d$L" || return 1
		for obj in "f$L" "d$L"; do
			for op in + -; do
				chattr "$op$L" "$d/$obj" 2> /dev/null
				rc=$?
				echo "${obj:0:1} $op$L rc=$rc $(lsattr -d "$d/$obj" | cut -d' ' -f1)"
			done
		done
	done
	# An htree directory (I, which nobody sets): once +i, even +i again is
	# refused (ext4_ioctl_check_immutable compares all other bits).
	mkdir "$d/h" && for ((k = 0; k < 300; k++)); do : > "$d/h/a_long_file_name_$k"; done
	for op in +i +i +d -i; do
		chattr "$op" "$d/h" 2> /dev/null
		rc=$?
		echo "h $op rc=$rc $(lsattr -d "$d/h" | cut -d' ' -f1)"
	done
}
newimg "$T/k2.img"
newimg "$T/u2.img"
kmount "$T/k2.img" "$km" rw || fail "kernel mount"
letters "$km" > "$T/let.k" || fail "letters on the kernel"
umount "$km"
mount_uext4 "$T/u2.img" "$fm"
letters "$fm" > "$T/let.u" || fail "letters on the mount"
umount_uext4 "$fm"
printf '%-12s %-32s %-32s\n' STEP KERNEL UEXT4
while read -r o s k && read -r o2 s2 u <&3; do
	mark=
	if [ "$k" != "$u" ]; then
		case "$s" in
		+j|-j) mark="(uext4 does not journal file data)" ;;
		-e) mark="(uext4 does not turn extents into block maps)" ;;
		*) mark=DIFFERS; bad "chattr $s on $o: kernel '$k', uext4 '$u'" ;;
		esac
	fi
	printf '%-12s %-32s %-32s %s\n' "$o $s" "$k" "$u" "$mark"
done < "$T/let.k" 3< "$T/let.u"
fsck_clean "$T/k2.img" "letters kernel image"
# chattr changes ctime, and the mount shows the new one at once: on a
# directory with the default mount, on a file with the writeback cache off
# (with it on, the kernel's FUSE keeps a regular file's ctime itself and
# takes no ctime from the server: fuse_get_cache_mask()).
ctime_check() { # MOUNTOPTS PATH
	mount_uext4 "$T/u2.img" "$fm" "$1"
	c1=$(stat -c %z "$fm/$2")
	chattr +d "$fm/$2" || bad "chattr +d $2"
	c2=$(stat -c %z "$fm/$2")
	[ "$c1" != "$c2" ] || bad "chattr +d left the ctime of $2 at $c1 (-o $1)"
	echo "ctime of $2 before and after chattr +d (-o $1): $c1 / $c2"
	umount_uext4 "$fm"
}
ctime_check writeback dd
ctime_check nowriteback fd
fsck_clean "$T/u2.img" "letters uext4 image"

# ------------------------------------------- 3. lsattr across the two
note "3. flags set by uext4 read by the kernel, and the other way round"
set_some() { # DIR: a tree with a set of flags, as chattr sets them
	local d=$1
	mkdir -p "$d/t/sub" && for f in i a d A S s u c t x; do echo $f > "$d/t/f_$f"; done &&
		chattr +i "$d/t/f_i" && chattr +a "$d/t/f_a" && chattr +d "$d/t/f_d" &&
		chattr +A "$d/t/f_A" && chattr +S "$d/t/f_S" && chattr +s "$d/t/f_s" &&
		chattr +u "$d/t/f_u" && chattr +c "$d/t/f_c" && chattr +t "$d/t/f_t" &&
		chattr +x "$d/t/f_x" && chattr +D +T +d "$d/t/sub" && echo n > "$d/t/sub/new" &&
		chattr +i "$d/t/sub"
}
newimg "$T/u3.img"
mount_uext4 "$T/u3.img" "$fm"
set_some "$fm" || bad "setting flags on the uext4 mount"
lsattr -R "$fm/t" 2>&1 | sed "s|$fm||" | sort > "$T/ls3.u"
umount_uext4 "$fm"
kmount "$T/u3.img" "$km" || fail "kernel mount of the uext4 image"
lsattr -R "$km/t" 2>&1 | sed "s|$km||" | sort > "$T/ls3.k"
umount "$km"
diff "$T/ls3.k" "$T/ls3.u" > "$T/ls3.diff" || { cat "$T/ls3.diff"; bad "lsattr: kernel vs uext4 on uext4's image"; }
grep -q '^----i.* /t/f_i$' "$T/ls3.k" || bad "the kernel does not see +i set by uext4"
fsck_clean "$T/u3.img" "uext4 flags image"
newimg "$T/k3.img"
kmount "$T/k3.img" "$km" rw || fail "kernel mount"
set_some "$km" || bad "setting flags on the kernel"
lsattr -R "$km/t" 2>&1 | sed "s|$km||" | sort > "$T/ls4.k"
umount "$km"
mount_uext4 "$T/k3.img" "$fm" ro
lsattr -R "$fm/t" 2>&1 | sed "s|$fm||" | sort > "$T/ls4.u"
umount_uext4 "$fm"
diff "$T/ls4.k" "$T/ls4.u" > "$T/ls4.diff" || { cat "$T/ls4.diff"; bad "lsattr: kernel vs uext4 on the kernel's image"; }
diff "$T/ls3.k" "$T/ls4.k" > /dev/null || bad "the kernel's flags differ from uext4's for the same chattr"
cat "$T/ls3.u"
fsck_clean "$T/k3.img" "kernel flags image"
# FS_IOC_FSGETXATTR / FSSETXATTR (xfs_io's lsattr and chattr), which the
# kernel's FUSE passes on as they are: the same xflags on both.
cat > "$T/xattr.py" << 'PY'
import fcntl, os, struct, sys
GET, SET = 0x801c581f, 0x401c5820
def xget(p):
    fd = os.open(p, os.O_RDONLY)
    try:
        return struct.unpack("5I8x", fcntl.ioctl(fd, GET, bytes(28)))
    finally:
        os.close(fd)
top = sys.argv[1]
for n in sorted(os.listdir(top)):
    print(n, "xflags=0x%x extsize=%d nextents=%d projid=%d cowextsize=%d" % xget(os.path.join(top, n)))
p = os.path.join(top, "f_d")
x = xget(p)
fd = os.open(p, os.O_RDONLY)
fcntl.ioctl(fd, SET, struct.pack("5I8x", (x[0] & ~0x80) | 0x40, 0, 0, 0, 0))  # -d +A
os.close(fd)
print("after FSSETXATTR -d +A: f_d xflags=0x%x" % xget(p)[0])
PY
kmount "$T/k3.img" "$km" rw || fail "kernel mount"
python3 "$T/xattr.py" "$km/t" > "$T/xf.k" 2>&1 || bad "FSGETXATTR on the kernel: $(cat "$T/xf.k")"
lsattr -d "$km/t/f_d" | cut -d' ' -f1 >> "$T/xf.k"
umount "$km"
mount_uext4 "$T/u3.img" "$fm"
python3 "$T/xattr.py" "$fm/t" > "$T/xf.u" 2>&1 || bad "FSGETXATTR on the mount: $(cat "$T/xf.u")"
lsattr -d "$fm/t/f_d" | cut -d' ' -f1 >> "$T/xf.u"
umount_uext4 "$fm"
cat "$T/xf.u"
diff "$T/xf.k" "$T/xf.u" || bad "FS_IOC_FSGETXATTR/FSSETXATTR differ from the kernel's"

# ------------------------------------------------------- 4. who may set
note "4. only the owner sets flags, only root +i/+a"
owner_run() { # DIR: lines "STEP RESULT" as uid 65534
	local d=$1 r
	touch "$d/rootfile" "$d/nobodyfile" && chown 65534:65534 "$d/nobodyfile" && chmod 777 "$d" || return 1
	for step in "+d rootfile" "+d nobodyfile" "+i nobodyfile" "+a nobodyfile" "-d nobodyfile"; do
		r=$(setpriv --reuid=65534 --regid=65534 --clear-groups chattr $step 2>&1)
		echo "$step rc=$? ${r##*: }"
	done
	chattr +i "$d/nobodyfile" || return 1
	r=$(setpriv --reuid=65534 --regid=65534 --clear-groups chattr -i nobodyfile 2>&1)
	echo "-i nobodyfile rc=$? ${r##*: }"
	chattr -i "$d/nobodyfile"
	lsattr "$d/rootfile" "$d/nobodyfile" | sed "s|$d||"
}
newimg "$T/k4.img"
newimg "$T/u4.img"
kmount "$T/k4.img" "$km" rw || fail "kernel mount"
(cd "$km" && owner_run "$km") > "$T/own.k" || bad "owner steps on the kernel"
umount "$km"
mount_uext4 "$T/u4.img" "$fm" allow_other
(cd "$fm" && owner_run "$fm") > "$T/own.u" || bad "owner steps on the mount"
umount_uext4 "$fm"
paste -d'|' "$T/own.k" "$T/own.u" | sed 's/|/   |   /'
diff "$T/own.k" "$T/own.u" > /dev/null || bad "owner checks differ from the kernel's"
grep -q '^+d rootfile rc=1 Operation not permitted' "$T/own.u" || bad "nobody set a flag of root's file"
grep -q '^+i nobodyfile rc=1 Operation not permitted' "$T/own.u" || bad "nobody set +i"
"$HELPER" owner "$T/u4.img" > "$T/own.l" || bad "library owner checks"
cat "$T/own.l"
printf '%s\n' "other +d EPERM" "owner +d OK" "owner +i EPERM" "owner +a EPERM" \
	"root +i OK" "owner -i EPERM" "owner -d of +i EPERM" "root -i OK" \
	"root +D on a file EOPNOTSUPP" "root +C (not ext4) EOPNOTSUPP" "root +j EOPNOTSUPP" \
	"flags owned 0x80000" | diff - "$T/own.l" || bad "library owner checks differ"
fsck_clean "$T/k4.img" "owner kernel image"
fsck_clean "$T/u4.img" "owner uext4 image"

# ------------------------------------------------- 5. +S and +D persist
note "5. +S files and +D directories are durable at once (kill -9, no commit timer)"
newimg "$T/u5.img"
mount_uext4 "$T/u5.img" "$fm"
mkdir "$fm/sd" "$fm/plain" && echo base > "$fm/sf" && chattr +S "$fm/sf" && chattr +D "$fm/sd" ||
	bad "setting +S/+D"
umount_uext4 "$fm"
"$UEXT4" mount -f -o commit=3600 "$T/u5.img" "$fm" > "$T/u5.log" 2>&1 &
pid=$!
MOUNTS+=("$fm")
for ((i = 0; i < 300; i++)); do
	[ "$(findmnt -n -o TARGET "$fm" 2> /dev/null)" = "$fm" ] && break
	kill -0 $pid 2> /dev/null || { cat "$T/u5.log"; fail "uext4 mount -f failed"; }
	sleep 0.1 # polling for the mount to appear, with a 30 s deadline
done
printf 'synced data\n' >> "$fm/sf" && touch "$fm/sd/created" && mkdir "$fm/sd/subdir" &&
	touch "$fm/plain/unsynced" || bad "writes on the +S/+D mount"
kill -9 $pid
wait $pid 2> /dev/null
umount -l "$fm" 2> /dev/null
"$UEXT4" recover -q "$T/u5.img" || bad "recover after kill -9"
kmount "$T/u5.img" "$km" || fail "kernel mount after recovery"
[ "$(cat "$km/sf")" = "$(printf 'base\nsynced data')" ] || bad "+S file lost its write: '$(cat "$km/sf")'"
[ -e "$km/sd/created" ] && [ -d "$km/sd/subdir" ] || bad "+D directory lost its new entries"
# Without +S/+D nothing forced a commit: the plain directory's entry is
# normally gone (shown, not asserted: the kernel may have synced it).
echo "plain directory after kill -9: $(ls "$km/plain" | tr '\n' ' ')(no +D: not forced)"
umount "$km"
fsck_clean "$T/u5.img" "sync image"

# ------------------------------------------------------------- 6. CLI
note "6. uext4 lsattr / chattr against the kernel's lsattr"
paths=$(cd "$T" && sed -n 's|^[^ ]* \(/t/[^ ]*\)$|\1|p' ls3.k | sort)
# shellcheck disable=SC2086
"$UEXT4" lsattr "$T/u3.img" $paths > "$T/cli.ls" || bad "uext4 lsattr"
kmount "$T/u3.img" "$km" || fail "kernel mount"
for p in $paths; do lsattr -d "$km$p" | sed "s|$km||"; done > "$T/cli.kls"
umount "$km"
cat "$T/cli.ls"
diff "$T/cli.kls" "$T/cli.ls" || bad "uext4 lsattr differs from the kernel's lsattr -d"
"$UEXT4" rm "$T/u3.img" /t/f_i 2> "$T/cli.err" && bad "uext4 rm removed an immutable file"
grep -q 'Operation not permitted' "$T/cli.err" || bad "uext4 rm of +i: $(cat "$T/cli.err")"
"$UEXT4" chattr "$T/u3.img" -i +d /t/f_i || bad "uext4 chattr -i +d"
"$UEXT4" lsattr "$T/u3.img" /t/f_i | grep -qx -- '------d-------e------- /t/f_i' ||
	bad "uext4 chattr -i +d gave $("$UEXT4" lsattr "$T/u3.img" /t/f_i)"
"$UEXT4" rm "$T/u3.img" /t/f_i || bad "uext4 rm after chattr -i"
"$UEXT4" chattr "$T/u3.img" +D /t/f_a 2> /dev/null && bad "uext4 chattr +D on a file worked"
fsck_clean "$T/u3.img" "CLI image"

san_check
[ "$FAILS" = 0 ] || fail "$FAILS check(s) failed"
echo "chattr: OK"
