/*
 * shard.c - the cold parts of a cache shard (shard.h): setting one up and
 * tearing it down.  The hot parts are static inline in shard.h.
 */
#include "shard.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int shard_init(struct shard *s, enum lock_rank rank, uint32_t nbuckets)
{
	memset(s, 0, sizeof(*s));
	s->nbuckets = nbuckets;
	s->buckets = calloc(nbuckets, sizeof(*s->buckets));
	if (!s->buckets)
		return -ENOMEM;
	ulock_init(&s->lock, rank);
	return 0;
}

void shard_free_list(struct shard_node *list, void (*free_node)(void *ctx, struct shard_node *n),
		     void *ctx)
{
	while (list) {
		struct shard_node *next = list->lru_next;

		free_node(ctx, list);
		list = next;
	}
}

void shard_destroy(struct shard *s, void (*free_node)(void *ctx, struct shard_node *n),
		   void *ctx)
{
	if (!s->buckets)
		return;
	for (uint32_t b = 0; b < s->nbuckets; b++) {
		struct shard_node *n = atomic_load_explicit(&s->buckets[b], memory_order_relaxed);

		while (n) {
			struct shard_node *next = atomic_load_explicit(&n->hnext,
								       memory_order_relaxed);

			free_node(ctx, n);
			n = next;
		}
	}
	/* No lookup runs any more: the retired go at once. */
	shard_free_list(s->retired.new_head, free_node, ctx);
	shard_free_list(s->retired.old_head, free_node, ctx);
	free(s->buckets);
	s->buckets = NULL;
	ulock_destroy(&s->lock);
}
