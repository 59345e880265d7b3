/*
 * ifree.h - freeing an unlinked inode (ifree.c), and the read-only checks
 * that an unlink or a shrinking truncate makes before it commits to a
 * free.
 */
#ifndef UEXT4_IFREE_H
#define UEXT4_IFREE_H

#include "internal.h"

/* struct icache_host's free_unlinked: free an inode with no links whose
 * last reference is going (the caller holds no inode lock and no handle);
 * force: at unmount, though still open.  0 or the error of a failed free,
 * recorded on the file system. */
int inode_free_unlinked(struct uext4_fs *fs, struct inode *inode, bool force);
/* Give back inode's blocks (a truncate to 0) and xattrs in h, as a free
 * does first (the undo of a new inode too).  0 or the error. */
int inode_release_contents(struct handle *h, struct inode *inode);
/* Would freeing inode meet corruption in its extent tree (read-only walk,
 * for an unlink about to drop the last link)?  0 or the error. */
int inode_check_freeable(struct uext4_fs *fs, struct inode *inode);
/* An unlink that claimed the inode (inode_claim_free(), icache.h) frees
 * it in h, the handle that drops its last link.  If that fails before it
 * is marked deleted, it is left as any unlinked inode: on an orphan list,
 * freed (or the failure reported) at its last iput().  0, or the error of
 * a number left allocated. */
int inode_free_now(struct handle *h, struct inode *inode);
/* The same walk from logical block lblk on: what a shrinking truncate to
 * lblk will free (checked before it goes on the orphan list, so that a
 * corrupt tree is refused before anything is written). */
int inode_check_map_from(struct uext4_fs *fs, struct inode *inode, uint64_t lblk);

#endif
