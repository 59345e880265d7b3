/*
 * stats.h - statistics of one mount (stats.c).
 */
#ifndef UEXT4_STATS_H
#define UEXT4_STATS_H

#include "internal.h"

/* ---------------------------------------------------------------- stats.c
 * Statistics of one mount (see uext4_stats_*() in uext4.h): the on
 * switch, the journal's counters and the I/O baseline of the last reset.
 * Lock classes are counted process-wide in lock.c.  Every field is an
 * atomic: the switch and baseline are written by enable/reset, the commit
 * counters by the one committer at a time, the handle-wait counters by
 * handles that waited (a slow path: they slept on a commit).
 */
/* The buffer cache's I/O counters, read through the mount (stats.c sits
 * below the cache). */
typedef void (*stats_io_counters_fn)(struct uext4_fs *fs, struct uext4_counters *c);

struct fs_stats {
	stats_io_counters_fn io_counters;       /* immutable after stats_init() */
	_Atomic bool on;
	_Atomic uint64_t since_ns;
	_Atomic uint64_t commits, blocks, blocks_max, commit_ns, commit_max_ns;
	_Atomic uint64_t blocked_ns, blocked_max_ns;
	_Atomic uint64_t handle_waits, handle_wait_ns, handle_wait_max_ns;
	_Atomic uint64_t base_reads[UEXT4_META_NKINDS], base_writes[UEXT4_META_NKINDS];
	_Atomic uint64_t base_hits, base_misses, base_evictions;
} __attribute__((aligned(CACHELINE)));
int stats_init(struct uext4_fs *fs, stats_io_counters_fn io_counters);
void stats_destroy(struct uext4_fs *fs);
static inline bool stats_on(const struct fs_stats *st);
/* A commit: blocks written, and the clock at its start, when handles ran
 * again and at its end (lockstat_now_ns()). */
void stats_commit(struct uext4_fs *fs, uint64_t blocks, uint64_t start, uint64_t released,
		  uint64_t end);
/* A handle waited ns for a commit to let it run. */
void stats_handle_waited(struct uext4_fs *fs, uint64_t ns);

static inline bool stats_on(const struct fs_stats *st)
{
	return st && __builtin_expect(atomic_load_explicit(&st->on, memory_order_relaxed), 0);
}


#endif
