/*
 * journal_kernel.c - helper of tests/journal_kernel.sh (run only by it).
 *
 *   journal_kernel crash IMG OUTDIR SEED
 *       Mount IMG read-write with the library on a device that, once the
 *       mount has finished, holds back the home writes of journaled
 *       metadata (every write to a block that a descriptor block in the log
 *       named, until a revoke record releases it) until the log tail moves
 *       (the journal flushes before that, so they would be durable), and
 *       loses those still held at the end, as if the machine died right
 *       after the last commit block.  Ordered file data and the journal itself
 *       are written.  Creates directories and files with contents from
 *       SEED, fsyncs them, syncs, and leaves with _exit() (no unmount),
 *       so needs_recovery stays set.  OUTDIR receives the same tree.
 *   journal_kernel recover IMG
 *       uext4_recover(): replay the journal (and orphans) without mounting.
 */
#include "blockdev.h"
#include "internal.h"
#include "jbd2.h"
#include "mount.h"
#include "uext4.h"
#include "t.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------ dropping device */

struct dropdev {
	struct bdev dev;
	struct bdev *base;
	uint32_t bs;
	uint64_t *jphys;        /* journal device blocks, sorted */
	uint64_t jsb_block;     /* device block of the journal superblock */
	uint32_t njphys;
	struct jbd2_fmt fmt;    /* from the journal superblock as written */
	bool fmt_known;
	bool dropping;          /* the mount has finished */
	uint8_t *logged;        /* bitmap: blocks whose home writes are dropped */
	uint64_t nblocks;
	unsigned dropped, passed, late;
	/* Home writes held back: lost at the crash, unless a journal
	 * superblock write (a tail move, after a flush that in reality made
	 * them durable) comes first. */
	struct held { uint64_t off; size_t len; uint8_t *data; } *held;
	size_t nheld, capheld;
};

static void hold(struct dropdev *d, const void *buf, size_t len, uint64_t off)
{
	if (d->nheld == d->capheld) {
		d->capheld = d->capheld ? d->capheld * 2 : 64;
		d->held = t_xrealloc(d->held, d->capheld * sizeof(*d->held));
	}
	d->held[d->nheld].data = t_xmalloc(len);
	memcpy(d->held[d->nheld].data, buf, len);
	d->held[d->nheld].off = off;
	d->held[d->nheld++].len = len;
}

/* The log tail moves: everything held was flushed home before. */
static void release_held(struct dropdev *d)
{
	for (size_t i = 0; i < d->nheld; i++) {
		bdev_write(d->base, d->held[i].data, d->held[i].len, d->held[i].off);
		free(d->held[i].data);
		d->late++;
	}
	d->nheld = 0;
}

static bool is_journal_block(struct dropdev *d, uint64_t b)
{
	uint32_t lo = 0, hi = d->njphys;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (d->jphys[mid] == b)
			return true;
		if (d->jphys[mid] < b)
			lo = mid + 1;
		else
			hi = mid;
	}
	return false;
}

static void mark(struct dropdev *d, uint64_t b, bool on)
{
	if (b >= d->nblocks)
		return;
	if (on)
		d->logged[b / 8] |= (uint8_t)(1u << (b % 8));
	else
		d->logged[b / 8] &= (uint8_t)~(1u << (b % 8));
}

/* A journal block being written: learn the format from the superblock,
 * the logged homes from descriptors, releases from revoke blocks. */
static void parse_journal_block(struct dropdev *d, const uint8_t *blk, bool is_sb)
{
	const struct jbd2_fmt *f = &d->fmt;

	if (is_sb) {
		const struct jbd2_superblock *sb = (const void *)blk;
		uint32_t inc = JGET(sb, s_feature_incompat);

		d->fmt.block_size = d->bs;
		d->fmt.csum_v3 = inc & JBD2_FEATURE_INCOMPAT_CSUM_V3;
		d->fmt.csum_v2 = !d->fmt.csum_v3 && (inc & JBD2_FEATURE_INCOMPAT_CSUM_V2);
		d->fmt.bit64 = inc & JBD2_FEATURE_INCOMPAT_64BIT;
		d->fmt_known = true;
		return;
	}
	if (!d->fmt_known || be32_get(blk) != JBD2_MAGIC)
		return;
	if (be32_get(blk + 4) == JBD2_DESCRIPTOR_BLOCK) {
		size_t tb = jbd2_tag_bytes(f), limit = d->bs - jbd2_tail_bytes(f);

		for (size_t off = 12; off + tb <= limit;) {
			uint32_t flags = be16_get(blk + off + 6);
			uint64_t home = be32_get(blk + off);

			if (f->bit64)
				home |= (uint64_t)be32_get(blk + off + 8) << 32;
			mark(d, home, true);
			off += tb + ((flags & JBD2_FLAG_SAME_UUID) ? 0 : 16);
			if (flags & JBD2_FLAG_LAST_TAG)
				break;
		}
	} else if (be32_get(blk + 4) == JBD2_REVOKE_BLOCK) {
		uint32_t count = be32_get(blk + 12), rec = f->bit64 ? 8 : 4;

		for (uint32_t off = 16; off + rec <= count && off + rec <= d->bs; off += rec)
			mark(d, f->bit64 ? be64_get(blk + off) : be32_get(blk + off), false);
	}
}

static int dd_read(struct bdev *bd, void *buf, size_t len, uint64_t off)
{
	struct dropdev *d = bd->priv;
	return bdev_read(d->base, buf, len, off);
}

static int dd_write(struct bdev *bd, const void *buf, size_t len, uint64_t off)
{
	struct dropdev *d = bd->priv;
	uint64_t first = off / d->bs, last = (off + len - 1) / d->bs;

	if (first < d->nblocks && is_journal_block(d, first)) {
		for (uint64_t b = first; b <= last; b++) {
			size_t at = (size_t)((b - first) * d->bs);

			/* the journal superblock (1 KiB write) or whole log blocks */
			if (len >= sizeof(struct jbd2_superblock) && b == d->jsb_block &&
			    off == b * d->bs) {
				parse_journal_block(d, (const uint8_t *)buf, true);
				release_held(d);
			}
			else if (at + d->bs <= len)
				parse_journal_block(d, (const uint8_t *)buf + at, false);
		}
		d->passed++;
		return bdev_write(d->base, buf, len, off);
	}
	if (d->dropping) {
		bool logged = false;

		for (uint64_t b = first; b <= last && b < d->nblocks; b++)
			if (d->logged[b / 8] & (1u << (b % 8)))
				logged = true;
		if (logged) {
			hold(d, buf, len, off);
			return 0;
		}
	}
	d->passed++;
	return bdev_write(d->base, buf, len, off);
}

static int dd_flush(struct bdev *bd)
{
	struct dropdev *d = bd->priv;
	return bdev_flush(d->base);
}

static void dd_close(struct bdev *bd)
{
	struct dropdev *d = bd->priv;
	bdev_close(d->base);
}

static const struct bdev_ops dd_ops = { .read = dd_read, .write = dd_write, .flush = dd_flush, .close = dd_close };

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* Journal device blocks of the image, from a read-only mount. */
static int journal_blocks(const char *img, struct dropdev *d)
{
	struct uext4_fs *fs;
	struct jbd2_log log;
	int err = uext4_mount(img, &(struct uext4_opts){.read_only = 1}, &fs);

	if (err) {
		fprintf(stderr, "read-only mount of %s: %s\n", img, uext4_last_error());
		return err;
	}
	err = jbd2_log_load(fs, &super_journal_host, &log);
	if (err) {
		fprintf(stderr, "journal of %s: %s\n", img, uext4_last_error());
		uext4_umount(fs);
		return err;
	}
	d->bs = fs->block_size;
	d->nblocks = fs->blocks_count;
	d->njphys = log.nblocks;
	d->jphys = t_xmalloc(log.nblocks * sizeof(uint64_t));
	memcpy(d->jphys, log.phys, log.nblocks * sizeof(uint64_t));
	d->logged = calloc(1, (size_t)(d->nblocks / 8 + 1));
	jbd2_log_free(&log);
	uext4_umount(fs);
	d->jsb_block = d->jphys[0];
	qsort(d->jphys, d->njphys, sizeof(uint64_t), cmp_u64);
	return 0;
}

/* ------------------------------------------------------------ workload */

static uint64_t rng_state;
static uint64_t rnd(void)
{
	return t_rnd(&rng_state);
}

static int fail(const char *what, int err)
{
	fprintf(stderr, "journal_kernel: %s: %d %s\n", what, err, uext4_last_error());
	_exit(T_FAIL);
}

static uint64_t mkdir_both(uext4_fs *fs, uint64_t dir, const char *outdir, const char *rel)
{
	struct uext4_stat st;
	char path[512];
	const char *name = strrchr(rel, '/') ? strrchr(rel, '/') + 1 : rel;
	int err = uext4_mkdir(fs, dir, name, 0755, &st);

	if (err)
		fail(rel, err);
	snprintf(path, sizeof(path), "%s/%s", outdir, rel);
	mkdir(path, 0755);
	return st.ino;
}

/* A file with size bytes of seeded content, in the image and in outdir. */
static void file_both(uext4_fs *fs, uint64_t dir, const char *outdir, const char *rel,
		      size_t size, bool fsync_it)
{
	struct uext4_stat st;
	uext4_file *f;
	char path[512];
	const char *name = strrchr(rel, '/') ? strrchr(rel, '/') + 1 : rel;
	uint8_t *buf = t_xmalloc(size + 8);
	int err, fd;

	for (size_t i = 0; i < size; i += 8) {
		uint64_t v = rnd();
		memcpy(buf + i, &v, 8);
	}
	if ((err = uext4_create(fs, dir, name, 0644, &st)))
		fail(rel, err);
	if ((err = uext4_open(fs, st.ino, O_RDWR, &f)))
		fail(rel, err);
	for (size_t off = 0; off < size;) {
		size_t n = MIN(size - off, (size_t)65536);
		ssize_t w = uext4_pwrite(f, buf + off, n, off);

		if (w <= 0)
			fail(rel, (int)w);
		off += (size_t)w;
	}
	if (fsync_it && (err = uext4_fsync(f, 0)))
		fail(rel, err);
	uext4_release(f);
	snprintf(path, sizeof(path), "%s/%s", outdir, rel);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || write(fd, buf, size) != (ssize_t)size)
		fail(path, -errno);
	close(fd);
	free(buf);
}

static void workload(uext4_fs *fs, const char *outdir)
{
	uint64_t root = UEXT4_ROOT_INO, d1, d2, d3, tmp;
	char rel[64];
	int err;

	d1 = mkdir_both(fs, root, outdir, "d1");
	d2 = mkdir_both(fs, d1, outdir, "d1/d2");
	d3 = mkdir_both(fs, root, outdir, "many");
	for (int i = 0; i < 12; i++) {
		static const size_t sizes[] = {0, 1, 100, 4095, 4096, 4097, 70000, 300000};
		uint64_t dir = i % 3 == 0 ? root : i % 3 == 1 ? d1 : d2;
		const char *pre = i % 3 == 0 ? "" : i % 3 == 1 ? "d1/" : "d1/d2/";

		snprintf(rel, sizeof(rel), "%sfile%02d", pre, i);
		file_both(fs, dir, outdir, rel, sizes[rnd() % 8], i % 2 == 0);
	}
	/* A directory grown past one block. */
	for (int i = 0; i < 150; i++) {
		snprintf(rel, sizeof(rel), "many/entry-with-a-longish-name-%03d", i);
		file_both(fs, d3, outdir, rel, rnd() % 3000, false);
	}
	/* Freed directory blocks: revoke records in the log. */
	tmp = mkdir_both(fs, root, outdir, "gone");
	for (int i = 0; i < 120; i++) {
		struct uext4_stat st;

		snprintf(rel, sizeof(rel), "name-%03d-padding-padding-padding", i);
		if ((err = uext4_create(fs, tmp, rel, 0644, &st)))
			fail(rel, err);
	}
	if ((err = uext4_sync(fs)))
		fail("sync", err);
	for (int i = 0; i < 120; i++) {
		snprintf(rel, sizeof(rel), "name-%03d-padding-padding-padding", i);
		if ((err = uext4_unlink(fs, tmp, rel)))
			fail(rel, err);
	}
	/* Many small commits: more log than a 1024-block journal holds, so
	 * the log wraps and its tail moves. */
	for (int round = 0; round < 120; round++) {
		uint64_t dirs[3] = {root, d1, d2};
		const char *pre[3] = {"", "d1/", "d1/d2/"};

		for (int i = 0; i < 3; i++) {
			snprintf(rel, sizeof(rel), "%sround%03d", pre[i], round);
			file_both(fs, dirs[i], outdir, rel, (size_t)(rnd() % 2000), false);
		}
		if ((err = uext4_sync(fs)))
			fail("sync", err);
	}
	if ((err = uext4_rmdir(fs, root, "gone")))
		fail("rmdir gone", err);
	snprintf(rel, sizeof(rel), "%s/gone", outdir);
	rmdir(rel);
	if ((err = uext4_sync(fs)))
		fail("sync", err);
}

static int do_crash(const char *img, const char *outdir, uint64_t seed)
{
	struct dropdev *d = calloc(1, sizeof(*d));
	uext4_fs *fs;
	int err;

	rng_state = seed ? seed : 1;
	if (journal_blocks(img, d))
		return T_FAIL;
	d->base = bdev_open_file(img, 0, &err);
	if (!d->base)
		fail("open image", err);
	d->dev = (struct bdev){.ops = &dd_ops, .size = d->base->size, .priv = d};
	if ((err = super_mount_bdev(&d->dev, &(struct uext4_opts){.commit_secs = 3600}, &fs)))
		fail("read-write mount", err);
	if (!fs->journal) {
		fprintf(stderr, "journal_kernel: the mount has no journal open\n");
		_exit(T_FAIL);
	}
	d->dropping = true;
	workload(fs, outdir);
	d->dropped = (unsigned)d->nheld;
	printf("crash: %u writes passed (journal, ordered data), %u home writes written late "
	       "(at log tail moves), %u home writes of journaled metadata lost; leaving without "
	       "unmount\n", d->passed, d->late, d->dropped);
	fflush(stdout);
	if (d->dropped == 0) {
		fprintf(stderr, "journal_kernel: no home write was dropped\n");
		_exit(T_FAIL);
	}
	_exit(0);
}

static int do_recover(const char *img)
{
	struct uext4_recovery r;
	int err = uext4_recover(img, &r);

	if (err) {
		fprintf(stderr, "uext4_recover: %d %s\n", err, uext4_last_error());
		return T_FAIL;
	}
	printf("uext4_recover: %u transactions, %u blocks, %u revoke records, bad checksum %d, "
	       "orphans truncated %u deleted %u, fast commits %u (%u tags)\n", r.transactions,
	       r.blocks, r.revoked, r.bad_checksum, r.orphans_truncated, r.orphans_deleted,
	       r.fast_commits, r.fast_commit_tags);
	return r.transactions ? T_PASS : T_FAIL;
}

int main(int argc, char **argv)
{
	if (argc == 5 && !strcmp(argv[1], "crash"))
		return do_crash(argv[2], argv[3], strtoull(argv[4], NULL, 0));
	if (argc == 3 && !strcmp(argv[1], "recover"))
		return do_recover(argv[2]);
	fprintf(stderr, "usage: journal_kernel crash IMG OUTDIR SEED | recover IMG\n");
	return 2;
}
