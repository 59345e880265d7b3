/*
 * internal.h - the core types every subsystem of libuext4 shares: the
 * mounted file system (struct uext4_fs, its groups and write-hot
 * counters), the buffer (struct buf), the transaction handle and the
 * in-memory inode, with the few inline accessors of their fields.
 *
 * Each subsystem's entry points are in its own header, src/NAME.h for
 * src/NAME.c (see ARCHITECTURE.md); a file includes the headers whose
 * names it uses (tests/include_check.sh checks it).  Errors are negative
 * errno values; the function that detects a problem records a message
 * with fs_err() (error.h).
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
#include "shard.h"

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

/* Subsystems' state, reached from struct uext4_fs through pointers (their
 * own headers define them). */
struct bdev;
struct bcache;
struct icache;
struct inode_slots;
struct namecache;
struct trans;
struct balloc_state;
struct xindex;
struct journal;
struct orphan_state;
struct mmp_state;
struct quota_state;
struct dquot;
struct fs_errors;
struct fs_stats;
struct balloc_pa;
struct verity_info;

/* ---------------------------------------------------------------- buffers (bcache.c) */
enum buf_state_bits {
	BUF_UPTODATE = 1u << 0, /* data holds the block's contents */
	BUF_DIRTY = 1u << 1,    /* data differs from disk (write path) */
	BUF_VERIFIED = 1u << 2, /* checksum/structure checked once */
	BUF_IOERR = 1u << 3,    /* last read failed */
	BUF_DIRENTS_OK = 1u << 4, /* a directory leaf whose entries were all
				   * checked once (dir.c); the writers keep it so */
	/* Frozen copy-on-write (trans.c): the closing commit took the buffer
	 * and has not copied it yet; the first writer (handle_write_access())
	 * or the commit, whichever wins the CAS to BUF_COPYING, copies it
	 * into buf.frozen.  Others wait while BUF_COPYING is set. */
	BUF_FROZEN = 1u << 5,
	BUF_COPYING = 1u << 6,
	BUF_DX_ORDERED = 1u << 7, /* an htree index block whose hashes were
				   * checked in order once (htree.c); the
				   * writers keep them so */
	BUF_LEAF_HINT = 1u << 9,  /* buf.hint describes the leaf (dir.c);
				   * cleared by every change but the hinted
				   * insert's own (bit 8: bcache's) */
};

/*
 * What a dirty buffer holds, so that the commit can set its checksum once
 * however many times it changed (on its copy: see csum_set_block()).
 */
enum csum_kind {
	CSUM_NONE = 0,          /* data blocks, journal, no checksum */
	CSUM_DIR_LEAF,          /* directory leaf: tail checksum (owner = dir ino/gen) */
	CSUM_DX_NODE,           /* htree root or node (owner = dir ino/gen) */
	CSUM_EXTENT,            /* extent index/leaf block (owner = file ino/gen) */
	CSUM_XATTR,             /* xattr block (keyed by its block number) */
	CSUM_BLOCK_BITMAP,      /* owner = group; checksum goes in the descriptor */
	CSUM_INODE_BITMAP,      /* owner = group */
	CSUM_INODE_TABLE,       /* inode checksums are set by inode_write() */
	CSUM_GROUP_DESC,        /* set by the commit from fs->groups[] */
	CSUM_SUPER,
	CSUM_ORPHAN,            /* orphan file block (owner = orphan file ino/gen) */
	CSUM_JOURNAL,           /* journal blocks: never through the cache */
};

struct buf {
	/* The buffer cache's bookkeeping (bcache.c, shard.h says what
	 * protects it); its key is blocknr, immutable while the buffer
	 * exists. */
	SHARD_NODE_ALIAS(blocknr);  /* refcount: 0 = idle; SHARD_REF_DEAD = being freed */
	uint8_t *data;              /* block_size bytes; immutable pointer */
	_Atomic uint32_t state;     /* BUF_* bits, atomic */
	uint8_t kind;               /* enum uext4_meta_kind of the first read */
	struct ulock lock;          /* serialises reading in (and xattr block changes) */
	/* Set by handle_dirty() (relaxed atomics: threads writing different
	 * inodes of one inode-table block store the same values); read by the
	 * commit once all handles have ended: */
	_Atomic uint8_t csum_kind;  /* enum csum_kind */
	_Atomic uint32_t owner_gen;
	_Atomic uint64_t owner;     /* inode number, or group for bitmaps */
	/* Where the committing transaction's copy goes: set by the commit
	 * (handles drained) before BUF_FROZEN, read by whoever wins the CAS
	 * from BUF_FROZEN to BUF_COPYING (trans.c). */
	uint8_t *frozen;
	/* Directory leaves (dir.c), valid while BUF_LEAF_HINT is set; read
	 * and written only by a writer of the leaf (its htree leaf lock or
	 * the directory's lock held for writing): */
	struct leaf_hint {
		uint32_t tail;          /* offset of the leaf's last entry */
		uint32_t slack_before;  /* >= the slack of every entry before it */
		uint64_t bloom[32];     /* 3 bits per live name (hint_set_bits) */
	} hint;
#ifdef UEXT4_LOCKDEP
	_Atomic uint32_t access_tid; /* last transaction that took write access */
#endif
	struct buf *dirty_next;     /* shard's dirty list (its lock) */
};

/* A transaction handle (trans.c, see trans.h). */
struct handle {
	struct uext4_fs *fs;
	unsigned depth;     /* nested begins on this thread */
	unsigned slot;      /* which drain counter this handle holds */
	int err;            /* first error recorded */
	uint32_t tid;       /* the transaction this handle belongs to */
	/* Allocations may take the root-reserved blocks: the extent-tree
	 * blocks of a punch or truncate, which free space and must not fail
	 * for want of it (the kernel's EXT4_GET_BLOCKS_METADATA_NOFAIL).
	 * Set and restored by the owning thread around those calls. */
	bool use_reserved;
};

/* ---------------------------------------------------------------- counters
 * A counter many threads change and few read (free blocks, free inodes,
 * directories): one slot per cache line, picked by thread, summed on read.
 * No global cache line is written on the hot path.
 */
#define PCOUNTER_SLOTS 16
struct pcounter {
	struct {
		_Atomic int64_t v;
		char pad[CACHELINE - sizeof(int64_t)];
	} slot[PCOUNTER_SLOTS];
};
static inline void pcounter_add(struct pcounter *c, int64_t d)
{
	atomic_fetch_add_explicit(&c->slot[thread_slot() % PCOUNTER_SLOTS].v, d,
				  memory_order_relaxed);
}
static inline int64_t pcounter_sum(struct pcounter *c)
{
	int64_t s = 0;

	for (unsigned i = 0; i < PCOUNTER_SLOTS; i++)
		s += atomic_load_explicit(&c->slot[i].v, memory_order_relaxed);
	return s;
}
static inline void pcounter_set(struct pcounter *c, int64_t v)
{
	for (unsigned i = 0; i < PCOUNTER_SLOTS; i++)
		atomic_store_explicit(&c->slot[i].v, i ? 0 : v, memory_order_relaxed);
}

/* ---------------------------------------------------------------- super.c */
/*
 * One block group, parsed from its descriptor at mount and from then on the
 * truth for it: the commit writes it back into the descriptor block.  Each
 * group sits on its own cache line(s) with its own lock (seed 004).
 */
struct group_info {
	struct ulock lock;          /* RANK_GROUP: the fields marked (L), and the
				     * contents of the group's two bitmaps */
	uint64_t block_bitmap, inode_bitmap, inode_table; /* immutable */
	uint32_t free_blocks, free_inodes, used_dirs;     /* (L) */
	_Atomic uint32_t itable_unused;  /* (L) for writers; read lock-free */
	_Atomic uint32_t flags;          /* EXT4_BG_*; (L) for writers; read lock-free */
	uint32_t block_bitmap_csum, inode_bitmap_csum;    /* commit only */
	uint32_t ifree_hint;        /* (L) no free inode below this index (ialloc) */
	/* Immutable: the descriptor's claim at mount (bg_itable_unused, 0
	 * for INODE_UNINIT): inodes with index >= used_at_mount (0-based, in
	 * the group) were never in use, so their inode-table copies may be
	 * garbage (lazy itable init) and are not trusted (ialloc.c). */
	uint32_t used_at_mount;
	/* Inodes with index >= never_used_from were never in use before this
	 * mount, so an inode-table block made only of them never needs a read
	 * from disk: every in-use inode there is new (seed 002).  Starts at
	 * inodes_per_group (no shortcut); ialloc sets it to used_at_mount
	 * once, under the lock, when the inode bitmap is first loaded and
	 * agrees (no inode in use at or past used_at_mount, as the kernel's
	 * __ext4_get_inode_loc checks the bitmap); read lock-free. */
	_Atomic uint32_t never_used_from;
	bool ibitmap_checked;       /* (L) the bitmap was compared with it */
} __attribute__((aligned(CACHELINE)));

/*
 * Write-hot state of a mounted file system, allocated apart from struct
 * uext4_fs so that nothing on its read-mostly cache lines is ever written
 * by the hot path (seed 004).
 */
struct fs_hot {
	struct pcounter free_blocks;
	struct pcounter free_inodes;
	struct pcounter dirs;
	_Atomic uint32_t last_flex;          /* ialloc: flex group last used for files */
	_Atomic uint64_t *group_dirty;       /* bitmap of groups to write at commit */
	_Atomic bool sb_dirty;               /* superblock changed besides its counters */
	_Atomic uint32_t next_generation;    /* use_fixed_time: i_generation counter */
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
	/* The external journal's device (uext4_opts.journal_path), or NULL:
	 * its JBD2 superblock is block jdev_start, the log spans jdev_blocks
	 * blocks (the journal_dev superblock's count). */
	struct bdev *jdev;
	uint64_t jdev_start, jdev_blocks;
	struct bcache *bc;
	struct icache *icache;
	struct inode_slots *islots; /* inode-table slot locks (inode.c) */
	struct namecache *nc;       /* name cache (namecache.c), NULL = off */
	unsigned max_open_files;    /* uext4_opts.max_open_files, set at mount */
	_Atomic unsigned open_files; /* uext4_file handles open now; atomic */
	uint32_t block_size;
	uint32_t log_block_size;    /* log2(block_size) */
	uint32_t inode_size;
	uint32_t desc_size;
	uint32_t inodes_per_group;
	uint32_t blocks_per_group;
	/* bigalloc: a cluster is 2^cluster_bits blocks (0 without bigalloc);
	 * the block bitmap has a bit per cluster, the free counts count
	 * clusters (s_clusters_per_group = blocks_per_group >> cluster_bits). */
	uint32_t cluster_bits;
	uint32_t clusters_per_group;
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
	/* Set once when an error stops all writing (errors=remount-ro or
	 * panic, as the kernel aborts its journal): handles are refused and
	 * nothing is committed.  One relaxed load in handle_begin(). */
	_Atomic bool aborted;
	uint16_t want_extra_isize;
	uint32_t log_groups_per_flex; /* 0 without flex_bg */
	uint64_t reserved_blocks;   /* s_r_blocks_count: only root may use them */
	struct group_info *groups;  /* groups_count entries; see struct group_info */
	struct fs_hot *hot;         /* write-hot counters, on their own lines */
	struct trans *trans;        /* trans.c: handles and commits */
	struct balloc_state *balloc; /* balloc.c: preallocation windows */
	/* The blocks the bad-blocks inode lists, sorted: found by
	 * super_check_groups(), taken over by balloc_init() (then NULL). */
	uint64_t *bad_blocks;
	size_t nr_bad_blocks;
	_Atomic(struct xindex *) xindex; /* xattr.c: shared-block index, made on first use */
	struct journal *journal;    /* journal.c; NULL without a journal */
	struct orphan_state *orphan; /* orphan.c; read-write mounts */
	struct mmp_state *mmp;      /* mmp.c; read-write mounts of -O mmp, else NULL */
	struct quota_state *quota;  /* quota.c; read-write mounts of -O quota, else NULL */
	unsigned commit_secs;       /* commit interval */
	struct uext4_recovery recovery; /* what the mount's recovery did */
	struct inode *root;         /* referenced from mount to unmount */
	struct fs_errors *errs;     /* error.c: recorded errors, errors= policy */
	struct fs_stats *stats;     /* stats.c: statistics switch and journal counters */
	/* uext4_opts.use_fixed_time / fixed_time / bulk, as mounted: */
	bool use_fixed_time;
	int64_t fixed_time;
	bool bulk;
	/* s_last_orphan (disk byte order) as on disk when start_writing()
	 * begins: set there, before any handle; read by the first write. */
	uint32_t disk_last_orphan;
	/* --- written: by the commit (counters, times) and the legacy orphan
	 * list (s_last_orphan), so on cache lines of its own, after every
	 * read-mostly field (checked in super.c) --- */
	struct ext4_super_block sb __attribute__((aligned(CACHELINE)));
	/* The latest time a cache above stamped for us (the FUSE writeback
	 * cache's mtime and ctime, in ns since 1970): fs_time() never gives
	 * less, as the kernel's current_time() never gives less than the fine
	 * times it handed out (multigrain floor).  Atomic, no lock; raised by
	 * fs_time_floor_raise() only. */
	_Atomic int64_t time_floor_ns;
} __attribute__((aligned(CACHELINE)));

#define FS_HAS_INCOMPAT(fs, f) (((fs)->feature_incompat & EXT4_FEATURE_INCOMPAT_##f) != 0)
#define FS_HAS_COMPAT(fs, f) (((fs)->feature_compat & EXT4_FEATURE_COMPAT_##f) != 0)
#define FS_HAS_RO_COMPAT(fs, f) (((fs)->feature_ro_compat & EXT4_FEATURE_RO_COMPAT_##f) != 0)

static inline uint64_t group_first_block(const struct uext4_fs *fs, uint32_t g)
{ return fs->first_data_block + (uint64_t)g * fs->blocks_per_group; }
static inline uint32_t group_nblocks(const struct uext4_fs *fs, uint32_t g)
{
	uint64_t left = fs->blocks_count - group_first_block(fs, g);
	return left < fs->blocks_per_group ? (uint32_t)left : fs->blocks_per_group;
}
/* Clusters in group g (its last may be short); the unit of its bitmap
 * and free count.  Without bigalloc, group_nblocks(). */
static inline uint32_t group_nclusters(const struct uext4_fs *fs, uint32_t g)
{
	uint32_t nb = group_nblocks(fs, g);
	return (nb + (1u << fs->cluster_bits) - 1) >> fs->cluster_bits;
}
static inline uint32_t group_of_block(const struct uext4_fs *fs, uint64_t blk)
{ return (uint32_t)((blk - fs->first_data_block) / fs->blocks_per_group); }
/* Blocks to clusters and back (the kernel's EXT4_B2C / EXT4_C2B). */
static inline uint64_t fs_b2c(const struct uext4_fs *fs, uint64_t blk)
{ return blk >> fs->cluster_bits; }
static inline uint64_t fs_c2b(const struct uext4_fs *fs, uint64_t c)
{ return c << fs->cluster_bits; }
static inline uint32_t fs_cluster_blocks(const struct uext4_fs *fs)
{ return 1u << fs->cluster_bits; }
static inline uint32_t group_of_ino(const struct uext4_fs *fs, uint64_t ino)
{ return (uint32_t)((ino - 1) / fs->inodes_per_group); }

/* ---------------------------------------------------------------- inode.c
 * In-memory inodes, cached with reference counts.  The parsed fields are
 * filled at load and protected by lock (rwlock); the raw copy keeps the
 * whole on-disk inode (inode_size bytes) for i_block, inline data and
 * in-inode xattrs.
 */
struct inode {
	/* The inode cache's bookkeeping (shard.h says what
	 * protects it; refcount SHARD_REF_DEAD = being freed); its key is
	 * ino, immutable while the inode exists. */
	SHARD_NODE_ALIAS(ino);
	/* Protects the fields from mode to pa, but for two exceptions.  A
	 * directory's mtime and ctime: creates and unlinks of files that stay
	 * in one htree leaf hold the directory's lock for READING only, and change
	 * those two under the directory's attribute stripe lock (dir.c,
	 * dirtimes_touch_shared(), with a seqcount); so they are written by the
	 * holder of lock for writing, or of lock for reading and that stripe
	 * lock, and read under lock for writing or with dirtimes_read().
	 * last_alloc_group: relaxed atomics under lock held either way.  The
	 * fields from istate on are atomics or say what protects them. */
	struct urwlock lock;
	uint32_t mode, uid, gid, links, flags, generation;
	uint64_t size;
	uint64_t blocks;            /* in 512-byte units */
	uint64_t file_acl;          /* external xattr block, 0 = none */
	struct timespec atime, mtime, ctime, crtime; /* a directory's mtime, ctime: see lock */
	uint16_t extra_isize;
	uint32_t projid;            /* i_projid (0 where extra_isize lacks it) */
	uint32_t dtime;
	/* Allocator state, under lock (write) but for last_alloc_group: */
	uint32_t last_alloc_group;  /* ialloc: group last picked for this directory's
				     * files; a hint, relaxed atomics (ialloc.c) */
	uint64_t alloc_goal;        /* balloc: block after the last allocation, 0 = none */
	struct balloc_pa *pa;       /* balloc: in-memory preallocation, or NULL */
	_Atomic uint32_t istate;    /* INODE_* bits */
	_Atomic uint32_t last_tid;  /* transaction that last wrote the inode (fsync) */
	/* Directories: identity in the name cache (namecache.c), atomic, no
	 * lock: 0 until first used there, then unique within the mount. */
	_Atomic uint64_t nc_id;
	/* Orphan state (orphan.c), protected by the orphan code's own locks:
	 * the slot in the orphan file (block * entries per block + index),
	 * and the legacy list's links (in memory, and the next inode number
	 * that i_dtime holds on disk while INODE_ORPHAN_LIST is set). */
	uint32_t orphan_slot;
	struct inode *orphan_prev, *orphan_next;
	_Atomic uint32_t orphan_next_ino;
	/* The frontend's lookup count (the FUSE kernel's nlookup), atomic, no
	 * lock: while it is > 0 it holds one reference (taken at 0 -> 1,
	 * dropped at -> 0; inode_lookup_ref(), inode_forget()). */
	_Atomic uint64_t nlookup;
	/* fs-verity (verity.c): the parsed descriptor and the verified Merkle
	 * tree blocks, built at the first verified read and published once
	 * by CAS, immutable after; freed with the inode (icache_host). */
	_Atomic(struct verity_info *) verity;
	/* Quota (quota.c): what this inode's usage is charged to as of its
	 * last write: the dquots (NULL: not looked up yet, then q_id says),
	 * i_blocks, and whether it is charged.  Under its inode-table slot
	 * lock (itable_update()), as the bytes they mirror; set at load or
	 * creation by the owner. */
	struct dquot *q_dq[3];
	uint32_t q_id[3];
	uint64_t q_blocks;
	uint32_t q_state;
	/* fs->inode_size bytes: encoded from the fields and copied to the
	 * inode-table buffer under the slot lock of the inode's number
	 * (inode.c, itable_update()), which serialises the writers of a
	 * directory that hold lock only for reading. */
	uint8_t raw[];
};
/* raw is read as a struct ext4_inode (4-byte fields). */
_Static_assert(offsetof(struct inode, raw) % 4 == 0, "struct inode: raw misaligned");

enum inode_state_bits {
	INODE_NEW = 1u << 0,        /* created since mount */
	INODE_DELETED = 1u << 1,    /* freed: links 0 and last reference gone */
	INODE_UNLINKED = 1u << 2,   /* links reached 0: free at the last iput() */
	INODE_UNHASHED = 1u << 3,   /* deleted and out of the cache's hash */
	INODE_ORPHAN_FILE = 1u << 4, /* has a slot in the orphan file (orphan_slot) */
	INODE_ORPHAN_LIST = 1u << 5, /* on the legacy s_last_orphan list */
	/* Being made: cached (its number is taken) but not yet filled in;
	 * iget() refuses it (ENOENT: only a number looked up before the
	 * previous owner was freed can lead there) until inode_created(). */
	INODE_CREATING = 1u << 6,
	/* Its inode-bitmap bit is known to be set: set by our ialloc (a new
	 * inode) or read by ialloc_check_allocated() once.  Only freeing this
	 * inode clears the bit (INODE_DELETED is set first), so while cached
	 * the bitmap need not be read again (inode_check_map_from()). */
	INODE_BITMAP_OK = 1u << 7,
	/* Claimed to be freed by whoever holds its only reference
	 * (inode_claim_free()): the unlink that takes its last link, freeing
	 * it in that same handle, or its last iput() (inode_delete()); so
	 * iget() refuses it as if deleted. */
	INODE_FREEING = 1u << 8,
	/* A claim is looking at the count (for a few instructions): a grab
	 * that meets it waits for the outcome, FREEING set or this cleared,
	 * rather than refuse an inode the claim may leave alive. */
	INODE_CLAIMING = 1u << 9,
	/* An O_TMPFILE inode (uext4_tmpfile(), not O_EXCL): no links, but a
	 * link may give it a name, which takes it off its orphan list (the
	 * kernel's I_LINKABLE).  Cleared by that link. */
	INODE_LINKABLE = 1u << 10,
	/* May still take inline data (the kernel's EXT4_STATE_MAY_INLINE_DATA):
	 * set on a new regular file or directory of an inline_data file
	 * system whose inode has an extra body; a file's first writes then
	 * go inline while they fit (inline.c), a directory is made inline
	 * (dir.c).  Cleared when the file's data goes to blocks.  In memory
	 * only, as the kernel's: an inode read back from disk has it not. */
	INODE_MAY_INLINE = 1u << 11,
};
static inline struct ext4_inode *inode_raw_mut(struct inode *i)
{ return (struct ext4_inode *)i->raw; }
/* Add or remove file system blocks to i_blocks (512-byte units). */
static inline void inode_add_blocks(struct uext4_fs *fs, struct inode *i, int64_t nblocks)
{ i->blocks += (uint64_t)(nblocks * (int64_t)(fs->block_size >> 9)); }
static inline const struct ext4_inode *inode_raw(const struct inode *i)
{ return (const struct ext4_inode *)i->raw; }
/* Size of the raw inode including extra fields (128 + i_extra_isize). */
static inline bool inode_has_inline_data(const struct inode *i)
{ return (i->flags & EXT4_INLINE_DATA_FL) != 0; }

#endif
