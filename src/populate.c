/*
 * populate.c - fill an image from a host directory (uext4_populate).
 * Placeholder: the populate work replaces this file.
 */
#include "internal.h"

int uext4_populate(uext4_fs *fs, uint64_t dir, const char *source,
		   const struct uext4_populate_opts *o)
{
	(void)fs; (void)dir; (void)o;
	return fs_err(ENOSYS, "uext4_populate: %s: not built yet", source);
}
