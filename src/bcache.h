/*
 * bcache.h - the buffer cache (bcache.c); struct buf is in internal.h.
 */
#ifndef UEXT4_BCACHE_H
#define UEXT4_BCACHE_H

#include "blockdev.h"
#include "internal.h"

/* ---------------------------------------------------------------- bcache.c
 * Buffer cache: blocks keyed by number in a sharded hash table.  A buffer
 * returned by bread() holds a reference until brelse().  Clean buffers
 * with no reference are evicted LRU-first when the cache is over its
 * memory limit.
 */

struct bcache;
struct bcache *bcache_create(struct bdev *dev, uint32_t block_size, uint64_t mem_limit);
void bcache_destroy(struct bcache *bc);
/* Get the buffer for blocknr, reading it if needed.  kind is counted. */
int bread(struct bcache *bc, uint64_t blocknr, enum uext4_meta_kind kind, struct buf **out);
/* Get the buffer without reading (for blocks about to be overwritten). */
int bget(struct bcache *bc, uint64_t blocknr, struct buf **out);
/* A newly allocated metadata block: the buffer, zero-filled, uptodate and
 * verified, whatever was cached for the block before.  Only for blocks no
 * other thread can reach yet. */
int bget_new(struct bcache *bc, uint64_t blocknr, struct buf **out);
/* The buffer, zero-filled only if it is not yet uptodate (never read from
 * disk): for inode-table blocks whose in-use inodes are all new (seed 002). */
int bget_zero_if_absent(struct bcache *bc, uint64_t blocknr, enum uext4_meta_kind kind,
			struct buf **out);
void brelse(struct bcache *bc, struct buf *b);
/* Mark dirty (first time: onto the shard's dirty list, off the LRU).  Use
 * handle_dirty(), which records the checksum kind. */
void bcache_mark_dirty(struct bcache *bc, struct buf *b);
/* Freed metadata blocks: drop their dirty state and cached contents, so a
 * stale copy is never written over the block's next user. */
void bcache_forget(struct bcache *bc, uint64_t blocknr, uint32_t count);
/* Take every dirty buffer (referenced, DIRTY cleared) for writeback; the
 * caller brelse()s each.  Only called by the commit with handles drained. */
size_t bcache_take_dirty(struct bcache *bc, struct buf ***out);
size_t bcache_dirty_count(struct bcache *bc);
/* A commit's write-out ended (readahead discards what it read meanwhile). */
void bcache_note_write_done(struct bcache *bc);
uint64_t bcache_mem_limit(struct bcache *bc);
static inline bool buf_verified(struct buf *b)
{ return atomic_load_explicit(&b->state, memory_order_acquire) & BUF_VERIFIED; }
static inline void buf_set_verified(struct buf *b)
{ atomic_fetch_or_explicit(&b->state, BUF_VERIFIED, memory_order_release); }
void bcache_counters(struct bcache *bc, struct uext4_counters *c);

/* The committing transaction's frozen copy of a buffer (BUF_FROZEN,
 * BUF_COPYING in b->state, b->frozen): the commit freezes what it writes,
 * and whoever changes the buffer first (a handle, the commit itself, or
 * the cache forgetting or reusing it) makes the copy.  buf_claim_copy():
 * true if this thread is to copy (then buf_copy_frozen()), else another
 * is and buf_wait_copied() waits for it. */
bool buf_claim_copy(struct buf *b);
void buf_copy_frozen(struct buf *b, uint32_t block_size);
void buf_wait_copied(struct buf *b);
/* The buffer is about to change: make the committing transaction's copy
 * now if it is still frozen, wait if another thread is making it. */
void buf_unfreeze(struct buf *b, uint32_t block_size);
/* Is blocknr cached and uptodate? */
bool bcache_uptodate(struct bcache *bc, uint64_t blocknr);
/* Read count blocks from start in one device read and cache those not yet
 * cached (best effort; errors surface in the bread() that follows). */
void bcache_readahead(struct bcache *bc, uint64_t start, uint32_t count,
		      enum uext4_meta_kind kind);
/* Count a device read done outside the cache (file data). */
void bcache_count_read(struct bcache *bc, enum uext4_meta_kind kind, uint64_t nblocks);
/* Blocks written to the device (the commit's home writes, the log, file
 * data), counted on the calling thread's shard. */
void bcache_count_write(struct bcache *bc, enum uext4_meta_kind kind, uint64_t nblocks);


#endif
