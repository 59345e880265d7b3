/*
 * flags.h - inode flags: immutable, append-only, sync (flags.c).
 */
#ifndef UEXT4_FLAGS_H
#define UEXT4_FLAGS_H

#include "internal.h"
#include "ondisk.h"

/* flags.c: immutable and append-only inodes refuse changes (EPERM, as the
 * kernel's IS_IMMUTABLE / IS_APPEND checks).  The caller holds n->lock. */
int flags_refuse(const struct inode *n, const char *what);
/* EPERM naming what: an fs-verity file takes no write, truncate or
 * fallocate, as the kernel's (fsverity_file_open, _prepare_setattr). */
int flags_refuse_verity(const struct inode *n, const char *what);
static inline int inode_refuse_if(const struct inode *n, uint32_t fl, const char *what)
{
	return (n->flags & fl) ? flags_refuse(n, what) : 0;
}
#define FL_NOCHANGE (EXT4_IMMUTABLE_FL | EXT4_APPEND_FL)
/* Synchronous inodes (+S) and directories (+S, +D): their changes are
 * durable when the call returns, as the kernel's IS_SYNC / IS_DIRSYNC. */
#define FL_DIRSYNC_ANY (EXT4_SYNC_FL | 0x00010000u /* DIRSYNC */)
/* If sync (read under n->lock by the caller), commit what last changed n;
 * else return err.  Called with no lock held. */
int flags_sync_commit(struct uext4_fs *fs, struct inode *n, bool sync, int err);
/* Whether directory n (locked for writing) may take or lose casefold (+F):
 * 0 or the error.  The caller's, above: it reads the directory. */
typedef int (*flags_casefold_check_fn)(struct uext4_fs *fs, struct inode *n);
/* What flags_set() changes: the flags (FS_IOC_GETFLAGS's encoding), the
 * project id, or both, in one transaction. */
struct fileattr_change {
	bool set_flags, set_projid;
	uint32_t flags, projid;
};
/* uext4_set_flags(), uext4_set_fileattr(), uext4_set_projid()
 * (include/uext4.h) with the casefold check from above: the checks of
 * ext4_fileattr_set() (owner or root, then the flags', then an immutable
 * inode keeps its id), then the change; refused, nothing changes. */
int flags_set(uext4_fs *fs, uint64_t ino, const struct fileattr_change *c,
	      flags_casefold_check_fn casefold_check);
/* ext4_mask_flags(): the flags an inode of this type may carry. */
uint32_t flags_mask_for_mode(uint32_t mode, uint32_t flags);
/* The flags a new inode of this mode takes from its directory. */
uint32_t flags_inherited(uint32_t dir_flags, uint32_t mode);


#endif
