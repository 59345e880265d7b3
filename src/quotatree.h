/*
 * quotatree.h - the kernel's quota file format, v2r1 (quotatree.c).
 *
 * A quota file is a run of 1 KiB quota blocks whatever the file system's
 * block size: block 0 holds the header (magic per type, version 1) and the
 * info (grace times, the file's length in quota blocks, the heads of the
 * free-block and free-entry lists); block 1 is the root of a 4-level tree
 * of 256 little-endian block references, indexed by the id's bytes from
 * the most significant; the leaves point to data blocks of 14 entries of
 * 72 bytes (struct v2r1_disk_dqblk) after a 16-byte header (next and
 * previous data block with free entries, entry count).  Facts from the
 * kernel's fs/quota/quota_tree.c, quotaio_v2.h and e2fsprogs'
 * lib/support/quotaio_tree.c; the code is ours.
 *
 * This module knows only the format: the file's blocks come and go through
 * struct qt_io, which the caller backs with a quota inode inside a handle
 * (quota.c) or with memory (mkfs, tests).  No state, no locks: the caller
 * serialises changes to one file.
 */
#ifndef UEXT4_QUOTATREE_H
#define UEXT4_QUOTATREE_H

#include <stdint.h>

#define QT_BLOCK_SIZE 1024u
#define QT_ENTRY_SIZE 72u
#define QT_DATA_HEADER 16u
#define QT_ENTRIES_PER_BLOCK ((QT_BLOCK_SIZE - QT_DATA_HEADER) / QT_ENTRY_SIZE)
#define QT_DEFAULT_GRACE (7u * 24 * 60 * 60)   /* mke2fs's, and the kernel's */

enum qt_type { QT_USER = 0, QT_GROUP = 1, QT_PROJECT = 2, QT_NTYPES = 3 };

/* The file's blocks.  write() of block n where n is the file's length in
 * blocks extends it by one; 0 or a negative errno. */
struct qt_io {
	void *ctx;
	int (*read)(void *ctx, uint32_t blk, uint8_t *buf);
	int (*write)(void *ctx, uint32_t blk, const uint8_t *buf);
};

/* One id's record: limits in 1 KiB units (as stored), space in bytes. */
struct qt_entry {
	uint32_t id;
	uint64_t ihardlimit, isoftlimit, curinodes;
	uint64_t bhardlimit, bsoftlimit, curspace;
	uint64_t btime, itime;
};

/* Where an entry sits: quota block and byte offset in it. */
struct qt_where {
	uint32_t blk, off;
};

struct qt_info {
	uint32_t bgrace, igrace, flags, blocks, free_blk, free_entry;
};

/* A new file: header, info (grace QT_DEFAULT_GRACE), an empty root. */
int qt_format(const struct qt_io *io, enum qt_type type);
/* Check the header's magic and version, read the info: 0 or -EUCLEAN. */
int qt_read_info(const struct qt_io *io, enum qt_type type, struct qt_info *info);
/* Rewrite the info's grace times (seconds), the rest kept. */
int qt_set_grace(const struct qt_io *io, uint32_t bgrace, uint32_t igrace);
/* Find id: 0 with *e and *w filled in, -ENOENT, or an error. */
int qt_lookup(const struct qt_io *io, uint32_t id, struct qt_entry *e, struct qt_where *w);
/* Add id with e's values (e->id is set to id): takes a free entry or a new
 * data block, and new tree blocks as needed, as the kernel's
 * qtree_write_dquot() of a new dquot.  -EEXIST if id is there. */
int qt_insert(const struct qt_io *io, uint32_t id, const struct qt_entry *e,
	      struct qt_where *w);
/* Every entry, in id order; fn's nonzero return stops the walk and is
 * returned. */
int qt_iterate(const struct qt_io *io, int (*fn)(void *arg, const struct qt_entry *e,
						  const struct qt_where *w),
	       void *arg);
/* An entry's 72 bytes (the kernel's v2r1_mem2diskdqblk: an id-0 entry
 * that would be all zeros gets itime 1, so it does not read as unused). */
void qt_encode(uint8_t *p, const struct qt_entry *e);
void qt_decode(const uint8_t *p, struct qt_entry *e);

#endif
