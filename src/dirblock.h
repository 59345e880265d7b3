/*
 * dirblock.h - what dir.c and htree.c share: reading and validating
 * directory leaf blocks.  Not used outside the directory code.
 *
 * Locking: every read function here is called with dir->lock held (the
 * caller keeps i_block and i_size stable), every write function with
 * dir->lock held for writing and a handle open, except htree_par_*
 * (dir->lock for reading, and the leaf lock they take themselves); none
 * takes a lock besides the buffer cache's, the htree leaf locks (htree.c)
 * and the allocators' inside dir_append_block.
 */
#ifndef UEXT4_DIRBLOCK_H
#define UEXT4_DIRBLOCK_H

#include "internal.h"
#include "lock.h"

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

/* htree lookup with dir->lock already held (htree.c). */
int htree_lookup_locked(struct uext4_fs *fs, struct inode *dir, const char *name,
			size_t len, uint64_t *ino, unsigned *ftype);

/* ------------------------------------------------------------ write side
 * Called with dir->lock held for writing and a handle open.
 */

/* Where an entry was found, for changing it: the leaf (buffer held), the
 * entry's offset and the offset of the entry before it in the same block
 * (NO_PREV when it is the block's first). */
#define NO_PREV UINT32_MAX
struct dir_slot {
	struct dir_leaf lf;
	unsigned off, prev;
	bool dx_root;           /* the block is the htree root (dx checksum) */
	uint64_t ino;
};

/* rec_len as stored on disk (inverse of dir_rec_len). */
unsigned dir_rec_len_disk(const struct uext4_fs *fs, unsigned len);
/* Bytes usable by dirents in a leaf block (block size minus the tail). */
unsigned dir_leaf_space(const struct uext4_fs *fs);
/* Initialise the checksum tail of a leaf (no-op without metadata_csum). */
void dir_leaf_set_tail(const struct uext4_fs *fs, uint8_t *data);
/* Write a dirent at at (file type dropped without the filetype feature). */
void dirent_put(const struct uext4_fs *fs, uint8_t *at, uint64_t ino, unsigned rec_len,
		const char *name, unsigned len, unsigned ftype);
/* Find an entry whose slack (or free space) holds need bytes: 1 and *off,
 * 0 when the leaf is full, or an error. */
int dir_leaf_find_room(struct uext4_fs *fs, struct inode *dir, const struct dir_leaf *lf,
		       unsigned need, unsigned *off);
/* Put a new entry in the room found at off (splitting a live entry). */
void dir_leaf_put(const struct uext4_fs *fs, uint8_t *data, unsigned off, uint64_t ino,
		  const char *name, unsigned len, unsigned ftype);
/* dir_leaf_put() and dir_leaf_dirty() of a leaf buffer, keeping the leaf's
 * hint (dir.c) when it had one: for the room dir_leaf_find_name_or_room()
 * or dir_leaf_find_room() just found, the leaf still held for writing. */
void dir_leaf_insert(struct handle *h, struct inode *dir, struct buf *b, unsigned off,
		     uint64_t ino, const char *name, unsigned len, unsigned ftype);
/* Find name in a leaf with the previous entry: 1 found, 0 not, or error. */
int dir_leaf_locate(struct uext4_fs *fs, struct inode *dir, const struct dir_leaf *lf,
		    const char *name, size_t len, unsigned *off, unsigned *prev);
/* Append a zero-filled block to the directory (size grows by a block);
 * the buffer is returned with create access taken. */
int dir_append_block(struct handle *h, struct inode *dir, uint64_t *lblk, struct buf **out);
/* Mark a leaf / index block dirty with its checksum kind. */
void dir_leaf_dirty(struct handle *h, struct inode *dir, struct buf *b);
void dir_dx_dirty(struct handle *h, struct inode *dir, struct buf *b);

/* htree.c write side. */
/* dir_add_excl()'s htree part: 0 added, -EEXIST, 1 = use lookup + add. */
int htree_add_excl(struct handle *h, struct inode *dir, const char *name, size_t len,
		   uint64_t ino, unsigned ftype);
int dir_leaf_find_name_or_room(struct uext4_fs *fs, struct inode *dir,
			       const struct dir_leaf *lf, const char *name, size_t len,
			       unsigned need, unsigned *off);
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

/* htree (dx) directories; called by dir.c when EXT4_INDEX_FL is set. */
int htree_lookup(struct uext4_fs *fs, struct inode *dir, const char *name, size_t len,
		 uint64_t *ino, unsigned *ftype);
int htree_iterate(struct uext4_fs *fs, struct inode *dir, uint64_t cookie,
		  uext4_filldir_t fill, void *ctx);

#endif
