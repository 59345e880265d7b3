/*
 * walk_race.c - the reference-free path walk of uext4_stat_path() (api.c,
 * so that a warm stat by path takes no lock) raced against the namespace
 * changes and inode-cache evictions that could make it return something
 * that was never true.  Meant for TSan (the name has "race"), checked in
 * every build.
 *
 * Two directories d0, d1 hold NF files each; file fK (K unique over both)
 * has size K+1 (0 for an instant after it is recreated).  With
 * UEXT4_ICACHE_UNUSED=64 (evictions all the time), 4 threads stat random
 * paths /dD/fK and /dD/sub (fK also by uext4_lookup() and
 * uext4_lookup_counted() in dD) while 2 threads (one per directory) rename fK
 * away and back, unlink and recreate fK (freed numbers are reused by
 * other names), and mkdir/rmdir sub.  Every stat must be ENOENT or name
 * a regular file of size K+1 or 0 (a path resolved through a stale entry
 * to a reused number shows another size), and sub must be a directory.
 * After the race, every path's stat agrees with the ordinary walk
 * (uext4_resolve()), and e2fsck -fn is clean.  The seed is printed;
 * UEXT4_SEED=N repeats a run.
 *
 * On the ordinary walk it found two races (fixed): a path resolved to a
 * reused inode number (api.c walk_lookup(): look the name up again after
 * iget()), and an unlinked inode evicted without being freed (inode.c
 * iput(): look again after the drop).  uext4_lookup() and
 * uext4_lookup_counted() read the inode after the lookup without that
 * second look, and returned EUCLEAN ("deleted inode referenced") to a
 * lookup racing an unlink; they now find the name as the walk does.
 */
/* run-in: release asan tsan */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdatomic.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "uext4.h"
#include "t.h"

#define NDIRS 2
#define NF 32
#define READERS 4
#define RUN_NS 1500000000ll

static uext4_fs *g_fs;
static uint64_t g_dir[NDIRS];
static unsigned g_seed;
static _Atomic bool g_stop;

static unsigned next_rand(unsigned *s)
{
	*s = *s * 1103515245u + 12345u;
	return *s >> 8;
}

static int64_t now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000000000ll + t.tv_nsec;
}

static void make_file(uint64_t dir, unsigned k)
{
	struct uext4_setattr a = { .valid = UEXT4_SET_SIZE, .size = k + 1 };
	struct uext4_stat st;
	char name[16];

	snprintf(name, sizeof name, "f%u", k);
	if (uext4_create(g_fs, dir, name, S_IFREG | 0644, &st) ||
	    uext4_setattr(g_fs, st.ino, &a, NULL)) {
		fprintf(stderr, "FAIL: create/size %s: %s\n", name, uext4_last_error());
		exit(T_FAIL);
	}
}

struct rctx {
	unsigned seed;
	long ok, absent, bad;
};

/* The stat of /dD/fK by path, by uext4_lookup() in dD, or by
 * uext4_lookup_counted() (FUSE's lookup; its reference then dropped). */
static int stat_by(unsigned how, unsigned d, const char *path, struct uext4_stat *st)
{
	const char *name = strrchr(path, '/') + 1;
	int err;

	if (how == 0)
		return uext4_stat_path(g_fs, path, st);
	if (how == 1)
		return uext4_lookup(g_fs, g_dir[d], name, st);
	err = uext4_lookup_counted(g_fs, g_dir[d], name, st);
	if (!err)
		uext4_forget(g_fs, st->ino, 1);
	return err;
}

static void check_file(struct rctx *c, unsigned d, unsigned k, unsigned how)
{
	struct uext4_stat st;
	char path[32];
	int err;

	snprintf(path, sizeof path, "/d%u/f%u", d, k);
	err = stat_by(how, d, path, &st);
	if (err == -ENOENT) {
		c->absent++;
	} else if (err) {
		c->bad++;
		fprintf(stderr, "%s: error %d: %s\n", path, err, uext4_last_error());
	} else if (!S_ISREG(st.mode) || (st.size != k + 1 && st.size != 0)) {
		c->bad++;
		fprintf(stderr, "%s: inode %llu mode %o size %llu (want size %u)\n", path,
			(unsigned long long)st.ino, st.mode, (unsigned long long)st.size, k + 1);
	} else {
		c->ok++;
	}
}

static void check_sub(struct rctx *c, unsigned d)
{
	struct uext4_stat st;
	char path[32];
	int err;

	snprintf(path, sizeof path, "/d%u/sub", d);
	err = uext4_stat_path(g_fs, path, &st);
	if (err && err != -ENOENT) {
		c->bad++;
		fprintf(stderr, "%s: error %d: %s\n", path, err, uext4_last_error());
	} else if (!err && !S_ISDIR(st.mode)) {
		c->bad++;
		fprintf(stderr, "%s: inode %llu mode %o, not a directory\n", path,
			(unsigned long long)st.ino, st.mode);
	}
}

static void *reader(void *arg)
{
	struct rctx *c = arg;

	while (!atomic_load(&g_stop)) {
		unsigned r = next_rand(&c->seed), d = r % NDIRS;

		if (r % 16 == 0)
			check_sub(c, d);
		else
			check_file(c, d, d * NF + (r >> 4) % NF, (r >> 12) % 3);
	}
	return NULL;
}

struct cctx {
	unsigned seed, d;
	long ops;
};

static void churn_once(struct cctx *c)
{
	unsigned r = next_rand(&c->seed), k = c->d * NF + (r >> 3) % NF;
	uint64_t dir = g_dir[c->d];
	char name[16], tmp[16];
	struct uext4_stat st;
	int err = 0;

	snprintf(name, sizeof name, "f%u", k);
	snprintf(tmp, sizeof tmp, "t%u", k);
	switch (r % 4) {
	case 0: /* away and back */
		err = uext4_rename(g_fs, dir, name, dir, tmp, 0);
		if (!err)
			err = uext4_rename(g_fs, dir, tmp, dir, name, 0);
		break;
	case 1: /* a new inode (maybe another name's old number) */
		err = uext4_unlink(g_fs, dir, name);
		if (!err)
			make_file(dir, k);
		break;
	case 2:
		err = uext4_mkdir(g_fs, dir, "sub", S_IFDIR | 0755, &st);
		break;
	default:
		err = uext4_rmdir(g_fs, dir, "sub");
		if (err == -ENOENT)
			err = 0;
		break;
	}
	if (err && !(r % 4 == 2 && err == -EEXIST)) {
		fprintf(stderr, "FAIL: churn %u in d%u: %s\n", r % 4, c->d, uext4_last_error());
		exit(T_FAIL);
	}
	c->ops++;
}

static void *churner(void *arg)
{
	struct cctx *c = arg;

	while (!atomic_load(&g_stop))
		churn_once(c);
	return NULL;
}

static void setup(void)
{
	struct uext4_stat st;
	char name[8];

	for (unsigned d = 0; d < NDIRS; d++) {
		snprintf(name, sizeof name, "d%u", d);
		if (uext4_mkdir(g_fs, UEXT4_ROOT_INO, name, S_IFDIR | 0755, &st)) {
			fprintf(stderr, "FAIL: mkdir %s: %s\n", name, uext4_last_error());
			exit(T_FAIL);
		}
		g_dir[d] = st.ino;
		for (unsigned i = 0; i < NF; i++)
			make_file(g_dir[d], d * NF + i);
	}
}

/* After the race: the fast walk and the ordinary one agree on every path. */
static void check_agree(void)
{
	for (unsigned k = 0; k < NDIRS * NF; k++) {
		struct uext4_stat st;
		uint64_t ino = 0;
		char path[32];
		int e1, e2;

		snprintf(path, sizeof path, "/d%u/f%u", k / NF, k);
		e1 = uext4_stat_path(g_fs, path, &st);
		e2 = uext4_resolve(g_fs, path, 0, &ino);
		T_CHECK(e1 == 0 && e2 == 0 && st.ino == ino && st.size == k + 1,
			"%s: stat %d inode %llu size %llu, resolve %d inode %llu", path, e1,
			(unsigned long long)st.ino, (unsigned long long)st.size, e2,
			(unsigned long long)ino);
	}
}

static void race(void)
{
	pthread_t rt[READERS], ct[NDIRS];
	struct rctx rc[READERS] = {0};
	struct cctx cc[NDIRS] = {0};
	long ok = 0, absent = 0, ops = 0;
	int64_t end = now_ns() + RUN_NS;

	for (int i = 0; i < READERS; i++) {
		rc[i].seed = g_seed + 7u * (unsigned)i;
		pthread_create(&rt[i], NULL, reader, &rc[i]);
	}
	for (unsigned d = 0; d < NDIRS; d++) {
		cc[d] = (struct cctx){ .seed = g_seed ^ (0x9e37u * (d + 1)), .d = d };
		pthread_create(&ct[d], NULL, churner, &cc[d]);
	}
	while (now_ns() < end && t_failures == 0)
		usleep(10000); /* the run's length only, no synchronisation */
	atomic_store(&g_stop, true);
	for (int i = 0; i < READERS; i++) {
		pthread_join(rt[i], NULL);
		T_CHECK(rc[i].bad == 0, "reader %d: %ld wrong results", i, rc[i].bad);
		ok += rc[i].ok;
		absent += rc[i].absent;
	}
	for (unsigned d = 0; d < NDIRS; d++) {
		pthread_join(ct[d], NULL);
		ops += cc[d].ops;
	}
	printf("stats: %ld found, %ld absent; %ld namespace changes\n", ok, absent, ops);
	T_CHECK(ok > 0 && ops > 0, "a side made no progress");
}

int main(void)
{
	char img[] = "/tmp/walk_race.XXXXXX", log[64];
	struct uext4_mkfs_opts mo = { .size = 64ull << 20, .inodes = 4096, .force = 1 };
	struct uext4_opts o = {0};
	const char *s = getenv("UEXT4_SEED");
	int fd = mkstemp(img);

	g_seed = s ? (unsigned)strtoul(s, NULL, 0) : (unsigned)time(NULL);
	printf("seed %u\n", g_seed);
	if (fd < 0) {
		perror("mkstemp");
		return T_FAIL;
	}
	close(fd);
	if (uext4_mkfs(img, &mo, NULL) < 0) {
		fprintf(stderr, "FAIL: mkfs: %s\n", uext4_last_error());
		return T_FAIL;
	}
	setenv("UEXT4_ICACHE_UNUSED", "64", 1);
	if (uext4_mount(img, &o, &g_fs) < 0) {
		fprintf(stderr, "FAIL: mount: %s\n", uext4_last_error());
		return T_FAIL;
	}
	unsetenv("UEXT4_ICACHE_UNUSED");
	setup();
	race();
	check_agree();
	T_CHECK(uext4_umount(g_fs) == 0, "umount: %s", uext4_last_error());
	snprintf(log, sizeof log, "%s.fsck", img);
	T_CHECK(t_run_e2fsck(img, log) == 0, "e2fsck -fn found problems (see %s)", log);
	if (t_failures == 0) {
		unlink(log);
		unlink(img);
	}
	return t_failures ? T_FAIL : T_PASS;
}
