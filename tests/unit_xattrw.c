/*
 * unit_xattrw.c - the xattr write side against a model, e2fsck and the kernel.
 *
 * For each image variant (4 KiB and 1 KiB blocks, with and without
 * metadata_csum, 256- and 128-byte inodes), on a fresh image:
 *  - API error cases: unknown prefixes, system.data, empty and too long
 *    names, XATTR_CREATE / XATTR_REPLACE, oversized values, malformed ACLs,
 *    default ACLs on files;
 *  - shared blocks: two inodes with identical sets share one block
 *    (h_refcount 2); changing one copies on write; changing it back shares
 *    again; removing every xattr and unlinking drop the reference;
 *  - random set / replace / remove of xattrs (small and large values, short
 *    and long names, user/trusted/security, access and default ACLs) on
 *    many files against a model, read back with getxattr/listxattr, and
 *    checking that ENOSPC only happens when the set cannot fit and leaves
 *    everything as it was;
 *  - the same from 4 writer threads (disjoint files, shared value pools so
 *    blocks get shared across threads) with a reader thread;
 *  - unlinking files with (shared) xattr blocks;
 *  - on ea_inode images (two more variants): values up to 64 KiB in the
 *    random ops (EA inodes), and a deterministic test of EA inodes: equal
 *    large values share one EA inode (reference count 2 in i_ctime /
 *    i_version, value hash in i_atime), replacing and removing drop the
 *    count, the last user's unlink frees it (free inode count back), a
 *    shared xattr block naming an EA inode counts once and its copy on
 *    write once more, and i_blocks carries the values' charge;
 *  - unmount, e2fsck -fn clean, remount and check, more changes, unmount,
 *    e2fsck -fn clean, and with root + loop devices a read-only kernel mount
 *    compared file by file (llistxattr/lgetxattr, the bytes getfattr and
 *    getfacl show, and the permission bits ACLs set).
 *
 * Usage: unit_xattrw [seed].  Exit 0 pass, 1 fail, 77 skip (no mke2fs).
 */
/* run-in: release asan tsan */
#include "bcache.h"
#include "icache.h"
#include "inode.h"
#include "internal.h"
#include "lock.h"
#include "ondisk.h"
#include "trans.h"
#include "xattr.h"
#include "uext4.h"
#include "t.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

static char tmpdir[64];

/* ------------------------------------------------------------ random */

static uint32_t rnd(uint64_t *s, uint32_t n)
{
	return (uint32_t)t_rnd_below(s, n);
}

/* ------------------------------------------------------------ model */

#define MAXENT 48
#define ACL_ACCESS "system.posix_acl_access"
#define ACL_DEFAULT "system.posix_acl_default"

struct mentry {
	char name[256];
	uint8_t *val;
	size_t len;
};

struct mfile {
	uint64_t ino;
	char name[32];
	bool dir;
	bool gone;
	bool tmpl;              /* takes one of a few identical sets (sharing) */
	uint32_t mode;          /* permission bits expected */
	int n;
	struct mentry e[MAXENT];
};

static struct mfile *files;
static int nfiles;
static uint32_t block_size, inode_size;
static bool ea_variant;     /* the image has ea_inode: values up to 64 KiB */

static struct mentry *m_find(struct mfile *f, const char *name)
{
	for (int i = 0; i < f->n; i++)
		if (strcmp(f->e[i].name, name) == 0)
			return &f->e[i];
	return NULL;
}

static void m_set(struct mfile *f, const char *name, const void *val, size_t len)
{
	struct mentry *e = m_find(f, name);

	if (!e) {
		if (f->n >= MAXENT) {
			printf("model full\n");
			exit(1);
		}
		e = &f->e[f->n++];
		snprintf(e->name, sizeof(e->name), "%s", name);
	} else {
		free(e->val);
	}
	e->val = t_xmalloc(len);
	memcpy(e->val, val, len);
	e->len = len;
}

static void m_remove(struct mfile *f, const char *name)
{
	struct mentry *e = m_find(f, name);

	if (!e)
		return;
	free(e->val);
	*e = f->e[--f->n];
}

static void m_clear(struct mfile *f)
{
	while (f->n)
		m_remove(f, f->e[0].name);
}

/* On-disk bytes of an ACL given in the VFS format. */
static size_t acl_disk_len(const uint8_t *v, size_t len)
{
	size_t d = 4;

	for (size_t o = 4; o + 8 <= len; o += 8) {
		uint16_t tag;

		memcpy(&tag, v + o, 2);
		d += (tag == 2 || tag == 8) ? 8 : 4;
	}
	return d;
}

/* With ea_inode a block keeps min(block / 8, 1024) bytes for entries
 * (values can go to EA inodes): if every name fits there, ENOSPC is a bug. */
static bool must_fit_ea(struct mfile *f, const char *name)
{
	size_t total = 32 + 4, reserve = block_size / 8 < 1024 ? block_size / 8 : 1024;

	for (int i = 0; i < f->n; i++)
		if (strcmp(f->e[i].name, name) != 0)
			total += (16 + strlen(f->e[i].name) + 3) & ~3u;
	total += (16 + strlen(name) + 3) & ~3u;
	return total <= reserve;
}

/* Could f hold everything plus (name, len) in one block?  Then ENOSPC is a bug. */
static bool must_fit(struct mfile *f, const char *name, size_t len, size_t disk_len)
{
	if (ea_variant)
		return must_fit_ea(f, name);
	size_t total = 4;
	struct mentry *e;

	for (int i = 0; i < f->n; i++) {
		e = &f->e[i];
		if (strcmp(e->name, name) == 0)
			continue;
		if (strncmp(e->name, "system.", 7) == 0)
			total += 16 + 4 + ((acl_disk_len(e->val, e->len) + 3) & ~3u);
		else
			total += ((16 + strlen(strchr(e->name, '.') + 1) + 3) & ~3u) +
				 ((e->len + 3) & ~3u);
	}
	if (strncmp(name, "system.", 7) == 0)
		total += 16 + ((disk_len + 3) & ~3u);
	else
		total += ((16 + strlen(strchr(name, '.') + 1) + 3) & ~3u) + ((len + 3) & ~3u);
	return total <= block_size - 32;
}

/* ------------------------------------------------------------ pools */

#define NNAMES 22
static char names[NNAMES][256];

static void make_names(void)
{
	int k = 0;

	for (int i = 0; i < 12; i++)
		snprintf(names[k++], 256, "user.a%d", i);
	for (int i = 0; i < 4; i++) {
		int n = snprintf(names[k], 256, "user.long%d_", i);

		memset(names[k] + n, 'L', (size_t)(100 + 40 * i));
		names[k][n + 100 + 40 * i] = 0;
		k++;
	}
	for (int i = 0; i < 3; i++)
		snprintf(names[k++], 256, "trusted.t%d", i);
	for (int i = 0; i < 3; i++)
		snprintf(names[k++], 256, "security.s%d", i);
}

/* Deterministic values from (size, variant): equal choices give equal sets. */
static void make_value(uint8_t *v, size_t len, unsigned variant)
{
	for (size_t i = 0; i < len; i++)
		v[i] = (uint8_t)(len * 31 + variant * 17 + i * 7);
}

static size_t pick_size(uint64_t *s)
{
	uint32_t r = rnd(s, 100);

	/* EA inodes: any size to 64 KiB, or one of three sizes, so that files
	 * (of several threads) share EA inodes, as values come in 3 variants. */
	if (ea_variant && r >= 94)
		return rnd(s, 65537);
	if (ea_variant && r >= 88)
		return 20000 + 4096 * rnd(s, 3);

	if (r < 55)
		return rnd(s, 33);
	if (r < 85)
		return 33 + rnd(s, 200);
	return 200 + rnd(s, block_size * 3 / 4);
}

/* A random valid ACL (VFS format) in buf; returns its size.  *equiv when
 * it has no named entries; *mode gets the permission bits it stands for. */
static size_t make_acl(uint64_t *s, uint8_t *buf, bool *equiv, uint32_t *mode)
{
	unsigned nu = rnd(s, 4), ng = rnd(s, 3), o = 4;
	uint32_t ver = 2, u = rnd(s, 8), g = rnd(s, 8), m = rnd(s, 8), ot = rnd(s, 8);

#define PUT(tag, perm, id)                                                        \
	do {                                                                      \
		uint16_t t_ = (tag), p_ = (uint16_t)(perm);                       \
		uint32_t i_ = (id);                                               \
		memcpy(buf + o, &t_, 2);                                          \
		memcpy(buf + o + 2, &p_, 2);                                      \
		memcpy(buf + o + 4, &i_, 4);                                      \
		o += 8;                                                           \
	} while (0)
	if (rnd(s, 3) == 0)
		nu = ng = 0;
	memcpy(buf, &ver, 4);
	PUT(1, u, 0xFFFFFFFFu);
	for (unsigned i = 0; i < nu; i++)
		PUT(2, rnd(s, 8), 1000 + i * 7 + rnd(s, 3));
	PUT(4, g, 0xFFFFFFFFu);
	for (unsigned i = 0; i < ng; i++)
		PUT(8, rnd(s, 8), 2000 + i * 5 + rnd(s, 3));
	if (nu + ng)
		PUT(0x10, m, 0xFFFFFFFFu);
	PUT(0x20, ot, 0xFFFFFFFFu);
#undef PUT
	*equiv = nu + ng == 0;
	*mode = (u << 6) | ((nu + ng ? m : g) << 3) | ot;
	return o;
}

/* ------------------------------------------------------------ checking */

static int file_check(uext4_fs *fs, struct mfile *f)
{
	char list[8192], *p;
	uint8_t val[70000];
	struct uext4_stat st;
	ssize_t n;
	int seen = 0, bad = 0;

	if (f->gone)
		return 0;
	n = uext4_listxattr(fs, f->ino, list, sizeof(list));
	CHECK_ERR(n >= 0, "listxattr %s: %zd", f->name, n);
	if (n < 0)
		return 1;
	for (p = list; p < list + n; p += strlen(p) + 1) {
		struct mentry *e = m_find(f, p);

		CHECK_ERR(e, "%s: listed %s not in the model", f->name, p);
		bad += !e;
		seen += e != NULL;
	}
	CHECK_ERR(seen == f->n, "%s: %d listed, model has %d", f->name, seen, f->n);
	for (int i = 0; i < f->n; i++) {
		struct mentry *e = &f->e[i];

		n = uext4_getxattr(fs, f->ino, e->name, val, sizeof(val));
		CHECK_ERR(n == (ssize_t)e->len && memcmp(val, e->val, e->len) == 0,
		      "%s: %s: got %zd bytes, want %zu", f->name, e->name, n, e->len);
		bad += n != (ssize_t)e->len;
	}
	CHECK_ERR(uext4_getattr(fs, f->ino, &st) == 0 && (st.mode & 0777) == f->mode,
	      "%s: mode %o want %o", f->name, st.mode & 0777, f->mode);
	return bad;
}

static uint64_t file_acl_of(uext4_fs *fs, uint64_t ino);
static uint32_t ea_of(uext4_fs *fs, uint64_t ino, const char *name);

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* How many user.* values live in EA inodes, and in how many distinct ones. */
static void ea_census(uext4_fs *fs)
{
	uint64_t inums[1024];
	int n = 0, distinct = 0;

	for (int i = 0; i < nfiles; i++) {
		if (files[i].gone)
			continue;
		for (int j = 0; j < files[i].n && n < 1024; j++) {
			uint32_t inum;

			if (strncmp(files[i].e[j].name, "user.", 5) != 0)
				continue;
			if ((inum = ea_of(fs, files[i].ino, files[i].e[j].name + 5)) != 0)
				inums[n++] = inum;
		}
	}
	qsort(inums, (size_t)n, sizeof(inums[0]), cmp_u64);
	for (int i = 0; i < n; i++)
		distinct += i == 0 || inums[i] != inums[i - 1];
	printf("  EA inodes: %d values in %d distinct EA inodes\n", n, distinct);
}

static int check_all(uext4_fs *fs, const char *when)
{
	uint64_t blk[256];
	int bad = 0, nb = 0, distinct = 0;

	for (int i = 0; i < nfiles; i++) {
		bad += file_check(fs, &files[i]);
		if (!files[i].gone && nb < 256 && (blk[nb] = file_acl_of(fs, files[i].ino)) != 0)
			nb++;
	}
	qsort(blk, (size_t)nb, sizeof(blk[0]), cmp_u64);
	for (int i = 0; i < nb; i++)
		distinct += i == 0 || blk[i] != blk[i - 1];
	printf("  check %s: %d files, %s; %d with an xattr block, %d distinct blocks\n", when,
	       nfiles, bad ? "MISMATCH" : "ok", nb, distinct);
	if (ea_variant)
		ea_census(fs);
	return bad;
}

/* ------------------------------------------------------------ operations */

struct opstats {
	unsigned sets, removes, acls, enospc, exist, nodata;
};

/* Template files: one of three identical sets of block-sized values, or a
 * change of one value, so that blocks are shared, copied and released. */
static void template_op(uext4_fs *fs, struct mfile *f, uint64_t *s, struct opstats *os)
{
	static __thread uint8_t val[2048];
	size_t len = block_size / 8;
	uint32_t r = rnd(s, 100);
	unsigned t = rnd(s, 3);
	char nm[32];
	int err;

	if (r < 60 || r >= 85) {
		for (int i = 0; i < 3; i++) {
			snprintf(nm, sizeof(nm), "user.big%d", i);
			if (r >= 85) {
				err = uext4_removexattr(fs, f->ino, nm);
				CHECK_ERR(err == 0 || (err == -ENODATA && !m_find(f, nm)),
				      "%s: remove %s: %d", f->name, nm, err);
				m_remove(f, nm);
				os->removes++;
				continue;
			}
			make_value(val, len, t * 10 + (unsigned)i);
			err = uext4_setxattr(fs, f->ino, nm, val, len, 0);
			CHECK_ERR(err == 0, "%s: template %u %s: %d", f->name, t, nm, err);
			if (!err)
				m_set(f, nm, val, len);
			os->sets++;
		}
		return;
	}
	snprintf(nm, sizeof(nm), "user.big%u", t);
	make_value(val, len, 100 + rnd(s, 2));
	err = uext4_setxattr(fs, f->ino, nm, val, len, 0);
	CHECK_ERR(err == 0, "%s: change %s: %d", f->name, nm, err);
	if (!err)
		m_set(f, nm, val, len);
	os->sets++;
}

/* One random operation on f, checked against the model. */
static void random_op(uext4_fs *fs, struct mfile *f, uint64_t *s, struct opstats *os)
{
	static __thread uint8_t val[65536];
	uint32_t r = rnd(s, 100);

	if (f->tmpl) {
		template_op(fs, f, s, os);
		return;
	}

	if (r < 12) {
		/* ACLs */
		const char *an = (f->dir && rnd(s, 2)) ? ACL_DEFAULT : ACL_ACCESS;
		bool equiv;
		uint32_t mode;
		size_t len = make_acl(s, val, &equiv, &mode);
		int err;

		if (rnd(s, 4) == 0) {
			err = uext4_removexattr(fs, f->ino, an);
			CHECK_ERR(err == 0, "%s: remove %s: %d", f->name, an, err);
			m_remove(f, an);
			return;
		}
		if (strcmp(an, ACL_DEFAULT) == 0 && !f->dir) {
			err = uext4_setxattr(fs, f->ino, an, val, len, 0);
			CHECK_ERR(err == -EACCES, "%s: default ACL on file: %d", f->name, err);
			return;
		}
		err = uext4_setxattr(fs, f->ino, an, val, len, 0);
		os->acls++;
		if (err == -ENOSPC) {
			os->enospc++;
			CHECK_ERR(!must_fit(f, an, len, acl_disk_len(val, len)),
			      "%s: ENOSPC for %s that fits", f->name, an);
			return;
		}
		CHECK_ERR(err == 0, "%s: set %s: %d", f->name, an, err);
		if (err)
			return;
		if (strcmp(an, ACL_ACCESS) == 0) {
			f->mode = mode;
			if (equiv)
				m_remove(f, an);
			else
				m_set(f, an, val, len);
		} else {
			m_set(f, an, val, len);
		}
		return;
	}
	const char *name = names[rnd(s, NNAMES)];
	struct mentry *e = m_find(f, name);
	int err;

	if (r < 35) {
		err = uext4_removexattr(fs, f->ino, name);
		os->removes++;
		if (e) {
			CHECK_ERR(err == 0, "%s: remove %s: %d", f->name, name, err);
			if (!err)
				m_remove(f, name);
		} else {
			CHECK_ERR(err == -ENODATA, "%s: remove absent %s: %d", f->name, name, err);
			os->nodata++;
		}
		return;
	}
	int flags = r < 45 ? XATTR_CREATE : r < 55 ? XATTR_REPLACE : 0;
	size_t len = pick_size(s);

	make_value(val, len, rnd(s, 3));
	err = uext4_setxattr(fs, f->ino, name, val, len, flags);
	os->sets++;
	if ((flags & XATTR_CREATE) && e) {
		CHECK_ERR(err == -EEXIST, "%s: create existing %s: %d", f->name, name, err);
		os->exist++;
		return;
	}
	if ((flags & XATTR_REPLACE) && !e) {
		CHECK_ERR(err == -ENODATA, "%s: replace absent %s: %d", f->name, name, err);
		os->nodata++;
		return;
	}
	if (err == -ENOSPC) {
		os->enospc++;
		CHECK_ERR(!must_fit(f, name, len, 0), "%s: ENOSPC for %s (%zu bytes) that fits",
		      f->name, name, len);
		return;
	}
	CHECK_ERR(err == 0, "%s: set %s (%zu bytes, flags %d): %d", f->name, name, len, flags, err);
	if (!err)
		m_set(f, name, val, len);
}

static void print_stats(const char *what, const struct opstats *os)
{
	printf("  %s: %u sets, %u removes, %u ACL sets, %u ENOSPC, %u EEXIST, %u ENODATA\n",
	       what, os->sets, os->removes, os->acls, os->enospc, os->exist, os->nodata);
}

/* ------------------------------------------------------------ threads */

#define NTHREADS 4
struct targ {
	uext4_fs *fs;
	int t;
	uint64_t seed;
	unsigned ops;
	struct opstats os;
};
static _Atomic int writers_left;

static void *writer(void *p)
{
	struct targ *a = p;
	uint64_t s = a->seed;

	for (unsigned i = 0; i < a->ops; i++) {
		int k = (int)rnd(&s, (uint32_t)nfiles);

		k -= k % NTHREADS;
		k += a->t;
		if (k >= nfiles || files[k].gone)
			continue;
		random_op(a->fs, &files[k], &s, &a->os);
	}
	writers_left--;
	return NULL;
}

static void *reader(void *p)
{
	struct targ *a = p;
	uint64_t s = a->seed;
	char list[8192];
	static __thread uint8_t val[65536];
	unsigned reads = 0;

	while (writers_left > 0 || reads < 200) {
		struct mfile *f = &files[rnd(&s, (uint32_t)nfiles)];
		ssize_t n;

		if (f->gone)
			continue;
		n = uext4_listxattr(a->fs, f->ino, list, sizeof(list));
		CHECK_ERR(n >= 0 || n == -ERANGE, "reader: listxattr %s: %zd", f->name, n);
		n = uext4_getxattr(a->fs, f->ino, names[rnd(&s, NNAMES)], val, sizeof(val));
		CHECK_ERR(n >= 0 || n == -ENODATA, "reader: getxattr %s: %zd", f->name, n);
		reads++;
	}
	a->ops = reads;
	return NULL;
}

static void threaded_phase(uext4_fs *fs, uint64_t seed, unsigned ops)
{
	pthread_t th[NTHREADS + 1];
	struct targ a[NTHREADS + 1];
	struct opstats tot = { 0 };

	writers_left = NTHREADS;
	for (int t = 0; t <= NTHREADS; t++) {
		a[t] = (struct targ){ fs, t, seed * 7919 + (uint64_t)t * 104729 + 1, ops, { 0 } };
		pthread_create(&th[t], NULL, t < NTHREADS ? writer : reader, &a[t]);
	}
	for (int t = 0; t <= NTHREADS; t++)
		pthread_join(th[t], NULL);
	for (int t = 0; t < NTHREADS; t++) {
		tot.sets += a[t].os.sets;
		tot.removes += a[t].os.removes;
		tot.acls += a[t].os.acls;
		tot.enospc += a[t].os.enospc;
		tot.exist += a[t].os.exist;
		tot.nodata += a[t].os.nodata;
	}
	print_stats("threads", &tot);
	printf("  reader: %u lookups during the writes\n", a[NTHREADS].ops);
}

/* ------------------------------------------------------------ sharing */

static uint64_t file_acl_of(uext4_fs *fs, uint64_t ino)
{
	struct inode *n;
	uint64_t b;

	if (iget(fs, ino, &n))
		return ~0ull;
	urw_rdlock(&n->lock);
	b = n->file_acl;
	urw_unlock(&n->lock);
	iput(fs, n);
	return b;
}

static uint32_t refcount_of(uext4_fs *fs, uint64_t blk)
{
	struct buf *b;
	uint32_t rc;

	if (!blk || bread(fs->bc, blk, UEXT4_META_XATTR, &b))
		return 0;
	ulock_lock(&b->lock);
	memcpy(&rc, b->data + offsetof(struct ext4_xattr_header, h_refcount), 4);
	ulock_unlock(&b->lock);
	brelse(fs->bc, b);
	return le32(rc);
}

static int set_big(uext4_fs *fs, uint64_t ino, unsigned variant)
{
	uint8_t v[2048];
	size_t len = block_size / 8;
	int err = 0;

	for (int i = 0; i < 3 && !err; i++) {
		char nm[32];

		snprintf(nm, sizeof(nm), "user.big%d", i);
		make_value(v, len, variant + (unsigned)i);
		err = uext4_setxattr(fs, ino, nm, v, len, 0);
	}
	return err;
}

static void sharing_test(uext4_fs *fs)
{
	struct uext4_stat sa, sb, sc;
	uint64_t ba, bb, bc, old;

	CHECK_ERR(uext4_create(fs, 2, "share_a", 0644, &sa) == 0, "create share_a");
	CHECK_ERR(uext4_create(fs, 2, "share_b", 0644, &sb) == 0, "create share_b");
	CHECK_ERR(uext4_create(fs, 2, "share_c", 0644, &sc) == 0, "create share_c");
	CHECK_ERR(set_big(fs, sa.ino, 0) == 0 && set_big(fs, sb.ino, 0) == 0, "set identical sets");
	ba = file_acl_of(fs, sa.ino);
	bb = file_acl_of(fs, sb.ino);
	CHECK_ERR(ba && ba == bb && refcount_of(fs, ba) == 2,
	      "identical sets share one block: %llu %llu refcount %u", (unsigned long long)ba,
	      (unsigned long long)bb, refcount_of(fs, ba));
	CHECK_ERR(uext4_getattr(fs, sa.ino, &sa) == 0 && sa.blocks == block_size / 512,
	      "i_blocks counts the shared block: %llu", (unsigned long long)sa.blocks);
	old = ba;
	CHECK_ERR(set_big(fs, sb.ino, 5) == 0, "change share_b");
	bb = file_acl_of(fs, sb.ino);
	CHECK_ERR(bb && bb != old && refcount_of(fs, old) == 1 && refcount_of(fs, bb) == 1,
	      "copy on write: old %llu (refcount %u), new %llu (refcount %u)",
	      (unsigned long long)old, refcount_of(fs, old), (unsigned long long)bb,
	      refcount_of(fs, bb));
	CHECK_ERR(set_big(fs, sb.ino, 0) == 0, "change share_b back");
	bb = file_acl_of(fs, sb.ino);
	CHECK_ERR(bb == old && refcount_of(fs, old) == 2, "shares again: %llu refcount %u",
	      (unsigned long long)bb, refcount_of(fs, old));
	for (int i = 0; i < 3; i++) {
		char nm[32];

		snprintf(nm, sizeof(nm), "user.big%d", i);
		CHECK_ERR(uext4_removexattr(fs, sa.ino, nm) == 0, "remove %s", nm);
	}
	CHECK_ERR(file_acl_of(fs, sa.ino) == 0 && refcount_of(fs, old) == 1,
	      "emptied inode drops its reference: file_acl %llu refcount %u",
	      (unsigned long long)file_acl_of(fs, sa.ino), refcount_of(fs, old));
	CHECK_ERR(uext4_getattr(fs, sa.ino, &sa) == 0 && sa.blocks == 0, "i_blocks back to 0: %llu",
	      (unsigned long long)sa.blocks);
	CHECK_ERR(set_big(fs, sc.ino, 0) == 0, "share_c identical");
	bc = file_acl_of(fs, sc.ino);
	CHECK_ERR(bc == old && refcount_of(fs, old) == 2, "share_c shares: %llu refcount %u",
	      (unsigned long long)bc, refcount_of(fs, old));
	CHECK_ERR(uext4_unlink(fs, 2, "share_b") == 0, "unlink share_b");
	CHECK_ERR(refcount_of(fs, old) == 1, "unlink drops the reference: refcount %u",
	      refcount_of(fs, old));
	printf("  sharing: identical sets share, copy on write, re-share, release: done\n");
}

/* ------------------------------------------------------------ EA inodes */

/* e_value_inum of user.NAME in an entry list starting at p (inside end). */
static uint32_t inum_in(const uint8_t *p, const uint8_t *end, const char *name)
{
	size_t nl = strlen(name);

	while (p + 4 <= end && (p[0] | p[1] | p[2] | p[3])) {
		uint32_t inum;

		if (p[1] == EXT4_XATTR_INDEX_USER && p[0] == nl && memcmp(p + 16, name, nl) == 0) {
			memcpy(&inum, p + 4, 4);
			return le32(inum);
		}
		p += (16 + p[0] + 3) & ~3u;
	}
	return 0;
}

/* The EA inode user.NAME of ino names (inode body, then block), 0 if none. */
static uint32_t ea_of(uext4_fs *fs, uint64_t ino, const char *name)
{
	struct inode *n;
	struct buf *b;
	uint32_t inum = 0, magic;
	size_t hdr;

	if (iget(fs, ino, &n))
		return 0;
	urw_rdlock(&n->lock);
	hdr = 128 + (size_t)n->extra_isize;
	if (inode_size > 128 && hdr + 8 <= inode_size) {
		memcpy(&magic, n->raw + hdr, 4);
		if (le32(magic) == EXT4_XATTR_MAGIC)
			inum = inum_in(n->raw + hdr + 4, n->raw + inode_size, name);
	}
	if (!inum && n->file_acl && bread(fs->bc, n->file_acl, UEXT4_META_XATTR, &b) == 0) {
		inum = inum_in(b->data + 32, b->data + block_size, name);
		brelse(fs->bc, b);
	}
	urw_unlock(&n->lock);
	iput(fs, n);
	return inum;
}

/* An EA inode's reference count (i_ctime << 32 | i_version low word),
 * value hash (i_atime), flags and size. */
static uint64_t ea_facts(uext4_fs *fs, uint32_t inum, uint32_t *hash, uint32_t *flags,
			 uint64_t *size)
{
	struct inode *n;
	const struct ext4_inode *r;
	uint64_t ref;

	if (!inum || iget(fs, inum, &n))
		return 0;
	r = inode_raw(n);
	ref = ((uint64_t)le32(r->i_ctime) << 32) | le32(r->i_version_lo);
	*hash = le32(r->i_atime);
	*flags = n->flags;
	*size = n->size;
	iput(fs, n);
	return ref;
}

static int64_t free_inodes_of(uext4_fs *fs)
{
	return pcounter_sum(&fs->hot->free_inodes);
}

static void ea_inode_test(uext4_fs *fs)
{
	static uint8_t v1[8192], v2[9000], got[9000];
	struct uext4_stat sa, sb;
	uint32_t i1, i2, hash = 0, flags = 0;
	uint64_t size = 0, charge;
	int64_t free0 = free_inodes_of(fs);
	uint64_t ref;

	make_value(v1, sizeof(v1), 1);
	make_value(v2, sizeof(v2), 2);
	CHECK_ERR(uext4_create(fs, 2, "ea_a", 0644, &sa) == 0, "create ea_a");
	CHECK_ERR(uext4_create(fs, 2, "ea_b", 0644, &sb) == 0, "create ea_b");
	CHECK_ERR(uext4_setxattr(fs, sa.ino, "user.big", v1, sizeof(v1), 0) == 0, "set 8 KiB on ea_a");
	CHECK_ERR(uext4_setxattr(fs, sb.ino, "user.big", v1, sizeof(v1), 0) == 0, "set 8 KiB on ea_b");
	i1 = ea_of(fs, sa.ino, "big");
	CHECK_ERR(i1 && i1 == ea_of(fs, sb.ino, "big"), "equal values share an EA inode: %u %u", i1,
	      ea_of(fs, sb.ino, "big"));
	ref = ea_facts(fs, i1, &hash, &flags, &size);
	/* In inode bodies each entry counts; a block the two share counts once. */
	CHECK_ERR(ref == (inode_size > 128 ? 2u : 1u), "EA inode %u: reference count %llu", i1,
	      (unsigned long long)ref);
	CHECK_ERR((flags & EXT4_EA_INODE_FL) && size == sizeof(v1) &&
	      hash == ea_value_hash(fs, v1, sizeof(v1)),
	      "EA inode %u: flags 0x%x size %llu hash 0x%x", i1, flags, (unsigned long long)size,
	      hash);
	CHECK_ERR(free_inodes_of(fs) == free0 - 3, "two files and one EA inode: %lld free, was %lld",
	      (long long)free_inodes_of(fs), (long long)free0);
	charge = sizeof(v1) / 512 + (inode_size > 128 ? 0 : block_size / 512);
	CHECK_ERR(uext4_getattr(fs, sa.ino, &sa) == 0 && sa.blocks == charge,
	      "i_blocks carries the value's charge: %llu, want %llu",
	      (unsigned long long)sa.blocks, (unsigned long long)charge);
	CHECK_ERR(uext4_getxattr(fs, sb.ino, "user.big", got, 10) == -ERANGE, "short buffer: ERANGE");
	CHECK_ERR(uext4_getxattr(fs, sb.ino, "user.big", NULL, 0) == (ssize_t)sizeof(v1),
	      "size query");
	CHECK_ERR(uext4_getxattr(fs, sb.ino, "user.big", got, sizeof(got)) == (ssize_t)sizeof(v1) &&
	      memcmp(got, v1, sizeof(v1)) == 0, "value reads back");
	if (inode_size == 128) {
		/* A change of ea_a copies the shared block: the copy counts too. */
		CHECK_ERR(uext4_setxattr(fs, sa.ino, "user.x", "y", 1, 0) == 0, "set user.x on ea_a");
		ref = ea_facts(fs, i1, &hash, &flags, &size);
		CHECK_ERR(ref == 2, "copy on write of a block naming EA inode %u: count %llu", i1,
		      (unsigned long long)ref);
	}
	/* Replace ea_a's value: a new EA inode; the old one keeps ea_b's. */
	CHECK_ERR(uext4_setxattr(fs, sa.ino, "user.big", v2, sizeof(v2), 0) == 0, "replace on ea_a");
	i2 = ea_of(fs, sa.ino, "big");
	CHECK_ERR(i2 && i2 != i1 && ea_facts(fs, i2, &hash, &flags, &size) == 1 &&
	      ea_facts(fs, i1, &hash, &flags, &size) == 1,
	      "replaced: EA inodes %u (count %llu) and %u (count %llu)", i2,
	      (unsigned long long)ea_facts(fs, i2, &hash, &flags, &size), i1,
	      (unsigned long long)ea_facts(fs, i1, &hash, &flags, &size));
	CHECK_ERR(free_inodes_of(fs) == free0 - 4, "a second EA inode: %lld free",
	      (long long)free_inodes_of(fs));
	/* Removing ea_b's, the last reference, frees its EA inode. */
	CHECK_ERR(uext4_removexattr(fs, sb.ino, "user.big") == 0, "remove from ea_b");
	CHECK_ERR(free_inodes_of(fs) == free0 - 3, "EA inode %u freed: %lld free", i1,
	      (long long)free_inodes_of(fs));
	CHECK_ERR(uext4_getattr(fs, sb.ino, &sb) == 0 && sb.blocks == 0, "ea_b's i_blocks back to 0: %llu",
	      (unsigned long long)sb.blocks);
	/* Unlinking ea_a frees its EA inode with it. */
	CHECK_ERR(uext4_unlink(fs, 2, "ea_a") == 0 && uext4_unlink(fs, 2, "ea_b") == 0, "unlink");
	CHECK_ERR(free_inodes_of(fs) == free0, "all freed: %lld free, was %lld",
	      (long long)free_inodes_of(fs), (long long)free0);
	printf("  EA inodes: shared, counted, replaced, removed, freed with the file: done\n");
}

/* ------------------------------------------------------------ API errors */

static void error_cases(uext4_fs *fs)
{
	struct uext4_stat st;
	uint8_t big[70000] = { 0 };
	char longname[300];
	uint8_t acl[64];
	uint32_t v2 = 2, v1 = 1;
	int err;

	CHECK_ERR(uext4_create(fs, 2, "errs", 0644, &st) == 0, "create errs");
	CHECK_ERR((err = uext4_setxattr(fs, st.ino, "foo.bar", "x", 1, 0)) == -EOPNOTSUPP,
	      "unknown prefix: %d", err);
	CHECK_ERR((err = uext4_setxattr(fs, st.ino, "system.data", "x", 1, 0)) == -EOPNOTSUPP,
	      "system.data: %d", err);
	CHECK_ERR((err = uext4_setxattr(fs, st.ino, "user.", "x", 1, 0)) == -EINVAL,
	      "empty suffix: %d", err);
	memset(longname, 'n', sizeof(longname));
	memcpy(longname, "user.", 5);
	longname[256] = 0;
	CHECK_ERR((err = uext4_setxattr(fs, st.ino, longname, "x", 1, 0)) == -ERANGE,
	      "256-byte name: %d", err);
	longname[255] = 0;
	CHECK_ERR((err = uext4_setxattr(fs, st.ino, longname, "x", 1, 0)) == 0,
	      "255-byte name: %d", err);
	CHECK_ERR((err = uext4_removexattr(fs, st.ino, longname)) == 0, "remove it: %d", err);
	CHECK_ERR((err = uext4_setxattr(fs, st.ino, "user.a", "x", 1, XATTR_REPLACE)) == -ENODATA,
	      "replace absent: %d", err);
	CHECK_ERR((err = uext4_setxattr(fs, st.ino, "user.a", "x", 1, XATTR_CREATE)) == 0,
	      "create: %d", err);
	CHECK_ERR((err = uext4_setxattr(fs, st.ino, "user.a", "y", 1, XATTR_CREATE)) == -EEXIST,
	      "create existing: %d", err);
	CHECK_ERR((err = uext4_setxattr(fs, st.ino, "user.a", "yy", 2, XATTR_REPLACE)) == 0,
	      "replace: %d", err);
	CHECK_ERR((err = uext4_setxattr(fs, st.ino, "user.e", "", 0, 0)) == 0, "empty value: %d",
	      err);
	CHECK_ERR(uext4_getxattr(fs, st.ino, "user.e", big, 10) == 0, "empty value reads back");
	CHECK_ERR((err = uext4_removexattr(fs, st.ino, "user.zz")) == -ENODATA, "remove absent: %d",
	      err);
	CHECK_ERR((err = uext4_setxattr(fs, st.ino, "user.big", big, block_size, 0)) ==
	      (ea_variant ? 0 : -ENOSPC), "value of a whole block: %d", err);
	CHECK_ERR((err = uext4_setxattr(fs, st.ino, "user.huge", big, 65537, 0)) == -E2BIG,
	      "value over 64 KiB: %d", err);
	/* Malformed ACLs. */
	CHECK_ERR((err = uext4_setxattr(fs, st.ino, ACL_ACCESS, acl, 3, 0)) == -EINVAL,
	      "short ACL: %d", err);
	memcpy(acl, &v1, 4);
	CHECK_ERR((err = uext4_setxattr(fs, st.ino, ACL_ACCESS, acl, 4, 0)) == -EOPNOTSUPP,
	      "ACL version 1: %d", err);
	memcpy(acl, &v2, 4);
	CHECK_ERR((err = uext4_setxattr(fs, st.ino, ACL_ACCESS, acl, 10, 0)) == -EINVAL,
	      "ACL size: %d", err);
	{
		/* USER entry without a MASK; GROUP_OBJ before USER_OBJ. */
		uint16_t bad1[] = { 2, 0, 1, 7, 0, 0xffff, 0xffff, 2, 6, 1000, 0, 4, 4, 0xffff,
				    0xffff, 0x20, 4, 0xffff, 0xffff };
		uint16_t bad2[] = { 2, 0, 4, 7, 0xffff, 0xffff, 1, 6, 0xffff, 0xffff, 0x20, 4,
				    0xffff, 0xffff };
		uint16_t badperm[] = { 2, 0, 1, 8, 0xffff, 0xffff, 4, 6, 0xffff, 0xffff, 0x20, 4,
				       0xffff, 0xffff };

		CHECK_ERR((err = uext4_setxattr(fs, st.ino, ACL_ACCESS, bad1, sizeof(bad1), 0)) ==
		      -EINVAL, "ACL without mask: %d", err);
		CHECK_ERR((err = uext4_setxattr(fs, st.ino, ACL_ACCESS, bad2, sizeof(bad2), 0)) ==
		      -EINVAL, "ACL out of order: %d", err);
		CHECK_ERR((err = uext4_setxattr(fs, st.ino, ACL_ACCESS, badperm, sizeof(badperm),
					    0)) == -EINVAL, "ACL perm 8: %d", err);
		bad2[2] = 1;
		bad2[6] = 4;
		CHECK_ERR((err = uext4_setxattr(fs, st.ino, ACL_DEFAULT, bad2, sizeof(bad2), 0)) ==
		      -EACCES, "default ACL on a file: %d", err);
		CHECK_ERR((err = uext4_removexattr(fs, st.ino, ACL_ACCESS)) == 0,
		      "remove absent ACL (kernel: 0): %d", err);
	}
	CHECK_ERR(uext4_unlink(fs, 2, "errs") == 0, "unlink errs");
	printf("  error cases: done\n");
}

/* system.data through the internal API: inode body only, never listed. */
static void system_data_test(uext4_fs *fs)
{
	struct uext4_stat st;
	struct inode *n;
	struct handle *h;
	char buf[256], list[1024];
	uint8_t big[400];
	int err, err2;
	ssize_t got;

	CHECK_ERR(uext4_create(fs, 2, "sysdata", 0644, &st) == 0, "create sysdata");
	if (iget(fs, st.ino, &n))
		return;
	memset(big, 'b', sizeof(big));
	urw_wrlock(&n->lock);
	if (handle_begin(fs, &h) == 0) {
		err = xattr_set_raw(h, n, EXT4_XATTR_INDEX_SYSTEM, "data", 4, "inline!", 7, 0);
		err2 = xattr_set_raw(h, n, EXT4_XATTR_INDEX_SYSTEM, "data", 4, big, sizeof(big), 0);
		CHECK_ERR(err2 == -ENOSPC, "system.data larger than the inode body: %d", err2);
		if (inode_size == 128) {
			CHECK_ERR(err == -ENOSPC, "system.data with 128-byte inodes: %d", err);
		} else {
			CHECK_ERR(err == 0 && n->file_acl == 0, "system.data set in the body: %d", err);
			got = xattr_get_raw(fs, n, EXT4_XATTR_INDEX_SYSTEM, "data", 4, buf, sizeof(buf));
			CHECK_ERR(got == 7 && memcmp(buf, "inline!", 7) == 0, "system.data reads back: %zd",
			      got);
		}
		handle_end(h);
	}
	urw_unlock(&n->lock);
	got = uext4_listxattr(fs, st.ino, list, sizeof(list));
	CHECK_ERR(got == 0, "system.data is not listed: %zd", got);
	CHECK_ERR(uext4_getxattr(fs, st.ino, "system.data", buf, sizeof(buf)) == -EOPNOTSUPP,
	      "system.data is not readable by name");
	urw_wrlock(&n->lock);
	if (handle_begin(fs, &h) == 0) {
		err = xattr_set_raw(h, n, EXT4_XATTR_INDEX_SYSTEM, "data", 4, NULL, 0, 0);
		CHECK_ERR(err == (inode_size == 128 ? -ENODATA : 0), "system.data removed: %d", err);
		handle_end(h);
	}
	urw_unlock(&n->lock);
	iput(fs, n);
	printf("  system.data (internal API): done\n");
}

/* ------------------------------------------------------------ kernel */

static int kernel_compare(const char *img)
{
	char mnt[128], path[256], list[8192], *p;
	uint8_t val[70000];
	int bad = 0, nval = 0;

	if (geteuid() != 0) {
		printf("  kernel comparison skipped: not root\n");
		return 0;
	}
	snprintf(mnt, sizeof(mnt), "%s/mnt", tmpdir);
	mkdir(mnt, 0755);
	if (t_sh("mount -o loop,ro %s %s 2>/dev/null", img, mnt) != 0) {
		printf("  kernel comparison skipped: loop mount failed\n");
		return 0;
	}
	for (int i = 0; i < nfiles; i++) {
		struct mfile *f = &files[i];
		struct stat st;
		ssize_t n;
		int seen = 0;

		if (f->gone)
			continue;
		snprintf(path, sizeof(path), "%s/%s", mnt, f->name);
		n = llistxattr(path, list, sizeof(list));
		CHECK_ERR(n >= 0, "kernel listxattr %s: %s", path, strerror(errno));
		for (p = list; n > 0 && p < list + n; p += strlen(p) + 1) {
			struct mentry *e = m_find(f, p);

			CHECK_ERR(e, "kernel lists %s on %s, not in the model", p, f->name);
			bad += !e;
			seen += e != NULL;
		}
		CHECK_ERR(seen == f->n, "kernel: %s: %d listed, model %d", f->name, seen, f->n);
		bad += seen != f->n;
		for (int j = 0; j < f->n; j++) {
			struct mentry *e = &f->e[j];

			n = lgetxattr(path, e->name, val, sizeof(val));
			CHECK_ERR(n == (ssize_t)e->len && memcmp(val, e->val, e->len) == 0,
			      "kernel: %s %s: %zd bytes (%s), want %zu", f->name, e->name, n,
			      n < 0 ? strerror(errno) : "", e->len);
			bad += n != (ssize_t)e->len;
			nval++;
		}
		CHECK_ERR(lstat(path, &st) == 0 && (st.st_mode & 0777) == f->mode,
		      "kernel: %s mode %o want %o", f->name, st.st_mode & 0777, f->mode);
	}
	/* getfacl/getfattr as a person would look (output not compared). */
	t_sh("getfattr -d -m - --absolute-names %s/f0 >/dev/null 2>&1", mnt);
	t_sh("umount %s", mnt);
	printf("  kernel (ro loop mount): %d files, %d values compared, %s\n", nfiles, nval,
	       bad ? "MISMATCH" : "identical");
	return bad;
}

/* ------------------------------------------------------------ one variant */

static int fsck(const char *img)
{
	char cmd[512];
	int rc;

	snprintf(cmd, sizeof(cmd), "e2fsck -fn %s > %s/fsck.out 2>&1", img, tmpdir);
	rc = t_sh("%s", cmd);
	if (rc != 0) {
		printf("FAIL e2fsck -fn exit %d:\n", rc);
		t_sh("head -40 %s/fsck.out", tmpdir);
		t_failures++;
	} else {
		printf("  e2fsck -fn: clean\n");
	}
	return rc;
}

static int do_mount(const char *img, uext4_fs **fs)
{
	struct uext4_opts o = { 0 };
	int err = uext4_mount(img, &o, fs);

	CHECK_ERR(err == 0, "mount %s: %d", img, err);
	return err;
}

static void do_umount(uext4_fs *fs)
{
	/* The index is per mount; the lead's unmount should call this. */
	xattr_index_destroy(fs);
	CHECK_ERR(uext4_umount(fs) == 0, "umount");
}

static void variant(unsigned bs, unsigned isz, bool csum, bool ea, uint64_t seed)
{
	char img[128];
	uext4_fs *fs;
	uint64_t s = seed;
	struct opstats os = { 0 };
	unsigned nops = bs == 1024 ? 2500 : 4000;

	block_size = bs;
	inode_size = isz;
	ea_variant = ea;
	printf("variant: %u-byte blocks, %u-byte inodes, %s%s\n", bs, isz,
	       csum ? "metadata_csum" : "no metadata_csum", ea ? ", ea_inode" : "");
	snprintf(img, sizeof(img), "%s/img", tmpdir);
	if (t_sh("rm -f %s && truncate -s 32M %s && mke2fs -q -F -t ext4 -b %u -I %u "
		"-O %smetadata_csum%s %s >/dev/null 2>&1", img, img, bs, isz, csum ? "" : "^",
		ea ? ",ea_inode" : "", img)) {
		printf("FAIL mke2fs\n");
		t_failures++;
		return;
	}
	if (do_mount(img, &fs))
		return;
	error_cases(fs);
	system_data_test(fs);
	sharing_test(fs);
	if (ea)
		ea_inode_test(fs);

	nfiles = 72;
	files = calloc((size_t)nfiles, sizeof(*files));
	for (int i = 0; i < nfiles; i++) {
		struct mfile *f = &files[i];
		struct uext4_stat st;
		int err;

		f->tmpl = i >= 48;
		f->dir = i % 6 == 5 && !f->tmpl;
		snprintf(f->name, sizeof(f->name), "f%d", i);
		f->mode = f->dir ? 0755 : 0644;
		err = f->dir ? uext4_mkdir(fs, 2, f->name, f->mode, &st)
			     : uext4_create(fs, 2, f->name, f->mode, &st);
		CHECK_ERR(err == 0, "create %s: %d", f->name, err);
		f->ino = st.ino;
	}
	for (unsigned i = 0; i < nops; i++) {
		random_op(fs, &files[rnd(&s, (uint32_t)nfiles)], &s, &os);
		if (i % 1000 == 999)
			check_all(fs, "during random ops");
	}
	print_stats("random ops", &os);
	check_all(fs, "after random ops");
	threaded_phase(fs, s, nops / 4);
	check_all(fs, "after threads");
	/* Unlink a quarter of the files, xattr blocks (shared or not) and all. */
	for (int i = 0; i < nfiles; i += 4) {
		if (files[i].dir)
			continue;
		CHECK_ERR(uext4_unlink(fs, 2, files[i].name) == 0, "unlink %s", files[i].name);
		files[i].gone = true;
	}
	do_umount(fs);
	fsck(img);
	if (do_mount(img, &fs) == 0) {
		struct opstats os2 = { 0 };

		check_all(fs, "after remount");
		for (unsigned i = 0; i < nops / 4; i++) {
			struct mfile *f = &files[rnd(&s, (uint32_t)nfiles)];

			if (!f->gone)
				random_op(fs, f, &s, &os2);
		}
		print_stats("after remount", &os2);
		check_all(fs, "after more ops");
		do_umount(fs);
		fsck(img);
		kernel_compare(img);
	}
	for (int i = 0; i < nfiles; i++)
		m_clear(&files[i]);
	free(files);
	files = NULL;
}

int main(int argc, char **argv)
{
	uint64_t seed = argc > 1 ? strtoull(argv[1], NULL, 0) : (uint64_t)time(NULL);

	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("unit_xattrw: seed %llu\n", (unsigned long long)seed);
	t_need_tools("mke2fs e2fsck");
	t_tmpdir(tmpdir, sizeof(tmpdir), "uxattrw");
	if (!seed)
		seed = 1;
	make_names();
	variant(4096, 256, true, false, seed);
	variant(4096, 256, false, false, seed + 1);
	variant(1024, 256, true, false, seed + 2);
	variant(1024, 128, false, false, seed + 3);
	variant(4096, 128, true, false, seed + 4);
	variant(1024, 256, false, false, seed + 5);
	variant(4096, 256, true, true, seed + 6);
	variant(1024, 128, false, true, seed + 7);
	t_sh("rm -rf %s", tmpdir);
	printf("unit_xattrw: %s (seed %llu)\n", t_failures ? "FAIL" : "PASS",
	       (unsigned long long)seed);
	return t_failures ? T_FAIL : T_PASS;
}
