/*
 * dirblock.c - one directory block, below both the linear (dir.c) and the
 * htree (htree.c) code: the dirent format and its rec_len rules, the
 * checksum tail, reading a leaf (checksum verified once per buffer),
 * finding, inserting and deleting within one leaf, the leaf's hint, and
 * appending a block to a directory.  Nothing here knows how a directory
 * is indexed, except that an htree's index blocks are recognised (their
 * checksum is htree.c's).
 *
 * Format (Documentation/filesystems/ext4/directory.rst): each block is a
 * chain of dirents (inode, rec_len, name_len, file_type, name) whose
 * rec_len tile the block exactly; with metadata_csum the last 12 bytes of
 * a leaf block are a fake dirent holding the block's checksum.
 *
 * Validation: every dirent is checked before use, on every use (the
 * checksum only once per buffer): rec_len >= 12, 4-aligned, large enough
 * for the name, inside the block (before the checksum tail), inode number
 * in range.
 *
 * Locking: the caller holds dir->lock (for writing, with a handle open,
 * for the write side), or for reading plus the htree leaf's lock for a
 * parallel change (htree.c); nothing here takes a lock besides the buffer
 * cache's and the allocators' inside dir_append_block().
 */
#include "bcache.h"
#include "csum.h"
#include "dirblock.h"
#include "error.h"
#include "file.h"
#include "inode.h"
#include "internal.h"
#include "ondisk.h"
#include "trans.h"
#include "utf8.h"

#include <dirent.h>
#include <string.h>

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

/* Were this leaf's entries all checked by an earlier full scan?  Our own
 * writers keep a leaf well formed, so a second check would only cost. */
static bool leaf_trusted(const struct dir_leaf *lf)
{
	return atomic_load_explicit(&lf->b->state, memory_order_acquire) & BUF_DIRENTS_OK;
}

static void leaf_set_trusted(const struct dir_leaf *lf)
{
	atomic_fetch_or_explicit(&lf->b->state, BUF_DIRENTS_OK, memory_order_release);
}

/* The unchecked entry at off of a trusted leaf. */
static inline void leaf_entry_fast(const struct uext4_fs *fs, const struct dir_leaf *lf,
				   unsigned off, struct dir_ent *e)
{
	const struct ext4_dir_entry_2 *de = (const void *)(lf->b->data + off);

	e->ino = le32(de->inode);
	/* Inline for blocks under 64 KiB: each entry's offset hangs on the
	 * previous rec_len, so a call here lengthens the whole walk. */
	e->rec_len = fs->block_size < 65536 ? le16(de->rec_len) : dir_rec_len(fs, de->rec_len);
	e->name_len = de->name_len;
	e->file_type = de->file_type;
	e->name = de->name;
}

/*
 * Ask for every line of the leaf before walking it.  The walk is a chain of
 * dependent loads (offset += rec_len), so each line it misses stalls it; a
 * leaf of a big htree directory is seldom in cache (names hash to any
 * leaf), and the requests issued together overlap their misses.
 */
static inline void leaf_prefetch(const struct dir_leaf *lf)
{
	for (unsigned o = 0; o < lf->end; o += CACHELINE)
		__builtin_prefetch(lf->b->data + o, 0, 3);
}

static int leaf_find_fast(struct uext4_fs *fs, struct inode *dir, const struct dir_leaf *lf,
			  const char *name, size_t len, bool *found, uint64_t *ino,
			  unsigned *ftype)
{
	struct dir_ent e;

	for (unsigned off = 0; off < lf->end; off += e.rec_len) {
		leaf_entry_fast(fs, lf, off, &e);
		if (e.rec_len == 0)
			break; /* cannot happen in a trusted leaf; never loop */
		if (e.ino && dir_name_eq(fs, dir, &e, name, len)) {
			*found = true;
			*ino = e.ino;
			if (ftype)
				*ftype = dir_dtype(fs, e.file_type);
			return 0;
		}
	}
	return 0;
}

int dir_leaf_find(struct uext4_fs *fs, struct inode *dir, const struct dir_leaf *lf,
		  const char *name, size_t len, bool *found, uint64_t *ino, unsigned *ftype)
{
	struct dir_ent e;

	*found = false;
	if (leaf_trusted(lf))
		return leaf_find_fast(fs, dir, lf, name, len, found, ino, ftype);
	for (unsigned off = 0; off < lf->end; off += e.rec_len) {
		int err = dir_leaf_entry(fs, dir, lf, off, &e);

		if (err)
			return err;
		if (e.ino && dir_name_eq(fs, dir, &e, name, len)) {
			*found = true;
			*ino = e.ino;
			if (ftype)
				*ftype = dir_dtype(fs, e.file_type);
			return 0;
		}
	}
	leaf_set_trusted(lf); /* every entry was checked */
	return 0;
}


/* ------------------------------------------------------------ casefold */

/*
 * The folded form of the name a scan looks for, kept per thread: a scan
 * compares it with every live entry of a leaf, and the next scan (the
 * create after a lookup, another leaf) is most often for the same name.
 */
static _Thread_local struct {
	size_t len;
	ssize_t flen;	/* -EINVAL: the name is not valid UTF-8 */
	char name[EXT4_NAME_LEN];
	char folded[UTF8_FOLD_MAX];
} query = { .len = SIZE_MAX };

static bool is_ascii(const char *s, size_t len);

/* An ASCII name's nfdicf form is its lower case: NFD leaves ASCII alone,
 * full case folding maps A-Z to a-z and nothing else of ASCII, and no
 * ASCII code point is default-ignorable.  The trie walk of utf8.c is
 * many times dearer, and most names are ASCII. */
static ssize_t fold_ascii(const char *name, size_t len, char *out)
{
	for (size_t i = 0; i < len; i++) {
		char c = name[i];

		out[i] = c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c;
	}
	return (ssize_t)len;
}

ssize_t dir_fold_query(const char *name, size_t len, const char **folded)
{
	if (len > EXT4_NAME_LEN)
		return -EINVAL;
	if (query.len != len || memcmp(query.name, name, len) != 0) {
		memcpy(query.name, name, len);
		query.len = len;
		query.flen = is_ascii(name, len) && memchr(name, 0, len) == NULL
				     ? fold_ascii(name, len, query.folded)
				     : utf8_casefold(name, len, query.folded, sizeof(query.folded));
	}
	*folded = query.folded;
	return query.flen;
}

/* An entry name of ASCII only folds byte by byte (A-Z to a-z). */
static bool ascii_folds_to(const char *ename, size_t elen, const char *folded, size_t flen)
{
	if (elen != flen)
		return false;
	for (size_t i = 0; i < elen; i++) {
		char c = ename[i];

		if (c >= 'A' && c <= 'Z')
			c = (char)(c - 'A' + 'a');
		if (c != folded[i])
			return false;
	}
	return true;
}

static bool is_ascii(const char *s, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)s[i] >= 0x80)
			return false;
	return true;
}

bool dir_name_match_folded(const char *name, size_t len, const char *ename, size_t elen)
{
	const char *folded;
	char efolded[UTF8_FOLD_MAX];
	ssize_t flen = dir_fold_query(name, len, &folded), eflen;

	if (flen < 0)
		return false;
	if (is_ascii(ename, elen))
		return ascii_folds_to(ename, elen, folded, (size_t)flen);
	eflen = utf8_casefold(ename, elen, efolded, sizeof(efolded));
	return eflen == flen && memcmp(efolded, folded, (size_t)flen) == 0;
}

/* ------------------------------------------------------------ write side */

unsigned dir_rec_len_disk(const struct uext4_fs *fs, unsigned len)
{
	if (fs->block_size < 65536)
		return len;
	if (len == 65536)
		return 65535;
	return (len & 65532) | ((len >> 16) & 3);
}

unsigned dir_leaf_space(const struct uext4_fs *fs)
{
	return fs->block_size - (fs->metadata_csum ? DIR_TAIL_LEN : 0);
}

void dir_leaf_set_tail(const struct uext4_fs *fs, uint8_t *data)
{
	struct ext4_dir_entry_tail *t;

	if (!fs->metadata_csum)
		return;
	t = (struct ext4_dir_entry_tail *)(data + fs->block_size - DIR_TAIL_LEN);
	memset(t, 0, sizeof(*t));
	t->det_rec_len = cpu_to_le16(DIR_TAIL_LEN);
	t->det_reserved_ft = EXT4_FT_DIR_CSUM;
}

void dirent_put(const struct uext4_fs *fs, uint8_t *at, uint64_t ino, unsigned rec_len,
		const char *name, unsigned len, unsigned ftype)
{
	struct ext4_dir_entry_2 *de = (struct ext4_dir_entry_2 *)at;

	de->inode = cpu_to_le32((uint32_t)ino);
	de->rec_len = cpu_to_le16((uint16_t)dir_rec_len_disk(fs, rec_len));
	de->name_len = (uint8_t)len;
	/* Without the filetype feature this byte is the high half of a
	 * 16-bit name length: it must stay 0. */
	de->file_type = FS_HAS_INCOMPAT(fs, FILETYPE) ? (uint8_t)ftype : 0;
	memcpy(de->name, name, len);
}

/* ------------------------------------------------------------ leaf hints
 *
 * A create in an htree leaf must look at every entry (is the name there?)
 * before it knows where the new one goes, and a leaf of a big directory is
 * seldom in the CPU's cache: that scan was a fifth of a create.  A leaf
 * buffer's hint (buf.hint) lets most creates skip it: a 2048-bit Bloom
 * filter of the live names (three bits each; one clear: the name is
 * absent), the offset of the last entry, and a bound on the slack of the
 * entries before it (no earlier entry has room for more).  So the hinted
 * create puts the entry exactly where the full scan would have (the first
 * fit), keeping images independent of the cache.  Built by a full scan of
 * a trusted leaf; every change of a leaf drops it (dir_leaf_dirty())
 * except the hinted insert's own, which keeps it exact (dir_leaf_insert()).
 * Only writers of the leaf use it: see struct leaf_hint.
 */

#define HINT_BITS 2048u
#define HINT_K 3      /* bits per name */
_Static_assert(sizeof(((struct leaf_hint *)0)->bloom) * 8 == HINT_BITS,
	       "the filter has HINT_BITS bits");
#define HINT_SCAN 2   /* the hint cannot answer: scan */

/*
 * The filter bits of a name come from FNV-1a, then an xor-shift-multiply
 * finalizer (MurmurHash3's idea) so that every input bit reaches the top
 * bits.  FNV-1a's own top bits hardly move with a name's last byte: with
 * one bit of 1024 from them, a stream of names like f1, f2, f3 fell on a
 * few bits and a third of the probes had to scan.  Three bits of 2048: a
 * false hit for 0.5% of the probes of a leaf of 128 short names (16-byte
 * entries, a leaf just split), 3% at 256 (full).
 */
static uint64_t dir_name_hash(const char *name, size_t len)
{
	uint64_t h = 0xcbf29ce484222325ull;   /* FNV-1a */

	for (size_t i = 0; i < len; i++)
		h = (h ^ (uint8_t)name[i]) * 0x100000001b3ull;
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	return h;
}

static bool leaf_hint_valid(const struct buf *b)
{
	return atomic_load_explicit(&b->state, memory_order_relaxed) & BUF_LEAF_HINT;
}

static void leaf_hint_drop(struct buf *b)
{
	if (leaf_hint_valid(b))
		atomic_fetch_and_explicit(&b->state, ~(uint32_t)BUF_LEAF_HINT,
					  memory_order_relaxed);
}

/* Bit i (0..HINT_K-1) of the name's hash h: 11 bits of it each. */
static unsigned hint_bit(uint64_t h, int i)
{
	return (unsigned)(h >> (53 - 11 * i)) & (HINT_BITS - 1);
}

static void hint_set_bits(struct leaf_hint *hi, const char *name, size_t len)
{
	uint64_t h = dir_name_hash(name, len);

	for (int i = 0; i < HINT_K; i++)
		hi->bloom[hint_bit(h, i) / 64] |= 1ull << (hint_bit(h, i) % 64);
}

/* Whether the filter may hold the name (all its bits set). */
static bool hint_may_hold(const struct leaf_hint *hi, const char *name, size_t len)
{
	uint64_t h = dir_name_hash(name, len);

	for (int i = 0; i < HINT_K; i++)
		if (!((hi->bloom[hint_bit(h, i) / 64] >> (hint_bit(h, i) % 64)) & 1))
			return false;
	return true;
}

static unsigned ent_slack(const struct dir_ent *e)
{
	return e->rec_len - (e->ino ? EXT4_DIR_REC_LEN(e->name_len) : 0);
}

/* Answer a create from the hint: -EEXIST never (all bits set: a scan), 1 and
 * *off (the first fit: the tail), 0 (no entry has room), or HINT_SCAN. */
static int leaf_hint_probe(const struct uext4_fs *fs, const struct dir_leaf *lf,
			   const char *name, size_t len, unsigned need, unsigned *off)
{
	const struct leaf_hint *hi = &lf->b->hint;
	struct dir_ent e;

	if (hint_may_hold(hi, name, len))
		return HINT_SCAN;
	if (hi->slack_before >= need)
		return HINT_SCAN;  /* an earlier entry may fit first */
	leaf_entry_fast(fs, lf, hi->tail, &e);
	/* The tail as a full check would see it: cheap, and a block that a
	 * hostile image also maps as something else cannot make the insert
	 * write past the leaf (handle_dirty() drops the hint, but a racing
	 * hinted insert may have set it again). */
	if (e.rec_len < DIRENT_MIN_LEN || e.rec_len % 4 || e.rec_len > lf->end - hi->tail ||
	    (e.ino && EXT4_DIR_REC_LEN(e.name_len) > e.rec_len))
		return HINT_SCAN;
	if (ent_slack(&e) < need)
		return 0;
	*off = hi->tail;
	return 1;
}

/* The full scan of a trusted leaf for a create, building its hint. */
static int leaf_scan_build_hint(struct uext4_fs *fs, const struct dir_leaf *lf,
				const char *name, size_t len, unsigned need, unsigned *off)
{
	struct leaf_hint *hi = &lf->b->hint;
	unsigned before = 0, last = 0, max_slack = 0;
	bool room = false;
	struct dir_ent e;

	memset(hi->bloom, 0, sizeof(hi->bloom));
	for (unsigned o = 0; o < lf->end; o += e.rec_len) {
		unsigned slack;

		leaf_entry_fast(fs, lf, o, &e);
		if (e.rec_len == 0)
			return 0; /* cannot happen in a trusted leaf; no hint */
		if (e.ino && e.name_len == len && e.name[len - 1] == name[len - 1] &&
		    memcmp(e.name, name, len) == 0)
			return -EEXIST;
		if (e.ino)
			hint_set_bits(hi, e.name, e.name_len);
		slack = ent_slack(&e);
		if (!room && slack >= need) {
			*off = o;
			room = true;
		}
		before = max_slack;
		max_slack = MAX(max_slack, slack);
		last = o;
	}
	hi->tail = last;
	hi->slack_before = before;
	atomic_fetch_or_explicit(&lf->b->state, BUF_LEAF_HINT, memory_order_relaxed);
	return room ? 1 : 0;
}

void dir_leaf_dirty(struct handle *h, struct inode *dir, struct buf *b)
{
	leaf_hint_drop(b);
	handle_dirty(h, b, CSUM_DIR_LEAF, dir->ino, dir->generation);
}

void dir_dx_dirty(struct handle *h, struct inode *dir, struct buf *b)
{
	leaf_hint_drop(b);
	handle_dirty(h, b, CSUM_DX_NODE, dir->ino, dir->generation);
}

void dir_leaf_insert(struct handle *h, struct inode *dir, struct buf *b, unsigned off,
		     uint64_t ino, const char *name, unsigned len, unsigned ftype)
{
	const struct ext4_dir_entry_2 *de = (const void *)(b->data + off);
	unsigned used = le32(de->inode) ? EXT4_DIR_REC_LEN(de->name_len) : 0;
	bool hinted = leaf_hint_valid(b);

	dir_leaf_put(h->fs, b->data, off, ino, name, len, ftype);
	dir_leaf_dirty(h, dir, b);
	if (!hinted)
		return;
	/* At the tail the new entry becomes the tail and the old one has no
	 * slack left; before it, both slacks are under the bound. */
	if (off == b->hint.tail)
		b->hint.tail = off + used;
	hint_set_bits(&b->hint, name, len);
	atomic_fetch_or_explicit(&b->state, BUF_LEAF_HINT, memory_order_relaxed);
}

int dir_leaf_find_room(struct uext4_fs *fs, struct inode *dir, const struct dir_leaf *lf,
		       unsigned need, unsigned *off)
{
	return dir_leaf_find_name_or_room(fs, dir, lf, NULL, 0, need, off);
}

/*
 * One pass over a leaf for a create: -EEXIST if name is there, else 1 with
 * *off where an entry of `need` bytes fits, or 0 if none does.  Saves the
 * second scan that a lookup followed by an insert would make.  With name
 * NULL it only looks for room and stops at the first fit.
 */
int dir_leaf_find_name_or_room(struct uext4_fs *fs, struct inode *dir,
			       const struct dir_leaf *lf, const char *name, size_t len,
			       unsigned need, unsigned *off)
{
	struct dir_ent e;
	bool trusted = leaf_trusted(lf), room = false;

	/* The hint's filter holds names' bytes: of no use where other bytes
	 * may match (casefolded directories scan). */
	if (name && trusted && !dir_casefolded(fs, dir)) {
		if (leaf_hint_valid(lf->b)) {
			int r = leaf_hint_probe(fs, lf, name, len, need, off);

			if (r != HINT_SCAN)
				return r;
		} else {
			leaf_prefetch(lf);
			return leaf_scan_build_hint(fs, lf, name, len, need, off);
		}
	}
	leaf_prefetch(lf);
	for (unsigned o = 0; o < lf->end; o += e.rec_len) {
		unsigned used;

		if (trusted) {
			leaf_entry_fast(fs, lf, o, &e);
			if (e.rec_len == 0)
				break;
		} else {
			int err = dir_leaf_entry(fs, dir, lf, o, &e);

			if (err)
				return err;
		}
		/* Last bytes first: names of a stream differ there. */
		if (name && e.ino && ((e.name_len == len && e.name[len - 1] == name[len - 1] &&
					memcmp(e.name, name, len) == 0) ||
				       (dir_casefolded(fs, dir) &&
					dir_name_match_folded(name, len, e.name, e.name_len))))
			return -EEXIST;
		used = e.ino ? EXT4_DIR_REC_LEN(e.name_len) : 0;
		if (!room && e.rec_len - used >= need) {
			*off = o;
			room = true;
			if (!name)
				return 1;
		}
	}
	if (!trusted)
		leaf_set_trusted(lf);
	return room ? 1 : 0;
}

void dir_leaf_put(const struct uext4_fs *fs, uint8_t *data, unsigned off, uint64_t ino,
		  const char *name, unsigned len, unsigned ftype)
{
	struct ext4_dir_entry_2 *de = (struct ext4_dir_entry_2 *)(data + off);
	unsigned rec = dir_rec_len(fs, de->rec_len);

	if (le32(de->inode)) {
		unsigned used = EXT4_DIR_REC_LEN(de->name_len);

		de->rec_len = cpu_to_le16((uint16_t)dir_rec_len_disk(fs, used));
		off += used;
		rec -= used;
	}
	dirent_put(fs, data + off, ino, rec, name, len, ftype);
}

int dir_leaf_locate(struct uext4_fs *fs, struct inode *dir, const struct dir_leaf *lf,
		    const char *name, size_t len, unsigned *off, unsigned *prev)
{
	unsigned before = NO_PREV;
	struct dir_ent e;

	for (unsigned o = 0; o < lf->end; before = o, o += e.rec_len) {
		int err = dir_leaf_entry(fs, dir, lf, o, &e);

		if (err)
			return err;
		if (e.ino && dir_name_eq(fs, dir, &e, name, len)) {
			*off = o;
			*prev = before;
			return 1;
		}
	}
	return 0;
}

int dir_append_block(struct handle *h, struct inode *dir, uint64_t *lblk, struct buf **out)
{
	struct uext4_fs *fs = h->fs;
	uint64_t n = dir->size >> fs->log_block_size;
	struct block_map m;
	struct buf *b;
	int err;

	if (dir->size & (fs->block_size - 1))
		return fs_corrupt("directory inode %lu: size %lu is not a multiple of the "
				  "block size", (unsigned long)dir->ino, (unsigned long)dir->size);
	if (n >= UINT32_MAX)
		return fs_err(ENOSPC, "directory inode %lu is too large", (unsigned long)dir->ino);
	err = inode_map_blocks(h, dir, n, 1, MAP_CREATE, &m);
	if (err)
		return err;
	if (m.pblk == 0 || m.pblk >= fs->blocks_count)
		return fs_err(EIO, "directory inode %lu: block %lu mapped to %lu",
			      (unsigned long)dir->ino, (unsigned long)n, (unsigned long)m.pblk);
	if ((err = bget_new(fs->bc, m.pblk, &b)))
		goto unmap;
	if ((err = handle_create_access(h, b))) {
		brelse(fs->bc, b);
		goto unmap;
	}
	dir->size = (n + 1) << fs->log_block_size;
	if ((err = inode_write(h, dir))) {
		brelse(fs->bc, b);
		dir->size = n << fs->log_block_size;
		goto unmap;
	}
	*lblk = n;
	*out = b;
	return 0;
unmap:
	/* No block past i_size that nobody filled in: a failed operation
	 * leaves the directory as it was. */
	inode_truncate_blocks(h, dir, n);
	return err;
}

