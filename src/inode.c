/*
 * inode.c - the on-disk inode: loading (iget(): decode and check a slot of
 * the inode table, then hand the copy to the inode cache, icache.c),
 * encoding and writing back, creating, and the slot locks that keep a
 * load from seeing half a write.  A load reads the inode-table block
 * through the buffer cache WITHOUT holding a cache lock, so a slow read
 * never blocks lookups of other inodes.
 */
#include "caller.h"
#include "bcache.h"
#include "clock.h"
#include "csum.h"
#include "dirtimes.h"
#include "error.h"
#include "flags.h"
#include "ialloc.h"
#include "icache.h"
#include "inode.h"
#include "internal.h"
#include "lock.h"
#include "ondisk.h"
#include "quota.h"
#include "trans.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#define INODE_READAHEAD_BLOCKS 32
#define SLOT_STRIPE_BITS 10
#define SLOT_STRIPES (1u << SLOT_STRIPE_BITS)


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

/* A mount's stripes (fs->islots); the table itself is read-only. */
struct inode_slots {
	struct slot_stripe stripes[SLOT_STRIPES];
};

struct inode_slots *inode_slots_create(void)
{
	struct inode_slots *t = aligned_alloc(CACHELINE, sizeof(*t));

	if (!t)
		return NULL;
	for (unsigned i = 0; i < SLOT_STRIPES; i++) {
		atomic_flag_clear(&t->stripes[i].lock);
		t->stripes[i].writes = 0;
	}
	return t;
}

void inode_slots_destroy(struct inode_slots *t)
{
	free(t);
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
	struct slot_stripe *st = &fs->islots->stripes[slot_stripe_of(fs, ino)];
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

/* Was a slot of ino's stripe written since the count was `writes`? */
static bool slot_changed(struct uext4_fs *fs, uint64_t ino, uint32_t writes)
{
	return slot_writes(fs, ino) != writes;
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
	n->projid = has_extra(n, EXTRA_END(i_projid)) ? le32(r->i_projid) : 0;
	decode_times(n, r);
	quota_inode_loaded(fs, n);
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

/* The in-inode xattr area, checked by the layer that owns xattrs. */
static int check_xattrs(struct uext4_fs *fs, struct inode *n)
{
	const struct icache_host *host = icache_host(fs);

	return host ? host->check_xattrs(fs, n) : 0;
}

/* An inode referenced by a directory must be in use and of a real type. */
/* Orphan cleanup at mount loads the inodes with no links it is to free,
 * as the kernel's ext4_iget() in its orphan cleanup state. */
static int check_in_use(struct uext4_fs *fs, struct inode *n, uint64_t blk)
{
	const struct icache_host *host = icache_host(fs);
	bool unlinked_ok = n->links == 0 && host && host->orphan_cleanup_running(fs);

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
	n = icache_alloc(fs);
	if (!n)
		return fs_err(ENOMEM, "out of memory for inode %llu", (unsigned long long)ino);
	n->ino = ino;
	inode_table_readahead(fs, ino, blk);
	err = bread(fs->bc, blk, UEXT4_META_INODE_TABLE, &b);
	if (err) {
		icache_free_memory(fs, n);
		return err;
	}
	st = slot_lock(fs, ino);
	memcpy(n->raw, b->data + off, fs->inode_size);
	*writes = st->writes;
	slot_unlock(st, false);
	brelse(fs->bc, b);
	if ((err = csum_verify_inode(fs, ino, n->raw)) || (err = decode_inode(fs, n, blk)) ||
	    (err = check_in_use(fs, n, blk)) || (err = check_inode_body(fs, n, blk)) ||
	    (err = check_xattrs(fs, n))) {
		icache_free_memory(fs, n);
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


/*
 * One reference on the final inode only: an eviction releases the
 * inode's state (its lock) at once, not when the epoch frees the memory,
 * so the copy under the lock needs the inode held.  The grab refuses a
 * dead inode, and a held one is not evicted.
 */
bool inode_stat_peeked(struct uext4_fs *fs, struct inode *n, struct uext4_stat *st)
{
	uint32_t state;

	if (!icache_try_grab(n))
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


int iget(struct uext4_fs *fs, uint64_t ino, struct inode **out)
{
	struct inode *n, *mine = NULL;
	uint32_t writes = 0;
	int err;

	n = icache_lookup(fs, ino);
	/* Each round that loads again follows a write of a slot of the
	 * stripe by another thread, which made progress. */
	while (!n) {
		int again;

		if ((err = load_inode(fs, ino, &mine, &writes)))
			return err;
		again = icache_insert_loaded(fs, &mine, slot_changed, writes, &n);
		if (mine)
			icache_free_copy(fs, mine);
		if (!again)
			break;
	}
	if ((err = refuse_unusable(fs, n)))
		return err;
	*out = n;
	return 0;
}


void inode_lookup_ref_held(struct uext4_fs *fs, struct inode *n, struct uext4_stat *st)
{
	if (n->ino != EXT4_ROOT_INO)
		icache_lookup_count_add(n);
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
		dirtimes_read(n, &st->mtime, &st->ctime);
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

static int64_t ts_ns(struct timespec ts)
{
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

struct timespec fs_time(const struct uext4_fs *fs)
{
	struct timespec now = fs->use_fixed_time
				      ? (struct timespec){.tv_sec = (time_t)fs->fixed_time}
				      : fs_now();
	int64_t floor = atomic_load_explicit(&fs->time_floor_ns, memory_order_relaxed);

	if (!fs->use_fixed_time && floor > ts_ns(now))
		now = (struct timespec){ .tv_sec = (time_t)(floor / 1000000000),
					 .tv_nsec = (long)(floor % 1000000000) };
	/* As the kernel's current_time(): whole seconds on 128-byte inodes. */
	return fs_fit_time(fs, now);
}

void fs_time_floor_raise(struct uext4_fs *fs, struct timespec ts)
{
	int64_t t = ts_ns(ts), old;

	/* Only a time the clock has reached: never a chosen time ahead. */
	if (t > ts_ns(fs_now_fine()))
		return;
	old = atomic_load_explicit(&fs->time_floor_ns, memory_order_relaxed);
	while (t > old && !atomic_compare_exchange_weak_explicit(&fs->time_floor_ns, &old, t,
								 memory_order_relaxed,
								 memory_order_relaxed))
		;
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
 * stores are atomic, as dirtimes_touch_shared()'s, for dirtimes_read().
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
	if (has_extra(n, EXTRA_END(i_projid)))
		r->i_projid = cpu_to_le32(n->projid);
}

/*
 * Room for i_projid in an inode whose i_extra_isize stops short of it (an
 * image from an old kernel): the area grows to s_want_extra_isize, the new
 * bytes zero, as the kernel's ext4_expand_extra_isize().  The kernel moves
 * in-inode xattrs out of the way first; uext4 does not, so an inode that
 * has them is refused (EOVERFLOW, the kernel's answer when it cannot
 * expand).  The caller holds n->lock for writing.
 */
static int expand_for_projid(struct uext4_fs *fs, struct inode *n)
{
	size_t old_end = EXT4_GOOD_OLD_INODE_SIZE + (size_t)n->extra_isize;
	uint16_t want = fs->want_extra_isize;
	unsigned long long ino = (unsigned long long)n->ino;

	if (want < EXTRA_END(i_projid) - EXT4_GOOD_OLD_INODE_SIZE)
		want = (uint16_t)(EXTRA_END(i_projid) - EXT4_GOOD_OLD_INODE_SIZE);
	if (EXT4_GOOD_OLD_INODE_SIZE + (size_t)want > fs->inode_size)
		return fs_err(EOVERFLOW, "set project id: inode %llu has no room for i_projid "
			      "(%u-byte inodes)", ino, fs->inode_size);
	uint32_t magic = 0;

	if (old_end + 4 <= fs->inode_size)
		memcpy(&magic, n->raw + old_end, sizeof(magic));
	if (le32(magic) == EXT4_XATTR_MAGIC)
		return fs_err(EOVERFLOW, "set project id: inode %llu would have to move its "
			      "in-inode xattrs to make room for i_projid (i_extra_isize %u); "
			      "uext4 does not", ino, n->extra_isize);
	memset(n->raw + old_end, 0, EXT4_GOOD_OLD_INODE_SIZE + (size_t)want - old_end);
	n->extra_isize = want;
	n->crtime = (struct timespec){0};   /* the new area's, zero */
	return 0;
}

static bool is_quota_file(const struct uext4_fs *fs, uint64_t ino)
{
	return ino == EXT4_USR_QUOTA_INO || ino == EXT4_GRP_QUOTA_INO ||
	       (fs->sb.s_prj_quota_inum && ino == le32(fs->sb.s_prj_quota_inum));
}

/*
 * The one place an existing inode's project id changes (the kernel's
 * ext4_ioctl_setproject(); a new inode takes its directory's in
 * init_new_fields()).  The project quota's entry for the new id is made
 * after the checks (quota_transfer(), which sets n->projid); the usage
 * moves at the caller's inode_write().  A refusal leaves n as it was.
 */
int inode_set_projid(struct handle *h, struct inode *n, uint32_t projid)
{
	struct uext4_fs *fs = h->fs;
	unsigned long long ino = (unsigned long long)n->ino;
	int err;

	if (!FS_HAS_RO_COMPAT(fs, PROJECT))
		return projid == 0 ? 0 : fs_err(EOPNOTSUPP, "set project id %u on inode %llu: the "
						"file system lacks the project feature", projid, ino);
	if (fs->inode_size <= EXT4_GOOD_OLD_INODE_SIZE)
		return fs_err(EOPNOTSUPP, "set project id %u on inode %llu: 128-byte inodes have "
			      "no i_projid", projid, ino);
	if (projid == n->projid)
		return 0;
	if (is_quota_file(fs, n->ino))
		return fs_err(EPERM, "set project id: inode %llu is a quota file", ino);
	if (!has_extra(n, EXTRA_END(i_projid)) && (err = expand_for_projid(fs, n)))
		return err;
	return quota_transfer(h, n, n->uid, n->gid, projid);
}

/* What a new inode takes from its directory (__ext4_new_inode()): the
 * directory's project id when it has PROJINHERIT, else 0. */
static uint32_t inherited_projid(const struct uext4_fs *fs, const struct inode *dir)
{
	return FS_HAS_RO_COMPAT(fs, PROJECT) && (dir->flags & EXT4_PROJINHERIT_FL) ? dir->projid
										    : 0;
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

	/* A new id's quota entry is made first, outside the slot lock. */
	if (fill == FILL_WHOLE && (err = quota_prepare(h, n)))
		return err;
	if ((err = itable_block_for_write(fs, n->ino, is_new, &b, &off, &group, &index)))
		return err;
	if ((err = handle_write_access(h, b)) == 0) {
		st = slot_lock(fs, n->ino);
		if (fill == FILL_WHOLE) {
			if (save)
				memcpy(save, b->data + off, fs->inode_size);
			encode_inode(fs, n);
			quota_sync(fs, n);
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
	quota_inode_new(n);
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
	n->projid = inherited_projid(fs, dir);
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

/* The ids a new inode in dir will have (init_new_fields()): its inode
 * quota is checked before anything is allocated. */
static int check_new_inode_quota(struct uext4_fs *fs, struct inode *dir, uint32_t mode)
{
	uint32_t ids[3] = { caller_uid(), dir->mode & S_ISGID ? dir->gid : caller_gid(),
			    inherited_projid(fs, dir) };
	/* A directory's first block, unless it starts inline. */
	uint64_t space = S_ISDIR(mode) && !FS_HAS_INCOMPAT(fs, INLINE_DATA) ? fs->block_size : 0;

	return quota_check_inode(fs, ids, space, ids[0] == 0);
}

int inode_new_undoable(struct handle *h, struct inode *dir, uint32_t mode, struct inode **out,
		       struct inode_undo *u)
{
	int err;

	/* A name's inode is counted (an EA inode, inode_new(), is not). */
	*out = NULL;
	if ((err = check_new_inode_quota(h->fs, dir, mode)))
		return err;
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
	n = icache_alloc(fs);
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
	if (FS_HAS_INCOMPAT(fs, INLINE_DATA) && n->extra_isize && (S_ISREG(mode) || S_ISDIR(mode)))
		atomic_fetch_or_explicit(&n->istate, INODE_MAY_INLINE, memory_order_relaxed);
	if ((err = icache_insert_new(fs, n))) {
		urwlock_destroy(&n->lock);
		icache_free_memory(fs, n);
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

/*
 * Fast-commit replay (fc_replay.c), as the kernel's ext4_fc_replay_inode():
 * the logged raw inode (len bytes) goes into ino's slot but for i_block,
 * which keeps the tree on disk (an extent inode without a valid root gets
 * an empty one; an inline-data inode takes the logged i_block).  A cached
 * copy of the inode is reloaded from the slot.  Caller: the replay, alone
 * on the mount, in a handle, with no inode lock held.
 */
int inode_replay_raw(struct handle *h, uint64_t ino, const uint8_t *fc_raw, size_t len)
{
	struct uext4_fs *fs = h->fs;
	const size_t at_block = offsetof(struct ext4_inode, i_block);
	const size_t at_gen = offsetof(struct ext4_inode, i_generation);
	uint32_t off, group, index;
	struct ext4_inode *r;
	struct inode *n;
	struct buf *b;
	int err;

	if (len < EXT4_GOOD_OLD_INODE_SIZE || len > fs->inode_size)
		return fs_corrupt("fast commit: inode %llu logged with %zu bytes (inodes here "
				  "have %u)", (unsigned long long)ino, len, fs->inode_size);
	if ((err = itable_block_for_write(fs, ino, false, &b, &off, &group, &index)))
		return err;
	if ((err = handle_write_access(h, b)) == 0) {
		struct slot_stripe *st = slot_lock(fs, ino);
		struct ext4_extent_header *eh;

		r = (struct ext4_inode *)(b->data + off);
		memcpy(r, fc_raw, at_block);
		memcpy((uint8_t *)r + at_gen, fc_raw + at_gen, len - at_gen);
		eh = (struct ext4_extent_header *)r->i_block;
		if ((le32(r->i_flags) & EXT4_EXTENTS_FL) && le16(eh->eh_magic) != EXT4_EXT_MAGIC) {
			memset(r->i_block, 0, sizeof(r->i_block));
			eh->eh_magic = cpu_to_le16(EXT4_EXT_MAGIC);
			eh->eh_max = cpu_to_le16((sizeof(r->i_block) - sizeof(*eh)) /
						 sizeof(struct ext4_extent));
		} else if (le32(r->i_flags) & EXT4_INLINE_DATA_FL) {
			memcpy(r->i_block, fc_raw + at_block, sizeof(r->i_block));
		}
		csum_set_inode(fs, ino, r);
		slot_unlock(st, true);
		handle_dirty(h, b, CSUM_INODE_TABLE, group, index);
		n = icache_lookup(fs, ino);
		if (n) {
			memcpy(n->raw, r, fs->inode_size);
			err = decode_inode(fs, n, b->blocknr);
			iput(fs, n);
		}
	}
	brelse(fs->bc, b);
	return err;
}
