#!/bin/bash
# populate_repro.sh - reproducible images: the same tree with 1, 2 and 8
# threads, twice each, with a fixed UUID, hash seed and time
# (SOURCE_DATE_EPOCH: use_fixed_time, clamped times, bulk mode), must give
# byte-identical images (cmp), made by `uext4 mkfs -d`; so must two copies
# of a symlink whose old atime the first read moves.  When two differ,
# the first differing
# offsets are printed with the block and the structure that holds it
# (group metadata from dumpe2fs, or the inode owning the block).
# Release: the `all` tree (50,000-entry directory, 5 GiB sparse file);
# sanitizers: `lite`.
# test-timeout: 900
set -uo pipefail
. "$(dirname "$0")/lib.sh"
setup_traps

case "$UEXT4_BUILD" in
*asan* | *tsan*) KIND=lite ;;
*) KIND=${POPULATE_TREE:-all} ;;
esac
WORK=$(mktemp_dir)
TREE=$(tree_get "$KIND") || fail "could not generate the $KIND tree"
T=1700000000
UUID=6b1f3b4e-2f0a-4c9e-9d51-0a4c1e7f5a10
SEED=0d2c6e1a-93b7-4f55-a8c2-5e4b7d9f1c33
note "tree $KIND ($(find "$TREE" | wc -l) paths), fixed time $T, UUID $UUID, hash seed $SEED"

# explain A B: the first differing bytes, and what holds them.
explain() {
	local a=$1 b=$2 bs off blk n=0
	bs=$(dumpe2fs -h "$a" 2> /dev/null | awk -F: '/^Block size/ {print $2 + 0}')
	cmp -l "$a" "$b" 2> /dev/null | head -2000 | awk -v bs="$bs" '{print int(($1 - 1) / bs)}' |
		uniq | head -5 > "$WORK/blocks"
	echo "differing bytes: $(cmp -l "$a" "$b" | wc -l); first offsets:"
	cmp -l "$a" "$b" | head -5
	while read -r blk; do
		n=$((n + 1))
		echo "block $blk: $(dumpe2fs "$a" 2> /dev/null | awk -v b="$blk" '
			/^Group [0-9]+:/ {g = $2}
			{
				for (i = 1; i <= NF; i++) if ($i ~ /^[0-9]+(-[0-9]+)?,?$/) {
					split($i, r, "-"); sub(",", "", r[1]); sub(",", "", r[2]);
					if (r[2] == "") r[2] = r[1];
					if (b + 0 >= r[1] + 0 && b + 0 <= r[2] + 0) { print "group " g " " $0; exit }
				}
			}' | head -1)"
		debugfs -R "icheck $blk" "$a" 2> /dev/null | tail -n +2
	done < "$WORK/blocks"
}

# fill IMG THREADS: the tree into a new IMG by uext4 mkfs -d.
fill() {
	rm -f "$1"
	SOURCE_DATE_EPOCH=$T "$UEXT4" mkfs -q -N 200000 -U "$UUID" -E "hash_seed=$SEED" \
		-j "$2" -d "$TREE" "$1" 3G
}

FIRST=
FAILED=0
for j in 1 2 8; do
	for run in 1 2; do
		img=$WORK/j$j-$run.img
		fill "$img" "$j" > "$WORK/out" 2>&1 || { cat "$WORK/out"; fail "populate -j $j failed"; }
		grep RESULT "$WORK/out"
		if [ -z "$FIRST" ]; then
			FIRST=$img
			fsck_clean "$img" || fail "e2fsck -fn of the first image"
		elif cmp -s "$FIRST" "$img"; then
			echo "ok: -j $j run $run is byte-identical to $(basename "$FIRST")"
			rm -f "$img"
		else
			echo "FAIL: -j $j run $run differs from $(basename "$FIRST")"
			explain "$FIRST" "$img"
			FAILED=$((FAILED + 1))
		fi
	done
done
[ "$FAILED" = 0 ] || fail "$FAILED images differ"

# A symlink with an old atime: reading it moves the host's atime (relatime),
# so the first copy must already take the atime the read leaves.
mkdir -p "$WORK/lt"
echo x > "$WORK/lt/f"
ln -s f "$WORK/lt/link"
touch -h -d '2011-03-13 07:06:40' "$WORK/lt/link"
for run in 1 2; do
	rm -f "$WORK/lt$run.img"
	SOURCE_DATE_EPOCH=$T "$UEXT4" mkfs -q -U "$UUID" -E "hash_seed=$SEED" -d "$WORK/lt" \
		"$WORK/lt$run.img" 16M || fail "populate of the symlink tree"
done
fsck_clean "$WORK/lt1.img" || fail "e2fsck -fn of the symlink tree's image"
cmp -s "$WORK/lt1.img" "$WORK/lt2.img" || { explain "$WORK/lt1.img" "$WORK/lt2.img"; fail "a symlink read in the first copy made the second differ"; }
echo "ok: a symlink with an old atime copies the same twice"
echo "PASS"
