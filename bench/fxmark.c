/*
 * fxmark.c - FxMark-style metadata workloads for N threads (how metadata
 * operations scale with cores), through the library or through any
 * mounted directory.
 *
 *   fxmark [-d SECS] [-n MAXOPS] [-e ENTRIES] [-S] [-F [-U]] lib IMAGE THREADS WORKLOAD...
 *       libuext4 directly (public API only): mount read-write, run each
 *       workload in turn, unmount (the write-back is not timed).
 *   fxmark [-d SECS] [-n MAXOPS] [-e ENTRIES] [-S] [-F [-U]] posix DIR THREADS WORKLOAD...
 *       system calls on a mounted directory (our FUSE mount, the kernel's
 *       ext4, fuse2fs, bench/nullfs --create).
 *
 * Each workload gets a directory of its own, /NAME, made before its clock
 * starts, with a private directory per thread (/NAME/tNN) and a shared one
 * (/NAME/s).  Workloads (L = private directory, M = the shared one):
 *   MWCL, MWCM   create empty files (O_CREAT|O_EXCL + close / uext4_create)
 *   MWUL, MWUM   unlink files made in the setup
 *   MWRL         rename a file to a new name in the same private directory
 *   MWRM         rename a file from the private directory into the shared one
 *   DWTL         shrink a private file by 4 KiB per truncate; when it is
 *                empty, write it back to 1 MiB (timed, not counted)
 *   MRPL, MRPM   stat a path five directories deep (tNN/a/b/c/d/e, or
 *                s/a/b/c/d/e for all threads): warm path lookup
 *   MRDL, MRDM   list a directory of ENTRIES files (default 100), private
 *                or shared; one op = one whole listing
 * Timing: every thread runs until SECS seconds (default 1) have passed since
 * the start, or it has done MAXOPS operations (default 1000000), checked
 * between operations.  The unlink and rename workloads first make their
 * files the same way (for up to SECS seconds or MAXOPS files per thread,
 * not timed), then do one operation per file made: such a run may end
 * before SECS.  ops/s = operations of all threads / (last thread's end -
 * start).
 *
 * Prints one line per workload:
 *   RESULT workload=W threads=N ops=TOTAL secs=S ops_per_sec=R errors=E
 *          meta_reads=M itable_reads=I cpu_secs=C worker_cpu_secs=WC
 * cpu_secs: CPU time the whole process used during the timed part (user +
 * system, every thread: the workers and, on the lib path, the library's
 * own threads such as the commit timer).  On a shared machine a rate can
 * be limited by the CPU the threads were given rather than by what an
 * operation costs: ops/cpu_secs is the cost, and cpu_secs / secs against
 * the thread count shows how much CPU the run got (a loaded machine
 * preempts one thread as often as it runs it).  Not a replacement for
 * ops_per_sec, which stays the wall-clock rate.
 * worker_cpu_secs: the part of cpu_secs the worker threads used themselves;
 * the rest is the library's own threads (the commit) and the kernel's work
 * for them.  On P CPUs, N workers can at best run min(N, P / (1 + rest /
 * worker)) times as fast as one: a single worker gets the commit's CPU from
 * another core for free, N workers share the cores with it.
 * meta_reads / itable_reads: metadata blocks (every kind but file data) and
 * inode-table blocks the library read from the device during the timed
 * part (lib only; -1 for posix).  A failed operation is counted in errors
 * (the first one is printed) and the exit status is 1.
 *
 * -F: casefolded directories: each workload's directory /NAME gets +F
 * (chattr +F: FS_IOC_SETFLAGS / uext4_set_flags) while it is empty, and
 * every directory made under it inherits it.  Needs a file system made
 * with -O casefold (and, through a mount, one whose driver has casefold).
 * -U (with -F): MRPL and MRPM stat their path in upper case (T00/A/B/...),
 * a case other than the one the names were made in.
 *
 * -S: statistics of each workload's timed part (lock classes, blocks read
 * and written, journal; on a uext4 FUSE mount also its requests), one more
 * line per workload after its RESULT line:
 *   STATS workload=W threads=N {JSON of uext4_stats_format}
 * lib: uext4_stats_enable/reset/format on the mount; posix: the virtual
 * xattr user.uext4.stats.* of DIR (what `uext4 stats --json` reads), so
 * only on a uext4 mount: elsewhere no STATS line.  Counting costs a little:
 * runs with -S are for the reasons, not for the throughput.
 */
#include "uext4.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#define MAX_THREADS 256
#define TRUNC_BYTES (1u << 20)   /* DWTL's file size when full */
#define TRUNC_STEP 4096u
#define NAME_LEN 64
#define PATH_LEN 512
#define STATS_LEN 65536   /* the most one getxattr returns (XATTR_SIZE_MAX) */

enum backend { BACKEND_LIB, BACKEND_POSIX };

enum workload {
	WL_MWCL, WL_MWCM, WL_MWUL, WL_MWUM, WL_MWRL, WL_MWRM,
	WL_DWTL, WL_MRPL, WL_MRPM, WL_MRDL, WL_MRDM, WL_COUNT
};
static const char *const wl_names[WL_COUNT] = {
	"MWCL", "MWCM", "MWUL", "MWUM", "MWRL", "MWRM",
	"DWTL", "MRPL", "MRPM", "MRDL", "MRDM",
};

/* Set in main before any thread starts; read-only while they run. */
static enum backend backend;
static uext4_fs *bench_fs;      /* lib */
static int root_fd = -1;        /* posix: the mounted directory */
static double run_secs = 1.0;
static long max_ops = 1000000;
static long dir_entries = 100;
static int nthreads;
static int want_stats;          /* -S */
static int casefold;            /* -F */
static int upper_paths;         /* -U */
static char stats_buf[STATS_LEN + 1];
static char trunc_buf[TRUNC_BYTES];

/* A directory as each back end names it.  path is relative to the root
 * (posix) or absolute (lib), for the path-lookup workloads. */
struct dir {
	uint64_t ino;   /* lib */
	int fd;         /* posix */
	char path[PATH_LEN];
};

/* One per thread; only that thread writes it while the workload runs. */
struct worker {
	pthread_t tid;
	int idx;
	enum workload wl;
	struct dir priv;            /* tNN */
	const struct dir *shared;   /* s */
	char deep[PATH_LEN + 16];   /* MRP*: the path to stat */
	long made;                  /* files made by the setup */
	long done, errors;
	int first_err;
	const char *first_op;
	double end;                 /* when it stopped */
	double cpu;                 /* its own CPU time in the timed part */
	uint64_t file_ino;          /* DWTL (lib) */
	uext4_file *file;           /* DWTL (lib) */
	int file_fd;                /* DWTL (posix) */
};

static struct worker workers[MAX_THREADS];
static struct dir shared_dir, wl_dir;
static pthread_barrier_t barrier;
static double start_time;       /* written by main between the two barriers */
static double start_cpu;        /* process CPU time at start_time; main only */

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* CPU time of every thread of the process so far. */
static double process_cpu(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* CPU time of the calling thread so far. */
static double thread_cpu(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static int failed(struct worker *w, const char *op, int err)
{
	if (!w->errors++) {
		w->first_err = -err;
		w->first_op = op;
	}
	return err;
}

/* ---- the operations of each back end ------------------------------------------ */

static int make_dir(const struct dir *parent, const char *name, struct dir *out)
{
	int n = snprintf(out->path, sizeof(out->path), "%s/%s", parent->path, name);

	if (n < 0 || (size_t)n >= sizeof(out->path))
		return -ENAMETOOLONG;
	if (backend == BACKEND_LIB) {
		struct uext4_stat st;
		int err = uext4_mkdir(bench_fs, parent->ino, name, 0755, &st);

		if (!err)
			out->ino = st.ino;
		return err;
	}
	if (mkdirat(parent->fd, name, 0755))
		return -errno;
	out->fd = openat(parent->fd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	return out->fd < 0 ? -errno : 0;
}

/* chattr +F on the empty directory d (-F). */
static int set_casefold(const struct dir *d)
{
	if (backend == BACKEND_LIB) {
		uint32_t flags;
		int err = uext4_get_flags(bench_fs, d->ino, &flags);

		return err ? err : uext4_set_flags(bench_fs, d->ino, flags | FS_CASEFOLD_FL);
	}
	int flags;

	if (ioctl(d->fd, FS_IOC_GETFLAGS, &flags) ||
	    (flags |= FS_CASEFOLD_FL, ioctl(d->fd, FS_IOC_SETFLAGS, &flags)))
		return -errno;
	return 0;
}

static void close_dir(struct dir *d)
{
	if (backend == BACKEND_POSIX && d->fd >= 0)
		close(d->fd);
	d->fd = -1;
}

static int create_file(const struct dir *d, const char *name)
{
	if (backend == BACKEND_LIB)
		return uext4_create(bench_fs, d->ino, name, S_IFREG | 0644, NULL);
	int fd = openat(d->fd, name, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);

	if (fd < 0)
		return -errno;
	return close(fd) ? -errno : 0;
}

static int unlink_file(const struct dir *d, const char *name)
{
	if (backend == BACKEND_LIB)
		return uext4_unlink(bench_fs, d->ino, name);
	return unlinkat(d->fd, name, 0) ? -errno : 0;
}

static int rename_file(const struct dir *from, const char *old, const struct dir *to,
		       const char *new)
{
	if (backend == BACKEND_LIB)
		return uext4_rename(bench_fs, from->ino, old, to->ino, new, 0);
	return renameat(from->fd, old, to->fd, new) ? -errno : 0;
}

static int stat_path(const char *path)
{
	if (backend == BACKEND_LIB) {
		struct uext4_stat st;

		return uext4_stat_path(bench_fs, path, &st);
	}
	struct stat st;

	return fstatat(root_fd, path + 1, &st, 0) ? -errno : 0;  /* path + 1: skip the '/' */
}

static int count_entry(void *ctx, const char *name, size_t namelen, uint64_t ino,
		       unsigned dtype, uint64_t next_cookie)
{
	++*(long *)ctx;
	return 0;
}

/* List a whole directory; returns the number of entries or -errno. */
static long list_dir(const struct dir *d)
{
	long n = 0;

	if (backend == BACKEND_LIB) {
		int err = uext4_readdir(bench_fs, d->ino, 0, count_entry, &n);

		return err < 0 ? err : n;
	}
	int fd = openat(d->fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *dp = fd < 0 ? NULL : fdopendir(fd);

	if (!dp) {
		int err = -errno;

		if (fd >= 0)
			close(fd);
		return err;
	}
	errno = 0;
	while (readdir(dp))
		n++;
	int err = errno ? -errno : 0;

	closedir(dp);
	return err ? err : n;
}

/* DWTL's file: made and filled to TRUNC_BYTES in the setup. */
static int trunc_open(struct worker *w)
{
	if (backend == BACKEND_LIB) {
		struct uext4_stat st;
		int err = uext4_create(bench_fs, w->priv.ino, "file", S_IFREG | 0644, &st);

		if (err < 0)
			return err;
		w->file_ino = st.ino;
		return uext4_open(bench_fs, st.ino, O_RDWR, &w->file);
	}
	w->file_fd = openat(w->priv.fd, "file", O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0644);
	return w->file_fd < 0 ? -errno : 0;
}

static int trunc_fill(struct worker *w)
{
	ssize_t n = backend == BACKEND_LIB ? uext4_pwrite(w->file, trunc_buf, TRUNC_BYTES, 0)
					   : pwrite(w->file_fd, trunc_buf, TRUNC_BYTES, 0);

	if (n < 0)
		return backend == BACKEND_LIB ? (int)n : -errno;
	return n == TRUNC_BYTES ? 0 : -EIO;
}

static int trunc_to(struct worker *w, uint64_t size)
{
	if (backend == BACKEND_LIB) {
		struct uext4_setattr a = { .valid = UEXT4_SET_SIZE, .size = size };

		return uext4_setattr(bench_fs, w->file_ino, &a, NULL);
	}
	return ftruncate(w->file_fd, (off_t)size) ? -errno : 0;
}

static void trunc_close(struct worker *w)
{
	if (backend == BACKEND_LIB && w->file)
		uext4_release(w->file);
	else if (backend == BACKEND_POSIX && w->file_fd >= 0)
		close(w->file_fd);
	w->file = NULL;
	w->file_fd = -1;
}

/* ---- names ---------------------------------------------------------------------- */

/* The i-th file of a thread: "fN" in its private directory, "tNN-N" in the
 * shared one (so that threads never pick the same name). */
static void file_name(const struct worker *w, int shared, long i, char *buf)
{
	if (shared)
		snprintf(buf, NAME_LEN, "t%02d-%ld", w->idx, i);
	else
		snprintf(buf, NAME_LEN, "f%ld", i);
}

static int uses_shared(enum workload wl)
{
	return wl == WL_MWCM || wl == WL_MWUM || wl == WL_MRPM || wl == WL_MRDM;
}

/* ---- setup (not timed; run by every thread in parallel) ------------------------- */

/* Files for the unlink and rename workloads: for up to run_secs or max_ops. */
static int setup_files(struct worker *w)
{
	const struct dir *d = uses_shared(w->wl) ? w->shared : &w->priv;
	double deadline = now() + run_secs;
	char name[NAME_LEN];

	for (w->made = 0; w->made < max_ops && now() < deadline; w->made++) {
		file_name(w, d == w->shared, w->made, name);
		int err = create_file(d, name);

		if (err < 0)
			return failed(w, "setup create", err);
	}
	return 0;
}

/* A chain of five directories a/b/c/d/e under base; its path into deep. */
static int setup_deep(struct worker *w, const struct dir *base)
{
	static const char *const names[] = { "a", "b", "c", "d", "e" };
	struct dir cur = *base, next;
	int err = 0;

	for (int i = 0; i < 5 && !err; i++) {
		err = make_dir(&cur, names[i], &next);
		if (i)
			close_dir(&cur);
		cur = next;
	}
	if (err)
		return failed(w, "setup mkdir", err);
	snprintf(w->deep, sizeof(w->deep), "%s", cur.path);
	close_dir(&cur);
	return 0;
}

static int setup_listing(struct worker *w, const struct dir *d)
{
	char name[NAME_LEN];

	for (long i = 0; i < dir_entries; i++) {
		snprintf(name, sizeof(name), "e%ld", i);
		int err = create_file(d, name);

		if (err < 0)
			return failed(w, "setup create", err);
	}
	return 0;
}

/* -U: the path to stat in upper case (only the workload's own names are
 * in lower case; the root's directories are not casefolded, and their
 * names are upper case already). */
static void upper_case(char *path)
{
	for (char *c = path; *c; c++)
		if (*c >= 'a' && *c <= 'z')
			*c = (char)(*c - 'a' + 'A');
}

static int setup_paths(struct worker *w)
{
	int err;

	switch (w->wl) {
	case WL_MWUL: case WL_MWUM: case WL_MWRL: case WL_MWRM:
		return setup_files(w);
	case WL_DWTL:
		err = trunc_open(w);
		if (!err)
			err = trunc_fill(w);
		return err < 0 ? failed(w, "setup write", err) : 0;
	case WL_MRPL:
		return setup_deep(w, &w->priv);
	case WL_MRPM:   /* thread 0 makes the shared chain, the others use it */
		if (w->idx == 0)
			return setup_deep(w, w->shared);
		snprintf(w->deep, sizeof(w->deep), "%s/a/b/c/d/e", w->shared->path);
		return 0;
	case WL_MRDL:
		return setup_listing(w, &w->priv);
	case WL_MRDM:
		return w->idx == 0 ? setup_listing(w, w->shared) : 0;
	default:
		return 0;
	}
}

static int setup(struct worker *w)
{
	int err = setup_paths(w);

	if (!err && upper_paths)
		upper_case(w->deep);
	return err;
}

/* ---- one operation of each workload --------------------------------------------- */

static int do_trunc(struct worker *w, uint64_t *size)
{
	int err;

	if (*size == 0) {   /* empty: fill it again, not counted as an op */
		err = trunc_fill(w);
		if (err < 0)
			return failed(w, "write", err);
		*size = TRUNC_BYTES;
	}
	*size -= TRUNC_STEP;
	err = trunc_to(w, *size);
	return err < 0 ? failed(w, "truncate", err) : 0;
}

/* Operation i of w's workload; 1 when the workload has no more to do. */
static int do_op(struct worker *w, long i, uint64_t *size)
{
	char name[NAME_LEN], name2[NAME_LEN];
	int err = 0;

	switch (w->wl) {
	case WL_MWCL: case WL_MWCM:
		file_name(w, w->wl == WL_MWCM, i, name);
		err = create_file(w->wl == WL_MWCM ? w->shared : &w->priv, name);
		return err < 0 ? failed(w, "create", err) : 0;
	case WL_MWUL: case WL_MWUM:
		if (i >= w->made)
			return 1;
		file_name(w, w->wl == WL_MWUM, i, name);
		err = unlink_file(w->wl == WL_MWUM ? w->shared : &w->priv, name);
		return err < 0 ? failed(w, "unlink", err) : 0;
	case WL_MWRL: case WL_MWRM:
		if (i >= w->made)
			return 1;
		file_name(w, 0, i, name);
		if (w->wl == WL_MWRL) {
			snprintf(name2, sizeof(name2), "r%ld", i);
			err = rename_file(&w->priv, name, &w->priv, name2);
		} else {
			file_name(w, 1, i, name2);
			err = rename_file(&w->priv, name, w->shared, name2);
		}
		return err < 0 ? failed(w, "rename", err) : 0;
	case WL_DWTL:
		do_trunc(w, size);   /* a failure is in w->errors */
		return 0;
	case WL_MRPL: case WL_MRPM:
		err = stat_path(w->deep);
		return err < 0 ? failed(w, "stat", err) : 0;
	case WL_MRDL: case WL_MRDM: {
		long n = list_dir(w->wl == WL_MRDM ? w->shared : &w->priv);

		if (n < 0)
			failed(w, "readdir", (int)n);
		return 0;
	}
	default:
		return 1;
	}
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	uint64_t size = TRUNC_BYTES;
	int ok = setup(w) >= 0;

	pthread_barrier_wait(&barrier);   /* setup done */
	pthread_barrier_wait(&barrier);   /* start_time set */
	double deadline = start_time + run_secs;
	double cpu0 = thread_cpu();

	for (long i = 0; ok && i < max_ops; i++) {
		if (now() >= deadline || do_op(w, i, &size))
			break;
		if (w->errors == 0)
			w->done++;
		else
			break;   /* stop at the first failure: it is reported */
	}
	w->end = now();
	w->cpu = thread_cpu() - cpu0;
	if (w->wl == WL_DWTL)
		trunc_close(w);
	return NULL;
}

/* ---- one workload ---------------------------------------------------------------- */

static struct dir root_dir(void)
{
	struct dir d = { .ino = UEXT4_ROOT_INO, .fd = root_fd, .path = "" };

	return d;
}

/* /NAME, /NAME/s and /NAME/tNN, made before the threads start. */
static int make_dirs(enum workload wl)
{
	struct dir root = root_dir();
	char name[NAME_LEN];
	int err = make_dir(&root, wl_names[wl], &wl_dir);

	if (!err && casefold)
		err = set_casefold(&wl_dir);
	if (!err)
		err = make_dir(&wl_dir, "s", &shared_dir);
	for (int t = 0; t < nthreads && !err; t++) {
		snprintf(name, sizeof(name), "t%02d", t);
		err = make_dir(&wl_dir, name, &workers[t].priv);
	}
	if (err)
		fprintf(stderr, "fxmark: %s: making its directories: %s%s%s\n", wl_names[wl],
			strerror(-err), backend == BACKEND_LIB ? " - " : "",
			backend == BACKEND_LIB ? uext4_last_error() : "");
	return err;
}

static void close_dirs(void)
{
	for (int t = 0; t < nthreads; t++)
		close_dir(&workers[t].priv);
	close_dir(&shared_dir);
	close_dir(&wl_dir);
}

/* Metadata and inode-table blocks read so far (lib; -1 otherwise). */
static void meta_reads(int64_t *meta, int64_t *itable)
{
	struct uext4_counters c;

	*meta = *itable = -1;
	if (backend != BACKEND_LIB || uext4_get_counters(bench_fs, &c) < 0)
		return;
	*meta = 0;
	for (int k = 0; k < UEXT4_META_NKINDS; k++)
		if (k != UEXT4_META_DATA)
			*meta += (int64_t)c.reads[k];
	*itable = (int64_t)c.reads[UEXT4_META_INODE_TABLE];
}

/* ---- statistics (-S) ------------------------------------------------------------ */

/* The uext4 mount's report as JSON through its root's virtual xattr NAME
 * (".reset" in NAME zeroes the counters after the report is made); the
 * length, or -1 where DIR is no uext4 mount. */
static ssize_t posix_stats(const char *name)
{
	ssize_t n = fgetxattr(root_fd, name, stats_buf, STATS_LEN);

	if (n >= 0)
		stats_buf[n] = '\0';
	return n;
}

/* Before the timed part: counting on, every counter at zero. */
static void stats_begin(void)
{
	if (!want_stats)
		return;
	if (backend == BACKEND_LIB)
		uext4_stats_reset(bench_fs);
	else
		posix_stats("user.uext4.stats.on.json.reset");
}

/* After it: the STATS line (nothing where the target keeps none). */
static void stats_end(enum workload wl)
{
	ssize_t n;

	if (!want_stats)
		return;
	if (backend == BACKEND_LIB)
		n = uext4_stats_format(bench_fs, stats_buf, sizeof(stats_buf), 1);
	else
		n = posix_stats("user.uext4.stats.json.reset");
	if (n <= 0 || (size_t)n >= sizeof(stats_buf))
		return;
	while (n > 0 && stats_buf[n - 1] == '\n')
		stats_buf[--n] = '\0';
	printf("STATS workload=%s threads=%d %s\n", wl_names[wl], nthreads, stats_buf);
	fflush(stdout);
}

static int report(enum workload wl, int64_t meta0, int64_t itable0, double cpu)
{
	long ops = 0, errors = 0;
	double end = start_time, wcpu = 0;
	int64_t meta, itable;
	int status = 0;

	meta_reads(&meta, &itable);
	for (int t = 0; t < nthreads; t++) {
		struct worker *w = &workers[t];

		ops += w->done;
		errors += w->errors;
		wcpu += w->cpu;
		if (w->end > end)
			end = w->end;
		if (w->errors && !status) {
			fprintf(stderr, "fxmark: %s thread %d: %ld failures, first: %s: %s%s%s\n",
				wl_names[wl], t, w->errors, w->first_op, strerror(w->first_err),
				backend == BACKEND_LIB ? " - " : "",
				backend == BACKEND_LIB ? uext4_last_error() : "");
			status = 1;
		}
	}
	double secs = end - start_time > 1e-9 ? end - start_time : 1e-9;

	printf("RESULT workload=%s threads=%d ops=%ld secs=%.6f ops_per_sec=%.1f errors=%ld"
	       " meta_reads=%lld itable_reads=%lld cpu_secs=%.6f worker_cpu_secs=%.6f\n",
	       wl_names[wl], nthreads, ops, secs, (double)ops / secs, errors,
	       (long long)(meta < 0 ? -1 : meta - meta0),
	       (long long)(itable < 0 ? -1 : itable - itable0), cpu, wcpu);
	fflush(stdout);
	return status;
}

static int run_workload(enum workload wl)
{
	int64_t meta0, itable0;

	if (make_dirs(wl))
		return 1;
	for (int t = 0; t < nthreads; t++) {
		struct worker *w = &workers[t];
		struct dir priv = w->priv;

		memset(w, 0, sizeof(*w));
		w->priv = priv;
		w->idx = t;
		w->wl = wl;
		w->shared = &shared_dir;
		w->file_fd = -1;
		if (pthread_create(&w->tid, NULL, worker_main, w)) {
			perror("fxmark: pthread_create");
			exit(1);
		}
	}
	pthread_barrier_wait(&barrier);   /* every setup is done */
	meta_reads(&meta0, &itable0);
	stats_begin();
	start_cpu = process_cpu();
	start_time = now();
	pthread_barrier_wait(&barrier);
	for (int t = 0; t < nthreads; t++)
		pthread_join(workers[t].tid, NULL);
	int status = report(wl, meta0, itable0, process_cpu() - start_cpu);

	stats_end(wl);

	close_dirs();
	return status;
}

/* ---- main ------------------------------------------------------------------------ */

static int usage(void)
{
	fprintf(stderr, "usage: fxmark [-d SECS] [-n MAXOPS] [-e ENTRIES] [-S] [-F [-U]] lib IMAGE THREADS WORKLOAD...\n"
			"       fxmark [-d SECS] [-n MAXOPS] [-e ENTRIES] [-S] [-F [-U]] posix DIR THREADS WORKLOAD...\n"
			"workloads: MWCL MWCM MWUL MWUM MWRL MWRM DWTL MRPL MRPM MRDL MRDM, or all\n");
	return 2;
}

static int parse_workloads(int argc, char **argv, enum workload *list, int *n)
{
	*n = 0;
	for (int i = 0; i < argc; i++) {
		int found = 0;

		for (int k = 0; k < WL_COUNT; k++) {
			if (!strcmp(argv[i], "all") || !strcmp(argv[i], wl_names[k])) {
				if (*n < 64)
					list[(*n)++] = (enum workload)k;
				found = 1;
			}
		}
		if (!found) {
			fprintf(stderr, "fxmark: unknown workload %s\n", argv[i]);
			return -1;
		}
	}
	return *n ? 0 : -1;
}

static int open_target(const char *where)
{
	if (backend == BACKEND_LIB) {
		struct uext4_opts o = { 0 };

		if (uext4_mount(where, &o, &bench_fs) < 0) {
			fprintf(stderr, "fxmark: mount %s: %s\n", where, uext4_last_error());
			return -1;
		}
		/* FXMARK_JOURNAL_STATS=1: commit latency and handle hold-back
		 * at the end (the statistics cost a little: not for throughput). */
		if (getenv("FXMARK_JOURNAL_STATS"))
			uext4_stats_enable(bench_fs, 1);
		return 0;
	}
	root_fd = open(where, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (root_fd < 0) {
		fprintf(stderr, "fxmark: %s: %s\n", where, strerror(errno));
		return -1;
	}
	return 0;
}

static void print_journal_stats(void)
{
	struct uext4_stats st;
	const struct uext4_journal_stats *j = &st.journal;
	uint64_t c;

	if (uext4_stats_get(bench_fs, &st) < 0)
		return;
	c = j->commits ? j->commits : 1;
	fprintf(stderr,
		"JOURNAL commits=%llu blocks_per_commit=%llu commit_avg_us=%llu "
		"commit_max_us=%llu blocked_avg_us=%llu blocked_max_us=%llu handle_waits=%llu "
		"handle_wait_avg_us=%llu\n",
		(unsigned long long)j->commits, (unsigned long long)(j->blocks / c),
		(unsigned long long)(j->commit_ns / c / 1000),
		(unsigned long long)(j->commit_max_ns / 1000),
		(unsigned long long)(j->blocked_ns / c / 1000),
		(unsigned long long)(j->blocked_max_ns / 1000),
		(unsigned long long)j->handle_waits,
		(unsigned long long)(j->handle_waits ? j->handle_wait_ns / j->handle_waits / 1000 : 0));
}

static int close_target(void)
{
	if (backend == BACKEND_POSIX)
		return close(root_fd) ? 1 : 0;
	if (getenv("FXMARK_JOURNAL_STATS"))
		print_journal_stats();
	if (uext4_umount(bench_fs) < 0) {
		fprintf(stderr, "fxmark: umount: %s\n", uext4_last_error());
		return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	enum workload list[64];
	int opt, nwl, status = 0;

	while ((opt = getopt(argc, argv, "+d:n:e:SFU")) != -1) {
		switch (opt) {
		case 'd': run_secs = atof(optarg); break;
		case 'n': max_ops = atol(optarg); break;
		case 'e': dir_entries = atol(optarg); break;
		case 'S': want_stats = 1; break;
		case 'F': casefold = 1; break;
		case 'U': upper_paths = 1; break;
		default: return usage();
		}
	}
	if (argc - optind < 4 || (upper_paths && !casefold) || run_secs <= 0 || max_ops < 1 || dir_entries < 0)
		return usage();
	if (!strcmp(argv[optind], "lib"))
		backend = BACKEND_LIB;
	else if (!strcmp(argv[optind], "posix"))
		backend = BACKEND_POSIX;
	else
		return usage();
	nthreads = atoi(argv[optind + 2]);
	if (nthreads < 1 || nthreads > MAX_THREADS)
		return usage();
	if (parse_workloads(argc - optind - 3, argv + optind + 3, list, &nwl))
		return usage();
	memset(trunc_buf, 0x5a, sizeof(trunc_buf));
	if (open_target(argv[optind + 1]))
		return 1;
	if (want_stats && backend == BACKEND_LIB)
		uext4_stats_enable(bench_fs, 1);
	pthread_barrier_init(&barrier, NULL, (unsigned)nthreads + 1);
	for (int i = 0; i < nwl; i++)
		status |= run_workload(list[i]);
	pthread_barrier_destroy(&barrier);
	status |= close_target();
	return status;
}
