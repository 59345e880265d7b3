/*
 * timestamps.c - the library's side of tests/timestamps.sh (which runs it).
 *
 *   timestamps IMAGE NAME SEC NSEC [NAME SEC NSEC ...]
 *
 * Mounts IMAGE read-write through the public API and, for each case,
 * creates the file fNAME and the directory dNAME in the root and sets
 * their atime and mtime to SEC.NSEC with uext4_setattr().  Prints, for
 * each, the times that uext4_setattr() returned, as `walk` prints them
 * ("./fNAME mtime=S.N atime=S.N"), for the script to compare with what
 * the kernel stores.  Also: a time whose tv_nsec is not a valid count is
 * refused with -EINVAL and changes nothing.  Exit 0, or 1 on a failure.
 */
#include "uext4.h"
#include "t.h"

#include <stdbool.h>

static void print_times(const char *path, const struct uext4_stat *st)
{
	printf("./%s mtime=%lld.%09ld atime=%lld.%09ld\n", path, (long long)st->mtime.tv_sec,
	       st->mtime.tv_nsec, (long long)st->atime.tv_sec, st->atime.tv_nsec);
}

static int set_times(uext4_fs *fs, const char *name, bool dir, struct timespec ts)
{
	struct uext4_setattr a = { .valid = UEXT4_SET_ATIME | UEXT4_SET_MTIME,
				   .atime = ts, .mtime = ts };
	struct uext4_stat st;
	char path[300];
	int r;

	snprintf(path, sizeof(path), "%c%s", dir ? 'd' : 'f', name);
	r = dir ? uext4_mkdir(fs, UEXT4_ROOT_INO, path, S_IFDIR | 0755, &st)
		: uext4_create(fs, UEXT4_ROOT_INO, path, S_IFREG | 0644, &st);
	T_CHECK(r == 0, "creating %s: %d %s", path, r, uext4_last_error());
	if (r)
		return r;
	r = uext4_setattr(fs, st.ino, &a, &st);
	T_CHECK(r == 0, "setattr %s: %d %s", path, r, uext4_last_error());
	if (r == 0)
		print_times(path, &st);
	return r;
}

/* tv_nsec must be 0..999999999: anything else is refused, nothing changes. */
static void check_bad_nsec(uext4_fs *fs)
{
	static const long bad[] = { 1000000000L, -1L };
	struct uext4_stat before, after;
	int r = uext4_create(fs, UEXT4_ROOT_INO, "badnsec", S_IFREG | 0644, &before);

	T_CHECK(r == 0, "creating badnsec: %d %s", r, uext4_last_error());
	if (r)
		return;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct uext4_setattr a = { .valid = UEXT4_SET_MTIME,
					   .mtime = { .tv_sec = 5, .tv_nsec = bad[i] } };

		r = uext4_setattr(fs, before.ino, &a, NULL);
		T_CHECK(r == -EINVAL, "setattr with tv_nsec %ld: %d, not -EINVAL", bad[i], r);
		T_CHECK(strstr(uext4_last_error(), "nanoseconds"),
			"the message names the nanoseconds: \"%s\"", uext4_last_error());
	}
	r = uext4_getattr(fs, before.ino, &after);
	T_CHECK(r == 0 && after.mtime.tv_sec == before.mtime.tv_sec &&
			after.mtime.tv_nsec == before.mtime.tv_nsec,
		"a refused setattr changed the mtime");
}

int main(int argc, char **argv)
{
	struct uext4_opts o = { 0 };
	uext4_fs *fs;
	int r;

	if (argc < 2 || (argc - 2) % 3) {
		fprintf(stderr, "usage: %s IMAGE [NAME SEC NSEC]...\n", argv[0]);
		return 2;
	}
	if ((r = uext4_mount(argv[1], &o, &fs))) {
		fprintf(stderr, "mount %s: %d %s\n", argv[1], r, uext4_last_error());
		return T_FAIL;
	}
	for (int i = 2; i + 2 < argc; i += 3) {
		struct timespec ts = { .tv_sec = (time_t)strtoll(argv[i + 1], NULL, 10),
				       .tv_nsec = strtol(argv[i + 2], NULL, 10) };

		set_times(fs, argv[i], false, ts);
		set_times(fs, argv[i], true, ts);
	}
	check_bad_nsec(fs);
	if ((r = uext4_umount(fs))) {
		fprintf(stderr, "umount %s: %d %s\n", argv[1], r, uext4_last_error());
		return T_FAIL;
	}
	return t_failures ? T_FAIL : T_PASS;
}
