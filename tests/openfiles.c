/*
 * openfiles.c - the open-file limit (uext4_opts.max_open_files) holds.
 *
 * A fresh image (mke2fs run here) mounted with max_open_files = 16: 16
 * opens of one file succeed, the 17th fails with -EMFILE and a message
 * naming the limit, a release makes room for exactly one more, and after
 * everything is released the count is back at zero (16 opens succeed
 * again).  Then unmount and e2fsck -fn.
 */
#include "uext4.h"
#include "t.h"

#define LIMIT 16

static int open_n(uext4_fs *fs, uint64_t ino, uext4_file **fh, int n)
{
	for (int i = 0; i < n; i++) {
		int err = uext4_open(fs, ino, O_RDWR, &fh[i]);
		if (err)
			return err;
	}
	return 0;
}

int main(void)
{
	char dir[] = "/tmp/uext4-openfiles.XXXXXX", img[64], log[80];
	struct uext4_opts o = { .max_open_files = LIMIT };
	uext4_file *fh[LIMIT + 1], *extra = NULL;
	struct uext4_stat st;
	uext4_fs *fs;
	int err;

	if (!mkdtemp(dir))
		return T_FAIL;
	snprintf(img, sizeof img, "%s/a.img", dir);
	snprintf(log, sizeof log, "%s/e2fsck.log", dir);
	if (t_make_image(img, "4M", "-t ext4"))
		return T_SKIP;  /* no mke2fs */
	err = uext4_mount(img, &o, &fs);
	T_CHECK(err == 0, "mount: %s", strerror(-err));
	if (err)
		return T_FAIL;
	err = uext4_create(fs, 2, "f", 0644, &st);
	T_CHECK(err == 0, "create: %s", strerror(-err));
	err = open_n(fs, st.ino, fh, LIMIT);
	T_CHECK(err == 0, "%d opens under the limit: %s", LIMIT, strerror(-err));
	err = uext4_open(fs, st.ino, O_RDONLY, &extra);
	T_CHECK(err == -EMFILE, "open #%d past the limit gave %d, not -EMFILE", LIMIT + 1, err);
	printf("open past the limit: %s\n", err == -EMFILE ? "EMFILE" : strerror(-err));
	uext4_release(fh[0]);
	err = uext4_open(fs, st.ino, O_RDONLY, &fh[0]);
	T_CHECK(err == 0, "open after a release: %s", strerror(-err));
	err = uext4_open(fs, st.ino, O_RDONLY, &extra);
	T_CHECK(err == -EMFILE, "open past the limit again gave %d", err);
	for (int i = 0; i < LIMIT; i++)
		uext4_release(fh[i]);
	err = open_n(fs, st.ino, fh, LIMIT);
	T_CHECK(err == 0, "%d opens after releasing all: %s", LIMIT, strerror(-err));
	for (int i = 0; i < LIMIT; i++)
		uext4_release(fh[i]);
	err = uext4_umount(fs);
	T_CHECK(err == 0, "umount: %s", strerror(-err));
	T_CHECK(t_run_e2fsck(img, log) == 0, "e2fsck -fn %s not clean (%s)", img, log);
	if (!t_failures) {
		unlink(img);
		unlink(log);
		rmdir(dir);
	}
	return t_failures ? T_FAIL : T_PASS;
}
