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
 * Locking: these functions take no lock, and xattr_get_raw() takes none
 * on this inode either; the raw inode is stable while the file system is
 * read-only.  Call them WITHOUT inode->lock held: on a corrupt image
 * system.data may point to an EA inode, whose read takes an inode lock of
 * the same rank.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

#define INLINE_XATTR_NAME "data"
#define INLINE_XATTR_NAMELEN 4
/* Values up to this size are fetched into a stack buffer (no malloc). */
#define INLINE_STACK_BUF 512

/* Length of the system.data value, 0 if the inode has none. */
static ssize_t inline_xattr_len(struct uext4_fs *fs, struct inode *inode)
{
	ssize_t n = xattr_get_raw(fs, inode, EXT4_XATTR_INDEX_SYSTEM, INLINE_XATTR_NAME,
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

	n = xattr_get_raw(fs, inode, EXT4_XATTR_INDEX_SYSTEM, INLINE_XATTR_NAME,
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
		n = xattr_get_raw(fs, inode, EXT4_XATTR_INDEX_SYSTEM, INLINE_XATTR_NAME,
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
