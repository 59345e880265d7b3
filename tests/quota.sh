#!/bin/bash
# quota.sh - user, group and project quota usage kept exact by uext4 on
# -O quota,project images, 1 KiB and 4 KiB blocks.  The kernel here lacks
# CONFIG_QFMT_V2 (it refuses quota images), so e2fsck (which recounts
# every id's usage and reports a difference from the quota files as an
# error) and debugfs (list_quota) are the oracles.
#
# Asserts:
#   - quotatree selftest: ids inserted in random order into a new v2r1
#     file are all found, walked in order, lists and length sound;
#   - our reader lists what debugfs list_quota lists, on files made by
#     mke2fs and on files uext4 changed (new ids inserted by uext4);
#   - CLI steps (put as several owners, mkdir, chown, truncate, setfattr
#     with a block-sized value, rm) and files with project ids (set with
#     debugfs, then written, truncated, removed by uext4): e2fsck -fn
#     clean after every step;
#   - the model test's random workload (4 threads, several uids and gids,
#     chown, unlink, truncate, xattrs) on a quota,project image: clean;
#   - uext4 mkfs -O quota, quota,project, -E quotatype=: dumpe2fs -h as
#     mke2fs's for the same options, quota listing as mke2fs's, clean; the
#     CLI and project steps on such an image; mkfs -d of a tree owned by
#     several users: clean, their ids listed;
#   - the FUSE mount, files written by three users (setpriv), chown,
#     truncate, unlink: clean after unmount.
# run-in: release asan
set -uo pipefail
. "$(dirname "$0")/lib.sh"
setup_traps
need e2fsck:e2fsprogs debugfs:e2fsprogs
need_helper QT quotatree
need_helper MODEL model
test_seed quota QUOTA_SEED
T=$(mktemp_dir)
FAILS=0

"$QT" selftest "$SEED" || bad "quotatree selftest (seed $SEED)"

check() { # check IMAGE STEP: e2fsck -fn clean (quota usage included)
	local out
	if ! out=$(e2fsck -fn "$1" 2>&1); then
		echo "$out" | grep -iE 'quota|inconsistent|wrong' | head -8
		bad "e2fsck -fn after: $2"
		return 1
	fi
}

# ours TYPE IMAGE / theirs TYPE IMAGE: "id space inodes", sorted.
ours() {
	local ino
	ino=$(dumpe2fs -h "$2" 2>/dev/null | awk -v t="$1" \
		'tolower($1) == t && $2 == "quota" && $3 == "inode:" { print $4 }')
	debugfs -R "dump <$ino> $T/qf" "$2" > /dev/null 2>&1
	local n=0
	case $1 in user) n=0 ;; group) n=1 ;; project) n=2 ;; esac
	"$QT" dump "$T/qf" $n | awk '{ print $1, $2, $3 }' | sort
}
theirs() {
	debugfs -R "list_quota $1" "$2" 2>/dev/null | awk 'NR > 1 { print $1, $2, $5 }' | sort
}
same_listing() { # same_listing IMAGE WHAT
	local t
	for t in user group project; do
		if ! diff <(ours $t "$1") <(theirs $t "$1") > "$T/qdiff"; then
			head -10 "$T/qdiff"
			bad "$2: our reading of the $t quota file differs from debugfs list_quota"
		fi
	done
}

cli_steps() { # cli_steps IMAGE
	local img=$1 big=$T/big
	head -c 300000 /dev/urandom > "$big"
	same_listing "$img" "mke2fs's quota files"
	cli_run put "$img" "$big" /a; check "$img" "put /a (root)" || return
	cli_run mkdir "$img" /d /d/e; check "$img" "mkdir /d /d/e"
	cli_run chown "$img" 1000:2000 /a; check "$img" "chown 1000:2000 /a (new ids)"
	cli_run put "$img" "$big" /d/b; cli_run chown "$img" 70000:5 /d/b /d
	check "$img" "put /d/b, chown 70000:5"
	cli_run truncate -s 4097 "$img" /a; check "$img" "truncate /a to 4097"
	cli_run truncate -s 9000000 "$img" /d/b; check "$img" "truncate /d/b up (sparse)"
	head -c 3000 /dev/urandom | base64 -w0 > "$T/val"
	cli_run setfattr -n user.big -v "$(cat "$T/val")" "$img" /a
	check "$img" "setfattr (an xattr block charged)"
	cli_run setfattr -x user.big "$img" /a; check "$img" "setfattr -x"
	cli_run chown "$img" 0:0 /d/b; check "$img" "chown back to 0:0"
	cli_run rm "$img" /a; check "$img" "rm /a"
	cli_run rm -r "$img" /d; check "$img" "rm -r /d"
	same_listing "$img" "after the CLI steps"
}

project_steps() { # project_steps IMAGE: files with project ids (set by debugfs)
	local img=$1
	cli_run mkdir "$img" /p; cli_run put "$img" "$T/big" /p/x
	cli_run put "$img" "$T/big" /p/y
	debugfs -w -R "sif /p/x projid 7" "$img" > /dev/null 2>&1
	debugfs -w -R "sif /p/y projid 8" "$img" > /dev/null 2>&1
	e2fsck -fy "$img" > /dev/null 2>&1   # counts projects 7 and 8 into the file
	check "$img" "project ids set (debugfs, then e2fsck -fy)" || return
	cli_run truncate -s 1000 "$img" /p/x; check "$img" "truncate a file of project 7"
	cli_run setfattr -n user.v -v "$(cat "$T/val")" "$img" /p/y
	check "$img" "an xattr block on a file of project 8"
	cli_run rm "$img" /p/y; check "$img" "rm a file of project 8"
	same_listing "$img" "after the project steps"
	[ "$(theirs project "$img" | awk '$1 == 7 { print $2 }')" = 1024 ] ||
		[ "$(theirs project "$img" | awk '$1 == 7 { print $2 }')" = 4096 ] ||
		bad "project 7 should hold one block: $(theirs project "$img" | tr '\n' ';')"
	# uext4 moves a file to another project (quota_transfer()), and a new
	# file in a +P directory is counted in the directory's project.
	cli_run put "$img" "$T/big" /p/z
	cli_run chattr "$img" -p 9 /p/z; check "$img" "uext4 chattr -p 9 of a file"
	cli_run chattr "$img" +P -p 11 /p; cli_run put "$img" "$T/big" /p/w
	check "$img" "a new file in a +P directory of project 11"
	[ "$(theirs project "$img" | awk '$1 == 9 { print $3 }')" = 1 ] ||
		bad "project 9 should hold one inode: $(theirs project "$img" | tr '\n' ';')"
	cli_run chattr "$img" -p 7 /p/z; check "$img" "uext4 chattr -p 7 (back to an id in use)"
}

for bs in 1024 4096; do
	CASE="mke2fs -b $bs"
	img=$T/m$bs.img
	mke2fs -q -F -t ext4 -O quota,project -b $bs "$img" 64M || fail "mke2fs"
	cli_steps "$img"
	project_steps "$img"

	CASE="model -b $bs"
	img=$T/model$bs.img
	mke2fs -q -F -t ext4 -O quota,project -b $bs "$img" 512M || fail "mke2fs"
	ops=2500
	sanitized && ops=1000
	"$MODEL" --threads 4 --ops $ops --seed "$SEED" "$img" > "$T/model.log" 2>&1 ||
		{ tail -5 "$T/model.log"; bad "model (seed $SEED)"; }
	check "$img" "the model's workload"
	[ "$(theirs user "$img" | wc -l)" -gt 3 ] || bad "the model's workload left fewer than 4 user ids"
	same_listing "$img" "after the model"
done

# uext4 mkfs: the superblock mke2fs writes for the same options (uext4's
# own defaults orphan_file and metadata_csum_seed off), clean quota files;
# the CLI steps on it; mkfs -d of a tree of several owners counted exact.
hdr() {
	dumpe2fs -h "$1" 2>/dev/null | grep -vE 'UUID|time|Lifetime|Hash Seed|Checksum|created|Last checked|Free blocks|Reserved GDT|Journal backup|Overhead'
}
src=$T/src
mkdir -p "$src/a/b" "$src/c"
head -c 70000 /dev/urandom > "$src/a/b/f"
head -c 9000 /dev/urandom > "$src/c/g"
seq 1 5000 > "$src/top"
if [ "$(id -u)" = 0 ]; then
	chown -R 1234:5678 "$src/a"
	chown 4321:8765 "$src/c/g"
fi
for bs in 1024 4096; do
	for o in "quota" "quota,project" "quota -E quotatype=usrquota:prjquota"; do
		CASE="uext4 mkfs -b $bs -O $o"
		# shellcheck disable=SC2086
		"$UEXT4" mkfs -q -b $bs -O ^orphan_file,^metadata_csum_seed,$o "$T/u.img" 64M ||
			{ bad "uext4 mkfs failed"; continue; }
		# shellcheck disable=SC2086
		mke2fs -q -F -t ext4 -b $bs -O $o "$T/k.img" 64M > /dev/null 2>&1 || fail "mke2fs -O $o"
		diff <(hdr "$T/u.img") <(hdr "$T/k.img") > "$T/hdiff" ||
			{ cat "$T/hdiff"; bad "dumpe2fs -h differs from mke2fs's"; }
		check "$T/u.img" "uext4 mkfs"
		diff <(theirs user "$T/u.img") <(theirs user "$T/k.img") > /dev/null ||
			bad "user quota listing differs from mke2fs's"
		rm -f "$T/u.img" "$T/k.img"
	done
	CASE="uext4 mkfs -b $bs -O quota,project, CLI steps"
	"$UEXT4" mkfs -q -b $bs -O quota,project "$T/u.img" 64M || bad "uext4 mkfs"
	cli_steps "$T/u.img"
	project_steps "$T/u.img"
	rm -f "$T/u.img"
	CASE="uext4 mkfs -b $bs -O quota,project -d"
	"$UEXT4" mkfs -q -b $bs -O quota,project -d "$src" "$T/d.img" 64M > /dev/null 2>&1 ||
		bad "uext4 mkfs -d"
	check "$T/d.img" "mkfs -d"
	if [ "$(id -u)" = 0 ]; then
		theirs user "$T/d.img" | grep -q '^1234 ' || bad "mkfs -d: no entry for uid 1234"
		theirs group "$T/d.img" | grep -q '^8765 ' || bad "mkfs -d: no entry for gid 8765"
	fi
	same_listing "$T/d.img" "mkfs -d"
	rm -f "$T/d.img"
done

CASE="FUSE"
if [ "$(id -u)" = 0 ] && need_fuse_ok=$( [ -c /dev/fuse ] && echo 1 ) && [ -n "$need_fuse_ok" ] &&
	command -v setpriv > /dev/null; then
	img=$T/fuse.img mnt=$T/mnt
	mkdir -p "$mnt"
	chmod 755 "$T"
	mke2fs -q -F -t ext4 -O quota,project "$img" 64M || fail "mke2fs"
	"$UEXT4" mount -o allow_other "$img" "$mnt" > "$T/mount.log" 2>&1 ||
		{ cat "$T/mount.log"; fail "uext4 mount"; }
	MOUNTS+=("$mnt")
	mkdir "$mnt/shared" && chmod 1777 "$mnt/shared"
	for u in 3001 3002 3003; do
		setpriv --reuid=$u --regid=$((u + 100)) --clear-groups sh -c "
			mkdir '$mnt/shared/$u' && head -c $((u * 37)) /dev/urandom > '$mnt/shared/$u/f' &&
			head -c 200000 /dev/urandom > '$mnt/shared/$u/g' &&
			truncate -s 5000 '$mnt/shared/$u/g' && ln -s f '$mnt/shared/$u/l' &&
			rm '$mnt/shared/$u/f'" || bad "user $u's steps on the mount"
	done
	chown 4000:4100 "$mnt/shared/3001/g" || bad "chown on the mount"
	head -c 100000 /dev/urandom > "$mnt/root-file"
	umount_uext4 "$mnt"
	check "$img" "writes by three users, chown, truncate, unlink on the FUSE mount"
	for u in 3001 3002 3003 4000; do
		theirs user "$img" | grep -q "^$u " || bad "user $u has no quota entry after the mount"
	done
	same_listing "$img" "after the FUSE mount"
else
	echo "FUSE part skipped: needs root, /dev/fuse and setpriv"
fi

[ "$FAILS" = 0 ] || fail "$FAILS checks failed (seed $SEED)"
echo "ok: quota usage exact after CLI, project, model and FUSE workloads (seed $SEED)"
