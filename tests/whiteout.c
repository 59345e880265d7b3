/*
 * whiteout.c - helper of tests/whiteout.sh (run only by it).
 *
 *   whiteout sys OLD NEW FLAG...    renameat2(2) with the flags named
 *                                   (whiteout, noreplace, exchange)
 *   whiteout lib IMAGE OLD NEW FLAG...   uext4_rename() on IMAGE (paths
 *                                   from its root), as uid 0, then stat
 *                                   OLD and print "mode uid gid rdev nlink"
 *
 * Prints "OK" or the errno name.
 */
#include "uext4.h"
#include "t.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif
#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1 << 1)
#endif
#ifndef RENAME_WHITEOUT
#define RENAME_WHITEOUT (1 << 2)
#endif

static void report(int r)
{
	const char *n = r < 0 ? strerrorname_np(-r) : NULL;

	printf("%s\n", r >= 0 ? "OK" : n ? n : "E?");
}

/* Flag names to renameat2's (sys) or the library's (lib) bits. */
static unsigned parse_flags(char **v, int n, int lib)
{
	unsigned f = 0;

	for (int i = 0; i < n; i++) {
		if (!strcmp(v[i], "whiteout"))
			f |= lib ? UEXT4_RENAME_WHITEOUT : RENAME_WHITEOUT;
		else if (!strcmp(v[i], "noreplace"))
			f |= lib ? UEXT4_RENAME_NOREPLACE : RENAME_NOREPLACE;
		else if (!strcmp(v[i], "exchange"))
			f |= lib ? UEXT4_RENAME_EXCHANGE : RENAME_EXCHANGE;
		else {
			fprintf(stderr, "unknown flag %s\n", v[i]);
			exit(2);
		}
	}
	return f;
}

static int split(uext4_fs *fs, const char *p, uint64_t *dir, const char **name)
{
	const char *sl = strrchr(p, '/');
	char d[256];

	if (!sl || sl == p) {
		*dir = UEXT4_ROOT_INO;
		*name = sl ? sl + 1 : p;
		return 0;
	}
	snprintf(d, sizeof(d), "%.*s", (int)(sl - p), p);
	*name = sl + 1;
	return uext4_resolve(fs, d, 0, dir);
}

static int lib_rename(uext4_fs *fs, const char *a, const char *b, unsigned flags)
{
	uint64_t da, db;
	const char *na, *nb;
	int r;

	if ((r = split(fs, a, &da, &na)) || (r = split(fs, b, &db, &nb)))
		return r;
	return uext4_rename(fs, da, na, db, nb, flags);
}

int main(int argc, char **argv)
{
	if (argc >= 4 && !strcmp(argv[1], "sys")) {
		long r = syscall(SYS_renameat2, AT_FDCWD, argv[2], AT_FDCWD, argv[3],
				 parse_flags(argv + 4, argc - 4, 0));

		report(r < 0 ? -errno : 0);
		return 0;
	}
	if (argc >= 5 && !strcmp(argv[1], "lib")) {
		struct uext4_opts o = {0};
		struct uext4_stat st;
		uext4_fs *fs;
		int r;

		if ((r = uext4_mount(argv[2], &o, &fs)) < 0) {
			t_fail_call("mount", r);
			return T_FAIL;
		}
		r = lib_rename(fs, argv[3], argv[4], parse_flags(argv + 5, argc - 5, 1));
		report(r);
		if (r == 0 && uext4_stat_path(fs, argv[3], &st) == 0)
			printf("%o %u %u %u,%u %u\n", st.mode, st.uid, st.gid, major(st.rdev),
			       minor(st.rdev), st.nlink);
		if ((r = uext4_umount(fs)) < 0) {
			t_fail_call("umount", r);
			return T_FAIL;
		}
		return T_PASS;
	}
	fprintf(stderr, "usage: whiteout sys OLD NEW FLAG... | lib IMAGE OLD NEW FLAG...\n");
	return 2;
}
