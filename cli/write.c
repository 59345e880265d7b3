/*
 * write.c - the uext4 commands that change names and attributes in an
 * image: mkdir, rm, mv, ln, chmod, chown, setfattr, truncate.
 *
 * Each command mounts the image read-write, does all its work, and
 * unmounts, which writes everything back; a failing write-back is an error
 * (close_image).  Errors name the command, the path and the cause; the
 * commands go on with their other paths after an error, like coreutils,
 * and exit 1 at the end.
 */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#define PATH_BUF 4096

/* ------------------------------------------------------------ path helpers */

/* Copy an image path, absolute, without trailing slashes ("/" stays). */
static int clean_path(const char *path, char *out, size_t len)
{
	char tmp[PATH_BUF];
	const char *p = image_path(path, tmp, sizeof(tmp));
	size_t n = strlen(p);

	if (n >= len)
		return -ENAMETOOLONG;
	memcpy(out, p, n + 1);
	while (n > 1 && out[n - 1] == '/')
		out[--n] = '\0';
	return 0;
}

/* The last component of a path ("a/b/" -> "b"). */
static const char *last_component(const char *path, char *buf, size_t len)
{
	char *slash;

	if (clean_path(path, buf, len))
		return path;
	slash = strrchr(buf, '/');
	return slash ? slash + 1 : buf;
}

int split_path(const struct command *c, uext4_fs *fs, const char *path, uint64_t *dir,
	       char name[256])
{
	char buf[PATH_BUF];
	struct uext4_stat st;
	char *slash;
	int ret;

	if ((ret = clean_path(path, buf, sizeof(buf))))
		return fail_host(c, path, -ret);
	if (!strcmp(buf, "/")) {
		fprintf(stderr, "uext4 %s: %s: not allowed on the root directory\n", c->name, path);
		return 1;
	}
	slash = strrchr(buf, '/');
	if (!strcmp(slash + 1, ".") || !strcmp(slash + 1, ".."))
		return fail_host(c, path, EINVAL);
	if (strlen(slash + 1) > 255)
		return fail_host(c, path, ENAMETOOLONG);
	strcpy(name, slash + 1);
	if (slash == buf)
		slash[1] = '\0';        /* parent is the root */
	else
		slash[0] = '\0';
	ret = uext4_resolve(fs, buf, 1, dir);
	if (ret >= 0)
		ret = uext4_getattr(fs, *dir, &st);
	if (ret < 0)
		return fail(c, path, ret);
	return S_ISDIR(st.mode) ? 0 : fail_host(c, path, ENOTDIR);
}

/* Where "ln TARGET LINKNAME" / "mv SRC DST" put the new name: into DST if it
 * is a directory (following symlinks), else DST itself. */
static int dest_name(const struct command *c, uext4_fs *fs, const char *dst,
		     const char *src_path, uint64_t *dir, char name[256])
{
	char buf[PATH_BUF], comp[PATH_BUF];
	struct uext4_stat st;
	uint64_t ino;
	const char *base;

	if (uext4_resolve(fs, image_path(dst, buf, sizeof(buf)), 1, &ino) >= 0 &&
	    uext4_getattr(fs, ino, &st) >= 0 && S_ISDIR(st.mode)) {
		base = last_component(src_path, comp, sizeof(comp));
		if (strlen(base) > 255 || !*base || !strcmp(base, "/"))
			return fail_host(c, src_path, EINVAL);
		*dir = ino;
		strcpy(name, base);
		return 0;
	}
	return split_path(c, fs, dst, dir, name);
}

/* Resolve each PATH argument and apply fn; 0 or 1. */
typedef int (*path_fn)(const struct command *c, uext4_fs *fs, const char *path,
		       uint64_t ino, void *arg);

static int for_each_path(const struct command *c, uext4_fs *fs, char **paths, int n,
			 int follow, path_fn fn, void *arg)
{
	int status = 0;
	uint64_t ino;

	for (int i = 0; i < n; i++) {
		if (resolve(c, fs, paths[i], follow, &ino, NULL) || fn(c, fs, paths[i], ino, arg))
			status = 1;
	}
	return status;
}

static int set_attr(const struct command *c, uext4_fs *fs, const char *path, uint64_t ino,
		    const struct uext4_setattr *a)
{
	struct uext4_stat st;
	int ret = uext4_setattr(fs, ino, a, &st);

	return ret < 0 ? fail(c, path, ret) : 0;
}

/* ------------------------------------------------------------------- mkdir */

/* mkdir -p: every missing component, existing directories are fine. */
static int make_parents(const struct command *c, uext4_fs *fs, const char *path, uint32_t mode)
{
	char buf[PATH_BUF], name[256];
	struct uext4_stat st;
	uint64_t ino, dir;
	int ret;

	if ((ret = clean_path(path, buf, sizeof(buf))))
		return fail_host(c, path, -ret);
	for (char *p = buf + 1;; p++) {
		if (*p != '/' && *p != '\0')
			continue;
		char save = *p;
		*p = '\0';
		ret = uext4_resolve(fs, buf, 1, &ino);
		if (ret >= 0 && (ret = uext4_getattr(fs, ino, &st)) >= 0 && !S_ISDIR(st.mode))
			return fail_host(c, path, ENOTDIR);
		if (ret == -ENOENT) {
			if (split_path(c, fs, buf, &dir, name))
				return 1;
			/* Intermediate directories get u+wx, as mkdir -p does. */
			ret = uext4_mkdir(fs, dir, name, S_IFDIR | (save ? mode | 0300 : mode), &st);
		}
		if (ret < 0)
			return fail(c, path, ret);
		*p = save;
		if (!save)
			return 0;
		while (p[1] == '/')
			p++;
		if (!p[1])
			return 0;
	}
}

static int make_dir(const struct command *c, uext4_fs *fs, const char *path, uint32_t mode)
{
	char name[256];
	struct uext4_stat st;
	uint64_t dir;
	int ret;

	if (split_path(c, fs, path, &dir, name))
		return 1;
	ret = uext4_mkdir(fs, dir, name, S_IFDIR | mode, &st);
	return ret < 0 ? fail(c, path, ret) : 0;
}

static int parse_mode(const char *s, uint32_t *mode)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 8);
	if (!*s || *end || errno || v > 07777 || s[0] == '-' || s[0] == '+')
		return -1;
	*mode = (uint32_t)v;
	return 0;
}

int cmd_mkdir(const struct command *c, int argc, char **argv)
{
	int parents = 0, ch, status = 0;
	uint32_t mode = 0755;
	uext4_fs *fs;

	while ((ch = next_opt(c, argc, argv, "pm:")) != -1) {
		if (ch == 'p')
			parents = 1;
		else if (ch == 'm' && !parse_mode(optarg, &mode))
			continue;
		else
			return usage_error(c, ch == 'm' ? "MODE must be octal (0..7777)" : NULL);
	}
	if (argc - optind < 2)
		return usage_error(c, "missing IMAGE or PATH");
	if (open_image_rw(c, argv[optind], &fs))
		return 1;
	for (int i = optind + 1; i < argc; i++)
		if (parents ? make_parents(c, fs, argv[i], mode) : make_dir(c, fs, argv[i], mode))
			status = 1;
	return close_image(c, argv[optind], fs, status);
}

/* ---------------------------------------------------------------------- rm */

struct name_list {
	char **v;
	size_t n, cap;
	int err;
};

static int collect_name(void *ctx, const char *name, size_t len, uint64_t ino,
			unsigned dtype, uint64_t next)
{
	struct name_list *l = ctx;

	if ((len == 1 && name[0] == '.') || (len == 2 && name[0] == '.' && name[1] == '.'))
		return 0;
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 32;
		char **v = realloc(l->v, cap * sizeof(*v));

		if (!v) {
			l->err = -ENOMEM;
			return 1;
		}
		l->v = v;
		l->cap = cap;
	}
	if (!(l->v[l->n] = strndup(name, len))) {
		l->err = -ENOMEM;
		return 1;
	}
	l->n++;
	return 0;
}

static void free_names(struct name_list *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->v[i]);
	free(l->v);
}

/* Empty directory ino (at path): remove every entry below it. */
static int empty_dir(const struct command *c, uext4_fs *fs, uint64_t ino, const char *path)
{
	struct name_list l = { 0 };
	int ret = uext4_readdir(fs, ino, 0, collect_name, &l), status = 0;
	char *child;

	if (ret >= 0 && l.err)
		ret = l.err;
	if (ret < 0) {
		free_names(&l);
		return fail(c, path, ret);
	}
	for (size_t i = 0; i < l.n && !status; i++) {
		if (asprintf(&child, "%s/%s", strcmp(path, "/") ? path : "", l.v[i]) < 0) {
			status = fail_host(c, path, ENOMEM);
			break;
		}
		status = remove_tree(c, fs, ino, l.v[i], child, 1);
		free(child);
	}
	free_names(&l);
	return status;
}

int remove_tree(const struct command *c, uext4_fs *fs, uint64_t dir, const char *name,
		const char *path, int recursive)
{
	struct uext4_stat st;
	int ret = uext4_lookup(fs, dir, name, &st);

	if (ret < 0)
		return fail(c, path, ret);
	if (!S_ISDIR(st.mode))
		ret = uext4_unlink(fs, dir, name);
	else if (!recursive)
		return fail_host(c, path, EISDIR);
	else if (empty_dir(c, fs, st.ino, path))
		return 1;
	else
		ret = uext4_rmdir(fs, dir, name);
	return ret < 0 ? fail(c, path, ret) : 0;
}

static int remove_path(const struct command *c, uext4_fs *fs, const char *path, int recursive,
		       int force)
{
	char name[256], buf[PATH_BUF];
	uint64_t dir, ino;

	/* -f: a missing path (or parent) is no error; a dangling symlink is
	 * there to be removed. */
	if (force && uext4_resolve(fs, image_path(path, buf, sizeof(buf)), 0, &ino) == -ENOENT)
		return 0;
	if (split_path(c, fs, path, &dir, name))
		return 1;
	return remove_tree(c, fs, dir, name, path, recursive);
}

int cmd_rm(const struct command *c, int argc, char **argv)
{
	int recursive = 0, force = 0, ch, status = 0;
	uext4_fs *fs;

	while ((ch = next_opt(c, argc, argv, "rRf")) != -1) {
		if (ch == 'r' || ch == 'R')
			recursive = 1;
		else if (ch == 'f')
			force = 1;
		else
			return usage_error(c, NULL);
	}
	if (argc - optind < 2)
		return usage_error(c, "missing IMAGE or PATH");
	if (open_image_rw(c, argv[optind], &fs))
		return 1;
	for (int i = optind + 1; i < argc; i++)
		if (remove_path(c, fs, argv[i], recursive, force))
			status = 1;
	return close_image(c, argv[optind], fs, status);
}

/* ---------------------------------------------------------------------- mv */

int cmd_mv(const struct command *c, int argc, char **argv)
{
	char sname[256], dname[256], what[2 * PATH_BUF];
	unsigned flags = 0;
	uint64_t sdir, ddir;
	uext4_fs *fs;
	int ch, status, ret;

	while ((ch = next_opt(c, argc, argv, "nx")) != -1) {
		if (ch == 'n')
			flags |= UEXT4_RENAME_NOREPLACE;
		else if (ch == 'x')
			flags |= UEXT4_RENAME_EXCHANGE;
		else
			return usage_error(c, NULL);
	}
	if (flags == (UEXT4_RENAME_NOREPLACE | UEXT4_RENAME_EXCHANGE))
		return usage_error(c, "-n and -x exclude each other");
	if (argc - optind != 3)
		return usage_error(c, argc - optind > 3 ? "too many arguments"
					: "missing IMAGE, SRC or DST");
	if (open_image_rw(c, argv[optind], &fs))
		return 1;
	status = split_path(c, fs, argv[optind + 1], &sdir, sname);
	if (!status && (ret = uext4_lookup(fs, sdir, sname, NULL)) < 0)
		status = fail(c, argv[optind + 1], ret);
	if (!status)
		status = (flags & UEXT4_RENAME_EXCHANGE)
			? split_path(c, fs, argv[optind + 2], &ddir, dname)
			: dest_name(c, fs, argv[optind + 2], argv[optind + 1], &ddir, dname);
	if (!status) {
		ret = uext4_rename(fs, sdir, sname, ddir, dname, flags);
		snprintf(what, sizeof(what), "%s -> %s", argv[optind + 1], argv[optind + 2]);
		if (ret < 0)
			status = fail(c, what, ret);
	}
	return close_image(c, argv[optind], fs, status);
}

/* ---------------------------------------------------------------------- ln */

int cmd_ln(const struct command *c, int argc, char **argv)
{
	char name[256];
	struct uext4_stat st;
	uint64_t dir, ino;
	int sym = 0, ch, status, ret = 0;
	const char *target, *linkname;
	uext4_fs *fs;

	while ((ch = next_opt(c, argc, argv, "s")) != -1) {
		if (ch == 's')
			sym = 1;
		else
			return usage_error(c, NULL);
	}
	if (argc - optind != 3)
		return usage_error(c, argc - optind > 3 ? "too many arguments"
					: "missing IMAGE, TARGET or LINKNAME");
	target = argv[optind + 1];
	linkname = argv[optind + 2];
	if (sym && !*target)
		return usage_error(c, "empty TARGET");
	if (open_image_rw(c, argv[optind], &fs))
		return 1;
	/* A hard link names the inode TARGET is (a symlink itself, not what it
	 * points to); a symbolic link stores TARGET as text. */
	status = sym ? 0 : resolve(c, fs, target, 0, &ino, NULL);
	if (!status)
		status = dest_name(c, fs, linkname, target, &dir, name);
	if (!status) {
		ret = sym ? uext4_symlink(fs, dir, name, target, &st)
			  : uext4_link(fs, ino, dir, name, &st);
		if (ret < 0)
			status = fail(c, linkname, ret);
	}
	return close_image(c, argv[optind], fs, status);
}

/* ------------------------------------------------------------ chmod, chown */

static int chmod_one(const struct command *c, uext4_fs *fs, const char *path, uint64_t ino,
		     void *arg)
{
	struct uext4_setattr a = { .valid = UEXT4_SET_MODE, .mode = *(uint32_t *)arg };

	return set_attr(c, fs, path, ino, &a);
}

int cmd_chmod(const struct command *c, int argc, char **argv)
{
	uint32_t mode;
	uext4_fs *fs;
	int status;

	if (next_opt(c, argc, argv, "") != -1)
		return usage_error(c, NULL);
	if (argc - optind < 3)
		return usage_error(c, "missing IMAGE, MODE or PATH");
	if (parse_mode(argv[optind + 1], &mode))
		return usage_error(c, "MODE must be octal (0..7777)");
	if (open_image_rw(c, argv[optind], &fs))
		return 1;
	status = for_each_path(c, fs, argv + optind + 2, argc - optind - 2, 1, chmod_one, &mode);
	return close_image(c, argv[optind], fs, status);
}

/* A number, or a name in the host's user/group database. */
static int parse_id(const char *s, int group, uint32_t *id)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (*s && !*end && !errno && v <= UINT32_MAX && s[0] != '-' && s[0] != '+') {
		*id = (uint32_t)v;
		return 0;
	}
	if (group) {
		struct group *g = getgrnam(s);

		if (!g)
			return -1;
		*id = g->gr_gid;
	} else {
		struct passwd *p = getpwnam(s);

		if (!p)
			return -1;
		*id = p->pw_uid;
	}
	return 0;
}

/* "UID", "UID:GID", "UID:" or ":GID" into a setattr. */
static int parse_owner(const char *spec, struct uext4_setattr *a)
{
	char *copy = strdup(spec), *colon;
	int ret = -1;

	if (!copy)
		return -1;
	memset(a, 0, sizeof(*a));
	colon = strchr(copy, ':');
	if (colon)
		*colon = '\0';
	if (*copy) {
		if (parse_id(copy, 0, &a->uid))
			goto out;
		a->valid |= UEXT4_SET_UID;
	}
	if (colon && colon[1]) {
		if (parse_id(colon + 1, 1, &a->gid))
			goto out;
		a->valid |= UEXT4_SET_GID;
	}
	ret = a->valid ? 0 : -1;
out:
	free(copy);
	return ret;
}

static int chown_one(const struct command *c, uext4_fs *fs, const char *path, uint64_t ino,
		     void *arg)
{
	return set_attr(c, fs, path, ino, arg);
}

int cmd_chown(const struct command *c, int argc, char **argv)
{
	struct uext4_setattr a;
	int follow = 1, ch, status;
	uext4_fs *fs;

	while ((ch = next_opt(c, argc, argv, "h")) != -1) {
		if (ch == 'h')
			follow = 0;
		else
			return usage_error(c, NULL);
	}
	if (argc - optind < 3)
		return usage_error(c, "missing IMAGE, OWNER or PATH");
	if (parse_owner(argv[optind + 1], &a))
		return usage_error(c, "bad OWNER (UID[:GID], numbers or known names)");
	if (open_image_rw(c, argv[optind], &fs))
		return 1;
	status = for_each_path(c, fs, argv + optind + 2, argc - optind - 2, follow, chown_one, &a);
	return close_image(c, argv[optind], fs, status);
}

/* ---------------------------------------------------------------- setfattr */

int hex_digit(int ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	if (ch >= 'A' && ch <= 'F')
		return ch - 'A' + 10;
	return -1;
}

static int b64_digit(int ch)
{
	static const char tab[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	const char *p = ch ? strchr(tab, ch) : NULL;

	return p ? (int)(p - tab) : -1;
}

static int decode_hex(const char *s, unsigned char *out, size_t *len)
{
	size_t n = 0;

	for (; *s; s += 2) {
		int hi = hex_digit(s[0]), lo = s[1] ? hex_digit(s[1]) : -1;

		if (hi < 0 || lo < 0)
			return -1;
		out[n++] = (unsigned char)(hi << 4 | lo);
	}
	*len = n;
	return 0;
}

static int decode_base64(const char *s, unsigned char *out, size_t *len)
{
	uint32_t acc = 0;
	int bits = 0;
	size_t n = 0;

	for (; *s && *s != '='; s++) {
		int d = b64_digit(*s);

		if (d < 0)
			return -1;
		acc = acc << 6 | (uint32_t)d;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			out[n++] = (unsigned char)(acc >> bits);
		}
	}
	*len = n;
	return 0;
}

/* A quoted string: the quotes go, \\, \" and \ooo octal escapes are decoded. */
static int decode_quoted(const char *s, unsigned char *out, size_t *len)
{
	size_t n = 0, l = strlen(s);

	for (size_t i = 1; i + 1 < l; i++) {
		if (s[i] != '\\' || i + 2 >= l) {
			out[n++] = (unsigned char)s[i];
		} else if (s[i + 1] >= '0' && s[i + 1] <= '7') {
			unsigned v = 0;
			int k;

			for (k = 0; k < 3 && i + 1 < l - 1 && s[i + 1] >= '0' && s[i + 1] <= '7'; k++)
				v = v * 8 + (unsigned)(s[++i] - '0');
			out[n++] = (unsigned char)v;
		} else {
			out[n++] = (unsigned char)s[++i];
		}
	}
	*len = n;
	return 0;
}

/* setfattr(1)'s value encodings: 0x hex, 0s base64, "quoted", else text. */
static int decode_value(const char *s, unsigned char **out, size_t *len)
{
	size_t l = strlen(s);
	int ret;

	*out = malloc(l + 1);
	if (!*out)
		return -1;
	if (l >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X'))
		ret = decode_hex(s + 2, *out, len);
	else if (l >= 2 && s[0] == '0' && (s[1] == 's' || s[1] == 'S'))
		ret = decode_base64(s + 2, *out, len);
	else if (l >= 2 && s[0] == '"' && s[l - 1] == '"')
		ret = decode_quoted(s, *out, len);
	else {
		memcpy(*out, s, l);
		*len = l;
		ret = 0;
	}
	if (ret) {
		free(*out);
		*out = NULL;
	}
	return ret;
}

struct xattr_op {
	const char *name;
	const unsigned char *value;   /* NULL: remove */
	size_t len;
};

static int setfattr_one(const struct command *c, uext4_fs *fs, const char *path, uint64_t ino,
			void *arg)
{
	const struct xattr_op *op = arg;
	char what[PATH_BUF + 300];
	int ret = op->value ? uext4_setxattr(fs, ino, op->name, op->value, op->len, 0)
			    : uext4_removexattr(fs, ino, op->name);

	snprintf(what, sizeof(what), "%s: %s", path, op->name);
	return ret < 0 ? fail(c, what, ret) : 0;
}

int cmd_setfattr(const struct command *c, int argc, char **argv)
{
	const char *name = NULL, *remove = NULL, *value = NULL;
	struct xattr_op op = { 0 };
	unsigned char *buf = NULL;
	int follow = 1, ch, status;
	uext4_fs *fs;

	while ((ch = next_opt(c, argc, argv, "n:v:x:h")) != -1) {
		if (ch == 'n')
			name = optarg;
		else if (ch == 'v')
			value = optarg;
		else if (ch == 'x')
			remove = optarg;
		else if (ch == 'h')
			follow = 0;
		else
			return usage_error(c, NULL);
	}
	if (!name == !remove)
		return usage_error(c, "give exactly one of -n NAME and -x NAME");
	if (remove && value)
		return usage_error(c, "-v goes with -n, not -x");
	if (argc - optind < 2)
		return usage_error(c, "missing IMAGE or PATH");
	op.name = name ? name : remove;
	if (name) {
		if (decode_value(value ? value : "", &buf, &op.len))
			return usage_error(c, "bad VALUE encoding");
		op.value = buf;
	}
	if (open_image_rw(c, argv[optind], &fs)) {
		free(buf);
		return 1;
	}
	status = for_each_path(c, fs, argv + optind + 1, argc - optind - 1, follow,
			       setfattr_one, &op);
	free(buf);
	return close_image(c, argv[optind], fs, status);
}

/* ---------------------------------------------------------------- truncate */

/* "123", "4K", "10M", "2G", "1T" (powers of 1024). */
static int parse_size(const char *s, uint64_t *size)
{
	char *end;
	unsigned long long v;
	unsigned shift = 0;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (end == s || errno || s[0] == '-' || s[0] == '+')
		return -1;
	switch (*end) {
	case '\0': break;
	case 'k': case 'K': shift = 10; break;
	case 'm': case 'M': shift = 20; break;
	case 'g': case 'G': shift = 30; break;
	case 't': case 'T': shift = 40; break;
	default: return -1;
	}
	if (*end && end[1] && strcmp(end + 1, "iB") && strcmp(end + 1, "B"))
		return -1;
	if (shift && v > (UINT64_MAX >> shift))
		return -1;
	*size = (uint64_t)v << shift;
	return 0;
}

static int truncate_one(const struct command *c, uext4_fs *fs, const char *path,
			uint64_t size, int no_create)
{
	char buf[PATH_BUF], name[256];
	struct uext4_setattr a = { .valid = UEXT4_SET_SIZE, .size = size };
	struct uext4_stat st;
	uint64_t ino, dir;
	int ret = uext4_resolve(fs, image_path(path, buf, sizeof(buf)), 1, &ino);

	if (ret == -ENOENT && no_create)
		return 0;       /* like truncate -c */
	if (ret == -ENOENT) {
		if (split_path(c, fs, path, &dir, name))
			return 1;
		ret = uext4_create(fs, dir, name, S_IFREG | 0644, &st);
		ino = st.ino;
	}
	if (ret >= 0)
		ret = uext4_getattr(fs, ino, &st);
	if (ret < 0)
		return fail(c, path, ret);
	if (!S_ISREG(st.mode))
		return fail_host(c, path, S_ISDIR(st.mode) ? EISDIR : EINVAL);
	return set_attr(c, fs, path, ino, &a);
}

int cmd_truncate(const struct command *c, int argc, char **argv)
{
	const char *size_arg = NULL;
	int no_create = 0, ch, status = 0;
	uint64_t size;
	uext4_fs *fs;

	while ((ch = next_opt(c, argc, argv, "s:c")) != -1) {
		if (ch == 's')
			size_arg = optarg;
		else if (ch == 'c')
			no_create = 1;
		else
			return usage_error(c, NULL);
	}
	if (!size_arg)
		return usage_error(c, "missing -s SIZE");
	if (parse_size(size_arg, &size))
		return usage_error(c, "bad SIZE (a number, optionally K, M, G or T)");
	if (argc - optind < 2)
		return usage_error(c, "missing IMAGE or PATH");
	if (open_image_rw(c, argv[optind], &fs))
		return 1;
	for (int i = optind + 1; i < argc; i++)
		if (truncate_one(c, fs, argv[i], size, no_create))
			status = 1;
	return close_image(c, argv[optind], fs, status);
}
