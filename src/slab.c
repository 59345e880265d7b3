/*
 * slab.c - fixed-size objects (cached inodes, buffers) carved from big
 * chunks.
 *
 * Why: glibc grows a thread's arena one page at a time with an mprotect()
 * each, which made malloc the largest cost of a create (a new inode and an
 * inode-table buffer each).  Objects here come from 4 MiB chunks, freed
 * objects go on a free list, and chunks go back only when the slab is
 * destroyed (at unmount).
 *
 * Sharded by thread (thread_slot()), each shard on its own cache line with
 * a leaf lock protecting its free list and current chunk; an object freed
 * by another thread simply joins that thread's shard.
 */
#include "internal.h"
#include "lock.h"
#include "slab.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define SLAB_SHARDS 16
#define SLAB_CHUNK (4u << 20)

struct slab_chunk {
	struct slab_chunk *next;
};

struct slab_shard {
	struct ulock lock;          /* RANK_LEAF: everything below */
	void *free;                 /* free objects, linked through their first word */
	char *cur, *end;            /* unused part of the current chunk */
	struct slab_chunk *chunks;  /* every chunk, for slab_destroy() */
} __attribute__((aligned(CACHELINE)));

struct slab {
	size_t objsize;             /* immutable, a multiple of CACHELINE */
	struct slab_shard shard[SLAB_SHARDS];
};

struct slab *slab_create(size_t objsize)
{
	struct slab *s = aligned_alloc(CACHELINE, sizeof(*s));

	if (!s)
		return NULL;
	memset(s, 0, sizeof(*s));
	s->objsize = (objsize + CACHELINE - 1) / CACHELINE * CACHELINE;
	for (int i = 0; i < SLAB_SHARDS; i++)
		ulock_init(&s->shard[i].lock, RANK_LEAF);
	return s;
}

void slab_destroy(struct slab *s)
{
	if (!s)
		return;
	for (int i = 0; i < SLAB_SHARDS; i++) {
		struct slab_chunk *c = s->shard[i].chunks, *next;

		for (; c; c = next) {
			next = c->next;
			munmap(c, SLAB_CHUNK);
		}
		ulock_destroy(&s->shard[i].lock);
	}
	free(s);
}

/*
 * A new chunk for the shard (lock held); false when out of memory.  Mapped
 * populated (and huge pages where the kernel gives them): page faults on
 * fresh memory cost more than the creates that use it on a virtual machine.
 */
#define SLAB_HUGE (2u << 20)
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

/* 4 MiB on a 2 MiB boundary, so the kernel can back it with two huge pages
 * (two page faults instead of a thousand), populated up front. */
static void *chunk_map(void)
{
	size_t len = SLAB_CHUNK + SLAB_HUGE;
	uint8_t *raw = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	uint8_t *p;

	if (raw == MAP_FAILED)
		return NULL;
	p = (uint8_t *)(((uintptr_t)raw + SLAB_HUGE - 1) & ~(uintptr_t)(SLAB_HUGE - 1));
	if (p > raw)
		munmap(raw, (size_t)(p - raw));
	if (raw + len > p + SLAB_CHUNK)
		munmap(p + SLAB_CHUNK, (size_t)(raw + len - (p + SLAB_CHUNK)));
	madvise(p, SLAB_CHUNK, MADV_HUGEPAGE);
	if (madvise(p, SLAB_CHUNK, MADV_POPULATE_WRITE) != 0) {
		/* Older kernels: touch every page instead. */
		for (size_t o = 0; o < SLAB_CHUNK; o += 4096)
			p[o] = 0;
	}
	return p;
}

static bool shard_refill(struct slab *s, struct slab_shard *sh)
{
	struct slab_chunk *c = chunk_map();

	if (!c)
		return false;
	c->next = sh->chunks;
	sh->chunks = c;
	sh->cur = (char *)c + CACHELINE;
	sh->end = (char *)c + SLAB_CHUNK;
	(void)s;
	return true;
}

/* An object of objsize bytes, 64-byte aligned, zero-filled; NULL if none. */
void *slab_alloc(struct slab *s)
{
	struct slab_shard *sh = &s->shard[thread_slot() % SLAB_SHARDS];
	void *p = NULL;

	bool recycled = false;

	ulock_lock(&sh->lock);
	if (sh->free) {
		p = sh->free;
		sh->free = *(void **)p;
		recycled = true;
	} else if ((size_t)(sh->end - sh->cur) >= s->objsize || shard_refill(s, sh)) {
		p = sh->cur;
		sh->cur += s->objsize;
		/* The next object will be wanted soon (a stream of creates):
		 * start bringing its cold lines in now. */
		if ((size_t)(sh->end - sh->cur) >= s->objsize)
			for (size_t o = 0; o < s->objsize; o += CACHELINE)
				__builtin_prefetch(sh->cur + o, 1, 3);
	}
	ulock_unlock(&sh->lock);
	if (recycled)
		memset(p, 0, s->objsize); /* fresh chunk memory is already zero */
	return p;
}

void slab_free(struct slab *s, void *p)
{
	struct slab_shard *sh;

	if (!p)
		return;
	sh = &s->shard[thread_slot() % SLAB_SHARDS];
	ulock_lock(&sh->lock);
	*(void **)p = sh->free;
	sh->free = p;
	ulock_unlock(&sh->lock);
}
