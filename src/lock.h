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
	RANK_RENAME = 5,        /* fs-wide: cross-directory rename of a directory */
	RANK_INODE = 10,        /* struct inode.lock (rwlock), outer */
	RANK_INODE_CHILD = 11,  /* a second inode lock, by inode number order */
	RANK_INODE_3 = 12,      /* third and fourth (rename), by inode number order */
	RANK_INODE_4 = 13,
	RANK_HANDLE = 15,       /* an open transaction handle (trans.c): no inode
				 * lock may be taken while a handle is open */
	RANK_EA_INODE = 17,     /* EA inode lock shard (ea_inode.c): an xattr value's inode */
	RANK_ICACHE_SHARD = 20, /* inode cache hash shard */
	RANK_GROUP = 25,        /* struct group_info.lock: one group's counters and bitmaps */
	RANK_XATTR_INDEX = 27,  /* shared-xattr-block index */
	RANK_BUF = 30,          /* struct buf.lock: I/O and contents of one block */
	RANK_BCACHE_SHARD = 40, /* buffer cache hash shard + its LRU */
	RANK_TRANS = 50,        /* trans.c internal state */
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

/*
 * The same rwlock taken at another rank: several inodes are locked in
 * inode-number order (rename, link, unlink), the first at RANK_INODE, the
 * next at RANK_INODE_CHILD, and so on; unlock with the rank it was taken at.
 */
static inline void urw_rdlock_as(struct urwlock *l, int rank)
{
	lockdep_acquire(rank, l);
	pthread_rwlock_rdlock(&l->rw);
}

static inline void urw_wrlock_as(struct urwlock *l, int rank)
{
	lockdep_acquire(rank, l);
	pthread_rwlock_wrlock(&l->rw);
}

static inline void urw_unlock_as(struct urwlock *l, int rank)
{
	pthread_rwlock_unlock(&l->rw);
	lockdep_release(rank, l);
}

/* Record that the thread entered or left a non-lock section of a rank
 * (an open transaction handle), so lockdep checks what is taken inside. */
static inline void lockdep_enter(int rank, const void *what) { lockdep_acquire(rank, what); }
static inline void lockdep_leave(int rank, const void *what) { lockdep_release(rank, what); }

#endif
