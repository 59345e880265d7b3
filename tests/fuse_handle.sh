#!/bin/bash
# fuse_handle.sh - file handles (name_to_handle_at / open_by_handle_at, what
# NFS export and fstests generic/426, 477, 756 use) through the uext4
# mount, against the kernel's ext4 on a loop mount doing the same.
#
# On a fresh image: files and directories at two depths (one below an
# htree directory), and the root; a handle of each is taken (tests/fuse_handle.c), then a file is deleted.
#   1. After the kernel drops its caches (it then no longer knows the
#      nodes), every handle opens the file or directory it was taken of
#      (same inode number, same contents); the deleted file's is ESTALE.
#   2. After umount and a new mount of the image, and a new file made
#      (which may take the deleted file's number: the generation tells
#      them apart), the same.
# Forged handles of reserved inodes (the journal) and past the last inode
# are ESTALE too: a handle shows no file that has no name.
# The results, less inode numbers, must be those of the kernel's ext4.
# e2fsck -fn is clean after each.  Needs root (CAP_DAC_READ_SEARCH).
set -uo pipefail
. "$(dirname "$0")/lib.sh"
fuse_test
need_loop "needs root (open_by_handle_at) and a loop device (the kernel's ext4 is the oracle)"
need_helper HELPER fuse_handle
NAMES=". f d d/sub d/sub/h big/x big/x/y gone"


# check_opened KIND STEP DIR OUT: every name but gone opened as the inode
# it names in DIR; gone (and a forged handle) is ESTALE.  Writes the
# lines less inode numbers (and forged handles) to OUT.res.
check_opened() {
	local kind=$1 step=$2 dir=$3 out=$4 name rest ino
	while read -r name rest; do
		case "$name" in
		gone | forged*) [ "$rest" = ESTALE ] || bad "$kind $step: the handle of $name gives '$rest', not ESTALE" ;;
		*)
			ino=$(stat -c %i "$dir/$name")
			[ "$rest" = "${rest#ino "$ino" }" ] && bad "$kind $step: $name's handle gives '$rest' (inode $ino)"
			;;
		esac
	done < "$out"
	[ "$(grep -vc ^forged "$out")" = "$(echo $NAMES | wc -w)" ] || bad "$kind $step: $(wc -l < "$out") results"
	grep -v ^forged "$out" | sed 's/ ino [0-9]*//' > "$out.res"
}

# forge_handles FILE: FUSE handles (type 0x81: node id high and low
# 32 bits, generation; little-endian) of reserved inode numbers (the
# journal, 8; the resize inode, 7; ext4's root, 2, which is node 1 in
# FUSE) and of one past the last inode.  They name no file: ESTALE.
forge_handles() {
	local ino
	for ino in 2 7 8 8193; do
		printf 'forged%s 129 00000000%02x%02x000000000000\n' "$ino" $((ino & 255)) $((ino >> 8)) >> "$1"
	done
}

# run KIND: the whole sequence on a fresh image, mounted by KIND.
run() {
	local kind=$1 img=$T/$1.img dir=$T/$1.mnt gone_ino new_ino
	mkdir -p "$dir"
	mke2fs -q -F -t ext4 "$img" 32M || fail "mke2fs"
	"mount_$kind" "$img" "$dir"
	mkdir -p "$dir/d/sub" && echo "file f" > "$dir/f" && echo "file h" > "$dir/d/sub/h" &&
		echo "to delete" > "$dir/gone" || fail "$kind: making the files"
	# big is an htree directory (its ".." is in the index root): the
	# kernel reconnects big/x by LOOKUP of ".." in x, then in big.
	mkdir -p "$dir/big/x" && echo "file y" > "$dir/big/x/y" || fail "$kind: making big/x/y"
	for i in $(seq 100); do : > "$dir/big/$(printf "%0200d" "$i")"; done
	lsattr -d "$dir/big" | grep -q '^[^ ]*I' || bad "$kind: big is not an htree directory: $(lsattr -d "$dir/big")"
	# shellcheck disable=SC2086 # NAMES is a list
	(cd "$dir" && "$HELPER" save . "$T/$kind.handles" $NAMES) || fail "$kind: name_to_handle_at"
	[ "$kind" = uext4 ] && forge_handles "$T/$kind.handles"
	gone_ino=$(stat -c %i "$dir/gone")
	rm "$dir/gone" || fail "$kind: rm gone"

	note "$kind: open_by_handle_at after drop_caches"
	sync
	echo 3 > /proc/sys/vm/drop_caches
	"$HELPER" open "$dir" "$T/$kind.handles" > "$T/$kind.open1" || fail "$kind: fuse_handle open"
	sed 's/^/  /' "$T/$kind.open1"
	check_opened "$kind" "before the remount" "$dir" "$T/$kind.open1"

	note "$kind: open_by_handle_at after umount, mount and a new file"
	"umount_$kind" "$dir"
	fsck_clean "$img" || bad "$kind: e2fsck -fn after the first mount"
	"mount_$kind" "$img" "$dir"
	echo new > "$dir/new" || fail "$kind: making a new file"
	new_ino=$(stat -c %i "$dir/new")
	echo "  the deleted file was inode $gone_ino, the new one is $new_ino"
	"$HELPER" open "$dir" "$T/$kind.handles" > "$T/$kind.open2" || fail "$kind: fuse_handle open"
	sed 's/^/  /' "$T/$kind.open2"
	check_opened "$kind" "after the remount" "$dir" "$T/$kind.open2"
	"umount_$kind" "$dir"
	fsck_clean "$img" || bad "$kind: e2fsck -fn after the second mount"
}

run kernel
run uext4
for step in 1 2; do
	diff "$T/kernel.open$step.res" "$T/uext4.open$step.res" > /dev/null ||
		{ diff "$T/kernel.open$step.res" "$T/uext4.open$step.res"; bad "step $step: uext4 differs from the kernel"; }
done
[ $FAILS = 0 ] || fail "$FAILS check(s) failed"
echo "PASS"
