/*
 * namei.c - namespace operations: create, mknod, mkdir, symlink, link,
 * unlink, rmdir, rename (public API, include/uext4.h).
 *
 * Locking (ARCHITECTURE.md): each operation looks names up with the
 * directory locked for reading, takes references, then locks every inode
 * it changes for writing in inode-number order (ranks RANK_INODE ..
 * RANK_INODE_4), checks that the names still point where they did (else
 * it starts over), and only then opens a handle.  Inodes whose last link
 * goes are freed by the final iput(), which runs after every lock is
 * dropped.  Renames that move something between directories also hold
 * the fs-wide rename lock (RANK_RENAME) so that the "not into its own
 * subtree" check sees a stable tree, as the kernel's s_vfs_rename_mutex.
 */
#include "acl.h"
#include "dir.h"
#include "dirtimes.h"
#include "error.h"
#include "flags.h"
#include "icache.h"
#include "ifree.h"
#include "inode.h"
#include "internal.h"
#include "lock.h"
#include "ondisk.h"
#include "orphan.h"
#include "symlink.h"
#include "trans.h"
#include "undo.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#define EXT4_LINK_MAX 65000

/* Rename lock: one per process is enough to order cross-directory renames
 * of all mounts (rare, never on a hot path). */
static struct ulock rename_lock_storage;
static pthread_once_t rename_once = PTHREAD_ONCE_INIT;

static void rename_lock_init(void)
{
	ulock_init(&rename_lock_storage, RANK_RENAME);
}

static struct ulock *rename_lock(void)
{
	pthread_once(&rename_once, rename_lock_init);
	return &rename_lock_storage;
}

/* ------------------------------------------------------------- helpers */

static int check_writable(uext4_fs *fs)
{
	fs_clear_err();
	if (fs->read_only)
		return fs_err(EROFS, "the file system is mounted read-only");
	return 0;
}

/* A name a new entry may take: 1..255 bytes, no '/', not "." or "..". */
static int check_name(const char *name, size_t *len)
{
	if (!name)
		return fs_err(EINVAL, "no file name given");
	*len = strlen(name);
	if (*len == 0)
		return fs_err(ENOENT, "empty file name");
	if (*len > EXT4_NAME_LEN)
		return fs_err(ENAMETOOLONG, "file name of %zu bytes (at most %u)", *len,
			      EXT4_NAME_LEN);
	if (memchr(name, '/', *len))
		return fs_err(EINVAL, "file name \"%s\" contains '/'", name);
	if ((*len == 1 && name[0] == '.') || (*len == 2 && name[0] == '.' && name[1] == '.'))
		return fs_err(EINVAL, "\"%s\" cannot be created, removed or renamed", name);
	return 0;
}

static int get_dir(uext4_fs *fs, uint64_t ino, struct inode **out)
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

/* Look name up with dir locked for reading: 0 and *ino, or -ENOENT. */
static int lookup_unlocked(uext4_fs *fs, struct inode *dir, const char *name, size_t len,
			   uint64_t *ino)
{
	unsigned ft;
	int err;

	urw_rdlock(&dir->lock);
	err = dir_lookup_locked(fs, dir, name, len, ino, &ft);
	urw_unlock(&dir->lock);
	return err;
}

/*
 * Look name up and get its inode (*out NULL and 0 if the name is absent).
 * Between the two, an unlink of the same name in another thread may free
 * the inode (with dir->lock shared by both, or not held between the
 * lookup and iget()): iget() then finds a free inode (EUCLEAN) or a
 * deleted one (ENOENT).  That is corruption only if the name still points
 * to it; else look again.
 *
 * A success needs no second look (unlike the path walk's, api.c
 * walk_lookup()): the number may meanwhile have been freed and given to
 * another file, but every caller (unlink/rmdir, rename) checks the name
 * again with the locks held (a lookup, or under the leaf lock in
 * dir_remove_shared()) and starts over unless it still names the same
 * number, and the reference taken here keeps that number from being
 * freed and reused from then on.
 */
static int lookup_iget_or_none(uext4_fs *fs, struct inode *dir, const char *name, size_t len,
			       uint64_t *ino, struct inode **out)
{
	*out = NULL;
	for (;;) {
		char msg[512];
		uint64_t now;
		int err = lookup_unlocked(fs, dir, name, len, ino);

		if (err == -ENOENT) {
			*ino = 0;
			return 0;
		}
		if (err)
			return err;
		err = iget(fs, *ino, out);
		if (err != -EUCLEAN && err != -ENOENT)
			return err;
		snprintf(msg, sizeof(msg), "%s", uext4_last_error());
		if (lookup_unlocked(fs, dir, name, len, &now) == 0 && now == *ino)
			return fs_err(-err, "%s", msg);
	}
}

/* The same for a name that must exist: ENOENT if absent, with the
 * message the lookup that found it absent left. */
static int lookup_iget(uext4_fs *fs, struct inode *dir, const char *name, size_t len,
		       uint64_t *ino, struct inode **out)
{
	int err = lookup_iget_or_none(fs, dir, name, len, ino, out);

	return !err && !*out ? -ENOENT : err;
}

/* Up to four inodes locked for writing in inode-number order; `shared`
 * (if set, one of them) is locked for reading instead. */
struct lockset {
	struct inode *v[4];
	int n;
	struct inode *shared;
};

static void lockset_add(struct lockset *ls, struct inode *n)
{
	if (!n)
		return;
	for (int i = 0; i < ls->n; i++)
		if (ls->v[i] == n)
			return;
	int i = ls->n++;
	while (i > 0 && ls->v[i - 1]->ino > n->ino) {
		ls->v[i] = ls->v[i - 1];
		i--;
	}
	ls->v[i] = n;
}

static void lockset_lock(struct lockset *ls)
{
	for (int i = 0; i < ls->n; i++) {
		if (ls->v[i] == ls->shared)
			urw_rdlock_as(&ls->v[i]->lock, RANK_INODE + i);
		else
			urw_wrlock_as(&ls->v[i]->lock, RANK_INODE + i);
	}
}

static void lockset_unlock(struct lockset *ls)
{
	for (int i = ls->n - 1; i >= 0; i--)
		urw_unlock_as(&ls->v[i]->lock, RANK_INODE + i);
}

/* A directory being removed has no links: nothing may be created in it. */
static int check_dir_alive(struct inode *dir)
{
	if (dir->links == 0)
		return fs_err(ENOENT, "directory inode %llu has been removed",
			      (unsigned long long)dir->ino);
	return 0;
}

static void touch_dir(struct uext4_fs *fs, struct inode *dir)
{
	dir->mtime = dir->ctime = fs_time(fs);
}

/* Count one more subdirectory in dir (dir_nlink: 1 means "many"). */
static int dir_inc_links(uext4_fs *fs, struct inode *dir)
{
	if (dir->links == 1 && FS_HAS_RO_COMPAT(fs, DIR_NLINK))
		return 0;
	if (dir->links + 1 >= EXT4_LINK_MAX) {
		if (!FS_HAS_RO_COMPAT(fs, DIR_NLINK))
			return fs_err(EMLINK, "directory inode %llu has %u subdirectories, the "
				      "most without dir_nlink", (unsigned long long)dir->ino,
				      dir->links - 2);
		dir->links = 1;
		return 0;
	}
	dir->links++;
	return 0;
}

static void dir_dec_links(struct inode *dir)
{
	if (dir->links > 2)
		dir->links--;
}

/*
 * Drop a link.  An inode that lost its last one goes at its last iput(),
 * maybe much later (it is open); it goes on an orphan list in this same
 * transaction, so that a crash before then frees it at the next mount.
 * Not one claimed to be freed in this transaction (inode_claim_free()).
 */
static int drop_link(struct handle *h, struct inode *n)
{
	n->ctime = fs_time(h->fs);
	if (n->links > 0)
		n->links--;
	if (n->links == 0 || (S_ISDIR(n->mode) && n->links <= 1)) {
		n->links = 0;
		atomic_fetch_or(&n->istate, INODE_UNLINKED);
		if (!(atomic_load(&n->istate) & INODE_FREEING))
			return orphan_add(h, n);
	}
	return 0;
}

static void stat_of(uext4_fs *fs, struct inode *n, struct uext4_stat *st)
{
	if (!st)
		return;
	urw_rdlock(&n->lock);
	inode_to_stat(fs, n, st);
	urw_unlock(&n->lock);
}

/* Device numbers as the kernel stores them in i_block. */
static void encode_rdev(struct inode *n, uint64_t rdev)
{
	struct ext4_inode *r = inode_raw_mut(n);
	uint32_t ma = major(rdev), mi = minor(rdev);

	memset(r->i_block, 0, sizeof(r->i_block));
	if (ma < 256 && mi < 256) {
		r->i_block[0] = cpu_to_le32((ma << 8) | mi);
	} else {
		r->i_block[1] = cpu_to_le32((mi & 0xff) | (ma << 8) | ((mi & ~0xffu) << 12));
	}
}

/* ------------------------------------------------------------- creating */

struct new_node {
	uint32_t mode;
	uint64_t rdev;
	const char *target;     /* symlinks */
};

/* Set up the new inode's body: directory entries, symlink target, device
 * number.  Returns 1 when the inode changed and must be written again
 * (inode_new() wrote it already), 0 when not, or -errno. */
static int init_body(struct handle *h, struct inode *dir, struct inode *n,
		     const struct new_node *nn)
{
	int err = 0;

	if (S_ISDIR(nn->mode))
		err = dir_make(h, n, dir->ino);
	else if (S_ISLNK(nn->mode))
		err = symlink_write(h, n, nn->target, strlen(nn->target));
	else if (S_ISCHR(nn->mode) || S_ISBLK(nn->mode))
		encode_rdev(n, nn->rdev);
	else
		return 0; /* regular files, fifos, sockets: nothing more */
	return err ? err : 1;
}

/*
 * Undo: an operation that fails inside its handle plays back its undo log
 * (undo.h), recorded as it went, so the transaction holds either the
 * whole operation or nothing of it.
 */

/* Inside the handle, dir locked: make the inode, its inherited ACLs (ai)
 * and its entry. */
static int create_locked(struct handle *h, struct inode *dir, const char *name, size_t len,
			 const struct new_node *nn, const struct acl_inherit *ai, bool looked_up,
			 struct inode **out)
{
	struct inode *n;
	struct inode_undo u;    /* on the stack: no allocation per create */
	struct undo_log log;
	int err = inode_new_undoable(h, dir, nn->mode, &n, &u);

	*out = NULL;
	if (err)
		return err;
	undo_init(&log, h);
	undo_new_inode(&log, n, &u);
	undo_fields(&log, dir);
	if (S_ISDIR(nn->mode) && (err = dir_inc_links(h->fs, dir)))
		goto undo;
	if ((err = init_body(h, dir, n, nn)) == 1)
		err = inode_write(h, n);
	/* Before the entry: discard_new_inode() gives the ACLs back. */
	if (!err && (ai->access || ai->deflt))
		err = acl_inherit_apply(h, n, ai);
	/* Both set the directory's times and write it.  dir_add_excl() checks
	 * the name itself, unless make_node() just looked it up. */
	if (!err) {
		undo_name_added(&log, dir, name, len, n->ino);
		err = looked_up ? dir_add(h, dir, name, len, n->ino, ftype_of_mode(nn->mode))
				: dir_add_excl(h, dir, name, len, n->ino, ftype_of_mode(nn->mode));
	}
	if (!err) {
		inode_created(n);
		*out = n;
		return 0;
	}
undo:
	*out = n;
	return undo_rollback(&log, err);
}

/* A create with dir->lock shared (parallel creates in one directory,
 * see dir.h): what make_in_leaf() needs, called by dir_add_shared()
 * with the name's leaf locked. */
struct shared_make {
	struct handle *h;
	struct inode *dir, *n;
	const struct new_node *nn;
	const struct acl_inherit *ai;
	struct inode_undo u;
};

/* Make the inode, then write the directory's inode: everything that can
 * fail comes before the entry (which then cannot), so an undo gives back
 * the inode only and never touches the shared directory's blocks. */
static int make_in_leaf(void *ctx, uint64_t *ino)
{
	struct shared_make *m = ctx;
	struct undo_log log;
	int err = inode_new_undoable(m->h, m->dir, m->nn->mode, &m->n, &m->u);

	if (err) {
		m->n = NULL;
		return err;
	}
	undo_init(&log, m->h);
	undo_new_inode(&log, m->n, &m->u);
	if ((err = init_body(m->h, m->dir, m->n, m->nn)) == 1)
		err = inode_write(m->h, m->n);
	if (!err && (m->ai->access || m->ai->deflt))
		err = acl_inherit_apply(m->h, m->n, m->ai);
	if (!err)
		err = dirtimes_touch_shared(m->h, m->dir);
	if (!err) {
		/* The entry goes in next, the leaf still locked. */
		inode_created(m->n);
		*ino = m->n->ino;
		return 0;
	}
	return undo_rollback(&log, err);
}

/* Inside the handle, dir->lock held for reading: 0, an error (*out, if
 * set, is to be dropped), or DIR_NEED_WIDE (nothing done). */
static int create_shared(struct handle *h, struct inode *dir, const char *name, size_t len,
			 const struct new_node *nn, const struct acl_inherit *ai,
			 struct inode **out)
{
	struct shared_make m = {.h = h, .dir = dir, .nn = nn, .ai = ai};
	int err = dir_add_shared(h, dir, name, len, ftype_of_mode(nn->mode), make_in_leaf, &m);

	*out = m.n;
	return err;
}

static int make_node_once(uext4_fs *fs, uint64_t dirino, const char *name,
			  const struct new_node *nn, struct uext4_stat *st);

/* ENOSPC while freed blocks wait for a commit: commit and try once more. */
static int make_node(uext4_fs *fs, uint64_t dirino, const char *name,
		     const struct new_node *nn, struct uext4_stat *st)
{
	int err = make_node_once(fs, dirino, name, nn, st);

	if (trans_retry_after_enospc(fs, err))
		err = make_node_once(fs, dirino, name, nn, st);
	return err;
}

static int make_node_once(uext4_fs *fs, uint64_t dirino, const char *name,
			  const struct new_node *given, struct uext4_stat *st)
{
	struct new_node nnode = *given, *nn = &nnode;
	struct acl_inherit ai = {0};
	struct inode *dir, *n = NULL;
	struct handle *h;
	uint64_t existing;
	size_t len;
	unsigned ft;
	bool looked_up, wide;
	int err;

	if ((err = check_writable(fs)) || (err = check_name(name, &len)))
		return err == -EINVAL && name && name[0] == '.' ? fs_err(EEXIST, "\"%s\" exists",
									  name) : err;
	if ((err = get_dir(fs, dirino, &dir)))
		return err;
	/* Files go into an htree directory with its lock shared, unless
	 * their leaf must split (DIR_NEED_WIDE); a subdirectory changes the
	 * parent's link count, so it takes the lock exclusive. */
	wide = S_ISDIR(nn->mode);
again:
	if (wide) {
		urw_wrlock(&dir->lock);
	} else {
		urw_rdlock(&dir->lock);
		if (!dir_can_share(fs, dir)) {
			urw_unlock(&dir->lock);
			wide = true;
			goto again;
		}
	}
	err = check_dir_alive(dir);
	/* An htree directory checks the name in dir_add_excl()'s single leaf
	 * scan (or dir_add_shared()'s); others look it up first, before an
	 * inode is taken. */
	looked_up = !(dir->flags & EXT4_INDEX_FL);
	if (!err && looked_up) {
		err = dir_lookup_locked(fs, dir, name, len, &existing, &ft);
		if (err == 0)
			err = fs_err(EEXIST, "\"%s\" exists in directory inode %llu (inode %llu)",
				     name, (unsigned long long)dirino,
				     (unsigned long long)existing);
		else if (err == -ENOENT)
			err = 0;
	}
	/* As the kernel's may_create(): an existing name first, then EPERM;
	 * a name strict casefolding refuses last (ext4_add_entry()). */
	if (!err)
		err = inode_refuse_if(dir, EXT4_IMMUTABLE_FL, "create in directory");
	if (!err)
		err = dir_check_new_name(fs, dir, name, len);
	/* As symlink(2): an existing name wins over a too long target. */
	if (!err && S_ISLNK(nn->mode) && strlen(nn->target) >= fs->block_size)
		err = fs_err(ENAMETOOLONG, "symlink target of %zu bytes (at most %u)",
			     strlen(nn->target), fs->block_size - 1);
	/* The mode as the umask or dir's default ACL leave it (dir locked:
	 * the default ACL cannot change until the entry is in). */
	if (!err)
		err = acl_inherit_prepare(fs, dir, &nn->mode, &ai);
	if (!err && (err = handle_begin(fs, &h)) == 0) {
		err = wide ? create_locked(h, dir, name, len, nn, &ai, looked_up, &n)
			   : create_shared(h, dir, name, len, nn, &ai, &n);
		err = first_err(err, handle_end_unthrottled(h));
	}
	acl_inherit_free(&ai);
	bool sync = (dir->flags & FL_DIRSYNC_ANY) != 0;

	urw_unlock(&dir->lock);
	if (err != DIR_NEED_WIDE)
		err = trans_throttle(fs, err);
	if (err == DIR_NEED_WIDE) {
		/* Nothing was done: again with the wide lock (a leaf split). */
		nnode = *given;
		memset(&ai, 0, sizeof(ai));
		wide = true;
		goto again;
	}
	err = flags_sync_commit(fs, dir, sync, err);
	if (!err)
		stat_of(fs, n, st);
	iput(fs, n);
	iput(fs, dir);
	return err;
}

int uext4_create(uext4_fs *fs, uint64_t dir, const char *name, uint32_t mode,
		 struct uext4_stat *st)
{
	struct new_node nn = {.mode = S_IFREG | (mode & 07777)};

	return make_node(fs, dir, name, &nn, st);
}

int uext4_mknod(uext4_fs *fs, uint64_t dir, const char *name, uint32_t mode, uint64_t rdev,
		struct uext4_stat *st)
{
	struct new_node nn = {.mode = mode, .rdev = rdev};

	switch (mode & S_IFMT) {
	case 0:
		nn.mode |= S_IFREG;
		break;
	case S_IFREG: case S_IFCHR: case S_IFBLK: case S_IFIFO: case S_IFSOCK:
		break;
	default:
		return fs_err(EINVAL, "mknod: file type 0%o is not a regular file, device, fifo "
			      "or socket", mode & S_IFMT);
	}
	return make_node(fs, dir, name, &nn, st);
}

int uext4_mkdir(uext4_fs *fs, uint64_t dir, const char *name, uint32_t mode,
		struct uext4_stat *st)
{
	struct new_node nn = {.mode = S_IFDIR | (mode & 07777)};

	return make_node(fs, dir, name, &nn, st);
}

int uext4_symlink(uext4_fs *fs, uint64_t dir, const char *name, const char *target,
		  struct uext4_stat *st)
{
	struct new_node nn = {.mode = S_IFLNK | 0777, .target = target};
	size_t tl = target ? strlen(target) : 0;

	if (tl == 0)
		return fs_err(ENOENT, "symlink: empty target");
	return make_node(fs, dir, name, &nn, st);
}

/* ------------------------------------------------------------- tmpfile */

/* Inside the handle, dir locked for writing: a regular file with no name
 * and no links, on an orphan list from this same transaction on, so that
 * a crash frees it at the next mount (the kernel's ext4_tmpfile()). */
static int make_tmpfile(struct handle *h, struct inode *dir, uint32_t mode, bool linkable,
			const struct acl_inherit *ai, struct inode **out)
{
	struct inode *n;
	struct inode_undo u;
	struct undo_log log;
	int err = inode_new_undoable(h, dir, mode, &n, &u);

	*out = NULL;
	if (err)
		return err;
	undo_init(&log, h);
	undo_new_inode(&log, n, &u);
	if (ai->access || ai->deflt)
		err = acl_inherit_apply(h, n, ai);
	if (!err) {
		undo_unlinked(&log, n);
		n->links = 0;
		atomic_fetch_or(&n->istate, INODE_UNLINKED | (linkable ? INODE_LINKABLE : 0));
		err = orphan_add(h, n);
	}
	if (!err)
		err = inode_write(h, n);
	if (!err) {
		inode_created(n);
		*out = n;
		return 0;
	}
	*out = n;
	return undo_rollback(&log, err);
}

int uext4_tmpfile(uext4_fs *fs, uint64_t dirino, uint32_t mode, int flags, uext4_file **out,
		  struct uext4_stat *st)
{
	struct acl_inherit ai = {0};
	struct inode *dir, *n = NULL;
	struct handle *h;
	uint32_t fmode = S_IFREG | (mode & 07777);
	int err;

	*out = NULL;
	if ((flags & O_ACCMODE) == O_RDONLY)
		return fs_err(EINVAL, "O_TMPFILE needs O_WRONLY or O_RDWR");
	if ((err = check_writable(fs)) || (err = get_dir(fs, dirino, &dir)))
		return err;
	urw_wrlock(&dir->lock);
	if (!(err = check_dir_alive(dir)) &&
	    !(err = inode_refuse_if(dir, EXT4_IMMUTABLE_FL, "O_TMPFILE in directory")))
		err = acl_inherit_prepare(fs, dir, &fmode, &ai);
	if (!err && !(err = handle_begin(fs, &h))) {
		err = make_tmpfile(h, dir, fmode, !(flags & O_EXCL), &ai, &n);
		err = first_err(err, handle_end(h));
	}
	acl_inherit_free(&ai);
	urw_unlock(&dir->lock);
	iput(fs, dir);
	/* The open file holds it; without one its iput() frees it. */
	if (!err)
		err = uext4_open(fs, n->ino, flags & ~(O_TMPFILE | O_CREAT | O_EXCL | O_TRUNC), out);
	if (!err)
		stat_of(fs, n, st);
	if (n)
		iput(fs, n);
	return err;
}

/* ------------------------------------------------------------- link */

/*
 * ext4_link() and ext4_rename(): a directory with project inheritance
 * (+P) takes in only inodes of its project, so that what it holds is
 * counted in it (EXDEV: mv copies instead, and the copies inherit).  The
 * flag decides, with or without the project feature, as in the kernel.
 * Both inodes locked.
 */
static int check_project(const struct inode *dir, const struct inode *n, const char *what)
{
	if (!(dir->flags & EXT4_PROJINHERIT_FL) || dir->projid == n->projid)
		return 0;
	return fs_err(EXDEV, "%s: inode %llu is in project %u, directory inode %llu (+P) in "
		      "project %u", what, (unsigned long long)n->ino, n->projid,
		      (unsigned long long)dir->ino, dir->projid);
}

int uext4_link(uext4_fs *fs, uint64_t ino, uint64_t newdir, const char *newname,
	       struct uext4_stat *st)
{
	struct inode *n, *dir;
	struct lockset ls = {0};
	struct handle *h;
	uint64_t existing;
	size_t len;
	unsigned ft;
	int err;

	if ((err = check_writable(fs)) || (err = check_name(newname, &len)))
		return err;
	if ((err = iget(fs, ino, &n)))
		return err;
	if (S_ISDIR(n->mode)) {
		iput(fs, n);
		return fs_err(EPERM, "link: inode %llu is a directory", (unsigned long long)ino);
	}
	if ((err = get_dir(fs, newdir, &dir))) {
		iput(fs, n);
		return err;
	}
	lockset_add(&ls, dir);
	lockset_add(&ls, n);
	lockset_lock(&ls);
	/* In vfs_link()'s order: the new name, the directory, the inode. */
	if (!(err = check_dir_alive(dir))) {
		err = dir_lookup_locked(fs, dir, newname, len, &existing, &ft);
		err = err == 0 ? fs_err(EEXIST, "\"%s\" exists", newname)
			       : err == -ENOENT ? 0 : err;
	}
	if (!err && !(err = inode_refuse_if(dir, EXT4_IMMUTABLE_FL, "link into directory")) &&
	    !(err = inode_refuse_if(n, FL_NOCHANGE, "link")) &&
	    !(err = dir_check_new_name(fs, dir, newname, len))) {
		if (n->links == 0 && !(atomic_load(&n->istate) & INODE_LINKABLE))
			err = fs_err(ENOENT, "link: inode %llu has been removed",
				     (unsigned long long)ino);
		else if (n->links >= EXT4_LINK_MAX)
			err = fs_err(EMLINK, "link: inode %llu already has %u links",
				     (unsigned long long)ino, n->links);
		else
			err = check_project(dir, n, "link");
	}
	if (!err && !(err = handle_begin(fs, &h))) {
		uint32_t links = n->links;
		struct undo_log log;

		undo_init(&log, h);
		undo_fields(&log, n);
		undo_fields(&log, dir);
		undo_name_added(&log, dir, newname, len, n->ino);
		err = dir_add(h, dir, newname, len, n->ino, ftype_of_mode(n->mode));
		if (!err) {
			n->links++;
			n->ctime = fs_time(fs);
			touch_dir(fs, dir);
			err = inode_write(h, n);
			if (!err)
				err = inode_write(h, dir);
			/* An O_TMPFILE inode's first name: off its orphan list,
			 * last, so an undo finds it still there. */
			if (!err && links == 0)
				err = orphan_del(h, n);
			if (!err && links == 0)
				atomic_fetch_and(&n->istate,
						 ~(uint32_t)(INODE_UNLINKED | INODE_LINKABLE));
		}
		/* EEXIST: nothing changed, nothing to write back. */
		if (err && err != -EEXIST)
			undo_rollback(&log, err);
		err = first_err(err, handle_end(h));
	}
	bool sync = (dir->flags & FL_DIRSYNC_ANY) != 0;

	lockset_unlock(&ls);
	err = flags_sync_commit(fs, dir, sync, err);
	if (!err)
		stat_of(fs, n, st);
	iput(fs, dir);
	iput(fs, n);
	return err;
}

/* ------------------------------------------------------------- unlink, rmdir */

/* The kernel's may_delete() (both locked): neither the directory nor the
 * inode immutable or append-only (EPERM), then the kind of inode. */
static int remove_allowed(struct inode *dir, struct inode *c, bool want_dir, const char *name)
{
	int err;

	if ((err = inode_refuse_if(dir, FL_NOCHANGE, "remove from directory")) ||
	    (err = inode_refuse_if(c, FL_NOCHANGE, "remove")))
		return err;
	if (want_dir && !S_ISDIR(c->mode))
		return fs_err(ENOTDIR, "rmdir: \"%s\" is not a directory", name);
	if (!want_dir && S_ISDIR(c->mode))
		return fs_err(EISDIR, "unlink: \"%s\" is a directory", name);
	return 0;
}

/* An unlink with dir->lock shared: what unlink_in_leaf() changes, and
 * what it was before. */
struct shared_unlink {
	struct handle *h;
	struct inode *dir, *c;
	bool may_free;          /* c may be claimed to be freed at once */
};

/* Called by dir_remove_shared() with the entry found and its leaf locked:
 * the inode's link and the directory's inode first (all that can fail),
 * then the entry goes.  A failure puts the inode back as it was. */
static int unlink_in_leaf(void *ctx)
{
	struct shared_unlink *u = ctx;
	struct inode *c = u->c;
	struct undo_log log;
	int err;

	undo_init(&log, u->h);
	undo_fields(&log, c);
	if (u->may_free)
		inode_claim_free(c);
	undo_claimed_free(&log, c);
	undo_unlinked(&log, c);
	err = drop_link(u->h, c);
	if (!err)
		err = inode_write(u->h, c);
	if (!err)
		err = dirtimes_touch_shared(u->h, u->dir);
	return err ? undo_rollback(&log, err) : 0;
}

/* Remove name (which must be of the kind `want_dir` asks) from dir. */
static int remove_name(uext4_fs *fs, uint64_t dirino, const char *name, bool want_dir)
{
	struct inode *dir, *c = NULL;
	struct handle *h;
	size_t len;
	uint64_t ino, again;
	unsigned ft;
	int err, freed;
	bool sync = false;

	if ((err = check_writable(fs)))
		return err;
	if ((err = check_name(name, &len)))
		return err == -EINVAL && want_dir && len == 2 ? fs_err(ENOTEMPTY, "rmdir: \"..\"")
							       : err;
	if ((err = get_dir(fs, dirino, &dir)))
		return err;
	/* A file's name leaves an htree directory with the directory's lock
	 * shared (dir_remove_shared()); rmdir changes the parent's link count
	 * and takes it exclusive, as does anything dir_remove_shared() sends
	 * back (DIR_NEED_WIDE). */
	bool wide = want_dir;

	for (;;) {
		struct lockset ls = {0};

		if ((err = lookup_iget(fs, dir, name, len, &ino, &c)))
			break;
		lockset_add(&ls, dir);
		lockset_add(&ls, c);
		ls.shared = wide || c == dir ? NULL : dir;
		lockset_lock(&ls);
		if (ls.shared && !dir_can_share(fs, dir)) {
			lockset_unlock(&ls);
			iput(fs, c);
			c = NULL;
			wide = true;
			continue;
		}
		/* Renamed meanwhile?  Shared, the leaf lock makes the check
		 * (dir_remove_shared(): DIR_MOVED); wide, a lookup here. */
		err = ls.shared ? 0 : dir_lookup_locked(fs, dir, name, len, &again, &ft);
		if (err || (!ls.shared && again != c->ino)) {
			lockset_unlock(&ls);
			if (err)
				break;
			iput(fs, c);
			c = NULL;
			continue; /* renamed meanwhile: start over */
		}
		err = remove_allowed(dir, c, want_dir, name);
		if (!err && want_dir && (err = dir_is_empty(fs, c)) >= 0)
			err = err ? 0 : fs_err(ENOTEMPTY, "rmdir: directory \"%s\" is not empty", name);
		/* The last link of a file nobody holds open (a lookup count
		 * aside: its FORGET follows soon): its free follows at once,
		 * so refuse now if it would fail (image unchanged). */
		bool last = !err && (want_dir || c->links == 1) && inode_users(c) == 1;

		if (last)
			err = inode_check_freeable(fs, c);
		if (!err && ls.shared && !(err = handle_begin(fs, &h))) {
			struct shared_unlink u = {.h = h, .dir = dir, .c = c, .may_free = last};

			err = dir_remove_shared(h, dir, name, len, c->ino, unlink_in_leaf, &u);
			if (!err && (atomic_load(&c->istate) & INODE_FREEING))
				err = inode_free_now(h, c);
			err = first_err(err, handle_end_unthrottled(h));
			if (err == DIR_NEED_WIDE || err == DIR_MOVED) {
				/* Nothing was done: again with the wide lock,
				 * or from the lookup (renamed meanwhile). */
				lockset_unlock(&ls);
				iput(fs, c);
				c = NULL;
				wide = wide || err == DIR_NEED_WIDE;
				continue;
			}
		} else if (!err && !(err = handle_begin(fs, &h))) {
			struct undo_log log;

			undo_init(&log, h);
			undo_fields(&log, c);
			undo_fields(&log, dir);
			undo_name_removed(&log, dir, name, len, c->ino, ftype_of_mode(c->mode));
			err = dir_remove(h, dir, name, len, c->ino);
			if (!err) {
				if (want_dir) {
					c->links = 1;
					dir_dec_links(dir);
				}
				if (last)
					inode_claim_free(c);
				undo_claimed_free(&log, c);
				undo_unlinked(&log, c);
				err = drop_link(h, c);
				touch_dir(fs, dir);
				if (!err)
					err = inode_write(h, c);
				if (!err)
					err = inode_write(h, dir);
			}
			if (err)
				undo_rollback(&log, err);  /* the name and the links back */
			else if (atomic_load(&c->istate) & INODE_FREEING)
				err = inode_free_now(h, c);
			err = first_err(err, handle_end_unthrottled(h));
		}
		sync = (dir->flags & FL_DIRSYNC_ANY) != 0;
		lockset_unlock(&ls);
		err = trans_throttle(fs, err);
		break;
	}
	err = flags_sync_commit(fs, dir, sync, err);
	/* The last reference of an unlinked inode frees it; if that fails
	 * (corrupt), the name is gone but the unlink reports the error. */
	freed = iput(fs, c);
	iput(fs, dir);
	return err ? err : freed;
}

int uext4_unlink(uext4_fs *fs, uint64_t dir, const char *name)
{
	return remove_name(fs, dir, name, false);
}

int uext4_rmdir(uext4_fs *fs, uint64_t dir, const char *name)
{
	return remove_name(fs, dir, name, true);
}

/* ------------------------------------------------------------- rename */

struct rename_op {
	uext4_fs *fs;
	struct inode *od, *nd, *s, *t;  /* dirs, source, target (or NULL) */
	const char *oname, *nname;
	size_t olen, nlen;
	unsigned flags;
	bool wh_wanted;                 /* flags has UEXT4_RENAME_WHITEOUT */
	bool sync;                      /* a directory is +S or +D: commit at the end */
	struct inode *wh;               /* RENAME_WHITEOUT: the new whiteout, or NULL */
	struct inode_undo wh_undo;      /* how to give it back */
	struct undo_log *log;           /* in rename_locked(): what to undo on failure */
};

/* Is dir `d` the directory `s` or below it?  (rename lock held) */
static int is_in_subtree(uext4_fs *fs, struct inode *s, struct inode *d)
{
	uint64_t cur = d->ino;
	int depth = 0;

	while (cur != EXT4_ROOT_INO) {
		struct inode *n;
		uint64_t parent;
		int err;

		if (cur == s->ino)
			return 1;
		if (++depth > 65536)
			return fs_corrupt("directory inode %llu: \"..\" chain loops",
					  (unsigned long long)d->ino);
		if ((err = iget(fs, cur, &n)))
			return err;
		err = lookup_unlocked(fs, n, "..", 2, &parent);
		iput(fs, n);
		if (err)
			return err;
		cur = parent;
	}
	return cur == s->ino;
}

/* The checks rename(2) makes once everything is locked. */
static int rename_check(struct rename_op *r)
{
	struct inode *s = r->s, *t = r->t;
	int err;

	if ((err = check_dir_alive(r->nd)))
		return err;
	if ((r->flags & UEXT4_RENAME_EXCHANGE) && !t)
		return fs_err(ENOENT, "rename: \"%s\" does not exist to exchange with", r->nname);
	if (t && (r->flags & UEXT4_RENAME_NOREPLACE))
		return fs_err(EEXIST, "rename: \"%s\" exists", r->nname);
	/* may_delete() of each name that goes or changes, may_create() of a
	 * new one (all four locked). */
	if ((err = inode_refuse_if(r->od, FL_NOCHANGE, "rename out of directory")) ||
	    (err = inode_refuse_if(s, FL_NOCHANGE, "rename")) ||
	    (err = inode_refuse_if(r->nd, t ? FL_NOCHANGE : EXT4_IMMUTABLE_FL,
				   "rename into directory")) ||
	    (t && (err = inode_refuse_if(t, FL_NOCHANGE, "rename over"))))
		return err;
	if (r->flags & UEXT4_RENAME_EXCHANGE)   /* ext4_cross_rename(): both ways */
		return first_err(check_project(r->nd, s, "rename"),
				 check_project(r->od, t, "rename"));
	if (t && S_ISDIR(s->mode) && !S_ISDIR(t->mode))
		return fs_err(ENOTDIR, "rename: \"%s\" is not a directory", r->nname);
	if (t && !S_ISDIR(s->mode) && S_ISDIR(t->mode))
		return fs_err(EISDIR, "rename: \"%s\" is a directory", r->nname);
	if ((err = check_project(r->nd, s, "rename")))
		return err;
	if (t && S_ISDIR(t->mode)) {
		err = dir_is_empty(r->fs, t);
		if (err <= 0)
			return err ? err : fs_err(ENOTEMPTY, "rename: directory \"%s\" is not empty",
						  r->nname);
	}
	return 0;
}

/* A directory moving from one parent to another: "..", link counts. */
static int move_dir(struct handle *h, struct undo_log *log, struct inode *d, struct inode *from,
		    struct inode *to, bool to_loses_dir)
{
	int err;

	undo_name_retargeted(log, d, "..", 2, from->ino, EXT4_FT_DIR, to->ino);
	err = dir_retarget(h, d, "..", 2, to->ino, EXT4_FT_DIR);

	if (err)
		return err;
	dir_dec_links(from);
	if (!to_loses_dir)
		err = dir_inc_links(h->fs, to);
	return err;
}

/* Exchange: the directories' ".." first (their blocks are the ones not
 * read yet, the names were looked up), then the two names. */
static int rename_exchange(struct handle *h, struct rename_op *r)
{
	int err;

	if (r->od != r->nd) {
		if (S_ISDIR(r->s->mode) && (err = move_dir(h, r->log, r->s, r->od, r->nd, false)))
			return err;
		if (S_ISDIR(r->t->mode) && (err = move_dir(h, r->log, r->t, r->nd, r->od, false)))
			return err;
	}
	undo_name_retargeted(r->log, r->od, r->oname, r->olen, r->s->ino, ftype_of_mode(r->s->mode),
			     r->t->ino);
	if ((err = dir_retarget(h, r->od, r->oname, r->olen, r->t->ino, ftype_of_mode(r->t->mode))))
		return err;
	undo_name_retargeted(r->log, r->nd, r->nname, r->nlen, r->t->ino, ftype_of_mode(r->t->mode),
			     r->s->ino);
	if ((err = dir_retarget(h, r->nd, r->nname, r->nlen, r->s->ino, ftype_of_mode(r->s->mode))))
		return err;
	r->t->ctime = fs_time(h->fs);
	return 0;
}

/* Move: ".." of a directory changing parents first, then the new name,
 * the old name, and last the replaced inode's link. */
static int rename_move(struct handle *h, struct rename_op *r)
{
	bool sdir = S_ISDIR(r->s->mode);
	unsigned sft = ftype_of_mode(r->s->mode);
	int err;

	if (sdir && r->od != r->nd && (err = move_dir(h, r->log, r->s, r->od, r->nd, false)))
		return err;
	if (r->t) {
		undo_name_retargeted(r->log, r->nd, r->nname, r->nlen, r->t->ino,
				     ftype_of_mode(r->t->mode), r->s->ino);
		err = dir_retarget(h, r->nd, r->nname, r->nlen, r->s->ino, sft);
	} else {
		undo_name_added(r->log, r->nd, r->nname, r->nlen, r->s->ino);
		err = dir_add(h, r->nd, r->nname, r->nlen, r->s->ino, sft);
	}
	if (err)
		return err;
	if (r->wh) {
		undo_name_retargeted(r->log, r->od, r->oname, r->olen, r->s->ino, sft, r->wh->ino);
		err = dir_retarget(h, r->od, r->oname, r->olen, r->wh->ino, EXT4_FT_CHRDEV);
	} else {
		undo_name_removed(r->log, r->od, r->oname, r->olen, r->s->ino, sft);
		err = dir_remove(h, r->od, r->oname, r->olen, r->s->ino);
	}
	if (err)
		return err;
	if (r->t) {
		undo_unlinked(r->log, r->t);
		if (S_ISDIR(r->t->mode)) {
			r->t->links = 1;
			dir_dec_links(r->nd);
		}
		err = drop_link(h, r->t);
	}
	return err;
}

/* Before a rename changes them: the fields of its inodes, in the log. */
static void rename_save_fields(struct rename_op *r)
{
	struct inode *v[4] = {r->od, r->nd, r->s, r->t};

	for (int i = 0; i < 4; i++)
		if (v[i])
			undo_fields(r->log, v[i]);
}

static int rename_write_all(struct handle *h, struct rename_op *r)
{
	struct inode *v[4] = {r->od, r->nd, r->s, r->t};
	int err = 0;

	r->s->ctime = fs_time(h->fs);
	touch_dir(h->fs, r->od);
	touch_dir(h->fs, r->nd);
	for (int i = 0; i < 4 && !err; i++)
		if (v[i] && (i == 0 || v[i] != v[i - 1]))
			err = inode_write(h, v[i]);
	return err;
}

/*
 * RENAME_WHITEOUT: the inode the old name will point to, made in the
 * rename's handle as the kernel's ext4_whiteout_for_rename(): a character
 * device 0/0 with mode 0 (no umask: none applies), the caller's owner and
 * the old directory's inheritance, one link.
 */
static int make_whiteout(struct handle *h, struct rename_op *r)
{
	int err = inode_new_undoable(h, r->od, S_IFCHR, &r->wh, &r->wh_undo);

	if (err) {
		r->wh = NULL;
		return err;
	}
	undo_new_inode(r->log, r->wh, &r->wh_undo);
	encode_rdev(r->wh, 0);
	if ((err = inode_write(h, r->wh)) == 0)
		inode_created(r->wh);
	return err;
}

/* One attempt with everything locked; 1 means "names moved: retry". */
static int rename_locked(struct rename_op *r, uint64_t sino, uint64_t tino)
{
	uint64_t now_s, now_t = 0;
	unsigned ft;
	struct handle *h;
	struct undo_log log;
	int err = dir_lookup_locked(r->fs, r->od, r->oname, r->olen, &now_s, &ft);

	if (err)
		return err;
	err = dir_lookup_locked(r->fs, r->nd, r->nname, r->nlen, &now_t, &ft);
	if (err && err != -ENOENT)
		return err;
	if (now_s != sino || (err ? 0 : now_t) != tino)
		return 1;
	if (r->t && (r->flags & UEXT4_RENAME_NOREPLACE))
		return fs_err(EEXIST, "rename: \"%s\" exists", r->nname);
	if (r->t == r->s)
		return 0; /* two names of one inode (or one name under two cases in
			   * a casefolded directory): rename(2) does nothing */
	if ((err = rename_check(r)) ||
	    (!r->t && (err = dir_check_new_name(r->fs, r->nd, r->nname, r->nlen))) ||
	    (err = handle_begin(r->fs, &h)))
		return err;
	undo_init(&log, h);
	r->log = &log;
	rename_save_fields(r);
	if (r->wh_wanted)
		err = make_whiteout(h, r);
	if (!err)
		err = (r->flags & UEXT4_RENAME_EXCHANGE) ? rename_exchange(h, r) : rename_move(h, r);
	if (!err)
		err = rename_write_all(h, r);
	if (err)
		undo_rollback(&log, err);
	r->log = NULL;
	return first_err(err, handle_end(h));
}

static int rename_once_try(struct rename_op *r)
{
	uint64_t sino, tino = 0;
	struct lockset ls = {0};
	int err;

	if ((err = lookup_iget(r->fs, r->od, r->oname, r->olen, &sino, &r->s)))
		return err;
	/* The target may be unlinked and freed meanwhile: then it is absent. */
	err = lookup_iget_or_none(r->fs, r->nd, r->nname, r->nlen, &tino, &r->t);
	if (!err && S_ISDIR(r->s->mode) && r->od != r->nd) {
		err = is_in_subtree(r->fs, r->s, r->nd);
		if (err == 1)
			err = fs_err(EINVAL, "rename: cannot move a directory into itself");
	}
	if (!err && r->t && S_ISDIR(r->t->mode) && (r->flags & UEXT4_RENAME_EXCHANGE) &&
	    r->od != r->nd) {
		err = is_in_subtree(r->fs, r->t, r->od);
		if (err == 1)
			err = fs_err(EINVAL, "rename: cannot move a directory into itself");
	}
	if (err)
		return err;
	lockset_add(&ls, r->od);
	lockset_add(&ls, r->nd);
	lockset_add(&ls, r->s);
	lockset_add(&ls, r->t);
	lockset_lock(&ls);
	err = rename_locked(r, sino, tino);
	r->sync = ((r->od->flags | r->nd->flags) & FL_DIRSYNC_ANY) != 0;
	lockset_unlock(&ls);
	return err;
}

int uext4_rename(uext4_fs *fs, uint64_t olddir, const char *oldname, uint64_t newdir,
		 const char *newname, unsigned flags)
{
	struct rename_op r = {.fs = fs, .oname = oldname, .nname = newname, .flags = flags};
	bool cross = olddir != newdir;
	int err;

	if ((err = check_writable(fs)) || (err = check_name(oldname, &r.olen)) ||
	    (err = check_name(newname, &r.nlen)))
		return err;
	if (flags & ~(UEXT4_RENAME_NOREPLACE | UEXT4_RENAME_EXCHANGE | UEXT4_RENAME_WHITEOUT) ||
	    ((flags & UEXT4_RENAME_EXCHANGE) &&
	     (flags & (UEXT4_RENAME_NOREPLACE | UEXT4_RENAME_WHITEOUT))))
		return fs_err(EINVAL, "rename: invalid flags 0x%x", flags);
	r.wh_wanted = (flags & UEXT4_RENAME_WHITEOUT) != 0;
	if ((err = get_dir(fs, olddir, &r.od)))
		return err;
	if ((err = get_dir(fs, newdir, &r.nd))) {
		iput(fs, r.od);
		return err;
	}
	if (cross)
		ulock_lock(rename_lock());
	do {
		iput(fs, r.s);
		iput(fs, r.t);
		r.s = r.t = NULL;
		err = rename_once_try(&r);
	} while (err == 1);
	if (cross)
		ulock_unlock(rename_lock());
	if (r.sync) /* both directories' changes are in one transaction */
		err = flags_sync_commit(fs, r.nd, true, err);
	/* A replaced inode that lost its last link goes here (a failure to
	 * free it is reported, the rename itself is done). */
	err = first_err(err, iput(fs, r.t));
	iput(fs, r.wh);
	iput(fs, r.s);
	iput(fs, r.nd);
	iput(fs, r.od);
	return err;
}
