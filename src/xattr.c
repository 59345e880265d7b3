/*
 * xattr.c - extended attributes: lookup and listing, in the inode body and
 * in the external xattr block, values kept in EA inodes, and the POSIX ACL
 * translation from the ext4 on-disk format to the one getxattr(2) returns.
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
 * they read the inode body and i_file_acl, and drop it before reading an
 * EA inode (whose lock has the same rank) or the xattr block (which needs
 * no inode lock: blocks are read through the buffer cache).
 * xattr_get_raw() takes NO inode lock: inline.c calls it, and other
 * callers may already hold inode->lock as a reader, and taking the same
 * rwlock twice can deadlock behind a waiting writer (and lockdep would
 * abort on the rank).  Its callers make sure inode->raw is stable (they
 * hold the lock, or the file system is read-only).  If the value lives in
 * an EA inode, xattr_get_raw() reads that inode with file_pread(), which
 * takes the EA inode's lock: a caller holding a lock of rank RANK_INODE
 * must not ask for such a value (system.data, the one raw user, never is).
 */
#include "internal.h"

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
	struct ext4_xattr_header h;
	struct buf *b;
	bool verified;
	int err;

	if (blk <= fs->first_data_block || blk >= fs->blocks_count)
		return fs_corrupt("inode %llu: xattr block %llu out of range",
				  (unsigned long long)ino, (unsigned long long)blk);
	err = bread(fs->bc, blk, UEXT4_META_XATTR, &b);
	if (err)
		return err;
	memcpy(&h, b->data, sizeof(h));
	r->first = b->data + sizeof(h);
	r->end = b->data + fs->block_size;
	r->value_base = b->data;
	r->ino = ino;
	r->blocknr = blk;
	if (le32(h.h_magic) != EXT4_XATTR_MAGIC || le32(h.h_blocks) != 1) {
		err = region_corrupt(r, "bad header (magic 0x%08x, h_blocks %u)",
				     le32(h.h_magic), le32(h.h_blocks));
		goto fail;
	}
	verified = buf_verified(b);
	if (!verified && (err = csum_verify_xattr_block(fs, blk, b->data)) != 0)
		goto fail;
	if ((err = region_check(fs, r)) != 0)
		goto fail;
	if (!verified)
		buf_set_verified(b);
	*bp = b;
	return 0;
fail:
	brelse(fs->bc, b);
	return err;
}

/* ------------------------------------------------------------ values */

/* Read a value stored in EA inode inum (owner ino) into buf. */
static ssize_t ea_inode_read(struct uext4_fs *fs, uint64_t ino, uint32_t inum,
			     uint32_t vsize, void *buf, size_t size)
{
	struct inode *ea;
	uint32_t flags;
	uint64_t isize;
	ssize_t n;
	int err;

	if (size == 0)
		return vsize;
	if (vsize > size)
		return -ERANGE;
	err = iget(fs, inum, &ea);
	if (err)
		return err;
	urw_rdlock(&ea->lock);
	flags = ea->flags;
	isize = ea->size;
	urw_unlock(&ea->lock);
	if (!(flags & EXT4_EA_INODE_FL))
		n = fs_corrupt("EA inode %u of inode %llu: EA_INODE flag missing", inum,
			       (unsigned long long)ino);
	else if (isize != vsize)
		n = fs_corrupt("EA inode %u of inode %llu: size %llu, entry says %u", inum,
			       (unsigned long long)ino, (unsigned long long)isize, vsize);
	else
		n = file_pread(fs, ea, buf, vsize, 0);
	iput(fs, ea);
	if (n >= 0 && n != (ssize_t)vsize)
		n = fs_corrupt("EA inode %u of inode %llu: short value (%zd of %u bytes)",
			       inum, (unsigned long long)ino, n, vsize);
	return n;
}

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

/* Look up (index, name) in the xattr block blk of inode ino. */
static ssize_t block_get(struct uext4_fs *fs, uint64_t ino, uint64_t blk, int index,
			 const char *name, size_t namelen, void *buf, size_t size)
{
	struct xregion r;
	struct xvalue v;
	struct buf *b;
	ssize_t n;
	int err;

	if (blk == 0)
		return -ENODATA;
	err = xblock_open(fs, ino, blk, &b, &r);
	if (err)
		return err;
	err = region_find(&r, index, name, namelen, &v);
	n = err ? err : v.inum ? 0 : value_copy_inline(&v, buf, size);
	brelse(fs->bc, b);
	if (!err && v.inum)
		n = ea_inode_read(fs, ino, v.inum, v.size, buf, size);
	return n;
}

ssize_t xattr_get_raw(struct uext4_fs *fs, struct inode *inode, int index,
		      const char *name, size_t namelen, void *buf, size_t size)
{
	struct xregion r;
	struct xvalue v;
	int have;

	/* No inode lock here: see the comment at the top of this file. */
	if (namelen > EXT4_NAME_LEN)
		return -ERANGE;
	have = ibody_region(fs, inode, &r);
	if (have < 0)
		return have;
	if (have && region_find(&r, index, name, namelen, &v) == 0) {
		if (v.inum)
			return ea_inode_read(fs, inode->ino, v.inum, v.size, buf, size);
		return value_copy_inline(&v, buf, size);
	}
	return block_get(fs, inode->ino, inode->file_acl, index, name, namelen, buf, size);
}

/*
 * xattr_get_raw() with inode->lock held as a reader while the inode body
 * and i_file_acl are read; dropped before EA inode and block reads.
 */
static ssize_t get_raw_locked(struct uext4_fs *fs, struct inode *inode, int index,
			      const char *name, size_t namelen, void *buf, size_t size)
{
	struct xregion r;
	struct xvalue v;
	uint64_t file_acl;
	ssize_t n;
	int have;

	urw_rdlock(&inode->lock);
	have = ibody_region(fs, inode, &r);
	if (have > 0 && region_find(&r, index, name, namelen, &v) == 0) {
		if (!v.inum) {
			n = value_copy_inline(&v, buf, size);
			urw_unlock(&inode->lock);
			return n;
		}
		urw_unlock(&inode->lock);
		return ea_inode_read(fs, inode->ino, v.inum, v.size, buf, size);
	}
	file_acl = inode->file_acl;
	urw_unlock(&inode->lock);
	if (have < 0)
		return have;
	return block_get(fs, inode->ino, file_acl, index, name, namelen, buf, size);
}

/* ------------------------------------------------------------ POSIX ACLs */

/*
 * On disk (fs/ext4/acl.h): a 4-byte header (version 1), then entries of
 * 4 bytes (tag, perm) for USER_OBJ/GROUP_OBJ/MASK/OTHER, or 8 bytes
 * (tag, perm, id) for USER/GROUP.  getxattr(2) returns the VFS format
 * (include/uapi/linux/posix_acl_xattr.h): a 4-byte header (version 2),
 * then 8-byte entries (tag, perm, id), id = -1 unless USER/GROUP.
 */
#define ACL_DISK_VERSION 1
#define ACL_XATTR_VERSION 2
#define ACL_TAG_USER_OBJ 0x01
#define ACL_TAG_USER 0x02
#define ACL_TAG_GROUP_OBJ 0x04
#define ACL_TAG_GROUP 0x08
#define ACL_TAG_MASK 0x10
#define ACL_TAG_OTHER 0x20
#define ACL_UNDEFINED_ID 0xFFFFFFFFu
#define ACL_SHORT_ENTRY 4
#define ACL_LONG_ENTRY 8
#define ACL_HDR 4

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
	uint64_t file_acl;
	int have, err = 0;

	urw_rdlock(&inode->lock);
	have = ibody_region(fs, inode, &r);
	if (have > 0)
		err = list_region(&r, &o);
	file_acl = inode->file_acl;
	urw_unlock(&inode->lock);
	if (have < 0)
		return have;
	if (err)
		return err;
	if (file_acl) {
		err = xblock_open(fs, inode->ino, file_acl, &b, &r);
		if (err)
			return err;
		err = list_region(&r, &o);
		brelse(fs->bc, b);
		if (err)
			return err;
	}
	return (ssize_t)o.len;
}

/*
 * Check the in-inode xattr area when an inode is loaded, as the kernel's
 * ext4_iget() does: an inode whose area is damaged is refused as a whole,
 * so that inline data and ACLs are never read from a corrupt region.
 */
int xattr_check_ibody(struct uext4_fs *fs, struct inode *inode)
{
	struct xregion r;
	int ret = ibody_region(fs, inode, &r);

	return ret < 0 ? ret : 0;
}
