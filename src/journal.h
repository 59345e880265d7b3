/*
 * journal.h - the JBD2 journal: log writer (journal.c) and recovery (recovery.c).
 * On-disk format in jbd2.h.
 */
#ifndef UEXT4_JOURNAL_H
#define UEXT4_JOURNAL_H

#include "internal.h"

/* ---------------------------------------------------------------- journal.c
 * JBD2 journal in the internal journal inode (EXT4_JOURNAL_INO) or on an
 * external journal device (struct journal_place says which).  trans.c
 * drives it: one call per transaction, with the transaction's metadata
 * blocks already copied and checksummed.  On-disk format in src/jbd2.h.
 */
struct journal;
/*
 * What the journal needs from the file system above it, as jbd2 gets it
 * from ext4: the journal lives in a file (the journal inode) that only the
 * file system can find and map, or on a device of its own (an external
 * journal, mke2fs -O journal_dev) that only the mount opened; and a replay
 * that skipped blocks must mark the file system as having errors.  mount.c
 * fills this in (super_journal_host); the journal calls nothing else above
 * the buffer cache.  get() finds the journal and holds it until put(),
 * filling in *p; map() maps count blocks from lblk of p->file (*pblk 0 for
 * a hole, *len blocks contiguous) on p->dev.  Each returns 0 or -errno
 * with the message set.
 */
struct journal_place {
	void *file;             /* the host's handle, given back to map() and put() */
	struct bdev *dev;       /* the device the log is on: fs->dev, or the external one */
	uint64_t size;          /* bytes the log may span (s_maxlen must fit) */
	uint64_t id;            /* the journal inode (messages); 0 for a device */
	uint64_t lo, hi;        /* map() may only give device blocks in [lo, hi) */
	/* External: the file system's UUID, which must be the log's one user
	 * (s_nr_users 1, as the kernel requires); NULL for an inode. */
	const uint8_t *user;
};
struct journal_host {
	int (*get)(struct uext4_fs *fs, struct journal_place *p);
	int (*map)(struct uext4_fs *fs, void *file, uint32_t lblk, uint32_t count, uint64_t *pblk,
		   uint64_t *len);
	void (*put)(struct uext4_fs *fs, void *file);
	/* Recovery skipped logged blocks: set EXT4_ERROR_FS in the superblock
	 * on the device (after the replay, before the log is marked empty). */
	int (*mark_error)(struct uext4_fs *fs);
	/* The fast-commit area after the log (nblocks blocks read in), with
	 * tid the transaction after the last committed one: check it before
	 * anything is replayed; *fc gets what is to be replayed (NULL: none)
	 * or the refusal is returned.  fc_free() drops it.  NULL: the area is
	 * not looked at. */
	int (*fc_scan)(struct uext4_fs *fs, const uint8_t *area, uint32_t nblocks, uint32_t tid,
		       void **fc);
	void (*fc_free)(void *fc);
	/* The time a commit block records (fixed for reproducible images). */
	struct timespec (*now)(const struct uext4_fs *fs);
};
/* Read-write mount, after any recovery: map the journal (inode or external
 * device), read and check the journal superblock (v2; refuses unknown
 * features by name; an external log must name this file system as its one
 * user); with metadata_csum switch the journal to checksum v3.
 * *out is NULL (and 0 returned) when the file system has no journal. */
int journal_open(struct uext4_fs *fs, const struct journal_host *host, struct journal **out);
void journal_close(struct journal *j);
/* A UUID as text (37 bytes with the NUL), for messages naming journals. */
void journal_uuid_str(const uint8_t *uuid, char *out);
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
	/* Fast commits to replay (the host's fc_scan() result), or NULL.  Then
	 * the journal is left as it was, for the caller to empty with
	 * journal_recover_finish(next_tid) once they are replayed. */
	void *fc;
	uint32_t next_tid;
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
int journal_recover(struct uext4_fs *fs, const struct journal_host *host,
		    struct journal_replay *r);
/* After the fast commits of r->fc were replayed: flush, mark the journal
 * empty with next_tid, flush. */
int journal_recover_finish(struct uext4_fs *fs, const struct journal_host *host, uint32_t next_tid);


#endif
