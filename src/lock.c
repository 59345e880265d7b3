/*
 * lock.c - lock initialisation and the debug-build lock-order validator.
 */
#include "lock.h"

#include <stdio.h>
#include <stdlib.h>

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
}

void ulock_destroy(struct ulock *l)
{
	pthread_mutex_destroy(&l->m);
}

void urwlock_init(struct urwlock *l, int rank)
{
	pthread_rwlock_init(&l->rw, NULL);
	l->rank = rank;
}

void urwlock_destroy(struct urwlock *l)
{
	pthread_rwlock_destroy(&l->rw);
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
