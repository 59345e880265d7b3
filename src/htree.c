/*
 * htree.c - hash-indexed (dx) directories: lookup by name hash, readdir
 * in hash order, and the write side (conversion of a one-block linear
 * directory, insertion with leaf and index splits, finding an entry to
 * remove or retarget), described at "write side" below.
 *
 * Format (Documentation/filesystems/ext4/directory.rst, "Hash Tree
 * Directories"): block 0 is the dx root: a "." dirent (rec_len 12), a ".."
 * dirent whose rec_len spans the rest of the block, then at byte 24 the
 * dx_root_info (reserved_zero, hash_version, info_length 8,
 * indirect_levels, flags) and at byte 32 a dx_countlimit overlaying the
 * hash of the first dx_entry {hash, block}.  Interior nodes start with an
 * empty dirent spanning the block, then the countlimit at byte 8.  Entry 0
 * of every node has an implicit hash of 0 (its hash field is the
 * countlimit); the others are sorted by hash.  Bit 0 of an entry's hash
 * says the previous leaf ends with the same hash (a collision that
 * continues into this leaf).  With metadata_csum a dx_tail (8 bytes)
 * follows the last possible entry, so limit is one less.  Leaves are
 * ordinary dirent blocks.
 *
 * Validation follows the kernel's dx_probe(): known hash version, no
 * unknown flags, indirect_levels < 2 (< 3 with largedir), limit exactly
 * what the block size allows, 1 <= count <= limit, entries sorted, every
 * block inside the directory and never one already on the path (a loop).
 * A structural problem makes lookup fall back to a linear scan, as the
 * kernel does; a checksum failure or a hole does not.
 *
 * readdir positions (cookies) are the kernel's 64-bit hash positions
 * (hash2pos()): (major_hash >> 1) << 32 | minor_hash; end of directory is
 * 0x7fffffffffffffff.  "." and ".." get hashes 0 and 2.  A readdir call
 * starting at major hash M collects, as ext4_htree_fill_tree() does, every
 * entry with major hash >= M of the leaf holding M and of the following
 * leaves up to one whose index hash does not continue a collision; so all
 * entries of a major hash are always collected together.  They are sorted
 * by (hash, minor hash, then name) and, to make every cookie resume
 * exactly even when two entries share both hashes (the legacy hash has no
 * minor hash at all), each entry's position uses an "effective minor" =
 * max(minor, previous effective minor of the same major hash + 1).
 * Without collisions this is the kernel's position.  (Only if more than
 * one entry of a major hash would need an effective minor beyond
 * 0xffffffff could two entries share a position.)
 *
 * Locking: dir->lock is held as a reader while index and leaf blocks are
 * read; readdir drops it before calling the filldir callback.  Writers
 * that split a leaf or an index node hold it for writing, so a reader
 * never sees a half-split leaf or index.  Writers that change one leaf
 * only (htree_par_*) hold it for reading and that leaf's lock for
 * writing; readers hold the leaf lock for reading while they read the
 * leaf's entries ("leaf locks" below).
 */
#include "bcache.h"
#include "csum.h"
#include "dirblock.h"
#include "dirhash.h"
#include "error.h"
#include "file.h"
#include "htree.h"
#include "inode.h"
#include "internal.h"
#include "lock.h"
#include "ondisk.h"
#include "trans.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>

#define DX_MAX_LEVELS 3             /* root + 2 levels of nodes (largedir) */
#define DX_ROOT_INFO_OFF 24u
#define DX_ROOT_ENTRIES_OFF 32u
#define DX_NODE_ENTRIES_OFF 8u
#define DX_BLOCK_MASK 0x0fffffffu   /* the kernel ignores the top 4 bits */
#define HTREE_EOF_64 0x7fffffffffffffffULL

/* One level of the path from the root to a leaf. */
struct dx_frame {
	struct buf *b;
	uint64_t lblk;
	const struct dx_entry *entries;
	unsigned count, at;
};

/* The path of a probe plus what the root says about the tree. */
struct dx_path {
	struct dx_frame f[DX_MAX_LEVELS];
	unsigned levels;            /* index levels: indirect_levels + 1 */
	int hash_version;           /* with the unsigned variant applied */
	uint64_t nblocks;           /* directory size in blocks */
	uint64_t dot_ino, dotdot_ino;
	unsigned dot_ft, dotdot_ft;
	bool structural;            /* the last error allows a linear fallback */
};

static uint64_t hash_pos(uint32_t hash, uint32_t minor)
{
	return ((uint64_t)(hash >> 1) << 32) | minor;
}

static uint32_t pos_hash(uint64_t pos)
{
	return (uint32_t)((pos >> 32) << 1);
}

static uint32_t entry_hash(const struct dx_entry *e)
{
	return le32(e->hash);
}

static uint64_t entry_block(const struct dx_entry *e)
{
	return le32(e->block) & DX_BLOCK_MASK;
}

static void path_release(struct uext4_fs *fs, struct dx_path *p)
{
	for (unsigned i = 0; i < DX_MAX_LEVELS; i++) {
		if (p->f[i].b)
			brelse(fs->bc, p->f[i].b);
		p->f[i].b = NULL;
	}
}

/* A structural problem: the kernel would fall back to a linear scan. */
#define dx_bad(p, ...) ((p)->structural = true, fs_corrupt(__VA_ARGS__))

/* Check count/limit, order and checksum of an index block's entries. */
static int dx_check_entries(struct uext4_fs *fs, struct inode *dir, struct dx_path *p,
			    struct dx_frame *f, unsigned off)
{
	const struct dx_countlimit *cl = (const struct dx_countlimit *)(f->b->data + off);
	unsigned limit = le16(cl->limit), count = le16(cl->count);
	unsigned want = (fs->block_size - off) / sizeof(struct dx_entry) -
			(fs->metadata_csum ? 1 : 0);
	const char *what = off == DX_ROOT_ENTRIES_OFF ? "root" : "node";

	if (limit != want)
		return dx_bad(p, "htree directory inode %lu %s block %lu (logical %lu): "
			      "limit %u, expected %u", (unsigned long)dir->ino, what,
			      (unsigned long)f->b->blocknr, (unsigned long)f->lblk, limit, want);
	if (count == 0 || count > limit)
		return dx_bad(p, "htree directory inode %lu %s block %lu (logical %lu): "
			      "count %u, limit %u", (unsigned long)dir->ino, what,
			      (unsigned long)f->b->blocknr, (unsigned long)f->lblk, count, limit);
	f->entries = (const struct dx_entry *)(f->b->data + off);
	f->count = count;
	/* The order was checked once; our writers insert in order.  Saves a
	 * pass over up to 508 entries per probe (6% of a create in a big
	 * directory). */
	if (atomic_load_explicit(&f->b->state, memory_order_acquire) & BUF_DX_ORDERED)
		return 0;
	for (unsigned i = 2; i < count; i++) {
		if (entry_hash(&f->entries[i]) < entry_hash(&f->entries[i - 1]))
			return dx_bad(p, "htree directory inode %lu %s block %lu (logical %lu): "
				      "entry %u hash 0x%x below the previous 0x%x",
				      (unsigned long)dir->ino, what, (unsigned long)f->b->blocknr,
				      (unsigned long)f->lblk, i, entry_hash(&f->entries[i]),
				      entry_hash(&f->entries[i - 1]));
	}
	atomic_fetch_or_explicit(&f->b->state, BUF_DX_ORDERED, memory_order_release);
	return 0;
}

/*
 * Verify an index block's checksum before any structural check, as the
 * kernel's ext4_read_dirblock() does: a block that fails its checksum is an
 * error, never a reason to fall back to a linear scan.
 */
static int dx_verify_csum(struct uext4_fs *fs, struct inode *dir, struct dx_frame *f,
			  unsigned off)
{
	const struct dx_countlimit *cl = (const struct dx_countlimit *)(f->b->data + off);
	int err;

	if (!fs->metadata_csum || buf_verified(f->b))
		return 0;
	err = csum_verify_dx_node(fs, dir->ino, dir->generation, f->b->blocknr, f->b->data,
				  off, le16(cl->count), le16(cl->limit));
	if (!err)
		buf_set_verified(f->b);
	return err;
}

/* Read an index block; a hole in an htree directory is corruption. */
static int dx_bread(struct uext4_fs *fs, struct inode *dir, uint64_t lblk, struct buf **b)
{
	int err = inode_bread(fs, dir, lblk, UEXT4_META_DIR, b);

	if (err == -ENODATA)
		return fs_corrupt("htree directory inode %lu: hole at index block %lu",
				  (unsigned long)dir->ino, (unsigned long)lblk);
	return err;
}

/* The "." and ".." dirents of the root, which also hide the index. */
static int dx_check_dots(struct uext4_fs *fs, struct inode *dir, struct dx_path *p,
			 const uint8_t *data)
{
	const struct ext4_dir_entry_2 *dot = (const struct ext4_dir_entry_2 *)data;
	const struct ext4_dir_entry_2 *dotdot = (const struct ext4_dir_entry_2 *)(data + 12);

	if (dot->name_len != 1 || dot->name[0] != '.' || dir_rec_len(fs, dot->rec_len) != 12 ||
	    dotdot->name_len != 2 || dotdot->name[0] != '.' || dotdot->name[1] != '.' ||
	    dir_rec_len(fs, dotdot->rec_len) != fs->block_size - 12)
		return dx_bad(p, "htree directory inode %lu root: bad '.' or '..' entry",
			      (unsigned long)dir->ino);
	p->dot_ino = le32(dot->inode);
	p->dotdot_ino = le32(dotdot->inode);
	p->dot_ft = dot->file_type;
	p->dotdot_ft = dotdot->file_type;
	if (p->dot_ino > fs->inodes_count || p->dotdot_ino > fs->inodes_count)
		return dx_bad(p, "htree directory inode %lu root: '.' or '..' inode out of range",
			      (unsigned long)dir->ino);
	return 0;
}

/* The dx_root_info: hash version, depth, flags. */
static int dx_check_info(struct uext4_fs *fs, struct inode *dir, struct dx_path *p,
			 const uint8_t *data)
{
	const struct dx_root_info *info = (const struct dx_root_info *)(data + DX_ROOT_INFO_OFF);
	unsigned max_levels = FS_HAS_INCOMPAT(fs, LARGEDIR) ? 3 : 2;

	if (info->hash_version == DX_HASH_SIPHASH)
		return fs_err(EOPNOTSUPP, "htree directory inode %lu: siphash (casefold) "
			      "directories are not supported", (unsigned long)dir->ino);
	if (le32(info->reserved_zero) != 0 || info->info_length != 8 ||
	    info->hash_version > DX_HASH_TEA || (info->unused_flags & 1) ||
	    info->indirect_levels >= max_levels)
		return dx_bad(p, "htree directory inode %lu root: reserved %u, info_length %u, "
			      "hash version %u, indirect levels %u, flags 0x%x",
			      (unsigned long)dir->ino, le32(info->reserved_zero),
			      info->info_length, info->hash_version, info->indirect_levels,
			      info->unused_flags);
	p->levels = info->indirect_levels + 1u;
	p->hash_version = info->hash_version;
	if (fs->hash_unsigned)
		p->hash_version += DX_HASH_LEGACY_UNSIGNED;
	return 0;
}

static int dx_read_root(struct uext4_fs *fs, struct inode *dir, struct dx_path *p)
{
	struct dx_frame *f = &p->f[0];
	int err;

	memset(p, 0, sizeof(*p));
	p->nblocks = dir->size >> fs->log_block_size;
	if (p->nblocks < 2 || p->nblocks > UINT32_MAX)
		return dx_bad(p, "htree directory inode %lu: size %lu", (unsigned long)dir->ino,
			      (unsigned long)dir->size);
	if ((err = dx_bread(fs, dir, 0, &f->b)))
		return err;
	f->lblk = 0;
	if ((err = dx_verify_csum(fs, dir, f, DX_ROOT_ENTRIES_OFF)) ||
	    (err = dx_check_dots(fs, dir, p, f->b->data)) ||
	    (err = dx_check_info(fs, dir, p, f->b->data)))
		return err;
	return dx_check_entries(fs, dir, p, f, DX_ROOT_ENTRIES_OFF);
}

/* Block that entry at of level points to: inside the directory, not the
 * root and not a block already on the path above (a loop). */
static int dx_child_block(struct inode *dir, struct dx_path *p, unsigned level,
			  uint64_t *lblk)
{
	const struct dx_frame *f = &p->f[level];
	uint64_t blk = entry_block(&f->entries[f->at]);

	if (blk == 0 || blk >= p->nblocks)
		return dx_bad(p, "htree directory inode %lu index block %lu entry %u: block %lu "
			      "outside the directory (%lu blocks)", (unsigned long)dir->ino,
			      (unsigned long)f->lblk, f->at, (unsigned long)blk,
			      (unsigned long)p->nblocks);
	for (unsigned i = 1; i <= level; i++) {
		if (p->f[i].lblk == blk)
			return dx_bad(p, "htree directory inode %lu index block %lu entry %u: "
				      "loop back to block %lu", (unsigned long)dir->ino,
				      (unsigned long)f->lblk, f->at, (unsigned long)blk);
	}
	*lblk = blk;
	return 0;
}

/* Replace level's frame by the node the entry of level-1 points to. */
static int dx_read_node(struct uext4_fs *fs, struct inode *dir, struct dx_path *p,
			unsigned level)
{
	struct dx_frame *f = &p->f[level];
	const struct ext4_dir_entry_2 *fake;
	uint64_t lblk;
	int err;

	if (f->b)
		brelse(fs->bc, f->b);
	f->b = NULL;
	if ((err = dx_child_block(dir, p, level - 1, &lblk)))
		return err;
	if ((err = dx_bread(fs, dir, lblk, &f->b)))
		return err;
	f->lblk = lblk;
	f->at = 0;
	fake = (const struct ext4_dir_entry_2 *)f->b->data;
	if (le32(fake->inode) != 0 || dir_rec_len(fs, fake->rec_len) != fs->block_size)
		return fs_corrupt("htree directory inode %lu block %lu (logical %lu): leaf "
				  "block found where an index block was expected",
				  (unsigned long)dir->ino, (unsigned long)f->b->blocknr,
				  (unsigned long)lblk);
	if ((err = dx_verify_csum(fs, dir, f, DX_NODE_ENTRIES_OFF)))
		return err;
	return dx_check_entries(fs, dir, p, f, DX_NODE_ENTRIES_OFF);
}

/* Index of the last entry whose hash is <= hash (entry 0 counts as 0). */
static unsigned dx_search(const struct dx_frame *f, uint32_t hash)
{
	unsigned lo = 1, hi = f->count;

	while (lo < hi) {
		unsigned mid = lo + (hi - lo) / 2;

		if (entry_hash(&f->entries[mid]) > hash)
			hi = mid;
		else
			lo = mid + 1;
	}
	return lo - 1;
}

/* Walk from the (read) root to the leaf whose hash range holds hash. */
static int dx_descend(struct uext4_fs *fs, struct inode *dir, uint32_t hash, struct dx_path *p)
{
	int err = 0;

	for (unsigned level = 0; !err && level < p->levels; level++) {
		p->f[level].at = dx_search(&p->f[level], hash);
		if (level + 1 < p->levels)
			err = dx_read_node(fs, dir, p, level + 1);
	}
	return err;
}

static int dx_probe(struct uext4_fs *fs, struct inode *dir, uint32_t hash, struct dx_path *p)
{
	int err = dx_read_root(fs, dir, p);

	return err ? err : dx_descend(fs, dir, hash, p);
}

/* ------------------------------------------------------------ leaf locks
 * With dir->lock held for reading, inserts and removals that stay inside
 * one leaf run in parallel (dir_add_shared(), dir_remove_shared()).  Each
 * leaf block then has a lock of its own, from a process-wide table
 * striped by (directory inode number, logical block): a changer holds it
 * for writing, a reader of the leaf's entries (lookup, readdir) for
 * reading.  Index blocks and the root change only with dir->lock held
 * for writing, so they are read without a leaf lock.  A thread holds at
 * most one leaf lock at a time, so the stripes need no order.  8,192 of
 * them (512 KiB): with 1,024, 16 threads creating in private directories
 * met on one 500 to 1,300 times per 0.3 s, a preempted holder keeping the
 * other waiting up to 68 ms (lock statistics, dir_leaf); with 8,192, 8 to
 * 230 times.
 */
#define LEAF_LOCK_STRIPES 8192

static struct leaf_stripe {
	_Alignas(64) struct urwlock l;  /* a line each: no false sharing */
} leaf_locks[LEAF_LOCK_STRIPES];
static pthread_once_t leaf_locks_once = PTHREAD_ONCE_INIT;

static void leaf_locks_init(void)
{
	for (unsigned i = 0; i < LEAF_LOCK_STRIPES; i++)
		urwlock_init(&leaf_locks[i].l, RANK_DIR_LEAF);
}

struct urwlock *htree_leaf_lock(const struct inode *dir, uint64_t lblk)
{
	uint64_t k = dir->ino * 0x9e3779b97f4a7c15ull ^ lblk * 0xc2b2ae3d27d4eb4full;

	pthread_once(&leaf_locks_once, leaf_locks_init);
	k ^= k >> 31;
	return &leaf_locks[k % LEAF_LOCK_STRIPES].l;
}

/* The leaf the deepest frame points to, read and verified; with lk, its
 * leaf lock is taken first (for writing when wr) and *lk says which, held
 * only on success. */
static int dx_read_leaf_as(struct uext4_fs *fs, struct inode *dir, struct dx_path *p,
			   struct dir_leaf *lf, struct urwlock **lk, bool wr)
{
	uint64_t lblk;
	int err = dx_child_block(dir, p, p->levels - 1, &lblk);

	if (err)
		return err;
	if (lk) {
		*lk = htree_leaf_lock(dir, lblk);
		if (wr)
			urw_wrlock(*lk);
		else
			urw_rdlock(*lk);
	}
	err = dir_read_leaf(fs, dir, lblk, lf);
	if (err && lk) {
		urw_unlock(*lk);
		*lk = NULL;
	}
	if (err == -ENODATA)
		return fs_corrupt("htree directory inode %lu: hole at leaf block %lu",
				  (unsigned long)dir->ino, (unsigned long)lblk);
	return err;
}

static int dx_read_leaf(struct uext4_fs *fs, struct inode *dir, struct dx_path *p,
			struct dir_leaf *lf)
{
	return dx_read_leaf_as(fs, dir, p, lf, NULL, false);
}

/* A leaf read with dx_read_leaf_as() released, and its lock. */
static void dx_release_leaf_as(struct uext4_fs *fs, struct dir_leaf *lf, struct urwlock *lk)
{
	dir_release_leaf(fs, lf);
	if (lk)
		urw_unlock(lk);
}

/*
 * Move the path to the next leaf in hash order (ext4_htree_next_block).
 * With want set, stop unless the next leaf may hold that hash (its index
 * hash without the collision bit equals it).  Returns 1 and the next
 * leaf's index hash, 0 at the end, or an error.
 */
static int dx_next_leaf(struct uext4_fs *fs, struct inode *dir, struct dx_path *p,
			const uint32_t *want, uint32_t *next_hash)
{
	int level = (int)p->levels - 1;
	uint32_t h;

	while (level >= 0 && p->f[level].at + 1 >= p->f[level].count)
		level--;
	if (level < 0)
		return 0;
	h = entry_hash(&p->f[level].entries[p->f[level].at + 1]);
	if (want && (h & ~1u) != *want)
		return 0;
	p->f[level].at++;
	for (unsigned l = (unsigned)level + 1; l < p->levels; l++) {
		int err = dx_read_node(fs, dir, p, l);

		if (err)
			return err;
	}
	*next_hash = h;
	return 1;
}

/* ------------------------------------------------------------ lookup */

/*
 * The hash of a name in dir: in a casefolded directory the hash of its
 * folded form (the kernel's ext4fs_dirhash()); a name that is not valid
 * UTF-8 hashes as its bytes, as there.  The fold is the per-thread one of
 * dir_fold_query(): the leaf scan that follows a lookup's hash compares
 * entries with the same folded name without folding it again.
 */
static int name_hash(struct uext4_fs *fs, struct inode *dir, int version, const char *name,
		     size_t len, uint32_t *hash, uint32_t *minor)
{
	if (len && dir_casefolded(fs, dir)) {
		const char *folded;
		ssize_t n = dir_fold_query(name, len, &folded);

		if (n >= 0)
			return dirhash(version, fs->hash_seed, folded, (size_t)n, hash, minor);
	}
	return dirhash(version, fs->hash_seed, name, len, hash, minor);
}

static int htree_find(struct uext4_fs *fs, struct inode *dir, const char *name, size_t len,
		      uint64_t *ino, unsigned *ftype, struct dx_path *p)
{
	uint32_t hash, next;
	int err, more = 1;

	if ((err = dx_read_root(fs, dir, p)))
		return err;
	if ((err = name_hash(fs, dir, p->hash_version, name, len, &hash, NULL)))
		return err;
	if ((err = dx_descend(fs, dir, hash, p)))
		return err;
	while (more > 0) {
		struct dir_leaf lf;
		struct urwlock *lk;
		bool found;

		if ((err = dx_read_leaf_as(fs, dir, p, &lf, &lk, false)))
			return err;
		err = dir_leaf_find(fs, dir, &lf, name, len, &found, ino, ftype);
		dx_release_leaf_as(fs, &lf, lk);
		if (err || found)
			return err;
		more = dx_next_leaf(fs, dir, p, &hash, &next);
	}
	if (more < 0)
		return more;
	return fs_err(ENOENT, "no entry '%.*s' in directory inode %lu", (int)len, name,
		      (unsigned long)dir->ino);
}

/* "." and ".." live in block 0, outside the index. */
static bool is_dot_or_dotdot(const char *name, size_t len)
{
	return len <= 2 && name[0] == '.' && (len == 1 || name[1] == '.');
}

int htree_lookup_locked(struct uext4_fs *fs, struct inode *dir, const char *name,
			size_t len, uint64_t *ino, unsigned *ftype)
{
	struct dx_path p = { .structural = false };
	int err;

	if (is_dot_or_dotdot(name, len)) {
		err = dx_read_root(fs, dir, &p);
		path_release(fs, &p);
		if (!err) {
			*ino = len == 1 ? p.dot_ino : p.dotdot_ino;
			if (ftype)
				*ftype = dir_dtype(fs, len == 1 ? p.dot_ft : p.dotdot_ft);
			return 0;
		}
	} else {
		err = htree_find(fs, dir, name, len, ino, ftype, &p);
		path_release(fs, &p);
	}
	if (!err || err == -ENOENT || !p.structural)
		return err;
	/* A damaged index (the message names it): dir.c scans the leaves,
	 * like the kernel. */
	return HTREE_DAMAGED;
}

/* ------------------------------------------------------------ readdir */

/* An entry collected for readdir. */
struct hent {
	uint32_t hash, minor, eff_minor;
	uint8_t order;              /* 0 ".", 1 "..", 2 others: sorts dots first */
	uint8_t dtype;
	uint8_t name_len;
	uint32_t name_off;
	uint64_t ino;
};

/* The entries of one readdir step (all hashes >= a start hash). */
struct hbatch {
	struct hent *e;
	char *names;
	size_t n, cap, names_used, names_cap;
};

static int hbatch_add(struct hbatch *hb, const char *name, unsigned len, uint64_t ino,
		      unsigned dtype, uint32_t hash, uint32_t minor, unsigned order)
{
	if (hb->n == hb->cap) {
		size_t cap = hb->cap ? hb->cap * 2 : 256;
		struct hent *e = realloc(hb->e, cap * sizeof(*e));

		if (!e)
			return fs_err(ENOMEM, "htree readdir: out of memory");
		hb->e = e;
		hb->cap = cap;
	}
	if (hb->names_used + len > hb->names_cap) {
		size_t cap = MAX(hb->names_cap * 2, hb->names_used + len + 4096);
		char *n = realloc(hb->names, cap);

		if (!n)
			return fs_err(ENOMEM, "htree readdir: out of memory");
		hb->names = n;
		hb->names_cap = cap;
	}
	memcpy(hb->names + hb->names_used, name, len);
	hb->e[hb->n] = (struct hent){ .hash = hash, .minor = minor, .order = (uint8_t)order,
				      .dtype = (uint8_t)dtype, .name_len = (uint8_t)len,
				      .name_off = (uint32_t)hb->names_used, .ino = ino };
	hb->names_used += len;
	hb->n++;
	return 0;
}

/* Add the entries of one leaf whose major hash is >= start. */
static int collect_leaf(struct uext4_fs *fs, struct inode *dir, const struct dx_path *p,
			const struct dir_leaf *lf, uint32_t start, struct hbatch *hb)
{
	struct dir_ent e;
	int err;

	for (unsigned off = 0; off < lf->end; off += e.rec_len) {
		uint32_t hash, minor;

		if ((err = dir_leaf_entry(fs, dir, lf, off, &e)))
			return err;
		if (!e.ino)
			continue;
		if ((err = name_hash(fs, dir, p->hash_version, e.name, e.name_len, &hash,
				   &minor)))
			return err;
		if (hash < start)
			continue;
		err = hbatch_add(hb, e.name, e.name_len, e.ino, dir_dtype(fs, e.file_type), hash,
				 minor, 2);
		if (err)
			return err;
	}
	return 0;
}

/*
 * Collect (dir->lock held) every entry with major hash >= start from the
 * leaf holding start and the following leaves, until at least one entry
 * is collected and the next leaf does not continue a hash collision.
 * *more says whether leaves remain; *next_hash is the first one's hash.
 */
static int htree_collect(struct uext4_fs *fs, struct inode *dir, uint32_t start,
			 struct hbatch *hb, bool *more, uint32_t *next_hash)
{
	struct dx_path p;
	int err = dx_probe(fs, dir, start, &p);
	int r = 1;

	*more = false;
	if (!err && start == 0)
		err = hbatch_add(hb, ".", 1, p.dot_ino, dir_dtype(fs, p.dot_ft), 0, 0, 0);
	if (!err && start <= 2)
		err = hbatch_add(hb, "..", 2, p.dotdot_ino, dir_dtype(fs, p.dotdot_ft), 2, 0, 1);
	while (!err && r > 0) {
		struct dir_leaf lf;
		struct urwlock *lk;

		if ((err = dx_read_leaf_as(fs, dir, &p, &lf, &lk, false)))
			break;
		err = collect_leaf(fs, dir, &p, &lf, start, hb);
		dx_release_leaf_as(fs, &lf, lk);
		if (err)
			break;
		r = dx_next_leaf(fs, dir, &p, NULL, next_hash);
		if (r < 0)
			err = r;
		*more = r > 0;
		if (r > 0 && hb->n > 0 && !(*next_hash & 1))
			break;
	}
	path_release(fs, &p);
	return err;
}

static int hent_cmp_names(const struct hent *a, const struct hent *b, const char *names)
{
	int c = memcmp(names + a->name_off, names + b->name_off, MIN(a->name_len, b->name_len));

	if (c)
		return c;
	return (int)a->name_len - (int)b->name_len;
}

static int hent_cmp(const void *x, const void *y, void *names)
{
	const struct hent *a = x, *b = y;

	if (a->hash != b->hash)
		return a->hash < b->hash ? -1 : 1;
	if (a->minor != b->minor)
		return a->minor < b->minor ? -1 : 1;
	if (a->order != b->order)
		return (int)a->order - (int)b->order;
	return hent_cmp_names(a, b, names);
}

/* Sort by position and give each entry a unique effective minor hash. */
static void hbatch_order(struct hbatch *hb)
{
	if (hb->n > 1)
		qsort_r(hb->e, hb->n, sizeof(*hb->e), hent_cmp, hb->names);
	for (size_t i = 0; i < hb->n; i++) {
		struct hent *e = &hb->e[i], *prev = i ? &hb->e[i - 1] : NULL;

		e->eff_minor = e->minor;
		if (prev && prev->hash == e->hash && e->minor <= prev->eff_minor)
			e->eff_minor = prev->eff_minor == UINT32_MAX ? UINT32_MAX
								   : prev->eff_minor + 1;
	}
}

/* Emit the batch from position pos on; 1 if the callback stopped. */
static int hbatch_emit(const struct hbatch *hb, uint64_t pos, uint64_t after_last,
		       uext4_filldir_t fill, void *ctx)
{
	for (size_t i = 0; i < hb->n; i++) {
		const struct hent *e = &hb->e[i];
		uint64_t next;

		if (hash_pos(e->hash, e->eff_minor) < pos)
			continue;
		next = i + 1 < hb->n ? hash_pos(hb->e[i + 1].hash, hb->e[i + 1].eff_minor)
				     : after_last;
		if (fill(ctx, hb->names + e->name_off, e->name_len, e->ino, e->dtype, next))
			return 1;
	}
	return 0;
}

/* One readdir step under the lock: collect the batch from pos's hash. */
static int htree_step(struct uext4_fs *fs, struct inode *dir, uint64_t pos,
		      struct hbatch *hb, uint64_t *after_last)
{
	uint32_t next_hash = 0;
	bool more = false;
	int err;

	hb->n = 0;
	hb->names_used = 0;
	urw_rdlock(&dir->lock);
	if (!(dir->flags & EXT4_INDEX_FL))
		err = fs_err(ESTALE, "directory inode %lu stopped being an htree during readdir",
			     (unsigned long)dir->ino);
	else
		err = htree_collect(fs, dir, pos_hash(pos), hb, &more, &next_hash);
	urw_unlock(&dir->lock);
	if (err)
		return err;
	*after_last = HTREE_EOF_64;
	if (more) {
		*after_last = hash_pos(next_hash & ~1u, 0);
		/* Every step must move forward, or a damaged index could make
		 * readdir go round forever. */
		if (*after_last <= pos)
			return fs_corrupt("htree directory inode %lu: index hash 0x%x does not "
					  "advance past position 0x%lx", (unsigned long)dir->ino,
					  next_hash, (unsigned long)pos);
	}
	hbatch_order(hb);
	return 0;
}

int htree_iterate(struct uext4_fs *fs, struct inode *dir, uint64_t cookie,
		  uext4_filldir_t fill, void *ctx)
{
	struct hbatch hb = { .e = NULL };
	uint64_t pos = cookie;
	int err = 0;

	while (pos < HTREE_EOF_64) {
		uint64_t after_last;

		err = htree_step(fs, dir, pos, &hb, &after_last);
		if (err || hbatch_emit(&hb, pos, after_last, fill, ctx))
			break;
		pos = after_last;
	}
	free(hb.e);
	free(hb.names);
	return err;
}

/* ================================================================ write side
 *
 * Insertion follows the kernel's ext4_dx_add_entry(): probe to the leaf
 * for the name's hash and put the entry there; a full leaf is split by
 * hash (do_split: the upper half of the entries, by hash and by size,
 * moves to a new block whose index entry carries the continuation bit when
 * its first hash equals the last hash left behind); when the index block
 * that must take the new leaf is full, one index level is split (or the
 * root moves down a level, add_level) and the insertion starts again.
 * Index depth is limited to 2 levels (3 with large_dir), then -ENOSPC.
 * htree directories never shrink.  Caller: dir->lock held for writing and
 * a handle open.
 */

static unsigned dx_root_limit(const struct uext4_fs *fs)
{
	return (fs->block_size - DX_ROOT_ENTRIES_OFF) / sizeof(struct dx_entry) -
	       (fs->metadata_csum ? 1 : 0);
}

static unsigned dx_node_limit(const struct uext4_fs *fs)
{
	return (fs->block_size - DX_NODE_ENTRIES_OFF) / sizeof(struct dx_entry) -
	       (fs->metadata_csum ? 1 : 0);
}

static struct dx_entry *frame_entries(struct dx_frame *f)
{
	return (struct dx_entry *)f->entries;
}

static struct dx_countlimit *frame_cl(struct dx_frame *f)
{
	return (struct dx_countlimit *)f->entries;
}

static bool frame_full(struct dx_frame *f)
{
	return f->count >= le16(frame_cl(f)->limit);
}

static void frame_set_count(struct dx_frame *f, unsigned count)
{
	frame_cl(f)->count = cpu_to_le16((uint16_t)count);
	f->count = count;
}

/* Insert {hash, block} right after entry f->at (dx_insert_block). */
static void frame_insert(struct dx_frame *f, uint32_t hash, uint64_t block)
{
	struct dx_entry *e = frame_entries(f);
	unsigned at = f->at + 1;

	memmove(&e[at + 1], &e[at], (f->count - at) * sizeof(*e));
	e[at].hash = cpu_to_le32(hash);
	e[at].block = cpu_to_le32((uint32_t)block);
	frame_set_count(f, f->count + 1);
}

/* An empty index node: the fake dirent spanning the block and the
 * countlimit (the dx tail, if any, stays zero from bget_new). */
static struct dx_entry *dx_init_node(const struct uext4_fs *fs, uint8_t *data, unsigned count)
{
	struct dx_countlimit *cl = (struct dx_countlimit *)(data + DX_NODE_ENTRIES_OFF);
	struct ext4_dir_entry_2 *fake = (struct ext4_dir_entry_2 *)data;

	fake->inode = 0;
	fake->rec_len = cpu_to_le16((uint16_t)dir_rec_len_disk(fs, fs->block_size));
	fake->name_len = 0;
	fake->file_type = 0;
	cl->limit = cpu_to_le16((uint16_t)dx_node_limit(fs));
	cl->count = cpu_to_le16((uint16_t)count);
	return (struct dx_entry *)cl;
}

/* Split the full index node of level (>= 1) in two; its parent has room. */
static int dx_split_node(struct handle *h, struct inode *dir, struct dx_path *p, unsigned level)
{
	struct uext4_fs *fs = h->fs;
	struct dx_frame *f = &p->f[level], *parent = &p->f[level - 1];
	unsigned count = f->count, keep = count / 2;
	uint32_t hash2 = entry_hash(&f->entries[keep]);
	struct dx_entry *dst;
	uint64_t lblk;
	struct buf *nb;
	int err;

	if ((err = handle_write_access(h, f->b)) || (err = handle_write_access(h, parent->b)))
		return err;
	if ((err = dir_append_block(h, dir, &lblk, &nb)))
		return err;
	dst = dx_init_node(fs, nb->data, count - keep);
	/* Entry 0 of the new node: its hash field is the countlimit. */
	dst[0].block = f->entries[keep].block;
	memcpy(&dst[1], &f->entries[keep + 1], (count - keep - 1) * sizeof(*dst));
	frame_set_count(f, keep);
	frame_insert(parent, hash2, lblk);
	dir_dx_dirty(h, dir, nb);
	dir_dx_dirty(h, dir, f->b);
	dir_dx_dirty(h, dir, parent->b);
	brelse(fs->bc, nb);
	return 0;
}

/* The root is full: its entries move to a new node below it (add_level). */
static int dx_add_level(struct handle *h, struct inode *dir, struct dx_path *p)
{
	struct uext4_fs *fs = h->fs;
	struct dx_frame *root = &p->f[0];
	struct dx_root_info *info = (struct dx_root_info *)(root->b->data + DX_ROOT_INFO_OFF);
	struct dx_entry *dst;
	uint64_t lblk;
	struct buf *nb;
	int err;

	if ((err = handle_write_access(h, root->b)))
		return err;
	if ((err = dir_append_block(h, dir, &lblk, &nb)))
		return err;
	dst = dx_init_node(fs, nb->data, root->count);
	dst[0].block = root->entries[0].block;
	memcpy(&dst[1], &root->entries[1], (root->count - 1) * sizeof(*dst));
	frame_set_count(root, 1);
	frame_entries(root)[0].block = cpu_to_le32((uint32_t)lblk);
	info->indirect_levels++;
	dir_dx_dirty(h, dir, nb);
	dir_dx_dirty(h, dir, root->b);
	brelse(fs->bc, nb);
	return 0;
}

/*
 * The deepest index block is full: make room by splitting the lowest
 * level whose parent has room, or by adding a level when every level up
 * to the root is full.  The caller probes again afterwards.
 */
static int dx_make_index_room(struct handle *h, struct inode *dir, struct dx_path *p)
{
	struct uext4_fs *fs = h->fs;
	unsigned max_levels = FS_HAS_INCOMPAT(fs, LARGEDIR) ? 3 : 2;
	unsigned level = p->levels - 1;

	while (level > 0 && frame_full(&p->f[level - 1]))
		level--;
	if (level > 0)
		return dx_split_node(h, dir, p, level);
	if (p->levels >= max_levels)
		return fs_err(ENOSPC, "htree directory inode %lu: directory index full "
			      "(%u levels%s)", (unsigned long)dir->ino, p->levels,
			      max_levels < 3 ? ", no large_dir feature" : "");
	return dx_add_level(h, dir, p);
}

/* One live entry of a leaf being split. */
struct split_ent {
	uint32_t hash;
	uint16_t off, size;
};

/*
 * Sort map[0..n) by hash, keeping the order of equal hashes: the map is
 * built in offset order, so this is the (hash, offset) order that qsort()
 * with a comparison of both gave, and the same bytes go into each half.
 * An LSD radix sort, a byte per pass, through tmp: qsort() with a call
 * per comparison was a third of a split's instructions, and a split runs
 * with the directory locked exclusive.
 */
static void split_sort(struct split_ent *map, struct split_ent *tmp, unsigned n)
{
	struct split_ent *from = map, *to = tmp;

	for (unsigned shift = 0; shift < 32; shift += 8) {
		unsigned pos[256] = {0};

		for (unsigned i = 0; i < n; i++)
			pos[(from[i].hash >> shift) & 0xff]++;
		for (unsigned b = 0, sum = 0; b < 256; b++) {
			unsigned c = pos[b];

			pos[b] = sum;
			sum += c;
		}
		for (unsigned i = 0; i < n; i++)
			to[pos[(from[i].hash >> shift) & 0xff]++] = from[i];
		struct split_ent *t = from;

		from = to;
		to = t;
	}
	/* Four passes: the sorted entries are back in map. */
}

/* The live entries of a leaf with their hashes, sorted by hash (tmp: room
 * for as many). */
static int split_map(struct uext4_fs *fs, struct inode *dir, const struct dx_path *p,
		     const struct dir_leaf *lf, struct split_ent *map, struct split_ent *tmp,
		     unsigned *n)
{
	struct dir_ent e;
	int err;

	*n = 0;
	for (unsigned off = 0; off < lf->end; off += e.rec_len) {
		if ((err = dir_leaf_entry(fs, dir, lf, off, &e)))
			return err;
		if (!e.ino)
			continue;
		if ((err = name_hash(fs, dir, p->hash_version, e.name, e.name_len,
				   &map[*n].hash, NULL)))
			return err;
		map[*n].off = (uint16_t)off;
		map[*n].size = (uint16_t)EXT4_DIR_REC_LEN(e.name_len);
		(*n)++;
	}
	split_sort(map, tmp, *n);
	return 0;
}

/* Where to split: the entries that fill about the upper half of the
 * block by size move (kernel do_split); at least one stays. */
static unsigned split_point(const struct uext4_fs *fs, const struct split_ent *map, unsigned n)
{
	unsigned size = 0, move = 0;

	for (unsigned i = n; i-- > 0;) {
		if (size + map[i].size / 2 > fs->block_size / 2)
			break;
		size += map[i].size;
		move++;
	}
	if (move >= n)
		move = n - 1;
	return n - move;
}

/* Write map[from..to) from the old block copy into data, packed, the last
 * entry stretched to the end of the leaf space. */
static void pack_leaf(const struct uext4_fs *fs, uint8_t *data, const uint8_t *old,
		      const struct split_ent *map, unsigned from, unsigned to)
{
	unsigned off = 0, last = 0;

	memset(data, 0, fs->block_size);
	for (unsigned i = from; i < to; i++) {
		memcpy(data + off, old + map[i].off, map[i].size);
		last = off;
		off += map[i].size;
		((struct ext4_dir_entry_2 *)(data + last))->rec_len =
			cpu_to_le16((uint16_t)dir_rec_len_disk(fs, map[i].size));
	}
	((struct ext4_dir_entry_2 *)(data + last))->rec_len =
		cpu_to_le16((uint16_t)dir_rec_len_disk(fs, dir_leaf_space(fs) - last));
	dir_leaf_set_tail(fs, data);
}

/*
 * Split the full leaf lf (write access taken) at the deepest frame, whose
 * index block has room.  *target gets the buffer where an entry of hash
 * belongs (lf's or the new one's; the other one is released).
 */
static int dx_split_leaf(struct handle *h, struct inode *dir, struct dx_path *p,
			 struct dir_leaf *lf, uint32_t hash, struct buf **target)
{
	struct uext4_fs *fs = h->fs;
	struct dx_frame *f = &p->f[p->levels - 1];
	unsigned n, split, maxn = fs->block_size / DIRENT_MIN_LEN + 1;
	struct split_ent *map = malloc(2 * maxn * sizeof(*map));
	uint8_t *old = malloc(fs->block_size);
	uint32_t hash2;
	uint64_t lblk;
	struct buf *nb;
	int err;

	if (!map || !old) {
		err = fs_err(ENOMEM, "htree split: out of memory");
		goto out;
	}
	if ((err = split_map(fs, dir, p, lf, map, map + maxn, &n)))
		goto out;
	if (n < 2) {
		err = fs_corrupt("htree directory inode %lu leaf %lu: full with %u entries",
				 (unsigned long)dir->ino, (unsigned long)lf->lblk, n);
		goto out;
	}
	if ((err = handle_write_access(h, f->b)))
		goto out;
	if ((err = dir_append_block(h, dir, &lblk, &nb)))
		goto out;
	split = split_point(fs, map, n);
	hash2 = map[split].hash;
	memcpy(old, lf->b->data, fs->block_size);
	pack_leaf(fs, lf->b->data, old, map, 0, split);
	pack_leaf(fs, nb->data, old, map, split, n);
	frame_insert(f, hash2 | (hash2 == map[split - 1].hash ? 1u : 0u), lblk);
	dir_leaf_dirty(h, dir, lf->b);
	dir_leaf_dirty(h, dir, nb);
	dir_dx_dirty(h, dir, f->b);
	if (hash >= hash2) {
		*target = nb;
		dir_release_leaf(fs, lf);
	} else {
		*target = lf->b;
		lf->b = NULL;
		brelse(fs->bc, nb);
	}
out:
	free(map);
	free(old);
	return err;
}

/* Put the entry into the leaf buffer b if it has room: 1, 0 full, error. */
static int leaf_try_put(struct handle *h, struct inode *dir, struct dir_leaf *lf,
			const char *name, size_t len, uint64_t ino, unsigned ftype)
{
	struct uext4_fs *fs = h->fs;
	unsigned off;
	int r = dir_leaf_find_room(fs, dir, lf, EXT4_DIR_REC_LEN(len), &off);

	if (r <= 0)
		return r;
	if ((r = handle_write_access(h, lf->b)))
		return r;
	dir_leaf_insert(h, dir, lf->b, off, ino, name, (unsigned)len, ftype);
	return 1;
}

/* Would a lookup of hash go on past the leaf the path is at (a hash
 * collision continued in the next leaf)?  Same rule as dx_next_leaf(). */
static bool dx_leaf_continues(const struct dx_path *p, uint32_t hash)
{
	int level = (int)p->levels - 1;

	while (level >= 0 && p->f[level].at + 1 >= p->f[level].count)
		level--;
	if (level < 0)
		return false;
	return (entry_hash(&p->f[level].entries[p->f[level].at + 1]) & ~1u) == hash;
}

/* For an exclusive add: -EEXIST, 2 (name may sit in the next leaf: the
 * caller must look it up), 1 inserted, 0 no room in this leaf. */
static int leaf_try_put_excl(struct handle *h, struct inode *dir, struct dir_leaf *lf,
			     const struct dx_path *p, uint32_t hash, const char *name,
			     size_t len, uint64_t ino, unsigned ftype)
{
	struct uext4_fs *fs = h->fs;
	unsigned off;
	int r = dir_leaf_find_name_or_room(fs, dir, lf, name, len, EXT4_DIR_REC_LEN(len), &off);

	if (r < 0)
		return r;
	if (dx_leaf_continues(p, hash))
		return 2;
	if (r == 0)
		return 0;
	if ((r = handle_write_access(h, lf->b)))
		return r;
	dir_leaf_insert(h, dir, lf->b, off, ino, name, (unsigned)len, ftype);
	return 1;
}

/* One attempt: 1 inserted, 0 index room was made (probe again), error;
 * with excl also -EEXIST or 2 (see leaf_try_put_excl()). */
static int htree_add_once(struct handle *h, struct inode *dir, const char *name, size_t len,
			  uint64_t ino, unsigned ftype, struct dx_path *p, bool excl)
{
	struct uext4_fs *fs = h->fs;
	struct dir_leaf lf = { .b = NULL };
	struct buf *target = NULL;
	uint32_t hash;
	int r;

	if ((r = dx_read_root(fs, dir, p)) ||
	    (r = name_hash(fs, dir, p->hash_version, name, len, &hash, NULL)) ||
	    (r = dx_descend(fs, dir, hash, p)) || (r = dx_read_leaf(fs, dir, p, &lf)))
		goto out;
	if (excl) {
		if ((r = leaf_try_put_excl(h, dir, &lf, p, hash, name, len, ino, ftype)))
			goto out;
	} else if ((r = leaf_try_put(h, dir, &lf, name, len, ino, ftype))) {
		goto out;
	}
	if (frame_full(&p->f[p->levels - 1])) {
		r = dx_make_index_room(h, dir, p);
		goto out;
	}
	if ((r = handle_write_access(h, lf.b)) ||
	    (r = dx_split_leaf(h, dir, p, &lf, hash, &target)))
		goto out;
	struct dir_leaf tl = { .b = target, .end = dir_leaf_space(fs) };
	r = leaf_try_put(h, dir, &tl, name, len, ino, ftype);
	brelse(fs->bc, target);
	if (r == 0)
		r = fs_err(ENOSPC, "htree directory inode %lu: no room for '%.*s' after a "
			   "leaf split", (unsigned long)dir->ino, (int)len, name);
out:
	dir_release_leaf(fs, &lf);
	path_release(fs, p);
	return r;
}

int htree_add_excl(struct handle *h, struct inode *dir, const char *name, size_t len,
		   uint64_t ino, unsigned ftype)
{
	/* The first attempt checks the name; after a split it is known absent. */
	for (int tries = 0; tries < 2 * DX_MAX_LEVELS + 2; tries++) {
		struct dx_path p;
		int r = htree_add_once(h, dir, name, len, ino, ftype, &p, tries == 0);

		if (r == 2 && tries == 0)
			return 1;
		if (r)
			return r < 0 ? r : 0;
	}
	return fs_err(EIO, "htree directory inode %lu: no room after splitting the index",
		      (unsigned long)dir->ino);
}

int htree_add(struct handle *h, struct inode *dir, const char *name, size_t len,
	      uint64_t ino, unsigned ftype)
{
	/* Each retry splits one index level or adds one: a few suffice. */
	for (int tries = 0; tries < 2 * DX_MAX_LEVELS + 2; tries++) {
		struct dx_path p;
		int r = htree_add_once(h, dir, name, len, ino, ftype, &p, false);

		if (r)
			return r < 0 ? r : 0;
	}
	return fs_err(EIO, "htree directory inode %lu: no room after splitting the index",
		      (unsigned long)dir->ino);
}

/* Copy the live entries of block 0 after "." and ".." into data (a new
 * leaf), packed, the last one stretched to the end of the leaf space. */
static int move_root_entries(struct uext4_fs *fs, struct inode *dir, const struct dir_leaf *lf,
			     unsigned first, uint8_t *data)
{
	unsigned off = 0, last = 0;
	bool any = false;
	struct dir_ent e;
	int err;

	for (unsigned o = first; o < lf->end; o += e.rec_len) {
		if ((err = dir_leaf_entry(fs, dir, lf, o, &e)))
			return err;
		if (!e.ino)
			continue;
		unsigned size = EXT4_DIR_REC_LEN(e.name_len);
		memcpy(data + off, lf->b->data + o, size);
		((struct ext4_dir_entry_2 *)(data + off))->rec_len =
			cpu_to_le16((uint16_t)dir_rec_len_disk(fs, size));
		last = off;
		off += size;
		any = true;
	}
	if (!any)
		memset(data, 0, DIRENT_HDR_LEN);
	((struct ext4_dir_entry_2 *)(data + last))->rec_len =
		cpu_to_le16((uint16_t)dir_rec_len_disk(fs, dir_leaf_space(fs) - last));
	dir_leaf_set_tail(fs, data);
	return 0;
}

/* Turn block 0 (now holding "." and ".." only) into the dx root pointing
 * at leaf 1. */
static void build_root(const struct uext4_fs *fs, uint8_t *data)
{
	struct ext4_dir_entry_2 *dotdot = (struct ext4_dir_entry_2 *)(data + DIRENT_MIN_LEN);
	struct dx_root_info *info = (struct dx_root_info *)(data + DX_ROOT_INFO_OFF);
	struct dx_countlimit *cl = (struct dx_countlimit *)(data + DX_ROOT_ENTRIES_OFF);
	struct dx_entry *e = (struct dx_entry *)cl;
	uint8_t version = fs->def_hash_version;

	if (version > DX_HASH_TEA)
		version = DX_HASH_HALF_MD4;     /* the root stores the signed base */
	dotdot->rec_len = cpu_to_le16((uint16_t)dir_rec_len_disk(fs, fs->block_size - DIRENT_MIN_LEN));
	memset(data + DX_ROOT_INFO_OFF, 0, fs->block_size - DX_ROOT_INFO_OFF);
	info->hash_version = version;
	info->info_length = 8;
	cl->limit = cpu_to_le16((uint16_t)dx_root_limit(fs));
	cl->count = cpu_to_le16(1);
	e[0].block = cpu_to_le32(1);
}

/* Block 0 must start with "." (rec_len 12) and "..": returns the offset
 * of the entry after "..". */
static int root_dots_end(struct uext4_fs *fs, struct inode *dir, const struct dir_leaf *lf,
			 unsigned *first)
{
	struct dir_ent dot, dotdot;
	int err;

	if ((err = dir_leaf_entry(fs, dir, lf, 0, &dot)))
		return err;
	if ((err = dir_leaf_entry(fs, dir, lf, dot.rec_len, &dotdot)))
		return err;
	if (dot.name_len != 1 || dot.name[0] != '.' || dot.rec_len != DIRENT_MIN_LEN ||
	    dotdot.name_len != 2 || memcmp(dotdot.name, "..", 2) != 0)
		return fs_corrupt("directory inode %lu block 0: does not start with '.' and '..'",
				  (unsigned long)dir->ino);
	*first = DIRENT_MIN_LEN + dotdot.rec_len;
	return 0;
}

int htree_make_indexed(struct handle *h, struct inode *dir, const char *name, size_t len,
		       uint64_t ino, unsigned ftype)
{
	struct uext4_fs *fs = h->fs;
	struct dir_leaf lf;
	unsigned first = 0;
	uint64_t lblk;
	struct buf *nb;
	int err;

	if (dir->size != fs->block_size)
		return fs_corrupt("directory inode %lu: indexing a directory of %lu bytes",
				  (unsigned long)dir->ino, (unsigned long)dir->size);
	if ((err = dir_read_leaf(fs, dir, 0, &lf)))
		return err == -ENODATA ? fs_corrupt("directory inode %lu: hole at block 0",
						    (unsigned long)dir->ino) : err;
	if ((err = root_dots_end(fs, dir, &lf, &first)) ||
	    (err = handle_write_access(h, lf.b)))
		goto out;
	if ((err = dir_append_block(h, dir, &lblk, &nb)))
		goto out;
	err = move_root_entries(fs, dir, &lf, first, nb->data);
	if (!err) {
		build_root(fs, lf.b->data);
		dir->flags |= EXT4_INDEX_FL;
		dir_leaf_dirty(h, dir, nb);
		dir_dx_dirty(h, dir, lf.b);
		/* The buffer now holds an index block: its leaf verification
		 * state no longer applies, but it is ours and current. */
	}
	brelse(fs->bc, nb);
	if (!err)
		err = inode_write(h, dir);
out:
	dir_release_leaf(fs, &lf);
	return err ? err : htree_add(h, dir, name, len, ino, ftype);
}

int htree_find_slot(struct uext4_fs *fs, struct inode *dir, const char *name, size_t len,
		    struct dir_slot *s)
{
	struct dx_path p;
	uint32_t hash, next;
	int r, more = 1;

	if ((r = dx_read_root(fs, dir, &p)) ||
	    (r = name_hash(fs, dir, p.hash_version, name, len, &hash, NULL)) ||
	    (r = dx_descend(fs, dir, hash, &p)))
		goto out;
	while (more > 0) {
		if ((r = dx_read_leaf(fs, dir, &p, &s->lf)))
			goto out;
		r = dir_leaf_locate(fs, dir, &s->lf, name, len, &s->off, &s->prev);
		if (r > 0) {
			s->ino = le32(((struct ext4_dir_entry_2 *)(s->lf.b->data + s->off))->inode);
			r = 0;
			goto out;
		}
		dir_release_leaf(fs, &s->lf);
		if (r < 0)
			goto out;
		more = dx_next_leaf(fs, dir, &p, &hash, &next);
	}
	r = more < 0 ? more : fs_err(ENOENT, "no entry '%.*s' in directory inode %lu", (int)len,
				     name, (unsigned long)dir->ino);
out:
	path_release(fs, &p);
	return r;
}

/* ------------------------------------------------------------ parallel changes
 * dir->lock held for READING and a handle open: the change stays inside
 * the leaf the name hashes to, whose lock is held for writing from the
 * check to the change, so that a name's absence (O_EXCL) and its insert
 * are one step.  Whatever needs more (a full leaf to split, a hash
 * collision that continues into the next leaf, any error: the wide path
 * reports it as before) returns 1 with nothing changed.
 */

void htree_par_end(struct uext4_fs *fs, struct htree_par *hp)
{
	dx_release_leaf_as(fs, &hp->s.lf, hp->lock);
	hp->lock = NULL;
}

/* Probe for hash and lock and read its leaf for writing. */
static int par_probe(struct uext4_fs *fs, struct inode *dir, const char *name, size_t len,
		     struct dx_path *p, uint32_t *hash, struct htree_par *hp)
{
	int r;

	memset(hp, 0, sizeof(*hp));
	if ((r = dx_read_root(fs, dir, p)) ||
	    (r = name_hash(fs, dir, p->hash_version, name, len, hash, NULL)) ||
	    (r = dx_descend(fs, dir, *hash, p)))
		return r;
	return dx_read_leaf_as(fs, dir, p, &hp->s.lf, &hp->lock, true);
}

int htree_par_add_begin(struct handle *h, struct inode *dir, const char *name, size_t len,
			struct htree_par *hp)
{
	struct uext4_fs *fs = h->fs;
	struct dx_path p;
	uint32_t hash;
	int r = par_probe(fs, dir, name, len, &p, &hash, hp);

	if (r == 0) {
		r = dir_leaf_find_name_or_room(fs, dir, &hp->s.lf, name, len,
					       EXT4_DIR_REC_LEN(len), &hp->s.off);
		/* The name may sit in the next leaf: only the wide path looks. */
		if (r != -EEXIST && dx_leaf_continues(&p, hash))
			r = 1;
		else if (r == 1)
			r = handle_write_access(h, hp->s.lf.b) ? 1 : 0;
		else if (r != -EEXIST)
			r = 1;  /* full (a split) or damaged */
	} else {
		r = 1;
	}
	path_release(fs, &p);
	if (r)
		htree_par_end(fs, hp);
	return r;
}

int htree_par_find(struct handle *h, struct inode *dir, const char *name, size_t len,
		   struct htree_par *hp)
{
	struct uext4_fs *fs = h->fs;
	struct dx_path p;
	uint32_t hash;
	int r = par_probe(fs, dir, name, len, &p, &hash, hp);

	if (r == 0) {
		r = dir_leaf_locate(fs, dir, &hp->s.lf, name, len, &hp->s.off, &hp->s.prev);
		if (r == 1) {
			const struct ext4_dir_entry_2 *de =
				(const void *)(hp->s.lf.b->data + hp->s.off);

			hp->s.ino = le32(de->inode);
			r = handle_write_access(h, hp->s.lf.b) ? 1 : 0;
		} else if (r == 0 && !dx_leaf_continues(&p, hash)) {
			r = -ENOENT;
		} else {
			r = 1;
		}
	} else {
		r = 1;
	}
	path_release(fs, &p);
	if (r)
		htree_par_end(fs, hp);
	return r;
}
