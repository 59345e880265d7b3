/*
 * slab_concur - the object allocator (slab.c) under threads.
 *
 * Checks:
 *  - 4 threads allocate about 106 MiB of 4,416-byte objects at once, so
 *    that they run through the first region (16 MiB) and race to map the
 *    next ones (32, 64 MiB): every object is 64-byte aligned and zero-
 *    filled, no two overlap (sorted by address), and the pattern each
 *    thread wrote over its objects is intact after all threads are done;
 *  - freed objects come back zero-filled, from any thread;
 *  - a slab whose owner expects more than one region's worth works too.
 * slab_destroy() unmaps it all; ASan (in make check) reports a leak or a
 * use after unmap.
 */
/* run-in: release asan tsan */
#include "slab.h"
#include "t.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define THREADS 4
#define PER_THREAD 6000
#define OBJSIZE 4416


struct worker {
	struct slab *s;
	unsigned id;
	unsigned char *obj[PER_THREAD];
};

static bool all_zero(const unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return false;
	return true;
}

static void *alloc_many(void *arg)
{
	struct worker *w = arg;

	for (unsigned i = 0; i < PER_THREAD; i++) {
		unsigned char *p = slab_alloc(w->s);

		w->obj[i] = p;
		CHECK(p, "thread %u: slab_alloc %u returned NULL", w->id, i);
		if (!p)
			continue;
		CHECK((uintptr_t)p % 64 == 0, "thread %u: object %p not 64-byte aligned", w->id,
		      (void *)p);
		CHECK(all_zero(p, OBJSIZE), "thread %u: fresh object %u not zero-filled", w->id, i);
		memset(p, (int)(w->id * 31 + i % 7 + 1), OBJSIZE);
	}
	return NULL;
}

static int cmp_ptr(const void *a, const void *b)
{
	uintptr_t x = (uintptr_t)*(unsigned char *const *)a, y = (uintptr_t)*(unsigned char *const *)b;

	return x < y ? -1 : x > y;
}

static void check_patterns(struct worker *w)
{
	for (unsigned t = 0; t < THREADS; t++)
		for (unsigned i = 0; i < PER_THREAD; i++) {
			unsigned char want = (unsigned char)(t * 31 + i % 7 + 1), *p = w[t].obj[i];

			if (!p)
				continue;
			for (size_t o = 0; o < OBJSIZE; o += 97)
				if (p[o] != want) {
					CHECK(0, "thread %u object %u byte %zu: %u, wrote %u (overlap)",
					      t, i, o, p[o], want);
					break;
				}
		}
}

static void check_disjoint(struct worker *w)
{
	size_t n = (size_t)THREADS * PER_THREAD;
	unsigned char **all = malloc(n * sizeof(*all));

	CHECK(all, "out of memory");
	if (!all)
		return;
	for (unsigned t = 0; t < THREADS; t++)
		memcpy(all + (size_t)t * PER_THREAD, w[t].obj, sizeof(w[t].obj));
	qsort(all, n, sizeof(*all), cmp_ptr);
	for (size_t i = 1; i < n; i++)
		CHECK(all[i - 1] + OBJSIZE <= all[i], "objects %p and %p overlap", (void *)all[i - 1],
		      (void *)all[i]);
	free(all);
}

/* Free every other object of thread 0's from here, take as many back:
 * each comes back zero-filled although it was written. */
static void check_recycled(struct slab *s, struct worker *w)
{
	for (unsigned i = 0; i < PER_THREAD; i += 2)
		slab_free(s, w[0].obj[i]);
	for (unsigned i = 0; i < PER_THREAD; i += 2) {
		unsigned char *p = slab_alloc(s);

		CHECK(p && all_zero(p, OBJSIZE), "recycled object %u not zero-filled", i);
	}
}

static void run(size_t expect)
{
	static struct worker w[THREADS];
	pthread_t th[THREADS];
	struct slab *s = slab_create(OBJSIZE, expect);

	CHECK(s, "slab_create(%d, %zu) failed", OBJSIZE, expect);
	if (!s)
		return;
	for (unsigned t = 0; t < THREADS; t++) {
		w[t] = (struct worker){.s = s, .id = t};
		CHECK(pthread_create(&th[t], NULL, alloc_many, &w[t]) == 0, "pthread_create");
	}
	for (unsigned t = 0; t < THREADS; t++)
		pthread_join(th[t], NULL);
	check_patterns(w);
	check_disjoint(w);
	check_recycled(s, w);
	slab_destroy(s);
}

int main(void)
{
	run(0);                /* 16 MiB first, then regions mapped by the threads */
	run(512u << 20);       /* one region's worth at most (256 MiB), mapped at create */
	if (t_failures) {
		fprintf(stderr, "slab_concur: %d failures\n", t_failures);
		return 1;
	}
	printf("slab_concur: ok (%d threads, %d objects of %d bytes, twice)\n", THREADS,
	       THREADS * PER_THREAD, OBJSIZE);
	return 0;
}
