/*
 * acl.h - POSIX ACLs (acl.c; the getxattr/setxattr translation is in
 * xattr.c): inheritance at create, and the
 * rewrite of the access ACL at chmod.
 */
#ifndef UEXT4_ACL_H
#define UEXT4_ACL_H

#include <stddef.h>
#include <stdint.h>

struct uext4_fs;
struct handle;
struct inode;

/* The on-disk and getxattr(2) formats' constants are in ondisk.h. */

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
