/*
 * cli.h - what the uext4 command's source files share: the command table
 * entry, error and usage reporting, option parsing and image access.
 * uext4.c has the table, the read commands and these helpers; write.c the
 * namespace and attribute commands; copy.c put and get; umount.c umount;
 * quota.c quota and setquota.
 */
#ifndef UEXT4_CLI_H
#define UEXT4_CLI_H

#include "uext4.h"

#include <stddef.h>
#include <stdint.h>

struct command {
	const char *name;
	int (*run)(const struct command *c, int argc, char **argv);
	const char *synopsis;   /* arguments after "uext4 NAME" */
	const char *summary;    /* one line for the overview */
	const char *manual;     /* DESCRIPTION .. EXAMPLES */
};

/* "uext4 CMD: WHAT: message" on stderr (the library's message when it left
 * one); returns 1, the exit status for errors. */
int fail(const struct command *c, const char *what, long ret);
/* The same for a host error (errno value), ignoring the library message. */
int fail_host(const struct command *c, const char *what, int err);
/* The usage line on stderr; returns 2. */
int usage_error(const struct command *c, const char *why);
/* getopt with our messages; '?' means the caller returns usage_error. */
int next_opt(const struct command *c, int argc, char **argv, const char *opts);

/* Mount IMAGE read-only / read-write; 0, or 1 after printing the error.
 * Read-write mounts act as the invoking user (uext4_set_caller). */
int open_image(const struct command *c, const char *image, uext4_fs **fs);
int open_image_rw(const struct command *c, const char *image, uext4_fs **fs);
/* Unmount (writing back); a failure turns status 0 into 1. */
int close_image(const struct command *c, const char *image, uext4_fs *fs, int status);

/* imagelock.c */
struct lock_holder {
	int pid;
	int exclusive;          /* LOCK_EX (a writer), else LOCK_SH (a read-only mount) */
	char comm[32];          /* its /proc/PID/comm, "" if unknown */
};
/* The first holder of an flock on the file open at fd (from /proc/locks):
 * 1, or 0 if none is found. */
int lock_holder(int fd, struct lock_holder *h);
/* flock(fd, op), waiting at most secs seconds: 0, or -1 with errno
 * (ETIMEDOUT when the time ran out).  Uses SIGALRM and ITIMER_REAL. */
int flock_bounded(int fd, int op, unsigned secs);

/* Paths in the image are absolute; "a/b" means "/a/b". */
const char *image_path(const char *p, char *buf, size_t len);
/* Resolve PATH (printing the error): 0 or 1. st may be NULL. */
int resolve(const struct command *c, uext4_fs *fs, const char *path, int follow,
	    uint64_t *ino, struct uext4_stat *st);
int write_all(int fd, const char *buf, size_t len);
/* The value of one hex digit, or -1 (write.c). */
int hex_digit(int ch);

/* write.c */
/* Split PATH into its resolved parent directory and last component
 * (copied into name, at most 255 bytes).  0, or 1 after printing the error. */
int split_path(const struct command *c, uext4_fs *fs, const char *path, uint64_t *dir,
	       char name[256]);
/* Remove name in dir (shown as path) and, if recursive and a directory,
 * everything below it.  0, or 1 after printing the error. */
int remove_tree(const struct command *c, uext4_fs *fs, uint64_t dir, const char *name,
		const char *path, int recursive);
int cmd_mkdir(const struct command *c, int argc, char **argv);
int cmd_rm(const struct command *c, int argc, char **argv);
int cmd_mv(const struct command *c, int argc, char **argv);
int cmd_ln(const struct command *c, int argc, char **argv);
int cmd_chmod(const struct command *c, int argc, char **argv);
int cmd_chown(const struct command *c, int argc, char **argv);
int cmd_setfattr(const struct command *c, int argc, char **argv);
int cmd_truncate(const struct command *c, int argc, char **argv);

/* flags.c */
int cmd_lsattr(const struct command *c, int argc, char **argv);
int cmd_chattr(const struct command *c, int argc, char **argv);

/* quota.c */
int cmd_quota(const struct command *c, int argc, char **argv);
int cmd_setquota(const struct command *c, int argc, char **argv);

/* verity.c */
int cmd_verity(const struct command *c, int argc, char **argv);

/* stats.c */
int cmd_stats(const struct command *c, int argc, char **argv);

/* copy.c */
int cmd_put(const struct command *c, int argc, char **argv);
int cmd_get(const struct command *c, int argc, char **argv);

/* mkfs.c: the command; and for `uext4 mount --create SIZE`: make IMAGE
 * with the default options if it does not exist (*created then 1).
 * 0, or the exit status after printing the error. */
int cmd_mkfs(const struct command *c, int argc, char **argv);
int cli_mkfs_create(const struct command *c, const char *image, const char *size,
		    int *created);

/* fill.c: uext4 mkfs -d SOURCE, after mkfs made the file system (mkfs.c
 * parses the options).  Mounts the image, copies SOURCE (a directory, a
 * tarball, or "-" for a tar stream on stdin) into its root, shows progress
 * on a terminal unless quiet, unmounts.  Returns the exit status; on failure
 * the message says what happened to the image (removed when mkfs created
 * it, else marked with an error). */
struct fill_args {
	const char *image;
	uint64_t offset;            /* -E offset= */
	const char *source;
	unsigned threads;           /* -j N; 0 = the number of CPUs */
	int quiet;                  /* -q */
	int no_copy_xattrs;         /* --no-copy-xattrs */
	int root_owner_set;         /* --root-owner=UID:GID or -E root_owner= */
	uint32_t root_uid, root_gid;
	int have_epoch;             /* SOURCE_DATE_EPOCH is set */
	int64_t epoch;
	int created;                /* mkfs created IMAGE (it did not exist) */
};
int cli_fill_image(const struct command *c, const struct fill_args *a);

/* umount.c: the command, and the status file the mount server keeps for it
 * (begin: before the mount is live; end: after the image is closed). */
int cmd_umount(const struct command *c, int argc, char **argv);
void mount_status_begin(const char *image, const char *mountpoint);
void mount_status_end(int status, const char *msg);

#endif
