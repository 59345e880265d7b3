/*
 * icache.h - the inode cache (icache.c): inodes by number in a sharded
 * hash whose hits take no lock (shard.h), references, the idle LRU, and
 * the frontend's lookup counts.  struct inode is in internal.h; loading
 * and the on-disk format are inode.c's (iget(), inode_new()).
 */
#ifndef UEXT4_ICACHE_H
#define UEXT4_ICACHE_H

#include "internal.h"
#include "shard.h"

/*
 * What the cache needs from outside itself, as the journal gets it
 * through struct journal_host: mount fills it in.  free_unlinked: the
 * last reference of an inode with no links is going (force: at unmount,
 * whoever still holds it); free its blocks, xattrs and number.  0 or the
 * error of a failed free (recorded on the file system by the callee).
 */
struct icache_host {
	int (*free_unlinked)(struct uext4_fs *fs, struct inode *inode, bool force);
	/* An inode leaving the cache with inode->pa set gives back the blocks
	 * the allocator set aside for it (balloc.c; takes group locks, so
	 * never called under a shard lock). */
	void (*release_prealloc)(struct uext4_fs *fs, struct inode *inode);
	/* The loader (inode.c) checks a read inode's in-inode xattr area
	 * (xattr.c, above this layer); 0 or -EUCLEAN with the message. */
	int (*check_xattrs)(struct uext4_fs *fs, struct inode *inode);
	/* Orphan cleanup is running (orphan.c): the loader then accepts an
	 * inode with no links, as the kernel's ext4_iget() in that state. */
	bool (*orphan_cleanup_running)(const struct uext4_fs *fs);
	/* An inode leaving the cache with inode->verity set frees it
	 * (verity.c, above this layer). */
	void (*release_verity)(struct inode *inode);
};

/* The host the mount gave the inode cache (NULL before it has one). */
const struct icache_host *icache_host(const struct uext4_fs *fs);

struct icache;
/* limit: most idle inodes kept (uext4_opts.inode_cache); 0 = default. */
struct icache *icache_create(struct uext4_fs *fs, unsigned limit, const struct icache_host *host);
/* Inodes hashed in the cache now, and how many of them are idle. */
void icache_counts(struct uext4_fs *fs, uint64_t *cached, uint64_t *idle);
void icache_destroy(struct icache *ic);

/* Memory for an inode and its raw copy (zero-filled), or NULL. */
struct inode *icache_alloc(struct uext4_fs *fs);
/* Give back one that holds nothing (its lock never initialised). */
void icache_free_memory(struct uext4_fs *fs, struct inode *inode);
/* Give back a copy that was never hashed, with its lock. */
void icache_free_copy(struct uext4_fs *fs, struct inode *inode);

/* A reference on n unless it is dead (being freed).  seq_cst (a locked
 * instruction on x86 either way): the grab and the caller's look at
 * istate pair with inode_claim_free()'s flag and look at the count. */
static inline bool icache_try_grab(struct inode *n)
{
	return shard_try_grab(&n->node, memory_order_seq_cst);
}
/* The cached inode ino with a reference, or NULL: no lock (iget()'s hit). */
struct inode *icache_lookup(struct uext4_fs *fs, uint64_t ino);
/*
 * Put a loaded copy (*mine, one reference) in the cache unless one is
 * there already: *out gets the cached inode, referenced, and *mine
 * becomes NULL if it was inserted.  Under the shard lock,
 * slot_changed(fs, ino, writes) says whether the copy's slot was written
 * since it was copied: then 1, nothing inserted (load again); else 0.
 */
int icache_insert_loaded(struct uext4_fs *fs, struct inode **mine,
			 bool (*slot_changed)(struct uext4_fs *fs, uint64_t ino, uint32_t writes),
			 uint32_t writes, struct inode **out);
/* Hash a new inode (one reference); a freed copy of its number still
 * held leaves the hash.  -EUCLEAN if a live one is cached (the bitmap is
 * out of step with the tree). */
int icache_insert_new(struct uext4_fs *fs, struct inode *n);
/* The reference-free path walk (api.c), inside the caller's epoch section
 * (ebr.h), which keeps the result from being freed until it leaves: the
 * cached inode ino, not dead, without a reference, or NULL (not cached). */
struct inode *icache_peek(struct uext4_fs *fs, uint64_t ino);
/* Another reference to an inode the caller already holds. */
void igrab(struct inode *inode);
/* Drop a reference.  The last one of an inode with no links frees it
 * (struct icache_host's free_unlinked); if that fails (corrupt inode) the
 * error is recorded with fs_error() (not during orphan cleanup, which
 * records it itself), the inode is taken off its orphan list and left
 * allocated for e2fsck, and iput() returns the error for a caller that
 * can still report it (unlink); else 0. */
int iput(struct uext4_fs *fs, struct inode *inode);
/* An unlink about to take the last link of an inode it holds the only
 * reference of (inode locked for writing): claim it to be freed in the
 * same handle (iget() refuses it from now on); false if another holder
 * came.  inode_unclaim_free() if the unlink fails; else, once the link is
 * gone, inode_free_now() in that handle. */
bool inode_claim_free(struct inode *inode);
void inode_unclaim_free(struct inode *inode);
/* Unmount: free inodes that lost their last link but were never released. */
void icache_delete_unlinked(struct uext4_fs *fs);
/* One more lookup count of an inode the caller holds (at 0 -> 1 the
 * count takes a reference of its own). */
void icache_lookup_count_add(struct inode *n);
/* The frontend dropped nlookup of them (uext4_forget()); at 0 the held
 * reference goes, which frees an unlinked inode. */
void inode_forget(struct uext4_fs *fs, uint64_t ino, uint64_t nlookup);
/* References other than the lookup count's: "does anybody hold it open?" */
uint32_t inode_users(struct inode *inode);

#endif
