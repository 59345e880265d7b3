/*
 * fuse_seek.c - helper of tests/fuse_seek.sh (run only by it).
 *
 *   fuse_seek IMAGE PATH OFFSET...
 *       Mount IMAGE read-only with the library, open PATH and print, for
 *       each OFFSET, "OFFSET DATA HOLE": what uext4_lseek() answers for
 *       SEEK_DATA and SEEK_HOLE (a number, or the errno name).  The same
 *       lines as the script's probe prints for lseek(2) on a mount.
 */
#include "uext4.h"
#include "t.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void print_result(int64_t r)
{
	if (r >= 0)
		printf(" %" PRId64, r);
	else if (r == -ENXIO)
		printf(" ENXIO");
	else
		printf(" E%d", (int)-r);
}

int main(int argc, char **argv)
{
	struct uext4_opts mo = { .read_only = 1 };
	uext4_fs *fs;
	uext4_file *f;
	uint64_t ino;
	int err;

	if (argc < 4) {
		fprintf(stderr, "usage: fuse_seek IMAGE PATH OFFSET...\n");
		return 2;
	}
	if ((err = uext4_mount(argv[1], &mo, &fs))) {
		fprintf(stderr, "mount %s: %s\n", argv[1], uext4_last_error());
		return T_FAIL;
	}
	if ((err = uext4_resolve(fs, argv[2], 1, &ino)) || (err = uext4_open(fs, ino, O_RDONLY, &f))) {
		fprintf(stderr, "%s: %s\n", argv[2], uext4_last_error());
		uext4_umount(fs);
		return T_FAIL;
	}
	for (int i = 3; i < argc; i++) {
		int64_t off = strtoll(argv[i], NULL, 10);

		printf("%" PRId64, off);
		print_result(uext4_lseek(f, off, SEEK_DATA));
		print_result(uext4_lseek(f, off, SEEK_HOLE));
		printf("\n");
	}
	uext4_release(f);
	return uext4_umount(fs) ? T_FAIL : T_PASS;
}
