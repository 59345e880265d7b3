/*
 * icache.c - the in-memory inode cache.
 *
 * Inodes are cached in a sharded hash table (the skeleton the buffer
 * cache shares, shard.h).  Loading (inode.c, iget()) reads the inode
 * table block through the buffer cache WITHOUT holding a shard lock, so a
 * slow read never blocks lookups of other inodes; if two threads load the
 * same inode at once, the first to insert wins and the other frees its
 * copy.  Unreferenced inodes stay cached on a per-shard LRU until the
 * shard holds more than its share of the limit (uext4_opts.inode_cache,
 * default ICACHE_MAX_UNUSED).  Hits take no lock (see "Lock-free hits"
 * below).  The last iput() of an unlinked inode frees it through the
 * host's free_unlinked (struct icache_host: the layers that own orphans
 * and truncation), and an inode leaving the cache gives its block
 * preallocation back through the host's release_prealloc, so the cache
 * calls nothing in the layers above it nor the allocators beside it.
 */
#include "error.h"
#include "icache.h"
#include "internal.h"
#include "lock.h"
#include "ondisk.h"
#include "shard.h"
#include "slab.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>

#define ICACHE_SHARD_BITS 8
#define ICACHE_SHARDS (1u << ICACHE_SHARD_BITS)
#define ICACHE_MAX_UNUSED (64 * 1024)

/*
 * Lock-free hits, as in bcache.c (the same skeleton, shard.h): iget() of a cached
 * inode walks the hash chain inside an epoch section (ebr.h) and takes
 * the reference with a CAS that refuses INODE_REF_DEAD; iput() drops it
 * with one atomic.  The shard lock is taken only to insert, to evict, to
 * free a deleted inode, and when an inode the evictor took off the LRU
 * (it was in use) goes idle again.  A hit sets inode.referenced; the
 * evictor (a clock, under the lock) gives a referenced idle inode a
 * second chance instead of evicting it.  An unhashed inode's memory goes
 * back to the slab only once no lock-free lookup can still be looking at
 * it (the shard's retired lists, shard_reclaim_locked()).
 */
#define INODE_REF_DEAD SHARD_REF_DEAD

/* A shard of the cache: the skeleton (shard.h says what its lock,
 * RANK_ICACHE_SHARD, protects: the chains, the LRU, nhashed, nlru, the
 * retired lists and each inode's node), on a cache line of its own. */
struct icache_shard {
	struct shard sh;
} __attribute__((aligned(CACHELINE)));

struct icache {
	struct uext4_fs *fs;        /* read-only after create */
	struct slab *slab;          /* struct inode + raw inode objects */
	uint32_t max_unused_per_shard; /* LRU length beyond which a shard evicts; read-only */
	const struct icache_host *host; /* read-only after create */
	struct icache_shard shards[ICACHE_SHARDS];
};

static inline struct inode *inode_of(struct shard_node *n)
{
	return (struct inode *)((char *)n - offsetof(struct inode, node));
}

static struct icache_shard *shard_of(struct icache *ic, uint64_t ino)
{
	return &ic->shards[(ino * 0x9E3779B97F4A7C15ull) >> (64 - ICACHE_SHARD_BITS)];
}

static uint32_t bucket_of(struct icache_shard *s, uint64_t ino)
{
	return (uint32_t)((ino / ICACHE_SHARDS) % s->sh.nbuckets);
}

/*
 * Unused inodes kept per shard: `limit` in all (uext4_opts.inode_cache),
 * else what UEXT4_ICACHE_UNUSED says (tests: a tiny cache evicts all the
 * time), else ICACHE_MAX_UNUSED.  Only idle inodes are evicted: inodes
 * with a reference (open files, operations under way) stay beyond it.
 * Dirty inodes pin nothing: a change is encoded into the inode-table
 * buffer at once (itable_update()), which the commit writes.
 */
static uint32_t unused_per_shard(unsigned limit)
{
	const char *env = getenv("UEXT4_ICACHE_UNUSED");
	unsigned long n = ICACHE_MAX_UNUSED;

	if (limit)
		return limit / ICACHE_SHARDS ? limit / ICACHE_SHARDS : 1;

	if (env && *env) {
		char *end;

		n = strtoul(env, &end, 10);
		if (*end || n > (1ul << 30))
			n = ICACHE_MAX_UNUSED;
	}
	return (uint32_t)(n / ICACHE_SHARDS);
}

const struct icache_host *icache_host(const struct uext4_fs *fs)
{
	return fs->icache ? fs->icache->host : NULL;
}

struct icache *icache_create(struct uext4_fs *fs, unsigned limit, const struct icache_host *host)
{
	struct icache *ic = aligned_alloc(CACHELINE, sizeof(*ic));

	if (!ic)
		return NULL;
	memset(ic, 0, sizeof(*ic));
	ic->fs = fs;
	ic->host = host;
	ic->max_unused_per_shard = unused_per_shard(limit);
	/* The idle inodes it keeps, and as many in use. */
	ic->slab = slab_create(sizeof(struct inode) + fs->inode_size,
			       (size_t)ic->max_unused_per_shard * ICACHE_SHARDS * 2 *
				       (sizeof(struct inode) + fs->inode_size));
	if (!ic->slab) {
		free(ic);
		return NULL;
	}
	for (unsigned i = 0; i < ICACHE_SHARDS; i++) {
		if (shard_init(&ic->shards[i].sh, RANK_ICACHE_SHARD, 4096)) {
			icache_destroy(ic);
			return NULL;
		}
	}
	return ic;
}

/* What an inode holds besides its memory (dead or never hashed: no
 * thread uses it any more, though a lookup may still read its key). */
static void inode_release_state(struct uext4_fs *fs, struct inode *inode)
{
	if (inode->pa)
		fs->icache->host->release_prealloc(fs, inode);
	if (atomic_load_explicit(&inode->verity, memory_order_relaxed))
		fs->icache->host->release_verity(inode);
	urwlock_destroy(&inode->lock);
}

struct inode *icache_alloc(struct uext4_fs *fs)
{
	return slab_alloc(fs->icache->slab);
}

void icache_free_memory(struct uext4_fs *fs, struct inode *n)
{
	slab_free(fs->icache->slab, n);
}

/* A copy that was never hashed: nobody else can have seen it. */
void icache_free_copy(struct uext4_fs *fs, struct inode *inode)
{
	inode_release_state(fs, inode);
	slab_free(fs->icache->slab, inode);
}

static void slab_free_node(void *ic, struct shard_node *n)
{
	slab_free(((struct icache *)ic)->slab, inode_of(n));
}

/* Inodes linked by lru_next back to the slab (their state released). */
static void slab_free_list(struct icache *ic, struct shard_node *list)
{
	shard_free_list(list, slab_free_node, ic);
}

/* Killed inodes (linked by lru_next): release their state outside the
 * shard lock (the preallocation takes group locks), then retire them,
 * and free whatever older retirees became safe. */
static void retire_victims(struct uext4_fs *fs, struct icache_shard *s, struct shard_node *victims)
{
	struct shard_node *free_now;

	if (!victims)
		return;
	for (struct shard_node *n = victims; n; n = n->lru_next)
		inode_release_state(fs, inode_of(n));
	ulock_lock(&s->sh.lock);
	while (victims) {
		struct shard_node *next = victims->lru_next;

		shard_retire_locked(&s->sh, victims);
		victims = next;
	}
	free_now = shard_reclaim_locked(&s->sh);
	ulock_unlock(&s->sh.lock);
	slab_free_list(fs->icache, free_now);
}

void icache_destroy(struct icache *ic)
{
	for (unsigned i = 0; i < ICACHE_SHARDS; i++) {
		struct shard *sh = &ic->shards[i].sh;

		/* What the hashed hold besides memory (the retired released
		 * theirs when they were killed). */
		for (uint32_t b = 0; sh->buckets && b < sh->nbuckets; b++)
			for (struct shard_node *n = shard_chain(sh, b); n; n = shard_next(n))
				inode_release_state(ic->fs, inode_of(n));
		shard_destroy(sh, slab_free_node, ic);
	}
	slab_destroy(ic->slab);
	free(ic);
}

/* --- LRU, eviction and deferred freeing (shard lock held) --- */

static bool on_lru(struct inode *n)
{
	return shard_on_lru(&n->node);
}

static void hash_insert(struct icache_shard *s, struct inode *n)
{
	shard_hash_insert(&s->sh, bucket_of(s, n->ino), &n->node);
	shard_lru_add(&s->sh, &n->node);
}

static void hash_remove(struct icache_shard *s, struct inode *n)
{
	shard_hash_remove(&s->sh, bucket_of(s, n->ino), &n->node);
}

/* Inodes cached now and, of them, idle ones (on an LRU): a sum of
 * per-shard counts, each read under its shard's lock (tests and stats;
 * never on a hot path). */
void icache_counts(struct uext4_fs *fs, uint64_t *cached, uint64_t *idle)
{
	uint64_t c = 0, u = 0;

	for (unsigned i = 0; i < ICACHE_SHARDS; i++) {
		struct shard *sh = &fs->icache->shards[i].sh;

		ulock_lock(&sh->lock);
		c += sh->nhashed;
		u += sh->nlru;
		ulock_unlock(&sh->lock);
	}
	*cached = c;
	if (idle)
		*idle = u;
}

/* Take a reference on a cached inode, or return NULL (shard lock held:
 * a hashed inode is never dead then). */
static struct inode *lookup_locked(struct icache_shard *s, uint64_t ino)
{
	struct shard_node *n = shard_lookup_locked(&s->sh, bucket_of(s, ino), ino);

	return n ? inode_of(n) : NULL;
}

/* count -> dead (the caller holds the last `count` references, or 0 for
 * an idle inode), and out of the hash and the LRU; false if somebody took
 * a reference meanwhile. */
static bool kill_locked(struct icache_shard *s, struct inode *n, uint32_t count)
{
	if (!shard_kill_locked(&s->sh, &n->node, count))
		return false;
	if (!(atomic_load(&n->istate) & INODE_UNHASHED))
		hash_remove(s, n);
	return true;
}

/* Unlinked, not yet deleted: its last iput() deletes it, so it must not
 * leave the cache unnoticed (see iput()). */
static bool unlinked_pending(struct inode *n)
{
	return (atomic_load(&n->istate) & (INODE_UNLINKED | INODE_DELETED)) == INODE_UNLINKED;
}

static bool node_unlinked_pending(struct shard_node *n)
{
	return unlinked_pending(inode_of(n));
}

static bool node_idle(struct shard_node *n)
{
	return atomic_load(&n->refcount) == 0;
}

struct shrink_ctx {
	struct icache *ic;
	struct shard_node *victims;
};

static bool over_share(struct shard *sh, void *ctx)
{
	return sh->nlru > ((struct shrink_ctx *)ctx)->ic->max_unused_per_shard;
}

/* A killed idle inode leaves the hash; its state is released and it is
 * retired after the lock is dropped (retire_victims()). */
static void evict_one(struct shard *sh, struct shard_node *n, void *ctx)
{
	struct shrink_ctx *c = ctx;
	struct inode *inode = inode_of(n);

	if (!(atomic_load(&inode->istate) & INODE_UNHASHED))
		shard_hash_remove(sh, bucket_of((struct icache_shard *)sh, inode->ino), n);
	n->lru_next = c->victims;
	c->victims = n;
}

/*
 * A clock over the LRU beyond the shard's share (shard.h): idle inodes
 * hit since the last pass go to the young end once more, unlinked ones
 * waiting for their last iput() leave the LRU (that iput() deletes them),
 * the others are killed and linked on *victims by lru_next (their state
 * is released and they are retired after the lock is dropped:
 * retire_victims()).
 */
static void shrink_locked(struct uext4_fs *fs, struct icache_shard *s, struct shard_node **victims)
{
	struct shrink_ctx c = { fs->icache, *victims };

	shard_clock_locked(&s->sh, over_share, node_idle, node_unlinked_pending, evict_one, &c);
	*victims = c.victims;
}

/* The cached inode ino with a reference, or NULL: no lock
 * (shard_lookup_lockfree()).  NULL sends the caller to the locked path. */
struct inode *icache_lookup(struct uext4_fs *fs, uint64_t ino)
{
	struct icache_shard *s = shard_of(fs->icache, ino);
	struct shard_node *n = shard_lookup_lockfree(&s->sh, bucket_of(s, ino), ino,
						     memory_order_seq_cst);

	return n ? inode_of(n) : NULL;
}

struct inode *icache_peek(struct uext4_fs *fs, uint64_t ino)
{
	struct icache_shard *s = shard_of(fs->icache, ino);
	struct shard_node *n = shard_find(&s->sh, bucket_of(s, ino), ino);

	if (!n || (atomic_load_explicit(&n->refcount, memory_order_acquire) & INODE_REF_DEAD))
		return NULL;
	return inode_of(n);
}

/*
 * Put a loaded copy in the cache unless one is there already (the first
 * to insert wins).  Also refused: a copy of a slot written since it was
 * copied (its stripe's count moved), as when the inode it showed was
 * created, freed and dropped from the cache meanwhile; cached, the stale
 * copy would stand for a free number.  Every write of a slot is done by
 * a cached inode of that number (hashed from before its first write until
 * after its last), so when none is cached an unchanged count means the
 * copy is still the slot's contents.  1 = copy refused: load again.
 */
int icache_insert_loaded(struct uext4_fs *fs, struct inode **mine,
			 bool (*slot_changed)(struct uext4_fs *fs, uint64_t ino, uint32_t writes),
			 uint32_t writes, struct inode **out)
{
	uint64_t ino = (*mine)->ino;
	struct icache_shard *s = shard_of(fs->icache, ino);
	struct inode *n;
	struct shard_node *victims = NULL;
	int again = 0;

	ulock_lock(&s->sh.lock);
	n = lookup_locked(s, ino); /* somebody may have loaded it meanwhile */
	if (!n && slot_changed(fs, ino, writes)) {
		again = 1;
	} else if (!n) {
		hash_insert(s, *mine);
		shrink_locked(fs, s, &victims);
		n = *mine;
		*mine = NULL;
	}
	ulock_unlock(&s->sh.lock);
	retire_victims(fs, s, victims);
	*out = n;
	return again;
}

void igrab(struct inode *n)
{
	/* The caller holds a reference, so this is never the 0 -> 1 step. */
	atomic_fetch_add_explicit(&n->refcount, 1, memory_order_relaxed);
}

/*
 * Unlink and rmdir free an inode in the handle that takes its last link
 * when they hold its only reference (not open, no lookup count): the
 * removal and the free commit together, so it needs no orphan entry (on
 * the legacy list, one mutex for the whole file system) and no second
 * handle.  The claim is a Dekker pair with the lock-free grab: CLAIMING
 * is set, then the count read (both seq_cst), while a grab raises the
 * count, then reads the state (icache_try_grab(), settled_istate() in inode.c); so either
 * the claim sees the new reference and gives up, or the grabber sees
 * CLAIMING, waits for FREEING (set before CLAIMING is cleared) and gets
 * ENOENT, as if its lookup came after the unlink.  A grabber that meets
 * a claim which gives up goes on with the inode.  Caller holds n->lock
 * for writing.
 */
bool inode_claim_free(struct inode *n)
{
	bool only = false;

	atomic_fetch_or(&n->istate, INODE_CLAIMING);
	if (atomic_load(&n->refcount) == 1) {
		atomic_fetch_or(&n->istate, INODE_FREEING);
		only = true;
	}
	atomic_fetch_and(&n->istate, ~(uint32_t)INODE_CLAIMING);
	return only;
}

void inode_unclaim_free(struct inode *n)
{
	atomic_fetch_and(&n->istate, ~(uint32_t)INODE_FREEING);
}

/* The last reference of a deleted inode: it leaves the cache, unless a
 * lookup took a reference meanwhile (then that one's iput() frees it). */
static void put_deleted(struct uext4_fs *fs, struct inode *n)
{
	struct icache_shard *s = shard_of(fs->icache, n->ino);
	struct shard_node *free_now = NULL;
	bool killed, at_once = false;

	ulock_lock(&s->sh.lock);
	killed = kill_locked(s, n, 1);
	if (!killed) {
		atomic_fetch_sub(&n->refcount, 1);
	} else if (!n->pa) {
		/* inode_free_unlinked() (ifree.c) gave the preallocation back: nothing left
		 * to release that takes a lock, so retire it now (one shard
		 * lock per unlink, not two). */
		urwlock_destroy(&n->lock);
		shard_retire_locked(&s->sh, &n->node);
		free_now = shard_reclaim_locked(&s->sh);
		at_once = true;
	}
	ulock_unlock(&s->sh.lock);
	if (killed && !at_once) {
		n->node.lru_next = NULL;
		retire_victims(fs, s, &n->node);
	}
	slab_free_list(fs->icache, free_now);
}

/* Our reference was the last of a live inode: if the evictor took it off
 * the LRU while it was in use, it goes back on (and the shard may shrink).
 * Inside an epoch section: n may be evicted as soon as the count is 0. */
static void put_idle(struct uext4_fs *fs, struct inode *n)
{
	struct icache_shard *s;
	struct shard_node *victims = NULL;

	if (on_lru(n))
		return; /* the common case */
	s = shard_of(fs->icache, n->ino);
	ulock_lock(&s->sh.lock);
	if (!on_lru(n) && atomic_load(&n->refcount) == 0) {
		shard_lru_add(&s->sh, &n->node);
		shrink_locked(fs, s, &victims);
	}
	ulock_unlock(&s->sh.lock);
	retire_victims(fs, s, victims);
}

int iput(struct uext4_fs *fs, struct inode *n)
{
	int err = 0;
	uint32_t r, old;

	if (!n)
		return 0;
	/* Not the last reference: one CAS. */
	r = atomic_load_explicit(&n->refcount, memory_order_relaxed);
	while (r > 1) {
		if (atomic_compare_exchange_weak_explicit(&n->refcount, &r, r - 1,
							  memory_order_release,
							  memory_order_relaxed))
			return 0;
	}
	if ((atomic_load(&n->istate) & (INODE_UNLINKED | INODE_DELETED)) == INODE_UNLINKED)
		err = fs->icache->host->free_unlinked(fs, n, false);
	if (atomic_load(&n->istate) & INODE_DELETED) {
		put_deleted(fs, n);
		return err;
	}
	ebr_enter();
	old = atomic_fetch_sub(&n->refcount, 1);
	/* The look at istate above and this drop are not one step: a lookup
	 * may have taken a reference in between, unlinked the inode and put
	 * its reference back, leaving ours the last one of an unlinked
	 * inode.  The drop reads what that put wrote, so its UNLINKED is
	 * seen here; take the inode back and put it as the last holder
	 * (shrink_locked() leaves such an inode cached meanwhile). */
	if (old == 1 && unlinked_pending(n) && icache_try_grab(n)) {
		ebr_exit();
		return iput(fs, n);
	}
	if (old == 1)
		put_idle(fs, n);
	ebr_exit();
	return err;
}

static void icache_drop_lookups(struct uext4_fs *fs);

/*
 * Unmount: inodes whose last link went while they were still open (a
 * frontend that never released them) or looked up (the lookup counts end
 * first) are freed now, so nothing leaks; the orphan list covers a crash
 * instead.
 */
void icache_delete_unlinked(struct uext4_fs *fs)
{
	icache_drop_lookups(fs);
	for (unsigned i = 0; i < ICACHE_SHARDS; i++) {
		struct icache_shard *s = &fs->icache->shards[i];
		struct inode *found;

		do {
			found = NULL;
			ulock_lock(&s->sh.lock);
			for (uint32_t b = 0; b < s->sh.nbuckets && !found; b++)
				for (struct shard_node *n = shard_chain(&s->sh, b); n && !found;
				     n = shard_next(n))
					if (unlinked_pending(inode_of(n)))
						found = lookup_locked(s, n->key);
			ulock_unlock(&s->sh.lock);
			if (found) {
				fs->icache->host->free_unlinked(fs, found, true);
				atomic_fetch_or(&found->istate, INODE_DELETED);
				iput(fs, found);
			}
		} while (found);
	}
}

/*
 * The frontend's lookup counts (FUSE: every entry the kernel is given by
 * LOOKUP, CREATE, MKNOD, MKDIR, SYMLINK, LINK and READDIRPLUS counts one;
 * FORGET takes back nlookup).  While the kernel counts an inode it may
 * still send requests for it by number (with the writeback cache, the
 * SETATTR of its ctime right after its UNLINK), so the inode holds
 * one reference then, exactly like an open file: unlinked, it stays on
 * its orphan list, allocated, its number not reused, until the count
 * reaches 0 (or unmount, icache_drop_lookups()) and the last iput()
 * frees it.  The count is an atomic per inode; the reference is taken at
 * 0 -> 1 by a caller that already holds one (igrab) and dropped at -> 0.
 * A count may only go down after the frontend handed it out, i.e. after
 * the increment returned, so the two steps never cross.  The root is not
 * counted: it is never freed, and the kernel counts it without a lookup.
 */
void icache_lookup_count_add(struct inode *n)
{
	if (atomic_fetch_add_explicit(&n->nlookup, 1, memory_order_relaxed) == 0)
		igrab(n);
}

/* A cached inode, referenced, or NULL: never loads (a count implies it
 * is cached). */
static struct inode *icache_find(struct uext4_fs *fs, uint64_t ino)
{
	struct icache_shard *s = shard_of(fs->icache, ino);
	struct inode *n = icache_lookup(fs, ino);

	if (n)
		return n;
	ulock_lock(&s->sh.lock); /* a dead copy may hide a live one behind it */
	n = lookup_locked(s, ino);
	ulock_unlock(&s->sh.lock);
	return n;
}

/* Take k off the count (never below 0: a frontend that forgets more than
 * it was given is wrong, not a reason to drop a reference twice); true if
 * this took it to 0, which hands the count's reference to the caller. */
static bool lookup_count_sub(struct inode *n, uint64_t k)
{
	uint64_t old = atomic_load_explicit(&n->nlookup, memory_order_relaxed), new;

	do {
		if (old == 0)
			return false;
		new = old > k ? old - k : 0;
	} while (!atomic_compare_exchange_weak_explicit(&n->nlookup, &old, new,
							memory_order_relaxed,
							memory_order_relaxed));
	return new == 0;
}

void inode_forget(struct uext4_fs *fs, uint64_t ino, uint64_t nlookup)
{
	struct inode *n;

	if (ino == EXT4_ROOT_INO || nlookup == 0 || !(n = icache_find(fs, ino)))
		return;
	if (lookup_count_sub(n, nlookup))
		iput(fs, n);
	/* The last reference of an unlinked inode frees it (its error, if
	 * any, is recorded on the file system by iput()). */
	iput(fs, n);
}

uint32_t inode_users(struct inode *n)
{
	uint32_t r = atomic_load_explicit(&n->refcount, memory_order_relaxed);

	return r - (atomic_load_explicit(&n->nlookup, memory_order_relaxed) > 0 && r > 0);
}

/*
 * Unmount: the kernel sends no FORGET for what it still holds (the
 * connection is gone), so every count ends here; an unlinked inode that
 * only a count kept is freed by its last iput(), as at a FORGET.  One
 * pass per shard: a count set to 0 is not met again.
 */
static void icache_drop_lookups(struct uext4_fs *fs)
{
	for (unsigned i = 0; i < ICACHE_SHARDS; i++) {
		struct shard *sh = &fs->icache->shards[i].sh;

		for (uint32_t b = 0; b < sh->nbuckets; b++) {
			struct inode *found;

			do {
				found = NULL;
				ulock_lock(&sh->lock);
				for (struct shard_node *n = shard_chain(sh, b); n && !found;
				     n = shard_next(n))
					if (atomic_exchange(&inode_of(n)->nlookup, 0) > 0)
						found = inode_of(n); /* the count's reference is ours */
				ulock_unlock(&sh->lock);
				if (found)
					iput(fs, found);
			} while (found);
		}
	}
}

int icache_insert_new(struct uext4_fs *fs, struct inode *n)
{
	struct icache_shard *s = shard_of(fs->icache, n->ino);
	struct shard_node *found, *victims = NULL;
	struct inode *old;

	ulock_lock(&s->sh.lock);
	found = shard_find(&s->sh, bucket_of(s, n->ino), n->ino);
	old = found ? inode_of(found) : NULL;
	if (old && (atomic_load(&old->istate) & INODE_DELETED)) {
		/* A freed inode somebody still holds: it leaves the hash now
		 * and is freed at its last iput(). */
		hash_remove(s, old);
		atomic_fetch_or(&old->istate, INODE_UNHASHED);
		old = NULL;
	}
	if (!old) {
		hash_insert(s, n);
		shrink_locked(fs, s, &victims);
	}
	ulock_unlock(&s->sh.lock);
	retire_victims(fs, s, victims);
	if (old)
		return fs_corrupt("inode %llu: allocated while still cached in use "
				  "(inode bitmap out of step with the directory tree)",
				  (unsigned long long)n->ino);
	return 0;
}
