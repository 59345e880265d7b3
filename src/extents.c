/*
 * extents.c - logical-to-physical mapping through an inode's extent tree.
 *
 * Format (Documentation/filesystems/ext4/dynamic.rst, "Extent Tree"): the
 * root node lives in the 60 bytes of i_block; every node starts with a
 * 12-byte header followed by 12-byte entries, index entries in interior
 * nodes and extents in leaves.  Interior nodes other than the root are
 * whole blocks, checksummed with metadata_csum.
 *
 * The lookup descends from the root, binary searching each node for the
 * last entry whose first logical block is <= the block asked for.  The
 * caller holds whatever lock keeps i_block stable (file_pread takes
 * inode->lock as a reader); this file takes no locks of its own besides
 * the buffer cache's.
 *
 * Validation: the header of every node on the path and the entry chosen
 * are checked on every lookup (cheap, and keeps a block reached through an
 * unexpected path from sending us out of bounds).  A whole extent block
 * (every entry sorted, in range) plus its checksum is checked once per
 * buffer, the first time it is read, and the buffer is then marked
 * verified.
 */
#include "internal.h"

#include <string.h>

#define EXT_HDR_SIZE sizeof(struct ext4_extent_header)
#define EXT_ENTRY_SIZE sizeof(struct ext4_extent)
#define EXT_ROOT_SIZE (EXT4_N_BLOCKS * 4u)
/* Logical block numbers of extent-mapped files are 32 bits. */
#define EXT_MAX_LBLK_END (1ull << 32)

_Static_assert(sizeof(struct ext4_extent_header) == 12, "extent header size");
_Static_assert(sizeof(struct ext4_extent) == 12, "extent size");
_Static_assert(sizeof(struct ext4_extent_idx) == 12, "extent index size");

/* Where the walk is: which node, to name it in messages. */
struct ext_ctx {
	struct uext4_fs *fs;
	uint64_t ino;
	uint64_t blocknr;       /* 0 for the root in the inode */
};

static int ext_bad(const struct ext_ctx *c, const char *what)
{
	if (c->blocknr)
		return fs_corrupt("extent tree of inode %lu: %s (block %lu)",
				  (unsigned long)c->ino, what, (unsigned long)c->blocknr);
	return fs_corrupt("extent tree of inode %lu: %s (root in inode)",
			  (unsigned long)c->ino, what);
}

static uint16_t ext_len(const struct ext4_extent *e)
{
	uint16_t l = le16(e->ee_len);

	return l > EXT4_EXT_INIT_MAX_LEN ? (uint16_t)(l - EXT4_EXT_INIT_MAX_LEN) : l;
}

static bool ext_is_unwritten(const struct ext4_extent *e)
{
	return le16(e->ee_len) > EXT4_EXT_INIT_MAX_LEN;
}

static uint64_t ext_pblk(const struct ext4_extent *e)
{
	return ((uint64_t)le16(e->ee_start_hi) << 32) | le32(e->ee_start_lo);
}

static uint64_t idx_pblk(const struct ext4_extent_idx *ix)
{
	return ((uint64_t)le16(ix->ei_leaf_hi) << 32) | le32(ix->ei_leaf_lo);
}

static bool pblk_range_ok(const struct uext4_fs *fs, uint64_t pblk, uint64_t len)
{
	return pblk >= fs->first_data_block && pblk < fs->blocks_count &&
	       len <= fs->blocks_count - pblk;
}

/*
 * Check a node's header.  capacity is how many entries fit in the node;
 * want_depth is the depth the parent implies (or -1 at the root, where the
 * only bound is EXT4_EXT_MAX_DEPTH).
 */
static int check_header(const struct ext_ctx *c, const struct ext4_extent_header *h,
			unsigned capacity, int want_depth)
{
	uint16_t entries = le16(h->eh_entries), max = le16(h->eh_max);
	uint16_t depth = le16(h->eh_depth);

	if (le16(h->eh_magic) != EXT4_EXT_MAGIC)
		return ext_bad(c, "bad header magic");
	if (max == 0 || max > capacity)
		return ext_bad(c, "implausible eh_max");
	if (entries > max)
		return ext_bad(c, "eh_entries exceeds eh_max");
	if (depth > EXT4_EXT_MAX_DEPTH)
		return ext_bad(c, "depth exceeds 5");
	if (want_depth >= 0 && depth != want_depth)
		return ext_bad(c, "depth does not decrease by one");
	if (depth > 0 && entries == 0)
		return ext_bad(c, "interior node with no entries");
	return 0;
}

/* Every entry of a leaf: nonzero length, in range, sorted, no overlap. */
static int check_leaf_entries(const struct ext_ctx *c, const struct ext4_extent *e,
			      unsigned n)
{
	uint64_t prev_end = 0;

	for (unsigned i = 0; i < n; i++) {
		uint64_t start = le32(e[i].ee_block), len = ext_len(&e[i]);

		if (len == 0)
			return ext_bad(c, "zero-length extent");
		if (start + len > EXT_MAX_LBLK_END)
			return ext_bad(c, "extent past the last logical block");
		if (!pblk_range_ok(c->fs, ext_pblk(&e[i]), len))
			return ext_bad(c, "extent points outside the file system");
		if (i > 0 && start < prev_end)
			return ext_bad(c, "extents unsorted or overlapping");
		prev_end = start + len;
	}
	return 0;
}

/* Every entry of an index node: child in range, keys strictly increasing. */
static int check_index_entries(const struct ext_ctx *c, const struct ext4_extent_idx *ix,
			       unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		if (!pblk_range_ok(c->fs, idx_pblk(&ix[i]), 1))
			return ext_bad(c, "index points outside the file system");
		if (i > 0 && le32(ix[i].ei_block) <= le32(ix[i - 1].ei_block))
			return ext_bad(c, "index entries unsorted");
	}
	return 0;
}

static int check_entries(const struct ext_ctx *c, const struct ext4_extent_header *h)
{
	unsigned n = le16(h->eh_entries);

	if (le16(h->eh_depth) == 0)
		return check_leaf_entries(c, (const struct ext4_extent *)(h + 1), n);
	return check_index_entries(c, (const struct ext4_extent_idx *)(h + 1), n);
}

/*
 * Index of the last entry whose key is <= lblk, or -1 if lblk is before
 * the first.  Entries are 12 bytes with the 32-bit key first, for both
 * kinds of node.
 */
static int node_search(const struct ext4_extent_header *h, uint32_t lblk)
{
	const uint8_t *base = (const uint8_t *)(h + 1);
	int lo = 0, hi = (int)le16(h->eh_entries) - 1, found = -1;

	while (lo <= hi) {
		int mid = lo + (hi - lo) / 2;
		uint32_t key;

		memcpy(&key, base + (size_t)mid * EXT_ENTRY_SIZE, sizeof(key));
		if (le32(key) <= lblk) {
			found = mid;
			lo = mid + 1;
		} else {
			hi = mid - 1;
		}
	}
	return found;
}

static uint32_t node_key(const struct ext4_extent_header *h, int i)
{
	uint32_t key;

	memcpy(&key, (const uint8_t *)(h + 1) + (size_t)i * EXT_ENTRY_SIZE, sizeof(key));
	return le32(key);
}

/* Read an extent block and verify it (checksum and entries) once per buffer. */
static int read_node(const struct ext_ctx *c, struct inode *inode, int want_depth,
		     struct buf **out)
{
	struct uext4_fs *fs = c->fs;
	unsigned capacity = (fs->block_size - EXT_HDR_SIZE) / EXT_ENTRY_SIZE;
	const struct ext4_extent_header *h;
	struct buf *b;
	int err;

	err = bread(fs->bc, c->blocknr, UEXT4_META_EXTENT, &b);
	if (err)
		return err;
	h = (const struct ext4_extent_header *)b->data;
	err = check_header(c, h, capacity, want_depth);
	if (!err && !buf_verified(b)) {
		err = csum_verify_extent_block(fs, c->ino, inode->generation, c->blocknr, b->data);
		if (!err)
			err = check_entries(c, h);
		if (!err)
			buf_set_verified(b);
	}
	if (err) {
		brelse(fs->bc, b);
		return err;
	}
	*out = b;
	return 0;
}

/* Fill m for the leaf h given the search result and the path's bound. */
static int map_in_leaf(const struct ext_ctx *c, const struct ext4_extent_header *h,
		       uint32_t lblk, uint64_t max_len, uint64_t next_bound,
		       struct block_map *m)
{
	const struct ext4_extent *ex = (const struct ext4_extent *)(h + 1);
	int n = le16(h->eh_entries);
	int i = node_search(h, lblk);
	uint64_t start, len, pblk;

	if (i + 1 < n)
		next_bound = MIN(next_bound, (uint64_t)le32(ex[i + 1].ee_block));
	m->lblk = lblk;
	m->unwritten = false;
	if (i >= 0) {
		start = le32(ex[i].ee_block);
		len = ext_len(&ex[i]);
		pblk = ext_pblk(&ex[i]);
		if (len == 0 || !pblk_range_ok(c->fs, pblk, len))
			return ext_bad(c, "extent points outside the file system");
		if (lblk < start + len) {
			uint64_t run = start + len - lblk;

			run = MIN(run, next_bound - lblk);
			m->pblk = pblk + (lblk - start);
			m->len = MIN(run, max_len);
			m->unwritten = ext_is_unwritten(&ex[i]);
			return 0;
		}
	}
	/* A hole up to the next extent (here or in a later subtree). */
	m->pblk = 0;
	m->len = next_bound > lblk ? MIN(next_bound - lblk, max_len) : MIN(1, max_len);
	return 0;
}

int extent_map(struct uext4_fs *fs, struct inode *inode, uint64_t lblk, uint64_t max_len,
	       struct block_map *m)
{
	struct ext_ctx c = { .fs = fs, .ino = inode->ino, .blocknr = 0 };
	const struct ext4_extent_header *h =
		(const struct ext4_extent_header *)inode_raw(inode)->i_block;
	uint64_t next_bound = EXT_MAX_LBLK_END;
	struct buf *b = NULL;
	int depth, err;

	if (max_len == 0)
		max_len = 1;
	if (lblk >= EXT_MAX_LBLK_END) {
		*m = (struct block_map){ .lblk = lblk, .pblk = 0, .len = max_len };
		return 0;
	}
	err = check_header(&c, h, (EXT_ROOT_SIZE - EXT_HDR_SIZE) / EXT_ENTRY_SIZE, -1);
	if (!err)
		err = check_entries(&c, h);  /* at most 4 entries: check each time */
	if (err)
		return err;

	for (depth = le16(h->eh_depth); depth > 0; depth--) {
		const struct ext4_extent_idx *ix = (const struct ext4_extent_idx *)(h + 1);
		int n = le16(h->eh_entries);
		int i = node_search(h, (uint32_t)lblk);
		struct buf *child = NULL;

		/* Before the first key: the kernel descends into the first child. */
		if (i < 0)
			i = 0;
		if (i + 1 < n)
			next_bound = MIN(next_bound, (uint64_t)node_key(h, i + 1));
		if (!pblk_range_ok(fs, idx_pblk(&ix[i]), 1)) {
			err = ext_bad(&c, "index points outside the file system");
		} else {
			c.blocknr = idx_pblk(&ix[i]);
			err = read_node(&c, inode, depth - 1, &child);
		}
		if (b)
			brelse(fs->bc, b);
		b = NULL;
		if (err)
			return err;
		b = child;
		h = (const struct ext4_extent_header *)b->data;
	}
	err = map_in_leaf(&c, h, (uint32_t)lblk, max_len, next_bound, m);
	if (b)
		brelse(fs->bc, b);
	return err;
}
