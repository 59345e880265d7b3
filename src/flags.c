/*
 * flags.c - the inode flags users see and change (lsattr/chattr:
 * FS_IOC_GETFLAGS / FS_IOC_SETFLAGS), and the refusals that immutable and
 * append-only inodes impose on every operation (public API,
 * include/uext4.h: uext4_get_flags, uext4_get_fileattr, uext4_get_projid;
 * uext4_set_flags, uext4_set_fileattr, uext4_set_projid are api.c's, over
 * flags_set()), and the project id beside them (FS_IOC_FSGETXATTR /
 * FS_IOC_FSSETXATTR's fsx_projid; inode.c inode_set_projid() changes it).
 *
 * The rules are the kernel's ext4 (fs/ext4/ioctl.c ext4_fileattr_set and
 * ext4_ioctl_setflags, fs/ext4/ext4.h ext4_mask_flags) together with what
 * the VFS checks before it (fs/file_attr.c vfs_fileattr_set: only the
 * owner or root; only root (CAP_LINUX_IMMUTABLE) changes immutable or
 * append-only).  Where the kernel would do work that uext4 does not
 * implement (journaled data per file, migrating between block maps and
 * extents) the change is refused with EOPNOTSUPP and nothing changes.
 *
 * The enforcement checks read inode->flags, already in memory, under the
 * inode lock the operation holds anyway (inode->lock protects flags).
 */
#include "caller.h"
#include "error.h"
#include "flags.h"
#include "icache.h"
#include "inode.h"
#include "internal.h"
#include "lock.h"
#include "ondisk.h"
#include "trans.h"

#include <sys/stat.h>

/* Flag bits ondisk.h does not name (values of the kernel's fs/ext4/ext4.h). */
#define FL_UNRM 0x00000002u
#define FL_COMPR 0x00000004u
#define FL_NODUMP 0x00000040u
#define FL_NOCOMPR 0x00000400u
#define FL_NOTAIL 0x00008000u
#define FL_DIRSYNC 0x00010000u
#define FL_EOFBLOCKS 0x00400000u    /* no longer used, still "modifiable" */
#define FL_DAX 0x02000000u

/* What FS_IOC_GETFLAGS shows and what FS_IOC_SETFLAGS may change, as the
 * kernel's EXT4_FL_USER_VISIBLE / EXT4_FL_USER_MODIFIABLE. */
#define FL_USER_MODIFIABLE (EXT4_SECRM_FL | FL_UNRM | FL_COMPR | EXT4_SYNC_FL |          \
			    EXT4_IMMUTABLE_FL | EXT4_APPEND_FL | FL_NODUMP |              \
			    EXT4_NOATIME_FL | EXT4_JOURNAL_DATA_FL | FL_NOTAIL |          \
			    FL_DIRSYNC | EXT4_TOPDIR_FL | EXT4_EXTENTS_FL | FL_EOFBLOCKS | \
			    FL_DAX | EXT4_PROJINHERIT_FL | EXT4_CASEFOLD_FL)
#define FL_USER_VISIBLE (FL_USER_MODIFIABLE | 0x00000100u /* DIRTY */ |                 \
			 0x00000200u /* COMPRBLK */ | FL_NOCOMPR | EXT4_ENCRYPT_FL |     \
			 EXT4_INDEX_FL | EXT4_VERITY_FL | EXT4_INLINE_DATA_FL)
_Static_assert(FL_USER_MODIFIABLE == 0x624BC0FFu, "EXT4_FL_USER_MODIFIABLE");
_Static_assert(FL_USER_VISIBLE == 0x725BDFFFu, "EXT4_FL_USER_VISIBLE");

/* Flags DAX excludes (EXT4_DAX_MUT_EXCL). */
#define FL_DAX_EXCL (EXT4_VERITY_FL | EXT4_ENCRYPT_FL | EXT4_JOURNAL_DATA_FL | \
		     EXT4_INLINE_DATA_FL)

/* What a new inode takes from its directory (EXT4_FL_INHERITED). */
#define FL_INHERITED (EXT4_SECRM_FL | FL_UNRM | FL_COMPR | EXT4_SYNC_FL | FL_NODUMP |     \
		      EXT4_NOATIME_FL | FL_NOCOMPR | EXT4_JOURNAL_DATA_FL | FL_NOTAIL |  \
		      FL_DIRSYNC | EXT4_PROJINHERIT_FL | EXT4_CASEFOLD_FL | FL_DAX)

/* The flags that make sense for an inode of this type (ext4_mask_flags):
 * directories take all, regular files all but the directory-only ones,
 * other inodes only nodump and noatime. */
uint32_t flags_mask_for_mode(uint32_t mode, uint32_t flags)
{
	if (S_ISDIR(mode))
		return flags;
	if (S_ISREG(mode))
		return flags & ~(FL_DIRSYNC | EXT4_TOPDIR_FL | EXT4_CASEFOLD_FL |
				 EXT4_PROJINHERIT_FL);
	return flags & (FL_NODUMP | EXT4_NOATIME_FL);
}

uint32_t flags_inherited(uint32_t dir_flags, uint32_t mode)
{
	return flags_mask_for_mode(mode, dir_flags & FL_INHERITED);
}

/* ------------------------------------------------------------- refusals */

int flags_refuse(const struct inode *n, const char *what)
{
	return fs_err(EPERM, "%s: inode %llu is %s", what, (unsigned long long)n->ino,
		      (n->flags & EXT4_IMMUTABLE_FL) ? "immutable" : "append-only");
}

int flags_refuse_verity(const struct inode *n, const char *what)
{
	return fs_err(EPERM, "%s: inode %llu is an fs-verity file (read-only)", what,
		      (unsigned long long)n->ino);
}

int flags_sync_commit(struct uext4_fs *fs, struct inode *n, bool sync, int err)
{
	if (err < 0 || !sync)
		return err;
	int e2 = trans_commit_tid(fs, atomic_load(&n->last_tid));

	return e2 < 0 ? e2 : err;
}

/* ------------------------------------------------------------- get, set */

/* What FS_IOC_GETFLAGS returns: regular files never show projinherit. */
static uint32_t visible_flags(const struct inode *n)
{
	uint32_t f = n->flags & FL_USER_VISIBLE;

	return S_ISREG(n->mode) ? f & ~EXT4_PROJINHERIT_FL : f;
}

int uext4_get_fileattr(uext4_fs *fs, uint64_t ino, struct uext4_fileattr *fa)
{
	struct inode *n;
	int err;

	fs_clear_err();
	if ((err = iget(fs, ino, &n)))
		return err;
	urw_rdlock(&n->lock);
	fa->flags = visible_flags(n);
	/* ext4_fileattr_get(): the id only where the feature gives it one. */
	fa->projid = FS_HAS_RO_COMPAT(fs, PROJECT) ? n->projid : 0;
	urw_unlock(&n->lock);
	iput(fs, n);
	return 0;
}

int uext4_get_flags(uext4_fs *fs, uint64_t ino, uint32_t *flags)
{
	struct uext4_fileattr fa;
	int err = uext4_get_fileattr(fs, ino, &fa);

	if (!err)
		*flags = fa.flags;
	return err;
}

int uext4_get_projid(uext4_fs *fs, uint64_t ino, uint32_t *projid)
{
	struct uext4_fileattr fa;
	int err = uext4_get_fileattr(fs, ino, &fa);

	if (!err)
		*projid = fa.projid;
	return err;
}

/* Is DAX allowed beside the other flags (dax_compatible())? */
static bool dax_compatible(const struct inode *n, uint32_t old, uint32_t new)
{
	if (S_ISDIR(n->mode)) {
		old &= ~EXT4_INLINE_DATA_FL;
		new &= ~EXT4_INLINE_DATA_FL;
	}
	if ((new & FL_DAX) && (old & FL_DAX_EXCL))
		return false;
	return !((new & FL_DAX_EXCL) && (old & FL_DAX));
}

/* +F or -F: on a directory of a casefold file system; whether it is empty
 * (ext4_ioctl_setflags()'s ext4_empty_dir()) the caller's check decides. */
static int casefold_change_allowed(struct uext4_fs *fs, struct inode *n,
				   flags_casefold_check_fn check)
{
	unsigned long long ino = (unsigned long long)n->ino;

	if (!FS_HAS_INCOMPAT(fs, CASEFOLD))
		return fs_err(EOPNOTSUPP, "set flags: casefold (+F) needs a file system with the "
			      "casefold feature (inode %llu)", ino);
	if (!S_ISDIR(n->mode))
		return fs_err(ENOTDIR, "set flags: casefold (+F) on inode %llu, not a directory", ino);
	return check(fs, n);
}

/*
 * The checks of vfs_fileattr_set(), ext4_fileattr_set() and
 * ext4_ioctl_setflags(), in their order.  want is what the caller asked
 * for; on success *out is the inode's new i_flags.
 */
static int check_new_flags(struct uext4_fs *fs, struct inode *n, uint32_t want, uint32_t *out,
			   flags_casefold_check_fn casefold_check)
{
	uint32_t uid = caller_uid(), old = n->flags, f;
	unsigned long long ino = (unsigned long long)n->ino;

	if (uid != 0 && uid != n->uid)
		return fs_err(EPERM, "set flags: inode %llu belongs to uid %u, not to uid %u", ino,
			      n->uid, uid);
	if (((want ^ visible_flags(n)) & (EXT4_APPEND_FL | EXT4_IMMUTABLE_FL)) && uid != 0)
		return fs_err(EPERM, "set flags: only root may change the immutable and "
			      "append-only flags (inode %llu)", ino);
	if ((want & FL_DAX) && !S_ISREG(n->mode) && !S_ISDIR(n->mode))
		return fs_err(EINVAL, "set flags: DAX on inode %llu, neither a file nor a "
			      "directory", ino);
	if (want & ~FL_USER_VISIBLE)
		return fs_err(EOPNOTSUPP, "set flags: 0x%x has flags ext4 does not know (0x%x)",
			      want, want & ~FL_USER_VISIBLE);
	/* Visible flags nobody may set are dropped silently, as chattr passes
	 * back what it read. */
	f = want & FL_USER_MODIFIABLE;
	if (flags_mask_for_mode(n->mode, f) != f)
		return fs_err(EOPNOTSUPP, "set flags: 0x%x on inode %llu, which is not a "
			      "directory (directory-only flags 0x%x)", f, ino,
			      f & ~flags_mask_for_mode(n->mode, f));
	/* An immutable inode that stays immutable changes nothing else. */
	if ((old & EXT4_IMMUTABLE_FL) && (f & EXT4_IMMUTABLE_FL) &&
	    (old & ~EXT4_IMMUTABLE_FL) != (f & ~EXT4_IMMUTABLE_FL))
		return fs_err(EPERM, "set flags: inode %llu is immutable", ino);
	if (((f ^ old) & EXT4_JOURNAL_DATA_FL) && uid != 0)
		return fs_err(EPERM, "set flags: only root may change data journaling "
			      "(inode %llu)", ino);
	if (!dax_compatible(n, old, f))
		return fs_err(EOPNOTSUPP, "set flags: DAX and 0x%x exclude each other (inode %llu)",
			      (f | old) & FL_DAX_EXCL, ino);
	if ((f ^ old) & EXT4_CASEFOLD_FL) {
		int err = casefold_change_allowed(fs, n, casefold_check);

		if (err)
			return err;
	}
	/* The kernel journals the data of a file with +j and migrates between
	 * block maps and extents when EXTENTS changes; uext4 does neither. */
	if ((f ^ old) & EXT4_JOURNAL_DATA_FL)
		return fs_err(EOPNOTSUPP, "set flags: uext4 does not journal file data (+j, "
			      "inode %llu)", ino);
	if ((f ^ old) & EXT4_EXTENTS_FL)
		return fs_err(EOPNOTSUPP, "set flags: uext4 does not convert inode %llu between "
			      "block maps and extents (+e/-e)", ino);
	*out = (old & ~FL_USER_MODIFIABLE) | (f & FL_USER_MODIFIABLE);
	return 0;
}

/* ext4_ioctl_check_immutable()'s part for the project id: an inode that
 * stays immutable keeps its id too. */
static int check_projid_change(const struct inode *n, uint32_t new_flags, uint32_t projid)
{
	if ((n->flags & EXT4_IMMUTABLE_FL) && (new_flags & EXT4_IMMUTABLE_FL) &&
	    projid != n->projid)
		return fs_err(EPERM, "set project id: inode %llu is immutable",
			      (unsigned long long)n->ino);
	return 0;
}

/* The change in one handle: the project id first (it may refuse), then
 * the flags; a failed write puts both back. */
static int apply_fileattr(struct uext4_fs *fs, struct inode *n, uint32_t new_flags,
			  const struct fileattr_change *c)
{
	uint32_t old_flags = n->flags, old_projid = n->projid;
	struct timespec ctime = n->ctime;
	struct handle *h;
	int err;

	if ((err = handle_begin(fs, &h)))
		return err;
	if (!c->set_projid || !(err = inode_set_projid(h, n, c->projid))) {
		n->flags = new_flags;
		n->ctime = fs_time(fs);
		if ((err = inode_write(h, n))) {
			n->flags = old_flags;   /* refused: the inode stays as it was */
			n->ctime = ctime;
			if (c->set_projid)
				inode_set_projid(h, n, old_projid);
		}
	}
	return first_err(err, handle_end(h));
}

int flags_set(uext4_fs *fs, uint64_t ino, const struct fileattr_change *c,
	      flags_casefold_check_fn casefold_check)
{
	struct inode *n;
	uint32_t new_flags = 0, old_flags;
	int err;

	fs_clear_err();
	if (fs->read_only)
		return fs_err(EROFS, "the file system is mounted read-only");
	if ((err = iget(fs, ino, &n)))
		return err;
	urw_wrlock(&n->lock);
	old_flags = n->flags;
	err = check_new_flags(fs, n, c->set_flags ? c->flags : visible_flags(n), &new_flags,
			      casefold_check);
	if (!err && c->set_projid)
		err = check_projid_change(n, new_flags, c->projid);
	if (!err)
		err = apply_fileattr(fs, n, new_flags, c);
	urw_unlock(&n->lock);
	err = flags_sync_commit(fs, n, (old_flags & EXT4_SYNC_FL) != 0, err);
	iput(fs, n);
	return err;
}
