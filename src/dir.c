/*
 * dir.c - directories: lookup and listing of linear (block) and
 * inline-data directories (htree directories are dispatched to htree.c),
 * and the write side (add, remove, retarget, make, is_empty) for all
 * three formats, described at "write side" below.
 *
 * Format (Documentation/filesystems/ext4/directory.rst): a directory is a
 * file of blocks (one block's format, and finding, inserting and deleting
 * in it: dirblock.c).  Inline-data directories keep the parent
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
 * Validation: every dirent is checked before use, on every use
 * (dirblock.c).  A hole in a linear directory is skipped, as the kernel
 * does.
 *
 * Locking: dir->lock is taken as a reader while the directory's blocks
 * are read (it keeps i_block, i_size and i_flags stable against the write
 * path).  readdir collects one block's entries under the lock, drops it
 * and then calls the filldir callback, so the callback may take other
 * locks (iget of the entries, for instance).
 */
#include "balloc.h"
#include "bcache.h"
#include "dir.h"
#include "dirblock.h"
#include "error.h"
#include "file.h"
#include "htree.h"
#include "inode.h"
#include "internal.h"
#include "lock.h"
#include "namecache.h"
#include "ondisk.h"
#include "trans.h"
#include "utf8.h"
#include "xattr.h"

#include <dirent.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Inline directory readdir positions (kernel ext4_read_inline_dir). */
#define INLINE_DOT_POS 0u
#define INLINE_DOTDOT_POS 12u
#define INLINE_FIRST_POS 24u
#define INLINE_POS_SHIFT 20u    /* position = byte in inline buffer + 20 */
#define INLINE_IBLOCK_SIZE EXT4_MIN_INLINE_DATA_SIZE

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

/* Also the fallback of an htree lookup meeting a damaged index: then
 * parallel changes may be under way in its leaves (dir->lock shared), so
 * each block is read under its leaf lock. */
static int dir_linear_lookup_locked(struct uext4_fs *fs, struct inode *dir, const char *name,
				    size_t len, uint64_t *ino, unsigned *ftype)
{
	uint64_t nblocks, lblk = 0;
	bool indexed = dir->flags & EXT4_INDEX_FL;
	int err = dir_nblocks(fs, dir, &nblocks);

	while (!err && lblk < nblocks) {
		struct urwlock *lk = indexed ? htree_leaf_lock(dir, lblk) : NULL;
		struct dir_leaf lf;
		bool found;

		if (lk)
			urw_rdlock(lk);
		err = dir_read_leaf(fs, dir, lblk, &lf);
		if (err == -ENODATA) {
			if (lk)
				urw_unlock(lk);
			err = 0;
			lblk = skip_hole(fs, dir, lblk, nblocks);
			continue;
		}
		if (err) {
			if (lk)
				urw_unlock(lk);
			break;
		}
		err = dir_leaf_find(fs, dir, &lf, name, len, &found, ino, ftype);
		dir_release_leaf(fs, &lf);
		if (lk)
			urw_unlock(lk);
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
	struct urwlock *lk = NULL;
	int err;

	urw_rdlock(&dir->lock);
	/* Made an htree since dir_iterate() looked: parallel changes may be
	 * under way in its leaves, so read each under its leaf lock. */
	bool indexed = dir->flags & EXT4_INDEX_FL;

	err = dir_nblocks(fs, dir, &nblocks);
	while (!err && lblk < nblocks) {
		if (indexed)
			urw_rdlock(lk = htree_leaf_lock(dir, lblk));
		err = dir_read_leaf(fs, dir, lblk, &lf);
		if (err != -ENODATA)
			break;
		if (lk)
			urw_unlock(lk);
		lk = NULL;
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
	if (lk)
		urw_unlock(lk);
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
 * xattrs are stable; xattr_get_ibody() takes no lock). */
static int inline_load(struct uext4_fs *fs, struct inode *dir, struct inline_dir *id)
{
	const struct ext4_inode *raw = inode_raw(dir);
	ssize_t xlen = xattr_get_ibody(fs, dir, EXT4_XATTR_INDEX_SYSTEM, "data", 4, NULL, 0);

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
		ssize_t got = xattr_get_ibody(fs, dir, EXT4_XATTR_INDEX_SYSTEM, "data", 4,
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
		} else if (e.ino && dir_name_eq(fs, dir, &e, name, len)) {
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

/* An htree's index is damaged (its message set): scan the leaves like the
 * kernel, but still report the damage if the name is not found that way. */
static int lookup_past_damaged_index(struct uext4_fs *fs, struct inode *dir, const char *name,
				     size_t len, uint64_t *ino, unsigned *ftype)
{
	char why[512];
	int err;

	snprintf(why, sizeof(why), "%s", uext4_last_error());
	err = dir_linear_lookup_locked(fs, dir, name, len, ino, ftype);
	if (err == -ENOENT)
		return fs_corrupt("%s (name not found by linear scan either)",
				  strncmp(why, "corrupt ", 8) ? why : why + 8);
	return err;
}

static bool dir_is_htree(struct uext4_fs *fs, const struct inode *dir)
{
	return (dir->flags & EXT4_INDEX_FL) && FS_HAS_COMPAT(fs, DIR_INDEX);
}

int dir_lookup_locked(struct uext4_fs *fs, struct inode *dir, const char *name, size_t len,
		      uint64_t *ino, unsigned *ftype)
{
	if (len == 0 || len > EXT4_NAME_LEN)
		return fs_err(len ? ENAMETOOLONG : ENOENT, "bad name length %zu", len);
	if (dir->flags & EXT4_INLINE_DATA_FL)
		return inline_lookup_locked(fs, dir, name, len, ino, ftype);
	if (dir_is_htree(fs, dir)) {
		int err = htree_lookup_locked(fs, dir, name, len, ino, ftype);

		return err == HTREE_DAMAGED ? lookup_past_damaged_index(fs, dir, name, len, ino, ftype)
					    : err;
	}
	return dir_linear_lookup_locked(fs, dir, name, len, ino, ftype);
}

static int not_found(struct inode *dir, const char *name, size_t len);

/*
 * The name cache's key of name in casefolded directory dir: its folded
 * form into key (at most NC_NAME_MAX bytes), or its bytes for a name that
 * is not valid UTF-8 (matched by its bytes only, and never equal to a
 * folded form, which is valid UTF-8).  0: no key (too long to cache).
 */
static size_t casefold_key(const char *name, size_t len, char *key)
{
	const char *folded;
	ssize_t n = dir_fold_query(name, len, &folded);

	if (n < 0) {
		folded = name;
		n = (ssize_t)len;
	}
	if (n == 0 || n > NC_NAME_MAX)
		return 0;
	memcpy(key, folded, (size_t)n);
	return (size_t)n;
}

/*
 * A casefolded directory (dir->lock held): the cache keyed by the folded
 * name, so every case of a name shares one entry, and a create, unlink or
 * rename of any case invalidates it (dir_nc_invalidate()).  Only here, under
 * the lock, are such entries inserted: +F/-F changes the flag only on an
 * empty directory, under dir->lock for writing, forgetting its entries
 * (api.c casefold_check()), so the flag read here is the one every folded
 * entry of the directory's current identity was made under.  The
 * lock-free probe of dir_lookup() and of the path walk (api.c) looks up
 * the name's bytes: it finds a folded entry only for a name that is its
 * own folded form, whose answer that entry is (one entry per folded name
 * in a casefolded directory).
 */
static int casefold_lookup_locked(struct uext4_fs *fs, struct inode *dir, const char *name,
				  size_t len, uint64_t *ino, unsigned *ftype)
{
	char key[NC_NAME_MAX];
	size_t klen = casefold_key(name, len, key);
	uint32_t token = NC_NO_TOKEN;
	int err;

	if (klen && namecache_lookup(fs->nc, dir, key, klen, ino, ftype, &token))
		return *ino ? 0 : -ENOENT;
	err = dir_lookup_locked(fs, dir, name, len, ino, ftype);
	if (klen && (err == 0 || err == -ENOENT))
		namecache_insert(fs->nc, dir, key, klen, err ? 0 : *ino, err ? 0 : *ftype,
				 token);
	return err;
}

/* The name cache first (no lock); on a miss the directory, and what it
 * says goes into the cache (namecache.c explains the token), by the
 * name's bytes, or in a casefolded directory by its folded form
 * (casefold_lookup_locked()).  On a casefold file system the insert is
 * made under dir->lock, which +F takes to change (and then forgets the
 * directory's entries: api.c casefold_check()), so no insert decided
 * before +F lands after it. */
int dir_lookup(struct uext4_fs *fs, struct inode *dir, const char *name, size_t len,
	       uint64_t *ino, unsigned *ftype)
{
	uint32_t token;
	bool folded;
	int err;

	if (namecache_lookup(fs->nc, dir, name, len, ino, ftype, &token))
		return *ino ? 0 : not_found(dir, name, len);
	urw_rdlock(&dir->lock);
	folded = dir_casefolded(fs, dir);
	if (folded) {
		err = casefold_lookup_locked(fs, dir, name, len, ino, ftype);
		urw_unlock(&dir->lock);
		return err == -ENOENT ? not_found(dir, name, len) : err;
	}
	err = dir_lookup_locked(fs, dir, name, len, ino, ftype);
	if (!FS_HAS_INCOMPAT(fs, CASEFOLD))
		urw_unlock(&dir->lock);
	if (err == 0)
		namecache_insert(fs->nc, dir, name, len, *ino, *ftype, token);
	else if (err == -ENOENT)
		namecache_insert(fs->nc, dir, name, len, 0, 0, token);
	if (FS_HAS_INCOMPAT(fs, CASEFOLD))
		urw_unlock(&dir->lock);
	return err;
}

/* After a change to name's entry in dir (see namecache.c): in a
 * casefolded directory its folded form is the key. */
static void dir_nc_invalidate(struct uext4_fs *fs, struct inode *dir, const char *name,
			      size_t len)
{
	char key[NC_NAME_MAX];
	size_t klen;

	if (!dir_casefolded(fs, dir)) {
		namecache_invalidate(fs->nc, dir, name, len);
		return;
	}
	if ((klen = casefold_key(name, len, key)))
		namecache_invalidate(fs->nc, dir, key, klen);
}

int dir_check_new_name(struct uext4_fs *fs, struct inode *dir, const char *name, size_t len)
{
	if (dir_casefolded(fs, dir) &&
	    (le16(fs->sb.s_encoding_flags) & EXT4_ENC_STRICT_MODE_FL) &&
	    utf8_validate(name, len) < 0)
		return fs_err(EINVAL, "\"%.*s\" is not valid UTF-8, which a casefolded directory "
			      "(inode %llu) of a strict file system refuses", (int)MIN(len, 255), name,
			      (unsigned long long)dir->ino);
	return 0;
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

/* ================================================================ write side
 *
 * The caller holds dir->lock for writing and a handle (api.c).  Linear
 * directories never move an existing entry (an insert takes a deleted
 * entry's space or splits a live entry's slack, a removal merges the entry
 * into the one before it), so readdir byte cookies stay valid.  A linear
 * directory that outgrows its first block becomes an htree (htree.c), as
 * the kernel's make_indexed_dir.  Inline directories take a name in
 * i_block, then in system.data (opened to the room the inode body has),
 * and move to a block when both are full (ext4_try_add_inline_entry,
 * ext4_convert_inline_dir); removals edit them in place.
 */

/* A name's directory entry goes in a new block of its own. */
static int linear_append(struct handle *h, struct inode *dir, const char *name, size_t len,
			 uint64_t ino, unsigned ftype)
{
	struct uext4_fs *fs = h->fs;
	uint64_t lblk;
	struct buf *b;
	int err = dir_append_block(h, dir, &lblk, &b);

	if (err)
		return err;
	dirent_put(fs, b->data, ino, dir_leaf_space(fs), name, (unsigned)len, ftype);
	dir_leaf_set_tail(fs, b->data);
	dir_leaf_dirty(h, dir, b);
	brelse(fs->bc, b);
	return 0;
}

/*
 * Block 0 of a linear directory starts with "." and "..": e2fsck wants
 * them first and second.  An insert at offset 0 (an empty "." slot, or the
 * slack of a "." longer than 12 bytes) or into an empty ".." slot would
 * put the new name there: refuse it, naming the damage.
 */
static int check_not_dots(struct uext4_fs *fs, struct inode *dir, const struct dir_leaf *lf,
			  unsigned off)
{
	struct dir_ent dot, dotdot;
	int err;

	if ((err = dir_leaf_entry(fs, dir, lf, 0, &dot)))
		return err;
	if (off == 0 && !dot.ino)
		return fs_corrupt("directory inode %lu block 0: the first entry, '.', is empty "
				  "(inode 0)", (unsigned long)dir->ino);
	if (off == 0)
		return fs_corrupt("directory inode %lu block 0: the '.' entry's rec_len %u leaves "
				  "room for a name before '..'", (unsigned long)dir->ino, dot.rec_len);
	if (off != dot.rec_len || (err = dir_leaf_entry(fs, dir, lf, off, &dotdot)))
		return err;
	if (!dotdot.ino)
		return fs_corrupt("directory inode %lu block 0: the second entry, '..', is empty "
				  "(inode 0)", (unsigned long)dir->ino);
	return 0;
}

/* Put the entry in leaf lblk if it has room: 1 done, 0 full, or error. */
static int linear_try_block(struct handle *h, struct inode *dir, uint64_t lblk,
			    const char *name, size_t len, uint64_t ino, unsigned ftype)
{
	struct uext4_fs *fs = h->fs;
	struct dir_leaf lf;
	unsigned off;
	int r = dir_read_leaf(fs, dir, lblk, &lf);

	if (r == -ENODATA)
		return 0;       /* a hole: the kernel skips it too */
	if (r)
		return r;
	r = dir_leaf_find_room(fs, dir, &lf, EXT4_DIR_REC_LEN(len), &off);
	if (r > 0 && lblk == 0 && (r = check_not_dots(fs, dir, &lf, off)) == 0)
		r = 1;
	if (r > 0) {
		int err = handle_write_access(h, lf.b);

		if (err) {
			r = err;
		} else {
			dir_leaf_put(fs, lf.b->data, off, ino, name, (unsigned)len, ftype);
			dir_leaf_dirty(h, dir, lf.b);
		}
	}
	dir_release_leaf(fs, &lf);
	return r;
}

static int linear_add(struct handle *h, struct inode *dir, const char *name, size_t len,
		      uint64_t ino, unsigned ftype)
{
	struct uext4_fs *fs = h->fs;
	uint64_t nblocks;
	int r = dir_nblocks(fs, dir, &nblocks);

	for (uint64_t lblk = 0; !r && lblk < nblocks; lblk++)
		r = linear_try_block(h, dir, lblk, name, len, ino, ftype);
	if (r)
		return r < 0 ? r : 0;
	if (nblocks == 1 && FS_HAS_COMPAT(fs, DIR_INDEX))
		return htree_make_indexed(h, dir, name, len, ino, ftype);
	return linear_append(h, dir, name, len, ino, ftype);
}

/* --------------------------------------------- inline directories (write) */

/* Offset of the last entry of the inline data (validated), for the
 * conversion to a block: that entry's rec_len is stretched to the end. */
static int inline_last_entry(struct uext4_fs *fs, struct inode *dir,
			     const struct inline_dir *id, unsigned *last)
{
	struct dir_ent e;

	*last = 0;
	for (unsigned off = EXT4_INLINE_DOTDOT_SIZE; off < id->size; off += e.rec_len) {
		int err = inline_entry(fs, dir, id, off, &e);

		if (err)
			return err;
		*last = off;
	}
	return 0;
}

/* Point i_block at the directory's single block pblk (extents when the
 * file system has them, else the first direct block pointer). */
static void set_single_block(struct uext4_fs *fs, struct inode *dir, uint64_t pblk)
{
	struct ext4_inode *raw = inode_raw_mut(dir);

	memset(raw->i_block, 0, sizeof(raw->i_block));
	if (FS_HAS_INCOMPAT(fs, EXTENTS)) {
		struct ext4_extent_header *eh = (struct ext4_extent_header *)raw->i_block;
		struct ext4_extent *ex = (struct ext4_extent *)(eh + 1);

		eh->eh_magic = cpu_to_le16(EXT4_EXT_MAGIC);
		eh->eh_entries = cpu_to_le16(1);
		eh->eh_max = cpu_to_le16(4);
		eh->eh_depth = 0;
		ex->ee_block = 0;
		ex->ee_len = cpu_to_le16(1);
		ex->ee_start_hi = cpu_to_le16((uint16_t)(pblk >> 32));
		ex->ee_start_lo = cpu_to_le32((uint32_t)pblk);
		dir->flags |= EXT4_EXTENTS_FL;
	} else {
		raw->i_block[0] = cpu_to_le32((uint32_t)pblk);
	}
}

/* Fill a block with ".", ".." and the inline dirents at the same readdir
 * positions (inline byte o is at o + 20 in the block, as ext4's inline
 * readdir positions are), the last entry stretched to the block end. */
static void inline_fill_block(struct uext4_fs *fs, struct inode *dir,
			      const struct inline_dir *id, unsigned last, uint8_t *data)
{
	unsigned shift = 2 * DIRENT_MIN_LEN - EXT4_INLINE_DOTDOT_SIZE;
	struct ext4_dir_entry_2 *de = (struct ext4_dir_entry_2 *)(data + last + shift);

	dirent_put(fs, data, dir->ino, DIRENT_MIN_LEN, ".", 1, EXT4_FT_DIR);
	dirent_put(fs, data + DIRENT_MIN_LEN, id->parent, DIRENT_MIN_LEN, "..", 2, EXT4_FT_DIR);
	memcpy(data + 2 * DIRENT_MIN_LEN, id->data + EXT4_INLINE_DOTDOT_SIZE,
	       id->size - EXT4_INLINE_DOTDOT_SIZE);
	de->rec_len = cpu_to_le16((uint16_t)dir_rec_len_disk(fs, dir_leaf_space(fs) - last - shift));
	dir_leaf_set_tail(fs, data);
}

/* Move an inline directory into a block of its own.  The block is
 * allocated first, so a full file system changes nothing. */
static int inline_to_block(struct handle *h, struct inode *dir)
{
	struct uext4_fs *fs = h->fs;
	struct inline_dir id;
	uint64_t pblk;
	uint32_t got;
	unsigned last;
	struct buf *b;
	int err;

	if ((err = inline_load(fs, dir, &id)))
		return err;
	if ((err = inline_last_entry(fs, dir, &id, &last)))
		goto out;
	if (id.size + 2 * DIRENT_MIN_LEN > dir_leaf_space(fs)) {
		err = fs_corrupt("directory inode %lu: %u bytes of inline data do not fit a "
				 "block", (unsigned long)dir->ino, id.size);
		goto out;
	}
	if ((err = balloc_alloc(h, dir, 0, 1, &pblk, &got)))
		goto out;
	err = xattr_set_raw(h, dir, EXT4_XATTR_INDEX_SYSTEM, "data", 4, NULL, 0, 0);
	if (err == -ENODATA)
		err = 0;
	if (!err && !(err = bget_new(fs->bc, pblk, &b))) {
		err = handle_create_access(h, b);
		if (!err) {
			inline_fill_block(fs, dir, &id, last, b->data);
			dir_leaf_dirty(h, dir, b);
		}
		brelse(fs->bc, b);
	}
	if (err) {
		balloc_free(h, dir, pblk, 1, BALLOC_METADATA);
		goto out;
	}
	dir->flags &= ~EXT4_INLINE_DATA_FL;
	set_single_block(fs, dir, pblk);
	inode_add_blocks(fs, dir, 1);
	dir->size = fs->block_size;
	err = inode_write(h, dir);
out:
	free(id.data);
	return err;
}

/* Write an edited inline buffer back: i_block, and the system.data xattr
 * when the change was in its part. */
static int inline_store(struct handle *h, struct inode *dir, const struct inline_dir *id,
			unsigned changed_off)
{
	int err = 0;

	memcpy(inode_raw_mut(dir)->i_block, id->data, INLINE_IBLOCK_SIZE);
	if (changed_off >= INLINE_IBLOCK_SIZE)
		err = xattr_set_raw(h, dir, EXT4_XATTR_INDEX_SYSTEM, "data", 4,
				    id->data + INLINE_IBLOCK_SIZE, id->size - INLINE_IBLOCK_SIZE, 0);
	return err ? err : inode_write(h, dir);
}

/* Find name in the inline data: 1 and its offset and the previous
 * entry's in the same region, 0 if absent, or an error. */
static int inline_locate(struct uext4_fs *fs, struct inode *dir, const struct inline_dir *id,
			 const char *name, size_t len, unsigned *off, unsigned *prev)
{
	unsigned before = NO_PREV;
	struct dir_ent e;

	for (unsigned o = EXT4_INLINE_DOTDOT_SIZE; o < id->size; before = o, o += e.rec_len) {
		int err = inline_entry(fs, dir, id, o, &e);

		if (err)
			return err;
		if (o == INLINE_IBLOCK_SIZE)
			before = NO_PREV;       /* the xattr part is a region of its own */
		if (e.ino && dir_name_eq(fs, dir, &e, name, len)) {
			*off = o;
			*prev = before;
			return 1;
		}
	}
	return 0;
}

static int not_found(struct inode *dir, const char *name, size_t len)
{
	return fs_err(ENOENT, "no entry '%.*s' in directory inode %lu", (int)MIN(len, 255), name,
		      (unsigned long)dir->ino);
}

static int stale(struct inode *dir, const char *name, size_t len, uint64_t found,
		 uint64_t want)
{
	return fs_err(ESTALE, "directory inode %lu: entry '%.*s' points to inode %lu, not %lu",
		      (unsigned long)dir->ino, (int)MIN(len, 255), name, (unsigned long)found,
		      (unsigned long)want);
}

/* Room for an entry of need bytes in the inline region [start, end): 1
 * and *off (an unused entry, or a live one's slack, as ext4_find_dest_de),
 * 0 if none, or an error. */
static int inline_find_room(struct uext4_fs *fs, struct inode *dir, const struct inline_dir *id,
			    unsigned start, unsigned end, unsigned need, unsigned *off)
{
	struct dir_ent e;

	for (unsigned o = start; o < end; o += e.rec_len) {
		int err = inline_entry(fs, dir, id, o, &e);
		unsigned used;

		if (err)
			return err;
		used = e.ino ? EXT4_DIR_REC_LEN(e.name_len) : 0;
		if (e.rec_len >= used + need) {
			*off = o;
			return 1;
		}
	}
	return 0;
}

/*
 * Open the system.data part of an inline directory whose i_block is full,
 * as the kernel's ext4_update_inline_dir(): the value takes all the room
 * the inode body has, one empty entry spans it, i_size grows to match.
 * Stored at once (the kernel too keeps it even if the name then does
 * not fit).  1 done, 0 when the room would not exceed one 12-byte entry
 * (the kernel's test), or an error.
 */
static int inline_grow(struct handle *h, struct inode *dir, struct inline_dir *id)
{
	size_t cap = 0;
	unsigned room;
	uint8_t *d;
	int err = inline_capacity(h->fs, dir, &cap);

	if (err)
		return err;
	room = cap > INLINE_IBLOCK_SIZE ? (unsigned)(cap - INLINE_IBLOCK_SIZE) : 0;
	if (room <= EXT4_DIR_REC_LEN(1))
		return 0;
	if (!(d = realloc(id->data, INLINE_IBLOCK_SIZE + room)))
		return fs_err(ENOMEM, "inline directory: out of memory");
	id->data = d;
	memset(d + INLINE_IBLOCK_SIZE, 0, room);
	((struct ext4_dir_entry_2 *)(d + INLINE_IBLOCK_SIZE))->rec_len = cpu_to_le16((uint16_t)room);
	id->size = INLINE_IBLOCK_SIZE + room;
	dir->size = id->size;
	err = inline_store(h, dir, id, INLINE_IBLOCK_SIZE);
	return err ? err : 1;
}

/*
 * Add an entry to an inline directory in place, as the kernel's
 * ext4_try_add_inline_entry(): in i_block's 56 bytes after "..", else in
 * the system.data part (opened first if empty).  1 added, 0 no room (the
 * caller moves the directory to a block), or an error.  dir->lock is held
 * for writing (every inline directory change takes it exclusive), so the
 * move to a block is atomic for lookups and readdir.
 */
static int inline_add(struct handle *h, struct inode *dir, const char *name, size_t len,
		      uint64_t ino, unsigned ftype)
{
	struct uext4_fs *fs = h->fs;
	unsigned need = EXT4_DIR_REC_LEN(len), off = 0;
	struct inline_dir id;
	int r;

	if ((r = inline_load(fs, dir, &id)))
		return r;
	r = inline_find_room(fs, dir, &id, EXT4_INLINE_DOTDOT_SIZE, INLINE_IBLOCK_SIZE, need, &off);
	if (r == 0 && id.size == INLINE_IBLOCK_SIZE && (r = inline_grow(h, dir, &id)) > 0)
		r = 0;  /* opened: look there */
	if (r == 0 && id.size > INLINE_IBLOCK_SIZE)
		r = inline_find_room(fs, dir, &id, INLINE_IBLOCK_SIZE, id.size, need, &off);
	if (r == 1) {
		dir_leaf_put(fs, id.data, off, ino, name, (unsigned)len, ftype);
		r = inline_store(h, dir, &id, off);
		r = r ? r : 1;
	}
	free(id.data);
	return r;
}

/* A new directory made inline, as the kernel's ext4_try_create_inline_dir():
 * the parent's number in i_block's first 4 bytes, one unused entry over
 * the other 56, an empty system.data, i_size 60.  1 done, 0 when the inode
 * has no room for inline data, or an error. */
static int inline_make(struct handle *h, struct inode *dir, uint64_t parent)
{
	uint8_t *ib = (uint8_t *)inode_raw_mut(dir)->i_block;
	struct ext4_dir_entry_2 *de = (struct ext4_dir_entry_2 *)(ib + EXT4_INLINE_DOTDOT_SIZE);
	uint32_t p = cpu_to_le32((uint32_t)parent);
	size_t cap = 0;
	int err = inline_capacity(h->fs, dir, &cap);

	atomic_fetch_and_explicit(&dir->istate, ~(uint32_t)INODE_MAY_INLINE, memory_order_relaxed);
	if (err || cap < INLINE_IBLOCK_SIZE)
		return err;
	if ((err = inline_begin(h, dir)))
		return err;
	memcpy(ib, &p, sizeof(p));
	de->inode = 0;
	de->rec_len = cpu_to_le16(INLINE_IBLOCK_SIZE - EXT4_INLINE_DOTDOT_SIZE);
	dir->size = INLINE_IBLOCK_SIZE;
	return 1;
}

/* Remove (new_ino 0) or retarget an inline entry; ".." is the parent
 * number at the start of i_block. */
static int inline_change(struct handle *h, struct inode *dir, const char *name, size_t len,
			 uint64_t want_ino, uint64_t new_ino, unsigned ftype)
{
	struct uext4_fs *fs = h->fs;
	struct inline_dir id;
	unsigned off = 0, prev = NO_PREV;
	int r;

	if ((r = inline_load(fs, dir, &id)))
		return r;
	if (new_ino && len == 2 && name[0] == '.' && name[1] == '.') {
		*(uint32_t *)id.data = cpu_to_le32((uint32_t)new_ino);
		r = inline_store(h, dir, &id, 0);
		goto out;
	}
	r = inline_locate(fs, dir, &id, name, len, &off, &prev);
	if (r <= 0) {
		r = r ? r : not_found(dir, name, len);
		goto out;
	}
	struct ext4_dir_entry_2 *de = (struct ext4_dir_entry_2 *)(id.data + off);
	if (new_ino) {
		de->inode = cpu_to_le32((uint32_t)new_ino);
		de->file_type = FS_HAS_INCOMPAT(fs, FILETYPE) ? (uint8_t)ftype : 0;
	} else if (le32(de->inode) != want_ino) {
		r = stale(dir, name, len, le32(de->inode), want_ino);
		goto out;
	} else if (prev == NO_PREV) {
		de->inode = 0;
	} else {
		struct ext4_dir_entry_2 *pde = (struct ext4_dir_entry_2 *)(id.data + prev);

		pde->rec_len = cpu_to_le16((uint16_t)(le16(pde->rec_len) + le16(de->rec_len)));
	}
	r = inline_store(h, dir, &id, off);
out:
	free(id.data);
	return r;
}

/* ------------------------------------------------------------ entry points (write) */

static void touch_dir(struct uext4_fs *fs, struct inode *dir)
{
	dir->mtime = dir->ctime = fs_time(fs);
}

static int dir_add_excl_uncached(struct handle *h, struct inode *dir, const char *name,
				 size_t len, uint64_t ino, unsigned ftype);

/*
 * The entry points that change a name (add, add_excl, remove, retarget)
 * drop what the name cache holds for it once the change is made (also
 * when it failed part-way: it may have changed something), with
 * dir->lock still held for writing.
 */
int dir_add_excl(struct handle *h, struct inode *dir, const char *name, size_t len,
		 uint64_t ino, unsigned ftype)
{
	int err = dir_add_excl_uncached(h, dir, name, len, ino, ftype);

	dir_nc_invalidate(h->fs, dir, name, len);
	return err;
}

static int dir_add_uncached(struct handle *h, struct inode *dir, const char *name, size_t len,
			    uint64_t ino, unsigned ftype);

int dir_add(struct handle *h, struct inode *dir, const char *name, size_t len, uint64_t ino,
	    unsigned ftype)
{
	int err = dir_add_uncached(h, dir, name, len, ino, ftype);

	dir_nc_invalidate(h->fs, dir, name, len);
	return err;
}

static int dir_add_excl_uncached(struct handle *h, struct inode *dir, const char *name,
				 size_t len, uint64_t ino, unsigned ftype)
{
	struct uext4_fs *fs = h->fs;
	uint64_t other;
	unsigned ft;
	int err;

	if (len > 0 && len <= EXT4_NAME_LEN && !(dir->flags & EXT4_INLINE_DATA_FL) &&
	    dir_is_htree(fs, dir)) {
		err = htree_add_excl(h, dir, name, len, ino, ftype);
		if (err != 1) {
			if (err)
				return err == -EEXIST ? fs_err(EEXIST, "\"%.*s\" exists in directory "
							       "inode %llu", (int)len, name,
							       (unsigned long long)dir->ino)
						      : FS_ERROR_SEEN(fs, err, dir->ino, 0);
			touch_dir(h->fs, dir);
			return inode_write(h, dir);
		}
		/* 1: a hash collision spans leaves; do it the long way. */
	}
	err = dir_lookup_locked(fs, dir, name, len, &other, &ft);
	if (err == 0)
		return fs_err(EEXIST, "\"%.*s\" exists in directory inode %llu (inode %llu)",
			      (int)len, name, (unsigned long long)dir->ino,
			      (unsigned long long)other);
	if (err != -ENOENT)
		return FS_ERROR_SEEN(fs, err, dir->ino, 0);
	return dir_add_uncached(h, dir, name, len, ino, ftype);
}

static int dir_add_uncached(struct handle *h, struct inode *dir, const char *name, size_t len,
			    uint64_t ino, unsigned ftype)
{
	struct uext4_fs *fs = h->fs;
	int err;

	if (len == 0 || len > EXT4_NAME_LEN)
		return fs_err(len ? ENAMETOOLONG : EINVAL, "bad name length %zu", len);
	if (dir->flags & EXT4_INLINE_DATA_FL) {
		err = inline_add(h, dir, name, len, ino, ftype);
		if (err == 1) {
			touch_dir(h->fs, dir);
			return inode_write(h, dir);
		}
		/* Full: to a block (ext4_convert_inline_dir), then as any. */
		if (err < 0 || (err = inline_to_block(h, dir)))
			return err;
	}
	if (dir_is_htree(fs, dir))
		err = htree_add(h, dir, name, len, ino, ftype);
	else
		err = linear_add(h, dir, name, len, ino, ftype);
	if (err)
		return FS_ERROR_SEEN(fs, err, dir->ino, 0);
	touch_dir(h->fs, dir);
	return inode_write(h, dir);
}

/* Find name in a block directory (linear or htree leaves). */
static int find_slot(struct uext4_fs *fs, struct inode *dir, const char *name, size_t len,
		     struct dir_slot *s)
{
	uint64_t nblocks;
	int r;

	memset(s, 0, sizeof(*s));
	if (dir_is_htree(fs, dir))
		return htree_find_slot(fs, dir, name, len, s);
	if ((r = dir_nblocks(fs, dir, &nblocks)))
		return r;
	for (uint64_t lblk = 0; lblk < nblocks; lblk++) {
		r = dir_read_leaf(fs, dir, lblk, &s->lf);
		if (r == -ENODATA)
			continue;
		if (r)
			return r;
		r = dir_leaf_locate(fs, dir, &s->lf, name, len, &s->off, &s->prev);
		if (r > 0) {
			s->ino = le32(((struct ext4_dir_entry_2 *)(s->lf.b->data + s->off))->inode);
			return 0;
		}
		dir_release_leaf(fs, &s->lf);
		if (r < 0)
			return r;
	}
	return not_found(dir, name, len);
}

/* Merge the entry at s->off into the one before it, or free it in place
 * when it is the first of its block (ext4_generic_delete_entry). */
static void slot_delete(struct uext4_fs *fs, struct dir_slot *s)
{
	uint8_t *data = s->lf.b->data;
	struct ext4_dir_entry_2 *de = (struct ext4_dir_entry_2 *)(data + s->off);

	if (s->prev == NO_PREV) {
		de->inode = 0;
	} else {
		struct ext4_dir_entry_2 *pde = (struct ext4_dir_entry_2 *)(data + s->prev);
		unsigned len = dir_rec_len(fs, pde->rec_len) + dir_rec_len(fs, de->rec_len);

		pde->rec_len = cpu_to_le16((uint16_t)dir_rec_len_disk(fs, len));
	}
}

static int dir_remove_uncached(struct handle *h, struct inode *dir, const char *name, size_t len,
			       uint64_t ino);

int dir_remove(struct handle *h, struct inode *dir, const char *name, size_t len, uint64_t ino)
{
	int err = dir_remove_uncached(h, dir, name, len, ino);

	dir_nc_invalidate(h->fs, dir, name, len);
	return err;
}

static int dir_remove_uncached(struct handle *h, struct inode *dir, const char *name, size_t len,
			       uint64_t ino)
{
	struct uext4_fs *fs = h->fs;
	struct dir_slot s;
	int err;

	if (len == 0 || len > EXT4_NAME_LEN)
		return fs_err(len ? ENAMETOOLONG : ENOENT, "bad name length %zu", len);
	if (dir->flags & EXT4_INLINE_DATA_FL) {
		err = inline_change(h, dir, name, len, ino, 0, 0);
	} else {
		if ((err = find_slot(fs, dir, name, len, &s)))
			return FS_ERROR_SEEN(fs, err, dir->ino, 0);
		if (s.ino != ino)
			err = stale(dir, name, len, s.ino, ino);
		else if (!(err = handle_write_access(h, s.lf.b))) {
			slot_delete(fs, &s);
			dir_leaf_dirty(h, dir, s.lf.b);
		}
		dir_release_leaf(fs, &s.lf);
	}
	if (err)
		return err;
	touch_dir(h->fs, dir);
	return inode_write(h, dir);
}

/* ------------------------------------------------------------ shared (parallel) changes */

bool dir_can_share(struct uext4_fs *fs, const struct inode *dir)
{
	return !(dir->flags & EXT4_INLINE_DATA_FL) && dir_is_htree(fs, dir);
}

int dir_add_shared(struct handle *h, struct inode *dir, const char *name, size_t len,
		   unsigned ftype, int (*make)(void *ctx, uint64_t *ino), void *ctx)
{
	struct htree_par hp;
	uint64_t ino;
	int err;

	if (len == 0 || len > EXT4_NAME_LEN || !dir_can_share(h->fs, dir))
		return DIR_NEED_WIDE;
	err = htree_par_add_begin(h, dir, name, len, &hp);
	if (err == -EEXIST)
		return fs_err(EEXIST, "\"%.*s\" exists in directory inode %llu", (int)len, name,
			      (unsigned long long)dir->ino);
	if (err)
		return err;
	err = make(ctx, &ino);
	if (!err) {
		dir_leaf_insert(h, dir, hp.s.lf.b, hp.s.off, ino, name, (unsigned)len, ftype);
		/* After the change, the leaf still locked: see namecache.c. */
		dir_nc_invalidate(h->fs, dir, name, len);
	}
	htree_par_end(h->fs, &hp);
	return err;
}

int dir_remove_shared(struct handle *h, struct inode *dir, const char *name, size_t len,
		      uint64_t ino, int (*commit)(void *ctx), void *ctx)
{
	struct htree_par hp;
	int err;

	if (len == 0 || len > EXT4_NAME_LEN || !dir_can_share(h->fs, dir))
		return DIR_NEED_WIDE;
	err = htree_par_find(h, dir, name, len, &hp);
	if (err == -ENOENT)
		return not_found(dir, name, len);
	if (err)
		return err;
	if (hp.s.ino != ino)
		err = DIR_MOVED;
	else if (!(err = commit(ctx))) {
		slot_delete(h->fs, &hp.s);
		dir_leaf_dirty(h, dir, hp.s.lf.b);
		dir_nc_invalidate(h->fs, dir, name, len);
	}
	htree_par_end(h->fs, &hp);
	return err;
}

/* "." or ".." of an htree directory: in the root, outside the index. */
static int htree_dot_slot(struct uext4_fs *fs, struct inode *dir, size_t len, struct dir_slot *s)
{
	int err;

	memset(s, 0, sizeof(*s));
	if ((err = inode_bread(fs, dir, 0, UEXT4_META_DIR, &s->lf.b)))
		return err == -ENODATA ? fs_corrupt("htree directory inode %lu: no root block",
						    (unsigned long)dir->ino) : err;
	s->lf.end = fs->block_size;
	s->dx_root = true;
	s->off = len == 1 ? 0 : DIRENT_MIN_LEN;
	s->prev = NO_PREV;
	const struct ext4_dir_entry_2 *de = (const struct ext4_dir_entry_2 *)(s->lf.b->data + s->off);
	if (de->name_len != len || memcmp(de->name, "..", len) != 0) {
		dir_release_leaf(fs, &s->lf);
		return fs_corrupt("htree directory inode %lu root: no '%.*s' entry",
				  (unsigned long)dir->ino, (int)len, "..");
	}
	return 0;
}

static int dir_retarget_uncached(struct handle *h, struct inode *dir, const char *name,
				 size_t len, uint64_t ino, unsigned ftype);

int dir_retarget(struct handle *h, struct inode *dir, const char *name, size_t len,
		 uint64_t ino, unsigned ftype)
{
	int err = dir_retarget_uncached(h, dir, name, len, ino, ftype);

	dir_nc_invalidate(h->fs, dir, name, len);
	return err;
}

static int dir_retarget_uncached(struct handle *h, struct inode *dir, const char *name,
				 size_t len, uint64_t ino, unsigned ftype)
{
	struct uext4_fs *fs = h->fs;
	bool dots = len <= 2 && name[0] == '.' && (len == 1 || name[1] == '.');
	struct dir_slot s;
	int err;

	if (len == 0 || len > EXT4_NAME_LEN || ino == 0 || ino > fs->inodes_count)
		return fs_err(EINVAL, "retarget: bad name length %zu or inode %lu", len,
			      (unsigned long)ino);
	if (dir->flags & EXT4_INLINE_DATA_FL) {
		err = inline_change(h, dir, name, len, 0, ino, ftype);
	} else {
		if (dots && dir_is_htree(fs, dir))
			err = htree_dot_slot(fs, dir, len, &s);
		else
			err = find_slot(fs, dir, name, len, &s);
		if (err)
			return FS_ERROR_SEEN(fs, err, dir->ino, 0);
		if (!(err = handle_write_access(h, s.lf.b))) {
			struct ext4_dir_entry_2 *de =
				(struct ext4_dir_entry_2 *)(s.lf.b->data + s.off);

			de->inode = cpu_to_le32((uint32_t)ino);
			de->file_type = FS_HAS_INCOMPAT(fs, FILETYPE) ? (uint8_t)ftype : 0;
			if (s.dx_root)
				dir_dx_dirty(h, dir, s.lf.b);
			else
				dir_leaf_dirty(h, dir, s.lf.b);
		}
		dir_release_leaf(fs, &s.lf);
	}
	if (err)
		return err;
	/* Rename over a name changes the directory; a moved directory's ".."
	 * update does not (the kernel leaves its mtime alone too). */
	if (!dots)
		touch_dir(h->fs, dir);
	return inode_write(h, dir);
}

int dir_make(struct handle *h, struct inode *dir, uint64_t parent)
{
	struct uext4_fs *fs = h->fs;
	uint64_t lblk;
	struct buf *b;
	int err;

	if (dir->size != 0)
		return fs_err(EEXIST, "directory inode %lu already has blocks",
			      (unsigned long)dir->ino);
	namecache_forget_dir(dir); /* a new directory: no old entry may match */
	if (atomic_load_explicit(&dir->istate, memory_order_relaxed) & INODE_MAY_INLINE) {
		dir->flags &= ~EXT4_INDEX_FL;
		err = inline_make(h, dir, parent);
		if (err)
			return err < 0 ? err : inode_write(h, dir);
	}
	if (dir->flags & EXT4_INLINE_DATA_FL) {
		/* An inode that came with the flag but no room to stay
		 * inline: a block directory (e2fsck and the kernel accept it). */
		struct ext4_inode *raw = inode_raw_mut(dir);

		dir->flags &= ~EXT4_INLINE_DATA_FL;
		memset(raw->i_block, 0, sizeof(raw->i_block));
		if (FS_HAS_INCOMPAT(fs, EXTENTS)) {
			struct ext4_extent_header *eh = (struct ext4_extent_header *)raw->i_block;

			eh->eh_magic = cpu_to_le16(EXT4_EXT_MAGIC);
			eh->eh_max = cpu_to_le16(4);
			dir->flags |= EXT4_EXTENTS_FL;
		}
	}
	dir->flags &= ~EXT4_INDEX_FL;   /* linear until it outgrows a block */
	if ((err = dir_append_block(h, dir, &lblk, &b)))
		return err;
	dirent_put(fs, b->data, dir->ino, DIRENT_MIN_LEN, ".", 1, EXT4_FT_DIR);
	dirent_put(fs, b->data + DIRENT_MIN_LEN, parent, dir_leaf_space(fs) - DIRENT_MIN_LEN,
		   "..", 2, EXT4_FT_DIR);
	dir_leaf_set_tail(fs, b->data);
	dir_leaf_dirty(h, dir, b);
	brelse(fs->bc, b);
	return inode_write(h, dir);
}

static bool is_dots(const struct dir_ent *e)
{
	return e->name_len <= 2 && e->name[0] == '.' && (e->name_len == 1 || e->name[1] == '.');
}

static int inline_is_empty(struct uext4_fs *fs, struct inode *dir)
{
	struct inline_dir id;
	struct dir_ent e;
	int r = inline_load(fs, dir, &id);

	if (r)
		return r;
	r = 1;
	for (unsigned off = EXT4_INLINE_DOTDOT_SIZE; r == 1 && off < id.size; off += e.rec_len) {
		int err = inline_entry(fs, dir, &id, off, &e);

		if (err)
			r = err;
		else if (e.ino)
			r = 0;
	}
	free(id.data);
	return r;
}

/* 1 if leaf lblk holds nothing but "." and "..", 0 if it does, or error.
 * htree index blocks read as one empty entry (nodes) or "." and ".."
 * (root), so every block of any directory can be scanned this way. */
static int block_is_empty(struct uext4_fs *fs, struct inode *dir, uint64_t lblk)
{
	struct dir_leaf lf;
	struct dir_ent e;
	int r = dir_read_leaf(fs, dir, lblk, &lf);

	if (r == -ENODATA)
		return 1;
	if (r)
		return r;
	r = 1;
	for (unsigned off = 0; r == 1 && off < lf.end; off += e.rec_len) {
		int err = dir_leaf_entry(fs, dir, &lf, off, &e);

		if (err)
			r = err;
		else if (e.ino && !is_dots(&e))
			r = 0;
	}
	dir_release_leaf(fs, &lf);
	return r;
}

int dir_is_empty(struct uext4_fs *fs, struct inode *dir)
{
	uint64_t nblocks;
	int r;

	if (dir->flags & EXT4_INLINE_DATA_FL)
		return inline_is_empty(fs, dir);
	if ((r = dir_nblocks(fs, dir, &nblocks)))
		return r;
	r = 1;
	for (uint64_t lblk = 0; r == 1 && lblk < nblocks; lblk++)
		r = block_is_empty(fs, dir, lblk);
	return r;
}
