/*
 * geom.h - where the superblock backups and the group descriptors sit
 * (geom.c).
 */
#ifndef UEXT4_GEOM_H
#define UEXT4_GEOM_H

#include "internal.h"

/* Does group g hold a superblock backup (sparse_super, sparse_super2)? */
bool geom_group_has_super(struct uext4_fs *fs, uint32_t g);
/* Block holding group's descriptor, and its byte offset there (meta_bg
 * aware, as the kernel's descriptor_loc()). */
uint64_t geom_desc_location(struct uext4_fs *fs, uint32_t group, uint32_t *offset);

#endif
