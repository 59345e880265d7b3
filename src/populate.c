/*
 * populate.c - fill an image from a host directory (uext4_populate).
 *
 * The image's bytes must not depend on thread timing, so the work is split
 * by what it changes:
 *  - one namespace thread walks the source, each directory's entries in
 *    strcmp order, and makes every metadata change: it creates each inode,
 *    allocates all of a regular file's blocks at once (one extent where the
 *    allocator finds the room), sets xattrs, owners, modes and times.  As
 *    the only thread that allocates, inode numbers and block placement
 *    follow the walk and nothing else;
 *  - data workers copy file contents from the source straight into blocks
 *    that are already allocated and mapped (copy_file_range to the device,
 *    zeros after the end of each file): no allocation, no metadata, so
 *    their timing changes only when the bytes land, never which bytes;
 *  - the calling thread reports progress until the two are done.
 * Inode flags go on last, once every byte is in (immutable and append-only
 * inodes would refuse the links and attribute changes before).
 *
 * With uext4_opts.bulk (no journal logging, no commit timer) and
 * use_fixed_time the commits, too, happen at the same points of the walk
 * on every run, which makes the whole image reproducible.
 */
#include "internal.h"

#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>
#include <linux/fs.h>

#define POP_PATH_MAX 8192
#define COPY_BUF (1u << 20)         /* bytes a worker reads and writes at once */
#define COPY_RANGE_MIN (64u << 10)  /* smaller runs: one pread + pwrite is cheaper */
#define QUEUE_CAP 256               /* data jobs in flight (each holds a source fd) */
#define ALLOC_MAX_BLOCKS 32768u     /* blocks asked for at once (one extent's most) */
#define PROGRESS_NS 100000000L      /* progress callback every 100 ms */
#define XATTR_BUF (64u << 10)       /* XATTR_SIZE_MAX and XATTR_LIST_MAX */
/* Source inode flags we copy: the ones chattr sets that ext4 keeps. */
#define COPY_FLAGS (FS_SECRM_FL | FS_UNRM_FL | FS_SYNC_FL | FS_IMMUTABLE_FL | FS_APPEND_FL | \
		    FS_NODUMP_FL | FS_NOATIME_FL | FS_DIRSYNC_FL | FS_TOPDIR_FL)

/* A physically contiguous run of a file's blocks. */
struct run {
	uint64_t lblk, pblk, len;
};

/* One regular file's data to copy: the runs are allocated and mapped. */
struct job {
	int fd;             /* the source file, open for reading; the job owns it */
	uint64_t size;      /* bytes to copy (st_size at the scan) */
	char *path;         /* for messages */
	size_t nruns, cap;
	struct run *runs;
};

/* Bounded FIFO of jobs from the namespace thread to the workers.  lock
 * protects every field. */
struct jobq {
	pthread_mutex_t lock;
	pthread_cond_t nonempty, nonfull;
	struct job *ring[QUEUE_CAP];
	size_t head, count;
	bool closed;
};

/* Inode flags to apply at the end, in walk order. */
struct flagset {
	uint64_t ino;
	uint32_t flags;
	char *path;
};

/* Hard links seen: source (dev, ino) -> image inode.  Namespace thread only. */
struct linkent {
	uint64_t dev, ino, to;
};

struct pop {
	uext4_fs *fs;
	const struct uext4_populate_opts *o;
	uint64_t top;
	unsigned nworkers;          /* 0: the namespace thread copies data itself */
	struct jobq q;
	/* Namespace thread only: */
	struct linkent *links;
	size_t nlinks, caplinks;
	struct flagset *fl;
	size_t nfl, capfl;
	char path[POP_PATH_MAX];    /* the source path being copied */
	size_t plen;
	char *xlist, *xval;         /* xattr buffers */
	uint8_t *buf;               /* data buffer when nworkers == 0 */
	/* The first error (err_lock): */
	pthread_mutex_t err_lock;
	int err;                    /* positive errno */
	char msg[1024];
	_Atomic bool stop;          /* an error: everyone stops at the next step */
	/* Progress, counted lock-free and read by the reporting thread: */
	_Atomic uint64_t files_done, bytes_done;
	uint64_t files_total, bytes_total;
	/* The namespace thread finished (done_lock): */
	pthread_mutex_t done_lock;
	pthread_cond_t done_cond;
	bool done;
};

/* ------------------------------------------------------------ errors */

/* Record the first error (err positive) and make everyone stop; -err. */
static int pop_fail(struct pop *p, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int pop_fail(struct pop *p, int err, const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&p->err_lock);
	if (!p->err) {
		p->err = err ? err : EIO;
		va_start(ap, fmt);
		vsnprintf(p->msg, sizeof(p->msg), fmt, ap);
		va_end(ap);
	}
	pthread_mutex_unlock(&p->err_lock);
	atomic_store(&p->stop, true);
	return -(err ? err : EIO);
}

/* A library call failed with err (negative) on the current path: name the
 * path and, for ENOSPC, what ran out. */
static int fail_lib(struct pop *p, int err, const char *what)
{
	if (err == -ENOSPC) {
		struct uext4_statfs s;
		bool inodes = uext4_statfs(p->fs, &s) == 0 && s.inodes_free == 0;

		if (inodes)
			return pop_fail(p, ENOSPC, "populate: %s: %s: the image has no free inodes "
					"left (%llu in all)", p->path, what,
					(unsigned long long)s.inodes);
		return pop_fail(p, ENOSPC, "populate: %s: %s: the image has no free blocks left "
				"(%llu blocks of %u bytes in all)", p->path, what,
				(unsigned long long)s.blocks, s.block_size);
	}
	return pop_fail(p, -err, "populate: %s: %s: %s", p->path, what, uext4_last_error());
}

static int fail_errno(struct pop *p, const char *what)
{
	int e = errno;

	return pop_fail(p, e, "populate: %s: %s: %s", p->path, what, strerror(e));
}

/* ------------------------------------------------------------ paths */

static int path_push(struct pop *p, const char *name, size_t *saved)
{
	size_t n = strlen(name);

	*saved = p->plen;
	if (p->plen + 1 + n + 1 > sizeof(p->path)) {
		p->path[p->plen] = 0;
		return pop_fail(p, ENAMETOOLONG, "populate: %s/%s: path too long", p->path, name);
	}
	p->path[p->plen] = '/';
	memcpy(p->path + p->plen + 1, name, n + 1);
	p->plen += 1 + n;
	return 0;
}

static void path_pop(struct pop *p, size_t saved)
{
	p->plen = saved;
	p->path[saved] = 0;
}

/* ------------------------------------------------------------ the job queue */

static void jobq_init(struct jobq *q)
{
	memset(q, 0, sizeof(*q));
	pthread_mutex_init(&q->lock, NULL);
	pthread_cond_init(&q->nonempty, NULL);
	pthread_cond_init(&q->nonfull, NULL);
}

static void jobq_destroy(struct jobq *q)
{
	pthread_mutex_destroy(&q->lock);
	pthread_cond_destroy(&q->nonempty);
	pthread_cond_destroy(&q->nonfull);
}

static void jobq_push(struct jobq *q, struct job *j)
{
	pthread_mutex_lock(&q->lock);
	while (q->count == QUEUE_CAP)
		pthread_cond_wait(&q->nonfull, &q->lock);
	q->ring[(q->head + q->count) % QUEUE_CAP] = j;
	q->count++;
	pthread_cond_signal(&q->nonempty);
	pthread_mutex_unlock(&q->lock);
}

/* The next job, or NULL once the queue is closed and empty. */
static struct job *jobq_pop(struct jobq *q)
{
	struct job *j = NULL;

	pthread_mutex_lock(&q->lock);
	while (q->count == 0 && !q->closed)
		pthread_cond_wait(&q->nonempty, &q->lock);
	if (q->count) {
		j = q->ring[q->head];
		q->head = (q->head + 1) % QUEUE_CAP;
		q->count--;
		pthread_cond_signal(&q->nonfull);
	}
	pthread_mutex_unlock(&q->lock);
	return j;
}

static void jobq_close(struct jobq *q)
{
	pthread_mutex_lock(&q->lock);
	q->closed = true;
	pthread_cond_broadcast(&q->nonempty);
	pthread_mutex_unlock(&q->lock);
}

static void job_free(struct job *j)
{
	if (j->fd >= 0)
		close(j->fd);
	free(j->path);
	free(j->runs);
	free(j);
}

/* ------------------------------------------------------------ data copy (workers) */

/* Read exactly n bytes at off (zeros past the source's end). */
static int read_full(int fd, uint8_t *buf, size_t n, uint64_t off)
{
	size_t got = 0;

	while (got < n) {
		ssize_t r = pread(fd, buf + got, n - got, (off_t)(off + got));

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			break;
		got += (size_t)r;
	}
	memset(buf + got, 0, n - got);
	return 0;
}

/*
 * Copy one run: source bytes [lblk, lblk + len) blocks (up to the file's
 * size) to the device at pblk, whole blocks, zeros after the end.  Runs of
 * full blocks go through copy_file_range; the rest is read and written.
 */
static int copy_run(struct pop *p, const struct job *j, const struct run *r, uint8_t *buf)
{
	uext4_fs *fs = p->fs;
	unsigned shift = fs->log_block_size;
	uint64_t bmask = fs->block_size - 1;
	uint64_t off = r->lblk << shift, dev = r->pblk << shift;
	uint64_t end = MIN((r->lblk + r->len) << shift, j->size);
	uint64_t whole = (end - off) & ~bmask;
	uint64_t copied = end - off;

	while (whole >= COPY_RANGE_MIN && !atomic_load_explicit(&p->stop, memory_order_relaxed)) {
		size_t n = (size_t)MIN(whole, (uint64_t)1 << 30);
		int got = bdev_copy_from_fd(fs->dev, j->fd, off, n, dev);

		if (got <= 0)
			break;  /* not a file device, or the source is shorter now */
		off += (uint64_t)got;
		dev += (uint64_t)got;
		whole -= (uint64_t)got;
		if ((size_t)got < n)
			break;
	}
	while (off < end && !atomic_load_explicit(&p->stop, memory_order_relaxed)) {
		size_t n = (size_t)MIN(end - off, (uint64_t)COPY_BUF);
		size_t padded = (size_t)((n + bmask) & ~bmask);
		int err = read_full(j->fd, buf, n, off);

		if (err)
			return pop_fail(p, -err, "populate: %s: read at offset %llu: %s", j->path,
					(unsigned long long)off, strerror(-err));
		memset(buf + n, 0, padded - n);
		if ((err = bdev_write(fs->dev, buf, padded, dev)) < 0)
			return pop_fail(p, -err, "populate: %s: writing its data into the image: %s",
					j->path, uext4_last_error());
		off += n;
		dev += padded;
	}
	atomic_fetch_add_explicit(&p->bytes_done, copied, memory_order_relaxed);
	return 0;
}

static void copy_job(struct pop *p, const struct job *j, uint8_t *buf)
{
	for (size_t i = 0; i < j->nruns && !atomic_load(&p->stop); i++)
		if (copy_run(p, j, &j->runs[i], buf))
			return;
}

static void *data_worker(void *arg)
{
	struct pop *p = arg;
	uint8_t *buf = malloc(COPY_BUF);
	struct job *j;

	if (!buf)
		pop_fail(p, ENOMEM, "populate: out of memory for a copy buffer");
	while ((j = jobq_pop(&p->q))) {
		if (buf && !atomic_load(&p->stop))
			copy_job(p, j, buf);
		job_free(j);
	}
	free(buf);
	return NULL;
}

/* ------------------------------------------------------------ metadata (namespace thread) */

static struct timespec ts_of(const struct statx_timestamp *t)
{
	return (struct timespec){.tv_sec = (time_t)t->tv_sec, .tv_nsec = (long)t->tv_nsec};
}

static struct timespec clamped(const struct pop *p, struct timespec t)
{
	if (p->o->clamp_times && t.tv_sec >= p->o->clamp_time &&
	    (t.tv_sec > p->o->clamp_time || t.tv_nsec > 0))
		return (struct timespec){.tv_sec = (time_t)p->o->clamp_time, .tv_nsec = 0};
	return t;
}

/*
 * Owner, permission bits and times straight into the inode, in one handle
 * (uext4_setattr() would rewrite ACLs and take a handle per call; the
 * source's ACL, copied before, already agrees with its mode).  ctime is
 * the copy's time (the fixed time for reproducible images), crtime the
 * source's birth time where it has one.
 */
static int set_attrs(struct pop *p, uint64_t ino, const struct statx *sx, bool top)
{
	uext4_fs *fs = p->fs;
	struct inode *n;
	struct handle *h;
	int err, eerr;

	if ((err = iget(fs, ino, &n)))
		return fail_lib(p, err, "setting its attributes");
	urw_wrlock(&n->lock);
	if ((err = handle_begin(fs, 2, &h)) == 0) {
		n->uid = top && p->o->root_owner_set ? p->o->root_uid : sx->stx_uid;
		n->gid = top && p->o->root_owner_set ? p->o->root_gid : sx->stx_gid;
		if (!S_ISLNK(n->mode))
			n->mode = (n->mode & S_IFMT) | (sx->stx_mode & 07777);
		n->atime = clamped(p, ts_of(&sx->stx_atime));
		n->mtime = clamped(p, ts_of(&sx->stx_mtime));
		n->ctime = clamped(p, fs_time(fs));
		n->crtime = clamped(p, (sx->stx_mask & STATX_BTIME) ? ts_of(&sx->stx_btime)
								  : fs_time(fs));
		err = inode_write(h, n);
		eerr = handle_end(h);
		err = err ? err : eerr;
	}
	urw_unlock(&n->lock);
	iput(fs, n);
	return err ? fail_lib(p, err, "setting its attributes") : 0;
}

/* Every xattr of the source (fd, or by path when fd < 0) onto ino. */
static int copy_xattrs(struct pop *p, int fd, uint64_t ino)
{
	ssize_t len;

	if (p->o->no_copy_xattrs)
		return 0;
	len = fd >= 0 ? flistxattr(fd, p->xlist, XATTR_BUF) : llistxattr(p->path, p->xlist, XATTR_BUF);
	if (len < 0) {
		if (errno == ENOTSUP || errno == ENOSYS)
			return 0;   /* the source file system has none */
		return fail_errno(p, "listing its xattrs");
	}
	for (ssize_t i = 0; i < len; i += (ssize_t)strlen(p->xlist + i) + 1) {
		const char *name = p->xlist + i;
		ssize_t vlen = fd >= 0 ? fgetxattr(fd, name, p->xval, XATTR_BUF)
				       : lgetxattr(p->path, name, p->xval, XATTR_BUF);
		int err;

		if (vlen < 0) {
			if (errno == ENODATA)
				continue;   /* removed meanwhile */
			return fail_errno(p, "reading an xattr");
		}
		if ((err = uext4_setxattr(p->fs, ino, name, p->xval, (size_t)vlen, 0))) {
			char what[300];

			snprintf(what, sizeof(what), "setting xattr %s", name);
			return fail_lib(p, err, what);
		}
	}
	return 0;
}

/* Remember the source's chattr flags (fd: a regular file or directory). */
static int note_flags(struct pop *p, int fd, uint64_t ino)
{
	int fl = 0;

	if (ioctl(fd, FS_IOC_GETFLAGS, &fl) != 0 || (fl & COPY_FLAGS) == 0)
		return 0;   /* none, or the source file system has no flags */
	if (p->nfl == p->capfl) {
		size_t cap = p->capfl ? 2 * p->capfl : 64;
		struct flagset *v = realloc(p->fl, cap * sizeof(*v));

		if (!v)
			return pop_fail(p, ENOMEM, "populate: out of memory");
		p->fl = v;
		p->capfl = cap;
	}
	p->fl[p->nfl] = (struct flagset){.ino = ino, .flags = (uint32_t)fl & COPY_FLAGS,
					 .path = strdup(p->path)};
	if (!p->fl[p->nfl].path)
		return pop_fail(p, ENOMEM, "populate: out of memory");
	p->nfl++;
	return 0;
}

static int apply_flags(struct pop *p)
{
	for (size_t i = 0; i < p->nfl; i++) {
		uint32_t cur;
		int err = uext4_get_flags(p->fs, p->fl[i].ino, &cur);

		if (!err && (cur & COPY_FLAGS) != p->fl[i].flags)
			err = uext4_set_flags(p->fs, p->fl[i].ino, (cur & ~COPY_FLAGS) | p->fl[i].flags);
		if (err)
			return pop_fail(p, -err, "populate: %s: setting its inode flags: %s",
					p->fl[i].path, uext4_last_error());
	}
	return 0;
}

/* Hard links: the image inode of source (dev, ino), or 0. */
static uint64_t link_find(struct pop *p, uint64_t dev, uint64_t ino)
{
	if (!p->caplinks)
		return 0;
	for (size_t i = (size_t)((ino * 0x9E3779B97F4A7C15ull) ^ dev) & (p->caplinks - 1);;
	     i = (i + 1) & (p->caplinks - 1)) {
		if (!p->links[i].to)
			return 0;
		if (p->links[i].dev == dev && p->links[i].ino == ino)
			return p->links[i].to;
	}
}

static int link_add(struct pop *p, uint64_t dev, uint64_t ino, uint64_t to)
{
	if (2 * (p->nlinks + 1) > p->caplinks) {
		size_t cap = p->caplinks ? 2 * p->caplinks : 1024;
		struct linkent *old = p->links;
		size_t oldcap = p->caplinks;

		if (!(p->links = calloc(cap, sizeof(*p->links)))) {
			p->links = old;
			return pop_fail(p, ENOMEM, "populate: out of memory for hard links");
		}
		p->caplinks = cap;
		p->nlinks = 0;
		for (size_t i = 0; i < oldcap; i++)
			if (old[i].to)
				link_add(p, old[i].dev, old[i].ino, old[i].to);
		free(old);
	}
	for (size_t i = (size_t)((ino * 0x9E3779B97F4A7C15ull) ^ dev) & (p->caplinks - 1);;
	     i = (i + 1) & (p->caplinks - 1)) {
		if (!p->links[i].to) {
			p->links[i] = (struct linkent){.dev = dev, .ino = ino, .to = to};
			p->nlinks++;
			return 0;
		}
	}
}

static int job_add_run(struct pop *p, struct job *j, uint64_t lblk, uint64_t pblk, uint64_t len)
{
	struct run *last = j->nruns ? &j->runs[j->nruns - 1] : NULL;

	if (last && last->lblk + last->len == lblk && last->pblk + last->len == pblk) {
		last->len += len;
		return 0;
	}
	if (j->nruns == j->cap) {
		size_t cap = j->cap ? 2 * j->cap : 4;
		struct run *v = realloc(j->runs, cap * sizeof(*v));

		if (!v)
			return pop_fail(p, ENOMEM, "populate: out of memory");
		j->runs = v;
		j->cap = cap;
	}
	j->runs[j->nruns++] = (struct run){.lblk = lblk, .pblk = pblk, .len = len};
	return 0;
}

/*
 * Allocate (written, not zeroed: the workers write every byte) the blocks
 * of [first, end) of inode n, recording the runs in j.  n->lock held, h open.
 */
static int alloc_range(struct pop *p, struct handle *h, struct inode *n, uint64_t first,
		       uint64_t end, struct job *j)
{
	while (first < end) {
		struct block_map m;
		int err = inode_map_blocks(h, n, first, MIN(end - first, (uint64_t)ALLOC_MAX_BLOCKS),
					   MAP_CREATE, &m);

		if (err)
			return fail_lib(p, err, "allocating its blocks");
		if (!m.pblk || m.unwritten || !m.len)
			return pop_fail(p, EIO, "populate: %s: block %llu not mapped after allocation",
					p->path, (unsigned long long)first);
		m.len = MIN(m.len, end - first);
		if ((err = job_add_run(p, j, first, m.pblk, m.len)))
			return err;
		first += m.len;
	}
	return 0;
}

/*
 * The data ranges of the source (SEEK_DATA/SEEK_HOLE when it is sparse),
 * rounded out to whole blocks, allocated in order; then i_size.
 */
static int alloc_file(struct pop *p, uint64_t ino, int fd, uint64_t size, bool sparse,
		      struct job *j)
{
	uext4_fs *fs = p->fs;
	unsigned shift = fs->log_block_size;
	uint64_t bmask = fs->block_size - 1, nblocks = (size + bmask) >> shift;
	uint64_t off = 0, done_to = 0;
	struct inode *n;
	struct handle *h;
	int err, eerr;

	if ((err = iget(fs, ino, &n)))
		return fail_lib(p, err, "allocating its blocks");
	urw_wrlock(&n->lock);
	if ((err = handle_begin(fs, 8, &h))) {
		err = fail_lib(p, err, "allocating its blocks");
		goto out;
	}
	while (off < size && !err) {
		off_t d = (off_t)off, e = (off_t)size;

		if (sparse) {
			if ((d = lseek(fd, (off_t)off, SEEK_DATA)) < 0) {
				if (errno != ENXIO)
					err = fail_errno(p, "SEEK_DATA");
				break;
			}
			if ((e = lseek(fd, d, SEEK_HOLE)) < 0 || (uint64_t)e > size)
				e = (off_t)size;
		}
		uint64_t first = MAX((uint64_t)d >> shift, done_to);
		uint64_t last = MIN(((uint64_t)e + bmask) >> shift, nblocks);

		if (first < last)
			err = alloc_range(p, h, n, first, last, j);
		done_to = MAX(done_to, last);
		off = (uint64_t)e > off ? (uint64_t)e : size;
	}
	if (!err) {
		n->size = size;
		if ((err = inode_write(h, n)))
			err = fail_lib(p, err, "writing its size");
	}
	balloc_release_prealloc(fs, n);
	eerr = handle_end(h);
	if (!err && eerr)
		err = fail_lib(p, eerr, "allocating its blocks");
out:
	urw_unlock(&n->lock);
	iput(fs, n);
	return err;
}

static int copy_tree(struct pop *p, int dfd, uint64_t dino);

/* Open a source file or directory without changing its atime (O_NOATIME:
 * the owner's or root's right; others open it plainly), so that copying
 * the same tree twice reads the same times. */
static int open_source(int dfd, const char *name, int flags)
{
	int fd = openat(dfd, name, flags | O_NOATIME | O_CLOEXEC);

	if (fd < 0 && errno == EPERM)
		fd = openat(dfd, name, flags | O_CLOEXEC);
	return fd;
}

static int copy_regular(struct pop *p, int dfd, const char *name, uint64_t dino,
			const struct statx *sx, uint64_t *ino)
{
	int fd = open_source(dfd, name, O_RDONLY | O_NOCTTY | O_NOFOLLOW);
	struct uext4_stat st;
	struct job *j;
	int err;

	if (fd < 0)
		return fail_errno(p, "cannot open it for reading");
	if ((err = uext4_create(p->fs, dino, name, sx->stx_mode & 07777, &st))) {
		close(fd);
		return fail_lib(p, err, "creating it");
	}
	*ino = st.ino;
	if (!(j = calloc(1, sizeof(*j))) || !(j->path = strdup(p->path))) {
		free(j);
		close(fd);
		return pop_fail(p, ENOMEM, "populate: out of memory");
	}
	j->fd = fd;
	j->size = sx->stx_size;
	err = alloc_file(p, st.ino, fd, sx->stx_size,
			 sx->stx_blocks * 512 < sx->stx_size, j);
	if (!err)
		err = note_flags(p, fd, st.ino);
	if (!err)
		err = copy_xattrs(p, fd, st.ino);
	if (err || !j->nruns) {
		job_free(j);
	} else if (p->nworkers == 0) {
		copy_job(p, j, p->buf);
		job_free(j);
	} else {
		jobq_push(&p->q, j);
	}
	return err ? err : (atomic_load(&p->stop) ? -ECANCELED : 0);
}

static int copy_directory(struct pop *p, int dfd, const char *name, uint64_t dino,
			  const struct statx *sx, uint64_t *ino)
{
	struct uext4_stat st;
	int sub, err;

	if ((err = uext4_mkdir(p->fs, dino, name, sx->stx_mode & 07777, &st)))
		return fail_lib(p, err, "creating the directory");
	*ino = st.ino;
	if ((sub = open_source(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW)) < 0)
		return fail_errno(p, "cannot open the directory");
	err = copy_tree(p, sub, st.ino);
	if (!err)
		err = note_flags(p, sub, st.ino);
	if (!err)
		err = copy_xattrs(p, sub, st.ino);
	close(sub);
	return err;
}

static int copy_other(struct pop *p, int dfd, const char *name, uint64_t dino,
		      const struct statx *sx, uint64_t *ino)
{
	struct uext4_stat st;
	int err;

	if (S_ISLNK(sx->stx_mode)) {
		char target[PATH_MAX + 1];
		ssize_t n = readlinkat(dfd, name, target, sizeof(target) - 1);

		if (n < 0)
			return fail_errno(p, "reading the symlink");
		target[n] = 0;
		if ((err = uext4_symlink(p->fs, dino, name, target, &st)))
			return fail_lib(p, err, "creating the symlink");
	} else {
		uint64_t rdev = makedev(sx->stx_rdev_major, sx->stx_rdev_minor);

		if ((err = uext4_mknod(p->fs, dino, name, sx->stx_mode & (S_IFMT | 07777), rdev,
				       &st)))
			return fail_lib(p, err, "creating the node");
	}
	*ino = st.ino;
	return copy_xattrs(p, -1, st.ino);
}

/* One entry of the source directory dfd into directory dino. */
static int copy_entry(struct pop *p, int dfd, uint64_t dino, const char *name)
{
	struct statx sx;
	uint64_t ino = 0, dev, link_to = 0;
	size_t saved;
	int err;

	if ((err = path_push(p, name, &saved)))
		return err;
	if (statx(dfd, name, AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT,
		  STATX_BASIC_STATS | STATX_BTIME, &sx)) {
		err = fail_errno(p, "cannot stat it");
		goto out;
	}
	dev = makedev(sx.stx_dev_major, sx.stx_dev_minor);
	if (!S_ISDIR(sx.stx_mode) && sx.stx_nlink > 1)
		link_to = link_find(p, dev, sx.stx_ino);
	if (link_to) {
		if ((err = uext4_link(p->fs, link_to, dino, name, NULL)))
			err = fail_lib(p, err, "linking it");
		atomic_fetch_add_explicit(&p->files_done, 1, memory_order_relaxed);
		goto out;
	}
	if (S_ISDIR(sx.stx_mode))
		err = copy_directory(p, dfd, name, dino, &sx, &ino);
	else if (S_ISREG(sx.stx_mode))
		err = copy_regular(p, dfd, name, dino, &sx, &ino);
	else
		err = copy_other(p, dfd, name, dino, &sx, &ino);
	if (!err)
		err = set_attrs(p, ino, &sx, false);
	if (!err && !S_ISDIR(sx.stx_mode) && sx.stx_nlink > 1)
		err = link_add(p, dev, sx.stx_ino, ino);
	atomic_fetch_add_explicit(&p->files_done, 1, memory_order_relaxed);
out:
	path_pop(p, saved);
	return err;
}

static int cmp_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The names in directory dfd, sorted (the walk order), in one allocation
 * each; *out and every name are freed by the caller. */
static int list_names(struct pop *p, int dfd, char ***out, size_t *nout)
{
	int fd = dup(dfd);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	char **v = NULL;
	size_t n = 0, cap = 0;
	struct dirent *e;

	if (!d) {
		if (fd >= 0)
			close(fd);
		return fail_errno(p, "cannot read the directory");
	}
	errno = 0;
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (n == cap) {
			char **nv = realloc(v, (cap = cap ? 2 * cap : 32) * sizeof(*v));

			if (!nv)
				goto nomem;
			v = nv;
		}
		if (!(v[n] = strdup(e->d_name)))
			goto nomem;
		n++;
	}
	if (errno) {
		int err = fail_errno(p, "reading the directory");

		for (size_t i = 0; i < n; i++)
			free(v[i]);
		free(v);
		closedir(d);
		return err;
	}
	closedir(d);
	qsort(v, n, sizeof(*v), cmp_name);
	*out = v;
	*nout = n;
	return 0;
nomem:
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
	closedir(d);
	return pop_fail(p, ENOMEM, "populate: %s: out of memory listing it", p->path);
}

/* Everything below source directory dfd into image directory dino. */
static int copy_tree(struct pop *p, int dfd, uint64_t dino)
{
	char **names = NULL;
	size_t n = 0;
	int err = list_names(p, dfd, &names, &n);

	if (err)
		return err;
	for (size_t i = 0; i < n; i++) {
		if (!err && atomic_load_explicit(&p->stop, memory_order_relaxed))
			err = -ECANCELED;
		if (!err)
			err = copy_entry(p, dfd, dino, names[i]);
		free(names[i]);
	}
	free(names);
	return err;
}

/* The top: its entries, then its own xattrs, attributes and flags. */
static int copy_top(struct pop *p, int dfd)
{
	struct statx sx;
	int err;

	if (statx(dfd, "", AT_EMPTY_PATH, STATX_BASIC_STATS | STATX_BTIME, &sx))
		return fail_errno(p, "cannot stat it");
	if ((err = copy_tree(p, dfd, p->top)))
		return err;
	if ((err = note_flags(p, dfd, p->top)) || (err = copy_xattrs(p, dfd, p->top)))
		return err;
	return set_attrs(p, p->top, &sx, true);
}

/* ------------------------------------------------------------ threads */

static void *namespace_main(void *arg)
{
	struct pop *p = arg;
	pthread_t *workers = NULL;
	unsigned started = 0;
	int dfd = open_source(AT_FDCWD, p->path, O_RDONLY | O_DIRECTORY);

	/* A thread of its own: its identity (root) and umask (0) are the
	 * library's defaults, whatever the caller set for its threads. */
	if (dfd < 0) {
		fail_errno(p, "cannot open the source directory");
		goto done;
	}
	if (p->nworkers && !(workers = calloc(p->nworkers, sizeof(*workers)))) {
		pop_fail(p, ENOMEM, "populate: out of memory");
		goto done;
	}
	for (; started < p->nworkers; started++)
		if (pthread_create(&workers[started], NULL, data_worker, p)) {
			pop_fail(p, EAGAIN, "populate: cannot start a copy thread");
			break;
		}
	if (!atomic_load(&p->stop))
		copy_top(p, dfd);
	jobq_close(&p->q);
	for (unsigned i = 0; i < started; i++)
		pthread_join(workers[i], NULL);
	if (!atomic_load(&p->stop))
		apply_flags(p);
done:
	if (dfd >= 0)
		close(dfd);
	free(workers);
	pthread_mutex_lock(&p->done_lock);
	p->done = true;
	pthread_cond_broadcast(&p->done_cond);
	pthread_mutex_unlock(&p->done_lock);
	return NULL;
}

static void report(struct pop *p)
{
	struct uext4_populate_progress pr = {
		.files_done = atomic_load_explicit(&p->files_done, memory_order_relaxed),
		.files_total = p->files_total,
		.bytes_done = atomic_load_explicit(&p->bytes_done, memory_order_relaxed),
		.bytes_total = p->bytes_total,
	};

	p->o->progress(p->o->progress_ctx, &pr);
}

/* Wait for the namespace thread, calling the progress callback meanwhile. */
static void wait_done(struct pop *p)
{
	pthread_mutex_lock(&p->done_lock);
	while (!p->done) {
		struct timespec until;

		if (!p->o->progress) {
			pthread_cond_wait(&p->done_cond, &p->done_lock);
			continue;
		}
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_nsec += PROGRESS_NS;
		if (until.tv_nsec >= 1000000000L) {
			until.tv_sec++;
			until.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&p->done_cond, &p->done_lock, &until);
		if (!p->done) {
			pthread_mutex_unlock(&p->done_lock);
			report(p);
			pthread_mutex_lock(&p->done_lock);
		}
	}
	pthread_mutex_unlock(&p->done_lock);
	if (p->o->progress)
		report(p);
}

/* Totals for the progress display: entries and file bytes (nftw is
 * serial; only done when someone shows progress). */
static _Thread_local uint64_t count_files, count_bytes;

static int count_one(const char *path, const struct stat *st, int type, struct FTW *f)
{
	(void)path; (void)f;
	if (f->level > 0)
		count_files++;
	if (type == FTW_F && S_ISREG(st->st_mode))
		count_bytes += (uint64_t)st->st_size;
	return 0;
}

static void count_source(struct pop *p)
{
	count_files = count_bytes = 0;
	if (nftw(p->path, count_one, 64, FTW_PHYS) == 0) {
		p->files_total = count_files;
		p->bytes_total = count_bytes;
	}
}

static unsigned worker_count(const struct uext4_populate_opts *o)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	unsigned t = o->threads ? o->threads : (cpus > 0 ? (unsigned)cpus : 1);

	return t <= 1 ? 0 : MIN(t, 256u);
}

static void pop_free(struct pop *p)
{
	for (size_t i = 0; i < p->nfl; i++)
		free(p->fl[i].path);
	free(p->fl);
	free(p->links);
	free(p->xlist);
	free(p->xval);
	free(p->buf);
	jobq_destroy(&p->q);
	pthread_mutex_destroy(&p->err_lock);
	pthread_mutex_destroy(&p->done_lock);
	pthread_cond_destroy(&p->done_cond);
}

int uext4_populate(uext4_fs *fs, uint64_t dir, const char *source,
		   const struct uext4_populate_opts *o)
{
	static const struct uext4_populate_opts defaults;
	struct uext4_stat st;
	struct pop *p;
	pthread_t ns;
	int err;

	fs_clear_err();
	if (!fs || !source)
		return fs_err(EINVAL, "uext4_populate: no file system or source given");
	if (fs->read_only)
		return fs_err(EROFS, "populate: the file system is mounted read-only");
	if ((err = uext4_getattr(fs, dir, &st)))
		return err;
	if (!S_ISDIR(st.mode))
		return fs_err(ENOTDIR, "populate: inode %llu is not a directory",
			      (unsigned long long)dir);
	if (strlen(source) >= POP_PATH_MAX / 2)
		return fs_err(ENAMETOOLONG, "populate: %s: path too long", source);
	if (!(p = calloc(1, sizeof(*p))))
		return fs_err(ENOMEM, "populate: out of memory");
	p->fs = fs;
	p->o = o ? o : &defaults;
	p->top = dir;
	p->nworkers = worker_count(p->o);
	jobq_init(&p->q);
	pthread_mutex_init(&p->err_lock, NULL);
	pthread_mutex_init(&p->done_lock, NULL);
	pthread_cond_init(&p->done_cond, NULL);
	p->plen = strlen(source);
	while (p->plen > 1 && source[p->plen - 1] == '/')
		p->plen--;
	memcpy(p->path, source, p->plen);
	p->path[p->plen] = 0;
	p->xlist = malloc(XATTR_BUF);
	p->xval = malloc(XATTR_BUF);
	p->buf = p->nworkers ? NULL : malloc(COPY_BUF);
	if (!p->xlist || !p->xval || (!p->nworkers && !p->buf)) {
		pop_free(p);
		free(p);
		return fs_err(ENOMEM, "populate: out of memory");
	}
	if (p->o->progress)
		count_source(p);
	if ((err = pthread_create(&ns, NULL, namespace_main, p))) {
		pop_free(p);
		free(p);
		return fs_err(err, "populate: cannot start a thread: %s", strerror(err));
	}
	wait_done(p);
	pthread_join(ns, NULL);
	err = p->err ? fs_err(p->err, "%s", p->msg) : 0;
	pop_free(p);
	free(p);
	return err;
}
