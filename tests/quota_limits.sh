#!/bin/bash
# quota_limits.sh - quota limits: set by uext4 setquota, enforced as the
# kernel's dquot does (EDQUOT before anything is allocated), with grace
# timers.  The kernel here lacks CONFIG_QFMT_V2: debugfs (get_quota,
# list_quota), the quota file's bytes and e2fsck are the oracles.
#
# Asserts:
#   - uext4 setquota -u/-g/-P: debugfs get_quota reads the four limits
#     back; setquota -t: the file's info block holds the grace times;
#     uext4 quota lists them; e2fsck -fn clean;
#   - as a non-root user (setpriv) through the CLI: a put past the block
#     hard limit fails with EDQUOT and usage stays within it; a create past
#     the inode hard limit fails with EDQUOT; a refused mkdir or create
#     leaves the image byte-for-byte unchanged (md5); a chgrp into a group
#     past its inode limit fails with EDQUOT (the kernel's dquot_transfer);
#   - soft limits: passing one starts its timer (btime/itime in the entry,
#     about now + grace); once the deadline has passed the soft limit acts
#     as a hard one (EDQUOT); going back under it clears the timer and
#     writes pass again;
#   - root passes every limit (its own id limited to 1 block and 1 inode);
#   - the FUSE mount (root, allow_other) refuses a non-root user's write
#     past the block hard limit and create past the inode hard limit with
#     EDQUOT, and a root write past them passes;
#   - e2fsck -fn clean after every part.
# run-in: release asan
set -uo pipefail
. "$(dirname "$0")/lib.sh"
setup_traps
need e2fsck:e2fsprogs debugfs:e2fsprogs setpriv:util-linux
need_helper QT quotatree
[ "$(id -u)" = 0 ] || skip "needs root (acts as other users with setpriv)"
T=$(mktemp_dir)
chmod 755 "$T"
FAILS=0

check() { # check IMAGE STEP: e2fsck -fn clean
	local out
	out=$(e2fsck -fn "$1" 2>&1) || { echo "$out" | tail -8; bad "e2fsck -fn after: $2"; }
}
as() { # as UID CMD...: the CLI as user UID (group UID+100), RC and ERR set
	local u=$1
	shift
	setpriv --reuid="$u" --regid=$((u + 100)) --clear-groups \
		timeout -k 5 60 "$UEXT4" "$@" > "$T/out" 2> "$T/err" < /dev/null
	RC=$?
	ERR=$(head -c 600 "$T/err")
	grep -qE 'AddressSanitizer|LeakSanitizer|runtime error:' "$T/err" &&
		bad "uext4 $*: sanitizer report: $ERR"
}
edquot() { # edquot WHAT: the last command failed with EDQUOT
	[ "$RC" != 0 ] && grep -q 'Disk quota exceeded' "$T/err" ||
		bad "$1: expected EDQUOT, got exit $RC: $ERR"
}
ok() { [ "$RC" = 0 ] || bad "$1: failed (exit $RC): $ERR"; }
# entry TYPE(0/1/2) ID FIELD: a field of ID's entry in the image's quota
# file, read by the quotatree helper (2 space, 3 inodes, 4 bsoft, 5 bhard,
# 6 isoft, 7 ihard, 8 btime, 9 itime).
qfile() { # qfile TYPE: the quota file of TYPE (0 user, 1 group, 2 project)
	local names=(User Group Project) ino
	ino=$(dumpe2fs -h "$IMG" 2>/dev/null | awk -v t="${names[$1]}" \
		'$1 == t && $2 == "quota" && $3 == "inode:" { print $4 }')
	debugfs -R "dump <$ino> $T/qf$1" "$IMG" > /dev/null 2>&1
}
entry() {
	qfile "$1"
	"$QT" dump "$T/qf$1" "$1" | awk -v id="$2" -v f="$3" '$1 == id { print $f }'
}
used() { debugfs -R "list_quota $1" "$IMG" 2>/dev/null | awk -v id="$2" '$1 == id { print $2 }'; }
# wait_past SECONDS_SINCE_1970: the grace deadline is the behaviour under
# test, so wall-clock time must pass it; poll the clock (30 s at most).
wait_past() {
	local i
	for ((i = 0; i < 300; i++)); do
		[ "$(date +%s)" -gt "$1" ] && return 0
		sleep 0.1 # polling the clock until the deadline under test has passed
	done
	bad "the clock did not pass $1 in 30 s"
}

IMG=$T/q.img
mke2fs -q -F -t ext4 -b 1024 -O quota,project "$IMG" 64M || fail "mke2fs"
chmod 666 "$IMG"
head -c 150000 /dev/urandom > "$T/150k"
head -c 30000 /dev/urandom > "$T/30k"
chmod 644 "$T/150k" "$T/30k"
cli_run mkdir -m 1777 "$IMG" /s

CASE="setquota read back"
cli_run setquota "$IMG" -u 3001 0 200 0 1000; [ "$RC" = 0 ] || bad "setquota -u: $ERR"
cli_run setquota "$IMG" -g 5555 11 22 33 44; [ "$RC" = 0 ] || bad "setquota -g: $ERR"
cli_run setquota "$IMG" -P 77 1000 2000 3000 4000; [ "$RC" = 0 ] || bad "setquota -P: $ERR"
cli_run setquota "$IMG" -g -t 3600 7200; [ "$RC" = 0 ] || bad "setquota -g -t: $ERR"
for spec in "user 3001 0 200 0 1000" "group 5555 11 22 33 44" "project 77 1000 2000 3000 4000"; do
	set -- $spec
	# get_quota prints: id, space, quota (soft), limit (hard), inodes, quota, limit.
	got=$(debugfs -R "get_quota $1 $2" "$IMG" 2>/dev/null | awk -v id="$2" '$1 == id { print $3, $4, $6, $7 }')
	[ "$got" = "$3 $4 $5 $6" ] || bad "debugfs get_quota $1 $2: '$got', want '$3 $4 $5 $6'"
done
qfile 1
grace=$(od -An -tu4 -j8 -N8 "$T/qf1" | xargs)
[ "$grace" = "3600 7200" ] || bad "group quota file's grace times: '$grace', want '3600 7200'"
qfile 0
grace=$(od -An -tu4 -j8 -N8 "$T/qf0" | xargs)
[ "$grace" = "604800 604800" ] || bad "user quota file's grace changed: '$grace'"
cli_run quota "$IMG" -g 5555
grep -qE '^5555 +-- +0 +11 +22 .* 0 +33 +44' "$T/out" || bad "uext4 quota -g 5555: $(cat "$T/out")"
check "$IMG" "setquota"

CASE="block hard limit (CLI, uid 3001)"
as 3001 put -P "$IMG" "$T/150k" /s/a; ok "put 150 KB under a 200 KiB hard limit"
as 3001 put -P "$IMG" "$T/150k" /s/b; edquot "put past the 200 KiB hard limit"
u=$(used user 3001)
[ -n "$u" ] && [ "$u" -le $((200 * 1024)) ] || bad "uid 3001 uses '$u' bytes, over its 200 KiB hard limit"
# At the limit now (the put stopped there): a new directory needs a block.
[ "$u" = $((200 * 1024)) ] || bad "uid 3001 uses '$u' bytes: the put should fill up to the limit"
sum=$(md5sum < "$IMG")
as 3001 mkdir "$IMG" /s/full; edquot "mkdir at the block hard limit"
[ "$(md5sum < "$IMG")" = "$sum" ] || bad "a mkdir refused with EDQUOT changed the image"
check "$IMG" "block hard limit"

CASE="inode hard limit (CLI, uid 3002)"
cli_run setquota "$IMG" -u 3002 0 0 0 4
for i in 1 2 3 4; do as 3002 truncate -s 0 "$IMG" /s/e$i; ok "create $i of 4"; done
sum=$(md5sum < "$IMG")
as 3002 truncate -s 0 "$IMG" /s/e5; edquot "create past the inode hard limit"
as 3002 mkdir "$IMG" /s/e6; edquot "mkdir past the inode hard limit"
[ "$(md5sum < "$IMG")" = "$sum" ] || bad "a create refused with EDQUOT changed the image"
[ "$(entry 0 3002 3)" = 4 ] || bad "uid 3002 holds $(entry 0 3002 3) inodes, want 4"
check "$IMG" "inode hard limit"

CASE="chgrp into a limited group (uid 3005)"
cli_run setquota "$IMG" -g 3199 0 0 0 1
as 3005 truncate -s 0 "$IMG" /s/c1 /s/c2; ok "two creates"
as 3005 chown "$IMG" 3005:3199 /s/c1; ok "chgrp of the first file into group 3199 (inode limit 1)"
as 3005 chown "$IMG" 3005:3199 /s/c2; edquot "chgrp of a second file past group 3199's inode limit"
[ "$(entry 1 3199 3)" = 1 ] || bad "group 3199 holds $(entry 1 3199 3) inodes, want 1"
check "$IMG" "chgrp into a limited group"

CASE="soft limits and grace (uid 3003)"
cli_run setquota "$IMG" -u -t 2 2
cli_run setquota "$IMG" -u 3003 100 1000 2 100
t0=$(date +%s)
as 3003 put -P "$IMG" "$T/150k" /s/f; ok "put past the block soft limit (within grace)"
t1=$(date +%s)
bt=$(entry 0 3003 8)
[ -n "$bt" ] && [ "$bt" -ge $((t0 + 2)) ] && [ "$bt" -le $((t1 + 2)) ] ||
	bad "btime '$bt' after passing the soft limit: want the put's time ($t0..$t1) + 2 s"
for i in 1 2 3; do as 3003 truncate -s 0 "$IMG" /s/g$i; ok "create $i (soft limit 2)"; done
t2=$(date +%s)
it=$(entry 0 3003 9)
[ -n "$it" ] && [ "$it" -ge $((t1 + 2)) ] && [ "$it" -le $((t2 + 2)) ] ||
	bad "itime '$it' after passing the inode soft limit: want the third create's time ($t1..$t2) + 2 s"
wait_past "$bt"
wait_past "$it"
as 3003 put -P "$IMG" "$T/30k" /s/f2; edquot "put past the soft limit after its grace time"
as 3003 truncate -s 0 "$IMG" /s/g4; edquot "create past the inode soft limit after its grace time"
as 3003 rm "$IMG" /s/f /s/f2 /s/g1 /s/g2 /s/g3 /s/g4
[ "$(entry 0 3003 8)" = 0 ] || bad "btime $(entry 0 3003 8) after going under the soft limit, want 0"
[ "$(entry 0 3003 9)" = 0 ] || bad "itime $(entry 0 3003 9) after going under the soft limit, want 0"
as 3003 put -P "$IMG" "$T/30k" /s/f3; ok "put within the soft limit again"
check "$IMG" "soft limits and grace"

CASE="root exempt"
cli_run setquota "$IMG" -u 0 0 1 0 1
cli_run put -P "$IMG" "$T/150k" /rootfile; [ "$RC" = 0 ] || bad "root's put past its limits: $ERR"
cli_run mkdir "$IMG" /rootdir; [ "$RC" = 0 ] || bad "root's mkdir past its limits: $ERR"
check "$IMG" "root past its limits"

CASE="FUSE mount (uid 3004)"
if [ -c /dev/fuse ] && command -v fusermount3 > /dev/null; then
	cli_run setquota "$IMG" -u 3004 0 100 0 3
	mnt=$T/mnt
	mkdir -p "$mnt"
	"$UEXT4" mount -o allow_other "$IMG" "$mnt" > "$T/mount.log" 2>&1 ||
		{ cat "$T/mount.log"; fail "uext4 mount"; }
	MOUNTS+=("$mnt")
	run3004() { setpriv --reuid=3004 --regid=3104 --clear-groups sh -c "$1" > "$T/err" 2>&1; RC=$?; ERR=$(head -c 600 "$T/err"); }
	run3004 "head -c 150000 /dev/urandom > '$mnt/s/h'"
	edquot "a write past the block hard limit on the mount"
	run3004 "truncate -s 0 '$mnt/s/i1' '$mnt/s/i2'"; ok "two creates on the mount"
	run3004 "mkdir '$mnt/s/i3'"
	edquot "a create past the inode hard limit (3, one is /s/h) on the mount"
	# Root's own file (a write into 3004's would charge 3004, as the kernel does).
	# uid 0 is still limited to 1 block and 1 inode (root exempt part above).
	head -c 150000 /dev/urandom > "$mnt/rootfile2" 2> "$T/err" ||
		bad "root's write past its limits on the mount: $(cat "$T/err")"
	mkdir "$mnt/rootdir2" || bad "root's mkdir past its limits on the mount"
	umount_uext4 "$mnt"
	u=$(used user 3004)
	[ -n "$u" ] && [ "$u" -le $((100 * 1024)) ] || bad "uid 3004 uses '$u' bytes, over 100 KiB"
	check "$IMG" "the FUSE mount"
else
	echo "FUSE part skipped: needs /dev/fuse and fusermount3"
fi

[ "$FAILS" = 0 ] || fail "$FAILS checks failed"
echo "ok: quota limits set, read back and enforced (CLI, FUSE), grace timers, root exempt"
