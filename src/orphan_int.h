/*
 * orphan_int.h - what orphan.c offers beyond internal.h's "orphan.c"
 * section (for inode.c and the tests).
 */
#ifndef UEXT4_ORPHAN_INT_H
#define UEXT4_ORPHAN_INT_H

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

/*
 * inode.c: the unlink that frees the inode in its own handle, never on an
 * orphan list (issue 12; see inode_unlink_can_free()).  With n->lock held
 * for writing: can_free says whether n (its last link, held only by the
 * caller) qualifies; in the handle that removes the name, claim marks it
 * deleted unless a reference came meanwhile (false: use the orphan path),
 * unclaim takes that back if the unlink is undone, and free_claimed
 * frees it (0, or the error after falling back to an orphan list).
 */
bool inode_unlink_can_free(struct uext4_fs *fs, struct inode *n);
bool inode_claim_unheld(struct inode *n);
void inode_unclaim(struct inode *n);
int inode_free_claimed(struct handle *h, struct inode *n);

#endif
