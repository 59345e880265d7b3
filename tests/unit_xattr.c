/*
 * unit_xattr.c - extended attributes, POSIX ACLs and symlink targets,
 * checked against the source tree and against the kernel.
 *
 * Builds a tree with xattrs of many sizes (in the inode body and in the
 * external block), trusted./security. names, ACLs set with setfacl, and
 * symlinks of lengths around the fast/slow limit; makes ext4 images from
 * it with mke2fs -d (256-byte inodes, inline_data, 128-byte inodes); reads
 * everything back with libuext4 and compares with the source tree and with
 * a read-only loop mount of the image (the kernel is the oracle: lists in
 * the same order, values and ACL bytes identical), also from 4 threads at
 * once.  A second, smaller tree is checked on 1 KiB blocks.  Values in EA
 * inodes are written by the kernel (rw loop mount of an -O ea_inode image)
 * and read back.  Then corrupts xattr entries, ACLs, the xattr block
 * checksum and symlink inodes and expects -EUCLEAN with a message.
 *
 * Needs root (trusted.* xattrs, loop mounts), setfacl and mke2fs; skips
 * (77) without them.  A loop mount that fails only skips the kernel
 * comparison.  Usage: unit_xattr [seed]
 */
/* run-in: release asan tsan */
#include "error.h"
#include "icache.h"
#include "inode.h"
#include "internal.h"
#include "ondisk.h"
#include "xattr.h"
#include "uext4.h"
#include "t.h"

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

static int nvalues, nlists, nlinks; /* what was compared (child process) */
static char tmpdir[64];
static char srcdir[128], mntdir[128];
static bool have_mnt;

/* ------------------------------------------------------------ the tree */

static void fill_random(char *buf, size_t n, bool printable)
{
	static const char chars[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-/";

	for (size_t i = 0; i < n; i++)
		buf[i] = printable ? chars[rand() % (sizeof(chars) - 1)] : (char)(rand() & 0xff);
}

static void set_x(const char *rel, const char *name, size_t len)
{
	char path[512], *v = malloc(len + 1);

	fill_random(v, len, false);
	snprintf(path, sizeof(path), "%s/%s", srcdir, rel);
	if (lsetxattr(path, name, v, len, 0) != 0) {
		printf("FAIL setxattr %s %s (%zu bytes): %m\n", rel, name, len);
		t_failures++;
	}
	free(v);
}

static void mk_file(const char *rel, size_t size)
{
	char path[512], *buf = malloc(size + 1);
	int fd;

	snprintf(path, sizeof(path), "%s/%s", srcdir, rel);
	fill_random(buf, size, true);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || write(fd, buf, size) != (ssize_t)size)
		printf("FAIL create %s: %m\n", path), t_failures++;
	if (fd >= 0)
		close(fd);
	free(buf);
}

static void mk_link(const char *rel, size_t len)
{
	char path[512], *target = malloc(len + 1);

	fill_random(target, len, true);
	target[len] = '\0';
	snprintf(path, sizeof(path), "%s/%s", srcdir, rel);
	if (symlink(target, path) != 0)
		printf("FAIL symlink %s: %m\n", path), t_failures++;
	free(target);
}

static const size_t link_lens[] = { 1, 59, 60, 61, 200, 4000 };
#define NLINKS (sizeof(link_lens) / sizeof(link_lens[0]))

static void build_tree(void)
{
	static const size_t mix[] = { 0, 1, 15, 100, 500, 1000, 1500 };
	char name[300];

	mk_file("none", 10);
	mk_file("small", 10);
	set_x("small", "user.empty", 0);
	set_x("small", "user.one", 1);
	set_x("small", "trusted.t", 10);
	set_x("small", "security.s", 20);
	mk_file("big", 10);
	set_x("big", "user.big", 3000);
	set_x("big", "user.tiny", 3);
	mk_file("mix", 10);
	for (size_t i = 0; i < sizeof(mix) / sizeof(mix[0]); i++) {
		snprintf(name, sizeof(name), "%s.v%zu", i % 3 == 2 ? "trusted" : "user", mix[i]);
		set_x("mix", name, mix[i]);
	}
	mk_file("many", 10);
	for (int i = 0; i < 40; i++) {
		snprintf(name, sizeof(name), "user.many%02d", i);
		set_x("many", name, 50);
	}
	mk_file("longname", 10);
	memset(name, 'n', sizeof(name));
	memcpy(name, "user.", 5);
	name[5 + 200] = '\0';
	set_x("longname", name, 10);
	mk_file("inl100", 100);
	set_x("inl100", "user.i", 4);
	mk_file("acl", 10);
	t_sh("setfacl -m u:1234:rw-,g:555:r--,m::rwx %s/acl", srcdir);
	t_sh("mkdir %s/acldir && setfacl -m u:7:r-x %s/acldir && "
	    "setfacl -d -m u:1000:rwx,g:100:r-x,o::--- %s/acldir && "
	    "mkdir %s/acldir/sub && touch %s/acldir/child", srcdir, srcdir, srcdir, srcdir, srcdir);
	for (size_t i = 0; i < NLINKS; i++) {
		snprintf(name, sizeof(name), "l%zu", link_lens[i]);
		mk_link(name, link_lens[i]);
	}
	/* Symlinks with an xattr block: i_blocks counts it (fast-link rule). */
	mk_link("lx30", 30);
	set_x("lx30", "trusted.big", 2000);
	mk_link("lx100", 100);
	set_x("lx100", "trusted.big", 2000);
	mk_link("lxs", 20);
	set_x("lxs", "trusted.s", 8);
}

static const char *const paths[] = {
	"none", "small", "big", "mix", "many", "longname", "inl100", "acl", "acldir",
	"acldir/sub", "acldir/child", "l1", "l59", "l60", "l61", "l200", "l4000",
	"lx30", "lx100", "lxs", "",
};
#define NPATHS (sizeof(paths) / sizeof(paths[0]))

/* A second tree for 1 KiB blocks: an xattr block holds < 1 KiB, and a
 * symlink target may be up to 1023 bytes. */
static void build_tree_1k(void)
{
	mk_file("small", 10);
	set_x("small", "user.a", 10);
	set_x("small", "user.b", 300);
	set_x("small", "trusted.c", 500);
	mk_file("acl", 10);
	t_sh("setfacl -m u:42:rw-,g:43:r--,m::rw- %s/acl", srcdir);
	mk_link("l60", 60);
	mk_link("l200", 200);
	mk_link("l1000", 1000);
	mk_link("lx", 20);
	set_x("lx", "trusted.x", 600);
}

static const char *const paths_1k[] = { "small", "acl", "l60", "l200", "l1000", "lx", "" };
#define NPATHS_1K (sizeof(paths_1k) / sizeof(paths_1k[0]))

/* The tree being checked (paths relative to srcdir). */
static const char *const *cur_paths = paths;
static size_t cur_npaths = NPATHS;

/* ------------------------------------------------------------ comparing */

/* Sorted copy of a NUL-separated name list, as one string per line. */
static char *sorted_names(const char *list, ssize_t len)
{
	const char *v[1024];
	size_t n = 0, total = 0;
	char *out;

	for (ssize_t off = 0; off < len && n < 1024; off += (ssize_t)strlen(list + off) + 1) {
		v[n++] = list + off;
		total += strlen(list + off) + 1;
	}
	for (size_t i = 1; i < n; i++)
		for (size_t j = i; j > 0 && strcmp(v[j - 1], v[j]) > 0; j--) {
			const char *t = v[j];
			v[j] = v[j - 1];
			v[j - 1] = t;
		}
	out = calloc(1, total + 1);
	for (size_t i = 0; i < n; i++) {
		strcat(out, v[i]);
		strcat(out, "\n");
	}
	return out;
}

static void compare_value(uext4_fs *fs, uint64_t ino, const char *rel, const char *name)
{
	char src[512], mnt[512];
	char a[8192], b[8192], c[8192];
	ssize_t na, nb, nc, need;

	snprintf(src, sizeof(src), "%s/%s", srcdir, rel);
	snprintf(mnt, sizeof(mnt), "%s/%s", mntdir, rel);
	nvalues++;
	need = uext4_getxattr(fs, ino, name, NULL, 0);
	na = uext4_getxattr(fs, ino, name, a, sizeof(a));
	nb = lgetxattr(src, name, b, sizeof(b));
	CHECK(need == na, "%s %s: size query %zd, read %zd", rel, name, need, na);
	CHECK(na == nb && na >= 0 && memcmp(a, b, (size_t)na) == 0,
	      "%s %s: uext4 %zd bytes, source %zd bytes (%s)", rel, name, na, nb,
	      na < 0 ? uext4_last_error() : "content differs");
	if (na > 1) /* (a 0-byte buffer would be a size query) */
		CHECK(uext4_getxattr(fs, ino, name, a, (size_t)na - 1) == -ERANGE,
		      "%s %s: short buffer not -ERANGE", rel, name);
	if (have_mnt) {
		nc = lgetxattr(mnt, name, c, sizeof(c));
		CHECK(na == nc && (na < 0 || memcmp(a, c, (size_t)na) == 0),
		      "%s %s: uext4 %zd bytes, kernel %zd bytes", rel, name, na, nc);
	}
}

static void compare_list(uext4_fs *fs, uint64_t ino, const char *rel)
{
	char src[512], mnt[512], a[16384], b[16384], c[16384];
	ssize_t na, nb, nc, need;
	char *sa, *sb;

	snprintf(src, sizeof(src), "%s/%s", srcdir, rel);
	snprintf(mnt, sizeof(mnt), "%s/%s", mntdir, rel);
	nlists++;
	need = uext4_listxattr(fs, ino, NULL, 0);
	na = uext4_listxattr(fs, ino, a, sizeof(a));
	CHECK(need == na && na >= 0, "%s: list size %zd, list %zd (%s)", rel, need, na,
	      uext4_last_error());
	if (na < 0)
		return;
	if (na > 1)
		CHECK(uext4_listxattr(fs, ino, a, (size_t)na - 1) == -ERANGE,
		      "%s: short list buffer not -ERANGE", rel);
	nb = llistxattr(src, b, sizeof(b));
	sa = sorted_names(a, na);
	sb = sorted_names(b, nb);
	CHECK(strcmp(sa, sb) == 0, "%s: names differ:\nuext4:\n%ssource:\n%s", rel, sa, sb);
	free(sa);
	free(sb);
	if (have_mnt) {
		nc = llistxattr(mnt, c, sizeof(c));
		CHECK(nc == na && memcmp(a, c, (size_t)na) == 0,
		      "%s: list differs from the kernel's (%zd vs %zd bytes)", rel, na, nc);
	}
	for (ssize_t off = 0; off < na; off += (ssize_t)strlen(a + off) + 1)
		compare_value(fs, ino, rel, a + off);
}

static void compare_link(uext4_fs *fs, uint64_t ino, const char *rel)
{
	char src[512], mnt[512], a[8192], b[8192], c[8192], small[8];
	ssize_t na, nb, nc, ns;

	snprintf(src, sizeof(src), "%s/%s", srcdir, rel);
	snprintf(mnt, sizeof(mnt), "%s/%s", mntdir, rel);
	nlinks++;
	na = uext4_readlink(fs, ino, a, sizeof(a));
	nb = readlink(src, b, sizeof(b));
	CHECK(na == nb && na > 0 && memcmp(a, b, (size_t)na) == 0,
	      "%s: readlink %zd vs source %zd (%s)", rel, na, nb, uext4_last_error());
	ns = uext4_readlink(fs, ino, small, sizeof(small));
	CHECK(ns == nb && memcmp(small, b, MIN(sizeof(small), (size_t)nb)) == 0,
	      "%s: readlink into 8 bytes returned %zd", rel, ns);
	if (have_mnt) {
		nc = readlink(mnt, c, sizeof(c));
		CHECK(na == nc && memcmp(a, c, (size_t)nc) == 0, "%s: readlink differs from kernel",
		      rel);
	}
}

static int resolve(uext4_fs *fs, const char *rel, uint64_t *ino)
{
	char p[512];
	int err;

	snprintf(p, sizeof(p), "/%s", rel);
	err = uext4_resolve(fs, p, 0, ino);
	CHECK(err == 0, "resolve %s: %d %s", p, err, uext4_last_error());
	return err;
}

/* Error codes and hidden names. */
static void check_errors(uext4_fs *fs, bool inline_data)
{
	char buf[256];
	uint64_t ino;
	struct inode *in;
	ssize_t n;

	if (resolve(fs, "small", &ino))
		return;
	CHECK(uext4_getxattr(fs, ino, "user.nope", buf, sizeof(buf)) == -ENODATA, "missing");
	CHECK(uext4_getxattr(fs, ino, "user.", buf, sizeof(buf)) == -EINVAL, "user.");
	CHECK(uext4_getxattr(fs, ino, "foo.bar", buf, sizeof(buf)) == -EOPNOTSUPP, "foo.bar");
	CHECK(uext4_getxattr(fs, ino, "system.data", buf, sizeof(buf)) == -EOPNOTSUPP,
	      "system.data");
	CHECK(uext4_getxattr(fs, ino, "system.posix_acl_access", buf, sizeof(buf)) == -ENODATA,
	      "no ACL");
	CHECK(uext4_getxattr(fs, ino, "user.one", buf, 0) == 1, "size query");
	if (!inline_data || resolve(fs, "inl100", &ino) || iget((struct uext4_fs *)fs, ino, &in))
		return;
	/* system.data holds the 40 bytes past i_block; hidden from users. */
	n = xattr_get_raw(fs, in, EXT4_XATTR_INDEX_SYSTEM, "data", 4, NULL, 0);
	CHECK(n == 40, "inl100: system.data raw length %zd", n);
	CHECK(in->flags & EXT4_INLINE_DATA_FL, "inl100 is not inline");
	iput(fs, in);
}

/*
 * Several threads read every name list, value and symlink target at once
 * (for TSan and lockdep) and compare with what the source tree holds.
 */
#define NTHREADS 4
static _Atomic int thread_failures;

static void *reader_thread(void *arg)
{
	uext4_fs *fs = arg;
	char list[16384], a[8192], b[8192], src[512];

	for (int round = 0; round < 20; round++) {
		for (size_t i = 0; i < cur_npaths; i++) {
			uint64_t ino;
			char p[512];
			ssize_t n;

			snprintf(p, sizeof(p), "/%s", cur_paths[i]);
			snprintf(src, sizeof(src), "%s/%s", srcdir, cur_paths[i]);
			if (uext4_resolve(fs, p, 0, &ino) != 0) {
				thread_failures++;
				continue;
			}
			n = uext4_listxattr(fs, ino, list, sizeof(list));
			if (n < 0)
				thread_failures++;
			for (ssize_t off = 0; off < n; off += (ssize_t)strlen(list + off) + 1) {
				ssize_t na = uext4_getxattr(fs, ino, list + off, a, sizeof(a));
				ssize_t nb = lgetxattr(src, list + off, b, sizeof(b));

				if (na != nb || (na > 0 && memcmp(a, b, (size_t)na)))
					thread_failures++;
			}
			n = readlink(src, b, sizeof(b));
			if (n > 0 && (uext4_readlink(fs, ino, a, sizeof(a)) != n ||
				      memcmp(a, b, (size_t)n)))
				thread_failures++;
		}
	}
	return NULL;
}

static void check_threads(uext4_fs *fs)
{
	pthread_t t[NTHREADS];

	for (int i = 0; i < NTHREADS; i++)
		pthread_create(&t[i], NULL, reader_thread, fs);
	for (int i = 0; i < NTHREADS; i++)
		pthread_join(t[i], NULL);
	CHECK(thread_failures == 0, "%d mismatches in %d concurrent readers", thread_failures,
	      NTHREADS);
	printf("  %d threads x 20 rounds of concurrent reads: %d mismatches\n", NTHREADS,
	       thread_failures);
}

/* The libuext4 side of check_image(); returns the number of failures. */
static int check_image_uext4(const char *label, const char *img, bool inline_data)
{
	struct uext4_opts o = { .read_only = 1 };
	uext4_fs *fs;
	uint64_t ino;
	int err = uext4_mount(img, &o, &fs);

	CHECK(err == 0, "%s: mount: %s", label, uext4_last_error());
	if (err)
		return t_failures;
	for (size_t i = 0; i < cur_npaths; i++) {
		struct stat st;
		char src[512];

		if (resolve(fs, cur_paths[i], &ino))
			continue;
		compare_list(fs, ino, cur_paths[i]);
		snprintf(src, sizeof(src), "%s/%s", srcdir, cur_paths[i]);
		if (lstat(src, &st) == 0 && S_ISLNK(st.st_mode))
			compare_link(fs, ino, cur_paths[i]);
	}
	if (cur_paths == paths)
		check_errors(fs, inline_data);
	check_threads(fs);
	uext4_umount(fs);
	printf("  compared %d name lists, %d values, %d symlink targets\n", nlists, nvalues,
	       nlinks);
	return t_failures;
}

/*
 * Compare one image.  The libuext4 side runs in a child process so that a
 * crash (sanitizer abort) is a failure here and the loop mount is always
 * undone.
 */
static void check_image(const char *label, const char *img, bool inline_data)
{
	int status = 0, fsck_before;
	pid_t pid;

	/*
	 * e2fsprogs 1.47.0's mke2fs -d leaves one block bitmap difference for
	 * an inline-data symlink with an xattr block (/lx100 with -O
	 * inline_data).  Then we check the image is unchanged instead.
	 */
	fsck_before = t_sh("e2fsck -fn %s >/dev/null 2>&1", img);
	if (fsck_before)
		printf("  note: e2fsck -fn rejects the image as mke2fs made it; "
		       "checking that it stays byte-identical instead\n");
	t_sh("md5sum %s > %s.md5", img, img);
	have_mnt = t_sh("mount -o loop,ro %s %s 2>/dev/null", img, mntdir) == 0;
	printf("%s: comparing with the source tree%s\n", label,
	       have_mnt ? " and the kernel (loop mount)" : " (no loop mount: kernel skipped)");
	fflush(stdout);
	pid = fork();
	if (pid == 0)
		_exit(check_image_uext4(label, img, inline_data) ? 1 : 0);
	CHECK(pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
	      WEXITSTATUS(status) == 0, "%s: libuext4 checks failed (status 0x%x)", label, status);
	if (have_mnt)
		CHECK(t_sh("umount %s", mntdir) == 0, "umount %s", mntdir);
	if (fsck_before == 0)
		CHECK(t_sh("e2fsck -fn %s >/dev/null 2>&1", img) == 0, "%s: e2fsck -fn not clean",
		      label);
	CHECK(t_sh("md5sum --quiet -c %s.md5", img) == 0, "%s: the image changed", label);
}

/*
 * Values in EA inodes: the kernel writes them (rw loop mount of an image
 * with -O ea_inode), libuext4 reads them back.
 */
static void check_ea_inode(void)
{
	static const size_t sizes[] = { 5000, 20000, 65536 };
	struct uext4_opts o = { .read_only = 1 };
	char img[256], path[512], name[32], *want, *got;
	uext4_fs *fs;
	uint64_t ino;
	bool ok = true;

	printf("EA inodes: values written by the kernel, read by libuext4\n");
	snprintf(img, sizeof(img), "%s/ea.img", tmpdir);
	if (t_sh("mke2fs -q -F -t ext4 -b 4096 -I 256 -O ea_inode %s 32M", img) ||
	    t_sh("mount -o loop %s %s 2>/dev/null", img, mntdir)) {
		printf("  SKIP: cannot make or loop-mount an ea_inode image\n");
		return;
	}
	want = malloc(3 * 65536);
	got = malloc(65536);
	fill_random(want, 3 * 65536, false);
	snprintf(path, sizeof(path), "%s/f", mntdir);
	close(open(path, O_CREAT | O_WRONLY, 0644));
	for (size_t i = 0; i < 3; i++) {
		snprintf(name, sizeof(name), "user.huge%zu", i);
		ok &= lsetxattr(path, name, want + i * 65536, sizes[i], 0) == 0;
	}
	ok &= lsetxattr(path, "user.small", "abc", 3, 0) == 0;
	snprintf(path, sizeof(path), "%s/l30", mntdir);
	ok &= symlink("012345678901234567890123456789", path) == 0;
	CHECK(t_sh("umount %s", mntdir) == 0, "umount ea.img");
	CHECK(ok, "setting big xattrs through the kernel failed");
	CHECK(t_sh("e2fsck -fn %s >/dev/null 2>&1", img) == 0, "ea.img: e2fsck -fn not clean");
	if (!ok || uext4_mount(img, &o, &fs)) {
		CHECK(0, "ea.img: mount: %s", uext4_last_error());
		goto out;
	}
	if (resolve(fs, "f", &ino) == 0) {
		for (size_t i = 0; i < 3; i++) {
			ssize_t n;

			snprintf(name, sizeof(name), "user.huge%zu", i);
			n = uext4_getxattr(fs, ino, name, NULL, 0);
			CHECK(n == (ssize_t)sizes[i], "%s: size %zd", name, n);
			n = uext4_getxattr(fs, ino, name, got, 65536);
			CHECK(n == (ssize_t)sizes[i] && memcmp(got, want + i * 65536, sizes[i]) == 0,
			      "%s: read %zd (%s)", name, n, uext4_last_error());
			CHECK(uext4_getxattr(fs, ino, name, got, sizes[i] - 1) == -ERANGE,
			      "%s: short buffer", name);
		}
		CHECK(uext4_getxattr(fs, ino, "user.small", got, 16) == 3, "user.small");
	}
	if (resolve(fs, "l30", &ino) == 0)
		CHECK(uext4_readlink(fs, ino, got, 64) == 30 &&
		      memcmp(got, "012345678901234567890123456789", 30) == 0, "l30 on ea_inode fs");
	uext4_umount(fs);
out:
	free(want);
	free(got);
}

/* ------------------------------------------------------------ corruption */

/* Number after "key" in the output of a debugfs command. */
static long long debugfs_num(const char *img, const char *req, const char *key)
{
	char cmd[512], line[512];
	long long v = -1;
	FILE *f;

	snprintf(cmd, sizeof(cmd), "debugfs -R '%s' %s 2>/dev/null", req, img);
	f = popen(cmd, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		char *p = strstr(line, key);

		if (p && v < 0)
			v = strtoll(p + strlen(key), NULL, 0);
	}
	pclose(f);
	return v;
}

static int img_rw(const char *img, void *buf, size_t len, off_t off, bool write)
{
	int fd = open(img, O_RDWR);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = write ? pwrite(fd, buf, len, off) : pread(fd, buf, len, off);
	close(fd);
	return n == (ssize_t)len ? 0 : -1;
}

/* Byte offset in img of the raw inode of rel (4 KiB blocks). */
static off_t inode_off(const char *img, const char *rel)
{
	char req[256];
	long long blk, off;

	snprintf(req, sizeof(req), "imap /%s", rel);
	blk = debugfs_num(img, req, "located at block ");
	off = debugfs_num(img, req, ", offset ");
	return blk < 0 || off < 0 ? -1 : (off_t)(blk * 4096 + off);
}

/*
 * Offset in img of the entry (index, name) in the in-inode area (blk 0)
 * or in xattr block blk; -1 if not found.
 */
static off_t find_entry(const char *img, off_t region, size_t first, size_t end, int index,
			const char *name)
{
	uint8_t r[4096];
	size_t p = first;

	if (img_rw(img, r, end, region, false))
		return -1;
	while (p + 16 <= end && (r[p] | r[p + 1] | r[p + 2] | r[p + 3])) {
		if (r[p + 1] == index && r[p] == strlen(name) && !memcmp(r + p + 16, name, r[p]))
			return region + (off_t)p;
		p += (16 + r[p] + 3) & ~3u;
	}
	return -1;
}

/* Copy the clean image, apply a patch of len bytes at off, expect -EUCLEAN. */
static void expect_corrupt(const char *what, const char *clean, off_t off, const void *patch,
			   size_t len, const char *rel, const char *name)
{
	struct uext4_opts o = { .read_only = 1 };
	char img[256];
	uext4_fs *fs;
	uint64_t ino;
	char buf[8192];
	ssize_t n;

	snprintf(img, sizeof(img), "%s/corrupt.img", tmpdir);
	if (off < 0 || t_sh("cp %s %s", clean, img) || img_rw(img, (void *)patch, len, off, true)) {
		CHECK(0, "%s: could not set up the corruption", what);
		return;
	}
	if (uext4_mount(img, &o, &fs)) {
		CHECK(0, "%s: mount failed: %s", what, uext4_last_error());
		return;
	}
	char path[512];
	int err;

	snprintf(path, sizeof(path), "/%s", rel);
	err = uext4_resolve(fs, path, 0, &ino);
	if (err) {
		/* A damaged in-inode area makes the whole inode unreadable, as
		 * in the kernel's ext4_iget(): that is a correct answer too. */
		printf("  %s: inode refused: %d \"%s\"\n", what, err, uext4_last_error());
		CHECK(err == -EUCLEAN && uext4_last_error()[0], "%s: resolve gave %d", what, err);
	} else {
		fs_clear_err();
		if (name)
			n = uext4_getxattr(fs, ino, name, buf, sizeof(buf));
		else
			n = uext4_readlink(fs, ino, buf, sizeof(buf));
		printf("  %s: %zd \"%s\"\n", what, n, uext4_last_error());
		CHECK(n == -EUCLEAN && uext4_last_error()[0], "%s: got %zd", what, n);
		if (name) {
			n = uext4_listxattr(fs, ino, buf, sizeof(buf));
			CHECK(n == -EUCLEAN || strncmp(name, "system.posix", 12) == 0,
			      "%s: listxattr gave %zd", what, n);
		}
	}
	uext4_umount(fs);
}

static void check_corruption(void)
{
	char img[256], csimg[256], req[256];
	long long acl_blk;
	off_t ioff, e, blkoff;
	uint8_t ff[4096];
	uint16_t u16;
	uint32_t u32;

	printf("corruption: xattr entries, ACLs, symlinks (image without metadata_csum)\n");
	snprintf(img, sizeof(img), "%s/nocsum.img", tmpdir);
	if (t_sh("mke2fs -q -F -t ext4 -b 4096 -I 256 -O ^metadata_csum -d %s %s 32M",
		srcdir, img)) {
		CHECK(0, "mke2fs failed");
		return;
	}
	snprintf(req, sizeof(req), "stat /big");
	acl_blk = debugfs_num(img, req, "File ACL: ");
	CHECK(acl_blk > 0, "no xattr block for /big");
	blkoff = (off_t)acl_blk * 4096;
	e = find_entry(img, blkoff, 32, 4096, 1, "big");
	CHECK(e >= 0, "user.big of /big not in its xattr block");
	if (e < 0)
		return;
	u16 = cpu_to_le16(0xfff0);
	expect_corrupt("block value offset past the end", img, e + 2, &u16, 2, "big", "user.big");
	u32 = cpu_to_le32(5000);
	expect_corrupt("block value size past the end", img, e + 8, &u32, 4, "big", "user.big");
	memset(ff, 0xff, sizeof(ff));
	expect_corrupt("block entries never terminated", img, blkoff + 32, ff, 4096 - 32, "big",
		       "user.big");
	expect_corrupt("block bad magic", img, blkoff, ff, 4, "big", "user.big");
	u16 = 0;
	expect_corrupt("block value over the entries", img, e + 2, &u16, 2, "big", "user.big");

	/* In /small, user.empty, user.one and trusted.t fit in the inode. */
	ioff = inode_off(img, "small");
	e = find_entry(img, ioff, 128 + 32 + 4, 256, 4, "t");
	CHECK(e >= 0, "trusted.t of /small not in the inode");
	u16 = cpu_to_le16(0x200);
	expect_corrupt("in-inode value offset past the end", img, e < 0 ? -1 : e + 2, &u16, 2,
		       "small", "trusted.t");
	expect_corrupt("in-inode entries never terminated", img, ioff + 128 + 32 + 4, ff,
		       256 - 128 - 32 - 4, "small", "user.one");
	u32 = cpu_to_le32(99);
	expect_corrupt("value in an EA inode without the feature", img, e < 0 ? -1 : e + 4,
		       &u32, 4, "small", "trusted.t");
	e = find_entry(img, ioff, 128 + 32 + 4, 256, 1, "one");
	u16 = 0; /* "one" becomes "o\0e" */
	expect_corrupt("NUL in an entry name", img, e < 0 ? -1 : e + 17, &u16, 1, "small",
		       "user.empty");

	ioff = inode_off(img, "acl");
	e = find_entry(img, ioff, 128 + 32 + 4, 256, 2, "");
	if (e >= 0) {
		uint16_t offs;

		img_rw(img, &offs, 2, e + 2, false);
		u32 = cpu_to_le32(3);
		CHECK(e >= 0, "no ACL entry");
		expect_corrupt("ACL version 3", img, ioff + 128 + 32 + 4 + le16(offs), &u32, 4,
			       "acl", "system.posix_acl_access");
		u16 = cpu_to_le16(0x40);
		expect_corrupt("ACL bad tag", img, ioff + 128 + 32 + 4 + le16(offs) + 4, &u16, 2,
			       "acl", "system.posix_acl_access");
	} else {
		CHECK(0, "ACL entry of /acl not found in the inode");
	}

	ioff = inode_off(img, "l59");
	u32 = 0;
	expect_corrupt("symlink of size 0", img, ioff + 4, &u32, 4, "l59", NULL);
	u32 = cpu_to_le32(70);
	expect_corrupt("fast symlink size 70", img, ioff + 4, &u32, 4, "l59", NULL);
	ioff = inode_off(img, "l200");
	u32 = cpu_to_le32(4096);
	expect_corrupt("slow symlink size = block size", img, ioff + 4, &u32, 4, "l200", NULL);
	ioff = inode_off(img, "l1");
	u32 = cpu_to_le32(5);
	expect_corrupt("fast symlink with NUL inside", img, ioff + 4, &u32, 4, "l1", NULL);

	printf("corruption: xattr block checksum (metadata_csum image)\n");
	snprintf(csimg, sizeof(csimg), "%s/csum.img", tmpdir);
	if (t_sh("mke2fs -q -F -t ext4 -b 4096 -I 256 -O metadata_csum -d %s %s 32M", srcdir,
		csimg) == 0) {
		uint8_t byte = 0;

		acl_blk = debugfs_num(csimg, "stat /big", "File ACL: ");
		blkoff = (off_t)acl_blk * 4096 + 4000;
		img_rw(csimg, &byte, 1, blkoff, false);
		byte ^= 0x5a;
		expect_corrupt("xattr block checksum", csimg, blkoff, &byte, 1, "big", "user.big");
	}
	CHECK(t_sh("e2fsck -fn %s >/dev/null 2>&1", img) == 0, "nocsum.img not clean");
}

/* ------------------------------------------------------------ main */

int main(int argc, char **argv)
{
	unsigned seed = argc > 1 ? (unsigned)strtoul(argv[1], NULL, 0) : (unsigned)time(NULL);
	char img[256];
	static const struct {
		const char *label, *opts;
		bool inline_data;
	} images[] = {
		{ "4k blocks, 256-byte inodes", "-b 4096 -I 256", false },
		{ "inline_data", "-b 4096 -I 256 -O inline_data", true },
		{ "128-byte inodes", "-b 4096 -I 128", false },
	};

	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("unit_xattr: seed %u\n", seed);
	srand(seed);
	if (geteuid() != 0) {
		printf("SKIP: needs root (trusted.* xattrs, loop mounts)\n");
		return 77;
	}
	t_need_tools("setfacl mke2fs debugfs");
	t_tmpdir(tmpdir, sizeof(tmpdir), "unit_xattr");
	snprintf(srcdir, sizeof(srcdir), "%s/src", tmpdir);
	snprintf(mntdir, sizeof(mntdir), "%s/mnt", tmpdir);
	mkdir(srcdir, 0755);
	mkdir(mntdir, 0755);
	build_tree();

	for (size_t i = 0; i < sizeof(images) / sizeof(images[0]); i++) {
		snprintf(img, sizeof(img), "%s/img%zu.img", tmpdir, i);
		if (t_sh("mke2fs -q -F -t ext4 %s -d %s %s 32M", images[i].opts, srcdir, img)) {
			CHECK(0, "mke2fs %s failed", images[i].opts);
			continue;
		}
		check_image(images[i].label, img, images[i].inline_data);
	}
	check_ea_inode();
	check_corruption();

	/* 1 KiB blocks, from the second tree. */
	snprintf(srcdir, sizeof(srcdir), "%s/src1k", tmpdir);
	mkdir(srcdir, 0755);
	build_tree_1k();
	cur_paths = paths_1k;
	cur_npaths = NPATHS_1K;
	snprintf(img, sizeof(img), "%s/img1k.img", tmpdir);
	if (t_sh("mke2fs -q -F -t ext4 -b 1024 -I 256 -d %s %s 16M", srcdir, img) == 0)
		check_image("1 KiB blocks", img, false);
	else
		CHECK(0, "mke2fs -b 1024 failed");

	if (!getenv("UNIT_XATTR_KEEP"))
		t_sh("rm -rf --one-file-system %s", tmpdir);
	printf("unit_xattr: %s (%d failures)\n", t_failures ? "FAIL" : "PASS", t_failures);
	return t_failures ? 1 : 0;
}
