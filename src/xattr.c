/*
 * xattr.c - extended attributes: lookup and listing, in the inode body and
 * in the external xattr block, values kept in EA inodes, and the POSIX ACL
 * translation between the ext4 on-disk format and the one getxattr(2) and
 * setxattr(2) use; and the write side: set, replace, remove, shared blocks.
 *
 * Format (Documentation/filesystems/ext4/attributes.rst):
 *   - in-inode: after the 128 + i_extra_isize bytes of the inode, a 4-byte
 *     header (magic 0xEA020000), then entries; value offsets are relative
 *     to the first entry; the region ends at the end of the on-disk inode.
 *   - block (i_file_acl): a 32-byte header (magic, h_blocks == 1, checksum),
 *     then entries; value offsets are relative to the start of the block.
 *   Entries are 16 bytes + name padded to 4; the list ends with 4 zero
 *   bytes.  A value lives inside the region, or, with INCOMPAT_EA_INODE,
 *   in the data of the inode e_value_inum.
 *
 * Every region is fully validated before any entry is used (entries
 * terminated inside the region, names without NUL, values inside the
 * region and after the entry list), so a corrupt image is reported and
 * never read out of bounds.  The structural check of a block is redone on
 * every use (it costs one walk of the entries) and is never skipped on the
 * strength of BUF_VERIFIED: that bit may have been set by another
 * subsystem reading the same block as another kind of metadata on a
 * corrupt image.  Only the checksum is verified once per buffer.
 *
 * Locking: xattr_get() and xattr_list() take inode->lock as a reader while
 * they read the inode body, i_file_acl and the xattr block (a writer of
 * the inode changes its unshared block in place or frees it, holding the
 * lock for writing).  A value in an EA inode is read after the lock is
 * dropped, under the EA inode's shard (ea_inode.c), which is taken before
 * the owner's lock goes.  Of a block's header they read only h_magic and
 * h_blocks: h_refcount of a shared block changes under b->lock when other
 * inodes start or stop sharing it, and the checksum is verified (once per
 * buffer) under b->lock.
 * xattr_get_raw() takes NO inode lock: inline.c calls it, and other
 * callers may already hold inode->lock as a reader, and taking the same
 * rwlock twice can deadlock behind a waiting writer (and lockdep would
 * abort on the rank).  Its callers make sure inode->raw is stable (they
 * hold the lock, or the file system is read-only).  An EA inode value is
 * read under its shard (RANK_EA_INODE ranks above inode locks and
 * handles), never with the EA inode's own lock.
 *
 * The write side (xattr_set, xattr_set_raw, xattr_release_inode) is
 * described where it starts, below ("write side").
 */
#include "balloc.h"
#include "bcache.h"
#include "csum.h"
#include "error.h"
#include "inode.h"
#include "internal.h"
#include "lock.h"
#include "ondisk.h"
#include "super.h"
#include "trans.h"
#include "xattr.h"

#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Largest value the kernel accepts (EXT4_XATTR_SIZE_MAX). */
#define XATTR_VALUE_MAX (1u << 24)
/* Longest full name getxattr(2) accepts (XATTR_NAME_MAX). */
#define XATTR_FULLNAME_MAX 255
#define XATTR_ENTRY_HDR ((size_t)sizeof(struct ext4_xattr_entry))

/* ------------------------------------------------------------ regions */

/* One run of entries: the inode body or the xattr block. */
struct xregion {
	const uint8_t *first;       /* first entry */
	const uint8_t *end;         /* one past the last byte of the region */
	const uint8_t *value_base;  /* e_value_offs counts from here */
	uint64_t ino;               /* owner, for messages */
	uint64_t blocknr;           /* xattr block, 0 for the inode body */
};

/* A value found by a lookup. */
struct xvalue {
	const uint8_t *data;        /* inside the region (when inum == 0) */
	uint32_t size;
	uint32_t inum;              /* EA inode holding the value, or 0 */
};

/* Entry fields copied out (the region may not be 4-byte aligned in memory). */
static void entry_read(const uint8_t *p, struct ext4_xattr_entry *e)
{
	memcpy(e, p, XATTR_ENTRY_HDR);
}

static bool entry_is_last(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return v == 0;
}

static const uint8_t *entry_next(const uint8_t *p)
{
	return p + EXT4_XATTR_LEN(p[0]);
}

/* Record a corruption of region r; returns -EUCLEAN. */
#define region_corrupt(r, fmt, ...)                                                    \
	((r)->blocknr ? fs_corrupt("xattr block %llu of inode %llu: " fmt,              \
				   (unsigned long long)(r)->blocknr,                    \
				   (unsigned long long)(r)->ino, ##__VA_ARGS__)         \
		      : fs_corrupt("in-inode xattrs of inode %llu: " fmt,               \
				   (unsigned long long)(r)->ino, ##__VA_ARGS__))

/* Walk the entry list; on success *names_end is just past the 4 zero bytes. */
static int region_check_names(const struct xregion *r, const uint8_t **names_end)
{
	const uint8_t *p = r->first;

	for (;;) {
		if (r->end - p < 4)
			return region_corrupt(r, "entry list not terminated (offset %td)",
					      p - r->value_base);
		if (entry_is_last(p))
			break;
		if ((size_t)(r->end - p) < EXT4_XATTR_LEN(p[0]) + 4)
			return region_corrupt(r, "entry at offset %td runs past the end",
					      p - r->value_base);
		if (memchr(p + XATTR_ENTRY_HDR, 0, p[0]))
			return region_corrupt(r, "entry at offset %td: name has a NUL byte",
					      p - r->value_base);
		p = entry_next(p);
	}
	*names_end = p + 4;
	return 0;
}

/* Is an EA inode number acceptable for an entry of region r? */
static int region_check_inum(struct uext4_fs *fs, const struct xregion *r, uint32_t inum)
{
	if (!FS_HAS_INCOMPAT(fs, EA_INODE))
		return region_corrupt(r, "value in inode %u without the ea_inode feature", inum);
	if (inum == EXT4_ROOT_INO || inum < fs->first_ino || inum > fs->inodes_count ||
	    inum == r->ino)
		return region_corrupt(r, "invalid EA inode number %u", inum);
	return 0;
}

static int region_check_value(struct uext4_fs *fs, const struct xregion *r,
			      const struct ext4_xattr_entry *e, const uint8_t *names_end)
{
	uint32_t size = le32(e->e_value_size);
	uint32_t inum = le32(e->e_value_inum);
	uint16_t offs = le16(e->e_value_offs);
	const uint8_t *val;

	if (size > XATTR_VALUE_MAX)
		return region_corrupt(r, "value size %u too large", size);
	if (inum)
		return region_check_inum(fs, r, inum);
	if (size == 0)
		return 0;
	if (offs > r->end - r->value_base)
		return region_corrupt(r, "value offset %u past the end", offs);
	val = r->value_base + offs;
	if (val < names_end || size > (size_t)(r->end - val) ||
	    EXT4_XATTR_SIZE((size_t)size) > (size_t)(r->end - val))
		return region_corrupt(r, "value at offset %u size %u overlaps the entries "
				      "or the end", offs, size);
	return 0;
}

/* Full structural check of a region; 0 or -EUCLEAN. */
static int region_check(struct uext4_fs *fs, const struct xregion *r)
{
	const uint8_t *names_end = NULL, *p;
	int err = region_check_names(r, &names_end);

	if (err)
		return err;
	for (p = r->first; !err && !entry_is_last(p); p = entry_next(p)) {
		struct ext4_xattr_entry e;

		entry_read(p, &e);
		err = region_check_value(fs, r, &e, names_end);
	}
	return err;
}

/* Find (index, name) in a checked region: 0 or -ENODATA. */
static int region_find(const struct xregion *r, int index, const char *name,
		       size_t namelen, struct xvalue *v)
{
	const uint8_t *p;

	for (p = r->first; !entry_is_last(p); p = entry_next(p)) {
		struct ext4_xattr_entry e;

		entry_read(p, &e);
		if (e.e_name_index != index || e.e_name_len != namelen ||
		    memcmp(p + XATTR_ENTRY_HDR, name, namelen) != 0)
			continue;
		v->size = le32(e.e_value_size);
		v->inum = le32(e.e_value_inum);
		v->data = r->value_base + le16(e.e_value_offs);
		return 0;
	}
	return -ENODATA;
}

/*
 * Set up the in-inode region of inode.  Returns 1 when there is one
 * (checked), 0 when the inode has no in-inode xattrs, or -EUCLEAN.
 * Reads inode->raw: the caller keeps it stable.
 */
static int ibody_region(struct uext4_fs *fs, struct inode *inode, struct xregion *r)
{
	size_t isize = fs->inode_size;
	size_t hdr = EXT4_GOOD_OLD_INODE_SIZE + (size_t)inode->extra_isize;
	uint32_t magic;

	if (isize <= EXT4_GOOD_OLD_INODE_SIZE)
		return 0;
	if ((inode->extra_isize & 3) || hdr > isize)
		return fs_corrupt("inode %llu: i_extra_isize %u invalid for %zu-byte inodes",
				  (unsigned long long)inode->ino, inode->extra_isize, isize);
	/* Like the kernel: no room for header + terminator means no xattrs. */
	if (hdr + sizeof(magic) + 4 > isize)
		return 0;
	memcpy(&magic, inode->raw + hdr, sizeof(magic));
	if (le32(magic) != EXT4_XATTR_MAGIC)
		return 0;
	r->first = inode->raw + hdr + sizeof(magic);
	r->end = inode->raw + isize;
	r->value_base = r->first;
	r->ino = inode->ino;
	r->blocknr = 0;
	return region_check(fs, r) ? -EUCLEAN : 1;
}

/*
 * Read and check the xattr block blk of inode ino; on success *bp holds a
 * reference (brelse() it) and r describes its entries.
 */
static int xblock_open(struct uext4_fs *fs, uint64_t ino, uint64_t blk, struct buf **bp,
		       struct xregion *r)
{
	uint32_t magic, blocks;
	struct buf *b;
	int err = 0;

	if (blk <= fs->first_data_block || blk >= fs->blocks_count)
		return fs_corrupt("inode %llu: xattr block %llu out of range",
				  (unsigned long long)ino, (unsigned long long)blk);
	err = bread(fs->bc, blk, UEXT4_META_XATTR, &b);
	if (err)
		return err;
	/* Only the fields that never change while the block is shared:
	 * h_refcount may be changed by another inode's writer (under
	 * b->lock); h_checksum is set only in the commit's copy. */
	memcpy(&magic, b->data + offsetof(struct ext4_xattr_header, h_magic), 4);
	memcpy(&blocks, b->data + offsetof(struct ext4_xattr_header, h_blocks), 4);
	r->first = b->data + sizeof(struct ext4_xattr_header);
	r->end = b->data + fs->block_size;
	r->value_base = b->data;
	r->ino = ino;
	r->blocknr = blk;
	if (le32(magic) != EXT4_XATTR_MAGIC || le32(blocks) != 1) {
		err = region_corrupt(r, "bad header (magic 0x%08x, h_blocks %u)", le32(magic),
				     le32(blocks));
		goto fail;
	}
	if (!buf_verified(b)) {
		/* The checksum covers h_refcount: read it under b->lock. */
		ulock_lock(&b->lock);
		if (!buf_verified(b)) {
			err = csum_verify_xattr_block(fs, blk, b->data);
			if (!err)
				err = region_check(fs, r);
			if (!err)
				buf_set_verified(b);
		}
		ulock_unlock(&b->lock);
		if (err)
			goto fail;
	} else if ((err = region_check(fs, r)) != 0) {
		goto fail;
	}
	*bp = b;
	return 0;
fail:
	brelse(fs->bc, b);
	return err;
}

/* ------------------------------------------------------------ values */

/* Copy a value that lives inside its region; size 0 asks the length. */
static ssize_t value_copy_inline(const struct xvalue *v, void *buf, size_t size)
{
	if (size == 0)
		return v->size;
	if (v->size > size)
		return -ERANGE;
	if (v->size)
		memcpy(buf, v->data, v->size);
	return v->size;
}

/*
 * Look up (index, name) in the xattr block blk of inode ino.  A value
 * inside the block is copied (returns its length); a value in an EA inode
 * is returned in *ea (ea->inum != 0, returns 0) for the caller to read once
 * it has dropped any inode lock.
 */
static ssize_t block_get(struct uext4_fs *fs, uint64_t ino, uint64_t blk, int index,
			 const char *name, size_t namelen, void *buf, size_t size,
			 struct xvalue *ea)
{
	struct xregion r;
	struct xvalue v;
	struct buf *b;
	ssize_t n;
	int err;

	ea->inum = 0;
	if (blk == 0)
		return -ENODATA;
	err = xblock_open(fs, ino, blk, &b, &r);
	if (err)
		return err;
	err = region_find(&r, index, name, namelen, &v);
	if (err)
		n = err;
	else if (v.inum)
		*ea = v, n = 0;
	else
		n = value_copy_inline(&v, buf, size);
	brelse(fs->bc, b);
	return n;
}

/* Shared tail of the lookups: the value found in the inode body or block. */
static ssize_t lookup_inode(struct uext4_fs *fs, struct inode *inode, int index,
			    const char *name, size_t namelen, void *buf, size_t size,
			    struct xvalue *ea)
{
	struct xregion r;
	struct xvalue v;
	int have;

	ea->inum = 0;
	have = ibody_region(fs, inode, &r);
	if (have < 0)
		return have;
	if (have && region_find(&r, index, name, namelen, &v) == 0) {
		if (v.inum) {
			*ea = v;
			return 0;
		}
		return value_copy_inline(&v, buf, size);
	}
	return block_get(fs, inode->ino, inode->file_acl, index, name, namelen, buf, size, ea);
}

/* Read a value kept in an EA inode; l is its shard, taken by the caller
 * (NULL: no memory), released here. */
static ssize_t read_ea_value(struct uext4_fs *fs, uint64_t ino, const struct xvalue *ea,
			     struct urwlock *l, void *buf, size_t size)
{
	ssize_t n = l ? ea_inode_read(fs, ino, ea->inum, ea->size, buf, size)
		      : fs_err(ENOMEM, "inode %llu: out of memory for EA inode %u",
			       (unsigned long long)ino, ea->inum);

	ea_read_end(l);
	return n;
}

ssize_t xattr_get_raw(struct uext4_fs *fs, struct inode *inode, int index,
		      const char *name, size_t namelen, void *buf, size_t size)
{
	struct xvalue ea;
	ssize_t n;

	/* No inode lock here: see the comment at the top of this file. */
	if (namelen > EXT4_NAME_LEN)
		return -ERANGE;
	n = lookup_inode(fs, inode, index, name, namelen, buf, size, &ea);
	if (n == 0 && ea.inum)
		n = read_ea_value(fs, inode->ino, &ea, ea_read_begin(fs, ea.inum), buf, size);
	return n;
}

ssize_t xattr_get_ibody(struct uext4_fs *fs, struct inode *inode, int index, const char *name,
			size_t namelen, void *buf, size_t size)
{
	struct xregion r;
	struct xvalue v;
	int have = ibody_region(fs, inode, &r);

	if (have < 0)
		return have;
	if (!have || region_find(&r, index, name, namelen, &v) != 0)
		return -ENODATA;
	if (v.inum)
		return fs_corrupt("inode %llu: xattr %.*s names EA inode %u, but only the inode "
				  "body may hold it", (unsigned long long)inode->ino, (int)namelen,
				  name, v.inum);
	return value_copy_inline(&v, buf, size);
}

/*
 * xattr_get_raw() with inode->lock held as a reader while the inode body
 * and the xattr block are read (a writer of this inode may change the
 * block in place when it is not shared, or free it); dropped before an EA
 * inode is read (its lock has the same rank).
 */
static ssize_t get_raw_locked(struct uext4_fs *fs, struct inode *inode, int index,
			      const char *name, size_t namelen, void *buf, size_t size)
{
	struct urwlock *l = NULL;
	struct xvalue ea;
	ssize_t n;

	urw_rdlock(&inode->lock);
	n = lookup_inode(fs, inode, index, name, namelen, buf, size, &ea);
	/* The EA inode's shard before the owner's lock goes: the entry's
	 * reference then keeps the EA inode alive until we have read it. */
	if (n == 0 && ea.inum)
		l = ea_read_begin(fs, ea.inum);
	urw_unlock(&inode->lock);
	if (n == 0 && ea.inum)
		n = read_ea_value(fs, inode->ino, &ea, l, buf, size);
	return n;
}

/* ------------------------------------------------------------ POSIX ACLs */

/* The formats are described in acl.h. */

/* Entry count from the value size, as the kernel's ext4_acl_count(). */
static long acl_disk_count(size_t size)
{
	size_t body = size - ACL_HDR;

	if (body < 4 * ACL_SHORT_ENTRY)
		return body % ACL_SHORT_ENTRY ? -1 : (long)(body / ACL_SHORT_ENTRY);
	body -= 4 * ACL_SHORT_ENTRY;
	return body % ACL_LONG_ENTRY ? -1 : (long)(body / ACL_LONG_ENTRY + 4);
}

/* Convert one on-disk entry at *p to an 8-byte VFS entry at out (if not NULL). */
static int acl_convert_entry(const uint8_t **p, const uint8_t *end, uint8_t *out)
{
	uint16_t tag, perm;
	uint32_t id = cpu_to_le32(ACL_UNDEFINED_ID);
	size_t len = ACL_SHORT_ENTRY;

	if (end - *p < ACL_SHORT_ENTRY)
		return -1;
	memcpy(&tag, *p, 2);
	memcpy(&perm, *p + 2, 2);
	switch (le16(tag)) {
	case ACL_TAG_USER_OBJ:
	case ACL_TAG_GROUP_OBJ:
	case ACL_TAG_MASK:
	case ACL_TAG_OTHER:
		break;
	case ACL_TAG_USER:
	case ACL_TAG_GROUP:
		len = ACL_LONG_ENTRY;
		if (end - *p < ACL_LONG_ENTRY)
			return -1;
		memcpy(&id, *p + 4, 4);
		break;
	default:
		return -1;
	}
	if (out) {
		memcpy(out, &tag, 2);
		memcpy(out + 2, &perm, 2);
		memcpy(out + 4, &id, 4);
	}
	*p += len;
	return 0;
}

/*
 * Convert an on-disk ACL to the getxattr(2) format.  size 0 asks the
 * length.  An ACL with no entries reads as absent (-ENODATA), as in the
 * kernel; a malformed one is corruption.
 */
static ssize_t acl_to_xattr(uint64_t ino, const char *what, const uint8_t *in,
			    size_t inlen, uint8_t *out, size_t size)
{
	const uint8_t *p = in + ACL_HDR, *end = in + inlen;
	uint32_t version;
	long count, n;
	size_t outlen;

	if (inlen < ACL_HDR)
		return fs_corrupt("%s ACL of inode %llu: %zu bytes", what,
				  (unsigned long long)ino, inlen);
	memcpy(&version, in, 4);
	if (le32(version) != ACL_DISK_VERSION)
		return fs_corrupt("%s ACL of inode %llu: version %u", what,
				  (unsigned long long)ino, le32(version));
	count = acl_disk_count(inlen);
	if (count < 0)
		return fs_corrupt("%s ACL of inode %llu: bad size %zu", what,
				  (unsigned long long)ino, inlen);
	if (count == 0)
		return -ENODATA;
	outlen = ACL_HDR + (size_t)count * ACL_LONG_ENTRY;
	if (size && size < outlen)
		return -ERANGE;
	for (n = 0; n < count; n++)
		if (acl_convert_entry(&p, end, size ? out + ACL_HDR + n * ACL_LONG_ENTRY : NULL))
			return fs_corrupt("%s ACL of inode %llu: bad entry %ld", what,
					  (unsigned long long)ino, n);
	if (p != end)
		return fs_corrupt("%s ACL of inode %llu: %td trailing bytes", what,
				  (unsigned long long)ino, end - p);
	if (size) {
		version = cpu_to_le32(ACL_XATTR_VERSION);
		memcpy(out, &version, 4);
	}
	return (ssize_t)outlen;
}

/* Read a whole raw value into a malloc()ed buffer (*val, *len). */
static int get_raw_alloc(struct uext4_fs *fs, struct inode *inode, int index,
			 uint8_t **val, size_t *len)
{
	int tries;

	for (tries = 0; tries < 3; tries++) {
		ssize_t need = get_raw_locked(fs, inode, index, "", 0, NULL, 0);
		ssize_t n;
		uint8_t *p;

		if (need < 0)
			return (int)need;
		p = malloc(need ? (size_t)need : 1);
		if (!p)
			return fs_err(ENOMEM, "xattr of inode %llu: out of memory",
				      (unsigned long long)inode->ino);
		n = get_raw_locked(fs, inode, index, "", 0, p, need ? (size_t)need : 1);
		if (n >= 0) {
			*val = p;
			*len = (size_t)n;
			return 0;
		}
		free(p);
		if (n != -ERANGE)
			return (int)n;
		/* The value grew between the two reads (write path): retry. */
	}
	return fs_err(EAGAIN, "xattr of inode %llu: value keeps changing",
		      (unsigned long long)inode->ino);
}

static ssize_t acl_get(struct uext4_fs *fs, struct inode *inode, int index, void *buf,
		       size_t size)
{
	const char *what = index == EXT4_XATTR_INDEX_POSIX_ACL_ACCESS ? "access" : "default";
	uint8_t *raw = NULL;
	size_t len = 0;
	ssize_t n;
	int err = get_raw_alloc(fs, inode, index, &raw, &len);

	if (err)
		return err;
	n = acl_to_xattr(inode->ino, what, raw, len, buf, size);
	free(raw);
	return n;
}

/* ------------------------------------------------------------ names */

/*
 * The name prefixes the kernel's ext4 exposes through getxattr(2) and
 * listxattr(2) (ext4_xattr_handler_map).  Index 7 ("system.", e.g.
 * system.data of inline-data inodes) has no handler there: the kernel
 * neither lists it nor returns it (EOPNOTSUPP), and neither do we.
 * Index 10 ("gnu.") is only exposed with the hurd-compat mount option,
 * which we don't have.  exact: the prefix is the whole name (ACLs).
 */
struct xprefix {
	const char *prefix;
	int index;
	bool exact;
};
static const struct xprefix xprefixes[] = {
	{ "user.", EXT4_XATTR_INDEX_USER, false },
	{ "system.posix_acl_access", EXT4_XATTR_INDEX_POSIX_ACL_ACCESS, true },
	{ "system.posix_acl_default", EXT4_XATTR_INDEX_POSIX_ACL_DEFAULT, true },
	{ "trusted.", EXT4_XATTR_INDEX_TRUSTED, false },
	{ "security.", EXT4_XATTR_INDEX_SECURITY, false },
};
#define NPREFIXES (sizeof(xprefixes) / sizeof(xprefixes[0]))

static const char *index_prefix(int index)
{
	for (size_t i = 0; i < NPREFIXES; i++)
		if (xprefixes[i].index == index)
			return xprefixes[i].prefix;
	return NULL;
}

/* Map a full name to (index, suffix): 0, -EOPNOTSUPP, -EINVAL or -ERANGE. */
static int name_split(const char *name, int *index, const char **suffix)
{
	if (strlen(name) > XATTR_FULLNAME_MAX)
		return -ERANGE;
	for (size_t i = 0; i < NPREFIXES; i++) {
		const struct xprefix *x = &xprefixes[i];
		size_t plen = strlen(x->prefix);

		if (strncmp(name, x->prefix, plen) != 0)
			continue;
		/* "user." alone is invalid; "system.posix_acl_accessX" unknown. */
		if (x->exact != (name[plen] == '\0'))
			return x->exact ? -EOPNOTSUPP : -EINVAL;
		*index = x->index;
		*suffix = name + plen;
		return 0;
	}
	return -EOPNOTSUPP;
}

ssize_t xattr_get(struct uext4_fs *fs, struct inode *inode, const char *name, void *buf,
		  size_t size)
{
	const char *suffix;
	int index;
	int err = name_split(name, &index, &suffix);

	if (err)
		return fs_err(-err, "getxattr \"%.64s\" on inode %llu: %s", name,
			      (unsigned long long)inode->ino,
			      err == -EOPNOTSUPP ? "unsupported name prefix" :
			      err == -EINVAL ? "empty name" : "name too long");
	if (index == EXT4_XATTR_INDEX_POSIX_ACL_ACCESS ||
	    index == EXT4_XATTR_INDEX_POSIX_ACL_DEFAULT)
		return acl_get(fs, inode, index, buf, size);
	return get_raw_locked(fs, inode, index, suffix, strlen(suffix), buf, size);
}

/* ------------------------------------------------------------ listing */

/* Output of xattr_list: size 0 only counts. */
struct xlist_out {
	char *buf;
	size_t size;
	size_t len;
};

static int list_region(const struct xregion *r, struct xlist_out *o)
{
	const uint8_t *p;

	for (p = r->first; !entry_is_last(p); p = entry_next(p)) {
		const char *prefix = index_prefix(p[1]);
		size_t plen, need;

		if (!prefix)
			continue;
		plen = strlen(prefix);
		need = plen + p[0] + 1;
		if (o->size) {
			if (o->len + need > o->size)
				return -ERANGE;
			memcpy(o->buf + o->len, prefix, plen);
			memcpy(o->buf + o->len + plen, p + XATTR_ENTRY_HDR, p[0]);
			o->buf[o->len + need - 1] = '\0';
		}
		o->len += need;
	}
	return 0;
}

ssize_t xattr_list(struct uext4_fs *fs, struct inode *inode, char *buf, size_t size)
{
	struct xlist_out o = { buf, buf ? size : 0, 0 };
	struct xregion r;
	struct buf *b;
	int have, err = 0;

	/* The lock is held across the block too: see get_raw_locked(). */
	urw_rdlock(&inode->lock);
	have = ibody_region(fs, inode, &r);
	if (have > 0)
		err = list_region(&r, &o);
	if (have >= 0 && !err && inode->file_acl) {
		err = xblock_open(fs, inode->ino, inode->file_acl, &b, &r);
		if (!err) {
			err = list_region(&r, &o);
			brelse(fs->bc, b);
		}
	}
	urw_unlock(&inode->lock);
	if (have < 0)
		return have;
	if (err)
		return err;
	return (ssize_t)o.len;
}

/*
 * Check the in-inode xattr area when an inode is loaded, as the kernel's
 * ext4_iget() does: an inode whose area is damaged is refused as a whole,
 * so that inline data and ACLs are never read from a corrupt region.
 */
/* The inode's xattr block, if any, reads and checks (an unlink checks it
 * before it drops a last link, so that the free cannot fail half-way). */
int xattr_check_block(struct uext4_fs *fs, struct inode *inode)
{
	struct xregion r;
	struct buf *b;
	int err;

	if (!inode->file_acl)
		return 0;
	if ((err = xblock_open(fs, inode->ino, inode->file_acl, &b, &r)))
		return err;
	brelse(fs->bc, b);
	return 0;
}

int xattr_check_ibody(struct uext4_fs *fs, struct inode *inode)
{
	struct xregion r;
	int ret = ibody_region(fs, inode, &r);

	return ret < 0 ? ret : 0;
}

/* ================================================================ write side
 *
 * A change loads the inode's two regions (inode body, block) into entry
 * lists, edits the lists, and writes each changed region back whole:
 * entries first (the block's sorted by (index, name length, name) as the
 * kernel's lookup requires, the body's in their order, new ones last, as
 * the kernel does), values packed down from the region's end, 4-byte
 * aligned and zero-padded.  Deterministic layout: identical sets of xattrs
 * give identical blocks, which is what lets inodes share one.
 *
 * Placement follows ext4_xattr_set_handle(): a value goes into the inode
 * body when it fits there, else into the block; an entry that moves is
 * removed from its old region.  The region that may need a new block is
 * always written first, so ENOSPC leaves everything as it was.  With
 * ea_inode, a value too large for a block goes to an EA inode at once, and
 * one that fits neither region inline goes there on a second try; the
 * entry then holds only the name (ea_inode.c keeps the values, their
 * reference counts and the sharing of equal values).  Each store of a
 * region records how the EA references move (xstate.refs: an inode body
 * counts its entries, a block its entries once however many inodes share
 * it), and the operation applies them at its end, so that no count passes
 * through 0 on the way; the owner's i_blocks follows each region's charge
 * (the block, and the EA values it names).
 *
 * Locking (see also ARCHITECTURE.md): callers hold inode->lock for writing
 * and a handle, which makes the inode body, i_file_acl and the contents of
 * a block only this inode references (h_refcount 1) ours.  A block with
 * h_refcount > 1 is never changed except its h_refcount, under its b->lock.
 * The shared-block index (below) adds that a block is reachable by other
 * inodes through the index: every decision on a block's refcount ("1: I
 * may change or free it", "share it: refcount + 1") is made holding the
 * index shard of the block's hash and then b->lock, and a block leaves the
 * index (under the shard lock) before it is changed in place or freed, so
 * the index never names a block that is not a live xattr block with those
 * exact contents.
 */

#ifndef XATTR_CREATE
#define XATTR_CREATE 1
#define XATTR_REPLACE 2
#endif
/* Largest value setxattr(2) passes (XATTR_SIZE_MAX). */
#define XATTR_SYSCALL_SIZE_MAX 65536u
/* Most inodes one block may serve (EXT4_XATTR_REFCOUNT_MAX). */
#define XATTR_REFCOUNT_MAX 1024u
#define XBLOCK_HDR ((size_t)sizeof(struct ext4_xattr_header))

/* One xattr, in a list being edited. */
struct xent {
	uint8_t index;
	uint8_t name_len;
	char name[EXT4_NAME_LEN];
	const uint8_t *value;   /* into the list's copy, or the caller's value */
	uint32_t size;
	uint32_t inum;          /* value lives in this EA inode (kept as is) */
	uint32_t hash;          /* e_hash, kept for EA-inode entries */
};

/* The entries of one region; values point into copy. */
struct xlist {
	struct xent *e;
	size_t n, cap;
	uint8_t *copy;
};

static void xlist_free(struct xlist *l)
{
	free(l->e);
	free(l->copy);
	memset(l, 0, sizeof(*l));
}

static int xlist_reserve(struct xlist *l, size_t n)
{
	struct xent *e;
	size_t cap = l->cap ? l->cap : 8;

	if (n <= l->cap)
		return 0;
	while (cap < n)
		cap *= 2;
	e = realloc(l->e, cap * sizeof(*e));
	if (!e)
		return fs_err(ENOMEM, "xattr: out of memory");
	l->e = e;
	l->cap = cap;
	return 0;
}

/* Copy the entries of a checked region into l (which owns a copy of it). */
static int xlist_load(struct xlist *l, const struct xregion *r)
{
	size_t len = (size_t)(r->end - r->value_base);
	const uint8_t *p;
	int err;

	size_t skip = (size_t)(r->first - r->value_base);

	/* Not the block header: h_refcount may change under b->lock. */
	l->copy = calloc(1, len);
	if (!l->copy)
		return fs_err(ENOMEM, "xattr: out of memory");
	memcpy(l->copy + skip, r->first, len - skip);
	for (p = r->first; !entry_is_last(p); p = entry_next(p)) {
		struct ext4_xattr_entry e;
		struct xent *x;

		if ((err = xlist_reserve(l, l->n + 1)) != 0)
			return err;
		entry_read(p, &e);
		x = &l->e[l->n++];
		x->index = e.e_name_index;
		x->name_len = e.e_name_len;
		memcpy(x->name, p + XATTR_ENTRY_HDR, e.e_name_len);
		x->size = le32(e.e_value_size);
		x->inum = le32(e.e_value_inum);
		x->hash = le32(e.e_hash);
		x->value = x->inum ? NULL : l->copy + le16(e.e_value_offs);
	}
	return 0;
}

static int xent_cmp(const struct xent *a, int index, const char *name, size_t len)
{
	if (a->index != index)
		return a->index < index ? -1 : 1;
	if (a->name_len != len)
		return a->name_len < len ? -1 : 1;
	return memcmp(a->name, name, len);
}

static long xlist_find(const struct xlist *l, int index, const char *name, size_t len)
{
	for (size_t i = 0; i < l->n; i++)
		if (xent_cmp(&l->e[i], index, name, len) == 0)
			return (long)i;
	return -1;
}

static void xlist_remove(struct xlist *l, long i)
{
	memmove(&l->e[i], &l->e[i + 1], (l->n - (size_t)i - 1) * sizeof(l->e[0]));
	l->n--;
}

/* Insert x at position i (replacing entry i if replace). */
static int xlist_put(struct xlist *l, size_t i, const struct xent *x, bool replace)
{
	int err;

	if (replace) {
		l->e[i] = *x;
		return 0;
	}
	if ((err = xlist_reserve(l, l->n + 1)) != 0)
		return err;
	memmove(&l->e[i + 1], &l->e[i], (l->n - i) * sizeof(l->e[0]));
	l->e[i] = *x;
	l->n++;
	return 0;
}

/* Where x goes in a block's sorted list. */
static size_t xlist_sorted_pos(const struct xlist *l, const struct xent *x)
{
	size_t i = 0;

	while (i < l->n && xent_cmp(&l->e[i], x->index, x->name, x->name_len) < 0)
		i++;
	return i;
}

/* Bytes the entries, values and the 4-byte terminator of l take. */
static size_t xlist_space(const struct xlist *l)
{
	size_t s = 4;

	for (size_t i = 0; i < l->n; i++) {
		s += EXT4_XATTR_LEN(l->e[i].name_len);
		if (!l->e[i].inum)
			s += EXT4_XATTR_SIZE((size_t)l->e[i].size);
	}
	return s;
}

/* Entry hash of a value in a block (ext4_xattr_hash_entry): the name's
 * bytes (unsigned), then the zero-padded value as little-endian words. */
static uint32_t xattr_entry_hash(const char *name, size_t name_len, const uint8_t *value,
				 size_t padded)
{
	uint32_t hash = 0;

	for (size_t i = 0; i < name_len; i++)
		hash = (hash << 5) ^ (hash >> 27) ^ (uint8_t)name[i];
	for (size_t i = 0; i + 4 <= padded; i += 4) {
		uint32_t w;

		memcpy(&w, value + i, 4);
		hash = (hash << 16) ^ (hash >> 16) ^ le32(w);
	}
	return hash;
}

/*
 * Serialise l into the zeroed region [first, end); offsets count from
 * value_base.  In a block, entries get their hash and *block_hash the
 * block's (ext4_xattr_rehash: 0 if an entry's hash is 0); in the inode
 * body the kernel leaves e_hash 0 (e2fsck accepts 0 there).
 */
static void xlist_store(const struct xlist *l, uint8_t *first, uint8_t *end,
			uint8_t *value_base, bool is_block, uint32_t *block_hash)
{
	uint8_t *p = first, *vend = end;
	uint32_t bh = 0;
	bool zero_hash = false;

	for (size_t i = 0; i < l->n; i++) {
		const struct xent *x = &l->e[i];
		struct ext4_xattr_entry e = { 0 };
		size_t padded = x->inum ? 0 : EXT4_XATTR_SIZE((size_t)x->size);

		e.e_name_len = x->name_len;
		e.e_name_index = x->index;
		e.e_value_inum = cpu_to_le32(x->inum);
		e.e_value_size = cpu_to_le32(x->size);
		if (padded) {
			vend -= padded;
			memcpy(vend, x->value, x->size);
			e.e_value_offs = cpu_to_le16((uint16_t)(vend - value_base));
		}
		if (x->inum)
			e.e_hash = cpu_to_le32(x->hash);
		else if (is_block)
			e.e_hash = cpu_to_le32(xattr_entry_hash(x->name, x->name_len, vend,
								padded));
		if (is_block) {
			if (!e.e_hash)
				zero_hash = true;
			bh = (bh << 16) ^ (bh >> 16) ^ le32(e.e_hash);
		}
		memcpy(p, &e, XATTR_ENTRY_HDR);
		memcpy(p + XATTR_ENTRY_HDR, x->name, x->name_len);
		p += EXT4_XATTR_LEN(x->name_len);
	}
	if (block_hash)
		*block_hash = zero_hash ? 0 : bh;
}

/* ------------------------------------------------------------ shared-block index
 *
 * Blocks this mount wrote (or kept shared), by h_hash, so that an inode
 * about to get a block identical to one of them shares it instead (the
 * kernel's mbcache).  Sharded by hash; each shard's lock (RANK_XATTR_INDEX)
 * protects its chains.  An entry is removed before its block is changed or
 * freed (see the locking comment above), so every entry names a live block.
 *
 * It hangs off fs->xindex (created on first use, freed at unmount by
 * xattr_index_destroy()).
 */
#define XI_SHARDS 64
#define XI_BUCKETS 256

struct xi_node {
	uint32_t hash;
	uint64_t blk;
	struct xi_node *next;
};

struct xi_shard {
	struct ulock lock;                  /* RANK_XATTR_INDEX: bucket[] chains */
	struct xi_node *bucket[XI_BUCKETS];
} __attribute__((aligned(CACHELINE)));

struct xindex {
	struct xi_shard shard[XI_SHARDS];
	_Atomic(struct ea_index *) ea;      /* ea_inode.c's locks and index, on first use */
};

static struct xindex *xindex_create(void)
{
	struct xindex *x = calloc(1, sizeof(*x));

	if (!x)
		return NULL;
	for (unsigned i = 0; i < XI_SHARDS; i++)
		ulock_init(&x->shard[i].lock, RANK_XATTR_INDEX);
	return x;
}

/* The mount's index, created on first use; NULL if none can be had.
 * fs->xindex is published once with a compare-and-swap. */
static struct xindex *xindex_get(struct uext4_fs *fs)
{
	struct xindex *x = atomic_load_explicit(&fs->xindex, memory_order_acquire), *none = NULL;

	if (x)
		return x;
	x = xindex_create();
	if (!x)
		return NULL;
	if (!atomic_compare_exchange_strong(&fs->xindex, &none, x)) {
		for (unsigned i = 0; i < XI_SHARDS; i++)
			ulock_destroy(&x->shard[i].lock);
		free(x);
		x = none;
	}
	return x;
}

struct ea_index *xattr_ea_index(struct uext4_fs *fs)
{
	struct xindex *x = xindex_get(fs);
	struct ea_index *e, *none = NULL;

	if (!x)
		return NULL;
	if ((e = atomic_load_explicit(&x->ea, memory_order_acquire)) != NULL)
		return e;
	if (!(e = ea_index_create()))
		return NULL;
	if (!atomic_compare_exchange_strong(&x->ea, &none, e)) {
		ea_index_destroy(e);
		e = none;
	}
	return e;
}

void xattr_index_destroy(struct uext4_fs *fs)
{
	struct xindex *x = atomic_exchange(&fs->xindex, NULL);

	if (!x)
		return;
	ea_index_destroy(atomic_load(&x->ea));
	for (unsigned s = 0; s < XI_SHARDS; s++) {
		for (unsigned b = 0; b < XI_BUCKETS; b++) {
			struct xi_node *n = x->shard[s].bucket[b], *next;

			for (; n; n = next) {
				next = n->next;
				free(n);
			}
		}
		ulock_destroy(&x->shard[s].lock);
	}
	free(x);
}

static struct xi_shard *xi_shard_of(struct xindex *x, uint32_t hash)
{
	return &x->shard[hash % XI_SHARDS];
}

static struct xi_node **xi_bucket(struct xi_shard *s, uint32_t hash)
{
	return &s->bucket[(hash / XI_SHARDS) % XI_BUCKETS];
}

/* Caller holds s->lock.  Best effort: no memory means no sharing. */
static void xi_insert_locked(struct xi_shard *s, uint32_t hash, uint64_t blk)
{
	struct xi_node **head = xi_bucket(s, hash), *n;

	for (n = *head; n; n = n->next)
		if (n->blk == blk)
			return;
	n = malloc(sizeof(*n));
	if (!n)
		return;
	n->hash = hash;
	n->blk = blk;
	n->next = *head;
	*head = n;
}

/* Caller holds s->lock. */
static void xi_remove_locked(struct xi_shard *s, uint32_t hash, uint64_t blk)
{
	struct xi_node **pp = xi_bucket(s, hash), *n;

	for (; (n = *pp) != NULL; pp = &n->next) {
		if (n->blk == blk) {
			*pp = n->next;
			free(n);
			return;
		}
	}
}

/* ------------------------------------------------------------ xattr blocks */

static uint32_t hdr_get(const uint8_t *blk, size_t off)
{
	uint32_t v;

	memcpy(&v, blk + off, 4);
	return le32(v);
}

static void hdr_set(uint8_t *blk, size_t off, uint32_t val)
{
	val = cpu_to_le32(val);
	memcpy(blk + off, &val, 4);
}

#define HOFF(f) offsetof(struct ext4_xattr_header, f)

/* The shard lock for a block's hash, or NULL without an index. */
static struct xi_shard *shard_lock(struct xindex *x, uint32_t hash)
{
	struct xi_shard *s;

	if (!x)
		return NULL;
	s = xi_shard_of(x, hash);
	ulock_lock(&s->lock);
	return s;
}

static void shard_unlock(struct xi_shard *s)
{
	if (s)
		ulock_unlock(&s->lock);
}

/* What a region's EA values charge the owner's i_blocks (512-byte units). */
static uint64_t ea_charge(struct uext4_fs *fs, const struct xlist *l)
{
	uint64_t c = 0;

	for (size_t i = 0; i < l->n; i++)
		if (l->e[i].inum)
			c += ea_quota_sectors(fs, l->e[i].size);
	return c;
}

/* The charge of an xattr block holding l: the block and its EA values. */
static uint64_t block_charge(struct uext4_fs *fs, const struct xlist *l)
{
	return l->n ? (fs->block_size >> 9) + ea_charge(fs, l) : 0;
}

/* A region's charge goes from *cur to now.  Without going below 0 on a
 * corrupt i_blocks, and never shifting a negative count (UBSan). */
static void charge_set(struct inode *inode, uint64_t *cur, uint64_t now)
{
	inode->blocks = inode->blocks >= *cur ? inode->blocks - *cur + now : now;
	*cur = now;
}

/* Set a block's refcount to rc; caller holds b->lock. */
static int block_set_refcount(struct handle *h, struct buf *b, uint32_t rc)
{
	int err = handle_write_access(h, b);

	if (err)
		return err;
	hdr_set(b->data, HOFF(h_refcount), rc);
	handle_dirty(h, b, CSUM_XATTR, 0, 0);
	return 0;
}

/*
 * Drop inode's reference to its xattr block blk: free the block if this
 * was the last one (*freed), else decrement h_refcount.  The caller
 * accounts i_blocks, i_file_acl and the block's EA inode references.
 */
static int block_drop_ref(struct handle *h, struct inode *inode, uint64_t blk, bool *freed)
{
	struct uext4_fs *fs = h->fs;
	struct xindex *x = xindex_get(fs);
	struct xi_shard *s;
	struct buf *b;
	uint32_t rc, hash;
	bool release = false;
	int err = bread(fs->bc, blk, UEXT4_META_XATTR, &b);

	if (err)
		return err;
	hash = hdr_get(b->data, HOFF(h_hash));  /* fixed while we reference it */
	s = shard_lock(x, hash);
	ulock_lock(&b->lock);
	rc = hdr_get(b->data, HOFF(h_refcount));
	if (rc <= 1) {
		if (s)
			xi_remove_locked(s, hash, blk);
		release = true;
	} else {
		err = block_set_refcount(h, b, rc - 1);
		/* Still a live shared block: worth finding again. */
		if (!err && s && hash && rc - 1 < XATTR_REFCOUNT_MAX)
			xi_insert_locked(s, hash, blk);
	}
	ulock_unlock(&b->lock);
	shard_unlock(s);
	brelse(fs->bc, b);
	*freed = release;
	if (release)
		err = balloc_free(h, inode, blk, 1, BALLOC_METADATA);
	return err;
}

/*
 * Take a reference to a block of the index identical to img (hash hash),
 * other than not_blk.  Returns 1 with *blk set, 0 if there is none.
 */
static int block_share(struct handle *h, const uint8_t *img, uint32_t hash, uint64_t not_blk,
		       uint64_t *blk)
{
	struct uext4_fs *fs = h->fs;
	struct xindex *x = xindex_get(fs);
	size_t cmp_len = fs->block_size - XBLOCK_HDR;
	struct xi_shard *s;
	struct xi_node *n;
	int found = 0;

	if (!x || !hash)
		return 0;
	s = shard_lock(x, hash);
	for (n = *xi_bucket(s, hash); n && !found; n = n->next) {
		struct buf *b;
		uint32_t rc;

		if (n->hash != hash || n->blk == not_blk)
			continue;
		if (bread(fs->bc, n->blk, UEXT4_META_XATTR, &b))
			continue;
		ulock_lock(&b->lock);
		rc = hdr_get(b->data, HOFF(h_refcount));
		if (hdr_get(b->data, HOFF(h_magic)) == EXT4_XATTR_MAGIC &&
		    hdr_get(b->data, HOFF(h_blocks)) == 1 &&
		    hdr_get(b->data, HOFF(h_hash)) == hash && rc >= 1 &&
		    rc < XATTR_REFCOUNT_MAX &&
		    memcmp(b->data + XBLOCK_HDR, img + XBLOCK_HDR, cmp_len) == 0 &&
		    block_set_refcount(h, b, rc + 1) == 0) {
			*blk = n->blk;
			found = 1;
		}
		ulock_unlock(&b->lock);
		brelse(fs->bc, b);
	}
	shard_unlock(s);
	return found;
}

/*
 * Rewrite block blk with img if this inode is its only user.  Returns 1
 * when done, 0 when the block is shared (the caller copies on write).
 */
static int block_rewrite(struct handle *h, uint64_t blk, const uint8_t *img, uint32_t hash)
{
	struct uext4_fs *fs = h->fs;
	struct xindex *x = xindex_get(fs);
	struct xi_shard *s;
	struct buf *b;
	uint32_t old_hash, rc;
	int err = bread(fs->bc, blk, UEXT4_META_XATTR, &b), done = 0;

	if (err)
		return err;
	old_hash = hdr_get(b->data, HOFF(h_hash));
	s = shard_lock(x, old_hash);
	ulock_lock(&b->lock);
	rc = hdr_get(b->data, HOFF(h_refcount));
	if (rc <= 1) {
		if (s)
			xi_remove_locked(s, old_hash, blk);
		err = handle_write_access(h, b);
		if (!err) {
			memcpy(b->data, img, fs->block_size);
			handle_dirty(h, b, CSUM_XATTR, 0, 0);
			done = 1;
		}
	} else if (s && old_hash && rc < XATTR_REFCOUNT_MAX) {
		xi_insert_locked(s, old_hash, blk);  /* shared: keep it findable */
	}
	ulock_unlock(&b->lock);
	shard_unlock(s);
	brelse(fs->bc, b);
	if (done && x && hash) {
		s = shard_lock(x, hash);
		xi_insert_locked(s, hash, blk);
		shard_unlock(s);
	}
	return err ? err : done;
}

/* Allocate a block for inode and fill it with img; *blk is the new block. */
static int block_create(struct handle *h, struct inode *inode, const uint8_t *img,
			uint32_t hash, uint64_t *blk)
{
	struct uext4_fs *fs = h->fs;
	struct xindex *x;
	struct xi_shard *s;
	struct buf *b;
	uint64_t first = 0;
	uint32_t got = 0;
	int err = balloc_alloc(h, inode, balloc_goal(fs, inode), 1, &first, &got);

	if (err)
		return err;
	if (got != 1 || first <= fs->first_data_block || first >= fs->blocks_count)
		return fs_err(EIO, "inode %llu: allocator returned %u blocks at %llu for the "
			      "xattr block", (unsigned long long)inode->ino, got,
			      (unsigned long long)first);
	err = bget_new(fs->bc, first, &b);
	if (!err) {
		err = handle_create_access(h, b);
		if (!err) {
			memcpy(b->data, img, fs->block_size);
			handle_dirty(h, b, CSUM_XATTR, 0, 0);
		}
		brelse(fs->bc, b);
	}
	if (err) {
		balloc_free(h, inode, first, 1, BALLOC_METADATA);
		return err;
	}
	x = xindex_get(fs);
	if (x && hash) {
		s = shard_lock(x, hash);
		xi_insert_locked(s, hash, first);
		shard_unlock(s);
	}
	*blk = first;
	return 0;
}

/* ------------------------------------------------------------ editing state */

/* Both regions of an inode, loaded for editing, and what is on disk. */
struct xstate {
	struct xlist ib, bl;
	bool has_ibody;         /* the inode has room for in-inode xattrs */
	/* As stored now: the charge each region puts on i_blocks, and the EA
	 * inodes its entries name (one reference each). */
	uint64_t ib_charge, bl_charge;
	struct ea_refs ib_disk, bl_disk;    /* deltas used as counts (+1 each) */
	struct ea_refs refs;    /* reference changes, applied at the end */
};

/* The EA inodes list l names, as counts in d (emptied first). */
static int disk_set(struct ea_refs *d, const struct xlist *l)
{
	int err = 0;

	d->n = 0;
	for (size_t i = 0; i < l->n && !err; i++)
		if (l->e[i].inum)
			err = ea_refs_add(d, l->e[i].inum, 1);
	return err;
}

/* refs += sign * counts of d. */
static int refs_add_counts(struct ea_refs *refs, const struct ea_refs *d, int sign)
{
	int err = 0;

	for (size_t i = 0; i < d->n && !err; i++)
		err = ea_refs_add(refs, d->d[i].inum, sign * d->d[i].delta);
	return err;
}

/* A region now holds l instead of what *disk says: references move. */
static int region_moved(struct xstate *st, struct ea_refs *disk, const struct xlist *l,
			bool old_counts)
{
	int err = old_counts ? refs_add_counts(&st->refs, disk, -1) : 0;

	if (!err)
		err = disk_set(disk, l);
	if (!err)
		err = refs_add_counts(&st->refs, disk, 1);
	return err;
}

static void xstate_free(struct xstate *st)
{
	xlist_free(&st->ib);
	xlist_free(&st->bl);
	ea_refs_free(&st->ib_disk);
	ea_refs_free(&st->bl_disk);
	ea_refs_free(&st->refs);
}

/* ------------------------------------------------------------ block store */

/*
 * Make the inode's xattr block hold st->bl (empty: no block).  Shares an
 * identical block when the index knows one, rewrites the inode's own block
 * in place when no other inode uses it, else copies on write.  Updates
 * i_file_acl, i_blocks and the EA references (a block counts once for
 * each EA entry in it, however many inodes share it), writes the inode.
 */
static int block_store(struct handle *h, struct inode *inode, struct xstate *st)
{
	struct uext4_fs *fs = h->fs;
	const struct xlist *l = &st->bl;
	uint64_t old = inode->file_acl, blk = 0;
	uint32_t hash = 0;
	uint8_t *img;
	bool freed = false;
	int err = 0, r;

	if (l->n == 0) {
		if (!old)
			return 0;
		err = block_drop_ref(h, inode, old, &freed);
		if (err)
			return err;
		if (freed)
			refs_add_counts(&st->refs, &st->bl_disk, -1);
		st->bl_disk.n = 0;
		inode->file_acl = 0;
		charge_set(inode, &st->bl_charge, 0);
		return inode_write(h, inode);
	}
	img = calloc(1, fs->block_size);
	if (!img)
		return fs_err(ENOMEM, "xattr block of inode %llu: out of memory",
			      (unsigned long long)inode->ino);
	xlist_store(l, img + XBLOCK_HDR, img + fs->block_size, img, true, &hash);
	hdr_set(img, HOFF(h_magic), EXT4_XATTR_MAGIC);
	hdr_set(img, HOFF(h_refcount), 1);
	hdr_set(img, HOFF(h_blocks), 1);
	hdr_set(img, HOFF(h_hash), hash);

	if (!block_share(h, img, hash, old, &blk) && old) {
		r = block_rewrite(h, old, img, hash);
		if (r < 0) {
			err = r;
			goto out;
		}
		if (r) {
			/* Rewritten in place: the block's entries changed. */
			err = region_moved(st, &st->bl_disk, l, true);
			charge_set(inode, &st->bl_charge, block_charge(fs, l));
			r = inode_write(h, inode);
			err = err ? err : r;
			goto out;
		}
	}
	/* A new block for the inode (shared or created): the old one's
	 * counts go with it, if it is freed. */
	struct ea_refs was = st->bl_disk;

	memset(&st->bl_disk, 0, sizeof(st->bl_disk));
	if (blk) {
		/* An identical block: its references are counted already. */
		err = disk_set(&st->bl_disk, l);
	} else if ((err = block_create(h, inode, img, hash, &blk)) != 0) {
		ea_refs_free(&st->bl_disk);
		st->bl_disk = was;
		goto out;
	} else {
		err = region_moved(st, &st->bl_disk, l, false);
	}
	/* From here the inode uses blk, whatever happens to the old block. */
	inode->file_acl = blk;
	charge_set(inode, &st->bl_charge, block_charge(fs, l));
	if (old) {
		r = block_drop_ref(h, inode, old, &freed);
		err = err ? err : r;
		if (!r && freed)
			refs_add_counts(&st->refs, &was, -1);
	}
	ea_refs_free(&was);
	r = inode_write(h, inode);
	if (!err)
		err = r;
out:
	free(img);
	return err;
}

/* ------------------------------------------------------------ inode body */

/* Bytes of the inode body's xattr area (after the magic), 0 if none. */
static size_t ibody_capacity(struct uext4_fs *fs, const struct inode *inode)
{
	size_t start = EXT4_GOOD_OLD_INODE_SIZE + (size_t)inode->extra_isize + 4;

	if (fs->inode_size <= EXT4_GOOD_OLD_INODE_SIZE || (inode->extra_isize & 3) ||
	    start + 4 > fs->inode_size)
		return 0;
	return fs->inode_size - start;
}

/*
 * The largest value entry (index, name) could have in the inode body, the
 * body's other entries staying where they are: what the kernel's
 * get_max_inline_xattr_value_size() gives for system.data (free bytes
 * after every entry, value and the 4-byte terminator, the entry's own
 * header and name counted, rounded down to 4).  0 when not even 4 bytes
 * of value fit, as the kernel's.  Caller holds inode->lock for writing.
 */
ssize_t xattr_ibody_room(struct uext4_fs *fs, struct inode *inode, int index, const char *name,
			 size_t namelen)
{
	size_t cap = ibody_capacity(fs, inode), used;
	struct xlist l = { 0 };
	struct xregion r;
	long i;
	int have, err = 0;

	if (!cap)
		return 0;
	have = ibody_region(fs, inode, &r);
	if (have < 0)
		return have;
	if (have && (err = xlist_load(&l, &r)) != 0) {
		xlist_free(&l);
		return err;
	}
	if ((i = xlist_find(&l, index, name, namelen)) >= 0)
		xlist_remove(&l, i);
	used = xlist_space(&l) + EXT4_XATTR_LEN(namelen);
	xlist_free(&l);
	return used < cap ? (ssize_t)((cap - used) & ~(size_t)3) : 0;
}

/* Clear the inode body's xattr area (magic 0, as the kernel). */
static void ibody_clear(struct uext4_fs *fs, struct inode *inode)
{
	size_t hdr = EXT4_GOOD_OLD_INODE_SIZE + (size_t)inode->extra_isize;

	memset(inode->raw + hdr, 0, fs->inode_size - hdr);
}

/* Write st->ib into the inode body, with its charge and references. */
static int ibody_store(struct handle *h, struct inode *inode, struct xstate *st)
{
	struct uext4_fs *fs = h->fs;
	const struct xlist *l = &st->ib;
	size_t hdr = EXT4_GOOD_OLD_INODE_SIZE + (size_t)inode->extra_isize;
	uint8_t *area = inode->raw + hdr;
	uint32_t magic = l->n ? cpu_to_le32(EXT4_XATTR_MAGIC) : 0;
	int err = region_moved(st, &st->ib_disk, l, true), r;

	charge_set(inode, &st->ib_charge, ea_charge(fs, l));
	ibody_clear(fs, inode);
	memcpy(area, &magic, 4);
	if (l->n)
		xlist_store(l, area + 4, inode->raw + fs->inode_size, area + 4, false, NULL);
	r = inode_write(h, inode);
	return err ? err : r;
}

/* ------------------------------------------------------------ set / remove */

/* The two regions' entry lists (xattrs as on disk). */
static int lists_load(struct uext4_fs *fs, struct inode *inode, struct xstate *st)
{
	struct xregion r;
	struct buf *b;
	int have, err = 0;

	have = ibody_region(fs, inode, &r);
	if (have < 0)
		return have;
	if (have && (err = xlist_load(&st->ib, &r)) != 0)
		return err;
	if (!inode->file_acl)
		return 0;
	err = xblock_open(fs, inode->ino, inode->file_acl, &b, &r);
	if (err)
		return err;
	err = xlist_load(&st->bl, &r);
	brelse(fs->bc, b);
	return err;
}

static int xstate_load(struct uext4_fs *fs, struct inode *inode, struct xstate *st)
{
	int err;

	memset(st, 0, sizeof(*st));
	st->has_ibody = ibody_capacity(fs, inode) > 0;
	if ((err = lists_load(fs, inode, st)) != 0)
		return err;
	st->ib_charge = ea_charge(fs, &st->ib);
	st->bl_charge = block_charge(fs, &st->bl);
	if ((err = disk_set(&st->ib_disk, &st->ib)) == 0)
		err = disk_set(&st->bl_disk, &st->bl);
	return err;
}

/* Back to the lists as stored (a placement that did not fit, before a
 * retry): nothing was written, only the lists were edited. */
static int xstate_reload(struct uext4_fs *fs, struct inode *inode, struct xstate *st)
{
	xlist_free(&st->ib);
	xlist_free(&st->bl);
	return lists_load(fs, inode, st);
}

/* A request, with everything checked. */
struct xreq {
	int index;
	const char *name;
	size_t namelen;
	const uint8_t *value;   /* NULL: remove */
	size_t size;
	int flags;
	bool ibody_only;        /* system.data: the inode body or nothing */
};

static int do_remove(struct handle *h, struct inode *inode, struct xstate *st, long ii,
		     long bi)
{
	int err = 0;

	if (bi >= 0) {
		xlist_remove(&st->bl, bi);
		err = block_store(h, inode, st);
	}
	if (!err && ii >= 0) {
		xlist_remove(&st->ib, ii);
		err = ibody_store(h, inode, st);
	}
	return err;
}

static bool value_same(const struct xent *x, const struct xreq *q)
{
	return !x->inum && x->size == q->size && memcmp(x->value, q->value, q->size) == 0;
}

/* With ea_inode, a block keeps this much room for entries (the kernel's
 * EXT4_XATTR_BLOCK_RESERVE): values stored in it must leave it free. */
static size_t block_reserve(struct uext4_fs *fs)
{
	return MIN(fs->block_size / 8, 1024u);
}

/* Bytes of the values stored inside a region. */
static size_t xlist_value_bytes(const struct xlist *l)
{
	size_t s = 0;

	for (size_t i = 0; i < l->n; i++)
		if (!l->e[i].inum)
			s += EXT4_XATTR_SIZE((size_t)l->e[i].size);
	return s;
}

/* Values this large go to an EA inode at once (EXT4_XATTR_MIN_LARGE_EA_SIZE). */
static bool value_is_large(struct uext4_fs *fs, size_t size)
{
	return EXT4_XATTR_SIZE(size) > fs->block_size - EXT4_XATTR_LEN(3) - XBLOCK_HDR - 4;
}

static int no_room(struct inode *inode, const struct xreq *q, struct uext4_fs *fs)
{
	return fs_err(ENOSPC, "inode %llu: xattr %.*s (%zu bytes) does not fit in the inode "
		      "or its xattr block (%u bytes)", (unsigned long long)inode->ino,
		      (int)q->namelen, q->name, q->size, fs->block_size);
}

/*
 * Place entry x (value inline, or in EA inode x->inum): in the inode body
 * if it fits there, else in the block.  -ENOSPC before anything is
 * written when it fits in neither (the lists may be edited then).
 */
static int place(struct handle *h, struct inode *inode, struct xstate *st, long ii, long bi,
		 const struct xreq *q, const struct xent *x)
{
	struct uext4_fs *fs = h->fs;
	size_t ib_cap = ibody_capacity(fs, inode), bl_cap = fs->block_size - XBLOCK_HDR;
	int err;

	/* The inode body first (the entry keeps its place, or goes last). */
	if (st->has_ibody) {
		if ((err = xlist_put(&st->ib, ii >= 0 ? (size_t)ii : st->ib.n, x, ii >= 0)) != 0)
			return err;
		if (xlist_space(&st->ib) <= ib_cap) {
			if (bi >= 0) {
				xlist_remove(&st->bl, bi);
				if ((err = block_store(h, inode, st)) != 0)
					return err;
			}
			return ibody_store(h, inode, st);
		}
		/* Does not fit.  A new entry comes out again; a replaced one
		 * (ii) is removed below once the block holds the value. */
		if (ii < 0)
			xlist_remove(&st->ib, (long)st->ib.n - 1);
	}
	if (q->ibody_only)
		return fs_err(ENOSPC, "inode %llu: no room in the inode for xattr %.*s of %zu bytes",
			      (unsigned long long)inode->ino, (int)q->namelen, q->name, q->size);

	/* The block: sorted position. */
	if (bi >= 0)
		st->bl.e[bi] = *x;
	else if ((err = xlist_put(&st->bl, xlist_sorted_pos(&st->bl, x), x, false)) != 0)
		return err;
	if (xlist_space(&st->bl) > bl_cap)
		return no_room(inode, q, fs);
	if (FS_HAS_INCOMPAT(fs, EA_INODE) && !x->inum && x->size &&
	    fs->block_size - xlist_value_bytes(&st->bl) < block_reserve(fs))
		return no_room(inode, q, fs);
	if ((err = block_store(h, inode, st)) != 0)
		return err;
	if (ii >= 0) {
		xlist_remove(&st->ib, ii);
		return ibody_store(h, inode, st);
	}
	return 0;
}

/* Room an entry takes in its region. */
static size_t xent_space(const struct xent *x)
{
	return EXT4_XATTR_LEN(x->name_len) + (x->inum ? 0 : EXT4_XATTR_SIZE((size_t)x->size));
}

/* Would an entry naming an EA inode fit in either region?  Asked before
 * an EA inode is made, so that ENOSPC then changes nothing. */
static bool ea_entry_fits(struct uext4_fs *fs, struct inode *inode, const struct xstate *st,
			  long ii, long bi, const struct xreq *q)
{
	size_t e = EXT4_XATTR_LEN(q->namelen);
	size_t ib = xlist_space(&st->ib) + e, bl = xlist_space(&st->bl) + e;

	if (ii >= 0)
		ib -= xent_space(&st->ib.e[ii]);
	if (bi >= 0)
		bl -= xent_space(&st->bl.e[bi]);
	return (st->has_ibody && ib <= ibody_capacity(fs, inode)) ||
	       (!q->ibody_only && bl <= fs->block_size - XBLOCK_HDR);
}

/* Entry x names a new EA inode holding q's value (one reference, which
 * the entry takes over once placed: the -1 here meets its +1 there). */
static int entry_to_ea_inode(struct handle *h, struct inode *inode, struct xstate *st,
			     long ii, long bi, const struct xreq *q, struct xent *x)
{
	uint32_t inum, ea_hash, le;
	int err;

	if (!ea_entry_fits(h->fs, inode, st, ii, bi, q))
		return no_room(inode, q, h->fs);
	if ((err = ea_inode_get(h, inode, q->value, (uint32_t)q->size, &inum, &ea_hash)) != 0)
		return err;
	if ((err = ea_refs_add(&st->refs, inum, -1)) != 0) {
		/* Not even room to remember it: give it back at once. */
		struct ea_refs one = { 0 };

		if (ea_refs_add(&one, inum, -1) == 0)
			ea_refs_apply(h, inode->ino, &one);
		ea_refs_free(&one);
		return err;
	}
	le = cpu_to_le32(ea_hash);
	x->inum = inum;
	x->value = NULL;
	x->hash = xattr_entry_hash(x->name, x->name_len, (const uint8_t *)&le, 4);
	return 0;
}

/*
 * Set a value, as ext4_xattr_set_handle(): in the inode body if it fits
 * there, else in the block; with ea_inode, a value too large for a block
 * goes to an EA inode at once, and one that fits neither region after all
 * goes there on a second try.
 */
static int do_set(struct handle *h, struct inode *inode, struct xstate *st, long ii, long bi,
		  const struct xreq *q)
{
	struct uext4_fs *fs = h->fs;
	struct xent x = { .index = (uint8_t)q->index, .name_len = (uint8_t)q->namelen,
			  .value = q->value, .size = (uint32_t)q->size };
	bool can_ea = FS_HAS_INCOMPAT(fs, EA_INODE) && q->size && !q->ibody_only;
	int err;

	memcpy(x.name, q->name, q->namelen);
	if ((ii >= 0 && value_same(&st->ib.e[ii], q)) || (bi >= 0 && value_same(&st->bl.e[bi], q)))
		return 0;
	/* The kernel would, but e2fsck 1.47 then takes a fast symlink whose
	 * i_blocks carries an EA value's charge for a slow one, and its
	 * target for block numbers: no EA inodes for symlinks. */
	if (can_ea && S_ISLNK(inode->mode)) {
		can_ea = false;
		if (value_is_large(fs, q->size))
			return fs_err(ENOSPC, "symlink inode %llu: xattr %.*s of %zu bytes would need "
				      "an EA inode, which e2fsck misreads on symlinks",
				      (unsigned long long)inode->ino, (int)q->namelen, q->name,
				      q->size);
	}
	if (can_ea && value_is_large(fs, q->size)) {
		if ((err = entry_to_ea_inode(h, inode, st, ii, bi, q, &x)) != 0)
			return err;
		return place(h, inode, st, ii, bi, q, &x);
	}
	err = place(h, inode, st, ii, bi, q, &x);
	if (err != -ENOSPC || !can_ea)
		return err;
	/* Fits neither region inline: the value goes to an EA inode. */
	if ((err = xstate_reload(fs, inode, st)) != 0 ||
	    (err = entry_to_ea_inode(h, inode, st, ii, bi, q, &x)) != 0)
		return err;
	fs_clear_err();
	return place(h, inode, st, ii, bi, q, &x);
}

/* The EA inode of the entry a change replaces or removes must be sound
 * before anything changes (as the kernel checks it first). */
static int check_old_ea(struct uext4_fs *fs, struct inode *inode, const struct xstate *st,
			long ii, long bi)
{
	const struct xent *x = ii >= 0 ? &st->ib.e[ii] : bi >= 0 ? &st->bl.e[bi] : NULL;

	if (!x || !x->inum)
		return 0;
	return ea_inode_check(fs, inode->ino, x->inum, x->size);
}

/* The file system now holds xattrs: say so, as the kernel's
 * ext4_xattr_update_super_block() (written with this transaction). */
static void note_ext_attr_feature(struct uext4_fs *fs)
{
	uint32_t bit = cpu_to_le32(EXT4_FEATURE_COMPAT_EXT_ATTR);

	if (__atomic_load_n(&fs->sb.s_feature_compat, __ATOMIC_RELAXED) & bit)
		return;
	__atomic_fetch_or(&fs->sb.s_feature_compat, bit, __ATOMIC_RELAXED);
	super_mark_dirty(fs);
}

/* Checks, load, and the change itself. */
static int xattr_change(struct handle *h, struct inode *inode, const struct xreq *q)
{
	struct xstate st;
	long ii, bi;
	int err, e2;

	if (h->fs->read_only)
		return -EROFS;
	if (q->namelen > EXT4_NAME_LEN)
		return fs_err(ERANGE, "inode %llu: xattr name of %zu bytes",
			      (unsigned long long)inode->ino, q->namelen);
	if (q->value && q->size > XATTR_SYSCALL_SIZE_MAX)
		return fs_err(E2BIG, "inode %llu: xattr value of %zu bytes",
			      (unsigned long long)inode->ino, q->size);
	err = xstate_load(h->fs, inode, &st);
	if (!err) {
		ii = xlist_find(&st.ib, q->index, q->name, q->namelen);
		bi = xlist_find(&st.bl, q->index, q->name, q->namelen);
		if ((q->flags & XATTR_CREATE) && (ii >= 0 || bi >= 0))
			err = -EEXIST;
		else if (ii < 0 && bi < 0 && (!q->value || (q->flags & XATTR_REPLACE)))
			err = -ENODATA;
		else if ((err = check_old_ea(h->fs, inode, &st, ii, bi)) != 0)
			;
		else if (!q->value)
			err = do_remove(h, inode, &st, ii, bi);
		else
			err = do_set(h, inode, &st, ii, bi, q);
	}
	/* Whatever happened, the references taken or moved are settled. */
	e2 = ea_refs_apply(h, inode->ino, &st.refs);
	if (!err)
		err = e2;
	if (!err && q->index != EXT4_XATTR_INDEX_SYSTEM)
		note_ext_attr_feature(h->fs);
	xstate_free(&st);
	return err;
}

int xattr_set_raw(struct handle *h, struct inode *inode, int index, const char *name,
		  size_t namelen, const void *value, size_t size, int flags)
{
	struct xreq q = { index, name, namelen, value, size, flags,
			  index == EXT4_XATTR_INDEX_SYSTEM };

	if (!value)
		q.size = 0;
	if (value && size == 0)
		q.value = (const uint8_t *)"";
	return xattr_change(h, inode, &q);
}

/* ------------------------------------------------------------ POSIX ACLs, write */

/*
 * A VFS-format ACL (setxattr(2)) checked as the kernel's
 * posix_acl_from_xattr() + posix_acl_valid() do, and converted to ext4's
 * on-disk format (ext4_acl_to_disk).  *out is malloc()ed; *count 0 means
 * "no ACL" (a header alone), which removes it.  *mode_bits gets the
 * permission bits the ACL stands for and *equiv whether it says no more
 * than they do (posix_acl_equiv_mode).
 */
static int acl_from_xattr(const uint8_t *in, size_t len, uint8_t **out, size_t *outlen,
			  size_t *count, uint32_t *mode_bits, bool *equiv)
{
	enum { S_UOBJ, S_USER, S_GROUP, S_OTHER, S_DONE } state = S_UOBJ;
	bool needs_mask = false;
	uint32_t version, mode = 0;
	size_t n, o = ACL_HDR;
	uint8_t *d;

	if (len < ACL_HDR)
		return -EINVAL;
	memcpy(&version, in, 4);
	if (le32(version) != ACL_XATTR_VERSION)
		return -EOPNOTSUPP;
	if ((len - ACL_HDR) % ACL_LONG_ENTRY)
		return -EINVAL;
	n = (len - ACL_HDR) / ACL_LONG_ENTRY;
	*count = n;
	*equiv = true;
	d = malloc(ACL_HDR + n * ACL_LONG_ENTRY);
	if (!d)
		return -ENOMEM;
	version = cpu_to_le32(ACL_DISK_VERSION);
	memcpy(d, &version, 4);
	for (size_t i = 0; i < n; i++) {
		const uint8_t *e = in + ACL_HDR + i * ACL_LONG_ENTRY;
		uint16_t tag, perm;
		uint32_t id;
		bool long_entry = false;

		memcpy(&tag, e, 2);
		memcpy(&perm, e + 2, 2);
		memcpy(&id, e + 4, 4);
		tag = le16(tag);
		perm = le16(perm);
		if (perm & ~7u)
			goto invalid;
		switch (tag) {
		case ACL_TAG_USER_OBJ:
			if (state != S_UOBJ)
				goto invalid;
			state = S_USER;
			mode |= (uint32_t)perm << 6;
			break;
		case ACL_TAG_USER:
		case ACL_TAG_GROUP:
			if (state != (tag == ACL_TAG_USER ? S_USER : S_GROUP) ||
			    le32(id) == ACL_UNDEFINED_ID)
				goto invalid;
			needs_mask = true;
			*equiv = false;
			long_entry = true;
			break;
		case ACL_TAG_GROUP_OBJ:
			if (state != S_USER)
				goto invalid;
			state = S_GROUP;
			mode |= (uint32_t)perm << 3;
			break;
		case ACL_TAG_MASK:
			if (state != S_GROUP)
				goto invalid;
			state = S_OTHER;
			mode = (mode & ~070u) | ((uint32_t)perm << 3);
			*equiv = false;
			break;
		case ACL_TAG_OTHER:
			if (state != S_OTHER && !(state == S_GROUP && !needs_mask))
				goto invalid;
			state = S_DONE;
			mode |= perm;
			break;
		default:
			goto invalid;
		}
		if (i + 1 < n && state == S_DONE)
			goto invalid;   /* nothing may follow OTHER */
		tag = cpu_to_le16(tag);
		perm = cpu_to_le16(perm);
		memcpy(d + o, &tag, 2);
		memcpy(d + o + 2, &perm, 2);
		if (long_entry)
			memcpy(d + o + 4, &id, 4);
		o += long_entry ? ACL_LONG_ENTRY : ACL_SHORT_ENTRY;
	}
	if (n && state != S_DONE)
		goto invalid;
	*out = d;
	*outlen = o;
	*mode_bits = mode;
	return 0;
invalid:
	free(d);
	return -EINVAL;
}

/*
 * setxattr of system.posix_acl_access / _default, as ext4_set_acl(): an
 * access ACL sets the permission bits of i_mode and is stored only if it
 * says more than they can; a default ACL only on directories.  Removing
 * an absent ACL succeeds, as in the kernel.
 */
static int acl_set(struct handle *h, struct inode *inode, int index, const void *value,
		   size_t size)
{
	struct xreq q = { index, "", 0, NULL, 0, 0, false };
	uint8_t *disk = NULL;
	size_t disk_len = 0, count = 0;
	uint32_t mode_bits = 0;
	bool equiv = true;
	int err;

	if (value) {
		err = acl_from_xattr(value, size, &disk, &disk_len, &count, &mode_bits, &equiv);
		if (err)
			return fs_err(-err, "inode %llu: invalid POSIX ACL (%zu bytes)",
				      (unsigned long long)inode->ino, size);
	}
	if (index == EXT4_XATTR_INDEX_POSIX_ACL_DEFAULT && !S_ISDIR(inode->mode)) {
		free(disk);
		return count ? fs_err(EACCES, "inode %llu: default ACL on a non-directory",
				      (unsigned long long)inode->ino) : 0;
	}
	bool set_mode = index == EXT4_XATTR_INDEX_POSIX_ACL_ACCESS && count;

	if (set_mode && equiv)
		count = 0;  /* the mode says it all: no ACL stored */
	if (count) {
		q.value = disk;
		q.size = disk_len;
	}
	err = xattr_change(h, inode, &q);
	free(disk);
	if (err == -ENODATA && !q.value)
		err = 0;
	/* The mode changes only with the ACL (not on ENOSPC). */
	if (!err && set_mode) {
		inode->mode = (inode->mode & ~0777u) | mode_bits;
		err = inode_write(h, inode);
	}
	return err;
}

/* ------------------------------------------------------------ entry points */

int xattr_set(struct handle *h, struct inode *inode, const char *name, const void *value,
	      size_t size, int flags)
{
	const char *suffix;
	int index, err = name_split(name, &index, &suffix);

	if (err)
		return fs_err(-err, "setxattr \"%.64s\" on inode %llu: %s", name,
			      (unsigned long long)inode->ino,
			      err == -EOPNOTSUPP ? "unsupported name prefix" :
			      err == -EINVAL ? "empty name" : "name too long");
	if (index == EXT4_XATTR_INDEX_POSIX_ACL_ACCESS ||
	    index == EXT4_XATTR_INDEX_POSIX_ACL_DEFAULT)
		err = acl_set(h, inode, index, value, size);
	else
		err = xattr_set_raw(h, inode, index, suffix, strlen(suffix), value, size, flags);
	if (!err) {
		/* As ext4_xattr_set_handle(): a change sets ctime. */
		inode->ctime = fs_time(h->fs);
		err = inode_write(h, inode);
	}
	return err;
}

/* Deleting an inode without EA inodes: only its block reference goes. */
static int release_block_only(struct handle *h, struct inode *inode)
{
	struct uext4_fs *fs = h->fs;
	struct xregion r;
	struct buf *b;
	uint64_t blk = inode->file_acl;
	uint64_t charge = fs->block_size >> 9;
	bool freed;
	int err;

	if (!blk)
		return 0;
	/* Only a valid xattr block is given back: freeing a block some
	 * corruption made us point at could hand out another file's data. */
	err = xblock_open(fs, inode->ino, blk, &b, &r);
	if (err)
		return err;
	brelse(fs->bc, b);
	err = block_drop_ref(h, inode, blk, &freed);
	if (err)
		return err;
	inode->file_acl = 0;
	charge_set(inode, &charge, 0);
	return inode_write(h, inode);
}

/*
 * Deleting an inode with ea_inode: its body's EA entries drop their
 * references, and its block's too if this was the block's last user (as
 * ext4_xattr_delete_inode()).  An EA inode that cannot be changed is
 * reported (FS_ERROR) and left as it is, and the owner is freed anyway,
 * as the kernel does.
 */
static int release_with_ea(struct handle *h, struct inode *inode)
{
	struct uext4_fs *fs = h->fs;
	struct xstate st;
	bool freed = false;
	int err = xstate_load(fs, inode, &st);

	if (!err)
		err = refs_add_counts(&st.refs, &st.ib_disk, -1);
	if (!err && st.ib.n) {
		ibody_clear(fs, inode);
		charge_set(inode, &st.ib_charge, 0);
	}
	if (!err && inode->file_acl) {
		err = block_drop_ref(h, inode, inode->file_acl, &freed);
		if (!err && freed)
			err = refs_add_counts(&st.refs, &st.bl_disk, -1);
		if (!err) {
			inode->file_acl = 0;
			charge_set(inode, &st.bl_charge, 0);
		}
	}
	if (!err) {
		int e = ea_refs_apply(h, inode->ino, &st.refs);

		(void)e;    /* recorded by ref_change(); the inode goes anyway */
		err = inode_write(h, inode);
	}
	xstate_free(&st);
	return err;
}

int xattr_release_inode(struct handle *h, struct inode *inode)
{
	if (!FS_HAS_INCOMPAT(h->fs, EA_INODE))
		return release_block_only(h, inode);
	return release_with_ea(h, inode);
}
