/*
 * ea_inode.c - xattr values kept in EA inodes (INCOMPAT_EA_INODE).
 *
 * Format (Documentation/filesystems/ext4/eainode.rst, fs/ext4/xattr.c):
 * a value too large for the inode body and the xattr block lives in the
 * data of a regular inode flagged EXT4_EA_INODE_FL (mode 0600, owner of
 * the first file that used it, one link, no directory entry).  The entry
 * names it in e_value_inum, with e_value_offs 0 and e_value_size the
 * value's length; its e_hash is the entry hash of the name followed by
 * one 32-bit word, the EA inode's value hash.  That value hash is
 * crc32c(csum_seed, value) (the seed as with metadata_csum, also without
 * it) and is kept in i_atime.  A 64-bit reference count is kept in
 * i_ctime (upper 32 bits) and i_version's low word (lower 32 bits).
 *
 * References, as e2fsck counts them: one per entry in an inode body, and
 * one per entry in each xattr BLOCK (however many inodes share that
 * block).  So a shared block's EA inodes are counted once; copying a
 * shared block on write takes a reference for each EA entry of the copy,
 * and freeing a block drops one for each of its EA entries.  The owner's
 * i_blocks is charged the value's size rounded up to blocks for every EA
 * entry it sees (body or block), as the kernel's quota charge does
 * (dquot_alloc_space on the owner, which adds to i_blocks even without
 * quotas; e2fsck's check_large_ea_inode expects it).
 *
 * Sharing: a new value first looks for a live EA inode with the same
 * hash, size and bytes among those this mount created or read (the
 * kernel's ea_inode mbcache), and takes a reference to it instead of
 * making another one.  At reference count 0 the EA inode is freed (its
 * blocks and its number) in the same handle.
 *
 * An operation (xattr.c) collects its reference changes in a struct
 * ea_refs and applies them at its end, once it knows which regions it
 * really wrote (a copy on write, an in-place rewrite, a freed block), so
 * that a count never passes through 0 on its way up.  Values are written
 * straight to the device, as file data (ordered: the commit flushes them
 * before its commit block), never through the journal, so freeing them
 * later needs no revoke records.
 *
 * Locking.  EA inodes are reachable only through entries (and the
 * sharing index), never through a name or FUSE, and they are touched
 * only here, under their lock shard (struct ea_index.lock[inum % N],
 * RANK_EA_INODE, between the handle and the inode cache): readers of a
 * value hold it shared, reference changes, sharing and freeing hold it
 * exclusive.  Their inode->lock is never taken (it ranks below a
 * handle).  A reader takes the shard while it still holds the OWNER's
 * lock (which keeps the entry, and so the reference, alive), then drops
 * the owner's lock, so no EA inode can be freed between reading an entry
 * and reading its value.  The hash index (by value hash) has its own
 * shard locks (RANK_XATTR_INDEX), taken inside an EA shard or alone.
 */
#include "caller.h"
#include "balloc.h"
#include "bcache.h"
#include "blockdev.h"
#include "crc.h"
#include "error.h"
#include "file.h"
#include "ialloc.h"
#include "icache.h"
#include "inode.h"
#include "internal.h"
#include "lock.h"
#include "ondisk.h"
#include "xattr.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define EA_LOCK_SHARDS 64
#define EA_HASH_SHARDS 32
#define EA_HASH_BUCKETS 64
/* Candidates looked at per value hash when sharing. */
#define EA_SHARE_CANDIDATES 8

struct ea_node {
	uint32_t hash, inum;
	struct ea_node *next;
};

struct ea_lock_shard {
	struct urwlock lock;    /* RANK_EA_INODE: the EA inodes with inum % N == index */
} __attribute__((aligned(CACHELINE)));

struct ea_hash_shard {
	struct ulock lock;      /* RANK_XATTR_INDEX: bucket[] chains */
	struct ea_node *bucket[EA_HASH_BUCKETS];
} __attribute__((aligned(CACHELINE)));

struct ea_index {
	struct ea_lock_shard lock[EA_LOCK_SHARDS];
	struct ea_hash_shard hash[EA_HASH_SHARDS];
};

struct ea_index *ea_index_create(void)
{
	struct ea_index *x = calloc(1, sizeof(*x));

	if (!x)
		return NULL;
	for (unsigned i = 0; i < EA_LOCK_SHARDS; i++)
		urwlock_init(&x->lock[i].lock, RANK_EA_INODE);
	for (unsigned i = 0; i < EA_HASH_SHARDS; i++)
		ulock_init(&x->hash[i].lock, RANK_XATTR_INDEX);
	return x;
}

void ea_index_destroy(struct ea_index *x)
{
	if (!x)
		return;
	for (unsigned i = 0; i < EA_LOCK_SHARDS; i++)
		urwlock_destroy(&x->lock[i].lock);
	for (unsigned i = 0; i < EA_HASH_SHARDS; i++) {
		for (unsigned b = 0; b < EA_HASH_BUCKETS; b++) {
			struct ea_node *n = x->hash[i].bucket[b], *next;

			for (; n; n = next) {
				next = n->next;
				free(n);
			}
		}
		ulock_destroy(&x->hash[i].lock);
	}
	free(x);
}

static struct urwlock *ea_lock(struct ea_index *x, uint32_t inum)
{
	return &x->lock[inum % EA_LOCK_SHARDS].lock;
}

static struct ea_hash_shard *hash_shard(struct ea_index *x, uint32_t hash)
{
	return &x->hash[hash % EA_HASH_SHARDS];
}

static struct ea_node **hash_bucket(struct ea_hash_shard *s, uint32_t hash)
{
	return &s->bucket[(hash / EA_HASH_SHARDS) % EA_HASH_BUCKETS];
}

/* Remember (hash, inum) for sharing.  Best effort: no memory, no sharing. */
static void index_insert(struct ea_index *x, uint32_t hash, uint32_t inum)
{
	struct ea_hash_shard *s = hash_shard(x, hash);
	struct ea_node **head, *n;

	ulock_lock(&s->lock);
	head = hash_bucket(s, hash);
	for (n = *head; n && !(n->inum == inum && n->hash == hash); n = n->next)
		;
	if (!n && (n = malloc(sizeof(*n))) != NULL) {
		n->hash = hash;
		n->inum = inum;
		n->next = *head;
		*head = n;
	}
	ulock_unlock(&s->lock);
}

static void index_remove(struct ea_index *x, uint32_t hash, uint32_t inum)
{
	struct ea_hash_shard *s = hash_shard(x, hash);
	struct ea_node **pp, *n;

	ulock_lock(&s->lock);
	for (pp = hash_bucket(s, hash); (n = *pp) != NULL; pp = &n->next) {
		if (n->inum == inum && n->hash == hash) {
			*pp = n->next;
			free(n);
			break;
		}
	}
	ulock_unlock(&s->lock);
}

static bool index_has(struct ea_index *x, uint32_t hash, uint32_t inum)
{
	struct ea_hash_shard *s = hash_shard(x, hash);
	struct ea_node *n;

	ulock_lock(&s->lock);
	for (n = *hash_bucket(s, hash); n && !(n->inum == inum && n->hash == hash); n = n->next)
		;
	ulock_unlock(&s->lock);
	return n != NULL;
}

/* Up to max inode numbers indexed under hash. */
static size_t index_candidates(struct ea_index *x, uint32_t hash, uint32_t *out, size_t max)
{
	struct ea_hash_shard *s = hash_shard(x, hash);
	struct ea_node *n;
	size_t k = 0;

	ulock_lock(&s->lock);
	for (n = *hash_bucket(s, hash); n && k < max; n = n->next)
		if (n->hash == hash)
			out[k++] = n->inum;
	ulock_unlock(&s->lock);
	return k;
}

/* ------------------------------------------------------------ fields */

/* The seed of the value hash: the metadata_csum seed, which the kernel
 * also computes for ea_inode file systems without metadata_csum. */
static uint32_t hash_seed(struct uext4_fs *fs)
{
	if (fs->metadata_csum)
		return fs->csum_seed;
	if (FS_HAS_INCOMPAT(fs, CSUM_SEED))
		return le32(fs->sb.s_checksum_seed);
	return crc32c(~0u, fs->sb.s_uuid, sizeof(fs->sb.s_uuid));
}

uint32_t ea_value_hash(struct uext4_fs *fs, const void *value, size_t size)
{
	return crc32c(hash_seed(fs), value, size);
}

uint64_t ea_quota_sectors(const struct uext4_fs *fs, uint32_t size)
{
	return DIV_ROUND_UP((uint64_t)size, fs->block_size) * (fs->block_size >> 9);
}

static bool has_version_hi(struct uext4_fs *fs, const struct inode *ea)
{
	size_t end = offsetof(struct ext4_inode, i_version_hi) + sizeof(uint32_t);

	return fs->inode_size > EXT4_GOOD_OLD_INODE_SIZE &&
	       end <= EXT4_GOOD_OLD_INODE_SIZE + (size_t)ea->extra_isize;
}

/* Caller holds the EA shard (either way). */
static uint64_t get_ref(const struct inode *ea)
{
	const struct ext4_inode *r = inode_raw(ea);

	return ((uint64_t)le32(r->i_ctime) << 32) | le32(r->i_version_lo);
}

static uint32_t get_hash(const struct inode *ea)
{
	return le32(inode_raw(ea)->i_atime);
}

/* Store the count (written by the caller's inode_write).  Caller holds the
 * EA shard exclusively, or owns a new EA inode. */
static void set_ref(struct uext4_fs *fs, struct inode *ea, uint64_t ref)
{
	struct ext4_inode *r = inode_raw_mut(ea);

	ea->ctime = (struct timespec){ (time_t)(ref >> 32), 0 };
	r->i_version_lo = cpu_to_le32((uint32_t)ref);
	if (has_version_hi(fs, ea))
		r->i_version_hi = 0;
}

/* ------------------------------------------------------------ reading */

/* Is ea (just loaded) an EA inode able to hold a value of vsize bytes? */
static int check_ea(struct uext4_fs *fs, uint64_t owner, struct inode *ea, uint32_t vsize)
{
	(void)fs;
	if (atomic_load(&ea->istate) & INODE_DELETED)
		return fs_corrupt("inode %llu: EA inode %llu was freed",
				  (unsigned long long)owner, (unsigned long long)ea->ino);
	if (!(ea->flags & EXT4_EA_INODE_FL) || !S_ISREG(ea->mode))
		return fs_corrupt("inode %llu: inode %llu is not an EA inode (flags 0x%x, mode 0%o)",
				  (unsigned long long)owner, (unsigned long long)ea->ino, ea->flags,
				  ea->mode);
	if (ea->flags & EXT4_INLINE_DATA_FL)
		return fs_corrupt("EA inode %llu of inode %llu has inline data",
				  (unsigned long long)ea->ino, (unsigned long long)owner);
	if (vsize && ea->size != vsize)
		return fs_corrupt("EA inode %llu of inode %llu: size %llu, entry says %u",
				  (unsigned long long)ea->ino, (unsigned long long)owner,
				  (unsigned long long)ea->size, vsize);
	return 0;
}

/*
 * A write that met a corrupt EA inode: record it as the error policy says
 * (FS_ERROR), with the message the check left.  Other errors pass as is.
 */
static int write_path_corrupt(struct uext4_fs *fs, uint64_t owner, uint32_t inum, int err)
{
	char msg[256];
	const char *m = uext4_last_error();

	if (err != -EUCLEAN)
		return err;
	if (strncmp(m, "corrupt ", 8) == 0)
		m += 8;
	snprintf(msg, sizeof(msg), "%s", m);
	return FS_ERROR(fs, EUCLEAN, owner, 0, "EA inode %u: %s", inum, msg);
}

/* The value's bytes, read from the device (the EA shard is held, so the
 * mapping is stable; ea->lock is not taken).  A hole is corruption. */
static int read_value(struct uext4_fs *fs, struct inode *ea, uint8_t *buf, uint32_t size)
{
	unsigned shift = fs->log_block_size;
	uint64_t done = 0;

	while (done < size) {
		uint64_t lblk = done >> shift, want = DIV_ROUND_UP(size - done, fs->block_size);
		struct block_map m;
		size_t run;
		int err = inode_map(fs, ea, lblk, want, &m);

		if (err)
			return err;
		if (m.pblk == 0 || m.unwritten || m.len == 0)
			return fs_corrupt("EA inode %llu: block %llu of its value is a hole",
					  (unsigned long long)ea->ino, (unsigned long long)lblk);
		run = (size_t)MIN(MIN(m.len, want) << shift, (uint64_t)size - done);
		err = bdev_read(fs->dev, buf + done, run, m.pblk << shift);
		if (err < 0)
			return err;
		bcache_count_read(fs->bc, UEXT4_META_XATTR, DIV_ROUND_UP(run, fs->block_size));
		done += run;
	}
	return 0;
}

struct urwlock *ea_read_begin(struct uext4_fs *fs, uint32_t inum)
{
	struct ea_index *x = xattr_ea_index(fs);
	struct urwlock *l;

	if (!x)
		return NULL;
	l = ea_lock(x, inum);
	urw_rdlock(l);
	return l;
}

void ea_read_end(struct urwlock *l)
{
	if (l)
		urw_unlock(l);
}

/* A value read whole and good: remember its EA inode for sharing. */
static void note_for_sharing(struct uext4_fs *fs, struct inode *ea, const void *buf,
			     uint32_t size)
{
	struct ea_index *x = xattr_ea_index(fs);
	uint32_t hash = get_hash(ea);

	if (fs->read_only || !x || index_has(x, hash, (uint32_t)ea->ino))
		return;
	if (ea_value_hash(fs, buf, size) == hash)
		index_insert(x, hash, (uint32_t)ea->ino);
}

ssize_t ea_inode_read(struct uext4_fs *fs, uint64_t owner, uint32_t inum, uint32_t vsize,
		      void *buf, size_t size)
{
	struct inode *ea;
	int err;

	if (size == 0)
		return vsize;
	if (vsize > size)
		return -ERANGE;
	if (vsize == 0)
		return fs_corrupt("inode %llu: entry names EA inode %u for an empty value",
				  (unsigned long long)owner, inum);
	if ((err = iget(fs, inum, &ea)) != 0)
		return err;
	err = check_ea(fs, owner, ea, vsize);
	if (!err)
		err = read_value(fs, ea, buf, vsize);
	if (!err)
		note_for_sharing(fs, ea, buf, vsize);
	iput(fs, ea);
	return err ? err : (ssize_t)vsize;
}

int ea_inode_check(struct uext4_fs *fs, uint64_t owner, uint32_t inum, uint32_t vsize)
{
	struct urwlock *l = ea_read_begin(fs, inum);
	struct inode *ea;
	int err;

	if (!l)
		return fs_err(ENOMEM, "EA inodes: out of memory");
	err = iget(fs, inum, &ea);
	if (!err) {
		err = check_ea(fs, owner, ea, vsize);
		iput(fs, ea);
	}
	ea_read_end(l);
	return write_path_corrupt(fs, owner, inum, err);
}

/* ------------------------------------------------------------ references */

int ea_refs_add(struct ea_refs *r, uint32_t inum, int delta)
{
	for (size_t i = 0; i < r->n; i++) {
		if (r->d[i].inum == inum) {
			r->d[i].delta += delta;
			return 0;
		}
	}
	if (r->n == r->cap) {
		size_t cap = r->cap ? r->cap * 2 : 8;
		struct ea_ref *d = realloc(r->d, cap * sizeof(*d));

		if (!d)
			return fs_err(ENOMEM, "EA inode references: out of memory");
		r->d = d;
		r->cap = cap;
	}
	r->d[r->n++] = (struct ea_ref){ inum, delta };
	return 0;
}

void ea_refs_free(struct ea_refs *r)
{
	free(r->d);
	memset(r, 0, sizeof(*r));
}

/* Count 0: free the EA inode's blocks and number.  Caller holds its shard
 * exclusively (nobody else holds a reference) and a handle. */
static int free_ea(struct handle *h, struct inode *ea)
{
	int err = inode_truncate_blocks(h, ea, 0);

	if (err)
		return err;
	ea->links = 0;
	ea->size = 0;
	ea->dtime = (uint32_t)fs_time(h->fs).tv_sec;
	if ((err = inode_write(h, ea)) != 0)
		return err;
	atomic_fetch_or(&ea->istate, INODE_DELETED);
	return ialloc_free(h, ea->ino, false);
}

/* Change EA inode inum's count by delta (free it at 0). */
static int ref_change(struct handle *h, struct ea_index *x, uint64_t owner, uint32_t inum,
		      int delta)
{
	struct uext4_fs *fs = h->fs;
	struct urwlock *l = ea_lock(x, inum);
	struct inode *ea;
	uint64_t ref;
	int err;

	urw_wrlock(l);
	if ((err = iget(fs, inum, &ea)) != 0) {
		err = write_path_corrupt(fs, owner, inum, err);
		goto out;
	}
	if ((err = check_ea(fs, owner, ea, 0)) != 0) {
		err = write_path_corrupt(fs, owner, inum, err);
		goto put;
	}
	ref = get_ref(ea);
	if (delta < 0 && ref < (uint64_t)-(int64_t)delta) {
		/* Freeing it could free a value another inode still names. */
		err = FS_ERROR(fs, EUCLEAN, ea->ino, 0, "EA inode %u: reference count %llu, "
			       "dropping %d references (inode %llu)", inum,
			       (unsigned long long)ref, -delta, (unsigned long long)owner);
		goto put;
	}
	ref += (uint64_t)(int64_t)delta;
	if (ref == 0) {
		index_remove(x, get_hash(ea), inum);
		err = free_ea(h, ea);
	} else {
		set_ref(fs, ea, ref);
		err = inode_write(h, ea);
	}
put:
	iput(fs, ea);
out:
	urw_unlock(l);
	return err;
}

int ea_refs_apply(struct handle *h, uint64_t owner, struct ea_refs *r)
{
	struct ea_index *x;
	int err = 0;
	size_t i;

	for (i = 0; i < r->n && !r->d[i].delta; i++)
		;
	if (i == r->n)
		return 0;
	if (!(x = xattr_ea_index(h->fs)))
		return fs_err(ENOMEM, "EA inodes: out of memory");
	/* Every change is tried: one bad EA inode must not leak the others. */
	for (i = 0; i < r->n; i++) {
		int e = r->d[i].delta ? ref_change(h, x, owner, r->d[i].inum, r->d[i].delta) : 0;

		if (!err)
			err = e;
		r->d[i].delta = 0;
	}
	return err;
}

/* ------------------------------------------------------------ new values */

/*
 * Is there room for a new EA inode of size bytes (and an xattr block)?
 * Checked before anything changes, so that ENOSPC leaves the image as it
 * was; the allocation may still fail on a race, and is then undone.
 */
static int space_check(struct uext4_fs *fs, uint64_t owner, size_t size)
{
	uint64_t need = DIV_ROUND_UP((uint64_t)size, fs->block_size) + 2;
	int64_t blocks = pcounter_sum(&fs->hot->free_blocks);
	int64_t inodes = pcounter_sum(&fs->hot->free_inodes);

	if (caller_uid() != 0)
		blocks -= (int64_t)fs->reserved_blocks;
	if (inodes < 1 || blocks < (int64_t)need)
		return fs_err(ENOSPC, "inode %llu: no room for an EA inode of %zu bytes "
			      "(%lld free blocks, %lld free inodes)", (unsigned long long)owner,
			      size, (long long)MAX(blocks, 0), (long long)inodes);
	return 0;
}

/* An EA inode already holding this value: take a reference to it. */
static int find_shared(struct handle *h, struct ea_index *x, uint64_t owner, const void *value,
		       uint32_t size, uint32_t hash, uint32_t *inum)
{
	struct uext4_fs *fs = h->fs;
	uint32_t cand[EA_SHARE_CANDIDATES];
	size_t n = index_candidates(x, hash, cand, EA_SHARE_CANDIDATES);
	uint8_t *buf = n ? malloc(size) : NULL;
	int found = 0;

	for (size_t i = 0; buf && i < n && !found; i++) {
		struct urwlock *l = ea_lock(x, cand[i]);
		struct inode *ea;
		bool same = false;

		urw_wrlock(l);
		if (iget(fs, cand[i], &ea) == 0) {
			same = check_ea(fs, owner, ea, size) == 0 && ea->links == 1 &&
			       get_hash(ea) == hash && get_ref(ea) >= 1 &&
			       read_value(fs, ea, buf, size) == 0 && memcmp(buf, value, size) == 0;
			if (same) {
				set_ref(fs, ea, get_ref(ea) + 1);
				found = inode_write(h, ea) == 0;
			} else {
				index_remove(x, hash, cand[i]);
			}
			iput(fs, ea);
		}
		urw_unlock(l);
		if (found)
			*inum = cand[i];
	}
	free(buf);
	fs_clear_err();  /* a stale candidate is no error of this operation */
	return found;
}

/* A new EA inode holding value, count 1.  The owner's lock is held for
 * writing (ialloc keeps its allocation state in the "directory"). */
static int create_ea(struct handle *h, struct inode *owner, const void *value, uint32_t size,
		     uint32_t hash, uint32_t *inum)
{
	struct uext4_fs *fs = h->fs;
	struct inode *ea;
	int err = inode_new(h, owner, S_IFREG | 0600, &ea);

	if (err)
		return err;
	/* Nobody can reach it yet (iget() refuses it until inode_created()):
	 * no lock needed. */
	ea->uid = owner->uid;
	ea->gid = owner->gid;
	ea->flags = EXT4_EA_INODE_FL | (ea->flags & EXT4_EXTENTS_FL);
	err = file_write_locked(h, ea, value, size, 0);
	balloc_release_prealloc(fs, ea);
	if (!err && ea->size != size)
		err = fs_err(ENOSPC, "EA inode %llu: wrote %llu of %u bytes",
			     (unsigned long long)ea->ino, (unsigned long long)ea->size, size);
	if (err) {
		int e2 = free_ea(h, ea);

		(void)e2;
		iput(fs, ea);
		return err;
	}
	set_ref(fs, ea, 1);
	ea->atime = (struct timespec){ (time_t)hash, 0 };
	err = inode_write(h, ea);
	if (err) {
		free_ea(h, ea);
		iput(fs, ea);
		return err;
	}
	*inum = (uint32_t)ea->ino;
	inode_created(ea);
	iput(fs, ea);
	return 0;
}

int ea_inode_get(struct handle *h, struct inode *owner, const void *value, uint32_t size,
		 uint32_t *inum, uint32_t *hash)
{
	struct uext4_fs *fs = h->fs;
	struct ea_index *x = xattr_ea_index(fs);
	int err;

	if (!x)
		return fs_err(ENOMEM, "EA inodes: out of memory");
	*hash = ea_value_hash(fs, value, size);
	if (find_shared(h, x, owner->ino, value, size, *hash, inum))
		return 0;
	if ((err = space_check(fs, owner->ino, size)) != 0)
		return err;
	if ((err = create_ea(h, owner, value, size, *hash, inum)) != 0)
		return err;
	index_insert(x, *hash, *inum);
	return 0;
}
