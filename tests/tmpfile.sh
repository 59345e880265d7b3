#!/bin/bash
# tmpfile.sh - O_TMPFILE through the uext4 mount (FUSE_TMPFILE, kernel
# 6.2+), against the kernel's ext4 on a loop mount, on images with an
# orphan file and with the legacy orphan list:
#   1. tests/tmpfile.c `link`: an O_TMPFILE file is written and read back
#      with no links, then linked twice (linkat AT_EMPTY_PATH and
#      /proc/self/fd); `excl`: O_TMPFILE | O_EXCL cannot be linked
#      (ENOENT).  Every step answers as on the kernel; after umount the
#      two names hold the data (read through a kernel mount), the
#      unlinked O_EXCL file is gone (same inode count as the kernel), and
#      e2fsck -fn is clean.
#   2. A crash: `uext4 mount -f`, an O_TMPFILE file written and fsync'd
#      and held open, then kill -9 of the server.  `uext4 recover` frees
#      it (its inode is not in use, the free-inode count is back where it
#      was), and e2fsck -fn is clean.
#   3. The library: tests/tmpfile.c `lib` (uext4_tmpfile(), uext4_link()),
#      then e2fsck -fn clean and debugfs reads the linked file.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
fuse_test
need_loop
need_helper HELPER tmpfile

free_inodes() { dumpe2fs -h "$1" 2> /dev/null | sed -n 's/^Free inodes: *//p'; }

# steps KIND FEATURE: part 1 on a fresh image mounted by KIND; the
# transcript goes to $T/KIND-FEATURE.out.
steps() {
	local kind=$1 feat=$2 img=$T/$1-$2.img dir=$T/$1-$2.mnt out=$T/$1-$2.out
	mkdir -p "$dir"
	mke2fs -q -F -t ext4 -O "$feat" "$img" 32M || fail "mke2fs -O $feat"
	"mount_$kind" "$img" "$dir"
	{
		"$HELPER" link "$dir" a b
		"$HELPER" excl "$dir" c
		ls "$dir"
	} > "$out" 2>&1
	"umount_$kind" "$dir"
	fsck_clean "$img" || bad "$kind $feat: e2fsck -fn"
	echo "free inodes $(free_inodes "$img")" >> "$out"
	kmount "$img" "$dir" || fail "kernel mount of $img"
	{
		"$HELPER" check "$dir/a"
		"$HELPER" check "$dir/b"
		stat -c "a and b: %h links, %s bytes" "$dir/a"
	} >> "$out" 2>&1
	kumount "$dir"
}

# crash FEATURE: part 2.
crash() {
	local feat=$1 img=$T/crash-$1.img dir=$T/crash-$1.mnt pid hold line ino before
	note "$feat: kill -9 of the server while an O_TMPFILE file is open"
	mkdir -p "$dir"
	mke2fs -q -F -t ext4 -O "$feat" "$img" 32M || fail "mke2fs -O $feat"
	before=$(free_inodes "$img")
	fuse_mount_fg "$img" "$dir" || fail "uext4 mount -f failed"
	pid=$FUSE_PID
	coproc HOLD { "$HELPER" hold "$dir"; }
	hold=$HOLD_PID
	ino=
	while read -r -t 60 line <&"${HOLD[0]}"; do
		echo "  $line"
		case "$line" in "ready "*) ino=${line#ready }; break ;; esac
	done
	[ -n "$ino" ] || fail "$feat: the O_TMPFILE file was not made"
	kill -9 "$pid"
	wait "$pid" 2> /dev/null
	kill "$hold" 2> /dev/null
	wait "$hold" 2> /dev/null
	umount -l "$dir" 2> /dev/null
	"$UEXT4" recover "$img" || bad "$feat: uext4 recover"
	fsck_clean "$img" || bad "$feat: e2fsck -fn after the recovery"
	debugfs -R "testi <$ino>" "$img" 2>&1 | sed 's/^/  /'
	debugfs -R "testi <$ino>" "$img" 2>&1 | grep -q "not in use" ||
		bad "$feat: inode $ino of the O_TMPFILE file is still in use after the recovery"
	[ "$(free_inodes "$img")" = "$before" ] ||
		bad "$feat: $(free_inodes "$img") free inodes after the recovery, $before before"
}

for feat in orphan_file ^orphan_file; do
	note "$feat: O_TMPFILE, linkat, O_EXCL"
	steps kernel "$feat"
	steps uext4 "$feat"
	sed 's/^/  /' "$T/uext4-$feat.out"
	diff "$T/kernel-$feat.out" "$T/uext4-$feat.out" ||
		bad "$feat: uext4 differs from the kernel (< kernel, > uext4)"
	crash "$feat"
done
note "the library: uext4_tmpfile(), uext4_link()"
LIMG=$T/lib.img
mke2fs -q -F -t ext4 "$LIMG" 32M || fail "mke2fs"
debugfs -w -R "mkdir d" "$LIMG" 2> /dev/null || fail "debugfs mkdir d"
"$HELPER" lib "$LIMG" || bad "the library's O_TMPFILE"
fsck_clean "$LIMG" || bad "e2fsck -fn after the library's O_TMPFILE"
debugfs -R "dump /d/lib $T/lib.out" "$LIMG" 2> /dev/null
"$HELPER" check "$T/lib.out" || bad "/d/lib as debugfs reads it"
[ $FAILS = 0 ] || fail "$FAILS check(s) failed"
echo "PASS"
