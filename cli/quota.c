/*
 * quota.c - `uext4 quota` (usage, limits and grace of a -O quota image's
 * ids, like repquota) and `uext4 setquota` (limits and grace times, in
 * setquota(8)'s argument order).  Both open the image read-write: the
 * library keeps quota state only on a read-write mount.
 */
#include "cli.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static const char *const type_word[] = { "User", "Group", "Project" };

/* A decimal number up to max: 0, or -1. */
static int parse_num(const char *s, uint64_t max, uint64_t *out)
{
	char *end;
	unsigned long long v;

	if (!*s || *s == '-' || *s == '+')
		return -1;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || *end || v > max)
		return -1;
	*out = v;
	return 0;
}

/* -u, -g or -P into *type; 0, or -1 when the option is none of them or a
 * second, different one. */
static int type_opt(int ch, int *type)
{
	int t = ch == 'u' ? UEXT4_QUOTA_USER : ch == 'g' ? UEXT4_QUOTA_GROUP
			  : ch == 'P' ? UEXT4_QUOTA_PROJECT : -1;

	if (t < 0 || (*type >= 0 && *type != t))
		return -1;
	*type = t;
	return 0;
}

/* The time left before a deadline, as repquota shows it; "" for none. */
static void grace_left(int64_t deadline, int64_t now, char *buf, size_t len)
{
	int64_t left = deadline - now;

	if (!deadline)
		snprintf(buf, len, "%s", "");
	else if (left <= 0)
		snprintf(buf, len, "%s", "none");
	else if (left >= 86400)
		snprintf(buf, len, "%" PRId64 "days", (left + 86399) / 86400);
	else
		snprintf(buf, len, "%02" PRId64 ":%02" PRId64, left / 3600, (left % 3600 + 59) / 60);
}

static void print_one(const struct uext4_quota *q, int64_t now)
{
	uint64_t kib = (q->space + 1023) / 1024;
	char bg[24], ig[24];

	grace_left(q->btime, now, bg, sizeof(bg));
	grace_left(q->itime, now, ig, sizeof(ig));
	printf("%-10" PRIu32 " %c%c %10" PRIu64 " %10" PRIu64 " %10" PRIu64 " %7s %9" PRIu64
	       " %8" PRIu64 " %8" PRIu64 " %7s\n",
	       q->id, (q->bhard && kib > q->bhard) || (q->bsoft && kib > q->bsoft) ? '+' : '-',
	       (q->ihard && q->inodes > q->ihard) || (q->isoft && q->inodes > q->isoft) ? '+' : '-',
	       kib, q->bsoft, q->bhard, bg, q->inodes, q->isoft, q->ihard, ig);
}

static int report(const struct command *c, uext4_fs *fs, const char *image, int type,
		  const uint64_t *one)
{
	uint32_t bgrace, igrace, *ids = NULL, single;
	size_t count;
	int64_t now = (int64_t)time(NULL);
	int ret = uext4_quota_get_grace(fs, type, &bgrace, &igrace);

	if (ret < 0)
		return fail(c, image, ret);
	if (one) {
		single = (uint32_t)*one;
		ids = &single;
		count = 1;
	} else if ((ret = uext4_quota_list(fs, type, &ids, &count)) < 0) {
		return fail(c, image, ret);
	}
	printf("*** %s quotas on %s\nBlock grace time: %" PRIu32 " s; Inode grace time: %" PRIu32
	       " s\n", type_word[type], image, bgrace, igrace);
	printf("%-10s    %10s %10s %10s %7s %9s %8s %8s %7s\n", type_word[type], "KiB used",
	       "soft", "hard", "grace", "files", "soft", "hard", "grace");
	for (size_t i = 0; i < count && ret >= 0; i++) {
		struct uext4_quota q;

		ret = uext4_quota_get(fs, type, ids[i], &q);
		if (ret == -ENOENT)
			ret = 0;
		if (ret >= 0)
			print_one(&q, now);
	}
	if (!one)
		free(ids);
	return ret < 0 ? fail(c, image, ret) : 0;
}

static int not_a_mount_point(const struct command *c, const char *image)
{
	struct stat st;

	if (stat(image, &st) == 0 && S_ISDIR(st.st_mode)) {
		fprintf(stderr, "uext4 %s: %s is a directory: this command takes the image file "
				"(unmount a uext4 mount of it first, with uext4 umount)\n",
			c->name, image);
		return 1;
	}
	return 0;
}

int cmd_quota(const struct command *c, int argc, char **argv)
{
	int ch, type = -1, status = 0;
	uint64_t id;
	uext4_fs *fs;

	while ((ch = next_opt(c, argc, argv, "ugP")) != -1)
		if (type_opt(ch, &type))
			return usage_error(c, ch == '?' ? NULL : "one of -u, -g, -P");
	if (argc - optind < 1 || argc - optind > 2)
		return usage_error(c, argc - optind < 1 ? "missing IMAGE" : "too many arguments");
	if (argc - optind == 2 && parse_num(argv[optind + 1], UINT32_MAX, &id))
		return usage_error(c, "bad ID (a number, 0 to 4294967295)");
	if (not_a_mount_point(c, argv[optind]) || open_image_rw(c, argv[optind], &fs))
		return 1;
	for (int t = 0; t < 3 && !status; t++) {
		uint32_t bg, ig;

		/* Without -u/-g/-P: every type the image keeps. */
		if (type >= 0 ? t != type : uext4_quota_get_grace(fs, t, &bg, &ig) < 0)
			continue;
		status = report(c, fs, argv[optind], t, argc - optind == 2 ? &id : NULL);
	}
	return close_image(c, argv[optind], fs, status);
}

int cmd_setquota(const struct command *c, int argc, char **argv)
{
	int ch, type = -1, grace = 0, ret;
	uint64_t v[5];
	int want;
	uext4_fs *fs;

	while ((ch = next_opt(c, argc, argv, "ugPt")) != -1) {
		if (ch == 't')
			grace = 1;
		else if (type_opt(ch, &type))
			return usage_error(c, ch == '?' ? NULL : "one of -u, -g, -P");
	}
	if (type < 0)
		return usage_error(c, "missing -u, -g or -P");
	want = grace ? 2 : 5;
	if (argc - optind != 1 + want)
		return usage_error(c, grace ? "-t takes IMAGE BGRACE IGRACE"
					    : "takes IMAGE ID BSOFT BHARD ISOFT IHARD");
	for (int i = 0; i < want; i++)
		if (parse_num(argv[optind + 1 + i], grace || i == 0 ? UINT32_MAX : UINT64_MAX / 1024,
			      &v[i]))
			return usage_error(c, grace ? "bad grace time (seconds, up to 4294967295)"
						    : "bad ID or limit (a number; limits in 1 KiB blocks and "
						      "inodes, 0 for none)");
	if (not_a_mount_point(c, argv[optind]) || open_image_rw(c, argv[optind], &fs))
		return 1;
	if (grace) {
		ret = uext4_quota_set_grace(fs, type, (uint32_t)v[0], (uint32_t)v[1]);
	} else {
		struct uext4_quota q = { .bsoft = v[1], .bhard = v[2], .isoft = v[3], .ihard = v[4] };

		ret = uext4_quota_set(fs, type, (uint32_t)v[0], &q);
	}
	return close_image(c, argv[optind], fs, ret < 0 ? fail(c, argv[optind], ret) : 0);
}
