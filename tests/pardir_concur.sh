#!/bin/bash
# pardir_concur.sh - parallel creates, unlinks, renames and lookups in one
# htree directory (tests/pardir_concur.c; also run under TSan): names of
# each thread's own, names all threads race for (exactly one create and
# one unlink of each wins), unlinks of names that others rename over,
# lookups and readdir beside them.  Then the
# image is e2fsck -fn clean and the kernel's ext4 (loop mount, when
# available) lists exactly the expected names.  1 KiB and 4 KiB blocks.
# test-timeout: 600
# run-in: release asan tsan
. "$(dirname "$0")/lib.sh"
helper_test P pardir_concur mke2fs
D=$(mktemp_dir)
test_seed pardir_concur
FILES=${FILES:-1500}
case "$UEXT4_BUILD" in *tsan*) FILES=300 ;; esac
for bs in 1024 4096; do
	note "block size $bs"
	rm -f "$D/p.img"
	truncate -s 256M "$D/p.img"
	mke2fs -q -t ext4 -b $bs -N 40000 -F "$D/p.img" || fail "mke2fs -b $bs"
	"$P" "$D/p.img" 4 "$FILES" "$SEED" "$D/expected" || fail "pardir_concur (-b $bs)"
	e2fsck -fn "$D/p.img" > "$D/fsck.log" 2>&1 || { cat "$D/fsck.log"; fail "e2fsck -fn (-b $bs)"; }
	echo "ok   e2fsck -fn clean"
	if can_loop; then
		M="$D/mnt"
		mkdir -p "$M"
		kmount "$D/p.img" "$M" || fail "kernel mount"
		LC_ALL=C ls -1 "$M/d" | LC_ALL=C sort > "$D/kernel"
		kumount "$M"
		LC_ALL=C sort "$D/expected" > "$D/expected.sorted"
		diff "$D/expected.sorted" "$D/kernel" > "$D/diff" || { head -20 "$D/diff"; fail "kernel lists other names (-b $bs)"; }
		echo "ok   kernel lists the $(wc -l < "$D/kernel") expected names"
	else
		note "no loop device: kernel listing not compared"
	fi
done
echo "pardir_concur.sh: all passed"
