/*
 * undo.h - an operation's undo log (undo.c): what a namespace operation
 * changes inside its handle, recorded just before each change, and played
 * backwards if the operation fails, so that the transaction holds either
 * the whole operation or nothing of it.
 *
 * Each record names its inverse; an inverse looks first whether its change
 * happened (a name that points where the change left it, a flag that is
 * set), so a record of a step that failed half-way or never ran is
 * harmless.  What a directory insert restructured on the way (an htree
 * split, a full block or inline data converted) stays: the directory is
 * valid and only larger.  The log lives on the caller's stack, as the
 * operation's locks are held: it needs no lock of its own.
 */
#ifndef UEXT4_UNDO_H
#define UEXT4_UNDO_H

#include "inode.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct handle;

enum undo_kind {
	UNDO_FIELDS,            /* an inode's links and times: put back, inode written */
	UNDO_NAME_ADDED,        /* name -> ino added to dir: removed if there */
	UNDO_NAME_REMOVED,      /* name -> ino removed from dir: added if absent */
	UNDO_NAME_RETARGETED,   /* name in dir went from old to new: back to old */
	UNDO_UNLINKED,          /* the inode lost its last link: back off the orphan list */
	UNDO_CLAIMED_FREE,      /* inode_claim_free(): unclaimed */
	UNDO_NEW_INODE,         /* made here, reachable by nobody: given back */
};

struct undo_rec {
	enum undo_kind kind;
	struct inode *inode;            /* the inode, or the directory of a name */
	union {
		struct {                /* UNDO_FIELDS */
			uint32_t links;
			struct timespec mtime, ctime;
		} f;
		struct {                /* UNDO_NAME_* */
			const char *name;       /* the caller's, alive until the log ends */
			size_t len;
			uint64_t ino;           /* the one added or removed; RETARGETED: the new */
			uint64_t old;           /* RETARGETED: the old target */
			unsigned ftype;         /* REMOVED, RETARGETED: the old entry's type */
		} n;
		const struct inode_undo *u;     /* UNDO_NEW_INODE: what inode_new_undoable() saved */
		bool was_unlinked;              /* UNDO_UNLINKED: INODE_UNLINKED already set */
	};
};

/* The most records one operation makes (a rename over a directory with a
 * whiteout: 4 inodes' fields, 5 names, a whiteout, an unlinked target). */
#define UNDO_MAX 16

struct undo_log {
	struct handle *h;
	unsigned n;
	bool overflow;          /* a record did not fit: a bug, said at rollback */
	struct undo_rec rec[UNDO_MAX];
};

void undo_init(struct undo_log *log, struct handle *h);
/* n's links, mtime and ctime as they are now (once per inode). */
void undo_fields(struct undo_log *log, struct inode *n);
/* Before dir_add(dir, name -> ino). */
void undo_name_added(struct undo_log *log, struct inode *dir, const char *name, size_t len,
		     uint64_t ino);
/* Before dir_remove(dir, name -> ino), ino of type ftype. */
void undo_name_removed(struct undo_log *log, struct inode *dir, const char *name, size_t len,
		       uint64_t ino, unsigned ftype);
/* Before dir_retarget(dir, name) from old (of type old_ftype) to ino. */
void undo_name_retargeted(struct undo_log *log, struct inode *dir, const char *name, size_t len,
			  uint64_t old, unsigned old_ftype, uint64_t ino);
/* Before a change that may take n's last link (INODE_UNLINKED, orphan_add()). */
void undo_unlinked(struct undo_log *log, struct inode *n);
/* After inode_claim_free(n). */
void undo_claimed_free(struct undo_log *log, struct inode *n);
/* After inode_new_undoable(h, ..., &n, u): u must outlive the log. */
void undo_new_inode(struct undo_log *log, struct inode *n, const struct inode_undo *u);
/*
 * The operation failed with err (negative, its message set): play the log
 * backwards.  Errors of the inverses are not reported: the cause is, with
 * its message kept.  Returns err.
 */
int undo_rollback(struct undo_log *log, int err);
/* The log's records are no longer needed (the operation succeeded). */
static inline void undo_forget(struct undo_log *log)
{
	log->n = 0;
}

#endif
