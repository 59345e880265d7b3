#!/bin/bash
# mkfs.sh - uext4 mkfs makes file systems that e2fsck, dumpe2fs, the kernel
# and resize2fs accept, matching mke2fs 1.47's superblock.
#
#   1. Variants (block sizes; each optional feature on and off; ext2, ext3,
#      uninit_bg without metadata_csum; -N, -I 128, -G, -L, -m, -J, -E): each
#      image is e2fsck -fn clean and its `dumpe2fs -h` equals that of
#      mke2fs -t ext4 -O orphan_file,metadata_csum_seed with the same
#      options, -U, -E hash_seed and fixed time (E2FSPROGS_FAKE_TIME and
#      SOURCE_DATE_EPOCH), but for the fields docs/mkfs.md documents:
#      "Lifetime writes" (what each tool wrote) and "Checksum" (of the
#      superblock, which holds that count); full `dumpe2fs` must run.
#      Then random sizes (1 MiB to 3 GiB, not multiples of anything) with
#      random block sizes and options, the seed printed (MKFS_SEED repeats).
#   2. Sizes 8 MiB to 16 TiB (sparse; 16 TiB only where the directory's file
#      system allows such a file): the same checks; the 16 TiB mkfs must take
#      under 1 s in a release build (timed, printed).
#   3. The kernel mounts images read-write (default, 1k blocks, ext3, ext2,
#      no metadata_csum), a tree is written and removed in part, unmount,
#      e2fsck -fn clean.
#      A loop device full of random bytes (no zeros to rely on), made with
#      the defaults, -t ext2 and -E lazy_itable_init=0: the same.
#      uext4 itself writes into images of each type (put, mkdir, rm).
#   4. resize2fs grows one offline; the kernel grows one online (resize2fs
#      on the mounted loop device after growing the file and losetup -c);
#      e2fsck -fn clean after each.
#   5. -F: without it an existing file system (ours, mke2fs's, an XFS magic)
#      is refused, naming it, and the image stays byte-identical (cmp); with
#      it the image is remade.  Even -F refuses a device the kernel has
#      mounted and an image a uext4 mount holds.  -n writes nothing and creates nothing.
#   6. -E offset=: the bytes before the offset are unchanged (cmp), the file
#      system there is clean (e2fsck through losetup -o) and the kernel
#      mounts it.
#   7. Reproducible: two runs with SOURCE_DATE_EPOCH, -U and -E hash_seed=
#      are byte-identical (cmp); without them two runs differ.
#   8. Bad arguments exit 2 with a message naming what is wrong.
#   9. uext4 mount --create makes a missing image and mounts it.
# Sanitizer builds run fewer variants and sizes (MKFS_QUICK=1 does too).
# test-timeout: 300
set -uo pipefail
. "$(dirname "$0")/lib.sh"
setup_traps
need mke2fs:e2fsprogs dumpe2fs:e2fsprogs
need_built "$UEXT4"
export TZ=UTC LC_ALL=C
scratch_on_tmpfs
D=$(mktemp_dir)
QUICK=${MKFS_QUICK:-0}
case "$UEXT4_BUILD" in */asan | */tsan) QUICK=1 ;; esac
UUID=6f1d0c2e-5b4a-4e39-8d27-1c0b9a887766
SEED=0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d
TIME=1700000000

# ours IMG SIZE OPTS...: uext4 mkfs with the fixed identity
ours() {
	local img=$1 size=$2
	shift 2
	SOURCE_DATE_EPOCH=$TIME "$UEXT4" mkfs -q -U "$UUID" "$@" "$img" "$size"
}
# theirs IMG SIZE OPTS...: mke2fs the same way (orphan_file and
# metadata_csum_seed are uext4's additions to the ext4 defaults)
theirs() {
	local img=$1 size=$2 add=-Oorphan_file,metadata_csum_seed t="-t ext4"
	shift 2
	case " $* " in
	*" -t ext2 "* | *" -t ext3 "*) add= t= ;;
	*"^has_journal"*) add=-Ometadata_csum_seed ;;
	*"^metadata_csum"*) add=-Oorphan_file ;;
	esac
	rm -f "$img"
	truncate -s "$size" "$img" || return 1
	E2FSPROGS_FAKE_TIME=$TIME mke2fs -q -F $t -U "$UUID" $add "$@" "$img" > "$img.log" 2>&1
}
# header_diff A B: dumpe2fs -h lines that differ, minus the documented ones
header_diff() {
	diff <(dumpe2fs -h "$1" 2>&1) <(dumpe2fs -h "$2" 2>&1) | grep '^[<>]' |
		grep -v -e '^. Lifetime writes:' -e '^. Checksum:  '
}
# check_variant SIZE OPTS...: ours is clean, dumpe2fs reads it, its header
# matches mke2fs's.  -E options come with hash_seed= added.
VARIANTS=0
check_variant() {
	local size=$1 a=$D/ours.img b=$D/theirs.img ext="hash_seed=$SEED" o=() x
	shift
	for x in "$@"; do
		case "$x" in -E*) ext+=",${x#-E}" ;; *) o+=("$x") ;; esac
	done
	rm -f "$a" "$b"
	ours "$a" "$size" -E "$ext" "${o[@]}" || fail "uext4 mkfs $size $* failed"
	fsck_clean "$a" || fail "mkfs $size $*: e2fsck"
	dumpe2fs "$a" > "$D/dump.out" 2>&1 || { cat "$D/dump.out"; fail "mkfs $size $*: dumpe2fs"; }
	if theirs "$b" "$size" -E "$ext" "${o[@]}"; then
		local d
		d=$(header_diff "$a" "$b")
		[ -z "$d" ] || { echo "$d"; fail "mkfs $size $*: dumpe2fs -h differs from mke2fs's"; }
	else
		cat "$b.log"
		fail "mke2fs $size $* failed (test bug?)"
	fi
	VARIANTS=$((VARIANTS + 1))
	rm -f "$a" "$b"
}

note "1. variants: block sizes and features, against mke2fs"
for bs in 1024 2048 4096; do check_variant 300M -b $bs; done
FEATURES="has_journal extent,^64bit 64bit flex_bg metadata_csum metadata_csum_seed orphan_file
	resize_inode dir_index huge_file dir_nlink extra_isize"
[ "$QUICK" = 1 ] && FEATURES="has_journal metadata_csum resize_inode orphan_file"
for f in $FEATURES; do
	# -O ^extent also needs ^64bit (as mke2fs says)
	case "$f" in extent,^64bit) check_variant 300M -O ^extent,^64bit ;;
	*) check_variant 300M -O "^$f" ;;
	esac
done
check_variant 300M -O ^sparse_super,^resize_inode
check_variant 300M -O ^metadata_csum,uninit_bg
check_variant 300M -t ext2
check_variant 300M -t ext3
check_variant 300M -t ext2 -O uninit_bg
if [ "$QUICK" = 0 ]; then
	check_variant 300M -t ext3 -b 4096
	check_variant 300M -N 100
	check_variant 300M -I 128
	check_variant 300M -i 65536 -G 4 -L label-x -m 1
	check_variant 300M -J size=16 -Eroot_owner=1000:1000 -Eorphan_file_size=64
	check_variant 1G -b 1024 -O ^flex_bg
fi
note "$VARIANTS variants clean and equal to mke2fs's"

note "1b. random sizes and options against mke2fs"
SEED_R=${MKFS_SEED:-$RANDOM}
echo "seed $SEED_R (MKFS_SEED=$SEED_R repeats it)"
RANDOM=$SEED_R
ROPTS=("" "-t ext3" "-t ext2" "-O ^flex_bg" "-I 128" "-O ^metadata_csum,uninit_bg" "-G 2"
	"-G 64" "-O ^resize_inode" "-O ^extent,^64bit" "-m 0")
N_RANDOM=8
[ "$QUICK" = 1 ] && N_RANDOM=2
for ((i = 0; i < N_RANDOM; i++)); do
	size=$(((RANDOM * 32768 + RANDOM) % 3000000 + 1100))K
	# shellcheck disable=SC2206
	opt=(-b $((1024 << (RANDOM % 3))) ${ROPTS[RANDOM % ${#ROPTS[@]}]})
	[ $((RANDOM % 4)) = 0 ] && opt+=(-N $((RANDOM * 3 + 20)))
	[ $((RANDOM % 4)) = 0 ] && opt+=(-i $((4096 << (RANDOM % 5))))
	check_variant "$size" "${opt[@]}"
	echo "  $size ${opt[*]}: clean, equal"
done

note "2. sizes"
SIZES="8M 64M 511M 1G 100G 5T"
[ "$QUICK" = 1 ] && SIZES="8M 1G 5T"
for s in $SIZES; do check_variant "$s"; done
big=$D/big.img
if truncate -s 16T "$big" 2> /dev/null; then
	rm -f "$big"
	start=$(date +%s%N)
	"$UEXT4" mkfs -q "$big" 16T || fail "16 TiB mkfs failed"
	ms=$((($(date +%s%N) - start) / 1000000))
	echo "16 TiB sparse image: ${ms} ms, $(du -k "$big" | cut -f1) KiB allocated"
	case "$UEXT4_BUILD" in */asan | */tsan) ;;
	*) [ "$ms" -lt 1000 ] || fail "16 TiB mkfs took $ms ms (want under 1 s)" ;;
	esac
	fsck_clean "$big" || fail "16 TiB: e2fsck"
	if can_loop; then
		mkdir -p "$D/m"
		kmount "$big" "$D/m" rw && cp -a "$TOP/src" "$D/m/" && kumount "$D/m" ||
			fail "the kernel's read-write mount of the 16 TiB image"
		fsck_clean "$big" || fail "16 TiB: e2fsck after the kernel wrote"
		echo "16 TiB: the kernel mounted it read-write and wrote; e2fsck clean"
	fi
	rm -f "$big"
	[ "$QUICK" = 1 ] || check_variant 16T
else
	echo "16 TiB: $(stat -f -c %T "$D") does not allow a 16 TiB file here: size not checked"
fi

# a tree the kernel writes: files, a directory of 2000 entries, links
write_tree() {
	local m=$1 i
	mkdir -p "$m/a/b/c" "$m/big" || return 1
	cp -a "$TOP/src" "$m/a/src" || return 1
	for ((i = 0; i < 2000; i++)); do : > "$m/big/entry-$i"; done
	dd if=/dev/urandom of="$m/a/b/c/data" bs=1M count=3 status=none || return 1
	ln "$m/a/b/c/data" "$m/a/hard" && ln -s ../a/b/c/data "$m/big/sym" || return 1
	rm -f "$m"/big/entry-1?? || return 1
	cmp "$m/a/b/c/data" "$m/a/hard" || return 1
}

if can_loop; then
	note "3. kernel read-write"
	KINDS=("" "-b 1024" "-t ext3" "-t ext2" "-O ^metadata_csum,^64bit")
	[ "$QUICK" = 1 ] && KINDS=("" "-t ext3")
	for k in "${KINDS[@]}"; do
		img=$D/k.img
		rm -f "$img"
		# shellcheck disable=SC2086
		"$UEXT4" mkfs -q $k "$img" 256M || fail "mkfs $k"
		mkdir -p "$D/m"
		kmount "$img" "$D/m" rw || fail "kernel mount of mkfs $k"
		write_tree "$D/m" || fail "writing on the kernel mount of mkfs $k"
		kumount "$D/m" || fail "umount"
		fsck_clean "$img" || fail "mkfs $k: e2fsck after the kernel wrote"
		echo "mkfs ${k:-(defaults)}: kernel wrote a tree, e2fsck clean"
	done

	note "3b. a block device holding random bytes"
	head -c 128M /dev/urandom > "$D/bd.img"
	dev=$(losetup -f --show "$D/bd.img") || fail "losetup"
	for k in "" "-t ext2" "-E lazy_itable_init=0"; do
		# shellcheck disable=SC2086
		"$UEXT4" mkfs -q -F $k "$dev" || { losetup -d "$dev"; fail "mkfs $k on $dev"; }
		e2fsck -fn "$dev" > "$D/bd.fsck" 2>&1 || { cat "$D/bd.fsck"; losetup -d "$dev"; fail "mkfs $k on a device: e2fsck"; }
		mkdir -p "$D/m"
		mount -t ext4 "$dev" "$D/m" && write_tree "$D/m" ||
			{ losetup -d "$dev"; fail "kernel write on the device made by mkfs $k"; }
		out=$("$UEXT4" mkfs -q -F "$dev" 2>&1) && fail "mkfs -F of a mounted device worked"
		grep -q "in use" <<< "$out" || fail "mkfs -F of a mounted device says: $out"
		umount "$D/m" || fail "umount $dev"
		e2fsck -fn "$dev" > "$D/bd.fsck" 2>&1 || { cat "$D/bd.fsck"; losetup -d "$dev"; fail "mkfs $k on a device: e2fsck after the kernel"; }
		echo "block device, mkfs ${k:-(defaults)}: e2fsck clean, kernel wrote, clean"
	done
	out=$("$UEXT4" mkfs -q "$dev" 2>&1) && { losetup -d "$dev"; fail "mkfs over the device's file system without -F worked"; }
	losetup -d "$dev"
	rm -f "$D/bd.img"

	note "4. resize2fs offline and online"
	if command -v resize2fs > /dev/null; then
		img=$D/r.img
		rm -f "$img"
		"$UEXT4" mkfs -q "$img" 256M || fail "mkfs"
		truncate -s 1G "$img"
		resize2fs "$img" > "$D/resize.log" 2>&1 || { cat "$D/resize.log"; fail "resize2fs offline"; }
		fsck_clean "$img" || fail "e2fsck after resize2fs offline"
		[ "$(dumpe2fs -h "$img" 2> /dev/null | sed -n 's/^Block count: *//p')" = 1048576 ] ||
			fail "offline resize: block count is not 1048576 1k blocks"
		echo "offline: 256M -> 1G (into the reserved GDT blocks), e2fsck clean"
		rm -f "$img"
	fi
	# The kernel's EXT4_IOC_RESIZE_FS needs CAP_SYS_RESOURCE (bit 24).
	capeff=$(sed -n 's/^CapEff:\t*//p' /proc/self/status)
	if ! command -v resize2fs > /dev/null; then
		:
	elif ((((0x$capeff >> 24) & 1) == 0)); then
		echo "online resize not checked: this process lacks CAP_SYS_RESOURCE, which the"
		echo "kernel's online resize (EXT4_IOC_RESIZE_FS) requires"
	else
		img=$D/r.img
		"$UEXT4" mkfs -q "$img" 256M || fail "mkfs"
		dev=$(losetup -f --show "$img") || fail "losetup"
		mkdir -p "$D/m"
		if mount -t ext4 "$dev" "$D/m"; then
			write_tree "$D/m" || fail "writing before the online resize"
			truncate -s 1G "$img" && losetup -c "$dev" &&
				resize2fs "$dev" > "$D/resize.log" 2>&1 || {
				cat "$D/resize.log"
				umount "$D/m"
				losetup -d "$dev"
				fail "online resize2fs"
			}
			: > "$D/m/after-resize"
			umount "$D/m"
		else
			losetup -d "$dev"
			fail "kernel mount of $dev"
		fi
		losetup -d "$dev"
		fsck_clean "$img" || fail "e2fsck after the online resize"
		[ "$(dumpe2fs -h "$img" 2> /dev/null | sed -n 's/^Block count: *//p')" = 1048576 ] ||
			fail "online resize: block count is not 1048576 1k blocks"
		echo "online: 256M -> 1G (into the reserved GDT blocks) on a mounted loop device, e2fsck clean"
		rm -f "$img"
	fi
	command -v resize2fs > /dev/null || echo "resize2fs missing: resize not checked"
else
	echo "no loop devices or not root: the kernel and resize parts are not run"
fi

note "3c. uext4 writes into its own images"
for k in "" "-t ext2" "-t ext3" "-b 1024 -N 2000"; do
	img=$D/w.img
	rm -f "$img"
	# shellcheck disable=SC2086
	"$UEXT4" mkfs -q $k "$img" 128M || fail "mkfs $k"
	"$UEXT4" put "$img" "$TOP/src" /src || fail "uext4 put into mkfs $k"
	"$UEXT4" mkdir -p "$img" /a/b/c && "$UEXT4" rm -r "$img" /src/ondisk.h || fail "uext4 writes into mkfs $k"
	fsck_clean "$img" || fail "mkfs $k: e2fsck after uext4 wrote"
	echo "mkfs ${k:-(defaults)}: uext4 wrote, e2fsck clean"
done
rm -f "$D/w.img"

note "5. -F and -n"
img=$D/f.img
rm -f "$img"
"$UEXT4" mkfs -q "$img" 64M || fail "mkfs"
cp "$img" "$D/f.copy"
out=$("$UEXT4" mkfs -q "$img" 2>&1) && fail "mkfs over an ext4 image without -F worked"
grep -q "already holds an ext4 file system" <<< "$out" || fail "refusal says: $out"
cmp "$img" "$D/f.copy" || fail "a refused mkfs changed the image"
out=$("$UEXT4" mkfs -q -n "$img" 2>&1) || fail "-n on an existing image: $out"
cmp "$img" "$D/f.copy" || fail "-n changed the image"
rm -f "$D/none.img"
"$UEXT4" mkfs -n "$D/none.img" 1G > "$D/n.out" || fail "-n of a new image"
[ -e "$D/none.img" ] && fail "-n created the image"
grep -q "Inodes per group: 8192" "$D/n.out" || { cat "$D/n.out"; fail "-n geometry"; }
truncate -s 64M "$D/x.img"
printf 'XFSB' | dd of="$D/x.img" conv=notrunc status=none
out=$("$UEXT4" mkfs -q "$D/x.img" 2>&1) && fail "mkfs over an XFS magic worked"
grep -q "XFS" <<< "$out" || fail "refusal says: $out"
theirs "$D/t.img" 64M || fail "mke2fs"
out=$("$UEXT4" mkfs -q "$D/t.img" 2>&1) && fail "mkfs over mke2fs's image worked"
"$UEXT4" mkfs -q -F -U "$UUID" "$img" || fail "-F"
cmp -s "$img" "$D/f.copy" && fail "-F did not remake the image"
fsck_clean "$img" || fail "e2fsck after -F"
echo "refused without -F (image unchanged), remade with -F; -n writes nothing"

note "6. -E offset="
img=$D/o.img
head -c 2097152 /dev/urandom > "$img"
printf '\0\0' | dd of="$img" bs=1 seek=510 conv=notrunc status=none
cp "$img" "$D/o.prefix"
"$UEXT4" mkfs -q -E offset=2097152 "$img" 64M || fail "mkfs -E offset="
cmp -n 2097152 "$img" "$D/o.prefix" || fail "-E offset= changed the bytes before the offset"
[ "$(stat -c %s "$img")" = $((2097152 + 67108864)) ] || fail "offset image size"
if can_loop; then
	dev=$(losetup -f --show -o 2097152 "$img") || fail "losetup -o"
	e2fsck -fn "$dev" > "$D/o.fsck" 2>&1 || { cat "$D/o.fsck"; losetup -d "$dev"; fail "e2fsck at the offset"; }
	mkdir -p "$D/m"
	mount -t ext4 "$dev" "$D/m" && echo x > "$D/m/file" && umount "$D/m" ||
		{ losetup -d "$dev"; fail "kernel mount at the offset"; }
	e2fsck -fn "$dev" > "$D/o.fsck" 2>&1 || { cat "$D/o.fsck"; losetup -d "$dev"; fail "e2fsck after the kernel wrote"; }
	losetup -d "$dev"
	cmp -n 2097152 "$img" "$D/o.prefix" || fail "the kernel's mount changed the bytes before"
	echo "offset: prefix unchanged, e2fsck clean, the kernel mounted and wrote"
else
	dd if="$img" of="$D/o.part" bs=1M skip=2 status=none
	fsck_clean "$D/o.part" || fail "e2fsck of the part at the offset"
	echo "offset: prefix unchanged, e2fsck clean (no loop device for the kernel)"
fi

note "7. reproducible"
for i in 1 2; do
	rm -f "$D/rep$i.img"
	SOURCE_DATE_EPOCH=1234567890 "$UEXT4" mkfs -q -U "$UUID" -E hash_seed=$SEED \
		"$D/rep$i.img" 300M || fail "mkfs"
done
cmp "$D/rep1.img" "$D/rep2.img" || fail "two reproducible runs differ"
for i in 1 2; do
	rm -f "$D/rnd$i.img"
	"$UEXT4" mkfs -q "$D/rnd$i.img" 300M || fail "mkfs"
done
cmp -s "$D/rnd1.img" "$D/rnd2.img" && fail "two runs without a fixed identity are identical"
[ "$(dumpe2fs -h "$D/rep1.img" 2> /dev/null | sed -n 's/^Filesystem created: *//p')" = \
	"Fri Feb 13 23:31:30 2009" ] || fail "SOURCE_DATE_EPOCH is not the creation time"
echo "identical with SOURCE_DATE_EPOCH, -U and hash_seed; different without"
rm -f "$D"/rep?.img "$D"/rnd?.img

note "8. bad arguments"
bad() { # bad WHAT-IN-MESSAGE ARGS...
	local want=$1 out rc
	shift
	out=$("$UEXT4" mkfs "$@" 2>&1)
	rc=$?
	[ "$rc" = 2 ] || fail "uext4 mkfs $*: exit $rc, want 2 ($out)"
	grep -qF -- "$want" <<< "$out" || fail "uext4 mkfs $*: message '$out' does not say '$want'"
}
rm -f "$D/bad.img"
bad "-b 3000" -b 3000 "$D/bad.img" 64M
bad "-t ext5" -t ext5 "$D/bad.img" 64M
bad "'foo'" -O foo "$D/bad.img" 64M
bad "-U nonsense" -U nonsense "$D/bad.img" 64M
bad "bogus" -E bogus=1 "$D/bad.img" 64M
bad "SIZE 12Q" "$D/bad.img" 12Q
bad "-I 100" -I 100 "$D/bad.img" 64M
bad "-G 3" -G 3 "$D/bad.img" 64M
bad "too small" "$D/bad.img" 16K
bad "missing IMAGE"
bad "extents must be enabled" -O ^extent "$D/bad.img" 64M
out=$(SOURCE_DATE_EPOCH=soon "$UEXT4" mkfs "$D/bad.img" 64M 2>&1)
[ $? = 2 ] && grep -q "SOURCE_DATE_EPOCH=soon" <<< "$out" || fail "SOURCE_DATE_EPOCH=soon: $out"
out=$("$UEXT4" mkfs "$D/absent.img" 2>&1) && fail "mkfs of a missing image without SIZE worked"
grep -q "give a SIZE" <<< "$out" || fail "missing image: $out"
[ -e "$D/bad.img" ] && fail "a refused mkfs left $D/bad.img"
echo "bad arguments: exit 2, named"

note "9. mount --create"
if [ -e /dev/fuse ] && command -v fusermount3 > /dev/null; then
	img=$D/c.img
	rm -f "$img"
	mkdir -p "$D/cm"
	"$UEXT4" mount --create 64M "$img" "$D/cm" || fail "mount --create"
	MOUNTS+=("$D/cm")
	echo hello > "$D/cm/f" && [ "$(cat "$D/cm/f")" = hello ] || fail "write through the new mount"
	out=$("$UEXT4" mkfs -q -F "$img" 2>&1) && fail "mkfs -F of an image a uext4 mount holds worked"
	grep -q "in use" <<< "$out" || fail "mkfs -F of a mounted image says: $out"
	"$UEXT4" umount "$D/cm" || fail "umount"
	fsck_clean "$img" || fail "e2fsck after mount --create"
	"$UEXT4" mount --create 1G "$img" "$D/cm" || fail "mount --create of an existing image"
	[ "$(cat "$D/cm/f")" = hello ] || fail "--create remade an existing image"
	"$UEXT4" umount "$D/cm" || fail "umount"
	[ "$(stat -c %s "$img")" = 67108864 ] || fail "--create resized an existing image"
	echo "mount --create: made, mounted, written; an existing image kept"
else
	echo "no FUSE here: mount --create not checked"
fi
echo "PASS"
