#!/bin/bash
# orphan.sh - orphan inodes, with the orphan file (seed 000) and the legacy
# s_last_orphan list (seed 003); drives build/tests/orphan (tests/orphan.c).
#
#  (a) a file unlinked while open lives until its close; statfs shows its
#      space back only after the close
#  (b) "kill the server": files written, unlinked while open, sync, _exit
#      without unmounting: the orphans are on disk (orphan file entries /
#      s_last_orphan chain through i_dtime); a mount frees them: free
#      blocks and inodes as before the files existed (uext4_recover() for
#      the overflowed one)
#  (c) an orphan file of one block (254 entries) overflows to the legacy list
#  (d) a shrinking truncate cut between its handles (our own, and one staged
#      with debugfs on the legacy list): the mount frees blocks past i_size
#  (e) the kernel cleans up the orphans we left (mount -o loop), and e2fsck
#      -fy clears the same ones: the on-disk format is right
#  (f) corrupt lists (inode out of range, a loop): cleanup gives up on the
#      rest of the list, as the kernel does (s_last_orphan cleared, left to
#      e2fsck), and recover exits 1 with a message naming the inode; a
#      second recover finds nothing to do
#  (g) the FUSE server killed (kill -9) while a process holds files it
#      unlinked open: `uext4 recover` frees them, both formats
# Every image ends e2fsck -fn clean.
# test-timeout: 400
. "$(dirname "$0")/lib.sh"
helper_test T orphan
command -v mke2fs > /dev/null && command -v debugfs > /dev/null || skip "no e2fsprogs"
D=$(mktemp_dir)
SEED=${SEED:-$RANDOM}
echo "seed=$SEED (file counts derive from it)"
KERNEL=0
if can_loop; then KERNEL=1; else echo "kernel checks skipped: not root or no loop device"; fi

fsck_clean() { # IMG WHAT
	if ! e2fsck -fn "$1" > "$D/fsck.log" 2>&1; then
		cat "$D/fsck.log"
		fail "e2fsck -fn not clean: $2"
	fi
	echo "ok   e2fsck -fn clean: $2"
}
val() { sed -n "s/^$1=//p" "$2" | head -1; }
mkimg() { # IMG FORMAT
	local opts
	case $2 in
	file) opts="-O orphan_file" ;;
	list) opts="-O ^orphan_file" ;;
	small) opts="-O orphan_file -E orphan_file_size=1" ;;
	esac
	rm -f "$1"
	truncate -s 64M "$1"
	# shellcheck disable=SC2086
	mke2fs -q -t ext4 -b 1024 $opts -F "$1" || fail "mke2fs $opts"
}
sb_field() { dumpe2fs -h "$1" 2> /dev/null | sed -n "s/^$2: *//p"; }
root_blocks() { debugfs -R "stat <2>" "$1" 2> /dev/null | sed -n 's/.*Blockcount: *\([0-9]*\).*/\1/p'; }
inode_blocks() { debugfs -R "stat $2" "$1" 2> /dev/null | sed -n 's/.*Blockcount: *\([0-9]*\).*/\1/p'; }
# Nonzero entries of the orphan file (inode 12 on these images): each
# 1 KiB block holds 254 entries then magic + checksum.
file_entries() {
	debugfs -R "dump <12> $D/of.bin" "$1" > /dev/null 2>&1
	od -An -tu4 -v -w4 "$D/of.bin" | awk '(NR - 1) % 256 < 254 && $1 != 0' | wc -l
}
# Length of the s_last_orphan chain through i_dtime (bounded).
chain_len() {
	local ino n=0 dt
	ino=$(sb_field "$1" "First orphan inode")
	while [ -n "$ino" ] && [ "$ino" != 0 ] && [ $n -lt 100000 ]; do
		n=$((n + 1))
		dt=$(debugfs -R "stat <$ino>" "$1" 2> /dev/null | sed -n 's/^ *dtime: *\(0x[0-9a-f]*\).*/\1/p')
		ino=$((${dt:-0}))
	done
	echo $n
}
free_counts() { # IMG: "blocks inodes" from the superblock, root dir growth added back
	local fb fi rb
	fb=$(sb_field "$1" "Free blocks")
	fi=$(sb_field "$1" "Free inodes")
	rb=$(root_blocks "$1")
	echo "$((fb + rb / 2)) $fi"
}

# ---------------------------------------------------------------- (a)
for fmt in file list; do
	note "(a) unlinked while open, $fmt"
	mkimg "$D/a.img" $fmt
	"$T" unlinkopen "$D/a.img" || fail "(a) $fmt"
	fsck_clean "$D/a.img" "(a) $fmt"
done

# ---------------------------------------------------------------- (b) (c) (e)
for fmt in file list small; do
	case $fmt in
	small) n=$((260 + SEED % 60)) ;;
	*) n=$((20 + SEED % 40)) ;;
	esac
	note "(b) kill with $n files unlinked while open, $fmt"
	img=$D/b-$fmt.img
	mkimg "$img" $fmt
	before=$(free_counts "$img")
	"$T" kill "$img" $n > "$D/kill.out" || { cat "$D/kill.out"; fail "(b) kill $fmt"; }
	cat "$D/kill.out"
	infile=$(val orphans_in_file "$D/kill.out")
	inlist=$(val orphans_in_list "$D/kill.out")
	case $fmt in
	file) [ "$infile" = $n ] && [ "$inlist" = 0 ] || fail "(b) expected $n in the orphan file" ;;
	list) [ "$inlist" = $n ] || fail "(b) expected $n on the list" ;;
	small) [ "$infile" = 254 ] && [ "$inlist" = $((n - 254)) ] ||
		fail "(c) expected 254 in the orphan file and $((n - 254)) on the list" ;;
	esac
	# On disk, as another reader sees it.
	[ $fmt = list ] || {
		e=$(file_entries "$img")
		[ "$e" = "$infile" ] || fail "(b) orphan file holds $e entries on disk, expected $infile"
		echo "ok   orphan file on disk: $e entries"
		sb_field "$img" "Filesystem features" | grep -q orphan_present ||
			fail "(b) orphan_present not set while mounted"
		echo "ok   orphan_present set"
	}
	[ $fmt = file ] || {
		c=$(chain_len "$img")
		[ "$c" = "$inlist" ] || fail "(b) s_last_orphan chain has $c inodes on disk, expected $inlist"
		echo "ok   s_last_orphan chain on disk: $c inodes"
	}
	cp --sparse=always "$img" "$D/kernel.img"
	cp --sparse=always "$img" "$D/fsck.img"
	# Our cleanup: a mount, or uext4_recover() for the overflowed one.
	how=mount
	[ $fmt = small ] && how=recover
	"$T" $how "$img" > "$D/mount.out" || { cat "$D/mount.out"; fail "(b) $how $fmt"; }
	cat "$D/mount.out"
	[ "$(val orphans_deleted "$D/mount.out")" = $n ] || fail "(b) mount did not delete $n orphans"
	after=$(free_counts "$img")
	[ "$before" = "$after" ] || fail "(b) free blocks/inodes $after, before the files: $before"
	echo "ok   free blocks and inodes as before the files: $after"
	sb_field "$img" "Filesystem features" | grep -qE "orphan_present|needs_recovery" &&
		fail "(b) orphan_present/needs_recovery left set after unmount"
	[ "$(sb_field "$img" "First orphan inode")" = "" ] || fail "(b) s_last_orphan left set"
	fsck_clean "$img" "(b) $fmt after our cleanup"
	# e2fsck -fy processes the same orphans.
	e2fsck -fy "$D/fsck.img" > "$D/fsck-y.log" 2>&1
	c=$(grep -c "Clearing orphaned inode" "$D/fsck-y.log")
	[ "$c" = $n ] || { cat "$D/fsck-y.log"; fail "(e) e2fsck -fy cleared $c orphans, expected $n"; }
	echo "ok   e2fsck -fy clears the same $c orphans"
	fsck_clean "$D/fsck.img" "(e) after e2fsck -fy"
	# (e) the kernel.
	if [ $KERNEL = 1 ]; then
		mkdir -p "$D/mnt"
		mount -t ext4 -o loop "$D/kernel.img" "$D/mnt" || fail "(e) kernel mount"
		MOUNTS+=("$D/mnt")
		umount "$D/mnt" || fail "(e) kernel umount"
		fsck_clean "$D/kernel.img" "(e) $fmt after the kernel's cleanup"
		k=$(free_counts "$D/kernel.img")
		[ "$k" = "$before" ] || fail "(e) kernel left free counts $k, expected $before"
		echo "ok   the kernel frees our orphans: $k"
	fi
done

# ---------------------------------------------------------------- (g)
# The holder opens N files, writes them, unlinks them, fsyncs one (which
# commits the unlinks' transaction), reports "ready" and waits; then the
# server is killed under it.
cat > "$D/hold.py" << 'PYEOF'
import os, sys
mnt, n = sys.argv[1], int(sys.argv[2])
fds = []
for i in range(n):
    p = os.path.join(mnt, "h%d" % i)
    fd = os.open(p, os.O_CREAT | os.O_RDWR, 0o644)
    os.write(fd, os.urandom(8192 + 1024 * (i % 7)))
    os.unlink(p)
    fds.append(fd)
os.fsync(fds[-1])
print("ready", flush=True)
sys.stdin.read()
PYEOF
if [ -e /dev/fuse ] && command -v python3 > /dev/null && command -v fusermount3 > /dev/null; then
	for fmt in file list; do
		n=$((10 + SEED % 20))
		note "(g) FUSE server killed with $n files unlinked while open, $fmt"
		img=$D/g-$fmt.img
		mkimg "$img" $fmt
		before=$(free_counts "$img")
		mkdir -p "$D/gm"
		"$UEXT4" mount -f "$img" "$D/gm" > "$D/gm.log" 2>&1 &
		gpid=$!
		MOUNTS+=("$D/gm")
		for ((i = 0; i < 300; i++)); do
			[ "$(findmnt -n -o TARGET "$D/gm" 2> /dev/null)" = "$D/gm" ] && break
			kill -0 $gpid 2> /dev/null || { cat "$D/gm.log"; fail "(g) mount"; }
			sleep 0.1 # bounded poll for the mount to appear
		done
		coproc HOLD { python3 "$D/hold.py" "$D/gm" $n; }
		read -r -t 60 line <&"${HOLD[0]}" || true
		[ "$line" = ready ] || fail "(g) the holder did not get ready: $line"
		conn=$(mountpoint -d "$D/gm" | cut -d: -f2)
		kill -9 $gpid
		[ -w "/sys/fs/fuse/connections/$conn/abort" ] && echo 1 > "/sys/fs/fuse/connections/$conn/abort"
		wait $gpid 2> /dev/null
		kill -9 "$HOLD_PID" 2> /dev/null
		wait "$HOLD_PID" 2> /dev/null
		fusermount3 -uz "$D/gm" 2> /dev/null || umount -l "$D/gm"
		"$UEXT4" recover "$img" > "$D/g.out" || { cat "$D/g.out"; fail "(g) recover $fmt"; }
		cat "$D/g.out"
		grep -q "orphans: 0 truncated, $n freed" "$D/g.out" || fail "(g) recover did not free $n orphans"
		after=$(free_counts "$img")
		[ "$before" = "$after" ] || fail "(g) free blocks/inodes $after, before the files: $before"
		echo "ok   free blocks and inodes as before the files: $after"
		fsck_clean "$img" "(g) $fmt after recover"
	done
else
	echo "(g) skipped: needs /dev/fuse, fusermount3 and python3"
fi

# ---------------------------------------------------------------- (d)
for fmt in file list; do
	note "(d) shrinking truncate cut between its handles, $fmt"
	img=$D/d-$fmt.img
	mkimg "$img" $fmt
	"$T" killtrunc "$img" > "$D/kt.out" || { cat "$D/kt.out"; fail "(d) killtrunc"; }
	b=$(inode_blocks "$img" /cut)
	[ "$b" = 400 ] || fail "(d) staged file has $b sectors, expected 400"
	cp --sparse=always "$img" "$D/kernel.img"
	"$T" mount "$img" > "$D/mount.out" || { cat "$D/mount.out"; fail "(d) mount"; }
	[ "$(val orphans_truncated "$D/mount.out")" = 1 ] || fail "(d) no truncate finished"
	b=$(inode_blocks "$img" /cut)
	[ "$b" = 10 ] || fail "(d) after cleanup /cut has $b sectors, expected 10 (5000 bytes)"
	echo "ok   truncate finished: 400 -> $b sectors"
	fsck_clean "$img" "(d) $fmt"
	if [ $KERNEL = 1 ]; then
		mount -t ext4 -o loop "$D/kernel.img" "$D/mnt" || fail "(d) kernel mount"
		b=$(stat -c %b "$D/mnt/cut")
		umount "$D/mnt"
		[ "$b" = 10 ] || fail "(d) kernel: /cut has $b sectors after its cleanup"
		echo "ok   the kernel finishes our truncate too"
		fsck_clean "$D/kernel.img" "(d) $fmt after the kernel"
	fi
done

note "(d) legacy orphan with blocks past i_size, staged with debugfs"
img=$D/d-staged.img
mkimg "$img" list
head -c 65536 /dev/urandom > "$D/data"
debugfs -w -R "write $D/data t" "$img" > /dev/null 2>&1
ino=$(debugfs -R "stat /t" "$img" 2> /dev/null | sed -n 's/^Inode: *\([0-9]*\).*/\1/p')
debugfs -w -f - "$img" > /dev/null 2>&1 << EOF
sif /t size 3000
ssv last_orphan $ino
EOF
[ "$(sb_field "$img" "First orphan inode")" = "$ino" ] || fail "(d) staging failed"
"$T" mount "$img" > "$D/mount.out" || { cat "$D/mount.out"; fail "(d) staged mount"; }
[ "$(val orphans_truncated "$D/mount.out")" = 1 ] || fail "(d) staged truncate not finished"
b=$(inode_blocks "$img" /t)
[ "$b" = 6 ] || fail "(d) staged: /t has $b sectors, expected 6 (3000 bytes)"
echo "ok   staged truncate finished: 128 -> $b sectors"
fsck_clean "$img" "(d) staged"

# ---------------------------------------------------------------- (f)
note "(f) corrupt legacy lists"
img=$D/f.img
mkimg "$img" list
debugfs -w -R "ssv last_orphan 99999" "$img" > /dev/null 2>&1
if "$UEXT4" recover "$img" > "$D/mount.out" 2>&1; then
	cat "$D/mount.out"
	fail "(f) recover with s_last_orphan 99999 succeeded"
fi
grep -q "inode 99999" "$D/mount.out" || { cat "$D/mount.out"; fail "(f) message does not name inode 99999"; }
echo "ok   reported: $(grep -m1 99999 "$D/mount.out")"
[ "$(sb_field "$img" "First orphan inode")" = "" ] || fail "(f) s_last_orphan not cleared"
"$UEXT4" recover "$img" > "$D/mount.out" 2>&1 || { cat "$D/mount.out"; fail "(f) second recover"; }
e2fsck -fy "$img" > /dev/null 2>&1
fsck_clean "$img" "(f) out of range, after e2fsck -fy"

mkimg "$img" list
echo x > "$D/small"
debugfs -w -R "write $D/small a" "$img" > /dev/null 2>&1
debugfs -w -R "write $D/small b" "$img" > /dev/null 2>&1
ia=$(debugfs -R "stat /a" "$img" 2> /dev/null | sed -n 's/^Inode: *\([0-9]*\).*/\1/p')
ib=$(debugfs -R "stat /b" "$img" 2> /dev/null | sed -n 's/^Inode: *\([0-9]*\).*/\1/p')
debugfs -w -f - "$img" > /dev/null 2>&1 << EOF
sif /a dtime $ib
sif /b dtime $ia
ssv last_orphan $ia
EOF
if "$UEXT4" recover "$img" > "$D/mount.out" 2>&1; then
	cat "$D/mount.out"
	fail "(f) recover with an orphan loop succeeded"
fi
grep -q "loop" "$D/mount.out" || { cat "$D/mount.out"; fail "(f) no loop message"; }
echo "ok   reported: $(grep -m1 loop "$D/mount.out")"
"$UEXT4" recover "$img" > "$D/mount.out" 2>&1 || { cat "$D/mount.out"; fail "(f) second recover"; }
e2fsck -fy "$img" > /dev/null 2>&1
fsck_clean "$img" "(f) loop, after e2fsck -fy"

echo "orphan.sh: all passed"
