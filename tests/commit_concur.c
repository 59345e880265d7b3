/*
 * commit_concur.c - commits copy frozen buffers while handles run (run through
 * tests/commit_concur.sh).
 *
 *   commit_concur [-s SEED] [-t WRITERS] [-c COMMITS] [-n OPS] [-m MAX_STATES] IMAGE
 *
 * IMAGE is loaded into a crash-recording device (src/crashdev.c) and
 * mounted.  WRITER threads keep changing metadata (creates with data and
 * xattrs, renames, unlinks, mkdir/rmdir; in private directories and one
 * shared directory, so inode-table blocks, bitmaps and directory blocks
 * are shared) while another thread commits in a loop (uext4_sync), COMMITS
 * times, each after the writers did at least OPS operations.  Each
 * commit freezes the transaction's buffers and copies them with the
 * writers running: a block changed after the close leaking into the copy
 * would log a half-done operation or a block whose checksum (set at the
 * close) does not match it.
 *
 * Then every flush point of the run (or MAX_STATES of them, evenly spaced,
 * always the last) is materialised, recovered with uext4_recover() and
 * must pass `e2fsck -fn`.  The run must also have made frozen copies in
 * handle_write_access() (the concurrent path), or it tested nothing.
 */
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "blockdev.h"
#include "crashdev.h"
#include "mount.h"
#include "trans.h"
#include "uext4.h"
#include "t.h"

extern char **environ;

struct run {
	uext4_fs *fs;
	uint64_t shared_dir;
	unsigned ops;            /* between two commits, by all writers */
	unsigned commits_wanted; /* the writers stop after so many commits */
	unsigned long long seed;
	atomic_int writers_left;
	atomic_int failed;
	atomic_uint commits;
	atomic_uint ops_done;    /* by all writers: paces the committer */
};

struct writer {
	struct run *r;
	unsigned id;
	pthread_t thread;
};

static uint64_t rnd(uint64_t *s)
{
	return t_rnd(s);
}

static void op_failed(struct run *r, unsigned id, const char *what, int err)
{
	fprintf(stderr, "FAIL: writer %u: %s: %s (%s)\n", id, what, strerror(-err),
		uext4_last_error());
	atomic_store(&r->failed, 1);
}

/* A file with one or two blocks of data and an xattr. */
static int make_file(struct run *r, unsigned id, uint64_t dir, const char *name, uint64_t *s)
{
	struct uext4_stat st;
	uext4_file *f;
	char buf[6000], val[64];
	size_t len = 1 + rnd(s) % sizeof(buf);
	int err = uext4_create(r->fs, dir, name, 0644, &st);

	if (err)
		return err == -EEXIST ? 0 : (op_failed(r, id, "create", err), err);
	memset(buf, 'a' + (int)(rnd(s) % 26), len);
	if ((err = uext4_open(r->fs, st.ino, O_WRONLY, &f))) {
		op_failed(r, id, "open", err);
		return err;
	}
	ssize_t w = uext4_pwrite(f, buf, len, 0);
	uext4_release(f);
	if (w != (ssize_t)len) {
		op_failed(r, id, "pwrite", w < 0 ? (int)w : -EIO);
		return -EIO;
	}
	snprintf(val, sizeof(val), "writer %u value %llu", id, (unsigned long long)rnd(s));
	if ((err = uext4_setxattr(r->fs, st.ino, "user.cow", val, strlen(val), 0))) {
		op_failed(r, id, "setxattr", err);
		return err;
	}
	return 0;
}

/* One random operation on names n0..n63 of dir. */
static int one_op(struct run *r, unsigned id, uint64_t dir, uint64_t *s)
{
	char a[32], b[32];
	int err = 0;

	snprintf(a, sizeof(a), "w%u-%llu", id, (unsigned long long)(rnd(s) % 64));
	snprintf(b, sizeof(b), "w%u-%llu", id, (unsigned long long)(rnd(s) % 64));
	switch (rnd(s) % 6) {
	case 0: case 1:
		return make_file(r, id, dir, a, s);
	case 2:
		err = uext4_rename(r->fs, dir, a, dir, b, 0);
		break;
	case 3:
		err = uext4_unlink(r->fs, dir, a);
		if (err == -EISDIR)
			err = uext4_rmdir(r->fs, dir, a);
		break;
	case 4:
		err = uext4_mkdir(r->fs, dir, a, 0755, NULL);
		break;
	case 5:
		err = uext4_rmdir(r->fs, dir, a);
		break;
	}
	/* Names come and go at random: only real failures count. */
	if (err == -ENOENT || err == -EEXIST || err == -ENOTDIR || err == -EISDIR ||
	    err == -ENOTEMPTY)
		err = 0;
	if (err)
		op_failed(r, id, "namespace operation", err);
	return err;
}

/*
 * The writers stop after the commits wanted, once a writer met a frozen
 * buffer: a commit freezes for well under a millisecond, and a loaded
 * machine can run the wanted commits without one meeting (the check after
 * the run would then fail).  At most 8 times the commits wanted.
 */
static bool enough_commits(struct run *r)
{
	unsigned c = atomic_load(&r->commits);

	return c >= r->commits_wanted &&
	       (trans_handle_copies(r->fs) > 0 || c >= 8 * r->commits_wanted);
}

static void *writer_main(void *arg)
{
	struct writer *w = arg;
	struct run *r = w->r;
	uint64_t s = r->seed * 2654435761u + w->id + 1, own;
	char name[32];
	struct uext4_stat st;
	int err;

	snprintf(name, sizeof(name), "d%u", w->id);
	if ((err = uext4_mkdir(r->fs, 2, name, 0755, &st))) {
		op_failed(r, w->id, "mkdir of the private directory", err);
		goto out;
	}
	own = st.ino;
	while (!enough_commits(r) && !atomic_load(&r->failed)) {
		if (one_op(r, w->id, (rnd(&s) & 1) ? own : r->shared_dir, &s))
			break;
		atomic_fetch_add(&r->ops_done, 1);
	}
out:
	atomic_fetch_sub(&r->writers_left, 1);
	return NULL;
}

/* Commits in a loop, each after the writers did a few operations (else
 * on 2 cores most commits would find nothing to write). */
static void *committer_main(void *arg)
{
	struct run *r = arg;
	unsigned last = 0;

	while (atomic_load(&r->writers_left) > 0 && !atomic_load(&r->failed)) {
		while (atomic_load(&r->ops_done) - last < r->ops &&
		       atomic_load(&r->writers_left) > 0)
			sched_yield();
		last = atomic_load(&r->ops_done);
		int err = uext4_sync(r->fs);

		if (err) {
			fprintf(stderr, "FAIL: uext4_sync: %s (%s)\n", strerror(-err),
				uext4_last_error());
			atomic_store(&r->failed, 1);
			break;
		}
		atomic_fetch_add(&r->commits, 1);
	}
	return NULL;
}

static void print_file(const char *path)
{
	FILE *f = fopen(path, "r");
	char line[512];

	if (!f)
		return;
	while (fgets(line, sizeof(line), f))
		fprintf(stderr, "    %s", line);
	fclose(f);
}

/* State k (every write before flush k): recovered, then e2fsck -fn clean. */
static int check_state(struct bdev *dev, uint32_t k, const char *dir)
{
	char img[512], log[600];
	struct uext4_recovery rec;
	int r;

	snprintf(img, sizeof(img), "%s/state.img", dir);
	snprintf(log, sizeof(log), "%s/e2fsck.log", dir);
	if ((r = crashrec_materialize(dev, k, NULL, img))) {
		fprintf(stderr, "FAIL: state %u: materialize: %s\n", k, uext4_last_error());
		return 1;
	}
	if ((r = uext4_recover(img, &rec))) {
		fprintf(stderr, "FAIL: state %u: recovery: %s\n", k, uext4_last_error());
		return 1;
	}
	if ((r = t_run_e2fsck(img, log)) != 0) {
		fprintf(stderr, "FAIL: state %u: e2fsck -fn exit %d after recovery:\n", k, r);
		print_file(log);
		return 1;
	}
	return 0;
}

static int usage(void)
{
	fprintf(stderr, "usage: commit_concur [-s SEED] [-t WRITERS] [-c COMMITS] [-n OPS] "
			"[-m MAX_STATES] IMAGE\n");
	return 2;
}

int main(int argc, char **argv)
{
	struct run r = { .ops = 16, .commits_wanted = 100 };
	unsigned nwriters = 4, max_states = 60;
	struct uext4_opts mo = { .commit_secs = 3600 };
	struct uext4_stat st;
	const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	char dir[256];
	int opt, err, fails = 0;

	r.seed = (unsigned long long)time(NULL) ^ (unsigned long long)getpid();
	while ((opt = getopt(argc, argv, "s:t:c:n:m:")) != -1) {
		switch (opt) {
		case 's': r.seed = strtoull(optarg, NULL, 0); break;
		case 't': nwriters = (unsigned)atoi(optarg); break;
		case 'c': r.commits_wanted = (unsigned)atoi(optarg); break;
		case 'n': r.ops = (unsigned)atoi(optarg); break;
		case 'm': max_states = (unsigned)atoi(optarg); break;
		default: return usage();
		}
	}
	if (optind + 1 != argc || nwriters < 1 || nwriters > 64 || max_states < 1)
		return usage();
	printf("commit_concur: seed %llu (-s %llu replays the operations; the interleaving "
	       "differs), %u writers, %u commits, each after %u operations or more\n",
	       r.seed, r.seed, nwriters, r.commits_wanted, r.ops);
	snprintf(dir, sizeof(dir), "%s/commit_concur.XXXXXX", tmp);
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return T_FAIL;
	}

	struct bdev *dev = crashrec_open(argv[optind], &err);
	if (!dev) {
		fprintf(stderr, "FAIL: crashrec_open %s: %s\n", argv[optind], uext4_last_error());
		return T_FAIL;
	}
	crashrec_hold(dev);
	if ((err = super_mount_bdev(dev, &mo, &r.fs))) {
		fprintf(stderr, "FAIL: mount: %s\n", uext4_last_error());
		return T_FAIL;
	}
	if ((err = uext4_mkdir(r.fs, 2, "shared", 0755, &st))) {
		fprintf(stderr, "FAIL: mkdir shared: %s\n", uext4_last_error());
		return T_FAIL;
	}
	r.shared_dir = st.ino;

	struct writer *w = t_xmalloc(nwriters * sizeof(*w));
	pthread_t committer;

	atomic_store(&r.writers_left, (int)nwriters);
	for (unsigned i = 0; i < nwriters; i++) {
		w[i] = (struct writer){ .r = &r, .id = i };
		if (pthread_create(&w[i].thread, NULL, writer_main, &w[i])) {
			fprintf(stderr, "FAIL: pthread_create\n");
			return T_FAIL;
		}
	}
	if (pthread_create(&committer, NULL, committer_main, &r)) {
		fprintf(stderr, "FAIL: pthread_create\n");
		return T_FAIL;
	}
	for (unsigned i = 0; i < nwriters; i++)
		pthread_join(w[i].thread, NULL);
	pthread_join(committer, NULL);
	free(w);

	uint64_t copies = trans_handle_copies(r.fs);
	unsigned commits = atomic_load(&r.commits);

	if ((err = uext4_umount(r.fs))) {
		fprintf(stderr, "FAIL: umount: %s\n", uext4_last_error());
		fails++;
	}
	if (atomic_load(&r.failed))
		fails++;
	printf("  %u commits by the committer thread, %llu frozen copies made by writers\n",
	       commits, (unsigned long long)copies);
	T_CHECK(commits >= r.commits_wanted, "only %u commits ran beside the writers", commits);
	T_CHECK(copies > 0, "no writer met a frozen buffer: the concurrent copy path was not "
			    "exercised (%u commits)", commits);

	uint32_t nf = crashrec_nflushes(dev), checked = 0;
	uint32_t step = nf + 1 <= max_states ? 1 : (nf + max_states) / max_states;

	for (uint32_t k = 0; k <= nf && !fails; k += step) {
		fails += check_state(dev, k, dir);
		checked++;
	}
	if (!fails && nf % step) {
		fails += check_state(dev, nf, dir);
		checked++;
	}
	printf("  %u flushes, %u states recovered and checked with e2fsck -fn: %s\n", nf,
	       checked, fails ? "FAIL" : "all clean");
	if (fails)
		printf("  the failing state's image (before recovery: rebuild it with -s %llu) is "
		       "in %s\n", r.seed, dir);
	else {
		char p[600];

		snprintf(p, sizeof(p), "%s/state.img", dir);
		unlink(p);
		snprintf(p, sizeof(p), "%s/e2fsck.log", dir);
		unlink(p);
		rmdir(dir);
	}
	bdev_close(dev);
	return fails || t_failures ? T_FAIL : T_PASS;
}
