#!/bin/bash
# fuse_ro.sh - read-only FUSE mount with `uext4 mount`: the mount is ready
# when the command returns; the tree, metadata and xattrs match the source
# (diff -r, find -printf, getfattr -R -d); 8 parallel readers (find + md5sum)
# agree; writes fail with EROFS; statfs works; fusermount3 -u unmounts and
# the server exits; mount failures print a message and exit 1.
# run-in: release asan tsan
set -uo pipefail
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/cli_tree.inc"
setup_traps
need_fuse
need setfattr:attr
need_root "device nodes and chown"
export TZ=UTC LC_ALL=C

T=$(mktemp_dir)
# The daemon's stderr is gone once it detaches: sanitizer reports go to files.
san_logs_in "$T"
SRC=$T/tree
IMG=$T/fuse.img
MNT=$T/mnt
mkdir "$MNT"
make_tree "$SRC"
mke2fs -q -F -t ext4 -d "$SRC" "$IMG" 64M || fail "mke2fs"

for loop in pool st mt uring; do  # uring falls back to st where the kernel cannot
	note "mount -o loop=$loop"
	"$UEXT4" mount -o "ro,loop=$loop" "$IMG" "$MNT" || fail "uext4 mount exit $?"
	MOUNTS+=("$MNT")
	# No waiting: `uext4 mount` returns only once the mount is live.
	[ "$(findmnt -n -o FSTYPE "$MNT")" = fuse.uext4 ] || fail "not mounted when mount returned"
	SERVER=$(findmnt -n -o SOURCE "$MNT")
	[ "$SERVER" = "$IMG" ] || bad "mount source is '$SERVER'"

	note "diff -r against the source"
	# (special files are compared by the metadata check below)
	diff -r --no-dereference -x lost+found -x fifo -x chardev -x blockdev "$SRC" "$MNT" ||
		bad "diff -r ($loop)"

	note "metadata (find -printf) against the source"
	# mke2fs -d keeps whole seconds; the root has lost+found as an extra
	# link and was modified by mke2fs later.  Fields: type mode uid gid links mtime rdev(major,minor) target
	# (paths may contain spaces: the path comes last).
	meta() { (cd "$1" && find . -path ./lost+found -prune -o \
		-printf '%y %m %U %G %n %T@ %l | %p\n' |
		awk '{ split($6, t, "."); $6 = t[1]; if ($NF == ".") $5 = $6 = "X"; print }' | sort); }
	diff <(meta "$SRC") <(meta "$MNT") > "$T/meta.diff" ||
		{ bad "metadata ($loop)"; head "$T/meta.diff"; }
	devs() { (cd "$1" && stat -c '%n %t:%T' chardev blockdev); }
	diff <(devs "$SRC") <(devs "$MNT") || bad "device numbers ($loop)"
	sizes() { (cd "$1" && find . -path ./lost+found -prune -o ! -type d -printf '%p %s\n' | sort); }
	diff <(sizes "$SRC") <(sizes "$MNT") || bad "sizes ($loop)"

	note "getfattr -R -d against the source"
	# one line per file (getfattr -R walks in readdir order), sorted
	xattrs() { (cd "$1" && getfattr -R -P -d -m - . 2> /dev/null) |
		awk 'BEGIN { RS = "" } { gsub(/\n/, " | "); print }' | sort; }
	xattrs "$SRC" > "$T/xa.src"
	xattrs "$MNT" > "$T/xa.mnt"
	[ -s "$T/xa.src" ] || bad "no xattrs in the source?"
	diff "$T/xa.src" "$T/xa.mnt" || bad "xattrs ($loop)"
	getfattr -n user.nope "$MNT/small.txt" > /dev/null 2>&1 && bad "missing xattr found"

	note "8 parallel readers (find + md5sum)"
	(cd "$SRC" && find . -type f -print0 | sort -z | xargs -0 md5sum) > "$T/md5.src"
	for i in 1 2 3 4 5 6 7 8; do
		(cd "$MNT" && find . -path ./lost+found -prune -o -type f -print0 | sort -z |
			xargs -0 md5sum > "$T/md5.$i") &
	done
	wait
	for i in 1 2 3 4 5 6 7 8; do
		cmp -s "$T/md5.src" "$T/md5.$i" || { bad "reader $i ($loop)"; diff "$T/md5.src" "$T/md5.$i" | head -5; }
	done

	note "read-only: writes fail"
	touch "$MNT/new" 2> /dev/null && bad "creating a file succeeded"
	echo x 2> /dev/null >> "$MNT/small.txt" && bad "appending succeeded"
	mkdir "$MNT/newdir" 2> /dev/null && bad "mkdir succeeded"
	df "$MNT" > /dev/null || bad "statfs"
	[ "$(stat -f -c %S "$MNT")" = "$(dumpe2fs -h "$IMG" 2> /dev/null | sed -n 's/^Block size: *//p')" ] ||
		bad "statfs block size"

	note "fusermount3 -u; the server exits"
	PID=$(pgrep -f -x "$UEXT4 mount -o ro,loop=$loop $IMG $MNT")
	[ -n "$PID" ] || bad "no server process"
	fusermount3 -u "$MNT" || bad "fusermount3 -u"
	[ -z "$PID" ] || timeout 30 tail --pid="$PID" -f /dev/null || bad "server $PID still running"
	mountpoint -q "$MNT" && bad "still mounted"
	MOUNTS=()
done

note "mount failures exit 1 with a message"
"$UEXT4" mount "$T/none.img" "$MNT" 2> "$T/err"
rc=$?
[ $rc = 1 ] && grep -q "uext4 mount: $T/none.img: " "$T/err" || bad "missing image: exit $rc $(cat "$T/err")"
mountpoint -q "$MNT" && bad "mounted anyway"
"$UEXT4" mount "$IMG" "$T/nodir" 2> "$T/err"
rc=$?
[ $rc = 1 ] && grep -q "uext4 mount: $T/nodir: " "$T/err" || bad "missing mountpoint: exit $rc $(cat "$T/err")"

note "e2fsck -fn"
fsck_clean "$IMG" || bad "e2fsck"
note "no sanitizer reports (daemon included)"
san_check
[ $FAILS = 0 ] || fail "$FAILS checks failed"
echo "PASS"
