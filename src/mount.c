/*
 * mount.c - mount and unmount: open the device, read the superblock and
 * descriptors (super.c), replay the journal (recovery at mount), load the
 * caches, start writing (journal, transactions, orphan cleanup, the commit
 * timer); at unmount write everything back and mark the image clean.  It
 * fills in the hosts through which the journal (struct journal_host) and
 * the commit (struct commit_host) reach the file system above them.
 */
#include "balloc.h"
#include "bcache.h"
#include "blockdev.h"
#include "crashdev.h"
#include "crc.h"
#include "csum.h"
#include "error.h"
#include "fc_replay.h"
#include "file.h"
#include "icache.h"
#include "ifree.h"
#include "inode.h"
#include "internal.h"
#include "journal.h"
#include "lock.h"
#include "mmp.h"
#include "mount.h"
#include "namecache.h"
#include "ondisk.h"
#include "orphan.h"
#include "quota.h"
#include "stats.h"
#include "super.h"
#include "trans.h"
#include "verity.h"
#include "xattr.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int open_device(const char *path, const struct uext4_opts *o, struct bdev **out)
{
	int err = 0;

	*out = o->memory_backend ? bdev_open_memory_copy_at(path, o->offset, &err)
				 : bdev_open_path(path, o->read_only, o->offset, o->discard, &err);
	return *out ? 0 : (err ? err : -EIO);
}

/* Sharded counters start from the sum of the group descriptors, as the
 * kernel's (the superblock's copy is only a hint). */
static int setup_hot(struct uext4_fs *fs)
{
	uint64_t fb = 0, fi = 0, dirs = 0;
	uint32_t words = (fs->groups_count + 63) / 64;

	fs->hot = aligned_alloc(CACHELINE, (sizeof(*fs->hot) + CACHELINE - 1) / CACHELINE * CACHELINE);
	if (!fs->hot)
		return fs_err(ENOMEM, "out of memory for the counters");
	memset(fs->hot, 0, sizeof(*fs->hot));
	fs->hot->group_dirty = calloc(words, sizeof(uint64_t));
	if (!fs->hot->group_dirty)
		return fs_err(ENOMEM, "out of memory for the counters");
	for (uint32_t g = 0; g < fs->groups_count; g++) {
		fb += fs->groups[g].free_blocks;
		fi += fs->groups[g].free_inodes;
		dirs += fs->groups[g].used_dirs;
	}
	pcounter_set(&fs->hot->free_blocks, (int64_t)fb);
	pcounter_set(&fs->hot->free_inodes, (int64_t)fi);
	pcounter_set(&fs->hot->dirs, (int64_t)dirs);
	return 0;
}

/* ------------------------------------------------------------ the journal's host
 * What the journal (journal.h) gets from the file system: its file, the
 * journal inode, and the error mark of a replay that skipped blocks.
 */

/* The journal is on a device of its own (mke2fs -J device=). */
static bool external_journal(const struct uext4_fs *fs)
{
	return FS_HAS_COMPAT(fs, HAS_JOURNAL) && le32(fs->sb.s_journal_inum) == 0;
}

/* Which journal inode. */
static int journal_inum(struct uext4_fs *fs, uint32_t *ino)
{
	if (FS_HAS_INCOMPAT(fs, JOURNAL_DEV))
		return fs_err(EINVAL, "this image is an external journal device (journal_dev), "
			      "not a file system");
	*ino = le32(fs->sb.s_journal_inum);
	if (*ino > fs->inodes_count)
		return fs_corrupt("superblock: journal inode %u beyond the %u inodes", *ino,
				  fs->inodes_count);
	return 0;
}

/* An external journal: the log's block n is the device's block n (as
 * jbd2_journal_init_dev()), but its superblock, block 0 of the log, sits
 * in the block after the journal_dev superblock's. */
static void external_place(struct uext4_fs *fs, struct journal_place *p)
{
	p->file = NULL;
	p->dev = fs->jdev;
	p->size = fs->jdev_blocks * fs->block_size;
	p->id = 0;
	p->lo = 1;
	p->hi = fs->jdev_blocks;
	p->user = fs->sb.s_uuid;
}

static int journal_get(struct uext4_fs *fs, struct journal_place *p)
{
	struct inode *inode;
	uint32_t ino = 0;
	int err;

	if (fs->jdev) {
		external_place(fs, p);
		return 0;
	}
	if (external_journal(fs))
		return fs_err(EINVAL, "the journal is on an external device, which was not "
			      "given (-o journal=PATH)");
	if ((err = journal_inum(fs, &ino)) || (err = iget(fs, ino, &inode)))
		return err;
	p->file = inode;
	p->dev = fs->dev;
	p->size = inode->size;
	p->id = inode->ino;
	p->lo = fs->first_data_block;
	p->hi = fs->blocks_count;
	p->user = NULL;
	return 0;
}

static int journal_map(struct uext4_fs *fs, void *file, uint32_t lblk, uint32_t count,
		       uint64_t *pblk, uint64_t *len)
{
	struct block_map m;
	int err;

	if (!file) {    /* the external device (external_place()) */
		*pblk = lblk ? lblk : fs->jdev_start;
		*len = lblk ? count : 1;
		return 0;
	}
	if ((err = inode_map(fs, file, lblk, count, &m)))
		return err;
	*pblk = m.pblk;
	*len = m.len;
	return 0;
}

static void journal_put(struct uext4_fs *fs, void *file)
{
	if (file)
		iput(fs, file);
}

/* ------------------------------------------------------------ an external journal */

/* The journal_dev superblock at byte 1024 of the external device: its
 * magic and feature, checksum, UUID and block size must be those of this
 * file system's journal (as the kernel's ext4_get_dev_journal()). */
static int check_jdev_super(struct uext4_fs *fs, const struct ext4_super_block *js,
			    const char *path)
{
	char want[40], have[40];
	uint32_t log_bs = le32(js->s_log_block_size);

	if (le16(js->s_magic) != EXT4_SUPER_MAGIC ||
	    !(le32(js->s_feature_incompat) & EXT4_FEATURE_INCOMPAT_JOURNAL_DEV))
		return fs_err(EINVAL, "journal=%s: not an external journal device (no ext4 "
			      "superblock with journal_dev: make one with mke2fs -O journal_dev)",
			      path);
	if ((le32(js->s_feature_ro_compat) & EXT4_FEATURE_RO_COMPAT_METADATA_CSUM) &&
	    le32(js->s_checksum) != crc32c(~0u, js, offsetof(struct ext4_super_block, s_checksum)))
		return fs_corrupt("journal=%s: the journal device's superblock checksum does not "
				  "match", path);
	if (memcmp(js->s_uuid, fs->sb.s_journal_uuid, 16)) {
		journal_uuid_str(fs->sb.s_journal_uuid, want);
		journal_uuid_str(js->s_uuid, have);
		return fs_err(EINVAL, "journal=%s: wrong journal: its UUID is %s, the file system's "
			      "journal is %s", path, have, want);
	}
	if (log_bs > 6 || (1024u << log_bs) != fs->block_size)
		return fs_err(EINVAL, "journal=%s: the journal's block size (%u) differs from the "
			      "file system's (%u)", path, log_bs > 6 ? 0 : 1024u << log_bs,
			      fs->block_size);
	return 0;
}

/* Where the log is on the checked device: its JBD2 superblock in the block
 * after the one holding the journal_dev superblock, and the device's size. */
static int place_jdev(struct uext4_fs *fs, const struct ext4_super_block *js, const char *path)
{
	uint64_t blocks = le32(js->s_blocks_count_lo);

	if (le32(js->s_feature_incompat) & EXT4_FEATURE_INCOMPAT_64BIT)
		blocks |= (uint64_t)le32(js->s_blocks_count_hi) << 32;
	fs->jdev_start = EXT4_SUPERBLOCK_OFFSET / fs->block_size + 1;
	fs->jdev_blocks = blocks;
	if (blocks > fs->jdev->size / fs->block_size)
		return fs_corrupt("journal=%s: its superblock counts %llu blocks, the device holds "
				  "%llu", path, (unsigned long long)blocks,
				  (unsigned long long)(fs->jdev->size / fs->block_size));
	if (blocks < fs->jdev_start + 3)
		return fs_corrupt("journal=%s: %llu blocks hold no journal", path,
				  (unsigned long long)blocks);
	return 0;
}

/* No journal device given: fine only for reading a clean file system
 * (as the kernel's ro,noload); else say what to pass. */
static int no_jdev(struct uext4_fs *fs)
{
	char want[40];

	if (fs->read_only && !FS_HAS_INCOMPAT(fs, RECOVER))
		return 0;
	journal_uuid_str(fs->sb.s_journal_uuid, want);
	return fs_err(EINVAL, "the file system's journal is on an external device (journal "
		      "UUID %s, device number 0x%x)%s: pass its path with -o journal=PATH "
		      "(--journal PATH)", want, le32(fs->sb.s_journal_dev),
		      FS_HAS_INCOMPAT(fs, RECOVER) ? ", and it needs recovery" :
		      ", which a read-write mount needs");
}

/* As the kernel given journal_path=: a block device's number replaces
 * s_journal_dev (in memory; the first commit that writes writes it). */
static void note_jdev_number(struct uext4_fs *fs, const char *path)
{
	struct stat st;

	if (fs->jdev && !stat(path, &st) && S_ISBLK(st.st_mode) &&
	    (uint32_t)st.st_rdev != le32(fs->sb.s_journal_dev))
		fs->sb.s_journal_dev = cpu_to_le32((uint32_t)st.st_rdev);
}

/* Open and check the external journal device named by o->journal_path. */
static int open_jdev(struct uext4_fs *fs, const struct uext4_opts *o)
{
	struct ext4_super_block js;
	int err = 0;

	if (!external_journal(fs)) {
		if (!o->journal_path)
			return 0;
		return fs_err(EINVAL, "journal=%s given, but the file system's journal is %s",
			      o->journal_path, FS_HAS_COMPAT(fs, HAS_JOURNAL) ?
			      "internal (its journal inode)" : "absent");
	}
	if (!o->journal_path)
		return no_jdev(fs);
	fs->jdev = bdev_open_path(o->journal_path, fs->read_only, 0, 0, &err);
	if (!fs->jdev)
		return err ? err : -EIO;
	err = bdev_read(fs->jdev, &js, sizeof(js), EXT4_SUPERBLOCK_OFFSET);
	if (err < 0)
		return fs_err(-err, "journal=%s: reading its superblock failed", o->journal_path);
	if ((err = check_jdev_super(fs, &js, o->journal_path)))
		return err;
	return place_jdev(fs, &js, o->journal_path);
}

/*
 * Blocks were skipped: set EXT4_ERROR_FS in the superblock on the device
 * (after the replay, which may have rewritten it), so that e2fsck checks
 * the file system whatever happens to this mount; flushed before the
 * journal is marked empty.  The error fields (count, block, function) are
 * recorded by the mount's fs_error() once it is up (start_writing()).
 */
static int journal_mark_error(struct uext4_fs *fs)
{
	struct ext4_super_block sb;
	int err = bdev_read(fs->dev, &sb, sizeof(sb), EXT4_SUPERBLOCK_OFFSET);

	if (err < 0)
		return fs_err(-err, "journal recovery: reading the superblock failed");
	if (le16(sb.s_magic) != EXT4_SUPER_MAGIC)
		return fs_corrupt("superblock after journal replay: bad magic 0x%x",
				  le16(sb.s_magic));
	sb.s_state = cpu_to_le16(le16(sb.s_state) | EXT4_ERROR_FS);
	csum_set_super(fs, &sb);
	err = bdev_write(fs->dev, &sb, sizeof(sb), EXT4_SUPERBLOCK_OFFSET);
	if (err < 0)
		return fs_err(-err, "journal recovery: writing the superblock failed");
	return 0;
}

/* The fast-commit area is the file system's format: fc_replay.c checks it. */
static int journal_fc_scan(struct uext4_fs *fs, const uint8_t *area, uint32_t nblocks,
			   uint32_t tid, void **fc)
{
	struct fc_replay *out = NULL;
	int err = fc_scan(fs, area, nblocks, tid, &out);

	*fc = out;
	return err;
}

static void journal_fc_free(void *fc)
{
	fc_free(fc);
}

const struct journal_host super_journal_host = {
	.get = journal_get,
	.map = journal_map,
	.put = journal_put,
	.mark_error = journal_mark_error,
	.fc_scan = journal_fc_scan,
	.fc_free = journal_fc_free,
	.now = fs_time,
};

/* What trans.c's commit calls above it: descriptors, the superblock, the
 * first write, and the blocks freed by a transaction (balloc.c). */
/* The quota files' blocks, for quota.c (struct quota_host): file.c's
 * mapping, which quota.c below the data layer cannot call itself. */
static int quota_map(struct uext4_fs *fs, struct handle *h, struct inode *q, uint64_t lblk,
		     uint64_t *pblk, bool *fresh)
{
	struct block_map m;
	int err = h ? inode_map_blocks(h, q, lblk, 1, MAP_CREATE, &m) : inode_map(fs, q, lblk, 1, &m);

	if (err)
		return err;
	*pblk = m.unwritten && !h ? 0 : m.pblk;
	*fresh = h && m.fresh;
	return 0;
}

static const struct quota_host mount_quota_host = {
	.map = quota_map,
};

static const struct commit_host super_commit_host = {
	.begin_writing = super_begin_writing,
	.group_set_dirty = group_set_dirty,
	.write_group_desc = super_write_group_desc,
	.write_super = super_write,
	.write_quota = quota_fold,
	.release_busy = balloc_release_busy,
	.has_busy = balloc_has_busy,
};

/*
 * Read-write mount: open the journal and prepare the superblock for
 * writing (needs_recovery as the kernel, or without a journal the state
 * not clean; the mount count and time; orphan_present), in memory only:
 * it reaches the disk with the first commit that changes something
 * (super_begin_writing()), so a mount that only reads leaves the image
 * byte for byte as it was.  Then finish what a crash left on the orphan
 * lists and start the commit timer.
 */
static int start_writing(struct uext4_fs *fs, const struct uext4_opts *o)
{
	struct timespec now = fs_time(fs);
	/* Left by a crash or by the replay: clearing it is a change to make. */
	bool must_write = FS_HAS_INCOMPAT(fs, RECOVER) || FS_HAS_RO_COMPAT(fs, ORPHAN_PRESENT);
	int err;

	fs->disk_last_orphan = fs->sb.s_last_orphan;   /* the first write keeps it */
	if (o->journal_path)
		note_jdev_number(fs, o->journal_path);
	if (FS_HAS_COMPAT(fs, HAS_JOURNAL) && (err = journal_open(fs, &super_journal_host, &fs->journal)))
		return err;
	if ((err = trans_init(fs, &super_commit_host)) || (err = balloc_init(fs)))
		return err;
	fs->sb.s_mnt_count = cpu_to_le16((uint16_t)(le16(fs->sb.s_mnt_count) + 1));
	fs->sb.s_mtime = cpu_to_le32((uint32_t)now.tv_sec);
	fs->sb.s_mtime_hi = (uint8_t)((uint64_t)now.tv_sec >> 32);
	if (fs->journal)
		super_set_incompat(fs, EXT4_FEATURE_INCOMPAT_RECOVER, true);
	if (!fs->journal || fs->bulk)
		/* Without a journal (or with one the bulk mode does not log
		 * into) a crash needs e2fsck: say so until unmount. */
		fs->sb.s_state = cpu_to_le16(le16(fs->sb.s_state) & ~EXT4_VALID_FS);
	if ((err = orphan_init(fs)) || (must_write && (err = trans_begin_writing(fs))))
		return err;
	/* Before the orphans are freed: their usage leaves the files. */
	if ((err = quota_load(fs, &mount_quota_host)))
		return err;
	err = orphan_cleanup(fs, &fs->recovery);
	if (atomic_load(&fs->aborted))
		return 0;   /* an error made the mount read-only (errors=remount-ro) */
	if (err)
		return err;
	if (fs->recovery.bad_blocks)
		/* Recorded now that the mount can write (recovery.c set
		 * EXT4_ERROR_FS already); the errors= policy applies. */
		FS_ERROR(fs, EBADMSG, 0, fs->recovery.bad_home_block,
			 "journal recovery: %u logged blocks had a bad checksum and were not "
			 "replayed (first: journal block %u, transaction %u, home block %llu)",
			 fs->recovery.bad_blocks, fs->recovery.bad_journal_block,
			 fs->recovery.bad_tid, (unsigned long long)fs->recovery.bad_home_block);
	if (atomic_load(&fs->aborted))
		return 0;
	if (fs->recovery.orphans_truncated || fs->recovery.orphans_deleted ||
	    fs->recovery.orphans_failed)
		err = trans_commit(fs);
	if (err || fs->bulk)
		return err; /* bulk: no timer, commits at deterministic points */
	return trans_start_timer(fs, fs->commit_secs);
}

static int mount_bdev_named(struct bdev *dev, const struct uext4_opts *opts, const char *name,
			    struct uext4_fs **out);

int super_mount(const char *path, const struct uext4_opts *opts, struct uext4_fs **out)
{
	struct uext4_opts none = {0};
	const struct uext4_opts *o = opts ? opts : &none;
	struct bdev *dev;
	int err = open_device(path, o, &dev);

	if (err)
		return err;
	return mount_bdev_named(dev, o, path, out);
}

/* The caches and group table of a mount (none of it written back). */
/* What the inode cache and loader call outside their layer: freeing an
 * unlinked inode, giving back an evicted inode's block preallocation,
 * checking a loaded inode's xattrs, asking whether orphan cleanup runs,
 * freeing an evicted inode's fs-verity state. */
static const struct icache_host mount_icache_host = {
	.free_unlinked = inode_free_unlinked,
	.release_prealloc = balloc_release_prealloc,
	.check_xattrs = xattr_check_ibody,
	.orphan_cleanup_running = orphan_cleanup_running,
	.release_verity = verity_release,
};

static int load_caches(struct uext4_fs *fs, const struct uext4_opts *o)
{
	fs->bc = bcache_create(fs->dev, fs->block_size, o->cache_bytes);
	fs->icache = fs->bc ? icache_create(fs, o->inode_cache, &mount_icache_host) : NULL;
	fs->islots = inode_slots_create();
	if (!fs->icache || !fs->islots)
		return fs_err(ENOMEM, "out of memory for the caches");
	fs->nc = namecache_create(o); /* NULL (off, or no memory): lookups read dirs */
	return super_load_group_descs(fs);
}

static void drop_caches(struct uext4_fs *fs);

static void free_hot(struct uext4_fs *fs)
{
	if (fs->hot)
		free((void *)fs->hot->group_dirty);
	free(fs->hot);
	fs->hot = NULL;
}

/*
 * After the full transactions: replay the fast commits (fc_replay.c) on a
 * mount of its own whose commits go straight home, as the kernel's replay
 * writes without the journal; then empty the journal.  A failure before
 * that leaves the journal as it was, for the next try (the full
 * transactions replay again the same).  A read-only mount replays into
 * its memory overlay.
 */
static int replay_fast_commits(struct uext4_fs *fs, const struct uext4_opts *o,
			       struct journal_replay *r)
{
	bool ro = fs->read_only;
	int err;

	fs->read_only = false;
	err = load_caches(fs, o);
	if (!err && !ro)
		err = super_check_groups(fs);
	if (!err)
		err = setup_hot(fs);
	if (!err)
		err = trans_init(fs, &super_commit_host);   /* no fs->journal: home */
	if (!err)
		err = balloc_init(fs);
	if (!err)
		err = orphan_init(fs);
	if (!err)
		err = fc_replay(fs, r->fc);
	if (!err)
		err = trans_commit(fs);
	if (!err)
		err = journal_recover_finish(fs, &super_journal_host, r->next_tid);
	orphan_destroy(fs);
	if (fs->balloc)
		balloc_destroy(fs);
	trans_destroy(fs);
	drop_caches(fs);
	free_hot(fs);
	fs->read_only = ro;
	if (err)
		return err;
	fc_counts(r->fc, &fs->recovery.fast_commit_tags, &fs->recovery.fast_commits);
	fs->recovery.replayed_in_memory = ro;
	return super_read(fs, fs->read_only);
}

static void drop_caches(struct uext4_fs *fs)
{
	namecache_destroy(fs->nc);
	fs->nc = NULL;
	if (fs->icache)
		icache_destroy(fs->icache);
	fs->icache = NULL;
	inode_slots_destroy(fs->islots);
	fs->islots = NULL;
	if (fs->bc)
		bcache_destroy(fs->bc);
	fs->bc = NULL;
	if (fs->groups)
		for (uint32_t g = 0; g < fs->groups_count; g++)
			ulock_destroy(&fs->groups[g].lock);
	free(fs->groups);
	fs->groups = NULL;
}

/*
 * needs_recovery: replay the journal with just enough of a mount to find
 * the journal inode, then forget everything cached (replay rewrote blocks
 * under it) and read the superblock again.  A read-only mount replays
 * into a memory overlay: the image itself is never written.
 */
static int recover(struct uext4_fs *fs, const struct uext4_opts *o)
{
	struct journal_replay r = {0};
	struct ext4_super_block before = fs->sb;
	int err;

	if (fs->read_only) {
		/* An overlay owns the device it covers, and closes it if it
		 * cannot be made: the pointer is not kept then. */
		fs->dev = bdev_open_overlay(fs->dev);
		if (!fs->dev)
			return fs_err(ENOMEM, "out of memory for replaying the journal in memory");
		fs->recovery.replayed_in_memory = 1;
		if (fs->jdev && !(fs->jdev = bdev_open_overlay(fs->jdev)))
			return fs_err(ENOMEM, "out of memory for replaying the journal in memory");
	}
	err = load_caches(fs, o);
	/* As the kernel, check the descriptors before the replay writes. */
	if (!err && !fs->read_only)
		err = super_check_groups(fs);
	if (!err)
		err = journal_recover(fs, &super_journal_host, &r);
	drop_caches(fs);
	if (err)
		return err;
	fs->recovery.transactions = r.transactions;
	fs->recovery.blocks = r.blocks;
	fs->recovery.revoked = r.revoked;
	fs->recovery.bad_checksum = r.stopped_on_bad_csum;
	fs->recovery.bad_blocks = r.bad_blocks;
	fs->recovery.bad_journal_block = r.bad_logpos;
	fs->recovery.bad_tid = r.bad_tid;
	fs->recovery.bad_home_block = r.bad_home;
	if (!r.transactions)
		fs->recovery.replayed_in_memory = 0;
	err = super_read(fs, fs->read_only);
	if (!err && r.fc)
		err = replay_fast_commits(fs, o, &r);
	fc_free(r.fc);
	if (err)
		return err;
	/* The log's copy of the superblock predates errors recorded since
	 * (before this mount, or by the replay itself). */
	fs_errors_keep_across_replay(&fs->sb, &before);
	fs_errors_fold(fs, &fs->sb);
	csum_set_super(fs, &fs->sb);
	fs_errors_committed(fs);
	return 0;
}

/* The statistics' view of the buffer cache (stats.c). */
static void io_counters(struct uext4_fs *fs, struct uext4_counters *c)
{
	bcache_counters(fs->bc, c);
}

/* The error record's superblock write (error.c): as ext4_commit_super(),
 * straight to the primary superblock, flushed. */
static int write_super_now(struct uext4_fs *fs, struct ext4_super_block *sb)
{
	int err;

	csum_set_super(fs, sb);
	err = bdev_write(fs->dev, sb, sizeof(*sb), EXT4_SUPERBLOCK_OFFSET);
	return err ? err : bdev_flush(fs->dev);
}

int super_mount_bdev(struct bdev *dev, const struct uext4_opts *opts, struct uext4_fs **out)
{
	return mount_bdev_named(dev, opts, NULL, out);
}

/* name: the image's path, for the MMP block (NULL: unnamed). */
static int mount_bdev_named(struct bdev *dev, const struct uext4_opts *opts, const char *name,
			    struct uext4_fs **out)
{
	struct uext4_opts none = {0};
	const struct uext4_opts *o = opts ? opts : &none;
	struct uext4_fs *fs = aligned_alloc(CACHELINE, sizeof(*fs));
	int err;

	if (!fs) {
		bdev_close(dev);
		return fs_err(ENOMEM, "out of memory");
	}
	memset(fs, 0, sizeof(*fs));
	fs->dev = dev;
	fs->read_only = o->read_only != 0 || dev->read_only;
	fs->commit_secs = o->commit_secs ? o->commit_secs : 5;
	fs->max_open_files = o->max_open_files ? o->max_open_files : 65536;
	fs->use_fixed_time = o->use_fixed_time != 0;
	fs->fixed_time = o->fixed_time;
	fs->bulk = o->bulk != 0;
	if ((err = stats_init(fs, io_counters)) || (err = super_read(fs, o->read_only)) || (err = fs_errors_init(fs, o, write_super_now)))
		goto fail;
	if ((err = open_jdev(fs, o)))
		goto fail;
	/* As the kernel, claim the MMP block before the journal is replayed;
	 * a memory backend writes nothing back, so it has nothing to guard. */
	if (!fs->read_only && !o->memory_backend && (err = mmp_start(fs, name)))
		goto fail;
	if ((fs->feature_incompat & EXT4_FEATURE_INCOMPAT_RECOVER) && (err = recover(fs, o)))
		goto fail;
	if ((err = load_caches(fs, o)) || (err = setup_hot(fs)))
		goto fail;
	if (!fs->read_only && (err = super_check_groups(fs)))
		goto fail;
	/* Like the kernel, refuse a file system whose root is unreadable; the
	 * reference held until unmount lets path walks start lock-free. */
	if ((err = iget(fs, EXT4_ROOT_INO, &fs->root)))
		goto fail;
	if (!S_ISDIR(fs->root->mode)) {
		err = fs_corrupt("root inode %u is not a directory (mode 0%o)", EXT4_ROOT_INO,
				 fs->root->mode);
		goto fail;
	}
	if (!fs->read_only && (err = start_writing(fs, o)))
		goto fail;
	*out = fs;
	return 0;
fail:
	/* Write nothing back from a failed mount; the journal stays as it is
	 * (needs_recovery set) for the next try. */
	trans_stop_timer(fs);
	fs->read_only = true;
	super_umount(fs);
	return err;
}

/*
 * Clean unmount of a read-write mount: free what was unlinked while open,
 * write everything back, empty the orphan lists and the journal, and only
 * then clear needs_recovery (and orphan_present) and mark the file system
 * clean.
 */
static int finish_writing(struct uext4_fs *fs)
{
	int err;

	trans_stop_timer(fs);
	icache_delete_unlinked(fs);
	if ((err = trans_commit(fs)))
		return err;
	if (!trans_writing_started(fs))
		return 0;   /* nothing was changed: nothing is written */
	orphan_umount(fs);
	fs->sb.s_state = cpu_to_le16(le16(fs->sb.s_state) | EXT4_VALID_FS);
	super_mark_dirty(fs);
	if ((err = trans_commit(fs)) || !fs->journal)
		return err;
	if ((err = journal_mark_empty(fs->journal)))
		return err;
	super_set_incompat(fs, EXT4_FEATURE_INCOMPAT_RECOVER, false);
	return super_write_now(fs, fs->sb.s_last_orphan);   /* all committed: the live head */
}

/*
 * Unmount after an error stopped writing (fs->aborted): the running
 * transaction is dropped, as the kernel's aborted journal; what was
 * committed is home (trans.c writes it there before the next commit),
 * so unless a write-back failed the journal is emptied and the image is
 * clean as of the last commit.  The superblock keeps the recorded errors.
 */
static int finish_aborted(struct uext4_fs *fs)
{
	bool home = trans_write_error(fs) == 0 && !trans_write_failed(fs);
	uint32_t clear = 0;
	int err = 0;

	trans_stop_timer(fs);
	if (!home && !fs->journal && trans_write_failed(fs) && trans_retry_lost(fs) == 0)
		home = true;   /* the device took the lost transaction this time */
	if (!trans_writing_started(fs))
		/* Only the error record was written (error.c): again, in
		 * case the failing device refused it then. */
		return fs_errors_seq(fs) ? fs_errors_write_super(fs, 0, 0) : 0;
	if (home && fs->journal && (err = journal_mark_empty(fs->journal)) == 0)
		clear = EXT4_FEATURE_INCOMPAT_RECOVER;
	if (home && !fs->journal)
		err = bdev_flush(fs->dev);
	{
		int serr = fs_errors_write_super(fs, clear, home && !err ? EXT4_VALID_FS : 0);

		return err ? err : serr;
	}
}

/* An error (errors=remount-ro, a journal abort) or a failed write-back
 * stopped this mount's writing. */
static bool stopped_writing(struct uext4_fs *fs)
{
	return atomic_load(&fs->aborted) || trans_write_failed(fs);
}

int super_umount(struct uext4_fs *fs)
{
	int err = 0;

	if (!fs)
		return 0;
	if (fs->root)
		iput(fs, fs->root);
	fs->root = NULL;
	if (!fs->read_only && fs->trans && !stopped_writing(fs))
		err = finish_writing(fs);
	if (!fs->read_only && fs->trans && stopped_writing(fs)) {
		/* also when finish_writing() met the error */
		int aerr = finish_aborted(fs);

		err = err ? err : aerr;
	}
	trans_stop_timer(fs);
	{
		/* Released when everything is written: seq CLEAN. */
		int merr = mmp_stop(fs);

		err = err ? err : merr;
	}
	quota_destroy(fs);
	if (fs->icache)
		icache_destroy(fs->icache);
	fs->icache = NULL;
	inode_slots_destroy(fs->islots);
	fs->islots = NULL;
	if (fs->balloc)
		balloc_destroy(fs);
	free(fs->bad_blocks);
	orphan_destroy(fs);
	xattr_index_destroy(fs);
	trans_destroy(fs);
	if (fs->journal)
		journal_close(fs->journal);
	fs->journal = NULL;
	drop_caches(fs);
	fs_errors_destroy(fs);
	stats_destroy(fs);
	if (fs->dev)
		bdev_close(fs->dev);
	if (fs->jdev)
		bdev_close(fs->jdev);
	free_hot(fs);
	free(fs);
	return err;
}
