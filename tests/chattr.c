/*
 * chattr.c - helper of tests/chattr.sh (run only by it).
 *
 *   chattr sys DIR       the operations below with system calls in DIR (a
 *                        directory on the kernel's ext4 or a uext4 mount)
 *   chattr lib IMAGE     the same through the library, at the image's root
 *
 * Both build the same tree (files i and a, directories I and A, each with
 * an entry e, a subdirectory s and a file x; spare files z1..z4), open fds
 * on i and a, set immutable on i and I and append-only on a and A, then
 * try every operation the two flags restrict and print one line per
 * operation: "NAME OK" or "NAME ERRNO-NAME".  chattr.sh compares the
 * lines of the kernel, the mount and the library.  Then the flags are
 * cleared again (so the tree can be removed) and "flags" lines show what
 * FS_IOC_GETFLAGS / uext4_get_flags() reported while they were set.
 */
#include "uext4.h"
#include "t.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#ifndef FALLOC_FL_KEEP_SIZE
#define FALLOC_FL_KEEP_SIZE 0x01
#endif
#ifndef FALLOC_FL_PUNCH_HOLE
#define FALLOC_FL_PUNCH_HOLE 0x02
#endif

/* ------------------------------------------------------------ backends */

struct ops {
	int (*mkfile)(const char *p, const char *data);
	int (*mkdir)(const char *p);
	int (*setflags)(const char *p, uint32_t fl);
	int (*getflags)(const char *p, uint32_t *fl);
	int (*open)(const char *p, int flags);  /* returns a slot, or -errno */
	int (*pwrite)(int slot, const char *buf, size_t n, off_t off);
	int (*ftruncate)(int slot, off_t len);
	int (*fallocate)(int slot, int mode, off_t off, off_t len);
	void (*close)(int slot);
	int (*truncate)(const char *p, off_t len);
	int (*unlink)(const char *p);
	int (*rmdir)(const char *p);
	int (*rename)(const char *a, const char *b);
	int (*link)(const char *a, const char *b);
	int (*symlink)(const char *target, const char *p);
	int (*chmod)(const char *p, mode_t m);
	int (*chown)(const char *p, uid_t u, gid_t g);
	int (*touch)(const char *p, int now);
	int (*setxattr)(const char *p, const char *name, const char *v);
	int (*removexattr)(const char *p, const char *name);
	int (*fsync)(int slot);
};

/* System calls, relative to DIR (the cwd). */
#define SYS(x) ((x) < 0 ? -errno : 0)
static int fds[16];
static int nfds;

static int s_mkfile(const char *p, const char *data)
{
	int fd = open(p, O_WRONLY | O_CREAT | O_EXCL, 0644);

	if (fd < 0)
		return -errno;
	int r = write(fd, data, strlen(data)) < 0 ? -errno : 0;
	close(fd);
	return r;
}
static int s_mkdir(const char *p) { return SYS(mkdir(p, 0755)); }
static int s_ioctl(const char *p, unsigned long cmd, uint32_t *fl)
{
	int fd = open(p, O_RDONLY | O_NONBLOCK), r;

	if (fd < 0)
		return -errno;
	r = SYS(ioctl(fd, cmd, fl));
	close(fd);
	return r;
}
static int s_setflags(const char *p, uint32_t fl) { return s_ioctl(p, FS_IOC_SETFLAGS, &fl); }
static int s_getflags(const char *p, uint32_t *fl) { return s_ioctl(p, FS_IOC_GETFLAGS, fl); }
static int s_open(const char *p, int flags)
{
	int fd = open(p, flags, 0644);

	if (fd < 0)
		return -errno;
	fds[nfds] = fd;
	return nfds++;
}
static int s_pwrite(int s, const char *b, size_t n, off_t off)
{
	return SYS(pwrite(fds[s], b, n, off));
}
static int s_ftruncate(int s, off_t len) { return SYS(ftruncate(fds[s], len)); }
static int s_fallocate(int s, int mode, off_t off, off_t len)
{
	return SYS(fallocate(fds[s], mode, off, len));
}
static void s_close(int s) { close(fds[s]); }
static int s_truncate(const char *p, off_t len) { return SYS(truncate(p, len)); }
static int s_unlink(const char *p) { return SYS(unlink(p)); }
static int s_rmdir(const char *p) { return SYS(rmdir(p)); }
static int s_rename(const char *a, const char *b) { return SYS(rename(a, b)); }
static int s_link(const char *a, const char *b) { return SYS(link(a, b)); }
static int s_symlink(const char *t, const char *p) { return SYS(symlink(t, p)); }
static int s_chmod(const char *p, mode_t m) { return SYS(chmod(p, m)); }
static int s_chown(const char *p, uid_t u, gid_t g) { return SYS(chown(p, u, g)); }
static int s_touch(const char *p, int now)
{
	struct timespec ts[2] = {{1000000000, 5}, {1000000000, 7}};

	return SYS(utimensat(AT_FDCWD, p, now ? NULL : ts, 0));
}
static int s_setxattr(const char *p, const char *n, const char *v)
{
	return SYS(setxattr(p, n, v, strlen(v), 0));
}
static int s_removexattr(const char *p, const char *n) { return SYS(removexattr(p, n)); }
static int s_fsync(int s) { return SYS(fsync(fds[s])); }

static const struct ops sys_ops = {
	s_mkfile, s_mkdir, s_setflags, s_getflags, s_open, s_pwrite, s_ftruncate, s_fallocate,
	s_close, s_truncate, s_unlink, s_rmdir, s_rename, s_link, s_symlink, s_chmod, s_chown,
	s_touch, s_setxattr, s_removexattr, s_fsync,
};

/* The library, on an image mounted read-write; paths relative to the root. */
static uext4_fs *fs;
static uext4_file *files[16];
static char *file_path[16];     /* the path each was opened by */
static int nfiles;

static int l_resolve(const char *p, uint64_t *ino)
{
	char abs[300];

	snprintf(abs, sizeof(abs), "/%s", p);
	return uext4_resolve(fs, abs, 0, ino);
}
/* Parent directory inode and last name of p. */
static int l_parent(const char *p, uint64_t *dir, const char **name)
{
	const char *sl = strrchr(p, '/');
	char d[256];

	if (!sl) {
		*dir = UEXT4_ROOT_INO;
		*name = p;
		return 0;
	}
	snprintf(d, sizeof(d), "%.*s", (int)(sl - p), p);
	*name = sl + 1;
	return l_resolve(d, dir);
}
static int l_mkfile(const char *p, const char *data)
{
	uint64_t dir;
	const char *name;
	struct uext4_stat st;
	uext4_file *f;
	int r;

	if ((r = l_parent(p, &dir, &name)) || (r = uext4_create(fs, dir, name, 0644, &st)))
		return r;
	if ((r = uext4_open(fs, st.ino, O_WRONLY, &f)))
		return r;
	r = uext4_pwrite(f, data, strlen(data), 0) < 0 ? -EIO : 0;
	uext4_release(f);
	return r;
}
static int l_mkdir(const char *p)
{
	uint64_t dir;
	const char *name;
	int r = l_parent(p, &dir, &name);

	return r ? r : uext4_mkdir(fs, dir, name, 0755, NULL);
}
static int l_setflags(const char *p, uint32_t fl)
{
	uint64_t ino;
	int r = l_resolve(p, &ino);

	return r ? r : uext4_set_flags(fs, ino, fl);
}
static int l_getflags(const char *p, uint32_t *fl)
{
	uint64_t ino;
	int r = l_resolve(p, &ino);

	return r ? r : uext4_get_flags(fs, ino, fl);
}
static int l_open(const char *p, int flags)
{
	uint64_t ino;
	int r = l_resolve(p, &ino);

	if (r == -ENOENT && (flags & O_CREAT)) {
		uint64_t dir;
		const char *name;
		struct uext4_stat st;

		if ((r = l_parent(p, &dir, &name)) || (r = uext4_create(fs, dir, name, 0644, &st)))
			return r;
		ino = st.ino;
	}
	if (r || (r = uext4_open(fs, ino, flags & ~(O_CREAT | O_EXCL), &files[nfiles])))
		return r;
	file_path[nfiles] = strdup(p);
	return nfiles++;
}
static int l_fsync(int s) { return uext4_fsync(files[s], 0); }
static int l_pwrite(int s, const char *b, size_t n, off_t off)
{
	ssize_t r = uext4_pwrite(files[s], b, n, (uint64_t)off);

	return r < 0 ? (int)r : 0;
}
static int l_setattr_path(const char *p, struct uext4_setattr *a)
{
	uint64_t ino;
	int r = l_resolve(p, &ino);

	return r ? r : uext4_setattr(fs, ino, a, NULL);
}
static int l_truncate(const char *p, off_t len);
/* ftruncate(2) is a setattr of the size of the open file's inode. */
static int l_ftruncate(int s, off_t len) { return l_truncate(file_path[s], len); }
static int l_fallocate(int s, int mode, off_t off, off_t len)
{
	return uext4_fallocate(files[s], mode, (uint64_t)off, (uint64_t)len);
}
static void l_close(int s) { uext4_release(files[s]); }
static int l_truncate(const char *p, off_t len)
{
	struct uext4_setattr a = {.valid = UEXT4_SET_SIZE, .size = (uint64_t)len};

	return l_setattr_path(p, &a);
}
static int l_unlink(const char *p)
{
	uint64_t dir;
	const char *name;
	int r = l_parent(p, &dir, &name);

	return r ? r : uext4_unlink(fs, dir, name);
}
static int l_rmdir(const char *p)
{
	uint64_t dir;
	const char *name;
	int r = l_parent(p, &dir, &name);

	return r ? r : uext4_rmdir(fs, dir, name);
}
static int l_rename(const char *a, const char *b)
{
	uint64_t da, db;
	const char *na, *nb;
	int r;

	if ((r = l_parent(a, &da, &na)) || (r = l_parent(b, &db, &nb)))
		return r;
	return uext4_rename(fs, da, na, db, nb, 0);
}
static int l_link(const char *a, const char *b)
{
	uint64_t ino, db;
	const char *nb;
	int r;

	if ((r = l_resolve(a, &ino)) || (r = l_parent(b, &db, &nb)))
		return r;
	return uext4_link(fs, ino, db, nb, NULL);
}
static int l_symlink(const char *t, const char *p)
{
	uint64_t dir;
	const char *name;
	int r = l_parent(p, &dir, &name);

	return r ? r : uext4_symlink(fs, dir, name, t, NULL);
}
static int l_chmod(const char *p, mode_t m)
{
	struct uext4_setattr a = {.valid = UEXT4_SET_MODE, .mode = m};

	return l_setattr_path(p, &a);
}
static int l_chown(const char *p, uid_t u, gid_t g)
{
	struct uext4_setattr a = {.valid = UEXT4_SET_UID | UEXT4_SET_GID, .uid = u, .gid = g};

	return l_setattr_path(p, &a);
}
static int l_touch(const char *p, int now)
{
	struct uext4_setattr a = {0};

	if (now) {
		a.valid = UEXT4_SET_ATIME_NOW | UEXT4_SET_MTIME_NOW;
	} else {
		a.valid = UEXT4_SET_ATIME | UEXT4_SET_MTIME;
		a.atime = (struct timespec){1000000000, 5};
		a.mtime = (struct timespec){1000000000, 7};
	}
	return l_setattr_path(p, &a);
}
static int l_setxattr(const char *p, const char *n, const char *v)
{
	uint64_t ino;
	int r = l_resolve(p, &ino);

	return r ? r : uext4_setxattr(fs, ino, n, v, strlen(v), 0);
}
static int l_removexattr(const char *p, const char *n)
{
	uint64_t ino;
	int r = l_resolve(p, &ino);

	return r ? r : uext4_removexattr(fs, ino, n);
}

static const struct ops lib_ops = {
	l_mkfile, l_mkdir, l_setflags, l_getflags, l_open, l_pwrite, l_ftruncate, l_fallocate,
	l_close, l_truncate, l_unlink, l_rmdir, l_rename, l_link, l_symlink, l_chmod, l_chown,
	l_touch, l_setxattr, l_removexattr, l_fsync,
};

/* ------------------------------------------------------------ the script */

static const struct ops *o;

static void report(const char *name, int r)
{
	if (r >= 0)
		printf("%s OK\n", name);
	else {
		const char *n = strerrorname_np(-r);

		printf("%s %s\n", name, n ? n : "E?");
	}
}

static void must(const char *what, int r)
{
	if (r < 0) {
		t_fail_call(what, r);
		exit(T_FAIL);
	}
}

static void build_tree(void)
{
	const char *names[] = {"i", "a", "z1", "z2", "z3", "z4", "z5"};

	for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++)
		must(names[k], o->mkfile(names[k], "hello\n"));
	for (const char *d = "IA"; *d; d++) {
		char p[32];

		snprintf(p, sizeof(p), "%c", *d);
		must(p, o->mkdir(p));
		snprintf(p, sizeof(p), "%c/e", *d);
		must(p, o->mkfile(p, "entry\n"));
		snprintf(p, sizeof(p), "%c/x", *d);
		must(p, o->mkfile(p, "x\n"));
		snprintf(p, sizeof(p), "%c/s", *d);
		must(p, o->mkdir(p));
	}
}

/* Operations on a restricted file F (fd: opened read-write before). */
static void file_ops(const char *F, int fd)
{
	char n[64], p[64];
	int s;

#define T(op, expr) (snprintf(n, sizeof(n), "%s.%s", F, op), report(n, (expr)))
	T("open_wronly", (s = o->open(F, O_WRONLY)) < 0 ? s : (o->close(s), 0));
	T("open_rdwr", (s = o->open(F, O_RDWR)) < 0 ? s : (o->close(s), 0));
	T("open_trunc", (s = o->open(F, O_WRONLY | O_APPEND | O_TRUNC)) < 0 ? s : (o->close(s), 0));
	s = o->open(F, O_WRONLY | O_APPEND);
	T("open_append", s < 0 ? s : 0);
	if (s >= 0) {
		T("append_write", o->pwrite(s, "app\n", 4, 0));
		T("append_falloc", o->fallocate(s, 0, 0, 8192));
		T("append_falloc_keep", o->fallocate(s, FALLOC_FL_KEEP_SIZE, 0, 16384));
		T("append_punch", o->fallocate(s, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, 4096));
		T("append_ftruncate", o->ftruncate(s, 0));
		o->close(s);
	}
	T("old_fd_write_end", o->pwrite(fd, "end\n", 4, 1 << 20));
	T("old_fd_write_mid", o->pwrite(fd, "M", 1, 0));
	T("old_fd_fsync", o->fsync(fd));
	T("old_fd_falloc", o->fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, 4096));
	T("old_fd_ftruncate", o->ftruncate(fd, 1));
	T("truncate", o->truncate(F, 0));
	T("unlink", o->unlink(F));
	snprintf(p, sizeof(p), "%s.moved", F);
	T("rename", o->rename(F, p));
	T("rename_over", o->rename(F[0] == 'i' ? "z1" : "z2", F));
	snprintf(p, sizeof(p), "%s.link", F);
	T("link", o->link(F, p));
	T("chmod", o->chmod(F, 0600));
	T("chown", o->chown(F, 1, 1));
	T("touch_now", o->touch(F, 1));
	T("touch_set", o->touch(F, 0));
	T("setxattr", o->setxattr(F, "user.t", "v"));
	T("removexattr", o->removexattr(F, "user.none"));
#undef T
}

/* Operations in a restricted directory D. */
static void dir_ops(const char *D)
{
	char n[64], p[64], q[64];
	int s;

#define T(op, expr) (snprintf(n, sizeof(n), "%s.%s", D, op), report(n, (expr)))
#define P(fmt) (snprintf(p, sizeof(p), fmt, D), p)
	T("create", (s = o->open(P("%s/new"), O_WRONLY | O_CREAT | O_EXCL)) < 0 ? s : (o->close(s), 0));
	T("mkdir", o->mkdir(P("%s/nd")));
	T("symlink", o->symlink("target", P("%s/sl")));
	T("unlink", o->unlink(P("%s/e")));
	T("rmdir", o->rmdir(P("%s/s")));
	snprintf(q, sizeof(q), "%s/e2", D);
	T("rename_within", o->rename(P("%s/e"), q));
	snprintf(q, sizeof(q), "%s.out", D);
	T("rename_out", o->rename(P("%s/x"), q));
	T("rename_in", o->rename(D[0] == 'I' ? "z3" : "z4", P("%s/in")));
	T("link_in", o->link("z5", P("%s/ln")));
	T("write_entry", (s = o->open(P("%s/x"), O_WRONLY)) < 0 ? s
		: (s = o->pwrite(s, "w", 1, 0), s));
	T("chmod", o->chmod(D, 0700));
	T("touch_now", o->touch(D, 1));
	T("setxattr", o->setxattr(D, "user.t", "v"));
#undef P
#undef T
}

static void show_flags(const char *p)
{
	uint32_t fl = 0;
	int r = o->getflags(p, &fl);

	if (r < 0)
		report(p, r);
	else
		printf("flags %s 0x%x\n", p, fl);
}

static int run(void)
{
	int fi, fa;

	build_tree();
	fi = o->open("i", O_RDWR);
	fa = o->open("a", O_RDWR);
	must("open i", fi);
	must("open a", fa);
	uint32_t f0;

	must("getflags i", o->getflags("i", &f0));
	must("chattr +i i", o->setflags("i", f0 | FS_IMMUTABLE_FL));
	must("chattr +a a", o->setflags("a", f0 | FS_APPEND_FL));
	must("getflags I", o->getflags("I", &f0));
	must("chattr +i I", o->setflags("I", f0 | FS_IMMUTABLE_FL));
	must("chattr +a A", o->setflags("A", f0 | FS_APPEND_FL));
	show_flags("i");
	show_flags("a");
	show_flags("I");
	show_flags("A");
	file_ops("i", fi);
	file_ops("a", fa);
	dir_ops("I");
	dir_ops("A");
	report("again_i", o->setflags("i", FS_IMMUTABLE_FL | (f0 & FS_EXTENT_FL)));
	o->close(fi);
	o->close(fa);
	must("chattr -i i", o->getflags("i", &f0));
	must("chattr -i i", o->setflags("i", f0 & ~FS_IMMUTABLE_FL));
	must("chattr -a a", o->setflags("a", f0 & ~FS_APPEND_FL));
	must("chattr -i I", o->getflags("I", &f0));
	must("chattr -i I", o->setflags("I", f0 & ~FS_IMMUTABLE_FL));
	must("chattr -a A", o->setflags("A", f0 & ~FS_APPEND_FL));
	return 0;
}

/* Who may set flags, through the library (uext4_set_caller()): lines
 * "WHO FLAG RESULT" for a file owned by uid 1000. */
static int owner_checks(const char *image)
{
	struct uext4_opts opts = {0};
	struct uext4_stat st;
	struct uext4_setattr a = {.valid = UEXT4_SET_UID | UEXT4_SET_GID, .uid = 1000, .gid = 1000};
	uint32_t fl;
	int r;

	if ((r = uext4_mount(image, &opts, &fs)) < 0) {
		fprintf(stderr, "mount %s: %s\n", image, uext4_last_error());
		return 2;
	}
	must("create", uext4_create(fs, UEXT4_ROOT_INO, "owned", 0644, &st));
	must("chown", uext4_setattr(fs, st.ino, &a, NULL));
	must("get", uext4_get_flags(fs, st.ino, &fl));
	uext4_set_caller(2000, 2000);
	report("other +d", uext4_set_flags(fs, st.ino, fl | FS_NODUMP_FL));
	uext4_set_caller(1000, 1000);
	report("owner +d", uext4_set_flags(fs, st.ino, fl | FS_NODUMP_FL));
	report("owner +i", uext4_set_flags(fs, st.ino, fl | FS_NODUMP_FL | FS_IMMUTABLE_FL));
	report("owner +a", uext4_set_flags(fs, st.ino, fl | FS_NODUMP_FL | FS_APPEND_FL));
	uext4_set_caller(0, 0);
	report("root +i", uext4_set_flags(fs, st.ino, fl | FS_NODUMP_FL | FS_IMMUTABLE_FL));
	uext4_set_caller(1000, 1000);
	report("owner -i", uext4_set_flags(fs, st.ino, fl | FS_NODUMP_FL));
	report("owner -d of +i", uext4_set_flags(fs, st.ino, fl | FS_IMMUTABLE_FL));
	uext4_set_caller(0, 0);
	report("root -i", uext4_set_flags(fs, st.ino, fl));
	report("root +D on a file", uext4_set_flags(fs, st.ino, fl | FS_DIRSYNC_FL));
	report("root +C (not ext4)", uext4_set_flags(fs, st.ino, fl | FS_NOCOW_FL));
	report("root +j", uext4_set_flags(fs, st.ino, fl | FS_JOURNAL_DATA_FL));
	must("get", uext4_get_flags(fs, st.ino, &fl));
	printf("flags owned 0x%x\n", fl);
	if ((r = uext4_umount(fs)) < 0) {
		fprintf(stderr, "umount: %s\n", uext4_last_error());
		return 2;
	}
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "sys")) {
		if (chdir(argv[2]) < 0) {
			perror(argv[2]);
			return 2;
		}
		o = &sys_ops;
		return run();
	}
	if (argc == 3 && !strcmp(argv[1], "lib")) {
		struct uext4_opts opts = {0};
		int r = uext4_mount(argv[2], &opts, &fs);

		if (r < 0) {
			fprintf(stderr, "mount %s: %s\n", argv[2], uext4_last_error());
			return 2;
		}
		o = &lib_ops;
		r = run();
		int u = uext4_umount(fs);

		if (u < 0) {
			fprintf(stderr, "umount: %s\n", uext4_last_error());
			return 2;
		}
		return r;
	}
	if (argc == 3 && !strcmp(argv[1], "owner"))
		return owner_checks(argv[2]);
	fprintf(stderr, "usage: chattr sys DIR | chattr lib IMAGE | chattr owner IMAGE\n");
	return 2;
}
