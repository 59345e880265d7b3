/*
 * unit_file.c - file data reads (file.c, extents.c, indirect.c, inline.c)
 * checked against the source files of images built with mke2fs -d.
 *
 * Images: ext4 4 KiB (metadata_csum, extents; contiguous, sparse 5 GiB,
 * fragmented files with depth-2 extent trees, unwritten extents made with
 * debugfs fallocate), ext4 1 KiB (depth-2 trees on small blocks), ext3-style
 * block maps on 1 KiB blocks (double and triple indirect, sparse 5 GiB)
 * and inline_data.  Inode numbers come from debugfs, so this test does not
 * depend on the directory code.  Every file is read with file_pread() in
 * random chunk sizes at random offsets (seed printed; UEXT4_SEED=n to
 * replay) and compared with the source bytes.  Corrupted extent trees and
 * block maps must give -EUCLEAN with a message naming the inode.
 */
/* run-in: release asan tsan */
#include "blockdev.h"
#include "data.h"
#include "file.h"
#include "icache.h"
#include "inode.h"
#include "internal.h"
#include "ondisk.h"
#include "mount.h"
#include "uext4.h"
#include "t.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static char tmpdir[256];

static _Thread_local uint64_t rng;
static uint64_t rnd(void) { return t_rnd(&rng); }
static uint64_t rnd_below(uint64_t n) { return t_rnd_below(&rng, n); }

static void die(const char *what)
{
	fprintf(stderr, "FAIL: %s\n", what);
	exit(1);
}

/* ------------------------------------------------------------ source trees */
static void fill_random(uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(rnd() >> 24);
}

static void write_at(const char *path, uint64_t off, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT, 0644);
	uint8_t *p = malloc(len ? len : 1);

	if (fd < 0 || !p)
		die("create source file");
	fill_random(p, len);
	if (pwrite(fd, p, len, (off_t)off) != (ssize_t)len)
		die("write source file");
	close(fd);
	free(p);
}

static void set_size(const char *path, uint64_t size)
{
	if (truncate(path, (off_t)size))
		die("truncate source file");
}

/* nfrag data blocks of bs bytes, each followed by a one-block hole. */
static void write_fragmented(const char *path, unsigned nfrag, unsigned bs)
{
	for (unsigned i = 0; i < nfrag; i++)
		write_at(path, (uint64_t)i * 2 * bs, bs);
	set_size(path, (uint64_t)nfrag * 2 * bs - bs / 2);
}

static void src_path(char *out, size_t n, const char *tree, const char *name)
{
	snprintf(out, n, "%s/%s/%s", tmpdir, tree, name);
}

/* ------------------------------------------------------------ image access */
static uint64_t ino_of(const char *img, const char *name)
{
	char cmd[1024], line[512];
	unsigned long ino = 0;
	FILE *p;

	snprintf(cmd, sizeof(cmd), "debugfs -R 'stat /%s' %s 2>/dev/null", name, img);
	p = popen(cmd, "r");
	if (!p)
		die("popen debugfs");
	while (fgets(line, sizeof(line), p))
		if (sscanf(line, "Inode: %lu", &ino) == 1)
			break;
	while (fgets(line, sizeof(line), p))
		;
	pclose(p);
	return ino;
}

/* Counts device reads, to check one pread per contiguous run. */
static const struct bdev_ops *orig_ops;
static struct bdev_ops counting_ops;
static _Atomic uint64_t dev_reads;
static int counting_read(struct bdev *d, void *buf, size_t len, uint64_t off)
{
	atomic_fetch_add(&dev_reads, 1);
	return orig_ops->read(d, buf, len, off);
}

static struct uext4_fs *mount_img(const char *img)
{
	struct uext4_opts o = { .read_only = 1 };
	struct uext4_fs *fs = NULL;
	int err = super_mount(img, &o, &fs);

	if (err) {
		fprintf(stderr, "FAIL: mount %s: %d %s\n", img, err, uext4_last_error());
		exit(1);
	}
	orig_ops = fs->dev->ops;
	counting_ops = *orig_ops;
	counting_ops.read = counting_read;
	fs->dev->ops = &counting_ops;
	return fs;
}

/* ------------------------------------------------------------ comparisons */
/* One read of [off, off+len) through file_pread against the source. */
static void compare_range(struct uext4_fs *fs, struct inode *in, int sfd, const char *name,
			  uint64_t off, size_t len, uint8_t *got, uint8_t *want)
{
	ssize_t w = pread(sfd, want, len, (off_t)off);
	ssize_t g;

	memset(got, 0xA5, len);
	g = file_pread(fs, in, got, len, off);
	if (w < 0)
		die("pread source");
	CHECK_ERR(g == w, "%s: read %zu at %llu returned %zd, want %zd", name, len,
	      (unsigned long long)off, g, w);
	if (g == w && w > 0 && memcmp(got, want, (size_t)w) != 0) {
		size_t i = 0;

		while (got[i] == want[i])
			i++;
		CHECK_ERR(0, "%s: data differs at byte %llu (read %zu at %llu)", name,
		      (unsigned long long)(off + i), len, (unsigned long long)off);
	}
}

static size_t random_len(unsigned bs, size_t max)
{
	switch (rnd_below(4)) {
	case 0: return 1 + rnd_below(bs);
	case 1: return 1 + rnd_below(3 * (size_t)bs);
	case 2: return 1 + rnd_below(64 * 1024);
	default: return 1 + rnd_below(max);
	}
}

#define MAXCHUNK (1024 * 1024 + 4096)

/*
 * Compare a whole file: size, a sequential read in random chunks (files
 * up to 64 MiB), then random reads anywhere and near the hot offsets.
 */
static void compare_file(struct uext4_fs *fs, const char *img, const char *tree,
			 const char *name, const uint64_t *hot, unsigned nhot)
{
	char path[512];
	uint8_t *got = malloc(MAXCHUNK), *want = malloc(MAXCHUNK);
	uint64_t ino = ino_of(img, name);
	struct inode *in = NULL;
	struct stat st;
	int sfd, err;

	src_path(path, sizeof(path), tree, name);
	sfd = open(path, O_RDONLY);
	if (sfd < 0 || fstat(sfd, &st) || !got || !want)
		die("open source file");
	CHECK_ERR(ino != 0, "%s: no inode in %s", name, img);
	err = ino ? iget(fs, ino, &in) : -ENOENT;
	CHECK_ERR(err == 0, "%s: iget(%llu) = %d", name, (unsigned long long)ino, err);
	if (err) {
		close(sfd);
		free(got);
		free(want);
		return;
	}
	CHECK_ERR(in->size == (uint64_t)st.st_size, "%s: size %llu, source %lld", name,
	      (unsigned long long)in->size, (long long)st.st_size);
	if (st.st_size <= 64 << 20) {
		for (uint64_t off = 0; off <= (uint64_t)st.st_size;) {
			size_t len = random_len(fs->block_size, MAXCHUNK);

			compare_range(fs, in, sfd, name, off, len, got, want);
			off += len;
		}
	}
	for (int i = 0; i < 300; i++) {
		uint64_t base = (i & 1 && nhot) ? hot[rnd_below(nhot)] : rnd_below((uint64_t)st.st_size + 1);
		int64_t jitter = (int64_t)rnd_below(4 * fs->block_size) - 2 * (int64_t)fs->block_size;
		uint64_t off = (int64_t)base + jitter < 0 ? 0 : (uint64_t)((int64_t)base + jitter);

		compare_range(fs, in, sfd, name, off, random_len(fs->block_size, MAXCHUNK), got, want);
	}
	/* At and past the end. */
	compare_range(fs, in, sfd, name, (uint64_t)st.st_size, 10, got, want);
	compare_range(fs, in, sfd, name, (uint64_t)st.st_size + 12345, 10, got, want);
	if (st.st_size > 0)
		compare_range(fs, in, sfd, name, (uint64_t)st.st_size - 1, 4096, got, want);
	printf("  %-12s %12lld bytes  ino %-4llu flags %08x  ok so far (%d failures)\n", name,
	       (long long)st.st_size, (unsigned long long)ino, in->flags, atomic_load(&t_failures));
	iput(fs, in);
	close(sfd);
	free(got);
	free(want);
}

static struct inode *get_inode(struct uext4_fs *fs, const char *img, const char *name)
{
	struct inode *in = NULL;
	uint64_t ino = ino_of(img, name);
	int err = ino ? iget(fs, ino, &in) : -ENOENT;

	CHECK_ERR(err == 0, "%s: iget = %d", name, err);
	return err ? NULL : in;
}

static int extent_depth(const struct inode *in)
{
	const struct ext4_extent_header *h = (const void *)inode_raw(in)->i_block;

	return le16(h->eh_depth);
}

/*
 * A file written by write_fragmented(): every even block is a one-block
 * extent, every odd block a one-block hole, also across leaf boundaries
 * (where the hole's end comes from the parent index).
 */
static void check_fragment_map(struct uext4_fs *fs, struct inode *in, unsigned nfrag)
{
	struct block_map m;
	int bad = 0;

	for (uint64_t l = 0; l < 2ull * nfrag + 3 && bad < 5; l++) {
		int err = inode_map(fs, in, l, 1000, &m);
		bool data = l < 2ull * nfrag && !(l & 1);
		/* Past the last extent: any hole length (block maps stop at the
		 * end of an indirect block). */
		bool tail = l >= 2ull * nfrag - 1;

		if (err || (m.pblk != 0) != data || m.unwritten ||
		    (tail ? m.len < 1 || m.len > 1000 : m.len != 1)) {
			CHECK_ERR(0, "fragmented inode %llu: block %llu maps to pblk %llu len %llu (err %d)",
			      (unsigned long long)in->ino, (unsigned long long)l,
			      (unsigned long long)m.pblk, (unsigned long long)m.len, err);
			bad++;
		}
	}
}

/* ------------------------------------------------------------ the images */
/* mke2fs -d of tmpdir/tree: the test cannot go on without it. */
static void make_tree_image(const char *img, const char *tree, const char *opts, const char *size)
{
	char all[1024];

	snprintf(all, sizeof(all), "%s -d %s/%s", opts, tmpdir, tree);
	if (t_make_image(img, size, all) != 0)
		exit(1);
}

#define GiB (1024ull * 1024 * 1024)
#define MiB (1024ull * 1024)

/* Several threads reading the same files at once (run under TSan too). */
struct reader_arg {
	struct uext4_fs *fs;
	const char *img;
	uint64_t seed;
};

static void *reader_thread(void *p)
{
	struct reader_arg *a = p;
	static const char *const names[] = { "frag", "sparse", "contig" };
	static const uint64_t hot[] = { 0, 1 * MiB, 100 * MiB, 4 * GiB };

	rng = a->seed;
	for (int i = 0; i < 3; i++)
		compare_file(a->fs, a->img, "t4k", names[(a->seed + (uint64_t)i) % 3], hot, 4);
	return NULL;
}

static void test_concurrent_readers(struct uext4_fs *fs, const char *img)
{
	struct reader_arg args[4];
	pthread_t t[4];

	printf("  4 threads reading frag, sparse and contig at once\n");
	for (int i = 0; i < 4; i++) {
		args[i] = (struct reader_arg){ fs, img, rnd() | 1 };
		if (pthread_create(&t[i], NULL, reader_thread, &args[i]))
			die("pthread_create");
	}
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
}

/* Extent-mapped files on 4 KiB blocks, plus unwritten extents. */
static void test_ext4_4k(void)
{
	char img[512], p[512];
	const uint64_t sparse_hot[] = { 0, 1 * MiB, 100 * MiB, 4 * GiB - 4096, 4 * GiB + 3 * MiB,
					5 * GiB - 5000 };
	struct uext4_fs *fs;
	struct inode *in;
	struct block_map m;

	printf("ext4, 4 KiB blocks, metadata_csum, extents\n");
	t_sh("mkdir -p %s/t4k", tmpdir);
	src_path(p, sizeof(p), "t4k", "empty"), write_at(p, 0, 0);
	src_path(p, sizeof(p), "t4k", "small"), write_at(p, 0, 10);
	src_path(p, sizeof(p), "t4k", "medium"), write_at(p, 0, 100000);
	src_path(p, sizeof(p), "t4k", "contig"), write_at(p, 0, 6 * MiB + 123);
	src_path(p, sizeof(p), "t4k", "sparse");
	for (unsigned i = 0; i < sizeof(sparse_hot) / sizeof(sparse_hot[0]); i++)
		write_at(p, sparse_hot[i], 3000 + (size_t)i * 5000);
	set_size(p, 5 * GiB);
	src_path(p, sizeof(p), "t4k", "frag"), write_fragmented(p, 1500, 4096);
	src_path(p, sizeof(p), "t4k", "unw"), write_at(p, 0, 4 * 4096);
	snprintf(img, sizeof(img), "%s/t4k.img", tmpdir);
	make_tree_image(img, "t4k", "-t ext4 -b 4096 -O metadata_csum", "64M");
	/* Unwritten extents after the data: blocks 4..39, size 40 blocks. */
	t_sh("debugfs -w -R 'fallocate /unw 4 39' %s >/dev/null 2>&1", img);
	t_sh("debugfs -w -R 'sif /unw size %u' %s >/dev/null 2>&1", 40 * 4096, img);
	src_path(p, sizeof(p), "t4k", "unw"), set_size(p, 40 * 4096);
	t_fsck_clean(img);

	fs = mount_img(img);
	compare_file(fs, img, "t4k", "empty", NULL, 0);
	compare_file(fs, img, "t4k", "small", NULL, 0);
	compare_file(fs, img, "t4k", "medium", NULL, 0);
	compare_file(fs, img, "t4k", "contig", NULL, 0);
	compare_file(fs, img, "t4k", "sparse", sparse_hot, sizeof(sparse_hot) / sizeof(sparse_hot[0]));
	compare_file(fs, img, "t4k", "frag", NULL, 0);
	compare_file(fs, img, "t4k", "unw", NULL, 0);

	if ((in = get_inode(fs, img, "frag"))) {
		printf("  frag: extent tree depth %d\n", extent_depth(in));
		CHECK_ERR(extent_depth(in) >= 1, "frag: want an extent tree of depth >= 1");
		check_fragment_map(fs, in, 1500);
		CHECK_ERR(inode_map(fs, in, 1, 10, &m) == 0 && m.pblk == 0 && m.len == 1,
		      "frag: block 1 should be a one-block hole (pblk %llu len %llu)",
		      (unsigned long long)m.pblk, (unsigned long long)m.len);
		iput(fs, in);
	}
	if ((in = get_inode(fs, img, "unw"))) {
		int err = inode_map(fs, in, 10, 100, &m);

		CHECK_ERR(err == 0 && m.pblk != 0 && m.unwritten && m.len == 30,
		      "unw: block 10 should be unwritten for 30 blocks (err %d unwritten %d len %llu)",
		      err, m.unwritten, (unsigned long long)m.len);
		iput(fs, in);
	}
	if ((in = get_inode(fs, img, "sparse"))) {
		int err = inode_map(fs, in, 1000, 1u << 20, &m);

		CHECK_ERR(err == 0 && m.pblk == 0 && m.len == 100 * MiB / 4096 - 1000,
		      "sparse: hole at block 1000 should end at the next extent (len %llu)",
		      (unsigned long long)m.len);
		iput(fs, in);
	}
	test_concurrent_readers(fs, img);
	/* A 1 MiB aligned read of a contiguous file is one device read. */
	if ((in = get_inode(fs, img, "contig"))) {
		uint8_t *buf = malloc(MiB);
		uint64_t before;
		ssize_t n;

		if (inode_map(fs, in, 0, 256, &m) == 0 && m.len == 256 && buf) {
			/* Load the inode's metadata first so only data reads count. */
			file_pread(fs, in, buf, 1, 0);
			before = atomic_load(&dev_reads);
			n = file_pread(fs, in, buf, MiB, MiB);
			CHECK_ERR(n == (ssize_t)MiB, "contig: 1 MiB read returned %zd", n);
			CHECK_ERR(atomic_load(&dev_reads) - before == 1,
			      "contig: 1 MiB read took %llu device reads, want 1",
			      (unsigned long long)(atomic_load(&dev_reads) - before));
			printf("  contig: 1 MiB read = %llu device read(s)\n",
			       (unsigned long long)(atomic_load(&dev_reads) - before));
		} else {
			printf("  contig: first 256 blocks not contiguous; pread-count check skipped\n");
		}
		free(buf);
		iput(fs, in);
	}
	super_umount(fs);
}

/* Extent trees of depth 2 on 1 KiB blocks (84 extents per leaf). */
static void test_ext4_1k(void)
{
	char img[512], p[512];
	struct uext4_fs *fs;
	struct inode *in;

	printf("ext4, 1 KiB blocks\n");
	t_sh("mkdir -p %s/t1k", tmpdir);
	src_path(p, sizeof(p), "t1k", "frag"), write_fragmented(p, 500, 1024);
	src_path(p, sizeof(p), "t1k", "odd"), write_at(p, 0, 3 * 1024 + 17);
	src_path(p, sizeof(p), "t1k", "big"), write_at(p, 0, 3 * MiB + 999);
	snprintf(img, sizeof(img), "%s/t1k.img", tmpdir);
	make_tree_image(img, "t1k", "-t ext4 -b 1024", "32M");
	t_fsck_clean(img);
	fs = mount_img(img);
	compare_file(fs, img, "t1k", "frag", NULL, 0);
	compare_file(fs, img, "t1k", "odd", NULL, 0);
	compare_file(fs, img, "t1k", "big", NULL, 0);
	if ((in = get_inode(fs, img, "frag"))) {
		printf("  frag: extent tree depth %d\n", extent_depth(in));
		CHECK_ERR(extent_depth(in) == 2, "frag on 1 KiB blocks: want depth 2, got %d",
		      extent_depth(in));
		check_fragment_map(fs, in, 500);
		iput(fs, in);
	}
	super_umount(fs);
}

/*
 * Block maps on 1 KiB blocks: 12 direct, 256 single, 65536 double,
 * 16M triple blocks.  A 66 MiB file needs the triple indirect block;
 * the sparse 5 GiB file touches all levels with holes everywhere.
 */
static void test_blockmap_1k(void)
{
	char img[512], p[512];
	const uint64_t sparse_hot[] = { 0, 12 * 1024, 268 * 1024, 65 * MiB, 66 * MiB + 1,
					3 * GiB, 5 * GiB - 2000 };
	struct uext4_fs *fs;
	struct inode *in;

	printf("block-mapped files (ext3 style), 1 KiB blocks\n");
	t_sh("mkdir -p %s/tbm", tmpdir);
	src_path(p, sizeof(p), "tbm", "small"), write_at(p, 0, 5000);
	src_path(p, sizeof(p), "tbm", "big"), write_at(p, 0, 66 * MiB + 77);
	src_path(p, sizeof(p), "tbm", "sparse");
	for (unsigned i = 0; i < sizeof(sparse_hot) / sizeof(sparse_hot[0]); i++)
		write_at(p, sparse_hot[i], 1000 + (size_t)i * 3000);
	set_size(p, 5 * GiB);
	src_path(p, sizeof(p), "tbm", "frag"), write_fragmented(p, 400, 1024);
	snprintf(img, sizeof(img), "%s/tbm.img", tmpdir);
	make_tree_image(img, "tbm", "-t ext3 -b 1024 -O ^metadata_csum", "96M");
	t_fsck_clean(img);
	fs = mount_img(img);
	compare_file(fs, img, "tbm", "small", NULL, 0);
	compare_file(fs, img, "tbm", "big", NULL, 0);
	compare_file(fs, img, "tbm", "sparse", sparse_hot, sizeof(sparse_hot) / sizeof(sparse_hot[0]));
	compare_file(fs, img, "tbm", "frag", NULL, 0);
	if ((in = get_inode(fs, img, "big"))) {
		CHECK_ERR(!(in->flags & EXT4_EXTENTS_FL), "big: expected a block-mapped file");
		CHECK_ERR(le32(inode_raw(in)->i_block[EXT4_TIND_BLOCK]) != 0,
		      "big: expected a triple indirect block");
		iput(fs, in);
	}
	if ((in = get_inode(fs, img, "frag"))) {
		check_fragment_map(fs, in, 400);
		iput(fs, in);
	}
	super_umount(fs);
}

/* Inline data: i_block (60 bytes) plus the system.data xattr. */
static void test_inline(void)
{
	static const size_t sizes[] = { 1, 30, 59, 60, 61, 100, 140, 300, 5000 };
	char img[512], p[512], name[32];
	struct uext4_fs *fs;
	int ninline = 0;

	printf("inline_data, 256-byte inodes\n");
	t_sh("mkdir -p %s/tin", tmpdir);
	for (unsigned i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		snprintf(name, sizeof(name), "f%zu", sizes[i]);
		src_path(p, sizeof(p), "tin", name), write_at(p, 0, sizes[i]);
	}
	snprintf(img, sizeof(img), "%s/tin.img", tmpdir);
	make_tree_image(img, "tin", "-t ext4 -I 256 -O inline_data", "8M");
	t_fsck_clean(img);
	fs = mount_img(img);
	for (unsigned i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		struct inode *in;

		snprintf(name, sizeof(name), "f%zu", sizes[i]);
		compare_file(fs, img, "tin", name, NULL, 0);
		if ((in = get_inode(fs, img, name))) {
			if (in->flags & EXT4_INLINE_DATA_FL) {
				size_t isz = 0;
				struct block_map m;

				ninline++;
				CHECK_ERR(inline_size(fs, in, &isz) == 0 && isz >= sizes[i],
				      "%s: inline size %zu < file size", name, isz);
				CHECK_ERR(inode_map(fs, in, 0, 1, &m) == -EINVAL,
				      "%s: inode_map of inline data should be -EINVAL", name);
			}
			iput(fs, in);
		}
	}
	printf("  %d of the files are inline\n", ninline);
	CHECK_ERR(ninline >= 4, "expected at least 4 inline files, got %d", ninline);
	super_umount(fs);

	/* i_size past the inline data: the rest reads as zeros (as the kernel). */
	{
		char big[600];
		uint8_t got[300], want[300];
		struct inode *in;
		int sfd;

		snprintf(big, sizeof(big), "%s/tin_big.img", tmpdir);
		t_sh("cp %s %s && debugfs -w -R 'sif /f100 size 250' %s >/dev/null 2>&1", img, big, big);
		fs = mount_img(big);
		src_path(p, sizeof(p), "tin", "f100");
		sfd = open(p, O_RDONLY);
		if (sfd < 0 || pread(sfd, want, 100, 0) != 100)
			die("read f100");
		close(sfd);
		memset(want + 100, 0, 150);
		if ((in = get_inode(fs, big, "f100"))) {
			ssize_t n = file_pread(fs, in, got, sizeof(got), 0);

			CHECK_ERR(n == 250 && memcmp(got, want, 250) == 0,
			      "f100 with i_size 250: read %zd bytes, want data then zeros", n);
			n = file_pread(fs, in, got, 20, 230);
			CHECK_ERR(n == 20 && memcmp(got, want + 230, 20) == 0,
			      "f100 with i_size 250: tail read %zd", n);
			printf("  i_size past the inline data reads as zeros: %s\n",
			       n == 20 ? "ok" : "FAILED");
			iput(fs, in);
		}
		super_umount(fs);
	}
}

/* ------------------------------------------------------------ corruption */
static void patch_le32(const char *img, uint64_t off, uint32_t v)
{
	int fd = open(img, O_WRONLY);
	uint32_t le = cpu_to_le32(v);

	if (fd < 0 || pwrite(fd, &le, 4, (off_t)off) != 4)
		die("patch image");
	close(fd);
}

static void expect_corrupt(const char *img, const char *name, const char *what)
{
	struct uext4_fs *fs = mount_img(img);
	struct inode *in = get_inode(fs, img, name);
	static uint8_t buf[64 * 1024];
	ssize_t n = -1;

	if (in) {
		for (uint64_t off = 0; off < in->size; off += sizeof(buf)) {
			n = file_pread(fs, in, buf, sizeof(buf), off);
			if (n < 0)
				break;
		}
		CHECK_ERR(n == -EUCLEAN, "%s: reading %s gave %zd, want -EUCLEAN", name, what, n);
		CHECK_ERR(strstr(uext4_last_error(), "inode") != NULL,
		      "%s: message should name the inode: %s", name, uext4_last_error());
		printf("  %s: %s\n", what, uext4_last_error());
		iput(fs, in);
	}
	super_umount(fs);
}

/* A region of an image to flip bytes in. */
struct fuzz_area {
	uint64_t off, len;
};

/*
 * Flip random bytes in the mapping metadata of one file, then read all of
 * it: any result is fine except a crash, a hang or a sanitizer report.
 */
static void fuzz_file(const char *img, const char *name, const struct fuzz_area *areas,
		      unsigned nareas, int iters)
{
	char bad[600];
	static uint8_t buf[256 * 1024];
	int nerr = 0;
	uint64_t ino = ino_of(img, name);

	snprintf(bad, sizeof(bad), "%s/fuzz.img", tmpdir);
	t_sh("cp %s %s", img, bad);
	for (int it = 0; it < iters; it++) {
		struct uext4_fs *fs;
		struct inode *in = NULL;
		uint64_t where[4];
		uint8_t saved[4];
		int fd, k, nflip = 1 + (int)rnd_below(4);

		/* Damage a few bytes in place; they are restored after the read. */
		fd = open(bad, O_RDWR);
		if (fd < 0)
			die("open fuzz image");
		for (k = 0; k < nflip; k++) {
			const struct fuzz_area *a = &areas[rnd_below(nareas)];
			uint8_t v = (uint8_t)rnd();

			where[k] = a->off + rnd_below(a->len);
			if (pread(fd, &saved[k], 1, (off_t)where[k]) != 1 ||
			    pwrite(fd, &v, 1, (off_t)where[k]) != 1)
				die("patch fuzz image");
		}
		fs = mount_img(bad);
		if (iget(fs, ino, &in) == 0) {
			/* Big sparse files: 128 samples spread over every subtree. */
			uint64_t step = in->size > 256 * MiB ? in->size / 128 : sizeof(buf);

			for (uint64_t off = 0; off < in->size; off += step) {
				ssize_t n = file_pread(fs, in, buf, sizeof(buf), off);

				if (n < 0) {
					nerr++;
					break;
				}
			}
			iput(fs, in);
		}
		super_umount(fs);
		for (k = nflip - 1; k >= 0; k--)
			if (pwrite(fd, &saved[k], 1, (off_t)where[k]) != 1)
				die("restore fuzz image");
		close(fd);
	}
	printf("  fuzzed %s %d times: %d reads reported corruption, no crash\n", name, iters, nerr);
}

static void test_fuzz(void)
{
	char img[512];
	struct fuzz_area areas[4];
	unsigned n = 0;
	struct uext4_fs *fs;
	struct inode *in;
	uint64_t blk;
	uint32_t off;
	const uint32_t bs = 1024;

	printf("random damage to extent trees and block maps (no checksums)\n");
	snprintf(img, sizeof(img), "%s/tnc.img", tmpdir);
	fs = mount_img(img);
	if ((in = get_inode(fs, img, "frag"))) {
		const struct ext4_extent_idx *ix =
			(const void *)((const uint8_t *)inode_raw(in)->i_block + 12);
		if (inode_location(fs, in->ino, &blk, &off) == 0)
			areas[n++] = (struct fuzz_area){ blk * bs + off + 0x28, 60 };
		blk = ((uint64_t)le16(ix->ei_leaf_hi) << 32) | le32(ix->ei_leaf_lo);
		areas[n++] = (struct fuzz_area){ blk * bs, bs };
		iput(fs, in);
	}
	super_umount(fs);
	fuzz_file(img, "frag", areas, n, 60);

	n = 0;
	snprintf(img, sizeof(img), "%s/tbm.img", tmpdir);
	fs = mount_img(img);
	if ((in = get_inode(fs, img, "sparse"))) {
		if (inode_location(fs, in->ino, &blk, &off) == 0)
			areas[n++] = (struct fuzz_area){ blk * bs + off + 0x28, 60 };
		for (int i = EXT4_IND_BLOCK; i <= EXT4_TIND_BLOCK; i++)
			if ((blk = le32(inode_raw(in)->i_block[i])))
				areas[n++] = (struct fuzz_area){ blk * bs, bs };
		iput(fs, in);
	}
	super_umount(fs);
	fuzz_file(img, "sparse", areas, n, 30);
}

static void test_corruption(void)
{
	char img[512], bad[600];
	struct uext4_fs *fs;
	struct inode *in;
	uint64_t leaf = 0, ind = 0;
	uint32_t bs = 1024;

	printf("corrupt extent trees and block maps\n");
	snprintf(img, sizeof(img), "%s/t1k.img", tmpdir);
	fs = mount_img(img);
	if ((in = get_inode(fs, img, "frag"))) {
		const struct ext4_extent_idx *ix =
			(const void *)((const uint8_t *)inode_raw(in)->i_block + 12);

		leaf = ((uint64_t)le16(ix->ei_leaf_hi) << 32) | le32(ix->ei_leaf_lo);
		iput(fs, in);
	}
	super_umount(fs);
	snprintf(bad, sizeof(bad), "%s/bad_magic.img", tmpdir);
	t_sh("cp %s %s", img, bad);
	patch_le32(bad, leaf * bs, 0x1234);  /* magic and eh_entries */
	expect_corrupt(bad, "frag", "bad extent block magic");

	/* Without metadata_csum the structural checks must catch it. */
	snprintf(img, sizeof(img), "%s/tbm.img", tmpdir);
	fs = mount_img(img);
	if ((in = get_inode(fs, img, "big"))) {
		ind = le32(inode_raw(in)->i_block[EXT4_IND_BLOCK]);
		iput(fs, in);
	}
	super_umount(fs);
	snprintf(bad, sizeof(bad), "%s/bad_ind.img", tmpdir);
	t_sh("cp %s %s", img, bad);
	patch_le32(bad, ind * bs + 8, 0xFFFFFFF0u);
	expect_corrupt(bad, "big", "indirect pointer past the end");

	/* An extent pointing past the end, on an image without checksums. */
	t_sh("mkdir -p %s/tnc && cp %s/t1k/frag %s/tnc/frag", tmpdir, tmpdir, tmpdir);
	snprintf(img, sizeof(img), "%s/tnc.img", tmpdir);
	make_tree_image(img, "tnc", "-t ext4 -b 1024 -O ^metadata_csum", "8M");
	fs = mount_img(img);
	leaf = 0;
	if ((in = get_inode(fs, img, "frag"))) {
		const struct ext4_extent_idx *ix =
			(const void *)((const uint8_t *)inode_raw(in)->i_block + 12);

		leaf = ((uint64_t)le16(ix->ei_leaf_hi) << 32) | le32(ix->ei_leaf_lo);
		iput(fs, in);
	}
	super_umount(fs);
	if (leaf) {
		/* Is it a leaf (depth 2 trees: the child of the root is an index)? */
		snprintf(bad, sizeof(bad), "%s/bad_ext.img", tmpdir);
		t_sh("cp %s %s", img, bad);
		/* Entry 1 of the node: its start_lo (leaf) or leaf_lo (index) field. */
		patch_le32(bad, leaf * bs + 12 + 12 + 8, 0x7FFFFFF0u);
		patch_le32(bad, leaf * bs + 12 + 12 + 4, 0x7FFFFFF0u);
		expect_corrupt(bad, "frag", "extent/index pointing past the end");
	}
}

int main(void)
{
	t_need_tools("mke2fs debugfs");
	setvbuf(stdout, NULL, _IOLBF, 0);
	rng = t_seed("unit_file", "UEXT4_SEED");
	t_tmpdir(tmpdir, sizeof(tmpdir), "unit_file");
	test_ext4_4k();
	test_ext4_1k();
	test_blockmap_1k();
	test_inline();
	test_corruption();
	test_fuzz();
	if (!getenv("UEXT4_KEEP"))
		t_sh("rm -rf %s", tmpdir);
	else
		printf("kept %s\n", tmpdir);
	printf(t_failures ? "unit_file: FAIL (%d)\n" : "unit_file: PASS\n", atomic_load(&t_failures));
	return t_failures ? 1 : 0;
}
