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
 * reader); no locks are taken here besides the buffer cache's.  The
 * write side (allocation, truncation) is at the end of the file.
 */
#include "balloc.h"
#include "bcache.h"
#include "data.h"
#include "error.h"
#include "file.h"
#include "inode.h"
#include "internal.h"
#include "ondisk.h"
#include "trans.h"

#include <stdio.h>
#include <string.h>

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
 * The pointer to indirect block blk (in block parent, 0: i_block) before
 * the map changes under it: in range, and not on group metadata (as the
 * kernel's block_validity refuses it), where a change to the map would
 * overwrite, say, inodes, and an inode written there would change the map.
 * Not on reads: they may go on through a block that does no harm there.
 */
static int ind_check_ptr(struct uext4_fs *fs, const struct inode *inode, uint64_t parent,
			 uint64_t blk)
{
	uint32_t group;
	const char *what;
	char why[112];

	if (!ind_block_ok(fs, blk))
		return ind_bad(fs, inode, parent, "indirect block pointer outside the file system");
	if (!(what = balloc_metadata_in(fs, blk, 1, &group)))
		return 0;
	snprintf(why, sizeof(why), "indirect block %llu lies in the %s of group %u",
		 (unsigned long long)blk, what, group);
	return ind_bad(fs, inode, parent, why);
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

/* ================================================================ write side
 *
 * Allocation walks down from i_block to the pointer array that holds the
 * logical block, creating missing indirect blocks on the way (each placed
 * just before the data it will map, as ext3 did), then allocates a
 * contiguous run of data blocks for the hole, bounded by the end of that
 * array.  Removal visits every pointer array that intersects the range:
 * subtrees entirely inside it are freed whole, partial ones are recursed
 * into, and an indirect block left with only zero pointers is freed too.
 *
 * Indirect blocks are metadata in the buffer cache (CSUM_NONE); data
 * blocks are not.  Caller holds inode->lock for writing and a handle.
 */

static unsigned addr_bits(const struct uext4_fs *fs)
{
	return (unsigned)__builtin_ctz(fs->block_size) - 2;
}

uint64_t indirect_max_blocks(const struct uext4_fs *fs)
{
	unsigned s = addr_bits(fs);
	uint64_t n = EXT4_NDIR_BLOCKS + (1ull << s) + (1ull << (2 * s)) + (1ull << (3 * s));

	/* Logical block numbers are 32-bit in ext4 whatever the mapping. */
	return MIN(n, 0xFFFFFFFFull);
}

/* Where lblk lives: the array index at each level, i_block first. */
struct ind_loc {
	int levels;             /* indirect levels below i_block: 0..3 */
	unsigned off[4];        /* off[0] into i_block, off[k] into the level-k block */
};

static int ind_locate(const struct uext4_fs *fs, const struct inode *inode, uint64_t lblk,
		      struct ind_loc *loc)
{
	unsigned s = addr_bits(fs);
	uint64_t rel = lblk;

	if (rel < EXT4_NDIR_BLOCKS) {
		loc->levels = 0;
		loc->off[0] = (unsigned)rel;
		return 0;
	}
	rel -= EXT4_NDIR_BLOCKS;
	for (int level = 1; level <= 3; level++) {
		uint64_t span = 1ull << (s * (unsigned)level);

		if (rel < span) {
			loc->levels = level;
			loc->off[0] = EXT4_IND_BLOCK + (unsigned)level - 1;
			for (int k = 1; k <= level; k++)
				loc->off[k] = (unsigned)(rel >> (s * (unsigned)(level - k))) &
					      ((1u << s) - 1);
			return 0;
		}
		rel -= span;
	}
	return fs_err(EFBIG, "inode %lu: logical block %llu is past what a block map "
		      "addresses", (unsigned long)inode->ino, (unsigned long long)lblk);
}

/* Goal for a block going into ptrs[idx]: after the last pointer before it. */
static uint64_t ind_goal(struct uext4_fs *fs, struct inode *inode, const uint32_t *ptrs,
			 unsigned idx, uint64_t array_blk)
{
	for (unsigned j = idx; j-- > 0;) {
		uint64_t p = le32(ptrs[j]);

		if (p)
			return p + (idx - j);
	}
	if (array_blk)
		return array_blk + 1;
	return balloc_goal(fs, inode);
}

/* A new zeroed indirect block for ptrs[idx] (ptrs in buffer pb, or i_block). */
static int ind_new_block(struct handle *h, struct inode *inode, uint32_t *ptrs, unsigned idx,
			 struct buf *pb, struct buf **out)
{
	struct uext4_fs *fs = h->fs;
	uint64_t goal = ind_goal(fs, inode, ptrs, idx, pb ? pb->blocknr : 0), blk;
	uint32_t got;
	int err;

	if (goal >= fs->blocks_count)
		goal = 0;
	if ((err = balloc_alloc(h, inode, goal, 1, &blk, &got)))
		return err;
	*out = NULL;
	if ((err = bget_new(fs->bc, blk, out)) || (err = handle_create_access(h, *out)) ||
	    (pb && (err = handle_write_access(h, pb)))) {
		if (*out)
			brelse(fs->bc, *out);
		balloc_free(h, inode, blk, 1, BALLOC_METADATA);
		return err;
	}
	handle_dirty(h, *out, CSUM_NONE, inode->ino, inode->generation);
	ptrs[idx] = cpu_to_le32((uint32_t)blk);
	if (pb)
		handle_dirty(h, pb, CSUM_NONE, inode->ino, inode->generation);
	inode_add_blocks(fs, inode, 1);
	return 0;
}

int indirect_map_blocks(struct handle *h, struct inode *inode, uint64_t lblk, uint64_t max_len,
			unsigned flags, struct block_map *m)
{
	struct uext4_fs *fs = h->fs;
	uint32_t *ptrs = inode_raw_mut(inode)->i_block;
	unsigned n = EXT4_NDIR_BLOCKS, apb = 1u << addr_bits(fs), idx;
	struct buf *b = NULL;
	struct ind_loc loc = { 0 };
	uint64_t first, want;
	uint32_t got;
	int err;

	if (max_len == 0)
		max_len = 1;
	if ((flags & MAP_CREATE) && (flags & MAP_UNWRITTEN))
		return fs_err(EOPNOTSUPP, "inode %lu: block-mapped files have no unwritten "
			      "blocks", (unsigned long)inode->ino);
	if ((err = indirect_map(fs, inode, lblk, max_len, m)))
		return err;
	m->fresh = false;
	if (!(flags & MAP_CREATE) || m->pblk)
		return 0;
	if ((err = ind_locate(fs, inode, lblk, &loc)))
		return err;
	want = MIN(m->len, max_len);
	/* Down to the array holding lblk, creating indirect blocks. */
	for (int k = 0; k < loc.levels; k++) {
		unsigned i = loc.off[k];
		struct buf *child;

		if (ptrs[i] == 0) {
			err = ind_new_block(h, inode, ptrs, i, b, &child);
		} else {
			uint64_t cb = le32(ptrs[i]);

			err = ind_check_ptr(fs, inode, b ? b->blocknr : 0, cb);
			if (!err)
				err = bread(fs->bc, cb, UEXT4_META_OTHER, &child);
		}
		if (b)
			brelse(fs->bc, b);
		b = NULL;
		if (err)
			goto out_write;
		b = child;
		ptrs = (uint32_t *)b->data;
		n = apb;
	}
	idx = loc.off[loc.levels];
	/* The hole within this array: up to the next pointer in use. */
	want = MIN(want, n - idx);
	for (unsigned j = 1; j < want; j++) {
		if (ptrs[idx + j]) {
			want = j;
			break;
		}
	}
	{
		uint64_t goal = ind_goal(fs, inode, ptrs, idx, b ? b->blocknr : 0);

		err = balloc_alloc(h, inode, goal < fs->blocks_count ? goal : 0, (uint32_t)want,
				   &first, &got);
	}
	if (err)
		goto out;
	if (b && (err = handle_write_access(h, b))) {
		balloc_free(h, inode, first, got, 0);
		goto out;
	}
	for (uint32_t j = 0; j < got; j++)
		ptrs[idx + j] = cpu_to_le32((uint32_t)(first + j));
	if (b)
		handle_dirty(h, b, CSUM_NONE, inode->ino, inode->generation);
	inode_add_blocks(fs, inode, got);
	*m = (struct block_map){ .lblk = lblk, .pblk = first, .len = got, .fresh = true };
out:
	if (b)
		brelse(fs->bc, b);
out_write:
	{
		int werr = inode_write(h, inode);

		return err ? err : werr;
	}
}

/* The indirect blocks of the subtree of `level` levels at ptr (below
 * block parent) that maps logical blocks from base: those with a block at
 * or after `from`, checked as ind_check_ptr(). */
static int check_subtree(struct uext4_fs *fs, const struct inode *inode, uint64_t parent,
			 uint64_t ptr, int level, uint64_t base, uint64_t from)
{
	unsigned s = addr_bits(fs), apb = 1u << s;
	uint64_t child_span = 1ull << (s * (unsigned)(level - 1));
	const uint32_t *arr;
	struct buf *b;
	int err;

	if (ptr == 0)
		return 0;
	if ((err = ind_check_ptr(fs, inode, parent, ptr)) || level == 1)
		return err;
	if ((err = bread(fs->bc, ptr, UEXT4_META_OTHER, &b)))
		return err;
	arr = (const uint32_t *)b->data;
	for (unsigned i = 0; i < apb && !err; i++)
		if (base + (i + 1) * child_span > from)
			err = check_subtree(fs, inode, ptr, le32(arr[i]), level - 1,
					    base + i * child_span, from);
	brelse(fs->bc, b);
	return err;
}

int indirect_check_from(struct uext4_fs *fs, struct inode *inode, uint64_t lblk)
{
	const uint32_t *i_block = inode_raw(inode)->i_block;
	unsigned s = addr_bits(fs);
	uint64_t base = EXT4_NDIR_BLOCKS;
	int err = 0;

	for (int level = 1; level <= 3 && !err; level++) {
		uint64_t span = 1ull << (s * (unsigned)level);

		if (base + span > lblk)
			err = check_subtree(fs, inode, 0, le32(i_block[EXT4_IND_BLOCK + level - 1]),
					    level, base, lblk);
		base += span;
	}
	return err;
}

/* Frees data blocks in runs: one balloc_free per physically contiguous run. */
struct run_freer {
	struct handle *h;
	struct inode *inode;
	uint64_t start, len;
	int err;
};

static void run_flush(struct run_freer *r)
{
	if (r->len && !r->err) {
		r->err = balloc_free(r->h, r->inode, r->start, (uint32_t)r->len, 0);
		if (!r->err)
			inode_sub_blocks(r->h->fs, r->inode, r->len);
	}
	r->len = 0;
}

static void run_add(struct run_freer *r, uint64_t blk)
{
	if (r->len && r->start + r->len == blk && r->len < 0x7fffffff) {
		r->len++;
		return;
	}
	run_flush(r);
	r->start = blk;
	r->len = 1;
}

static int free_meta(struct handle *h, struct inode *inode, uint64_t blk)
{
	int err = balloc_free(h, inode, blk, 1, BALLOC_METADATA);

	if (!err)
		inode_sub_blocks(h->fs, inode, 1);
	return err;
}

static bool all_zero(const uint32_t *p, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		if (p[i])
			return false;
	return true;
}

/*
 * Free the blocks of logical [start, end) inside the subtree of `level`
 * levels (0 = a data block) rooted at block ptr, which maps logical blocks
 * from base.  When the whole subtree goes and slot is not NULL, *slot (the
 * pointer to ptr, in i_block or in a block the caller has write access
 * to) is zeroed.
 */
static int free_subtree(struct run_freer *r, uint64_t ptr, uint32_t *slot, int level,
			uint64_t base, uint64_t start, uint64_t end)
{
	struct uext4_fs *fs = r->h->fs;
	unsigned s = addr_bits(fs), apb = 1u << s;
	uint64_t span = 1ull << (s * (unsigned)level);
	uint64_t child_span = level ? 1ull << (s * (unsigned)(level - 1)) : 0;
	bool whole = start <= base && end >= base + span;
	uint32_t *arr;
	struct buf *b;
	int err = 0;

	if (ptr == 0)
		return 0;
	if (level > 0 && (err = ind_check_ptr(fs, r->inode, 0, ptr)))
		return err;
	if (!ind_block_ok(fs, ptr))
		return ind_bad(fs, r->inode, 0, "block pointer outside the file system");
	if (level == 0) {
		run_add(r, ptr);
		if (slot)
			*slot = 0;
		return 0;
	}
	if ((err = bread(fs->bc, ptr, UEXT4_META_OTHER, &b)))
		return err;
	if (!whole && (err = handle_write_access(r->h, b))) {
		brelse(fs->bc, b);
		return err;
	}
	arr = (uint32_t *)b->data;
	for (unsigned i = 0; i < apb && !err && !r->err; i++) {
		uint64_t cb = base + i * child_span;

		if (cb >= end)
			break;
		if (cb + child_span <= start)
			continue;
		/* Inside a subtree that goes whole, pointers need no clearing. */
		err = free_subtree(r, le32(arr[i]), whole ? NULL : &arr[i], level - 1, cb,
				   start, end);
	}
	if (!whole)
		handle_dirty(r->h, b, CSUM_NONE, r->inode->ino, r->inode->generation);
	whole = whole || all_zero(arr, apb);
	brelse(fs->bc, b);
	if (err || (err = r->err))
		return err;
	if (!whole)
		return 0;
	/* The block is empty or entirely in the range: it goes too. */
	run_flush(r);
	if ((err = free_meta(r->h, r->inode, ptr)))
		return err;
	if (slot)
		*slot = 0;
	return 0;
}

int indirect_remove_range(struct handle *h, struct inode *inode, uint64_t start, uint64_t end)
{
	struct uext4_fs *fs = h->fs;
	uint32_t *iblock = inode_raw_mut(inode)->i_block;
	unsigned s = addr_bits(fs);
	struct run_freer r = { .h = h, .inode = inode };
	uint64_t base = EXT4_NDIR_BLOCKS;
	int err = 0;

	for (uint64_t i = start; i < MIN(end, (uint64_t)EXT4_NDIR_BLOCKS); i++)
		err = err ? err : free_subtree(&r, le32(iblock[i]), &iblock[i], 0, i, start, end);
	for (int level = 1; level <= 3 && !err; level++) {
		uint64_t span = 1ull << (s * (unsigned)level);

		if (base < end && base + span > start)
			err = free_subtree(&r, le32(iblock[EXT4_IND_BLOCK + level - 1]),
					   &iblock[EXT4_IND_BLOCK + level - 1], level, base, start, end);
		base += span;
	}
	run_flush(&r);
	if (!err)
		err = r.err;
	{
		int werr = inode_write(h, inode);

		return err ? err : werr;
	}
}
