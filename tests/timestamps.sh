#!/bin/bash
# timestamps.sh - times outside what an inode can hold are stored as the
# kernel's ext4 stores them (clamped, never wrapped), whatever sets them.
#
# Times: 1800, 1901-12-13 20:45:52 (the minimum) -1 ns, exactly, +1 ns and
# +0.5 s, 2038-01-19 03:14:07 (the 32-bit maximum) -1 ns, exactly, +1 ns and
# +1 s, 2100, 2446-05-10 22:38:55 (the maximum with *_extra fields) -1 ns,
# exactly and +1 ns, 2500, and one ordinary time with nanoseconds; each as
# the atime and mtime of a file fN and a directory dN.  On images with
# 128-byte and 256-byte inodes, set:
#   - through the FUSE mount with touch -d: the default mount (writeback
#     cache) and -o nowriteback; the mount shows the stored times, except a
#     regular file's mtime under the writeback cache, which the kernel keeps
#     from the touch until it drops the inode (FUSE has no s_time_max);
#   - by the CLI: `uext4 put` of a host tree with those times;
#   - by the library: uext4_setattr() (tests/timestamps.c), whose returned
#     stat must show the stored times; a bad tv_nsec is refused;
#   - by `uext4 mkfs -d` from that directory and from a pax tarball of it.
# Each result (walk lib on the image, walk posix on the mount) must equal
# the expected table, which is ext4's rule (the kernel's timestamp_truncate()
# with ext4's s_time_min/s_time_max/s_time_gran); as root with loop devices,
# the kernel's own ext4 on a loop mount, given the same touch -d, must store
# that table too.  On 128-byte inodes the mount shows whole seconds
# throughout (FUSE time_gran), also for new files.  Every image: e2fsck -fn.
# test-timeout: 120
set -uo pipefail
. "$(dirname "$0")/lib.sh"
setup_traps
DRV=$UEXT4_BUILD/tests/timestamps
need_built "$UEXT4"
[ -x "$DRV" ] || fail "$DRV not built (run make)"
[ -x "$WALK" ] || fail "$WALK not built (run make)"
tar --version 2> /dev/null | grep -q 'GNU tar' || skip "GNU tar missing"
export TZ=UTC LC_ALL=C
scratch_on_tmpfs
W=$(mktemp_dir)
san_logs_in "$W"

MIN=-2147483648 MAX32=2147483647 MAXX=15032385535
# name seconds nanoseconds (nanoseconds 0..999999999, as a timespec)
CASES=(
	y1800 -5364662400 0
	minm1 -2147483649 999999999
	min -2147483648 0
	minp1 -2147483648 1
	minhalf -2147483648 500000000
	minp1s -2147483647 250000000
	y2001 1000000000 123456789
	m32m1 2147483646 999999999
	m32 2147483647 0
	m32p1 2147483647 1
	m32p1s 2147483648 250000000
	y2100 4102444800 700000000
	mxm1 15032385534 999999999
	mx 15032385535 0
	mxp1 15032385535 1
	y2500 16725225600 0
)

# The cases before 1970 with a fraction, as an ERE alternation.
NEG_FRACTION=$(for ((i = 0; i < ${#CASES[@]}; i += 3)); do
	[ "${CASES[i + 1]}" -lt 0 ] && [ "${CASES[i + 2]}" != 0 ] && echo "${CASES[i]}"
done | paste -sd'|')

# touch_arg SEC NSEC: TARG becomes the time as touch -d @SECONDS[.FRACTION]
# reads it (a negative one is -(SECONDS.FRACTION)).
touch_arg() {
	local s=$1 n=$2
	if [ "$n" = 0 ]; then
		TARG=@$s
	elif [ "$s" -lt 0 ]; then
		printf -v TARG '@-%d.%09d' $((-s - 1)) $((1000000000 - n))
	else
		printf -v TARG '@%d.%09d' "$s" "$n"
	fi
}

# fit INODE_SIZE SEC NSEC: FIT becomes what ext4 stores (timestamp_truncate()
# with s_time_min -2^31, s_time_max 2^31-1 or 0x37fffffff, s_time_gran 1 s or 1 ns).
fit() {
	local max=$MAXX s=$2 n=$3
	[ "$1" -lt 256 ] && max=$MAX32
	if [ "$s" -le "$MIN" ]; then
		s=$MIN n=0
	elif [ "$s" -ge "$max" ]; then
		s=$max n=0
	elif [ "$1" -lt 256 ]; then
		n=0
	fi
	printf -v FIT '%d.%09d' "$s" "$n"
}

# expected INODE_SIZE: the table, as times_of prints it.
expected() {
	local i
	for ((i = 0; i < ${#CASES[@]}; i += 3)); do
		fit "$1" "${CASES[i + 1]}" "${CASES[i + 2]}"
		echo "./d${CASES[i]} mtime=$FIT atime=$FIT"
		echo "./f${CASES[i]} mtime=$FIT atime=$FIT"
	done | sort
}

# The cases' names, their touch -d arguments, and their names as an ERE.
NAMES=() TARGS=()
for ((i = 0; i < ${#CASES[@]}; i += 3)); do
	NAMES+=("${CASES[i]}")
	touch_arg "${CASES[i + 1]}" "${CASES[i + 2]}"
	TARGS+=("$TARG")
done
ALL_NAMES=$(IFS='|'; echo "${NAMES[*]}")

# times_of < WALK_OUTPUT: "./NAME mtime=S.N atime=S.N" of the case entries.
times_of() {
	sed -n 's,^\(\./[df][a-z0-9]*\) .* \(mtime=[^ ]*\) \(atime=[^ ]*\).*,\1 \2 \3,p' |
		grep -E "^\./[df]($ALL_NAMES) " | sort
}

# check WHAT GOT_FILE EXPECTED_FILE: equal, else show the difference.
check() {
	if ! diff -u "$3" "$2" > "$W/diff"; then
		bad "$1: times differ from ext4's (- expected, + got)"
		cat "$W/diff"
	fi
}

# touch_all DIR: the cases' times on fN and dN in DIR, by touch -d.
touch_all() {
	local i
	mkdir -p "${NAMES[@]/#/$1/d}" && touch "${NAMES[@]/#/$1/f}" || bad "creating in $1"
	for ((i = 0; i < ${#NAMES[@]}; i++)); do
		touch -d "${TARGS[i]}" "$1/d${NAMES[i]}" "$1/f${NAMES[i]}" ||
			bad "touch -d ${TARGS[i]} in $1"
	done
}

image_times() { # image_times IMG OUT
	"$WALK" --no-data --no-xattr --no-ctime lib "$1" | times_of > "$2"
}

fsck_ok() { fsck_clean "$1" || bad "e2fsck -fn $1 ($2)"; }

# A host tree with the cases' times (tmpfs keeps them all), for put and mkfs -d.
SRC=$W/src
mkdir -p "$SRC"
touch_all "$SRC"
tar --format=pax -cf "$W/src.tar" -C "$SRC" . 2> /dev/null || fail "tar of $SRC"
# pax keeps every time, with its nanoseconds: the tarball holds the cases
# (tar x restores the mtimes; the atimes it leaves at now).
mkdir -p "$W/untar" && tar -xf "$W/src.tar" -C "$W/untar" 2> /dev/null &&
	"$WALK" --no-data --no-xattr --no-ctime --no-atime posix "$SRC" > "$W/src.times" &&
	"$WALK" --no-data --no-xattr --no-ctime --no-atime posix "$W/untar" > "$W/untar.times" &&
	diff <(cut -d' ' -f1,3- "$W/src.times" | grep -v '^\. ') \
		<(cut -d' ' -f1,3- "$W/untar.times" | grep -v '^\. ') ||
	fail "tar does not keep the times"

# The kernel's ext4 given the same touch, as the table says.
kernel_check() { # kernel_check ISIZE
	local img=$W/k$1.img mnt=$W/k
	mke2fs -q -F -t ext4 -I "$1" "$img" 32M > /dev/null 2>&1 || { bad "mke2fs -I $1"; return; }
	mkdir -p "$mnt"
	kmount "$img" "$mnt" rw || { bad "kernel mount of $img"; return; }
	touch_all "$mnt"
	umount "$mnt"
	kmount "$img" "$mnt" ro || { bad "kernel remount of $img"; return; }
	"$WALK" --no-data --no-xattr --no-ctime posix "$mnt" | times_of > "$W/got"
	umount "$mnt"
	check "kernel ext4, -I $1, touch -d" "$W/got" "$W/exp"
	fsck_ok "$img" "kernel, -I $1"
}

# uext4_mount IMG DIR [OPTS]: a read-write mount of ours.
uext4_mount() {
	"$UEXT4" mount ${3:+-o "$3"} "$1" "$2" || return 1
	MOUNTS+=("$2")
}

# Through the FUSE mount: what it shows, and what the image then holds.
fuse_check() { # fuse_check ISIZE [OPTS]
	local img=$W/m$1.img mnt=$W/m what="FUSE mount${2:+ -o $2}, -I $1"
	rm -f "$img"
	"$UEXT4" mkfs -q -I "$1" "$img" 32M || { bad "uext4 mkfs -I $1"; return; }
	mkdir -p "$mnt"
	uext4_mount "$img" "$mnt" "${2:-}" || { bad "$what: mount"; return; }
	touch_all "$mnt"
	"$WALK" --no-data --no-xattr --no-ctime posix "$mnt" | times_of > "$W/got"
	if [ -z "${2:-}" ]; then
		# The writeback cache keeps a regular file's own mtime: the
		# atime and the directories' times come from the server.
		sed 's/^\(\.\/f[^ ]*\) mtime=[^ ]*/\1/' "$W/got" > "$W/got.v"
		sed 's/^\(\.\/f[^ ]*\) mtime=[^ ]*/\1/' "$W/exp" > "$W/exp.v"
		check "$what, the mount's view" "$W/got.v" "$W/exp.v"
	else
		check "$what, the mount's view" "$W/got" "$W/exp"
	fi
	if [ "$1" -lt 256 ]; then
		# Whole seconds throughout: a new file's times as well.
		echo x > "$mnt/new"
		stat -c '%x %y %z' "$mnt/new" | grep -q '\.[0-9]*[1-9]' &&
			bad "$what: a new file shows sub-second times: $(stat -c '%y' "$mnt/new")"
	fi
	"$UEXT4" umount "$mnt" || bad "$what: uext4 umount failed"
	image_times "$img" "$W/got"
	check "$what, the image after umount" "$W/got" "$W/exp"
	fsck_ok "$img" "$what"
}

for isize in 128 256; do
	expected "$isize" > "$W/exp"
	[ "$(wc -l < "$W/exp")" = $((${#CASES[@]} / 3 * 2)) ] || fail "expected table"
	if can_loop; then
		kernel_check "$isize"
	else
		note "no root or loop device: the kernel's ext4 is not compared"
	fi

	fuse_check "$isize"
	fuse_check "$isize" nowriteback

	# The CLI: uext4 put of the host tree (touched again: reading a
	# directory moves its atime, which relatime does for times this old).
	touch_all "$SRC"
	img=$W/p$isize.img
	"$UEXT4" mkfs -q -I "$isize" "$img" 32M || bad "uext4 mkfs -I $isize"
	"$UEXT4" put "$img" "$SRC/." / || bad "uext4 put, -I $isize"
	image_times "$img" "$W/got"
	check "uext4 put, -I $isize" "$W/got" "$W/exp"
	fsck_ok "$img" "put, -I $isize"

	# The library: uext4_setattr() and the stat it returns.
	img=$W/l$isize.img
	"$UEXT4" mkfs -q -I "$isize" "$img" 32M || bad "uext4 mkfs -I $isize"
	args=()
	for ((i = 0; i < ${#CASES[@]}; i += 3)); do
		args+=("${CASES[i]}" "${CASES[i + 1]}" "${CASES[i + 2]}")
	done
	"$DRV" "$img" "${args[@]}" > "$W/ret" || bad "library, -I $isize: the driver failed"
	sort "$W/ret" > "$W/got"
	check "uext4_setattr(), -I $isize, the returned stat" "$W/got" "$W/exp"
	image_times "$img" "$W/got"
	check "uext4_setattr(), -I $isize, the image" "$W/got" "$W/exp"
	fsck_ok "$img" "library, -I $isize"

	# uext4 mkfs -d from the directory and from the tarball.  libarchive
	# (3.6) reads a pax time before 1970 with a fraction, -S.F, as -S + .F
	# (GNU tar as -(S.F)): those cases are left out of the tarball's check.
	for from in "$SRC" "$W/src.tar"; do
		img=$W/d$isize.img
		rm -f "$img"
		touch_all "$SRC"
		"$UEXT4" mkfs -q -I "$isize" -d "$from" "$img" 32M ||
			bad "uext4 mkfs -I $isize -d $from"
		image_times "$img" "$W/got"
		if [ "$from" = "$SRC" ]; then
			check "uext4 mkfs -d ${from##*/}, -I $isize" "$W/got" "$W/exp"
		else
			grep -vE "^\./[df]($NEG_FRACTION) " "$W/got" > "$W/got.t"
			grep -vE "^\./[df]($NEG_FRACTION) " "$W/exp" > "$W/exp.t"
			check "uext4 mkfs -d ${from##*/}, -I $isize" "$W/got.t" "$W/exp.t"
		fi
		fsck_ok "$img" "mkfs -d ${from##*/}, -I $isize"
	done
done

# The servers' sanitizer reports (sanitizer builds), daemons included.
san_check "$W"
[ "$FAILS" = 0 ] || fail "$FAILS checks failed"
echo "PASS"
