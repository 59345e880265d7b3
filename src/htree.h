/*
 * htree.h - the hashed index of a directory (htree.c), as dir.c uses it
 * when EXT4_INDEX_FL is set.  htree.c works on leaf blocks through
 * dirblock.h only; it never calls into dir.c.
 */
#ifndef UEXT4_HTREE_H
#define UEXT4_HTREE_H

#include "dirblock.h"
#include "internal.h"
#include "lock.h"

/* htree lookup with dir->lock held (read or write): 0, -ENOENT, an error,
 * or HTREE_DAMAGED: the index is damaged (the message names it), the
 * caller scans the leaves instead, as the kernel does. */
#define HTREE_DAMAGED 1
int htree_lookup_locked(struct uext4_fs *fs, struct inode *dir, const char *name,
			size_t len, uint64_t *ino, unsigned *ftype);
int htree_iterate(struct uext4_fs *fs, struct inode *dir, uint64_t cookie,
		  uext4_filldir_t fill, void *ctx);

/* ------------------------------------------------------------ write side
 * dir->lock held for writing and a handle open (but see htree_par_*).
 */
/* dir_add_excl()'s htree part: 0 added, -EEXIST, 1 = use lookup + add. */
int htree_add_excl(struct handle *h, struct inode *dir, const char *name, size_t len,
		   uint64_t ino, unsigned ftype);
int htree_add(struct handle *h, struct inode *dir, const char *name, size_t len,
	      uint64_t ino, unsigned ftype);
/* Turn a one-block linear directory into an htree, then add the name. */
int htree_make_indexed(struct handle *h, struct inode *dir, const char *name, size_t len,
		       uint64_t ino, unsigned ftype);
/* Parallel changes (dir.c's dir_add_shared(), dir_remove_shared()):
 * dir->lock held for reading, a handle open.  The leaf the name hashes to
 * is locked for writing and write access taken; hp->s says where. */
struct htree_par {
	struct dir_slot s;
	struct urwlock *lock;   /* the leaf's lock, held until htree_par_end() */
};
/* For an insert: 0 room at hp->s.off, -EEXIST (the name is there), or 1:
 * only the wide path can (a split, a collision chain, an error). */
int htree_par_add_begin(struct handle *h, struct inode *dir, const char *name, size_t len,
			struct htree_par *hp);
/* For a removal: 0 found (hp->s.ino, off, prev), -ENOENT, or 1 as above. */
int htree_par_find(struct handle *h, struct inode *dir, const char *name, size_t len,
		   struct htree_par *hp);
/* The lock of an htree directory's block lblk (readers: for reading). */
struct urwlock *htree_leaf_lock(const struct inode *dir, uint64_t lblk);
/* Release the leaf and its lock (nothing is held after a non-0 return). */
void htree_par_end(struct uext4_fs *fs, struct htree_par *hp);
/* Find name's entry in an htree's leaves (not "." / ".."). */
int htree_find_slot(struct uext4_fs *fs, struct inode *dir, const char *name, size_t len,
		    struct dir_slot *s);

#endif
