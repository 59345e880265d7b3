/*
 * unit_csum - CRC32C/CRC16 and every metadata checksum against a real image.
 *
 * 1. crc32c known vectors, hardware vs table on random buffers, crc16 vectors.
 * 2. mke2fs -O metadata_csum,64bit,orphan_file -d <tree> an image, then with
 *    only bdev + bcache + minimal parsing here, verify the checksums of the
 *    superblock, every group descriptor, every bitmap, the root inode and
 *    all in-use inodes of group 0, a directory leaf, an htree root, an
 *    extent tree block, an xattr block and the orphan file blocks.  Then
 *    flip a byte in a copy of each and check the verify fails with a
 *    message.  3. the same image with gdt_csum instead of metadata_csum:
 *    group descriptors verify with CRC16.
 */
#include "bcache.h"
#include "blockdev.h"
#include "crc.h"
#include "csum.h"
#include "error.h"
#include "internal.h"
#include "ondisk.h"
#include "uext4.h"
#include "t.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>


/* ------------------------------------------------------------- CRCs */

static void test_crc_vectors(void)
{
	static const char digits[] = "123456789";
	uint8_t zeros32[32] = {0}, ones32[32];

	printf("check: crc32c vectors (standard CRC-32C = ~crc32c(~0, ...))\n");
	memset(ones32, 0xff, sizeof(ones32));
	CHECK(~crc32c(~0u, digits, 9) == 0xE3069283u, "crc32c(123456789) = %08x",
	      ~crc32c(~0u, digits, 9));
	CHECK(~crc32c_sw(~0u, digits, 9) == 0xE3069283u, "table crc32c(123456789)");
	/* RFC 3720 B.4 vectors */
	CHECK(~crc32c(~0u, zeros32, 32) == 0x8A9136AAu, "crc32c(32 zeros) = %08x",
	      ~crc32c(~0u, zeros32, 32));
	CHECK(~crc32c(~0u, ones32, 32) == 0x62A8AB43u, "crc32c(32 0xff) = %08x",
	      ~crc32c(~0u, ones32, 32));
	/* Raw: chaining two halves equals one pass. */
	CHECK(crc32c(crc32c(~0u, digits, 4), digits + 4, 5) == crc32c(~0u, digits, 9),
	      "crc32c does not chain");
	CHECK(crc32c(0x12345678u, "", 0) == 0x12345678u, "empty buffer changes crc");

	printf("check: crc16 vectors (ARC 0xBB3D, MODBUS 0x4B37)\n");
	CHECK(crc16(0, digits, 9) == 0xBB3D, "crc16(0, 123456789) = %04x", crc16(0, digits, 9));
	CHECK(crc16(0xFFFF, digits, 9) == 0x4B37, "crc16(~0, 123456789) = %04x",
	      crc16(0xFFFF, digits, 9));
}

static void test_crc_hw_vs_sw(void)
{
	unsigned seed = (unsigned)time(NULL) ^ (unsigned)getpid();
	uint8_t *buf = malloc(70000);

	if (!crc32c_hw_available()) {
		printf("check: crc32c hardware vs table: no SSE4.2 on this CPU, table only\n");
		free(buf);
		return;
	}
	printf("check: crc32c hardware vs table on random buffers (seed %u)\n", seed);
	srand(seed);
	for (int i = 0; i < 70000; i++)
		buf[i] = (uint8_t)rand();
	for (int i = 0; i < 2000; i++) {
		size_t off = (size_t)rand() % 64;
		size_t len = (size_t)rand() % (i < 1000 ? 100 : 65536);
		uint32_t init = (uint32_t)rand();
		uint32_t hw = crc32c_hw(init, buf + off, len), sw = crc32c_sw(init, buf + off, len);

		if (hw != sw) {
			CHECK(0, "hw %08x != sw %08x (off %zu len %zu init %08x)", hw, sw, off, len, init);
			break;
		}
	}
	free(buf);
}

/* ------------------------------------------------------------- image helpers */

static char tmpdir[256];

/* A tree for mke2fs -d: files, a big directory, a fragmented sparse file. */
static int make_tree(const char *root)
{
	FILE *f;
	char path[1024];

	if (t_sh("mkdir -p %s/sub %s/big && echo hello > %s/a && echo world > %s/sub/b",
	       root, root, root, root))
		return -1;
	for (int i = 0; i < 300; i++) {
		snprintf(path, sizeof(path), "%s/big/file_with_a_long_name_%04d", root, i);
		f = fopen(path, "w");
		if (!f)
			return -1;
		fclose(f);
	}
	/* Ten 4 KiB chunks separated by holes: more extents than fit in the
	 * inode, so the tree has an extent block. */
	snprintf(path, sizeof(path), "%s/sparse", root);
	f = fopen(path, "w");
	if (!f)
		return -1;
	for (int i = 0; i < 10; i++) {
		char chunk[4096];

		memset(chunk, 'a' + i, sizeof(chunk));
		fseek(f, (long)i * 65536, SEEK_SET);
		fwrite(chunk, 1, sizeof(chunk), f);
	}
	fclose(f);
	return 0;
}

struct img {
	struct uext4_fs fs;
	struct bdev *dev;
};

static int open_img(struct img *im, const char *path)
{
	struct uext4_fs *fs = &im->fs;
	struct ext4_super_block *sb = &fs->sb;
	int err;

	memset(im, 0, sizeof(*im));
	im->dev = bdev_open_file(path, 1, &err);
	if (!im->dev)
		return err;
	err = bdev_read(im->dev, sb, sizeof(*sb), EXT4_SUPERBLOCK_OFFSET);
	if (err)
		return err;
	if (le16(sb->s_magic) != EXT4_SUPER_MAGIC || le32(sb->s_log_block_size) > 6 ||
	    !le32(sb->s_blocks_per_group) || !le32(sb->s_inodes_per_group))
		return fs_corrupt("superblock of %s: not a usable ext4 superblock", path);
	fs->dev = im->dev;
	fs->block_size = 1024u << le32(sb->s_log_block_size);
	fs->inode_size = le16(sb->s_inode_size);
	fs->feature_compat = le32(sb->s_feature_compat);
	fs->feature_incompat = le32(sb->s_feature_incompat);
	fs->feature_ro_compat = le32(sb->s_feature_ro_compat);
	fs->desc_size = FS_HAS_INCOMPAT(fs, 64BIT) ? le16(sb->s_desc_size) : EXT4_MIN_DESC_SIZE;
	fs->inodes_per_group = le32(sb->s_inodes_per_group);
	fs->blocks_per_group = le32(sb->s_blocks_per_group);
	fs->first_data_block = le32(sb->s_first_data_block);
	fs->blocks_count = le32(sb->s_blocks_count_lo) |
			   (FS_HAS_INCOMPAT(fs, 64BIT) ? (uint64_t)le32(sb->s_blocks_count_hi) << 32 : 0);
	fs->groups_count = (uint32_t)DIV_ROUND_UP(fs->blocks_count - fs->first_data_block,
						  fs->blocks_per_group);
	fs->inodes_count = le32(sb->s_inodes_count);
	fs->metadata_csum = FS_HAS_RO_COMPAT(fs, METADATA_CSUM);
	fs->gdt_csum = FS_HAS_RO_COMPAT(fs, GDT_CSUM);
	fs->csum_seed = FS_HAS_INCOMPAT(fs, CSUM_SEED) ? le32(sb->s_checksum_seed)
						       : crc32c(~0u, sb->s_uuid, 16);
	fs->read_only = true;
	fs->bc = bcache_create(im->dev, fs->block_size, 1 << 20);
	fs->groups = calloc(fs->groups_count, sizeof(*fs->groups));
	if (!fs->bc || !fs->groups)
		return -ENOMEM;
	for (uint32_t g = 0; g < fs->groups_count; g++) {
		struct ext4_group_desc gd;

		err = csum_read_group_desc(fs, g, &gd);
		if (err)
			return err;
		fs->groups[g].block_bitmap = le32(gd.bg_block_bitmap_lo) |
			(fs->desc_size >= 64 ? (uint64_t)le32(gd.bg_block_bitmap_hi) << 32 : 0);
		fs->groups[g].inode_bitmap = le32(gd.bg_inode_bitmap_lo) |
			(fs->desc_size >= 64 ? (uint64_t)le32(gd.bg_inode_bitmap_hi) << 32 : 0);
		fs->groups[g].inode_table = le32(gd.bg_inode_table_lo) |
			(fs->desc_size >= 64 ? (uint64_t)le32(gd.bg_inode_table_hi) << 32 : 0);
		fs->groups[g].flags = le16(gd.bg_flags);
	}
	return 0;
}

static void close_img(struct img *im)
{
	if (im->fs.bc)
		bcache_destroy(im->fs.bc);
	free(im->fs.groups);
	if (im->dev)
		bdev_close(im->dev);
}

/* Copy inode ino (inode_size bytes) into raw. */
static int read_inode(struct uext4_fs *fs, uint32_t ino, uint8_t *raw)
{
	uint32_t g = (ino - 1) / fs->inodes_per_group, idx = (ino - 1) % fs->inodes_per_group;
	uint64_t byte = (uint64_t)idx * fs->inode_size;
	struct buf *b;
	int err = bread(fs->bc, fs->groups[g].inode_table + byte / fs->block_size,
			UEXT4_META_INODE_TABLE, &b);

	if (err)
		return err;
	memcpy(raw, b->data + byte % fs->block_size, fs->inode_size);
	brelse(fs->bc, b);
	return 0;
}

static uint32_t inode_gen(const uint8_t *raw)
{
	return le32(((const struct ext4_inode *)raw)->i_generation);
}

/* Physical block of the first extent of an inode with a depth-0 tree, or of
 * the first index (the extent block) when depth > 0. */
static uint64_t first_extent_block(const uint8_t *raw, int *depth)
{
	const struct ext4_inode *in = (const void *)raw;
	const struct ext4_extent_header *eh = (const void *)in->i_block;

	*depth = le16(eh->eh_depth);
	if (*depth == 0) {
		const struct ext4_extent *e = (const void *)(eh + 1);

		return le32(e->ee_start_lo) | (uint64_t)le16(e->ee_start_hi) << 32;
	} else {
		const struct ext4_extent_idx *ix = (const void *)(eh + 1);

		return le32(ix->ei_leaf_lo) | (uint64_t)le16(ix->ei_leaf_hi) << 32;
	}
}

/* Find name in a linear directory block; 0 if absent. */
static uint32_t dir_find(const uint8_t *blk, uint32_t bs, const char *name)
{
	size_t n = strlen(name);

	for (uint32_t off = 0; off + 8 <= bs;) {
		const struct ext4_dir_entry_2 *de = (const void *)(blk + off);
		uint16_t rl = le16(de->rec_len);

		if (rl < 8 || off + rl > bs)
			break;
		if (de->inode && de->name_len == n && !memcmp(de->name, name, n))
			return le32(de->inode);
		off += rl;
	}
	return 0;
}

/* Copy block blk into out. */
static int read_block(struct uext4_fs *fs, uint64_t blk, uint8_t *out)
{
	struct buf *b;
	int err = bread(fs->bc, blk, UEXT4_META_OTHER, &b);

	if (err)
		return err;
	memcpy(out, b->data, fs->block_size);
	brelse(fs->bc, b);
	return 0;
}

/* Verify passes on the original, fails with a message on a one-byte flip. */
#define PASS_THEN_FLIP(what, buf, flip_at, call)                                    \
	do {                                                                        \
		int e_ = (call);                                                    \
		CHECK(e_ == 0, "%s: verify failed (%d): %s", what, e_, uext4_last_error()); \
		fs_clear_err();                                                     \
		(buf)[flip_at] ^= 0x40;                                             \
		e_ = (call);                                                        \
		CHECK(e_ == -EUCLEAN && strstr(uext4_last_error(), "corrupt ") &&   \
		      strstr(uext4_last_error(), "checksum"),                       \
		      "%s: flipped byte %d not detected (%d, \"%s\")", what,       \
		      (int)(flip_at), e_, uext4_last_error());                      \
		if (e_ == -EUCLEAN)                                                 \
			printf("  %s flipped: %s\n", what, uext4_last_error());    \
		(buf)[flip_at] ^= 0x40;                                             \
	} while (0)

static void check_super_and_groups(struct uext4_fs *fs)
{
	uint8_t sbcopy[1024];

	printf("check: superblock checksum\n");
	memcpy(sbcopy, &fs->sb, sizeof(sbcopy));
	PASS_THEN_FLIP("superblock", sbcopy, 0x78,
		       csum_verify_super(fs, (const struct ext4_super_block *)sbcopy));

	printf("check: %u group descriptors and their bitmaps\n", fs->groups_count);
	for (uint32_t g = 0; g < fs->groups_count; g++) {
		struct ext4_group_desc gd;
		uint8_t *bm = malloc(fs->block_size);
		char what[64];

		CHECK(csum_read_group_desc(fs, g, &gd) == 0, "read gd %u", g);
		snprintf(what, sizeof(what), "group desc %u", g);
		PASS_THEN_FLIP(what, ((uint8_t *)&gd), 12, csum_verify_group_desc(fs, g, &gd));
		if (fs->desc_size >= 64)
			PASS_THEN_FLIP(what, ((uint8_t *)&gd), 0x2c, csum_verify_group_desc(fs, g, &gd));
		if (!(le16(gd.bg_flags) & EXT4_BG_BLOCK_UNINIT)) {
			CHECK(read_block(fs, fs->groups[g].block_bitmap, bm) == 0, "read bb");
			snprintf(what, sizeof(what), "block bitmap %u", g);
			PASS_THEN_FLIP(what, bm, 3, csum_verify_block_bitmap(fs, g, bm));
		}
		if (!(le16(gd.bg_flags) & EXT4_BG_INODE_UNINIT)) {
			CHECK(read_block(fs, fs->groups[g].inode_bitmap, bm) == 0, "read ib");
			snprintf(what, sizeof(what), "inode bitmap %u", g);
			PASS_THEN_FLIP(what, bm, 0, csum_verify_inode_bitmap(fs, g, bm));
		}
		free(bm);
	}
}

static void check_inodes(struct uext4_fs *fs)
{
	uint8_t raw[4096];
	int bad = 0;

	printf("check: every inode of group 0 (used or not) verifies\n");
	for (uint32_t ino = 1; ino <= fs->inodes_per_group; ino++) {
		CHECK(read_inode(fs, ino, raw) == 0, "read inode %u", ino);
		if (csum_verify_inode(fs, ino, raw) != 0 && bad++ < 3)
			CHECK(0, "inode %u: %s", ino, uext4_last_error());
	}
	printf("check: root inode checksum, csum_inode() matches stored value\n");
	CHECK(read_inode(fs, EXT4_ROOT_INO, raw) == 0, "read root");
	{
		const struct ext4_inode *in = (const void *)raw;
		uint32_t stored = le16(in->i_checksum_lo);

		/* A 128-byte inode has no i_checksum_hi (the bytes after it
		 * are the next inode's). */
		if (fs->inode_size > 128)
			stored |= (uint32_t)le16(in->i_checksum_hi) << 16;

		CHECK(csum_inode(fs, EXT4_ROOT_INO, raw) == stored, "csum_inode %08x stored %08x",
		      csum_inode(fs, EXT4_ROOT_INO, raw), stored);
	}
	PASS_THEN_FLIP("root inode", raw, 0x10, csum_verify_inode(fs, EXT4_ROOT_INO, raw));
	if (fs->inode_size <= 128)
		return;
	PASS_THEN_FLIP("root inode (extra part)", raw, 0x90, csum_verify_inode(fs, EXT4_ROOT_INO, raw));
	PASS_THEN_FLIP("root inode (checksum_hi)", raw, 0x83, csum_verify_inode(fs, EXT4_ROOT_INO, raw));
	PASS_THEN_FLIP("root inode (last byte)", raw, fs->inode_size - 1,
		       csum_verify_inode(fs, EXT4_ROOT_INO, raw));
}

static void check_dirs_and_files(struct uext4_fs *fs)
{
	uint32_t bs = fs->block_size;
	uint8_t root[1024], node[1024], *blk = malloc(bs);
	uint32_t ino;
	uint64_t pblk;
	int depth;

	printf("check: root directory leaf block\n");
	CHECK(read_inode(fs, EXT4_ROOT_INO, root) == 0, "read root");
	pblk = first_extent_block(root, &depth);
	CHECK(read_block(fs, pblk, blk) == 0, "read root dir block");
	PASS_THEN_FLIP("root dir leaf", blk, 20, csum_verify_dir_leaf(fs, EXT4_ROOT_INO,
								      inode_gen(root), pblk, blk));
	CHECK(csum_verify_dir_leaf(fs, EXT4_ROOT_INO, inode_gen(root) + 1, pblk, blk) == -EUCLEAN,
	      "wrong generation not detected");
	blk[bs - 5] ^= 0xff; /* det_reserved_ft != 0xDE: no tail */
	CHECK(csum_verify_dir_leaf(fs, EXT4_ROOT_INO, inode_gen(root), pblk, blk) == -EUCLEAN &&
	      strstr(uext4_last_error(), "no checksum tail"), "missing tail: %s", uext4_last_error());
	blk[bs - 5] ^= 0xff;

	printf("check: htree root of /big (dx node)\n");
	ino = dir_find(blk, bs, "big");
	CHECK(ino != 0, "no /big");
	if (ino && read_inode(fs, ino, node) == 0) {
		const struct ext4_inode *in = (const void *)node;
		uint64_t b0 = first_extent_block(node, &depth);

		CHECK(le32(in->i_flags) & EXT4_INDEX_FL, "/big is not indexed (e2fsck -D ran?)");
		CHECK(read_block(fs, b0, blk) == 0, "read /big block 0");
		{
			/* dx_root: "." (12) + ".." (12) + dx_root_info (8), then countlimit */
			unsigned off = 32;
			unsigned limit = le16(((struct dx_countlimit *)(blk + off))->limit);
			unsigned count = le16(((struct dx_countlimit *)(blk + off))->count);

			printf("  /big: inode %u, dx root block %llu, count %u limit %u\n", ino,
			       (unsigned long long)b0, count, limit);
			PASS_THEN_FLIP("dx root", blk, off + 8 + 2,
				       csum_verify_dx_node(fs, ino, inode_gen(node), b0, blk, off,
							   count, limit));
			CHECK(csum_verify_dx_node(fs, ino, inode_gen(node), b0, blk, off, count,
						  bs) == -EUCLEAN, "oversized limit accepted");
		}
	}

	printf("check: extent tree block of /sparse\n");
	ino = dir_find(blk, bs, "sparse");
	CHECK(read_block(fs, pblk, blk) == 0, "reread root dir");
	ino = dir_find(blk, bs, "sparse");
	CHECK(ino != 0, "no /sparse");
	if (ino && read_inode(fs, ino, node) == 0) {
		uint64_t eb = first_extent_block(node, &depth);

		CHECK(depth >= 1, "/sparse extent tree has depth %d, want >= 1", depth);
		if (depth >= 1) {
			CHECK(read_block(fs, eb, blk) == 0, "read extent block");
			PASS_THEN_FLIP("extent block", blk, 14,
				       csum_verify_extent_block(fs, ino, inode_gen(node), eb, blk));
		}
	}

	printf("check: xattr block of /a\n");
	CHECK(read_block(fs, pblk, blk) == 0, "reread root dir");
	ino = dir_find(blk, bs, "a");
	if (ino && read_inode(fs, ino, node) == 0) {
		const struct ext4_inode *in = (const void *)node;
		uint64_t xb = le32(in->i_file_acl_lo) | (uint64_t)le16(in->i_file_acl_high) << 32;

		CHECK(xb != 0, "/a has no xattr block");
		if (xb) {
			CHECK(read_block(fs, xb, blk) == 0, "read xattr block");
			PASS_THEN_FLIP("xattr block", blk, bs - 5, csum_verify_xattr_block(fs, xb, blk));
			CHECK(csum_verify_xattr_block(fs, xb + 1, blk) == -EUCLEAN,
			      "xattr block at wrong number accepted");
		}
	}

	printf("check: orphan file blocks\n");
	ino = le32(fs->sb.s_orphan_file_inum);
	CHECK(ino != 0, "no orphan file");
	if (ino && read_inode(fs, ino, node) == 0) {
		uint64_t ob = first_extent_block(node, &depth);

		CHECK(depth == 0, "orphan file depth %d", depth);
		CHECK(read_block(fs, ob, blk) == 0, "read orphan block");
		PASS_THEN_FLIP("orphan block", blk, 0,
			       csum_verify_orphan_block(fs, ino, inode_gen(node), ob, blk));
	}
	free(blk);
}

/* gdt_csum (no metadata_csum): group descriptors use CRC16. */
static void check_gdt_csum(const char *path)
{
	struct img im;
	int err = open_img(&im, path);

	printf("check: gdt_csum group descriptors (CRC16)\n");
	CHECK(err == 0, "open %s: %s", path, uext4_last_error());
	if (!err) {
		CHECK(im.fs.gdt_csum && !im.fs.metadata_csum, "image has wrong features");
		for (uint32_t g = 0; g < im.fs.groups_count; g++) {
			struct ext4_group_desc gd;

			CHECK(csum_read_group_desc(&im.fs, g, &gd) == 0, "read gd");
			PASS_THEN_FLIP("gdt_csum desc", ((uint8_t *)&gd), 4,
				       csum_verify_group_desc(&im.fs, g, &gd));
		}
		/* Everything else has no checksum without metadata_csum. */
		CHECK(csum_verify_super(&im.fs, &im.fs.sb) == 0, "super without metadata_csum");
	}
	close_img(&im);
}

/* Make an image with the given mke2fs size arguments and check it: all
 * of it with `files`; else superblock, groups and inodes only (the file
 * checks expect /a's big xattr in a block, which larger inodes hold). */
static void check_image(const char *tree, const char *img, const char *bsopt, const char *size,
			bool files)
{
	struct img im;
	int err;

	printf("check: image %s (metadata_csum,64bit,orphan_file, %s, %s)\n", img, bsopt, size);
	CHECK(t_sh("rm -f %s && truncate -s %s %s", img, size, img) == 0, "truncate");
	CHECK(t_sh("mke2fs -q -F -t ext4 %s -O metadata_csum,64bit,orphan_file -d %s %s",
		 bsopt, tree, img) == 0, "mke2fs");
	/* An xattr too big for the inode goes to an xattr block; -D indexes /big. */
	CHECK(t_sh("debugfs -w -R 'ea_set -f %s/val /a user.big' %s >/dev/null 2>&1",
		 tmpdir, img) == 0, "debugfs ea_set");
	t_sh("e2fsck -fyD %s >/dev/null 2>&1", img);
	CHECK(t_sh("e2fsck -fn %s >/dev/null 2>&1", img) == 0, "image not clean");

	err = open_img(&im, img);
	CHECK(err == 0, "open image: %s", uext4_last_error());
	if (!err) {
		CHECK(im.fs.metadata_csum, "no metadata_csum");
		check_super_and_groups(&im.fs);
		check_inodes(&im.fs);
		if (files)
			check_dirs_and_files(&im.fs);
		{
			struct uext4_counters c;

			bcache_counters(im.fs.bc, &c);
			printf("  cache: %llu hits %llu misses %llu gd reads\n",
			       (unsigned long long)c.cache_hits, (unsigned long long)c.cache_misses,
			       (unsigned long long)c.reads[UEXT4_META_GROUP_DESC]);
		}
	}
	close_img(&im);
}

int main(void)
{
	char img[512], tree[512];

	setvbuf(stdout, NULL, _IOLBF, 0);
	test_crc_vectors();
	test_crc_hw_vs_sw();

	if (system("command -v mke2fs >/dev/null && command -v debugfs >/dev/null "
		   "&& command -v e2fsck >/dev/null") != 0) {
		printf("skip: mke2fs/debugfs/e2fsck not installed\n");
		return t_failures ? 1 : 77;
	}
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/unit_csum.XXXXXX");
	if (!mkdtemp(tmpdir)) {
		perror("mkdtemp");
		return 1;
	}
	snprintf(tree, sizeof(tree), "%s/tree", tmpdir);
	snprintf(img, sizeof(img), "%s/csum.img", tmpdir);
	CHECK(make_tree(tree) == 0, "make tree");
	CHECK(t_sh("head -c 800 /dev/zero | tr '\\0' x > %s/val", tmpdir) == 0, "value");
	check_image(tree, img, "-b 1024", "16M", true);
	check_image(tree, img, "-b 4096", "160M", true);
	/* Inode sizes: no extra part, a large one, and one past the size
	 * that csum.c checksums over a copy (its piecewise path). */
	check_image(tree, img, "-b 4096 -I 128", "64M", false);
	check_image(tree, img, "-b 4096 -I 1024", "64M", false);
	check_image(tree, img, "-b 4096 -I 2048", "64M", false);

	CHECK(t_sh("rm -f %s && truncate -s 16M %s && "
		 "mke2fs -q -F -t ext4 -O ^metadata_csum,uninit_bg,64bit %s", img, img, img) == 0,
	      "mke2fs gdt_csum");
	check_gdt_csum(img);

	t_sh("rm -rf %s", tmpdir);
	printf(t_failures ? "unit_csum: %d FAILED\n" : "unit_csum: all passed\n", t_failures);
	return t_failures ? 1 : 0;
}
