/*
 * dirtimes.c - a directory's mtime and ctime under parallel changes
 * (dirtimes.h).
 *
 * Creates and unlinks in a large directory run with the directory's lock
 * shared (dir.c, htree.c), so its times cannot be guarded by that lock:
 * a stripe of locks with seqcounts, hashed by inode number, serialises the
 * writers and lets stat (inode.c) read both times consistently without a
 * lock.  Its own file in the objects layer, below both its writers (the
 * namespace) and its reader (the inode's stat).
 *
 * What protects what: dir_attr_locks[i].l (RANK_DIR_ATTR) serialises the
 * writers of the directories hashed to stripe i; .seq is odd while one
 * writes.  The times themselves are written with atomic stores under the
 * stripe lock (or under the directory's lock held for writing, elsewhere)
 * and read with atomic loads.
 */
#include "dirtimes.h"
#include "inode.h"
#include "internal.h"
#include "lock.h"

#include <pthread.h>
#include <sched.h>

#define DIR_ATTR_STRIPES 256

/* Parallel creates and unlinks in a directory change its times with its
 * lock shared, so they serialise on a stripe's lock; stat reads the times
 * with no lock, through the stripe's seqcount (as the name cache does:
 * acquire loads, release stores, so no fence and no data race). */
static struct dir_attr_stripe {
	_Alignas(64) struct ulock l;    /* a line each: no false sharing */
	_Atomic uint32_t seq;           /* odd while l's holder changes times */
} dir_attr_locks[DIR_ATTR_STRIPES];
static pthread_once_t dir_attr_once = PTHREAD_ONCE_INIT;

static void dir_attr_init(void)
{
	for (unsigned i = 0; i < DIR_ATTR_STRIPES; i++)
		ulock_init(&dir_attr_locks[i].l, RANK_DIR_ATTR);
}

static struct dir_attr_stripe *dir_attr_stripe(const struct inode *dir)
{
	pthread_once(&dir_attr_once, dir_attr_init);
	return &dir_attr_locks[(dir->ino * 0x9e3779b97f4a7c15ull >> 40) % DIR_ATTR_STRIPES];
}

static void store_time(struct timespec *t, struct timespec v)
{
	__atomic_store_n(&t->tv_sec, v.tv_sec, __ATOMIC_RELEASE);
	__atomic_store_n(&t->tv_nsec, v.tv_nsec, __ATOMIC_RELEASE);
}

static struct timespec load_time(const struct timespec *t)
{
	return (struct timespec){ .tv_sec = __atomic_load_n(&t->tv_sec, __ATOMIC_ACQUIRE),
				  .tv_nsec = __atomic_load_n(&t->tv_nsec, __ATOMIC_ACQUIRE) };
}

void dirtimes_read(const struct inode *dir, struct timespec *mtime, struct timespec *ctime)
{
	struct dir_attr_stripe *s = dir_attr_stripe(dir);

	for (unsigned tries = 0;; tries++) {
		uint32_t q = atomic_load_explicit(&s->seq, memory_order_acquire);

		if (!(q & 1)) {
			*mtime = load_time(&dir->mtime);
			*ctime = load_time(&dir->ctime);
			if (atomic_load_explicit(&s->seq, memory_order_acquire) == q)
				return;
		}
		if (tries >= 64)
			sched_yield(); /* the writer was preempted in its few stores */
	}
}

int dirtimes_touch_shared(struct handle *h, struct inode *dir)
{
	struct dir_attr_stripe *s = dir_attr_stripe(dir);
	struct timespec now;
	uint32_t q;
	int err;

	ulock_lock(&s->l);
	now = fs_time(h->fs); /* under the lock: the times never go back */
	q = atomic_load_explicit(&s->seq, memory_order_relaxed);
	atomic_store_explicit(&s->seq, q + 1, memory_order_relaxed);
	store_time(&dir->mtime, now);
	store_time(&dir->ctime, now);
	atomic_store_explicit(&s->seq, q + 2, memory_order_release);
	err = inode_write(h, dir);
	ulock_unlock(&s->l);
	return err;
}
