#!/bin/bash
# hostile_bounds.sh - a hostile image costs bounded memory
# and time.  Each image below (tests/images/mk_*.sh) is mounted read-only
# and then read-write by tests/hostile_bounds.c, which lists every
# directory, stats and reads every file (its first 16 MiB, its end, and
# offsets around 2^32 blocks), reads every symlink and every xattr; it
# asserts a clear error (errno + message) or data, the peak RSS at most
# HB_MAX_KIB over the start (64 MiB), and the wall time under HB_MAX_SECS
# (20 s; a loop over 2^32 blocks or 2^28 directory blocks takes far
# longer).  The run is under `timeout` (a hang fails).  After the
# read-write walk, e2fsck -fn must find no kind of problem it did not find
# before (digits aside).
#   dir_huge_size     directory i_size 2^40 with one block
#   extent_huge_claim extent past 2^32 logical blocks, i_size 2^44
#   xattr_huge_size   EA inode i_size 2^40; in-inode e_value_size 2^32-16
#   htree_deep        dx_root indirect levels 7 (large_dir allows 2)
#   extent_too_deep, extent_root_too_deep, err_extent_deep, ea_inode,
#   htree_bad_leaves  (existing builders: deep extent claims, EA inodes,
#                     bad htree leaves)
# test-timeout: 600
set -uo pipefail
. "$(dirname "$0")/lib.sh"
helper_test BIN hostile_bounds
IMAGES=$(dirname "$0")/images
dir=$(mktemp_dir)
MAX_SECS=${HB_MAX_SECS:-20}
MAX_KIB=${HB_MAX_KIB:-$((64 * 1024))}
rc=0
ran=0

# e2fsck -fn's problem lines with the numbers taken out, sorted, unique.
fsck_kinds() {
	timeout 120 e2fsck -fn "$1" 2>&1 | grep -v -e '^Pass ' -e '^e2fsck ' -e 'files (' -e '^$' |
		sed -E 's/[0-9]+/N/g' | sort -u
}

for b in dir_huge_size extent_huge_claim xattr_huge_size htree_deep extent_too_deep \
	 extent_root_too_deep err_extent_deep ea_inode htree_bad_leaves; do
	img=$dir/$b.img
	what=$(bash "$IMAGES/mk_$b.sh" "$img" 2>&1)
	st=$?
	[ $st = 77 ] && { note "$b: skipped ($what)"; continue; }
	[ $st = 0 ] || { echo "FAIL: mk_$b.sh: $what"; rc=1; continue; }
	note "$b: $what"
	before=$(fsck_kinds "$img")
	for mode in "" --rw; do
		out=$(timeout 300 "$BIN" $mode "$img" "$MAX_SECS" "$MAX_KIB" 2>&1)
		st=$?
		echo "$out" | sed 's/^/    /'
		[ $st = 0 ] || { echo "FAIL: $b ${mode:-ro}: exit $st"; rc=1; }
	done
	new=$(comm -13 <(echo "$before") <(fsck_kinds "$img"))
	[ -z "$new" ] || { echo "FAIL: $b: new kinds of e2fsck findings after the rw walk:"; echo "$new"; rc=1; }
	ran=$((ran + 1))
done
[ $ran -gt 0 ] || skip "no image could be built"
[ $rc = 0 ] && echo "hostile_bounds.sh: pass ($ran images)"
exit $rc
