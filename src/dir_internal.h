/*
 * dir_internal.h - what dir.c and htree.c share: reading and validating
 * directory leaf blocks.  Not used outside the directory code.
 *
 * Locking: every function here is called with dir->lock held as a reader
 * (the caller keeps i_block and i_size stable); none takes a lock besides
 * the buffer cache's.
 */
#ifndef UEXT4_DIR_INTERNAL_H
#define UEXT4_DIR_INTERNAL_H

#include "internal.h"

/* The minimum record: a dirent with a 1..4 byte name. */
#define DIRENT_MIN_LEN 12u
#define DIRENT_HDR_LEN 8u
#define DIR_TAIL_LEN 12u

/* A leaf block being read: the buffer and where its dirents end. */
struct dir_leaf {
	struct buf *b;
	uint64_t lblk;
	unsigned end;   /* block size, or the offset of the checksum tail */
};

/* A dirent copied out of a block (name points into the block or a copy). */
struct dir_ent {
	const char *name;
	unsigned name_len;
	uint64_t ino;
	unsigned file_type;  /* EXT4_FT_* as on disk */
	unsigned rec_len;
};

/* rec_len as stored, decoded for block sizes up to 64 KiB. */
unsigned dir_rec_len(const struct uext4_fs *fs, uint16_t disk);
/* Read logical block lblk of dir as a leaf: checksum verified once per
 * buffer, dx index blocks of an htree directory recognised and their
 * checksum left to htree.c.  A hole returns -ENODATA (no message). */
int dir_read_leaf(struct uext4_fs *fs, struct inode *dir, uint64_t lblk, struct dir_leaf *lf);
void dir_release_leaf(struct uext4_fs *fs, struct dir_leaf *lf);
/* Validate the dirent at byte off of the leaf and describe it. */
int dir_leaf_entry(struct uext4_fs *fs, struct inode *dir, const struct dir_leaf *lf,
		   unsigned off, struct dir_ent *e);
/* Search one leaf for name; 0 and *found set, or a negative error. */
int dir_leaf_find(struct uext4_fs *fs, struct inode *dir, const struct dir_leaf *lf,
		  const char *name, size_t len, bool *found, uint64_t *ino, unsigned *ftype);
/* DT_* value for an on-disk file type (DT_UNKNOWN without filetype). */
unsigned dir_dtype(const struct uext4_fs *fs, unsigned file_type);
/* Linear search of a block-mapped directory, dir->lock held. */
int dir_linear_lookup_locked(struct uext4_fs *fs, struct inode *dir, const char *name,
			     size_t len, uint64_t *ino, unsigned *ftype);

#endif
