/*
 * stats.c - statistics of a mount: the switch, the journal's counters,
 * and the report (uext4_stats_get/format).
 *
 * What is counted where:
 *   lock classes   lock.h/lock.c, process-wide, per thread slot (only
 *                  while some mount has statistics on);
 *   blocks by kind bcache.c's shards, always (reads where a block is read,
 *                  writes at the commit's home writes, journal.c's log
 *                  writes and file.c's data writes); reported as the
 *                  difference to the baseline taken at the last reset;
 *   journal        here, from trans.c: the commit's latency and size,
 *                  the window in which handles are held back, and the
 *                  handles that waited in it (only while on).
 * The FUSE server counts its requests itself (fuse/fuse.c) and appends
 * its section to this report.
 */
#include "error.h"
#include "internal.h"
#include "lock.h"
#include "stats.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const kind_names[UEXT4_META_NKINDS] = {
	[UEXT4_META_SUPER] = "superblock",
	[UEXT4_META_GROUP_DESC] = "group_desc",
	[UEXT4_META_BITMAP] = "bitmap",
	[UEXT4_META_INODE_TABLE] = "inode_table",
	[UEXT4_META_DIR] = "directory",
	[UEXT4_META_EXTENT] = "extent",
	[UEXT4_META_XATTR] = "xattr",
	[UEXT4_META_DATA] = "data",
	[UEXT4_META_JOURNAL] = "journal",
	[UEXT4_META_OTHER] = "other",
};

const char *uext4_meta_kind_name(unsigned kind)
{
	return kind < UEXT4_META_NKINDS ? kind_names[kind] : NULL;
}

int stats_init(struct uext4_fs *fs, stats_io_counters_fn io_counters)
{
	struct fs_stats *st = aligned_alloc(CACHELINE, sizeof(*st));

	if (!st)
		return fs_err(ENOMEM, "out of memory for the statistics");
	memset(st, 0, sizeof(*st));
	st->io_counters = io_counters;
	atomic_store(&st->since_ns, lockstat_now_ns());
	fs->stats = st;
	return 0;
}

void stats_destroy(struct uext4_fs *fs)
{
	if (!fs->stats)
		return;
	uext4_stats_enable(fs, 0);      /* lock classes: one mount fewer counting */
	free(fs->stats);
	fs->stats = NULL;
}

static void max_update(_Atomic uint64_t *m, uint64_t v)
{
	uint64_t old = atomic_load_explicit(m, memory_order_relaxed);

	while (v > old && !atomic_compare_exchange_weak_explicit(m, &old, v, memory_order_relaxed,
								 memory_order_relaxed))
		;
}

static void add(_Atomic uint64_t *c, uint64_t v)
{
	atomic_fetch_add_explicit(c, v, memory_order_relaxed);
}

void stats_commit(struct uext4_fs *fs, uint64_t blocks, uint64_t start, uint64_t released,
		  uint64_t end)
{
	struct fs_stats *st = fs->stats;

	add(&st->commits, 1);
	add(&st->blocks, blocks);
	max_update(&st->blocks_max, blocks);
	add(&st->commit_ns, end - start);
	max_update(&st->commit_max_ns, end - start);
	add(&st->blocked_ns, released - start);
	max_update(&st->blocked_max_ns, released - start);
}

void stats_handle_waited(struct uext4_fs *fs, uint64_t ns)
{
	struct fs_stats *st = fs->stats;

	add(&st->handle_waits, 1);
	add(&st->handle_wait_ns, ns);
	max_update(&st->handle_wait_max_ns, ns);
}

/* ------------------------------------------------------------- API */

int uext4_stats_enable(uext4_fs *fs, int on)
{
	bool was;

	if (!fs || !fs->stats)
		return fs_err(EINVAL, "statistics: no mount");
	was = atomic_exchange(&fs->stats->on, on != 0);
	if (!was && on)
		atomic_fetch_add(&lockstat_switch.on, 1);
	else if (was && !on)
		atomic_fetch_sub(&lockstat_switch.on, 1);
	return was;
}

static void zero(_Atomic uint64_t *c)
{
	atomic_store_explicit(c, 0, memory_order_relaxed);
}

int uext4_stats_reset(uext4_fs *fs)
{
	struct fs_stats *st;
	struct uext4_counters c;

	if (!fs || !(st = fs->stats))
		return fs_err(EINVAL, "statistics: no mount");
	lockstat_reset();
	zero(&st->commits);
	zero(&st->blocks);
	zero(&st->blocks_max);
	zero(&st->commit_ns);
	zero(&st->commit_max_ns);
	zero(&st->blocked_ns);
	zero(&st->blocked_max_ns);
	zero(&st->handle_waits);
	zero(&st->handle_wait_ns);
	zero(&st->handle_wait_max_ns);
	st->io_counters(fs, &c);
	for (int k = 0; k < UEXT4_META_NKINDS; k++) {
		atomic_store_explicit(&st->base_reads[k], c.reads[k], memory_order_relaxed);
		atomic_store_explicit(&st->base_writes[k], c.writes[k], memory_order_relaxed);
	}
	atomic_store_explicit(&st->base_hits, c.cache_hits, memory_order_relaxed);
	atomic_store_explicit(&st->base_misses, c.cache_misses, memory_order_relaxed);
	atomic_store_explicit(&st->base_evictions, c.cache_evictions, memory_order_relaxed);
	atomic_store(&st->since_ns, lockstat_now_ns());
	return 0;
}

static uint64_t since(uint64_t now, _Atomic uint64_t *base)
{
	uint64_t b = atomic_load_explicit(base, memory_order_relaxed);

	return now >= b ? now - b : 0;   /* a reset racing the read */
}

static uint64_t get(_Atomic uint64_t *c)
{
	return atomic_load_explicit(c, memory_order_relaxed);
}

int uext4_stats_get(uext4_fs *fs, struct uext4_stats *out)
{
	struct fs_stats *st;
	struct uext4_counters c;
	struct uext4_journal_stats *j = &out->journal;

	memset(out, 0, sizeof(*out));
	if (!fs || !(st = fs->stats))
		return fs_err(EINVAL, "statistics: no mount");
	out->enabled = atomic_load(&st->on);
	out->elapsed_ns = since(lockstat_now_ns(), &st->since_ns);
	lockstat_read(out->locks, &out->nlocks);
	st->io_counters(fs, &c);
	for (int k = 0; k < UEXT4_META_NKINDS; k++) {
		out->io.reads[k] = since(c.reads[k], &st->base_reads[k]);
		out->io.writes[k] = since(c.writes[k], &st->base_writes[k]);
	}
	out->io.cache_hits = since(c.cache_hits, &st->base_hits);
	out->io.cache_misses = since(c.cache_misses, &st->base_misses);
	out->io.cache_evictions = since(c.cache_evictions, &st->base_evictions);
	out->io.cached_bytes = c.cached_bytes;
	j->commits = get(&st->commits);
	j->blocks = get(&st->blocks);
	j->blocks_max = get(&st->blocks_max);
	j->commit_ns = get(&st->commit_ns);
	j->commit_max_ns = get(&st->commit_max_ns);
	j->blocked_ns = get(&st->blocked_ns);
	j->blocked_max_ns = get(&st->blocked_max_ns);
	j->handle_waits = get(&st->handle_waits);
	j->handle_wait_ns = get(&st->handle_wait_ns);
	j->handle_wait_max_ns = get(&st->handle_wait_max_ns);
	return 0;
}

/* ------------------------------------------------------------- format */

/* snprintf into a growing position; pos counts what the whole text needs. */
struct out {
	char *buf;
	size_t len, pos;
};

static void __attribute__((format(printf, 2, 3))) put(struct out *o, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(o->pos < o->len ? o->buf + o->pos : NULL,
		      o->pos < o->len ? o->len - o->pos : 0, fmt, ap);
	va_end(ap);
	if (n > 0)
		o->pos += (size_t)n;
}

/* A duration for people: ns, us, ms or s with 3 significant decimals. */
static const char *human_ns(uint64_t ns, char *b, size_t len)
{
	if (ns < 10000)
		snprintf(b, len, "%llu ns", (unsigned long long)ns);
	else if (ns < 10000000)
		snprintf(b, len, "%.1f us", ns / 1e3);
	else if (ns < 10000000000ull)
		snprintf(b, len, "%.1f ms", ns / 1e6);
	else
		snprintf(b, len, "%.2f s", ns / 1e9);
	return b;
}

static uint64_t avg(uint64_t sum, uint64_t n)
{
	return n ? sum / n : 0;
}

static void format_text(struct out *o, const struct uext4_stats *s)
{
	const struct uext4_journal_stats *j = &s->journal;
	char a[32], b[32], c[32];

	put(o, "statistics: %s, %.3f s since mount or reset\n", s->enabled ? "on" : "off",
	    s->elapsed_ns / 1e9);
	put(o, "\nlocks (process-wide)  %12s %11s %12s %12s %12s\n", "acquired", "contended",
	    "wait total", "wait avg", "wait max");
	for (unsigned i = 0; i < s->nlocks; i++) {
		const struct uext4_lock_stats *l = &s->locks[i];

		put(o, "  %-19s %12llu %11llu %12s %12s %12s\n", l->name,
		    (unsigned long long)l->acquisitions, (unsigned long long)l->contentions,
		    human_ns(l->wait_ns, a, sizeof a),
		    human_ns(avg(l->wait_ns, l->contentions), b, sizeof b),
		    human_ns(l->wait_max_ns, c, sizeof c));
	}
	put(o, "\nblocks                %12s %11s\n", "read", "written");
	for (unsigned k = 0; k < UEXT4_META_NKINDS; k++)
		put(o, "  %-19s %12llu %11llu\n", kind_names[k],
		    (unsigned long long)s->io.reads[k], (unsigned long long)s->io.writes[k]);
	put(o, "  cache: %llu hits, %llu misses, %llu evictions, %llu bytes cached\n",
	    (unsigned long long)s->io.cache_hits, (unsigned long long)s->io.cache_misses,
	    (unsigned long long)s->io.cache_evictions, (unsigned long long)s->io.cached_bytes);
	put(o, "\njournal\n  commits %llu, blocks %llu (avg %llu, max %llu per commit)\n",
	    (unsigned long long)j->commits, (unsigned long long)j->blocks,
	    (unsigned long long)avg(j->blocks, j->commits), (unsigned long long)j->blocks_max);
	put(o, "  commit latency: total %s, avg %s, max %s\n", human_ns(j->commit_ns, a, sizeof a),
	    human_ns(avg(j->commit_ns, j->commits), b, sizeof b),
	    human_ns(j->commit_max_ns, c, sizeof c));
	put(o, "  handles held back: total %s, max %s per commit\n",
	    human_ns(j->blocked_ns, a, sizeof a), human_ns(j->blocked_max_ns, b, sizeof b));
	put(o, "  handles that waited: %llu, total %s, max %s\n",
	    (unsigned long long)j->handle_waits, human_ns(j->handle_wait_ns, a, sizeof a),
	    human_ns(j->handle_wait_max_ns, b, sizeof b));
}

#define U(x) ((unsigned long long)(x))

static void format_json(struct out *o, const struct uext4_stats *s)
{
	const struct uext4_journal_stats *j = &s->journal;

	put(o, "{\"enabled\":%s,\"elapsed_ns\":%llu,\"locks\":{", s->enabled ? "true" : "false",
	    U(s->elapsed_ns));
	for (unsigned i = 0; i < s->nlocks; i++) {
		const struct uext4_lock_stats *l = &s->locks[i];

		put(o, "%s\"%s\":{\"acquisitions\":%llu,\"contentions\":%llu,\"wait_ns\":%llu,"
		    "\"wait_max_ns\":%llu}", i ? "," : "", l->name, U(l->acquisitions),
		    U(l->contentions), U(l->wait_ns), U(l->wait_max_ns));
	}
	put(o, "},\"blocks\":{");
	for (unsigned k = 0; k < UEXT4_META_NKINDS; k++)
		put(o, "%s\"%s\":{\"read\":%llu,\"written\":%llu}", k ? "," : "", kind_names[k],
		    U(s->io.reads[k]), U(s->io.writes[k]));
	put(o, "},\"cache\":{\"hits\":%llu,\"misses\":%llu,\"evictions\":%llu,"
	    "\"cached_bytes\":%llu}", U(s->io.cache_hits), U(s->io.cache_misses),
	    U(s->io.cache_evictions), U(s->io.cached_bytes));
	put(o, ",\"journal\":{\"commits\":%llu,\"blocks\":%llu,\"blocks_max\":%llu,"
	    "\"commit_ns\":%llu,\"commit_max_ns\":%llu,\"blocked_ns\":%llu,"
	    "\"blocked_max_ns\":%llu,\"handle_waits\":%llu,\"handle_wait_ns\":%llu,"
	    "\"handle_wait_max_ns\":%llu}}\n", U(j->commits), U(j->blocks), U(j->blocks_max),
	    U(j->commit_ns), U(j->commit_max_ns), U(j->blocked_ns), U(j->blocked_max_ns),
	    U(j->handle_waits), U(j->handle_wait_ns), U(j->handle_wait_max_ns));
}

int uext4_stats_format(uext4_fs *fs, char *buf, size_t len, int json)
{
	struct uext4_stats s;
	struct out o = { buf, len, 0 };
	int err = uext4_stats_get(fs, &s);

	if (err)
		return err;
	if (len)
		buf[0] = '\0';
	if (json)
		format_json(&o, &s);
	else
		format_text(&o, &s);
	return o.pos > INT32_MAX ? -EOVERFLOW : (int)o.pos;
}
