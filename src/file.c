/*
 * file.c - mapping an inode's logical blocks and reading file data.
 *
 * inode_map() dispatches on the inode's flags to the extent tree
 * (extents.c) or the ext2/ext3 block map (indirect.c); inline-data inodes
 * have no blocks and are read with inline_pread() (inline.c).
 *
 * file_pread() is the hot path of reads.  File data does not go through
 * the buffer cache (it would evict the metadata that makes lookups
 * cheap): each physically contiguous run is read straight from the device
 * with a single bdev_read(), so a 1 MiB read of a contiguous file is one
 * pread.  Holes and unwritten extents read as zeros.  Nothing is
 * allocated per call.
 *
 * The write side (inode_map_blocks, file_pwrite, file_set_size,
 * file_fallocate) is at the end of the file.
 */
#include "balloc.h"
#include "bcache.h"
#include "blockdev.h"
#include "data.h"
#include "error.h"
#include "file.h"
#include "flags.h"
#include "inode.h"
#include "internal.h"
#include "lock.h"
#include "ondisk.h"
#include "trans.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static inline unsigned block_shift(const struct uext4_fs *fs)
{
	return (unsigned)__builtin_ctz(fs->block_size);
}

int inode_map(struct uext4_fs *fs, struct inode *inode, uint64_t lblk, uint64_t max_len,
	      struct block_map *m)
{
	if (inode->flags & EXT4_INLINE_DATA_FL)
		return fs_err(EINVAL, "inode %lu has inline data, no block map",
			      (unsigned long)inode->ino);
	if (inode->flags & EXT4_EXTENTS_FL)
		return extent_map(fs, inode, lblk, max_len, m);
	return indirect_map(fs, inode, lblk, max_len, m);
}

/* A block map is walked by indirect.c, which checks each indirect block
 * on the way; an extent tree one mapping per extent or hole, as
 * extent_map() checks each node it reads. */
int file_check_map_from(struct uext4_fs *fs, struct inode *inode, uint64_t lblk)
{
	struct block_map m;
	int err;

	if (!(inode->flags & EXT4_EXTENTS_FL))
		return indirect_check_from(fs, inode, lblk);
	while (lblk < (1ull << 32)) {
		if ((err = inode_map(fs, inode, lblk, UINT32_MAX, &m)))
			return err;
		if (m.pblk && m.len && (err = balloc_check_allocated(fs, m.pblk, m.len)))
			return err;
		lblk += m.len ? m.len : 1;
	}
	return 0;
}

int inode_bread(struct uext4_fs *fs, struct inode *inode, uint64_t lblk,
		enum uext4_meta_kind kind, struct buf **out)
{
	struct block_map m;
	int err = inode_map(fs, inode, lblk, 1, &m);

	if (err)
		return err;
	/* Unwritten blocks hold no data either: callers treat both as holes. */
	if (m.pblk == 0 || m.unwritten)
		return -ENODATA;
	return bread(fs->bc, m.pblk, kind, out);
}

/* Inline data, then zeros up to the (already clamped) size, as the kernel. */
static ssize_t read_inline(struct uext4_fs *fs, struct inode *inode, uint8_t *buf,
			   size_t size, uint64_t off)
{
	ssize_t n = inline_pread(fs, inode, buf, size, off);

	if (n < 0)
		return n;
	memset(buf + n, 0, size - (size_t)n);
	return (ssize_t)size;
}

/*
 * Read [off, off+size) of a block-mapped or extent-mapped file, all of it
 * inside i_size.  Called with inode->lock held for reading.
 */
static ssize_t read_mapped(struct uext4_fs *fs, struct inode *inode, uint8_t *buf,
			   size_t size, uint64_t off)
{
	unsigned shift = block_shift(fs);
	uint64_t bmask = fs->block_size - 1;
	size_t done = 0;

	while (done < size) {
		uint64_t pos = off + done;
		uint64_t boff = pos & bmask;
		size_t want = size - done;
		uint64_t nblk = (boff + want + bmask) >> shift;
		struct block_map m;
		size_t run;
		int err;

		/*
		 * Errors are returned even after a partial read: FUSE would
		 * take a short read for end of file and hide the corruption.
		 */
		err = inode_map(fs, inode, pos >> shift, nblk, &m);
		if (err)
			return err;
		if (m.len == 0 || m.len > nblk)
			m.len = MIN(MAX(m.len, 1), nblk);  /* never trust a mapper to loop us */
		run = (size_t)MIN((m.len << shift) - boff, (uint64_t)want);
		if (m.pblk == 0 || m.unwritten) {
			memset(buf + done, 0, run);
		} else {
			err = bdev_read(fs->dev, buf + done, run, (m.pblk << shift) + boff);
			if (err < 0)
				return err;
			bcache_count_read(fs->bc, UEXT4_META_DATA, (boff + run + bmask) >> shift);
		}
		done += run;
	}
	return (ssize_t)done;
}

ssize_t file_read_raw(struct uext4_fs *fs, struct inode *inode, void *buf, size_t size,
		      uint64_t off)
{
	if (inode->flags & EXT4_INLINE_DATA_FL)
		return fs_err(EINVAL, "inode %lu has inline data, nothing past its end",
			      (unsigned long)inode->ino);
	if (off > UINT64_MAX - size)
		return fs_err(EINVAL, "inode %lu: read range overflows", (unsigned long)inode->ino);
	return read_mapped(fs, inode, buf, size, off);
}

ssize_t file_pread(struct uext4_fs *fs, struct inode *inode, void *buf, size_t size, uint64_t off)
{
	uint64_t isize;
	ssize_t ret;

	if (size > SSIZE_MAX)
		size = SSIZE_MAX;
	urw_rdlock(&inode->lock);
	isize = inode->size;
	if (off >= isize || size == 0) {
		urw_unlock(&inode->lock);
		return 0;
	}
	if (size > isize - off)
		size = (size_t)(isize - off);
	/* Inline data too under the lock: a writer may be moving it to blocks. */
	if (inode->flags & EXT4_INLINE_DATA_FL)
		ret = read_inline(fs, inode, buf, size, off);
	else
		ret = read_mapped(fs, inode, buf, size, off);
	urw_unlock(&inode->lock);
	return ret;
}

/*
 * SEEK_DATA / SEEK_HOLE, as the kernel's ext4 answers them for a file with
 * no cached pages (iomap_seek_data/hole over ext4's report mapping): mapped
 * blocks are data; holes and unwritten extents are holes (the FUSE kernel
 * writes dirty pages back before it asks, and written-back pages are no
 * longer unwritten); inline data is data up to i_size; the end of the file
 * is a hole.  An offset at or past i_size is ENXIO.  Results are offsets,
 * clamped to [off, i_size].
 */
static bool map_is_data(const struct block_map *m)
{
	return m->pblk != 0 && !m->unwritten;
}

static int64_t seek_mapped(struct uext4_fs *fs, struct inode *inode, uint64_t off,
			   uint64_t isize, bool want_data)
{
	unsigned shift = block_shift(fs);
	uint64_t lblk = off >> shift;
	uint64_t end = (isize + fs->block_size - 1) >> shift;   /* blocks inside i_size */

	while (lblk < end) {
		struct block_map m;
		int err = inode_map(fs, inode, lblk, end - lblk, &m);

		if (err)
			return err;
		if (map_is_data(&m) == want_data)
			return (int64_t)MIN(MAX(lblk << shift, off), isize);
		m.len = MIN(MAX(m.len, 1), end - lblk);   /* never trust a mapper to loop us */
		lblk += m.len;
	}
	if (want_data)
		return fs_err(ENXIO, "inode %lu: no data at or after offset %llu",
			      (unsigned long)inode->ino, (unsigned long long)off);
	return (int64_t)isize;  /* the hole at the end of the file */
}

int64_t file_seek_data(struct uext4_fs *fs, struct inode *inode, uint64_t off, bool want_data)
{
	int64_t ret;

	urw_rdlock(&inode->lock);
	uint64_t isize = inode->size;

	if (off >= isize)
		ret = fs_err(ENXIO, "inode %lu: offset %llu is at or past the end (%llu)",
			     (unsigned long)inode->ino, (unsigned long long)off,
			     (unsigned long long)isize);
	else if (inode->flags & EXT4_INLINE_DATA_FL)
		ret = want_data ? (int64_t)off : (int64_t)isize;
	else
		ret = seek_mapped(fs, inode, off, isize, want_data);
	urw_unlock(&inode->lock);
	return ret;
}

/* ================================================================ write side
 *
 * inode_map_blocks() dispatches to extents.c / indirect.c.  file_pwrite()
 * is a whole operation: it takes inode->lock for writing, then works in
 * chunks, one handle each, so a commit never waits for a long write: a
 * chunk maps (allocating) one physically contiguous run and writes the
 * data for it straight to the device, one bdev_write() per run (plus one
 * per partial block at either end of a freshly allocated run, which must
 * be written whole: the bytes the write does not cover are zeros).
 *
 * Invariant kept by every path here: the bytes of a file's last block past
 * i_size are zeros on disk (fresh blocks are zero-filled, shrinking zeroes
 * the tail), so growing a file never exposes stale data.
 */

#ifndef FALLOC_FL_KEEP_SIZE
#define FALLOC_FL_KEEP_SIZE 0x01
#endif
#ifndef FALLOC_FL_PUNCH_HOLE
#define FALLOC_FL_PUNCH_HOLE 0x02
#endif
#ifndef FALLOC_FL_COLLAPSE_RANGE
#define FALLOC_FL_COLLAPSE_RANGE 0x08
#endif
#ifndef FALLOC_FL_ZERO_RANGE
#define FALLOC_FL_ZERO_RANGE 0x10
#endif
#ifndef FALLOC_FL_INSERT_RANGE
#define FALLOC_FL_INSERT_RANGE 0x20
#endif

/* Blocks mapped per chunk of a write: bounds the time a handle stays open. */
#define WRITE_CHUNK_BLOCKS 2048u
/* Fresh runs up to this size with partial edge blocks are assembled in a
 * zeroed buffer and written at once; larger ones write the edges apart. */
#define FRESH_BOUNCE_MAX (1u << 20)

int inode_map_blocks(struct handle *h, struct inode *inode, uint64_t lblk, uint64_t max_len,
		     unsigned flags, struct block_map *m)
{
	if (inode->flags & EXT4_INLINE_DATA_FL)
		return fs_err(EINVAL, "inode %lu has inline data, no block map",
			      (unsigned long)inode->ino);
	if (!(flags & MAP_CREATE)) {
		int err = inode_map(h->fs, inode, lblk, max_len, m);

		if (!err)
			m->fresh = false;
		return err;
	}
	if (inode->flags & EXT4_EXTENTS_FL)
		return extent_map_blocks(h, inode, lblk, max_len, flags, m);
	return indirect_map_blocks(h, inode, lblk, max_len, flags, m);
}

/*
 * Does i_block hold a block map or extent tree?  Not for inline data, nor
 * for device, fifo and socket inodes (a device number), nor for fast
 * symlinks (the target's text): freeing "blocks" read from those would
 * free random blocks.  A symlink is fast when it is short and owns no
 * block besides its xattr block (as ext4_inode_is_fast_symlink()).
 */
static bool has_block_map(const struct uext4_fs *fs, const struct inode *inode)
{
	if (inode->flags & EXT4_INLINE_DATA_FL)
		return false;
	if (S_ISLNK(inode->mode)) {
		uint64_t acl = inode->file_acl ? fs->block_size >> 9 : 0;

		/* With ea_inode, i_blocks also carries EA values' charge:
		 * the kernel goes by the size then (as symlink.c). */
		if (FS_HAS_INCOMPAT(fs, EA_INODE))
			return !(inode->size > 0 && inode->size < EXT4_N_BLOCKS * 4);

		return !(inode->size < EXT4_N_BLOCKS * 4 && inode->blocks <= acl);
	}
	return S_ISREG(inode->mode) || S_ISDIR(inode->mode);
}

/* Removing blocks may split an extent, which needs a tree block: it may
 * come from the root-reserved blocks, whoever the caller (a punch by a
 * user on a full file system frees space; the kernel's ext4 lets the
 * split use them too, EXT4_GET_BLOCKS_METADATA_NOFAIL). */
static int extent_remove_nofail(struct handle *h, struct inode *inode, uint64_t start,
				uint64_t end)
{
	bool was = h->use_reserved;
	int err;

	h->use_reserved = true;
	err = extent_remove_range(h, inode, start, end);
	h->use_reserved = was;
	return err;
}

int inode_truncate_blocks(struct handle *h, struct inode *inode, uint64_t first)
{
	int err;

	if (!has_block_map(h->fs, inode))
		return 0;
	balloc_release_prealloc(h->fs, inode);
	if (inode->flags & EXT4_EXTENTS_FL)
		err = extent_remove_nofail(h, inode, first, EXT_LBLK_LIMIT);
	else
		err = indirect_remove_range(h, inode, first, UINT64_MAX);
	return err;
}

int inode_punch_blocks(struct handle *h, struct inode *inode, uint64_t lblk, uint64_t len)
{
	uint64_t end = len > UINT64_MAX - lblk ? UINT64_MAX : lblk + len;

	if (!has_block_map(h->fs, inode))
		return 0;
	if (inode->flags & EXT4_EXTENTS_FL)
		return extent_remove_nofail(h, inode, lblk, MIN(end, EXT_LBLK_LIMIT));
	return indirect_remove_range(h, inode, lblk, end);
}

/*
 * Largest file size (as the kernel's s_maxbytes): extent files map 2^32 - 1
 * blocks; block maps what their pointers reach.  Without huge_file,
 * i_blocks (2^32 sectors) bounds both.
 */
uint64_t file_max_bytes(const struct uext4_fs *fs, const struct inode *inode)
{
	unsigned shift = block_shift(fs);
	uint64_t blocks;

	if (inode->flags & (EXT4_EXTENTS_FL | EXT4_INLINE_DATA_FL))
		blocks = EXT_LBLK_LIMIT - 1;
	else
		blocks = indirect_max_blocks(fs);
	if (!FS_HAS_RO_COMPAT(fs, HUGE_FILE))
		blocks = MIN(blocks, ((1ull << 32) - 1) >> (shift - 9));
	return blocks << shift;
}

/* Zeros, a block's worth, for zero-filling; allocated per call (rare path). */
static int write_zeros(struct uext4_fs *fs, uint64_t devoff, size_t len)
{
	uint8_t *z;
	int err = 0;

	if (len == 0)
		return 0;
	z = calloc(1, MIN(len, (size_t)fs->block_size * 16));
	if (!z)
		return fs_err(ENOMEM, "zero-fill: out of memory");
	while (len > 0 && !err) {
		size_t n = MIN(len, (size_t)fs->block_size * 16);

		err = bdev_write(fs->dev, z, n, devoff);
		devoff += n;
		len -= n;
	}
	free(z);
	return err < 0 ? err : 0;
}

/* Zeros for write_partial_noalloc(): read only, one largest block. */
static const uint8_t g_zero_block[EXT4_MAX_BLOCK_SIZE];

/* n bytes at byte in of fresh block pblk, zeros around them, without a
 * bounce buffer: for when malloc fails, so that an allocated block is never
 * left holding stale bytes (or the write failing after the blocks were
 * mapped, which leaves them past i_size). */
static int write_partial_noalloc(struct uext4_fs *fs, uint64_t pblk, size_t in,
				 const uint8_t *data, size_t n)
{
	uint64_t at = pblk << block_shift(fs);
	size_t tail = fs->block_size - in - n;
	int err = 0;

	if (in)
		err = bdev_write(fs->dev, g_zero_block, in, at);
	if (err >= 0)
		err = bdev_write(fs->dev, data, n, at + in);
	if (err >= 0 && tail)
		err = bdev_write(fs->dev, g_zero_block, tail, at + in + n);
	return err < 0 ? err : 0;
}

/*
 * Write len bytes at byte boff of a freshly allocated run starting at
 * block pblk: the blocks are written whole, zeros around the data.  Out of
 * memory is not an error here (see write_partial_noalloc()).
 */
static int write_fresh(struct uext4_fs *fs, uint64_t pblk, uint64_t boff, const uint8_t *buf,
		       size_t len)
{
	unsigned shift = block_shift(fs);
	size_t bs = fs->block_size, pos = 0;
	size_t span = (size_t)((boff + len + bs - 1) / bs * bs);
	uint8_t *tmp = NULL;
	int err = 0;

	if ((boff || len % bs) && span <= FRESH_BOUNCE_MAX) {
		/* Small enough to assemble: one device write for the run. */
		if ((tmp = calloc(1, span))) {
			memcpy(tmp + boff, buf, len);
			err = bdev_write(fs->dev, tmp, span, pblk << shift);
			free(tmp);
			return err < 0 ? err : 0;
		}
	}
	while (pos < len && !err) {
		size_t in = pos == 0 ? (size_t)boff : 0;
		size_t n = MIN(bs - in, len - pos);

		if (in == 0 && n == bs) {
			size_t whole = (len - pos) / bs * bs;

			err = bdev_write(fs->dev, buf + pos, whole, pblk << shift);
			pos += whole;
			pblk += whole / bs;
			continue;
		}
		if (!tmp && !(tmp = malloc(bs))) {
			err = write_partial_noalloc(fs, pblk, in, buf + pos, n);
			pos += n;
			pblk++;
			continue;
		}
		memset(tmp, 0, bs);
		memcpy(tmp + in, buf + pos, n);
		err = bdev_write(fs->dev, tmp, bs, pblk << shift);
		pos += n;
		pblk++;
	}
	free(tmp);
	return err < 0 ? err : 0;
}

/*
 * The data write into blocks this run had just allocated failed (EIO, a
 * full backing file): give the blocks back, so that the file is as before
 * the write.  Kept, they would hold garbage inside i_size (a filled hole)
 * or lie past it with i_size not covering them, which e2fsck reports; the
 * kernel likewise frees what a failed write allocated
 * (ext4_truncate_failed_write).  Returns err, or the unmap's own error.
 */
static int unmap_failed_fresh(struct handle *h, struct inode *inode, uint64_t lblk,
			      uint64_t len, int err)
{
	int uerr = inode_punch_blocks(h, inode, lblk, len);

	return uerr ? uerr : err;
}

/*
 * One run of a write: map (allocating) the blocks under [off, off+size),
 * as many as are physically contiguous, and write them.  *done = bytes
 * written.  Updates i_size but not the times.
 */
static int write_run(struct handle *h, struct inode *inode, const uint8_t *buf, size_t size,
		     uint64_t off, size_t *done)
{
	struct uext4_fs *fs = h->fs;
	unsigned shift = block_shift(fs);
	uint64_t bmask = fs->block_size - 1, boff = off & bmask;
	uint64_t nblk = MIN((boff + size + bmask) >> shift, (uint64_t)WRITE_CHUNK_BLOCKS);
	struct block_map m;
	size_t run;
	int err;

	err = inode_map_blocks(h, inode, off >> shift, nblk, MAP_CREATE | MAP_CONVERT, &m);
	if (err)
		return err;
	if (m.pblk == 0 || m.unwritten || m.len == 0)
		return fs_err(EIO, "write to inode %lu: block %llu not mapped after allocation",
			      (unsigned long)inode->ino, (unsigned long long)(off >> shift));
	m.len = MIN(m.len, nblk);
	run = (size_t)MIN((m.len << shift) - boff, (uint64_t)size);
	if (m.fresh)
		err = write_fresh(fs, m.pblk, boff, buf, run);
	else
		err = bdev_write(fs->dev, buf, run, (m.pblk << shift) + boff);
	if (err < 0)
		return m.fresh ? unmap_failed_fresh(h, inode, off >> shift, m.len, err) : err;
	bcache_count_write(fs->bc, UEXT4_META_DATA, (boff + run + bmask) >> shift);
	if (off + run > inode->size)
		inode->size = off + run;
	*done = run;
	return 0;
}

static void touch_mc(struct uext4_fs *fs, struct inode *inode)
{
	struct timespec now = fs_time(fs);

	inode->mtime = now;
	inode->ctime = now;
}

static int check_write_range(struct uext4_fs *fs, struct inode *inode, size_t *size,
			     uint64_t off)
{
	uint64_t max = file_max_bytes(fs, inode);

	if (off >= max)
		return fs_err(EFBIG, "write to inode %lu at %llu: past the largest file size "
			      "(%llu)", (unsigned long)inode->ino, (unsigned long long)off,
			      (unsigned long long)max);
	if (*size > max - off)
		*size = (size_t)(max - off);  /* a short write, as the kernel */
	return 0;
}

/* Inline data, or a new file that may become inline (INODE_MAY_INLINE). */
static bool writes_inline(const struct inode *inode)
{
	return (inode->flags & EXT4_INLINE_DATA_FL) ||
	       (atomic_load_explicit(&inode->istate, memory_order_relaxed) & INODE_MAY_INLINE);
}

/* Inline data: written in place while it fits the inode, else moved to
 * blocks (a file that was only allowed to become inline just loses that). */
static int write_inline(struct handle *h, struct inode *inode, const void *buf, size_t size,
			uint64_t off, bool *written)
{
	int r = inline_try_write(h, inode, buf, size, off);

	*written = r == 1;
	if (r != 0)
		return r < 0 ? r : 0;
	return inline_convert(h, inode);
}

int file_write_locked(struct handle *h, struct inode *inode, const void *buf, size_t size,
		      uint64_t off)
{
	struct uext4_fs *fs = h->fs;
	const uint8_t *p = buf;
	size_t done = 0;
	int err;

	if (size == 0)
		return 0;
	if ((err = check_write_range(fs, inode, &size, off)))
		return err;
	if (writes_inline(inode)) {
		bool written;

		if ((err = write_inline(h, inode, buf, size, off, &written)) || written)
			return err;
	}
	while (done < size) {
		size_t n = 0;

		if ((err = write_run(h, inode, p + done, size - done, off + done, &n)))
			break;
		done += n;
	}
	touch_mc(h->fs, inode);
	{
		int werr = inode_write(h, inode);

		return err ? err : werr;
	}
}

static int zero_mapped(struct uext4_fs *fs, struct inode *inode, uint64_t from, uint64_t to);

/*
 * A shrinking truncate leaves the bytes past the new i_size in its last
 * block as they are (seed 000's stress-orphan shrinks a file one byte at a
 * time: each would cost a device write, and every thread's pwrite to the
 * image takes the host file's one inode lock).  Reads stop at i_size, so
 * they are never seen; whatever makes the file longer zeroes them first.
 * Caller holds inode->lock for writing; new_size > inode->size.
 */
static int zero_eof_tail(struct uext4_fs *fs, struct inode *inode, uint64_t new_size)
{
	uint64_t bmask = fs->block_size - 1, from = inode->size;

	if (!(from & bmask) || new_size <= from || inode_has_inline_data(inode))
		return 0;
	return zero_mapped(fs, inode, from, MIN(new_size, (from | bmask) + 1));
}

/* Immutable files take no write (inode->lock held).  Append-only is
 * checked at open, as the kernel checks it (may_open: O_APPEND, no
 * O_TRUNC): a descriptor opened before chattr +a keeps writing where it
 * writes, and a page cache above the library (FUSE's writeback cache)
 * writes whole pages back, the tail page with bytes before the end. */
static int write_allowed(const struct inode *inode)
{
	if (inode->flags & EXT4_VERITY_FL)
		return flags_refuse_verity(inode, "write");
	if (inode->flags & EXT4_IMMUTABLE_FL)
		return flags_refuse(inode, "write");
	return 0;
}

ssize_t file_pwrite(struct uext4_fs *fs, struct inode *inode, const void *buf, size_t size,
		    uint64_t off)
{
	const uint8_t *p = buf;
	struct handle *h;
	size_t done = 0;
	int err = 0;
	bool sync;

	if (size > SSIZE_MAX)
		size = SSIZE_MAX;
	if (size == 0)
		return 0;
	urw_wrlock(&inode->lock);
	sync = (inode->flags & EXT4_SYNC_FL) != 0;      /* +S: as O_SYNC */
	if (off == FILE_APPEND)
		off = inode->size;
	if ((err = write_allowed(inode)) || (err = check_write_range(fs, inode, &size, off)))
		goto out;
	if (writes_inline(inode)) {
		bool written = false;

		if ((err = handle_begin(fs, &h)))
			goto out;
		err = write_inline(h, inode, buf, size, off, &written);
		if (!err && written) {
			touch_mc(fs, inode);
			err = inode_write(h, inode);
			done = size;
		}
		{
			int eerr = handle_end(h);

			err = err ? err : eerr;
		}
		if (err || written)
			goto out;
	}
	if (off > inode->size && (err = zero_eof_tail(fs, inode, off)))
		goto out;
	while (done < size) {
		size_t n = 0;
		int eerr;

		if ((err = handle_begin(fs, &h)))
			break;
		err = write_run(h, inode, p + done, size - done, off + done, &n);
		/* After a failed run too: its allocation and unmap changed
		 * the block map and i_blocks. */
		if (n)
			touch_mc(fs, inode);
		eerr = inode_write(h, inode);
		err = err ? err : eerr;
		eerr = handle_end(h);
		err = err ? err : eerr;
		if (err)
			break;
		done += n;
	}
out:
	urw_unlock(&inode->lock);
	if (done > 0) {
		err = flags_sync_commit(fs, inode, sync, 0);
		return err < 0 ? err : (ssize_t)done;  /* a short write reports what was written */
	}
	return err;
}

/* Zero [from, to) on disk where it is mapped to written blocks (no allocation). */
static int zero_mapped(struct uext4_fs *fs, struct inode *inode, uint64_t from, uint64_t to)
{
	unsigned shift = block_shift(fs);
	uint64_t bmask = fs->block_size - 1;

	while (from < to) {
		uint64_t boff = from & bmask;
		uint64_t nblk = (boff + (to - from) + bmask) >> shift;
		struct block_map m;
		uint64_t run;
		int err = inode_map(fs, inode, from >> shift, nblk, &m);

		if (err)
			return err;
		m.len = MIN(MAX(m.len, 1), nblk);
		run = MIN((m.len << shift) - boff, to - from);
		if (m.pblk && !m.unwritten && (err = write_zeros(fs, (m.pblk << shift) + boff,
								 (size_t)run)))
			return err;
		from += run;
	}
	return 0;
}

int file_set_size(struct handle *h, struct inode *inode, uint64_t size)
{
	struct uext4_fs *fs = h->fs;
	unsigned shift = block_shift(fs);
	uint64_t bmask = fs->block_size - 1;
	int err = 0;

	if (size == inode->size)
		return 0;
	if (size > file_max_bytes(fs, inode))
		return fs_err(EFBIG, "truncate inode %lu to %llu: past the largest file size",
			      (unsigned long)inode->ino, (unsigned long long)size);
	if (inode->flags & EXT4_INLINE_DATA_FL) {
		err = inline_set_size(h, inode, size);
	} else if (size < inode->size) {
		/* The tail past the new size is zeroed when the file grows again
		 * (zero_eof_tail()). */
		err = inode_truncate_blocks(h, inode, (size + bmask) >> shift);
		if (!err)
			inode->size = size;
	} else {
		err = zero_eof_tail(fs, inode, size);
		if (!err)
			inode->size = size;
	}
	if (!err)
		touch_mc(h->fs, inode);
	{
		int werr = inode_write(h, inode);

		return err ? err : werr;
	}
}

/* Allocate [first, end) blocks as unwritten where there are holes. */
static int alloc_unwritten(struct uext4_fs *fs, struct inode *inode, uint64_t first,
			   uint64_t end)
{
	while (first < end) {
		struct block_map m;
		struct handle *h;
		int err, eerr;

		if ((err = handle_begin(fs, &h)))
			return err;
		err = inode_map_blocks(h, inode, first, MIN(end - first, (uint64_t)WRITE_CHUNK_BLOCKS * 16),
				       MAP_CREATE | MAP_UNWRITTEN, &m);
		eerr = handle_end(h);
		if (err || eerr)
			return err ? err : eerr;
		first += MAX(m.len, 1);
	}
	return 0;
}

/* Update size (unless KEEP_SIZE) and times after a fallocate. */
static int falloc_finish(struct uext4_fs *fs, struct inode *inode, int mode, uint64_t end)
{
	struct handle *h;
	int err = handle_begin(fs, &h), eerr;

	if (err)
		return err;
	if (!(mode & FALLOC_FL_KEEP_SIZE) && end > inode->size) {
		err = zero_eof_tail(fs, inode, end);
		if (err) {
			handle_end(h);
			return err;
		}
		inode->size = end;
		touch_mc(fs, inode);
	} else {
		inode->ctime = fs_time(fs);
	}
	err = inode_write(h, inode);
	eerr = handle_end(h);
	return err ? err : eerr;
}

static int falloc_punch(struct uext4_fs *fs, struct inode *inode, uint64_t off, uint64_t end)
{
	unsigned shift = block_shift(fs);
	uint64_t bmask = fs->block_size - 1;
	uint64_t first_full = (off + bmask) >> shift, last_full = end >> shift;
	struct handle *h;
	int err, eerr;

	if (off >= inode->size)
		return 0;
	/* Nothing to punch past the block holding the end of the file. */
	if (end > inode->size)
		end = (inode->size + bmask) & ~bmask;
	last_full = end >> shift;
	if ((err = handle_begin(fs, &h)))
		return err;
	if (first_full < last_full)
		err = inode_punch_blocks(h, inode, first_full, last_full - first_full);
	/* Partial blocks at the edges are zeroed in place. */
	if (!err && first_full > last_full)
		err = zero_mapped(fs, inode, off, end);
	else if (!err) {
		err = zero_mapped(fs, inode, off, MIN(first_full << shift, end));
		if (!err && (last_full << shift) < end && (last_full << shift) >= off)
			err = zero_mapped(fs, inode, MAX(last_full << shift, off), end);
	}
	if (!err) {
		touch_mc(fs, inode);
		err = inode_write(h, inode);
	}
	eerr = handle_end(h);
	return err ? err : eerr;
}

/* Zero a partial block: in place if written, else make it unwritten. */
static int zero_partial(struct uext4_fs *fs, struct inode *inode, uint64_t from, uint64_t to)
{
	unsigned shift = block_shift(fs);
	struct block_map m;
	struct handle *h;
	int err, eerr;

	if (from >= to)
		return 0;
	if ((err = handle_begin(fs, &h)))
		return err;
	err = inode_map_blocks(h, inode, from >> shift, 1, MAP_CREATE | MAP_UNWRITTEN, &m);
	if (!err && !m.fresh && !m.unwritten)
		err = zero_mapped(fs, inode, from, to);
	eerr = handle_end(h);
	return err ? err : eerr;
}

static int falloc_zero_range(struct uext4_fs *fs, struct inode *inode, uint64_t off,
			     uint64_t end)
{
	unsigned shift = block_shift(fs);
	uint64_t bmask = fs->block_size - 1;
	uint64_t first_full = (off + bmask) >> shift, last_full = end >> shift;
	int err;

	if (first_full > last_full)
		return zero_partial(fs, inode, off, end);
	if ((err = zero_partial(fs, inode, off, first_full << shift)) ||
	    (err = zero_partial(fs, inode, last_full << shift, end)))
		return err;
	if (first_full < last_full) {
		struct handle *h;
		int eerr;

		if ((err = handle_begin(fs, &h)))
			return err;
		err = inode_punch_blocks(h, inode, first_full, last_full - first_full);
		eerr = handle_end(h);
		if (err || eerr)
			return err ? err : eerr;
		err = alloc_unwritten(fs, inode, first_full, last_full);
	}
	return err;
}

/* Inline files are moved to blocks first, as the kernel does. */
static int falloc_uninline(struct uext4_fs *fs, struct inode *inode)
{
	struct handle *h;
	int err, eerr;

	if (!(inode->flags & EXT4_INLINE_DATA_FL)) {
		/* Allocated blocks: no inline data for it any more. */
		atomic_fetch_and_explicit(&inode->istate, ~(uint32_t)INODE_MAY_INLINE,
					  memory_order_relaxed);
		return 0;
	}
	if ((err = handle_begin(fs, &h)))
		return err;
	err = inline_convert(h, inode);
	eerr = handle_end(h);
	return err ? err : eerr;
}

/*
 * COLLAPSE_RANGE / INSERT_RANGE (extent files, block-aligned ranges, as
 * the kernel): remove a range and close the gap, or open a hole, by
 * shifting the logical starts of the later extents; i_size follows.
 */
/* vfs_fallocate(): an append-only file may only allocate (mode 0 or
 * KEEP_SIZE), an immutable one nothing. */
static int falloc_allowed(struct inode *inode, int mode)
{
	int err = 0;

	urw_rdlock(&inode->lock);
	if (inode->flags & EXT4_VERITY_FL)
		err = flags_refuse_verity(inode, "fallocate");
	else if ((mode & ~FALLOC_FL_KEEP_SIZE) && (inode->flags & EXT4_APPEND_FL))
		err = flags_refuse(inode, "fallocate");
	else
		err = inode_refuse_if(inode, EXT4_IMMUTABLE_FL, "fallocate");
	urw_unlock(&inode->lock);
	return err;
}

static int falloc_shift(struct uext4_fs *fs, struct inode *inode, int mode, uint64_t off,
			uint64_t len)
{
	unsigned shift = block_shift(fs);
	uint64_t bmask = fs->block_size - 1;
	bool collapse = (mode & FALLOC_FL_COLLAPSE_RANGE) != 0;
	struct handle *h;
	int err, eerr;

	if (mode != FALLOC_FL_COLLAPSE_RANGE && mode != FALLOC_FL_INSERT_RANGE)
		return fs_err(EINVAL, "fallocate inode %lu: collapse/insert range take no other "
			      "flag", (unsigned long)inode->ino);
	if ((err = falloc_allowed(inode, mode)))
		return err;
	if ((off | len) & bmask)
		return fs_err(EINVAL, "fallocate inode %lu: collapse/insert range must be "
			      "block-aligned", (unsigned long)inode->ino);
	urw_wrlock(&inode->lock);
	if ((err = falloc_uninline(fs, inode)))
		goto out;
	if (!(inode->flags & EXT4_EXTENTS_FL)) {
		err = fs_err(EOPNOTSUPP, "fallocate inode %lu: collapse/insert range need an "
			     "extent-mapped file", (unsigned long)inode->ino);
		goto out;
	}
	if (collapse ? off + len >= inode->size : off >= inode->size) {
		err = fs_err(EINVAL, "fallocate inode %lu: %s range must end before the end "
			     "of the file", (unsigned long)inode->ino,
			     collapse ? "collapse" : "insert");
		goto out;
	}
	if (!collapse && len > file_max_bytes(fs, inode) - inode->size) {
		err = fs_err(EFBIG, "insert range of inode %lu: the file would pass the "
			     "largest size", (unsigned long)inode->ino);
		goto out;
	}
	if ((err = handle_begin(fs, &h)))
		goto out;
	balloc_release_prealloc(fs, inode);
	if (collapse)
		err = extent_collapse(h, inode, off >> shift, len >> shift);
	else
		err = extent_insert_gap(h, inode, off >> shift, len >> shift);
	if (!err) {
		inode->size = collapse ? inode->size - len : inode->size + len;
		touch_mc(fs, inode);
		err = inode_write(h, inode);
	}
	eerr = handle_end(h);
	err = err ? err : eerr;
out:
	urw_unlock(&inode->lock);
	return err;
}

int file_fallocate(struct uext4_fs *fs, struct inode *inode, int mode, uint64_t off,
		   uint64_t len)
{
	unsigned shift = block_shift(fs);
	uint64_t bmask = fs->block_size - 1, end;
	int err;

	if (len == 0 || off > UINT64_MAX - len)
		return fs_err(EINVAL, "fallocate inode %lu: bad range", (unsigned long)inode->ino);
	end = off + len;
	if (mode & (FALLOC_FL_COLLAPSE_RANGE | FALLOC_FL_INSERT_RANGE))
		return falloc_shift(fs, inode, mode, off, len);
	if (mode & ~(FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE))
		return fs_err(EOPNOTSUPP, "fallocate inode %lu: mode %#x not supported",
			      (unsigned long)inode->ino, (unsigned)mode);
	if ((mode & FALLOC_FL_PUNCH_HOLE) &&
	    (!(mode & FALLOC_FL_KEEP_SIZE) || (mode & FALLOC_FL_ZERO_RANGE)))
		return fs_err(EOPNOTSUPP, "fallocate inode %lu: punch hole needs KEEP_SIZE "
			      "alone", (unsigned long)inode->ino);
	if ((err = falloc_allowed(inode, mode)))  /* after the mode checks, as vfs_fallocate() */
		return err;
	urw_wrlock(&inode->lock);
	if (end > file_max_bytes(fs, inode)) {
		err = fs_err(EFBIG, "fallocate inode %lu: range past the largest file size",
			     (unsigned long)inode->ino);
		goto out;
	}
	if ((err = falloc_uninline(fs, inode)))
		goto out;
	if (mode & FALLOC_FL_PUNCH_HOLE) {
		err = falloc_punch(fs, inode, off, end);
		goto out;
	}
	if (!(inode->flags & EXT4_EXTENTS_FL)) {
		err = fs_err(EOPNOTSUPP, "fallocate inode %lu: block-mapped files have no "
			     "unwritten extents", (unsigned long)inode->ino);
		goto out;
	}
	if (mode & FALLOC_FL_ZERO_RANGE)
		err = falloc_zero_range(fs, inode, off, end);
	else
		err = alloc_unwritten(fs, inode, off >> shift, (end + bmask) >> shift);
	if (!err)
		err = falloc_finish(fs, inode, mode, end);
out:
	urw_unlock(&inode->lock);
	return err;
}
