#!/bin/bash
# fuse_stats_concur.sh - `uext4 stats` on a running mount.
#
#  1. Read-write mount without -o stats: `uext4 stats` exits 1 and says how
#     to turn them on; --on --reset starts counting.
#  2. NW workers at once, each in a directory of its own: mkdir, NF files
#     created and written, stat of each.  The text report's CREATE and
#     LOOKUP counts are >= the files made, MKDIR >= NW; --json parses
#     (python3 -m json.tool) and agrees: fuse.requests.CREATE.count >= files,
#     latencies > 0, the library's directory lock class acquired at least
#     once per create, data blocks written.
#  3. An fsync: the journal counted a commit with blocks.
#  4. --reset prints, then zeroes: the next report has no CREATE; a
#     subdirectory has no statistics (exit 1); the root's listxattr does not
#     show the virtual names; getfattr -n user.uext4.stats works.
#  5. --off prints and stops counting: `uext4 stats` then exits 1 again.
#  6. After `uext4 umount`: e2fsck -fn clean.
#  7. A read-only mount with -o stats: counting from the start (INIT
#     counted, READDIR(PLUS) after a find), --reset works there too.
# No sanitizer report from the server (asan/tsan builds).
# test-timeout: 300
# run-in: release asan tsan
set -uo pipefail
. "$(dirname "$0")/lib.sh"
fuse_test python3
NW=4 NF=${FUSE_STATS_FILES:-150}
FILES=$((NW * NF))
IMG=$T/img MNT=$T/mnt
mkdir -p "$MNT"

"$UEXT4" mkfs -q "$IMG" 256M || fail "mkfs"
"$UEXT4" mount "$IMG" "$MNT" || fail "mount"
MOUNTS+=("$MNT")

note "1. statistics off: uext4 stats says how to turn them on"
out=$("$UEXT4" stats "$MNT" 2>&1)
rc=$?
echo "$out"
[ $rc = 1 ] || bad "uext4 stats on a mount without statistics: exit $rc, expected 1"
grep -q -- "-o stats" <<< "$out" && grep -q -- "--on" <<< "$out" ||
	bad "the message does not say how to turn statistics on"
"$UEXT4" stats --on --reset "$MNT" > /dev/null || bad "uext4 stats --on --reset failed"

note "2. $NW workers, $NF files each, in their own directories"
worker() {
	local d=$MNT/w$1 i
	mkdir "$d" || return 1
	for ((i = 0; i < NF; i++)); do echo "file $1 $i" > "$d/f$i" || return 1; done
	for ((i = 0; i < NF; i++)); do stat -c %s "$d/f$i" > /dev/null || return 1; done
}
pids=()
for ((w = 0; w < NW; w++)); do
	worker "$w" &
	pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || bad "a worker failed"; done

"$UEXT4" stats "$MNT" > "$T/stats.txt" || bad "uext4 stats failed"
cat "$T/stats.txt"
count_of() { awk -v op="$1" '$1 == op { print $2; exit }' "$T/stats.txt"; }
for op in CREATE LOOKUP; do
	n=$(count_of $op)
	[ "${n:-0}" -ge "$FILES" ] || bad "$op count ${n:-none} < $FILES files made"
done
n=$(count_of MKDIR)
[ "${n:-0}" -ge "$NW" ] || bad "MKDIR count ${n:-none} < $NW"
grep -q '^statistics: on' "$T/stats.txt" || bad "text report does not say it is on"

"$UEXT4" stats --json "$MNT" > "$T/stats.json" || bad "uext4 stats --json failed"
python3 -m json.tool "$T/stats.json" > /dev/null || bad "--json output does not parse"
python3 - "$T/stats.json" "$FILES" << 'PY' || bad "JSON report checks"
import json, sys
s = json.load(open(sys.argv[1])); files = int(sys.argv[2]); ok = True
def check(cond, what):
    global ok
    if not cond:
        print("FAIL:", what); ok = False
req = s["fuse"]["requests"]
check(s["enabled"] and s["fuse"]["enabled"], "enabled")
check(req["CREATE"]["count"] >= files, "CREATE count %d" % req["CREATE"]["count"])
check(req["CREATE"]["replies"] == req["CREATE"]["count"], "every CREATE replied")
check(req["CREATE"]["latency_ns"] > 0 and req["CREATE"]["latency_max_ns"] > 0, "CREATE latency")
check(req["LOOKUP"]["count"] >= files, "LOOKUP count")
check(s["locks"]["directory"]["acquisitions"] >= files, "directory lock acquisitions %d"
      % s["locks"]["directory"]["acquisitions"])
check(s["blocks"]["data"]["written"] + s["cache"]["hits"] > 0, "blocks moved")
check(set(s["journal"]) >= {"commits", "blocks", "commit_ns", "blocked_ns", "handle_waits"},
      "journal keys")
print("json: CREATE %d LOOKUP %d, directory lock %d acquisitions %d contentions" %
      (req["CREATE"]["count"], req["LOOKUP"]["count"],
       s["locks"]["directory"]["acquisitions"], s["locks"]["directory"]["contentions"]))
sys.exit(0 if ok else 1)
PY

note "3. an fsync commits, and the journal counts it"
python3 -c "import os,sys; fd=os.open(sys.argv[1], os.O_WRONLY|os.O_APPEND); os.write(fd, b'more\n'); os.fsync(fd)" "$MNT/w0/f0" ||
	bad "fsync failed"
"$UEXT4" stats --json "$MNT" > "$T/stats2.json" || bad "uext4 stats --json failed"
python3 -c '
import json, sys
j = json.load(open(sys.argv[1]))["journal"]
print("journal:", j)
sys.exit(0 if j["commits"] >= 1 and j["blocks"] > 0 and j["commit_ns"] > 0 else 1)' "$T/stats2.json" ||
	bad "no commit counted after an fsync"

note "4. --reset, a subdirectory, the xattr names"
"$UEXT4" stats --reset "$MNT" > /dev/null || bad "uext4 stats --reset failed"
"$UEXT4" stats "$MNT" > "$T/stats.txt" || bad "uext4 stats after reset failed"
n=$(count_of CREATE)
[ -z "$n" ] || bad "CREATE count $n after --reset"
"$UEXT4" stats "$MNT/w0" > "$T/sub.out" 2>&1 && bad "uext4 stats of a subdirectory succeeded"
grep -q "no statistics here" "$T/sub.out" || { cat "$T/sub.out"; bad "subdirectory message"; }
python3 -c 'import os,sys; n=[x for x in os.listxattr(sys.argv[1]) if "uext4" in x]; sys.exit(1 if n else 0)' "$MNT" ||
	bad "listxattr of the root shows the virtual names"
if command -v getfattr > /dev/null; then
	getfattr --only-values -n user.uext4.stats "$MNT" | grep -q '^statistics: on' ||
		bad "getfattr -n user.uext4.stats"
fi

note "5. --off"
"$UEXT4" stats --off "$MNT" > /dev/null || bad "uext4 stats --off failed"
"$UEXT4" stats "$MNT" > /dev/null 2>&1 && bad "uext4 stats succeeded after --off"

note "6. unmount, e2fsck"
"$UEXT4" umount "$MNT" || bad "uext4 umount failed"
fsck_clean "$IMG" || bad "e2fsck after the mount"

note "7. read-only mount with -o stats"
"$UEXT4" mount -o ro,stats "$IMG" "$MNT" || fail "ro mount"
find "$MNT" -type f | wc -l
"$UEXT4" stats --json --reset "$MNT" > "$T/ro.json" || bad "uext4 stats on the ro mount"
python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))["fuse"]["requests"]
print({k: v["count"] for k, v in r.items()})
sys.exit(0 if r.get("INIT", {}).get("count", 0) == 1 and
         (r.get("READDIR", {}).get("count", 0) + r.get("READDIRPLUS", {}).get("count", 0)) > 0 else 1)' "$T/ro.json" ||
	bad "read-only mount: INIT and READDIR not counted from the start"
"$UEXT4" stats --json "$MNT" > "$T/ro2.json" || bad "uext4 stats on the ro mount"
python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))["fuse"]["requests"]
sys.exit(0 if "INIT" not in r and "READDIRPLUS" not in r else 1)' "$T/ro2.json" ||
	bad "read-only mount: --reset did not reset"
"$UEXT4" umount "$MNT" || bad "uext4 umount (ro) failed"

note "no sanitizer reports (server included)"
san_check
[ $FAILS = 0 ] || fail "$FAILS checks failed"
echo "PASS"
