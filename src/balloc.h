/*
 * balloc.h - block allocation (balloc.c).
 */
#ifndef UEXT4_BALLOC_H
#define UEXT4_BALLOC_H

#include "internal.h"

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
/*
 * Drop the allocator's in-memory state of fs (preallocation windows).
 * Call at unmount once no allocation can run.  The windows themselves
 * belong to their inodes (inode->pa) and are freed by
 * balloc_release_prealloc(), before or after this.
 */
void balloc_destroy(struct uext4_fs *fs);

/*
 * Which group metadata [first, first + count) touches (all inside the
 * file system): "superblock or group descriptors", "block bitmap", "inode
 * bitmap" or "inode table", of group *owner; NULL if none.  Reads only
 * what the mount fixed (the descriptors' locations): no lock.
 */
const char *balloc_metadata_in(struct uext4_fs *fs, uint64_t first, uint64_t count,
			       uint32_t *owner);

/* Would balloc_free() of these blocks succeed?  Reads only (see balloc.c). */
int balloc_check_allocated(struct uext4_fs *fs, uint64_t first, uint64_t count);

/* Fast-commit replay: set (used) or clear the bits of a range whatever
 * they were, with the counts (as the kernel's ext4_mb_mark_bb()). */
int balloc_replay_mark(struct handle *h, uint64_t first, uint64_t count, bool used);

#endif
