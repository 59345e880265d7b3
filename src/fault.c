/*
 * fault.c - failure injection for tests (tests/unit_undo.c).
 *
 * Compiled into every build, off unless a test arms it.  A fault point
 * (fault_point(), fault.h) sits where an operation can really fail: a
 * metadata block read from the device (bcache.c: EIO, or a bad checksum
 * behind it; blocks already cached cannot fail) and an allocation of a
 * block or an inode (balloc.c, ialloc.c: ENOSPC).  When
 * off, a fault point costs one relaxed load of fault_armed.  Armed with
 * fault_inject_arm(sites, n, err), the n-th point reached from then on
 * whose site is in the mask fails once with -err and a message naming
 * the site; the points after it succeed again, so that the operation's
 * own undo can run, as after a transient error.  The count is global (a
 * test arms it around one operation on one thread).
 */
#include "error.h"
#include "fault.h"

_Atomic unsigned fault_armed;           /* sites armed; 0 = off */
static _Atomic unsigned fault_left;     /* points until the one that fails */
static _Atomic unsigned fault_seen;     /* points of the armed sites reached */
static _Atomic int fault_err;
static _Atomic bool fault_fired;

void fault_inject_arm(unsigned sites, unsigned n, int err)
{
	atomic_store(&fault_left, n);
	atomic_store(&fault_seen, 0);
	atomic_store(&fault_err, err);
	atomic_store(&fault_fired, false);
	atomic_store(&fault_armed, sites);
}

void fault_inject_disarm(void)
{
	atomic_store(&fault_armed, 0);
}

bool fault_inject_fired(void)
{
	return atomic_load(&fault_fired);
}

unsigned fault_inject_seen(void)
{
	return atomic_load(&fault_seen);
}

static const char *site_name(unsigned site)
{
	switch (site) {
	case FAULT_READ: return "metadata read";
	case FAULT_ALLOC_BLOCK: return "block allocation";
	case FAULT_ALLOC_INODE: return "inode allocation";
	}
	return "operation";
}

int fault_point_slow(unsigned site, uint64_t num)
{
	unsigned left;

	if (!(atomic_load(&fault_armed) & site))
		return 0;
	atomic_fetch_add(&fault_seen, 1);
	left = atomic_load(&fault_left);
	while (left > 0 && !atomic_compare_exchange_weak(&fault_left, &left, left - 1))
		;
	if (left != 1)
		return 0;
	atomic_store(&fault_fired, true);
	return fs_err(atomic_load(&fault_err), "injected fault (test hook): %s %llu failed",
		      site_name(site), (unsigned long long)num);
}
