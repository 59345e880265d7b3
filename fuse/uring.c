/*
 * uring.c - FUSE over io_uring (loop kind "uring", see loop.h).
 *
 * Kernels since 6.14 can pass FUSE requests through io_uring instead of
 * read(2)/write(2) on /dev/fuse: the server registers, per CPU queue, ring
 * entries (a header buffer and a payload buffer each) with
 * IORING_OP_URING_CMD(FUSE_IO_URING_CMD_REGISTER); a request arrives as the
 * completion of such a command, and the reply goes back, together with the
 * fetch of the next request, as FUSE_IO_URING_CMD_COMMIT_AND_FETCH.  One
 * system call per request instead of two, and no wake-up of a thread that
 * sleeps in read(2) on another CPU.  Debian's libfuse 3.14 knows none of
 * this, so we do it on the session's /dev/fuse fd ourselves, with liburing.
 *
 * Requests still go to libfuse's lowlevel dispatch (the same handlers as
 * every other loop): the session gets a custom I/O (fuse_session_custom_io),
 * and
 *   - a request taken from a ring entry is laid out as read(2) would have
 *     delivered it (in-header, op header, payload, contiguous) and handed to
 *     fuse_session_process_buf();
 *   - the reply libfuse "writes" is captured by our writev hook into that
 *     entry's buffers (a thread-local says which entry this thread serves),
 *     then committed.
 * Everything else still uses /dev/fuse: the kernel sends INIT, FORGETs and
 * INTERRUPTs (and requests issued before every queue is registered) there,
 * so the calling thread keeps a classic single-threaded loop on it.
 * Notifications (unique 0) are written to /dev/fuse as before.
 *
 * INIT: the kernel offers FUSE_OVER_IO_URING (bit 41, flags2 bit 9) when
 * its enable_uring parameter is on; the server must echo it in the INIT
 * reply, which libfuse 3.14 cannot, so the writev hook adds it.  Queues can
 * be registered only after that reply (the kernel sizes the ring by the
 * negotiated max_write/max_pages, which the hook also notes).  The calling
 * thread therefore serves INIT itself, then starts one thread per possible
 * CPU (qid = CPU number, as the kernel picks the queue of the CPU a request
 * is issued on), waits until each has registered its entries, and only then
 * reports the mount ready.  Any failure on that way (no kernel support,
 * enable_uring off, flag not offered, io_uring unavailable, REGISTER
 * refused) prints one line saying why and leaves the classic loop serving.
 *
 * The ABI comes from the kernel's Documentation/filesystems/fuse-io-uring.rst
 * and include/uapi/linux/fuse.h (protocol 7.42); Debian's linux-libc-dev 6.1
 * predates it, so the few definitions are below.
 */
#include "loop.h"

#include <errno.h>
#include <linux/fuse.h>
#include <liburing.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/uio.h>
#include <syslog.h>
#include <unistd.h>

/* ---- the FUSE-over-io_uring ABI (uapi fuse.h, 7.42) --------------------- */
#define U4_OVER_IO_URING_FLAGS2 (1u << 9)      /* FUSE_OVER_IO_URING = 1 << 41 */
#define U4_URING_CMD_REGISTER 1u
#define U4_URING_CMD_COMMIT_AND_FETCH 2u
#define U4_URING_HDR_SZ 128                     /* in_out and op_in areas */

struct u4_uring_ent_in_out {
	uint64_t flags;
	uint64_t commit_id;     /* the request's unique, to commit it */
	uint32_t payload_sz;    /* bytes used in the payload buffer */
	uint32_t padding;
	uint64_t reserved;
};

/* iov[0] of every entry. */
struct u4_uring_req_header {
	char in_out[U4_URING_HDR_SZ];   /* fuse_in_header / fuse_out_header */
	char op_in[U4_URING_HDR_SZ];    /* the opcode's fixed argument (in_args[0]) */
	struct u4_uring_ent_in_out ent;
};

/* The command area of a 128-byte SQE. */
struct u4_uring_cmd_req {
	uint64_t flags;
	uint64_t commit_id;
	uint16_t qid;
	uint8_t padding[6];
};

/* ---- our state ------------------------------------------------------------ */
#define URING_DEPTH 8           /* entries per queue */
#define STOP_TAG 0              /* user_data of the stop poll; entries are pointers */
/* Room before the payload for the in-header and op header, so a request is
 * made contiguous without moving its payload. */
#define REQ_ROOM (sizeof(struct fuse_in_header) + U4_URING_HDR_SZ)

struct uring_queue;

/* One ring entry.  Owned by its queue's thread. */
struct uring_ent {
	struct uring_queue *q;
	struct u4_uring_req_header hdr;
	struct iovec iov[2];
	char *buf;              /* REQ_ROOM + payload_size bytes */
	uint64_t unique;        /* request being served */
	int replied;            /* the writev hook captured its reply */
	int live;               /* registered with the kernel */
};

/* One queue: a thread, its io_uring and its entries.  Everything in it is
 * touched only by that thread, except `state`, `err` (under t->lock). */
struct uring_queue {
	struct uring_transport *t;
	unsigned qid;
	pthread_t tid;
	int started;
	struct io_uring ring;
	int ring_ok;
	struct uring_ent ents[URING_DEPTH];
	int state;              /* 0 starting, 1 registered, -1 failed */
	int err;                /* negative errno of the failure */
	const char *what;       /* what failed */
};

/* The transport of one session.  Written by the calling thread before the
 * queue threads start, read-only afterwards, except `lock`-protected queue
 * states and the INIT fields, which are written only while the calling
 * thread alone serves requests (INIT comes first, on /dev/fuse). */
struct uring_transport {
	struct fuse_session *se;
	int fd;                 /* the session's /dev/fuse */
	int stop_fd;            /* eventfd: readable = queue threads stop */
	unsigned nq;
	size_t payload_size;
	struct uring_queue *q;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	/* INIT, seen by the hooks */
	uint64_t init_unique;   /* 0 until the INIT request was read */
	int offered;            /* the kernel offered FUSE_OVER_IO_URING */
	int init_replied;       /* our INIT reply reached the kernel */
	uint32_t max_write, max_pages;
};

/* The one transport of this process (one FUSE session per process); set
 * before the session reads its first request, cleared after the last. */
static struct uring_transport *the_transport;
/* The entry whose request this thread is processing, or NULL. */
static __thread struct uring_ent *cur_ent;

/* ---- custom I/O hooks ------------------------------------------------------ */

static ssize_t hook_read(int fd, void *buf, size_t len, void *userdata)
{
	struct uring_transport *t = the_transport;
	ssize_t n = read(fd, buf, len);
	const struct fuse_in_header *in = buf;

	if (t && n >= (ssize_t)(sizeof(*in) + offsetof(struct fuse_init_in, flags2) + 4) &&
	    in->opcode == FUSE_INIT) {
		const struct fuse_init_in *arg = (const void *)(in + 1);

		t->init_unique = in->unique;
		t->offered = (arg->flags & FUSE_INIT_EXT) &&
			     (arg->flags2 & U4_OVER_IO_URING_FLAGS2);
	}
	if (n > 0)
		uext4_loop_request(buf, (size_t)n);
	return n;
}

/* INIT reply on its way to the kernel: claim io_uring if offered. */
static void patch_init_reply(struct uring_transport *t, struct iovec *iov, int count)
{
	struct fuse_init_out *out;

	if (count < 2 || iov[1].iov_len < offsetof(struct fuse_init_out, flags2) + 4)
		return;
	out = iov[1].iov_base;
	if (t->offered) {
		out->flags |= FUSE_INIT_EXT;
		out->flags2 |= U4_OVER_IO_URING_FLAGS2;
	}
	t->max_write = out->max_write;
	t->max_pages = (out->flags & FUSE_MAX_PAGES) ? out->max_pages : 0;
}

/* Copy a reply into the entry being served: header, then payload. */
static ssize_t capture_reply(struct uring_ent *e, const struct iovec *iov, int count)
{
	size_t room = e->q->t->payload_size, used = 0, total = iov[0].iov_len;
	char *payload = e->buf + REQ_ROOM;
	int i;

	memcpy(e->hdr.in_out, iov[0].iov_base, sizeof(struct fuse_out_header));
	for (i = 1; i < count; i++) {
		if (iov[i].iov_len > room - used) {
			/* Cannot happen: libfuse never replies beyond max_read/max_write. */
			((struct fuse_out_header *)e->hdr.in_out)->error = -EIO;
			used = 0;
			break;
		}
		memmove(payload + used, iov[i].iov_base, iov[i].iov_len);
		used += iov[i].iov_len;
		total += iov[i].iov_len;
	}
	((struct fuse_out_header *)e->hdr.in_out)->len = (uint32_t)(sizeof(struct fuse_out_header) + used);
	e->hdr.ent.payload_sz = (uint32_t)used;
	e->replied = 1;
	return (ssize_t)total;
}

static ssize_t hook_writev(int fd, struct iovec *iov, int count, void *userdata)
{
	struct uring_transport *t = the_transport;
	const struct fuse_out_header *out = iov[0].iov_base;
	struct uring_ent *e = cur_ent;
	ssize_t n;

	if (count > 0 && iov[0].iov_len >= sizeof(*out))
		uext4_loop_replied(out);
	if (e && out->unique == e->unique && !e->replied)
		return capture_reply(e, iov, count);
	if (t && out->unique && out->unique == t->init_unique && !t->init_replied) {
		patch_init_reply(t, iov, count);
		uext4_loop_init_reply(iov, count);
		n = writev(fd, iov, count);
		if (n >= 0 && out->error == 0)
			t->init_replied = 1;
		return n;
	}
	return writev(fd, iov, count);
}

/* Large read replies may come as a splice from libfuse's pipe. */
static ssize_t hook_splice_send(int fdin, off_t *offin, int fdout, off_t *offout,
				size_t len, unsigned int flags, void *userdata)
{
	struct uring_ent *e = cur_ent;
	struct fuse_out_header oh;
	struct iovec iov[2];
	size_t got = 0;
	ssize_t n;

	if (!e || len < sizeof(oh) || len - sizeof(oh) > e->q->t->payload_size)
		return splice(fdin, offin, fdout, offout, len, flags);
	/* Read the pipe straight into the entry: header, then payload. */
	iov[0] = (struct iovec){ &oh, sizeof(oh) };
	iov[1] = (struct iovec){ e->buf + REQ_ROOM, len - sizeof(oh) };
	while (got < len) {
		n = readv(fdin, iov, 2);
		if (n <= 0)
			return n < 0 ? -1 : (ssize_t)got;
		got += (size_t)n;
		for (int i = 0; i < 2 && n > 0; i++) {
			size_t step = (size_t)n < iov[i].iov_len ? (size_t)n : iov[i].iov_len;

			iov[i].iov_base = (char *)iov[i].iov_base + step;
			iov[i].iov_len -= step;
			n -= (ssize_t)step;
		}
	}
	iov[0] = (struct iovec){ &oh, sizeof(oh) };
	iov[1] = (struct iovec){ e->buf + REQ_ROOM, len - sizeof(oh) };
	/* The data is in place already: capture_reply's memmove is a no-op. */
	uext4_loop_replied(&oh);
	return capture_reply(e, iov, 2);
}

static const struct fuse_custom_io uring_io = {
	.writev = hook_writev,
	.read = hook_read,
	.splice_send = hook_splice_send,
};

/* ---- queues ---------------------------------------------------------------- */

static void queue_cmd(struct uring_ent *e, unsigned op, uint64_t commit_id)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&e->q->ring);
	struct u4_uring_cmd_req req = { .commit_id = commit_id, .qid = (uint16_t)e->q->qid };

	/* The ring has room for every entry plus the stop poll. */
	memset(sqe, 0, 2 * sizeof(*sqe));       /* an SQE128 slot */
	io_uring_prep_rw(IORING_OP_URING_CMD, sqe, e->q->t->fd, e->iov, 2, 0);
	sqe->cmd_op = op;
	memcpy(sqe->cmd, &req, sizeof(req));
	io_uring_sqe_set_data(sqe, e);
}

static void queue_report(struct uring_queue *q, int state, int err, const char *what)
{
	pthread_mutex_lock(&q->t->lock);
	q->state = state;
	q->err = err;
	q->what = what;
	pthread_cond_broadcast(&q->t->cond);
	pthread_mutex_unlock(&q->t->lock);
}

static int queue_setup(struct uring_queue *q)
{
	struct uring_transport *t = q->t;
	unsigned flags = IORING_SETUP_SQE128 | IORING_SETUP_SINGLE_ISSUER |
			 IORING_SETUP_DEFER_TASKRUN;
	int ret, i;

	ret = io_uring_queue_init(URING_DEPTH + 1, &q->ring, flags);
	if (ret == -EINVAL)     /* a kernel without the task-run options */
		ret = io_uring_queue_init(URING_DEPTH + 1, &q->ring, IORING_SETUP_SQE128);
	if (ret < 0) {
		queue_report(q, -1, ret, "io_uring_queue_init");
		return ret;
	}
	q->ring_ok = 1;
	for (i = 0; i < URING_DEPTH; i++) {
		struct uring_ent *e = &q->ents[i];

		e->q = q;
		e->buf = malloc(REQ_ROOM + t->payload_size);
		if (!e->buf) {
			queue_report(q, -1, -ENOMEM, "allocating ring buffers");
			return -ENOMEM;
		}
		e->iov[0] = (struct iovec){ &e->hdr, sizeof(e->hdr) };
		e->iov[1] = (struct iovec){ e->buf + REQ_ROOM, t->payload_size };
		queue_cmd(e, U4_URING_CMD_REGISTER, 0);
		e->live = 1;
	}
	io_uring_prep_poll_add(io_uring_get_sqe(&q->ring), t->stop_fd, POLLIN);
	/* (user_data of that SQE is STOP_TAG, 0, from the prep) */
	ret = io_uring_submit(&q->ring);
	if (ret < 0) {
		queue_report(q, -1, ret, "io_uring_submit");
		return ret;
	}
	return 0;
}

/*
 * A request in entry e: make it contiguous right before its payload, as
 * read(2) on /dev/fuse delivers it, run it through libfuse, and queue the
 * commit of the reply (which fetches the next request into e).
 */
static void serve_ent(struct uring_ent *e)
{
	struct fuse_in_header in;
	size_t payload = e->hdr.ent.payload_sz, op;
	struct fuse_out_header *out = (void *)e->hdr.in_out;
	char *start;

	memcpy(&in, e->hdr.in_out, sizeof(in));
	op = in.len - sizeof(in) - payload;
	if (in.len < sizeof(in) + payload || op > U4_URING_HDR_SZ ||
	    payload > e->q->t->payload_size) {
		/* The kernel broke the layout we rely on: fail the request. */
		syslog(LOG_ERR, "uext4: io_uring request %u of %u bytes, payload %zu: bad layout",
		       in.opcode, in.len, payload);
		*out = (struct fuse_out_header){ .len = sizeof(*out), .error = -EIO,
						 .unique = in.unique };
		e->hdr.ent.payload_sz = 0;
	} else {
		start = e->buf + REQ_ROOM - sizeof(in) - op;
		memcpy(start, &in, sizeof(in));
		memcpy(start + sizeof(in), e->hdr.op_in, op);
		struct fuse_buf fbuf = { .mem = start, .size = in.len };

		e->unique = in.unique;
		e->replied = 0;
		cur_ent = e;
		uext4_loop_request(start, in.len);
		fuse_session_process_buf(e->q->t->se, &fbuf);
		cur_ent = NULL;
		if (!e->replied) {
			/* Only FORGETs go unanswered, and they come through
			 * /dev/fuse; answer anyway so the entry comes back. */
			*out = (struct fuse_out_header){ .len = sizeof(*out), .error = -ENOSYS,
							 .unique = in.unique };
			e->hdr.ent.payload_sz = 0;
		}
	}
	queue_cmd(e, U4_URING_CMD_COMMIT_AND_FETCH, e->hdr.ent.commit_id);
}

/* Handle one completion; returns 1 when the queue must stop. */
static int handle_cqe(struct uring_queue *q, const struct io_uring_cqe *cqe, int *live)
{
	struct uring_ent *e = io_uring_cqe_get_data(cqe);

	if (!e)
		return 1;               /* the stop poll */
	if (cqe->res < 0) {
		/* -ENOTCONN / -ECONNABORTED / -ECANCELED: the connection is going
		 * away.  Anything else costs this entry; say so. */
		if (cqe->res != -ENOTCONN && cqe->res != -ECONNABORTED && cqe->res != -ECANCELED &&
		    !fuse_session_exited(q->t->se))
			syslog(LOG_ERR, "uext4: io_uring queue %u: entry lost: %s", q->qid,
			       strerror(-cqe->res));
		e->live = 0;
		return --*live == 0;
	}
	serve_ent(e);
	return 0;
}

static void queue_loop(struct uring_queue *q)
{
	struct io_uring_cqe *cqe;
	unsigned head, seen;
	int live = URING_DEPTH, stop = 0;

	while (!stop) {
		int ret = io_uring_submit_and_wait(&q->ring, 1);

		if (ret < 0 && ret != -EINTR && ret != -EAGAIN && ret != -EBUSY) {
			syslog(LOG_ERR, "uext4: io_uring queue %u: %s", q->qid, strerror(-ret));
			break;
		}
		seen = 0;
		io_uring_for_each_cqe(&q->ring, head, cqe) {
			seen++;
			if (handle_cqe(q, cqe, &live))
				stop = 1;
		}
		io_uring_cq_advance(&q->ring, seen);
	}
	io_uring_submit(&q->ring);      /* commits of the last batch */
}

static void pin_to_cpu(unsigned cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	/* Best effort: an offline CPU just leaves the thread unpinned. */
	(void)sched_setaffinity(0, sizeof(set), &set);
}

static void *queue_thread(void *arg)
{
	struct uring_queue *q = arg;
	struct io_uring_cqe *cqe;

	pin_to_cpu(q->qid);
	if (queue_setup(q) < 0)
		return NULL;
	/* A refused REGISTER completes at once; an accepted one waits for a
	 * request.  So a completion already there is the kernel's answer. */
	if (io_uring_peek_cqe(&q->ring, &cqe) == 0 && io_uring_cqe_get_data(cqe) && cqe->res < 0) {
		queue_report(q, -1, cqe->res, "FUSE_IO_URING_CMD_REGISTER");
		return NULL;
	}
	queue_report(q, 1, 0, NULL);
	queue_loop(q);
	return NULL;
}

static void queue_free(struct uring_queue *q)
{
	int i;

	if (q->ring_ok)
		io_uring_queue_exit(&q->ring);  /* cancels what is still registered */
	for (i = 0; i < URING_DEPTH; i++)
		free(q->ents[i].buf);
}

/* ---- setup and teardown ------------------------------------------------------ */

/* Queues the kernel expects: one per possible CPU. */
static unsigned possible_cpus(void)
{
	FILE *f = fopen("/sys/devices/system/cpu/possible", "r");
	unsigned lo, hi, n = 0;
	int c;

	if (!f)
		return (unsigned)sysconf(_SC_NPROCESSORS_CONF);
	/* "0-3,8-11": count the ranges */
	while (fscanf(f, "%u", &lo) == 1) {
		hi = lo;
		c = fgetc(f);
		if (c == '-' && fscanf(f, "%u", &hi) == 1)
			c = fgetc(f);
		if (hi + 1 > n)
			n = hi + 1;     /* qids go up to the highest CPU number */
		if (c != ',')
			break;
	}
	fclose(f);
	return n ? n : 1;
}

/* The kernel's switch; NULL if on, else why not. */
const char *uext4_uring_refused(void)
{
	FILE *f = fopen("/sys/module/fuse/parameters/enable_uring", "r");
	int c;

	if (!f)
		return "the kernel lacks FUSE over io_uring (no /sys/module/fuse/parameters/enable_uring)";
	c = fgetc(f);
	fclose(f);
	if (c != 'Y' && c != '1')
		return "FUSE over io_uring is switched off (/sys/module/fuse/parameters/enable_uring is N)";
	return NULL;
}

static void fallback(const char *why, int err)
{
	const char *classic = uext4_loop_name(uext4_loop_classic());

	if (err)
		fprintf(stderr, "uext4 mount: loop=uring: %s: %s; using the classic loop (%s)\n", why,
			strerror(-err), classic);
	else
		fprintf(stderr, "uext4 mount: loop=uring: %s; using the classic loop (%s)\n", why,
			classic);
}

/* Serve /dev/fuse until our INIT reply is in (normally one request). */
static int serve_init(struct uring_transport *t)
{
	struct fuse_buf buf = { 0 };
	int res = 0;

	while (!t->init_replied && !fuse_session_exited(t->se)) {
		res = fuse_session_receive_buf(t->se, &buf);
		if (res == -EINTR)
			continue;
		if (res <= 0)
			break;
		fuse_session_process_buf(t->se, &buf);
	}
	free(buf.mem);
	return res < 0 ? res : 0;
}

static void stop_queues(struct uring_transport *t)
{
	uint64_t one = 1;
	unsigned i;

	if (write(t->stop_fd, &one, sizeof(one)) < 0) {
		/* an eventfd write of 1 cannot fail */
	}
	for (i = 0; i < t->nq; i++)
		if (t->q[i].started)
			pthread_join(t->q[i].tid, NULL);
	for (i = 0; i < t->nq; i++)
		queue_free(&t->q[i]);
}

/* Start the queue threads and wait until each registered or failed.
 * Returns 0, or -1 after printing why (the threads are stopped then). */
static int start_queues(struct uring_transport *t)
{
	sigset_t all, old;
	unsigned i;
	int bad = -1;

	t->q = calloc(t->nq, sizeof(*t->q));
	if (!t->q) {
		fallback("allocating queues", -ENOMEM);
		return -1;
	}
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);  /* signals stay with the caller */
	for (i = 0; i < t->nq; i++) {
		t->q[i].t = t;
		t->q[i].qid = i;
		t->q[i].started = pthread_create(&t->q[i].tid, NULL, queue_thread, &t->q[i]) == 0;
		if (!t->q[i].started)
			queue_report(&t->q[i], -1, -EAGAIN, "pthread_create");
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_mutex_lock(&t->lock);
	for (i = 0; i < t->nq; i++) {
		while (t->q[i].state == 0)
			pthread_cond_wait(&t->cond, &t->lock);
		if (t->q[i].state < 0 && bad < 0)
			bad = (int)i;
	}
	pthread_mutex_unlock(&t->lock);
	if (bad >= 0) {
		char why[128];

		snprintf(why, sizeof(why), "queue %d: %s failed", bad, t->q[bad].what);
		fallback(why, t->q[bad].err);
		stop_queues(t);
		return -1;
	}
	return 0;
}

static size_t max_size(size_t a, size_t b)
{
	return a > b ? a : b;
}

/* Once INIT is answered: can we, and did we, get io_uring queues going? */
static int try_uring(struct uring_transport *t)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);

	if (!t->init_replied) {
		fallback("the session ended before INIT", 0);
		return -1;
	}
	if (!t->offered) {
		fallback("the kernel did not offer FUSE_OVER_IO_URING in INIT", 0);
		return -1;
	}
	/* The kernel wants max(FUSE_MIN_READ_BUFFER, max_write, max_pages pages). */
	t->payload_size = max_size(8192, max_size(t->max_write, (size_t)t->max_pages * page));
	t->nq = possible_cpus();
	t->stop_fd = eventfd(0, EFD_CLOEXEC);
	if (t->stop_fd < 0) {
		fallback("eventfd", -errno);
		return -1;
	}
	if (start_queues(t) < 0)
		return -1;
	fprintf(stderr, "uext4 mount: serving FUSE over io_uring: %u queues of %d entries\n", t->nq,
		URING_DEPTH);
	return 0;
}

static void call_ready(const struct uext4_loop_opts *o)
{
	if (o->ready)
		o->ready(o->ready_arg);
}

int uext4_uring_run(struct fuse_session *se, const struct uext4_loop_opts *o)
{
	struct uring_transport t = { .se = se, .fd = fuse_session_fd(se), .stop_fd = -1,
				     .lock = PTHREAD_MUTEX_INITIALIZER,
				     .cond = PTHREAD_COND_INITIALIZER };
	struct uext4_loop_opts classic = *o;
	const char *why = uext4_uring_refused();
	int ret, up;

	classic.kind = uext4_loop_classic();
	if (why) {
		fallback(why, 0);
		return uext4_loop_run(se, &classic);
	}
	the_transport = &t;
	uext4_loop_hooks_set(o);        /* our hooks call the loop's */
	ret = fuse_session_custom_io(se, &uring_io, t.fd);
	if (ret < 0) {
		the_transport = NULL;
		fallback("fuse_session_custom_io", ret);
		return uext4_loop_run(se, &classic);
	}
	ret = serve_init(&t);
	up = ret == 0 && try_uring(&t) == 0;
	call_ready(o);
	classic.ready = NULL;
	classic.hooks_in_place = 1;
	if (up)
		classic.kind = UEXT4_LOOP_ST;   /* beside the queues: one thread */
	if (ret == 0)
		ret = uext4_loop_run(se, &classic);     /* FORGET, INTERRUPT, early requests */
	if (up)
		stop_queues(&t);
	if (t.stop_fd >= 0)
		close(t.stop_fd);
	free(t.q);
	the_transport = NULL;
	return ret;
}
