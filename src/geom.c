/*
 * geom.c - where the superblock backups and the group descriptors sit
 * (geom.h): pure functions of the superblock's geometry and features,
 * below every layer that reads or checks those blocks (the checksum of a
 * descriptor covers its group number, found from its block).
 */
#include "geom.h"

static bool is_power_of(uint32_t n, uint32_t base)
{
	while (n > 1 && n % base == 0)
		n /= base;
	return n == 1;
}

bool geom_group_has_super(struct uext4_fs *fs, uint32_t g)
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

uint64_t geom_desc_location(struct uext4_fs *fs, uint32_t group, uint32_t *offset)
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
	has_super = geom_group_has_super(fs, first_group) ? 1 : 0;
	if (fs->block_size == 1024 && nr == 0 && fs->first_data_block == 0)
		has_super++; /* the superblock is in block 1 */
	return (uint64_t)first_group * fs->blocks_per_group + fs->first_data_block + has_super;
}
