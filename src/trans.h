/*
 * trans.h - handles and commits (trans.c); struct handle is in internal.h.
 */
#ifndef UEXT4_TRANS_H
#define UEXT4_TRANS_H

#include "internal.h"

/* ---------------------------------------------------------------- trans.c
 * Transactions.  Every metadata change happens inside a handle:
 *
 *   handle_begin(fs, &h)
 *   handle_write_access(h, b)      before changing a cached block
 *   handle_create_access(h, b)     for a new block from bget_new()
 *   ...change b->data...
 *   handle_dirty(h, b, kind, owner, gen)
 *   handle_end(h)
 *
 * A commit (sync, unmount, memory pressure) waits until no handle is open,
 * takes the dirty buffers (BUF_FROZEN), sets their checksums, lets handles
 * run again, copies them and writes the copies.  handle_write_access()
 * copies a still-frozen buffer itself before the caller changes it, so
 * EVERY change of a cached block must come after one (debug builds check
 * it in handle_dirty()).  With a journal the commit is a JBD2 one (see
 * trans.c), with no change to callers.  Rules: take inode locks BEFORE
 * handle_begin, never
 * inside a handle (lockdep checks it: a handle has RANK_HANDLE); nested
 * begin/end on one thread just count; a handle never waits for I/O that a
 * commit needs.
 */
struct trans;
/*
 * What a commit needs from the file system above it, as the journal's
 * struct journal_host: the mount fills it in (super_commit_host), so
 * trans.c calls nothing above the transactions layer.
 */
struct commit_host {
	/* The mount's first write (needs_recovery set, flushed). */
	int (*begin_writing)(struct uext4_fs *fs);
	/* Group g's descriptor changed (a bitmap checksum folded in). */
	void (*group_set_dirty)(struct uext4_fs *fs, uint32_t g);
	/* Group g's descriptor, then the superblock, into their buffers. */
	int (*write_group_desc)(struct uext4_fs *fs, uint32_t g);
	int (*write_super)(struct uext4_fs *fs);
	/* Usage counters into their quota blocks (quota.c), with handles
	 * drained: only existing entries rewritten.  NULL: no quotas. */
	int (*write_quota)(struct uext4_fs *fs);
	/* Transaction tid is on disk: the blocks it freed may be reused. */
	void (*release_busy)(struct uext4_fs *fs, uint32_t tid);
	/* Freed blocks wait for a commit (an ENOSPC a commit may cure). */
	bool (*has_busy)(struct uext4_fs *fs);
};
int trans_init(struct uext4_fs *fs, const struct commit_host *host);
void trans_destroy(struct uext4_fs *fs);
/* Join the running transaction.  No credits, unlike jbd2_journal_start():
 * nothing reserves room per handle; a transaction stays within its most
 * (dirty_max) because handle_end() commits past 7/8 of it, which leaves
 * an eighth for the handles under way (trans.c, check_dirty()). */
int handle_begin(struct uext4_fs *fs, struct handle **out);
/* Ends the handle; returns its recorded error (or 0).  Near the
 * transaction's most it may commit first (trans_throttle()). */
int handle_end(struct handle *h);
/* As handle_end() without that commit: for a caller holding a directory's
 * lock, which a commit made by this thread (tens of milliseconds) would
 * keep from every thread working in that directory.  It calls
 * trans_throttle() once its locks are dropped. */
int handle_end_unthrottled(struct handle *h);
/* handle_end()'s back-pressure: every few calls, a look at the dirty
 * count, and a commit by this thread if it is near the most; nothing
 * inside a handle.  err, or the commit's error. */
int trans_throttle(struct uext4_fs *fs, int err);
int handle_write_access(struct handle *h, struct buf *b);
int handle_create_access(struct handle *h, struct buf *b);
void handle_dirty(struct handle *h, struct buf *b, enum csum_kind kind, uint64_t owner,
		  uint32_t gen);
/* Blocks being freed: their pending changes are dropped; metadata blocks
 * are also revoked in the journal (a later replay must not write an old
 * copy over the block's next owner). */
void handle_forget(struct handle *h, uint64_t blocknr, uint32_t count, bool metadata);
/* How many frozen copies handle_write_access() made (for tests). */
uint64_t trans_handle_copies(struct uext4_fs *fs);
/* Commit the running transaction (everything changed so far) and wait
 * until it is durable. */
int trans_commit(struct uext4_fs *fs);
/* fsync: make transaction tid durable (no-op if it already is; then only
 * the device is flushed, for file data). */
int trans_commit_tid(struct uext4_fs *fs, uint32_t tid);
/* Start (journal) the commit thread of a read-write mount: commits every
 * secs seconds; stopped by trans_destroy(). */
int trans_start_timer(struct uext4_fs *fs, unsigned secs);
void trans_stop_timer(struct uext4_fs *fs);
/* The first write-back error of the mount (negative), 0 if none: then
 * every committed transaction is home. */
int trans_write_error(struct uext4_fs *fs);
/* A commit's write or flush failed (journal aborted, or no journal): the
 * unmount writes only the error record. */
bool trans_write_failed(struct uext4_fs *fs);
/* No journal: write the failed transaction home again (unmount); 0 if it is. */
int trans_retry_lost(struct uext4_fs *fs);
/* An operation failed with err: if that is ENOSPC while freed blocks wait
 * for their commit (balloc_has_busy()), commit and say to try once more,
 * as the kernel's ext4_should_retry_alloc().  No handle may be open. */
bool trans_retry_after_enospc(struct uext4_fs *fs, int err);
/* Inode-table blocks: handle_dirty(h, b, CSUM_INODE_TABLE, group, index in
 * the group's table); has the commit written that block since mount? */
bool trans_itable_block_written(struct uext4_fs *fs, uint32_t group, uint32_t index);
/* A read-write mount writes nothing until its first commit with dirty
 * blocks (or an error record): that commit first calls
 * super_begin_writing().  trans_begin_writing() does it now (a mount
 * whose image must change anyway: needs_recovery left set);
 * trans_writing_started() says whether it happened. */
int trans_begin_writing(struct uext4_fs *fs);
bool trans_writing_started(struct uext4_fs *fs);
/* Readers of fs->sb on a read-write mount (the commit rewrites it). */
void trans_lock_super(struct uext4_fs *fs);
void trans_unlock_super(struct uext4_fs *fs);


#endif
