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
 */
#include "internal.h"

#include <limits.h>
#include <string.h>

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
	if (inode->flags & EXT4_INLINE_DATA_FL) {
		/* Unlocked: system.data could name an EA inode (see inline.c). */
		urw_unlock(&inode->lock);
		return read_inline(fs, inode, buf, size, off);
	}
	ret = read_mapped(fs, inode, buf, size, off);
	urw_unlock(&inode->lock);
	return ret;
}
