/*
 * fuse_loop_bench.c - N client threads hammer a mounted bench/nullfs.
 *
 *   fuse_loop_bench MOUNTPOINT THREADS OPS stat|open|read
 *
 * stat: stat() of distinct names (each thread its own names), one LOOKUP
 *       per call since nullfs uses zero timeouts;
 * open: open()+close() of a distinct name;
 * read: pread() 4 KiB at offset 0 of a file opened once per thread
 *       (nullfs sets direct_io, so every read is a READ request).
 * OPS operations in total are split among the threads.  Prints ops/s.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

struct client {
	pthread_t tid;
	int id;
	long ops;
	const char *mnt, *mode;
	int failed;
};

static void *client_run(void *arg)
{
	struct client *c = arg;
	char path[4096], buf[4096];
	struct stat st;
	int fd = -1;

	if (!strcmp(c->mode, "read")) {
		snprintf(path, sizeof(path), "%s/r%d", c->mnt, c->id);
		fd = open(path, O_RDONLY);
		if (fd < 0) {
			c->failed = errno;
			return NULL;
		}
	}
	for (long i = 0; i < c->ops; i++) {
		snprintf(path, sizeof(path), "%s/t%d_%ld", c->mnt, c->id, i % 4096);
		if (!strcmp(c->mode, "stat")) {
			if (stat(path, &st))
				c->failed = errno;
		} else if (!strcmp(c->mode, "open")) {
			int f = open(path, O_RDONLY);
			if (f < 0)
				c->failed = errno;
			else
				close(f);
		} else if (pread(fd, buf, sizeof(buf), 0) != (ssize_t)sizeof(buf)) {
			c->failed = errno ? errno : EIO;
		}
	}
	if (fd >= 0)
		close(fd);
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc != 5) {
		fprintf(stderr, "usage: fuse_loop_bench MOUNTPOINT THREADS OPS stat|open|read\n");
		return 2;
	}
	int n = atoi(argv[2]);
	long ops = atol(argv[3]);
	struct client *c = calloc((size_t)n, sizeof(*c));
	struct timespec t0, t1;

	if (n <= 0 || ops <= 0 || !c)
		return 2;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int i = 0; i < n; i++) {
		c[i] = (struct client){ .id = i, .ops = ops / n, .mnt = argv[1], .mode = argv[4] };
		pthread_create(&c[i].tid, NULL, client_run, &c[i]);
	}
	for (int i = 0; i < n; i++)
		pthread_join(c[i].tid, NULL);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	for (int i = 0; i < n; i++)
		if (c[i].failed) {
			fprintf(stderr, "client %d: %s\n", i, strerror(c[i].failed));
			return 1;
		}
	double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	printf("%.0f\n", (double)(ops / n * n) / s);
	free(c);
	return 0;
}
