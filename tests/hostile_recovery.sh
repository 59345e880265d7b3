#!/bin/bash
# hostile_recovery.sh - a journal whose middle transaction
# holds a logged block with a bad checksum (metadata_csum: checksum v3
# tags).  Our writer logs transactions on a FUSE mount (files created and
# fsynced, three times) and the server is killed -9; then dd damages one
# logged block of the middle transaction (one that no other transaction
# logs) and zeroes the homes of the blocks only the last transaction logs
# (as if its checkpoint had not reached the disk).  `uext4 recover` must,
# as the kernel's and e2fsck's recovery:
#   - replay the last transaction (those homes equal their logged copies),
#   - skip the bad block (its home, zeroed before, stays as it was),
#   - exit 1 naming the journal block and the home block,
#   - leave the file system marked with errors (dumpe2fs -h: "clean with
#     errors"), and the journal empty (a second recover replays nothing).
# Before that, a read command replays in memory only, says which block it
# skipped, and leaves the image as it was.
# e2fsck -E journal_only replays the same copy: it must skip the same block,
# and every block we compare must hold what e2fsck's replay wrote.  The
# kernel (loop mount of another copy) skips it too and replays the later
# transactions, then refuses the mount ("journal recovery failed"); we
# mount, with the error recorded.
# test-timeout: 120
. "$(dirname "$0")/lib.sh"
setup_traps
for t in mke2fs debugfs e2fsck dumpe2fs python3 fusermount3; do
	command -v $t > /dev/null || skip "no $t"
done
[ -e /dev/fuse ] || skip "no /dev/fuse"
[ -x "$UEXT4" ] || skip "no $UEXT4: build first"
D=$(mktemp_dir)
img=$D/j.img
truncate -s 64M "$img"
mke2fs -q -t ext4 -b 1024 -O metadata_csum -F "$img" || fail "mke2fs"

note "logging three transactions on a FUSE mount, then kill -9"
M=$D/m
mkdir -p "$M"
"$UEXT4" mount -f "$img" "$M" > "$D/mount.log" 2>&1 &
pid=$!
MOUNTS+=("$M")
for ((i = 0; i < 300; i++)); do
	[ "$(findmnt -n -o TARGET "$M" 2> /dev/null)" = "$M" ] && break
	kill -0 $pid 2> /dev/null || { cat "$D/mount.log"; fail "mount"; }
	sleep 0.1 # bounded poll for the mount to appear
done
python3 - "$M" << 'PYEOF' || fail "writer"
import os, sys
m = sys.argv[1]
for i in range(3):
    os.mkdir("%s/d%d" % (m, i))
    for k in range(5):
        fd = os.open("%s/d%d/f%d" % (m, i, k), os.O_CREAT | os.O_WRONLY, 0o644)
        os.write(fd, b"x" * (100 * k + 1))
        if k == 4:
            os.fsync(fd)   # commits this round's transaction
        os.close(fd)
PYEOF
conn=$(mountpoint -d "$M" | cut -d: -f2)
kill -9 $pid
[ -w "/sys/fs/fuse/connections/$conn/abort" ] && echo 1 > "/sys/fs/fuse/connections/$conn/abort"
wait $pid 2> /dev/null
fusermount3 -uz "$M" 2> /dev/null || umount -l "$M"

# "SEQ FSBLOCK JBLOCK" for every logged block.
debugfs -R "logdump -a" "$img" 2> /dev/null | awk '
	/^Dumping descriptor block, sequence/ { seq = $5; sub(",", "", seq) }
	/FS block .* logged at journal block/ { print seq, $3, $8 }' > "$D/tags"
ntx=$(cut -d' ' -f1 "$D/tags" | sort -un | wc -l)
[ "$ntx" -ge 3 ] || { cat "$D/tags"; fail "only $ntx transactions in the log"; }
last=$(cut -d' ' -f1 "$D/tags" | sort -n | tail -1)
mid=$((last - 1))
only_in() { # SEQ: FS blocks logged by SEQ and by no other transaction
	awk -v s="$1" '{ n[$2]++; if ($1 == s) mine[$2] = $3 } END { for (b in mine) if (n[b] == 1) print b, mine[b] }' "$D/tags" | sort -n
}
only_in $mid > "$D/mid"
only_in $last > "$D/last"
[ -s "$D/mid" ] && [ -s "$D/last" ] || fail "no block logged by one transaction only"
read -r bad_home bad_j < "$D/mid"
echo "$ntx transactions; damaging journal block $bad_j (home $bad_home) of transaction $mid; the homes of $(wc -l < "$D/last") blocks only transaction $last logs are zeroed"

# (-c: the zeroed bitmaps below would stop a normal open)
jphys() { debugfs -c -R "bmap <8> $1" "$img" 2> /dev/null; }
blk() { dd if="$1" bs=1024 skip="$2" count=1 2> /dev/null | od -An -tx1 -v | tr -d ' \n'; }
zero_home() { dd if=/dev/zero of="$img" bs=1024 seek="$1" count=1 conv=notrunc 2> /dev/null; }
# Every logged copy located and saved before anything is damaged.
while read -r h j; do
	blk "$img" "$(jphys "$j")" > "$D/want.$h"
done < "$D/last"
p=$(jphys "$bad_j")
[ -n "$p" ] || fail "cannot locate journal block $bad_j"
printf '\377' | dd of="$img" bs=1 seek=$((p * 1024 + 100)) conv=notrunc 2> /dev/null
zero_home "$bad_home"
while read -r h j; do zero_home "$h"; done < "$D/last"
cp --sparse=always "$img" "$D/e2fsck.img"
cp --sparse=always "$img" "$D/kernel.img"

note "a read command replays in memory only"
"$UEXT4" ls "$img" / > /dev/null 2> "$D/ls.err" || { cat "$D/ls.err"; fail "ls"; }
grep -q "bad checksum were not replayed (first: journal block $bad_j," "$D/ls.err" ||
	{ cat "$D/ls.err"; fail "ls does not say a block was skipped"; }
cmp -s "$img" "$D/e2fsck.img" || fail "ls changed the image"
echo "ok   ls: $(tail -1 "$D/ls.err")"

note "uext4 recover"
if "$UEXT4" recover "$img" > "$D/out" 2> "$D/err"; then
	cat "$D/out" "$D/err"; fail "recover exited 0 with a bad logged block"
fi
cat "$D/out" "$D/err"
grep -q "journal block $bad_j\b" "$D/err" && grep -q "block $bad_home)" "$D/err" ||
	fail "the message does not name journal block $bad_j and home block $bad_home"
grep -q "journal: $ntx transactions replayed" "$D/out" || fail "not every transaction replayed"
echo "ok   recover exited 1 naming journal block $bad_j, home block $bad_home"
while read -r h j; do
	[ "$(blk "$img" "$h")" = "$(cat "$D/want.$h")" ] || fail "block $h of transaction $last not replayed"
done < "$D/last"
echo "ok   the $(wc -l < "$D/last") blocks of transaction $last after it were replayed"
[ "$(blk "$img" "$bad_home")" = "$(blk /dev/zero 0)" ] || fail "the bad block was written home"
echo "ok   the bad block was skipped"
state=$(dumpe2fs -h "$img" 2> /dev/null | sed -n 's/^Filesystem state: *//p')
[ "$state" = "clean with errors" ] || fail "filesystem state '$state', want 'clean with errors'"
echo "ok   dumpe2fs -h: Filesystem state: $state"
"$UEXT4" recover "$img" > "$D/out2" 2>&1 || { cat "$D/out2"; fail "second recover"; }
grep -q "journal: 0 transactions replayed" "$D/out2" || { cat "$D/out2"; fail "journal not empty"; }
echo "ok   a second recover finds the journal empty"

note "e2fsck's replay of the same journal"
e2fsck -y -E journal_only "$D/e2fsck.img" > "$D/e2fsck.out" 2>&1
grep -q "Invalid checksum recovering data block $bad_home\b" "$D/e2fsck.out" ||
	{ cat "$D/e2fsck.out"; fail "e2fsck does not find block $bad_home bad"; }
echo "ok   e2fsck's recovery skips the same block: $(grep -m1 'Invalid checksum' "$D/e2fsck.out")"
while read -r h j; do
	[ "$(blk "$img" "$h")" = "$(blk "$D/e2fsck.img" "$h")" ] || fail "block $h differs from e2fsck's replay"
done < "$D/last"
[ "$(blk "$img" "$bad_home")" = "$(blk "$D/e2fsck.img" "$bad_home")" ] ||
	fail "the bad block's home differs from e2fsck's replay"
echo "ok   the compared blocks equal e2fsck's replay ($(grep -c . "$D/e2fsck.out") lines of e2fsck output)"
if can_loop; then
	note "the kernel's recovery of the same journal"
	mkdir -p "$D/km"
	if mount -t ext4 -o loop "$D/kernel.img" "$D/km" 2> "$D/kmount.err"; then
		umount "$D/km"
		fail "the kernel mounted it: this test's model of the kernel is wrong"
	fi
	echo "ok   the kernel refuses the mount after its replay (jbd2: recovery failed)"
	while read -r h j; do
		[ "$(blk "$D/kernel.img" "$h")" = "$(cat "$D/want.$h")" ] ||
			fail "the kernel did not replay block $h: this test's model of the kernel is wrong"
	done < "$D/last"
	[ "$(blk "$D/kernel.img" "$bad_home")" = "$(blk /dev/zero 0)" ] || fail "the kernel wrote the bad block"
	echo "ok   the kernel too replayed transaction $last and skipped block $bad_home"
else
	echo "kernel check skipped: not root or no loop device"
fi
echo "hostile_recovery.sh: all passed"
