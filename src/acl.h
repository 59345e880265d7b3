/*
 * acl.h - POSIX ACLs (acl.c; the getxattr/setxattr translation is in
 * xattr.c): the on-disk format's constants, inheritance at create, and the
 * rewrite of the access ACL at chmod.
 */
#ifndef UEXT4_ACL_H
#define UEXT4_ACL_H

#include <stddef.h>
#include <stdint.h>

struct uext4_fs;
struct handle;
struct inode;


/*
 * On disk (the kernel's fs/ext4/acl.h): a 4-byte header (version 1), then
 * entries of 4 bytes (tag, perm) for USER_OBJ/GROUP_OBJ/MASK/OTHER, or 8
 * bytes (tag, perm, id) for USER/GROUP, all little-endian.  getxattr(2)
 * uses the VFS format (include/uapi/linux/posix_acl_xattr.h): a 4-byte
 * header (version 2), then 8-byte entries (tag, perm, id), id = -1 unless
 * USER/GROUP.
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

/* What a new inode gets from its directory's default ACL: on-disk values
 * (malloc()ed, NULL = none), computed before the handle opens. */
struct acl_inherit {
	uint8_t *access, *deflt;
	size_t access_len, deflt_len;
};

/*
 * As the kernel's posix_acl_create(), for a new inode of *mode in dir
 * (dir locked for writing): with a default ACL on dir, *mode's permission
 * bits are masked by it and ai gets the new inode's access ACL (when the
 * mode alone cannot say it) and, for a directory, its default ACL; without
 * one, the caller's umask (uext4_set_umask()) masks *mode.  Symlinks get
 * neither.  0, or -EUCLEAN (recorded) for a corrupt default ACL, -ENOMEM.
 */
int acl_inherit_prepare(struct uext4_fs *fs, struct inode *dir, uint32_t *mode,
			struct acl_inherit *ai);
/* Store ai's ACLs on the new inode n (inside the create's handle; a
 * failure is undone with the inode, by xattr_release_inode()). */
int acl_inherit_apply(struct handle *h, struct inode *n, const struct acl_inherit *ai);
void acl_inherit_free(struct acl_inherit *ai);

/*
 * n's mode changed (setattr): rewrite its access ACL to match, as the
 * kernel's posix_acl_chmod(): ACL_USER_OBJ, ACL_MASK (or ACL_GROUP_OBJ
 * without a mask) and ACL_OTHER take the new permission bits.  n locked
 * for writing, inside a handle; call before anything else changes.
 */
int acl_chmod(struct handle *h, struct inode *n, uint32_t mode);

#endif
