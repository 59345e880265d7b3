/*
 * blockdev.h - the block device interface (blockdev.c).
 */
#ifndef UEXT4_BLOCKDEV_H
#define UEXT4_BLOCKDEV_H

#include <stddef.h>
#include <stdint.h>

/* ---------------------------------------------------------------- blockdev.c
 * The block device interface.  Backends: a file (image or block device,
 * pread/pwrite), memory (tests), an NBD export (nbd.c), the in-memory
 * overlay and crash recorder (crashdev.c) and the fault injector
 * (faultdev.c): so callers only use the ops.
 */
struct bdev;
struct bdev_ops {
	int (*read)(struct bdev *d, void *buf, size_t len, uint64_t off);
	int (*write)(struct bdev *d, const void *buf, size_t len, uint64_t off);
	int (*flush)(struct bdev *d);
	void (*close)(struct bdev *d);
	/* Optional (NULL: not offered), see nbd.h: bdev_write_fua(), bdev_discard(). */
	int (*write_fua)(struct bdev *d, const void *buf, size_t len, uint64_t off);
	int (*discard)(struct bdev *d, uint64_t off, uint64_t len);
	/* Optional (NULL: read is already uncached): bdev_read_uncached(). */
	int (*read_uncached)(struct bdev *d, void *buf, size_t len, uint64_t off);
};
struct bdev {
	const struct bdev_ops *ops;
	uint64_t size;          /* bytes */
	int read_only;
	void *priv;
};
/* Returns NULL and sets *err (negative errno) with a message on failure. */
struct bdev *bdev_open_file(const char *path, int read_only, int *err);
/* The same for the part of the file from byte offset on (a partition of a
 * disk image): device offset 0 is file offset offset. */
struct bdev *bdev_open_file_at(const char *path, int read_only, uint64_t offset, int *err);
/* A memory device of size bytes, zero-filled; or a copy of an image file
 * (from byte offset on). */
struct bdev *bdev_open_memory(uint64_t size);
struct bdev *bdev_open_memory_copy(const char *path, int *err);
struct bdev *bdev_open_memory_copy_at(const char *path, uint64_t offset, int *err);
static inline int bdev_read(struct bdev *d, void *buf, size_t len, uint64_t off)
{ return d->ops->read(d, buf, len, off); }
static inline int bdev_write(struct bdev *d, const void *buf, size_t len, uint64_t off)
{ return d->ops->write(d, buf, len, off); }
static inline int bdev_flush(struct bdev *d) { return d->ops->flush(d); }
static inline void bdev_close(struct bdev *d) { d->ops->close(d); }
/* Populate's data path: copy len bytes (len < 2 GiB) of host file src from
 * src_off to the device at off with copy_file_range(2), the kernel moving the
 * pages.  Bytes copied (fewer at the source's end), -errno from the copy
 * (no message: the caller names the source), or -EOPNOTSUPP for a device
 * that is not a file (the caller reads and writes instead). */
int bdev_copy_from_fd(struct bdev *d, int src, uint64_t src_off, size_t len, uint64_t off);
/* The same with sendfile(2), which copies between any two file systems
 * (copy_file_range only within one): the kernel reads the source's pages
 * and writes them, one copy instead of a read and a write.  Sends from one
 * thread at a time (it moves the device's file offset). */
int bdev_send_from_fd(struct bdev *d, int src, uint64_t src_off, size_t len, uint64_t off);

/* An IMAGE argument may be a path or an NBD URI (nbd.h). */
/* The device of an IMAGE argument: an NBD export or a file, from byte
 * offset on.  discard nonzero: bdev_discard() trims / punches holes
 * (-o discard); otherwise bdev_discard() does nothing.  NULL and *err
 * (negative errno, message set) on failure. */
struct bdev *bdev_open_path(const char *path, int read_only, uint64_t offset, int discard,
			    int *err);

/* Read what the device holds now, past any cache of this host: the MMP
 * block, which another node writes (mmp.c).  A file device's pread of an
 * image file already is (the host's page cache is the one every local
 * writer goes through, a loop device included), so is an NBD read; a block
 * device first drops its clean cached pages of the range, as e2fsprogs
 * reads the MMP block with O_DIRECT. */
int bdev_read_uncached(struct bdev *d, void *buf, size_t len, uint64_t off);

/* Write and make it durable before returning: one FUA write where the
 * backend has it (NBD server offering FUA), else write + flush. */
int bdev_write_fua(struct bdev *d, const void *buf, size_t len, uint64_t off);

/* The device may forget [off, off + len) (freed blocks, after the commit
 * that freed them).  0 also when the device was not opened with discard or
 * cannot discard: discard is advice, never an error the caller must act
 * on (a failure is counted and logged once by the backend). */
int bdev_discard(struct bdev *d, uint64_t off, uint64_t len);
/* Nonzero when bdev_discard() would reach the device (opened with discard,
 * the device can): the commit checks it once before walking freed blocks.
 * (A backend's discard op answers this when called with len 0.) */
int bdev_discards(struct bdev *d);

#endif
