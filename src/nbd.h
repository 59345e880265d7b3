/*
 * nbd.h - the NBD block-device backend (nbd.c, on libnbd), and the device
 * entry points that came with it (blockdev.c): opening an IMAGE that is
 * either a path or an NBD URI, writes with FUA, and discard.
 *
 * An IMAGE names an NBD export when it is a URI libnbd understands:
 *   nbd://host[:port]/export, nbds://..., nbd+unix:///export?socket=PATH,
 *   nbds+unix://...
 * Everything else is a path (bdev_open_file_at()).
 */
#ifndef UEXT4_NBD_H
#define UEXT4_NBD_H

#include <stdint.h>
#include <stddef.h>

struct bdev;

/* Nonzero when path is an NBD URI (by its scheme: nbd, nbds, nbd+unix,
 * nbds+unix, nbd+vsock...). */
int bdev_is_nbd_uri(const char *path);

/* The device of an IMAGE argument: an NBD export or a file, from byte
 * offset on.  discard nonzero: bdev_discard() trims / punches holes
 * (-o discard); otherwise bdev_discard() does nothing.  NULL and *err
 * (negative errno, message set) on failure. */
struct bdev *bdev_open_path(const char *path, int read_only, uint64_t offset, int discard,
			    int *err);

/* NBD: connects to uri (a pool of connections when the server allows
 * multi-conn, see nbd.c).  As bdev_open_path(). */
struct bdev *bdev_open_nbd(const char *uri, int read_only, uint64_t offset, int discard,
			   int *err);

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
