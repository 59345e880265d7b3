/*
 * read_bench.c - read-path benchmark: stat every entry / read every file,
 * through libuext4 directly (public API only) or through any mounted
 * directory (our FUSE mount, fuse2fs, the kernel's ext4) with POSIX calls.
 *
 *   read_bench list IMAGE
 *       print every entry of the image, one per line: "<type> <path>" with
 *       type f (regular), d (directory), l (symlink), o (other).
 *   read_bench lib IMAGE LIST stat|read THREADS PASSES
 *   read_bench posix ROOT LIST stat|read THREADS PASSES
 *       run PASSES passes over the entries of LIST (made by `list`).  Pass 1
 *       on a fresh mount is the cold pass; later passes are warm.  "stat"
 *       does lstat of every entry (path lookup from the root each time, as
 *       a program would); "read" opens and reads every regular file to EOF.
 *       THREADS threads split the list (entry i goes to thread i % THREADS).
 *       Prints one line per pass:
 *       RESULT pass=P op=OP threads=N ops=OPS bytes=BYTES secs=SECS errors=E
 *
 * The list is taken from the image through the library, so a POSIX run
 * does not warm the kernel's caches by walking the tree first.
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

#define READ_CHUNK (128 * 1024)

struct entry {
	char type;      /* f d l o */
	char *path;     /* absolute within the file system: "/a/b" */
};

/* The entry list; built before the threads start, read-only afterwards. */
static struct entry *entries;
static size_t nentries, cap_entries;

static void add_entry(char type, const char *path)
{
	if (nentries == cap_entries) {
		cap_entries = cap_entries ? 2 * cap_entries : 4096;
		entries = realloc(entries, cap_entries * sizeof(*entries));
		if (!entries) {
			perror("realloc");
			exit(1);
		}
	}
	entries[nentries].type = type;
	entries[nentries].path = strdup(path);
	if (!entries[nentries].path) {
		perror("strdup");
		exit(1);
	}
	nentries++;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* ---- list: walk the image through the library ---------------------------- */

struct dirent_list {
	char (*names)[256];
	uint64_t *inos;
	size_t n, cap;
};

static int collect(void *ctx, const char *name, size_t namelen, uint64_t ino, unsigned dtype,
		   uint64_t next_cookie)
{
	struct dirent_list *l = ctx;

	(void)dtype;
	(void)next_cookie;
	if ((namelen == 1 && name[0] == '.') || (namelen == 2 && !memcmp(name, "..", 2)))
		return 0;
	if (namelen > 255)
		return 0;
	if (l->n == l->cap) {
		l->cap = l->cap ? 2 * l->cap : 64;
		l->names = realloc(l->names, l->cap * sizeof(*l->names));
		l->inos = realloc(l->inos, l->cap * sizeof(*l->inos));
		if (!l->names || !l->inos) {
			perror("realloc");
			exit(1);
		}
	}
	memcpy(l->names[l->n], name, namelen);
	l->names[l->n][namelen] = '\0';
	l->inos[l->n] = ino;
	l->n++;
	return 0;
}

static char type_of(uint32_t mode)
{
	if (S_ISREG(mode))
		return 'f';
	if (S_ISDIR(mode))
		return 'd';
	if (S_ISLNK(mode))
		return 'l';
	return 'o';
}

/* Depth-first walk; every entry is printed as "<type> <path>". */
static int walk(uext4_fs *fs, uint64_t dir, const char *path)
{
	struct dirent_list l = {0};
	int err = uext4_readdir(fs, dir, 0, collect, &l);

	if (err < 0) {
		fprintf(stderr, "readdir %s: %s\n", *path ? path : "/", uext4_last_error());
		return err;
	}
	for (size_t i = 0; i < l.n && !err; i++) {
		struct uext4_stat st;
		char child[4096];

		snprintf(child, sizeof(child), "%s/%s", path, l.names[i]);
		err = uext4_getattr(fs, l.inos[i], &st);
		if (err < 0) {
			fprintf(stderr, "getattr %s: %s\n", child, uext4_last_error());
			break;
		}
		printf("%c %s\n", type_of(st.mode), child);
		if (S_ISDIR(st.mode))
			err = walk(fs, l.inos[i], child);
	}
	free(l.names);
	free(l.inos);
	return err;
}

static int cmd_list(const char *image)
{
	struct uext4_opts o = {.read_only = 1};
	uext4_fs *fs;
	int err = uext4_mount(image, &o, &fs);

	if (err < 0) {
		fprintf(stderr, "mount %s: %s\n", image, uext4_last_error());
		return 1;
	}
	err = walk(fs, UEXT4_ROOT_INO, "");
	uext4_umount(fs);
	return err < 0;
}

static void load_list(const char *file)
{
	FILE *f = fopen(file, "r");
	char line[4200];

	if (!f) {
		perror(file);
		exit(1);
	}
	while (fgets(line, sizeof(line), f)) {
		size_t n = strlen(line);

		if (n && line[n - 1] == '\n')
			line[--n] = '\0';
		if (n < 3 || line[1] != ' ')
			continue;
		add_entry(line[0], line + 2);
	}
	fclose(f);
}

/* ---- the measured operations --------------------------------------------- */

enum target { TARGET_LIB, TARGET_POSIX };

/* Set before the threads start, read-only while they run. */
static enum target target;
static uext4_fs *bench_fs;
static const char *posix_root;
static int op_read;          /* 0: stat every entry, 1: read every regular file */
static int nthreads;

/* Per-thread results; each thread writes only its own slot. */
struct worker {
	pthread_t tid;
	int idx;
	uint64_t ops, bytes, errors;
};

static pthread_barrier_t start_barrier;

static int lib_stat(const char *path)
{
	struct uext4_stat st;
	uint64_t ino;
	int err = uext4_resolve(bench_fs, path, 0, &ino);

	return err < 0 ? err : uext4_getattr(bench_fs, ino, &st);
}

static int64_t lib_read(const char *path, char *buf)
{
	uint64_t ino, off = 0;
	uext4_file *f;
	ssize_t n;
	int err = uext4_resolve(bench_fs, path, 0, &ino);

	if (err < 0 || (err = uext4_open(bench_fs, ino, O_RDONLY, &f)) < 0)
		return err;
	while ((n = uext4_pread(f, buf, READ_CHUNK, off)) > 0)
		off += (uint64_t)n;
	uext4_release(f);
	return n < 0 ? n : (int64_t)off;
}

static int posix_stat(const char *path)
{
	char full[8192];
	struct stat st;

	snprintf(full, sizeof(full), "%s%s", posix_root, path);
	return lstat(full, &st) ? -errno : 0;
}

static int64_t posix_read(const char *path, char *buf)
{
	char full[8192];
	int64_t total = 0;
	ssize_t n;
	int fd;

	snprintf(full, sizeof(full), "%s%s", posix_root, path);
	fd = open(full, O_RDONLY);
	if (fd < 0)
		return -errno;
	while ((n = read(fd, buf, READ_CHUNK)) > 0)
		total += n;
	close(fd);
	return n < 0 ? -errno : total;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	char *buf = malloc(READ_CHUNK);

	if (!buf) {
		perror("malloc");
		exit(1);
	}
	pthread_barrier_wait(&start_barrier);
	for (size_t i = (size_t)w->idx; i < nentries; i += (size_t)nthreads) {
		const struct entry *e = &entries[i];

		if (op_read) {
			if (e->type != 'f')
				continue;
			int64_t n = target == TARGET_LIB ? lib_read(e->path, buf)
							  : posix_read(e->path, buf);
			if (n < 0)
				w->errors++;
			else
				w->bytes += (uint64_t)n;
		} else {
			int err = target == TARGET_LIB ? lib_stat(e->path) : posix_stat(e->path);
			if (err < 0)
				w->errors++;
		}
		w->ops++;
	}
	pthread_barrier_wait(&start_barrier);
	free(buf);
	return NULL;
}

static void run_pass(int pass)
{
	struct worker *w = calloc((size_t)nthreads, sizeof(*w));
	uint64_t ops = 0, bytes = 0, errors = 0;
	double t0, t1;

	if (!w) {
		perror("calloc");
		exit(1);
	}
	pthread_barrier_init(&start_barrier, NULL, (unsigned)nthreads + 1);
	for (int t = 0; t < nthreads; t++) {
		w[t].idx = t;
		if (pthread_create(&w[t].tid, NULL, worker_main, &w[t])) {
			perror("pthread_create");
			exit(1);
		}
	}
	pthread_barrier_wait(&start_barrier);
	t0 = now();
	pthread_barrier_wait(&start_barrier);
	t1 = now();
	for (int t = 0; t < nthreads; t++) {
		pthread_join(w[t].tid, NULL);
		ops += w[t].ops;
		bytes += w[t].bytes;
		errors += w[t].errors;
	}
	pthread_barrier_destroy(&start_barrier);
	printf("RESULT pass=%d op=%s threads=%d ops=%llu bytes=%llu secs=%.6f errors=%llu\n", pass,
	       op_read ? "read" : "stat", nthreads, (unsigned long long)ops,
	       (unsigned long long)bytes, t1 - t0, (unsigned long long)errors);
	fflush(stdout);
	if (errors)
		fprintf(stderr, "read_bench: %llu operations failed\n", (unsigned long long)errors);
	free(w);
}

static int usage(void)
{
	fprintf(stderr, "usage: read_bench list IMAGE\n"
			"       read_bench lib IMAGE LIST stat|read THREADS PASSES\n"
			"       read_bench posix ROOT LIST stat|read THREADS PASSES\n");
	return 2;
}

int main(int argc, char **argv)
{
	int passes;

	if (argc == 3 && !strcmp(argv[1], "list"))
		return cmd_list(argv[2]);
	if (argc != 7)
		return usage();
	if (!strcmp(argv[1], "lib"))
		target = TARGET_LIB;
	else if (!strcmp(argv[1], "posix"))
		target = TARGET_POSIX;
	else
		return usage();
	if (!strcmp(argv[4], "read"))
		op_read = 1;
	else if (strcmp(argv[4], "stat"))
		return usage();
	nthreads = atoi(argv[5]);
	passes = atoi(argv[6]);
	if (nthreads < 1 || nthreads > 256 || passes < 1)
		return usage();
	load_list(argv[3]);

	if (target == TARGET_LIB) {
		struct uext4_opts o = {.read_only = 1};
		int err = uext4_mount(argv[2], &o, &bench_fs);

		if (err < 0) {
			fprintf(stderr, "mount %s: %s\n", argv[2], uext4_last_error());
			return 1;
		}
	} else {
		posix_root = argv[2];
	}
	for (int p = 1; p <= passes; p++)
		run_pass(p);
	if (bench_fs)
		uext4_umount(bench_fs);
	for (size_t i = 0; i < nentries; i++)
		free(entries[i].path);
	free(entries);
	return 0;
}
