/*
 * ebr.c - epoch-based reclamation (see ebr.h).
 *
 * A global epoch counter and one record per thread.  A reader entering
 * announces the epoch it saw in its record (odd low bit = inside); a full
 * fence orders the announcement before its reads of the structure.  The
 * epoch moves from e to e+1 only when every thread inside a section has
 * announced e.  An object unlinked when the epoch was e (its stamp) can be
 * reached only by readers that announced e or less (a reader announcing
 * later read the epoch after the unlink); once the epoch is e+2, each of
 * those has left (the step e+1 -> e+2 needed every reader inside to have
 * announced e+1), so the object can be freed.
 *
 * What protects what:
 *   g_epoch            atomic; advanced by CAS (ebr_safe()).
 *   g_records          a list that only grows (CAS push); records are
 *                      never freed, a thread that exits gives its record
 *                      back (owned = 0) for the next new thread.
 *   record.state       atomic, written only by its owner: 0 outside a
 *                      section, else epoch << 1 | 1.  Stores are release
 *                      and the scans' loads acquire, so everything a
 *                      reader did in a section happens before the free
 *                      of whatever it looked at (what TSan checks).
 *   record.depth       the owner's nesting count (thread-local use only).
 *   record.owned       atomic: claimed by CAS.
 * Each record is on its own cache line: a reader writes only its own.
 *
 * The fence.  A reader must order its announcement before its reads of
 * the structure, and a scan must see announcements made before it: a
 * store-load pair on each side, which costs a full fence per section (a
 * sixth of a warm path lookup in the profile).  Where the kernel has
 * membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED), the reader's side is only
 * a compiler barrier and the scan (rare: once per batch of retired
 * objects, see ebr_safe()'s callers) pays instead, with one membarrier()
 * that runs a full barrier on every CPU running a thread of ours, as
 * liburcu's "memb" flavour does.  Without it, both sides fence.
 */
#include "ebr.h"
#include "internal.h"

#include <linux/membarrier.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

struct ebr_record {
	_Atomic uint64_t state;
	unsigned depth;
	_Atomic int owned;
	struct ebr_record *next;    /* immutable once pushed */
} __attribute__((aligned(CACHELINE)));

/* On a line of its own: every section entry reads it, and it changes
 * only when the epoch steps (not at every unlink). */
static struct {
	_Atomic uint64_t v;
} __attribute__((aligned(CACHELINE))) g_epoch_line = { 2 }; /* sizeof: one line */
#define g_epoch (g_epoch_line.v)
static struct ebr_record *_Atomic g_records;
static _Thread_local struct ebr_record *t_rec;
static pthread_key_t g_key;
static pthread_once_t g_key_once = PTHREAD_ONCE_INIT;
/* membarrier() registered: set once under g_key_once, read-only after
 * (every reader of it has been through ebr_init()). */
static bool g_asym;

static void record_release(void *p)
{
	struct ebr_record *r = p;

	atomic_store_explicit(&r->state, 0, memory_order_release);
	atomic_store_explicit(&r->owned, 0, memory_order_release);
}

static void key_init(void)
{
	pthread_key_create(&g_key, record_release);
	g_asym = syscall(__NR_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
}

/*
 * A full fence.  TSan does not model atomic_thread_fence() (GCC warns),
 * so its build uses a seq_cst read-modify-write of a private word, which
 * is what the fence compiles to on x86 anyway (a locked instruction).
 */
#if defined(__SANITIZE_THREAD__)
#define EBR_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define EBR_TSAN 1
#endif
#endif
static void full_fence(void)
{
#ifdef EBR_TSAN
	static _Thread_local _Atomic int word;

	atomic_fetch_add(&word, 0);
#else
	atomic_thread_fence(memory_order_seq_cst);
#endif
}

static void ebr_init(void)
{
	pthread_once(&g_key_once, key_init);
}

/* The scan's side of the fence pair (see the top). */
static void heavy_fence(void)
{
	if (!g_asym || syscall(__NR_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) != 0)
		full_fence();
}

/* The first records come from a static pool, not malloc: a thread's
 * first malloc makes glibc map it an arena (mmap, munmap, mprotect), each
 * a writer of the process's mmap lock, and with 16 new threads on 2 CPUs
 * page faults and chunk populates of the threads already working queued
 * behind those writers for 600 ms in all (perf, sched_switch stacks).
 * Claimed once each (g_pool_used, atomic). */
#define EBR_POOL 256
static struct ebr_record g_pool[EBR_POOL];
static atomic_uint g_pool_used;

/* Records for threads that arrive when malloc fails: ebr_enter() cannot
 * return an error, so out of memory takes one of these instead of
 * aborting.  Claimed once each (g_reserve_used, atomic); like every
 * record, never freed, and reused through ->owned after its thread exits. */
#define EBR_RESERVE 64
static struct ebr_record g_reserve[EBR_RESERVE];
static atomic_uint g_reserve_used;

static struct ebr_record *record_alloc(void)
{
	struct ebr_record *r;
	unsigned i = atomic_load_explicit(&g_pool_used, memory_order_relaxed);

	if (i < EBR_POOL && (i = atomic_fetch_add(&g_pool_used, 1)) < EBR_POOL)
		return &g_pool[i];
	if ((r = aligned_alloc(CACHELINE, sizeof(*r))))
		return r;
	i = atomic_fetch_add(&g_reserve_used, 1);
	if (i >= EBR_RESERVE)
		abort(); /* out of memory with 64 threads already on reserve records */
	return &g_reserve[i];
}

static struct ebr_record *record_claim(void)
{
	struct ebr_record *r;

	for (r = atomic_load(&g_records); r; r = r->next) {
		int free_ = 0;

		if (atomic_compare_exchange_strong(&r->owned, &free_, 1))
			return r;
	}
	r = record_alloc();
	memset(r, 0, sizeof(*r));
	atomic_init(&r->owned, 1);
	r->next = atomic_load(&g_records);
	while (!atomic_compare_exchange_weak(&g_records, &r->next, r))
		;
	return r;
}

static struct ebr_record *my_record(void)
{
	if (!t_rec) {
		ebr_init();
		t_rec = record_claim();
		pthread_setspecific(g_key, t_rec);
	}
	return t_rec;
}

void ebr_enter(void)
{
	struct ebr_record *r = my_record();

	uint64_t e, now;

	if (r->depth++)
		return;
	/* Announce, fence, and check the epoch did not move meanwhile: then
	 * no step past the announced epoch can have missed us. */
	now = atomic_load_explicit(&g_epoch, memory_order_relaxed);
	do {
		e = now;
		atomic_store_explicit(&r->state, e << 1 | 1, memory_order_release);
		if (g_asym)
			atomic_signal_fence(memory_order_seq_cst); /* heavy_fence() pairs */
		else
			full_fence();
		now = atomic_load_explicit(&g_epoch, memory_order_relaxed);
	} while (now != e);
}

void ebr_exit(void)
{
	struct ebr_record *r = t_rec;

	if (--r->depth == 0)
		atomic_store_explicit(&r->state, 0, memory_order_release);
}

uint64_t ebr_stamp(void)
{
	full_fence();
	return atomic_load(&g_epoch);
}

/* Advance from e to e+1 if every reader inside has announced e. */
static void try_advance(uint64_t e)
{
	heavy_fence();
	for (struct ebr_record *r = atomic_load(&g_records); r; r = r->next) {
		uint64_t st = atomic_load_explicit(&r->state, memory_order_acquire);

		if ((st & 1) && (st >> 1) != e)
			return;
	}
	atomic_compare_exchange_strong(&g_epoch, &e, e + 1);
}

bool ebr_safe(uint64_t stamp)
{
	uint64_t e;

	ebr_init();
	e = atomic_load(&g_epoch);

	if (e >= stamp + 2)
		return true;
	try_advance(e);
	e = atomic_load(&g_epoch);
	if (e >= stamp + 2)
		return true;
	try_advance(e);
	return atomic_load(&g_epoch) >= stamp + 2;
}

void ebr_limbo_push(struct ebr_limbo *l, void *obj)
{
	l->new_head = obj;
	l->new_stamp = ebr_stamp();
	l->nnew++;
}

void *ebr_limbo_reclaim(struct ebr_limbo *l, uint32_t batch)
{
	void *out = NULL;

	if (l->old_head && l->nnew >= batch && ebr_safe(l->old_stamp)) {
		out = l->old_head;
		l->old_head = NULL;
	}
	if (!l->old_head && l->new_head) {
		l->old_head = l->new_head;
		l->old_stamp = l->new_stamp;
		l->new_head = NULL;
		l->nnew = 0;
	}
	return out;
}
