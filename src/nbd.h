/*
 * nbd.h - the NBD block-device backend (nbd.c, on libnbd).  blockdev.c's
 * bdev_open_path() sends an IMAGE here when it is an NBD URI.
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

/* NBD: connects to uri (a pool of connections when the server allows
 * multi-conn, see nbd.c).  As bdev_open_path(). */
struct bdev *bdev_open_nbd(const char *uri, int read_only, uint64_t offset, int discard,
			   int *err);

#endif
