/*
 * orphan_bench.c - orphan-path benchmarks (seed 000's stress-orphan, an
 * unlink-heavy workload, fsync latency).  bench/orphan.sh runs it against
 * every target; this program does one point.
 *
 *   orphan_bench [-s SECS] [-x write|truncate] lib IMAGE WORKLOAD THREADS ITERS
 *       through libuext4 (public API only): mount read-write, set up (not
 *       timed), run, uext4_sync(), unmount.
 *   orphan_bench [-s SECS] [-x write|truncate] posix DIR WORKLOAD THREADS ITERS
 *       through any mounted directory (our FUSE mount, the kernel's ext4,
 *       fuse2fs, bench/nullfs --create for the unlink workloads).
 *
 * Every thread works in a directory of its own, DIR/p/tNN (made before the
 * clock starts).  WORKLOAD is one of:
 *   truncate     stress-orphan: the thread's 4 KiB file is truncated one byte
 *                at a time, 4095, 4094, ..., 1 (4095 shrinking truncates, each
 *                of which puts the inode on the orphan list and takes it off
 *                again), then extended back to 4096 bytes; ITERS such passes.
 *                The extension is a 4 KiB pwrite at offset 0 (-x write, the
 *                default: the file is whole and written again, as a program
 *                that rewrites its file would) or a growing truncate to 4096
 *                (-x truncate).  ops = shrinking truncates only.
 *                lib: uext4_setattr(UEXT4_SET_SIZE); posix: ftruncate().
 *   unlink       ITERS times: create a file, write one 4 KiB block, close,
 *                unlink.  ops = unlinks.
 *   unlink-open  the same, but unlink while the file is open, then close
 *                (the orphan path: the inode lives until the last close).
 *   nowrite-unlink, nowrite-unlink-open
 *                the same without the write (for bench/nullfs, which has no
 *                write: the ceiling of the FUSE create+unlink round trips).
 *   fsync        ITERS times: append 4 KiB to the thread's file and fsync it;
 *                the fsync call alone is timed for the latencies.
 *                ops = fsyncs.
 * -s SECS stops every thread once SECS seconds have passed since the start
 * (checked between operations; a truncate pass may end early), so slow
 * targets (fuse2fs) stay bounded; the rate is ops / elapsed either way.
 *
 * Prints one line:
 *   RESULT workload=W threads=N ops=TOTAL secs=S sync_secs=S2 errors=E
 *          capped=0|1 p50_us=X p99_us=Y
 * secs covers the timed loop (first thread started to last finished);
 * sync_secs the uext4_sync()/syncfs() after it; p50/p99 are fsync latencies
 * in microseconds (-1 for other workloads); capped=1 if -s stopped it.
 * Exits 1 if anything failed (the first failure is printed).
 */
#include "uext4.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define FILE_BYTES 4096

enum target { TARGET_LIB, TARGET_POSIX };
enum workload { WL_TRUNCATE, WL_UNLINK, WL_UNLINK_OPEN, WL_FSYNC };

/* Set up before the threads start; read-only while they run. */
static enum target target;
static enum workload workload;
static int do_write = 1;        /* unlink workloads write a block */
static int extend_by_write = 1; /* truncate: extend with pwrite, else truncate up */
static long iters;
static double max_secs;         /* 0 = no cap */
static double start_time;       /* written by main before the second barrier */
static uext4_fs *bench_fs;
static char block[FILE_BYTES];

/* Set by the first thread that sees the deadline pass; read by all. */
static atomic_int capped;

/* One per thread; each thread writes only its own slot. */
struct worker {
	pthread_t tid;
	int idx;
	uint64_t dir_ino;   /* lib: the thread's directory */
	uint64_t file_ino;  /* lib: the thread's file (truncate, fsync) */
	int dir_fd;         /* posix: the thread's directory */
	int file_fd;        /* posix: the thread's file (truncate, fsync) */
	uext4_file *file;   /* lib: the thread's open file (truncate, fsync) */
	long done, errors;
	int first_err;      /* errno of the first failure */
	const char *first_op;
	double *lat;        /* fsync latencies in seconds, iters of them */
	long nlat;
};

static pthread_barrier_t barrier;

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Deadline check between operations: true once the run should stop. */
static int out_of_time(void)
{
	if (atomic_load_explicit(&capped, memory_order_relaxed))
		return 1;
	if (max_secs > 0 && now() - start_time > max_secs) {
		atomic_store_explicit(&capped, 1, memory_order_relaxed);
		return 1;
	}
	return 0;
}

/* Record a failure (keeps the first errno and operation); returns err. */
static int failed(struct worker *w, const char *op, int err)
{
	if (!w->errors++) {
		w->first_err = -err;
		w->first_op = op;
	}
	return err;
}

/* ---- the operations, per target --------------------------------------------- */

static int set_size(struct worker *w, uint64_t size)
{
	if (target == TARGET_LIB) {
		struct uext4_setattr a = { .valid = UEXT4_SET_SIZE, .size = size };

		return uext4_setattr(bench_fs, w->file_ino, &a, NULL);
	}
	return ftruncate(w->file_fd, (off_t)size) ? -errno : 0;
}

/* Write all of buf at off to the thread's file (lib file or fd). */
static int write_at(uext4_file *f, int fd, uint64_t off)
{
	ssize_t n = target == TARGET_LIB ? uext4_pwrite(f, block, sizeof(block), off)
					 : pwrite(fd, block, sizeof(block), (off_t)off);

	if (n < 0)
		return target == TARGET_LIB ? (int)n : -errno;
	return n == (ssize_t)sizeof(block) ? 0 : -EIO;
}

static int sync_file(struct worker *w)
{
	if (target == TARGET_LIB)
		return uext4_fsync(w->file, 0);
	return fsync(w->file_fd) ? -errno : 0;
}

/* A file opened by create_open(): lib handle + inode, or a descriptor. */
struct tmpfile {
	uext4_file *f;
	uint64_t ino;
	int fd;
};

static int create_open(struct worker *w, const char *name, struct tmpfile *t)
{
	if (target == TARGET_LIB) {
		struct uext4_stat st;
		int err = uext4_create(bench_fs, w->dir_ino, name, S_IFREG | 0644, &st);

		if (err < 0)
			return err;
		t->ino = st.ino;
		return uext4_open(bench_fs, st.ino, O_RDWR, &t->f);
	}
	t->fd = openat(w->dir_fd, name, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0644);
	return t->fd < 0 ? -errno : 0;
}

static int close_file(struct tmpfile *t)
{
	if (target == TARGET_LIB)
		return uext4_release(t->f);
	return close(t->fd) ? -errno : 0;
}

static int unlink_name(struct worker *w, const char *name)
{
	if (target == TARGET_LIB)
		return uext4_unlink(bench_fs, w->dir_ino, name);
	return unlinkat(w->dir_fd, name, 0) ? -errno : 0;
}

/* ---- the workloads ------------------------------------------------------------ */

/* stress-orphan: ITERS passes of 4095 shrinking truncates and one extension. */
static void run_truncate(struct worker *w)
{
	int err;

	for (long i = 0; i < iters && !out_of_time(); i++) {
		for (uint64_t size = FILE_BYTES - 1; size >= 1; size--) {
			if (size % 64 == 0 && out_of_time())
				return; /* slow targets: a pass takes seconds */
			err = set_size(w, size);
			if (err < 0) {
				failed(w, "truncate", err);
				return;
			}
			w->done++;
		}
		err = extend_by_write ? write_at(w->file, w->file_fd, 0) : set_size(w, FILE_BYTES);
		if (err < 0) {
			failed(w, "extend", err);
			return;
		}
	}
}

/* create (+ write a block) + unlink, the unlink before or after the close. */
static void run_unlink(struct worker *w)
{
	int open_unlink = workload == WL_UNLINK_OPEN;
	char name[32];
	int err;

	for (long i = 0; i < iters && !out_of_time(); i++) {
		struct tmpfile t = { 0 };

		snprintf(name, sizeof(name), "u%07ld", i);
		err = create_open(w, name, &t);
		if (err < 0) {
			failed(w, "create", err);
			return;
		}
		if (do_write && (err = write_at(t.f, t.fd, 0)) < 0)
			failed(w, "write", err);
		if (open_unlink) {
			if ((err = unlink_name(w, name)) < 0)
				failed(w, "unlink", err);
			else
				w->done++;
		}
		if ((err = close_file(&t)) < 0)
			failed(w, "close", err);
		if (!open_unlink) {
			if ((err = unlink_name(w, name)) < 0)
				failed(w, "unlink", err);
			else
				w->done++;
		}
		if (w->errors)
			return;
	}
}

/* append 4 KiB + fsync, ITERS times; the fsync alone is timed. */
static void run_fsync(struct worker *w)
{
	for (long i = 0; i < iters && !out_of_time(); i++) {
		int err = write_at(w->file, w->file_fd, (uint64_t)i * FILE_BYTES);

		if (err < 0) {
			failed(w, "append", err);
			return;
		}
		double t0 = now();

		err = sync_file(w);
		w->lat[w->nlat++] = now() - t0;
		if (err < 0) {
			failed(w, "fsync", err);
			return;
		}
		w->done++;
	}
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;

	pthread_barrier_wait(&barrier);
	pthread_barrier_wait(&barrier); /* main has set start_time */
	switch (workload) {
	case WL_TRUNCATE: run_truncate(w); break;
	case WL_UNLINK:
	case WL_UNLINK_OPEN: run_unlink(w); break;
	case WL_FSYNC: run_fsync(w); break;
	}
	pthread_barrier_wait(&barrier);
	return NULL;
}

/* ---- setup: /p, a directory per thread, and its file ------------------------- */

static int lib_setup_thread(struct worker *w, uint64_t parent)
{
	struct uext4_stat st;
	char name[32];
	int err;

	snprintf(name, sizeof(name), "t%02d", w->idx);
	err = uext4_mkdir(bench_fs, parent, name, 0755, &st);
	if (err < 0) {
		fprintf(stderr, "orphan_bench: mkdir /p/%s: %s (%s)\n", name, strerror(-err),
			uext4_last_error());
		return 1;
	}
	w->dir_ino = st.ino;
	if (workload != WL_TRUNCATE && workload != WL_FSYNC)
		return 0;
	err = uext4_create(bench_fs, w->dir_ino, "file", S_IFREG | 0644, &st);
	if (err >= 0) {
		w->file_ino = st.ino;
		err = uext4_open(bench_fs, st.ino, O_RDWR, &w->file);
	}
	if (err >= 0 && workload == WL_TRUNCATE)
		err = write_at(w->file, -1, 0);
	if (err < 0) {
		fprintf(stderr, "orphan_bench: setting up /p/%s/file: %s (%s)\n", name,
			strerror(-err), uext4_last_error());
		return 1;
	}
	return 0;
}

static int lib_setup(const char *image, struct worker *w, int n)
{
	struct uext4_opts o = { 0 };
	struct uext4_stat st;
	int err = uext4_mount(image, &o, &bench_fs);

	if (err < 0) {
		fprintf(stderr, "orphan_bench: mount %s: %s\n", image, uext4_last_error());
		return 1;
	}
	err = uext4_mkdir(bench_fs, UEXT4_ROOT_INO, "p", 0755, &st);
	if (err < 0) {
		fprintf(stderr, "orphan_bench: mkdir /p: %s (%s)\n", strerror(-err),
			uext4_last_error());
		return 1;
	}
	for (int t = 0; t < n; t++)
		if (lib_setup_thread(&w[t], st.ino))
			return 1;
	/* Start from a clean state, as the posix targets do after their syncfs. */
	err = uext4_sync(bench_fs);
	if (err < 0) {
		fprintf(stderr, "orphan_bench: uext4_sync: %s (%s)\n", strerror(-err),
			uext4_last_error());
		return 1;
	}
	return 0;
}

static int posix_setup(const char *root, struct worker *w, int n)
{
	char path[4096];

	snprintf(path, sizeof(path), "%s/p", root);
	if (mkdir(path, 0755)) {
		fprintf(stderr, "orphan_bench: mkdir %s: %s\n", path, strerror(errno));
		return 1;
	}
	for (int t = 0; t < n; t++) {
		snprintf(path, sizeof(path), "%s/p/t%02d", root, t);
		if (mkdir(path, 0755)) {
			fprintf(stderr, "orphan_bench: mkdir %s: %s\n", path, strerror(errno));
			return 1;
		}
		w[t].dir_fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (w[t].dir_fd < 0) {
			fprintf(stderr, "orphan_bench: open %s: %s\n", path, strerror(errno));
			return 1;
		}
		w[t].file_fd = -1;
		if (workload != WL_TRUNCATE && workload != WL_FSYNC)
			continue;
		w[t].file_fd = openat(w[t].dir_fd, "file", O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC,
				      0644);
		if (w[t].file_fd < 0 ||
		    (workload == WL_TRUNCATE && write_at(NULL, w[t].file_fd, 0) < 0)) {
			fprintf(stderr, "orphan_bench: setting up %s/file: %s\n", path,
				strerror(errno));
			return 1;
		}
	}
	if (syncfs(w[0].dir_fd)) {
		fprintf(stderr, "orphan_bench: syncfs: %s\n", strerror(errno));
		return 1;
	}
	return 0;
}

/* Write everything back: uext4_sync, or syncfs on the mounted tree. */
static int sync_all(struct worker *w)
{
	if (target == TARGET_LIB) {
		int err = uext4_sync(bench_fs);

		if (err < 0)
			fprintf(stderr, "orphan_bench: uext4_sync: %s (%s)\n", strerror(-err),
				uext4_last_error());
		return err;
	}
	if (syncfs(w[0].dir_fd)) {
		fprintf(stderr, "orphan_bench: syncfs: %s\n", strerror(errno));
		return -errno;
	}
	return 0;
}

/* Close the threads' files and directories; unmount the library. */
static int teardown(struct worker *w, int n)
{
	int status = 0;

	for (int t = 0; t < n; t++) {
		if (target == TARGET_LIB) {
			if (w[t].file && uext4_release(w[t].file) < 0)
				status = 1;
		} else {
			if (w[t].file_fd >= 0)
				close(w[t].file_fd);
			close(w[t].dir_fd);
		}
	}
	if (target == TARGET_LIB) {
		int err = uext4_umount(bench_fs);

		if (err < 0) {
			fprintf(stderr, "orphan_bench: umount: %s (%s)\n", strerror(-err),
				uext4_last_error());
			status = 1;
		}
	}
	return status;
}

/* ---- results ------------------------------------------------------------------- */

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* Percentile p (0..100) of the sorted array v[n], nearest rank; -1 if empty. */
static double percentile(const double *v, long n, double p)
{
	long rank;

	if (n == 0)
		return -1;
	rank = (long)((p / 100.0) * (double)n + 0.999999);
	if (rank < 1)
		rank = 1;
	return v[(rank > n ? n : rank) - 1];
}

/* All threads' fsync latencies, sorted, into p50/p99 (microseconds). */
static int fsync_percentiles(struct worker *w, int n, double *p50, double *p99)
{
	long total = 0, k = 0;
	double *all;

	*p50 = *p99 = -1;
	for (int t = 0; t < n; t++)
		total += w[t].nlat;
	if (total == 0)
		return 0;
	all = malloc((size_t)total * sizeof(*all));
	if (!all)
		return -1;
	for (int t = 0; t < n; t++)
		for (long i = 0; i < w[t].nlat; i++)
			all[k++] = w[t].lat[i];
	qsort(all, (size_t)total, sizeof(*all), cmp_double);
	*p50 = percentile(all, total, 50) * 1e6;
	*p99 = percentile(all, total, 99) * 1e6;
	free(all);
	return 0;
}

static int report_errors(struct worker *w, int n)
{
	int status = 0;

	for (int t = 0; t < n; t++) {
		if (!w[t].errors)
			continue;
		if (!status) {
			fprintf(stderr, "orphan_bench: thread %d: %ld operations failed, first: %s: %s\n",
				t, w[t].errors, w[t].first_op, strerror(w[t].first_err));
			if (target == TARGET_LIB)
				fprintf(stderr, "orphan_bench: (last library error of main thread: %s)\n",
					uext4_last_error());
		}
		status = 1;
	}
	return status;
}

/* ---- main ------------------------------------------------------------------------ */

static int usage(void)
{
	fprintf(stderr,
		"usage: orphan_bench [-s SECS] [-x write|truncate] lib IMAGE WORKLOAD THREADS ITERS\n"
		"       orphan_bench [-s SECS] [-x write|truncate] posix DIR WORKLOAD THREADS ITERS\n"
		"WORKLOAD: truncate, unlink, unlink-open, nowrite-unlink, nowrite-unlink-open, fsync\n");
	return 2;
}

static int parse_workload(const char *s)
{
	if (!strncmp(s, "nowrite-", 8)) {
		do_write = 0;
		s += 8;
		if (strcmp(s, "unlink") && strcmp(s, "unlink-open"))
			return -1;
	}
	if (!strcmp(s, "truncate"))
		workload = WL_TRUNCATE;
	else if (!strcmp(s, "unlink"))
		workload = WL_UNLINK;
	else if (!strcmp(s, "unlink-open"))
		workload = WL_UNLINK_OPEN;
	else if (!strcmp(s, "fsync"))
		workload = WL_FSYNC;
	else
		return -1;
	return 0;
}

/* Options and positional arguments; returns the first positional index or -1. */
static int parse_args(int argc, char **argv)
{
	int i = 1;

	for (; i + 1 < argc && argv[i][0] == '-'; i += 2) {
		if (!strcmp(argv[i], "-s"))
			max_secs = atof(argv[i + 1]);
		else if (!strcmp(argv[i], "-x") && !strcmp(argv[i + 1], "write"))
			extend_by_write = 1;
		else if (!strcmp(argv[i], "-x") && !strcmp(argv[i + 1], "truncate"))
			extend_by_write = 0;
		else
			return -1;
	}
	if (argc - i != 5 || max_secs < 0)
		return -1;
	if (!strcmp(argv[i], "lib"))
		target = TARGET_LIB;
	else if (!strcmp(argv[i], "posix"))
		target = TARGET_POSIX;
	else
		return -1;
	if (parse_workload(argv[i + 2]))
		return -1;
	return i;
}

int main(int argc, char **argv)
{
	int a = parse_args(argc, argv), n, status;
	long done = 0, errors = 0;
	struct worker *w;
	double t1, t2, p50, p99;

	if (a < 0)
		return usage();
	n = atoi(argv[a + 3]);
	iters = atol(argv[a + 4]);
	if (n < 1 || n > 99 || iters < 1 || iters > 9999999)
		return usage();
	memset(block, 'o', sizeof(block));
	w = calloc((size_t)n, sizeof(*w));
	if (!w) {
		perror("calloc");
		return 1;
	}
	for (int t = 0; t < n; t++) {
		w[t].idx = t;
		if (workload == WL_FSYNC && !(w[t].lat = calloc((size_t)iters, sizeof(double)))) {
			perror("calloc");
			return 1;
		}
	}
	if (target == TARGET_LIB ? lib_setup(argv[a + 1], w, n) : posix_setup(argv[a + 1], w, n))
		return 1;

	pthread_barrier_init(&barrier, NULL, (unsigned)n + 1);
	for (int t = 0; t < n; t++) {
		if (pthread_create(&w[t].tid, NULL, worker_main, &w[t])) {
			perror("pthread_create");
			return 1;
		}
	}
	pthread_barrier_wait(&barrier);
	start_time = now();
	pthread_barrier_wait(&barrier);
	pthread_barrier_wait(&barrier);
	t1 = now();
	for (int t = 0; t < n; t++) {
		pthread_join(w[t].tid, NULL);
		done += w[t].done;
		errors += w[t].errors;
	}
	status = report_errors(w, n);
	if (sync_all(w) < 0)
		status = 1;
	t2 = now();
	if (fsync_percentiles(w, n, &p50, &p99) < 0)
		status = 1;
	printf("RESULT workload=%s threads=%d ops=%ld secs=%.6f sync_secs=%.6f errors=%ld "
	       "capped=%d p50_us=%.1f p99_us=%.1f\n", argv[a + 2], n, done, t1 - start_time,
	       t2 - t1, errors, atomic_load(&capped), p50, p99);
	fflush(stdout);
	if (teardown(w, n))
		status = 1;
	pthread_barrier_destroy(&barrier);
	for (int t = 0; t < n; t++)
		free(w[t].lat);
	free(w);
	return status;
}
