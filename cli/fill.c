/*
 * fill.c - uext4 mkfs -d: fill a new image from a directory or a tarball.
 *
 * mkfs.c has made the file system and parsed the options; here the image
 * is mounted (at -E offset=, with SOURCE_DATE_EPOCH as the fixed time and
 * in bulk mode), the source copied into its root by uext4_populate() (a
 * directory) or uext4_populate_archive() (a regular file, a pipe, or "-"
 * for stdin), and unmounted.
 *
 * Progress: on a terminal (stderr) and without -q, one line redrawn in
 * place at most ten times a second; at the end a summary line on stdout
 * unless -q.  A failed fill never leaves an image that looks complete: a
 * file this mkfs created is removed, an existing one (a device, a disk
 * image at an offset) is marked with an error in its superblock
 * (uext4_record_error), and the message says which.
 */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define REDRAW_NS 100000000LL   /* the bar at most every 0.1 s */

struct progress {
	int bar;                        /* draw the bar (stderr is a tty, not -q) */
	int drawn;                      /* a bar line is on the screen */
	struct timespec start, last;
	struct uext4_populate_progress p;
};

static int64_t ns_between(struct timespec a, struct timespec b)
{
	return (int64_t)(b.tv_sec - a.tv_sec) * 1000000000LL + (b.tv_nsec - a.tv_nsec);
}

/* "12.3 MB" into buf (decimal units, as the rate). */
static const char *human(uint64_t n, char *buf, size_t len)
{
	if (n < 1000000)
		snprintf(buf, len, "%.1f kB", n / 1e3);
	else if (n < 1000000000)
		snprintf(buf, len, "%.1f MB", n / 1e6);
	else
		snprintf(buf, len, "%.2f GB", n / 1e9);
	return buf;
}

static void draw_bar(struct progress *pr, struct timespec now)
{
	const struct uext4_populate_progress *p = &pr->p;
	double secs = ns_between(pr->start, now) / 1e9;
	double rate = secs > 0 ? p->bytes_done / secs : 0;
	char files[64], bytes[64], b1[32], b2[32], eta[32] = "";

	if (p->files_total)
		snprintf(files, sizeof(files), "%llu/%llu files", (unsigned long long)p->files_done,
			 (unsigned long long)p->files_total);
	else
		snprintf(files, sizeof(files), "%llu files", (unsigned long long)p->files_done);
	if (p->bytes_total)
		snprintf(bytes, sizeof(bytes), "%s/%s", human(p->bytes_done, b1, sizeof(b1)),
			 human(p->bytes_total, b2, sizeof(b2)));
	else
		snprintf(bytes, sizeof(bytes), "%s", human(p->bytes_done, b1, sizeof(b1)));
	if (secs < 1.0) {
		/* Too early for a rate worth extrapolating. */
	} else if (p->bytes_total && rate > 0 && p->bytes_done <= p->bytes_total) {
		double left = (p->bytes_total - p->bytes_done) / rate;

		snprintf(eta, sizeof(eta), ", %d:%02d left", (int)left / 60, (int)left % 60);
	} else if (p->files_total && p->files_done && p->files_done <= p->files_total) {
		double left = secs * (p->files_total - p->files_done) / p->files_done;

		snprintf(eta, sizeof(eta), ", %d:%02d left", (int)left / 60, (int)left % 60);
	}
	fprintf(stderr, "\r%s, %s, %.1f MB/s%s\033[K", files, bytes, rate / 1e6, eta);
	fflush(stderr);
	pr->drawn = 1;
}

/* The library's callback: keep the counts, redraw when it is time. */
static void on_progress(void *ctx, const struct uext4_populate_progress *p)
{
	struct progress *pr = ctx;
	struct timespec now;

	pr->p = *p;
	if (!pr->bar)
		return;
	clock_gettime(CLOCK_MONOTONIC, &now);
	if (pr->drawn && ns_between(pr->last, now) < REDRAW_NS)
		return;
	pr->last = now;
	draw_bar(pr, now);
}

static void clear_bar(struct progress *pr)
{
	if (pr->drawn)
		fprintf(stderr, "\r\033[K");
	pr->drawn = 0;
}

static void summary(const struct command *c, const struct fill_args *a,
		    const struct progress *pr, int archive)
{
	struct timespec now;
	char b[32];

	clock_gettime(CLOCK_MONOTONIC, &now);
	double secs = ns_between(pr->start, now) / 1e9;

	printf("uext4 %s: %s: %llu %s, %s %s in %.2f s\n", c->name, a->source,
	       (unsigned long long)pr->p.files_done, archive ? "members" : "files",
	       human(pr->p.bytes_done, b, sizeof(b)), archive ? "of archive read" : "copied",
	       secs);
	fflush(stdout);
}

/* A failed fill: remove the image mkfs created, else mark it (fs still
 * mounted, or NULL).  Returns 1. */
static int fail_image(const struct command *c, const struct fill_args *a, uext4_fs *fs, int err)
{
	if (a->created) {
		if (fs)
			uext4_umount(fs);
		if (unlink(a->image) == 0)
			fprintf(stderr, "uext4 %s: %s: removed (this mkfs created it and the fill "
				"failed)\n", c->name, a->image);
		else
			fprintf(stderr, "uext4 %s: %s: the fill failed and removing the image failed "
				"too (%s): do not use it\n", c->name, a->image, strerror(errno));
		return 1;
	}
	if (fs && uext4_record_error(fs, err, "mkfs -d") == 0) {
		int ret = uext4_umount(fs);

		fprintf(stderr, "uext4 %s: %s: marked with an error in its superblock (the fill "
			"is incomplete; e2fsck and mounts will say so)%s\n", c->name, a->image,
			ret < 0 ? ", though unmounting it failed" : "");
		return 1;
	}
	if (fs)
		uext4_umount(fs);
	fprintf(stderr, "uext4 %s: %s: the fill is incomplete and the image could not be "
		"marked with an error: do not use it\n", c->name, a->image);
	return 1;
}

/* What SOURCE is: 1 a directory, 0 a stream (*fd opened), or -errno. */
static int open_source(const char *source, int *fd)
{
	struct stat st;

	*fd = -1;
	if (!strcmp(source, "-")) {
		*fd = STDIN_FILENO;
		return 0;
	}
	if (stat(source, &st))
		return -errno;
	if (S_ISDIR(st.st_mode))
		return 1;
	if (!S_ISREG(st.st_mode) && !S_ISFIFO(st.st_mode) && !S_ISCHR(st.st_mode))
		return -EINVAL;
	if ((*fd = open(source, O_RDONLY | O_CLOEXEC)) < 0)
		return -errno;
	return 0;
}

/* A directory source only creates names, never looks one up: without
 * the name cache, each create skips invalidating a bucket (a lock, and a
 * page of the table written for the first time: 2-3% of the CPU of a
 * mkfs -d of /usr/share).  An archive looks its paths up, so keeps it. */
static int mount_for_fill(const struct fill_args *a, int lookups, uext4_fs **fs)
{
	struct uext4_opts o = { .offset = a->offset, .bulk = 1, .no_name_cache = !lookups };

	if (a->have_epoch) {
		o.use_fixed_time = 1;
		o.fixed_time = a->epoch;
	}
	return uext4_mount(a->image, &o, fs);
}

int cli_fill_image(const struct command *c, const struct fill_args *a)
{
	struct progress pr = { .bar = !a->quiet && isatty(STDERR_FILENO) };
	struct uext4_populate_opts po = {
		.threads = a->threads, .no_copy_xattrs = a->no_copy_xattrs,
		.root_owner_set = a->root_owner_set, .root_uid = a->root_uid,
		.root_gid = a->root_gid, .clamp_times = a->have_epoch, .clamp_time = a->epoch,
		/* With -q nothing shows progress: no callback, so the library
		 * does not walk the source first for the totals. */
		.progress = a->quiet ? NULL : on_progress, .progress_ctx = &pr,
	};
	uext4_fs *fs = NULL;
	char what[4200];
	int fd, kind, ret;

	snprintf(what, sizeof(what), "-d %s", a->source);
	kind = open_source(a->source, &fd);
	if (kind < 0) {
		fprintf(stderr, "uext4 %s: %s: %s\n", c->name, what,
			kind == -EINVAL ? "not a directory, a regular file or a pipe"
					: strerror(-kind));
		return fail_image(c, a, NULL, kind);
	}
	if ((ret = mount_for_fill(a, kind != 1, &fs)) < 0) {
		fail(c, a->image, ret);
		if (fd > STDIN_FILENO)
			close(fd);
		return fail_image(c, a, NULL, ret);
	}
	clock_gettime(CLOCK_MONOTONIC, &pr.start);
	if (kind == 1)
		ret = uext4_populate(fs, UEXT4_ROOT_INO, a->source, &po);
	else
		ret = uext4_populate_archive(fs, UEXT4_ROOT_INO, fd, &po);
	if (fd > STDIN_FILENO)
		close(fd);
	clear_bar(&pr);
	if (ret < 0) {
		fail(c, what, ret);
		return fail_image(c, a, fs, ret);
	}
	if ((ret = uext4_umount(fs)) < 0) {
		fail(c, a->image, ret);
		return fail_image(c, a, NULL, ret);
	}
	if (!a->quiet)
		summary(c, a, &pr, kind == 0);
	return 0;
}
