/*
 * inline.c - reading the data of inline-data inodes (EXT4_INLINE_DATA_FL).
 *
 * Format (Documentation/filesystems/ext4/inlinedata.rst): the first 60
 * bytes of the data live in i_block; the rest is the value of the
 * in-inode extended attribute "system.data" (index 7, name "data").  The
 * inline data is therefore 60 + len(system.data) bytes; bytes of the file
 * between that and i_size read as zeros, as the kernel's
 * ext4_read_inline_folio() does (file_pread() does that part).
 *
 * An inline-data inode without system.data is treated as having only the
 * 60 bytes of i_block (the kernel warns and reads nothing; being lenient
 * here loses nothing on a valid image).
 *
 * system.data is looked up in the inode body only, as the kernel does
 * (ext4_xattr_ibody_find); one that names an EA inode is corruption.
 *
 * Locking: these functions take no lock and read no other inode
 * (xattr_get_ibody()); the caller holds inode->lock (readers shared, the
 * write side below exclusive), which keeps i_block and the inode body
 * stable while they are read.
 */
#include "data.h"
#include "error.h"
#include "file.h"
#include "inode.h"
#include "internal.h"
#include "ondisk.h"
#include "xattr.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define INLINE_XATTR_NAME "data"
#define INLINE_XATTR_NAMELEN 4
/* Values up to this size are fetched into a stack buffer (no malloc). */
#define INLINE_STACK_BUF 512

/* Length of the system.data value, 0 if the inode has none. */
static ssize_t inline_xattr_len(struct uext4_fs *fs, struct inode *inode)
{
	ssize_t n = xattr_get_ibody(fs, inode, EXT4_XATTR_INDEX_SYSTEM, INLINE_XATTR_NAME,
				  INLINE_XATTR_NAMELEN, NULL, 0);

	if (n == -ENODATA)
		return 0;
	return n;
}

int inline_size(struct uext4_fs *fs, struct inode *inode, size_t *size)
{
	ssize_t n = inline_xattr_len(fs, inode);

	if (n < 0)
		return (int)n;
	*size = EXT4_MIN_INLINE_DATA_SIZE + (size_t)n;
	return 0;
}

/* Copy [off, off+size) of the system.data value into buf; bytes copied. */
static ssize_t copy_from_xattr(struct uext4_fs *fs, struct inode *inode, uint8_t *buf,
			       size_t size, uint64_t off)
{
	uint8_t stack[INLINE_STACK_BUF];
	uint8_t *val = stack;
	ssize_t n;

	n = xattr_get_ibody(fs, inode, EXT4_XATTR_INDEX_SYSTEM, INLINE_XATTR_NAME,
			  INLINE_XATTR_NAMELEN, stack, sizeof(stack));
	if (n == -ERANGE) {
		/* Larger than the stack buffer (inodes > 512 bytes): ask its size. */
		ssize_t need = inline_xattr_len(fs, inode);

		if (need < 0)
			return need;
		val = malloc(need ? (size_t)need : 1);
		if (!val)
			return fs_err(ENOMEM, "inline data of inode %lu: out of memory",
				      (unsigned long)inode->ino);
		n = xattr_get_ibody(fs, inode, EXT4_XATTR_INDEX_SYSTEM, INLINE_XATTR_NAME,
				  INLINE_XATTR_NAMELEN, val, (size_t)need);
	}
	if (n == -ENODATA)
		n = 0;
	if (n >= 0) {
		if (off >= (uint64_t)n) {
			n = 0;
		} else {
			size_t len = MIN(size, (size_t)((uint64_t)n - off));

			memcpy(buf, val + off, len);
			n = (ssize_t)len;
		}
	}
	if (val != stack)
		free(val);
	return n;
}

ssize_t inline_pread(struct uext4_fs *fs, struct inode *inode, void *buf, size_t size,
		     uint64_t off)
{
	const uint8_t *iblock = (const uint8_t *)inode_raw(inode)->i_block;
	uint8_t *out = buf;
	size_t done = 0;
	ssize_t n;

	if (off < EXT4_MIN_INLINE_DATA_SIZE) {
		done = MIN(size, (size_t)(EXT4_MIN_INLINE_DATA_SIZE - off));
		memcpy(out, iblock + off, done);
	}
	if (done == size)
		return (ssize_t)done;
	n = copy_from_xattr(fs, inode, out + done, size - done,
			    off + done - EXT4_MIN_INLINE_DATA_SIZE);
	if (n < 0)
		return n;
	return (ssize_t)(done + (size_t)n);
}

/* ================================================================ write side
 *
 * Called with inode->lock held for writing and a handle.  That lock is
 * what makes the moves below atomic for every other user of the file: a
 * conversion from inline data to blocks (inline_convert()) and the start
 * of inline data in a new file (inline_begin()) happen under it, as the
 * kernel does them under i_rwsem and the inode's xattr_sem; readers of
 * the data (file_pread(), readlink, readdir) hold the same lock shared, so
 * they see the bytes inline or in blocks, never half moved.
 *
 * As the kernel (fs/ext4/inline.c): a new regular file on an inline_data
 * file system may take inline data (INODE_MAY_INLINE) but starts as an
 * empty extent file; its first write that ends within the inline
 * capacity (60 bytes of i_block + the room system.data could take in
 * the inode body, ext4_get_max_inline_size()) makes it inline: an empty
 * system.data entry, INLINE_DATA_FL, EXTENTS_FL cleared.  The value of
 * system.data is always the file's bytes past the 60 of i_block, i.e.
 * i_size - 60.  A write that would end past the capacity moves the data
 * to blocks for good: a file never goes back inline, not even when
 * truncated (the kernel does not either).
 */

int inline_capacity(struct uext4_fs *fs, struct inode *inode, size_t *cap)
{
	ssize_t room = 0;

	if (inode->extra_isize)
		room = xattr_ibody_room(fs, inode, EXT4_XATTR_INDEX_SYSTEM, INLINE_XATTR_NAME,
					INLINE_XATTR_NAMELEN);
	if (room < 0)
		return (int)room;
	*cap = room ? EXT4_MIN_INLINE_DATA_SIZE + (size_t)room : 0;
	return 0;
}

static void no_longer_may_inline(struct inode *inode)
{
	atomic_fetch_and_explicit(&inode->istate, ~(uint32_t)INODE_MAY_INLINE,
				  memory_order_relaxed);
}

/* Nothing is mapped in i_block yet (no extent, no block pointer): a file
 * that may still go inline.  Anything else (fallocate, a write that went
 * to blocks) ends that chance. */
static bool nothing_mapped(const struct inode *inode)
{
	const struct ext4_inode *raw = inode_raw(inode);

	if (inode->flags & EXT4_EXTENTS_FL)
		return ((const struct ext4_extent_header *)raw->i_block)->eh_entries == 0;
	for (size_t i = 0; i < EXT4_N_BLOCKS; i++)
		if (raw->i_block[i])
			return false;
	return true;
}

int inline_begin(struct handle *h, struct inode *inode)
{
	int err = xattr_set_raw(h, inode, EXT4_XATTR_INDEX_SYSTEM, INLINE_XATTR_NAME,
				INLINE_XATTR_NAMELEN, "", 0, 0);

	if (err)
		return err;
	memset(inode_raw_mut(inode)->i_block, 0, EXT4_MIN_INLINE_DATA_SIZE);
	inode->flags &= ~EXT4_EXTENTS_FL;
	inode->flags |= EXT4_INLINE_DATA_FL;
	no_longer_may_inline(inode);
	return 0;
}

/* The inline bytes [0, end) after writing buf at off: i_block, and the
 * system.data value (end - 60 bytes) when the write reaches it or its
 * length changes.  end covers the old size too. */
static int store_inline(struct handle *h, struct inode *inode, const void *buf, size_t size,
			uint64_t off, size_t end)
{
	uint8_t *iblock = (uint8_t *)inode_raw_mut(inode)->i_block;
	ssize_t xold = inline_xattr_len(h->fs, inode), n;
	size_t xnew, total;
	uint8_t *data;
	int err = 0;

	if (xold < 0)
		return (int)xold;
	xnew = MAX(end > EXT4_MIN_INLINE_DATA_SIZE ? end - EXT4_MIN_INLINE_DATA_SIZE : 0,
		   (size_t)xold);
	total = EXT4_MIN_INLINE_DATA_SIZE + xnew;
	if (!(data = calloc(1, total)))
		return fs_err(ENOMEM, "inline data of inode %lu: out of memory",
			      (unsigned long)inode->ino);
	/* The old bytes up to i_size (past it, i_block is kept zero). */
	n = inline_pread(h->fs, inode, data, (size_t)MIN(inode->size, (uint64_t)total), 0);
	if (n < 0) {
		free(data);
		return (int)n;
	}
	memcpy(data + off, buf, size);
	if (off + size > EXT4_MIN_INLINE_DATA_SIZE || xnew != (size_t)xold)
		err = xattr_set_raw(h, inode, EXT4_XATTR_INDEX_SYSTEM, INLINE_XATTR_NAME,
				    INLINE_XATTR_NAMELEN, data + EXT4_MIN_INLINE_DATA_SIZE, xnew, 0);
	if (!err) {
		memcpy(iblock, data, EXT4_MIN_INLINE_DATA_SIZE);
		inode->size = end;
	}
	free(data);
	return err;
}

int inline_try_write(struct handle *h, struct inode *inode, const void *buf, size_t size,
		     uint64_t off)
{
	uint64_t end = MAX(inode->size, off + size);
	size_t cap = 0;
	int err;

	if (!(inode->flags & EXT4_INLINE_DATA_FL) && !nothing_mapped(inode)) {
		no_longer_may_inline(inode);
		return 0;
	}
	if ((err = inline_capacity(h->fs, inode, &cap)))
		return err;
	if (end > cap)
		return 0;
	if (!(inode->flags & EXT4_INLINE_DATA_FL) && (err = inline_begin(h, inode)))
		return err;
	if ((err = store_inline(h, inode, buf, size, off, (size_t)end)))
		return err;
	return 1;
}

int inline_convert(struct handle *h, struct inode *inode)
{
	struct uext4_fs *fs = h->fs;
	size_t cap = 0, len;
	uint64_t size = inode->size;
	uint8_t *data;
	ssize_t n;
	int err;

	no_longer_may_inline(inode);
	if (!(inode->flags & EXT4_INLINE_DATA_FL))
		return 0;
	if ((err = inline_size(fs, inode, &cap)))
		return err;
	len = (size_t)MIN((uint64_t)cap, size);
	data = malloc(len ? len : 1);
	if (!data)
		return fs_err(ENOMEM, "inline data of inode %lu: out of memory",
			      (unsigned long)inode->ino);
	n = inline_pread(fs, inode, data, len, 0);
	if (n < 0) {
		free(data);
		return (int)n;
	}
	len = (size_t)n;
	err = xattr_set_raw(h, inode, EXT4_XATTR_INDEX_SYSTEM, INLINE_XATTR_NAME,
			    INLINE_XATTR_NAMELEN, NULL, 0, 0);
	if (err == -ENODATA)
		err = 0;
	if (err) {
		free(data);
		return err;
	}
	inode->flags &= ~EXT4_INLINE_DATA_FL;
	if (FS_HAS_INCOMPAT(fs, EXTENTS)) {
		inode->flags |= EXT4_EXTENTS_FL;
		extent_init_root(inode);
	} else {
		memset(inode_raw_mut(inode)->i_block, 0, sizeof(inode_raw_mut(inode)->i_block));
	}
	/* i_size stays; the data goes back as blocks (a hole after it). */
	err = file_write_locked(h, inode, data, len, 0);
	free(data);
	if (!err)
		err = inode_write(h, inode);
	return err;
}

int inline_set_size(struct handle *h, struct inode *inode, uint64_t size)
{
	uint8_t *iblock = (uint8_t *)inode_raw_mut(inode)->i_block;
	ssize_t xlen;
	int err = 0;

	if (size >= inode->size) {
		inode->size = size;
		return 0;
	}
	/* Shrinking: what lies past the new end must read as zeros later. */
	if (size < EXT4_MIN_INLINE_DATA_SIZE)
		memset(iblock + size, 0, EXT4_MIN_INLINE_DATA_SIZE - size);
	xlen = inline_xattr_len(h->fs, inode);
	if (xlen < 0)
		return (int)xlen;
	if (xlen > 0 && size < EXT4_MIN_INLINE_DATA_SIZE + (uint64_t)xlen) {
		size_t keep = size > EXT4_MIN_INLINE_DATA_SIZE
				      ? (size_t)(size - EXT4_MIN_INLINE_DATA_SIZE) : 0;
		uint8_t *val = malloc((size_t)xlen);
		ssize_t n;

		if (!val)
			return fs_err(ENOMEM, "inline data of inode %lu: out of memory",
				      (unsigned long)inode->ino);
		n = xattr_get_ibody(h->fs, inode, EXT4_XATTR_INDEX_SYSTEM, INLINE_XATTR_NAME,
				  INLINE_XATTR_NAMELEN, val, (size_t)xlen);
		if (n < 0)
			err = (int)n;
		else
			err = xattr_set_raw(h, inode, EXT4_XATTR_INDEX_SYSTEM, INLINE_XATTR_NAME,
					    INLINE_XATTR_NAMELEN, val, MIN(keep, (size_t)n), 0);
		free(val);
	}
	if (!err)
		inode->size = size;
	return err;
}
