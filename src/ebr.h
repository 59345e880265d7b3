/*
 * ebr.h - epoch-based reclamation: lock-free readers of a shared structure
 * (the buffer and inode caches' hash chains) and deferred freeing of what
 * they may still be looking at (lock-free cache hits).
 *
 * A reader brackets its walk with ebr_enter()/ebr_exit().  A writer that
 * unlinks an object (under the structure's own lock) stamps it with
 * ebr_stamp() and frees it only once ebr_safe(stamp) says every reader
 * that could have seen it has left.  Sections are short (a hash probe,
 * or the end of a release) and nest; a long one only delays freeing.
 */
#ifndef UEXT4_EBR_H
#define UEXT4_EBR_H

#include <stdbool.h>
#include <stdint.h>

void ebr_enter(void);
void ebr_exit(void);
/* The epoch of an object just unlinked (call after the unlink). */
uint64_t ebr_stamp(void);
/* May an object stamped `stamp` be freed?  Tries to advance the epoch. */
bool ebr_safe(uint64_t stamp);

/*
 * Unlinked objects waiting to be freed, in two batches: the new one fills
 * while the old one waits for its stamp to be safe.  The caller links the
 * objects through a field of its own (next = ebr_limbo_head(l), then
 * ebr_limbo_push(l, obj)) and serialises every call with its own lock.
 */
struct ebr_limbo {
	void *new_head, *old_head;
	uint64_t new_stamp, old_stamp;
	uint32_t nnew;              /* length of the new batch */
};
static inline void *ebr_limbo_head(const struct ebr_limbo *l) { return l->new_head; }
void ebr_limbo_push(struct ebr_limbo *l, void *obj);
/* The old batch if it may be freed now (the caller frees it; NULL if not):
 * asked only once the new batch holds `batch` objects, as a scan costs a
 * membarrier(). */
void *ebr_limbo_reclaim(struct ebr_limbo *l, uint32_t batch);

#endif
