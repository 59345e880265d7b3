/*
 * fuse.h - uext4's FUSE server (libfuse3 low-level API).
 *
 * Typical use (what `uext4 mount` does):
 *
 *	struct uext4_fuse_opts o;
 *	uext4_fuse_opts_init(&o);
 *	for each "-o" item: uext4_fuse_parse_opt(&o, item);
 *	if (!foreground) o.ready_fd = uext4_fuse_daemonize();   // parent exits here
 *	uext4_mount(image, {.read_only = o.read_only}, &fs);    // in the child
 *	ret = uext4_fuse_run(fs, mountpoint, &o);               // until unmounted
 *	if (uext4_umount(fs) < 0) ...                           // write-back error
 */
#ifndef UEXT4_FUSE_H
#define UEXT4_FUSE_H

#include "uext4.h"

#ifdef __cplusplus
extern "C" {
#endif

enum uext4_fuse_loop { UEXT4_FUSE_LOOP_ST = 0, UEXT4_FUSE_LOOP_MT, UEXT4_FUSE_LOOP_POOL,
		       UEXT4_FUSE_LOOP_URING, UEXT4_FUSE_LOOP_AUTO };

struct uext4_fuse_opts {
	int read_only;          /* mount read-only (-o ro); default read-write */
	unsigned commit_secs;   /* -o commit=N: journal commit interval; 0 = 5 s */
	unsigned max_open_files; /* -o max_open_files=N; 0 = the library's default */
	unsigned inode_cache;   /* -o inode_cache=N: idle inodes kept; 0 = default */
	int discard;            /* -o discard: discard freed blocks after each commit */
	int errors;             /* -o errors=continue|remount-ro|panic: UEXT4_ERRORS_*;
				 * 0 = what the superblock's s_errors says */
	int allow_other;        /* let other users see the mount */
	int debug;              /* libfuse request tracing to stderr */
	const char *fsname;     /* shown in /proc/mounts (usually the image path) */
	double timeout;         /* entry/attr cache seconds; <0 = default */
	int writeback;          /* kernel writeback cache on read-write mounts (default 1) */
	/* Request loop, see fuse/loop.h. */
	enum uext4_fuse_loop loop;
	unsigned threads;       /* pool size / mt max threads; 0 = default */
	int max_idle;           /* mt only; -1 = libfuse default */
	int clone_fd;           /* mt only */
	char extra[1024];       /* other mount options passed to the kernel/libfuse */
	int ready_fd;           /* -1, or written once the mount is live (daemon mode) */
	int stats;              /* -o stats: statistics on from the start (uext4 stats) */
	unsigned dirty_limit_mib; /* -o dirty_limit=MIB: the kernel's dirty limit for the
				   * mount (bdi max_bytes; root only); 0 = the kernel's */
	char *failure;          /* NULL, or filled with what failed when uext4_fuse_run */
	size_t failure_len;     /* fails (e.g. the write-backs lost), for the status */
};

/* Defaults: read-write, loop auto (io_uring where the kernel has it on, else
 * the classic loop measured best, see fuse/loop.h), ready_fd -1. */
void uext4_fuse_opts_init(struct uext4_fuse_opts *o);
/*
 * Apply one mount option ("ro", "rw", "allow_other", "debug", "loop=st|mt|pool|uring|auto",
 * "errors=continue|remount-ro|panic", "threads=N", "max_idle=N", "clone_fd",
 * "timeout=SECS", "writeback[=1]", "nowriteback" or "writeback=0", "stats"; anything else is
 * passed on to libfuse/the kernel).  Returns 0, or -EINVAL with a message in
 * errbuf for a malformed value.
 */
int uext4_fuse_parse_opt(struct uext4_fuse_opts *o, const char *opt, char *errbuf, size_t errlen);

/*
 * Fork into the background.  The parent waits until the child either
 * reports the mount ready (through the returned fd, which uext4_fuse_run
 * writes via o->ready_fd) and then exits 0, or dies, and then exits with the
 * child's status (the child prints its own error first).  Returns the
 * notification fd in the child; returns -1 (in the caller) if fork failed.
 */
int uext4_fuse_daemonize(void);

/*
 * Mount fs on mountpoint and serve requests until unmounted (fusermount3 -u,
 * umount) or SIGINT/SIGTERM/SIGHUP.  When the session ends, a read-write fs
 * is written back with uext4_sync() (a failure is printed on stderr and
 * returned), but not unmounted: the caller then calls uext4_umount(), which
 * must succeed too.  fs must be mounted read-only if o->read_only.
 * Returns 0, or a negative errno with a message on stderr.
 */
int uext4_fuse_run(uext4_fs *fs, const char *mountpoint, const struct uext4_fuse_opts *o);

#ifdef __cplusplus
}
#endif
#endif
