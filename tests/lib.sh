# lib.sh - shared shell helpers for tests/*.sh.  Source it: . tests/lib.sh
#
# Environment (set by tests/run.sh; defaults for running a test by hand):
#   UEXT4_BUILD  build directory (build, build/asan, build/tsan)
#   UEXT4        the CLI/FUSE binary ($UEXT4_BUILD/uext4)
#   UEXT4_CACHE  where generated trees and images are kept (tests/tmp/vN-HASH),
#                shared by every test of a run and across runs
#
# Trees and images for tests: tree_get, image_get (tests/imgcache.inc).

TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
UEXT4_BUILD=${UEXT4_BUILD:-$TOP/build}
case "$UEXT4_BUILD" in /*) ;; *) UEXT4_BUILD=$TOP/$UEXT4_BUILD ;; esac
UEXT4=${UEXT4:-$UEXT4_BUILD/uext4}
case "$UEXT4" in /*) ;; *) UEXT4=$TOP/$UEXT4 ;; esac
WALK=${WALK:-$UEXT4_BUILD/tests/walk}
MKTREE=$TOP/tests/mktree.sh
export UEXT4_BUILD UEXT4

cache_key() {
	local v
	v=$("$MKTREE" --version)
	echo "v$v-$(cat "$MKTREE" "$TOP/tests/imgcache.inc" | cksum | cut -d' ' -f1)"
}
UEXT4_CACHE=${UEXT4_CACHE:-$TOP/tests/tmp/$(cache_key)}
export UEXT4_CACHE

skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }
# bad MSG: a check failed; the test goes on, and ends failing if FAILS > 0.
# A test that runs cases names the current one in CASE.
FAILS=0
bad() { echo "FAIL${CASE:+ [$CASE]}: $*"; FAILS=$((FAILS + 1)); }
note() { echo "== $*"; }

# What a test needs of the machine: each skips the test, saying what is
# missing.
# need CMD[:PACKAGE]...: installed commands (PACKAGE: the one to install).
need() {
	local a c
	for a; do
		c=${a%%:*}
		command -v "$c" > /dev/null && continue
		[ "$c" = "$a" ] && skip "$c missing"
		skip "$c missing (package ${a#*:})"
	done
}
# need_root WHY: root.
need_root() { [ "$(id -u)" = 0 ] || skip "needs root ($1)"; }
# need_fuse: FUSE mounts (/dev/fuse and fusermount3).
need_fuse() {
	[ -c /dev/fuse ] || skip "/dev/fuse missing"
	need fusermount3
}
# need_loop [WHY]: the kernel's ext4 on a loop device, to compare with.
need_loop() {
	local why="needs root and a loop device (the kernel's ext4 is the oracle)"
	can_loop || skip "${1:-$why}"
}
# need_built PROGRAM...: programs of the build (the CLI, test helpers); a
# missing one fails the test (make builds them all).
need_built() {
	local b
	for b; do [ -x "$b" ] || fail "$b not built (run make)"; done
}
# need_helper VAR NAME: VAR is the test helper build/tests/NAME, built.
need_helper() {
	printf -v "$1" '%s' "$UEXT4_BUILD/tests/$2"
	need_built "${!1}"
}

# scratch_on_tmpfs: temporary directories go to /dev/shm when it is a
# writable tmpfs and TMPDIR is not set: / here may be mounted with discard,
# which makes every rm -r of a test tree take seconds, and fsync costs
# nothing on tmpfs.
scratch_on_tmpfs() {
	if [ -z "${TMPDIR:-}" ] && [ "$(stat -f -c %T /dev/shm 2> /dev/null)" = tmpfs ] &&
		[ -w /dev/shm ]; then
		export TMPDIR=/dev/shm
	fi
}

# helper_test VAR NAME [CMD...]: the start of a test that drives the test
# helper build/tests/NAME (in VAR): cleanup on exit, the helper built and the
# commands it needs.
helper_test() {
	setup_traps
	need_helper "$1" "$2"
	need "${@:3}"
}
# sanitized: whether this run is of a sanitizer build (slower: tests that
# time or count scale down).
sanitized() {
	case "$UEXT4_BUILD" in *asan* | *tsan*) return 0 ;; esac
	return 1
}

# test_dir: T, this test's temporary directory (removed at exit), where the
# servers it starts leave their sanitizer reports (see san_check).
test_dir() {
	T=$(mktemp_dir)
	san_logs_in "$T"
}
# fuse_test [CMD...]: the start of a test of the FUSE server: cleanup on
# exit, FUSE and the commands it needs, the binary built, and test_dir.
fuse_test() {
	setup_traps
	need_fuse
	need "$@"
	need_built "$UEXT4"
	test_dir
}
# san_check [DIR]: each sanitizer report a server left in DIR (default $T)
# is shown and is a failed check; returns 1 if there was one.
san_check() {
	local f rc=0
	for f in "${1:-$T}"/san*; do
		[ -e "$f" ] || continue
		cat "$f"
		bad "sanitizer report $f"
		rc=1
	done
	return $rc
}
# test_seed NAME [VAR]: SEED from $VAR (default SEED), else at random;
# printed so that a failing run can be replayed.
test_seed() {
	local var=${2:-SEED} r
	r=$(od -An -N4 -tu4 /dev/urandom)
	SEED=${!var:-$((r % 1000000000))}
	echo "$1: seed $SEED ($var=$SEED replays)"
}
# san_logs_in DIR: the sanitizers of the servers a test starts write their
# reports to DIR/san.PID, where the test looks for them, not to stderr that a
# daemon has closed.
san_logs_in() {
	local v
	for v in ASAN_OPTIONS UBSAN_OPTIONS TSAN_OPTIONS; do
		export "$v=${!v:+${!v}:}log_path=$1/san"
	done
}

# can_loop: root and a free loop device (kernel oracle available).
can_loop() {
	[ "${UEXT4_NO_LOOP:-0}" = 0 ] && [ "$(id -u)" = 0 ] && losetup -f > /dev/null 2>&1
}

# Everything mounted by these helpers is unmounted by cleanup_mounts, which
# tests run from their EXIT trap.
MOUNTS=()
TMPDIRS=()
cleanup_mounts() {
	local i m
	for ((i = ${#MOUNTS[@]} - 1; i >= 0; i--)); do
		m=${MOUNTS[i]}
		if mountpoint -q "$m" 2> /dev/null; then
			case "$(findmnt -n -o FSTYPE "$m" 2> /dev/null)" in
			fuse*) fusermount3 -u "$m" 2> /dev/null || umount -l "$m" ;;
			*) umount "$m" 2> /dev/null || umount -l "$m" ;;
			esac
		fi
	done
	MOUNTS=()
	for m in "${TMPDIRS[@]}"; do rm -rf "$m"; done
	TMPDIRS=()
	if [ -f "$TMPDIR_LIST" ]; then
		while read -r m; do rm -rf "$m"; done < "$TMPDIR_LIST"
	fi
	rm -f "$TMPDIR_LIST"
}
# A test calls this first: cleanup on exit, and exit (so the EXIT trap runs)
# on INT/TERM, e.g. when run.sh's timeout fires.
setup_traps() {
	trap cleanup_mounts EXIT
	trap 'echo "interrupted"; exit 1' INT TERM
}
# Tests call it as d=$(mktemp_dir), in a subshell, so the directory is
# also noted in a file of this script's own (not exported: a test run by a
# test has its own) for cleanup_mounts to remove.
TMPDIR_LIST=$(mktemp "${TMPDIR:-/tmp}/uext4-tmpdirs.XXXXXX")
mktemp_dir() {
	local d
	d=$(mktemp -d "${TMPDIR:-/tmp}/uext4-test.XXXXXX")
	TMPDIRS+=("$d")
	echo "$d" >> "$TMPDIR_LIST"
	echo "$d"
}

kmount() { # kmount IMAGE DIR [OPTS]: kernel loop mount (read-only by default)
	mount -t ext4 -o "loop,${3:-ro,noload}" "$1" "$2" || return 1
	MOUNTS+=("$2")
}
kumount() {
	umount "$1"
}

# fuse_mount IMAGE DIR: our FUSE server, read-only.  Works whether
# `uext4 mount` daemonizes or stays in the foreground.
FUSE_PID=
fuse_mount() {
	local img=$1 dir=$2 i
	"$UEXT4" mount -o ro "$img" "$dir" > "$dir.log" 2>&1 &
	FUSE_PID=$!
	MOUNTS+=("$dir")
	for ((i = 0; i < 300; i++)); do
		if [ "$(findmnt -n -o TARGET "$dir" 2> /dev/null)" = "$dir" ]; then return 0; fi
		if ! kill -0 "$FUSE_PID" 2> /dev/null; then
			wait "$FUSE_PID" || { cat "$dir.log"; return 1; }
			[ "$(findmnt -n -o TARGET "$dir" 2> /dev/null)" = "$dir" ] && return 0
			cat "$dir.log"
			return 1
		fi
		sleep 0.1 # polling for the mount to appear, with a 30 s deadline
	done
	echo "FUSE mount of $img on $dir did not appear in 30 s"
	cat "$dir.log"
	return 1
}
# fuse_mount_fg IMAGE DIR [OPTIONS]: our FUSE server read-write, in the
# foreground (-f, -o OPTIONS) as a background job (FUSE_PID), its output in
# DIR.log; waits for the mount, or shows the log if the server exits first.
fuse_mount_fg() {
	local i
	"$UEXT4" mount -f ${3:+-o "$3"} "$1" "$2" > "$2.log" 2>&1 < /dev/null &
	FUSE_PID=$!
	MOUNTS+=("$2")
	for ((i = 0; i < 300; i++)); do
		[ "$(findmnt -n -o TARGET "$2" 2> /dev/null)" = "$2" ] && return 0
		kill -0 "$FUSE_PID" 2> /dev/null || break
		sleep 0.1 # polling for the mount to appear, with a 30 s deadline
	done
	cat "$2.log"
	return 1
}
# mount_KIND IMAGE DIR / umount_KIND DIR, KIND kernel or uext4: the same
# file system mounted read-write by the kernel's ext4 (loop) or by `uext4
# mount` (it daemonizes), for tests that do the same on both; `uext4 umount`
# returns once the server has written everything back.  A failure fails the
# test.
mount_kernel() { kmount "$1" "$2" rw || fail "kernel mount of $1"; }
umount_kernel() { umount "$1" || fail "umount $1"; }
mount_uext4() {
	"$UEXT4" mount "$1" "$2" || fail "uext4 mount $1"
	MOUNTS+=("$2")
}
umount_uext4() { "$UEXT4" umount "$1" || { fusermount3 -u "$1"; fail "uext4 umount $1"; }; }
fuse_umount() {
	fusermount3 -u "$1" || umount -l "$1"
	[ -n "$FUSE_PID" ] && wait "$FUSE_PID" 2> /dev/null
	FUSE_PID=
	return 0
}

. "$TOP/tests/imgcache.inc"

# cli_run CMD...: the CLI ($UEXT4 CMD...) with a 60 s limit; sets RC and ERR
# (the start of its stderr).  A crash, a hang or a sanitizer report is a
# failed check.
cli_run() {
	timeout -k 5 60 "$UEXT4" "$@" > "$T/out" 2> "$T/err" < /dev/null
	RC=$?
	ERR=$(head -c 2000 "$T/err")
	if [ $RC -ge 124 ] || grep -qE 'AddressSanitizer|LeakSanitizer|runtime error:' "$T/err"; then
		bad "uext4 $*: crash, hang or sanitizer report (exit $RC): $ERR"
	fi
}

# compare_dumps LABEL A B: two tree dumps (walk, one line a path) must be
# identical; else a failed check showing the first differences.
compare_dumps() {
	if cmp -s "$2" "$3"; then
		echo "ok: $1 ($(wc -l < "$2") paths identical)"
	else
		bad "$1 differs ($(diff "$2" "$3" | grep -c '^>') of $(wc -l < "$2") lines; first differences):"
		diff -u "$2" "$3" | head -40 | cut -c1-300
	fi
}

# fsck_clean IMAGE: e2fsck -fn must report nothing.
fsck_clean() {
	local out
	if ! out=$(e2fsck -fn "$1" 2>&1); then
		echo "$out"
		echo "e2fsck -fn $1 is not clean"
		return 1
	fi
}
