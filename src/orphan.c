/*
 * orphan.c - orphan inodes: unlinked while open, or in a shrinking
 * truncate, so that the next mount after a crash finishes the job.
 *
 * Two on-disk forms (kernel Documentation/filesystems/ext4/orphan.rst):
 *
 *  - The orphan file (COMPAT_ORPHAN_FILE, seed 000): a special inode whose
 *    blocks are arrays of le32 inode numbers (0 = free) with a tail of
 *    magic + checksum.  Its blocks are read once at mount and stay
 *    referenced.  A slot is claimed with no global lock: each block has an
 *    atomic count of free entries on its own cache line; a thread starts
 *    at a block that depends on its thread slot, reserves an entry by
 *    decrementing a count that is > 0 (CAS loop), then claims a zero entry
 *    of that block by compare-and-swap on the 32-bit word in the buffer.
 *    The reservation guarantees a zero entry exists, so the scan ends.
 *    Releasing clears the entry first and then increments the count, so
 *    the count never exceeds the zero entries.
 *
 *  - The legacy list (seed 003): s_last_orphan in the superblock names the
 *    newest orphan, whose i_dtime names the next, and so on.  One mutex
 *    (list_lock) covers only the on-disk linkage and the in-memory doubly
 *    linked mirror that finds an inode's predecessor; work that needs no
 *    ordering (state checks, reading the inode's table block, resetting
 *    the leaving inode's own i_dtime) happens outside it.
 *
 * orphan_cleanup() at a read-write mount processes both: inodes with
 * links are truncated to i_size, the others are freed by their last iput()
 * (inode.c's inode_delete() takes them off their list in the same handle).
 * As the kernel's ext4_orphan_cleanup(), one that cannot be processed
 * (corrupt) does not stop the rest: it is taken off its list (the legacy
 * head moves past it, its orphan-file entry is cleared: no later mount
 * trips over it), left allocated for e2fsck, and recorded with fs_error()
 * once the pass is over; a legacy link that cannot be followed (inode out
 * of range, free, unreadable, or a loop) ends the legacy list there, as
 * the kernel clears s_last_orphan.
 */
#include "bcache.h"
#include "csum.h"
#include "error.h"
#include "file.h"
#include "icache.h"
#include "inode.h"
#include "internal.h"
#include "lock.h"
#include "ondisk.h"
#include "orphan.h"
#include "super.h"
#include "trans.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* A block's free-entry count, alone on its cache line: threads working in
 * different blocks never share a line. */
struct ofile_count {
	_Atomic int32_t free;
	char pad[CACHELINE - sizeof(int32_t)];
};

struct orphan_state {
	/* --- set by orphan_init(), then read-only until orphan_destroy() --- */
	struct uext4_fs *fs;
	uint32_t file_ino, file_gen;   /* orphan file inode and generation (checksums) */
	uint32_t nblocks;              /* orphan file blocks; 0 = no orphan file */
	uint32_t per_block;            /* entries per block (block size / 4 - 2) */
	struct buf **bufs;             /* nblocks buffers, referenced until destroy;
					* their entries are changed only by atomic
					* CAS/stores (inside handles) */
	struct ofile_count *counts;    /* nblocks counters (atomic, lock-free) */
	/* --- cleanup flag: written by orphan_cleanup() (single thread, no
	 * handles of others yet), read by iget() through
	 * orphan_cleanup_running() --- */
	_Atomic bool cleanup_running;
	/* --- legacy list, on its own cache line --- */
	struct ulock list_lock __attribute__((aligned(CACHELINE)));
	/* Protected by list_lock: the newest inode on the list (the one
	 * s_last_orphan names), the length, and every listed inode's
	 * orphan_prev / orphan_next / orphan_next_ino and the i_dtime link of
	 * its inode-table copy; fs->sb.s_last_orphan is written only under it
	 * (atomic stores: the commit reads it between handles). */
	struct inode *head;
	uint32_t list_len;
};

static void orphan_state_free(struct orphan_state *st);

/* ================================================================ helpers */

static inline uint32_t *entry_ptr(struct buf *b, uint32_t idx)
{
	return (uint32_t *)(void *)b->data + idx;
}

static inline uint32_t entry_load(struct buf *b, uint32_t idx)
{
	return le32(__atomic_load_n(entry_ptr(b, idx), __ATOMIC_ACQUIRE));
}

static inline uint32_t last_orphan_load(struct uext4_fs *fs)
{
	return le32(__atomic_load_n(&fs->sb.s_last_orphan, __ATOMIC_RELAXED));
}

static inline void last_orphan_store(struct uext4_fs *fs, uint32_t ino)
{
	__atomic_store_n(&fs->sb.s_last_orphan, cpu_to_le32(ino), __ATOMIC_RELAXED);
	super_mark_dirty(fs);
}

static inline bool has_state(struct inode *inode, uint32_t bits)
{
	return (atomic_load_explicit(&inode->istate, memory_order_acquire) & bits) != 0;
}

bool orphan_cleanup_running(const struct uext4_fs *fs)
{
	return fs->orphan && atomic_load_explicit(&fs->orphan->cleanup_running,
						  memory_order_acquire);
}

/* ================================================================ orphan file: load */

/* Map, read and check block lblk of the orphan file; count its free entries. */
static int load_file_block(struct orphan_state *st, struct inode *of, uint32_t lblk)
{
	struct uext4_fs *fs = st->fs;
	struct block_map m;
	struct buf *b;
	uint32_t magic, nfree = 0;
	int err = inode_map(fs, of, lblk, 1, &m);

	if (err)
		return err;
	if (m.pblk == 0 || m.unwritten || m.pblk >= fs->blocks_count)
		return fs_corrupt("orphan file (inode %u): block %u is %s", st->file_ino, lblk,
				  m.pblk == 0 ? "a hole" : m.unwritten ? "unwritten"
				  : "outside the file system");
	if ((err = bread(fs->bc, m.pblk, UEXT4_META_OTHER, &b)))
		return err;
	st->bufs[lblk] = b;
	magic = le32(*(const uint32_t *)(const void *)(b->data + fs->block_size -
		sizeof(struct ext4_orphan_block_tail) + offsetof(struct ext4_orphan_block_tail, ob_magic)));
	if (magic != EXT4_ORPHAN_BLOCK_MAGIC)
		return fs_corrupt("orphan file (inode %u): block %u (physical %llu) has bad magic "
				  "0x%08x", st->file_ino, lblk, (unsigned long long)m.pblk, magic);
	if ((err = csum_verify_orphan_block(fs, st->file_ino, st->file_gen, m.pblk, b->data)))
		return err;
	for (uint32_t j = 0; j < st->per_block; j++)
		nfree += entry_load(b, j) == 0;
	atomic_init(&st->counts[lblk].free, (int32_t)nfree);
	return 0;
}

/* The orphan file's inode: a regular file of whole blocks. */
static int load_orphan_file(struct orphan_state *st)
{
	struct uext4_fs *fs = st->fs;
	uint32_t ino = le32(fs->sb.s_orphan_file_inum);
	struct inode *of;
	uint64_t nblocks;
	int err;

	if (ino == 0)
		return fs_corrupt("superblock: orphan_file feature set but s_orphan_file_inum is 0");
	if ((err = iget(fs, ino, &of)))
		return err;
	nblocks = of->size >> fs->log_block_size;
	if (!S_ISREG(of->mode) || nblocks > (1u << 20)) {
		iput(fs, of);
		return fs_corrupt("orphan file (inode %u): mode 0%o, size %llu", ino, of->mode,
				  (unsigned long long)of->size);
	}
	st->file_ino = ino;
	st->file_gen = of->generation;
	st->per_block = fs->block_size / sizeof(uint32_t) - 2;
	st->bufs = calloc(nblocks ? nblocks : 1, sizeof(*st->bufs));
	st->counts = aligned_alloc(CACHELINE, (nblocks ? nblocks : 1) * sizeof(*st->counts));
	if (!st->bufs || !st->counts) {
		iput(fs, of);
		return fs_err(ENOMEM, "out of memory for the orphan file's %llu blocks",
			      (unsigned long long)nblocks);
	}
	st->nblocks = (uint32_t)nblocks; /* bufs[] is released up to here on failure */
	err = 0;
	for (uint32_t i = 0; i < st->nblocks && !err; i++)
		err = load_file_block(st, of, i);
	iput(fs, of);
	return err;
}

int orphan_init(struct uext4_fs *fs)
{
	struct orphan_state *st;
	int err;

	if (fs->orphan || fs->read_only)
		return 0;
	st = aligned_alloc(CACHELINE, sizeof(*st));
	if (!st)
		return fs_err(ENOMEM, "out of memory for the orphan state");
	memset(st, 0, sizeof(*st));
	st->fs = fs;
	ulock_init(&st->list_lock, RANK_ORPHAN_LIST);
	atomic_init(&st->cleanup_running, false);
	if (FS_HAS_COMPAT(fs, ORPHAN_FILE) && (err = load_orphan_file(st))) {
		orphan_state_free(st);
		return err;
	}
	fs->orphan = st;
	if (st->nblocks) {
		/* While mounted read-write the orphan file may hold entries:
		 * tell the kernel and e2fsck to look at it after a crash.  On
		 * disk with the mount's first write (super_begin_writing()),
		 * before any commit that could add an entry. */
		__atomic_fetch_or(&fs->sb.s_feature_ro_compat,
				  cpu_to_le32(EXT4_FEATURE_RO_COMPAT_ORPHAN_PRESENT), __ATOMIC_RELAXED);
	}
	return 0;
}

static void orphan_state_free(struct orphan_state *st)
{
	for (uint32_t i = 0; st->bufs && i < st->nblocks; i++)
		if (st->bufs[i])
			brelse(st->fs->bc, st->bufs[i]);
	free(st->bufs);
	free(st->counts);
	ulock_destroy(&st->list_lock);
	free(st);
}

void orphan_destroy(struct uext4_fs *fs)
{
	if (!fs->orphan)
		return;
	orphan_state_free(fs->orphan);
	fs->orphan = NULL;
}

/* ================================================================ orphan file: add / del */

/* Take one free entry of a block's count, if it has any (lock-free). */
static bool reserve_entry(struct ofile_count *c)
{
	int32_t n = atomic_load_explicit(&c->free, memory_order_relaxed);

	while (n > 0)
		if (atomic_compare_exchange_weak_explicit(&c->free, &n, n - 1, memory_order_acquire,
							  memory_order_relaxed))
			return true;
	return false;
}

/* Claim a zero entry of a block we hold a reservation in.  Starts at a
 * per-thread position so that threads sharing a block rarely CAS on the
 * same word; rescans if others took the zeros it saw (the reservation
 * guarantees one is left for us). */
static uint32_t claim_entry(struct orphan_state *st, struct buf *b, uint32_t ino)
{
	uint32_t n = st->per_block, j = (thread_slot() * 37u) % n;
	uint32_t want = cpu_to_le32(ino);
	uint64_t lost_at = 0;   /* statistics: when a CAS first lost to another thread */

	for (;;) {
		for (uint32_t k = 0; k < n; k++, j = j + 1 == n ? 0 : j + 1) {
			uint32_t zero = 0;

			if (__atomic_load_n(entry_ptr(b, j), __ATOMIC_RELAXED) != 0)
				continue;
			if (__atomic_compare_exchange_n(entry_ptr(b, j), &zero, want, false,
							__ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
				if (lockstat_on())
					lockstat_count(LOCKSTAT_ORPHAN_FILE, lost_at != 0,
						       lost_at ? lockstat_now_ns() - lost_at : 0);
				return j;
			}
			if (!lost_at && lockstat_on())
				lost_at = lockstat_now_ns();
		}
	}
}

/* 0, -ENOSPC when every block is full, or an error. */
static int file_add(struct handle *h, struct orphan_state *st, struct inode *inode)
{
	uint32_t n = st->nblocks, start = thread_slot() % n, blk = 0, idx;
	struct buf *b;
	bool got = false;
	int err;

	for (uint32_t i = 0; i < n && !got; i++) {
		blk = start + i < n ? start + i : start + i - n;
		got = reserve_entry(&st->counts[blk]);
	}
	if (!got)
		return -ENOSPC;
	b = st->bufs[blk];
	if ((err = handle_write_access(h, b))) {
		atomic_fetch_add_explicit(&st->counts[blk].free, 1, memory_order_release);
		return err;
	}
	idx = claim_entry(st, b, (uint32_t)inode->ino);
	inode->orphan_slot = blk * st->per_block + idx;
	atomic_fetch_or_explicit(&inode->istate, INODE_ORPHAN_FILE, memory_order_release);
	handle_dirty(h, b, CSUM_ORPHAN, st->file_ino, st->file_gen);
	return 0;
}

static int file_del(struct handle *h, struct orphan_state *st, struct inode *inode)
{
	uint32_t slot = inode->orphan_slot;
	uint32_t blk = slot / st->per_block, idx = slot % st->per_block;
	uint32_t want = cpu_to_le32((uint32_t)inode->ino);
	struct buf *b;
	int err;

	atomic_fetch_and_explicit(&inode->istate, ~(uint32_t)INODE_ORPHAN_FILE,
				  memory_order_release);
	if (blk >= st->nblocks)
		return fs_err(EINVAL, "inode %llu: orphan file slot %u out of range",
			      (unsigned long long)inode->ino, slot);
	b = st->bufs[blk];
	if ((err = handle_write_access(h, b)))
		return err;
	if (!__atomic_compare_exchange_n(entry_ptr(b, idx), &want, 0, false, __ATOMIC_ACQ_REL,
					 __ATOMIC_RELAXED))
		return fs_corrupt("orphan file (inode %u) block %u entry %u holds inode %u, "
				  "not inode %llu", st->file_ino, blk, idx, le32(want),
				  (unsigned long long)inode->ino);
	/* Entry first, count second: a reserver always finds its zero. */
	atomic_fetch_add_explicit(&st->counts[blk].free, 1, memory_order_release);
	handle_dirty(h, b, CSUM_ORPHAN, st->file_ino, st->file_gen);
	return 0;
}

/* ================================================================ legacy list */

/* Bring the inode's table block into the cache before taking list_lock, so
 * that writing its link under the lock does no I/O (best effort). */
static void prefetch_itable(struct uext4_fs *fs, struct inode *inode)
{
	uint64_t blk;
	uint32_t off;
	struct buf *b;

	if (inode_location(fs, inode->ino, &blk, &off) == 0 &&
	    bread(fs->bc, blk, UEXT4_META_INODE_TABLE, &b) == 0)
		brelse(fs->bc, b);
}

/* In-memory list: inode becomes the head (the one s_last_orphan names).
 * list_lock held. */
static void list_push_front(struct orphan_state *st, struct inode *inode)
{
	inode->orphan_prev = NULL;
	inode->orphan_next = st->head;
	if (st->head)
		st->head->orphan_prev = inode;
	st->head = inode;
	st->list_len++;
}

/* Link inode in front of the list: its i_dtime takes the old head's
 * number, s_last_orphan takes its number. */
static int list_add(struct handle *h, struct orphan_state *st, struct inode *inode)
{
	struct uext4_fs *fs = st->fs;
	uint32_t next;
	int err;

	prefetch_itable(fs, inode);
	ulock_lock(&st->list_lock);
	next = last_orphan_load(fs);
	atomic_store_explicit(&inode->orphan_next_ino, next, memory_order_relaxed);
	/* Set before the write: inode_write() encodes i_dtime from
	 * orphan_next_ino while the bit is set. */
	atomic_fetch_or_explicit(&inode->istate, INODE_ORPHAN_LIST, memory_order_release);
	err = inode_write_orphan_link(h, inode);
	if (err) {
		atomic_fetch_and_explicit(&inode->istate, ~(uint32_t)INODE_ORPHAN_LIST,
					  memory_order_release);
		atomic_store_explicit(&inode->orphan_next_ino, 0, memory_order_relaxed);
		ulock_unlock(&st->list_lock);
		return err;
	}
	last_orphan_store(fs, (uint32_t)inode->ino);
	list_push_front(st, inode);
	ulock_unlock(&st->list_lock);
	return 0;
}

/* Unlink inode: its predecessor (or s_last_orphan) takes its next number;
 * then, if write_self, its own i_dtime goes back to 0 (outside the lock:
 * no other inode links to it any more).  Without a handle (h NULL) only
 * memory changes: the predecessor's new link reaches its table block with
 * its next write (inode_write() encodes orphan_next_ino), s_last_orphan
 * with the next superblock write. */
static int list_unlink(struct handle *h, struct orphan_state *st, struct inode *inode,
		       bool write_self)
{
	struct uext4_fs *fs = st->fs;
	struct inode *prev;
	uint32_t next;
	int err = 0, err2;

	ulock_lock(&st->list_lock);
	prev = inode->orphan_prev;
	next = atomic_load_explicit(&inode->orphan_next_ino, memory_order_relaxed);
	if (!prev) {
		if (last_orphan_load(fs) != inode->ino)
			err = fs_err(EINVAL, "orphan list: s_last_orphan is %u, expected inode %llu",
				     last_orphan_load(fs), (unsigned long long)inode->ino);
		last_orphan_store(fs, next);
		st->head = inode->orphan_next;
	} else {
		atomic_store_explicit(&prev->orphan_next_ino, next, memory_order_relaxed);
		if (h)
			err = inode_write_orphan_link(h, prev);
		prev->orphan_next = inode->orphan_next;
	}
	if (inode->orphan_next)
		inode->orphan_next->orphan_prev = prev;
	inode->orphan_prev = inode->orphan_next = NULL;
	st->list_len--;
	atomic_fetch_and_explicit(&inode->istate, ~(uint32_t)INODE_ORPHAN_LIST,
				  memory_order_release);
	ulock_unlock(&st->list_lock);
	if (!write_self || !h)
		return err;
	atomic_store_explicit(&inode->orphan_next_ino, 0, memory_order_relaxed);
	err2 = inode_write_orphan_link(h, inode);
	return err ? err : err2;
}

/* ================================================================ add / del */

int orphan_add(struct handle *h, struct inode *inode)
{
	struct orphan_state *st = h->fs->orphan;
	int err;

	if (!st || has_state(inode, INODE_ORPHAN_FILE | INODE_ORPHAN_LIST))
		return 0;
	if (st->nblocks) {
		err = file_add(h, st, inode);
		if (err != -ENOSPC)
			return err;
		/* Every block full: fall back to the legacy list. */
	}
	return list_add(h, st, inode);
}

int orphan_del(struct handle *h, struct inode *inode)
{
	struct orphan_state *st = h->fs->orphan;
	int err = 0, err2 = 0;

	if (!st)
		return 0;
	if (has_state(inode, INODE_ORPHAN_FILE))
		err = file_del(h, st, inode);
	if (has_state(inode, INODE_ORPHAN_LIST))
		err2 = list_unlink(h, st, inode, true);
	return err ? err : err2;
}

/* The orphan file entry of a slot is cleared: 0 or an error (in h). */
static int file_clear_entry(struct handle *h, struct orphan_state *st, uint32_t blk, uint32_t idx)
{
	struct buf *b = st->bufs[blk];
	int err = handle_write_access(h, b);

	if (err)
		return err;
	__atomic_store_n(entry_ptr(b, idx), 0, __ATOMIC_RELEASE);
	atomic_fetch_add_explicit(&st->counts[blk].free, 1, memory_order_release);
	handle_dirty(h, b, CSUM_ORPHAN, st->file_ino, st->file_gen);
	return 0;
}

int orphan_drop_failed(struct uext4_fs *fs, struct inode *inode)
{
	struct orphan_state *st = fs->orphan;
	struct handle *h = NULL;
	int err = 0, err2 = 0, err3;

	if (!st || !has_state(inode, INODE_ORPHAN_FILE | INODE_ORPHAN_LIST))
		return 0;
	err3 = handle_begin(fs, &h);
	if (err3)
		h = NULL;   /* as the kernel's orphan_del() without a handle: memory only */
	if (has_state(inode, INODE_ORPHAN_FILE)) {
		uint32_t blk = inode->orphan_slot / st->per_block;

		atomic_fetch_and_explicit(&inode->istate, ~(uint32_t)INODE_ORPHAN_FILE,
					  memory_order_release);
		if (h && blk < st->nblocks &&
		    entry_load(st->bufs[blk], inode->orphan_slot % st->per_block) == inode->ino)
			err = file_clear_entry(h, st, blk, inode->orphan_slot % st->per_block);
	}
	if (has_state(inode, INODE_ORPHAN_LIST))
		err2 = list_unlink(h, st, inode, false);
	if (h)
		err3 = handle_end(h);
	return err ? err : err2 ? err2 : err3;
}

/* ================================================================ cleanup */

/* Is ino marked in use in its group's inode bitmap?  1, 0 or -errno.
 * Cleanup runs before any other user of the mount: no group lock needed. */
static int inode_in_use(struct uext4_fs *fs, uint32_t ino)
{
	uint32_t g = group_of_ino(fs, ino), idx = (ino - 1) % fs->inodes_per_group;
	struct group_info *gi = &fs->groups[g];
	struct buf *b;
	int used, err;

	if (atomic_load_explicit(&gi->flags, memory_order_relaxed) & EXT4_BG_INODE_UNINIT)
		return 0;
	if ((fs->metadata_csum || fs->gdt_csum) &&
	    idx >= fs->inodes_per_group - MIN(atomic_load(&gi->itable_unused), fs->inodes_per_group))
		return 0;
	if ((err = bread(fs->bc, gi->inode_bitmap, UEXT4_META_BITMAP, &b)))
		return err;
	used = (b->data[idx / 8] >> (idx % 8)) & 1;
	brelse(fs->bc, b);
	return used;
}

/* Validate an orphan's number and load it. */
static int orphan_iget(struct uext4_fs *fs, uint32_t ino, struct inode **out)
{
	int used;

	if (ino < fs->first_ino || ino > fs->inodes_count)
		return fs_corrupt("inode number out of range %u..%u", fs->first_ino,
				  fs->inodes_count);
	used = inode_in_use(fs, ino);
	if (used < 0)
		return used;
	if (!used)
		return fs_corrupt("inode %u is free in the inode bitmap", ino);
	return iget(fs, ino, out);
}

/* Can blocks past i_size be freed by inode_truncate_blocks()? */
static bool truncatable(struct inode *inode)
{
	return (S_ISREG(inode->mode) || S_ISDIR(inode->mode)) && !inode_has_inline_data(inode);
}

/* An orphan with links: a shrinking truncate to finish (blocks past
 * i_size are freed), then off its list, in one handle. */
static int finish_truncate(struct uext4_fs *fs, struct inode *inode)
{
	struct handle *h;
	int err, err2;

	urw_wrlock(&inode->lock);
	if ((err = handle_begin(fs, &h))) {
		orphan_drop_failed(fs, inode);   /* at least off the in-memory list */
		urw_unlock(&inode->lock);
		return err;
	}
	if (truncatable(inode)) {
		err = inode_truncate_blocks(h, inode, DIV_ROUND_UP(inode->size, fs->block_size));
		if (!err)
			err = inode_write(h, inode);
	}
	/* Off the list even after an error, as the kernel does: the
	 * in-memory list must not keep an inode we are done with. */
	err2 = orphan_del(h, inode);
	err = err ? err : err2;
	err2 = handle_end(h);
	urw_unlock(&inode->lock);
	return err ? err : err2;
}

/*
 * What one cleanup pass did.  An orphan it cannot process (corrupt, or
 * failing to free) is skipped and taken off its list, as the kernel's
 * ext4_orphan_cleanup() goes on past it; the failures are recorded with
 * fs_error() only after the pass, so that an errors=remount-ro policy
 * does not stop the freeing of the good orphans after a bad one.
 */
#define CLEANUP_NAMED 8
struct cleanup {
	struct uext4_fs *fs;
	struct orphan_state *st;
	uint32_t truncated, deleted, failed;
	struct {
		uint32_t ino;
		int err;
		char why[200];
	} fail[CLEANUP_NAMED];      /* the first failures, for the report */
};

/* ino (found at where) could not be processed: err, with the message
 * that was set. */
static void note_failure(struct cleanup *c, uint32_t ino, int err, const char *where)
{
	if (c->failed < CLEANUP_NAMED) {
		c->fail[c->failed].ino = ino;
		c->fail[c->failed].err = err < 0 ? err : -EIO;
		snprintf(c->fail[c->failed].why, sizeof(c->fail[0].why), "%s: %s", where,
			 uext4_last_error());
	}
	c->failed++;
}

/* Process one loaded orphan whose list state is already set.  Consumes
 * the reference.  Afterwards the inode is on no list in memory, whatever
 * happened (finish_truncate() and a failed delete take it off). */
static int process_orphan(struct cleanup *c, struct inode *inode)
{
	int err;

	if (inode->links > 0) {
		err = finish_truncate(c->fs, inode);
		if (!err)
			c->truncated++;
		iput(c->fs, inode);
		return err;
	}
	/* The last iput() deletes it: inode_delete() frees its blocks, xattrs
	 * and number and calls orphan_del() in its handle. */
	atomic_fetch_or_explicit(&inode->istate, INODE_UNLINKED, memory_order_release);
	err = iput(c->fs, inode);
	if (!err)
		c->deleted++;
	return err;
}

static bool test_and_set_bit(uint8_t *map, uint32_t n)
{
	bool was = (map[n / 8] >> (n % 8)) & 1;

	map[n / 8] |= (uint8_t)(1u << (n % 8));
	return was;
}

/* The legacy chain cannot be followed past ino: drop the rest of it, as
 * the kernel does (what it held is left to e2fsck). */
static void list_give_up(struct cleanup *c, uint32_t ino, int err, const char *where)
{
	note_failure(c, ino, err, where);
	ulock_lock(&c->st->list_lock);
	last_orphan_store(c->fs, 0);
	ulock_unlock(&c->st->list_lock);
}

/* One inode from the head of the legacy chain: loaded, put on the
 * in-memory list as the kernel does, processed (which unlinks it and
 * moves s_last_orphan to the next).  False when the walk must stop. */
static bool cleanup_list_one(struct cleanup *c, uint32_t ino, const char *where)
{
	struct uext4_fs *fs = c->fs;
	struct inode *inode;
	uint32_t next;
	int err;

	if ((err = orphan_iget(fs, ino, &inode))) {
		list_give_up(c, ino, err, where);
		return false;
	}
	next = le32(inode_raw(inode)->i_dtime);
	ulock_lock(&c->st->list_lock);
	atomic_store_explicit(&inode->orphan_next_ino, next, memory_order_relaxed);
	atomic_fetch_or_explicit(&inode->istate, INODE_ORPHAN_LIST, memory_order_release);
	list_push_front(c->st, inode);
	ulock_unlock(&c->st->list_lock);
	if ((err = process_orphan(c, inode)))
		note_failure(c, ino, err, where);
	if (last_orphan_load(fs) == ino) {
		/* Cannot happen (the inode is off the list in memory): never
		 * loop on it. */
		if (!err)
			note_failure(c, ino, fs_err(EIO, "stayed at the head of the orphan list"),
				     where);
		ulock_lock(&c->st->list_lock);
		last_orphan_store(fs, next);
		ulock_unlock(&c->st->list_lock);
	}
	return true;
}

/* The legacy chain from s_last_orphan until it ends.  A walk longer than
 * the inode count or one that revisits an inode is a loop. */
static int cleanup_list(struct cleanup *c)
{
	struct uext4_fs *fs = c->fs;
	uint8_t *seen = NULL;
	uint64_t steps = 0;
	uint32_t ino, prev_ino = 0;

	while ((ino = last_orphan_load(fs)) != 0) {
		char where[64];

		if (prev_ino)
			snprintf(where, sizeof(where), "i_dtime link of orphan inode %u", prev_ino);
		else
			snprintf(where, sizeof(where), "s_last_orphan");
		if (!seen && !(seen = calloc(fs->inodes_count / 8 + 1, 1)))
			return fs_err(ENOMEM, "out of memory for the orphan list walk");
		if (++steps > fs->inodes_count ||
		    (ino <= fs->inodes_count && test_and_set_bit(seen, ino))) {
			list_give_up(c, ino, fs_corrupt("orphan list: it loops back to inode %u",
							ino), where);
			break;
		}
		if (!cleanup_list_one(c, ino, where))
			break;
		prev_ino = ino;
	}
	free(seen);
	return 0;
}

/* Entry j of block blk could not be processed: clear it, so that no later
 * mount trips over it (the inode is left to e2fsck). */
static void file_skip_entry(struct cleanup *c, uint32_t blk, uint32_t j)
{
	struct handle *h;

	if (entry_load(c->st->bufs[blk], j) == 0 || handle_begin(c->fs, &h))
		return;
	file_clear_entry(h, c->st, blk, j);
	handle_end(h);
}

/* Entry j of orphan file block blk (holding ino). */
static void cleanup_file_one(struct cleanup *c, uint32_t blk, uint32_t j, uint32_t ino)
{
	struct orphan_state *st = c->st;
	struct inode *inode;
	char where[80];
	int err;

	snprintf(where, sizeof(where), "orphan file block %u entry %u", blk, j);
	if ((err = orphan_iget(c->fs, ino, &inode))) {
		note_failure(c, ino, err, where);
		file_skip_entry(c, blk, j);
		return;
	}
	if (has_state(inode, INODE_ORPHAN_FILE | INODE_ORPHAN_LIST)) {
		iput(c->fs, inode);
		note_failure(c, ino, fs_corrupt("inode %u is on another orphan list too", ino),
			     where);
		file_skip_entry(c, blk, j);
		return;
	}
	inode->orphan_slot = blk * st->per_block + j;
	atomic_fetch_or_explicit(&inode->istate, INODE_ORPHAN_FILE, memory_order_release);
	if ((err = process_orphan(c, inode)))
		note_failure(c, ino, err, where);
	if (entry_load(st->bufs[blk], j) != 0) {
		if (!err)
			note_failure(c, ino, fs_err(EIO, "stayed in the orphan file"), where);
		file_skip_entry(c, blk, j);
	}
}

/* Every entry of the orphan file. */
static void cleanup_file(struct cleanup *c)
{
	for (uint32_t blk = 0; blk < c->st->nblocks; blk++)
		for (uint32_t j = 0; j < c->st->per_block; j++) {
			uint32_t ino = entry_load(c->st->bufs[blk], j);

			if (ino)
				cleanup_file_one(c, blk, j, ino);
		}
}

/* After the pass: each failure recorded on the file system, and one
 * message naming them for the caller (uext4_recover() reports it). */
static void report_failures(struct cleanup *c)
{
	char msg[512];
	size_t n = 0;

	for (uint32_t i = 0; i < MIN(c->failed, CLEANUP_NAMED); i++)
		FS_ERROR(c->fs, -c->fail[i].err, c->fail[i].ino, 0,
			 "orphan cleanup: inode %u (%s): skipped, left for e2fsck",
			 c->fail[i].ino, c->fail[i].why);
	n = (size_t)snprintf(msg, sizeof(msg), "orphan cleanup: %u inode%s could not be "
			     "processed and %s left for e2fsck (the other orphans were processed):",
			     c->failed, c->failed == 1 ? "" : "s", c->failed == 1 ? "was" : "were");
	for (uint32_t i = 0; i < MIN(c->failed, CLEANUP_NAMED) && n < sizeof(msg); i++)
		n += (size_t)snprintf(msg + n, sizeof(msg) - n, "%s inode %u (%s)", i ? ";" : "",
				      c->fail[i].ino, c->fail[i].why);
	fs_err(EUCLEAN, "%s", msg);
}

int orphan_cleanup(struct uext4_fs *fs, struct uext4_recovery *r)
{
	struct orphan_state *st = fs->orphan;
	struct cleanup c = {.fs = fs, .st = st};
	int err;

	r->orphans_truncated = r->orphans_deleted = r->orphans_failed = 0;
	r->orphan_failed_ino = 0;
	if (!st || fs->read_only)
		return 0;
	if (le16(fs->sb.s_state) & EXT4_ERROR_FS) {
		/* As the kernel: a file system with errors is e2fsck's job. */
		if (last_orphan_load(fs) || st->nblocks)
			fs_err(EUCLEAN, "file system has errors: orphan cleanup skipped "
			       "(run e2fsck)");
		return 0;
	}
	atomic_store_explicit(&st->cleanup_running, true, memory_order_release);
	err = cleanup_list(&c);
	if (!err)
		cleanup_file(&c);
	atomic_store_explicit(&st->cleanup_running, false, memory_order_release);
	r->orphans_truncated = c.truncated;
	r->orphans_deleted = c.deleted;
	r->orphans_failed = c.failed;
	r->orphan_failed_ino = c.failed ? c.fail[0].ino : 0;
	if (c.failed) {
		/* Commit what the pass did first: under errors=remount-ro,
		 * recording the failures drops the running transaction. */
		int cerr = trans_commit(fs);

		report_failures(&c);
		if (!err)
			err = cerr;
	}
	return err;
}

/* ================================================================ unmount, stats */

static uint32_t file_free_entries(struct orphan_state *st)
{
	uint64_t sum = 0;

	for (uint32_t i = 0; i < st->nblocks; i++)
		sum += (uint32_t)atomic_load_explicit(&st->counts[i].free, memory_order_relaxed);
	return (uint32_t)sum;
}

void orphan_umount(struct uext4_fs *fs)
{
	struct orphan_state *st = fs->orphan;

	if (!st || !st->nblocks)
		return;
	if (file_free_entries(st) != st->nblocks * st->per_block) {
		/* Still in use (should not happen at a clean unmount): keep
		 * the flag so that the next mount cleans them up. */
		fs_err(EBUSY, "orphan file still holds %u inodes at unmount",
		       st->nblocks * st->per_block - file_free_entries(st));
		return;
	}
	__atomic_fetch_and(&fs->sb.s_feature_ro_compat,
			   ~cpu_to_le32(EXT4_FEATURE_RO_COMPAT_ORPHAN_PRESENT), __ATOMIC_RELAXED);
	super_mark_dirty(fs);
}

void orphan_get_stats(struct uext4_fs *fs, struct orphan_stats *out)
{
	struct orphan_state *st = fs->orphan;

	memset(out, 0, sizeof(*out));
	if (!st)
		return;
	out->file_blocks = st->nblocks;
	out->file_capacity = st->nblocks * st->per_block;
	out->file_free = file_free_entries(st);
	ulock_lock(&st->list_lock);
	out->list_len = st->list_len;
	ulock_unlock(&st->list_lock);
}
