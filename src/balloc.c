/*
 * balloc.c - block allocation: goal-directed search of the block bitmaps,
 * per-inode in-memory preallocation for streaming writers, and freeing.
 *
 * Search: from the goal in its group to the group's end, then the
 * following groups from their start (wrapping), then the goal group's
 * blocks before the goal.  The first free block found is returned with the
 * free blocks that follow it, up to `want`.
 *
 * Preallocation: when an inode allocates again at the block after its
 * previous allocation (inode->alloc_goal), the blocks after the new
 * allocation are reserved for it as a window (8 blocks, doubling each time
 * up to 2048).  Windows live only in memory, never in the on-disk bitmap,
 * so a crash or an unmount leaves nothing for e2fsck to see.  Other
 * allocators skip them while any block outside a window is free anywhere;
 * after that windows are given up like any free block (the owner then
 * finds its window taken and searches normally).
 *
 * In-memory state: a struct balloc_state per mounted file system, found
 * in fs->balloc (balloc_init() at a read-write mount, balloc_destroy()).
 *
 * Busy blocks: blocks freed by a transaction that is not committed yet are
 * free in the bitmap (the free is part of that transaction) but are not
 * handed out again until it commits: a crash before then leaves the old
 * owner pointing at them, and a new owner's file data, written straight
 * to the device, would land under it (the kernel's mballoc "busy
 * extents").  Only two transactions can hold busy blocks at a time, the
 * committing one and the running one, so each group keeps one bitmap per
 * transaction parity; the commit of transaction N drops map N % 2
 * (balloc_release_busy()): no N-2 block is left in it, as N-2 was
 * released before N-1 began.
 *
 * Locking: fs->groups[g].lock (RANK_GROUP) protects the group's bitmap,
 * free_blocks, flags, its busy list and its window list (struct balloc_group.windows and
 * the start/len/group/next fields of the windows on it).  The owner's
 * inode lock (held by every caller) protects inode->pa, inode->alloc_goal
 * and pa->size.  Only one group lock is held at a time.
 */
#include "alloc.h"
#include "caller.h"
#include "balloc.h"
#include "bcache.h"
#include "csum.h"
#include "error.h"
#include "fault.h"
#include "geom.h"
#include "internal.h"
#include "lock.h"
#include "quota.h"
#include "ondisk.h"
#include "super.h"
#include "trans.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#define PA_MIN 8u
#define PA_MAX 2048u

struct balloc_pa {
	uint64_t start;             /* next block of the window (group lock) */
	uint32_t len;               /* blocks left; 0 = not on a list (group lock) */
	uint32_t group;             /* group whose list holds it (group lock) */
	uint32_t size;              /* size of the last window (owner's inode lock) */
	uint64_t ino;               /* owner, for messages */
	struct balloc_pa *next;     /* the group's window list (group lock) */
};

struct balloc_group {
	struct balloc_pa *windows;  /* fs->groups[g].lock */
	/* Blocks freed by transactions with an even / odd number, not yet
	 * committed; made on the first such free, dropped by the commit.
	 * fs->groups[g].lock. */
	uint8_t *busy[2];
	/* The group's blocks the bad-blocks inode lists (e2fsck counts them
	 * in use), or NULL: never handed out, never freed.  Set by
	 * balloc_init(), only read after. */
	uint8_t *bad;
	_Atomic uint32_t reserved;  /* blocks in windows: written under the
				     * group lock, read without it */
} __attribute__((aligned(CACHELINE / 4)));

struct balloc_state {
	struct uext4_fs *fs;        /* immutable */
	uint32_t ngroups;           /* immutable */
	/* Bit per group with a busy map; set and cleared under that
	 * group's lock, read by the commit to find them. */
	_Atomic uint64_t *busy_groups;
	struct balloc_group g[];
};

/* ------------------------------------------------------------ state */

/* Created at a read-write mount (balloc_init()), freed at unmount. */
static struct balloc_state *state_get(struct uext4_fs *fs, bool create)
{
	(void)create;
	return fs->balloc;
}

/* The blocks super_check_groups() found in the bad-blocks inode, into
 * the groups' bad maps. */
static int keep_bad_blocks(struct uext4_fs *fs, struct balloc_state *st)
{
	for (size_t i = 0; i < fs->nr_bad_blocks; i++) {
		uint64_t blk = fs->bad_blocks[i];
		uint32_t g = group_of_block(fs, blk);

		if (!st->g[g].bad && !(st->g[g].bad = calloc(1, fs->block_size)))
			return fs_err(ENOMEM, "out of memory for the bad blocks of group %u", g);
		bit_set(st->g[g].bad, (uint32_t)(blk - group_first_block(fs, g)));
	}
	free(fs->bad_blocks);
	fs->bad_blocks = NULL;
	fs->nr_bad_blocks = 0;
	return 0;
}

int balloc_init(struct uext4_fs *fs)
{
	struct balloc_state *st = calloc(1, sizeof(*st) + (size_t)fs->groups_count *
						       sizeof(st->g[0]));

	if (!st)
		return fs_err(ENOMEM, "out of memory for the block allocator");
	st->fs = fs;
	st->ngroups = fs->groups_count;
	st->busy_groups = calloc((fs->groups_count + 63) / 64, sizeof(uint64_t));
	if (!st->busy_groups) {
		free(st);
		return fs_err(ENOMEM, "out of memory for the block allocator");
	}
	fs->balloc = st;
	return keep_bad_blocks(fs, st);
}

void balloc_destroy(struct uext4_fs *fs)
{
	struct balloc_state *st = fs->balloc;

	fs->balloc = NULL;
	if (!st)
		return;
	/* Windows still listed belong to inodes, which free them in
	 * balloc_release_prealloc(); only forget where they were. */
	for (uint32_t g = 0; g < st->ngroups; g++) {
		while (st->g[g].windows) {
			struct balloc_pa *pa = st->g[g].windows;

			st->g[g].windows = pa->next;
			pa->next = NULL;
			pa->len = 0;
		}
		free(st->g[g].busy[0]);
		free(st->g[g].busy[1]);
		free(st->g[g].bad);
	}
	free((void *)st->busy_groups);
	free(st);
}

uint64_t balloc_reserved_blocks(struct uext4_fs *fs)
{
	struct balloc_state *st = fs->balloc;
	uint64_t n = 0;

	for (uint32_t g = 0; st && g < st->ngroups; g++)
		n += atomic_load_explicit(&st->g[g].reserved, memory_order_relaxed);
	return n;
}

/* ------------------------------------------------------------ windows */

/* Take pa off its group's list (that group's lock held). */
static void window_unlink(struct balloc_state *st, struct balloc_pa *pa)
{
	struct balloc_group *bg = &st->g[pa->group];

	for (struct balloc_pa **pp = &bg->windows; *pp; pp = &(*pp)->next)
		if (*pp == pa) {
			*pp = pa->next;
			break;
		}
	atomic_store_explicit(&bg->reserved, bg->reserved - pa->len, memory_order_relaxed);
	pa->len = 0;
	pa->next = NULL;
}

/* Give up pa's window (no group lock held). */
static void window_drop(struct uext4_fs *fs, struct balloc_state *st, struct balloc_pa *pa)
{
	struct group_info *gi;

	if (!st || !pa->len)
		return;
	gi = &fs->groups[pa->group];
	ulock_lock(&gi->lock);
	if (pa->len)
		window_unlink(st, pa);
	ulock_unlock(&gi->lock);
}

/* If bit `off` of group g lies in another inode's window: the offset just
 * past that window, else `off`.  Group lock held. */
static uint32_t skip_windows(struct uext4_fs *fs, struct balloc_group *bg, uint32_t g,
			     uint32_t off)
{
	uint64_t gs = group_first_block(fs, g);
	bool moved = true;

	while (moved) {
		moved = false;
		for (struct balloc_pa *w = bg->windows; w; w = w->next) {
			uint32_t ws = (uint32_t)(w->start - gs);

			if (off >= ws && off < ws + w->len) {
				off = ws + w->len;
				moved = true;
			}
		}
	}
	return off;
}

/* The first window start in (off, end), or end. */
static uint32_t next_window(struct uext4_fs *fs, struct balloc_group *bg, uint32_t g,
			    uint32_t off, uint32_t end)
{
	uint64_t gs = group_first_block(fs, g);

	for (struct balloc_pa *w = bg->windows; w; w = w->next) {
		uint32_t ws = (uint32_t)(w->start - gs);

		if (ws > off && ws < end)
			end = ws;
	}
	return end;
}

/* The maps of blocks not to hand out although free in the bitmap: the
 * two busy maps, the bad blocks.  Group lock held. */
#define NO_ALLOC_MAPS 3
static const uint8_t *no_alloc_map(const struct balloc_group *bg, int i)
{
	return i < 2 ? bg->busy[i] : bg->bad;
}

/* If block `off` is busy or bad: the first block after it that is
 * neither, else off.  Group lock held. */
static uint32_t busy_skip(struct balloc_group *bg, uint32_t off, uint32_t end)
{
	uint32_t s = off;

	for (bool moved = true; moved && s < end;) {
		moved = false;
		for (int i = 0; i < NO_ALLOC_MAPS && s < end; i++) {
			const uint8_t *map = no_alloc_map(bg, i);

			if (map && bit_test(map, s)) {
				s = bit_find_zero(map, s, end);
				moved = true;
			}
		}
	}
	return s;
}

/* The first busy or bad block in [off, lim), or lim.  Group lock held. */
static uint32_t busy_limit(struct balloc_group *bg, uint32_t off, uint32_t lim)
{
	for (int i = 0; i < NO_ALLOC_MAPS; i++)
		if (no_alloc_map(bg, i))
			lim = bit_find_set(no_alloc_map(bg, i), off, lim);
	return lim;
}

/*
 * First free block at or after `pos` and before `end` in the bitmap, not
 * busy, and not in a window when `respect`, and the length of the free run
 * there, up to max.  Returns end if there is none.
 */
static uint32_t find_run(struct uext4_fs *fs, struct balloc_group *bg, bool respect, uint32_t g,
			 const uint8_t *map, uint32_t pos, uint32_t end, uint32_t max,
			 uint32_t *len)
{
	bool windows = bg && respect && bg->windows;
	bool busy = bg && (bg->busy[0] || bg->busy[1] || bg->bad);

	for (;;) {
		uint32_t p = bit_find_zero(map, pos, end), q, lim, s = 0;

		if (p >= end)
			return end;
		if (windows)
			s = skip_windows(fs, bg, g, p);
		if (busy && s <= p)
			s = busy_skip(bg, p, end);
		if (s > p) {
			pos = s;
			continue;
		}
		lim = (uint32_t)MIN((uint64_t)end, (uint64_t)p + max);
		if (windows)
			lim = next_window(fs, bg, g, p, lim);
		if (busy)
			lim = busy_limit(bg, p, lim);
		q = bit_find_set(map, p, lim);
		*len = q - p;
		return p;
	}
}

/*
 * Reserve for pa the free blocks from offset `off` of group g (up to
 * `size`, not past another window or the group's end).  Group lock held;
 * pa is on no list.
 */
static void window_reserve(struct uext4_fs *fs, struct balloc_state *st, struct balloc_pa *pa,
			   uint32_t g, const uint8_t *map, uint32_t off, uint32_t size)
{
	struct balloc_group *bg = &st->g[g];
	uint32_t nb = group_nblocks(fs, g), len = 0;

	if (off >= nb || find_run(fs, bg, true, g, map, off, nb, size, &len) != off || !len)
		return;
	pa->start = group_first_block(fs, g) + off;
	pa->len = len;
	pa->group = g;
	pa->size = size;
	pa->next = bg->windows;
	bg->windows = pa;
	atomic_store_explicit(&bg->reserved, bg->reserved + len, memory_order_relaxed);
}

static uint32_t next_window_size(const struct balloc_pa *pa)
{
	return pa && pa->size ? MIN(pa->size * 2, PA_MAX) : PA_MIN;
}

/* ------------------------------------------------------------ bitmaps */

uint32_t balloc_base_meta_blocks(struct uext4_fs *fs, uint32_t g)
{
	uint32_t dpb = fs->block_size / fs->desc_size;
	uint32_t has_super = geom_group_has_super(fs, g) ? 1 : 0;
	uint32_t first_meta_bg = le32(fs->sb.s_first_meta_bg);
	bool meta_bg = FS_HAS_INCOMPAT(fs, META_BG);

	if (!meta_bg || (uint64_t)g < (uint64_t)first_meta_bg * dpb) {
		uint32_t gdb = meta_bg ? first_meta_bg : DIV_ROUND_UP(fs->groups_count, dpb);

		if (!has_super)
			return 0;
		return 1 + gdb + le16(fs->sb.s_reserved_gdt_blocks);
	}
	/* meta_bg: one descriptor block in the first, second and last group
	 * of each meta group. */
	uint32_t mg_first = g / dpb * dpb;
	bool has_gdb = g == mg_first || g == mg_first + 1 || g == mg_first + dpb - 1;

	return has_super + (has_gdb ? 1 : 0);
}

/* Set the bit of blk in group g's bitmap if blk lies in that group. */
static void mark_if_in_group(struct uext4_fs *fs, uint32_t g, uint8_t *map, uint64_t blk,
			     uint64_t count)
{
	uint64_t gs = group_first_block(fs, g), ge = gs + group_nblocks(fs, g);

	for (uint64_t b = blk; b < blk + count; b++)
		if (b >= gs && b < ge)
			bit_set(map, (uint32_t)(b - gs));
}

/* The groups whose bitmaps and tables may lie in group g: its flex group. */
static void flex_range(struct uext4_fs *fs, uint32_t g, uint32_t *first, uint32_t *end)
{
	uint32_t flex = fs_flex_size(fs);

	*first = g & ~(flex - 1);
	*end = MIN(*first + flex, fs->groups_count);
}

/* Build a BLOCK_UNINIT group's bitmap (ext4_init_block_bitmap).  Returns
 * the number of blocks in use, or -errno. */
static int64_t build_block_bitmap(struct uext4_fs *fs, uint32_t g, uint8_t *map)
{
	uint32_t nb = group_nblocks(fs, g), base = balloc_base_meta_blocks(fs, g);
	uint32_t first, end, used = 0;

	if (base > nb)
		return FS_ERROR(fs, EUCLEAN, 0, group_first_block(fs, g),
				"group %u: %u blocks of superblock and descriptors, but the "
				"group has %u blocks", g, base, nb);
	for (uint32_t i = 0; i < base; i++)
		bit_set(map, i);
	flex_range(fs, g, &first, &end);
	for (uint32_t x = first; x < end; x++) {
		struct group_info *gx = &fs->groups[x];

		mark_if_in_group(fs, g, map, gx->block_bitmap, 1);
		mark_if_in_group(fs, g, map, gx->inode_bitmap, 1);
		mark_if_in_group(fs, g, map, gx->inode_table, fs->itb_per_group);
	}
	for (uint32_t i = 0; i < nb; i++)
		used += bit_test(map, i);
	bit_mark_end(map, nb, fs->block_size);
	return used;
}

static int init_uninit_bitmap(struct handle *h, uint32_t g, struct buf **out)
{
	struct uext4_fs *fs = h->fs;
	struct group_info *gi = &fs->groups[g];
	uint32_t nb = group_nblocks(fs, g);
	struct buf *b;
	int64_t used;
	int err;

	if ((err = bget_new(fs->bc, gi->block_bitmap, &b)))
		return err;
	if ((err = handle_create_access(h, b)) ||
	    (used = build_block_bitmap(fs, g, b->data)) < 0) {
		brelse(fs->bc, b);
		return err ? err : (int)used;
	}
	handle_dirty(h, b, CSUM_BLOCK_BITMAP, g, 0);
	atomic_store_explicit(&gi->flags, gi->flags & ~EXT4_BG_BLOCK_UNINIT, memory_order_relaxed);
	if (gi->free_blocks != nb - (uint32_t)used) {
		/* Keep counts and bitmap in agreement (ext4_free_clusters_after_init). */
		int64_t delta = (int64_t)(nb - (uint32_t)used) - gi->free_blocks;

		grp_write(&gi->free_blocks, nb - (uint32_t)used);
		pcounter_add(&fs->hot->free_blocks, delta);
	}
	group_set_dirty(fs, g);
	*out = b;
	return 0;
}

int balloc_bitmap_locked(struct handle *h, uint32_t g, struct buf **out)
{
	struct uext4_fs *fs = h->fs;
	struct group_info *gi = &fs->groups[g];
	struct buf *b;
	int err;

	if (fs_has_group_csum(fs) &&
	    (atomic_load_explicit(&gi->flags, memory_order_relaxed) & EXT4_BG_BLOCK_UNINIT))
		return init_uninit_bitmap(h, g, out);
	if ((err = bread(fs->bc, gi->block_bitmap, UEXT4_META_BITMAP, &b)))
		return err;
	if (!buf_verified(b)) {
		if ((err = csum_verify_block_bitmap(fs, g, b->data))) {
			brelse(fs->bc, b);
			return err;
		}
		buf_set_verified(b);
	}
	*out = b;
	return 0;
}

/* balloc_check_allocated() for one group. */
static int check_allocated_in_group(struct uext4_fs *fs, uint32_t g, uint32_t off, uint32_t n)
{
	struct group_info *gi = &fs->groups[g];
	struct buf *b;
	int err = 0;

	if (fs_has_group_csum(fs) &&
	    (atomic_load_explicit(&gi->flags, memory_order_relaxed) & EXT4_BG_BLOCK_UNINIT))
		return fs_corrupt("group %u: blocks %u-%u are in use, but the group's block "
				  "bitmap was never initialised", g, off, off + n - 1);
	if ((err = bread(fs->bc, gi->block_bitmap, UEXT4_META_BITMAP, &b)))
		return err;
	ulock_lock(&gi->lock);
	if (!buf_verified(b)) {
		if (!(err = csum_verify_block_bitmap(fs, g, b->data)))
			buf_set_verified(b);
	}
	for (uint32_t i = off; !err && i < off + n; i++)
		if (!bit_test(b->data, i))
			err = fs_corrupt("block bitmap of group %u (block %llu): block %llu is in "
					 "use but marked free", g,
					 (unsigned long long)gi->block_bitmap,
					 (unsigned long long)(group_first_block(fs, g) + i));
	ulock_unlock(&gi->lock);
	brelse(fs->bc, b);
	return err;
}

/*
 * Would balloc_free() of first..first+count-1 succeed?  Each group's bitmap
 * reads and passes its checksum, and every block is marked in use.  Reads
 * only: 0, or -EUCLEAN naming the bitmap (nothing recorded).  An unlink
 * asks before it drops a last link.
 */
int balloc_check_allocated(struct uext4_fs *fs, uint64_t first, uint64_t count)
{
	uint64_t blk = first, end = first + count;
	int err = 0;

	if (first < fs->first_data_block || first >= fs->blocks_count ||
	    count > fs->blocks_count - first)
		return fs_corrupt("blocks %llu-%llu: outside the file system (%llu blocks)",
				  (unsigned long long)first, (unsigned long long)(end - 1),
				  (unsigned long long)fs->blocks_count);
	while (blk < end && !err) {
		uint32_t g = group_of_block(fs, blk);
		uint32_t off = (uint32_t)(blk - group_first_block(fs, g));
		uint32_t n = (uint32_t)MIN(end - blk, (uint64_t)group_nblocks(fs, g) - off);

		err = check_allocated_in_group(fs, g, off, n);
		blk += n;
	}
	return err;
}

/* ------------------------------------------------------------ allocation */

struct alloc_req {
	struct handle *h;
	struct inode *inode;        /* may be NULL */
	struct balloc_state *st;    /* may be NULL: no windows */
	uint64_t goal;
	uint32_t want;
	bool streaming;             /* allocating at inode->alloc_goal */
	bool whole;                 /* only a free run of all `want` blocks */
	uint64_t first;             /* result */
	uint32_t got;
};

/* Set n bits from off in group g's bitmap b and count them (lock held). */
static int claim_locked(struct alloc_req *r, uint32_t g, struct buf *b, uint32_t off, uint32_t n)
{
	struct uext4_fs *fs = r->h->fs;
	struct group_info *gi = &fs->groups[g];
	int err;

	if (n > gi->free_blocks)
		return FS_ERROR(fs, EUCLEAN, 0, group_first_block(fs, g) + off,
				"group %u: %u free blocks in the bitmap at block %llu, but the "
				  "descriptor counts %u free",
				  g, n, (unsigned long long)(group_first_block(fs, g) + off),
				  gi->free_blocks);
	if ((err = handle_write_access(r->h, b)))
		return err;
	for (uint32_t i = off; i < off + n; i++)
		bit_set(b->data, i);
	handle_dirty(r->h, b, CSUM_BLOCK_BITMAP, g, 0);
	grp_write(&gi->free_blocks, gi->free_blocks - n);
	r->first = group_first_block(fs, g) + off;
	r->got = n;
	return 0;
}

/* After claiming: a streaming inode gets a window after its blocks. */
static void maybe_reserve(struct alloc_req *r, uint32_t g, const uint8_t *map)
{
	struct uext4_fs *fs = r->h->fs;
	struct balloc_pa *pa;
	uint32_t size;

	if (!r->streaming || !r->st || !r->inode)
		return;
	pa = r->inode->pa;
	size = next_window_size(pa);
	if (!pa) {
		pa = calloc(1, sizeof(*pa));
		if (!pa)
			return;     /* no window: only placement suffers */
		pa->ino = r->inode->ino;
		r->inode->pa = pa;
	}
	if (pa->len)
		return;
	window_reserve(fs, r->st, pa, g, map,
		       (uint32_t)(r->first + r->got - group_first_block(fs, g)), size);
}

/*
 * Try group g between offsets [start, end).  respect: skip windows.
 * Returns 0 with r->first/got, 1 if nothing there, or -errno.
 */
static int try_group(struct alloc_req *r, uint32_t g, uint32_t start, uint32_t end, bool respect)
{
	struct uext4_fs *fs = r->h->fs;
	struct group_info *gi = &fs->groups[g];
	struct balloc_group *bg = r->st ? &r->st->g[g] : NULL;
	struct buf *b = NULL;
	uint32_t off, len = 0;
	int err = 1;

	ulock_lock(&gi->lock);
	if (!gi->free_blocks)
		goto out;
	if ((err = balloc_bitmap_locked(r->h, g, &b)))
		goto out;
	off = find_run(fs, bg, respect, g, b->data, start, end, r->want, &len);
	while (r->whole && off < end && len < r->want)
		off = find_run(fs, bg, respect, g, b->data, off + len, end, r->want, &len);
	if (off >= end || !len) {
		err = 1;
		goto out;
	}
	if ((err = claim_locked(r, g, b, off, len)))
		goto out;
	maybe_reserve(r, g, b->data);
out:
	ulock_unlock(&gi->lock);
	if (b)
		brelse(fs->bc, b);
	if (err == 0) {
		pcounter_add(&fs->hot->free_blocks, -(int64_t)r->got);
		group_set_dirty(fs, g);
	}
	return err;
}

/* Take blocks from the inode's window, which starts at the goal. */
static int alloc_from_window(struct alloc_req *r, struct balloc_pa *pa)
{
	struct uext4_fs *fs = r->h->fs;
	uint32_t g = pa->group;
	struct group_info *gi = &fs->groups[g];
	struct buf *b = NULL;
	uint32_t off, n;
	int err;

	ulock_lock(&gi->lock);
	if (!pa->len) {
		err = 1;
		goto out;
	}
	if ((err = balloc_bitmap_locked(r->h, g, &b)))
		goto out;
	off = (uint32_t)(pa->start - group_first_block(fs, g));
	n = bit_find_set(b->data, off, off + MIN(r->want, pa->len)) - off;
	if (n == 0 || (err = claim_locked(r, g, b, off, n))) {
		window_unlink(r->st, pa);    /* taken by someone in need */
		err = err ? err : 1;
		goto out;
	}
	pa->start += n;
	pa->len -= n;
	atomic_store_explicit(&r->st->g[g].reserved, r->st->g[g].reserved - n,
			      memory_order_relaxed);
	if (pa->len && bit_test(b->data, off + n))
		window_unlink(r->st, pa);    /* the rest was taken */
	if (!pa->len) {
		/* Used up: the next, larger window right after it. */
		window_unlink(r->st, pa);
		window_reserve(fs, r->st, pa, g, b->data, off + n, next_window_size(pa));
	}
out:
	ulock_unlock(&gi->lock);
	if (b)
		brelse(fs->bc, b);
	if (err == 0) {
		pcounter_add(&fs->hot->free_blocks, -(int64_t)r->got);
		group_set_dirty(fs, g);
	}
	return err;
}

/* Goal group from the goal, the other groups, then the goal group's head;
 * respect: skip other inodes' windows. */
static int search(struct alloc_req *r, bool respect, int *first_err)
{
	struct uext4_fs *fs = r->h->fs;
	uint32_t n = fs->groups_count, gg = group_of_block(fs, r->goal);
	uint32_t goff = (uint32_t)(r->goal - group_first_block(fs, gg));

	for (uint32_t i = 0; i <= n; i++) {
		uint32_t g = (gg + i) % n;
		uint32_t start = i == 0 ? goff : 0;
		uint32_t end = i == n ? goff : group_nblocks(fs, g);
		uint32_t fb = grp_read(&fs->groups[g].free_blocks);
		int err;

		if (start >= end || !fb)
			continue;
		if (respect && r->st &&
		    fb <= atomic_load_explicit(&r->st->g[g].reserved, memory_order_relaxed))
			continue;
		err = try_group(r, g, start, end, respect);
		if (err == 0)
			return 0;
		if (err < 0 && !*first_err)
			*first_err = err;
	}
	return 1;
}

/*
 * Non-root callers may not take the reserved blocks: cap want, or ENOSPC.
 * Approximate without a global lock: summing the free-block counter reads
 * 16 contended cache lines, so a thread far from the limit sums it only
 * every RESV_RECHECK calls and otherwise counts down its own estimate.
 */
#define RESV_RECHECK 64
#define RESV_FAR ((int64_t)1 << 22)

static int check_reserved(struct uext4_fs *fs, uint32_t *want)
{
	static _Thread_local struct {
		const struct uext4_fs *fs;
		int64_t avail;
		unsigned calls;
	} est;
	int64_t avail;

	if (!fs->reserved_blocks || caller_uid() == 0)
		return 0;
	if (est.fs == fs && est.calls < RESV_RECHECK && est.avail - *want > RESV_FAR) {
		est.calls++;
		est.avail -= *want;
		return 0;
	}
	avail = pcounter_sum(&fs->hot->free_blocks) - (int64_t)fs->reserved_blocks;
	est.fs = fs;
	est.avail = avail;
	est.calls = 0;
	if (avail <= 0)
		return fs_err(ENOSPC, "no free block left outside the %llu reserved for root",
			      (unsigned long long)fs->reserved_blocks);
	if ((uint64_t)avail < *want)
		*want = (uint32_t)avail;
	return 0;
}

static int alloc_blocks(struct handle *h, struct inode *inode, uint64_t goal, uint32_t want,
			bool whole, uint64_t *first, uint32_t *got)
{
	struct uext4_fs *fs = h->fs;
	struct alloc_req r = { .h = h, .inode = inode, .want = want ? want : 1, .whole = whole };
	struct balloc_pa *pa = inode ? inode->pa : NULL;
	int err, first_err = 0;

	*first = 0;
	*got = 0;
	if (fs->read_only)
		return fs_err(EROFS, "allocating a block on a read-only mount");
	if ((err = fault_point(FAULT_ALLOC_BLOCK, goal)))
		return err;
	if (!h->use_reserved && (err = check_reserved(fs, &r.want)))
		return err;
	/* Quota limits before anything is taken: a refusal changes nothing.
	 * What a punch or truncate must allocate passes (the kernel's
	 * dquot_alloc_block_nofail()), as root does. */
	if (inode && (err = quota_check_space(fs, inode, fs->block_size, &r.want, whole,
					      h->use_reserved || caller_uid() == 0)))
		return err;
	r.want = MIN(r.want, fs->blocks_per_group);
	if (goal < fs->first_data_block || goal >= fs->blocks_count)
		goal = balloc_goal(fs, inode);
	r.goal = goal;
	r.streaming = inode && inode->alloc_goal && goal == inode->alloc_goal;
	r.st = state_get(fs, r.streaming);

	/* At the window: take from it.  Elsewhere (an extent block, a write
	 * behind the stream), search normally, which skips the window too,
	 * and keep both the window and the stream's goal for the next call. */
	err = 1;
	if (pa && pa->len && r.st && goal == pa->start)
		err = alloc_from_window(&r, pa);
	if (err > 0)
		err = search(&r, true, &first_err);
	if (err > 0 && r.st)
		err = search(&r, false, &first_err);   /* windows too, if that is all */
	if (err < 0)
		return err;
	if (err > 0) {
		if (first_err)
			return first_err;
		return fs_err(ENOSPC, "no free block left (%llu blocks) for inode %llu",
			      (unsigned long long)fs->blocks_count,
			      (unsigned long long)(inode ? inode->ino : 0));
	}
	*first = r.first;
	*got = r.got;
	if (inode && !(pa && pa->len && goal != pa->start))
		inode->alloc_goal = r.first + r.got;
	return 0;
}

int balloc_alloc(struct handle *h, struct inode *inode, uint64_t goal, uint32_t want,
		 uint64_t *first, uint32_t *got)
{
	return alloc_blocks(h, inode, goal, want, false, first, got);
}

int balloc_alloc_whole(struct handle *h, struct inode *inode, uint64_t goal, uint32_t want,
		       uint64_t *first, uint32_t *got)
{
	int err = alloc_blocks(h, inode, goal, want, true, first, got);

	/* No free run that long anywhere: the first-fit pieces. */
	return err == -ENOSPC ? alloc_blocks(h, inode, goal, want, false, first, got) : err;
}

/* ------------------------------------------------------------ freeing */

static bool overlaps(uint64_t a, uint64_t alen, uint64_t b, uint64_t blen)
{
	return alen && blen && a < b + blen && b < a + alen;
}

const char *balloc_metadata_in(struct uext4_fs *fs, uint64_t first, uint64_t count,
			       uint32_t *owner)
{
	uint32_t g0 = group_of_block(fs, first), g1 = group_of_block(fs, first + count - 1);

	for (uint32_t g = g0; g <= g1; g++) {
		uint32_t base = balloc_base_meta_blocks(fs, g), fx, fe;

		*owner = g;
		if (overlaps(first, count, group_first_block(fs, g), base))
			return "superblock or group descriptors";
		flex_range(fs, g, &fx, &fe);
		for (uint32_t x = fx; x < fe; x++) {
			struct group_info *gx = &fs->groups[x];

			*owner = x;
			if (overlaps(first, count, gx->block_bitmap, 1))
				return "block bitmap";
			if (overlaps(first, count, gx->inode_bitmap, 1))
				return "inode bitmap";
			if (overlaps(first, count, gx->inode_table, fs->itb_per_group))
				return "inode table";
		}
	}
	return NULL;
}

/* Does [first, first+count) touch a superblock, descriptors, bitmaps or an
 * inode table?  Names it in a corruption message if so. */
static int check_not_metadata(struct uext4_fs *fs, uint64_t first, uint64_t count)
{
	uint32_t owner;
	const char *what = balloc_metadata_in(fs, first, count, &owner);

	if (what)
		return FS_ERROR(fs, EUCLEAN, 0, first,
				"freeing blocks %llu-%llu: they hold the %s of group %u",
				(unsigned long long)first,
				(unsigned long long)(first + count - 1), what, owner);
	return 0;
}

/* Blocks [off, off + n) of group g are busy until transaction tid commits.
 * Group lock held. */
static int busy_add(struct uext4_fs *fs, uint32_t g, uint32_t off, uint32_t n, uint32_t tid)
{
	struct balloc_state *st = fs->balloc;
	uint8_t **map;

	if (!st)
		return 0;
	map = &st->g[g].busy[tid & 1];
	if (!*map) {
		if (!(*map = calloc(1, fs->block_size)))
			return fs_err(ENOMEM, "out of memory for freed blocks of group %u", g);
		atomic_fetch_or(&st->busy_groups[g / 64], 1ull << (g % 64));
	}
	for (uint32_t i = off; i < off + n; i++)
		bit_set(*map, i);
	return 0;
}

/* Mounted with discard: tell the device it may forget the blocks of map
 * (freed by a committed transaction), one request per run.  Not under the
 * group lock: the map still keeps them from being allocated, and nothing
 * adds to it (the next transaction with this parity starts after the next
 * commit). */
static void busy_discard(struct uext4_fs *fs, uint32_t g, const uint8_t *map)
{
	uint32_t nb = group_nblocks(fs, g), s = bit_find_set(map, 0, nb);

	while (s < nb) {
		uint32_t e = bit_find_zero(map, s, nb);

		bdev_discard(fs->dev, (group_first_block(fs, g) + s) * fs->block_size,
			     (uint64_t)(e - s) * fs->block_size);
		s = e < nb ? bit_find_set(map, e, nb) : nb;
	}
}

/* Transaction tid committed: group g's blocks it freed may be reused. */
static void busy_release_group(struct uext4_fs *fs, uint32_t g, uint32_t tid, int discard)
{
	struct balloc_group *bg = &fs->balloc->g[g];
	struct group_info *gi = &fs->groups[g];

	if (discard) {
		uint8_t *map;

		ulock_lock(&gi->lock);
		map = bg->busy[tid & 1];
		ulock_unlock(&gi->lock);
		if (map)
			busy_discard(fs, g, map);
	}
	ulock_lock(&gi->lock);
	free(bg->busy[tid & 1]);
	bg->busy[tid & 1] = NULL;
	if (!bg->busy[0] && !bg->busy[1])
		atomic_fetch_and(&fs->balloc->busy_groups[g / 64], ~(1ull << (g % 64)));
	ulock_unlock(&gi->lock);
}

void balloc_release_busy(struct uext4_fs *fs, uint32_t tid)
{
	struct balloc_state *st = fs->balloc;
	int discard;

	if (!st)
		return;
	discard = bdev_discards(fs->dev);
	for (uint32_t w = 0; w < (st->ngroups + 63) / 64; w++) {
		uint64_t m = atomic_load(&st->busy_groups[w]);

		while (m) {
			busy_release_group(fs, w * 64 + (uint32_t)__builtin_ctzll(m), tid, discard);
			m &= m - 1;
		}
	}
}

bool balloc_has_busy(struct uext4_fs *fs)
{
	struct balloc_state *st = fs->balloc;

	if (!st)
		return false;
	for (uint32_t w = 0; w < (st->ngroups + 63) / 64; w++)
		if (atomic_load(&st->busy_groups[w]))
			return true;
	return false;
}

/* Clear n bits from off in group g; returns blocks that were already free
 * (not counted), or -errno. */
static int64_t free_in_group(struct handle *h, uint32_t g, uint32_t off, uint32_t n)
{
	struct uext4_fs *fs = h->fs;
	struct group_info *gi = &fs->groups[g];
	/* A block the bad-blocks inode lists stays in use: it still owns it. */
	const uint8_t *bad = fs->balloc ? fs->balloc->g[g].bad : NULL;
	struct buf *b = NULL;
	uint32_t cleared = 0, already = 0;
	int err;

	ulock_lock(&gi->lock);
	if ((err = balloc_bitmap_locked(h, g, &b)) || (err = handle_write_access(h, b)))
		goto out;
	for (uint32_t i = off; i < off + n; i++) {
		if (bad && bit_test(bad, i))
			continue;
		if (bit_test(b->data, i)) {
			bit_clear(b->data, i);
			cleared++;
		} else {
			already++;
		}
	}
	if (cleared) {
		handle_dirty(h, b, CSUM_BLOCK_BITMAP, g, 0);
		grp_write(&gi->free_blocks, gi->free_blocks + cleared);
		err = busy_add(fs, g, off, n, h->tid);
	}
out:
	ulock_unlock(&gi->lock);
	if (b)
		brelse(fs->bc, b);
	if (err)
		return err;
	if (cleared) {
		pcounter_add(&fs->hot->free_blocks, cleared);
		group_set_dirty(fs, g);
	}
	return already;
}

int balloc_free(struct handle *h, struct inode *inode, uint64_t first, uint32_t count,
		unsigned flags)
{
	struct uext4_fs *fs = h->fs;
	uint64_t blk = first, end = first + count;
	int err = 0;

	/* Every freed block is forgotten by the cache.  Blocks that went through
	 * the journal (all but regular files' data) are also revoked. */
	bool journaled = (flags & BALLOC_METADATA) || !inode || !S_ISREG(inode->mode);

	if (!count)
		return 0;
	if (first < fs->first_data_block || first >= fs->blocks_count ||
	    count > fs->blocks_count - first)
		return FS_ERROR(fs, EUCLEAN, inode ? inode->ino : 0, first,
				"inode %llu: freeing blocks %llu-%llu outside the file system "
				  "(%llu blocks)",
				  (unsigned long long)(inode ? inode->ino : 0),
				  (unsigned long long)first, (unsigned long long)(end - 1),
				  (unsigned long long)fs->blocks_count);
	if ((err = check_not_metadata(fs, first, count)))
		return err;
	/* Forget cached copies BEFORE the bits clear: once free, another
	 * thread may allocate a block and dirty its new contents. */
	handle_forget(h, first, count, journaled);
	while (blk < end) {
		uint32_t g = group_of_block(fs, blk);
		uint32_t off = (uint32_t)(blk - group_first_block(fs, g));
		uint32_t n = (uint32_t)MIN(end - blk, (uint64_t)group_nblocks(fs, g) - off);
		int64_t already = free_in_group(h, g, off, n);

		if (already < 0 && !err)
			err = (int)already;
		else if (already > 0 && !err)
			err = FS_ERROR(fs, EUCLEAN, inode ? inode->ino : 0, blk,
				       "block bitmap of group %u: inode %llu frees %lld blocks "
					 "in %llu-%llu that are already free",
					 g, (unsigned long long)(inode ? inode->ino : 0),
					 (long long)already, (unsigned long long)blk,
					 (unsigned long long)(blk + n - 1));
		blk += n;
	}
	return err;
}

/* ------------------------------------------------------------ goals */

uint64_t balloc_goal(struct uext4_fs *fs, struct inode *inode)
{
	uint32_t flex = fs_flex_size(fs), g;

	if (!inode)
		return fs->first_data_block;
	g = group_of_ino(fs, inode->ino);
	if (g >= fs->groups_count)
		g = 0;
	/* ext4_inode_to_goal_block: with 4 or more groups per flex group the
	 * flex group's first group is kept for directories and other
	 * metadata; regular files start in the second (the first after the
	 * flex group's bitmaps and inode tables with mke2fs's layout), for
	 * whichever inode of the flex group (seed 002 relies on this). */
	if (flex >= 4) {
		uint32_t fg = g & ~(flex - 1);

		if (S_ISREG(inode->mode) && fg + 1 < fs->groups_count)
			fg++;
		g = fg;
	}
	return group_first_block(fs, g);
}

void balloc_release_prealloc(struct uext4_fs *fs, struct inode *inode)
{
	struct balloc_pa *pa = inode->pa;

	if (!pa)
		return;
	window_drop(fs, fs->balloc, pa);
	inode->pa = NULL;
	free(pa);
}

/*
 * Fast-commit replay (fc_replay.c), as the kernel's ext4_mb_mark_bb():
 * set (used) or clear the bits of [first, first + count), whatever they
 * were, and keep the group and global counts with them.  No busy extent,
 * no revoke: the replay's blocks are data the log already placed.
 */
static int replay_mark_in_group(struct handle *h, uint32_t g, uint32_t off, uint32_t n, bool used)
{
	struct uext4_fs *fs = h->fs;
	struct group_info *gi = &fs->groups[g];
	struct buf *b = NULL;
	int64_t delta = 0;
	int err;

	ulock_lock(&gi->lock);
	if ((err = balloc_bitmap_locked(h, g, &b)) || (err = handle_write_access(h, b)))
		goto out;
	for (uint32_t i = off; i < off + n; i++) {
		if (used && !bit_test(b->data, i)) {
			bit_set(b->data, i);
			delta--;
		} else if (!used && bit_test(b->data, i)) {
			bit_clear(b->data, i);
			delta++;
		}
	}
	if (delta) {
		handle_dirty(h, b, CSUM_BLOCK_BITMAP, g, 0);
		grp_write(&gi->free_blocks, (uint32_t)((int64_t)gi->free_blocks + delta));
	}
out:
	ulock_unlock(&gi->lock);
	if (b)
		brelse(fs->bc, b);
	if (!err && delta) {
		pcounter_add(&fs->hot->free_blocks, delta);
		group_set_dirty(fs, g);
	}
	return err;
}

int balloc_replay_mark(struct handle *h, uint64_t first, uint64_t count, bool used)
{
	struct uext4_fs *fs = h->fs;
	uint64_t blk = first, end = first + count;
	int err = 0;

	if (first < fs->first_data_block || first >= fs->blocks_count ||
	    count > fs->blocks_count - first)
		return fs_corrupt("fast commit: blocks %llu-%llu outside the file system "
				  "(%llu blocks)", (unsigned long long)first,
				  (unsigned long long)(end - 1), (unsigned long long)fs->blocks_count);
	{
		uint32_t owner;
		const char *what = balloc_metadata_in(fs, first, count, &owner);

		if (what)
			return fs_corrupt("fast commit: blocks %llu-%llu hold the %s of group %u",
					  (unsigned long long)first, (unsigned long long)(end - 1),
					  what, owner);
	}
	while (!err && blk < end) {
		uint32_t g = group_of_block(fs, blk);
		uint32_t off = (uint32_t)(blk - group_first_block(fs, g));
		uint32_t n = (uint32_t)MIN(end - blk, (uint64_t)group_nblocks(fs, g) - off);

		err = replay_mark_in_group(h, g, off, n, used);
		blk += n;
	}
	return err;
}
