/*
 * pardir_concur.c - parallel operations inside one htree directory (run
 * by tests/pardir_concur.sh, also under TSan).
 *
 *   pardir_concur IMG THREADS FILES SEED EXPECTED_OUT
 *
 * In one directory "d", made an htree first by PRE long names:
 *  1. THREADS threads each create FILES names of their own, looking each
 *     up at once (it must be there, with the inode the create returned)
 *     and looking up a name of another thread (either absent or a
 *     regular file); all threads also race to create the same COLLIDE
 *     names: each name has exactly one winner, every other attempt gets
 *     EEXIST;
 *  2. each thread unlinks every third of its names, renames every third
 *     + 1 to "r..." within "d", and checks each change by lookups; all
 *     race to unlink the colliding names: exactly one unlink of each wins,
 *     the others get ENOENT;
 *  3. half the threads make files and rename them over SWAP shared names,
 *     the other half unlink those names: an unlink whose lookup found
 *     the inode that a rename then replaced starts over, so it gets 0 or
 *     ENOENT, never ESTALE; what is left is unlinked at the end (e2fsck
 *     then finds every inode freed);
 *  meanwhile a reader thread looks the PRE names up again and again (each
 *  must always be found, with its inode: lookups run beside inserts in
 *  the same leaves), lists the directory (no name twice, every PRE
 *  name present) and stats it (mtime and ctime, set together by every
 *  change, must agree: no torn read).
 * Then the listing must be exactly the expected names, which are written
 * to EXPECTED_OUT (sorted) for the script to compare with the kernel.
 */
#include "uext4.h"
#include "t.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PRE 400
#define COLLIDE 64
#define MAXT 64
#define EXT4_INDEX_FL 0x1000u

static uext4_fs *fs;
static uint64_t dino;
static unsigned nthreads, nfiles, seed;
static uint64_t pre_ino[PRE];
static _Atomic int writers_left;
static _Atomic unsigned collide_wins[COLLIDE], unlink_wins[COLLIDE];
static pthread_barrier_t phase;

/* Long names fill leaves quickly, so the test splits leaves too. */
static void pre_name(char *b, size_t n, unsigned i)
{
	snprintf(b, n, "pre-%04u-a-long-name-that-fills-htree-leaves-quickly", i);
}

static void own_name(char *b, size_t n, unsigned t, unsigned i)
{
	snprintf(b, n, "t%02u-%06u-some-padding-for-longer-names", t, i);
}

static void renamed_name(char *b, size_t n, unsigned t, unsigned i)
{
	snprintf(b, n, "r%02u-%06u-renamed", t, i);
}

static void collide_name(char *b, size_t n, unsigned k)
{
	snprintf(b, n, "collide-%03u", k);
}

static uint64_t rnd(uint64_t *s)
{
	return t_rnd(s);
}

static void create_phase(unsigned t, uint64_t *ino, uint64_t *rs)
{
	char name[128];
	struct uext4_stat st;
	int err;

	for (unsigned i = 0; i < nfiles; i++) {
		own_name(name, sizeof(name), t, i);
		err = uext4_create(fs, dino, name, 0644, &st);
		CHECK_ERR(err == 0, "create %s: %d", name, err);
		ino[i] = err ? 0 : st.ino;
		err = uext4_lookup(fs, dino, name, &st);
		CHECK_ERR(err == 0 && st.ino == ino[i], "lookup %s after create: %d ino %llu want %llu",
		      name, err, (unsigned long long)st.ino, (unsigned long long)ino[i]);
		own_name(name, sizeof(name), rnd(rs) % nthreads, rnd(rs) % nfiles);
		err = uext4_lookup(fs, dino, name, &st);
		CHECK_ERR(err == -ENOENT || (err == 0 && S_ISREG(st.mode)), "lookup %s: %d", name, err);
		if (i % 8 == 0) {
			unsigned k = (i / 8 + t) % COLLIDE;

			collide_name(name, sizeof(name), k);
			err = uext4_create(fs, dino, name, 0600, NULL);
			CHECK_ERR(err == 0 || err == -EEXIST, "create %s: %d", name, err);
			if (err == 0)
				atomic_fetch_add(&collide_wins[k], 1);
		}
	}
	/* Every colliding name tried by every thread. */
	for (unsigned k = 0; k < COLLIDE; k++) {
		collide_name(name, sizeof(name), (k + t) % COLLIDE);
		err = uext4_create(fs, dino, name, 0600, NULL);
		CHECK_ERR(err == 0 || err == -EEXIST, "create %s: %d", name, err);
		if (err == 0)
			atomic_fetch_add(&collide_wins[(k + t) % COLLIDE], 1);
	}
}

static void change_phase(unsigned t, const uint64_t *ino)
{
	char name[128], to[128];
	struct uext4_stat st;
	int err;

	for (unsigned i = 0; i < nfiles; i++) {
		own_name(name, sizeof(name), t, i);
		if (i % 3 == 0) {
			err = uext4_unlink(fs, dino, name);
			CHECK_ERR(err == 0, "unlink %s: %d", name, err);
			err = uext4_lookup(fs, dino, name, &st);
			CHECK_ERR(err == -ENOENT, "lookup %s after unlink: %d", name, err);
		} else if (i % 3 == 1) {
			renamed_name(to, sizeof(to), t, i);
			err = uext4_rename(fs, dino, name, dino, to, 0);
			CHECK_ERR(err == 0, "rename %s: %d", name, err);
			err = uext4_lookup(fs, dino, name, &st);
			CHECK_ERR(err == -ENOENT, "lookup %s after rename: %d", name, err);
			err = uext4_lookup(fs, dino, to, &st);
			CHECK_ERR(err == 0 && st.ino == ino[i], "lookup %s after rename: %d", to, err);
		}
		if (i % 8 == 0) {
			unsigned k = (i / 8 + t) % COLLIDE;

			collide_name(name, sizeof(name), k);
			err = uext4_unlink(fs, dino, name);
			CHECK_ERR(err == 0 || err == -ENOENT, "unlink %s: %d", name, err);
			if (err == 0)
				atomic_fetch_add(&unlink_wins[k], 1);
		}
	}
	for (unsigned k = 0; k < COLLIDE; k++) {
		collide_name(name, sizeof(name), (k + t) % COLLIDE);
		err = uext4_unlink(fs, dino, name);
		CHECK_ERR(err == 0 || err == -ENOENT, "unlink %s: %d", name, err);
		if (err == 0)
			atomic_fetch_add(&unlink_wins[(k + t) % COLLIDE], 1);
	}
}

#define SWAP 2

static void swap_name(char *b, size_t n, unsigned k)
{
	snprintf(b, n, "swap-%u", k);
}

/* Phase 3: even threads rename new files over the SWAP names, odd ones
 * unlink them. */
static void swap_phase(unsigned t, uint64_t *rs)
{
	char name[128], tmp[128];
	struct uext4_stat st;
	int err;

	for (unsigned i = 0; i < nfiles; i++) {
		swap_name(name, sizeof(name), rnd(rs) % SWAP);
		if (t % 2 == 1 && nthreads > 1) {
			err = uext4_unlink(fs, dino, name);
			CHECK_ERR(err == 0 || err == -ENOENT, "unlink %s (renamed over meanwhile): %d",
			      name, err);
			continue;
		}
		snprintf(tmp, sizeof(tmp), "swap-tmp-%02u", t);
		err = uext4_create(fs, dino, tmp, 0644, &st);
		CHECK_ERR(err == 0, "create %s: %d", tmp, err);
		err = uext4_rename(fs, dino, tmp, dino, name, 0);
		CHECK_ERR(err == 0, "rename %s over %s: %d", tmp, name, err);
	}
}

static void *writer(void *arg)
{
	unsigned t = (unsigned)(uintptr_t)arg;
	uint64_t rs = (uint64_t)seed + t * 7919u + 1;
	uint64_t *ino = calloc(nfiles, sizeof(*ino));

	create_phase(t, ino, &rs);
	pthread_barrier_wait(&phase);
	change_phase(t, ino);
	pthread_barrier_wait(&phase);
	swap_phase(t, &rs);
	free(ino);
	atomic_fetch_sub(&writers_left, 1);
	return NULL;
}

/* ------------------------------------------------------------ the reader */

struct listing {
	char **names;
	size_t n, cap;
};

static int collect(void *ctx, const char *name, size_t len, uint64_t ino, unsigned dtype,
		   uint64_t next)
{
	struct listing *l = ctx;

	(void)ino, (void)dtype, (void)next;
	if ((len == 1 && name[0] == '.') || (len == 2 && name[0] == '.' && name[1] == '.'))
		return 0;
	if (l->n == l->cap) {
		l->cap = l->cap ? 2 * l->cap : 1024;
		l->names = t_xrealloc(l->names, l->cap * sizeof(*l->names));
	}
	l->names[l->n] = t_xmalloc(len + 1);
	memcpy(l->names[l->n], name, len);
	l->names[l->n++][len] = 0;
	return 0;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void listing_free(struct listing *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->names[i]);
	free(l->names);
	memset(l, 0, sizeof(*l));
}

/* The whole directory, sorted; 0 or the readdir error. */
static int list_dir(struct listing *l)
{
	int err = uext4_readdir(fs, dino, 0, collect, l);

	qsort(l->names, l->n, sizeof(*l->names), cmp_str);
	return err;
}

static void check_listing_sane(const struct listing *l)
{
	unsigned pre_seen = 0;

	for (size_t i = 0; i < l->n; i++) {
		if (i > 0)
			CHECK_ERR(strcmp(l->names[i - 1], l->names[i]) != 0, "readdir: %s twice",
			      l->names[i]);
		pre_seen += strncmp(l->names[i], "pre-", 4) == 0;
	}
	CHECK_ERR(pre_seen == PRE, "readdir: %u of %u pre names", pre_seen, PRE);
}

static void *reader(void *arg)
{
	char name[128];
	struct uext4_stat st;
	unsigned rounds = 0;
	uint64_t rs = seed ^ 0x5555u;

	(void)arg;
	while (atomic_load(&writers_left) > 0) {
		unsigned i = rnd(&rs) % PRE;
		int err;

		pre_name(name, sizeof(name), i);
		err = uext4_lookup(fs, dino, name, &st);
		CHECK_ERR(err == 0 && st.ino == pre_ino[i], "reader: lookup %s: %d", name, err);
		if (rounds % 64 == 0) {
			/* The directory's times, changed by parallel creates and
			 * unlinks with its lock shared: each change sets both to
			 * one value, so a torn read shows them apart. */
			err = uext4_getattr(fs, dino, &st);
			CHECK_ERR(err == 0 && st.mtime.tv_sec == st.ctime.tv_sec &&
				      st.mtime.tv_nsec == st.ctime.tv_nsec,
			      "reader: directory times torn: mtime %lld.%09ld ctime %lld.%09ld (%d)",
			      (long long)st.mtime.tv_sec, st.mtime.tv_nsec,
			      (long long)st.ctime.tv_sec, st.ctime.tv_nsec, err);
		}
		if (++rounds % 2000 == 0) {
			struct listing l = {0};

			err = list_dir(&l);
			CHECK_ERR(err == 0, "reader: readdir: %d", err);
			check_listing_sane(&l);
			listing_free(&l);
		}
	}
	printf("reader: %u lookups\n", rounds);
	return NULL;
}

/* ------------------------------------------------------------ main */

static int write_expected(const char *path, struct listing *want)
{
	char name[128];
	FILE *f;

	for (unsigned i = 0; i < PRE; i++) {
		pre_name(name, sizeof(name), i);
		collect(want, name, strlen(name), 0, 0, 0);
	}
	for (unsigned t = 0; t < nthreads; t++)
		for (unsigned i = 0; i < nfiles; i++) {
			if (i % 3 == 0)
				continue;
			if (i % 3 == 1)
				renamed_name(name, sizeof(name), t, i);
			else
				own_name(name, sizeof(name), t, i);
			collect(want, name, strlen(name), 0, 0, 0);
		}
	qsort(want->names, want->n, sizeof(*want->names), cmp_str);
	if (!(f = fopen(path, "w")))
		return -1;
	for (size_t i = 0; i < want->n; i++)
		fprintf(f, "%s\n", want->names[i]);
	return fclose(f);
}

static void setup_dir(void)
{
	char name[128];
	struct uext4_stat st;
	uint32_t flags = 0;
	int err = uext4_mkdir(fs, 2, "d", 0755, &st);

	if (err) {
		printf("FAIL mkdir d: %d (%s)\n", err, uext4_last_error());
		exit(1);
	}
	dino = st.ino;
	for (unsigned i = 0; i < PRE; i++) {
		pre_name(name, sizeof(name), i);
		err = uext4_create(fs, dino, name, 0644, &st);
		if (err) {
			printf("FAIL create %s: %d (%s)\n", name, err, uext4_last_error());
			exit(1);
		}
		pre_ino[i] = st.ino;
	}
	err = uext4_get_flags(fs, dino, &flags);
	if (err || !(flags & EXT4_INDEX_FL)) {
		printf("FAIL directory d is not an htree after %u names (flags 0x%x, %d)\n", PRE,
		       flags, err);
		exit(1);
	}
}

int main(int argc, char **argv)
{
	struct uext4_opts o = {0};
	struct listing got = {0}, want = {0};
	pthread_t tid[MAXT], rt;
	int err;

	if (argc < 6) {
		fprintf(stderr, "usage: pardir_concur IMG THREADS FILES SEED EXPECTED_OUT\n");
		return 2;
	}
	nthreads = (unsigned)atoi(argv[2]);
	nthreads = nthreads < 1 ? 1 : nthreads > MAXT ? MAXT : nthreads;
	nfiles = (unsigned)atoi(argv[3]);
	seed = (unsigned)strtoul(argv[4], NULL, 0);
	printf("seed=%u threads=%u files=%u\n", seed, nthreads, nfiles);
	if ((err = uext4_mount(argv[1], &o, &fs))) {
		printf("FAIL mount: %d (%s)\n", err, uext4_last_error());
		return 1;
	}
	setup_dir();
	pthread_barrier_init(&phase, NULL, nthreads);
	atomic_store(&writers_left, (int)nthreads);
	pthread_create(&rt, NULL, reader, NULL);
	for (unsigned t = 0; t < nthreads; t++)
		pthread_create(&tid[t], NULL, writer, (void *)(uintptr_t)t);
	for (unsigned t = 0; t < nthreads; t++)
		pthread_join(tid[t], NULL);
	pthread_join(rt, NULL);
	for (unsigned k = 0; k < SWAP; k++) {
		char name[32];

		swap_name(name, sizeof(name), k);
		err = uext4_unlink(fs, dino, name);
		CHECK_ERR(err == 0 || err == -ENOENT, "unlink %s at the end: %d", name, err);
	}
	for (unsigned k = 0; k < COLLIDE; k++) {
		CHECK_ERR(collide_wins[k] == 1, "collide-%03u created %u times", k, collide_wins[k]);
		CHECK_ERR(unlink_wins[k] == 1, "collide-%03u unlinked %u times", k, unlink_wins[k]);
	}
	err = list_dir(&got);
	CHECK_ERR(err == 0, "readdir: %d", err);
	CHECK_ERR(write_expected(argv[5], &want) == 0, "cannot write %s", argv[5]);
	CHECK_ERR(got.n == want.n, "readdir: %zu names, want %zu", got.n, want.n);
	for (size_t i = 0; i < got.n && i < want.n; i++)
		if (strcmp(got.names[i], want.names[i]) != 0) {
			CHECK_ERR(0, "readdir: name %zu is %s, want %s", i, got.names[i], want.names[i]);
			break;
		}
	listing_free(&got);
	listing_free(&want);
	if ((err = uext4_umount(fs))) {
		printf("FAIL umount: %d (%s)\n", err, uext4_last_error());
		return 1;
	}
	if (t_failures) {
		printf("%d failures\n", t_failures);
		return 1;
	}
	printf("pardir_concur: ok\n");
	return 0;
}
