/*
 * dirhash.h - the directory name hash (dirhash.c).
 */
#ifndef UEXT4_DIRHASH_H
#define UEXT4_DIRHASH_H

#include <stddef.h>
#include <stdint.h>

/* Directory name hash (Documentation/filesystems/ext4/directory.rst). */
int dirhash(int version, const uint32_t seed[4], const char *name, size_t len,
	    uint32_t *hash, uint32_t *minor_hash);

#endif
