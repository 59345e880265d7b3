/*
 * orphan_concur.c - concurrent orphan_add/orphan_del (run by
 * tests/orphan_concur.sh, also under TSan).
 *
 *   orphan_concur IMG THREADS ROUNDS HOLD [SEED]
 *
 * Each thread:
 *  1. stress-orphan (seed 000): truncates its own 4 KiB file down in steps
 *     (each shrinking truncate puts the inode on an orphan list and takes
 *     it off again), then extends it again, ROUNDS times;
 *  2. holds HOLD of its own inodes on the orphan lists at once (more than
 *     the orphan file holds when the script makes it small, so the legacy
 *     list takes the rest), then takes them off in a random order, so list
 *     neighbours belong to other threads.
 * Then checks that both lists are empty and every file has its size.
 */
#include "icache.h"
#include "inode.h"
#include "internal.h"
#include "lock.h"
#include "ondisk.h"
#include "orphan.h"
#include "trans.h"
#include "uext4.h"
#include "t.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static uext4_fs *fs;
static unsigned rounds, hold;
static unsigned seed;
static pthread_barrier_t held;
static struct orphan_stats at_peak; /* written by thread 0 between barriers */

/* Other threads wait at a barrier: stop the process. */
static void fatal(const char *what, int err)
{
	t_fail_call(what, err);
	fflush(stdout);
	exit(1);
}

static int set_size(uint64_t ino, uint64_t size)
{
	struct uext4_setattr a = {.valid = UEXT4_SET_SIZE, .size = size};

	return uext4_setattr(fs, ino, &a, NULL);
}

static void stress_orphan(unsigned t)
{
	char name[32], buf[4096];
	struct uext4_stat st;
	uext4_file *f;
	int err;

	snprintf(name, sizeof(name), "s%u", t);
	memset(buf, 'a' + (int)(t % 26), sizeof(buf));
	if ((err = uext4_create(fs, UEXT4_ROOT_INO, name, 0644, &st)) ||
	    (err = uext4_open(fs, st.ino, O_RDWR, &f)))
		{ t_fail_call("create", err); return; }
	for (unsigned r = 0; r < rounds; r++) {
		if (uext4_pwrite(f, buf, sizeof(buf), 0) != (ssize_t)sizeof(buf))
			{ t_fail_call("extend", -EIO); return; }
		for (uint64_t size = sizeof(buf); size > 1;)
			if ((err = set_size(st.ino, size -= MIN(size - 1, 61))))
				{ t_fail_call("truncate", err); return; }
	}
	uext4_release(f);
}

/* orphan_add or orphan_del in a handle of its own, inode locked first. */
static int orphan_op(struct inode *n, bool add)
{
	struct handle *h;
	int err, e2;

	urw_wrlock(&n->lock);
	if ((err = handle_begin(fs, &h))) {
		urw_unlock(&n->lock);
		return err;
	}
	err = add ? orphan_add(h, n) : orphan_del(h, n);
	e2 = handle_end(h);
	urw_unlock(&n->lock);
	return err ? err : e2;
}

static void hold_many(unsigned t)
{
	struct inode **inodes = calloc(hold, sizeof(*inodes));
	unsigned *order = calloc(hold, sizeof(*order));
	unsigned rs = seed ^ (t * 0x9E3779B9u);
	int err;

	for (unsigned i = 0; i < hold; i++) {
		struct uext4_stat st;
		char name[32];

		snprintf(name, sizeof(name), "h%u.%u", t, i);
		if ((err = uext4_create(fs, UEXT4_ROOT_INO, name, 0644, &st)) ||
		    (err = iget(fs, st.ino, &inodes[i])))
			fatal("create", err);
		if ((err = orphan_op(inodes[i], true)))
			fatal("orphan_add", err);
		order[i] = i;
	}
	/* Everybody holds all of theirs: how were they spread? */
	pthread_barrier_wait(&held);
	if (t == 0)
		orphan_get_stats(fs, &at_peak);
	pthread_barrier_wait(&held);
	for (unsigned i = hold; i > 1; i--) {
		unsigned j = (unsigned)rand_r(&rs) % i, x = order[i - 1];

		order[i - 1] = order[j];
		order[j] = x;
	}
	for (unsigned i = 0; i < hold; i++) {
		struct inode *n = inodes[order[i]];

		if ((err = orphan_op(n, false)))
			t_fail_call("orphan_del", err);
		if (atomic_load(&n->istate) & (INODE_ORPHAN_FILE | INODE_ORPHAN_LIST))
			t_fail_call("still on a list after orphan_del", -EINVAL);
		iput(fs, n);
	}
	free(inodes);
	free(order);
}

static void *worker(void *arg)
{
	unsigned t = (unsigned)(uintptr_t)arg;

	stress_orphan(t);
	hold_many(t);
	return NULL;
}

int main(int argc, char **argv)
{
	struct uext4_opts o = {0};
	struct orphan_stats os;
	unsigned nthreads;
	pthread_t tid[64];
	int err;

	if (argc < 5) {
		fprintf(stderr, "usage: orphan_concur IMG THREADS ROUNDS HOLD [SEED]\n");
		return 2;
	}
	nthreads = MIN((unsigned)atoi(argv[2]), 64u);
	rounds = (unsigned)atoi(argv[3]);
	hold = (unsigned)atoi(argv[4]);
	seed = argc > 5 ? (unsigned)strtoul(argv[5], NULL, 0) : (unsigned)time(NULL);
	printf("seed=%u threads=%u rounds=%u hold=%u\n", seed, nthreads, rounds, hold);
	if ((err = uext4_mount(argv[1], &o, &fs))) {
		t_fail_call("mount", err);
		return 1;
	}
	orphan_get_stats(fs, &os);
	printf("orphan file: %u blocks, %u entries\n", os.file_blocks, os.file_capacity);
	pthread_barrier_init(&held, NULL, nthreads);
	for (unsigned t = 0; t < nthreads; t++)
		pthread_create(&tid[t], NULL, worker, (void *)(uintptr_t)t);
	for (unsigned t = 0; t < nthreads; t++)
		pthread_join(tid[t], NULL);
	printf("peak: %u in the orphan file, %u on the legacy list\n",
	       at_peak.file_capacity - at_peak.file_free, at_peak.list_len);
	if (at_peak.file_capacity - at_peak.file_free + at_peak.list_len != nthreads * hold)
		t_fail_call("held orphans miscounted", -EINVAL);
	if (nthreads * hold > at_peak.file_capacity && at_peak.list_len !=
	    nthreads * hold - at_peak.file_capacity)
		t_fail_call("full orphan file did not fall back to the list", -EINVAL);
	orphan_get_stats(fs, &os);
	printf("after: orphan file %u/%u free, legacy list %u, s_last_orphan %u\n", os.file_free,
	       os.file_capacity, os.list_len, le32(fs->sb.s_last_orphan));
	if (os.file_free != os.file_capacity || os.list_len || le32(fs->sb.s_last_orphan))
		t_fail_call("orphan lists not empty", -EINVAL);
	for (unsigned t = 0; t < nthreads; t++) {
		struct uext4_stat st;
		char name[32];

		snprintf(name, sizeof(name), "s%u", t);
		if ((err = uext4_lookup(fs, UEXT4_ROOT_INO, name, &st)) || st.size != 1)
			t_fail_call("stress file size", err ? err : -EINVAL);
	}
	if ((err = uext4_umount(fs)))
		t_fail_call("umount", err);
	printf("%s\n", t_failures ? "FAILED" : "passed");
	return t_failures ? 1 : 0;
}
