#!/bin/bash
# fuse_cache.sh - the kernel's caches on a read-write uext4 mount (-o writeback) keep the
# semantics of the kernel's ext4 (writeback cache, long attribute timeouts).
#
#  1. O_APPEND from two processes at once: every record lands whole, none
#     overwrites another, the size is the sum; the same after a remount.
#  2. Times: after write+close, stat shows mtime == ctime, both past the old
#     (touch -d 2001) times and not before the write began; touch -m -d sets
#     mtime and moves ctime to now; chmod moves ctime only.  The same
#     relations hold on the kernel's ext4 loop mount, and the uext4 times
#     stat showed are the ones in the image after unmount (the kernel's
#     SETATTR with FATTR_MTIME|FATTR_CTIME reached the server).
#  3. mmap: a MAP_SHARED store + msync is in the image after unmount.
#  4. setfacl changes the mode: stat shows the new mode at once, as on the
#     kernel's ext4 (the server invalidates the kernel's attributes), also
#     on a file with dirty pages in the writeback cache (no deadlock).
#  5. fsync / fdatasync, then kill -9 of the server: after `uext4 recover`
#     e2fsck -fn is clean and every fsynced file has its content (written
#     in 4 KiB pieces, gathered by the kernel's writeback cache).
#  6. SIGTERM to the server while a written file is still open (its pages
#     only in the kernel's cache): they reach the image before it stops.
#  7. Directories without OPENDIR: the server answers the first OPENDIR
#     ENOSYS (FUSE_NO_OPENDIR_SUPPORT) and the kernel sends none after it,
#     nor any RELEASEDIR (counted in libfuse's -d trace); listings stay
#     right: names created, renamed and removed after the first listing
#     show in the next one, on the mount and after a remount.
# Random contents; FUSE_CACHE_SEED=N replays them.
# test-timeout: 300
set -uo pipefail
. "$(dirname "$0")/lib.sh"
fuse_test python3 setfacl:acl
test_seed fuse_cache FUSE_CACHE_SEED

cat > "$T/append.py" << 'PY'
# append.py FILE TAG N: N O_APPEND writes of a 97-byte record each.
import os, sys
path, tag, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
for i in range(n):
    rec = ("%s %06d " % (tag, i)).encode()
    rec += b"." * (96 - len(rec)) + b"\n"
    assert os.write(fd, rec) == len(rec)
os.close(fd)
PY
cat > "$T/check_append.py" << 'PY'
# check_append.py FILE N TAG...: each tag's N records, whole, in order.
import sys
path, n, tags = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
data = open(path, "rb").read()
want = 97 * n * len(tags)
if len(data) != want:
    sys.exit("size %d, want %d" % (len(data), want))
seen = {t: 0 for t in tags}
for k in range(0, len(data), 97):
    rec = data[k:k + 97]
    tag, num = rec.split()[0].decode(), int(rec.split()[1])
    if rec[-1:] != b"\n" or tag not in seen or num != seen[tag]:
        sys.exit("record at %d is broken or out of order: %r" % (k, rec[:20]))
    seen[tag] += 1
print("%d records intact" % (len(data) // 97))
PY
cat > "$T/times.py" << 'PY'
# times.py DIR: the time relations of write, touch -m and chmod; prints
# the relations (equal on the kernel and on uext4) on stdout, the raw
# times of DIR/t on fd 3 for the persistence check.
import os, subprocess, sys, time
d = sys.argv[1]
p = os.path.join(d, "t")
with open(p, "wb") as f:
    f.write(b"x" * 5000)
os.utime(p, (978307200, 978307200))            # 2001-01-01, ctime now
st0 = os.stat(p)
before = time.time_ns() - 20 * 10**6            # coarse clocks: 20 ms slack
fd = os.open(p, os.O_WRONLY)
for i in range(64):
    os.pwrite(fd, b"y" * 4096, i * 4096)
os.close(fd)
st1 = os.stat(p)
print("after write: mtime==ctime", st1.st_mtime_ns == st1.st_ctime_ns)
print("after write: mtime advanced", st1.st_mtime_ns > st0.st_mtime_ns and st1.st_mtime_ns >= before)
print("after write: size", st1.st_size)
subprocess.run(["touch", "-m", "-d", "2002-02-02 02:02:02.5", p], check=True)
st2 = os.stat(p)
print("touch -m: mtime", st2.st_mtime_ns, "ctime not older", st2.st_ctime_ns >= st1.st_ctime_ns)
os.chmod(p, 0o600)
st3 = os.stat(p)
print("chmod: mtime kept", st3.st_mtime_ns == st2.st_mtime_ns, "ctime not older", st3.st_ctime_ns >= st2.st_ctime_ns)
fd = os.open(p, os.O_WRONLY | os.O_APPEND)
os.write(fd, b"z" * 10)
os.fsync(fd)
os.close(fd)
st4 = os.stat(p)
print("append+fsync: mtime==ctime", st4.st_mtime_ns == st4.st_ctime_ns, "size", st4.st_size)
with os.fdopen(3, "w") as raw:
    raw.write("%d %d %d %o\n" % (st4.st_mtime_ns, st4.st_ctime_ns, st4.st_size, st4.st_mode))
PY
cat > "$T/mmap_store.py" << 'PY'
import mmap, os, sys
p = sys.argv[1]
with open(p, "wb") as f:
    f.write(b"\0" * 65536)
fd = os.open(p, os.O_RDWR)
m = mmap.mmap(fd, 65536, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
m[100:110] = b"mmapstore!"
m[40000:40004] = b"tail"
m.flush()
m.close()
os.close(fd)
PY
cat > "$T/fsync.py" << 'PY'
# fsync.py DIR SEED LOG: files written in 4 KiB pieces, fsynced (or
# fdatasynced) one by one, each logged after its sync; then more files
# left unsynced.  Prints nothing; the checker recomputes the contents.
import hashlib, os, sys
d, seed, log = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def content(i):
    h = hashlib.sha256(b"%d:%d" % (seed, i)).digest()
    n = 4096 * (i % 7) + int.from_bytes(h[:2], "little")
    return (h * (n // 32 + 1))[:n]
with open(log, "w", buffering=1) as lg:
    for i in range(40):
        fd = os.open(os.path.join(d, "f%d" % i), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        c = content(i)
        for k in range(0, len(c), 4096):
            os.write(fd, c[k:k + 4096])
        (os.fdatasync if i % 2 else os.fsync)(fd)
        os.close(fd)
        lg.write("%d\n" % i)
    for i in range(40, 60):   # never synced: may or may not survive
        with open(os.path.join(d, "f%d" % i), "wb") as f:
            f.write(content(i))
PY
cat > "$T/check_fsync.py" << 'PY'
import hashlib, os, sys
d, seed, log = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def content(i):
    h = hashlib.sha256(b"%d:%d" % (seed, i)).digest()
    n = 4096 * (i % 7) + int.from_bytes(h[:2], "little")
    return (h * (n // 32 + 1))[:n]
bad = 0
ids = [int(x) for x in open(log)]
for i in ids:
    try:
        ok = open(os.path.join(d, "f%d" % i), "rb").read() == content(i)
    except OSError:
        ok = False
    if not ok:
        bad += 1
        print("fsynced file f%d missing or wrong" % i)
print("%d fsynced files checked, %d bad" % (len(ids), bad))
sys.exit(1 if bad else 0)
PY

img=$T/u.img mnt=$T/m
mkdir -p "$mnt" "$T/k"
mke2fs -q -F -t ext4 -O orphan_file "$img" 128M || fail "mke2fs"
fuse_mount_fg "$img" "$mnt" writeback || fail "read-write mount"

note "1. O_APPEND from two processes"
N=$((2000 + SEED % 1000))
python3 "$T/append.py" "$mnt/log" A "$N" &
pa=$!
python3 "$T/append.py" "$mnt/log" B "$N" &
pb=$!
wait "$pa" || bad "appender A failed"
wait "$pb" || bad "appender B failed"
python3 "$T/check_append.py" "$mnt/log" "$N" A B || bad "O_APPEND records on the mount"

note "2. times on uext4"
python3 "$T/times.py" "$mnt" > "$T/times.uext4" 3> "$T/times.raw" || bad "times.py on uext4"
cat "$T/times.uext4"

note "3. mmap store"
python3 "$T/mmap_store.py" "$mnt/mm" || bad "mmap.py"

note "4. setfacl sets the mode"
touch "$mnt/acl" && chmod 640 "$mnt/acl"
stat -c %A "$mnt/acl" > /dev/null
setfacl -m u:1234:rwx "$mnt/acl" || bad "setfacl -m u:1234:rwx"
stat -c '%A' "$mnt/acl" > "$T/acl.uext4"
setfacl -m m::r "$mnt/acl" || bad "setfacl -m m::r"
stat -c '%A' "$mnt/acl" >> "$T/acl.uext4"
cat "$T/acl.uext4"
# The invalidation comes inside the setxattr request: it must not wait for
# the file's dirty pages (the single-threaded loop would deadlock).
timeout 60 python3 -c '
import os, subprocess, sys
p = sys.argv[1]
fd = os.open(p, os.O_WRONLY | os.O_CREAT, 0o640)
os.write(fd, b"q" * (3 << 20))            # dirty pages, not written back
subprocess.run(["setfacl", "-m", "u:1234:rwx", p], check=True)
mode = os.stat(p).st_mode & 0o777
os.close(fd)
sys.exit(0 if mode == 0o670 and os.stat(p).st_size == 3 << 20 else "mode %o" % mode)' "$mnt/dirty" ||
	bad "setfacl on a file with dirty pages (hung, or the mode is stale)"
fuse_umount "$mnt"
fsck_clean "$img" || bad "e2fsck after the first mount"

note "persisted: O_APPEND file, times, mmap store"
"$UEXT4" cat "$img" /log > "$T/log.out" || bad "uext4 cat /log"
python3 "$T/check_append.py" "$T/log.out" "$N" A B || bad "O_APPEND records in the image"
read -r mt ct sz mode < "$T/times.raw"
got=$("$UEXT4" stat "$img" /t) || bad "uext4 stat /t"
fuse_mount "$img" "$mnt" || fail "read-only mount"
st=$(stat -c '%s %a' "$mnt/t")
pymt=$(python3 -c 'import os,sys; s=os.stat(sys.argv[1]); print(s.st_mtime_ns, s.st_ctime_ns)' "$mnt/t")
[ "$pymt" = "$mt $ct" ] || bad "times in the image ($pymt) are not what stat showed on the mount ($mt $ct): $got"
[ "$st" = "$sz 600" ] || bad "size/mode in the image: $st, want $sz 600"
python3 -c '
import sys
d = open(sys.argv[1], "rb").read()
sys.exit(0 if d[100:110] == b"mmapstore!" and d[40000:40004] == b"tail" and len(d) == 65536 else 1)' "$mnt/mm" ||
	bad "the mmap store is not in the image"
fuse_umount "$mnt"

if can_loop; then
	note "2, 4 on the kernel's ext4"
	kimg=$T/k.img
	mke2fs -q -F -t ext4 "$kimg" 64M || fail "mke2fs"
	kmount "$kimg" "$T/k" rw || fail "kernel mount"
	python3 "$T/times.py" "$T/k" > "$T/times.kernel" 3> /dev/null || bad "times.py on the kernel"
	touch "$T/k/acl" && chmod 640 "$T/k/acl"
	setfacl -m u:1234:rwx "$T/k/acl" && stat -c '%A' "$T/k/acl" > "$T/acl.kernel"
	setfacl -m m::r "$T/k/acl" && stat -c '%A' "$T/k/acl" >> "$T/acl.kernel"
	umount "$T/k"
	diff "$T/times.kernel" "$T/times.uext4" || bad "time relations differ from the kernel's ext4"
	diff "$T/acl.kernel" "$T/acl.uext4" || bad "modes after setfacl differ from the kernel's ext4"
else
	echo "(no loop device: the kernel comparison of 2 and 4 is skipped)"
	grep -q "False" "$T/times.uext4" && bad "a time relation does not hold"
	[ "$(cat "$T/acl.uext4")" = "$(printf -- '-rw-rwx---\n-rw-r-----')" ] || bad "modes after setfacl"
fi

note "5. fsync/fdatasync, then kill -9 of the server"
fuse_mount_fg "$img" "$mnt" writeback || fail "read-write mount"
conn=$(mountpoint -d "$mnt" | cut -d: -f2)
mkdir "$mnt/sync" || bad "mkdir"
python3 "$T/fsync.py" "$mnt/sync" "$SEED" "$T/fsync.log" || bad "fsync.py"
kill -9 "$FUSE_PID"
[ -w "/sys/fs/fuse/connections/$conn/abort" ] && echo 1 > "/sys/fs/fuse/connections/$conn/abort"
wait "$FUSE_PID" 2> /dev/null
FUSE_PID=
fusermount3 -uz "$mnt" 2> /dev/null || umount -l "$mnt"
"$UEXT4" recover "$img" || bad "uext4 recover"
fsck_clean "$img" || bad "e2fsck after recovery"
fuse_mount "$img" "$mnt" || fail "read-only mount after recovery"
python3 "$T/check_fsync.py" "$mnt/sync" "$SEED" "$T/fsync.log" || bad "fsynced files after kill -9 (seed $SEED)"
fuse_umount "$mnt"

note "6. SIGTERM to the server with a file open and not synced"
# The file is still open when the session ends: the kernel never releases
# it, so its handle is not freed (LeakSanitizer would say so).
ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 fuse_mount_fg "$img" "$mnt" writeback ||
	fail "read-write mount"
# The writer keeps the file open until the server has exited, so only the
# server's stop (not the close's flush) can have written the pages.
timeout 60 python3 -c '
import os, select, signal, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT, 0o644)
os.write(fd, b"s" * 300000)              # in the kernel page cache only
server = os.pidfd_open(int(sys.argv[2]))
os.kill(int(sys.argv[2]), signal.SIGTERM)
select.select([server], [], [])          # readable once the server exited
try:
    os.close(fd)                         # the mount is gone: may fail
except OSError:
    pass
' "$mnt/open-at-term" "$FUSE_PID" || bad "writer of open-at-term"
wait "$FUSE_PID" 2> /dev/null
FUSE_PID=
fusermount3 -uz "$mnt" 2> /dev/null
fsck_clean "$img" || bad "e2fsck after SIGTERM"
got=$("$UEXT4" cat "$img" /open-at-term | wc -c)
[ "$got" = 300000 ] || bad "SIGTERM lost the dirty pages of an open file ($got of 300000 bytes in the image)"

note "7. directories are opened without OPENDIR"
rm -f "$img"
mke2fs -q -F -t ext4 "$img" 64M || fail "mke2fs"
"$UEXT4" mount -f -o writeback,debug "$img" "$mnt" > "$T/dbg.log" 2>&1 &
FUSE_PID=$!
MOUNTS+=("$mnt")
for ((i = 0; i < 300; i++)); do
	[ "$(findmnt -n -o TARGET "$mnt" 2> /dev/null)" = "$mnt" ] && break
	sleep 0.1 # polling for the mount to appear, with a 30 s deadline
done
mkdir -p "$mnt/d/e" && touch "$mnt/d/a" "$mnt/d/b" || bad "populate d"
l1=$(ls -a "$mnt/d" | tr '\n' ' ')
touch "$mnt/d/c" && mv "$mnt/d/a" "$mnt/d/z" && rm "$mnt/d/b" || bad "change d"
l2=$(ls -a "$mnt/d" | tr '\n' ' ')
for ((i = 0; i < 20; i++)); do ls -R "$mnt" > /dev/null; done
[ "$l1" = ". .. a b e " ] || bad "first listing: '$l1'"
[ "$l2" = ". .. c e z " ] || bad "listing after create, rename, unlink: '$l2'"
fuse_umount "$mnt"
n_open=$(grep -c "opcode: OPENDIR" "$T/dbg.log")
n_rel=$(grep -c "opcode: RELEASEDIR" "$T/dbg.log")
n_rd=$(grep -c "opcode: READDIR" "$T/dbg.log")
echo "OPENDIR $n_open, RELEASEDIR $n_rel, READDIR(PLUS) $n_rd"
[ "$n_open" = 1 ] || bad "$n_open OPENDIR requests (want 1: the one answered ENOSYS)"
[ "$n_rel" = 0 ] || bad "$n_rel RELEASEDIR requests (want 0)"
[ "$n_rd" -ge 2 ] || bad "only $n_rd READDIR requests: the listings were not served?"
fsck_clean "$img" || bad "e2fsck after the directory round"
got=$("$UEXT4" ls "$img" /d | sort | tr '\n' ' ')
[ "$got" = "c e z " ] || bad "the image's /d after unmount: '$got'"

san_check
[ $FAILS = 0 ] || { echo "fuse_cache: $FAILS failures (seed $SEED)"; exit 1; }
echo "fuse_cache: OK (seed $SEED)"
