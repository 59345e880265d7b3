/*
 * acl.c - POSIX ACLs the library applies itself: a new inode inherits its
 * directory's default ACL (create, mknod, mkdir), and a chmod rewrites
 * the access ACL.  These follow the kernel's fs/posix_acl.c
 * (posix_acl_create(), posix_acl_chmod()) as ext4 uses them, so that an
 * image written here carries the ACLs and modes the kernel's ext4 would
 * have written.  Checking permissions against ACLs is not done here: the
 * FUSE frontend lets the kernel do it (FUSE_CAP_POSIX_ACL).
 *
 * The ACLs are read and written in ext4's on-disk format (acl.h)
 * through the raw xattr calls; the translation to and from the format of
 * getxattr(2)/setxattr(2) is xattr.c's.
 */
#include "acl.h"
#include "caller.h"
#include "error.h"
#include "internal.h"
#include "ondisk.h"
#include "xattr.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ------------------------------------------------------------ format */

struct acl_entry {
	uint16_t tag, perm;
	uint32_t id;
};

struct acl {
	size_t n;
	struct acl_entry *e;    /* malloc()ed */
};

static bool acl_tag_long(uint16_t tag)
{
	return tag == ACL_TAG_USER || tag == ACL_TAG_GROUP;
}

/* Read one on-disk entry at *p (advanced past it): 0 or -1. */
static int disk_entry(const uint8_t **p, const uint8_t *end, struct acl_entry *e)
{
	uint16_t v;
	uint32_t id;

	if (end - *p < ACL_SHORT_ENTRY)
		return -1;
	memcpy(&v, *p, 2);
	e->tag = le16(v);
	memcpy(&v, *p + 2, 2);
	e->perm = le16(v);
	e->id = ACL_UNDEFINED_ID;
	if (acl_tag_long(e->tag)) {
		if (end - *p < ACL_LONG_ENTRY)
			return -1;
		memcpy(&id, *p + 4, 4);
		e->id = le32(id);
	}
	*p += acl_tag_long(e->tag) ? ACL_LONG_ENTRY : ACL_SHORT_ENTRY;
	return 0;
}

/* The order and content posix_acl_valid() demands: USER_OBJ, USER...,
 * GROUP_OBJ, GROUP..., MASK (needed with named entries), OTHER. */
static bool acl_well_formed(const struct acl *a)
{
	static const uint16_t order[] = { ACL_TAG_USER_OBJ, ACL_TAG_USER, ACL_TAG_GROUP_OBJ,
					  ACL_TAG_GROUP, ACL_TAG_MASK, ACL_TAG_OTHER };
	unsigned count[6] = { 0 }, pos = 0;

	for (size_t i = 0; i < a->n; i++) {
		unsigned k = 0;

		while (k < 6 && order[k] != a->e[i].tag)
			k++;
		if (k == 6 || k < pos || (a->e[i].perm & ~7u))
			return false;
		pos = k;
		count[k]++;
	}
	return count[0] == 1 && count[2] == 1 && count[5] == 1 && count[4] <= 1 &&
	       (count[4] == 1 || count[1] + count[3] == 0);
}

/* Parse an on-disk ACL; a->n 0 (header alone) means none. */
static int acl_parse(uint64_t ino, const char *what, const uint8_t *raw, size_t len,
		     struct acl *a)
{
	const uint8_t *p = raw + ACL_HDR, *end = raw + len;
	uint32_t version;
	size_t cap;

	a->n = 0;
	a->e = NULL;
	if (len < ACL_HDR)
		goto corrupt;
	memcpy(&version, raw, 4);
	if (le32(version) != ACL_DISK_VERSION)
		goto corrupt;
	if (len == ACL_HDR)
		return 0;
	cap = (len - ACL_HDR) / ACL_SHORT_ENTRY;
	if (cap == 0)
		goto corrupt;
	a->e = malloc(cap * sizeof(*a->e));
	if (!a->e)
		return fs_err(ENOMEM, "%s ACL of inode %llu: out of memory", what,
			      (unsigned long long)ino);
	while (p < end)
		if (disk_entry(&p, end, &a->e[a->n++]))
			goto corrupt;
	if (acl_well_formed(a))
		return 0;
corrupt:
	free(a->e);
	a->e = NULL;
	a->n = 0;
	return fs_corrupt("%s ACL of inode %llu: malformed (%zu bytes)", what,
			  (unsigned long long)ino, len);
}

/* Serialise a to the on-disk format (malloc()ed *out). */
static int acl_format(uint64_t ino, const struct acl *a, uint8_t **out, size_t *outlen)
{
	uint8_t *d = malloc(ACL_HDR + a->n * ACL_LONG_ENTRY);
	size_t o = ACL_HDR;
	uint32_t v32 = cpu_to_le32(ACL_DISK_VERSION);

	if (!d)
		return fs_err(ENOMEM, "ACL of inode %llu: out of memory", (unsigned long long)ino);
	memcpy(d, &v32, 4);
	for (size_t i = 0; i < a->n; i++) {
		uint16_t tag = cpu_to_le16(a->e[i].tag), perm = cpu_to_le16(a->e[i].perm);

		memcpy(d + o, &tag, 2);
		memcpy(d + o + 2, &perm, 2);
		if (acl_tag_long(a->e[i].tag)) {
			v32 = cpu_to_le32(a->e[i].id);
			memcpy(d + o + 4, &v32, 4);
			o += ACL_LONG_ENTRY;
		} else {
			o += ACL_SHORT_ENTRY;
		}
	}
	*out = d;
	*outlen = o;
	return 0;
}

/*
 * Read inode's ACL of index (caller keeps inode->raw stable: it holds
 * the lock).  -ENODATA when there is none (or it has no entries); a
 * corrupt one is recorded, as this runs on write paths only.
 */
static int acl_read(struct uext4_fs *fs, struct inode *inode, int index, struct acl *a)
{
	const char *what = index == EXT4_XATTR_INDEX_POSIX_ACL_ACCESS ? "access" : "default";
	ssize_t need = xattr_get_raw(fs, inode, index, "", 0, NULL, 0), n;
	uint8_t *raw;
	int err;

	a->n = 0;
	a->e = NULL;
	if (need < 0)
		return need == -ENODATA ? -ENODATA : FS_ERROR_SEEN(fs, (int)need, inode->ino, 0);
	raw = malloc(need ? (size_t)need : 1);
	if (!raw)
		return fs_err(ENOMEM, "%s ACL of inode %llu: out of memory", what,
			      (unsigned long long)inode->ino);
	n = xattr_get_raw(fs, inode, index, "", 0, raw, need ? (size_t)need : 1);
	err = n < 0 ? (int)n : acl_parse(inode->ino, what, raw, (size_t)n, a);
	free(raw);
	if (err)
		return FS_ERROR_SEEN(fs, err, inode->ino, 0);
	return a->n ? 0 : -ENODATA;
}

/* ------------------------------------------------------------ create */

/*
 * posix_acl_create_masq(): the permission bits of *mode that the ACL does
 * not grant go, and the ACL's owner, other and mask (else owning group)
 * entries keep only what *mode asks.  True when the result needs an ACL
 * (named entries or a mask) beyond the mode.
 */
static bool acl_create_masq(struct acl *a, uint32_t *mode)
{
	struct acl_entry *group = NULL, *mask = NULL;
	uint32_t m = *mode;
	bool extended = false;

	for (size_t i = 0; i < a->n; i++) {
		struct acl_entry *e = &a->e[i];

		switch (e->tag) {
		case ACL_TAG_USER_OBJ:
			e->perm &= (m >> 6) & 7;
			m = (m & ~0700u) | ((uint32_t)e->perm << 6);
			break;
		case ACL_TAG_OTHER:
			e->perm &= m & 7;
			m = (m & ~07u) | e->perm;
			break;
		case ACL_TAG_GROUP_OBJ:
			group = e;
			break;
		case ACL_TAG_MASK:
			mask = e;
			extended = true;
			break;
		default:        /* named users and groups */
			extended = true;
			break;
		}
	}
	/* acl_well_formed() saw a GROUP_OBJ (every valid ACL has one). */
	struct acl_entry *g = mask ? mask : group;

	g->perm &= (m >> 3) & 7;
	m = (m & ~070u) | ((uint32_t)g->perm << 3);
	*mode = m;
	return extended;
}

int acl_inherit_prepare(struct uext4_fs *fs, struct inode *dir, uint32_t *mode,
			struct acl_inherit *ai)
{
	struct acl a;
	int err;

	memset(ai, 0, sizeof(*ai));
	if (S_ISLNK(*mode))
		return 0;
	err = acl_read(fs, dir, EXT4_XATTR_INDEX_POSIX_ACL_DEFAULT, &a);
	if (err == -ENODATA) {
		*mode &= ~caller_umask();
		return 0;
	}
	if (err)
		return err;
	if (S_ISDIR(*mode))
		err = acl_format(dir->ino, &a, &ai->deflt, &ai->deflt_len);
	if (!err && acl_create_masq(&a, mode))
		err = acl_format(dir->ino, &a, &ai->access, &ai->access_len);
	free(a.e);
	if (err)
		acl_inherit_free(ai);
	return err;
}

int acl_inherit_apply(struct handle *h, struct inode *n, const struct acl_inherit *ai)
{
	int err = 0;

	/* The kernel's ext4_init_acl(): the default ACL first. */
	if (ai->deflt)
		err = xattr_set_raw(h, n, EXT4_XATTR_INDEX_POSIX_ACL_DEFAULT, "", 0, ai->deflt,
				    ai->deflt_len, 0);
	if (!err && ai->access)
		err = xattr_set_raw(h, n, EXT4_XATTR_INDEX_POSIX_ACL_ACCESS, "", 0, ai->access,
				    ai->access_len, 0);
	return err;
}

void acl_inherit_free(struct acl_inherit *ai)
{
	free(ai->access);
	free(ai->deflt);
	memset(ai, 0, sizeof(*ai));
}

/* ------------------------------------------------------------ chmod */

/* posix_acl_chmod_masq(): owner, mask (else owning group) and other take
 * the permission bits of mode; named entries stay.  True when an entry
 * changed. */
static bool acl_chmod_masq(struct acl *a, uint32_t mode)
{
	struct acl_entry *group = NULL, *mask = NULL;
	bool changed = false;

	for (size_t i = 0; i < a->n; i++) {
		struct acl_entry *e = &a->e[i];
		uint16_t want = e->perm;

		if (e->tag == ACL_TAG_USER_OBJ)
			want = (mode >> 6) & 7;
		else if (e->tag == ACL_TAG_OTHER)
			want = mode & 7;
		else if (e->tag == ACL_TAG_GROUP_OBJ)
			group = e;
		else if (e->tag == ACL_TAG_MASK)
			mask = e;
		changed |= want != e->perm;
		e->perm = want;
	}
	struct acl_entry *g = mask ? mask : group;

	changed |= g->perm != ((mode >> 3) & 7);
	g->perm = (mode >> 3) & 7;
	return changed;
}

int acl_chmod(struct handle *h, struct inode *n, uint32_t mode)
{
	struct uext4_fs *fs = h->fs;
	struct acl a;
	uint8_t *disk = NULL;
	size_t len = 0;
	int err;

	if (S_ISLNK(n->mode))
		return 0;
	err = acl_read(fs, n, EXT4_XATTR_INDEX_POSIX_ACL_ACCESS, &a);
	if (err)
		return err == -ENODATA ? 0 : err;
	bool changed = acl_chmod_masq(&a, mode);
	bool extended = false;

	for (size_t i = 0; i < a.n; i++)
		extended |= acl_tag_long(a.e[i].tag) || a.e[i].tag == ACL_TAG_MASK;
	/* As posix_acl_update_mode() in ext4_set_acl(): an ACL the mode now
	 * says all of is removed. */
	if (!extended)
		err = xattr_set_raw(h, n, EXT4_XATTR_INDEX_POSIX_ACL_ACCESS, "", 0, NULL, 0, 0);
	else if (changed && !(err = acl_format(n->ino, &a, &disk, &len)))
		err = xattr_set_raw(h, n, EXT4_XATTR_INDEX_POSIX_ACL_ACCESS, "", 0, disk, len, 0);
	free(disk);
	free(a.e);
	return err;
}
