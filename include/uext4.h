/*
 * uext4.h - the public API of libuext4, ext4 in userspace.
 *
 * Operations work on inode numbers, like FUSE's low-level API, plus a few
 * path helpers.  Every function that can fail returns a negative errno
 * value (-ENOENT, -EIO, -EUCLEAN, ...) and leaves a message naming what
 * went wrong in a thread-local buffer read by uext4_last_error().
 *
 * All functions are safe to call from many threads at once on the same
 * uext4_fs.
 */
#ifndef UEXT4_H
#define UEXT4_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * The version of this header.  The shared library's soname is
 * libuext4.so.MAJOR: a new MAJOR breaks the ABI, a new MINOR only adds to
 * it, PATCH only fixes.  The Makefile reads these three lines.
 */
#define UEXT4_VERSION_MAJOR 0
#define UEXT4_VERSION_MINOR 1
#define UEXT4_VERSION_PATCH 0

#define UEXT4_ROOT_INO 2

typedef struct uext4_fs uext4_fs;
typedef struct uext4_file uext4_file;

/* Options for uext4_mount(); zero-initialise and set what you need. */
struct uext4_opts {
	int read_only;          /* nonzero: never write to the image */
	uint64_t cache_bytes;   /* buffer cache memory limit; 0 = default (256 MiB) */
	int memory_backend;     /* nonzero: load the image into memory, write nothing back */
	unsigned commit_secs;   /* journal commit interval in seconds; 0 = default (5) */
	int errors;             /* on corruption: UEXT4_ERRORS_*; 0 = the superblock's s_errors */
	/* Where the file system starts in the file, in bytes (a partition of a
	 * disk image, as mke2fs -E offset=); 0 = at the start. */
	uint64_t offset;
	/* Reproducible images (uext4 mkfs -d with SOURCE_DATE_EPOCH): nonzero
	 * use_fixed_time makes every time the library stamps by itself (inode
	 * times of new and changed inodes, superblock and journal times) equal
	 * fixed_time seconds, and takes new inodes' i_generation from a counter
	 * rather than a random source, so that the same operations in the same
	 * order write the same bytes. */
	int use_fixed_time;
	int64_t fixed_time;
	/* Bulk fill of a fresh image (uext4 mkfs -d): nonzero writes metadata
	 * home at each commit without logging it in the journal, and runs no
	 * commit timer (commits happen at sync, at unmount, and when the dirty
	 * blocks pass the limit, in the thread that ends the handle), so the
	 * image's bytes depend only on the operations and their order.  Not
	 * crash-safe: until the clean unmount the superblock says "not clean"
	 * (e2fsck checks it), as on ext2.  Journal replay at mount still runs. */
	int bulk;
	/* Nonzero: no name cache (every lookup reads the directory); the
	 * environment's UEXT4_NAMECACHE=0 does the same, =N sizes it. */
	int no_name_cache;
	/* Most files open at once through uext4_open() (uext4_file handles);
	 * opening more fails with -EMFILE.  0 = default (65536). */
	unsigned max_open_files;
	/* Most idle (unreferenced) inodes kept in the inode cache; beyond it
	 * the least recently used go.  Inodes in use (open files, operations
	 * under way) are kept in addition.  0 = default (65536). */
	unsigned inode_cache;
	/* Nonzero (mount -o discard): blocks freed by a transaction are
	 * discarded once it commits: a hole punched in an image file,
	 * BLKDISCARD on a block device, NBD_CMD_TRIM on an NBD export whose
	 * server offers trim.  (The path given to uext4_mount() and every other
	 * call taking one may be an NBD URI: nbd://host[:port]/export,
	 * nbd+unix:///export?socket=PATH, as libnbd's nbd_connect_uri.) */
	int discard;
	/* The external journal device (mount -o journal=PATH, the kernel's
	 * journal_path=), for a file system made with mke2fs -J device= (its
	 * journal on a journal_dev device): checked against the file
	 * system's s_journal_uuid, replayed at mount and written by commits.
	 * NULL: a file system with an external journal is refused, naming
	 * the journal's UUID, unless read_only is set and needs_recovery is
	 * clear (then it is read without its journal, as the kernel's
	 * ro,noload). */
	const char *journal_path;
};
/* uext4_opts.errors, as the kernel's errors= mount option. */
enum {
	UEXT4_ERRORS_DEFAULT = 0,   /* what s_errors says (remount-ro if unset) */
	UEXT4_ERRORS_CONTINUE = 1,
	UEXT4_ERRORS_RO = 2,        /* refuse writes with EROFS, keep serving reads */
	UEXT4_ERRORS_PANIC = 3,     /* exit the process without writing further */
};

struct uext4_stat {
	uint64_t ino;
	uint32_t mode;          /* S_IFMT type bits and permissions */
	uint32_t nlink;
	uint32_t uid, gid;
	uint64_t size;
	uint64_t blocks;        /* in 512-byte units, like st_blocks */
	uint64_t rdev;          /* makedev() value for device nodes */
	struct timespec atime, mtime, ctime, crtime;
	uint32_t generation;
	uint32_t flags;         /* ext4 inode flags (i_flags) */
};

struct uext4_statfs {
	uint32_t block_size;
	uint64_t blocks, blocks_free, blocks_avail;
	uint64_t inodes, inodes_free;
	uint32_t name_max;
	uint64_t fsid;
};

/* Block counters: blocks read from and written to the device, by kind.
 * Always counted (one relaxed increment on a per-shard line). */
enum uext4_meta_kind {
	UEXT4_META_SUPER = 0,
	UEXT4_META_GROUP_DESC,
	UEXT4_META_BITMAP,
	UEXT4_META_INODE_TABLE,
	UEXT4_META_DIR,
	UEXT4_META_EXTENT,      /* extent tree blocks, and ext3's indirect blocks */
	UEXT4_META_XATTR,       /* xattr blocks and EA inodes' values */
	UEXT4_META_DATA,        /* file data (read and written around the cache) */
	UEXT4_META_JOURNAL,     /* the log: descriptors, copies, revokes, commits, its superblock */
	UEXT4_META_OTHER,       /* orphan file, symlink blocks, anything untagged */
	UEXT4_META_NKINDS
};
/* "superblock", "group_desc", "bitmap", "inode_table", "directory", "extent",
 * "xattr", "data", "journal", "other"; NULL past UEXT4_META_NKINDS. */
const char *uext4_meta_kind_name(unsigned kind);

struct uext4_counters {
	uint64_t reads[UEXT4_META_NKINDS];   /* device reads by kind */
	uint64_t writes[UEXT4_META_NKINDS];  /* device writes by kind (home, log, data) */
	uint64_t cache_hits, cache_misses, cache_evictions;
	uint64_t cached_bytes;
};

/*
 * Statistics, always compiled in; off until uext4_stats_enable().  Off,
 * they cost one relaxed load per lock acquisition and nothing else; on,
 * a lock is tried first and only one that was not free reads the clock.
 * Counters are kept per thread slot and summed when read.
 *
 * Lock classes (one per kind of lock, see ARCHITECTURE.md's lock table):
 * "rename", "inode" (inode locks of non-directories), "directory" (inode
 * locks of directories), "commit", "ea_inode", "icache_shard", "group",
 * "orphan_list", "orphan_file" (entries claimed by compare-and-swap, no
 * lock: a claim that lost a CAS to another thread counts as contended),
 * "xattr_index", "buffer", "bcache_shard", "trans_wait"
 * (handles and the committer meeting), "revoke_list", "inode_raw" (the
 * spin lock around an inode's copy in its table block), "leaf" (slab,
 * error record, crash devices), "dir_leaf" (htree leaf-block locks of
 * parallel changes in one directory), "dir_attr" (a directory's times
 * under those changes), "other".  Lock classes are counted
 * process-wide, over every mount with statistics on (as the kernel's
 * lock_stat): with several such mounts in one process each report shows
 * their sum, and a reset of one resets them all.
 */
#define UEXT4_LOCK_CLASSES 24
struct uext4_lock_stats {
	const char *name;           /* the class */
	uint64_t acquisitions;      /* successful lock calls (trylocks that won included) */
	uint64_t contentions;       /* acquisitions that found the lock taken and waited */
	uint64_t wait_ns;           /* total time those waited (spin and sleep) */
	uint64_t wait_max_ns;       /* the longest single wait */
};
struct uext4_journal_stats {
	uint64_t commits;           /* commits (a commit with nothing dirty included) */
	uint64_t blocks;            /* metadata blocks committed, summed over commits */
	uint64_t blocks_max;        /* the most in one commit */
	uint64_t commit_ns, commit_max_ns;  /* commit latency: drain to written home */
	/* Handles held back: the time from the commit closing the transaction
	 * to letting handles run again (draining, checksums, copies); sum and
	 * longest.  Every handle_begin() in that window waits. */
	uint64_t blocked_ns, blocked_max_ns;
	/* Handles that did wait in that window, and how long they waited. */
	uint64_t handle_waits, handle_wait_ns, handle_wait_max_ns;
};
struct uext4_stats {
	int enabled;                /* counting now */
	uint64_t elapsed_ns;        /* since the mount or the last reset */
	unsigned nlocks;            /* entries of locks[] used */
	struct uext4_lock_stats locks[UEXT4_LOCK_CLASSES];
	struct uext4_counters io;   /* since the mount or the last reset */
	struct uext4_journal_stats journal;
};
/* Turn counting on (nonzero) or off.  Returns the previous state (0/1). */
int uext4_stats_enable(uext4_fs *fs, int on);
/* Zero every counter (lock classes process-wide) and restart elapsed_ns. */
int uext4_stats_reset(uext4_fs *fs);
int uext4_stats_get(uext4_fs *fs, struct uext4_stats *st);
/* The statistics as text (a table per section) or, json nonzero, one JSON
 * object ({"enabled":..,"elapsed_ns":..,"locks":{CLASS:{"acquisitions",
 * "contentions","wait_ns","wait_max_ns"}},"blocks":{KIND:{"read","written"}},
 * "cache":{..},"journal":{..}}, ending in "}\n").  Like snprintf: returns
 * the length the whole text needs (written up to len - 1, NUL-terminated). */
int uext4_stats_format(uext4_fs *fs, char *buf, size_t len, int json);

/* Read-only facts about a mounted image, as `uext4 info` prints them. */
struct uext4_info {
	char volume_name[17];
	uint8_t uuid[16];
	uint32_t block_size, inode_size, desc_size;
	uint64_t blocks_count, free_blocks, reserved_blocks;
	uint32_t inodes_count, free_inodes;
	uint32_t blocks_per_group, inodes_per_group, groups_count;
	uint32_t first_data_block, first_ino;
	uint32_t feature_compat, feature_incompat, feature_ro_compat;
	uint32_t rev_level, state, errors;
	uint32_t journal_inum, orphan_file_inum;
	uint8_t def_hash_version;
	uint32_t log_groups_per_flex;
	uint32_t mount_count, max_mount_count;
	int64_t mkfs_time, mtime, wtime;
	char features[512];     /* feature names, space separated, as dumpe2fs prints them */
	/* Errors recorded in the superblock (state bit 2 = EXT4_ERROR_FS): by
	 * this mount (errors=) or an earlier one or the kernel, until e2fsck. */
	uint32_t error_count;
	int64_t first_error_time, last_error_time;      /* 0 = none */
	uint32_t first_error_ino, last_error_ino;
	uint64_t first_error_block, last_error_block;
	uint32_t first_error_line, last_error_line;
	uint8_t first_error_errcode, last_error_errcode; /* EXT4_ERR_*: 5 = EFSCORRUPTED */
	char first_error_func[33], last_error_func[33];
	int super_csum_bad;     /* uext4_probe(): metadata_csum and the checksum does not match */
	/* Added later, at the end: bigalloc's cluster size in bytes and
	 * clusters per group (block size and blocks per group without it). */
	uint32_t cluster_size, clusters_per_group;
};

/* Mount an image file, a block device or an NBD export: path may be an NBD
 * URI (nbd://host[:port]/export, nbd+unix:///export?socket=PATH; so may
 * every path argument naming an image: uext4_probe(), uext4_recover()).
 * A server that goes away fails the calls with -EIO and a message naming
 * the URI and libnbd's error. */
int uext4_mount(const char *path, const struct uext4_opts *opts, uext4_fs **out);
/* Unmount: write back (when read-write) and free everything. */
int uext4_umount(uext4_fs *fs);
/* Is path (an image file or block device) in use by a mount, as e2fsprogs'
 * ext2fs_check_mount_point() asks: a block device mounted by the kernel
 * (or a partition of it) or held exclusively (O_EXCL); an image file
 * backing a loop device that is mounted or held (matched by device and
 * inode); or the source of a FUSE mount (fuse2fs, a uext4 server).  1 and
 * where it is, naming the mount point ("mounted on /mnt/K by the kernel
 * (via /dev/loop3)"); 0 if not, or for an NBD URI (its server guards it).
 * A loop device only attached counts as unused, as for e2fsck.  A
 * read-write uext4_mount(), uext4_recover() or uext4_mkfs() of such an
 * image fails with -EBUSY and this in the message; read-only mounts are
 * allowed (their view may be stale: a caller may warn with this). */
int uext4_in_use(const char *path, char *where, size_t len);
/* uext4_in_use() less its exclusive-open test: 1 only if the mount table
 * shows path mounted (directly, through a loop device, or as a FUSE
 * mount's source).  A uext4 server whose mount is gone but which still
 * writes back holds its block device exclusively: this tells them apart. */
int uext4_mounted(const char *path, char *where, size_t len);

/* What recovery did when the image was mounted (or by uext4_recover()). */
struct uext4_recovery {
	uint32_t transactions;      /* journal transactions replayed */
	uint32_t blocks;            /* blocks written back from the journal */
	uint32_t revoked;           /* revoke records honoured */
	uint32_t orphans_truncated; /* orphan inodes whose truncate was finished */
	uint32_t orphans_deleted;   /* orphan inodes freed */
	int replayed_in_memory;     /* read-only mount: replayed into memory only */
	int bad_checksum;           /* the log ended at a block with a bad checksum */
	/* Logged blocks with a bad checksum, skipped (the rest and later
	 * transactions replayed; the file system is marked with errors): how
	 * many, and the first one's home block, journal block, transaction. */
	uint32_t bad_blocks;
	uint32_t bad_journal_block, bad_tid;
	uint64_t bad_home_block;
	/* Orphan inodes that could not be truncated or freed (corrupt): left
	 * for e2fsck, the error recorded; how many, and the first one. */
	uint32_t orphans_failed;
	uint64_t orphan_failed_ino;
	/* Fast commits (the kernel's fast_commit feature) replayed after the
	 * transactions, and their tags. */
	uint32_t fast_commits, fast_commit_tags;
};
int uext4_recovery_info(uext4_fs *fs, struct uext4_recovery *r);
/* Replay the journal and clean up orphans without mounting (as a
 * read-write mount and a clean unmount would); r may be NULL. */
int uext4_recover(const char *path, struct uext4_recovery *r);
/* uext4_recover() with mount options (opts may be NULL): journal_path
 * names an external journal device, offset a partition; read_only and
 * memory_backend are ignored (recovery writes). */
int uext4_recover_opts(const char *path, const struct uext4_opts *opts,
		       struct uext4_recovery *r);

/* Last error message of this thread ("" if none). */
const char *uext4_last_error(void);

int uext4_info(uext4_fs *fs, struct uext4_info *info);
/* The superblock alone, without mounting (what `uext4 info` still shows
 * when a mount is refused): every field uext4_info() fills, the free
 * counts as the superblock has them.  Fails only when path cannot be read
 * or holds no ext2/3/4 superblock. */
int uext4_probe(const char *path, struct uext4_info *info);
int uext4_statfs(uext4_fs *fs, struct uext4_statfs *st);
/* Mark the file system as having an error (EXT4_ERROR_FS and the
 * superblock's error fields, as the kernel records them; e2fsck and mounts
 * see it), written at once: a tool whose work failed half-way (a failed
 * mkfs -d) so that the image never passes as complete.  err: the errno
 * value recorded (positive or negative); what: the function name stored
 * (at most 31 bytes kept).  Unlike an error met by the library, the
 * errors= policy does not act: the mount stays writable. */
int uext4_record_error(uext4_fs *fs, int err, const char *what);
int uext4_get_counters(uext4_fs *fs, struct uext4_counters *c);

/* Inode operations. */
int uext4_getattr(uext4_fs *fs, uint64_t ino, struct uext4_stat *st);
/* Look up name in directory dir; fills st (may be NULL). */
int uext4_lookup(uext4_fs *fs, uint64_t dir, const char *name, struct uext4_stat *st);
/* Returns the length of the target (not NUL-terminated if truncated). */
ssize_t uext4_readlink(uext4_fs *fs, uint64_t ino, char *buf, size_t size);

/*
 * Directory listing.  cookie 0 starts at the beginning; the callback gets
 * each entry with the cookie that resumes *after* it, and returns nonzero to
 * stop.  Cookies stay valid across calls.  "." and ".." are included.
 */
typedef int (*uext4_filldir_t)(void *ctx, const char *name, size_t namelen,
			       uint64_t ino, unsigned dtype, uint64_t next_cookie);
int uext4_readdir(uext4_fs *fs, uint64_t dir, uint64_t cookie,
		  uext4_filldir_t fill, void *ctx);

/* Files.  flags: open(2)'s, plus UEXT4_O_CACHED_OFFSETS for a caller with
 * a page cache of its own above the library (FUSE's writeback cache): it
 * places O_APPEND writes itself, so the file's writes stay at the offsets
 * given (O_APPEND still counts for an append-only file's check at open). */
#define UEXT4_O_CACHED_OFFSETS 0x40000000
int uext4_open(uext4_fs *fs, uint64_t ino, int flags, uext4_file **out);
ssize_t uext4_pread(uext4_file *f, void *buf, size_t size, uint64_t off);
int uext4_release(uext4_file *f);

/* Extended attributes.  size 0 asks for the needed length. */
ssize_t uext4_getxattr(uext4_fs *fs, uint64_t ino, const char *name, void *buf, size_t size);
/* NUL-separated list of names, like listxattr(2). */
ssize_t uext4_listxattr(uext4_fs *fs, uint64_t ino, char *buf, size_t size);

/*
 * Lookup counts, for a frontend that hands inode numbers to a kernel which
 * keeps using them (FUSE: each successful reply to LOOKUP, CREATE, MKNOD,
 * MKDIR, SYMLINK and LINK, and each READDIRPLUS entry but "." and "..",
 * counts one; FORGET and BATCH_FORGET take back nlookup).  While an
 * inode's count is above 0 the library holds it as an open file is held:
 * unlinked, it stays allocated (on the orphan list, its number not
 * reused, requests by number still work) until the count reaches 0, when
 * it is freed; uext4_umount() ends every count still held.  One count per
 * inode and fs (one frontend); the root is not counted.
 *
 * uext4_lookup_ref() adds one for ino, before the frontend hands it out
 * (if that fails, uext4_forget(fs, ino, 1) takes it back); st (may be
 * NULL) is filled from the same inode.  0, or -errno with nothing counted
 * (the inode is gone: -ENOENT).  uext4_forget() of more than was counted
 * stops at 0; of an inode not counted does nothing.
 */
int uext4_lookup_ref(uext4_fs *fs, uint64_t ino, struct uext4_stat *st);
/* uext4_lookup() and uext4_lookup_ref() of what it found, in one step
 * (one inode-cache lookup): the frontend's LOOKUP. */
int uext4_lookup_counted(uext4_fs *fs, uint64_t dir, const char *name, struct uext4_stat *st);
void uext4_forget(uext4_fs *fs, uint64_t ino, uint64_t nlookup);
/* uext4_lookup_ref() of the inode number a file handle holds (FUSE's
 * export support: LOOKUP of "." in a node the kernel no longer caches,
 * for open_by_handle_at(2) or NFS): -ESTALE, nothing counted, if that
 * number names no file now (reserved, out of range, free or deleted) --
 * not corruption.  The caller compares st->generation with the handle's
 * (a number reused by a new file has another i_generation). */
int uext4_lookup_handle(uext4_fs *fs, uint64_t ino, struct uext4_stat *st);

/* Path helpers: resolve an absolute path ("/a/b"), following symlinks in
 * the middle; the last component is followed only if follow is nonzero. */
int uext4_resolve(uext4_fs *fs, const char *path, int follow, uint64_t *ino);
int uext4_stat_path(uext4_fs *fs, const char *path, struct uext4_stat *st);

/* ------------------------------------------------------------ write path
 * Every call below returns -EROFS on a read-only mount.  New inodes are
 * owned by the calling thread's identity (uext4_set_caller(); root by
 * default), with the group of a setgid parent directory.  The library does
 * not check permissions (the FUSE frontend lets the kernel do it with
 * default_permissions); it does enforce that only root (uid 0) may use the
 * reserved blocks.
 */

/* ------------------------------------------------------------ quotas
 * User, group and project quotas of a -O quota image (docs/quota.md), on
 * a read-write mount.  Usage is kept as e2fsck counts it; limits are
 * enforced as the kernel's dquot does: a block allocation or a new inode
 * that would pass a hard limit, or a soft limit whose grace time is over,
 * fails with -EDQUOT; passing a soft limit starts the grace timer (btime,
 * itime: the deadline), going back within it stops it.  The caller uid 0
 * (uext4_set_caller(); the kernel's CAP_SYS_RESOURCE) passes limits.
 * Each call returns -EOPNOTSUPP when the image has no quota file of the
 * type or the mount is read-only, -EINVAL for another type.
 */
enum uext4_quota_type { UEXT4_QUOTA_USER = 0, UEXT4_QUOTA_GROUP = 1, UEXT4_QUOTA_PROJECT = 2 };

struct uext4_quota {
	uint32_t id;
	uint64_t space;         /* bytes in use (i_blocks * 512) */
	uint64_t inodes;        /* inodes in use */
	uint64_t bsoft, bhard;  /* block limits in 1 KiB units; 0: none */
	uint64_t isoft, ihard;  /* inode limits; 0: none */
	int64_t btime, itime;   /* grace deadlines, s since 1970; 0: no timer */
};

/* One id's usage, limits and deadlines: 0, or -ENOENT when the quota
 * file has no entry for id (q zeroed, q->id set: no usage, no limits). */
int uext4_quota_get(uext4_fs *fs, int type, uint32_t id, struct uext4_quota *q);
/* Set id's four limits (bsoft, bhard in 1 KiB units; isoft, ihard; the
 * other fields of q are ignored), making its entry if new, in a
 * transaction; the timers are restarted as setquota does: usage within a
 * new soft limit (or none) clears it, usage past it starts it now. */
int uext4_quota_set(uext4_fs *fs, int type, uint32_t id, const struct uext4_quota *q);
/* The quota file's grace times, in seconds: how long usage may stay past
 * a soft limit.  Setting them (in a transaction) affects timers started
 * from then on, as with the kernel. */
int uext4_quota_get_grace(uext4_fs *fs, int type, uint32_t *bgrace, uint32_t *igrace);
int uext4_quota_set_grace(uext4_fs *fs, int type, uint32_t bgrace, uint32_t igrace);
/* Every id with an entry in the type's file, ascending, in a malloc()ed
 * array the caller frees; *count of them. */
int uext4_quota_list(uext4_fs *fs, int type, uint32_t **ids, size_t *count);

/* Identity of the calling thread for new inodes and reserved blocks. */
void uext4_set_caller(uint32_t uid, uint32_t gid);
/* File mode creation mask of the calling thread (0 by default): create,
 * mknod and mkdir clear its bits from the mode when the parent directory
 * has no default ACL.  With one, the mode is masked by that ACL instead,
 * and the new inode inherits it (its access ACL; a directory's default
 * ACL too), as the kernel's ext4 does.  Symlinks get neither. */
void uext4_set_umask(uint32_t umask);

/* Create a regular file (fails with -EEXIST if name exists). */
int uext4_create(uext4_fs *fs, uint64_t dir, const char *name, uint32_t mode,
		 struct uext4_stat *st);
/* Any type: S_IFREG, S_IFCHR, S_IFBLK (rdev = makedev() value), S_IFIFO, S_IFSOCK. */
int uext4_mknod(uext4_fs *fs, uint64_t dir, const char *name, uint32_t mode, uint64_t rdev,
		struct uext4_stat *st);
int uext4_mkdir(uext4_fs *fs, uint64_t dir, const char *name, uint32_t mode,
		struct uext4_stat *st);
int uext4_symlink(uext4_fs *fs, uint64_t dir, const char *name, const char *target,
		  struct uext4_stat *st);
/* New name newdir/newname for inode ino (not a directory). */
/* O_TMPFILE: a regular file with no name, made as a create in directory
 * dir would make it (owner, group, umask or default ACL), and opened with
 * flags (open(2)'s; O_TMPFILE, O_CREAT and O_TRUNC are ignored).  It has
 * no links and is on an orphan list from the start, so a crash frees it
 * at the next mount; it is freed when the last holder lets go (*out
 * released, lookup counts forgotten), unless uext4_link() gave it a name
 * first, which O_EXCL forbids (ENOENT), as linkat(2) on the kernel. */
int uext4_tmpfile(uext4_fs *fs, uint64_t dir, uint32_t mode, int flags, uext4_file **out,
		  struct uext4_stat *st);
int uext4_link(uext4_fs *fs, uint64_t ino, uint64_t newdir, const char *newname,
	       struct uext4_stat *st);
int uext4_unlink(uext4_fs *fs, uint64_t dir, const char *name);
int uext4_rmdir(uext4_fs *fs, uint64_t dir, const char *name);

#define UEXT4_RENAME_NOREPLACE 1u  /* fail with -EEXIST if the target exists */
#define UEXT4_RENAME_EXCHANGE 2u   /* swap the two names atomically */
/* Leave a whiteout at the old name (for overlayfs): a character device 0/0,
 * mode 0, owned by the caller, made in the same transaction.  Not with
 * EXCHANGE (-EINVAL).  Any caller may (as on Linux since 5.8). */
#define UEXT4_RENAME_WHITEOUT 4u
int uext4_rename(uext4_fs *fs, uint64_t olddir, const char *oldname, uint64_t newdir,
		 const char *newname, unsigned flags);

/* setattr: the fields named in valid are changed; ctime is set to now
 * unless UEXT4_SET_CTIME gives it.  A mode change rewrites the access
 * ACL's owner, mask (or owning group) and other entries to match, as
 * chmod(2) does on the kernel's ext4.  Times are stored as the inode can
 * hold them, as the kernel's ext4 stores them: clamped to 1901-12-13
 * 20:45:52 .. 2446-05-10 22:38:55 (2038-01-19 03:14:07 with 128-byte
 * inodes), whole seconds at either limit and with 128-byte inodes; st
 * shows the stored times.  A given time's tv_nsec outside 0..999999999 is
 * refused (EINVAL). */
#define UEXT4_SET_MODE (1u << 0)        /* permission bits (type bits ignored) */
#define UEXT4_SET_UID (1u << 1)
#define UEXT4_SET_GID (1u << 2)
#define UEXT4_SET_SIZE (1u << 3)        /* truncate or extend with zeros */
#define UEXT4_SET_ATIME (1u << 4)
#define UEXT4_SET_MTIME (1u << 5)
#define UEXT4_SET_ATIME_NOW (1u << 6)
#define UEXT4_SET_MTIME_NOW (1u << 7)
#define UEXT4_SET_CTIME (1u << 8)
/* With UEXT4_SET_MTIME: the mtime is the caller's own clock's "now" when
 * it wrote (a page cache above the library that keeps the times, as FUSE's
 * writeback cache), allowed where "now" is: on an append-only file. */
#define UEXT4_SET_MTIME_LOCAL (1u << 9)
struct uext4_setattr {
	uint32_t valid;
	uint32_t mode, uid, gid;
	uint64_t size;
	struct timespec atime, mtime, ctime;
};
int uext4_setattr(uext4_fs *fs, uint64_t ino, const struct uext4_setattr *a,
		  struct uext4_stat *st);

/* Write at any offset; extends the file and fills holes as needed.  A file
 * opened with O_APPEND writes at its end.  Returns bytes written. */
ssize_t uext4_pwrite(uext4_file *f, const void *buf, size_t size, uint64_t off);
/* Bytes the file may still grow: from its size to the largest size a file
 * of its kind may have (the kernel's s_maxbytes; 16 TiB - 4 KiB for an
 * extent file of 4 KiB blocks).  A write starting past it fails (EFBIG). */
uint64_t uext4_size_headroom(uext4_file *f);
/* mode: 0 or FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE (with KEEP_SIZE),
 * FALLOC_FL_ZERO_RANGE, FALLOC_FL_COLLAPSE_RANGE, FALLOC_FL_INSERT_RANGE
 * (values of <linux/falloc.h>). */
int uext4_fallocate(uext4_file *f, int mode, uint64_t off, uint64_t len);
/* Make the file's data and metadata durable (datasync: skip what isn't
 * needed to read the data back). */
int uext4_fsync(uext4_file *f, int datasync);
/* Make everything durable. */
int uext4_sync(uext4_fs *fs);

/* flags: 0, XATTR_CREATE or XATTR_REPLACE (values of <sys/xattr.h>). */
int uext4_setxattr(uext4_fs *fs, uint64_t ino, const char *name, const void *value,
		   size_t size, int flags);
int uext4_removexattr(uext4_fs *fs, uint64_t ino, const char *name);

/*
 * Inode flags, as lsattr/chattr see them: FS_IOC_GETFLAGS's encoding
 * (FS_IMMUTABLE_FL, FS_APPEND_FL, ... of <linux/fs.h>), which is ext4's
 * i_flags restricted to the bits users see.  uext4_set_flags() follows the
 * kernel's ext4: only the owner or root (the caller, uext4_set_caller())
 * may set them, only root may change immutable or append-only (-EPERM),
 * bits ext4 does not know or that do not fit the inode's type are
 * -EOPNOTSUPP, visible bits nobody may change (index, inline data, ...)
 * are ignored; ctime is set.  Changing data journaling (+j) or extents
 * (+e) is -EOPNOTSUPP: uext4 does neither.
 *
 * Every write call above enforces the two that restrict: an immutable
 * inode cannot be written, truncated, have its attributes or xattrs
 * changed, be linked, unlinked or renamed, and nothing can be created in,
 * removed from or renamed into or out of an immutable directory (-EPERM).
 * An append-only file opens for writing only with O_APPEND and never with
 * O_TRUNC (checked at open, as the kernel does: a descriptor opened
 * before +a keeps its offsets), cannot be truncated or have its
 * mode, owner or times set (times "now" are allowed, and
 * UEXT4_SET_MTIME_LOCAL's), nor xattrs changed,
 * nor be linked, unlinked or renamed; fallocate only allocates.  An
 * append-only directory gains entries but loses none.
 */
int uext4_get_flags(uext4_fs *fs, uint64_t ino, uint32_t *flags);
int uext4_set_flags(uext4_fs *fs, uint64_t ino, uint32_t flags);

/*
 * The flags and the project id together, as FS_IOC_FSGETXATTR and
 * FS_IOC_FSSETXATTR carry them (lsattr -p, chattr -p; flags in
 * uext4_get_flags()'s encoding, not FS_XFLAG_*).  projid reads 0 on a
 * file system without the project feature.  Setting follows the kernel's
 * ext4_fileattr_set(): the rules of uext4_set_flags() first (owner or
 * root), then an immutable inode that stays immutable keeps its id
 * (-EPERM), then the id: 0 is always accepted; another id needs the
 * project feature and inodes larger than 128 bytes (-EOPNOTSUPP); the
 * quota files refuse (-EPERM); an inode whose i_extra_isize stops short
 * of i_projid grows to s_want_extra_isize, unless in-inode xattrs would
 * have to move (-EOVERFLOW: the kernel moves them, uext4 does not).
 * Flags and id change in one transaction, with ctime; a refusal changes
 * nothing.
 *
 * A new inode in a directory with project inheritance (FS_PROJINHERIT_FL,
 * chattr +P) takes the directory's id (a directory the flag too).  A
 * link or rename into such a directory of an inode of another id is
 * -EXDEV, as the kernel's ext4_link() and ext4_rename() (for
 * UEXT4_RENAME_EXCHANGE, either way), so mv falls back to copying.
 * uext4_get_projid() and uext4_set_projid() are the id alone.
 */
struct uext4_fileattr {
	uint32_t flags;         /* as uext4_get_flags() */
	uint32_t projid;        /* i_projid */
};
int uext4_get_fileattr(uext4_fs *fs, uint64_t ino, struct uext4_fileattr *fa);
int uext4_set_fileattr(uext4_fs *fs, uint64_t ino, const struct uext4_fileattr *fa);
int uext4_get_projid(uext4_fs *fs, uint64_t ino, uint32_t *projid);
int uext4_set_projid(uext4_fs *fs, uint64_t ino, uint32_t projid);

/*
 * fs-verity (the kernel's FS_IOC_ENABLE_VERITY, FS_IOC_MEASURE_VERITY and
 * FS_IOC_READ_VERITY_METADATA; Documentation/filesystems/fsverity.rst).
 * A verity file (UEXT4_FL_VERITY in uext4_get_flags) is read-only: opening
 * it for writing, writes, truncates and fallocate fail with EPERM.  Each
 * read checks the data's Merkle blocks against the tree ext4 keeps past the
 * end of the file: a mismatch is EIO naming the inode and block, damaged or
 * missing metadata EUCLEAN.
 *
 * uext4_verity_enable() builds the tree (hash, Merkle block size, salt),
 * writes it and the descriptor past the end of the file and sets the flag
 * in a transaction after them (on the orphan list meanwhile, so a crash
 * leaves the file as it was).  Needs the verity feature (EOPNOTSUPP), an
 * extent-mapped file without inline data (EOPNOTSUPP), not append-only or
 * immutable (EPERM); EEXIST if already on.  block_size 0 is
 * min(4096, the block size); it must be a power of 2 from 1024 up to the
 * page size and the file system's block size (EINVAL).  A signature
 * (fsverity sign) is stored as the kernel stores it, but not checked: there
 * is no keyring here.
 */
#define UEXT4_FL_VERITY 0x00100000u
#define UEXT4_VERITY_SHA256 1
#define UEXT4_VERITY_SHA512 2
struct uext4_verity_enable {
	uint32_t hash_algorithm;    /* UEXT4_VERITY_SHA256 (0 means it) or _SHA512 */
	uint32_t block_size;        /* Merkle tree block size; 0 = min(4096, block size) */
	const void *salt;           /* salt_size bytes, at most 32 (EMSGSIZE) */
	uint32_t salt_size;
	const void *sig;            /* sig_size bytes (PKCS#7), at most 16128 */
	uint32_t sig_size;
};
int uext4_verity_enable(uext4_fs *fs, uint64_t ino, const struct uext4_verity_enable *a);
/* The file digest, as fsverity digest prints it for the same content and
 * parameters; ENODATA for a file without verity. */
struct uext4_verity_digest {
	uint16_t algorithm;         /* UEXT4_VERITY_SHA256 / _SHA512 */
	uint16_t size;              /* bytes of digest: 32 / 64 */
	uint8_t digest[64];
};
int uext4_verity_measure(uext4_fs *fs, uint64_t ino, struct uext4_verity_digest *d);
/* Bytes [off, off+len) of the Merkle tree, the descriptor (without the
 * signature, sig_size 0) or the signature (ENODATA if none): how many were
 * read, 0 past the end. */
#define UEXT4_VERITY_MERKLE_TREE 1
#define UEXT4_VERITY_DESCRIPTOR 2
#define UEXT4_VERITY_SIGNATURE 3
ssize_t uext4_verity_read_metadata(uext4_fs *fs, uint64_t ino, int type, uint64_t off,
				   void *buf, size_t len);

/*
 * The version of the library linked at run time, as "MAJOR.MINOR.PATCH"
 * (a static string).  A program built against this header checks at
 * start that the library it got is one it can use:
 *     if (!uext4_version_ok(UEXT4_VERSION_MAJOR, UEXT4_VERSION_MINOR)) ...
 * uext4_version_ok() is true when the library's MAJOR equals major and its
 * MINOR is at least minor (it has every function of that header).
 */
const char *uext4_version(void);
int uext4_version_ok(int major, int minor);

/*
 * lseek(2)'s SEEK_DATA and SEEK_HOLE (values of <unistd.h>) from offset off:
 * the offset found, or -ENXIO at or past the end / when no data follows.
 * Holes and unwritten extents are holes; the end of the file is a hole.
 */
int64_t uext4_lseek(uext4_file *f, int64_t off, int whence);

/*
 * Making a file system (uext4 mkfs): uext4_mkfs() writes a new ext2/3/4
 * directly into a file or block device, with mke2fs's options and, when
 * zero-initialised, the defaults of Debian's mke2fs 1.47 for -t ext4 plus
 * orphan_file and metadata_csum_seed.  Inode tables are initialised lazily
 * (INODE_UNINIT, BLOCK_UNINIT, itable_unused): a 16 TiB sparse image takes
 * well under a second.  It refuses (-EEXIST, the message naming what it
 * found) a target that already holds a file system unless force is set.
 * A missing file is created (sparse) when size is given.
 */
enum {
	UEXT4_MKFS_UUID_RANDOM = 0, /* a random (version 4) UUID, as mke2fs */
	UEXT4_MKFS_UUID_GIVEN,      /* uuid[] as given (-U UUID) */
	UEXT4_MKFS_UUID_CLEAR,      /* all zero (-U clear) */
	UEXT4_MKFS_UUID_TIME,       /* a time-based (version 1) UUID (-U time) */
};
struct uext4_mkfs_opts {
	const char *fs_type;        /* -t: "ext2", "ext3" or "ext4"; NULL = ext4 */
	uint64_t size;              /* bytes; 0 = the file's or device's size minus offset */
	uint64_t offset;            /* -E offset=: bytes before the file system, untouched */
	uint32_t block_size;        /* -b 1024 to 65536 (a power of 2); 0 = by size, as
	                             * mke2fs.conf; over 4096 the kernel may not mount it */
	uint64_t inodes;            /* -N; 0 = from the inode ratio */
	uint32_t inode_ratio;       /* -i bytes per inode; 0 = by size */
	uint32_t inode_size;        /* -I 128/256; 0 = 256 */
	uint32_t flex_bg_size;      /* -G groups per flex group (a power of 2); 0 = 16 */
	const char *label;          /* -L, at most 16 bytes; NULL = none */
	int uuid_kind;              /* UEXT4_MKFS_UUID_* (-U) */
	uint8_t uuid[16];
	int reserved_set;           /* -m: reserved_percent is given (else 5) */
	double reserved_percent;
	uint32_t journal_mib;       /* -J size=, MiB; 0 = mke2fs's default for the size */
	const char *features;       /* -O list: "a,b,^c" over the type's defaults */
	int hash_seed_set;          /* -E hash_seed=UUID; else random */
	uint8_t hash_seed[16];
	int root_owner_set;         /* -E root_owner=UID:GID; else 0:0 */
	uint32_t root_uid, root_gid;
	int itable_zero;            /* -E lazy_itable_init=0: write every inode table */
	/* -E orphan_file_size=: in blocks, or bytes (rounded up to blocks);
	 * both 0 = mke2fs's default; at most 8 MiB (the kernel's limit) */
	uint32_t orphan_file_blocks;
	uint64_t orphan_file_size;
	int force;                  /* -F: overwrite an existing file system */
	int dry_run;                /* -n: compute and report the geometry, write nothing */
	/* SOURCE_DATE_EPOCH: every time written (superblock, inodes) is this. */
	int use_fixed_time;
	int64_t fixed_time;
	/* Added later, at the end for the ABI: */
	/* -E num_backup_sb=0|1|2 (sparse_super2): how many backup superblocks,
	 * in group 1 and the last group; without num_backup_sb_set, 2. */
	int num_backup_sb_set;
	uint32_t num_backup_sb;
	/* -J fast_commit_size= (fast_commit), KiB; 0 = 1/64 of mke2fs's
	 * default journal size.  Those blocks follow the journal's log. */
	uint32_t fast_commit_kib;
	/* -O mmp, -E mmp_update_interval=: seconds between the holder's
	 * updates of the MMP block, at most 300; 0 = 5, as mke2fs */
	uint16_t mmp_update_interval;
	/* -J device=PATH: the journal on an external journal device (made
	 * by -O journal_dev, here or by mke2fs): no journal inode; the
	 * device's UUID goes into s_journal_uuid, its device number into
	 * s_journal_dev (0 for a regular file), and the new file system
	 * into its users.  features "journal_dev" makes such a device. */
	const char *journal_device;
	/* -E encoding=: UEXT4_MKFS_ENC_UTF8_12_1 (utf8, utf8-12.1) turns on
	 * casefold; 0 = none given (utf8-12.1 when -O casefold).
	 * -E encoding_flags=strict: UEXT4_MKFS_ENC_STRICT (casefolded
	 * directories refuse names that are not valid UTF-8). */
	uint16_t encoding, encoding_flags;
	/* -C cluster size in bytes (-O bigalloc): a power of 2, at least the
	 * block size and at most 2^16 blocks; 0 = 16 blocks, as mke2fs.
	 * Allocation then works in clusters (bitmaps, free counts). */
	uint32_t cluster_size;
	/* -E quotatype=usrquota:grpquota:prjquota: with -O quota, which
	 * quota files to make (UEXT4_MKFS_QUOTA_*); prjquota also turns the
	 * project feature on (as mke2fs 1.47).  0: with -O quota, user and
	 * group, and project too with -O project. */
	uint8_t quota_types;
};
#define UEXT4_MKFS_QUOTA_USR 1
#define UEXT4_MKFS_QUOTA_GRP 2
#define UEXT4_MKFS_QUOTA_PRJ 4
#define UEXT4_MKFS_ENC_UTF8_12_1 1
#define UEXT4_MKFS_ENC_STRICT 0x0001
/* What uext4_mkfs() made (or, dry run, would make). */
struct uext4_mkfs_geometry {
	uint32_t block_size, inode_size, desc_size;
	uint64_t blocks_count, reserved_blocks, free_blocks, overhead_blocks;
	uint32_t inodes_count, free_inodes;
	uint32_t groups_count, blocks_per_group, inodes_per_group, inode_blocks_per_group;
	uint32_t first_data_block, reserved_gdt_blocks, flex_bg_size;
	uint32_t journal_blocks, orphan_file_blocks;
	uint32_t feature_compat, feature_incompat, feature_ro_compat;
	char features[512];         /* names, space separated, as dumpe2fs prints them */
	uint8_t uuid[16], hash_seed[16];
	int created;                /* the file did not exist and was created */
	int zeroed;                 /* the range was punched (reads as zeros) first */
	uint64_t bytes_written;
	/* Added later, at the end for the ABI: */
	uint32_t backup_bgs[2];     /* sparse_super2: s_backup_bgs (0 = none) */
	uint32_t fast_commit_blocks; /* fast_commit: journal blocks after the log
	                              * (s_num_fc_blks); journal_blocks is the log */
	uint32_t cluster_size;      /* bytes; the block size without bigalloc */
};
int uext4_mkfs(const char *path, const struct uext4_mkfs_opts *o, struct uext4_mkfs_geometry *out);
/* The groups holding superblock backups, in order, for a geometry (up to
 * max of them): how many there are. */
uint32_t uext4_mkfs_backup_groups(const struct uext4_mkfs_geometry *g, uint32_t *groups,
				  uint32_t max);

/*
 * Filling an image from a host directory or a tar stream (uext4 mkfs -d).
 * Everything below the source is copied into directory dir of fs: regular
 * files (sparse where the source is), directories, symlinks, hard links
 * (once per inode), device nodes, fifos and sockets, with modes, owners,
 * nanosecond times, xattrs, POSIX ACLs and inode flags where the source has
 * them; on an image with the project feature each inode's project id and
 * directories' +P (FS_IOC_FSGETXATTR), on a casefold image directories' +F
 * (set at mkdir, while empty).  Entries of dir itself (its mode, owner and times) come from the
 * source's top directory.
 *
 * The result does not depend on thread timing: the same source, options and
 * image give the same bytes with any thread count (given use_fixed_time, a
 * fixed UUID and hash seed for the whole image).
 *
 * On failure the message names the source path and what went wrong or ran
 * out (blocks, inodes); what was copied so far stays in the image.
 */
struct uext4_populate_progress {
	uint64_t files_done, files_total;   /* files_total 0: not known (a stream) */
	uint64_t bytes_done, bytes_total;   /* file data; bytes_total 0: not known */
};
typedef void (*uext4_progress_fn)(void *ctx, const struct uext4_populate_progress *p);

struct uext4_populate_opts {
	unsigned threads;           /* worker threads; 0 = the number of online CPUs */
	int no_copy_xattrs;         /* nonzero: copy no xattrs (and so no ACLs) */
	int root_owner_set;         /* nonzero: dir gets root_uid:root_gid, not the source's */
	uint32_t root_uid, root_gid;
	int clamp_times;            /* nonzero: times after clamp_time become clamp_time */
	int64_t clamp_time;         /* (SOURCE_DATE_EPOCH, as mke2fs clamps) */
	uext4_progress_fn progress; /* may be NULL; called from one thread at a time */
	void *progress_ctx;
};
int uext4_populate(uext4_fs *fs, uint64_t dir, const char *source,
		   const struct uext4_populate_opts *o);
/* The same from a tar stream read from fd: any format and compression that
 * libarchive reads (tar, pax, gnutar; gzip, xz, zstd, bzip2).  Entries that
 * would escape dir (absolute paths, "..") are refused with a message naming
 * them; see uext4 mkfs --help for the rules on duplicates and hard links. */
int uext4_populate_archive(uext4_fs *fs, uint64_t dir, int fd,
			   const struct uext4_populate_opts *o);

#ifdef __cplusplus
}
#endif
#endif
