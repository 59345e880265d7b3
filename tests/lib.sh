# lib.sh - shared shell helpers for tests/*.sh.  Source it: . tests/lib.sh
#
# Environment (set by tests/run.sh; defaults for running a test by hand):
#   UEXT4_BUILD  build directory (build, build/asan, build/tsan)
#   UEXT4        the CLI/FUSE binary ($UEXT4_BUILD/uext4)
#   UEXT4_CACHE  where generated trees and images are kept (tests/tmp/vN-HASH),
#                shared by every test of a run and across runs
#
# Image kinds (img_opts) are built by image_get KIND: mke2fs -d of a tree
# from tests/mktree.sh, then (as root with loop devices) the kernel adds
# the 50,000-entry directory and nanosecond times on a read-write loop
# mount, because mke2fs -d 1.47.0 is quadratic on big directories and drops
# sub-second times.  Every image is checked with e2fsck -fn when built.

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
	echo "v$v-$(cat "$MKTREE" "$TOP/tests/lib.sh" | cksum | cut -d' ' -f1)"
}
UEXT4_CACHE=${UEXT4_CACHE:-$TOP/tests/tmp/$(cache_key)}
export UEXT4_CACHE

skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }
# bad MSG: a check failed; the test goes on, and ends failing if FAILS > 0.
FAILS=0
bad() { echo "FAIL: $*"; FAILS=$((FAILS + 1)); }
note() { echo "== $*"; }
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
fuse_umount() {
	fusermount3 -u "$1" || umount -l "$1"
	[ -n "$FUSE_PID" ] && wait "$FUSE_PID" 2> /dev/null
	FUSE_PID=
	return 0
}

# with_lock FILE CMD...: run CMD holding an exclusive lock, so concurrent
# runs share a cache safely.
with_lock() {
	local lock=$1
	shift
	mkdir -p "$(dirname "$lock")"
	(flock 9 && "$@") 9> "$lock"
}

# tree_get KIND: print the path of a cached tree, generating it if needed.
tree_get() {
	local kind=$1 dir=$UEXT4_CACHE/tree-$1
	if [ ! -e "$dir.done" ]; then
		with_lock "$UEXT4_CACHE/lock" _tree_build "$kind" "$dir" >&2 || return 1
	fi
	echo "$dir"
}
_tree_build() {
	[ -e "$2.done" ] && return 0
	rm -rf "$2" "$2.tmp"
	# Drop caches of other generator versions (they hold big images).
	find "$TOP/tests/tmp" -mindepth 1 -maxdepth 1 -type d ! -name "$(basename "$UEXT4_CACHE")" \
		-exec rm -rf {} + 2> /dev/null
	"$MKTREE" "$2.tmp" "$1" || return 1
	# Written back before anyone reads st_blocks: with delayed allocation
	# the host's ext4 counts a file's extent-tree blocks only then.
	sync -f "$2.tmp" || return 1
	mv "$2.tmp" "$2" && touch "$2.done"
}

# Image kinds: name -> "TREE-KIND mke2fs-options".
IMAGE_KINDS="default 1k inline orphan ext3 ext2 inode128 tea"
img_opts() {
	case "$1" in
	default)  echo "base    -t ext4" ;;
	1k)       echo "base-1k -t ext4 -b 1024" ;;
	inline)   echo "base    -t ext4 -O inline_data" ;;
	orphan)   echo "base    -t ext4 -O orphan_file,metadata_csum_seed,large_dir" ;;
	ext3)     echo "base    -t ext3" ;;
	ext2)     echo "base    -t ext2" ;;
	inode128) echo "base    -t ext4 -I 128" ;;
	tea)      echo "base    -t ext4" ;;  # + tune2fs, see img_tune
	lite)     echo "lite    -t ext4" ;;
	*) return 1 ;;
	esac
}

# img_tune KIND: tune2fs options applied after mke2fs -d, before the kernel
# adds the big directory (mke2fs 1.47.0 has no hash_alg option).
img_tune() {
	case "$1" in
	tea) echo "-E hash_alg=tea" ;;
	esac
}

# image_get KIND: print the path of a cached image of that kind.
image_get() {
	local img=$UEXT4_CACHE/img-$1.img
	if [ ! -e "$img.done" ]; then
		with_lock "$UEXT4_CACHE/lock" _image_build "$1" "$img" >&2 || return 1
	fi
	echo "$img"
}
_image_build() {
	local kind=$1 img=$2 opts tkind tree mnt
	[ -e "$img.done" ] && return 0
	opts=$(img_opts "$kind") || { echo "unknown image kind $kind"; return 1; }
	tkind=${opts%% *}
	opts=${opts#* }
	# tree_get takes the lock itself; we hold it, so build directly.
	tree=$UEXT4_CACHE/tree-$tkind
	[ -e "$tree.done" ] || _tree_build "$tkind" "$tree" || return 1
	rm -f "$img"
	echo "mke2fs -q -F $opts -N 120000 -d $tree $img 1G"
	# shellcheck disable=SC2086
	mke2fs -q -F $opts -N 120000 -d "$tree" "$img" 1G || return 1
	if [ -n "$(img_tune "$kind")" ]; then
		echo "tune2fs $(img_tune "$kind") $img"
		# shellcheck disable=SC2046
		tune2fs $(img_tune "$kind") "$img" > /dev/null || return 1
	fi
	if [ "$tkind" != lite ] && can_loop; then
		mnt=$(mktemp -d /tmp/uext4-mk.XXXXXX)
		mount -o loop "$img" "$mnt" || { rmdir "$mnt"; return 1; }
		"$MKTREE" "$mnt" "bigdir retime" > /dev/null
		local rc=$?
		umount "$mnt"
		rmdir "$mnt"
		[ $rc = 0 ] || return 1
	fi
	e2fsck -fn "$img" > "$img.fsck" 2>&1 || {
		cat "$img.fsck"
		echo "e2fsck -fn reports problems in the freshly built $kind image"
		return 1
	}
	touch "$img.done"
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
