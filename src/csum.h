/*
 * csum.h - helpers of csum.c that other modules may use.
 *
 * The bitmap checksums live in the raw group descriptor, which struct
 * group_info does not keep, so csum.c reads the descriptor through the
 * buffer cache.
 */
#ifndef UEXT4_CSUM_H
#define UEXT4_CSUM_H

#include "internal.h"

/* Copy group's raw descriptor (first MIN(desc_size, 64) bytes, the rest
 * zeroed) through the buffer cache. */
int csum_read_group_desc(struct uext4_fs *fs, uint32_t group, struct ext4_group_desc *gd);

#endif
