/*
 * unit_bcache - block devices and the buffer cache.
 *
 * Checks: memory and file devices (reads, writes, read-only, past-the-end
 * -EIO naming the offset, memory copy of an image); cache hits/misses and
 * refcounts; LRU eviction order; dirty buffers never evicted; concurrent
 * bread() of one block reads the device once; 8 threads reading random
 * blocks under a small memory limit (contents, counters, no leaked
 * references); a read error returns -EIO naming the block and leaves
 * nothing cached as uptodate.
 */
/* run-in: release asan tsan */
#include "bcache.h"
#include "blockdev.h"
#include "internal.h"
#include "uext4.h"
#include "t.h"

#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>


#define BS 4096u
#define NBLOCKS 512u

/* The 32-bit word i of block b. */
static uint32_t pattern(uint64_t b, uint32_t i)
{
	uint64_t x = (b << 32 | i) * 0x9E3779B97F4A7C15ull;

	return (uint32_t)(x >> 29);
}

static void fill_block(uint8_t *p, uint64_t b)
{
	for (uint32_t i = 0; i < BS / 4; i++) {
		uint32_t v = pattern(b, i);

		memcpy(p + 4 * i, &v, 4);
	}
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

/* A memory device of n patterned blocks plus extra bytes. */
static struct bdev *pattern_dev(uint64_t n, uint64_t extra)
{
	struct bdev *d = bdev_open_memory(n * BS + extra);
	uint8_t blk[BS];

	for (uint64_t b = 0; d && b < n; b++) {
		fill_block(blk, b);
		if (bdev_write(d, blk, BS, b * BS))
			return NULL;
	}
	return d;
}

/* ------------------------------------------------------------- counting device
 * Wraps another device and counts reads per block, to see what the cache
 * really reads. */
struct counting_dev {
	struct bdev bdev;
	struct bdev *inner;
	_Atomic uint64_t *reads;   /* per block */
	_Atomic uint64_t total;
};

static int counting_read(struct bdev *d, void *buf, size_t len, uint64_t off)
{
	struct counting_dev *c = (struct counting_dev *)d;

	if (off / BS < c->inner->size / BS)
		atomic_fetch_add(&c->reads[off / BS], 1);
	atomic_fetch_add(&c->total, 1);
	sched_yield(); /* widen the window for concurrent readers */
	return bdev_read(c->inner, buf, len, off);
}

static int counting_write(struct bdev *d, const void *buf, size_t len, uint64_t off)
{
	return bdev_write(((struct counting_dev *)d)->inner, buf, len, off);
}

static int counting_flush(struct bdev *d)
{
	return bdev_flush(((struct counting_dev *)d)->inner);
}

static void counting_close(struct bdev *d)
{
	struct counting_dev *c = (struct counting_dev *)d;

	bdev_close(c->inner);
	free((void *)c->reads);
	free(c);
}

static const struct bdev_ops counting_ops = {
	.read = counting_read, .write = counting_write, .flush = counting_flush,
	.close = counting_close,
};

static struct counting_dev *counting_dev(struct bdev *inner)
{
	struct counting_dev *c = calloc(1, sizeof(*c));

	c->inner = inner;
	c->reads = calloc(inner->size / BS + 1, sizeof(*c->reads));
	c->bdev.ops = &counting_ops;
	c->bdev.size = inner->size;
	return c;
}

/* ------------------------------------------------------------- devices */

static void test_memory_dev(void)
{
	struct bdev *d = bdev_open_memory(10000);
	uint8_t buf[100];
	int err;

	printf("check: memory device read/write and bounds\n");
	CHECK(d && d->size == 10000, "open memory");
	memset(buf, 0xab, sizeof(buf));
	CHECK(bdev_write(d, buf, 100, 9900) == 0, "write at end");
	memset(buf, 0, sizeof(buf));
	CHECK(bdev_read(d, buf, 100, 9900) == 0 && buf[0] == 0xab && buf[99] == 0xab, "read back");
	err = bdev_read(d, buf, 100, 9901);
	CHECK(err == -EIO && strstr(uext4_last_error(), "offset 9901"),
	      "read past end: %d \"%s\"", err, uext4_last_error());
	err = bdev_read(d, buf, 1, UINT64_MAX);
	CHECK(err == -EIO, "read at UINT64_MAX: %d", err);
	CHECK(bdev_write(d, buf, 100, 9950) == -EIO, "write past end accepted");
	CHECK(bdev_flush(d) == 0, "flush");
	bdev_close(d);
}

static void test_file_dev(void)
{
	char path[] = "/tmp/unit_bcache.XXXXXX";
	int fd = mkstemp(path);
	uint8_t buf[BS], back[BS];
	struct bdev *d, *m;
	int err;

	printf("check: file device read/write, read-only, past-the-end, memory copy\n");
	CHECK(fd >= 0, "mkstemp");
	fill_block(buf, 3);
	CHECK(ftruncate(fd, 8 * BS) == 0, "truncate");
	close(fd);

	d = bdev_open_file(path, 0, &err);
	CHECK(d && err == 0 && d->size == 8 * BS, "open rw: %s", uext4_last_error());
	if (d) {
		CHECK(bdev_write(d, buf, BS, 3 * BS) == 0, "write");
		CHECK(bdev_flush(d) == 0, "flush");
		CHECK(bdev_read(d, back, BS, 3 * BS) == 0 && block_ok(back, 3), "read back");
		err = bdev_read(d, back, BS, 8 * BS - 10);
		CHECK(err == -EIO && strstr(uext4_last_error(), "offset"),
		      "read past end: %d \"%s\"", err, uext4_last_error());
		bdev_close(d);
	}
	d = bdev_open_file(path, 1, &err);
	CHECK(d && d->read_only, "open ro");
	if (d) {
		CHECK(bdev_write(d, buf, BS, 0) == -EROFS, "write on read-only accepted");
		CHECK(bdev_read(d, back, BS, 3 * BS) == 0 && block_ok(back, 3), "ro read");
		bdev_close(d);
	}
	m = bdev_open_memory_copy(path, &err);
	CHECK(m && m->size == 8 * BS, "memory copy: %s", uext4_last_error());
	if (m) {
		memset(back, 0, sizeof(back));
		CHECK(bdev_read(m, back, BS, 3 * BS) == 0 && block_ok(back, 3), "copy contents");
		memset(back, 0, BS);
		CHECK(bdev_write(m, back, BS, 3 * BS) == 0, "write to memory copy");
		bdev_close(m);
	}
	/* The memory copy's write must not reach the file. */
	d = bdev_open_file(path, 1, &err);
	if (d) {
		CHECK(bdev_read(d, back, BS, 3 * BS) == 0 && block_ok(back, 3), "file changed by copy");
		bdev_close(d);
	}
	unlink(path);
	d = bdev_open_file("/nonexistent/unit_bcache", 1, &err);
	CHECK(!d && err == -ENOENT && strstr(uext4_last_error(), "/nonexistent"),
	      "open missing: %d \"%s\"", err, uext4_last_error());
}

/* ------------------------------------------------------------- cache basics */

static void test_hits_and_refcounts(void)
{
	struct counting_dev *cd = counting_dev(pattern_dev(64, 0));
	struct bcache *bc = bcache_create(&cd->bdev, BS, 0);
	struct buf *a, *b;
	struct uext4_counters c;

	printf("check: hit/miss counters, refcounts, bget of a cached block\n");
	CHECK(bread(bc, 5, UEXT4_META_INODE_TABLE, &a) == 0 && block_ok(a->data, 5), "bread 5");
	CHECK(bread(bc, 5, UEXT4_META_INODE_TABLE, &b) == 0 && a == b, "second bread same buf");
	CHECK(atomic_load(&a->refcount) == 2, "refcount %u", atomic_load(&a->refcount));
	brelse(bc, b);
	CHECK(atomic_load(&a->refcount) == 1, "refcount after brelse");
	brelse(bc, a);
	CHECK(bget(bc, 5, &b) == 0 && b == a && (atomic_load(&b->state) & BUF_UPTODATE),
	      "bget of cached block");
	brelse(bc, b);
	CHECK(bget(bc, 6, &b) == 0 && !(atomic_load(&b->state) & BUF_UPTODATE), "bget uncached");
	brelse(bc, b);
	CHECK(atomic_load(&cd->reads[6]) == 0, "bget read the device");
	CHECK(bread(bc, 7, UEXT4_META_DIR, &a) == 0, "bread 7");
	brelse(bc, a);
	bcache_count_read(bc, UEXT4_META_DATA, 10);
	bcache_counters(bc, &c);
	CHECK(c.cache_hits == 1 && c.cache_misses == 2, "hits %llu misses %llu",
	      (unsigned long long)c.cache_hits, (unsigned long long)c.cache_misses);
	CHECK(c.reads[UEXT4_META_INODE_TABLE] == 1 && c.reads[UEXT4_META_DIR] == 1 &&
	      c.reads[UEXT4_META_DATA] == 10, "reads by kind");
	CHECK(c.cached_bytes == 2 * BS, "cached bytes %llu", (unsigned long long)c.cached_bytes);
	CHECK(atomic_load(&cd->total) == 2, "device reads %llu",
	      (unsigned long long)atomic_load(&cd->total));
	bcache_destroy(bc);
	bdev_close(&cd->bdev);
}

static void test_lru_and_dirty(void)
{
	/* 8 blocks of memory: a single shard, so eviction order is exact. */
	struct counting_dev *cd = counting_dev(pattern_dev(64, 0));
	struct bcache *bc = bcache_create(&cd->bdev, BS, 8 * BS);
	struct buf *b, *dirty;
	struct uext4_counters c;

	printf("check: LRU eviction order, dirty buffers never evicted\n");
	for (uint64_t i = 0; i < 8; i++) {
		CHECK(bread(bc, i, UEXT4_META_OTHER, &b) == 0, "bread %llu", (unsigned long long)i);
		brelse(bc, b);
	}
	CHECK(bread(bc, 0, UEXT4_META_OTHER, &b) == 0, "touch 0");
	brelse(bc, b);
	CHECK(bread(bc, 8, UEXT4_META_OTHER, &b) == 0, "bread 8");
	brelse(bc, b);
	CHECK(bread(bc, 0, UEXT4_META_OTHER, &b) == 0 && atomic_load(&cd->reads[0]) == 1,
	      "recently used block 0 was evicted");
	brelse(bc, b);
	CHECK(bread(bc, 1, UEXT4_META_OTHER, &b) == 0 && atomic_load(&cd->reads[1]) == 2,
	      "least recently used block 1 was not evicted");
	brelse(bc, b);
	bcache_counters(bc, &c);
	CHECK(c.cache_evictions == 2 && c.cached_bytes == 8 * BS, "evictions %llu bytes %llu",
	      (unsigned long long)c.cache_evictions, (unsigned long long)c.cached_bytes);

	/* Mark block 20 dirty (as the write path will), then churn. */
	CHECK(bread(bc, 20, UEXT4_META_OTHER, &dirty) == 0, "bread 20");
	atomic_fetch_or(&dirty->state, BUF_DIRTY);
	dirty->data[0] ^= 1;
	brelse(bc, dirty);
	for (uint64_t i = 30; i < 60; i++) {
		CHECK(bread(bc, i, UEXT4_META_OTHER, &b) == 0 && block_ok(b->data, i), "churn");
		brelse(bc, b);
	}
	CHECK(bget(bc, 20, &b) == 0 && b == dirty && (atomic_load(&b->state) & BUF_DIRTY) &&
	      !block_ok(b->data, 20), "dirty buffer evicted");
	CHECK(atomic_load(&cd->reads[20]) == 1, "dirty block re-read");
	/* Cleaned (as writeback will), it becomes evictable again. */
	atomic_fetch_and(&b->state, ~BUF_DIRTY);
	b->data[0] ^= 1;
	brelse(bc, b);
	for (uint64_t i = 30; i < 60; i++) {
		CHECK(bread(bc, i, UEXT4_META_OTHER, &b) == 0, "churn 2");
		brelse(bc, b);
	}
	bcache_counters(bc, &c);
	CHECK(c.cached_bytes <= 8 * BS, "cache over its limit: %llu",
	      (unsigned long long)c.cached_bytes);
	bcache_destroy(bc);
	bdev_close(&cd->bdev);
}

static void test_io_error(void)
{
	/* 10 whole blocks then half a block: block 10 is short. */
	struct counting_dev *cd = counting_dev(pattern_dev(10, BS / 2));
	struct bcache *bc = bcache_create(&cd->bdev, BS, 0);
	struct buf *b;
	struct uext4_counters before, after;
	int err;

	printf("check: read error: -EIO naming the block, nothing cached as uptodate\n");
	CHECK(bread(bc, 9, UEXT4_META_OTHER, &b) == 0 && block_ok(b->data, 9), "bread 9");
	brelse(bc, b);
	bcache_counters(bc, &before);
	for (int round = 0; round < 2; round++) {
		b = (struct buf *)1;
		err = bread(bc, 10, UEXT4_META_EXTENT, &b);
		CHECK(err == -EIO && b == NULL, "short block: err %d", err);
		CHECK(strstr(uext4_last_error(), "block 10") != NULL, "message: \"%s\"",
		      uext4_last_error());
		if (round == 0)
			printf("  error message: %s\n", uext4_last_error());
	}
	CHECK(atomic_load(&cd->total) == 1 + 2, "failed read was cached (device reads %llu)",
	      (unsigned long long)atomic_load(&cd->total));
	CHECK(bget(bc, 10, &b) == 0 && !(atomic_load(&b->state) & BUF_UPTODATE),
	      "failed block cached as uptodate");
	brelse(bc, b);
	err = bread(bc, UINT64_MAX / 2, UEXT4_META_OTHER, &b);
	CHECK(err == -EIO, "huge block number: %d", err);
	bcache_counters(bc, &after);
	CHECK(after.cached_bytes == before.cached_bytes, "failed buffers still cached: %llu",
	      (unsigned long long)after.cached_bytes);
	CHECK(after.cache_misses == before.cache_misses &&
	      after.reads[UEXT4_META_EXTENT] == 0, "failed reads counted as reads");
	bcache_destroy(bc);
	bdev_close(&cd->bdev);
}

/* ------------------------------------------------------------- concurrency */

struct same_block_ctx {
	struct bcache *bc;
	pthread_barrier_t *barrier;
	int ok;
};

static void *same_block_thread(void *arg)
{
	struct same_block_ctx *ctx = arg;
	struct buf *b;

	pthread_barrier_wait(ctx->barrier);
	ctx->ok = bread(ctx->bc, 42, UEXT4_META_DIR, &b) == 0 && block_ok(b->data, 42);
	if (ctx->ok == 1)
		brelse(ctx->bc, b);
	return NULL;
}

static void test_same_block_once(void)
{
	enum { NT = 8, ROUNDS = 20 };

	printf("check: %d threads bread() the same block at once: one device read\n", NT);
	for (int r = 0; r < ROUNDS; r++) {
		struct counting_dev *cd = counting_dev(pattern_dev(64, 0));
		struct bcache *bc = bcache_create(&cd->bdev, BS, 0);
		pthread_barrier_t barrier;
		pthread_t t[NT];
		struct same_block_ctx ctx[NT];
		struct uext4_counters c;

		pthread_barrier_init(&barrier, NULL, NT);
		for (int i = 0; i < NT; i++) {
			ctx[i] = (struct same_block_ctx){ bc, &barrier, 0 };
			pthread_create(&t[i], NULL, same_block_thread, &ctx[i]);
		}
		for (int i = 0; i < NT; i++) {
			pthread_join(t[i], NULL);
			CHECK(ctx[i].ok, "thread %d read wrong data", i);
		}
		pthread_barrier_destroy(&barrier);
		CHECK(atomic_load(&cd->reads[42]) == 1, "round %d: block read %llu times", r,
		      (unsigned long long)atomic_load(&cd->reads[42]));
		bcache_counters(bc, &c);
		CHECK(c.cache_misses == 1 && c.cache_hits == NT - 1 && c.reads[UEXT4_META_DIR] == 1,
		      "round %d: misses %llu hits %llu", r, (unsigned long long)c.cache_misses,
		      (unsigned long long)c.cache_hits);
		bcache_destroy(bc);
		bdev_close(&cd->bdev);
	}
}

struct stress_ctx {
	struct bcache *bc;
	unsigned seed;
	int iterations;
	uint64_t done;
	int bad;
};

static unsigned next_rand(unsigned *s)
{
	*s = *s * 1103515245u + 12345u;
	return *s >> 8;
}

static void *stress_thread(void *arg)
{
	enum { HELD = 4 };
	struct stress_ctx *ctx = arg;
	struct buf *held[HELD] = {0};

	for (int i = 0; i < ctx->iterations; i++) {
		/* Mostly a hot set, sometimes anywhere: both hits and evictions. */
		unsigned r = next_rand(&ctx->seed);
		uint64_t blk = (r & 3) ? r % 48 : r % NBLOCKS;
		int slot = i % HELD;
		struct buf *b;

		if (bread(ctx->bc, blk, (enum uext4_meta_kind)(r % UEXT4_META_NKINDS), &b)) {
			ctx->bad++;
			continue;
		}
		ctx->done++;
		if (b->blocknr != blk || !block_ok(b->data, blk) || atomic_load(&b->refcount) < 1 ||
		    !(atomic_load(&b->state) & BUF_UPTODATE))
			ctx->bad++;
		if (held[slot])
			brelse(ctx->bc, held[slot]);
		held[slot] = b;
	}
	for (int i = 0; i < HELD; i++)
		if (held[i])
			brelse(ctx->bc, held[i]);
	return NULL;
}

static void test_stress(void)
{
	enum { NT = 8 };
	unsigned seed = (unsigned)time(NULL) ^ (unsigned)getpid();
	struct counting_dev *cd = counting_dev(pattern_dev(NBLOCKS, 0));
	uint64_t limit = 64 * BS;
	struct bcache *bc = bcache_create(&cd->bdev, BS, limit);
	pthread_t t[NT];
	struct stress_ctx ctx[NT];
	struct uext4_counters c;
	uint64_t total = 0, kinds = 0;

	printf("check: %d threads bread() random blocks, limit %llu blocks (seed %u)\n", NT,
	       (unsigned long long)(limit / BS), seed);
	for (int i = 0; i < NT; i++) {
		ctx[i] = (struct stress_ctx){ bc, seed + (unsigned)i * 7919u, 20000, 0, 0 };
		pthread_create(&t[i], NULL, stress_thread, &ctx[i]);
	}
	for (int i = 0; i < NT; i++) {
		pthread_join(t[i], NULL);
		CHECK(ctx[i].bad == 0, "thread %d: %d bad reads", i, ctx[i].bad);
		total += ctx[i].done;
	}
	bcache_counters(bc, &c);
	for (int k = 0; k < UEXT4_META_NKINDS; k++)
		kinds += c.reads[k];
	printf("  %llu breads: %llu hits, %llu misses, %llu evictions, %llu bytes cached\n",
	       (unsigned long long)total, (unsigned long long)c.cache_hits,
	       (unsigned long long)c.cache_misses, (unsigned long long)c.cache_evictions,
	       (unsigned long long)c.cached_bytes);
	CHECK(c.cache_hits + c.cache_misses == total, "hits + misses != breads");
	CHECK(kinds == c.cache_misses, "reads by kind %llu != misses", (unsigned long long)kinds);
	CHECK(c.cache_misses == atomic_load(&cd->total), "misses %llu != device reads %llu",
	      (unsigned long long)c.cache_misses, (unsigned long long)atomic_load(&cd->total));
	CHECK(c.cache_evictions > 0, "no evictions under a small limit");
	CHECK(c.cache_hits > 0, "no hits");
	CHECK(c.cached_bytes <= limit, "cached %llu > limit with nothing held",
	      (unsigned long long)c.cached_bytes);
	/* No leaked references: every cached block has refcount 0 (1 with our bget). */
	for (uint64_t blk = 0; blk < NBLOCKS; blk++) {
		struct buf *b;

		if (bget(bc, blk, &b) == 0) {
			CHECK(atomic_load(&b->refcount) == 1, "block %llu refcount %u",
			      (unsigned long long)blk, atomic_load(&b->refcount));
			brelse(bc, b);
		}
	}
	bcache_counters(bc, &c);
	CHECK(c.cached_bytes <= limit, "bget left buffers cached");
	bcache_destroy(bc);
	bdev_close(&cd->bdev);
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	test_memory_dev();
	test_file_dev();
	test_hits_and_refcounts();
	test_lru_and_dirty();
	test_io_error();
	test_same_block_once();
	test_stress();
	printf(t_failures ? "unit_bcache: %d FAILED\n" : "unit_bcache: all passed\n", t_failures);
	return t_failures ? 1 : 0;
}
