/*
 * stats.c - `uext4 stats MOUNTPOINT`: the statistics of a running mount.
 *
 * The server answers reads of the virtual xattr user.uext4.stats on the
 * mount's root (fuse/fuse.c: suffixes .json, .on, .off, .reset), so this
 * is one getxattr(2): no socket, no server state, and it works on
 * read-only mounts (a setxattr there would be refused by the kernel).
 */
#include "cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>

#define STATS_MAX 65536         /* the most one getxattr returns (XATTR_SIZE_MAX) */

static int stats_failed(const struct command *c, const char *mnt, int err)
{
	if (err == ENODATA || err == ENOTSUP)
		fprintf(stderr, "uext4 %s: %s: no statistics here: not the top directory of a "
			"uext4 mount (or its server predates `uext4 stats`)\n", c->name, mnt);
	else
		fail_host(c, mnt, err);
	return 1;
}

/* Does the report say counting is off?  Both forms start with the state. */
static int report_says_off(const char *buf, int json)
{
	return json ? !strncmp(buf, "{\"enabled\":false", 16)
		    : !strncmp(buf, "statistics: off", 15);
}

int cmd_stats(const struct command *c, int argc, char **argv)
{
	int json = 0, reset = 0, on = 0, off = 0, status = 0;
	char name[64], *buf;
	const char *mnt = NULL;
	ssize_t n;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json"))
			json = 1;
		else if (!strcmp(argv[i], "--reset"))
			reset = 1;
		else if (!strcmp(argv[i], "--on"))
			on = 1;
		else if (!strcmp(argv[i], "--off"))
			off = 1;
		else if (argv[i][0] == '-' && argv[i][1])
			return usage_error(c, "unknown option");
		else if (mnt)
			return usage_error(c, "too many arguments");
		else
			mnt = argv[i];
	}
	if (!mnt)
		return usage_error(c, "missing MOUNTPOINT");
	if (on && off)
		return usage_error(c, "--on and --off together");
	snprintf(name, sizeof name, "user.uext4.stats%s%s%s", on ? ".on" : off ? ".off" : "",
		 json ? ".json" : "", reset ? ".reset" : "");
	if (!(buf = malloc(STATS_MAX + 1)))
		return fail_host(c, "memory", ENOMEM);
	n = getxattr(mnt, name, buf, STATS_MAX);
	if (n < 0) {
		status = stats_failed(c, mnt, errno);
	} else {
		buf[n] = '\0';
		if (report_says_off(buf, json) && !off) {
			fprintf(stderr, "uext4 %s: %s: statistics are off on this mount: `uext4 stats "
				"--on %s` starts counting now, or mount with -o stats\n", c->name,
				mnt, mnt);
			status = 1;
		} else {
			fwrite(buf, 1, (size_t)n, stdout);
		}
	}
	free(buf);
	return status;
}
