/*
 * memlimit.c - the buffer cache limit holds under a create workload.
 *
 *   memlimit IMAGE NFILES CACHE_BYTES
 *
 * Mounts IMAGE with uext4_opts.cache_bytes = CACHE_BYTES, creates NFILES
 * empty files spread over directories of 1000 files each (library path,
 * no FUSE), unmounts, and prints the process's peak resident set (VmHWM
 * from /proc/self/status) in KiB as "vmhwm_kib N".  Every create must
 * succeed.  The bound itself is asserted by tests/memlimit.sh, which also
 * runs e2fsck -fn on the result.
 */
#include "uext4.h"
#include "t.h"

#define PER_DIR 1000

static int create_all(uext4_fs *fs, long nfiles)
{
	struct uext4_stat st;
	uint64_t dir = 2;
	char name[64];
	int err;

	for (long i = 0; i < nfiles; i++) {
		if (i % PER_DIR == 0) {
			snprintf(name, sizeof name, "d%ld", i / PER_DIR);
			if ((err = uext4_mkdir(fs, 2, name, 0755, &st))) {
				fprintf(stderr, "mkdir %s: %s\n", name, strerror(-err));
				return err;
			}
			dir = st.ino;
		}
		snprintf(name, sizeof name, "file-with-a-longish-name-%08ld", i);
		if ((err = uext4_create(fs, dir, name, 0644, &st))) {
			fprintf(stderr, "create #%ld %s: %s\n", i, name, strerror(-err));
			return err;
		}
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct uext4_opts o = { 0 };
	uext4_fs *fs;
	long nfiles;
	int err;

	if (argc != 4) {
		fprintf(stderr, "usage: memlimit IMAGE NFILES CACHE_BYTES\n");
		return T_FAIL;
	}
	nfiles = atol(argv[2]);
	o.cache_bytes = strtoull(argv[3], NULL, 0);
	if ((err = uext4_mount(argv[1], &o, &fs))) {
		fprintf(stderr, "mount %s: %s\n", argv[1], strerror(-err));
		return T_FAIL;
	}
	printf("vmhwm_kib_after_mount %ld\n", t_status_kib("VmHWM"));
	err = create_all(fs, nfiles);
	T_CHECK(err == 0, "creating %ld files", nfiles);
	printf("vmhwm_kib_after_create %ld\n", t_status_kib("VmHWM"));
	err = uext4_umount(fs);
	T_CHECK(err == 0, "umount: %s", strerror(-err));
	printf("vmhwm_kib %ld\n", t_status_kib("VmHWM"));
	return t_failures ? T_FAIL : T_PASS;
}
