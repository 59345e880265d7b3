/*
 * fill.c - uext4 mkfs -d: fill a new image from a directory or a tarball.
 * Placeholder: the archive work replaces this file.
 */
#include "cli.h"

#include <stdio.h>

int cli_fill_image(const struct command *c, const struct fill_args *a)
{
	fprintf(stderr, "uext4 %s: -d %s: not built yet\n", c->name, a->source);
	return 1;
}
