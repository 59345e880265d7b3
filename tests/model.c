/*
 * model.c - randomized model test of the write path.
 *
 *   model [--threads N] [--ops N] [--seed N] [--dump FILE] [--no-fsck]
 *         [--trace] [--skip OP]... IMAGE
 *
 * --trace prints every operation; --skip OP (create, symlink, rename, ...)
 * leaves a kind of operation out, to look past a known bug.
 *
 * Several threads drive thousands of random operations against one
 * read-write mount and keep an in-memory model of what the tree must look
 * like: create, mkdir, mknod (chr, blk, fifo, sock), symlink (fast, one
 * block, long), link, unlink, rmdir, rename (same dir, across dirs, over an
 * existing name, NOREPLACE, EXCHANGE, WHITEOUT, directories changing "..",
 * into own subtree), setattr (mode, uid, gid, size, atime/mtime with ns), pwrite
 * (sparse, extending, overwrite, O_APPEND; 1 byte .. 1 MiB), fallocate
 * (0, KEEP_SIZE, PUNCH_HOLE, ZERO_RANGE, COLLAPSE_RANGE, INSERT_RANGE),
 * setxattr/removexattr (user., trusted., POSIX ACLs, small and block-sized
 * values), unlink of an open file then I/O through the handle, fsync, sync,
 * and bulk creation of big (htree) directories.
 *
 * Each thread works in its own subtree /tN (its part of the model is exact
 * without locking); some operations happen in the shared directories /s0,
 * /s1, each guarded by the test's own mutex (which also guards the model of
 * everything inside).  Every read (getattr, lookup, readdir, pread,
 * readlink, getxattr, listxattr) is compared with the model, and expected
 * errors (EEXIST, ENOENT, ENOTEMPTY, ENOTDIR, EISDIR, EINVAL, ENODATA,
 * ERANGE, ENAMETOOLONG) are asserted.  Every namespace operation looks up
 * the names it touches (and ".." of a directory a rename may move) before
 * and after the change, each twice, so that a stale positive or negative
 * entry of the library's name cache shows as a mismatch.
 *
 * At the end: the whole tree is compared with the model, uext4_umount,
 * e2fsck -fn must be clean, a read-only remount is compared again, and
 * --dump writes the model as canonical lines (t.h) in the format of
 * `walk --no-blocks --no-mtime --no-ctime --no-atime --no-nsec --no-dirsize
 * --exclude=lost+found posix MNT`, so model.sh can diff it against the
 * kernel's view of the image.
 *
 * Where the kernel's behaviour leaves room, the model accepts either
 * outcome: times are checked only after setattr set them explicitly (until
 * something may change them); fallocate may return EOPNOTSUPP on
 * block-mapped/inline files (as the kernel does), and COLLAPSE/INSERT_RANGE
 * may return EOPNOTSUPP anywhere (counted and printed); setxattr may give
 * ENOSPC when the attributes might not fit (must succeed when they surely
 * fit in one block, must fail when they surely cannot); when several
 * errors apply to a rename any of them is accepted.  ACLs are made
 * consistent with the mode and chmod skips files that have one, so the
 * result does not depend on whether the library syncs mode and ACL.
 *
 * The seed is printed; --seed N replays the same operation streams (with
 * --threads 1 the run is exactly reproducible; with more threads only the
 * interleaving of the shared-directory operations varies).
 */
#include <dirent.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/time.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "uext4.h"
#include "t.h"

#define MAX_FILE (8u << 20)          /* model files stay below this size */
#define MAX_WRITE (1u << 20)
#define DATA_BUDGET (256ull << 20) /* model file bytes before writes stop growing files */
#define NSHARED 2
#define MAX_FAILURES 25
#define FL_EXTENTS 0x00080000u
#define FL_INLINE 0x10000000u

/* ------------------------------------------------------------ model */

struct xa {
	char *name;
	unsigned char *val;
	size_t len;
};

struct node;
struct dent {
	char *name;
	struct node *n;
};

/*
 * A model inode.  Fields are changed only by the thread owning the subtree
 * the node is in, or, for nodes in a shared directory (and the shared
 * directory itself), by a thread holding that directory's g_shared lock.
 */
struct node {
	uint64_t ino;
	uint32_t mode, uid, gid, nlink;
	uint64_t rdev;
	unsigned char *data;     /* regular files: size bytes (holes are zeros) */
	uint64_t size, cap;
	char *target;            /* symlinks */
	size_t tlen;
	struct xa *xa;
	int nxa;
	struct timespec atime, mtime;
	bool atime_known, mtime_known;
	/* directories */
	struct dent *ents;
	int nents, cents;
	struct node *parent;
	char *dname;             /* name in parent (directories) */
	int shared;              /* 1 + index for a shared directory */
};

struct shared_dir {
	pthread_mutex_t lock;    /* guards the directory's model and its children's */
	struct node *dir;
};

static uext4_fs *g_fs;
static struct node *g_root;
static struct shared_dir g_shared[NSHARED];
static uint32_t g_bsize, g_isize;
static bool g_ea_inode;
static atomic_int g_failures;
static atomic_bool g_stop;
static bool g_trace;

struct thr {
	int id;
	uint64_t rng;
	uint32_t uid, gid;
	struct node *home;
	struct node **dirs;      /* directories of the own subtree */
	int ndirs, cdirs;
	unsigned char *buf, *rbuf; /* 2 * MAX_WRITE each */
	uint64_t data_bytes;     /* model bytes of files this thread created (approx.) */
	uint64_t ops, nops;
	unsigned long long count[32];
	unsigned uniq;
};

static uint64_t rnd(struct thr *t)
{
	return t_rnd(&t->rng);
}

static uint64_t rndn(struct thr *t, uint64_t n)
{
	return n ? rnd(t) % n : 0;
}

static bool chance(struct thr *t, unsigned pct)
{
	return rndn(t, 100) < pct;
}

/* Log-uniform in [1, max]: small sizes common, big ones present. */
static uint64_t rnd_log(struct thr *t, uint64_t max)
{
	unsigned bits = 0;
	while ((1ULL << bits) < max)
		bits++;
	uint64_t v = 1 + rndn(t, 1ULL << rndn(t, bits + 1));
	return v > max ? max : v;
}

#define FAIL(t, ...) do {                                                 \
	fprintf(stderr, "FAIL thread %d op %llu (line %d): ", (t)->id,       \
		(unsigned long long)(t)->ops, __LINE__);                     \
	fprintf(stderr, __VA_ARGS__);                                        \
	fprintf(stderr, " [last error: %s]\n", uext4_last_error());          \
	if (atomic_fetch_add(&g_failures, 1) + 1 >= MAX_FAILURES)            \
		atomic_store(&g_stop, true);                                 \
} while (0)

#define TRACE(t, ...) do {                                                \
	if (g_trace) {                                                       \
		flockfile(stdout);                                           \
		printf("T%d #%llu ", (t)->id, (unsigned long long)(t)->ops); \
		printf(__VA_ARGS__);                                         \
		putchar('\n');                                               \
		funlockfile(stdout);                                         \
	}                                                                    \
} while (0)

static const char *err_name(int r)
{
	static __thread char b[48];
	if (r >= 0) {
		snprintf(b, sizeof(b), "%d", r);
		return b;
	}
	snprintf(b, sizeof(b), "-%s", strerror(-r));
	return b;
}

/* Path of a directory node, for messages (thread-local buffer). */
static const char *dir_path(const struct node *d)
{
	static __thread char b[8192];
	const struct node *chain[256];
	int n = 0;
	for (const struct node *p = d; p && p != g_root && n < 256; p = p->parent)
		chain[n++] = p;
	size_t len = 0;
	b[0] = 0;
	while (n-- > 0 && len < sizeof(b) - 300)
		len += (size_t)snprintf(b + len, sizeof(b) - len, "/%s", chain[n]->dname);
	if (!len)
		strcpy(b, "/");
	return b;
}

static struct node *node_new(uint64_t ino, uint32_t mode, uint32_t uid, uint32_t gid)
{
	struct node *n = calloc(1, sizeof(*n));
	if (!n)
		exit(T_FAIL);
	n->ino = ino;
	n->mode = mode;
	n->uid = uid;
	n->gid = gid;
	n->nlink = S_ISDIR(mode) ? 2 : 1;
	return n;
}

static atomic_uint_fast64_t g_model_bytes; /* sum of the model's file sizes */

static void node_free(struct node *n)
{
	atomic_fetch_sub(&g_model_bytes, n->size);
	free(n->data);
	free(n->target);
	for (int i = 0; i < n->nxa; i++) {
		free(n->xa[i].name);
		free(n->xa[i].val);
	}
	free(n->xa);
	for (int i = 0; i < n->nents; i++)
		free(n->ents[i].name);
	free(n->ents);
	free(n->dname);
	free(n);
}

static struct dent *dent_find(struct node *d, const char *name)
{
	for (int i = 0; i < d->nents; i++)
		if (!strcmp(d->ents[i].name, name))
			return &d->ents[i];
	return NULL;
}

static void dent_add(struct node *d, const char *name, struct node *n)
{
	if (d->nents == d->cents) {
		d->cents = d->cents ? d->cents * 2 : 8;
		d->ents = t_xrealloc(d->ents, (size_t)d->cents * sizeof(*d->ents));
	}
	d->ents[d->nents].name = strdup(name);
	d->ents[d->nents].n = n;
	d->nents++;
	if (S_ISDIR(n->mode)) {
		n->parent = d;
		free(n->dname);
		n->dname = strdup(name);
	}
	d->mtime_known = false;
}

static void dent_del(struct node *d, struct dent *e)
{
	free(e->name);
	*e = d->ents[--d->nents];
	d->mtime_known = false;
}

static void thr_add_dir(struct thr *t, struct node *d)
{
	if (t->ndirs == t->cdirs) {
		t->cdirs = t->cdirs ? t->cdirs * 2 : 64;
		t->dirs = t_xrealloc(t->dirs, (size_t)t->cdirs * sizeof(*t->dirs));
	}
	t->dirs[t->ndirs++] = d;
}

static void thr_del_dir(struct thr *t, struct node *d)
{
	for (int i = 0; i < t->ndirs; i++)
		if (t->dirs[i] == d) {
			t->dirs[i] = t->dirs[--t->ndirs];
			return;
		}
}

/* Is a an ancestor of b (or b itself)? */
static bool is_ancestor(const struct node *a, const struct node *b)
{
	for (; b; b = b->parent)
		if (a == b)
			return true;
	return false;
}

/* Drop one link of n (a name of it went away); free it when none is left. */
static void node_unref(struct thr *t, struct node *n)
{
	if (S_ISDIR(n->mode)) {
		if (t)
			thr_del_dir(t, n);
		node_free(n);
		return;
	}
	if (--n->nlink == 0)
		node_free(n);
}

/* ------------------------------------------------------------ file data model */

static atomic_uint g_shift_unsupported; /* COLLAPSE/INSERT_RANGE refused */

static void data_resize(struct node *n, uint64_t size)
{
	if (size > n->cap) {
		uint64_t cap = n->cap ? n->cap : 4096;
		while (cap < size)
			cap *= 2;
		n->data = t_xrealloc(n->data, cap);
		n->cap = cap;
	}
	if (size > n->size)
		memset(n->data + n->size, 0, size - n->size);
	atomic_fetch_add(&g_model_bytes, size - n->size); /* wraps for shrink: fine */
	n->size = size;
	n->mtime_known = false;
}

static void data_write(struct node *n, const void *buf, uint64_t len, uint64_t off)
{
	if (off + len > n->size)
		data_resize(n, off + len);
	memcpy(n->data + off, buf, len);
	n->mtime_known = false;
}

static void data_zero(struct node *n, uint64_t off, uint64_t len)
{
	if (off >= n->size)
		return;
	if (len > n->size - off)
		len = n->size - off;
	memset(n->data + off, 0, len);
}

static void fill_random(struct thr *t, unsigned char *p, size_t n)
{
	if (chance(t, 8)) {
		memset(p, 0, n);
		return;
	}
	uint64_t x = rnd(t);
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		x += 0x9E3779B97F4A7C15ULL;
		uint64_t w = (x ^ (x >> 29)) * 0xBF58476D1CE4E5B9ULL;
		memcpy(p + i, &w, 8);
	}
	for (; i < n; i++)
		p[i] = (unsigned char)(x >> (i % 8 * 8));
}

/* ------------------------------------------------------------ xattr model */

static struct xa *xa_find(struct node *n, const char *name)
{
	for (int i = 0; i < n->nxa; i++)
		if (!strcmp(n->xa[i].name, name))
			return &n->xa[i];
	return NULL;
}

static void xa_set(struct node *n, const char *name, const void *val, size_t len)
{
	struct xa *x = xa_find(n, name);
	if (!x) {
		n->xa = t_xrealloc(n->xa, (size_t)(n->nxa + 1) * sizeof(*n->xa));
		x = &n->xa[n->nxa++];
		x->name = strdup(name);
	} else {
		free(x->val);
	}
	x->val = t_xmalloc(len);
	memcpy(x->val, val, len);
	x->len = len;
}

static void xa_del(struct node *n, const char *name)
{
	struct xa *x = xa_find(n, name);
	if (!x)
		return;
	free(x->name);
	free(x->val);
	*x = n->xa[--n->nxa];
}

static const char ACL_NAME[] = "system.posix_acl_access";

/* Bytes an entry takes on disk (entry header, padded name, padded value). */
static size_t xa_disk_size(const char *name, size_t vlen)
{
	size_t suffix;
	if (!strcmp(name, ACL_NAME)) {
		suffix = 0;
		/* the on-disk ACL is smaller than the xattr form: 4 + 4/8 per entry */
		size_t entries = (vlen - 4) / 8;
		vlen = 4 + 4 * 4 + (entries > 4 ? entries - 4 : 0) * 8;
	} else if (!strncmp(name, "user.", 5)) {
		suffix = strlen(name) - 5;
	} else {
		suffix = strlen(name) - 8; /* trusted. */
	}
	return ((16 + suffix + 3) & ~(size_t)3) + ((vlen + 3) & ~(size_t)3);
}

/* ------------------------------------------------------------ checks */

static void check_stat(struct thr *t, const char *what, const struct node *n,
		       const struct uext4_stat *st)
{
	if (st->ino != n->ino)
		FAIL(t, "%s: ino %llu, model %llu", what, (unsigned long long)st->ino,
		     (unsigned long long)n->ino);
	if (st->mode != n->mode)
		FAIL(t, "%s (ino %llu): mode %o, model %o", what, (unsigned long long)n->ino,
		     st->mode, n->mode);
	if (st->uid != n->uid || st->gid != n->gid)
		FAIL(t, "%s (ino %llu): uid/gid %u/%u, model %u/%u", what,
		     (unsigned long long)n->ino, st->uid, st->gid, n->uid, n->gid);
	if (st->nlink != n->nlink)
		FAIL(t, "%s (ino %llu): nlink %u, model %u", what, (unsigned long long)n->ino,
		     st->nlink, n->nlink);
	if (S_ISREG(n->mode) && st->size != n->size)
		FAIL(t, "%s (ino %llu): size %llu, model %llu", what, (unsigned long long)n->ino,
		     (unsigned long long)st->size, (unsigned long long)n->size);
	if (S_ISLNK(n->mode) && st->size != n->tlen)
		FAIL(t, "%s (ino %llu): symlink size %llu, target length %zu", what,
		     (unsigned long long)n->ino, (unsigned long long)st->size, n->tlen);
	if ((S_ISCHR(n->mode) || S_ISBLK(n->mode)) && st->rdev != n->rdev)
		FAIL(t, "%s (ino %llu): rdev %u:%u, model %u:%u", what, (unsigned long long)n->ino,
		     major(st->rdev), minor(st->rdev), major(n->rdev), minor(n->rdev));
	if (n->mtime_known && (st->mtime.tv_sec != n->mtime.tv_sec ||
			       st->mtime.tv_nsec != n->mtime.tv_nsec))
		FAIL(t, "%s (ino %llu): mtime %lld.%09ld, model %lld.%09ld", what,
		     (unsigned long long)n->ino, (long long)st->mtime.tv_sec, st->mtime.tv_nsec,
		     (long long)n->mtime.tv_sec, n->mtime.tv_nsec);
	if (n->atime_known && (st->atime.tv_sec != n->atime.tv_sec ||
			       st->atime.tv_nsec != n->atime.tv_nsec))
		FAIL(t, "%s (ino %llu): atime %lld.%09ld, model %lld.%09ld", what,
		     (unsigned long long)n->ino, (long long)st->atime.tv_sec, st->atime.tv_nsec,
		     (long long)n->atime.tv_sec, n->atime.tv_nsec);
}

static void check_getattr(struct thr *t, const char *what, const struct node *n)
{
	struct uext4_stat st;
	int r = uext4_getattr(g_fs, n->ino, &st);
	if (r < 0) {
		FAIL(t, "%s: getattr ino %llu: %s", what, (unsigned long long)n->ino, err_name(r));
		return;
	}
	check_stat(t, what, n, &st);
}

struct rd_ent {
	char *name;
	uint64_t ino;
	unsigned dtype;
};
struct rd_list {
	struct rd_ent *v;
	int n, cap;
	uint64_t dot, dotdot;
	int ndot, ndotdot;
	unsigned piece, taken;
	uint64_t resume;
};

/*
 * Look name up in d twice (the second answer comes from the library's
 * name cache when it holds the name) and compare with the model: the
 * inode, or ENOENT.  Namespace operations call it for every name they
 * touch before (to warm the cache with a positive or negative entry) and
 * after the change, so a stale entry shows (d's model must be stable:
 * the own subtree, or a shared directory whose lock is held).
 */
static void probe(struct thr *t, struct node *d, const char *name, const char *when)
{
	struct dent *e = dent_find(d, name);
	for (int i = 0; i < 2; i++) {
		struct uext4_stat st;
		int r = uext4_lookup(g_fs, d->ino, name, &st);
		if (!e && r != -ENOENT)
			FAIL(t, "%s: lookup %s/%s: %s ino %llu, model: absent", when, dir_path(d),
			     name, err_name(r), r ? 0ull : (unsigned long long)st.ino);
		else if (e && (r < 0 || st.ino != e->n->ino))
			FAIL(t, "%s: lookup %s/%s: %s ino %llu, model %llu", when, dir_path(d), name,
			     err_name(r), r ? 0ull : (unsigned long long)st.ino,
			     (unsigned long long)e->n->ino);
	}
}

/* ".." of directory n must name its model parent (after a move). */
static void probe_dotdot(struct thr *t, struct node *n, const char *when)
{
	struct uext4_stat st;
	for (int i = 0; i < 2; i++) {
		int r = uext4_lookup(g_fs, n->ino, "..", &st);
		if (r < 0 || !n->parent || st.ino != n->parent->ino)
			FAIL(t, "%s: lookup %s/..: %s ino %llu, model %llu", when, dir_path(n),
			     err_name(r), r ? 0ull : (unsigned long long)st.ino,
			     n->parent ? (unsigned long long)n->parent->ino : 0ull);
	}
}

static int rd_fill(void *ctx, const char *name, size_t len, uint64_t ino, unsigned dtype,
		   uint64_t next)
{
	struct rd_list *l = ctx;
	l->resume = next;
	l->taken++;
	if (len == 1 && name[0] == '.') {
		l->dot = ino;
		l->ndot++;
	} else if (len == 2 && name[0] == '.' && name[1] == '.') {
		l->dotdot = ino;
		l->ndotdot++;
	} else {
		if (l->n == l->cap) {
			l->cap = l->cap ? l->cap * 2 : 32;
			l->v = t_xrealloc(l->v, (size_t)l->cap * sizeof(*l->v));
		}
		l->v[l->n].name = t_xmalloc(len + 1);
		memcpy(l->v[l->n].name, name, len);
		l->v[l->n].name[len] = 0;
		l->v[l->n].ino = ino;
		l->v[l->n].dtype = dtype;
		l->n++;
	}
	return l->piece && l->taken >= l->piece;
}

static int cmp_rd(const void *a, const void *b)
{
	return strcmp(((const struct rd_ent *)a)->name, ((const struct rd_ent *)b)->name);
}

static int cmp_dent(const void *a, const void *b)
{
	return strcmp(((const struct dent *)a)->name, ((const struct dent *)b)->name);
}

/* readdir (in random pieces resumed by cookie) must list exactly the model. */
static void check_readdir(struct thr *t, struct node *d)
{
	struct rd_list l = { 0 };
	uint64_t cookie = 0;
	for (int guard = 0; guard < 1000000; guard++) {
		l.piece = chance(t, 50) ? 1 + (unsigned)rndn(t, 40) : 0;
		l.taken = 0;
		int r = uext4_readdir(g_fs, d->ino, cookie, rd_fill, &l);
		if (r < 0) {
			FAIL(t, "readdir %s: %s", dir_path(d), err_name(r));
			goto out;
		}
		if (!l.piece || l.taken < l.piece)
			break;
		cookie = l.resume;
	}
	const char *p = dir_path(d);
	if (l.ndot != 1 || l.dot != d->ino)
		FAIL(t, "readdir %s: '.' seen %d times, ino %llu", p, l.ndot,
		     (unsigned long long)l.dot);
	uint64_t pino = d->parent ? d->parent->ino : UEXT4_ROOT_INO;
	if (l.ndotdot != 1 || l.dotdot != pino)
		FAIL(t, "readdir %s: '..' seen %d times, ino %llu, model parent %llu", p,
		     l.ndotdot, (unsigned long long)l.dotdot, (unsigned long long)pino);
	int skip_lf = d == g_root; /* lost+found is not in the model */
	if (l.n)
		qsort(l.v, (size_t)l.n, sizeof(*l.v), cmp_rd);
	struct dent *m = t_xmalloc((size_t)d->nents * sizeof(*m));
	if (d->nents) {
		memcpy(m, d->ents, (size_t)d->nents * sizeof(*m));
		qsort(m, (size_t)d->nents, sizeof(*m), cmp_dent);
	}
	int i = 0, j = 0, reported = 0;
	while ((i < l.n || j < d->nents) && reported < 5) {
		int c = i >= l.n ? 1 : j >= d->nents ? -1 : strcmp(l.v[i].name, m[j].name);
		if (c < 0) {
			if (!(skip_lf && !strcmp(l.v[i].name, "lost+found"))) {
				FAIL(t, "readdir %s: extra entry '%s' (ino %llu)", p, l.v[i].name,
				     (unsigned long long)l.v[i].ino);
				reported++;
			}
			i++;
		} else if (c > 0) {
			FAIL(t, "readdir %s: missing entry '%s' (ino %llu)", p, m[j].name,
			     (unsigned long long)m[j].n->ino);
			reported++;
			j++;
		} else {
			unsigned want = IFTODT(m[j].n->mode);
			if (l.v[i].ino != m[j].n->ino || (l.v[i].dtype && l.v[i].dtype != want)) {
				FAIL(t, "readdir %s: '%s' ino %llu dtype %u, model ino %llu dtype %u",
				     p, m[j].name, (unsigned long long)l.v[i].ino, l.v[i].dtype,
				     (unsigned long long)m[j].n->ino, want);
				reported++;
			}
			i++;
			j++;
		}
	}
	free(m);
out:
	for (int k = 0; k < l.n; k++)
		free(l.v[k].name);
	free(l.v);
	d->atime_known = false;
}

/* Compare [off, off+len) read through f with the model (reads past EOF too). */
static void check_range(struct thr *t, uext4_file *f, const struct node *n, uint64_t off,
			uint64_t len, const char *what)
{
	if (len > 2 * MAX_WRITE)
		len = 2 * MAX_WRITE;
	ssize_t got = uext4_pread(f, t->rbuf, len, off);
	uint64_t want = off >= n->size ? 0 : (n->size - off < len ? n->size - off : len);
	if (got < 0) {
		FAIL(t, "%s: pread ino %llu [%llu,+%llu): %s", what, (unsigned long long)n->ino,
		     (unsigned long long)off, (unsigned long long)len, err_name((int)got));
		return;
	}
	/* a short read is allowed only at EOF; loop to collect the rest */
	uint64_t total = (uint64_t)got;
	while (total < want && got > 0) {
		got = uext4_pread(f, t->rbuf + total, len - total, off + total);
		if (got < 0) {
			FAIL(t, "%s: pread ino %llu at %llu: %s", what, (unsigned long long)n->ino,
			     (unsigned long long)(off + total), err_name((int)got));
			return;
		}
		total += (uint64_t)got;
	}
	if (total != want) {
		FAIL(t, "%s: pread ino %llu [%llu,+%llu) returned %llu bytes, model %llu (size %llu)",
		     what, (unsigned long long)n->ino, (unsigned long long)off,
		     (unsigned long long)len, (unsigned long long)total, (unsigned long long)want,
		     (unsigned long long)n->size);
		return;
	}
	if (want && memcmp(t->rbuf, n->data + off, want)) {
		uint64_t k = 0;
		while (t->rbuf[k] == n->data[off + k])
			k++;
		/* the first bytes of the block read there tell what was there */
		uint64_t bs = (off + k) / g_bsize * g_bsize, o = bs > off ? bs - off : 0;
		char hex[3 * 16 + 1] = "";
		for (uint64_t i = 0; i < 16 && o + i < want; i++)
			sprintf(hex + 3 * i, " %02x", t->rbuf[o + i]);
		FAIL(t, "%s: ino %llu data differs at offset %llu: read 0x%02x, model 0x%02x "
		     "(read [%llu,+%llu), size %llu; block at %llu reads%s)", what,
		     (unsigned long long)n->ino, (unsigned long long)(off + k), t->rbuf[k],
		     n->data[off + k], (unsigned long long)off, (unsigned long long)want,
		     (unsigned long long)n->size, (unsigned long long)(off + o), hex);
	}
}

static void check_file_data(struct thr *t, struct node *n, const char *what)
{
	uext4_file *f;
	int r = uext4_open(g_fs, n->ino, O_RDONLY, &f);
	if (r < 0) {
		FAIL(t, "%s: open ino %llu: %s", what, (unsigned long long)n->ino, err_name(r));
		return;
	}
	for (uint64_t off = 0; off < n->size + 1; off += 2 * MAX_WRITE)
		check_range(t, f, n, off, 2 * MAX_WRITE, what);
	uext4_release(f);
	n->atime_known = false;
}

static void check_symlink(struct thr *t, struct node *n, const char *what)
{
	char buf[8192];
	ssize_t r = uext4_readlink(g_fs, n->ino, buf, sizeof(buf));
	if (r < 0)
		FAIL(t, "%s: readlink ino %llu: %s", what, (unsigned long long)n->ino,
		     err_name((int)r));
	else if ((size_t)r != n->tlen || memcmp(buf, n->target, n->tlen))
		FAIL(t, "%s: readlink ino %llu gives %zd bytes '%.40s...', model %zu '%.40s...'",
		     what, (unsigned long long)n->ino, r, buf, n->tlen, n->target);
	n->atime_known = false;
}

static void check_xattrs(struct thr *t, struct node *n, const char *what)
{
	char list[65536];
	ssize_t len = uext4_listxattr(g_fs, n->ino, NULL, 0);
	ssize_t len2 = len >= 0 ? uext4_listxattr(g_fs, n->ino, list, sizeof(list)) : len;
	if (len < 0 || len2 < 0) {
		FAIL(t, "%s: listxattr ino %llu: %s", what, (unsigned long long)n->ino,
		     err_name((int)(len < 0 ? len : len2)));
		return;
	}
	if (len != len2)
		FAIL(t, "%s: listxattr ino %llu: size query %zd, list %zd", what,
		     (unsigned long long)n->ino, len, len2);
	int seen = 0;
	for (ssize_t i = 0; i < len2; i += (ssize_t)strlen(list + i) + 1) {
		struct xa *x = xa_find(n, list + i);
		if (!x) {
			FAIL(t, "%s: ino %llu lists xattr '%s' not in the model", what,
			     (unsigned long long)n->ino, list + i);
			continue;
		}
		seen++;
	}
	if (seen != n->nxa)
		FAIL(t, "%s: ino %llu lists %d of the model's %d xattrs", what,
		     (unsigned long long)n->ino, seen, n->nxa);
	for (int i = 0; i < n->nxa; i++) {
		char val[65536];
		ssize_t r = uext4_getxattr(g_fs, n->ino, n->xa[i].name, val, sizeof(val));
		if (r < 0)
			FAIL(t, "%s: getxattr ino %llu '%s': %s", what, (unsigned long long)n->ino,
			     n->xa[i].name, err_name((int)r));
		else if ((size_t)r != n->xa[i].len || memcmp(val, n->xa[i].val, (size_t)r))
			FAIL(t, "%s: getxattr ino %llu '%s': %zd bytes, model %zu (or value differs)",
			     what, (unsigned long long)n->ino, n->xa[i].name, r, n->xa[i].len);
	}
}

/* Everything about one node and, for directories, the subtree below. */
static void verify_tree(struct thr *t, struct node *n, const char *path, bool recurse)
{
	char what[4200];
	snprintf(what, sizeof(what), "verify %s", path);
	check_getattr(t, what, n);
	check_xattrs(t, n, what);
	if (S_ISREG(n->mode))
		check_file_data(t, n, what);
	if (S_ISLNK(n->mode))
		check_symlink(t, n, what);
	if (!S_ISDIR(n->mode))
		return;
	check_readdir(t, n);
	for (int i = 0; i < n->nents && !atomic_load(&g_stop); i++) {
		struct uext4_stat st;
		int r = uext4_lookup(g_fs, n->ino, n->ents[i].name, &st);
		if (r < 0)
			FAIL(t, "lookup %s/%s: %s", path, n->ents[i].name, err_name(r));
		else if (st.ino != n->ents[i].n->ino)
			FAIL(t, "lookup %s/%s: ino %llu, model %llu", path, n->ents[i].name,
			     (unsigned long long)st.ino, (unsigned long long)n->ents[i].n->ino);
		if (!recurse)
			continue;
		char *child = t_xmalloc(strlen(path) + strlen(n->ents[i].name) + 2);
		sprintf(child, "%s/%s", path, n->ents[i].name);
		verify_tree(t, n->ents[i].n, child, true);
		free(child);
	}
}

/* ------------------------------------------------------------ choosing */

/* A name from a small per-thread pool, so names collide often.  Some are
 * long (up to 255 bytes), some have spaces or UTF-8. */
static void pick_name(struct thr *t, char *buf, size_t size)
{
	unsigned k = (unsigned)rndn(t, 40);
	switch (k % 8) {
	case 5:
		snprintf(buf, size, "long-%u-", k);
		{
			size_t len = strlen(buf), want = 60 + (k * 37) % 196;
			for (; len < want && len + 1 < size; len++)
				buf[len] = (char)('a' + (len + k) % 26);
			buf[len] = 0;
		}
		break;
	case 6:
		snprintf(buf, size, "sp ace %u", k);
		break;
	case 7:
		snprintf(buf, size, "\xc3\xa9t\xc3\xa9-%u", k);
		break;
	default:
		snprintf(buf, size, "n%u", k);
	}
}

static struct node *pick_own_dir(struct thr *t)
{
	return t->dirs[rndn(t, (uint64_t)t->ndirs)];
}

/* A directory to work in: usually the own subtree (no lock), sometimes a
 * shared one (its lock is held on return: *lock set). */
static struct node *pick_dir(struct thr *t, pthread_mutex_t **lock)
{
	*lock = NULL;
	if (!chance(t, 15))
		return pick_own_dir(t);
	struct shared_dir *s = &g_shared[rndn(t, NSHARED)];
	pthread_mutex_lock(&s->lock);
	*lock = &s->lock;
	return s->dir;
}

static void unlock(pthread_mutex_t *lock)
{
	if (lock)
		pthread_mutex_unlock(lock);
}

/* A random entry of d (NULL if empty); type filter: 0 any, else S_IFxxx. */
static struct dent *pick_entry(struct thr *t, struct node *d, uint32_t type)
{
	if (!d->nents)
		return NULL;
	int start = (int)rndn(t, (uint64_t)d->nents);
	for (int i = 0; i < d->nents; i++) {
		struct dent *e = &d->ents[(start + i) % d->nents];
		if (!type || (e->n->mode & S_IFMT) == type)
			return e;
	}
	return NULL;
}

/* A regular file in the own subtree or a shared dir; *lock as pick_dir. */
static struct dent *pick_file(struct thr *t, pthread_mutex_t **lock, struct node **dir)
{
	for (int tries = 0; tries < 6; tries++) {
		struct node *d = pick_dir(t, lock);
		struct dent *e = pick_entry(t, d, S_IFREG);
		if (e) {
			*dir = d;
			return e;
		}
		unlock(*lock);
	}
	*lock = NULL;
	return NULL;
}

static uint32_t rnd_perm(struct thr *t)
{
	return (uint32_t)rndn(t, 01000) | (chance(t, 10) ? 01000u : 0);
}

/* ------------------------------------------------------------ namespace ops */

/* After a successful create-like call: check st, add the node. */
static struct node *created(struct thr *t, struct node *d, const char *name, uint32_t mode,
			    const struct uext4_stat *st, const char *op)
{
	struct node *n = node_new(st->ino, mode, t->uid, t->gid);
	char what[400];
	snprintf(what, sizeof(what), "%s %s/%s", op, dir_path(d), name);
	check_stat(t, what, n, st);
	TRACE(t, "  -> ino %llu", (unsigned long long)st->ino);
	dent_add(d, name, n);
	if (S_ISDIR(mode))
		d->nlink++;
	return n;
}

static void op_create(struct thr *t)
{
	pthread_mutex_t *lock;
	struct node *d = pick_dir(t, &lock);
	char name[300];
	pick_name(t, name, sizeof(name));
	uint32_t mode = S_IFREG | rnd_perm(t);
	struct uext4_stat st;
	TRACE(t, "create %s/%s", dir_path(d), name);
	probe(t, d, name, "before create");
	int r = uext4_create(g_fs, d->ino, name, mode, &st);
	if (dent_find(d, name)) {
		if (r != -EEXIST)
			FAIL(t, "create %s/%s (exists): %s, want EEXIST", dir_path(d), name,
			     err_name(r));
	} else if (r < 0) {
		FAIL(t, "create %s/%s: %s", dir_path(d), name, err_name(r));
	} else {
		created(t, d, name, mode, &st, "create");
	}
	probe(t, d, name, "after create");
	unlock(lock);
}

static void op_mkdir(struct thr *t)
{
	struct node *d = pick_own_dir(t);
	char name[300];
	pick_name(t, name, sizeof(name));
	uint32_t mode = S_IFDIR | rnd_perm(t) | 0700;
	struct uext4_stat st;
	TRACE(t, "mkdir %s/%s", dir_path(d), name);
	probe(t, d, name, "before mkdir");
	int r = uext4_mkdir(g_fs, d->ino, name, mode, &st);
	if (dent_find(d, name)) {
		if (r != -EEXIST)
			FAIL(t, "mkdir %s/%s (exists): %s, want EEXIST", dir_path(d), name,
			     err_name(r));
	} else if (r < 0) {
		FAIL(t, "mkdir %s/%s: %s", dir_path(d), name, err_name(r));
	} else {
		struct node *n = created(t, d, name, mode, &st, "mkdir");
		thr_add_dir(t, n);
		check_getattr(t, "mkdir: parent", d);
	}
	probe(t, d, name, "after mkdir");
}

static void op_mknod(struct thr *t)
{
	struct node *d = pick_own_dir(t);
	char name[300];
	pick_name(t, name, sizeof(name));
	static const uint32_t types[] = { S_IFCHR, S_IFBLK, S_IFIFO, S_IFSOCK, S_IFREG };
	uint32_t mode = types[rndn(t, 5)] | rnd_perm(t);
	uint64_t rdev = 0;
	if (S_ISCHR(mode) || S_ISBLK(mode)) {
		unsigned ma = chance(t, 50) ? (unsigned)rndn(t, 256) : (unsigned)rndn(t, 4096);
		unsigned mi = chance(t, 50) ? (unsigned)rndn(t, 256) : (unsigned)rndn(t, 1u << 20);
		rdev = makedev(ma, mi);
	}
	struct uext4_stat st;
	TRACE(t, "mknod %s/%s %o %u:%u", dir_path(d), name, mode, major(rdev), minor(rdev));
	probe(t, d, name, "before mknod");
	int r = uext4_mknod(g_fs, d->ino, name, mode, rdev, &st);
	if (dent_find(d, name)) {
		if (r != -EEXIST)
			FAIL(t, "mknod %s/%s (exists): %s, want EEXIST", dir_path(d), name,
			     err_name(r));
	} else if (r < 0) {
		FAIL(t, "mknod %s/%s mode %o: %s", dir_path(d), name, mode, err_name(r));
	} else {
		struct node *n = node_new(st.ino, mode, t->uid, t->gid);
		n->rdev = rdev;
		check_stat(t, "mknod", n, &st);
		dent_add(d, name, n);
	}
	probe(t, d, name, "after mknod");
}

static void op_symlink(struct thr *t)
{
	struct node *d = pick_own_dir(t);
	char name[300], target[4100];
	pick_name(t, name, sizeof(name));
	size_t len;
	switch (rndn(t, 3)) {
	case 0: len = 1 + rndn(t, 59); break;           /* fast: in i_block */
	case 1: len = 60 + rndn(t, 90); break;          /* one block */
	default: len = 150 + rndn(t, 3851); break;      /* long: up to 4000 */
	}
	for (size_t i = 0; i < len; i++)
		target[i] = (char)(i % 17 == 16 ? '/' : 'a' + (char)rndn(t, 26));
	target[len] = 0;
	struct uext4_stat st;
	TRACE(t, "symlink %s/%s len %zu", dir_path(d), name, len);
	probe(t, d, name, "before symlink");
	int r = uext4_symlink(g_fs, d->ino, name, target, &st);
	if (dent_find(d, name)) {
		if (r != -EEXIST && !(r == -ENAMETOOLONG && len + 1 > g_bsize))
			FAIL(t, "symlink %s/%s (exists): %s, want EEXIST", dir_path(d), name,
			     err_name(r));
	} else if (len + 1 > g_bsize) {
		if (r != -ENAMETOOLONG)
			FAIL(t, "symlink %s/%s of %zu bytes (block %u): %s, want ENAMETOOLONG",
			     dir_path(d), name, len, g_bsize, err_name(r));
	} else if (r < 0) {
		FAIL(t, "symlink %s/%s len %zu: %s", dir_path(d), name, len, err_name(r));
	} else {
		struct node *n = node_new(st.ino, S_IFLNK | 0777, t->uid, t->gid);
		n->target = strdup(target);
		n->tlen = len;
		check_stat(t, "symlink", n, &st);
		dent_add(d, name, n);
		check_symlink(t, n, "symlink");
	}
	probe(t, d, name, "after symlink");
}

static void op_link(struct thr *t)
{
	struct node *sd = pick_own_dir(t);
	struct dent *e = pick_entry(t, sd, 0);
	if (!e)
		return;
	struct node *n = e->n, *d = pick_own_dir(t);
	char name[300];
	pick_name(t, name, sizeof(name));
	struct uext4_stat st;
	TRACE(t, "link %s/%s -> %s/%s", dir_path(sd), e->name, dir_path(d), name);
	probe(t, d, name, "before link");
	int r = uext4_link(g_fs, n->ino, d->ino, name, &st);
	if (S_ISDIR(n->mode)) {
		if (r != -EPERM && r != -EISDIR)
			FAIL(t, "link of directory ino %llu: %s, want EPERM",
			     (unsigned long long)n->ino, err_name(r));
	} else if (dent_find(d, name)) {
		if (r != -EEXIST)
			FAIL(t, "link to %s/%s (exists): %s, want EEXIST", dir_path(d), name,
			     err_name(r));
	} else if (r < 0) {
		FAIL(t, "link ino %llu to %s/%s: %s", (unsigned long long)n->ino, dir_path(d),
		     name, err_name(r));
	} else {
		n->nlink++;
		check_stat(t, "link", n, &st);
		dent_add(d, name, n);
	}
	probe(t, d, name, "after link");
}

static void op_unlink(struct thr *t)
{
	pthread_mutex_t *lock;
	struct node *d = pick_dir(t, &lock);
	struct dent *e = chance(t, 85) ? pick_entry(t, d, 0) : NULL;
	char name[300];
	if (e)
		snprintf(name, sizeof(name), "%s", e->name);
	else
		pick_name(t, name, sizeof(name));
	e = dent_find(d, name);
	TRACE(t, "unlink %s/%s (ino %llu)", dir_path(d), name,
	      e ? (unsigned long long)e->n->ino : 0ull);
	probe(t, d, name, "before unlink");
	int r = uext4_unlink(g_fs, d->ino, name);
	if (!e) {
		if (r != -ENOENT)
			FAIL(t, "unlink %s/%s (missing): %s, want ENOENT", dir_path(d), name,
			     err_name(r));
	} else if (S_ISDIR(e->n->mode)) {
		if (r != -EISDIR)
			FAIL(t, "unlink of directory %s/%s: %s, want EISDIR", dir_path(d), name,
			     err_name(r));
	} else if (r < 0) {
		FAIL(t, "unlink %s/%s: %s", dir_path(d), name, err_name(r));
	} else {
		struct node *n = e->n;
		dent_del(d, e);
		if (n->nlink > 1) {
			n->nlink--;
			check_getattr(t, "unlink: remaining link", n);
		} else {
			struct uext4_stat st;
			r = uext4_lookup(g_fs, d->ino, name, &st);
			if (r != -ENOENT)
				FAIL(t, "lookup %s/%s after unlink: %s, want ENOENT", dir_path(d),
				     name, err_name(r));
			node_unref(t, n);
		}
	}
	probe(t, d, name, "after unlink");
	unlock(lock);
}

static void op_rmdir(struct thr *t)
{
	struct node *d = pick_own_dir(t);
	struct dent *e = chance(t, 85) ? pick_entry(t, d, chance(t, 70) ? S_IFDIR : 0) : NULL;
	char name[300];
	if (e)
		snprintf(name, sizeof(name), "%s", e->name);
	else
		pick_name(t, name, sizeof(name));
	e = dent_find(d, name);
	TRACE(t, "rmdir %s/%s (ino %llu)", dir_path(d), name,
	      e ? (unsigned long long)e->n->ino : 0ull);
	probe(t, d, name, "before rmdir");
	int r = uext4_rmdir(g_fs, d->ino, name);
	if (!e) {
		if (r != -ENOENT)
			FAIL(t, "rmdir %s/%s (missing): %s, want ENOENT", dir_path(d), name,
			     err_name(r));
	} else if (!S_ISDIR(e->n->mode)) {
		if (r != -ENOTDIR)
			FAIL(t, "rmdir of non-directory %s/%s: %s, want ENOTDIR", dir_path(d), name,
			     err_name(r));
	} else if (e->n->nents) {
		if (r != -ENOTEMPTY)
			FAIL(t, "rmdir of non-empty %s/%s: %s, want ENOTEMPTY", dir_path(d), name,
			     err_name(r));
	} else if (r < 0) {
		FAIL(t, "rmdir %s/%s: %s", dir_path(d), name, err_name(r));
	} else {
		struct node *n = e->n;
		dent_del(d, e);
		d->nlink--;
		node_unref(t, n);
		check_getattr(t, "rmdir: parent", d);
	}
	probe(t, d, name, "after rmdir");
}

/* ------------------------------------------------------------ rename */

/* A bit per errno a model may expect (sets of allowed errors). */
static uint64_t E_BIT(int e)
{
	static const int known[] = { ENOENT, EEXIST, EINVAL, ENOTEMPTY, ENOTDIR, EISDIR,
				     EOPNOTSUPP, ENOSPC, ENODATA, EPERM };
	for (unsigned i = 0; i < sizeof(known) / sizeof(known[0]); i++)
		if (known[i] == e)
			return 1ull << i;
	return 1ull << 63;
}

/* Errors rename(od/on -> nd/nn, flags) may give per the model (bit set; when
 * several apply, any of them is accepted); 0: must succeed.  *noop: the call
 * succeeds without changing anything (both names are the same inode);
 * *may_noop: that success is accepted instead of the errors (NOREPLACE onto
 * the same inode: the kernel says EEXIST, a no-op is fine too). */
static uint64_t rename_errors(struct node *od, const char *on, struct node *nd, const char *nn,
			      unsigned flags, bool *noop, bool *may_noop)
{
	struct dent *o = dent_find(od, on), *n = dent_find(nd, nn);
	uint64_t errs = 0;
	*noop = *may_noop = false;
	if (!o)
		return E_BIT(ENOENT);
	if ((flags & UEXT4_RENAME_EXCHANGE) && !n)
		return E_BIT(ENOENT) |
		       (S_ISDIR(o->n->mode) && is_ancestor(o->n, nd) ? E_BIT(EINVAL) : 0);
	if ((flags & UEXT4_RENAME_NOREPLACE) && n) {
		errs |= E_BIT(EEXIST);
		*may_noop = n->n == o->n;
	}
	if (S_ISDIR(o->n->mode) && is_ancestor(o->n, nd))
		errs |= E_BIT(EINVAL);
	if (n && (flags & UEXT4_RENAME_EXCHANGE) && S_ISDIR(n->n->mode) && is_ancestor(n->n, od))
		errs |= E_BIT(EINVAL);
	if (n && !(flags & UEXT4_RENAME_EXCHANGE) && n->n != o->n) {
		if (is_ancestor(n->n, od))
			errs |= E_BIT(ENOTEMPTY) | E_BIT(EINVAL);
		if (S_ISDIR(o->n->mode) && !S_ISDIR(n->n->mode))
			errs |= E_BIT(ENOTDIR);
		if (!S_ISDIR(o->n->mode) && S_ISDIR(n->n->mode))
			errs |= E_BIT(EISDIR);
		if (S_ISDIR(o->n->mode) && S_ISDIR(n->n->mode) && n->n->nents)
			errs |= E_BIT(ENOTEMPTY);
	}
	if (!errs && n && n->n == o->n)
		*noop = true;
	return errs;
}

/* Move a directory node between parents: fix nlink of both. */
static void moved_dir(struct node *n, struct node *from, struct node *to)
{
	if (!S_ISDIR(n->mode) || from == to)
		return;
	from->nlink--;
	to->nlink++;
}

static void rename_apply(struct thr *t, struct node *od, const char *on, struct node *nd,
			 const char *nn, unsigned flags)
{
	struct dent *o = dent_find(od, on), *n = dent_find(nd, nn);
	struct node *on_ = o->n;
	if (flags & UEXT4_RENAME_EXCHANGE) {
		struct node *nn_ = n->n;
		o->n = nn_;
		n->n = on_;
		moved_dir(on_, od, nd);
		moved_dir(nn_, nd, od);
		if (S_ISDIR(on_->mode)) {
			on_->parent = nd;
			free(on_->dname);
			on_->dname = strdup(nn);
		}
		if (S_ISDIR(nn_->mode)) {
			nn_->parent = od;
			free(nn_->dname);
			nn_->dname = strdup(on);
		}
		od->mtime_known = nd->mtime_known = false;
		return;
	}
	if (n) {
		struct node *victim = n->n;
		dent_del(nd, n);
		if (S_ISDIR(victim->mode))
			nd->nlink--;
		node_unref(t, victim);
		o = dent_find(od, on); /* dent_del may have moved it */
	}
	dent_del(od, o);
	dent_add(nd, nn, on_);
	moved_dir(on_, od, nd);
	if (flags & UEXT4_RENAME_WHITEOUT) {
		/* The old name now holds a whiteout: a new chrdev 0/0, mode 0. */
		struct uext4_stat st;
		int r = uext4_lookup(g_fs, od->ino, on, &st);
		if (r < 0) {
			FAIL(t, "lookup of the whiteout %s/%s: %s", dir_path(od), on, err_name(r));
			return;
		}
		struct node *wh = node_new(st.ino, S_IFCHR, t->uid, t->gid);
		check_stat(t, "whiteout", wh, &st);
		dent_add(od, on, wh);
	}
}

static void do_rename_checked(struct thr *t, struct node *od, const char *on, struct node *nd,
			      const char *nn, unsigned flags);

/* A rename, with both names (and ".." of the directories that may move)
 * probed before and after it. */
static void do_rename(struct thr *t, struct node *od, const char *on, struct node *nd,
		      const char *nn, unsigned flags)
{
	struct dent *o = dent_find(od, on), *n = dent_find(nd, nn);
	struct node *src = o ? o->n : NULL;
	struct node *other = n && (flags & UEXT4_RENAME_EXCHANGE) ? n->n : NULL;
	probe(t, od, on, "before rename (old name)");
	probe(t, nd, nn, "before rename (new name)");
	if (src && S_ISDIR(src->mode))
		probe_dotdot(t, src, "before rename");
	if (other && S_ISDIR(other->mode))
		probe_dotdot(t, other, "before rename");
	do_rename_checked(t, od, on, nd, nn, flags);
	probe(t, od, on, "after rename (old name)");
	probe(t, nd, nn, "after rename (new name)");
	if (src && S_ISDIR(src->mode))
		probe_dotdot(t, src, "after rename");
	if (other && S_ISDIR(other->mode))
		probe_dotdot(t, other, "after rename (exchanged)");
}

static void do_rename_checked(struct thr *t, struct node *od, const char *on, struct node *nd,
			      const char *nn, unsigned flags)
{
	bool noop, may_noop;
	uint64_t errs = rename_errors(od, on, nd, nn, flags, &noop, &may_noop);
	char from[4200];
	snprintf(from, sizeof(from), "%s/%s", dir_path(od), on);
	TRACE(t, "rename %s (ino %llu) -> %s/%s (ino %llu) flags %u", from,
	      dent_find(od, on) ? (unsigned long long)dent_find(od, on)->n->ino : 0ull,
	      dir_path(nd), nn,
	      dent_find(nd, nn) ? (unsigned long long)dent_find(nd, nn)->n->ino : 0ull, flags);
	int r = uext4_rename(g_fs, od->ino, on, nd->ino, nn, flags);
	if (errs && !(r == 0 && may_noop)) {
		if (r >= 0 || !(errs & E_BIT(-r)))
			FAIL(t, "rename %s -> %s/%s flags %u: %s, want an error (mask %#llx)", from,
			     dir_path(nd), nn, flags, err_name(r), (unsigned long long)errs);
		return;
	}
	if (r < 0) {
		FAIL(t, "rename %s -> %s/%s flags %u: %s", from, dir_path(nd), nn, flags,
		     err_name(r));
		return;
	}
	if (noop || errs)
		return;
	struct node *moved = dent_find(od, on)->n;
	rename_apply(t, od, on, nd, nn, flags);
	check_getattr(t, "rename: moved inode", moved);
	if (S_ISDIR(moved->mode) && chance(t, 30))
		check_readdir(t, moved); /* ".." must follow */
	if (od != nd) {
		check_getattr(t, "rename: old dir", od);
		check_getattr(t, "rename: new dir", nd);
	}
}

static unsigned rnd_rename_flags(struct thr *t)
{
	unsigned k = (unsigned)rndn(t, 100);
	if (k >= 95)
		return UEXT4_RENAME_WHITEOUT | UEXT4_RENAME_NOREPLACE;
	if (k >= 88)
		return UEXT4_RENAME_WHITEOUT;
	return k < 60 ? 0 : k < 75 ? UEXT4_RENAME_NOREPLACE : UEXT4_RENAME_EXCHANGE;
}

/* Is this entry safe to move between the own subtree and a shared dir? */
static bool movable(const struct dent *e)
{
	return !e || (!S_ISDIR(e->n->mode) && e->n->nlink == 1);
}

static void op_rename(struct thr *t)
{
	char on[300], nn[300];
	unsigned kind = (unsigned)rndn(t, 10), flags = rnd_rename_flags(t);
	pick_name(t, nn, sizeof(nn));
	if (kind <= 5) { /* own -> own: any type, across dirs, ".." changes */
		struct node *od = pick_own_dir(t), *nd = chance(t, 40) ? od : pick_own_dir(t);
		struct dent *e = chance(t, 90) ? pick_entry(t, od, 0) : NULL;
		if (e)
			snprintf(on, sizeof(on), "%s", e->name);
		else
			pick_name(t, on, sizeof(on));
		struct dent *ne = chance(t, 40) ? pick_entry(t, nd, 0) : NULL;
		if (ne)
			snprintf(nn, sizeof(nn), "%s", ne->name);
		do_rename(t, od, on, nd, nn, flags);
		return;
	}
	if (kind == 9) { /* a directory into its own subtree: EINVAL */
		struct node *d = pick_own_dir(t);
		if (d == t->home)
			return;
		struct node *target = pick_own_dir(t);
		if (!is_ancestor(d, target))
			target = d;
		do_rename(t, d->parent, d->dname, target, nn, flags & ~UEXT4_RENAME_EXCHANGE);
		return;
	}
	/* own <-> shared, shared <-> shared: only single-link non-directories move */
	struct shared_dir *s1 = &g_shared[rndn(t, NSHARED)], *s2 = &g_shared[rndn(t, NSHARED)];
	struct node *od, *nd;
	if (kind == 8) {
		if (s1 > s2) {
			struct shared_dir *x = s1;
			s1 = s2;
			s2 = x;
		}
		pthread_mutex_lock(&s1->lock);
		if (s2 != s1)
			pthread_mutex_lock(&s2->lock);
		od = s1->dir;
		nd = s2->dir;
		if (chance(t, 50)) {
			struct node *x = od;
			od = nd;
			nd = x;
		}
	} else {
		pthread_mutex_lock(&s1->lock);
		s2 = s1;
		od = kind == 6 ? pick_own_dir(t) : s1->dir;
		nd = kind == 6 ? s1->dir : pick_own_dir(t);
	}
	struct dent *e = pick_entry(t, od, 0);
	struct dent *ne = chance(t, 40) ? pick_entry(t, nd, 0) : NULL;
	if (ne)
		snprintf(nn, sizeof(nn), "%s", ne->name);
	ne = dent_find(nd, nn);
	if (e && movable(e) && (!(flags & UEXT4_RENAME_EXCHANGE) || movable(ne))) {
		snprintf(on, sizeof(on), "%s", e->name);
		do_rename(t, od, on, nd, nn, flags);
	}
	if (s2 != s1)
		pthread_mutex_unlock(&s2->lock);
	pthread_mutex_unlock(&s1->lock);
}

/* ------------------------------------------------------------ attributes */

static struct timespec rnd_time(struct thr *t)
{
	struct timespec ts;
	switch (rndn(t, 4)) {
	case 0: ts.tv_sec = (time_t)rndn(t, 1u << 31); break;                 /* 1970..2038 */
	case 1: ts.tv_sec = (time_t)((1ull << 31) + rndn(t, 3ull << 31)); break; /* after 2038 */
	case 2: ts.tv_sec = -(time_t)rndn(t, 1u << 31); break;                /* before 1970 */
	default: ts.tv_sec = 1700000000 + (time_t)rndn(t, 100000000);
	}
	ts.tv_nsec = (long)rndn(t, 1000000000);
	return ts;
}

static const uint32_t g_ids[] = { 0, 1, 100, 1000, 1001, 65534, 100000, 4000000000u };

static void op_setattr(struct thr *t)
{
	pthread_mutex_t *lock;
	struct node *d = pick_dir(t, &lock);
	struct dent *e = pick_entry(t, d, 0);
	if (!e) {
		unlock(lock);
		return;
	}
	struct node *n = e->n;
	struct uext4_setattr a = { 0 };
	if (chance(t, 30) && !xa_find(n, ACL_NAME)) {
		a.valid |= UEXT4_SET_MODE;
		a.mode = rnd_perm(t) | (S_ISDIR(n->mode) ? 0700 : 0);
	}
	if (chance(t, 20)) {
		a.valid |= UEXT4_SET_UID;
		a.uid = g_ids[rndn(t, 8)];
	}
	if (chance(t, 20)) {
		a.valid |= UEXT4_SET_GID;
		a.gid = g_ids[rndn(t, 8)];
	}
	if (S_ISREG(n->mode) && chance(t, 40)) {
		a.valid |= UEXT4_SET_SIZE;
		a.size = chance(t, 50) ? rndn(t, n->size + 1) : rnd_log(t, MAX_FILE / 2);
		if (atomic_load(&g_model_bytes) > DATA_BUDGET)
			a.size = rndn(t, 4096);
	}
	if (chance(t, 40))
		a.valid |= chance(t, 80) ? UEXT4_SET_ATIME : UEXT4_SET_ATIME_NOW;
	if (chance(t, 40))
		a.valid |= chance(t, 80) ? UEXT4_SET_MTIME : UEXT4_SET_MTIME_NOW;
	a.atime = rnd_time(t);
	a.mtime = rnd_time(t);
	struct uext4_stat st;
	TRACE(t, "setattr ino %llu valid %#x mode %o uid %u gid %u size %llu",
	      (unsigned long long)n->ino, a.valid, a.mode, a.uid, a.gid,
	      (unsigned long long)a.size);
	int r = uext4_setattr(g_fs, n->ino, &a, &st);
	if (r < 0) {
		FAIL(t, "setattr ino %llu valid %#x: %s", (unsigned long long)n->ino, a.valid,
		     err_name(r));
		unlock(lock);
		return;
	}
	if (a.valid & UEXT4_SET_MODE)
		n->mode = (n->mode & S_IFMT) | (a.mode & 07777);
	if (a.valid & UEXT4_SET_UID)
		n->uid = a.uid;
	if (a.valid & UEXT4_SET_GID)
		n->gid = a.gid;
	if (a.valid & UEXT4_SET_SIZE)
		data_resize(n, a.size);
	if (a.valid & UEXT4_SET_ATIME_NOW)
		n->atime_known = false;
	if (a.valid & UEXT4_SET_MTIME_NOW)
		n->mtime_known = false;
	if (a.valid & UEXT4_SET_ATIME) {
		n->atime = a.atime;
		n->atime_known = true;
	}
	if (a.valid & UEXT4_SET_MTIME) {
		n->mtime = a.mtime;
		n->mtime_known = true;
	}
	check_stat(t, "setattr result", n, &st);
	check_getattr(t, "getattr after setattr", n);
	if ((a.valid & UEXT4_SET_SIZE) && chance(t, 30))
		check_file_data(t, n, "after truncate");
	unlock(lock);
}

/* ------------------------------------------------------------ data */

static uext4_file *open_rw(struct thr *t, struct node *n, int flags)
{
	uext4_file *f;
	int r = uext4_open(g_fs, n->ino, O_RDWR | flags, &f);
	if (r < 0) {
		FAIL(t, "open ino %llu O_RDWR: %s", (unsigned long long)n->ino, err_name(r));
		return NULL;
	}
	return f;
}

static uint64_t rnd_offset(struct thr *t, const struct node *n, uint64_t len)
{
	uint64_t off;
	switch (rndn(t, 5)) {
	case 0: off = n->size ? rndn(t, n->size) : 0; break;     /* overwrite */
	case 1: off = n->size; break;                             /* append */
	case 2: off = n->size + rnd_log(t, 4u << 20); break;      /* sparse */
	case 3: off = rndn(t, MAX_FILE); break;
	default: off = rndn(t, 64) * g_bsize + (chance(t, 50) ? 0 : rndn(t, g_bsize));
	}
	if (off + len > MAX_FILE)
		off = MAX_FILE - len;
	return off;
}

static void op_pwrite(struct thr *t)
{
	pthread_mutex_t *lock;
	struct node *d;
	struct dent *e = pick_file(t, &lock, &d);
	if (!e)
		return;
	struct node *n = e->n;
	uint64_t len = rnd_log(t, MAX_WRITE);
	bool append = chance(t, 8);
	uint64_t off = rnd_offset(t, n, len);
	if (append && n->size + len > MAX_FILE)
		append = false;
	if (atomic_load(&g_model_bytes) > DATA_BUDGET) {
		/* the model is big enough: overwrite inside the file, grow nothing */
		append = false;
		off = n->size ? rndn(t, n->size) : 0;
		len = 1 + rndn(t, n->size - off < 65536 ? n->size - off : 65536);
	}
	uext4_file *f = open_rw(t, n, append ? O_APPEND : 0);
	if (!f) {
		unlock(lock);
		return;
	}
	fill_random(t, t->buf, len);
	TRACE(t, "pwrite ino %llu off %llu len %llu%s", (unsigned long long)n->ino,
	      (unsigned long long)off, (unsigned long long)len, append ? " append" : "");
	ssize_t w = uext4_pwrite(f, t->buf, len, off);
	if (append)
		off = n->size;
	if (w != (ssize_t)len) {
		FAIL(t, "pwrite ino %llu [%llu,+%llu): %s", (unsigned long long)n->ino,
		     (unsigned long long)off, (unsigned long long)len, err_name((int)w));
		if (w > 0)
			data_write(n, t->buf, (uint64_t)w, off);
	} else {
		data_write(n, t->buf, len, off);
	}
	/* read back the written range and its surroundings */
	uint64_t lo = off > 5000 ? off - 5000 : 0;
	check_range(t, f, n, lo, off + len + 5000 - lo, "pwrite readback");
	if (chance(t, 20))
		check_range(t, f, n, rndn(t, n->size + 100), rnd_log(t, MAX_WRITE), "random read");
	if (chance(t, 5)) {
		int r = uext4_fsync(f, (int)rndn(t, 2));
		if (r < 0)
			FAIL(t, "fsync ino %llu: %s", (unsigned long long)n->ino, err_name(r));
	}
	uext4_release(f);
	if (chance(t, 20))
		check_getattr(t, "after pwrite", n);
	unlock(lock);
}

static const int g_falloc_modes[] = {
	0, FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
	FALLOC_FL_ZERO_RANGE, FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE,
	FALLOC_FL_COLLAPSE_RANGE, FALLOC_FL_INSERT_RANGE,
	FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
};

static void op_fallocate(struct thr *t)
{
	pthread_mutex_t *lock;
	struct node *d;
	struct dent *e = pick_file(t, &lock, &d);
	if (!e)
		return;
	struct node *n = e->n;
	struct uext4_stat st;
	int r = uext4_getattr(g_fs, n->ino, &st);
	if (r < 0) {
		FAIL(t, "getattr ino %llu: %s", (unsigned long long)n->ino, err_name(r));
		unlock(lock);
		return;
	}
	bool extents = st.flags & FL_EXTENTS;
	int mode = g_falloc_modes[rndn(t, 8)];
	uint64_t off, len;
	bool shift = mode == FALLOC_FL_COLLAPSE_RANGE || mode == FALLOC_FL_INSERT_RANGE;
	if (shift) {
		uint64_t blocks = n->size / g_bsize;
		off = rndn(t, blocks + 1) * g_bsize;
		len = (1 + rndn(t, 16)) * g_bsize;
		if (chance(t, 10))
			off += 1; /* misaligned: EINVAL */
	} else {
		off = chance(t, 50) ? rndn(t, n->size + 1) : rndn(t, MAX_FILE / 2);
		len = 1 + rnd_log(t, 2u << 20);
	}
	if (off + len > MAX_FILE - (shift ? 16 * g_bsize : 0))
		len = off < MAX_FILE / 2 ? MAX_FILE / 2 - off : 1;
	if (atomic_load(&g_model_bytes) > DATA_BUDGET && !(mode & FALLOC_FL_KEEP_SIZE))
		mode = FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE;
	/* what is allowed */
	uint64_t errs = 0;
	bool may_unsupported = !extents && !(mode & FALLOC_FL_PUNCH_HOLE);
	if (shift) {
		bool aligned = off % g_bsize == 0 && len % g_bsize == 0;
		if (mode == FALLOC_FL_COLLAPSE_RANGE && (!aligned || off + len >= n->size))
			errs |= E_BIT(EINVAL);
		if (mode == FALLOC_FL_INSERT_RANGE && (!aligned || off >= n->size))
			errs |= E_BIT(EINVAL);
		if (mode == FALLOC_FL_INSERT_RANGE && n->size + len > MAX_FILE) {
			unlock(lock); /* the model keeps files small */
			return;
		}
		if (errs)
			errs |= E_BIT(EOPNOTSUPP); /* not supported at all is allowed too */
	}
	uext4_file *f = open_rw(t, n, 0);
	if (!f) {
		unlock(lock);
		return;
	}
	TRACE(t, "fallocate ino %llu mode %#x off %llu len %llu (size %llu, extents %d)",
	      (unsigned long long)n->ino, mode, (unsigned long long)off, (unsigned long long)len,
	      (unsigned long long)n->size, extents);
	r = uext4_fallocate(f, mode, off, len);
	if (errs) {
		if (r >= 0 || !(errs & E_BIT(-r)))
			FAIL(t, "fallocate ino %llu mode %#x [%llu,+%llu) size %llu: %s, want an error "
			     "(mask %#llx)", (unsigned long long)n->ino, mode, (unsigned long long)off,
			     (unsigned long long)len, (unsigned long long)n->size, err_name(r),
			     (unsigned long long)errs);
	} else if (r == -EOPNOTSUPP && may_unsupported) {
		/* block-mapped or inline file: the kernel refuses too */
	} else if (r == -EOPNOTSUPP && shift) {
		/* collapse/insert: not required of the library yet; counted */
		atomic_fetch_add(&g_shift_unsupported, 1);
	} else if (r < 0) {
		FAIL(t, "fallocate ino %llu mode %#x [%llu,+%llu) size %llu (flags %#x): %s",
		     (unsigned long long)n->ino, mode, (unsigned long long)off,
		     (unsigned long long)len, (unsigned long long)n->size, st.flags, err_name(r));
	} else {
		n->mtime_known = false;
		if (mode == 0) {
			if (off + len > n->size)
				data_resize(n, off + len);
		} else if (mode & FALLOC_FL_PUNCH_HOLE) {
			data_zero(n, off, len);
		} else if (mode & FALLOC_FL_ZERO_RANGE) {
			data_zero(n, off, len);
			if (!(mode & FALLOC_FL_KEEP_SIZE) && off + len > n->size)
				data_resize(n, off + len);
		} else if (mode == FALLOC_FL_COLLAPSE_RANGE) {
			memmove(n->data + off, n->data + off + len, n->size - off - len);
			data_resize(n, n->size - len);
		} else if (mode == FALLOC_FL_INSERT_RANGE) {
			uint64_t old = n->size;
			data_resize(n, old + len);
			memmove(n->data + off + len, n->data + off, old - off);
			memset(n->data + off, 0, len);
		}
		/* KEEP_SIZE alone changes nothing visible */
	}
	if (chance(t, 50))
		check_file_data(t, n, "after fallocate");
	else
		check_range(t, f, n, off > 4096 ? off - 4096 : 0, len + 8192, "after fallocate");
	uext4_release(f);
	check_getattr(t, "after fallocate", n);
	unlock(lock);
}

/* ------------------------------------------------------------ xattrs */

static size_t make_acl(struct thr *t, const struct node *n, unsigned char *v)
{
	struct acl_ent { uint16_t tag, perm; uint32_t id; } e[8];
	int k = 0;
	uint32_t m = n->mode;
	e[k++] = (struct acl_ent){ 0x01, (uint16_t)((m >> 6) & 7), 0xFFFFFFFFu };
	uint32_t u = 1000 + (uint32_t)rndn(t, 10);
	e[k++] = (struct acl_ent){ 0x02, (uint16_t)rndn(t, 8), u };
	if (chance(t, 50))
		e[k++] = (struct acl_ent){ 0x02, (uint16_t)rndn(t, 8), u + 20 };
	e[k++] = (struct acl_ent){ 0x04, (uint16_t)rndn(t, 8), 0xFFFFFFFFu };
	if (chance(t, 50))
		e[k++] = (struct acl_ent){ 0x08, (uint16_t)rndn(t, 8), 2000 + (uint32_t)rndn(t, 10) };
	e[k++] = (struct acl_ent){ 0x10, (uint16_t)((m >> 3) & 7), 0xFFFFFFFFu };
	e[k++] = (struct acl_ent){ 0x20, (uint16_t)(m & 7), 0xFFFFFFFFu };
	uint32_t ver = 2;
	memcpy(v, &ver, 4); /* little-endian host */
	for (int i = 0; i < k; i++) {
		memcpy(v + 4 + 8 * i, &e[i].tag, 2);
		memcpy(v + 6 + 8 * i, &e[i].perm, 2);
		memcpy(v + 8 + 8 * i, &e[i].id, 4);
	}
	return 4 + 8 * (size_t)k;
}

static void op_xattr(struct thr *t)
{
	pthread_mutex_t *lock;
	struct node *d = pick_dir(t, &lock);
	struct dent *e = pick_entry(t, d, 0);
	if (!e) {
		unlock(lock);
		return;
	}
	struct node *n = e->n;
	bool user_ok = S_ISREG(n->mode) || S_ISDIR(n->mode);
	char name[64];
	unsigned char val[65536];   /* values up to a block: 64 KiB blocks too */
	size_t len;
	unsigned what = (unsigned)rndn(t, 100);
	bool acl = what >= 90 && user_ok;
	if (acl) {
		snprintf(name, sizeof(name), "%s", ACL_NAME);
		len = make_acl(t, n, val);
	} else {
		if (user_ok && chance(t, 60))
			snprintf(name, sizeof(name), "user.k%u%s", (unsigned)rndn(t, 6),
				 chance(t, 20) ? "-a-longer-attribute-name" : "");
		else
			snprintf(name, sizeof(name), "trusted.t%u", (unsigned)rndn(t, 4));
		switch (rndn(t, 4)) {
		case 0: len = rndn(t, 8); break;
		case 1: len = 8 + rndn(t, 64); break;
		case 2: len = 100 + rndn(t, 300); break;
		default: len = g_bsize / 2 + rndn(t, g_bsize / 2);  /* about a block */
		}
		fill_random(t, val, len);
	}
	struct xa *old = xa_find(n, name);
	if (what < 60 || acl) {
		int flags = 0;
		if (!acl && chance(t, 30))
			flags = chance(t, 50) ? XATTR_CREATE : XATTR_REPLACE;
		size_t total = xa_disk_size(name, len);
		for (int i = 0; i < n->nxa; i++)
			if (strcmp(n->xa[i].name, name))
				total += xa_disk_size(n->xa[i].name, n->xa[i].len);
		size_t in_inode = g_isize > 128 + 40 ? g_isize - 128 - 32 - 8 : 0;
		bool must_fit = total + 64 <= g_bsize - 36;
		bool cannot_fit = !g_ea_inode && total > in_inode + g_bsize - 36;
		TRACE(t, "setxattr ino %llu %s len %zu flags %d (total %zu)",
		      (unsigned long long)n->ino, name, len, flags, total);
		int r = uext4_setxattr(g_fs, n->ino, name, val, len, flags);
		if ((flags & XATTR_CREATE) && old) {
			if (r != -EEXIST)
				FAIL(t, "setxattr CREATE ino %llu %s (exists): %s, want EEXIST",
				     (unsigned long long)n->ino, name, err_name(r));
		} else if ((flags & XATTR_REPLACE) && !old) {
			if (r != -ENODATA)
				FAIL(t, "setxattr REPLACE ino %llu %s (missing): %s, want ENODATA",
				     (unsigned long long)n->ino, name, err_name(r));
		} else if (cannot_fit) {
			if (r != -ENOSPC && r != -E2BIG)
				FAIL(t, "setxattr ino %llu %s len %zu (%zu bytes of xattrs cannot fit): "
				     "%s, want ENOSPC", (unsigned long long)n->ino, name, len, total,
				     err_name(r));
		} else if (r == -ENOSPC && !must_fit) {
			/* did not fit: allowed, nothing changed */
		} else if (r < 0) {
			FAIL(t, "setxattr ino %llu %s len %zu (total %zu): %s",
			     (unsigned long long)n->ino, name, len, total, err_name(r));
		} else {
			xa_set(n, name, val, len);
		}
	} else if (what < 80) {
		TRACE(t, "removexattr ino %llu %s", (unsigned long long)n->ino, name);
		int r = uext4_removexattr(g_fs, n->ino, name);
		if (!old) {
			if (r != -ENODATA)
				FAIL(t, "removexattr ino %llu %s (missing): %s, want ENODATA",
				     (unsigned long long)n->ino, name, err_name(r));
		} else if (r < 0) {
			FAIL(t, "removexattr ino %llu %s: %s", (unsigned long long)n->ino, name,
			     err_name(r));
		} else {
			xa_del(n, name);
		}
	} else if (old && old->len > 1) {
		/* too small a buffer: ERANGE; size query: the length */
		ssize_t r = uext4_getxattr(g_fs, n->ino, name, val, old->len - 1);
		if (r != -ERANGE)
			FAIL(t, "getxattr ino %llu %s into %zu bytes (value %zu): %s, want ERANGE",
			     (unsigned long long)n->ino, name, old->len - 1, old->len,
			     err_name((int)r));
		r = uext4_getxattr(g_fs, n->ino, name, NULL, 0);
		if (r != (ssize_t)old->len)
			FAIL(t, "getxattr ino %llu %s size query: %s, want %zu",
			     (unsigned long long)n->ino, name, err_name((int)r), old->len);
	} else if (!old) {
		ssize_t r = uext4_getxattr(g_fs, n->ino, name, val, sizeof(val));
		if (r != -ENODATA)
			FAIL(t, "getxattr ino %llu %s (missing): %s, want ENODATA",
			     (unsigned long long)n->ino, name, err_name((int)r));
	}
	check_xattrs(t, n, "after xattr op");
	if (acl)
		check_getattr(t, "after ACL", n);
	unlock(lock);
}

/* ------------------------------------------------------------ misc */

/* Unlink a file while it is open, then write and read through the handle. */
static void op_open_unlink(struct thr *t)
{
	struct node *d = pick_own_dir(t);
	char name[64];
	snprintf(name, sizeof(name), "open-unlinked-%u", t->uniq++);
	struct uext4_stat st;
	int r = uext4_create(g_fs, d->ino, name, S_IFREG | 0644, &st);
	if (r < 0) {
		FAIL(t, "create %s/%s: %s", dir_path(d), name, err_name(r));
		return;
	}
	struct node *n = node_new(st.ino, S_IFREG | 0644, t->uid, t->gid);
	uext4_file *f = open_rw(t, n, 0);
	if (!f) {
		node_free(n);
		return;
	}
	uint64_t len = rnd_log(t, 256 << 10);
	fill_random(t, t->buf, len);
	if (uext4_pwrite(f, t->buf, len, 0) != (ssize_t)len)
		FAIL(t, "pwrite ino %llu: %s", (unsigned long long)n->ino, uext4_last_error());
	data_write(n, t->buf, len, 0);
	TRACE(t, "unlink open %s/%s ino %llu", dir_path(d), name, (unsigned long long)n->ino);
	r = uext4_unlink(g_fs, d->ino, name);
	if (r < 0)
		FAIL(t, "unlink open file %s/%s: %s", dir_path(d), name, err_name(r));
	n->nlink = 0;
	d->mtime_known = false;
	uint64_t off = rndn(t, len + 100000);
	uint64_t len2 = rnd_log(t, 200000);
	fill_random(t, t->buf, len2);
	if (uext4_pwrite(f, t->buf, len2, off) != (ssize_t)len2)
		FAIL(t, "pwrite to unlinked ino %llu: %s", (unsigned long long)n->ino,
		     uext4_last_error());
	data_write(n, t->buf, len2, off);
	check_range(t, f, n, 0, n->size + 10, "unlinked open file");
	check_getattr(t, "unlinked open file", n);
	if (chance(t, 30) && uext4_fsync(f, 0) < 0)
		FAIL(t, "fsync of unlinked ino %llu: %s", (unsigned long long)n->ino,
		     uext4_last_error());
	uext4_release(f);
	node_free(n);
}

static void op_fsync(struct thr *t)
{
	if (chance(t, 10)) {
		int r = uext4_sync(g_fs);
		if (r < 0)
			FAIL(t, "sync: %s", err_name(r));
		return;
	}
	pthread_mutex_t *lock;
	struct node *d;
	struct dent *e = pick_file(t, &lock, &d);
	if (!e)
		return;
	uext4_file *f = open_rw(t, e->n, 0);
	if (f) {
		int r = uext4_fsync(f, (int)rndn(t, 2));
		if (r < 0)
			FAIL(t, "fsync ino %llu: %s", (unsigned long long)e->n->ino, err_name(r));
		uext4_release(f);
	}
	unlock(lock);
}

/* Reads checked against the model. */
static void op_check(struct thr *t)
{
	pthread_mutex_t *lock;
	struct node *d = pick_dir(t, &lock);
	struct dent *e = pick_entry(t, d, 0);
	switch (rndn(t, 6)) {
	case 0:
		check_readdir(t, d);
		break;
	case 1:
		if (e) {
			struct uext4_stat st;
			int r = uext4_lookup(g_fs, d->ino, e->name, &st);
			if (r < 0)
				FAIL(t, "lookup %s/%s: %s", dir_path(d), e->name, err_name(r));
			else
				check_stat(t, "lookup", e->n, &st);
		}
		break;
	case 2:
		if (e && S_ISREG(e->n->mode)) {
			uext4_file *f;
			if (uext4_open(g_fs, e->n->ino, O_RDONLY, &f) == 0) {
				check_range(t, f, e->n, rndn(t, e->n->size + 10),
					    rnd_log(t, MAX_WRITE), "random read");
				uext4_release(f);
				e->n->atime_known = false;
			} else {
				FAIL(t, "open ino %llu: %s", (unsigned long long)e->n->ino,
				     uext4_last_error());
			}
		} else if (e && S_ISLNK(e->n->mode)) {
			check_symlink(t, e->n, "readlink");
		}
		break;
	case 3:
		if (e)
			check_xattrs(t, e->n, "xattr check");
		break;
	case 4: {
		char name[300];
		pick_name(t, name, sizeof(name));
		struct uext4_stat st;
		int r = uext4_lookup(g_fs, d->ino, name, &st);
		struct dent *x = dent_find(d, name);
		if (!x && r != -ENOENT)
			FAIL(t, "lookup %s/%s (missing): %s, want ENOENT", dir_path(d), name,
			     err_name(r));
		else if (x && (r < 0 || st.ino != x->n->ino))
			FAIL(t, "lookup %s/%s: %s ino %llu, model %llu", dir_path(d), name,
			     err_name(r), (unsigned long long)st.ino, (unsigned long long)x->n->ino);
		break;
	}
	default:
		if (e)
			check_getattr(t, "getattr", e->n);
		check_getattr(t, "getattr dir", d);
	}
	unlock(lock);
}

/* Operations that must fail: ENOTDIR, ENAMETOOLONG, EISDIR (writing a dir). */
static void op_errors(struct thr *t)
{
	struct node *d = pick_own_dir(t);
	struct dent *e = pick_entry(t, d, 0);
	struct uext4_stat st;
	char name[300];
	int r;
	if (e && !S_ISDIR(e->n->mode)) {
		r = uext4_create(g_fs, e->n->ino, "x", S_IFREG | 0644, &st);
		if (r != -ENOTDIR)
			FAIL(t, "create in non-directory ino %llu: %s, want ENOTDIR",
			     (unsigned long long)e->n->ino, err_name(r));
		r = uext4_lookup(g_fs, e->n->ino, "x", &st);
		if (r != -ENOTDIR)
			FAIL(t, "lookup in non-directory ino %llu: %s, want ENOTDIR",
			     (unsigned long long)e->n->ino, err_name(r));
		r = uext4_mkdir(g_fs, e->n->ino, "x", S_IFDIR | 0755, &st);
		if (r != -ENOTDIR)
			FAIL(t, "mkdir in non-directory ino %llu: %s, want ENOTDIR",
			     (unsigned long long)e->n->ino, err_name(r));
	}
	memset(name, 'z', 256);
	name[256] = 0;
	r = uext4_create(g_fs, d->ino, name, S_IFREG | 0644, &st);
	if (r != -ENAMETOOLONG)
		FAIL(t, "create with a 256-byte name: %s, want ENAMETOOLONG", err_name(r));
	if (e && S_ISDIR(e->n->mode)) {
		uext4_file *f;
		r = uext4_open(g_fs, e->n->ino, O_RDWR, &f);
		if (r != -EISDIR) {
			FAIL(t, "open directory ino %llu O_RDWR: %s, want EISDIR",
			     (unsigned long long)e->n->ino, err_name(r));
			if (r == 0)
				uext4_release(f);
		}
	}
}

/* Many entries in one new directory (htree), then remove about half. */
static void op_bulk(struct thr *t)
{
	struct node *d = pick_own_dir(t);
	char name[300];
	snprintf(name, sizeof(name), "bulk-%u", t->uniq++);
	struct uext4_stat st;
	int r = uext4_mkdir(g_fs, d->ino, name, S_IFDIR | 0755, &st);
	if (r < 0) {
		FAIL(t, "mkdir %s/%s: %s", dir_path(d), name, err_name(r));
		return;
	}
	struct node *b = created(t, d, name, S_IFDIR | 0755, &st, "mkdir");
	thr_add_dir(t, b);
	unsigned count = 100 + (unsigned)rndn(t, 300);
	TRACE(t, "bulk %s/%s: %u entries", dir_path(d), name, count);
	for (unsigned i = 0; i < count && !atomic_load(&g_stop); i++) {
		int len = snprintf(name, sizeof(name), "entry-%05u-", i);
		int want = 12 + (int)rndn(t, 50);
		while (len < want)
			name[len++] = (char)('a' + i % 26);
		name[len] = 0;
		r = uext4_create(g_fs, b->ino, name, S_IFREG | 0600, &st);
		if (r < 0) {
			FAIL(t, "create %s/%s: %s", dir_path(b), name, err_name(r));
			break;
		}
		created(t, b, name, S_IFREG | 0600, &st, "create");
	}
	t->ops += count;
	check_readdir(t, b);
	for (int i = 0; i < b->nents && !atomic_load(&g_stop);) {
		if (!chance(t, 50)) {
			i++;
			continue;
		}
		snprintf(name, sizeof(name), "%s", b->ents[i].name);
		r = uext4_unlink(g_fs, b->ino, name);
		if (r < 0) {
			FAIL(t, "unlink %s/%s: %s", dir_path(b), name, err_name(r));
			break;
		}
		struct node *n = b->ents[i].n;
		dent_del(b, &b->ents[i]);
		node_unref(t, n);
	}
	check_readdir(t, b);
}

/* ------------------------------------------------------------ threads */

enum { OP_CREATE, OP_MKDIR, OP_MKNOD, OP_SYMLINK, OP_LINK, OP_UNLINK, OP_RMDIR, OP_RENAME,
       OP_SETATTR, OP_PWRITE, OP_FALLOC, OP_XATTR, OP_OPENUNLINK, OP_FSYNC, OP_CHECK,
       OP_ERRORS, OP_BULK, OP_N };
static const char *const g_op_names[OP_N] = {
	"create", "mkdir", "mknod", "symlink", "link", "unlink", "rmdir", "rename",
	"setattr", "pwrite", "fallocate", "xattr", "open-unlink", "fsync/sync", "check",
	"errors", "bulk",
};
/* weights per mille (--skip OP sets one to 0) */
static unsigned g_op_weight[OP_N] = {
	100, 45, 30, 40, 40, 80, 35, 110, 70, 140, 50, 80, 15, 20, 130, 14, 1,
};

static void run_op(struct thr *t, int op)
{
	switch (op) {
	case OP_CREATE: op_create(t); break;
	case OP_MKDIR: op_mkdir(t); break;
	case OP_MKNOD: op_mknod(t); break;
	case OP_SYMLINK: op_symlink(t); break;
	case OP_LINK: op_link(t); break;
	case OP_UNLINK: op_unlink(t); break;
	case OP_RMDIR: op_rmdir(t); break;
	case OP_RENAME: op_rename(t); break;
	case OP_SETATTR: op_setattr(t); break;
	case OP_PWRITE: op_pwrite(t); break;
	case OP_FALLOC: op_fallocate(t); break;
	case OP_XATTR: op_xattr(t); break;
	case OP_OPENUNLINK: op_open_unlink(t); break;
	case OP_FSYNC: op_fsync(t); break;
	case OP_CHECK: op_check(t); break;
	case OP_ERRORS: op_errors(t); break;
	default: op_bulk(t); break;
	}
}

static int pick_op(struct thr *t)
{
	unsigned total = 0;
	for (int i = 0; i < OP_N; i++)
		total += g_op_weight[i];
	unsigned x = (unsigned)rndn(t, total);
	for (int i = 0; i < OP_N; i++) {
		if (x < g_op_weight[i])
			return i;
		x -= g_op_weight[i];
	}
	return OP_CHECK;
}

static void *thread_main(void *arg)
{
	struct thr *t = arg;
	uext4_set_caller(t->uid, t->gid);
	while (t->ops < t->nops && !atomic_load(&g_stop)) {
		int op = pick_op(t);
		t->count[op]++;
		t->ops++;
		run_op(t, op);
	}
	/* the own subtree, once more, from this thread */
	if (!atomic_load(&g_stop))
		verify_tree(t, t->home, dir_path(t->home), true);
	return NULL;
}

/* ------------------------------------------------------------ dump */

struct lines {
	char **v;
	size_t n, cap;
};

static long model_getx(void *ctx, const char *name, char **val)
{
	struct xa *x = xa_find(ctx, name);
	if (!x)
		return -ENODATA;
	*val = t_xmalloc(x->len);
	memcpy(*val, x->val, x->len);
	return (long)x->len;
}

#define DUMP_FIELDS (TF_ALL & ~(TF_BLOCKS | TF_MTIME | TF_CTIME | TF_ATIME | TF_NSEC | TF_DIRSIZE))

static void dump_node(struct lines *l, struct node *n, const char *rel)
{
	struct t_attr a = { 0 };
	a.ino = n->ino;
	a.mode = n->mode;
	a.nlink = n->nlink;
	a.uid = n->uid;
	a.gid = n->gid;
	a.size = n->size;
	a.rdev_major = major(n->rdev);
	a.rdev_minor = minor(n->rdev);
	if (S_ISLNK(n->mode)) {
		a.link = n->target;
		a.link_len = n->tlen;
		a.size = n->tlen;
	}
	if (S_ISREG(n->mode)) {
		struct t_datahash h;
		t_datahash_init(&h);
		if (n->size)
			t_datahash_update(&h, n->data, n->size);
		a.have_data = 1;
		a.data_hash = t_datahash_final(&h);
	}
	struct t_buf nl = { 0 };
	t_buf_add(&nl, "", 0);
	for (int i = 0; i < n->nxa; i++)
		t_buf_add(&nl, n->xa[i].name, strlen(n->xa[i].name) + 1);
	a.xattrs = t_xattr_summary(nl.s, nl.len, model_getx, n);
	free(nl.s);
	struct t_buf b = { 0 };
	t_format_line(&b, rel, strlen(rel), &a, DUMP_FIELDS);
	free(a.xattrs);
	if (l->n == l->cap) {
		l->cap = l->cap ? l->cap * 2 : 1024;
		l->v = t_xrealloc(l->v, l->cap * sizeof(*l->v));
	}
	l->v[l->n++] = b.s;
	for (int i = 0; S_ISDIR(n->mode) && i < n->nents; i++) {
		char *child = t_xmalloc(strlen(rel) + strlen(n->ents[i].name) + 2);
		sprintf(child, "%s/%s", rel, n->ents[i].name);
		dump_node(l, n->ents[i].n, child);
		free(child);
	}
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int write_dump(const char *file)
{
	struct lines l = { 0 };
	dump_node(&l, g_root, ".");
	qsort(l.v, l.n, sizeof(*l.v), cmp_str);
	FILE *f = fopen(file, "w");
	if (!f) {
		perror(file);
		return -1;
	}
	for (size_t i = 0; i < l.n; i++) {
		fputs(l.v[i], f);
		free(l.v[i]);
	}
	free(l.v);
	return fclose(f) ? -1 : 0;
}

/* ------------------------------------------------------------ main */

static void free_tree(struct node *n)
{
	for (int i = 0; S_ISDIR(n->mode) && i < n->nents; i++) {
		struct node *c = n->ents[i].n;
		if (S_ISDIR(c->mode))
			free_tree(c);
		else if (--c->nlink == 0)
			node_free(c);
	}
	node_free(n);
}

static int run_fsck(const char *img)
{
	char cmd[4200];
	snprintf(cmd, sizeof(cmd), "e2fsck -fn '%s' 2>&1", img);
	FILE *p = popen(cmd, "r");
	if (!p)
		return -1;
	char line[1024];
	struct t_buf out = { 0 };
	t_buf_add(&out, "", 0);
	while (fgets(line, sizeof(line), p))
		t_buf_add(&out, line, strlen(line));
	int st = pclose(p);
	if (st != 0) {
		printf("%s", out.s);
		printf("FAIL: e2fsck -fn %s exit status %d\n", img, WEXITSTATUS(st));
	} else {
		printf("e2fsck -fn: clean\n");
	}
	free(out.s);
	return st == 0 ? 0 : -1;
}

static int mount_image(const char *img, int ro)
{
	struct uext4_opts o = { .read_only = ro };
	int r = uext4_mount(img, &o, &g_fs);
	if (r < 0)
		printf("FAIL: mount %s%s: %s (%s)\n", img, ro ? " read-only" : "", strerror(-r),
		       uext4_last_error());
	return r;
}

/* --skip NAME: leave one kind of operation out (to look past a known bug). */
static bool skip_op(const char *name)
{
	for (int k = 0; k < OP_N; k++)
		if (!strcmp(g_op_names[k], name)) {
			g_op_weight[k] = 0;
			printf("skipping %s operations\n", name);
			return true;
		}
	fprintf(stderr, "unknown operation %s\n", name);
	exit(2);
}

static void usage(void)
{
	fprintf(stderr, "usage: model [--threads N] [--ops N] [--seed N] [--dump FILE] "
		"[--no-fsck] [--trace] [--skip OP]... IMAGE\n");
	exit(2);
}

int main(int argc, char **argv)
{
	int nthreads = 4;
	uint64_t nops = 20000, seed = 0;
	bool have_seed = false, fsck = true;
	const char *dump = NULL, *img = NULL;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--threads") && i + 1 < argc)
			nthreads = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--ops") && i + 1 < argc)
			nops = strtoull(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--seed") && i + 1 < argc)
			seed = strtoull(argv[++i], NULL, 0), have_seed = true;
		else if (!strcmp(argv[i], "--dump") && i + 1 < argc)
			dump = argv[++i];
		else if (!strcmp(argv[i], "--no-fsck"))
			fsck = false;
		else if (!strcmp(argv[i], "--trace"))
			g_trace = true;
		else if (!strcmp(argv[i], "--skip") && i + 1 < argc && skip_op(argv[++i]))
			;
		else if (argv[i][0] == '-' || img)
			usage();
		else
			img = argv[i];
	}
	if (!img || nthreads < 1 || nthreads > 64)
		usage();
	setvbuf(stdout, NULL, _IOLBF, 0); /* keep stdout and stderr in order in logs */
	if (!have_seed) {
		struct timeval tv;
		gettimeofday(&tv, NULL);
		seed = ((uint64_t)tv.tv_sec * 1000003u ^ (uint64_t)tv.tv_usec ^ (uint64_t)getpid()) % 1000000000;
	}
	printf("model: image %s, %d threads, %llu ops, seed %llu (replay: --seed %llu --threads %d)\n",
	       img, nthreads, (unsigned long long)nops, (unsigned long long)seed,
	       (unsigned long long)seed, nthreads);
	fflush(stdout);

	if (mount_image(img, 0) < 0)
		return T_FAIL;
	struct uext4_info info;
	uext4_info(g_fs, &info);
	g_bsize = info.block_size;
	g_isize = info.inode_size;
	g_ea_inode = strstr(info.features, "ea_inode") != NULL;
	printf("block size %u, inode size %u, features: %s\n", g_bsize, g_isize, info.features);

	struct uext4_stat st;
	int r = uext4_getattr(g_fs, UEXT4_ROOT_INO, &st);
	if (r < 0) {
		printf("FAIL: getattr root: %s\n", strerror(-r));
		return T_FAIL;
	}
	g_root = node_new(UEXT4_ROOT_INO, st.mode, st.uid, st.gid);
	g_root->nlink = st.nlink;
	struct thr *th = calloc((size_t)nthreads, sizeof(*th));
	struct thr setup = { .id = -1 };
	for (int i = 0; i < NSHARED + nthreads; i++) {
		char name[32];
		if (i < NSHARED)
			snprintf(name, sizeof(name), "s%d", i);
		else
			snprintf(name, sizeof(name), "t%d", i - NSHARED);
		r = uext4_mkdir(g_fs, UEXT4_ROOT_INO, name, S_IFDIR | 0777, &st);
		if (r < 0) {
			printf("FAIL: mkdir /%s: %s (%s)\n", name, strerror(-r), uext4_last_error());
			return T_FAIL;
		}
		struct node *n = created(&setup, g_root, name, S_IFDIR | 0777, &st, "mkdir");
		if (i < NSHARED) {
			pthread_mutex_init(&g_shared[i].lock, NULL);
			g_shared[i].dir = n;
			n->shared = i + 1;
		} else {
			struct thr *t = &th[i - NSHARED];
			t->id = i - NSHARED;
			t->home = n;
			thr_add_dir(t, n);
		}
	}
	for (int i = 0; i < nthreads; i++) {
		struct thr *t = &th[i];
		t->rng = t_mix(seed * 1000 + (uint64_t)i) | 1;
		t->uid = i % 2 ? 1000u + (uint32_t)i : 0;
		t->gid = i % 2 ? 100u + (uint32_t)i : 0;
		t->nops = nops / (uint64_t)nthreads;
		t->buf = t_xmalloc(2 * MAX_WRITE);
		t->rbuf = t_xmalloc(2 * MAX_WRITE + 8);
	}
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	pthread_t *tid = calloc((size_t)nthreads, sizeof(*tid));
	for (int i = 0; i < nthreads; i++)
		if (pthread_create(&tid[i], NULL, thread_main, &th[i])) {
			printf("FAIL: pthread_create\n");
			return T_FAIL;
		}
	unsigned long long counts[OP_N] = { 0 }, total = 0;
	for (int i = 0; i < nthreads; i++) {
		pthread_join(tid[i], NULL);
		for (int k = 0; k < OP_N; k++)
			counts[k] += th[i].count[k];
		total += th[i].ops;
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	printf("ran %llu operations in %.1f s:", total, secs);
	for (int k = 0; k < OP_N; k++)
		printf(" %s %llu", g_op_names[k], counts[k]);
	if (atomic_load(&g_shift_unsupported))
		printf("\nNOTE: fallocate COLLAPSE_RANGE/INSERT_RANGE returned EOPNOTSUPP %u times",
		       (unsigned)atomic_load(&g_shift_unsupported));
	printf("\nmodel holds %llu bytes of file data\n",
	       (unsigned long long)atomic_load(&g_model_bytes));

	struct thr *v = &th[0];
	v->id = 99;
	int failed = atomic_load(&g_failures) > 0;
	if (!failed) {
		printf("checking the whole tree against the model (live mount)\n");
		verify_tree(v, g_root, "", true);
	}
	struct uext4_statfs sf;
	if (uext4_statfs(g_fs, &sf) == 0)
		printf("statfs: %llu/%llu blocks free, %llu/%llu inodes free\n",
		       (unsigned long long)sf.blocks_free, (unsigned long long)sf.blocks,
		       (unsigned long long)sf.inodes_free, (unsigned long long)sf.inodes);
	r = uext4_umount(g_fs);
	g_fs = NULL;
	if (r < 0) {
		printf("FAIL: umount: %s (%s)\n", strerror(-r), uext4_last_error());
		failed = 1;
	}
	if (fsck && run_fsck(img) < 0)
		failed = 1;
	if (!failed && !atomic_load(&g_failures)) {
		printf("remounting read-only and checking the whole tree again\n");
		if (mount_image(img, 1) < 0) {
			failed = 1;
		} else {
			atomic_store(&g_stop, false);
			verify_tree(v, g_root, "", true);
			r = uext4_umount(g_fs);
			if (r < 0) {
				printf("FAIL: umount: %s\n", strerror(-r));
				failed = 1;
			}
		}
	}
	if (dump && write_dump(dump) < 0)
		failed = 1;
	if (atomic_load(&g_failures))
		failed = 1;
	for (int i = 0; i < nthreads; i++) {
		free(th[i].buf);
		free(th[i].rbuf);
		free(th[i].dirs);
	}
	free_tree(g_root);
	free(th);
	free(tid);
	printf("%s (seed %llu)\n", failed ? "FAIL" : "model test passed", (unsigned long long)seed);
	return failed ? T_FAIL : T_PASS;
}
