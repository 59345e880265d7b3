/*
 * loop.c - request loops for the FUSE server; see loop.h.
 */
#include "loop.h"

#include <errno.h>
#include <linux/fuse.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int uext4_loop_parse(const char *s, enum uext4_loop_kind *kind)
{
	if (!strcmp(s, "st"))
		*kind = UEXT4_LOOP_ST;
	else if (!strcmp(s, "mt"))
		*kind = UEXT4_LOOP_MT;
	else if (!strcmp(s, "pool"))
		*kind = UEXT4_LOOP_POOL;
	else if (!strcmp(s, "uring"))
		*kind = UEXT4_LOOP_URING;
	else if (!strcmp(s, "auto"))
		*kind = UEXT4_LOOP_AUTO;
	else
		return -1;
	return 0;
}

const char *uext4_loop_name(enum uext4_loop_kind kind)
{
	switch (kind) {
	case UEXT4_LOOP_ST: return "st";
	case UEXT4_LOOP_MT: return "mt";
	case UEXT4_LOOP_POOL: return "pool";
	case UEXT4_LOOP_URING: return "uring";
	case UEXT4_LOOP_AUTO: return "auto";
	}
	return "?";
}

/*
 * Request hooks (loop.h): the session's, one per process.  init_flags and
 * peek are set before the session reads its first request; the INIT
 * fields are written while INIT is served, which the kernel lets no other
 * request overtake, and only read afterwards (atomics, relaxed: the order
 * comes from the kernel, which TSan cannot see).
 */
static struct {
	uint64_t init_flags;
	void (*peek)(const void *req, size_t len);
	void (*replied)(const void *out_header);
	_Atomic uint64_t init_unique;   /* the INIT request's, 0 before/after it */
	_Atomic uint64_t offered;       /* its flags, flags2 in bits 32..63 */
} hooks;

void uext4_loop_hooks_set(const struct uext4_loop_opts *o)
{
	hooks.init_flags = o->init_flags;
	hooks.peek = o->peek;
	hooks.replied = o->replied;
	atomic_store_explicit(&hooks.init_unique, 0, memory_order_relaxed);
	atomic_store_explicit(&hooks.offered, 0, memory_order_relaxed);
}

void uext4_loop_request(void *req, size_t len)
{
	struct fuse_in_header *in = req;

	if (len < sizeof(*in))
		return;
	/* FUSE_TMPFILE (kernel 6.2; O_TMPFILE), which libfuse 3.14 answers
	 * ENOSYS, has CREATE's arguments and reply, and the name "/", which
	 * no CREATE carries: the server's CREATE serves it (fuse.c). */
	if (in->opcode == FUSE_TMPFILE)
		in->opcode = FUSE_CREATE;
	if (in->opcode == FUSE_INIT &&
	    len >= sizeof(*in) + offsetof(struct fuse_init_in, flags) + sizeof(uint32_t)) {
		const struct fuse_init_in *arg = (const void *)(in + 1);
		uint64_t offered = arg->flags;

		if ((arg->flags & FUSE_INIT_EXT) &&
		    len >= sizeof(*in) + offsetof(struct fuse_init_in, flags2) + sizeof(uint32_t))
			offered |= (uint64_t)arg->flags2 << 32;
		atomic_store_explicit(&hooks.offered, offered, memory_order_relaxed);
		atomic_store_explicit(&hooks.init_unique, in->unique, memory_order_relaxed);
	}
	if (hooks.peek)
		hooks.peek(req, len);
}

void uext4_loop_replied(const void *out_header)
{
	if (hooks.replied)
		hooks.replied(out_header);
}

/* libfuse's INIT reply: add the flags it does not know, where offered. */
void uext4_loop_init_reply(struct iovec *iov, int count)
{
	const struct fuse_out_header *oh = iov[0].iov_base;
	uint64_t unique = atomic_load_explicit(&hooks.init_unique, memory_order_relaxed);
	uint64_t claim = hooks.init_flags & atomic_load_explicit(&hooks.offered, memory_order_relaxed);
	struct fuse_init_out *out;

	if (!unique || oh->unique != unique)
		return;
	atomic_store_explicit(&hooks.init_unique, 0, memory_order_relaxed);
	if (oh->error || count < 2 ||
	    iov[1].iov_len < offsetof(struct fuse_init_out, flags) + sizeof(uint32_t))
		return;
	out = iov[1].iov_base;
	out->flags |= (uint32_t)claim;
	/* flags2 counts only with FUSE_INIT_EXT, which the kernel offered if
	 * any of its bits is (libfuse's reply has the field, zeroed). */
	if ((claim >> 32) &&
	    iov[1].iov_len >= offsetof(struct fuse_init_out, flags2) + sizeof(uint32_t)) {
		out->flags |= FUSE_INIT_EXT;
		out->flags2 |= (uint32_t)(claim >> 32);
	}
}

static ssize_t classic_read(int fd, void *buf, size_t len, void *userdata)
{
	ssize_t n = read(fd, buf, len);

	(void)userdata;
	if (n > 0)
		uext4_loop_request(buf, (size_t)n);
	return n;
}

static ssize_t classic_writev(int fd, struct iovec *iov, int count, void *userdata)
{
	(void)userdata;
	uext4_loop_init_reply(iov, count);
	if (count > 0 && iov[0].iov_len >= sizeof(struct fuse_out_header))
		uext4_loop_replied(iov[0].iov_base);
	return writev(fd, iov, count);
}

/* Splice stays off where these are installed: the server turns SPLICE_READ
 * off in its init, and replies go through writev. */
static const struct fuse_custom_io classic_io = {
	.writev = classic_writev,
	.read = classic_read,
};

/* The classic loops get the hooks through the session's custom I/O, once
 * (a URING session that fell back has its own hooks in place). */
static int install_classic_hooks(struct fuse_session *se, const struct uext4_loop_opts *o)
{
	static int installed;

	if (installed || (!o->init_flags && !o->peek && !o->replied))
		return 0;
	installed = 1;
	uext4_loop_hooks_set(o);
	return fuse_session_custom_io(se, &classic_io, fuse_session_fd(se));
}

static int run_mt(struct fuse_session *se, const struct uext4_loop_opts *o)
{
	struct fuse_loop_config *cfg = fuse_loop_cfg_create();
	int ret;

	if (!cfg)
		return -ENOMEM;
	fuse_loop_cfg_set_clone_fd(cfg, o->clone_fd ? 1 : 0);
	if (o->max_idle >= 0)
		fuse_loop_cfg_set_idle_threads(cfg, (unsigned)o->max_idle);
	if (o->threads)
		fuse_loop_cfg_set_max_threads(cfg, o->threads);
	ret = fuse_session_loop_mt(se, cfg);
	fuse_loop_cfg_destroy(cfg);
	return ret;
}

/*
 * The pool.  Every worker owns its fuse_buf; the session itself is safe for
 * concurrent receive/process (libfuse's own MT loop does the same on one fd).
 * Only the calling thread keeps signals unblocked, so a SIGINT/SIGTERM caught
 * by fuse_set_signal_handlers() interrupts *its* read; it then cancels the
 * other workers, which are blocked in read(2) (a cancellation point).
 * Cancellation is disabled while a request is processed so a reply is never
 * cut in half.
 */
struct pool_worker {
	struct fuse_session *se;
	pthread_t tid;
	int started;
	int err;                /* negative errno from receive, or 0 */
};

/* Cancellation cleanup: the buffer libfuse allocated for this worker. */
static void free_buf_mem(void *arg)
{
	struct fuse_buf *buf = arg;

	free(buf->mem);
	buf->mem = NULL;
}

static void pool_serve(struct pool_worker *w)
{
	struct fuse_buf buf;
	int res;

	memset(&buf, 0, sizeof(buf));
	/* Workers are cancelled while blocked in read(2) at unmount. */
	pthread_cleanup_push(free_buf_mem, &buf);
	while (!fuse_session_exited(w->se)) {
		pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, NULL);
		res = fuse_session_receive_buf(w->se, &buf);
		pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
		if (res == -EINTR)
			continue;
		if (res <= 0) {
			if (res < 0)
				w->err = res;
			fuse_session_exit(w->se);
			break;
		}
		fuse_session_process_buf(w->se, &buf);
	}
	pthread_cleanup_pop(1);
}

static void *pool_thread(void *arg)
{
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
	pool_serve(arg);
	return NULL;
}

static int run_pool(struct fuse_session *se, const struct uext4_loop_opts *o)
{
	unsigned n = o->threads ? o->threads : 4, i;
	struct pool_worker *w = calloc(n, sizeof(*w));
	sigset_t all, old;
	int ret = 0;

	if (!w)
		return -ENOMEM;
	/* Helpers start with every signal blocked: signals go to thread 0. */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	for (i = 1; i < n; i++) {
		w[i].se = se;
		w[i].started = pthread_create(&w[i].tid, NULL, pool_thread, &w[i]) == 0;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);

	w[0].se = se;
	pool_serve(&w[0]);
	pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, NULL);

	for (i = 1; i < n; i++)
		if (w[i].started)
			pthread_cancel(w[i].tid);
	for (i = 1; i < n; i++)
		if (w[i].started)
			pthread_join(w[i].tid, NULL);
	for (i = 0; i < n; i++)
		if (w[i].err && w[i].err != -ENODEV && !ret)
			ret = w[i].err;
	free(w);
	fuse_session_reset(se);
	return ret;
}

/*
 * Without io_uring: bench/real.sh on the project's 2-core machine, run on
 * a quiet machine (docs/fuse-measurements.md, "Real workloads"), put pool and mt
 * ahead of st at 8 of 9 workloads (rsync 3.5 s against 4.7 s, tar x 2.4
 * against 4.9, dbench at 2 clients 439 MB/s against 296); st won only
 * dbench at 8 clients.  pool and mt were within 15% of each other, pool
 * ahead at dbench, and pool is ours: a fixed set of threads, none made or
 * destroyed while serving.
 */
enum uext4_loop_kind uext4_loop_classic(void)
{
	return UEXT4_LOOP_POOL;
}

int uext4_loop_run(struct fuse_session *se, const struct uext4_loop_opts *o)
{
	struct uext4_loop_opts chosen;

	if (o->kind == UEXT4_LOOP_AUTO) {
		chosen = *o;
		chosen.kind = uext4_uring_refused() ? uext4_loop_classic() : UEXT4_LOOP_URING;
		return uext4_loop_run(se, &chosen);
	}
	if (o->kind == UEXT4_LOOP_URING)
		return uext4_uring_run(se, o);  /* calls o->ready itself */
	if (!o->hooks_in_place && install_classic_hooks(se, o) < 0)
		return -EIO;
	if (o->ready)
		o->ready(o->ready_arg);
	switch (o->kind) {
	case UEXT4_LOOP_ST:
		return fuse_session_loop(se);
	case UEXT4_LOOP_MT:
		return run_mt(se, o);
	case UEXT4_LOOP_POOL:
		return run_pool(se, o);
	case UEXT4_LOOP_URING:
	case UEXT4_LOOP_AUTO:
		break;
	}
	return -EINVAL;
}
