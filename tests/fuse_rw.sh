#!/bin/bash
# fuse_rw.sh - standard tools on a read-write FUSE mount (`uext4 mount IMAGE
# DIR`) must leave exactly the tree they leave in a local directory.
#
# The same sequence of commands (ops below) runs in a local reference
# directory and on the FUSE mount of a fresh image.  The reference is the
# kernel's ext4 on a loop mount of an image made with the same mke2fs
# options (as root with loop devices: same limits, e.g. xattr sizes on 1 KiB
# blocks), else a directory on tmpfs (FUSE_RW_LOCAL=tmpfs forces that).
# The sequence: cp -a of a tree (mktree lite:
# holes, sparse, xattrs, ACLs, hard links, devices, owners, modes), tar x
# (with xattrs), 4 parallel cp -a, mv (files and directories, within and
# across directories, over existing targets), rm -r, ln and ln -s (fast and
# slow symlinks), truncate (grow and shrink), setfattr/getfattr (in-inode,
# block, replace, remove), chmod/chown, dd with seek (sparse) and
# conv=notrunc, appending (>>), fallocate (punch hole), a file written and
# read through a descriptor after it was unlinked, touch -d with
# nanosecond times (before 1970 and after 2038).  Each command's exit status
# and normalised error message go to a transcript; the two transcripts must
# match.
#
# The trees are compared as canonical dumps (tests/walk.c `walk posix`)
# without the fields that legitimately differ: inode numbers, ctime,
# directory sizes, block counts (sparse files are checked apart), and
# atime/mtime except below pristine/, inc2/ and times/, which the sequence
# writes last and never touches again.  Then: the mount is unmounted and the
# server exits; e2fsck -fn is clean; libuext4 (walk lib) and, as root with
# loop devices, the kernel (mount -o loop,ro,noload) see the same tree as the
# local directory.  Finally a `-o ro` mount refuses every kind of write with
# EROFS and leaves the image byte-identical.
#
# FUSE_RW_KINDS picks image kinds (default: "default 1k"; sanitizer builds
# "default"): default is mke2fs -t ext4 (4 KiB blocks); 1k is -b 1024 with
# the lite-1k tree; inline is -O inline_data (reference: tmpfs, see
# kind_ref).  FUSE_RW_DRYRUN=1 runs the sequence in two local
# directories instead (checks that the sequence and the filters are
# deterministic).
# test-timeout: 420
# run-in: release asan tsan
set -uo pipefail
. "$(dirname "$0")/lib.sh"
setup_traps
need_fuse
need setfattr:attr
need_root "device nodes, chown and trusted.* xattrs"
need_built "$UEXT4" "$WALK"
export TZ=UTC LC_ALL=C

scratch_on_tmpfs
T=$(mktemp_dir)
# The daemon's stderr is gone once it detaches: sanitizer reports go to files.
san_logs_in "$T"
case "$UEXT4_BUILD" in
*asan* | *tsan*) KINDS=${FUSE_RW_KINDS:-default} ;;
*) KINDS=${FUSE_RW_KINDS:-default 1k} ;;
esac
test_seed fuse_rw FUSE_RW_SEED

# ---- inputs: deterministic blobs and a tar archive --------------------------

BLOBS=$T/blobs
mkdir "$BLOBS"
blob() { # blob NAME SIZE
	perl -e 'my ($f, $n, $s) = @ARGV; srand($s + $n); open(my $h, ">", $f) or die;
		binmode $h; my $b = ""; $b .= chr(int(rand(256))) for 1 .. 4096;
		while ($n > 0) { my $k = $n < 4096 ? $n : 4096; print $h substr($b, 0, $k);
		$n -= $k; substr($b, 0, 1) = chr(($n / 4096) % 256); }' "$BLOBS/$1" "$2" "$SEED"
}
blob b100 100
blob b64k 65536
blob b100k 100000
blob b1m 1048576
# a value too big for the inode, small enough for a 1 KiB xattr block
XBIG=$(head -c 700 "$BLOBS/b1m" | od -An -tx1 | tr -d ' \n')

kind_mkfs() {
	case $1 in
	default) echo "-t ext4" ;;
	1k) echo "-t ext4 -b 1024" ;;
	inline) echo "-t ext4 -O inline_data" ;;
	*) return 1 ;;
	esac
}
kind_tree() { case $1 in 1k) echo lite-1k ;; *) echo lite ;; esac; }
# The reference for inline_data is tmpfs: the kernel (6.18) loses data on
# inline_data files: printf 7 bytes, then 6, then cat 64 KiB into one fd
# leaves bytes 65536..65548 zero on disk (any block size).
kind_ref() { case $1 in inline) echo tmpfs ;; *) echo "${FUSE_RW_LOCAL:-ext4}" ;; esac; }

# ---- the sequence ------------------------------------------------------------

# step NAME CMD...: run CMD, log its exit status and stderr (with the
# directory's path replaced by DIR) to the transcript.
step() {
	local name=$1 rc t0=$SECONDS
	shift
	"$@" 2> "$T/step.err"
	rc=$?
	[ $((SECONDS - t0)) -lt 5 ] || echo "note: step '$name' took $((SECONDS - t0)) s"
	echo "$name rc=$rc $(sed "s|$PWD|DIR|g" "$T/step.err" | tr '\n' ' ')" >> "$TRANSCRIPT"
	return $rc
}
# say TEXT: a line of read-back output into the transcript.
say() { echo "  $*" >> "$TRANSCRIPT"; }

ops() {
	local i
	step "cp -a tree" cp -a "$SRC" tree
	mkdir inc
	step "tar x" tar --xattrs --xattrs-include='*' -C inc -xpf "$TAR"
	for i in 1 2 3 4; do cp -a "$SRC/small" "par$i" 2> "$T/par$i.err" & done
	step "parallel cp -a" wait
	for i in 1 2 3 4; do say "par$i: $(sed "s|$PWD|DIR|g" "$T/par$i.err")"; done

	# mv: files and directories, within and across directories, replacing
	mkdir -p a/b c d1 d2/x
	cp "$BLOBS/b64k" a/b/f1
	cp "$BLOBS/b100" c/f3
	step "mv file across" mv a/b/f1 c/f1
	step "mv file rename" mv c/f1 c/f2
	step "mv file over file" mv c/f2 c/f3
	step "mv dir across" mv a/b c/b
	step "mv dir rename" mv c/b c/bb
	step "mv dir over empty dir" mv -T d1 d2/x
	step "mv big subtree" mv tree/small d2/small
	step "mv bigdir files" sh -c 'for f in tree/bigdir/entry-0001??-*; do mv "$f" c/ || exit 1; done'
	step "mv dir over non-empty" mv -T c/bb d2 # must fail: ENOTEMPTY
	step "mv file over dir" mv -T c/f3 d2/x # must fail: EISDIR

	# rm -r
	step "rm -r deep" rm -r tree/deep
	step "rm -r inc part" rm -r inc/linux/netfilter
	step "rm bigdir part" sh -c 'rm tree/bigdir/entry-*[05]-*'
	step "refill bigdir" sh -c 'for i in $(seq 1 300); do echo $i > tree/bigdir/new$i; done'
	step "rm -r par2" rm -r par2
	step "rmdir non-empty" rmdir par3 # must fail

	# links
	step "ln" ln c/f3 c/hard1
	step "ln across" ln c/f3 a/hard2
	step "ln -s rel" ln -s ../c/f3 a/sym_rel
	step "ln -s abs" ln -s /etc/passwd a/sym_abs
	step "ln -s slow" ln -s "$(printf 'long-%.0s' {1..60})" a/sym_slow
	step "rm linked" rm c/f3
	say "hard1 nlink $(stat -c %h c/hard1)"
	step "ln dir" ln c d2/c_link # must fail: EPERM

	# truncate
	cp "$BLOBS/b1m" t_shrink
	step "truncate shrink" truncate -s 5000 t_shrink
	step "truncate grow new" truncate -s 10M t_grow
	cp "$BLOBS/b100k" t_mid
	step "truncate grow" truncate -s 300000 t_mid
	step "truncate shrink in hole" truncate -s 123456 t_mid
	cp "$BLOBS/b1m" t_zero
	step "truncate 0" truncate -s 0 t_zero
	step "write after truncate" cp "$BLOBS/b100" t_zero
	step "truncate big file" truncate -s 50000000 tree/holes/many-extents

	# xattrs
	touch x1 x2
	step "setfattr small" setfattr -n user.small -v hello x1
	step "setfattr big" setfattr -n user.big -v "0x$XBIG" x1
	step "setfattr trusted" setfattr -n trusted.t -v 1 x1
	step "setfattr replace" setfattr -n user.small -v changed-value x1
	step "setfattr remove" setfattr -x user.big x1
	step "setfattr remove missing" setfattr -x user.nope x1 # must fail: ENODATA
	step "setfattr many" sh -c 'for i in $(seq 1 40); do setfattr -n user.key$i -v value-number-$i x2 || exit 1; done'
	step "setfattr dir" setfattr -n user.dir -v d a
	step "setfattr symlink" setfattr -h -n trusted.l -v s a/sym_rel
	step "setfattr empty" setfattr -n user.empty x2
	say "$(getfattr -d -m - x1 x2 a 2>&1 | tr '\n' ' ')"

	# modes and owners
	step "chmod setuid" chmod 4755 x1
	step "chmod sticky" chmod 1777 a
	step "chmod 000" chmod 000 c/hard1
	step "chown" chown 1234:5678 x1
	step "chown -h" chown -h 42:43 a/sym_rel
	step "chgrp dir" chgrp 99 a
	step "chmod -R" chmod -R go-w d2

	# dd (sparse and in place)
	step "dd seek" dd if="$BLOBS/b64k" of=sp1 bs=4096 seek=2560 status=none
	step "dd notrunc" dd if="$BLOBS/b100" of=sp1 bs=1 seek=100 conv=notrunc status=none
	step "dd into hole" dd if="$BLOBS/b100" of=t_mid bs=1 seek=200000 conv=notrunc status=none
	step "dd zeros" dd if=/dev/zero of=zeros bs=64k count=4 status=none
	step "dd far" dd if="$BLOBS/b100" of=sp2 bs=1 seek=5000000000 status=none

	# appends
	step "append lines" sh -c 'for i in $(seq 1 50); do echo "line $i" >> app; done'
	step "append blob" sh -c "cat '$BLOBS/b100k' >> app && echo tail >> app"
	step "append sparse" sh -c "cat '$BLOBS/b64k' >> sp1"

	# fallocate
	if command -v fallocate > /dev/null; then
		cp "$BLOBS/b1m" fa
		step "fallocate punch" fallocate -p -o 8192 -l 65536 fa
		step "fallocate keep-size" fallocate -n -o 2000000 -l 65536 fa
		step "fallocate grow" fallocate -o 0 -l 2000000 fa2
	fi

	# a file unlinked while open
	exec 3<> ul
	printf 'before-' >&3
	step "rm open file" rm ul
	printf 'after-' >&3
	cat "$BLOBS/b64k" >&3
	say "unlinked: links $(stat -L -c %h /proc/self/fd/3) size $(stat -L -c %s /proc/self/fd/3)" \
		"md5 $(md5sum < /proc/self/fd/3 | cut -c1-32)"
	exec 3>&-
	[ -e ul ] && say "unlinked file still visible"

	# last: trees whose times are compared (nothing touches them afterwards)
	mkdir pristine inc2 times
	step "cp -a pristine" cp -a "$SRC/times" "$SRC/xattrs" "$SRC/hardlinks" "$SRC/symlinks" \
		"$SRC/special" "$SRC/modes" "$SRC/owners" "$SRC/acls" pristine/
	step "tar x inc2" tar --xattrs --xattrs-include='*' -C inc2 -xpf "$TAR"
	touch -d '1990-01-01' times/b times/c
	mkdir times/d
	echo x > times/d/f
	touch -d '2020-02-28 00:00:00' times/d/f
	ln -s b times/l
	step "touch -d ns" touch -d '2001-02-03 04:05:06.123456789' times/a
	step "touch -m" touch -m -d '1999-12-31 23:59:59.999999999' times/b
	step "touch -a" touch -a -d '2011-11-11 11:11:11.111111111' times/c
	step "touch -h" touch -h -d '2010-01-01 00:00:00.5' times/l
	step "touch future" touch -d '2100-01-01 00:00:00.25' times/future
	step "touch past" touch -d '1960-06-15 12:00:00.75' times/past
	step "touch dir" touch -d '2020-02-29 00:00:00.000000001' times/d
	sync
}

# ---- comparison ----------------------------------------------------------------

# dump posix DIR | dump lib IMAGE: the canonical dump, filtered.
WALK_OPTS=(--no-ino --no-ctime --no-blocks --no-dirsize --exclude=lost+found)
dump() {
	"$WALK" "${WALK_OPTS[@]}" "$1" "$2" | awk '
		# the root: its times and link count (lost+found) differ
		$1 == "." { next }
		# times only where the sequence set them last
		$1 !~ /^\.\/(pristine|inc2|times)\// { gsub(/ (mtime|atime)=[^ ]*/, "") }
		$1 !~ /^\.\/times\// { gsub(/ atime=[^ ]*/, "") }
		{ print }'
}
compare() { # compare LABEL A B
	if cmp -s "$2" "$3"; then
		echo "ok: $1 ($(wc -l < "$2") paths identical)"
	else
		bad "$1 differ ($(diff "$2" "$3" | grep -c '^>') of $(wc -l < "$2") lines); first differences:"
		diff -u "$2" "$3" | head -30
	fi
}
# sparse files must stay sparse: at most 16 sectors more than the local
# copy, plus 1/64 for extent tree blocks (a tmpfs reference has none).
sparse_check() { # sparse_check LOCALDIR DIR LABEL
	local f l m
	for f in t_grow sp1 sp2 t_mid tree/holes/many-extents tree/sparse/big fa; do
		[ -e "$1/$f" ] || continue
		l=$(stat -c %b "$1/$f")
		m=$(stat -c %b "$2/$f")
		[ "$m" -le $((l + 16 + l / 64)) ] || bad "$3: $f has $m sectors, the local copy $l"
	done
}

SERVER_PID=
mount_rw() { # mount_rw IMAGE DIR
	"$UEXT4" mount "$1" "$2" || { bad "uext4 mount $1 exit $?"; return 1; }
	MOUNTS+=("$2")
	SERVER_PID=$(pgrep -n -f -x "$UEXT4 mount $1 $2")
	case ",$(findmnt -n -o OPTIONS "$2")," in
	*,rw,*) ;;
	*) bad "uext4 mount $1 is not read-write: $(findmnt -n -o OPTIONS "$2")"; return 1 ;;
	esac
}
umount_wait() { # umount_wait DIR: unmount, wait for the server to exit
	fusermount3 -u "$1" || { bad "fusermount3 -u $1"; umount -l "$1"; }
	if [ -n "$SERVER_PID" ]; then
		timeout 60 tail --pid="$SERVER_PID" -f /dev/null || bad "server $SERVER_PID still running 60 s after unmount"
	fi
	SERVER_PID=
	MOUNTS=()
}

# erofs_check DIR: every kind of write fails with EROFS.
erofs_check() {
	local d=$1 what
	erofs() { # erofs LABEL CMD...
		what=$1
		shift
		if "$@" 2> "$T/erofs.err"; then
			bad "-o ro: $what succeeded"
		elif ! grep -q "Read-only file system" "$T/erofs.err"; then
			bad "-o ro: $what failed without EROFS: $(head -2 "$T/erofs.err")"
		fi
	}
	erofs "create" touch "$d/newfile"
	erofs "mkdir" mkdir "$d/newdir"
	erofs "append" sh -c "echo x >> '$d/app'"
	erofs "truncate" truncate -s 0 "$d/app"
	erofs "unlink" rm "$d/app"
	erofs "rmdir" rmdir "$d/times/d"
	erofs "rename" mv "$d/app" "$d/app2"
	erofs "link" ln "$d/app" "$d/app3"
	erofs "symlink" ln -s x "$d/sym"
	erofs "chmod" chmod 600 "$d/app"
	erofs "chown" chown 1:1 "$d/app"
	erofs "utimes" touch -d 2000-01-01 "$d/app"
	erofs "setxattr" setfattr -n user.x -v y "$d/app"
	erofs "removexattr" setfattr -x user.small "$d/x1"
	erofs "mknod" mkfifo "$d/fifo"
}

check_kind() {
	local kind=$1 mkfs img=$T/$1.img mnt=$T/mnt-$1 loc=$T/local-$1 kmnt=$T/k-$1 sum
	note "kind $kind: mke2fs $(kind_mkfs "$kind"), tree $(kind_tree "$kind")"
	mkfs=$(kind_mkfs "$kind") || fail "unknown kind $kind"
	SRC=$(tree_get "$(kind_tree "$kind")") || fail "could not generate the tree"
	TAR=$T/inc-$kind.tar
	if [ -d /usr/include/linux ]; then
		tar --xattrs --xattrs-include='*' -cf "$TAR" -C /usr/include linux -C "$SRC" xattrs
	else
		tar --xattrs --xattrs-include='*' -cf "$TAR" -C "$SRC" xattrs symlinks
	fi
	mkdir -p "$mnt" "$loc" "$kmnt"
	# shellcheck disable=SC2086
	mke2fs -q -F $mkfs "$img" 512M || fail "mke2fs"
	if [ "$(kind_ref "$kind")" = ext4 ] && can_loop; then
		echo "reference: the kernel's ext4 on a loop mount (mke2fs $mkfs)"
		cp --sparse=always "$img" "$T/ref.img"
		kmount "$T/ref.img" "$loc" rw || fail "kernel mount of the reference image"
	else
		echo "reference: a directory on $(stat -f -c %T "$loc")"
	fi

	note "$kind: the sequence in a local directory"
	TRANSCRIPT=$T/$kind.local.log
	(cd "$loc" && ops)
	if [ "${FUSE_RW_DRYRUN:-0}" = 1 ]; then
		note "$kind: dry run: the sequence in a second local directory"
		mnt=$T/local2-$kind
		mkdir "$mnt"
		TRANSCRIPT=$T/$kind.fuse.log
		(cd "$mnt" && ops)
		diff -u "$T/$kind.local.log" "$T/$kind.fuse.log" || bad "transcripts differ"
		dump posix "$loc" > "$T/$kind.local.dump"
		dump posix "$mnt" > "$T/$kind.fuse.dump"
		compare "$kind: dry run: two local trees" "$T/$kind.local.dump" "$T/$kind.fuse.dump"
		sparse_check "$loc" "$mnt" "$kind dry run"
		mountpoint -q "$loc" && kumount "$loc"
		rm -rf "$loc" "$mnt" "$T/ref.img"
		return
	fi
	note "$kind: the sequence on the FUSE mount"
	mount_rw "$img" "$mnt" || return
	TRANSCRIPT=$T/$kind.fuse.log
	(cd "$mnt" && ops)
	if cmp -s "$T/$kind.local.log" "$T/$kind.fuse.log"; then
		echo "ok: $kind: the $(wc -l < "$T/$kind.local.log") transcript lines match"
	else
		bad "$kind: commands behaved differently (- local, + FUSE):"
		diff -u "$T/$kind.local.log" "$T/$kind.fuse.log" | grep '^[-+][^-+]' | head -30
	fi

	dump posix "$loc" > "$T/$kind.local.dump"
	dump posix "$mnt" > "$T/$kind.fuse.dump"
	compare "$kind: local tree vs FUSE mount" "$T/$kind.local.dump" "$T/$kind.fuse.dump"
	sparse_check "$loc" "$mnt" "$kind FUSE"
	umount_wait "$mnt"

	note "$kind: e2fsck -fn after the unmount"
	fsck_clean "$img" || bad "$kind: e2fsck -fn"
	dump lib "$img" > "$T/$kind.lib.dump" 2> "$T/$kind.lib.err" || { bad "$kind: walk lib errors"; head "$T/$kind.lib.err"; }
	compare "$kind: local tree vs libuext4 (walk lib)" "$T/$kind.local.dump" "$T/$kind.lib.dump"
	if can_loop; then
		kmount "$img" "$kmnt" || bad "$kind: kernel mount failed"
		if mountpoint -q "$kmnt"; then
			dump posix "$kmnt" > "$T/$kind.kernel.dump"
			compare "$kind: local tree vs kernel mount" "$T/$kind.local.dump" "$T/$kind.kernel.dump"
			sparse_check "$loc" "$kmnt" "$kind kernel"
			kumount "$kmnt"
		fi
	else
		echo "NOTE: not root or no loop device: kernel comparison skipped"
	fi

	note "$kind: -o ro refuses writes with EROFS"
	sum=$(md5sum < "$img")
	"$UEXT4" mount -o ro "$img" "$mnt" || { bad "uext4 mount -o ro exit $?"; return; }
	MOUNTS+=("$mnt")
	SERVER_PID=$(pgrep -n -f -x "$UEXT4 mount -o ro $img $mnt")
	erofs_check "$mnt"
	dump posix "$mnt" > "$T/$kind.ro.dump"
	compare "$kind: local tree vs -o ro mount" "$T/$kind.local.dump" "$T/$kind.ro.dump"
	umount_wait "$mnt"
	[ "$(md5sum < "$img")" = "$sum" ] || bad "$kind: the -o ro mount changed the image"
	if mountpoint -q "$loc"; then
		kumount "$loc"
		fsck_clean "$T/ref.img" || bad "$kind: the reference image (kernel-written) is not clean?"
	fi
	rm -rf "$loc" "$img" "$T/ref.img"
}

for kind in $KINDS; do check_kind "$kind"; done

note "no sanitizer reports (daemon included)"
san_check
[ $FAILS = 0 ] || fail "$FAILS checks failed"
echo "PASS"
