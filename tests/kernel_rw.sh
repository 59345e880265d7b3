#!/bin/bash
# kernel_rw.sh - the kernel and uext4 take turns writing one image, and each
# must see exactly what the other wrote.
#
# For each image kind:
#   1. the kernel writes: mount -o loop, cp -a of the mktree lite tree, a
#      3,000-entry htree directory with deletions, hard links, symlinks,
#      xattrs, renames; unmount; e2fsck -fn clean.
#   2. uext4 reads it back: `walk lib` (libuext4) must equal `walk posix` on
#      a read-only kernel mount, every field (inode numbers, all times with
#      nanoseconds, blocks, data, xattrs) as in oracle.sh.
#   3. uext4 writes: CLI commands (put, mkdir, rm, mv, ln, chmod, chown,
#      setfattr, truncate), then through the FUSE mount (inserts into and
#      deletions from the kernel's htree directory, appends and overwrites
#      of kernel-written files, cp -a, mv across directories); e2fsck -fn
#      clean.  `uext4 put` of a host tree is compared with the host tree.
#   4. the kernel mounts it (ro,noload) and must see exactly the tree
#      libuext4 reports (walk lib vs walk posix, every field).
#   5. the kernel writes again on top of uext4's structures (creates in
#      directories uext4 made, deletes and appends to files uext4 wrote,
#      xattrs, renames), unmount, e2fsck -fn clean, and once more libuext4
#      must see what the kernel sees.
# KERNEL_RW_KINDS picks the kinds (default "default 1k"; sanitizer builds
# "default"): default = mke2fs -t ext4, 1k = -b 1024 with the lite-1k tree,
# nocsum = -O ^metadata_csum,^64bit.
# test-timeout: 400
set -uo pipefail
. "$(dirname "$0")/lib.sh"
setup_traps
[ "$(id -u)" = 0 ] || skip "needs root (kernel loop mounts)"
losetup -f > /dev/null 2>&1 || skip "no free loop device"
[ "${UEXT4_NO_LOOP:-0}" = 0 ] || skip "UEXT4_NO_LOOP is set"
need setfattr:attr
need_built "$UEXT4" "$WALK"
export TZ=UTC LC_ALL=C
scratch_on_tmpfs
test_dir
case "$UEXT4_BUILD" in
*asan* | *tsan*) KINDS=${KERNEL_RW_KINDS:-default} ;;
*) KINDS=${KERNEL_RW_KINDS:-default 1k} ;;
esac
ok() { echo "ok: $*"; }
# run LABEL CMD...: a command that must succeed.
run() {
	local label=$1
	shift
	"$@" > "$T/run.out" 2>&1 || { bad "$label: exit $?: $(head -5 "$T/run.out")"; return 1; }
}

kind_mkfs() {
	case $1 in
	default) echo "-t ext4" ;;
	1k) echo "-t ext4 -b 1024" ;;
	nocsum) echo "-t ext4 -O ^metadata_csum,^64bit" ;;
	*) return 1 ;;
	esac
}
kind_tree() { case $1 in 1k) echo lite-1k ;; *) echo lite ;; esac; }

# cross_check LABEL IMG KMNT: walk lib must equal walk posix on a read-only
# kernel mount, every field.
cross_check() {
	local label=$1 img=$2 kmnt=$3
	kmount "$img" "$kmnt" || { bad "$label: kernel mount"; return; }
	"$WALK" posix "$kmnt" > "$T/k.dump" || bad "$label: walk posix reported errors"
	kumount "$kmnt"
	"$WALK" lib "$img" > "$T/l.dump" 2> "$T/l.err" || { bad "$label: walk lib reported errors"; head "$T/l.err"; }
	compare_dumps "$label: kernel vs libuext4" "$T/k.dump" "$T/l.dump"
}

# ---- 1: the kernel writes ------------------------------------------------------
kernel_fill() { # kernel_fill DIR SRC
	local d=$1 i
	cp -a "$2" "$d/tree" || return 1
	mkdir "$d/htree"
	for i in $(seq 1 3000); do : > "$d/htree/kernel-file-$i"; done
	rm "$d"/htree/kernel-file-*7
	mkdir -p "$d/k/a/b" "$d/k/c"
	head -c 200000 /dev/urandom > "$d/k/a/data"
	ln "$d/k/a/data" "$d/k/a/data-link"
	ln -s ../a/data "$d/k/c/sym"
	ln -s "$(printf 'kernel-long-%.0s' {1..30})" "$d/k/c/slow-sym"
	setfattr -n user.kernel -v written-by-linux "$d/k/a/data"
	setfattr -n user.big -v "$(printf 'v%.0s' {1..600})" "$d/k/a"
	mv "$d/k/a/b" "$d/k/c/b-moved"
	echo "kernel text" > "$d/k/text"
	dd if=/dev/urandom of="$d/k/sparse" bs=4096 seek=1000 count=2 status=none
	touch -d '2005-05-05 05:05:05.555555555' "$d/k/text"
}

# ---- 3: uext4 writes -------------------------------------------------------------
uext4_cli_writes() { # uext4_cli_writes IMG HOSTTREE
	local img=$1 src=$2
	run "put tree" "$UEXT4" put "$img" "$src/xattrs" /put-xattrs || return 1
	run "put dir" "$UEXT4" put "$img" "$src/hardlinks" /k/ || return 1
	run "put file" "$UEXT4" put "$img" "$src/sparse/big" /k/put-big || return 1
	run "mkdir -p" "$UEXT4" mkdir -p -m 750 "$img" /u/x/y/z /u/w || return 1
	run "rm -r" "$UEXT4" rm -r "$img" /tree/deep || return 1
	run "rm files" "$UEXT4" rm "$img" /htree/kernel-file-1 /htree/kernel-file-2000 || return 1
	run "mv file" "$UEXT4" mv "$img" /k/text /u/w/text || return 1
	run "mv dir" "$UEXT4" mv "$img" /k/c/b-moved /u/x/b || return 1
	run "mv -x" "$UEXT4" mv -x "$img" /k/a /k/c || return 1
	run "ln" "$UEXT4" ln "$img" /k/c/data /u/data-hard || return 1
	run "ln -s" "$UEXT4" ln -s "$img" ../k/c/data /u/data-sym || return 1
	run "chmod" "$UEXT4" chmod "$img" 2750 /u/x || return 1
	run "chown" "$UEXT4" chown "$img" 1001:1002 /u/w/text || return 1
	run "chown -h" "$UEXT4" chown -h "$img" 7:8 /u/data-sym || return 1
	run "setfattr" "$UEXT4" setfattr "$img" -n user.uext4 -v "written by uext4" /k/c/data || return 1
	run "setfattr -x" "$UEXT4" setfattr "$img" -x user.kernel /k/c/data || return 1
	run "truncate shrink" "$UEXT4" truncate -s 1000 "$img" /k/c/data || return 1
	run "truncate grow" "$UEXT4" truncate -s 3M "$img" /u/w/text || return 1
	"$UEXT4" mkdir "$img" /u/w 2> /dev/null && bad "mkdir of an existing directory succeeded"
	"$UEXT4" rm "$img" /u 2> /dev/null && bad "rm of a directory without -r succeeded"
	return 0
}

uext4_fuse_writes() { # uext4_fuse_writes DIR SRC
	local d=$1 i
	for i in $(seq 1 1500); do : > "$d/htree/fuse-file-$i" || return 1; done
	rm "$d"/htree/kernel-file-*3 || return 1
	echo "appended by uext4 FUSE" >> "$d/k/a/data-link" || return 1
	dd if=/dev/urandom of="$d/k/sparse" bs=4096 seek=10 count=3 conv=notrunc status=none || return 1
	cp -a "$2/symlinks" "$d/u/x/" || return 1
	mv "$d/tree/small" "$d/u/small" || return 1
	mkdir "$d/f" && echo "fuse file" > "$d/f/one" && setfattr -n user.f -v 1 "$d/f/one" || return 1
	touch -d '2030-03-03 03:03:03.303030303' "$d/f/one"
}

# ---- 5: the kernel writes again --------------------------------------------------
kernel_again() { # kernel_again DIR
	local d=$1 i
	for i in $(seq 1 200); do : > "$d/u/x/y/z/kernel-$i" || return 1; done
	rm "$d"/htree/fuse-file-*1 || return 1
	rm -r "$d/put-xattrs" || return 1
	echo "kernel appends" >> "$d/u/w/text" || return 1
	echo "kernel appends" >> "$d/f/one" || return 1
	setfattr -n user.kernel2 -v again "$d/u/data-hard" || return 1
	mv "$d/u/small" "$d/k/small-back" || return 1
	mkdir "$d/u/x/kdir"
}

check_kind() {
	local kind=$1 mkfs img=$T/$1.img kmnt=$T/k-$1 fmnt=$T/f-$1 src
	mkfs=$(kind_mkfs "$kind") || fail "unknown kind $kind"
	src=$(tree_get "$(kind_tree "$kind")") || fail "could not generate the tree"
	note "kind $kind: mke2fs $mkfs"
	mkdir -p "$kmnt" "$fmnt"
	# shellcheck disable=SC2086
	mke2fs -q -F $mkfs "$img" 512M || fail "mke2fs"

	note "$kind 1: the kernel writes"
	kmount "$img" "$kmnt" rw || { bad "kernel mount rw"; return; }
	kernel_fill "$kmnt" "$src" || bad "$kind: filling the tree on the kernel mount failed"
	kumount "$kmnt"
	fsck_clean "$img" || { bad "$kind: e2fsck after the kernel wrote"; return; }

	note "$kind 2: uext4 reads what the kernel wrote"
	cross_check "$kind after the kernel wrote" "$img" "$kmnt"

	note "$kind 3: uext4 writes (CLI)"
	uext4_cli_writes "$img" "$src" || bad "$kind: CLI writes stopped"
	fsck_clean "$img" || bad "$kind: e2fsck after the CLI writes"
	note "$kind 3: uext4 writes (FUSE)"
	if "$UEXT4" mount "$img" "$fmnt"; then
		MOUNTS+=("$fmnt")
		local pid
		pid=$(pgrep -n -f -x "$UEXT4 mount $img $fmnt")
		uext4_fuse_writes "$fmnt" "$src" || bad "$kind: writes through FUSE failed"
		fusermount3 -u "$fmnt" || bad "fusermount3 -u"
		[ -z "$pid" ] || timeout 60 tail --pid="$pid" -f /dev/null || bad "server $pid still running"
		MOUNTS=()
	else
		bad "$kind: uext4 mount failed"
	fi
	fsck_clean "$img" || bad "$kind: e2fsck after the FUSE writes"

	note "$kind 4: the kernel sees exactly what uext4 reports"
	cross_check "$kind after uext4 wrote" "$img" "$kmnt"
	# uext4 put kept owners, modes, times and xattrs of the host tree
	kmount "$img" "$kmnt" || { bad "kernel mount"; return; }
	local wo=(--no-ino --no-ctime --no-atime --no-blocks --no-dirsize)
	"$WALK" "${wo[@]}" posix "$src/xattrs" > "$T/put.src"
	"$WALK" "${wo[@]}" posix "$kmnt/put-xattrs" > "$T/put.img"
	compare_dumps "$kind: uext4 put of a host tree vs the host tree" "$T/put.src" "$T/put.img"
	kumount "$kmnt"

	note "$kind 5: the kernel writes again"
	kmount "$img" "$kmnt" rw || { bad "kernel mount rw"; return; }
	kernel_again "$kmnt" || bad "$kind: the kernel's second round of writes failed"
	kumount "$kmnt"
	fsck_clean "$img" || bad "$kind: e2fsck after the kernel wrote again"
	cross_check "$kind after the kernel wrote again" "$img" "$kmnt"
	rm -f "$img"
}

for kind in $KINDS; do check_kind "$kind"; done
san_check
[ $FAILS = 0 ] || fail "$FAILS checks failed"
echo "PASS"
