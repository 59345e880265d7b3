/*
 * archive.c - fill an image from a tar stream (uext4_populate_archive).
 * Placeholder: the archive work replaces this file.
 */
#include "internal.h"

int uext4_populate_archive(uext4_fs *fs, uint64_t dir, int fd,
			   const struct uext4_populate_opts *o)
{
	(void)fs; (void)dir; (void)fd; (void)o;
	return fs_err(ENOSYS, "uext4_populate_archive: not built yet");
}
