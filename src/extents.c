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
 *
 * The write side (inserting, splitting, growing, removing and shifting
 * extents) is at the end of the file; its callers hold inode->lock for
 * writing and a handle.
 */
#include "balloc.h"
#include "bcache.h"
#include "csum.h"
#include "data.h"
#include "error.h"
#include "file.h"
#include "inode.h"
#include "internal.h"
#include "ondisk.h"
#include "trans.h"

#include <stdio.h>
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

/*
 * A tree block on group metadata (as the kernel's block_validity refuses
 * it): a change to the tree would overwrite, say, inodes, and an inode
 * written there would change the tree.  Once per buffer, with the rest.
 */
static int check_node_place(const struct ext_ctx *c)
{
	uint32_t group;
	const char *what = balloc_metadata_in(c->fs, c->blocknr, 1, &group);
	char why[96];

	if (!what)
		return 0;
	snprintf(why, sizeof(why), "tree block lies in the %s of group %u", what, group);
	return ext_bad(c, why);
}

/* Read an extent block and verify it (place, checksum and entries) once
 * per buffer. */
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
		err = check_node_place(c);
		if (!err)
			err = csum_verify_extent_block(fs, c->ino, inode->generation, c->blocknr,
						       b->data);
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

/* extent_map(), leaving in c the node where a check failed. */
static int map_ctx(struct ext_ctx *c, struct inode *inode, uint64_t lblk, uint64_t max_len,
		   struct block_map *m)
{
	struct uext4_fs *fs = c->fs;
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
	err = check_header(c, h, (EXT_ROOT_SIZE - EXT_HDR_SIZE) / EXT_ENTRY_SIZE, -1);
	if (!err)
		err = check_entries(c, h);  /* at most 4 entries: check each time */
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
			err = ext_bad(c, "index points outside the file system");
		} else {
			c->blocknr = idx_pblk(&ix[i]);
			err = read_node(c, inode, depth - 1, &child);
		}
		if (b)
			brelse(fs->bc, b);
		b = NULL;
		if (err)
			return err;
		b = child;
		h = (const struct ext4_extent_header *)b->data;
	}
	err = map_in_leaf(c, h, (uint32_t)lblk, max_len, next_bound, m);
	if (b)
		brelse(fs->bc, b);
	return err;
}

int extent_map(struct uext4_fs *fs, struct inode *inode, uint64_t lblk, uint64_t max_len,
	       struct block_map *m)
{
	struct ext_ctx c = { .fs = fs, .ino = inode->ino, .blocknr = 0 };

	return map_ctx(&c, inode, lblk, max_len, m);
}

/* ================================================================ write side
 *
 * Changes go through a path: the nodes from the root (in i_block) down to
 * the leaf that covers a logical block, each with the entry chosen.  Every
 * change re-finds its path from the root instead of patching paths after
 * splits; trees are at most 5 levels deep and the nodes are cached, so
 * this costs little and keeps each step simple:
 *
 *   insert   put an extent into its leaf, merging with a neighbour when
 *            logically and physically contiguous;
 *   room     a full leaf is split (half the entries move to a new block,
 *            or none when appending past the last extent, so that
 *            sequential writes leave full leaves behind), after making
 *            room in the parent; a full root moves into a new block and
 *            the tree grows one level (as the kernel's ext4_ext_grow_indepth);
 *   remove   cut extents (whole, head, tail, or middle: split in two),
 *            free blocks, free nodes left empty, and turn an empty root
 *            back into a leaf.
 *
 * Index keys are kept equal to the first key of their child (e2fsck
 * checks it): changing entry 0 of a node updates the keys above it.
 * Caller holds inode->lock for writing and a handle.  Changed blocks are
 * dirtied as CSUM_EXTENT with the inode's number and generation; the
 * commit sets their tail checksum.  The root is part of the inode, written
 * with inode_write().
 */

#define EXT_ROOT_MAX ((EXT_ROOT_SIZE - EXT_HDR_SIZE) / EXT_ENTRY_SIZE)  /* 4 */
#define EXT_UNWRITTEN_MAX_LEN (EXT4_EXT_INIT_MAX_LEN - 1)

struct ext_level {
	struct ext4_extent_header *hdr;  /* the node: i_block or b->data */
	struct buf *b;                   /* NULL for the root */
	int idx;                         /* entry on the path (-1: before the first, leaves only) */
};

struct ext_path {
	int depth;                       /* the root's eh_depth */
	uint64_t next_bound;             /* first key right of the leaf, or EXT_MAX_LBLK_END */
	struct ext_level lv[EXT4_EXT_MAX_DEPTH + 1];
};

static unsigned block_capacity(const struct uext4_fs *fs)
{
	return (fs->block_size - EXT_HDR_SIZE) / EXT_ENTRY_SIZE;
}

static uint8_t *entry_at(struct ext4_extent_header *h, int i)
{
	return (uint8_t *)(h + 1) + (size_t)i * EXT_ENTRY_SIZE;
}

static struct ext4_extent *leaf_entries(struct ext4_extent_header *h)
{
	return (struct ext4_extent *)(h + 1);
}

static struct ext4_extent_header *root_hdr(struct inode *inode)
{
	return (struct ext4_extent_header *)inode_raw_mut(inode)->i_block;
}

static void set_key(struct ext4_extent_header *h, int i, uint32_t key)
{
	uint32_t k = cpu_to_le32(key);

	memcpy(entry_at(h, i), &k, sizeof(k));
}

static void ext_set(struct ext4_extent *e, uint32_t lblk, uint32_t len, uint64_t pblk,
		    bool unwritten)
{
	e->ee_block = cpu_to_le32(lblk);
	e->ee_len = cpu_to_le16((uint16_t)(unwritten ? len + EXT4_EXT_INIT_MAX_LEN : len));
	e->ee_start_hi = cpu_to_le16((uint16_t)(pblk >> 32));
	e->ee_start_lo = cpu_to_le32((uint32_t)pblk);
}

static void ext_set_len(struct ext4_extent *e, uint32_t len, bool unwritten)
{
	e->ee_len = cpu_to_le16((uint16_t)(unwritten ? len + EXT4_EXT_INIT_MAX_LEN : len));
}

static uint64_t ext_end(const struct ext4_extent *e)
{
	return (uint64_t)le32(e->ee_block) + ext_len(e);
}

static uint32_t ext_max_len(bool unwritten)
{
	return unwritten ? EXT_UNWRITTEN_MAX_LEN : EXT4_EXT_INIT_MAX_LEN;
}

void extent_init_root(struct inode *inode)
{
	struct ext4_extent_header *h = root_hdr(inode);

	memset(h, 0, EXT_ROOT_SIZE);
	h->eh_magic = cpu_to_le16(EXT4_EXT_MAGIC);
	h->eh_max = cpu_to_le16(EXT_ROOT_MAX);
}

static void path_release(struct uext4_fs *fs, struct ext_path *p)
{
	for (int l = 1; l <= p->depth; l++) {
		if (p->lv[l].b)
			brelse(fs->bc, p->lv[l].b);
		p->lv[l].b = NULL;
	}
}

static int path_walk(struct ext_ctx *c, struct inode *inode, uint32_t lblk, struct ext_path *p);

/* Find the path to lblk (same checks as extent_map()); the write side, so
 * corruption found is recorded (fs_error). */
static int path_find(struct uext4_fs *fs, struct inode *inode, uint32_t lblk, struct ext_path *p)
{
	struct ext_ctx c = { .fs = fs, .ino = inode->ino, .blocknr = 0 };
	int err = path_walk(&c, inode, lblk, p);

	return err ? FS_ERROR_SEEN(fs, err, inode->ino, c.blocknr) : 0;
}

static int path_walk(struct ext_ctx *c, struct inode *inode, uint32_t lblk, struct ext_path *p)
{
	struct uext4_fs *fs = c->fs;
	struct ext4_extent_header *h = root_hdr(inode);
	int err;

	memset(p, 0, sizeof(*p));
	p->next_bound = EXT_MAX_LBLK_END;
	err = check_header(c, h, EXT_ROOT_MAX, -1);
	if (!err)
		err = check_entries(c, h);
	if (err)
		return err;
	p->depth = le16(h->eh_depth);
	p->lv[0].hdr = h;
	for (int l = 0; l < p->depth; l++) {
		const struct ext4_extent_idx *ix = (const struct ext4_extent_idx *)(h + 1);
		int i = node_search(h, lblk), n = le16(h->eh_entries);
		struct buf *b;

		if (i < 0)
			i = 0;
		if (i + 1 < n)
			p->next_bound = MIN(p->next_bound, (uint64_t)node_key(h, i + 1));
		p->lv[l].idx = i;
		c->blocknr = idx_pblk(&ix[i]);
		if (!pblk_range_ok(fs, c->blocknr, 1))
			err = ext_bad(c, "index points outside the file system");
		else
			err = read_node(c, inode, p->depth - l - 1, &b);
		if (err) {
			path_release(fs, p);
			return err;
		}
		p->lv[l + 1].b = b;
		p->lv[l + 1].hdr = h = (struct ext4_extent_header *)b->data;
	}
	p->lv[p->depth].idx = node_search(h, lblk);
	{
		int i = p->lv[p->depth].idx, n = le16(h->eh_entries);

		if (i + 1 < n)
			p->next_bound = MIN(p->next_bound, (uint64_t)node_key(h, i + 1));
	}
	return 0;
}

/* Before changing a node: block nodes need write access. */
static int node_access(struct handle *h, struct ext_level *lv)
{
	return lv->b ? handle_write_access(h, lv->b) : 0;
}

/* After changing a node (the root goes out with inode_write()). */
static void node_dirty(struct handle *h, struct inode *inode, struct ext_level *lv)
{
	if (lv->b)
		handle_dirty(h, lv->b, CSUM_EXTENT, inode->ino, inode->generation);
}

static void entry_insert(struct ext4_extent_header *h, int pos, const void *entry)
{
	int n = le16(h->eh_entries);

	memmove(entry_at(h, pos + 1), entry_at(h, pos), (size_t)(n - pos) * EXT_ENTRY_SIZE);
	memcpy(entry_at(h, pos), entry, EXT_ENTRY_SIZE);
	h->eh_entries = cpu_to_le16((uint16_t)(n + 1));
}

static void entry_delete(struct ext4_extent_header *h, int pos)
{
	int n = le16(h->eh_entries);

	memmove(entry_at(h, pos), entry_at(h, pos + 1), (size_t)(n - pos - 1) * EXT_ENTRY_SIZE);
	memset(entry_at(h, n - 1), 0, EXT_ENTRY_SIZE);
	h->eh_entries = cpu_to_le16((uint16_t)(n - 1));
}

/*
 * Entry 0 of the node at `level` now has key `key`: the index entries
 * above that lead to it must carry the same key, up to the first one that
 * is not its node's entry 0.
 */
static int fix_keys(struct handle *h, struct inode *inode, struct ext_path *p, int level,
		    uint32_t key)
{
	for (int l = level - 1; l >= 0; l--) {
		struct ext_level *lv = &p->lv[l];
		int err;

		if (node_key(lv->hdr, lv->idx) != key) {
			if ((err = node_access(h, lv)))
				return err;
			set_key(lv->hdr, lv->idx, key);
			node_dirty(h, inode, lv);
		}
		if (lv->idx != 0)
			break;
	}
	return 0;
}

/* A new, zeroed tree block near goal, with write access; i_blocks counted. */
static int new_node(struct handle *h, struct inode *inode, uint64_t goal, struct buf **out)
{
	struct uext4_fs *fs = h->fs;
	uint64_t blk;
	uint32_t got;
	int err;

	if (goal >= fs->blocks_count)
		goal = 0;
	err = balloc_alloc(h, inode, goal, 1, &blk, &got);
	if (err)
		return err;
	err = bget_new(fs->bc, blk, out);
	if (!err)
		err = handle_create_access(h, *out);
	if (err) {
		if (*out)
			brelse(fs->bc, *out);
		balloc_free(h, inode, blk, 1, BALLOC_METADATA);
		return err;
	}
	inode_add_blocks(fs, inode, 1);
	return 0;
}

/* The root is full: move its entries into a new block one level down. */
static int grow_depth(struct handle *h, struct inode *inode)
{
	struct uext4_fs *fs = h->fs;
	struct ext4_extent_header *root = root_hdr(inode), *nh;
	struct ext4_extent_idx ix;
	uint16_t depth = le16(root->eh_depth);
	struct buf *b = NULL;
	int err;

	if (depth >= EXT4_EXT_MAX_DEPTH)
		return fs_err(EFBIG, "extent tree of inode %lu: already %u levels deep",
			      (unsigned long)inode->ino, depth);
	err = new_node(h, inode, balloc_goal(fs, inode), &b);
	if (err)
		return err;
	nh = (struct ext4_extent_header *)b->data;
	memcpy(nh, root, EXT_ROOT_SIZE);
	nh->eh_max = cpu_to_le16((uint16_t)block_capacity(fs));
	handle_dirty(h, b, CSUM_EXTENT, inode->ino, inode->generation);

	memset(&ix, 0, sizeof(ix));
	ix.ei_block = cpu_to_le32(le16(nh->eh_entries) ? node_key(nh, 0) : 0);
	ix.ei_leaf_lo = cpu_to_le32((uint32_t)b->blocknr);
	ix.ei_leaf_hi = cpu_to_le16((uint16_t)(b->blocknr >> 32));
	memset(root + 1, 0, EXT_ROOT_SIZE - EXT_HDR_SIZE);
	memcpy(root + 1, &ix, sizeof(ix));
	root->eh_entries = cpu_to_le16(1);
	root->eh_depth = cpu_to_le16((uint16_t)(depth + 1));
	brelse(fs->bc, b);
	return 0;
}

/*
 * Split the full node at `level` (a block; its parent has room).  A leaf
 * that lblk would be appended to moves nothing (the new leaf starts empty
 * at lblk); an index node appended to moves its last entry; otherwise the
 * upper half moves.
 */
static int split_node(struct handle *h, struct inode *inode, struct ext_path *p, int level,
		      uint32_t lblk)
{
	struct uext4_fs *fs = h->fs;
	struct ext_level *lv = &p->lv[level], *up = &p->lv[level - 1];
	int n = le16(lv->hdr->eh_entries), m;
	struct ext4_extent_header *nh;
	struct ext4_extent_idx ix;
	struct buf *b = NULL;
	uint32_t key;
	int err;

	if (lblk > node_key(lv->hdr, n - 1))
		m = level == p->depth ? n : n - 1;
	else
		m = n / 2;
	if ((err = node_access(h, lv)) || (err = node_access(h, up)))
		return err;
	err = new_node(h, inode, lv->b->blocknr + 1, &b);
	if (err)
		return err;
	nh = (struct ext4_extent_header *)b->data;
	nh->eh_magic = cpu_to_le16(EXT4_EXT_MAGIC);
	nh->eh_max = cpu_to_le16((uint16_t)block_capacity(fs));
	nh->eh_depth = lv->hdr->eh_depth;
	nh->eh_entries = cpu_to_le16((uint16_t)(n - m));
	memcpy(entry_at(nh, 0), entry_at(lv->hdr, m), (size_t)(n - m) * EXT_ENTRY_SIZE);
	memset(entry_at(lv->hdr, m), 0, (size_t)(n - m) * EXT_ENTRY_SIZE);
	lv->hdr->eh_entries = cpu_to_le16((uint16_t)m);
	key = m < n ? node_key(nh, 0) : lblk;

	memset(&ix, 0, sizeof(ix));
	ix.ei_block = cpu_to_le32(key);
	ix.ei_leaf_lo = cpu_to_le32((uint32_t)b->blocknr);
	ix.ei_leaf_hi = cpu_to_le16((uint16_t)(b->blocknr >> 32));
	entry_insert(up->hdr, up->idx + 1, &ix);
	handle_dirty(h, b, CSUM_EXTENT, inode->ino, inode->generation);
	node_dirty(h, inode, lv);
	node_dirty(h, inode, up);
	brelse(fs->bc, b);
	return 0;
}

/*
 * One step towards room for a new extent at lblk in its leaf: split the
 * deepest full node whose parent has room, or grow the tree when every
 * node up to the root is full.  The caller looks the path up again.
 */
static int make_room(struct handle *h, struct inode *inode, uint32_t lblk)
{
	struct uext4_fs *fs = h->fs;
	struct ext_path p;
	int err, l;

	err = path_find(fs, inode, lblk, &p);
	if (err)
		return err;
	for (l = p.depth; l > 0; l--) {
		if (le16(p.lv[l - 1].hdr->eh_entries) < le16(p.lv[l - 1].hdr->eh_max))
			break;
	}
	if (l == 0)
		err = grow_depth(h, inode);
	else
		err = split_node(h, inode, &p, l, lblk);
	path_release(fs, &p);
	return err;
}

static bool can_merge(const struct ext4_extent *a, const struct ext4_extent *b)
{
	bool uw = ext_is_unwritten(a);

	return uw == ext_is_unwritten(b) && ext_end(a) == le32(b->ee_block) &&
	       ext_pblk(a) + ext_len(a) == ext_pblk(b) &&
	       (uint32_t)ext_len(a) + ext_len(b) <= ext_max_len(uw);
}

/* Merge leaf entries i and i + 1 if they are contiguous; true if merged. */
static bool merge_pair(struct ext4_extent_header *h, int i)
{
	struct ext4_extent *ex = leaf_entries(h);

	if (i < 0 || i + 1 >= le16(h->eh_entries) || !can_merge(&ex[i], &ex[i + 1]))
		return false;
	ext_set_len(&ex[i], (uint32_t)ext_len(&ex[i]) + ext_len(&ex[i + 1]),
		    ext_is_unwritten(&ex[i]));
	entry_delete(h, i + 1);
	return true;
}

/*
 * Put extent nx into the tree.  The caller has made sure it overlaps no
 * extent.  merge: allowed to merge with a neighbour (not when splitting
 * an extent on purpose).
 */
static int ext_insert(struct handle *h, struct inode *inode, const struct ext4_extent *nx,
		      bool merge)
{
	struct uext4_fs *fs = h->fs;
	uint32_t lblk = le32(nx->ee_block);

	for (int tries = 0; tries < 4 * EXT4_EXT_MAX_DEPTH + 4; tries++) {
		struct ext_path p;
		struct ext_level *leaf;
		struct ext4_extent *ex;
		int err, i, n;

		err = path_find(fs, inode, lblk, &p);
		if (err)
			return err;
		leaf = &p.lv[p.depth];
		ex = leaf_entries(leaf->hdr);
		i = leaf->idx;
		n = le16(leaf->hdr->eh_entries);
		if (merge && i >= 0 && can_merge(&ex[i], nx)) {
			if (!(err = node_access(h, leaf))) {
				ext_set_len(&ex[i], (uint32_t)ext_len(&ex[i]) + ext_len(nx),
					    ext_is_unwritten(nx));
				merge_pair(leaf->hdr, i);
				node_dirty(h, inode, leaf);
			}
			path_release(fs, &p);
			return err;
		}
		if (merge && i + 1 < n && can_merge(nx, &ex[i + 1])) {
			if (!(err = node_access(h, leaf))) {
				ext_set(&ex[i + 1], lblk, (uint32_t)ext_len(nx) + ext_len(&ex[i + 1]),
					ext_pblk(nx), ext_is_unwritten(nx));
				node_dirty(h, inode, leaf);
				if (i + 1 == 0)
					err = fix_keys(h, inode, &p, p.depth, lblk);
			}
			path_release(fs, &p);
			return err;
		}
		if (n < le16(leaf->hdr->eh_max)) {
			if (!(err = node_access(h, leaf))) {
				entry_insert(leaf->hdr, i + 1, nx);
				node_dirty(h, inode, leaf);
				if (i + 1 == 0)
					err = fix_keys(h, inode, &p, p.depth, lblk);
			}
			path_release(fs, &p);
			return err;
		}
		path_release(fs, &p);
		err = make_room(h, inode, lblk);
		if (err)
			return err;
	}
	return fs_err(EIO, "extent tree of inode %lu: no room for an extent at block %lu "
		      "after splitting", (unsigned long)inode->ino, (unsigned long)lblk);
}

/* Where to allocate for a hole at lblk: right after the extent before it. */
static uint64_t alloc_goal(struct uext4_fs *fs, struct inode *inode, uint32_t lblk)
{
	struct ext_path p;
	uint64_t goal = 0;

	if (path_find(fs, inode, lblk, &p) == 0) {
		struct ext_level *leaf = &p.lv[p.depth];
		struct ext4_extent *ex = leaf_entries(leaf->hdr);

		if (leaf->idx >= 0)
			goal = ext_pblk(&ex[leaf->idx]) + (lblk - le32(ex[leaf->idx].ee_block));
		else if (leaf->b)
			goal = leaf->b->blocknr + 1;
		path_release(fs, &p);
	}
	if (goal == 0 || goal >= fs->blocks_count)
		goal = balloc_goal(fs, inode);
	return goal;
}

/*
 * Split the extent that covers `at` (strictly inside it) into two at
 * `at`; both halves keep the written/unwritten state.
 */
static int split_extent_at(struct handle *h, struct inode *inode, uint32_t at)
{
	struct uext4_fs *fs = h->fs;
	struct ext4_extent orig, right;
	struct ext_path p;
	struct ext4_extent *e;
	uint32_t es;
	bool uw;
	int err;

	if ((err = path_find(fs, inode, at, &p)))
		return err;
	if (p.lv[p.depth].idx < 0) {
		path_release(fs, &p);
		return 0;
	}
	e = &leaf_entries(p.lv[p.depth].hdr)[p.lv[p.depth].idx];
	es = le32(e->ee_block);
	if (at <= es || at >= ext_end(e)) {
		path_release(fs, &p);
		return 0;
	}
	orig = *e;
	uw = ext_is_unwritten(e);
	ext_set(&right, at, (uint32_t)(ext_end(e) - at), ext_pblk(e) + (at - es), uw);
	if (!(err = node_access(h, &p.lv[p.depth]))) {
		ext_set_len(e, at - es, uw);
		node_dirty(h, inode, &p.lv[p.depth]);
	}
	path_release(fs, &p);
	if (err)
		return err;
	err = ext_insert(h, inode, &right, false);
	if (err && path_find(fs, inode, es, &p) == 0) {
		/* Undo: the left half takes its full length back. */
		struct ext_level *leaf = &p.lv[p.depth];

		if (leaf->idx >= 0 && node_access(h, leaf) == 0) {
			leaf_entries(leaf->hdr)[leaf->idx] = orig;
			node_dirty(h, inode, leaf);
		}
		path_release(fs, &p);
	}
	return err;
}

/* Make [lblk, lblk+len) of an unwritten extent written (splitting it). */
static int convert_unwritten(struct handle *h, struct inode *inode, uint32_t lblk, uint32_t len)
{
	struct uext4_fs *fs = h->fs;
	struct ext_path p;
	struct ext_level *leaf;
	struct ext4_extent *ex;
	int err, i;

	if ((err = split_extent_at(h, inode, lblk)) ||
	    (err = split_extent_at(h, inode, lblk + len)))
		return err;
	if ((err = path_find(fs, inode, lblk, &p)))
		return err;
	leaf = &p.lv[p.depth];
	ex = leaf_entries(leaf->hdr);
	i = leaf->idx;
	if (i < 0 || le32(ex[i].ee_block) != lblk || ext_len(&ex[i]) != len ||
	    !ext_is_unwritten(&ex[i])) {
		path_release(fs, &p);
		return fs_err(EIO, "extent tree of inode %lu: unwritten extent at block %lu "
			      "not found after splitting", (unsigned long)inode->ino,
			      (unsigned long)lblk);
	}
	if (!(err = node_access(h, leaf))) {
		ext_set_len(&ex[i], len, false);
		/* Tidy: join written neighbours in this leaf. */
		merge_pair(leaf->hdr, i);
		if (merge_pair(leaf->hdr, i - 1))
			i--;
		node_dirty(h, inode, leaf);
	}
	path_release(fs, &p);
	return err;
}

int extent_map_blocks(struct handle *h, struct inode *inode, uint64_t lblk, uint64_t max_len,
		      unsigned flags, struct block_map *m)
{
	struct uext4_fs *fs = h->fs;
	bool uw = (flags & MAP_UNWRITTEN) != 0;
	struct ext4_extent nx;
	uint64_t first;
	uint32_t got, want;
	int err;

	if (max_len == 0)
		max_len = 1;
	if (lblk >= EXT_LBLK_LIMIT)
		return fs_err(EFBIG, "inode %lu: logical block %llu is past what an extent "
			      "tree maps", (unsigned long)inode->ino, (unsigned long long)lblk);
	max_len = MIN(max_len, EXT_LBLK_LIMIT - lblk);
	{
		struct ext_ctx c = { .fs = fs, .ino = inode->ino, .blocknr = 0 };

		if ((err = map_ctx(&c, inode, lblk, max_len, m)))
			return FS_ERROR_SEEN(fs, err, inode->ino, c.blocknr);
	}
	m->fresh = false;
	if (!(flags & MAP_CREATE))
		return 0;
	if (m->pblk) {
		if (!m->unwritten || !(flags & MAP_CONVERT))
			return 0;
		m->len = MIN(m->len, max_len);
		err = convert_unwritten(h, inode, (uint32_t)lblk, (uint32_t)m->len);
		if (err)
			return err;
		m->unwritten = false;
		m->fresh = true;
		return inode_write(h, inode);
	}
	want = (uint32_t)MIN(MIN(m->len, max_len), ext_max_len(uw));
	err = (flags & MAP_WHOLE)
		? balloc_alloc_whole(h, inode, alloc_goal(fs, inode, (uint32_t)lblk), want, &first, &got)
		: balloc_alloc(h, inode, alloc_goal(fs, inode, (uint32_t)lblk), want, &first, &got);
	if (err)
		return err;
	ext_set(&nx, (uint32_t)lblk, got, first, uw);
	err = ext_insert(h, inode, &nx, true);
	if (err) {
		balloc_free(h, inode, first, got, 0);
		return err;
	}
	inode_add_blocks(fs, inode, got);
	*m = (struct block_map){ .lblk = lblk, .pblk = first, .len = got, .unwritten = uw,
				 .fresh = true };
	return inode_write(h, inode);
}

/*
 * The node at `level` has no entries left: free it and drop its index
 * entry, climbing while parents empty too.  An empty root becomes an
 * empty leaf again.
 */
static int remove_empty_node(struct handle *h, struct inode *inode, struct ext_path *p, int level)
{
	struct uext4_fs *fs = h->fs;

	while (level > 0) {
		struct ext_level *up = &p->lv[level - 1];
		uint64_t blk = p->lv[level].b->blocknr;
		int err = node_access(h, up);

		if (err)
			return err;
		entry_delete(up->hdr, up->idx);
		node_dirty(h, inode, up);
		brelse(fs->bc, p->lv[level].b);
		p->lv[level].b = NULL;
		err = balloc_free(h, inode, blk, 1, BALLOC_METADATA);
		if (err)
			return err;
		inode_sub_blocks(fs, inode, 1);
		level--;
		if (le16(up->hdr->eh_entries) > 0)
			return up->idx == 0 ? fix_keys(h, inode, p, level, node_key(up->hdr, 0)) : 0;
	}
	/* The root is empty: back to a depth-0 leaf. */
	extent_init_root(inode);
	return 0;
}

static int free_data(struct handle *h, struct inode *inode, uint64_t pblk, uint64_t len)
{
	int err = balloc_free(h, inode, pblk, (uint32_t)len, 0);

	if (!err)
		inode_sub_blocks(h->fs, inode, len);
	return err;
}

/*
 * Remove [a, b) from the extent on the path's leaf (entry idx), which
 * covers it; frees the blocks.  Releases the path.
 */
static int cut_extent(struct handle *h, struct inode *inode, struct ext_path *p, uint64_t a,
		      uint64_t b, bool free_blocks)
{
	struct uext4_fs *fs = h->fs;
	struct ext_level *leaf = &p->lv[p->depth];
	int i = leaf->idx;
	struct ext4_extent *e = &leaf_entries(leaf->hdr)[i];
	uint64_t es = le32(e->ee_block), ee = ext_end(e), pb = ext_pblk(e);
	bool uw = ext_is_unwritten(e);
	struct ext4_extent right;
	int err = node_access(h, leaf);

	if (err)
		goto out;
	if (a == es && b == ee) {
		entry_delete(leaf->hdr, i);
		node_dirty(h, inode, leaf);
		if (le16(leaf->hdr->eh_entries) == 0)
			err = remove_empty_node(h, inode, p, p->depth);
		else if (i == 0)
			err = fix_keys(h, inode, p, p->depth, node_key(leaf->hdr, 0));
	} else if (a == es) {
		ext_set(e, (uint32_t)b, (uint32_t)(ee - b), pb + (b - es), uw);
		node_dirty(h, inode, leaf);
		if (i == 0)
			err = fix_keys(h, inode, p, p->depth, (uint32_t)b);
	} else if (b == ee) {
		ext_set_len(e, (uint32_t)(a - es), uw);
		node_dirty(h, inode, leaf);
	} else {
		/* Middle: keep [es, a), insert [b, ee). */
		struct ext4_extent orig = *e;

		ext_set(&right, (uint32_t)b, (uint32_t)(ee - b), pb + (b - es), uw);
		ext_set_len(e, (uint32_t)(a - es), uw);
		node_dirty(h, inode, leaf);
		path_release(fs, p);
		err = ext_insert(h, inode, &right, false);
		if (err) {
			if (path_find(fs, inode, (uint32_t)es, p) == 0) {
				struct ext_level *l2 = &p->lv[p->depth];

				if (l2->idx >= 0 && node_access(h, l2) == 0) {
					leaf_entries(l2->hdr)[l2->idx] = orig;
					node_dirty(h, inode, l2);
				}
				path_release(fs, p);
			}
			return err;
		}
	}
out:
	path_release(fs, p);
	if (!err && free_blocks)
		err = free_data(h, inode, pb + (a - es), b - a);
	else if (!err)
		inode_sub_blocks(fs, inode, b - a);
	return err;
}

/* Take [start, end) out of the tree; free_blocks: give the data blocks
 * back to the allocator too (a fast-commit replay leaves that to its own
 * bitmap pass, fc_replay.c). */
static int unmap_range(struct handle *h, struct inode *inode, uint64_t start, uint64_t end,
		       bool free_blocks)
{
	struct uext4_fs *fs = h->fs;
	uint64_t pos = start;
	int err = 0;

	end = MIN(end, EXT_LBLK_LIMIT);
	while (pos < end) {
		struct ext_path p;
		struct ext_level *leaf;
		struct ext4_extent *ex;
		uint64_t es, ee;
		int i, n;

		if ((err = path_find(fs, inode, (uint32_t)pos, &p)))
			break;
		leaf = &p.lv[p.depth];
		ex = leaf_entries(leaf->hdr);
		n = le16(leaf->hdr->eh_entries);
		i = leaf->idx;
		if (i < 0 || ext_end(&ex[i]) <= pos)
			i++;
		if (i >= n) {
			/* Nothing more in this leaf: go on at the next one. */
			uint64_t next = p.next_bound;

			path_release(fs, &p);
			if (next <= pos || next >= end)
				break;
			pos = next;
			continue;
		}
		es = le32(ex[i].ee_block);
		ee = ext_end(&ex[i]);
		if (es >= end) {
			path_release(fs, &p);
			break;
		}
		leaf->idx = i;
		err = cut_extent(h, inode, &p, MAX(es, pos), MIN(ee, end), free_blocks);
		if (err)
			break;
		pos = MIN(ee, end);
	}
	if (!err)
		err = inode_write(h, inode);
	return err;
}

int extent_remove_range(struct handle *h, struct inode *inode, uint64_t start, uint64_t end)
{
	return unmap_range(h, inode, start, end, true);
}

int extent_replay_unmap(struct handle *h, struct inode *inode, uint64_t start, uint64_t end)
{
	return unmap_range(h, inode, start, end, false);
}

/*
 * As the kernel's ext4_fc_replay_add_range(): each part of [lblk, lblk +
 * len) that is a hole gets the logged extent's blocks; a part mapped
 * elsewhere, or in the other written state, is taken out and mapped as
 * logged.  No block is allocated or freed for the data here.
 */
int extent_replay_map(struct handle *h, struct inode *inode, uint32_t lblk, uint32_t len,
		      uint64_t pblk, bool unwritten)
{
	struct uext4_fs *fs = h->fs;
	uint64_t cur = lblk, end = (uint64_t)lblk + len;
	int err = 0;

	while (!err && cur < end) {
		struct block_map m;
		uint64_t want = pblk + (cur - lblk), n;
		struct ext4_extent nx;

		if ((err = extent_map(fs, inode, cur, end - cur, &m)))
			break;
		n = m.len && m.len < end - cur ? m.len : end - cur;
		if (m.pblk == want && m.unwritten == unwritten) {
			cur += n;
			continue;
		}
		if (m.pblk && (err = unmap_range(h, inode, cur, cur + n, false)))
			break;
		ext_set(&nx, (uint32_t)cur, (uint32_t)n, want, unwritten);
		if ((err = ext_insert(h, inode, &nx, true)))
			break;
		inode_add_blocks(fs, inode, (int64_t)n);
		cur += n;
	}
	return err ? err : inode_write(h, inode);
}

/* Visit one node's blocks below the root (the node itself, then what it
 * holds); depth counts down to the leaves. */
static int walk_node(struct uext4_fs *fs, struct inode *inode, const struct ext4_extent_header *hd,
		     int (*fn)(void *ctx, uint64_t pblk, uint64_t len, bool node), void *ctx)
{
	int n = le16(hd->eh_entries), err = 0;

	if (le16(hd->eh_depth) == 0) {
		const struct ext4_extent *e = (const struct ext4_extent *)(hd + 1);

		for (int i = 0; !err && i < n; i++)
			err = fn(ctx, ext_pblk(&e[i]), ext_len(&e[i]), false);
		return err;
	}
	for (int i = 0; !err && i < n; i++) {
		const struct ext4_extent_idx *ix = (const struct ext4_extent_idx *)(hd + 1) + i;
		struct ext_ctx c = {fs, inode->ino, idx_pblk(ix)};
		struct buf *b;

		if ((err = read_node(&c, inode, le16(hd->eh_depth) - 1, &b)))
			break;
		err = fn(ctx, c.blocknr, 1, true);
		if (!err)
			err = walk_node(fs, inode, (const struct ext4_extent_header *)b->data, fn, ctx);
		brelse(fs->bc, b);
	}
	return err;
}

int extent_for_each_block(struct uext4_fs *fs, struct inode *inode,
			  int (*fn)(void *ctx, uint64_t pblk, uint64_t len, bool node), void *ctx)
{
	return walk_node(fs, inode, root_hdr(inode), fn, ctx);
}

/*
 * Shift the logical start of every extent at or after `start` by delta
 * blocks (collapse range: negative, after the range was removed; insert
 * range: positive, after the extent straddling start was split), with
 * the index keys above them.  Visits only the nodes that hold such keys.
 */
static int shift_node(struct handle *h, struct inode *inode, struct ext4_extent_header *hdr,
		      struct buf *b, int depth, uint32_t start, int64_t delta)
{
	struct uext4_fs *fs = h->fs;
	struct ext_ctx c = { .fs = fs, .ino = inode->ino };
	int n = le16(hdr->eh_entries), err = 0;
	bool changed = false;

	if (b && (err = handle_write_access(h, b)))
		return err;
	if (depth == 0) {
		struct ext4_extent *ex = leaf_entries(hdr);

		for (int i = 0; i < n; i++) {
			if (le32(ex[i].ee_block) >= start) {
				ex[i].ee_block = cpu_to_le32((uint32_t)((int64_t)le32(ex[i].ee_block) + delta));
				changed = true;
			}
		}
	} else {
		const struct ext4_extent_idx *ix = (const struct ext4_extent_idx *)(hdr + 1);

		for (int i = 0; i < n && !err; i++) {
			struct buf *cb;
			struct ext4_extent_header *ch;

			if (i + 1 < n && node_key(hdr, i + 1) <= start)
				continue;  /* the whole subtree lies before start */
			c.blocknr = idx_pblk(&ix[i]);
			if (!pblk_range_ok(fs, c.blocknr, 1)) {
				err = ext_bad(&c, "index points outside the file system");
				break;
			}
			if ((err = read_node(&c, inode, depth - 1, &cb)))
				break;
			ch = (struct ext4_extent_header *)cb->data;
			err = shift_node(h, inode, ch, cb, depth - 1, start, delta);
			if (!err && le16(ch->eh_entries) && node_key(ch, 0) != node_key(hdr, i)) {
				set_key(hdr, i, node_key(ch, 0));
				changed = true;
			}
			brelse(fs->bc, cb);
		}
	}
	if (changed && b)
		handle_dirty(h, b, CSUM_EXTENT, inode->ino, inode->generation);
	return err;
}

/* End (exclusive) of the last extent, 0 for an empty tree. */
static int last_extent_end(struct uext4_fs *fs, struct inode *inode, uint64_t *end)
{
	struct ext_path p;
	struct ext_level *leaf;
	int err = path_find(fs, inode, 0xFFFFFFFFu, &p);

	if (err)
		return err;
	leaf = &p.lv[p.depth];
	*end = leaf->idx >= 0 ? ext_end(&leaf_entries(leaf->hdr)[leaf->idx]) : 0;
	path_release(fs, &p);
	return 0;
}

int extent_collapse(struct handle *h, struct inode *inode, uint64_t lblk, uint64_t len)
{
	int err;

	if (lblk + len > EXT_LBLK_LIMIT)
		return fs_err(EINVAL, "collapse range of inode %lu: past the last block",
			      (unsigned long)inode->ino);
	if ((err = extent_remove_range(h, inode, lblk, lblk + len)))
		return err;
	err = shift_node(h, inode, root_hdr(inode), NULL, le16(root_hdr(inode)->eh_depth),
			 (uint32_t)(lblk + len), -(int64_t)len);
	if (!err)
		err = inode_write(h, inode);
	return err;
}

int extent_insert_gap(struct handle *h, struct inode *inode, uint64_t lblk, uint64_t len)
{
	uint64_t end;
	int err;

	if ((err = last_extent_end(h->fs, inode, &end)))
		return err;
	if (lblk >= EXT_LBLK_LIMIT || end + len > EXT_LBLK_LIMIT)
		return fs_err(EFBIG, "insert range of inode %lu: extents would pass the last "
			      "logical block", (unsigned long)inode->ino);
	if (lblk < EXT_LBLK_LIMIT - 1 && (err = split_extent_at(h, inode, (uint32_t)lblk)))
		return err;
	err = shift_node(h, inode, root_hdr(inode), NULL, le16(root_hdr(inode)->eh_depth),
			 (uint32_t)lblk, (int64_t)len);
	if (!err)
		err = inode_write(h, inode);
	return err;
}
