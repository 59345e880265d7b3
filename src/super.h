/*
 * super.h - mount, unmount, superblock and group descriptors (super.c, groupcheck.c).
 */
#ifndef UEXT4_SUPER_H
#define UEXT4_SUPER_H

#include "blockdev.h"
#include "internal.h"

/* After changing a group's fields: its descriptor is rewritten at commit. */
void group_set_dirty(struct uext4_fs *fs, uint32_t group);
int super_mount(const char *path, const struct uext4_opts *opts, struct uext4_fs **out);
/* Mount a device (which the mount then owns, also on failure): tests
 * mount crash-recording and memory devices with it. */
int super_mount_bdev(struct bdev *dev, const struct uext4_opts *opts, struct uext4_fs **out);
/* Write back everything (read-write mounts) and free the mount.  Returns
 * the first write-back error. */
int super_umount(struct uext4_fs *fs);
/* Fill the superblock's counters and checksum into its buffer (commit). */
int super_write(struct uext4_fs *fs);
/* The mount's first write (trans.c, commit lock held, handles drained):
 * the superblock as the mount set it (needs_recovery, mount count and
 * time, orphan_present), written and flushed before anything else. */
int super_begin_writing(struct uext4_fs *fs);
/* Serialise fs->groups[g] into its descriptor block (commit). */
int super_write_group_desc(struct uext4_fs *fs, uint32_t g);
/* The superblock changed besides its counters: write it at the next commit. */
void super_mark_dirty(struct uext4_fs *fs);
/* Does group g hold a superblock backup (sparse_super, sparse_super2)? */
bool super_group_has_super(struct uext4_fs *fs, uint32_t g);
/* Block holding group's descriptor, and its byte offset there (meta_bg
 * aware, as the kernel's descriptor_loc()). */
uint64_t super_desc_location(struct uext4_fs *fs, uint32_t group, uint32_t *offset);
/* groupcheck.c: before a read-write mount, every group's bitmaps and
 * inode table lie in range and overlap nothing (-EUCLEAN naming them),
 * and the bad-blocks inode's map is sound: its blocks are left in
 * fs->bad_blocks for balloc_init(). */
int super_check_groups(struct uext4_fs *fs);
/* Names of the feature bits set in the three masks, space separated. */
void super_feature_names(uint32_t compat, uint32_t incompat, uint32_t ro_compat,
			 char *buf, size_t size);


/* The journal's callbacks into the file system (journal.h): the journal
 * inode, and the error mark after a replay that skipped blocks. */
struct journal_host;
extern const struct journal_host super_journal_host;

#endif
