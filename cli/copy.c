/*
 * copy.c - `uext4 put` (host -> image) and `uext4 get` (image -> host):
 * copy a file or a whole tree with every file type, holes, hard links
 * within the tree, modes, owners, times with nanoseconds and extended
 * attributes (ACLs are the system.posix_acl_* attributes).
 *
 * Errors on one side of the copy are sorted by how bad they are: a source
 * file that cannot be read is reported and skipped (exit 1 at the end, like
 * cp); a failing image or destination write that says the target is in
 * trouble (ENOSPC, EIO, corruption, ...) stops the copy.  An attribute the
 * host refuses (`get`: user.* on a symlink, a value over the host's limit,
 * a name it does not know) is a warning naming the file and the attribute:
 * the rest is copied, and the exit status is 1.
 */
#include "cli.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <search.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#define CHUNK (1u << 20)
#define PATH_BUF 4096

/* One inode with several names, seen once already: where its copy is. */
struct link_seen {
	uint64_t dev, ino;      /* source identity */
	uint64_t image_ino;     /* put: the copy in the image */
	char *host_path;        /* get: the copy on the host */
};

struct copy {
	const struct command *c;
	uext4_fs *fs;
	int preserve;           /* owners, times, xattrs (modes always) */
	int progress;           /* 0 quiet, 1 "\r" updates on a tty, 2 lines */
	int stop;               /* an error that ends the copy happened */
	int status;             /* exit status so far */
	uint64_t files, bytes;
	struct timespec last;   /* last progress line */
	void *links;            /* tsearch tree of struct link_seen */
	char *buf;              /* CHUNK bytes */
};

/* ---------------------------------------------------------------- common */

/* Errors after which going on would only pile up more. */
static int is_fatal(long err)
{
	return err == -ENOSPC || err == -EIO || err == -EUCLEAN || err == -EROFS ||
	       err == -ENOMEM || err == -EDQUOT || err == -EFBIG;
}

static int image_error(struct copy *k, const char *what, long ret)
{
	if (is_fatal(ret))
		k->stop = 1;
	k->status = fail(k->c, what, ret);
	return 1;
}

static int host_error(struct copy *k, const char *what, int err)
{
	if (is_fatal(-err))
		k->stop = 1;
	k->status = fail_host(k->c, what, err);
	return 1;
}

static void show_progress(struct copy *k, int final)
{
	struct timespec now;
	double dt;

	if (!k->progress)
		return;
	clock_gettime(CLOCK_MONOTONIC, &now);
	dt = (double)(now.tv_sec - k->last.tv_sec) + (now.tv_nsec - k->last.tv_nsec) / 1e9;
	if (!final && dt < (k->progress == 1 ? 0.25 : 1.0))
		return;
	k->last = now;
	fprintf(stderr, "uext4 %s: %llu files, %llu bytes%s", k->c->name,
		(unsigned long long)k->files, (unsigned long long)k->bytes,
		k->progress == 1 && !final ? "\r" : "\n");
}

static int link_cmp(const void *a, const void *b)
{
	const struct link_seen *x = a, *y = b;

	if (x->dev != y->dev)
		return x->dev < y->dev ? -1 : 1;
	return x->ino < y->ino ? -1 : x->ino > y->ino;
}

static struct link_seen *link_find(struct copy *k, uint64_t dev, uint64_t ino)
{
	struct link_seen key = { .dev = dev, .ino = ino }, **p = tfind(&key, &k->links, link_cmp);

	return p ? *p : NULL;
}

/* Remember a multiply-linked inode's copy; failing to (no memory) only
 * costs a duplicate later. */
static void link_add(struct copy *k, uint64_t dev, uint64_t ino, uint64_t image_ino,
		     const char *host_path)
{
	struct link_seen *l = calloc(1, sizeof(*l));

	if (!l)
		return;
	*l = (struct link_seen){ .dev = dev, .ino = ino, .image_ino = image_ino };
	if (host_path && !(l->host_path = strdup(host_path))) {
		free(l);
		return;
	}
	if (!tsearch(l, &k->links, link_cmp)) {
		free(l->host_path);
		free(l);
	}
}

static void link_free(void *p)
{
	struct link_seen *l = p;

	free(l->host_path);
	free(l);
}

static char *join(const char *dir, const char *name)
{
	char *p;
	size_t dl = strlen(dir);

	if (asprintf(&p, "%s%s%s", dir, dl && dir[dl - 1] == '/' ? "" : "/", name) < 0)
		return NULL;
	return p;
}

static int is_dot_name(const char *n)
{
	return !strcmp(n, ".") || !strcmp(n, "..");
}

/* The last component of a host path, "" for "/", "." and "..". */
static void base_name(const char *path, char out[256])
{
	size_t n = strlen(path), start;

	while (n > 1 && path[n - 1] == '/')
		n--;
	start = n;
	while (start > 0 && path[start - 1] != '/')
		start--;
	if (n - start > 255 || (n - start == 1 && path[start] == '/'))
		n = start;
	memcpy(out, path + start, n - start);
	out[n - start] = '\0';
	if (is_dot_name(out))
		out[0] = '\0';
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void free_names(char **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

/* Sorted names of a host directory, without . and ..; NULL on error. */
static char **host_dir_names(const char *path, size_t *count)
{
	DIR *d = opendir(path);
	struct dirent *e;
	char **v = NULL, **nv;
	size_t n = 0, cap = 0;

	if (!d)
		return NULL;
	while ((e = readdir(d))) {
		if (is_dot_name(e->d_name))
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 32;
			if (!(nv = realloc(v, cap * sizeof(*v))))
				goto nomem;
			v = nv;
		}
		if (!(v[n] = strdup(e->d_name)))
			goto nomem;
		n++;
	}
	closedir(d);
	if (n > 1)
		qsort(v, n, sizeof(*v), cmp_names);
	*count = n;
	return v ? v : calloc(1, sizeof(*v));
nomem:
	while (n)
		free(v[--n]);
	free(v);
	closedir(d);
	errno = ENOMEM;
	return NULL;
}

/* ------------------------------------------------------------------- put */

static int put_node(struct copy *k, const char *src, uint64_t dir, const char *name,
		    const char *dst);

/* All of buf at off: a short write (the library stops at ENOSPC like
 * write(2)) is retried, so the error itself comes back. */
static ssize_t image_write_all(uext4_file *f, const char *buf, size_t n, uint64_t off)
{
	while (n) {
		ssize_t w = uext4_pwrite(f, buf, n, off);

		if (w <= 0)
			return w < 0 ? w : -EIO;
		buf += w;
		n -= (size_t)w;
		off += (uint64_t)w;
	}
	return 0;
}

/* Data segments of src (SEEK_DATA/SEEK_HOLE keep holes holes) into f. */
static int put_data(struct copy *k, int fd, const char *src, uext4_file *f, const char *dst)
{
	off_t off = 0, data, hole;
	ssize_t n, w;

	for (;;) {
		data = lseek(fd, off, SEEK_DATA);
		if (data < 0 && errno == ENXIO)
			return 0;               /* only a hole is left */
		if (data < 0 && errno != EINVAL)
			return host_error(k, src, errno);
		if (data < 0)
			data = off;             /* no SEEK_DATA: copy everything */
		hole = lseek(fd, data, SEEK_HOLE);
		if (hole < 0)
			hole = (off_t)INT64_MAX;
		for (off = data; off < hole; off += n) {
			size_t want = (uint64_t)(hole - off) < CHUNK ? (size_t)(hole - off) : CHUNK;

			n = pread(fd, k->buf, want, off);
			if (n < 0 && errno == EINTR) {
				n = 0;
				continue;
			}
			if (n < 0)
				return host_error(k, src, errno);
			if (n == 0)
				return 0;       /* end of file */
			w = image_write_all(f, k->buf, (size_t)n, (uint64_t)off);
			if (w < 0)
				return image_error(k, dst, w);
			k->bytes += (uint64_t)n;
			show_progress(k, 0);
		}
	}
}

/* A regular file's contents, then its size (for a trailing hole). */
static int put_file(struct copy *k, const char *src, const struct stat *st, uint64_t ino,
		    const char *dst)
{
	struct uext4_setattr a = { .valid = UEXT4_SET_SIZE, .size = (uint64_t)st->st_size };
	struct uext4_stat u;
	uext4_file *f;
	int fd = open(src, O_RDONLY | O_NOCTTY), ret, status;

	if (fd < 0)
		return host_error(k, src, errno);
	ret = uext4_open(k->fs, ino, O_WRONLY, &f);
	if (ret < 0) {
		close(fd);
		return image_error(k, dst, ret);
	}
	status = put_data(k, fd, src, f, dst);
	close(fd);
	uext4_release(f);
	if (status)
		return status;
	ret = uext4_getattr(k->fs, ino, &u);
	if (ret >= 0 && u.size != a.size)
		ret = uext4_setattr(k->fs, ino, &a, &u);
	return ret < 0 ? image_error(k, dst, ret) : 0;
}

/* Every extended attribute of src (ACLs included) onto ino. */
static int put_xattrs(struct copy *k, const char *src, uint64_t ino, const char *dst)
{
	ssize_t n = llistxattr(src, NULL, 0), v;
	char *names, *val = NULL, what[PATH_BUF + 300];
	int status = 0, ret;

	if (n < 0 && (errno == ENOTSUP || errno == ENODATA))
		return 0;
	if (n <= 0)
		return n < 0 ? host_error(k, src, errno) : 0;
	names = malloc((size_t)n + 1);
	if (!names)
		return host_error(k, src, ENOMEM);
	n = llistxattr(src, names, (size_t)n);
	for (ssize_t i = 0; i < n && !k->stop; i += (ssize_t)strlen(names + i) + 1) {
		snprintf(what, sizeof(what), "%s: %s", dst, names + i);
		v = lgetxattr(src, names + i, NULL, 0);
		free(val);
		val = v >= 0 ? malloc((size_t)v + 1) : NULL;
		if (v >= 0 && val)
			v = lgetxattr(src, names + i, val, (size_t)v);
		if (v < 0 || !val) {
			status = host_error(k, src, v < 0 ? errno : ENOMEM);
			continue;
		}
		ret = uext4_setxattr(k->fs, ino, names + i, val, (size_t)v, 0);
		if (ret < 0)
			status = image_error(k, what, ret);
	}
	free(val);
	free(names);
	return status;
}

/* Mode always; owner, times and xattrs when preserving.  Directories get
 * this after their contents, which change their mtime. */
static int put_attrs(struct copy *k, const char *src, const struct stat *st, uint64_t ino,
		     const char *dst)
{
	struct uext4_setattr a = { 0 };
	struct uext4_stat u;
	int status = 0, ret;

	if (k->preserve)
		status = put_xattrs(k, src, ino, dst);
	if (!S_ISLNK(st->st_mode)) {
		a.valid |= UEXT4_SET_MODE;
		a.mode = st->st_mode & 07777;
	}
	if (k->preserve) {
		a.valid |= UEXT4_SET_UID | UEXT4_SET_GID | UEXT4_SET_ATIME | UEXT4_SET_MTIME;
		a.uid = st->st_uid;
		a.gid = st->st_gid;
		a.atime = st->st_atim;
		a.mtime = st->st_mtim;
	}
	if (k->stop || !a.valid)
		return status;
	ret = uext4_setattr(k->fs, ino, &a, &u);
	return ret < 0 ? image_error(k, dst, ret) : status;
}

/* The children of host directory src into image directory ino. */
static int put_children(struct copy *k, const char *src, uint64_t ino, const char *dst)
{
	size_t n = 0;
	char **names = host_dir_names(src, &n), *s, *d;
	int status = 0;

	if (!names)
		return host_error(k, src, errno);
	for (size_t i = 0; i < n && !k->stop; i++) {
		s = join(src, names[i]);
		d = join(dst, names[i]);
		if (!s || !d)
			status = host_error(k, src, ENOMEM);
		else if (put_node(k, s, ino, names[i], d))
			status = 1;
		free(s);
		free(d);
	}
	free_names(names, n);
	return status;
}

static ssize_t host_readlink(const char *path, const struct stat *st, char **out)
{
	size_t len = st->st_size > 0 ? (size_t)st->st_size + 1 : PATH_BUF;
	char *buf = malloc(len);
	ssize_t n = buf ? readlink(path, buf, len) : -1;

	if (n < 0 || (size_t)n >= len) {
		free(buf);
		if (n >= 0)
			errno = ENAMETOOLONG;
		return -1;
	}
	buf[n] = '\0';
	*out = buf;
	return n;
}

/* Make name in dir for src's type; a directory that already exists is
 * reused (merged into). */
static int put_create(struct copy *k, const char *src, const struct stat *st, uint64_t dir,
		      const char *name, const char *dst, uint64_t *ino)
{
	uint32_t perm = st->st_mode & 07777;
	struct uext4_stat u, old;
	char *target;
	int ret = uext4_lookup(k->fs, dir, name, &old);

	if (ret >= 0 && S_ISDIR(old.mode) && S_ISDIR(st->st_mode)) {
		*ino = old.ino;
		return 0;
	}
	if (ret >= 0 && S_ISDIR(old.mode))
		return host_error(k, dst, EISDIR);
	if (ret >= 0 && S_ISDIR(st->st_mode))
		return host_error(k, dst, ENOTDIR);
	if (ret >= 0 && (ret = uext4_unlink(k->fs, dir, name)) < 0)
		return image_error(k, dst, ret);        /* replace a non-directory */
	switch (st->st_mode & S_IFMT) {
	case S_IFREG:
		ret = uext4_create(k->fs, dir, name, S_IFREG | perm, &u);
		break;
	case S_IFDIR:
		ret = uext4_mkdir(k->fs, dir, name, S_IFDIR | perm, &u);
		break;
	case S_IFLNK:
		if (host_readlink(src, st, &target) < 0)
			return host_error(k, src, errno);
		ret = uext4_symlink(k->fs, dir, name, target, &u);
		free(target);
		break;
	default:
		ret = uext4_mknod(k->fs, dir, name, st->st_mode & (S_IFMT | 07777),
				  (uint64_t)st->st_rdev, &u);
		break;
	}
	if (ret < 0)
		return image_error(k, dst, ret);
	*ino = u.ino;
	return 0;
}

static int put_node(struct copy *k, const char *src, uint64_t dir, const char *name,
		    const char *dst)
{
	struct link_seen *seen;
	struct uext4_stat u;
	struct stat st;
	uint64_t ino = 0;
	int ret, status = 0;

	if (lstat(src, &st))
		return host_error(k, src, errno);
	if (strlen(name) > 255)
		return host_error(k, dst, ENAMETOOLONG);
	k->files++;
	show_progress(k, 0);
	if (!S_ISDIR(st.st_mode) && st.st_nlink > 1 &&
	    (seen = link_find(k, st.st_dev, st.st_ino))) {
		if (uext4_lookup(k->fs, dir, name, &u) >= 0 && u.ino == seen->image_ino)
			return 0;       /* put twice: already that link */
		if (uext4_lookup(k->fs, dir, name, &u) >= 0 && !S_ISDIR(u.mode))
			uext4_unlink(k->fs, dir, name);
		ret = uext4_link(k->fs, seen->image_ino, dir, name, &u);
		return ret < 0 ? image_error(k, dst, ret) : 0;
	}
	if (put_create(k, src, &st, dir, name, dst, &ino))
		return 1;
	if (S_ISREG(st.st_mode))
		status = put_file(k, src, &st, ino, dst);
	else if (S_ISDIR(st.st_mode))
		status = put_children(k, src, ino, dst);
	if (!S_ISDIR(st.st_mode) && st.st_nlink > 1)
		link_add(k, st.st_dev, st.st_ino, ino, NULL);
	if (k->stop)
		return 1;
	return put_attrs(k, src, &st, ino, dst) || status;
}

/* Where DST names the copy: inside DST when it is a directory (the source's
 * own name; "." or "/" merge their contents into DST), else DST itself. */
static int put_target(struct copy *k, const char *src, const char *dst, uint64_t *dir,
		      char name[256], int *into, int *merge)
{
	char buf[PATH_BUF];
	struct uext4_stat st;
	uint64_t ino;

	*merge = *into = 0;
	if (uext4_resolve(k->fs, image_path(dst, buf, sizeof(buf)), 1, &ino) >= 0 &&
	    uext4_getattr(k->fs, ino, &st) >= 0 && S_ISDIR(st.mode)) {
		*dir = ino;
		*into = 1;
		base_name(src, name);
		if (!name[0])
			*merge = 1;
		return 0;
	}
	return split_path(k->c, k->fs, dst, dir, name);
}

static int copy_init(struct copy *k, const struct command *c, int preserve, int verbose)
{
	memset(k, 0, sizeof(*k));
	k->c = c;
	k->preserve = preserve;
	k->progress = isatty(STDERR_FILENO) ? 1 : verbose ? 2 : 0;
	clock_gettime(CLOCK_MONOTONIC, &k->last);
	k->buf = malloc(CHUNK);
	return k->buf ? 0 : fail_host(c, "buffer", ENOMEM);
}

static void copy_done(struct copy *k)
{
	if (k->files)
		show_progress(k, 1);
	tdestroy(k->links, link_free);
	free(k->buf);
}

/* Options shared by put and get: -p (default) preserve, -P don't, -v. */
static int copy_opts(const struct command *c, int argc, char **argv, int *preserve, int *verbose)
{
	int ch;

	*preserve = 1;
	*verbose = 0;
	while ((ch = next_opt(c, argc, argv, "pPv")) != -1) {
		if (ch == 'p')
			*preserve = 1;
		else if (ch == 'P')
			*preserve = 0;
		else if (ch == 'v')
			*verbose = 1;
		else
			return usage_error(c, NULL);
	}
	if (argc - optind != 3)
		return usage_error(c, argc - optind > 3 ? "too many arguments"
					: "missing IMAGE, SRC or DST");
	return 0;
}

int cmd_put(const struct command *c, int argc, char **argv)
{
	const char *image, *src, *dst;
	int preserve, verbose, into, merge, ret;
	struct copy k;
	struct stat st;
	uint64_t dir;
	char name[256];

	if ((ret = copy_opts(c, argc, argv, &preserve, &verbose)))
		return ret;
	image = argv[optind];
	src = argv[optind + 1];
	dst = argv[optind + 2];
	if (lstat(src, &st))
		return fail_host(c, src, errno);
	if (copy_init(&k, c, preserve, verbose))
		return 1;
	if (open_image_rw(c, image, &k.fs)) {
		copy_done(&k);
		return 1;
	}
	if (put_target(&k, src, dst, &dir, name, &into, &merge))
		k.status = 1;
	else if (merge && !S_ISDIR(st.st_mode))
		k.status = fail_host(c, src, EINVAL);
	else if (merge) {
		/* "put IMG . /dir": the contents, and the attributes onto /dir */
		if (!put_children(&k, src, dir, dst) && !k.stop)
			put_attrs(&k, src, &st, dir, dst);
	} else {
		/* Messages name the copy's path in the image. */
		char *shown = into ? join(dst, name) : strdup(dst);

		if (!shown)
			k.status = fail_host(c, dst, ENOMEM);
		else
			put_node(&k, src, dir, name, shown);
		free(shown);
	}
	copy_done(&k);
	return close_image(c, image, k.fs, k.status);
}

/* ------------------------------------------------------------------- get */

static int get_node(struct copy *k, uint64_t ino, const char *src, const char *dst);

static int all_zero(const char *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (b[i])
			return 0;
	return 1;
}

static int pwrite_all(int fd, const char *b, size_t n, off_t off)
{
	while (n) {
		ssize_t w = pwrite(fd, b, n, off);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -1;
		b += w;
		n -= (size_t)w;
		off += w;
	}
	return 0;
}

/* File contents; all-zero chunks become holes, the size is set at the end. */
static int get_file(struct copy *k, uint64_t ino, const struct uext4_stat *u, const char *src,
		    const char *dst)
{
	uext4_file *f;
	uint64_t off = 0;
	ssize_t n;
	int fd, err = 0, ret = uext4_open(k->fs, ino, O_RDONLY, &f);

	if (ret < 0)
		return image_error(k, src, ret);
	fd = open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_NOCTTY, 0600);
	if (fd < 0) {
		uext4_release(f);
		return host_error(k, dst, errno);
	}
	while (off < u->size) {
		n = uext4_pread(f, k->buf, CHUNK, off);
		if (n <= 0) {
			ret = (int)n;
			break;
		}
		if (!all_zero(k->buf, (size_t)n) && pwrite_all(fd, k->buf, (size_t)n, (off_t)off)) {
			err = errno;
			break;
		}
		off += (uint64_t)n;
		k->bytes += (uint64_t)n;
		show_progress(k, 0);
	}
	uext4_release(f);
	if (!err && !ret && ftruncate(fd, (off_t)u->size))
		err = errno;
	if (close(fd) && !err)
		err = errno;
	if (ret < 0)
		return image_error(k, src, ret);
	return err ? host_error(k, dst, err) : 0;
}

/* Why a host may refuse one attribute that the image holds. */
static const char *host_xattr_hint(int err, const char *name, const struct uext4_stat *u)
{
	switch (err) {
	case EPERM:
		if (!strncmp(name, "user.", 5) && !S_ISREG(u->mode) && !S_ISDIR(u->mode))
			return "Linux allows user.* attributes only on regular files and directories";
		return "the host does not let this process set it";
	case E2BIG:
		return "the value is over the host's limit of 64 KiB";
	case ENOSPC:
	case EDQUOT:
		return "the value does not fit in the host file system's attribute space";
	case EOPNOTSUPP:
		return "the host file system does not support this attribute name";
	case ERANGE:
	case EINVAL:
		return "the host rejects this attribute name";
	}
	return NULL;
}

/* "uext4 get: PATH: attribute NAME (N bytes) not copied: cause (why)". */
static void xattr_not_copied(struct copy *k, const char *path, const char *name, ssize_t len,
			     int err, const char *why)
{
	char size[32] = "";

	if (len >= 0)
		snprintf(size, sizeof(size), " (%zd bytes)", len);
	fprintf(stderr, "uext4 %s: %s: attribute %s%s not copied: %s%s%s%s\n", k->c->name, path,
		name, size, strerror(err), why ? " (" : "", why ? why : "", why ? ")" : "");
	k->status = 1;
}

/*
 * One attribute that cannot be copied costs that attribute only: a warning
 * naming the file and the attribute, the copy goes on, and the exit status
 * says it was not complete.  That is a host refusing it (a user.* name on a
 * symlink, a value over its limit, a name it does not know) or a name the
 * xattr calls cannot carry (listed by the image, but "user." alone or over
 * 255 bytes: the kernel cannot read it either).  Only trouble with a whole
 * side stops the copy: a corrupt or unreadable image (is_fatal), or a host
 * that fails as a whole (EIO, EROFS, ENOMEM).
 */
static int get_one_xattr(struct copy *k, uint64_t ino, const struct uext4_stat *u,
			 const char *src, const char *dst, const char *name)
{
	char what[PATH_BUF + 300], *val;
	ssize_t v = uext4_getxattr(k->fs, ino, name, NULL, 0);

	val = v >= 0 ? malloc((size_t)v + 1) : NULL;
	if (v >= 0 && val)
		v = uext4_getxattr(k->fs, ino, name, val, (size_t)v);
	if (v < 0 && !is_fatal(v)) {
		xattr_not_copied(k, src, name, -1, (int)-v, uext4_last_error());
		return 1;
	}
	if (v < 0 || !val) {
		free(val);
		snprintf(what, sizeof(what), "%s: %s", src, name);
		return image_error(k, what, v < 0 ? v : -ENOMEM);
	}
	if (lsetxattr(dst, name, val, (size_t)v, 0)) {
		int err = errno;

		if (err == EIO || err == EROFS || err == ENOMEM)
			k->stop = 1;
		xattr_not_copied(k, dst, name, v, err, host_xattr_hint(err, name, u));
		free(val);
		return 1;
	}
	free(val);
	return 0;
}

static int get_xattrs(struct copy *k, uint64_t ino, const struct uext4_stat *u, const char *src,
		      const char *dst)
{
	ssize_t n = uext4_listxattr(k->fs, ino, NULL, 0);
	char *names;
	int status = 0;

	if (n <= 0)
		return n < 0 ? image_error(k, src, n) : 0;
	names = malloc((size_t)n + 1);
	if (!names)
		return host_error(k, dst, ENOMEM);
	n = uext4_listxattr(k->fs, ino, names, (size_t)n);
	if (n < 0)
		status = image_error(k, src, n);
	for (ssize_t i = 0; i < n && !k->stop; i += (ssize_t)strlen(names + i) + 1)
		if (get_one_xattr(k, ino, u, src, dst, names + i))
			status = 1;
	free(names);
	return status;
}

/* Owner (failing only for root, like cp -p), mode, times, xattrs. */
static int get_attrs(struct copy *k, uint64_t ino, const struct uext4_stat *u, const char *src,
		     const char *dst)
{
	struct timespec ts[2] = { u->atime, u->mtime };
	int status = 0;

	if (k->preserve) {
		status = get_xattrs(k, ino, u, src, dst);
		if (lchown(dst, u->uid, u->gid) && (errno != EPERM || geteuid() == 0))
			status = host_error(k, dst, errno);
	}
	if (!S_ISLNK(u->mode) && chmod(dst, u->mode & 07777))
		status = host_error(k, dst, errno);
	if (k->preserve && utimensat(AT_FDCWD, dst, ts, AT_SYMLINK_NOFOLLOW))
		status = host_error(k, dst, errno);
	return status;
}

static int get_children(struct copy *k, uint64_t ino, const char *src, const char *dst);

/* Make dst for u's type (an existing directory is merged into, another
 * existing file replaced). */
static int get_create(struct copy *k, uint64_t ino, const struct uext4_stat *u,
		      const char *src, const char *dst)
{
	struct stat old;
	char target[PATH_BUF + 1];
	ssize_t n;

	if (!lstat(dst, &old)) {
		if (S_ISDIR(old.st_mode) && S_ISDIR(u->mode))
			return 0;
		if (S_ISDIR(old.st_mode))
			return host_error(k, dst, EISDIR);
		if (S_ISDIR(u->mode) || !S_ISREG(u->mode) || !S_ISREG(old.st_mode))
			if (unlink(dst))
				return host_error(k, dst, errno);
	}
	switch (u->mode & S_IFMT) {
	case S_IFREG:
		return 0;       /* get_file creates it */
	case S_IFDIR:
		return mkdir(dst, 0700) ? host_error(k, dst, errno) : 0;
	case S_IFLNK:
		n = uext4_readlink(k->fs, ino, target, sizeof(target));
		if (n < 0)
			return image_error(k, src, n);
		if ((size_t)n >= sizeof(target))
			return host_error(k, src, ENAMETOOLONG);
		target[n] = '\0';
		return symlink(target, dst) ? host_error(k, dst, errno) : 0;
	default:
		return mknod(dst, u->mode & (S_IFMT | 07777), (dev_t)u->rdev)
			? host_error(k, dst, errno) : 0;
	}
}

static int get_node(struct copy *k, uint64_t ino, const char *src, const char *dst)
{
	struct link_seen *seen;
	struct uext4_stat u;
	int ret = uext4_getattr(k->fs, ino, &u), status = 0;

	if (ret < 0)
		return image_error(k, src, ret);
	k->files++;
	show_progress(k, 0);
	if (!S_ISDIR(u.mode) && u.nlink > 1 && (seen = link_find(k, 0, ino))) {
		unlink(dst);
		return link(seen->host_path, dst) ? host_error(k, dst, errno) : 0;
	}
	if (get_create(k, ino, &u, src, dst))
		return 1;
	if (S_ISREG(u.mode))
		status = get_file(k, ino, &u, src, dst);
	else if (S_ISDIR(u.mode))
		status = get_children(k, ino, src, dst);
	if (!S_ISDIR(u.mode) && u.nlink > 1)
		link_add(k, 0, ino, 0, dst);
	if (k->stop)
		return 1;
	return get_attrs(k, ino, &u, src, dst) || status;
}

struct name_vec {
	char **v;
	uint64_t *ino;
	size_t n, cap;
	int err;
};

static int collect(void *ctx, const char *name, size_t len, uint64_t ino, unsigned dtype,
		   uint64_t next)
{
	struct name_vec *l = ctx;

	if ((len == 1 && name[0] == '.') || (len == 2 && name[0] == '.' && name[1] == '.'))
		return 0;
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 32;
		char **v = realloc(l->v, cap * sizeof(*v));
		uint64_t *in = v ? realloc(l->ino, cap * sizeof(*in)) : NULL;

		if (v)
			l->v = v;
		if (!in) {
			l->err = -ENOMEM;
			return 1;
		}
		l->ino = in;
		l->cap = cap;
	}
	if (!(l->v[l->n] = strndup(name, len))) {
		l->err = -ENOMEM;
		return 1;
	}
	l->ino[l->n++] = ino;
	return 0;
}

static int get_children(struct copy *k, uint64_t ino, const char *src, const char *dst)
{
	struct name_vec l = { 0 };
	int ret = uext4_readdir(k->fs, ino, 0, collect, &l), status = 0;
	char *s, *d;

	if (ret >= 0 && l.err)
		ret = l.err;
	if (ret < 0)
		status = image_error(k, src, ret);
	/* A child that failed is reported and skipped, as cp does; only an
	 * error that ends the copy (k->stop) skips its siblings. */
	for (size_t i = 0; i < l.n && !k->stop; i++) {
		s = join(src, l.v[i]);
		d = join(dst, l.v[i]);
		if (!s || !d)
			status = host_error(k, dst, ENOMEM);
		else if (get_node(k, l.ino[i], s, d))
			status = 1;
		free(s);
		free(d);
	}
	free_names(l.v, l.n);
	free(l.ino);
	return status;
}

int cmd_get(const struct command *c, int argc, char **argv)
{
	const char *image, *src, *dst;
	int preserve, verbose, ret;
	struct copy k;
	struct stat st;
	uint64_t ino;
	char name[256], buf[PATH_BUF], *target = NULL;

	if ((ret = copy_opts(c, argc, argv, &preserve, &verbose)))
		return ret;
	image = argv[optind];
	src = argv[optind + 1];
	dst = argv[optind + 2];
	if (copy_init(&k, c, preserve, verbose))
		return 1;
	/* The image is only read: mount it read-only. */
	if (open_image(c, image, &k.fs)) {
		copy_done(&k);
		return 1;
	}
	if (!resolve(c, k.fs, src, 0, &ino, NULL)) {
		/* Into DST when it is a directory, under SRC's own name. */
		base_name(image_path(src, buf, sizeof(buf)), name);
		if (!stat(dst, &st) && S_ISDIR(st.st_mode) && name[0])
			target = join(dst, name);
		else
			target = strdup(dst);
		if (!target)
			k.status = fail_host(c, dst, ENOMEM);
		else
			get_node(&k, ino, src, target);
	} else {
		k.status = 1;
	}
	free(target);
	copy_done(&k);
	return close_image(c, image, k.fs, k.status);
}
