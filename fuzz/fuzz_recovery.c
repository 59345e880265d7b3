/*
 * fuzz/fuzz_recovery.c - (c): journal recovery on a mutated log.  The
 * inputs are small images with a dirty journal (fuzz/mkcorpus.sh), and the
 * mutator aims at the journal's blocks.  A read-write mount replays the
 * log into the image; a second mount of what replay left is walked.
 */
#include <stdlib.h>
#include "common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	fuzz_mutator_journal_bias = 1;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *img = fuzz_copy_input(data, size);
	uext4_fs *fs;

	if (img && !fuzz_mount_buffer(img, size, 0, &fs)) {
		uext4_umount(fs);
		if (!fuzz_mount_buffer(img, size, 1, &fs)) {
			fuzz_walk(fs);
			uext4_umount(fs);
		}
	}
	free(img);
	return 0;
}
