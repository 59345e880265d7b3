/*
 * populate.c - fill an image from a host directory (uext4_populate).
 *
 * The image's bytes must not depend on thread timing, so the work is split
 * by what it changes:
 *  - scanning (any thread of the pool): a directory of the source is read
 *    into a plan: its entries sorted by name (strcmp), each with its statx,
 *    symlink target, xattrs, chattr flags and data ranges.  Reads only;
 *  - the namespace thread (one) walks the plans depth first, in that order,
 *    and makes every change to the image's metadata: it creates each inode,
 *    allocates all of a regular file's blocks at once (one extent where the
 *    allocator finds the room), sets xattrs, owners, modes and times.  As
 *    the only thread that allocates, inode numbers and block placement
 *    follow the plan and nothing else.  Where the scan of the next
 *    directory has not started, it scans it itself rather than wait;
 *  - copying data (any thread of the pool, and the namespace thread once
 *    its walk is done): file contents go from the source straight into the
 *    blocks already allocated (copy_file_range to the device where the
 *    kernel can; else read into write buffers that gather contiguous
 *    files and go to the image one large write at a time, see the image
 *    writer; zeros after the end of each file), no allocation and no
 *    metadata, so their timing changes when the bytes land, never which.
 * Pool threads prefer scanning (the namespace thread may be waiting for it)
 * to copying.  Inode flags go on last, when every byte is in (immutable and
 * append-only inodes would refuse the links and attribute changes before).
 *
 * With uext4_opts.bulk (no journal logging, no commit timer) and
 * use_fixed_time, the commits too happen at the same points on every run,
 * which makes the whole image reproducible.
 *
 * Memory: the plan of every directory stays until the end (about 300 bytes
 * per entry plus its xattrs); data jobs hold their runs, no descriptors;
 * the image writer has 2 x threads + 1 buffers of WBUF_SIZE (1 MiB).
 */
#include "balloc.h"
#include "blockdev.h"
#include "error.h"
#include "file.h"
#include "icache.h"
#include "inode.h"
#include "internal.h"
#include "lock.h"
#include "trans.h"

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
#define WBUF_SIZE (1u << 20)        /* bytes written to the image at once, at most */
#define COPY_RANGE_MIN (64u << 10)  /* smaller runs: one pread + pwrite is cheaper */
#define BATCH_JOBS 64               /* data jobs handed to the pool at once */
#define BATCH_BYTES (8u << 20)      /* ... or fewer, when they hold this much data */
#define ALLOC_MAX_BLOCKS 32768u     /* blocks asked for at once (one extent's most) */
#define PROGRESS_NS 100000000L      /* progress callback every 100 ms */
#define XATTR_BUF (64u << 10)       /* XATTR_SIZE_MAX and XATTR_LIST_MAX */
#define XATTR_SMALL 1024u           /* what most lists and values fit in */
/* Source inode flags we copy: the ones chattr sets that ext4 keeps. */
#define COPY_FLAGS (FS_SECRM_FL | FS_UNRM_FL | FS_SYNC_FL | FS_IMMUTABLE_FL | FS_APPEND_FL | \
		    FS_NODUMP_FL | FS_NOATIME_FL | FS_DIRSYNC_FL | FS_TOPDIR_FL)
/* Directories also carry project inheritance (+P) and, on a casefold image,
 * casefold (+F: set at mkdir time, while the directory is empty). */
#ifndef FS_CASEFOLD_FL
#define FS_CASEFOLD_FL 0x40000000
#endif
#define COPY_DIR_FLAGS (COPY_FLAGS | FS_PROJINHERIT_FL)

/* ------------------------------------------------------------ the plan */

/* Bytes [off, end) of a source file that hold data (SEEK_DATA/SEEK_HOLE). */
struct range {
	uint64_t off, end;
};

struct sdir;

/* One source entry as the scan saw it.  Written by the scanning thread
 * before its directory is published (sdir.state = SCAN_DONE under the pool
 * lock), then only read. */
struct sent {
	char *name;
	struct statx sx;
	char *target;           /* symlinks: the target */
	uint8_t *xattrs;        /* packed: u32 name length, name, u32 value length, value */
	size_t xlen;
	/* Regular files: COPY_FLAGS of FS_IOC_GETFLAGS, read by the scan when
	 * it opens the file (empty or with holes), else by the copy (which
	 * writes it before the pool's threads are joined; read after). */
	uint32_t flags;
	uint32_t projid;        /* FS_IOC_FSGETXATTR's, with flags (project images) */
	uint64_t ino;           /* the image inode (namespace thread only) */
	/* Regular files with data: the copy (which opens them anyway) reads
	 * their xattrs into xattrs/xlen, the same way as flags, and they are
	 * set after the copy, in plan order, with the flags. */
	bool late_xattrs;
	bool sparse;            /* regular files with holes: the data is ranges[] */
	struct range *ranges;
	size_t nranges;
	struct sdir *sub;       /* directories: their own plan */
	int err;                /* the scan of this entry failed: errno and what */
	const char *errwhat;
};

enum { SCAN_QUEUED, SCAN_BUSY, SCAN_DONE };

/* One source directory's plan.  state is atomic; the rest is written by
 * the thread that moved state from SCAN_QUEUED to SCAN_BUSY and read by
 * others once it is SCAN_DONE. */
struct sdir {
	char *path;             /* absolute (or as given) source path */
	struct sent *ents;
	size_t n;
	char *names;            /* every ents[i].name, one after another */
	uint8_t *xattrs;        /* the directory's own xattrs and flags */
	size_t xlen;
	uint32_t flags;         /* COPY_DIR_FLAGS, and FS_CASEFOLD_FL on a casefold image */
	uint32_t projid;
	int err;                /* the directory could not be read */
	const char *errwhat;
	_Atomic int state;
	struct sdir *next_task; /* the pool's scan stack (pool lock) */
};

/* ------------------------------------------------------------ data jobs */

/* A physically contiguous run of a file's blocks. */
struct run {
	uint64_t lblk, pblk, len;
};

/* One regular file's data to copy into runs already allocated and mapped. */
struct job {
	const struct sdir *dir; /* the source is dir->path/ent->name */
	struct sent *ent;       /* the copy stores ent->flags */
	uint64_t size;          /* bytes to copy (st_size at the scan) */
	size_t nruns, cap;
	struct run *runs;       /* &one, or allocated when there are more */
	/* Most files are one run: in the job, not one more allocation per
	 * file (made by the namespace thread, freed by a copying one). */
	struct run one;
};

struct batch {
	struct batch *next;
	size_t n;
	uint64_t bytes;
	struct job *jobs[BATCH_JOBS];
};

/* File data on its way to the image: [dev, dev + len) of the device,
 * from data[], or with src >= 0 from bytes [src_off, src_off + len) of
 * that descriptor (sent by the kernel; closed once written). */
struct wbuf {
	struct wbuf *next;      /* on the free list or the write queue */
	uint64_t dev;
	size_t len;
	uint8_t *data;          /* WBUF_SIZE bytes */
	int src;
	uint64_t src_off;
	const struct job *job;  /* with src: the file, for messages */
};

/* The image writer (see writer_submit).  lock protects every field but
 * the buffers' contents, which belong to the thread holding the buffer. */
struct writer {
	pthread_mutex_t lock;
	pthread_cond_t freed;       /* a buffer went back to the free list */
	struct wbuf *free;
	struct wbuf *head, *tail;   /* the write queue, oldest first */
	bool writing;               /* a thread is writing the queue (empty when not) */
	struct wbuf *bufs;          /* all nbufs of them, for pop_free */
	uint8_t *mem;
	size_t nbufs;
};

/* The worker pool's queues.  lock protects every field. */
struct pool {
	pthread_mutex_t lock;
	pthread_cond_t work;        /* a scan task or data batch came, or closing */
	pthread_cond_t scanned;     /* a directory's scan finished */
	struct sdir *scan_stack;    /* LIFO: the walk wants the newest first */
	struct batch *data_head, *data_tail;
	bool closed;
};

/* Hard links seen: source (dev, ino) -> image inode (namespace thread). */
struct linkent {
	uint64_t dev, ino, to;
};

/* A thread's scratch space for scanning and copying. */
struct scratch {
	char path[POP_PATH_MAX];
	char *xlist, *xval;
	struct wbuf *cur;       /* the write buffer this thread fills, or NULL */
	/* The source directory of the last copy, open (O_PATH): a batch's
	 * files mostly share one, and openat() from it skips the path walk. */
	const struct sdir *dir;
	int dirfd;
	uint64_t copied;        /* bytes copied, not yet in pop.bytes_done */
	/* list_dir()'s names and their offsets in names, reused: */
	char *names;
	size_t namecap, *noff, noffcap;
};

struct pop {
	uext4_fs *fs;
	const struct uext4_populate_opts *o;
	uint64_t top;
	/* Set before the threads start, then read only: the image has the
	 * project feature (read the sources' project ids) or casefold (and
	 * their +F). */
	bool projids, casefold;
	unsigned nworkers;          /* 0: the namespace thread does everything */
	struct pool pool;
	struct writer writer;
	_Atomic bool no_copy_range; /* copy_file_range failed once: send or copy */
	_Atomic bool no_send;       /* sendfile failed once: read and write */
	/* Namespace thread only: */
	struct linkent *links;
	size_t nlinks, caplinks;
	char path[POP_PATH_MAX];    /* the source path being copied, for messages */
	size_t plen;
	struct batch *batch;        /* jobs not yet handed to the pool */
	struct scratch ns_scratch;
	struct sdir *root;
	/* The first error (err_lock): */
	pthread_mutex_t err_lock;
	int err;                    /* positive errno */
	char msg[POP_PATH_MAX + 1024];
	_Atomic bool stop;          /* an error: everyone stops at the next step */
	/* Progress, counted lock-free and read by the reporting thread;
	 * files_done by the namespace thread, bytes_done by the copying
	 * threads once per batch, each on a cache line of its own (one shared
	 * line, bouncing between the threads, was 0.5% of the CPU): */
	char pad_files[CACHELINE];
	_Atomic uint64_t files_done;
	char pad_bytes[CACHELINE];
	_Atomic uint64_t bytes_done;
	char pad_end[CACHELINE];
	uint64_t files_total, bytes_total;   /* the reporting thread only */
	/* The namespace thread finished (done_lock): */
	pthread_mutex_t done_lock;
	pthread_cond_t done_cond;
	bool done;
};

/* ------------------------------------------------------------ errors */

/* uext4_last_error() holds under 512 bytes: a message with a long path
 * keeps its start and its end (the file's name and what went wrong). */
static void elide_middle(char *msg)
{
	size_t len = strlen(msg), head = 100, tail = 380;

	if (len <= head + tail)
		return;
	memcpy(msg + head, "...", 3);
	memmove(msg + head + 3, msg + len - tail, tail + 1);
}

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
		elide_middle(p->msg);
	}
	pthread_mutex_unlock(&p->err_lock);
	atomic_store(&p->stop, true);
	return -(err ? err : EIO);
}

static bool stopped(struct pop *p)
{
	return atomic_load_explicit(&p->stop, memory_order_relaxed);
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

/* ------------------------------------------------------------ paths (namespace thread) */

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

/* dir/name into buf; false if it does not fit. */
static bool join_path(char *buf, size_t size, const char *dir, const char *name)
{
	size_t dl = strlen(dir), nl = strlen(name);

	if (dl + 1 + nl >= size)
		return false;
	memcpy(buf, dir, dl);   /* not snprintf: once per entry, it showed in profiles */
	buf[dl] = '/';
	memcpy(buf + dl + 1, name, nl + 1);
	return true;
}

/* ------------------------------------------------------------ scanning (any thread) */

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

static int scratch_init(struct scratch *s)
{
	s->xlist = malloc(XATTR_BUF);
	s->xval = malloc(XATTR_BUF);
	s->cur = NULL;
	s->dir = NULL;
	s->dirfd = -1;
	s->copied = 0;
	s->names = NULL;
	s->noff = NULL;
	s->namecap = s->noffcap = 0;
	return s->xlist && s->xval ? 0 : -ENOMEM;
}

static void scratch_free(struct scratch *s)
{
	if (s->dirfd >= 0)
		close(s->dirfd);
	free(s->xlist);
	free(s->xval);
	free(s->names);
	free(s->noff);
}

/*
 * The kernel allocates (and for values zeroes) a buffer of the size the
 * caller offers on every [fl]listxattr and [fl]getxattr; with 64 KiB that
 * was a third of the cost of listing a file's (mostly no) xattrs.  So ask
 * with XATTR_SMALL first and with all of buf only when that is too small.
 */
static ssize_t list_xattrs(int fd, const char *path, char *buf)
{
	ssize_t len = fd >= 0 ? flistxattr(fd, buf, XATTR_SMALL) : llistxattr(path, buf, XATTR_SMALL);

	if (len < 0 && errno == ERANGE)
		len = fd >= 0 ? flistxattr(fd, buf, XATTR_BUF) : llistxattr(path, buf, XATTR_BUF);
	return len;
}

static ssize_t get_xattr(int fd, const char *path, const char *name, char *buf)
{
	ssize_t got = fd >= 0 ? fgetxattr(fd, name, buf, XATTR_SMALL)
			      : lgetxattr(path, name, buf, XATTR_SMALL);

	if (got < 0 && errno == ERANGE)
		got = fd >= 0 ? fgetxattr(fd, name, buf, XATTR_BUF)
			      : lgetxattr(path, name, buf, XATTR_BUF);
	return got;
}

/* The xattrs of a source file (fd, or path when fd < 0) packed into *out.
 * 0 or -errno (errno's meaning in *what). */
static int read_xattrs(struct pop *p, struct scratch *s, int fd, const char *path,
		       uint8_t **out, size_t *outlen, const char **what)
{
	ssize_t len;
	uint8_t *v = NULL;
	size_t n = 0;

	*out = NULL;
	*outlen = 0;
	if (p->o->no_copy_xattrs)
		return 0;
	len = list_xattrs(fd, path, s->xlist);
	if (len < 0) {
		if (errno == ENOTSUP || errno == ENOSYS)
			return 0;   /* the source file system has none */
		*what = "listing its xattrs";
		return -errno;
	}
	for (ssize_t i = 0; i < len; i += (ssize_t)strlen(s->xlist + i) + 1) {
		const char *name = s->xlist + i;
		uint32_t nl = (uint32_t)strlen(name), vl;
		ssize_t got = get_xattr(fd, path, name, s->xval);
		uint8_t *nv;

		if (got < 0 && errno == ENODATA)
			continue;   /* removed meanwhile */
		if (got < 0) {
			free(v);
			*what = "reading its xattrs";
			return -errno;
		}
		vl = (uint32_t)got;
		if (!(nv = realloc(v, n + 8 + nl + vl))) {
			free(v);
			*what = "out of memory for its xattrs";
			return -ENOMEM;
		}
		v = nv;
		memcpy(v + n, &nl, 4);
		memcpy(v + n + 4, name, nl);
		memcpy(v + n + 4 + nl, &vl, 4);
		memcpy(v + n + 8 + nl, s->xval, vl);
		n += 8 + nl + vl;
	}
	*out = v;
	*outlen = n;
	return 0;
}

/* The data ranges of a file with holes. */
static int read_ranges(int fd, uint64_t size, struct sent *e)
{
	uint64_t off = 0;
	size_t cap = 0;

	while (off < size) {
		off_t d = lseek(fd, (off_t)off, SEEK_DATA), h;

		if (d < 0)
			return errno == ENXIO ? 0 : -errno;
		if ((h = lseek(fd, d, SEEK_HOLE)) < 0 || (uint64_t)h > size)
			h = (off_t)size;
		if (e->nranges == cap) {
			struct range *v = realloc(e->ranges, (cap = cap ? 2 * cap : 4) * sizeof(*v));

			if (!v)
				return -ENOMEM;
			e->ranges = v;
		}
		e->ranges[e->nranges++] = (struct range){(uint64_t)d, (uint64_t)h};
		if ((uint64_t)h <= off)
			break;
		off = (uint64_t)h;
	}
	return 0;
}

static void entry_error(struct sent *e, int err, const char *what)
{
	e->err = err < 0 ? -err : err;
	e->errwhat = what;
}

/*
 * The inode flags of an open source (mask: those we copy) and, on an image
 * with the project feature, its project id: one FS_IOC_GETFLAGS, and one
 * FS_IOC_FSGETXATTR only for such an image.  A source file system without
 * them gives 0.
 */
static void read_inode_attrs(const struct pop *p, int fd, uint32_t mask, uint32_t *flags,
			     uint32_t *projid)
{
	struct fsxattr fx;
	int fl = 0;

	if (ioctl(fd, FS_IOC_GETFLAGS, &fl) == 0)
		*flags = (uint32_t)fl & mask;
	if (p->projids && ioctl(fd, FS_IOC_FSGETXATTR, &fx) == 0)
		*projid = fx.fsx_projid;
}

/*
 * A regular file: xattrs, and if it has holes its data ranges.  Files with
 * data are opened once, by the copy, which reads their flags and xattrs
 * then; the scan opens only those it must (holes: SEEK_DATA) or that have
 * no copy (empty).
 */
static void scan_regular(struct pop *p, struct scratch *s, int dfd, struct sent *e)
{
	bool sparse = e->sx.stx_blocks * 512 < e->sx.stx_size;
	int fd, err;
	const char *what = NULL;

	if (!sparse && e->sx.stx_size > 0) {
		e->late_xattrs = true;
		return;
	}
	fd = open_source(dfd, e->name, O_RDONLY | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK);
	if (fd < 0) {
		entry_error(e, errno, "cannot open it for reading");
		return;
	}
	read_inode_attrs(p, fd, COPY_FLAGS, &e->flags, &e->projid);
	if ((err = read_xattrs(p, s, fd, NULL, &e->xattrs, &e->xlen, &what)))
		entry_error(e, err, what);
	else if ((e->sparse = sparse) && (err = read_ranges(fd, e->sx.stx_size, e)))
		entry_error(e, err, "finding its data (SEEK_DATA)");
	close(fd);
}

static struct sdir *sdir_new(const char *path)
{
	struct sdir *d = calloc(1, sizeof(*d));

	if (d && !(d->path = strdup(path))) {
		free(d);
		d = NULL;
	}
	return d;
}

/*
 * Reading a symlink sets its atime on the host (relatime: when the atime
 * is not after the mtime, or a day old), which O_NOATIME cannot stop for
 * readlink().  So the atime copied is the one the read left: the next
 * copy of the tree reads the same (the populate_repro test's first run
 * differed from the later ones in one symlink's atime).
 */
static void symlink_atime_after_read(int dfd, struct sent *e)
{
	struct statx sx;

	if (statx(dfd, e->name, AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT, STATX_ATIME, &sx) == 0 &&
	    (sx.stx_mask & STATX_ATIME))
		e->sx.stx_atime = sx.stx_atime;
}

/* One entry: its statx and what its type needs. */
static void scan_entry(struct pop *p, struct scratch *s, struct sdir *d, int dfd, struct sent *e)
{
	if (statx(dfd, e->name, AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT,
		  STATX_BASIC_STATS | STATX_BTIME, &e->sx)) {
		entry_error(e, errno, "cannot stat it");
		return;
	}
	if (!join_path(s->path, sizeof(s->path), d->path, e->name)) {
		entry_error(e, ENAMETOOLONG, "path too long");
		return;
	}
	if (S_ISREG(e->sx.stx_mode)) {
		scan_regular(p, s, dfd, e);
	} else if (S_ISDIR(e->sx.stx_mode)) {
		if (!(e->sub = sdir_new(s->path)))
			entry_error(e, ENOMEM, "out of memory");
	} else {
		const char *what = NULL;
		int err;

		if (S_ISLNK(e->sx.stx_mode)) {
			ssize_t n = readlinkat(dfd, e->name, s->xval, XATTR_BUF - 1);

			if (n < 0) {
				entry_error(e, errno, "reading the symlink");
				return;
			}
			s->xval[n] = 0;
			if (!(e->target = strdup(s->xval))) {
				entry_error(e, ENOMEM, "out of memory");
				return;
			}
			symlink_atime_after_read(dfd, e);
		}
		if ((err = read_xattrs(p, s, -1, s->path, &e->xattrs, &e->xlen, &what)))
			entry_error(e, err, what);
	}
}

static int cmp_sent(const void *a, const void *b)
{
	return strcmp(((const struct sent *)a)->name, ((const struct sent *)b)->name);
}

/* Name bytes and their offsets, gathered in s's buffers (kept from one
 * directory to the next); false when out of memory. */
static bool gather_name(struct scratch *s, size_t *n, size_t *bytes, const char *name)
{
	size_t len = strlen(name) + 1;

	if (*n == s->noffcap) {
		size_t cap = s->noffcap ? 2 * s->noffcap : 256;
		size_t *v = realloc(s->noff, cap * sizeof(*v));

		if (!v)
			return false;
		s->noff = v;
		s->noffcap = cap;
	}
	if (*bytes + len > s->namecap) {
		size_t cap = MAX(*bytes + len, s->namecap ? 2 * s->namecap : (size_t)4096);
		char *v = realloc(s->names, cap);

		if (!v)
			return false;
		s->names = v;
		s->namecap = cap;
	}
	memcpy(s->names + *bytes, name, len);
	s->noff[(*n)++] = *bytes;
	*bytes += len;
	return true;
}

/*
 * The names of directory dfd into d->ents, sorted (the walk order), read
 * with getdents64 into buf (size bytes) straight from dfd: opendir's dup,
 * fstat, fcntl and close were four more syscalls per directory.  The
 * names go into one block (d->names) and the entries into one array of
 * the right size: a strdup per name and the array's regrowth were 3% of
 * the CPU (and most of the page faults) of a populate of /usr/share.
 */
static int list_dir(struct sdir *d, struct scratch *s, int dfd, char *buf, size_t size)
{
	size_t n = 0, bytes = 0;
	ssize_t len;

	while ((len = getdents64(dfd, buf, size)) > 0) {
		for (ssize_t off = 0; off < len;) {
			const struct dirent64 *de = (const struct dirent64 *)(buf + off);

			off += de->d_reclen;
			if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
				continue;
			if (!gather_name(s, &n, &bytes, de->d_name))
				return -ENOMEM;
		}
	}
	if (len < 0)
		return -errno;
	if (!n)
		return 0;
	if (!(d->names = malloc(bytes)) || !(d->ents = calloc(n, sizeof(*d->ents))))
		return -ENOMEM;
	memcpy(d->names, s->names, bytes);
	for (size_t i = 0; i < n; i++)
		d->ents[i].name = d->names + s->noff[i];
	d->n = n;
	if (d->n > 1)
		qsort(d->ents, d->n, sizeof(*d->ents), cmp_sent);
	return 0;
}

static void pool_push_scans(struct pop *p, struct sdir *d);

/* Scan directory d (the caller moved it to SCAN_BUSY), publish the plan
 * and queue its subdirectories. */
static void scan_dir(struct pop *p, struct scratch *s, struct sdir *d)
{
	int dfd = open_source(AT_FDCWD, d->path, O_RDONLY | O_DIRECTORY);
	int err;
	const char *what = NULL;

	if (dfd < 0) {
		d->err = errno;
		d->errwhat = "cannot open the directory";
	} else if ((err = list_dir(d, s, dfd, s->xval, XATTR_BUF))) {
		d->err = -err;
		d->errwhat = "cannot read the directory";
	} else {
		read_inode_attrs(p, dfd, COPY_DIR_FLAGS | (p->casefold ? FS_CASEFOLD_FL : 0),
				 &d->flags, &d->projid);
		if ((err = read_xattrs(p, s, dfd, NULL, &d->xattrs, &d->xlen, &what))) {
			d->err = -err;
			d->errwhat = what;
		}
		for (size_t i = 0; i < d->n && !d->err && !stopped(p); i++)
			scan_entry(p, s, d, dfd, &d->ents[i]);
	}
	if (dfd >= 0)
		close(dfd);
	pthread_mutex_lock(&p->pool.lock);
	atomic_store(&d->state, SCAN_DONE);
	pthread_cond_broadcast(&p->pool.scanned);
	pthread_mutex_unlock(&p->pool.lock);
	pool_push_scans(p, d);
}

/* Claim d's scan if nobody has started it. */
static bool claim_scan(struct sdir *d)
{
	int expect = SCAN_QUEUED;

	return atomic_compare_exchange_strong(&d->state, &expect, SCAN_BUSY);
}

/* The namespace thread needs d: scan it now, or wait for who is. */
static void wait_scanned(struct pop *p, struct sdir *d)
{
	if (claim_scan(d)) {
		scan_dir(p, &p->ns_scratch, d);
		return;
	}
	pthread_mutex_lock(&p->pool.lock);
	while (atomic_load(&d->state) != SCAN_DONE)
		pthread_cond_wait(&p->pool.scanned, &p->pool.lock);
	pthread_mutex_unlock(&p->pool.lock);
}

static void sdir_free(struct sdir *d)
{
	if (!d)
		return;
	for (size_t i = 0; i < d->n; i++) {
		struct sent *e = &d->ents[i];

		free(e->target);
		free(e->xattrs);
		free(e->ranges);
		sdir_free(e->sub);
	}
	free(d->ents);
	free(d->names);
	free(d->xattrs);
	free(d->path);
	free(d);
}

/* ------------------------------------------------------------ the pool */

static void pool_init(struct pool *q)
{
	memset(q, 0, sizeof(*q));
	pthread_mutex_init(&q->lock, NULL);
	pthread_cond_init(&q->work, NULL);
	pthread_cond_init(&q->scanned, NULL);
}

static void job_free(struct job *j);

static void pool_destroy(struct pool *q)
{
	struct batch *b;

	while ((b = q->data_head)) {
		q->data_head = b->next;
		for (size_t i = 0; i < b->n; i++) {
			job_free(b->jobs[i]);
		}
		free(b);
	}
	pthread_mutex_destroy(&q->lock);
	pthread_cond_destroy(&q->work);
	pthread_cond_destroy(&q->scanned);
}

/* d's subdirectories onto the scan stack, the first on top. */
static void pool_push_scans(struct pop *p, struct sdir *d)
{
	bool any = false;

	if (!p->nworkers)
		return;     /* the namespace thread scans each when it gets there */
	pthread_mutex_lock(&p->pool.lock);
	for (size_t i = d->n; i-- > 0;) {
		struct sdir *sub = d->ents[i].sub;

		if (sub && atomic_load(&sub->state) == SCAN_QUEUED) {
			sub->next_task = p->pool.scan_stack;
			p->pool.scan_stack = sub;
			any = true;
		}
	}
	if (any)
		pthread_cond_broadcast(&p->pool.work);
	pthread_mutex_unlock(&p->pool.lock);
}

static void pool_push_batch(struct pop *p, struct batch *b)
{
	pthread_mutex_lock(&p->pool.lock);
	if (p->pool.data_tail)
		p->pool.data_tail->next = b;
	else
		p->pool.data_head = b;
	p->pool.data_tail = b;
	pthread_cond_signal(&p->pool.work);
	pthread_mutex_unlock(&p->pool.lock);
}

static void copy_batch(struct pop *p, struct scratch *s, const struct batch *b);
static void copy_job(struct pop *p, struct scratch *s, const struct job *j);
static void wbuf_flush(struct pop *p, struct scratch *s);

static void job_free(struct job *j)
{
	if (j->runs != &j->one)
		free(j->runs);
	free(j);
}

/*
 * Take work until the pool closes (workers), or until there is none left
 * (drain: the namespace thread after its walk).  Scans first.
 */
static void pool_work(struct pop *p, struct scratch *s, bool drain)
{
	pthread_mutex_lock(&p->pool.lock);
	for (;;) {
		struct sdir *d = p->pool.scan_stack;
		struct batch *b = p->pool.data_head;

		if (d) {
			p->pool.scan_stack = d->next_task;
			pthread_mutex_unlock(&p->pool.lock);
			if (claim_scan(d))
				scan_dir(p, s, d);
			pthread_mutex_lock(&p->pool.lock);
		} else if (b) {
			if (!(p->pool.data_head = b->next))
				p->pool.data_tail = NULL;
			pthread_mutex_unlock(&p->pool.lock);
			copy_batch(p, s, b);
			for (size_t i = 0; i < b->n; i++)
				job_free(b->jobs[i]);
			free(b);
			pthread_mutex_lock(&p->pool.lock);
		} else if (p->pool.closed || drain) {
			break;
		} else {
			pthread_cond_wait(&p->pool.work, &p->pool.lock);
		}
	}
	pthread_mutex_unlock(&p->pool.lock);
}

static void pool_close(struct pop *p)
{
	pthread_mutex_lock(&p->pool.lock);
	p->pool.closed = true;
	pthread_cond_broadcast(&p->pool.work);
	pthread_mutex_unlock(&p->pool.lock);
}

static void *pool_worker(void *arg)
{
	struct pop *p = arg;
	struct scratch *s = calloc(1, sizeof(*s));

	if (!s || scratch_init(s)) {
		pop_fail(p, ENOMEM, "populate: out of memory for a worker");
		if (s)
			scratch_free(s);
		free(s);
		return NULL;
	}
	pool_work(p, s, false);
	wbuf_flush(p, s);
	scratch_free(s);
	free(s);
	return NULL;
}

/* ------------------------------------------------------------ copying data (any thread) */

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
 * The image writer.  File data reaches the image in large contiguous
 * writes, one at a time: copying threads read into write buffers, where
 * the files of a batch, which lie one after another in the image (the
 * namespace thread allocated them in that order), gather.  A full buffer
 * joins the write queue, and a thread that finds nobody writing writes the
 * queue until it is empty while the others go on reading into free
 * buffers.  Two threads pwriting one tmpfs file at once serialise on its
 * inode lock in the kernel, the waiter spinning: 10% of all CPU samples.
 */
/* Bytes [from, b->len) of b's source, read into its buffer and written
 * (sendfile cannot: that source's file system has no splice read). */
static int send_by_copy(struct pop *p, struct wbuf *b, uint64_t from)
{
	while (from < b->len) {
		size_t n = (size_t)MIN(b->len - from, (uint64_t)WBUF_SIZE);
		int err = read_full(b->src, b->data, n, b->src_off + from);

		if (err)
			return pop_fail(p, -err, "populate: %s/%s: read at offset %llu: %s",
					b->job->dir->path, b->job->ent->name,
					(unsigned long long)(b->src_off + from), strerror(-err));
		if ((err = bdev_write(p->fs->dev, b->data, n, b->dev + from)) < 0)
			return pop_fail(p, -err, "populate: writing file data at byte %llu of the "
					"image: %s", (unsigned long long)(b->dev + from),
					uext4_last_error());
		from += n;
	}
	return 0;
}

/* A queued send: the kernel copies the source's bytes to the image;
 * where it stops early (the source shrank: zeros follow, as read_full
 * gives) or cannot, the rest is read and written. */
static void send_data(struct pop *p, struct wbuf *b)
{
	uint64_t done = 0;
	int got = 0;

	if (!atomic_load_explicit(&p->no_send, memory_order_relaxed)) {
		while (done < b->len) {
			got = bdev_send_from_fd(p->fs->dev, b->src, b->src_off + done,
						(size_t)MIN(b->len - done, (uint64_t)1 << 30),
						b->dev + done);
			if (got <= 0)
				break;
			done += (uint64_t)got;
		}
		if (got < 0 && got != -EIO)
			atomic_store_explicit(&p->no_send, true, memory_order_relaxed);
	}
	send_by_copy(p, b, done);
}

static void wbuf_write(struct pop *p, struct wbuf *b)
{
	int err = 0;

	if (b->src >= 0) {
		if (!stopped(p))
			send_data(p, b);
		close(b->src);
		b->src = -1;
	} else if (b->len && !stopped(p)) {
		err = bdev_write(p->fs->dev, b->data, b->len, b->dev);
	}
	if (err < 0)
		pop_fail(p, -err, "populate: writing file data at byte %llu of the image: %s",
			 (unsigned long long)b->dev, uext4_last_error());
	b->len = 0;
}

/* b onto the write queue; and if nobody is writing, write the queue. */
static void writer_submit(struct pop *p, struct wbuf *b)
{
	struct writer *w = &p->writer;

	pthread_mutex_lock(&w->lock);
	b->next = NULL;
	if (w->tail)
		w->tail->next = b;
	else
		w->head = b;
	w->tail = b;
	if (!w->writing) {
		w->writing = true;
		while ((b = w->head)) {
			if (!(w->head = b->next))
				w->tail = NULL;
			pthread_mutex_unlock(&w->lock);
			wbuf_write(p, b);
			pthread_mutex_lock(&w->lock);
			b->next = w->free;
			w->free = b;
			pthread_cond_signal(&w->freed);
		}
		w->writing = false;
	}
	pthread_mutex_unlock(&w->lock);
}

/* A free buffer.  One comes: a thread holds at most one buffer outside
 * the queue and there are more buffers than threads, so when none is free
 * some are queued, and a queue is only ever left with a writer on it. */
static struct wbuf *writer_get(struct pop *p)
{
	struct writer *w = &p->writer;
	struct wbuf *b;

	pthread_mutex_lock(&w->lock);
	while (!(b = w->free))
		pthread_cond_wait(&w->freed, &w->lock);
	w->free = b->next;
	pthread_mutex_unlock(&w->lock);
	b->len = 0;
	return b;
}

/* s's buffer, continuing at device offset dev with room left; the one it
 * had is queued when it does not continue there or is full. */
static struct wbuf *wbuf_at(struct pop *p, struct scratch *s, uint64_t dev)
{
	struct wbuf *b = s->cur;

	if (b && b->len && (b->dev + b->len != dev || b->len == WBUF_SIZE)) {
		writer_submit(p, b);
		b = NULL;
	}
	if (!b)
		b = s->cur = writer_get(p);
	if (!b->len)
		b->dev = dev;
	return b;
}

/* Bytes [off, off + n) of fd (whole blocks) to the image at dev, sent
 * by the writer from a duplicate of fd; false where that is not to be
 * had (the caller copies them itself). */
static bool queue_send(struct pop *p, const struct job *j, int fd, uint64_t off, uint64_t n,
		       uint64_t dev)
{
	struct wbuf *b;
	int src;

	if (atomic_load_explicit(&p->no_send, memory_order_relaxed) ||
	    (src = fcntl(fd, F_DUPFD_CLOEXEC, 0)) < 0)
		return false;
	b = writer_get(p);
	b->src = src;
	b->src_off = off;
	b->len = (size_t)n;
	b->dev = dev;
	b->job = j;
	writer_submit(p, b);
	return true;
}

/* What s gathered, to the image (the thread is done copying). */
static void wbuf_flush(struct pop *p, struct scratch *s)
{
	if (s->cur)
		writer_submit(p, s->cur);
	s->cur = NULL;
}

/* Source bytes [off, off + n) of fd, then zeros up to padded bytes (whole
 * blocks), into the image at dev, through s's write buffers. */
static int put_data(struct pop *p, struct scratch *s, int fd, uint64_t off, uint64_t n,
		    uint64_t padded, uint64_t dev)
{
	for (uint64_t done = 0; done < padded && !stopped(p);) {
		struct wbuf *b = wbuf_at(p, s, dev + done);
		size_t chunk = (size_t)MIN(padded - done, (uint64_t)(WBUF_SIZE - b->len));
		size_t rd = done < n ? (size_t)MIN(n - done, (uint64_t)chunk) : 0;
		int err = rd ? read_full(fd, b->data + b->len, rd, off + done) : 0;

		if (err)
			return pop_fail(p, -err, "populate: %s: read at offset %llu: %s", s->path,
					(unsigned long long)(off + done), strerror(-err));
		memset(b->data + b->len + rd, 0, chunk - rd);
		b->len += chunk;
		done += chunk;
	}
	return 0;
}

/* copy_file_range from the source to the image: tried until it fails
 * (another file system: EXDEV), then never again. */
static bool try_copy_range(struct pop *p)
{
	return !atomic_load_explicit(&p->no_copy_range, memory_order_relaxed);
}

/*
 * Copy one run: source bytes of blocks [lblk, lblk + len) (up to the
 * file's size) to the device at pblk, whole blocks, zeros after the end.
 * Long runs of full blocks go through copy_file_range where the kernel
 * does it; the rest is read into the write buffers.
 */
static int copy_run(struct pop *p, struct scratch *s, int fd, const struct job *j,
		    const struct run *r)
{
	uext4_fs *fs = p->fs;
	unsigned shift = fs->log_block_size;
	uint64_t bmask = fs->block_size - 1;
	uint64_t off = r->lblk << shift, dev = r->pblk << shift;
	uint64_t end = MIN((r->lblk + r->len) << shift, j->size);
	uint64_t whole = (end - off) & ~bmask, copied = end - off;

	if (whole >= COPY_RANGE_MIN && !try_copy_range(p) && queue_send(p, j, fd, off, whole, dev)) {
		off += whole;
		dev += whole;
		whole = 0;
	}
	while (whole >= COPY_RANGE_MIN && try_copy_range(p) && !stopped(p)) {
		size_t n = (size_t)MIN(whole, (uint64_t)1 << 30);
		int got = bdev_copy_from_fd(fs->dev, fd, off, n, dev);

		if (got <= 0) {
			/* Not a file device, or another file system: read and write. */
			atomic_store_explicit(&p->no_copy_range, true, memory_order_relaxed);
			break;
		}
		off += (uint64_t)got;
		dev += (uint64_t)got;
		whole -= (uint64_t)got;
		if ((size_t)got < n)
			break;  /* the source is shorter now: zeros for the rest */
	}
	if (off < end && put_data(p, s, fd, off, end - off, ((end - off) + bmask) & ~bmask, dev))
		return -1;
	s->copied += copied;
	return 0;
}

/* Open a job's source (s->path names it) and note its flags and id; -1 after
 * recording the error. */
static int open_job_source(struct pop *p, struct scratch *s, const struct job *j)
{
	int fd;

	if (!join_path(s->path, sizeof(s->path), j->dir->path, j->ent->name)) {
		pop_fail(p, ENAMETOOLONG, "populate: %s/%s: path too long", j->dir->path,
			 j->ent->name);
		return -1;
	}
	if (s->dir != j->dir) {
		if (s->dirfd >= 0)
			close(s->dirfd);
		s->dir = j->dir;
		s->dirfd = open(j->dir->path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	}
	fd = open_source(s->dirfd >= 0 ? s->dirfd : AT_FDCWD, s->dirfd >= 0 ? j->ent->name : s->path,
			 O_RDONLY | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK);
	if (fd < 0) {
		pop_fail(p, errno, "populate: %s: cannot open it for reading: %s", s->path,
			 strerror(errno));
		return -1;
	}
	read_inode_attrs(p, fd, COPY_FLAGS, &j->ent->flags, &j->ent->projid);
	if (j->ent->late_xattrs) {
		const char *what = NULL;
		int err = read_xattrs(p, s, fd, NULL, &j->ent->xattrs, &j->ent->xlen, &what);

		if (err) {
			close(fd);
			pop_fail(p, -err, "populate: %s: %s: %s", s->path, what, strerror(-err));
			return -1;
		}
	}
	return fd;
}

static void copy_job(struct pop *p, struct scratch *s, const struct job *j)
{
	int fd = open_job_source(p, s, j);

	if (fd < 0)
		return;
	for (size_t i = 0; i < j->nruns && !stopped(p); i++)
		if (copy_run(p, s, fd, j, &j->runs[i]))
			break;
	close(fd);
}

/* The bytes s copied since the last call, to the progress count. */
static void count_copied(struct pop *p, struct scratch *s)
{
	atomic_fetch_add_explicit(&p->bytes_done, s->copied, memory_order_relaxed);
	s->copied = 0;
}

static void copy_batch(struct pop *p, struct scratch *s, const struct batch *b)
{
	for (size_t i = 0; i < b->n && !stopped(p); i++)
		copy_job(p, s, b->jobs[i]);
	count_copied(p, s);
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
	if ((err = handle_begin(fs, &h)) == 0) {
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

/* The packed xattrs of the plan onto ino. */
static int set_xattrs(struct pop *p, uint64_t ino, const uint8_t *x, size_t len)
{
	size_t i = 0;

	while (i + 8 <= len) {
		uint32_t nl, vl;
		char name[XATTR_NAME_MAX + 1];
		int err;

		memcpy(&nl, x + i, 4);
		memcpy(&vl, x + i + 4 + nl, 4);
		memcpy(name, x + i + 4, MIN(nl, (uint32_t)XATTR_NAME_MAX));
		name[MIN(nl, (uint32_t)XATTR_NAME_MAX)] = 0;
		if ((err = uext4_setxattr(p->fs, ino, name, x + i + 8 + nl, vl, 0))) {
			char what[XATTR_NAME_MAX + 32];

			snprintf(what, sizeof(what), "setting xattr %s", name);
			return fail_lib(p, err, what);
		}
		i += 8 + nl + vl;
	}
	return 0;
}

/* The copied flags (those of mask; casefold was set at mkdir) and, on a
 * project image, the project id, in one change: before an immutable flag,
 * which would refuse a later id. */
static int set_flags(struct pop *p, const char *dir, const char *name, uint64_t ino,
		     uint32_t flags, uint32_t mask, uint32_t projid)
{
	struct uext4_fileattr fa;
	int err;

	if (!flags && !projid)
		return 0;
	err = uext4_get_fileattr(p->fs, ino, &fa);
	if (!err && fa.projid != projid && p->projids) {
		fa.flags = (fa.flags & ~mask) | flags;
		fa.projid = projid;
		err = uext4_set_fileattr(p->fs, ino, &fa);
	} else if (!err && (fa.flags & mask) != flags) {
		err = uext4_set_flags(p->fs, ino, (fa.flags & ~mask) | flags);
	}
	if (err)
		return pop_fail(p, -err, "populate: %s%s%s: setting its inode flags: %s", dir,
				name ? "/" : "", name ? name : "", uext4_last_error());
	return 0;
}

/* Once all data is in, in plan order: the xattrs the copies read, and
 * every inode's flags. */
static int finish_plan(struct pop *p, const struct sdir *d, uint64_t ino)
{
	int err = 0;

	for (size_t i = 0; i < d->n && !err; i++) {
		const struct sent *e = &d->ents[i];

		if (e->sub) {
			err = finish_plan(p, e->sub, e->ino);
		} else if (S_ISREG(e->sx.stx_mode) && e->ino) {
			if (e->late_xattrs && e->xlen) {
				snprintf(p->path, sizeof(p->path), "%s/%s", d->path, e->name);
				err = set_xattrs(p, e->ino, e->xattrs, e->xlen);
			}
			if (!err)
				err = set_flags(p, d->path, e->name, e->ino, e->flags, COPY_FLAGS,
						e->projid);
		} else if (e->ino && !S_ISDIR(e->sx.stx_mode) && (d->flags & FS_PROJINHERIT_FL)) {
			/* Symlinks and nodes cannot be opened for their id:
			 * the one the kernel gave them at creation. */
			err = set_flags(p, d->path, e->name, e->ino, 0, 0, d->projid);
		}
	}
	return err ? err : set_flags(p, d->path, NULL, ino, d->flags & COPY_DIR_FLAGS,
				     COPY_DIR_FLAGS, d->projid);
}

static size_t link_slot(const struct pop *p, uint64_t dev, uint64_t ino)
{
	return (size_t)((ino * 0x9E3779B97F4A7C15ull) ^ dev) & (p->caplinks - 1);
}

/* Hard links: the image inode of source (dev, ino), or 0. */
static uint64_t link_find(struct pop *p, uint64_t dev, uint64_t ino)
{
	if (!p->caplinks)
		return 0;
	for (size_t i = link_slot(p, dev, ino);; i = (i + 1) & (p->caplinks - 1)) {
		if (!p->links[i].to)
			return 0;
		if (p->links[i].dev == dev && p->links[i].ino == ino)
			return p->links[i].to;
	}
}

static void link_put(struct pop *p, uint64_t dev, uint64_t ino, uint64_t to)
{
	size_t i = link_slot(p, dev, ino);

	while (p->links[i].to)
		i = (i + 1) & (p->caplinks - 1);
	p->links[i] = (struct linkent){.dev = dev, .ino = ino, .to = to};
	p->nlinks++;
}

static int link_add(struct pop *p, uint64_t dev, uint64_t ino, uint64_t to)
{
	if (2 * (p->nlinks + 1) > p->caplinks) {
		size_t oldcap = p->caplinks, cap = oldcap ? 2 * oldcap : 1024;
		struct linkent *old = p->links;

		if (!(p->links = calloc(cap, sizeof(*p->links)))) {
			p->links = old;
			return pop_fail(p, ENOMEM, "populate: out of memory for hard links");
		}
		p->caplinks = cap;
		p->nlinks = 0;
		for (size_t i = 0; i < oldcap; i++)
			if (old[i].to)
				link_put(p, old[i].dev, old[i].ino, old[i].to);
		free(old);
	}
	link_put(p, dev, ino, to);
	return 0;
}

static int job_add_run(struct pop *p, struct job *j, uint64_t lblk, uint64_t pblk, uint64_t len)
{
	struct run *last = j->nruns ? &j->runs[j->nruns - 1] : NULL;

	if (last && last->lblk + last->len == lblk && last->pblk + last->len == pblk) {
		last->len += len;
		return 0;
	}
	if (!j->nruns) {
		j->runs = &j->one;
		j->cap = 1;
	} else if (j->nruns == j->cap) {
		size_t cap = 2 * j->cap;
		struct run *v = malloc(cap * sizeof(*v));

		if (!v)
			return pop_fail(p, ENOMEM, "populate: out of memory");
		memcpy(v, j->runs, j->nruns * sizeof(*v));
		if (j->runs != &j->one)
			free(j->runs);
		j->runs = v;
		j->cap = cap;
	}
	j->runs[j->nruns++] = (struct run){.lblk = lblk, .pblk = pblk, .len = len};
	return 0;
}

/*
 * Allocate the blocks of [first, end) of inode n as written extents, not
 * zeroed: the copy writes every byte of them.  Runs recorded in j.
 * n->lock held for writing, h open.
 */
static int alloc_range(struct pop *p, struct handle *h, struct inode *n, uint64_t first,
		       uint64_t end, struct job *j)
{
	while (first < end) {
		struct block_map m;
		int err = inode_map_blocks(h, n, first, MIN(end - first, (uint64_t)ALLOC_MAX_BLOCKS),
					   MAP_CREATE | MAP_WHOLE, &m);

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

/* The file's data ranges rounded out to whole blocks, allocated in order,
 * then i_size. */
static int alloc_file(struct pop *p, uint64_t ino, const struct sent *e, struct job *j)
{
	uext4_fs *fs = p->fs;
	unsigned shift = fs->log_block_size;
	uint64_t size = e->sx.stx_size, bmask = fs->block_size - 1;
	uint64_t nblocks = (size + bmask) >> shift, done_to = 0;
	struct range whole = {0, size};
	const struct range *r = e->sparse ? e->ranges : &whole;
	size_t nr = e->sparse ? e->nranges : 1;
	struct inode *n;
	struct handle *h;
	int err, eerr;

	if ((err = iget(fs, ino, &n)))
		return fail_lib(p, err, "allocating its blocks");
	urw_wrlock(&n->lock);
	if ((err = handle_begin(fs, &h))) {
		err = fail_lib(p, err, "allocating its blocks");
		goto out;
	}
	for (size_t i = 0; i < nr && !err; i++) {
		uint64_t first = MAX(r[i].off >> shift, done_to);
		uint64_t last = MIN((r[i].end + bmask) >> shift, nblocks);

		if (first < last)
			err = alloc_range(p, h, n, first, last, j);
		done_to = MAX(done_to, last);
	}
	if (!err) {
		n->size = size;
		if ((err = inode_write(h, n)))
			err = fail_lib(p, err, "writing its size");
	} else if (inode_truncate_blocks(h, n, 0) == 0) {
		/* Out of space part way: give back what the file got, so the
		 * image holds an empty file rather than blocks nobody wrote. */
		inode_write(h, n);
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

/* A file's job to the pool (in batches), or copied now without workers. */
static int queue_job(struct pop *p, struct job *j)
{
	struct batch *b = p->batch;

	if (!p->nworkers) {
		copy_job(p, &p->ns_scratch, j);
		count_copied(p, &p->ns_scratch);
		job_free(j);
		return 0;
	}
	if (!b && !(b = p->batch = calloc(1, sizeof(*b)))) {
		job_free(j);
		return pop_fail(p, ENOMEM, "populate: out of memory");
	}
	b->jobs[b->n++] = j;
	b->bytes += j->size;
	if (b->n == BATCH_JOBS || b->bytes >= BATCH_BYTES) {
		p->batch = NULL;
		pool_push_batch(p, b);
	}
	return 0;
}

static int copy_regular(struct pop *p, const struct sdir *d, struct sent *e,
			uint64_t dino, uint64_t *ino)
{
	struct uext4_stat st;
	struct job *j;
	int err;

	if ((err = uext4_create(p->fs, dino, e->name, e->sx.stx_mode & 07777, &st)))
		return fail_lib(p, err, "creating it");
	*ino = st.ino;
	if (!(j = calloc(1, sizeof(*j))))
		return pop_fail(p, ENOMEM, "populate: out of memory");
	j->dir = d;
	j->ent = e;
	j->size = e->sx.stx_size;
	if ((err = alloc_file(p, st.ino, e, j)) ||
	    (!e->late_xattrs && (err = set_xattrs(p, st.ino, e->xattrs, e->xlen))) || !j->nruns) {
		job_free(j);
		return err;
	}
	return queue_job(p, j);
}

static int copy_dir(struct pop *p, struct sdir *d, uint64_t dino);

/* A new, empty directory of a casefold image whose source has +F takes it
 * now, while it may (ext4 changes +F only on an empty directory).  One that
 * inherited +F keeps it, as a copy by cp -r into the image would. */
static int match_casefold(struct pop *p, uint64_t ino, uint32_t want)
{
	uint32_t cur;
	int err;

	if (!want)
		return 0;
	if ((err = uext4_get_flags(p->fs, ino, &cur)) || (cur & want))
		return err;
	return uext4_set_flags(p->fs, ino, cur | want);
}

static int copy_directory(struct pop *p, const struct sent *e, uint64_t dino, uint64_t *ino)
{
	struct uext4_stat st;
	int err;

	err = uext4_mkdir(p->fs, dino, e->name, e->sx.stx_mode & 07777, &st);
	if (!err && p->casefold) {
		wait_scanned(p, e->sub);    /* its flags are the scan's */
		err = match_casefold(p, st.ino, e->sub->flags & FS_CASEFOLD_FL);
	}
	/* A directory the image already has (lost+found at the top, as a
	 * source that is a file system's root holds it): fill that one. */
	else if (err == -EEXIST && uext4_lookup(p->fs, dino, e->name, &st) == 0 &&
		 S_ISDIR(st.mode))
		err = 0;
	if (err)
		return fail_lib(p, err, "creating the directory");
	*ino = st.ino;
	if ((err = copy_dir(p, e->sub, st.ino)))
		return err;
	return set_xattrs(p, st.ino, e->sub->xattrs, e->sub->xlen);
}

static int copy_other(struct pop *p, const struct sent *e, uint64_t dino, uint64_t *ino)
{
	struct uext4_stat st;
	int err;

	if (S_ISLNK(e->sx.stx_mode)) {
		if ((err = uext4_symlink(p->fs, dino, e->name, e->target, &st)))
			return fail_lib(p, err, "creating the symlink");
	} else {
		uint64_t rdev = makedev(e->sx.stx_rdev_major, e->sx.stx_rdev_minor);

		if ((err = uext4_mknod(p->fs, dino, e->name, e->sx.stx_mode & (S_IFMT | 07777), rdev,
				       &st)))
			return fail_lib(p, err, "creating the node");
	}
	*ino = st.ino;
	return set_xattrs(p, st.ino, e->xattrs, e->xlen);
}

/* One planned entry into directory dino. */
static int copy_entry(struct pop *p, const struct sdir *d, struct sent *e, uint64_t dino)
{
	uint64_t ino = 0, dev = makedev(e->sx.stx_dev_major, e->sx.stx_dev_minor), link_to = 0;
	bool multi = !S_ISDIR(e->sx.stx_mode) && e->sx.stx_nlink > 1;
	size_t saved;
	int err;

	if ((err = path_push(p, e->name, &saved)))
		return err;
	if (e->err) {
		err = pop_fail(p, e->err, "populate: %s: %s: %s", p->path, e->errwhat,
			       strerror(e->err));
		goto out;
	}
	if (multi && (link_to = link_find(p, dev, e->sx.stx_ino))) {
		if ((err = uext4_link(p->fs, link_to, dino, e->name, NULL)))
			err = fail_lib(p, err, "linking it");
		goto out;
	}
	if (S_ISDIR(e->sx.stx_mode))
		err = copy_directory(p, e, dino, &ino);
	else if (S_ISREG(e->sx.stx_mode))
		err = copy_regular(p, d, e, dino, &ino);
	else
		err = copy_other(p, e, dino, &ino);
	if (!err)
		err = set_attrs(p, ino, &e->sx, false);
	if (!err && multi)
		err = link_add(p, dev, e->sx.stx_ino, ino);
	e->ino = ino;
out:
	atomic_fetch_add_explicit(&p->files_done, 1, memory_order_relaxed);
	path_pop(p, saved);
	return err;
}

/* Everything in planned directory d into image directory dino. */
static int copy_dir(struct pop *p, struct sdir *d, uint64_t dino)
{
	wait_scanned(p, d);
	if (d->err)
		return pop_fail(p, d->err, "populate: %s: %s: %s", p->path, d->errwhat,
				strerror(d->err));
	for (size_t i = 0; i < d->n; i++) {
		int err = stopped(p) ? -ECANCELED : copy_entry(p, d, &d->ents[i], dino);

		if (err)
			return err;
	}
	return 0;
}

/* The top: its entries, then its own xattrs, attributes and flags. */
static int copy_top(struct pop *p)
{
	struct statx sx;
	int err;

	if (statx(AT_FDCWD, p->path, 0, STATX_BASIC_STATS | STATX_BTIME, &sx))
		return pop_fail(p, errno, "populate: %s: cannot stat it: %s", p->path,
				strerror(errno));
	if (!S_ISDIR(sx.stx_mode))
		return pop_fail(p, ENOTDIR, "populate: %s: not a directory", p->path);
	if ((err = copy_dir(p, p->root, p->top)) ||
	    (err = set_xattrs(p, p->top, p->root->xattrs, p->root->xlen)))
		return err;
	return set_attrs(p, p->top, &sx, true);
}

/* ------------------------------------------------------------ threads */

/*
 * The walk is done: every inode, directory and extent is in the buffer
 * cache, and only file data (and the flags and late xattrs of
 * finish_plan) is still to come.  Writing the metadata home now, while
 * the pool copies data, takes it off the unmount, which did it alone.
 * On every run and with any thread count it happens at this same point.
 */
static void commit_metadata(struct pop *p)
{
	int err = trans_commit(p->fs);

	if (err)
		pop_fail(p, -err, "populate: %s: writing the metadata into the image: %s", p->path,
			 uext4_last_error());
}

static void *namespace_main(void *arg)
{
	struct pop *p = arg;
	pthread_t *workers = NULL;
	unsigned started = 0;

	/* A thread of its own: its identity (root) and umask (0) are the
	 * library's defaults, whatever the caller set for its threads. */
	if (p->nworkers && !(workers = calloc(p->nworkers, sizeof(*workers))))
		pop_fail(p, ENOMEM, "populate: out of memory");
	for (; workers && started < p->nworkers; started++)
		if (pthread_create(&workers[started], NULL, pool_worker, p)) {
			pop_fail(p, EAGAIN, "populate: cannot start a worker thread");
			break;
		}
	if (!stopped(p))
		copy_top(p);
	if (p->batch) {
		pool_push_batch(p, p->batch);
		p->batch = NULL;
	}
	if (!stopped(p))
		commit_metadata(p);
	if (started)
		pool_work(p, &p->ns_scratch, true);  /* help copy what is left */
	wbuf_flush(p, &p->ns_scratch);
	pool_close(p);
	for (unsigned i = 0; i < started; i++)
		pthread_join(workers[i], NULL);
	if (!stopped(p))
		finish_plan(p, p->root, p->top);
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

/* Totals for the progress display: entries and file bytes (a serial walk,
 * by the thread that reports progress while the others copy; only when
 * someone shows progress). */
static _Thread_local uint64_t count_files, count_bytes;

static int count_one(const char *path, const struct stat *st, int type, struct FTW *f)
{
	(void)path;
	if (f->level > 0)
		count_files++;
	if (type == FTW_F && S_ISREG(st->st_mode))
		count_bytes += (uint64_t)st->st_size;
	return 0;
}

static void count_source(struct pop *p)
{
	count_files = count_bytes = 0;
	if (nftw(p->root->path, count_one, 64, FTW_PHYS) == 0) {
		p->files_total = count_files;
		p->bytes_total = count_bytes;
	}
}

/* Wait for the namespace thread, calling the progress callback meanwhile
 * (from this thread only). */
static void wait_done(struct pop *p)
{
	if (p->o->progress)
		count_source(p);    /* while the copy runs: the totals come late */
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

static unsigned worker_count(const struct uext4_populate_opts *o)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	unsigned t = o->threads ? o->threads : (cpus > 0 ? (unsigned)cpus : 1);

	return t <= 1 ? 0 : MIN(t, 256u);
}

/* Buffers for the image writer: more than the threads that fill them. */
static int writer_init(struct writer *w, unsigned threads)
{
	memset(w, 0, sizeof(*w));
	pthread_mutex_init(&w->lock, NULL);
	pthread_cond_init(&w->freed, NULL);
	w->nbufs = 2 * (size_t)threads + 1;
	w->bufs = calloc(w->nbufs, sizeof(*w->bufs));
	w->mem = malloc(w->nbufs * WBUF_SIZE);
	if (!w->bufs || !w->mem)
		return -ENOMEM;
	for (size_t i = 0; i < w->nbufs; i++) {
		w->bufs[i].data = w->mem + i * WBUF_SIZE;
		w->bufs[i].src = -1;
		w->bufs[i].next = w->free;
		w->free = &w->bufs[i];
	}
	return 0;
}

static void writer_destroy(struct writer *w)
{
	free(w->bufs);
	free(w->mem);
	pthread_mutex_destroy(&w->lock);
	pthread_cond_destroy(&w->freed);
}

static void pop_free(struct pop *p)
{
	free(p->links);
	if (p->batch) {
		for (size_t i = 0; i < p->batch->n; i++)
			job_free(p->batch->jobs[i]);
		free(p->batch);
	}
	scratch_free(&p->ns_scratch);
	pool_destroy(&p->pool);
	writer_destroy(&p->writer);
	sdir_free(p->root);
	pthread_mutex_destroy(&p->err_lock);
	pthread_mutex_destroy(&p->done_lock);
	pthread_cond_destroy(&p->done_cond);
	free(p);
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
	p->projids = FS_HAS_RO_COMPAT(fs, PROJECT);
	p->casefold = FS_HAS_INCOMPAT(fs, CASEFOLD);
	p->nworkers = worker_count(p->o);
	pool_init(&p->pool);
	pthread_mutex_init(&p->err_lock, NULL);
	pthread_mutex_init(&p->done_lock, NULL);
	pthread_cond_init(&p->done_cond, NULL);
	p->plen = strlen(source);
	while (p->plen > 1 && source[p->plen - 1] == '/')
		p->plen--;
	memcpy(p->path, source, p->plen);
	p->path[p->plen] = 0;
	if (writer_init(&p->writer, p->nworkers + 1) || scratch_init(&p->ns_scratch) ||
	    !(p->root = sdir_new(p->path))) {
		pop_free(p);
		return fs_err(ENOMEM, "populate: out of memory");
	}
	if ((err = pthread_create(&ns, NULL, namespace_main, p))) {
		pop_free(p);
		return fs_err(err, "populate: cannot start a thread: %s", strerror(err));
	}
	wait_done(p);
	pthread_join(ns, NULL);
	err = p->err ? fs_err(p->err, "%s", p->msg) : 0;
	pop_free(p);
	return err;
}
