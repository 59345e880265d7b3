/*
 * quota.h - quota accounting (quota.c): user, group and project usage
 * kept in the quota files of a -O quota image, in the kernel's format
 * (quotatree.h), in the same transaction as the change it counts.
 */
#ifndef UEXT4_QUOTA_H
#define UEXT4_QUOTA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "internal.h"

/* What quota.c needs from the data layer above it, as struct commit_host:
 * the mount fills it in (file.c's mapping), so quota.c calls nothing above
 * the objects layer.  map: the physical block of the quota inode's
 * logical block lblk; with h (inside the handle, quota lock held) a hole
 * is allocated and *fresh says so (its bytes are the caller's to zero);
 * without h a hole gives *pblk = 0. */
struct quota_host {
	int (*map)(struct uext4_fs *fs, struct handle *h, struct inode *qinode, uint64_t lblk, uint64_t *pblk,
		   bool *fresh);
};

/* Read-write mount of a quota image: take the quota inodes named by the
 * superblock, check their headers and read every id's entry into memory.
 * 0 (also without -O quota: then nothing is counted). */
int quota_load(struct uext4_fs *fs, const struct quota_host *host);
/* Unmount: drop the quota inodes and the in-memory entries (after the
 * last commit). */
void quota_destroy(struct uext4_fs *fs);
/* The commit (commit_host.write_quota), with every handle drained: every
 * id whose usage changed has its entry rewritten in its quota block
 * (cached, dirtied into this transaction).  No allocation, no handle. */
int quota_fold(struct uext4_fs *fs);

/* Accounting, called by inode.c; an inode's charge is what its last
 * inode_write() said: i_blocks, one inode, to its uid, gid and projid. */
/* A loaded inode: it is charged already (the files say so). */
void quota_inode_loaded(struct uext4_fs *fs, struct inode *n);
/* A new inode: nothing charged yet; its first write charges it. */
void quota_inode_new(struct inode *n);
/* Before writing n's fields (no slot lock held): the ids it will be
 * charged to have entries, new ones inserted into the quota files in h
 * (the kernel's dquot_acquire()).  0 or an error (ENOSPC). */
int quota_prepare(struct handle *h, struct inode *n);
/* Under n's slot lock, as its fields are encoded: move its charge from
 * what it was to what the fields say (blocks, ids). */
void quota_sync(struct uext4_fs *fs, struct inode *n);
/* n is being freed (links 0, under its lock, or an undone create): its
 * charge goes, and later writes charge nothing. */
void quota_inode_gone(struct uext4_fs *fs, struct inode *n);

/* chown, chgrp, a project change: n's ids become uid, gid, projid, with
 * the entries of new ids made in h; the usage moves at the inode_write()
 * the caller does next (dquot_transfer()).  A new id's limits are
 * checked first (EDQUOT; uid 0 passes).  Caller holds n->lock for
 * writing, inside h.  0 or an error; on error n is unchanged. */
int quota_transfer(struct handle *h, struct inode *n, uint32_t uid, uint32_t gid,
		   uint32_t projid);

/* Limits (the kernel's check_bdq(), check_idq()), checked before an
 * allocation; exempt: the caller may pass them (uid 0, CAP_SYS_RESOURCE).
 * Space: n (inode lock held) is to get up to *want blocks of unit bytes;
 * *want is cut to what its ids' limits leave (all of it or EDQUOT if
 * whole).  Inode: a new inode of these (user, group, project) ids, and
 * room for space more bytes (a new directory's block: refused before
 * the inode is taken, so that nothing is written).
 * 0 or -EDQUOT; passing a soft limit starts its grace timer. */
int quota_check_space(struct uext4_fs *fs, struct inode *n, uint64_t unit, uint32_t *want,
		      bool whole, bool exempt);
int quota_check_inode(struct uext4_fs *fs, const uint32_t ids[3], uint64_t space, bool exempt);

/* The API's (api.c): an id's entry with its usage now (-ENOENT: no entry;
 * *e zero but id); new limits (lim's four limit fields, 1 KiB blocks and
 * inodes; the entry made in h if new, written by the commit's fold);
 * the file's grace times, read and written (in h); every id of a type,
 * sorted, in a malloc()ed array.  -EOPNOTSUPP: no such quota file
 * loaded; -EINVAL: no such type. */
struct qt_entry;
int quota_get(struct uext4_fs *fs, int type, uint32_t id, struct qt_entry *e);
int quota_set_limits(struct handle *h, int type, uint32_t id, const struct qt_entry *lim);
int quota_grace(struct uext4_fs *fs, int type, uint32_t *bgrace, uint32_t *igrace);
int quota_set_grace(struct handle *h, int type, uint32_t bgrace, uint32_t igrace);
int quota_ids(struct uext4_fs *fs, int type, uint32_t **ids, size_t *count);

/* For tests and `uext4 stats`: the in-memory usage of (type, id):
 * space in bytes and inodes; false if the id has no entry. */
bool quota_usage(struct uext4_fs *fs, int type, uint32_t id, int64_t *space, int64_t *inodes);

#endif
