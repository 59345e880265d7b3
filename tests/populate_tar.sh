#!/bin/bash
# populate_tar.sh - tarballs into images: uext4 mkfs -d, and
# uext4_populate_archive() through the populate_tar driver into mke2fs-made
# images:
#   - the lite tree archived by GNU tar (xattrs, ACLs, sparse, pax) as .tar,
#     .tar.gz, .tar.xz, .tar.zst, .tar.bz2, through stdin (mkfs -d -), and
#     in GNU tar's own format (old GNU sparse, no xattrs): each image
#     compared with the source (walk lib against walk posix of the tree),
#     and the .tar one with the kernel's view of it (walk posix on a
#     read-only loop mount against walk lib), e2fsck -fn clean; the
#     driver's progress reports count every member and reach the end;
#   - a 5 GiB sparse file; --root-owner and --no-copy-xattrs; -E offset=
#     (the kernel's view of the partition);
#   - twice with SOURCE_DATE_EPOCH, -U and hash_seed: identical bytes;
#   - bad tarballs (python3 tarfile): absolute paths, ../ escapes,
#     duplicates, hard links to missing targets, garbage, truncation: the
#     documented result, a message naming the member, e2fsck clean;
#   - out of inodes and out of blocks: the message names the member and
#     what ran out; an image mkfs created is removed, an existing one
#     (and the driver's, -m) is marked: dumpe2fs -h shows the error;
#   - progress: a bar on a terminal (script), only the summary on a pipe,
#     nothing with -q.
# test-timeout: 600
set -uo pipefail
. "$(dirname "$0")/lib.sh"
setup_traps

need_helper DRV populate_tar
[ -x "$WALK" ] || fail "$WALK not built (run make)"
need python3
tar --version 2> /dev/null | grep -q 'GNU tar' || skip "GNU tar missing"
WORK=$(mktemp_dir)
UUID=6f1c2a3e-8a44-4b7e-9a0c-4d2f1a5b6c7d
SEED=2b3c4d5e-1111-2222-3333-444455556666
EPOCH=1700000000

# new_image IMG [SIZE [mke2fs options]]: a fresh, fixed-identity image.
new_image() {
	local img=$1 size=${2:-256M}
	shift $(($# < 2 ? $# : 2))
	rm -f "$img"
	E2FSPROGS_FAKE_TIME=$EPOCH mke2fs -q -F -t ext4 -U "$UUID" -E "hash_seed=$SEED" \
		-b 4096 -N 8192 "$@" "$img" "$size" || fail "mke2fs $img"
}

# Fields a tar archive cannot carry or GNU tar does not store, dropped from
# the source comparison: inode numbers, ctime, atime (GNU tar's pax stores
# none), the root's link count (lost+found).  Left out: the socket (GNU tar
# skips sockets), the hard-linked fifo (GNU tar archives each name as a
# fifo of its own), times/old (libarchive 3.6 reads a negative pax time's
# fraction with the wrong sign: -100000.5 becomes -99999.5).
SRC_OPTS=(--exclude=lost+found --no-ino --no-ctime --no-atime --no-dirnlink --no-dirsize)
# Directories' block counts depend on the file system they are on (dropped).
src_filter() { grep -v -e '^\./special/socket ' -e '^\./hardlinks/fifo ' \
	-e '^\./hardlinks/b/fifo-link ' -e '^\./times/old ' | sed '/ type=d /s/ blocks=[0-9]*//'; }

note "source tree and archives"
TREE=$(tree_get lite) || fail "could not generate the lite tree"
"$WALK" "${SRC_OPTS[@]}" posix "$TREE" | src_filter > "$WORK/src.txt" || fail "walk posix $TREE"
TAR=$WORK/t.tar
tar -C "$TREE" --xattrs --xattrs-include='*' --acls --sparse --format=posix \
	-cf "$TAR" . 2> "$WORK/tar.err" || { cat "$WORK/tar.err"; fail "tar -c"; }
gzip -c "$TAR" > "$TAR.gz"
for z in xz zstd bzip2; do
	if command -v $z > /dev/null; then $z -q -c "$TAR" > "$TAR.$(sed 's/zstd/zst/;s/bzip2/bz2/' <<< $z)"; fi
done
# GNU tar's own format (old GNU sparse members, no xattrs, whole seconds).
tar -C "$TREE" --sparse --format=gnu -cf "$WORK/gnu.tar" . 2> "$WORK/tar.err" ||
	{ cat "$WORK/tar.err"; fail "tar -c --format=gnu"; }
ls -l "$WORK"/t.tar*

# mkfs_d IMG SOURCE [mkfs options]: uext4 mkfs -q -d SOURCE into a new IMG.
mkfs_d() {
	local img=$1 src=$2
	shift 2
	rm -f "$img"
	"$UEXT4" mkfs -q -b 4096 -N 8192 -U "$UUID" -E "hash_seed=$SEED" "$@" -d "$src" "$img" 256M
}

# check_image NAME IMG: compare with the source, e2fsck.
check_image() {
	"$WALK" "${SRC_OPTS[@]}" lib "$2" | src_filter > "$WORK/$1.txt" ||
		bad "$1: walk lib reported errors"
	compare_dumps "$1: source tree vs walk lib" "$WORK/src.txt" "$WORK/$1.txt"
	fsck_clean "$2" || bad "$1: e2fsck"
}

note "uext4 mkfs -d of each archive"
for z in "" .gz .xz .zst .bz2; do
	[ -e "$TAR$z" ] || continue
	name=tar$z
	if mkfs_d "$WORK/$name.img" "$TAR$z" 2> "$WORK/$name.err"; then
		check_image "$name" "$WORK/$name.img"
	else
		bad "$name: mkfs -d failed: $(cat "$WORK/$name.err")"
	fi
done
if mkfs_d "$WORK/gnu.img" "$WORK/gnu.tar" 2> "$WORK/gnu.err"; then
	# Without xattrs the files that had an xattr block have one block less.
	nox() { src_filter | sed -E '/^\.\/(xattrs|acls)\//s/ blocks=[0-9]+//'; }
	"$WALK" "${SRC_OPTS[@]}" --no-xattr --no-nsec posix "$TREE" | nox > "$WORK/src-gnu.txt"
	"$WALK" "${SRC_OPTS[@]}" --no-xattr --no-nsec lib "$WORK/gnu.img" | nox > "$WORK/gnu.txt" ||
		bad "gnu: walk lib reported errors"
	compare_dumps "gnu format: source tree vs walk lib (no xattrs, seconds)" "$WORK/src-gnu.txt" "$WORK/gnu.txt"
	fsck_clean "$WORK/gnu.img" || bad "gnu: e2fsck"
else
	bad "gnu: mkfs -d failed: $(cat "$WORK/gnu.err")"
fi
if mkfs_d "$WORK/stdin.img" - < "$TAR.xz" 2> "$WORK/stdin.err"; then
	check_image "stdin (-d -)" "$WORK/stdin.img"
else
	bad "mkfs -d - failed: $(cat "$WORK/stdin.err")"
fi

note "the library through the driver, and its progress reports"
new_image "$WORK/drv.img"
if "$DRV" "$WORK/drv.img" "$TAR" > "$WORK/drv.out" 2> "$WORK/drv.err"; then
	check_image driver "$WORK/drv.img"
	# The callback ran, counted every member, never went back, read to the end.
	read -r _ calls files bytes total rest < "$WORK/drv.out"
	[ "$calls" -gt 0 ] && [ "$files" -ge "$(wc -l < "$WORK/src.txt")" ] && [ -z "$rest" ] ||
		bad "driver: progress reports: $(cat "$WORK/drv.out")"
	[ "$total" = "$(stat -c %s "$TAR")" ] && [ "$bytes" = "$total" ] ||
		bad "driver: progress bytes $bytes/$total, archive $(stat -c %s "$TAR") bytes"
else
	bad "driver fill failed: $(cat "$WORK/drv.err")"
fi
"$DRV" "$WORK/drv2.img" - < "$TAR.gz" > "$WORK/drv2.out" 2>&1 && bad "driver: a missing image worked"

note "a 5 GiB sparse file (mktree's sparse part at full size), owners and xattrs options"
BIG=$(tree_get sparse) || fail "could not generate the sparse tree"
tar -C "$BIG" --sparse --format=posix -cf "$WORK/sparse.tar" . || fail "tar -c sparse"
ls -l "$WORK/sparse.tar"
if mkfs_d "$WORK/sparse.img" "$WORK/sparse.tar" --root-owner=4321:8765 2> "$WORK/sparse.err"; then
	"$WALK" "${SRC_OPTS[@]}" posix "$BIG" | src_filter | grep -v '^\. ' > "$WORK/sparse-src.txt"
	"$WALK" "${SRC_OPTS[@]}" lib "$WORK/sparse.img" | src_filter > "$WORK/sparse-lib.txt"
	grep -v '^\. ' "$WORK/sparse-lib.txt" > "$WORK/sparse-lib-body.txt"
	compare_dumps "sparse: source tree vs walk lib" "$WORK/sparse-src.txt" "$WORK/sparse-lib-body.txt"
	grep -q '^\. type=d mode=0755 uid=4321 gid=8765 ' "$WORK/sparse-lib.txt" ||
		bad "-r 4321:8765: the root is $(grep '^\. ' "$WORK/sparse-lib.txt")"
	fsck_clean "$WORK/sparse.img" || bad "sparse: e2fsck"
else
	bad "sparse: fill failed: $(cat "$WORK/sparse.err")"
fi
mkfs_d "$WORK/nox.img" "$TAR" --no-copy-xattrs 2> "$WORK/nox.err" ||
	bad "--no-copy-xattrs: $(cat "$WORK/nox.err")"
"$WALK" --no-ino lib "$WORK/nox.img" > "$WORK/nox.txt"
n=$(grep -vc 'xattr=-$' "$WORK/nox.txt")
[ "$n" = 0 ] || bad "-X (no_copy_xattrs): $n paths have xattrs or ACLs"
grep -q '^\./acls/file .*mode=0674' "$WORK/nox.txt" ||
	bad "-X: the mode of an ACL'd file is not the archive's"
fsck_clean "$WORK/nox.img" || bad "-X: e2fsck"

note "the kernel's view of the .tar image"
if can_loop; then
	KM=$WORK/kmnt
	mkdir -p "$KM"
	if kmount "$WORK/tar.img" "$KM"; then
		"$WALK" --no-atime posix "$KM" > "$WORK/kernel.txt" || bad "walk posix of the kernel mount"
		kumount "$KM"
		"$WALK" --no-atime lib "$WORK/tar.img" > "$WORK/lib.txt" || bad "walk lib"
		compare_dumps "kernel vs walk lib" "$WORK/kernel.txt" "$WORK/lib.txt"
	else
		bad "kernel mount of the .tar image failed"
	fi
else
	echo "NOTE: no loop device or not root: the kernel comparison did not run"
fi

note "-E offset=: a file system 1 MiB into the image, seen by the kernel"
if can_loop; then
	rm -f "$WORK/off.img"
	if "$UEXT4" mkfs -q -b 4096 -N 8192 -E offset=1048576 -d "$TAR.gz" "$WORK/off.img" 256M \
		2> "$WORK/off.err"; then
		LOOP=$(losetup -f --show -o 1048576 "$WORK/off.img")
		fsck_clean "$LOOP" || bad "offset: e2fsck of the partition"
		mkdir -p "$WORK/offmnt"
		if mount -t ext4 -o ro,noload "$LOOP" "$WORK/offmnt"; then
			MOUNTS+=("$WORK/offmnt")
			"$WALK" "${SRC_OPTS[@]}" posix "$WORK/offmnt" | src_filter > "$WORK/off.txt"
			umount "$WORK/offmnt"
			compare_dumps "offset: source tree vs the kernel's view" "$WORK/src.txt" "$WORK/off.txt"
		else
			bad "offset: the kernel does not mount the partition"
		fi
		losetup -d "$LOOP"
	else
		bad "offset: mkfs -d failed: $(cat "$WORK/off.err")"
	fi
else
	echo "NOTE: no loop device or not root: the offset check did not run"
fi

note "reproducible: twice with SOURCE_DATE_EPOCH, -U, hash_seed gives the same bytes"
rfail=0
for i in 1 2; do
	SOURCE_DATE_EPOCH=$EPOCH mkfs_d "$WORK/r$i.img" "$TAR.gz" 2> "$WORK/r$i.err" ||
		{ bad "fixed-time fill $i: $(cat "$WORK/r$i.err")"; rfail=1; }
done
new_image "$WORK/r3.img"
"$DRV" -e "$EPOCH" "$WORK/r3.img" "$TAR.gz" > /dev/null 2> "$WORK/r3.err" ||
	{ bad "fixed-time driver fill: $(cat "$WORK/r3.err")"; rfail=1; }
new_image "$WORK/r4.img"
"$DRV" -e "$EPOCH" "$WORK/r4.img" - < "$TAR.zst" > /dev/null 2> "$WORK/r4.err" ||
	{ bad "fixed-time driver fill: $(cat "$WORK/r4.err")"; rfail=1; }
if [ $rfail = 0 ]; then
	cmp "$WORK/r3.img" "$WORK/r4.img" && echo "ok: driver: .tar.gz and .tar.zst on stdin give the same bytes" ||
		bad "driver: the same archive, .gz and .zst on stdin, gave different images"
fi
if [ $rfail = 1 ]; then
	:
elif cmp "$WORK/r1.img" "$WORK/r2.img"; then
	echo "ok: two fixed-time fills are byte-identical"
else
	bad "two fixed-time fills differ"
fi
fsck_clean "$WORK/r1.img" || bad "fixed-time image: e2fsck"
# Clamped: nothing in the image is later than the epoch.
"$WALK" --no-ino lib "$WORK/r1.img" > "$WORK/r1.txt"
late=$(perl -ne 'while (/(?:mtime|atime|ctime)=(-?\d+)/g) { print if $1 > '"$EPOCH"' }' "$WORK/r1.txt" | head -3)
[ -z "$late" ] || bad "times after SOURCE_DATE_EPOCH in the fixed-time image: $late"

note "bad tarballs"
# mkbad NAME: build tarball NAME.tar with python3's tarfile.
mkbad() {
	python3 - "$WORK/$1.tar" "$1" <<'EOF' || fail "python3 could not build $1"
import io, sys, tarfile
out, kind = sys.argv[1], sys.argv[2]

def add(t, name, data=None, type=tarfile.REGTYPE, link="", mode=0o644, mtime=1600000000,
        fflags=None):
    i = tarfile.TarInfo(name)
    i.type, i.linkname, i.mode, i.mtime = type, link, mode, mtime
    if fflags:
        i.pax_headers = {"SCHILY.fflags": fflags}
    if data is not None:
        i.size = len(data)
        t.addfile(i, io.BytesIO(data))
    else:
        t.addfile(i)

with tarfile.open(out, "w", format=tarfile.PAX_FORMAT) as t:
    if kind == "absolute":
        add(t, "/etc/abs-file", b"absolute\n")
        add(t, "/abs-dir", type=tarfile.DIRTYPE, mode=0o750)
        add(t, "abs-dir/inner", b"in\n")
        add(t, "/abs-link", type=tarfile.LNKTYPE, link="/etc/abs-file")
    elif kind == "dotdot":
        add(t, "ok", b"fine\n")
        add(t, "a/../../escape", b"evil\n")
    elif kind == "dotdot-link":
        add(t, "ok", b"fine\n")
        add(t, "hl", type=tarfile.LNKTYPE, link="../ok")
    elif kind == "dup":
        add(t, "f", b"first version, longer\n")
        add(t, "f", b"second\n", mode=0o600)
        add(t, "d", type=tarfile.DIRTYPE, mode=0o700)
        add(t, "d/in", b"inside\n")
        add(t, "d", type=tarfile.DIRTYPE, mode=0o751, mtime=1500000000)
        add(t, "emptydir", type=tarfile.DIRTYPE)
        add(t, "emptydir", b"file over an empty directory\n")
        add(t, "x", b"file\n")
        add(t, "x", type=tarfile.DIRTYPE, mode=0o711)
        add(t, "x/y", b"in the directory that replaced a file\n")
        add(t, "late/parent/file", b"parents made before their members\n")
        add(t, "late/parent", type=tarfile.DIRTYPE, mode=0o705, mtime=1400000000)
    elif kind == "dup-nonempty":
        add(t, "d", type=tarfile.DIRTYPE)
        add(t, "d/in", b"x\n")
        add(t, "d", b"a file over a non-empty directory\n")
    elif kind == "missing-link":
        add(t, "present", b"here\n")
        add(t, "hl", type=tarfile.LNKTYPE, link="not-there")
    elif kind == "through-symlink":
        add(t, "s", type=tarfile.SYMTYPE, link="/etc")
        add(t, "s/passwd", b"overwritten?\n")
    elif kind == "flags":
        # SCHILY.fflags as bsdtar writes them; set after the last member, so
        # a hard link to an immutable file and a file in an append-only
        # directory still go in.
        add(t, "imm", b"immutable\n", fflags="schg")
        add(t, "imm-link", type=tarfile.LNKTYPE, link="imm")
        add(t, "d", type=tarfile.DIRTYPE, mode=0o755, fflags="nodump,sappnd")
        add(t, "d/in", b"x\n", fflags="nodump")
        add(t, "na", b"y\n", fflags="noatime")
    elif kind in ("truncated", "garbage"):
        for i in range(20):
            add(t, "file%02d" % i, bytes([65 + i]) * 30000)
if kind == "truncated":
    with open(out, "r+b") as f:
        f.truncate(200000)
elif kind == "garbage":
    with open(out, "wb") as f:
        f.write(b"this is not an archive\n" * 1000)
EOF
}

# expect_fail NAME PATTERN: the fill fails, its message matches PATTERN, the
# image stays consistent.
expect_fail() {
	local name=$1 pat=$2 img=$WORK/bad-$1.img
	mkbad "$name"
	new_image "$img" 32M
	if "$DRV" "$img" "$WORK/$name.tar" > "$WORK/$name.out" 2> "$WORK/$name.err"; then
		bad "$name: the fill succeeded"
	elif ! grep -Eq -- "$pat" "$WORK/$name.err"; then
		bad "$name: the message does not match /$pat/: $(cat "$WORK/$name.err")"
	else
		echo "ok: $name: $(grep -v '^progress' "$WORK/$name.err" | head -2)"
	fi
	fsck_clean "$img" || bad "$name: e2fsck after the failed fill"
}

# expect_ok NAME: the fill succeeds; prints the image path.
expect_ok() {
	local name=$1 img=$WORK/bad-$1.img
	mkbad "$name"
	new_image "$img" 32M
	if "$DRV" "$img" "$WORK/$name.tar" > "$WORK/$name.out" 2> "$WORK/$name.err"; then
		echo "ok: $name: filled${2:+: $(cat "$WORK/$name.err")}"
	else
		bad "$name: the fill failed: $(cat "$WORK/$name.err")"
	fi
	fsck_clean "$img" || bad "$name: e2fsck"
}

# stat_of IMG PATH: "type mode size" of PATH in IMG through walk lib.
line_of() { "$WALK" --no-ino lib "$1" > "$1.walk"; grep -F "./$2 " "$1.walk" | head -1; }

expect_ok absolute show
n=$(grep -c "removing leading '/'" "$WORK/absolute.err")
[ "$n" = 1 ] || bad "absolute: expected one warning about leading '/', got $n: $(cat "$WORK/absolute.err")"
for p in etc/abs-file abs-dir/inner abs-link; do
	line_of "$WORK/bad-absolute.img" "$p" | grep -q 'type=f' || bad "absolute: $p missing"
done
line_of "$WORK/bad-absolute.img" abs-link | grep -q 'nlink=2' || bad "absolute: abs-link is no hard link"
line_of "$WORK/bad-absolute.img" abs-dir | grep -q 'mode=0750' || bad "absolute: abs-dir mode"

expect_fail dotdot 'member "a/\.\./\.\./escape".*"\.\."'
expect_fail dotdot-link 'member "hl".*hard-link target.*"\.\."'
expect_fail dup-nonempty 'member "d".*non-empty directory'
expect_fail missing-link 'member "hl".*hard link to "not-there"'
expect_fail through-symlink 'member "s/passwd".*symlink'
expect_fail truncated 'member "file[0-9]*".*([Tt]runcat|[Ee]nd of file|[Uu]nexpected)'
expect_fail garbage 'reading the archive|[Uu]nrecognized|not a readable'

# Cut the compressed archive at random points: each fill fails with a
# message (never a crash) and leaves a consistent image.
RSEED=${POPULATE_TAR_SEED:-$RANDOM}
echo "truncation points: seed $RSEED (POPULATE_TAR_SEED)"
RANDOM=$RSEED
gzsize=$(stat -c %s "$TAR.gz")
for i in 1 2 3 4; do
	cut=$(( 1 + (RANDOM * 32768 + RANDOM) % (gzsize - 1) ))
	head -c "$cut" "$TAR.gz" > "$WORK/cut.tar.gz"
	new_image "$WORK/cut.img" 64M
	"$DRV" "$WORK/cut.img" "$WORK/cut.tar.gz" > /dev/null 2> "$WORK/cut.err"
	rc=$?
	if [ $rc != 1 ] || ! grep -q 'populate_tar: .*\(archive\|member\)' "$WORK/cut.err"; then
		bad "the .tar.gz cut at $cut bytes: exit $rc: $(head -3 "$WORK/cut.err")"
	else
		echo "ok: cut at $cut bytes: $(head -1 "$WORK/cut.err")"
	fi
	fsck_clean "$WORK/cut.img" || bad "the .tar.gz cut at $cut: e2fsck"
done

expect_ok dup
I=$WORK/bad-dup.img
line_of "$I" f | grep -q 'mode=0600 .*size=7 ' || bad "dup: f is not the second version: $(line_of "$I" f)"
line_of "$I" d | grep -q 'type=d mode=0751 .*mtime=1500000000\.' ||
	bad "dup: dir over dir did not take the later attributes: $(line_of "$I" d)"
line_of "$I" d/in | grep -q 'type=f' || bad "dup: dir over dir lost its contents"
line_of "$I" emptydir | grep -q 'type=f' || bad "dup: file over an empty dir: $(line_of "$I" emptydir)"
line_of "$I" x | grep -q 'type=d mode=0711' || bad "dup: dir over file: $(line_of "$I" x)"
line_of "$I" x/y | grep -q 'type=f' || bad "dup: x/y missing"
line_of "$I" late/parent | grep -q 'type=d mode=0705 .*mtime=1400000000\.' ||
	bad "dup: a directory after its contents did not get its attributes: $(line_of "$I" late/parent)"
line_of "$I" late | grep -q 'type=d mode=0755 nlink=[0-9]* uid=0 gid=0' ||
	bad "dup: a made parent is not 0755 root: $(line_of "$I" late)"

expect_ok flags
for pf in imm:i imm-link:i d:a d:d d/in:d na:A; do
	out=$("$UEXT4" lsattr "$WORK/bad-flags.img" "/${pf%:*}" 2>&1)
	[[ "${out%% *}" == *"${pf#*:}"* ]] || bad "flags: /${pf%:*} lacks ${pf#*:}: $out"
done

note "out of inodes, out of blocks"
python3 - "$WORK/many.tar" "$WORK/big.tar" <<'EOF' || fail "python3"
import io, sys, tarfile
with tarfile.open(sys.argv[1], "w") as t:
    for i in range(400):
        ti = tarfile.TarInfo("dir/file%04d" % i); ti.size = 10
        t.addfile(ti, io.BytesIO(b"0123456789"))
with tarfile.open(sys.argv[2], "w") as t:
    for i in range(8):
        ti = tarfile.TarInfo("big%d" % i); ti.size = 3 << 20
        t.addfile(ti, io.BytesIO(bytes([i + 1]) * ti.size))
EOF
new_image "$WORK/noino.img" 16M -N 128
if "$DRV" -m "$WORK/noino.img" "$WORK/many.tar" > /dev/null 2> "$WORK/noino.err"; then
	bad "400 files into 128 inodes succeeded"
elif ! grep -q 'member "dir/file0[0-9]*".*no free inodes' "$WORK/noino.err"; then
	bad "out of inodes: message: $(cat "$WORK/noino.err")"
else
	echo "ok: out of inodes: $(cat "$WORK/noino.err")"
fi
new_image "$WORK/noblk.img" 16M
if "$DRV" -m "$WORK/noblk.img" "$WORK/big.tar" > /dev/null 2> "$WORK/noblk.err"; then
	bad "24 MiB into a 16 MiB image succeeded"
elif ! grep -q 'member "big[0-9]".*no free blocks' "$WORK/noblk.err"; then
	bad "out of blocks: message: $(cat "$WORK/noblk.err")"
else
	echo "ok: out of blocks: $(cat "$WORK/noblk.err")"
fi
for i in noino noblk; do
	out=$(dumpe2fs -h "$WORK/$i.img" 2> /dev/null)
	grep -q '^Filesystem state:.*with errors' <<< "$out" && grep -q '^FS Error count: *1' <<< "$out" ||
		bad "$i: the error is not recorded: $(grep -i -e state -e error <<< "$out")"
	# e2fsck sees the mark (forced check) and nothing else wrong.
	out=$(e2fsck -fn "$WORK/$i.img" 2>&1)
	grep -Eq 'Inode|Block bitmap|count wrong|Unattached|Entry' <<< "$out" &&
		bad "$i: e2fsck finds damage besides the error mark: $out"
done

note "failed uext4 mkfs -d: a created image is removed, an existing one marked"
# cli_fail NAME PATTERN WHAT mkfs-args...: mkfs fails, the message matches
# PATTERN, and says WHAT happened to the image (removed / marked).
cli_fail() {
	local name=$1 pat=$2 what=$3
	shift 3
	if "$UEXT4" mkfs -q "$@" > "$WORK/$name.cli.out" 2> "$WORK/$name.cli.err"; then
		bad "cli $name: mkfs -d succeeded"
	elif ! grep -Eq -- "$pat" "$WORK/$name.cli.err" || ! grep -q -- "$what" "$WORK/$name.cli.err"; then
		bad "cli $name: the messages do not match /$pat/ and \"$what\": $(cat "$WORK/$name.cli.err")"
	else
		echo "ok: cli $name: $(tr '\n' ' ' < "$WORK/$name.cli.err")"
	fi
}
cli_fail dotdot 'member "a/\.\./\.\./escape"' "removed" -d "$WORK/dotdot.tar" "$WORK/c1.img" 32M
[ -e "$WORK/c1.img" ] && bad "cli dotdot: the image mkfs created is still there"
cli_fail noblk 'member "big[0-9]".*no free blocks' "removed" -d "$WORK/big.tar" "$WORK/c2.img" 16M
[ -e "$WORK/c2.img" ] && bad "cli noblk: the image mkfs created is still there"
cli_fail nosource 'No such file' "removed" -d "$WORK/does-not-exist" "$WORK/c3.img" 16M
[ -e "$WORK/c3.img" ] && bad "cli nosource: the image mkfs created is still there"
truncate -s 16M "$WORK/c4.img"
cli_fail noino-existing 'member "dir/file0[0-9]*".*no free inodes' "marked with an error" \
	-N 128 -d "$WORK/many.tar" "$WORK/c4.img"
if [ -e "$WORK/c4.img" ]; then
	out=$(dumpe2fs -h "$WORK/c4.img" 2> /dev/null)
	grep -q '^Filesystem state:.*with errors' <<< "$out" && grep -q '^FS Error count: *1' <<< "$out" ||
		bad "cli noino-existing: the error is not recorded: $(grep -i -e state -e error <<< "$out")"
	out=$(e2fsck -fn "$WORK/c4.img" 2>&1)
	grep -Eq 'Inode|Block bitmap|count wrong|Unattached|Entry' <<< "$out" &&
		bad "cli noino-existing: e2fsck finds damage besides the error mark: $out"
else
	bad "cli noino-existing: the existing image was removed"
fi

note "progress: a bar on a terminal, the summary alone on a pipe, nothing with -q"
before=$FAILS
if command -v script > /dev/null; then
	rm -f "$WORK/p1.img"
	script -qec "'$UEXT4' mkfs -b 4096 -d '$TAR.gz' '$WORK/p1.img' 256M" /dev/null > "$WORK/tty.out" 2>&1 ||
		bad "mkfs -d under script failed: $(cat "$WORK/tty.out")"
	grep -q $'\r[0-9]* files, .* MB/s' "$WORK/tty.out" && grep -q $'\033\[K' "$WORK/tty.out" ||
		bad "no progress bar on a terminal: $(od -c "$WORK/tty.out" | head -20)"
	grep -q 'members, .* in [0-9.]* s' "$WORK/tty.out" || bad "no summary on a terminal"
	rm -f "$WORK/p2.img"
	script -qec "'$UEXT4' mkfs -b 4096 -q -d '$TAR.gz' '$WORK/p2.img' 256M" /dev/null > "$WORK/ttyq.out" 2>&1 ||
		bad "mkfs -q -d under script failed: $(cat "$WORK/ttyq.out")"
	[ -s "$WORK/ttyq.out" ] && bad "-q on a terminal printed: $(od -c "$WORK/ttyq.out" | head)"
	[ "$FAILS" = "$before" ] && echo "ok: a progress bar on a terminal ($(grep -o $'\r' "$WORK/tty.out" | wc -l) redraws), nothing with -q"
else
	echo "NOTE: script (util-linux) missing: the terminal checks did not run"
fi
before=$FAILS
rm -f "$WORK/p3.img"
"$UEXT4" mkfs -b 4096 -d "$TAR.gz" "$WORK/p3.img" 256M > "$WORK/pipe.out" 2> "$WORK/pipe.err" ||
	bad "mkfs -d on a pipe failed: $(cat "$WORK/pipe.err")"
[ -s "$WORK/pipe.err" ] && bad "progress on a pipe: stderr has $(od -c "$WORK/pipe.err" | head -5)"
grep -q $'\r' "$WORK/pipe.out" && bad "a bar on a pipe"
tail -1 "$WORK/pipe.out" | grep -q 'members, .* in [0-9.]* s' ||
	bad "no summary on a pipe: $(tail -2 "$WORK/pipe.out")"
rm -f "$WORK/p4.img"
"$UEXT4" mkfs -b 4096 -q -d "$TAR.gz" "$WORK/p4.img" 256M > "$WORK/pipeq.out" 2>&1 ||
	bad "mkfs -q -d failed: $(cat "$WORK/pipeq.out")"
[ -s "$WORK/pipeq.out" ] && bad "-q printed: $(head -3 "$WORK/pipeq.out")"
[ "$FAILS" = "$before" ] && echo "ok: on a pipe the summary only: $(tail -1 "$WORK/pipe.out")"

[ "$FAILS" = 0 ] || fail "$FAILS check(s) failed"
echo "PASS"
