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

#endif
