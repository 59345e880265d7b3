/*
 * groupcheck.c - before a read-write mount: do the metadata locations of
 * the group descriptors make sense together?
 *
 * The allocators trust the descriptors' block bitmap, inode bitmap and
 * inode table locations: a bitmap placed on the superblock or on another
 * group's inode table would make the next allocation write over it.  So a
 * read-write mount first checks, as the kernel's ext4_check_descriptors()
 * does (facts from fs/ext4/super.c and e2fsprogs' check_super_block();
 * our own code), that each structure
 *  - lies inside the file system and inside its own group, or with flex_bg
 *    no further than the end of its flex group: mke2fs and resize2fs place
 *    a flex group's tables inside it, or, when it is full, lower down
 *    (flexbg_offset() falls back to searching from block 0), never past it;
 *  - overlaps none of: the superblock and the group descriptor blocks
 *    (reserved GDT blocks included) of every group that has a backup, the
 *    other bitmaps and inode tables, the internal journal.
 * A failure refuses the mount with a message naming the group and the
 * structure; read-only mounts skip the check (they never use the bitmaps,
 * and inode_location() refuses inodes whose table lies outside).
 *
 * Cost: one pass over the groups, then a sort (skipped when the runs
 * come out sorted, as a mke2fs layout's do).  The structures of
 * consecutive groups that follow each other on disk (a flex group's
 * packed bitmaps and tables) are merged into one run while they are
 * collected, so the sort sees a few runs per flex group; the overlap test
 * is a single sweep over the sorted runs, the journal a binary search per
 * journal extent.  Nothing here runs after mount.
 */
#include "bcache.h"
#include "error.h"
#include "file.h"
#include "geom.h"
#include "icache.h"
#include "inode.h"
#include "internal.h"
#include "ondisk.h"
#include "super.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum meta_kind {
	META_SUPER,
	META_GDT,
	META_RESERVED_GDT,
	META_BLOCK_BITMAP,
	META_INODE_BITMAP,
	META_INODE_TABLE,
	META_KINDS
};

static const char *const meta_name[META_KINDS] = {
	[META_SUPER] = "superblock",
	[META_GDT] = "group descriptor blocks",
	[META_RESERVED_GDT] = "reserved GDT blocks",
	[META_BLOCK_BITMAP] = "block bitmap",
	[META_INODE_BITMAP] = "inode bitmap",
	[META_INODE_TABLE] = "inode table",
};

/* Blocks [start, end) holding structure `kind` of groups group,
 * group + 1, ..., each `per` blocks long (per = end - start for one). */
struct meta_run {
	uint64_t start, end;
	uint32_t group, per;
	enum meta_kind kind;
};

/* The runs collected so far (only this mount's thread uses them). */
struct meta_runs {
	struct meta_run *v;
	size_t n, cap;
	size_t open[META_KINDS];     /* last run of each kind + 1, 0: none */
};

static int runs_push(struct meta_runs *r, const struct meta_run *run)
{
	if (r->n == r->cap) {
		size_t cap = r->cap ? r->cap * 2 : 256;
		struct meta_run *v = realloc(r->v, cap * sizeof(*v));

		if (!v)
			return fs_err(ENOMEM, "out of memory checking the group descriptors");
		r->v = v;
		r->cap = cap;
	}
	r->v[r->n++] = *run;
	return 0;
}

/* Add group g's structure; extend the last run of that kind when this is
 * the next group's and starts where the run ends (packed flex groups). */
static int runs_add(struct meta_runs *r, enum meta_kind kind, uint32_t g, uint64_t start,
		    uint64_t len)
{
	struct meta_run run = {start, start + len, g, (uint32_t)len, kind};
	size_t o = r->open[kind];

	if (!len)
		return 0;
	if (o) {
		struct meta_run *last = &r->v[o - 1];

		if (last->end == start && last->per == len &&
		    last->group + (last->end - last->start) / last->per == g) {
			last->end += len;
			return 0;
		}
	}
	if (runs_push(r, &run))
		return -ENOMEM;
	r->open[kind] = r->n;
	return 0;
}

/* Which group's structure of run holds blk. */
static uint32_t run_group_at(const struct meta_run *run, uint64_t blk)
{
	return run->group + (uint32_t)((blk - run->start) / run->per);
}

/* ------------------------------------------------------------ ranges */

/* The last block + 1 that group g's tables may use. */
static uint64_t tables_limit(struct uext4_fs *fs, uint32_t g)
{
	uint32_t flex = FS_HAS_INCOMPAT(fs, FLEX_BG) && fs->log_groups_per_flex < 31
				? 1u << fs->log_groups_per_flex
				: 1u;
	uint32_t last = (g | (flex - 1)) < fs->groups_count ? (g | (flex - 1))
							     : fs->groups_count - 1;

	if (!FS_HAS_INCOMPAT(fs, FLEX_BG))
		last = g;
	return group_first_block(fs, last) + group_nblocks(fs, last);
}

static int check_one_range(struct uext4_fs *fs, uint32_t g, enum meta_kind kind, uint64_t blk,
			   uint64_t len)
{
	uint64_t lo = FS_HAS_INCOMPAT(fs, FLEX_BG) ? fs->first_data_block
						    : group_first_block(fs, g);
	uint64_t hi = tables_limit(fs, g);

	if (blk < fs->first_data_block || blk >= fs->blocks_count ||
	    len > fs->blocks_count - blk)
		return fs_corrupt("group %u: %s at block %llu (%llu block%s) lies outside the "
				  "file system (blocks %u..%llu); refusing to write (mount "
				  "read-only, or repair with e2fsck)",
				  g, meta_name[kind], (unsigned long long)blk,
				  (unsigned long long)len, len == 1 ? "" : "s", fs->first_data_block,
				  (unsigned long long)fs->blocks_count - 1);
	if (blk < lo || blk + len > hi)
		return fs_corrupt("group %u: %s at block %llu (%llu block%s) lies outside its %s "
				  "(blocks %llu..%llu); refusing to write (mount read-only, or "
				  "repair with e2fsck)",
				  g, meta_name[kind], (unsigned long long)blk,
				  (unsigned long long)len, len == 1 ? "" : "s",
				  FS_HAS_INCOMPAT(fs, FLEX_BG) ? "flex group's range" : "group",
				  (unsigned long long)lo, (unsigned long long)hi - 1);
	return 0;
}

/* Group g's bitmaps and inode table: in range, and into the runs. */
static int collect_tables(struct uext4_fs *fs, struct meta_runs *r, uint32_t g)
{
	const struct group_info *gi = &fs->groups[g];
	const struct { enum meta_kind kind; uint64_t blk, len; } t[] = {
		{META_BLOCK_BITMAP, gi->block_bitmap, 1},
		{META_INODE_BITMAP, gi->inode_bitmap, 1},
		{META_INODE_TABLE, gi->inode_table, fs->itb_per_group},
	};
	int err;

	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		if ((err = check_one_range(fs, g, t[i].kind, t[i].blk, t[i].len)) ||
		    (err = runs_add(r, t[i].kind, g, t[i].blk, t[i].len)))
			return err;
	return 0;
}

/*
 * Group g's superblock (backup) and descriptor blocks, as e2fsprogs'
 * ext2fs_super_and_bgd_loc2(): a group with a superblock holds it in its
 * first block, followed (below s_first_meta_bg, or without meta_bg) by
 * the descriptor blocks and the reserved GDT blocks; with meta_bg, the
 * first, second and last group of each meta group hold that meta group's
 * one descriptor block (after the superblock if the group has one).
 */
static int collect_super_gdt(struct uext4_fs *fs, struct meta_runs *r, uint32_t g,
			     uint64_t old_desc, uint64_t reserved)
{
	uint32_t dpb = fs->block_size / fs->desc_size;
	bool has_super = geom_group_has_super(fs, g);
	uint64_t first = group_first_block(fs, g);
	int err;

	if (g == 0) {
		/* Block 0 (boot block) up to the superblock's block. */
		uint64_t sb = EXT4_SUPERBLOCK_OFFSET / fs->block_size;

		if ((err = runs_add(r, META_SUPER, 0, 0, sb + 1)))
			return err;
		first = sb;
	} else if (has_super && (err = runs_add(r, META_SUPER, g, first, 1))) {
		return err;
	}
	if (FS_HAS_INCOMPAT(fs, META_BG) && g / dpb >= le32(fs->sb.s_first_meta_bg)) {
		uint32_t i = g % dpb;

		if (i == 0 || i == 1 || i == dpb - 1)
			return runs_add(r, META_GDT, g, first + (has_super ? 1 : 0), 1);
		return 0;
	}
	if (!has_super)
		return 0;
	if ((err = runs_add(r, META_GDT, g, first + 1, old_desc)))
		return err;
	return runs_add(r, META_RESERVED_GDT, g, first + 1 + old_desc, reserved);
}

/* Descriptor blocks before the meta groups, and reserved GDT blocks. */
static int gdt_sizes(struct uext4_fs *fs, uint64_t *old_desc, uint64_t *reserved)
{
	uint32_t dpb = fs->block_size / fs->desc_size;
	uint64_t desc_blocks = DIV_ROUND_UP(fs->groups_count, dpb);

	*old_desc = desc_blocks;
	*reserved = le16(fs->sb.s_reserved_gdt_blocks);
	if (FS_HAS_INCOMPAT(fs, META_BG)) {
		/* As e2fsprogs: with meta_bg only the first s_first_meta_bg
		 * descriptor blocks follow the superblock, nothing reserved. */
		*reserved = 0;
		*old_desc = le32(fs->sb.s_first_meta_bg);
		if (*old_desc > desc_blocks)
			return fs_corrupt("superblock: first meta block group %llu, but there are "
					  "only %llu group descriptor blocks; refusing to write",
					  (unsigned long long)*old_desc,
					  (unsigned long long)desc_blocks);
	}
	if (1 + *old_desc + *reserved > fs->blocks_per_group)
		return fs_corrupt("superblock: %llu group descriptor and %llu reserved GDT blocks "
				  "do not fit in a group of %u blocks; refusing to write",
				  (unsigned long long)*old_desc, (unsigned long long)*reserved,
				  fs->blocks_per_group);
	return 0;
}

/* ------------------------------------------------------------ overlaps */

static int cmp_run(const void *a, const void *b)
{
	const struct meta_run *x = a, *y = b;

	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return x->end < y->end ? -1 : x->end > y->end;
}

static int report_overlap(const struct meta_run *a, const struct meta_run *b, uint64_t blk)
{
	return fs_corrupt("group %u: %s overlaps the %s of group %u at block %llu; refusing "
			  "to write (mount read-only, or repair with e2fsck)",
			  run_group_at(b, blk), meta_name[b->kind], meta_name[a->kind],
			  run_group_at(a, blk), (unsigned long long)blk);
}

static bool runs_sorted(const struct meta_runs *r)
{
	for (size_t i = 1; i < r->n; i++)
		if (cmp_run(&r->v[i - 1], &r->v[i]) > 0)
			return false;
	return true;
}

/* Sorted runs: any two that share a block?  One sweep, keeping the run
 * that reaches furthest so far.  Collected in group order, the runs of
 * a mke2fs layout are usually sorted already: then the sort is skipped. */
static int check_overlaps(struct meta_runs *r)
{
	size_t far = 0;

	if (!runs_sorted(r))
		qsort(r->v, r->n, sizeof(*r->v), cmp_run);
	for (size_t i = 1; i < r->n; i++) {
		if (r->v[i].start < r->v[far].end)
			return report_overlap(&r->v[far], &r->v[i], r->v[i].start);
		if (r->v[i].end > r->v[far].end)
			far = i;
	}
	return 0;
}

/* Sorted, disjoint runs: the one overlapping [start, end), or NULL. */
static const struct meta_run *find_overlap(const struct meta_runs *r, uint64_t start, uint64_t end)
{
	size_t lo = 0, hi = r->n;

	/* The first run that ends after start (ends are sorted too). */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (r->v[mid].end <= start)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < r->n && r->v[lo].start < end ? &r->v[lo] : NULL;
}

/* The internal journal's blocks against the metadata runs.  Holes and
 * blocks outside the file system are left to journal_open(). */
static int check_journal(struct uext4_fs *fs, const struct meta_runs *r)
{
	uint32_t ino = le32(fs->sb.s_journal_inum);
	struct inode *j;
	uint64_t count, lblk = 0;
	int err;

	if (!FS_HAS_COMPAT(fs, HAS_JOURNAL) || ino == 0 || ino > fs->inodes_count)
		return 0;
	if ((err = iget(fs, ino, &j)))
		return err;
	count = j->size >> fs->log_block_size;
	while (lblk < count && !err) {
		struct block_map m;
		const struct meta_run *hit;

		if ((err = inode_map(fs, j, lblk, count - lblk, &m)) || !m.pblk || !m.len)
			break;
		hit = find_overlap(r, m.pblk, m.pblk + m.len);
		if (hit) {
			uint64_t blk = MAX(hit->start, m.pblk);

			err = fs_corrupt("group %u: %s overlaps the journal (inode %u, journal block "
					 "%llu) at block %llu; refusing to write (mount read-only, "
					 "or repair with e2fsck)",
					 run_group_at(hit, blk), meta_name[hit->kind], ino,
					 (unsigned long long)(lblk + (blk - m.pblk)),
					 (unsigned long long)blk);
		}
		lblk += m.len;
	}
	iput(fs, j);
	return err;
}

/*
 * The bad-blocks inode (inode 1): a block map (e2fsprogs' format) of
 * blocks the disk cannot hold.  The kernel never reads it and trusts the
 * bitmap; e2fsck counts every block it lists (and its indirect blocks) as
 * in use.  So that no write leaves e2fsck a block claimed twice, the
 * blocks are collected here for balloc_init(), which keeps them from every
 * allocation and every free.  A map the blocks of which cannot be trusted
 * (a pointer outside the file system or on group metadata, the kernel's
 * ext4_inode_block_valid() test of a block map; more blocks than i_blocks
 * counts; not a block map) refuses the read-write mount.
 */
struct bb_walk {
	struct uext4_fs *fs;
	const struct meta_runs *meta;
	uint64_t *v;                /* the blocks found (bb_walk only) */
	size_t n, cap, limit;       /* limit: what i_blocks counts */
};

static int bb_refuse(uint64_t blk, const char *why)
{
	return fs_corrupt("the bad-blocks inode (inode %u) lists block %llu %s; refusing to write "
			  "(mount read-only, or repair with e2fsck)",
			  EXT4_BAD_INO, (unsigned long long)blk, why);
}

static int bb_add(struct bb_walk *w, uint64_t blk)
{
	const struct meta_run *hit;

	if (blk < w->fs->first_data_block || blk >= w->fs->blocks_count)
		return bb_refuse(blk, "outside the file system");
	if ((hit = find_overlap(w->meta, blk, blk + 1))) {
		char why[96];

		snprintf(why, sizeof(why), "on the %s of group %u", meta_name[hit->kind],
			 run_group_at(hit, blk));
		return bb_refuse(blk, why);
	}
	if (w->n >= w->limit)
		return bb_refuse(blk, "beyond the blocks its i_blocks counts");
	if (w->n == w->cap) {
		size_t cap = w->cap ? w->cap * 2 : 16;
		uint64_t *v = realloc(w->v, cap * sizeof(*v));

		if (!v)
			return fs_err(ENOMEM, "out of memory for the bad-blocks list");
		w->v = v;
		w->cap = cap;
	}
	w->v[w->n++] = blk;
	return 0;
}

/* ptr and, for level > 0, the blocks of the indirect tree under it. */
static int bb_walk_ptr(struct bb_walk *w, uint64_t ptr, int level)
{
	struct buf *b;
	int err;

	if (!ptr)
		return 0;
	if ((err = bb_add(w, ptr)) || level == 0)
		return err;
	if ((err = bread(w->fs->bc, ptr, UEXT4_META_OTHER, &b)))
		return err;
	for (uint32_t i = 0; i < w->fs->block_size / 4 && !err; i++)
		err = bb_walk_ptr(w, le32(((const uint32_t *)b->data)[i]), level - 1);
	brelse(w->fs->bc, b);
	return err;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static int check_bad_blocks_inode(struct uext4_fs *fs, const struct meta_runs *r)
{
	struct bb_walk w = { .fs = fs, .meta = r };
	const struct ext4_inode *raw;
	uint32_t off, i_block[EXT4_N_BLOCKS], flags;
	uint64_t blk, blocks;
	struct buf *b;
	int err;

	if ((err = inode_location(fs, EXT4_BAD_INO, &blk, &off)) ||
	    (err = bread(fs->bc, blk, UEXT4_META_OTHER, &b)))
		return err;
	raw = (const struct ext4_inode *)(b->data + off);
	memcpy(i_block, raw->i_block, sizeof(i_block));
	flags = le32(raw->i_flags);
	blocks = le32(raw->i_blocks_lo);
	if (FS_HAS_RO_COMPAT(fs, HUGE_FILE))
		blocks |= (uint64_t)le16(raw->i_blocks_high) << 32;
	brelse(fs->bc, b);
	w.limit = (size_t)(blocks >> (fs->log_block_size - 9));
	for (int i = 0; i < EXT4_N_BLOCKS && !err; i++)
		if (i_block[i] && (flags & (EXT4_EXTENTS_FL | EXT4_INLINE_DATA_FL)))
			err = fs_corrupt("the bad-blocks inode (inode %u) is not a block map (flags "
					 "0x%x); refusing to write (mount read-only, or repair "
					 "with e2fsck)", EXT4_BAD_INO, flags);
		else
			err = bb_walk_ptr(&w, le32(i_block[i]), i < EXT4_NDIR_BLOCKS ? 0 :
					  i - EXT4_NDIR_BLOCKS + 1);
	if (err || !w.n) {
		free(w.v);
		return err;
	}
	qsort(w.v, w.n, sizeof(*w.v), cmp_u64);
	fs->bad_blocks = w.v;
	fs->nr_bad_blocks = w.n;
	return 0;
}

int super_check_groups(struct uext4_fs *fs)
{
	struct meta_runs r = {0};
	uint64_t old_desc, reserved;
	int err = gdt_sizes(fs, &old_desc, &reserved);

	for (uint32_t g = 0; g < fs->groups_count && !err; g++)
		if (!(err = collect_super_gdt(fs, &r, g, old_desc, reserved)))
			err = collect_tables(fs, &r, g);
	if (!err)
		err = check_overlaps(&r);
	if (!err)
		err = check_journal(fs, &r);
	if (!err)
		err = check_bad_blocks_inode(fs, &r);
	free(r.v);
	return err;
}
