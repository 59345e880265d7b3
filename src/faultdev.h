/*
 * faultdev.h - a fault-injecting block device (tests).
 *
 * faultdev_open(base) wraps another bdev and forwards every read, write and
 * flush to it, except where an armed rule says to fail.  It injects faults
 * BELOW the library, at the device, as a failing disk would; src/fault.c is
 * a different layer: fault points INSIDE the library (metadata reads,
 * allocations) that unit_undo drives.  Both are kept.
 *
 * The bdev interface has no byte count: a read or write either completes
 * (0) or fails (-errno).  A "short read" is therefore modelled as a read
 * that fills only the first K bytes and returns -EIO, which is what the
 * file device reports when pread stops early at end of file.
 *
 * Locking: the rule and counters are atomics; arming while I/O runs is safe
 * (an access sees either the old or the new rule's fields).  The base device
 * is owned: bdev_close() of the wrapper closes it unless faultdev_detach()
 * took it back.
 */
#ifndef UEXT4_FAULTDEV_H
#define UEXT4_FAULTDEV_H

#include <stdatomic.h>
#include <stdint.h>

struct bdev;

enum faultdev_kind {
	FD_NONE = 0,
	FD_EIO_NTH_READ,     /* the nth read after arming fails with EIO */
	FD_EIO_NTH_WRITE,    /* the nth write after arming fails with EIO */
	FD_EIO_NTH_FLUSH,    /* the nth flush after arming fails with EIO */
	FD_EIO_RANGE,        /* any access touching [lo, hi) bytes fails with EIO */
	FD_SHORT_READ,       /* the nth read fills only k bytes, then EIO */
	FD_TORN_WRITE,       /* the nth write: first k bytes reach base, then EIO (or 0 if silent) */
	FD_ENOSPC,           /* writes ending past lo bytes fail with ENOSPC */
	FD_READ_ONLY,        /* from the nth write on, every write fails with EROFS */
};

struct faultdev_rule {
	enum faultdev_kind kind;
	uint64_t n;          /* 1-based count of the access, from arming */
	uint64_t lo, hi;     /* byte range (FD_EIO_RANGE), size limit (FD_ENOSPC: lo) */
	uint32_t k;          /* bytes that get through (short read, torn write) */
	int silent;          /* torn write: report success */
	int writes_only;     /* FD_EIO_RANGE: reads of the range succeed (a cached block) */
};

struct faultdev_stats {
	uint64_t reads, writes, flushes, faults;
};

struct bdev *faultdev_open(struct bdev *base);
void faultdev_arm(struct bdev *d, const struct faultdev_rule *rule);
void faultdev_disarm(struct bdev *d);
void faultdev_stats(struct bdev *d, struct faultdev_stats *out);
/* Also count every fault into *faults (the caller's; it must outlive the
 * device): the count survives bdev_close(), as for an unmount's faults. */
void faultdev_count_into(struct bdev *d, _Atomic uint64_t *faults);
/* Give the base device back to the caller; bdev_close() then only frees the wrapper. */
struct bdev *faultdev_detach(struct bdev *d);

#endif
