/*
 * unit_write.c - the data write path against an in-memory model.
 *
 * On fresh mke2fs images (4 KiB ext4 with metadata_csum, 1 KiB ext4 for
 * deep extent trees, ext3 for block maps, inline_data for conversion):
 *   - random writes (sparse, extending, overwriting), truncates (shrink and
 *     grow), punch holes, fallocate (keep size, zero range) through the
 *     public API, each file compared with its model after every few ops;
 *   - extent trees forced to depth 2 and 3 (every other block written on
 *     a 1 KiB image), then punched and truncated away;
 *   - ext3 files reaching the triple-indirect block, then truncated;
 *   - symlinks (fast and slow), inline files written in place and
 *     converted, the size limits (-EFBIG);
 *   - every image is unmounted, checked with `e2fsck -fn`, remounted and
 *     compared again; as root with loop devices, mounted by the kernel
 *     read-only and compared byte for byte.
 *
 * Prints the random seed (UNIT_WRITE_SEED=n repeats a run).
 */
/* run-in: release asan tsan */
#include "icache.h"
#include "inode.h"
#include "internal.h"
#include "ondisk.h"
#include "uext4.h"
#include "t.h"

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <pthread.h>

#ifndef FALLOC_FL_KEEP_SIZE
#define FALLOC_FL_KEEP_SIZE 0x01
#define FALLOC_FL_PUNCH_HOLE 0x02
#define FALLOC_FL_COLLAPSE_RANGE 0x08
#define FALLOC_FL_ZERO_RANGE 0x10
#define FALLOC_FL_INSERT_RANGE 0x20
#endif

static _Thread_local uint64_t rng_state;
static uint64_t rnd(void) { return t_rnd(&rng_state); }
static uint64_t rnd_below(uint64_t n) { return t_rnd_below(&rng_state, n); }

static char tmpdir[128];
/* Successful operations by kind, printed per scenario (atomic: threads). */
enum { OP_WRITE, OP_TRUNC, OP_PUNCH, OP_FALLOC, OP_ZERO, OP_COLLAPSE, OP_INSERT, OP_KINDS };
static _Atomic unsigned op_count[OP_KINDS];
static bool can_kernel_mount;

/* ------------------------------------------------------------ model */

struct mfile {
	char name[32];
	uint64_t ino;
	uint8_t *data;       /* cap bytes; beyond size always zero */
	uint64_t size, cap;
	bool extents;
};

static void model_write(struct mfile *m, const uint8_t *buf, size_t len, uint64_t off)
{
	memcpy(m->data + off, buf, len);
	if (off + len > m->size)
		m->size = off + len;
}

static void model_set_size(struct mfile *m, uint64_t size)
{
	if (size < m->size)
		memset(m->data + size, 0, m->size - size);
	m->size = size;
}

static void model_zero(struct mfile *m, uint64_t off, uint64_t end)
{
	if (end > m->cap)
		end = m->cap;
	if (off < end)
		memset(m->data + off, 0, end - off);
}

/* Compare the whole file (random read sizes) and its size with the model. */
static int compare_file(uext4_fs *fs, struct mfile *m, const char *when)
{
	struct uext4_stat st;
	uext4_file *f;
	uint8_t *buf;
	uint64_t off = 0;
	int bad = 0, err;

	err = uext4_getattr(fs, m->ino, &st);
	T_CHECK(err == 0, "%s: getattr %s: %d %s", when, m->name, err, uext4_last_error());
	if (err)
		return 1;
	T_CHECK(st.size == m->size, "%s: %s size %llu, model %llu", when, m->name,
		(unsigned long long)st.size, (unsigned long long)m->size);
	if (st.size != m->size)
		return 1;
	err = uext4_open(fs, m->ino, O_RDONLY, &f);
	T_CHECK(err == 0, "%s: open %s: %d", when, m->name, err);
	if (err)
		return 1;
	buf = t_xmalloc(1 << 20);
	while (off < m->size && !bad) {
		size_t want = 1 + rnd_below(1 << 20);
		ssize_t n = uext4_pread(f, buf, want, off);

		if (n <= 0) {
			T_CHECK(n > 0, "%s: pread %s at %llu: %zd %s", when, m->name,
				(unsigned long long)off, n, uext4_last_error());
			bad = 1;
			break;
		}
		if (memcmp(buf, m->data + off, (size_t)n) != 0) {
			size_t i = 0;

			while (buf[i] == m->data[off + i])
				i++;
			T_CHECK(0, "%s: %s differs at byte %llu (got %02x, model %02x)", when,
				m->name, (unsigned long long)(off + i), buf[i], m->data[off + i]);
			bad = 1;
		}
		off += (uint64_t)n;
	}
	free(buf);
	uext4_release(f);
	return bad;
}

static int do_write(uext4_fs *fs, struct mfile *m, const uint8_t *buf, size_t len, uint64_t off)
{
	uext4_file *f;
	ssize_t n;
	int err = uext4_open(fs, m->ino, O_RDWR, &f);

	if (err) {
		T_CHECK(0, "open %s for write: %d %s", m->name, err, uext4_last_error());
		return err;
	}
	n = uext4_pwrite(f, buf, len, off);
	uext4_release(f);
	T_CHECK(n == (ssize_t)len, "pwrite %s %zu bytes at %llu: %zd %s", m->name, len,
		(unsigned long long)off, n, uext4_last_error());
	if (n == (ssize_t)len) {
		model_write(m, buf, len, off);
		op_count[OP_WRITE]++;
	}
	return n == (ssize_t)len ? 0 : -EIO;
}

static int do_truncate(uext4_fs *fs, struct mfile *m, uint64_t size)
{
	struct uext4_setattr a = { .valid = UEXT4_SET_SIZE, .size = size };
	int err = uext4_setattr(fs, m->ino, &a, NULL);

	T_CHECK(err == 0, "truncate %s to %llu: %d %s", m->name, (unsigned long long)size, err,
		uext4_last_error());
	if (!err) {
		model_set_size(m, size);
		op_count[OP_TRUNC]++;
	}
	return err;
}

static int do_fallocate(uext4_fs *fs, struct mfile *m, int mode, uint64_t off, uint64_t len)
{
	uext4_file *f;
	int err = uext4_open(fs, m->ino, O_RDWR, &f);

	if (err)
		return err;
	err = uext4_fallocate(f, mode, off, len);
	uext4_release(f);
	T_CHECK(err == 0, "fallocate %s mode %#x %llu+%llu: %d %s", m->name, mode,
		(unsigned long long)off, (unsigned long long)len, err, uext4_last_error());
	if (err)
		return err;
	op_count[(mode & FALLOC_FL_PUNCH_HOLE) ? OP_PUNCH
		 : (mode & FALLOC_FL_COLLAPSE_RANGE) ? OP_COLLAPSE
		 : (mode & FALLOC_FL_INSERT_RANGE) ? OP_INSERT
		 : (mode & FALLOC_FL_ZERO_RANGE) ? OP_ZERO : OP_FALLOC]++;
	if (mode & FALLOC_FL_PUNCH_HOLE) {
		model_zero(m, off, MIN(off + len, m->size));
	} else if (mode & FALLOC_FL_COLLAPSE_RANGE) {
		memmove(m->data + off, m->data + off + len, m->size - off - len);
		memset(m->data + m->size - len, 0, len);
		m->size -= len;
	} else if (mode & FALLOC_FL_INSERT_RANGE) {
		memmove(m->data + off + len, m->data + off, m->size - off);
		memset(m->data + off, 0, len);
		m->size += len;
	} else {
		if (mode & FALLOC_FL_ZERO_RANGE)
			model_zero(m, off, MIN(off + len, MAX(m->size, off + len)));
		if (!(mode & FALLOC_FL_KEEP_SIZE) && off + len > m->size)
			m->size = off + len;
	}
	return 0;
}

static int create_file(uext4_fs *fs, struct mfile *m, const char *name, uint64_t cap)
{
	struct uext4_stat st;
	int err = uext4_create(fs, EXT4_ROOT_INO, name, S_IFREG | 0644, &st);

	T_CHECK(err == 0, "create %s: %d %s", name, err, uext4_last_error());
	if (err)
		return err;
	snprintf(m->name, sizeof(m->name), "%s", name);
	m->ino = st.ino;
	m->cap = cap;
	m->data = calloc(1, cap);
	m->size = 0;
	m->extents = (st.flags & EXT4_EXTENTS_FL) != 0;
	if (!m->data)
		exit(T_FAIL);
	return 0;
}

/* One random operation on m (offsets below m->cap). */
static void random_op(uext4_fs *fs, struct mfile *m, uint32_t bs, uint8_t *buf)
{
	unsigned kind = (unsigned)rnd_below(100);
	uint64_t off, len;

	if (kind < 60) {
		/* Writes: tiny, block-ish, or large; anywhere, near the end, or appending. */
		unsigned shape = (unsigned)rnd_below(3);

		len = shape == 0 ? 1 + rnd_below(16)
		    : shape == 1 ? 1 + rnd_below(4 * bs) : 1 + rnd_below(64 * bs);
		switch (rnd_below(3)) {
		case 0: off = rnd_below(m->cap - len); break;
		case 1: off = m->size > 0 ? rnd_below(m->size) : 0; break;
		default: off = m->size + rnd_below(3 * bs); break;
		}
		if (rnd_below(4) == 0)
			off &= ~(uint64_t)(bs - 1);
		if (off + len > m->cap)
			off = m->cap - len;
		for (uint64_t i = 0; i < len; i++)
			buf[i] = (uint8_t)(rnd() | 1);
		do_write(fs, m, buf, (size_t)len, off);
	} else if (kind < 72) {
		uint64_t size = rnd_below(2) ? rnd_below(m->size + 1) : rnd_below(m->cap);

		if (rnd_below(3) == 0)
			size &= ~(uint64_t)(bs - 1);
		do_truncate(fs, m, size);
	} else if (kind < 86) {
		off = rnd_below(m->cap);
		len = 1 + rnd_below(MIN(m->cap - off, 40 * (uint64_t)bs));
		if (rnd_below(2))
			off &= ~(uint64_t)(bs - 1);
		do_fallocate(fs, m, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, off, len);
	} else if (m->extents && kind < 92) {
		/* Collapse or insert range: block-aligned, inside the file. */
		uint64_t nb = m->size / bs;
		bool collapse = rnd_below(2);

		if (nb < 2)
			return;
		off = rnd_below(nb - 1) * bs;
		len = (1 + rnd_below(MIN(nb - off / bs - 1, 16))) * bs;
		if (!collapse && m->size + len > m->cap)
			return;
		do_fallocate(fs, m, collapse ? FALLOC_FL_COLLAPSE_RANGE : FALLOC_FL_INSERT_RANGE,
			     off, len);
	} else if (m->extents) {
		int mode = (int)rnd_below(4);

		mode = mode == 0 ? 0 : mode == 1 ? FALLOC_FL_KEEP_SIZE
		     : mode == 2 ? FALLOC_FL_ZERO_RANGE : FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE;
		off = rnd_below(m->cap);
		len = 1 + rnd_below(MIN(m->cap - off, 40 * (uint64_t)bs));
		do_fallocate(fs, m, mode, off, len);
	} else {
		/* Block maps: fallocate is refused. */
		uext4_file *f;

		if (uext4_open(fs, m->ino, O_RDWR, &f) == 0) {
			int err = uext4_fallocate(f, FALLOC_FL_KEEP_SIZE, 0, bs);

			T_CHECK(err == -EOPNOTSUPP, "fallocate on a block-mapped file: %d", err);
			uext4_release(f);
		}
	}
}

/* ------------------------------------------------------------ images */

static uext4_fs *mount_rw(const char *path)
{
	struct uext4_opts o = { 0 };
	uext4_fs *fs = NULL;
	int err = uext4_mount(path, &o, &fs);

	T_CHECK(err == 0, "mount %s: %d %s", path, err, uext4_last_error());
	return err ? NULL : fs;
}

/* Mount with the kernel read-only and compare every model file. */
static void kernel_compare(const char *img, struct mfile *files, int nfiles)
{
	char mnt[300];

	if (!can_kernel_mount)
		return;
	snprintf(mnt, sizeof(mnt), "%s/mnt", tmpdir);
	mkdir(mnt, 0755);
	if (t_sh("mount -o loop,ro %s %s 2>/dev/null", img, mnt) != 0) {
		printf("  (kernel mount of %s failed: skipping the kernel comparison)\n", img);
		return;
	}
	for (int i = 0; i < nfiles; i++) {
		char p[400];
		struct stat st;
		uint8_t *buf;
		int fd;

		snprintf(p, sizeof(p), "%s/%s", mnt, files[i].name);
		fd = open(p, O_RDONLY);
		T_CHECK(fd >= 0, "kernel open %s", p);
		if (fd < 0)
			continue;
		fstat(fd, &st);
		T_CHECK((uint64_t)st.st_size == files[i].size, "kernel: %s size %lld, model %llu",
			files[i].name, (long long)st.st_size, (unsigned long long)files[i].size);
		buf = t_xmalloc(files[i].size);
		{
			size_t got = 0;

			while (got < files[i].size) {
				ssize_t n = pread(fd, buf + got, files[i].size - got, (off_t)got);

				if (n <= 0)
					break;
				got += (size_t)n;
			}
			T_CHECK(got == files[i].size && memcmp(buf, files[i].data, got) == 0,
				"kernel: %s contents differ from the model", files[i].name);
		}
		free(buf);
		close(fd);
	}
	t_sh("umount %s", mnt);
	printf("  kernel read-only mount agrees on %d files\n", nfiles);
}

/* Unmount, fsck, remount and compare, kernel compare. */
static uext4_fs *check_round(uext4_fs *fs, const char *img, struct mfile *files, int n,
			     const char *when)
{
	int err = uext4_umount(fs);

	T_CHECK(err == 0, "%s: umount: %d %s", when, err, uext4_last_error());
	t_fsck_clean(img);
	kernel_compare(img, files, n);
	fs = mount_rw(img);
	if (!fs)
		return NULL;
	for (int i = 0; i < n; i++)
		compare_file(fs, &files[i], when);
	return fs;
}

/* Depth of the extent tree of ino (-1 on error). */
static int extent_depth(uext4_fs *fs, uint64_t ino)
{
	struct inode *n;
	int d;

	if (iget(fs, ino, &n))
		return -1;
	d = le16(((const struct ext4_extent_header *)inode_raw(n)->i_block)->eh_depth);
	iput(fs, n);
	return d;
}

/* ------------------------------------------------------------ scenarios */

static void random_scenario(const char *label, const char *mkfs_args, const char *size,
			    uint32_t bs, uint64_t cap, int nfiles, int ops)
{
	char img[300];
	struct mfile files[4];
	uint8_t *buf = t_xmalloc(64 * (size_t)bs + 16);
	uext4_fs *fs;

	printf("%s: %d files, %d random ops each (write/truncate/punch/fallocate)\n", label,
	       nfiles, ops);
	for (int k = 0; k < OP_KINDS; k++)
		op_count[k] = 0;
	snprintf(img, sizeof(img), "%s/%s.img", tmpdir, label);
	if (t_make_image(img, size, mkfs_args) || !(fs = mount_rw(img))) {
		free(buf);
		return;
	}
	for (int i = 0; i < nfiles; i++) {
		char name[32];

		snprintf(name, sizeof(name), "f%d", i);
		if (create_file(fs, &files[i], name, cap))
			nfiles = i;
	}
	for (int op = 0; op < ops; op++) {
		for (int i = 0; i < nfiles; i++)
			random_op(fs, &files[i], bs, buf);
		if (op % 25 == 24)
			for (int i = 0; i < nfiles; i++)
				if (compare_file(fs, &files[i], label))
					op = ops;  /* stop at the first divergence */
	}
	for (int i = 0; i < nfiles; i++)
		compare_file(fs, &files[i], label);
	printf("  done: %u writes, %u truncates, %u punches, %u fallocates, %u zero ranges, "
	       "%u collapses, %u inserts\n", op_count[OP_WRITE], op_count[OP_TRUNC],
	       op_count[OP_PUNCH], op_count[OP_FALLOC], op_count[OP_ZERO], op_count[OP_COLLAPSE],
	       op_count[OP_INSERT]);
	for (int k = 0; k < OP_KINDS; k++)
		op_count[k] = 0;
	fs = check_round(fs, img, files, nfiles, label);
	if (fs) {
		/* And after a remount, keep going a little and shrink to nothing. */
		for (int op = 0; op < ops / 4; op++)
			for (int i = 0; i < nfiles; i++)
				random_op(fs, &files[i], bs, buf);
		fs = check_round(fs, img, files, nfiles, label);
		for (int i = 0; fs && i < nfiles; i++)
			do_truncate(fs, &files[i], 0);
		if (fs)
			fs = check_round(fs, img, files, nfiles, label);
		if (fs)
			uext4_umount(fs);
	}
	for (int i = 0; i < nfiles; i++)
		free(files[i].data);
	free(buf);
}

/*
 * Many small discontiguous extents on a 1 KiB image: every other block,
 * until the tree is `want_depth` deep; then punch and truncate it away.
 */
static void deep_tree_scenario(int want_depth, uint64_t nblocks)
{
	char img[300];
	struct mfile m;
	uint8_t blk[1024];
	uext4_fs *fs;
	int depth;

	printf("deep extent tree: every other 1 KiB block, %llu blocks, want depth %d\n",
	       (unsigned long long)nblocks, want_depth);
	snprintf(img, sizeof(img), "%s/deep%d.img", tmpdir, want_depth);
	if (t_make_image(img, want_depth >= 3 ? "160M" : "16M", "-t ext4 -b 1024 -N 1024") ||
	    !(fs = mount_rw(img)))
		return;
	if (create_file(fs, &m, "deep", nblocks * 1024 + 128 * 1024)) {
		uext4_umount(fs);
		return;
	}
	{
		uext4_file *f;

		if (uext4_open(fs, m.ino, O_RDWR, &f) == 0) {
			for (uint64_t b = 0; b < nblocks; b += 2) {
				ssize_t n;

				memset(blk, (int)(b % 251) + 1, sizeof(blk));
				n = uext4_pwrite(f, blk, sizeof(blk), b * 1024);
				if (n != (ssize_t)sizeof(blk)) {
					T_CHECK(0, "deep: pwrite block %llu: %zd %s",
						(unsigned long long)b, n, uext4_last_error());
					break;
				}
				model_write(&m, blk, sizeof(blk), b * 1024);
			}
			uext4_release(f);
		}
	}
	depth = extent_depth(fs, m.ino);
	printf("  extent tree depth %d\n", depth);
	T_CHECK(depth >= want_depth, "deep: depth %d < %d", depth, want_depth);
	compare_file(fs, &m, "deep written");
	fs = check_round(fs, img, &m, 1, "deep written");
	if (!fs)
		goto out;
	/* Shift extents across the whole tree: insert and collapse ranges. */
	for (int i = 0; i < 12; i++) {
		uint64_t nb = m.size / 1024, off = rnd_below(nb - 20) * 1024;
		uint64_t len = (1 + rnd_below(16)) * 1024;

		if (i % 2 == 0 && m.size + len <= m.cap)
			do_fallocate(fs, &m, FALLOC_FL_INSERT_RANGE, off, len);
		else
			do_fallocate(fs, &m, FALLOC_FL_COLLAPSE_RANGE, off, len);
	}
	compare_file(fs, &m, "deep shifted");
	fs = check_round(fs, img, &m, 1, "deep shifted");
	if (!fs)
		goto out;
	/* Fill some gaps (merges), punch ranges across leaves, then truncate. */
	for (int i = 0; i < 200; i++) {
		uint64_t b = rnd_below(nblocks / 2) * 2 + 1;

		memset(blk, 0xA5, sizeof(blk));
		do_write(fs, &m, blk, sizeof(blk), b * 1024);
	}
	for (int i = 0; i < 40; i++) {
		uint64_t off = rnd_below(nblocks) * 1024, len = (1 + rnd_below(600)) * 1024;

		do_fallocate(fs, &m, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, off,
			     MIN(len, m.cap - off));
	}
	compare_file(fs, &m, "deep punched");
	fs = check_round(fs, img, &m, 1, "deep punched");
	if (!fs)
		goto out;
	do_truncate(fs, &m, m.size / 3 + 100);
	compare_file(fs, &m, "deep truncated to a third");
	fs = check_round(fs, img, &m, 1, "deep truncated");
	if (!fs)
		goto out;
	do_truncate(fs, &m, 0);
	depth = extent_depth(fs, m.ino);
	T_CHECK(depth == 0, "deep: depth %d after truncating to 0", depth);
	{
		struct uext4_stat st;

		uext4_getattr(fs, m.ino, &st);
		T_CHECK(st.blocks == 0, "deep: %llu sectors left after truncating to 0",
			(unsigned long long)st.blocks);
	}
	fs = check_round(fs, img, &m, 1, "deep emptied");
	if (fs)
		uext4_umount(fs);
out:
	free(m.data);
}

/* ext3: a file reaching the triple-indirect block, then truncated in steps. */
static void blockmap_scenario(void)
{
	char img[300];
	struct mfile m;
	uint8_t buf[3000];
	uext4_fs *fs;
	/* 1 KiB blocks: 12 direct, 256 single, 65536 double: triple from 65804. */
	uint64_t offs[] = { 0, 5000, 11 * 1024 + 1000, 12 * 1024, 200 * 1024,
			    268 * 1024 - 10, 300 * 1024, 40000ull * 1024,
			    65804ull * 1024 - 1500, 65804ull * 1024 + 70000, 70000ull * 1024 };
	uint64_t cuts[] = { 68000ull * 1024 + 7, 65804ull * 1024, 30000ull * 1024 + 3,
			    268 * 1024, 100 * 1024 + 1, 12 * 1024, 7 * 1024 + 5, 0 };

	printf("ext3 block map: direct, single, double and triple indirect, then truncate\n");
	snprintf(img, sizeof(img), "%s/ext3.img", tmpdir);
	if (t_make_image(img, "32M", "-t ext3 -b 1024") || !(fs = mount_rw(img)))
		return;
	if (create_file(fs, &m, "map", 72000ull * 1024)) {
		uext4_umount(fs);
		return;
	}
	T_CHECK(!m.extents, "ext3: new file has EXTENTS_FL");
	for (size_t i = 0; i < sizeof(offs) / sizeof(offs[0]); i++) {
		for (size_t j = 0; j < sizeof(buf); j++)
			buf[j] = (uint8_t)(rnd() | 1);
		do_write(fs, &m, buf, sizeof(buf), offs[i]);
	}
	compare_file(fs, &m, "ext3 written");
	fs = check_round(fs, img, &m, 1, "ext3 written");
	for (size_t i = 0; fs && i < sizeof(cuts) / sizeof(cuts[0]); i++) {
		do_truncate(fs, &m, cuts[i]);
		if (i % 2)
			do_fallocate(fs, &m, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, cuts[i] / 3,
				     cuts[i] / 4 + 1);
		compare_file(fs, &m, "ext3 truncated");
		fs = check_round(fs, img, &m, 1, "ext3 truncated");
	}
	if (fs) {
		struct uext4_stat st;
		char target[300], back[300];
		ssize_t n;
		int err;

		memset(target, 'q', 200);
		target[200] = 0;
		err = uext4_symlink(fs, EXT4_ROOT_INO, "slowlink", target, &st);
		T_CHECK(err == 0 && !(st.flags & EXT4_EXTENTS_FL) && st.blocks == 2,
			"ext3 slow symlink: %d flags %#x blocks %llu", err, st.flags,
			(unsigned long long)st.blocks);
		n = uext4_readlink(fs, st.ino, back, sizeof(back));
		T_CHECK(n == 200 && memcmp(back, target, 200) == 0, "ext3 readlink: %zd", n);
		err = uext4_symlink(fs, EXT4_ROOT_INO, "fastlink", "short/target", &st);
		T_CHECK(err == 0, "ext3 fast symlink: %d", err);
		fs = check_round(fs, img, &m, 1, "ext3 symlinks");
		if (!fs)
			goto out;
		T_CHECK(uext4_unlink(fs, EXT4_ROOT_INO, "slowlink") == 0, "unlink slowlink");
		T_CHECK(uext4_unlink(fs, EXT4_ROOT_INO, "fastlink") == 0, "unlink fastlink");
		fs = check_round(fs, img, &m, 1, "ext3 symlinks deleted");
		if (!fs)
			goto out;
		uext4_getattr(fs, m.ino, &st);
		T_CHECK(st.blocks == 0, "ext3: %llu sectors left at size 0",
			(unsigned long long)st.blocks);
		uext4_umount(fs);
	}
out:
	free(m.data);
}

/* Size limits, a far sparse write, symlinks. */
static void limits_and_symlinks(void)
{
	char img[300], target[4200];
	struct mfile m;
	uext4_fs *fs;
	uext4_file *f;
	uint8_t buf[8192];
	ssize_t n;
	uint64_t max4k = ((1ull << 32) - 1) * 4096;

	printf("limits (-EFBIG), far sparse writes, fast and slow symlinks\n");
	snprintf(img, sizeof(img), "%s/limits.img", tmpdir);
	if (t_make_image(img, "64M", "-t ext4 -b 4096") || !(fs = mount_rw(img)))
		return;
	if (create_file(fs, &m, "far", 4096)) {
		uext4_umount(fs);
		return;
	}
	if (uext4_open(fs, m.ino, O_RDWR, &f) == 0) {
		memset(buf, 0x5a, sizeof(buf));
		T_CHECK(uext4_size_headroom(f) == max4k, "headroom of an empty file: %llu",
			(unsigned long long)uext4_size_headroom(f));
		n = uext4_pwrite(f, buf, 100, max4k);
		T_CHECK(n == -EFBIG, "write at the 16 TiB limit: %zd", n);
		n = uext4_pwrite(f, buf, 8192, max4k - 4096);
		T_CHECK(n == 4096, "write straddling the limit: %zd (want a short write)", n);
		T_CHECK(uext4_size_headroom(f) == 0, "headroom at the limit: %llu",
			(unsigned long long)uext4_size_headroom(f));
		n = uext4_pwrite(f, buf, 5000, (1ull << 40) + 123);
		T_CHECK(n == 5000, "write at 1 TiB: %zd %s", n, uext4_last_error());
		memset(buf, 1, sizeof(buf));
		n = uext4_pread(f, buf, 8192, (1ull << 40));
		T_CHECK(n == 8192 && buf[0] == 0 && buf[122] == 0 && buf[123] == 0x5a &&
			buf[5122] == 0x5a && buf[5123] == 0, "read back at 1 TiB: %zd", n);
		n = uext4_pread(f, buf, 4096, max4k - 4096);
		T_CHECK(n == 4096 && buf[0] == 0x5a && buf[4095] == 0x5a, "read at the limit");
		uext4_release(f);
	}
	{
		struct uext4_setattr a = { .valid = UEXT4_SET_SIZE, .size = max4k + 1 };
		int err = uext4_setattr(fs, m.ino, &a, NULL);

		T_CHECK(err == -EFBIG, "truncate past the limit: %d", err);
		a.size = (1ull << 40) + 200;
		err = uext4_setattr(fs, m.ino, &a, NULL);
		T_CHECK(err == 0, "truncate to 1 TiB + 200: %d %s", err, uext4_last_error());
	}
	{
		static const size_t lens[] = { 1, 59, 60, 61, 100, 4095 };

		for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
			struct uext4_stat st;
			char name[32], back[4096];
			int err;

			for (size_t j = 0; j < lens[i]; j++)
				target[j] = (char)('a' + (j * 7 + i) % 26);
			target[lens[i]] = 0;
			snprintf(name, sizeof(name), "link%zu", lens[i]);
			err = uext4_symlink(fs, EXT4_ROOT_INO, name, target, &st);
			T_CHECK(err == 0, "symlink of %zu bytes: %d %s", lens[i], err,
				uext4_last_error());
			if (err)
				continue;
			n = uext4_readlink(fs, st.ino, back, sizeof(back));
			T_CHECK(n == (ssize_t)lens[i] && memcmp(back, target, lens[i]) == 0,
				"readlink %s: %zd", name, n);
			T_CHECK(lens[i] < 60 ? !(st.flags & EXT4_EXTENTS_FL) && st.blocks == 0
					     : st.blocks == 8,
				"symlink %s: flags %#x blocks %llu", name, st.flags,
				(unsigned long long)st.blocks);
		}
		{
			struct uext4_stat st;
			int err;

			memset(target, 'x', 4096);
			target[4096] = 0;
			err = uext4_symlink(fs, EXT4_ROOT_INO, "toolong", target, &st);
			T_CHECK(err == -ENAMETOOLONG, "symlink of 4096 bytes: %d", err);
		}
	}
	fs = check_round(fs, img, NULL, 0, "limits");
	if (fs && can_kernel_mount) {
		char cmd[2000];

		snprintf(cmd, sizeof(cmd), "mount -o loop,ro,noload %s %s/mnt && "
			 "test \"$(readlink %s/mnt/link100)\" = \"$(printf '%%s' "
			 "$(readlink %s/mnt/link100))\" && test $(readlink %s/mnt/link4095 | wc -c) "
			 "-eq 4096 && stat -c %%s %s/mnt/far | grep -qx %llu; rc=$?; umount %s/mnt; "
			 "exit $rc", img, tmpdir, tmpdir, tmpdir, tmpdir, tmpdir,
			 (unsigned long long)((1ull << 40) + 200), tmpdir);
		T_CHECK(t_sh("%s", cmd) == 0, "kernel: symlinks or the sparse file differ");
	}
	if (fs) {
		/* Deleting: fast links hold text and devices a number in i_block,
		 * which must not be taken for blocks. */
		static const char *names[] = { "link1", "link59", "link60", "link61", "link100",
					       "link4095", "far", "dev" };
		struct uext4_stat st;
		int err = uext4_mknod(fs, EXT4_ROOT_INO, "dev", S_IFCHR | 0600,
				      makedev(0x12, 0x345), &st);

		T_CHECK(err == 0, "mknod: %d %s", err, uext4_last_error());
		for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
			err = uext4_unlink(fs, EXT4_ROOT_INO, names[i]);
			T_CHECK(err == 0, "unlink %s: %d %s", names[i], err, uext4_last_error());
		}
		fs = check_round(fs, img, NULL, 0, "limits deleted");
	}
	if (fs)
		uext4_umount(fs);
	free(m.data);
}

/* Inline files made by mke2fs -d: in-place writes, conversion, truncation. */
static void inline_scenario(void)
{
	char img[300], src[300];
	struct mfile m[3];

	uext4_fs *fs;
	uint8_t buf[9000];
	static const char *names[] = { "small", "mid", "tiny" };
	static const size_t sizes[] = { 40, 100, 10 };

	printf("inline data: in-place writes, conversion to extents, truncation\n");
	snprintf(src, sizeof(src), "%s/inline_src", tmpdir);
	snprintf(img, sizeof(img), "%s/inline.img", tmpdir);
	t_sh("rm -rf %s && mkdir -p %s", src, src);
	for (int i = 0; i < 3; i++) {
		char p[600];
		FILE *fp;

		snprintf(p, sizeof(p), "%s/%s", src, names[i]);
		fp = fopen(p, "w");
		memset(&m[i], 0, sizeof(m[i]));
		snprintf(m[i].name, sizeof(m[i].name), "%s", names[i]);
		m[i].cap = 65536;
		m[i].data = calloc(1, m[i].cap);
		for (size_t j = 0; j < sizes[i]; j++)
			m[i].data[j] = (uint8_t)('A' + (j + (size_t)i) % 26);
		m[i].size = sizes[i];
		if (fp) {
			fwrite(m[i].data, 1, sizes[i], fp);
			fclose(fp);
		}
	}
	{
		char args[700];

		snprintf(args, sizeof(args), "-t ext4 -b 4096 -I 256 -O inline_data -d %s", src);
		if (t_make_image(img, "32M", args) || !(fs = mount_rw(img)))
			goto out;
	}
	for (int i = 0; i < 3; i++) {
		struct uext4_stat st;
		int err = uext4_lookup(fs, EXT4_ROOT_INO, names[i], &st);

		T_CHECK(err == 0, "lookup %s: %d", names[i], err);
		m[i].ino = st.ino;
		printf("  %s: %llu bytes, %s\n", names[i], (unsigned long long)st.size,
		       (st.flags & EXT4_INLINE_DATA_FL) ? "inline" : "not inline");
		compare_file(fs, &m[i], "inline before");
	}
	/* small: in-place write inside i_block, then truncate shorter. */
	memset(buf, 'z', 16);
	do_write(fs, &m[0], buf, 16, 30);
	do_truncate(fs, &m[0], 20);
	do_truncate(fs, &m[0], 50);
	/* mid (i_block + system.data): truncate in place, then grow by writing. */
	do_truncate(fs, &m[1], 70);
	do_truncate(fs, &m[1], 30);
	for (size_t j = 0; j < sizeof(buf); j++)
		buf[j] = (uint8_t)(rnd() | 1);
	do_write(fs, &m[1], buf, 9000, 50);
	/* tiny: a write far past i_block converts it. */
	do_write(fs, &m[2], buf, 3000, 20000);
	for (int i = 0; i < 3; i++) {
		struct uext4_stat st;

		uext4_getattr(fs, m[i].ino, &st);
		printf("  %s now %llu bytes, %s\n", names[i], (unsigned long long)st.size,
		       (st.flags & EXT4_INLINE_DATA_FL) ? "inline" : "in blocks");
		compare_file(fs, &m[i], "inline after");
	}
	fs = check_round(fs, img, m, 3, "inline");
	if (fs)
		uext4_umount(fs);
out:
	for (int i = 0; i < 3; i++)
		free(m[i].data);
}

/* ENOSPC: fill a small image, everything stays consistent. */
static void enospc_scenario(void)
{
	char img[300];
	struct mfile m;
	uext4_fs *fs;
	uint8_t *buf = t_xmalloc(1 << 20);
	uext4_file *f;
	uint64_t off = 0;

	printf("ENOSPC: a file grows until the image is full, then shrinks\n");
	snprintf(img, sizeof(img), "%s/full.img", tmpdir);
	if (t_make_image(img, "8M", "-t ext4 -b 1024") || !(fs = mount_rw(img))) {
		free(buf);
		return;
	}
	if (create_file(fs, &m, "big", 16 << 20) == 0 && uext4_open(fs, m.ino, O_RDWR, &f) == 0) {
		for (;;) {
			ssize_t n;

			memset(buf, (int)(off >> 20) + 1, 1 << 20);
			n = uext4_pwrite(f, buf, 1 << 20, off);
			if (n > 0)
				model_write(&m, buf, (size_t)n, off);
			if (n != (1 << 20)) {
				if (n <= 0)
					T_CHECK(n == -ENOSPC, "full: pwrite: %zd %s", n,
						uext4_last_error());
				break;
			}
			off += (uint64_t)n;
			if (off >= (16u << 20))
				break;
		}
		uext4_release(f);
		printf("  wrote %llu bytes before the image filled\n", (unsigned long long)m.size);
		compare_file(fs, &m, "full");
		fs = check_round(fs, img, &m, 1, "full");
		if (fs) {
			do_truncate(fs, &m, m.size / 2);
			fs = check_round(fs, img, &m, 1, "full then halved");
		}
		if (fs)
			uext4_umount(fs);
	}
	free(m.data);
	free(buf);
}

/* Threads: writers on their own files and a reader of a file being written. */
struct thr {
	uext4_fs *fs;
	struct mfile *m;
	uint64_t seed;
	uint32_t bs;
	int ops;
	_Atomic int *stop;
};

static void *writer_thread(void *arg)
{
	struct thr *t = arg;
	uint8_t *buf = t_xmalloc(64 * (size_t)t->bs + 16);

	rng_state = t->seed;
	for (int i = 0; i < t->ops; i++)
		random_op(t->fs, t->m, t->bs, buf);
	free(buf);
	return NULL;
}

static void *reader_thread(void *arg)
{
	struct thr *t = arg;
	uint8_t *buf = t_xmalloc(1 << 16);
	uext4_file *f;

	if (uext4_open(t->fs, t->m->ino, O_RDONLY, &f) == 0) {
		while (!atomic_load(t->stop)) {
			ssize_t n = uext4_pread(f, buf, 1 << 16, (uint64_t)rnd_below(t->m->cap));

			T_CHECK(n >= 0, "concurrent pread: %zd %s", n, uext4_last_error());
			if (n < 0)
				break;
		}
		uext4_release(f);
	}
	free(buf);
	return NULL;
}

static void threads_scenario(void)
{
	enum { NW = 3 };
	char img[300];
	struct mfile files[NW];
	struct thr t[NW + 1];
	pthread_t tid[NW + 1];
	_Atomic int stop = 0;
	uext4_fs *fs;
	int n = 0;

	printf("threads: %d writers on their own files, one reader of a file being written\n",
	       NW);
	snprintf(img, sizeof(img), "%s/threads.img", tmpdir);
	if (t_make_image(img, "64M", "-t ext4 -b 4096") || !(fs = mount_rw(img)))
		return;
	for (; n < NW; n++) {
		char name[32];

		snprintf(name, sizeof(name), "t%d", n);
		if (create_file(fs, &files[n], name, 2 << 20))
			break;
	}
	for (int i = 0; i < n; i++) {
		t[i] = (struct thr){ .fs = fs, .m = &files[i], .seed = rnd() | 1, .bs = 4096,
				     .ops = 150, .stop = &stop };
		pthread_create(&tid[i], NULL, writer_thread, &t[i]);
	}
	t[n] = (struct thr){ .fs = fs, .m = &files[0], .seed = rnd() | 1, .stop = &stop };
	pthread_create(&tid[n], NULL, reader_thread, &t[n]);
	for (int i = 0; i < n; i++)
		pthread_join(tid[i], NULL);
	atomic_store(&stop, 1);
	pthread_join(tid[n], NULL);
	for (int i = 0; i < n; i++)
		compare_file(fs, &files[i], "threads");
	fs = check_round(fs, img, files, n, "threads");
	if (fs)
		uext4_umount(fs);
	for (int i = 0; i < n; i++)
		free(files[i].data);
}

int main(void)
{
	uint64_t seed = t_seed("unit_write", "UNIT_WRITE_SEED");

	rng_state = seed;
	t_need_tools("mke2fs e2fsck");
	t_tmpdir(tmpdir, sizeof(tmpdir), "unit_write");
	can_kernel_mount = t_can_loop() && getenv("UNIT_WRITE_NO_KERNEL") == NULL;
	printf("kernel comparison: %s\n", can_kernel_mount ? "yes" : "no (needs root and loop)");

	random_scenario("ext4-4k", "-t ext4 -b 4096", "64M", 4096, 3 << 20, 3, 300);
	random_scenario("ext4-1k", "-t ext4 -b 1024", "32M", 1024, 1 << 20, 3, 300);
	random_scenario("ext4-nocsum", "-t ext4 -b 4096 -O ^metadata_csum", "32M", 4096, 2 << 20,
			2, 200);
	random_scenario("ext3-1k", "-t ext3 -b 1024", "32M", 1024, 1 << 20, 3, 250);
	random_scenario("ext3-4k", "-t ext3 -b 4096", "64M", 4096, 5 << 20, 2, 200);
	deep_tree_scenario(2, 2000);
	deep_tree_scenario(3, 2 * 28500);
	blockmap_scenario();
	limits_and_symlinks();
	inline_scenario();
	enospc_scenario();
	threads_scenario();

	t_sh("rm -rf %s", tmpdir);
	if (t_failures) {
		printf("unit_write: %d failures (seed %llu)\n", t_failures, (unsigned long long)seed);
		return T_FAIL;
	}
	printf("unit_write: all passed\n");
	return T_PASS;
}
