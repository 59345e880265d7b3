/*
 * lock.c - lock initialisation, lock statistics and the debug-build
 * lock-order validator.
 */
#include "internal.h"
#include "lock.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The class a rank's locks are counted in (a directory's inode lock is
 * moved to LOCKSTAT_DIR by inode.c once the mode is known). */
static int class_of_rank(int rank)
{
	switch (rank) {
	case RANK_RENAME: return LOCKSTAT_RENAME;
	case RANK_INODE: case RANK_INODE_CHILD: case RANK_INODE_3: case RANK_INODE_4:
		return LOCKSTAT_INODE;
	case RANK_HANDLE: return LOCKSTAT_COMMIT;
	case RANK_EA_INODE: return LOCKSTAT_EA_INODE;
	case RANK_ICACHE_SHARD: return LOCKSTAT_ICACHE;
	case RANK_GROUP: return LOCKSTAT_GROUP;
	case 26: return LOCKSTAT_ORPHAN_LIST;   /* RANK_ORPHAN_LIST, orphan.h */
	case RANK_XATTR_INDEX: return LOCKSTAT_XATTR_INDEX;
	case RANK_BUF: return LOCKSTAT_BUF;
	case RANK_BCACHE_SHARD: return LOCKSTAT_BCACHE;
	case RANK_TRANS: return LOCKSTAT_TRANS;
	case RANK_ERRORS: case RANK_LEAF: return LOCKSTAT_LEAF;
	case RANK_DIR_LEAF: return LOCKSTAT_DIR_LEAF;
	case RANK_DIR_ATTR: return LOCKSTAT_DIR_ATTR;
	default: return LOCKSTAT_OTHER;
	}
}

void ulock_init(struct ulock *l, int rank)
{
	pthread_mutexattr_t a;

	pthread_mutexattr_init(&a);
#ifdef PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP
	/* Spin a little before sleeping: our critical sections are short. */
	pthread_mutexattr_settype(&a, PTHREAD_MUTEX_ADAPTIVE_NP);
#endif
	pthread_mutex_init(&l->m, &a);
	pthread_mutexattr_destroy(&a);
	l->rank = rank;
	l->stat_class = (uint8_t)class_of_rank(rank);
}

void ulock_destroy(struct ulock *l)
{
	pthread_mutex_destroy(&l->m);
}

/*
 * Writers first: a reader arriving while a writer waits queues behind it.
 * glibc's default lets readers in as long as any reader holds the lock,
 * so with creates holding a directory's lock shared (dir_add_shared()),
 * the one that must split a leaf waited for a gap in a stream of
 * readers (up to 200 ms at 16 threads on 2 cores).  Lockdep forbids
 * taking a lock already held, so no reader recurses (which this mode
 * would deadlock with a writer waiting).
 */
void urwlock_init(struct urwlock *l, int rank)
{
	pthread_rwlockattr_t a;

	pthread_rwlockattr_init(&a);
	pthread_rwlockattr_setkind_np(&a, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	pthread_rwlock_init(&l->rw, &a);
	pthread_rwlockattr_destroy(&a);
	l->rank = rank;
	l->stat_class = (uint8_t)class_of_rank(rank);
}

void urwlock_destroy(struct urwlock *l)
{
	pthread_rwlock_destroy(&l->rw);
}

unsigned thread_slot(void)
{
	static _Atomic unsigned next;
	static _Thread_local unsigned slot;
	static _Thread_local bool have;

	if (!have) {
		slot = atomic_fetch_add_explicit(&next, 1, memory_order_relaxed);
		have = true;
	}
	return slot;
}

/* ------------------------------------------------------------ statistics
 * Counters per thread slot (thread_slot(), as struct pcounter), each slot
 * on cache lines of its own, summed on read: threads on different slots
 * write no common line.  Relaxed atomics: slots are shared past
 * LOCKSTAT_SLOTS threads, and a reset may race with counting (a reset
 * while threads run is approximate).
 */
#define LOCKSTAT_SLOTS 16

struct lockstat_counts {
	_Atomic uint64_t acquired, contended, wait_ns, wait_max_ns;
};

static struct lockstat_slot {
	struct lockstat_counts c[LOCKSTAT_NCLASSES];
} __attribute__((aligned(CACHELINE))) lockstat_slots[LOCKSTAT_SLOTS];

struct lockstat_switch lockstat_switch __attribute__((aligned(CACHELINE)));

uint64_t lockstat_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void max_update(_Atomic uint64_t *m, uint64_t v)
{
	uint64_t old = atomic_load_explicit(m, memory_order_relaxed);

	while (v > old && !atomic_compare_exchange_weak_explicit(m, &old, v, memory_order_relaxed,
								 memory_order_relaxed))
		;
}

void lockstat_count(int cls, int contended, uint64_t wait_ns)
{
	struct lockstat_counts *c;

	if ((unsigned)cls >= LOCKSTAT_NCLASSES)
		cls = LOCKSTAT_OTHER;
	c = &lockstat_slots[thread_slot() % LOCKSTAT_SLOTS].c[cls];
	atomic_fetch_add_explicit(&c->acquired, 1, memory_order_relaxed);
	if (!contended)
		return;
	atomic_fetch_add_explicit(&c->contended, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&c->wait_ns, wait_ns, memory_order_relaxed);
	max_update(&c->wait_max_ns, wait_ns);
}

static int try_lock(void *lock, int mode)
{
	switch (mode) {
	case LOCKSTAT_READ: return pthread_rwlock_tryrdlock(lock) == 0;
	case LOCKSTAT_WRITE: return pthread_rwlock_trywrlock(lock) == 0;
	default: return pthread_mutex_trylock(lock) == 0;
	}
}

static void block_lock(void *lock, int mode)
{
	switch (mode) {
	case LOCKSTAT_READ: pthread_rwlock_rdlock(lock); break;
	case LOCKSTAT_WRITE: pthread_rwlock_wrlock(lock); break;
	default: pthread_mutex_lock(lock); break;
	}
}

/* Statistics on: a try first, so only a lock that was not free reads the
 * clock, around the blocking call (which for an adaptive mutex spins a
 * little first: the wait includes the spin). */
void lockstat_lock_slow(void *lock, int mode, int cls)
{
	uint64_t t0;

	if (try_lock(lock, mode)) {
		lockstat_count(cls, 0, 0);
		return;
	}
	t0 = lockstat_now_ns();
	block_lock(lock, mode);
	lockstat_count(cls, 1, lockstat_now_ns() - t0);
}

void lockstat_pthread_lock(pthread_mutex_t *m, int cls)
{
	if (lockstat_on())
		lockstat_lock_slow(m, LOCKSTAT_MUTEX, cls);
	else
		pthread_mutex_lock(m);
}

static const char *const class_names[LOCKSTAT_NCLASSES] = {
	[LOCKSTAT_OTHER] = "other",
	[LOCKSTAT_RENAME] = "rename",
	[LOCKSTAT_INODE] = "inode",
	[LOCKSTAT_DIR] = "directory",
	[LOCKSTAT_COMMIT] = "commit",
	[LOCKSTAT_EA_INODE] = "ea_inode",
	[LOCKSTAT_ICACHE] = "icache_shard",
	[LOCKSTAT_GROUP] = "group",
	[LOCKSTAT_ORPHAN_LIST] = "orphan_list",
	[LOCKSTAT_ORPHAN_FILE] = "orphan_file",
	[LOCKSTAT_XATTR_INDEX] = "xattr_index",
	[LOCKSTAT_BUF] = "buffer",
	[LOCKSTAT_BCACHE] = "bcache_shard",
	[LOCKSTAT_TRANS] = "trans_wait",
	[LOCKSTAT_REVOKE] = "revoke_list",
	[LOCKSTAT_INODE_RAW] = "inode_raw",
	[LOCKSTAT_LEAF] = "leaf",
	[LOCKSTAT_DIR_LEAF] = "dir_leaf",
	[LOCKSTAT_DIR_ATTR] = "dir_attr",
};

_Static_assert(LOCKSTAT_NCLASSES <= UEXT4_LOCK_CLASSES, "uext4.h has room for every class");

void lockstat_read(struct uext4_lock_stats *out, unsigned *n)
{
	for (unsigned k = 0; k < LOCKSTAT_NCLASSES; k++) {
		struct uext4_lock_stats *o = &out[k];

		memset(o, 0, sizeof(*o));
		o->name = class_names[k];
		for (unsigned i = 0; i < LOCKSTAT_SLOTS; i++) {
			struct lockstat_counts *c = &lockstat_slots[i].c[k];
			uint64_t m = atomic_load_explicit(&c->wait_max_ns, memory_order_relaxed);

			o->acquisitions += atomic_load_explicit(&c->acquired, memory_order_relaxed);
			o->contentions += atomic_load_explicit(&c->contended, memory_order_relaxed);
			o->wait_ns += atomic_load_explicit(&c->wait_ns, memory_order_relaxed);
			o->wait_max_ns = MAX(o->wait_max_ns, m);
		}
	}
	*n = LOCKSTAT_NCLASSES;
}

void lockstat_reset(void)
{
	for (unsigned i = 0; i < LOCKSTAT_SLOTS; i++)
		for (unsigned k = 0; k < LOCKSTAT_NCLASSES; k++) {
			struct lockstat_counts *c = &lockstat_slots[i].c[k];

			atomic_store_explicit(&c->acquired, 0, memory_order_relaxed);
			atomic_store_explicit(&c->contended, 0, memory_order_relaxed);
			atomic_store_explicit(&c->wait_ns, 0, memory_order_relaxed);
			atomic_store_explicit(&c->wait_max_ns, 0, memory_order_relaxed);
		}
}

#ifdef UEXT4_LOCKDEP
#define LOCKDEP_MAX_HELD 32

/* Locks this thread holds, in acquisition order. */
static _Thread_local struct {
	int rank;
	const void *lock;
} held[LOCKDEP_MAX_HELD];
static _Thread_local int nheld;

void lockdep_acquire(int rank, const void *lock)
{
	for (int i = 0; i < nheld; i++) {
		if (held[i].rank >= rank) {
			fprintf(stderr,
				"uext4 lockdep: lock order inversion: taking rank %d (%p) "
				"while holding rank %d (%p)\n",
				rank, lock, held[i].rank, held[i].lock);
			abort();
		}
	}
	if (nheld == LOCKDEP_MAX_HELD) {
		fprintf(stderr, "uext4 lockdep: more than %d locks held\n", LOCKDEP_MAX_HELD);
		abort();
	}
	held[nheld].rank = rank;
	held[nheld].lock = lock;
	nheld++;
}

void lockdep_release(int rank, const void *lock)
{
	for (int i = nheld - 1; i >= 0; i--) {
		if (held[i].lock == lock && held[i].rank == rank) {
			for (int j = i; j < nheld - 1; j++)
				held[j] = held[j + 1];
			nheld--;
			return;
		}
	}
	fprintf(stderr, "uext4 lockdep: releasing rank %d (%p) that is not held\n", rank, lock);
	abort();
}
#endif
