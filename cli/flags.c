/*
 * flags.c - `uext4 lsattr` and `uext4 chattr`: the inode flags and project
 * ids of files in an image (uext4_get_fileattr / uext4_set_flags /
 * uext4_set_fileattr), shown and given as e2fsprogs' lsattr and chattr do
 * (lsattr -p, chattr -p PROJECT).
 */
#include "cli.h"

#include <errno.h>
#include <linux/fs.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef FS_DAX_FL
#define FS_DAX_FL 0x02000000
#endif
#ifndef FS_CASEFOLD_FL
#define FS_CASEFOLD_FL 0x40000000
#endif
#ifndef FS_VERITY_FL
#define FS_VERITY_FL 0x00100000
#endif
#ifndef FS_ENCRYPT_FL
#define FS_ENCRYPT_FL 0x00000800
#endif

/* lsattr's columns, in its order (e2fsprogs lib/e2p/pf.c). */
static const struct {
	uint32_t flag;
	char letter;
} columns[] = {
	{FS_SECRM_FL, 's'}, {FS_UNRM_FL, 'u'}, {FS_SYNC_FL, 'S'}, {FS_DIRSYNC_FL, 'D'},
	{FS_IMMUTABLE_FL, 'i'}, {FS_APPEND_FL, 'a'}, {FS_NODUMP_FL, 'd'}, {FS_NOATIME_FL, 'A'},
	{FS_COMPR_FL, 'c'}, {FS_ENCRYPT_FL, 'E'}, {FS_JOURNAL_DATA_FL, 'j'}, {FS_INDEX_FL, 'I'},
	{FS_NOTAIL_FL, 't'}, {FS_TOPDIR_FL, 'T'}, {FS_EXTENT_FL, 'e'}, {FS_NOCOW_FL, 'C'},
	{FS_DAX_FL, 'x'}, {FS_CASEFOLD_FL, 'F'}, {FS_INLINE_DATA_FL, 'N'},
	{FS_PROJINHERIT_FL, 'P'}, {FS_VERITY_FL, 'V'}, {FS_NOCOMP_FL, 'm'},
};
#define NCOLUMNS (sizeof(columns) / sizeof(columns[0]))

int cmd_lsattr(const struct command *c, int argc, char **argv)
{
	struct uext4_fileattr fa;
	bool project = false;
	uext4_fs *fs;
	uint64_t ino;
	int status = 0, ret, opt;

	while ((opt = next_opt(c, argc, argv, "p")) != -1) {
		if (opt != 'p')
			return usage_error(c, NULL);
		project = true;
	}
	if (argc - optind < 2)
		return usage_error(c, "missing IMAGE or PATH");
	if (open_image(c, argv[optind], &fs))
		return 1;
	for (int i = optind + 1; i < argc; i++) {
		char line[NCOLUMNS + 1];

		if (resolve(c, fs, argv[i], 1, &ino, NULL)) {
			status = 1;
			continue;
		}
		if ((ret = uext4_get_fileattr(fs, ino, &fa)) < 0) {
			status = fail(c, argv[i], ret);
			continue;
		}
		for (size_t k = 0; k < NCOLUMNS; k++)
			line[k] = (fa.flags & columns[k].flag) ? columns[k].letter : '-';
		line[NCOLUMNS] = '\0';
		if (project)    /* lsattr -p's column */
			printf("%5u ", fa.projid);
		printf("%s %s\n", line, argv[i]);
	}
	return close_image(c, argv[optind], fs, status);
}

/* One "+LETTERS", "-LETTERS" or "=LETTERS" argument into the masks; 0 or -1. */
static int parse_change(const char *arg, uint32_t *add, uint32_t *del, int *set)
{
	uint32_t bits = 0;

	for (const char *p = arg + 1; *p; p++) {
		size_t k;

		for (k = 0; k < NCOLUMNS && columns[k].letter != *p; k++)
			;
		if (k == NCOLUMNS)
			return -1;
		bits |= columns[k].flag;
	}
	if (!arg[1])
		return -1;
	if (arg[0] == '+')
		*add |= bits;
	else if (arg[0] == '-')
		*del |= bits;
	else {
		*set = 1;
		*add = bits;
	}
	return 0;
}

/* chattr -p's PROJECT: a decimal 32-bit number; 0 or -1. */
static int parse_project(const char *arg, uint32_t *projid)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(arg, &end, 10);
	if (!*arg || *end || errno || v > UINT32_MAX || arg[0] == '-')
		return -1;
	*projid = (uint32_t)v;
	return 0;
}

/* The changes of argv from i on (flag changes and "-p PROJECT"); the index
 * of the first PATH, or -1 after a usage error. */
static int parse_changes(const struct command *c, int argc, char **argv, int i, uint32_t *add,
			 uint32_t *del, int *set, bool *set_project, uint32_t *projid)
{
	for (; i < argc && strchr("+-=", argv[i][0]); i++) {
		if (!strcmp(argv[i], "-p")) {
			if (i + 1 >= argc || parse_project(argv[i + 1], projid))
				return usage_error(c, "-p takes a project id, 0 to 4294967295"), -1;
			*set_project = true;
			i++;
		} else if (parse_change(argv[i], add, del, set)) {
			return usage_error(c, "a change is +, - or = and flag letters (see "
					   "lsattr's columns), or -p PROJECT"), -1;
		}
	}
	return i;
}

/* One PATH's change, as chattr: the flags and, with -p, the project id. */
static int change_one(uext4_fs *fs, uint64_t ino, uint32_t add, uint32_t del, int set,
		      bool set_project, uint32_t projid)
{
	struct uext4_fileattr fa;
	int ret = uext4_get_fileattr(fs, ino, &fa);

	if (ret < 0)
		return ret;
	/* As chattr: "=" keeps what users cannot set (e, I, N...). */
	if (set)
		fa.flags = add | (fa.flags & (FS_EXTENT_FL | FS_INDEX_FL | FS_INLINE_DATA_FL |
					      FS_ENCRYPT_FL | FS_VERITY_FL | FS_CASEFOLD_FL));
	else
		fa.flags = (fa.flags | add) & ~del;
	if (!set_project)
		return uext4_set_flags(fs, ino, fa.flags);
	fa.projid = projid;
	return uext4_set_fileattr(fs, ino, &fa);
}

int cmd_chattr(const struct command *c, int argc, char **argv)
{
	uint32_t add = 0, del = 0, projid = 0;
	bool set_project = false;
	int set = 0, status = 0, ret, i;
	uext4_fs *fs;
	uint64_t ino;

	/* No getopt: "-i" is a change, not an option. */
	if (argc < 4)
		return usage_error(c, "missing IMAGE, a change or PATH");
	if ((i = parse_changes(c, argc, argv, 2, &add, &del, &set, &set_project, &projid)) < 0)
		return 1;
	if (i == 2 || i == argc)
		return usage_error(c, i == 2 ? "no change given" : "missing PATH");
	if (open_image_rw(c, argv[1], &fs))
		return 1;
	for (; i < argc; i++) {
		if (resolve(c, fs, argv[i], 1, &ino, NULL)) {
			status = 1;
			continue;
		}
		if ((ret = change_one(fs, ino, add, del, set, set_project, projid)) < 0)
			status = fail(c, argv[i], ret);
	}
	return close_image(c, argv[1], fs, status);
}
