/*
 * faultdev.c - fault-injecting block device; see faultdev.h.
 */
#include "blockdev.h"
#include "error.h"
#include "faultdev.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>

struct faultdev {
	struct bdev dev;
	struct bdev *base;
	_Atomic int owns_base;
	/* the rule: each field atomic (see faultdev.h) */
	_Atomic int kind;
	_Atomic uint64_t n, lo, hi;
	_Atomic uint32_t k;
	_Atomic int silent;
	_Atomic int writes_only;
	/* counts since arming, used to find the nth access */
	_Atomic uint64_t nreads, nwrites, nflushes;
	/* totals for faultdev_stats */
	_Atomic uint64_t treads, twrites, tflushes, tfaults;
	_Atomic(_Atomic uint64_t *) ext_faults;  /* faultdev_count_into() */
};

static struct faultdev *to_fd(struct bdev *d) { return d->priv; }

static int overlaps(struct faultdev *f, size_t len, uint64_t off)
{
	return off < atomic_load(&f->hi) && off + len > atomic_load(&f->lo);
}

static void count_fault(struct faultdev *f)
{
	_Atomic uint64_t *ext = atomic_load(&f->ext_faults);

	atomic_fetch_add(&f->tfaults, 1);
	if (ext)
		atomic_fetch_add(ext, 1);
}

static int fault(struct faultdev *f, int err, const char *what, uint64_t off)
{
	count_fault(f);
	return fs_err(err, "faultdev: injected %s error at offset %llu", what,
		      (unsigned long long)off);
}

static int fd_read(struct bdev *d, void *buf, size_t len, uint64_t off)
{
	struct faultdev *f = to_fd(d);
	uint64_t nth = atomic_fetch_add(&f->nreads, 1) + 1;
	int kind = atomic_load(&f->kind);

	atomic_fetch_add(&f->treads, 1);
	if (kind == FD_EIO_NTH_READ && nth == atomic_load(&f->n))
		return fault(f, EIO, "read", off);
	if (kind == FD_EIO_RANGE && !atomic_load(&f->writes_only) && overlaps(f, len, off))
		return fault(f, EIO, "read", off);
	if (kind == FD_SHORT_READ && nth == atomic_load(&f->n)) {
		uint32_t k = atomic_load(&f->k);
		if (k < len && k > 0) {
			int err = bdev_read(f->base, buf, k, off);
			if (err)
				return err;
		}
		if (k < len)
			return fault(f, EIO, "short read", off);
	}
	return bdev_read(f->base, buf, len, off);
}

static int fd_write(struct bdev *d, const void *buf, size_t len, uint64_t off)
{
	struct faultdev *f = to_fd(d);
	uint64_t nth = atomic_fetch_add(&f->nwrites, 1) + 1;
	int kind = atomic_load(&f->kind);
	uint64_t n = atomic_load(&f->n);

	atomic_fetch_add(&f->twrites, 1);
	if (kind == FD_EIO_NTH_WRITE && nth == n)
		return fault(f, EIO, "write", off);
	if (kind == FD_EIO_RANGE && overlaps(f, len, off))
		return fault(f, EIO, "write", off);
	if (kind == FD_ENOSPC && off + len > atomic_load(&f->lo))
		return fault(f, ENOSPC, "no-space", off);
	if (kind == FD_READ_ONLY && nth >= n)
		return fault(f, EROFS, "read-only", off);
	if (kind == FD_TORN_WRITE && nth == n) {
		uint32_t k = atomic_load(&f->k);
		if (k < len) {
			int err = k ? bdev_write(f->base, buf, k, off) : 0;
			if (err)
				return err;
			if (atomic_load(&f->silent)) {
				count_fault(f);
				return 0;
			}
			return fault(f, EIO, "torn write", off);
		}
	}
	return bdev_write(f->base, buf, len, off);
}

static int fd_flush(struct bdev *d)
{
	struct faultdev *f = to_fd(d);
	uint64_t nth = atomic_fetch_add(&f->nflushes, 1) + 1;

	atomic_fetch_add(&f->tflushes, 1);
	if (atomic_load(&f->kind) == FD_EIO_NTH_FLUSH && nth == atomic_load(&f->n))
		return fault(f, EIO, "flush", 0);
	return bdev_flush(f->base);
}

static void fd_close(struct bdev *d)
{
	struct faultdev *f = to_fd(d);

	if (atomic_load(&f->owns_base))
		bdev_close(f->base);
	free(f);
}

static const struct bdev_ops faultdev_ops = {
	.read = fd_read, .write = fd_write, .flush = fd_flush, .close = fd_close,
};

struct bdev *faultdev_open(struct bdev *base)
{
	struct faultdev *f = calloc(1, sizeof(*f));

	if (!f)
		return NULL;
	f->base = base;
	atomic_init(&f->owns_base, 1);
	f->dev.ops = &faultdev_ops;
	f->dev.size = base->size;
	f->dev.read_only = base->read_only;
	f->dev.priv = f;
	return &f->dev;
}

void faultdev_arm(struct bdev *d, const struct faultdev_rule *r)
{
	struct faultdev *f = to_fd(d);

	atomic_store(&f->kind, FD_NONE);
	atomic_store(&f->nreads, 0);
	atomic_store(&f->nwrites, 0);
	atomic_store(&f->nflushes, 0);
	atomic_store(&f->n, r->n);
	atomic_store(&f->lo, r->lo);
	atomic_store(&f->hi, r->hi);
	atomic_store(&f->k, r->k);
	atomic_store(&f->silent, r->silent);
	atomic_store(&f->writes_only, r->writes_only);
	atomic_store(&f->kind, (int)r->kind);
}

void faultdev_disarm(struct bdev *d) { atomic_store(&to_fd(d)->kind, FD_NONE); }

void faultdev_stats(struct bdev *d, struct faultdev_stats *out)
{
	struct faultdev *f = to_fd(d);

	out->reads = atomic_load(&f->treads);
	out->writes = atomic_load(&f->twrites);
	out->flushes = atomic_load(&f->tflushes);
	out->faults = atomic_load(&f->tfaults);
}

void faultdev_count_into(struct bdev *d, _Atomic uint64_t *faults)
{
	atomic_store(&to_fd(d)->ext_faults, faults);
}

struct bdev *faultdev_detach(struct bdev *d)
{
	struct faultdev *f = to_fd(d);

	atomic_store(&f->owns_base, 0);
	return f->base;
}
