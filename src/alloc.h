/*
 * alloc.h - what ialloc.c and balloc.c share (alloc helper's header).
 *
 * Group counters (free_blocks, free_inodes, used_dirs of struct
 * group_info) are written only under the group's lock, but the allocators
 * read them without it to pick a group, as the kernel does.  Both sides
 * go through these relaxed atomic accessors so that the unlocked reads
 * are well defined (and TSan-clean); a stale value only makes a search
 * look at a group it then finds full, or skip one for now.
 */
#ifndef UEXT4_ALLOC_H
#define UEXT4_ALLOC_H

#include "internal.h"
#include "ondisk.h"

static inline uint32_t grp_read(const uint32_t *field)
{ return __atomic_load_n(field, __ATOMIC_RELAXED); }

/* Caller holds the group's lock. */
static inline void grp_write(uint32_t *field, uint32_t v)
{ __atomic_store_n(field, v, __ATOMIC_RELAXED); }

/* Does the file system checksum its group descriptors (so that the
 * *_UNINIT flags and bg_itable_unused mean something)? */
static inline bool fs_has_group_csum(const struct uext4_fs *fs)
{ return fs->metadata_csum || fs->gdt_csum; }

static inline uint32_t fs_flex_size(const struct uext4_fs *fs)
{
	return FS_HAS_INCOMPAT(fs, FLEX_BG) && fs->log_groups_per_flex < 31
		       ? 1u << fs->log_groups_per_flex
		       : 1u;
}

/* ------------------------------------------------------------ bitmaps */
static inline bool bit_test(const uint8_t *map, uint32_t bit)
{ return map[bit >> 3] & (1u << (bit & 7)); }
static inline void bit_set(uint8_t *map, uint32_t bit)
{ map[bit >> 3] |= (uint8_t)(1u << (bit & 7)); }
static inline void bit_clear(uint8_t *map, uint32_t bit)
{ map[bit >> 3] &= (uint8_t)~(1u << (bit & 7)); }

/* First clear bit in [start, end), or end. */
static inline uint32_t bit_find_zero(const uint8_t *map, uint32_t start, uint32_t end)
{
	uint32_t i = start;

	while (i < end && (i & 7))
		if (!bit_test(map, i++))
			return i - 1;
	while (i + 64 <= end) {
		uint64_t w;

		__builtin_memcpy(&w, map + i / 8, 8);
		w = le64(w);
		if (w != ~0ull)
			return i + (uint32_t)__builtin_ctzll(~w);
		i += 64;
	}
	for (; i < end; i++)
		if (!bit_test(map, i))
			return i;
	return end;
}

/* First set bit in [start, end), or end. */
static inline uint32_t bit_find_set(const uint8_t *map, uint32_t start, uint32_t end)
{
	uint32_t i = start;

	while (i < end && (i & 7))
		if (bit_test(map, i++))
			return i - 1;
	while (i + 64 <= end) {
		uint64_t w;

		__builtin_memcpy(&w, map + i / 8, 8);
		w = le64(w);
		if (w)
			return i + (uint32_t)__builtin_ctzll(w);
		i += 64;
	}
	for (; i < end; i++)
		if (bit_test(map, i))
			return i;
	return end;
}

/* Set the bits from `from` to the end of a bitmap of `bytes` bytes (the
 * padding past the last inode or block of a group is always "in use"). */
static inline void bit_mark_end(uint8_t *map, uint32_t from, uint32_t bytes)
{
	for (uint32_t i = from; i < bytes * 8; i++)
		bit_set(map, i);
}

/* ------------------------------------------------------------ balloc.c */
/*
 * The block bitmap of group g, with fs->groups[g].lock held: read and
 * checksum-verified once, or, for a BLOCK_UNINIT group, built in memory
 * (as ext4_init_block_bitmap), dirtied in h, the flag cleared and the free
 * count set to match.  The caller brelse()s *out.
 */
int balloc_bitmap_locked(struct handle *h, uint32_t g, struct buf **out);
/* Blocks at the start of group g for the superblock backup, descriptors
 * and reserved descriptor blocks (ext4_num_base_meta_clusters). */
uint32_t balloc_base_meta_blocks(struct uext4_fs *fs, uint32_t g);
/* Blocks reserved in preallocation windows (all groups), for tests. */
uint64_t balloc_reserved_blocks(struct uext4_fs *fs);

#endif
