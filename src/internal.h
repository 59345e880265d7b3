/*
 * internal.h - what the subsystems of libuext4 share.
 *
 * One file per subsystem (see ARCHITECTURE.md); this header declares the
 * core types (mounted file system, buffer, in-memory inode) and each
 * subsystem's entry points.  Errors are negative errno values; the
 * function that detects a problem records a message with fs_err().
 */
#ifndef UEXT4_INTERNAL_H
#define UEXT4_INTERNAL_H

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "../include/uext4.h"
#include "lock.h"
#include "ondisk.h"

#ifndef EUCLEAN
#define EUCLEAN 117
#endif
/* Corruption is reported as EUCLEAN, as the kernel's EFSCORRUPTED. */
#define EFSCORRUPTED EUCLEAN
#define EFSBADCRC EBADMSG

#define CACHELINE 64
#define UNUSED __attribute__((unused))
#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define MAX(a, b) ((a) > (b) ? (a) : (b))
#define DIV_ROUND_UP(n, d) (((n) + (d) - 1) / (d))

/* ---------------------------------------------------------------- error.c */
/* Record a message for uext4_last_error() and return -err. */
int fs_err(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Same, for corruption: message prefixed "corrupt <what>:", returns -EUCLEAN. */
int fs_corrupt(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void fs_clear_err(void);
struct uext4_fs;
/*
 * Corruption (or a failed metadata write) met by an operation on a mounted
 * file system: besides the message (as fs_err()), record it on disk as the
 * kernel's __ext4_error() does (s_state |= EXT4_ERROR_FS, s_error_count,
 * s_first_error_* / s_last_error_*: time, inode, block, function, errno;
 * the superblock written at once, outside the journal) and act as the
 * mount's errors= policy says: continue; remount-ro (writes refused with
 * EROFS from now on, reads still served); panic (the process exits without
 * writing anything further).  ino and block may be 0.  Returns -err.
 */
int fs_error(struct uext4_fs *fs, int err, uint64_t ino, uint64_t block, const char *func,
	     const char *fmt, ...) __attribute__((format(printf, 6, 7)));
#define FS_ERROR(fs, err, ino, block, ...) \
	fs_error((fs), (err), (ino), (block), __func__, __VA_ARGS__)
/* A write path got err (negative) back from a check shared with the read
 * path, which has set the message: if it is corruption (-EUCLEAN), record
 * it and act as fs_error() does, keeping the message.  Returns err. */
int fs_error_seen(struct uext4_fs *fs, int err, uint64_t ino, uint64_t block, const char *func);
#define FS_ERROR_SEEN(fs, err, ino, block) fs_error_seen((fs), (err), (ino), (block), __func__)
/* A commit's write or flush failed (err negative, message set): with a
 * journal, abort it (read-only whatever errors= says, as jbd2 and ext4);
 * without, record it and act as errors= says.  Returns -EIO (-ENOMEM for
 * a commit out of memory). */
int fs_write_error(struct uext4_fs *fs, int err, bool journal, const char *func);
/* The error state of a mount (error.c).  fs_errors_init() at mount once
 * the superblock is read (before a journal replay, which may record
 * errors too): the policy (opts, else s_errors) and the error fields
 * recorded so far. */
struct ext4_super_block;
int fs_errors_init(struct uext4_fs *fs, const struct uext4_opts *o);
void fs_errors_destroy(struct uext4_fs *fs);
/* Commit (super_write): the recorded error fields into sb, its checksum;
 * sb is then the image later error writes start from. */
void fs_errors_fold(struct uext4_fs *fs, struct ext4_super_block *sb);
/* The commit that folded it wrote it: later error writes start from it. */
void fs_errors_committed(struct uext4_fs *fs);
/* The recorded error fields into a copy of the superblock (uext4_info). */
void fs_errors_merge(struct uext4_fs *fs, struct ext4_super_block *sb);
/* Errors recorded since mount (the commit compares it around its writes). */
uint32_t fs_errors_seq(struct uext4_fs *fs);
/* Write the last committed superblock with the error fields straight to
 * the device and flush it; clear_incompat / set_state change that image
 * first (the unmount of an aborted mount). */
int fs_errors_write_super(struct uext4_fs *fs, uint32_t clear_incompat, uint16_t set_state);
/* Writes refused after an error (errors=remount-ro or panic): -EROFS with
 * a message naming the first error. */
int fs_errors_refuse(struct uext4_fs *fs);
/* Journal replay rewrote the superblock: put back the error fields of the
 * one read before (as the kernel's ext4_load_journal()). */
void fs_errors_keep_across_replay(struct ext4_super_block *replayed,
				  const struct ext4_super_block *before);

/* ---------------------------------------------------------------- fault.c
 * Failure injection for tests (see fault.c): off unless armed, then the
 * n-th fault point of the armed sites fails once with -err.  Costs one
 * relaxed load when off.
 */
enum fault_site {
	FAULT_READ = 1u << 0,           /* bread() reading a block from the device: num = block */
	FAULT_ALLOC_BLOCK = 1u << 1,    /* balloc_alloc(): num = goal */
	FAULT_ALLOC_INODE = 1u << 2,    /* ialloc_alloc(): num = directory */
};
void fault_inject_arm(unsigned sites, unsigned n, int err);
void fault_inject_disarm(void);
bool fault_inject_fired(void);
unsigned fault_inject_seen(void);      /* points of the armed sites reached */
int fault_point_slow(unsigned site, uint64_t num);
extern _Atomic unsigned fault_armed;
static inline int fault_point(unsigned site, uint64_t num)
{
	if (__builtin_expect(atomic_load_explicit(&fault_armed, memory_order_relaxed) == 0, 1))
		return 0;
	return fault_point_slow(site, num);
}

/* ---------------------------------------------------------------- blockdev.c
 * The block device interface.  Backends: a file (image or block device,
 * pread/pwrite) and memory (tests).  A later issue adds a crash-recording
 * backend, so callers only use the ops.
 */
struct bdev;
struct bdev_ops {
	int (*read)(struct bdev *d, void *buf, size_t len, uint64_t off);
	int (*write)(struct bdev *d, const void *buf, size_t len, uint64_t off);
	int (*flush)(struct bdev *d);
	void (*close)(struct bdev *d);
	/* Optional (NULL: not offered), see nbd.h: bdev_write_fua(), bdev_discard(). */
	int (*write_fua)(struct bdev *d, const void *buf, size_t len, uint64_t off);
	int (*discard)(struct bdev *d, uint64_t off, uint64_t len);
};
struct bdev {
	const struct bdev_ops *ops;
	uint64_t size;          /* bytes */
	int read_only;
	void *priv;
};
/* Returns NULL and sets *err (negative errno) with a message on failure. */
struct bdev *bdev_open_file(const char *path, int read_only, int *err);
/* The same for the part of the file from byte offset on (a partition of a
 * disk image): device offset 0 is file offset offset. */
struct bdev *bdev_open_file_at(const char *path, int read_only, uint64_t offset, int *err);
/* A memory device of size bytes, zero-filled; or a copy of an image file
 * (from byte offset on). */
struct bdev *bdev_open_memory(uint64_t size);
struct bdev *bdev_open_memory_copy(const char *path, int *err);
struct bdev *bdev_open_memory_copy_at(const char *path, uint64_t offset, int *err);
static inline int bdev_read(struct bdev *d, void *buf, size_t len, uint64_t off)
{ return d->ops->read(d, buf, len, off); }
static inline int bdev_write(struct bdev *d, const void *buf, size_t len, uint64_t off)
{ return d->ops->write(d, buf, len, off); }
static inline int bdev_flush(struct bdev *d) { return d->ops->flush(d); }
static inline void bdev_close(struct bdev *d) { d->ops->close(d); }
/* Populate's data path: copy len bytes (len < 2 GiB) of host file src from
 * src_off to the device at off with copy_file_range(2), the kernel moving the
 * pages.  Bytes copied (fewer at the source's end), -errno from the copy
 * (no message: the caller names the source), or -EOPNOTSUPP for a device
 * that is not a file (the caller reads and writes instead). */
int bdev_copy_from_fd(struct bdev *d, int src, uint64_t src_off, size_t len, uint64_t off);
/* The same with sendfile(2), which copies between any two file systems
 * (copy_file_range only within one): the kernel reads the source's pages
 * and writes them, one copy instead of a read and a write.  Sends from one
 * thread at a time (it moves the device's file offset). */
int bdev_send_from_fd(struct bdev *d, int src, uint64_t src_off, size_t len, uint64_t off);
/* crashdev.c: a device whose writes stay in memory (reads see them) on top
 * of base, which it owns.  A read-only mount replays a dirty journal into
 * it, leaving the image untouched. */
struct bdev *bdev_open_overlay(struct bdev *base);

/* ---------------------------------------------------------------- bcache.c
 * Buffer cache: blocks keyed by number in a sharded hash table.  A buffer
 * returned by bread() holds a reference until brelse().  Clean buffers
 * with no reference are evicted LRU-first when the cache is over its
 * memory limit.
 */
enum buf_state_bits {
	BUF_UPTODATE = 1u << 0, /* data holds the block's contents */
	BUF_DIRTY = 1u << 1,    /* data differs from disk (write path) */
	BUF_VERIFIED = 1u << 2, /* checksum/structure checked once */
	BUF_IOERR = 1u << 3,    /* last read failed */
	BUF_DIRENTS_OK = 1u << 4, /* a directory leaf whose entries were all
				   * checked once (dir.c); the writers keep it so */
	/* Frozen copy-on-write (trans.c): the closing commit took the buffer
	 * and has not copied it yet; the first writer (handle_write_access())
	 * or the commit, whichever wins the CAS to BUF_COPYING, copies it
	 * into buf.frozen.  Others wait while BUF_COPYING is set. */
	BUF_FROZEN = 1u << 5,
	BUF_COPYING = 1u << 6,
	BUF_DX_ORDERED = 1u << 7, /* an htree index block whose hashes were
				   * checked in order once (htree.c); the
				   * writers keep them so */
	BUF_LEAF_HINT = 1u << 9,  /* buf.hint describes the leaf (dir.c);
				   * cleared by every change but the hinted
				   * insert's own (bit 8: bcache's) */
};

/*
 * What a dirty buffer holds, so that the commit can set its checksum once
 * however many times it changed (see csum_set_buffer()).
 */
enum csum_kind {
	CSUM_NONE = 0,          /* data blocks, journal, no checksum */
	CSUM_DIR_LEAF,          /* directory leaf: tail checksum (owner = dir ino/gen) */
	CSUM_DX_NODE,           /* htree root or node (owner = dir ino/gen) */
	CSUM_EXTENT,            /* extent index/leaf block (owner = file ino/gen) */
	CSUM_XATTR,             /* xattr block (keyed by its block number) */
	CSUM_BLOCK_BITMAP,      /* owner = group; checksum goes in the descriptor */
	CSUM_INODE_BITMAP,      /* owner = group */
	CSUM_INODE_TABLE,       /* inode checksums are set by inode_write() */
	CSUM_GROUP_DESC,        /* set by the commit from fs->groups[] */
	CSUM_SUPER,
	CSUM_ORPHAN,            /* orphan file block (owner = orphan file ino/gen) */
	CSUM_JOURNAL,           /* journal blocks: never through the cache */
};

struct buf {
	uint64_t blocknr;
	uint8_t *data;              /* block_size bytes; immutable pointer */
	_Atomic uint32_t refcount;  /* atomic; 0 = idle; BUF_REF_DEAD = being freed */
	_Atomic uint32_t state;     /* BUF_* bits, atomic */
	uint8_t kind;               /* enum uext4_meta_kind of the first read */
	struct ulock lock;          /* serialises reading in (and xattr block changes) */
	/* Set by handle_dirty() (relaxed atomics: threads writing different
	 * inodes of one inode-table block store the same values); read by the
	 * commit once all handles have ended: */
	_Atomic uint8_t csum_kind;  /* enum csum_kind */
	_Atomic uint32_t owner_gen;
	_Atomic uint64_t owner;     /* inode number, or group for bitmaps */
	/* Where the committing transaction's copy goes: set by the commit
	 * (handles drained) before BUF_FROZEN, read by whoever wins the CAS
	 * from BUF_FROZEN to BUF_COPYING (trans.c). */
	uint8_t *frozen;
	/* Directory leaves (dir.c), valid while BUF_LEAF_HINT is set; read
	 * and written only by a writer of the leaf (its htree leaf lock or
	 * the directory's lock held for writing): */
	struct leaf_hint {
		uint32_t tail;          /* offset of the leaf's last entry */
		uint32_t slack_before;  /* >= the slack of every entry before it */
		uint64_t bloom[16];     /* one bit per live name (dir_name_bit) */
	} hint;
#ifdef UEXT4_LOCKDEP
	_Atomic uint32_t access_tid; /* last transaction that took write access */
#endif
	/* Written under the owning shard's lock; hnext is also read without
	 * it by lock-free lookups (bcache.c): */
	struct buf *_Atomic hnext;
	struct buf *lru_prev, *lru_next;
	struct buf *dirty_next;     /* shard's dirty list */
};

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

/* ---------------------------------------------------------------- trans.c
 * Transactions.  Every metadata change happens inside a handle:
 *
 *   handle_begin(fs, credits, &h)
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
 * it in handle_dirty()).  Issue "journal" turns the commit into a JBD2 one with
 * no change to callers.  Rules: take inode locks BEFORE handle_begin, never
 * inside a handle (lockdep checks it: a handle has RANK_HANDLE); nested
 * begin/end on one thread just count; a handle never waits for I/O that a
 * commit needs.
 */
struct handle {
	struct uext4_fs *fs;
	unsigned depth;     /* nested begins on this thread */
	unsigned slot;      /* which drain counter this handle holds */
	int err;            /* first error recorded */
	uint32_t tid;       /* the transaction this handle belongs to */
};
struct trans;
int trans_init(struct uext4_fs *fs);
void trans_destroy(struct uext4_fs *fs);
int handle_begin(struct uext4_fs *fs, unsigned credits, struct handle **out);
/* Ends the handle; returns its recorded error (or 0). */
int handle_end(struct handle *h);
int handle_write_access(struct handle *h, struct buf *b);
int handle_create_access(struct handle *h, struct buf *b);
void handle_dirty(struct handle *h, struct buf *b, enum csum_kind kind, uint64_t owner,
		  uint32_t gen);
/* Blocks being freed: their pending changes are dropped; metadata blocks
 * are also revoked in the journal (a later replay must not write an old
 * copy over the block's next owner). */
void handle_forget(struct handle *h, uint64_t blocknr, uint32_t count, bool metadata);
/* The buffer is about to change outside handle_write_access() (bcache:
 * forgotten or reused): make the committing transaction's copy now if it
 * is still frozen, wait if another thread is making it. */
void buf_unfreeze(struct buf *b, uint32_t block_size);
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

/* ---------------------------------------------------------------- journal.c
 * JBD2 journal in the internal journal inode (EXT4_JOURNAL_INO).  trans.c
 * drives it: one call per transaction, with the transaction's metadata
 * blocks already copied and checksummed.  On-disk format in src/jbd2.h.
 */
struct journal;
/* Read-write mount, after any recovery: map the journal inode, read and
 * check the journal superblock (v2; refuses external journals and unknown
 * features by name); with metadata_csum switch the journal to checksum v3.
 * *out is NULL (and 0 returned) when the file system has no journal. */
int journal_open(struct uext4_fs *fs, struct journal **out);
void journal_close(struct journal *j);
/* Most metadata blocks one transaction may hold (the commit closes a
 * transaction before it grows past this). */
uint32_t journal_max_transaction(const struct journal *j);
/* The id to give the first transaction (from the journal superblock). */
uint32_t journal_first_tid(const struct journal *j);
/*
 * Log one transaction and make it durable: descriptor blocks with a tag per
 * block (escaping blocks that begin with the JBD2 magic), the copies,
 * revoke blocks for revoked[], a flush (so ordered data and the log are on
 * disk), the commit block (time, checksum), a flush.  homes[] are the
 * blocks' home locations (sorted, distinct); copies holds n blocks.  When
 * the log is full it first flushes the device (earlier transactions'
 * home writes, which trans.c issues right after each commit, are then on
 * disk) and moves the log tail in the journal superblock.
 */
int journal_commit(struct journal *j, uint32_t tid, const uint64_t *homes, const uint8_t *copies,
		   size_t n, const uint64_t *revoked, size_t nrevoked);
/* Clean unmount, after the last home writes: flush, mark the journal empty
 * (s_start = 0, s_sequence = next tid), flush. */
int journal_mark_empty(struct journal *j);

/* ---------------------------------------------------------------- recovery.c */
struct journal_replay {
	uint32_t transactions, blocks, revoked;  /* replayed; revoke records seen */
	uint32_t first_tid, end_tid;             /* [first, end) replayed */
	bool stopped_on_bad_csum;                /* the log ended at a bad checksum */
	/* Logged blocks skipped for a bad tag checksum (the rest was
	 * replayed; EXT4_ERROR_FS is set on disk); the first one's home
	 * block, journal block and transaction. */
	uint32_t bad_blocks, bad_logpos, bad_tid;
	uint64_t bad_home;
};
/*
 * Replay the journal onto fs->dev (scan, revoke and replay passes, as the
 * kernel's jbd2 recovery), flush, and mark the journal empty with the next
 * sequence number.  A logged block with a bad tag checksum is skipped and
 * counted in r (the rest is replayed; EXT4_ERROR_FS is set in the
 * superblock on fs->dev); the caller reports it.  fs is a mount with its groups and inode cache (the
 * journal inode is mapped through them) but nothing cached from the
 * journaled area may be trusted afterwards: the caller remounts.  Does
 * nothing (r zeroed) when the journal is empty (s_start == 0).
 */
int journal_recover(struct uext4_fs *fs, struct journal_replay *r);

/* ---------------------------------------------------------------- orphan.c
 * Orphan inodes: unlinked but still open, or in a shrinking truncate, so
 * that a crash finishes the job at the next mount.  Orphan file (seed 000)
 * when the file system has one, else (and when it is full) the legacy
 * list through s_last_orphan and i_dtime (seed 003).
 */
struct orphan_state;
struct inode;
/* Read-write mount, before orphan_cleanup(): load the orphan file's state;
 * sets ORPHAN_PRESENT (written at the next commit) when there is one. */
int orphan_init(struct uext4_fs *fs);
void orphan_destroy(struct uext4_fs *fs);
/* Put inode on an orphan list, in h.  Caller holds inode->lock for writing
 * (or owns the inode).  Adding an inode already on a list does nothing. */
int orphan_add(struct handle *h, struct inode *inode);
/* Take it off again (no-op if it is on none). */
int orphan_del(struct handle *h, struct inode *inode);
/* A delete or truncate of inode failed (corruption): take it off its
 * orphan list in a handle of its own (caller holds inode->lock for
 * writing, no handle), without writing the inode itself, so that it stays
 * as it is for e2fsck and no later mount trips over it. */
int orphan_drop_failed(struct uext4_fs *fs, struct inode *inode);
/* Mount: finish what a crash interrupted.  Inodes with links are truncated
 * to i_size, the others are freed; one that cannot be (corrupt) is taken
 * off its list, left for e2fsck, recorded with fs_error() and counted in
 * r->orphans_failed, and the rest go on.  No handle open.  Counts in r;
 * an error only when the pass itself could not run. */
struct uext4_recovery;
int orphan_cleanup(struct uext4_fs *fs, struct uext4_recovery *r);
/* Clean unmount (lists empty): clear ORPHAN_PRESENT. */
void orphan_umount(struct uext4_fs *fs);

/* ---------------------------------------------------------------- slab.c
 * Fixed-size, 64-byte-aligned, zero-filled objects from big chunks (cached
 * inodes and buffers); memory returns at slab_destroy(). */
struct slab;
struct slab *slab_create(size_t objsize);
void slab_destroy(struct slab *s);
void *slab_alloc(struct slab *s);
void slab_free(struct slab *s, void *p);

/* ---------------------------------------------------------------- crc.c */
/* Raw CRC32C (Castagnoli), no pre/post inversion, as ext4_chksum(). */
uint32_t crc32c(uint32_t crc, const void *buf, size_t len);
/* CRC16 (ANSI, poly 0x8005 reflected) for gdt_csum group descriptors. */
uint16_t crc16(uint16_t crc, const void *buf, size_t len);

/* ---------------------------------------------------------------- counters
 * A counter many threads change and few read (free blocks, free inodes,
 * directories): one slot per cache line, picked by thread, summed on read.
 * No global cache line is written on the hot path.
 */
#define PCOUNTER_SLOTS 16
struct pcounter {
	struct {
		_Atomic int64_t v;
		char pad[CACHELINE - sizeof(int64_t)];
	} slot[PCOUNTER_SLOTS];
};
unsigned thread_slot(void);     /* small per-thread number (trans.c) */
static inline void pcounter_add(struct pcounter *c, int64_t d)
{
	atomic_fetch_add_explicit(&c->slot[thread_slot() % PCOUNTER_SLOTS].v, d,
				  memory_order_relaxed);
}
static inline int64_t pcounter_sum(struct pcounter *c)
{
	int64_t s = 0;

	for (unsigned i = 0; i < PCOUNTER_SLOTS; i++)
		s += atomic_load_explicit(&c->slot[i].v, memory_order_relaxed);
	return s;
}
static inline void pcounter_set(struct pcounter *c, int64_t v)
{
	for (unsigned i = 0; i < PCOUNTER_SLOTS; i++)
		atomic_store_explicit(&c->slot[i].v, i ? 0 : v, memory_order_relaxed);
}

/* ---------------------------------------------------------------- stats.c
 * Statistics of one mount (see uext4_stats_*() in uext4.h): the on
 * switch, the journal's counters and the I/O baseline of the last reset.
 * Lock classes are counted process-wide in lock.c.  Every field is an
 * atomic: the switch and baseline are written by enable/reset, the commit
 * counters by the one committer at a time, the handle-wait counters by
 * handles that waited (a slow path: they slept on a commit).
 */
struct fs_stats {
	_Atomic bool on;
	_Atomic uint64_t since_ns;
	_Atomic uint64_t commits, blocks, blocks_max, commit_ns, commit_max_ns;
	_Atomic uint64_t blocked_ns, blocked_max_ns;
	_Atomic uint64_t handle_waits, handle_wait_ns, handle_wait_max_ns;
	_Atomic uint64_t base_reads[UEXT4_META_NKINDS], base_writes[UEXT4_META_NKINDS];
	_Atomic uint64_t base_hits, base_misses, base_evictions;
} __attribute__((aligned(CACHELINE)));
int stats_init(struct uext4_fs *fs);
void stats_destroy(struct uext4_fs *fs);
static inline bool stats_on(const struct fs_stats *st);
/* A commit: blocks written, and the clock at its start, when handles ran
 * again and at its end (lockstat_now_ns()). */
void stats_commit(struct uext4_fs *fs, uint64_t blocks, uint64_t start, uint64_t released,
		  uint64_t end);
/* A handle waited ns for a commit to let it run. */
void stats_handle_waited(struct uext4_fs *fs, uint64_t ns);
/* lock.c: the lock classes' counters, summed over the thread slots. */
void lockstat_read(struct uext4_lock_stats *out, unsigned *n);
void lockstat_reset(void);

static inline bool stats_on(const struct fs_stats *st)
{
	return st && __builtin_expect(atomic_load_explicit(&st->on, memory_order_relaxed), 0);
}

/* ---------------------------------------------------------------- super.c */
/*
 * One block group, parsed from its descriptor at mount and from then on the
 * truth for it: the commit writes it back into the descriptor block.  Each
 * group sits on its own cache line(s) with its own lock (seed 004).
 */
struct group_info {
	struct ulock lock;          /* RANK_GROUP: the fields marked (L), and the
				     * contents of the group's two bitmaps */
	uint64_t block_bitmap, inode_bitmap, inode_table; /* immutable */
	uint32_t free_blocks, free_inodes, used_dirs;     /* (L) */
	_Atomic uint32_t itable_unused;  /* (L) for writers; read lock-free */
	_Atomic uint32_t flags;          /* EXT4_BG_*; (L) for writers; read lock-free */
	uint32_t block_bitmap_csum, inode_bitmap_csum;    /* commit only */
	uint32_t ifree_hint;        /* (L) no free inode below this index (ialloc) */
	/* Immutable: the descriptor's claim at mount (bg_itable_unused, 0
	 * for INODE_UNINIT): inodes with index >= used_at_mount (0-based, in
	 * the group) were never in use, so their inode-table copies may be
	 * garbage (lazy itable init) and are not trusted (ialloc.c). */
	uint32_t used_at_mount;
	/* Inodes with index >= never_used_from were never in use before this
	 * mount, so an inode-table block made only of them never needs a read
	 * from disk: every in-use inode there is new (seed 002).  Starts at
	 * inodes_per_group (no shortcut); ialloc sets it to used_at_mount
	 * once, under the lock, when the inode bitmap is first loaded and
	 * agrees (no inode in use at or past used_at_mount, as the kernel's
	 * __ext4_get_inode_loc checks the bitmap); read lock-free. */
	_Atomic uint32_t never_used_from;
	bool ibitmap_checked;       /* (L) the bitmap was compared with it */
} __attribute__((aligned(CACHELINE)));

/* After changing a group's fields: its descriptor is rewritten at commit. */
void group_set_dirty(struct uext4_fs *fs, uint32_t group);
static inline uint64_t group_first_block(const struct uext4_fs *fs, uint32_t g);
static inline uint32_t group_nblocks(const struct uext4_fs *fs, uint32_t g);
static inline uint32_t group_of_block(const struct uext4_fs *fs, uint64_t blk);
static inline uint32_t group_of_ino(const struct uext4_fs *fs, uint64_t ino);

/*
 * Write-hot state of a mounted file system, allocated apart from struct
 * uext4_fs so that nothing on its read-mostly cache lines is ever written
 * by the hot path (seed 004).
 */
struct fs_hot {
	struct pcounter free_blocks;
	struct pcounter free_inodes;
	struct pcounter dirs;
	_Atomic uint32_t last_flex;          /* ialloc: flex group last used for files */
	_Atomic uint64_t *group_dirty;       /* bitmap of groups to write at commit */
	_Atomic bool sb_dirty;               /* superblock changed besides its counters */
	_Atomic uint32_t next_generation;    /* use_fixed_time: i_generation counter */
};

/*
 * The mounted file system.  The first section is read-mostly (geometry,
 * features, pointers) and set at mount; write-hot state lives in the
 * subsystems' own sharded structures, never on these cache lines
 * (seed 004).
 */
struct uext4_fs {
	/* --- read-mostly: set at mount, then only read --- */
	struct bdev *dev;
	struct bcache *bc;
	struct icache *icache;
	struct namecache *nc;       /* name cache (namecache.c), NULL = off */
	unsigned max_open_files;    /* uext4_opts.max_open_files, set at mount */
	_Atomic unsigned open_files; /* uext4_file handles open now; atomic */
	uint32_t block_size;
	uint32_t log_block_size;    /* log2(block_size) */
	uint32_t inode_size;
	uint32_t desc_size;
	uint32_t inodes_per_group;
	uint32_t blocks_per_group;
	uint32_t groups_count;
	uint32_t first_data_block;
	uint32_t first_ino;
	uint32_t inodes_per_block;
	uint32_t itb_per_group;     /* inode table blocks per group */
	uint64_t blocks_count;
	uint32_t inodes_count;
	uint32_t feature_compat, feature_incompat, feature_ro_compat;
	uint32_t csum_seed;         /* crc32c(~0, uuid) or s_checksum_seed */
	uint32_t hash_seed[4];
	uint8_t def_hash_version;
	bool hash_unsigned;         /* s_flags says unsigned char hashing */
	bool metadata_csum;
	bool gdt_csum;
	bool read_only;
	/* Set once when an error stops all writing (errors=remount-ro or
	 * panic, as the kernel aborts its journal): handles are refused and
	 * nothing is committed.  One relaxed load in handle_begin(). */
	_Atomic bool aborted;
	uint16_t want_extra_isize;
	uint32_t log_groups_per_flex; /* 0 without flex_bg */
	uint64_t reserved_blocks;   /* s_r_blocks_count: only root may use them */
	struct group_info *groups;  /* groups_count entries; see struct group_info */
	struct fs_hot *hot;         /* write-hot counters, on their own lines */
	struct trans *trans;        /* trans.c: handles and commits */
	struct balloc_state *balloc; /* balloc.c: preallocation windows */
	_Atomic(struct xindex *) xindex; /* xattr.c: shared-block index, made on first use */
	struct journal *journal;    /* journal.c; NULL without a journal */
	struct orphan_state *orphan; /* orphan.c; read-write mounts */
	unsigned commit_secs;       /* commit interval */
	struct uext4_recovery recovery; /* what the mount's recovery did */
	struct inode *root;         /* referenced from mount to unmount */
	struct fs_errors *errs;     /* error.c: recorded errors, errors= policy */
	struct fs_stats *stats;     /* stats.c: statistics switch and journal counters */
	/* uext4_opts.use_fixed_time / fixed_time / bulk, as mounted: */
	bool use_fixed_time;
	int64_t fixed_time;
	bool bulk;
	/* --- written: by the commit (counters, times) and the legacy orphan
	 * list (s_last_orphan), so on cache lines of its own, after every
	 * read-mostly field (checked in super.c) --- */
	struct ext4_super_block sb __attribute__((aligned(CACHELINE)));
} __attribute__((aligned(CACHELINE)));

#define FS_HAS_INCOMPAT(fs, f) (((fs)->feature_incompat & EXT4_FEATURE_INCOMPAT_##f) != 0)
#define FS_HAS_COMPAT(fs, f) (((fs)->feature_compat & EXT4_FEATURE_COMPAT_##f) != 0)
#define FS_HAS_RO_COMPAT(fs, f) (((fs)->feature_ro_compat & EXT4_FEATURE_RO_COMPAT_##f) != 0)

static inline uint64_t group_first_block(const struct uext4_fs *fs, uint32_t g)
{ return fs->first_data_block + (uint64_t)g * fs->blocks_per_group; }
static inline uint32_t group_nblocks(const struct uext4_fs *fs, uint32_t g)
{
	uint64_t left = fs->blocks_count - group_first_block(fs, g);
	return left < fs->blocks_per_group ? (uint32_t)left : fs->blocks_per_group;
}
static inline uint32_t group_of_block(const struct uext4_fs *fs, uint64_t blk)
{ return (uint32_t)((blk - fs->first_data_block) / fs->blocks_per_group); }
static inline uint32_t group_of_ino(const struct uext4_fs *fs, uint64_t ino)
{ return (uint32_t)((ino - 1) / fs->inodes_per_group); }

int super_mount(const char *path, const struct uext4_opts *opts, struct uext4_fs **out);
/* Mount a device (which the mount then owns, also on failure): tests
 * mount crash-recording and memory devices with it. */
int super_mount_bdev(struct bdev *dev, const struct uext4_opts *opts, struct uext4_fs **out);
/* Write back everything (read-write mounts) and free the mount.  Returns
 * the first write-back error. */
int super_umount(struct uext4_fs *fs);
/* Fill the superblock's counters and checksum into its buffer (commit). */
int super_write(struct uext4_fs *fs);
/* The mount's first write (trans.c, commit lock held, handles drained):
 * the superblock as the mount set it (needs_recovery, mount count and
 * time, orphan_present), written and flushed before anything else. */
int super_begin_writing(struct uext4_fs *fs);
/* Serialise fs->groups[g] into its descriptor block (commit). */
int super_write_group_desc(struct uext4_fs *fs, uint32_t g);
/* The superblock changed besides its counters: write it at the next commit. */
void super_mark_dirty(struct uext4_fs *fs);
/* Does group g hold a superblock backup (sparse_super, sparse_super2)? */
bool super_group_has_super(struct uext4_fs *fs, uint32_t g);
/* Block holding group's descriptor, and its byte offset there (meta_bg
 * aware, as the kernel's descriptor_loc()). */
uint64_t super_desc_location(struct uext4_fs *fs, uint32_t group, uint32_t *offset);
/* groupcheck.c: before a read-write mount, every group's bitmaps and
 * inode table lie in range and overlap nothing (-EUCLEAN naming them). */
int super_check_groups(struct uext4_fs *fs);
/* Names of the feature bits set in the three masks, space separated. */
void super_feature_names(uint32_t compat, uint32_t incompat, uint32_t ro_compat,
			 char *buf, size_t size);

/* ---------------------------------------------------------------- csum.c
 * Checksum verification of every structure that carries one.  Each returns
 * 0 when the checksum matches (or the file system has none) and otherwise
 * -EUCLEAN with a message naming the structure, inode/group and block.
 */
int csum_verify_super(struct uext4_fs *fs, const struct ext4_super_block *sb);
int csum_verify_group_desc(struct uext4_fs *fs, uint32_t group, const void *gd);
int csum_verify_inode(struct uext4_fs *fs, uint64_t ino, const void *raw);
int csum_verify_extent_block(struct uext4_fs *fs, uint64_t ino, uint32_t generation,
			     uint64_t blocknr, const void *block);
int csum_verify_dir_leaf(struct uext4_fs *fs, uint64_t ino, uint32_t generation,
			 uint64_t blocknr, const void *block);
int csum_verify_dx_node(struct uext4_fs *fs, uint64_t ino, uint32_t generation,
			uint64_t blocknr, const void *block, unsigned count_offset,
			unsigned count, unsigned limit);
int csum_verify_xattr_block(struct uext4_fs *fs, uint64_t blocknr, const void *block);
int csum_verify_block_bitmap(struct uext4_fs *fs, uint32_t group, const void *bitmap);
int csum_verify_inode_bitmap(struct uext4_fs *fs, uint32_t group, const void *bitmap);
int csum_verify_orphan_block(struct uext4_fs *fs, uint64_t ino, uint32_t generation,
			     uint64_t blocknr, const void *block);
/* The value each structure's checksum field should hold (write path). */
uint32_t csum_inode(struct uext4_fs *fs, uint64_t ino, const void *raw);
/* Store the inode's checksum in raw (no-op without metadata_csum). */
void csum_set_inode(struct uext4_fs *fs, uint64_t ino, void *raw);
/* Set the checksum a dirty buffer carries, by b->csum_kind (commit). */
void csum_set_buffer(struct uext4_fs *fs, struct buf *b);
/* Bitmap checksums (crc32c of the bitmap bytes) for the descriptor. */
uint32_t csum_block_bitmap(struct uext4_fs *fs, const void *bitmap);
uint32_t csum_inode_bitmap(struct uext4_fs *fs, const void *bitmap);
void csum_set_group_desc(struct uext4_fs *fs, uint32_t group, void *gd);
void csum_set_super(struct uext4_fs *fs, struct ext4_super_block *sb);

/* ---------------------------------------------------------------- inode.c
 * In-memory inodes, cached with reference counts.  The parsed fields are
 * filled at load and protected by lock (rwlock); the raw copy keeps the
 * whole on-disk inode (inode_size bytes) for i_block, inline data and
 * in-inode xattrs.
 */
struct balloc_pa;
struct inode {
	uint64_t ino;
	struct urwlock lock;        /* protects every field below */
	uint32_t mode, uid, gid, links, flags, generation;
	uint64_t size;
	uint64_t blocks;            /* in 512-byte units */
	uint64_t file_acl;          /* external xattr block, 0 = none */
	struct timespec atime, mtime, ctime, crtime;
	uint16_t extra_isize;
	uint32_t dtime;
	/* Allocator state, also under lock (write): */
	uint32_t last_alloc_group;  /* ialloc: group last picked for this directory's files */
	uint64_t alloc_goal;        /* balloc: block after the last allocation, 0 = none */
	struct balloc_pa *pa;       /* balloc: in-memory preallocation, or NULL */
	_Atomic uint32_t istate;    /* INODE_* bits */
	_Atomic uint32_t last_tid;  /* transaction that last wrote the inode (fsync) */
	/* Directories: identity in the name cache (namecache.c), atomic, no
	 * lock: 0 until first used there, then unique within the mount. */
	_Atomic uint64_t nc_id;
	/* Orphan state (orphan.c), protected by the orphan code's own locks:
	 * the slot in the orphan file (block * entries per block + index),
	 * and the legacy list's links (in memory, and the next inode number
	 * that i_dtime holds on disk while INODE_ORPHAN_LIST is set). */
	uint32_t orphan_slot;
	struct inode *orphan_prev, *orphan_next;
	_Atomic uint32_t orphan_next_ino;
	/* Cache bookkeeping (inode.c): refcount is atomic (0 = idle,
	 * INODE_REF_DEAD = being freed); hnext, lru_* are written under the
	 * icache shard lock, hnext is also read by lock-free lookups;
	 * on_lru is written under the lock and read without it; referenced
	 * is set by lookups, cleared by the evictor. */
	_Atomic uint32_t refcount;
	_Atomic bool on_lru;
	_Atomic uint8_t referenced;
	/* The frontend's lookup count (the FUSE kernel's nlookup), atomic, no
	 * lock: while it is > 0 it holds one reference (taken at 0 -> 1,
	 * dropped at -> 0; inode_lookup_ref(), inode_forget()). */
	_Atomic uint64_t nlookup;
	struct inode *_Atomic hnext;
	struct inode *lru_prev, *lru_next;
	uint8_t raw[];              /* fs->inode_size bytes */
};

struct icache;
/* limit: most idle inodes kept (uext4_opts.inode_cache); 0 = default. */
struct icache *icache_create(struct uext4_fs *fs, unsigned limit);
/* Inodes hashed in the cache now, and how many of them are idle. */
void icache_counts(struct uext4_fs *fs, uint64_t *cached, uint64_t *idle);
void icache_destroy(struct icache *ic);
/* Get an inode (loading and verifying it); drop with iput(). */
int iget(struct uext4_fs *fs, uint64_t ino, struct inode **out);
/* Drop a reference.  The last one of an inode with no links frees it;
 * if that fails (corrupt inode) the error is recorded with fs_error()
 * (not during orphan cleanup, which records it itself), the inode is
 * taken off its orphan list and left allocated for e2fsck, and iput()
 * returns the error for a caller that can still report it (unlink); else
 * 0. */
int iput(struct uext4_fs *fs, struct inode *inode);
/* Would freeing inode meet corruption in its extent tree (read-only walk,
 * for an unlink about to drop the last link)?  0 or the error. */
int inode_check_freeable(struct uext4_fs *fs, struct inode *inode);
/* The same walk from logical block lblk on: what a shrinking truncate to
 * lblk will free (checked before it goes on the orphan list, so that a
 * corrupt tree is refused before anything is written). */
int inode_check_map_from(struct uext4_fs *fs, struct inode *inode, uint64_t lblk);
/* The reference-free path walk (api.c), inside the caller's epoch section
 * (ebr.h), which keeps the result from being freed until it leaves: the
 * cached inode ino, not dead, without a reference, or NULL (not cached). */
struct inode *icache_peek(struct uext4_fs *fs, uint64_t ino);
/* Copy the attributes of a peeked inode (holding one reference, under its
 * lock, as a stat does); false if it was dead or unusable (deleted, being
 * created) meanwhile. */
bool inode_stat_peeked(struct uext4_fs *fs, struct inode *n, struct uext4_stat *st);
/* Another reference to an inode the caller already holds. */
void igrab(struct inode *inode);
/* One more lookup of ino handed to the frontend (uext4_lookup_ref());
 * st (may be NULL) is filled from the same inode.  0 or -errno, no count. */
int inode_lookup_ref(struct uext4_fs *fs, uint64_t ino, struct uext4_stat *st);
/* The frontend dropped nlookup of them (uext4_forget()); at 0 the held
 * reference goes, which frees an unlinked inode. */
void inode_forget(struct uext4_fs *fs, uint64_t ino, uint64_t nlookup);
/* References other than the lookup count's: "does anybody hold it open?" */
uint32_t inode_users(struct inode *inode);
void inode_to_stat(struct uext4_fs *fs, const struct inode *inode, struct uext4_stat *st);

/* flags.c: immutable and append-only inodes refuse changes (EPERM, as the
 * kernel's IS_IMMUTABLE / IS_APPEND checks).  The caller holds n->lock. */
int flags_refuse(const struct inode *n, const char *what);
static inline int inode_refuse_if(const struct inode *n, uint32_t fl, const char *what)
{
	return (n->flags & fl) ? flags_refuse(n, what) : 0;
}
#define FL_NOCHANGE (EXT4_IMMUTABLE_FL | EXT4_APPEND_FL)
/* Synchronous inodes (+S) and directories (+S, +D): their changes are
 * durable when the call returns, as the kernel's IS_SYNC / IS_DIRSYNC. */
#define FL_DIRSYNC_ANY (EXT4_SYNC_FL | 0x00010000u /* DIRSYNC */)
/* If sync (read under n->lock by the caller), commit what last changed n;
 * else return err.  Called with no lock held. */
int flags_sync_commit(struct uext4_fs *fs, struct inode *n, bool sync, int err);
/* ext4_mask_flags(): the flags an inode of this type may carry. */
uint32_t flags_mask_for_mode(uint32_t mode, uint32_t flags);
/* The flags a new inode of this mode takes from its directory. */
uint32_t flags_inherited(uint32_t dir_flags, uint32_t mode);

enum inode_state_bits {
	INODE_NEW = 1u << 0,        /* created since mount */
	INODE_DELETED = 1u << 1,    /* freed: links 0 and last reference gone */
	INODE_UNLINKED = 1u << 2,   /* links reached 0: free at the last iput() */
	INODE_UNHASHED = 1u << 3,   /* deleted and out of the cache's hash */
	INODE_ORPHAN_FILE = 1u << 4, /* has a slot in the orphan file (orphan_slot) */
	INODE_ORPHAN_LIST = 1u << 5, /* on the legacy s_last_orphan list */
	/* Being made: cached (its number is taken) but not yet filled in;
	 * iget() refuses it (ENOENT: only a number looked up before the
	 * previous owner was freed can lead there) until inode_created(). */
	INODE_CREATING = 1u << 6,
	/* Its inode-bitmap bit is known to be set: set by our ialloc (a new
	 * inode) or read by ialloc_check_allocated() once.  Only freeing this
	 * inode clears the bit (INODE_DELETED is set first), so while cached
	 * the bitmap need not be read again (inode_check_map_from()). */
	INODE_BITMAP_OK = 1u << 7,
};
/* Legacy orphan list: the inode's on-disk i_dtime holds the next orphan's
 * number; store it in inode->orphan_next_ino, then call this to put it in
 * the inode-table block (under its slot lock, no inode->lock needed, as
 * the kernel's NEXT_ORPHAN update of the previous inode). */
int inode_write_orphan_link(struct handle *h, struct inode *inode);
/* The creator of a new inode has filled it in (its fields, body and
 * first name): from now on iget() hands it out.  Not called for a new
 * inode that is given back. */
void inode_created(struct inode *inode);
/*
 * Allocate and initialise a new inode (ialloc_alloc() picks the number)
 * of the given mode, owned by the caller, in the cache with one reference,
 * with the link count of its first name (2 for a directory).
 * The caller holds dir's lock for writing and a handle; the new inode is
 * written to its inode-table block (never read from disk if every in-use
 * inode there is new).  Its lock is not held: nobody can reach it yet.
 */
int inode_new(struct handle *h, struct inode *dir, uint32_t mode, struct inode **out);
/*
 * What an inode allocation changed, so that an operation failing in its
 * handle can put back every byte (issue 9, case 5): the descriptor fields
 * the claim moved (ialloc.c) and the slot's previous bytes in its
 * inode-table buffer (inode.c; zeros for a block built zeroed).  On the
 * caller's stack, private to the creating thread.
 */
struct ialloc_undo {
	uint32_t group;
	uint32_t prev_flags, prev_itable_unused;  /* before the claim */
	bool valid;
};
#define INODE_UNDO_SLOT_MAX 1024
struct inode_undo {
	struct ialloc_undo ia;
	bool slot_saved;        /* false: inode_size > INODE_UNDO_SLOT_MAX */
	uint8_t slot[INODE_UNDO_SLOT_MAX];
};
/* inode_new() recording in *u (not NULL) what to put back. */
int inode_new_undoable(struct handle *h, struct inode *dir, uint32_t mode, struct inode **out,
		       struct inode_undo *u);
/* Undo: the new inode's slot gets back the bytes u saved (0, or -errno). */
int inode_restore_slot(struct handle *h, struct inode *n, const struct inode_undo *u);
/*
 * Write the inode's fields (and raw i_block / in-inode xattrs) to its
 * inode-table buffer with its checksum, and dirty the buffer.  Whoever
 * changes an inode's fields calls this before its handle ends; twice is
 * harmless.  Caller holds inode->lock for writing (or owns a new inode).
 */
int inode_write(struct handle *h, struct inode *inode);
/* Unmount: free inodes that lost their last link but were never released. */
void icache_delete_unlinked(struct uext4_fs *fs);
/* Current time, for timestamps. */
struct timespec fs_now(void);
/* The time the library stamps on fs: fixed_time under uext4_opts.use_fixed_time
 * (reproducible images), else fs_now(). */
struct timespec fs_time(const struct uext4_fs *fs);
static inline struct ext4_inode *inode_raw_mut(struct inode *i)
{ return (struct ext4_inode *)i->raw; }
/* Add or remove file system blocks to i_blocks (512-byte units). */
static inline void inode_add_blocks(struct uext4_fs *fs, struct inode *i, int64_t nblocks)
{ i->blocks += (uint64_t)(nblocks * (int64_t)(fs->block_size >> 9)); }
/* EXT4_FT_* directory-entry type of a mode. */
unsigned ftype_of_mode(uint32_t mode);
/* Block and offset of an inode in its inode table. */
int inode_location(struct uext4_fs *fs, uint64_t ino, uint64_t *blocknr, uint32_t *offset);
static inline const struct ext4_inode *inode_raw(const struct inode *i)
{ return (const struct ext4_inode *)i->raw; }
/* Size of the raw inode including extra fields (128 + i_extra_isize). */
static inline bool inode_has_inline_data(const struct inode *i)
{ return (i->flags & EXT4_INLINE_DATA_FL) != 0; }

/* ---------------------------------------------------------------- file.c
 * Logical-to-physical mapping (dispatching to extents or block maps),
 * reading file data, and reading a block of a directory or other inode.
 */
struct block_map {
	uint64_t lblk;      /* first logical block asked for */
	uint64_t pblk;      /* physical block, 0 for a hole */
	uint64_t len;       /* blocks mapped contiguously from lblk (or hole length) */
	bool unwritten;     /* reads as zeros */
	bool fresh;         /* MAP_CREATE: just allocated (or converted from
			     * unwritten); the caller must write every byte */
};
/* Map lblk of inode.  max_len bounds m->len.  A hole sets pblk = 0. */
int inode_map(struct uext4_fs *fs, struct inode *inode, uint64_t lblk, uint64_t max_len,
	      struct block_map *m);
/* Read logical block lblk of an inode through the buffer cache.
 * A hole returns -ENODATA. */
int inode_bread(struct uext4_fs *fs, struct inode *inode, uint64_t lblk,
		enum uext4_meta_kind kind, struct buf **out);
/* Read file data (regular files and symlink bodies), any offset. */
ssize_t file_pread(struct uext4_fs *fs, struct inode *inode, void *buf, size_t size, uint64_t off);
/* SEEK_DATA (want_data) or SEEK_HOLE from off: an offset, or -ENXIO. */
int64_t file_seek_data(struct uext4_fs *fs, struct inode *inode, uint64_t off, bool want_data);

/*
 * Write side of the mapping (extents.c / indirect.c behind file.c's
 * dispatch).  Caller holds inode->lock for writing and a handle.
 */
#define MAP_CREATE 1u       /* allocate the hole at lblk (up to max_len blocks) */
#define MAP_UNWRITTEN 2u    /* with MAP_CREATE: new blocks are unwritten (fallocate) */
#define MAP_CONVERT 4u      /* with MAP_CREATE: an unwritten run becomes written */
#define MAP_WHOLE 8u        /* with MAP_CREATE: one free run of max_len blocks where
			     * there is one (balloc_alloc_whole(); extents only) */
int inode_map_blocks(struct handle *h, struct inode *inode, uint64_t lblk, uint64_t max_len,
		     unsigned flags, struct block_map *m);
/* Free every block at or after logical block first (truncate). */
int inode_truncate_blocks(struct handle *h, struct inode *inode, uint64_t first);
/* Free the blocks of [lblk, lblk + len) leaving a hole (punch hole). */
int inode_punch_blocks(struct handle *h, struct inode *inode, uint64_t lblk, uint64_t len);
/* Data write path.  file_pwrite() takes inode->lock and its own handles;
 * off FILE_APPEND writes at the end of the file (O_APPEND). */
#define FILE_APPEND UINT64_MAX
ssize_t file_pwrite(struct uext4_fs *fs, struct inode *inode, const void *buf, size_t size,
		    uint64_t off);
/* Change i_size: shrink frees blocks and zeroes the tail of the last block,
 * grow leaves a hole.  Caller holds inode->lock (write) and a handle. */
int file_set_size(struct handle *h, struct inode *inode, uint64_t size);
/* fallocate modes of <linux/falloc.h>; takes inode->lock and handles. */
int file_fallocate(struct uext4_fs *fs, struct inode *inode, int mode, uint64_t off,
		   uint64_t len);
/* Write the data of a new symlink or small file body into the inode or a
 * block (inline when it fits in i_block). Caller holds lock + handle. */
int file_write_locked(struct handle *h, struct inode *inode, const void *buf, size_t size,
		      uint64_t off);

/* ---------------------------------------------------------------- extents.c */
int extent_map(struct uext4_fs *fs, struct inode *inode, uint64_t lblk, uint64_t max_len,
	       struct block_map *m);
/* ---------------------------------------------------------------- indirect.c */
int indirect_map(struct uext4_fs *fs, struct inode *inode, uint64_t lblk, uint64_t max_len,
		 struct block_map *m);
/* ---------------------------------------------------------------- inline.c */
/* Size of the inline data (i_block part + system.data xattr). */
int inline_size(struct uext4_fs *fs, struct inode *inode, size_t *size);
/* Copy inline data [off, off+size) into buf; returns bytes copied. */
ssize_t inline_pread(struct uext4_fs *fs, struct inode *inode, void *buf, size_t size, uint64_t off);

/* ---------------------------------------------------------------- dir.c (write side)
 * Caller holds dir->lock for writing and a handle (but see the *_shared
 * functions below); names are validated
 * (1..255 bytes, no '/', not "." or "..") by the caller.
 */
/* Same as dir_lookup(), with dir->lock already held (read or write). */
int dir_lookup_locked(struct uext4_fs *fs, struct inode *dir, const char *name, size_t len,
		      uint64_t *ino, unsigned *ftype);
/* Add an entry unless the name exists (-EEXIST): one probe and one leaf
 * scan instead of a lookup and an insert (the create path). */
int dir_add_excl(struct handle *h, struct inode *dir, const char *name, size_t len,
		 uint64_t ino, unsigned ftype);
/* Add an entry; the caller has checked that the name is not there. */
int dir_add(struct handle *h, struct inode *dir, const char *name, size_t len, uint64_t ino,
	    unsigned ftype);
/* Remove the entry name (which must point to ino); -ENOENT if absent. */
int dir_remove(struct handle *h, struct inode *dir, const char *name, size_t len, uint64_t ino);
/* Point the existing entry name at another inode (rename over, ".."). */
int dir_retarget(struct handle *h, struct inode *dir, const char *name, size_t len,
		 uint64_t ino, unsigned ftype);
/* Give a new directory its "." and ".." entries. */
int dir_make(struct handle *h, struct inode *dir, uint64_t parent);
/*
 * Parallel changes (issue 12 item 4): dir->lock held for READING and a
 * handle open.  Only an htree directory's changes that stay inside one
 * leaf block go this way; the leaf is locked (htree.c) from the check to
 * the change.  DIR_NEED_WIDE: nothing was done, the change needs
 * dir->lock for writing (a leaf or index split, a hash collision chain
 * across leaves, a damaged block: the wide path reports it).
 */
#define DIR_NEED_WIDE 1
/* Can dir take shared changes at all (dir->lock held)? */
bool dir_can_share(struct uext4_fs *fs, const struct inode *dir);
/* Add name unless it exists (-EEXIST): make() is called with the leaf
 * locked and room for the entry found, makes the inode and writes the
 * directory's inode (dir_touch_shared()); it returns its inode number, or
 * an error after undoing what it did (then no entry is added). */
int dir_add_shared(struct handle *h, struct inode *dir, const char *name, size_t len,
		   unsigned ftype, int (*make)(void *ctx, uint64_t *ino), void *ctx);
/* Remove name, which must point to ino (-ENOENT if absent): commit() is
 * called with the entry found and locked, changes the inode and the
 * directory's inode, or undoes itself and returns an error. */
int dir_remove_shared(struct handle *h, struct inode *dir, const char *name, size_t len,
		      uint64_t ino, int (*commit)(void *ctx), void *ctx);
/* Set dir's mtime and ctime and write its inode, under the directory's
 * attribute lock: with dir->lock shared, several writers do this at once. */
int dir_touch_shared(struct handle *h, struct inode *dir);
/* A directory's mtime and ctime, consistent with each other while
 * dir_touch_shared() runs elsewhere (a seqcount: no lock, nothing written). */
void dir_read_times(const struct inode *dir, struct timespec *mtime, struct timespec *ctime);
/* 1 if the directory holds only "." and "..", 0 if not, or -errno. */
int dir_is_empty(struct uext4_fs *fs, struct inode *dir);

/* ---------------------------------------------------------------- dir.c / htree.c / dirhash.c */
int dir_lookup(struct uext4_fs *fs, struct inode *dir, const char *name, size_t len,
	       uint64_t *ino, unsigned *ftype);
int dir_iterate(struct uext4_fs *fs, struct inode *dir, uint64_t cookie,
		uext4_filldir_t fill, void *ctx);
/* htree (dx) directories; called by dir.c when EXT4_INDEX_FL is set. */
int htree_lookup(struct uext4_fs *fs, struct inode *dir, const char *name, size_t len,
		 uint64_t *ino, unsigned *ftype);
int htree_iterate(struct uext4_fs *fs, struct inode *dir, uint64_t cookie,
		  uext4_filldir_t fill, void *ctx);
/* Directory name hash (Documentation/filesystems/ext4/directory.rst). */
int dirhash(int version, const uint32_t seed[4], const char *name, size_t len,
	    uint32_t *hash, uint32_t *minor_hash);

/* ---------------------------------------------------------------- xattr.c */
/* Get an xattr by full name ("user.foo"); size 0 returns the needed length. */
ssize_t xattr_get(struct uext4_fs *fs, struct inode *inode, const char *name, void *buf, size_t size);
ssize_t xattr_list(struct uext4_fs *fs, struct inode *inode, char *buf, size_t size);
/* Raw lookup by index and suffix, in-inode first then the block. */
ssize_t xattr_get_raw(struct uext4_fs *fs, struct inode *inode, int index,
		      const char *name, size_t namelen, void *buf, size_t size);

/* Structural check of the in-inode xattr area, at inode load. */
int xattr_check_ibody(struct uext4_fs *fs, struct inode *inode);
/* The xattr block (if any) reads and passes its checks; 0 or -EUCLEAN. */
int xattr_check_block(struct uext4_fs *fs, struct inode *inode);
/*
 * Write side.  Caller holds inode->lock for writing and a handle.  value
 * NULL removes; flags XATTR_CREATE / XATTR_REPLACE.  POSIX ACL names take
 * the VFS format and are stored in ext4's.
 */
int xattr_set(struct handle *h, struct inode *inode, const char *name, const void *value,
	      size_t size, int flags);
/* By index and suffix (inline data uses system.data). */
int xattr_set_raw(struct handle *h, struct inode *inode, int index, const char *name,
		  size_t namelen, const void *value, size_t size, int flags);
/* Deleting an inode: drop its xattr block reference and EA inodes. */
int xattr_release_inode(struct handle *h, struct inode *inode);
/* Unmount: free the shared-block index. */
void xattr_index_destroy(struct uext4_fs *fs);

/* ---------------------------------------------------------------- ialloc.c
 * Caller holds dir->lock for writing and a handle.
 */
/* Pick a group and claim a free inode for a new inode of mode in dir. */
int ialloc_alloc(struct handle *h, struct inode *dir, uint32_t mode, uint64_t *ino);
/* ialloc_alloc() recording in *u what the claim changed, for ialloc_free_undo(). */
int ialloc_alloc_undo(struct handle *h, struct inode *dir, uint32_t mode, uint64_t *ino,
		      struct ialloc_undo *u);
/* Return inode ino to its group (its fields are already cleared). */
int ialloc_free(struct handle *h, uint64_t ino, bool was_dir);
/* Would ialloc_free() of ino succeed (its bit is set)?  Reads only: 0 or
 * -EUCLEAN naming the bitmap (nothing recorded). */
int ialloc_check_allocated(struct uext4_fs *fs, uint64_t ino);
/* Would balloc_free() of these blocks succeed?  Reads only (see balloc.c). */
int balloc_check_allocated(struct uext4_fs *fs, uint64_t first, uint64_t count);
/* ialloc_free() of an inode this handle claimed: also puts back the
 * descriptor fields the claim changed, where no other claim needs them. */
int ialloc_free_undo(struct handle *h, uint64_t ino, bool was_dir, const struct ialloc_undo *u);

/* ---------------------------------------------------------------- balloc.c */
/*
 * Allocate between 1 and want contiguous blocks, as near goal as possible
 * (goal 0: balloc_goal()).  Counts, bitmaps and descriptors are updated;
 * the caller accounts i_blocks.  -ENOSPC when none is free (for non-root
 * callers: none outside the reserved blocks).
 */
int balloc_alloc(struct handle *h, struct inode *inode, uint64_t goal, uint32_t want,
		 uint64_t *first, uint32_t *got);
/* The same, but the first free run of all `want` blocks (capped at a group)
 * from the goal on, where there is one anywhere; else as balloc_alloc():
 * a bulk fill keeps each file in one piece (populate, MAP_WHOLE). */
int balloc_alloc_whole(struct handle *h, struct inode *inode, uint64_t goal, uint32_t want,
		       uint64_t *first, uint32_t *got);
#define BALLOC_METADATA 1u  /* the blocks held metadata: forget cached copies */
int balloc_free(struct handle *h, struct inode *inode, uint64_t first, uint32_t count,
		unsigned flags);
/* Transaction tid committed: the blocks it freed may be allocated again
 * (called for each committed transaction, in order).  Until then they are
 * not handed out, or a crash could leave the old owner pointing at a new
 * owner's data. */
void balloc_release_busy(struct uext4_fs *fs, uint32_t tid);
/* Are blocks waiting for a commit to become allocatable? (ENOSPC retry) */
bool balloc_has_busy(struct uext4_fs *fs);
/* Where to start looking for an inode that has no block to follow. */
uint64_t balloc_goal(struct uext4_fs *fs, struct inode *inode);
/* Give back an inode's preallocated, unused blocks (close, truncate). */
void balloc_release_prealloc(struct uext4_fs *fs, struct inode *inode);
/* Allocator state of a read-write mount. */
int balloc_init(struct uext4_fs *fs);
void balloc_destroy(struct uext4_fs *fs);

/* ---------------------------------------------------------------- api.c */
/* Identity set by uext4_set_caller() for this thread. */
uint32_t caller_uid(void);
uint32_t caller_gid(void);

/* ---------------------------------------------------------------- symlink.c */
ssize_t symlink_read(struct uext4_fs *fs, struct inode *inode, char *buf, size_t size);
/* The body of a new symlink: fast (in i_block) below 60 bytes, else a
 * block.  Caller holds the inode's write lock and a handle. */
int symlink_write(struct handle *h, struct inode *inode, const char *target, size_t len);

#endif
