#!/bin/bash
# untouched.sh - a read-write mount that changes nothing writes nothing
# (a refusal leaves every byte of the image unchanged).
#
# For each kind of refusal, `cmp` of the image before and after must find
# no byte changed, the superblock's mount time and count and the journal
# included: a CLI write on a missing path (chmod, mkdir -p parent, rm,
# put into a missing directory), mkdir of an existing name, rm of a
# non-empty directory without -r, chmod of a corrupt inode
# (tests/images/mk_bad_symlink.sh), and a read-write FUSE mount where only
# reads happen, then `uext4 umount`.  Both on a journaled ext4 and on a
# journal-less ext2 image.  Then a real write: while the FUSE mount is up,
# after its first write and an fsync, dumpe2fs -h shows needs_recovery;
# after the unmount it is clear and e2fsck -fn is clean.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
setup_traps
need mke2fs dumpe2fs e2fsck cmp debugfs
need_built "$UEXT4"
T=$(mktemp_dir)
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}log_path=$T/san:detect_leaks=1"
FAILS=0 CHECKS=0
ok() { CHECKS=$((CHECKS + 1)); }

# refused IMG WHAT ARGS...: the command fails and the image is unchanged.
refused() {
	local img=$1 what=$2 rc
	shift 2
	cp "$img" "$T/before.img"
	# shellcheck disable=SC2068
	"$UEXT4" "$@" > /dev/null 2> "$T/err"
	rc=$?
	if [ $rc = 0 ]; then
		bad "$what: exit 0 (expected a refusal)"
	elif [ ! -s "$T/err" ]; then
		bad "$what: refused without a message"
	elif ! cmp "$T/before.img" "$img" > "$T/cmp" 2>&1; then
		bad "$what: refused ($(head -1 "$T/err")), but the image changed: $(cat "$T/cmp")"
	else
		echo "  ok: $what: $(head -1 "$T/err")"
		ok
	fi
	cp "$T/before.img" "$img"
}

mkimage() { # mkimage OUT MKE2FS-ARGS...: a small image with /dir/f and /file
	local out=$1
	shift
	mke2fs -q -F "$@" "$out" 16M > /dev/null || fail "mke2fs $*"
	echo hello > "$T/hello"
	debugfs -w -f - "$out" > /dev/null 2>&1 <<-CMDS
		mkdir dir
		write $T/hello dir/f
		write $T/hello file
	CMDS
	e2fsck -fn "$out" > /dev/null 2>&1 || fail "$out: not clean after debugfs"
}

cli_refusals() { # cli_refusals IMG KIND
	local img=$1 k=$2
	refused "$img" "$k: chmod of a missing path" chmod "$img" 755 /missing
	refused "$img" "$k: chmod in a missing directory" chmod "$img" 755 /missing/x
	refused "$img" "$k: mkdir of an existing name" mkdir "$img" /dir
	refused "$img" "$k: mkdir in a missing directory" mkdir "$img" /missing/x
	refused "$img" "$k: rm of a missing path" rm "$img" /missing
	refused "$img" "$k: rm of a non-empty directory without -r" rm "$img" /dir
	refused "$img" "$k: ln onto an existing name" ln "$img" /file /dir/f
	refused "$img" "$k: put into a missing directory" put "$img" "$T/hello" /missing/f
	refused "$img" "$k: truncate of a directory" truncate -s 0 "$img" /dir
}

note "CLI refusals"
mkimage "$T/ext4.img" -t ext4
mkimage "$T/ext2.img" -t ext2
cli_refusals "$T/ext4.img" ext4
cli_refusals "$T/ext2.img" ext2
line=$("$TOP/tests/images/mk_bad_symlink.sh" "$T/sym.img") || {
	rc=$?
	[ $rc = 77 ] && skip "$line"
	fail "mk_bad_symlink.sh: exit $rc"
}
echo "image bad_symlink: $line"
refused "$T/sym.img" "bad symlink: chmod of the corrupt inode" chmod "$T/sym.img" 600 /lnk
refused "$T/sym.img" "bad symlink: chown -h of the corrupt inode" chown -h "$T/sym.img" 5:5 /lnk
refused "$T/sym.img" "bad symlink: rm of the corrupt inode" rm "$T/sym.img" /lnk

# A successful write still writes (the deferral must not lose it).
cp "$T/ext4.img" "$T/w.img"
if "$UEXT4" mkdir "$T/w.img" /new 2> "$T/err"; then
	if cmp -s "$T/ext4.img" "$T/w.img"; then
		bad "ext4: mkdir /new succeeded but the image did not change"
	elif ! e2fsck -fn "$T/w.img" > "$T/fsck" 2>&1; then
		bad "ext4: e2fsck after mkdir /new:"; cat "$T/fsck"
	elif dumpe2fs -h "$T/w.img" 2> /dev/null | grep -q '^Filesystem features:.*needs_recovery'; then
		bad "ext4: needs_recovery still set after the CLI's unmount"
	else
		ok
	fi
else
	bad "ext4: mkdir /new: $(cat "$T/err")"
fi

# ---------------------------------------------------------------- FUSE
FUSE=1
{ [ -c /dev/fuse ] && command -v fusermount3 > /dev/null; } || { FUSE=0; echo "note: no FUSE: FUSE checks skipped"; }
MNT=$T/mnt
mkdir -p "$MNT"

mount_rw() { # mount_rw IMG: read-write FUSE mount on $MNT
	"$UEXT4" mount "$1" "$MNT" 2> "$T/mount.err" || { bad "uext4 mount $1: $(cat "$T/mount.err")"; return 1; }
	MOUNTS+=("$MNT")
	case ",$(findmnt -n -o OPTIONS "$MNT")," in
	*,rw,*) return 0 ;;
	*) bad "uext4 mount $1 is not read-write: $(findmnt -n -o OPTIONS "$MNT")"; return 1 ;;
	esac
}
umount_rw() {
	"$UEXT4" umount "$MNT" 2> "$T/umount.err" || { bad "uext4 umount: $(cat "$T/umount.err")"; return 1; }
}

fuse_reads() { # fuse_reads IMG KIND: only reads on a read-write mount
	local img=$1 k=$2
	cp "$img" "$T/before.img"
	mount_rw "$img" || return
	local got
	got=$(cat "$MNT/dir/f" "$MNT/file" 2>&1)
	[ "$got" = "hello
hello" ] || bad "$k: FUSE reads gave '$got'"
	ls -laR "$MNT" > /dev/null || bad "$k: ls -laR on the FUSE mount"
	stat "$MNT/dir" > /dev/null || bad "$k: stat on the FUSE mount"
	mkdir "$MNT/dir" 2> /dev/null && bad "$k: FUSE mkdir of an existing name succeeded"
	rmdir "$MNT/dir" 2> /dev/null && bad "$k: FUSE rmdir of a non-empty directory succeeded"
	chmod 600 "$MNT/missing" 2> /dev/null && bad "$k: FUSE chmod of a missing path succeeded"
	sync -f "$MNT/file" || bad "$k: sync -f on the FUSE mount"
	umount_rw || return
	if cmp "$T/before.img" "$img" > "$T/cmp" 2>&1; then
		echo "  ok: $k: read-write FUSE mount with only reads and refusals: image unchanged"
		ok
	else
		bad "$k: read-write FUSE mount that only read changed the image: $(cat "$T/cmp")"
	fi
}

fuse_write() { # fuse_write IMG: needs_recovery on disk after the first write
	local img=$1
	mount_rw "$img" || return
	dumpe2fs -h "$img" 2> /dev/null | grep -q '^Filesystem features:.*needs_recovery' &&
		bad "ext4: needs_recovery set on disk before anything was written"
	echo data > "$MNT/newfile" && sync "$MNT/newfile" || bad "ext4: FUSE write of /newfile"
	if dumpe2fs -h "$img" 2> /dev/null | grep -q '^Filesystem features:.*needs_recovery'; then
		echo "  ok: ext4: needs_recovery on disk while mounted, after the first write"
		ok
	else
		bad "ext4: no needs_recovery on disk after the first write and fsync"
	fi
	umount_rw || return
	if dumpe2fs -h "$img" 2> /dev/null | grep -q '^Filesystem features:.*needs_recovery'; then
		bad "ext4: needs_recovery still set after umount"
	elif ! e2fsck -fn "$img" > "$T/fsck" 2>&1; then
		bad "ext4: e2fsck after the FUSE write:"; cat "$T/fsck"
	elif [ "$(debugfs -R 'cat /newfile' "$img" 2> /dev/null)" != data ]; then
		bad "ext4: /newfile does not read back after umount"
	else
		echo "  ok: ext4: after umount needs_recovery is clear, e2fsck -fn clean"
		ok
	fi
}

if [ $FUSE = 1 ]; then
	note "FUSE"
	fuse_reads "$T/ext4.img" ext4
	fuse_reads "$T/ext2.img" ext2
	cp "$T/ext4.img" "$T/fw.img"
	fuse_write "$T/fw.img"
fi

if compgen -G "$T/san*" > /dev/null; then
	bad "sanitizer report"
	cat "$T"/san* | head -30
fi
echo "untouched: $CHECKS checks passed, $FAILS failed"
[ $FAILS = 0 ] || exit 1
