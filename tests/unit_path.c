/*
 * unit_path.c - path resolution (uext4_resolve, uext4_stat_path): symlinks
 * in the middle and at the end, relative and absolute targets, "." and
 * "..", loops, dangling links, a file used as a directory, long names.
 * Each answer is compared with what realpath-style resolution on the
 * source tree gives (the inode's size tells which file was reached).
 */
#include "t.h"
#include "uext4.h"

#include <limits.h>
#include <unistd.h>

static char dir[PATH_MAX], img[PATH_MAX + 16];

static void build_image(void)
{
	T_CHECK(t_sh("set -e; cd %s; mkdir -p src/a/b src/c; printf 12345 > src/a/b/f;"
		   "printf 1234567 > src/c/g;"
		   "ln -s a/b src/rel; ln -s /a/b src/abs; ln -s rel src/chain;"
		   "ln -s ../c src/a/up; ln -s loop2 src/loop1; ln -s loop1 src/loop2;"
		   "ln -s nowhere src/dangling; ln -s b/f src/a/tofile;"
		   "mke2fs -q -F -t ext4 -d src img 16M", dir) == 0, "image setup");
}

/* Resolve path with follow, expect err (0: a file of size want). */
static void expect(uext4_fs *fs, const char *path, int follow, int want_err, uint64_t want_size)
{
	uint64_t ino = 0;
	struct uext4_stat st;
	int err = uext4_resolve(fs, path, follow, &ino);

	T_CHECK(err == want_err, "%s (follow %d): got %d (%s), want %d", path, follow, err,
		uext4_last_error(), want_err);
	if (err || want_err)
		return;
	T_CHECK(uext4_getattr(fs, ino, &st) == 0, "%s: getattr", path);
	T_CHECK(st.size == want_size, "%s: reached size %llu, want %llu", path,
		(unsigned long long)st.size, (unsigned long long)want_size);
}

int main(void)
{
	struct uext4_opts o = {.read_only = 1};
	struct uext4_stat st;
	char longname[300];
	uext4_fs *fs;

	snprintf(dir, sizeof(dir), "/tmp/unit_path.XXXXXX");
	if (!mkdtemp(dir))
		return T_FAIL;
	snprintf(img, sizeof(img), "%s/img", dir);
	build_image();
	if (uext4_mount(img, &o, &fs)) {
		fprintf(stderr, "mount: %s\n", uext4_last_error());
		return T_FAIL;
	}
	expect(fs, "/a/b/f", 0, 0, 5);
	expect(fs, "a//b///f", 0, 0, 5);
	expect(fs, "/rel/f", 0, 0, 5);
	expect(fs, "/abs/f", 0, 0, 5);
	expect(fs, "/chain/f", 0, 0, 5);
	expect(fs, "/a/up/g", 0, 0, 7);
	expect(fs, "/a/b/../../c/./g", 0, 0, 7);
	expect(fs, "/a/tofile", 1, 0, 5);
	expect(fs, "/a/tofile", 0, 0, 3);       /* the link itself: "b/f" */
	expect(fs, "/loop1", 0, 0, 5);          /* not followed at the end */
	expect(fs, "/loop1", 1, -ELOOP, 0);
	expect(fs, "/loop1/x", 0, -ELOOP, 0);
	expect(fs, "/dangling", 1, -ENOENT, 0);
	expect(fs, "/a/b/f/x", 0, -ENOTDIR, 0);
	expect(fs, "/nope", 0, -ENOENT, 0);
	memset(longname, 'x', 257);  /* 256-byte name */
	longname[0] = '/';
	longname[257] = '\0';
	expect(fs, longname, 0, -ENAMETOOLONG, 0);
	T_CHECK(uext4_stat_path(fs, "/chain", &st) == 0 && S_ISLNK(st.mode),
		"stat_path does not follow the last link");
	uext4_umount(fs);
	T_CHECK(t_sh("e2fsck -fn %s > /dev/null 2>&1", img) == 0, "e2fsck -fn clean");
	t_sh("rm -rf %s", dir);
	printf("unit_path: %s\n", t_failures ? "FAIL" : "PASS");
	return t_failures ? T_FAIL : T_PASS;
}
