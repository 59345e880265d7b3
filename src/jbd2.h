/*
 * jbd2.h - the JBD2 journal's on-disk format (as the Linux kernel writes
 * it; Documentation/filesystems/ext4/journal.rst) and what journal.c and
 * recovery.c share.  Every journal field is big-endian.
 *
 * Log layout: block 0 of the journal inode is the journal superblock; the
 * log is the circular area [s_first, s_maxlen) (minus the fast-commit
 * area at its end when FAST_COMMIT is set).  A transaction is: descriptor
 * blocks (each followed by the blocks its tags describe), revoke blocks,
 * and a commit block, all carrying the transaction's sequence number.
 */
#ifndef UEXT4_JBD2_H
#define UEXT4_JBD2_H

#include <stdint.h>
#include <string.h>

#include "crc.h"
#include "internal.h"

#define JBD2_MAGIC 0xC03B3998u

/* h_blocktype */
#define JBD2_DESCRIPTOR_BLOCK 1
#define JBD2_COMMIT_BLOCK 2
#define JBD2_SUPERBLOCK_V1 3
#define JBD2_SUPERBLOCK_V2 4
#define JBD2_REVOKE_BLOCK 5
#define JBD2_FC_BLOCK 6

/* Features */
#define JBD2_FEATURE_COMPAT_CHECKSUM 0x1u        /* v1: crc32 in the commit block */
#define JBD2_FEATURE_INCOMPAT_REVOKE 0x1u
#define JBD2_FEATURE_INCOMPAT_64BIT 0x2u
#define JBD2_FEATURE_INCOMPAT_ASYNC_COMMIT 0x4u
#define JBD2_FEATURE_INCOMPAT_CSUM_V2 0x8u
#define JBD2_FEATURE_INCOMPAT_CSUM_V3 0x10u
#define JBD2_FEATURE_INCOMPAT_FAST_COMMIT 0x20u
#define JBD2_KNOWN_INCOMPAT                                                                   \
	(JBD2_FEATURE_INCOMPAT_REVOKE | JBD2_FEATURE_INCOMPAT_64BIT |                        \
	 JBD2_FEATURE_INCOMPAT_ASYNC_COMMIT | JBD2_FEATURE_INCOMPAT_CSUM_V2 |                \
	 JBD2_FEATURE_INCOMPAT_CSUM_V3 | JBD2_FEATURE_INCOMPAT_FAST_COMMIT)

/* Checksum types (s_checksum_type, h_chksum_type) */
#define JBD2_CRC32_CHKSUM 1
#define JBD2_MD5_CHKSUM 2
#define JBD2_SHA1_CHKSUM 3
#define JBD2_CRC32C_CHKSUM 4
#define JBD2_CRC32_CHKSUM_SIZE 4

/* Tag flags (low 16 bits of t_flags) */
#define JBD2_FLAG_ESCAPE 1u     /* first 4 bytes were the magic: logged as zero */
#define JBD2_FLAG_SAME_UUID 2u  /* no 16-byte UUID follows this tag */
#define JBD2_FLAG_DELETED 4u    /* unused by jbd2 */
#define JBD2_FLAG_LAST_TAG 8u   /* last tag of the descriptor */

#define JBD2_DEFAULT_FC_BLOCKS 256u /* s_num_fc_blks == 0 */
#define JBD2_MIN_LOG_BLOCKS 1024u   /* the kernel refuses smaller journals */

struct jbd2_header {
	uint32_t h_magic;
	uint32_t h_blocktype;
	uint32_t h_sequence;
};

struct jbd2_superblock {
	struct jbd2_header s_header;    /* 0x00 */
	uint32_t s_blocksize;           /* 0x0C */
	uint32_t s_maxlen;              /* 0x10: blocks in the journal */
	uint32_t s_first;               /* 0x14: first log block */
	uint32_t s_sequence;            /* 0x18: first tid expected in the log */
	uint32_t s_start;               /* 0x1C: log start; 0 = empty */
	int32_t s_errno;                /* 0x20 */
	uint32_t s_feature_compat;      /* 0x24 */
	uint32_t s_feature_incompat;    /* 0x28 */
	uint32_t s_feature_ro_compat;   /* 0x2C */
	uint8_t s_uuid[16];             /* 0x30 */
	uint32_t s_nr_users;            /* 0x40 */
	uint32_t s_dynsuper;            /* 0x44 */
	uint32_t s_max_transaction;     /* 0x48 */
	uint32_t s_max_trans_data;      /* 0x4C */
	uint8_t s_checksum_type;        /* 0x50 */
	uint8_t s_padding2[3];
	uint32_t s_num_fc_blks;         /* 0x54 */
	uint32_t s_head;                /* 0x58 */
	uint32_t s_padding[40];         /* 0x5C */
	uint32_t s_checksum;            /* 0xFC: crc32c(~0, sb with this 0) */
	uint8_t s_users[16 * 48];       /* 0x100 */
};
_Static_assert(sizeof(struct jbd2_superblock) == 1024, "journal superblock is 1 KiB");
_Static_assert(offsetof(struct jbd2_superblock, s_checksum) == 0xFC, "s_checksum");
_Static_assert(offsetof(struct jbd2_superblock, s_num_fc_blks) == 0x54, "s_num_fc_blks");

/* Tag with CSUM_V3: always 16 bytes. */
struct jbd2_tag3 {
	uint32_t t_blocknr;
	uint32_t t_flags;
	uint32_t t_blocknr_high;        /* used with INCOMPAT_64BIT */
	uint32_t t_checksum;            /* crc32c(seed, be32 seq, logged block) */
};
/* Classic tag: 8 bytes, +4 with 64BIT (t_blocknr_high), +2 with CSUM_V2. */
struct jbd2_tag {
	uint32_t t_blocknr;
	uint16_t t_checksum;            /* CSUM_V2: low 16 bits of the crc */
	uint16_t t_flags;
	uint32_t t_blocknr_high;
};

struct jbd2_commit_header {
	struct jbd2_header h;
	uint8_t h_chksum_type;          /* v1 only; 0 with v2/v3 */
	uint8_t h_chksum_size;
	uint8_t h_padding[2];
	uint32_t h_chksum[8];           /* v2/v3: [0] = crc32c(seed, block with it 0) */
	uint64_t h_commit_sec;
	uint32_t h_commit_nsec;
} __attribute__((packed));
_Static_assert(offsetof(struct jbd2_commit_header, h_commit_sec) == 48, "h_commit_sec");

struct jbd2_revoke_header {
	struct jbd2_header h;
	uint32_t r_count;               /* bytes used in the block, header included */
};

/* Last 4 bytes of descriptor and revoke blocks with v2/v3. */
struct jbd2_block_tail {
	uint32_t t_checksum;
};

/* ---- big-endian helpers (unaligned-safe) */
static inline uint16_t be16_get(const void *p)
{
	const uint8_t *b = p;
	return (uint16_t)(b[0] << 8 | b[1]);
}
static inline uint32_t be32_get(const void *p)
{
	const uint8_t *b = p;
	return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
}
static inline uint64_t be64_get(const void *p)
{
	return (uint64_t)be32_get(p) << 32 | be32_get((const uint8_t *)p + 4);
}
static inline void be16_put(void *p, uint16_t v)
{
	uint8_t *b = p;
	b[0] = (uint8_t)(v >> 8);
	b[1] = (uint8_t)v;
}
static inline void be32_put(void *p, uint32_t v)
{
	uint8_t *b = p;
	b[0] = (uint8_t)(v >> 24);
	b[1] = (uint8_t)(v >> 16);
	b[2] = (uint8_t)(v >> 8);
	b[3] = (uint8_t)v;
}
static inline void be64_put(void *p, uint64_t v)
{
	be32_put(p, (uint32_t)(v >> 32));
	be32_put((uint8_t *)p + 4, (uint32_t)v);
}
/* Field access by struct member: JGET(sb, s_maxlen), JPUT(sb, s_start, v). */
#define JGET(s, f) be32_get(&(s)->f)
#define JPUT(s, f, v) be32_put(&(s)->f, (v))

/* ---- the journal's format choices */
struct jbd2_fmt {
	uint32_t block_size;
	bool csum_v2, csum_v3;  /* v2/v3 block checksums (tails, tags, commit) */
	bool bit64;             /* tags and revoke records carry 64-bit numbers */
	uint32_t seed;          /* crc32c(~0, s_uuid) */
	uint8_t uuid[16];
};

static inline bool jbd2_has_csum(const struct jbd2_fmt *f) { return f->csum_v2 || f->csum_v3; }

/* Bytes of one tag (without the UUID that follows a tag lacking SAME_UUID),
 * as the kernel's journal_tag_bytes(). */
static inline size_t jbd2_tag_bytes(const struct jbd2_fmt *f)
{
	size_t sz;

	if (f->csum_v3)
		return sizeof(struct jbd2_tag3);
	sz = sizeof(struct jbd2_tag);
	if (f->csum_v2)
		sz += sizeof(uint16_t);
	return f->bit64 ? sz : sz - sizeof(uint32_t);
}
/* Bytes at the end of a descriptor/revoke block reserved for the tail. */
static inline size_t jbd2_tail_bytes(const struct jbd2_fmt *f)
{
	return jbd2_has_csum(f) ? sizeof(struct jbd2_block_tail) : 0;
}

static inline uint32_t jbd2_sb_csum(const struct jbd2_superblock *sb)
{
	struct jbd2_superblock tmp;

	memcpy(&tmp, sb, sizeof(tmp));
	tmp.s_checksum = 0;
	return crc32c(~0u, &tmp, sizeof(tmp));
}
/* Descriptor and revoke blocks: crc32c(seed, block with the tail zeroed). */
static inline uint32_t jbd2_tail_csum(const struct jbd2_fmt *f, const uint8_t *blk)
{
	uint8_t zero[4] = {0};
	uint32_t c = crc32c(f->seed, blk, f->block_size - 4);

	return crc32c(c, zero, 4);
}
static inline void jbd2_tail_set(const struct jbd2_fmt *f, uint8_t *blk)
{
	be32_put(blk + f->block_size - 4, jbd2_tail_csum(f, blk));
}
static inline bool jbd2_tail_ok(const struct jbd2_fmt *f, const uint8_t *blk)
{
	return be32_get(blk + f->block_size - 4) == jbd2_tail_csum(f, blk);
}
/* Commit block (v2/v3): crc32c(seed, block with h_chksum[0] zeroed). */
static inline uint32_t jbd2_commit_csum(const struct jbd2_fmt *f, const uint8_t *blk)
{
	const size_t at = offsetof(struct jbd2_commit_header, h_chksum);
	uint8_t zero[4] = {0};
	uint32_t c = crc32c(f->seed, blk, at);

	c = crc32c(c, zero, 4);
	return crc32c(c, blk + at + 4, f->block_size - at - 4);
}
/* Data block logged under tag: crc32c(seed, be32 sequence, logged bytes).
 * The logged bytes are the escaped ones (the kernel checksums the buffer
 * it writes to the log and verifies the block read from the log). */
static inline uint32_t jbd2_block_csum(const struct jbd2_fmt *f, uint32_t seq, const uint8_t *blk)
{
	uint8_t s[4];

	be32_put(s, seq);
	return crc32c(crc32c(f->seed, s, 4), blk, f->block_size);
}
static inline uint32_t jbd2_uuid_seed(const uint8_t uuid[16]) { return crc32c(~0u, uuid, 16); }

/* ---- what journal.c and recovery.c share (journal.c) */
/*
 * The journal inode's blocks: phys[i] is the device block of journal
 * block i, for i < nblocks; the log is [first, last) (last excludes the
 * fast-commit area); sb is the journal superblock as read (block_size
 * bytes, the superblock in its first 1024).
 */
struct jbd2_log {
	struct uext4_fs *fs;
	/* The external journal device (external set), else unused: the log
	 * is on fs->dev (jbd2_dev()).  With an external log home writes and
	 * ordered data are on fs->dev, and both are flushed before a commit
	 * block. */
	struct bdev *dev;
	bool external;
	uint64_t *phys;
	uint32_t nblocks;        /* mapped blocks (= s_maxlen) */
	uint32_t first, last;    /* log area */
	uint32_t fc_blocks;      /* fast-commit blocks after last (0 without) */
	uint8_t *sbbuf;          /* block 0 of the journal */
	struct jbd2_fmt fmt;
};
/* Map the journal (inode or external device) and read and check its
 * superblock (refusing unknown incompatible features by name). */
struct journal_host;
int jbd2_log_load(struct uext4_fs *fs, const struct journal_host *host, struct jbd2_log *log);
void jbd2_log_free(struct jbd2_log *log);
/* Set fmt from the superblock's features. */
void jbd2_fmt_from_sb(struct jbd2_log *log);
/* Write the journal superblock (sets its checksum when v2/v3). */
int jbd2_write_sb(struct jbd2_log *log);
/* Read journal block i (i < nblocks). */
int jbd2_read_block(struct jbd2_log *log, uint32_t i, void *buf);
/* The device the log's blocks are on: the external one, or the file
 * system's as it is now (tests and the crash recorder swap fs->dev). */
static inline struct bdev *jbd2_dev(const struct jbd2_log *log)
{
	return log->external ? log->dev : log->fs->dev;
}
static inline struct jbd2_superblock *jbd2_sb(struct jbd2_log *log)
{
	return (struct jbd2_superblock *)log->sbbuf;
}
/* Next log position after pos, wrapping at last back to first. */
static inline uint32_t jbd2_next(const struct jbd2_log *log, uint32_t pos)
{
	return pos + 1 >= log->last ? log->first : pos + 1;
}

#endif
