/*
 * fuse.c - uext4's FUSE server on libfuse3's low-level API.
 *
 * Inode numbers pass straight through (FUSE_ROOT_ID == 1 maps to ext4's root
 * inode 2).  Mounts are read-write unless -o ro.  Permissions are the
 * kernel's business (default_permissions) whenever they can matter: mounts
 * by a non-root user and shared mounts (allow_other).  A private mount by
 * root leaves it off: root passes every check anyway (the kernel still
 * checks exec bits), and with it the kernel fetches the directory's
 * attributes again after every change in it, one more round trip per
 * create.  The library only writes.
 *
 * POSIX ACLs.  Where the kernel checks permissions, it checks ACLs too
 * (FUSE_CAP_POSIX_ACL, which turns default_permissions on by itself): it
 * reads system.posix_acl_access/default through GETXATTR, caches them, and
 * forgets them after it sends SETXATTR, REMOVEXATTR or SETATTR.  The
 * library keeps the mode and the ACLs in step (a chmod rewrites the access
 * ACL, an access ACL sets the mode) and makes new inodes inherit their
 * directory's default ACL.  For that the kernel must not apply the umask
 * itself (FUSE_CAP_DONT_MASK): it sends the mode create(2), mkdir(2) or
 * mknod(2) was given, and the caller's umask, which the library applies
 * only where no default ACL rules, as the kernel's ext4 does.  A private
 * mount by root leaves ACL checks off with the rest (root passes them).
 *
 * Caching.  The mount is ours alone: every change passes through the
 * kernel, which keeps its caches right, so entries, attributes, pages and
 * directory listings are cached for a very long time, read-only or not.
 * The few changes the server makes on its own are pushed to the kernel
 * (notify_attr_changed()): the mode an access ACL sets.  (Orphan cleanup
 * runs at mount, before the kernel sees anything; a refused write changes
 * nothing the kernel has cached.)  Read-write mounts use the kernel's
 * writeback cache (-o nowriteback turns it off): the kernel gathers small
 * writes into up to max_write (1 MiB) requests, and owns the size, mtime
 * and ctime of regular files, which it sends with SETATTR (FATTR_MTIME and
 * FATTR_CTIME) when it writes the inode back, on close and on fsync.  It
 * also handles O_APPEND itself, so files are opened without it here: the
 * pages it writes back carry their own offsets.  fsync(2) writes back the
 * dirty pages, then the times, then sends FSYNC, which commits.  Right
 * after an UNLINK or RENAME of a regular file it also sends a SETATTR of
 * the new ctime (fuse_update_ctime()), by inode number, when the file may
 * be gone: the library keeps every inode the kernel holds a lookup of
 * (the lookup counts, reply_entry_or_err()), so an unlinked file stays
 * allocated until its FORGET.
 */
#define FUSE_USE_VERSION 312
#include "fuse.h"
#include "loop.h"
#include "reqstats.h"
#include "mountinfo.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/fs.h>     /* FS_IOC_GETFLAGS, struct fsxattr */
#include <linux/fuse.h>   /* the kill-suid/sgid request flags libfuse drops */
#include <linux/fsverity.h> /* FS_IOC_ENABLE_VERITY, FS_IOC_MEASURE_VERITY */
#include <dirent.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <stdatomic.h>
#include <syslog.h>
#include <unistd.h>

#define CACHE_TIMEOUT 1e6       /* seconds: nobody else changes the image */
#define MAX_IO (1u << 20)       /* readahead / write size we ask for */

/*
 * A full disk with the writeback cache.  A write(2) into the kernel's page
 * cache returns before the server sees the data; were the image full when
 * the kernel writes it back, the data would be lost with the write long
 * reported done.  The kernel bounds what it holds dirty for one FUSE mount
 * (the bdi's strict limit, max_ratio 1% of the dirty threshold, shown as
 * /sys/class/bdi/BDI/max_bytes): dirty_bound is twice that (pages under
 * write-back count too, and writers overshoot by their rate limit) plus
 * FULL_MARGIN.  While the available space is above dirty_bound +
 * 2 * FULL_MARGIN ("near full" below it), every page the kernel may hold
 * fits.  Near full:
 *   - files opened for writing from then on are opened FOPEN_DIRECT_IO:
 *     each write(2) is a WRITE that fails with ENOSPC when the data does
 *     not fit, as on the kernel's ext4;
 *   - files still open through the cache: each write-back WRITE of theirs
 *     invalidates the inode's attributes, and each GETATTR on their handle
 *     (which is what the kernel sends before a cached write(2)) does again
 *     before it replies, so every write(2) on them asks first; once the
 *     available space is below dirty_bound + FULL_MARGIN, that GETATTR
 *     fails with ENOSPC, and so does the write(2);
 *   - while such files are open, direct writes leave dirty_bound free for
 *     their pages.
 * Away from full this costs one statfs sum (per-CPU counters) per open for
 * writing and per write-back WRITE.  FULL_MARGIN covers one write(2) call
 * (a single call larger than that, begun on a cached file before the
 * switch, may still be cut short at write-back) and the metadata around it.
 * Near full, direct files differ from cached ones as FOPEN_DIRECT_IO does:
 * the kernel does not advance the mtime it shows (the image's is right).
 * They may be mapped shared (the loop claims FUSE_DIRECT_IO_ALLOW_MMAP;
 * the kernel writes mapped pages back before a direct read or write of
 * theirs); pages dirtied through a mapping are the case this cannot cover,
 * as for cached files.
 */
#define FULL_MARGIN (8ull << 20)

#ifndef FUSE_DIRECT_IO_ALLOW_MMAP       /* kernel 6.6 (protocol 7.39) */
#define FUSE_DIRECT_IO_ALLOW_MMAP (1ULL << 36)
#endif

struct full_guard {
	uint64_t dirty_bound;       /* bytes; set before the session serves */
	atomic_int cached_writers;  /* open files written through the cache */
};

/*
 * Write-backs that failed: the kernel's WRITEs of cached pages (whose
 * write(2) had returned) that the image did not take.  fsync and close of
 * the file report it once (the kernel keeps the error); the server keeps
 * the inodes for the final status, which `uext4 umount` prints.  Rare, so a
 * mutex (lock) protects all of it.
 */
#define WB_FAILED_NAMED 8

struct wb_failures {
	pthread_mutex_t lock;
	uint64_t count;             /* failed WRITEs */
	unsigned n;                 /* inodes in ino[] and err[] */
	uint64_t ino[WB_FAILED_NAMED];
	int err[WB_FAILED_NAMED];
};

/* Per-mount state; immutable once the session runs, except writeback and
 * no_opendir (set by init, before any other request; atomic for TSan's
 * sake, which cannot see the kernel order them) and write_back_err (written
 * by destroy, after every request). */
struct server {
	uext4_fs *fs;
	struct fuse_session *se;    /* for notifications */
	int read_only;
	int want_writeback;         /* -o writeback / nowriteback, read-write only */
	int kernel_checks;          /* default_permissions: POSIX ACLs checked too */
	atomic_int writeback;       /* the kernel agreed to FUSE_CAP_WRITEBACK_CACHE */
	atomic_int no_opendir;      /* ... and FUSE_CAP_NO_OPENDIR_SUPPORT (set by init) */
	double timeout;
	uint32_t block_size;
	uint32_t time_gran;         /* ns: 1, or 1e9 on 128-byte inodes (whole seconds) */
	const char *fsname;     /* for messages */
	int write_back_err;     /* uext4_sync() failure at destroy, or 0 */
	struct full_guard full; /* a full disk with the writeback cache (below) */
	struct wb_failures wbf; /* write-backs the image could not take */
	/* A request may wait for a notification that makes the kernel send
	 * WRITEs of dirty pages (pages_notify_safe()). */
	bool page_notify_ok;
	/* How many threads may wait in a page notification at once, leaving
	 * one free for the requests it waits for (pool: threads - 1). */
	int inval_inline_max;
	atomic_int inval_inline;        /* that many wait now */
	char mnt[PATH_MAX];             /* the mount point (realpath), set by serve() */
	int name_drops;                 /* drop_name() items queued; under dio_q.lock */
	bool casefold_fs;               /* the image has casefold (set before serving) */
};

static struct server *srv(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

/* FUSE's root is 1, ext4's is 2; inode 1 (bad blocks) is never exposed. */
static uint64_t to_ext4(fuse_ino_t ino)
{
	return ino == FUSE_ROOT_ID ? UEXT4_ROOT_INO : ino;
}

static fuse_ino_t to_fuse(uint64_t ino)
{
	return ino == UEXT4_ROOT_INO ? FUSE_ROOT_ID : ino;
}

static void to_stat(const struct server *s, const struct uext4_stat *u, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = u->ino;  /* what the kernel shows: root is 2, not the FUSE node id */
	st->st_mode = u->mode;
	st->st_nlink = u->nlink;
	st->st_uid = u->uid;
	st->st_gid = u->gid;
	st->st_size = (off_t)u->size;
	st->st_blocks = (blkcnt_t)u->blocks;
	st->st_rdev = u->rdev;
	st->st_blksize = s->block_size;
	st->st_atim = u->atime;
	st->st_mtim = u->mtime;
	st->st_ctim = u->ctime;
}

/* Library errors are negative errnos; EUCLEAN (corruption) passes through. */
/*
 * Corruption: the client sees only EUCLEAN, so the server says what it is
 * (on stderr and, as a daemon's stderr is /dev/null, in syslog), as the
 * kernel logs its ext4 errors; the first 20 of a mount, against floods.
 */
static void log_corruption(const struct server *s)
{
	static _Atomic unsigned logged;
	const char *msg = uext4_last_error();

	if (!*msg || atomic_fetch_add_explicit(&logged, 1, memory_order_relaxed) >= 20)
		return;
	fprintf(stderr, "uext4 mount: %s: %s\n", s->fsname, msg);
	syslog(LOG_ERR, "uext4: %s: %s", s->fsname, msg);
}

static void reply_err(fuse_req_t req, long ret)
{
	int e = ret < 0 ? (int)-ret : EIO;

	if (e == EUCLEAN)
		log_corruption(srv(req));
	fuse_reply_err(req, e ? e : EIO);
}

#define FS_CASEFOLD_FLAG 0x40000000u   /* FS_CASEFOLD_FL, +F */

/*
 * How long the kernel may keep a name of directory parent (0: unknown).
 * Its dentry cache compares names by their bytes; a casefolded directory
 * (+F) finds a name under any case.  So there a name is not kept at all:
 * an absent "foo" kept would hide a "FOO" created later, and a kept "FOO"
 * for the file "foo" would outlive the unlink or rename of "foo".  The
 * kernel asks again (LOOKUP) at each use instead.  Elsewhere names are
 * kept as long as attributes.
 */
static double entry_timeout_in(const struct server *s, fuse_ino_t parent)
{
	uint32_t fl;

	if (s->casefold_fs && parent && uext4_get_flags(s->fs, to_ext4(parent), &fl) == 0 &&
	    (fl & FS_CASEFOLD_FLAG))
		return 0;
	return s->timeout;
}

static void fill_entry(const struct server *s, const struct uext4_stat *u,
		       struct fuse_entry_param *e, fuse_ino_t parent)
{
	memset(e, 0, sizeof(*e));
	e->ino = to_fuse(u->ino);
	e->generation = u->generation;
	e->attr_timeout = s->timeout;
	e->entry_timeout = entry_timeout_in(s, parent);
	to_stat(s, u, &e->attr);
}

/* ------------------------------------------------------------- session */

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
	struct server *s = userdata;
	/* Adaptive readdirplus: attributes with the names when the reader
	 * stats them (ls -l, find, tar c), plain READDIR otherwise.  No
	 * splice: reads are answered from a memory buffer (fuse_reply_buf,
	 * one writev), which SPLICE_WRITE/MOVE do not touch, and SPLICE_READ
	 * would pass each 1 MiB WRITE through a pipe before the library needs
	 * it in memory anyway. */
	unsigned want = FUSE_CAP_ASYNC_READ | FUSE_CAP_READDIRPLUS |
			FUSE_CAP_READDIRPLUS_AUTO | FUSE_CAP_PARALLEL_DIROPS;

	/* A symlink's target never changes; O_TRUNC comes with the open
	 * instead of a separate SETATTR. */
	want |= FUSE_CAP_CACHE_SYMLINKS;
	/* lsattr/chattr on directories too. */
	want |= FUSE_CAP_IOCTL_DIR;
	/* No OPENDIR/RELEASEDIR round trips: op_opendir answers ENOSYS (see
	 * there). */
	want |= FUSE_CAP_NO_OPENDIR_SUPPORT;
	if (!s->read_only)
		want |= FUSE_CAP_ATOMIC_O_TRUNC;
	if (!s->read_only && s->want_writeback)
		want |= FUSE_CAP_WRITEBACK_CACHE;
	/* The kernel checks ACLs; the library applies the umask (op_create). */
	if (s->kernel_checks)
		want |= FUSE_CAP_POSIX_ACL;
	if (!s->read_only)
		want |= FUSE_CAP_DONT_MASK;
	/* File handles (open_by_handle_at, NFS): node ids are inode numbers
	 * and generations i_generation, the same in every mount; a node the
	 * kernel no longer caches is looked up as "." in it (op_lookup). */
	want |= FUSE_CAP_EXPORT_SUPPORT;
	conn->want |= want & conn->capable;
	atomic_store_explicit(&s->writeback, (conn->want & FUSE_CAP_WRITEBACK_CACHE) != 0,
			      memory_order_relaxed);
	atomic_store_explicit(&s->no_opendir, (conn->want & FUSE_CAP_NO_OPENDIR_SUPPORT) != 0,
			      memory_order_relaxed);
	/* Page-cache invalidation on mtime change is pointless when every
	 * write passes through the kernel, and costs a GETATTR per open. */
	conn->want &= ~FUSE_CAP_AUTO_INVAL_DATA;
	/* Not the first version of killpriv, where the server drops
	 * setuid/setgid on every write, truncate and chown (even root's):
	 * the loop claims FUSE_HANDLE_KILLPRIV_V2 instead (peek_request). */
	conn->want &= ~FUSE_CAP_HANDLE_KILLPRIV;
	/* libfuse 3.14 turns max_write into max_pages (256 pages = 1 MiB, its
	 * buffer size and the kernel's limit); reads are bounded by max_pages
	 * too (no max_read mount option needed). */
	conn->max_readahead = MAX_IO;
	conn->max_write = MAX_IO;
	conn->want &= ~(FUSE_CAP_SPLICE_WRITE | FUSE_CAP_SPLICE_MOVE | FUSE_CAP_SPLICE_READ);
	/* The kernel then truncates the times it sets and shows as the image
	 * stores them: 128-byte inodes have no nanoseconds. */
	conn->time_gran = s->time_gran;
}

static void reply_counted_entry(fuse_req_t req, const struct server *s,
				const struct uext4_stat *u, fuse_ino_t parent);

/* Export support: "." in node ino, of any type, is the kernel decoding a
 * file handle of a node it no longer caches (fuse_get_dentry); ".." in a
 * directory is a real entry and takes the ordinary path.  A stale
 * handle is ESTALE; the kernel checks the generation. */
static void lookup_handle(fuse_req_t req, fuse_ino_t ino)
{
	struct server *s = srv(req);
	struct uext4_stat u;
	int ret;

	/* Node 2 is never given out (the root is 1): a forged handle. */
	ret = ino == UEXT4_ROOT_INO ? -ESTALE : uext4_lookup_handle(s->fs, to_ext4(ino), &u);
	if (ret < 0)
		reply_err(req, ret);
	else
		reply_counted_entry(req, s, &u, 0);
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct server *s = srv(req);
	struct uext4_stat u;
	struct fuse_entry_param e;
	int ret;

	if (!strcmp(name, ".")) {
		lookup_handle(req, parent);
		return;
	}
	ret = uext4_lookup_counted(s->fs, to_ext4(parent), name, &u);

	if (ret == -ENOENT) {
		/* Negative entry: cache the absence as long as a presence (a
		 * create through the kernel replaces it); not in a casefolded
		 * directory (entry_timeout_in()). */
		memset(&e, 0, sizeof(e));
		e.entry_timeout = entry_timeout_in(s, parent);
		fuse_reply_entry(req, &e);
		return;
	}
	if (ret < 0)
		reply_err(req, ret);
	else
		reply_counted_entry(req, s, &u, parent);
}

static void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	uext4_forget(srv(req)->fs, to_ext4(ino), nlookup);
	fuse_reply_none(req);
}

static void op_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *f)
{
	for (size_t i = 0; i < count; i++)
		uext4_forget(srv(req)->fs, to_ext4(f[i].ino), f[i].nlookup);
	fuse_reply_none(req);
}

static int full_guard_getattr(const struct server *s, fuse_ino_t ino,
			      const struct fuse_file_info *fi);

static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct server *s = srv(req);
	struct uext4_stat u;
	struct stat st;
	int ret = full_guard_getattr(s, ino, fi);

	if (ret >= 0)
		ret = uext4_getattr(s->fs, to_ext4(ino), &u);
	if (ret < 0) {
		reply_err(req, ret);
		return;
	}
	to_stat(s, &u, &st);
	fuse_reply_attr(req, &st, s->timeout);
}

static void op_readlink(fuse_req_t req, fuse_ino_t ino)
{
	char buf[4097];
	ssize_t n = uext4_readlink(srv(req)->fs, to_ext4(ino), buf, sizeof(buf) - 1);

	if (n < 0) {
		reply_err(req, n);
		return;
	}
	if ((size_t)n >= sizeof(buf)) {
		fuse_reply_err(req, ENAMETOOLONG);
		return;
	}
	buf[n] = '\0';
	fuse_reply_readlink(req, buf);
}

/* ------------------------------------------------------ killing privileges */

/*
 * FUSE_HANDLE_KILLPRIV_V2 (claimed in INIT by the loop, fuse/loop.h, as
 * libfuse 3.14 cannot): the server, not the kernel, drops setuid/setgid
 * and security.capability when a file is written, truncated or chowned.
 * The kernel then makes no mode change of its own around those (without
 * it, a GETATTR and a SETATTR of the mode per chown or truncate), and asks
 * for security.capability (a GETXATTR before a write) once per inode and
 * attribute refresh instead of on every write(2): the mount is SB_NOSEC
 * and the inode gets S_NOSEC.  It says when to drop them with a flag in
 * the request, which libfuse 3.14 does not pass on:
 *   WRITE    FUSE_WRITE_KILL_SUIDGID   the writer lacks CAP_FSETID;
 *   SETATTR  FATTR_KILL_SUIDGID        a truncate by a caller lacking
 *                                      CAP_FSETID, or any chown of a
 *                                      non-directory;
 *   OPEN     FUSE_OPEN_KILL_SUIDGID    O_TRUNC by an opener lacking it
 *   (CREATE carries it too, for a file that does not exist yet: nothing
 *   to drop.)
 * So the loop shows each request to peek_request() before libfuse
 * dispatches it, on the thread that then serves it, and the handlers read
 * the flag from this thread-local.  What is dropped follows the VFS
 * (setattr_should_drop_suidgid): setuid always, setgid only with group
 * execute (without it, setgid marks mandatory locking), and the
 * capability xattr.
 */
static __thread bool req_kill_privs;

static void peek_request(const void *req, size_t len)
{
	const struct fuse_in_header *in = req;
	const void *arg = in + 1;
	size_t room = len - sizeof(*in);    /* len >= sizeof(*in): the loop checks */

	reqstats_request(req);
	req_kill_privs = false;
	switch (in->opcode) {
	case FUSE_WRITE:
		if (room >= sizeof(struct fuse_write_in))
			req_kill_privs = ((const struct fuse_write_in *)arg)->write_flags &
					 FUSE_WRITE_KILL_SUIDGID;
		break;
	case FUSE_SETATTR:
		if (room >= sizeof(struct fuse_setattr_in))
			req_kill_privs = ((const struct fuse_setattr_in *)arg)->valid &
					 FATTR_KILL_SUIDGID;
		break;
	case FUSE_OPEN:
		if (room >= sizeof(struct fuse_open_in))
			req_kill_privs = ((const struct fuse_open_in *)arg)->open_flags &
					 FUSE_OPEN_KILL_SUIDGID;
		break;
	default:
		break;
	}
}

/* Is the caller of req in group gid (its fsgid or a supplementary group)?
 * Asked only for a setgid file without group-exec, so the /proc read of
 * fuse_req_getgroups() stays off the hot path.  If it fails: no (the
 * setgid bit then goes, the safe way). */
static bool caller_in_group(fuse_req_t req, uint32_t gid)
{
	gid_t list[64];
	int n;

	if (fuse_req_ctx(req)->gid == gid)
		return true;
	n = fuse_req_getgroups(req, 64, list);
	for (int i = 0; i < n && i < 64; i++)
		if (list[i] == gid)
			return true;
	return false;
}

/*
 * mode without what the request drops; true if it changed.  As the VFS
 * (setattr_should_drop_suidgid, setattr_should_drop_sgid): setuid always;
 * setgid with group-exec always, without it (mandatory locking's mark) only
 * for a caller outside the file's group and without CAP_FSETID.  The
 * kernel flags a write, truncate or O_TRUNC only for a caller without
 * CAP_FSETID, a chown for any caller: there root stands for CAP_FSETID.
 */
static bool drop_suid_sgid(fuse_req_t req, bool chown, const struct uext4_stat *u,
			   uint32_t *mode)
{
	uint32_t m = *mode & ~(uint32_t)S_ISUID;

	if (m & S_ISGID) {
		bool capable = chown && fuse_req_ctx(req)->uid == 0;

		if ((m & S_IXGRP) || (!capable && !caller_in_group(req, u->gid)))
			m &= ~(uint32_t)S_ISGID;
	}
	if (m == *mode)
		return false;
	*mode = m;
	return true;
}

/* Add to a the mode change that drops setuid/setgid, if one is needed
 * (the mode a sets, else the inode's). */
static int kill_mode_in(fuse_req_t req, struct server *s, fuse_ino_t ino, struct uext4_setattr *a)
{
	bool chown = a->valid & (UEXT4_SET_UID | UEXT4_SET_GID);
	struct uext4_stat u;
	uint32_t mode;
	int ret;

	if ((ret = uext4_getattr(s->fs, to_ext4(ino), &u)) < 0)
		return ret;
	mode = (a->valid & UEXT4_SET_MODE) ? a->mode : u.mode & 07777;
	if (drop_suid_sgid(req, chown, &u, &mode)) {
		a->valid |= UEXT4_SET_MODE;
		a->mode = mode;
	}
	return 0;
}

/* Remove security.capability, if there is one.  Probed first: most files
 * have none, and the probe only reads. */
static int kill_capability(struct server *s, fuse_ino_t ino)
{
	static const char cap[] = "security.capability";
	ssize_t n = uext4_getxattr(s->fs, to_ext4(ino), cap, NULL, 0);
	int ret;

	if (n == -ENODATA || n == -EOPNOTSUPP)
		return 0;
	if (n < 0)
		return (int)n;
	ret = uext4_removexattr(s->fs, to_ext4(ino), cap);
	return ret == -ENODATA ? 0 : ret;
}

static void notify_attr_changed(const struct server *s, fuse_ino_t ino);

/* Before a WRITE that asks for it: drop setuid/setgid and the capability
 * before the data changes, as the VFS does (a refusal, e.g. on an
 * append-only file, fails the write, as there). */
static int kill_privs_for_write(fuse_req_t req, struct server *s, fuse_ino_t ino)
{
	struct uext4_setattr a = { 0 };
	struct uext4_stat u;
	int ret = kill_mode_in(req, s, ino, &a);

	if (ret >= 0 && a.valid)
		ret = uext4_setattr(s->fs, to_ext4(ino), &a, &u);
	if (ret >= 0)
		ret = kill_capability(s, ino);
	/* The kernel has the old mode cached, and a WRITE reply carries none. */
	if (ret >= 0 && a.valid)
		notify_attr_changed(s, ino);
	return ret;
}

/* ---------------------------------------------------------------- files */

/*
 * What fi->fh points to: the library's open file and who opened it.  With
 * the writeback cache, the WRITEs of dirty pages come from the kernel with
 * no caller identity (uid 0); the opener's stands in for it, so that the
 * reserved blocks stay root's.
 */
struct open_file {
	uext4_file *f;
	uint32_t uid, gid;
	bool cached_writer;     /* open for writing through the page cache */
};

static uext4_file *fh_file(const struct fuse_file_info *fi)
{
	return ((const struct open_file *)(uintptr_t)fi->fh)->f;
}

static struct server *begin_write(fuse_req_t req);
static int truncate_on_open(fuse_req_t req, struct server *s, fuse_ino_t ino);
static void finish_open(fuse_req_t req, struct server *s, uext4_file *f,
			struct fuse_file_info *fi, const struct fuse_entry_param *e);

static bool writeback_on(const struct server *s)
{
	return atomic_load_explicit(&s->writeback, memory_order_relaxed);
}

/* ----------------------------------------------- a full disk (full_guard) */

/* The bytes a writer without root's reserve may still allocate. */
static uint64_t avail_bytes(const struct server *s)
{
	struct uext4_statfs u;

	if (uext4_statfs(s->fs, &u) < 0)
		return 0;
	return u.blocks_avail * u.block_size;
}

static bool near_full(const struct server *s, uint64_t avail)
{
	return avail < s->full.dirty_bound + 2 * FULL_MARGIN;
}

/* Below this, cached write(2)s fail (at their GETATTR). */
static bool cache_closed(const struct server *s, uint64_t avail)
{
	return avail < s->full.dirty_bound + FULL_MARGIN;
}

/*
 * A file whose size is near ext4's largest (uext4_size_headroom()): the
 * kernel's FUSE knows no largest size, so its cache would take a write past
 * it that write-back then cannot store (fstests generic/308).  Such files
 * are written direct, where that write(2) gets EFBIG as on ext4.  A file
 * far below it written past it at once (a sparse write at 16 TiB) is the
 * case this cannot see: its fsync and `uext4 umount` report the EFBIG.
 */
static bool near_max_size(const struct server *s, uext4_file *f)
{
	return uext4_size_headroom(f) < s->full.dirty_bound + FULL_MARGIN;
}

/* A file opened for writing: through the cache while there is room for
 * what the kernel may hold, else direct (FOPEN_DIRECT_IO). */
static void choose_write_mode(struct server *s, struct open_file *of, struct fuse_file_info *fi)
{
	if ((fi->flags & O_ACCMODE) == O_RDONLY || !writeback_on(s))
		return;
	if (near_full(s, avail_bytes(s)) || near_max_size(s, of->f)) {
		fi->direct_io = 1;
		return;
	}
	of->cached_writer = true;
	atomic_fetch_add_explicit(&s->full.cached_writers, 1, memory_order_relaxed);
}

static void drop_write_mode(struct server *s, const struct open_file *of)
{
	if (of->cached_writer)
		atomic_fetch_sub_explicit(&s->full.cached_writers, 1, memory_order_relaxed);
}

/* A direct write near full leaves room for the pages cached writers may
 * still hold dirty; 0 or -ENOSPC. */
static int leave_room_for_cache(const struct server *s, size_t size)
{
	if (!atomic_load_explicit(&s->full.cached_writers, memory_order_relaxed))
		return 0;
	return avail_bytes(s) < s->full.dirty_bound + size ? -ENOSPC : 0;
}

static void notify_attr_changed(const struct server *s, fuse_ino_t ino);

/* After a write-back WRITE: near full, the file's next write(2) asks first
 * (a GETATTR, full_guard_getattr). */
static void full_guard_written_back(const struct server *s, fuse_ino_t ino)
{
	if (near_full(s, avail_bytes(s)))
		notify_attr_changed(s, ino);
}

/*
 * A GETATTR on the handle of a file open for writing through the cache:
 * the kernel asks before a cached write(2) whose attributes are stale.
 * Near full they always are: invalidated again before the reply (whose
 * attributes the kernel then drops as older than the invalidation, keeping
 * them stale), so each write(2) asks.  Too full: ENOSPC, which the
 * write(2) returns.  0 or -ENOSPC.
 */
static int full_guard_getattr(const struct server *s, fuse_ino_t ino,
			      const struct fuse_file_info *fi)
{
	const struct open_file *of;
	uint64_t avail;

	if (!fi || !writeback_on(s))
		return 0;
	of = (const struct open_file *)(uintptr_t)fi->fh;
	if (!of || !of->cached_writer)
		return 0;
	avail = avail_bytes(s);
	if (cache_closed(s, avail))
		return -ENOSPC;
	if (near_full(s, avail))
		notify_attr_changed(s, ino);
	return 0;
}

/* --------------------------------------------- failed write-backs (wbf) */

/*
 * A write-back WRITE the image took only part of: an error, not the short
 * count, which the kernel would take as success (its fsync then says
 * nothing).  The file at ext4's largest size: EFBIG (a sparse write(2) past
 * it that the cache took, near_max_size()); else the space ran out.
 */
static int short_write_back_err(uext4_file *f)
{
	return uext4_size_headroom(f) == 0 ? -EFBIG : -ENOSPC;
}

static void record_write_back_failure(struct server *s, fuse_ino_t ino, long err)
{
	struct wb_failures *w = &s->wbf;
	uint64_t eino = to_ext4(ino);
	bool added = false;
	unsigned i;

	pthread_mutex_lock(&w->lock);
	w->count++;
	for (i = 0; i < w->n && w->ino[i] != eino; i++)
		;
	if (i == w->n && w->n < WB_FAILED_NAMED) {
		w->ino[w->n] = eino;
		w->err[w->n++] = err < 0 ? (int)-err : EIO;
		added = true;
	}
	pthread_mutex_unlock(&w->lock);
	if (!added)
		return;         /* said once per inode, for the first few */
	fprintf(stderr, "uext4 mount: %s: writing back inode %llu failed: %s\n", s->fsname,
		(unsigned long long)eino, strerror(err < 0 ? (int)-err : EIO));
	syslog(LOG_ERR, "uext4: %s: writing back inode %llu failed: %s", s->fsname,
	       (unsigned long long)eino, strerror(err < 0 ? (int)-err : EIO));
}

static uint64_t write_back_failures(struct server *s)
{
	uint64_t n;

	pthread_mutex_lock(&s->wbf.lock);
	n = s->wbf.count;
	pthread_mutex_unlock(&s->wbf.lock);
	return n;
}

/*
 * A path of inode ino, for the message: a walk of the tree from the root,
 * at most PATH_WALK_MAX entries (the kernel never told the server names
 * with the WRITEs).  "" when not found: unlinked, or too deep in a large
 * tree.
 */
#define PATH_WALK_MAX 200000

struct path_walk {
	uext4_fs *fs;
	uint64_t target;
	long budget;
	char *path;             /* PATH_MAX: the directory's path, grown in place */
	bool found;
};

static bool walk_dir(struct path_walk *w, uint64_t dir);

struct walk_entry {
	struct path_walk *w;
	uint64_t sub[64];       /* subdirectories, walked after the listing */
	unsigned nsub;
	char names[64][256];
};

static int walk_fill(void *ctx, const char *name, size_t len, uint64_t ino, unsigned dtype,
		     uint64_t next)
{
	struct walk_entry *e = ctx;
	struct path_walk *w = e->w;
	size_t pl = strlen(w->path);

	(void)next;
	if (--w->budget < 0)
		return 1;
	if ((len == 1 && name[0] == '.') || (len == 2 && name[0] == '.' && name[1] == '.'))
		return 0;
	if (ino == w->target && pl + len + 2 < PATH_MAX) {
		snprintf(w->path + pl, PATH_MAX - pl, "/%.*s", (int)len, name);
		w->found = true;
		return 1;
	}
	if (dtype == DT_DIR && e->nsub < 64 && len < 256) {
		e->sub[e->nsub] = ino;
		snprintf(e->names[e->nsub++], 256, "%.*s", (int)len, name);
	}
	return 0;
}

static bool walk_dir(struct path_walk *w, uint64_t dir)
{
	struct walk_entry *e = calloc(1, sizeof(*e));
	size_t pl = strlen(w->path);

	if (!e)
		return false;
	e->w = w;
	uext4_readdir(w->fs, dir, 0, walk_fill, e);
	for (unsigned i = 0; !w->found && w->budget > 0 && i < e->nsub; i++) {
		if (pl + strlen(e->names[i]) + 2 >= PATH_MAX)
			continue;
		snprintf(w->path + pl, PATH_MAX - pl, "/%s", e->names[i]);
		walk_dir(w, e->sub[i]);
		if (!w->found)
			w->path[pl] = '\0';
	}
	free(e);
	return w->found;
}

static void path_of(uext4_fs *fs, uint64_t ino, char path[PATH_MAX])
{
	struct path_walk w = { .fs = fs, .target = ino, .budget = PATH_WALK_MAX, .path = path };

	path[0] = '\0';
	if (!walk_dir(&w, UEXT4_ROOT_INO))
		path[0] = '\0';
}

/* The final word on lost write-backs, for the status `uext4 umount` prints:
 * "N write-backs failed, data lost: inode 12 (/a/b): No space left on
 * device, ...".  0 if none. */
static int describe_write_back_failures(struct server *s, char *buf, size_t len)
{
	struct wb_failures *w = &s->wbf;
	char path[PATH_MAX];
	size_t n;

	if (!w->count || !len)
		return 0;
	n = (size_t)snprintf(buf, len, "%llu write-back%s failed, their data is lost:",
			     (unsigned long long)w->count, w->count == 1 ? "" : "s");
	for (unsigned i = 0; i < w->n && n < len; i++) {
		path_of(s->fs, w->ino[i], path);
		n += (size_t)snprintf(buf + n, len - n, "%s inode %llu%s%s%s: %s", i ? "," : "",
				      (unsigned long long)w->ino[i], path[0] ? " (" : "", path,
				      path[0] ? ")" : "", strerror(w->err[i]));
	}
	if (w->count > w->n && n < len)
		snprintf(buf + n, len - n, "%s", w->n == WB_FAILED_NAMED ? ", ..." : "");
	return -EIO;
}

/*
 * A handler about to wait in a page notification (which waits for the
 * kernel's WRITEs of dirty pages, or for READs of pages readers hold
 * locked) takes a place first: at most inval_inline_max of them wait at
 * once, so a thread stays free to serve what they wait for.  False: no
 * place (or no such notifications on this loop); the caller does without.
 */
static bool page_wait_begin(struct server *s)
{
	if (!s->page_notify_ok)
		return false;
	if (atomic_fetch_add(&s->inval_inline, 1) >= s->inval_inline_max) {
		atomic_fetch_sub(&s->inval_inline, 1);
		return false;
	}
	return true;
}

static void page_wait_end(struct server *s)
{
	atomic_fetch_sub(&s->inval_inline, 1);
}

/*
 * Open flags for the library.  O_TRUNC is done apart (truncate_on_open) and
 * O_CREAT/O_EXCL by create.  With the writeback cache the kernel places
 * O_APPEND writes itself and writes pages back at their own offsets, which
 * the library must not move to its own end of file (UEXT4_O_CACHED_OFFSETS;
 * O_APPEND still goes down, for an append-only file's check at open).  (Reads may come on a
 * file opened O_WRONLY, to fill a partly written page: the library allows
 * them.  Writes come only on files opened for writing.)
 */
static int library_open_flags(const struct server *s, int flags)
{
	flags &= ~(O_TRUNC | O_CREAT | O_EXCL);
	if (writeback_on(s))
		flags |= UEXT4_O_CACHED_OFFSETS;
	return flags;
}

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct server *s = srv(req);
	uext4_file *f;
	int ret;

	if (s->read_only && ((fi->flags & O_ACCMODE) != O_RDONLY || (fi->flags & O_TRUNC))) {
		fuse_reply_err(req, EROFS);
		return;
	}
	if (fi->flags & O_TRUNC)
		begin_write(req);
	ret = uext4_open(s->fs, to_ext4(ino), library_open_flags(s, fi->flags), &f);
	if (ret < 0) {
		reply_err(req, ret);
		return;
	}
	if ((fi->flags & O_TRUNC) && (ret = truncate_on_open(req, s, ino)) < 0) {
		uext4_release(f);
		reply_err(req, ret);
		return;
	}
	finish_open(req, s, f, fi, NULL);
}

/*
 * Each worker thread keeps one read buffer and grows it as needed: reads
 * are up to max_read (1 MiB), and a malloc of that size per request is an
 * mmap, page faults and a munmap every time.  The key's destructor frees it
 * when a thread ends (pool workers are cancelled at unmount).
 */
struct read_buf {
	char *mem;
	size_t cap;
};

static pthread_key_t read_buf_key;
static pthread_once_t read_buf_once = PTHREAD_ONCE_INIT;

static void read_buf_free(void *p)
{
	struct read_buf *rb = p;

	free(rb->mem);
	free(rb);
}

static void read_buf_init(void)
{
	pthread_key_create(&read_buf_key, read_buf_free);
}

static char *thread_read_buf(size_t size)
{
	struct read_buf *rb;

	pthread_once(&read_buf_once, read_buf_init);
	rb = pthread_getspecific(read_buf_key);
	if (!rb) {
		rb = calloc(1, sizeof(*rb));
		if (!rb || pthread_setspecific(read_buf_key, rb)) {
			free(rb);
			return NULL;
		}
	}
	if (rb->cap < size) {
		char *mem = realloc(rb->mem, size);

		if (!mem)
			return NULL;
		rb->mem = mem;
		rb->cap = size;
	}
	return rb->mem;
}

static void release_thread_read_buf(void)
{
	struct read_buf *rb;

	pthread_once(&read_buf_once, read_buf_init);
	rb = pthread_getspecific(read_buf_key);
	if (rb) {
		pthread_setspecific(read_buf_key, NULL);
		read_buf_free(rb);
	}
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	uext4_file *f = fh_file(fi);
	char *buf;
	ssize_t n;

	if (off < 0) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	buf = thread_read_buf(size ? size : 1);
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	n = uext4_pread(f, buf, size, (uint64_t)off);
	if (n < 0)
		reply_err(req, n);
	else
		fuse_reply_buf(req, buf, (size_t)n);
}

static void op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct open_file *of = (struct open_file *)(uintptr_t)fi->fh;

	drop_write_mode(srv(req), of);
	uext4_release(of->f);
	free(of);
	fuse_reply_err(req, 0);
}

/* ---------------------------------------------------------- directories */

/*
 * Directories need no open state here (READDIR works on the inode), and a
 * kernel that offers FUSE_NO_OPENDIR_SUPPORT takes the first ENOSYS as "no
 * OPENDIR or RELEASEDIR from now on", opening directories itself with
 * keep_cache and cache_readdir, which is what we would answer.  Those two
 * were 36% of dbench's requests.
 */
static void op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct server *s = srv(req);
	struct uext4_stat u;
	int ret;

	if (atomic_load_explicit(&s->no_opendir, memory_order_relaxed)) {
		fuse_reply_err(req, ENOSYS);
		return;
	}
	ret = uext4_getattr(s->fs, to_ext4(ino), &u);

	if (ret < 0) {
		reply_err(req, ret);
		return;
	}
	if (!S_ISDIR(u.mode)) {
		fuse_reply_err(req, ENOTDIR);
		return;
	}
	fi->fh = 0;
	/* Every change to the directory comes through the kernel, which then
	 * drops the cached listing. */
	fi->cache_readdir = 1;
	fi->keep_cache = 1;
	fuse_reply_open(req, fi);
}

/* State of one READDIR(PLUS) reply being filled by uext4_readdir(). */
struct dirfill {
	fuse_req_t req;
	struct server *s;
	int plus;
	char *buf;
	size_t size, used;
	int err;                /* a getattr failure (plus only) */
	uint64_t *counted;      /* plus: inodes whose lookup count an entry took */
	size_t ncounted, max_counted;
	fuse_ino_t dir;         /* the directory read */
};

static int is_dot_or_dotdot(const char *name, size_t len)
{
	return (len == 1 && name[0] == '.') ||
	       (len == 2 && name[0] == '.' && name[1] == '.');
}

/* Add an entry with attributes; every entry but . and .. counts as a
 * lookup for the kernel, exactly like a LOOKUP reply (reply_entry_or_err),
 * noted in d->counted to give back if the reply does not reach it. */
static int fill_plus(struct dirfill *d, const char *name, size_t len, uint64_t ino,
		     unsigned dtype, off_t next)
{
	struct fuse_entry_param e;
	struct uext4_stat u;
	size_t need = fuse_add_direntry_plus(d->req, NULL, 0, name, NULL, next);
	int ret;

	if (d->used + need > d->size)
		return 1;
	memset(&e, 0, sizeof(e));
	if (is_dot_or_dotdot(name, len)) {
		e.attr.st_ino = ino;
		e.attr.st_mode = dtype << 12;
	} else {
		if (d->ncounted == d->max_counted)
			return 1;       /* cannot happen: sized for the smallest entry */
		ret = uext4_lookup_ref(d->s->fs, ino, &u);
		if (ret < 0) {
			d->err = ret;
			return 1;
		}
		d->counted[d->ncounted++] = ino;
		fill_entry(d->s, &u, &e, d->dir);
	}
	d->used += fuse_add_direntry_plus(d->req, d->buf + d->used, d->size - d->used,
					  name, &e, next);
	return 0;
}

static int fill_one(void *ctx, const char *name, size_t len, uint64_t ino,
		    unsigned dtype, uint64_t next_cookie)
{
	struct dirfill *d = ctx;
	char nm[256];
	struct stat st;
	size_t n;

	if (len == 0 || len >= sizeof(nm))
		return 0;       /* cannot happen on a valid image; skip */
	memcpy(nm, name, len);
	nm[len] = '\0';
	if (d->plus)
		return fill_plus(d, nm, len, ino, dtype, (off_t)next_cookie);
	memset(&st, 0, sizeof(st));
	st.st_ino = ino;
	st.st_mode = dtype << 12;
	n = fuse_add_direntry(d->req, d->buf + d->used, d->size - d->used, nm, &st,
			      (off_t)next_cookie);
	if (d->used + n > d->size)
		return 1;
	d->used += n;
	return 0;
}

static void do_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, int plus)
{
	struct dirfill d = { .req = req, .s = srv(req), .plus = plus, .size = size, .dir = ino };
	int ret;

	d.buf = malloc(size ? size : 1);
	if (plus) {
		/* At most one entry per smallest entry's size. */
		d.max_counted = size / fuse_add_direntry_plus(req, NULL, 0, "x", NULL, 0) + 1;
		d.counted = malloc(d.max_counted * sizeof(*d.counted));
	}
	if (!d.buf || (plus && !d.counted)) {
		free(d.buf);
		free(d.counted);
		fuse_reply_err(req, ENOMEM);
		return;
	}
	ret = uext4_readdir(d.s->fs, to_ext4(ino), (uint64_t)off, fill_one, &d);
	if (ret < 0 && d.used == 0)
		reply_err(req, ret);
	else if (d.err && d.used == 0)
		reply_err(req, d.err);
	else if (fuse_reply_buf(req, d.buf, d.used) != 0)   /* partial is fine: resumes later */
		for (size_t i = 0; i < d.ncounted; i++)
			uext4_forget(d.s->fs, d.counted[i], 1);
	free(d.buf);
	free(d.counted);
}

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	do_readdir(req, ino, size, off, 0);
}

static void op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			   struct fuse_file_info *fi)
{
	do_readdir(req, ino, size, off, 1);
}

static void op_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	fuse_reply_err(req, 0);
}

/* --------------------------------------------------------------- xattrs */

/* size 0 asks for the length; a too-small buffer is ERANGE. */
static void reply_xattr_result(fuse_req_t req, ssize_t n, const char *buf, size_t size)
{
	if (n < 0)
		reply_err(req, n);
	else if (size == 0)
		fuse_reply_xattr(req, (size_t)n);
	else if ((size_t)n > size)
		fuse_reply_err(req, ERANGE);
	else
		fuse_reply_buf(req, buf, (size_t)n);
}

/*
 * Statistics through a virtual xattr of the root (`uext4 stats`): reading
 * user.uext4.stats returns the report as text; suffixes, in any order,
 * ".json" (JSON instead), ".on" / ".off" (switch counting first), ".reset"
 * (zero the counters after the report is made).  The actions happen only
 * on a read with a buffer, not on a size query.  The names shadow real
 * xattrs of those names on the root (uext4 getfattr IMAGE / still shows
 * those); other inodes are not affected, and listxattr lists none of them.
 */
#define STATS_XATTR "user.uext4.stats"
#define STATS_MAX 65536         /* XATTR_SIZE_MAX: the kernel asks no more */

struct stats_req {
	int json, on, off, reset;
};

static bool parse_stats_name(const char *name, struct stats_req *r)
{
	const char *p = name + strlen(STATS_XATTR);

	memset(r, 0, sizeof(*r));
	if (strncmp(name, STATS_XATTR, strlen(STATS_XATTR)) || (*p && *p != '.'))
		return false;
	while (*p == '.') {
		const char *w = ++p;
		size_t n = strcspn(w, ".");

		if (n == 4 && !strncmp(w, "json", 4))
			r->json = 1;
		else if (n == 2 && !strncmp(w, "on", 2))
			r->on = 1;
		else if (n == 3 && !strncmp(w, "off", 3))
			r->off = 1;
		else if (n == 5 && !strncmp(w, "reset", 5))
			r->reset = 1;
		else
			return false;
		p = w + n;
	}
	return !(r->on && r->off);
}

static void stats_switch(struct server *s, int on)
{
	uext4_stats_enable(s->fs, on);
	reqstats_enable(on);
}

/* The library's report and the server's section after it (JSON: inside
 * the library's object, which ends in "}\n"). */
static int render_stats(struct server *s, char *buf, size_t len, int json)
{
	int n = uext4_stats_format(s->fs, buf, len, json), m;

	if (n < 0 || (size_t)n >= len)
		return n < 0 ? n : -ERANGE;
	if (json) {
		if (n < 2 || buf[n - 2] != '}')
			return -EIO;
		n -= 2;         /* reopen the object */
		buf[n++] = ',';
	}
	m = reqstats_format(buf + n, len - (size_t)n, json);
	if (m < 0 || (size_t)(n + m) >= len)
		return -ERANGE;
	n += m;
	/* Counted whether statistics are on or not. */
	if (json && n > 0 && buf[n - 1] == '}')
		m = snprintf(buf + n, len - (size_t)n, ",\"write_back_failures\":%llu",
			     (unsigned long long)write_back_failures(s));
	else
		m = snprintf(buf + n, len - (size_t)n, "\nwrite-back failures %12llu\n",
			     (unsigned long long)write_back_failures(s));
	if (m < 0 || (size_t)(n + m) >= len)
		return -ERANGE;
	n += m;
	if (json) {
		if ((size_t)n + 3 > len)
			return -ERANGE;
		buf[n++] = '}';
		buf[n++] = '\n';
		buf[n] = '\0';
	}
	return n;
}

static void reply_stats(fuse_req_t req, const struct stats_req *r, size_t size)
{
	struct server *s = srv(req);
	char *buf = malloc(STATS_MAX);
	int n;

	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	if (size && (r->on || r->off))
		stats_switch(s, r->on);
	n = render_stats(s, buf, STATS_MAX, r->json);
	if (n >= 0 && size && (size_t)n <= size && r->reset) {
		uext4_stats_reset(s->fs);
		reqstats_reset();
	}
	if (n < 0)
		fuse_reply_err(req, -n);
	else if (!size)
		fuse_reply_xattr(req, (size_t)n);
	else if ((size_t)n > size)
		fuse_reply_err(req, ERANGE);
	else
		fuse_reply_buf(req, buf, (size_t)n);
	free(buf);
}

static void op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	char *buf;
	ssize_t n;
	struct stats_req sr;

	if (ino == FUSE_ROOT_ID && parse_stats_name(name, &sr)) {
		reply_stats(req, &sr, size);
		return;
	}
	buf = size ? malloc(size) : NULL;
	if (size && !buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	n = uext4_getxattr(srv(req)->fs, to_ext4(ino), name, buf, size);
	reply_xattr_result(req, n, buf, size);
	free(buf);
}

static void op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	char *buf = size ? malloc(size) : NULL;
	ssize_t n;

	if (size && !buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	n = uext4_listxattr(srv(req)->fs, to_ext4(ino), buf, size);
	reply_xattr_result(req, n, buf, size);
	free(buf);
}

static void op_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct uext4_statfs u;
	struct statvfs sv;
	int ret = uext4_statfs(srv(req)->fs, &u);

	if (ret < 0) {
		reply_err(req, ret);
		return;
	}
	memset(&sv, 0, sizeof(sv));
	sv.f_bsize = sv.f_frsize = u.block_size;
	sv.f_blocks = u.blocks;
	sv.f_bfree = u.blocks_free;
	sv.f_bavail = u.blocks_avail;
	sv.f_files = u.inodes;
	sv.f_ffree = sv.f_favail = u.inodes_free;
	sv.f_fsid = u.fsid;
	sv.f_namemax = u.name_max;
	fuse_reply_statfs(req, &sv);
}

/* -------------------------------------------------------- modifications */

/*
 * Every request that may create an inode or allocate blocks first tells the
 * library who is asking: new inodes get the caller's fsuid/fsgid (or the
 * group of a setgid parent, which the library handles), and only root may
 * dig into the reserved blocks.  The identity is per thread, so this is
 * right for every loop kind.
 */
static struct server *begin_write(fuse_req_t req)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);

	uext4_set_caller(ctx->uid, ctx->gid);
	return srv(req);
}

/* A request that makes an inode also passes the caller's umask: the kernel
 * leaves it to us (FUSE_CAP_DONT_MASK), and the library applies it unless
 * the parent's default ACL rules.  Were DONT_MASK refused, the kernel has
 * applied it already and applying it again changes nothing. */
static struct server *begin_create(fuse_req_t req)
{
	uext4_set_umask(fuse_req_ctx(req)->umask);
	return begin_write(req);
}

/*
 * Every entry the kernel gets counts one lookup of its inode, which the
 * library holds (uext4_lookup_ref()) until the FORGETs take it back: so
 * an unlinked file stays allocated while the kernel may still send
 * requests for it (with the writeback cache, the SETATTR of its ctime
 * right after the UNLINK; a GETATTR of a removed directory that is still
 * a process's cwd).  The count is taken before the reply (a FORGET
 * may follow at once) and given back if the kernel did not get it.
 */
/* Reply with an entry whose lookup is counted already. */
static void reply_counted_entry(fuse_req_t req, const struct server *s,
				const struct uext4_stat *u, fuse_ino_t parent)
{
	struct fuse_entry_param e;

	fill_entry(s, u, &e, parent);
	if (fuse_reply_entry(req, &e) != 0)
		uext4_forget(s->fs, u->ino, 1);
}

/* The entry a successful MKNOD, MKDIR, SYMLINK or LINK made: counted here
 * (u, the operation's own stat, is what the reply carries). */
static void reply_entry_or_err(fuse_req_t req, const struct server *s, int ret,
			       const struct uext4_stat *u, fuse_ino_t parent)
{
	if (ret >= 0)
		ret = uext4_lookup_ref(s->fs, u->ino, NULL);
	if (ret < 0)
		reply_err(req, ret);
	else
		reply_counted_entry(req, s, u, parent);
}

static void reply_attr_or_err(fuse_req_t req, const struct server *s, int ret,
			      const struct uext4_stat *u)
{
	struct stat st;

	if (ret < 0) {
		reply_err(req, ret);
		return;
	}
	to_stat(s, u, &st);
	fuse_reply_attr(req, &st, s->timeout);
}

/* FUSE setattr bits to the library's. */
static void to_setattr(const struct stat *attr, int to_set, struct uext4_setattr *a)
{
	memset(a, 0, sizeof(*a));
	if (to_set & FUSE_SET_ATTR_MODE) {
		a->valid |= UEXT4_SET_MODE;
		a->mode = attr->st_mode & 07777;
	}
	if (to_set & FUSE_SET_ATTR_UID) {
		a->valid |= UEXT4_SET_UID;
		a->uid = attr->st_uid;
	}
	if (to_set & FUSE_SET_ATTR_GID) {
		a->valid |= UEXT4_SET_GID;
		a->gid = attr->st_gid;
	}
	if (to_set & FUSE_SET_ATTR_SIZE) {
		a->valid |= UEXT4_SET_SIZE;
		a->size = (uint64_t)attr->st_size;
	}
	if (to_set & FUSE_SET_ATTR_ATIME_NOW)
		a->valid |= UEXT4_SET_ATIME_NOW;
	else if (to_set & FUSE_SET_ATTR_ATIME) {
		a->valid |= UEXT4_SET_ATIME;
		a->atime = attr->st_atim;
	}
	if (to_set & FUSE_SET_ATTR_MTIME_NOW)
		a->valid |= UEXT4_SET_MTIME_NOW;
	else if (to_set & FUSE_SET_ATTR_MTIME) {
		a->valid |= UEXT4_SET_MTIME;
		a->mtime = attr->st_mtim;
	}
	if (to_set & FUSE_SET_ATTR_CTIME) {
		a->valid |= UEXT4_SET_CTIME;
		a->ctime = attr->st_ctim;
	}
}

/*
 * With the writeback cache the kernel keeps a regular file's mtime and
 * never sends MTIME_NOW for it: a write's time comes back as MTIME (+CTIME)
 * alone, and touch(1)'s "now" as MTIME with ATIME_NOW.  Only an explicit
 * atime marks times the caller chose.  So those count as "now" for an
 * append-only file (UEXT4_SET_MTIME_LOCAL), as they do on the kernel's ext4.
 */
static void mark_cached_mtime(const struct server *s, int to_set, struct uext4_setattr *a)
{
	bool own_mtime = (to_set & FUSE_SET_ATTR_MTIME) && !(to_set & FUSE_SET_ATTR_MTIME_NOW);
	bool chosen_atime = (to_set & FUSE_SET_ATTR_ATIME) && !(to_set & FUSE_SET_ATTR_ATIME_NOW);

	if (writeback_on(s) && own_mtime && !chosen_atime)
		a->valid |= UEXT4_SET_MTIME_LOCAL;
}

/*
 * The writeback cache's own times (MTIME|CTIME with a file handle: the
 * kernel writing back a dirty inode, fuse_flush_times(); utimensat(2)
 * sends no handle) of a file that became immutable since: they
 * belong to writes made before the flag, which the kernel's ext4 keeps
 * (its times are not checked when the inode is written), so they are not
 * an error; the times on disk stay as the library's last write left them.
 * Asked only after a refusal: no cost on the normal path.
 */
static bool kernel_times_of_immutable(struct server *s, fuse_ino_t ino, int to_set,
				      const struct fuse_file_info *fi)
{
	uint32_t fl;

	return writeback_on(s) && fi && to_set == (FUSE_SET_ATTR_MTIME | FUSE_SET_ATTR_CTIME) &&
	       uext4_get_flags(s->fs, to_ext4(ino), &fl) >= 0 && (fl & FS_IMMUTABLE_FL);
}

static void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
		       struct fuse_file_info *fi)
{
	struct server *s = begin_write(req);
	struct uext4_setattr a;
	struct uext4_stat u;
	bool kill = req_kill_privs;     /* FATTR_KILL_SUIDGID */
	int ret = 0;

	to_setattr(attr, to_set, &a);
	mark_cached_mtime(s, to_set, &a);
	/* A truncate or chown that drops privileges does it in the same call
	 * (one transaction, and the reply carries the new mode). */
	if (kill)
		ret = kill_mode_in(req, s, ino, &a);
	/* ftruncate(fi) changes the same inode: the library works on inodes. */
	if (ret >= 0)
		ret = uext4_setattr(s->fs, to_ext4(ino), &a, &u);
	if (ret == -EPERM && kernel_times_of_immutable(s, ino, to_set, fi))
		ret = uext4_getattr(s->fs, to_ext4(ino), &u);
	if (ret >= 0 && kill)
		ret = kill_capability(s, ino);
	reply_attr_or_err(req, s, ret, &u);
}

static void op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		     dev_t rdev)
{
	struct server *s = begin_create(req);
	struct uext4_stat u;
	int ret;

	if (S_ISDIR(mode))
		ret = uext4_mkdir(s->fs, to_ext4(parent), name, mode, &u);
	else
		ret = uext4_mknod(s->fs, to_ext4(parent), name, mode, (uint64_t)rdev, &u);
	reply_entry_or_err(req, s, ret, &u, parent);
}

static void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	struct server *s = begin_create(req);
	struct uext4_stat u;
	int ret = uext4_mkdir(s->fs, to_ext4(parent), name, S_IFDIR | (mode & 07777), &u);

	reply_entry_or_err(req, s, ret, &u, parent);
}

static void op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
	struct server *s = begin_write(req);
	struct uext4_stat u;
	int ret = uext4_symlink(s->fs, to_ext4(parent), name, link, &u);

	reply_entry_or_err(req, s, ret, &u, parent);
}

static void op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
	struct server *s = begin_write(req);
	struct uext4_stat u;
	int ret = uext4_link(s->fs, to_ext4(ino), to_ext4(newparent), newname, &u);

	reply_entry_or_err(req, s, ret, &u, newparent);
}

static void op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct server *s = begin_write(req);

	fuse_reply_err(req, -uext4_unlink(s->fs, to_ext4(parent), name));
}

static void op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct server *s = begin_write(req);

	fuse_reply_err(req, -uext4_rmdir(s->fs, to_ext4(parent), name));
}

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif
#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1 << 1)
#endif
#ifndef RENAME_WHITEOUT
#define RENAME_WHITEOUT (1 << 2)
#endif

static void op_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
		      fuse_ino_t newparent, const char *newname, unsigned flags)
{
	struct server *s = begin_write(req);
	unsigned uflags = 0;
	int ret;

	if (flags & ~(unsigned)(RENAME_NOREPLACE | RENAME_EXCHANGE | RENAME_WHITEOUT)) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	if (flags & RENAME_NOREPLACE)
		uflags |= UEXT4_RENAME_NOREPLACE;
	if (flags & RENAME_EXCHANGE)
		uflags |= UEXT4_RENAME_EXCHANGE;
	if (flags & RENAME_WHITEOUT)           /* overlayfs's upper layer */
		uflags |= UEXT4_RENAME_WHITEOUT;
	ret = uext4_rename(s->fs, to_ext4(parent), name, to_ext4(newparent), newname, uflags);
	fuse_reply_err(req, ret < 0 ? -ret : 0);
}

/* O_TRUNC arrives with the open (FUSE_CAP_ATOMIC_O_TRUNC): truncate here,
 * updating mtime and ctime like open(2) does. */
static int truncate_on_open(fuse_req_t req, struct server *s, fuse_ino_t ino)
{
	struct uext4_setattr a = { .valid = UEXT4_SET_SIZE | UEXT4_SET_MTIME_NOW, .size = 0 };
	struct uext4_stat u;
	bool kill = req_kill_privs;     /* FUSE_OPEN_KILL_SUIDGID */
	int ret = kill ? kill_mode_in(req, s, ino, &a) : 0;

	if (ret >= 0)
		ret = uext4_setattr(s->fs, to_ext4(ino), &a, &u);
	if (ret >= 0 && kill)
		ret = kill_capability(s, ino);
	/* The kernel refreshes the size it truncated, not the mode. */
	if (ret >= 0 && (a.valid & UEXT4_SET_MODE))
		notify_attr_changed(s, ino);
	return ret;
}

/* Hand the open file to the kernel; if the opener was interrupted meanwhile
 * nobody will release it, so we do.  With e (create), the entry's lookup
 * count, taken by the caller, goes back if the kernel did not get it. */
static void finish_open(fuse_req_t req, struct server *s, uext4_file *f,
			struct fuse_file_info *fi, const struct fuse_entry_param *e)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	struct open_file *of = malloc(sizeof(*of));
	int ret;

	if (!of) {
		uext4_release(f);
		if (e)
			uext4_forget(s->fs, to_ext4(e->ino), 1);
		fuse_reply_err(req, ENOMEM);
		return;
	}
	*of = (struct open_file){ .f = f, .uid = ctx->uid, .gid = ctx->gid };
	fi->fh = (uint64_t)(uintptr_t)of;
	fi->keep_cache = 1;     /* the kernel saw every write: its pages are right */
	fi->noflush = 1;
	choose_write_mode(s, of, fi);
	ret = e ? fuse_reply_create(req, e, fi) : fuse_reply_open(req, fi);
	if (ret == -ENOENT) {
		drop_write_mode(s, of);
		uext4_release(f);
		free(of);
	}
	if (ret != 0 && e)
		uext4_forget(s->fs, to_ext4(e->ino), 1);
}

static void op_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		      struct fuse_file_info *fi)
{
	struct server *s = begin_create(req);
	struct fuse_entry_param e;
	struct uext4_stat u;
	uext4_file *f;
	int ret;

	/* The kernel looked the name up first: O_EXCL on an existing name
	 * never gets here, and a create racing another one fails EEXIST.
	 * The name "/" is O_TMPFILE's (FUSE_TMPFILE, served as a CREATE:
	 * loop.c); the kernel lets LINK name it unless O_EXCL. */
	if (!strcmp(name, "/")) {
		ret = uext4_tmpfile(s->fs, to_ext4(parent), mode,
				    library_open_flags(s, fi->flags) | (fi->flags & O_EXCL), &f, &u);
	} else {
		ret = uext4_create(s->fs, to_ext4(parent), name, S_IFREG | (mode & 07777), &u);
		if (ret >= 0)
			ret = uext4_open(s->fs, u.ino, library_open_flags(s, fi->flags), &f);
	}
	if (ret >= 0 && (ret = uext4_lookup_ref(s->fs, u.ino, NULL)) < 0)
		uext4_release(f);       /* the entry counts a lookup (reply_entry_or_err) */
	if (ret < 0) {
		reply_err(req, ret);
		return;
	}
	fill_entry(s, &u, &e, parent);
	finish_open(req, s, f, fi, &e);
}

/* ------------------------------------------------------------ file data */

/*
 * O_DIRECT writes and cached pages.  The kernel drops the range's cached
 * pages before a direct write and, for a synchronous one, again after it;
 * for an asynchronous one (AIO, io_uring) it does not drop them after
 * (generic_file_direct_write() skips it on -EIOCBQUEUED, and FUSE's AIO
 * completion drops nothing), so a buffered read racing the write can
 * leave the old data cached for good (fstests generic/451).  So the
 * server drops the written range itself once the data is in the library,
 * before the WRITE is answered.  Dropping a page waits for a reader that
 * holds it locked, whose READ needs a free thread: so the WRITE's thread
 * does not wait, it hands the request to the dio_inval thread, which
 * drops the range and then replies (libfuse lets any thread reply, on the
 * classic loops: page_notify_ok).
 */
struct dio_inval {
	fuse_req_t req;         /* NULL: a name to drop (drop_name()), no reply */
	struct server *s;       /* ... on this mount */
	char *name;             /* ... in directory ino */
	fuse_ino_t ino;
	off_t off;
	size_t len;             /* 0: the whole file, then answer the lseek */
	uext4_file *f;          /* lseek: the file, offset and whence asked */
	off_t seek_off;
	int whence;
	struct dio_inval *next;
};

static void reply_lseek(fuse_req_t req, uext4_file *f, off_t off, int whence);

/* The queue of WRITEs to answer; head, tail and started under lock. */
static struct {
	pthread_mutex_t lock;
	pthread_cond_t more;
	struct dio_inval *head, *tail;
	bool started;
	pthread_cond_t dropped;         /* a server's name_drops fell */
} dio_q = { .lock = PTHREAD_MUTEX_INITIALIZER, .more = PTHREAD_COND_INITIALIZER,
	    .dropped = PTHREAD_COND_INITIALIZER };

static void drop_name_now(struct dio_inval *d);

static void *dio_inval_thread(void *arg)
{
	struct dio_inval *d;
	struct server *s;

	(void)arg;

	for (;;) {
		pthread_mutex_lock(&dio_q.lock);
		while (!dio_q.head)
			pthread_cond_wait(&dio_q.more, &dio_q.lock);
		d = dio_q.head;
		dio_q.head = d->next;
		if (!dio_q.head)
			dio_q.tail = NULL;
		pthread_mutex_unlock(&dio_q.lock);
		if (!d->req) {
			drop_name_now(d);
			continue;
		}
		s = srv(d->req);        /* the request's mount: it waits for this reply */
		fuse_lowlevel_notify_inval_inode(s->se, d->ino, d->off, (off_t)d->len);
		if (d->len)
			fuse_reply_write(d->req, d->len);
		else
			reply_lseek(d->req, d->f, d->seek_off, d->whence);
		free(d);
	}
	return NULL;
}

/* Drop the range and answer here, if another thread stays free for what
 * the drop waits for (a thread handoff per 4 KiB O_DIRECT write cost 64%
 * of dd's throughput); false if not. */
static bool dio_inval_inline(struct server *s, fuse_req_t req, fuse_ino_t ino, off_t off,
			     size_t len)
{
	if (!page_wait_begin(s))
		return false;
	fuse_lowlevel_notify_inval_inode(s->se, ino, off, (off_t)len);
	page_wait_end(s);
	fuse_reply_write(req, len);
	return true;
}

/* Queue the answer of a direct WRITE of len bytes at off; false if it
 * cannot be (then the caller answers, without dropping the pages). */
static bool dio_inval_queue_item(struct dio_inval *d);

static bool dio_inval_queue(fuse_req_t req, fuse_ino_t ino, off_t off, size_t len)
{
	struct dio_inval *d = malloc(sizeof(*d));

	if (!d)
		return false;
	*d = (struct dio_inval){ .req = req, .ino = ino, .off = off, .len = len };
	return dio_inval_queue_item(d);
}

/* The same for an lseek whose thread cannot wait (op_lseek). */
static bool seek_queue(fuse_req_t req, fuse_ino_t ino, uext4_file *f, off_t off, int whence)
{
	struct dio_inval *d = malloc(sizeof(*d));

	if (!d)
		return false;
	*d = (struct dio_inval){ .req = req, .ino = ino, .f = f, .seek_off = off, .whence = whence };
	return dio_inval_queue_item(d);
}

/* The thread's part of drop_name(): the kernel takes the directory's lock
 * here, which a request's thread must not wait for. */
static void drop_name_now(struct dio_inval *d)
{
	struct server *s = d->s;

	fuse_lowlevel_notify_inval_entry(s->se, d->ino, d->name, strlen(d->name));
	free(d->name);
	free(d);
	pthread_mutex_lock(&dio_q.lock);
	s->name_drops--;
	pthread_cond_broadcast(&dio_q.dropped);
	pthread_mutex_unlock(&dio_q.lock);
}

/* The session ends only after the drops queued for it (op_destroy). */
static void wait_name_drops(struct server *s)
{
	pthread_mutex_lock(&dio_q.lock);
	while (s->name_drops)
		pthread_cond_wait(&dio_q.dropped, &dio_q.lock);
	pthread_mutex_unlock(&dio_q.lock);
}

/* Queue d for the thread (started at the first); false: d is freed. */
static bool dio_inval_queue_item(struct dio_inval *d)
{
	pthread_t tid;
	bool ok = true;

	pthread_mutex_lock(&dio_q.lock);
	if (!dio_q.started) {
		/* One for the process, whatever the mounts; it never ends. */
		dio_q.started = ok = pthread_create(&tid, NULL, dio_inval_thread, NULL) == 0;
		if (ok)
			pthread_detach(tid);
	}
	if (ok) {
		if (dio_q.tail)
			dio_q.tail->next = d;
		else
			dio_q.head = d;
		dio_q.tail = d;
		if (!d->req)
			d->s->name_drops++;
		pthread_cond_signal(&dio_q.more);
	}
	pthread_mutex_unlock(&dio_q.lock);
	if (!ok)
		free(d);
	return ok;
}

static void op_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size,
		     off_t off, struct fuse_file_info *fi)
{
	const struct open_file *of = (const struct open_file *)(uintptr_t)fi->fh;
	struct server *s = srv(req);
	ssize_t n;

	if (fi->writepage)
		uext4_set_caller(of->uid, of->gid);     /* write-back: no caller */
	else
		begin_write(req);
	if (off < 0) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	if (req_kill_privs && (n = kill_privs_for_write(req, s, ino)) < 0) {
		reply_err(req, n);
		return;
	}
	if (!fi->writepage && !of->cached_writer && writeback_on(s)) {
		/* A file opened direct near full (full_guard): the kernel
		 * drops no file capability for such writes, as it does for
		 * cached ones (file_remove_privs), even root's. */
		n = leave_room_for_cache(s, size);
		if (n >= 0 && !req_kill_privs)
			n = kill_capability(s, ino);
		if (n < 0) {
			reply_err(req, n);
			return;
		}
	}
	n = uext4_pwrite(of->f, buf, size, (uint64_t)off);
	if (fi->writepage && n >= 0 && (size_t)n < size)
		n = short_write_back_err(of->f);
	if (fi->writepage && n < 0)     /* lost */
		record_write_back_failure(s, ino, n);
	else if (fi->writepage)
		full_guard_written_back(s, ino);
	if (n < 0)
		reply_err(req, n);
	else if (!(fi->flags & O_DIRECT) || fi->writepage || n == 0 || !srv(req)->page_notify_ok ||
		 (!dio_inval_inline(srv(req), req, ino, off, (size_t)n) &&
		  !dio_inval_queue(req, ino, off, (size_t)n)))
		fuse_reply_write(req, (size_t)n);
}

/*
 * copy_file_range(2).  Without it the kernel falls back to copying through
 * the page cache, which with the writeback cache takes data for a file
 * that became immutable while open, and fails only at write-back (fstests
 * generic/553; ext4 refuses at once).  Here the copy is a read and a write
 * of the library, which checks the destination as for any WRITE.  The
 * kernel wrote both ranges' dirty pages back before asking, and drops the
 * destination's cached pages after.  At most COPY_MAX a request: a short
 * copy is allowed, the caller goes on.
 */
#define COPY_MAX (64u << 20)

static void op_copy_file_range(fuse_req_t req, fuse_ino_t ino_in, off_t off_in,
			       struct fuse_file_info *fi_in, fuse_ino_t ino_out, off_t off_out,
			       struct fuse_file_info *fi_out, size_t len, int flags)
{
	size_t done = 0, chunk;
	ssize_t n = 0, w;
	char *buf;

	begin_write(req);
	if (flags || off_in < 0 || off_out < 0) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	if (len > COPY_MAX)
		len = COPY_MAX;
	chunk = len < MAX_IO ? len : MAX_IO;
	if (!(buf = thread_read_buf(chunk ? chunk : 1))) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	while (done < len) {
		n = uext4_pread(fh_file(fi_in), buf, len - done < chunk ? len - done : chunk,
				(uint64_t)off_in + done);
		if (n <= 0)
			break;
		w = uext4_pwrite(fh_file(fi_out), buf, (size_t)n, (uint64_t)off_out + done);
		if (w < 0) {
			n = w;
			break;
		}
		done += (size_t)w;
		if (w < n)
			break;
	}
	if (n < 0 && done == 0)
		reply_err(req, n);
	else
		fuse_reply_write(req, done);
}

/*
 * Room for a fallocate of len bytes (full_guard): it may not take the
 * space that pages cached writers hold dirty need.  When the only cached
 * writer is the caller's own handle (fallocate(1), xfs_io: open, then
 * fallocate most of the free space), its pages are written back first,
 * as op_lseek does, and then none need room: the fallocate may take it
 * all, as on the kernel's ext4.  After any fallocate on a cached
 * handle, near full, its next write(2) asks first (full_guard_getattr).
 * 0 or -ENOSPC.
 */
static int fallocate_room(struct server *s, fuse_ino_t ino, const struct fuse_file_info *fi,
			  size_t len)
{
	const struct open_file *of = (const struct open_file *)(uintptr_t)fi->fh;

	if (leave_room_for_cache(s, len) == 0)
		return 0;
	if (!of->cached_writer ||
	    atomic_load_explicit(&s->full.cached_writers, memory_order_relaxed) != 1 ||
	    avail_bytes(s) < len || !page_wait_begin(s))
		return -ENOSPC;
	fuse_lowlevel_notify_inval_inode(s->se, ino, 0, 0);
	page_wait_end(s);
	return 0;
}

static void op_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t len,
			 struct fuse_file_info *fi)
{
	struct server *s = begin_write(req);
	int ret;

	if (off < 0 || len <= 0) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	/* Space it takes is space cached pages may need (full_guard). */
	if (!(mode & FALLOC_FL_PUNCH_HOLE) && writeback_on(s) &&
	    fallocate_room(s, ino, fi, (size_t)len) < 0) {
		fuse_reply_err(req, ENOSPC);
		return;
	}
	/* ext4_fallocate's file_modified(): a caller without CAP_FSETID
	 * (root stands for it) loses setuid/setgid as on a write.  FALLOCATE
	 * carries no kill flag (FUSE_HANDLE_KILLPRIV_V2): decided here. */
	if (fuse_req_ctx(req)->uid != 0 && (ret = kill_privs_for_write(req, srv(req), ino)) < 0) {
		reply_err(req, ret);
		return;
	}
	ret = uext4_fallocate(fh_file(fi), mode, (uint64_t)off,
			      (uint64_t)len);
	if (ret >= 0 && ((const struct open_file *)(uintptr_t)fi->fh)->cached_writer)
		full_guard_written_back(s, ino);
	fuse_reply_err(req, ret < 0 ? -ret : 0);
}

static void op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	int ret = uext4_fsync(fh_file(fi), datasync);

	fuse_reply_err(req, ret < 0 ? -ret : 0);
}

/* A directory's entries live in metadata blocks: make everything durable. */
static void op_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync,
			struct fuse_file_info *fi)
{
	int ret = uext4_sync(srv(req)->fs);

	fuse_reply_err(req, ret < 0 ? -ret : 0);
}

/*
 * SEEK_DATA / SEEK_HOLE (the kernel does the other whences itself).  With
 * the writeback cache the kernel asks without writing its dirty pages
 * back first (fs/fuse/file.c fuse_lseek()), so data still in them would
 * look like a hole, or lie past the end of file, as the library sees it
 * (fstests generic/436: 8 KiB written, then SEEK_DATA from 0 gave ENXIO).
 * The kernel's ext4 counts dirty pages as data.  So the inode's pages are
 * written back first: invalidating them makes the kernel write each dirty
 * page back (launder) and wait for it, from within the notification; their
 * WRITEs are served by the other threads, so only where there are some
 * and one stays free (page_wait_begin(); without a place the request
 * goes to the dio_inval thread, which answers it).  The clean pages go
 * too: read again if needed.
 */
static void op_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence,
		     struct fuse_file_info *fi)
{
	struct server *s = srv(req);

	if (writeback_on(s) && s->page_notify_ok) {
		if (!page_wait_begin(s)) {
			if (seek_queue(req, ino, fh_file(fi), off, whence))
				return;         /* the dio_inval thread answers */
		} else {
			fuse_lowlevel_notify_inval_inode(s->se, ino, 0, 0);
			page_wait_end(s);
		}
	}
	reply_lseek(req, fh_file(fi), off, whence);
}

static void reply_lseek(fuse_req_t req, uext4_file *f, off_t off, int whence)
{
	int64_t ret = uext4_lseek(f, off, whence);

	if (ret < 0)
		reply_err(req, ret);
	else
		fuse_reply_lseek(req, (off_t)ret);
}

/*
 * The server changed attributes of ino on its own: make the kernel fetch
 * them again.  Attributes only (offset -1): that takes no lock in the
 * kernel, so it is safe inside the request that caused it.
 */
static void notify_attr_changed(const struct server *s, fuse_ino_t ino)
{
	if (s->se)
		fuse_lowlevel_notify_inval_inode(s->se, ino, -1, 0);
}

/*
 * After an access ACL set the mode: a caller outside the file's group and
 * without CAP_FSETID (root stands for it) loses setgid, as the kernel's
 * posix_acl_update_mode() (fstests generic/375).  libfuse 3.14 cannot
 * take the kernel's own flag for it (FUSE_SETXATTR_ACL_KILL_SGID needs
 * FUSE_SETXATTR_EXT's longer request), so the server decides.
 */
static int acl_drop_sgid(fuse_req_t req, struct server *s, fuse_ino_t ino)
{
	struct uext4_setattr a = { .valid = UEXT4_SET_MODE };
	struct uext4_stat u;
	int ret = uext4_getattr(s->fs, to_ext4(ino), &u);

	if (ret < 0 || !(u.mode & S_ISGID) || fuse_req_ctx(req)->uid == 0 ||
	    caller_in_group(req, u.gid))
		return ret < 0 ? ret : 0;
	a.mode = u.mode & 07777 & ~(uint32_t)S_ISGID;
	return uext4_setattr(s->fs, to_ext4(ino), &a, &u);
}

static void op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
			const char *value, size_t size, int flags)
{
	struct server *s = begin_write(req);
	int ret = uext4_setxattr(s->fs, to_ext4(ino), name, value, size, flags);

	/* An access ACL sets the permission bits (as chmod would): the kernel
	 * has the old mode cached. */
	if (ret >= 0 && !strcmp(name, "system.posix_acl_access")) {
		ret = acl_drop_sgid(req, s, ino);
		notify_attr_changed(s, ino);
	}
	fuse_reply_err(req, ret < 0 ? -ret : 0);
}

static void op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	struct server *s = begin_write(req);
	int ret = uext4_removexattr(s->fs, to_ext4(ino), name);

	fuse_reply_err(req, ret < 0 ? -ret : 0);
}

/*
 * lsattr/chattr.  The kernel's FUSE (fs/fuse/ioctl.c fuse_fileattr_get/set)
 * turns FS_IOC_GETFLAGS/SETFLAGS on a file or directory into an OPEN, an
 * IOCTL with an int (4 bytes, whatever the command's size says) and a
 * RELEASE; before a SETFLAGS (vfs_fileattr_set) it reads the old ones with
 * FS_IOC_FSGETXATTR, and FS_IOC_FSSETXATTR comes as it is.  The VFS checks
 * owner and CAP_LINUX_IMMUTABLE first; the library checks again (for every
 * caller) and applies ext4's rules.
 */
#define XFLAGS_COMMON (FS_XFLAG_IMMUTABLE | FS_XFLAG_APPEND | FS_XFLAG_SYNC | \
		       FS_XFLAG_NOATIME | FS_XFLAG_NODUMP | FS_XFLAG_DAX | FS_XFLAG_PROJINHERIT)

/* The flags fileattr_fill_flags() maps to xflags, both ways. */
static const struct { uint32_t fl, xfl; } flag_xflag[] = {
	{FS_IMMUTABLE_FL, FS_XFLAG_IMMUTABLE}, {FS_APPEND_FL, FS_XFLAG_APPEND},
	{FS_SYNC_FL, FS_XFLAG_SYNC}, {FS_NOATIME_FL, FS_XFLAG_NOATIME},
	{FS_NODUMP_FL, FS_XFLAG_NODUMP}, {FS_DAX_FL, FS_XFLAG_DAX},
	{FS_PROJINHERIT_FL, FS_XFLAG_PROJINHERIT},
};

static uint32_t flags_to_xflags(uint32_t fl)
{
	uint32_t x = 0;

	for (size_t i = 0; i < sizeof(flag_xflag) / sizeof(flag_xflag[0]); i++)
		if (fl & flag_xflag[i].fl)
			x |= flag_xflag[i].xfl;
	return x;
}

/* FSSETXATTR: the common flags from xflags, the others as they are. */
static uint32_t xflags_to_flags(uint32_t x, uint32_t old)
{
	for (size_t i = 0; i < sizeof(flag_xflag) / sizeof(flag_xflag[0]); i++)
		old = (x & flag_xflag[i].xfl) ? old | flag_xflag[i].fl : old & ~flag_xflag[i].fl;
	return old;
}

/*
 * With the writeback cache, pages written before a file became immutable
 * or append-only may still be dirty in the kernel: written back after the
 * flag, they would be refused and lost (the kernel's ext4 keeps them).  So
 * they are written back first (op_lseek says how; pool and mt loops only).
 */
static void write_back_before_flags(struct server *s, fuse_ino_t ino, uint32_t flags)
{
	const uint32_t locking = FS_IMMUTABLE_FL | FS_APPEND_FL;
	uint32_t old;

	if (!(flags & locking) || !writeback_on(s))
		return;
	if (uext4_get_flags(s->fs, to_ext4(ino), &old) < 0 || !(flags & locking & ~old))
		return;
	if (page_wait_begin(s)) {
		fuse_lowlevel_notify_inval_inode(s->se, ino, 0, 0);
		page_wait_end(s);
	}
}

/*
 * The name under our mount of /proc link target path, for drop_name(): its
 * directory and last component, if that name is inode ino now.
 */
static bool name_in_mount(const struct server *s, const char *path, fuse_ino_t ino,
			  uint64_t *dir, char name[NAME_MAX + 1])
{
	size_t ml = strlen(s->mnt);
	char rel[PATH_MAX];
	struct uext4_stat st;
	char *slash;

	if (strncmp(path, s->mnt, ml) || path[ml] != '/' || strlen(path + ml) >= sizeof(rel))
		return false;
	strcpy(rel, path + ml);
	slash = strrchr(rel, '/');
	if (strlen(slash + 1) > NAME_MAX)
		return false;
	strcpy(name, slash + 1);
	*slash = '\0';
	return uext4_resolve(s->fs, rel[0] ? rel : "/", 0, dir) == 0 &&
	       uext4_lookup(s->fs, *dir, name, &st) == 0 && st.ino == to_ext4(ino);
}

/* A name of ino among the open files of process pid (the caller). */
static bool caller_name_of(const struct server *s, pid_t pid, fuse_ino_t ino, uint64_t *dir,
			   char name[NAME_MAX + 1])
{
	char fds[64], link[PATH_MAX + 64], target[PATH_MAX];
	struct dirent *e;
	bool found = false;
	DIR *d;

	snprintf(fds, sizeof(fds), "/proc/%d/fd", (int)pid);
	if (!(d = opendir(fds)))
		return false;
	while (!found && (e = readdir(d))) {
		ssize_t n;

		snprintf(link, sizeof(link), "%s/%s", fds, e->d_name);
		n = readlink(link, target, sizeof(target) - 1);
		if (n <= 0)
			continue;
		target[n] = '\0';
		found = name_in_mount(s, target, ino, dir, name);
	}
	closedir(d);
	return found;
}

/*
 * Under the writeback cache the kernel owns a regular file's ctime and
 * ignores the server's (fs/fuse fuse_get_cache_mask()), so the ctime a
 * SETFLAGS set would show only once the inode left the kernel's cache
 * (fstests generic/277).  So make it leave: find the caller's name for the
 * file among its open files (chattr holds it open) and have the kernel
 * drop that name.  When the caller closes the file the inode goes with it,
 * and the next stat looks it up afresh.  The dio_inval thread sends the
 * notification, not the request's thread: the kernel takes the directory's
 * lock for it, and an unlink holding that lock may wait for this file's,
 * which the caller holds until we answer.  No name found (another mount
 * namespace, say): the old ctime shows until the kernel drops the inode,
 * as before.
 */
static void drop_name(fuse_req_t req, struct server *s, fuse_ino_t ino)
{
	struct dio_inval *d;
	struct uext4_stat st;
	char name[NAME_MAX + 1];
	uint64_t dir;

	if (!writeback_on(s) || !s->mnt[0] || uext4_getattr(s->fs, to_ext4(ino), &st) < 0 ||
	    !S_ISREG(st.mode) || !caller_name_of(s, fuse_req_ctx(req)->pid, ino, &dir, name))
		return;
	if (!(d = calloc(1, sizeof(*d))) || !(d->name = strdup(name))) {
		free(d);
		return;
	}
	d->s = s;
	d->ino = to_fuse(dir);
	dio_inval_queue_item(d);
}

/* SETFLAGS (fa NULL: the flags alone) or FSSETXATTR (flags and project id). */
static int ioctl_setflags(fuse_req_t req, fuse_ino_t ino, uint32_t flags,
			  const struct uext4_fileattr *fa)
{
	struct server *s = begin_write(req);
	int ret;

	write_back_before_flags(s, ino, flags);
	ret = fa ? uext4_set_fileattr(s->fs, to_ext4(ino), fa)
		 : uext4_set_flags(s->fs, to_ext4(ino), flags);

	if (ret >= 0) {
		notify_attr_changed(s, ino);    /* ctime */
		drop_name(req, s, ino);
	}
	return ret;
}

/*
 * fs-verity through the mount.  The kernel's FUSE (fs/fuse/ioctl.c,
 * fuse_setup_enable_verity(), fuse_setup_measure_verity(), since 6.9)
 * copies in, for FS_IOC_ENABLE_VERITY, the argument, then the salt, then
 * the signature; for FS_IOC_MEASURE_VERITY the digest header and as many
 * bytes as its digest_size, and takes that much back.
 * FS_IOC_READ_VERITY_METADATA gets no such help: only its argument
 * struct crosses, not the buffer it points to, so it cannot work here.
 */
static bool memchr_inv_zero(const void *p, size_t n)
{
	const uint8_t *b = p;

	for (size_t i = 0; i < n; i++)
		if (b[i])
			return true;
	return false;
}

static void ioctl_enable_verity(fuse_req_t req, fuse_ino_t ino, const void *in_buf,
				size_t in_bufsz)
{
	struct fsverity_enable_arg a;
	struct uext4_verity_enable e = {0};
	const uint8_t *p = (const uint8_t *)in_buf + sizeof(a);
	int ret;

	if (in_bufsz < sizeof(a)) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	memcpy(&a, in_buf, sizeof(a));
	if (a.version != 1 || a.__reserved1 ||
	    memchr_inv_zero(a.__reserved2, sizeof(a.__reserved2))) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	if ((uint64_t)a.salt_size + a.sig_size > in_bufsz - sizeof(a)) {
		fuse_reply_err(req, EFAULT);
		return;
	}
	e.hash_algorithm = a.hash_algorithm;
	e.block_size = a.block_size;
	e.salt = p;
	e.salt_size = a.salt_size;
	e.sig = p + a.salt_size;
	e.sig_size = a.sig_size;
	if (!a.block_size) {            /* the kernel takes no 0 (not a power of 2) */
		fuse_reply_err(req, EINVAL);
		return;
	}
	ret = uext4_verity_enable(srv(req)->fs, to_ext4(ino), &e);
	fuse_reply_ioctl(req, ret < 0 ? ret : 0, NULL, 0);
}

static void ioctl_measure_verity(fuse_req_t req, fuse_ino_t ino, const void *in_buf,
				 size_t in_bufsz, size_t out_bufsz)
{
	struct fsverity_digest hdr;
	struct uext4_verity_digest d;
	uint8_t out[sizeof(hdr) + sizeof(d.digest)];
	int ret;

	if (in_bufsz < sizeof(hdr)) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	memcpy(&hdr, in_buf, sizeof(hdr));
	if ((ret = uext4_verity_measure(srv(req)->fs, to_ext4(ino), &d)) < 0) {
		reply_err(req, ret);
		return;
	}
	if (hdr.digest_size < d.size || out_bufsz < sizeof(hdr) + d.size) {
		fuse_reply_err(req, EOVERFLOW);   /* as fsverity_ioctl_measure() */
		return;
	}
	hdr.digest_algorithm = d.algorithm;
	hdr.digest_size = d.size;
	memcpy(out, &hdr, sizeof(hdr));
	memcpy(out + sizeof(hdr), d.digest, d.size);
	fuse_reply_ioctl(req, 0, out, sizeof(hdr) + d.size);
}

static void op_ioctl(fuse_req_t req, fuse_ino_t ino, unsigned cmd, void *arg,
		     struct fuse_file_info *fi, unsigned flags, const void *in_buf,
		     size_t in_bufsz, size_t out_bufsz)
{
	struct server *s = srv(req);
	struct uext4_fileattr fa;
	uint32_t fl;
	struct fsxattr fx;
	int ret;

	if (flags & FUSE_IOCTL_COMPAT) {
		fuse_reply_err(req, ENOSYS);
		return;
	}
	switch (cmd) {
	case FS_IOC_GETFLAGS:
	case FS_IOC32_GETFLAGS:
	case FS_IOC_FSGETXATTR:
		if (out_bufsz < (cmd == FS_IOC_FSGETXATTR ? sizeof(fx) : sizeof(int)))
			break;
		if ((ret = uext4_get_fileattr(s->fs, to_ext4(ino), &fa)) < 0) {
			reply_err(req, ret);
			return;
		}
		if (cmd != FS_IOC_FSGETXATTR) {
			int v = (int)fa.flags;

			fuse_reply_ioctl(req, 0, &v, sizeof(v));
			return;
		}
		memset(&fx, 0, sizeof(fx));
		fx.fsx_xflags = flags_to_xflags(fa.flags);
		fx.fsx_projid = fa.projid;    /* 0 without the project feature */
		fuse_reply_ioctl(req, 0, &fx, sizeof(fx));
		return;
	case FS_IOC_SETFLAGS:
	case FS_IOC32_SETFLAGS:
		if (in_bufsz < sizeof(int))
			break;
		memcpy(&fl, in_buf, sizeof(fl));
		ret = ioctl_setflags(req, ino, fl, NULL);
		fuse_reply_ioctl(req, ret < 0 ? ret : 0, NULL, 0);
		if (ret < 0 && -ret == EUCLEAN)
			log_corruption(s);
		return;
	case FS_IOC_FSSETXATTR:
		if (in_bufsz < sizeof(fx))
			break;
		memcpy(&fx, in_buf, sizeof(fx));
		/* The library refuses a project id the file system cannot hold
		 * (EOPNOTSUPP without the project feature, as ext4). */
		if ((ret = uext4_get_flags(s->fs, to_ext4(ino), &fl)) >= 0) {
			fa.flags = xflags_to_flags(fx.fsx_xflags, fl);
			fa.projid = fx.fsx_projid;
			ret = ioctl_setflags(req, ino, fa.flags, &fa);
		}
		fuse_reply_ioctl(req, ret < 0 ? ret : 0, NULL, 0);
		return;
	case FS_IOC_ENABLE_VERITY:
		ioctl_enable_verity(req, ino, in_buf, in_bufsz);
		return;
	case FS_IOC_MEASURE_VERITY:
		ioctl_measure_verity(req, ino, in_buf, in_bufsz, out_bufsz);
		return;
	case FS_IOC_READ_VERITY_METADATA:
		fuse_reply_err(req, EOPNOTSUPP);  /* see ioctl_enable_verity() */
		return;
	default:
		fuse_reply_err(req, ENOTTY);
		return;
	}
	fuse_reply_err(req, EINVAL);    /* a too small argument */
}

/*
 * The session ends (unmount, or a signal): write everything back now, while
 * the image is still ours, and say so if it fails.  The caller of
 * uext4_fuse_run then unmounts the library fs, which checks again.
 */
static void op_destroy(void *userdata)
{
	struct server *s = userdata;
	int ret;

	wait_name_drops(s);
	if (s->read_only)
		return;
	if (write_back_failures(s))
		s->write_back_err = -EIO;       /* described by uext4_fuse_run */
	ret = uext4_sync(s->fs);
	if (ret < 0) {
		const char *msg = *uext4_last_error() ? uext4_last_error() : strerror(-ret);

		s->write_back_err = ret;
		fprintf(stderr, "uext4 mount: writing back %s failed: %s\n", s->fsname, msg);
		/* A daemon's stderr is /dev/null: leave a trace somewhere. */
		syslog(LOG_ERR, "uext4: writing back %s failed: %s", s->fsname, msg);
	}
}

static const struct fuse_lowlevel_ops uext4_ops = {
	.init = op_init,
	.destroy = op_destroy,
	.lookup = op_lookup,
	.forget = op_forget,
	.forget_multi = op_forget_multi,
	.getattr = op_getattr,
	.readlink = op_readlink,
	.open = op_open,
	.read = op_read,
	.release = op_release,
	.opendir = op_opendir,
	.readdir = op_readdir,
	.readdirplus = op_readdirplus,
	.releasedir = op_releasedir,
	.getxattr = op_getxattr,
	.listxattr = op_listxattr,
	.statfs = op_statfs,
	.setattr = op_setattr,
	.mknod = op_mknod,
	.mkdir = op_mkdir,
	.unlink = op_unlink,
	.rmdir = op_rmdir,
	.symlink = op_symlink,
	.rename = op_rename,
	.link = op_link,
	.write = op_write,
	.create = op_create,
	.setxattr = op_setxattr,
	.removexattr = op_removexattr,
	.fallocate = op_fallocate,
	.copy_file_range = op_copy_file_range,
	.ioctl = op_ioctl,
	/* No .flush: nothing is buffered per open file, and the ENOSYS of the
	 * first FLUSH spares a round trip per close(2) from then on (with the
	 * writeback cache the kernel sends one even with noflush). */
	.lseek = op_lseek,
	.fsync = op_fsync,
	.fsyncdir = op_fsyncdir,
};

/* -------------------------------------------------------------- options */

/* UEXT4_FUSE_LOOP=st|mt|pool|uring|auto changes the default loop (-o loop=
 * still wins), so the FUSE tests can run over another transport as they
 * are (tests/fuse_uring.sh). */
static void loop_from_env(struct uext4_fuse_opts *o)
{
	const char *env = getenv("UEXT4_FUSE_LOOP");
	enum uext4_loop_kind k;

	if (!env || !*env)
		return;
	if (uext4_loop_parse(env, &k))
		fprintf(stderr, "uext4 mount: ignoring UEXT4_FUSE_LOOP=%s (st, mt, pool, uring or auto)\n", env);
	else
		o->loop = (enum uext4_fuse_loop)k;
}

void uext4_fuse_opts_init(struct uext4_fuse_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->timeout = -1;
	/* io_uring where the kernel has it on, else the classic loop that
	 * measured best (fuse/loop.c: uext4_loop_classic()). */
	o->loop = UEXT4_FUSE_LOOP_AUTO;
	loop_from_env(o);
	o->max_idle = -1;
	o->ready_fd = -1;
	/* On (read-write mounts): the kernel writes a file's ctime back right
	 * after its unlink, which works since the library holds every inode
	 * the kernel has looked up (reply_entry_or_err()). */
	o->writeback = 1;
}

static int parse_uint(const char *s, unsigned long max, unsigned long *out)
{
	char *end;

	errno = 0;
	*out = strtoul(s, &end, 10);
	return (*s && !*end && !errno && *out <= max && s[0] != '-') ? 0 : -1;
}

static int append_extra(struct uext4_fuse_opts *o, const char *opt)
{
	size_t have = strlen(o->extra), add = strlen(opt);

	if (have + add + 2 > sizeof(o->extra))
		return -1;
	if (have)
		o->extra[have++] = ',';
	memcpy(o->extra + have, opt, add + 1);
	return 0;
}

int uext4_fuse_parse_opt(struct uext4_fuse_opts *o, const char *opt, char *err, size_t errlen)
{
	unsigned long v;
	enum uext4_loop_kind k;

	if (!strcmp(opt, "ro"))
		o->read_only = 1;
	else if (!strcmp(opt, "rw"))
		o->read_only = 0;
	else if (!strcmp(opt, "allow_other"))
		o->allow_other = 1;
	else if (!strcmp(opt, "debug"))
		o->debug = 1;
	else if (!strcmp(opt, "clone_fd"))
		o->clone_fd = 1;
	else if (!strcmp(opt, "writeback") || !strcmp(opt, "writeback=1"))
		o->writeback = 1;
	else if (!strcmp(opt, "nowriteback") || !strcmp(opt, "writeback=0"))
		o->writeback = 0;
	else if (!strcmp(opt, "stats"))
		o->stats = 1;
	else if (!strcmp(opt, "discard"))
		o->discard = 1;
	else if (!strcmp(opt, "nodiscard"))
		o->discard = 0;
	else if (!strncmp(opt, "loop=", 5)) {
		if (uext4_loop_parse(opt + 5, &k)) {
			snprintf(err, errlen, "bad loop '%s' (st, mt, pool, uring or auto)", opt + 5);
			return -EINVAL;
		}
		o->loop = (enum uext4_fuse_loop)k;
	} else if (!strncmp(opt, "commit=", 7)) {
		if (parse_uint(opt + 7, 86400, &v) || v == 0) {
			snprintf(err, errlen, "bad commit interval '%s' (1..86400 seconds)", opt + 7);
			return -EINVAL;
		}
		o->commit_secs = (unsigned)v;
	} else if (!strncmp(opt, "max_open_files=", 15)) {
		if (parse_uint(opt + 15, 1u << 30, &v) || v == 0) {
			snprintf(err, errlen, "bad max_open_files '%s' (1..2^30)", opt + 15);
			return -EINVAL;
		}
		o->max_open_files = (unsigned)v;
	} else if (!strncmp(opt, "inode_cache=", 12)) {
		if (parse_uint(opt + 12, 1u << 30, &v) || v == 0) {
			snprintf(err, errlen, "bad inode_cache '%s' (1..2^30 inodes)", opt + 12);
			return -EINVAL;
		}
		o->inode_cache = (unsigned)v;
	} else if (!strncmp(opt, "errors=", 7)) {
		static const char *const names[] = { [UEXT4_ERRORS_CONTINUE] = "continue",
						     [UEXT4_ERRORS_RO] = "remount-ro",
						     [UEXT4_ERRORS_PANIC] = "panic" };

		o->errors = 0;
		for (int i = UEXT4_ERRORS_CONTINUE; i <= UEXT4_ERRORS_PANIC; i++)
			if (!strcmp(opt + 7, names[i]))
				o->errors = i;
		if (!o->errors) {
			snprintf(err, errlen, "bad errors= '%s' (continue, remount-ro or panic)",
				 opt + 7);
			return -EINVAL;
		}
	} else if (!strncmp(opt, "dirty_limit=", 12)) {
		if (parse_uint(opt + 12, 1u << 20, &v) || v == 0) {
			snprintf(err, errlen, "bad dirty_limit '%s' (1..2^20 MiB)", opt + 12);
			return -EINVAL;
		}
		o->dirty_limit_mib = (unsigned)v;
	} else if (!strncmp(opt, "threads=", 8)) {
		if (parse_uint(opt + 8, 1024, &v) || v == 0) {
			snprintf(err, errlen, "bad threads '%s' (1..1024)", opt + 8);
			return -EINVAL;
		}
		o->threads = (unsigned)v;
	} else if (!strncmp(opt, "max_idle=", 9)) {
		if (parse_uint(opt + 9, 1024, &v)) {
			snprintf(err, errlen, "bad max_idle '%s'", opt + 9);
			return -EINVAL;
		}
		o->max_idle = (int)v;
	} else if (!strncmp(opt, "timeout=", 8)) {
		char *end;
		o->timeout = strtod(opt + 8, &end);
		if (end == opt + 8 || *end || o->timeout < 0) {
			snprintf(err, errlen, "bad timeout '%s'", opt + 8);
			return -EINVAL;
		}
	} else if (!*opt) {
		return 0;
	} else if (append_extra(o, opt)) {
		snprintf(err, errlen, "too many mount options");
		return -EINVAL;
	}
	return 0;
}

/* fuse's option parser treats ',' and '\' specially: escape them. */
static void escape_opt(const char *in, char *out, size_t outlen)
{
	size_t j = 0;

	for (; *in && j + 3 < outlen; in++) {
		if (*in == ',' || *in == '\\')
			out[j++] = '\\';
		out[j++] = *in;
	}
	out[j] = '\0';
}

/* Does the kernel check permissions (default_permissions, and with it
 * POSIX ACLs)?  Wherever they can matter: see the top of this file. */
static bool kernel_checks(const struct uext4_fuse_opts *o)
{
	return o->allow_other || geteuid() != 0 || strstr(o->extra, "default_permissions");
}

static int build_mount_opts(const struct uext4_fuse_opts *o, char *buf, size_t len)
{
	char fsname[1100];
	int n;

	escape_opt(o->fsname ? o->fsname : "uext4", fsname, sizeof(fsname));
	n = snprintf(buf, len, "fsname=%s,subtype=uext4%s%s%s%s%s", fsname,
		     kernel_checks(o) ? ",default_permissions" : "",
		     o->read_only ? ",ro" : "", o->allow_other ? ",allow_other" : "",
		     o->extra[0] ? "," : "", o->extra);
	return (n < 0 || (size_t)n >= len) ? -1 : 0;
}

/* ---------------------------------------------------------- daemon mode */

int uext4_fuse_daemonize(void)
{
	int p[2], status;
	pid_t pid;
	char c;
	ssize_t n;

	if (pipe(p))
		return -1;
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		close(p[0]);
		close(p[1]);
		return -1;
	}
	if (pid == 0) {
		close(p[0]);
		return p[1];
	}
	close(p[1]);
	do
		n = read(p[0], &c, 1);
	while (n < 0 && errno == EINTR);
	if (n == 1)
		_exit(0);               /* mounted; the child serves it */
	/* The child died before the mount was ready; it printed why. */
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (WIFEXITED(status) && WEXITSTATUS(status))
		_exit(WEXITSTATUS(status));
	_exit(1);
}

/* The mount is live: detach from the terminal and release the parent. */
static void signal_ready(int fd)
{
	int null = open("/dev/null", O_RDWR);
	char c = 0;

	setsid();
	if (chdir("/")) {
		/* "/" always exists; nothing sensible to do otherwise */
	}
	if (null >= 0) {
		dup2(null, 0);
		dup2(null, 1);
		dup2(null, 2);
		if (null > 2)
			close(null);
	}
	while (write(fd, &c, 1) < 0 && errno == EINTR)
		;
	close(fd);
}

/* ----------------------------------------------------------------- run */

static void ready_cb(void *arg)
{
	signal_ready(*(const int *)arg);
}

/*
 * Stopping on SIGTERM/SIGINT/SIGHUP.  With the writeback cache the kernel
 * may hold dirty pages of files that are still open: ending the session at
 * once would lose them (an unmount writes them back first; a signal does
 * not).  So the handler only wakes the stopper thread, which syncfs()es the
 * mount and fsyncs its open files (fsync_open_files) while the loop keeps
 * serving the WRITEs that brings, then ends the
 * session and interrupts the loop's thread with the same signal (the loops
 * stop when a signal interrupts them and the session has exited).  A second
 * signal ends the session at once.  One mount per process at a time: the
 * handler's state is static.  lock orders the stopper's last steps against
 * serve()'s return (done), after which the session is not touched.
 */
static struct {
	struct fuse_session *se;
	pthread_t loop_thread;
	int pipe[2];            /* handler -> stopper: 1 = stop, 0 = quit */
	char mnt[PATH_MAX];     /* absolute: a daemon has done chdir("/") */
	pthread_mutex_t lock;
	bool done;              /* serve() has left the loop (under lock) */
} stopper = { .pipe = { -1, -1 }, .lock = PTHREAD_MUTEX_INITIALIZER };
static volatile sig_atomic_t stop_requested;

static void on_stop_signal(int sig)
{
	int saved = errno;
	char c = 1;

	(void)sig;
	if (!stop_requested) {
		stop_requested = 1;
		if (write(stopper.pipe[1], &c, 1) < 0) {
			/* cannot happen (the pipe is empty); then stop at once */
			fuse_session_exit(stopper.se);
		}
	} else {
		fuse_session_exit(stopper.se);
	}
	errno = saved;
}

/* fsync one file some process holds open (/proc/PID/fd/N) if it is a
 * regular file of the mount (dev), once per inode (seen, n, cap). */
static void fsync_held_file(const char *path, dev_t dev, ino_t *seen, size_t *n, size_t cap)
{
	size_t i, ml = strlen(stopper.mnt);
	char target[PATH_MAX];
	struct stat st;
	ssize_t len;
	int fd;

	/* By name first: a stat of a file on another (perhaps hung) FUSE
	 * mount could block the stop. */
	len = readlink(path, target, sizeof target - 1);
	if (len <= 0)
		return;
	target[len] = '\0';
	if ((size_t)len < ml || memcmp(target, stopper.mnt, ml) ||
	    (target[ml] != '/' && ml > 1))
		return;
	if (stat(path, &st) || st.st_dev != dev || !S_ISREG(st.st_mode))
		return;
	for (i = 0; i < *n; i++)
		if (seen[i] == st.st_ino)
			return;
	if (*n < cap)
		seen[(*n)++] = st.st_ino;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		fd = open(path, O_WRONLY | O_CLOEXEC | O_NOCTTY);
	if (fd >= 0) {
		fsync(fd);
		close(fd);
	}
}

/*
 * syncfs() starts the write-back of every dirty page but, for FUSE, does
 * not wait for it: the kernel skips FUSE mappings in its wait, so the
 * WRITEs may still be queued when it returns, and a server that exited
 * then would lose them.  fsync() does wait (for the inode's writes, then
 * its FSYNC).  So every regular file of the mount that a process still
 * holds open, the only ones whose pages can still be dirty, is reopened
 * through /proc/PID/fd and fsynced.  Best effort: a process the server
 * may not inspect (another user's, when not root) keeps only syncfs's
 * guarantee; pages of a mapping whose descriptor was closed are not found.
 */
static void fsync_open_files(const char *mnt)
{
	enum { SEEN_MAX = 4096 };
	static ino_t seen[SEEN_MAX];    /* the stopper thread's own */
	char path[64];
	size_t n = 0;
	struct stat mst;
	struct dirent *p, *f;
	DIR *procs, *fds;

	if (stat(mnt, &mst) || !(procs = opendir("/proc")))
		return;
	while ((p = readdir(procs))) {
		if (p->d_name[0] < '1' || p->d_name[0] > '9' || atoi(p->d_name) == getpid())
			continue;
		snprintf(path, sizeof path, "/proc/%.20s/fd", p->d_name);
		if (!(fds = opendir(path)))
			continue;
		while ((f = readdir(fds))) {
			if (f->d_name[0] == '.')
				continue;
			snprintf(path, sizeof path, "/proc/%.20s/fd/%.20s", p->d_name, f->d_name);
			fsync_held_file(path, mst.st_dev, seen, &n, SEEN_MAX);
		}
		closedir(fds);
	}
	closedir(procs);
}

static void *stopper_thread(void *arg)
{
	char c = 0;
	int fd;

	(void)arg;
	while (read(stopper.pipe[0], &c, 1) < 0 && errno == EINTR)
		;
	if (c == 1) {
		/* The kernel writes every dirty page of the mount back. */
		fd = open(stopper.mnt, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (fd >= 0) {
			syncfs(fd);
			close(fd);
		}
		fsync_open_files(stopper.mnt);
		pthread_mutex_lock(&stopper.lock);
		if (!stopper.done) {
			fuse_session_exit(stopper.se);
			pthread_kill(stopper.loop_thread, SIGTERM);
		}
		pthread_mutex_unlock(&stopper.lock);
	}
	close(stopper.pipe[0]);
	return NULL;
}

/* After fuse_set_signal_handlers (which also ignores SIGPIPE); 0 or -1. */
static int stopper_start(struct fuse_session *se, const char *mountpoint)
{
	struct sigaction sa = { .sa_handler = on_stop_signal };
	sigset_t all, old;
	pthread_t tid;
	int err;

	if (!realpath(mountpoint, stopper.mnt) || pipe2(stopper.pipe, O_CLOEXEC))
		return -1;
	stopper.se = se;
	stopper.loop_thread = pthread_self();
	stopper.done = false;
	stop_requested = 0;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);     /* signals are not for it */
	err = pthread_create(&tid, NULL, stopper_thread, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (err) {
		close(stopper.pipe[0]);
		close(stopper.pipe[1]);
		return -1;
	}
	pthread_detach(tid);    /* it may sit in syncfs() of a dead mount */
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = 0;        /* no SA_RESTART: the loop's read must see EINTR */
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	return 0;
}

static void stopper_stop(void)
{
	struct sigaction dfl = { .sa_handler = SIG_DFL };
	char c = 0;

	/* done first: the stopper must not signal the loop thread once the
	 * handler is gone (SIG_DFL would kill the process). */
	pthread_mutex_lock(&stopper.lock);
	stopper.done = true;
	pthread_mutex_unlock(&stopper.lock);
	sigemptyset(&dfl.sa_mask);
	sigaction(SIGTERM, &dfl, NULL);
	sigaction(SIGINT, &dfl, NULL);
	sigaction(SIGHUP, &dfl, NULL);
	if (!stop_requested && write(stopper.pipe[1], &c, 1) < 0) {
		/* the stopper then stays blocked: harmless */
	}
	close(stopper.pipe[1]);
}

/* The device ("MAJOR:MINOR", the bdi's name) of the topmost mount on mnt,
 * an absolute path; 0 or -1. */
static int mount_device(const char *mnt, char *dev, size_t len)
{
	FILE *f = fopen("/proc/self/mountinfo", "r");
	char line[3 * PATH_MAX], mp[PATH_MAX], d[32];
	int found = -1;

	if (!f)
		return -1;
	while (fgets(line, sizeof line, f)) {
		if (sscanf(line, "%*s %*s %31s %*s %4095s", d, mp) != 2)
			continue;
		mountinfo_unescape(mp);
		if (!strcmp(mp, mnt)) {
			snprintf(dev, len, "%s", d);
			found = 0;
		}
	}
	fclose(f);
	return found;
}

/* A number from a sysfs file; 0 if none. */
static unsigned long long read_sysfs_u64(const char *path)
{
	unsigned long long v = 0;
	FILE *f = fopen(path, "r");

	if (f) {
		if (fscanf(f, "%llu", &v) != 1)
			v = 0;
		fclose(f);
	}
	return v;
}

/*
 * What the kernel may hold dirty for this mount (full_guard): its bdi's
 * max_bytes, doubled.  Root sets it first: -o dirty_limit=MIB, or by
 * default DEFAULT_DIRTY_MIB when the kernel's is larger (1% of its dirty
 * threshold: 47 MiB on a 24 GiB machine), so that the cache serves all but
 * the last ~70 MiB of an image.  Without sysfs, 1% of the memory (max_ratio
 * is 1% of a threshold that is at most all of it).
 */
#define DEFAULT_DIRTY_MIB 16

static uint64_t kernel_dirty_bound(const char *mnt, unsigned limit_mib)
{
	char dev[32], path[96];
	unsigned long long max = 0;
	FILE *f;

	if (mount_device(mnt, dev, sizeof dev) == 0) {
		snprintf(path, sizeof path, "/sys/class/bdi/%s/max_bytes", dev);
		max = read_sysfs_u64(path);
		if (!limit_mib && max > (DEFAULT_DIRTY_MIB << 20))
			limit_mib = DEFAULT_DIRTY_MIB;
		if (limit_mib && geteuid() == 0 && (f = fopen(path, "w"))) {
			fprintf(f, "%llu\n", (unsigned long long)limit_mib << 20);
			if (fclose(f))
				fprintf(stderr, "uext4 mount: cannot set %s: %s\n", path,
					strerror(errno));
			max = read_sysfs_u64(path);
		}
	}
	if (!max)
		max = (unsigned long long)sysconf(_SC_PHYS_PAGES) * (unsigned long long)sysconf(_SC_PAGESIZE) / 100;
	return 2 * (uint64_t)max + FULL_MARGIN;
}

static int serve(struct server *s, struct fuse_session *se, const char *mountpoint,
		 const struct uext4_fuse_opts *o)
{
	struct uext4_loop_opts lo = {
		.kind = (enum uext4_loop_kind)o->loop,
		.threads = o->threads,
		.max_idle = o->max_idle,
		.clone_fd = o->clone_fd,
		/* the loop says when it serves: uring's fallback line must show */
		.ready = o->ready_fd >= 0 ? ready_cb : NULL,
		.ready_arg = (void *)&o->ready_fd,
		/* the server drops setuid/setgid/capabilities (peek_request);
		 * near full, direct files may be mapped shared (full_guard) */
		.init_flags = o->read_only ? 0
					   : FUSE_HANDLE_KILLPRIV_V2 | FUSE_DIRECT_IO_ALLOW_MMAP,
		.peek = peek_request,   /* and the request statistics */
		.replied = reqstats_replied,
	};
	char mnt[PATH_MAX];
	int ret;

	if (!realpath(mountpoint, mnt))
		snprintf(mnt, sizeof mnt, "%s", mountpoint);
	snprintf(s->mnt, sizeof(s->mnt), "%s", mnt);
	if (fuse_set_signal_handlers(se)) {
		fprintf(stderr, "uext4 mount: cannot set signal handlers\n");
		return -EIO;
	}
	if (fuse_session_mount(se, mountpoint)) {
		/* libfuse/fusermount3 printed the reason */
		fuse_remove_signal_handlers(se);
		return -EIO;
	}
	if (!o->read_only && o->writeback)
		s->full.dirty_bound = kernel_dirty_bound(mnt, o->dirty_limit_mib);
	/* Read-only mounts have no dirty pages: libfuse's handlers suffice. */
	bool drain = !o->read_only && o->writeback && stopper_start(se, mountpoint) == 0;

	ret = uext4_loop_run(se, &lo);
	if (drain)
		stopper_stop();
	release_thread_read_buf(); /* this thread keeps running: no destructor */
	fuse_session_unmount(se);
	fuse_remove_signal_handlers(se);
	return ret < 0 ? ret : 0;
}

/* Whether the image has casefold (INCOMPAT_CASEFOLD, 0x20000): then its
 * +F directories keep no names in the kernel (entry_timeout_in()). */
static bool has_casefold(uext4_fs *fs)
{
	struct uext4_info in;

	return uext4_info(fs, &in) == 0 && (in.feature_incompat & 0x20000u);
}

/* Nanoseconds between the times the image can store (the kernel's ext4
 * s_time_gran): inodes of 128 bytes have no *_extra fields. */
static uint32_t time_gran_of(uext4_fs *fs)
{
	struct uext4_info in;

	if (uext4_info(fs, &in) == 0 && in.inode_size < 256)
		return 1000000000;
	return 1;
}

/*
 * Can a request handler wait for the kernel to write dirty pages back
 * (fuse_lowlevel_notify_inval_inode() of a page range)?  Only if another
 * thread serves those WRITEs meanwhile: the pool and mt loops with more
 * than one thread.  Not st (one thread), nor uring, whose queue for this
 * CPU is served by the very thread that waits.
 */
static enum uext4_loop_kind loop_kind(const struct uext4_fuse_opts *o)
{
	enum uext4_loop_kind k = (enum uext4_loop_kind)o->loop;

	if (k == UEXT4_LOOP_AUTO)
		k = uext4_uring_refused() ? uext4_loop_classic() : UEXT4_LOOP_URING;
	return k;
}

static bool pool_loop(const struct uext4_fuse_opts *o)
{
	return loop_kind(o) == UEXT4_LOOP_POOL;
}

static bool pages_notify_safe(const struct uext4_fuse_opts *o)
{
	enum uext4_loop_kind k = loop_kind(o);

	return (k == UEXT4_LOOP_POOL || k == UEXT4_LOOP_MT) && o->threads != 1;
}

int uext4_fuse_run(uext4_fs *fs, const char *mountpoint, const struct uext4_fuse_opts *o)
{
	struct server s = { .fs = fs, .read_only = o->read_only,
			    .want_writeback = o->writeback, .kernel_checks = kernel_checks(o),
			    .fsname = o->fsname ? o->fsname : "the image",
			    .wbf = { .lock = PTHREAD_MUTEX_INITIALIZER },
			    .page_notify_ok = pages_notify_safe(o) };
	/* All threads but one: pool has a fixed set (loop.c: 4 unless
	 * threads=), mt makes them up to its limit (libfuse: 10). */
	if (s.page_notify_ok)
		s.inval_inline_max = (o->threads ? (int)o->threads : pool_loop(o) ? 4 : 10) - 1;
	struct uext4_statfs sf;
	char mopts[2300];
	char *argv[5];
	int argc = 0, ret;

	s.timeout = o->timeout >= 0 ? o->timeout : CACHE_TIMEOUT;
	ret = uext4_statfs(fs, &sf);
	s.block_size = ret < 0 ? 4096 : sf.block_size;
	s.time_gran = time_gran_of(fs);
	s.casefold_fs = has_casefold(fs);
	if (build_mount_opts(o, mopts, sizeof(mopts))) {
		fprintf(stderr, "uext4 mount: mount options too long\n");
		return -EINVAL;
	}
	argv[argc++] = "uext4";
	argv[argc++] = "-o";
	argv[argc++] = mopts;
	if (o->debug)
		argv[argc++] = "-d";
	argv[argc] = NULL;

	struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
	struct fuse_session *se = fuse_session_new(&args, &uext4_ops, sizeof(uext4_ops), &s);
	if (!se) {
		fprintf(stderr, "uext4 mount: cannot create FUSE session (bad options?)\n");
		fuse_opt_free_args(&args);
		return -EINVAL;
	}
	s.se = se;      /* before the first request: serve() starts them */
	if (o->stats)
		stats_switch(&s, 1);
	ret = serve(&s, se, mountpoint, o);
	fuse_session_destroy(se);       /* calls op_destroy: writes back */
	fuse_opt_free_args(&args);
	if (ret == 0 && s.write_back_err)
		ret = s.write_back_err;
	if (s.wbf.count) {
		char msg[2048];

		describe_write_back_failures(&s, msg, sizeof msg);
		fprintf(stderr, "uext4 mount: %s: %s\n", s.fsname, msg);
		syslog(LOG_ERR, "uext4: %s: %s", s.fsname, msg);
		if (o->failure && o->failure_len)
			snprintf(o->failure, o->failure_len, "%s", msg);
		if (ret == 0)
			ret = -EIO;
	}
	pthread_mutex_destroy(&s.wbf.lock);
	return ret;
}
