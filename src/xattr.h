/*
 * xattr.h - extended attributes (xattr.c, and EA inodes in ea_inode.c).
 */
#ifndef UEXT4_XATTR_H
#define UEXT4_XATTR_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct uext4_fs;
struct handle;
struct inode;
struct urwlock;

/* Free the mount's shared-xattr-block index (see xattr.c).  Call once at
 * unmount, when no other thread uses fs; a later mount that happens to
 * get the same struct uext4_fs address must not find a stale index. */
void xattr_index_destroy(struct uext4_fs *fs);

/* ---------------------------------------------------------------- ea_inode.c
 * Values in EA inodes; see the comment at the top of ea_inode.c. */
struct ea_index;
struct ea_index *ea_index_create(void);
void ea_index_destroy(struct ea_index *x);
/* The mount's EA index (made with the xattr index), NULL without memory. */
struct ea_index *xattr_ea_index(struct uext4_fs *fs);

/* crc32c value hash (i_atime of the EA inode). */
uint32_t ea_value_hash(struct uext4_fs *fs, const void *value, size_t size);
/* What an EA value charges its owners' i_blocks, in 512-byte units. */
uint64_t ea_quota_sectors(const struct uext4_fs *fs, uint32_t size);

/* Readers: take EA inode inum's shard (shared) while still holding the
 * owner's lock, drop the owner's lock, read, end.  NULL: no memory. */
struct urwlock *ea_read_begin(struct uext4_fs *fs, uint32_t inum);
void ea_read_end(struct urwlock *l);
/* The value (vsize bytes) of EA inode inum, named by an entry of owner;
 * size 0 asks the length.  Caller is between ea_read_begin/end. */
ssize_t ea_inode_read(struct uext4_fs *fs, uint64_t owner, uint32_t inum, uint32_t vsize,
		      void *buf, size_t size);
/* Is inum a usable EA inode (of vsize bytes, 0: any)?  0, or -EUCLEAN
 * recorded with FS_ERROR (a write path asks it).
 * Takes the shard itself. */
int ea_inode_check(struct uext4_fs *fs, uint64_t owner, uint32_t inum, uint32_t vsize);

/* Reference changes of one operation, applied at its end. */
struct ea_ref {
	uint32_t inum;
	int32_t delta;
};
struct ea_refs {
	struct ea_ref *d;
	size_t n, cap;
};
int ea_refs_add(struct ea_refs *r, uint32_t inum, int delta);
void ea_refs_free(struct ea_refs *r);
/* Apply (and zero) every change: counts change, EA inodes at 0 are freed.
 * Caller holds owner's lock and a handle.  Returns the first error. */
int ea_refs_apply(struct handle *h, uint64_t owner, struct ea_refs *r);
/* An EA inode holding value (a live one with the same bytes if this mount
 * knows one, else a new one): one reference taken for the caller, which
 * gives it to an entry or drops it (ea_refs_add(r, inum, -1)).  Caller
 * holds owner's lock for writing and a handle. */
int ea_inode_get(struct handle *h, struct inode *owner, const void *value, uint32_t size,
		 uint32_t *inum, uint32_t *hash);

/* ---------------------------------------------------------------- xattr.c */
/* Get an xattr by full name ("user.foo"); size 0 returns the needed length. */
ssize_t xattr_get(struct uext4_fs *fs, struct inode *inode, const char *name, void *buf, size_t size);
ssize_t xattr_list(struct uext4_fs *fs, struct inode *inode, char *buf, size_t size);
/* Raw lookup by index and suffix, in-inode first then the block. */
ssize_t xattr_get_raw(struct uext4_fs *fs, struct inode *inode, int index,
		      const char *name, size_t namelen, void *buf, size_t size);

/* The same in the inode body only (system.data: the kernel looks nowhere
 * else): -ENODATA if absent, -EUCLEAN if it names an EA inode.  Takes no
 * lock; any lock on inode may be held (no other inode is read). */
ssize_t xattr_get_ibody(struct uext4_fs *fs, struct inode *inode, int index, const char *name,
			size_t namelen, void *buf, size_t size);
/* Structural check of the in-inode xattr area, at inode load. */
int xattr_check_ibody(struct uext4_fs *fs, struct inode *inode);
/* The xattr block (if any) reads and passes its checks; 0 or -EUCLEAN. */
int xattr_check_block(struct uext4_fs *fs, struct inode *inode);
/*
 * Write side.  Caller holds inode->lock for writing and a handle.  value
 * NULL removes; flags XATTR_CREATE / XATTR_REPLACE.  POSIX ACL names take
 * the VFS format and are stored in ext4's.
 */
int xattr_set(struct handle *h, struct inode *inode, const char *name, const void *value,
	      size_t size, int flags);
/* By index and suffix (inline data uses system.data). */
int xattr_set_raw(struct handle *h, struct inode *inode, int index, const char *name,
		  size_t namelen, const void *value, size_t size, int flags);
/* The largest value (index, name) could take in the inode body, the other
 * in-body xattrs staying (the kernel's room for system.data); 0 if none.
 * Caller holds inode->lock for writing. */
ssize_t xattr_ibody_room(struct uext4_fs *fs, struct inode *inode, int index, const char *name,
			 size_t namelen);
/* Deleting an inode: drop its xattr block reference and EA inodes. */
int xattr_release_inode(struct handle *h, struct inode *inode);


#endif
