/*
 * quota.c - quota accounting: the usage of every user, group and project
 * in the quota files of a -O quota image, exact as e2fsck counts it.
 *
 * What is counted (e2fsck's pass 1): the root and every inode from
 * s_first_ino on, but EA inodes and the quota inodes themselves; each
 * counts one inode and i_blocks * 512 bytes of space, to its uid, gid and
 * projid.  An inode's charge is what its last inode_write() encoded:
 * quota_sync(), under the inode's slot lock, moves the charge from what
 * it was (q_dq, q_blocks in struct inode) to what the fields now say, so
 * every path that changes i_blocks or an id (allocation, truncate,
 * xattr blocks and EA values, chown) is counted by the write it must do
 * anyway, in the same handle, and an undo that writes the old fields
 * back takes the charge back with it.
 *
 * No global lock per allocation.  Each (type, id) has an in-memory dquot,
 * found through a lock-free hash (chains only grow until unmount); its
 * usage is two struct pcounters, one line per thread slot, as the free
 * counts are.  The commit folds them into the quota blocks with every
 * handle drained (quota_fold(), through commit_host), rewriting entries
 * that exist in blocks that exist: a NEW id gets its entry inserted in
 * the handle of the write that first charges it (quota_prepare(), the
 * kernel's dquot_acquire()), under the quota lock, which also guards the
 * quota files' tree and their inodes' mapping.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bcache.h"
#include "caller.h"
#include "error.h"
#include "icache.h"
#include "inode.h"
#include "internal.h"
#include "lock.h"
#include "ondisk.h"
#include "quota.h"
#include "quotatree.h"
#include "trans.h"

#define QUOTA_BUCKETS 1024u

enum { Q_UNCHARGED = 0, Q_CHARGED = 1, Q_GONE = 2 };

struct dquot {
	_Atomic(struct dquot *) next;   /* hash chain; set before publishing */
	uint32_t id;
	uint8_t type;
	/* Where the entry sits (immutable once published): its file
	 * system block and the byte offset there. */
	uint64_t pblk;
	uint32_t poff;
	/* lock (RANK_LEAF, the kernel's dq_dqb_lock): e's limits and grace
	 * deadlines (btime, itime), read by the checks of a limited id,
	 * changed by a check that starts or stops a timer and by
	 * quota_set_limits(); the fold copies them out under it.  e's usage
	 * fields are the fold's alone (handles drained). */
	struct ulock lock;
	struct qt_entry e;
	/* Any limit set (changed under lock): the checks of an unlimited
	 * id take no lock and sum nothing. */
	_Atomic bool limited;
	/* Usage, summed by the fold. */
	struct pcounter space, inodes;
	/* Charged, or limits or times changed, since the last fold: set
	 * relaxed, cleared by the fold. */
	_Atomic bool dirty;
};

struct qfile {
	struct inode *inode;        /* a reference held from load to destroy */
	struct qt_info info;
	/* The info's grace times, read by the checks without a lock;
	 * written under the quota lock by quota_set_grace(). */
	_Atomic uint32_t bgrace, igrace;
};

struct quota_state {
	const struct quota_host *host;
	/* RANK_QUOTA: the quota files' blocks and tree, their inodes'
	 * mapping and size, and publishing a new dquot. */
	struct ulock lock;
	struct qfile file[QT_NTYPES];
	_Atomic(struct dquot *) bucket[QUOTA_BUCKETS];
};

/* ------------------------------------------------------------ lookup */

static unsigned bucket_of(int type, uint32_t id)
{
	uint64_t k = ((uint64_t)type << 32 | id) * 0x9e3779b97f4a7c15ull;

	return (unsigned)(k >> 54) & (QUOTA_BUCKETS - 1);
}

static struct dquot *dq_find(struct quota_state *q, int type, uint32_t id)
{
	struct dquot *d = atomic_load_explicit(&q->bucket[bucket_of(type, id)],
					       memory_order_acquire);

	for (; d; d = atomic_load_explicit(&d->next, memory_order_acquire))
		if (d->id == id && d->type == type)
			return d;
	return NULL;
}

/* Caller holds q->lock (the only publisher). */
static void dq_publish(struct quota_state *q, struct dquot *d)
{
	_Atomic(struct dquot *) *head = &q->bucket[bucket_of(d->type, d->id)];

	atomic_store_explicit(&d->next, atomic_load_explicit(head, memory_order_relaxed),
			      memory_order_relaxed);
	atomic_store_explicit(head, d, memory_order_release);
}

/* ------------------------------------------------------- file access */

struct qio {
	struct uext4_fs *fs;
	struct handle *h;           /* NULL: read only */
	struct qfile *f;
};

static unsigned per_fs_block(struct uext4_fs *fs)
{
	return fs->block_size / QT_BLOCK_SIZE;
}

static int qio_read(void *ctx, uint32_t blk, uint8_t *out)
{
	struct qio *c = ctx;
	struct uext4_fs *fs = c->fs;
	uint64_t pblk;
	bool fresh;
	struct buf *b;
	int err = fs->quota->host->map(fs, NULL, c->f->inode, blk / per_fs_block(fs), &pblk, &fresh);

	if (err)
		return err;
	if (!pblk) {
		memset(out, 0, QT_BLOCK_SIZE);
		return 0;
	}
	if ((err = bread(fs->bc, pblk, UEXT4_META_OTHER, &b)))
		return err;
	memcpy(out, b->data + (blk % per_fs_block(fs)) * QT_BLOCK_SIZE, QT_BLOCK_SIZE);
	brelse(fs->bc, b);
	return 0;
}

/* The quota inode's size covers quota block blk (as e2fsprogs writes it:
 * a whole number of quota blocks). */
static int qio_grow(struct qio *c, uint32_t blk, bool fresh)
{
	struct inode *n = c->f->inode;
	uint64_t end = ((uint64_t)blk + 1) * QT_BLOCK_SIZE;

	if (end <= n->size && !fresh)
		return 0;
	n->size = MAX(n->size, end);
	n->mtime = n->ctime = fs_time(c->fs);
	return inode_write(c->h, n);
}

static int qio_write(void *ctx, uint32_t blk, const uint8_t *in)
{
	struct qio *c = ctx;
	struct uext4_fs *fs = c->fs;
	struct inode *n = c->f->inode;
	uint64_t pblk;
	bool fresh = false;
	struct buf *b;
	int err;

	if (!c->h)
		return fs_err(EROFS, "quota file of inode %llu: write without a handle",
			      (unsigned long long)n->ino);
	if ((err = fs->quota->host->map(fs, c->h, n, blk / per_fs_block(fs), &pblk, &fresh)))
		return err;
	if (fresh) {
		if ((err = bget_new(fs->bc, pblk, &b)))
			return err;
		err = handle_create_access(c->h, b);
		if (!err)
			memset(b->data, 0, fs->block_size);
	} else {
		if ((err = bread(fs->bc, pblk, UEXT4_META_OTHER, &b)))
			return err;
		err = handle_write_access(c->h, b);
	}
	if (!err) {
		memcpy(b->data + (blk % per_fs_block(fs)) * QT_BLOCK_SIZE, in, QT_BLOCK_SIZE);
		handle_dirty(c->h, b, CSUM_NONE, n->ino, n->generation);
	}
	brelse(fs->bc, b);
	return err ? err : qio_grow(c, blk, fresh);
}

static void qio_init(struct qio *c, struct qt_io *io, struct uext4_fs *fs, struct handle *h,
		     struct qfile *f)
{
	*c = (struct qio){ .fs = fs, .h = h, .f = f };
	*io = (struct qt_io){ .ctx = c, .read = qio_read, .write = qio_write };
}

/* ------------------------------------------------------------ dquots */

/* A dquot for entry e at w of file f (caller publishes it). */
static int dq_make(struct uext4_fs *fs, struct qfile *f, int type, const struct qt_entry *e,
		   const struct qt_where *w, struct dquot **out)
{
	uint64_t byte = (uint64_t)w->blk * QT_BLOCK_SIZE + w->off;
	uint64_t pblk;
	bool fresh;
	struct dquot *d;
	int err = fs->quota->host->map(fs, NULL, f->inode, byte / fs->block_size, &pblk, &fresh);

	if (err)
		return err;
	if (!pblk)
		return fs_corrupt("quota file inode %llu: entry of id %u in a hole",
				  (unsigned long long)f->inode->ino, e->id);
	/* aligned_alloc() takes a multiple of the alignment. */
	d = aligned_alloc(CACHELINE, (sizeof(*d) + CACHELINE - 1) / CACHELINE * CACHELINE);
	if (!d)
		return fs_err(ENOMEM, "out of memory for a quota entry");
	memset(d, 0, sizeof(*d));
	d->id = e->id;
	d->type = (uint8_t)type;
	d->pblk = pblk;
	d->poff = (uint32_t)(byte % fs->block_size);
	d->e = *e;
	ulock_init(&d->lock, RANK_LEAF);
	atomic_init(&d->limited, e->bsoftlimit || e->bhardlimit || e->isoftlimit || e->ihardlimit);
	pcounter_set(&d->space, (int64_t)e->curspace);
	pcounter_set(&d->inodes, (int64_t)e->curinodes);
	*out = d;
	return 0;
}

struct load_ctx {
	struct uext4_fs *fs;
	struct qfile *f;
	int type;
};

static int load_one(void *arg, const struct qt_entry *e, const struct qt_where *w)
{
	struct load_ctx *l = arg;
	struct dquot *d;
	int err;

	if (dq_find(l->fs->quota, l->type, e->id))
		return fs_corrupt("quota file inode %llu: id %u twice",
				  (unsigned long long)l->f->inode->ino, e->id);
	if ((err = dq_make(l->fs, l->f, l->type, e, w, &d)))
		return err;
	dq_publish(l->fs->quota, d);
	return 0;
}

/* The entry of (type, id), made in h if the file lacks it. */
static int dq_acquire(struct handle *h, int type, uint32_t id, struct dquot **out)
{
	struct uext4_fs *fs = h->fs;
	struct quota_state *q = fs->quota;
	struct qfile *f = &q->file[type];
	struct qt_entry e = { .id = id };
	struct qt_where w;
	struct qt_io io;
	struct qio c;
	int err;

	if ((*out = dq_find(q, type, id)))
		return 0;
	ulock_lock(&q->lock);
	if ((*out = dq_find(q, type, id))) {
		ulock_unlock(&q->lock);
		return 0;
	}
	qio_init(&c, &io, fs, h, f);
	err = qt_insert(&io, id, &e, &w);
	if (err == -EEXIST || err == -EUCLEAN)
		err = fs_corrupt("quota file inode %llu: inserting id %u: the tree is damaged",
				 (unsigned long long)f->inode->ino, id);
	if (!err && (err = dq_make(fs, f, type, &e, &w, out)) == 0)
		dq_publish(q, *out);
	ulock_unlock(&q->lock);
	return err;
}

/* ------------------------------------------------------------ charges */

static uint32_t quota_inum(struct uext4_fs *fs, int type);

/* From the superblock, so that inodes loaded before quota_load() know. */
static bool is_quota_inode(struct uext4_fs *fs, uint64_t ino)
{
	for (int t = 0; t < QT_NTYPES; t++)
		if (quota_inum(fs, t) == ino)
			return true;
	return false;
}

/* Does e2fsck count this inode?  Not the orphan file either (a file
 * system made with one lists only root and lost+found for id 0). */
static bool countable(struct uext4_fs *fs, const struct inode *n)
{
	return (n->ino == EXT4_ROOT_INO || n->ino >= fs->first_ino) &&
	       !(n->flags & EXT4_EA_INODE_FL) && !is_quota_inode(fs, n->ino) &&
	       !(FS_HAS_COMPAT(fs, ORPHAN_FILE) && n->ino == le32(fs->sb.s_orphan_file_inum));
}

static uint32_t id_of(const struct inode *n, int type)
{
	return type == QT_USER ? n->uid : type == QT_GROUP ? n->gid : n->projid;
}

static void charge(struct dquot *d, int64_t space, int64_t inodes)
{
	if (!d || (!space && !inodes))
		return;
	if (space)
		pcounter_add(&d->space, space);
	if (inodes)
		pcounter_add(&d->inodes, inodes);
	if (!atomic_load_explicit(&d->dirty, memory_order_relaxed))
		atomic_store_explicit(&d->dirty, true, memory_order_relaxed);
}

void quota_inode_new(struct inode *n)
{
	memset(n->q_dq, 0, sizeof(n->q_dq));
	n->q_blocks = 0;
	n->q_state = Q_UNCHARGED;
}

/* Also before quota_load() (the root, the orphan file): what the disk
 * says is charged already; the dquots are found at the first write. */
void quota_inode_loaded(struct uext4_fs *fs, struct inode *n)
{
	quota_inode_new(n);
	if (!FS_HAS_RO_COMPAT(fs, QUOTA) || !countable(fs, n))
		return;
	for (int t = 0; t < QT_NTYPES; t++)
		n->q_id[t] = id_of(n, t);
	n->q_blocks = n->blocks;
	n->q_state = Q_CHARGED;
}

int quota_prepare(struct handle *h, struct inode *n)
{
	struct uext4_fs *fs = h->fs;
	struct dquot *d;
	int err;

	if (!fs->quota || n->q_state == Q_GONE || !countable(fs, n))
		return 0;
	for (int t = 0; t < QT_NTYPES; t++) {
		if (!fs->quota->file[t].inode)
			continue;
		d = n->q_dq[t];
		if (d && d->id == id_of(n, t))
			continue;
		if ((err = dq_acquire(h, t, id_of(n, t), &d)))
			return err;
	}
	return 0;
}

/* The dquot n's charge of type t sits on now. */
static struct dquot *charged_dq(struct uext4_fs *fs, struct inode *n, int t)
{
	return n->q_dq[t] ? n->q_dq[t] : dq_find(fs->quota, t, n->q_id[t]);
}

static void uncharge_all(struct uext4_fs *fs, struct inode *n)
{
	if (n->q_state == Q_CHARGED)
		for (int t = 0; t < QT_NTYPES; t++)
			charge(charged_dq(fs, n, t), -(int64_t)n->q_blocks * 512, -1);
}

void quota_sync(struct uext4_fs *fs, struct inode *n)
{
	int64_t sector = 512;

	if (!fs->quota || n->q_state == Q_GONE)
		return;
	if (!countable(fs, n)) {
		uncharge_all(fs, n);
		n->q_state = Q_UNCHARGED;
		return;
	}
	for (int t = 0; t < QT_NTYPES; t++) {
		struct dquot *old, *now;

		if (!fs->quota->file[t].inode)
			continue;
		old = n->q_state == Q_CHARGED ? charged_dq(fs, n, t) : NULL;
		now = old && old->id == id_of(n, t) ? old : dq_find(fs->quota, t, id_of(n, t));
		if (n->q_state == Q_CHARGED && old == now) {
			charge(now, ((int64_t)n->blocks - (int64_t)n->q_blocks) * sector, 0);
		} else {
			if (n->q_state == Q_CHARGED)
				charge(old, -(int64_t)n->q_blocks * sector, -1);
			charge(now, (int64_t)n->blocks * sector, 1);
		}
		n->q_dq[t] = now;
		n->q_id[t] = id_of(n, t);
	}
	n->q_blocks = n->blocks;
	n->q_state = Q_CHARGED;
}

void quota_inode_gone(struct uext4_fs *fs, struct inode *n)
{
	if (fs->quota && countable(fs, n))
		uncharge_all(fs, n);
	n->q_state = Q_GONE;
}

static int check_charge(struct uext4_fs *fs, int t, struct dquot *d, int64_t inodes,
			int64_t space, bool exempt);

int quota_transfer(struct handle *h, struct inode *n, uint32_t uid, uint32_t gid,
		   uint32_t projid)
{
	struct uext4_fs *fs = h->fs;
	uint32_t ids[QT_NTYPES] = { uid, gid, projid };
	struct dquot *d;
	int err;

	if (fs->quota && n->q_state != Q_GONE && countable(fs, n))
		for (int t = 0; t < QT_NTYPES; t++) {
			if (!fs->quota->file[t].inode)
				continue;
			if ((err = dq_acquire(h, t, ids[t], &d)))
				return err;
			/* The new owner's limits, as the kernel's
			 * __dquot_transfer(): its inode and its blocks. */
			if (ids[t] != id_of(n, t) && atomic_load_explicit(&d->limited,
									  memory_order_relaxed) &&
			    (err = check_charge(fs, t, d, 1, (int64_t)n->blocks * 512,
						caller_uid() == 0)))
				return err;
		}
	n->uid = uid;
	n->gid = gid;
	n->projid = projid;
	return 0;
}

bool quota_usage(struct uext4_fs *fs, int type, uint32_t id, int64_t *space, int64_t *inodes)
{
	struct dquot *d = fs->quota && type >= 0 && type < QT_NTYPES ? dq_find(fs->quota, type, id)
								    : NULL;

	if (!d)
		return false;
	*space = pcounter_sum(&d->space);
	*inodes = pcounter_sum(&d->inodes);
	return true;
}

/* ------------------------------------------------------------ limits */

/*
 * Enforcement, as the kernel's check_bdq() and check_idq(), before the
 * allocation (the charge itself comes at the inode's next write):
 *   - usage past a hard limit: EDQUOT;
 *   - past a soft limit whose grace deadline has come: EDQUOT;
 *   - past a soft limit with no deadline yet: the deadline is set, now +
 *     the file's grace time (written at the next commit's fold);
 *   - usage at or under the soft limit again: the deadline goes.
 * The first two spare a caller with CAP_SYS_RESOURCE (the kernel's
 * ignore_hardlimit(); for the v2 format that is the capability alone):
 * here the caller's uid 0 (caller.c), as for the reserved blocks.  The
 * deadline is set for root as well, as the kernel does.
 *
 * Usage is the pcounters' sum, read without a lock: what other threads
 * have allocated and not yet written into their inodes is not seen, so
 * concurrent writers of one id may pass a limit by what they have in
 * flight (the kernel reserves under dq_dqb_lock and cannot).  The
 * caller's own inode's pending blocks (allocated in this handle, not yet
 * written) are counted.
 */

static const char *type_name(int t)
{
	return t == QT_USER ? "user" : t == QT_GROUP ? "group" : "project";
}

static int64_t now_secs(struct uext4_fs *fs)
{
	return (int64_t)fs_time(fs).tv_sec;
}

/* How much more of a usage `cur` one limit pair allows (INT64_MAX: no
 * bound); starts no timer.  Caller holds d->lock. */
static int64_t room(int64_t cur, uint64_t hard, uint64_t soft, uint64_t deadline, int64_t now,
		    bool exempt)
{
	int64_t r = INT64_MAX;

	if (exempt)
		return r;
	if (hard)
		r = MIN(r, (int64_t)hard - cur);
	if (soft && deadline && now >= (int64_t)deadline)
		r = MIN(r, (int64_t)soft - cur);
	return MAX(r, 0);
}

/* A soft limit passed by `after` starts its timer; usage at or under it
 * (before this allocation) stops it.  Caller holds d->lock. */
static void soft_timer(struct dquot *d, uint64_t *deadline, int64_t before, int64_t after,
		       uint64_t soft, uint32_t grace, int64_t now)
{
	uint64_t was = *deadline;

	if (soft && before <= (int64_t)soft)
		*deadline = 0;
	if (soft && after > (int64_t)soft && !*deadline)
		*deadline = (uint64_t)(now + grace);
	if (*deadline != was)
		atomic_store_explicit(&d->dirty, true, memory_order_relaxed);
}

/* The dquots a charge of n's would go to, limited ones only. */
static int limited_dquots(struct uext4_fs *fs, const uint32_t ids[QT_NTYPES],
			  struct dquot *out[QT_NTYPES])
{
	int k = 0;

	for (int t = 0; t < QT_NTYPES; t++) {
		struct dquot *d = fs->quota->file[t].inode ? dq_find(fs->quota, t, ids[t]) : NULL;

		out[t] = d && atomic_load_explicit(&d->limited, memory_order_relaxed) ? d : NULL;
		k += out[t] != NULL;
	}
	return k;
}

int quota_check_space(struct uext4_fs *fs, struct inode *n, uint64_t unit, uint32_t *want,
		      bool whole, bool exempt)
{
	struct dquot *d[QT_NTYPES];
	uint32_t ids[QT_NTYPES];
	int64_t pending, cur[QT_NTYPES], now;
	uint64_t fits = *want;

	if (!fs->quota || n->q_state == Q_GONE || !countable(fs, n))
		return 0;
	for (int t = 0; t < QT_NTYPES; t++)
		ids[t] = id_of(n, t);
	if (!limited_dquots(fs, ids, d))
		return 0;
	/* Blocks this handle gave n that its last write did not charge. */
	pending = ((int64_t)n->blocks - (n->q_state == Q_CHARGED ? (int64_t)n->q_blocks : 0)) * 512;
	now = now_secs(fs);
	for (int t = 0; t < QT_NTYPES; t++) {
		uint64_t r;

		if (!d[t])
			continue;
		cur[t] = pcounter_sum(&d[t]->space) + MAX(pending, 0);
		ulock_lock(&d[t]->lock);
		r = (uint64_t)room(cur[t], d[t]->e.bhardlimit * QT_BLOCK_SIZE,
				   d[t]->e.bsoftlimit * QT_BLOCK_SIZE, d[t]->e.btime, now, exempt) / unit;
		ulock_unlock(&d[t]->lock);
		if (!r || (whole && r < *want))
			return fs_err(EDQUOT, "%s quota of id %u: no room for %u more blocks",
				      type_name(t), ids[t], *want);
		fits = MIN(fits, r);
	}
	*want = (uint32_t)fits;
	for (int t = 0; t < QT_NTYPES; t++) {
		if (!d[t])
			continue;
		ulock_lock(&d[t]->lock);
		soft_timer(d[t], &d[t]->e.btime, cur[t], cur[t] + (int64_t)(fits * unit),
			   d[t]->e.bsoftlimit * QT_BLOCK_SIZE,
			   atomic_load_explicit(&fs->quota->file[t].bgrace, memory_order_relaxed), now);
		ulock_unlock(&d[t]->lock);
	}
	return 0;
}

/* May d (of type t, id) take `inodes` more inodes and `space` more bytes
 * at once?  Starts the timers of soft limits passed.  0 or EDQUOT. */
static int check_charge(struct uext4_fs *fs, int t, struct dquot *d, int64_t inodes,
			int64_t space, bool exempt)
{
	struct qfile *f = &fs->quota->file[t];
	int64_t now = now_secs(fs), ci = pcounter_sum(&d->inodes), cs = pcounter_sum(&d->space);
	bool inode_ok, space_ok;

	ulock_lock(&d->lock);
	inode_ok = room(ci, d->e.ihardlimit, d->e.isoftlimit, d->e.itime, now, exempt) >= inodes;
	space_ok = room(cs, d->e.bhardlimit * QT_BLOCK_SIZE, d->e.bsoftlimit * QT_BLOCK_SIZE,
			d->e.btime, now, exempt) >= space;
	if (inode_ok && space_ok) {
		if (inodes)
			soft_timer(d, &d->e.itime, ci, ci + inodes, d->e.isoftlimit,
				   atomic_load_explicit(&f->igrace, memory_order_relaxed), now);
		if (space)
			soft_timer(d, &d->e.btime, cs, cs + space, d->e.bsoftlimit * QT_BLOCK_SIZE,
				   atomic_load_explicit(&f->bgrace, memory_order_relaxed), now);
	}
	ulock_unlock(&d->lock);
	if (!inode_ok)
		return fs_err(EDQUOT, "%s quota of id %u: no inode left under its limit",
			      type_name(t), d->id);
	if (!space_ok)
		return fs_err(EDQUOT, "%s quota of id %u: no room for %lld more bytes", type_name(t),
			      d->id, (long long)space);
	return 0;
}

int quota_check_inode(struct uext4_fs *fs, const uint32_t ids[QT_NTYPES], uint64_t space,
		      bool exempt)
{
	struct dquot *d[QT_NTYPES];
	int err;

	if (!fs->quota || !limited_dquots(fs, ids, d))
		return 0;
	for (int t = 0; t < QT_NTYPES; t++)
		if (d[t] && (err = check_charge(fs, t, d[t], 1, (int64_t)space, exempt)))
			return err;
	return 0;
}

/* ------------------------------------------------------- limits: the API */

static int quota_file_of(struct uext4_fs *fs, int type, struct qfile **f)
{
	if (type < 0 || type >= QT_NTYPES)
		return fs_err(EINVAL, "quota type %d: not user (0), group (1) or project (2)", type);
	if (!fs->quota || !fs->quota->file[type].inode)
		return fs_err(EOPNOTSUPP, "no %s quota file loaded (not a -O quota image with that "
				       "type, or a read-only mount)",
			      type_name(type));
	*f = &fs->quota->file[type];
	return 0;
}

int quota_get(struct uext4_fs *fs, int type, uint32_t id, struct qt_entry *e)
{
	struct qfile *f;
	struct dquot *d;
	int64_t space, inodes;
	int err = quota_file_of(fs, type, &f);

	if (err)
		return err;
	if (!(d = dq_find(fs->quota, type, id))) {
		*e = (struct qt_entry){ .id = id };
		return -ENOENT;
	}
	space = pcounter_sum(&d->space);
	inodes = pcounter_sum(&d->inodes);
	ulock_lock(&d->lock);
	*e = d->e;
	ulock_unlock(&d->lock);
	e->curspace = space < 0 ? 0 : (uint64_t)space;
	e->curinodes = inodes < 0 ? 0 : (uint64_t)inodes;
	return 0;
}

/* A new limit restarts or stops the timer as the kernel's do_set_dqblk():
 * no soft limit, or usage within it, clears it; usage past it starts it
 * now (no caller-given deadline here). */
static void reset_timer(uint64_t *deadline, int64_t cur, uint64_t soft, uint32_t grace, int64_t now)
{
	if (!soft || cur <= (int64_t)soft)
		*deadline = 0;
	else
		*deadline = (uint64_t)(now + grace);
}

int quota_set_limits(struct handle *h, int type, uint32_t id, const struct qt_entry *lim)
{
	struct uext4_fs *fs = h->fs;
	struct qfile *f;
	struct dquot *d;
	int64_t now = now_secs(fs);
	int err = quota_file_of(fs, type, &f);

	if (err || (err = dq_acquire(h, type, id, &d)))
		return err;
	ulock_lock(&d->lock);
	d->e.bsoftlimit = lim->bsoftlimit;
	d->e.bhardlimit = lim->bhardlimit;
	d->e.isoftlimit = lim->isoftlimit;
	d->e.ihardlimit = lim->ihardlimit;
	reset_timer(&d->e.btime, pcounter_sum(&d->space), lim->bsoftlimit * QT_BLOCK_SIZE,
		    atomic_load(&f->bgrace), now);
	reset_timer(&d->e.itime, pcounter_sum(&d->inodes), lim->isoftlimit,
		    atomic_load(&f->igrace), now);
	atomic_store(&d->limited, lim->bsoftlimit || lim->bhardlimit || lim->isoftlimit ||
					  lim->ihardlimit);
	ulock_unlock(&d->lock);
	/* The commit's fold writes the entry, in this handle's transaction
	 * or the next: the entry's block is in the file already. */
	atomic_store_explicit(&d->dirty, true, memory_order_relaxed);
	return 0;
}

int quota_grace(struct uext4_fs *fs, int type, uint32_t *bgrace, uint32_t *igrace)
{
	struct qfile *f;
	int err = quota_file_of(fs, type, &f);

	if (err)
		return err;
	*bgrace = atomic_load(&f->bgrace);
	*igrace = atomic_load(&f->igrace);
	return 0;
}

int quota_set_grace(struct handle *h, int type, uint32_t bgrace, uint32_t igrace)
{
	struct uext4_fs *fs = h->fs;
	struct qfile *f;
	struct qt_io io;
	struct qio c;
	int err = quota_file_of(fs, type, &f);

	if (err)
		return err;
	ulock_lock(&fs->quota->lock);
	qio_init(&c, &io, fs, h, f);
	if ((err = qt_set_grace(&io, bgrace, igrace)) == 0) {
		f->info.bgrace = bgrace;
		f->info.igrace = igrace;
		atomic_store(&f->bgrace, bgrace);
		atomic_store(&f->igrace, igrace);
	}
	ulock_unlock(&fs->quota->lock);
	return err;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return (x > y) - (x < y);
}

int quota_ids(struct uext4_fs *fs, int type, uint32_t **ids, size_t *count)
{
	struct qfile *f;
	size_t n = 0, cap = 64;
	uint32_t *v;
	int err = quota_file_of(fs, type, &f);

	*ids = NULL;
	*count = 0;
	if (err)
		return err;
	if (!(v = malloc(cap * sizeof(*v))))
		return fs_err(ENOMEM, "out of memory listing quota ids");
	for (unsigned i = 0; i < QUOTA_BUCKETS; i++)
		for (struct dquot *d = atomic_load(&fs->quota->bucket[i]); d;
		     d = atomic_load(&d->next)) {
			if (d->type != type)
				continue;
			if (n == cap) {
				uint32_t *w = realloc(v, 2 * cap * sizeof(*v));

				if (!w) {
					free(v);
					return fs_err(ENOMEM, "out of memory listing quota ids");
				}
				v = w;
				cap *= 2;
			}
			v[n++] = d->id;
		}
	qsort(v, n, sizeof(*v), cmp_u32);
	*ids = v;
	*count = n;
	return 0;
}

/* ------------------------------------------------------------ commit */

static int fold_one(struct uext4_fs *fs, struct dquot *d)
{
	struct buf *b;
	int64_t space = pcounter_sum(&d->space), inodes = pcounter_sum(&d->inodes);
	uint8_t now[QT_ENTRY_SIZE];
	int err;

	atomic_store_explicit(&d->dirty, false, memory_order_relaxed);
	ulock_lock(&d->lock);
	/* Negative only on an image whose files were wrong: kept at 0. */
	d->e.curspace = space < 0 ? 0 : (uint64_t)space;
	d->e.curinodes = inodes < 0 ? 0 : (uint64_t)inodes;
	/* Usage back under a soft limit stops its timer (the kernel's
	 * dquot_decr_space() and dquot_decr_inodes()), whoever freed it. */
	if (d->e.curspace <= d->e.bsoftlimit * QT_BLOCK_SIZE)
		d->e.btime = 0;
	if (d->e.curinodes <= d->e.isoftlimit)
		d->e.itime = 0;
	qt_encode(now, &d->e);
	ulock_unlock(&d->lock);
	if ((err = bread(fs->bc, d->pblk, UEXT4_META_OTHER, &b)))
		return err;
	if (memcmp(b->data + d->poff, now, sizeof(now))) {
		memcpy(b->data + d->poff, now, sizeof(now));
		bcache_mark_dirty(fs->bc, b);
	}
	brelse(fs->bc, b);
	return 0;
}

int quota_fold(struct uext4_fs *fs)
{
	struct quota_state *q = fs->quota;
	int err = 0;

	if (!q)
		return 0;
	for (unsigned i = 0; i < QUOTA_BUCKETS && !err; i++)
		for (struct dquot *d = atomic_load(&q->bucket[i]); d && !err;
		     d = atomic_load(&d->next))
			if (atomic_load_explicit(&d->dirty, memory_order_relaxed))
				err = fold_one(fs, d);
	return err;
}

/* ------------------------------------------------------- mount, unmount */

static uint32_t quota_inum(struct uext4_fs *fs, int type)
{
	switch (type) {
	case QT_USER: return le32(fs->sb.s_usr_quota_inum);
	case QT_GROUP: return le32(fs->sb.s_grp_quota_inum);
	default:
		return FS_HAS_RO_COMPAT(fs, PROJECT) ? le32(fs->sb.s_prj_quota_inum) : 0;
	}
}

static int load_file(struct uext4_fs *fs, int type, uint32_t ino)
{
	struct qfile *f = &fs->quota->file[type];
	struct load_ctx l = { .fs = fs, .f = f, .type = type };
	struct qt_io io;
	struct qio c;
	int err;

	if (ino < EXT4_USR_QUOTA_INO || ino > fs->inodes_count)
		return fs_corrupt("superblock: quota inode %u out of range", ino);
	if ((err = iget(fs, ino, &f->inode)))
		return err;
	if (!S_ISREG(f->inode->mode))
		return fs_corrupt("quota inode %u is not a regular file", ino);
	qio_init(&c, &io, fs, NULL, f);
	if ((err = qt_read_info(&io, type, &f->info)) == -EUCLEAN)
		return fs_corrupt("quota inode %u: not a v2r1 quota file of its type", ino);
	atomic_init(&f->bgrace, f->info.bgrace);
	atomic_init(&f->igrace, f->info.igrace);
	return err ? err : qt_iterate(&io, load_one, &l);
}

int quota_load(struct uext4_fs *fs, const struct quota_host *host)
{
	struct quota_state *q;
	int err = 0;

	if (!FS_HAS_RO_COMPAT(fs, QUOTA))
		return 0;
	q = calloc(1, sizeof(*q));
	if (!q)
		return fs_err(ENOMEM, "out of memory for quota state");
	q->host = host;
	ulock_init(&q->lock, RANK_QUOTA);
	fs->quota = q;
	for (int t = 0; t < QT_NTYPES && !err; t++) {
		uint32_t ino = quota_inum(fs, t);

		if (ino)
			err = load_file(fs, t, ino);
	}
	if (err)
		quota_destroy(fs);
	return err;
}

void quota_destroy(struct uext4_fs *fs)
{
	struct quota_state *q = fs->quota;

	if (!q)
		return;
	fs->quota = NULL;
	for (int t = 0; t < QT_NTYPES; t++)
		if (q->file[t].inode)
			iput(fs, q->file[t].inode);
	for (unsigned i = 0; i < QUOTA_BUCKETS; i++) {
		struct dquot *d = atomic_load(&q->bucket[i]);

		while (d) {
			struct dquot *next = atomic_load(&d->next);

			ulock_destroy(&d->lock);
			free(d);
			d = next;
		}
	}
	ulock_destroy(&q->lock);
	free(q);
}
