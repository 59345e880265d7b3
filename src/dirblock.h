/*
 * dirblock.h - one directory block (dirblock.c), what the linear (dir.c)
 * and the htree (htree.c) code share: reading and validating a leaf,
 * finding, inserting and deleting within it, its checksum tail and hint,
 * appending a block.  Not used outside the directory code.
 *
 * Locking: every read function here is called with dir->lock held (the
 * caller keeps i_block and i_size stable), every write function with
 * dir->lock held for writing and a handle open, or dir->lock for reading
 * and the htree leaf's lock (htree.c's parallel changes); none takes a
 * lock besides the buffer cache's and the allocators' inside
 * dir_append_block.
 */
#ifndef UEXT4_DIRBLOCK_H
#define UEXT4_DIRBLOCK_H

#include "internal.h"
#include "ondisk.h"

#include <stdbool.h>
#include <string.h>

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

/*
 * Casefolded directories (+F on a casefold file system): a name matches an
 * entry with the same bytes or, failing that, with the same nfdicf form
 * (utf8.c), as the kernel's generic_ci_match(); a name that is not valid
 * UTF-8 matches only its own bytes.  dir->flags is read with dir->lock
 * held (+F changes only on an empty directory, under it).
 */
static inline bool dir_casefolded(const struct uext4_fs *fs, const struct inode *dir)
{
	return FS_HAS_INCOMPAT(fs, CASEFOLD) && (dir->flags & EXT4_CASEFOLD_FL);
}
/*
 * The nfdicf form of name (utf8.c; ASCII folded here, as lower case), or
 * -EINVAL for a name that is not valid UTF-8.  *folded points into a
 * per-thread buffer kept for the last name folded, so an operation folds
 * its name once however many entries it compares (and the next operation
 * on the same name not at all); valid until this thread folds another name.
 */
ssize_t dir_fold_query(const char *name, size_t len, const char **folded);
/* The casefolded comparison, after the bytes differed. */
bool dir_name_match_folded(const char *name, size_t len, const char *ename, size_t elen);
/* Does live entry e hold name (in dir's way of comparing)? */
static inline bool dir_name_eq(const struct uext4_fs *fs, const struct inode *dir,
			       const struct dir_ent *e, const char *name, size_t len)
{
	if (e->name_len == len && memcmp(e->name, name, len) == 0)
		return true;
	return dir_casefolded(fs, dir) && dir_name_match_folded(name, len, e->name, e->name_len);
}

/* rec_len as stored, decoded for block sizes up to 64 KiB. */
unsigned dir_rec_len(const struct uext4_fs *fs, uint16_t disk);
/*
 * Check the dirent at base[off] against a region ending at end.  Returns
 * NULL and fills e when it is sound, else what is wrong with it.  Inline:
 * the leaf scans (dirblock.c) and the inline-data directories (dir.c)
 * check every entry with it.
 */
static inline __attribute__((always_inline)) const char *dirent_problem(const struct uext4_fs *fs, const uint8_t *base,
				  unsigned off, unsigned end, struct dir_ent *e)
{
	const struct ext4_dir_entry_2 *de;

	e->rec_len = 0;
	e->name_len = 0;
	if (off + DIRENT_HDR_LEN > end)
		return "entry header crosses the end of the block";
	de = (const struct ext4_dir_entry_2 *)(base + off);
	e->ino = le32(de->inode);
	e->rec_len = dir_rec_len(fs, de->rec_len);
	e->name_len = de->name_len;
	e->file_type = de->file_type;
	e->name = de->name;
	if (e->rec_len < DIRENT_MIN_LEN)
		return "rec_len smaller than 12";
	if (e->rec_len % 4)
		return "rec_len not a multiple of 4";
	if (EXT4_DIR_REC_LEN(e->name_len) > e->rec_len)
		return "rec_len too small for name_len";
	if (e->rec_len > end - off)
		return "entry crosses the end of the block or the checksum tail";
	if (e->ino > fs->inodes_count)
		return "inode number out of range";
	if (e->ino && e->name_len == 0)
		return "entry with an empty name";
	return NULL;
}
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
/* Find name, or else room for need bytes, in one scan: -EEXIST (the name
 * is there), 1 and *off (room), 0 (no room), or an error; the leaf's hint
 * answers without the scan where it can. */
int dir_leaf_find_name_or_room(struct uext4_fs *fs, struct inode *dir,
			       const struct dir_leaf *lf, const char *name, size_t len,
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

#endif
