/*
 * crashdev.h - the crash-recording block device (tests).
 *
 * crashrec_open() loads an image into memory as the initial state.  Every
 * write is applied to the live contents (reads see it) and appended to a
 * log; every flush appends a flush marker.  The log divides into epochs:
 * epoch 0 holds the writes before the first flush, epoch k (1 <= k <=
 * nflushes) the writes after the k-th flush and before the next one.
 *
 * A crash state is "initial image + every write of epochs 0..k-1 (they were
 * complete when flush k returned) + any subset of epoch k".  The unit of a
 * crash is one file-system block (the block size read from the image's ext4
 * superblock, 1024 if it has none): a write spanning several blocks is
 * logged as one piece per block, so torn multi-block writes are covered;
 * a single block is assumed to be written atomically, as ext4's per-block
 * checksums assume too.
 *
 * Reference counting: the device starts with one reference, which
 * bdev_close() drops (a mount owns its device and closes it at unmount).
 * crashrec_hold() adds one, so a test can mount the device with
 * super_mount_bdev(), unmount, and go on to materialize crash states; its
 * own bdev_close() then frees it.
 *
 * Locking: one mutex per device (RANK_LEAF, nothing nests inside it) covers
 * the live contents, the log and the materialize cache.  Every operation
 * holds it, so concurrent I/O from many threads is safe; the device is for
 * tests, never on a production hot path.
 */
#ifndef UEXT4_CRASHDEV_H
#define UEXT4_CRASHDEV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct bdev;

/* Returns NULL and sets *err (negative errno, message) on failure. */
struct bdev *crashrec_open(const char *image, int *err);
/* One more reference: bdev_close() frees the device at the last one. */
void crashrec_hold(struct bdev *d);
/* The crash unit (bytes): the file system's block size. */
uint32_t crashrec_unit(struct bdev *d);
/* Flushes logged so far. */
uint32_t crashrec_nflushes(struct bdev *d);
/* The current position (= flush count).  An fsync that returned when the
 * mark was m is durable in every state k >= m. */
uint32_t crashrec_mark(struct bdev *d);
/* Number of logged block pieces in epoch k (0 <= k <= nflushes). */
size_t crashrec_nwrites_after(struct bdev *d, uint32_t k);
/* Byte offset and length of piece i of epoch k (for messages). */
int crashrec_piece(struct bdev *d, uint32_t k, size_t i, uint64_t *off, uint32_t *len);
/*
 * Write the crash state (k, keep) to the file path (created or truncated):
 * initial image + every write before flush k + the pieces i of epoch k with
 * keep[i] set (keep may be NULL: none), applied in log order.  States asked
 * for in increasing k are cheap (the prefix image is advanced, not rebuilt).
 */
int crashrec_materialize(struct bdev *d, uint32_t k, const bool *keep, const char *path);

/* crashdev.c: a device whose writes stay in memory (reads see them) on top
 * of base, which it owns.  A read-only mount replays a dirty journal into
 * it, leaving the image untouched. */
struct bdev *bdev_open_overlay(struct bdev *base);

#endif
