#!/bin/bash
# fuzz/mkcorpus.sh DIR - the seed corpora of the fuzz harnesses, generated
# (not committed): DIR/fuzz_mount and DIR/fuzz_write get small images
# (1-4 MiB) of the kinds the tests use (ext2/3/4, 1k and 4k blocks,
# metadata_csum or not, htree, inline data, xattr blocks, symlinks, sparse
# files).  The hostile builders of tests/images make 8 MiB images: too big
# to keep a growing corpus under libFuzzer's -rss_limit_mb=1024, so they
# are left out (tests/sweep.sh covers them);
# DIR/fuzz_recovery images with a dirty journal (debugfs jo/jw/jc);
# DIR/fuzz_mkfs_tar tiny tarballs.
set -u
out=${1:?usage: mkcorpus.sh DIR}
here=$(cd "$(dirname "$0")/.." && pwd)
for t in mke2fs debugfs tar; do
	command -v $t > /dev/null || { echo "mkcorpus: no $t" >&2; exit 77; }
done
mkdir -p "$out"/{fuzz_mount,fuzz_write,fuzz_recovery,fuzz_mkfs_tar}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# A tree for debugfs to write: the names fuzz/fuzz_write.c's script uses.
head -c 3000 /dev/urandom > "$tmp/data"
head -c 70000 /dev/urandom > "$tmp/big"
populate() { # IMG
	{
		echo "write $tmp/data file"
		echo "write $tmp/big bigfile"
		echo "mkdir dir"
		echo "mkdir empty"
		echo "symlink link file"
		echo "symlink longlink /$(printf 'x%.0s' {1..90})/target"
		echo "write $tmp/data dir/inner"
		echo "cd dir"; echo "mknod fifo p"; echo "cd /"
		echo "ea_set file user.a hello"
		echo "ea_set file user.b $(printf 'v%.0s' {1..300})"
		echo "ea_set dir security.selinux system_u:object_r"
		echo "mkdir many"
		for i in $(seq 1 60); do echo "write $tmp/data many/name_with_some_length_$i"; done
		echo "write /dev/null sparse"
		echo "sif sparse size 5000000"
	} > "$tmp/cmds"
	debugfs -w -f "$tmp/cmds" "$1" > /dev/null 2>&1
}
mkimg() { # NAME SIZE MKE2FS-ARGS...
	local name=$1 size=$2 img="$tmp/$1.img"
	shift 2
	rm -f "$img"
	truncate -s "$size" "$img"
	mke2fs -q -F -E root_owner=0:0 "$@" "$img" > "$tmp/mke2fs.log" 2>&1 || { echo "mkcorpus: mke2fs $name failed" >&2; return; }
	populate "$img"
	cp "$img" "$out/fuzz_mount/$name.img"
	cp "$img" "$out/fuzz_write/$name.img"
}
mkimg ext4_1k_csum 2M -t ext4 -b 1024 -O metadata_csum,^resize_inode -N 256
mkimg ext4_1k_nocsum 2M -t ext4 -b 1024 -O ^metadata_csum -N 256
mkimg ext4_nojournal 1M -t ext4 -b 1024 -O ^has_journal,metadata_csum -N 64
mkimg ext4_4k 4M -t ext4 -b 4096 -J size=1 -N 128
mkimg ext4_inline 1M -t ext4 -b 1024 -O inline_data,metadata_csum,^has_journal -N 128
mkimg ext4_128 1M -t ext4 -b 1024 -I 128 -O ^has_journal -N 128
mkimg ext3 2M -t ext3 -b 1024 -N 128
mkimg ext2 1M -t ext2 -b 1024 -N 64
mkimg ext4_orphan 2M -t ext4 -b 1024 -O orphan_file,metadata_csum_seed -N 128
mkimg ext4_32bit 2M -t ext4 -b 2048 -O ^64bit,metadata_csum -N 128

# Dirty journals: transactions logged by debugfs and never checkpointed.
head -c 4096 /dev/urandom > "$tmp/blk"
dirty() { # NAME BS MKE2FS-ARGS...
	local name=$1 bs=$2 img="$tmp/$1.img"
	shift 2
	rm -f "$img"
	truncate -s 3M "$img"
	mke2fs -q -F -t ext4 -b "$bs" -J size=1 "$@" "$img" > /dev/null 2>&1 || return
	populate "$img"
	printf 'jo -c\njw -b 300,301 %s\njw -r 302\njc\njo\njw -b 310 %s\njc\n' \
		"$tmp/blk" "$tmp/blk" > "$tmp/jcmds"
	debugfs -w -f "$tmp/jcmds" "$img" > /dev/null 2>&1
	cp "$img" "$out/fuzz_recovery/$name.img"
}
dirty journal_csum 1024 -O metadata_csum -N 128
dirty journal_nocsum 1024 -O ^metadata_csum -N 128
dirty journal_4k 4096 -O metadata_csum -N 128

# Tarballs: plain, pax with xattrs, hard links, gzip.
t=$tmp/tree
mkdir -p "$t/a/b"
echo hello > "$t/a/f"
head -c 5000 /dev/urandom > "$t/a/b/g"
ln -s ../f "$t/a/b/sym"
ln "$t/a/f" "$t/a/hard"
mkfifo "$t/a/fifo"
truncate -s 100000 "$t/a/sparse"
setfattr -n user.x -v y "$t/a/f" 2> /dev/null
tar -C "$t" --format=gnu -cf "$out/fuzz_mkfs_tar/gnu.tar" a
tar -C "$t" --format=pax --xattrs -cf "$out/fuzz_mkfs_tar/pax.tar" a
tar -C "$t" --format=ustar -cf "$out/fuzz_mkfs_tar/ustar.tar" a/f a/b
tar -C "$t" --format=gnu -S -czf "$out/fuzz_mkfs_tar/sparse.tgz" a
echo "mkcorpus: $(ls "$out"/fuzz_mount | wc -l) images, $(ls "$out"/fuzz_recovery | wc -l) dirty journals, $(ls "$out"/fuzz_mkfs_tar | wc -l) tarballs in $out"
