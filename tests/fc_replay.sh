#!/bin/bash
# fc_replay.sh - uext4 replays the kernel's fast commits as the kernel does.
# run-in: release asan
#
# The kernel (fast_commit, a loop mount) runs a seeded workload after a
# full sync: creates, writes (appends, overwrites, holes), truncates,
# unlinks, links, renames and, in the "dirs" cases, mkdirs with files in
# them, each followed by an fsync of a file (a fast commit, not a full
# one: fc_info counts them and the area must hold a HEAD tag); then an
# EXT4_IOC_SHUTDOWN without log flush and an unmount leave the image as a
# crash would.  Copy A is recovered by `uext4 recover`, copy B by the
# kernel (mount, umount).  Asserted, on 1 KiB and 4 KiB blocks:
#   - uext4 says it replayed fast commits; e2fsck -fn is clean on A;
#   - the trees (names, types, modes, link counts, sizes, content hashes)
#     of A and B are the same, read by the kernel and A also through
#     `uext4 mount`.  With mkdirs in the fast commits the kernel's own
#     replay leaves a new directory at 1 link, its parent one short and
#     i_blocks 0 (e2fsck complains about B, and only about that); uext4
#     counts them as mkdir does, so there directory link counts are not
#     compared and B's e2fsck is shown, not asserted;
#   - a read-only open (`uext4 mount -o ro` of copy C) shows the same tree
#     and leaves C byte for byte as it was; a read-write `uext4 mount` of
#     copy D and its unmount leave D clean with the same tree;
#   - a replay failing before its 20th tag (fault injection) refuses,
#     naming it, keeps needs_recovery and the journal; the next recovery
#     gives the same tree, e2fsck clean;
#   - a bad tag CRC in a later fast commit: uext4 and the kernel both stop
#     there (same tree, both clean); in the first fast commit: both refuse
#     (uext4 names it and leaves the image unchanged; the kernel's mount
#     fails).
# On main (which refuses fast commits) `uext4 recover` fails here.
. "$(dirname "$0")/lib.sh"

need_root "loop mounts"
need_loop
need mke2fs e2fsck debugfs dumpe2fs python3 findmnt
need_built "$UEXT4"
need_helper FC_FAULT fc_fault
setup_traps
T=$(mktemp_dir)
SEED=${SEED:-$((RANDOM * 32768 + RANDOM))}
echo "seed $SEED (SEED=$SEED to repeat)"

# workload MNT SEED DIRS: the fast-commit workload on a kernel mount.
workload() {
	python3 - "$@" << 'EOF'
import os, random, sys
d, seed, dirs = sys.argv[1], int(sys.argv[2]), sys.argv[3] == '1'
rnd = random.Random(seed)
def fsync(p):
    fd = os.open(p, os.O_RDONLY); os.fsync(fd); os.close(fd)
def write(p, off, n, flags=os.O_WRONLY | os.O_CREAT):
    fd = os.open(p, flags, 0o644); os.pwrite(fd, rnd.randbytes(n), off); os.fsync(fd); os.close(fd)
bs = os.statvfs(d).f_bsize
for i in range(8):
    write(f"{d}/f{i}", 0, rnd.randint(1, 40000))
for i in range(0, 8, 2):
    fd = os.open(f"{d}/f{i}", os.O_WRONLY | os.O_APPEND)
    os.write(fd, rnd.randbytes(rnd.randint(1, 20000))); os.fsync(fd); os.close(fd)
for i in range(1, 8, 3):
    write(f"{d}/f{i}", rnd.randint(0, os.path.getsize(f"{d}/f{i}")), rnd.randint(1, 9000), os.O_WRONLY)
write(f"{d}/sparse", rnd.randint(40, 80) * bs + 17, 5000)
write(f"{d}/sparse", 100, 300, os.O_WRONLY)
write(f"{d}/old2", rnd.randint(0, 3) * bs, bs, os.O_WRONLY)
for p in (f"{d}/f3", f"{d}/f6", f"{d}/old1"):
    fd = os.open(p, os.O_WRONLY); os.ftruncate(fd, rnd.randint(0, 5000)); os.fsync(fd); os.close(fd)
os.unlink(f"{d}/f5"); fsync(f"{d}/f0")
os.unlink(f"{d}/old2"); fsync(f"{d}/f0")
os.link(f"{d}/f1", f"{d}/f1.link"); fsync(f"{d}/f1")
os.link(f"{d}/old3", f"{d}/old3.link"); fsync(f"{d}/old3")
os.rename(f"{d}/f2", f"{d}/f2.renamed"); fsync(f"{d}/f2.renamed")
os.rename(f"{d}/old4", f"{d}/old4.renamed"); fsync(f"{d}/old4.renamed")
os.rename(f"{d}/olddir/a", f"{d}/a.moved"); fsync(f"{d}/a.moved")
for i in range(5):
    write(f"{d}/olddir/g{i}", 0, rnd.randint(1, 30000))
if dirs:
    os.mkdir(f"{d}/newdir")
    for i in range(5):
        write(f"{d}/newdir/g{i}", 0, rnd.randint(1, 30000))
    os.mkdir(f"{d}/emptydir"); fsync(f"{d}/f0")
    os.mkdir(f"{d}/olddir/sub")
    write(f"{d}/olddir/sub/h", 0, 12345)
write(f"{d}/olddir/x", 0, 777)
EOF
}

# fc_live IMG: does the fast-commit area hold fast commits of the
# transaction after the log's last (what a replay takes), not older ones?
fc_live() {
	local dump head last
	dump=$(debugfs -R logdump "$1" 2> /dev/null)
	head=$(echo "$dump" | sed -n 's/^tag HEAD, features 0x0, tid \([0-9]*\)$/\1/p' | head -1)
	last=$(echo "$dump" | sed -n 's/^Found expected sequence \([0-9]*\), type 2 (commit block).*/\1/p' | tail -1)
	[ -n "$head" ] && [ -n "$last" ] && [ "$head" = $((last + 1)) ]
}

# crash_image IMG BLOCKSIZE DIRS: mkfs, a synced baseline, the workload,
# a crash.  The kernel may still fall back to a full commit at the end
# (then the fast commits are stale): the workload runs again with the
# next seed, at most 3 times.
crash_image() {
	local img=$1 bs=$2 dirs=$3 mnt=$T/kmnt dev fc try seed
	mkdir -p "$mnt"
	for try in 0 1 2; do
		seed=$((SEED + try))
		mke2fs -q -F -t ext4 -b "$bs" -O fast_commit -J fast_commit_size=1024 "$img" 64M ||
			fail "mke2fs"
		kmount "$img" "$mnt" rw,commit=600 || fail "kernel mount of $img"
		for i in 1 2 3 4; do head -c $((i * 7000)) /dev/urandom > "$mnt/old$i"; done
		mkdir "$mnt/olddir"
		echo hi > "$mnt/olddir/a"
		sync
		workload "$mnt" "$seed" "$dirs" || fail "workload"
		dev=$(basename "$(findmnt -n -o SOURCE "$mnt")")
		fc=$(awk 'NR == 2 { print $1 }' "/proc/fs/ext4/$dev/fc_info")
		python3 - "$mnt" << 'EOF' || fail "shutdown ioctl"
import fcntl, os, struct, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
fcntl.ioctl(fd, (2 << 30) | (4 << 16) | (ord('X') << 8) | 125, struct.pack('I', 2))
EOF
		kumount "$mnt"
		[ "${fc:-0}" -gt 0 ] || fail "the kernel made no fast commit"
		if fc_live "$img"; then
			echo "  the kernel made $fc fast commits (workload seed $seed)"
			return
		fi
		echo "  workload seed $seed: the kernel ended with a full commit; again"
	done
	fail "the kernel left no live fast commit in 3 tries"
}

# tree DIR [nodirlinks]: one line per file: path, mode, links, size, hash.
tree() {
	python3 - "$@" << 'EOF'
import hashlib, os, stat, sys
root, nodl = sys.argv[1], len(sys.argv) > 2
for dp, dns, fns in os.walk(root):
    dns.sort(); fns.sort()
    for n in ([''] if dp == root else []) + dns + fns:
        p = os.path.join(dp, n) if n else dp
        rel = os.path.relpath(p, root)
        if rel.startswith('lost+found'):
            continue
        st = os.lstat(p)
        h = hashlib.sha256(open(p, 'rb').read()).hexdigest()[:16] if stat.S_ISREG(st.st_mode) else ''
        isdir = stat.S_ISDIR(st.st_mode)
        print(rel, oct(st.st_mode), '-' if isdir and nodl else st.st_nlink, '-' if isdir else st.st_size, h)
EOF
}

kernel_tree() { # IMG OUT [nodirlinks]
	local mnt=$T/vmnt
	mkdir -p "$mnt"
	kmount "$1" "$mnt" ro,noload || { bad "kernel mount of $1"; return 1; }
	tree "$mnt" $3 > "$2"
	kumount "$mnt"
}

uext4_tree() { # IMG OUT [nodirlinks]: read through `uext4 mount -o ro`
	local mnt=$T/umnt
	mkdir -p "$mnt"
	fuse_mount "$1" "$mnt" || { bad "uext4 mount of $1"; return 1; }
	tree "$mnt" $3 > "$2"
	fusermount3 -u "$mnt"
	wait "$FUSE_PID" 2> /dev/null
}

same_tree() { # WHAT A B
	if diff "$2" "$3" > "$T/diff"; then
		echo "  $1: the same tree ($(wc -l < "$2") entries)"
	else
		bad "$1: trees differ"
		head -20 "$T/diff"
	fi
}

kernel_recover() { # IMG: the kernel's replay (mount, unmount)
	local mnt=$T/kmnt
	kmount "$1" "$mnt" rw || return 1
	kumount "$mnt"
}

# The kernel's replay with mkdirs: its e2fsck findings may only be the
# link counts and i_blocks of directories and the directory counts.
kernel_fsck_dirs() {
	local out
	out=$(e2fsck -fn "$1" 2>&1 | grep -vE "^(Pass |e2fsck |Fix\? no|$)|ref count is|i_blocks is 0, should be|Directories count wrong|still has errors|[0-9]+/[0-9]+ files")
	if [ -n "$out" ]; then
		bad "the kernel's replay: e2fsck finds more than directory counts"
		echo "$out"
	else
		echo "  the kernel's own replay: e2fsck finds only directory link counts, i_blocks, counts (its known shortfall)"
	fi
}

# fault_case IMG TREE: the replay failing before a tag (FAULT_FC_REPLAY)
# refuses naming it and keeps the journal; the next recovery replays all.
fault_case() {
	local out
	cp --sparse=always "$1" "$T/H.img"
	if out=$("$FC_FAULT" "$T/H.img" 20); then
		echo "  $out"
		echo "$out" | grep -q "fast-commit replay, tag 20" || bad "failed replay: unclear message"
	else
		bad "failed replay: $out"
	fi
	dumpe2fs -h "$T/H.img" 2> /dev/null | grep -q '^Filesystem features:.*needs_recovery' &&
		dumpe2fs -h "$T/H.img" 2> /dev/null | grep -qE '^Journal start: +[1-9]' &&
		echo "  the failed replay kept needs_recovery and the journal" ||
		bad "the failed replay emptied the journal or cleared needs_recovery"
	"$UEXT4" recover -q "$T/H.img" || bad "recovery after a failed replay"
	fsck_clean "$T/H.img" || bad "e2fsck after a failed replay, then a recovery"
	kernel_tree "$T/H.img" "$T/H.tree"
	same_tree "a failed replay, then a recovery" "$T/H.tree" "$2"
}

one_case() { # NAME BLOCKSIZE DIRS
	local name=$1 bs=$2 dirs=$3 img=$T/$1.img nodl= out
	CASE=$name
	note "$name: ${bs}-byte blocks, mkdirs in the fast commits: $dirs"
	[ "$dirs" = 1 ] && nodl=nodirlinks
	crash_image "$img" "$bs" "$dirs"
	for c in A B C D; do cp --sparse=always "$img" "$T/$c.img"; done
	if out=$("$UEXT4" recover "$T/A.img" 2>&1); then
		echo "$out" | sed 's/^/  /'
		echo "$out" | grep -q "fast commits replayed" || bad "uext4 recover did not replay fast commits"
	else
		bad "uext4 recover failed: $out"
		return
	fi
	fsck_clean "$T/A.img" && echo "  e2fsck -fn clean after uext4's replay" || bad "e2fsck after uext4's replay"
	kernel_recover "$T/B.img" || { bad "the kernel's replay failed"; return; }
	if [ "$dirs" = 1 ]; then kernel_fsck_dirs "$T/B.img"
	else fsck_clean "$T/B.img" && echo "  e2fsck -fn clean after the kernel's replay" || bad "e2fsck after the kernel's replay"; fi
	kernel_tree "$T/B.img" "$T/B.tree" $nodl
	kernel_tree "$T/A.img" "$T/A.tree" $nodl
	same_tree "uext4's replay (kernel view) and the kernel's" "$T/A.tree" "$T/B.tree"
	uext4_tree "$T/A.img" "$T/Au.tree" $nodl
	same_tree "uext4's replay (uext4 view) and the kernel's" "$T/Au.tree" "$T/B.tree"
	# Read-only open: replayed in memory, the image untouched.
	uext4_tree "$T/C.img" "$T/C.tree" $nodl
	same_tree "read-only open (replay in memory)" "$T/C.tree" "$T/B.tree"
	cmp -s "$T/C.img" "$img" && echo "  the read-only open left the image as it was" ||
		bad "the read-only open changed the image"
	# Read-write mount: the replay at mount, then a clean unmount.
	mkdir -p "$T/rw"
	if fuse_mount_fg "$T/D.img" "$T/rw"; then
		"$UEXT4" umount "$T/rw" > /dev/null 2>&1 || fusermount3 -u "$T/rw"
		wait "$FUSE_PID"
		fsck_clean "$T/D.img" && echo "  read-write mount: e2fsck -fn clean after" || bad "e2fsck after the read-write mount"
		kernel_tree "$T/D.img" "$T/D.tree" $nodl
		same_tree "read-write mount" "$T/D.tree" "$T/B.tree"
	else
		bad "read-write uext4 mount failed"
	fi
	[ "$dirs" = 0 ] && fault_case "$img" "$T/B.tree"
	CASE=
}

# fc_area IMG: "first_physical_block block_size count" of the fast-commit area
fc_area() {
	local total fclen bs first
	total=$(dumpe2fs -h "$1" 2> /dev/null | awk -F: '/^Total journal blocks/ { print $2 + 0 }')
	fclen=$(dumpe2fs -h "$1" 2> /dev/null | awk -F: '/^Fast commit length/ { print $2 + 0 }')
	bs=$(dumpe2fs -h "$1" 2> /dev/null | awk -F: '/^Block size/ { print $2 + 0 }')
	first=$((total - fclen + 1))   # the kernel's j_fc_first = j_last + 1
	echo "$first $bs $((fclen - 1))"
}

# corrupt IMG WHICH: flip a byte inside a record of the fast-commit area.
# first: the second record of the first block (the first fast commit);
# later: the first record of the block after the 4th tail.
corrupt() {
	local img=$1 which=$2 first bs n
	read -r first bs n < <(fc_area "$img")
	debugfs -R "dump <8> $T/journal" "$img" 2> /dev/null
	python3 - "$T/journal" "$first" "$bs" "$n" "$which" "$img" << 'EOF'
import struct, subprocess, sys
j, first, bs, n, which, img = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], sys.argv[6]
data = open(j, 'rb').read()
def block(i): return data[(first + i) * bs:(first + i + 1) * bs]
if which == 'first':
    lblk, off = first, 12 + 4 + 1
else:
    tails = 0
    for i in range(n):
        b, off = block(i), 0
        while off + 4 <= bs:
            tag, ln = struct.unpack_from('<HH', b, off)
            if tag == 8: tails += 1
            off += 4 + ln
        if tails >= 4:
            lblk, off = first + i + 1, 5
            break
out = subprocess.run(['debugfs', '-R', f'bmap <8> {lblk}', img], capture_output=True, text=True).stdout
phys = int(out.split()[0])
with open(img, 'r+b') as f:
    f.seek(phys * bs + off); c = f.read(1); f.seek(phys * bs + off); f.write(bytes([c[0] ^ 0xff]))
print(f"  flipped byte {off} of journal block {lblk} (block {phys})")
EOF
}

crc_cases() {
	local img=$T/crc.img
	CASE=crc
	note "crc: a bad record CRC in the fast-commit area"
	crash_image "$img" 4096 0
	cp --sparse=always "$img" "$T/E.img"
	corrupt "$T/E.img" later
	cp --sparse=always "$T/E.img" "$T/F.img"
	"$UEXT4" recover "$T/E.img" | sed 's/^/  /' || bad "uext4 recover of a later bad fast commit"
	kernel_recover "$T/F.img" || bad "the kernel refused a later bad fast commit"
	fsck_clean "$T/E.img" && fsck_clean "$T/F.img" && echo "  e2fsck -fn clean on both" || bad "e2fsck after a later bad fast commit"
	kernel_tree "$T/E.img" "$T/E.tree"
	kernel_tree "$T/F.img" "$T/F.tree"
	same_tree "stopped at the bad fast commit, as the kernel" "$T/E.tree" "$T/F.tree"
	kernel_tree "$T/B.img" "$T/all.tree" 2> /dev/null
	cp --sparse=always "$img" "$T/G.img"
	corrupt "$T/G.img" first
	cp --sparse=always "$T/G.img" "$T/G0.img"
	if out=$("$UEXT4" recover "$T/G.img" 2>&1); then
		bad "uext4 recover took a first fast commit with a bad CRC: $out"
	else
		echo "  refused: $out"
		echo "$out" | grep -q "first fast commit" || bad "unclear refusal: $out"
	fi
	cmp -s "$T/G.img" "$T/G0.img" && echo "  the refused recovery left the image as it was" ||
		bad "the refused recovery changed the image"
	if kmount "$T/G.img" "$T/kmnt" rw 2> /dev/null; then
		kumount "$T/kmnt"
		bad "the kernel mounted a journal whose first fast commit has a bad CRC"
	else
		echo "  the kernel refuses it too"
	fi
	CASE=
}

one_case 4k-files 4096 0
one_case 4k-dirs 4096 1
one_case 1k-dirs 1024 1
crc_cases
[ $FAILS = 0 ] || fail "$FAILS checks failed"
echo "PASS"
