/*
 * csum.h - helpers of csum.c that other modules may use.
 *
 * The bitmap checksums live in the raw group descriptor, which struct
 * group_info does not keep, so csum.c reads the descriptor through the
 * buffer cache.
 */
#ifndef UEXT4_CSUM_H
#define UEXT4_CSUM_H

#include "internal.h"
#include "ondisk.h"

/* Copy group's raw descriptor (first MIN(desc_size, 64) bytes, the rest
 * zeroed) through the buffer cache. */
int csum_read_group_desc(struct uext4_fs *fs, uint32_t group, struct ext4_group_desc *gd);

/* ---------------------------------------------------------------- csum.c
 * Checksum verification of every structure that carries one.  Each returns
 * 0 when the checksum matches (or the file system has none) and otherwise
 * -EUCLEAN with a message naming the structure, inode/group and block.
 */
int csum_verify_super(struct uext4_fs *fs, const struct ext4_super_block *sb);
int csum_verify_group_desc(struct uext4_fs *fs, uint32_t group, const void *gd);
int csum_verify_inode(struct uext4_fs *fs, uint64_t ino, const void *raw);
int csum_verify_extent_block(struct uext4_fs *fs, uint64_t ino, uint32_t generation,
			     uint64_t blocknr, const void *block);
int csum_verify_dir_leaf(struct uext4_fs *fs, uint64_t ino, uint32_t generation,
			 uint64_t blocknr, const void *block);
int csum_verify_dx_node(struct uext4_fs *fs, uint64_t ino, uint32_t generation,
			uint64_t blocknr, const void *block, unsigned count_offset,
			unsigned count, unsigned limit);
int csum_verify_xattr_block(struct uext4_fs *fs, uint64_t blocknr, const void *block);
int csum_verify_block_bitmap(struct uext4_fs *fs, uint32_t group, const void *bitmap);
int csum_verify_inode_bitmap(struct uext4_fs *fs, uint32_t group, const void *bitmap);
int csum_verify_orphan_block(struct uext4_fs *fs, uint64_t ino, uint32_t generation,
			     uint64_t blocknr, const void *block);
/* The value each structure's checksum field should hold (write path). */
uint32_t csum_inode(struct uext4_fs *fs, uint64_t ino, const void *raw);
/* Store the inode's checksum in raw (no-op without metadata_csum). */
void csum_set_inode(struct uext4_fs *fs, uint64_t ino, void *raw);
/* Does a block of csum_kind `kind` carry its checksum inside itself
 * (directory leaf, htree node, extent, xattr and orphan-file blocks)? */
bool csum_in_block(struct uext4_fs *fs, unsigned kind);
/* Set that checksum in p, a copy of block blocknr of that kind, owned by
 * inode owner (generation gen) (the commit, on its frozen copies). */
void csum_set_block(struct uext4_fs *fs, uint8_t *p, uint64_t blocknr, unsigned kind,
		    uint64_t owner, uint32_t gen);
/* Bitmap checksums (crc32c of the bitmap bytes) for the descriptor. */
uint32_t csum_block_bitmap(struct uext4_fs *fs, const void *bitmap);
uint32_t csum_inode_bitmap(struct uext4_fs *fs, const void *bitmap);
void csum_set_group_desc(struct uext4_fs *fs, uint32_t group, void *gd);
void csum_set_super(struct uext4_fs *fs, struct ext4_super_block *sb);


#endif
