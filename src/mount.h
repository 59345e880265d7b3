/*
 * mount.h - mount and unmount (mount.c).
 */
#ifndef UEXT4_MOUNT_H
#define UEXT4_MOUNT_H

#include "blockdev.h"
#include "internal.h"

int super_mount(const char *path, const struct uext4_opts *opts, struct uext4_fs **out);
/* Mount a device (which the mount then owns, also on failure): tests
 * mount crash-recording and memory devices with it. */
int super_mount_bdev(struct bdev *dev, const struct uext4_opts *opts, struct uext4_fs **out);
/* Write back everything (read-write mounts) and free the mount.  Returns
 * the first write-back error. */
int super_umount(struct uext4_fs *fs);

/* The journal's callbacks into the file system (journal.h): the journal
 * inode, and the error mark after a replay that skipped blocks. */
struct journal_host;
extern const struct journal_host super_journal_host;

#endif
