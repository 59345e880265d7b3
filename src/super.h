/*
 * super.h - the superblock and group descriptors (super.c, groupcheck.c).
 */
#ifndef UEXT4_SUPER_H
#define UEXT4_SUPER_H

#include "internal.h"

/* After changing a group's fields: its descriptor is rewritten at commit. */
void group_set_dirty(struct uext4_fs *fs, uint32_t group);
/* Read and check the primary superblock into fs->sb and the geometry and
 * features derived from it (mount, and again after a replay). */
int super_read(struct uext4_fs *fs, bool read_only);
/* Parse every group descriptor into fs->groups (mount). */
int super_load_group_descs(struct uext4_fs *fs);
/* The superblock to its buffer and straight to the device, flushed, with
 * last_orphan (disk byte order) as its orphan list head (mount, unmount). */
int super_write_now(struct uext4_fs *fs, uint32_t last_orphan);
/* Set or clear an incompat feature bit in memory (needs_recovery). */
void super_set_incompat(struct uext4_fs *fs, uint32_t bit, bool on);
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
/* groupcheck.c: before a read-write mount, every group's bitmaps and
 * inode table lie in range and overlap nothing (-EUCLEAN naming them),
 * and the bad-blocks inode's map is sound: its blocks are left in
 * fs->bad_blocks for balloc_init(). */
int super_check_groups(struct uext4_fs *fs);
/* Names of the feature bits set in the three masks, space separated. */
void super_feature_names(uint32_t compat, uint32_t incompat, uint32_t ro_compat,
			 char *buf, size_t size);

#endif
