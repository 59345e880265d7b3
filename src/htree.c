/*
 * htree.c - hash-indexed (dx) directories: lookup by name hash and
 * readdir in hash order.
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
 * read; readdir drops it before calling the filldir callback.
 */
#include "dir_internal.h"

#include <dirent.h>
#include <stdio.h>
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
	for (unsigned i = 2; i < count; i++) {
		if (entry_hash(&f->entries[i]) < entry_hash(&f->entries[i - 1]))
			return dx_bad(p, "htree directory inode %lu %s block %lu (logical %lu): "
				      "entry %u hash 0x%x below the previous 0x%x",
				      (unsigned long)dir->ino, what, (unsigned long)f->b->blocknr,
				      (unsigned long)f->lblk, i, entry_hash(&f->entries[i]),
				      entry_hash(&f->entries[i - 1]));
	}
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

/* The leaf the deepest frame points to, read and verified. */
static int dx_read_leaf(struct uext4_fs *fs, struct inode *dir, struct dx_path *p,
			struct dir_leaf *lf)
{
	uint64_t lblk;
	int err = dx_child_block(dir, p, p->levels - 1, &lblk);

	if (err)
		return err;
	err = dir_read_leaf(fs, dir, lblk, lf);
	if (err == -ENODATA)
		return fs_corrupt("htree directory inode %lu: hole at leaf block %lu",
				  (unsigned long)dir->ino, (unsigned long)lblk);
	return err;
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

static int htree_find(struct uext4_fs *fs, struct inode *dir, const char *name, size_t len,
		      uint64_t *ino, unsigned *ftype, struct dx_path *p)
{
	uint32_t hash, next;
	int err, more = 1;

	if ((err = dx_read_root(fs, dir, p)))
		return err;
	if ((err = dirhash(p->hash_version, fs->hash_seed, name, len, &hash, NULL)))
		return err;
	if ((err = dx_descend(fs, dir, hash, p)))
		return err;
	while (more > 0) {
		struct dir_leaf lf;
		bool found;

		if ((err = dx_read_leaf(fs, dir, p, &lf)))
			return err;
		err = dir_leaf_find(fs, dir, &lf, name, len, &found, ino, ftype);
		dir_release_leaf(fs, &lf);
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

static int htree_lookup_locked(struct uext4_fs *fs, struct inode *dir, const char *name,
			       size_t len, uint64_t *ino, unsigned *ftype)
{
	struct dx_path p = { .structural = false };
	char why[512];
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
	/* A damaged index: scan the leaves like the kernel, but still report
	 * the damage if the name is not found that way. */
	snprintf(why, sizeof(why), "%s", uext4_last_error());
	err = dir_linear_lookup_locked(fs, dir, name, len, ino, ftype);
	if (err == -ENOENT)
		return fs_corrupt("%s (name not found by linear scan either)",
				  strncmp(why, "corrupt ", 8) ? why : why + 8);
	return err;
}

int htree_lookup(struct uext4_fs *fs, struct inode *dir, const char *name, size_t len,
		 uint64_t *ino, unsigned *ftype)
{
	int err;

	if (len == 0 || len > EXT4_NAME_LEN)
		return fs_err(len ? ENAMETOOLONG : ENOENT, "bad name length %zu", len);
	urw_rdlock(&dir->lock);
	if (dir->flags & EXT4_INDEX_FL)
		err = htree_lookup_locked(fs, dir, name, len, ino, ftype);
	else
		err = dir_linear_lookup_locked(fs, dir, name, len, ino, ftype);
	urw_unlock(&dir->lock);
	return err;
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
		if ((err = dirhash(p->hash_version, fs->hash_seed, e.name, e.name_len, &hash,
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

		if ((err = dx_read_leaf(fs, dir, &p, &lf)))
			break;
		err = collect_leaf(fs, dir, &p, &lf, start, hb);
		dir_release_leaf(fs, &lf);
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
