/*
 * symlink.c - reading symbolic link targets.
 *
 * Three places hold a target (Documentation/filesystems/ext4/):
 *   - fast symlinks: in i_block (up to 59 bytes + NUL), the inode having
 *     no data blocks;
 *   - inline-data symlinks (EXT4_INLINE_DATA_FL): i_block + system.data,
 *     read with inline_pread();
 *   - slow symlinks: in the first data block, read with file_pread().
 * Which one applies follows the kernel's ext4_inode_is_fast_symlink():
 * without the ea_inode feature a symlink is fast when it is not inline
 * and its i_blocks, minus the xattr block's cluster, is 0; with ea_inode
 * (whose EA inodes are not counted in i_blocks) when 0 < i_size < 60.
 *
 * The target length is i_size, which must be non-zero and smaller than a
 * block (the kernel refuses longer ones at creation, and e2fsck flags
 * them); a NUL inside the target is corruption too (e2fsck checks
 * strnlen() == i_size).
 */
#include "data.h"
#include "error.h"
#include "file.h"
#include "inode.h"
#include "internal.h"
#include "lock.h"
#include "ondisk.h"
#include "symlink.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* What symlink_read needs of the inode, copied under inode->lock. */
struct link_facts {
	uint32_t mode, flags;
	uint64_t size, blocks, file_acl;
	char iblock[EXT4_N_BLOCKS * 4];
};

static void link_facts_read(struct inode *inode, struct link_facts *lf)
{
	urw_rdlock(&inode->lock);
	lf->mode = inode->mode;
	lf->flags = inode->flags;
	lf->size = inode->size;
	lf->blocks = inode->blocks;
	lf->file_acl = inode->file_acl;
	memcpy(lf->iblock, inode_raw(inode)->i_block, sizeof(lf->iblock));
	urw_unlock(&inode->lock);
}

/* Bytes of a cluster, in 512-byte units (what an xattr block adds to i_blocks). */
static uint64_t cluster_sectors(const struct uext4_fs *fs)
{
	uint64_t cluster = fs->block_size;

	if (FS_HAS_RO_COMPAT(fs, BIGALLOC) && le32(fs->sb.s_log_cluster_size) < 22)
		cluster = 1024ull << le32(fs->sb.s_log_cluster_size);
	return cluster >> 9;
}

static bool link_is_fast(const struct uext4_fs *fs, const struct link_facts *lf)
{
	if (FS_HAS_INCOMPAT(fs, EA_INODE))
		return lf->size > 0 && lf->size < sizeof(lf->iblock);
	if (lf->flags & EXT4_INLINE_DATA_FL)
		return false;
	return lf->blocks == (lf->file_acl ? cluster_sectors(fs) : 0);
}

/* Read the target of a non-fast symlink (slow or inline) into t. */
static int link_read_body(struct uext4_fs *fs, struct inode *inode,
			  const struct link_facts *lf, char *t)
{
	ssize_t n;

	if (lf->flags & EXT4_INLINE_DATA_FL) {
		/* Under the lock: an xattr change rewrites the inode body. */
		urw_rdlock(&inode->lock);
		n = inline_pread(fs, inode, t, lf->size, 0);
		urw_unlock(&inode->lock);
	} else
		n = file_pread(fs, inode, t, lf->size, 0);
	if (n < 0)
		return (int)n;
	if ((uint64_t)n != lf->size)
		return fs_corrupt("symlink inode %llu: target has %zd of %llu bytes",
				  (unsigned long long)inode->ino, n,
				  (unsigned long long)lf->size);
	return 0;
}

ssize_t symlink_read(struct uext4_fs *fs, struct inode *inode, char *buf, size_t size)
{
	struct link_facts lf;
	char *target;
	int err = 0;

	link_facts_read(inode, &lf);
	if (!S_ISLNK(lf.mode))
		return fs_err(EINVAL, "readlink: inode %llu is not a symlink",
			      (unsigned long long)inode->ino);
	if (lf.flags & EXT4_ENCRYPT_FL)
		return fs_err(EOPNOTSUPP, "readlink: symlink inode %llu is encrypted",
			      (unsigned long long)inode->ino);
	if (lf.size == 0 || lf.size >= fs->block_size)
		return fs_corrupt("symlink inode %llu: size %llu (block size %u)",
				  (unsigned long long)inode->ino,
				  (unsigned long long)lf.size, fs->block_size);
	if (link_is_fast(fs, &lf)) {
		if (lf.size >= sizeof(lf.iblock))
			return fs_corrupt("fast symlink inode %llu: size %llu does not fit "
					  "in i_block", (unsigned long long)inode->ino,
					  (unsigned long long)lf.size);
		target = lf.iblock;
	} else {
		target = malloc(lf.size);
		if (!target)
			return fs_err(ENOMEM, "readlink inode %llu: out of memory",
				      (unsigned long long)inode->ino);
		err = link_read_body(fs, inode, &lf, target);
	}
	if (!err && memchr(target, 0, lf.size))
		err = fs_corrupt("symlink inode %llu: NUL byte inside the %llu-byte target",
				 (unsigned long long)inode->ino, (unsigned long long)lf.size);
	if (!err)
		memcpy(buf, target, MIN(size, lf.size));
	if (target != lf.iblock)
		free(target);
	return err ? err : (ssize_t)lf.size;
}

/*
 * Store a new symlink's target (caller holds inode->lock for writing, or
 * owns the new inode, and a handle).  Shorter than i_block: a fast
 * symlink, the target in i_block and no EXTENTS_FL, as the kernel makes
 * them.  Otherwise one data block, extent-mapped when the file system has
 * extents; the block's bytes after the target are zeros.
 */
int symlink_write(struct handle *h, struct inode *inode, const char *target, size_t len)
{
	struct uext4_fs *fs = h->fs;
	struct ext4_inode *raw = inode_raw_mut(inode);
	int err;

	if (len == 0)
		return fs_err(ENOENT, "symlink inode %lu: empty target", (unsigned long)inode->ino);
	if (len >= fs->block_size)
		return fs_err(ENAMETOOLONG, "symlink inode %lu: target of %zu bytes does not fit "
			      "in a %u-byte block", (unsigned long)inode->ino, len, fs->block_size);
	inode->flags &= ~EXT4_INLINE_DATA_FL;
	memset(raw->i_block, 0, sizeof(raw->i_block));
	if (len < sizeof(raw->i_block)) {
		inode->flags &= ~EXT4_EXTENTS_FL;
		memcpy(raw->i_block, target, len);
		inode->size = len;
		return inode_write(h, inode);
	}
	if (FS_HAS_INCOMPAT(fs, EXTENTS)) {
		inode->flags |= EXT4_EXTENTS_FL;
		extent_init_root(inode);
	} else {
		inode->flags &= ~EXT4_EXTENTS_FL;
	}
	inode->size = 0;
	err = file_write_locked(h, inode, target, len, 0);
	if (!err && inode->size != len)
		err = fs_err(EIO, "symlink inode %lu: target written short",
			     (unsigned long)inode->ino);
	return err;
}
