/*
 * lock.h - the locks of libuext4, with ranks checked in debug builds.
 *
 * Every lock has a rank from enum lock_rank.  A thread may only take a lock
 * whose rank is strictly greater than every lock it already holds (the lock
 * order of ARCHITECTURE.md).  With -DUEXT4_LOCKDEP (debug builds) each
 * acquisition is checked against a thread-local stack of held ranks and an
 * inversion aborts with both ranks named, so a test fails at once.
 *
 * Short critical sections use adaptive mutexes, which spin briefly before
 * sleeping: seed 001 found btrfs losing most of its dbench throughput to
 * threads that slept on locks a short spin would have won.
 */
#ifndef UEXT4_LOCK_H
#define UEXT4_LOCK_H

#include <pthread.h>

enum lock_rank {
	RANK_NONE = 0,
	RANK_INODE = 10,        /* struct inode.lock (rwlock), outer */
	RANK_INODE_CHILD = 11,  /* a second inode lock, by inode number order */
	RANK_ICACHE_SHARD = 20, /* inode cache hash shard */
	RANK_BUF = 30,          /* struct buf.lock: I/O and contents of one block */
	RANK_BCACHE_SHARD = 40, /* buffer cache hash shard + its LRU */
	RANK_LEAF = 90,         /* leaf locks that never nest anything */
};

struct ulock {
	pthread_mutex_t m;
	int rank;
};

struct urwlock {
	pthread_rwlock_t rw;
	int rank;
};

void ulock_init(struct ulock *l, int rank);
void ulock_destroy(struct ulock *l);
void urwlock_init(struct urwlock *l, int rank);
void urwlock_destroy(struct urwlock *l);

#ifdef UEXT4_LOCKDEP
void lockdep_acquire(int rank, const void *lock);
void lockdep_release(int rank, const void *lock);
#else
static inline void lockdep_acquire(int rank, const void *lock) { (void)rank; (void)lock; }
static inline void lockdep_release(int rank, const void *lock) { (void)rank; (void)lock; }
#endif

static inline void ulock_lock(struct ulock *l)
{
	lockdep_acquire(l->rank, l);
	pthread_mutex_lock(&l->m);
}

/* Non-blocking: cannot deadlock, so only recorded when it succeeds. */
static inline int ulock_trylock(struct ulock *l)
{
	if (pthread_mutex_trylock(&l->m) != 0)
		return 0;
	lockdep_acquire(l->rank, l);
	return 1;
}

static inline void ulock_unlock(struct ulock *l)
{
	pthread_mutex_unlock(&l->m);
	lockdep_release(l->rank, l);
}

static inline void urw_rdlock(struct urwlock *l)
{
	lockdep_acquire(l->rank, l);
	pthread_rwlock_rdlock(&l->rw);
}

static inline void urw_wrlock(struct urwlock *l)
{
	lockdep_acquire(l->rank, l);
	pthread_rwlock_wrlock(&l->rw);
}

static inline void urw_unlock(struct urwlock *l)
{
	pthread_rwlock_unlock(&l->rw);
	lockdep_release(l->rank, l);
}

#endif
