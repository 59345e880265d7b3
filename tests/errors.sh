#!/bin/bash
# errors.sh - the error policy (errors=continue|remount-ro|panic) and
# `uext4 info` without a full mount.
#
# The triggers: tests/images/mk_err_extent_deep.sh, a file (/deep, inode
# 12) whose extent root claims depth 6: appending to it (extent_map_blocks)
# or truncating it (uext4_setattr checks the tree first) meets that inside a handle; and
# mk_err_htree_leaf.sh, an htree directory (/big, inode 12) whose leaves
# fail their checksums: adding a name meets that in dir_add_excl_uncached (dir_add_excl is its name-cache wrapper).  For each errors=
# mode, set with `uext4 mount -o errors=` (FUSE) and with tune2fs -e
# (s_errors; the CLI's write commands have no -o), that write fails with a
# message naming the inode, and then:
#   continue    later writes work;
#   remount-ro  later writes fail with EROFS and a message, reads (cat, ls,
#               getfattr) still work; the running transaction is dropped (a
#               mkdir made before the error is gone after unmount) and the
#               unmount writes only the superblock and the journal's
#               superblock (the image is compared byte for byte with a copy
#               taken after the mount);
#   panic       the server exits (status 70) at once: only the superblock
#               differs from the copy taken after the mount.
# Each time dumpe2fs -h shows the error (state "with errors", FS Error
# count, first/last error function and inode), `uext4 info` prints the same
# fields, e2fsck -fn finds no kind of problem it did not find before
# (messages with numbers stripped, compared as sets), and the next
# read-write mount warns.  With four writers busy on a pool-loop mount when
# the error happens (remount-ro), every later write gets EROFS and what an
# fsync committed before reads back.  The kernel records the same append's error the
# same way (state, count, inode, err; as root with loop devices).  A crash after an error (kill -9 of the server
# with a committed transaction in the journal holding the old superblock)
# keeps the error across the replay of `uext4 recover`.
# Case 11: `uext4 info` on an image with a bad group descriptor checksum and
# one with an unsupported incompat feature prints the superblock (fields
# compared with dumpe2fs -h) and then the reason, and exits non-zero; on an
# image whose read-write mount is refused (an unknown ro_compat bit) ls, stat, cat
# and getfattr work and a write is refused leaving the image unchanged.
# test-timeout: 300
set -uo pipefail
. "$(dirname "$0")/lib.sh"
setup_traps
need mke2fs debugfs dumpe2fs e2fsck tune2fs cmp
need_built "$UEXT4"
export TZ=UTC LC_ALL=C
T=$(mktemp_dir)
IMAGES=$TOP/tests/images
ok() { echo "ok: $*"; }
HAVE_FUSE=0
[ -c /dev/fuse ] && command -v fusermount3 > /dev/null && HAVE_FUSE=1

build() { # build KIND OUT
	"$IMAGES/mk_$1.sh" "$2" > "$T/mk.log" 2>&1
	case $? in
	0) ;;
	77) skip "$(cat "$T/mk.log")" ;;
	*) cat "$T/mk.log"; fail "mk_$1.sh failed" ;;
	esac
}

# e2fsck -fn's findings, numbers and the image name stripped, one per line.
problems() {
	cp "$1" "$T/fsck.img"
	e2fsck -fn "$T/fsck.img" 2>&1 | sed -e "s|$T/fsck.img|IMG|g" -e 's/[0-9]\+/N/g' |
		grep -v -e '^eNfsck N' -e '^IMG: N/N files' | sort -u
}
no_new_problems() { # no_new_problems WHAT BEFORE_FILE IMG
	local new
	new=$(comm -13 "$2" <(problems "$3"))
	if [ -n "$new" ]; then bad "$1: e2fsck finds new kinds of problems:"; echo "$new"; else
		ok "$1: e2fsck -fn finds no new kind of problem"; fi
}

field() { # field IMG NAME: a dumpe2fs -h field
	dumpe2fs -h "$1" 2> /dev/null | sed -n "s/^$2:[[:space:]]*//p" | head -1
}
info_field() { # info_field IMG NAME: the same field from uext4 info
	"$UEXT4" info "$1" 2> /dev/null | sed -n "s/^$2: *//p" | head -1
}

# check_recorded WHAT IMG FUNC COUNT: the superblock names inode 12 and FUNC.
check_recorded() {
	local what=$1 img=$2 func=$3 count=$4 f d u
	case "$(field "$img" 'Filesystem state')" in
	*"with errors"*) ok "$what: state says with errors" ;;
	*) bad "$what: state is '$(field "$img" 'Filesystem state')'" ;;
	esac
	[ "$(field "$img" 'FS Error count')" = "$count" ] && ok "$what: error count $count" ||
		bad "$what: FS Error count '$(field "$img" 'FS Error count')', want $count"
	[ "$(field "$img" 'Last error function')" = "$func" ] &&
		[ "$(field "$img" 'Last error inode #')" = 12 ] &&
		[ "$(field "$img" 'Last error err')" = EFSCORRUPTED ] &&
		ok "$what: last error: $func, inode 12, EFSCORRUPTED" ||
		bad "$what: last error: '$(field "$img" 'Last error function')' inode '$(field "$img" 'Last error inode #')' err '$(field "$img" 'Last error err')'"
	[ -n "$(field "$img" 'First error function')" ] &&
		[ "$(field "$img" 'First error inode #')" = 12 ] || bad "$what: no first error"
	for f in 'FS Error count' 'First error time' 'First error function' 'First error inode #' \
		'Last error time' 'Last error function' 'Last error inode #' 'Last error err' \
		'Filesystem state'; do
		d=$(field "$img" "$f"); u=$(info_field "$img" "$f")
		[ "$d" = "$u" ] || bad "$what: uext4 info '$f' is '$u', dumpe2fs -h '$d'"
	done
}

# only_changed WHAT A B RANGE...: every byte where A and B differ lies in
# one of the ranges START:END (byte offsets, END exclusive).
only_changed() {
	local what=$1 a=$2 b=$3
	shift 3
	{ cmp -l "$a" "$b" || :; } | awk -v ranges="$*" '
		BEGIN { n = split(ranges, r, " ") }
		{ off = $1 - 1; inr = 0
		  for (i = 1; i <= n; i++) { split(r[i], se, ":"); if (off >= se[1] && off < se[2]) inr = 1 }
		  if (!inr) { bad++; if (bad <= 5) printf "  byte %d differs\n", off } }
		END { exit bad > 0 }' > "$T/cmp.out"
	if [ $? = 0 ]; then ok "$what: only the allowed blocks changed ($*)"; else
		bad "$what: bytes outside $* changed:"; cat "$T/cmp.out"; fi
}
SB_RANGE=1024:2048
journal_sb_range() { # the journal superblock's block (4 KiB blocks)
	local b
	b=$(debugfs -R "bmap <8> 0" "$1" 2> /dev/null)
	echo "$((b * 4096)):$(((b + 1) * 4096))"
}

build err_extent_deep "$T/base.img"
problems "$T/base.img" > "$T/base.problems"
[ -s "$T/base.problems" ] || fail "the damaged base image has no e2fsck findings"

# ------------------------------------------------------------------ CLI
note "CLI, s_errors continue (mke2fs's default)"
cp "$T/base.img" "$T/c.img"
"$UEXT4" truncate -s 100 "$T/c.img" /deep > /dev/null 2> "$T/err"
rc=$?
[ $rc -ne 0 ] && grep -q "corrupt extent tree of inode 12" "$T/err" &&
	ok "truncate of /deep fails naming inode 12: $(cat "$T/err")" ||
	bad "truncate of /deep: rc $rc, '$(cat "$T/err")'"
check_recorded "CLI continue" "$T/c.img" uext4_setattr 1
"$UEXT4" mkdir "$T/c.img" /after > /dev/null 2> "$T/err" && ok "a later write works" ||
	bad "mkdir after the error: $(cat "$T/err")"
grep -q "warning: mounting fs with errors, running e2fsck is recommended" "$T/err" &&
	ok "the read-write mount of an errored fs warns" || bad "no warning: '$(cat "$T/err")'"
[ "$("$UEXT4" cat "$T/c.img" /ok)" = hello ] || bad "/ok unreadable after the error"
"$UEXT4" truncate -s 100 "$T/c.img" /deep > /dev/null 2>&1
[ "$(field "$T/c.img" 'FS Error count')" = 2 ] && ok "a second error counts 2" ||
	bad "error count after a second error: $(field "$T/c.img" 'FS Error count')"
no_new_problems "CLI continue" "$T/base.problems" "$T/c.img"

note "CLI, s_errors remount-ro (tune2fs -e)"
cp "$T/base.img" "$T/r.img"
tune2fs -e remount-ro "$T/r.img" > /dev/null
"$UEXT4" truncate -s 100 "$T/r.img" /deep > /dev/null 2> "$T/err"
rc=$?
[ $rc -ne 0 ] && grep -q "Structure needs cleaning (corrupt extent tree of inode 12.*; the file system is now read-only (errors=remount-ro)" "$T/err" &&
	ok "truncate fails and says writes are refused: $(cat "$T/err")" ||
	bad "remount-ro truncate: rc $rc, '$(cat "$T/err")'"
check_recorded "CLI remount-ro" "$T/r.img" uext4_setattr 1
[ "$(field "$T/r.img" 'Filesystem features')" = "$(field "$T/base.img" 'Filesystem features')" ] &&
	ok "unmount after the error cleared needs_recovery" ||
	bad "features after the aborted unmount: $(field "$T/r.img" 'Filesystem features')"
no_new_problems "CLI remount-ro" "$T/base.problems" "$T/r.img"

note "CLI, s_errors panic (tune2fs -e)"
cp "$T/base.img" "$T/p.img"
tune2fs -e panic "$T/p.img" > /dev/null
"$UEXT4" truncate -s 100 "$T/p.img" /deep > /dev/null 2> "$T/err"
rc=$?
[ $rc = 70 ] && grep -q "panic" "$T/err" && ok "panic: exit 70: $(cat "$T/err")" ||
	bad "panic: rc $rc, '$(cat "$T/err")'"
check_recorded "CLI panic" "$T/p.img" uext4_setattr 1
"$UEXT4" recover -q "$T/p.img" || bad "recover after the panic failed"
check_recorded "CLI panic, after recover" "$T/p.img" uext4_setattr 1
no_new_problems "CLI panic" "$T/base.problems" "$T/p.img"

htree_case() { # htree_case S_ERRORS: mkdir of a name in the damaged htree, then another
	local img=$T/h-$1.img
	note "CLI, htree leaf damage, s_errors $1: uext4 mkdir IMG /big/zzz /top"
	cp "$T/htree.img" "$img"
	tune2fs -e "$1" "$img" > /dev/null
	"$UEXT4" mkdir "$img" /big/zzz /top > /dev/null 2> "$T/err"
	rc=$?
	[ $rc -ne 0 ] && grep -q "/big/zzz: Structure needs cleaning (corrupt directory block .* of inode 12" "$T/err" &&
		ok "mkdir /big/zzz fails naming the directory: $(head -1 "$T/err")" ||
		bad "mkdir /big/zzz: rc $rc, $(cat "$T/err")"
	"$UEXT4" ls "$img" / > "$T/ls"
	if [ "$1" = remount-ro ]; then
		grep -q "/top: Read-only file system (the file system was made read-only after an error" \
			"$T/err" && ok "the next mkdir of the same mount: EROFS" ||
			bad "mkdir /top after the error: $(cat "$T/err")"
		grep -qx top "$T/ls" && bad "/top was made after the error"
	else
		grep -qx top "$T/ls" && ok "continue: /top was made" || bad "continue: no /top"
	fi
	check_recorded "htree $1" "$img" dir_add_excl_uncached 1
	no_new_problems "htree $1" "$T/htree.problems" "$img"
}
build err_htree_leaf "$T/htree.img"
problems "$T/htree.img" > "$T/htree.problems"
htree_case remount-ro
htree_case continue

# ------------------------------------------------------------------ FUSE
SRV_PID=
srv_mount() { # srv_mount IMG DIR OPTS: foreground server in the background
	local i
	mkdir -p "$2"
	"$UEXT4" mount -f -o "$3" "$1" "$2" > "$T/srv.log" 2>&1 < /dev/null &
	SRV_PID=$!
	MOUNTS+=("$2")
	for ((i = 0; i < 300; i++)); do
		[ "$(findmnt -n -o TARGET "$2" 2> /dev/null)" = "$2" ] && return 0
		kill -0 $SRV_PID 2> /dev/null || { cat "$T/srv.log"; return 1; }
		sleep 0.1 # polling for the mount to appear, 30 s at most
	done
	return 1
}
srv_wait() { # srv_wait: the server's exit status (after unmount or death)
	local rc
	timeout 30 tail --pid=$SRV_PID -f /dev/null
	wait $SRV_PID
	rc=$?
	SRV_PID=
	return $rc
}

# append_sync FILE: append a line, fsync and close; exit status and message
# of the first that fails.  With the writeback cache (FUSE) the corruption
# is met when the kernel writes the page back, so at fsync, not write(2);
# the kernel's ext4 meets it at write(2).
append_sync() {
	python3 - "$1" <<'PY'
import os, sys
try:
    fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND)
    try:
        os.write(fd, b"more\n")
        os.fsync(fd)
    finally:
        os.close(fd)
except OSError as e:
    print(f"{sys.argv[1]}: {e.strerror}", file=sys.stderr)
    sys.exit(1)
PY
}

fuse_case() { # fuse_case MODE TUNE2FS_E OPTS
	local mode=$1 tune=$2 opts=$3 img=$T/f-$1.img m=$T/m-$1 rc
	note "FUSE, errors=$mode ($([ -n "$tune" ] && echo "tune2fs -e $tune")${opts:+ -o $opts})"
	cp "$T/base.img" "$img"
	[ -n "$tune" ] && tune2fs -e "$tune" "$img" > /dev/null
	srv_mount "$img" "$m" "commit=300${opts:+,$opts}" || { bad "mount failed"; return; }
	cp "$img" "$T/after-mount.img"
	mkdir "$m/before" || bad "mkdir before the error failed"
	append_sync "$m/deep" 2> "$T/err"
	rc=$?
	if [ "$mode" = panic ]; then
		srv_wait
		rc=$?
		[ $rc = 70 ] && ok "panic: the server exited with 70" || bad "panic: server exit $rc"
		grep -q "panic (errors=panic): corrupt extent tree of inode 12" "$T/srv.log" &&
			ok "panic message on stderr" || bad "panic message: $(cat "$T/srv.log")"
		fusermount3 -u "$m" 2> /dev/null || umount -l "$m"
		only_changed "panic" "$T/after-mount.img" "$img" $SB_RANGE
		check_recorded "FUSE panic" "$img" extent_map_blocks 1
		"$UEXT4" recover -q "$img" || bad "recover after the panic failed"
		no_new_problems "FUSE panic" "$T/base.problems" "$img"
		return
	fi
	# (remount-ro: the fsync that writes the page back may see EROFS first)
	[ $rc -ne 0 ] && grep -qE "Structure needs cleaning|Input/output error|Read-only file system" "$T/err" &&
		ok "the append to /deep fails: $(cat "$T/err")" || bad "append: rc $rc, '$(cat "$T/err")'"
	grep -q "uext4 mount: $img: corrupt extent tree of inode 12" "$T/srv.log" &&
		ok "the server says what the corruption is" || bad "server log: $(cat "$T/srv.log")"
	if [ "$mode" = remount-ro ]; then
		mkdir "$m/later" 2> "$T/err" && bad "mkdir after the error succeeded"
		grep -q "Read-only file system" "$T/err" && ok "later mkdir: EROFS" ||
			bad "later mkdir: '$(cat "$T/err")'"
		touch "$m/ok" 2> "$T/err" && bad "touch after the error succeeded"
		grep -q "Read-only file system" "$T/err" || bad "later touch: '$(cat "$T/err")'"
		[ "$(cat "$m/ok")" = hello ] && [ "$(cat "$m/dir/inner")" = hello ] &&
			[ "$(ls "$m/dir")" = inner ] && ok "reads still work" || bad "reads fail"
		if command -v getfattr > /dev/null; then
			[ "$(getfattr --only-values -n user.test "$m/ok" 2> /dev/null)" = value ] ||
				bad "getfattr fails after the error"
		fi
	else
		mkdir "$m/later" && ok "continue: a later mkdir works" || bad "continue: mkdir failed"
	fi
	fusermount3 -u "$m"
	srv_wait
	rc=$?
	if [ "$mode" = remount-ro ]; then
		# The dropped transaction is not written: the server says so.
		[ $rc -ne 0 ] && grep -q "made read-only after an error: corrupt extent tree of inode 12" \
			"$T/srv.log" && ok "the unmount reports the writes refused (exit $rc)" ||
			bad "unmount after the error: exit $rc, $(cat "$T/srv.log")"
	else
		[ $rc = 0 ] || bad "server exit status $rc after unmount"
	fi
	if [ "$mode" = remount-ro ]; then
		only_changed "remount-ro unmount" "$T/after-mount.img" "$img" $SB_RANGE \
			"$(journal_sb_range "$img")"
		"$UEXT4" ls "$img" / | grep -qx before &&
			bad "the aborted transaction's mkdir reached the image" ||
			ok "the aborted transaction (mkdir before the error) was not written"
	else
		"$UEXT4" ls "$img" / > "$T/ls"
		grep -qx before "$T/ls" && grep -qx later "$T/ls" && ok "continue: both mkdirs are there" ||
			bad "continue: root is $(tr '\n' ' ' < "$T/ls")"
	fi
	check_recorded "FUSE $mode" "$img" extent_map_blocks 1
	no_new_problems "FUSE $mode" "$T/base.problems" "$img"
	# The next read-write mount warns.
	srv_mount "$img" "$m" "commit=300" || { bad "remount failed"; return; }
	fusermount3 -u "$m"
	srv_wait
	grep -q "warning: mounting fs with errors" "$T/srv.log" && ok "the next FUSE mount warns" ||
		bad "no warning on the next mount: $(cat "$T/srv.log")"
}

if [ $HAVE_FUSE = 1 ]; then
	fuse_case remount-ro continue errors=remount-ro
	fuse_case remount-ro remount-ro ""
	fuse_case continue remount-ro errors=continue
	fuse_case panic continue errors=panic
	fuse_case panic panic ""

	note "FUSE, errors=remount-ro with 4 writers busy while the error happens (loop=pool)"
	img=$T/busy.img m=$T/m-busy
	cp "$T/base.img" "$img"
	if srv_mount "$img" "$m" "commit=1,loop=pool,threads=4,errors=remount-ro"; then
		pids=()
		for w in 1 2 3 4; do
			( mkdir "$m/w$w" && for ((i = 0; i < 3000; i++)); do
				{ echo "$i" > "$m/w$w/f$i"; } 2> /dev/null || exit 0; done ) &
			pids+=($!)
		done
		for ((i = 0; i < 400; i++)); do   # until every writer is under way
			[ -e "$m/w1/f20" ] && [ -e "$m/w2/f20" ] && [ -e "$m/w3/f20" ] &&
				[ -e "$m/w4/f20" ] && break
			sleep 0.05
		done
		sync "$m/w1/f20" || bad "busy: fsync failed"   # a commit while they write
		append_sync "$m/deep" 2> /dev/null && bad "busy: the append succeeded"
		wait "${pids[@]}"
		touch "$m/late" 2> "$T/err" && bad "busy: a write after the error succeeded"
		grep -q "Read-only file system" "$T/err" || bad "busy: late write: $(cat "$T/err")"
		fusermount3 -u "$m"
		srv_wait
		check_recorded "busy" "$img" extent_map_blocks 1
		# What was committed before the error is intact.
		rm -rf "$T/out-busy"; mkdir "$T/out-busy"
		for w in 1 2 3 4; do "$UEXT4" get "$img" /w$w "$T/out-busy" 2> /dev/null; done
		n=0
		for f in "$T"/out-busy/w*/f*; do
			[ -e "$f" ] || continue
			n=$((n + 1))
			[ "$(cat "$f")" = "${f##*/f}" ] || [ ! -s "$f" ] || bad "busy: $f holds $(cat "$f")"
		done
		[ $n -gt 0 ] && ok "busy: $n files committed before the error read back" ||
			bad "busy: no file was committed before the error"
		no_new_problems "busy" "$T/base.problems" "$img"
	else
		bad "busy: mount failed"
	fi

	note "FUSE, crash after an error: the error survives the journal replay"
	img=$T/crash.img m=$T/m-crash
	cp "$T/base.img" "$img"
	srv_mount "$img" "$m" "commit=300,errors=continue" || bad "mount failed"
	mkdir "$m/committed" && sync "$m/committed" || bad "mkdir + fsync failed"
	append_sync "$m/deep" 2> /dev/null && bad "append to /deep succeeded"
	kill -9 $SRV_PID
	srv_wait
	fusermount3 -u "$m" 2> /dev/null || umount -l "$m"
	[ "$(field "$img" 'FS Error count')" = 1 ] || bad "crash: error not on disk before replay"
	case "$(field "$img" 'Filesystem features')" in
	*needs_recovery*) ok "crash: the journal needs recovery" ;;
	*) bad "crash: no needs_recovery (nothing to replay)" ;;
	esac
	"$UEXT4" recover -q "$img" || bad "recover failed"
	check_recorded "after replay" "$img" extent_map_blocks 1
	"$UEXT4" ls "$img" / | grep -qx committed || bad "crash: the fsynced mkdir is lost"
	no_new_problems "crash" "$T/base.problems" "$img"
else
	echo "(no /dev/fuse or fusermount3: FUSE cases not run)"
fi

# The kernel, on a loop mount, records the same append's error the same way
# (its function is its own: ext4_ext_check_inode).
if can_loop && [ -f "$T/f-continue.img" ]; then
	note "kernel: the same append on a loop mount (errors=continue)"
	img=$T/kernel.img km=$T/km
	cp "$T/base.img" "$img"
	mkdir -p "$km"
	if kmount "$img" "$km" rw,errors=continue; then
		append_sync "$km/deep" 2> /dev/null && bad "kernel: the append succeeded"
		umount "$km"
		# The count is not compared: the kernel meets the damage twice
		# (write_begin's lookup and the write-out), we once.
		[ "$(field "$img" 'FS Error count')" -ge 1 ] 2> /dev/null ||
			bad "kernel: no error counted"
		for f in 'Filesystem state' 'Last error inode #' 'Last error err'; do
			[ "$(field "$img" "$f")" = "$(field "$T/f-continue.img" "$f")" ] ||
				bad "kernel's '$f' is '$(field "$img" "$f")', ours '$(field "$T/f-continue.img" "$f")'"
		done
		ok "kernel: state, inode and err as ours ($(field "$img" 'Last error function'))"
	else
		bad "kernel loop mount failed"
	fi
fi

# ------------------------------------------------------- case 11: info
info_case() { # info_case KIND REASON_REGEX
	local img=$T/$1.img f d u
	note "uext4 info on $1"
	build "$1" "$img"
	cp "$img" "$T/orig.img"
	"$UEXT4" info "$img" > "$T/out" 2> "$T/err"
	rc=$?
	[ $rc -ne 0 ] && ok "info exits $rc" || bad "info succeeded on $1"
	grep -qiE "$2" "$T/err" && ok "reason: $(cat "$T/err")" || bad "reason not given: $(cat "$T/err")"
	for f in 'Filesystem UUID' 'Filesystem features' 'Inode count' 'Block count' \
		'Free blocks' 'Free inodes' 'Block size' 'Inodes per group' 'Inode size' \
		'Filesystem state'; do
		d=$(field "$img" "$f"); u=$(sed -n "s/^$f:[[:space:]]*//p" "$T/out")
		[ -n "$d" ] && [ "$d" = "$u" ] || bad "$1: info '$f' is '$u', dumpe2fs -h '$d'"
	done
	cmp -s "$img" "$T/orig.img" || bad "info changed the image"
}
info_case err_gd_csum "group descriptor 0.*checksum"
info_case err_incompat "unsupported feature: encrypt"

note "reads on an image whose read-write mount is refused (an unknown ro_compat bit)"
img=$T/rocompat.img
build err_rocompat "$img"
cp "$img" "$T/orig.img"
[ "$("$UEXT4" cat "$img" /dir/inner)" = hello ] && "$UEXT4" ls -l "$img" /dir > /dev/null &&
	"$UEXT4" stat "$img" /ok > /dev/null &&
	"$UEXT4" getfattr -d "$img" /ok | grep -q 'user.test="value"' &&
	"$UEXT4" info "$img" > /dev/null && ok "ls, stat, cat, getfattr, info work" ||
	bad "a read command failed on the FEATURE_R31 image"
"$UEXT4" mkdir "$img" /x 2> "$T/err" && bad "mkdir succeeded on the FEATURE_R31 image"
grep -q "FEATURE_R31" "$T/err" && ok "the write is refused naming FEATURE_R31" || bad "refusal: $(cat "$T/err")"
cmp -s "$img" "$T/orig.img" && ok "the refused write left the image unchanged" ||
	bad "the refused write changed the image"

[ $FAILS = 0 ] || fail "$FAILS checks failed"
echo "PASS"
