/*
 * mkfs.c - uext4 mkfs: make a file system (uext4_mkfs()), and with -d fill
 * it (cli_fill_image(), fill.c); also the image creation behind
 * `uext4 mount --create`.
 *
 * This file parses mke2fs's options into struct uext4_mkfs_opts and the
 * populate options into struct fill_args.
 */
#include "cli.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* N[K|M|G|T] (integers, powers of 1024); a bare number is KiB, or blocks
 * of block_size when that is given (-b), as mke2fs reads its SIZE. */
static int parse_fs_size(const char *s, uint32_t block_size, uint64_t *out)
{
	char *end;
	unsigned long long v;
	uint64_t mul;

	errno = 0;
	if (!*s || *s == '-')
		return -1;
	v = strtoull(s, &end, 10);
	if (errno || end == s)
		return -1;
	switch (*end) {
	case 0: mul = block_size ? block_size : 1024; break;
	case 'k': case 'K': mul = 1ull << 10; end++; break;
	case 'm': case 'M': mul = 1ull << 20; end++; break;
	case 'g': case 'G': mul = 1ull << 30; end++; break;
	case 't': case 'T': mul = 1ull << 40; end++; break;
	default: return -1;
	}
	if (*end || (v && mul > UINT64_MAX / v))
		return -1;
	*out = v * mul;
	return 0;
}

static int parse_u64(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;

	errno = 0;
	if (!*s || *s == '-')
		return -1;
	v = strtoull(s, &end, 0);
	if (errno || *end)
		return -1;
	*out = v;
	return 0;
}

static int parse_u32(const char *s, uint32_t *out)
{
	uint64_t v;

	if (parse_u64(s, &v) || v > UINT32_MAX)
		return -1;
	*out = (uint32_t)v;
	return 0;
}

/* xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx */
static int parse_uuid(const char *s, uint8_t out[16])
{
	int n = 0;

	if (strlen(s) != 36)
		return -1;
	for (int i = 0; i < 36; i++) {
		int hi, lo;

		if (i == 8 || i == 13 || i == 18 || i == 23) {
			if (s[i] != '-')
				return -1;
			continue;
		}
		hi = hex_digit(s[i]);
		lo = hex_digit(s[i + 1]);
		if (hi < 0 || lo < 0)
			return -1;
		out[n++] = (uint8_t)(hi << 4 | lo);
		i++;
	}
	return 0;
}

/* UID:GID */
static int parse_owner(const char *s, uint32_t *uid, uint32_t *gid)
{
	char buf[64];
	char *colon;

	if (strlen(s) >= sizeof(buf))
		return -1;
	strcpy(buf, s);
	colon = strchr(buf, ':');
	if (!colon)
		return -1;
	*colon = 0;
	return parse_u32(buf, uid) || parse_u32(colon + 1, gid) ? -1 : 0;
}

static int bad_arg(const struct command *c, const char *opt, const char *val, const char *why)
{
	fprintf(stderr, "uext4 %s: %s %s: %s\n", c->name, opt, val, why);
	return usage_error(c, NULL);
}

/* -U UUID|clear|random|time */
static int parse_uuid_opt(const struct command *c, const char *v, struct uext4_mkfs_opts *o)
{
	if (!strcmp(v, "clear"))
		o->uuid_kind = UEXT4_MKFS_UUID_CLEAR;
	else if (!strcmp(v, "random"))
		o->uuid_kind = UEXT4_MKFS_UUID_RANDOM;
	else if (!strcmp(v, "time"))
		o->uuid_kind = UEXT4_MKFS_UUID_TIME;
	else if (!parse_uuid(v, o->uuid))
		o->uuid_kind = UEXT4_MKFS_UUID_GIVEN;
	else
		return bad_arg(c, "-U", v, "not a UUID (xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx), "
			       "clear, random or time");
	return 0;
}

/* -E quotatype=usrquota:grpquota:prjquota (mke2fs also takes usr, grp,
 * prj and ',' inside -E's list cannot separate them). */
static int parse_quotatype(char *val, uint8_t *types)
{
	char *save = NULL;

	*types = 0;
	for (char *t = strtok_r(val, ":", &save); t; t = strtok_r(NULL, ":", &save)) {
		if (!strcmp(t, "usrquota") || !strcmp(t, "usr"))
			*types |= UEXT4_MKFS_QUOTA_USR;
		else if (!strcmp(t, "grpquota") || !strcmp(t, "grp"))
			*types |= UEXT4_MKFS_QUOTA_GRP;
		else if (!strcmp(t, "prjquota") || !strcmp(t, "prj"))
			*types |= UEXT4_MKFS_QUOTA_PRJ;
		else
			return -1;
	}
	return *types ? 0 : -1;
}

/* -E opt=val[,opt=val...] */
static int parse_extended(const struct command *c, char *list, struct uext4_mkfs_opts *o,
			  struct fill_args *fa)
{
	char *save = NULL;

	for (char *e = strtok_r(list, ",", &save); e; e = strtok_r(NULL, ",", &save)) {
		char *val = strchr(e, '=');

		if (val)
			*val++ = 0;
		if (!strcmp(e, "hash_seed") && val) {
			if (parse_uuid(val, o->hash_seed))
				return bad_arg(c, "-E hash_seed=", val, "not a UUID");
			o->hash_seed_set = 1;
		} else if (!strcmp(e, "root_owner")) {
			if (!val) {
				o->root_uid = (uint32_t)getuid();
				o->root_gid = (uint32_t)getgid();
			} else if (parse_owner(val, &o->root_uid, &o->root_gid)) {
				return bad_arg(c, "-E root_owner=", val, "not UID:GID");
			}
			o->root_owner_set = 1;
			fa->root_owner_set = 1;
			fa->root_uid = o->root_uid;
			fa->root_gid = o->root_gid;
		} else if (!strcmp(e, "encoding") && val) {
			if (strcmp(val, "utf8") && strcmp(val, "utf8-12.1"))
				return bad_arg(c, "-E encoding=", val,
					       "unknown encoding (utf8 or utf8-12.1)");
			o->encoding = UEXT4_MKFS_ENC_UTF8_12_1;
		} else if (!strcmp(e, "encoding_flags") && val) {
			if (strcmp(val, "strict"))
				return bad_arg(c, "-E encoding_flags=", val,
					       "unknown encoding flag (strict)");
			o->encoding_flags = UEXT4_MKFS_ENC_STRICT;
		} else if (!strcmp(e, "lazy_itable_init")) {
			uint32_t v = 1;

			if (val && (parse_u32(val, &v) || v > 1))
				return bad_arg(c, "-E lazy_itable_init=", val, "must be 0 or 1");
			o->itable_zero = !v;
		} else if (!strcmp(e, "num_backup_sb") && val) {
			if (parse_u32(val, &o->num_backup_sb) || o->num_backup_sb > 2)
				return bad_arg(c, "-E num_backup_sb=", val, "must be 0, 1 or 2");
			o->num_backup_sb_set = 1;
		} else if (!strcmp(e, "offset") && val) {
			if (parse_fs_size(val, 1, &o->offset))
				return bad_arg(c, "-E offset=", val, "not a byte offset");
		} else if (!strcmp(e, "orphan_file_size") && val) {
			/* as mke2fs: a bare number is blocks, a suffix makes it bytes */
			uint64_t v;

			if (parse_u64(val, &v) == 0 && v && v <= UINT32_MAX)
				o->orphan_file_blocks = (uint32_t)v;
			else if (parse_fs_size(val, 1, &v) == 0 && v)
				o->orphan_file_size = v;
			else
				return bad_arg(c, "-E orphan_file_size=", val,
					       "not a number of blocks or a size (N[K|M])");
		} else if (!strcmp(e, "mmp_update_interval") && val) {
			uint32_t v;

			if (parse_u32(val, &v) || v > 300)
				return bad_arg(c, "-E mmp_update_interval=", val,
					       "not a number of seconds up to 300");
			o->mmp_update_interval = (uint16_t)v;
		} else if (!strcmp(e, "quotatype") && val) {
			if (parse_quotatype(val, &o->quota_types))
				return bad_arg(c, "-E quotatype=", val,
					       "not a list of usrquota, grpquota, prjquota "
					       "(separated by ':')");
		} else {
			fprintf(stderr, "uext4 %s: -E %s%s%s: unknown extended option (uext4 knows "
				"hash_seed=, root_owner=, lazy_itable_init=, offset=, "
				"orphan_file_size=, num_backup_sb=, mmp_update_interval=, encoding=,\n"
				"encoding_flags=, quotatype=)\n",
				c->name, e, val ? "=" : "", val ? val : "");
			return usage_error(c, NULL);
		}
	}
	return 0;
}

/* -J size=MiB[,fast_commit_size=KiB] or -J device=PATH (an external journal) */
static int parse_journal(const struct command *c, const char *v, struct uext4_mkfs_opts *o)
{
	const char *p = v;

	while (*p) {
		size_t len = strcspn(p, ",");
		char one[64];

		if (!strncmp(p, "device=", 7) && p[7]) {
			/* the path may be long or hold a comma: it takes the rest */
			o->journal_device = p + 7;
			break;
		}
		if (len >= sizeof(one))
			return bad_arg(c, "-J", v, "option too long");
		memcpy(one, p, len);
		one[len] = 0;
		if (!strncmp(one, "size=", 5)) {
			if (parse_u32(one + 5, &o->journal_mib) || !o->journal_mib)
				return bad_arg(c, "-J", v, "size= must be a number of MiB");
		} else if (!strncmp(one, "fast_commit_size=", 17)) {
			if (parse_u32(one + 17, &o->fast_commit_kib) || !o->fast_commit_kib)
				return bad_arg(c, "-J", v, "fast_commit_size= must be a number of KiB");
		} else {
			return bad_arg(c, "-J", v, "uext4 knows size=MiB, fast_commit_size=KiB and device=PATH");
		}
		p += len;
		if (*p)
			p++;
	}
	return 0;
}

static int parse_epoch(const struct command *c, struct uext4_mkfs_opts *o, struct fill_args *fa)
{
	const char *s = getenv("SOURCE_DATE_EPOCH");
	char *end;
	long long v;

	if (!s)
		return 0;
	errno = 0;
	v = strtoll(s, &end, 10);
	if (!*s || *end || errno || v < 0) {
		fprintf(stderr, "uext4 %s: SOURCE_DATE_EPOCH=%s: not a non-negative integer "
			"(seconds since 1970)\n", c->name, s);
		return 2;
	}
	o->use_fixed_time = 1;
	o->fixed_time = v;
	fa->have_epoch = 1;
	fa->epoch = v;
	return 0;
}

static void print_uuid(const uint8_t u[16], char out[37])
{
	snprintf(out, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
		 u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12],
		 u[13], u[14], u[15]);
}

/* What mke2fs prints: size, UUID, backups; -n adds the rest of the geometry. */
static void print_geometry(const struct uext4_mkfs_geometry *g, int dry_run)
{
	uint32_t backups[64];
	uint32_t n = uext4_mkfs_backup_groups(g, backups, 64);
	char uuid[37];

	print_uuid(g->uuid, uuid);
	printf("Creating filesystem with %" PRIu64 " %uk blocks and %u inodes\n",
	       g->blocks_count, g->block_size / 1024, g->inodes_count);
	printf("Filesystem UUID: %s\n", uuid);
	if (n) {
		printf("Superblock backups stored on blocks: ");
		for (uint32_t i = 0; i < n && i < 64; i++)
			printf("%s%" PRIu64, i ? ", " : "\n\t",
			       (uint64_t)g->first_data_block + (uint64_t)backups[i] * g->blocks_per_group);
		printf("\n");
	}
	if (!dry_run)
		return;
	printf("Features: %s\n", g->features);
	printf("Block size: %u\nInode size: %u\nGroups: %u\nBlocks per group: %u\n"
	       "Inodes per group: %u\nInode blocks per group: %u\nReserved blocks: %" PRIu64 "\n"
	       "Reserved GDT blocks: %u\nFlex block group size: %u\nJournal blocks: %u\n"
	       "Orphan file blocks: %u\n",
	       g->block_size, g->inode_size, g->groups_count, g->blocks_per_group,
	       g->inodes_per_group, g->inode_blocks_per_group, g->reserved_blocks,
	       g->reserved_gdt_blocks, g->flex_bg_size, g->journal_blocks, g->orphan_file_blocks);
	if (g->cluster_size != g->block_size)
		printf("Cluster size: %u\n", g->cluster_size);
}

/* The library's message; EINVAL is an option or size that cannot work
 * (exit 2, with the usage line), anything else exit 1. */
static int mkfs_failed(const struct command *c, const char *image, int ret)
{
	const char *msg = uext4_last_error();

	if (!*msg)
		return fail(c, image, ret);
	fprintf(stderr, "uext4 %s: %s\n", c->name, msg);
	return ret == -EINVAL ? usage_error(c, NULL) : 1;
}

enum { OPT_ROOT_OWNER = 1000, OPT_NO_XATTRS };

static const struct option long_opts[] = {
	{ "root-owner", required_argument, NULL, OPT_ROOT_OWNER },
	{ "no-copy-xattrs", no_argument, NULL, OPT_NO_XATTRS },
	{ NULL, 0, NULL, 0 },
};

struct mkfs_args {
	struct uext4_mkfs_opts o;
	struct fill_args fa;
	int quiet;
	char *ext;                  /* -E, parsed after -b is known */
	const char *size_arg;
};

static int parse_opt(const struct command *c, int ch, struct mkfs_args *a)
{
	struct uext4_mkfs_opts *o = &a->o;

	switch (ch) {
	case 'q': a->quiet = 1; a->fa.quiet = 1; return 0;
	case 't': o->fs_type = optarg; return 0;
	case 'b':
		if (parse_u32(optarg, &o->block_size))
			return bad_arg(c, "-b", optarg, "not a block size");
		return 0;
	case 'C':
		if (parse_u32(optarg, &o->cluster_size) || !o->cluster_size)
			return bad_arg(c, "-C", optarg, "not a cluster size");
		return 0;
	case 'N':
		if (parse_u64(optarg, &o->inodes) || !o->inodes)
			return bad_arg(c, "-N", optarg, "not a number of inodes");
		return 0;
	case 'i':
		if (parse_u32(optarg, &o->inode_ratio) || !o->inode_ratio)
			return bad_arg(c, "-i", optarg, "not a number of bytes per inode");
		return 0;
	case 'I':
		if (parse_u32(optarg, &o->inode_size) || !o->inode_size)
			return bad_arg(c, "-I", optarg, "not an inode size");
		return 0;
	case 'G':
		if (parse_u32(optarg, &o->flex_bg_size) || !o->flex_bg_size)
			return bad_arg(c, "-G", optarg, "not a number of groups");
		return 0;
	case 'L': o->label = optarg; return 0;
	case 'U': return parse_uuid_opt(c, optarg, o);
	case 'm': {
		char *end;

		errno = 0;
		o->reserved_percent = strtod(optarg, &end);
		if (errno || *end || end == optarg)
			return bad_arg(c, "-m", optarg, "not a percentage");
		o->reserved_set = 1;
		return 0;
	}
	case 'J': return parse_journal(c, optarg, o);
	case 'O': o->features = optarg; return 0;
	case 'E': {
		size_t n = a->ext ? strlen(a->ext) : 0;
		char *e = realloc(a->ext, n + strlen(optarg) + 2);

		if (!e)
			return fail_host(c, "-E", ENOMEM);
		if (n)
			e[n++] = ',';
		strcpy(e + n, optarg);
		a->ext = e;
		return 0;
	}
	case 'F': o->force = 1; return 0;
	case 'n': o->dry_run = 1; return 0;
	case 'd': a->fa.source = optarg; return 0;
	case 'j':
		if (parse_u32(optarg, &a->fa.threads) || !a->fa.threads)
			return bad_arg(c, "-j", optarg, "not a number of threads");
		return 0;
	case OPT_ROOT_OWNER:
		if (parse_owner(optarg, &a->fa.root_uid, &a->fa.root_gid))
			return bad_arg(c, "--root-owner", optarg, "not UID:GID");
		a->fa.root_owner_set = 1;
		return 0;
	case OPT_NO_XATTRS: a->fa.no_copy_xattrs = 1; return 0;
	default: return usage_error(c, NULL);
	}
}

static int parse_args(const struct command *c, int argc, char **argv, struct mkfs_args *a)
{
	int ch, err;

	opterr = 0;
	while ((ch = getopt_long(argc, argv, "+qt:b:C:N:i:I:G:L:U:m:J:O:E:Fnd:j:", long_opts,
				 NULL)) != -1) {
		if (ch == '?') {
			if (optopt && strchr("tbCNiIGLUmJOEdj", optopt))
				fprintf(stderr, "uext4 %s: option -%c needs an argument\n", c->name,
					optopt);
			else if (optopt)
				fprintf(stderr, "uext4 %s: unknown option -%c\n", c->name, optopt);
			else
				fprintf(stderr, "uext4 %s: unknown option %s\n", c->name,
					argv[optind - 1]);
			return usage_error(c, NULL);
		}
		if ((err = parse_opt(c, ch, a)))
			return err;
	}
	if (argc - optind < 1)
		return usage_error(c, "missing IMAGE");
	if (argc - optind > 2)
		return usage_error(c, "too many arguments");
	a->fa.image = argv[optind];
	a->size_arg = argc - optind == 2 ? argv[optind + 1] : NULL;
	if (a->size_arg && parse_fs_size(a->size_arg, a->o.block_size, &a->o.size))
		return bad_arg(c, "SIZE", a->size_arg, "not a size (N, or N with K, M, G or T)");
	if (a->size_arg && !a->o.size)
		return bad_arg(c, "SIZE", a->size_arg, "must not be 0");
	if (a->ext && (err = parse_extended(c, a->ext, &a->o, &a->fa)))
		return err;
	if ((err = parse_epoch(c, &a->o, &a->fa)))
		return err;
	if (a->o.dry_run && a->fa.source)
		return usage_error(c, "-n and -d do not go together");
	return 0;
}

static int cmd_mkfs_run(const struct command *c, int argc, char **argv)
{
	struct mkfs_args a;
	struct uext4_mkfs_geometry g;
	int ret;

	memset(&a, 0, sizeof(a));
	ret = parse_args(c, argc, argv, &a);
	if (ret) {
		free(a.ext);
		return ret;
	}
	ret = uext4_mkfs(a.fa.image, &a.o, &g);
	free(a.ext);
	if (ret < 0)
		return mkfs_failed(c, a.fa.image, ret);
	if ((long)g.block_size > sysconf(_SC_PAGESIZE))
		/* as mke2fs warns (it goes on with -F); uext4 reads and writes it */
		fprintf(stderr, "uext4 %s: warning: %u-byte blocks are larger than this system's "
			"pages (%ld): the kernel may refuse to mount it (uext4 reads and writes it)\n",
			c->name, g.block_size, sysconf(_SC_PAGESIZE));
	if (!a.quiet || a.o.dry_run)
		print_geometry(&g, a.o.dry_run);
	if (!a.fa.source)
		return 0;
	a.fa.offset = a.o.offset;
	a.fa.created = g.created;
	return cli_fill_image(c, &a.fa);
}

int cmd_mkfs(const struct command *c, int argc, char **argv)
{
	return cmd_mkfs_run(c, argc, argv);
}

int cli_mkfs_create(const struct command *c, const char *image, const char *size_arg,
		    int *created)
{
	struct uext4_mkfs_opts o;
	struct uext4_mkfs_geometry g;
	struct fill_args fa;
	struct stat st;
	int ret;

	*created = 0;
	if (stat(image, &st) == 0)
		return 0;
	if (errno != ENOENT)
		return fail_host(c, image, errno);
	memset(&o, 0, sizeof(o));
	memset(&fa, 0, sizeof(fa));
	if (parse_fs_size(size_arg, 0, &o.size) || !o.size)
		return bad_arg(c, "--create", size_arg, "not a size (N, or N with K, M, G or T)");
	if ((ret = parse_epoch(c, &o, &fa)))
		return ret;
	ret = uext4_mkfs(image, &o, &g);
	if (ret < 0)
		return mkfs_failed(c, image, ret);
	*created = 1;
	return 0;
}
