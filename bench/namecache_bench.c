/*
 * namecache_bench.c - warm path lookup (stat by path) on the library path,
 * with the name cache on and off, in a linear and an htree directory.
 *
 *   namecache_bench IMAGE_LINEAR IMAGE_HTREE [ENTRIES] [REPS] [ROUNDS]
 *
 * IMAGE_LINEAR is a fresh mke2fs image without dir_index (so a directory
 * stays linear however large it grows), IMAGE_HTREE one with it.  The
 * benchmark fills /d with ENTRIES files (default 2000) in each, then for
 * cache on and off, 1 and 2 threads: mounts, runs one cold pass of
 * uext4_stat_path("/d/NAME") over every name (threads split the names),
 * then REPS warm passes (default 5; each goes over the names ROUNDS times,
 * default 20), and prints the median warm rate:
 *
 *   RESULT dir=linear|htree cache=on|off threads=N ops_per_sec=X
 *
 * NCB_CACHE=on (or off) runs only that half (for profiling).
 * Public API only (include/uext4.h).
 */
#include "uext4.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

static int entries = 2000;
static int rounds = 20;         /* times a pass goes over the names */

struct job {
	uext4_fs *fs;
	int first, step;
	long errors;
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

static void *stat_some(void *arg)
{
	struct job *j = arg;
	struct uext4_stat st;
	char path[64];

	for (int r = 0; r < rounds; r++)
		for (int i = j->first; i < entries; i += j->step) {
			name_of(path, sizeof(path), i);
			if (uext4_stat_path(j->fs, path, &st))
				j->errors++;
		}
	return NULL;
}

/* One pass over every name with n threads: seconds. */
static double pass(uext4_fs *fs, int n)
{
	pthread_t t[16];
	struct job j[16];
	double t0 = now();

	for (int k = 0; k < n; k++) {
		j[k] = (struct job){.fs = fs, .first = k, .step = n};
		pthread_create(&t[k], NULL, stat_some, &j[k]);
	}
	for (int k = 0; k < n; k++) {
		pthread_join(t[k], NULL);
		if (j[k].errors) {
			fprintf(stderr, "namecache_bench: %ld stat errors\n", j[k].errors);
			exit(1);
		}
	}
	return now() - t0;
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
	double rate[64];

	pass(fs, threads); /* cold: loads inodes, directory blocks, the cache */
	for (int r = 0; r < reps; r++)
		rate[r] = (double)entries * rounds / pass(fs, threads);
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
			"[ROUNDS]\n");
		return 2;
	}
	if (argc > 3)
		entries = atoi(argv[3]);
	if (argc > 4)
		reps = atoi(argv[4]);
	if (argc > 5)
		rounds = atoi(argv[5]);
	if (reps < 1 || reps > 64 || entries < 1 || rounds < 1) {
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
