/*
 * ialloc.h - inode allocation (ialloc.c).
 */
#ifndef UEXT4_IALLOC_H
#define UEXT4_IALLOC_H

#include "inode.h"
#include "internal.h"

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
/* ialloc_free() of an inode this handle claimed: also puts back the
 * descriptor fields the claim changed, where no other claim needs them. */
int ialloc_free_undo(struct handle *h, uint64_t ino, bool was_dir, const struct ialloc_undo *u);


/* Fast-commit replay: set ino's bit with its group's counts unless set
 * (as the kernel's ext4_mark_inode_used()). */
int ialloc_replay_mark_used(struct handle *h, uint64_t ino, bool is_dir);

#endif
