/*
 * undo.c - an operation's undo log: records made before each change of a
 * namespace operation, played backwards when it fails (undo.h).
 */
#include "undo.h"

#include "dir.h"
#include "error.h"
#include "ialloc.h"
#include "icache.h"
#include "ifree.h"
#include "internal.h"
#include "orphan.h"
#include "quota.h"

#include <stdio.h>
#include <sys/stat.h>

void undo_init(struct undo_log *log, struct handle *h)
{
	log->h = h;
	log->n = 0;
	log->overflow = false;
}

static struct undo_rec *undo_add(struct undo_log *log, enum undo_kind kind, struct inode *n)
{
	struct undo_rec *r;

	if (log->n == UNDO_MAX) {
		log->overflow = true;
		return NULL;
	}
	r = &log->rec[log->n++];
	r->kind = kind;
	r->inode = n;
	return r;
}

void undo_fields(struct undo_log *log, struct inode *n)
{
	struct undo_rec *r;

	for (unsigned i = 0; i < log->n; i++)
		if (log->rec[i].kind == UNDO_FIELDS && log->rec[i].inode == n)
			return;     /* the oldest values are the ones to restore */
	if ((r = undo_add(log, UNDO_FIELDS, n))) {
		r->f.links = n->links;
		r->f.mtime = n->mtime;
		r->f.ctime = n->ctime;
	}
}

static void undo_name(struct undo_log *log, enum undo_kind kind, struct inode *dir,
		      const char *name, size_t len, uint64_t ino, uint64_t old, unsigned ftype)
{
	struct undo_rec *r = undo_add(log, kind, dir);

	if (r) {
		r->n.name = name;
		r->n.len = len;
		r->n.ino = ino;
		r->n.old = old;
		r->n.ftype = ftype;
	}
}

void undo_name_added(struct undo_log *log, struct inode *dir, const char *name, size_t len,
		     uint64_t ino)
{
	undo_name(log, UNDO_NAME_ADDED, dir, name, len, ino, 0, 0);
}

void undo_name_removed(struct undo_log *log, struct inode *dir, const char *name, size_t len,
		       uint64_t ino, unsigned ftype)
{
	undo_name(log, UNDO_NAME_REMOVED, dir, name, len, ino, 0, ftype);
}

void undo_name_retargeted(struct undo_log *log, struct inode *dir, const char *name, size_t len,
			  uint64_t old, unsigned old_ftype, uint64_t ino)
{
	undo_name(log, UNDO_NAME_RETARGETED, dir, name, len, ino, old, old_ftype);
}

void undo_unlinked(struct undo_log *log, struct inode *n)
{
	struct undo_rec *r = undo_add(log, UNDO_UNLINKED, n);

	if (r)
		r->was_unlinked = (atomic_load(&n->istate) & INODE_UNLINKED) != 0;
}

void undo_claimed_free(struct undo_log *log, struct inode *n)
{
	undo_add(log, UNDO_CLAIMED_FREE, n);
}

void undo_new_inode(struct undo_log *log, struct inode *n, const struct inode_undo *u)
{
	struct undo_rec *r = undo_add(log, UNDO_NEW_INODE, n);

	if (r)
		r->u = u;
}

/* A new inode nobody can reach: give back its blocks, xattrs and number
 * in this handle (as inode_new() does when its own write fails), its slot
 * in the inode table and the descriptor fields as they were (u). */
static int discard_new_inode(struct handle *h, struct inode *n, const struct inode_undo *u)
{
	int err = inode_release_contents(h, n);

	if (err)
		return err;
	n->links = 0;
	n->size = 0;
	n->dtime = (uint32_t)fs_time(h->fs).tv_sec;
	quota_inode_gone(h->fs, n);
	if (u->slot_saved)
		err = inode_restore_slot(h, n, u);
	else
		err = inode_write(h, n); /* a slot too large to save: a freed inode */
	if (err)
		return err;
	atomic_fetch_or(&n->istate, INODE_DELETED);
	return ialloc_free_undo(h, n->ino, S_ISDIR(n->mode), &u->ia);
}

/* Free it now, or if that fails, let its last iput() free it, or the
 * orphan list at the next mount. */
static void give_back_new_inode(struct handle *h, struct inode *n, const struct inode_undo *u)
{
	if (discard_new_inode(h, n, u) == 0)
		return;
	n->links = 0;
	atomic_fetch_and(&n->istate, ~(uint32_t)INODE_DELETED);
	atomic_fetch_or(&n->istate, INODE_UNLINKED);
	orphan_add(h, n);
	inode_write(h, n);
}

/* Does name in dir point to ino now? */
static bool name_is(struct handle *h, const struct undo_rec *r, uint64_t ino)
{
	uint64_t found;
	unsigned ft;

	return dir_lookup_locked(h->fs, r->inode, r->n.name, r->n.len, &found, &ft) == 0 &&
	       found == ino;
}

static bool name_absent(struct handle *h, const struct undo_rec *r)
{
	uint64_t found;
	unsigned ft;

	return dir_lookup_locked(h->fs, r->inode, r->n.name, r->n.len, &found, &ft) == -ENOENT;
}

static void undo_one(struct handle *h, const struct undo_rec *r)
{
	struct inode *n = r->inode;

	switch (r->kind) {
	case UNDO_FIELDS:
		n->links = r->f.links;
		n->mtime = r->f.mtime;
		n->ctime = r->f.ctime;
		inode_write(h, n);
		break;
	case UNDO_NAME_ADDED:
		if (name_is(h, r, r->n.ino))
			dir_remove(h, n, r->n.name, r->n.len, r->n.ino);
		break;
	case UNDO_NAME_REMOVED:
		if (name_absent(h, r))
			dir_add(h, n, r->n.name, r->n.len, r->n.ino, r->n.ftype);
		break;
	case UNDO_NAME_RETARGETED:
		if (name_is(h, r, r->n.ino))
			dir_retarget(h, n, r->n.name, r->n.len, r->n.old, r->n.ftype);
		break;
	case UNDO_UNLINKED:
		if (!r->was_unlinked && (atomic_load(&n->istate) & INODE_UNLINKED)) {
			atomic_fetch_and(&n->istate, ~(uint32_t)(INODE_UNLINKED | INODE_LINKABLE));
			orphan_del(h, n);
		}
		break;
	case UNDO_CLAIMED_FREE:
		inode_unclaim_free(n);
		break;
	case UNDO_NEW_INODE:
		give_back_new_inode(h, n, r->u);
		break;
	}
}

int undo_rollback(struct undo_log *log, int err)
{
	char msg[512];

	snprintf(msg, sizeof(msg), "%s", uext4_last_error());
	for (unsigned i = log->n; i-- > 0;)
		undo_one(log->h, &log->rec[i]);
	log->n = 0;
	if (log->overflow)
		return fs_err(EIO, "%s (and the undo log overflowed: a bug)", msg);
	fs_err(-err, "%s", msg);
	return err;
}
