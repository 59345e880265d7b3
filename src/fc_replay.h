/*
 * fc_replay.h - replaying the kernel's fast commits (fc_replay.c), after
 * the journal's full transactions (mount.c's recovery).
 */
#ifndef UEXT4_FC_REPLAY_H
#define UEXT4_FC_REPLAY_H

#include "internal.h"

struct fc_replay;
/*
 * The scan, as the kernel's ext4_fc_replay_scan(): check the fast-commit
 * area (nblocks blocks read from the journal) for the transaction after
 * the last committed one (tid), tag by tag, each fast commit closed by a
 * tail whose crc32c and tid match.  *out gets the tags up to the last
 * good tail (NULL when there is none: nothing to replay).  As the kernel,
 * a first fast commit with a bad tail, an unknown tag or unknown features
 * is refused (-errno, message set); a bad one after a good one ends the
 * replay there.  Writes nothing.
 */
int fc_scan(struct uext4_fs *fs, const uint8_t *area, uint32_t nblocks, uint32_t tid,
	    struct fc_replay **out);
/*
 * Replay the scanned tags onto a mount that can write (transactions,
 * allocators and orphan lists set up; the caller commits): inodes, add
 * and delete ranges, links, unlinks and creates, as the kernel's
 * ext4_fc_replay(), then the bitmaps and counts of every inode touched
 * (ext4_fc_set_bitmaps_and_counters()).
 */
int fc_replay(struct uext4_fs *fs, struct fc_replay *fc);
/* Tags and fast commits the scan kept. */
void fc_counts(const struct fc_replay *fc, uint32_t *tags, uint32_t *commits);
void fc_free(struct fc_replay *fc);

#endif
