/*
 * populate_bench.c - time uext4_populate() on an existing image (made by
 * mke2fs or uext4 mkfs): mount, fill from a host directory, unmount.
 *
 *   populate_bench [-j THREADS] [-t FIXED_TIME] [-c CLAMP] [-x] [-r UID:GID]
 *                  [-p] [-B] IMAGE SOURCE
 *     -j  worker threads (0 = online CPUs; default 0)
 *     -t  use_fixed_time with this time (reproducible images)
 *     -c  clamp times after CLAMP (SOURCE_DATE_EPOCH)
 *     -x  no_copy_xattrs;  -r  root_owner;  -p  print progress to stderr
 *     -B  without bulk mode (journaled commits, commit timer)
 *
 * Prints one line:
 *   RESULT threads=N secs=S populate_secs=P umount_secs=U maxrss_kb=R
 * and exits 1 with the library's message if anything failed.  Uses the
 * public API only (include/uext4.h).
 */
#include "uext4.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void show_progress(void *ctx, const struct uext4_populate_progress *p)
{
	(void)ctx;
	fprintf(stderr, "progress files %llu/%llu bytes %llu/%llu\n",
		(unsigned long long)p->files_done, (unsigned long long)p->files_total,
		(unsigned long long)p->bytes_done, (unsigned long long)p->bytes_total);
}

static int usage(void)
{
	fprintf(stderr, "usage: populate_bench [-j N] [-t TIME] [-c CLAMP] [-x] [-r UID:GID] "
		"[-p] [-B] IMAGE SOURCE\n");
	return 2;
}

int main(int argc, char **argv)
{
	struct uext4_opts mo = {.bulk = 1};
	struct uext4_populate_opts po = {0};
	struct rusage ru;
	uext4_fs *fs;
	double t0, t1, t2;
	int c, err;

	while ((c = getopt(argc, argv, "j:t:c:xr:pB")) != -1) {
		switch (c) {
		case 'j': po.threads = (unsigned)atoi(optarg); break;
		case 't': mo.use_fixed_time = 1; mo.fixed_time = atoll(optarg); break;
		case 'c': po.clamp_times = 1; po.clamp_time = atoll(optarg); break;
		case 'x': po.no_copy_xattrs = 1; break;
		case 'r':
			if (sscanf(optarg, "%u:%u", &po.root_uid, &po.root_gid) != 2)
				return usage();
			po.root_owner_set = 1;
			break;
		case 'p': po.progress = show_progress; break;
		case 'B': mo.bulk = 0; break;
		default: return usage();
		}
	}
	if (argc - optind != 2)
		return usage();
	t0 = now();
	if ((err = uext4_mount(argv[optind], &mo, &fs))) {
		fprintf(stderr, "populate_bench: mount %s: %s\n", argv[optind], uext4_last_error());
		return 1;
	}
	err = uext4_populate(fs, UEXT4_ROOT_INO, argv[optind + 1], &po);
	if (err)
		fprintf(stderr, "populate_bench: %s\n", uext4_last_error());
	t1 = now();
	if (uext4_umount(fs)) {
		fprintf(stderr, "populate_bench: umount: %s\n", uext4_last_error());
		err = err ? err : -EIO;
	}
	t2 = now();
	getrusage(RUSAGE_SELF, &ru);
	printf("RESULT threads=%u secs=%.3f populate_secs=%.3f umount_secs=%.3f maxrss_kb=%ld\n",
	       po.threads, t2 - t0, t1 - t0, t2 - t1, ru.ru_maxrss);
	return err ? 1 : 0;
}
