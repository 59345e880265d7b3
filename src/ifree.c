/*
 * ifree.c - freeing an inode that lost its last link: its blocks
 * (truncate), its xattrs, its orphan entry and its number, in one
 * handle.  The inode cache calls it through struct icache_host (mount.c
 * fills it in) when the last reference of an unlinked inode goes; an
 * unlink that holds the only reference frees in its own handle
 * (inode_claim_free(), inode_free_now()).  It sits above the orphan code
 * and truncation, which it drives, so that the cache and the inode format
 * below call nothing up.
 */
#include "balloc.h"
#include "error.h"
#include "file.h"
#include "ialloc.h"
#include "icache.h"
#include "ifree.h"
#include "inode.h"
#include "internal.h"
#include "lock.h"
#include "orphan.h"
#include "quota.h"
#include "trans.h"
#include "xattr.h"

#include <stdio.h>
#include <sys/stat.h>

/*
 * Before an unlink drops the last link of a file that nobody holds open:
 * would freeing it meet corruption in its extent tree or block map?  The
 * tree is walked read-only, one mapping per extent or hole (a block map:
 * its indirect blocks), as the free reads them right after, from the
 * cache, so that the unlink
 * can refuse with the image unchanged instead of leaving an unlinked
 * inode it cannot free, as the kernel's iget refuses an inode whose root
 * fails ext4_ext_check_inode().  Caller holds n->lock.
 */
int inode_check_freeable(struct uext4_fs *fs, struct inode *n)
{
	return inode_check_map_from(fs, n, 0);
}

/*
 * Is n's bit set in its group's inode bitmap?  Read once per cached inode:
 * the read takes the group lock and the bitmap buffer, which every thread
 * working in that group shares (a shrinking truncate or an unlink each
 * did, and at 16 threads on 2 CPUs a preempted holder made the others
 * wait for milliseconds).
 */
static int inode_check_bitmap_bit(struct uext4_fs *fs, struct inode *n)
{
	uint32_t st = atomic_load_explicit(&n->istate, memory_order_relaxed);
	int err;

	if ((st & (INODE_BITMAP_OK | INODE_DELETED)) == INODE_BITMAP_OK)
		return 0;
	if (!(err = ialloc_check_allocated(fs, n->ino)) && !(st & INODE_DELETED))
		atomic_fetch_or_explicit(&n->istate, INODE_BITMAP_OK, memory_order_relaxed);
	return err;
}

int inode_check_map_from(struct uext4_fs *fs, struct inode *n, uint64_t lblk)
{
	int err;

	if ((err = inode_check_bitmap_bit(fs, n)) || (err = xattr_check_block(fs, n)))
		return err;
	if (inode_has_inline_data(n) || !(S_ISREG(n->mode) || S_ISDIR(n->mode)))
		return 0;
	return file_check_map_from(fs, n, lblk);
}

/*
 * Freeing n failed (a corrupt block map or xattr): as the kernel's evict,
 * give up on it.  It leaves its orphan list (orphan_drop_failed(), so that
 * no mount wedges on it) and stays allocated for e2fsck; it is not tried
 * again at a later iput() or at unmount.  The error is recorded on the
 * file system (the unlink that dropped the last link may have returned
 * long ago); orphan cleanup records it itself, after its pass.  Caller
 * holds n->lock for writing and no handle.
 */
static void delete_failed(struct uext4_fs *fs, struct inode *n, int err)
{
	char why[256];

	snprintf(why, sizeof(why), "%s", uext4_last_error());
	atomic_fetch_and(&n->istate, ~(uint32_t)INODE_UNLINKED);
	orphan_drop_failed(fs, n);
	if (orphan_cleanup_running(fs))
		fs_err(-err, "%s", why);
	else
		FS_ERROR(fs, -err, n->ino, 0, "inode %llu: unlinked, but freeing it failed (%s): "
			 "left allocated for e2fsck", (unsigned long long)n->ino, why);
}

/*
 * Free n's blocks, xattrs and number in h: n has no links and its lock is
 * held for writing.  Marked deleted before its number is free: a create
 * that takes the number next must find this cached copy marked (seed of
 * icache_insert_new()'s unhashing).
 */
int inode_release_contents(struct handle *h, struct inode *n)
{
	int err = 0;

	if (!inode_has_inline_data(n) &&
	    (S_ISREG(n->mode) || S_ISDIR(n->mode) || S_ISLNK(n->mode)))
		err = inode_truncate_blocks(h, n, 0);
	return err ? err : xattr_release_inode(h, n);
}

static int free_in(struct handle *h, struct inode *n)
{
	int err = inode_release_contents(h, n);

	if (!err)
		err = orphan_del(h, n);
	if (!err) {
		struct timespec now = fs_time(h->fs);

		n->dtime = (uint32_t)now.tv_sec;
		n->size = 0;
		quota_inode_gone(h->fs, n);
		n->ctime = now;
		err = inode_write(h, n);
	}
	if (!err) {
		atomic_fetch_or(&n->istate, INODE_DELETED);
		err = ialloc_free(h, n->ino, S_ISDIR(n->mode));
	}
	return err;
}

/* Freeing n failed after it was marked deleted: only the number's bitmap
 * bit is left, a leak e2fsck repairs. */
static void report_number_leak(struct uext4_fs *fs, struct inode *n, int err)
{
	char why[256];

	snprintf(why, sizeof(why), "%s", uext4_last_error());
	FS_ERROR(fs, -err, n->ino, 0, "inode %llu: unlinked, but freeing it failed (%s): "
		 "its number stays allocated for e2fsck", (unsigned long long)n->ino, why);
}

/*
 * The last reference to an inode with no links is going: free its blocks,
 * xattrs and number (the file was unlinked while open, or just now).  The
 * caller holds no inode lock and no handle (api.c drops its locks before
 * its last iput()).  Unmount passes `force`: files still open then are
 * freed all the same, as nobody uses them any more.  0 or the error of a
 * failed free (delete_failed()).
 */
int inode_free_unlinked(struct uext4_fs *fs, struct inode *n, bool force)
{
	struct handle *h;
	int err, err2;

	urw_wrlock(&n->lock);
	/* A lock-free iget() may have taken a reference since the caller
	 * saw its own as the last: then that holder has an open file, whose
	 * writes must not land in a freed inode, and its iput() frees it.
	 * Else the claim makes every later grab refuse it. */
	if (n->links != 0 || fs->read_only || (!inode_claim_free(n) && !force)) {
		urw_unlock(&n->lock);
		return 0;
	}
	if (n->pa)
		balloc_release_prealloc(fs, n);
	err = handle_begin(fs, &h);
	if (err) {
		delete_failed(fs, n, err);
		inode_unclaim_free(n);
		urw_unlock(&n->lock);
		return err;
	}
	err = free_in(h, n);
	err2 = handle_end(h);
	if (err && !(atomic_load(&n->istate) & INODE_DELETED)) {
		delete_failed(fs, n, err);
		inode_unclaim_free(n);
	} else if (err) {
		report_number_leak(fs, n, err);
	}
	urw_unlock(&n->lock);
	return err ? err : err2;
}


/*
 * Free a claimed inode (inode_claim_free()) in h, whose changes dropped
 * its last link.  If that fails before it is marked deleted, it is left
 * as any unlinked inode: on an orphan list, freed (or the failure
 * reported) at its last iput().  0, or the error of a number left
 * allocated.
 */
int inode_free_now(struct handle *h, struct inode *n)
{
	int err;

	if (n->pa)
		balloc_release_prealloc(h->fs, n);
	err = free_in(h, n);
	if (err && (atomic_load(&n->istate) & INODE_DELETED)) {
		report_number_leak(h->fs, n, err);
		return err;
	}
	if (err) {
		orphan_add(h, n);
		inode_write(h, n);
		inode_unclaim_free(n);
	}
	return 0;
}
