/*
 * cache_race.c - the lock-free hits of the buffer and inode caches,
 * raced under caches so small that eviction runs all
 * the time.  Meant for TSan (the name has "race": tests/run.sh runs it
 * there), and checked in every build:
 *
 *   1. Buffer cache, 8 threads, a limit of 16 blocks: bread() of random
 *      blocks (a hot set and the rest), each checked against its pattern
 *      and number while up to 4 are held; bget() left unread (must not
 *      stay cached); and, on a range of their own, bget_new() and
 *      bcache_forget() of idle and held buffers (both ways of dropping a
 *      buffer at once).  Then: hits + misses = breads, misses = device
 *      reads, evictions > 0, nothing over the limit, every cached buffer
 *      unreferenced (no leaked or lost reference).
 *   2. Inode cache, a mounted image with UEXT4_ICACHE_UNUSED=64 (one idle
 *      inode per shard): 6 threads iget()/iput() and stat the same 200
 *      numbers while 2 threads create and unlink files (new numbers,
 *      freed numbers reused, deleted inodes still held).  Each iget()
 *      returns an inode of the number asked, a regular file with its
 *      link; each stat agrees with its number.  e2fsck -fn clean after.
 *   3. Warm hits take no cache lock: on a default mount, after a warm-up,
 *      20000 iget()/iput() and bread()/brelse() of cached objects count
 *      fewer than 1% as many icache_shard and bcache_shard acquisitions
 *      (before this work each hit took one).
 * The seed is printed; UEXT4_SEED=N repeats a run.
 */
/* run-in: release asan tsan */
#include <pthread.h>
#include <stdatomic.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bcache.h"
#include "blockdev.h"
#include "icache.h"
#include "inode.h"
#include "internal.h"
#include "lock.h"
#include "uext4.h"
#include "t.h"

#define BS 4096u

static unsigned g_seed;

static unsigned next_rand(unsigned *s)
{
	*s = *s * 1103515245u + 12345u;
	return *s >> 8;
}

/* ------------------------------------------------------------ 1: bcache */

#define NBLOCKS 256u
#define FORGET_BASE 200u    /* blocks 200..255: bget_new/forget only */
#define B_THREADS 8

static uint32_t pattern(uint64_t b, uint32_t i)
{
	return (uint32_t)(((b << 32 | i) * 0x9E3779B97F4A7C15ull) >> 29);
}

static bool block_ok(const uint8_t *p, uint64_t b)
{
	for (uint32_t i = 0; i < BS / 4; i++) {
		uint32_t v;

		memcpy(&v, p + 4 * i, 4);
		if (v != pattern(b, i))
			return false;
	}
	return true;
}

static _Atomic uint64_t g_dev_reads;

struct counting_dev {
	struct bdev bdev;
	struct bdev *inner;
};

static int cnt_read(struct bdev *d, void *buf, size_t len, uint64_t off)
{
	atomic_fetch_add(&g_dev_reads, 1);
	return bdev_read(((struct counting_dev *)d)->inner, buf, len, off);
}

static int cnt_write(struct bdev *d, const void *buf, size_t len, uint64_t off)
{
	return bdev_write(((struct counting_dev *)d)->inner, buf, len, off);
}

static int cnt_flush(struct bdev *d)
{
	return bdev_flush(((struct counting_dev *)d)->inner);
}

static void cnt_close(struct bdev *d)
{
	bdev_close(((struct counting_dev *)d)->inner);
	free(d);
}

static const struct bdev_ops cnt_ops = { .read = cnt_read, .write = cnt_write, .flush = cnt_flush, .close = cnt_close };

static struct bdev *pattern_dev(void)
{
	struct bdev *m = bdev_open_memory((uint64_t)NBLOCKS * BS);
	struct counting_dev *c = t_xmalloc(sizeof(*c));
	uint8_t blk[BS];

	if (!m) {
		fprintf(stderr, "FAIL: memory device\n");
		exit(T_FAIL);
	}
	for (uint64_t b = 0; b < NBLOCKS; b++) {
		for (uint32_t i = 0; i < BS / 4; i++) {
			uint32_t v = pattern(b, i);

			memcpy(blk + 4 * i, &v, 4);
		}
		if (bdev_write(m, blk, BS, b * BS))
			exit(T_FAIL);
	}
	memset(c, 0, sizeof(*c));
	c->bdev = *m;
	c->bdev.ops = &cnt_ops;
	c->inner = m;
	return &c->bdev;
}

struct bctx {
	struct bcache *bc;
	unsigned seed;
	int iters;
	uint64_t breads;
	int bad;
};

/* bget_new()/bcache_forget() on blocks nobody reads: buffers dropped
 * while idle (forget) and while held (their release drops them). */
static void forget_step(struct bctx *c, unsigned r)
{
	uint64_t blk = FORGET_BASE + r % (NBLOCKS - FORGET_BASE);
	struct buf *b;

	if (r & 1) {
		bcache_forget(c->bc, blk, 1);
		return;
	}
	if (bget_new(c->bc, blk, &b)) {
		c->bad++;
		return;
	}
	if (b->blocknr != blk)
		c->bad++;
	if (r & 2)
		bcache_forget(c->bc, blk, 1); /* while we hold it */
	brelse(c->bc, b);
}

static void *bcache_thread(void *arg)
{
	enum { HELD = 4 };
	struct bctx *c = arg;
	struct buf *held[HELD] = {0};

	for (int i = 0; i < c->iters; i++) {
		unsigned r = next_rand(&c->seed);
		uint64_t blk = (r & 3) ? r % 24 : r % FORGET_BASE;
		struct buf *b;

		if (r % 16 == 5) {
			forget_step(c, next_rand(&c->seed));
			continue;
		}
		if (r % 16 == 6) { /* a bget() nobody fills: must not stay cached */
			if (bget(c->bc, blk, &b) == 0)
				brelse(c->bc, b);
			continue;
		}
		if (bread(c->bc, blk, UEXT4_META_OTHER, &b)) {
			c->bad++;
			continue;
		}
		c->breads++;
		if (b->blocknr != blk || !block_ok(b->data, blk) ||
		    (atomic_load(&b->refcount) & 0xffff) < 1)
			c->bad++;
		if (held[i % HELD])
			brelse(c->bc, held[i % HELD]);
		held[i % HELD] = b;
	}
	for (int i = 0; i < HELD; i++)
		brelse(c->bc, held[i]);
	return NULL;
}

static void test_bcache(int iters)
{
	struct bdev *dev = pattern_dev();
	uint64_t limit = 16 * BS, total = 0;
	struct bcache *bc = bcache_create(dev, BS, limit);
	pthread_t t[B_THREADS];
	struct bctx ctx[B_THREADS];
	struct uext4_counters c;

	printf("1. bcache: %d threads x %d ops, limit %llu blocks\n", B_THREADS, iters,
	       (unsigned long long)(limit / BS));
	for (int i = 0; i < B_THREADS; i++) {
		ctx[i] = (struct bctx){ bc, g_seed + 7919u * (unsigned)i, iters, 0, 0 };
		pthread_create(&t[i], NULL, bcache_thread, &ctx[i]);
	}
	for (int i = 0; i < B_THREADS; i++) {
		pthread_join(t[i], NULL);
		T_CHECK(ctx[i].bad == 0, "thread %d: %d bad buffers", i, ctx[i].bad);
		total += ctx[i].breads;
	}
	bcache_counters(bc, &c);
	printf("   %llu breads: %llu hits, %llu misses, %llu evictions, %llu bytes cached\n",
	       (unsigned long long)total, (unsigned long long)c.cache_hits,
	       (unsigned long long)c.cache_misses, (unsigned long long)c.cache_evictions,
	       (unsigned long long)c.cached_bytes);
	T_CHECK(c.cache_hits + c.cache_misses == total, "hits + misses %llu != breads %llu",
		(unsigned long long)(c.cache_hits + c.cache_misses), (unsigned long long)total);
	T_CHECK(c.cache_misses == atomic_load(&g_dev_reads), "misses %llu != device reads %llu",
		(unsigned long long)c.cache_misses, (unsigned long long)atomic_load(&g_dev_reads));
	T_CHECK(c.cache_evictions > 0 && c.cache_hits > 0, "no evictions or no hits");
	T_CHECK(c.cached_bytes <= limit, "%llu bytes cached with nothing held (limit %llu)",
		(unsigned long long)c.cached_bytes, (unsigned long long)limit);
	for (uint64_t blk = 0; blk < NBLOCKS; blk++) {
		if (!bcache_uptodate(bc, blk))
			continue;
		struct buf *b;

		T_CHECK(bget(bc, blk, &b) == 0, "bget %llu", (unsigned long long)blk);
		T_CHECK(atomic_load(&b->refcount) == 1, "block %llu: refcount %u with one holder",
			(unsigned long long)blk, atomic_load(&b->refcount));
		T_CHECK(blk >= FORGET_BASE || block_ok(b->data, blk), "block %llu: wrong contents",
			(unsigned long long)blk);
		brelse(bc, b);
	}
	bcache_destroy(bc);
	bdev_close(dev);
}

/* ------------------------------------------------------------ 2: icache */

#define NFILES 200
#define I_READERS 6
#define I_WRITERS 2

static uext4_fs *g_fs;
static uint64_t g_ino[NFILES];
static atomic_int g_stop;

struct ictx {
	unsigned seed;
	int id;
	long ops;
	int bad;
};

static void *iget_thread(void *arg)
{
	struct ictx *c = arg;

	while (!atomic_load(&g_stop)) {
		unsigned r = next_rand(&c->seed);
		uint64_t ino = g_ino[r % NFILES];
		struct inode *n;
		struct uext4_stat st;

		if (r & 1) {
			if (iget(g_fs, ino, &n)) {
				c->bad++;
				continue;
			}
			urw_rdlock(&n->lock);
			if (n->ino != ino || !S_ISREG(n->mode) || n->links != 1)
				c->bad++;
			urw_unlock(&n->lock);
			iput(g_fs, n);
		} else if (uext4_getattr(g_fs, ino, &st) || st.ino != ino || !S_ISREG(st.mode)) {
			c->bad++;
		}
		c->ops++;
	}
	return NULL;
}

/* Create and unlink files of its own: numbers come and go (and come
 * back: a freed number is reused by a later create). */
static void *churn_thread(void *arg)
{
	struct ictx *c = arg;
	char name[32];

	for (int round = 0; !atomic_load(&g_stop); round++) {
		struct uext4_stat st;
		struct inode *n = NULL;

		snprintf(name, sizeof name, "churn-%d-%d", c->id, round % 8);
		if (uext4_create(g_fs, UEXT4_ROOT_INO, name, S_IFREG | 0644, &st)) {
			c->bad++;
			continue;
		}
		/* Sometimes hold it across its unlink: a deleted inode that
		 * is still referenced, freed at the last iput(). */
		if (round % 3 == 0 && iget(g_fs, st.ino, &n))
			c->bad++;
		if (uext4_unlink(g_fs, UEXT4_ROOT_INO, name))
			c->bad++;
		if (n)
			iput(g_fs, n);
		c->ops++;
	}
	return NULL;
}

/* A fresh image at a temporary name (img is its mkstemp template), made by
 * the library's own mkfs. */
static void mkfs_with_library(char *img)
{
	struct uext4_mkfs_opts mo = { .size = 64ull << 20, .inodes = 16384 };
	int fd = mkstemp(img);

	if (fd < 0) {
		perror("mkstemp");
		exit(T_FAIL);
	}
	close(fd);
	mo.force = 1;
	if (uext4_mkfs(img, &mo, NULL) < 0) {
		fprintf(stderr, "FAIL: mkfs: %s\n", uext4_last_error());
		exit(T_FAIL);
	}
}

static void mount_or_die(const char *img)
{
	struct uext4_opts o = {0};

	if (uext4_mount(img, &o, &g_fs) < 0) {
		fprintf(stderr, "FAIL: mount: %s\n", uext4_last_error());
		exit(T_FAIL);
	}
}

static void umount_and_check(const char *img)
{
	char cmd[600];

	T_CHECK(uext4_umount(g_fs) == 0, "umount: %s", uext4_last_error());
	t_fsck_clean(img);
	snprintf(cmd, sizeof cmd, "%s.fsck", img);
	unlink(cmd);
}

static void create_files(void)
{
	for (int i = 0; i < NFILES; i++) {
		struct uext4_stat st;
		char name[32];

		snprintf(name, sizeof name, "f%03d", i);
		if (uext4_create(g_fs, UEXT4_ROOT_INO, name, S_IFREG | 0644, &st)) {
			fprintf(stderr, "FAIL: create %s: %s\n", name, uext4_last_error());
			exit(T_FAIL);
		}
		g_ino[i] = st.ino;
	}
}

static void test_icache(double secs)
{
	char img[] = "/tmp/cache_race-XXXXXX";
	pthread_t t[I_READERS + I_WRITERS];
	struct ictx ctx[I_READERS + I_WRITERS];
	long reads = 0, churns = 0;

	printf("2. icache: %d threads iget/stat %d numbers, %d create/unlink, "
	       "UEXT4_ICACHE_UNUSED=64, %.1f s\n", I_READERS, NFILES, I_WRITERS, secs);
	mkfs_with_library(img);
	setenv("UEXT4_ICACHE_UNUSED", "64", 1);
	mount_or_die(img);
	unsetenv("UEXT4_ICACHE_UNUSED");
	create_files();
	atomic_store(&g_stop, 0);
	for (int i = 0; i < I_READERS + I_WRITERS; i++) {
		ctx[i] = (struct ictx){ g_seed + 104729u * (unsigned)i, i, 0, 0 };
		pthread_create(&t[i], NULL, i < I_READERS ? iget_thread : churn_thread, &ctx[i]);
	}
	struct timespec ts = { (time_t)secs, (long)((secs - (time_t)secs) * 1e9) };

	nanosleep(&ts, NULL); /* how long to run, not synchronisation */
	atomic_store(&g_stop, 1);
	for (int i = 0; i < I_READERS + I_WRITERS; i++) {
		pthread_join(t[i], NULL);
		T_CHECK(ctx[i].bad == 0, "thread %d: %d wrong results", i, ctx[i].bad);
		if (i < I_READERS)
			reads += ctx[i].ops;
		else
			churns += ctx[i].ops;
	}
	printf("   %ld iget/stat, %ld create+unlink\n", reads, churns);
	T_CHECK(reads > 0 && churns > 0, "a side made no progress");
	umount_and_check(img);
	unlink(img);
}

/* ------------------------------------------------------------ 3: lock counts */

static uint64_t acquisitions(const char *cls)
{
	struct uext4_stats s;

	T_CHECK(uext4_stats_get(g_fs, &s) == 0, "stats: %s", uext4_last_error());
	for (unsigned i = 0; i < s.nlocks; i++)
		if (!strcmp(s.locks[i].name, cls))
			return s.locks[i].acquisitions;
	fprintf(stderr, "FAIL: no lock class %s\n", cls);
	exit(T_FAIL);
}

static void test_lock_counts(void)
{
	enum { HITS = 20000 };
	char img[] = "/tmp/cache_race-XXXXXX";
	struct buf *b;
	struct inode *n;
	uint64_t blk, ic, bcn;
	uint32_t off;

	printf("3. warm hits: %d iget/iput and bread/brelse of cached objects\n", HITS);
	mkfs_with_library(img);
	mount_or_die(img);
	create_files();
	T_CHECK(uext4_sync(g_fs) == 0, "sync: %s", uext4_last_error());
	/* A cached block: the inode-table block of the first file. */
	T_CHECK(inode_location(g_fs, g_ino[0], &blk, &off) == 0, "inode_location");
	if (bread(g_fs->bc, blk, UEXT4_META_INODE_TABLE, &b) == 0)
		brelse(g_fs->bc, b);
	for (int i = 0; i < NFILES; i++)
		if (iget(g_fs, g_ino[i], &n) == 0)
			iput(g_fs, n);
	uext4_stats_enable(g_fs, 1);
	uext4_stats_reset(g_fs);
	for (int i = 0; i < HITS; i++) {
		T_CHECK(iget(g_fs, g_ino[i % NFILES], &n) == 0, "iget: %s", uext4_last_error());
		iput(g_fs, n);
		T_CHECK(bread(g_fs->bc, blk, UEXT4_META_INODE_TABLE, &b) == 0, "bread: %s",
			uext4_last_error());
		brelse(g_fs->bc, b);
	}
	ic = acquisitions("icache_shard");
	bcn = acquisitions("bcache_shard");
	printf("   icache_shard %llu, bcache_shard %llu acquisitions\n", (unsigned long long)ic,
	       (unsigned long long)bcn);
	T_CHECK(ic < HITS / 100 && bcn < HITS / 100,
		"warm hits took cache locks: icache_shard %llu, bcache_shard %llu for %d hits",
		(unsigned long long)ic, (unsigned long long)bcn, HITS);
	umount_and_check(img);
	unlink(img);
}

int main(void)
{
	const char *env = getenv("UEXT4_SEED");

	setvbuf(stdout, NULL, _IOLBF, 0);
	g_seed = env ? (unsigned)strtoul(env, NULL, 0) : (unsigned)time(NULL) ^ (unsigned)getpid();
	printf("seed %u (UEXT4_SEED=%u repeats it)\n", g_seed, g_seed);
	test_bcache(20000);
	test_icache(2.0);
	test_lock_counts();
	printf("%s\n", t_failures ? "FAILED" : "ok");
	return t_failures ? T_FAIL : T_PASS;
}
