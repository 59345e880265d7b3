/*
 * uext4.c - the uext4 command line: inspect ext4 images and mount them.
 *
 * One function per subcommand, found through the command table at the end.
 * Adding a subcommand = writing cmd_foo(), its usage text, and one table row.
 * Every read command opens the image read-only through the public API; the
 * write commands (write.c, copy.c) mount it read-write and unmount it, which
 * writes everything back.
 */
#include "cli.h"
#include "../fuse/fuse.h"  /* not libfuse's fuse.h, which -I/usr/include/fuse3 would find first */

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#define CHUNK (1u << 20)        /* cat streams in 1 MiB pieces */

static const struct command *find_command(const char *name);
static void print_manual(FILE *out, const struct command *c);

/* ---------------------------------------------------------------- errors */

/*
 * "uext4 CMD: WHAT: cause (details)": the standard text for the errno, then
 * the library's message when it left one, which names the structure.
 */
int fail(const struct command *c, const char *what, long ret)
{
	const char *msg = uext4_last_error(), *cause;
	size_t wl = strlen(what);
	int err = ret < 0 ? (int)-ret : (int)ret;

	cause = err == ENODATA ? "No such attribute" : strerror(err);
	if (msg && !strncmp(msg, what, wl) && !strncmp(msg + wl, ": ", 2))
		msg += wl + 2;  /* the library already named it */
	if (!msg || !*msg || !strcmp(msg, cause))
		fprintf(stderr, "uext4 %s: %s: %s\n", c->name, what, cause);
	else
		fprintf(stderr, "uext4 %s: %s: %s (%s)\n", c->name, what, cause, msg);
	return 1;
}

int fail_host(const struct command *c, const char *what, int err)
{
	fprintf(stderr, "uext4 %s: %s: %s\n", c->name, what, strerror(err));
	return 1;
}

int usage_error(const struct command *c, const char *why)
{
	if (why)
		fprintf(stderr, "uext4 %s: %s\n", c->name, why);
	fprintf(stderr, "usage: uext4 %s %s\n", c->name, c->synopsis);
	fprintf(stderr, "Try 'uext4 help %s' for more information.\n", c->name);
	return 2;
}

/* Any "--help" among the arguments prints the manual page; so does "-h",
 * except for commands that have an -h option of their own (chown -h). */
static int wants_help(const struct command *c, int argc, char **argv)
{
	int own_h = strstr(c->synopsis, "[-h]") != NULL;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--"))
			break;
		if (!strcmp(argv[i], "--help") || (!own_h && !strcmp(argv[i], "-h")))
			return 1;
	}
	return 0;
}

/*
 * getopt with our error format.  Returns the option, -1 at the end, or '?'
 * after printing the problem (caller returns usage_error).
 */
int next_opt(const struct command *c, int argc, char **argv, const char *opts)
{
	int ch;

	opterr = 0;
	ch = getopt(argc, argv, opts);
	if (ch == '?') {
		if (strchr(opts, optopt) && optopt)
			fprintf(stderr, "uext4 %s: option -%c needs an argument\n", c->name, optopt);
		else if (optopt)
			fprintf(stderr, "uext4 %s: unknown option -%c\n", c->name, optopt);
		else
			fprintf(stderr, "uext4 %s: unknown option %s\n", c->name, argv[optind - 1]);
	}
	return ch;
}

/* ------------------------------------------------------------ image access */

/* A read-only open of an image that needs journal recovery replays the
 * journal in memory; say so, since what is shown is not what is on disk. */
static void note_recovery(const struct command *c, const char *image, uext4_fs *fs)
{
	struct uext4_recovery r;

	if (uext4_recovery_info(fs, &r) != 0 || !r.replayed_in_memory)
		return;
	fprintf(stderr, "uext4 %s: %s: the journal needed recovery: replayed %u "
		"transactions in memory only (the image is unchanged; `uext4 recover "
		"%s` writes them)\n", c->name, image, r.transactions, image);
	if (r.bad_blocks)
		fprintf(stderr, "uext4 %s: %s: %u logged blocks with a bad checksum were not "
			"replayed (first: journal block %u, transaction %u, home block %llu)\n",
			c->name, image, r.bad_blocks, r.bad_journal_block, r.bad_tid,
			(unsigned long long)r.bad_home_block);
}

/* A read-only look at an image the kernel (or another FUSE server) has
 * mounted reads blocks that its cache may since have changed: say so.
 * (A read-write open is refused by the library, naming the mount.) */
static void warn_in_use(const struct command *c, const char *image)
{
	char where[PATH_MAX + 256];

	if (uext4_in_use(image, where, sizeof(where)) == 1)
		fprintf(stderr, "uext4 %s: %s: warning: %s; what is shown may be stale\n",
			c->name, image, where);
}

/* The external journal device (--journal PATH on any command, mount -o
 * journal=PATH or journal_path=PATH), made absolute: a mount server
 * leaves the working directory. */
static const char *journal_path;
static char journal_abs[PATH_MAX];

static void set_journal_path(const char *path)
{
	journal_path = realpath(path, journal_abs) ? journal_abs : path;
}

/*
 * Takes "NAME VALUE" (or NAME=VALUE) out of argv, for options every
 * command takes before getopt sees its own: the last VALUE (NULL: none),
 * *bad set when NAME ends argv without its VALUE.  "--" ends the search.
 */
static const char *take_long_opt(int *argc, char **argv, const char *name, int *bad)
{
	const char *value = NULL;
	size_t len = strlen(name);
	int n = 1;

	*bad = 0;
	for (int i = 1; i < *argc; i++) {
		if (!strcmp(argv[i], "--")) {
			while (i < *argc)
				argv[n++] = argv[i++];
			break;
		}
		if (!strcmp(argv[i], name)) {
			if (i + 1 >= *argc) {
				*bad = 1;
				return NULL;
			}
			value = argv[++i];
		} else if (!strncmp(argv[i], name, len) && argv[i][len] == '=') {
			value = argv[i] + len + 1;
		} else {
			argv[n++] = argv[i];
		}
	}
	*argc = n;
	argv[n] = NULL;
	return value;
}

static unsigned max_open_files; /* mount -o max_open_files=N */
static unsigned inode_cache;    /* mount -o inode_cache=N */

int open_image(const struct command *c, const char *image, uext4_fs **fs)
{
	/* The limits apply to read-only mounts too (uext4 mount -o ro). */
	struct uext4_opts o = { .read_only = 1, .max_open_files = max_open_files,
				.inode_cache = inode_cache, .journal_path = journal_path };
	int ret = uext4_mount(image, &o, fs);

	if (ret < 0)
		return fail(c, image, ret);
	warn_in_use(c, image);
	note_recovery(c, image, *fs);
	return 0;
}

/*
 * A process that writes an image holds an exclusive flock on it until it
 * has unmounted it (written everything back), so a second writer - another
 * write command, a second read-write mount - fails instead of corrupting the
 * image, and `flock IMAGE true` waits for a mount server's write-back after
 * fusermount3 -u.  A read-only mount holds a shared one: as the kernel
 * refuses a mount that would change a mounted device's read-only state
 * (EBUSY), a read-only mount is refused while a writer holds the image (its
 * view would go stale) and a writer while a read-only mount holds it.
 * Released by close_image (or at exit).
 */
static int image_lock_fd = -1;

/* How long a mount or write command waits for a server that is unmounting
 * (`umount DIR` by root returns before the server has written back). */
#define LOCK_WAIT_SECS 30
#define STR_(x) #x
#define STR(x) STR_(x)

/* How long a uext4 holder's mount may still be in the mount table: `umount
 * DIR` run just before us (fstests generic/604) may not have taken it out. */
#define UNMOUNT_GRACE_MS 2000

/* 1 once the mount table no longer shows image mounted, 0 if it still
 * does after ms milliseconds.  Waits on the table's change events
 * (poll(2) of /proc/self/mountinfo), not by sleeping. */
static int wait_unmounted(const char *image, int ms)
{
	char where[PATH_MAX + 256];
	struct timespec t0, t;
	struct pollfd p = { .events = POLLPRI };
	int left = ms;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	p.fd = open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC);
	while (uext4_mounted(image, where, sizeof(where)) == 1) {
		if (p.fd < 0 || left <= 0 || poll(&p, 1, left) <= 0) {
			if (p.fd >= 0)
				close(p.fd);
			return 0;
		}
		clock_gettime(CLOCK_MONOTONIC, &t);
		left = ms - (int)((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000);
	}
	if (p.fd >= 0)
		close(p.fd);
	return 1;
}

/* The holder is a uext4 whose mount is gone (or going): a server writing
 * back, or a write command; either lets go soon. */
static int holder_finishing(const char *image, const struct lock_holder *h)
{
	return !strcmp(h->comm, "uext4") && wait_unmounted(image, UNMOUNT_GRACE_MS);
}

static void say_held(const struct command *c, const char *image, int shared,
		     const struct lock_holder *h, int waited)
{
	char where[PATH_MAX + 256] = "", who[96] = "";

	if (uext4_in_use(image, where + 2, sizeof(where) - 2) == 1)
		memcpy(where, ", ", 2);
	if (h->pid)
		snprintf(who, sizeof(who), ": %s pid %d", h->comm[0] ? h->comm : "process", h->pid);
	if (h->pid && !h->exclusive) {
		fprintf(stderr, "uext4 %s: %s: in use by a read-only mount%s%s; writing it would "
			"make that view stale (unmount it first)\n", c->name, image, who, where);
		return;
	}
	fprintf(stderr, "uext4 %s: %s: in use by another process writing it (a read-write "
		"mount?)%s%s%s%s\n", c->name, image, who, where,
		waited ? "; still held after " STR(LOCK_WAIT_SECS) " s" : "",
		shared ? "; a read-only mount would show a stale view" : "");
}

/* LOCK_EX to write, LOCK_SH for a read-only mount: 0, or 1 after saying
 * who holds it. */
static int lock_image(const struct command *c, const char *image, int shared)
{
	int fd = open(image, O_RDONLY | O_CLOEXEC), op = shared ? LOCK_SH : LOCK_EX;
	struct lock_holder h;
	int waited = 0;

	if (fd < 0)
		return 0;       /* uext4_mount reports why */
	if (flock(fd, op | LOCK_NB) && errno == EWOULDBLOCK) {
		int known = lock_holder(fd, &h);

		/* No holder in /proc/locks: it let go between the two looks (a
		 * server finishing its write-back, fstests generic/604). */
		if (!known && !flock(fd, op | LOCK_NB))
			goto locked;
		if (known && holder_finishing(image, &h)) {
			waited = 1;
			if (!flock_bounded(fd, op, LOCK_WAIT_SECS))
				goto locked;
			known = lock_holder(fd, &h);
		}
		if (!known)
			memset(&h, 0, sizeof(h));
		say_held(c, image, shared, &h, waited);
		close(fd);
		return 1;
	}
locked:
	image_lock_fd = fd;
	return 0;
}

static void unlock_image(void)
{
	if (image_lock_fd >= 0)
		close(image_lock_fd);
	image_lock_fd = -1;
}

static unsigned commit_secs; /* mount -o commit=N */
static int mount_errors;     /* mount -o errors=...: UEXT4_ERRORS_* */
static int mount_discard;    /* mount -o discard */

/* As the kernel, a read-write mount of a file system that recorded an
 * error says so (e2fsck clears the mark). */
static void warn_errors(const struct command *c, const char *image, uext4_fs *fs)
{
	struct uext4_info in;

	if (uext4_info(fs, &in) == 0 && (in.state & 2))
		fprintf(stderr, "uext4 %s: %s: warning: mounting fs with errors, running e2fsck "
			"is recommended (%u errors recorded; see uext4 info)\n", c->name, image,
			in.error_count);
}

int open_image_rw(const struct command *c, const char *image, uext4_fs **fs)
{
	struct uext4_opts o = { .read_only = 0, .commit_secs = commit_secs,
				.max_open_files = max_open_files,
				.inode_cache = inode_cache,
				.errors = mount_errors, .discard = mount_discard,
				.journal_path = journal_path };
	int ret;

	if (lock_image(c, image, 0))
		return 1;
	ret = uext4_mount(image, &o, fs);
	if (ret < 0) {
		unlock_image();
		return fail(c, image, ret);
	}
	warn_errors(c, image, *fs);
	/* New inodes belong to whoever runs the command; root may use the
	 * reserved blocks, as with the kernel. */
	uext4_set_caller((uint32_t)getuid(), (uint32_t)getgid());
	return 0;
}

int close_image(const struct command *c, const char *image, uext4_fs *fs, int status)
{
	int ret = uext4_umount(fs);

	unlock_image();
	/* A failed write-back is always worth saying, even after another error. */
	if (ret < 0)
		return fail(c, image, ret);
	return status;
}

/* Paths in the image are absolute; "a/b" means "/a/b". */
const char *image_path(const char *p, char *buf, size_t len)
{
	if (p[0] == '/')
		return p;
	snprintf(buf, len, "/%s", p);
	return buf;
}

int resolve(const struct command *c, uext4_fs *fs, const char *path, int follow,
		   uint64_t *ino, struct uext4_stat *st)
{
	char buf[4096];
	int ret = uext4_resolve(fs, image_path(path, buf, sizeof(buf)), follow, ino);

	if (ret >= 0 && st)
		ret = uext4_getattr(fs, *ino, st);
	return ret < 0 ? fail(c, path, ret) : 0;
}

/* --------------------------------------------------------------- formatting */

static void mode_string(uint32_t mode, char s[11])
{
	static const char rwx[] = "rwxrwxrwx";

	switch (mode & S_IFMT) {
	case S_IFDIR: s[0] = 'd'; break;
	case S_IFLNK: s[0] = 'l'; break;
	case S_IFCHR: s[0] = 'c'; break;
	case S_IFBLK: s[0] = 'b'; break;
	case S_IFIFO: s[0] = 'p'; break;
	case S_IFSOCK: s[0] = 's'; break;
	default: s[0] = '-'; break;
	}
	for (int i = 0; i < 9; i++)
		s[1 + i] = (mode & (0400u >> i)) ? rwx[i] : '-';
	if (mode & S_ISUID)
		s[3] = (mode & S_IXUSR) ? 's' : 'S';
	if (mode & S_ISGID)
		s[6] = (mode & S_IXGRP) ? 's' : 'S';
	if (mode & S_ISVTX)
		s[9] = (mode & S_IXOTH) ? 't' : 'T';
	s[10] = '\0';
}

static const char *type_name(const struct uext4_stat *st)
{
	switch (st->mode & S_IFMT) {
	case S_IFREG: return st->size ? "regular file" : "regular empty file";
	case S_IFDIR: return "directory";
	case S_IFLNK: return "symbolic link";
	case S_IFCHR: return "character special file";
	case S_IFBLK: return "block special file";
	case S_IFIFO: return "fifo";
	case S_IFSOCK: return "socket";
	}
	return "weird file";
}

/* "2024-01-31 12:34:56.123456789 +0000", local time like stat(1). */
static void format_time(const struct timespec *ts, char *buf, size_t len)
{
	struct tm tm;
	time_t t = ts->tv_sec;
	char base[32], zone[8];

	localtime_r(&t, &tm);
	strftime(base, sizeof(base), "%Y-%m-%d %H:%M:%S", &tm);
	strftime(zone, sizeof(zone), "%z", &tm);
	snprintf(buf, len, "%s.%09ld %s", base, (long)ts->tv_nsec, zone);
}

static void format_epoch(int64_t secs, char *buf, size_t len)
{
	struct tm tm;
	time_t t = (time_t)secs;

	if (secs == 0) {
		snprintf(buf, len, "n/a");
		return;
	}
	localtime_r(&t, &tm);
	strftime(buf, len, "%a %b %e %H:%M:%S %Y", &tm);
}

int write_all(int fd, const char *buf, size_t len)
{
	while (len) {
		ssize_t n = write(fd, buf, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

/* -------------------------------------------------------------------- info */

static const char *hash_name(unsigned v)
{
	static const char *names[] = { "legacy", "half_md4", "tea", "legacy_unsigned",
				       "half_md4_unsigned", "tea_unsigned", "siphash" };

	return v < sizeof(names) / sizeof(names[0]) ? names[v] : "unknown";
}

static const char *errors_name(unsigned v)
{
	switch (v) {
	case 1: return "Continue";
	case 2: return "Remount read-only";
	case 3: return "Panic";
	}
	return "Unknown";
}

static void state_string(unsigned state, char *buf, size_t len)
{
	snprintf(buf, len, "%s%s%s", (state & 1) ? "clean" : "not clean",
		 (state & 2) ? " with errors" : "", (state & 4) ? " (orphans being recovered)" : "");
}

static void print_uuid(const uint8_t u[16])
{
	for (int i = 0; i < 16; i++)
		printf("%02x%s", u[i], (i == 3 || i == 5 || i == 7 || i == 9) ? "-" : "");
	printf("\n");
}

#define RO_COMPAT_BIGALLOC 0x0200   /* ext4's bigalloc bit (s_feature_ro_compat) */
#define FIELD "%-26s"

/* s_*_error_errcode, as e2fsprogs names them. */
static const char *errcode_name(unsigned code)
{
	static const char *names[] = { "", "EUNKNOWN", "EIO", "ENOMEM", "EFSBADCRC",
		"EFSCORRUPTED", "ENOSPC", "ENOKEY", "EROFS", "EFBIG", "EEXIST", "ERANGE",
		"EOVERFLOW", "EBUSY", "ENOTDIR", "ENOTEMPTY", "ESHUTDOWN", "EFAULT" };

	return code < sizeof(names) / sizeof(names[0]) ? names[code] : "EUNKNOWN";
}

static void print_one_error(const char *which, int64_t when, const char *func, uint32_t line,
			    uint32_t ino, uint64_t block, unsigned code)
{
	char t[64], name[40];

	if (!when)
		return;
	format_epoch(when, t, sizeof(t));
	snprintf(name, sizeof(name), "%s error time:", which);
	printf(FIELD "%s\n", name, t);
	snprintf(name, sizeof(name), "%s error function:", which);
	printf(FIELD "%s\n", name, func);
	snprintf(name, sizeof(name), "%s error line #:", which);
	printf(FIELD "%u\n", name, line);
	snprintf(name, sizeof(name), "%s error inode #:", which);
	printf(FIELD "%u\n", name, ino);
	snprintf(name, sizeof(name), "%s error block #:", which);
	printf(FIELD "%llu\n", name, (unsigned long long)block);
	if (code) {
		snprintf(name, sizeof(name), "%s error err:", which);
		printf(FIELD "%s\n", name, errcode_name(code));
	}
}

/* The errors recorded in the superblock, with dumpe2fs -h's names. */
static void print_errors(const struct uext4_info *in)
{
	if (in->error_count)
		printf(FIELD "%u\n", "FS Error count:", in->error_count);
	print_one_error("First", in->first_error_time, in->first_error_func, in->first_error_line,
			in->first_error_ino, in->first_error_block, in->first_error_errcode);
	print_one_error("Last", in->last_error_time, in->last_error_func, in->last_error_line,
			in->last_error_ino, in->last_error_block, in->last_error_errcode);
}

static void print_info(const struct uext4_info *in)
{
	char t[64];

	printf(FIELD "%s\n", "Filesystem volume name:", in->volume_name[0] ? in->volume_name : "<none>");
	printf(FIELD, "Filesystem UUID:");
	print_uuid(in->uuid);
	printf(FIELD "%u (%s)\n", "Filesystem revision #:", in->rev_level,
	       in->rev_level ? "dynamic" : "original");
	printf(FIELD "%s\n", "Filesystem features:", in->features);
	state_string(in->state, t, sizeof(t));
	printf(FIELD "%s\n", "Filesystem state:", t);
	printf(FIELD "%s\n", "Errors behavior:", errors_name(in->errors));
	printf(FIELD "%u\n", "Inode count:", in->inodes_count);
	printf(FIELD "%llu\n", "Block count:", (unsigned long long)in->blocks_count);
	printf(FIELD "%llu\n", "Reserved block count:", (unsigned long long)in->reserved_blocks);
	printf(FIELD "%llu\n", "Free blocks:", (unsigned long long)in->free_blocks);
	printf(FIELD "%u\n", "Free inodes:", in->free_inodes);
	printf(FIELD "%u\n", "First block:", in->first_data_block);
	printf(FIELD "%u\n", "Block size:", in->block_size);
	if (in->feature_ro_compat & RO_COMPAT_BIGALLOC)    /* as dumpe2fs */
		printf(FIELD "%u\n", "Cluster size:", in->cluster_size);
	printf(FIELD "%u\n", "Group descriptor size:", in->desc_size);
	printf(FIELD "%u\n", "Block groups:", in->groups_count);
	printf(FIELD "%u\n", "Blocks per group:", in->blocks_per_group);
	if (in->feature_ro_compat & RO_COMPAT_BIGALLOC)
		printf(FIELD "%u\n", "Clusters per group:", in->clusters_per_group);
	printf(FIELD "%u\n", "Inodes per group:", in->inodes_per_group);
	if (in->log_groups_per_flex && in->log_groups_per_flex < 32)
		printf(FIELD "%u\n", "Flex block group size:", 1u << in->log_groups_per_flex);
	format_epoch(in->mkfs_time, t, sizeof(t));
	printf(FIELD "%s\n", "Filesystem created:", t);
	format_epoch(in->mtime, t, sizeof(t));
	printf(FIELD "%s\n", "Last mount time:", t);
	format_epoch(in->wtime, t, sizeof(t));
	printf(FIELD "%s\n", "Last write time:", t);
	printf(FIELD "%u\n", "Mount count:", in->mount_count);
	printf(FIELD "%d\n", "Maximum mount count:", (int16_t)in->max_mount_count);
	printf(FIELD "%u\n", "First inode:", in->first_ino);
	printf(FIELD "%u\n", "Inode size:", in->inode_size);
	if (in->journal_inum)
		printf(FIELD "%u\n", "Journal inode:", in->journal_inum);
	printf(FIELD "%s\n", "Default directory hash:", hash_name(in->def_hash_version));
	if (in->orphan_file_inum)
		printf(FIELD "%u\n", "Orphan file inode:", in->orphan_file_inum);
	print_errors(in);
}

/*
 * What the superblock alone says, when the image cannot be mounted (a
 * feature we refuse, bad group descriptors...): as dumpe2fs -h, the
 * superblock is still shown, then why the rest could not be read.
 */
static int info_superblock_only(const struct command *c, const char *image, int mount_err)
{
	struct uext4_info in;
	char why[512];
	int ret;

	snprintf(why, sizeof(why), "%s", uext4_last_error());
	ret = uext4_probe(image, &in);
	if (ret < 0)
		return fail(c, image, ret);
	print_info(&in);
	fflush(stdout);
	if (in.super_csum_bad)
		fprintf(stderr, "uext4 %s: %s: the superblock's checksum does not match\n",
			c->name, image);
	fprintf(stderr, "uext4 %s: %s: only the superblock could be read (shown above); the "
		"rest: %s%s%s%s\n", c->name, image, strerror(-mount_err), *why ? " (" : "", why,
		*why ? ")" : "");
	return 1;
}

static int cmd_info(const struct command *c, int argc, char **argv)
{
	struct uext4_opts o = { .read_only = 1, .journal_path = journal_path };
	struct uext4_info in;
	uext4_fs *fs;
	int ret;

	if (next_opt(c, argc, argv, "") != -1)
		return usage_error(c, NULL);
	if (argc - optind != 1)
		return usage_error(c, argc - optind ? "too many arguments" : "missing IMAGE");
	ret = uext4_mount(argv[optind], &o, &fs);
	if (ret < 0)
		return info_superblock_only(c, argv[optind], ret);
	warn_in_use(c, argv[optind]);
	note_recovery(c, argv[optind], fs);
	ret = uext4_info(fs, &in);
	if (ret < 0)
		return close_image(c, argv[optind], fs, fail(c, argv[optind], ret));
	print_info(&in);
	return close_image(c, argv[optind], fs, 0);
}

/* ---------------------------------------------------------------------- ls */

struct ls_entry {
	char *name;
	uint64_t ino;
};

struct ls_list {
	struct ls_entry *v;
	size_t n, cap;
	int all;                /* include . and .. */
	int err;
};

static int ls_collect(void *ctx, const char *name, size_t len, uint64_t ino,
		      unsigned dtype, uint64_t next)
{
	struct ls_list *l = ctx;

	if (!l->all && ((len == 1 && name[0] == '.') ||
			(len == 2 && name[0] == '.' && name[1] == '.')))
		return 0;
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 64;
		struct ls_entry *v = realloc(l->v, cap * sizeof(*v));
		if (!v) {
			l->err = -ENOMEM;
			return 1;
		}
		l->v = v;
		l->cap = cap;
	}
	l->v[l->n].name = strndup(name, len);
	if (!l->v[l->n].name) {
		l->err = -ENOMEM;
		return 1;
	}
	l->v[l->n++].ino = ino;
	return 0;
}

static int ls_cmp(const void *a, const void *b)
{
	return strcmp(((const struct ls_entry *)a)->name, ((const struct ls_entry *)b)->name);
}

static void ls_free(struct ls_list *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->v[i].name);
	free(l->v);
}

/* One "ls -l" line, like `ls -ln --time-style=long-iso`. */
static void ls_long_line(uext4_fs *fs, const struct uext4_stat *st, const char *name)
{
	char mode[11], when[32], target[4097];
	struct tm tm;
	time_t t = st->mtime.tv_sec;
	ssize_t n;

	mode_string(st->mode, mode);
	localtime_r(&t, &tm);
	strftime(when, sizeof(when), "%Y-%m-%d %H:%M", &tm);
	printf("%s %3u %5u %5u ", mode, st->nlink, st->uid, st->gid);
	if (S_ISCHR(st->mode) || S_ISBLK(st->mode))
		printf("%4u, %4u", major(st->rdev), minor(st->rdev));
	else
		printf("%10llu", (unsigned long long)st->size);
	printf(" %s %s", when, name);
	if (S_ISLNK(st->mode)) {
		n = uext4_readlink(fs, st->ino, target, sizeof(target) - 1);
		if (n >= 0) {
			target[(size_t)n < sizeof(target) ? (size_t)n : sizeof(target) - 1] = '\0';
			printf(" -> %s", target);
		}
	}
	printf("\n");
}

static int ls_print(const struct command *c, uext4_fs *fs, struct ls_list *l, int lng,
		    const char *dirpath)
{
	struct uext4_stat st;
	uint64_t total = 0;
	int status = 0, ret;

	if (l->n)
		qsort(l->v, l->n, sizeof(*l->v), ls_cmp);
	if (!lng) {
		for (size_t i = 0; i < l->n; i++)
			printf("%s\n", l->v[i].name);
		return 0;
	}
	for (size_t i = 0; i < l->n; i++)
		if (uext4_getattr(fs, l->v[i].ino, &st) >= 0)
			total += st.blocks / 2;
	printf("total %llu\n", (unsigned long long)total);
	for (size_t i = 0; i < l->n; i++) {
		ret = uext4_getattr(fs, l->v[i].ino, &st);
		if (ret < 0) {
			char what[4400];
			snprintf(what, sizeof(what), "%s/%s", strcmp(dirpath, "/") ? dirpath : "",
				 l->v[i].name);
			status = fail(c, what, ret);
			continue;
		}
		ls_long_line(fs, &st, l->v[i].name);
	}
	return status;
}

static int ls_path(const struct command *c, uext4_fs *fs, const char *path, int lng, int all)
{
	struct ls_list l = { .all = all };
	struct uext4_stat st;
	uint64_t ino;
	int ret, status;

	/* Like ls: -l shows a symlink itself, plain ls lists the directory it
	 * points to. */
	if (resolve(c, fs, path, !lng, &ino, &st))
		return 1;
	if (!S_ISDIR(st.mode)) {
		if (lng)
			ls_long_line(fs, &st, path);
		else
			printf("%s\n", path);
		return 0;
	}
	ret = uext4_readdir(fs, ino, 0, ls_collect, &l);
	if (ret >= 0 && l.err)
		ret = l.err;
	status = ret < 0 ? fail(c, path, ret) : ls_print(c, fs, &l, lng, path);
	ls_free(&l);
	return status;
}

static int cmd_ls(const struct command *c, int argc, char **argv)
{
	int lng = 0, all = 0, ch, status;
	uext4_fs *fs;

	while ((ch = next_opt(c, argc, argv, "la")) != -1) {
		if (ch == 'l')
			lng = 1;
		else if (ch == 'a')
			all = 1;
		else
			return usage_error(c, NULL);
	}
	if (argc - optind < 1 || argc - optind > 2)
		return usage_error(c, argc - optind ? "too many arguments" : "missing IMAGE");
	if (open_image(c, argv[optind], &fs))
		return 1;
	status = ls_path(c, fs, argc - optind == 2 ? argv[optind + 1] : "/", lng, all);
	return close_image(c, argv[optind], fs, status);
}

/* -------------------------------------------------------------------- stat */

static void print_stat(uext4_fs *fs, const char *path, const struct uext4_stat *st)
{
	char mode[11], t[80], target[4097];
	ssize_t n;

	printf("  File: %s", path);
	if (S_ISLNK(st->mode)) {
		n = uext4_readlink(fs, st->ino, target, sizeof(target) - 1);
		if (n >= 0) {
			target[(size_t)n < sizeof(target) ? (size_t)n : sizeof(target) - 1] = '\0';
			printf(" -> %s", target);
		}
	}
	printf("\n  Size: %-15llu Blocks: %-10llu %s\n", (unsigned long long)st->size,
	       (unsigned long long)st->blocks, type_name(st));
	printf("Inode: %-11llu Links: %-5u", (unsigned long long)st->ino, st->nlink);
	if (S_ISCHR(st->mode) || S_ISBLK(st->mode))
		printf(" Device type: %u,%u", major(st->rdev), minor(st->rdev));
	printf("\n");
	mode_string(st->mode, mode);
	printf("Access: (%04o/%s)  Uid: (%5u)   Gid: (%5u)\n", st->mode & 07777, mode,
	       st->uid, st->gid);
	format_time(&st->atime, t, sizeof(t));
	printf("Access: %s\n", t);
	format_time(&st->mtime, t, sizeof(t));
	printf("Modify: %s\n", t);
	format_time(&st->ctime, t, sizeof(t));
	printf("Change: %s\n", t);
	if (st->crtime.tv_sec || st->crtime.tv_nsec)
		format_time(&st->crtime, t, sizeof(t));
	else
		snprintf(t, sizeof(t), "-");
	printf(" Birth: %s\n", t);
	printf("Generation: %-10u Flags: 0x%08x\n", st->generation, st->flags);
}

static int cmd_stat(const struct command *c, int argc, char **argv)
{
	struct uext4_stat st;
	uext4_fs *fs;
	uint64_t ino;
	int status = 0;

	if (next_opt(c, argc, argv, "") != -1)
		return usage_error(c, NULL);
	if (argc - optind != 2)
		return usage_error(c, argc - optind > 2 ? "too many arguments" : "missing IMAGE or PATH");
	if (open_image(c, argv[optind], &fs))
		return 1;
	status = resolve(c, fs, argv[optind + 1], 0, &ino, &st);
	if (!status)
		print_stat(fs, argv[optind + 1], &st);
	return close_image(c, argv[optind], fs, status);
}

/* --------------------------------------------------------------------- cat */

static int cat_file(const struct command *c, uext4_fs *fs, const char *path)
{
	struct uext4_stat st;
	uext4_file *f;
	uint64_t ino, off = 0;
	char *buf;
	ssize_t n;
	int ret;

	if (resolve(c, fs, path, 1, &ino, &st))
		return 1;
	if (S_ISDIR(st.mode))
		return fail_host(c, path, EISDIR);
	ret = uext4_open(fs, ino, O_RDONLY, &f);
	if (ret < 0)
		return fail(c, path, ret);
	buf = malloc(CHUNK);
	if (!buf) {
		uext4_release(f);
		return fail(c, path, -ENOMEM);
	}
	while ((n = uext4_pread(f, buf, CHUNK, off)) > 0) {
		ret = write_all(STDOUT_FILENO, buf, (size_t)n);
		if (ret < 0) {
			n = ret;
			break;
		}
		off += (uint64_t)n;
	}
	free(buf);
	uext4_release(f);
	return n < 0 ? fail(c, path, n) : 0;
}

static int cmd_cat(const struct command *c, int argc, char **argv)
{
	uext4_fs *fs;
	int status = 0;

	if (next_opt(c, argc, argv, "") != -1)
		return usage_error(c, NULL);
	if (argc - optind < 2)
		return usage_error(c, "missing IMAGE or PATH");
	if (open_image(c, argv[optind], &fs))
		return 1;
	for (int i = optind + 1; i < argc; i++)
		if (cat_file(c, fs, argv[i]))
			status = 1;
	return close_image(c, argv[optind], fs, status);
}

/* ---------------------------------------------------------------- getfattr */

static void print_base64(const unsigned char *v, size_t n)
{
	static const char tab[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

	printf("0s");
	for (size_t i = 0; i < n; i += 3) {
		uint32_t w = (uint32_t)v[i] << 16;
		if (i + 1 < n)
			w |= (uint32_t)v[i + 1] << 8;
		if (i + 2 < n)
			w |= v[i + 2];
		putchar(tab[(w >> 18) & 63]);
		putchar(tab[(w >> 12) & 63]);
		putchar(i + 1 < n ? tab[(w >> 6) & 63] : '=');
		putchar(i + 2 < n ? tab[w & 63] : '=');
	}
}

/* getfattr(1)'s choice: text when at most 1/8 of the bytes (ignoring one
 * trailing NUL) are unprintable, else base64. */
static void print_xattr_value(const unsigned char *v, size_t n)
{
	size_t len = (n && v[n - 1] == 0) ? n - 1 : n, nonprint = 0;

	for (size_t i = 0; i < len; i++)
		if (v[i] < 32 || v[i] >= 127)
			nonprint++;
	if (len < nonprint * 8) {
		print_base64(v, n);
		return;
	}
	putchar('"');
	for (size_t i = 0; i < len; i++) {
		if (v[i] == '"' || v[i] == '\\')
			printf("\\%c", v[i]);
		else if (v[i] < 32 || v[i] == 127)
			printf("\\%03o", v[i]);
		else
			putchar(v[i]);
	}
	putchar('"');
}

/* values: 0 prints the name only, 2 "name=value", 1 (for -n) also the
 * "# file:" header first, but only once the attribute is known to exist. */
static int print_xattr(const struct command *c, uext4_fs *fs, uint64_t ino,
		       const char *path, const char *name, int values)
{
	ssize_t n;
	unsigned char *buf;
	char what[4400];

	if (!values) {
		printf("%s\n", name);
		return 0;
	}
	snprintf(what, sizeof(what), "%s: %s", path, name);
	n = uext4_getxattr(fs, ino, name, NULL, 0);
	if (n < 0)
		return fail(c, what, n == -ENODATA ? -ENODATA : n);
	buf = malloc((size_t)n + 1);
	if (!buf)
		return fail(c, what, -ENOMEM);
	n = uext4_getxattr(fs, ino, name, buf, (size_t)n);
	if (n < 0) {
		free(buf);
		return fail(c, what, n);
	}
	if (values == 1)
		printf("# file: %s\n", path);
	printf("%s=", name);
	print_xattr_value(buf, (size_t)n);
	printf("\n");
	free(buf);
	return 0;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Names from listxattr, sorted like getfattr prints them. */
static int xattr_names(uext4_fs *fs, uint64_t ino, char **buf, char ***names, size_t *count)
{
	ssize_t n = uext4_listxattr(fs, ino, NULL, 0);
	size_t k = 0;

	*buf = NULL;
	*names = NULL;
	*count = 0;
	if (n <= 0)
		return (int)n;
	*buf = malloc((size_t)n + 1);
	*names = calloc((size_t)n, sizeof(char *));
	if (!*buf || !*names)
		return -ENOMEM;
	n = uext4_listxattr(fs, ino, *buf, (size_t)n);
	if (n < 0)
		return (int)n;
	(*buf)[n] = '\0';
	for (ssize_t i = 0; i < n; i += (ssize_t)strlen(*buf + i) + 1)
		if ((*buf)[i])
			(*names)[k++] = *buf + i;
	if (k)
		qsort(*names, k, sizeof(char *), cmp_str);
	*count = k;
	return 0;
}

static int dump_xattrs(const struct command *c, uext4_fs *fs, uint64_t ino, const char *path,
		       const regex_t *match, int values)
{
	char *buf, **names;
	size_t count;
	int ret = xattr_names(fs, ino, &buf, &names, &count), status = 0, header = 0;

	if (ret < 0) {
		free(buf);
		free(names);
		return fail(c, path, ret);
	}
	for (size_t i = 0; i < count; i++) {
		if (match && regexec(match, names[i], 0, NULL, 0))
			continue;
		if (!header++)
			printf("# file: %s\n", path);
		if (print_xattr(c, fs, ino, path, names[i], values ? 2 : 0))
			status = 1;
	}
	if (header)
		printf("\n");
	free(buf);
	free(names);
	return status;
}

static int cmd_getfattr(const struct command *c, int argc, char **argv)
{
	const char *name = NULL, *pattern = NULL;
	int values = 0, ch, status;
	regex_t re;
	uext4_fs *fs;
	uint64_t ino;

	while ((ch = next_opt(c, argc, argv, "n:dm:")) != -1) {
		if (ch == 'n')
			name = optarg;
		else if (ch == 'd')
			values = 1;
		else if (ch == 'm')
			pattern = optarg;
		else
			return usage_error(c, NULL);
	}
	if (argc - optind != 2)
		return usage_error(c, argc - optind > 2 ? "too many arguments" : "missing IMAGE or PATH");
	if (pattern && regcomp(&re, pattern, REG_EXTENDED | REG_NOSUB))
		return usage_error(c, "bad -m pattern");
	if (open_image(c, argv[optind], &fs)) {
		if (pattern)
			regfree(&re);
		return 1;
	}
	status = resolve(c, fs, argv[optind + 1], 1, &ino, NULL);
	if (!status && name) {
		status = print_xattr(c, fs, ino, argv[optind + 1], name, 1);
		if (!status)
			printf("\n");
	} else if (!status) {
		status = dump_xattrs(c, fs, ino, argv[optind + 1], pattern ? &re : NULL, values);
	}
	if (pattern)
		regfree(&re);
	return close_image(c, argv[optind], fs, status);
}

/* ------------------------------------------------------------------- mount */

/* Split a copy: strtok on argv itself would change what ps shows. */
static int parse_mount_opts(const struct command *c, struct uext4_fuse_opts *o,
			    const char *arg)
{
	char err[256], *save = NULL, *list = strdup(arg);
	int ret = 0;

	if (!list)
		return -1;
	for (char *opt = strtok_r(list, ",", &save); opt; opt = strtok_r(NULL, ",", &save)) {
		/* The library's, not the FUSE server's: the kernel's name too. */
		if (!strncmp(opt, "journal=", 8) || !strncmp(opt, "journal_path=", 13)) {
			set_journal_path(strchr(opt, '=') + 1);
			continue;
		}
		if (uext4_fuse_parse_opt(o, opt, err, sizeof(err)) < 0) {
			fprintf(stderr, "uext4 %s: -o %s: %s\n", c->name, opt, err);
			ret = -1;
			break;
		}
	}
	free(list);
	return ret;
}

static int check_mountpoint(const struct command *c, const char *mnt)
{
	struct stat st;

	if (stat(mnt, &st))
		return fail_host(c, mnt, errno);
	if (!S_ISDIR(st.st_mode))
		return fail_host(c, mnt, ENOTDIR);
	return 0;
}

static int cmd_mount(const struct command *c, int argc, char **argv)
{
	struct uext4_fuse_opts o;
	int foreground = 0, ch, ret, status, umount_ret, bad, created;
	const char *image, *mnt, *create;
	static char image_abs[PATH_MAX];
	char msg[1024] = "";
	uext4_fs *fs;

	uext4_fuse_opts_init(&o);
	create = take_long_opt(&argc, argv, "--create", &bad);
	if (bad)
		return usage_error(c, "--create needs a SIZE");
	while ((ch = next_opt(c, argc, argv, "fo:")) != -1) {
		if (ch == 'f')
			foreground = 1;
		else if (ch == 'o') {
			if (parse_mount_opts(c, &o, optarg))
				return usage_error(c, NULL);
		} else
			return usage_error(c, NULL);
	}
	if (argc - optind != 2)
		return usage_error(c, argc - optind > 2 ? "too many arguments" : "missing IMAGE or MOUNTPOINT");
	image = argv[optind];
	mnt = argv[optind + 1];
	if (check_mountpoint(c, mnt))
		return 1;
	if (create && (ret = cli_mkfs_create(c, image, create, &created)))
		return ret;
	/* The absolute path, as `uext4 umount` finds the image by it. */
	o.fsname = realpath(image, image_abs) ? image_abs : image;
	if (!foreground) {
		o.ready_fd = uext4_fuse_daemonize();   /* the parent exits inside */
		if (o.ready_fd < 0)
			return fail_host(c, "fork", errno);
	}
	commit_secs = o.commit_secs;
	max_open_files = o.max_open_files;
	inode_cache = o.inode_cache;
	mount_errors = o.errors;
	mount_discard = o.discard;
	if (o.read_only && lock_image(c, image, 1))
		return 1;
	if (o.read_only ? open_image(c, image, &fs) : open_image_rw(c, image, &fs))
		return 1;
	mount_status_begin(image, mnt); /* for uext4 umount (umount.c) */
	o.failure = msg;                /* lost write-backs, named */
	o.failure_len = sizeof(msg);
	ret = uext4_fuse_run(fs, mnt, &o);
	if (ret < 0 && !msg[0])
		snprintf(msg, sizeof(msg), "%s", *uext4_last_error() ? uext4_last_error() : strerror(-ret));
	/* close_image, with the final status written before the lock goes, so
	 * that whoever waits on the lock (uext4 umount) reads it. */
	umount_ret = uext4_umount(fs);
	if (umount_ret < 0 && !msg[0])
		snprintf(msg, sizeof(msg), "%s", *uext4_last_error() ? uext4_last_error() :
			 strerror((int)-umount_ret));
	status = ret < 0 || umount_ret < 0;
	mount_status_end(status, msg);
	unlock_image();
	if (umount_ret < 0)
		fail(c, image, umount_ret);
	return status;
}

/* ---------------------------------------------------------------- recover */

static int cmd_recover(const struct command *c, int argc, char **argv)
{
	struct uext4_recovery r;
	const char *image;
	int ret, quiet = 0, ch;

	while ((ch = next_opt(c, argc, argv, "q")) != -1) {
		if (ch == 'q')
			quiet = 1;
		else
			return usage_error(c, NULL);
	}
	if (argc - optind != 1)
		return usage_error(c, argc - optind ? "too many arguments" : "missing IMAGE");
	image = argv[optind];
	if (lock_image(c, image, 0))
		return 1;
	memset(&r, 0, sizeof(r));
	ret = uext4_recover_opts(image, &(struct uext4_opts){ .journal_path = journal_path }, &r);
	unlock_image();
	/* Skipped journal blocks or orphans: the rest was done; say what,
	 * then fail naming what was skipped. */
	if (ret < 0 && !r.bad_blocks && !r.orphans_failed)
		return fail(c, image, ret);
	if (!quiet) {
		printf("%s: journal: %u transactions replayed (%u blocks, %u revoked)%s\n", image,
		       r.transactions, r.blocks, r.revoked,
		       r.bad_checksum ? "; the log ended at a block with a bad checksum" : "");
		if (r.fast_commits)
			printf("%s: journal: %u fast commits replayed (%u tags)\n", image,
			       r.fast_commits, r.fast_commit_tags);
		if (r.bad_blocks)
			printf("%s: journal: %u logged blocks with a bad checksum not replayed "
			       "(first: journal block %u, transaction %u, home block %llu)\n", image,
			       r.bad_blocks, r.bad_journal_block, r.bad_tid,
			       (unsigned long long)r.bad_home_block);
		printf("%s: orphans: %u truncated, %u freed", image, r.orphans_truncated,
		       r.orphans_deleted);
		if (r.orphans_failed)
			printf(", %u left for e2fsck (first: inode %llu)", r.orphans_failed,
			       (unsigned long long)r.orphan_failed_ino);
		printf("\n");
	}
	return ret < 0 ? fail(c, image, ret) : 0;
}

/* -------------------------------------------------------- version and help */

static int cmd_version(const struct command *c, int argc, char **argv)
{
	if (argc > 1)
		return usage_error(c, "too many arguments");
	printf("uext4 %s\n", uext4_version());
	return 0;
}

static void print_overview(FILE *out);

static int cmd_help(const struct command *c, int argc, char **argv)
{
	const struct command *t;

	if (argc < 2) {
		print_overview(stdout);
		return 0;
	}
	if (argc > 2)
		return usage_error(c, "too many arguments");
	t = find_command(argv[1]);
	if (!t) {
		fprintf(stderr, "uext4 help: unknown command '%s'\n", argv[1]);
		print_overview(stderr);
		return 2;
	}
	print_manual(stdout, t);
	return 0;
}

/* ------------------------------------------------------------ the table */

#define EXIT_TEXT \
	"EXIT STATUS\n" \
	"    0  success\n" \
	"    1  an error (missing image or path, existing target, corrupt structure,\n" \
	"       I/O error, no space left, failed write-back)\n" \
	"    2  wrong usage\n"

static const struct command commands[] = {
	{ "recover", cmd_recover, "[-q] IMAGE", "replay the journal and clean up orphans",
	  "DESCRIPTION\n"
	  "    Does what a read-write mount does first after a crash, without mounting:\n"
	  "    replays the journal (scan, revoke and replay passes, as the kernel's\n"
	  "    jbd2; journals written by the kernel or by uext4), then finishes the\n"
	  "    truncates and frees the inodes left on the orphan lists (orphan file\n"
	  "    and s_last_orphan list), and unmounts cleanly: needs_recovery and\n"
	  "    orphan_present are cleared.  On a clean image it changes only the\n"
	  "    mount count and times.  The log ends at the first block that is not\n"
	  "    the next valid one, or at a descriptor, revoke or commit block with a\n"
	  "    bad checksum (said so): that transaction and the ones after it are\n"
	  "    not replayed (the kernel, after a bad descriptor or revoke block, also\n"
	  "    compares the commit times that follow; uext4 ends there).\n"
	  "    A logged block whose own checksum is bad (checksum v2/v3) is skipped,\n"
	  "    as the kernel and e2fsck do: the rest of its transaction and every\n"
	  "    later transaction are replayed, the file system is marked with errors\n"
	  "    (EXT4_ERROR_FS, so that e2fsck checks it), orphan cleanup is left to\n"
	  "    e2fsck, and recover exits 1 naming the journal block and the block it\n"
	  "    was for.  An orphan inode that cannot be truncated or freed (corrupt)\n"
	  "    is taken off its list, left for e2fsck and recorded as an error; the\n"
	  "    other orphans are processed, and recover exits 1 naming the inode.\n"
	  "    Read commands (ls, cat, ...) and read-only mounts of an image that\n"
	  "    needs recovery replay it in memory only and say so; read-write mounts\n"
	  "    and write commands recover it on disk first.\n"
	  "    A journal on an external device (mke2fs -J device=) is replayed from\n"
	  "    the device given with --journal PATH; without it recover fails naming\n"
	  "    the journal UUID it needs.\n"
	  "\nOPTIONS\n"
	  "    -q  print nothing on success\n"
	  "    --journal PATH  the external journal device (a journal_dev image or\n"
	  "                    block device whose UUID is the file system's journal\n"
	  "                    UUID)\n"
	  "\nOUTPUT\n"
	  "    IMAGE: journal: N transactions replayed (B blocks, R revoked)\n"
	  "    IMAGE: journal: N logged blocks with a bad checksum not replayed (first:\n"
	  "           journal block J, transaction T, home block H)   (only then)\n"
	  "    IMAGE: orphans: T truncated, F freed[, N left for e2fsck (first: inode I)]\n"
	  "\nEXAMPLES\n"
	  "    uext4 recover disk.img && e2fsck -fn disk.img\n"
	  "    uext4 recover --journal journal.img disk.img\n" },
	{ "info", cmd_info, "IMAGE", "show the superblock summary of an image",
	  "DESCRIPTION\n"
	  "    Prints what the superblock says about IMAGE, like dumpe2fs -h: volume\n"
	  "    name, UUID, features, state, block and inode counts, free counts, sizes,\n"
	  "    group geometry, flex group size, directory hash, times, mount counts,\n"
	  "    journal and orphan file inodes, and the errors recorded in it (by\n"
	  "    the kernel or uext4, until e2fsck clears them): their count, and the\n"
	  "    first and last error's time, function, inode and block.  The image is\n"
	  "    opened read-only.  The free counts are summed over the group\n"
	  "    descriptors.  When the image cannot be mounted (a feature uext4\n"
	  "    refuses, damaged group descriptors, ...) the superblock alone is\n"
	  "    shown, with its own free counts, then what could not be read and\n"
	  "    why, and the exit status is 1.\n"
	  "\nEXAMPLES\n"
	  "    uext4 info disk.img\n" },
	{ "ls", cmd_ls, "[-l] [-a] IMAGE [PATH]", "list a directory in an image",
	  "DESCRIPTION\n"
	  "    Lists the directory PATH (default /) of IMAGE, one name per line,\n"
	  "    sorted bytewise.  PATH is absolute in the image; \"a/b\" means \"/a/b\".\n"
	  "    If PATH is not a directory, only PATH itself is listed.\n"
	  "\nOPTIONS\n"
	  "    -l  long format like `ls -ln --time-style=long-iso`: mode, links, uid,\n"
	  "        gid, size (major, minor for devices), mtime, name, and -> target\n"
	  "        for symbolic links.  A symlink PATH is shown, not followed.\n"
	  "    -a  include the . and .. entries\n"
	  "\nEXAMPLES\n"
	  "    uext4 ls disk.img /etc\n"
	  "    uext4 ls -la disk.img /\n" },
	{ "stat", cmd_stat, "IMAGE PATH", "show an inode's metadata",
	  "DESCRIPTION\n"
	  "    Prints the inode PATH of IMAGE like stat(1): name (and symlink target),\n"
	  "    size, 512-byte blocks, type, inode number, links, device numbers for\n"
	  "    device nodes, access mode in octal and as a string, uid, gid, access,\n"
	  "    modify, change and birth times with nanoseconds, generation and ext4\n"
	  "    inode flags.  A final symbolic link is not followed.\n"
	  "\nEXAMPLES\n"
	  "    uext4 stat disk.img /etc/passwd\n" },
	{ "cat", cmd_cat, "IMAGE PATH...", "copy files out of an image to stdout",
	  "DESCRIPTION\n"
	  "    Writes the contents of each PATH of IMAGE to standard output, streaming\n"
	  "    1 MiB at a time (holes read as zeros).  Symbolic links are followed.\n"
	  "\nEXAMPLES\n"
	  "    uext4 cat disk.img /etc/hostname\n"
	  "    uext4 cat disk.img /big.iso > big.iso\n" },
	{ "getfattr", cmd_getfattr, "[-d] [-n NAME] [-m REGEX] IMAGE PATH",
	  "show extended attributes",
	  "DESCRIPTION\n"
	  "    Prints the extended attributes of PATH in IMAGE in getfattr(1)'s format:\n"
	  "    a \"# file: PATH\" line, then one attribute per line sorted by name, and\n"
	  "    a blank line.  Values that are mostly printable are shown quoted with\n"
	  "    octal escapes; others in base64 with a 0s prefix.  Unlike getfattr(1),\n"
	  "    every namespace (user, trusted, security, system) is shown by default.\n"
	  "\nOPTIONS\n"
	  "    -d        show values, not only names\n"
	  "    -n NAME   show only the attribute NAME (with its value)\n"
	  "    -m REGEX  show only names matching the extended regular expression\n"
	  "\nEXAMPLES\n"
	  "    uext4 getfattr -d disk.img /file\n"
	  "    uext4 getfattr -n user.comment disk.img /file\n" },
	{ "mkfs", cmd_mkfs, "[-q] [options] IMAGE [SIZE]", "make an ext2/3/4 file system, optionally filled",
	  "DESCRIPTION\n"
	  "    Writes a new file system into IMAGE (a file or a block device),\n"
	  "    directly, without mke2fs or the kernel.  Options have mke2fs's names\n"
	  "    and meanings; the defaults are those of Debian's mke2fs 1.47 for\n"
	  "    -t ext4 (features has_journal ext_attr resize_inode dir_index\n"
	  "    filetype extent 64bit flex_bg sparse_super large_file huge_file\n"
	  "    dir_nlink extra_isize metadata_csum; 4 KiB blocks and an inode per\n"
	  "    16 KiB, but 1 KiB blocks and an inode per 4 KiB under 512 MiB, per\n"
	  "    8 KiB under 3 MiB, per 32 KiB from 4 TiB and per 64 KiB from 16 TiB),\n"
	  "    plus orphan_file and metadata_csum_seed.  Inode tables are\n"
	  "    initialised lazily (the kernel and e2fsck know which inodes are in\n"
	  "    use), so even a 16 TiB sparse image is made in well under a second.\n"
	  "    SIZE is a number followed by K, M, G or T (powers of 1024); a bare\n"
	  "    number is KiB, or blocks with -b, as mke2fs reads it.  Without SIZE\n"
	  "    the size of the existing file or device (after -E offset=) is used;\n"
	  "    a missing IMAGE is created, sparse, with SIZE.  On a regular file\n"
	  "    the file system's range is punched first (it reads as zeros), as\n"
	  "    mke2fs discards it.  IMAGE is refused when it already holds a file\n"
	  "    system (ext2/3/4, XFS, btrfs, FAT, F2FS, squashfs, ISO 9660, swap,\n"
	  "    LUKS) or a partition table, naming what was found, unless -F.\n"
	  "\n"
	  "    With -d SOURCE the new file system is then filled from SOURCE: a\n"
	  "    directory, a tarball (.tar, .tar.gz, .tar.xz, .tar.zst, ... through\n"
	  "    libarchive) or - for a tar stream on standard input.  Regular files\n"
	  "    (sparse where the source is), directories, symlinks, hard links,\n"
	  "    device nodes, fifos and sockets are copied with modes, owners,\n"
	  "    nanosecond times, xattrs, POSIX ACLs and inode flags (with -O\n"
	  "    project also project ids and +P, as lsattr -p shows them; with\n"
	  "    casefold also directories' +F), by -j worker threads.  On a\n"
	  "    terminal a progress bar shows files, bytes, rate and time left (not\n"
	  "    with -q).  If the fill fails, the message names the path and what\n"
	  "    ran out, and the image is removed when mkfs created it, else marked\n"
	  "    with an error so that it never passes as complete.\n"
	  "\nTARBALLS\n"
	  "    A leading / is stripped from member names (as GNU tar does, with one\n"
	  "    warning).  A member with a .. component stops the fill with an\n"
	  "    error naming it.  A later member with the same path replaces the\n"
	  "    earlier one (a directory over a directory only updates its\n"
	  "    attributes), as tar x does.  A hard link to a member not seen\n"
	  "    earlier stops the fill with an error naming both paths.  Three more\n"
	  "    members stop the fill, with an error naming them: a path through a\n"
	  "    symlink (the fill never follows one), a hard link to a directory,\n"
	  "    and anything replacing a directory that is not empty.\n"
	  "\nREPRODUCIBLE IMAGES\n"
	  "    Two runs write the same bytes when they get the same options and\n"
	  "    source and: SOURCE_DATE_EPOCH is set (every time mkfs writes, in\n"
	  "    the superblock, inodes and journal, is that value, and times in the\n"
	  "    source later than it are clamped to it, as mke2fs does), the UUID is\n"
	  "    fixed (-U UUID) and the directory hash seed too (-E hash_seed=UUID).\n"
	  "    The number of threads (-j) does not matter: inode numbers and block\n"
	  "    placement do not depend on thread timing.  Without those, the UUID\n"
	  "    and hash seed are random and the times are the current time, as\n"
	  "    with mke2fs.\n"
	  "\nOPTIONS\n"
	  "    -q            print nothing on success (no progress bar either)\n"
	  "    -t TYPE       ext2, ext3 or ext4 (default): the feature set\n"
	  "    -b SIZE       block size: 1024 to 65536, a power of 2 (over 4096:\n"
	  "                  mke2fs warns; a kernel with smaller pages cannot mount it)\n"
	  "    -C SIZE       cluster size in bytes with -O bigalloc: a power of 2\n"
	  "                  from the block size to 2^16 blocks (default 16 blocks);\n"
	  "                  such images are read-only for uext4 for now (mkfs -d\n"
	  "                  and writes are refused), the kernel writes them\n"
	  "    -N COUNT      number of inodes (rounded up to fill inode-table blocks)\n"
	  "    -i BYTES      bytes per inode (1024 to 67108864)\n"
	  "    -I SIZE       inode size: a power of 2 from 128 to the block size\n"
	  "                  (default 256)\n"
	  "    -G COUNT      groups per flex group, a power of 2 (default 16)\n"
	  "    -L LABEL      volume label, at most 16 bytes\n"
	  "    -U UUID       the UUID, or clear (all zero), random (default), time\n"
	  "    -m PERCENT    blocks reserved for root (default 5)\n"
	  "    -J OPTS       journal options, comma separated:\n"
	  "                  size=MIB             the journal's log in MiB (default by\n"
	  "                                       size, as mke2fs: 4 MiB to 1 GiB)\n"
	  "                  fast_commit_size=KIB with -O fast_commit: the fast-commit\n"
	  "                                       area after the log, in KiB (default\n"
	  "                                       1/64 of the default journal)\n"
	  "                  device=PATH          the journal on a device made by\n"
	  "                                       -O journal_dev (here or by mke2fs):\n"
	  "                                       no journal inode; its UUID goes into\n"
	  "                                       the superblock, its block size is the\n"
	  "                                       default, and the new file system is\n"
	  "                                       added to its users.  Mount with\n"
	  "                                       -o journal=PATH\n"
	  "    -O LIST       features to add, or remove with ^, comma separated:\n"
	  "                  has_journal ext_attr resize_inode dir_index sparse_super2\n"
	  "                  fast_commit stable_inodes orphan_file filetype meta_bg\n"
	  "                  extent 64bit mmp flex_bg ea_inode metadata_csum_seed\n"
	  "                  large_dir casefold\n"
	  "                  sparse_super large_file huge_file uninit_bg dir_nlink\n"
	  "                  extra_isize quota bigalloc metadata_csum project (none\n"
	  "                  clears all); quota makes user and group quota files\n"
	  "                  (and a project one with project), as mke2fs; project\n"
	  "                  needs inodes over 128 bytes; meta_bg needs\n"
	  "                  ^resize_inode, as with mke2fs\n"
	  "                  journal_dev makes an external journal device instead\n"
	  "                  of a file system (all of SIZE is the log; only\n"
	  "                  metadata_csum is kept, as mke2fs)\n"
	  "    -E OPTS       extended options, comma separated:\n"
	  "                  hash_seed=UUID       the directory hash seed\n"
	  "                  encoding=utf8|utf8-12.1  turn casefold on: directories\n"
	  "                                       with +F (chattr) find names in any\n"
	  "                                       case and normalisation\n"
	  "                  encoding_flags=strict  casefolded directories refuse\n"
	  "                                       names that are not valid UTF-8\n"
	  "                  root_owner[=UID:GID] owner of the root directory (no\n"
	  "                                       value: the calling user); also\n"
	  "                                       what -d gives the root\n"
	  "                  lazy_itable_init=0|1 0: write every inode table now\n"
	  "                                       (only matters on block devices:\n"
	  "                                       on files they read as zeros)\n"
	  "                  offset=BYTES         start the file system that far into\n"
	  "                                       IMAGE (a partition of a disk\n"
	  "                                       image); bytes before it are not\n"
	  "                                       touched\n"
	  "                  orphan_file_size=N   size of the orphan file: N blocks,\n"
	  "                                       or bytes with K or M (at most\n"
	  "                                       8 MiB, the kernel's limit)\n"
	  "                  num_backup_sb=0|1|2  with -O sparse_super2: backup\n"
	  "                                       superblocks in group 1 and the\n"
	  "                                       last group (default 2)\n"
	  "                  mmp_update_interval=N\n"
	  "                                       -O mmp: seconds between the\n"
	  "                                       holder's MMP updates (default 5,\n"
	  "                                       at most 300)\n"
	  "                  quotatype=usrquota:grpquota:prjquota\n"
	  "                                       with -O quota, the quota files\n"
	  "                                       to make (prjquota turns project\n"
	  "                                       on), as mke2fs\n"
	  "    -F            overwrite an existing file system\n"
	  "    -n            dry run: print the geometry, write nothing\n"
	  "    -d SOURCE     fill from a directory, a tarball or - (stdin)\n"
	  "    -j N          fill with N threads (default: the number of CPUs)\n"
	  "    --root-owner=UID:GID  owner of the root directory after -d (default:\n"
	  "                  the source's top directory's)\n"
	  "    --no-copy-xattrs  copy no xattrs (nor ACLs) with -d\n"
	  "\nENVIRONMENT\n"
	  "    SOURCE_DATE_EPOCH  seconds since 1970: the time of everything mkfs\n"
	  "                       writes, and the clamp for -d (an integer, else exit 2)\n"
	  "\nEXAMPLES\n"
	  "    uext4 mkfs disk.img 4G\n"
	  "    uext4 mkfs -t ext2 -b 1024 floppy.img 1440K\n"
	  "    uext4 mkfs -F -L root -d ./rootfs disk.img 2G\n"
	  "    SOURCE_DATE_EPOCH=0 uext4 mkfs -U 0f6e2ac8-7f1e-4d3b-9a52-1c2d3e4f5a6b \\\n"
	  "        -E hash_seed=6b5a4f3e-2d1c-4259-a3d4-e5f6a7b8c9d0 -d rootfs.tar.zst disk.img 1G\n"
	  "    uext4 mkfs -E offset=1048576 disk.img 1G   (a partition at 1 MiB)\n" },
	{ "mount", cmd_mount, "[-f] [-o OPTION[,OPTION...]] [--create SIZE] IMAGE MOUNTPOINT",
	  "mount an image with FUSE",
	  "DESCRIPTION\n"
	  "    Mounts IMAGE on MOUNTPOINT through FUSE.  Without -f the command\n"
	  "    returns once the mount is ready and a background process serves it;\n"
	  "    if mounting fails it prints why and exits 1.  Unmount with\n"
	  "    `uext4 umount MOUNTPOINT`, which returns once the server has\n"
	  "    written everything back and closed the image, and fails with the\n"
	  "    server's message if writing back failed.  (fusermount3 -u, or\n"
	  "    umount as root, return before that: the image may still need\n"
	  "    recovery right after them.)  Non-root users mount\n"
	  "    through fusermount3.  The kernel checks permissions\n"
	  "    (default_permissions) on mounts by non-root users and on shared\n"
	  "    ones (-o allow_other); a private mount by root, whom no check stops,\n"
	  "    skips them and saves a round trip per create.  New files belong to\n"
	  "    the calling user.\n"
	  "    A read-write server holds an flock(2) on IMAGE until it has written\n"
	  "    everything back, so a second read-write mount or a write command on\n"
	  "    a mounted image fails, and `flock IMAGE true` waits for the server to\n"
	  "    finish after an unmount.  A read-only mount holds a shared one: as\n"
	  "    with the kernel (EBUSY), a read-only mount is refused while a writer\n"
	  "    holds IMAGE, and a writer while a read-only mount does, naming the\n"
	  "    holder.  A mount or write command that finds IMAGE held by a server\n"
	  "    whose mount is gone (plain umount returns before the write-back)\n"
	  "    waits for it, up to 30 s.  An image the kernel has mounted (through\n"
	  "    a loop device, or the block device itself) is never written: a\n"
	  "    read-write mount and every write command are refused naming the\n"
	  "    mount point; a read-only mount and read commands warn that what\n"
	  "    they show may be stale.  Do not change the image any other way\n"
	  "    while it is mounted: the server assumes it is the only writer.\n"
	  "    lsattr/chattr work (the flags ext4 lets users change; immutable and\n"
	  "    append-only are enforced), and so does renameat2's RENAME_WHITEOUT\n"
	  "    (an overlayfs upper layer).  fallocate(2)'s FALLOC_FL_COLLAPSE_RANGE\n"
	  "    and FALLOC_FL_INSERT_RANGE fail with EOPNOTSUPP on the mount: the\n"
	  "    kernel's FUSE refuses them before they reach the server (it passes\n"
	  "    on only KEEP_SIZE, PUNCH_HOLE and ZERO_RANGE).  The library\n"
	  "    (uext4_fallocate) does both.\n"
	  "    fs-verity: fsverity enable and fsverity measure work on the mount\n"
	  "    (the kernel's FUSE passes FS_IOC_ENABLE_VERITY with its salt and\n"
	  "    signature, and FS_IOC_MEASURE_VERITY, since Linux 6.9); reads of a\n"
	  "    verity file are checked against its Merkle tree (EIO on a\n"
	  "    mismatch) and it cannot be opened for writing (EPERM).\n"
	  "    FS_IOC_READ_VERITY_METADATA (fsverity dump_metadata) fails with\n"
	  "    EOPNOTSUPP: FUSE does not carry the buffer it points to; use\n"
	  "    uext4 verity dump on the image instead.\n"
	  "\nOPTIONS\n"
	  "    -f              stay in the foreground (Ctrl-C unmounts)\n"
	  "    --create SIZE   if IMAGE does not exist, make it first: a new ext4\n"
	  "                    of SIZE (K, M, G or T) with uext4 mkfs's defaults\n"
	  "                    (see uext4 help mkfs); an existing IMAGE is mounted\n"
	  "                    as it is.  make run mounts uext4.img this way\n"
	  "    -o ro           read-only (the kernel mount is read-only too)\n"
	  "    -o journal=PATH, -o journal_path=PATH\n"
	  "                    the external journal device of a file system made\n"
	  "                    with -J device= (checked against its journal UUID,\n"
	  "                    replayed at mount, written by every commit).  Without\n"
	  "                    it such a file system is refused naming the UUID,\n"
	  "                    unless -o ro and it does not need recovery\n"
	  "    -o rw           read-write (the default)\n"
	  "    -o allow_other  let other users access the mount (non-root needs\n"
	  "                    user_allow_other in /etc/fuse.conf)\n"
	  "    -o loop=auto|st|pool|mt|uring\n"
	  "                    request loop: auto (default) is uring where the\n"
	  "                    kernel has it on, else pool; pool is a fixed set\n"
	  "                    of threads reading /dev/fuse, the fastest classic\n"
	  "                    loop measured here; st is libfuse's single thread;\n"
	  "                    mt is libfuse's on-demand thread pool; uring is\n"
	  "                    FUSE over io_uring, a thread per CPU (kernel 6.14+\n"
	  "                    with /sys/module/fuse/parameters/enable_uring\n"
	  "                    on; otherwise it says why and uses pool).  The\n"
	  "                    environment variable UEXT4_FUSE_LOOP sets the\n"
	  "                    default\n"
	  "    -o discard      discard freed blocks after each commit (hole punch,\n"
	  "                    BLKDISCARD, or NBD trim)\n"
	  "    -o commit=N     commit the journal every N seconds (default 5); fsync\n"
	  "                    and unmount commit at once (sync does not: see\n"
	  "                    DURABILITY)\n"
	  "    -o max_open_files=N\n"
	  "                    at most N files open at once (default 65536); an\n"
	  "                    open past it fails with EMFILE\n"
	  "    -o inode_cache=N\n"
	  "                    keep at most N idle inodes cached (default 65536);\n"
	  "                    inodes in use (open files) are kept in addition\n"
	  "    -o errors=continue|remount-ro|panic\n"
	  "                    when a write meets corruption (the error is recorded\n"
	  "                    in the superblock first, as the kernel does): go on;\n"
	  "                    refuse every later write with EROFS, still serving\n"
	  "                    reads; or exit at once, writing nothing further.\n"
	  "                    Default: what the superblock says (tune2fs -e)\n"
	  "    -o threads=N    threads for pool (default 4) or the mt maximum\n"
	  "    -o max_idle=N   mt: idle threads kept (fewer means thread churn)\n"
	  "    -o clone_fd     mt: one /dev/fuse descriptor per thread\n"
	  "    -o timeout=S    kernel caching of names and attributes, seconds\n"
	  "                    (default 1000000: every change passes through the\n"
	  "                    kernel)\n"
	  "    -o writeback    the kernel's writeback cache (the default on\n"
	  "                    read-write mounts): small writes are gathered and\n"
	  "                    written back on close, fsync, or by the kernel;\n"
	  "                    errors show at fsync or close.  -o nowriteback (or\n"
	  "                    writeback=0): every write(2) goes to the server.\n"
	  "                    Near full (free space below twice what the kernel\n"
	  "                    may hold dirty for the mount, plus 24 MiB) files\n"
	  "                    opened for writing bypass the cache, so a write(2)\n"
	  "                    that does not fit fails with ENOSPC, as on the\n"
	  "                    kernel's ext4 (such files: no shared writable\n"
	  "                    mmap, and the mount shows their mtime from before\n"
	  "                    those writes until remounted); see DURABILITY\n"
	  "    -o dirty_limit=MIB\n"
	  "                    (root) the most the kernel may hold dirty for the\n"
	  "                    mount (its bdi's max_bytes; by default 16, or the\n"
	  "                    kernel's 1% of its dirty threshold if smaller or\n"
	  "                    not root): smaller makes the cache usable closer\n"
	  "                    to full\n"
	  "    -o debug        trace FUSE requests on stderr (use with -f)\n"
	  "    -o stats        count lock, block, journal and request statistics\n"
	  "                    from the start (see uext4 help stats; off by\n"
	  "                    default, `uext4 stats --on` starts them later)\n"
	  "    Other options are passed to the kernel (e.g. -o max_read=131072).\n"
	  "\nMULTI-MOUNT PROTECTION\n"
	  "    On an image made with -O mmp (shared storage: an NBD or RBD export\n"
	  "    other hosts reach), a read-write mount and every write command\n"
	  "    claim the MMP block as the kernel does: one another node holds is\n"
	  "    refused (\"in use by node NAME, device DEV\"); one left held by a\n"
	  "    node that died is taken over after a wait of twice the check\n"
	  "    interval and a second (11 s or more; said on stderr).  A thread\n"
	  "    updates the block every s_mmp_update_interval seconds and the\n"
	  "    unmount releases it.  Read-only mounts leave it alone.\n"
	  "\nDURABILITY\n"
	  "    fsync(2) and fdatasync(2) commit the file's data and metadata to\n"
	  "    the journal before they return 0 (and fail, once, if a write-back\n"
	  "    of the file failed).  Other changes are committed within -o commit\n"
	  "    seconds of reaching the server; with the writeback cache the\n"
	  "    kernel may hold written data up to 30 s before it sends it.\n"
	  "    `uext4 umount` returns 0 once everything is on the image, 1 naming\n"
	  "    the files whose write-back failed.  sync(1) and sync -f do not\n"
	  "    reach the server (the kernel sends FUSE servers no SYNCFS): they\n"
	  "    commit nothing.  On a full disk a write(2) that does not fit fails\n"
	  "    with ENOSPC; write-backs that fail anyway (mmap, a single write(2)\n"
	  "    over 8 MiB begun before the switch) are logged, counted by `uext4\n"
	  "    stats` and named by `uext4 umount`.  The largest file size is\n"
	  "    ext4's (16 TiB less a block, with 4 KiB blocks); a file opened\n"
	  "    closer to it than twice the dirty limit plus 16 MiB bypasses the\n"
	  "    cache, so a write(2) past it fails with EFBIG, as on the\n"
	  "    kernel's ext4.  The kernel's FUSE has no largest size: a write(2)\n"
	  "    past it into a smaller file is taken by the cache, and its fsync\n"
	  "    fails with EFBIG.\n"
	  "\nMOUNT(8) AND FSTAB\n"
	  "    As root, `mount -t fuse.uext4 [-o OPTIONS] IMAGE DIR` and /etc/fstab\n"
	  "    lines of type fuse.uext4 work through /sbin/mount.fuse.uext4\n"
	  "    (make install PREFIX=/usr puts it there), which runs\n"
	  "    `uext4 mount -o OPTIONS IMAGE DIR`.  It drops the options meant for\n"
	  "    mount(8) and systemd (defaults, auto, noauto, user, nouser, users,\n"
	  "    nofail, _netdev, x-*, comment=*, uhelper=*), takes -r and -w as ro\n"
	  "    and rw, and passes every other option on (ro, allow_other,\n"
	  "    default_permissions, nosuid, commit=N, ...).  As mount.fuse3 does,\n"
	  "    it adds suid and dev unless nosuid or nodev is given (mount(8)\n"
	  "    passes a helper neither, and FUSE mounts nosuid,nodev without\n"
	  "    them): set-user-ID programs and device nodes work as on the\n"
	  "    kernel's ext4.  `umount DIR` waits\n"
	  "    for the write-back, as uext4 umount does, only when mount(8) keeps a\n"
	  "    utab entry for the mount (an x-* option, or -o uhelper=uext4): it\n"
	  "    then runs umount.fuse.uext4 or umount.uext4, which run\n"
	  "    `uext4 umount DIR`.  Otherwise `flock IMAGE true` waits for it.\n"
	  "    A second mount of an image a uext4 server already serves, in the\n"
	  "    same mode (read-only or read-write), is a bind mount of the first,\n"
	  "    as the kernel shares one superblock between two mounts of a\n"
	  "    device (its nosuid, noexec, ... apply; other options are\n"
	  "    ignored); in the other mode it is refused, as on the kernel.\n"
	  "\nSTATX ATTRIBUTES\n"
	  "    statx(2) on the mount reports no attributes (append-only,\n"
	  "    immutable, nodump in stx_attributes; lsattr shows them) and no\n"
	  "    birth time, where the kernel's ext4 does (fstests generic/424).\n"
	  "    That needs the FUSE_STATX request (kernel 6.6, FUSE protocol\n"
	  "    7.39), which libfuse 3.14 does not pass on: a libfuse with a\n"
	  "    statx operation (libfuse pull request 1026, after 3.16), or the\n"
	  "    request loop answering FUSE_STATX itself, with stx_attributes\n"
	  "    and stx_attributes_mask from the inode's flags and stx_btime from\n"
	  "    i_crtime.  The kernel asks only when the caller wants more than\n"
	  "    the basic fields.\n"
	  "\nEXAMPLES\n"
	  "    uext4 mount disk.img /mnt && cp -a /etc /mnt && uext4 umount /mnt &&\n"
	  "        cp disk.img backup.img\n"
	  "    uext4 mount -o ro disk.img /mnt\n"
	  "    uext4 mount -f -o loop=st,debug disk.img /mnt\n"
	  "    mount -t fuse.uext4 -o uhelper=uext4 disk.img /mnt    (as root)\n"
	  "    /srv/disk.img /mnt/disk fuse.uext4 noauto,x-systemd.automount,ro 0 0\n"
	  "                                     (an /etc/fstab line)\n" },
	{ "umount", cmd_umount, "MOUNTPOINT", "unmount a uext4 mount and wait for its write-back",
	  "DESCRIPTION\n"
	  "    Unmounts the uext4 FUSE mount on MOUNTPOINT (umount2 as root,\n"
	  "    fusermount3 -u otherwise) and returns when its server has written\n"
	  "    everything back and closed the image, so the image is consistent\n"
	  "    (e2fsck-clean, no journal to recover) as soon as it returns.  Exits\n"
	  "    0 then; 1 with a message if MOUNTPOINT is not a uext4 mount, the\n"
	  "    unmount fails (busy), writing back failed (the server's message),\n"
	  "    or the server was gone before writing back (killed: the image\n"
	  "    needs recovery, which the next mount or `uext4 recover` does).\n"
	  "    The server leaves its status in a file of its user's, keyed by\n"
	  "    the image's device and inode and the mount point: /run/uext4 for\n"
	  "    root, else /run/user/UID/uext4, else /tmp/uext4-UID.\n"
	  "    A mount of a file system that is mounted elsewhere too (a bind\n"
	  "    mount, or a second `mount -t fuse.uext4` of the same image, which\n"
	  "    mount.fuse.uext4 makes a bind of the first, as the kernel shares\n"
	  "    one superblock) is only unmounted, at once: the server goes on\n"
	  "    serving the others, and the last one's umount waits for it.\n"
	  "\nEXAMPLES\n"
	  "    uext4 umount /mnt && cp disk.img backup.img\n" },
	{ "stats", cmd_stats, "[--json] [--reset] [--on|--off] MOUNTPOINT",
	  "show a running mount's lock, block, journal and request statistics",
	  "DESCRIPTION\n"
	  "    Prints the statistics of the uext4 mount on MOUNTPOINT (its top\n"
	  "    directory).  They are counted only while on: mount with -o stats,\n"
	  "    or turn them on with --on.  On a mount where they are off it says\n"
	  "    so and exits 1.  Off, they cost one relaxed memory load per lock\n"
	  "    taken; on, a clock reading around every lock that was not free and\n"
	  "    around every FUSE request.\n"
	  "    Sections (times since the mount or the last --reset):\n"
	  "      locks    per lock class: acquisitions, contentions (the lock was\n"
	  "               taken: the thread waited), total, average and longest\n"
	  "               wait.  Classes: rename, inode (non-directories),\n"
	  "               directory, commit, ea_inode, icache_shard, group,\n"
	  "               orphan_list, orphan_file (entries taken by CAS: a\n"
	  "               lost CAS contends), xattr_index, buffer, bcache_shard,\n"
	  "               trans_wait, revoke_list, inode_raw, leaf, other.\n"
	  "               Counted for the whole server process\n"
	  "      blocks   blocks read from and written to the image, by kind:\n"
	  "               superblock, group_desc, bitmap, inode_table,\n"
	  "               directory, extent, xattr, data, journal, other\n"
	  "               (counted even while statistics are off); buffer\n"
	  "               cache hits, misses and evictions\n"
	  "      journal  commits, metadata blocks per commit (total, average,\n"
	  "               most), commit latency, how long handles were held\n"
	  "               back by commits and how many waited, for how long\n"
	  "      fuse     requests per opcode, with the server's latency (from\n"
	  "               reading the request to writing its reply; FORGET and\n"
	  "               BATCH_FORGET get no reply)\n"
	  "    --json prints one JSON object instead (times in ns): \"enabled\",\n"
	  "    \"elapsed_ns\", \"locks\", \"blocks\", \"cache\", \"journal\", \"fuse\".\n"
	  "    The server answers reads of the virtual xattr user.uext4.stats of\n"
	  "    the mount's root (suffixes .json, .on, .off, .reset; getfattr -n\n"
	  "    user.uext4.stats MOUNTPOINT works too).  Those names are reserved\n"
	  "    there: they shadow a real xattr of the same name on the root\n"
	  "    directory (uext4 getfattr IMAGE / still shows it), and listxattr\n"
	  "    does not list them.  Works on read-only mounts.  Whoever may read\n"
	  "    the root directory's xattrs may also switch and reset them.\n"
	  "\nOPTIONS\n"
	  "    --json    JSON, for machines\n"
	  "    --reset   zero every counter after printing them\n"
	  "    --on      start counting (then print)\n"
	  "    --off     stop counting (then print what was counted)\n"
	  "\nEXAMPLES\n"
	  "    uext4 mount -o stats disk.img /mnt; tar xf src.tar -C /mnt; uext4 stats /mnt\n"
	  "    uext4 stats --on --reset /mnt >/dev/null; make -C /mnt/src; uext4 stats /mnt\n"
	  "    uext4 stats --json /mnt | python3 -m json.tool\n" },
	{ "put", cmd_put, "[-p|-P] [-v] IMAGE SRC DST", "copy a file or tree from the host into an image",
	  "DESCRIPTION\n"
	  "    Copies the host file SRC into IMAGE as DST; a directory SRC is copied\n"
	  "    with everything below it.  If DST is an existing directory the copy is\n"
	  "    DST/NAME, NAME being SRC's last component (SRC \".\" or \"/\" merges its\n"
	  "    contents into DST); otherwise DST's parent must exist.  Existing\n"
	  "    directories are merged into, other existing files replaced.\n"
	  "    Every file type is copied: regular files (holes stay holes),\n"
	  "    directories, symbolic links, character and block devices, fifos and\n"
	  "    sockets; names that are hard links to one inode inside the tree stay\n"
	  "    hard links.  Permission bits (with setuid, setgid, sticky) are always\n"
	  "    kept; by default also owners, access and modification times with\n"
	  "    nanoseconds, and extended attributes, POSIX ACLs included.  The\n"
	  "    change time is the time of the copy, as with every copy.\n"
	  "    A source file that cannot be read is reported and skipped; running\n"
	  "    out of space or an image error stops the copy.  Progress (files and\n"
	  "    bytes) is shown on stderr when it is a terminal, or with -v.\n"
	  "\nOPTIONS\n"
	  "    -p  preserve owners, times and extended attributes (the default)\n"
	  "    -P  do not: new files belong to the invoking user, times are now\n"
	  "    -v  report progress on stderr even when it is not a terminal\n"
	  "\nEXAMPLES\n"
	  "    uext4 put disk.img /etc /          # the tree as /etc\n"
	  "    uext4 put disk.img ./rootfs/. /    # rootfs's contents into /\n"
	  "    uext4 put disk.img notes.txt /home/me/notes.txt\n" },
	{ "get", cmd_get, "[-p|-P] [-v] IMAGE SRC DST", "copy a file or tree out of an image",
	  "DESCRIPTION\n"
	  "    Copies SRC of IMAGE to the host path DST, recursively for a\n"
	  "    directory, like put in the other direction: every file type, hard\n"
	  "    links within the tree, holes (all-zero 1 MiB pieces are left as holes),\n"
	  "    permission bits, and by default owners (as root), times and extended\n"
	  "    attributes.  If DST is an existing directory the copy is DST/NAME.\n"
	  "    A final symbolic link SRC is copied as a link.  The image is opened\n"
	  "    read-only.\n"
	  "    A file that cannot be read, or an attribute the host refuses (user.*\n"
	  "    on a symlink, a value or name over the host's limits), is reported\n"
	  "    on stderr with its path (and the attribute's name) and skipped; the\n"
	  "    rest is copied and the exit status is 1.  A corrupt image, a full\n"
	  "    or failing host file system stops the copy.\n"
	  "\nOPTIONS\n"
	  "    -p  preserve owners, times and extended attributes (the default)\n"
	  "    -P  do not\n"
	  "    -v  report progress on stderr even when it is not a terminal\n"
	  "\nEXAMPLES\n"
	  "    uext4 get disk.img /etc/fstab fstab\n"
	  "    uext4 get disk.img / /tmp/unpacked\n" },
	{ "mkdir", cmd_mkdir, "[-p] [-m MODE] IMAGE PATH...", "make directories in an image",
	  "DESCRIPTION\n"
	  "    Makes each directory PATH in IMAGE.  Its parent must exist and PATH\n"
	  "    must not, unless -p is given.\n"
	  "\nOPTIONS\n"
	  "    -p       make missing parents too (with at least u+wx); an existing\n"
	  "             directory is no error\n"
	  "    -m MODE  permission bits in octal (default 755; no umask applies)\n"
	  "\nEXAMPLES\n"
	  "    uext4 mkdir disk.img /srv\n"
	  "    uext4 mkdir -p -m 700 disk.img /home/me/.ssh\n" },
	{ "rm", cmd_rm, "[-r] [-f] IMAGE PATH...", "remove files or trees from an image",
	  "DESCRIPTION\n"
	  "    Removes each PATH of IMAGE.  A symbolic link is removed, not what it\n"
	  "    points to.  Directories need -r.  The root cannot be removed.\n"
	  "\nOPTIONS\n"
	  "    -r, -R  remove directories and everything below them\n"
	  "    -f      a PATH that does not exist is no error\n"
	  "\nEXAMPLES\n"
	  "    uext4 rm disk.img /tmp/junk\n"
	  "    uext4 rm -rf disk.img /var/cache/apt\n" },
	{ "mv", cmd_mv, "[-n|-x] IMAGE SRC DST", "rename or move a file in an image",
	  "DESCRIPTION\n"
	  "    Renames SRC of IMAGE to DST, atomically.  If DST is an existing\n"
	  "    directory, SRC moves into it under its own name; otherwise an existing\n"
	  "    DST is replaced (a directory only by a directory, and only if empty).\n"
	  "\nOPTIONS\n"
	  "    -n  fail if DST exists (RENAME_NOREPLACE)\n"
	  "    -x  exchange SRC and DST, which must both exist (RENAME_EXCHANGE)\n"
	  "\nEXAMPLES\n"
	  "    uext4 mv disk.img /etc/motd /etc/motd.old\n"
	  "    uext4 mv -x disk.img /boot/vmlinuz /boot/vmlinuz.new\n" },
	{ "ln", cmd_ln, "[-s] IMAGE TARGET LINKNAME", "make a hard or symbolic link in an image",
	  "DESCRIPTION\n"
	  "    Makes LINKNAME in IMAGE a new name for the file TARGET (a hard link;\n"
	  "    TARGET must exist and not be a directory, and a symbolic link TARGET\n"
	  "    is linked itself) or, with -s, a symbolic link whose text is TARGET\n"
	  "    (which need not exist).  If LINKNAME is an existing directory the\n"
	  "    link is made inside it under TARGET's last component.\n"
	  "\nOPTIONS\n"
	  "    -s  make a symbolic link\n"
	  "\nEXAMPLES\n"
	  "    uext4 ln disk.img /bin/busybox /bin/sh\n"
	  "    uext4 ln -s disk.img ../lib/libfoo.so.1 /usr/lib/libfoo.so\n" },
	{ "lsattr", cmd_lsattr, "[-p] IMAGE PATH...", "show inode flags in an image",
	  "DESCRIPTION\n"
	  "    Prints the inode flags of each PATH of IMAGE as lsattr -d does: one\n"
	  "    column per flag (s u S D i a d A c E j I t T e C x F N P V m), a\n"
	  "    letter where it is set.  Symbolic links are followed.\n"
	  "\nOPTIONS\n"
	  "    -p    the project id first, as lsattr -p (0 on a file system\n"
	  "          without the project feature)\n"
	  "\nEXAMPLES\n"
	  "    uext4 lsattr disk.img /etc/passwd /var/log\n"
	  "    uext4 lsattr -p disk.img /srv/www\n" },
	{ "chattr", cmd_chattr, "IMAGE [+-=]FLAGS... [-p PROJECT] PATH...",
	  "change inode flags and project ids in an image",
	  "DESCRIPTION\n"
	  "    Changes the inode flags of each PATH of IMAGE as chattr does: +FLAGS\n"
	  "    sets, -FLAGS clears, =FLAGS sets exactly those (letters as lsattr\n"
	  "    shows them).  The kernel's ext4 rules hold: only the owner or root,\n"
	  "    only root changes i (immutable) and a (append-only); flags that do\n"
	  "    not fit the file's type fail; flags nobody sets (e, I, N, ...) are\n"
	  "    kept.  j (data journaling) and -e are refused: uext4 does neither.\n"
	  "    An immutable file cannot be changed, renamed or removed, an\n"
	  "    append-only one only grows, by any command or the mount.\n"
	  "    F (casefold) goes on or off an empty directory of a file system\n"
	  "    made with casefold (mkfs -O casefold): names in it are then found\n"
	  "    in any case and Unicode normalisation, as the kernel finds them;\n"
	  "    its new subdirectories inherit it.\n"
	  "    -p PROJECT sets the project id, as chattr -p: on a file system made\n"
	  "    with -O project (else EOPNOTSUPP, as the kernel), by the owner or\n"
	  "    root.  P (project inheritance) on a directory gives what is made in\n"
	  "    it the directory's project id (and P to subdirectories); a link or\n"
	  "    rename into it of a file of another project fails with EXDEV, as in\n"
	  "    the kernel (mv copies instead).\n"
	  "\nEXAMPLES\n"
	  "    uext4 chattr disk.img +i /etc/resolv.conf\n"
	  "    uext4 chattr disk.img +P -p 42 /srv/www\n"
	  "    uext4 chattr disk.img +F /games\n"
	  "    uext4 chattr disk.img -a +d /var/log/messages\n" },
	{ "verity", cmd_verity, "enable [--hash-alg=ALG] [--block-size=N] [--salt=HEX] "
	  "[--signature=FILE] IMAGE PATH | measure IMAGE PATH... | dump TYPE IMAGE PATH",
	  "fs-verity: enable, measure, dump the metadata",
	  "DESCRIPTION\n"
	  "    fs-verity on files of IMAGE, as fsverity-utils does it on a mounted\n"
	  "    file system (the kernel's FS_IOC_ENABLE_VERITY, FS_IOC_MEASURE_VERITY,\n"
	  "    FS_IOC_READ_VERITY_METADATA).  The image needs the verity feature\n"
	  "    (mkfs -O verity, or tune2fs -O verity).\n"
	  "    enable   builds PATH's Merkle tree and stores it, with its\n"
	  "             descriptor, past the end of the file as ext4 does; the\n"
	  "             file is read-only from then on (writes, truncates and\n"
	  "             fallocate fail with EPERM, by any command or the mount),\n"
	  "             and every read checks the data against the tree (EIO on\n"
	  "             a mismatch, naming the inode and block).  PATH must be an\n"
	  "             extent-mapped regular file without inline data.\n"
	  "    measure  prints each PATH's digest as `fsverity measure` does\n"
	  "             (ALG:HEX PATH); `fsverity digest` of the same content\n"
	  "             and options prints the same.\n"
	  "    dump     writes PATH's merkle_tree, descriptor or signature to\n"
	  "             standard output (`fsverity dump_metadata`).\n"
	  "\nOPTIONS\n"
	  "    --hash-alg=ALG    sha256 (the default) or sha512\n"
	  "    --block-size=N    Merkle tree block size: a power of 2 from 1024 up\n"
	  "                      to the page size and the image's block size;\n"
	  "                      default 4096 or the block size if smaller\n"
	  "    --salt=HEX        up to 32 bytes of salt\n"
	  "    --signature=FILE  a signature from `fsverity sign`, stored with the\n"
	  "                      descriptor (not checked: there is no keyring)\n"
	  "\nEXAMPLES\n"
	  "    uext4 verity enable disk.img /usr/bin/tool\n"
	  "    uext4 verity enable --hash-alg=sha512 --salt=00ff disk.img /data/blob\n"
	  "    uext4 verity measure disk.img /usr/bin/tool\n" },
	{ "chmod", cmd_chmod, "IMAGE MODE PATH...", "change permission bits in an image",
	  "DESCRIPTION\n"
	  "    Sets the permission bits of each PATH of IMAGE to MODE, an octal\n"
	  "    number up to 7777 (setuid 4000, setgid 2000, sticky 1000).\n"
	  "    Symbolic links are followed.  The change time becomes now.\n"
	  "\nEXAMPLES\n"
	  "    uext4 chmod disk.img 755 /usr/local/bin/tool\n"
	  "    uext4 chmod disk.img 1777 /tmp\n" },
	{ "chown", cmd_chown, "[-h] IMAGE UID[:GID] PATH...", "change owners in an image",
	  "DESCRIPTION\n"
	  "    Sets the owner of each PATH of IMAGE to UID and, if given, the group\n"
	  "    to GID.  \":GID\" changes only the group.  UID and GID are numbers, or\n"
	  "    names looked up in the host's user and group databases.  Symbolic\n"
	  "    links are followed unless -h.  Set-id bits are left as they are.\n"
	  "\nOPTIONS\n"
	  "    -h  change a symbolic link itself\n"
	  "\nEXAMPLES\n"
	  "    uext4 chown disk.img 1000:1000 /home/me\n"
	  "    uext4 chown disk.img :50 /srv/shared\n" },
	{ "setfattr", cmd_setfattr, "[-h] IMAGE -n NAME [-v VALUE] | -x NAME PATH...",
	  "set or remove an extended attribute",
	  "DESCRIPTION\n"
	  "    Sets the extended attribute NAME (with its namespace prefix: user.,\n"
	  "    trusted., security., system.) of each PATH of IMAGE to VALUE (empty\n"
	  "    without -v), or removes it with -x.  VALUE is encoded like\n"
	  "    setfattr(1): 0x... is hexadecimal, 0s... base64, \"...\" a string with\n"
	  "    \\ooo octal escapes, anything else the text itself.  Symbolic links are\n"
	  "    followed unless -h.\n"
	  "\nOPTIONS\n"
	  "    -n NAME   the attribute to set\n"
	  "    -v VALUE  its value\n"
	  "    -x NAME   the attribute to remove\n"
	  "    -h        work on a symbolic link itself\n"
	  "\nEXAMPLES\n"
	  "    uext4 setfattr disk.img -n user.comment -v hello /file\n"
	  "    uext4 setfattr disk.img -n security.capability -v 0s... /usr/bin/ping\n"
	  "    uext4 setfattr disk.img -x user.comment /file\n" },
	{ "truncate", cmd_truncate, "[-c] -s SIZE IMAGE PATH...", "set the size of files in an image",
	  "DESCRIPTION\n"
	  "    Sets the size of each regular file PATH of IMAGE to SIZE bytes: data\n"
	  "    past SIZE is freed, and a file that grows reads zeros (a hole) up to\n"
	  "    SIZE.  A missing PATH is created (mode 644) unless -c.\n"
	  "\nOPTIONS\n"
	  "    -s SIZE  the new size: a number, optionally followed by K, M, G or T\n"
	  "             (powers of 1024)\n"
	  "    -c       do not create missing files\n"
	  "\nEXAMPLES\n"
	  "    uext4 truncate -s 0 disk.img /var/log/syslog\n"
	  "    uext4 truncate -s 1G disk.img /swapfile\n" },
	{ "quota", cmd_quota, "IMAGE [-u|-g|-P] [ID]",
	  "show quota usage, limits and grace times, like repquota",
	  "DESCRIPTION\n"
	  "    Lists the user (-u), group (-g) or project (-P) quotas of a -O quota\n"
	  "    image -- every type it keeps when none is given -- or only ID's:\n"
	  "    for each id with an entry in the quota file, the flags (+ where\n"
	  "    usage is past a soft or hard limit: blocks, then files), the space\n"
	  "    used in KiB, the block soft and hard limits (1 KiB units), the time\n"
	  "    left to the block grace deadline (\"none\": over, the soft limit\n"
	  "    now acts as a hard one; empty: no timer), then the same for files.\n"
	  "    The heading gives the file's grace times in seconds.  Limits are\n"
	  "    enforced as by the kernel: a write or create past a hard limit, or\n"
	  "    a soft limit whose grace time is over, fails with EDQUOT (\"Disk\n"
	  "    quota exceeded\"); root passes them.  IDs are numbers, as stored.\n"
	  "    The image is opened read-write (quota state is kept only there):\n"
	  "    it takes the image file, not the mount point of a uext4 mount --\n"
	  "    unmount first (uext4 umount); a directory argument is refused.\n"
	  "\nOPTIONS\n"
	  "    -u  user quotas   -g  group quotas   -P  project quotas\n"
	  "\nEXAMPLES\n"
	  "    uext4 quota disk.img\n"
	  "    uext4 quota disk.img -u 1000\n" },
	{ "setquota", cmd_setquota,
	  "IMAGE -u|-g|-P ID BSOFT BHARD ISOFT IHARD | IMAGE -u|-g|-P -t BGRACE IGRACE",
	  "set quota limits or grace times, like setquota(8)",
	  "DESCRIPTION\n"
	  "    Sets the limits of user (-u), group (-g) or project (-P) ID in a\n"
	  "    -O quota image, in setquota(8)'s order: block soft and hard limits\n"
	  "    in 1 KiB units, inode soft and hard limits; 0 means no limit.  The\n"
	  "    grace timers restart as with setquota: usage within a new soft\n"
	  "    limit (or none) clears its timer, usage past it starts it now.\n"
	  "    With -t, sets the quota file's grace times instead, in seconds:\n"
	  "    how long usage may stay past a soft limit before it acts as a hard\n"
	  "    one (timers already running keep their deadline).  Written in one\n"
	  "    transaction; e2fsck and debugfs (list_quota, get_quota) read them.\n"
	  "    ID is a number.  Takes the image file, not a mount point.\n"
	  "\nOPTIONS\n"
	  "    -u  user   -g  group   -P  project   -t  grace times\n"
	  "\nEXAMPLES\n"
	  "    uext4 setquota disk.img -u 1000 900000 1000000 9000 10000\n"
	  "    uext4 setquota disk.img -g -t 86400 86400\n" },
	{ "version", cmd_version, "", "print the version",
	  "DESCRIPTION\n"
	  "    Prints \"uext4 MAJOR.MINOR.PATCH\", the version of libuext4 this\n"
	  "    binary runs with (uext4_version()).  `uext4 --version` does the same.\n" },
	{ "help", cmd_help, "[COMMAND]", "show help for uext4 or a command",
	  "DESCRIPTION\n"
	  "    Without COMMAND, lists the commands; with one, prints its manual.\n"
	  "    `uext4 COMMAND --help` does the same.\n" },
};

#define NCOMMANDS (sizeof(commands) / sizeof(commands[0]))

static const struct command *find_command(const char *name)
{
	for (size_t i = 0; i < NCOMMANDS; i++)
		if (!strcmp(commands[i].name, name))
			return &commands[i];
	return NULL;
}

static void print_manual(FILE *out, const struct command *c)
{
	fprintf(out, "NAME\n    uext4 %s - %s\n\nSYNOPSIS\n    uext4 %s %s\n\n%s\n%s",
		c->name, c->summary, c->name, c->synopsis, c->manual, EXIT_TEXT);
}

static void print_overview(FILE *out)
{
	fprintf(out, "NAME\n    uext4 - ext4 in userspace: inspect, change and mount ext4 images\n\n"
		"SYNOPSIS\n    uext4 COMMAND [OPTIONS] IMAGE [ARGS]\n    uext4 help COMMAND\n\n"
		"DESCRIPTION\n    Reads and writes ext4 filesystem images (files or block devices)\n"
		"    without the kernel's ext4 driver.  Commands that change an image\n"
		"    write it back completely before they exit; never use them on an\n"
		"    image that is mounted.  Paths inside an image are absolute\n"
		"    (\"/dir/file\"); \"dir/file\" is taken relative to the root.\n\n"
		"COMMANDS\n");
	for (size_t i = 0; i < NCOMMANDS; i++)
		fprintf(out, "    %-9s %s\n", commands[i].name, commands[i].summary);
	fprintf(out, "\nOPTIONS\n"
		"    -h, --help  this text; `uext4 help COMMAND` or `uext4 COMMAND --help`\n"
		"                prints a command's manual (its options, output, examples)\n"
		"    --version   print the version, as `uext4 version`\n"
		"    --journal PATH\n"
		"                with any command: the external journal device of a file\n"
		"                system made with mke2fs -J device= (or uext4 mkfs -J\n"
		"                device=), checked against its journal UUID.  Without it\n"
		"                such a file system is refused, naming the UUID, except\n"
		"                for reading a clean one (needs_recovery clear)\n"
		"\nEXAMPLES\n    uext4 info disk.img\n    uext4 ls -l disk.img /\n"
		"    uext4 cat disk.img /etc/fstab\n    uext4 put disk.img ./rootfs/. /\n"
		"    uext4 mount disk.img /mnt   (later: uext4 umount /mnt)\n"
		"    mount -t fuse.uext4 disk.img /mnt   (as root: see uext4 help mount)\n\n%s"
		"\nSEE ALSO\n"
		"    libuext4(3) (the C library), mount(8), fstab(5), e2fsck(8), mke2fs(8),\n"
		"    debugfs(8)\n", EXIT_TEXT);
}

int main(int argc, char **argv)
{
	const struct command *c;
	const char *jpath;
	int bad;

	if (argc < 2) {
		fprintf(stderr, "usage: uext4 COMMAND [OPTIONS] IMAGE [ARGS]\n"
			"Try 'uext4 help' for more information.\n");
		return 2;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		print_overview(stdout);
		return 0;
	}
	if (!strcmp(argv[1], "--version"))
		argv[1] = "version";
	c = find_command(argv[1]);
	if (!c) {
		fprintf(stderr, "uext4: unknown command '%s'\n"
			"usage: uext4 COMMAND [OPTIONS] IMAGE [ARGS]\n"
			"Try 'uext4 help' for more information.\n", argv[1]);
		return 2;
	}
	if (wants_help(c, argc - 1, argv + 1)) {
		print_manual(stdout, c);
		return 0;
	}
	argc--;
	argv++;
	if ((jpath = take_long_opt(&argc, argv, "--journal", &bad)))
		set_journal_path(jpath);
	if (bad)
		return usage_error(c, "--journal needs a PATH");
	optind = 1;
	return c->run(c, argc, argv);
}
