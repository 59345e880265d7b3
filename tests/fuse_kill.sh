#!/bin/bash
# fuse_kill.sh - kill -9 of the FUSE server in the middle of a
# multi-threaded workload.
#
# A read-write `uext4 mount -f` of a fresh image runs four writer processes
# (python3): each creates files with content derived from (seed, name) in
# its own directories, fsyncs each one and only then appends "F name" to a
# log outside the mount; it also renames, unlinks and makes/removes
# directories, logging each of those BEFORE doing it ("R old new", "U
# name"), so the checker knows which names are in doubt.  Once the log holds
# a random number of fsynced files (a bounded poll on the log, no sleeps as
# synchronisation) the server gets SIGKILL; the mount is lazily unmounted,
# the image recovered (`uext4 recover`, or a read-write mount and unmount
# when the CLI has no recover command yet), e2fsck -fn must be clean, and
# every logged file must be there (under its name, or under the target of
# a rename logged after it) with its content.  Three rounds, different kill
# points.  FUSE_KILL_SEED=N replays the choices.
# test-timeout: 300
set -uo pipefail
. "$(dirname "$0")/lib.sh"
fuse_test python3
test_seed fuse_kill FUSE_KILL_SEED

cat > "$T/work.py" << 'EOF'
# work.py MNT LOG SEED ID: one writer; stops at the first error (server gone).
import hashlib, os, random, sys
mnt, log, seed, wid = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
rnd = random.Random(seed * 100 + wid)
def content(name):
    h = hashlib.sha256(("%d:%s" % (seed, name)).encode()).digest()
    n = int.from_bytes(h[:4], "little") % 30000
    return (h * (n // 32 + 1))[:n]
logf = open(log, "a", buffering=1)
def note(line):
    logf.write(line + "\n")
    logf.flush()
def put(rel):
    fd = os.open(os.path.join(mnt, rel), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.write(fd, content(rel))
    os.fsync(fd)
    os.close(fd)
    note("F " + rel)
try:
    base = "w%d" % wid
    os.mkdir(os.path.join(mnt, base))
    live = []
    for i in range(100000):
        d = "%s/d%d" % (base, i // 10)
        if i % 10 == 0:
            os.mkdir(os.path.join(mnt, d))
        rel = "%s/f%d" % (d, i)
        put(rel)
        live.append(rel)
        r = rnd.random()
        if r < 0.2 and live:
            old = live.pop(rnd.randrange(len(live)))
            new = old + "-r"
            note("R %s %s" % (old, new))
            os.rename(os.path.join(mnt, old), os.path.join(mnt, new))
            live.append(new)
        elif r < 0.35 and live:
            old = live.pop(rnd.randrange(len(live)))
            note("U " + old)
            os.unlink(os.path.join(mnt, old))
        elif r < 0.4:
            e = "%s/empty%d" % (base, i)
            os.mkdir(os.path.join(mnt, e))
            os.rmdir(os.path.join(mnt, e))
except OSError:
    pass
EOF

cat > "$T/check.py" << 'EOF'
# check.py MNT LOG SEED: every logged, fsynced file is there with its content.
import hashlib, os, sys
mnt, log, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
def content(name):
    h = hashlib.sha256(("%d:%s" % (seed, name)).encode()).digest()
    n = int.from_bytes(h[:4], "little") % 30000
    return (h * (n // 32 + 1))[:n]
files = {}      # current name -> (original name, [acceptable names])
doubt = set()
for line in open(log):
    p = line.split()
    if not p:
        continue
    if p[0] == "F":
        files[p[1]] = (p[1], [p[1]])
    elif p[0] == "R" and p[1] in files:
        orig, names = files.pop(p[1])
        files[p[2]] = (orig, names + [p[2]])
    elif p[0] == "U":
        files.pop(p[1], None)
bad = 0
for cur, (orig, names) in files.items():
    want = content(orig)
    # a rename logged before it ran may or may not have happened
    ok = False
    for n in (names[-2:] if len(names) > 1 else names):
        try:
            with open(os.path.join(mnt, n), "rb") as f:
                if f.read() == want:
                    ok = True
                    break
        except OSError:
            pass
    if not ok:
        bad += 1
        if bad <= 10:
            print("missing or wrong: %s (names %s)" % (orig, names))
print("checked %d fsynced files, %d bad" % (len(files), bad))
sys.exit(1 if bad else 0)
EOF

mounted() { [ "$(findmnt -n -o TARGET "$1" 2> /dev/null)" = "$1" ]; }

# wait_mounted DIR PID: poll (30 s deadline) until DIR is a mount point.
wait_mounted() {
	local i
	for ((i = 0; i < 300; i++)); do
		mounted "$1" && return 0
		kill -0 "$2" 2> /dev/null || return 1
		sleep 0.1 # bounded poll for the mount to appear
	done
	return 1
}

# recover IMAGE: `uext4 recover`, else a read-write mount and clean unmount.
recover() {
	local img=$1 mnt=$T/rec pid
	if "$UEXT4" help 2>&1 | grep -qw recover; then
		"$UEXT4" recover "$img"
		return
	fi
	echo "(no 'uext4 recover' yet: read-write mount + unmount)"
	mkdir -p "$mnt"
	"$UEXT4" mount -f "$img" "$mnt" > "$T/rec.log" 2>&1 &
	pid=$!
	MOUNTS+=("$mnt")
	wait_mounted "$mnt" "$pid" || { cat "$T/rec.log"; return 1; }
	fusermount3 -u "$mnt" || return 1
	wait "$pid"
}


round() { # round N
	local n=$1 img=$T/r$1.img mnt=$T/m$1 log=$T/r$1.log pid want i w pids=() got conn
	want=$(( (SEED * 7 + n * 13) % 40 + 8 ))
	note "round $n: kill after $want fsynced files"
	mke2fs -q -F -t ext4 -O orphan_file "$img" 64M || fail "mke2fs"
	mkdir -p "$mnt"
	: > "$log"
	"$UEXT4" mount -f "$img" "$mnt" > "$T/m$n.out" 2>&1 &
	pid=$!
	MOUNTS+=("$mnt")
	wait_mounted "$mnt" "$pid" || { cat "$T/m$n.out"; bad "round $n: mount failed"; return; }
	conn=$(mountpoint -d "$mnt" | cut -d: -f2)
	for w in 1 2 3 4; do
		# bounded: a writer stuck on the dead mount must not hang the test
		timeout -s KILL 120 python3 "$T/work.py" "$mnt" "$log" "$((SEED + n))" "$w" &
		pids+=($!)
	done
	# Bounded poll (60 s) for the log to reach the kill point.
	for ((i = 0; i < 1200; i++)); do
		got=$(grep -c '^F ' "$log")
		[ "$got" -ge "$want" ] && break
		kill -0 "$pid" 2> /dev/null || break
		sleep 0.05 # polling the log, not synchronisation
	done
	if ! kill -0 "$pid" 2> /dev/null; then
		cat "$T/m$n.out"
		bad "round $n: server died before the kill"
	fi
	kill -9 "$pid" 2> /dev/null
	# Abort the FUSE connection so no request waits on the dead server.
	[ -w "/sys/fs/fuse/connections/$conn/abort" ] && echo 1 > "/sys/fs/fuse/connections/$conn/abort"
	wait "$pid" 2> /dev/null
	# Stop the writers BEFORE the lazy unmount: afterwards their paths
	# would reach the empty mount point directory on the host, and what
	# they "fsynced" there would be logged as if it were in the image.
	for w in "${pids[@]}"; do
		pkill -9 -P "$w" 2> /dev/null
		kill -9 "$w" 2> /dev/null
	done
	for w in "${pids[@]}"; do wait "$w" 2> /dev/null; done
	echo "killed with $(grep -c '^F ' "$log") fsynced files logged"
	fusermount3 -uz "$mnt" 2> /dev/null || umount -l "$mnt"
	recover "$img" || { bad "round $n: recovery failed"; return; }
	fsck_clean "$img" || { bad "round $n: e2fsck after recovery (seed $SEED)"; cp "$img" /tmp/fuse_kill-fail-r$n.img; echo "kept /tmp/fuse_kill-fail-r$n.img"; }
	fuse_mount "$img" "$mnt" || { bad "round $n: read-only mount for checking"; return; }
	python3 "$T/check.py" "$mnt" "$log" "$((SEED + n))" || bad "round $n: fsynced files (seed $SEED)"
	fuse_umount "$mnt"
	fsck_clean "$img" || bad "round $n: e2fsck at the end"
	rm -f "$img"
}

for n in 1 2 3; do round "$n"; done
san_check
[ $FAILS = 0 ] || { echo "fuse_kill: $FAILS failures (seed $SEED)"; exit 1; }
echo "fuse_kill: 3 rounds pass (seed $SEED)"
