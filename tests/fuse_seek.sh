#!/bin/bash
# fuse_seek.sh - SEEK_DATA / SEEK_HOLE on sparse files, against the kernel.
#
# For each image kind (4 KiB and 1 KiB ext4, inline_data, ext3's block
# maps), the same sparse files are made twice in a fresh image: by the
# kernel's ext4 on a loop mount (k/) and through the uext4 mount (u/), with
# dd seek=, fallocate (unwritten extents, keep-size beyond EOF), fallocate
# --punch-hole, truncate, small and empty files, and a file of alternating
# blocks (an extent tree with index blocks).  e2fsck -fn must be clean.
# Then at many offsets of every file (every 1000 bytes, each block boundary
# and its neighbours, the end of file +-1, past it) lseek(2) SEEK_DATA and
# SEEK_HOLE must answer the same on a fresh kernel mount (no cached pages:
# unwritten extents are holes), on a read-only uext4 mount, on the
# read-write uext4 mount that wrote u/ (its dirty pages are written back
# first), and through the library call uext4_lseek().
# test-timeout: 300
set -uo pipefail
. "$(dirname "$0")/lib.sh"
fuse_test python3 fallocate:util-linux
need_loop
need_helper SEEK fuse_seek

# probe.py DIR: "NAME OFFSET DATA HOLE" lines for every file of DIR.
cat > "$T/probe.py" << 'PY'
import errno, os, sys
def offsets(size, bs):
    # about 1500 probes a file, whatever its size
    end = size + 2 * bs
    offs = set(range(0, end, max(997, end // 500)))
    for b in range(0, end, bs * max(1, end // (bs * 300))):
        offs.update((b - 1, b, b + 1))
    offs.update((size - 1, size, size + 1, size + 10**6))
    return sorted(o for o in offs if o >= 0)
def res(fd, off, whence):
    try:
        return str(os.lseek(fd, off, whence))
    except OSError as e:
        return errno.errorcode[e.errno]
top, bs = sys.argv[1], int(sys.argv[2])
mode = sys.argv[3] if len(sys.argv) > 3 else "lseek"
for name in sorted(os.listdir(top)):
    path = os.path.join(top, name)
    size = os.stat(path).st_size
    offs = offsets(size, bs)
    if mode == "offsets":   # for the library helper
        print(name, " ".join(map(str, offs)))
        continue
    fd = os.open(path, os.O_RDONLY)
    for o in offs:
        print(name, o, res(fd, o, os.SEEK_DATA), res(fd, o, os.SEEK_HOLE))
    os.close(fd)
PY

# make_files DIR BLOCKSIZE: the sparse files (fallocate may be refused on
# block-mapped files, by both: then the file is what the earlier steps made).
make_files() {
	local d=$1 bs=$2
	mkdir -p "$d" || return 1
	dd if=/dev/urandom of="$d/dd" bs="$bs" seek=10 count=3 status=none
	dd if=/dev/urandom of="$d/dd" bs="$bs" seek=100 count=1 conv=notrunc status=none
	dd if=/dev/urandom of="$d/dd" bs=1 seek=$((bs * 200 + 17)) count=5 conv=notrunc status=none
	fallocate -l $((bs * 64)) "$d/falloc" 2> /dev/null
	dd if=/dev/urandom of="$d/falloc" bs="$bs" seek=20 count=2 conv=notrunc status=none
	fallocate -k -o $((bs * 80)) -l $((bs * 16)) "$d/falloc" 2> /dev/null
	dd if=/dev/urandom of="$d/punch" bs="$bs" count=100 status=none
	fallocate --punch-hole -o $((bs * 10 + 100)) -l $((bs * 20)) "$d/punch" 2> /dev/null
	fallocate --punch-hole -o $((bs * 99)) -l "$bs" "$d/punch" 2> /dev/null
	truncate -s 10M "$d/trunc"
	printf 'tail' | dd of="$d/trunc" bs=1 seek=$((5 * 1024 * 1024)) conv=notrunc status=none
	dd if=/dev/urandom of="$d/shrunk" bs="$bs" count=40 status=none
	truncate -s $((bs * 7 + 300)) "$d/shrunk"
	truncate -s $((bs * 30 + 1)) "$d/shrunk"
	printf 'small file\n' > "$d/small"
	: > "$d/empty"
	truncate -s 1G "$d/bighole"
	for i in $(seq 0 2 800); do
		printf 'b%d' "$i" | dd of="$d/alt" bs="$bs" seek="$i" conv=notrunc status=none
	done
	sync -f "$d"
}

run_probes() { # run_probes TOP BS OUT: probe k/ and u/ under TOP
	{ python3 "$T/probe.py" "$1/k" "$2" | sed 's/^/k\//'
	  python3 "$T/probe.py" "$1/u" "$2" | sed 's/^/u\//'; } > "$3"
}

lib_probes() { # lib_probes IMAGE TOP BS OUT: the same through uext4_lseek()
	local sub name offs
	: > "$4"
	for sub in k u; do
		python3 "$T/probe.py" "$2/$sub" "$3" offsets | while read -r name offs; do
			# shellcheck disable=SC2086
			"$SEEK" "$1" "/$sub/$name" $offs | sed "s|^|$sub/$name |" || echo "helper failed on $sub/$name"
		done >> "$4"
	done
}

compare() { # compare WHAT EXPECTED GOT
	if ! cmp -s "$2" "$3"; then
		diff "$2" "$3" | head -20
		fail "$1 differs from the kernel's SEEK_DATA/SEEK_HOLE ($(wc -l < "$2") probes)"
	fi
}

for kind in 4k 1k inline ext3; do
	case $kind in
	4k) mkopts="-t ext4 -b 4096" bs=4096 ;;
	1k) mkopts="-t ext4 -b 1024" bs=1024 ;;
	inline) mkopts="-t ext4 -b 4096 -O inline_data" bs=4096 ;;
	ext3) mkopts="-t ext3 -b 4096" bs=4096 ;;
	esac
	note "$kind: $mkopts"
	img=$T/$kind.img km=$T/$kind.k fm=$T/$kind.f
	mkdir -p "$km" "$fm"
	rm -f "$img"
	# shellcheck disable=SC2086
	mke2fs -q -F $mkopts "$img" 256M || fail "mke2fs $mkopts"
	kmount "$img" "$km" rw || fail "kernel mount of $img"
	make_files "$km/k" "$bs" || fail "making files on the kernel mount"
	umount "$km" || fail "umount $km"
	fuse_mount_fg "$img" "$fm" || fail "uext4 mount failed"
	make_files "$fm/u" "$bs" || fail "making files on the uext4 mount"
	run_probes "$fm" "$bs" "$T/$kind.rw" || fail "probe on the uext4 read-write mount"
	fuse_umount "$fm"
	fsck_clean "$img" || fail "$kind: e2fsck after writing through both"
	kmount "$img" "$km" || fail "kernel mount of $img"
	run_probes "$km" "$bs" "$T/$kind.kernel" || fail "probe on the kernel mount"
	umount "$km"
	fuse_mount "$img" "$fm" || fail "read-only uext4 mount"
	run_probes "$fm" "$bs" "$T/$kind.ro" || fail "probe on the uext4 read-only mount"
	lib_probes "$img" "$fm" "$bs" "$T/$kind.lib"
	fuse_umount "$fm"
	grep -q . "$T/$kind.kernel" || fail "$kind: no probes"
	compare "$kind: uext4 read-only mount" "$T/$kind.kernel" "$T/$kind.ro"
	compare "$kind: uext4 read-write mount" "$T/$kind.kernel" "$T/$kind.rw"
	compare "$kind: uext4_lseek()" "$T/$kind.kernel" "$T/$kind.lib"
	echo "$kind: $(wc -l < "$T/$kind.kernel") probes agree, $(awk '$3 == "ENXIO"' "$T/$kind.kernel" | wc -l) of them ENXIO for SEEK_DATA"
done
san_check || fail "sanitizer reports"
echo "fuse_seek: OK"
