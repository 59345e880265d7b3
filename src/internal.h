/*
 * internal.h - what the subsystems of libuext4 share.
 *
 * One file per subsystem (see ARCHITECTURE.md); this header declares the
 * core types (mounted file system, buffer, in-memory inode) and each
 * subsystem's entry points.  Errors are negative errno values; the
 * function that detects a problem records a message with fs_err().
 */
#ifndef UEXT4_INTERNAL_H
#define UEXT4_INTERNAL_H

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "../include/uext4.h"
#include "lock.h"
#include "ondisk.h"

#ifndef EUCLEAN
#define EUCLEAN 117
#endif
/* Corruption is reported as EUCLEAN, as the kernel's EFSCORRUPTED. */
#define EFSCORRUPTED EUCLEAN
#define EFSBADCRC EBADMSG

#define CACHELINE 64
#define UNUSED __attribute__((unused))
#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define MAX(a, b) ((a) > (b) ? (a) : (b))
#define DIV_ROUND_UP(n, d) (((n) + (d) - 1) / (d))

/* ---------------------------------------------------------------- error.c */
/* Record a message for uext4_last_error() and return -err. */
int fs_err(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Same, for corruption: message prefixed "corrupt <what>:", returns -EUCLEAN. */
int fs_corrupt(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void fs_clear_err(void);

/* ---------------------------------------------------------------- blockdev.c
 * The block device interface.  Backends: a file (image or block device,
 * pread/pwrite) and memory (tests).  A later issue adds a crash-recording
 * backend, so callers only use the ops.
 */
struct bdev;
struct bdev_ops {
	int (*read)(struct bdev *d, void *buf, size_t len, uint64_t off);
	int (*write)(struct bdev *d, const void *buf, size_t len, uint64_t off);
	int (*flush)(struct bdev *d);
	void (*close)(struct bdev *d);
};
struct bdev {
	const struct bdev_ops *ops;
	uint64_t size;          /* bytes */
	int read_only;
	void *priv;
};
/* Returns NULL and sets *err (negative errno) with a message on failure. */
struct bdev *bdev_open_file(const char *path, int read_only, int *err);
/* A memory device of size bytes, zero-filled; or a copy of an image file. */
struct bdev *bdev_open_memory(uint64_t size);
struct bdev *bdev_open_memory_copy(const char *path, int *err);
static inline int bdev_read(struct bdev *d, void *buf, size_t len, uint64_t off)
{ return d->ops->read(d, buf, len, off); }
static inline int bdev_write(struct bdev *d, const void *buf, size_t len, uint64_t off)
{ return d->ops->write(d, buf, len, off); }
static inline int bdev_flush(struct bdev *d) { return d->ops->flush(d); }
static inline void bdev_close(struct bdev *d) { d->ops->close(d); }

/* ---------------------------------------------------------------- bcache.c
 * Buffer cache: blocks keyed by number in a sharded hash table.  A buffer
 * returned by bread() holds a reference until brelse().  Clean buffers
 * with no reference are evicted LRU-first when the cache is over its
 * memory limit.
 */
enum buf_state_bits {
	BUF_UPTODATE = 1u << 0, /* data holds the block's contents */
	BUF_DIRTY = 1u << 1,    /* data differs from disk (write path) */
	BUF_VERIFIED = 1u << 2, /* checksum/structure checked once */
	BUF_IOERR = 1u << 3,    /* last read failed */
};

struct buf {
	uint64_t blocknr;
	uint8_t *data;              /* block_size bytes; immutable pointer */
	_Atomic uint32_t refcount;  /* atomic; 0 = on the shard's LRU */
	_Atomic uint32_t state;     /* BUF_* bits, atomic */
	uint8_t kind;               /* enum uext4_meta_kind of the first read */
	struct ulock lock;          /* serialises reading in and (later) modifying data */
	/* Protected by the owning shard's lock: */
	struct buf *hnext;
	struct buf *lru_prev, *lru_next;
};

struct bcache;
struct bcache *bcache_create(struct bdev *dev, uint32_t block_size, uint64_t mem_limit);
void bcache_destroy(struct bcache *bc);
/* Get the buffer for blocknr, reading it if needed.  kind is counted. */
int bread(struct bcache *bc, uint64_t blocknr, enum uext4_meta_kind kind, struct buf **out);
/* Get the buffer without reading (for blocks about to be overwritten). */
int bget(struct bcache *bc, uint64_t blocknr, struct buf **out);
void brelse(struct bcache *bc, struct buf *b);
static inline bool buf_verified(struct buf *b)
{ return atomic_load_explicit(&b->state, memory_order_acquire) & BUF_VERIFIED; }
static inline void buf_set_verified(struct buf *b)
{ atomic_fetch_or_explicit(&b->state, BUF_VERIFIED, memory_order_release); }
void bcache_counters(struct bcache *bc, struct uext4_counters *c);
/* Is blocknr cached and uptodate? */
bool bcache_uptodate(struct bcache *bc, uint64_t blocknr);
/* Read count blocks from start in one device read and cache those not yet
 * cached (best effort; errors surface in the bread() that follows). */
void bcache_readahead(struct bcache *bc, uint64_t start, uint32_t count,
		      enum uext4_meta_kind kind);
/* Count a device read done outside the cache (file data). */
void bcache_count_read(struct bcache *bc, enum uext4_meta_kind kind, uint64_t nblocks);

/* ---------------------------------------------------------------- crc.c */
/* Raw CRC32C (Castagnoli), no pre/post inversion, as ext4_chksum(). */
uint32_t crc32c(uint32_t crc, const void *buf, size_t len);
/* CRC16 (ANSI, poly 0x8005 reflected) for gdt_csum group descriptors. */
uint16_t crc16(uint16_t crc, const void *buf, size_t len);

/* ---------------------------------------------------------------- super.c */
/* Per-group facts parsed from the group descriptors at mount. */
struct group_info {
	uint64_t block_bitmap, inode_bitmap, inode_table;
	uint32_t free_blocks, free_inodes, used_dirs, itable_unused;
	uint16_t flags;
};

/*
 * The mounted file system.  The first section is read-mostly (geometry,
 * features, pointers) and set at mount; write-hot state lives in the
 * subsystems' own sharded structures, never on these cache lines
 * (seed 004).
 */
struct uext4_fs {
	/* --- read-mostly: set at mount, then only read --- */
	struct bdev *dev;
	struct bcache *bc;
	struct icache *icache;
	uint32_t block_size;
	uint32_t log_block_size;    /* log2(block_size) */
	uint32_t inode_size;
	uint32_t desc_size;
	uint32_t inodes_per_group;
	uint32_t blocks_per_group;
	uint32_t groups_count;
	uint32_t first_data_block;
	uint32_t first_ino;
	uint32_t inodes_per_block;
	uint32_t itb_per_group;     /* inode table blocks per group */
	uint64_t blocks_count;
	uint32_t inodes_count;
	uint32_t feature_compat, feature_incompat, feature_ro_compat;
	uint32_t csum_seed;         /* crc32c(~0, uuid) or s_checksum_seed */
	uint32_t hash_seed[4];
	uint8_t def_hash_version;
	bool hash_unsigned;         /* s_flags says unsigned char hashing */
	bool metadata_csum;
	bool gdt_csum;
	bool read_only;
	uint16_t want_extra_isize;
	struct group_info *groups;  /* groups_count entries, read-mostly */
	struct inode *root;         /* referenced from mount to unmount */
	struct ext4_super_block sb; /* copy of the on-disk superblock */
};

#define FS_HAS_INCOMPAT(fs, f) (((fs)->feature_incompat & EXT4_FEATURE_INCOMPAT_##f) != 0)
#define FS_HAS_COMPAT(fs, f) (((fs)->feature_compat & EXT4_FEATURE_COMPAT_##f) != 0)
#define FS_HAS_RO_COMPAT(fs, f) (((fs)->feature_ro_compat & EXT4_FEATURE_RO_COMPAT_##f) != 0)

int super_mount(const char *path, const struct uext4_opts *opts, struct uext4_fs **out);
void super_umount(struct uext4_fs *fs);
/* Does group g hold a superblock backup (sparse_super, sparse_super2)? */
bool super_group_has_super(struct uext4_fs *fs, uint32_t g);
/* Block holding group's descriptor, and its byte offset there (meta_bg
 * aware, as the kernel's descriptor_loc()). */
uint64_t super_desc_location(struct uext4_fs *fs, uint32_t group, uint32_t *offset);
/* Names of the feature bits set in the three masks, space separated. */
void super_feature_names(uint32_t compat, uint32_t incompat, uint32_t ro_compat,
			 char *buf, size_t size);

/* ---------------------------------------------------------------- csum.c
 * Checksum verification of every structure that carries one.  Each returns
 * 0 when the checksum matches (or the file system has none) and otherwise
 * -EUCLEAN with a message naming the structure, inode/group and block.
 */
int csum_verify_super(struct uext4_fs *fs, const struct ext4_super_block *sb);
int csum_verify_group_desc(struct uext4_fs *fs, uint32_t group, const void *gd);
int csum_verify_inode(struct uext4_fs *fs, uint64_t ino, const void *raw);
int csum_verify_extent_block(struct uext4_fs *fs, uint64_t ino, uint32_t generation,
			     uint64_t blocknr, const void *block);
int csum_verify_dir_leaf(struct uext4_fs *fs, uint64_t ino, uint32_t generation,
			 uint64_t blocknr, const void *block);
int csum_verify_dx_node(struct uext4_fs *fs, uint64_t ino, uint32_t generation,
			uint64_t blocknr, const void *block, unsigned count_offset,
			unsigned count, unsigned limit);
int csum_verify_xattr_block(struct uext4_fs *fs, uint64_t blocknr, const void *block);
int csum_verify_block_bitmap(struct uext4_fs *fs, uint32_t group, const void *bitmap);
int csum_verify_inode_bitmap(struct uext4_fs *fs, uint32_t group, const void *bitmap);
int csum_verify_orphan_block(struct uext4_fs *fs, uint64_t ino, uint32_t generation,
			     uint64_t blocknr, const void *block);
/* The value each structure's checksum field should hold (write path). */
uint32_t csum_inode(struct uext4_fs *fs, uint64_t ino, const void *raw);

/* ---------------------------------------------------------------- inode.c
 * In-memory inodes, cached with reference counts.  The parsed fields are
 * filled at load and protected by lock (rwlock); the raw copy keeps the
 * whole on-disk inode (inode_size bytes) for i_block, inline data and
 * in-inode xattrs.
 */
struct inode {
	uint64_t ino;
	struct urwlock lock;        /* protects every field below */
	uint32_t mode, uid, gid, links, flags, generation;
	uint64_t size;
	uint64_t blocks;            /* in 512-byte units */
	uint64_t file_acl;          /* external xattr block, 0 = none */
	struct timespec atime, mtime, ctime, crtime;
	uint16_t extra_isize;
	/* Cache bookkeeping, protected by the icache shard lock: */
	_Atomic uint32_t refcount;
	uint64_t nlookup;           /* FUSE lookup count */
	struct inode *hnext;
	struct inode *lru_prev, *lru_next;
	uint8_t raw[];              /* fs->inode_size bytes */
};

struct icache;
struct icache *icache_create(struct uext4_fs *fs);
void icache_destroy(struct icache *ic);
/* Get an inode (loading and verifying it); drop with iput(). */
int iget(struct uext4_fs *fs, uint64_t ino, struct inode **out);
void iput(struct uext4_fs *fs, struct inode *inode);
/* Another reference to an inode the caller already holds. */
void igrab(struct inode *inode);
void inode_forget(struct uext4_fs *fs, uint64_t ino, uint64_t nlookup);
void inode_to_stat(struct uext4_fs *fs, const struct inode *inode, struct uext4_stat *st);
/* Block and offset of an inode in its inode table. */
int inode_location(struct uext4_fs *fs, uint64_t ino, uint64_t *blocknr, uint32_t *offset);
static inline const struct ext4_inode *inode_raw(const struct inode *i)
{ return (const struct ext4_inode *)i->raw; }
/* Size of the raw inode including extra fields (128 + i_extra_isize). */
static inline bool inode_has_inline_data(const struct inode *i)
{ return (i->flags & EXT4_INLINE_DATA_FL) != 0; }

/* ---------------------------------------------------------------- file.c
 * Logical-to-physical mapping (dispatching to extents or block maps),
 * reading file data, and reading a block of a directory or other inode.
 */
struct block_map {
	uint64_t lblk;      /* first logical block asked for */
	uint64_t pblk;      /* physical block, 0 for a hole */
	uint64_t len;       /* blocks mapped contiguously from lblk (or hole length) */
	bool unwritten;     /* reads as zeros */
};
/* Map lblk of inode.  max_len bounds m->len.  A hole sets pblk = 0. */
int inode_map(struct uext4_fs *fs, struct inode *inode, uint64_t lblk, uint64_t max_len,
	      struct block_map *m);
/* Read logical block lblk of an inode through the buffer cache.
 * A hole returns -ENODATA. */
int inode_bread(struct uext4_fs *fs, struct inode *inode, uint64_t lblk,
		enum uext4_meta_kind kind, struct buf **out);
/* Read file data (regular files and symlink bodies), any offset. */
ssize_t file_pread(struct uext4_fs *fs, struct inode *inode, void *buf, size_t size, uint64_t off);

/* ---------------------------------------------------------------- extents.c */
int extent_map(struct uext4_fs *fs, struct inode *inode, uint64_t lblk, uint64_t max_len,
	       struct block_map *m);
/* ---------------------------------------------------------------- indirect.c */
int indirect_map(struct uext4_fs *fs, struct inode *inode, uint64_t lblk, uint64_t max_len,
		 struct block_map *m);
/* ---------------------------------------------------------------- inline.c */
/* Size of the inline data (i_block part + system.data xattr). */
int inline_size(struct uext4_fs *fs, struct inode *inode, size_t *size);
/* Copy inline data [off, off+size) into buf; returns bytes copied. */
ssize_t inline_pread(struct uext4_fs *fs, struct inode *inode, void *buf, size_t size, uint64_t off);

/* ---------------------------------------------------------------- dir.c / htree.c / dirhash.c */
int dir_lookup(struct uext4_fs *fs, struct inode *dir, const char *name, size_t len,
	       uint64_t *ino, unsigned *ftype);
int dir_iterate(struct uext4_fs *fs, struct inode *dir, uint64_t cookie,
		uext4_filldir_t fill, void *ctx);
/* htree (dx) directories; called by dir.c when EXT4_INDEX_FL is set. */
int htree_lookup(struct uext4_fs *fs, struct inode *dir, const char *name, size_t len,
		 uint64_t *ino, unsigned *ftype);
int htree_iterate(struct uext4_fs *fs, struct inode *dir, uint64_t cookie,
		  uext4_filldir_t fill, void *ctx);
/* Directory name hash (Documentation/filesystems/ext4/directory.rst). */
int dirhash(int version, const uint32_t seed[4], const char *name, size_t len,
	    uint32_t *hash, uint32_t *minor_hash);

/* ---------------------------------------------------------------- xattr.c */
/* Get an xattr by full name ("user.foo"); size 0 returns the needed length. */
ssize_t xattr_get(struct uext4_fs *fs, struct inode *inode, const char *name, void *buf, size_t size);
ssize_t xattr_list(struct uext4_fs *fs, struct inode *inode, char *buf, size_t size);
/* Raw lookup by index and suffix, in-inode first then the block. */
ssize_t xattr_get_raw(struct uext4_fs *fs, struct inode *inode, int index,
		      const char *name, size_t namelen, void *buf, size_t size);

/* Structural check of the in-inode xattr area, at inode load. */
int xattr_check_ibody(struct uext4_fs *fs, struct inode *inode);

/* ---------------------------------------------------------------- symlink.c */
ssize_t symlink_read(struct uext4_fs *fs, struct inode *inode, char *buf, size_t size);

#endif
