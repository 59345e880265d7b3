/*
 * mmp.h - multi-mount protection, -O mmp (mmp.c).
 */
#ifndef UEXT4_MMP_H
#define UEXT4_MMP_H

#include <stdbool.h>
#include <stdint.h>

struct uext4_fs;
struct mmp_struct;

/*
 * A read-write mount of an mmp file system, before anything is written
 * (the journal replay included): claim the MMP block as the kernel's
 * ext4_multi_mount_protect() does, then start the thread that rewrites its
 * sequence every s_mmp_update_interval seconds.  devname (may be NULL) is
 * what the block names as our device.  Does nothing without the feature.
 * 0; -EBUSY naming the holder's node and device (in use, or e2fsck runs);
 * -EUCLEAN for a bad MMP block.  May wait up to 2 check intervals + 1 s
 * (at most 360 s) when the block was not left clean.
 */
int mmp_start(struct uext4_fs *fs, const char *devname);
/* Unmount (also of a failed mount): stop and join the thread, then mark
 * the block clean if it is still ours.  0 or -errno. */
int mmp_stop(struct uext4_fs *fs);
/* mkfs: a clean MMP block for a file system whose checksum seed is
 * csum_seed (0 and metadata_csum false: no checksum), as e2fsprogs'
 * ext2fs_mmp_reset(): CLEAN, this host's name, devname, written at time,
 * the check interval from update_secs. */
void mmp_init_block(struct mmp_struct *m, uint16_t update_secs, const char *devname,
		    int64_t time, bool metadata_csum, uint32_t csum_seed);

#endif
