#!/bin/bash
# populate_threads.sh - uext4_populate() with 8 threads on the lite tree, for
# the thread sanitizer (tests/run.sh runs scripts named *thread* under tsan):
# scanners, the namespace thread and data copiers share the pool, the plans
# and the library.  The copy must equal the source (walk lib) and e2fsck
# must be clean; a fill that runs out of blocks with 8 threads must stop
# cleanly too (the workers stop at the error).
# test-timeout: 600
# run-in: release asan tsan
set -uo pipefail
. "$(dirname "$0")/lib.sh"
setup_traps

POP=$UEXT4_BUILD/bench/populate_bench
[ -x "$POP" ] || fail "$POP not built (run make)"
[ -x "$WALK" ] || fail "$WALK not built (run make)"
WORK=$(mktemp_dir)
TREE=$(tree_get lite) || fail "could not generate the lite tree"
WOPTS=(--no-ino --no-ctime --no-blocks --no-dirsize --exclude=lost+found)

"$WALK" posix "$TREE" > /dev/null   # settle the atimes (relatime)
"$WALK" "${WOPTS[@]}" posix "$TREE" | sed '1s/ nlink=[0-9]*//' > "$WORK/src.txt"
for round in 1 2; do
	mke2fs -q -F -t ext4 -b 4096 "$WORK/t.img" 512M || fail "mke2fs"
	"$POP" -j 8 -p "$WORK/t.img" "$TREE" > "$WORK/out" 2> "$WORK/err" ||
		{ cat "$WORK/out" "$WORK/err"; fail "populate -j 8 failed"; }
	grep RESULT "$WORK/out"
	grep -q '^progress files' "$WORK/err" || bad "no progress reported"
	fsck_clean "$WORK/t.img" || bad "e2fsck -fn, round $round"
	"$WALK" "${WOPTS[@]}" lib "$WORK/t.img" | sed '1s/ nlink=[0-9]*//' > "$WORK/lib.txt"
	if cmp -s "$WORK/src.txt" "$WORK/lib.txt"; then
		echo "ok: round $round: $(wc -l < "$WORK/lib.txt") paths identical to the source"
	else
		bad "round $round: the copy differs from the source:"
		diff -u "$WORK/src.txt" "$WORK/lib.txt" | head -20
	fi
done
# Out of blocks with 8 threads.
mke2fs -q -F -t ext4 -N 6000 "$WORK/small.img" 8M || fail "mke2fs"
"$POP" -j 8 "$WORK/small.img" "$TREE" > "$WORK/out" 2>&1
rc=$?
echo "small image: exit $rc: $(grep -v RESULT "$WORK/out" | head -2)"
[ "$rc" = 1 ] || bad "out of blocks: exit $rc, want 1"
grep -q "no free blocks left" "$WORK/out" || bad "out of blocks: message does not say so"
fsck_clean "$WORK/small.img" || bad "e2fsck -fn after running out of blocks"
[ "$FAILS" = 0 ] || fail "$FAILS checks failed"
echo "PASS"
