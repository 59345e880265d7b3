/*
 * indirect.c - logical-to-physical mapping of block-mapped (ext2/ext3
 * style) files.
 *
 * i_block holds 12 direct pointers, then one pointer each to a single,
 * double and triple indirect block; an indirect block is an array of
 * block_size / 4 little-endian 32-bit pointers.  A zero pointer is a hole
 * covering everything below it.
 *
 * A lookup returns the longest run it can find without reading another
 * block: physically contiguous pointers (or zeros) in the same array.
 * The caller keeps i_block stable (file_pread holds inode->lock as a
 * reader); no locks are taken here besides the buffer cache's.
 */
#include "internal.h"

static int ind_bad(const struct uext4_fs *fs, const struct inode *inode, uint64_t blocknr,
		   const char *what)
{
	(void)fs;
	if (blocknr)
		return fs_corrupt("block map of inode %lu: %s (block %lu)",
				  (unsigned long)inode->ino, what, (unsigned long)blocknr);
	return fs_corrupt("block map of inode %lu: %s (i_block in inode)",
			  (unsigned long)inode->ino, what);
}

static bool ind_block_ok(const struct uext4_fs *fs, uint64_t pblk)
{
	return pblk >= fs->first_data_block && pblk < fs->blocks_count;
}

/*
 * Map from ptrs[idx] onward within one pointer array of n entries (the
 * direct pointers, or a last-level indirect block).  where names the array
 * in messages (0 = the inode).
 */
static int map_in_array(struct uext4_fs *fs, struct inode *inode, const uint32_t *ptrs,
			unsigned n, unsigned idx, uint64_t max_len, uint64_t where,
			struct block_map *m)
{
	uint64_t first = le32(ptrs[idx]);
	uint64_t len = 1;

	m->unwritten = false;
	if (first == 0) {
		while (idx + len < n && len < max_len && ptrs[idx + len] == 0)
			len++;
		m->pblk = 0;
		m->len = len;
		return 0;
	}
	while (idx + len < n && len < max_len && le32(ptrs[idx + len]) == first + len)
		len++;
	if (!ind_block_ok(fs, first) || len > fs->blocks_count - first)
		return ind_bad(fs, inode, where, "data block pointer outside the file system");
	m->pblk = first;
	m->len = len;
	return 0;
}

/*
 * Walk a subtree of `level` levels (1 = single indirect) rooted at ptr,
 * for the block at offset rel inside it.
 */
static int map_in_tree(struct uext4_fs *fs, struct inode *inode, uint64_t ptr, int level,
		       uint64_t rel, uint64_t max_len, struct block_map *m)
{
	unsigned addr_shift = (unsigned)__builtin_ctz(fs->block_size) - 2;    /* log2(pointers per block) */
	unsigned apb = 1u << addr_shift;
	uint64_t parent = 0;
	struct buf *b;
	int err;

	for (;; level--) {
		unsigned shift = addr_shift * (unsigned)(level - 1);
		unsigned idx = (unsigned)(rel >> shift);

		if (ptr == 0) {
			/* Hole: the rest of this subtree. */
			uint64_t span = 1ull << (addr_shift * (unsigned)level);

			m->pblk = 0;
			m->unwritten = false;
			m->len = MIN(span - rel, max_len);
			return 0;
		}
		if (!ind_block_ok(fs, ptr))
			return ind_bad(fs, inode, parent, "indirect block pointer outside the file system");
		err = bread(fs->bc, ptr, UEXT4_META_OTHER, &b);
		if (err)
			return err;
		if (level == 1) {
			err = map_in_array(fs, inode, (const uint32_t *)b->data, apb, idx,
					   max_len, ptr, m);
			brelse(fs->bc, b);
			return err;
		}
		parent = ptr;
		ptr = le32(((const uint32_t *)b->data)[idx]);
		brelse(fs->bc, b);
		rel &= (1ull << shift) - 1;
	}
}

int indirect_map(struct uext4_fs *fs, struct inode *inode, uint64_t lblk, uint64_t max_len,
		 struct block_map *m)
{
	const uint32_t *i_block = inode_raw(inode)->i_block;
	unsigned addr_shift = (unsigned)__builtin_ctz(fs->block_size) - 2;
	uint64_t rel = lblk;

	if (max_len == 0)
		max_len = 1;
	m->lblk = lblk;
	if (rel < EXT4_NDIR_BLOCKS)
		return map_in_array(fs, inode, i_block, EXT4_NDIR_BLOCKS, (unsigned)rel,
				    max_len, 0, m);
	rel -= EXT4_NDIR_BLOCKS;
	for (int level = 1; level <= 3; level++) {
		uint64_t span = 1ull << (addr_shift * (unsigned)level);

		if (rel < span)
			return map_in_tree(fs, inode, le32(i_block[EXT4_IND_BLOCK + level - 1]),
					   level, rel, max_len, m);
		rel -= span;
	}
	/* Past what a block map can address: a hole. */
	m->pblk = 0;
	m->len = max_len;
	m->unwritten = false;
	return 0;
}
