/*
 * ialloc.c - inode allocation: which group a new inode goes to, and
 * claiming its bit in the group's inode bitmap.
 *
 * Policies (facts from the kernel's fs/ext4/ialloc.c; our own code):
 *  - directories: Orlov.  Top-level directories (parent is the root or has
 *    EXT4_TOPDIR_FL) spread over the (flex) groups with at least average
 *    free inodes and blocks and the fewest directories, from a random
 *    start; others stay near the parent unless its (flex) group has too
 *    many directories or too little room.  With flex_bg a directory goes to
 *    the first group of the chosen flex group that has a free inode.
 *  - other inodes on flex_bg: seed 002.  Inside the parent's flex group the
 *    group is picked by the parent's inode number, so the files of sibling
 *    directories do not share inode-table blocks (whose reads a new inode
 *    could otherwise not skip); when that group is full, the group last
 *    used for the directory, then a group with no inode in use, then any
 *    group with a free inode.  The same inside the flex group the
 *    directory last used, the flex group files last went to
 *    (fs->hot->last_flex), and the one Orlov picks.
 *  - other inodes without flex_bg: the parent's group if it has free inodes
 *    and blocks, else a quadratic hash from (group + parent inode number),
 *    else the first group with a free inode.
 *
 * Locking: dir->lock is held by the caller, for writing or (parallel
 * creates in one directory) for reading, so dir->last_alloc_group is read
 * and written with relaxed atomics: only a hint.  Group counters, flags and both bitmaps change only
 * under fs->groups[g].lock; the group pickers read the counters without it
 * (grp_read) and the claim re-checks under the lock.
 */
#include "alloc.h"
#include "bcache.h"
#include "csum.h"
#include "error.h"
#include "fault.h"
#include "ialloc.h"
#include "inode.h"
#include "internal.h"
#include "lock.h"
#include "ondisk.h"
#include "super.h"
#include "trans.h"

#include <stdio.h>
#include <sys/stat.h>
#include <time.h>

/* dir->last_alloc_group holds group + 1 (0: none yet), so that a zeroed
 * inode means "no group picked" whatever group 0 is. */
static uint32_t last_group_of(struct uext4_fs *fs, const struct inode *dir)
{
	uint32_t v = __atomic_load_n(&dir->last_alloc_group, __ATOMIC_RELAXED);

	return v && v - 1 < fs->groups_count ? v - 1 : UINT32_MAX;
}

static uint32_t free_inodes(struct uext4_fs *fs, uint32_t g)
{
	return grp_read(&fs->groups[g].free_inodes);
}

static uint32_t free_blocks(struct uext4_fs *fs, uint32_t g)
{
	return grp_read(&fs->groups[g].free_blocks);
}

/* ------------------------------------------------------------ Orlov */

struct orlov_stats {
	uint64_t free_inodes, free_blocks, used_dirs;
};

/* Counters of one unit: a group, or a flex group when flex > 1. */
static void orlov_stats(struct uext4_fs *fs, uint32_t unit, uint32_t flex,
			struct orlov_stats *s)
{
	uint32_t first = unit * flex, end = MIN(first + flex, fs->groups_count);

	s->free_inodes = s->free_blocks = s->used_dirs = 0;
	for (uint32_t g = first; g < end; g++) {
		s->free_inodes += free_inodes(fs, g);
		s->free_blocks += free_blocks(fs, g);
		s->used_dirs += grp_read(&fs->groups[g].used_dirs);
	}
}

static uint64_t counter_positive(struct pcounter *c)
{
	int64_t v = pcounter_sum(c);

	return v > 0 ? (uint64_t)v : 0;
}

/* Small per-thread random numbers for spreading top-level directories. */
static uint32_t ialloc_random(void)
{
	static _Thread_local uint64_t state;

	if (!state) {
		struct timespec ts;

		clock_gettime(CLOCK_MONOTONIC, &ts);
		state = (((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)(uintptr_t)&state ^
			 (uint64_t)ts.tv_sec) | 1;
	}
	state ^= state << 13;
	state ^= state >> 7;
	state ^= state << 17;
	return (uint32_t)(state >> 16);
}

/* With flex_bg, the first group of flex group `unit` with a free inode. */
static int first_group_with_inode(struct uext4_fs *fs, uint32_t unit, uint32_t flex,
				  uint32_t *group)
{
	uint32_t first = unit * flex, end = MIN(first + flex, fs->groups_count);

	for (uint32_t g = first; g < end; g++)
		if (free_inodes(fs, g)) {
			*group = g;
			return 0;
		}
	return -1;
}

/* Last resort: from the parent's group, a group with at least avefreei
 * free inodes, then any with a free inode. */
static int orlov_fallback(struct uext4_fs *fs, struct inode *parent, uint64_t freei,
			  uint32_t *group)
{
	uint32_t n = fs->groups_count, start = group_of_ino(fs, parent->ino);
	uint64_t avefreei = freei / n;

	for (;;) {
		for (uint32_t i = 0; i < n; i++) {
			uint32_t g = (start + i) % n;
			uint32_t f = free_inodes(fs, g);

			if (f && f >= avefreei) {
				*group = g;
				return 0;
			}
		}
		if (!avefreei)
			return -1;
		avefreei = 0;
	}
}

/* The most spread-out unit for a top-level directory, or -1. */
static int orlov_topdir(struct uext4_fs *fs, uint32_t nunits, uint32_t flex, uint64_t avefreei,
			uint64_t avefreeb, uint32_t *unit)
{
	/* Reproducible images (use_fixed_time): a spread that depends only
	 * on how many inodes this mount made, never on the clock. */
	uint32_t r = fs->use_fixed_time
		? (atomic_load_explicit(&fs->hot->next_generation, memory_order_relaxed) +
		   fs->hash_seed[0]) * 2654435761u
		: ialloc_random();
	uint32_t start = r % nunits;
	uint64_t best_ndir = fs->inodes_per_group;  /* per group, as the kernel */
	int ret = -1;

	for (uint32_t i = 0; i < nunits; i++) {
		uint32_t u = (start + i) % nunits;
		struct orlov_stats s;

		orlov_stats(fs, u, flex, &s);
		if (!s.free_inodes || s.used_dirs >= best_ndir || s.free_inodes < avefreei ||
		    s.free_blocks < avefreeb)
			continue;
		*unit = u;
		best_ndir = s.used_dirs;
		ret = 0;
	}
	return ret;
}

/* A unit near the parent that is not crowded with directories and has
 * room, or -1. */
static int orlov_near(struct uext4_fs *fs, struct inode *parent, uint32_t nunits, uint32_t flex,
		      uint64_t avefreei, uint64_t avefreeb, uint32_t *unit)
{
	uint64_t ndirs = counter_positive(&fs->hot->dirs);
	uint64_t ipg = (uint64_t)fs->inodes_per_group * flex;
	uint64_t max_dirs = ndirs / nunits + fs->inodes_per_group / 16;
	int64_t min_inodes = (int64_t)avefreei - (int64_t)(ipg / 4);
	int64_t min_blocks = (int64_t)avefreeb - (int64_t)((uint64_t)fs->blocks_per_group * flex / 4);
	uint32_t last = last_group_of(fs, parent);
	uint32_t start = (last != UINT32_MAX ? last : group_of_ino(fs, parent->ino)) / flex;

	if (min_inodes < 1)
		min_inodes = 1;
	for (uint32_t i = 0; i < nunits; i++) {
		uint32_t u = (start + i) % nunits;
		struct orlov_stats s;

		orlov_stats(fs, u, flex, &s);
		if (s.used_dirs >= max_dirs || (int64_t)s.free_inodes < min_inodes ||
		    (int64_t)s.free_blocks < min_blocks)
			continue;
		*unit = u;
		return 0;
	}
	return -1;
}

/* Orlov (find_group_orlov).  `mode` decides the top-level spreading. */
static int find_group_orlov(struct uext4_fs *fs, struct inode *parent, uint32_t mode,
			    uint32_t *group)
{
	uint32_t flex = fs_flex_size(fs);
	uint32_t nunits = DIV_ROUND_UP(fs->groups_count, flex);
	uint64_t freei = counter_positive(&fs->hot->free_inodes);
	uint64_t avefreei = freei / nunits;
	uint64_t avefreeb = counter_positive(&fs->hot->free_blocks) / nunits;
	bool top = S_ISDIR(mode) &&
		   (parent->ino == EXT4_ROOT_INO || (parent->flags & EXT4_TOPDIR_FL));
	uint32_t unit;
	int ret;

	if (top)
		ret = orlov_topdir(fs, nunits, flex, avefreei, avefreeb, &unit);
	else
		ret = orlov_near(fs, parent, nunits, flex, avefreei, avefreeb, &unit);
	if (ret == 0) {
		if (flex == 1) {
			*group = unit;
			return 0;
		}
		/* Pack directory inodes at the start of the flex group. */
		if (first_group_with_inode(fs, unit, flex, group) == 0)
			return 0;
	}
	return orlov_fallback(fs, parent, freei, group);
}

/* ------------------------------------------------------------ other inodes */

/*
 * Seed 002: a group with a free inode in the flex group starting at
 * `first`: the one the parent's inode number picks, then `last` (the group
 * last used for this directory) if it is in this flex group, then a group
 * with no inode in use, then any.  -1 if the flex group is full.
 */
static int find_group_in_flex(struct uext4_fs *fs, struct inode *parent, uint32_t first,
			      uint32_t last, uint32_t flex, uint32_t *group)
{
	uint32_t n = MIN(flex, fs->groups_count - first);
	uint32_t start = (uint32_t)(parent->ino % n);
	uint32_t avail = UINT32_MAX;

	if (free_inodes(fs, first + start)) {
		*group = first + start;
		return 0;
	}
	if (last >= first && last < first + n && free_inodes(fs, last)) {
		*group = last;
		return 0;
	}
	for (uint32_t i = 1; i < n; i++) {
		uint32_t g = first + (start + i) % n;
		uint32_t f = free_inodes(fs, g);

		if (f == fs->inodes_per_group) {
			*group = g;
			return 0;
		}
		if (f && avail == UINT32_MAX)
			avail = g;
	}
	if (avail == UINT32_MAX)
		return -1;
	*group = avail;
	return 0;
}

static int find_group_other_flex(struct uext4_fs *fs, struct inode *parent, uint32_t mode,
				 uint32_t *group)
{
	uint32_t flex = fs_flex_size(fs), mask = ~(flex - 1);
	uint32_t last = last_group_of(fs, parent);
	uint32_t home = group_of_ino(fs, parent->ino) & mask;
	uint32_t hot = atomic_load_explicit(&fs->hot->last_flex, memory_order_relaxed) * flex;
	uint32_t next;

	if (!find_group_in_flex(fs, parent, home, last, flex, group))
		return 0;
	if (last != UINT32_MAX && (last & mask) != home &&
	    !find_group_in_flex(fs, parent, last & mask, last, flex, group))
		return 0;
	if (hot < fs->groups_count && hot != home &&
	    !find_group_in_flex(fs, parent, hot, last, flex, group))
		return 0;
	/* Orlov picks another flex group (not the top-level spreading: mode
	 * is not a directory here); start it after the parent's. */
	next = home + flex;
	if (next >= fs->groups_count)
		next = 0;
	*group = next;
	if (find_group_orlov(fs, parent, mode, group))
		return -1;
	/* Keep Orlov's group if its flex group has no free inode now. */
	find_group_in_flex(fs, parent, *group & mask, last, flex, group);
	return 0;
}

static bool group_has_room(struct uext4_fs *fs, uint32_t g)
{
	return free_inodes(fs, g) && free_blocks(fs, g);
}

/* find_group_other without flex_bg. */
static int find_group_other_plain(struct uext4_fs *fs, struct inode *parent, uint32_t *group)
{
	uint32_t n = fs->groups_count, pg = group_of_ino(fs, parent->ino), g;

	if (group_has_room(fs, pg)) {
		*group = pg;
		return 0;
	}
	/* Files of different directories sharing the parent's group should
	 * land in different groups: hash by the directory's inode number. */
	g = (uint32_t)((pg + parent->ino) % n);
	for (uint32_t i = 1; i < n; i <<= 1) {
		g += i;
		if (g >= n)
			g -= n;
		if (group_has_room(fs, g)) {
			*group = g;
			return 0;
		}
	}
	g = pg;
	for (uint32_t i = 0; i < n; i++) {
		if (++g >= n)
			g = 0;
		if (free_inodes(fs, g)) {
			*group = g;
			return 0;
		}
	}
	return -1;
}

static int pick_group(struct uext4_fs *fs, struct inode *dir, uint32_t mode, uint32_t *group)
{
	if (S_ISDIR(mode))
		return find_group_orlov(fs, dir, mode, group);
	if (fs_flex_size(fs) > 1)
		return find_group_other_flex(fs, dir, mode, group);
	return find_group_other_plain(fs, dir, group);
}

/* ------------------------------------------------------------ bitmaps */

/*
 * A damaged image's descriptor may call inodes never used that its bitmap
 * marks in use.  The first time the group's bitmap is seen (as loaded,
 * before any claim of this mount), does it agree with bg_itable_unused?
 * Only then may inode.c skip reading inode-table blocks past
 * used_at_mount (never_used_from), as the kernel's __ext4_get_inode_loc
 * skips a read only when the bitmap shows the block's other inodes free.
 * Returns the first inode index the descriptor calls never used that
 * the bitmap marks in use, or inodes_per_group when they agree.
 * Group lock held.
 */
static uint32_t check_itable_unused_locked(struct uext4_fs *fs, uint32_t g, const uint8_t *map)
{
	struct group_info *gi = &fs->groups[g];
	uint32_t bad;

	if (gi->ibitmap_checked)
		return fs->inodes_per_group;
	gi->ibitmap_checked = true;
	bad = bit_find_set(map, gi->used_at_mount, fs->inodes_per_group);
	if (bad >= fs->inodes_per_group)
		atomic_store_explicit(&gi->never_used_from, gi->used_at_mount,
				      memory_order_release);
	return bad;
}

/* After the group lock is dropped: report what check_itable_unused_locked()
 * found.  The group keeps reading its inode-table blocks; nothing else
 * changes, so the operation goes on (the error policy decides the rest). */
static void report_itable_unused(struct uext4_fs *fs, uint32_t g, uint32_t bad)
{
	const struct group_info *gi = &fs->groups[g];

	if (bad >= fs->inodes_per_group)
		return;
	FS_ERROR(fs, EUCLEAN, (uint64_t)g * fs->inodes_per_group + bad + 1, gi->inode_bitmap,
		 "group %u: the descriptor says inodes %llu..%llu were never used "
		 "(bg_itable_unused %u), but the inode bitmap (block %llu) marks inode %llu in "
		 "use; reading this group's inode-table blocks instead of trusting it",
		 g, (unsigned long long)g * fs->inodes_per_group + gi->used_at_mount + 1,
		 (unsigned long long)(g + 1) * fs->inodes_per_group,
		 fs->inodes_per_group - gi->used_at_mount, (unsigned long long)gi->inode_bitmap,
		 (unsigned long long)g * fs->inodes_per_group + bad + 1);
}

/*
 * The inode bitmap of group g, with the group's lock held: read and
 * verified once, or for an INODE_UNINIT group an all-free bitmap (the
 * caller dirties it when it claims an inode and clears the flag).
 * *bad: see check_itable_unused_locked(); the caller reports it with
 * report_itable_unused() once it has dropped the lock.
 */
static int inode_bitmap_locked(struct uext4_fs *fs, uint32_t g, struct buf **out, uint32_t *bad)
{
	struct group_info *gi = &fs->groups[g];
	struct buf *b;
	int err;

	*bad = fs->inodes_per_group;
	if (fs_has_group_csum(fs) &&
	    (atomic_load_explicit(&gi->flags, memory_order_relaxed) & EXT4_BG_INODE_UNINIT)) {
		if ((err = bget_new(fs->bc, gi->inode_bitmap, &b)))
			return err;
		bit_mark_end(b->data, fs->inodes_per_group, fs->block_size);
		*bad = check_itable_unused_locked(fs, g, b->data);
		*out = b;
		return 0;
	}
	if ((err = bread(fs->bc, gi->inode_bitmap, UEXT4_META_BITMAP, &b)))
		return err;
	if (!buf_verified(b)) {
		if ((err = csum_verify_inode_bitmap(fs, g, b->data))) {
			brelse(fs->bc, b);
			return err;
		}
		buf_set_verified(b);
	}
	*bad = check_itable_unused_locked(fs, g, b->data);
	*out = b;
	return 0;
}

/* A free bit in the bitmap, skipping the reserved inodes of group 0. */
static uint32_t find_free_inode_bit(struct uext4_fs *fs, uint32_t g, const uint8_t *map)
{
	uint64_t group_base = (uint64_t)g * fs->inodes_per_group; /* ino - 1 of bit 0 */
	uint64_t reserved = fs->first_ino > 1 ? fs->first_ino - 1 : 0;
	uint32_t start = reserved > group_base
				 ? (uint32_t)MIN(reserved - group_base, fs->inodes_per_group)
				 : 0;

	/* Everything below the hint is known taken: don't scan it again on
	 * every create (a stream of creates fills a group from the front). */
	start = MAX(start, fs->groups[g].ifree_hint & ~63u);
	if (start >= fs->inodes_per_group)
		return fs->inodes_per_group;
	return bit_find_zero(map, start, fs->inodes_per_group);
}

/* The group's counters after taking inode index `bit` (0-based). */
static void account_inode_taken(struct uext4_fs *fs, uint32_t g, uint32_t bit, bool is_dir)
{
	struct group_info *gi = &fs->groups[g];

	grp_write(&gi->free_inodes, gi->free_inodes - 1);
	if (is_dir)
		grp_write(&gi->used_dirs, gi->used_dirs + 1);
	if (fs_has_group_csum(fs)) {
		uint32_t flags = atomic_load_explicit(&gi->flags, memory_order_relaxed);
		uint32_t used;

		/* As __ext4_new_inode: an INODE_UNINIT group had nothing in
		 * use; otherwise the used part ends where itable_unused
		 * begins.  Taking an inode past it grows the used part. */
		if (flags & EXT4_BG_INODE_UNINIT) {
			atomic_store_explicit(&gi->flags, flags & ~EXT4_BG_INODE_UNINIT,
					      memory_order_relaxed);
			used = 0;
		} else {
			used = fs->inodes_per_group - atomic_load(&gi->itable_unused);
		}
		if (bit + 1 > used)
			atomic_store(&gi->itable_unused, fs->inodes_per_group - (bit + 1));
	}
}

/* The kernel initialises a BLOCK_UNINIT group's block bitmap when it first
 * puts an inode there; so do we (group lock held).  The undo of a failed
 * create does not make the group BLOCK_UNINIT again: the built bitmap is
 * in the running transaction, where other handles may already allocate
 * from it, and a buffer cannot be taken out of a transaction; the group
 * is only initialised earlier than it would have been (as in the kernel,
 * which keeps it too). */
static int init_block_bitmap_if_needed(struct handle *h, uint32_t g)
{
	struct uext4_fs *fs = h->fs;
	struct buf *b;
	int err;

	if (!fs_has_group_csum(fs) ||
	    !(atomic_load_explicit(&fs->groups[g].flags, memory_order_relaxed) &
	      EXT4_BG_BLOCK_UNINIT))
		return 0;
	if ((err = balloc_bitmap_locked(h, g, &b)))
		return err;
	brelse(fs->bc, b);
	return 0;
}

/*
 * Claim a free inode in group g.  Returns 0 with *ino, 1 if the group has
 * no free inode, or -errno.
 */
static int claim_in_group(struct handle *h, uint32_t g, bool is_dir, uint64_t *ino,
			  struct ialloc_undo *u)
{
	struct uext4_fs *fs = h->fs;
	struct group_info *gi = &fs->groups[g];
	struct buf *b = NULL;
	uint32_t bit, bad = fs->inodes_per_group;
	int err;

	if (!free_inodes(fs, g))
		return 1;
	ulock_lock(&gi->lock);
	if (!gi->free_inodes) {
		err = 1;
		goto out;
	}
	if ((err = inode_bitmap_locked(fs, g, &b, &bad)))
		goto out;
	bit = find_free_inode_bit(fs, g, b->data);
	if (bit >= fs->inodes_per_group) {
		err = FS_ERROR(fs, EUCLEAN, 0, gi->inode_bitmap,
			       "inode bitmap of group %u (block %llu): no free inode, but the "
				 "descriptor counts %u",
				 g, (unsigned long long)gi->inode_bitmap, gi->free_inodes);
		goto out;
	}
	if ((err = handle_write_access(h, b)))
		goto out;
	bit_set(b->data, bit);
	gi->ifree_hint = bit + 1;
	handle_dirty(h, b, CSUM_INODE_BITMAP, g, 0);
	if (u)
		*u = (struct ialloc_undo){
			.group = g,
			.prev_flags = atomic_load_explicit(&gi->flags, memory_order_relaxed),
			.prev_itable_unused = atomic_load(&gi->itable_unused),
			.valid = true,
		};
	account_inode_taken(fs, g, bit, is_dir);
	err = init_block_bitmap_if_needed(h, g);
	*ino = (uint64_t)g * fs->inodes_per_group + bit + 1;
out:
	ulock_unlock(&gi->lock);
	if (b)
		brelse(fs->bc, b);
	report_itable_unused(fs, g, bad);
	if (err <= 0 && *ino) {
		/* The inode is ours even if the block bitmap could not be
		 * initialised; count it. */
		pcounter_add(&fs->hot->free_inodes, -1);
		if (is_dir)
			pcounter_add(&fs->hot->dirs, 1);
		group_set_dirty(fs, g);
		return 0;
	}
	return err;
}

/* ------------------------------------------------------------ live inodes */

/* Live inodes found under free bits before a group is given up on. */
#define LIVE_INODES_PER_CLAIM 8

/*
 * A damaged bitmap may call an inode in use free: is the inode-table copy
 * of just-claimed inode ino in use (links, no deletion time), although
 * the bitmap said free?  Looked
 * at only for inodes below used_at_mount: their block is read anyway by
 * inode_write() (the seed-002 shortcut builds only blocks at or past
 * never_used_from >= used_at_mount), and copies past it were never
 * initialised (lazy itable init) and mean nothing.  A read error is left
 * to inode_write(), which reads the same block and gives the inode back.
 */
static bool claimed_inode_is_live(struct uext4_fs *fs, uint64_t ino, uint64_t *blk,
				  uint32_t *links)
{
	uint32_t g = group_of_ino(fs, ino), idx = (uint32_t)((ino - 1) % fs->inodes_per_group);
	const struct ext4_inode *r;
	struct buf *b;
	uint32_t off;
	bool live;

	if (idx >= fs->groups[g].used_at_mount || inode_location(fs, ino, blk, &off) ||
	    bread(fs->bc, *blk, UEXT4_META_INODE_TABLE, &b))
		return false;
	/* Atomic loads: if the copy is live, a thread that loaded the inode
	 * through a directory entry may be updating it under its slot lock. */
	r = (const struct ext4_inode *)(b->data + off);
	*links = le16(__atomic_load_n(&r->i_links_count, __ATOMIC_RELAXED));
	live = *links && !__atomic_load_n(&r->i_dtime, __ATOMIC_RELAXED);
	brelse(fs->bc, b);
	return live;
}

/* The live inode keeps the bit claim_in_group() set (the bitmap now
 * agrees with the inode table), but not the counts taken for the new
 * inode: the descriptor's counts are left as they were, so that no count
 * e2fsck checks is made worse. */
static void keep_live_inode(struct uext4_fs *fs, uint32_t g, bool is_dir)
{
	struct group_info *gi = &fs->groups[g];

	ulock_lock(&gi->lock);
	grp_write(&gi->free_inodes, gi->free_inodes + 1);
	if (is_dir && gi->used_dirs)
		grp_write(&gi->used_dirs, gi->used_dirs - 1);
	ulock_unlock(&gi->lock);
	pcounter_add(&fs->hot->free_inodes, 1);
	if (is_dir)
		pcounter_add(&fs->hot->dirs, -1);
}

/* claim_in_group(), skipping (and reporting) inodes that the bitmap
 * marks free but that are live on disk.  Same returns. */
static int claim_not_live(struct handle *h, uint32_t g, bool is_dir, uint64_t *ino,
			  struct ialloc_undo *u)
{
	struct uext4_fs *fs = h->fs;

	for (int live = 0; live < LIVE_INODES_PER_CLAIM; live++) {
		uint64_t blk;
		uint32_t links;
		int err;

		*ino = 0;
		if ((err = claim_in_group(h, g, is_dir, ino, u)) ||
		    !claimed_inode_is_live(fs, *ino, &blk, &links))
			return err;
		keep_live_inode(fs, g, is_dir);
		FS_ERROR(fs, EUCLEAN, *ino, blk,
			 "inode %llu is free in the inode bitmap of group %u (block %llu), but its "
			 "inode-table copy (block %llu) is in use (%u links, no deletion time): "
			 "marking it in use and taking another inode",
			 (unsigned long long)*ino, g, (unsigned long long)fs->groups[g].inode_bitmap,
			 (unsigned long long)blk, links);
	}
	*ino = 0;
	return 1;   /* too many: try another group */
}

int ialloc_alloc(struct handle *h, struct inode *dir, uint32_t mode, uint64_t *ino)
{
	return ialloc_alloc_undo(h, dir, mode, ino, NULL);
}

int ialloc_alloc_undo(struct handle *h, struct inode *dir, uint32_t mode, uint64_t *ino,
		      struct ialloc_undo *u)
{
	struct uext4_fs *fs = h->fs;
	bool is_dir = S_ISDIR(mode);
	uint32_t g, n = fs->groups_count;
	int first_err = 0;

	*ino = 0;
	if (fs->read_only)
		return fs_err(EROFS, "allocating an inode on a read-only mount");
	int ferr = fault_point(FAULT_ALLOC_INODE, dir->ino);
	if (ferr)
		return ferr;
	if (pick_group(fs, dir, mode, &g))
		return fs_err(ENOSPC, "no free inode left (%u inodes) for a new inode in "
			      "directory %llu", fs->inodes_count, (unsigned long long)dir->ino);
	/* The counters read by pick_group() may be stale: claim under the
	 * group lock, moving on to the next group when it is full. */
	for (uint32_t i = 0; i < n; i++, g = (g + 1) % n) {
		int err = claim_not_live(h, g, is_dir, ino, u);

		if (err == 0) {
			/* Store only a change: every creator would otherwise
			 * write this shared line on every create. */
			if (!is_dir && fs_flex_size(fs) > 1 &&
			    atomic_load_explicit(&fs->hot->last_flex, memory_order_relaxed) !=
				    g / fs_flex_size(fs))
				atomic_store_explicit(&fs->hot->last_flex, g / fs_flex_size(fs),
						      memory_order_relaxed);
			/* Relaxed atomic: creates in one directory run in
			 * parallel (dir->lock shared); store only a change. */
			if (__atomic_load_n(&dir->last_alloc_group, __ATOMIC_RELAXED) != g + 1)
				__atomic_store_n(&dir->last_alloc_group, g + 1, __ATOMIC_RELAXED);
			return 0;
		}
		if (err < 0 && !first_err)
			first_err = err;    /* a damaged group: try the others */
	}
	if (first_err)
		return first_err;
	return fs_err(ENOSPC, "no free inode left (%u inodes) for a new inode in directory %llu",
		      fs->inodes_count, (unsigned long long)dir->ino);
}

int ialloc_check_allocated(struct uext4_fs *fs, uint64_t ino)
{
	struct group_info *gi;
	struct buf *b = NULL;
	uint32_t g, bit, bad = fs->inodes_per_group;
	int err;

	if (ino < fs->first_ino || ino > fs->inodes_count)
		return fs_corrupt("inode %llu: reserved or past the last inode (%u)",
				  (unsigned long long)ino, fs->inodes_count);
	g = group_of_ino(fs, ino);
	bit = (uint32_t)((ino - 1) % fs->inodes_per_group);
	gi = &fs->groups[g];
	ulock_lock(&gi->lock);
	err = inode_bitmap_locked(fs, g, &b, &bad);
	if (!err && !bit_test(b->data, bit))
		err = fs_corrupt("inode bitmap of group %u (block %llu): inode %llu is in use "
				 "but marked free", g, (unsigned long long)gi->inode_bitmap,
				 (unsigned long long)ino);
	ulock_unlock(&gi->lock);
	if (b)
		brelse(fs->bc, b);
	report_itable_unused(fs, g, bad);
	return err;
}

/* The highest inode index below end that the bitmap marks in use, or
 * UINT32_MAX (the undo path only: a backward scan, a byte at a time where
 * it can). */
static uint32_t last_inode_in_use(const uint8_t *map, uint32_t end)
{
	for (uint32_t i = end; i > 0; i--) {
		uint32_t bit = i - 1;

		if ((bit & 7) == 7 && map[bit >> 3] == 0) {
			i -= 7;
			continue;
		}
		if (bit_test(map, bit))
			return bit;
	}
	return UINT32_MAX;
}

/*
 * Undo of a claim (group lock held, its bit already cleared): the
 * descriptor's bg_itable_unused and INODE_UNINIT go back to what they were
 * before it, unless an inode claimed since needs more of the table in use:
 * then the used part ends after the last inode in use.  The counts are
 * put back by the caller as for any free; bg_flags' other bits are not
 * changed by a claim (BLOCK_UNINIT: see init_block_bitmap_if_needed()).
 * Not exact: the inode bitmap of a group made INODE_UNINIT again is in the
 * transaction (all free), so it is written out although the flag tells
 * readers to ignore it; a bitmap buffer cannot leave a running
 * transaction that other handles may share.
 */
static void restore_claim_locked(struct uext4_fs *fs, struct group_info *gi, const uint8_t *map,
				 const struct ialloc_undo *u)
{
	uint32_t ipg = fs->inodes_per_group;
	uint32_t flags = atomic_load_explicit(&gi->flags, memory_order_relaxed);
	uint32_t prev_used = (u->prev_flags & EXT4_BG_INODE_UNINIT)
				     ? 0 : ipg - MIN(u->prev_itable_unused, ipg);
	uint32_t cur_used = (flags & EXT4_BG_INODE_UNINIT)
				    ? 0 : ipg - MIN(atomic_load(&gi->itable_unused), ipg);
	uint32_t last = last_inode_in_use(map, cur_used);
	uint32_t need = last == UINT32_MAX ? 0 : last + 1;

	if (!fs_has_group_csum(fs))
		return;
	if (need <= prev_used) {
		atomic_store(&gi->itable_unused, u->prev_itable_unused);
		if ((u->prev_flags & EXT4_BG_INODE_UNINIT) && need == 0)
			atomic_store_explicit(&gi->flags, flags | EXT4_BG_INODE_UNINIT,
					      memory_order_relaxed);
	} else if (need < cur_used) {
		atomic_store(&gi->itable_unused, ipg - need);
	}
}

static int free_inode(struct handle *h, uint64_t ino, bool was_dir, const struct ialloc_undo *u);

int ialloc_free(struct handle *h, uint64_t ino, bool was_dir)
{
	return free_inode(h, ino, was_dir, NULL);
}

int ialloc_free_undo(struct handle *h, uint64_t ino, bool was_dir, const struct ialloc_undo *u)
{
	return free_inode(h, ino, was_dir, u && u->valid ? u : NULL);
}

static int free_inode(struct handle *h, uint64_t ino, bool was_dir, const struct ialloc_undo *u)
{
	struct uext4_fs *fs = h->fs;
	struct group_info *gi;
	struct buf *b = NULL;
	uint32_t g, bit, bad = fs->inodes_per_group;
	int err;

	if (ino < fs->first_ino || ino > fs->inodes_count)
		return FS_ERROR(fs, EUCLEAN, ino, 0,
				"freeing inode %llu: reserved or past the last inode (%u)",
				  (unsigned long long)ino, fs->inodes_count);
	g = group_of_ino(fs, ino);
	bit = (uint32_t)((ino - 1) % fs->inodes_per_group);
	gi = &fs->groups[g];
	ulock_lock(&gi->lock);
	if ((err = inode_bitmap_locked(fs, g, &b, &bad)))
		goto out;
	if (!bit_test(b->data, bit)) {
		err = FS_ERROR(fs, EUCLEAN, ino, gi->inode_bitmap,
			       "inode bitmap of group %u (block %llu): freeing inode %llu, "
				 "which is already free",
				 g, (unsigned long long)gi->inode_bitmap, (unsigned long long)ino);
		goto out;
	}
	if (was_dir && gi->used_dirs == 0) {
		err = FS_ERROR(fs, EUCLEAN, ino, 0, "group %u: freeing directory inode %llu, "
			       "but the group counts no directory", g, (unsigned long long)ino);
		goto out;
	}
	if ((err = handle_write_access(h, b)))
		goto out;
	bit_clear(b->data, bit);
	if (bit < fs->groups[g].ifree_hint)
		fs->groups[g].ifree_hint = bit;
	handle_dirty(h, b, CSUM_INODE_BITMAP, g, 0);
	grp_write(&gi->free_inodes, gi->free_inodes + 1);
	if (was_dir)
		grp_write(&gi->used_dirs, gi->used_dirs - 1);
	if (u && u->group == g)
		restore_claim_locked(fs, gi, b->data, u);
out:
	ulock_unlock(&gi->lock);
	if (b)
		brelse(fs->bc, b);
	report_itable_unused(fs, g, bad);
	if (err)
		return err;
	pcounter_add(&fs->hot->free_inodes, 1);
	if (was_dir)
		pcounter_add(&fs->hot->dirs, -1);
	group_set_dirty(fs, g);
	return 0;
}

/*
 * Fast-commit replay (fc_replay.c), as the kernel's ext4_mark_inode_used():
 * an inode the log brings to life gets its bit, its group's counts and
 * itable_unused, unless its bit is set already.
 */
int ialloc_replay_mark_used(struct handle *h, uint64_t ino, bool is_dir)
{
	struct uext4_fs *fs = h->fs;
	uint32_t g, bit, bad;
	struct group_info *gi;
	struct buf *b = NULL;
	bool taken = false;
	int err;

	if (ino < 1 || ino > fs->inodes_count)
		return fs_corrupt("fast commit: inode %llu out of range 1..%u",
				  (unsigned long long)ino, fs->inodes_count);
	g = (uint32_t)((ino - 1) / fs->inodes_per_group);
	bit = (uint32_t)((ino - 1) % fs->inodes_per_group);
	gi = &fs->groups[g];
	ulock_lock(&gi->lock);
	if ((err = inode_bitmap_locked(fs, g, &b, &bad)) || bit_test(b->data, bit))
		goto out;
	if ((err = handle_write_access(h, b)))
		goto out;
	bit_set(b->data, bit);
	handle_dirty(h, b, CSUM_INODE_BITMAP, g, 0);
	account_inode_taken(fs, g, bit, is_dir);
	taken = true;
	err = init_block_bitmap_if_needed(h, g);
out:
	ulock_unlock(&gi->lock);
	if (b)
		brelse(fs->bc, b);
	if (taken) {
		pcounter_add(&fs->hot->free_inodes, -1);
		if (is_dir)
			pcounter_add(&fs->hot->dirs, 1);
		group_set_dirty(fs, g);
	}
	return err;
}
