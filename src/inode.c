/*
 * inode.c - the in-memory inode cache and the on-disk inode layout.
 *
 * Inodes are cached in a sharded hash table.  Loading reads the inode
 * table block through the buffer cache WITHOUT holding a shard lock, so a
 * slow read never blocks lookups of other inodes; if two threads load the
 * same inode at once, the first to insert wins and the other frees its
 * copy.  Unreferenced inodes stay cached on a per-shard LRU until the
 * shard holds more than its share of the limit (uext4_opts.inode_cache,
 * default ICACHE_MAX_UNUSED).  Hits take no
 * lock (see "Lock-free hits" below).
 */
#include "caller.h"
#include "balloc.h"
#include "bcache.h"
#include "csum.h"
#include "dir.h"
#include "ebr.h"
#include "error.h"
#include "file.h"
#include "flags.h"
#include "ialloc.h"
#include "inode.h"
#include "internal.h"
#include "lock.h"
#include "ondisk.h"
#include "orphan.h"
#include "shard.h"
#include "slab.h"
#include "trans.h"
#include "xattr.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#define ICACHE_SHARD_BITS 8
#define ICACHE_SHARDS (1u << ICACHE_SHARD_BITS)
#define ICACHE_MAX_UNUSED (64 * 1024)
#define INODE_READAHEAD_BLOCKS 32
#define SLOT_STRIPE_BITS 10
#define SLOT_STRIPES (1u << SLOT_STRIPE_BITS)

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

/*
 * What protects the bytes of an inode's slot in its inode-table buffer:
 * the slot lock of its inode NUMBER (a stripe of this table), not
 * anything of one struct inode, because two copies of one number can be
 * about at once (a freed inode still referenced and its number's next
 * user, or a copy being loaded).  Every write of a slot (itable_update(),
 * inode_restore_slot()) and load_inode()'s copy of it are done under it,
 * so a load never sees half a write.  writes counts the slot writes of
 * the stripe: iget() inserts a loaded copy only if no slot of the stripe
 * was written since the copy (see there).  A leaf spin lock: held for a
 * memcpy, never around anything that locks; it also lets orphan.c relink
 * a list neighbour (inode_write_orphan_link) without that inode's lock.
 * A stripe is chosen by
 * inode number (slot_stripe_of()); nothing else shares its cache line.
 */
struct slot_stripe {
	atomic_flag lock;
	uint32_t writes;            /* under lock */
} __attribute__((aligned(CACHELINE)));

struct icache {
	struct uext4_fs *fs;        /* read-only after create */
	struct slab *slab;          /* struct inode + raw inode objects */
	uint32_t max_unused_per_shard; /* LRU length beyond which a shard evicts; read-only */
	struct icache_shard shards[ICACHE_SHARDS];
	struct slot_stripe slots[SLOT_STRIPES];
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

struct icache *icache_create(struct uext4_fs *fs, unsigned limit)
{
	struct icache *ic = aligned_alloc(CACHELINE, sizeof(*ic));

	if (!ic)
		return NULL;
	memset(ic, 0, sizeof(*ic));
	ic->fs = fs;
	ic->max_unused_per_shard = unused_per_shard(limit);
	for (unsigned i = 0; i < SLOT_STRIPES; i++)
		atomic_flag_clear(&ic->slots[i].lock);
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
		balloc_release_prealloc(fs, inode);
	urwlock_destroy(&inode->lock);
}

/* A copy that was never hashed: nobody else can have seen it. */
static void inode_free(struct uext4_fs *fs, struct inode *inode)
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

/* --- slot locks (struct slot_stripe) --- */

/* By inode number, not by inode-table block: directories made one after
 * another share a block, and with stripes by block every create in one
 * of them (its parent's times and size) took the same stripe as the
 * creates in the others: at 16 threads in private directories, 1,500 to
 * 3,700 contentions per 0.3 s, a preempted holder keeping the others
 * waiting up to 46 ms (lock statistics, inode_raw). */
static uint32_t slot_stripe_of(const struct uext4_fs *fs, uint64_t ino)
{
	(void)fs;
	return (uint32_t)((ino * 0x9E3779B97F4A7C15ull) >> (64 - SLOT_STRIPE_BITS));
}

/*
 * Wait for a taken stripe: spin while the holder is likely running (its
 * section is a memcpy), then yield the CPU each round.  With more threads
 * than CPUs the holder may have been preempted inside its section, and
 * spinning then only burns the time slice it needs to finish: at 16
 * threads on 2 CPUs the truncates of files whose inodes share one table
 * block waited up to 288 ms for this lock (lock statistics, inode_raw).
 */
#define SLOT_SPINS 128

static void slot_wait(struct slot_stripe *st)
{
	for (unsigned spins = 0; atomic_flag_test_and_set_explicit(&st->lock, memory_order_acquire);
	     spins++) {
		if (spins < SLOT_SPINS)
			cpu_relax();
		else
			sched_yield();
	}
}

static struct slot_stripe *slot_lock(struct uext4_fs *fs, uint64_t ino)
{
	struct slot_stripe *st = &fs->icache->slots[slot_stripe_of(fs, ino)];
	uint64_t t0;

	if (!atomic_flag_test_and_set_explicit(&st->lock, memory_order_acquire)) {
		if (lockstat_on())
			lockstat_count(LOCKSTAT_INODE_RAW, 0, 0);
		return st;
	}
	if (!lockstat_on()) {
		slot_wait(st);
		return st;
	}
	t0 = lockstat_now_ns();
	slot_wait(st);
	lockstat_count(LOCKSTAT_INODE_RAW, 1, lockstat_now_ns() - t0);
	return st;
}

/* wrote: the slot was changed (counted for iget()'s check). */
static void slot_unlock(struct slot_stripe *st, bool wrote)
{
	st->writes += wrote;
	atomic_flag_clear_explicit(&st->lock, memory_order_release);
}

/* The stripe's write count now (iget()). */
static uint32_t slot_writes(struct uext4_fs *fs, uint64_t ino)
{
	struct slot_stripe *st = slot_lock(fs, ino);
	uint32_t w = st->writes;

	slot_unlock(st, false);
	return w;
}

/* --- on-disk layout --- */

int inode_location(struct uext4_fs *fs, uint64_t ino, uint64_t *blocknr, uint32_t *offset)
{
	if (ino < 1 || ino > fs->inodes_count)
		return fs_corrupt("inode number %llu out of range 1..%u", (unsigned long long)ino,
				  fs->inodes_count);
	uint32_t group = (uint32_t)((ino - 1) / fs->inodes_per_group);
	uint32_t index = (uint32_t)((ino - 1) % fs->inodes_per_group);

	*blocknr = fs->groups[group].inode_table + index / fs->inodes_per_block;
	*offset = (index % fs->inodes_per_block) * fs->inode_size;
	return 0;
}

/* Does the large-inode extra area hold the field ending at `end`? */
static bool has_extra(const struct inode *n, size_t end)
{
	return end <= EXT4_GOOD_OLD_INODE_SIZE + (size_t)n->extra_isize;
}

static struct timespec decode_time(int32_t sec, uint32_t extra, bool have_extra)
{
	struct timespec ts = {.tv_sec = sec, .tv_nsec = 0};

	if (have_extra) {
		/* Two epoch bits extend the signed 32-bit seconds past 2038. */
		ts.tv_sec += (int64_t)(extra & EXT4_EPOCH_MASK) << 32;
		ts.tv_nsec = extra >> EXT4_EPOCH_BITS;
		if (ts.tv_nsec > 999999999)
			ts.tv_nsec = 0;
	}
	return ts;
}

#define EXTRA_END(field) (offsetof(struct ext4_inode, field) + sizeof(uint32_t))

/* Decode one timestamp; the *_extra word exists only when has_extra. */
static struct timespec time_field(const struct inode *n, const uint32_t *sec,
				  const uint32_t *extra)
{
	size_t end = (size_t)((const uint8_t *)extra - n->raw) + sizeof(uint32_t);
	bool have = has_extra(n, end);

	return decode_time((int32_t)le32(*sec), have ? le32(*extra) : 0, have);
}

static void decode_times(struct inode *n, const struct ext4_inode *r)
{
	n->atime = time_field(n, &r->i_atime, &r->i_atime_extra);
	n->mtime = time_field(n, &r->i_mtime, &r->i_mtime_extra);
	n->ctime = time_field(n, &r->i_ctime, &r->i_ctime_extra);
	if (has_extra(n, EXTRA_END(i_crtime_extra)))
		n->crtime = time_field(n, &r->i_crtime, &r->i_crtime_extra);
	else
		n->crtime = (struct timespec){0, 0};
}

static uint64_t decode_blocks(struct uext4_fs *fs, const struct ext4_inode *r, uint32_t flags)
{
	uint64_t blocks = le32(r->i_blocks_lo);

	if (FS_HAS_RO_COMPAT(fs, HUGE_FILE)) {
		blocks |= (uint64_t)le16(r->i_blocks_high) << 32;
		if (flags & EXT4_HUGE_FILE_FL) /* counted in file system blocks */
			blocks <<= (fs->log_block_size - 9);
	}
	return blocks;
}

/* Parse and validate the raw copy into the inode's fields. */
static int decode_inode(struct uext4_fs *fs, struct inode *n, uint64_t blk)
{
	const struct ext4_inode *r = (const void *)n->raw;

	n->mode = le16(r->i_mode);
	n->uid = le16(r->i_uid) | (uint32_t)le16(r->i_uid_high) << 16;
	n->gid = le16(r->i_gid) | (uint32_t)le16(r->i_gid_high) << 16;
	n->links = le16(r->i_links_count);
	n->flags = le32(r->i_flags);
	n->generation = le32(r->i_generation);
	n->size = le32(r->i_size_lo) | (uint64_t)le32(r->i_size_high) << 32;
	n->file_acl = le32(r->i_file_acl_lo) | (uint64_t)le16(r->i_file_acl_high) << 32;
	n->extra_isize = 0;
	if (fs->inode_size > EXT4_GOOD_OLD_INODE_SIZE) {
		n->extra_isize = le16(r->i_extra_isize);
		if (n->extra_isize & 3 ||
		    EXT4_GOOD_OLD_INODE_SIZE + (uint32_t)n->extra_isize > fs->inode_size)
			return fs_corrupt("inode %llu (block %llu): i_extra_isize %u",
					  (unsigned long long)n->ino, (unsigned long long)blk,
					  n->extra_isize);
	}
	n->blocks = decode_blocks(fs, r, n->flags);
	decode_times(n, r);
	if ((int64_t)n->size < 0)
		return fs_corrupt("inode %llu (block %llu): size %llu",
				  (unsigned long long)n->ino, (unsigned long long)blk,
				  (unsigned long long)n->size);
	if (n->file_acl && (n->file_acl < fs->first_data_block || n->file_acl >= fs->blocks_count))
		return fs_corrupt("inode %llu (block %llu): xattr block %llu outside the file system",
				  (unsigned long long)n->ino, (unsigned long long)blk,
				  (unsigned long long)n->file_acl);
	return 0;
}

static bool valid_file_type(uint32_t mode)
{
	switch (mode & S_IFMT) {
	case S_IFREG: case S_IFDIR: case S_IFLNK: case S_IFCHR:
	case S_IFBLK: case S_IFIFO: case S_IFSOCK:
		return true;
	}
	return false;
}

/* An inode referenced by a directory must be in use and of a real type. */
/* Orphan cleanup at mount loads the inodes with no links it is to free,
 * as the kernel's ext4_iget() in its orphan cleanup state. */
static int check_in_use(struct uext4_fs *fs, struct inode *n, uint64_t blk)
{
	bool unlinked_ok = n->links == 0 && fs->orphan && orphan_cleanup_running(fs);

	if (n->mode == 0 || (n->links == 0 && n->ino >= EXT4_GOOD_OLD_FIRST_INO && !unlinked_ok))
		return fs_corrupt("inode %llu (block %llu) is not in use (deleted inode referenced)",
				  (unsigned long long)n->ino, (unsigned long long)blk);
	if (!valid_file_type(n->mode))
		return fs_corrupt("inode %llu (block %llu): bogus file type in i_mode 0%o",
				  (unsigned long long)n->ino, (unsigned long long)blk, n->mode);
	return 0;
}

/*
 * The inode's own fields must make sense for its type before anything uses
 * it (a damaged image may hold anything): this is the one validity step,
 * taken at load (iget), from the fields already in memory, so every
 * operation that reaches the
 * inode (getattr, readlink, open, chmod, chown, link, rename, unlink,
 * setxattr, truncate) gets the same EUCLEAN with the same message naming
 * it, and none of them costs anything more.  The checks are those of the
 * kernel's __ext4_iget() (block references via ext4_ext_check_inode() and
 * ext4_ind_check_inode(), symlink flags and fast-symlink length, bogus
 * htree flag) and of e2fsck's pass 1 where the kernel would trip later
 * (directory without blocks, flags a type cannot have, device inodes with
 * a block map).  An inode being freed by orphan cleanup (no links) skips
 * the size checks: a crash may have left it half truncated.
 */
#define BAD(...) fs_corrupt("inode %llu (block %llu): " __VA_ARGS__)

/* A run of blocks the inode may point to: inside the file system, past
 * the superblock (as ext4_inode_block_valid()). */
static bool blocks_valid(const struct uext4_fs *fs, uint64_t blk, uint64_t len)
{
	return blk > fs->first_data_block && blk + len >= blk && blk + len <= fs->blocks_count;
}

/* The extent tree root in i_block (ext4_ext_check_inode()). */
static int check_extent_root(struct uext4_fs *fs, const struct inode *n, uint64_t blk)
{
	const struct ext4_extent_header *eh = (const void *)inode_raw(n)->i_block;
	unsigned entries = le16(eh->eh_entries), max = le16(eh->eh_max), depth = le16(eh->eh_depth);
	unsigned long long ino = n->ino, b = blk;
	uint64_t next = 0;

	if (le16(eh->eh_magic) != EXT4_EXT_MAGIC)
		return BAD("extent header magic 0x%04x", ino, b, le16(eh->eh_magic));
	if (depth > EXT4_EXT_MAX_DEPTH)
		return BAD("extent tree depth %u (at most %u)", ino, b, depth, EXT4_EXT_MAX_DEPTH);
	if (max == 0 || max > 4 || entries > max)
		return BAD("extent root with %u entries of at most %u (i_block holds 4)", ino, b,
			   entries, max);
	for (unsigned i = 0; i < entries; i++) {
		uint64_t lblk, pblk, len = 1;

		if (depth == 0) {
			const struct ext4_extent *e = (const struct ext4_extent *)(eh + 1) + i;

			len = le16(e->ee_len);
			len -= len > 32768 ? 32768 : 0;
			lblk = le32(e->ee_block);
			pblk = le32(e->ee_start_lo) | (uint64_t)le16(e->ee_start_hi) << 32;
			if (len == 0)
				return BAD("extent %u has length 0", ino, b, i);
		} else {
			const struct ext4_extent_idx *x = (const struct ext4_extent_idx *)(eh + 1) + i;

			lblk = le32(x->ei_block);
			pblk = le32(x->ei_leaf_lo) | (uint64_t)le16(x->ei_leaf_hi) << 32;
		}
		if (!blocks_valid(fs, pblk, len))
			return BAD("extent %u maps blocks %llu..%llu outside the file system", ino, b,
				   i, (unsigned long long)pblk, (unsigned long long)(pblk + len - 1));
		if (i > 0 && lblk < next)
			return BAD("extent %u at logical block %llu overlaps or is out of order", ino,
				   b, i, (unsigned long long)lblk);
		next = lblk + (depth == 0 ? len : 1);
	}
	return 0;
}

/* Block pointers of a block-mapped inode (ext4_ind_check_inode()). */
static int check_block_pointers(struct uext4_fs *fs, const struct inode *n, uint64_t blk)
{
	const struct ext4_inode *r = inode_raw(n);

	for (unsigned i = 0; i < EXT4_N_BLOCKS; i++) {
		uint32_t p = le32(r->i_block[i]);

		if (p && !blocks_valid(fs, p, 1))
			return BAD("block pointer %u is %u, outside the file system", (unsigned long long)n->ino,
				   (unsigned long long)blk, i, p);
	}
	return 0;
}

/* Is this symlink's target in i_block?  (as symlink.c, ext4_inode_is_fast_symlink()) */
static bool is_fast_symlink(const struct uext4_fs *fs, const struct inode *n)
{
	uint64_t acl = n->file_acl ? fs->block_size >> 9 : 0;

	if (FS_HAS_INCOMPAT(fs, EA_INODE))
		return n->size > 0 && n->size < EXT4_N_BLOCKS * 4;
	if (n->flags & EXT4_INLINE_DATA_FL)
		return false;
	return n->blocks == acl;
}

static int check_symlink(struct uext4_fs *fs, const struct inode *n, uint64_t blk)
{
	unsigned long long ino = n->ino, b = blk, size = n->size;

	if (n->flags & (EXT4_IMMUTABLE_FL | EXT4_APPEND_FL))
		return BAD("symlink with the immutable or append-only flag", ino, b);
	if (n->flags & EXT4_ENCRYPT_FL)
		return 0;       /* refused by name where it is read */
	if (size == 0 || size >= fs->block_size)
		return BAD("symlink of %llu bytes (1..%u)", ino, b, size, fs->block_size - 1);
	if (!is_fast_symlink(fs, n))
		return 0;
	if (size >= EXT4_N_BLOCKS * 4)
		return BAD("fast symlink of %llu bytes (i_block holds at most %u)", ino, b, size,
			   EXT4_N_BLOCKS * 4 - 1);
	if (memchr(inode_raw(n)->i_block, 0, size))
		return BAD("fast symlink of %llu bytes has a NUL byte inside its target", ino, b,
			   size);
	return 0;
}

static int check_flags(struct uext4_fs *fs, const struct inode *n, uint64_t blk)
{
	unsigned long long ino = n->ino, b = blk;
	bool has_body = S_ISREG(n->mode) || S_ISDIR(n->mode) || S_ISLNK(n->mode);

	if (n->flags & EXT4_INLINE_DATA_FL) {
		if (!FS_HAS_INCOMPAT(fs, INLINE_DATA))
			return BAD("inline data flag without the inline_data feature", ino, b);
		if (!has_body || (n->flags & EXT4_EXTENTS_FL))
			return BAD("inline data flag on %s", ino, b,
				   has_body ? "an extent-mapped inode" : "a special file");
	}
	if ((n->flags & EXT4_EXTENTS_FL) && !FS_HAS_INCOMPAT(fs, EXTENTS) && !S_ISLNK(n->mode))
		return BAD("extents flag without the extents feature", ino, b);
	if ((n->flags & EXT4_INDEX_FL) && !S_ISDIR(n->mode))
		return BAD("htree flag on a file that is not a directory (mode 0%o)", ino, b, n->mode);
	if ((n->flags & EXT4_INDEX_FL) && !FS_HAS_COMPAT(fs, DIR_INDEX) && fs->metadata_csum)
		return BAD("htree directory on a file system without dir_index", ino, b);
	if (!has_body && (n->flags & (EXT4_EXTENTS_FL | EXT4_INDEX_FL)))
		return BAD("extents or htree flag on a special file (mode 0%o)", ino, b, n->mode);
	return 0;
}

static int check_inode_body(struct uext4_fs *fs, const struct inode *n, uint64_t blk)
{
	bool being_freed = n->links == 0;
	uint64_t acl = n->file_acl ? fs->block_size >> 9 : 0;
	int err;

	if ((err = check_flags(fs, n, blk)))
		return err;
	if (S_ISLNK(n->mode) && !being_freed && (err = check_symlink(fs, n, blk)))
		return err;
	if (S_ISDIR(n->mode) && !being_freed && !(n->flags & EXT4_INLINE_DATA_FL) &&
	    (n->size == 0 || n->blocks <= acl))
		return BAD("directory of %llu bytes in %llu blocks (a directory has at least one)",
			   (unsigned long long)n->ino, (unsigned long long)blk,
			   (unsigned long long)n->size,
			   (unsigned long long)((n->blocks - MIN(n->blocks, acl)) / (fs->block_size >> 9)));
	if (n->flags & EXT4_INLINE_DATA_FL)
		return 0;
	if (S_ISREG(n->mode) || S_ISDIR(n->mode) || (S_ISLNK(n->mode) && !is_fast_symlink(fs, n)))
		return (n->flags & EXT4_EXTENTS_FL) ? check_extent_root(fs, n, blk)
						    : check_block_pointers(fs, n, blk);
	return 0;
}
#undef BAD

/*
 * Inode-table readahead, as the kernel's inode_readahead_blks: one device
 * read brings in the next blocks of the table, but only blocks that hold
 * inodes in use (below bg_itable_unused), never blocks of unused inodes.
 */
static void inode_table_readahead(struct uext4_fs *fs, uint64_t ino, uint64_t blk)
{
	uint32_t group = (uint32_t)((ino - 1) / fs->inodes_per_group);
	const struct group_info *gi = &fs->groups[group];
	uint32_t used = fs->inodes_per_group;
	uint64_t end;

	if ((fs->metadata_csum || fs->gdt_csum) && gi->itable_unused <= used)
		used -= gi->itable_unused;
	end = gi->inode_table + DIV_ROUND_UP(used, fs->inodes_per_block);
	end = MIN(end, blk + INODE_READAHEAD_BLOCKS);
	if (end > blk + 1 && !bcache_uptodate(fs->bc, blk))
		bcache_readahead(fs->bc, blk, (uint32_t)(end - blk), UEXT4_META_INODE_TABLE);
}

/* A new copy of inode ino from its slot, verified; *writes: the slot
 * stripe's write count at the copy. */
static int load_inode(struct uext4_fs *fs, uint64_t ino, struct inode **out, uint32_t *writes)
{
	uint64_t blk;
	uint32_t off;
	struct buf *b;
	struct inode *n;
	struct slot_stripe *st;
	int err = inode_location(fs, ino, &blk, &off);

	if (err)
		return err;
	n = slab_alloc(fs->icache->slab);
	if (!n)
		return fs_err(ENOMEM, "out of memory for inode %llu", (unsigned long long)ino);
	n->ino = ino;
	inode_table_readahead(fs, ino, blk);
	err = bread(fs->bc, blk, UEXT4_META_INODE_TABLE, &b);
	if (err) {
		slab_free(fs->icache->slab, n);
		return err;
	}
	st = slot_lock(fs, ino);
	memcpy(n->raw, b->data + off, fs->inode_size);
	*writes = st->writes;
	slot_unlock(st, false);
	brelse(fs->bc, b);
	if ((err = csum_verify_inode(fs, ino, n->raw)) || (err = decode_inode(fs, n, blk)) ||
	    (err = check_in_use(fs, n, blk)) || (err = check_inode_body(fs, n, blk)) ||
	    (err = xattr_check_ibody(fs, n))) {
		slab_free(fs->icache->slab, n);
		return err;
	}
	urwlock_init(&n->lock, RANK_INODE);
	if (S_ISDIR(n->mode))
		urwlock_set_stat_class(&n->lock, LOCKSTAT_DIR);
	atomic_init(&n->refcount, 1);
	*out = n;
	return 0;
}

/*
 * n's state, read after our grab (seq_cst: pairs with inode_claim_free()),
 * once no claim is deciding: a claim in progress may leave the inode
 * alive, and refusing then would fail a lookup of a file that still has
 * its name (the claim lasts a few instructions: spin, yield if its
 * thread was preempted).
 */
static uint32_t settled_istate(struct inode *n)
{
	uint32_t st = atomic_load(&n->istate);

	for (unsigned spins = 0; (st & (INODE_CLAIMING | INODE_FREEING)) == INODE_CLAIMING;
	     spins++) {
		if (spins < 128)
			cpu_relax();
		else
			sched_yield();
		st = atomic_load(&n->istate);
	}
	return st;
}

/*
 * A cached inode that is not to be handed out: freed, or still being made
 * by its creator (INODE_CREATING; nobody can reach it by a name yet, so
 * the number was looked up before its previous owner was freed).  Drops
 * the reference and says why, or 0.
 */
static int refuse_unusable(struct uext4_fs *fs, struct inode *n)
{
	uint32_t st = settled_istate(n);
	unsigned long long ino = n->ino;

	if (!(st & (INODE_DELETED | INODE_FREEING | INODE_CREATING)))
		return 0;
	iput(fs, n); /* may free n */
	if (st & (INODE_DELETED | INODE_FREEING))
		return fs_err(ENOENT, "inode %llu was deleted", ino);
	return fs_err(ENOENT, "inode %llu was deleted (its number is being reused)", ino);
}

/* A reference on n unless it is dead (being freed).  seq_cst (a locked
 * instruction on x86 either way): the grab and the caller's look at
 * istate pair with inode_claim_free()'s flag and look at the count. */
static bool try_grab(struct inode *n)
{
	return shard_try_grab(&n->node, memory_order_seq_cst);
}

/* The cached inode ino with a reference, or NULL: no lock
 * (shard_lookup_lockfree()).  NULL sends the caller to the locked path. */
static struct inode *lookup_lockfree(struct uext4_fs *fs, uint64_t ino)
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
 * One reference on the final inode only: an eviction releases the
 * inode's state (its lock) at once, not when the epoch frees the memory,
 * so the copy under the lock needs the inode held.  The grab refuses a
 * dead inode, and a held one is not evicted.
 */
bool inode_stat_peeked(struct uext4_fs *fs, struct inode *n, struct uext4_stat *st)
{
	uint32_t state;

	if (!try_grab(n))
		return false;
	state = settled_istate(n);
	if (!(state & (INODE_DELETED | INODE_FREEING | INODE_CREATING))) {
		urw_rdlock(&n->lock);
		inode_to_stat(fs, n, st);
		urw_unlock(&n->lock);
	}
	iput(fs, n);
	return !(state & (INODE_DELETED | INODE_FREEING | INODE_CREATING));
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
static int icache_insert_loaded(struct uext4_fs *fs, struct inode **mine, uint32_t writes,
				struct inode **out)
{
	uint64_t ino = (*mine)->ino;
	struct icache_shard *s = shard_of(fs->icache, ino);
	struct inode *n;
	struct shard_node *victims = NULL;
	int again = 0;

	ulock_lock(&s->sh.lock);
	n = lookup_locked(s, ino); /* somebody may have loaded it meanwhile */
	if (!n && slot_writes(fs, ino) != writes) {
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

int iget(struct uext4_fs *fs, uint64_t ino, struct inode **out)
{
	struct inode *n, *mine = NULL;
	uint32_t writes = 0;
	int err;

	n = lookup_lockfree(fs, ino);
	/* Each round that loads again follows a write of a slot of the
	 * stripe by another thread, which made progress. */
	while (!n) {
		int again;

		if ((err = load_inode(fs, ino, &mine, &writes)))
			return err;
		again = icache_insert_loaded(fs, &mine, writes, &n);
		if (mine)
			inode_free(fs, mine);
		if (!again)
			break;
	}
	if ((err = refuse_unusable(fs, n)))
		return err;
	*out = n;
	return 0;
}

void igrab(struct inode *n)
{
	/* The caller holds a reference, so this is never the 0 -> 1 step. */
	atomic_fetch_add_explicit(&n->refcount, 1, memory_order_relaxed);
}

/*
 * Before an unlink drops the last link of a file that nobody holds open:
 * would freeing it meet corruption in its extent tree or block map?  The
 * tree is walked read-only, one mapping per extent or hole (a block map:
 * its indirect blocks), as the free reads them right after, from the
 * cache, so that the unlink
 * can refuse with the image unchanged instead of leaving an unlinked
 * inode it cannot free, as the kernel's iget refuses an inode whose root
 * fails ext4_ext_check_inode().  Caller holds n->lock.
 */
int inode_check_freeable(struct uext4_fs *fs, struct inode *n)
{
	return inode_check_map_from(fs, n, 0);
}

/*
 * Is n's bit set in its group's inode bitmap?  Read once per cached inode:
 * the read takes the group lock and the bitmap buffer, which every thread
 * working in that group shares (a shrinking truncate or an unlink each
 * did, and at 16 threads on 2 CPUs a preempted holder made the others
 * wait for milliseconds).
 */
static int inode_check_bitmap_bit(struct uext4_fs *fs, struct inode *n)
{
	uint32_t st = atomic_load_explicit(&n->istate, memory_order_relaxed);
	int err;

	if ((st & (INODE_BITMAP_OK | INODE_DELETED)) == INODE_BITMAP_OK)
		return 0;
	if (!(err = ialloc_check_allocated(fs, n->ino)) && !(st & INODE_DELETED))
		atomic_fetch_or_explicit(&n->istate, INODE_BITMAP_OK, memory_order_relaxed);
	return err;
}

int inode_check_map_from(struct uext4_fs *fs, struct inode *n, uint64_t lblk)
{
	int err;

	if ((err = inode_check_bitmap_bit(fs, n)) || (err = xattr_check_block(fs, n)))
		return err;
	if (inode_has_inline_data(n) || !(S_ISREG(n->mode) || S_ISDIR(n->mode)))
		return 0;
	return file_check_map_from(fs, n, lblk);
}

/*
 * Freeing n failed (a corrupt block map or xattr): as the kernel's evict,
 * give up on it.  It leaves its orphan list (orphan_drop_failed(), so that
 * no mount wedges on it) and stays allocated for e2fsck; it is not tried
 * again at a later iput() or at unmount.  The error is recorded on the
 * file system (the unlink that dropped the last link may have returned
 * long ago); orphan cleanup records it itself, after its pass.  Caller
 * holds n->lock for writing and no handle.
 */
static void delete_failed(struct uext4_fs *fs, struct inode *n, int err)
{
	char why[256];

	snprintf(why, sizeof(why), "%s", uext4_last_error());
	atomic_fetch_and(&n->istate, ~(uint32_t)INODE_UNLINKED);
	orphan_drop_failed(fs, n);
	if (orphan_cleanup_running(fs))
		fs_err(-err, "%s", why);
	else
		FS_ERROR(fs, -err, n->ino, 0, "inode %llu: unlinked, but freeing it failed (%s): "
			 "left allocated for e2fsck", (unsigned long long)n->ino, why);
}

/*
 * Free n's blocks, xattrs and number in h: n has no links and its lock is
 * held for writing.  Marked deleted before its number is free: a create
 * that takes the number next must find this cached copy marked (seed of
 * icache_insert_new()'s unhashing).
 */
static int free_in(struct handle *h, struct inode *n)
{
	int err = 0;

	if (!inode_has_inline_data(n) &&
	    (S_ISREG(n->mode) || S_ISDIR(n->mode) || S_ISLNK(n->mode)))
		err = inode_truncate_blocks(h, n, 0);
	if (!err)
		err = xattr_release_inode(h, n);
	if (!err)
		err = orphan_del(h, n);
	if (!err) {
		struct timespec now = fs_time(h->fs);

		n->dtime = (uint32_t)now.tv_sec;
		n->size = 0;
		n->ctime = now;
		err = inode_write(h, n);
	}
	if (!err) {
		atomic_fetch_or(&n->istate, INODE_DELETED);
		err = ialloc_free(h, n->ino, S_ISDIR(n->mode));
	}
	return err;
}

/* Freeing n failed after it was marked deleted: only the number's bitmap
 * bit is left, a leak e2fsck repairs. */
static void report_number_leak(struct uext4_fs *fs, struct inode *n, int err)
{
	char why[256];

	snprintf(why, sizeof(why), "%s", uext4_last_error());
	FS_ERROR(fs, -err, n->ino, 0, "inode %llu: unlinked, but freeing it failed (%s): "
		 "its number stays allocated for e2fsck", (unsigned long long)n->ino, why);
}

/*
 * The last reference to an inode with no links is going: free its blocks,
 * xattrs and number (the file was unlinked while open, or just now).  The
 * caller holds no inode lock and no handle (api.c drops its locks before
 * its last iput()).  Unmount passes `force`: files still open then are
 * freed all the same, as nobody uses them any more.  0 or the error of a
 * failed free (delete_failed()).
 */
static int inode_delete(struct uext4_fs *fs, struct inode *n, bool force)
{
	struct handle *h;
	int err, err2;

	urw_wrlock(&n->lock);
	/* A lock-free iget() may have taken a reference since the caller
	 * saw its own as the last: then that holder has an open file, whose
	 * writes must not land in a freed inode, and its iput() frees it.
	 * Else the claim makes every later grab refuse it. */
	if (n->links != 0 || fs->read_only || (!inode_claim_free(n) && !force)) {
		urw_unlock(&n->lock);
		return 0;
	}
	if (n->pa)
		balloc_release_prealloc(fs, n);
	err = handle_begin(fs, &h);
	if (err) {
		delete_failed(fs, n, err);
		inode_unclaim_free(n);
		urw_unlock(&n->lock);
		return err;
	}
	err = free_in(h, n);
	err2 = handle_end(h);
	if (err && !(atomic_load(&n->istate) & INODE_DELETED)) {
		delete_failed(fs, n, err);
		inode_unclaim_free(n);
	} else if (err) {
		report_number_leak(fs, n, err);
	}
	urw_unlock(&n->lock);
	return err ? err : err2;
}

/*
 * Unlink and rmdir free an inode in the handle that takes its last link
 * when they hold its only reference (not open, no lookup count): the
 * removal and the free commit together, so it needs no orphan entry (on
 * the legacy list, one mutex for the whole file system) and no second
 * handle.  The claim is a Dekker pair with the lock-free grab: CLAIMING
 * is set, then the count read (both seq_cst), while a grab raises the
 * count, then reads the state (try_grab(), settled_istate()); so either
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

/*
 * Free a claimed inode (inode_claim_free()) in h, whose changes dropped
 * its last link.  If that fails before it is marked deleted, it is left
 * as any unlinked inode: on an orphan list, freed (or the failure
 * reported) at its last iput().  0, or the error of a number left
 * allocated.
 */
int inode_free_now(struct handle *h, struct inode *n)
{
	int err;

	if (n->pa)
		balloc_release_prealloc(h->fs, n);
	err = free_in(h, n);
	if (err && (atomic_load(&n->istate) & INODE_DELETED)) {
		report_number_leak(h->fs, n, err);
		return err;
	}
	if (err) {
		orphan_add(h, n);
		inode_write(h, n);
		inode_unclaim_free(n);
	}
	return 0;
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
		/* inode_delete() gave the preallocation back: nothing left
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
		err = inode_delete(fs, n, false);
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
	if (old == 1 && unlinked_pending(n) && try_grab(n)) {
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
				inode_delete(fs, found, true);
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
static void lookup_count_add(struct inode *n)
{
	if (atomic_fetch_add_explicit(&n->nlookup, 1, memory_order_relaxed) == 0)
		igrab(n);
}

void inode_lookup_ref_held(struct uext4_fs *fs, struct inode *n, struct uext4_stat *st)
{
	if (n->ino != EXT4_ROOT_INO)
		lookup_count_add(n);
	if (st) {
		urw_rdlock(&n->lock);
		inode_to_stat(fs, n, st);
		urw_unlock(&n->lock);
	}
}

/*
 * Does the slot of ino say "no file" (i_mode or i_links_count 0), or is
 * its bit clear in the inode bitmap?  Read from the inode table, for a
 * number iget() refused: a deleted or never-used inode, not corruption.
 */
static bool slot_unused(struct uext4_fs *fs, uint64_t ino)
{
	const struct ext4_inode *raw;
	uint64_t blk;
	uint32_t off;
	struct buf *b;
	bool unused;

	if (inode_location(fs, ino, &blk, &off) ||
	    bread(fs->bc, blk, UEXT4_META_INODE_TABLE, &b))
		return false;
	raw = (const struct ext4_inode *)(b->data + off);
	unused = raw->i_mode == 0 || raw->i_links_count == 0;
	brelse(fs->bc, b);
	return unused || (ino >= fs->first_ino && ialloc_check_allocated(fs, ino) == -EUCLEAN);
}

/*
 * A file handle outlives its file: a number that names no file now
 * (reserved, past the last inode, free or deleted) is -ESTALE, as the
 * kernel's ext4_iget(EXT4_IGET_HANDLE) answers, not corruption.  The
 * frontend compares the generation.
 */
int inode_lookup_handle(struct uext4_fs *fs, uint64_t ino, struct uext4_stat *st)
{
	int err;

	if (ino != EXT4_ROOT_INO && (ino < fs->first_ino || ino > fs->inodes_count))
		return fs_err(ESTALE, "inode %llu: no file has this number (stale handle)",
			      (unsigned long long)ino);
	err = inode_lookup_ref(fs, ino, st);
	if ((err == -EUCLEAN || err == -ENOENT) && slot_unused(fs, ino))
		return fs_err(ESTALE, "inode %llu was deleted (stale handle)",
			      (unsigned long long)ino);
	return err;
}

int inode_lookup_ref(struct uext4_fs *fs, uint64_t ino, struct uext4_stat *st)
{
	struct inode *n;
	int err = iget(fs, ino, &n);

	if (err)
		return err;
	inode_lookup_ref_held(fs, n, st);
	iput(fs, n);
	return 0;
}

/* A cached inode, referenced, or NULL: never loads (a count implies it
 * is cached). */
static struct inode *icache_find(struct uext4_fs *fs, uint64_t ino)
{
	struct icache_shard *s = shard_of(fs->icache, ino);
	struct inode *n = lookup_lockfree(fs, ino);

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

/* Device numbers: old 16-bit encoding in i_block[0], new one in i_block[1]. */
static uint64_t decode_rdev(const struct ext4_inode *r)
{
	uint32_t old = le32(r->i_block[0]);
	uint32_t dev = le32(r->i_block[1]);

	if (old)
		return makedev((old >> 8) & 0xff, old & 0xff);
	return makedev((dev & 0xfff00) >> 8, (dev & 0xff) | ((dev >> 12) & 0xfff00));
}

void inode_to_stat(struct uext4_fs *fs, const struct inode *n, struct uext4_stat *st)
{
	memset(st, 0, sizeof(*st));
	st->ino = n->ino;
	st->mode = n->mode;
	st->nlink = n->links;
	/* dir_nlink: a directory with too many subdirectories stores 1. */
	st->uid = n->uid;
	st->gid = n->gid;
	st->size = n->size;
	st->blocks = n->blocks;
	/* Like ext4_file_getattr() (regular files only): inline data occupies
	 * no block, but report its sectors so that tools such as tar don't
	 * take the file for a hole. */
	if ((n->flags & EXT4_INLINE_DATA_FL) && S_ISREG(n->mode))
		st->blocks += (n->size + 511) >> 9;
	if (S_ISCHR(n->mode) || S_ISBLK(n->mode))
		st->rdev = decode_rdev(inode_raw(n));
	st->atime = n->atime;
	if (S_ISDIR(n->mode)) {
		/* Parallel creates in a directory change these two with its
		 * lock shared (dir.c). */
		dir_read_times(n, &st->mtime, &st->ctime);
	} else {
		st->mtime = n->mtime;
		st->ctime = n->ctime;
	}
	st->crtime = n->crtime;
	st->generation = n->generation;
	st->flags = n->flags;
	(void)fs;
}

/* ================================================================ write side */

/*
 * The kernel's clock for inode times: current_time() reads the coarse
 * real-time clock (one jiffy steps), and so must we.  With the FUSE
 * writeback cache the kernel stamps the mtime and ctime of the regular
 * files it writes, and we stamp everything else; were our clock the
 * precise one, a file the kernel stamps just after we made another could
 * look older than it (fstests generic/423).  The nanoseconds still go to
 * the *_extra fields.  The kernel's own ext4 stores coarse times too,
 * except (multigrain timestamps, Linux 6.13+) for a change right after a
 * stat of the same inode within one tick, which it stamps finely so that
 * the change shows; here two changes within one tick may share a time.
 */
struct timespec fs_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME_COARSE, &ts);
	return ts;
}

struct timespec ext4_time_fit(struct timespec ts, bool extra)
{
	int64_t max = extra ? EXT4_TIME_MAX_EXTRA : EXT4_TIME_MAX_NO_EXTRA;

	if (ts.tv_sec <= EXT4_TIME_MIN)
		return (struct timespec){.tv_sec = (time_t)EXT4_TIME_MIN, .tv_nsec = 0};
	if (ts.tv_sec >= max)
		return (struct timespec){.tv_sec = (time_t)max, .tv_nsec = 0};
	if (!extra)
		ts.tv_nsec = 0;
	return ts;
}

struct timespec fs_fit_time(const struct uext4_fs *fs, struct timespec ts)
{
	/* The kernel's test (ext4_fill_super()): an inode size that holds
	 * i_atime_extra, the last of the three, holds all *_extra words. */
	return ext4_time_fit(ts, fs->inode_size >= EXTRA_END(i_atime_extra));
}

struct timespec fs_time(const struct uext4_fs *fs)
{
	struct timespec now = fs->use_fixed_time
				      ? (struct timespec){.tv_sec = (time_t)fs->fixed_time}
				      : fs_now();

	/* As the kernel's current_time(): whole seconds on 128-byte inodes. */
	return fs_fit_time(fs, now);
}

unsigned ftype_of_mode(uint32_t mode)
{
	switch (mode & S_IFMT) {
	case S_IFREG: return EXT4_FT_REG_FILE;
	case S_IFDIR: return EXT4_FT_DIR;
	case S_IFCHR: return EXT4_FT_CHRDEV;
	case S_IFBLK: return EXT4_FT_BLKDEV;
	case S_IFIFO: return EXT4_FT_FIFO;
	case S_IFSOCK: return EXT4_FT_SOCK;
	case S_IFLNK: return EXT4_FT_SYMLINK;
	}
	return EXT4_FT_UNKNOWN;
}

/*
 * The inode's time *t becomes what its field will hold, so that what a
 * stat shows is what the disk gets (the kernel truncates a time before it
 * sets it).  Stored only when it changes: a directory is written with its
 * lock shared by parallel creates, whose times (fs_time()) already fit,
 * except on a large inode too old to have the *_extra words; there the
 * stores are atomic, as dir_touch_shared()'s, for dir_read_times().
 */
static void fit_time_field(struct inode *n, const uint32_t *extra, struct timespec *t)
{
	size_t end = (size_t)((const uint8_t *)extra - n->raw) + sizeof(uint32_t);
	struct timespec fit = ext4_time_fit(*t, has_extra(n, end));

	if (fit.tv_sec != t->tv_sec)
		__atomic_store_n(&t->tv_sec, fit.tv_sec, __ATOMIC_RELEASE);
	if (fit.tv_nsec != t->tv_nsec)
		__atomic_store_n(&t->tv_nsec, fit.tv_nsec, __ATOMIC_RELEASE);
}

/* Every time the inode stores, as its fields can hold it.  Not an EA inode's:
 * its atime and ctime carry the value's hash and the high half of its
 * reference count (ea_inode.c), any 32-bit value. */
static void fit_inode_times(struct inode *n, const struct ext4_inode *r)
{
	if (n->flags & EXT4_EA_INODE_FL)
		return;
	fit_time_field(n, &r->i_atime_extra, &n->atime);
	fit_time_field(n, &r->i_mtime_extra, &n->mtime);
	fit_time_field(n, &r->i_ctime_extra, &n->ctime);
	if (has_extra(n, EXTRA_END(i_crtime_extra)))
		fit_time_field(n, &r->i_crtime_extra, &n->crtime);
	else if (n->crtime.tv_sec || n->crtime.tv_nsec)
		n->crtime = (struct timespec){0, 0};     /* no field: no birth time */
}

static void encode_time(struct inode *n, uint32_t *sec, uint32_t *extra, struct timespec ts)
{
	size_t end = (size_t)((uint8_t *)extra - n->raw) + sizeof(uint32_t);

	*sec = cpu_to_le32((uint32_t)ts.tv_sec);
	if (has_extra(n, end)) {
		/* Epoch bits: how many 2^32 s past the signed 32-bit range. */
		uint32_t epoch = (uint32_t)((ts.tv_sec - (int64_t)(int32_t)ts.tv_sec) >> 32) &
				 EXT4_EPOCH_MASK;

		*extra = cpu_to_le32(epoch | ((uint32_t)ts.tv_nsec << EXT4_EPOCH_BITS));
	}
}

static void encode_blocks(struct uext4_fs *fs, struct inode *n, struct ext4_inode *r)
{
	uint64_t b = n->blocks;
	uint32_t flags = n->flags & ~EXT4_HUGE_FILE_FL;

	if (b > 0xFFFFFFFFull && FS_HAS_RO_COMPAT(fs, HUGE_FILE) && b >= (1ull << 48)) {
		flags |= EXT4_HUGE_FILE_FL; /* count in file system blocks */
		b >>= (fs->log_block_size - 9);
	}
	/* Store only a change: a directory's inode is written by parallel
	 * creates with its lock shared, while lookups read its flags. */
	if (flags != n->flags)
		n->flags = flags;
	r->i_blocks_lo = cpu_to_le32((uint32_t)b);
	if (FS_HAS_RO_COMPAT(fs, HUGE_FILE))
		r->i_blocks_high = cpu_to_le16((uint16_t)(b >> 32));
}

static uint32_t orphan_dtime(struct inode *n, uint32_t dtime)
{
	if (atomic_load_explicit(&n->istate, memory_order_acquire) & INODE_ORPHAN_LIST)
		return atomic_load_explicit(&n->orphan_next_ino, memory_order_acquire);
	return dtime;
}

/* The parsed fields back into the raw inode (i_block, xattrs untouched). */
static void encode_inode(struct uext4_fs *fs, struct inode *n)
{
	struct ext4_inode *r = inode_raw_mut(n);

	r->i_mode = cpu_to_le16((uint16_t)n->mode);
	r->i_uid = cpu_to_le16((uint16_t)n->uid);
	r->i_uid_high = cpu_to_le16((uint16_t)(n->uid >> 16));
	r->i_gid = cpu_to_le16((uint16_t)n->gid);
	r->i_gid_high = cpu_to_le16((uint16_t)(n->gid >> 16));
	r->i_links_count = cpu_to_le16((uint16_t)n->links);
	r->i_size_lo = cpu_to_le32((uint32_t)n->size);
	r->i_size_high = cpu_to_le32((uint32_t)(n->size >> 32));
	r->i_generation = cpu_to_le32(n->generation);
	r->i_file_acl_lo = cpu_to_le32((uint32_t)n->file_acl);
	r->i_file_acl_high = cpu_to_le16((uint16_t)(n->file_acl >> 32));
	/* On the legacy orphan list, i_dtime links to the next orphan. */
	r->i_dtime = cpu_to_le32(orphan_dtime(n, n->dtime));
	encode_blocks(fs, n, r);
	r->i_flags = cpu_to_le32(n->flags);
	if (fs->inode_size > EXT4_GOOD_OLD_INODE_SIZE)
		r->i_extra_isize = cpu_to_le16(n->extra_isize);
	fit_inode_times(n, r);
	encode_time(n, &r->i_atime, &r->i_atime_extra, n->atime);
	encode_time(n, &r->i_mtime, &r->i_mtime_extra, n->mtime);
	encode_time(n, &r->i_ctime, &r->i_ctime_extra, n->ctime);
	if (has_extra(n, EXTRA_END(i_crtime_extra)))
		encode_time(n, &r->i_crtime, &r->i_crtime_extra, n->crtime);
}

/*
 * The inode-table block of ino.  Seed 002: for a new inode, when every
 * inode of the block lies past what was ever used before this mount (as
 * the descriptor says and the inode bitmap confirmed: never_used_from),
 * and the commit has not written the block yet, all inodes in use there
 * are new: build it zeroed (or use the copy in the cache) instead of
 * reading it from disk.  An inode loaded from disk always reads its block.
 */
static int itable_block_for_write(struct uext4_fs *fs, uint64_t ino, bool is_new, struct buf **b,
				  uint32_t *off, uint32_t *group, uint32_t *index)
{
	uint32_t g = group_of_ino(fs, ino);
	uint32_t idx = (uint32_t)((ino - 1) % fs->inodes_per_group);
	uint32_t bi = idx / fs->inodes_per_block;
	uint64_t blk;
	int err = inode_location(fs, ino, &blk, off);

	if (err)
		return err;
	*group = g;
	*index = bi;
	if (is_new &&
	    bi * fs->inodes_per_block >=
		    atomic_load_explicit(&fs->groups[g].never_used_from, memory_order_acquire) &&
	    !trans_itable_block_written(fs, g, bi))
		return bget_zero_if_absent(fs->bc, blk, UEXT4_META_INODE_TABLE, b);
	return bread(fs->bc, blk, UEXT4_META_INODE_TABLE, b);
}

/* What goes into an inode's copy in its inode-table buffer. */
enum itable_fill { FILL_WHOLE, FILL_ORPHAN_LINK };

/*
 * Change the inode's copy in its inode-table buffer under its slot lock, and
 * dirty the buffer.  FILL_WHOLE: the parsed fields, encoded into n->raw
 * with its checksum, copied in (caller holds n->lock for writing, or owns
 * a new inode).  FILL_ORPHAN_LINK: only i_dtime (the legacy orphan list's
 * link) and the checksum, in the buffer's copy; n->raw is left alone and
 * the next FILL_WHOLE encodes the same link from orphan_next_ino, so no
 * n->lock is needed (as the kernel's NEXT_ORPHAN update of a neighbour).
 * save (FILL_WHOLE of a new inode's first write, or NULL): gets the slot's
 * bytes from before, for inode_restore_slot().
 */
static int itable_update(struct handle *h, struct inode *n, enum itable_fill fill, uint8_t *save)
{
	struct uext4_fs *fs = h->fs;
	uint32_t off, group, index;
	struct buf *b;
	struct slot_stripe *st;
	bool is_new = atomic_load_explicit(&n->istate, memory_order_relaxed) & INODE_NEW;
	int err;

	if ((err = itable_block_for_write(fs, n->ino, is_new, &b, &off, &group, &index)))
		return err;
	if ((err = handle_write_access(h, b)) == 0) {
		st = slot_lock(fs, n->ino);
		if (fill == FILL_WHOLE) {
			if (save)
				memcpy(save, b->data + off, fs->inode_size);
			encode_inode(fs, n);
			csum_set_inode(fs, n->ino, n->raw);
			memcpy(b->data + off, n->raw, fs->inode_size);
		} else {
			struct ext4_inode *r = (struct ext4_inode *)(b->data + off);

			r->i_dtime = cpu_to_le32(orphan_dtime(n, 0));
			csum_set_inode(fs, n->ino, r);
		}
		slot_unlock(st, true);
		handle_dirty(h, b, CSUM_INODE_TABLE, group, index);
	}
	brelse(fs->bc, b);
	return err;
}

static int inode_write_saving(struct handle *h, struct inode *n, uint8_t *save)
{
	int err = itable_update(h, n, FILL_WHOLE, save);

	/* fsync commits up to here (trans_commit_tid()). */
	if (!err)
		atomic_store_explicit(&n->last_tid, h->tid, memory_order_relaxed);
	return err;
}

int inode_write(struct handle *h, struct inode *n)
{
	return inode_write_saving(h, n, NULL);
}

int inode_write_orphan_link(struct handle *h, struct inode *n)
{
	return itable_update(h, n, FILL_ORPHAN_LINK, NULL);
}

/*
 * Undo of a create: the slot gets back the bytes it had before the new
 * inode's first write, instead of a freed inode (links 0, a deletion
 * time), so that the refused operation leaves the inode-table block as it
 * was.  A block the never-read shortcut built zeroed gets zeros back: the
 * disk's copy there was never read (lazy itable init may have left
 * anything in it), so the block may still be written as zeros; its
 * inodes were never in use, so nothing of meaning changes.
 */
int inode_restore_slot(struct handle *h, struct inode *n, const struct inode_undo *u)
{
	struct uext4_fs *fs = h->fs;
	uint32_t off, group, index;
	bool is_new = atomic_load_explicit(&n->istate, memory_order_relaxed) & INODE_NEW;
	struct buf *b;
	int err;

	if (!u->slot_saved)
		return -EINVAL;
	if ((err = itable_block_for_write(fs, n->ino, is_new, &b, &off, &group, &index)))
		return err;
	if ((err = handle_write_access(h, b)) == 0) {
		struct slot_stripe *st = slot_lock(fs, n->ino);

		memcpy(b->data + off, u->slot, fs->inode_size);
		slot_unlock(st, true);
		handle_dirty(h, b, CSUM_INODE_TABLE, group, index);
	}
	brelse(fs->bc, b);
	return err;
}

static uint32_t new_generation(struct uext4_fs *fs)
{
	static _Thread_local uint64_t x;

	if (fs->use_fixed_time)
		/* Reproducible: the n-th inode made by this mount gets n. */
		return atomic_fetch_add_explicit(&fs->hot->next_generation, 1,
						 memory_order_relaxed) + 1;

	if (!x) {
		struct timespec ts;

		clock_gettime(CLOCK_MONOTONIC, &ts);
		x = ((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)ts.tv_sec ^ ((uintptr_t)&x << 7) ^ 1;
	}
	/* xorshift64: cheap, per thread, no shared state. */
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return (uint32_t)(x >> 16);
}

static void init_new_fields(struct uext4_fs *fs, struct inode *dir, struct inode *n,
			    uint32_t mode)
{
	struct timespec now = fs_time(fs);

	n->mode = mode;
	n->links = S_ISDIR(mode) ? 2 : 1; /* its first name (and its "." ) */
	n->uid = caller_uid();
	n->gid = caller_gid();
	if (dir->mode & S_ISGID) {
		/* BSD group semantics in a setgid directory. */
		n->gid = dir->gid;
		if (S_ISDIR(mode))
			n->mode |= S_ISGID;
	}
	n->flags = flags_inherited(dir->flags, mode);    /* flags.c, as the kernel */
	n->generation = new_generation(fs);
	n->atime = n->mtime = n->ctime = n->crtime = now;
	if (fs->inode_size > EXT4_GOOD_OLD_INODE_SIZE)
		n->extra_isize = fs->want_extra_isize;
	if (FS_HAS_INCOMPAT(fs, EXTENTS) && (S_ISREG(mode) || S_ISDIR(mode) || S_ISLNK(mode))) {
		struct ext4_extent_header *eh = (void *)inode_raw_mut(n)->i_block;

		n->flags |= EXT4_EXTENTS_FL;
		eh->eh_magic = cpu_to_le16(EXT4_EXT_MAGIC);
		eh->eh_entries = 0;
		eh->eh_max = cpu_to_le16((uint16_t)((sizeof(inode_raw(n)->i_block) -
						     sizeof(*eh)) / sizeof(struct ext4_extent)));
		eh->eh_depth = 0;
	}
}

static int icache_insert_new(struct uext4_fs *fs, struct inode *n)
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

static int inode_new_common(struct handle *h, struct inode *dir, uint32_t mode,
			    struct inode **out, struct ialloc_undo *ia, uint8_t *save);

void inode_created(struct inode *n)
{
	/* Release: whoever sees the bit clear sees the fields complete. */
	atomic_fetch_and_explicit(&n->istate, ~(uint32_t)INODE_CREATING, memory_order_release);
}

int inode_new(struct handle *h, struct inode *dir, uint32_t mode, struct inode **out)
{
	struct ialloc_undo ia;

	return inode_new_common(h, dir, mode, out, &ia, NULL);
}

int inode_new_undoable(struct handle *h, struct inode *dir, uint32_t mode, struct inode **out,
		       struct inode_undo *u)
{
	/* Larger slots than the saved bytes can hold: the undo writes a
	 * freed inode there instead (namei.c). */
	u->slot_saved = h->fs->inode_size <= sizeof(u->slot);
	return inode_new_common(h, dir, mode, out, &u->ia, u->slot_saved ? u->slot : NULL);
}

static int inode_new_common(struct handle *h, struct inode *dir, uint32_t mode,
			    struct inode **out, struct ialloc_undo *ia, uint8_t *save)
{
	struct uext4_fs *fs = h->fs;
	struct inode *n;
	uint64_t ino;
	int err;

	ia->valid = false;
	err = ialloc_alloc_undo(h, dir, mode, &ino, ia);
	*out = NULL;
	if (err)
		return err;
	n = slab_alloc(fs->icache->slab);
	if (!n) {
		ialloc_free_undo(h, ino, S_ISDIR(mode), ia);
		return fs_err(ENOMEM, "out of memory for new inode %llu", (unsigned long long)ino);
	}
	n->ino = ino;
	urwlock_init(&n->lock, RANK_INODE);
	if (S_ISDIR(mode))
		urwlock_set_stat_class(&n->lock, LOCKSTAT_DIR);
	atomic_init(&n->refcount, 1);
	atomic_init(&n->istate, INODE_NEW | INODE_CREATING | INODE_BITMAP_OK);
	init_new_fields(fs, dir, n, mode);
	if ((err = icache_insert_new(fs, n))) {
		urwlock_destroy(&n->lock);
		slab_free(fs->icache->slab, n);
		return err; /* the number stays taken: it is in use elsewhere */
	}
	if ((err = inode_write_saving(h, n, save)) == 0) {
		*out = n;
		return 0;
	}
	/* Not reachable by anyone: give the number back. */
	ialloc_free_undo(h, ino, S_ISDIR(mode), ia);
	atomic_fetch_or(&n->istate, INODE_DELETED);
	iput(fs, n);
	return err;
}
