/*
 * reqstats.c - requests per FUSE opcode and their latency; see reqstats.h.
 *
 * Counters are kept per thread slot (each its own cache lines, as the
 * library's), summed when read.  The latency of a request runs from the
 * loop's peek at it (before libfuse dispatches it) to the loop's writev
 * of its reply, on the same thread: the server answers every request
 * before it returns to the loop.  A thread-local remembers the request in
 * flight (its unique id, opcode and start).  Requests that get no reply
 * (FORGET, BATCH_FORGET, INTERRUPT) are counted without a latency.
 * Off, the hooks cost one relaxed load.
 */
#include "reqstats.h"

#include <linux/fuse.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define OPS 64                  /* opcodes counted; higher ones (CUSE) go to 0 */
#define SLOTS 16

struct op_counts {
	_Atomic uint64_t requests, replies, ns, max_ns;
};

static struct slot {
	struct op_counts op[OPS];
} __attribute__((aligned(64))) slots[SLOTS];

static struct {
	_Atomic int on;
	_Atomic unsigned next_slot;
} __attribute__((aligned(64))) state;

/* The request this thread serves. */
static _Thread_local struct {
	uint64_t unique, t0;
	uint32_t opcode;
	int slot;               /* 0 = not yet picked; else slot + 1 */
} cur;

static const char *const op_names[OPS] = {
	[FUSE_LOOKUP] = "LOOKUP", [FUSE_FORGET] = "FORGET", [FUSE_GETATTR] = "GETATTR",
	[FUSE_SETATTR] = "SETATTR", [FUSE_READLINK] = "READLINK", [FUSE_SYMLINK] = "SYMLINK",
	[FUSE_MKNOD] = "MKNOD", [FUSE_MKDIR] = "MKDIR", [FUSE_UNLINK] = "UNLINK",
	[FUSE_RMDIR] = "RMDIR", [FUSE_RENAME] = "RENAME", [FUSE_LINK] = "LINK",
	[FUSE_OPEN] = "OPEN", [FUSE_READ] = "READ", [FUSE_WRITE] = "WRITE",
	[FUSE_STATFS] = "STATFS", [FUSE_RELEASE] = "RELEASE", [FUSE_FSYNC] = "FSYNC",
	[FUSE_SETXATTR] = "SETXATTR", [FUSE_GETXATTR] = "GETXATTR",
	[FUSE_LISTXATTR] = "LISTXATTR", [FUSE_REMOVEXATTR] = "REMOVEXATTR",
	[FUSE_FLUSH] = "FLUSH", [FUSE_INIT] = "INIT", [FUSE_OPENDIR] = "OPENDIR",
	[FUSE_READDIR] = "READDIR", [FUSE_RELEASEDIR] = "RELEASEDIR",
	[FUSE_FSYNCDIR] = "FSYNCDIR", [FUSE_GETLK] = "GETLK", [FUSE_SETLK] = "SETLK",
	[FUSE_SETLKW] = "SETLKW", [FUSE_ACCESS] = "ACCESS", [FUSE_CREATE] = "CREATE",
	[FUSE_INTERRUPT] = "INTERRUPT", [FUSE_BMAP] = "BMAP", [FUSE_DESTROY] = "DESTROY",
	[FUSE_IOCTL] = "IOCTL", [FUSE_POLL] = "POLL", [FUSE_NOTIFY_REPLY] = "NOTIFY_REPLY",
	[FUSE_BATCH_FORGET] = "BATCH_FORGET", [FUSE_FALLOCATE] = "FALLOCATE",
	[FUSE_READDIRPLUS] = "READDIRPLUS", [FUSE_RENAME2] = "RENAME2",
	[FUSE_LSEEK] = "LSEEK", [FUSE_COPY_FILE_RANGE] = "COPY_FILE_RANGE",
	[FUSE_SETUPMAPPING] = "SETUPMAPPING", [FUSE_REMOVEMAPPING] = "REMOVEMAPPING",
	[FUSE_SYNCFS] = "SYNCFS", [FUSE_TMPFILE] = "TMPFILE", [52] = "STATX",
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static struct slot *my_slot(void)
{
	if (!cur.slot)
		cur.slot = (int)(atomic_fetch_add_explicit(&state.next_slot, 1,
							   memory_order_relaxed) % SLOTS) + 1;
	return &slots[cur.slot - 1];
}

void reqstats_enable(int on)
{
	atomic_store(&state.on, on != 0);
}

int reqstats_enabled(void)
{
	return atomic_load_explicit(&state.on, memory_order_relaxed);
}

void reqstats_reset(void)
{
	for (unsigned i = 0; i < SLOTS; i++)
		for (unsigned k = 0; k < OPS; k++) {
			struct op_counts *c = &slots[i].op[k];

			atomic_store_explicit(&c->requests, 0, memory_order_relaxed);
			atomic_store_explicit(&c->replies, 0, memory_order_relaxed);
			atomic_store_explicit(&c->ns, 0, memory_order_relaxed);
			atomic_store_explicit(&c->max_ns, 0, memory_order_relaxed);
		}
}

void reqstats_request(const void *in_header)
{
	const struct fuse_in_header *in = in_header;
	uint32_t op;

	cur.unique = 0;
	if (!reqstats_enabled())
		return;
	op = in->opcode < OPS ? in->opcode : 0;
	atomic_fetch_add_explicit(&my_slot()->op[op].requests, 1, memory_order_relaxed);
	cur.unique = in->unique;
	cur.opcode = op;
	cur.t0 = now_ns();
}

void reqstats_replied(const void *out_header)
{
	const struct fuse_out_header *out = out_header;
	struct op_counts *c;
	uint64_t ns, old;

	if (!cur.unique || out->unique != cur.unique)
		return;         /* a notification, or counting was off at the request */
	cur.unique = 0;
	ns = now_ns() - cur.t0;
	c = &my_slot()->op[cur.opcode];
	atomic_fetch_add_explicit(&c->replies, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&c->ns, ns, memory_order_relaxed);
	old = atomic_load_explicit(&c->max_ns, memory_order_relaxed);
	while (ns > old && !atomic_compare_exchange_weak_explicit(&c->max_ns, &old, ns,
								   memory_order_relaxed,
								   memory_order_relaxed))
		;
}

/* ------------------------------------------------------------- report */

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

struct op_sum {
	uint64_t requests, replies, ns, max_ns;
};

static void sum_op(unsigned k, struct op_sum *s)
{
	memset(s, 0, sizeof(*s));
	for (unsigned i = 0; i < SLOTS; i++) {
		struct op_counts *c = &slots[i].op[k];
		uint64_t m = atomic_load_explicit(&c->max_ns, memory_order_relaxed);

		s->requests += atomic_load_explicit(&c->requests, memory_order_relaxed);
		s->replies += atomic_load_explicit(&c->replies, memory_order_relaxed);
		s->ns += atomic_load_explicit(&c->ns, memory_order_relaxed);
		if (m > s->max_ns)
			s->max_ns = m;
	}
}

static const char *op_name(unsigned k, char *b, size_t len)
{
	if (k && op_names[k])
		return op_names[k];
	snprintf(b, len, k ? "OP%u" : "OTHER", k);
	return b;
}

int reqstats_format(char *buf, size_t len, int json)
{
	struct out o = { buf, len, 0 };
	struct op_sum s;
	char name[16];
	int first = 1;

	if (len)
		buf[0] = '\0';
	if (json)
		put(&o, "\"fuse\":{\"enabled\":%s,\"requests\":{", reqstats_enabled() ? "true" : "false");
	else
		put(&o, "\nfuse requests (%s)   %12s %11s %12s %12s\n",
		    reqstats_enabled() ? "on" : "off", "count", "replies", "latency avg",
		    "latency max");
	for (unsigned k = 0; k < OPS; k++) {
		sum_op(k, &s);
		if (!s.requests)
			continue;
		if (json) {
			put(&o, "%s\"%s\":{\"count\":%llu,\"replies\":%llu,\"latency_ns\":%llu,"
			    "\"latency_max_ns\":%llu}", first ? "" : ",", op_name(k, name, sizeof name),
			    (unsigned long long)s.requests, (unsigned long long)s.replies,
			    (unsigned long long)s.ns, (unsigned long long)s.max_ns);
		} else {
			put(&o, "  %-19s %12llu %11llu %9.1f us %9.1f us\n", op_name(k, name, sizeof name),
			    (unsigned long long)s.requests, (unsigned long long)s.replies,
			    s.replies ? (double)s.ns / (double)s.replies / 1e3 : 0.0, s.max_ns / 1e3);
		}
		first = 0;
	}
	if (json)
		put(&o, "}}");
	return o.pos > INT32_MAX ? -1 : (int)o.pos;
}
