#!/bin/bash
# populate_tar.sh - tarballs into images (uext4_populate_archive, through
# the populate_tar driver into mke2fs-made images):
#   - the lite tree archived by GNU tar (xattrs, ACLs, sparse, pax) as .tar,
#     .tar.gz, .tar.xz, .tar.zst and through stdin: each image compared
#     with the source (walk lib against walk posix of the tree), and the
#     .tar one with the kernel's view of it (walk posix on a read-only loop
#     mount against walk lib), e2fsck -fn clean;
#   - twice with a fixed time, UUID and hash seed: identical bytes;
#   - bad tarballs (python3 tarfile): absolute paths, ../ escapes,
#     duplicates, hard links to missing targets, garbage, truncation: the
#     documented result, a message naming the member, e2fsck clean;
#   - out of inodes and out of blocks: the message names the member and
#     what ran out; marked (-m) the superblock shows the error.
# test-timeout: 600
set -uo pipefail
. "$(dirname "$0")/lib.sh"
setup_traps

DRV=$UEXT4_BUILD/tests/populate_tar
[ -x "$DRV" ] || fail "$DRV not built (run make)"
[ -x "$WALK" ] || fail "$WALK not built (run make)"
command -v python3 > /dev/null || skip "python3 missing"
tar --version 2> /dev/null | grep -q 'GNU tar' || skip "GNU tar missing"
WORK=$(mktemp_dir)
FAILED=0
bad() { echo "FAIL: $*"; FAILED=$((FAILED + 1)); }
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

# compare WHAT A B: two dumps must be identical.
compare() {
	if cmp -s "$2" "$3"; then
		echo "ok: $1 ($(wc -l < "$2") paths identical)"
	else
		bad "$1 differs; first differences:"
		diff -u "$2" "$3" | head -30 | cut -c1-300
	fi
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
for z in xz zstd; do
	if command -v $z > /dev/null; then $z -q -c "$TAR" > "$TAR.${z/zstd/zst}"; fi
done
ls -l "$WORK"/t.tar*

# fill_check NAME ARCHIVE|- [stdin-file]: fill a fresh image, compare with the source.
fill_check() {
	local name=$1 src=$2 img=$WORK/$1.img
	new_image "$img"
	if [ "$src" = - ]; then
		"$DRV" "$img" - < "$3" > "$WORK/$name.out" 2> "$WORK/$name.err"
	else
		"$DRV" "$img" "$src" > "$WORK/$name.out" 2> "$WORK/$name.err"
	fi || { bad "$name: fill failed: $(cat "$WORK/$name.err")"; return 1; }
	"$WALK" "${SRC_OPTS[@]}" lib "$img" | src_filter > "$WORK/$name.txt" ||
		bad "$name: walk lib reported errors"
	compare "$name: source tree vs walk lib" "$WORK/src.txt" "$WORK/$name.txt"
	fsck_clean "$img" || bad "$name: e2fsck"
	# The progress callback ran, counted every member, and read to the end.
	read -r _ calls files bytes total rest < "$WORK/$name.out"
	[ "$calls" -gt 0 ] && [ "$files" -ge "$(wc -l < "$WORK/src.txt")" ] && [ -z "$rest" ] ||
		bad "$name: progress reports: $(cat "$WORK/$name.out")"
	if [ "$src" != - ]; then
		[ "$total" = "$(stat -c %s "$src")" ] && [ "$bytes" = "$total" ] ||
			bad "$name: progress bytes $bytes/$total, archive $(stat -c %s "$src") bytes"
	fi
}

note "fills"
fill_check tar "$TAR"
fill_check gz "$TAR.gz"
[ -e "$TAR.xz" ] && fill_check xz "$TAR.xz"
[ -e "$TAR.zst" ] && fill_check zst "$TAR.zst"
fill_check stdin - "$TAR.gz"

note "a 5 GiB sparse file (mktree's sparse part at full size), owners and xattrs options"
BIG=$(tree_get sparse) || fail "could not generate the sparse tree"
tar -C "$BIG" --sparse --format=posix -cf "$WORK/sparse.tar" . || fail "tar -c sparse"
ls -l "$WORK/sparse.tar"
new_image "$WORK/sparse.img"
if "$DRV" -r 4321:8765 -X "$WORK/sparse.img" "$WORK/sparse.tar" > /dev/null 2> "$WORK/sparse.err"; then
	"$WALK" "${SRC_OPTS[@]}" posix "$BIG" | src_filter | grep -v '^\. ' > "$WORK/sparse-src.txt"
	"$WALK" "${SRC_OPTS[@]}" lib "$WORK/sparse.img" | src_filter > "$WORK/sparse-lib.txt"
	grep -v '^\. ' "$WORK/sparse-lib.txt" > "$WORK/sparse-lib-body.txt"
	compare "sparse: source tree vs walk lib" "$WORK/sparse-src.txt" "$WORK/sparse-lib-body.txt"
	grep -q '^\. type=d mode=0755 uid=4321 gid=8765 ' "$WORK/sparse-lib.txt" ||
		bad "-r 4321:8765: the root is $(grep '^\. ' "$WORK/sparse-lib.txt")"
	fsck_clean "$WORK/sparse.img" || bad "sparse: e2fsck"
else
	bad "sparse: fill failed: $(cat "$WORK/sparse.err")"
fi
new_image "$WORK/nox.img"
"$DRV" -X "$WORK/nox.img" "$TAR" > /dev/null 2> "$WORK/nox.err" || bad "-X fill: $(cat "$WORK/nox.err")"
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
		compare "kernel vs walk lib" "$WORK/kernel.txt" "$WORK/lib.txt"
	else
		bad "kernel mount of the .tar image failed"
	fi
else
	echo "NOTE: no loop device or not root: the kernel comparison did not run"
fi

note "reproducible: twice with a fixed time gives the same bytes"
rfail=0
for i in 1 2; do
	new_image "$WORK/r$i.img"
	"$DRV" -e "$EPOCH" "$WORK/r$i.img" "$TAR.gz" > /dev/null 2> "$WORK/r$i.err" ||
		{ bad "fixed-time fill $i: $(cat "$WORK/r$i.err")"; rfail=1; }
done
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

def add(t, name, data=None, type=tarfile.REGTYPE, link="", mode=0o644, mtime=1600000000):
    i = tarfile.TarInfo(name)
    i.type, i.linkname, i.mode, i.mtime = type, link, mode, mtime
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

[ "$FAILED" = 0 ] || fail "$FAILED check(s) failed"
echo "PASS"
