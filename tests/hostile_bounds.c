/*
 * hostile_bounds.c - a hostile image costs bounded memory and time.
 *
 *   hostile_bounds [--rw] IMAGE MAX_SECS MAX_KIB
 *
 * Mounts IMAGE (read-only, or read-write with --rw) through the public
 * API and walks it: lists every directory (recursively, readdir), stats
 * every entry, reads every regular file (its first 16 MiB, then 4 KiB at
 * its end and at byte offsets around 2^32 blocks, where a claim of a huge
 * file or extent lands), reads every symlink, lists every xattr and gets
 * every value.  Each failing call must return a negative errno with a
 * message (printed); a value length over 16 MiB (more than ext4 stores)
 * is a failure.  Asserted: the walk ends (tests/hostile_bounds.sh runs it
 * under timeout), its wall time is under MAX_SECS, the peak RSS (VmHWM,
 * reset at the start through /proc/self/clear_refs) is at most MAX_KIB
 * over the RSS before the mount, and the unmount succeeds.
 */
#include "uext4.h"
#include "t.h"

#include <sys/xattr.h>

#define READ_CAP (16u << 20)
#define CHUNK (1u << 20)
#define MAX_VALUE (16u << 20)
#define MAX_DEPTH 64
#define MAX_ENTRIES (1u << 20)

static uext4_fs *g_fs;
static char *g_buf;
static unsigned long g_entries, g_files, g_errors;
static uint64_t g_bytes;

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* A refused call: a negative errno and a message saying what is wrong. */
static void refused(const char *what, uint64_t ino, long long err)
{
	g_errors++;
	T_CHECK(err < 0 && err > -4096, "%s of inode %" PRIu64 ": odd return %lld", what, ino, err);
	T_CHECK(*uext4_last_error() != 0, "%s of inode %" PRIu64 ": %s with no message", what, ino,
		strerror((int)-err));
	if (g_errors <= 20)
		printf("  %s of inode %" PRIu64 ": %s (%s)\n", what, ino, strerror((int)-err),
		       uext4_last_error());
}

static void read_at(uext4_file *f, uint64_t ino, uint64_t off, size_t len)
{
	ssize_t n = uext4_pread(f, g_buf, len, off);

	if (n < 0)
		refused("read", ino, n);
	else
		g_bytes += (uint64_t)n;
}

static void read_file(uint64_t ino, const struct uext4_stat *st)
{
	uext4_file *f;
	int err = uext4_open(g_fs, ino, O_RDONLY, &f);
	uint64_t bs = 4096;

	if (err) {
		refused("open", ino, err);
		return;
	}
	g_files++;
	for (uint64_t off = 0; off < st->size && off < READ_CAP; off += CHUNK) {
		ssize_t n = uext4_pread(f, g_buf, CHUNK, off);

		if (n <= 0) {
			if (n < 0)
				refused("read", ino, n);
			break;
		}
		g_bytes += (uint64_t)n;
	}
	if (st->size > 4096)
		read_at(f, ino, st->size - 4096, 4096);
	const uint64_t far[] = { ((1ull << 32) - 17) * bs, ((1ull << 32) - 1) * bs,
				 (1ull << 32) * bs, 1ull << 40 };
	for (size_t i = 0; i < sizeof far / sizeof far[0]; i++)
		read_at(f, ino, far[i], 8192);
	uext4_release(f);
}

static void read_xattrs(uint64_t ino)
{
	static char names[1 << 16];
	ssize_t len = uext4_listxattr(g_fs, ino, names, sizeof names);

	if (len < 0) {
		refused("listxattr", ino, len);
		return;
	}
	for (ssize_t p = 0; p < len; p += (ssize_t)strlen(names + p) + 1) {
		ssize_t need = uext4_getxattr(g_fs, ino, names + p, NULL, 0);

		if (need < 0) {
			refused("getxattr (size)", ino, need);
			continue;
		}
		T_CHECK(need <= (ssize_t)MAX_VALUE, "inode %" PRIu64 " xattr %s: a value of %zd bytes",
			ino, names + p, need);
		if (need > (ssize_t)MAX_VALUE)
			continue;
		char *v = t_xmalloc((size_t)need + 1);
		ssize_t got = uext4_getxattr(g_fs, ino, names + p, v, (size_t)need);

		if (got < 0)
			refused("getxattr", ino, got);
		else
			T_CHECK(got <= need, "inode %" PRIu64 " xattr %s: %zd bytes for %zd", ino,
				names + p, got, need);
		free(v);
	}
}

static void visit(uint64_t ino, int depth);

struct child_list {
	uint64_t *ino;
	size_t n, cap;
};

static int add_child(void *ctx, const char *name, size_t namelen, uint64_t ino, unsigned dtype,
		     uint64_t next_cookie)
{
	struct child_list *c = ctx;

	if ((namelen == 1 && name[0] == '.') || (namelen == 2 && !memcmp(name, "..", 2)))
		return 0;
	if (++g_entries > MAX_ENTRIES)
		return 1;
	if (c->n == c->cap) {
		c->cap = c->cap ? 2 * c->cap : 64;
		c->ino = realloc(c->ino, c->cap * sizeof(*c->ino));
		if (!c->ino)
			abort();
	}
	c->ino[c->n++] = ino;
	return 0;
}

static void list_dir(uint64_t ino, int depth)
{
	struct child_list c = { 0 };
	int err = uext4_readdir(g_fs, ino, 0, add_child, &c);

	if (err < 0)
		refused("readdir", ino, err);
	for (size_t i = 0; i < c.n; i++)
		visit(c.ino[i], depth + 1);
	free(c.ino);
}

static void visit(uint64_t ino, int depth)
{
	struct uext4_stat st;
	int err = uext4_getattr(g_fs, ino, &st);

	if (err) {
		refused("getattr", ino, err);
		return;
	}
	read_xattrs(ino);
	if (S_ISREG(st.mode)) {
		read_file(ino, &st);
	} else if (S_ISLNK(st.mode)) {
		ssize_t n = uext4_readlink(g_fs, ino, g_buf, CHUNK);

		if (n < 0)
			refused("readlink", ino, n);
	} else if (S_ISDIR(st.mode) && depth < MAX_DEPTH) {
		list_dir(ino, depth);
	}
}

int main(int argc, char **argv)
{
	int rw = argc > 1 && !strcmp(argv[1], "--rw");

	if (argc - rw != 4) {
		fprintf(stderr, "usage: hostile_bounds [--rw] IMAGE MAX_SECS MAX_KIB\n");
		return 2;
	}
	const char *img = argv[1 + rw];
	double max_secs = atof(argv[2 + rw]);
	long max_kib = atol(argv[3 + rw]);
	struct uext4_opts o = { .read_only = !rw };
	FILE *cr;
	int err;

	g_buf = t_xmalloc(CHUNK);
	if ((cr = fopen("/proc/self/clear_refs", "w"))) {
		fputs("5", cr);
		fclose(cr);
	}
	long base = t_status_kib("VmRSS");
	double t0 = now_s();

	if ((err = uext4_mount(img, &o, &g_fs))) {
		printf("mount refused: %s (%s)\n", strerror(-err), uext4_last_error());
		T_CHECK(*uext4_last_error() != 0, "mount refused without a message");
	} else {
		visit(2, 0);
		err = uext4_umount(g_fs);
		T_CHECK(err == 0, "umount: %s (%s)", strerror(-err), uext4_last_error());
	}
	double secs = now_s() - t0;
	long peak = t_status_kib("VmHWM");

	printf("%s%s: %lu entries, %lu files, %" PRIu64 " bytes read, %lu refused; %.2f s, "
	       "peak RSS %ld KiB over %ld\n", img, rw ? " (rw)" : "", g_entries, g_files, g_bytes,
	       g_errors, secs, peak - base, base);
	T_CHECK(g_entries <= MAX_ENTRIES, "more than %u entries listed", MAX_ENTRIES);
	T_CHECK(secs < max_secs, "%.2f s (bound %.0f s)", secs, max_secs);
	T_CHECK(peak - base <= max_kib, "peak RSS %ld KiB over the start (bound %ld KiB)",
		peak - base, max_kib);
	free(g_buf);
	return t_failures ? T_FAIL : T_PASS;
}
