/*
 * unit_alloc - the inode and block allocators (ialloc.c, balloc.c) on
 * fresh mke2fs images mounted read-write through the internal API.
 *
 * Checks, on several image variants (4 KiB flex_bg + metadata_csum, 1 KiB
 * blocks, ^flex_bg, gdt_csum without metadata_csum, meta_bg, ext3):
 *  - 4 threads allocate and free inodes and blocks at random: nothing is
 *    handed out twice, nothing below first_ino, no block of the
 *    superblock/descriptors/bitmaps/inode tables; afterwards per-group
 *    counters, pcounter sums and the bitmaps agree, and with everything
 *    freed every count is back to where it started;
 *  - BLOCK_UNINIT / INODE_UNINIT groups get initialised when used;
 *  - ENOSPC when the blocks (and inodes) run out, and the space comes back;
 *    a non-root caller stops at the reserved blocks;
 *  - corrupt requests (double free, freeing a bitmap, out of range,
 *    reserved inode) return -EUCLEAN and change no count;
 *  - preallocation: two streaming writers side by side each get few
 *    extents, and releasing their windows leaves nothing reserved;
 *  - seed 002: the files of 16 sibling directories created round-robin
 *    share no inode-table block between directories;
 *  - after unmount, e2fsck -fn is clean.
 * Prints the random seed (UNIT_ALLOC_SEED=n to repeat a run).
 */
/* run-in: release asan tsan */
#include "alloc.h"
#include "balloc.h"
#include "bcache.h"
#include "ialloc.h"
#include "internal.h"
#include "ondisk.h"
#include "mount.h"
#include "trans.h"
#include "uext4.h"
#include "t.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static uint64_t seed;

#define IMG "/tmp/unit_alloc.img"

static struct uext4_fs *mount_rw(void)
{
	struct uext4_opts o = { .read_only = 0 };
	struct uext4_fs *fs = NULL;
	int err = super_mount(IMG, &o, &fs);

	CHECK_ERR(err == 0, "mount %s: %d", IMG, err);
	return err ? NULL : fs;
}

static void umount_and_fsck(struct uext4_fs *fs, const char *what)
{
	int err;

	balloc_destroy(fs);
	err = super_umount(fs);
	CHECK_ERR(err == 0, "%s: unmount: %d", what, err);
	if (!t_fsck_clean(IMG))
		fprintf(stderr, "  (after %s)\n", what);
}

/* A stand-in directory or file inode: the allocators only use ino, mode,
 * flags and their own fields. */
static struct inode *fake_inode(uint64_t ino, uint32_t mode)
{
	struct inode *i = calloc(1, sizeof(*i));

	i->ino = ino;
	i->mode = mode;
	return i;
}

/* ------------------------------------------------------------ consistency */

struct snapshot {
	int64_t free_blocks, free_inodes, dirs;
};

static void snap(struct uext4_fs *fs, struct snapshot *s)
{
	s->free_blocks = pcounter_sum(&fs->hot->free_blocks);
	s->free_inodes = pcounter_sum(&fs->hot->free_inodes);
	s->dirs = pcounter_sum(&fs->hot->dirs);
}

static uint32_t count_zero(const uint8_t *map, uint32_t n)
{
	uint32_t z = 0;

	for (uint32_t i = 0; i < n; i++)
		z += !bit_test(map, i);
	return z;
}

/* Groups vs pcounters vs bitmaps (no allocation running). */
static void check_counts(struct uext4_fs *fs, const char *what)
{
	uint64_t fb = 0, fi = 0, dirs = 0;

	for (uint32_t g = 0; g < fs->groups_count; g++) {
		struct group_info *gi = &fs->groups[g];
		struct buf *b;

		fb += gi->free_blocks;
		fi += gi->free_inodes;
		dirs += gi->used_dirs;
		if (!(fs_has_group_csum(fs) && (gi->flags & EXT4_BG_BLOCK_UNINIT)) &&
		    bread(fs->bc, gi->block_bitmap, UEXT4_META_BITMAP, &b) == 0) {
			uint32_t z = count_zero(b->data, group_nblocks(fs, g));

			CHECK_ERR(z == gi->free_blocks, "%s: group %u: %u free in block bitmap, %u counted",
			      what, g, z, gi->free_blocks);
			brelse(fs->bc, b);
		}
		if (!(fs_has_group_csum(fs) && (gi->flags & EXT4_BG_INODE_UNINIT)) &&
		    bread(fs->bc, gi->inode_bitmap, UEXT4_META_BITMAP, &b) == 0) {
			uint32_t z = count_zero(b->data, fs->inodes_per_group);

			CHECK_ERR(z == gi->free_inodes, "%s: group %u: %u free in inode bitmap, %u counted",
			      what, g, z, gi->free_inodes);
			brelse(fs->bc, b);
		}
	}
	CHECK_ERR((int64_t)fb == pcounter_sum(&fs->hot->free_blocks), "%s: free blocks %llu vs %lld",
	      what, (unsigned long long)fb, (long long)pcounter_sum(&fs->hot->free_blocks));
	CHECK_ERR((int64_t)fi == pcounter_sum(&fs->hot->free_inodes), "%s: free inodes %llu vs %lld",
	      what, (unsigned long long)fi, (long long)pcounter_sum(&fs->hot->free_inodes));
	CHECK_ERR((int64_t)dirs == pcounter_sum(&fs->hot->dirs), "%s: dirs %llu vs %lld", what,
	      (unsigned long long)dirs, (long long)pcounter_sum(&fs->hot->dirs));
}

/* Is blk metadata of some group (superblock, descriptors, bitmaps, table)? */
static bool is_metadata(struct uext4_fs *fs, uint64_t blk)
{
	uint32_t g = group_of_block(fs, blk);

	if (blk - group_first_block(fs, g) < balloc_base_meta_blocks(fs, g))
		return true;
	for (uint32_t x = 0; x < fs->groups_count; x++) {
		struct group_info *gi = &fs->groups[x];

		if (blk == gi->block_bitmap || blk == gi->inode_bitmap ||
		    (blk >= gi->inode_table && blk < gi->inode_table + fs->itb_per_group))
			return true;
	}
	return false;
}

/* ------------------------------------------------------------ ownership maps */

static _Atomic uint8_t *blk_owned, *ino_owned;

static bool take(_Atomic uint8_t *map, uint64_t i)
{
	return !(atomic_fetch_or(&map[i / 8], (uint8_t)(1u << (i % 8))) & (1u << (i % 8)));
}

static void give(_Atomic uint8_t *map, uint64_t i)
{
	atomic_fetch_and(&map[i / 8], (uint8_t)~(1u << (i % 8)));
}

/* ------------------------------------------------------------ random stress */

struct run { uint64_t first; uint32_t n; };

struct worker {
	struct uext4_fs *fs;
	unsigned id;
	uint64_t rs;
	struct inode *dir;
	uint64_t inos[512];
	bool isdir[512];
	unsigned ninos;
	struct run runs[512];
	unsigned nruns;
	int errors;
};

static int free_one_inode(struct worker *w, unsigned k)
{
	struct handle *h;
	uint64_t ino = w->inos[k];
	bool d = w->isdir[k];
	int err;

	give(ino_owned, ino);
	handle_begin(w->fs, &h);
	err = ialloc_free(h, ino, d);
	handle_end(h);
	w->inos[k] = w->inos[--w->ninos];
	w->isdir[k] = w->isdir[w->ninos];
	return err;
}

static int free_one_run(struct worker *w, unsigned k)
{
	struct handle *h;
	struct run r = w->runs[k];
	int err;

	for (uint32_t i = 0; i < r.n; i++)
		give(blk_owned, r.first + i);
	handle_begin(w->fs, &h);
	err = balloc_free(h, NULL, r.first, r.n, 0);
	handle_end(h);
	w->runs[k] = w->runs[--w->nruns];
	return err;
}

static void alloc_inode(struct worker *w)
{
	struct uext4_fs *fs = w->fs;
	struct handle *h;
	bool d = t_rnd(&w->rs) % 4 == 0;
	uint64_t ino = 0;
	int err;

	handle_begin(fs, &h);
	err = ialloc_alloc(h, w->dir, d ? S_IFDIR | 0755 : S_IFREG | 0644, &ino);
	handle_end(h);
	if (err == -ENOSPC)
		return;
	CHECK_ERR(err == 0, "thread %u: ialloc_alloc: %d", w->id, err);
	if (err) {
		w->errors++;
		return;
	}
	CHECK_ERR(ino >= fs->first_ino && ino <= fs->inodes_count, "inode %llu out of range",
	      (unsigned long long)ino);
	CHECK_ERR(take(ino_owned, ino), "inode %llu handed out twice", (unsigned long long)ino);
	w->inos[w->ninos] = ino;
	w->isdir[w->ninos++] = d;
}

static void alloc_blocks(struct worker *w)
{
	struct uext4_fs *fs = w->fs;
	struct handle *h;
	uint64_t goal = t_rnd(&w->rs) % 2 ? t_rnd(&w->rs) % fs->blocks_count : 0, first = 0;
	uint32_t want = 1 + (uint32_t)(t_rnd(&w->rs) % 64), got = 0;
	int err;

	handle_begin(fs, &h);
	err = balloc_alloc(h, NULL, goal, want, &first, &got);
	handle_end(h);
	if (err == -ENOSPC)
		return;
	CHECK_ERR(err == 0, "thread %u: balloc_alloc: %d", w->id, err);
	if (err) {
		w->errors++;
		return;
	}
	CHECK_ERR(got >= 1 && got <= want, "got %u of %u", got, want);
	CHECK_ERR(first >= fs->first_data_block && first + got <= fs->blocks_count,
	      "blocks %llu+%u out of range", (unsigned long long)first, got);
	for (uint32_t i = 0; i < got; i++) {
		CHECK_ERR(take(blk_owned, first + i), "block %llu handed out twice",
		      (unsigned long long)(first + i));
		CHECK_ERR(!is_metadata(fs, first + i), "block %llu is metadata",
		      (unsigned long long)(first + i));
	}
	w->runs[w->nruns].first = first;
	w->runs[w->nruns++].n = got;
}

static void *stress_thread(void *arg)
{
	struct worker *w = arg;

	for (unsigned op = 0; op < 3000; op++) {
		unsigned r = (unsigned)(t_rnd(&w->rs) % 4);

		if (r == 0 && w->ninos < 512)
			alloc_inode(w);
		else if (r == 1 && w->nruns < 512)
			alloc_blocks(w);
		else if (r == 2 && w->ninos)
			CHECK_ERR(free_one_inode(w, (unsigned)(t_rnd(&w->rs) % w->ninos)) == 0,
			      "ialloc_free");
		else if (r == 3 && w->nruns)
			CHECK_ERR(free_one_run(w, (unsigned)(t_rnd(&w->rs) % w->nruns)) == 0,
			      "balloc_free");
	}
	return NULL;
}

#define NTHREADS 4

static void free_all(struct worker *ws, unsigned n)
{
	for (unsigned t = 0; t < n; t++) {
		while (ws[t].ninos)
			CHECK_ERR(free_one_inode(&ws[t], 0) == 0, "ialloc_free");
		while (ws[t].nruns)
			CHECK_ERR(free_one_run(&ws[t], 0) == 0, "balloc_free");
	}
}

static void test_stress(struct uext4_fs *fs, const char *what)
{
	struct worker *ws = calloc(NTHREADS, sizeof(*ws));
	pthread_t th[NTHREADS];
	struct snapshot before, after;
	uint32_t uninit_before = 0, uninit_after = 0;

	blk_owned = calloc(fs->blocks_count / 8 + 1, 1);
	ino_owned = calloc(fs->inodes_count / 8 + 2, 1);
	snap(fs, &before);
	for (uint32_t g = 0; g < fs->groups_count; g++)
		uninit_before += !!(fs->groups[g].flags & (EXT4_BG_BLOCK_UNINIT | EXT4_BG_INODE_UNINIT));
	for (unsigned t = 0; t < NTHREADS; t++) {
		ws[t].fs = fs;
		ws[t].id = t;
		ws[t].rs = seed * 2654435761u + t + 1;
		/* Each thread its own parent directory (the caller's lock
		 * protects last_alloc_group): the root, or a spread inode. */
		ws[t].dir = fake_inode(t == 0 ? EXT4_ROOT_INO : 1 + t * fs->inodes_per_group / 2,
				       S_IFDIR | 0755);
		if (ws[t].dir->ino > fs->inodes_count)
			ws[t].dir->ino = EXT4_ROOT_INO;
		pthread_create(&th[t], NULL, stress_thread, &ws[t]);
	}
	for (unsigned t = 0; t < NTHREADS; t++)
		pthread_join(th[t], NULL);
	check_counts(fs, what);
	free_all(ws, NTHREADS);
	check_counts(fs, what);
	snap(fs, &after);
	CHECK_ERR(after.free_blocks == before.free_blocks, "%s: free blocks %lld -> %lld", what,
	      (long long)before.free_blocks, (long long)after.free_blocks);
	CHECK_ERR(after.free_inodes == before.free_inodes, "%s: free inodes %lld -> %lld", what,
	      (long long)before.free_inodes, (long long)after.free_inodes);
	CHECK_ERR(after.dirs == before.dirs, "%s: dirs %lld -> %lld", what, (long long)before.dirs,
	      (long long)after.dirs);
	for (uint32_t g = 0; g < fs->groups_count; g++)
		uninit_after += !!(fs->groups[g].flags & (EXT4_BG_BLOCK_UNINIT | EXT4_BG_INODE_UNINIT));
	printf("  %s: stress ok (%u groups with an UNINIT flag before, %u after)\n", what,
	       uninit_before, uninit_after);
	for (unsigned t = 0; t < NTHREADS; t++)
		free(ws[t].dir);
	free(ws);
	free((void *)blk_owned);
	free((void *)ino_owned);
}

/* ------------------------------------------------------------ ENOSPC */

static void test_enospc(struct uext4_fs *fs, const char *what)
{
	struct snapshot before, after;
	struct run *runs = malloc(sizeof(*runs) * (fs->blocks_count + 1));
	uint64_t *inos = malloc(sizeof(*inos) * (fs->inodes_count + 1));
	size_t nr = 0, ni = 0;
	uint64_t total = 0, first;
	uint32_t got;
	struct inode *dir = fake_inode(EXT4_ROOT_INO, S_IFDIR | 0755);
	struct handle *h;
	int err;

	snap(fs, &before);
	/* A non-root caller stops at the reserved blocks. */
	if (fs->reserved_blocks) {
		uext4_set_caller(1000, 1000);
		for (;;) {
			handle_begin(fs, &h);
			err = balloc_alloc(h, NULL, 0, 256, &first, &got);
			handle_end(h);
			if (err)
				break;
			runs[nr].first = first;
			runs[nr++].n = got;
			total += got;
		}
		CHECK_ERR(err == -ENOSPC, "%s: non-root fill: %d", what, err);
		CHECK_ERR(pcounter_sum(&fs->hot->free_blocks) == (int64_t)fs->reserved_blocks,
		      "%s: non-root stopped with %lld free, %llu reserved", what,
		      (long long)pcounter_sum(&fs->hot->free_blocks),
		      (unsigned long long)fs->reserved_blocks);
		uext4_set_caller(0, 0);
	}
	for (;;) {
		handle_begin(fs, &h);
		err = balloc_alloc(h, NULL, 0, 256, &first, &got);
		handle_end(h);
		if (err)
			break;
		runs[nr].first = first;
		runs[nr++].n = got;
		total += got;
	}
	CHECK_ERR(err == -ENOSPC, "%s: fill: %d", what, err);
	CHECK_ERR(strstr(uext4_last_error(), "no free block") != NULL, "%s: message '%s'", what,
	      uext4_last_error());
	CHECK_ERR(total == (uint64_t)before.free_blocks, "%s: allocated %llu of %lld free blocks", what,
	      (unsigned long long)total, (long long)before.free_blocks);
	CHECK_ERR(pcounter_sum(&fs->hot->free_blocks) == 0, "%s: %lld free after fill", what,
	      (long long)pcounter_sum(&fs->hot->free_blocks));
	for (uint32_t g = 0; g < fs->groups_count; g++)
		CHECK_ERR(fs->groups[g].free_blocks == 0 &&
		      !(fs->groups[g].flags & EXT4_BG_BLOCK_UNINIT),
		      "%s: group %u: %u free, flags %#x", what, g, fs->groups[g].free_blocks,
		      fs->groups[g].flags);
	check_counts(fs, what);
	/* Space comes back. */
	if (nr) {
		handle_begin(fs, &h);
		err = balloc_free(h, NULL, runs[nr - 1].first, runs[nr - 1].n, 0);
		CHECK_ERR(err == 0, "%s: free %d", what, err);
		handle_end(h);
		/* Allocatable again once the free is committed. */
		CHECK_ERR(trans_commit(fs) == 0, "%s: commit", what);
		handle_begin(fs, &h);
		err = balloc_alloc(h, NULL, 0, runs[nr - 1].n, &first, &got);
		handle_end(h);
		CHECK_ERR(err == 0 && first == runs[nr - 1].first && got == runs[nr - 1].n,
		      "%s: realloc %d %llu+%u", what, err, (unsigned long long)first, got);
	}
	/* Inodes too. */
	for (;;) {
		uint64_t ino;

		handle_begin(fs, &h);
		err = ialloc_alloc(h, dir, S_IFREG | 0644, &ino);
		handle_end(h);
		if (err)
			break;
		inos[ni++] = ino;
	}
	CHECK_ERR(err == -ENOSPC, "%s: inode fill: %d", what, err);
	CHECK_ERR(ni == (size_t)before.free_inodes, "%s: %zu of %lld inodes", what, ni,
	      (long long)before.free_inodes);
	check_counts(fs, what);
	for (size_t i = 0; i < ni; i++) {
		handle_begin(fs, &h);
		err = ialloc_free(h, inos[i], false);
		handle_end(h);
		CHECK_ERR(err == 0, "%s: ialloc_free %d", what, err);
	}
	for (size_t i = 0; i < nr; i++) {
		handle_begin(fs, &h);
		err = balloc_free(h, NULL, runs[i].first, runs[i].n, 0);
		handle_end(h);
		CHECK_ERR(err == 0, "%s: balloc_free %d", what, err);
	}
	/* Freed blocks are busy until the freeing transaction commits. */
	handle_begin(fs, &h);
	{
		uint64_t b1;
		uint32_t n1;

		err = balloc_alloc(h, NULL, 0, 1, &b1, &n1);
		CHECK_ERR(err == -ENOSPC, "%s: a freed block was reused before the commit: %d", what, err);
	}
	handle_end(h);
	CHECK_ERR(balloc_has_busy(fs), "%s: no busy blocks after the frees", what);
	CHECK_ERR(trans_commit(fs) == 0, "%s: commit", what);
	CHECK_ERR(!balloc_has_busy(fs), "%s: busy blocks left after the commit", what);
	snap(fs, &after);
	CHECK_ERR(after.free_blocks == before.free_blocks && after.free_inodes == before.free_inodes,
	      "%s: counts after refill %lld/%lld vs %lld/%lld", what, (long long)after.free_blocks,
	      (long long)after.free_inodes, (long long)before.free_blocks,
	      (long long)before.free_inodes);
	check_counts(fs, what);
	printf("  %s: ENOSPC ok (%llu blocks, %zu inodes)\n", what, (unsigned long long)total, ni);
	free(runs);
	free(inos);
	free(dir);
}

/* ------------------------------------------------------------ corruption */

static void test_corrupt(struct uext4_fs *fs, const char *what)
{
	struct snapshot before, after;
	struct handle *h;
	uint64_t first, ino;
	uint32_t got;
	struct inode *dir = fake_inode(EXT4_ROOT_INO, S_IFDIR | 0755);
	int err;

	handle_begin(fs, &h);
	CHECK_ERR(balloc_alloc(h, NULL, 0, 4, &first, &got) == 0, "alloc");
	CHECK_ERR(ialloc_alloc(h, dir, S_IFREG, &ino) == 0, "ialloc");
	CHECK_ERR(balloc_free(h, NULL, first, got, 0) == 0, "free");
	CHECK_ERR(ialloc_free(h, ino, false) == 0, "ifree");
	snap(fs, &before);
	err = balloc_free(h, NULL, first, got, 0);
	CHECK_ERR(err == -EUCLEAN, "%s: double free: %d", what, err);
	err = balloc_free(h, NULL, fs->groups[0].block_bitmap, 1, 0);
	CHECK_ERR(err == -EUCLEAN && strstr(uext4_last_error(), "block bitmap"),
	      "%s: freeing the block bitmap: %d", what, err);
	err = balloc_free(h, NULL, fs->groups[0].inode_table + 1, 2, 0);
	CHECK_ERR(err == -EUCLEAN, "%s: freeing the inode table: %d", what, err);
	err = balloc_free(h, NULL, fs->blocks_count - 1, 2, 0);
	CHECK_ERR(err == -EUCLEAN, "%s: freeing past the end: %d", what, err);
	err = balloc_free(h, NULL, fs->first_data_block, 1, 0);
	CHECK_ERR(err == -EUCLEAN, "%s: freeing the superblock: %d", what, err);
	err = ialloc_free(h, ino, false);
	CHECK_ERR(err == -EUCLEAN, "%s: inode double free: %d", what, err);
	err = ialloc_free(h, EXT4_ROOT_INO, true);
	CHECK_ERR(err == -EUCLEAN, "%s: freeing the root inode: %d", what, err);
	err = ialloc_free(h, (uint64_t)fs->inodes_count + 1, false);
	CHECK_ERR(err == -EUCLEAN, "%s: freeing past the last inode: %d", what, err);
	handle_end(h);
	snap(fs, &after);
	CHECK_ERR(memcmp(&before, &after, sizeof(before)) == 0, "%s: counts changed", what);
	check_counts(fs, what);
	free(dir);
	printf("  %s: corrupt requests refused\n", what);
}

/* ------------------------------------------------------------ preallocation */

struct streamer {
	struct uext4_fs *fs;
	struct inode *inode;
	uint64_t blocks[4096];
	unsigned n;
};

static void *stream_thread(void *arg)
{
	struct streamer *s = arg;

	while (s->n < 4096) {
		struct handle *h;
		uint64_t first;
		uint32_t got;
		/* As extents.c: the block after the last one, else 0. */
		uint64_t goal = s->n ? s->blocks[s->n - 1] + 1 : 0;
		int err;

		handle_begin(s->fs, &h);
		err = balloc_alloc(h, s->inode, goal, 1, &first, &got);
		handle_end(h);
		CHECK_ERR(err == 0, "stream alloc: %d", err);
		if (err)
			break;
		s->blocks[s->n++] = first;
	}
	return NULL;
}

static unsigned count_runs(const uint64_t *b, unsigned n)
{
	unsigned runs = n ? 1 : 0;

	for (unsigned i = 1; i < n; i++)
		runs += b[i] != b[i - 1] + 1;
	return runs;
}

/* Two streams interleaved block by block (as two writers taking turns):
 * without windows each would get a run of one block per turn. */
static void test_prealloc_interleaved(struct uext4_fs *fs, const char *what)
{
	struct streamer *s = calloc(2, sizeof(*s));
	struct handle *h;
	int64_t before = pcounter_sum(&fs->hot->free_blocks);

	for (int i = 0; i < 2; i++)
		s[i].inode = fake_inode(fs->first_ino + 1 + i, S_IFREG | 0644);
	for (unsigned k = 0; k < 4096; k++) {
		for (int i = 0; i < 2; i++) {
			uint64_t goal = k ? s[i].blocks[k - 1] + 1 : 0, first = 0;
			uint32_t got = 0;
			int err;

			handle_begin(fs, &h);
			err = balloc_alloc(h, s[i].inode, goal, 1, &first, &got);
			handle_end(h);
			CHECK_ERR(err == 0 && got == 1, "%s: interleaved alloc %d", what, err);
			s[i].blocks[s[i].n++] = first;
		}
	}
	for (int i = 0; i < 2; i++) {
		unsigned runs = count_runs(s[i].blocks, s[i].n);

		printf("  %s: interleaved writer %d: %u blocks in %u runs\n", what, i, s[i].n,
		       runs);
		CHECK_ERR(runs <= 40, "%s: writer %d: %u runs for %u blocks", what, i, runs, s[i].n);
		balloc_release_prealloc(fs, s[i].inode);
	}
	CHECK_ERR(balloc_reserved_blocks(fs) == 0, "%s: blocks still reserved", what);
	for (int i = 0; i < 2; i++) {
		for (unsigned k = 0; k < s[i].n; k++) {
			handle_begin(fs, &h);
			CHECK_ERR(balloc_free(h, s[i].inode, s[i].blocks[k], 1, 0) == 0, "free");
			handle_end(h);
		}
		free(s[i].inode);
	}
	CHECK_ERR(pcounter_sum(&fs->hot->free_blocks) == before, "%s: leaked blocks", what);
	free(s);
}

static void test_prealloc(struct uext4_fs *fs, const char *what)
{
	struct streamer *s = calloc(2, sizeof(*s));
	pthread_t th[2];
	struct snapshot before, after;
	struct handle *h;

	snap(fs, &before);
	for (int i = 0; i < 2; i++) {
		s[i].fs = fs;
		/* Two regular files of one directory: the same goal. */
		s[i].inode = fake_inode(fs->first_ino + 1 + i, S_IFREG | 0644);
		pthread_create(&th[i], NULL, stream_thread, &s[i]);
	}
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	for (int i = 0; i < 2; i++) {
		unsigned runs = count_runs(s[i].blocks, s[i].n);

		printf("  %s: streaming writer %d: %u blocks in %u runs\n", what, i, s[i].n, runs);
		CHECK_ERR(runs <= 40, "%s: writer %d: %u runs for %u blocks", what, i, runs, s[i].n);
	}
	CHECK_ERR(balloc_reserved_blocks(fs) > 0, "%s: no window reserved", what);
	for (int i = 0; i < 2; i++)
		balloc_release_prealloc(fs, s[i].inode);
	CHECK_ERR(balloc_reserved_blocks(fs) == 0, "%s: %llu blocks still reserved", what,
	      (unsigned long long)balloc_reserved_blocks(fs));
	for (int i = 0; i < 2; i++) {
		for (unsigned k = 0; k < s[i].n; k++) {
			handle_begin(fs, &h);
			CHECK_ERR(balloc_free(h, s[i].inode, s[i].blocks[k], 1, 0) == 0, "free");
			handle_end(h);
		}
		free(s[i].inode);
	}
	snap(fs, &after);
	CHECK_ERR(after.free_blocks == before.free_blocks, "%s: prealloc leaked blocks", what);
	free(s);
}

/* ------------------------------------------------------------ seed 002 */

static void test_seed002(struct uext4_fs *fs, const char *what)
{
	enum { NDIRS = 16, NFILES = 64 };
	struct inode *root = fake_inode(EXT4_ROOT_INO, S_IFDIR | 0755), *parent, *dirs[NDIRS];
	static uint64_t files[NDIRS][NFILES];
	uint64_t pino;
	struct handle *h;
	unsigned shared = 0;

	handle_begin(fs, &h);
	CHECK_ERR(ialloc_alloc(h, root, S_IFDIR | 0755, &pino) == 0, "parent");
	parent = fake_inode(pino, S_IFDIR | 0755);
	for (int d = 0; d < NDIRS; d++) {
		uint64_t ino;

		CHECK_ERR(ialloc_alloc(h, parent, S_IFDIR | 0755, &ino) == 0, "dir %d", d);
		dirs[d] = fake_inode(ino, S_IFDIR | 0755);
	}
	/* Round-robin, as 16 creators working at once. */
	for (int f = 0; f < NFILES; f++)
		for (int d = 0; d < NDIRS; d++)
			CHECK_ERR(ialloc_alloc(h, dirs[d], S_IFREG | 0644, &files[d][f]) == 0, "file");
	handle_end(h);
	for (int d = 0; d < NDIRS; d++)
		for (int e = d + 1; e < NDIRS; e++)
			for (int f = 0; f < NFILES; f++)
				for (int k = 0; k < NFILES; k++)
					if ((files[d][f] - 1) / fs->inodes_per_block ==
					    (files[e][k] - 1) / fs->inodes_per_block)
						shared++;
	printf("  %s: seed 002: dirs %llu..%llu, first files %llu %llu %llu; %u shared "
	       "inode-table blocks\n", what, (unsigned long long)dirs[0]->ino,
	       (unsigned long long)dirs[NDIRS - 1]->ino, (unsigned long long)files[0][0],
	       (unsigned long long)files[1][0], (unsigned long long)files[2][0], shared);
	CHECK_ERR(shared == 0, "%s: %u inode-table blocks shared between directories", what, shared);
	/* The groups the files went to were INODE_UNINIT and BLOCK_UNINIT:
	 * both initialised, and bg_itable_unused ends after the last inode
	 * taken (as __ext4_new_inode). */
	for (int d = 0; d < NDIRS; d++) {
		uint32_t g = group_of_ino(fs, files[d][0]), maxbit = 0;
		struct group_info *gi = &fs->groups[g];

		for (int f = 0; f < NFILES; f++)
			if (group_of_ino(fs, files[d][f]) == g)
				maxbit = MAX(maxbit, (uint32_t)((files[d][f] - 1) % fs->inodes_per_group));
		CHECK_ERR(!(gi->flags & (EXT4_BG_INODE_UNINIT | EXT4_BG_BLOCK_UNINIT)),
		      "%s: group %u flags %#x", what, g, gi->flags);
		CHECK_ERR(gi->itable_unused <= fs->inodes_per_group - (maxbit + 1),
		      "%s: group %u: itable_unused %u, inode index %u in use", what, g,
		      gi->itable_unused, maxbit);
	}
	check_counts(fs, what);
	handle_begin(fs, &h);
	for (int d = 0; d < NDIRS; d++) {
		for (int f = 0; f < NFILES; f++)
			CHECK_ERR(ialloc_free(h, files[d][f], false) == 0, "free");
		CHECK_ERR(ialloc_free(h, dirs[d]->ino, true) == 0, "free dir");
		free(dirs[d]);
	}
	CHECK_ERR(ialloc_free(h, pino, true) == 0, "free parent");
	handle_end(h);
	free(parent);
	free(root);
}

struct creator {
	struct uext4_fs *fs;
	struct inode *dir;
	uint64_t files[64];
};

static void *creator_thread(void *arg)
{
	struct creator *c = arg;

	for (int f = 0; f < 64; f++) {
		struct handle *h;

		handle_begin(c->fs, &h);
		CHECK_ERR(ialloc_alloc(h, c->dir, S_IFREG | 0644, &c->files[f]) == 0, "create");
		handle_end(h);
	}
	return NULL;
}

/* Seed 002 with 16 creators at once, one directory each. */
static void test_seed002_threads(struct uext4_fs *fs, const char *what)
{
	enum { N = 16 };
	struct creator *c = calloc(N, sizeof(*c));
	pthread_t th[N];
	struct inode *root = fake_inode(EXT4_ROOT_INO, S_IFDIR | 0755);
	struct handle *h;
	unsigned shared = 0;
	struct snapshot before, after;

	snap(fs, &before);
	handle_begin(fs, &h);
	for (int d = 0; d < N; d++) {
		uint64_t ino;

		CHECK_ERR(ialloc_alloc(h, root, S_IFDIR | 0755, &ino) == 0, "dir");
		c[d].fs = fs;
		c[d].dir = fake_inode(ino, S_IFDIR | 0755);
	}
	handle_end(h);
	for (int d = 0; d < N; d++)
		pthread_create(&th[d], NULL, creator_thread, &c[d]);
	for (int d = 0; d < N; d++)
		pthread_join(th[d], NULL);
	for (int d = 0; d < N; d++)
		for (int e = d + 1; e < N; e++)
			for (int f = 0; f < 64; f++)
				for (int k = 0; k < 64; k++)
					shared += (c[d].files[f] - 1) / fs->inodes_per_block ==
						  (c[e].files[k] - 1) / fs->inodes_per_block;
	printf("  %s: seed 002, 16 threads: %u shared inode-table blocks\n", what, shared);
	CHECK_ERR(shared == 0, "%s: %u inode-table blocks shared", what, shared);
	handle_begin(fs, &h);
	for (int d = 0; d < N; d++) {
		for (int f = 0; f < 64; f++)
			CHECK_ERR(ialloc_free(h, c[d].files[f], false) == 0, "free");
		CHECK_ERR(ialloc_free(h, c[d].dir->ino, true) == 0, "free dir");
		free(c[d].dir);
	}
	handle_end(h);
	snap(fs, &after);
	CHECK_ERR(memcmp(&before, &after, sizeof(before)) == 0, "%s: counts changed", what);
	free(c);
	free(root);
}

/* ------------------------------------------------------------ driver */

struct variant {
	const char *name, *opts, *size;
	bool enospc, seed002;
};

static const struct variant variants[] = {
	{ "ext4-4k", "-t ext4 -b 4096", "64M", false, false },
	{ "ext4-4k-16groups", "-t ext4 -b 4096 -g 8192 -N 32768", "512M", false, true },
	{ "ext4-1k", "-t ext4 -b 1024", "32M", true, false },
	{ "ext4-noflex", "-t ext4 -b 1024 -O ^flex_bg", "24M", true, false },
	{ "ext4-gdtcsum", "-t ext4 -b 1024 -O ^metadata_csum,uninit_bg", "24M", true, false },
	{ "ext4-metabg", "-t ext4 -b 1024 -O meta_bg,^resize_inode", "24M", true, false },
	{ "ext3", "-t ext3 -b 1024", "16M", true, false },
};

int main(void)
{
	seed = t_seed("unit_alloc", "UNIT_ALLOC_SEED");
	t_need_tools("mke2fs e2fsck");
	for (size_t v = 0; v < sizeof(variants) / sizeof(variants[0]); v++) {
		const struct variant *var = &variants[v];
		struct uext4_fs *fs;

		printf("%s (mke2fs %s, %s)\n", var->name, var->opts, var->size);
		unlink(IMG);
		if (t_make_image(IMG, var->size, var->opts) != 0)
			continue;
		if (!(fs = mount_rw()))
			continue;
		/* Commits between the tests: blocks one frees become allocatable
		 * again only when the freeing transaction commits. */
		test_stress(fs, var->name);
		CHECK_ERR(trans_commit(fs) == 0, "commit");
		test_corrupt(fs, var->name);
		CHECK_ERR(trans_commit(fs) == 0, "commit");
		test_prealloc(fs, var->name);
		CHECK_ERR(trans_commit(fs) == 0, "commit");
		test_prealloc_interleaved(fs, var->name);
		CHECK_ERR(trans_commit(fs) == 0, "commit");
		if (var->seed002) {
			test_seed002(fs, var->name);
			test_seed002_threads(fs, var->name);
			CHECK_ERR(trans_commit(fs) == 0, "commit");
		}
		if (var->enospc)
			test_enospc(fs, var->name);
		check_counts(fs, var->name);
		umount_and_fsck(fs, var->name);
	}
	unlink(IMG);
	printf("unit_alloc: %s (%d failures)\n", t_failures ? "FAIL" : "PASS", t_failures);
	return t_failures ? 1 : 0;
}
