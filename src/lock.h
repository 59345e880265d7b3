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
#include <stdatomic.h>
#include <stdint.h>

enum lock_rank {
	RANK_NONE = 0,
	RANK_RENAME = 5,        /* fs-wide: cross-directory rename of a directory */
	RANK_INODE = 10,        /* struct inode.lock (rwlock), outer */
	RANK_INODE_CHILD = 11,  /* a second inode lock, by inode number order */
	RANK_INODE_3 = 12,      /* third and fourth (rename), by inode number order */
	RANK_INODE_4 = 13,
	RANK_HANDLE = 15,       /* an open transaction handle (trans.c): no inode
				 * lock may be taken while a handle is open */
	RANK_DIR_LEAF = 16,     /* htree leaf-block lock (htree.c), under a shared
				 * dir->lock; inside a handle, since lookups in
				 * undo paths read leaves with a handle open */
	RANK_EA_INODE = 17,
	RANK_DIR_ATTR = 18,     /* directory mtime/ctime stripe (dirtimes.c): shared
				 * writers of one directory */     /* EA inode lock shard (ea_inode.c): an xattr value's inode */
	RANK_QUOTA = 19,        /* quota.c: the quota files' trees (a new id's entry) */
	RANK_ICACHE_SHARD = 20, /* inode cache hash shard */
	RANK_GROUP = 25,        /* struct group_info.lock: one group's counters and bitmaps */
	RANK_XATTR_INDEX = 27,  /* shared-xattr-block index */
	RANK_BUF = 30,          /* struct buf.lock: I/O and contents of one block */
	RANK_BCACHE_SHARD = 40, /* buffer cache hash shard + its LRU */
	RANK_TRANS = 50,        /* trans.c internal state */
	RANK_ERRORS = 85,       /* error.c's state: held across the superblock
	                         * write of an error, so the device's own leaf
	                         * locks (crash recorder, fault device) nest in it */
	RANK_LEAF = 90,         /* leaf locks that never nest anything */
};

/*
 * Lock statistics (counted in lock.c, reported by stats.c): every lock
 * belongs to a class, named in the report.  The class comes from the rank
 * at init; inode.c moves a directory's inode lock to LOCKSTAT_DIR.  What
 * is not a ulock (trans.c's wait and revoke mutexes, the inode's raw spin
 * lock, the orphan file's entry CAS) is counted through
 * lockstat_pthread_lock() or lockstat_count().
 */
enum lockstat_class {
	LOCKSTAT_OTHER = 0,
	LOCKSTAT_RENAME,        /* RANK_RENAME */
	LOCKSTAT_INODE,         /* RANK_INODE..RANK_INODE_4, not a directory */
	LOCKSTAT_DIR,           /* the same, of a directory */
	LOCKSTAT_COMMIT,        /* RANK_HANDLE: trans.c's commit lock */
	LOCKSTAT_EA_INODE,      /* RANK_EA_INODE */
	LOCKSTAT_ICACHE,        /* RANK_ICACHE_SHARD */
	LOCKSTAT_GROUP,         /* RANK_GROUP */
	LOCKSTAT_ORPHAN_LIST,   /* rank 26 (orphan.h) */
	LOCKSTAT_ORPHAN_FILE,   /* orphan file entries, claimed by CAS (no lock):
				 * a claim whose CAS lost to another thread contends */
	LOCKSTAT_XATTR_INDEX,   /* RANK_XATTR_INDEX */
	LOCKSTAT_BUF,           /* RANK_BUF */
	LOCKSTAT_BCACHE,        /* RANK_BCACHE_SHARD */
	LOCKSTAT_TRANS,         /* trans.c's wait_lock (handles and committer) */
	LOCKSTAT_REVOKE,        /* trans.c's per-slot revoke lists */
	LOCKSTAT_INODE_RAW,     /* inode.c's slot locks (inode-table slot bytes) */
	LOCKSTAT_LEAF,          /* RANK_LEAF: slab, errors, crash devices */
	LOCKSTAT_DIR_LEAF,      /* RANK_DIR_LEAF: htree leaf-block locks */
	LOCKSTAT_DIR_ATTR,      /* RANK_DIR_ATTR: directory mtime/ctime stripes */
	LOCKSTAT_NCLASSES
};

struct ulock {
	pthread_mutex_t m;
	int rank;
	uint8_t stat_class;     /* enum lockstat_class; set at init */
};

struct urwlock {
	pthread_rwlock_t rw;
	int rank;
	uint8_t stat_class;     /* enum lockstat_class; set at init */
};

/* A small number of the calling thread, fixed for its life: the index of
 * its shard in per-thread counters, slabs and drain counters. */
unsigned thread_slot(void);
void ulock_init(struct ulock *l, int rank);
void ulock_destroy(struct ulock *l);
void urwlock_init(struct urwlock *l, int rank);
void urwlock_destroy(struct urwlock *l);

/*
 * Statistics switch: the number of mounts with statistics on (lock
 * classes are counted process-wide, as the kernel's lock_stat is
 * system-wide).  Off, an acquisition costs one relaxed load of this line,
 * which is written only when statistics are switched.  On, the lock is
 * tried first; only a failed try reads the clock around the blocking call.
 */
extern struct lockstat_switch {
	_Atomic int on;
	char pad[64 - sizeof(int)];
} lockstat_switch;

static inline int lockstat_on(void)
{
	return __builtin_expect(atomic_load_explicit(&lockstat_switch.on, memory_order_relaxed), 0);
}

enum lockstat_mode { LOCKSTAT_MUTEX, LOCKSTAT_READ, LOCKSTAT_WRITE };
void lockstat_lock_slow(void *lock, int mode, int cls);
/* One turn of a spin-wait: tells the CPU (and a hypervisor) we spin. */
static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

/* A pthread mutex that is not a ulock, counted in class cls. */
void lockstat_pthread_lock(pthread_mutex_t *m, int cls);
/* A spin lock (test-and-set loop): the acquisition, and a contended one
 * that spun for ns nanoseconds. */
void lockstat_count(int cls, int contended, uint64_t wait_ns);
uint64_t lockstat_now_ns(void);
/* A directory's inode lock is counted apart from other inodes'. */
static inline void urwlock_set_stat_class(struct urwlock *l, int cls)
{
	l->stat_class = (uint8_t)cls;
}

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
	if (lockstat_on())
		lockstat_lock_slow(&l->m, LOCKSTAT_MUTEX, l->stat_class);
	else
		pthread_mutex_lock(&l->m);
}

/* Non-blocking: cannot deadlock, so only recorded when it succeeds. */
static inline int ulock_trylock(struct ulock *l)
{
	if (pthread_mutex_trylock(&l->m) != 0)
		return 0;
	if (lockstat_on())
		lockstat_count(l->stat_class, 0, 0);
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
	if (lockstat_on())
		lockstat_lock_slow(&l->rw, LOCKSTAT_READ, l->stat_class);
	else
		pthread_rwlock_rdlock(&l->rw);
}

static inline void urw_wrlock(struct urwlock *l)
{
	lockdep_acquire(l->rank, l);
	if (lockstat_on())
		lockstat_lock_slow(&l->rw, LOCKSTAT_WRITE, l->stat_class);
	else
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
	if (lockstat_on())
		lockstat_lock_slow(&l->rw, LOCKSTAT_READ, l->stat_class);
	else
		pthread_rwlock_rdlock(&l->rw);
}

static inline void urw_wrlock_as(struct urwlock *l, int rank)
{
	lockdep_acquire(rank, l);
	if (lockstat_on())
		lockstat_lock_slow(&l->rw, LOCKSTAT_WRITE, l->stat_class);
	else
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

struct uext4_lock_stats;
/* lock.c: the lock classes' counters, summed over the thread slots. */
void lockstat_read(struct uext4_lock_stats *out, unsigned *n);
void lockstat_reset(void);

#endif
