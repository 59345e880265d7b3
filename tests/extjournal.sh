#!/bin/bash
# extjournal.sh - file systems whose journal is on an external device
# (mke2fs -O journal_dev, -J device=), against the kernel and e2fsck:
#  a. a file system made by mke2fs with its journal on a journal_dev device:
#     uext4 writes it (CLI --journal, mount -o journal=), e2fsck -fn -j is
#     clean, the kernel (mount -o journal_path=) sees the same tree, writes,
#     and uext4 reads what it wrote; a clean one reads without its journal.
#  b. crashes: a uext4 server killed (-9) after an fsync leaves needs_recovery
#     and committed transactions in the external log; one copy is recovered
#     by `uext4 recover --journal`, one by the kernel: the same tree, e2fsck
#     clean.  The reverse: a copy taken while the kernel holds the mount (after
#     sync, commit timer off) is recovered by uext4: the kernel's tree.
#  c. refusals, each leaving the images byte-identical (cmp): a journal of
#     another UUID (the message names both), no journal given for a write or
#     for a file system needing recovery (naming the UUID to pass), --journal
#     for a file system with an internal journal, a journal with two users.
#  d. uext4 mkfs -O journal_dev and -J device= against mke2fs's (dumpe2fs -h
#     of both, the same UUIDs), e2fsck clean, the kernel mounts it.
# run-in: release asan
set -uo pipefail
. "$(dirname "$0")/lib.sh"
need_loop "the kernel's external journals (journal_path=) need loop devices"
need_fuse
need mke2fs:e2fsprogs e2fsck:e2fsprogs dumpe2fs:e2fsprogs
need_built "$UEXT4"
setup_traps
test_dir
FAILS=0
FU=5c0f5c0f-0000-4000-8000-00000000f501
JU=5c0f5c0f-0000-4000-8000-00000000a001
J2U=5c0f5c0f-0000-4000-8000-00000000a002
km=$T/k
fm=$T/f
mkdir -p "$km" "$fm"

# Loop devices this test attached, detached at exit (after the mounts).
LOOPS_FILE=$T/loops
detach_loops() {
	[ -f "$LOOPS_FILE" ] || return 0
	while read -r l; do losetup -d "$l" 2> /dev/null; done < "$LOOPS_FILE"
	rm -f "$LOOPS_FILE"
}
trap 'cleanup_mounts; detach_loops' EXIT
attach() { # attach FILE: a loop device backed by FILE (printed)
	local l
	l=$(losetup -f --show "$1") || return 1
	echo "$l" >> "$LOOPS_FILE"
	echo "$l"
}
# kmount_ext FS JOURNAL DIR OPTS: the kernel's mount, the journal through
# journal_path= on a loop device of its own (detached by kumount_ext).
KJ=
kmount_ext() {
	KJ=$(attach "$2") || return 1
	if ! mount -t ext4 -o "loop,$4,journal_path=$KJ" "$1" "$3"; then
		losetup -d "$KJ"
		return 1
	fi
	MOUNTS+=("$3")
}
kumount_ext() {
	umount "$1" || return 1
	losetup -d "$KJ"
}
# digest DIR: the tree (types, modes, sizes, names) and file contents.
digest() {
	(cd "$1" && find . -path ./lost+found -prune -o -printf '%y %m %s %p\n' | LC_ALL=C sort &&
		find . -path ./lost+found -prune -o -type f -print0 | LC_ALL=C sort -z |
		xargs -0r md5sum)
}
kdigest() { # kdigest FS JOURNAL OUT: the kernel's view, read-only
	kmount_ext "$1" "$2" "$km" ro || { bad "kernel mount of $1 with journal_path"; return 1; }
	digest "$km" > "$3"
	kumount_ext "$km" || bad "kernel umount"
}
fsck_ext() { # fsck_ext FS JOURNAL WHAT
	local out
	out=$(e2fsck -fn -j "$2" "$1" 2>&1) || { echo "$out" | tail -8; bad "e2fsck -fn -j: $3"; }
}
jstart() { dumpe2fs -h "$1" 2> /dev/null | sed -n 's/^Journal start: *//p'; }
needs_recovery() { dumpe2fs -h "$1" 2> /dev/null | grep -q '^Filesystem features:.*needs_recovery'; }
# mkpair FS JOURNAL BS: mke2fs's journal device and a file system using it
# (mke2fs -J device= takes only a block device).
mkpair() {
	local l
	rm -f "$1" "$2"
	truncate -s 8M "$2"
	mke2fs -q -F -O journal_dev -b "$3" -U "$JU" "$2" || fail "mke2fs -O journal_dev"
	l=$(attach "$2") || fail "losetup"
	truncate -s 64M "$1"
	mke2fs -q -F -t ext4 -b "$3" -U "$FU" -E lazy_itable_init=0 -J device="$l" "$1" > /dev/null ||
		fail "mke2fs -J device="
	losetup -d "$l"
}
workload() { # workload DIR TAG: namespace and data operations
	local d=$1/$2 i
	mkdir -p "$d/a/b" "$d/c" || { bad "mkdir in $d"; return 1; }
	for ((i = 0; i < 120; i++)); do echo "$2 file $i" > "$d/a/f$i"; done
	cp -r "$TOP/src" "$d/src" || bad "cp -r into $d"
	head -c 3000000 /dev/urandom > "$d/big" || bad "big file"
	mv "$d/a/f1" "$d/c/moved" && ln -s ../c/moved "$d/a/sym" && ln "$d/a/f2" "$d/hard" &&
		rm -f "$d"/a/f1[0-9] "$d"/src/[a-c]*.c
	truncate -s 1000 "$d/big" && chmod 600 "$d/a/f3" || bad "workload in $d"
}

for bs in 4096 1024; do
	CASE="a, $bs-byte blocks"
	note "a. mke2fs -J device= ($bs-byte blocks): uext4 and the kernel write it in turn"
	fs=$T/fs.img j=$T/j.img
	mkpair "$fs" "$j" "$bs"
	# Read-only without the journal: clean, so allowed (the kernel's ro,noload).
	cli_run ls "$fs" / && [ $RC = 0 ] || bad "read-only ls without the journal of a clean fs: $ERR"
	cli_run mkdir --journal "$j" "$fs" /cli
	[ $RC = 0 ] || bad "uext4 mkdir --journal: $ERR"
	cli_run put --journal "$j" "$fs" "$TOP/README.md" /cli/readme
	[ $RC = 0 ] || bad "uext4 put --journal: $ERR"
	fuse_mount_fg "$fs" "$fm" "journal=$j" || fail "uext4 mount -o journal="
	workload "$fm" uext4
	digest "$fm" > "$T/d.fuse"
	fuse_umount "$fm"
	grep -q "error\|Sanitizer" "$fm.log" && { cat "$fm.log"; bad "the server reported an error"; }
	needs_recovery "$fs" && bad "needs_recovery left set after a clean unmount"
	[ "$(jstart "$j")" = 0 ] || bad "journal not empty after a clean unmount ($(jstart "$j"))"
	fsck_ext "$fs" "$j" "after uext4's workload"
	kdigest "$fs" "$j" "$T/d.k1" && compare_dumps "kernel's view of uext4's tree" "$T/d.fuse" "$T/d.k1"
	# The kernel writes; uext4 reads it (without the journal: clean) and writes again.
	kmount_ext "$fs" "$j" "$km" rw || fail "kernel rw mount with journal_path"
	workload "$km" kernel
	digest "$km" > "$T/d.k2"
	kumount_ext "$km" || bad "kernel umount"
	fuse_mount "$fs" "$fm" || fail "uext4 read-only mount without the journal"
	digest "$fm" > "$T/d.u2"
	fuse_umount "$fm"
	compare_dumps "uext4's view of the kernel's tree" "$T/d.k2" "$T/d.u2"
	cli_run rm --journal "$j" -r "$fs" /kernel/src
	[ $RC = 0 ] || bad "uext4 rm -r --journal: $ERR"
	fsck_ext "$fs" "$j" "after the kernel's workload and uext4's rm"
done
CASE=

note "b. uext4 killed (-9) after an fsync: recovered by uext4 and by the kernel"
CASE=b
mkpair "$T/fs.img" "$T/j.img" 4096
fuse_mount_fg "$T/fs.img" "$fm" "journal_path=$T/j.img,commit=3600" || fail "uext4 mount -o journal_path="
conn=$(mountpoint -d "$fm" | cut -d: -f2)
workload "$fm" crash
echo synced > "$fm/crash/synced" && sync "$fm/crash/synced" || bad "fsync through the mount"
kill -9 "$FUSE_PID"
[ -w "/sys/fs/fuse/connections/$conn/abort" ] && echo 1 > "/sys/fs/fuse/connections/$conn/abort"
wait "$FUSE_PID" 2> /dev/null
FUSE_PID=
fusermount3 -uz "$fm" 2> /dev/null || umount -l "$fm"
needs_recovery "$T/fs.img" || bad "no needs_recovery after kill -9"
st=$(jstart "$T/j.img")
[ "${st:-0}" != 0 ] || bad "the external log is empty after kill -9 (Journal start ${st:-?})"
echo "external log starts at block $st"
cli_run ls "$T/fs.img" /
{ [ $RC != 0 ] && grep -q "needs recovery" "$T/err" && grep -q "$JU" "$T/err"; } ||
	bad "read-only open of a file system needing recovery without its journal: not refused by name ($RC: $ERR)"
for x in A B; do cp "$T/fs.img" "$T/fs$x.img" && cp "$T/j.img" "$T/j$x.img" || fail "copy"; done
cli_run recover --journal "$T/jA.img" "$T/fsA.img"
cat "$T/out"
{ [ $RC = 0 ] && grep -q "journal: [1-9][0-9]* transactions replayed" "$T/out"; } ||
	bad "uext4 recover --journal replayed nothing ($RC: $ERR)"
kmount_ext "$T/fsB.img" "$T/jB.img" "$km" rw && kumount_ext "$km" || bad "the kernel's recovery"
for x in A B; do
	needs_recovery "$T/fs$x.img" && bad "copy $x still needs recovery"
	fsck_ext "$T/fs$x.img" "$T/j$x.img" "after recovery of copy $x"
	kdigest "$T/fs$x.img" "$T/j$x.img" "$T/d.$x"
done
compare_dumps "uext4's recovery against the kernel's" "$T/d.B" "$T/d.A"
grep -q ' ./crash/synced$' "$T/d.A" || bad "the fsynced file is lost"

note "b. the kernel leaves committed transactions in the external log: uext4 recovers them"
mkpair "$T/fs.img" "$T/j.img" 1024
kmount_ext "$T/fs.img" "$T/j.img" "$km" rw,commit=600 || fail "kernel rw mount"
workload "$km" k
sync
digest "$km" > "$T/d.live"
# The kernel writes nothing more: the timer is off, the file system idle.
cp "$T/fs.img" "$T/fsC.img" && cp "$T/j.img" "$T/jC.img" || fail "copy"
kumount_ext "$km" || bad "kernel umount"
needs_recovery "$T/fsC.img" || bad "the copy does not need recovery"
[ "$(jstart "$T/jC.img")" != 0 ] || bad "the copy's external log is empty"
cli_run recover --journal "$T/jC.img" "$T/fsC.img"
cat "$T/out"
{ [ $RC = 0 ] && grep -q "journal: [1-9][0-9]* transactions replayed" "$T/out"; } ||
	bad "uext4 recover of the kernel's log replayed nothing ($RC: $ERR)"
fsck_ext "$T/fsC.img" "$T/jC.img" "after uext4 recovered the kernel's log"
kdigest "$T/fsC.img" "$T/jC.img" "$T/d.C" && compare_dumps "recovered copy against the kernel's live tree" "$T/d.live" "$T/d.C"
CASE=

note "c. refusals leave the images unchanged"
CASE=c
mkpair "$T/fs.img" "$T/j.img" 4096
truncate -s 8M "$T/j2.img" && mke2fs -q -F -O journal_dev -b 4096 -U "$J2U" "$T/j2.img" || fail "mke2fs -O journal_dev"
for f in fs j j2; do cp "$T/$f.img" "$T/$f.orig"; done
unchanged() {
	for f in fs j j2; do cmp -s "$T/$f.img" "$T/$f.orig" || bad "$1 changed $f.img"; done
}
cli_run mkdir --journal "$T/j2.img" "$T/fs.img" /x
{ [ $RC != 0 ] && grep -q "$J2U" "$T/err" && grep -q "$JU" "$T/err"; } ||
	bad "a journal of another UUID: not refused naming both ($RC: $ERR)"
echo "wrong journal: $ERR"
unchanged "mkdir with the wrong journal"
cli_run ls --journal "$T/j2.img" "$T/fs.img" /
{ [ $RC != 0 ] && grep -q "$J2U" "$T/err"; } || bad "ls with the wrong journal: not refused ($RC)"
timeout -k 5 30 "$UEXT4" mount -f -o "journal=$T/j2.img" "$T/fs.img" "$fm" > "$T/mout" 2>&1 < /dev/null
if mountpoint -q "$fm"; then bad "mounted with the wrong journal"; fusermount3 -u "$fm"; fi
grep -q "$J2U" "$T/mout" || bad "mount -o journal= with the wrong journal: $(cat "$T/mout")"
unchanged "mount with the wrong journal"
cli_run mkdir "$T/fs.img" /x
{ [ $RC != 0 ] && grep -q -- "-o journal=PATH" "$T/err" && grep -q "$JU" "$T/err"; } ||
	bad "a write without the journal: not refused naming the UUID and the option ($RC: $ERR)"
echo "no journal: $ERR"
cli_run recover "$T/fs.img"
[ $RC != 0 ] || bad "recover without the journal of an external-journal file system succeeded"
unchanged "writes without the journal"
truncate -s 16M "$T/int.img" && mke2fs -q -F -t ext4 "$T/int.img" && cp "$T/int.img" "$T/int.orig"
cli_run mkdir --journal "$T/j.img" "$T/int.img" /x
{ [ $RC != 0 ] && grep -q "internal" "$T/err"; } || bad "--journal on an internal journal accepted ($RC: $ERR)"
cmp -s "$T/int.img" "$T/int.orig" || bad "the refused --journal changed int.img"
# A second file system on the same journal: two users, refused as by the kernel.
l=$(attach "$T/j.img") && truncate -s 32M "$T/fs2.img" &&
	mke2fs -q -F -t ext4 -b 4096 -J device="$l" "$T/fs2.img" > /dev/null && losetup -d "$l" ||
	fail "a second mke2fs -J device="
cp "$T/j.img" "$T/j.orig"
cli_run mkdir --journal "$T/j.img" "$T/fs.img" /x
{ [ $RC != 0 ] && grep -q "2 users" "$T/err"; } || bad "a journal with two users accepted ($RC: $ERR)"
unchanged "a journal with two users"
CASE=

note "d. uext4 mkfs -O journal_dev and -J device= against mke2fs's"
CASE=d
TIME=1700000000
HS=decb57a1-02db-47f9-84fb-73892aaf30f5
devno() { printf '0x%04x' $((0x$(stat -c %t "$1") * 256 + 0x$(stat -c %T "$1"))); }
hdiff() { # the dumpe2fs -h lines that differ, less the I/O counter and checksum
	diff <(dumpe2fs -h "$1" 2>&1) <(dumpe2fs -h "$2" 2>&1) | grep '^[<>]' |
		grep -v -e '^. Lifetime writes:' -e '^. Checksum:  ' -e '^. Journal device:'
}
for bs in 4096 1024; do
	rm -f "$T/jm.img" "$T/ju.img" "$T/fm.img" "$T/fu.img"
	truncate -s 8M "$T/jm.img" && E2FSPROGS_FAKE_TIME=$TIME mke2fs -q -F -t ext4 -O journal_dev \
		-b $bs -U "$JU" -E hash_seed=$HS "$T/jm.img" || fail "mke2fs -O journal_dev"
	SOURCE_DATE_EPOCH=$TIME cli_run mkfs -q -O journal_dev -b $bs -U "$JU" -E hash_seed=$HS "$T/ju.img" 8M
	[ $RC = 0 ] || bad "uext4 mkfs -O journal_dev -b $bs: $ERR"
	d=$(hdiff "$T/jm.img" "$T/ju.img")
	[ -z "$d" ] || { echo "$d"; bad "-O journal_dev -b $bs: dumpe2fs -h differs from mke2fs's"; }
	cmp -s "$T/jm.img" "$T/ju.img" && echo "-O journal_dev -b $bs: byte-identical to mke2fs's"
	lm=$(attach "$T/jm.img") && lu=$(attach "$T/ju.img") || fail "losetup"
	truncate -s 64M "$T/fm.img" "$T/fu.img"
	E2FSPROGS_FAKE_TIME=$TIME mke2fs -q -F -t ext4 -O orphan_file,metadata_csum_seed -U "$FU" \
		-E hash_seed=$HS -J device="$lm" "$T/fm.img" > /dev/null || fail "mke2fs -J device="
	SOURCE_DATE_EPOCH=$TIME cli_run mkfs -q -U "$FU" -E hash_seed=$HS -J device="$lu" "$T/fu.img"
	[ $RC = 0 ] || bad "uext4 mkfs -J device= ($bs): $ERR"
	d=$(hdiff "$T/fm.img" "$T/fu.img")
	[ -z "$d" ] || { echo "$d"; bad "-J device= ($bs): dumpe2fs -h differs from mke2fs's"; }
	d=$(hdiff "$lm" "$lu")
	[ -z "$d" ] || { echo "$d"; bad "-J device= ($bs): the journal's users differ from mke2fs's"; }
	dumpe2fs -h "$T/fu.img" 2> /dev/null | grep -q "^Journal device:[[:space:]]*$(devno "$lu")$" ||
		bad "s_journal_dev is not $lu's number $(devno "$lu")"
	# Given as another block device, the journal's number replaces
	# s_journal_dev, as the kernel does with journal_path=.
	lj=$(attach "$T/ju.img") || fail "losetup"
	cli_run mkdir --journal "$lj" "$T/fu.img" /bydev
	[ $RC = 0 ] || bad "uext4 mkdir --journal BLOCKDEV: $ERR"
	dumpe2fs -h "$T/fu.img" 2> /dev/null | grep -q "^Journal device:[[:space:]]*$(devno "$lj")$" ||
		bad "s_journal_dev is not $lj's number $(devno "$lj") after a write through it"
	losetup -d "$lm" "$lu" "$lj"
	fsck_ext "$T/fu.img" "$T/ju.img" "uext4 mkfs -J device= ($bs)"
	kmount_ext "$T/fu.img" "$T/ju.img" "$km" rw && echo kernel > "$km/k" && kumount_ext "$km" ||
		bad "the kernel mounting uext4 mkfs's pair ($bs)"
	cli_run cat --journal "$T/ju.img" "$T/fu.img" /k
	[ "$(cat "$T/out")" = kernel ] || bad "reading the kernel's file back ($RC: $ERR)"
	fsck_ext "$T/fu.img" "$T/ju.img" "after the kernel wrote uext4 mkfs's pair ($bs)"
done
CASE=

echo "extjournal.sh: $FAILS failed checks"
[ "$FAILS" = 0 ]
