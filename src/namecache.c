/*
 * namecache.c - the name cache: (directory, name) -> inode number, or a
 * negative entry ("no such name"), so that a warm lookup costs a hash
 * probe rather than a scan of the directory's blocks.
 *
 * Layout: a fixed array of buckets (a power of two), NC_WAYS entries
 * each, sized at mount; memory never grows.  An entry holds the
 * directory's identity (struct inode.nc_id, see below), the inode number
 * (0 for a negative entry), the DT_* type and the name, inline, up to
 * NC_NAME_MAX bytes (longer names are simply not cached).  A bucket's
 * header keeps a 16-bit tag per entry, so a probe reads the header line
 * and only the entry lines whose tag matches.  A full bucket replaces an
 * entry chosen round-robin by the bucket's sequence number (the readers
 * write nothing, so there is no recency to go by).
 *
 * Lock-free reads (a seqlock per bucket, C11 atomics): every field of a
 * bucket is an atomic read with acquire and written with release, so
 * TSan sees no data race and no fence is needed.  A writer makes seq odd,
 * changes the entries, makes seq even again; a reader that saw the same
 * even seq before and after its probe read a consistent bucket, else it
 * tries again a few times and then reads the directory instead.  A probe
 * takes no lock and writes no shared cache line.
 *
 * Writers (insert, invalidate) take the bucket's spinlock (seq and the
 * entries change only under it; the critical sections are a handful of
 * stores, never a call out).
 *
 * Invalidation: dir.c calls namecache_invalidate() for every name whose
 * entry it adds, removes or retargets (create, mknod, mkdir, symlink,
 * link, unlink, rmdir, every rename flavour and their undo paths, ".."
 * of a moved directory), after the change and with dir->lock still held
 * for writing (or, for the parallel changes of one htree leaf, dir->lock
 * shared and the leaf's lock held for writing).  It always bumps the bucket's seq, even when nothing was
 * cached, because of this race: a lookup misses, reads the directory (old
 * contents), a create of that name changes it, and only then the lookup
 * would insert its stale "absent".  The lookup therefore inserts only if
 * the bucket's seq is still the one its missing probe saw (the token),
 * which any invalidation of that name since then has changed.  The probe
 * happens before the directory read and the invalidation after the
 * change, so the check is exact for the name, whatever locks order the
 * read and the change.
 *
 * Skipping: a directory gets its nc_id in the first probe (make_key(),
 * before the probe reads seq), and only a probe's token lets an insert in.
 * So an invalidation that finds nc_id still 0 has nothing to do: no entry
 * names the directory, and no lookup is between its probe and its insert.
 * The order is the same one the token relies on: the lookup sets nc_id
 * before it reads the directory, the change is made before the
 * invalidation reads nc_id, and whatever lock orders that read and that
 * change also makes the store visible to the load.  A directory that
 * nothing looks up (creates and unlinks through the API alone, as a
 * program that knows its names does) then never touches the table.
 *
 * Casefolded directories: dir.c gives the folded name as the key
 * (dir.c casefold_lookup_locked(), dir_nc_invalidate()), so one entry
 * answers every case of a name; this file only sees bytes.
 *
 * Directory identity: an entry names its directory by struct inode.nc_id,
 * a number unique within the mount, taken from a counter the first time
 * the directory is used here (the inode slab hands out zeroed memory, so
 * a loaded inode starts at 0).  An inode evicted from the inode cache and
 * loaded again, and a directory inode freed and reused (dir_make() calls
 * namecache_forget_dir()), get a new number, so their old entries can
 * never match again; they age out by replacement.
 */
#include "internal.h"
#include "lock.h"
#include "namecache.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NC_WAYS 4
#define NC_NAME_WORDS (NC_NAME_MAX / 8)
#define NC_DEFAULT_ENTRIES 65536u
#define NC_MAX_ENTRIES (1u << 24)
#define NC_READ_TRIES 4

/* One entry: one cache line. */
struct nc_entry {
	_Atomic uint64_t dir;               /* directory's nc_id; 0 = empty */
	_Atomic uint64_t meta;              /* ino (bits 0-31), len (32-39), dtype (40-47) */
	_Atomic uint64_t name[NC_NAME_WORDS]; /* zero-padded */
} __attribute__((aligned(CACHELINE)));

struct nc_bucket {
	/* Protected by lock (written only by its holder), read lock-free: */
	_Atomic uint32_t seq;               /* odd while a writer changes the entries */
	_Atomic uint16_t tag[NC_WAYS];      /* 0 = empty way */
	_Atomic uint32_t lock;              /* spinlock of the writers: 1 = held */
	struct nc_entry e[NC_WAYS];
} __attribute__((aligned(CACHELINE)));

struct namecache {
	/* Read-only after namecache_create(): */
	struct nc_bucket *b;
	void *mem;                          /* what b was carved from */
	uint64_t mask;                      /* buckets - 1 */
	/* Tests (UEXT4_NAMECACHE_DELAY_US): a pause before each insert,
	 * which widens the window between a directory read and its insert
	 * that the token closes (tests/unit_namecache.c). */
	unsigned insert_delay_us;
	/* Atomic, no lock; on a line of its own (taken once per directory
	 * inode loaded, not per lookup): */
	_Atomic uint64_t next_id __attribute__((aligned(CACHELINE)));
};

/* The key of a lookup, computed once. */
struct nc_key {
	uint64_t dir;
	uint64_t name[NC_NAME_WORDS];
	unsigned words;                     /* name words to compare */
	uint64_t hash;
	uint16_t tag;
	size_t len;
};

static unsigned entries_wanted(const struct uext4_opts *o)
{
	const char *env = getenv("UEXT4_NAMECACHE");
	unsigned long n = NC_DEFAULT_ENTRIES;

	if (o && o->no_name_cache)
		return 0;
	if (env && *env) {
		char *end;

		n = strtoul(env, &end, 10);
		if (*end)
			n = NC_DEFAULT_ENTRIES; /* not a number: the default */
	}
	return n > NC_MAX_ENTRIES ? NC_MAX_ENTRIES : (unsigned)n;
}

struct namecache *namecache_create(const struct uext4_opts *o)
{
	unsigned n = entries_wanted(o), buckets = 1;
	struct namecache *nc;

	if (n == 0)
		return NULL;
	while (buckets * NC_WAYS < n)
		buckets *= 2;
	nc = aligned_alloc(CACHELINE, sizeof(*nc));
	if (!nc)
		return NULL; /* no cache: lookups read the directory */
	memset(nc, 0, sizeof(*nc));
	/* All-zero is a valid empty bucket (seq 0, tags 0, unlocked); calloc
	 * of this size maps fresh zero pages, so a mount touches none of it
	 * until used.  Aligned by hand to a cache line. */
	nc->mem = calloc(1, buckets * sizeof(struct nc_bucket) + CACHELINE);
	if (!nc->mem) {
		free(nc);
		return NULL;
	}
	nc->b = (struct nc_bucket *)(((uintptr_t)nc->mem + CACHELINE - 1) &
				     ~(uintptr_t)(CACHELINE - 1));
	nc->mask = buckets - 1;
	const char *delay = getenv("UEXT4_NAMECACHE_DELAY_US");
	nc->insert_delay_us = delay ? (unsigned)strtoul(delay, NULL, 10) : 0;
	atomic_init(&nc->next_id, 1);
	return nc;
}

void namecache_destroy(struct namecache *nc)
{
	if (!nc)
		return;
	free(nc->mem);
	free(nc);
}

/* ------------------------------------------------------------- keys */

static uint64_t dir_id(struct namecache *nc, struct inode *dir)
{
	uint64_t id = atomic_load_explicit(&dir->nc_id, memory_order_relaxed);

	if (id)
		return id;
	uint64_t fresh = atomic_fetch_add_explicit(&nc->next_id, 1, memory_order_relaxed);
	if (atomic_compare_exchange_strong_explicit(&dir->nc_id, &id, fresh, memory_order_relaxed,
						    memory_order_relaxed))
		return fresh;
	return id; /* another thread gave it one first */
}

static uint64_t mix64(uint64_t h)
{
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	h *= 0xc4ceb9fe1a85ec53ull;
	h ^= h >> 33;
	return h;
}

static void make_key(struct namecache *nc, struct inode *dir, const char *name, size_t len,
		     struct nc_key *k)
{
	uint64_t h;

	k->dir = dir_id(nc, dir);
	k->len = len;
	k->words = (unsigned)((len + 7) / 8);
	memset(k->name, 0, sizeof(k->name));
	memcpy(k->name, name, len);
	h = k->dir * 0x9e3779b97f4a7c15ull ^ len;
	for (unsigned i = 0; i < k->words; i++)
		h = (h ^ k->name[i]) * 0x100000001b3ull;
	k->hash = mix64(h);
	k->tag = (uint16_t)((k->hash >> 48) | 1);
}

static struct nc_bucket *bucket_of(struct namecache *nc, const struct nc_key *k)
{
	return &nc->b[k->hash & nc->mask];
}

static bool cacheable(struct namecache *nc, size_t len)
{
	return nc && len > 0 && len <= NC_NAME_MAX;
}

/* Does entry e hold key k?  *meta gets its meta word (lock-free read). */
static bool entry_matches(const struct nc_entry *e, const struct nc_key *k, uint64_t *meta)
{
	if (atomic_load_explicit(&e->dir, memory_order_acquire) != k->dir)
		return false;
	*meta = atomic_load_explicit(&e->meta, memory_order_acquire);
	if (((*meta >> 32) & 0xff) != k->len)
		return false;
	for (unsigned i = 0; i < k->words; i++)
		if (atomic_load_explicit(&e->name[i], memory_order_acquire) != k->name[i])
			return false;
	return true;
}

/* ------------------------------------------------------------- readers */

/* The probe: as namecache_lookup(), and on a hit *stamp names the bucket
 * and the even seq the hit was read under. */
static int probe(struct namecache *nc, struct inode *dir, const char *name, size_t len,
		 uint64_t *ino, unsigned *dtype, uint32_t *token, struct nc_stamp *stamp)
{
	struct nc_key k;
	struct nc_bucket *b;

	*token = NC_NO_TOKEN;
	if (!cacheable(nc, len))
		return 0;
	make_key(nc, dir, name, len, &k);
	b = bucket_of(nc, &k);
	for (int tries = 0; tries < NC_READ_TRIES; tries++) {
		uint32_t s = atomic_load_explicit(&b->seq, memory_order_acquire);
		uint64_t meta = 0;
		bool hit = false;

		if (s & 1)
			continue; /* a writer is in the bucket */
		for (int i = 0; i < NC_WAYS && !hit; i++)
			hit = atomic_load_explicit(&b->tag[i], memory_order_acquire) == k.tag &&
			      entry_matches(&b->e[i], &k, &meta);
		if (atomic_load_explicit(&b->seq, memory_order_acquire) != s)
			continue; /* changed under us: read again */
		if (!hit) {
			*token = s;
			return 0;
		}
		*ino = meta & 0xffffffffu;
		*dtype = (unsigned)((meta >> 40) & 0xff);
		stamp->bucket = b;
		stamp->seq = s;
		return 1;
	}
	return 0;
}

int namecache_lookup(struct namecache *nc, struct inode *dir, const char *name, size_t len,
		     uint64_t *ino, unsigned *dtype, uint32_t *token)
{
	struct nc_stamp unused;

	return probe(nc, dir, name, len, ino, dtype, token, &unused);
}

int namecache_lookup_stamped(struct namecache *nc, struct inode *dir, const char *name,
			     size_t len, uint64_t *ino, unsigned *dtype, struct nc_stamp *stamp)
{
	uint32_t token;

	return probe(nc, dir, name, len, ino, dtype, &token, stamp);
}

bool namecache_stamp_valid(const struct nc_stamp *stamp)
{
	const struct nc_bucket *b = stamp->bucket;

	/* Order the caller's reads (the inode it resolved to) before this. */
	atomic_thread_fence(memory_order_acquire);
	return atomic_load_explicit(&b->seq, memory_order_acquire) == stamp->seq;
}

/* ------------------------------------------------------------- writers */

static void bucket_lock(struct nc_bucket *b)
{
	for (unsigned spins = 0;; spins++) {
		uint32_t free_ = 0;

		if (atomic_load_explicit(&b->lock, memory_order_relaxed) == 0 &&
		    atomic_compare_exchange_weak_explicit(&b->lock, &free_, 1, memory_order_acquire,
							  memory_order_relaxed))
			return;
		if (spins >= 64)
			sched_yield(); /* the holder was preempted: let it run */
		else
			cpu_relax();
	}
}

static void bucket_unlock(struct nc_bucket *b)
{
	atomic_store_explicit(&b->lock, 0, memory_order_release);
}

/* Enter and leave the odd phase of seq (bucket locked).  The stores in
 * between are releases, so a reader that sees one of them also sees the
 * odd seq when it checks again. */
static uint32_t write_begin(struct nc_bucket *b)
{
	uint32_t s = atomic_load_explicit(&b->seq, memory_order_relaxed);

	atomic_store_explicit(&b->seq, s + 1, memory_order_relaxed);
	return s;
}

static void write_end(struct nc_bucket *b, uint32_t s)
{
	atomic_store_explicit(&b->seq, s + 2, memory_order_release);
}

static void clear_way(struct nc_bucket *b, int i)
{
	atomic_store_explicit(&b->tag[i], 0, memory_order_release);
	atomic_store_explicit(&b->e[i].dir, 0, memory_order_release);
}

/* The way an insert takes: an empty one, else round-robin. */
static int victim_way(struct nc_bucket *b, uint32_t s)
{
	for (int i = 0; i < NC_WAYS; i++)
		if (atomic_load_explicit(&b->tag[i], memory_order_relaxed) == 0)
			return i;
	return (int)((s >> 1) % NC_WAYS);
}

void namecache_insert(struct namecache *nc, struct inode *dir, const char *name, size_t len,
		      uint64_t ino, unsigned dtype, uint32_t token)
{
	struct nc_key k;
	struct nc_bucket *b;

	if (!cacheable(nc, len) || token == NC_NO_TOKEN || ino > UINT32_MAX)
		return;
	if (nc->insert_delay_us)
		usleep(nc->insert_delay_us);
	make_key(nc, dir, name, len, &k);
	b = bucket_of(nc, &k);
	bucket_lock(b);
	/* Unchanged since the probe missed: no invalidation of this name (nor
	 * another insert of it) came between, so what was read is current. */
	if (atomic_load_explicit(&b->seq, memory_order_relaxed) == token) {
		uint32_t s = write_begin(b);
		int i = victim_way(b, s);
		struct nc_entry *e = &b->e[i];

		atomic_store_explicit(&e->dir, k.dir, memory_order_release);
		atomic_store_explicit(&e->meta, ino | (uint64_t)len << 32 | (uint64_t)(dtype & 0xff) << 40,
				      memory_order_release);
		for (unsigned w = 0; w < NC_NAME_WORDS; w++)
			atomic_store_explicit(&e->name[w], k.name[w], memory_order_release);
		atomic_store_explicit(&b->tag[i], k.tag, memory_order_release);
		write_end(b, s);
	}
	bucket_unlock(b);
}

void namecache_invalidate(struct namecache *nc, struct inode *dir, const char *name,
			  size_t len)
{
	struct nc_key k;
	struct nc_bucket *b;
	uint64_t meta;

	if (!cacheable(nc, len))
		return; /* never cached, never inserted */
	/* A directory never probed since it was loaded has no identity yet:
	 * no entry can name it and no lookup holds a token for it, so there
	 * is nothing to drop or to fail (see "Skipping" above).  Saves a
	 * cache miss on a random bucket per create or unlink. */
	if (atomic_load_explicit(&dir->nc_id, memory_order_relaxed) == 0)
		return;
	make_key(nc, dir, name, len, &k);
	b = bucket_of(nc, &k);
	bucket_lock(b);
	uint32_t s = write_begin(b); /* always: fails any insert racing with this change */
	for (int i = 0; i < NC_WAYS; i++)
		if (atomic_load_explicit(&b->tag[i], memory_order_relaxed) == k.tag &&
		    entry_matches(&b->e[i], &k, &meta))
			clear_way(b, i);
	write_end(b, s);
	bucket_unlock(b);
}

void namecache_forget_dir(struct inode *dir)
{
	atomic_store_explicit(&dir->nc_id, 0, memory_order_relaxed);
}
