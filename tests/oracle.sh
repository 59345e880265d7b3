#!/bin/bash
# oracle.sh - the kernel is the oracle: for each image kind, what the kernel's
# ext4 shows on a read-only loop mount must be exactly what libuext4 (walk
# lib), our FUSE mount (walk posix on it) and the CLI (ls/stat/cat) show.
#
# ORACLE_KINDS="default tea" limits the kinds (default: all of IMAGE_KINDS in
# lib.sh).  Without root or loop devices, compares libuext4 with the source
# tree instead, on the fields mke2fs -d preserves.
# test-timeout: 2400
set -uo pipefail
. "$(dirname "$0")/lib.sh"
setup_traps
. "$(dirname "$0")/nbd.inc"   # UEXT4_NBD=1: the library reads the images over NBD

[ -x "$WALK" ] || fail "$WALK not built (run make)"
KINDS=${ORACLE_KINDS:-$IMAGE_KINDS}
# FUSE adds no format logic of its own and reading the 5 GiB file through it
# takes a minute, so only some kinds go through FUSE (one under ASan).
case "$UEXT4_BUILD" in
*asan*) FUSE_KINDS=${ORACLE_FUSE_KINDS:-default} ;;
*) FUSE_KINDS=${ORACLE_FUSE_KINDS:-default inline} ;;
esac
WORK=$(mktemp_dir)

source_tree_fallback() {
	echo "NOTE: not root or no loop device: comparing libuext4 with the source"
	echo "      tree (mode, owner, size, mtime seconds, links, data, xattrs only);"
	echo "      the kernel-oracle comparison did not run."
	local tree img opts
	tree=$(tree_get base) || fail "could not generate the tree"
	img=$WORK/fallback.img
	mke2fs -q -F -t ext4 -N 120000 -d "$tree" "$img" 1G || fail "mke2fs -d failed"
	# mke2fs -d 1.47.0 mangles times after 2038: leave that file out.
	opts=(--no-ino --no-ctime --no-atime --no-nsec --no-blocks --no-dirsize --no-dirnlink
	      --exclude=lost+found --exclude=times/future)
	"$WALK" "${opts[@]}" posix "$tree" | grep -v '^\. ' > "$WORK/src.txt"
	"$WALK" "${opts[@]}" lib "$img" | grep -v '^\. ' > "$WORK/lib.txt" || bad "walk lib reported errors"
	compare_dumps "fallback: source tree vs walk lib" "$WORK/src.txt" "$WORK/lib.txt"
	fsck_clean "$img" || bad "e2fsck"
}

# cli_checks KMNT IMG: a few paths through the CLI vs the kernel mount.
cli_checks() {
	local kmnt=$1 img=$2 p out ino size name
	for p in /small/a00/b00/f000_0 /small/a03/b07/f010_100 /small/big1m /holes/hole-mid \
		 /hardlinks/b/c/fourth /xattrs/in-block /times/nsec; do
		[ -f "$kmnt$p" ] || continue
		if ! "$UEXT4" cat "$img" "$p" > "$WORK/cat.out" 2> "$WORK/cat.err"; then
			bad "uext4 cat $p failed: $(head -3 "$WORK/cat.err")"
		elif ! cmp -s "$WORK/cat.out" "$kmnt$p"; then
			bad "uext4 cat $p differs from the kernel's file"
		fi
	done
	for p in /small/a00/b00/f000_0 /symlinks/slow-max /special/bigdev /times/nsec /hardlinks/a/orig /; do
		[ -e "$kmnt$p" ] || [ -L "$kmnt$p" ] || continue
		ino=$(stat -c %i "$kmnt$p")
		size=$(stat -c %s "$kmnt$p")
		if ! out=$("$UEXT4" stat "$img" "$p" 2>&1); then
			bad "uext4 stat $p failed: $out"
		elif ! grep -qw -- "$ino" <<< "$out" || ! grep -qw -- "$size" <<< "$out"; then
			bad "uext4 stat $p does not show inode $ino and size $size: $out"
		fi
	done
	for p in /symlinks /special /small/a01/b02 /; do
		if ! out=$("$UEXT4" ls -l "$img" "$p" 2>&1); then
			bad "uext4 ls -l $p failed: $(head -3 <<< "$out")"
			continue
		fi
		while IFS= read -r name; do
			grep -qF -- "$name" <<< "$out" || bad "uext4 ls -l $p does not list $name"
		done < <(ls -A "$kmnt$p")
	done
	echo "ok: CLI cat/stat/ls checks done"
}

check_kind() {
	local kind=$1 img kmnt=$WORK/k-$1 fmnt=$WORK/f-$1
	note "image kind $kind: $(img_opts "$kind") $(img_tune "$kind")"
	img=$(image_get "$kind") || { bad "could not build the $kind image"; return; }
	nbd_target "$img" -r    # TARGET: img, or its read-only NBD export
	mkdir -p "$kmnt" "$fmnt"
	kmount "$img" "$kmnt" || { bad "kernel mount of $kind failed"; return; }
	"$WALK" posix "$kmnt" > "$WORK/$kind.kernel" || bad "walk posix on the kernel mount reported errors"
	"$WALK" lib "$TARGET" > "$WORK/$kind.lib" 2> "$WORK/$kind.lib.err" ||
		{ bad "walk lib reported errors:"; head -20 "$WORK/$kind.lib.err"; }
	compare_dumps "$kind: kernel vs libuext4" "$WORK/$kind.kernel" "$WORK/$kind.lib"
	if [ -x "$UEXT4" ] && [[ " $FUSE_KINDS " == *" $kind "* ]]; then
		if fuse_mount "$TARGET" "$fmnt"; then
			"$WALK" posix "$fmnt" > "$WORK/$kind.fuse" || bad "walk posix on the FUSE mount reported errors"
			# statfs: df must agree (block size, counts, reserve).
			local fmt="bsize=%S blocks=%b free=%f avail=%a files=%c ffree=%d namemax=%l"
			[ "$(stat -f -c "$fmt" "$kmnt")" = "$(stat -f -c "$fmt" "$fmnt")" ] ||
				bad "$kind: statfs differs: kernel [$(stat -f -c "$fmt" "$kmnt")] FUSE [$(stat -f -c "$fmt" "$fmnt")]"
			fuse_umount "$fmnt"
			compare_dumps "$kind: kernel vs FUSE" "$WORK/$kind.kernel" "$WORK/$kind.fuse"
		else
			bad "FUSE mount of the $kind image failed"
		fi
	fi
	[ -x "$UEXT4" ] && [ "$kind" = default ] && cli_checks "$kmnt" "$TARGET"
	kumount "$kmnt"
	nbd_stop
	fsck_clean "$img" || bad "e2fsck -fn after the $kind checks"
}

[ -x "$UEXT4" ] || echo "NOTE: $UEXT4 not built: FUSE and CLI comparisons skipped"
if ! can_loop; then
	source_tree_fallback
else
	for kind in $KINDS; do check_kind "$kind"; done
fi
if [ "$FAILS" != 0 ]; then
	echo "$FAILS check(s) failed"
	exit 1
fi
echo "all oracle checks passed"
