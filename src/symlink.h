/*
 * symlink.h - symlinks (symlink.c): reading the target, and writing it (api.c).
 */
#ifndef UEXT4_SYMLINK_H
#define UEXT4_SYMLINK_H

#include "internal.h"

/*
 * Store the target of a new symlink: fast (in i_block) below 60 bytes,
 * else in one data block.  Sets i_size and writes the inode.  Caller holds
 * inode->lock for writing (or owns the new inode) and a handle.
 * -ENAMETOOLONG when the target does not fit in a block.
 */
int symlink_write(struct handle *h, struct inode *inode, const char *target, size_t len);

/* ---------------------------------------------------------------- symlink.c */
ssize_t symlink_read(struct uext4_fs *fs, struct inode *inode, char *buf, size_t size);
/* The body of a new symlink: fast (in i_block) below 60 bytes, else a
 * block.  Caller holds the inode's write lock and a handle. */

#endif
