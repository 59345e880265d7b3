/*
 * fault.h - failure injection for tests (fault.c).
 */
#ifndef UEXT4_FAULT_H
#define UEXT4_FAULT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/* ---------------------------------------------------------------- fault.c
 * Failure injection for tests (see fault.c): off unless armed, then the
 * n-th fault point of the armed sites fails once with -err.  Costs one
 * relaxed load when off.
 */
enum fault_site {
	FAULT_READ = 1u << 0,           /* bread() reading a block from the device: num = block */
	FAULT_ALLOC_BLOCK = 1u << 1,    /* balloc_alloc(): num = goal */
	FAULT_ALLOC_INODE = 1u << 2,    /* ialloc_alloc(): num = directory */
	FAULT_FC_REPLAY = 1u << 3,      /* fc_replay(), before each tag: num = tag index */
};
void fault_inject_arm(unsigned sites, unsigned n, int err);
void fault_inject_disarm(void);
bool fault_inject_fired(void);
unsigned fault_inject_seen(void);      /* points of the armed sites reached */
int fault_point_slow(unsigned site, uint64_t num);
extern _Atomic unsigned fault_armed;
static inline int fault_point(unsigned site, uint64_t num)
{
	if (__builtin_expect(atomic_load_explicit(&fault_armed, memory_order_relaxed) == 0, 1))
		return 0;
	return fault_point_slow(site, num);
}

#endif
