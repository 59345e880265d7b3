/*
 * dir.c - directory lookup and listing: linear (block) directories and
 * inline-data directories; htree directories are dispatched to htree.c.
 *
 * Format (Documentation/filesystems/ext4/directory.rst): a directory is a
 * file of blocks; each block is a chain of dirents (inode, rec_len,
 * name_len, file_type, name) whose rec_len tile the block exactly; with
 * metadata_csum the last 12 bytes of a leaf block are a fake dirent
 * holding the block's checksum.  Inline-data directories keep the parent
 * inode number in the first 4 bytes of i_block, dirents in the remaining
 * 56 bytes and more dirents in the "system.data" xattr; "." and ".." are
 * not stored.
 *
 * readdir cookies (the uext4_filldir_t contract: each entry gets the
 * cookie that resumes after it):
 *   linear: the byte position in the directory, as the kernel's
 *           ext4_readdir() f_pos.  A cookie in the middle of an entry is
 *           resynchronised by walking the block from its start.
 *   inline: the kernel's inline readdir positions: "." at 0, ".." at 12,
 *           the dirent at byte o of the inline buffer at o + 20, end of
 *           directory at 20 + inline size.
 *   htree:  hash positions, see htree.c.
 *
 * dir_lookup() returns the entry's type as a DT_* value (like readdir).
 *
 * Validation: every dirent is checked before use, on every use (the
 * checksum only once per buffer): rec_len >= 12, 4-aligned, large enough
 * for the name, inside the block (before the checksum tail), inode number
 * in range.  A hole in a linear directory is skipped, as the kernel does.
 *
 * Locking: dir->lock is taken as a reader while the directory's blocks
 * are read (it keeps i_block, i_size and i_flags stable against the write
 * path).  readdir collects one block's entries under the lock, drops it
 * and then calls the filldir callback, so the callback may take other
 * locks (iget of the entries, for instance).
 */
#include "dir_internal.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>

/* Inline directory readdir positions (kernel ext4_read_inline_dir). */
#define INLINE_DOT_POS 0u
#define INLINE_DOTDOT_POS 12u
#define INLINE_FIRST_POS 24u
#define INLINE_POS_SHIFT 20u    /* position = byte in inline buffer + 20 */
#define INLINE_IBLOCK_SIZE EXT4_MIN_INLINE_DATA_SIZE

/* ------------------------------------------------------------ dirents */

unsigned dir_rec_len(const struct uext4_fs *fs, uint16_t disk)
{
	unsigned len = le16(disk);

	/* 64 KiB blocks cannot store rec_len 65536 in 16 bits. */
	if (fs->block_size < 65536)
		return len;
	if (len == 65535 || len == 0)
		return 65536;
	return (len & 65532) | ((len & 3) << 16);
}

unsigned dir_dtype(const struct uext4_fs *fs, unsigned file_type)
{
	static const unsigned char map[EXT4_FT_MAX] = {
		[EXT4_FT_UNKNOWN] = DT_UNKNOWN, [EXT4_FT_REG_FILE] = DT_REG,
		[EXT4_FT_DIR] = DT_DIR,         [EXT4_FT_CHRDEV] = DT_CHR,
		[EXT4_FT_BLKDEV] = DT_BLK,      [EXT4_FT_FIFO] = DT_FIFO,
		[EXT4_FT_SOCK] = DT_SOCK,       [EXT4_FT_SYMLINK] = DT_LNK,
	};

	if (!FS_HAS_INCOMPAT(fs, FILETYPE) || file_type >= EXT4_FT_MAX)
		return DT_UNKNOWN;
	return map[file_type];
}

/*
 * Check the dirent at base[off] against a region ending at end.  Returns
 * NULL and fills e when it is sound, else what is wrong with it.
 */
static const char *dirent_problem(const struct uext4_fs *fs, const uint8_t *base,
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

int dir_leaf_entry(struct uext4_fs *fs, struct inode *dir, const struct dir_leaf *lf,
		   unsigned off, struct dir_ent *e)
{
	const char *why = dirent_problem(fs, lf->b->data, off, lf->end, e);

	if (!why)
		return 0;
	return fs_corrupt("directory inode %lu block %lu (logical %lu) offset %u: "
			  "bad rec_len %u (name_len %u, inode %lu): %s",
			  (unsigned long)dir->ino, (unsigned long)lf->b->blocknr,
			  (unsigned long)lf->lblk, off, e->rec_len, e->name_len,
			  (unsigned long)e->ino, why);
}

/* ------------------------------------------------------------ leaf blocks */

/* Is this block of an htree directory an index block (root or node)?
 * Those hold a single empty dirent spanning the block (or, for the root,
 * "." and ".." hiding the index) and carry a dx checksum, not a leaf's. */
static bool is_dx_block(struct uext4_fs *fs, struct inode *dir, uint64_t lblk,
			const uint8_t *data)
{
	const struct ext4_dir_entry_2 *de = (const struct ext4_dir_entry_2 *)data;

	if (!(dir->flags & EXT4_INDEX_FL))
		return false;
	if (lblk == 0)
		return true;
	return le32(de->inode) == 0 && dir_rec_len(fs, de->rec_len) == fs->block_size;
}

/* Does the leaf end with a well-formed checksum tail? */
static bool has_csum_tail(struct uext4_fs *fs, const uint8_t *data)
{
	const struct ext4_dir_entry_tail *t =
		(const struct ext4_dir_entry_tail *)(data + fs->block_size - DIR_TAIL_LEN);

	return t->det_reserved_zero1 == 0 && le16(t->det_rec_len) == DIR_TAIL_LEN &&
	       t->det_reserved_zero2 == 0 && t->det_reserved_ft == EXT4_FT_DIR_CSUM;
}

int dir_read_leaf(struct uext4_fs *fs, struct inode *dir, uint64_t lblk, struct dir_leaf *lf)
{
	struct buf *b;
	int err = inode_bread(fs, dir, lblk, UEXT4_META_DIR, &b);

	if (err)
		return err;
	lf->b = b;
	lf->lblk = lblk;
	lf->end = fs->block_size;
	if (!fs->metadata_csum || is_dx_block(fs, dir, lblk, b->data))
		return 0;
	if (has_csum_tail(fs, b->data))
		lf->end = fs->block_size - DIR_TAIL_LEN;
	if (!buf_verified(b)) {
		err = csum_verify_dir_leaf(fs, dir->ino, dir->generation, b->blocknr, b->data);
		if (err) {
			brelse(fs->bc, b);
			lf->b = NULL;
			return err;
		}
		buf_set_verified(b);
	}
	return 0;
}

void dir_release_leaf(struct uext4_fs *fs, struct dir_leaf *lf)
{
	if (lf->b)
		brelse(fs->bc, lf->b);
	lf->b = NULL;
}

int dir_leaf_find(struct uext4_fs *fs, struct inode *dir, const struct dir_leaf *lf,
		  const char *name, size_t len, bool *found, uint64_t *ino, unsigned *ftype)
{
	struct dir_ent e;

	*found = false;
	for (unsigned off = 0; off < lf->end; off += e.rec_len) {
		int err = dir_leaf_entry(fs, dir, lf, off, &e);

		if (err)
			return err;
		if (e.ino && e.name_len == len && memcmp(e.name, name, len) == 0) {
			*found = true;
			*ino = e.ino;
			if (ftype)
				*ftype = dir_dtype(fs, e.file_type);
			return 0;
		}
	}
	return 0;
}

/* ------------------------------------------------------------ linear */

/* Number of blocks to scan; a size beyond 2^32 blocks is corrupt. */
static int dir_nblocks(struct uext4_fs *fs, struct inode *dir, uint64_t *n)
{
	*n = DIV_ROUND_UP(dir->size, fs->block_size);
	if (*n > UINT32_MAX)
		return fs_corrupt("directory inode %lu: size %lu is too large",
				  (unsigned long)dir->ino, (unsigned long)dir->size);
	return 0;
}

/* The first block at or after lblk that is not in the hole at lblk. */
static uint64_t skip_hole(struct uext4_fs *fs, struct inode *dir, uint64_t lblk,
			  uint64_t nblocks)
{
	struct block_map m;

	if (inode_map(fs, dir, lblk, nblocks - lblk, &m) == 0 && m.len > 1 &&
	    (m.pblk == 0 || m.unwritten))
		return lblk + MIN(m.len, nblocks - lblk);
	return lblk + 1;
}

int dir_linear_lookup_locked(struct uext4_fs *fs, struct inode *dir, const char *name,
			     size_t len, uint64_t *ino, unsigned *ftype)
{
	uint64_t nblocks, lblk = 0;
	int err = dir_nblocks(fs, dir, &nblocks);

	while (!err && lblk < nblocks) {
		struct dir_leaf lf;
		bool found;

		err = dir_read_leaf(fs, dir, lblk, &lf);
		if (err == -ENODATA) {
			err = 0;
			lblk = skip_hole(fs, dir, lblk, nblocks);
			continue;
		}
		if (err)
			break;
		err = dir_leaf_find(fs, dir, &lf, name, len, &found, ino, ftype);
		dir_release_leaf(fs, &lf);
		if (!err && found)
			return 0;
		lblk++;
	}
	if (err)
		return err;
	return fs_err(ENOENT, "no entry '%.*s' in directory inode %lu", (int)MIN(len, 255),
		      name, (unsigned long)dir->ino);
}

/* Entries collected under the lock, emitted after it is dropped. */
struct dir_batch {
	struct {
		uint32_t name_off;
		uint8_t name_len;
		uint8_t dtype;
		uint64_t ino;
		uint64_t next;
	} *ents;
	char *names;
	unsigned n, cap, names_used, names_cap;
};

static int batch_init(struct dir_batch *bt, unsigned cap, unsigned names_cap)
{
	bt->n = 0;
	bt->names_used = 0;
	bt->cap = cap;
	bt->names_cap = names_cap;
	bt->ents = malloc(sizeof(*bt->ents) * cap);
	bt->names = malloc(names_cap);
	if (!bt->ents || !bt->names) {
		free(bt->ents);
		free(bt->names);
		return fs_err(ENOMEM, "readdir: out of memory");
	}
	return 0;
}

static void batch_free(struct dir_batch *bt)
{
	free(bt->ents);
	free(bt->names);
}

static void batch_add(struct dir_batch *bt, const char *name, unsigned len, uint64_t ino,
		      unsigned dtype, uint64_t next)
{
	/* Capacity is sized for a whole block: at most block/12 entries whose
	 * names fit in the block. */
	if (bt->n >= bt->cap || bt->names_used + len > bt->names_cap)
		return;
	memcpy(bt->names + bt->names_used, name, len);
	bt->ents[bt->n].name_off = bt->names_used;
	bt->ents[bt->n].name_len = (uint8_t)len;
	bt->ents[bt->n].dtype = (uint8_t)dtype;
	bt->ents[bt->n].ino = ino;
	bt->ents[bt->n].next = next;
	bt->names_used += len;
	bt->n++;
}

/* Call fill for each collected entry; 1 if the callback asked to stop. */
static int batch_emit(struct dir_batch *bt, uext4_filldir_t fill, void *ctx)
{
	for (unsigned i = 0; i < bt->n; i++) {
		if (fill(ctx, bt->names + bt->ents[i].name_off, bt->ents[i].name_len,
			 bt->ents[i].ino, bt->ents[i].dtype, bt->ents[i].next))
			return 1;
	}
	bt->n = 0;
	bt->names_used = 0;
	return 0;
}

/*
 * Collect the entries of one leaf from byte off on.  A cookie that points
 * into the middle of an entry is moved to the next entry boundary by
 * walking from the block start, like the kernel after a directory change.
 */
static int linear_collect(struct uext4_fs *fs, struct inode *dir, const struct dir_leaf *lf,
			  unsigned off, struct dir_batch *bt)
{
	uint64_t base = lf->lblk << fs->log_block_size;
	uint64_t block_end = (lf->lblk + 1) << fs->log_block_size;
	unsigned o = 0;
	struct dir_ent e;
	int err;

	for (; o < off && o < lf->end; o += e.rec_len) {
		if ((err = dir_leaf_entry(fs, dir, lf, o, &e)))
			return err;
	}
	for (; o < lf->end; o += e.rec_len) {
		uint64_t next;

		if ((err = dir_leaf_entry(fs, dir, lf, o, &e)))
			return err;
		if (!e.ino)
			continue;
		next = o + e.rec_len >= lf->end ? block_end : base + o + e.rec_len;
		batch_add(bt, e.name, e.name_len, e.ino, dir_dtype(fs, e.file_type), next);
	}
	return 0;
}

/* Collect the block holding *pos (skipping holes); *pos moves past it.
 * Returns 1 at the end of the directory. */
static int linear_fill_batch(struct uext4_fs *fs, struct inode *dir, uint64_t *pos,
			     struct dir_batch *bt)
{
	uint64_t nblocks, lblk = *pos >> fs->log_block_size;
	unsigned off = (unsigned)(*pos & (fs->block_size - 1));
	struct dir_leaf lf;
	int err;

	urw_rdlock(&dir->lock);
	err = dir_nblocks(fs, dir, &nblocks);
	while (!err && lblk < nblocks) {
		err = dir_read_leaf(fs, dir, lblk, &lf);
		if (err != -ENODATA)
			break;
		err = 0;
		lblk = skip_hole(fs, dir, lblk, nblocks);
		off = 0;
	}
	if (!err && lblk >= nblocks) {
		urw_unlock(&dir->lock);
		return 1;
	}
	if (!err) {
		err = linear_collect(fs, dir, &lf, off, bt);
		dir_release_leaf(fs, &lf);
		*pos = (lblk + 1) << fs->log_block_size;
	}
	urw_unlock(&dir->lock);
	return err;
}

static int linear_iterate(struct uext4_fs *fs, struct inode *dir, uint64_t cookie,
			  uext4_filldir_t fill, void *ctx)
{
	struct dir_batch bt;
	uint64_t pos = cookie;
	int err;

	if (cookie >= ((uint64_t)UINT32_MAX + 1) << fs->log_block_size)
		return 0;  /* past any possible directory end */
	err = batch_init(&bt, fs->block_size / DIRENT_MIN_LEN + 1, fs->block_size);
	while (!err) {
		err = linear_fill_batch(fs, dir, &pos, &bt);
		if (err == 1) {
			err = 0;
			break;
		}
		if (!err && batch_emit(&bt, fill, ctx))
			break;
	}
	batch_free(&bt);
	return err;
}

/* ------------------------------------------------------------ inline */

/* The inline data of a directory: i_block then system.data. */
struct inline_dir {
	uint8_t *data;      /* INLINE_IBLOCK_SIZE + xlen bytes */
	unsigned size;
	uint64_t parent;
};

/* Copy the inline data out (dir->lock held: i_block and the in-inode
 * xattrs are stable; xattr_get_raw() takes no inode lock). */
static int inline_load(struct uext4_fs *fs, struct inode *dir, struct inline_dir *id)
{
	const struct ext4_inode *raw = inode_raw(dir);
	ssize_t xlen = xattr_get_raw(fs, dir, EXT4_XATTR_INDEX_SYSTEM, "data", 4, NULL, 0);

	if (xlen == -ENODATA)
		xlen = 0;
	if (xlen < 0)
		return (int)xlen;
	if (xlen > (ssize_t)fs->inode_size)
		return fs_corrupt("directory inode %lu: inline data xattr of %zd bytes",
				  (unsigned long)dir->ino, xlen);
	id->size = INLINE_IBLOCK_SIZE + (unsigned)xlen;
	id->data = malloc(id->size);
	if (!id->data)
		return fs_err(ENOMEM, "inline directory: out of memory");
	memcpy(id->data, raw->i_block, INLINE_IBLOCK_SIZE);
	if (xlen) {
		ssize_t got = xattr_get_raw(fs, dir, EXT4_XATTR_INDEX_SYSTEM, "data", 4,
					    id->data + INLINE_IBLOCK_SIZE, (size_t)xlen);
		if (got != xlen) {
			free(id->data);
			return got < 0 ? (int)got : fs_corrupt("directory inode %lu: inline "
				"data xattr changed size", (unsigned long)dir->ino);
		}
	}
	id->parent = le32(*(const uint32_t *)id->data);
	if (id->parent == 0 || id->parent > fs->inodes_count) {
		free(id->data);
		return fs_corrupt("directory inode %lu: inline data parent inode %lu out of range",
				  (unsigned long)dir->ino, (unsigned long)id->parent);
	}
	return 0;
}

/* End of the region (i_block part or xattr part) holding byte off. */
static unsigned inline_region_end(const struct inline_dir *id, unsigned off)
{
	return off < INLINE_IBLOCK_SIZE ? INLINE_IBLOCK_SIZE : id->size;
}

static int inline_entry(struct uext4_fs *fs, struct inode *dir, const struct inline_dir *id,
			unsigned off, struct dir_ent *e)
{
	const char *why = dirent_problem(fs, id->data, off, inline_region_end(id, off), e);

	if (!why)
		return 0;
	return fs_corrupt("directory inode %lu inline data offset %u: bad rec_len %u "
			  "(name_len %u, inode %lu): %s", (unsigned long)dir->ino, off,
			  e->rec_len, e->name_len, (unsigned long)e->ino, why);
}

static int inline_lookup_locked(struct uext4_fs *fs, struct inode *dir, const char *name,
				size_t len, uint64_t *ino, unsigned *ftype)
{
	struct inline_dir id;
	struct dir_ent e;
	int err;

	if ((err = inline_load(fs, dir, &id)))
		return err;
	err = -ENOENT;
	if (len <= 2 && name[0] == '.' && (len == 1 || name[1] == '.')) {
		*ino = len == 1 ? dir->ino : id.parent;
		if (ftype)
			*ftype = DT_DIR;
		err = 0;
	}
	for (unsigned off = EXT4_INLINE_DOTDOT_SIZE; err == -ENOENT && off < id.size;
	     off += e.rec_len) {
		int e2 = inline_entry(fs, dir, &id, off, &e);

		if (e2) {
			err = e2;
		} else if (e.ino && e.name_len == len && memcmp(e.name, name, len) == 0) {
			*ino = e.ino;
			if (ftype)
				*ftype = dir_dtype(fs, e.file_type);
			err = 0;
		}
	}
	free(id.data);
	if (err == -ENOENT)
		return fs_err(ENOENT, "no entry '%.*s' in directory inode %lu",
			      (int)MIN(len, 255), name, (unsigned long)dir->ino);
	return err;
}

/* Collect every inline entry from readdir position pos on. */
static int inline_collect(struct uext4_fs *fs, struct inode *dir, const struct inline_dir *id,
			  uint64_t pos, struct dir_batch *bt)
{
	uint64_t eof = INLINE_POS_SHIFT + id->size;
	unsigned off = EXT4_INLINE_DOTDOT_SIZE;
	struct dir_ent e;
	int err;

	if (pos == INLINE_DOT_POS)
		batch_add(bt, ".", 1, dir->ino, DT_DIR, INLINE_DOTDOT_POS);
	if (pos <= INLINE_DOTDOT_POS)
		batch_add(bt, "..", 2, id->parent, DT_DIR, INLINE_FIRST_POS);
	/* Resynchronise: skip entries that start before pos. */
	for (; off < id->size && off + INLINE_POS_SHIFT < pos; off += e.rec_len) {
		if ((err = inline_entry(fs, dir, id, off, &e)))
			return err;
	}
	for (; off < id->size; off += e.rec_len) {
		uint64_t next;

		if ((err = inline_entry(fs, dir, id, off, &e)))
			return err;
		if (!e.ino)
			continue;
		next = off + e.rec_len + INLINE_POS_SHIFT;
		batch_add(bt, e.name, e.name_len, e.ino, dir_dtype(fs, e.file_type),
			  next >= eof ? eof : next);
	}
	return 0;
}

static int inline_iterate(struct uext4_fs *fs, struct inode *dir, uint64_t cookie,
			  uext4_filldir_t fill, void *ctx)
{
	struct inline_dir id;
	struct dir_batch bt;
	int err;

	urw_rdlock(&dir->lock);
	err = inline_load(fs, dir, &id);
	urw_unlock(&dir->lock);
	if (err)
		return err;
	if (cookie >= INLINE_POS_SHIFT + id.size) {
		free(id.data);
		return 0;
	}
	err = batch_init(&bt, id.size / DIRENT_MIN_LEN + 3, id.size + 3);
	if (!err) {
		err = inline_collect(fs, dir, &id, cookie, &bt);
		if (!err)
			batch_emit(&bt, fill, ctx);
		batch_free(&bt);
	}
	free(id.data);
	return err;
}

/* ------------------------------------------------------------ entry points */

static bool dir_is_htree(struct uext4_fs *fs, const struct inode *dir)
{
	return (dir->flags & EXT4_INDEX_FL) && FS_HAS_COMPAT(fs, DIR_INDEX);
}

int dir_lookup(struct uext4_fs *fs, struct inode *dir, const char *name, size_t len,
	       uint64_t *ino, unsigned *ftype)
{
	uint32_t flags;
	int err;

	if (len == 0 || len > EXT4_NAME_LEN)
		return fs_err(len ? ENAMETOOLONG : ENOENT, "bad name length %zu", len);
	urw_rdlock(&dir->lock);
	flags = dir->flags;
	if (flags & EXT4_INLINE_DATA_FL)
		err = inline_lookup_locked(fs, dir, name, len, ino, ftype);
	else if (!dir_is_htree(fs, dir))
		err = dir_linear_lookup_locked(fs, dir, name, len, ino, ftype);
	else
		err = 1;
	urw_unlock(&dir->lock);
	if (err == 1)
		err = htree_lookup(fs, dir, name, len, ino, ftype);
	return err;
}

int dir_iterate(struct uext4_fs *fs, struct inode *dir, uint64_t cookie,
		uext4_filldir_t fill, void *ctx)
{
	uint32_t flags;
	bool htree;

	urw_rdlock(&dir->lock);
	flags = dir->flags;
	htree = dir_is_htree(fs, dir);
	urw_unlock(&dir->lock);
	if (flags & EXT4_INLINE_DATA_FL)
		return inline_iterate(fs, dir, cookie, fill, ctx);
	if (htree)
		return htree_iterate(fs, dir, cookie, fill, ctx);
	return linear_iterate(fs, dir, cookie, fill, ctx);
}
