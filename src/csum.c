/*
 * csum.c - checksums of ext4 metadata (metadata_csum, and gdt_csum for
 * group descriptors).
 *
 * Definitions from the kernel's Documentation/filesystems/ext4 (checksums
 * section and each structure's page) and fs/ext4.  All checksums are raw
 * CRC32C (crc.c) seeded with fs->csum_seed, which the mount code computed
 * as crc32c(~0, uuid) or took from s_checksum_seed.  Per-inode structures
 * (inode, extent blocks, directory blocks, orphan file blocks) use the
 * inode seed: crc32c(crc32c(csum_seed, le32 ino), le32 generation).
 * Fields that hold a checksum are counted as zero while computing it.
 *
 * Every verify returns 0 on a match or when the file system has no such
 * checksum, and -EUCLEAN with a message naming the structure, inode/group
 * and block otherwise.  No state: safe from any thread.
 */
#include "bcache.h"
#include "crc.h"
#include "csum.h"
#include "error.h"
#include "geom.h"
#include "internal.h"
#include "ondisk.h"

#include <string.h>

#define EXT4_OS_LINUX 0
#define GD_CSUM_OFFSET offsetof(struct ext4_group_desc, bg_checksum)
#define GD_BLOCK_CSUM_HI_END (offsetof(struct ext4_group_desc, bg_block_bitmap_csum_hi) + 2)
#define GD_INODE_CSUM_HI_END (offsetof(struct ext4_group_desc, bg_inode_bitmap_csum_hi) + 2)
#define INODE_CSUM_LO_OFFSET offsetof(struct ext4_inode, i_checksum_lo)
#define INODE_CSUM_HI_OFFSET offsetof(struct ext4_inode, i_checksum_hi)
#define DIRENT_TAIL_SIZE sizeof(struct ext4_dir_entry_tail)

static const uint8_t zeros[4];

static uint32_t crc_le32(uint32_t crc, uint32_t v)
{
	uint32_t le = cpu_to_le32(v);

	return crc32c(crc, &le, sizeof(le));
}

static uint32_t crc_le64(uint32_t crc, uint64_t v)
{
	uint64_t le = cpu_to_le64(v);

	return crc32c(crc, &le, sizeof(le));
}

static uint16_t get_le16(const void *p)
{
	uint16_t v;

	memcpy(&v, p, sizeof(v));
	return le16(v);
}

static uint32_t get_le32(const void *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return le32(v);
}

/* Seed of the structures that belong to one inode. */
static uint32_t inode_seed(struct uext4_fs *fs, uint64_t ino, uint32_t generation)
{
	return crc_le32(crc_le32(fs->csum_seed, (uint32_t)ino), generation);
}

/* ------------------------------------------------------------- superblock */

int csum_verify_super(struct uext4_fs *fs, const struct ext4_super_block *sb)
{
	uint32_t want, got;

	if (!fs->metadata_csum)
		return 0;
	want = crc32c(~0u, sb, offsetof(struct ext4_super_block, s_checksum));
	got = le32(sb->s_checksum);
	if (got != want)
		return fs_corrupt("superblock (block %u): checksum 0x%08x expected 0x%08x",
				  fs->block_size == 1024 ? 1u : 0u, got, want);
	return 0;
}

/* ------------------------------------------------------------- group descriptors */

int csum_read_group_desc(struct uext4_fs *fs, uint32_t group, struct ext4_group_desc *gd)
{
	uint32_t offset, len = MIN(fs->desc_size, (uint32_t)sizeof(*gd));
	uint64_t blk;
	struct buf *b;
	int err;

	memset(gd, 0, sizeof(*gd));
	if (group >= fs->groups_count || len == 0 || fs->desc_size > fs->block_size)
		return fs_corrupt("group descriptor %u: group or descriptor size %u out of range",
				  group, fs->desc_size);
	blk = geom_desc_location(fs, group, &offset);
	err = bread(fs->bc, blk, UEXT4_META_GROUP_DESC, &b);
	if (err)
		return err;
	memcpy(gd, b->data + offset, len);
	brelse(fs->bc, b);
	return 0;
}

/* The checksum bg_checksum should hold (0 if the fs has none). */
static uint16_t group_desc_csum(struct uext4_fs *fs, uint32_t group, const uint8_t *gd)
{
	uint32_t desc_size = fs->desc_size;
	uint32_t le_group = cpu_to_le32(group);
	size_t after = GD_CSUM_OFFSET + 2;

	if (fs->metadata_csum) {
		uint32_t c = crc32c(fs->csum_seed, &le_group, 4);

		c = crc32c(c, gd, GD_CSUM_OFFSET);
		c = crc32c(c, zeros, 2);
		if (desc_size > after)
			c = crc32c(c, gd + after, desc_size - after);
		return (uint16_t)(c & 0xFFFF);
	}
	if (fs->gdt_csum) {
		uint16_t c = crc16(0xFFFF, fs->sb.s_uuid, sizeof(fs->sb.s_uuid));

		c = crc16(c, &le_group, 4);
		c = crc16(c, gd, GD_CSUM_OFFSET);
		if (FS_HAS_INCOMPAT(fs, 64BIT) && desc_size > after)
			c = crc16(c, gd + after, desc_size - after);
		return c;
	}
	return 0;
}

int csum_verify_group_desc(struct uext4_fs *fs, uint32_t group, const void *gd)
{
	uint16_t want, got;
	uint32_t offset;
	uint64_t blk;

	if (!fs->metadata_csum && !fs->gdt_csum)
		return 0;
	want = group_desc_csum(fs, group, gd);
	got = get_le16((const uint8_t *)gd + GD_CSUM_OFFSET);
	if (got == want)
		return 0;
	blk = geom_desc_location(fs, group, &offset);
	return fs_corrupt("group descriptor %u (block %llu): checksum 0x%04x expected 0x%04x",
			  group, (unsigned long long)blk, got, want);
}

/* ------------------------------------------------------------- inodes */

/* Does the inode's extra part reach i_checksum_hi? */
static bool inode_has_csum_hi(struct uext4_fs *fs, const uint8_t *raw)
{
	uint16_t extra;

	if (fs->inode_size <= EXT4_GOOD_OLD_INODE_SIZE)
		return false;
	extra = get_le16(raw + offsetof(struct ext4_inode, i_extra_isize));
	return EXT4_GOOD_OLD_INODE_SIZE + (uint32_t)extra >= EXT4_INODE_CSUM_HI_END;
}

/* Inodes up to this size are checksummed in one pass over a copy. */
#define INODE_CSUM_COPY_MAX 1024u

/* Full 32-bit checksum of an inode (both checksum fields counted as zero),
 * in pieces around the checksum fields. */
static uint32_t inode_csum32_pieces(struct uext4_fs *fs, uint64_t ino, const uint8_t *raw)
{
	uint32_t gen = get_le32(raw + offsetof(struct ext4_inode, i_generation));
	uint32_t size = fs->inode_size;
	uint32_t c = inode_seed(fs, ino, gen);
	size_t off;

	c = crc32c(c, raw, INODE_CSUM_LO_OFFSET);
	c = crc32c(c, zeros, 2);
	off = INODE_CSUM_LO_OFFSET + 2;
	c = crc32c(c, raw + off, EXT4_GOOD_OLD_INODE_SIZE - off);
	if (size <= EXT4_GOOD_OLD_INODE_SIZE)
		return c;
	c = crc32c(c, raw + EXT4_GOOD_OLD_INODE_SIZE, INODE_CSUM_HI_OFFSET - EXT4_GOOD_OLD_INODE_SIZE);
	off = INODE_CSUM_HI_OFFSET;
	if (inode_has_csum_hi(fs, raw)) {
		c = crc32c(c, zeros, 2);
		off += 2;
	}
	return crc32c(c, raw + off, size - off);
}

/*
 * The same, in one pass: the inode number, the generation and a copy of
 * the inode with its checksum fields zeroed (the stream the pieces make).
 * Every inode write and every load from a block checks or sets one: the
 * eight short calls of the pieces cost twice as much as the 256 bytes.
 */
static uint32_t inode_csum32(struct uext4_fs *fs, uint64_t ino, const uint8_t *raw)
{
	uint8_t buf[8 + INODE_CSUM_COPY_MAX];
	uint32_t size = fs->inode_size, le;

	if (size > INODE_CSUM_COPY_MAX)
		return inode_csum32_pieces(fs, ino, raw);
	le = cpu_to_le32((uint32_t)ino);
	memcpy(buf, &le, 4);
	memcpy(buf + 4, raw + offsetof(struct ext4_inode, i_generation), 4);
	memcpy(buf + 8, raw, size);
	memset(buf + 8 + INODE_CSUM_LO_OFFSET, 0, 2);
	if (inode_has_csum_hi(fs, raw))
		memset(buf + 8 + INODE_CSUM_HI_OFFSET, 0, 2);
	return crc32c(fs->csum_seed, buf, 8 + size);
}

uint32_t csum_inode(struct uext4_fs *fs, uint64_t ino, const void *raw)
{
	uint32_t c;

	if (!fs->metadata_csum)
		return 0;
	c = inode_csum32(fs, ino, raw);
	return inode_has_csum_hi(fs, raw) ? c : (c & 0xFFFF);
}

static bool all_zero(const uint8_t *p, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (p[i])
			return false;
	return true;
}

/* Inode table block of ino, for messages (0 if unknown). */
static uint64_t inode_block_for_msg(struct uext4_fs *fs, uint64_t ino)
{
	uint64_t index, group;

	if (ino == 0 || !fs->groups || !fs->inodes_per_group || !fs->block_size)
		return 0;
	group = (ino - 1) / fs->inodes_per_group;
	index = (ino - 1) % fs->inodes_per_group;
	if (group >= fs->groups_count)
		return 0;
	return fs->groups[group].inode_table + index * fs->inode_size / fs->block_size;
}

int csum_verify_inode(struct uext4_fs *fs, uint64_t ino, const void *raw)
{
	const uint8_t *p = raw;
	uint32_t want, got;

	/* The kernel checks inode checksums only for Linux-created file systems. */
	if (!fs->metadata_csum || le32(fs->sb.s_creator_os) != EXT4_OS_LINUX)
		return 0;
	want = csum_inode(fs, ino, raw);
	got = get_le16(p + INODE_CSUM_LO_OFFSET);
	if (inode_has_csum_hi(fs, p))
		got |= (uint32_t)get_le16(p + INODE_CSUM_HI_OFFSET) << 16;
	if (got == want)
		return 0;
	/* A never-initialised (all zero) inode table slot has no checksum;
	 * e2fsprogs accepts it too.  It describes no file. */
	if (all_zero(p, fs->inode_size))
		return 0;
	return fs_corrupt("inode %llu (block %llu): checksum 0x%08x expected 0x%08x",
			  (unsigned long long)ino, (unsigned long long)inode_block_for_msg(fs, ino),
			  got, want);
}

/* ------------------------------------------------------------- extent blocks */

int csum_verify_extent_block(struct uext4_fs *fs, uint64_t ino, uint32_t generation,
			     uint64_t blocknr, const void *block)
{
	const struct ext4_extent_header *eh = block;
	size_t tail;
	uint32_t want, got;

	if (!fs->metadata_csum)
		return 0;
	/* The tail follows the last possible entry (eh_max of them). */
	tail = sizeof(*eh) + (size_t)le16(eh->eh_max) * sizeof(struct ext4_extent);
	if (tail + sizeof(struct ext4_extent_tail) > fs->block_size)
		return fs_corrupt("extent block %llu of inode %llu: eh_max %u leaves no room "
				  "for the checksum", (unsigned long long)blocknr,
				  (unsigned long long)ino, le16(eh->eh_max));
	want = crc32c(inode_seed(fs, ino, generation), block, tail);
	got = get_le32((const uint8_t *)block + tail);
	if (got != want)
		return fs_corrupt("extent block %llu of inode %llu: checksum 0x%08x expected 0x%08x",
				  (unsigned long long)blocknr, (unsigned long long)ino, got, want);
	return 0;
}

/* ------------------------------------------------------------- directories */

static bool has_dirent_tail(const uint8_t *block, uint32_t block_size)
{
	const uint8_t *t = block + block_size - DIRENT_TAIL_SIZE;

	return get_le32(t + offsetof(struct ext4_dir_entry_tail, det_reserved_zero1)) == 0 &&
	       get_le16(t + offsetof(struct ext4_dir_entry_tail, det_rec_len)) == DIRENT_TAIL_SIZE &&
	       t[offsetof(struct ext4_dir_entry_tail, det_reserved_zero2)] == 0 &&
	       t[offsetof(struct ext4_dir_entry_tail, det_reserved_ft)] == EXT4_FT_DIR_CSUM;
}

int csum_verify_dir_leaf(struct uext4_fs *fs, uint64_t ino, uint32_t generation,
			 uint64_t blocknr, const void *block)
{
	const uint8_t *p = block;
	uint32_t size = fs->block_size - DIRENT_TAIL_SIZE;
	uint32_t want, got;

	if (!fs->metadata_csum)
		return 0;
	if (!has_dirent_tail(p, fs->block_size))
		return fs_corrupt("directory block %llu of inode %llu: no checksum tail "
				  "(metadata_csum is on)", (unsigned long long)blocknr,
				  (unsigned long long)ino);
	want = crc32c(inode_seed(fs, ino, generation), p, size);
	got = get_le32(p + size + offsetof(struct ext4_dir_entry_tail, det_checksum));
	if (got != want)
		return fs_corrupt("directory block %llu of inode %llu: checksum 0x%08x expected 0x%08x",
				  (unsigned long long)blocknr, (unsigned long long)ino, got, want);
	return 0;
}

int csum_verify_dx_node(struct uext4_fs *fs, uint64_t ino, uint32_t generation,
			uint64_t blocknr, const void *block, unsigned count_offset,
			unsigned count, unsigned limit)
{
	const uint8_t *p = block;
	size_t tail = (size_t)count_offset + (size_t)limit * sizeof(struct dx_entry);
	uint32_t c, got;

	if (!fs->metadata_csum)
		return 0;
	if (tail + sizeof(struct dx_tail) > fs->block_size)
		return fs_corrupt("htree block %llu of directory inode %llu: limit %u at offset %u "
				  "leaves no room for the checksum", (unsigned long long)blocknr,
				  (unsigned long long)ino, limit, count_offset);
	if (count > limit)
		return fs_corrupt("htree block %llu of directory inode %llu: count %u > limit %u",
				  (unsigned long long)blocknr, (unsigned long long)ino, count, limit);
	/* The used entries, then the tail with dt_checksum as zero. */
	c = crc32c(inode_seed(fs, ino, generation), p,
		   (size_t)count_offset + (size_t)count * sizeof(struct dx_entry));
	c = crc32c(c, p + tail, offsetof(struct dx_tail, dt_checksum));
	c = crc32c(c, zeros, 4);
	got = get_le32(p + tail + offsetof(struct dx_tail, dt_checksum));
	if (got != c)
		return fs_corrupt("htree block %llu of directory inode %llu: checksum 0x%08x "
				  "expected 0x%08x", (unsigned long long)blocknr,
				  (unsigned long long)ino, got, c);
	return 0;
}

/* ------------------------------------------------------------- xattr blocks */

int csum_verify_xattr_block(struct uext4_fs *fs, uint64_t blocknr, const void *block)
{
	const uint8_t *p = block;
	size_t off = offsetof(struct ext4_xattr_header, h_checksum);
	uint32_t c, got;

	if (!fs->metadata_csum)
		return 0;
	/* Seeded with the block number: a block copied elsewhere fails. */
	c = crc_le64(fs->csum_seed, blocknr);
	c = crc32c(c, p, off);
	c = crc32c(c, zeros, 4);
	c = crc32c(c, p + off + 4, fs->block_size - off - 4);
	got = get_le32(p + off);
	if (got != c)
		return fs_corrupt("xattr block %llu: checksum 0x%08x expected 0x%08x",
				  (unsigned long long)blocknr, got, c);
	return 0;
}

/* ------------------------------------------------------------- bitmaps */

static int verify_bitmap(struct uext4_fs *fs, uint32_t group, const void *bitmap,
			 const char *what, uint64_t blocknr, uint32_t bytes,
			 uint16_t lo, uint16_t hi, bool has_hi)
{
	uint32_t want, got;

	if (bytes == 0 || bytes > fs->block_size)
		return fs_corrupt("%s of group %u (block %llu): %u bytes per group does not fit "
				  "a block", what, group, (unsigned long long)blocknr, bytes);
	want = crc32c(fs->csum_seed, bitmap, bytes);
	got = lo;
	if (has_hi)
		got |= (uint32_t)hi << 16;
	else
		want &= 0xFFFF;
	if (got != want)
		return fs_corrupt("%s of group %u (block %llu): checksum 0x%08x expected 0x%08x",
				  what, group, (unsigned long long)blocknr, got, want);
	return 0;
}

static uint64_t gd_block_bitmap(struct uext4_fs *fs, const struct ext4_group_desc *gd)
{
	uint64_t b = le32(gd->bg_block_bitmap_lo);

	if (fs->desc_size >= EXT4_MIN_DESC_SIZE_64BIT)
		b |= (uint64_t)le32(gd->bg_block_bitmap_hi) << 32;
	return b;
}

static uint64_t gd_inode_bitmap(struct uext4_fs *fs, const struct ext4_group_desc *gd)
{
	uint64_t b = le32(gd->bg_inode_bitmap_lo);

	if (fs->desc_size >= EXT4_MIN_DESC_SIZE_64BIT)
		b |= (uint64_t)le32(gd->bg_inode_bitmap_hi) << 32;
	return b;
}

int csum_verify_block_bitmap(struct uext4_fs *fs, uint32_t group, const void *bitmap)
{
	struct ext4_group_desc gd;
	int err;

	if (!fs->metadata_csum)
		return 0;
	err = csum_read_group_desc(fs, group, &gd);
	if (err)
		return err;
	return verify_bitmap(fs, group, bitmap, "block bitmap", gd_block_bitmap(fs, &gd),
			     le32(fs->sb.s_clusters_per_group) / 8,
			     le16(gd.bg_block_bitmap_csum_lo), le16(gd.bg_block_bitmap_csum_hi),
			     fs->desc_size >= GD_BLOCK_CSUM_HI_END);
}

int csum_verify_inode_bitmap(struct uext4_fs *fs, uint32_t group, const void *bitmap)
{
	struct ext4_group_desc gd;
	int err;

	if (!fs->metadata_csum)
		return 0;
	err = csum_read_group_desc(fs, group, &gd);
	if (err)
		return err;
	return verify_bitmap(fs, group, bitmap, "inode bitmap", gd_inode_bitmap(fs, &gd),
			     fs->inodes_per_group / 8,
			     le16(gd.bg_inode_bitmap_csum_lo), le16(gd.bg_inode_bitmap_csum_hi),
			     fs->desc_size >= GD_INODE_CSUM_HI_END);
}

/* ------------------------------------------------------------- orphan file */

int csum_verify_orphan_block(struct uext4_fs *fs, uint64_t ino, uint32_t generation,
			     uint64_t blocknr, const void *block)
{
	const uint8_t *p = block;
	size_t entries = fs->block_size - sizeof(struct ext4_orphan_block_tail);
	const uint8_t *tail = p + entries;
	uint32_t c, got, magic;

	if (!fs->metadata_csum)
		return 0;
	magic = get_le32(tail + offsetof(struct ext4_orphan_block_tail, ob_magic));
	if (magic != EXT4_ORPHAN_BLOCK_MAGIC)
		return fs_corrupt("orphan file block %llu of inode %llu: bad magic 0x%08x",
				  (unsigned long long)blocknr, (unsigned long long)ino, magic);
	/* Seeded with the orphan file inode, then the physical block number. */
	c = crc_le64(inode_seed(fs, ino, generation), blocknr);
	c = crc32c(c, p, entries);
	got = get_le32(tail + offsetof(struct ext4_orphan_block_tail, ob_checksum));
	if (got != c)
		return fs_corrupt("orphan file block %llu of inode %llu: checksum 0x%08x "
				  "expected 0x%08x", (unsigned long long)blocknr,
				  (unsigned long long)ino, got, c);
	return 0;
}

/* ================================================================ write side
 * The commit calls csum_set_block() once per dirty block, however many
 * times the block changed, on its frozen copy of the block (the live
 * buffer's checksum field is never set: the copy is what reaches the disk);
 * inodes are summed by inode_write().
 */

static void put_le16(void *p, uint16_t v)
{
	uint16_t x = cpu_to_le16(v);

	memcpy(p, &x, 2);
}

static void put_le32(void *p, uint32_t v)
{
	uint32_t x = cpu_to_le32(v);

	memcpy(p, &x, 4);
}

void csum_set_inode(struct uext4_fs *fs, uint64_t ino, void *raw)
{
	uint8_t *r = raw;
	uint32_t c;

	if (!fs->metadata_csum)
		return;
	c = inode_csum32(fs, ino, r);
	put_le16(r + INODE_CSUM_LO_OFFSET, (uint16_t)c);
	if (inode_has_csum_hi(fs, r))
		put_le16(r + INODE_CSUM_HI_OFFSET, (uint16_t)(c >> 16));
}

void csum_set_super(struct uext4_fs *fs, struct ext4_super_block *sb)
{
	if (!fs->metadata_csum)
		return;
	sb->s_checksum = cpu_to_le32(crc32c(~0u, sb, offsetof(struct ext4_super_block, s_checksum)));
}

void csum_set_group_desc(struct uext4_fs *fs, uint32_t group, void *gd)
{
	if (!fs->metadata_csum && !fs->gdt_csum)
		return;
	put_le16((uint8_t *)gd + GD_CSUM_OFFSET, group_desc_csum(fs, group, gd));
}

uint32_t csum_block_bitmap(struct uext4_fs *fs, const void *bitmap)
{
	if (!fs->metadata_csum)
		return 0;
	return crc32c(fs->csum_seed, bitmap, le32(fs->sb.s_clusters_per_group) / 8);
}

uint32_t csum_inode_bitmap(struct uext4_fs *fs, const void *bitmap)
{
	if (!fs->metadata_csum)
		return 0;
	return crc32c(fs->csum_seed, bitmap, fs->inodes_per_group / 8);
}

static void set_extent_block(struct uext4_fs *fs, uint8_t *p, uint32_t seed)
{
	const struct ext4_extent_header *eh = (const void *)p;
	size_t tail = sizeof(*eh) + (size_t)le16(eh->eh_max) * sizeof(struct ext4_extent);

	if (tail + sizeof(struct ext4_extent_tail) > fs->block_size)
		return; /* malformed; the verifier will say so on read */
	put_le32(p + tail, crc32c(seed, p, tail));
}

static void set_dir_leaf(struct uext4_fs *fs, uint8_t *p, uint32_t seed)
{
	uint32_t size = fs->block_size - DIRENT_TAIL_SIZE;

	if (!has_dirent_tail(p, fs->block_size))
		return;
	put_le32(p + size + offsetof(struct ext4_dir_entry_tail, det_checksum),
		 crc32c(seed, p, size));
}

/* A dx root starts with "." (its own inode); a node with a fake empty
 * dirent (inode 0) spanning the block. */
static unsigned dx_count_offset(struct uext4_fs *fs, const uint8_t *p)
{
	if (get_le32(p) != 0)
		return 24 + p[24 + offsetof(struct dx_root_info, info_length)];
	return 8;
}

static void set_dx_node(struct uext4_fs *fs, uint8_t *p, uint32_t seed)
{
	unsigned off = dx_count_offset(fs, p);
	unsigned limit, count;
	size_t tail;
	uint32_t c;

	if (off + 4 > fs->block_size)
		return;
	limit = get_le16(p + off + offsetof(struct dx_countlimit, limit));
	count = get_le16(p + off + offsetof(struct dx_countlimit, count));
	tail = (size_t)off + (size_t)limit * sizeof(struct dx_entry);
	if (count > limit || tail + sizeof(struct dx_tail) > fs->block_size)
		return;
	c = crc32c(seed, p, (size_t)off + (size_t)count * sizeof(struct dx_entry));
	c = crc32c(c, p + tail, offsetof(struct dx_tail, dt_checksum));
	c = crc32c(c, zeros, 4);
	put_le32(p + tail + offsetof(struct dx_tail, dt_checksum), c);
}

static void set_xattr_block(struct uext4_fs *fs, uint8_t *p, uint64_t blocknr)
{
	size_t off = offsetof(struct ext4_xattr_header, h_checksum);
	uint32_t c = crc_le64(fs->csum_seed, blocknr);

	c = crc32c(c, p, off);
	c = crc32c(c, zeros, 4);
	c = crc32c(c, p + off + 4, fs->block_size - off - 4);
	put_le32(p + off, c);
}

/* Orphan file block: the tail checksum over the entries, seeded with the
 * orphan file's inode seed and the block number (as the verify side). */
static void set_orphan_block(struct uext4_fs *fs, uint8_t *p, uint64_t blocknr, uint32_t seed)
{
	size_t entries = fs->block_size - sizeof(struct ext4_orphan_block_tail);
	uint32_t c = crc_le64(seed, blocknr);

	c = crc32c(c, p, entries);
	put_le32(p + entries + offsetof(struct ext4_orphan_block_tail, ob_checksum), c);
}

bool csum_in_block(struct uext4_fs *fs, unsigned kind)
{
	return fs->metadata_csum && (kind == CSUM_DIR_LEAF || kind == CSUM_DX_NODE ||
				     kind == CSUM_EXTENT || kind == CSUM_XATTR ||
				     kind == CSUM_ORPHAN);
}

void csum_set_block(struct uext4_fs *fs, uint8_t *p, uint64_t blocknr, unsigned kind,
		    uint64_t owner, uint32_t gen)
{
	if (!csum_in_block(fs, kind))
		return;
	switch (kind) {
	case CSUM_DIR_LEAF: set_dir_leaf(fs, p, inode_seed(fs, owner, gen)); break;
	case CSUM_DX_NODE: set_dx_node(fs, p, inode_seed(fs, owner, gen)); break;
	case CSUM_EXTENT: set_extent_block(fs, p, inode_seed(fs, owner, gen)); break;
	case CSUM_XATTR: set_xattr_block(fs, p, blocknr); break;
	default: set_orphan_block(fs, p, blocknr, inode_seed(fs, owner, gen)); break;
	}
}
