#!/bin/bash
# journal_kernel.sh - cross-recovery between uext4 and the Linux kernel.
#
# For a metadata_csum image (journal checksum v3, 64-bit tags) and a
# ^metadata_csum,^64bit one (no journal checksums, 32-bit tags):
#   (a) the kernel replays OUR journal: tests/journal_kernel (crash mode)
#       mounts the image read-write with libuext4 on a device that drops
#       the home writes of journaled metadata once the mount finished, makes
#       directories and files, fsyncs, syncs and _exit()s without unmount;
#       dumpe2fs must show needs_recovery; `mount -o loop` (the kernel
#       replays), every file compared with what was written, umount,
#       e2fsck -fn clean.
#       The 1k kind wraps the log (many small commits through a 1024-block
#       journal).
#   (b) uext4 replays the KERNEL's journal: mkfs, kernel mount, write and
#       sync files, write more, EXT4_IOC_SHUTDOWN with NOLOGFLUSH, umount;
#       dumpe2fs shows needs_recovery; uext4_recover (journal_kernel
#       recover) replays it; e2fsck -fn clean; the files synced before the
#       shutdown are there with their contents (kernel read-only mount).
#   (c) a kernel journal with fast commits: uext4 replays them (the fsynced
#       append is there), e2fsck -fn clean after.
# Needs root and loop devices.
# test-timeout: 300
set -uo pipefail
. "$(dirname "$0")/lib.sh"
setup_traps
[ "$(id -u)" = 0 ] || skip "needs root (kernel loop mounts)"
need_loop "no free loop device"
grep -qw ext4 /proc/filesystems || modprobe ext4 2> /dev/null || true
grep -qw ext4 /proc/filesystems || skip "the kernel has no ext4"
need_helper TOOL journal_kernel
command -v python3 > /dev/null || skip "needs python3 (for the shutdown ioctl)"

T=$(mktemp_dir)
SEED=${JOURNAL_KERNEL_SEED:-$(( $(date +%s) % 100000 ))}
echo "seed $SEED (JOURNAL_KERNEL_SEED=$SEED repeats)"

needs_recovery() { dumpe2fs -h "$1" 2> /dev/null | grep -q '^Filesystem features:.*needs_recovery'; }

# ---------------------------------------------------------------- (a)
kernel_replays_ours() { # KIND MKFS_OPTIONS
	local kind=$1 opts=$2 img=$T/a-$1.img out=$T/a-$1.expect mnt=$T/mnt
	note "(a) $kind: the kernel replays uext4's journal"
	mke2fs -q -F -t ext4 $opts "$img" 64M || { bad "mke2fs"; return; }
	mkdir -p "$out" "$mnt"
	if [ "$kind" = fc ]; then
		# The kernel sets the journal's fast_commit feature while mounted
		# (and clears it at unmount): take a copy of the mounted image,
		# which uext4 recovers at its mount and then writes.
		kmount "$img" "$mnt" rw && touch "$mnt/lost+found" && sync && cp --sparse=always "$img" "$img.live" && kumount "$mnt"
		mv "$img.live" "$img"
	fi
	"$TOOL" crash "$img" "$out" "$SEED" || { bad "$kind: crash tool failed"; return; }
	needs_recovery "$img" || bad "$kind: needs_recovery not set after the crash"
	dumpe2fs -h "$img" 2> /dev/null | grep -E '^Journal (features|start|sequence)'
	if [ "$kind" = fc ]; then
		dumpe2fs -h "$img" 2> /dev/null | grep -q '^Journal features:.*FEATURE_I5' &&
			echo "  uext4 wrote the log of a journal with fast commits enabled (area left alone)" ||
			bad "fc: the journal's fast_commit feature is not set"
	fi
	# Without replay files are missing (their metadata never went home).
	cp --sparse=always "$img" "$T/noreplay.img"
	if kmount "$T/noreplay.img" "$mnt" ro,noload; then
		echo "  without replay (ro,noload) the kernel sees $(find "$mnt" -path "$mnt/lost+found" -prune -o -print | wc -l) of $(find "$out" | wc -l) entries"
		kumount "$mnt"
	fi
	rm -f "$T/noreplay.img"
	kmount "$img" "$mnt" rw || { bad "$kind: kernel mount failed"; dmesg | tail -5; return; }
	dmesg | tail -5 | grep -iE 'recovery|journal' | sed 's/^/  dmesg: /'
	if diff -r -x lost+found "$out" "$mnt" > "$T/diff" 2>&1; then
		echo "  the kernel sees every file and directory uext4 wrote ($(find "$out" | wc -l) entries, contents equal)"
	else
		head -20 "$T/diff"
		bad "$kind: the kernel's view differs from what uext4 wrote"
	fi
	kumount "$mnt"
	fsck_clean "$img" && echo "  e2fsck -fn clean after the kernel's replay" || bad "$kind: e2fsck after kernel replay"
}

# ---------------------------------------------------------------- (b)
shutdown_nologflush() { # MOUNTPOINT: EXT4_IOC_SHUTDOWN (_IOR('X', 125, __u32)), NOLOGFLUSH
	python3 - "$1" << 'EOF'
import fcntl, os, struct, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
EXT4_IOC_SHUTDOWN = (2 << 30) | (4 << 16) | (ord('X') << 8) | 125
fcntl.ioctl(fd, EXT4_IOC_SHUTDOWN, struct.pack('I', 2))
os.close(fd)
EOF
}

uext4_replays_kernels() { # KIND MKFS_OPTIONS
	local kind=$1 opts=$2 img=$T/b-$1.img mnt=$T/mnt exp=$T/b-$1.expect i r
	note "(b) $kind: uext4 replays the kernel's journal"
	mke2fs -q -F -t ext4 $opts "$img" 64M || { bad "mke2fs"; return; }
	mkdir -p "$mnt" "$exp"
	kmount "$img" "$mnt" rw || { bad "$kind: kernel mount failed"; return; }
	mkdir -p "$mnt/dir/sub"
	for i in $(seq 1 40); do
		head -c $(( (SEED * 7 + i * 1237) % 40000 )) /dev/urandom > "$exp/f$i"
		cp "$exp/f$i" "$mnt/dir/f$i"
	done
	for i in $(seq 1 200); do echo "entry $i" > "$mnt/dir/sub/name-with-some-length-$i"; done
	rm -f "$mnt"/dir/sub/name-with-some-length-1?
	sync
	# Several committed transactions, with revoke records (freed
	# directory blocks) among them.
	for r in 1 2 3 4 5 6; do
		mkdir "$mnt/tmp$r"
		for i in $(seq 1 150); do : > "$mnt/tmp$r/entry-with-a-long-name-$i"; done
		head -c $(( r * 3000 )) /dev/urandom > "$exp/r$r"
		cp "$exp/r$r" "$mnt/dir/r$r"
		sync
		[ $r -gt 1 ] && rm -rf "$mnt/tmp$((r - 1))"
	done
	sync
	# More after the sync: lost or not, the result must be consistent.
	for i in $(seq 1 20); do head -c 5000 /dev/urandom > "$mnt/dir/late$i"; done
	mv "$mnt/dir/f1" "$mnt/dir/f1-renamed"
	shutdown_nologflush "$mnt" || { bad "$kind: shutdown ioctl failed"; kumount "$mnt"; return; }
	kumount "$mnt"
	needs_recovery "$img" || { bad "$kind: needs_recovery not set after the shutdown"; return; }
	dumpe2fs -h "$img" 2> /dev/null | grep -E '^Journal (features|start|sequence)'
	"$TOOL" recover "$img" || { bad "$kind: uext4 recovery failed"; return; }
	needs_recovery "$img" && bad "$kind: needs_recovery still set after uext4_recover"
	fsck_clean "$img" && echo "  e2fsck -fn clean after uext4's replay" || bad "$kind: e2fsck after uext4 replay"
	kmount "$img" "$mnt" ro,noload || { bad "$kind: kernel mount after recovery"; return; }
	local missing=0
	for r in 1 2 3 4 5 6; do cmp -s "$exp/r$r" "$mnt/dir/r$r" || { missing=$((missing + 1)); echo "  dir/r$r differs"; }; done
	for r in 1 2 3 4 5; do [ -e "$mnt/tmp$r" ] && { missing=$((missing + 1)); echo "  tmp$r was removed before the last sync but is there"; }; done
	for i in $(seq 2 40); do cmp -s "$exp/f$i" "$mnt/dir/f$i" || { missing=$((missing + 1)); echo "  dir/f$i differs"; }; done
	[ -f "$mnt/dir/f1" ] || [ -f "$mnt/dir/f1-renamed" ] || { missing=$((missing + 1)); echo "  dir/f1 gone"; }
	[ "$(ls "$mnt/dir/sub" | wc -l)" = 190 ] || { missing=$((missing + 1)); echo "  dir/sub has $(ls "$mnt/dir/sub" | wc -l) entries, want 190"; }
	kumount "$mnt"
	if [ $missing = 0 ]; then echo "  every file synced before the shutdown is there with its contents"
	else bad "$kind: $missing synced files wrong after uext4's replay"; fi
}

# ---------------------------------------------------------------- (c)
# fast_commit: uext4 replays the kernel's fast commits (tests/fc_replay.sh
# compares whole trees with the kernel's own replay).
fast_commit_replayed() {
	local img=$T/fc.img mnt=$T/mnt out
	note "(c) fast_commit: uext4 replays the kernel's fast commits"
	mke2fs -q -F -t ext4 -O fast_commit "$img" 64M || { bad "mke2fs"; return; }
	kmount "$img" "$mnt" rw || { bad "fast_commit: kernel mount failed"; return; }
	echo hello > "$mnt/a"
	sync
	python3 -c "
import os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_APPEND)
os.write(fd, b'x' * 5000)
os.fsync(fd)" "$mnt/a" || bad "fast_commit: fsync"
	shutdown_nologflush "$mnt" || bad "fast_commit: shutdown ioctl"
	kumount "$mnt"
	if ! debugfs -R logdump "$img" 2> /dev/null | grep -q "tag HEAD"; then
		echo "  the kernel wrote no fast commit (full commit instead): nothing to check"
		return
	fi
	if ! out=$("$TOOL" recover "$img" 2>&1); then
		bad "fast_commit: uext4 recover failed: $out"
		return
	fi
	echo "  $out"
	needs_recovery "$img" && bad "fast_commit: needs_recovery still set after uext4_recover"
	fsck_clean "$img" && echo "  e2fsck -fn clean after uext4's replay" || bad "fast_commit: e2fsck"
	kmount "$img" "$mnt" ro,noload || { bad "fast_commit: kernel mount after recovery"; return; }
	[ "$(stat -c %s "$mnt/a")" = 5006 ] && echo "  the fsynced append is there" ||
		bad "fast_commit: a has $(stat -c %s "$mnt/a") bytes, want 5006"
	kumount "$mnt"
}

# csum: checksum v3, 64-bit tags; nocsum: no journal checksums, 32-bit
# tags; 1k: 1 KiB blocks and the smallest journal (1024 blocks), which
# uext4's workload wraps around.
# fc: fast_commit (uext4 writes only the log before the fast-commit area).
for kind in csum nocsum 1k fc; do
	case $kind in
	csum) opts="-O metadata_csum,64bit" ;;
	nocsum) opts="-O ^metadata_csum,^64bit" ;;
	1k) opts="-b 1024 -J size=1 -O metadata_csum,^64bit" ;;
	fc) opts="-b 4096 -O fast_commit" ;;
	esac
	kernel_replays_ours $kind "$opts"
	[ $kind = fc ] || uext4_replays_kernels $kind "$opts"
done
fast_commit_replayed
[ $FAILS = 0 ] || fail "$FAILS checks failed"
echo "PASS"
