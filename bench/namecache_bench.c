/*
 * namecache_bench.c - warm path lookup (stat by path) on the library path,
 * with the name cache on and off, in a linear and an htree directory.
 *
 *   namecache_bench IMAGE_LINEAR IMAGE_HTREE [ENTRIES] [REPS] [SECS]
 *
 * IMAGE_LINEAR is a fresh mke2fs image without dir_index (so a directory
 * stays linear however large it grows), IMAGE_HTREE one with it.  The
 * benchmark fills /d with ENTRIES files (default 2000) in each, then for
 * cache on and off, 1 and 2 threads: mounts, runs one cold pass of
 * uext4_stat_path("/d/NAME") over every name (threads split the names),
 * then REPS warm passes (default 5) of SECS seconds each (default 0.3;
 * threads go round their names until then), and prints the median rate:
 *
 *   RESULT dir=linear|htree cache=on|off threads=N ops_per_sec=X
 *
 * NCB_CACHE=on (or off) runs only that half (for profiling).
 * Public API only (include/uext4.h).
 */
#include "uext4.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

static int entries = 2000;
static double pass_secs = 0.3;  /* length of a warm pass */

struct job {
	uext4_fs *fs;
	int first, step;
	const atomic_bool *stop;        /* NULL: one round over the names */
	long ops, errors;
};

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void name_of(char *buf, size_t n, int i)
{
	snprintf(buf, n, "/d/file-%06d", i);
}

/* Rounds over this thread's names until told to stop (whole rounds). */
static void *stat_some(void *arg)
{
	struct job *j = arg;
	struct uext4_stat st;
	char path[64];

	do {
		for (int i = j->first; i < entries; i += j->step) {
			name_of(path, sizeof(path), i);
			if (uext4_stat_path(j->fs, path, &st))
				j->errors++;
			j->ops++;
		}
	} while (j->stop && !atomic_load_explicit(j->stop, memory_order_relaxed));
	return NULL;
}

/* n threads stat by path for pass_secs (0: one round): ops per second. */
static double pass(uext4_fs *fs, int n)
{
	pthread_t t[16];
	struct job j[16];
	atomic_bool stop = false;
	double t0 = now(), secs;
	long ops = 0;

	for (int k = 0; k < n; k++) {
		j[k] = (struct job){.fs = fs, .first = k, .step = n,
				    .stop = pass_secs > 0 ? &stop : NULL};
		pthread_create(&t[k], NULL, stat_some, &j[k]);
	}
	if (pass_secs > 0) {
		struct timespec d = {(time_t)pass_secs,
				     (long)((pass_secs - (time_t)pass_secs) * 1e9)};
		nanosleep(&d, NULL);
		atomic_store(&stop, true);
	}
	for (int k = 0; k < n; k++) {
		pthread_join(t[k], NULL);
		ops += j[k].ops;
		if (j[k].errors) {
			fprintf(stderr, "namecache_bench: %ld stat errors\n", j[k].errors);
			exit(1);
		}
	}
	secs = now() - t0;
	return ops / secs;
}

static uext4_fs *mount_image(const char *img, int cache)
{
	struct uext4_opts o = {0};
	uext4_fs *fs;

	o.no_name_cache = !cache;
	if (uext4_mount(img, &o, &fs)) {
		fprintf(stderr, "mount %s: %s\n", img, uext4_last_error());
		exit(1);
	}
	return fs;
}

static void fill(const char *img)
{
	uext4_fs *fs = mount_image(img, 1);
	struct uext4_stat st;

	if (uext4_mkdir(fs, 2, "d", 0755, &st)) {
		fprintf(stderr, "mkdir /d: %s\n", uext4_last_error());
		exit(1);
	}
	for (int i = 0; i < entries; i++) {
		char path[64];
		struct uext4_stat f;

		name_of(path, sizeof(path), i);
		if (uext4_create(fs, st.ino, path + 3, 0644, &f)) {
			fprintf(stderr, "create %s: %s\n", path, uext4_last_error());
			exit(1);
		}
	}
	uext4_umount(fs);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static void measure(const char *img, const char *kind, int cache, int threads, int reps)
{
	uext4_fs *fs = mount_image(img, cache);
	double rate[64], secs = pass_secs;

	pass_secs = 0;
	pass(fs, threads); /* cold, one round: loads inodes, directory blocks, the cache */
	pass_secs = secs;
	for (int r = 0; r < reps; r++)
		rate[r] = pass(fs, threads);
	qsort(rate, (size_t)reps, sizeof(rate[0]), cmp_double);
	printf("RESULT dir=%s cache=%s threads=%d ops_per_sec=%.0f\n", kind, cache ? "on" : "off",
	       threads, rate[reps / 2]);
	fflush(stdout);
	uext4_umount(fs);
}

int main(int argc, char **argv)
{
	int reps = 5;
	const char *only = getenv("NCB_CACHE"); /* "on" or "off": only that half */

	if (argc < 3) {
		fprintf(stderr, "usage: namecache_bench IMAGE_LINEAR IMAGE_HTREE [ENTRIES] [REPS] "
			"[SECS]\n");
		return 2;
	}
	if (argc > 3)
		entries = atoi(argv[3]);
	if (argc > 4)
		reps = atoi(argv[4]);
	if (argc > 5)
		pass_secs = atof(argv[5]);
	if (reps < 1 || reps > 64 || entries < 1 || pass_secs <= 0) {
		fprintf(stderr, "namecache_bench: bad ENTRIES or REPS\n");
		return 2;
	}
	fill(argv[1]);
	fill(argv[2]);
	for (int i = 0; i < 2; i++) {
		const char *img = argv[1 + i], *kind = i ? "htree" : "linear";

		for (int threads = 1; threads <= 2; threads++)
			for (int cache = 1; cache >= 0; cache--)
				if (!only || !strcmp(only, cache ? "on" : "off"))
					measure(img, kind, cache, threads, reps);
	}
	return 0;
}
