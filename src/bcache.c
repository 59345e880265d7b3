/*
 * bcache.c - the buffer cache: device blocks in memory, shared by threads.
 *
 * Structure.  Blocks hash (by number) to one of up to 64 shards.  Each shard
 * has its own lock, hash chains, LRU list and counters, and sits on its own
 * cache lines, so threads working on different blocks rarely touch the same
 * line and there is no global lock or hot global counter.
 *
 * What protects what:
 *   struct bcache         immutable after bcache_create().
 *   shard->sh             the shard skeleton (shard.h, which says what its
 *                         lock, RANK_BCACHE_SHARD, protects): hash chains,
 *                         LRU, retired lists, and the node of each buffer
 *                         (refcount, on_lru, referenced, links).  Its lock
 *                         also guards the dirty list and shard->bytes
 *                         (written under it, atomic so bcache_counters()
 *                         can read it without it).
 *   shard counters        atomics updated with relaxed ordering; summed
 *                         by bcache_counters().
 *   buf.refcount          (node.refcount) atomic, as shard.h says: taken
 *                         lock-free, 0 -> BUF_REF_DEAD only under the
 *                         shard lock with the unhashing.
 *   buf.state             atomic bits.  BUF_UPTODATE is set with release
 *                         order after data is filled, and tested with acquire
 *                         order, so a reader that sees it sees the data.
 *   buf.lock              (RANK_BUF) held while reading the block in (and,
 *                         in the write path, while modifying data); data and
 *                         kind are written only under it.
 *   buf.data, blocknr     immutable while the buffer exists.
 *
 * Lock order: a buf lock (30) may be held when taking a shard lock (40),
 * never the reverse; the shard lock is never held during I/O.
 *
 * Lock-free hits (readers on many cores write no shared line): bread()
 * and bget() of a cached block
 * walk the hash chain inside an epoch section (ebr.h) and take the
 * reference with a CAS "if not dead"; brelse() drops it with one atomic.
 * Neither takes the shard lock, and a hit does not move the buffer in the
 * LRU: it sets node.referenced instead, and the evictor (a clock with
 * second chance, under the lock) moves a referenced buffer back to the
 * head once instead of evicting it.  A buffer that is in use (refcount >
 * 0) or dirty when the evictor meets it is taken off the LRU; its next
 * drop to 0 finds it off (on_lru) and puts it back, under the lock.  The
 * memory of an evicted buffer is freed only when no lock-free lookup can
 * still be looking at it: unhashed buffers wait on their shard's retired
 * lists until ebr_safe() says so (retire()/reclaim_locked()).
 *
 * Lifetime.  A buffer is unhashed only when unreferenced and under its
 * shard's lock: either evicted from the LRU tail when the shard is over
 * its share of the memory limit, or at its last brelse() if it is not
 * uptodate (a failed read, an unused bget(), a forgotten block), so no
 * half-valid buffer stays cached.
 * Dirty buffers are never evicted: the first
 * bcache_mark_dirty() puts a buffer on its shard's dirty list with a
 * reference of its own (BUF_ONLIST), which bcache_take_dirty() hands to the
 * commit; the commit drops it after writing, and the idle buffer goes on
 * the LRU.  bcache_forget() clears BUF_DIRTY and BUF_UPTODATE of freed
 * blocks, so the commit skips them and their stale contents are dropped.
 *
 * Memory limit.  Each of the N shards gets mem_limit / N bytes.  N is 64
 * unless the limit is so small that a shard would hold fewer than
 * BC_MIN_BLOCKS_PER_SHARD blocks, in which case N shrinks (power of two).
 * Referenced buffers cannot be evicted, so the cache may exceed the limit
 * temporarily while many buffers are held.
 */
#include "bcache.h"
#include "blockdev.h"
#include "ebr.h"
#include "error.h"
#include "fault.h"
#include "internal.h"
#include "lock.h"
#include "ondisk.h"
#include "shard.h"
#include "slab.h"

#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BC_MAX_SHARDS 64
#define BC_MIN_BLOCKS_PER_SHARD 8
#define BC_DEFAULT_LIMIT (256ull << 20)
#define BC_MAX_BUCKETS (1u << 20)
/* In refcount: the buffer is unhashed and waits to be freed. */
#define BUF_REF_DEAD SHARD_REF_DEAD

/* The hash chains, LRU and retired lists are the shard skeleton's (sh,
 * shard.h); the rest is the buffer cache's own. */
struct bc_shard {
	struct shard sh;        /* first: over_limit() converts back */
	uint64_t limit;         /* bytes, immutable */
	_Atomic uint64_t bytes; /* bytes of buffers hashed here; written under sh.lock */
	_Atomic uint64_t reads[UEXT4_META_NKINDS];
	_Atomic uint64_t writes[UEXT4_META_NKINDS];
	_Atomic uint64_t hits, misses, evictions;
	struct buf *dirty_head; /* buffers with BUF_ONLIST; sh.lock */
	_Atomic uint64_t ndirty; /* length of dirty list; written under sh.lock */
} __attribute__((aligned(CACHELINE)));

/* Private state bit: on its shard's dirty list (holding a reference). */
#define BUF_ONLIST (1u << 8)

struct bcache {
	struct bdev *dev;
	uint32_t block_size;
	uint32_t nshards;       /* power of two */
	uint32_t shard_shift;   /* 64 - log2(nshards) */
	size_t buf_alloc_size;  /* header + data, rounded to CACHELINE */
	uint64_t mem_limit;     /* bytes */
	struct slab *slab;      /* buffer objects (header + data) */
	_Atomic uint64_t write_epoch; /* commits' write-outs finished */
	struct bc_shard *shards;
};

static void free_node(void *bc, struct shard_node *n);

static inline struct buf *buf_of(struct shard_node *n)
{
	return (struct buf *)((char *)n - offsetof(struct buf, node));
}

static inline uint64_t hash_block(uint64_t blocknr)
{
	/* Fibonacci hashing: consecutive blocks spread over all shards. */
	return blocknr * 0x9E3779B97F4A7C15ull;
}

static struct bc_shard *shard_of(struct bcache *bc, uint64_t h)
{
	if (bc->nshards == 1)
		return &bc->shards[0];
	return &bc->shards[h >> bc->shard_shift];
}

static uint32_t bucket_of(struct bc_shard *s, uint64_t h)
{
	return (uint32_t)(h >> 20) & (s->sh.nbuckets - 1);
}

static void count_add(_Atomic uint64_t *c, uint64_t n)
{
	atomic_fetch_add_explicit(c, n, memory_order_relaxed);
}

/* ------------------------------------------------------------- create */

static uint32_t pow2_at_least(uint64_t n, uint32_t max)
{
	uint32_t p = 1;

	while (p < n && p < max)
		p <<= 1;
	return p;
}

static uint32_t choose_nshards(uint64_t limit_blocks)
{
	uint32_t n = BC_MAX_SHARDS;

	while (n > 1 && limit_blocks / n < BC_MIN_BLOCKS_PER_SHARD)
		n >>= 1;
	return n;
}

static int shard_init_bc(struct bc_shard *s, uint64_t limit, uint64_t limit_blocks)
{
	memset(s, 0, sizeof(*s));
	s->limit = limit;
	return shard_init(&s->sh, RANK_BCACHE_SHARD,
			  pow2_at_least(MAX(limit_blocks, 16), BC_MAX_BUCKETS));
}

static bool valid_block_size(uint32_t bs)
{
	return bs >= EXT4_MIN_BLOCK_SIZE && bs <= EXT4_MAX_BLOCK_SIZE && (bs & (bs - 1)) == 0;
}

struct bcache *bcache_create(struct bdev *dev, uint32_t block_size, uint64_t mem_limit)
{
	struct bcache *bc;
	uint64_t shard_limit, shard_blocks;
	uint32_t i;

	if (!valid_block_size(block_size)) {
		fs_err(EINVAL, "buffer cache: invalid block size %u", block_size);
		return NULL;
	}
	if (mem_limit == 0)
		mem_limit = BC_DEFAULT_LIMIT;
	bc = calloc(1, sizeof(*bc));
	if (!bc)
		goto nomem;
	bc->dev = dev;
	bc->block_size = block_size;
	bc->mem_limit = mem_limit;
	bc->nshards = choose_nshards(mem_limit / block_size);
	bc->shard_shift = 64 - (uint32_t)__builtin_ctz(bc->nshards);
	bc->buf_alloc_size = (sizeof(struct buf) + CACHELINE - 1) / CACHELINE * CACHELINE +
			     block_size;
	shard_limit = mem_limit / bc->nshards;
	shard_blocks = shard_limit / block_size;
	bc->slab = slab_create(bc->buf_alloc_size, mem_limit);
	if (!bc->slab)
		goto nomem;
	bc->shards = aligned_alloc(CACHELINE, sizeof(struct bc_shard) * bc->nshards);
	if (!bc->shards)
		goto nomem;
	for (i = 0; i < bc->nshards; i++) {
		if (shard_init_bc(&bc->shards[i], shard_limit, shard_blocks) < 0) {
			while (i--)
				shard_destroy(&bc->shards[i].sh, free_node, bc);
			goto nomem;
		}
	}
	return bc;
nomem:
	if (bc) {
		free(bc->shards);
		slab_destroy(bc->slab);
	}
	free(bc);
	fs_err(ENOMEM, "buffer cache: out of memory creating the cache");
	return NULL;
}

/* ------------------------------------------------------------- buffers */

static struct buf *buf_alloc(struct bcache *bc, uint64_t blocknr)
{
	size_t hdr = bc->buf_alloc_size - bc->block_size;
	struct buf *b = slab_alloc(bc->slab);

	if (!b)
		return NULL;
	b->blocknr = blocknr;
	b->data = (uint8_t *)b + hdr;
	atomic_init(&b->refcount, 1);
	atomic_init(&b->state, 0);
	b->kind = UEXT4_META_OTHER;
	ulock_init(&b->lock, RANK_BUF);
	return b;
}

static void buf_free(struct bcache *bc, struct buf *b)
{
	ulock_destroy(&b->lock);
	slab_free(bc->slab, b);
}

static void free_node(void *bc, struct shard_node *n)
{
	buf_free(bc, buf_of(n));
}

/* Free a list of buffers linked by lru_next (outside any lock). */
static void buf_free_list(struct bcache *bc, struct shard_node *list)
{
	shard_free_list(list, free_node, bc);
}

/* ------------------------------------------------------------- shard ops
 * All of these need the shard lock. */

static struct buf *hash_lookup(struct bc_shard *s, uint64_t h, uint64_t blocknr)
{
	struct shard_node *n = shard_find(&s->sh, bucket_of(s, h), blocknr);

	return n ? buf_of(n) : NULL;
}

static void hash_insert(struct bcache *bc, struct bc_shard *s, uint64_t h, struct buf *b)
{
	shard_hash_insert(&s->sh, bucket_of(s, h), &b->node);
	atomic_store_explicit(&s->bytes, atomic_load_explicit(&s->bytes, memory_order_relaxed) +
			      bc->block_size, memory_order_relaxed);
}

static void hash_remove(struct bcache *bc, struct bc_shard *s, struct buf *b)
{
	shard_hash_remove(&s->sh, bucket_of(s, hash_block(b->blocknr)), &b->node);
	atomic_store_explicit(&s->bytes, atomic_load_explicit(&s->bytes, memory_order_relaxed) -
			      bc->block_size, memory_order_relaxed);
}

static bool on_lru(struct buf *b)
{
	return shard_on_lru(&b->node);
}

/* Take a reference on a hashed buffer (never dead under the lock). */
static void grab_locked(struct buf *b)
{
	atomic_fetch_add_explicit(&b->refcount, 1, memory_order_acquire);
}

static bool idle_and_clean(struct buf *b)
{
	return atomic_load(&b->refcount) == 0 &&
	       !(atomic_load_explicit(&b->state, memory_order_acquire) & BUF_DIRTY);
}

static bool node_idle_and_clean(struct shard_node *n)
{
	return idle_and_clean(buf_of(n));
}

/* Buffers now safe to free (linked by lru_next): the older batch once
 * its stamp is safe, after which the newer batch starts to wait. */
static struct shard_node *reclaim_locked(struct bc_shard *s)
{
	return shard_reclaim_locked(&s->sh);
}

/* A dead buffer leaves the hash and waits on the retired list until
 * lock-free lookups that might hold its address are gone. */
static void unhash_and_retire(struct bcache *bc, struct bc_shard *s, struct buf *b)
{
	hash_remove(bc, s, b);
	shard_retire_locked(&s->sh, &b->node);
}

/* Unhash an idle buffer if nobody takes a reference first (0 -> dead). */
static bool kill_if_idle_locked(struct bcache *bc, struct bc_shard *s, struct buf *b)
{
	if (!shard_kill_locked(&s->sh, &b->node, 0))
		return false;
	unhash_and_retire(bc, s, b);
	return true;
}

struct evict_ctx {
	struct bcache *bc;
	struct bc_shard *s;
};

static bool over_limit(struct shard *sh, void *ctx)
{
	struct bc_shard *s = ((struct evict_ctx *)ctx)->s;

	return atomic_load_explicit(&s->bytes, memory_order_relaxed) > s->limit;
}

static void evict_one(struct shard *sh, struct shard_node *n, void *ctx)
{
	struct evict_ctx *e = ctx;

	unhash_and_retire(e->bc, e->s, buf_of(n));
	count_add(&e->s->evictions, 1);
}

/*
 * A clock over the LRU while the shard is over its limit (shard.h): idle
 * clean buffers hit since the last pass get a second chance, busy or
 * dirty ones leave the LRU (their next drop to 0 puts them back), the
 * others are unhashed and retired.  Returns the buffers that are safe to
 * free, linked by lru_next.
 */
static struct shard_node *evict_locked(struct bcache *bc, struct bc_shard *s)
{
	struct evict_ctx e = { bc, s };

	shard_clock_locked(&s->sh, over_limit, node_idle_and_clean, NULL, evict_one, &e);
	return reclaim_locked(s);
}

/* ------------------------------------------------------------- lock-free */

/* The cached buffer of blocknr with a reference, or NULL: no lock
 * (shard_lookup_lockfree()). */
static struct buf *lookup_lockfree(struct bc_shard *s, uint64_t h, uint64_t blocknr)
{
	struct shard_node *n = shard_lookup_lockfree(&s->sh, bucket_of(s, h), blocknr,
						     memory_order_acquire);

	return n ? buf_of(n) : NULL;
}

/* ------------------------------------------------------------- API */

/* Find or create the buffer for blocknr, with a reference.  *fresh (if
 * given) says the buffer was just allocated: its data is all zero. */
static int get_buf_fresh(struct bcache *bc, uint64_t blocknr, struct buf **out, bool *fresh);

static int get_buf(struct bcache *bc, uint64_t blocknr, struct buf **out)
{
	return get_buf_fresh(bc, blocknr, out, NULL);
}

static int get_buf_fresh(struct bcache *bc, uint64_t blocknr, struct buf **out, bool *fresh)
{
	uint64_t h = hash_block(blocknr);
	struct bc_shard *s = shard_of(bc, h);
	struct buf *b, *fresh_buf;
	struct shard_node *victims;

	b = lookup_lockfree(s, h, blocknr);
	if (fresh)
		*fresh = false;
	if (b) {
		*out = b;
		return 0;
	}

	/* Allocate outside the lock, then check nobody raced us in. */
	fresh_buf = buf_alloc(bc, blocknr);
	if (!fresh_buf)
		return fs_err(ENOMEM, "buffer cache: out of memory for block %llu",
			      (unsigned long long)blocknr);
	ulock_lock(&s->sh.lock);
	b = hash_lookup(s, h, blocknr);
	if (b) {
		grab_locked(b);
		shard_mark_referenced(&b->node);
		victims = NULL;
	} else {
		hash_insert(bc, s, h, fresh_buf);
		shard_lru_add(&s->sh, &fresh_buf->node);
		victims = evict_locked(bc, s);
	}
	ulock_unlock(&s->sh.lock);
	buf_free_list(bc, victims);
	if (b)
		buf_free(bc, fresh_buf);
	if (!b && fresh)
		*fresh = true; /* slab objects come zero-filled */
	*out = b ? b : fresh_buf;
	return 0;
}

static bool buf_uptodate(struct buf *b)
{
	return atomic_load_explicit(&b->state, memory_order_acquire) & BUF_UPTODATE;
}

/* Read the block into b (b->lock held). */
static int read_in(struct bcache *bc, struct buf *b, enum uext4_meta_kind kind)
{
	uint64_t off;
	int err;

	if (b->blocknr > UINT64_MAX / bc->block_size)
		return fs_err(EIO, "reading block %llu: block number out of range",
			      (unsigned long long)b->blocknr);
	off = b->blocknr * bc->block_size;
	err = bdev_read(bc->dev, b->data, bc->block_size, off);
	if (err) {
		char why[256];

		snprintf(why, sizeof(why), "%s", uext4_last_error());
		atomic_fetch_or_explicit(&b->state, BUF_IOERR, memory_order_relaxed);
		return fs_err(-err, "reading block %llu: %s", (unsigned long long)b->blocknr, why);
	}
	b->kind = (uint8_t)kind;
	atomic_fetch_and_explicit(&b->state, ~BUF_IOERR, memory_order_relaxed);
	atomic_fetch_or_explicit(&b->state, BUF_UPTODATE, memory_order_release);
	return 0;
}

static struct bc_shard *thread_count_shard(struct bcache *bc);

int bread(struct bcache *bc, uint64_t blocknr, enum uext4_meta_kind kind, struct buf **out)
{
	struct bc_shard *s = shard_of(bc, hash_block(blocknr));
	struct buf *b;
	bool did_io = false;
	int err;

	if ((unsigned)kind >= UEXT4_META_NKINDS)
		kind = UEXT4_META_OTHER;
	*out = NULL;
	err = get_buf(bc, blocknr, &b);
	if (err)
		return err;
	if (!buf_uptodate(b)) {
		/* One reader does the I/O; concurrent readers of the same
		 * block wait here and then find it uptodate. */
		ulock_lock(&b->lock);
		if (!buf_uptodate(b)) {
			/* Tests inject read errors here (fault.c). */
			err = fault_point(FAULT_READ, blocknr);
			if (!err)
				err = read_in(bc, b, kind);
			did_io = true;
		}
		ulock_unlock(&b->lock);
	}
	if (err) {
		brelse(bc, b);
		return err;
	}
	if (did_io) {
		count_add(&s->misses, 1);
		count_add(&s->reads[kind], 1);
	} else {
		/* On the thread's own shard: a hit writes no shared line. */
		count_add(&thread_count_shard(bc)->hits, 1);
	}
	*out = b;
	return 0;
}

bool bcache_uptodate(struct bcache *bc, uint64_t blocknr)
{
	uint64_t h = hash_block(blocknr);
	struct bc_shard *s = shard_of(bc, h);
	struct shard_node *n;
	struct buf *b;
	bool ret;

	ebr_enter();
	n = shard_find(&s->sh, bucket_of(s, h), blocknr);
	b = n ? buf_of(n) : NULL;
	ret = b && !(atomic_load(&b->refcount) & BUF_REF_DEAD) && buf_uptodate(b);
	ebr_exit();
	return ret;
}

/* Install one block read ahead, unless it is cached or being read. */
static void install_ahead(struct bcache *bc, uint64_t blocknr, const uint8_t *data,
			  enum uext4_meta_kind kind)
{
	struct buf *b;

	if (get_buf(bc, blocknr, &b))
		return;
	if (!buf_uptodate(b) && ulock_trylock(&b->lock)) {
		if (!buf_uptodate(b)) {
			memcpy(b->data, data, bc->block_size);
			b->kind = (uint8_t)kind;
			atomic_fetch_or_explicit(&b->state, BUF_UPTODATE, memory_order_release);
			count_add(&shard_of(bc, hash_block(blocknr))->reads[kind], 1);
		}
		ulock_unlock(&b->lock);
	}
	brelse(bc, b);
}

void bcache_readahead(struct bcache *bc, uint64_t start, uint32_t count,
		      enum uext4_meta_kind kind)
{
	size_t len = (size_t)count * bc->block_size;
	uint8_t *tmp;

	if (count == 0 || start > UINT64_MAX / bc->block_size - count)
		return;
	if ((unsigned)kind >= UEXT4_META_NKINDS)
		kind = UEXT4_META_OTHER;
	tmp = malloc(len);
	if (!tmp)
		return;
	/* A write-out that ends while we read may have made what we read
	 * stale (its blocks can be evicted right after): then install nothing. */
	uint64_t epoch = atomic_load(&bc->write_epoch);
	/* Best effort: a failed read is reported by the bread() that follows. */
	if (bdev_read(bc->dev, tmp, len, start * bc->block_size) == 0 &&
	    atomic_load(&bc->write_epoch) == epoch) {
		for (uint32_t i = 0; i < count; i++)
			install_ahead(bc, start + i, tmp + (size_t)i * bc->block_size, kind);
	} else {
		fs_clear_err();
	}
	free(tmp);
}

int bget(struct bcache *bc, uint64_t blocknr, struct buf **out)
{
	*out = NULL;
	return get_buf(bc, blocknr, out);
}

/*
 * Our reference was the last: a buffer that is not uptodate leaves the
 * cache now; one the evictor took off the LRU while it was in use goes
 * back on (shard lock).  Called inside an epoch section, since b may be
 * unhashed by another thread as soon as the count is 0.
 */
static void buf_went_idle(struct bcache *bc, struct buf *b)
{
	uint32_t st = atomic_load(&b->state);
	struct bc_shard *s = shard_of(bc, hash_block(b->blocknr));
	/* Over the limit: an insert found only busy buffers to evict. */
	bool over = atomic_load_explicit(&s->bytes, memory_order_relaxed) > s->limit;
	struct shard_node *to_free;

	if ((st & BUF_UPTODATE) && (on_lru(b) || (st & BUF_DIRTY)) && !over)
		return; /* the common case: nothing to do */
	ulock_lock(&s->sh.lock);
	if (!(atomic_load(&b->state) & BUF_UPTODATE)) {
		/* Failed read, unused bget(), forgotten block. */
		kill_if_idle_locked(bc, s, b);
	} else if (!on_lru(b) && idle_and_clean(b)) {
		shard_lru_add(&s->sh, &b->node);
	}
	to_free = evict_locked(bc, s); /* and reclaims */
	ulock_unlock(&s->sh.lock);
	buf_free_list(bc, to_free);
}

void brelse(struct bcache *bc, struct buf *b)
{
	uint32_t r, old;

	if (!b)
		return;
	/* Not the last reference: one CAS. */
	r = atomic_load_explicit(&b->refcount, memory_order_relaxed);
	while (r > 1 && !(r & BUF_REF_DEAD)) {
		if (atomic_compare_exchange_weak_explicit(&b->refcount, &r, r - 1,
							  memory_order_release,
							  memory_order_relaxed))
			return;
	}
	ebr_enter();
	old = atomic_fetch_sub(&b->refcount, 1);
	if (old == 0 || (old & BUF_REF_DEAD)) {
		atomic_fetch_add_explicit(&b->refcount, 1, memory_order_relaxed);
		fprintf(stderr, "uext4 bug: brelse of unreferenced block %llu\n",
			(unsigned long long)b->blocknr);
#ifdef UEXT4_LOCKDEP
		abort();
#endif
	} else if (old == 1) {
		buf_went_idle(bc, b);
	}
	ebr_exit();
}

void bcache_destroy(struct bcache *bc)
{
	if (!bc)
		return;
	/* Dirty buffers would be written back here (write path). */
	for (uint32_t i = 0; i < bc->nshards; i++)
		shard_destroy(&bc->shards[i].sh, free_node, bc);
	free(bc->shards);
	slab_destroy(bc->slab);
	free(bc);
}

void bcache_counters(struct bcache *bc, struct uext4_counters *c)
{
	memset(c, 0, sizeof(*c));
	for (uint32_t i = 0; i < bc->nshards; i++) {
		struct bc_shard *s = &bc->shards[i];

		for (int k = 0; k < UEXT4_META_NKINDS; k++) {
			c->reads[k] += atomic_load_explicit(&s->reads[k], memory_order_relaxed);
			c->writes[k] += atomic_load_explicit(&s->writes[k], memory_order_relaxed);
		}
		c->cache_hits += atomic_load_explicit(&s->hits, memory_order_relaxed);
		c->cache_misses += atomic_load_explicit(&s->misses, memory_order_relaxed);
		c->cache_evictions += atomic_load_explicit(&s->evictions, memory_order_relaxed);
		c->cached_bytes += atomic_load_explicit(&s->bytes, memory_order_relaxed);
	}
}

/* A shard per thread for counting reads done outside the cache, so
 * threads streaming file data do not share a counter line. */
static struct bc_shard *thread_count_shard(struct bcache *bc)
{
	static _Thread_local char marker;
	uint64_t h = hash_block((uintptr_t)&marker >> 6);

	return shard_of(bc, h);
}

void bcache_count_read(struct bcache *bc, enum uext4_meta_kind kind, uint64_t nblocks)
{
	if ((unsigned)kind >= UEXT4_META_NKINDS)
		kind = UEXT4_META_OTHER;
	count_add(&thread_count_shard(bc)->reads[kind], nblocks);
}

void bcache_count_write(struct bcache *bc, enum uext4_meta_kind kind, uint64_t nblocks)
{
	if ((unsigned)kind >= UEXT4_META_NKINDS)
		kind = UEXT4_META_OTHER;
	count_add(&thread_count_shard(bc)->writes[kind], nblocks);
}

/* ------------------------------------------------------------- write side */

int bget_new(struct bcache *bc, uint64_t blocknr, struct buf **out)
{
	struct buf *b;
	int err = get_buf(bc, blocknr, &b);

	*out = NULL;
	if (err)
		return err;
	ulock_lock(&b->lock);
	buf_unfreeze(b, bc->block_size); /* reused while a commit copies */
	memset(b->data, 0, bc->block_size);
	b->kind = UEXT4_META_OTHER;
	atomic_fetch_and_explicit(&b->state, ~(BUF_IOERR | BUF_DIRENTS_OK | BUF_DX_ORDERED |
					     BUF_LEAF_HINT), memory_order_relaxed);
	atomic_fetch_or_explicit(&b->state, BUF_UPTODATE | BUF_VERIFIED, memory_order_release);
	ulock_unlock(&b->lock);
	*out = b;
	return 0;
}

int bget_zero_if_absent(struct bcache *bc, uint64_t blocknr, enum uext4_meta_kind kind,
			struct buf **out)
{
	struct buf *b;
	bool fresh;
	int err = get_buf_fresh(bc, blocknr, &b, &fresh);

	*out = NULL;
	if (err)
		return err;
	if (!buf_uptodate(b)) {
		ulock_lock(&b->lock);
		if (!buf_uptodate(b)) {
			if (!fresh) /* a new buffer is zero already */
				memset(b->data, 0, bc->block_size);
			b->kind = (uint8_t)kind;
			atomic_fetch_or_explicit(&b->state, BUF_UPTODATE | BUF_VERIFIED,
						 memory_order_release);
		}
		ulock_unlock(&b->lock);
	}
	*out = b;
	return 0;
}

void bcache_mark_dirty(struct bcache *bc, struct buf *b)
{
	uint32_t old = atomic_fetch_or_explicit(&b->state, BUF_DIRTY | BUF_UPTODATE,
						memory_order_acq_rel);
	struct bc_shard *s;

	if (old & BUF_ONLIST)
		return;
	s = shard_of(bc, hash_block(b->blocknr));
	ulock_lock(&s->sh.lock);
	/* Re-check under the lock: two threads may dirty one block at once. */
	old = atomic_fetch_or_explicit(&b->state, BUF_ONLIST, memory_order_acq_rel);
	if (!(old & BUF_ONLIST)) {
		grab_locked(b);
		b->dirty_next = s->dirty_head;
		s->dirty_head = b;
		atomic_store_explicit(&s->ndirty,
				      atomic_load_explicit(&s->ndirty, memory_order_relaxed) + 1,
				      memory_order_relaxed);
	}
	ulock_unlock(&s->sh.lock);
}

void bcache_forget(struct bcache *bc, uint64_t blocknr, uint32_t count)
{
	for (uint32_t i = 0; i < count; i++) {
		uint64_t blk = blocknr + i, h = hash_block(blk);
		struct bc_shard *s = shard_of(bc, h);
		struct buf *b;
		struct shard_node *to_free = NULL;

		ulock_lock(&s->sh.lock);
		b = hash_lookup(s, h, blk);
		if (b) {
			/* A closing commit may still copy it: first. */
			buf_unfreeze(b, bc->block_size);
			/* seq_cst, as brelse(): either it sees the bits gone
			 * and drops the buffer, or we see it idle here. */
			atomic_fetch_and(&b->state, ~(BUF_DIRTY | BUF_UPTODATE | BUF_VERIFIED |
						      BUF_DIRENTS_OK | BUF_DX_ORDERED |
						      BUF_LEAF_HINT));
			if (kill_if_idle_locked(bc, s, b)) /* idle: drop it now */
				to_free = reclaim_locked(s);
		}
		ulock_unlock(&s->sh.lock);
		buf_free_list(bc, to_free);
	}
}

size_t bcache_dirty_count(struct bcache *bc)
{
	size_t n = 0;

	for (uint32_t i = 0; i < bc->nshards; i++)
		n += atomic_load_explicit(&bc->shards[i].ndirty, memory_order_relaxed);
	return n;
}

uint64_t bcache_mem_limit(struct bcache *bc)
{
	return bc->mem_limit;
}

/*
 * Detach every shard's dirty list.  Buffers still BUF_DIRTY are returned
 * (with the list's reference, DIRTY cleared); forgotten ones are released.
 */
size_t bcache_take_dirty(struct bcache *bc, struct buf ***out)
{
	size_t n = 0, cap = bcache_dirty_count(bc) + 16;
	struct buf **v = malloc(cap * sizeof(*v));

	*out = NULL;
	if (!v)
		return (size_t)-1;
	for (uint32_t i = 0; i < bc->nshards; i++) {
		struct bc_shard *s = &bc->shards[i];
		struct buf *list, *drop = NULL;

		ulock_lock(&s->sh.lock);
		list = s->dirty_head;
		s->dirty_head = NULL;
		atomic_store_explicit(&s->ndirty, 0, memory_order_relaxed);
		ulock_unlock(&s->sh.lock);
		while (list) {
			struct buf *b = list, **nv;
			uint32_t old;

			list = b->dirty_next;
			b->dirty_next = NULL;
			old = atomic_fetch_and_explicit(&b->state, ~(BUF_ONLIST | BUF_DIRTY),
							memory_order_acq_rel);
			if (!(old & BUF_DIRTY)) {
				b->dirty_next = drop;
				drop = b;
				continue;
			}
			if (n == cap) {
				cap *= 2;
				nv = realloc(v, cap * sizeof(*v));
				if (!nv) { /* keep it dirty for the next commit */
					bcache_mark_dirty(bc, b);
					brelse(bc, b);
					continue;
				}
				v = nv;
			}
			v[n++] = b;
		}
		while (drop) {
			struct buf *next = drop->dirty_next;

			drop->dirty_next = NULL;
			brelse(bc, drop);
			drop = next;
		}
	}
	*out = v;
	return n;
}

void bcache_note_write_done(struct bcache *bc)
{
	atomic_fetch_add(&bc->write_epoch, 1);
}

/* ------------------------------------------- frozen copies (the commit's) */

/* Take the copy of a frozen buffer: BUF_FROZEN -> BUF_COPYING in one CAS
 * (the other state bits change meanwhile), so exactly one thread copies. */
bool buf_claim_copy(struct buf *b)
{
	uint32_t st = atomic_load_explicit(&b->state, memory_order_acquire);

	while (st & BUF_FROZEN)
		if (atomic_compare_exchange_weak_explicit(&b->state, &st,
							  (st & ~BUF_FROZEN) | BUF_COPYING,
							  memory_order_acquire, memory_order_acquire))
			return true;
	return false;
}

/* Another thread is copying: a 4 KiB memcpy, unless it was preempted. */
void buf_wait_copied(struct buf *b)
{
	for (unsigned spins = 0;
	     atomic_load_explicit(&b->state, memory_order_acquire) & BUF_COPYING; spins++) {
		if (spins >= 64)
			sched_yield();
		else
			cpu_relax();
	}
}

void buf_copy_frozen(struct buf *b, uint32_t block_size)
{
	memcpy(b->frozen, b->data, block_size);
	atomic_fetch_and_explicit(&b->state, ~BUF_COPYING, memory_order_release);
}

/* After this the commit's copy of b (if b is frozen) is made: b may change. */
void buf_unfreeze(struct buf *b, uint32_t block_size)
{
	uint32_t st = atomic_load_explicit(&b->state, memory_order_acquire);

	if (__builtin_expect(!(st & (BUF_FROZEN | BUF_COPYING)), 1))
		return;
	if (buf_claim_copy(b))
		buf_copy_frozen(b, block_size);
	else
		buf_wait_copied(b);
}
