#!/bin/bash
# fuse_user.sh - a user without root mounts an image with `uext4 mount`
# (through the setuid fusermount3), reads it, and unmounts with
# fusermount3 -u; the daemon returns only once the mount is ready.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
setup_traps

[ "$(id -u)" = 0 ] || skip "needs root to create the unprivileged test user"
need_fuse
USER_NAME=uext4test
id "$USER_NAME" > /dev/null 2>&1 || useradd -M -d /nonexistent -s /bin/sh "$USER_NAME" ||
	skip "cannot create user $USER_NAME"

# Debian's udev makes /dev/fuse 0666; some containers leave it 0600, which
# libfuse cannot open as a user.  Give it the usual mode for this test.
old_mode=$(stat -c %a /dev/fuse)
chmod 0666 /dev/fuse
trap 'chmod "$old_mode" /dev/fuse; cleanup_mounts' EXIT

work=$(mktemp_dir)
chmod 0755 "$work"
mkdir -p "$work/src/d" "$work/mnt"
seq 1 20000 > "$work/src/d/numbers"
ln -s d/numbers "$work/src/link"
mke2fs -q -F -t ext4 -d "$work/src" "$work/img" 32M || fail "mke2fs"
chown "$USER_NAME" "$work/img" "$work/mnt"

rc=0
su -s /bin/sh "$USER_NAME" -c "'$UEXT4' mount '$work/img' '$work/mnt'" || fail "uext4 mount as $USER_NAME failed"
MOUNTS+=("$work/mnt")
[ "$(findmnt -n -o FSTYPE "$work/mnt")" = fuse.uext4 ] || { echo "not a fuse.uext4 mount right after uext4 mount returned"; rc=1; }
su -s /bin/sh "$USER_NAME" -c "cmp '$work/mnt/link' '$work/src/d/numbers'" || { echo "content differs through the user's mount"; rc=1; }
su -s /bin/sh "$USER_NAME" -c "fusermount3 -u '$work/mnt'" || { echo "fusermount3 -u as $USER_NAME failed"; rc=1; }
mountpoint -q "$work/mnt" && { echo "still mounted after fusermount3 -u"; rc=1; }
fsck_clean "$work/img" || rc=1
[ $rc = 0 ] && echo "ok: $USER_NAME mounted, read and unmounted an image"
exit $rc
