#!/bin/bash
# features.sh - features we cannot honour are refused by name; the ones we
# support (and read-only-compatible ones, on a read-only mount) are accepted.
#
# What is refused follows src/super.c:
#   incompat: compression, journal_dev, dirdata, encrypt,
#             needs_recovery without a journal and any unknown bit -> refused;
#   needs_recovery with a journal is recovered (here: an empty journal, so a
#             read-only mount changes nothing);
#   ro_compat: bigalloc -> read (tests/bigalloc.sh does the rest); any other ro_compat bit we do not
#             write (unknown) -> read-only mount only; quota, project and
#             verity are written (tests/quota.sh, projid.sh, verity.sh), here only read.
# Images are made by mke2fs where it can, otherwise a bit is set on a small
# image with debugfs 'feature', which recomputes the superblock checksum.
#
# Environment: UEXT4 (default build/uext4), UEXT4_ASAN (default
# build/asan/uext4, also run when it exists).
set -u
. "$(dirname "$0")/lib.sh"
cd "$TOP" || exit 1
UEXT4_ASAN=${UEXT4_ASAN:-build/asan/uext4}
case $UEXT4_ASAN in /*) ;; *) UEXT4_ASAN=$TOP/$UEXT4_ASAN ;; esac

need mke2fs debugfs timeout
[ -x "$UEXT4" ] || skip "$UEXT4 not built"
BINS=("$UEXT4")
[ -x "$UEXT4_ASAN" ] && [ "$UEXT4_ASAN" != "$UEXT4" ] && BINS+=("$UEXT4_ASAN")

T=$(mktemp -d /tmp/uext4-features.XXXXXX)
MNT=$T/mnt
mkdir -p "$MNT" "$T/tree"
echo "hello world" >"$T/tree/hello.txt"
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}log_path=$T/san:detect_leaks=1"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:+$UBSAN_OPTIONS:}log_path=$T/san:print_stacktrace=1"
cleanup() {
	mountpoint -q "$MNT" 2>/dev/null && fusermount3 -u "$MNT" 2>/dev/null
	rm -rf "$T"
	cleanup_mounts
}
trap cleanup EXIT

FUSE=1
[ -e /dev/fuse ] && command -v fusermount3 >/dev/null || FUSE=0

CHECKS=0
pass() { CHECKS=$((CHECKS + 1)); }

sanitizer_report() {
	local f found=1
	for f in "$T"/san*; do
		[ -e "$f" ] || continue
		echo "---- sanitizer report:"; head -30 "$f"; rm -f "$f"; found=0
	done
	return $found
}

run_cli() {
	local bin=$1; shift
	timeout -k 5 20 "$bin" "$@" >"$T/out" 2>"$T/err" </dev/null
	RC=$?
	ERR=$(head -c 2000 "$T/err")
	if [ $RC -ge 124 ]; then bad "$bin $*: crash or hang (exit $RC): $ERR"; return 1; fi
	if sanitizer_report; then bad "$bin $*: sanitizer report"; return 1; fi
	return 0
}

# mkimg MKE2FS_FEATURES [DEBUGFS_FEATURE]: a small image in $IMG.
mkimg() {
	IMG=$T/f.img
	rm -f "$IMG"
	if ! mke2fs -q -F -t ext4 ${1:+-O "$1"} $MKE2FS_EXTRA -d "$T/tree" "$IMG" 32M >"$T/mkfs" 2>&1; then
		echo "note: mke2fs -O $1 failed ($(tail -1 "$T/mkfs")); case skipped"
		return 1
	fi
	if [ -n "${2:-}" ] && ! debugfs -w -R "feature $2" "$IMG" >"$T/dbg" 2>&1; then
		bad "debugfs feature $2 failed: $(cat "$T/dbg")"
		return 1
	fi
	return 0
}

# unchanged SUM: the image still has md5 SUM (reading it wrote nothing).
unchanged() {
	if [ "$(md5sum < "$IMG")" = "$1" ]; then pass; else bad "the image changed while being read"; fi
}

# refused NAME: `uext4 info` fails and names the feature; so does a mount.
refused() {
	local name=$1 bin sum0
	sum0=$(md5sum < "$IMG")
	for bin in "${BINS[@]}"; do
		run_cli "$bin" info "$IMG" || continue
		if [ $RC -eq 0 ]; then bad "$bin info accepted an image with $name"; continue; fi
		if ! grep -qF -- "$name" "$T/err"; then
			bad "$bin info: message does not name '$name': $ERR"; continue
		fi
		echo "    $(basename "$bin") info -> exit $RC: $ERR"
		pass
	done
	[ $FUSE = 1 ] || return 0
	timeout -k 5 20 "$UEXT4" mount -o ro "$IMG" "$MNT" >"$T/mout" 2>&1 </dev/null
	if mountpoint -q "$MNT"; then
		bad "FUSE mounted an image with $name"
		fusermount3 -u "$MNT"
	elif ! grep -qF -- "$name" "$T/mout"; then
		bad "uext4 mount: message does not name '$name': $(cat "$T/mout")"
	else
		pass
	fi
	unchanged "$sum0"
}

# accepted [NAME]: info works (and lists NAME), a file reads back.
accepted() {
	local name=${1:-} bin sum0 clean0=0
	sum0=$(md5sum < "$IMG")
	e2fsck -fn "$IMG" >/dev/null 2>&1 && clean0=1
	for bin in "${BINS[@]}"; do
		run_cli "$bin" info "$IMG" || continue
		if [ $RC -ne 0 ]; then bad "$bin info refused a supported image: $ERR"; continue; fi
		if [ -n "$name" ] && ! grep -qw -- "$name" "$T/out"; then
			bad "$bin info does not list feature '$name'"; continue
		fi
		run_cli "$bin" cat "$IMG" /hello.txt || continue
		if [ $RC -ne 0 ] || [ "$(cat "$T/out")" != "hello world" ]; then
			bad "$bin cat /hello.txt failed ($RC): $ERR"; continue
		fi
		pass
	done
	unchanged "$sum0"
	# An image e2fsck passed before must still pass.  Some are not clean
	# as made: unknown bits are patched in with debugfs, and mke2fs -d
	# 1.47.0 miscounts quota usage on -O quota/project images.
	if [ $clean0 = 1 ]; then
		if e2fsck -fn "$IMG" >"$T/fsck" 2>&1; then pass; else
			bad "e2fsck -fn after reading the image: $(tail -3 "$T/fsck")"
		fi
	else
		echo "    note: e2fsck -fn rejects this image as made; checked that it is unchanged instead"
	fi
}

CASES=0
start() { CASE=$1; CASES=$((CASES + 1)); echo "case $CASES: $CASE"; MKE2FS_EXTRA=""; }

# ---- refused ------------------------------------------------------------------
start "encrypt";         mkimg encrypt && refused encrypt
start "compression";     mkimg "" compression && refused compression
start "dirdata";         mkimg "" dirdata && refused dirdata
start "unknown incompat bit 31"; mkimg "" FEATURE_I31 && refused FEATURE_I31
start "needs_recovery without a journal"; mkimg ^has_journal needs_recovery && refused needs_recovery

start "journal_dev (external journal device)"
IMG=$T/j.img
if mke2fs -q -F -O journal_dev -b 4096 "$IMG" 8M >/dev/null 2>&1; then
	refused journal_dev
else
	echo "note: mke2fs -O journal_dev failed; case skipped"
fi

# ---- read-only compatible: accepted read-only --------------------------------
start "unknown ro_compat bit 31"; mkimg "" FEATURE_R31 && accepted FEATURE_R31
start "bigalloc (16 KiB clusters)"; MKE2FS_EXTRA="-C 16384"; mkimg bigalloc && accepted bigalloc
start "bigalloc (1 KiB blocks, 4 KiB clusters)"; MKE2FS_EXTRA="-b 1024 -C 4096"; mkimg bigalloc && accepted bigalloc

# ---- supported -----------------------------------------------------------------
start "quota";                mkimg quota && accepted quota
start "project";              MKE2FS_EXTRA="-I 256"; mkimg quota,project && accepted project
start "verity";               mkimg verity && accepted verity
start "default ext4 (has_journal, extents, flex_bg, metadata_csum)"; mkimg "" && accepted has_journal
start "mmp (read-only opens leave the MMP block alone; tests/mmp.sh does the rest)"; mkimg mmp && accepted mmp
start "64bit";                mkimg 64bit && accepted 64bit
start "needs_recovery (empty journal)"; mkimg has_journal needs_recovery && accepted needs_recovery
start "ea_inode";             mkimg ea_inode && accepted ea_inode
start "large_dir";            mkimg large_dir && accepted large_dir
start "inline_data";          mkimg inline_data && accepted inline_data
start "meta_bg";              mkimg meta_bg,^resize_inode && accepted meta_bg
start "metadata_csum_seed";   mkimg metadata_csum_seed && accepted metadata_csum_seed
start "casefold";             mkimg casefold && accepted casefold
start "ext2-style (no extents, no journal)"; mkimg ^extent,^64bit,^has_journal,^flex_bg,^metadata_csum && accepted
start "uninit_bg without metadata_csum"; mkimg ^metadata_csum,uninit_bg && accepted uninit_bg

echo "features.sh: $CASES cases, $CHECKS checks passed, $FAILS failures"
[ $FAILS -eq 0 ] || exit 1
exit 0
