#!/bin/bash
# run-in: release asan
# projid.sh - project ids (FS_IOC_FSGETXATTR/FSSETXATTR's fsx_projid,
# lsattr -p, chattr -p) and project inheritance (+P), on 1 KiB and 4 KiB
# blocks, through the library, the CLI and the FUSE mount.
#
# The kernel here cannot mount an image with the project feature (it lacks
# CONFIG_QUOTA: "The kernel was not built with CONFIG_QUOTA and
# CONFIG_QFMT_V2"), so the oracle is fs/ext4's behaviour written out below
# (ext4_fileattr_set, ext4_ioctl_setproject, __ext4_new_inode,
# ext4_link/ext4_rename's EXDEV), debugfs's "Project:" of each inode, and
# e2fsck -fn, clean after every step.  mke2fs -O project does not turn on
# the quota feature (checked): such an image has no quota files.
#
# 1. Library (tests/projid.c ops): set and get; inheritance by files,
#    directories (with +P) and symlinks; EXDEV for rename, link and
#    RENAME_EXCHANGE into a +P directory of another project, also inside
#    it, none out of it or after -P; owner or root only (EPERM for
#    another uid); an immutable inode keeps its id (EPERM), FSSETXATTR
#    clearing +i and setting the id at once is allowed.  Every id the
#    library reports equals debugfs's.
# 2. An inode whose i_extra_isize (4, set by debugfs) lacks i_projid grows
#    to 32; with in-inode xattrs in the way: EOVERFLOW, image unchanged.
# 3. The CLI: chattr +P -p, lsattr -p (lsattr -p's format), uext4 mv into
#    a +P directory of another project fails with EXDEV, image unchanged.
# 4. The mount: chattr -p / +P and lsattr -p (e2fsprogs' own, through
#    FS_IOC_FSSETXATTR/FSGETXATTR); new files inherit; mv into the +P
#    directory falls back to copying (the copy inherits the id), ln fails
#    with EXDEV; chattr -p by another uid (setpriv) fails with EPERM.
# 5. Without the feature: a non-zero id is EOPNOTSUPP (library, CLI,
#    mount), 0 is accepted, lsattr -p shows 0.
# 6. mkfs -d carries project ids and +P from a directory source: a uext4
#    mount of the image of step 4 (its FSGETXATTR) and, where the kernel
#    mounts xfs, an xfs loop mount; uext4 lsattr -p of every path equals the
#    source's lsattr -p.  A pax tarball's SCHILY.fflags=projinherit (as
#    bsdtar writes it) carries +P (tar has no ids).
# 7. mkfs -d carries casefold (+F) to directories of a casefold image: the
#    source is a uext4 mount of a casefold image (no file system of this
#    kernel can hold +F: it lacks CONFIG_UNICODE).
set -uo pipefail
. "$(dirname "$0")/lib.sh"
fuse_test e2fsck:e2fsprogs debugfs:e2fsprogs mke2fs:e2fsprogs lsattr:e2fsprogs \
	chattr:e2fsprogs setpriv:util-linux
need_helper HELPER projid
MNT=$T/mnt
mkdir -p "$MNT"
chmod 755 "$T"  # setpriv's other uid reaches the mount

clean() { fsck_clean "$1" || bad "e2fsck -fn after $2"; }
# proj IMAGE PATH: debugfs's Project: of PATH.
proj() { debugfs -R "stat $2" "$1" 2> /dev/null | sed -n 's/.*Project: *\([0-9]*\).*/\1/p'; }
mkimg() { # IMAGE BS [FEATURES]
	rm -f "$1"
	mke2fs -q -t ext4 -b "$2" ${3:+-O "$3"} -F "$1" 32M > /dev/null || fail "mke2fs $2 $3"
}
expect_eq() { [ "$2" = "$3" ] || bad "$1: got '$2', want '$3'"; }
# uext4 lsattr -p lines "ID FLAGS PATH" as "PATH ID P?" (the P column).
lsattr_ids() {
	awk '{ p = substr($2, 20, 1) == "P" ? " P" : ""; print $3, $1 p }'
}

# The kernel's answers to tests/projid.c ops (fs/ext4: see the helper).
cat > "$T/ops.want" << 'EOF'
mkdir_a OK
mkdir_b OK
create_b_f OK
create_b_g OK
setproj_a_42 OK
chattr_a_+P OK
chattr_b_f_+P EOPNOTSUPP
create_a_f OK
mkdir_a_d OK
symlink_a_l OK
create_a_d_x OK
get/a 42 P
get/a/f 42
get/a/d 42 P
get/a/l 42
get/a/d/x 42
get/b/f 0
rename_b_f_to_a EXDEV
link_b_f_to_a EXDEV
exchange_a_f_b_f EXDEV
rename_a_f_to_b OK
link_a_d_x_to_b OK
rename_b_h_to_a OK
setproj_a_h_7 OK
rename_a_h_in_a EXDEV
setproj_a_h_42 OK
rename_a_h_in_a OK
setproj_b_g_42 OK
rename_b_g_to_a OK
link_a_g_to_a OK
get/a/g 42
chattr_a_-P OK
rename_b_f_to_a OK
get/a/f 0
chattr_a_+P OK
create_o OK
chown_o_1000 OK
nonowner_setproj_o_5 EPERM
owner_setproj_o_5 OK
chattr_o_+i OK
immutable_setproj_o_6 EPERM
get_o OK
fileattr_o_-i_6 OK
get/o 6
setproj_o_0 OK
get/o 0
setproj_b_65536 OK
get/b 65536
EOF

mkimg "$T/q.img" 4096 project
dumpe2fs -h "$T/q.img" 2> /dev/null | grep -q '^Filesystem features:.*quota' &&
	bad "mke2fs -O project turned on quota: this test's images would need quota files"

for BS in 1024 4096; do
	CASE=$BS
	IMG=$T/p$BS.img

	note "$BS: 1. the library"
	mkimg "$IMG" "$BS" project
	"$HELPER" ops "$IMG" > "$T/ops.got" || bad "projid ops failed"
	diff -u "$T/ops.want" "$T/ops.got" || bad "library results differ from the kernel's"
	clean "$IMG" "the library steps"
	# debugfs sees what the library reported.
	for p in /a /a/d /a/d/x /a/g /a/g2 /b /b/x /o /a/f; do
		want=$("$UEXT4" lsattr -p "$IMG" "$p" | awk '{print $1}')
		expect_eq "debugfs Project: of $p" "$(proj "$IMG" "$p")" "$want"
	done
	expect_eq "debugfs Project: of /a" "$(proj "$IMG" /a)" 42
	expect_eq "debugfs Project: of /a/d/x" "$(proj "$IMG" /a/d/x)" 42
	expect_eq "debugfs Project: of the symlink /a/l" "$(proj "$IMG" /a/l)" 42

	note "$BS: 2. i_extra_isize short of i_projid"
	"$UEXT4" mkdir "$IMG" /e /e2 || bad "mkdir /e"
	debugfs -w -R "sif /e extra_isize 4" "$IMG" 2> /dev/null
	debugfs -w -R "sif /e2 extra_isize 4" "$IMG" 2> /dev/null
	debugfs -w -R "ea_set /e2 user.a bbbb" "$IMG" 2> /dev/null
	clean "$IMG" "debugfs set i_extra_isize 4"
	expect_eq "set /e 9 (expands)" "$("$HELPER" set "$IMG" /e 9)" "set OK"
	expect_eq "debugfs Project: of /e" "$(proj "$IMG" /e)" 9
	debugfs -R "stat /e" "$IMG" 2> /dev/null | grep -q 'Size of extra inode fields: 32' ||
		bad "/e's i_extra_isize did not grow to 32"
	cp "$IMG" "$T/before.img"
	expect_eq "set /e2 9 (xattrs in the way)" "$("$HELPER" set "$IMG" /e2 9)" "set EOVERFLOW"
	cmp -s "$IMG" "$T/before.img" || bad "a refused set changed the image"
	clean "$IMG" "growing i_extra_isize"

	note "$BS: 3. the CLI"
	"$UEXT4" mkdir "$IMG" /c /c/in /other || bad "mkdir /c"
	"$UEXT4" chattr "$IMG" +P -p 77 /c || bad "uext4 chattr +P -p 77"
	"$UEXT4" chattr "$IMG" -p 78 /other || bad "uext4 chattr -p 78"
	"$UEXT4" lsattr -p "$IMG" /c /other > "$T/ls" || bad "uext4 lsattr -p"
	printf '   77 --------------e----P-- /c\n   78 --------------e------- /other\n' > "$T/ls.want"
	diff -u "$T/ls.want" "$T/ls" || bad "uext4 lsattr -p"
	expect_eq "debugfs Project: of /c" "$(proj "$IMG" /c)" 77
	cp "$IMG" "$T/before.img"
	cli_run mv "$IMG" /other /c/other
	[ $RC != 0 ] && [[ $ERR == *"cross-device"* ]] || bad "uext4 mv into +P: exit $RC, $ERR"
	cmp -s "$IMG" "$T/before.img" || bad "a refused mv changed the image"
	cli_run chattr "$IMG" -p 77 /other
	[ $RC = 0 ] || bad "chattr -p 77 /other: $ERR"
	cli_run mv "$IMG" /other /c/other
	[ $RC = 0 ] || bad "uext4 mv of a project-77 directory into /c: $ERR"
	clean "$IMG" "the CLI steps"

	note "$BS: 4. the mount"
	fuse_mount_fg "$IMG" "$MNT" allow_other || fail "mount"
	mkdir "$MNT/m" "$MNT/n" && echo x > "$MNT/n/f" && echo y > "$MNT/n/g" ||
		bad "mkdir on the mount"
	chattr +P -p 123 "$MNT/m" || bad "chattr +P -p 123 on the mount"
	echo z > "$MNT/m/new" && mkdir "$MNT/m/sub" || bad "create in m"
	lsattr -p -d "$MNT/m" "$MNT/m/new" "$MNT/m/sub" "$MNT/n/f" | awk '{print $1, $2}' > "$T/ls"
	printf '%s\n' '123 --------------e----P--' '123 --------------e-------' \
		'123 --------------e----P--' '0 --------------e-------' > "$T/ls.want"
	diff -u "$T/ls.want" "$T/ls" || bad "lsattr -p on the mount"
	r=$(ln "$MNT/n/g" "$MNT/m/g" 2>&1) && bad "ln into +P of another project succeeded"
	[[ $r == *"cross-device"* ]] || bad "ln into +P: $r"
	mv "$MNT/n/f" "$MNT/m/f" || bad "mv into +P (copy fallback)"
	[ ! -e "$MNT/n/f" ] && [ "$(cat "$MNT/m/f")" = x ] || bad "mv's copy"
	expect_eq "mv's copy's id" "$(lsattr -p "$MNT/m/f" | awk '{print $1}')" 123
	r=$(setpriv --reuid=65534 --regid=65534 --clear-groups chattr -p 5 "$MNT/n/g" 2>&1) &&
		bad "chattr -p by another uid succeeded"
	[[ $r == *"not permitted"* ]] || bad "chattr -p by another uid: $r"
	chown 65534:65534 "$MNT/n/g" || bad "chown"
	setpriv --reuid=65534 --regid=65534 --clear-groups chattr -p 5 "$MNT/n/g" ||
		bad "chattr -p by the owner"
	expect_eq "owner's id" "$(lsattr -p "$MNT/n/g" | awk '{print $1}')" 5
	umount_uext4 "$MNT"
	expect_eq "debugfs Project: of /m/f" "$(proj "$IMG" /m/f)" 123
	expect_eq "debugfs Project: of /m/sub" "$(proj "$IMG" /m/sub)" 123
	expect_eq "debugfs Project: of /n/g" "$(proj "$IMG" /n/g)" 5
	clean "$IMG" "the mount steps"

	note "$BS: 5. without the project feature"
	N=$T/n$BS.img
	mkimg "$N" "$BS"
	"$UEXT4" mkdir "$N" /d || bad "mkdir"
	cp "$N" "$T/before.img"
	expect_eq "library set 5" "$("$HELPER" set "$N" /d 5)" "set EOPNOTSUPP"
	cli_run chattr "$N" -p 5 /d
	[ $RC != 0 ] && [[ $ERR == *"not supported"* ]] || bad "uext4 chattr -p 5: exit $RC, $ERR"
	cmp -s "$N" "$T/before.img" || bad "refused sets changed the image"
	expect_eq "library set 0" "$("$HELPER" set "$N" /d 0)" "set OK"
	fuse_mount_fg "$N" "$MNT" || fail "mount"
	r=$(chattr -p 5 "$MNT/d" 2>&1) && bad "chattr -p 5 on the mount succeeded"
	[[ $r == *"not supported"* ]] || bad "chattr -p 5 on the mount: $r"
	expect_eq "lsattr -p" "$(lsattr -p -d "$MNT/d" | awk '{print $1}')" 0
	umount_uext4 "$MNT"
	clean "$N" "refusals without the feature"

	note "$BS: 6. mkfs -d from a uext4 mount of the project image"
	fuse_mount_fg "$IMG" "$MNT" ro || fail "mount ro"
	(cd "$MNT" && find . -path ./lost+found -prune -o -print | sed 's|^\.||; s|^$|/|' |
		grep -v '^/$' | sort) > "$T/paths"
	while read -r p; do
		[ -L "$MNT$p" ] && continue   # lsattr cannot open a symlink
		l=$(lsattr -p -d "$MNT$p") || continue
		echo "$p $(awk '{ p = substr($2, 20, 1) == "P" ? " P" : ""; print $1 p }' <<< "$l")"
	done < "$T/paths" > "$T/src.ids"
	"$UEXT4" mkfs -q -O project -b "$BS" -d "$MNT" "$T/d$BS.img" 32M || bad "mkfs -d"
	umount_uext4 "$MNT"
	"$UEXT4" lsattr -p "$T/d$BS.img" $(awk '{print $1}' "$T/src.ids") | lsattr_ids > "$T/dst.ids"
	diff -u "$T/src.ids" "$T/dst.ids" || bad "mkfs -d: ids and +P differ from the source"
	expect_eq "mkfs -d: symlink /a/l" "$(proj "$T/d$BS.img" /a/l)" 42
	grep -q '^/m/sub 123 P$' "$T/dst.ids" || bad "mkfs -d: /m/sub"
	clean "$T/d$BS.img" "mkfs -d from a project image"

	note "$BS: 7. mkfs -d carries +F to a casefold image"
	C=$T/c$BS.img
	"$UEXT4" mkfs -q -O casefold -b "$BS" "$C" 32M || fail "mkfs -O casefold"
	"$UEXT4" mkdir "$C" /cf /plain || bad "mkdir"
	"$UEXT4" chattr "$C" +F /cf || bad "chattr +F"
	"$UEXT4" chattr "$C" +F /plain || bad "chattr +F /plain"
	"$UEXT4" chattr "$C" -F /plain || bad "chattr -F /plain"
	"$UEXT4" mkdir "$C" /cf/sub2 /plain/q || bad "mkdir in +F"
	echo a > "$T/a"
	"$UEXT4" put "$C" "$T/a" /cf/Name || bad "put"
	fuse_mount_fg "$C" "$MNT" ro || fail "mount ro"
	lsattr -d "$MNT/cf" "$MNT/cf/sub2" "$MNT/plain" | awk '{print $1}' > "$T/cf.src"
	"$UEXT4" mkfs -q -O casefold -b "$BS" -d "$MNT" "$T/cd$BS.img" 32M || bad "mkfs -d casefold"
	umount_uext4 "$MNT"
	"$UEXT4" lsattr "$T/cd$BS.img" /cf /cf/sub2 /plain | awk '{print $1}' > "$T/cf.dst"
	diff -u "$T/cf.src" "$T/cf.dst" || bad "mkfs -d: +F differs from the source"
	grep -q F "$T/cf.dst" || bad "no +F carried"
	"$UEXT4" cat "$T/cd$BS.img" /cf/NAME > /dev/null 2>&1 || bad "/cf/NAME not found in the copy"
	clean "$T/cd$BS.img" "mkfs -d casefold"
	# Into an image without casefold the source's +F is not carried.
	fuse_mount_fg "$C" "$MNT" ro || fail "mount ro"
	"$UEXT4" mkfs -q -b "$BS" -d "$MNT" "$T/nc$BS.img" 32M || bad "mkfs -d without casefold"
	umount_uext4 "$MNT"
	"$UEXT4" lsattr "$T/nc$BS.img" /cf | grep -q '^[^ ]*F' && bad "+F on a non-casefold image"
	clean "$T/nc$BS.img" "mkfs -d of a casefold source without casefold"
done
CASE=

note "mkfs -d from an xfs source"
X=$T/x.img
if ! can_loop || ! command -v mkfs.xfs > /dev/null || ! grep -qw xfs /proc/filesystems; then
	echo "SKIP (part): no xfs source: needs root, a loop device, mkfs.xfs and xfs in the kernel"
else
	truncate -s 300M "$X"
	mkfs.xfs -q "$X" || fail "mkfs.xfs"
	XM=$T/xm
	mkdir -p "$XM"
	mount -o loop "$X" "$XM" || fail "mount xfs"
	MOUNTS+=("$XM")
	S=$XM/src
	mkdir -p "$S/a/sub" "$S/b" && echo x > "$S/a/f0" || fail "xfs tree"
	chattr +P -p 42 "$S/a" || fail "chattr on xfs"
	echo y > "$S/a/f" && mkdir "$S/a/d" && ln -s f "$S/a/l" && echo z > "$S/b/g" &&
		head -c 100000 /dev/urandom > "$S/a/big" || fail "xfs tree"
	chattr -p 7 "$S/b" && chattr -p 9 "$S/b/g" || fail "chattr -p on xfs"
	(cd "$S" && find . ! -type l | sed 's|^\.||' | grep . | sort) > "$T/xpaths"
	while read -r p; do
		echo "$p $(lsattr -p -d "$S$p" | awk '{ p = substr($2, 20, 1) == "P" ? " P" : ""; print $1 p }')"
	done < "$T/xpaths" > "$T/xsrc.ids"
	for BS in 1024 4096; do
		rm -f "$T/xd.img"
		"$UEXT4" mkfs -q -O project -b "$BS" -d "$S" "$T/xd.img" 32M || bad "mkfs -d $BS"
		"$UEXT4" lsattr -p "$T/xd.img" $(cat "$T/xpaths") | lsattr_ids > "$T/xdst.ids"
		diff -u "$T/xsrc.ids" "$T/xdst.ids" || bad "mkfs -d from xfs ($BS)"
		expect_eq "symlink in +P" "$(proj "$T/xd.img" /a/l)" 42
		clean "$T/xd.img" "mkfs -d from xfs ($BS)"
	done
	# A pax tarball whose directory carries SCHILY.fflags=projinherit, as
	# bsdtar writes the flag (tar has no project ids).
	python3 - "$T/x.tar" << 'PY' || bad "python3 tarfile"
import io, sys, tarfile
with tarfile.open(sys.argv[1], "w", format=tarfile.PAX_FORMAT) as t:
    d = tarfile.TarInfo("a"); d.type = tarfile.DIRTYPE; d.mode = 0o755
    d.pax_headers = {"SCHILY.fflags": "projinherit"}
    t.addfile(d)
    f = tarfile.TarInfo("a/f"); f.size = 2
    t.addfile(f, io.BytesIO(b"x\n"))
PY
	"$UEXT4" mkfs -q -O project -d "$T/x.tar" "$T/xt.img" 32M || bad "mkfs -d tar"
	"$UEXT4" lsattr -p "$T/xt.img" /a | grep -q '^ *0 .*P-- /a$' ||
		bad "the tarball's +P: $("$UEXT4" lsattr -p "$T/xt.img" /a)"
	clean "$T/xt.img" "mkfs -d tarball"
	umount "$XM"
fi
san_check
[ "$FAILS" = 0 ] || fail "$FAILS checks failed"
echo "PASS"
