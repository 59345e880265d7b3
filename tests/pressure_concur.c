/*
 * pressure_concur.c - the write path under memory pressure: a 2 MiB buffer
 * cache, so commits happen in the middle of the work and metadata blocks
 * are evicted and read back while other threads keep changing them.
 *
 * Four threads each create 5,000 files in a directory of their own, write
 * 64 KiB into every tenth and unlink every third; then every written file
 * that survives must read back exactly, the unmount must succeed, and
 * e2fsck -fn must find nothing (the caller, tests/run.sh, gives the image).
 *
 * This caught blocks evicted while their commit was still writing them,
 * then read back older from disk (a bitmap whose checksum no longer matched).
 */
#include "uext4.h"
#include "t.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define THREADS 4
#define FILES 5000
#define WSIZE 65536

static uext4_fs *fs;
static uint64_t dirs[THREADS];
static pthread_mutex_t fail_lock = PTHREAD_MUTEX_INITIALIZER;

static void failf(const char *what, long t, int i)
{
	pthread_mutex_lock(&fail_lock);
	if (t_failures++ < 10)
		printf("FAIL: thread %ld file %d: %s: %s\n", t, i, what, uext4_last_error());
	pthread_mutex_unlock(&fail_lock);
}

static void fill(char *buf, long t, int i)
{
	for (int k = 0; k < WSIZE; k++)
		buf[k] = (char)(t * 31 + i * 7 + k);
}

static bool written(int i) { return i % 10 == 0; }
static bool unlinked(int i) { return i % 3 == 2 && i + 1 < FILES; }

static void *work(void *arg)
{
	long t = (long)arg;
	char name[32], *buf = malloc(WSIZE);
	struct uext4_stat st;

	for (int i = 0; i < FILES && buf; i++) {
		snprintf(name, sizeof(name), "f%d", i);
		if (uext4_create(fs, dirs[t], name, 0644, &st)) {
			failf("create", t, i);
			break;
		}
		if (written(i)) {
			uext4_file *f;

			fill(buf, t, i);
			if (uext4_open(fs, st.ino, O_WRONLY, &f) ||
			    uext4_pwrite(f, buf, WSIZE, 0) != WSIZE)
				failf("write", t, i);
			else
				uext4_release(f);
		}
		if (i % 3 == 0 && i > 0) {
			snprintf(name, sizeof(name), "f%d", i - 1);
			if (uext4_unlink(fs, dirs[t], name))
				failf("unlink", t, i - 1);
		}
	}
	free(buf);
	return NULL;
}

static void verify(long t)
{
	char name[32], *want = malloc(WSIZE), *got = malloc(WSIZE);
	struct uext4_stat st;

	for (int i = 0; i < FILES && want && got; i++) {
		uext4_file *f;

		snprintf(name, sizeof(name), "f%d", i);
		int r = uext4_lookup(fs, dirs[t], name, &st);
		if (unlinked(i)) {
			if (r != -ENOENT)
				failf("unlinked file still there", t, i);
			continue;
		}
		if (r) {
			failf("lookup", t, i);
			continue;
		}
		if (!written(i))
			continue;
		fill(want, t, i);
		if (uext4_open(fs, st.ino, O_RDONLY, &f) || uext4_pread(f, got, WSIZE, 0) != WSIZE ||
		    memcmp(got, want, WSIZE) != 0)
			failf("read back", t, i);
		else
			uext4_release(f);
	}
	free(want);
	free(got);
}

int main(int argc, char **argv)
{
	struct uext4_opts o = {.cache_bytes = 2 << 20};
	struct uext4_counters c;
	pthread_t th[THREADS];

	if (argc != 2) {
		fprintf(stderr, "usage: pressure_concur IMAGE (a fresh ext4 image of >= 512 MiB)\n");
		return 2;
	}
	printf("pressure_concur: %d threads x %d files, 2 MiB cache, on %s\n", THREADS, FILES,
	       argv[1]);
	if (uext4_mount(argv[1], &o, &fs)) {
		printf("FAIL: mount: %s\n", uext4_last_error());
		return 1;
	}
	for (long t = 0; t < THREADS; t++) {
		struct uext4_stat d;
		char name[24];

		snprintf(name, sizeof(name), "d%ld", t);
		if (uext4_mkdir(fs, UEXT4_ROOT_INO, name, 0755, &d)) {
			printf("FAIL: mkdir: %s\n", uext4_last_error());
			return 1;
		}
		dirs[t] = d.ino;
	}
	for (long t = 0; t < THREADS; t++)
		pthread_create(&th[t], NULL, work, (void *)t);
	for (int t = 0; t < THREADS; t++)
		pthread_join(th[t], NULL);
	for (long t = 0; t < THREADS; t++)
		verify(t);
	uext4_get_counters(fs, &c);
	printf("cache evictions during the run: %llu\n", (unsigned long long)c.cache_evictions);
	if (c.cache_evictions == 0)
		printf("FAIL: no eviction happened: the test did not test pressure\n"), t_failures++;
	if (uext4_umount(fs)) {
		printf("FAIL: umount: %s\n", uext4_last_error());
		t_failures++;
	}
	if (t_fsck_clean(argv[1]))
		printf("e2fsck -fn: clean\n");
	printf("%s\n", t_failures ? "pressure_concur: FAIL" : "pressure_concur: PASS");
	return t_failures ? 1 : 0;
}
