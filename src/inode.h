/*
 * inode.h - the on-disk inode (inode.c): loading, writing, creating;
 * struct inode is in internal.h, the cache that holds it in icache.h.
 */
#ifndef UEXT4_INODE_H
#define UEXT4_INODE_H

#include "internal.h"

/* The slot locks of a mount's inode table (fs->islots), or NULL. */
struct inode_slots *inode_slots_create(void);
void inode_slots_destroy(struct inode_slots *t);
/* Get an inode (loading and verifying it); drop with iput() (icache.h). */
int iget(struct uext4_fs *fs, uint64_t ino, struct inode **out);
/* Copy the attributes of a peeked inode (holding one reference, under its
 * lock, as a stat does); false if it was dead or unusable (deleted, being
 * created) meanwhile. */
bool inode_stat_peeked(struct uext4_fs *fs, struct inode *n, struct uext4_stat *st);
/* One more lookup of ino handed to the frontend (uext4_lookup_ref());
 * st (may be NULL) is filled from the same inode.  0 or -errno, no count. */
int inode_lookup_ref(struct uext4_fs *fs, uint64_t ino, struct uext4_stat *st);
/* inode_lookup_ref() of the number a file handle holds (uext4_lookup_handle()):
 * -ESTALE if it names no file now. */
int inode_lookup_handle(struct uext4_fs *fs, uint64_t ino, struct uext4_stat *st);
/* inode_lookup_ref() of an inode the caller already holds: cannot fail. */
void inode_lookup_ref_held(struct uext4_fs *fs, struct inode *n, struct uext4_stat *st);
void inode_to_stat(struct uext4_fs *fs, const struct inode *inode, struct uext4_stat *st);

/* Legacy orphan list: the inode's on-disk i_dtime holds the next orphan's
 * number; store it in inode->orphan_next_ino, then call this to put it in
 * the inode-table block (under its slot lock, no inode->lock needed, as
 * the kernel's NEXT_ORPHAN update of the previous inode). */
int inode_write_orphan_link(struct handle *h, struct inode *inode);
/* The creator of a new inode has filled it in (its fields, body and
 * first name): from now on iget() hands it out.  Not called for a new
 * inode that is given back. */
void inode_created(struct inode *inode);
/*
 * Allocate and initialise a new inode (ialloc_alloc() picks the number)
 * of the given mode, owned by the caller, in the cache with one reference,
 * with the link count of its first name (2 for a directory).
 * The caller holds dir's lock for writing and a handle; the new inode is
 * written to its inode-table block (never read from disk if every in-use
 * inode there is new).  Its lock is not held: nobody can reach it yet.
 */
int inode_new(struct handle *h, struct inode *dir, uint32_t mode, struct inode **out);
/*
 * What an inode allocation changed, so that an operation failing in its
 * handle can put back every byte (a refused operation changes nothing
 * on disk): the descriptor fields the claim moved (ialloc.c) and the
 * slot's previous bytes in its
 * inode-table buffer (inode.c; zeros for a block built zeroed).  On the
 * caller's stack, private to the creating thread.
 */
struct ialloc_undo {
	uint32_t group;
	uint32_t prev_flags, prev_itable_unused;  /* before the claim */
	bool valid;
};
#define INODE_UNDO_SLOT_MAX 1024
struct inode_undo {
	struct ialloc_undo ia;
	bool slot_saved;        /* false: inode_size > INODE_UNDO_SLOT_MAX */
	uint8_t slot[INODE_UNDO_SLOT_MAX];
};
/* inode_new() recording in *u (not NULL) what to put back. */
int inode_new_undoable(struct handle *h, struct inode *dir, uint32_t mode, struct inode **out,
		       struct inode_undo *u);
/* Undo: the new inode's slot gets back the bytes u saved (0, or -errno). */
int inode_restore_slot(struct handle *h, struct inode *n, const struct inode_undo *u);
/*
 * Write the inode's fields (and raw i_block / in-inode xattrs) to its
 * inode-table buffer with its checksum, and dirty the buffer.  Whoever
 * changes an inode's fields calls this before its handle ends; twice is
 * harmless.  Caller holds inode->lock for writing (or owns a new inode),
 * or, for a directory changed in parallel, for reading with the
 * directory's attribute stripe lock (dirtimes_touch_shared()).
 */
int inode_write(struct handle *h, struct inode *inode);
/*
 * Set n's project id (FS_IOC_FSSETXATTR's fsx_projid), as the kernel's
 * ext4_ioctl_setproject(): 0 is always accepted; another id needs the
 * project feature and inodes larger than 128 bytes (EOPNOTSUPP); quota
 * files refuse (EPERM); an i_extra_isize short of i_projid grows (or
 * EOVERFLOW).  The only place an existing inode's projid changes (quota
 * transfer goes in it).  In memory only: the caller, holding n->lock for
 * writing and h, sets ctime and calls inode_write().  On error nothing
 * changed.
 */
int inode_set_projid(struct handle *h, struct inode *n, uint32_t projid);
/* The time the library stamps on fs: fixed_time under uext4_opts.use_fixed_time
 * (reproducible images), else fs_now(); as fs_fit_time() gives it. */
struct timespec fs_time(const struct uext4_fs *fs);
/*
 * A cache above the library stamped ts with its own clock (the FUSE
 * writeback cache: the kernel's current_time(), which since Linux 6.13 may
 * run ahead of the coarse clock we read, up to the fine times it handed
 * out).  From now on fs_time() gives no less, so an object made after that
 * stamp does not look older than it (fstests generic/423).  A ts ahead of
 * the real clock is ignored.
 */
void fs_time_floor_raise(struct uext4_fs *fs, struct timespec ts);
/*
 * ts as an inode of fs holds it, as the kernel's VFS truncates every time it
 * sets (timestamp_truncate() with ext4's s_time_min, s_time_max and
 * s_time_gran): the seconds clamped to [EXT4_TIME_MIN, the maximum for the
 * inode size], no nanoseconds at either limit, nor on 128-byte inodes
 * (which have no *_extra fields).  inode_write() applies it to every time it
 * stores; callers use it where they show a time before that.
 */
struct timespec fs_fit_time(const struct uext4_fs *fs, struct timespec ts);
/* ts as one time field holds it, with its *_extra word (extra) or without. */
struct timespec ext4_time_fit(struct timespec ts, bool extra);
/* EXT4_FT_* directory-entry type of a mode. */
unsigned ftype_of_mode(uint32_t mode);
/* Block and offset of an inode in its inode table. */
int inode_location(struct uext4_fs *fs, uint64_t ino, uint64_t *blocknr, uint32_t *offset);

/* Fast-commit replay: the logged raw inode into ino's slot, as the
 * kernel's ext4_fc_replay_inode() (i_block kept); a cached copy reloads. */
int inode_replay_raw(struct handle *h, uint64_t ino, const uint8_t *fc_raw, size_t len);

#endif
