/*
 * fuzz/fuzz_mkfs_tar.c - (d): `mkfs -d` of a mutated tarball.  A fresh
 * 4 MiB ext4 is made once (uext4_mkfs into /dev/shm, then loaded); each
 * input is a tar stream (any format libarchive reads) given through a
 * memfd to uext4_populate_archive() on a copy of that image, which is
 * then unmounted, mounted again and walked.  libFuzzer's own mutator.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

enum { TAR_IMAGE_BYTES = 4 << 20, TAR_MAX_INPUT = 1 << 20 };
static uint8_t *fresh;   /* the empty file system; written once at start */

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	struct uext4_mkfs_opts o = { .size = TAR_IMAGE_BYTES, .block_size = 1024,
				     .use_fixed_time = 1, .fixed_time = 1700000000,
				     .uuid_kind = UEXT4_MKFS_UUID_CLEAR, .hash_seed_set = 1,
				     .force = 1 };
	char path[64];
	FILE *f;

	snprintf(path, sizeof(path), "/dev/shm/uext4-fuzz-tar-%d.img", (int)getpid());
	if (uext4_mkfs(path, &o, NULL)) {
		fprintf(stderr, "fuzz_mkfs_tar: mkfs %s: %s\n", path, uext4_last_error());
		exit(1);
	}
	fresh = malloc(TAR_IMAGE_BYTES);
	f = fopen(path, "rb");
	if (!fresh || !f || fread(fresh, 1, TAR_IMAGE_BYTES, f) != TAR_IMAGE_BYTES) {
		fprintf(stderr, "fuzz_mkfs_tar: cannot load %s\n", path);
		exit(1);
	}
	fclose(f);
	unlink(path);
	return 0;
}

static int memfd_of(const uint8_t *data, size_t size)
{
	int fd = memfd_create("fuzz-tar", MFD_CLOEXEC);

	if (fd < 0)
		return -1;
	if (write(fd, data, size) != (ssize_t)size || lseek(fd, 0, SEEK_SET) != 0) {
		close(fd);
		return -1;
	}
	return fd;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct uext4_populate_opts po = { .threads = 1 };
	uint8_t *img;
	uext4_fs *fs;
	int fd;

	if (size > TAR_MAX_INPUT || (fd = memfd_of(data, size)) < 0)
		return 0;
	img = fuzz_copy_input(fresh, TAR_IMAGE_BYTES);
	if (img && !fuzz_mount_buffer(img, TAR_IMAGE_BYTES, 0, &fs)) {
		uext4_populate_archive(fs, UEXT4_ROOT_INO, fd, &po);
		uext4_umount(fs);
		if (!fuzz_mount_buffer(img, TAR_IMAGE_BYTES, 1, &fs)) {
			fuzz_walk(fs);
			uext4_umount(fs);
		}
	}
	free(img);
	close(fd);
	return 0;
}
