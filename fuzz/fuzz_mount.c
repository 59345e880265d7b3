/* fuzz/fuzz_mount.c - (a): mount read-only, walk and read everything. */
#include <stdlib.h>
#include "common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *img = fuzz_copy_input(data, size);
	uext4_fs *fs;

	if (img && !fuzz_mount_buffer(img, size, 1, &fs)) {
		fuzz_walk(fs);
		uext4_umount(fs);
	}
	free(img);
	return 0;
}
