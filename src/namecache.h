/*
 * namecache.h - the name cache (namecache.c): (directory, name) -> inode
 * number or "absent", looked up without a lock.  Included by dir.c (the
 * only user: lookups, and the hooks of every directory change) and
 * mount.c (create at mount, free at unmount).
 */
#ifndef UEXT4_NAMECACHE_H
#define UEXT4_NAMECACHE_H

#include "internal.h"

/* Names longer than this are not cached (they are looked up the long way). */
#define NC_NAME_MAX 48

/* What a lookup that missed carries to its insert: the bucket's sequence
 * number when the probe saw no entry; NC_NO_TOKEN: do not insert. */
#define NC_NO_TOKEN UINT32_MAX

struct namecache;

/* The mount's cache, or NULL when it is off: UEXT4_NAMECACHE=0 in the
 * environment or uext4_opts.no_name_cache; UEXT4_NAMECACHE=N sets the
 * number of entries (rounded to a power of two, at least one bucket). */
struct namecache *namecache_create(const struct uext4_opts *o);
void namecache_destroy(struct namecache *nc);

/*
 * Probe for name in dir (no lock taken, nothing shared written).
 * 1: found, *ino set (0 = a negative entry: the name is absent) and
 * *dtype (DT_*); 0: not cached, *token says whether and how the caller may
 * insert what it then reads from the directory.
 */
int namecache_lookup(struct namecache *nc, struct inode *dir, const char *name, size_t len,
		     uint64_t *ino, unsigned *dtype, uint32_t *token);
/*
 * The reference-free path walk (api.c) probes with a stamp: on a hit it
 * names the bucket and its seq, and namecache_stamp_valid() later says
 * whether the bucket is unchanged since, i.e. whether the entry still
 * held at that later moment (every change to a name bumps its bucket's
 * seq).  Call both inside an epoch section (the table lives as long as
 * the mount anyway).
 */
struct nc_stamp {
	const void *bucket;
	uint32_t seq;
};
int namecache_lookup_stamped(struct namecache *nc, struct inode *dir, const char *name,
			     size_t len, uint64_t *ino, unsigned *dtype, struct nc_stamp *stamp);
bool namecache_stamp_valid(const struct nc_stamp *stamp);
/* Remember what a directory read found (ino 0: absent), unless the bucket
 * changed since the probe that returned token (a change to that name may
 * have happened after the directory was read). */
void namecache_insert(struct namecache *nc, struct inode *dir, const char *name, size_t len,
		      uint64_t ino, unsigned dtype, uint32_t token);
/* A directory entry of name in dir was added, removed or retargeted (or
 * an attempt may have done so): drop what is cached for it.  Called after
 * the change, before dir->lock is released. */
void namecache_invalidate(struct namecache *nc, struct inode *dir, const char *name,
			  size_t len);
/* dir is (re)made as a new directory: nothing cached for it stays valid. */
void namecache_forget_dir(struct inode *dir);

#endif
