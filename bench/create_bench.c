/*
 * create_bench.c - create-path benchmark (seed 002's workload): THREADS
 * threads each create FILES empty files in a directory of their own,
 * siblings under one common parent, on a freshly made image.
 *
 *   create_bench lib IMAGE THREADS FILES
 *       through libuext4 (public API only): mount read-write, mkdir /p and
 *       /p/t00../p/tNN (not timed), then the threads call uext4_create().
 *   create_bench posix DIR THREADS FILES
 *       through any mounted directory (our FUSE mount, fuse2fs, the kernel's
 *       ext4, bench/nullfs --create): mkdir DIR/p and DIR/p/tNN (not timed),
 *       then each client thread does openat(dirfd, name, O_CREAT|O_EXCL|
 *       O_WRONLY, 0644) + close() in its own directory.
 *
 * Prints one line:
 *   RESULT threads=N files=TOTAL secs=S sync_secs=S2 itable_reads=R errors=E
 * secs covers the creates only (first thread started to last finished);
 * sync_secs the uext4_sync() / syncfs() that follows (writing everything
 * back).  itable_reads is the number of inode-table blocks the library read
 * from the device during the creates (lib only; -1 for posix).
 * Exits 1 if anything failed (the first failure is printed).
 * UEXT4_BENCH_STATS=1 turns the library's statistics on (lib); =print
 * also prints uext4_stats_format()'s report on stderr after the sync.
 */
#include "uext4.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

enum target { TARGET_LIB, TARGET_POSIX };

/* Set up before the threads start; read-only while they run. */
static enum target target;
static uext4_fs *bench_fs;
static long files_per_thread;

/* One per thread; each thread writes only its own slot. */
struct worker {
	pthread_t tid;
	int idx;
	uint64_t dir_ino;   /* lib: the thread's directory */
	int dir_fd;         /* posix: the thread's directory */
	long done, errors;
	int first_err;      /* errno of the first failure */
};

static pthread_barrier_t barrier;

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void file_name(char *buf, size_t size, long i)
{
	snprintf(buf, size, "f%07ld", i);
}

static int create_one(struct worker *w, const char *name)
{
	if (target == TARGET_LIB) {
		struct uext4_stat st;

		return uext4_create(bench_fs, w->dir_ino, name, S_IFREG | 0644, &st);
	}
	int fd = openat(w->dir_fd, name, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);

	if (fd < 0)
		return -errno;
	return close(fd) ? -errno : 0;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	char name[32];

	pthread_barrier_wait(&barrier);
	for (long i = 0; i < files_per_thread; i++) {
		file_name(name, sizeof(name), i);
		int err = create_one(w, name);

		if (err < 0) {
			if (!w->errors++)
				w->first_err = -err;
			continue;
		}
		w->done++;
	}
	pthread_barrier_wait(&barrier);
	return NULL;
}

/* ---- setup: the parent and one directory per thread ------------------------ */

static int lib_setup(const char *image, struct worker *w, int n)
{
	struct uext4_opts o = { 0 };
	struct uext4_stat st;
	uint64_t parent;
	char name[32];
	int err = uext4_mount(image, &o, &bench_fs);

	if (err < 0) {
		fprintf(stderr, "create_bench: mount %s: %s\n", image, uext4_last_error());
		return 1;
	}
	err = uext4_mkdir(bench_fs, UEXT4_ROOT_INO, "p", 0755, &st);
	if (err < 0) {
		fprintf(stderr, "create_bench: mkdir /p: %s (%s)\n", strerror(-err),
			uext4_last_error());
		return 1;
	}
	/* UEXT4_BENCH_STATS=1: statistics on (their cost is what is measured);
	 * =print: and the report on stderr after the sync. */
	if (getenv("UEXT4_BENCH_STATS") && *getenv("UEXT4_BENCH_STATS"))
		uext4_stats_enable(bench_fs, 1);
	parent = st.ino;
	for (int t = 0; t < n; t++) {
		snprintf(name, sizeof(name), "t%02d", t);
		err = uext4_mkdir(bench_fs, parent, name, 0755, &st);
		if (err < 0) {
			fprintf(stderr, "create_bench: mkdir /p/%s: %s (%s)\n", name,
				strerror(-err), uext4_last_error());
			return 1;
		}
		w[t].dir_ino = st.ino;
	}
	return 0;
}

static int posix_setup(const char *root, struct worker *w, int n)
{
	char path[4096];

	snprintf(path, sizeof(path), "%s/p", root);
	if (mkdir(path, 0755)) {
		fprintf(stderr, "create_bench: mkdir %s: %s\n", path, strerror(errno));
		return 1;
	}
	for (int t = 0; t < n; t++) {
		snprintf(path, sizeof(path), "%s/p/t%02d", root, t);
		if (mkdir(path, 0755)) {
			fprintf(stderr, "create_bench: mkdir %s: %s\n", path, strerror(errno));
			return 1;
		}
		w[t].dir_fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (w[t].dir_fd < 0) {
			fprintf(stderr, "create_bench: open %s: %s\n", path, strerror(errno));
			return 1;
		}
	}
	return 0;
}

static uint64_t itable_reads(void)
{
	struct uext4_counters c;

	if (uext4_get_counters(bench_fs, &c) < 0)
		return 0;
	return c.reads[UEXT4_META_INODE_TABLE];
}

/* Write everything back: uext4_sync, or syncfs on the mounted tree. */
static int sync_all(struct worker *w)
{
	if (target == TARGET_LIB) {
		int err = uext4_sync(bench_fs);

		if (err < 0)
			fprintf(stderr, "create_bench: uext4_sync: %s (%s)\n", strerror(-err),
				uext4_last_error());
		return err;
	}
	if (syncfs(w[0].dir_fd)) {
		fprintf(stderr, "create_bench: syncfs: %s\n", strerror(errno));
		return -errno;
	}
	return 0;
}

static int usage(void)
{
	fprintf(stderr, "usage: create_bench lib IMAGE THREADS FILES\n"
			"       create_bench posix DIR THREADS FILES\n");
	return 2;
}

int main(int argc, char **argv)
{
	int n, status = 0;
	long done = 0, errors = 0;
	int64_t reads = -1;
	uint64_t reads0 = 0;
	struct worker *w;
	double t0, t1, t2;

	if (argc != 5)
		return usage();
	if (!strcmp(argv[1], "lib"))
		target = TARGET_LIB;
	else if (!strcmp(argv[1], "posix"))
		target = TARGET_POSIX;
	else
		return usage();
	n = atoi(argv[3]);
	files_per_thread = atol(argv[4]);
	if (n < 1 || n > 99 || files_per_thread < 1 || files_per_thread > 9999999)
		return usage();
	w = calloc((size_t)n, sizeof(*w));
	if (!w) {
		perror("calloc");
		return 1;
	}
	if (target == TARGET_LIB ? lib_setup(argv[2], w, n) : posix_setup(argv[2], w, n))
		return 1;
	if (target == TARGET_LIB)
		reads0 = itable_reads();

	pthread_barrier_init(&barrier, NULL, (unsigned)n + 1);
	for (int t = 0; t < n; t++) {
		w[t].idx = t;
		if (pthread_create(&w[t].tid, NULL, worker_main, &w[t])) {
			perror("pthread_create");
			return 1;
		}
	}
	pthread_barrier_wait(&barrier);
	t0 = now();
	pthread_barrier_wait(&barrier);
	t1 = now();
	for (int t = 0; t < n; t++) {
		pthread_join(w[t].tid, NULL);
		done += w[t].done;
		errors += w[t].errors;
		if (w[t].errors && !status) {
			fprintf(stderr, "create_bench: thread %d: %ld creates failed, first: %s\n", t,
				w[t].errors, strerror(w[t].first_err));
			if (target == TARGET_LIB)
				fprintf(stderr, "create_bench: (last library error of main thread: %s)\n",
					uext4_last_error());
			status = 1;
		}
	}
	if (target == TARGET_LIB)
		reads = (int64_t)(itable_reads() - reads0);
	if (sync_all(w) < 0)
		status = 1;
	t2 = now();
	printf("RESULT threads=%d files=%ld secs=%.6f sync_secs=%.6f itable_reads=%lld errors=%ld\n",
	       n, done, t1 - t0, t2 - t1, (long long)reads, errors);
	fflush(stdout);
	if (target == TARGET_LIB) {
		const char *env = getenv("UEXT4_BENCH_STATS");
		static char report[65536];

		if (env && !strcmp(env, "print") &&
		    uext4_stats_format(bench_fs, report, sizeof report, 0) > 0)
			fputs(report, stderr);
		int err = uext4_umount(bench_fs);

		if (err < 0) {
			fprintf(stderr, "create_bench: umount: %s (%s)\n", strerror(-err),
				uext4_last_error());
			status = 1;
		}
	} else {
		for (int t = 0; t < n; t++)
			close(w[t].dir_fd);
	}
	pthread_barrier_destroy(&barrier);
	free(w);
	return status;
}
