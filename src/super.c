/*
 * super.c - the superblock, feature checks and group descriptors.
 *
 * Mount (mount.c) reads the primary superblock here, refuses by name every feature we
 * cannot honour, verifies the checksums the image carries, then parses
 * every group descriptor once into fs->groups, which from then on is the
 * truth for each group: the allocators change it under the group's lock
 * and the commit writes it back (super_write_group_desc()), with the
 * superblock's counters folded from the sharded counters (super_write()).
 */
#include "bcache.h"
#include "blockdev.h"
#include "crc.h"
#include "csum.h"
#include "error.h"
#include "geom.h"
#include "inode.h"
#include "internal.h"
#include "lock.h"
#include "ondisk.h"
#include "super.h"

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
	 EXT4_FEATURE_INCOMPAT_INLINE_DATA | EXT4_FEATURE_INCOMPAT_RECOVER |         \
	 EXT4_FEATURE_INCOMPAT_MMP | EXT4_FEATURE_INCOMPAT_CASEFOLD)

/* Read-only compat features we may mount read-write (we write them all). */
#define SUPPORTED_RO_COMPAT                                                          \
	(EXT4_FEATURE_RO_COMPAT_SPARSE_SUPER | EXT4_FEATURE_RO_COMPAT_LARGE_FILE |   \
	 EXT4_FEATURE_RO_COMPAT_HUGE_FILE | EXT4_FEATURE_RO_COMPAT_GDT_CSUM |        \
	 EXT4_FEATURE_RO_COMPAT_DIR_NLINK | EXT4_FEATURE_RO_COMPAT_EXTRA_ISIZE |     \
	 EXT4_FEATURE_RO_COMPAT_METADATA_CSUM | EXT4_FEATURE_RO_COMPAT_ORPHAN_PRESENT |   \
	 EXT4_FEATURE_RO_COMPAT_QUOTA | EXT4_FEATURE_RO_COMPAT_PROJECT |                 \
	 EXT4_FEATURE_RO_COMPAT_VERITY)

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

/* casefold: the one encoding there is (utf8-12.1, src/utf8.c), and of its
 * flags only strict, as the kernel's ext4_sb_read_encoding() knows them. */
static int check_encoding(const struct uext4_fs *fs)
{
	unsigned enc = le16(fs->sb.s_encoding), flags = le16(fs->sb.s_encoding_flags);

	if (!FS_HAS_INCOMPAT(fs, CASEFOLD))
		return 0;
	if (enc != EXT4_ENC_UTF8_12_1)
		return fs_err(EOPNOTSUPP, "casefold: unknown filename encoding %u (uext4 knows "
			      "utf8-12.1, encoding %u)", enc, EXT4_ENC_UTF8_12_1);
	if (flags & ~EXT4_ENC_STRICT_MODE_FL)
		return fs_err(EOPNOTSUPP, "casefold: unknown encoding flags 0x%x (uext4 knows "
			      "strict, 0x%x)", flags, EXT4_ENC_STRICT_MODE_FL);
	return 0;
}

/* Refuse, by name, every feature we cannot honour. */
static int check_features(struct uext4_fs *fs, bool read_only)
{
	int err;
	char names[256];
	uint32_t bad = fs->feature_incompat & ~SUPPORTED_INCOMPAT;

	if (fs->feature_incompat & EXT4_FEATURE_INCOMPAT_JOURNAL_DEV)
		return fs_err(EOPNOTSUPP, "this is an external journal device (journal_dev), not a file system");
	/* A journal with s_journal_inum 0 is on an external device: the
	 * mount opens it (mount.c, uext4_opts.journal_path). */
	if ((fs->feature_incompat & EXT4_FEATURE_INCOMPAT_RECOVER) &&
	    !FS_HAS_COMPAT(fs, HAS_JOURNAL))
		return fs_corrupt("superblock: needs_recovery is set but there is no journal "
				  "(run e2fsck)");
	if (bad) {
		super_feature_names(0, bad, 0, names, sizeof(names));
		return fs_err(EOPNOTSUPP, "unsupported feature: %s", names);
	}
	if ((err = check_encoding(fs)))
		return err;
	bad = fs->feature_ro_compat & ~SUPPORTED_RO_COMPAT;
	if ((fs->feature_ro_compat & EXT4_FEATURE_RO_COMPAT_BIGALLOC) &&
	    !(fs->feature_incompat & EXT4_FEATURE_INCOMPAT_EXTENTS))
		return fs_corrupt("superblock: bigalloc without extents (the kernel refuses it)");
	if ((bad & EXT4_FEATURE_RO_COMPAT_BIGALLOC) && !read_only)
		return fs_err(EROFS, "bigalloc: uext4 reads file systems with clusters but does not "
			      "write them yet (mount read-only)");
	if (bad && !read_only) {
		super_feature_names(0, 0, bad, names, sizeof(names));
		return fs_err(EROFS, "unsupported feature for writing: %s (mount read-only)", names);
	}
	return 0;
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
	/* Counted in clusters (bigalloc), as the bitmap. */
	if (gi->free_blocks > group_nclusters(fs, g))
		return fs_corrupt("group descriptor %u: %u free clusters, but the group has %u",
				  g, gi->free_blocks, group_nclusters(fs, g));
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

int super_load_group_descs(struct uext4_fs *fs)
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
		uint64_t blk = geom_desc_location(fs, i * dpb, &off);
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

/* Blocks and clusters per group.  Without bigalloc a cluster is a block
 * (s_log_cluster_size is then ignored, as the kernel does); with it the
 * block bitmap has s_clusters_per_group bits, each a cluster of
 * 2^(s_log_cluster_size - s_log_block_size) blocks. */
static int check_clusters(struct uext4_fs *fs)
{
	const struct ext4_super_block *sb = &fs->sb;
	uint32_t log_c = le32(sb->s_log_cluster_size) + 10;

	fs->cluster_bits = 0;
	fs->clusters_per_group = fs->blocks_per_group;
	if (FS_HAS_RO_COMPAT(fs, BIGALLOC)) {
		if (log_c < fs->log_block_size || log_c - fs->log_block_size > 16)
			return fs_corrupt("superblock: cluster size 2^%u with block size %u",
					  log_c, fs->block_size);
		fs->cluster_bits = log_c - fs->log_block_size;
		fs->clusters_per_group = le32(sb->s_clusters_per_group);
		if ((uint64_t)fs->clusters_per_group << fs->cluster_bits != fs->blocks_per_group)
			return fs_corrupt("superblock: %u clusters of %u blocks per group, but %u "
					  "blocks per group", fs->clusters_per_group,
					  1u << fs->cluster_bits, fs->blocks_per_group);
	}
	if (fs->clusters_per_group == 0 || fs->clusters_per_group > 8 * fs->block_size ||
	    fs->clusters_per_group % 8)
		return fs_corrupt("superblock: %u %s per group (block size %u)",
				  fs->clusters_per_group, fs->cluster_bits ? "clusters" : "blocks",
				  fs->block_size);
	return 0;
}

/* Geometry checks: everything later code divides by or indexes with. */
static int check_geometry(struct uext4_fs *fs, uint64_t dev_size)
{
	const struct ext4_super_block *sb = &fs->sb;
	uint32_t log = le32(sb->s_log_block_size);
	int err;

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
	if ((err = check_clusters(fs)))
		return err;
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

int super_read(struct uext4_fs *fs, bool read_only)
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
int super_write_now(struct uext4_fs *fs, uint32_t last_orphan)
{
	struct ext4_super_block sb;
	int err;

	if ((err = super_write(fs)))
		return err;
	sb = fs->sb;
	sb.s_last_orphan = last_orphan;
	fs_errors_fold(fs, &sb);     /* the image errors are written on */
	csum_set_super(fs, &sb);
	err = bdev_write(fs->dev, &sb, sizeof(sb), EXT4_SUPERBLOCK_OFFSET);
	if (!err && !(err = bdev_flush(fs->dev)))
		fs_errors_committed(fs);
	return err;
}

void super_set_incompat(struct uext4_fs *fs, uint32_t bit, bool on)
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
	return super_write_now(fs, fs->disk_last_orphan);
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
	/* The counter counts clusters, the superblock blocks (the kernel's
	 * ext4_commit_super(): EXT4_C2B of the free clusters). */
	uint64_t fb = fs_c2b(fs, (uint64_t)MAX(pcounter_sum(&fs->hot->free_blocks), 0));
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
	fs_errors_fold(fs, sb);     /* the recorded errors */
	csum_set_super(fs, sb);
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
	uint64_t blk = geom_desc_location(fs, g, &off);
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
