/*
 * populate_tar.c - driver for tests/populate_tar.sh: uext4_populate_archive()
 * straight through the library, into an image some other tool made.
 *
 *   populate_tar [-e EPOCH] [-r UID:GID] [-X] [-m] IMAGE ARCHIVE|-
 *
 * -e: mount with the fixed time EPOCH and clamp times to it (as mkfs -d
 * with SOURCE_DATE_EPOCH); -r: root owner; -X: no xattrs; -m: on failure,
 * mark the image with uext4_record_error() before unmounting.  Prints
 * "progress: CALLS FILES BYTES TOTAL" (the last report), and on failure the
 * library's message; exit 0, or 1 when the fill failed.
 */
#include "uext4.h"
#include "t.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct seen {
	unsigned long calls;
	struct uext4_populate_progress last;
	int backwards;          /* a count went down */
};

static void on_progress(void *ctx, const struct uext4_populate_progress *p)
{
	struct seen *s = ctx;

	if (s->calls && (p->files_done < s->last.files_done || p->bytes_done < s->last.bytes_done))
		s->backwards = 1;
	s->calls++;
	s->last = *p;
}

int main(int argc, char **argv)
{
	struct uext4_opts mo = { .bulk = 1 };
	struct uext4_populate_opts po = { 0 };
	struct seen s = { 0 };
	int opt, fd, mark = 0, ret, uret;
	uext4_fs *fs;

	while ((opt = getopt(argc, argv, "e:r:Xm")) != -1) {
		switch (opt) {
		case 'e':
			mo.use_fixed_time = 1;
			mo.fixed_time = strtoll(optarg, NULL, 10);
			po.clamp_times = 1;
			po.clamp_time = mo.fixed_time;
			break;
		case 'r':
			po.root_owner_set = 1;
			if (sscanf(optarg, "%u:%u", &po.root_uid, &po.root_gid) != 2)
				return 2;
			break;
		case 'X': po.no_copy_xattrs = 1; break;
		case 'm': mark = 1; break;
		default: return 2;
		}
	}
	if (argc - optind != 2) {
		fprintf(stderr, "usage: populate_tar [-e EPOCH] [-r UID:GID] [-X] [-m] IMAGE ARCHIVE|-\n");
		return 2;
	}
	fd = strcmp(argv[optind + 1], "-") ? open(argv[optind + 1], O_RDONLY) : 0;
	if (fd < 0) {
		perror(argv[optind + 1]);
		return 2;
	}
	if ((ret = uext4_mount(argv[optind], &mo, &fs)) < 0) {
		fprintf(stderr, "populate_tar: mount: %s\n", uext4_last_error());
		return 2;
	}
	po.progress = on_progress;
	po.progress_ctx = &s;
	ret = uext4_populate_archive(fs, UEXT4_ROOT_INO, fd, &po);
	if (ret < 0)
		fprintf(stderr, "populate_tar: %s\n", uext4_last_error());
	if (ret < 0 && mark && uext4_record_error(fs, ret, "populate_tar") < 0)
		fprintf(stderr, "populate_tar: record_error: %s\n", uext4_last_error());
	uret = uext4_umount(fs);
	if (uret < 0)
		fprintf(stderr, "populate_tar: umount: %s\n", uext4_last_error());
	printf("progress: %lu %llu %llu %llu%s\n", s.calls, (unsigned long long)s.last.files_done,
	       (unsigned long long)s.last.bytes_done, (unsigned long long)s.last.bytes_total,
	       s.backwards ? " backwards" : "");
	return ret < 0 || uret < 0 ? T_FAIL : T_PASS;
}
