#!/bin/bash
# run-in: release asan
# casefold_fuse.sh - a casefolded directory (+F) through the FUSE mount.
# The kernel's dentry cache compares names by their bytes; the server keeps
# no name of a +F directory in it (entry timeout 0), so that:
#   - an absent "foo" looked up does not hide a "FOO" created later;
#   - after a rename or unlink of "foo", a "FOO" looked up before is gone;
#   - ls, stat, open under mixed case find what the library finds;
# while a directory without +F stays case-sensitive and cached.
# Measured: stat(2) of one name in a +F directory and in a plain one
# (the price of the extra LOOKUPs). e2fsck -fn clean after unmounting.
. "$(dirname "$0")/lib.sh"
fuse_test e2fsck:e2fsprogs python3
IMG=$T/cf.img
MNT=$T/mnt
mkdir -p "$MNT"
"$UEXT4" mkfs -q -O casefold "$IMG" 64M || fail "mkfs"
"$UEXT4" mkdir "$IMG" /d /plain || fail "mkdir"
"$UEXT4" chattr "$IMG" +F /d || fail "chattr +F"
fuse_mount_fg "$IMG" "$MNT" || fail "mount"

absent() { [ ! -e "$1" ] || bad "$1 exists"; }
present() { [ -e "$1" ] || bad "$1 not found"; }

note "negative entries do not hide another case"
absent "$MNT/d/FOO"
absent "$MNT/d/Foo"
echo x > "$MNT/d/foo" || bad "create foo"
present "$MNT/d/FOO"
present "$MNT/d/Foo"
[ "$(cat "$MNT/d/FOO")" = x ] || bad "cat FOO"
[ "$(ls "$MNT/d")" = foo ] || bad "ls: $(ls "$MNT/d"), want foo"
[ "$(stat -c %i "$MNT/d/FOO")" = "$(stat -c %i "$MNT/d/foo")" ] || bad "FOO and foo differ"

note "no stale alias after rename and unlink"
mv "$MNT/d/foo" "$MNT/d/Bar" || bad "mv"
absent "$MNT/d/FOO"
absent "$MNT/d/Foo"
[ "$(cat "$MNT/d/BAR")" = x ] || bad "cat BAR"
[ "$(ls "$MNT/d")" = Bar ] || bad "ls after mv: $(ls "$MNT/d")"
rm "$MNT/d/bar" || bad "rm bar"
absent "$MNT/d/BAR"
absent "$MNT/d/Bar"
echo y > "$MNT/d/BAR" || bad "create BAR again"
[ "$(cat "$MNT/d/bar")" = y ] || bad "cat bar after re-create"

note "subdirectories and EEXIST"
mkdir "$MNT/d/Sub" || bad "mkdir Sub"
mkdir "$MNT/d/SUB" 2> /dev/null && bad "mkdir SUB succeeded: Sub exists"
touch "$MNT/d/sub/F" || bad "touch in sub"
[ "$(ls "$MNT/d/SUB")" = F ] || bad "ls SUB: $(ls "$MNT/d/SUB")"
lsattr -d "$MNT/d/Sub" 2> /dev/null | grep -q -- '-F-' || bad "Sub has no +F"

note "a plain directory stays case-sensitive"
echo z > "$MNT/plain/x"
absent "$MNT/plain/X"
echo Z > "$MNT/plain/X" || bad "create X"
[ "$(cat "$MNT/plain/x")" = z ] && [ "$(cat "$MNT/plain/X")" = Z ] || bad "x and X mixed"

note "cost: stat(2) of one name, +F against plain"
python3 - "$MNT" << 'PY'
import os, sys, time
m = sys.argv[1]
for d in ("plain", "d"):
    p = os.path.join(m, d, "x" if d == "plain" else "BAR")
    n = 20000
    t = time.perf_counter()
    for _ in range(n):
        os.stat(p)
    print("stat %s: %.1f us" % ("+F   " if d == "d" else "plain", (time.perf_counter() - t) / n * 1e6))
PY
fuse_umount "$MNT"
san_check
fsck_clean "$IMG" || bad "e2fsck -fn after the mount"
[ "$FAILS" = 0 ] || fail "$FAILS checks failed"
echo PASS
