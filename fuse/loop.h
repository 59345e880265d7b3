/*
 * loop.h - request loops for uext4's FUSE server (and bench/nullfs.c).
 *
 * Three ways to serve /dev/fuse:
 *   ST    libfuse's single-threaded fuse_session_loop().
 *   MT    libfuse's fuse_session_loop_mt() (optionally clone_fd; threads are
 *         created on demand and, past max_idle, destroyed again).
 *   POOL  our own fixed pool: N threads created once, each blocking in
 *         fuse_session_receive_buf() on the session fd and processing what
 *         it reads.  No thread creation/destruction, no hand-off between a
 *         reader and a worker.
 *   URING FUSE over io_uring (fuse/uring.c): one thread per CPU queue, each
 *         taking requests from and committing replies to its io_uring;
 *         the calling thread keeps a classic loop for what the kernel
 *         still sends through /dev/fuse.  Falls back to ST, printing why,
 *         where the kernel cannot.
 *   AUTO  the default: URING where the kernel has it switched on
 *         (/sys/module/fuse/parameters/enable_uring), else the classic
 *         loop measured best here (uext4_loop_classic(); ARCHITECTURE.md
 *         has the numbers).  No message when it picks the classic loop;
 *         a failure of URING after that says why, as for loop=uring.
 */
#ifndef UEXT4_FUSE_LOOP_H
#define UEXT4_FUSE_LOOP_H

#ifndef FUSE_USE_VERSION
#define FUSE_USE_VERSION 312
#endif
#include <fuse_lowlevel.h>
#include <stdint.h>
#include <sys/uio.h>

enum uext4_loop_kind { UEXT4_LOOP_ST = 0, UEXT4_LOOP_MT, UEXT4_LOOP_POOL, UEXT4_LOOP_URING,
		       UEXT4_LOOP_AUTO };

struct uext4_loop_opts {
	enum uext4_loop_kind kind;
	unsigned threads;       /* POOL: worker count; MT: max_threads (0 = default) */
	int max_idle;           /* MT: max idle threads (-1 = libfuse default) */
	int clone_fd;           /* MT: one /dev/fuse fd per worker */
	/* Called once (if set) when the loop is about to serve: for URING,
	 * after INIT and the queue registration (or the fallback), so that a
	 * daemon's parent sees the fallback message before it exits. */
	void (*ready)(void *arg);
	void *ready_arg;
	/* INIT flags to claim where the kernel offers them, on top of what
	 * libfuse claims: flags libfuse 3.14 does not know
	 * (FUSE_HANDLE_KILLPRIV_V2; bits 32..63, FUSE_DIRECT_IO_ALLOW_MMAP,
	 * go in fuse_init_out.flags2 with FUSE_INIT_EXT).  0 = none. */
	uint64_t init_flags;
	/* Called (if set) with each request as the kernel sent it (in-header
	 * first, contiguous), on the thread that then serves it, right before
	 * libfuse dispatches it: for request fields libfuse drops (the write,
	 * open and setattr kill-suid/sgid flags). */
	void (*peek)(const void *req, size_t len);
	/* Called (if set) with the fuse_out_header of each reply or
	 * notification the session writes, on the thread writing it (for a
	 * reply: the thread that served the request), before the kernel sees
	 * it: for the request statistics (fuse/reqstats.c). */
	void (*replied)(const void *out_header);
	int hooks_in_place;     /* internal: uring.c's own hooks serve (fallback) */
};

/* Parse "st", "mt", "pool", "uring" or "auto"; returns -1 if unknown. */
int uext4_loop_parse(const char *s, enum uext4_loop_kind *kind);
const char *uext4_loop_name(enum uext4_loop_kind kind);

/* Serve requests until the session exits (unmount or signal).  Returns
 * what fuse_session_loop() returns: 0, -errno, or a signal number. */
int uext4_loop_run(struct fuse_session *se, const struct uext4_loop_opts *o);

/* The classic (/dev/fuse) loop AUTO uses without io_uring. */
enum uext4_loop_kind uext4_loop_classic(void);

/* For fuse/uring.c, which serves through hooks of its own: what a loop
 * with o's init_flags and peek does with a request it read (before libfuse
 * sees it; a FUSE_TMPFILE becomes a CREATE there) and with libfuse's reply
 * to INIT (before the kernel sees it).
 * The state they share is written only while INIT is served (one thread,
 * before any other request) and read-only afterwards. */
void uext4_loop_request(void *req, size_t len);
void uext4_loop_init_reply(struct iovec *iov, int count);
/* The replied hook (any reply, INIT's included): uring.c's writev hooks. */
void uext4_loop_replied(const void *out_header);
/* Take o's init_flags and peek for those two (before the session reads
 * its first request).  uext4_loop_run does it for the classic loops, which
 * it serves through custom I/O calling them; uring.c for its own hooks. */
void uext4_loop_hooks_set(const struct uext4_loop_opts *o);

/* The URING loop (fuse/uring.c); uext4_loop_run calls it.  Without the
 * kernel's support it serves with the loop `fallback` (AUTO: quietly). */
int uext4_uring_run(struct fuse_session *se, const struct uext4_loop_opts *o);
/* NULL if the kernel offers FUSE over io_uring, else why not. */
const char *uext4_uring_refused(void);

#endif
