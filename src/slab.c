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
 * Chunks are carved from regions mapped a few times per mount (the first,
 * as big as the owner expects to need, at slab_create(); then doubling, to
 * at most 256 MiB each), not mapped one by one: every mmap(), munmap() and
 * madvise(MADV_HUGEPAGE) takes the process's mmap lock for writing, and
 * behind a writer every page fault of every thread waits.  With 16 threads
 * on 2 CPUs a reader preempted while zeroing a huge page held that writer,
 * and with it each thread inside a handle, for up to 85 ms (perf sched), so
 * that a commit waited 150 ms for its handles to drain.  A chunk taken from
 * a region is only populated, which takes the lock for reading.
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
#define SLAB_HUGE (2u << 20)
#define SLAB_REGION_FIRST (16u << 20)
#define SLAB_REGION_MAX (256u << 20)

/* A mapped range chunks are carved from; immutable but `used`. */
struct slab_region {
	struct slab_region *next;   /* the region mapped before this one */
	char *base;                 /* SLAB_HUGE-aligned */
	size_t len;                 /* a multiple of SLAB_CHUNK */
	_Atomic size_t used;        /* bytes handed out (may pass len: then full) */
};

struct slab_shard {
	struct ulock lock;          /* RANK_LEAF: everything below */
	void *free;                 /* free objects, linked through their first word */
	char *cur, *end;            /* unused part of the current chunk */
} __attribute__((aligned(CACHELINE)));

struct slab {
	size_t objsize;             /* immutable, a multiple of CACHELINE */
	/* The newest region, the head of the list of all of them: replaced
	 * by compare-and-swap when full, read with no lock. */
	_Atomic(struct slab_region *) region;
	struct slab_shard shard[SLAB_SHARDS];
};

static struct slab_region *region_map(size_t len);

struct slab *slab_create(size_t objsize, size_t expect)
{
	struct slab *s = aligned_alloc(CACHELINE, sizeof(*s));

	if (!s)
		return NULL;
	memset(s, 0, sizeof(*s));
	s->objsize = (objsize + CACHELINE - 1) / CACHELINE * CACHELINE;
	for (int i = 0; i < SLAB_SHARDS; i++)
		ulock_init(&s->shard[i].lock, RANK_LEAF);
	/* Mapped now, before any thread works (NULL: mapped when needed). */
	atomic_init(&s->region, region_map(MAX(expect, (size_t)SLAB_REGION_FIRST)));
	return s;
}

void slab_destroy(struct slab *s)
{
	struct slab_region *r, *next;

	if (!s)
		return;
	for (r = atomic_load(&s->region); r; r = next) {
		next = r->next;
		munmap(r->base, r->len);
		free(r);
	}
	for (int i = 0; i < SLAB_SHARDS; i++)
		ulock_destroy(&s->shard[i].lock);
	free(s);
}

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

/* len bytes on a 2 MiB boundary, so the kernel can back them with huge
 * pages (a page fault per 2 MiB instead of per 4 KiB); NULL on failure. */
static char *map_aligned(size_t len)
{
	size_t raw_len = len + SLAB_HUGE;
	char *raw = mmap(NULL, raw_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	char *p;

	if (raw == MAP_FAILED)
		return NULL;
	p = (char *)(((uintptr_t)raw + SLAB_HUGE - 1) & ~(uintptr_t)(SLAB_HUGE - 1));
	if (p > raw)
		munmap(raw, (size_t)(p - raw));
	if (raw + raw_len > p + len)
		munmap(p + len, (size_t)(raw + raw_len - (p + len)));
	madvise(p, len, MADV_HUGEPAGE);
	return p;
}

/* A region of len bytes, at most SLAB_REGION_MAX (less if memory is
 * short, down to a chunk); NULL when not even a chunk can be mapped. */
static struct slab_region *region_map(size_t len)
{
	struct slab_region *r = malloc(sizeof(*r));
	char *base = NULL;

	if (!r)
		return NULL;
	len = (MIN(len, (size_t)SLAB_REGION_MAX) + SLAB_CHUNK - 1) / SLAB_CHUNK * SLAB_CHUNK;
	for (; len >= SLAB_CHUNK && !(base = map_aligned(len)); len = len / 2 / SLAB_CHUNK * SLAB_CHUNK)
		;
	if (!base) {
		free(r);
		return NULL;
	}
	*r = (struct slab_region){.base = base, .len = len};
	return r;
}

/* Fault a chunk in up front: page faults on fresh memory cost more than
 * the creates that use it on a virtual machine. */
static void chunk_populate(char *p)
{
	if (madvise(p, SLAB_CHUNK, MADV_POPULATE_WRITE) != 0)
		for (size_t o = 0; o < SLAB_CHUNK; o += 4096)
			p[o] = 0; /* older kernels: touch every page */
}

/* A fresh chunk, populated; NULL when out of memory.  Lock-free: threads
 * race on the region's `used`, and one of those that find it full maps
 * the next region (a loser unmaps its own). */
static char *chunk_take(struct slab *s)
{
	for (;;) {
		struct slab_region *r = atomic_load(&s->region), *nr;

		if (r) {
			size_t off = atomic_fetch_add(&r->used, SLAB_CHUNK);

			if (off + SLAB_CHUNK <= r->len) {
				chunk_populate(r->base + off);
				return r->base + off;
			}
		}
		if (!(nr = region_map(r ? r->len * 2 : SLAB_REGION_FIRST)))
			return NULL;
		nr->next = r;
		if (!atomic_compare_exchange_strong(&s->region, &r, nr)) {
			munmap(nr->base, nr->len);
			free(nr);
		}
	}
}

/* A new chunk for the shard (lock held); false when out of memory. */
static bool shard_refill(struct slab *s, struct slab_shard *sh)
{
	char *c = chunk_take(s);

	if (!c)
		return false;
	sh->cur = c;
	sh->end = c + SLAB_CHUNK;
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
