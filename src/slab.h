/*
 * slab.h - fixed-size object allocator (slab.c).
 */
#ifndef UEXT4_SLAB_H
#define UEXT4_SLAB_H

#include <stddef.h>

/* ---------------------------------------------------------------- slab.c
 * Fixed-size, 64-byte-aligned, zero-filled objects from big chunks (cached
 * inodes and buffers); memory returns at slab_destroy(). */
struct slab;
struct slab *slab_create(size_t objsize, size_t expect); /* expect: bytes likely needed */
void slab_destroy(struct slab *s);
void *slab_alloc(struct slab *s);
void slab_free(struct slab *s, void *p);

#endif
