#!/bin/bash
# populate.sh - uext4_populate() of a generated tree (tests/mktree.sh: every
# file type, holes, hard links, xattrs, ACLs, long names, a 50,000-entry
# directory and a 5 GiB sparse file in release; the lite tree under the
# sanitizers) into a fresh image, compared with the source:
#   - through libuext4 (walk lib) and through the kernel (walk posix on a
#     read-only loop mount): modes, owners, sizes, links, nanosecond atime
#     and mtime, data, xattrs and ACLs must equal the source's (ctime is the
#     copy's, by design; directory sizes and block counts are ext4's own);
#   - sparseness: every file with holes has the source's data ranges
#     (SEEK_DATA/SEEK_HOLE on the kernel mount) and no more blocks than its
#     data needs (plus extent blocks); every file without holes is one
#     physically contiguous run (FIEMAP);
#   - chattr flags (+i +a +d +A where the source file system has them),
#     --root-owner, clamped times, no_copy_xattrs;
#   - e2fsck -fn clean after each fill.
# Images are made by `uext4 mkfs -d`.
# test-timeout: 600
set -uo pipefail
. "$(dirname "$0")/lib.sh"
setup_traps

[ -x "$WALK" ] || fail "$WALK not built (run make)"
case "$UEXT4_BUILD" in
*asan* | *tsan*) KIND=lite ;;
*) KIND=${POPULATE_TREE:-all} ;;
esac
WORK=$(mktemp_dir)
# fill IMG SIZE SRC [-N n] [-j n] [-r uid:gid] [-c clamp] [-x]: a new image
# of SIZE holding SRC.
fill() {
	local img=$1 size=$2 src=$3 n=() jo=() r=() x=() env=()
	shift 3
	while [ $# -gt 0 ]; do
		case "$1" in
		-N) n=(-N "$2"); shift ;;
		-j) [ "$2" = 0 ] || jo=(-j "$2"); shift ;;   # no -j: every CPU
		-r) r=("--root-owner=$2"); shift ;;
		-c) env=("SOURCE_DATE_EPOCH=$2"); shift ;;
		-x) x=(--no-copy-xattrs) ;;
		esac
		shift
	done
	rm -f "$img"
	env "${env[@]}" "$UEXT4" mkfs -q "${n[@]}" "${jo[@]}" "${r[@]}" "${x[@]}" -d "$src" "$img" "$size"
}

# Fields the copy must keep; the root's nlink counts lost+found in the image.
WOPTS=(--no-ino --no-ctime --no-blocks --no-dirsize --exclude=lost+found)
dump() { # dump posix|lib PATH OUT
	"$WALK" "${WOPTS[@]}" "$1" "$2" | sed '1s/ nlink=[0-9]*//' > "$3"
}

TREE=$(tree_get "$KIND") || fail "could not generate the $KIND tree"
note "tree $KIND: $TREE ($(find "$TREE" | wc -l) paths)"
# One walk first: reading updates atimes once (relatime), later reads do not.
"$WALK" posix "$TREE" > /dev/null
dump posix "$TREE" "$WORK/src.txt"

# ---------------------------------------------------------------- the tree
IMG=$WORK/tree.img
START=$(date +%s.%N)
if ! fill "$IMG" 3G "$TREE" -N 200000 -j 0 > "$WORK/pop.out" 2>&1; then
	cat "$WORK/pop.out"
	fail "populate of the $KIND tree failed"
fi
cat "$WORK/pop.out"
echo "fill: $(awk -v a="$START" -v b="$(date +%s.%N)" 'BEGIN {printf "%.2f", b - a}') s"
fsck_clean "$IMG" || bad "e2fsck -fn after populate"
dump lib "$IMG" "$WORK/lib.txt" || bad "walk lib reported errors"
compare_dumps "source vs walk lib" "$WORK/src.txt" "$WORK/lib.txt"

if can_loop; then
	MNT=$WORK/mnt
	mkdir -p "$MNT"
	kmount "$IMG" "$MNT" || fail "kernel mount"
	dump posix "$MNT" "$WORK/kernel.txt" || bad "walk posix on the kernel mount reported errors"
	compare_dumps "source vs the kernel's view" "$WORK/src.txt" "$WORK/kernel.txt"
	# Sparseness: data maps equal, and no block beyond the data (+ extent blocks).
	python3 - "$TREE" "$MNT" <<'EOF' || bad "sparseness differs"
import os, sys
src, mnt = sys.argv[1], sys.argv[2]
def ranges(p):
    fd = os.open(p, os.O_RDONLY)
    try:
        size, off, out = os.fstat(fd).st_size, 0, []
        while off < size:
            try:
                d = os.lseek(fd, off, os.SEEK_DATA)
            except OSError:
                break
            h = os.lseek(fd, d, os.SEEK_HOLE)
            out.append((d, h))
            off = h
        return out
    finally:
        os.close(fd)
checked = bad = 0
for root, dirs, files in os.walk(src):
    for f in files:
        p = os.path.join(root, f)
        st = os.lstat(p)
        if not os.path.isfile(p) or os.path.islink(p) or st.st_blocks * 512 >= st.st_size:
            continue
        q = os.path.join(mnt, os.path.relpath(p, src))
        qs = os.lstat(q)
        checked += 1
        a, b = ranges(p), ranges(q)
        if a != b:
            bad += 1
            print("FAIL: %s: data ranges %s, image %s" % (p, a[:4], b[:4]))
        elif qs.st_blocks * 512 > st.st_blocks * 512 + 64 * 1024:
            bad += 1
            print("FAIL: %s: %d bytes allocated in the image, %d in the source" %
                  (p, qs.st_blocks * 512, st.st_blocks * 512))
print("sparse files checked: %d, bad: %d" % (checked, bad))
sys.exit(1 if bad or not checked else 0)
EOF
	# Each file's blocks contiguous (FIEMAP on the kernel mount): a file
	# without holes has one physical run (split only where an extent ends).
	python3 - "$TREE" "$MNT" <<'EOF' || bad "files are not contiguous"
import fcntl, os, struct, sys
src, mnt = sys.argv[1], sys.argv[2]
FS_IOC_FIEMAP, N = 0xC020660B, 64
def extents(p):
    fd = os.open(p, os.O_RDONLY)
    try:
        buf = bytearray(struct.pack("=QQIIII", 0, 2**64 - 1, 0, 0, N, 0) + bytes(56 * N))
        fcntl.ioctl(fd, FS_IOC_FIEMAP, buf)
        n = struct.unpack_from("=I", buf, 20)[0]
        return [struct.unpack_from("=QQQ", buf, 32 + 56 * i) for i in range(n)]
    finally:
        os.close(fd)
files = frag = 0
for root, dirs, names in os.walk(src):
    for f in names:
        p = os.path.join(root, f)
        st = os.lstat(p)
        if not os.path.isfile(p) or os.path.islink(p) or st.st_size == 0 or st.st_blocks * 512 < st.st_size:
            continue
        files += 1
        ex = extents(os.path.join(mnt, os.path.relpath(p, src)))
        if any(ex[i][1] != ex[i - 1][1] + ex[i - 1][2] for i in range(1, len(ex))):
            frag += 1
            if frag <= 5:
                print("FAIL: %s: extents %s" % (p, ex[:4]))
print("files without holes: %d, not contiguous: %d" % (files, frag))
sys.exit(1 if frag else 0)
EOF
	kumount "$MNT"
else
	echo "NOTE: not root or no loop device: the kernel's view was not compared"
fi

# ---------------------------------------------------------------- options and flags
SRC2=$WORK/flags
mkdir -p "$SRC2/d" && echo data > "$SRC2/imm" && echo log > "$SRC2/app" &&
	echo x > "$SRC2/d/nodump" && : > "$SRC2/empty-imm" && echo y > "$SRC2/noatime"
setfattr -n user.k -v v "$SRC2/d/nodump" 2> /dev/null
touch -d '2030-01-01 00:00:00.5 UTC' "$SRC2/d/nodump" "$SRC2/imm"
touch -d '2001-01-01 00:00:00 UTC' "$SRC2/app"
FLAGS_OK=1
for f in "+i imm" "+a app" "+d d/nodump" "+i empty-imm" "+A noatime" "+d d"; do
	set -- $f
	chattr "$1" "$SRC2/$2" 2> /dev/null || FLAGS_OK=0
done
IMG2=$WORK/opts.img
CLAMP=$(date -d '2020-01-01 UTC' +%s)
fill "$IMG2" 64M "$SRC2" -j 2 -r 1234:5678 -c "$CLAMP" > "$WORK/pop2.out" 2>&1 ||
	{ cat "$WORK/pop2.out"; bad "populate with options failed"; }
fsck_clean "$IMG2" || bad "e2fsck -fn after populate with options"
out=$("$UEXT4" stat "$IMG2" / 2>&1)
grep -q "1234" <<< "$out" && grep -q "5678" <<< "$out" || bad "root owner not 1234:5678: $out"
# Times after the clamp became the clamp; the 2001 one stayed.
"$WALK" --no-ino --no-ctime --exclude=lost+found lib "$IMG2" > "$WORK/opts.txt"
grep -q "^./d/nodump .*mtime=$CLAMP.000000000" "$WORK/opts.txt" || bad "2030 mtime not clamped: $(grep nodump "$WORK/opts.txt")"
grep -q "^./app .*mtime=$(date -d '2001-01-01 UTC' +%s).000000000" "$WORK/opts.txt" || bad "2001 mtime changed: $(grep app "$WORK/opts.txt")"
if [ "$FLAGS_OK" = 1 ]; then
	for f in "i imm" "a app" "d d/nodump" "i empty-imm" "A noatime" "d d"; do
		set -- $f
		attrs=$("$UEXT4" lsattr "$IMG2" "/$2" 2>&1)
		grep -q -- "^[^ ]*$1" <<< "$attrs" && echo "ok: /$2 has +$1 ($attrs)" || bad "/$2: no +$1: $attrs"
	done
else
	echo "NOTE: the source file system has no chattr flags: flags not checked"
fi
for f in imm app empty-imm; do chattr -i -a "$SRC2/$f" 2> /dev/null; done
# no_copy_xattrs
fill "$IMG2" 64M "$SRC2" -x > /dev/null 2>&1 || bad "populate -x failed"
"$WALK" --no-ino --exclude=lost+found lib "$IMG2" | grep -v 'xattr=-' | grep . &&
	bad "no_copy_xattrs: xattrs copied"
fsck_clean "$IMG2" || bad "e2fsck -fn after populate -x"

[ "$FAILS" = 0 ] || fail "$FAILS checks failed"
echo "PASS"
