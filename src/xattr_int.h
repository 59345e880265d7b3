/*
 * xattr_int.h - xattr.c entry points not (yet) in internal.h.
 */
#ifndef UEXT4_XATTR_INT_H
#define UEXT4_XATTR_INT_H

struct uext4_fs;

/* Free the mount's shared-xattr-block index (see xattr.c).  Call once at
 * unmount, when no other thread uses fs; a later mount that happens to
 * get the same struct uext4_fs address must not find a stale index. */
void xattr_index_destroy(struct uext4_fs *fs);

#endif
