/*
 * api.c - the public API (include/uext4.h) on top of the subsystems.
 *
 * Each entry point takes references on the inodes it needs, calls the
 * subsystem, and drops them.  Type checks (ENOTDIR, EISDIR, EINVAL) live
 * here so that the subsystems only see inodes of the right kind.
 */
#include "acl.h"
#include "balloc.h"
#include "bcache.h"
#include "blockdev.h"
#include "crc.h"
#include "dir.h"
#include "internal.h"
#include "ebr.h"
#include "error.h"
#include "file.h"
#include "flags.h"
#include "icache.h"
#include "ifree.h"
#include "inode.h"
#include "internal.h"
#include "lock.h"
#include "mountcheck.h"
#include "namecache.h"
#include "nbd.h"
#include "ondisk.h"
#include "orphan.h"
#include "quota.h"
#include "quotatree.h"
#include "mount.h"
#include "super.h"
#include "symlink.h"
#include "trans.h"
#include "verity.h"
#include "xattr.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct uext4_file {
	struct uext4_fs *fs;
	struct inode *inode;    /* referenced until uext4_release() */
	int flags;              /* open(2) flags */
};

#define SYMLOOP_MAX 40

#define UEXT4_STR2(x) #x
#define UEXT4_STR(x) UEXT4_STR2(x)

/* The numbers this library was built with (not the caller's header's). */
const char *uext4_version(void)
{
	return UEXT4_STR(UEXT4_VERSION_MAJOR) "." UEXT4_STR(UEXT4_VERSION_MINOR) "."
		UEXT4_STR(UEXT4_VERSION_PATCH);
}

int uext4_version_ok(int major, int minor)
{
	return major == UEXT4_VERSION_MAJOR && minor <= UEXT4_VERSION_MINOR;
}

int uext4_recovery_info(uext4_fs *fs, struct uext4_recovery *r)
{
	*r = fs->recovery;
	return 0;
}

/* What recovery could not do is an error for uext4_recover(): name it
 * (each was recorded on the file system with fs_error() too). */
static int recovery_result(const struct uext4_recovery *r, const char *orphan_msg)
{
	if (r->bad_blocks)
		return fs_err(EBADMSG, "journal recovery: %u logged block%s with a bad checksum "
			      "not replayed (first: journal block %u of transaction %u, for block "
			      "%llu); the rest of the journal was replayed; the file system is "
			      "marked with errors: run e2fsck", r->bad_blocks,
			      r->bad_blocks == 1 ? "" : "s", r->bad_journal_block, r->bad_tid,
			      (unsigned long long)r->bad_home_block);
	if (r->orphans_failed)
		return fs_err(EUCLEAN, "%s", orphan_msg);
	return 0;
}

int uext4_recover(const char *path, struct uext4_recovery *r)
{
	return uext4_recover_opts(path, NULL, r);
}

int uext4_recover_opts(const char *path, const struct uext4_opts *opts,
		       struct uext4_recovery *r)
{
	struct uext4_opts o = {0};
	uext4_fs *fs;
	int err;

	fs_clear_err();
	if (!path)
		return fs_err(EINVAL, "uext4_recover: no image path given");
	struct uext4_recovery got;
	char orphan_msg[512];

	if (opts) {
		o.offset = opts->offset;
		o.journal_path = opts->journal_path;
	}
	if ((err = super_mount(path, &o, &fs)))
		return err;
	got = fs->recovery;
	/* orphan_cleanup() left its report of skipped inodes as the message. */
	snprintf(orphan_msg, sizeof(orphan_msg), "%s", uext4_last_error());
	if (r)
		*r = got;
	if ((err = super_umount(fs)))
		return err;
	return recovery_result(&got, orphan_msg);
}

int uext4_mount(const char *path, const struct uext4_opts *opts, uext4_fs **out)
{
	fs_clear_err();
	if (!path || !out)
		return fs_err(EINVAL, "uext4_mount: no image path given");
	return super_mount(path, opts, out);
}

int uext4_in_use(const char *path, char *where, size_t len)
{
	if (!path || bdev_is_nbd_uri(path))
		return 0;
	return mount_check(path, where, len);
}

int uext4_mounted(const char *path, char *where, size_t len)
{
	if (!path || bdev_is_nbd_uri(path))
		return 0;
	return mount_listed(path, where, len);
}

int uext4_umount(uext4_fs *fs)
{
	fs_clear_err();
	return super_umount(fs);
}

int uext4_getattr(uext4_fs *fs, uint64_t ino, struct uext4_stat *st)
{
	struct inode *n;
	int err = iget(fs, ino, &n);

	if (err)
		return err;
	urw_rdlock(&n->lock);
	inode_to_stat(fs, n, st);
	urw_unlock(&n->lock);
	iput(fs, n);
	return 0;
}

/* Get a directory inode, or -ENOTDIR. */
static int iget_dir(uext4_fs *fs, uint64_t ino, struct inode **out)
{
	int err = iget(fs, ino, out);

	if (err)
		return err;
	if (!S_ISDIR((*out)->mode)) {
		iput(fs, *out);
		return fs_err(ENOTDIR, "inode %llu is not a directory", (unsigned long long)ino);
	}
	return 0;
}

static int lookup_stat(uext4_fs *fs, uint64_t dirino, const char *name, bool counted,
		       struct uext4_stat *st);

int uext4_lookup(uext4_fs *fs, uint64_t dir, const char *name, struct uext4_stat *st)
{
	return lookup_stat(fs, dir, name, false, st);
}

ssize_t uext4_readlink(uext4_fs *fs, uint64_t ino, char *buf, size_t size)
{
	struct inode *n;
	ssize_t ret;
	int err = iget(fs, ino, &n);

	if (err)
		return err;
	if (!S_ISLNK(n->mode))
		ret = fs_err(EINVAL, "inode %llu is not a symlink", (unsigned long long)ino);
	else
		ret = symlink_read(fs, n, buf, size);
	iput(fs, n);
	return ret;
}

int uext4_readdir(uext4_fs *fs, uint64_t dir, uint64_t cookie, uext4_filldir_t fill, void *ctx)
{
	struct inode *d;
	int err = iget_dir(fs, dir, &d);

	if (err)
		return err;
	err = dir_iterate(fs, d, cookie, fill, ctx);
	iput(fs, d);
	return err;
}

/* Opening for writing: never an immutable inode; an append-only one only
 * with O_APPEND and without O_TRUNC (the kernel's may_open()). */
static int open_allowed(struct inode *n, int flags)
{
	int err = 0;

	if ((flags & O_ACCMODE) == O_RDONLY && !(flags & O_TRUNC))
		return 0;
	urw_rdlock(&n->lock);
	if (n->flags & EXT4_VERITY_FL)
		err = flags_refuse_verity(n, "open for writing");
	else if (n->flags & EXT4_IMMUTABLE_FL)
		err = flags_refuse(n, "open for writing");
	else if ((n->flags & EXT4_APPEND_FL) && (!(flags & O_APPEND) || (flags & O_TRUNC)))
		err = flags_refuse(n, (flags & O_TRUNC) ? "open with O_TRUNC"
							: "open for writing without O_APPEND");
	urw_unlock(&n->lock);
	return err;
}

int uext4_open(uext4_fs *fs, uint64_t ino, int flags, uext4_file **out)
{
	struct uext4_file *f;
	struct inode *n;
	int err;

	if ((flags & O_ACCMODE) != O_RDONLY && fs->read_only)
		return fs_err(EROFS, "the file system is mounted read-only");
	if ((err = iget(fs, ino, &n)))
		return err;
	if (S_ISDIR(n->mode)) {
		iput(fs, n);
		return fs_err(EISDIR, "inode %llu is a directory", (unsigned long long)ino);
	}
	if ((err = open_allowed(n, flags))) {
		iput(fs, n);
		return err;
	}
	if (atomic_fetch_add(&fs->open_files, 1) >= fs->max_open_files) {
		atomic_fetch_sub(&fs->open_files, 1);
		iput(fs, n);
		return fs_err(EMFILE, "open inode %llu: %u files already open (the max_open_files "
			      "limit)", (unsigned long long)ino, fs->max_open_files);
	}
	f = malloc(sizeof(*f));
	if (!f) {
		atomic_fetch_sub(&fs->open_files, 1);
		iput(fs, n);
		return fs_err(ENOMEM, "open inode %llu: out of memory", (unsigned long long)ino);
	}
	f->fs = fs;
	f->inode = n;
	f->flags = flags;
	if ((flags & O_TRUNC) && (flags & O_ACCMODE) != O_RDONLY && S_ISREG(n->mode)) {
		struct uext4_setattr a = {.valid = UEXT4_SET_SIZE, .size = 0};

		err = uext4_setattr(fs, ino, &a, NULL);
		if (err) {
			uext4_release(f);
			return err;
		}
	}
	*out = f;
	return 0;
}

ssize_t uext4_pread(uext4_file *f, void *buf, size_t size, uint64_t off)
{
	if (!S_ISREG(f->inode->mode))
		return fs_err(EINVAL, "inode %llu is not a regular file",
			      (unsigned long long)f->inode->ino);
	if (atomic_load_explicit(&f->inode->verity, memory_order_acquire) ||
	    (f->inode->flags & EXT4_VERITY_FL))   /* a racy look: verity_pread() checks */
		return verity_pread(f->fs, f->inode, buf, size, off);
	return file_pread(f->fs, f->inode, buf, size, off);
}

int uext4_release(uext4_file *f)
{
	int err;

	if (!f)
		return 0;
	if ((f->flags & O_ACCMODE) != O_RDONLY && !f->fs->read_only) {
		/* Preallocated blocks go back when a writer closes. */
		urw_wrlock(&f->inode->lock);
		if (f->inode->pa)
			balloc_release_prealloc(f->fs, f->inode);
		urw_unlock(&f->inode->lock);
	}
	err = iput(f->fs, f->inode); /* frees an inode unlinked while open */
	atomic_fetch_sub(&f->fs->open_files, 1);
	free(f);
	return err;
}

ssize_t uext4_getxattr(uext4_fs *fs, uint64_t ino, const char *name, void *buf, size_t size)
{
	struct inode *n;
	ssize_t ret;
	int err = iget(fs, ino, &n);

	if (err)
		return err;
	ret = xattr_get(fs, n, name, buf, size);
	iput(fs, n);
	return ret;
}

ssize_t uext4_listxattr(uext4_fs *fs, uint64_t ino, char *buf, size_t size)
{
	struct inode *n;
	ssize_t ret;
	int err = iget(fs, ino, &n);

	if (err)
		return err;
	ret = xattr_list(fs, n, buf, size);
	iput(fs, n);
	return ret;
}

int uext4_lookup_ref(uext4_fs *fs, uint64_t ino, struct uext4_stat *st)
{
	return inode_lookup_ref(fs, ino, st);
}

int uext4_lookup_handle(uext4_fs *fs, uint64_t ino, struct uext4_stat *st)
{
	fs_clear_err();
	return inode_lookup_handle(fs, ino, st);
}

int uext4_lookup_counted(uext4_fs *fs, uint64_t dir, const char *name, struct uext4_stat *st)
{
	return lookup_stat(fs, dir, name, true, st);
}

void uext4_forget(uext4_fs *fs, uint64_t ino, uint64_t nlookup)
{
	inode_forget(fs, ino, nlookup);
}

/* --- path resolution ---
 *
 * The walk carries a reference from each directory to the next, so each
 * component costs one lookup in the directory and one iget() of the child.
 */

struct walk {
	uext4_fs *fs;
	int links_left;     /* symlinks we may still follow */
};

static int walk_from(struct walk *w, struct inode *start, const char *path, int follow,
		     struct inode **out);

/*
 * Between a lookup and its iget() the name's inode may be unlinked and
 * freed, and its number reused by a create: iget() then fails on a free
 * inode (EUCLEAN, ENOENT) or, worse, returns another file.  The name
 * cache and the directory are invalidated before an unlinked inode is
 * freed (dir_remove()), so looking the name up again after iget() tells:
 * if it still names ino, what iget() returned (inode or error) is the
 * truth at that moment; otherwise the caller looks again.  Keeps iget()'s
 * error message.
 */
static bool name_still_names(struct uext4_fs *fs, struct inode *dir, const char *name,
			     size_t len, uint64_t ino, int iget_err)
{
	char msg[512];
	uint64_t now;
	unsigned dtype;
	bool same;

	if (iget_err && iget_err != -EUCLEAN && iget_err != -ENOENT)
		return true;    /* EIO, ENOMEM: not a sign of the race */
	if (iget_err)
		snprintf(msg, sizeof(msg), "%s", uext4_last_error());
	same = dir_lookup(fs, dir, name, len, &now, &dtype) == 0 && now == ino;
	if (iget_err && same)
		fs_err(-iget_err, "%s", msg);
	return same;
}

/* The child `name` of dir, referenced. */
static int walk_lookup(struct walk *w, struct inode *dir, const char *name, size_t len,
		       struct inode **child)
{
	struct nc_stamp stamp;
	uint64_t ino;
	unsigned dtype;
	int err;

	if (!S_ISDIR(dir->mode))
		return fs_err(ENOTDIR, "inode %llu is not a directory",
			      (unsigned long long)dir->ino);
	if (len > EXT4_NAME_LEN)
		return fs_err(ENAMETOOLONG, "file name of %zu bytes (at most %u)", len,
			      EXT4_NAME_LEN);
	/* The common case: a name-cache hit whose bucket has not changed by
	 * the time iget() returns names that inode (no second lookup). */
	if (w->fs->nc && namecache_lookup_stamped(w->fs->nc, dir, name, len, &ino, &dtype,
						  &stamp) == 1 && ino) {
		if (!iget(w->fs, ino, child)) {
			if (namecache_stamp_valid(&stamp))
				return 0;
			iput(w->fs, *child);
		}
	}
	/* A free inode still named after the look again is corruption only
	 * if a second try finds it free too: the name may have been unlinked
	 * and created again, reusing the number, after iget() read the old
	 * free inode. */
	for (int tries = 0;; ) {
		if ((err = dir_lookup(w->fs, dir, name, len, &ino, &dtype)))
			return err;
		err = iget(w->fs, ino, child);
		if (name_still_names(w->fs, dir, name, len, ino, err) && (!err || ++tries == 3))
			return err;
		if (!err)
			iput(w->fs, *child);
	}
}

/*
 * The stat of `name` in directory dirino, with a lookup reference taken if
 * `counted` (FUSE's lookup).  Found as the path walk finds a component, so
 * a lookup racing an unlink of the name gets ENOENT, never the EUCLEAN of
 * a freed inode, nor a file that took over the freed number under another
 * name.  The child's reference keeps its number until the stat (and the
 * lookup count) is taken: no second iget().
 */
static int lookup_stat(uext4_fs *fs, uint64_t dirino, const char *name, bool counted,
		       struct uext4_stat *st)
{
	struct walk w = {.fs = fs};
	struct inode *d, *child;
	size_t len = strlen(name);
	int err;

	if (len == 0)
		return fs_err(ENOENT, "empty file name");
	if ((err = iget_dir(fs, dirino, &d)))
		return err;
	err = walk_lookup(&w, d, name, len, &child);
	iput(fs, d);
	if (err)
		return err;
	if (counted) {
		inode_lookup_ref_held(fs, child, st);
	} else if (st) {
		urw_rdlock(&child->lock);
		inode_to_stat(fs, child, st);
		urw_unlock(&child->lock);
	}
	iput(fs, child);
	return 0;
}

/* Resolve symlink `link` found in directory dir to a referenced inode. */
static int walk_link(struct walk *w, struct inode *dir, struct inode *link, struct inode **out)
{
	size_t cap = w->fs->block_size + 1;
	struct inode *start = dir;
	char *target;
	ssize_t len;
	int err;

	if (w->links_left-- <= 0)
		return fs_err(ELOOP, "too many levels of symbolic links");
	/* Heap, not stack: links nest up to SYMLOOP_MAX deep. */
	if (!(target = malloc(cap)))
		return fs_err(ENOMEM, "out of memory");
	len = symlink_read(w->fs, link, target, cap - 1);
	if (len < 0) {
		free(target);
		return (int)len;
	}
	target[MIN((size_t)len, cap - 1)] = '\0';
	if (target[0] == '/')
		start = w->fs->root;
	igrab(start); /* walk_from() takes over this reference */
	err = walk_from(w, start, target, 1, out);
	free(target);
	return err;
}

/* Walk path from start, whose reference the walk takes over. */
static int walk_from(struct walk *w, struct inode *start, const char *path, int follow,
		     struct inode **out)
{
	struct inode *cur = start, *next;
	const char *p = path, *end;
	int err = 0;

	for (;;) {
		while (*p == '/')
			p++;
		if (!*p)
			break;
		end = strchrnul(p, '/');
		if ((err = walk_lookup(w, cur, p, (size_t)(end - p), &next)))
			break;
		for (p = end; *p == '/'; p++)
			;
		if (S_ISLNK(next->mode) && (*p || follow)) {
			struct inode *target;

			err = walk_link(w, cur, next, &target);
			iput(w->fs, next);
			if (err)
				break;
			next = target;
		}
		iput(w->fs, cur);
		cur = next;
	}
	if (err) {
		iput(w->fs, cur);
		return err;
	}
	*out = cur;
	return 0;
}

static int resolve_inode(uext4_fs *fs, const char *path, int follow, struct inode **out)
{
	struct walk w = {.fs = fs, .links_left = SYMLOOP_MAX};

	fs_clear_err();
	igrab(fs->root); /* no cache lock: the mount holds a reference */
	return walk_from(&w, fs->root, path, follow, out);
}

int uext4_resolve(uext4_fs *fs, const char *path, int follow, uint64_t *ino)
{
	struct inode *n;
	int err = resolve_inode(fs, path, follow, &n);

	if (err)
		return err;
	*ino = n->ino;
	iput(fs, n);
	return 0;
}

/*
 * The reference-free walk for stat (as Linux's RCU-walk): inside one epoch
 * section, each component is a name-cache probe (stamped) and an icache
 * peek, so the walk writes no shared cache line (no refcount on the root
 * or the parents).  The attributes are copied from the last inode (the
 * one reference the walk takes: its lock must outlive the copy), then
 * every stamp is checked: all entries of the path still held after the
 * copy, so the copy is of the inode the whole path named at that moment
 * (an unlink or rename that let the number be reused has bumped a stamp).
 * Anything else (a miss, a negative entry, ".", "..", a symlink or an
 * unknown type on the way, a deep path, a failed check) returns false and
 * the caller walks the ordinary way, which reports errors as before.
 * The ordinary walk checks no permissions, so there is none to repeat.
 */
#define FAST_WALK_DEPTH 32

static bool is_dot_or_dotdot(const char *p, size_t len)
{
	return p[0] == '.' && (len == 1 || (len == 2 && p[1] == '.'));
}

static bool walk_peek(uext4_fs *fs, const char *p, struct nc_stamp *stamps, int *depth,
		      struct inode **out)
{
	struct inode *cur = fs->root;
	unsigned dtype = DT_DIR;
	uint64_t ino;
	const char *end;

	for (;;) {
		while (*p == '/')
			p++;
		if (!*p)
			break;
		end = strchrnul(p, '/');
		if (*depth == FAST_WALK_DEPTH || dtype != DT_DIR ||
		    (size_t)(end - p) > NC_NAME_MAX || is_dot_or_dotdot(p, (size_t)(end - p)))
			return false;
		if (namecache_lookup_stamped(fs->nc, cur, p, (size_t)(end - p), &ino, &dtype,
					     &stamps[*depth]) != 1 || !ino)
			return false;
		(*depth)++;
		if (!(cur = icache_peek(fs, ino)))
			return false;
		p = end;
	}
	*out = cur;
	return true;
}

static bool stat_path_fast(uext4_fs *fs, const char *path, struct uext4_stat *st)
{
	struct nc_stamp stamps[FAST_WALK_DEPTH];
	struct inode *n;
	int depth = 0;
	bool ok;

	if (!fs->nc)
		return false;
	ebr_enter();
	ok = walk_peek(fs, path, stamps, &depth, &n) && inode_stat_peeked(fs, n, st);
	for (int i = 0; ok && i < depth; i++)
		ok = namecache_stamp_valid(&stamps[i]);
	ebr_exit();
	return ok;
}

int uext4_stat_path(uext4_fs *fs, const char *path, struct uext4_stat *st)
{
	struct inode *n;
	int err;

	if (stat_path_fast(fs, path, st)) {
		fs_clear_err();
		return 0;
	}
	if ((err = resolve_inode(fs, path, 0, &n)))
		return err;
	urw_rdlock(&n->lock);
	inode_to_stat(fs, n, st);
	urw_unlock(&n->lock);
	iput(fs, n);
	return 0;
}

/* --- whole-file-system facts --- */

static void sum_free(uext4_fs *fs, uint64_t *blocks, uint64_t *inodes)
{
	/* The counter counts clusters (bigalloc): the caller sees blocks. */
	*blocks = fs_c2b(fs, (uint64_t)MAX(pcounter_sum(&fs->hot->free_blocks), 0));
	*inodes = (uint64_t)MAX(pcounter_sum(&fs->hot->free_inodes), 0);
}

static uint64_t reserved_blocks(uext4_fs *fs)
{
	uint64_t r = le32(fs->sb.s_r_blocks_count_lo);

	if (FS_HAS_INCOMPAT(fs, 64BIT))
		r |= (uint64_t)le32(fs->sb.s_r_blocks_count_hi) << 32;
	return r;
}

/*
 * The kernel keeps a pool of 2% of the blocks (at most 4096) on extent file
 * systems for metadata it may need later (ext4_calculate_resv_clusters);
 * statfs counts it as unavailable, and so do we, so df agrees.
 */
static uint64_t kernel_reserve(uext4_fs *fs)
{
	if (!FS_HAS_INCOMPAT(fs, EXTENTS))
		return 0;
	/* In clusters (bigalloc): 2% of the clusters, at most 4096 of them. */
	return fs_c2b(fs, MIN(fs_b2c(fs, fs->blocks_count) / 50, 4096));
}

int uext4_statfs(uext4_fs *fs, struct uext4_statfs *st)
{
	uint64_t free_blocks, free_inodes, resv = reserved_blocks(fs) + kernel_reserve(fs);
	uint64_t overhead = le32(fs->sb.s_overhead_clusters);

	sum_free(fs, &free_blocks, &free_inodes);
	memset(st, 0, sizeof(*st));
	st->block_size = fs->block_size;
	overhead = fs_c2b(fs, overhead);   /* s_overhead_clusters: clusters */
	st->blocks = fs->blocks_count - MIN(overhead, fs->blocks_count);
	st->blocks_free = free_blocks;
	st->blocks_avail = free_blocks > resv ? free_blocks - resv : 0;
	st->inodes = fs->inodes_count;
	st->inodes_free = free_inodes;
	st->name_max = EXT4_NAME_LEN;
	memcpy(&st->fsid, fs->sb.s_uuid, sizeof(st->fsid));
	return 0;
}

static int64_t time_hi(uint32_t lo, uint8_t hi)
{
	return (int64_t)lo | ((int64_t)hi << 32);
}

static void copy_func(char dst[33], const uint8_t src[32])
{
	memcpy(dst, src, 32);
	dst[32] = '\0';
}

/* The recorded errors (s_error_count, s_first_error_*, s_last_error_*). */
static void info_errors(const struct ext4_super_block *sb, struct uext4_info *i)
{
	i->error_count = le32(sb->s_error_count);
	i->first_error_time = time_hi(le32(sb->s_first_error_time), sb->s_first_error_time_hi);
	i->last_error_time = time_hi(le32(sb->s_last_error_time), sb->s_last_error_time_hi);
	i->first_error_ino = le32(sb->s_first_error_ino);
	i->last_error_ino = le32(sb->s_last_error_ino);
	i->first_error_block = le64(sb->s_first_error_block);
	i->last_error_block = le64(sb->s_last_error_block);
	i->first_error_line = le32(sb->s_first_error_line);
	i->last_error_line = le32(sb->s_last_error_line);
	i->first_error_errcode = sb->s_first_error_errcode;
	i->last_error_errcode = sb->s_last_error_errcode;
	copy_func(i->first_error_func, sb->s_first_error_func);
	copy_func(i->last_error_func, sb->s_last_error_func);
}

/*
 * Everything the superblock alone says, computed from its raw fields with
 * no trust in them (uext4_probe() shows superblocks a mount refuses):
 * nothing here divides by or indexes with an unchecked value.
 */
static void info_from_sb(const struct ext4_super_block *sb, struct uext4_info *i)
{
	uint32_t log = le32(sb->s_log_block_size);
	bool is64 = (le32(sb->s_feature_incompat) & EXT4_FEATURE_INCOMPAT_64BIT) != 0;
	bool old = le32(sb->s_rev_level) == EXT4_GOOD_OLD_REV;

	memset(i, 0, sizeof(*i));
	memcpy(i->volume_name, sb->s_volume_name, sizeof(sb->s_volume_name));
	memcpy(i->uuid, sb->s_uuid, sizeof(i->uuid));
	i->block_size = log <= 6 ? 1024u << log : 0;
	i->inode_size = old ? EXT4_GOOD_OLD_INODE_SIZE : le16(sb->s_inode_size);
	i->first_ino = old ? EXT4_GOOD_OLD_FIRST_INO : le32(sb->s_first_ino);
	i->desc_size = is64 ? le16(sb->s_desc_size) : EXT4_MIN_DESC_SIZE;
	i->blocks_count = le32(sb->s_blocks_count_lo) |
			  (is64 ? (uint64_t)le32(sb->s_blocks_count_hi) << 32 : 0);
	i->reserved_blocks = le32(sb->s_r_blocks_count_lo) |
			     (is64 ? (uint64_t)le32(sb->s_r_blocks_count_hi) << 32 : 0);
	i->free_blocks = le32(sb->s_free_blocks_count_lo) |
			 (is64 ? (uint64_t)le32(sb->s_free_blocks_count_hi) << 32 : 0);
	i->free_inodes = le32(sb->s_free_inodes_count);
	i->inodes_count = le32(sb->s_inodes_count);
	i->blocks_per_group = le32(sb->s_blocks_per_group);
	i->inodes_per_group = le32(sb->s_inodes_per_group);
	i->first_data_block = le32(sb->s_first_data_block);
	if (i->blocks_per_group && i->blocks_count > i->first_data_block)
		i->groups_count = (uint32_t)DIV_ROUND_UP(i->blocks_count - i->first_data_block,
							 i->blocks_per_group);
	i->feature_compat = le32(sb->s_feature_compat);
	i->feature_incompat = le32(sb->s_feature_incompat);
	i->feature_ro_compat = le32(sb->s_feature_ro_compat);
	i->rev_level = le32(sb->s_rev_level);
	i->state = le16(sb->s_state);
	i->errors = le16(sb->s_errors);
	i->journal_inum = le32(sb->s_journal_inum);
	i->orphan_file_inum = le32(sb->s_orphan_file_inum);
	i->def_hash_version = sb->s_def_hash_version;
	i->log_groups_per_flex = sb->s_log_groups_per_flex;
	i->mount_count = le16(sb->s_mnt_count);
	i->max_mount_count = le16(sb->s_max_mnt_count);
	i->mkfs_time = time_hi(le32(sb->s_mkfs_time), sb->s_mkfs_time_hi);
	i->mtime = time_hi(le32(sb->s_mtime), sb->s_mtime_hi);
	i->wtime = time_hi(le32(sb->s_wtime), sb->s_wtime_hi);
	super_feature_names(i->feature_compat, i->feature_incompat, i->feature_ro_compat,
			    i->features, sizeof(i->features));
	i->cluster_size = i->block_size;
	i->clusters_per_group = i->blocks_per_group;
	if ((i->feature_ro_compat & EXT4_FEATURE_RO_COMPAT_BIGALLOC) &&
	    le32(sb->s_log_cluster_size) <= 22) {
		i->cluster_size = 1024u << le32(sb->s_log_cluster_size);
		i->clusters_per_group = le32(sb->s_clusters_per_group);
	}
	info_errors(sb, i);
}

int uext4_info(uext4_fs *fs, struct uext4_info *i)
{
	struct ext4_super_block sbcopy;
	uint64_t free_blocks, free_inodes;

	trans_lock_super(fs);
	sbcopy = fs->sb;
	trans_unlock_super(fs);
	fs_errors_merge(fs, &sbcopy);   /* errors this mount recorded since the last commit */
	info_from_sb(&sbcopy, i);
	/* The mount's view: counters summed over the groups, geometry checked. */
	i->block_size = fs->block_size;
	i->inode_size = fs->inode_size;
	i->desc_size = fs->desc_size;
	i->blocks_count = fs->blocks_count;
	sum_free(fs, &free_blocks, &free_inodes);
	i->free_blocks = free_blocks;
	i->free_inodes = (uint32_t)free_inodes;
	i->reserved_blocks = reserved_blocks(fs);
	i->inodes_count = fs->inodes_count;
	i->blocks_per_group = fs->blocks_per_group;
	i->cluster_size = fs->block_size << fs->cluster_bits;
	i->clusters_per_group = fs->clusters_per_group;
	i->inodes_per_group = fs->inodes_per_group;
	i->groups_count = fs->groups_count;
	i->first_data_block = fs->first_data_block;
	i->first_ino = fs->first_ino;
	return 0;
}

int uext4_probe(const char *path, struct uext4_info *i)
{
	struct ext4_super_block sb;
	struct bdev *dev;
	int err = 0;

	memset(i, 0, sizeof(*i));
	if (!(dev = bdev_open_path(path, 1, 0, 0, &err)))
		return err ? err : -EIO;
	err = bdev_read(dev, &sb, sizeof(sb), EXT4_SUPERBLOCK_OFFSET);
	bdev_close(dev);
	if (err)
		return err;
	if (le16(sb.s_magic) != EXT4_SUPER_MAGIC)
		return fs_err(EINVAL, "not an ext2/3/4 file system (no superblock magic 0xEF53 "
			      "at byte 1080, found 0x%04x)", le16(sb.s_magic));
	info_from_sb(&sb, i);
	if ((i->feature_ro_compat & EXT4_FEATURE_RO_COMPAT_METADATA_CSUM) &&
	    le32(sb.s_checksum) != crc32c(~0u, &sb, offsetof(struct ext4_super_block, s_checksum)))
		i->super_csum_bad = 1;
	return 0;
}

int uext4_get_counters(uext4_fs *fs, struct uext4_counters *c)
{
	memset(c, 0, sizeof(*c));
	bcache_counters(fs->bc, c);
	return 0;
}

/* ================================================================ write path */

static int writable_inode(uext4_fs *fs, uint64_t ino, struct inode **out)
{
	fs_clear_err();
	if (fs->read_only)
		return fs_err(EROFS, "the file system is mounted read-only");
	return iget(fs, ino, out);
}

static struct timespec now_or(uext4_fs *fs, uint32_t valid, uint32_t now_bit, struct timespec given)
{
	return (valid & now_bit) ? fs_time(fs) : given;
}

/* The changes of one setattr but the owner, inode locked, inside a handle. */
static int apply_setattr_rest(struct handle *h, struct inode *n, const struct uext4_setattr *a)
{
	struct timespec now = fs_time(h->fs);
	int err;

	/* First, as it may fail (ENOSPC, a corrupt ACL) before anything
	 * else has changed. */
	if ((a->valid & UEXT4_SET_MODE) && (err = acl_chmod(h, n, a->mode)))
		return err;
	if (a->valid & UEXT4_SET_SIZE) {
		if (S_ISDIR(n->mode))
			return fs_err(EISDIR, "truncate: inode %llu is a directory",
				      (unsigned long long)n->ino);
		if (!S_ISREG(n->mode))
			return fs_err(EINVAL, "truncate: inode %llu is not a regular file",
				      (unsigned long long)n->ino);
		if (a->size != n->size) {
			if ((err = file_set_size(h, n, a->size)))
				return err;
			n->mtime = now;
		}
	}
	if (a->valid & UEXT4_SET_MODE)
		n->mode = (n->mode & S_IFMT) | (a->mode & 07777);
	if (a->valid & (UEXT4_SET_ATIME | UEXT4_SET_ATIME_NOW))
		n->atime = now_or(h->fs, a->valid, UEXT4_SET_ATIME_NOW, a->atime);
	if (a->valid & (UEXT4_SET_MTIME | UEXT4_SET_MTIME_NOW))
		n->mtime = now_or(h->fs, a->valid, UEXT4_SET_MTIME_NOW, a->mtime);
	n->ctime = (a->valid & UEXT4_SET_CTIME) ? a->ctime : now;
	/* The cache's own clock stamped these: ours must not fall behind it. */
	if ((a->valid & (UEXT4_SET_MTIME | UEXT4_SET_MTIME_LOCAL)) ==
	    (UEXT4_SET_MTIME | UEXT4_SET_MTIME_LOCAL))
		fs_time_floor_raise(h->fs, a->mtime);
	if (a->valid & UEXT4_SET_CTIME)
		fs_time_floor_raise(h->fs, a->ctime);
	return inode_write(h, n);
}

/* The changes of one setattr.  A new owner first: its quota limits may
 * refuse it (EDQUOT) before anything else changes; a later failure puts
 * the old owner back (nothing was written). */
static int apply_setattr(struct handle *h, struct inode *n, const struct uext4_setattr *a)
{
	uint32_t uid = n->uid, gid = n->gid;
	int err;

	if (a->valid & (UEXT4_SET_UID | UEXT4_SET_GID)) {
		err = quota_transfer(h, n, (a->valid & UEXT4_SET_UID) ? a->uid : uid,
				     (a->valid & UEXT4_SET_GID) ? a->gid : gid, n->projid);
		if (err)
			return err;
	}
	if ((err = apply_setattr_rest(h, n, a))) {
		n->uid = uid;
		n->gid = gid;
	}
	return err;
}

/* A given time's nanoseconds must be a valid count, as utimensat(2) requires. */
static int setattr_times_valid(const struct uext4_setattr *a)
{
	const struct { uint32_t bit, now; const struct timespec *t; const char *what; } given[] = {
		{UEXT4_SET_ATIME, UEXT4_SET_ATIME_NOW, &a->atime, "atime"},
		{UEXT4_SET_MTIME, UEXT4_SET_MTIME_NOW, &a->mtime, "mtime"},
		{UEXT4_SET_CTIME, 0, &a->ctime, "ctime"},
	};

	for (size_t i = 0; i < sizeof(given) / sizeof(given[0]); i++)
		if ((a->valid & (given[i].bit | given[i].now)) == given[i].bit &&
		    (given[i].t->tv_nsec < 0 || given[i].t->tv_nsec > 999999999))
			return fs_err(EINVAL, "setattr: %s nanoseconds %ld out of range 0..999999999",
				      given[i].what, (long)given[i].t->tv_nsec);
	return 0;
}

/* An immutable inode changes no attribute (ext4_setattr()); an append-only
 * one keeps its size, mode, owner and given times, but may be touched
 * (times "now", the kernel's ATTR_TOUCH, or a cache's own, MTIME_LOCAL). */
static int setattr_allowed(const struct inode *n, const struct uext4_setattr *a)
{
	uint32_t given = UEXT4_SET_ATIME |
			 ((a->valid & UEXT4_SET_MTIME_LOCAL) ? 0 : UEXT4_SET_MTIME);

	if (n->flags & EXT4_IMMUTABLE_FL)
		return flags_refuse(n, "setattr");
	if ((n->flags & EXT4_VERITY_FL) && (a->valid & UEXT4_SET_SIZE))
		return flags_refuse_verity(n, "truncate");
	if ((n->flags & EXT4_APPEND_FL) &&
	    (a->valid & (UEXT4_SET_MODE | UEXT4_SET_UID | UEXT4_SET_GID | UEXT4_SET_SIZE | given)))
		return flags_refuse(n, (a->valid & UEXT4_SET_SIZE) ? "truncate" : "setattr");
	return 0;
}

int uext4_setattr(uext4_fs *fs, uint64_t ino, const struct uext4_setattr *a,
		  struct uext4_stat *st)
{
	struct inode *n;
	struct handle *h;
	int err = writable_inode(fs, ino, &n);

	if (err)
		return err;
	if ((err = setattr_times_valid(a))) {
		iput(fs, n);
		return err;
	}
	urw_wrlock(&n->lock);
	if ((err = setattr_allowed(n, a))) {
		urw_unlock(&n->lock);
		iput(fs, n);
		return err;
	}
	if ((a->valid & UEXT4_SET_SIZE) && n->pa)
		balloc_release_prealloc(fs, n);
	bool shrink = (a->valid & UEXT4_SET_SIZE) && S_ISREG(n->mode) && a->size < n->size;
	/* A shrinking truncate goes on an orphan list in a transaction of its
	 * own first, as the kernel's: should the truncate not finish (it may
	 * span transactions), the next mount completes it. */
	if (shrink && (err = inode_check_map_from(fs, n, DIV_ROUND_UP(a->size, fs->block_size))))
		/* A corrupt tree past the new size is refused before the orphan
		 * list changes: the refusal writes nothing but the error record. */
		err = FS_ERROR_SEEN(fs, err, n->ino, 0);
	if (shrink && !err && !(err = handle_begin(fs, &h))) {
		err = orphan_add(h, n);
		err = first_err(err, handle_end(h));
	}
	if (!err && !(err = handle_begin(fs, &h))) {
		err = apply_setattr(h, n, a);
		if (shrink) {
			err = first_err(err, orphan_del(h, n));
		}
		err = first_err(err, handle_end(h));
	}
	if (!err && st)
		inode_to_stat(fs, n, st);
	bool sync = (n->flags & EXT4_SYNC_FL) != 0;

	urw_unlock(&n->lock);
	err = flags_sync_commit(fs, n, sync, err);
	iput(fs, n);
	return err;
}

static int check_file_writable(uext4_file *f)
{
	fs_clear_err();
	if (f->fs->read_only)
		return fs_err(EROFS, "the file system is mounted read-only");
	if ((f->flags & O_ACCMODE) == O_RDONLY)
		return fs_err(EBADF, "inode %llu was opened read-only",
			      (unsigned long long)f->inode->ino);
	if (!S_ISREG(f->inode->mode))
		return fs_err(EINVAL, "inode %llu is not a regular file",
			      (unsigned long long)f->inode->ino);
	return 0;
}

/*
 * file_pwrite(), and once more after a commit if it found no block to
 * take.  Space freed by a transaction that has not committed is counted
 * free but not handed out yet (busy blocks), so a write can run out of the
 * other free blocks at its start or part way (then it is short).
 */
static ssize_t pwrite_committing(uext4_file *f, const void *buf, size_t size, uint64_t off)
{
	ssize_t n = file_pwrite(f->fs, f->inode, buf, size, off);

	if (trans_retry_after_enospc(f->fs, (int)MIN(n, 0)))
		n = file_pwrite(f->fs, f->inode, buf, size, off);
	return n;
}

ssize_t uext4_pwrite(uext4_file *f, const void *buf, size_t size, uint64_t off)
{
	int err = check_file_writable(f);

	if (err)
		return err;
	if (size == 0)
		return 0;
	if ((f->flags & (O_APPEND | UEXT4_O_CACHED_OFFSETS)) == O_APPEND)
		off = FILE_APPEND;      /* placed at the end under the inode lock */
	ssize_t n = pwrite_committing(f, buf, size, off), m;

	/* Short: the rest, after a commit if it too finds no block, so that a
	 * short count is a real lack of space (the writeback cache's WRITEs
	 * are such writes, and the kernel counts a short one as lost data). */
	if (n > 0 && (size_t)n < size &&
	    (m = pwrite_committing(f, (const uint8_t *)buf + n, size - (size_t)n,
				   off == FILE_APPEND ? off : off + (uint64_t)n)) > 0)
		n += m;
	return n;
}

int uext4_fallocate(uext4_file *f, int mode, uint64_t off, uint64_t len)
{
	int err = check_file_writable(f);

	if (err)
		return err;
	if (len == 0)
		return fs_err(EINVAL, "fallocate: length 0");
	err = file_fallocate(f->fs, f->inode, mode, off, len);
	if (trans_retry_after_enospc(f->fs, err))
		err = file_fallocate(f->fs, f->inode, mode, off, len);
	return err;
}

/*
 * fsync and fdatasync: commit the transaction that last wrote the inode
 * (file data is written inside the handles of that transaction, so it is
 * durable with it).  Nothing to do if it is already committed.
 */
int uext4_fsync(uext4_file *f, int datasync)
{
	(void)datasync; /* the inode's transaction holds both */
	fs_clear_err();
	if (f->fs->read_only)
		return 0;
	return trans_commit_tid(f->fs, atomic_load(&f->inode->last_tid));
}

uint64_t uext4_size_headroom(uext4_file *f)
{
	uint64_t max, size;

	urw_rdlock(&f->inode->lock);
	max = file_max_bytes(f->fs, f->inode);
	size = f->inode->size;
	urw_unlock(&f->inode->lock);
	return size < max ? max - size : 0;
}

int uext4_sync(uext4_fs *fs)
{
	fs_clear_err();
	if (fs->read_only)
		return 0;
	return trans_commit(fs);
}

static int change_xattr(uext4_fs *fs, uint64_t ino, const char *name, const void *value,
			size_t size, int flags)
{
	struct inode *n;
	struct handle *h;
	int err = writable_inode(fs, ino, &n);

	if (err)
		return err;
	urw_wrlock(&n->lock);
	/* As the kernel's xattr_permission(): before anything else. */
	err = inode_refuse_if(n, FL_NOCHANGE, value ? "setxattr" : "removexattr");
	if (!err && !(err = handle_begin(fs, &h))) {
		err = xattr_set(h, n, name, value, size, flags);
		if (!err) {
			n->ctime = fs_time(fs);
			err = inode_write(h, n);
		}
		err = first_err(err, handle_end(h));
	}
	bool sync = (n->flags & EXT4_SYNC_FL) != 0;

	urw_unlock(&n->lock);
	err = flags_sync_commit(fs, n, sync, err);
	iput(fs, n);
	return err;
}

int uext4_setxattr(uext4_fs *fs, uint64_t ino, const char *name, const void *value,
		   size_t size, int flags)
{
	if (!value && size)
		return fs_err(EINVAL, "setxattr: no value for %zu bytes", size);
	int err = change_xattr(fs, ino, name, value ? value : "", size, flags);

	if (trans_retry_after_enospc(fs, err))
		err = change_xattr(fs, ino, name, value ? value : "", size, flags);
	return err;
}

int uext4_removexattr(uext4_fs *fs, uint64_t ino, const char *name)
{
	return change_xattr(fs, ino, name, NULL, 0, 0);
}

/* SEEK_DATA / SEEK_HOLE from the file's block map (see file_seek_data()). */
int64_t uext4_lseek(uext4_file *f, int64_t off, int whence)
{
	fs_clear_err();
	if (whence != SEEK_DATA && whence != SEEK_HOLE)
		return fs_err(EINVAL, "lseek: whence %d is not SEEK_DATA or SEEK_HOLE", whence);
	if (off < 0)
		return fs_err(ENXIO, "lseek: negative offset %lld", (long long)off);
	if (!S_ISREG(f->inode->mode))
		return fs_err(EINVAL, "inode %llu is not a regular file",
			      (unsigned long long)f->inode->ino);
	return file_seek_data(f->fs, f->inode, (uint64_t)off, whence == SEEK_DATA);
}

/* ------------------------------------------------------------- flags */

/* +F/-F only on an empty directory (ext4_empty_dir()); the names cached
 * for it by their bytes (absent ones: it is empty) are no answer under the
 * other way of comparing.  Here, as both are the namespace layer's. */
static int casefold_check(struct uext4_fs *fs, struct inode *dir)
{
	int r = dir_is_empty(fs, dir);

	if (r < 0)
		return r;
	if (!r)
		return fs_err(ENOTEMPTY, "set flags: casefold (+F/-F) on directory inode %llu, "
			      "which is not empty", (unsigned long long)dir->ino);
	namecache_forget_dir(dir);
	return 0;
}

int uext4_set_flags(uext4_fs *fs, uint64_t ino, uint32_t flags)
{
	struct fileattr_change c = {.set_flags = true, .flags = flags};

	return flags_set(fs, ino, &c, casefold_check);
}

int uext4_set_fileattr(uext4_fs *fs, uint64_t ino, const struct uext4_fileattr *fa)
{
	struct fileattr_change c = {.set_flags = true, .flags = fa->flags,
				    .set_projid = true, .projid = fa->projid};

	return flags_set(fs, ino, &c, casefold_check);
}

int uext4_set_projid(uext4_fs *fs, uint64_t ino, uint32_t projid)
{
	struct fileattr_change c = {.set_projid = true, .projid = projid};

	return flags_set(fs, ino, &c, casefold_check);
}

/* ------------------------------------------------------------ fs-verity */

static int get_inode(uext4_fs *fs, uint64_t ino, struct inode **out)
{
	fs_clear_err();
	return iget(fs, ino, out);
}

int uext4_verity_enable(uext4_fs *fs, uint64_t ino, const struct uext4_verity_enable *a)
{
	struct inode *n;
	int err = get_inode(fs, ino, &n);

	if (err)
		return err;
	err = verity_enable(fs, n, a);
	iput(fs, n);
	return err;
}

int uext4_verity_measure(uext4_fs *fs, uint64_t ino, struct uext4_verity_digest *d)
{
	struct inode *n;
	int err = get_inode(fs, ino, &n);

	if (err)
		return err;
	err = verity_measure(fs, n, d);
	iput(fs, n);
	return err;
}

ssize_t uext4_verity_read_metadata(uext4_fs *fs, uint64_t ino, int type, uint64_t off,
				   void *buf, size_t len)
{
	struct inode *n;
	ssize_t ret = get_inode(fs, ino, &n);

	if (ret)
		return ret;
	ret = verity_read_metadata(fs, n, type, off, buf, len);
	iput(fs, n);
	return ret;
}

/* ------------------------------------------------------------ quotas */

int uext4_quota_get(uext4_fs *fs, int type, uint32_t id, struct uext4_quota *q)
{
	struct qt_entry e;
	int err = quota_get(fs, type, id, &e);

	*q = (struct uext4_quota){ .id = id };
	if (err)
		return err;
	*q = (struct uext4_quota){ .id = id, .space = e.curspace, .inodes = e.curinodes,
				   .bsoft = e.bsoftlimit, .bhard = e.bhardlimit,
				   .isoft = e.isoftlimit, .ihard = e.ihardlimit,
				   .btime = (int64_t)e.btime, .itime = (int64_t)e.itime };
	return 0;
}

int uext4_quota_set(uext4_fs *fs, int type, uint32_t id, const struct uext4_quota *q)
{
	struct qt_entry lim = { .bsoftlimit = q->bsoft, .bhardlimit = q->bhard,
				.isoftlimit = q->isoft, .ihardlimit = q->ihard };
	struct handle *h;
	int err;

	if (fs->read_only)
		return fs_err(EROFS, "setting quota limits on a read-only mount");
	if ((err = handle_begin(fs, &h)))
		return err;
	err = quota_set_limits(h, type, id, &lim);
	return first_err(err, handle_end(h));
}

int uext4_quota_get_grace(uext4_fs *fs, int type, uint32_t *bgrace, uint32_t *igrace)
{
	return quota_grace(fs, type, bgrace, igrace);
}

int uext4_quota_set_grace(uext4_fs *fs, int type, uint32_t bgrace, uint32_t igrace)
{
	struct handle *h;
	int err;

	if (fs->read_only)
		return fs_err(EROFS, "setting quota grace times on a read-only mount");
	if ((err = handle_begin(fs, &h)))
		return err;
	err = quota_set_grace(h, type, bgrace, igrace);
	return first_err(err, handle_end(h));
}

int uext4_quota_list(uext4_fs *fs, int type, uint32_t **ids, size_t *count)
{
	return quota_ids(fs, type, ids, count);
}
