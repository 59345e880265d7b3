/*
 * unit_journal.c - the JBD2 writer (journal.c) and recovery (recovery.c).
 *
 * On fresh mke2fs images (4 KiB with metadata_csum + 64bit, 4 KiB without
 * either, 1 KiB with metadata_csum and 32-bit block numbers, 1 KiB without
 * metadata_csum with 64bit), mounted read-only on a writable memory device:
 *   (a) random transactions (home blocks among free blocks, contents that
 *       sometimes begin with the JBD2 magic, revokes, one transaction of
 *       several descriptors) logged with journal_commit(); a byte copy of
 *       the device is recovered with journal_recover() and every block
 *       compared with a model (revoked blocks not written, newest copy
 *       wins, escaped blocks restored); device writes and flushes counted;
 *   (b) a bad commit block or descriptor in the middle of three
 *       transactions stops replay after the first; a data block with a bad
 *       (v3 tag) checksum in the middle transaction is skipped, as the
 *       kernel and e2fsck do: every transaction is replayed, the other
 *       blocks of that one too, the bad block keeps what it held before
 *       (unless a newer transaction revoked it: then it is no error), it
 *       is reported (journal block, home, tid) and the superblock on the
 *       device gets EXT4_ERROR_FS;
 *   (c) log wrap-around: many more transactions than the log holds;
 *   (d) corrupt journal superblocks, revoke counts and tags give clear
 *       errors; random byte damage in the log never crashes;
 *   (e) debugfs logdump parses our log, e2fsck -fy replays it (home
 *       blocks then hold our data) and e2fsck -fn is clean after.
 * Prints the seed (UNIT_JOURNAL_SEED=n repeats a run).
 */
#include "blockdev.h"
#include "crc.h"
#include "error.h"
#include "internal.h"
#include "jbd2.h"
#include "journal.h"
#include "ondisk.h"
#include "mount.h"
#include "uext4.h"
#include "t.h"

#include <fcntl.h>
#include <unistd.h>

static uint64_t rng_state;
static uint64_t rnd(void) { return t_rnd(&rng_state); }
static uint64_t rnd_below(uint64_t n) { return t_rnd_below(&rng_state, n); }

static char tmpdir[128];

/* Output of a command, in a malloc'd string. */

/* ------------------------------------------------------------ configs */

struct cfg {
	const char *name;
	unsigned bs;
	const char *features;
	const char *size;
	bool csum, bit64;
};

static const struct cfg cfgs[] = {
	{"4k-csum-64bit", 4096, "metadata_csum,64bit", "32M", true, true},
	{"4k-nocsum-32bit", 4096, "^metadata_csum,^64bit", "32M", false, false},
	{"1k-csum-32bit", 1024, "metadata_csum,^64bit", "24M", true, false},
	{"1k-nocsum-64bit", 1024, "^metadata_csum,64bit", "24M", false, true},
};

#define POOL 400
#define FUZZ_RUNS 30

struct image {
	const struct cfg *c;
	char path[256];
	uint64_t pool[POOL];        /* free blocks we use as homes */
	uint8_t *orig;              /* their contents at mkfs */
};

/* ------------------------------------------------------------ devices */

static struct bdev *dev_copy(struct bdev *src)
{
	struct bdev *d = bdev_open_memory(src->size);
	size_t chunk = 1 << 20;
	uint8_t *buf = t_xmalloc(chunk);

	if (!d) {
		fprintf(stderr, "bdev_open_memory failed\n");
		exit(T_FAIL);
	}
	for (uint64_t off = 0; off < src->size; off += chunk) {
		size_t n = (size_t)MIN((uint64_t)chunk, src->size - off);

		if (bdev_read(src, buf, n, off) < 0 || bdev_write(d, buf, n, off) < 0) {
			fprintf(stderr, "device copy failed\n");
			exit(T_FAIL);
		}
	}
	free(buf);
	return d;
}

static void dev_save(struct bdev *src, const char *path)
{
	size_t chunk = 1 << 20;
	uint8_t *buf = t_xmalloc(chunk);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	if (fd < 0) {
		perror(path);
		exit(T_FAIL);
	}
	for (uint64_t off = 0; off < src->size; off += chunk) {
		size_t n = (size_t)MIN((uint64_t)chunk, src->size - off);

		if (bdev_read(src, buf, n, off) < 0 || pwrite(fd, buf, n, (off_t)off) != (ssize_t)n) {
			fprintf(stderr, "saving the device failed\n");
			exit(T_FAIL);
		}
	}
	close(fd);
	free(buf);
}

/* A device that counts writes and flushes (wrapped around fs->dev). */
struct counting {
	struct bdev dev;
	struct bdev *base;
	unsigned writes, flushes;
};
static int cnt_read(struct bdev *d, void *buf, size_t len, uint64_t off)
{
	struct counting *c = d->priv;
	return bdev_read(c->base, buf, len, off);
}
static int cnt_write(struct bdev *d, const void *buf, size_t len, uint64_t off)
{
	struct counting *c = d->priv;
	c->writes++;
	return bdev_write(c->base, buf, len, off);
}
static int cnt_flush(struct bdev *d)
{
	struct counting *c = d->priv;
	c->flushes++;
	return bdev_flush(c->base);
}
static void cnt_close(struct bdev *d) {}
static const struct bdev_ops cnt_ops = { .read = cnt_read, .write = cnt_write, .flush = cnt_flush, .close = cnt_close };

static struct uext4_fs *mount_dev(struct bdev *d)
{
	struct uext4_fs *fs;
	int err = super_mount_bdev(d, &(struct uext4_opts){.read_only = 1}, &fs);

	if (err) {
		fprintf(stderr, "mount failed: %d %s\n", err, uext4_last_error());
		exit(T_FAIL);
	}
	return fs;
}

/* ------------------------------------------------------------ image setup */

/* An image of config c with a jsize MiB journal, and POOL free blocks from the
 * middle on with what they hold, for transactions to write to. */
static void make_pool_image(struct image *im, const struct cfg *c, const char *jsize)
{
	char cmd[512], opts[256], *out, *p;
	struct bdev *d;
	int err, n = 0;

	im->c = c;
	snprintf(im->path, sizeof(im->path), "%s/%s-%s.img", tmpdir, c->name, jsize);
	snprintf(opts, sizeof(opts), "-t ext4 -b %u -O %s -J size=%s", c->bs, c->features, jsize);
	if (t_make_image(im->path, c->size, opts))
		exit(T_FAIL);
	/* Free blocks from the middle of the file system on. */
	d = bdev_open_memory_copy(im->path, &err);
	if (!d)
		exit(T_FAIL);
	snprintf(cmd, sizeof(cmd), "debugfs -R 'ffb %d %llu' %s 2>/dev/null", POOL,
		 (unsigned long long)(d->size / c->bs / 2), im->path);
	out = t_sh_out(cmd);
	p = strstr(out, "found:");
	for (p = p ? p + 6 : out + strlen(out); n < POOL;) {
		char *end;
		unsigned long long b = strtoull(p, &end, 10);

		if (end == p)
			break;
		im->pool[n++] = b;
		p = end;
	}
	free(out);
	if (n != POOL) {
		fprintf(stderr, "debugfs ffb found %d free blocks of %d\n", n, POOL);
		exit(T_FAIL);
	}
	im->orig = t_xmalloc((size_t)POOL * c->bs);
	for (int i = 0; i < POOL; i++)
		bdev_read(d, im->orig + (size_t)i * c->bs, c->bs, im->pool[i] * c->bs);
	bdev_close(d);
}

/* ------------------------------------------------------------ transactions */

struct txn {
	uint32_t tid;
	size_t n, nrev;
	uint64_t *homes;
	int *idx;               /* pool index of each home */
	uint8_t *copies;
	uint64_t *rev;
	int *rev_idx;
};

struct run {
	struct image *im;
	struct txn *t;
	size_t nt;
	uint32_t first_tid;
	unsigned escaped;       /* blocks that began with the magic */
};

static int cmp_idx(const void *a, const void *b)
{
	return *(const int *)a - *(const int *)b;
}

/* Pool blocks are sorted (ffb returns them ascending), so sorting pool
 * indices sorts the homes. */
static void gen_txn(struct run *r, struct txn *t, size_t n, unsigned nrev)
{
	unsigned bs = r->im->c->bs;
	bool used[POOL] = {false};

	t->n = n;
	t->idx = t_xmalloc(n * sizeof(int));
	t->homes = t_xmalloc(n * sizeof(uint64_t));
	t->copies = t_xmalloc(n * bs);
	for (size_t i = 0; i < n; i++) {
		int k;

		do
			k = (int)rnd_below(POOL);
		while (used[k]);
		used[k] = true;
		t->idx[i] = k;
	}
	qsort(t->idx, n, sizeof(int), cmp_idx);
	for (size_t i = 0; i < n; i++) {
		uint8_t *blk = t->copies + i * bs;

		t->homes[i] = r->im->pool[t->idx[i]];
		for (unsigned b = 0; b < bs; b += 8) {
			uint64_t v = rnd();
			memcpy(blk + b, &v, 8);
		}
		if (rnd_below(4) == 0) {
			be32_put(blk, JBD2_MAGIC);
			r->escaped++;
		}
	}
	t->rev = t_xmalloc((nrev + 1) * sizeof(uint64_t));
	t->rev_idx = t_xmalloc((nrev + 1) * sizeof(int));
	t->nrev = 0;
	for (unsigned i = 0; i < nrev * 20 && t->nrev < nrev; i++) {
		int k = (int)rnd_below(POOL);

		if (used[k])
			continue;
		used[k] = true;
		t->rev_idx[t->nrev] = k;
		t->rev[t->nrev++] = r->im->pool[k];
	}
}

static void free_run(struct run *r)
{
	for (size_t i = 0; i < r->nt; i++) {
		free(r->t[i].idx);
		free(r->t[i].homes);
		free(r->t[i].copies);
		free(r->t[i].rev);
		free(r->t[i].rev_idx);
	}
	free(r->t);
}

/*
 * Expected pool contents: home writes of every transaction before tid S
 * (trans.c's checkpoint, durable before the log tail moved past them),
 * then replay of [S, E): a block gets the newest copy logged after the
 * newest transaction in [S, E) that revoked it.
 */
static uint8_t *expected_skip(struct run *r, uint32_t S, uint32_t E, int64_t skip_tid,
			      size_t skip_k)
{
	unsigned bs = r->im->c->bs;
	uint8_t *exp = t_xmalloc((size_t)POOL * bs);
	int64_t maxrev[POOL];

	memcpy(exp, r->im->orig, (size_t)POOL * bs);
	for (int k = 0; k < POOL; k++)
		maxrev[k] = -1;
	for (size_t i = 0; i < r->nt; i++) {
		struct txn *t = &r->t[i];

		if (t->tid >= S && t->tid < E)
			for (size_t k = 0; k < t->nrev; k++)
				maxrev[t->rev_idx[k]] = t->tid;
	}
	for (size_t i = 0; i < r->nt; i++) {
		struct txn *t = &r->t[i];

		if (t->tid >= E)
			continue;
		for (size_t k = 0; k < t->n; k++)
			if ((t->tid < S || (int64_t)t->tid > maxrev[t->idx[k]]) &&
			    !((int64_t)t->tid == skip_tid && k == skip_k))
				memcpy(exp + (size_t)t->idx[k] * bs, t->copies + k * bs, bs);
	}
	return exp;
}

static uint8_t *expected(struct run *r, uint32_t S, uint32_t E)
{
	return expected_skip(r, S, E, -1, 0);
}

/* Is block k of transaction t revoked by a newer transaction below E? */
static bool revoked_later(struct run *r, const struct txn *t, size_t k, uint32_t E)
{
	for (size_t i = 0; i < r->nt; i++)
		if (r->t[i].tid > t->tid && r->t[i].tid < E)
			for (size_t j = 0; j < r->t[i].nrev; j++)
				if (r->t[i].rev_idx[j] == t->idx[k])
					return true;
	return false;
}

/* Write transactions < S home on d (what trans.c did before the crash). */
static void write_homes_before(struct run *r, struct bdev *d, uint32_t S)
{
	unsigned bs = r->im->c->bs;

	for (size_t i = 0; i < r->nt; i++)
		if (r->t[i].tid < S)
			for (size_t k = 0; k < r->t[i].n; k++)
				bdev_write(d, r->t[i].copies + k * bs, bs, r->t[i].homes[k] * bs);
}

static int compare_pool(struct run *r, struct bdev *d, const uint8_t *exp, const char *what)
{
	unsigned bs = r->im->c->bs;
	uint8_t *buf = t_xmalloc(bs);
	int bad = 0;

	for (int k = 0; k < POOL; k++) {
		bdev_read(d, buf, bs, r->im->pool[k] * bs);
		if (memcmp(buf, exp + (size_t)k * bs, bs)) {
			if (bad++ < 5)
				fprintf(stderr, "FAIL %s: block %llu (pool %d) differs\n", what,
					(unsigned long long)r->im->pool[k], k);
		}
	}
	free(buf);
	if (bad)
		t_failures++;
	return bad;
}

/* ------------------------------------------------------------ journal access */

static void read_jsb(struct bdev *d, const struct jbd2_log *log, struct jbd2_superblock *sb)
{
	bdev_read(d, sb, sizeof(*sb), log->phys[0] * log->fs->block_size);
}

static void write_jsb(struct bdev *d, const struct jbd2_log *log, struct jbd2_superblock *sb,
		      bool fix_csum)
{
	if (fix_csum)
		JPUT(sb, s_checksum, jbd2_sb_csum(sb));
	bdev_write(d, sb, sizeof(*sb), log->phys[0] * log->fs->block_size);
}

/* Log position of the first block of tid with this type (-1 if none). */
static int64_t find_block(struct bdev *d, const struct jbd2_log *log, uint32_t tid, uint32_t type)
{
	uint32_t bs = log->fs->block_size;
	uint8_t *b = t_xmalloc(bs);
	int64_t found = -1;

	for (uint32_t i = log->first; i < log->last && found < 0; i++) {
		bdev_read(d, b, bs, log->phys[i] * bs);
		if (be32_get(b) == JBD2_MAGIC && be32_get(b + 4) == type && be32_get(b + 8) == tid)
			found = i;
	}
	free(b);
	return found;
}

static void flip_byte(struct bdev *d, const struct jbd2_log *log, uint32_t pos, uint32_t off)
{
	uint64_t at = log->phys[pos] * log->fs->block_size + off;
	uint8_t v;

	bdev_read(d, &v, 1, at);
	v ^= 0x5a;
	bdev_write(d, &v, 1, at);
}

/* ------------------------------------------------------------ one logging run */

struct logged {
	struct bdev *dev;           /* copy of the device after the commits */
	struct jbd2_log log;        /* the journal map (log.fs is stale: only fields) */
	uint64_t *phys;
	uint32_t block_size;
	unsigned writes, flushes;
};

/* Mount im, open its journal, commit r's transactions; copy the device. */
static void log_run(struct run *r, struct logged *out, bool mark_empty)
{
	struct bdev *d;
	struct uext4_fs *fs;
	struct journal *j;
	struct counting cnt = {0};
	struct jbd2_superblock sb;
	struct bdev *real;
	int err;

	d = bdev_open_memory_copy(r->im->path, &err);
	fs = mount_dev(d);
	err = journal_open(fs, &super_journal_host, &j);
	T_CHECK(err == 0 && j, "%s: journal_open: %d %s", r->im->c->name, err, uext4_last_error());
	if (err || !j)
		exit(T_FAIL);
	r->first_tid = journal_first_tid(j);
	err = jbd2_log_load(fs, &super_journal_host, &out->log);
	T_CHECK(err == 0, "jbd2_log_load %d", err);
	real = fs->dev;
	cnt.base = real;
	cnt.dev = (struct bdev){.ops = &cnt_ops, .size = real->size, .priv = &cnt};
	fs->dev = &cnt.dev;
	for (size_t i = 0; i < r->nt; i++) {
		struct txn *t = &r->t[i];

		t->tid = r->first_tid + (uint32_t)i;
		err = journal_commit(j, t->tid, t->homes, t->copies, t->n, t->rev, t->nrev);
		T_CHECK(err == 0, "journal_commit tid %u (%zu blocks): %d %s", t->tid, t->n, err,
			uext4_last_error());
	}
	if (mark_empty)
		T_CHECK(journal_mark_empty(j) == 0, "journal_mark_empty");
	fs->dev = real;
	out->writes = cnt.writes;
	out->flushes = cnt.flushes;
	read_jsb(real, &out->log, &sb);
	T_CHECK(!!(JGET(&sb, s_feature_incompat) & JBD2_FEATURE_INCOMPAT_CSUM_V3) == r->im->c->csum,
		"%s: csum_v3 feature 0x%x", r->im->c->name, JGET(&sb, s_feature_incompat));
	T_CHECK(!!(JGET(&sb, s_feature_incompat) & JBD2_FEATURE_INCOMPAT_64BIT) == r->im->c->bit64,
		"%s: 64bit feature 0x%x", r->im->c->name, JGET(&sb, s_feature_incompat));
	T_CHECK(!(JGET(&sb, s_feature_incompat) & JBD2_FEATURE_INCOMPAT_CSUM_V2), "no csum_v2");
	if (r->im->c->csum)
		T_CHECK(JGET(&sb, s_checksum) == jbd2_sb_csum(&sb), "journal superblock checksum");
	out->dev = dev_copy(real);
	out->block_size = fs->block_size;
	journal_close(j);
	super_umount(fs);
	out->log.fs = NULL;
}

/* The journal map of lg, with a stand-in fs that only gives the block
 * size (the mount it was read on is gone). */
static struct jbd2_log fixed_log(struct logged *lg, struct uext4_fs *fake)
{
	struct jbd2_log l = lg->log;

	fake->block_size = lg->block_size;
	l.fs = fake;
	return l;
}

/* Recover a copy of lg->dev (after prepare, if any); returns the mount's
 * result code and fills rep; the recovered device is left in *after. */
static int recover_copy(struct logged *lg, struct journal_replay *rep, struct bdev **after,
			void (*prepare)(struct bdev *d, struct logged *lg, void *arg), void *arg)
{
	struct bdev *d = dev_copy(lg->dev);
	struct uext4_fs *fs;
	int err;

	if (prepare)
		prepare(d, lg, arg);
	fs = mount_dev(d);
	lg->log.fs = fs;
	fs_clear_err();
	err = journal_recover(fs, &super_journal_host, rep);
	if (after)
		*after = dev_copy(fs->dev);
	super_umount(fs);
	lg->log.fs = NULL;
	return err;
}

struct homes_arg {
	struct run *r;
	uint32_t S;
};
static void prep_homes(struct bdev *d, struct logged *lg, void *arg)
{
	struct homes_arg *a = arg;
	write_homes_before(a->r, d, a->S);
}

/* A logged block expected to be skipped for its bad checksum. */
struct skipped {
	const struct txn *t;    /* NULL: none */
	size_t k;
};

/* Recover and compare; expected end tid E, transactions and bad-csum flag,
 * and the data block skipped for a bad checksum, if any. */
static void check_recovery_skip(struct run *r, struct logged *lg, uint32_t E, uint32_t ntrans,
				bool bad_csum, struct skipped sk, const char *what,
				void (*corrupt)(struct bdev *d, struct logged *lg, void *arg),
				void *carg)
{
	struct journal_replay rep, rep2;
	struct jbd2_superblock sb;
	struct bdev *after;
	struct uext4_fs fake = {0};
	struct jbd2_log l = fixed_log(lg, &fake);
	uint32_t S;
	uint8_t *exp;
	int err;

	read_jsb(lg->dev, &l, &sb);
	S = JGET(&sb, s_sequence);      /* the log tail: older transactions went home */
	struct homes_arg ha = {r, S};
	struct bdev *pre = dev_copy(lg->dev);
	struct logged lg2 = *lg;

	prep_homes(pre, lg, &ha);
	if (corrupt)
		corrupt(pre, lg, carg);
	lg2.dev = pre;
	err = recover_copy(&lg2, &rep, &after, NULL, NULL);
	T_CHECK(err == 0, "%s: journal_recover: %d %s", what, err, uext4_last_error());
	T_CHECK(rep.first_tid == S && rep.end_tid == E && rep.transactions == ntrans &&
			rep.stopped_on_bad_csum == bad_csum,
		"%s: replay first %u end %u transactions %u bad_csum %d, expected %u %u %u %d", what,
		rep.first_tid, rep.end_tid, rep.transactions, rep.stopped_on_bad_csum, S, E, ntrans,
		bad_csum);
	{
		bool counts = sk.t && !revoked_later(r, sk.t, sk.k, E);
		struct ext4_super_block fsb;

		T_CHECK(rep.bad_blocks == (counts ? 1u : 0u), "%s: %u bad blocks reported, want %u",
			what, rep.bad_blocks, counts ? 1u : 0u);
		if (counts && rep.bad_blocks)
			T_CHECK(rep.bad_home == sk.t->homes[sk.k] && rep.bad_tid == sk.t->tid,
				"%s: bad block reported for home %llu tid %u, want %llu tid %u", what,
				(unsigned long long)rep.bad_home, rep.bad_tid,
				(unsigned long long)sk.t->homes[sk.k], sk.t->tid);
		bdev_read(after, &fsb, sizeof(fsb), 1024);
		T_CHECK(!!(le16(fsb.s_state) & EXT4_ERROR_FS) == counts,
			"%s: s_state 0x%x after recovery (EXT4_ERROR_FS wanted: %d)", what,
			le16(fsb.s_state), counts);
		if (counts)
			printf("  %s: block %llu of tid %u skipped (journal block %u), "
			       "EXT4_ERROR_FS set\n", what, (unsigned long long)rep.bad_home,
			       rep.bad_tid, rep.bad_logpos);
		else if (sk.t)
			printf("  %s: the bad block was revoked later: no error\n", what);
	}
	exp = sk.t ? expected_skip(r, S, E, sk.t->tid, sk.k) : expected(r, S, E);
	if (!compare_pool(r, after, exp, what))
		printf("  %s: replayed tids [%u, %u): %u transactions, %u blocks, %u revoke "
		       "records; pool of %d blocks as expected\n", what, rep.first_tid, rep.end_tid,
		       rep.transactions, rep.blocks, rep.revoked, POOL);
	read_jsb(after, &l, &sb);
	T_CHECK(JGET(&sb, s_start) == 0 && JGET(&sb, s_sequence) == E + 1,
		"%s: after recovery s_start %u s_sequence %u (want 0, %u)", what,
		JGET(&sb, s_start), JGET(&sb, s_sequence), E + 1);
	/* A second recovery finds an empty journal. */
	lg2.dev = after;
	err = recover_copy(&lg2, &rep2, NULL, NULL, NULL);
	T_CHECK(err == 0 && rep2.transactions == 0 && rep2.blocks == 0,
		"%s: second recovery %d transactions %u", what, err, rep2.transactions);
	free(exp);
	bdev_close(pre);
	bdev_close(after);
}

static void check_recovery(struct run *r, struct logged *lg, uint32_t E, uint32_t ntrans,
			   bool bad_csum, const char *what,
			   void (*corrupt)(struct bdev *d, struct logged *lg, void *arg), void *carg)
{
	check_recovery_skip(r, lg, E, ntrans, bad_csum, (struct skipped){NULL, 0}, what, corrupt,
			    carg);
}

/* ------------------------------------------------------------ corruptions */

struct corrupt_arg {
	uint32_t tid;
	uint32_t type;      /* block type to damage; 0 = first data block */
	bool magic;         /* damage the magic instead of a checksummed byte */
	uint32_t data_k;    /* type 0: the data block of this tag (one descriptor) */
};

static void corrupt_block(struct bdev *d, struct logged *lg, void *arg)
{
	struct corrupt_arg *a = arg;
	struct uext4_fs fake = {0};
	struct jbd2_log l = fixed_log(lg, &fake);
	int64_t pos = find_block(d, &l, a->tid, a->type ? a->type : JBD2_DESCRIPTOR_BLOCK);

	T_CHECK(pos >= 0, "block of type %u of tid %u not found", a->type, a->tid);
	if (pos < 0)
		return;
	if (a->type == 0) {     /* data block data_k after the descriptor */
		uint32_t at = jbd2_next(&l, (uint32_t)pos);

		for (uint32_t k = 0; k < a->data_k; k++)
			at = jbd2_next(&l, at);
		flip_byte(d, &l, at, 100);
	}
	else if (a->magic)
		flip_byte(d, &l, (uint32_t)pos, 1);
	else
		flip_byte(d, &l, (uint32_t)pos, a->type == JBD2_COMMIT_BLOCK ? 200 : lg->block_size - 8);
}

/* ------------------------------------------------------------ scenarios */

static void scenario_basic(struct image *im)
{
	struct run r = {.im = im, .nt = 6};
	struct logged lg;
	uint32_t per_desc;

	r.t = calloc(r.nt, sizeof(*r.t));
	for (size_t i = 0; i < r.nt; i++)
		gen_txn(&r, &r.t[i], 1 + rnd_below(40), 1 + (unsigned)rnd_below(6));
	/* One transaction needing several descriptor blocks. */
	free(r.t[3].idx), free(r.t[3].homes), free(r.t[3].copies), free(r.t[3].rev),
		free(r.t[3].rev_idx);
	gen_txn(&r, &r.t[3], 250, 30);
	log_run(&r, &lg, false);
	per_desc = (uint32_t)((im->c->bs - 12 - 16 - (im->c->csum ? 4 : 0)) /
			      (im->c->csum ? 16 : (im->c->bit64 ? 12 : 8)));
	printf("%s: %zu transactions (%u escaped blocks, %u tags per descriptor): %u device "
	       "writes, %u flushes\n", im->c->name, r.nt, r.escaped, per_desc, lg.writes, lg.flushes);
	/* Per commit: the log body and the commit block, two flushes; plus
	 * the first tail write (superblock, two flushes). */
	T_CHECK(lg.writes <= 2 * r.nt + 1 + 2, "%u writes for %zu commits", lg.writes, r.nt);
	T_CHECK(lg.flushes == 2 * r.nt + 2, "%u flushes for %zu commits", lg.flushes, r.nt);
	check_recovery(&r, &lg, r.first_tid + (uint32_t)r.nt, (uint32_t)r.nt, false,
		       "(a) replay", NULL, NULL);

	/* (b) damage in the middle transaction of the first three. */
	{
		uint32_t mid = r.first_tid + 1;
		struct corrupt_arg cm = {mid, JBD2_COMMIT_BLOCK, !im->c->csum, 0};
		struct corrupt_arg cd = {mid, JBD2_DESCRIPTOR_BLOCK, !im->c->csum, 0};
		struct corrupt_arg cdata = {mid, 0, false, 0};

		check_recovery(&r, &lg, mid, 1, im->c->csum, im->c->csum ? "(b) bad commit checksum"
							: "(b) damaged commit magic",
			       corrupt_block, &cm);
		check_recovery(&r, &lg, mid, 1, im->c->csum, im->c->csum ? "(b) bad descriptor checksum"
							: "(b) damaged descriptor magic",
			       corrupt_block, &cd);
		/* Data block k after the descriptor is tag k: once one that a
		 * later transaction revoked (no error), once one it did not. */
		uint32_t E = r.first_tid + (uint32_t)r.nt, k = 0;

		while (k + 1 < r.t[1].n && revoked_later(&r, &r.t[1], k, E))
			k++;
		cdata.data_k = k;
		if (im->c->csum)
			check_recovery_skip(&r, &lg, E, (uint32_t)r.nt, false,
					    (struct skipped){&r.t[1], k},
					    "(b) bad data block checksum (v3 tag)", corrupt_block,
					    &cdata);
		for (k = 0; k < r.t[1].n && !revoked_later(&r, &r.t[1], k, E); k++)
			;
		cdata.data_k = k;
		if (im->c->csum && k < r.t[1].n)
			check_recovery_skip(&r, &lg, E, (uint32_t)r.nt, false,
					    (struct skipped){&r.t[1], k},
					    "(b) bad checksum on a block revoked later", corrupt_block,
					    &cdata);
	}
	/* (e) logdump and e2fsck on the image left with a non-empty journal. */
	{
		char path[300], cmd[400], *out, want[64];
		struct bdev *d = dev_copy(lg.dev);
		struct ext4_super_block sb;
		uint8_t *exp = expected(&r, r.first_tid, r.first_tid + (uint32_t)r.nt);
		struct bdev *fd;
		int err;

		bdev_read(d, &sb, sizeof(sb), 1024);
		sb.s_feature_incompat = le32(le32(sb.s_feature_incompat) | EXT4_FEATURE_INCOMPAT_RECOVER);
		if (im->c->csum)
			sb.s_checksum = le32(crc32c(~0u, &sb, offsetof(struct ext4_super_block, s_checksum)));
		bdev_write(d, &sb, sizeof(sb), 1024);
		snprintf(path, sizeof(path), "%s/%s-dirty.img", tmpdir, im->c->name);
		dev_save(d, path);
		bdev_close(d);
		snprintf(cmd, sizeof(cmd), "debugfs -R 'logdump -a' %s 2>&1", path);
		out = t_sh_out(cmd);
		snprintf(want, sizeof(want), "FS block %llu logged at", (unsigned long long)r.t[0].homes[0]);
		T_CHECK(strstr(out, want) != NULL, "logdump does not show '%s'", want);
		snprintf(want, sizeof(want), "Found expected sequence %u, type 2 (commit block)",
			 r.first_tid + (uint32_t)r.nt - 1);
		T_CHECK(strstr(out, want) != NULL, "logdump does not show '%s'", want);
		snprintf(want, sizeof(want), "No magic number at block");
		T_CHECK(strstr(out, want) || strstr(out, "Found sequence"),
			"logdump does not end cleanly");
		T_CHECK(strstr(out, "revoke") != NULL, "logdump shows no revoke block");
		printf("  (e) debugfs logdump shows our %zu transactions\n", r.nt);
		free(out);
		snprintf(cmd, sizeof(cmd), "e2fsck -fy %s 2>&1", path);
		out = t_sh_out(cmd);
		T_CHECK(strstr(out, "recovering journal") != NULL, "e2fsck -fy did not recover: %s", out);
		free(out);
		fd = bdev_open_memory_copy(path, &err);
		T_CHECK(fd != NULL, "reading %s back", path);
		if (fd && !compare_pool(&r, fd, exp, "(e) e2fsck replay"))
			printf("  (e) e2fsck -fy replayed our journal: pool as expected\n");
		if (fd)
			bdev_close(fd);
		t_fsck_clean(path);
		free(exp);
	}
	bdev_close(lg.dev);
	jbd2_log_free(&lg.log);
	free_run(&r);
}

/* (c) many more transactions than the log holds. */
static void scenario_wrap(struct image *im)
{
	struct run r = {.im = im, .nt = 60};
	struct logged lg;
	struct uext4_fs fake = {0};
	struct jbd2_log l;
	struct jbd2_superblock sb;
	uint32_t S;

	r.t = calloc(r.nt, sizeof(*r.t));
	for (size_t i = 0; i < r.nt; i++)
		gen_txn(&r, &r.t[i], 20 + rnd_below(60), (unsigned)rnd_below(5));
	log_run(&r, &lg, false);
	l = fixed_log(&lg, &fake);
	read_jsb(lg.dev, &l, &sb);
	S = JGET(&sb, s_sequence);
	printf("%s wrap: %zu transactions through a %u-block log: tail now at tid %u, log block "
	       "%u; %u writes, %u flushes\n", im->c->name, r.nt, l.last - l.first, S,
	       JGET(&sb, s_start), lg.writes, lg.flushes);
	T_CHECK(S > r.first_tid + 5, "the log tail never moved (tid %u)", S);
	check_recovery(&r, &lg, r.first_tid + (uint32_t)r.nt,
		       r.first_tid + (uint32_t)r.nt - S, false, "(c) wrapped log replay", NULL, NULL);
	/* Clean unmount: mark_empty leaves nothing to replay. */
	{
		struct logged lg2;
		struct journal_replay rep;
		struct run r2 = r;
		int err;

		log_run(&r2, &lg2, true);
		err = recover_copy(&lg2, &rep, NULL, NULL, NULL);
		T_CHECK(err == 0 && rep.transactions == 0 && rep.blocks == 0,
			"after journal_mark_empty: %d, %u transactions", err, rep.transactions);
		l = fixed_log(&lg2, &fake);
		read_jsb(lg2.dev, &l, &sb);
		T_CHECK(JGET(&sb, s_start) == 0 && JGET(&sb, s_sequence) == r.first_tid + r.nt,
			"mark_empty: s_start %u s_sequence %u", JGET(&sb, s_start), JGET(&sb, s_sequence));
		printf("  journal_mark_empty: s_start 0, s_sequence %u; recovery does nothing\n",
		       JGET(&sb, s_sequence));
		bdev_close(lg2.dev);
		jbd2_log_free(&lg2.log);
	}
	bdev_close(lg.dev);
	jbd2_log_free(&lg.log);
	free_run(&r);
}

/* (d) corrupt superblock fields, counts, tags; random damage. */
enum jsb_damage { D_MAGIC, D_START, D_MAXLEN, D_BLOCKSIZE, D_FEATURE, D_CSUM, D_FIRST, D_COUNT };
static const char *const damage_names[] = {"bad magic", "s_start beyond the log",
	"s_maxlen beyond the inode", "wrong s_blocksize", "unknown incompat feature 0x4000",
	"superblock checksum", "s_first 0"};
static const char *const damage_msgs[] = {"magic", "log start", "s_maxlen", "block size",
	"incompat_0x4000", "checksum", "s_first"};

static void damage_jsb(struct bdev *d, struct logged *lg, void *arg)
{
	enum jsb_damage k = *(enum jsb_damage *)arg;
	struct uext4_fs fake = {0};
	struct jbd2_log l = fixed_log(lg, &fake);
	struct jbd2_superblock sb;

	read_jsb(d, &l, &sb);
	switch (k) {
	case D_MAGIC: JPUT(&sb, s_header.h_magic, 0x12345678); break;
	case D_START: JPUT(&sb, s_start, JGET(&sb, s_maxlen) + 7); break;
	case D_MAXLEN: JPUT(&sb, s_maxlen, 0x7fffffff); break;
	case D_BLOCKSIZE: JPUT(&sb, s_blocksize, lg->block_size * 2); break;
	case D_FEATURE: JPUT(&sb, s_feature_incompat, JGET(&sb, s_feature_incompat) | 0x4000); break;
	case D_CSUM: JPUT(&sb, s_errno, 5); break;
	case D_FIRST: JPUT(&sb, s_first, 0); break;
	default: break;
	}
	write_jsb(d, &l, &sb, k != D_CSUM && (JGET(&sb, s_feature_incompat) & JBD2_FEATURE_INCOMPAT_CSUM_V3));
}

/* A valid-looking (re-checksummed) revoke count or tag that is wrong. */
struct logical_arg {
	uint32_t tid;
	bool revoke;
	bool csum, bit64;
};
static void damage_logical(struct bdev *d, struct logged *lg, void *arg)
{
	struct logical_arg *a = arg;
	struct uext4_fs fake = {0};
	struct jbd2_log l = fixed_log(lg, &fake);
	uint32_t bs = lg->block_size;
	int64_t pos = find_block(d, &l, a->tid, a->revoke ? JBD2_REVOKE_BLOCK : JBD2_DESCRIPTOR_BLOCK);
	uint8_t *b = t_xmalloc(bs);
	struct jbd2_fmt f = {.block_size = bs, .csum_v3 = a->csum, .bit64 = a->bit64};
	struct jbd2_superblock sb;

	T_CHECK(pos >= 0, "no block to damage");
	if (pos < 0) {
		free(b);
		return;
	}
	read_jsb(d, &l, &sb);
	f.seed = jbd2_uuid_seed(sb.s_uuid);
	bdev_read(d, b, bs, l.phys[pos] * bs);
	if (a->revoke)
		be32_put(b + 12, bs + 64);
	else
		be32_put(b + 12, 0xfffffff0u);  /* first tag's block number */
	if (a->bit64 && !a->revoke)
		be32_put(b + 12 + 8, 0x7fff);
	if (a->csum)
		jbd2_tail_set(&f, b);
	bdev_write(d, b, bs, l.phys[pos] * bs);
	free(b);
}

static void fuzz_log(struct bdev *d, struct logged *lg, void *arg)
{
	struct uext4_fs fake = {0};
	struct jbd2_log l = fixed_log(lg, &fake);
	unsigned hits = 1 + (unsigned)rnd_below(8);
	uint32_t used = *(uint32_t *)arg;

	for (unsigned i = 0; i < hits; i++) {
		uint32_t pos = l.first + (uint32_t)rnd_below(used);
		uint32_t off = (uint32_t)rnd_below(rnd_below(2) ? 64 : lg->block_size);

		flip_byte(d, &l, pos, off);
	}
}

static void scenario_corrupt(struct image *im)
{
	struct run r = {.im = im, .nt = 3};
	struct logged lg;
	struct journal_replay rep;
	unsigned fuzz_ok = 0, fuzz_err = 0;
	uint32_t used;

	r.t = calloc(r.nt, sizeof(*r.t));
	for (size_t i = 0; i < r.nt; i++)
		gen_txn(&r, &r.t[i], 5 + rnd_below(100), 3);
	log_run(&r, &lg, false);
	for (enum jsb_damage k = 0; k < D_COUNT; k++) {
		int err;

		if (k == D_CSUM && !im->c->csum)
			continue;
		err = recover_copy(&lg, &rep, NULL, damage_jsb, &k);
		T_CHECK(err < 0 && strstr(uext4_last_error(), damage_msgs[k]),
			"(d) %s: err %d message '%s'", damage_names[k], err, uext4_last_error());
		printf("  (d) %s: %d \"%s\"\n", damage_names[k], err, uext4_last_error());
	}
	for (int rv = 0; rv < 2; rv++) {
		struct logical_arg a = {r.first_tid, rv == 1, im->c->csum, im->c->bit64};
		int err = recover_copy(&lg, &rep, NULL, damage_logical, &a);

		T_CHECK(err == -EUCLEAN, "(d) %s: err %d '%s'", rv ? "revoke count" : "tag block",
			err, uext4_last_error());
		printf("  (d) %s: %d \"%s\"\n", rv ? "revoke r_count too big" : "tag beyond the fs",
		       err, uext4_last_error());
	}
	used = 0;
	for (size_t i = 0; i < r.nt; i++)
		used += (uint32_t)(r.t[i].n + 4);
	for (int i = 0; i < FUZZ_RUNS; i++) {
		int err = recover_copy(&lg, &rep, NULL, fuzz_log, &used);

		if (err == 0)
			fuzz_ok++;
		else {
			fuzz_err++;
			T_CHECK(uext4_last_error()[0] != 0, "fuzz: error %d without a message", err);
		}
	}
	printf("  (d) %d randomly damaged logs: %u recovered (up to the damage), %u refused with "
	       "a message, no crash\n", FUZZ_RUNS, fuzz_ok, fuzz_err);
	bdev_close(lg.dev);
	jbd2_log_free(&lg.log);
	free_run(&r);
}

/* journal_open refuses an external journal whose device the mount did not
 * open (and a journal device) with a clear message.  The mount itself
 * already refuses such images without -o journal=, so the superblock is
 * changed in memory after a mount. */
static void check_external(struct image *im)
{
	int err;
	struct bdev *d = bdev_open_memory_copy(im->path, &err);
	struct uext4_fs *fs = mount_dev(d);
	struct journal *j = NULL;
	uint32_t inum = fs->sb.s_journal_inum;

	fs->sb.s_journal_inum = 0;
	fs->sb.s_journal_dev = le32(0x0811);
	err = journal_open(fs, &super_journal_host, &j);
	T_CHECK(err == -EINVAL && !j && strstr(uext4_last_error(), "external") &&
			strstr(uext4_last_error(), "journal="),
		"external journal: %d '%s'", err, uext4_last_error());
	printf("  external journal refused: \"%s\"\n", uext4_last_error());
	fs->sb.s_journal_inum = inum;
	fs->feature_incompat |= EXT4_FEATURE_INCOMPAT_JOURNAL_DEV;
	err = journal_open(fs, &super_journal_host, &j);
	T_CHECK(err < 0 && !j && strstr(uext4_last_error(), "journal_dev"),
		"journal device: %d '%s'", err, uext4_last_error());
	fs->feature_incompat &= ~EXT4_FEATURE_INCOMPAT_JOURNAL_DEV;
	super_umount(fs);
}

static void remove_tmpdir(void)
{
	if (tmpdir[0])
		t_sh("rm -rf %s", tmpdir);
}

int main(void)
{
	uint64_t seed = t_seed("unit_journal", "UNIT_JOURNAL_SEED");

	rng_state = seed;
	t_need_tools("mke2fs debugfs e2fsck");
	t_tmpdir(tmpdir, sizeof(tmpdir), "unit_journal");
	atexit(remove_tmpdir);     /* also on the exit(T_FAIL) paths */
	for (size_t c = 0; c < sizeof(cfgs) / sizeof(cfgs[0]); c++) {
		struct image im, small;

		make_pool_image(&im, &cfgs[c], "8");
		scenario_basic(&im);
		scenario_corrupt(&im);
		check_external(&im);
		/* The smallest journal mke2fs makes: 1024 blocks. */
		make_pool_image(&small, &cfgs[c], cfgs[c].bs == 1024 ? "1" : "4");
		scenario_wrap(&small);
		free(im.orig);
		free(small.orig);
	}
	if (t_failures) {
		printf("unit_journal: %d FAILURES (seed %llu)\n", t_failures, (unsigned long long)seed);
		return T_FAIL;
	}
	printf("unit_journal: all checks passed\n");
	return T_PASS;
}
