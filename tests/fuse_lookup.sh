#!/bin/bash
# fuse_lookup.sh - the server holds every inode the kernel has looked up
# (FUSE lookup counts), so that requests the kernel sends by inode number
# after an unlink find the inode, and its number is not reused meanwhile.
# On a read-write mount with the default options (writeback cache on):
#
#  1. 4 threads, each: create a file, write random data, close, unlink it
#     (the kernel then sends a SETATTR of the file's ctime/mtime after the
#     UNLINK: it must find the unlinked inode, not a freed or reused one),
#     and create a file it keeps, with times set by utime; then stat some.
#     Then files unlinked while open, with creates in between: the data
#     stays readable through the fd, fstat shows nlink 0.  Last, a few
#     files written, closed and unlinked with no create after them.
#  2. A directory removed while a process has its cwd in it: stat(".")
#     works and shows nlink 0 (the GETATTR finds the unlinked inode); 200
#     files and directories created meanwhile never get its number.
#  3. The mount is unmounted lazily while that process still holds the
#     directory; the server ends when the process leaves (the kernel sends
#     no FORGET then: the library's unmount ends the count).
# Checked: the server logged nothing (no "deleted inode referenced", no
# corruption); e2fsck -fn is clean; the held directory's inode and the last
# unlinked files' inodes are free in the image (debugfs testi); on a
# read-only remount every kept file has its content and the times utime
# set (a SETATTR meant for an unlinked file landing on a file that reused
# its number would have changed them).  Without lookup counts step 1 logs
# "deleted inode referenced" for every unlink and step 2 fails.
# Random contents; FUSE_LOOKUP_SEED=N replays them.
# test-timeout: 300
# run-in: release asan tsan
set -uo pipefail
. "$(dirname "$0")/lib.sh"
fuse_test python3
test_seed fuse_lookup FUSE_LOOKUP_SEED
RANDOM=$SEED

cat > "$T/work.py" << 'PY'
# work.py MNT SEED OUT: step 1; writes the kept files' expected content
# hash and times to OUT.
import hashlib, os, random, sys, threading
mnt, seed, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
N = 300
errors = []
kept = {}
lock = threading.Lock()

def data(rng):
    return rng.randbytes(rng.randint(1, 20000))

def worker(t):
    rng = random.Random(seed * 10 + t)
    d = os.path.join(mnt, "w%d" % t)
    os.mkdir(d)
    try:
        for i in range(N):
            f = os.path.join(d, "f%d" % i)
            with open(f, "wb") as fp:
                fp.write(data(rng))
            os.unlink(f)
            g = os.path.join(d, "g%d" % i)
            c = data(rng)
            with open(g, "wb") as fp:
                fp.write(c)
            ns = (978307200 + t * 100000 + i) * 10**9 + rng.randrange(10**9)
            os.utime(g, ns=(ns, ns))
            with lock:
                kept[g] = (hashlib.sha256(c).hexdigest(), ns)
            if i % 10 == 9:
                for k in range(i - 9, i + 1):
                    os.stat(os.path.join(d, "g%d" % k))
    except Exception as e:
        errors.append("thread %d: %r" % (t, e))

threads = [threading.Thread(target=worker, args=(t,)) for t in range(4)]
for th in threads:
    th.start()
for th in threads:
    th.join()

# Unlinked while open, with creates that may take a freed number.
rng = random.Random(seed)
for i in range(40):
    p = os.path.join(mnt, "open%d" % i)
    c = data(rng)
    fd = os.open(p, os.O_RDWR | os.O_CREAT, 0o644)
    os.write(fd, c)
    os.unlink(p)
    for k in range(3):
        q = os.path.join(mnt, "new%d_%d" % (i, k))
        with open(q, "wb") as fp:
            fp.write(b"n" * k)
        os.utime(q, ns=(10**18, 10**18))
        with lock:
            kept[q] = (hashlib.sha256(b"n" * k).hexdigest(), 10**18)
    st = os.fstat(fd)
    if os.pread(fd, len(c) + 1, 0) != c:
        errors.append("open%d: data read through the fd after unlink differs" % i)
    if st.st_nlink != 0:
        errors.append("open%d: nlink %d after unlink" % (i, st.st_nlink))
    os.close(fd)

with open(out, "w") as o:
    for g, (h, ns) in sorted(kept.items()):
        o.write("%s %s %d\n" % (os.path.relpath(g, mnt), h, ns))
for e in errors:
    print(e)
sys.exit(1 if errors else 0)
PY

cat > "$T/hold.py" << 'PY'
# hold.py MNT: step 2; prints "held INO" when done, then waits for EOF on
# stdin before it leaves the directory (exits).
import os, sys
mnt = sys.argv[1]
d = os.path.join(mnt, "held")
os.mkdir(d)
os.chdir(d)
os.rmdir(d)
st = os.stat(".")
bad = []
if st.st_nlink != 0:
    bad.append("stat . in the removed directory: nlink %d, want 0" % st.st_nlink)
for i in range(100):
    for p in (os.path.join(mnt, "hd%d" % i), os.path.join(mnt, "hf%d" % i)):
        if p.endswith("hd%d" % i):
            os.mkdir(p)
        else:
            open(p, "w").close()
        if os.stat(p).st_ino == st.st_ino:
            bad.append("%s got the number %d of the removed directory" % (p, st.st_ino))
st2 = os.stat(".")
if st2.st_ino != st.st_ino:
    bad.append("stat . changed inode: %d -> %d" % (st.st_ino, st2.st_ino))
for b in bad:
    print(b, file=sys.stderr)
print("held %d" % st.st_ino, flush=True)
sys.stdin.readline()
sys.exit(1 if bad else 0)
PY

img=$T/u.img mnt=$T/m
mkdir -p "$mnt"
mke2fs -q -F -t ext4 -O orphan_file "$img" 128M || fail "mke2fs"
fuse_mount_fg "$img" "$mnt" || fail "read-write mount"

note "1. unlink after close and while open, with creates reusing numbers"
timeout 200 python3 "$T/work.py" "$mnt" "$SEED" "$T/kept" || bad "work.py"

note "2. a removed directory held as cwd"
mkfifo "$T/go"
python3 "$T/hold.py" "$mnt" < "$T/go" > "$T/hold.out" 2> "$T/hold.err" &
holder=$!
exec 7> "$T/go"         # the holder's stdin stays open until we write
for ((i = 0; i < 600; i++)); do
	grep -q '^held ' "$T/hold.out" && break
	kill -0 "$holder" 2> /dev/null || break
	sleep 0.1 # polling for the holder's line, with a 60 s deadline
done
held=$(sed -n 's/^held //p' "$T/hold.out")
[ -n "$held" ] || bad "the holder did not get there: $(cat "$T/hold.err")"

# The last unlinks: nothing is created after them, so their numbers must
# be free in the image after unmount.
for i in 0 1 2 3 4; do
	head -c $((RANDOM * 3 + 1)) /dev/urandom > "$mnt/last$i" || bad "write last$i"
	stat -c %i "$mnt/last$i" >> "$T/freed"
	rm "$mnt/last$i" || bad "rm last$i"
done

note "3. lazy unmount while the directory is held"
fusermount3 -uz "$mnt" || umount -l "$mnt" || bad "lazy unmount"
kill -0 "$FUSE_PID" 2> /dev/null || bad "the server ended while the directory was still held"
exec 7>&-               # EOF on the holder's stdin: it leaves
wait "$holder" || bad "holder: $(cat "$T/hold.err")"
timeout 60 tail --pid="$FUSE_PID" -f /dev/null || bad "the server did not end after the holder left"
wait "$FUSE_PID" || bad "server exit status $?"
FUSE_PID=
if grep -E "deleted inode|not in use|corrupt|uext4 mount:" "$mnt.log"; then
	bad "the server logged errors (above)"
fi
fsck_clean "$img" || bad "e2fsck -fn after unmount"
for ino in $held $(sort -u "$T/freed"); do
	out=$(debugfs -R "testi <$ino>" "$img" 2> /dev/null)
	case "$out" in
	*"is not in use"*) ;;
	*) bad "inode $ino (unlinked, held by the kernel) is not free after unmount: $out" ;;
	esac
done

note "kept files on a read-only remount"
fuse_mount "$img" "$mnt" || fail "read-only mount"
python3 - "$mnt" "$T/kept" << 'PY' || bad "kept files (content or times) differ"
import hashlib, os, sys
mnt, kept = sys.argv[1], sys.argv[2]
bad = n = 0
for line in open(kept):
    rel, h, ns = line.split()
    p = os.path.join(mnt, rel)
    st = os.stat(p)
    if hashlib.sha256(open(p, "rb").read()).hexdigest() != h or st.st_mtime_ns != int(ns):
        bad += 1
        if bad <= 5:
            print("%s: content or mtime (%d, want %s) differs" % (rel, st.st_mtime_ns, ns))
    n += 1
print("%d kept files checked, %d differ" % (n, bad))
sys.exit(1 if bad or n == 0 else 0)
PY
fuse_umount "$mnt"

san_check
[ $FAILS = 0 ] || { echo "fuse_lookup: $FAILS failures (seed $SEED)"; exit 1; }
echo "fuse_lookup: OK (seed $SEED)"
