/*
 * super.c - mounting: the superblock, feature checks and group descriptors.
 *
 * Mount reads the primary superblock, refuses by name every feature we
 * cannot honour, verifies the checksums the image carries, then parses
 * every group descriptor once into fs->groups, which from then on is the
 * truth for each group: the allocators change it under the group's lock
 * and the commit writes it back (super_write_group_desc()), with the
 * superblock's counters folded from the sharded counters (super_write()).
 */
#include "balloc.h"
#include "bcache.h"
#include "blockdev.h"
#include "crashdev.h"
#include "crc.h"
#include "csum.h"
#include "error.h"
#include "file.h"
#include "inode.h"
#include "internal.h"
#include "journal.h"
#include "lock.h"
#include "namecache.h"
#include "ondisk.h"
#include "orphan.h"
#include "stats.h"
#include "super.h"
#include "trans.h"
#include "xattr.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define GD_BLOCK_CSUM_HI_END_ (offsetof(struct ext4_group_desc, bg_block_bitmap_csum_hi) + 2)
#define GD_INODE_CSUM_HI_END_ (offsetof(struct ext4_group_desc, bg_inode_bitmap_csum_hi) + 2)

/*
 * Seed 004: the mounted file system's read-mostly state (geometry, feature
 * flags, the journal, cache and group-table pointers) shares no cache line
 * with anything written while mounted.  struct uext4_fs starts on a line
 * and the superblock copy, which commits and the legacy orphan list write,
 * begins on a line after the last read-mostly field.  Write-hot state has
 * its own allocations: fs->hot (counters, one line per slot), each
 * group_info (own lines), struct trans (drain counters, one line each;
 * the committer's flags, the journal pointer and the transaction ids on
 * separate lines: see trans.c), the orphan state (per-block counters one
 * line each).
 */
_Static_assert(_Alignof(struct uext4_fs) >= CACHELINE, "uext4_fs is cache-line aligned");
_Static_assert(offsetof(struct uext4_fs, sb) % CACHELINE == 0, "sb starts a cache line");
_Static_assert(offsetof(struct uext4_fs, sb) >= offsetof(struct uext4_fs, root) + sizeof(void *),
	       "the superblock copy comes after every read-mostly field");
_Static_assert(offsetof(struct uext4_fs, journal) / CACHELINE <
		       offsetof(struct uext4_fs, sb) / CACHELINE,
	       "the journal pointer is not on the superblock copy's lines");
_Static_assert(sizeof(struct group_info) % CACHELINE == 0, "a group per cache line");

/* Incompat features this version reads and understands. */
#define SUPPORTED_INCOMPAT                                                           \
	(EXT4_FEATURE_INCOMPAT_FILETYPE | EXT4_FEATURE_INCOMPAT_META_BG |            \
	 EXT4_FEATURE_INCOMPAT_EXTENTS | EXT4_FEATURE_INCOMPAT_64BIT |               \
	 EXT4_FEATURE_INCOMPAT_FLEX_BG | EXT4_FEATURE_INCOMPAT_EA_INODE |            \
	 EXT4_FEATURE_INCOMPAT_CSUM_SEED | EXT4_FEATURE_INCOMPAT_LARGEDIR |          \
	 EXT4_FEATURE_INCOMPAT_INLINE_DATA | EXT4_FEATURE_INCOMPAT_RECOVER)

/* Read-only compat features we may mount read-write (later issues write). */
#define SUPPORTED_RO_COMPAT                                                          \
	(EXT4_FEATURE_RO_COMPAT_SPARSE_SUPER | EXT4_FEATURE_RO_COMPAT_LARGE_FILE |   \
	 EXT4_FEATURE_RO_COMPAT_HUGE_FILE | EXT4_FEATURE_RO_COMPAT_GDT_CSUM |        \
	 EXT4_FEATURE_RO_COMPAT_DIR_NLINK | EXT4_FEATURE_RO_COMPAT_EXTRA_ISIZE |     \
	 EXT4_FEATURE_RO_COMPAT_METADATA_CSUM | EXT4_FEATURE_RO_COMPAT_ORPHAN_PRESENT)

struct feature_name {
	int kind; /* 0 compat, 1 incompat, 2 ro_compat */
	uint32_t mask;
	const char *name;
};

/* Names as e2fsprogs prints them (lib/e2p/feature.c lists the same). */
static const struct feature_name feature_names[] = {
	{0, EXT4_FEATURE_COMPAT_DIR_PREALLOC, "dir_prealloc"},
	{0, EXT4_FEATURE_COMPAT_HAS_JOURNAL, "has_journal"},
	{0, EXT4_FEATURE_COMPAT_IMAGIC_INODES, "imagic_inodes"},
	{0, EXT4_FEATURE_COMPAT_EXT_ATTR, "ext_attr"},
	{0, EXT4_FEATURE_COMPAT_DIR_INDEX, "dir_index"},
	{0, EXT4_FEATURE_COMPAT_RESIZE_INODE, "resize_inode"},
	{0, EXT4_FEATURE_COMPAT_LAZY_BG, "lazy_bg"},
	{0, EXT4_FEATURE_COMPAT_EXCLUDE_BITMAP, "snapshot_bitmap"},
	{0, EXT4_FEATURE_COMPAT_SPARSE_SUPER2, "sparse_super2"},
	{0, EXT4_FEATURE_COMPAT_FAST_COMMIT, "fast_commit"},
	{0, EXT4_FEATURE_COMPAT_STABLE_INODES, "stable_inodes"},
	{0, EXT4_FEATURE_COMPAT_ORPHAN_FILE, "orphan_file"},
	{2, EXT4_FEATURE_RO_COMPAT_SPARSE_SUPER, "sparse_super"},
	{2, EXT4_FEATURE_RO_COMPAT_LARGE_FILE, "large_file"},
	{2, EXT4_FEATURE_RO_COMPAT_HUGE_FILE, "huge_file"},
	{2, EXT4_FEATURE_RO_COMPAT_GDT_CSUM, "uninit_bg"},
	{2, EXT4_FEATURE_RO_COMPAT_DIR_NLINK, "dir_nlink"},
	{2, EXT4_FEATURE_RO_COMPAT_EXTRA_ISIZE, "extra_isize"},
	{2, EXT4_FEATURE_RO_COMPAT_QUOTA, "quota"},
	{2, EXT4_FEATURE_RO_COMPAT_BIGALLOC, "bigalloc"},
	{2, EXT4_FEATURE_RO_COMPAT_METADATA_CSUM, "metadata_csum"},
	{2, EXT4_FEATURE_RO_COMPAT_REPLICA, "replica"},
	{2, EXT4_FEATURE_RO_COMPAT_READONLY, "read-only"},
	{2, EXT4_FEATURE_RO_COMPAT_PROJECT, "project"},
	{2, EXT4_FEATURE_RO_COMPAT_SHARED_BLOCKS, "shared_blocks"},
	{2, EXT4_FEATURE_RO_COMPAT_VERITY, "verity"},
	{2, EXT4_FEATURE_RO_COMPAT_ORPHAN_PRESENT, "orphan_present"},
	{2, EXT4_FEATURE_RO_COMPAT_BTREE_DIR, "btree_dir"},
	{2, EXT4_FEATURE_RO_COMPAT_HAS_SNAPSHOT, "snapshot"},
	{1, EXT4_FEATURE_INCOMPAT_COMPRESSION, "compression"},
	{1, EXT4_FEATURE_INCOMPAT_FILETYPE, "filetype"},
	{1, EXT4_FEATURE_INCOMPAT_RECOVER, "needs_recovery"},
	{1, EXT4_FEATURE_INCOMPAT_JOURNAL_DEV, "journal_dev"},
	{1, EXT4_FEATURE_INCOMPAT_EXTENTS, "extent"},
	{1, EXT4_FEATURE_INCOMPAT_META_BG, "meta_bg"},
	{1, EXT4_FEATURE_INCOMPAT_64BIT, "64bit"},
	{1, EXT4_FEATURE_INCOMPAT_MMP, "mmp"},
	{1, EXT4_FEATURE_INCOMPAT_FLEX_BG, "flex_bg"},
	{1, EXT4_FEATURE_INCOMPAT_EA_INODE, "ea_inode"},
	{1, EXT4_FEATURE_INCOMPAT_DIRDATA, "dirdata"},
	{1, EXT4_FEATURE_INCOMPAT_CSUM_SEED, "metadata_csum_seed"},
	{1, EXT4_FEATURE_INCOMPAT_LARGEDIR, "large_dir"},
	{1, EXT4_FEATURE_INCOMPAT_INLINE_DATA, "inline_data"},
	{1, EXT4_FEATURE_INCOMPAT_ENCRYPT, "encrypt"},
	{1, EXT4_FEATURE_INCOMPAT_CASEFOLD, "casefold"},
};

static void append_name(char *buf, size_t size, size_t *len, const char *name)
{
	int n = snprintf(buf + *len, size - *len, "%s%s", *len ? " " : "", name);

	if (n > 0 && (size_t)n < size - *len)
		*len += (size_t)n;
}

/* Append the name of each bit of mask (of the given kind) to buf. */
static void names_of(int kind, uint32_t mask, char *buf, size_t size, size_t *len)
{
	for (int bit = 0; bit < 32; bit++) {
		uint32_t m = 1u << bit;
		const char *name = NULL;
		char unknown[32];

		if (!(mask & m))
			continue;
		for (size_t i = 0; i < sizeof(feature_names) / sizeof(feature_names[0]); i++)
			if (feature_names[i].kind == kind && feature_names[i].mask == m)
				name = feature_names[i].name;
		if (!name) {
			snprintf(unknown, sizeof(unknown), "FEATURE_%c%d", "CIR"[kind], bit);
			name = unknown;
		}
		append_name(buf, size, len, name);
	}
}

void super_feature_names(uint32_t compat, uint32_t incompat, uint32_t ro_compat,
			 char *buf, size_t size)
{
	size_t len = 0;

	if (!size)
		return;
	buf[0] = '\0';
	names_of(0, compat, buf, size, &len);
	names_of(1, incompat, buf, size, &len);
	names_of(2, ro_compat, buf, size, &len);
}

/* Refuse, by name, every feature we cannot honour. */
static int check_features(struct uext4_fs *fs, bool read_only)
{
	char names[256];
	uint32_t bad = fs->feature_incompat & ~SUPPORTED_INCOMPAT;

	if (fs->feature_incompat & EXT4_FEATURE_INCOMPAT_JOURNAL_DEV)
		return fs_err(EOPNOTSUPP, "this is an external journal device (journal_dev), not a file system");
	if (FS_HAS_COMPAT(fs, HAS_JOURNAL) && le32(fs->sb.s_journal_inum) == 0)
		return fs_err(EOPNOTSUPP, "the file system's journal is on an external device "
			      "(s_journal_dev 0x%x), which uext4 does not support; only internal "
			      "journals (in inode %u) are", le32(fs->sb.s_journal_dev),
			      EXT4_JOURNAL_INO);
	if ((fs->feature_incompat & EXT4_FEATURE_INCOMPAT_RECOVER) &&
	    !FS_HAS_COMPAT(fs, HAS_JOURNAL))
		return fs_corrupt("superblock: needs_recovery is set but there is no journal "
				  "(run e2fsck)");
	if (bad) {
		super_feature_names(0, bad, 0, names, sizeof(names));
		return fs_err(EOPNOTSUPP, "unsupported feature: %s", names);
	}
	bad = fs->feature_ro_compat & ~SUPPORTED_RO_COMPAT;
	if (bad & EXT4_FEATURE_RO_COMPAT_BIGALLOC) {
		/* Cluster-based allocation changes bitmap and extent semantics. */
		return fs_err(EOPNOTSUPP, "unsupported feature: bigalloc");
	}
	if (bad && !read_only) {
		super_feature_names(0, 0, bad, names, sizeof(names));
		return fs_err(EROFS, "unsupported feature for writing: %s (mount read-only)", names);
	}
	return 0;
}

static bool is_power_of(uint32_t n, uint32_t base)
{
	while (n > 1 && n % base == 0)
		n /= base;
	return n == 1;
}

bool super_group_has_super(struct uext4_fs *fs, uint32_t g)
{
	if (g == 0)
		return true;
	if (FS_HAS_COMPAT(fs, SPARSE_SUPER2))
		return g == le32(fs->sb.s_backup_bgs[0]) || g == le32(fs->sb.s_backup_bgs[1]);
	if (g <= 1 || !FS_HAS_RO_COMPAT(fs, SPARSE_SUPER))
		return true;
	if (!(g & 1))
		return false;
	return is_power_of(g, 3) || is_power_of(g, 5) || is_power_of(g, 7);
}

uint64_t super_desc_location(struct uext4_fs *fs, uint32_t group, uint32_t *offset)
{
	uint32_t per_block = fs->block_size / fs->desc_size;
	uint32_t nr = group / per_block, first_group;
	uint64_t sb_block = fs->block_size == 1024 ? 1 : 0;
	uint64_t has_super;

	*offset = (group % per_block) * fs->desc_size;
	if (!FS_HAS_INCOMPAT(fs, META_BG) || nr < le32(fs->sb.s_first_meta_bg))
		return sb_block + nr + 1;
	/* meta_bg: the descriptors of a meta group sit in its first group,
	 * after the superblock backup if that group has one. */
	first_group = nr * per_block;
	has_super = super_group_has_super(fs, first_group) ? 1 : 0;
	if (fs->block_size == 1024 && nr == 0 && fs->first_data_block == 0)
		has_super++; /* the superblock is in block 1 */
	return (uint64_t)first_group * fs->blocks_per_group + fs->first_data_block + has_super;
}

static int check_range(struct uext4_fs *fs, uint32_t g, const char *what, uint64_t blk,
		       uint64_t count)
{
	if (blk < fs->first_data_block || blk >= fs->blocks_count ||
	    count > fs->blocks_count - blk)
		return fs_corrupt("group descriptor %u: %s at block %llu lies outside the "
				  "file system (%llu blocks)",
				  g, what, (unsigned long long)blk,
				  (unsigned long long)fs->blocks_count);
	return 0;
}

static int parse_group_desc(struct uext4_fs *fs, uint32_t g, const uint8_t *raw)
{
	const struct ext4_group_desc *d = (const void *)raw;
	struct group_info *gi = &fs->groups[g];
	bool big = fs->desc_size >= EXT4_MIN_DESC_SIZE_64BIT;
	int err = csum_verify_group_desc(fs, g, raw);

	if (err)
		return err;
	gi->block_bitmap = le32(d->bg_block_bitmap_lo);
	gi->inode_bitmap = le32(d->bg_inode_bitmap_lo);
	gi->inode_table = le32(d->bg_inode_table_lo);
	gi->free_blocks = le16(d->bg_free_blocks_count_lo);
	gi->free_inodes = le16(d->bg_free_inodes_count_lo);
	gi->used_dirs = le16(d->bg_used_dirs_count_lo);
	gi->itable_unused = le16(d->bg_itable_unused_lo);
	gi->flags = le16(d->bg_flags);
	gi->block_bitmap_csum = le16(d->bg_block_bitmap_csum_lo);
	gi->inode_bitmap_csum = le16(d->bg_inode_bitmap_csum_lo);
	if (fs->desc_size >= EXT4_MIN_DESC_SIZE_64BIT) {
		gi->block_bitmap_csum |= (uint32_t)le16(d->bg_block_bitmap_csum_hi) << 16;
		gi->inode_bitmap_csum |= (uint32_t)le16(d->bg_inode_bitmap_csum_hi) << 16;
	}
	if (big) {
		gi->block_bitmap |= (uint64_t)le32(d->bg_block_bitmap_hi) << 32;
		gi->inode_bitmap |= (uint64_t)le32(d->bg_inode_bitmap_hi) << 32;
		gi->inode_table |= (uint64_t)le32(d->bg_inode_table_hi) << 32;
		gi->free_blocks |= (uint32_t)le16(d->bg_free_blocks_count_hi) << 16;
		gi->free_inodes |= (uint32_t)le16(d->bg_free_inodes_count_hi) << 16;
		gi->used_dirs |= (uint32_t)le16(d->bg_used_dirs_count_hi) << 16;
		gi->itable_unused |= (uint32_t)le16(d->bg_itable_unused_hi) << 16;
	}
	/* Reads need the inode table; the bitmaps matter only for writing,
	 * and super_check_groups() checks them before a read-write mount. */
	if ((err = check_range(fs, g, "inode table", gi->inode_table, fs->itb_per_group)))
		return err;
	if (gi->free_inodes > fs->inodes_per_group || gi->itable_unused > fs->inodes_per_group)
		return fs_corrupt("group descriptor %u: %u free inodes, %u unused, but only %u "
				  "inodes per group",
				  g, gi->free_inodes, gi->itable_unused, fs->inodes_per_group);
	if (gi->free_blocks > group_nblocks(fs, g))
		return fs_corrupt("group descriptor %u: %u free blocks, but the group has %u",
				  g, gi->free_blocks, group_nblocks(fs, g));
	/* What the descriptor says never held an inode (seed 002); trusted
	 * for the shortcut only once ialloc has seen the bitmap agree. */
	if (!fs->metadata_csum && !fs->gdt_csum)
		gi->used_at_mount = fs->inodes_per_group;
	else if (gi->flags & EXT4_BG_INODE_UNINIT)
		gi->used_at_mount = 0;
	else
		gi->used_at_mount = fs->inodes_per_group - gi->itable_unused;
	atomic_init(&gi->never_used_from, fs->inodes_per_group);
	return 0;
}

static int load_group_descs(struct uext4_fs *fs)
{
	uint32_t dpb = fs->block_size / fs->desc_size;
	uint32_t nblocks = DIV_ROUND_UP(fs->groups_count, dpb);

	fs->groups = aligned_alloc(CACHELINE, sizeof(*fs->groups) * fs->groups_count);
	if (!fs->groups)
		return fs_err(ENOMEM, "out of memory for %u group descriptors", fs->groups_count);
	memset(fs->groups, 0, sizeof(*fs->groups) * fs->groups_count);
	for (uint32_t g = 0; g < fs->groups_count; g++)
		ulock_init(&fs->groups[g].lock, RANK_GROUP);
	for (uint32_t i = 0; i < nblocks; i++) {
		uint32_t off;
		uint64_t blk = super_desc_location(fs, i * dpb, &off);
		struct buf *b;
		int err;

		if (blk >= fs->blocks_count)
			return fs_corrupt("group descriptor block %u at %llu is past the end", i,
					  (unsigned long long)blk);
		err = bread(fs->bc, blk, UEXT4_META_GROUP_DESC, &b);
		if (err)
			return err;
		for (uint32_t j = 0; j < dpb && i * dpb + j < fs->groups_count; j++) {
			err = parse_group_desc(fs, i * dpb + j, b->data + j * fs->desc_size);
			if (err)
				break;
		}
		brelse(fs->bc, b);
		if (err)
			return err;
	}
	return 0;
}

/* Geometry checks: everything later code divides by or indexes with. */
static int check_geometry(struct uext4_fs *fs, uint64_t dev_size)
{
	const struct ext4_super_block *sb = &fs->sb;
	uint32_t log = le32(sb->s_log_block_size);

	if (log > 6)
		return fs_corrupt("superblock: block size 2^%u KiB is absurd", log);
	fs->log_block_size = 10 + log;
	fs->block_size = 1u << fs->log_block_size;
	fs->blocks_per_group = le32(sb->s_blocks_per_group);
	fs->inodes_per_group = le32(sb->s_inodes_per_group);
	fs->first_data_block = le32(sb->s_first_data_block);
	fs->inodes_count = le32(sb->s_inodes_count);
	fs->blocks_count = le32(sb->s_blocks_count_lo);
	if (FS_HAS_INCOMPAT(fs, 64BIT))
		fs->blocks_count |= (uint64_t)le32(sb->s_blocks_count_hi) << 32;
	if (le32(sb->s_rev_level) == EXT4_GOOD_OLD_REV) {
		fs->inode_size = EXT4_GOOD_OLD_INODE_SIZE;
		fs->first_ino = EXT4_GOOD_OLD_FIRST_INO;
	} else {
		fs->inode_size = le16(sb->s_inode_size);
		fs->first_ino = le32(sb->s_first_ino);
	}
	if (fs->blocks_per_group == 0 || fs->blocks_per_group > 8 * fs->block_size ||
	    fs->blocks_per_group % 8)
		return fs_corrupt("superblock: %u blocks per group (block size %u)",
				  fs->blocks_per_group, fs->block_size);
	if (fs->inodes_per_group == 0 || fs->inodes_per_group > 8 * fs->block_size)
		return fs_corrupt("superblock: %u inodes per group (block size %u)",
				  fs->inodes_per_group, fs->block_size);
	if (fs->inode_size < EXT4_GOOD_OLD_INODE_SIZE || fs->inode_size > fs->block_size ||
	    (fs->inode_size & (fs->inode_size - 1)))
		return fs_corrupt("superblock: inode size %u", fs->inode_size);
	if (fs->first_data_block != (fs->block_size == 1024 ? 1u : 0u) &&
	    fs->first_data_block != 0)
		return fs_corrupt("superblock: first data block %u", fs->first_data_block);
	if (fs->blocks_count <= fs->first_data_block)
		return fs_corrupt("superblock: %llu blocks", (unsigned long long)fs->blocks_count);
	if (fs->blocks_count > dev_size / fs->block_size)
		return fs_corrupt("superblock: %llu blocks of %u bytes, but the device has only "
				  "%llu bytes (truncated image?)",
				  (unsigned long long)fs->blocks_count, fs->block_size,
				  (unsigned long long)dev_size);
	fs->groups_count = (uint32_t)DIV_ROUND_UP(fs->blocks_count - fs->first_data_block,
						  fs->blocks_per_group);
	if ((uint64_t)fs->groups_count * fs->inodes_per_group != fs->inodes_count)
		return fs_corrupt("superblock: %u inodes, but %u groups of %u inodes",
				  fs->inodes_count, fs->groups_count, fs->inodes_per_group);
	if (fs->first_ino < EXT4_GOOD_OLD_FIRST_INO || fs->first_ino > fs->inodes_count)
		return fs_corrupt("superblock: first inode %u", fs->first_ino);
	fs->inodes_per_block = fs->block_size / fs->inode_size;
	fs->itb_per_group = DIV_ROUND_UP(fs->inodes_per_group, fs->inodes_per_block);
	fs->desc_size = EXT4_MIN_DESC_SIZE;
	if (FS_HAS_INCOMPAT(fs, 64BIT)) {
		fs->desc_size = le16(sb->s_desc_size);
		if (fs->desc_size < EXT4_MIN_DESC_SIZE_64BIT || fs->desc_size > 1024 ||
		    (fs->desc_size & (fs->desc_size - 1)) || fs->desc_size > fs->block_size)
			return fs_corrupt("superblock: group descriptor size %u", fs->desc_size);
	}
	return 0;
}

static int setup_checksums(struct uext4_fs *fs)
{
	const struct ext4_super_block *sb = &fs->sb;

	fs->metadata_csum = FS_HAS_RO_COMPAT(fs, METADATA_CSUM);
	fs->gdt_csum = !fs->metadata_csum && FS_HAS_RO_COMPAT(fs, GDT_CSUM);
	if (!fs->metadata_csum)
		return 0;
	if (sb->s_checksum_type != EXT4_CRC32C_CHKSUM)
		return fs_corrupt("superblock: unknown checksum type %u", sb->s_checksum_type);
	if (FS_HAS_INCOMPAT(fs, CSUM_SEED))
		fs->csum_seed = le32(sb->s_checksum_seed);
	else
		fs->csum_seed = crc32c(~0u, sb->s_uuid, sizeof(sb->s_uuid));
	return csum_verify_super(fs, sb);
}

static void setup_hash(struct uext4_fs *fs)
{
	for (int i = 0; i < 4; i++)
		fs->hash_seed[i] = le32(fs->sb.s_hash_seed[i]);
	fs->def_hash_version = fs->sb.s_def_hash_version;
	fs->hash_unsigned = (le32(fs->sb.s_flags) & EXT2_FLAGS_UNSIGNED_HASH) != 0;
}

static int read_super(struct uext4_fs *fs, bool read_only)
{
	int err = bdev_read(fs->dev, &fs->sb, sizeof(fs->sb), EXT4_SUPERBLOCK_OFFSET);

	if (err)
		return err;
	if (le16(fs->sb.s_magic) != EXT4_SUPER_MAGIC)
		return fs_err(EINVAL, "not an ext2/3/4 file system (no superblock magic 0xEF53 "
			      "at byte 1080, found 0x%04x)", le16(fs->sb.s_magic));
	fs->feature_compat = le32(fs->sb.s_feature_compat);
	fs->feature_incompat = le32(fs->sb.s_feature_incompat);
	fs->feature_ro_compat = le32(fs->sb.s_feature_ro_compat);
	if ((err = setup_checksums(fs)) || (err = check_features(fs, read_only)) ||
	    (err = check_geometry(fs, fs->dev->size)))
		return err;
	setup_hash(fs);
	fs->want_extra_isize = le16(fs->sb.s_want_extra_isize);
	if (fs->inode_size > EXT4_GOOD_OLD_INODE_SIZE &&
	    (fs->want_extra_isize < 32 ||
	     EXT4_GOOD_OLD_INODE_SIZE + (uint32_t)fs->want_extra_isize > fs->inode_size))
		fs->want_extra_isize = 32; /* what the kernel uses by default */
	if (FS_HAS_INCOMPAT(fs, FLEX_BG) && fs->sb.s_log_groups_per_flex < 32)
		fs->log_groups_per_flex = fs->sb.s_log_groups_per_flex;
	fs->reserved_blocks = le32(fs->sb.s_r_blocks_count_lo);
	if (FS_HAS_INCOMPAT(fs, 64BIT))
		fs->reserved_blocks |= (uint64_t)le32(fs->sb.s_r_blocks_count_hi) << 32;
	return 0;
}

static int open_device(const char *path, const struct uext4_opts *o, struct bdev **out)
{
	int err = 0;

	*out = o->memory_backend ? bdev_open_memory_copy_at(path, o->offset, &err)
				 : bdev_open_path(path, o->read_only, o->offset, o->discard, &err);
	return *out ? 0 : (err ? err : -EIO);
}

/* Sharded counters start from the sum of the group descriptors, as the
 * kernel's (the superblock's copy is only a hint). */
static int setup_hot(struct uext4_fs *fs)
{
	uint64_t fb = 0, fi = 0, dirs = 0;
	uint32_t words = (fs->groups_count + 63) / 64;

	fs->hot = aligned_alloc(CACHELINE, (sizeof(*fs->hot) + CACHELINE - 1) / CACHELINE * CACHELINE);
	if (!fs->hot)
		return fs_err(ENOMEM, "out of memory for the counters");
	memset(fs->hot, 0, sizeof(*fs->hot));
	fs->hot->group_dirty = calloc(words, sizeof(uint64_t));
	if (!fs->hot->group_dirty)
		return fs_err(ENOMEM, "out of memory for the counters");
	for (uint32_t g = 0; g < fs->groups_count; g++) {
		fb += fs->groups[g].free_blocks;
		fi += fs->groups[g].free_inodes;
		dirs += fs->groups[g].used_dirs;
	}
	pcounter_set(&fs->hot->free_blocks, (int64_t)fb);
	pcounter_set(&fs->hot->free_inodes, (int64_t)fi);
	pcounter_set(&fs->hot->dirs, (int64_t)dirs);
	return 0;
}

void group_set_dirty(struct uext4_fs *fs, uint32_t group)
{
	_Atomic uint64_t *w;
	uint64_t bit = 1ull << (group % 64);

	if (group >= fs->groups_count)
		return;
	/* Read first: the bit is usually set already, and a read keeps the
	 * line shared between creators instead of bouncing it. */
	w = &fs->hot->group_dirty[group / 64];
	if (!(atomic_load_explicit(w, memory_order_relaxed) & bit))
		atomic_fetch_or(w, bit);
}

/* The superblock changed outside the counters (state, mount count). */
void super_mark_dirty(struct uext4_fs *fs)
{
	atomic_store(&fs->hot->sb_dirty, true);
}

/*
 * The superblock straight to the device and flushed, besides its buffer
 * (journaled at the next commit): needs_recovery must be on disk before
 * the journal holds anything, and cleared only after it is empty.  The
 * direct copy names last_orphan (disk byte order) as its orphan list head.
 */
static int write_super_now(struct uext4_fs *fs, uint32_t last_orphan)
{
	struct ext4_super_block sb;
	int err;

	if ((err = super_write(fs)))
		return err;
	sb = fs->sb;
	sb.s_last_orphan = last_orphan;
	fs_errors_fold(fs, &sb);     /* the checksum, and the image errors are written on */
	err = bdev_write(fs->dev, &sb, sizeof(sb), EXT4_SUPERBLOCK_OFFSET);
	if (!err && !(err = bdev_flush(fs->dev)))
		fs_errors_committed(fs);
	return err;
}

static void set_incompat(struct uext4_fs *fs, uint32_t bit, bool on)
{
	fs->feature_incompat = on ? fs->feature_incompat | bit : fs->feature_incompat & ~bit;
	fs->sb.s_feature_incompat = cpu_to_le32(fs->feature_incompat);
}

/*
 * The mount's first write (trans.c calls it before the first commit that
 * has dirty blocks, or at mount when the image must change anyway): the
 * superblock start_writing() prepared in memory, straight to the device
 * and flushed, as the kernel writes it at mount.
 */
int super_begin_writing(struct uext4_fs *fs)
{
	/* Handles may have run since the mount (this write comes with the
	 * first commit): fs->sb names their orphan list, whose inodes only
	 * the transaction being committed allocates.  A crash before its
	 * commit block would leave a superblock naming an orphan that is
	 * free on disk (the kernel's orphan cleanup and ours refuse it).  So
	 * the direct copy keeps the head the disk has; the journaled buffer
	 * has the new one.  The free counts may run ahead of the disk:
	 * e2fsck recounts them. */
	return write_super_now(fs, fs->disk_last_orphan);
}

/* ------------------------------------------------------------ the journal's host
 * What the journal (journal.h) gets from the file system: its file, the
 * journal inode, and the error mark of a replay that skipped blocks.
 */

/* Which journal inode; refuses external journals. */
static int journal_inum(struct uext4_fs *fs, uint32_t *ino)
{
	if (FS_HAS_INCOMPAT(fs, JOURNAL_DEV))
		return fs_err(EINVAL, "this image is an external journal device (journal_dev), "
			      "not a file system");
	*ino = le32(fs->sb.s_journal_inum);
	if (*ino == 0)
		return fs_err(EOPNOTSUPP, "external journals are not supported (journal on device "
			      "0x%x, uuid %02x%02x%02x%02x...): uext4 uses the internal journal "
			      "inode only", le32(fs->sb.s_journal_dev), fs->sb.s_journal_uuid[0],
			      fs->sb.s_journal_uuid[1], fs->sb.s_journal_uuid[2],
			      fs->sb.s_journal_uuid[3]);
	if (*ino > fs->inodes_count)
		return fs_corrupt("superblock: journal inode %u beyond the %u inodes", *ino,
				  fs->inodes_count);
	return 0;
}

static int journal_get(struct uext4_fs *fs, void **file, uint64_t *size, uint64_t *id)
{
	struct inode *inode;
	uint32_t ino = 0;
	int err = journal_inum(fs, &ino);

	if (err)
		return err;
	err = iget(fs, ino, &inode);
	if (err)
		return err;
	*file = inode;
	*size = inode->size;
	*id = inode->ino;
	return 0;
}

static int journal_map(struct uext4_fs *fs, void *file, uint32_t lblk, uint32_t count,
		       uint64_t *pblk, uint64_t *len)
{
	struct block_map m;
	int err = inode_map(fs, file, lblk, count, &m);

	if (err)
		return err;
	*pblk = m.pblk;
	*len = m.len;
	return 0;
}

static void journal_put(struct uext4_fs *fs, void *file)
{
	iput(fs, file);
}

/*
 * Blocks were skipped: set EXT4_ERROR_FS in the superblock on the device
 * (after the replay, which may have rewritten it), so that e2fsck checks
 * the file system whatever happens to this mount; flushed before the
 * journal is marked empty.  The error fields (count, block, function) are
 * recorded by the mount's fs_error() once it is up (super.c).
 */
static int journal_mark_error(struct uext4_fs *fs)
{
	struct ext4_super_block sb;
	int err = bdev_read(fs->dev, &sb, sizeof(sb), EXT4_SUPERBLOCK_OFFSET);

	if (err < 0)
		return fs_err(-err, "journal recovery: reading the superblock failed");
	if (le16(sb.s_magic) != EXT4_SUPER_MAGIC)
		return fs_corrupt("superblock after journal replay: bad magic 0x%x",
				  le16(sb.s_magic));
	sb.s_state = cpu_to_le16(le16(sb.s_state) | EXT4_ERROR_FS);
	csum_set_super(fs, &sb);
	err = bdev_write(fs->dev, &sb, sizeof(sb), EXT4_SUPERBLOCK_OFFSET);
	if (err < 0)
		return fs_err(-err, "journal recovery: writing the superblock failed");
	return 0;
}

const struct journal_host super_journal_host = {
	.get = journal_get,
	.map = journal_map,
	.put = journal_put,
	.mark_error = journal_mark_error,
	.now = fs_time,
};

/* What trans.c's commit calls above it: descriptors, the superblock, the
 * first write, and the blocks freed by a transaction (balloc.c). */
static const struct commit_host super_commit_host = {
	.begin_writing = super_begin_writing,
	.group_set_dirty = group_set_dirty,
	.write_group_desc = super_write_group_desc,
	.write_super = super_write,
	.release_busy = balloc_release_busy,
	.has_busy = balloc_has_busy,
};

/*
 * Read-write mount: open the journal and prepare the superblock for
 * writing (needs_recovery as the kernel, or without a journal the state
 * not clean; the mount count and time; orphan_present), in memory only:
 * it reaches the disk with the first commit that changes something
 * (super_begin_writing()), so a mount that only reads leaves the image
 * byte for byte as it was.  Then finish what a crash left on the orphan
 * lists and start the commit timer.
 */
static int start_writing(struct uext4_fs *fs, const struct uext4_opts *o)
{
	struct timespec now = fs_time(fs);
	/* Left by a crash or by the replay: clearing it is a change to make. */
	bool must_write = FS_HAS_INCOMPAT(fs, RECOVER) || FS_HAS_RO_COMPAT(fs, ORPHAN_PRESENT);
	int err;

	(void)o;
	fs->disk_last_orphan = fs->sb.s_last_orphan;   /* the first write keeps it */
	if (FS_HAS_COMPAT(fs, HAS_JOURNAL) && (err = journal_open(fs, &super_journal_host, &fs->journal)))
		return err;
	if ((err = trans_init(fs, &super_commit_host)) || (err = balloc_init(fs)))
		return err;
	fs->sb.s_mnt_count = cpu_to_le16((uint16_t)(le16(fs->sb.s_mnt_count) + 1));
	fs->sb.s_mtime = cpu_to_le32((uint32_t)now.tv_sec);
	fs->sb.s_mtime_hi = (uint8_t)((uint64_t)now.tv_sec >> 32);
	if (fs->journal)
		set_incompat(fs, EXT4_FEATURE_INCOMPAT_RECOVER, true);
	if (!fs->journal || fs->bulk)
		/* Without a journal (or with one the bulk mode does not log
		 * into) a crash needs e2fsck: say so until unmount. */
		fs->sb.s_state = cpu_to_le16(le16(fs->sb.s_state) & ~EXT4_VALID_FS);
	if ((err = orphan_init(fs)) || (must_write && (err = trans_begin_writing(fs))))
		return err;
	err = orphan_cleanup(fs, &fs->recovery);
	if (atomic_load(&fs->aborted))
		return 0;   /* an error made the mount read-only (errors=remount-ro) */
	if (err)
		return err;
	if (fs->recovery.bad_blocks)
		/* Recorded now that the mount can write (recovery.c set
		 * EXT4_ERROR_FS already); the errors= policy applies. */
		FS_ERROR(fs, EBADMSG, 0, fs->recovery.bad_home_block,
			 "journal recovery: %u logged blocks had a bad checksum and were not "
			 "replayed (first: journal block %u, transaction %u, home block %llu)",
			 fs->recovery.bad_blocks, fs->recovery.bad_journal_block,
			 fs->recovery.bad_tid, (unsigned long long)fs->recovery.bad_home_block);
	if (atomic_load(&fs->aborted))
		return 0;
	if (fs->recovery.orphans_truncated || fs->recovery.orphans_deleted ||
	    fs->recovery.orphans_failed)
		err = trans_commit(fs);
	if (err || fs->bulk)
		return err; /* bulk: no timer, commits at deterministic points */
	return trans_start_timer(fs, fs->commit_secs);
}

/* Superblock block number and the superblock's offset in it. */
static uint64_t super_block_location(struct uext4_fs *fs, uint32_t *off)
{
	*off = EXT4_SUPERBLOCK_OFFSET % fs->block_size;
	return EXT4_SUPERBLOCK_OFFSET / fs->block_size;
}

/*
 * Called by the commit with no handle open: counters from the sharded
 * counters, the write time, the checksum.  fs->sb is changed only here
 * and at mount/unmount (all with no handle open, under the commit lock);
 * readers (uext4_info) take the commit lock too.
 */
int super_write(struct uext4_fs *fs)
{
	struct ext4_super_block *sb = &fs->sb;
	uint64_t fb = (uint64_t)MAX(pcounter_sum(&fs->hot->free_blocks), 0);
	uint64_t fi = (uint64_t)MAX(pcounter_sum(&fs->hot->free_inodes), 0);
	struct timespec now = fs_time(fs);
	uint32_t off;
	uint64_t blk = super_block_location(fs, &off);
	struct buf *b;
	int err;

	atomic_store(&fs->hot->sb_dirty, false);
	sb->s_free_blocks_count_lo = cpu_to_le32((uint32_t)fb);
	if (FS_HAS_INCOMPAT(fs, 64BIT))
		sb->s_free_blocks_count_hi = cpu_to_le32((uint32_t)(fb >> 32));
	sb->s_free_inodes_count = cpu_to_le32((uint32_t)fi);
	sb->s_wtime = cpu_to_le32((uint32_t)now.tv_sec);
	sb->s_wtime_hi = (uint8_t)((uint64_t)now.tv_sec >> 32);
	fs_errors_fold(fs, sb);     /* the recorded errors, the checksum */
	if ((err = bread(fs->bc, blk, UEXT4_META_SUPER, &b)))
		return err;
	memcpy(b->data + off, sb, sizeof(*sb));
	b->csum_kind = CSUM_SUPER;
	bcache_mark_dirty(fs->bc, b);
	brelse(fs->bc, b);
	return 0;
}

static void put16(uint16_t *lo, uint16_t *hi, uint32_t v, bool big)
{
	*lo = cpu_to_le16((uint16_t)v);
	if (big)
		*hi = cpu_to_le16((uint16_t)(v >> 16));
}

/* fs->groups[g] into its descriptor, with the descriptor's checksum. */
int super_write_group_desc(struct uext4_fs *fs, uint32_t g)
{
	const struct group_info *gi = &fs->groups[g];
	bool big = fs->desc_size >= EXT4_MIN_DESC_SIZE_64BIT;
	struct ext4_group_desc *d;
	uint32_t off;
	uint64_t blk = super_desc_location(fs, g, &off);
	struct buf *b;
	int err;

	if ((err = bread(fs->bc, blk, UEXT4_META_GROUP_DESC, &b)))
		return err;
	d = (struct ext4_group_desc *)(b->data + off);
	put16(&d->bg_free_blocks_count_lo, &d->bg_free_blocks_count_hi, gi->free_blocks, big);
	put16(&d->bg_free_inodes_count_lo, &d->bg_free_inodes_count_hi, gi->free_inodes, big);
	put16(&d->bg_used_dirs_count_lo, &d->bg_used_dirs_count_hi, gi->used_dirs, big);
	put16(&d->bg_itable_unused_lo, &d->bg_itable_unused_hi, atomic_load(&gi->itable_unused),
	      big);
	d->bg_flags = cpu_to_le16((uint16_t)atomic_load(&gi->flags));
	if (fs->metadata_csum) {
		put16(&d->bg_block_bitmap_csum_lo, &d->bg_block_bitmap_csum_hi,
		      gi->block_bitmap_csum, fs->desc_size >= GD_BLOCK_CSUM_HI_END_);
		put16(&d->bg_inode_bitmap_csum_lo, &d->bg_inode_bitmap_csum_hi,
		      gi->inode_bitmap_csum, fs->desc_size >= GD_INODE_CSUM_HI_END_);
	}
	csum_set_group_desc(fs, g, d);
	b->csum_kind = CSUM_GROUP_DESC;
	bcache_mark_dirty(fs->bc, b);
	brelse(fs->bc, b);
	return 0;
}

int super_mount(const char *path, const struct uext4_opts *opts, struct uext4_fs **out)
{
	struct uext4_opts none = {0};
	const struct uext4_opts *o = opts ? opts : &none;
	struct bdev *dev;
	int err = open_device(path, o, &dev);

	if (err)
		return err;
	return super_mount_bdev(dev, o, out);
}

/* The caches and group table of a mount (none of it written back). */
static int load_caches(struct uext4_fs *fs, const struct uext4_opts *o)
{
	fs->bc = bcache_create(fs->dev, fs->block_size, o->cache_bytes);
	fs->icache = fs->bc ? icache_create(fs, o->inode_cache) : NULL;
	if (!fs->icache)
		return fs_err(ENOMEM, "out of memory for the caches");
	fs->nc = namecache_create(o); /* NULL (off, or no memory): lookups read dirs */
	return load_group_descs(fs);
}

static void drop_caches(struct uext4_fs *fs)
{
	namecache_destroy(fs->nc);
	fs->nc = NULL;
	if (fs->icache)
		icache_destroy(fs->icache);
	fs->icache = NULL;
	if (fs->bc)
		bcache_destroy(fs->bc);
	fs->bc = NULL;
	if (fs->groups)
		for (uint32_t g = 0; g < fs->groups_count; g++)
			ulock_destroy(&fs->groups[g].lock);
	free(fs->groups);
	fs->groups = NULL;
}

/*
 * needs_recovery: replay the journal with just enough of a mount to find
 * the journal inode, then forget everything cached (replay rewrote blocks
 * under it) and read the superblock again.  A read-only mount replays
 * into a memory overlay: the image itself is never written.
 */
static int recover(struct uext4_fs *fs, const struct uext4_opts *o)
{
	struct journal_replay r = {0};
	struct ext4_super_block before = fs->sb;
	int err;

	if (fs->read_only) {
		struct bdev *ov = bdev_open_overlay(fs->dev);

		if (!ov)
			return fs_err(ENOMEM, "out of memory for replaying the journal in memory");
		fs->dev = ov;
		fs->recovery.replayed_in_memory = 1;
	}
	err = load_caches(fs, o);
	/* As the kernel, check the descriptors before the replay writes. */
	if (!err && !fs->read_only)
		err = super_check_groups(fs);
	if (!err)
		err = journal_recover(fs, &super_journal_host, &r);
	drop_caches(fs);
	if (err)
		return err;
	fs->recovery.transactions = r.transactions;
	fs->recovery.blocks = r.blocks;
	fs->recovery.revoked = r.revoked;
	fs->recovery.bad_checksum = r.stopped_on_bad_csum;
	fs->recovery.bad_blocks = r.bad_blocks;
	fs->recovery.bad_journal_block = r.bad_logpos;
	fs->recovery.bad_tid = r.bad_tid;
	fs->recovery.bad_home_block = r.bad_home;
	if (!r.transactions)
		fs->recovery.replayed_in_memory = 0;
	if ((err = read_super(fs, fs->read_only)))
		return err;
	/* The log's copy of the superblock predates errors recorded since
	 * (before this mount, or by the replay itself). */
	fs_errors_keep_across_replay(&fs->sb, &before);
	fs_errors_fold(fs, &fs->sb);
	fs_errors_committed(fs);
	return 0;
}

int super_mount_bdev(struct bdev *dev, const struct uext4_opts *opts, struct uext4_fs **out)
{
	struct uext4_opts none = {0};
	const struct uext4_opts *o = opts ? opts : &none;
	struct uext4_fs *fs = aligned_alloc(CACHELINE, sizeof(*fs));
	int err;

	if (!fs) {
		bdev_close(dev);
		return fs_err(ENOMEM, "out of memory");
	}
	memset(fs, 0, sizeof(*fs));
	fs->dev = dev;
	fs->read_only = o->read_only != 0 || dev->read_only;
	fs->commit_secs = o->commit_secs ? o->commit_secs : 5;
	fs->max_open_files = o->max_open_files ? o->max_open_files : 65536;
	fs->use_fixed_time = o->use_fixed_time != 0;
	fs->fixed_time = o->fixed_time;
	fs->bulk = o->bulk != 0;
	if ((err = stats_init(fs)) || (err = read_super(fs, o->read_only)) || (err = fs_errors_init(fs, o)))
		goto fail;
	if ((fs->feature_incompat & EXT4_FEATURE_INCOMPAT_RECOVER) && (err = recover(fs, o)))
		goto fail;
	if ((err = load_caches(fs, o)) || (err = setup_hot(fs)))
		goto fail;
	if (!fs->read_only && (err = super_check_groups(fs)))
		goto fail;
	/* Like the kernel, refuse a file system whose root is unreadable; the
	 * reference held until unmount lets path walks start lock-free. */
	if ((err = iget(fs, EXT4_ROOT_INO, &fs->root)))
		goto fail;
	if (!S_ISDIR(fs->root->mode)) {
		err = fs_corrupt("root inode %u is not a directory (mode 0%o)", EXT4_ROOT_INO,
				 fs->root->mode);
		goto fail;
	}
	if (!fs->read_only && (err = start_writing(fs, o)))
		goto fail;
	*out = fs;
	return 0;
fail:
	/* Write nothing back from a failed mount; the journal stays as it is
	 * (needs_recovery set) for the next try. */
	trans_stop_timer(fs);
	fs->read_only = true;
	super_umount(fs);
	return err;
}

/*
 * Clean unmount of a read-write mount: free what was unlinked while open,
 * write everything back, empty the orphan lists and the journal, and only
 * then clear needs_recovery (and orphan_present) and mark the file system
 * clean.
 */
static int finish_writing(struct uext4_fs *fs)
{
	int err;

	trans_stop_timer(fs);
	icache_delete_unlinked(fs);
	if ((err = trans_commit(fs)))
		return err;
	if (!trans_writing_started(fs))
		return 0;   /* nothing was changed: nothing is written */
	orphan_umount(fs);
	fs->sb.s_state = cpu_to_le16(le16(fs->sb.s_state) | EXT4_VALID_FS);
	super_mark_dirty(fs);
	if ((err = trans_commit(fs)) || !fs->journal)
		return err;
	if ((err = journal_mark_empty(fs->journal)))
		return err;
	set_incompat(fs, EXT4_FEATURE_INCOMPAT_RECOVER, false);
	return write_super_now(fs, fs->sb.s_last_orphan);   /* all committed: the live head */
}

/*
 * Unmount after an error stopped writing (fs->aborted): the running
 * transaction is dropped, as the kernel's aborted journal; what was
 * committed is home (trans.c writes it there before the next commit),
 * so unless a write-back failed the journal is emptied and the image is
 * clean as of the last commit.  The superblock keeps the recorded errors.
 */
static int finish_aborted(struct uext4_fs *fs)
{
	bool home = trans_write_error(fs) == 0 && !trans_write_failed(fs);
	uint32_t clear = 0;
	int err = 0;

	trans_stop_timer(fs);
	if (!home && !fs->journal && trans_write_failed(fs) && trans_retry_lost(fs) == 0)
		home = true;   /* the device took the lost transaction this time */
	if (!trans_writing_started(fs))
		/* Only the error record was written (error.c): again, in
		 * case the failing device refused it then. */
		return fs_errors_seq(fs) ? fs_errors_write_super(fs, 0, 0) : 0;
	if (home && fs->journal && (err = journal_mark_empty(fs->journal)) == 0)
		clear = EXT4_FEATURE_INCOMPAT_RECOVER;
	if (home && !fs->journal)
		err = bdev_flush(fs->dev);
	{
		int serr = fs_errors_write_super(fs, clear, home && !err ? EXT4_VALID_FS : 0);

		return err ? err : serr;
	}
}

/* An error (errors=remount-ro, a journal abort) or a failed write-back
 * stopped this mount's writing. */
static bool stopped_writing(struct uext4_fs *fs)
{
	return atomic_load(&fs->aborted) || trans_write_failed(fs);
}

int super_umount(struct uext4_fs *fs)
{
	int err = 0;

	if (!fs)
		return 0;
	if (fs->root)
		iput(fs, fs->root);
	fs->root = NULL;
	if (!fs->read_only && fs->trans && !stopped_writing(fs))
		err = finish_writing(fs);
	if (!fs->read_only && fs->trans && stopped_writing(fs)) {
		/* also when finish_writing() met the error */
		int aerr = finish_aborted(fs);

		err = err ? err : aerr;
	}
	trans_stop_timer(fs);
	if (fs->icache)
		icache_destroy(fs->icache);
	fs->icache = NULL;
	if (fs->balloc)
		balloc_destroy(fs);
	free(fs->bad_blocks);
	orphan_destroy(fs);
	xattr_index_destroy(fs);
	trans_destroy(fs);
	if (fs->journal)
		journal_close(fs->journal);
	fs->journal = NULL;
	drop_caches(fs);
	fs_errors_destroy(fs);
	stats_destroy(fs);
	if (fs->dev)
		bdev_close(fs->dev);
	if (fs->hot)
		free((void *)fs->hot->group_dirty);
	free(fs->hot);
	free(fs);
	return err;
}
