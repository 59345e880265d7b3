#!/bin/bash
# inline_create.sh - on an inline_data file system, new files, directories
# and symlinks are made inline, and grow out of the inode, exactly where
# the kernel's ext4 does.
#
# For 1 KiB and 4 KiB blocks and 256- and 1024-byte inodes (the inline
# capacity is 60 bytes of i_block + the room system.data has in the inode
# body: 128 and 896 bytes here), the same workload runs twice, each time
# on two fresh copies of one mke2fs -O inline_data image:
#   mount:  through the FUSE mount (uext4 mount) on one copy and the
#           kernel's loop mount on the other: cp -a of a tree of files of
#           0, 1, 59, 60, 61, 100, cap-1, cap, cap+1 bytes, directories of
#           0, 1, 5, 200 entries and symlinks of 10, 59, 60, 100, 500
#           bytes; appends of 50 bytes that cross the capacity; a user
#           xattr set before the first write (it takes room system.data
#           would have had) and one set on an inline file; truncates down
#           of an inline and of an extent file (which stays extents);
#           rename, link, unlink, rmdir, a directory moved into another
#           (its ".." in i_block), names removed and added in an inline
#           directory;
#   cli:    uext4 put of the same tree, then uext4 mv, ln, ln -s, rm,
#           mkdir, truncate, setfattr on one copy, the kernel's equivalents
#           on the other.
# Then both images are mounted read-only by the kernel, which must read the
# same tree from each: per path the type, size, contents, symlink target,
# xattrs and the inode flags lsattr shows (N: inline data, e: extents);
# and e2fsck -fn is clean on both.  That the comparison can fail: the
# uext4 image must have the inline files the kernel has (a count > 0).
# run-in: release asan
# test-timeout: 300
set -uo pipefail
. "$(dirname "$0")/lib.sh"
fuse_test mke2fs e2fsck lsattr setfattr:attr getfattr:attr md5sum
need_loop
export TZ=UTC LC_ALL=C

SRC=$T/src
CASE=

# make_src CAP: the host tree copied in.
make_src() {
	local cap=$1 n i
	rm -rf "$SRC"
	mkdir -p "$SRC/d0" "$SRC/d1" "$SRC/dfew" "$SRC/dmany"
	: > "$SRC/empty"
	for n in 1 59 60 61 100 $((cap - 1)) $cap $((cap + 1)); do
		head -c "$n" /dev/urandom > "$SRC/f$n"
	done
	: > "$SRC/d1/a"
	for i in 1 2 3 4 5; do : > "$SRC/dfew/n$i"; done
	for i in $(seq 100 299); do : > "$SRC/dmany/n$i"; done
	for n in 10 59 60 100 500; do
		ln -s "$(head -c "$n" /dev/zero | tr '\0' x)" "$SRC/s$n"
	done
	head -c 500 /dev/urandom > "$SRC/chunk"
}

# ops_mount DIR CAP: the workload on a mounted file system (kernel or FUSE).
ops_mount() {
	local m=$1 cap=$2 i
	cp -a "$SRC/." "$m/" || return 1
	for i in $(seq 0 $(((cap + 150) / 50))); do   # 50-byte appends past cap
		dd if="$SRC/chunk" bs=50 count=1 skip=$((i % 10)) status=none >> "$m/app" || return 1
	done
	: > "$m/xa" && setfattr -n user.x -v 0123456789abcdefghij "$m/xa" &&
		head -c 100 "$SRC/chunk" > "$m/xa" || return 1
	setfattr -n user.y -v 0123456789abcdefghij "$m/f100" || return 1
	# An xattr in the body of an inline file: less room for its data.
	setfattr -n user.z -v 0123456789abcdefghij "$m/f1" || return 1
	for i in 1 2 3 4; do head -c 30 "$SRC/chunk" >> "$m/f1" || return 1; done
	truncate -s 30 "$m/f100" || return 1
	cp "$m/f$((cap + 1))" "$m/tr" && truncate -s 10 "$m/tr" || return 1
	mv "$m/f59" "$m/f59b" && ln "$m/f60" "$m/f60link" && rm "$m/f61" || return 1
	rmdir "$m/d0" && mkdir "$m/dA" && mv "$m/d1" "$m/dA/" || return 1
	rm "$m/dfew/n2" "$m/dfew/n4" && : > "$m/dfew/new1" && : > "$m/dfew/a-longer-name" || return 1
	printf 'hello' > "$m/dA/d1/b" || return 1
}

# ops_cli IMG: the CLI's part.
ops_cli() {
	local img=$1 cap=$2
	"$UEXT4" put "$img" "$SRC/." / &&
		"$UEXT4" mv "$img" /f59 /f59b && "$UEXT4" ln "$img" /f60 /f60link &&
		"$UEXT4" rm "$img" /f61 && "$UEXT4" rm -r "$img" /d0 && "$UEXT4" mkdir "$img" /dA &&
		"$UEXT4" mv "$img" /d1 /dA/d1 && "$UEXT4" ln -s "$img" tgt /dA/s3 &&
		"$UEXT4" truncate -s 30 "$img" /f100 &&
		"$UEXT4" truncate -s 10 "$img" "/f$((cap + 1))" &&
		"$UEXT4" setfattr -n user.y -v 0123456789abcdefghij "$img" /f$((cap - 1)) &&
		"$UEXT4" rm "$img" /dfew/n2 /dfew/n4
}
ops_cli_kernel() {
	local m=$1 cap=$2
	cp -a "$SRC/." "$m/" && mv "$m/f59" "$m/f59b" && ln "$m/f60" "$m/f60link" &&
		rm "$m/f61" && rm -r "$m/d0" && mkdir "$m/dA" && mv "$m/d1" "$m/dA/d1" &&
		ln -s tgt "$m/dA/s3" && truncate -s 30 "$m/f100" &&
		truncate -s 10 "$m/f$((cap + 1))" &&
		setfattr -n user.y -v 0123456789abcdefghij "$m/f$((cap - 1))" &&
		rm "$m/dfew/n2" "$m/dfew/n4"
}

# describe DIR: what the kernel reads, one line a path, sorted.  The size
# of a directory in blocks is not compared: how many blocks an htree takes
# depends on the order of the inserts, and uext4's leaf splits differ from
# the kernel's for some orders (on block directories without inline_data
# too); inline directories (sizes below 1024) are compared.
describe() {
	(cd "$1" && find . -mindepth 1 ! -name lost+found ! -path './lost+found/*' \
		-printf '%y %s %m %n %p -> %l\n' | awk '$1 == "d" && $2 >= 1024 { $2 = "blocks" } 1' | sort
	 cd "$1" && find . -mindepth 1 -type f ! -path './lost+found/*' -exec md5sum {} + | sort -k2
	 cd "$1" && find . -mindepth 1 ! -type l ! -name lost+found ! -path './lost+found/*' \
		-exec lsattr -d {} + | sort -k2
	 cd "$1" && getfattr -R -d -m - --absolute-names . 2>/dev/null | grep -v '^$' | sort)
}

# compare_images LABEL KIMG UIMG: the kernel reads both alike.
compare_images() {
	local label=$1 k=$2 u=$3 mk=$T/mk mu=$T/mu n
	fsck_clean "$k" || bad "$label: kernel's image not clean"
	fsck_clean "$u" || bad "$label: uext4's image not clean"
	mkdir -p "$mk" "$mu"
	kmount "$k" "$mk" || { bad "$label: kernel mount of the kernel's image"; return; }
	if ! kmount "$u" "$mu"; then
		bad "$label: the kernel does not mount uext4's image"
		kumount "$mk"
		return
	fi
	describe "$mk" > "$T/k.txt"
	describe "$mu" > "$T/u.txt"
	kumount "$mu"
	kumount "$mk"
	compare_dumps "$label: kernel's view of both images" "$T/k.txt" "$T/u.txt"
	n=$(grep -c -- '-N-* \./' "$T/u.txt")
	if [ "$n" -gt 0 ] && [ "$n" = "$(grep -c -- '-N-* \./' "$T/k.txt")" ]; then
		echo "ok: $label: $n inline files and directories on both"
	else
		bad "$label: inline (N) paths: uext4 $n, kernel $(grep -c -- '-N-* \./' "$T/k.txt")"
	fi
}

for cfg in 1024:256 4096:256 1024:1024 4096:1024; do
	B=${cfg%:*} I=${cfg#*:}
	CAP=$((I - 128))   # 60 + (I - 128 - 32 extra - 4 magic - 4 end - 20 entry)
	CASE="b$B i$I"
	note "$CASE: capacity $CAP"
	make_src "$CAP"
	base=$T/base.img
	mke2fs -q -F -t ext4 -O inline_data -b "$B" -I "$I" "$base" 32M || fail "mke2fs"

	# The mount workload: FUSE on one copy, the kernel on the other.
	cp "$base" "$T/k.img" && cp "$base" "$T/u.img"
	mkdir -p "$T/m"
	mount_kernel "$T/k.img" "$T/m"
	ops_mount "$T/m" "$CAP" || bad "$CASE: workload on the kernel's mount"
	umount_kernel "$T/m"
	mount_uext4 "$T/u.img" "$T/m"
	ops_mount "$T/m" "$CAP" || bad "$CASE: workload on the FUSE mount"
	umount_uext4 "$T/m"
	san_check
	compare_images "$CASE mount" "$T/k.img" "$T/u.img"

	# The CLI workload.
	cp "$base" "$T/k.img" && cp "$base" "$T/u.img"
	mount_kernel "$T/k.img" "$T/m"
	ops_cli_kernel "$T/m" "$CAP" || bad "$CASE: CLI workload's equivalent on the kernel"
	umount_kernel "$T/m"
	ops_cli "$T/u.img" "$CAP" || bad "$CASE: CLI workload"
	compare_images "$CASE cli" "$T/k.img" "$T/u.img"
done
CASE=
[ "$FAILS" = 0 ] || fail "$FAILS checks failed"
echo "PASS"
