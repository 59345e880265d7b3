/*
 * trans.c - transactions: handles around every metadata change, and the
 * commit that writes the changed blocks back.
 *
 * A handle is thread-local (no allocation).  handle_begin() counts the
 * thread in one of TRANS_SLOTS drain counters, each on its own cache line,
 * so concurrent operations share no written line (begin and end are one
 * atomic add on that line and a load of `blocked` each; every
 * check_mask+1-th end also sums the shards' dirty counts); a commit raises
 * `blocked`, waits until every counter is zero, and so sees the metadata
 * between two operations, never in the middle of one.  It then takes the
 * dirty buffers, folds the bitmaps' checksums into their groups, writes
 * the group descriptors and superblock, marks the buffers BUF_FROZEN (each
 * with its slot in the commit's copy buffer; the kind and owner of each
 * block whose checksum sits inside it are noted), and lets handles run
 * again.  Only then are the blocks copied: by the commit, or, for a block
 * a handle is about to change, by that handle in handle_write_access()
 * (jbd2's frozen buffers), whichever wins the CAS from BUF_FROZEN to
 * BUF_COPYING.  So the copies hold the blocks as they were at the close.
 * Once all are made, the commit sets the in-block checksums (directory,
 * htree, extent, xattr, orphan-file blocks) on the copies, with handles
 * running: the crc32c of every dirty block is off the window in which
 * handles wait.  A live buffer's checksum field is never set and nothing
 * reads it; the copies are what the log and the home writes take, and a
 * block read back from disk has its copy's.  The copies are written with
 * no handle waiting for the I/O.
 *
 * With a journal (journal.c) the commit is a JBD2 one: the copies and
 * the revoke records of freed metadata go to the log, which is made
 * durable (flush, commit block, flush) before blocks freed in the
 * transaction may be allocated again (balloc's busy extents) and before
 * the copies are written home (the checkpoint, with handles running).
 * Without a journal the copies are written home and flushed.
 *
 * Transactions are numbered from 1 (running); the journal's sequence
 * numbers are journal_first_tid() + number - 1 (journal.c numbers the
 * log consecutively itself).  Group commit: an fsync whose inode's last
 * transaction is already committed returns at once; while another thread
 * commits, it waits until a commit covers its transaction.  A commit
 * thread commits every commit_secs and when handles find too much dirty.
 *
 * What protects what:
 *   struct trans fields    immutable after trans_init(), except:
 *   slot[].n               atomics; begin/end of handles
 *   blocked                atomic; set and cleared by the committer, which
 *                          holds commit_lock
 *   wait_lock              (leaf pthread mutex) with drained/unblocked
 *                          condition variables: sleeping committer/handles
 *   commit_lock            RANK_HANDLE mutex: one commit at a time; taken
 *                          only outside handles
 *   itb_written            atomic bits; set by the commit (see
 *                          trans_itable_block_written())
 *   running, committed     atomics; changed by the committer (commit_lock)
 *   revoke[i]              revoke[i].lock (leaf): freed metadata blocks of
 *                          the running transaction, by handle slot
 *   timer_*                wait_lock
 *   buf.frozen             set by the committer with handles drained,
 *                          before BUF_FROZEN; used by the thread that
 *                          claims BUF_COPYING; copybuf outlives the copies
 *                          (the commit waits for every BUF_COPYING to clear)
 */
#include "bcache.h"
#include "blockdev.h"
#include "csum.h"
#include "error.h"
#include "internal.h"
#include "journal.h"
#include "lock.h"
#include "stats.h"
#include "trans.h"

#include <stdio.h>
#include <stdlib.h>
#include <sched.h>
#include <string.h>

#define TRANS_SLOTS 16

struct trans_slot {
	_Atomic int64_t n;
	char pad[CACHELINE - sizeof(int64_t)];
};

/* Freed metadata of the running transaction, per handle slot. */
struct revoke_list {
	pthread_mutex_t lock;
	uint64_t *start;       /* ranges [start[i], start[i] + count[i]) */
	uint32_t *count;
	size_t n, cap;
} __attribute__((aligned(CACHELINE)));

struct trans {
	struct trans_slot slot[TRANS_SLOTS];    /* first: own cache lines */
	struct revoke_list revoke[TRANS_SLOTS];
	_Atomic int blocked __attribute__((aligned(CACHELINE)));
	_Atomic int commit_wanted;
	pthread_mutex_t wait_lock;
	pthread_cond_t drained, unblocked;
	pthread_cond_t commit_done;            /* a commit ended (wait_lock) */
	bool committing;                       /* commit_lock held (wait_lock) */
	struct ulock commit_lock;
	_Atomic int err;                       /* first write-back error (negative) */
	_Atomic bool write_failed;             /* a commit's write or flush failed: no more commits */
	/* No journal: the transaction whose write-back failed, kept for one
	 * more try at unmount (trans_retry_lost()); commit_lock. */
	uint8_t *lost_copies;
	uint64_t *lost_blocks;
	size_t lost_n;
	_Atomic uint64_t commits;
	_Atomic uint64_t handle_copies;        /* frozen copies made by handles (tests) */
	/* A transaction's most buffers, min(cache / 4, the journal's max
	 * transaction); the commit thread is asked to commit beyond
	 * dirty_limit (3/4 of it), the thread ending a handle commits
	 * itself beyond dirty_hard (7/8), which leaves an eighth for what
	 * handles under way and the check_mask stride add. */
	size_t dirty_max, dirty_limit, dirty_hard;
	/* The commit's copy buffer, kept between commits (commit_lock):
	 * fresh memory for every commit cost a page fault per 4 KiB. */
	uint8_t *copybuf;
	size_t copycap;
	/* The mount's first write is done (super_begin_writing()): until
	 * then the image is untouched.  commit_lock; read by the unmount. */
	bool started;
	unsigned check_mask;                   /* look at the dirty count every mask+1 ends */
	_Atomic uint8_t *itb_written;          /* bit per inode-table block */
	/* Read-mostly, apart from the write-hot lines above (seed 004): */
	struct journal *journal __attribute__((aligned(CACHELINE)));
	const struct commit_host *host;        /* the file system's callbacks */
	uint32_t jbase;                        /* journal sequence of transaction 1 */
	_Atomic uint32_t running __attribute__((aligned(CACHELINE)));
	_Atomic uint32_t committed;
	/* The commit timer: */
	pthread_t timer;
	bool timer_started;                    /* set before handles run */
	bool timer_stop, timer_kicked;         /* wait_lock */
	pthread_cond_t timer_cond;
	unsigned timer_secs;
};

/* Seed 004: what handles write (their slot), what the committer writes
 * (blocked, ids) and what everyone only reads (journal, jbase) sit on
 * different cache lines. */
_Static_assert(offsetof(struct trans, blocked) % CACHELINE == 0, "blocked on its own line");
_Static_assert(offsetof(struct trans, journal) % CACHELINE == 0 &&
		       offsetof(struct trans, journal) > offsetof(struct trans, itb_written),
	       "journal pointer on a read-mostly line");
_Static_assert(offsetof(struct trans, running) % CACHELINE == 0 &&
		       offsetof(struct trans, running) >= offsetof(struct trans, jbase) + sizeof(uint32_t),
	       "transaction ids off the read-mostly line");
_Static_assert(sizeof(struct revoke_list) % CACHELINE == 0, "a revoke list per line");

static _Thread_local struct handle cur_handle;

int trans_init(struct uext4_fs *fs, const struct commit_host *host)
{
	struct trans *t = aligned_alloc(CACHELINE, sizeof(*t));
	size_t bits = (size_t)fs->groups_count * fs->itb_per_group;

	if (!t)
		return fs_err(ENOMEM, "out of memory for the transaction state");
	memset(t, 0, sizeof(*t));
	pthread_mutex_init(&t->wait_lock, NULL);
	pthread_cond_init(&t->drained, NULL);
	pthread_cond_init(&t->unblocked, NULL);
	pthread_cond_init(&t->timer_cond, NULL);
	pthread_cond_init(&t->commit_done, NULL);
	ulock_init(&t->commit_lock, RANK_HANDLE);
	for (unsigned i = 0; i < TRANS_SLOTS; i++)
		pthread_mutex_init(&t->revoke[i].lock, NULL);
	t->running = 1;
	t->host = host;
	/* Bulk mode (uext4_opts.bulk): commits go home unlogged. */
	t->journal = fs->bulk ? NULL : fs->journal;
	t->jbase = fs->journal ? journal_first_tid(fs->journal) : 1;
	/* Write back when a quarter of the cache is dirty, or when the
	 * transaction would outgrow the journal. */
	t->dirty_max = (size_t)(bcache_mem_limit(fs->bc) / fs->block_size / 4);
	if (t->journal && t->dirty_max > journal_max_transaction(t->journal))
		t->dirty_max = journal_max_transaction(t->journal);
	if (t->dirty_max < 32)
		t->dirty_max = 32;
	t->dirty_limit = t->dirty_max / 4 * 3;
	t->dirty_hard = t->dirty_max / 8 * 7;
	/* Summing the shards' dirty counts reads 64 cache lines: a thread
	 * looks every 32nd handle, or every one when the limit is small
	 * enough for those 32 to overshoot it. */
	t->check_mask = t->dirty_max >= 8192 ? 31 : t->dirty_max >= 2048 ? 3 : 0;
	t->itb_written = calloc(bits / 8 + 1, 1);
	if (!t->itb_written) {
		free(t);
		return fs_err(ENOMEM, "out of memory for the transaction state");
	}
	fs->trans = t;
	return 0;
}

void trans_destroy(struct uext4_fs *fs)
{
	struct trans *t = fs->trans;

	if (!t)
		return;
	trans_stop_timer(fs);
	pthread_mutex_destroy(&t->wait_lock);
	pthread_cond_destroy(&t->drained);
	pthread_cond_destroy(&t->unblocked);
	pthread_cond_destroy(&t->timer_cond);
	pthread_cond_destroy(&t->commit_done);
	ulock_destroy(&t->commit_lock);
	for (unsigned i = 0; i < TRANS_SLOTS; i++) {
		pthread_mutex_destroy(&t->revoke[i].lock);
		free(t->revoke[i].start);
		free(t->revoke[i].count);
	}
	free((void *)t->itb_written);
	free(t->copybuf);
	free(t->lost_copies);
	free(t->lost_blocks);
	free(t);
	fs->trans = NULL;
}

/* ------------------------------------------------------------- handles */

static void wait_unblocked(struct trans *t)
{
	lockstat_pthread_lock(&t->wait_lock, LOCKSTAT_TRANS);
	while (atomic_load(&t->blocked))
		pthread_cond_wait(&t->unblocked, &t->wait_lock);
	pthread_mutex_unlock(&t->wait_lock);
}

/* A handle held back by a commit waits; with statistics on, for how long. */
static void wait_unblocked_counted(struct uext4_fs *fs, struct trans *t)
{
	uint64_t t0;

	if (!stats_on(fs->stats)) {
		wait_unblocked(t);
		return;
	}
	t0 = lockstat_now_ns();
	wait_unblocked(t);
	stats_handle_waited(fs, lockstat_now_ns() - t0);
}

/* Leave the drain counter; wake a committer waiting for it to reach 0. */
static void slot_leave(struct trans *t, unsigned slot)
{
	if (atomic_fetch_sub(&t->slot[slot].n, 1) == 1 && atomic_load(&t->blocked)) {
		lockstat_pthread_lock(&t->wait_lock, LOCKSTAT_TRANS);
		pthread_cond_broadcast(&t->drained);
		pthread_mutex_unlock(&t->wait_lock);
	}
}

int handle_begin(struct uext4_fs *fs, struct handle **out)
{
	struct handle *h = &cur_handle;
	struct trans *t = fs->trans;
	unsigned slot;

	if (h->depth > 0) {
		if (h->fs != fs)
			return fs_err(EINVAL, "a handle of another mount is open on this thread");
		h->depth++;
		*out = h;
		return 0;
	}
	if (fs->read_only || !t)
		return fs_err(EROFS, "the file system is mounted read-only");
	if (atomic_load_explicit(&fs->aborted, memory_order_relaxed))
		return fs_errors_refuse(fs);
	if (atomic_load_explicit(&t->err, memory_order_relaxed))
		return fs_err(EIO, "an earlier write-back failed; the file system no longer "
			      "accepts changes (unmount and run e2fsck)");
	slot = thread_slot() % TRANS_SLOTS;
	for (;;) {
		/* Dekker pair with trans_commit(): both sides use seq_cst. */
		atomic_fetch_add(&t->slot[slot].n, 1);
		if (!atomic_load(&t->blocked))
			break;
		slot_leave(t, slot);
		wait_unblocked_counted(fs, t);
	}
	lockdep_enter(RANK_HANDLE, h);
	h->fs = fs;
	h->depth = 1;
	h->slot = slot;
	h->err = 0;
	/* Registered in the slot before the commit can close the running
	 * transaction, so this handle belongs to it. */
	h->tid = atomic_load(&t->running);
	*out = h;
	return 0;
}

static void kick_commit_thread(struct trans *t);
static void commit_begin(struct trans *t);
static void commit_end(struct trans *t);

/*
 * The transaction nears its most (dirty_max: a quarter of the cache, or
 * what the journal takes at once, as jbd2's max transaction): past 3/4
 * of it the commit thread commits, as jbd2's, so that this thread goes on
 * creating; only if the dirty set keeps growing to 7/8 meanwhile does
 * this thread commit itself (back pressure), so that one commit stays
 * within dirty_max (tests/journal_limit.sh).  Without a commit thread
 * (bulk), this thread commits at 7/8.
 */
static int check_dirty(struct uext4_fs *fs, int err)
{
	struct trans *t = fs->trans;
	size_t dirty = bcache_dirty_count(fs->bc);

	if (dirty <= t->dirty_limit)
		return err;
	if (!t->timer_started && dirty <= t->dirty_hard)
		return err;
	if (t->timer_started && dirty <= t->dirty_hard) {
		if (!atomic_exchange(&t->commit_wanted, 1))
			kick_commit_thread(t);
		return err;
	}
	int cerr = trans_commit(fs);

	return err ? err : cerr;
}

/* End h; true if that closed it (not a nested end), with its error in *err. */
static bool leave_handle(struct handle *h, int *err)
{
	*err = 0;
	if (--h->depth > 0)
		return false;
	*err = h->err;
	lockdep_leave(RANK_HANDLE, h);
	slot_leave(h->fs->trans, h->slot);
	h->err = 0;
	return true;
}

int trans_throttle(struct uext4_fs *fs, int err)
{
	static _Thread_local unsigned ends;

	/* Never inside a handle: the commit would wait for it. */
	if (cur_handle.depth > 0 || !fs->trans)
		return err;
	if ((++ends & fs->trans->check_mask) == 0)
		err = check_dirty(fs, err);
	return err;
}

int handle_end(struct handle *h)
{
	struct uext4_fs *fs = h->fs;
	int err;

	if (!leave_handle(h, &err))
		return 0;
	return trans_throttle(fs, err);
}

int handle_end_unthrottled(struct handle *h)
{
	int err;

	leave_handle(h, &err);
	return err;
}

/* ------------------------------------------------------------- frozen COW */

static void note_access(struct handle *h, struct buf *b)
{
#ifdef UEXT4_LOCKDEP
	atomic_store_explicit(&b->access_tid, h->tid, memory_order_relaxed);
#else
	(void)h;
	(void)b;
#endif
}

/*
 * Before the first change of b in this handle.  If the closing commit has
 * taken b and not copied it yet, copy it for the commit first (jbd2's
 * frozen buffer), so that the commit writes b as it was at the close.
 */
int handle_write_access(struct handle *h, struct buf *b)
{
	uint32_t st = atomic_load_explicit(&b->state, memory_order_acquire);

	if (__builtin_expect((st & (BUF_FROZEN | BUF_COPYING)) != 0, 0)) {
		if (buf_claim_copy(b)) {
			buf_copy_frozen(b, h->fs->block_size);
			atomic_fetch_add_explicit(&h->fs->trans->handle_copies, 1,
						  memory_order_relaxed);
		} else {
			buf_wait_copied(b);
		}
	}
	note_access(h, b);
	return 0;
}

uint64_t trans_handle_copies(struct uext4_fs *fs)
{
	return fs->trans ? atomic_load(&fs->trans->handle_copies) : 0;
}

/* A new block (bget_new()): nobody else can reach it; bget_new() already
 * saw to a copy the commit might still need. */
int handle_create_access(struct handle *h, struct buf *b)
{
	buf_unfreeze(b, h->fs->block_size);
	note_access(h, b);
	return 0;
}

#ifdef UEXT4_LOCKDEP
/* A change without handle_write_access() first corrupts the log silently
 * whenever a commit is copying: catch it in every debug run instead. */
static void check_write_access(struct handle *h, struct buf *b)
{
	uint32_t st = atomic_load_explicit(&b->state, memory_order_acquire);
	uint32_t tid = atomic_load_explicit(&b->access_tid, memory_order_relaxed);

	if ((st & BUF_FROZEN) || tid != h->tid) {
		fprintf(stderr,
			"uext4 lockdep: block %llu dirtied in transaction %u without "
			"handle_write_access() (last access in transaction %u%s)\n",
			(unsigned long long)b->blocknr, h->tid, tid,
			(st & BUF_FROZEN) ? "; still frozen for the commit" : "");
		abort();
	}
}
#endif

void handle_dirty(struct handle *h, struct buf *b, enum csum_kind kind, uint64_t owner,
		  uint32_t gen)
{
#ifdef UEXT4_LOCKDEP
	check_write_access(h, b);
#endif
	/* A hostile image can map one block both as a directory leaf and as
	 * something else (a bitmap, an inode table, an xattr block): a change
	 * made as the other thing voids what the directory code knows of the
	 * block (checked entries, the leaf hint, checked index order), so the
	 * next directory walk checks it again instead of following rec_lens
	 * and offsets it no longer has reason to trust. */
	uint32_t voided = kind == CSUM_DIR_LEAF ? BUF_DX_ORDERED
			: kind == CSUM_DX_NODE ? BUF_DIRENTS_OK | BUF_LEAF_HINT
			: BUF_DIRENTS_OK | BUF_LEAF_HINT | BUF_DX_ORDERED;

	if (atomic_load_explicit(&b->state, memory_order_relaxed) & voided)
		atomic_fetch_and_explicit(&b->state, ~voided, memory_order_release);
	atomic_store_explicit(&b->csum_kind, (uint8_t)kind, memory_order_relaxed);
	atomic_store_explicit(&b->owner, owner, memory_order_relaxed);
	atomic_store_explicit(&b->owner_gen, gen, memory_order_relaxed);
	bcache_mark_dirty(h->fs->bc, b);
}

/* Remember freed journaled blocks: the commit writes revoke records. */
static void revoke_add(struct trans *t, unsigned slot, uint64_t blocknr, uint32_t count)
{
	struct revoke_list *r = &t->revoke[slot];

	lockstat_pthread_lock(&r->lock, LOCKSTAT_REVOKE);
	if (r->n && r->start[r->n - 1] + r->count[r->n - 1] == blocknr) {
		r->count[r->n - 1] += count;
	} else {
		if (r->n == r->cap) {
			size_t cap = r->cap ? r->cap * 2 : 64;
			uint64_t *s = realloc(r->start, cap * sizeof(*s));
			uint32_t *c = s ? realloc(r->count, cap * sizeof(*c)) : NULL;

			if (s)
				r->start = s;
			if (c)
				r->count = c;
			if (!s || !c) {
				/* Without the record a replay could write an old
				 * copy over the block's next owner: stop writing. */
				int expected = 0;

				atomic_compare_exchange_strong(&t->err, &expected, -ENOMEM);
				pthread_mutex_unlock(&r->lock);
				return;
			}
			r->cap = cap;
		}
		r->start[r->n] = blocknr;
		r->count[r->n] = count;
		r->n++;
	}
	pthread_mutex_unlock(&r->lock);
}

void handle_forget(struct handle *h, uint64_t blocknr, uint32_t count, bool metadata)
{
	struct trans *t = h->fs->trans;

	/* No wait for a commit still writing an old copy home: the blocks
	 * stay busy (unallocatable) until this transaction commits, which
	 * is after that write. */
	bcache_forget(h->fs->bc, blocknr, count);
	if (metadata && t->journal)
		revoke_add(t, h->slot, blocknr, count);
}

/* ------------------------------------------------------------- commit */

/* Has the commit written inode-table block `index` of group's table since
 * mount?  Until then a block beyond the group's never_used_from holds only
 * new inodes, so inode.c builds it zeroed instead of reading it. */
bool trans_itable_block_written(struct uext4_fs *fs, uint32_t group, uint32_t index)
{
	size_t bit = (size_t)group * fs->itb_per_group + index;

	return atomic_load_explicit(&fs->trans->itb_written[bit / 8], memory_order_acquire) &
	       (1u << (bit % 8));
}

static void mark_itable_written(struct uext4_fs *fs, struct buf *b)
{
	/* owner = group, owner_gen = block index in its table (inode.c). */
	size_t bit = (size_t)b->owner * fs->itb_per_group + b->owner_gen;

	if (b->owner < fs->groups_count && b->owner_gen < fs->itb_per_group)
		atomic_fetch_or_explicit(&fs->trans->itb_written[bit / 8], (uint8_t)(1u << (bit % 8)),
					 memory_order_release);
}

static void drain_handles(struct trans *t)
{
	atomic_store(&t->blocked, 1);
	lockstat_pthread_lock(&t->wait_lock, LOCKSTAT_TRANS);
	for (;;) {
		int64_t n = 0;

		for (unsigned i = 0; i < TRANS_SLOTS; i++)
			n += atomic_load(&t->slot[i].n);
		if (n == 0)
			break;
		pthread_cond_wait(&t->drained, &t->wait_lock);
	}
	pthread_mutex_unlock(&t->wait_lock);
}

static void release_handles(struct trans *t)
{
	lockstat_pthread_lock(&t->wait_lock, LOCKSTAT_TRANS);
	atomic_store(&t->blocked, 0);
	pthread_cond_broadcast(&t->unblocked);
	pthread_mutex_unlock(&t->wait_lock);
}

/* Bitmap checksums go into the group, which then needs its descriptor. */
static void fold_bitmap_csum(struct uext4_fs *fs, struct buf *b)
{
	uint32_t g = (uint32_t)b->owner;

	if (g >= fs->groups_count)
		return;
	if (b->csum_kind == CSUM_BLOCK_BITMAP)
		fs->groups[g].block_bitmap_csum = csum_block_bitmap(fs, b->data);
	else
		fs->groups[g].inode_bitmap_csum = csum_inode_bitmap(fs, b->data);
	fs->trans->host->group_set_dirty(fs, g);
}

/* Descriptors of dirty groups and the superblock into their buffers. */
static int write_descriptors(struct uext4_fs *fs)
{
	_Atomic uint64_t *bits = fs->hot->group_dirty;
	uint32_t words = (fs->groups_count + 63) / 64;
	int err;

	for (uint32_t w = 0; w < words; w++) {
		uint64_t m = atomic_exchange(&bits[w], 0);

		while (m) {
			uint32_t g = w * 64 + (uint32_t)__builtin_ctzll(m);

			m &= m - 1;
			if ((err = fs->trans->host->write_group_desc(fs, g)))
				return err;
		}
	}
	if (fs->trans->host->write_quota && (err = fs->trans->host->write_quota(fs)))
		return err;
	return fs->trans->host->write_super(fs);
}

static int cmp_blocknr(const void *a, const void *b)
{
	const struct buf *x = *(struct buf *const *)a, *y = *(struct buf *const *)b;

	return x->blocknr < y->blocknr ? -1 : x->blocknr > y->blocknr;
}

/* The commit's copy buffer, grown as needed and reused. */
static uint8_t *copy_buffer(struct trans *t, size_t bytes)
{
	if (bytes > t->copycap) {
		size_t cap = MAX(bytes, t->copycap * 2);
		uint8_t *p = realloc(t->copybuf, cap);

		if (!p)
			return NULL;
		t->copybuf = p;
		t->copycap = cap;
	}
	return t->copybuf ? t->copybuf : copy_buffer(t, 1);
}

/*
 * A frozen block whose checksum sits inside it (csum_in_block()): what
 * the checksum needs, as the block was at the close (a handle may change
 * the buffer's kind and owner as soon as handles run again).
 */
struct copy_sum {
	size_t index;           /* into the commit's copies and blocks */
	uint64_t owner;
	uint32_t gen;
	uint8_t kind;
};

struct copy_sums {
	struct copy_sum *v;
	size_t n;
};

/* Handles drained: freeze all[0..n) into slots of copies, in order, and
 * note the blocks whose checksum is to be set on their copy. */
static void freeze_all(struct uext4_fs *fs, struct buf **all, size_t n, uint8_t *copies,
		       uint64_t *blocks, struct copy_sums *sums)
{
	for (size_t i = 0; i < n; i++) {
		struct buf *b = all[i];
		uint8_t kind = atomic_load_explicit(&b->csum_kind, memory_order_relaxed);

		/* Frozen, not copied: copy_frozen_all() or the block's next
		 * writer copies it, with handles running. */
		b->frozen = copies + i * fs->block_size;
		atomic_fetch_or_explicit(&b->state, BUF_FROZEN, memory_order_release);
		blocks[i] = b->blocknr;
		if (kind == CSUM_INODE_TABLE)
			mark_itable_written(fs, b);
		if (csum_in_block(fs, kind))
			sums->v[sums->n++] = (struct copy_sum){
				.index = i, .kind = kind,
				.owner = atomic_load_explicit(&b->owner, memory_order_relaxed),
				.gen = atomic_load_explicit(&b->owner_gen, memory_order_relaxed)};
	}
}

/*
 * Take the dirty buffers, fold the bitmaps' checksums into their groups,
 * freeze them (their copies are made once handles run again; the other
 * checksums are set on the copies then, by set_copy_sums(), so that no
 * handle waits for the crc32c of every directory block).  The buffers
 * stay referenced (*held) until their copies are on disk: evicted earlier,
 * a block would be read back from disk older than the copy being written.
 */
static int snapshot_dirty(struct uext4_fs *fs, uint8_t **copies, uint64_t **blocks, size_t *n,
			  struct buf ***held, struct copy_sums *sums)
{
	struct buf **v, **v2;
	size_t n1, n2, i;
	int err;

	n1 = bcache_take_dirty(fs->bc, &v);
	if (n1 == (size_t)-1)
		return fs_err(ENOMEM, "commit: out of memory");
	for (i = 0; i < n1; i++)
		if (v[i]->csum_kind == CSUM_BLOCK_BITMAP || v[i]->csum_kind == CSUM_INODE_BITMAP)
			fold_bitmap_csum(fs, v[i]);
	err = 0;
	if (n1 || atomic_load(&fs->hot->sb_dirty))
		err = write_descriptors(fs);
	n2 = bcache_take_dirty(fs->bc, &v2);
	if (n2 == (size_t)-1) {
		n2 = 0;
		v2 = NULL;
		err = err ? err : fs_err(ENOMEM, "commit: out of memory");
	}
	*n = n1 + n2;
	*copies = copy_buffer(fs->trans, *n * fs->block_size);
	*blocks = malloc(*n * sizeof(uint64_t) + 1);
	struct buf **all = malloc(*n * sizeof(*all) + 1);
	sums->v = malloc(*n * sizeof(*sums->v) + 1);
	sums->n = 0;
	if (!*copies || !*blocks || !all || !sums->v) {
		err = err ? err : fs_err(ENOMEM, "commit: out of memory for %zu blocks", *n);
		for (i = 0; i < n1; i++) {
			bcache_mark_dirty(fs->bc, v[i]);
			brelse(fs->bc, v[i]);
		}
		for (i = 0; i < n2; i++) {
			bcache_mark_dirty(fs->bc, v2[i]);
			brelse(fs->bc, v2[i]);
		}
		free(all);
		free(v);
		free(v2);
		free(sums->v);
		sums->v = NULL;
		*n = 0;
		return err;
	}
	memcpy(all, v, n1 * sizeof(*all));
	if (n2)
		memcpy(all + n1, v2, n2 * sizeof(*all));
	qsort(all, *n, sizeof(*all), cmp_blocknr);
	/* A block dirtied again by write_descriptors() came in both takes. */
	size_t kept = 0;
	for (i = 0; i < *n; i++) {
		if (kept && all[kept - 1] == all[i])
			brelse(fs->bc, all[i]);
		else
			all[kept++] = all[i];
	}
	*n = kept;
	freeze_all(fs, all, *n, *copies, *blocks, sums);
	*held = all;
	free(v);
	free(v2);
	return err;
}

/*
 * Handles run again: copy every frozen buffer no writer has copied yet,
 * and wait for those a writer is copying, so that every copy holds its
 * block as it was at the close of the transaction.
 */
static void copy_frozen_all(struct uext4_fs *fs, struct buf **held, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (buf_claim_copy(held[i]))
			buf_copy_frozen(held[i], fs->block_size);
		else
			buf_wait_copied(held[i]);
	}
}

/*
 * Every copy is made (copy_frozen_all()): set the checksums that sit in
 * the blocks, on the copies, which are what the journal and the home
 * writes take; nothing reads the checksum field of a live buffer (a block
 * read back from disk has the copy's).  Handles run meanwhile.
 */
static void set_copy_sums(struct uext4_fs *fs, uint8_t *copies, const uint64_t *blocks,
			  const struct copy_sums *sums)
{
	for (size_t i = 0; i < sums->n; i++) {
		const struct copy_sum *c = &sums->v[i];

		csum_set_block(fs, copies + c->index * fs->block_size, blocks[c->index], c->kind,
			       c->owner, c->gen);
	}
}

/* Write sorted copies, one device write per run of consecutive blocks. */
static int write_copies(struct uext4_fs *fs, const uint8_t *copies, const uint64_t *blocks,
			size_t n)
{
	size_t i = 0;

	while (i < n) {
		size_t j = i + 1;
		int err;

		while (j < n && blocks[j] == blocks[j - 1] + 1)
			j++;
		err = bdev_write(fs->dev, copies + i * fs->block_size, (j - i) * fs->block_size,
				 blocks[i] << fs->log_block_size);
		if (err)
			return err;
		i = j;
	}
	return 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/*
 * The closed transaction's revoke records (handles drained): every freed
 * journaled block, sorted, without duplicates.  journal_commit() leaves
 * out the blocks the transaction logs itself.
 */
static int collect_revokes(struct trans *t, uint64_t **out, size_t *nout)
{
	size_t total = 0, n = 0;
	uint64_t *v;

	*out = NULL;
	*nout = 0;
	for (unsigned i = 0; i < TRANS_SLOTS; i++) {
		lockstat_pthread_lock(&t->revoke[i].lock, LOCKSTAT_REVOKE);
		for (size_t j = 0; j < t->revoke[i].n; j++)
			total += t->revoke[i].count[j];
		pthread_mutex_unlock(&t->revoke[i].lock);
	}
	if (!total)
		return 0;
	if (!(v = malloc(total * sizeof(*v))))
		return fs_err(ENOMEM, "commit: out of memory for %zu revoke records", total);
	for (unsigned i = 0; i < TRANS_SLOTS; i++) {
		struct revoke_list *r = &t->revoke[i];

		lockstat_pthread_lock(&r->lock, LOCKSTAT_REVOKE);
		for (size_t j = 0; j < r->n; j++)
			for (uint32_t k = 0; k < r->count[j]; k++)
				v[n++] = r->start[j] + k;
		r->n = 0;
		pthread_mutex_unlock(&r->lock);
	}
	qsort(v, n, sizeof(*v), cmp_u64);
	total = 0;
	for (size_t i = 0; i < n; i++)
		if (i == 0 || v[i] != v[i - 1])
			v[total++] = v[i];
	*out = v;
	*nout = total;
	return 0;
}

/*
 * Make the closed transaction durable and write it home.  Journal: log it
 * (durable on return), then its freed blocks may be reused, then the home
 * writes (no flush: the next commit's flush or the journal's tail move
 * covers them).  No journal: home writes and a flush.
 */
static int write_out(struct uext4_fs *fs, uint32_t tid, const uint8_t *copies,
		     const uint64_t *blocks, size_t n, const uint64_t *revoked, size_t nrevoked)
{
	struct trans *t = fs->trans;
	int err = 0;

	if (t->journal) {
		if (n || nrevoked)
			err = journal_commit(t->journal, t->jbase + tid - 1, blocks, copies, n,
					     revoked, nrevoked);
		if (!err)
			err = n ? write_copies(fs, copies, blocks, n) : 0;
	} else {
		err = n ? write_copies(fs, copies, blocks, n) : 0;
		if (!err)
			err = bdev_flush(fs->dev);
	}
	return err;
}

/*
 * The mount's deferred first write, before the first commit that has
 * anything to write (commit_lock held, handles drained): needs_recovery
 * on disk and flushed before any journal block, commit block or home
 * write of this mount, so a mount that changes nothing writes nothing.
 * Not in handle_begin(): a handle may change nothing (a refused
 * operation), and the commit is where the first byte is written anyway.
 */
static int start_if_dirty(struct uext4_fs *fs)
{
	struct trans *t = fs->trans;
	int err;

	if (t->started ||
	    (bcache_dirty_count(fs->bc) == 0 && !atomic_load(&fs->hot->sb_dirty)))
		return 0;
	if ((err = t->host->begin_writing(fs)))
		return err;
	t->started = true;
	return 0;
}

int trans_begin_writing(struct uext4_fs *fs)
{
	struct trans *t = fs->trans;
	int err = 0;

	if (!t)
		return 0;
	commit_begin(t);
	if (!t->started && (err = t->host->begin_writing(fs)) == 0)
		t->started = true;
	commit_end(t);
	return err;
}

bool trans_writing_started(struct uext4_fs *fs)
{
	struct trans *t = fs->trans;
	bool started;

	if (!t)
		return false;
	ulock_lock(&t->commit_lock);
	started = t->started;
	ulock_unlock(&t->commit_lock);
	return started;
}

/* The kind of metadata a dirty buffer holds, for the write counters. */
static enum uext4_meta_kind written_kind(const struct buf *b)
{
	switch (atomic_load_explicit(&b->csum_kind, memory_order_relaxed)) {
	case CSUM_DIR_LEAF: case CSUM_DX_NODE: return UEXT4_META_DIR;
	case CSUM_EXTENT: return UEXT4_META_EXTENT;
	case CSUM_XATTR: return UEXT4_META_XATTR;
	case CSUM_BLOCK_BITMAP: case CSUM_INODE_BITMAP: return UEXT4_META_BITMAP;
	case CSUM_INODE_TABLE: return UEXT4_META_INODE_TABLE;
	case CSUM_GROUP_DESC: return UEXT4_META_GROUP_DESC;
	case CSUM_SUPER: return UEXT4_META_SUPER;
	case CSUM_ORPHAN: return UEXT4_META_OTHER;
	default: return (enum uext4_meta_kind)b->kind; /* as it was read */
	}
}

/* The blocks a commit takes, by kind: while handles are drained, when
 * nobody changes a dirty buffer's kind (bget_new() is called in handles). */
static void kinds_of(struct buf **held, size_t n, uint64_t *by_kind)
{
	for (size_t i = 0; i < n; i++)
		by_kind[written_kind(held[i]) % UEXT4_META_NKINDS]++;
}

/* The commit wrote them home: count them, once per kind. */
static void count_home_writes(struct uext4_fs *fs, const uint64_t *by_kind)
{
	for (unsigned k = 0; k < UEXT4_META_NKINDS; k++)
		if (by_kind[k])
			bcache_count_write(fs->bc, (enum uext4_meta_kind)k, by_kind[k]);
}

/*
 * A write or flush of the commit failed (err negative, its message set):
 * the journal is aborted (as jbd2 does on a log, commit-block or
 * checkpoint write error) or, without one, the error handled as errors=
 * says; either way no later commit writes anything (t->write_failed),
 * handles get EROFS or EIO, and the unmount leaves the image as the last
 * good commit left it, with the error recorded.  -EIO (or -ENOMEM).
 */
static int write_failed(struct uext4_fs *fs, int err)
{
	struct trans *t = fs->trans;
	int expected = 0;

	atomic_store(&t->write_failed, true);
	atomic_compare_exchange_strong(&t->err, &expected, err == -ENOMEM ? err : -EIO);
	return fs_write_error(fs, err, t->journal != NULL, "commit");
}

/* No journal: keep the failed transaction's copies (they are the copy
 * buffer: the next commit, if any, gets a new one) and blocks. */
static void keep_lost(struct trans *t, uint8_t *copies, uint64_t *blocks, size_t n)
{
	if (t->lost_n || copies != t->copybuf) {
		free(blocks);
		return;
	}
	t->lost_copies = copies;
	t->lost_blocks = blocks;
	t->lost_n = n;
	t->copybuf = NULL;
	t->copycap = 0;
}

/*
 * Unmount without a journal after a failed write-back: write the lost
 * transaction home once more, as a whole, and flush.  A transient device
 * error then leaves the image as that transaction made it (nothing later
 * was written: write_failed stopped the commits) instead of half of it,
 * which only e2fsck could repair.  0: it is home.
 */
int trans_retry_lost(struct uext4_fs *fs)
{
	struct trans *t = fs->trans;
	int err;

	if (!t || t->journal || !t->lost_n)
		return -EIO;
	ulock_lock(&t->commit_lock);
	err = write_copies(fs, t->lost_copies, t->lost_blocks, t->lost_n);
	if (!err)
		err = bdev_flush(fs->dev);
	if (!err) {
		fs_errors_committed(fs);    /* its superblock is the image now */
		t->lost_n = 0;
	}
	ulock_unlock(&t->commit_lock);
	return err;
}

/* One commit; commit_lock held, no handle open on this thread. */
static int commit_locked(struct uext4_fs *fs)
{
	struct trans *t = fs->trans;
	uint8_t *copies = NULL;
	uint64_t *blocks = NULL, *revoked = NULL;
	struct buf **held = NULL;
	struct copy_sums sums = {0};
	size_t n = 0, nrevoked = 0;
	uint32_t tid, eseq;
	int err, rerr, werr;
	bool counting = stats_on(fs->stats);
	uint64_t t_start = counting ? lockstat_now_ns() : 0, t_released = 0;
	uint64_t by_kind[UEXT4_META_NKINDS] = {0};

	drain_handles(t);
	if (atomic_load(&fs->aborted)) {
		/* An error stopped writing (errors=remount-ro/panic): the running
		 * transaction may hold a half-done operation, so it is never
		 * committed, as the kernel's aborted journal. */
		release_handles(t);
		return fs_errors_refuse(fs);
	}
	if (atomic_load(&t->write_failed)) {
		/* No journal, errors=continue: a transaction's write-back was
		 * lost; writing later ones over it would mark a broken image
		 * as sound. */
		release_handles(t);
		return fs_err(EIO, "an earlier metadata write-back failed; nothing more is "
			      "written (unmount and run e2fsck)");
	}
	if ((err = start_if_dirty(fs))) {
		release_handles(t);
		return write_failed(fs, err);
	}
	eseq = fs_errors_seq(fs);
	tid = atomic_load(&t->running);
	err = snapshot_dirty(fs, &copies, &blocks, &n, &held, &sums);
	kinds_of(held, n, by_kind);
	rerr = collect_revokes(t, &revoked, &nrevoked);
	err = err ? err : rerr;
	atomic_store(&t->running, tid + 1);
	atomic_store(&t->commit_wanted, 0);
	release_handles(t);
	if (counting)
		t_released = lockstat_now_ns();
	copy_frozen_all(fs, held, n);
	set_copy_sums(fs, copies, blocks, &sums);
	free(sums.v);
	werr = err ? err : write_out(fs, tid, copies, blocks, n, revoked, nrevoked);
	if (werr && !err) {
		err = write_failed(fs, werr);
		if (!t->journal && n) {
			keep_lost(t, copies, blocks, n);
			blocks = NULL;
		}
	} else if (werr && n) {
		/* The snapshot failed (a read, memory) after taking dirty
		 * buffers: their changes are in no commit now, so none may
		 * follow (a later one would build on them). */
		err = write_failed(fs, werr);
	} else if (werr) {
		int expected = 0;

		atomic_compare_exchange_strong(&t->err, &expected, werr);
	} else {
		fs_errors_committed(fs);
		atomic_store(&t->committed, tid);
		count_home_writes(fs, by_kind);
		if (counting)
			stats_commit(fs, n, t_start, t_released, lockstat_now_ns());
		t->host->release_busy(fs, tid);
		/* An error recorded since the snapshot wrote the superblock
		 * itself, which the home write above may have overwritten with
		 * the snapshot's copy: write it again. */
		if (fs_errors_seq(fs) != eseq)
			err = fs_errors_write_super(fs, 0, 0);
	}
	bcache_note_write_done(fs->bc);
	for (size_t i = 0; i < n; i++)
		brelse(fs->bc, held[i]); /* now they may be evicted */
	free(held);
	atomic_fetch_add(&t->commits, 1);
	free(blocks);
	free(revoked);
	return err;
}

/*
 * One committer at a time.  `committing` (under wait_lock) is the real
 * turn-taking, and commit_done is broadcast at the end of each commit:
 * an fsync waits there until its transaction is committed, by anyone,
 * instead of queueing on a mutex, which is not fair (an fsync whose
 * transaction was long committed could wait behind commit after commit
 * of other threads).  commit_lock is then uncontended between committers;
 * it also keeps readers of fs->sb (trans_lock_super()) out of a commit.
 */
static void commit_begin(struct trans *t)
{
	lockstat_pthread_lock(&t->wait_lock, LOCKSTAT_TRANS);
	while (t->committing)
		pthread_cond_wait(&t->commit_done, &t->wait_lock);
	t->committing = true;
	pthread_mutex_unlock(&t->wait_lock);
	ulock_lock(&t->commit_lock);
}

static void commit_end(struct trans *t)
{
	ulock_unlock(&t->commit_lock);
	lockstat_pthread_lock(&t->wait_lock, LOCKSTAT_TRANS);
	t->committing = false;
	pthread_cond_broadcast(&t->commit_done);
	pthread_mutex_unlock(&t->wait_lock);
}

int trans_commit(struct uext4_fs *fs)
{
	struct trans *t = fs->trans;
	int err;

	if (!t)
		return 0;
	if (cur_handle.depth > 0)
		return fs_err(EDEADLK, "commit requested inside a handle");
	commit_begin(t);
	err = commit_locked(fs);
	commit_end(t);
	return err;
}

/* Transaction a is at or before b (numbers wrap as the journal's do). */
static bool tid_le(uint32_t a, uint32_t b)
{
	return (int32_t)(a - b) <= 0;
}

/*
 * Group commit: while another thread commits, wait for that commit to end
 * (it may well include tid) rather than queue on the commit lock, which
 * is not fair: an fsync whose transaction is long committed could wait
 * behind commit after commit of other threads.
 */
int trans_commit_tid(struct uext4_fs *fs, uint32_t tid)
{
	struct trans *t = fs->trans;
	int err = 0;

	if (!t || !tid)
		return 0;
	if (cur_handle.depth > 0)
		return fs_err(EDEADLK, "fsync inside a handle");
	/* The transaction's file data was written inside its handles, so it
	 * is durable once the transaction is. */
	lockstat_pthread_lock(&t->wait_lock, LOCKSTAT_TRANS);
	while (!err && !tid_le(tid, atomic_load(&t->committed)) && !atomic_load(&t->err)) {
		if (t->committing) {
			pthread_cond_wait(&t->commit_done, &t->wait_lock);
			continue;
		}
		t->committing = true;
		pthread_mutex_unlock(&t->wait_lock);
		ulock_lock(&t->commit_lock);
		err = commit_locked(fs); /* also commits every fsync waiting */
		commit_end(t);
		lockstat_pthread_lock(&t->wait_lock, LOCKSTAT_TRANS);
	}
	pthread_mutex_unlock(&t->wait_lock);
	return err ? err : atomic_load(&t->err);
}

bool trans_retry_after_enospc(struct uext4_fs *fs, int err)
{
	return err == -ENOSPC && fs->trans && fs->trans->host->has_busy(fs) && trans_commit(fs) == 0;
}

/* ------------------------------------------------------------- timer */

static bool has_work(struct uext4_fs *fs)
{
	return bcache_dirty_count(fs->bc) > 0 || atomic_load(&fs->hot->sb_dirty) ||
	       fs->trans->host->has_busy(fs);
}

/* The commit thread: a commit every timer_secs while there is work. */
static void *timer_main(void *arg)
{
	struct uext4_fs *fs = arg;
	struct trans *t = fs->trans;

	lockstat_pthread_lock(&t->wait_lock, LOCKSTAT_TRANS);
	while (!t->timer_stop) {
		struct timespec until;

		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += t->timer_secs;
		while (!t->timer_stop && !t->timer_kicked &&
		       pthread_cond_timedwait(&t->timer_cond, &t->wait_lock, &until) == 0)
			;
		if (t->timer_stop)
			break;
		t->timer_kicked = false;
		pthread_mutex_unlock(&t->wait_lock);
		if (has_work(fs))
			trans_commit(fs); /* errors stick in t->err for the next handle */
		lockstat_pthread_lock(&t->wait_lock, LOCKSTAT_TRANS);
	}
	pthread_mutex_unlock(&t->wait_lock);
	return NULL;
}

/* Ask the commit thread for a commit now (handles over the dirty limit). */
static void kick_commit_thread(struct trans *t)
{
	lockstat_pthread_lock(&t->wait_lock, LOCKSTAT_TRANS);
	t->timer_kicked = true;
	pthread_cond_broadcast(&t->timer_cond);
	pthread_mutex_unlock(&t->wait_lock);
}

int trans_start_timer(struct uext4_fs *fs, unsigned secs)
{
	struct trans *t = fs->trans;
	int err;

	t->timer_secs = secs ? secs : 5;
	if ((err = pthread_create(&t->timer, NULL, timer_main, fs)))
		return fs_err(err, "cannot start the commit thread: %s", strerror(err));
	t->timer_started = true;
	return 0;
}

void trans_stop_timer(struct uext4_fs *fs)
{
	struct trans *t = fs->trans;

	if (!t || !t->timer_started)
		return;
	lockstat_pthread_lock(&t->wait_lock, LOCKSTAT_TRANS);
	t->timer_stop = true;
	pthread_cond_broadcast(&t->timer_cond);
	pthread_mutex_unlock(&t->wait_lock);
	pthread_join(t->timer, NULL);
	t->timer_started = false;
}

int trans_write_error(struct uext4_fs *fs)
{
	return fs->trans ? atomic_load(&fs->trans->err) : 0;
}

bool trans_write_failed(struct uext4_fs *fs)
{
	return fs->trans && atomic_load(&fs->trans->write_failed);
}

/* Readers of fs->sb (which the commit rewrites) hold this around the copy. */
void trans_lock_super(struct uext4_fs *fs)
{
	if (fs->trans)
		ulock_lock(&fs->trans->commit_lock);
}

void trans_unlock_super(struct uext4_fs *fs)
{
	if (fs->trans)
		ulock_unlock(&fs->trans->commit_lock);
}
