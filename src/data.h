/*
 * data.h - what the data-path files (file.c, extents.c, indirect.c,
 * inline.c) share beyond file.h: the write halves of the two block
 * mapping schemes, behind file.c's inode_map_blocks() dispatch.
 *
 * Every function here is called with inode->lock held for writing and an
 * open handle.
 */
#ifndef UEXT4_DATA_H
#define UEXT4_DATA_H

#include "file.h"
#include "internal.h"

/* Logical block numbers of extent-mapped files are 32 bits. */
#define EXT_LBLK_LIMIT (1ull << 32)

/* Blocks freed from i_blocks.  (inode_add_blocks() with a negative count
 * left-shifts a negative number, which UBSan rejects.) */
static inline void inode_sub_blocks(struct uext4_fs *fs, struct inode *i, uint64_t nblocks)
{
	i->blocks -= nblocks << (fs->log_block_size - 9);
}

/* extents.c: MAP_CREATE / MAP_UNWRITTEN / MAP_CONVERT on an extent tree. */
int extent_map_blocks(struct handle *h, struct inode *inode, uint64_t lblk, uint64_t max_len,
		      unsigned flags, struct block_map *m);
/* Free the blocks of [start, end) (end may be EXT_LBLK_LIMIT), leaving a hole. */
int extent_remove_range(struct handle *h, struct inode *inode, uint64_t start, uint64_t end);
/* Collapse range: remove [lblk, lblk+len) and move later extents down. */
int extent_collapse(struct handle *h, struct inode *inode, uint64_t lblk, uint64_t len);
/* Insert range: move extents at or after lblk up by len blocks (a hole). */
int extent_insert_gap(struct handle *h, struct inode *inode, uint64_t lblk, uint64_t len);
/* An empty extent tree (depth 0 leaf, no entries) in i_block. */
void extent_init_root(struct inode *inode);

/* indirect.c: MAP_CREATE on a block map (no unwritten blocks there). */
int indirect_map_blocks(struct handle *h, struct inode *inode, uint64_t lblk, uint64_t max_len,
			unsigned flags, struct block_map *m);
int indirect_remove_range(struct handle *h, struct inode *inode, uint64_t start, uint64_t end);
/* Number of logical blocks a block map can address with this block size. */
uint64_t indirect_max_blocks(const struct uext4_fs *fs);

/* inline.c: write side of inline-data files. */
/* Write inline when the file is inline or may become so (INODE_MAY_INLINE)
 * and max(i_size, off+size) fits the inline capacity: 1 if done, 0 if it
 * does not fit (the caller converts, or writes blocks), or -errno. */
int inline_try_write(struct handle *h, struct inode *inode, const void *buf, size_t size,
		     uint64_t off);
/* Move the inline data into blocks: the inode becomes extent-mapped
 * (block-mapped without the extents feature); it may no longer go inline. */
int inline_convert(struct handle *h, struct inode *inode);
/* Change the size of an inline-data file in place. */
int inline_set_size(struct handle *h, struct inode *inode, uint64_t size);

/* ---------------------------------------------------------------- extents.c */
int extent_map(struct uext4_fs *fs, struct inode *inode, uint64_t lblk, uint64_t max_len,
	       struct block_map *m);
/* ---------------------------------------------------------------- indirect.c */
int indirect_map(struct uext4_fs *fs, struct inode *inode, uint64_t lblk, uint64_t max_len,
		 struct block_map *m);
/* Before a write that may change or free the block map from lblk on (a
 * shrinking truncate, the free of an unlinked file): is an indirect block
 * there outside the file system or on group metadata?  Reads only, so
 * that the write can refuse with the image unchanged. */
int indirect_check_from(struct uext4_fs *fs, struct inode *inode, uint64_t lblk);
/* ---------------------------------------------------------------- inline.c */
/* Size of the inline data (i_block part + system.data xattr). */
int inline_size(struct uext4_fs *fs, struct inode *inode, size_t *size);
/* Copy inline data [off, off+size) into buf; returns bytes copied. */
ssize_t inline_pread(struct uext4_fs *fs, struct inode *inode, void *buf, size_t size, uint64_t off);


#endif
