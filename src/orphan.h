/*
 * orphan.h - orphan inodes (orphan.c): the lists' entry points, and what
 * inode.c and the tests use of their internals.
 */
#ifndef UEXT4_ORPHAN_H
#define UEXT4_ORPHAN_H

#include "internal.h"

/*
 * Rank of the legacy list's mutex: taken inside a handle (RANK_HANDLE),
 * possibly under inode locks, never under a group lock; under it only the
 * inode-table buffer of the inode being linked is read and dirtied
 * (RANK_BUF, bcache shards, trans.c) and inode.c's slot lock (a leaf flag).
 */
#define RANK_ORPHAN_LIST 26

/*
 * True while orphan_cleanup() runs: iget() should then accept inodes with
 * no links (they are the orphans being freed), as the kernel's ext4_iget
 * does in its EXT4_ORPHAN_FS mount state.
 */
bool orphan_cleanup_running(const struct uext4_fs *fs);

/* Test/diagnostic counts: free entries of the orphan file (sum of the
 * per-block counters), its capacity, and inodes on the legacy list (in
 * memory).  All 0 without the orphan state. */
struct orphan_stats {
	uint32_t file_blocks, file_capacity, file_free;
	uint32_t list_len;
};
void orphan_get_stats(struct uext4_fs *fs, struct orphan_stats *st);

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


#endif
