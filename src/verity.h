/*
 * verity.h - fs-verity (verity.c): verified reads of a file with
 * EXT4_VERITY_FL, enabling verity (the Merkle tree and descriptor written
 * past the end of the file, as ext4's), measuring, reading the metadata.
 */
#ifndef UEXT4_VERITY_H
#define UEXT4_VERITY_H

#include "internal.h"

#include <sys/types.h>

struct uext4_verity_enable;
struct uext4_verity_digest;

/* Read [off, off+size) of a verity file (clamped to i_size), each Merkle
 * block of data checked against the tree; EIO naming the inode and block
 * on a mismatch.  Takes inode->lock for reading. */
ssize_t verity_pread(struct uext4_fs *fs, struct inode *inode, void *buf, size_t size,
		     uint64_t off);
/* FS_IOC_ENABLE_VERITY on a referenced regular inode (takes its lock). */
int verity_enable(struct uext4_fs *fs, struct inode *inode, const struct uext4_verity_enable *a);
/* FS_IOC_MEASURE_VERITY: the file digest. */
int verity_measure(struct uext4_fs *fs, struct inode *inode, struct uext4_verity_digest *d);
/* FS_IOC_READ_VERITY_METADATA: bytes read (0 past the end) or -errno. */
ssize_t verity_read_metadata(struct uext4_fs *fs, struct inode *inode, int type, uint64_t off,
			     void *buf, size_t len);
/* Free inode->verity (the inode cache's host, as the inode is freed). */
void verity_release(struct inode *inode);

#endif
