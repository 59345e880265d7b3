/*
 * nbd.c - block device on an NBD export, through libnbd.
 *
 * IMAGE is an NBD URI (nbd.h); nbd_connect_uri() parses it and connects.
 *
 * Requests from many threads: a libnbd handle is thread-safe, but its
 * synchronous calls hold the handle for the whole round trip, so one handle
 * serves one request at a time.  When the server says multi-conn (every
 * connection sees the others' completed writes, and a flush on one covers
 * them all) we open a pool of connections (UEXT4_NBD_CONNS, default 4, at
 * most 16) and a request takes a free one; otherwise one connection.
 *
 * Durability: flush is NBD_CMD_FLUSH; bdev_write_fua() is one write with
 * the FUA flag when the server offers it (nbd_can_fua), else write+flush.
 * Discard (mounted with discard, server nbd_can_trim) is NBD_CMD_TRIM.
 *
 * The server going away: every request fails with EIO and a message naming
 * the URI, the operation and what libnbd said (nbd_get_error()).  There is
 * no reconnect: a write path that failed has already aborted the journal,
 * and a read that silently reconnected could hide a server that came back
 * with a different (older) export; the caller unmounts, and `uext4
 * recover` replays the journal once the server is back.  A server that
 * stops answering without closing the socket blocks the request (as a
 * kernel nbd device would without a timeout).
 *
 * Locking: each connection has its own mutex (struct nbd_conn.lock), held
 * for one request on it; nothing else in the device changes after
 * open except the atomic counters.
 */
#include "blockdev.h"
#include "error.h"
#include "internal.h"
#include "nbd.h"

#include <libnbd.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NBD_MAX_CONNS 16
#define NBD_DEFAULT_CONNS 4
/* NBD requests carry 32-bit lengths; servers often take less (nbdkit 64 MiB). */
#define NBD_MAX_REQUEST (32u << 20)

/* The connection lock is a plain mutex, not a ulock: it is the innermost
 * lock of all, taken under every other one, including the RANK_LEAF
 * errors lock (recording an error writes the superblock), so no lockdep
 * rank fits it; nothing is ever taken while it is held. */
struct nbd_conn {
	pthread_mutex_t lock;       /* one request at a time on h */
	struct nbd_handle *h;
};

struct nbd_dev {
	struct bdev bdev;
	char *uri;                  /* for messages; immutable */
	uint64_t base;              /* byte offset of device byte 0 in the export */
	int can_fua, can_trim;      /* what the server offers; immutable */
	int discard;                /* mounted with discard (and can_trim) */
	unsigned nconns;            /* immutable */
	_Atomic unsigned next;      /* round-robin start for take_conn() */
	_Atomic uint64_t trim_failures;
	struct nbd_conn conns[NBD_MAX_CONNS];
};

int bdev_is_nbd_uri(const char *path)
{
	return !strncmp(path, "nbd://", 6) || !strncmp(path, "nbds://", 7) ||
	       !strncmp(path, "nbd+", 4) || !strncmp(path, "nbds+", 5);
}

static struct nbd_dev *to_nbd(struct bdev *d)
{
	return (struct nbd_dev *)d;
}

/* A free connection if there is one, else wait for the round-robin pick. */
static struct nbd_conn *take_conn(struct nbd_dev *n)
{
	unsigned start = atomic_fetch_add_explicit(&n->next, 1, memory_order_relaxed);

	for (unsigned i = 0; i < n->nconns; i++) {
		struct nbd_conn *c = &n->conns[(start + i) % n->nconns];

		if (pthread_mutex_trylock(&c->lock) == 0)
			return c;
	}
	pthread_mutex_lock(&n->conns[start % n->nconns].lock);
	return &n->conns[start % n->nconns];
}

static void put_conn(struct nbd_conn *c)
{
	pthread_mutex_unlock(&c->lock);
}

static int nbd_range(struct bdev *d, const char *what, size_t len, uint64_t off)
{
	if (off > d->size || len > d->size - off)
		return fs_err(EIO, "%s: %s of %zu bytes at offset %llu is past the end of the "
			      "export (%llu bytes)", to_nbd(d)->uri, what, len,
			      (unsigned long long)off, (unsigned long long)d->size);
	return 0;
}

/* The message for a failed request: libnbd's text, errno EIO. */
static int nbd_failed(struct nbd_dev *n, const char *what, size_t len, uint64_t off)
{
	const char *why = nbd_get_error();

	return fs_err(EIO, "%s: NBD %s of %zu bytes at offset %llu failed: %s", n->uri, what,
		      len, (unsigned long long)off, why ? why : "unknown libnbd error");
}

static int nbd_dev_read(struct bdev *d, void *buf, size_t len, uint64_t off)
{
	struct nbd_dev *n = to_nbd(d);
	uint8_t *p = buf;
	int err = nbd_range(d, "read", len, off);

	while (!err && len > 0) {
		size_t part = MIN(len, (size_t)NBD_MAX_REQUEST);
		struct nbd_conn *c = take_conn(n);
		int r = nbd_pread(c->h, p, part, n->base + off, 0);

		if (r < 0)
			err = nbd_failed(n, "read", part, off);
		put_conn(c);
		p += part;
		len -= part;
		off += part;
	}
	return err;
}

static int nbd_write_flags(struct bdev *d, const void *buf, size_t len, uint64_t off,
			   uint32_t flags)
{
	struct nbd_dev *n = to_nbd(d);
	const uint8_t *p = buf;
	int err;

	if (d->read_only)
		return fs_err(EROFS, "%s: write at offset %llu on a read-only device", n->uri,
			      (unsigned long long)off);
	err = nbd_range(d, "write", len, off);
	while (!err && len > 0) {
		size_t part = MIN(len, (size_t)NBD_MAX_REQUEST);
		struct nbd_conn *c = take_conn(n);
		int r = nbd_pwrite(c->h, p, part, n->base + off, flags);

		if (r < 0)
			err = nbd_failed(n, flags ? "FUA write" : "write", part, off);
		put_conn(c);
		p += part;
		len -= part;
		off += part;
	}
	return err;
}

static int nbd_dev_write(struct bdev *d, const void *buf, size_t len, uint64_t off)
{
	return nbd_write_flags(d, buf, len, off, 0);
}

/* With multi-conn a flush on any connection covers the writes completed
 * on all of them (that is what the server promises by offering it). */
static int nbd_dev_flush(struct bdev *d)
{
	struct nbd_dev *n = to_nbd(d);
	struct nbd_conn *c;
	int err = 0;

	if (d->read_only)
		return 0;
	c = take_conn(n);
	if (nbd_flush(c->h, 0) < 0)
		err = nbd_failed(n, "flush", 0, 0);
	put_conn(c);
	return err;
}

static int nbd_dev_write_fua(struct bdev *d, const void *buf, size_t len, uint64_t off)
{
	int err;

	if (to_nbd(d)->can_fua)
		return nbd_write_flags(d, buf, len, off, LIBNBD_CMD_FLAG_FUA);
	err = nbd_write_flags(d, buf, len, off, 0);
	return err ? err : nbd_dev_flush(d);
}

static int nbd_dev_discard(struct bdev *d, uint64_t off, uint64_t len)
{
	struct nbd_dev *n = to_nbd(d);

	if (!n->discard || d->read_only)
		return 0;
	if (!len)
		return 1;       /* the query of bdev_discards() */
	if (nbd_range(d, "trim", (size_t)len, off))
		return 0;
	while (len > 0) {
		uint64_t part = MIN(len, (uint64_t)NBD_MAX_REQUEST);
		struct nbd_conn *c = take_conn(n);
		int r = nbd_trim(c->h, part, n->base + off, 0);

		put_conn(c);
		if (r < 0) {
			/* Advice only; the next write reports a dead server. */
			if (atomic_fetch_add(&n->trim_failures, 1) == 0)
				fprintf(stderr, "uext4: %s: NBD trim failed (not retried): %s\n",
					n->uri, nbd_get_error());
			return 0;
		}
		off += part;
		len -= part;
	}
	return 0;
}

static void nbd_dev_close(struct bdev *d)
{
	struct nbd_dev *n = to_nbd(d);

	for (unsigned i = 0; i < n->nconns; i++) {
		if (!n->conns[i].h)
			continue;
		/* A clean NBD_CMD_DISC after the flush the unmount did. */
		nbd_shutdown(n->conns[i].h, 0);
		nbd_close(n->conns[i].h);
		pthread_mutex_destroy(&n->conns[i].lock);
	}
	free(n->uri);
	free(n);
}

static const struct bdev_ops nbd_ops = {
	.read = nbd_dev_read,
	.write = nbd_dev_write,
	.flush = nbd_dev_flush,
	.close = nbd_dev_close,
	.write_fua = nbd_dev_write_fua,
	.discard = nbd_dev_discard,
};

/* One connection to uri into c. */
static int nbd_connect_one(struct nbd_dev *n, struct nbd_conn *c)
{
	c->h = nbd_create();
	if (!c->h)
		return fs_err(ENOMEM, "%s: cannot create an NBD handle: %s", n->uri,
			      nbd_get_error());
	pthread_mutex_init(&c->lock, NULL);
	if (nbd_connect_uri(c->h, n->uri) < 0) {
		int e = nbd_get_errno();

		return fs_err(e > 0 ? e : EIO, "%s: cannot connect to the NBD server: %s",
			      n->uri, nbd_get_error());
	}
	return 0;
}

/* How many connections: 1 unless the server offers multi-conn. */
static unsigned pool_size(struct nbd_handle *h)
{
	const char *env = getenv("UEXT4_NBD_CONNS");
	long want = env ? strtol(env, NULL, 10) : NBD_DEFAULT_CONNS;

	if (nbd_can_multi_conn(h) != 1)
		return 1;
	if (want < 1)
		want = 1;
	return (unsigned)MIN(want, (long)NBD_MAX_CONNS);
}

/* Size, offset and what the server offers, from the first connection. */
static int nbd_describe(struct nbd_dev *n, int read_only, uint64_t offset)
{
	struct nbd_handle *h = n->conns[0].h;
	int64_t size = nbd_get_size(h);

	if (size < 0)
		return fs_err(EIO, "%s: cannot get the export size: %s", n->uri, nbd_get_error());
	if (offset > (uint64_t)size)
		return fs_err(EINVAL, "%s: offset %llu is past the end of the export (%lld bytes)",
			      n->uri, (unsigned long long)offset, (long long)size);
	if (!read_only && nbd_is_read_only(h) == 1)
		return fs_err(EROFS, "%s: the NBD server exports it read-only", n->uri);
	n->base = offset;
	n->bdev.size = (uint64_t)size - offset;
	n->can_fua = nbd_can_fua(h) == 1;
	n->can_trim = nbd_can_trim(h) == 1;
	return 0;
}

struct bdev *bdev_open_nbd(const char *uri, int read_only, uint64_t offset, int discard,
			   int *err)
{
	struct nbd_dev *n = calloc(1, sizeof(*n));
	int e;

	if (!n || !(n->uri = strdup(uri))) {
		free(n);
		*err = fs_err(ENOMEM, "%s: out of memory opening the device", uri);
		return NULL;
	}
	n->nconns = 1;
	e = nbd_connect_one(n, &n->conns[0]);
	if (!e)
		e = nbd_describe(n, read_only, offset);
	if (!e) {
		unsigned want = pool_size(n->conns[0].h);

		while (!e && n->nconns < want)
			e = nbd_connect_one(n, &n->conns[n->nconns++]);
	}
	if (e) {
		nbd_dev_close(&n->bdev);
		*err = e;
		return NULL;
	}
	n->discard = discard && n->can_trim;
	n->bdev.ops = &nbd_ops;
	n->bdev.read_only = read_only;
	n->bdev.priv = n;
	*err = 0;
	return &n->bdev;
}
