/*
 * walk.c - dump a tree as canonical lines, one per path, sorted.
 *
 *   walk [options] posix DIR     through the kernel's VFS (lstat, readlink,
 *                                llistxattr, lgetxattr, read): a kernel
 *                                mount, our FUSE mount, or a source tree
 *   walk [options] lib IMAGE     through libuext4's public API only
 *
 * Options: --no-FIELD drops a field (ino mode nlink dirnlink uid gid size
 * dirsize blocks mtime ctime atime nsec rdev link data xattr); --exclude=NAME
 * skips a top-level entry and what is below it (e.g. lost+found).
 *
 * Two dumps of the same image must be byte-identical; tests/oracle.sh diffs
 * them.  A path that cannot be read gets err=... on its line and walk exits 1.
 */
#include <dirent.h>
#include <fcntl.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "uext4.h"
#include "t.h"

#define READ_CHUNK (1 << 20)

static unsigned g_fields = TF_ALL;
static const char *g_excludes[16];
static int g_nexcludes;
static int g_errors;

/* One read buffer and hash state for the whole (single-threaded) walk:
 * allocating 1 MiB per file makes ASan runs crawl. */
static struct t_datahash g_hash;
static char *g_read_buf;

static char *read_buf(void)
{
	if (!g_read_buf)
		g_read_buf = t_xmalloc(READ_CHUNK);
	return g_read_buf;
}

/* All output lines, sorted before printing. */
static char **g_lines;
static size_t g_nlines, g_caplines;

static void add_line(const char *path, size_t pathlen, const struct t_attr *a)
{
	struct t_buf b = { 0 };
	t_format_line(&b, path, pathlen, a, g_fields);
	if (g_nlines == g_caplines) {
		g_caplines = g_caplines ? g_caplines * 2 : 1024;
		g_lines = t_xrealloc(g_lines, g_caplines * sizeof(*g_lines));
	}
	g_lines[g_nlines++] = b.s;
	if (a->err[0])
		g_errors++;
}

static int excluded(const char *relpath)
{
	for (int i = 0; i < g_nexcludes; i++) {
		size_t n = strlen(g_excludes[i]);
		if (strncmp(relpath, "./", 2) == 0 && strncmp(relpath + 2, g_excludes[i], n) == 0 &&
		    (relpath[2 + n] == 0 || relpath[2 + n] == '/'))
			return 1;
	}
	return 0;
}

static char *join(const char *dir, const char *name, size_t namelen)
{
	size_t dl = strlen(dir);
	char *p = t_xmalloc(dl + 1 + namelen + 1);
	memcpy(p, dir, dl);
	p[dl] = '/';
	memcpy(p + dl + 1, name, namelen);
	p[dl + 1 + namelen] = 0;
	return p;
}

static void set_err(struct t_attr *a, const char *op, long err)
{
	if (!a->err[0])
		snprintf(a->err, sizeof(a->err), "%s:%s", op, strerror((int)err));
	for (char *p = a->err; *p; p++)
		if (*p == ' ')
			*p = '_';
}

static void free_attr(struct t_attr *a)
{
	free(a->link);
	free(a->xattrs);
}

/* ------------------------------------------------------------ posix backend */

static long posix_getx(void *ctx, const char *name, char **val)
{
	const char *path = ctx;
	ssize_t n = lgetxattr(path, name, NULL, 0);
	if (n < 0)
		return -errno;
	*val = t_xmalloc((size_t)n);
	n = lgetxattr(path, name, *val, (size_t)n);
	return n < 0 ? -errno : n;
}

static void posix_xattrs(const char *path, struct t_attr *a)
{
	ssize_t n = llistxattr(path, NULL, 0);
	if (n < 0) {
		if (errno == ENOTSUP)
			return;
		set_err(a, "listxattr", errno);
		return;
	}
	char *list = t_xmalloc((size_t)n + 1);
	n = llistxattr(path, list, (size_t)n);
	if (n < 0) {
		set_err(a, "listxattr", errno);
		free(list);
		return;
	}
	a->xattrs = t_xattr_summary(list, (size_t)n, posix_getx, (void *)path);
	free(list);
}

static void posix_data(const char *path, struct t_attr *a)
{
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NOATIME);
	if (fd < 0 && errno == EPERM)
		fd = open(path, O_RDONLY | O_NOFOLLOW);
	if (fd < 0) {
		set_err(a, "open", errno);
		return;
	}
	struct t_datahash *h = &g_hash;
	char *buf = read_buf();
	t_datahash_init(h);
	for (;;) {
		ssize_t r = read(fd, buf, READ_CHUNK);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			set_err(a, "read", errno);
			break;
		}
		if (r == 0)
			break;
		t_datahash_update(h, buf, (size_t)r);
	}
	a->have_data = 1;
	a->data_hash = t_datahash_final(h);
	close(fd);
}

static void posix_attr(const char *path, const struct stat *st, struct t_attr *a)
{
	a->ino = st->st_ino;
	a->mode = st->st_mode;
	a->nlink = (uint32_t)st->st_nlink;
	a->uid = st->st_uid;
	a->gid = st->st_gid;
	a->size = (uint64_t)st->st_size;
	a->blocks = (uint64_t)st->st_blocks;
	a->rdev_major = major(st->st_rdev);
	a->rdev_minor = minor(st->st_rdev);
	a->mtime = st->st_mtim;
	a->ctime = st->st_ctim;
	a->atime = st->st_atim;
	if (S_ISLNK(st->st_mode) && (g_fields & TF_LINK)) {
		a->link = t_xmalloc(8192);
		ssize_t n = readlink(path, a->link, 8192);
		if (n < 0) {
			set_err(a, "readlink", errno);
			n = 0;
		}
		a->link_len = (size_t)n;
	}
	if (S_ISREG(st->st_mode) && (g_fields & TF_DATA))
		posix_data(path, a);
	if (g_fields & TF_XATTR)
		posix_xattrs(path, a);
}

/* path is the real path; rel the "./..." name printed. */
static void posix_walk(const char *path, const char *rel)
{
	struct stat st;
	struct t_attr a = { 0 };
	if (lstat(path, &st) < 0) {
		set_err(&a, "lstat", errno);
		add_line(rel, strlen(rel), &a);
		return;
	}
	posix_attr(path, &st, &a);
	add_line(rel, strlen(rel), &a);
	free_attr(&a);
	if (!S_ISDIR(st.st_mode))
		return;
	DIR *d = opendir(path);
	if (!d) {
		struct t_attr e = { .mode = st.st_mode };
		set_err(&e, "opendir", errno);
		add_line(rel, strlen(rel), &e);
		return;
	}
	struct dirent *de;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		size_t nl = strlen(de->d_name);
		char *cpath = join(path, de->d_name, nl);
		char *crel = join(rel, de->d_name, nl);
		if (!excluded(crel))
			posix_walk(cpath, crel);
		free(cpath);
		free(crel);
	}
	closedir(d);
}

/* ------------------------------------------------------------ lib backend */

struct lib_ctx {
	uext4_fs *fs;
	uint64_t ino;
};

static long lib_getx(void *ctx, const char *name, char **val)
{
	struct lib_ctx *c = ctx;
	ssize_t n = uext4_getxattr(c->fs, c->ino, name, NULL, 0);
	if (n < 0)
		return (long)n;
	*val = t_xmalloc((size_t)n);
	return (long)uext4_getxattr(c->fs, c->ino, name, *val, (size_t)n);
}

static void lib_report(const char *what, const char *rel, long err)
{
	fprintf(stderr, "walk lib: %s %s: %s (%s)\n", what, rel, strerror((int)-err),
		uext4_last_error());
}

static void lib_xattrs(uext4_fs *fs, uint64_t ino, const char *rel, struct t_attr *a)
{
	ssize_t n = uext4_listxattr(fs, ino, NULL, 0);
	if (n < 0) {
		lib_report("listxattr", rel, (long)n);
		set_err(a, "listxattr", -n);
		return;
	}
	char *list = t_xmalloc((size_t)n + 1);
	n = uext4_listxattr(fs, ino, list, (size_t)n);
	if (n < 0) {
		lib_report("listxattr", rel, (long)n);
		set_err(a, "listxattr", -n);
		free(list);
		return;
	}
	struct lib_ctx c = { fs, ino };
	a->xattrs = t_xattr_summary(list, (size_t)n, lib_getx, &c);
	free(list);
}

static void lib_data(uext4_fs *fs, uint64_t ino, const char *rel, struct t_attr *a)
{
	uext4_file *f;
	int r = uext4_open(fs, ino, 0, &f);
	if (r < 0) {
		lib_report("open", rel, r);
		set_err(a, "open", -r);
		return;
	}
	struct t_datahash *h = &g_hash;
	char *buf = read_buf();
	t_datahash_init(h);
	uint64_t off = 0;
	for (;;) {
		ssize_t n = uext4_pread(f, buf, READ_CHUNK, off);
		if (n < 0) {
			lib_report("pread", rel, (long)n);
			set_err(a, "read", -n);
			break;
		}
		if (n == 0)
			break;
		t_datahash_update(h, buf, (size_t)n);
		off += (uint64_t)n;
	}
	a->have_data = 1;
	a->data_hash = t_datahash_final(h);
	uext4_release(f);
}

static void lib_attr(uext4_fs *fs, const struct uext4_stat *st, const char *rel,
		     struct t_attr *a)
{
	t_attr_from_stat(st, a);
	if (S_ISLNK(st->mode) && (g_fields & TF_LINK)) {
		a->link = t_xmalloc(8192);
		ssize_t n = uext4_readlink(fs, st->ino, a->link, 8192);
		if (n < 0) {
			lib_report("readlink", rel, (long)n);
			set_err(a, "readlink", -n);
			n = 0;
		}
		a->link_len = (size_t)n;
	}
	if (S_ISREG(st->mode) && (g_fields & TF_DATA))
		lib_data(fs, st->ino, rel, a);
	if (g_fields & TF_XATTR)
		lib_xattrs(fs, st->ino, rel, a);
}

struct dent {
	char *name;
	size_t len;
	uint64_t ino;
};

struct dent_list {
	struct dent *v;
	size_t n, cap;
};

static int collect(void *ctx, const char *name, size_t namelen, uint64_t ino,
		   unsigned dtype, uint64_t next_cookie)
{
	struct dent_list *l = ctx;
	if ((namelen == 1 && name[0] == '.') || (namelen == 2 && !memcmp(name, "..", 2)))
		return 0;
	if (l->n == l->cap) {
		l->cap = l->cap ? l->cap * 2 : 64;
		l->v = t_xrealloc(l->v, l->cap * sizeof(*l->v));
	}
	l->v[l->n].name = t_xmalloc(namelen + 1);
	memcpy(l->v[l->n].name, name, namelen);
	l->v[l->n].name[namelen] = 0;
	l->v[l->n].len = namelen;
	l->v[l->n].ino = ino;
	l->n++;
	return 0;
}

static void lib_walk(uext4_fs *fs, uint64_t ino, const char *rel)
{
	struct uext4_stat st;
	struct t_attr a = { 0 };
	int r = uext4_getattr(fs, ino, &st);
	if (r < 0) {
		lib_report("getattr", rel, r);
		set_err(&a, "getattr", -r);
		add_line(rel, strlen(rel), &a);
		return;
	}
	lib_attr(fs, &st, rel, &a);
	add_line(rel, strlen(rel), &a);
	free_attr(&a);
	if (!S_ISDIR(st.mode))
		return;
	struct dent_list l = { 0 };
	r = uext4_readdir(fs, ino, 0, collect, &l);
	if (r < 0) {
		lib_report("readdir", rel, r);
		struct t_attr e = { .mode = st.mode };
		set_err(&e, "readdir", -r);
		add_line(rel, strlen(rel), &e);
	}
	for (size_t i = 0; i < l.n; i++) {
		char *crel = join(rel, l.v[i].name, l.v[i].len);
		if (!excluded(crel))
			lib_walk(fs, l.v[i].ino, crel);
		free(crel);
		free(l.v[i].name);
	}
	free(l.v);
}

/* ------------------------------------------------------------ main */

static int cmp_line(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void usage(void)
{
	fprintf(stderr, "usage: walk [--no-FIELD]... [--exclude=NAME]... posix DIR | lib IMAGE\n"
		"fields:");
	for (size_t i = 0; i < sizeof(t_field_names) / sizeof(t_field_names[0]); i++)
		fprintf(stderr, " %s", t_field_names[i].name);
	fprintf(stderr, "\n");
	exit(2);
}

static int parse_option(const char *arg)
{
	if (!strncmp(arg, "--exclude=", 10)) {
		if (g_nexcludes == (int)(sizeof(g_excludes) / sizeof(g_excludes[0])))
			usage();
		g_excludes[g_nexcludes++] = arg + 10;
		return 1;
	}
	if (strncmp(arg, "--no-", 5))
		return 0;
	for (size_t i = 0; i < sizeof(t_field_names) / sizeof(t_field_names[0]); i++) {
		if (!strcmp(arg + 5, t_field_names[i].name)) {
			g_fields &= ~t_field_names[i].bit;
			return 1;
		}
	}
	fprintf(stderr, "walk: unknown field in %s\n", arg);
	usage();
	return 0;
}

int main(int argc, char **argv)
{
	int i = 1;
	while (i < argc && !strncmp(argv[i], "--", 2))
		if (!parse_option(argv[i++]))
			usage();
	if (argc - i != 2)
		usage();
	const char *backend = argv[i], *target = argv[i + 1];
	if (!strcmp(backend, "posix")) {
		posix_walk(target, ".");
	} else if (!strcmp(backend, "lib")) {
		struct uext4_opts o = { .read_only = 1 };
		uext4_fs *fs;
		int r = uext4_mount(target, &o, &fs);
		if (r < 0) {
			fprintf(stderr, "walk lib: mount %s: %s (%s)\n", target, strerror(-r),
				uext4_last_error());
			return 1;
		}
		lib_walk(fs, UEXT4_ROOT_INO, ".");
		r = uext4_umount(fs);
		if (r < 0) {
			fprintf(stderr, "walk lib: umount: %s (%s)\n", strerror(-r), uext4_last_error());
			g_errors++;
		}
	} else {
		usage();
	}
	qsort(g_lines, g_nlines, sizeof(*g_lines), cmp_line);
	for (size_t k = 0; k < g_nlines; k++) {
		fputs(g_lines[k], stdout);
		free(g_lines[k]);
	}
	free(g_lines);
	free(g_read_buf);
	if (fflush(stdout) != 0)
		return 1;
	if (g_errors)
		fprintf(stderr, "walk: %d path(s) had errors (see err= on their lines)\n", g_errors);
	return g_errors ? 1 : 0;
}
