/*
 * inode.c - the in-memory inode cache and the on-disk inode layout.
 *
 * Inodes are cached in a sharded hash table.  Loading reads the inode
 * table block through the buffer cache WITHOUT holding a shard lock, so a
 * slow read never blocks lookups of other inodes; if two threads load the
 * same inode at once, the first to insert wins and the other frees its
 * copy.  Unreferenced inodes stay cached on a per-shard LRU until the
 * shard holds more than its share of ICACHE_MAX_UNUSED.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#define ICACHE_SHARDS 64
#define ICACHE_MAX_UNUSED (64 * 1024)
#define INODE_READAHEAD_BLOCKS 32

struct icache_shard {
	struct ulock lock;          /* protects everything below */
	struct inode **table;       /* hash chains */
	uint32_t nbuckets;
	uint32_t nunused;           /* inodes on the LRU */
	struct inode *lru_head, *lru_tail; /* unreferenced inodes, oldest at head */
} __attribute__((aligned(CACHELINE)));

struct icache {
	struct uext4_fs *fs;        /* read-only after create */
	struct icache_shard shards[ICACHE_SHARDS];
};

static struct icache_shard *shard_of(struct icache *ic, uint64_t ino)
{
	return &ic->shards[(ino * 0x9E3779B97F4A7C15ull) >> 58];
}

static uint32_t bucket_of(struct icache_shard *s, uint64_t ino)
{
	return (uint32_t)((ino / ICACHE_SHARDS) % s->nbuckets);
}

struct icache *icache_create(struct uext4_fs *fs)
{
	struct icache *ic = aligned_alloc(CACHELINE, sizeof(*ic));

	if (!ic)
		return NULL;
	memset(ic, 0, sizeof(*ic));
	ic->fs = fs;
	for (int i = 0; i < ICACHE_SHARDS; i++) {
		struct icache_shard *s = &ic->shards[i];

		ulock_init(&s->lock, RANK_ICACHE_SHARD);
		s->nbuckets = 1024;
		s->table = calloc(s->nbuckets, sizeof(*s->table));
		if (!s->table) {
			icache_destroy(ic);
			return NULL;
		}
	}
	return ic;
}

static void inode_free(struct inode *inode)
{
	urwlock_destroy(&inode->lock);
	free(inode);
}

void icache_destroy(struct icache *ic)
{
	for (int i = 0; i < ICACHE_SHARDS; i++) {
		struct icache_shard *s = &ic->shards[i];

		for (uint32_t b = 0; s->table && b < s->nbuckets; b++) {
			struct inode *n, *next;

			for (n = s->table[b]; n; n = next) {
				next = n->hnext;
				inode_free(n);
			}
		}
		free(s->table);
		ulock_destroy(&s->lock);
	}
	free(ic);
}

/* --- LRU of unreferenced inodes (shard lock held) --- */

static void lru_remove(struct icache_shard *s, struct inode *n)
{
	if (n->lru_prev)
		n->lru_prev->lru_next = n->lru_next;
	else
		s->lru_head = n->lru_next;
	if (n->lru_next)
		n->lru_next->lru_prev = n->lru_prev;
	else
		s->lru_tail = n->lru_prev;
	n->lru_prev = n->lru_next = NULL;
	s->nunused--;
}

static void lru_add_tail(struct icache_shard *s, struct inode *n)
{
	n->lru_next = NULL;
	n->lru_prev = s->lru_tail;
	if (s->lru_tail)
		s->lru_tail->lru_next = n;
	else
		s->lru_head = n;
	s->lru_tail = n;
	s->nunused++;
}

static void hash_remove(struct icache_shard *s, struct inode *n)
{
	struct inode **pp = &s->table[bucket_of(s, n->ino)];

	while (*pp != n)
		pp = &(*pp)->hnext;
	*pp = n->hnext;
}

/* Take a reference on a cached inode, or return NULL (shard lock held). */
static struct inode *lookup_locked(struct icache_shard *s, uint64_t ino)
{
	for (struct inode *n = s->table[bucket_of(s, ino)]; n; n = n->hnext) {
		if (n->ino != ino)
			continue;
		if (atomic_fetch_add(&n->refcount, 1) == 0)
			lru_remove(s, n);
		return n;
	}
	return NULL;
}

/* Evict the oldest unreferenced inodes beyond the shard's share. */
static void shrink_locked(struct icache_shard *s, struct inode **victims)
{
	while (s->nunused > ICACHE_MAX_UNUSED / ICACHE_SHARDS && s->lru_head) {
		struct inode *n = s->lru_head;

		lru_remove(s, n);
		hash_remove(s, n);
		n->hnext = *victims;
		*victims = n;
	}
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
static int check_in_use(struct inode *n, uint64_t blk)
{
	if (n->mode == 0 || (n->links == 0 && n->ino >= EXT4_GOOD_OLD_FIRST_INO))
		return fs_corrupt("inode %llu (block %llu) is not in use (deleted inode referenced)",
				  (unsigned long long)n->ino, (unsigned long long)blk);
	if (!valid_file_type(n->mode))
		return fs_corrupt("inode %llu (block %llu): bogus file type in i_mode 0%o",
				  (unsigned long long)n->ino, (unsigned long long)blk, n->mode);
	return 0;
}

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

static int load_inode(struct uext4_fs *fs, uint64_t ino, struct inode **out)
{
	uint64_t blk;
	uint32_t off;
	struct buf *b;
	struct inode *n;
	int err = inode_location(fs, ino, &blk, &off);

	if (err)
		return err;
	n = calloc(1, sizeof(*n) + fs->inode_size);
	if (!n)
		return fs_err(ENOMEM, "out of memory for inode %llu", (unsigned long long)ino);
	n->ino = ino;
	inode_table_readahead(fs, ino, blk);
	err = bread(fs->bc, blk, UEXT4_META_INODE_TABLE, &b);
	if (err) {
		free(n);
		return err;
	}
	memcpy(n->raw, b->data + off, fs->inode_size);
	brelse(fs->bc, b);
	if ((err = csum_verify_inode(fs, ino, n->raw)) || (err = decode_inode(fs, n, blk)) ||
	    (err = check_in_use(n, blk)) || (err = xattr_check_ibody(fs, n))) {
		free(n);
		return err;
	}
	urwlock_init(&n->lock, RANK_INODE);
	atomic_init(&n->refcount, 1);
	*out = n;
	return 0;
}

int iget(struct uext4_fs *fs, uint64_t ino, struct inode **out)
{
	struct icache_shard *s = shard_of(fs->icache, ino);
	struct inode *n, *mine = NULL;
	int err;

	ulock_lock(&s->lock);
	n = lookup_locked(s, ino);
	ulock_unlock(&s->lock);
	if (n) {
		*out = n;
		return 0;
	}
	if ((err = load_inode(fs, ino, &mine)))
		return err;
	ulock_lock(&s->lock);
	n = lookup_locked(s, ino); /* somebody may have loaded it meanwhile */
	if (!n) {
		uint32_t b = bucket_of(s, ino);

		mine->hnext = s->table[b];
		s->table[b] = mine;
		n = mine;
		mine = NULL;
	}
	ulock_unlock(&s->lock);
	if (mine)
		inode_free(mine);
	*out = n;
	return 0;
}

void igrab(struct inode *n)
{
	/* The caller holds a reference, so this is never the 0 -> 1 step. */
	atomic_fetch_add_explicit(&n->refcount, 1, memory_order_relaxed);
}

void iput(struct uext4_fs *fs, struct inode *n)
{
	struct icache_shard *s;
	struct inode *victims = NULL;

	if (!n)
		return;
	/* Fast path: not the last reference.  1 -> 0 (going on the LRU) and
	 * 0 -> 1 (lookup_locked) only happen under the shard lock. */
	uint32_t r = atomic_load_explicit(&n->refcount, memory_order_relaxed);
	while (r > 1) {
		if (atomic_compare_exchange_weak_explicit(&n->refcount, &r, r - 1,
							  memory_order_release,
							  memory_order_relaxed))
			return;
	}
	s = shard_of(fs->icache, n->ino);
	ulock_lock(&s->lock);
	if (atomic_fetch_sub(&n->refcount, 1) == 1) {
		lru_add_tail(s, n);
		shrink_locked(s, &victims);
	}
	ulock_unlock(&s->lock);
	while (victims) {
		struct inode *next = victims->hnext;

		inode_free(victims);
		victims = next;
	}
}

void inode_forget(struct uext4_fs *fs, uint64_t ino, uint64_t nlookup)
{
	/* Read-only: cached inodes are clean, so a forget needs no work; the
	 * LRU bounds memory.  The write path will release open-unlinked inodes
	 * here. */
	(void)fs;
	(void)ino;
	(void)nlookup;
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
	st->mtime = n->mtime;
	st->ctime = n->ctime;
	st->crtime = n->crtime;
	st->generation = n->generation;
	st->flags = n->flags;
	(void)fs;
}
