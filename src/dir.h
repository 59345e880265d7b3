/*
 * dir.h - directories: lookup, iteration and changes (dir.c, over htree.c).
 */
#ifndef UEXT4_DIR_H
#define UEXT4_DIR_H

#include "internal.h"

/* ---------------------------------------------------------------- dir.c (write side)
 * Caller holds dir->lock for writing and a handle (but see the *_shared
 * functions below); names are validated
 * (1..255 bytes, no '/', not "." or "..") by the caller.
 */
/* Same as dir_lookup(), with dir->lock already held (read or write). */
int dir_lookup_locked(struct uext4_fs *fs, struct inode *dir, const char *name, size_t len,
		      uint64_t *ino, unsigned *ftype);
/* May name be added to dir?  -EINVAL for a name that is not valid UTF-8 in
 * a casefolded directory of a strict file system (the kernel's
 * generic_ci_validate_strict_name()); call with dir->lock held, before the
 * change, so that a refused name changes nothing. */
int dir_check_new_name(struct uext4_fs *fs, struct inode *dir, const char *name, size_t len);
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
 * Parallel changes (many threads creating in one directory): dir->lock
 * held for READING and a handle open.  Only an htree directory's changes
 * that stay inside one
 * leaf block go this way; the leaf is locked (htree.c) from the check to
 * the change.  DIR_NEED_WIDE: nothing was done, the change needs
 * dir->lock for writing (a leaf or index split, a hash collision chain
 * across leaves, a damaged block: the wide path reports it).
 */
#define DIR_NEED_WIDE 1
/* dir_remove_shared(): the name points to another inode now (renamed
 * over since the caller looked it up); nothing was done. */
#define DIR_MOVED 2
/* Can dir take shared changes at all (dir->lock held)? */
bool dir_can_share(struct uext4_fs *fs, const struct inode *dir);
/* Add name unless it exists (-EEXIST): make() is called with the leaf
 * locked and room for the entry found, makes the inode and writes the
 * directory's inode (dirtimes_touch_shared()); it returns its inode number, or
 * an error after undoing what it did (then no entry is added). */
int dir_add_shared(struct handle *h, struct inode *dir, const char *name, size_t len,
		   unsigned ftype, int (*make)(void *ctx, uint64_t *ino), void *ctx);
/* Remove name, which must point to ino (-ENOENT if absent, DIR_MOVED if
 * it points elsewhere): commit() is called with the entry found and
 * locked, changes the inode and the directory's inode, or undoes itself
 * and returns an error. */
int dir_remove_shared(struct handle *h, struct inode *dir, const char *name, size_t len,
		      uint64_t ino, int (*commit)(void *ctx), void *ctx);
/* 1 if the directory holds only "." and "..", 0 if not, or -errno. */
int dir_is_empty(struct uext4_fs *fs, struct inode *dir);

/* ---------------------------------------------------------------- dir.c / htree.c / dirhash.c */
int dir_lookup(struct uext4_fs *fs, struct inode *dir, const char *name, size_t len,
	       uint64_t *ino, unsigned *ftype);
int dir_iterate(struct uext4_fs *fs, struct inode *dir, uint64_t cookie,
		uext4_filldir_t fill, void *ctx);

#endif
