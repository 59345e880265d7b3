/*
 * shard.h - the skeleton the buffer cache (bcache.c) and the inode cache
 * (icache.c) share: one shard of a hash table whose hits take no lock, an
 * LRU with a clock (second chance), and epoch-based freeing (ebr.h) of
 * what lock-free lookups may still be looking at.
 *
 * A cached object embeds a struct shard_node (key first) and a cache's
 * shard embeds a struct shard.  The cache picks the shard and the bucket
 * (its own hash), decides what "idle" means, and frees the memory; the
 * functions here do the rest.  The hot ones (lookup, grab, LRU moves) are
 * static inline, so a hit costs what it cost when each cache had its
 * own copy.
 *
 * What protects what:
 *   struct shard          lock (its rank is the cache's: RANK_BCACHE_SHARD,
 *                         RANK_ICACHE_SHARD) protects every change of the
 *                         chains (buckets[], node.hnext: atomics, because
 *                         lookups read them without the lock), the LRU
 *                         (lru_old, lru_young, nlru, node.lru_prev,
 *                         node.lru_next; node.on_lru, written under it and
 *                         read without it), nhashed and the retired lists.
 *                         buckets and nbuckets are immutable.
 *   node.key              immutable while the node is hashed.
 *   node.refcount         atomic.  Taken lock-free by a CAS that refuses
 *                         SHARD_REF_DEAD; dropped lock-free.  count -> DEAD
 *                         happens only under the shard lock, with the
 *                         unhashing, so a locked lookup never meets a dead
 *                         node.
 *   node.referenced       atomic: set by a hit, cleared by the clock.
 *
 * Lifetime: a node leaves the hash under the lock (dead), then waits on the
 * shard's retired lists (linked by lru_next) until ebr says no lock-free
 * lookup can still hold its address; shard_reclaim_locked() hands back the
 * batch that may be freed.
 */
#ifndef UEXT4_SHARD_H
#define UEXT4_SHARD_H

#include "ebr.h"
#include "lock.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/* In refcount: the node is unhashed and waits to be freed. */
#define SHARD_REF_DEAD (1u << 31)
/* Retired nodes per shard before asking whether the older ones can go. */
#define SHARD_RECLAIM_BATCH 32

/* key and refcount first: an object may alias them with names of its own
 * (a union with an anonymous struct of the same two, SHARD_NODE_ALIAS). */
struct shard_node {
	uint64_t key;
	_Atomic uint32_t refcount;            /* 0 = idle */
	struct shard_node *_Atomic hnext;     /* chain */
	struct shard_node *lru_prev, *lru_next; /* LRU; lru_next also links retired and victims */
	_Atomic bool on_lru;
	_Atomic uint8_t referenced;           /* hit since the clock last passed */
};

/* The node of an object, its key and reference count under the object's
 * own names (struct buf: blocknr, refcount). */
#define SHARD_NODE_ALIAS(keyname) \
	union { \
		struct { \
			uint64_t keyname; \
			_Atomic uint32_t refcount; \
		}; \
		struct shard_node node; \
	}

struct shard {
	struct ulock lock;
	struct shard_node *_Atomic *buckets;  /* nbuckets chains */
	uint32_t nbuckets;
	uint64_t nlru;                        /* nodes on the LRU */
	uint64_t nhashed;                     /* nodes in the hash */
	struct shard_node *lru_old;           /* next for the clock */
	struct shard_node *lru_young;         /* most recently idle */
	struct ebr_limbo retired;
};

/* Set up a shard with nbuckets empty chains: 0 or -ENOMEM. */
int shard_init(struct shard *s, enum lock_rank rank, uint32_t nbuckets);
/* Teardown, no lookup running: every node hashed or retired goes to
 * free_node(ctx, node), then the shard's own memory. */
void shard_destroy(struct shard *s, void (*free_node)(void *ctx, struct shard_node *n),
		   void *ctx);
/* free_node(ctx, node) for each node of a list linked by lru_next. */
void shard_free_list(struct shard_node *list, void (*free_node)(void *ctx, struct shard_node *n),
		     void *ctx);

static inline struct shard_node *shard_chain(struct shard *s, uint32_t bucket)
{
	return atomic_load_explicit(&s->buckets[bucket], memory_order_acquire);
}

static inline struct shard_node *shard_next(struct shard_node *n)
{
	return atomic_load_explicit(&n->hnext, memory_order_acquire);
}

/* The node of key on a chain, or NULL (no reference taken: the caller
 * holds the lock, or is in an epoch section and grabs it). */
static inline struct shard_node *shard_find(struct shard *s, uint32_t bucket, uint64_t key)
{
	struct shard_node *n = shard_chain(s, bucket);

	while (n && n->key != key)
		n = shard_next(n);
	return n;
}

static inline void shard_mark_referenced(struct shard_node *n)
{
	if (!atomic_load_explicit(&n->referenced, memory_order_relaxed))
		atomic_store_explicit(&n->referenced, 1, memory_order_relaxed);
}

/* A reference on n unless it is dead; order: the CAS's on success (the
 * inode cache needs seq_cst, see icache.c). */
static inline bool shard_try_grab(struct shard_node *n, memory_order order)
{
	uint32_t r = atomic_load_explicit(&n->refcount, memory_order_relaxed);

	while (!(r & SHARD_REF_DEAD))
		if (atomic_compare_exchange_weak_explicit(&n->refcount, &r, r + 1, order,
							  memory_order_relaxed))
			return true;
	return false;
}

/*
 * The cached node of key with a reference, or NULL: no lock.  The epoch
 * section keeps every node on the chain from being freed while we walk
 * it; one unhashed meanwhile is dead (refused), or our CAS came first and
 * it was not unhashed.  NULL sends the caller to the locked path.
 */
static inline struct shard_node *shard_lookup_lockfree(struct shard *s, uint32_t bucket,
							uint64_t key, memory_order order)
{
	struct shard_node *n;

	ebr_enter();
	n = shard_find(s, bucket, key);
	if (n && !shard_try_grab(n, order))
		n = NULL;
	ebr_exit();
	if (n)
		shard_mark_referenced(n);
	return n;
}

/* Lock held: the node of key with a reference, or NULL (a hashed node is
 * never dead under the lock). */
static inline struct shard_node *shard_lookup_locked(struct shard *s, uint32_t bucket,
						      uint64_t key)
{
	struct shard_node *n = shard_find(s, bucket, key);

	if (n) {
		atomic_fetch_add(&n->refcount, 1);
		shard_mark_referenced(n);
	}
	return n;
}

/* Lock held. */
static inline void shard_hash_insert(struct shard *s, uint32_t bucket, struct shard_node *n)
{
	struct shard_node *_Atomic *head = &s->buckets[bucket];

	atomic_store_explicit(&n->hnext, atomic_load_explicit(head, memory_order_relaxed),
			      memory_order_relaxed);
	/* Release: a lock-free lookup that finds n sees it initialised. */
	atomic_store_explicit(head, n, memory_order_release);
	s->nhashed++;
}

/* Lock held.  n's own hnext stays: a lookup standing on n goes on along
 * the chain. */
static inline void shard_hash_remove(struct shard *s, uint32_t bucket, struct shard_node *n)
{
	struct shard_node *_Atomic *pp = &s->buckets[bucket];
	struct shard_node *cur;

	while ((cur = atomic_load_explicit(pp, memory_order_relaxed)) && cur != n)
		pp = &cur->hnext;
	if (!cur)
		return;
	atomic_store_explicit(pp, atomic_load_explicit(&n->hnext, memory_order_relaxed),
			      memory_order_release);
	s->nhashed--;
}

static inline bool shard_on_lru(struct shard_node *n)
{
	return atomic_load(&n->on_lru);
}

/* Lock held: n becomes the youngest on the LRU. */
static inline void shard_lru_add(struct shard *s, struct shard_node *n)
{
	n->lru_next = NULL;
	n->lru_prev = s->lru_young;
	if (s->lru_young)
		s->lru_young->lru_next = n;
	else
		s->lru_old = n;
	s->lru_young = n;
	s->nlru++;
	atomic_store(&n->on_lru, true);
}

/* Lock held. */
static inline void shard_lru_remove(struct shard *s, struct shard_node *n)
{
	if (n->lru_prev)
		n->lru_prev->lru_next = n->lru_next;
	else
		s->lru_old = n->lru_next;
	if (n->lru_next)
		n->lru_next->lru_prev = n->lru_prev;
	else
		s->lru_young = n->lru_prev;
	n->lru_prev = n->lru_next = NULL;
	s->nlru--;
	atomic_store(&n->on_lru, false);
}

/* Lock held: count -> dead (the caller holds the last `count` references,
 * or 0 for an idle node) and off the LRU; false if somebody took a
 * reference meanwhile.  The caller unhashes it. */
static inline bool shard_kill_locked(struct shard *s, struct shard_node *n, uint32_t count)
{
	if (!atomic_compare_exchange_strong(&n->refcount, &count, SHARD_REF_DEAD))
		return false;
	if (shard_on_lru(n))
		shard_lru_remove(s, n);
	return true;
}

/* Lock held: unhashed, dead n waits on the retired list for the lookups
 * that may still hold its address. */
static inline void shard_retire_locked(struct shard *s, struct shard_node *n)
{
	n->lru_next = ebr_limbo_head(&s->retired);
	ebr_limbo_push(&s->retired, n);
}

/* Lock held: the retired nodes safe to free now, linked by lru_next. */
static inline struct shard_node *shard_reclaim_locked(struct shard *s)
{
	return ebr_limbo_reclaim(&s->retired, SHARD_RECLAIM_BATCH);
}

/*
 * Lock held: the oldest LRU node n is in use: off the list (its next drop
 * to idle puts it back).  The re-check pairs with the cache's release,
 * which drops the count and then looks at on_lru (both seq_cst), so one of
 * the two puts it back.
 */
static inline void shard_lru_drop_busy(struct shard *s, struct shard_node *n,
				       bool (*idle)(struct shard_node *n))
{
	shard_lru_remove(s, n);
	if (idle(n))
		shard_lru_add(s, n);
}

/*
 * Lock held: a clock over the LRU while over(s, ctx): idle nodes hit since
 * the last pass become the youngest once more, busy ones (!idle) leave the
 * LRU, pinned ones (pinned may be NULL) leave it too but stay hashed
 * (whoever pins them deals with them), the others are killed
 * (shard_kill_locked()) and handed to evict(s, n, ctx), which unhashes
 * them (so over() sees them gone) and retires them or keeps them for
 * later.  Each node is looked at about once per call.  The callbacks are
 * the cache's static functions: this inlines into one loop.
 */
static inline void shard_clock_locked(struct shard *s, bool (*over)(struct shard *s, void *ctx),
				      bool (*idle)(struct shard_node *n),
				      bool (*pinned)(struct shard_node *n),
				      void (*evict)(struct shard *s, struct shard_node *n, void *ctx),
				      void *ctx)
{
	uint64_t budget = s->nlru + 1;

	while (over(s, ctx) && s->lru_old && budget--) {
		struct shard_node *n = s->lru_old;

		if (!idle(n)) {
			shard_lru_drop_busy(s, n, idle);
		} else if (atomic_load_explicit(&n->referenced, memory_order_relaxed)) {
			atomic_store_explicit(&n->referenced, 0, memory_order_relaxed);
			shard_lru_remove(s, n);
			shard_lru_add(s, n);
		} else if (pinned && pinned(n)) {
			shard_lru_remove(s, n);
		} else if (shard_kill_locked(s, n, 0)) {
			evict(s, n, ctx);
		} else {
			shard_lru_drop_busy(s, n, idle);
		}
	}
}

#endif
