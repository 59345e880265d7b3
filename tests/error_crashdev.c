/*
 * error_crashdev.c - recording a file-system error on a mount over the
 * crash recorder (src/crashdev.c).  error.c holds its lock across the
 * superblock write of the error, and the recorder takes its own device
 * lock inside that write: the two once had the same lockdep rank, and
 * every lockdep build (asan, tsan) aborted here with "lock order
 * inversion".  Checked: FS_ERROR returns the error, the recorder saw the
 * superblock write, and the unmount completes.
 */
#include "blockdev.h"
#include "crashdev.h"
#include "error.h"
#include "internal.h"
#include "mount.h"
#include "uext4.h"
#include "t.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static void error_on_recorder(const char *img)
{
	struct uext4_opts mo = { .commit_secs = 3600 };
	struct uext4_fs *fs;
	int err;
	struct bdev *d = crashrec_open(img, &err);

	T_CHECK(d != NULL, "crashrec_open: %s", uext4_last_error());
	if (!d)
		return;
	crashrec_hold(d);
	err = super_mount_bdev(d, &mo, &fs);
	T_CHECK(err == 0, "mount over the recorder: %s", uext4_last_error());
	if (!err) {
		uint32_t before = crashrec_mark(d);
		err = FS_ERROR(fs, EUCLEAN, 2, 0, "test: an error recorded on purpose");
		T_CHECK(err == -EUCLEAN, "FS_ERROR returned %d", err);
		T_CHECK(crashrec_nwrites_after(d, before) > 0 || crashrec_mark(d) > before,
			"the error's superblock write did not reach the recorder");
		err = uext4_umount(fs);
		T_CHECK(err == 0, "umount: %d %s", err, uext4_last_error());
	}
	bdev_close(d);
}

int main(void)
{
	char img[] = "/tmp/uext4-errcrash-XXXXXX";
	int fd = mkstemp(img);

	if (fd < 0)
		return T_FAIL;
	close(fd);
	if (t_make_image(img, "8M", "-t ext4") != 0) {
		printf("SKIP: mke2fs not available\n");
		unlink(img);
		return T_SKIP;
	}
	error_on_recorder(img);
	printf("%s\n", t_failures ? "FAIL" : "ok");
	unlink(img);
	return t_failures ? T_FAIL : T_PASS;
}
