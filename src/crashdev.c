/*
 * crashdev.c - two block devices that keep writes in memory.
 *
 * overlay (bdev_open_overlay): writes land in a hash map of 4 KiB chunks
 *   over a base device, which is never written; reads see the chunks
 *   first.  A read-only mount of a dirty image replays its journal into
 *   one, so the image stays untouched.  Flush does nothing.
 *
 * crash recorder (crashrec_open, crashdev.h): the whole image in memory,
 *   plus a log of every write (split into file-system blocks) and every
 *   flush, from which crash states are materialized as image files.
 *
 * Locking: each device has one mutex (RANK_LEAF: nothing is taken inside
 * it).  The overlay holds it only to look up, insert and copy chunks; reads
 * of the base device happen outside it.  The recorder holds it for every
 * operation (test-only device).
 */
#include "blockdev.h"
#include "crashdev.h"
#include "error.h"
#include "internal.h"
#include "lock.h"
#include "ondisk.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Rejects [off, off+len) unless it lies inside the device. */
static int crash_check_range(struct bdev *d, const char *what, size_t len, uint64_t off)
{
	if (off > d->size || len > d->size - off)
		return fs_err(EIO, "%s of %zu bytes at offset %llu is past the end of the "
			      "device (%llu bytes)", what, len, (unsigned long long)off,
			      (unsigned long long)d->size);
	return 0;
}

/* ================================================================ overlay */

#define OVL_CHUNK 4096u

struct ovl_chunk {
	uint64_t index;             /* byte offset / OVL_CHUNK */
	struct ovl_chunk *next;     /* hash chain */
	uint8_t data[OVL_CHUNK];    /* the chunk as written (base bytes elsewhere) */
};

struct ovl_dev {
	struct bdev bdev;
	struct bdev *base;          /* owned; only read */
	struct ulock lock;          /* RANK_LEAF: buckets, nbuckets, count, chunk data */
	struct ovl_chunk **buckets;
	size_t nbuckets;            /* power of two */
	size_t count;
};

static struct ovl_dev *to_ovl(struct bdev *d)
{
	return (struct ovl_dev *)d;
}

static size_t ovl_hash(uint64_t index, size_t nbuckets)
{
	return (size_t)((index * 0x9E3779B97F4A7C15ull) >> 17) & (nbuckets - 1);
}

/* Caller holds o->lock. */
static struct ovl_chunk *ovl_find(struct ovl_dev *o, uint64_t index)
{
	struct ovl_chunk *c = o->buckets[ovl_hash(index, o->nbuckets)];

	while (c && c->index != index)
		c = c->next;
	return c;
}

/* Doubles the table when chains get long; on ENOMEM keeps the old one
 * (longer chains, still correct).  Caller holds o->lock. */
static void ovl_maybe_grow(struct ovl_dev *o)
{
	size_t n = o->nbuckets * 2;
	struct ovl_chunk **nb;

	if (o->count < o->nbuckets * 2)
		return;
	nb = calloc(n, sizeof(*nb));
	if (!nb)
		return;
	for (size_t i = 0; i < o->nbuckets; i++) {
		struct ovl_chunk *c = o->buckets[i], *next;

		for (; c; c = next) {
			size_t h = ovl_hash(c->index, n);

			next = c->next;
			c->next = nb[h];
			nb[h] = c;
		}
	}
	free(o->buckets);
	o->buckets = nb;
	o->nbuckets = n;
}

/* Caller holds o->lock. */
static void ovl_insert(struct ovl_dev *o, struct ovl_chunk *c)
{
	size_t h;

	ovl_maybe_grow(o);
	h = ovl_hash(c->index, o->nbuckets);
	c->next = o->buckets[h];
	o->buckets[h] = c;
	o->count++;
}

/* Bytes of chunk index inside the device (the last chunk may be short). */
static size_t ovl_chunk_len(struct ovl_dev *o, uint64_t index)
{
	uint64_t start = index * OVL_CHUNK;

	return (size_t)MIN((uint64_t)OVL_CHUNK, o->bdev.size - start);
}

static int ovl_read(struct bdev *d, void *buf, size_t len, uint64_t off)
{
	struct ovl_dev *o = to_ovl(d);
	uint8_t *p = buf;
	int err = crash_check_range(d, "overlay read", len, off);

	while (!err && len > 0) {
		uint64_t index = off / OVL_CHUNK;
		size_t in = (size_t)(off % OVL_CHUNK);
		size_t n = MIN(len, (size_t)OVL_CHUNK - in);
		struct ovl_chunk *c;

		ulock_lock(&o->lock);
		c = ovl_find(o, index);
		if (c)
			memcpy(p, c->data + in, n);
		ulock_unlock(&o->lock);
		/* Not written: the base has it (a concurrent write to another
		 * range of this chunk leaves these bytes equal to the base's). */
		if (!c)
			err = bdev_read(o->base, p, n, off);
		p += n;
		off += n;
		len -= n;
	}
	return err;
}

/* A new chunk holding the base device's bytes (outside the lock). */
static int ovl_new_chunk(struct ovl_dev *o, uint64_t index, bool whole, struct ovl_chunk **out)
{
	struct ovl_chunk *c = calloc(1, sizeof(*c));
	int err = 0;

	if (!c)
		return fs_err(ENOMEM, "overlay: out of memory for a chunk at offset %llu",
			      (unsigned long long)(index * OVL_CHUNK));
	c->index = index;
	if (!whole)
		err = bdev_read(o->base, c->data, ovl_chunk_len(o, index), index * OVL_CHUNK);
	if (err) {
		free(c);
		return err;
	}
	*out = c;
	return 0;
}

/* Write n bytes at byte in of chunk index. */
static int ovl_write_chunk(struct ovl_dev *o, uint64_t index, size_t in, const uint8_t *p,
			   size_t n)
{
	struct ovl_chunk *c, *fresh = NULL;
	int err;

	ulock_lock(&o->lock);
	c = ovl_find(o, index);
	if (c)
		memcpy(c->data + in, p, n);
	ulock_unlock(&o->lock);
	if (c)
		return 0;
	err = ovl_new_chunk(o, index, n == ovl_chunk_len(o, index), &fresh);
	if (err)
		return err;
	ulock_lock(&o->lock);
	c = ovl_find(o, index);     /* another writer may have inserted it meanwhile */
	if (!c) {
		ovl_insert(o, fresh);
		c = fresh;
		fresh = NULL;
	}
	memcpy(c->data + in, p, n);
	ulock_unlock(&o->lock);
	free(fresh);
	return 0;
}

static int ovl_write(struct bdev *d, const void *buf, size_t len, uint64_t off)
{
	struct ovl_dev *o = to_ovl(d);
	const uint8_t *p = buf;
	int err = crash_check_range(d, "overlay write", len, off);

	while (!err && len > 0) {
		size_t in = (size_t)(off % OVL_CHUNK);
		size_t n = MIN(len, (size_t)OVL_CHUNK - in);

		err = ovl_write_chunk(o, off / OVL_CHUNK, in, p, n);
		p += n;
		off += n;
		len -= n;
	}
	return err;
}

static int ovl_flush(struct bdev *d)
{
	(void)d;
	return 0;   /* nothing ever reaches stable storage */
}

static void ovl_close(struct bdev *d)
{
	struct ovl_dev *o = to_ovl(d);

	for (size_t i = 0; i < o->nbuckets; i++) {
		struct ovl_chunk *c = o->buckets[i], *next;

		for (; c; c = next) {
			next = c->next;
			free(c);
		}
	}
	free(o->buckets);
	ulock_destroy(&o->lock);
	bdev_close(o->base);
	free(o);
}

static const struct bdev_ops ovl_ops = {
	.read = ovl_read,
	.write = ovl_write,
	.flush = ovl_flush,
	.close = ovl_close,
};

struct bdev *bdev_open_overlay(struct bdev *base)
{
	struct ovl_dev *o;

	if (!base)
		return NULL;
	o = calloc(1, sizeof(*o));
	if (o)
		o->buckets = calloc(64, sizeof(*o->buckets));
	if (!o || !o->buckets) {
		free(o);
		bdev_close(base);   /* the overlay owns base, also on failure */
		fs_err(ENOMEM, "out of memory for an overlay device");
		return NULL;
	}
	o->nbuckets = 64;
	o->base = base;
	ulock_init(&o->lock, RANK_LEAF);
	o->bdev.ops = &ovl_ops;
	o->bdev.size = base->size;
	o->bdev.read_only = 0;
	o->bdev.priv = o;
	return &o->bdev;
}

/* ========================================================= crash recorder */

struct crec_piece {
	uint64_t off;
	uint32_t len;               /* <= unit, never crosses a unit boundary */
	uint8_t *data;
};

struct crec_dev {
	struct bdev bdev;
	_Atomic int refs;           /* bdev_close() drops one */
	uint32_t unit;              /* crash unit: fs block size; immutable */
	struct ulock lock;          /* RANK_LEAF: everything below */
	uint8_t *initial;           /* image at open, bdev.size bytes; immutable */
	uint8_t *live;              /* current contents */
	struct crec_piece *log;     /* every write, split per unit, in order */
	size_t nlog, caplog;
	size_t *epoch_start;        /* [k] = first log index of epoch k, k <= nflushes */
	uint32_t nflushes, capepochs;
	uint8_t *cache;             /* initial + epochs < cache_k (materialize) */
	uint32_t cache_k;
};

static const struct bdev_ops crec_ops;

static struct crec_dev *to_crec(struct bdev *d)
{
	return d && d->ops == &crec_ops ? (struct crec_dev *)d : NULL;
}

static int crec_read(struct bdev *d, void *buf, size_t len, uint64_t off)
{
	struct crec_dev *c = to_crec(d);
	int err = crash_check_range(d, "crashrec read", len, off);

	if (err)
		return err;
	ulock_lock(&c->lock);
	memcpy(buf, c->live + off, len);
	ulock_unlock(&c->lock);
	return 0;
}

/* Append one piece; caller holds c->lock. */
static int crec_log_piece(struct crec_dev *c, uint64_t off, const uint8_t *p, uint32_t n)
{
	struct crec_piece *pc;

	if (c->nlog == c->caplog) {
		size_t cap = c->caplog ? c->caplog * 2 : 1024;
		struct crec_piece *nl = realloc(c->log, cap * sizeof(*nl));

		if (!nl)
			return fs_err(ENOMEM, "crashrec: out of memory for the write log");
		c->log = nl;
		c->caplog = cap;
	}
	pc = &c->log[c->nlog];
	pc->data = malloc(n);
	if (!pc->data)
		return fs_err(ENOMEM, "crashrec: out of memory for a logged write");
	memcpy(pc->data, p, n);
	pc->off = off;
	pc->len = n;
	c->nlog++;
	return 0;
}

static int crec_write(struct bdev *d, const void *buf, size_t len, uint64_t off)
{
	struct crec_dev *c = to_crec(d);
	const uint8_t *p = buf;
	int err = crash_check_range(d, "crashrec write", len, off);

	if (err)
		return err;
	ulock_lock(&c->lock);
	memcpy(c->live + off, buf, len);
	while (!err && len > 0) {
		uint32_t n = (uint32_t)MIN((uint64_t)len, c->unit - off % c->unit);

		err = crec_log_piece(c, off, p, n);
		p += n;
		off += n;
		len -= n;
	}
	ulock_unlock(&c->lock);
	return err;
}

static int crec_flush(struct bdev *d)
{
	struct crec_dev *c = to_crec(d);
	int err = 0;

	ulock_lock(&c->lock);
	if (c->nflushes + 1 >= c->capepochs) {
		uint32_t cap = c->capepochs * 2;
		size_t *ne = realloc(c->epoch_start, cap * sizeof(*ne));

		if (ne) {
			c->epoch_start = ne;
			c->capepochs = cap;
		} else {
			err = fs_err(ENOMEM, "crashrec: out of memory for the flush log");
		}
	}
	if (!err) {
		c->nflushes++;
		c->epoch_start[c->nflushes] = c->nlog;
	}
	ulock_unlock(&c->lock);
	return err;
}

static void crec_free(struct crec_dev *c)
{
	for (size_t i = 0; i < c->nlog; i++)
		free(c->log[i].data);
	free(c->log);
	free(c->epoch_start);
	free(c->initial);
	free(c->live);
	free(c->cache);
	ulock_destroy(&c->lock);
	free(c);
}

static void crec_close(struct bdev *d)
{
	struct crec_dev *c = to_crec(d);

	if (atomic_fetch_sub(&c->refs, 1) == 1)
		crec_free(c);
}

static const struct bdev_ops crec_ops = {
	.read = crec_read,
	.write = crec_write,
	.flush = crec_flush,
	.close = crec_close,
};

/* The file system's block size from an ext4 superblock (1024 without one). */
static uint32_t image_block_size(const uint8_t *img, uint64_t size)
{
	const struct ext4_super_block *sb = (const void *)(img + 1024);
	uint32_t log;

	if (size < 2048 || le16(sb->s_magic) != EXT4_SUPER_MAGIC)
		return 1024;
	log = le32(sb->s_log_block_size);
	return log <= 6 ? 1024u << log : 1024;
}

/* Read the whole file at path into a new buffer. */
static int load_image(const char *path, uint8_t **out, uint64_t *size)
{
	struct stat st;
	uint8_t *buf;
	size_t done = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return fs_err(errno, "crashrec: cannot open %s: %s", path, strerror(errno));
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size <= 0) {
		close(fd);
		return fs_err(EINVAL, "crashrec: %s is not a non-empty regular file", path);
	}
	buf = malloc((size_t)st.st_size);
	if (!buf) {
		close(fd);
		return fs_err(ENOMEM, "crashrec: cannot allocate %lld bytes for %s",
			      (long long)st.st_size, path);
	}
	while (done < (size_t)st.st_size) {
		ssize_t n = pread(fd, buf + done, (size_t)st.st_size - done, (off_t)done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			int e = n < 0 ? errno : EIO;

			free(buf);
			close(fd);
			return fs_err(e, "crashrec: reading %s failed", path);
		}
		done += (size_t)n;
	}
	close(fd);
	*out = buf;
	*size = (uint64_t)st.st_size;
	return 0;
}

struct bdev *crashrec_open(const char *image, int *err)
{
	struct crec_dev *c = calloc(1, sizeof(*c));
	uint64_t size = 0;

	if (!c) {
		*err = fs_err(ENOMEM, "crashrec: out of memory");
		return NULL;
	}
	*err = load_image(image, &c->initial, &size);
	if (*err) {
		free(c);
		return NULL;
	}
	c->live = malloc((size_t)size);
	c->cache = malloc((size_t)size);
	c->capepochs = 64;
	c->epoch_start = calloc(c->capepochs, sizeof(*c->epoch_start));
	ulock_init(&c->lock, RANK_LEAF);
	if (!c->live || !c->cache || !c->epoch_start) {
		crec_free(c);
		*err = fs_err(ENOMEM, "crashrec: out of memory for %s", image);
		return NULL;
	}
	memcpy(c->live, c->initial, (size_t)size);
	memcpy(c->cache, c->initial, (size_t)size);
	c->unit = image_block_size(c->initial, size);
	atomic_init(&c->refs, 1);
	c->bdev.ops = &crec_ops;
	c->bdev.size = size;
	c->bdev.priv = c;
	*err = 0;
	return &c->bdev;
}

void crashrec_hold(struct bdev *d)
{
	atomic_fetch_add(&to_crec(d)->refs, 1);
}

uint32_t crashrec_unit(struct bdev *d)
{
	return to_crec(d)->unit;
}

uint32_t crashrec_nflushes(struct bdev *d)
{
	struct crec_dev *c = to_crec(d);
	uint32_t n;

	ulock_lock(&c->lock);
	n = c->nflushes;
	ulock_unlock(&c->lock);
	return n;
}

uint32_t crashrec_mark(struct bdev *d)
{
	return crashrec_nflushes(d);
}

/* First log index of epoch k and one past its last; caller holds c->lock. */
static void epoch_bounds(struct crec_dev *c, uint32_t k, size_t *from, size_t *to)
{
	if (k > c->nflushes) {
		*from = *to = c->nlog;
		return;
	}
	*from = c->epoch_start[k];
	*to = k < c->nflushes ? c->epoch_start[k + 1] : c->nlog;
}

size_t crashrec_nwrites_after(struct bdev *d, uint32_t k)
{
	struct crec_dev *c = to_crec(d);
	size_t from, to;

	ulock_lock(&c->lock);
	epoch_bounds(c, k, &from, &to);
	ulock_unlock(&c->lock);
	return to - from;
}

int crashrec_piece(struct bdev *d, uint32_t k, size_t i, uint64_t *off, uint32_t *len)
{
	struct crec_dev *c = to_crec(d);
	size_t from, to;
	int err = 0;

	ulock_lock(&c->lock);
	epoch_bounds(c, k, &from, &to);
	if (i < to - from) {
		*off = c->log[from + i].off;
		*len = c->log[from + i].len;
	} else {
		err = fs_err(EINVAL, "crashrec: epoch %u has no piece %zu", k, i);
	}
	ulock_unlock(&c->lock);
	return err;
}

/* Apply log entries [from, to) to img; caller holds c->lock. */
static void apply_pieces(struct crec_dev *c, uint8_t *img, size_t from, size_t to)
{
	for (size_t i = from; i < to; i++)
		memcpy(img + c->log[i].off, c->log[i].data, c->log[i].len);
}

/* Bring c->cache to "initial + epochs < k"; caller holds c->lock. */
static void advance_cache(struct crec_dev *c, uint32_t k)
{
	if (c->cache_k > k) {
		memcpy(c->cache, c->initial, (size_t)c->bdev.size);
		c->cache_k = 0;
	}
	for (; c->cache_k < k; c->cache_k++) {
		size_t from, to;

		epoch_bounds(c, c->cache_k, &from, &to);
		apply_pieces(c, c->cache, from, to);
	}
}

static int write_all(int fd, const uint8_t *p, size_t len, uint64_t off)
{
	while (len > 0) {
		ssize_t n = pwrite(fd, p, len, (off_t)off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -(n < 0 ? errno : EIO);
		p += n;
		len -= (size_t)n;
		off += (uint64_t)n;
	}
	return 0;
}

int crashrec_materialize(struct bdev *d, uint32_t k, const bool *keep, const char *path)
{
	struct crec_dev *c = to_crec(d);
	size_t from, to;
	int err, fd;

	if (k > crashrec_nflushes(d))
		return fs_err(EINVAL, "crashrec: no flush %u (only %u)", k, crashrec_nflushes(d));
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return fs_err(errno, "crashrec: cannot create %s: %s", path, strerror(errno));
	ulock_lock(&c->lock);
	advance_cache(c, k);
	err = write_all(fd, c->cache, (size_t)c->bdev.size, 0);
	epoch_bounds(c, k, &from, &to);
	for (size_t i = from; !err && keep && i < to; i++)
		if (keep[i - from])
			err = write_all(fd, c->log[i].data, c->log[i].len, c->log[i].off);
	ulock_unlock(&c->lock);
	if (close(fd) < 0 && !err)
		err = -errno;
	if (err)
		return fs_err(-err, "crashrec: writing %s failed: %s", path, strerror(-err));
	return 0;
}
