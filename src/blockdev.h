/*
 * blockdev.h - the block device interface (blockdev.c).
 */
#ifndef UEXT4_BLOCKDEV_H
#define UEXT4_BLOCKDEV_H

#include <stddef.h>
#include <stdint.h>

/* ---------------------------------------------------------------- blockdev.c
 * The block device interface.  Backends: a file (image or block device,
 * pread/pwrite) and memory (tests).  A later issue adds a crash-recording
 * backend, so callers only use the ops.
 */
struct bdev;
struct bdev_ops {
	int (*read)(struct bdev *d, void *buf, size_t len, uint64_t off);
	int (*write)(struct bdev *d, const void *buf, size_t len, uint64_t off);
	int (*flush)(struct bdev *d);
	void (*close)(struct bdev *d);
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

#endif
