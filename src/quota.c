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
	/* The entry as last read or folded: limits and times (the fold's,
	 * with handles drained; limits are not changed by this mount). */
	struct qt_entry e;
	/* Usage, summed by the fold. */
	struct pcounter space, inodes;
	/* Charged since the last fold: set by charges (relaxed), cleared
	 * by the fold. */
	_Atomic bool dirty;
};

struct qfile {
	struct inode *inode;        /* a reference held from load to destroy */
	struct qt_info info;
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

int quota_transfer(struct handle *h, struct inode *n, uint32_t uid, uint32_t gid,
		   uint32_t projid)
{
	struct uext4_fs *fs = h->fs;
	uint32_t ids[QT_NTYPES] = { uid, gid, projid };
	struct dquot *d;
	int err;

	if (fs->quota && n->q_state != Q_GONE && countable(fs, n))
		for (int t = 0; t < QT_NTYPES; t++)
			if (fs->quota->file[t].inode && (err = dq_acquire(h, t, ids[t], &d)))
				return err;
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

/* ------------------------------------------------------------ commit */

static int fold_one(struct uext4_fs *fs, struct dquot *d)
{
	struct buf *b;
	int64_t space = pcounter_sum(&d->space), inodes = pcounter_sum(&d->inodes);
	int err;

	atomic_store_explicit(&d->dirty, false, memory_order_relaxed);
	if ((uint64_t)space == d->e.curspace && (uint64_t)inodes == d->e.curinodes)
		return 0;
	if ((err = bread(fs->bc, d->pblk, UEXT4_META_OTHER, &b)))
		return err;
	/* Negative only on an image whose files were wrong: kept at 0. */
	d->e.curspace = space < 0 ? 0 : (uint64_t)space;
	d->e.curinodes = inodes < 0 ? 0 : (uint64_t)inodes;
	qt_encode(b->data + d->poff, &d->e);
	bcache_mark_dirty(fs->bc, b);
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

			free(d);
			d = next;
		}
	}
	ulock_destroy(&q->lock);
	free(q);
}
