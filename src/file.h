/*
 * file.h - file data: mapping, reads and writes (file.c, over extents.c,
 * indirect.c and inline.c, which share data.h).
 */
#ifndef UEXT4_FILE_H
#define UEXT4_FILE_H

#include "internal.h"

/* ---------------------------------------------------------------- file.c
 * Logical-to-physical mapping (dispatching to extents or block maps),
 * reading file data, and reading a block of a directory or other inode.
 */
struct block_map {
	uint64_t lblk;      /* first logical block asked for */
	uint64_t pblk;      /* physical block, 0 for a hole */
	uint64_t len;       /* blocks mapped contiguously from lblk (or hole length) */
	bool unwritten;     /* reads as zeros */
	bool fresh;         /* MAP_CREATE: just allocated (or converted from
			     * unwritten); the caller must write every byte */
};
/* Map lblk of inode.  max_len bounds m->len.  A hole sets pblk = 0. */
int inode_map(struct uext4_fs *fs, struct inode *inode, uint64_t lblk, uint64_t max_len,
	      struct block_map *m);
/* Walk inode's map from lblk on, read-only: every mapped block allocated,
 * every tree or indirect block sound (data.h).  0 or the error a write
 * there would meet.  Caller holds inode->lock. */
int file_check_map_from(struct uext4_fs *fs, struct inode *inode, uint64_t lblk);
/* Read logical block lblk of an inode through the buffer cache.
 * A hole returns -ENODATA. */
int inode_bread(struct uext4_fs *fs, struct inode *inode, uint64_t lblk,
		enum uext4_meta_kind kind, struct buf **out);
/* Read file data (regular files and symlink bodies), any offset. */
ssize_t file_pread(struct uext4_fs *fs, struct inode *inode, void *buf, size_t size, uint64_t off);
/* Read [off, off+size) of a block- or extent-mapped inode regardless of
 * i_size (holes read as zeros): fs-verity's Merkle tree and descriptor
 * live past the end of the file.  Caller holds inode->lock. */
ssize_t file_read_raw(struct uext4_fs *fs, struct inode *inode, void *buf, size_t size,
		      uint64_t off);
/* Largest size a file of this inode's mapping can have (s_maxbytes). */
uint64_t file_max_bytes(const struct uext4_fs *fs, const struct inode *inode);
/* SEEK_DATA (want_data) or SEEK_HOLE from off: an offset, or -ENXIO. */
int64_t file_seek_data(struct uext4_fs *fs, struct inode *inode, uint64_t off, bool want_data);

/*
 * Write side of the mapping (extents.c / indirect.c behind file.c's
 * dispatch).  Caller holds inode->lock for writing and a handle.
 */
#define MAP_CREATE 1u       /* allocate the hole at lblk (up to max_len blocks) */
#define MAP_UNWRITTEN 2u    /* with MAP_CREATE: new blocks are unwritten (fallocate) */
#define MAP_CONVERT 4u      /* with MAP_CREATE: an unwritten run becomes written */
#define MAP_WHOLE 8u        /* with MAP_CREATE: one free run of max_len blocks where
			     * there is one (balloc_alloc_whole(); extents only) */
int inode_map_blocks(struct handle *h, struct inode *inode, uint64_t lblk, uint64_t max_len,
		     unsigned flags, struct block_map *m);
/* Free every block at or after logical block first (truncate). */
int inode_truncate_blocks(struct handle *h, struct inode *inode, uint64_t first);
/* Free the blocks of [lblk, lblk + len) leaving a hole (punch hole). */
int inode_punch_blocks(struct handle *h, struct inode *inode, uint64_t lblk, uint64_t len);
/* Data write path.  file_pwrite() takes inode->lock and its own handles;
 * off FILE_APPEND writes at the end of the file (O_APPEND). */
#define FILE_APPEND UINT64_MAX
ssize_t file_pwrite(struct uext4_fs *fs, struct inode *inode, const void *buf, size_t size,
		    uint64_t off);
/* Change i_size: shrink frees blocks and zeroes the tail of the last block,
 * grow leaves a hole.  Caller holds inode->lock (write) and a handle. */
int file_set_size(struct handle *h, struct inode *inode, uint64_t size);
/* fallocate modes of <linux/falloc.h>; takes inode->lock and handles. */
int file_fallocate(struct uext4_fs *fs, struct inode *inode, int mode, uint64_t off,
		   uint64_t len);
/* Write the data of a new symlink or small file body into the inode or a
 * block (inline while it fits an inline or may-be-inline file, inline.c).
 * Caller holds lock + handle. */
int file_write_locked(struct handle *h, struct inode *inode, const void *buf, size_t size,
		      uint64_t off);
/* inline.c: the bytes an inline file or directory can hold (60 of i_block
 * + the room for system.data in the inode body, ext4_get_max_inline_size),
 * 0 when it cannot be inline; and making an inode inline and empty (an
 * empty system.data, INLINE_DATA_FL, no EXTENTS_FL, i_block zeroed).
 * Caller holds inode->lock for writing (and a handle for inline_begin). */
int inline_capacity(struct uext4_fs *fs, struct inode *inode, size_t *cap);
int inline_begin(struct handle *h, struct inode *inode);


/* extents.c: Fast-commit replay (fc_replay.c), as the kernel's: map [lblk, lblk+len)
 * to the logged blocks from pblk; take a range out of the tree.  Neither
 * allocates nor frees data blocks (the replay's bitmap pass does). */
int extent_replay_map(struct handle *h, struct inode *inode, uint32_t lblk, uint32_t len,
		      uint64_t pblk, bool unwritten);
int extent_replay_unmap(struct handle *h, struct inode *inode, uint64_t start, uint64_t end);
/* Every block of the tree: fn(pblk, len, node) for each node below the
 * root (node true, len 1) and each extent's data (node false). */
int extent_for_each_block(struct uext4_fs *fs, struct inode *inode,
			  int (*fn)(void *ctx, uint64_t pblk, uint64_t len, bool node), void *ctx);

#endif
