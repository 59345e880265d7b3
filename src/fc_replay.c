/*
 * fc_replay.c - replaying the kernel's fast commits after a crash.
 *
 * A fast_commit file system's fsync writes, instead of a full JBD2
 * transaction, a few tag-length-value records into the area after the
 * log (ondisk.h): the inodes changed (raw), the extents added and the
 * ranges removed, the names linked and unlinked.  They belong to the
 * transaction after the last committed one.  The journal (recovery.c)
 * reads the area and hands it to fc_scan() through its host before it
 * writes anything; mount.c calls fc_replay() after the full transactions
 * were replayed, on a mount whose commits go straight home (as the
 * kernel's replay writes without a journal), and then empties the log.
 *
 * What the kernel does (fs/ext4/fast_commit.c), and so we do:
 * - scan: records never cross a block end; a tail's crc32c covers every
 *   record since the previous tail (seed 0) up to the tail's tid; the
 *   tags up to the last good tail are replayed, the rest dropped; a bad
 *   first fast commit refuses the recovery.
 * - INODE: the raw inode into its slot but for i_block (the tree on disk
 *   stays; ranges are replayed into it); its bit set.
 * - ADD_RANGE / DEL_RANGE: map the logged blocks / take the range out.
 * - CREAT / LINK / UNLINK: the directory entry and the link count (a
 *   missing or moved name is no error: the full commits may have it).
 * - then, for every inode touched: the blocks it held before (and every
 *   logged extent) are cleared in the bitmaps and the blocks it maps now
 *   set, with the group counts; its i_blocks counted again.
 *
 * Single-threaded, on a mount no one else uses yet: the inode locks are
 * taken only to keep the lock checker's order (inode, then handle).
 */
#include "balloc.h"
#include "crc.h"
#include "dir.h"
#include "error.h"
#include "fault.h"
#include "fc_replay.h"
#include "file.h"
#include "ialloc.h"
#include "icache.h"
#include "inode.h"
#include "internal.h"
#include "lock.h"
#include "ondisk.h"
#include "orphan.h"
#include "trans.h"

#include <stdio.h>
#include <stdlib.h>
#include <dirent.h>
#include <string.h>
#include <sys/stat.h>

/* As namei.c's: past it, a dir_nlink directory counts 1 link. */
#define EXT4_LINK_MAX_COUNT 65000

/* A block range (pblk, len). */
struct fc_range {
	uint64_t pblk, len;
};

/* A growable array of ranges or inode numbers. */
struct fc_ranges {
	struct fc_range *v;
	size_t n, cap;
};

struct fc_replay {
	uint8_t *tags;          /* records up to the last good tail */
	size_t len;
	uint32_t ntags, commits, tid;
	uint64_t *inos;         /* inodes touched, in order */
	size_t ninos, cap_inos;
	uint64_t *dirs;         /* directories whose subdirectory count changed */
	size_t ndirs, cap_dirs;
	struct fc_ranges stale; /* blocks to clear before the final marking */
	struct fc_ranges now;   /* blocks the touched inodes map after the replay */
};

static uint16_t get16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static int ranges_add(struct fc_ranges *r, uint64_t pblk, uint64_t len)
{
	if (r->n == r->cap) {
		size_t cap = r->cap ? r->cap * 2 : 64;
		struct fc_range *v = realloc(r->v, cap * sizeof(*v));

		if (!v)
			return fs_err(ENOMEM, "fast commit replay: out of memory");
		r->v = v;
		r->cap = cap;
	}
	r->v[r->n++] = (struct fc_range){pblk, len};
	return 0;
}

/* Add ino to a list unless there. */
static int list_add(uint64_t **v, size_t *n, size_t *cap, uint64_t ino)
{
	for (size_t i = 0; i < *n; i++)
		if ((*v)[i] == ino)
			return 0;
	if (*n == *cap) {
		size_t c = *cap ? *cap * 2 : 64;
		uint64_t *p = realloc(*v, c * sizeof(*p));

		if (!p)
			return fs_err(ENOMEM, "fast commit replay: out of memory");
		*v = p;
		*cap = c;
	}
	(*v)[(*n)++] = ino;
	return 1;
}

/* ---------------------------------------------------------------- scan */

/* As the kernel's ext4_fc_value_len_isvalid(). */
static bool value_len_ok(const struct uext4_fs *fs, uint16_t tag, uint32_t len)
{
	switch (tag) {
	case EXT4_FC_TAG_ADD_RANGE:
		return len == sizeof(struct ext4_fc_add_range);
	case EXT4_FC_TAG_DEL_RANGE:
		return len == sizeof(struct ext4_fc_del_range);
	case EXT4_FC_TAG_CREAT:
	case EXT4_FC_TAG_LINK:
	case EXT4_FC_TAG_UNLINK:
		return len > sizeof(struct ext4_fc_dentry_info) &&
		       len - sizeof(struct ext4_fc_dentry_info) <= EXT4_NAME_LEN;
	case EXT4_FC_TAG_INODE:
		return len >= sizeof(struct ext4_fc_inode) + EXT4_GOOD_OLD_INODE_SIZE &&
		       len - sizeof(struct ext4_fc_inode) <= fs->inode_size;
	case EXT4_FC_TAG_PAD:
		return true;
	case EXT4_FC_TAG_TAIL:
		return len >= sizeof(struct ext4_fc_tail);
	case EXT4_FC_TAG_HEAD:
		return len == sizeof(struct ext4_fc_head);
	}
	return false;
}

struct scan_state {
	struct fc_replay *fc;
	uint8_t *buf;           /* records kept so far (good or not yet closed) */
	size_t len, cap;
	uint32_t crc, tags, good_tags;
	size_t good_len;
	bool stop;
};

static int keep_record(struct scan_state *st, const uint8_t *rec, size_t n)
{
	if (st->len + n > st->cap) {
		size_t cap = st->cap ? st->cap * 2 : 4096;
		uint8_t *b;

		while (cap < st->len + n)
			cap *= 2;
		if (!(b = realloc(st->buf, cap)))
			return fs_err(ENOMEM, "fast commit scan: out of memory");
		st->buf = b;
		st->cap = cap;
	}
	memcpy(st->buf + st->len, rec, n);
	st->len += n;
	st->tags++;
	return 0;
}

/* A bad record: the end of the replay after a good fast commit, else
 * (nothing good before it) the kernel's refusal. */
static int bad_record(struct scan_state *st, int err, uint32_t blk, uint32_t off, const char *what)
{
	st->stop = true;
	if (st->good_tags)
		return 0;
	return fs_err(err, "fast-commit area block %u, offset %u: %s, in the first fast commit "
		      "of transaction %u: the kernel refuses this journal too (e2fsck -fy "
		      "recovers it without the fast commits)", blk, off, what, st->fc->tid);
}

static int scan_tail(struct scan_state *st, const uint8_t *rec, uint32_t blk, uint32_t off)
{
	uint32_t tid = get32(rec + 4), crc = get32(rec + 8);

	st->crc = crc32c(st->crc, rec, sizeof(struct ext4_fc_tl) + 4);
	if (tid != st->fc->tid || crc != st->crc) {
		char what[96];

		snprintf(what, sizeof(what), "tail of tid %u with crc 0x%08x, computed 0x%08x", tid,
			 crc, st->crc);
		return bad_record(st, EBADMSG, blk, off, what);
	}
	st->good_len = st->len + sizeof(struct ext4_fc_tl) + get16(rec + 2);
	st->good_tags = st->tags + 1;
	st->fc->commits++;
	st->crc = 0;
	return keep_record(st, rec, sizeof(struct ext4_fc_tl) + get16(rec + 2));
}

/* One record at off of block blk: check it, add it to the crc, keep it. */
static int scan_record(struct uext4_fs *fs, struct scan_state *st, const uint8_t *rec,
		       uint32_t blk, uint32_t off)
{
	uint16_t tag = get16(rec), len = get16(rec + 2);
	size_t whole = sizeof(struct ext4_fc_tl) + len;

	if (len > fs->block_size - off - sizeof(struct ext4_fc_tl) || !value_len_ok(fs, tag, len))
		return bad_record(st, ECANCELED, blk, off, "a record of unknown tag or bad length");
	switch (tag) {
	case EXT4_FC_TAG_TAIL:
		return scan_tail(st, rec, blk, off);
	case EXT4_FC_TAG_HEAD:
		if (get32(rec + 4) & ~EXT4_FC_SUPPORTED_FEATURES) {
			st->stop = true;
			return fs_err(EOPNOTSUPP, "fast-commit area: unknown features 0x%x",
				      get32(rec + 4));
		}
		if (get32(rec + 8) != st->fc->tid) {
			st->stop = true;   /* fast commits of an older transaction */
			return 0;
		}
		break;
	case EXT4_FC_TAG_ADD_RANGE:
	case EXT4_FC_TAG_DEL_RANGE:
	case EXT4_FC_TAG_CREAT:
	case EXT4_FC_TAG_LINK:
	case EXT4_FC_TAG_UNLINK:
	case EXT4_FC_TAG_INODE:
	case EXT4_FC_TAG_PAD:
		break;
	}
	st->crc = crc32c(st->crc, rec, whole);
	return keep_record(st, rec, whole);
}

static int scan_block(struct uext4_fs *fs, struct scan_state *st, const uint8_t *b, uint32_t blk)
{
	uint32_t off = 0;

	while (!st->stop && off + sizeof(struct ext4_fc_tl) <= fs->block_size) {
		int err = scan_record(fs, st, b + off, blk, off);

		if (err)
			return err;
		off += (uint32_t)sizeof(struct ext4_fc_tl) + get16(b + off + 2);
	}
	return 0;
}

int fc_scan(struct uext4_fs *fs, const uint8_t *area, uint32_t nblocks, uint32_t tid,
	    struct fc_replay **out)
{
	struct fc_replay *fc;
	struct scan_state st = {0};
	int err = 0;

	*out = NULL;
	if (!nblocks || get16(area) != EXT4_FC_TAG_HEAD)
		return 0;   /* as the kernel: no head, nothing to replay */
	if (!(fc = calloc(1, sizeof(*fc))))
		return fs_err(ENOMEM, "fast commit scan: out of memory");
	fc->tid = tid;
	st.fc = fc;
	for (uint32_t i = 0; i < nblocks && !st.stop && !err; i++)
		err = scan_block(fs, &st, area + (size_t)i * fs->block_size, i);
	if (err || !st.good_tags) {
		free(st.buf);
		free(fc);
		return err;
	}
	fc->tags = st.buf;
	fc->len = st.good_len;
	fc->ntags = st.good_tags;
	*out = fc;
	return 0;
}

void fc_counts(const struct fc_replay *fc, uint32_t *tags, uint32_t *commits)
{
	*tags = fc ? fc->ntags : 0;
	*commits = fc ? fc->commits : 0;
}

void fc_free(struct fc_replay *fc)
{
	if (!fc)
		return;
	free(fc->tags);
	free(fc->inos);
	free(fc->dirs);
	free(fc->stale.v);
	free(fc->now.v);
	free(fc);
}

/* ---------------------------------------------------------------- replay */

static int add_block(void *ctx, uint64_t pblk, uint64_t len, bool node)
{
	(void)node;
	return ranges_add(ctx, pblk, len);
}

/* The blocks of an inode's extent tree (nodes and data) into r. */
static int collect_blocks(struct uext4_fs *fs, struct inode *n, struct fc_ranges *r)
{
	if (!(n->flags & EXT4_EXTENTS_FL) || (n->flags & EXT4_INLINE_DATA_FL))
		return 0;
	return extent_for_each_block(fs, n, add_block, r);
}

/* First touch of ino: remember it, and the blocks it holds now (cleared
 * before the final marking, as the kernel's ext4_ext_clear_bb()). */
static int touch_inode(struct uext4_fs *fs, struct fc_replay *fc, uint64_t ino)
{
	struct inode *n;
	int err = list_add(&fc->inos, &fc->ninos, &fc->cap_inos, ino);

	if (err <= 0)
		return err;
	if (iget(fs, ino, &n) != 0)
		return 0;   /* not in use before: nothing held */
	err = collect_blocks(fs, n, &fc->stale);
	iput(fs, n);
	return err;
}

/* Lock one or two inodes in number order (the lock checker's order). */
static void lock_pair(struct inode *a, struct inode *b)
{
	if (b && b != a && b->ino < a->ino) {
		struct inode *t = a;

		a = b;
		b = t;
	}
	urw_wrlock_as(&a->lock, RANK_INODE);
	if (b && b != a)
		urw_wrlock_as(&b->lock, RANK_INODE + 1);
}

static void unlock_pair(struct inode *a, struct inode *b)
{
	if (b && b != a && b->ino < a->ino) {
		struct inode *t = a;

		a = b;
		b = t;
	}
	if (b && b != a)
		urw_unlock_as(&b->lock, RANK_INODE + 1);
	urw_unlock_as(&a->lock, RANK_INODE);
}

static int replay_inode(struct uext4_fs *fs, struct fc_replay *fc, const uint8_t *v, size_t len)
{
	uint64_t ino = get32(v);
	const uint8_t *raw = v + sizeof(struct ext4_fc_inode);
	struct handle *h;
	int err;

	if ((err = touch_inode(fs, fc, ino)) || (err = handle_begin(fs, &h)))
		return err;
	err = inode_replay_raw(h, ino, raw, len - sizeof(struct ext4_fc_inode));
	if (!err)
		err = ialloc_replay_mark_used(h, ino, S_ISDIR(get16(raw)));
	if (handle_end(h) && !err)
		err = -EIO;
	return err;
}

static int replay_range(struct uext4_fs *fs, struct fc_replay *fc, uint16_t tag, const uint8_t *v)
{
	uint64_t ino = get32(v);
	struct inode *n;
	struct handle *h;
	int err, eerr;

	if ((err = touch_inode(fs, fc, ino)))
		return err;
	if (iget(fs, ino, &n) != 0)
		return 0;   /* as the kernel: an inode it cannot find is skipped */
	if (!(n->flags & EXT4_EXTENTS_FL)) {
		iput(fs, n);
		return fs_err(EOPNOTSUPP, "fast commit: a range of inode %llu, which has no "
			      "extent tree", (unsigned long long)ino);
	}
	lock_pair(n, NULL);
	if ((err = handle_begin(fs, &h)) == 0) {
		if (tag == EXT4_FC_TAG_ADD_RANGE) {
			const uint8_t *ex = v + 4;
			uint32_t lblk = get32(ex), elen = get16(ex + 4);
			uint64_t pblk = (uint64_t)get16(ex + 6) << 32 | get32(ex + 8);
			bool uw = elen > EXT4_EXT_INIT_MAX_LEN;

			if (uw)
				elen -= EXT4_EXT_INIT_MAX_LEN;
			err = elen ? extent_replay_map(h, n, lblk, elen, pblk, uw) : 0;
		} else {
			uint64_t lblk = get32(v + 4), dlen = get32(v + 8);

			err = extent_replay_unmap(h, n, lblk, lblk + dlen);
		}
		eerr = handle_end(h);
		err = err ? err : eerr;
	}
	unlock_pair(n, NULL);
	iput(fs, n);
	return err;
}

/* The dentry records' parent, inode and name. */
struct dentry_arg {
	uint64_t parent, ino;
	const char *name;
	size_t len;
};

static struct dentry_arg dentry_of(const uint8_t *v, size_t len)
{
	return (struct dentry_arg){get32(v), get32(v + 4),
				   (const char *)v + sizeof(struct ext4_fc_dentry_info),
				   len - sizeof(struct ext4_fc_dentry_info)};
}

/* __ext4_link(): the entry (none if the name is there), a link more. */
static int link_locked(struct handle *h, struct inode *dir, struct inode *n,
		       const struct dentry_arg *d)
{
	uint64_t found;
	unsigned ft;
	int err = dir_lookup_locked(h->fs, dir, d->name, d->len, &found, &ft);

	if (err == 0)
		return 0;   /* as the kernel: -EEXIST is no error here */
	if (err != -ENOENT)
		return err;
	if ((err = dir_add(h, dir, d->name, d->len, n->ino, ftype_of_mode(n->mode))))
		return err;
	dir->mtime = dir->ctime = fs_time(h->fs);
	n->ctime = dir->ctime;
	n->links++;
	if ((err = inode_write(h, dir)))
		return err;
	return inode_write(h, n);
}

/* ext4_fc_replay_create(): a new directory gets "." and ".." first; after
 * the link the count is 1, as the kernel sets it. */
static int create_locked(struct handle *h, struct inode *dir, struct inode *n,
			 const struct dentry_arg *d)
{
	int err;

	if (S_ISDIR(n->mode)) {
		n->size = 0;   /* as ext4_init_new_dir(): the first block again */
		if ((err = dir_make(h, n, dir->ino)))
			return err;
	}
	if ((err = link_locked(h, dir, n, d)))
		return err;
	n->links = 1;
	return inode_write(h, n);
}

/* __ext4_unlink() in replay: the entry goes if it still names the inode;
 * the link count drops either way; no links left: onto the orphan list,
 * freed at the last reference as any unlinked inode. */
static int unlink_locked(struct handle *h, struct inode *dir, struct inode *n,
			 const struct dentry_arg *d)
{
	uint64_t found;
	unsigned ft;
	int err = dir_lookup_locked(h->fs, dir, d->name, d->len, &found, &ft);

	if (err == -ENOENT)
		return 0;
	if (err)
		return err;
	if (found == n->ino) {
		if ((err = dir_remove(h, dir, d->name, d->len, n->ino)))
			return err;
		dir->mtime = dir->ctime = fs_time(h->fs);
		if ((err = inode_write(h, dir)))
			return err;
	}
	n->ctime = fs_time(h->fs);
	if (n->links > 0)
		n->links--;
	if (n->links == 0) {
		atomic_fetch_or(&n->istate, INODE_UNLINKED);
		if ((err = orphan_add(h, n)))
			return err;
	}
	return inode_write(h, n);
}

static int replay_dentry(struct uext4_fs *fs, struct fc_replay *fc, uint16_t tag,
			 const uint8_t *v, size_t len)
{
	struct dentry_arg d = dentry_of(v, len);
	struct inode *dir = NULL, *n = NULL;
	struct handle *h;
	int err = 0, eerr;

	if (tag == EXT4_FC_TAG_CREAT) {
		if ((err = touch_inode(fs, fc, d.ino)) || (err = handle_begin(fs, &h)))
			return err;
		err = ialloc_replay_mark_used(h, d.ino, false);
		eerr = handle_end(h);
		if (err || eerr)
			return err ? err : eerr;
	}
	if (iget(fs, d.ino, &n) != 0 || iget(fs, d.parent, &dir) != 0 || !S_ISDIR(dir->mode))
		goto out;   /* as the kernel: what it cannot find is skipped */
	if (S_ISDIR(n->mode) &&
	    ((err = list_add(&fc->dirs, &fc->ndirs, &fc->cap_dirs, d.parent)) < 0 ||
	     (err = list_add(&fc->dirs, &fc->ndirs, &fc->cap_dirs, d.ino)) < 0))
		goto out;
	lock_pair(dir, n);
	if ((err = handle_begin(fs, &h)) == 0) {
		if (tag == EXT4_FC_TAG_LINK)
			err = link_locked(h, dir, n, &d);
		else if (tag == EXT4_FC_TAG_CREAT)
			err = create_locked(h, dir, n, &d);
		else
			err = unlink_locked(h, dir, n, &d);
		eerr = handle_end(h);
		err = err ? err : eerr;
	}
	unlock_pair(dir, n);
out:
	if (dir)
		iput(fs, dir);
	if (n)
		iput(fs, n);
	return err;
}

static int replay_record(struct uext4_fs *fs, struct fc_replay *fc, uint16_t tag,
			 const uint8_t *v, size_t len)
{
	switch (tag) {
	case EXT4_FC_TAG_INODE:
		return replay_inode(fs, fc, v, len);
	case EXT4_FC_TAG_ADD_RANGE:
	case EXT4_FC_TAG_DEL_RANGE:
		return replay_range(fs, fc, tag, v);
	case EXT4_FC_TAG_CREAT:
	case EXT4_FC_TAG_LINK:
	case EXT4_FC_TAG_UNLINK:
		return replay_dentry(fs, fc, tag, v, len);
	}
	return 0;   /* HEAD, PAD, TAIL */
}

/* i_blocks as the tree says (ext4_ext_replay_set_iblocks()), and the
 * blocks it maps into fc->now. */
static int recount_inode(struct uext4_fs *fs, struct fc_replay *fc, uint64_t ino)
{
	struct inode *n;
	struct handle *h;
	size_t from = fc->now.n;
	uint64_t blocks = 0;
	int err;

	if (iget(fs, ino, &n) != 0)
		return 0;
	if (n->links == 0 || !(n->flags & EXT4_EXTENTS_FL) || (n->flags & EXT4_INLINE_DATA_FL)) {
		iput(fs, n);
		return 0;
	}
	lock_pair(n, NULL);
	err = collect_blocks(fs, n, &fc->now);
	for (size_t i = from; i < fc->now.n; i++)
		blocks += fc->now.v[i].len;
	if (n->file_acl)
		blocks++;
	if (!err && (err = handle_begin(fs, &h)) == 0) {
		n->blocks = blocks << (fs->log_block_size - 9);
		err = inode_write(h, n);
		if (handle_end(h) && !err)
			err = -EIO;
	}
	unlock_pair(n, NULL);
	iput(fs, n);
	return err;
}

static int count_subdir(void *ctx, const char *name, size_t len, uint64_t ino, unsigned dtype,
			uint64_t next)
{
	struct { struct uext4_fs *fs; uint64_t n; } *c = ctx;
	struct inode *n;

	(void)next;
	if (len <= 2 && name[0] == '.' && (len == 1 || name[1] == '.'))
		return 0;
	if (dtype == DT_DIR)
		c->n++;
	else if (dtype == DT_UNKNOWN && iget(c->fs, ino, &n) == 0) {
		c->n += S_ISDIR(n->mode);
		iput(c->fs, n);
	}
	return 0;
}

/*
 * Where the replay made or removed directories, their parents' and their
 * own link counts are counted again from the entries (2 + subdirectories,
 * 1 past the dir_nlink limit).  The kernel's replay leaves a new
 * directory at 1 and its parent one short (e2fsck then fixes both);
 * uext4 gives the counts a mkdir gives.
 */
static int recount_dir_links(struct uext4_fs *fs, uint64_t ino)
{
	struct { struct uext4_fs *fs; uint64_t n; } c = {fs, 0};
	struct inode *d;
	struct handle *h;
	int err;

	if (iget(fs, ino, &d) != 0)
		return 0;
	if (!S_ISDIR(d->mode) || d->links == 0 ||
	    (err = dir_iterate(fs, d, 0, count_subdir, &c)) != 0) {
		iput(fs, d);
		return 0;
	}
	lock_pair(d, NULL);
	if ((err = handle_begin(fs, &h)) == 0) {
		d->links = c.n + 2 >= EXT4_LINK_MAX_COUNT && FS_HAS_RO_COMPAT(fs, DIR_NLINK)
				   ? 1 : (uint32_t)(c.n + 2);
		err = inode_write(h, d);
		if (handle_end(h) && !err)
			err = -EIO;
	}
	unlock_pair(d, NULL);
	iput(fs, d);
	return err;
}

/* ext4_fc_set_bitmaps_and_counters(): what was held or logged is cleared,
 * what the touched inodes map now is set. */
static int set_bitmaps(struct uext4_fs *fs, struct fc_replay *fc)
{
	struct handle *h;
	int err = 0;

	for (size_t i = 0; i < fc->ninos && !err; i++)
		err = recount_inode(fs, fc, fc->inos[i]);
	for (size_t i = 0; i < fc->ndirs && !err; i++)
		err = recount_dir_links(fs, fc->dirs[i]);
	if (err || (err = handle_begin(fs, &h)))
		return err;
	for (size_t i = 0; i < fc->stale.n && !err; i++)
		err = balloc_replay_mark(h, fc->stale.v[i].pblk, fc->stale.v[i].len, false);
	for (size_t i = 0; i < fc->now.n && !err; i++)
		err = balloc_replay_mark(h, fc->now.v[i].pblk, fc->now.v[i].len, true);
	if (handle_end(h) && !err)
		err = -EIO;
	return err;
}

/*
 * Every logged extent is a region no allocation of the replay may take
 * (the kernel's ext4_fc_replay_check_excluded(), from its scan): marked
 * in use before the first tag, cleared at the end unless mapped then.
 */
static int exclude_regions(struct uext4_fs *fs, struct fc_replay *fc)
{
	struct handle *h;
	size_t off = 0, from = fc->stale.n;
	int err = 0;

	while (!err && off + sizeof(struct ext4_fc_tl) <= fc->len) {
		const uint8_t *v = fc->tags + off + sizeof(struct ext4_fc_tl);
		uint32_t elen = get16(v + 8);

		if (get16(fc->tags + off) == EXT4_FC_TAG_ADD_RANGE && elen) {
			if (elen > EXT4_EXT_INIT_MAX_LEN)
				elen -= EXT4_EXT_INIT_MAX_LEN;
			err = ranges_add(&fc->stale, (uint64_t)get16(v + 10) << 32 | get32(v + 12),
					 elen);
		}
		off += sizeof(struct ext4_fc_tl) + get16(fc->tags + off + 2);
	}
	if (err || (err = handle_begin(fs, &h)))
		return err;
	for (size_t i = from; i < fc->stale.n && !err; i++)
		err = balloc_replay_mark(h, fc->stale.v[i].pblk, fc->stale.v[i].len, true);
	if (handle_end(h) && !err)
		err = -EIO;
	return err;
}

int fc_replay(struct uext4_fs *fs, struct fc_replay *fc)
{
	size_t off = 0;
	int err = exclude_regions(fs, fc);

	for (uint32_t i = 0; !err && off + sizeof(struct ext4_fc_tl) <= fc->len; i++) {
		uint16_t tag = get16(fc->tags + off), len = get16(fc->tags + off + 2);

		if (!(err = fault_point(FAULT_FC_REPLAY, i)))
			err = replay_record(fs, fc, tag, fc->tags + off + sizeof(struct ext4_fc_tl),
					    len);
		if (err) {
			char why[256];

			snprintf(why, sizeof(why), "%s", uext4_last_error());
			return fs_err(-err, "fast-commit replay, tag %u of %u (type %u): %s; the "
				      "journal is kept for the next try", i + 1,
				      fc->ntags, tag, why);
		}
		off += sizeof(struct ext4_fc_tl) + len;
	}
	if (!err)
		err = set_bitmaps(fs, fc);
	return err;
}
