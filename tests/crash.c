/*
 * crash.c - crash-state exploration (run through tests/crash.sh).
 *
 *   crash [-s SEED] [-m MAX_STATES] [-k K] [-j WORKERS] IMAGE WORKLOAD...
 *   crash -l                     list the workloads
 *   crash [-s SEED] -O           self-test of bdev_open_overlay()
 *
 * For each workload: a copy of IMAGE is loaded into a crash-recording
 * device (src/crashdev.c), mounted read-write with super_mount_bdev(), and
 * a few operations run through the public API (one thread or several),
 * then a clean unmount.  Every write and flush was logged.  Then for every
 * flush index k (0..nflushes) the state "all writes before flush k" is
 * checked, plus a bounded random sample of subsets of epoch k (the writes
 * between flush k and flush k+1, one piece per file-system block, so torn
 * multi-block writes are included).  Each state is written to an image
 * file, recovered (uext4_recover(), or a read-write mount + unmount when
 * the library does not have it yet), and must then pass `e2fsck -fn`; and
 * every fact the workload established must hold in it.
 *
 * Facts.  The workload keeps a model of each path it touches (file content,
 * directory, xattr value, or absent).  When an fsync/fdatasync/sync returns
 * at mark m (crashrec_mark: the number of flushes issued so far), the
 * model's state of the paths it covers is durable: a fact "path is X" is
 * checked in every state k >= m, until an operation on the path starts
 * (at mark s: its writes all land in epochs >= s, so states k < s cannot
 * see them).  From that point only the next fsync establishes a new fact;
 * a rename over an existing file adds "old or new" facts for both names
 * (rename is atomic) while the two names were durable.
 *
 * Failures print the workload, seed, k and the subset (the kept pieces and
 * their block numbers) and keep the crash image (before recovery) under
 * /tmp/uext4-crash-fail/ for replay with `e2fsck` or the library.
 */
#include <fcntl.h>
#include <pthread.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "blockdev.h"
#include "crashdev.h"
#include "internal.h"
#include "mount.h"
#include "uext4.h"
#include "t.h"

/* Until the lead's recovery entry point lands, fall back to mount+umount. */
#pragma weak uext4_recover

extern char **environ;

/* ------------------------------------------------------------ model */

enum ekind { E_ABSENT = 0, E_FILE, E_DIR, E_XATTR };

struct state {                  /* what a path (or xattr) is */
	enum ekind kind;
	uint8_t *data;          /* E_FILE content / E_XATTR value (owned) */
	size_t len;
};

struct entry {                  /* the model of one path or (path, xattr) */
	char path[160];
	char xname[40];         /* "" for the path itself */
	struct state st;
	bool settled;           /* an open fact describes st */
	int owner;              /* thread that uses the path */
};

struct fact {
	char path[160];
	char xname[40];
	struct state alt[2];    /* the state in a crash image is one of these */
	int nalt;
	uint32_t from, until;   /* checked in states from <= k < until */
};

struct ctx {
	uext4_fs *fs;
	struct bdev *dev;
	const char *wname;
	uint64_t seed;
	pthread_mutex_t mu;     /* entries, facts, failed */
	struct entry **ents;    /* stable pointers: threads keep them */
	size_t nents, capents;
	struct fact *facts;
	size_t nfacts, capfacts;
	int failed;
	uint32_t block_size;
};

static uint8_t *dup_bytes(const uint8_t *p, size_t len)
{
	uint8_t *d = malloc(len ? len : 1);

	if (!d) {
		perror("malloc");
		exit(1);
	}
	if (len)
		memcpy(d, p, len);
	return d;
}

static struct state state_copy(const struct state *s)
{
	struct state c = *s;

	c.data = s->data ? dup_bytes(s->data, s->len) : NULL;
	return c;
}

static void *grow(void *p, size_t *cap, size_t n, size_t elem)
{
	if (n < *cap)
		return p;
	*cap = *cap ? *cap * 2 : 64;
	p = realloc(p, *cap * elem);
	if (!p) {
		perror("realloc");
		exit(1);
	}
	return p;
}

/* Caller holds c->mu. */
static struct entry *ent_get(struct ctx *c, const char *path, const char *xname)
{
	struct entry *e;

	for (size_t i = 0; i < c->nents; i++)
		if (!strcmp(c->ents[i]->path, path) && !strcmp(c->ents[i]->xname, xname))
			return c->ents[i];
	c->ents = grow(c->ents, &c->capents, c->nents, sizeof(*c->ents));
	e = calloc(1, sizeof(*e));
	if (!e) {
		perror("calloc");
		exit(1);
	}
	c->ents[c->nents++] = e;
	snprintf(e->path, sizeof(e->path), "%s", path);
	snprintf(e->xname, sizeof(e->xname), "%s", xname);
	e->settled = true;      /* absent, and so it was in the initial image */
	return e;
}

/* Caller holds c->mu. */
static void fact_add(struct ctx *c, const struct entry *e, uint32_t from, const struct state *a,
		     const struct state *b)
{
	struct fact *f;

	c->facts = grow(c->facts, &c->capfacts, c->nfacts, sizeof(*c->facts));
	f = &c->facts[c->nfacts++];
	memset(f, 0, sizeof(*f));
	snprintf(f->path, sizeof(f->path), "%s", e->path);
	snprintf(f->xname, sizeof(f->xname), "%s", e->xname);
	f->alt[0] = state_copy(a);
	f->nalt = 1;
	if (b) {
		f->alt[1] = state_copy(b);
		f->nalt = 2;
	}
	f->from = from;
	f->until = UINT32_MAX;
}

/* An operation on e starts at mark s: its open facts end. Caller holds c->mu. */
static void ent_touch(struct ctx *c, struct entry *e, uint32_t s)
{
	for (size_t i = 0; i < c->nfacts; i++) {
		struct fact *f = &c->facts[i];

		if (f->until == UINT32_MAX && !strcmp(f->path, e->path) &&
		    !strcmp(f->xname, e->xname))
			f->until = s;
	}
	e->settled = false;
}

/* e's model state is durable from mark m on.  Caller holds c->mu. */
static void ent_settle(struct ctx *c, struct entry *e, uint32_t m)
{
	if (e->settled)
		return;
	fact_add(c, e, m, &e->st, NULL);
	e->settled = true;
}

static void ent_set(struct entry *e, enum ekind kind, const uint8_t *data, size_t len)
{
	free(e->st.data);
	e->st.kind = kind;
	e->st.data = data ? dup_bytes(data, len) : NULL;
	e->st.len = len;
}

/* ------------------------------------------------------------ workload helpers */

static int wfail(struct ctx *c, int line, const char *what, int r)
{
	pthread_mutex_lock(&c->mu);
	c->failed = 1;
	pthread_mutex_unlock(&c->mu);
	printf("FAIL workload %s (seed %llu) line %d: %s: %s (%s)\n", c->wname,
	       (unsigned long long)c->seed, line, what, strerror(-r), uext4_last_error());
	fflush(stdout);
	return r;
}

#define TRY(expr) do {                                                   \
	long long r_ = (expr);                                           \
	if (r_ < 0)                                                      \
		return wfail(c, __LINE__, #expr, (int)r_);               \
} while (0)

static uint64_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	return x ^ (x >> 33);
}

static uint64_t str_hash(const char *s)
{
	uint64_t h = 1469598103934665603ull;

	while (*s)
		h = (h ^ (uint8_t)*s++) * 1099511628211ull;
	return h;
}

/* Deterministic content of len bytes for (path, version). */
static uint8_t *gen(struct ctx *c, const char *path, unsigned version, size_t len)
{
	uint8_t *p = malloc(len ? len : 1);
	uint64_t x = mix(c->seed ^ str_hash(path) ^ version);

	for (size_t i = 0; i < len; i++) {
		if (i % 8 == 0)
			x = mix(x + i);
		p[i] = (uint8_t)(x >> (8 * (i % 8)));
	}
	return p;
}

static int split_path(struct ctx *c, const char *path, uint64_t *dir, const char **name)
{
	char parent[160];
	const char *slash = strrchr(path, '/');
	size_t n = (size_t)(slash - path);

	*name = slash + 1;
	if (n == 0) {
		*dir = UEXT4_ROOT_INO;
		return 0;
	}
	memcpy(parent, path, n);
	parent[n] = 0;
	return uext4_resolve(c->fs, parent, 0, dir);
}

static uint32_t mark(struct ctx *c)
{
	return crashrec_mark(c->dev);
}

/* Start an operation on (path, xname): returns the entry, facts ended. */
static struct entry *op_begin(struct ctx *c, const char *path, const char *xname, int owner)
{
	struct entry *e;

	pthread_mutex_lock(&c->mu);
	e = ent_get(c, path, xname);
	e->owner = owner;
	ent_touch(c, e, mark(c));
	pthread_mutex_unlock(&c->mu);
	return e;
}

/* Write len bytes of data at off into path (created if missing). */
static int w_write(struct ctx *c, int owner, const char *path, const uint8_t *data, size_t len,
		   uint64_t off)
{
	struct entry *e = op_begin(c, path, "", owner);
	struct uext4_stat st;
	uext4_file *f;
	uint64_t dir, ino;
	const char *name;
	uint8_t *nd;
	size_t nlen;

	if (uext4_resolve(c->fs, path, 0, &ino) == -ENOENT) {
		TRY(split_path(c, path, &dir, &name));
		TRY(uext4_create(c->fs, dir, name, 0644, &st));
		ino = st.ino;
	}
	TRY(uext4_open(c->fs, ino, O_RDWR, &f));
	ssize_t n = uext4_pwrite(f, data, len, off);
	uext4_release(f);
	TRY(n);
	if ((size_t)n != len)
		return wfail(c, __LINE__, "short write", -EIO);
	pthread_mutex_lock(&c->mu);
	nlen = MAX(e->st.kind == E_FILE ? e->st.len : 0, off + len);
	nd = calloc(1, nlen ? nlen : 1);
	if (e->st.kind == E_FILE && e->st.len)
		memcpy(nd, e->st.data, e->st.len);
	if (len)
		memcpy(nd + off, data, len);
	ent_set(e, E_FILE, nd, nlen);
	pthread_mutex_unlock(&c->mu);
	free(nd);
	return 0;
}

/* fsync (datasync 0) or fdatasync (1) of path: its model state is durable. */
static int w_fsync(struct ctx *c, const char *path, int datasync)
{
	uext4_file *f;
	uint64_t ino;
	struct entry *e;

	TRY(uext4_resolve(c->fs, path, 0, &ino));
	TRY(uext4_open(c->fs, ino, O_RDONLY, &f));
	int r = uext4_fsync(f, datasync);
	uext4_release(f);
	TRY(r);
	pthread_mutex_lock(&c->mu);
	e = ent_get(c, path, "");
	ent_settle(c, e, mark(c));
	pthread_mutex_unlock(&c->mu);
	return 0;
}

/* Create path with len bytes of version-v content and fsync it. */
static int w_put(struct ctx *c, int owner, const char *path, unsigned v, size_t len, int datasync)
{
	uint8_t *d = gen(c, path, v, len);
	int r = w_write(c, owner, path, d, len, 0);

	free(d);
	return r ? r : w_fsync(c, path, datasync);
}

/* uext4_sync: everything owner did is durable (owner -1: everybody's). */
static int w_sync(struct ctx *c, int owner)
{
	uint32_t m;

	TRY(uext4_sync(c->fs));
	pthread_mutex_lock(&c->mu);
	m = mark(c);
	for (size_t i = 0; i < c->nents; i++)
		if (owner < 0 || c->ents[i]->owner == owner)
			ent_settle(c, c->ents[i], m);
	pthread_mutex_unlock(&c->mu);
	return 0;
}

static int w_truncate(struct ctx *c, int owner, const char *path, uint64_t size)
{
	struct entry *e = op_begin(c, path, "", owner);
	struct uext4_setattr a = { .valid = UEXT4_SET_SIZE, .size = size };
	uint64_t ino;
	uint8_t *nd;

	TRY(uext4_resolve(c->fs, path, 0, &ino));
	TRY(uext4_setattr(c->fs, ino, &a, NULL));
	pthread_mutex_lock(&c->mu);
	nd = calloc(1, size ? size : 1);
	if (e->st.data && MIN(size, e->st.len))
		memcpy(nd, e->st.data, MIN(size, e->st.len));
	ent_set(e, E_FILE, nd, size);
	pthread_mutex_unlock(&c->mu);
	free(nd);
	return 0;
}

static int w_unlink(struct ctx *c, int owner, const char *path)
{
	struct entry *e = op_begin(c, path, "", owner);
	uint64_t dir;
	const char *name;

	TRY(split_path(c, path, &dir, &name));
	TRY(uext4_unlink(c->fs, dir, name));
	pthread_mutex_lock(&c->mu);
	ent_set(e, E_ABSENT, NULL, 0);
	pthread_mutex_unlock(&c->mu);
	return 0;
}

static int w_mkdir(struct ctx *c, int owner, const char *path)
{
	struct entry *e = op_begin(c, path, "", owner);
	uint64_t dir;
	const char *name;

	TRY(split_path(c, path, &dir, &name));
	TRY(uext4_mkdir(c->fs, dir, name, 0755, NULL));
	pthread_mutex_lock(&c->mu);
	ent_set(e, E_DIR, NULL, 0);
	pthread_mutex_unlock(&c->mu);
	return 0;
}

static int w_rmdir(struct ctx *c, int owner, const char *path)
{
	struct entry *e = op_begin(c, path, "", owner);
	uint64_t dir;
	const char *name;

	TRY(split_path(c, path, &dir, &name));
	TRY(uext4_rmdir(c->fs, dir, name));
	pthread_mutex_lock(&c->mu);
	ent_set(e, E_ABSENT, NULL, 0);
	pthread_mutex_unlock(&c->mu);
	return 0;
}

/* Rename a file (not a directory: its children's paths would change). */
static int w_rename(struct ctx *c, int owner, const char *from, const char *to)
{
	struct entry *ef, *et;
	struct state old_from, old_to, absent = { 0 };
	bool window;
	uint32_t s;
	uint64_t d1, d2;
	const char *n1, *n2;

	pthread_mutex_lock(&c->mu);
	ef = ent_get(c, from, "");
	et = ent_get(c, to, "");
	window = ef->settled && et->settled;
	old_from = state_copy(&ef->st);
	old_to = state_copy(&et->st);
	s = mark(c);
	ent_touch(c, ef, s);
	ent_touch(c, et, s);
	ef->owner = et->owner = owner;
	/* Both names were durable: in every later state the rename happened
	 * entirely or not at all (until the next operation on them). */
	if (window) {
		fact_add(c, ef, s, &old_from, &absent);
		fact_add(c, et, s, &old_to, &old_from);
	}
	pthread_mutex_unlock(&c->mu);
	TRY(split_path(c, from, &d1, &n1));
	TRY(split_path(c, to, &d2, &n2));
	TRY(uext4_rename(c->fs, d1, n1, d2, n2, 0));
	pthread_mutex_lock(&c->mu);
	ent_set(et, old_from.kind, old_from.data, old_from.len);
	ent_set(ef, E_ABSENT, NULL, 0);
	pthread_mutex_unlock(&c->mu);
	free(old_from.data);
	free(old_to.data);
	return 0;
}

static int w_setxattr(struct ctx *c, int owner, const char *path, const char *xname,
		      const uint8_t *v, size_t len)
{
	struct entry *e = op_begin(c, path, xname, owner);
	uint64_t ino;

	TRY(uext4_resolve(c->fs, path, 0, &ino));
	TRY(uext4_setxattr(c->fs, ino, xname, v, len, 0));
	pthread_mutex_lock(&c->mu);
	e = ent_get(c, path, xname);
	ent_set(e, E_XATTR, v, len);
	pthread_mutex_unlock(&c->mu);
	return 0;
}

static int w_removexattr(struct ctx *c, int owner, const char *path, const char *xname)
{
	struct entry *e = op_begin(c, path, xname, owner);
	uint64_t ino;

	TRY(uext4_resolve(c->fs, path, 0, &ino));
	TRY(uext4_removexattr(c->fs, ino, xname));
	pthread_mutex_lock(&c->mu);
	e = ent_get(c, path, xname);
	ent_set(e, E_ABSENT, NULL, 0);
	pthread_mutex_unlock(&c->mu);
	return 0;
}

/* fsync of a file also makes its xattrs durable. */
static int w_fsync_xattrs(struct ctx *c, const char *path)
{
	int r = w_fsync(c, path, 0);
	uint32_t m = mark(c);

	if (r)
		return r;
	pthread_mutex_lock(&c->mu);
	for (size_t i = 0; i < c->nents; i++)
		if (!strcmp(c->ents[i]->path, path) && c->ents[i]->xname[0])
			ent_settle(c, c->ents[i], m);
	pthread_mutex_unlock(&c->mu);
	return 0;
}

/* ------------------------------------------------------------ workloads */

/* Files of several sizes (empty, < 1 block, blocks + 1, 40 KiB), fsync and
 * fdatasync; then appends and an overwrite with fdatasync. */
static int wl_create_fsync(struct ctx *c)
{
	uint32_t bs = c->block_size;
	uint8_t *d;

	TRY(w_put(c, 0, "/empty", 0, 0, 0));
	TRY(w_put(c, 0, "/small", 0, 100, 0));
	TRY(w_put(c, 0, "/blocks", 0, bs + 1, 1));
	TRY(w_put(c, 0, "/big", 0, 40960, 0));
	d = gen(c, "/blocks", 1, 3 * bs);
	TRY(w_write(c, 0, "/blocks", d, 3 * bs, bs / 2));  /* overwrite + append */
	free(d);
	TRY(w_fsync(c, "/blocks", 1));
	d = gen(c, "/small", 2, 50);
	TRY(w_write(c, 0, "/small", d, 50, 100));          /* append */
	free(d);
	TRY(w_fsync(c, "/small", 1));
	TRY(w_put(c, 0, "/last", 0, 2 * bs, 0));
	return 0;
}

/* Renames within and across directories and over an existing file. */
static int wl_rename(struct ctx *c)
{
	TRY(w_mkdir(c, 0, "/d1"));
	TRY(w_mkdir(c, 0, "/d2"));
	TRY(w_put(c, 0, "/d1/a", 0, 3000, 0));
	TRY(w_put(c, 0, "/d1/b", 0, 200, 0));
	TRY(w_put(c, 0, "/d2/c", 0, 5000, 0));
	TRY(w_sync(c, -1));
	TRY(w_rename(c, 0, "/d1/a", "/d1/a2"));            /* within */
	TRY(w_rename(c, 0, "/d1/b", "/d2/b"));             /* across */
	TRY(w_sync(c, -1));
	TRY(w_rename(c, 0, "/d1/a2", "/d2/c"));            /* over an existing file */
	TRY(w_put(c, 0, "/d2/after", 0, 700, 0));
	TRY(w_rename(c, 0, "/d2/b", "/d1/b3"));
	TRY(w_sync(c, -1));
	return 0;
}

/* Unlink of an open file: the inode lives (orphan) until the release. */
static int wl_unlink_open(struct ctx *c)
{
	uint32_t bs = c->block_size;
	uext4_file *f;
	uint64_t ino;
	uint8_t *d;

	TRY(w_put(c, 0, "/victim", 0, 5 * bs, 0));
	TRY(w_put(c, 0, "/keep", 0, 3 * bs, 0));
	TRY(uext4_resolve(c->fs, "/victim", 0, &ino));
	TRY(uext4_open(c->fs, ino, O_RDWR, &f));
	TRY(w_unlink(c, 0, "/victim"));
	TRY(w_sync(c, -1));                                /* orphan is on disk */
	d = gen(c, "/victim", 1, 2 * bs);
	TRY(uext4_pwrite(f, d, 2 * bs, 6 * bs));           /* grows while unlinked */
	free(d);
	TRY(uext4_fsync(f, 0));
	TRY(w_put(c, 0, "/other", 0, bs, 0));
	TRY(uext4_release(f));                             /* freed now */
	TRY(w_put(c, 0, "/after", 0, 2 * bs, 0));
	TRY(w_sync(c, -1));
	return 0;
}

/*
 * The mount's first write holds an orphan: a file created, opened and
 * unlinked before anything reached the disk.  That write puts the
 * superblock on the device before the transaction's commit block; it must
 * not name an orphan list whose inodes only the transaction allocates.
 */
static int wl_first_orphan(struct ctx *c)
{
	uint32_t bs = c->block_size;
	uext4_file *f;
	uint64_t ino;
	uint8_t *d = gen(c, "/victim", 0, 2 * bs);

	TRY(w_write(c, 0, "/victim", d, 2 * bs, 0));     /* no fsync: nothing written yet */
	free(d);
	TRY(uext4_resolve(c->fs, "/victim", 0, &ino));
	TRY(uext4_open(c->fs, ino, O_RDWR, &f));
	TRY(w_unlink(c, 0, "/victim"));
	TRY(w_sync(c, -1));                              /* the first write: orphan head */
	TRY(uext4_release(f));
	TRY(w_put(c, 0, "/after", 0, bs, 0));
	return 0;
}

/* Shrinking and growing truncates, with fsync. */
static int wl_truncate(struct ctx *c)
{
	uint32_t bs = c->block_size;

	TRY(w_put(c, 0, "/t1", 0, 12 * bs, 0));
	TRY(w_put(c, 0, "/t2", 0, 4 * bs, 0));
	TRY(w_truncate(c, 0, "/t1", 2 * bs + bs / 2));    /* shrink */
	TRY(w_fsync(c, "/t1", 0));
	TRY(w_truncate(c, 0, "/t1", 9 * bs));             /* grow: a hole */
	TRY(w_fsync(c, "/t1", 0));
	TRY(w_truncate(c, 0, "/t2", 0));
	TRY(w_put(c, 0, "/t3", 0, bs, 1));
	TRY(w_fsync(c, "/t2", 0));
	TRY(w_put(c, 0, "/t2", 1, 3 * bs + 7, 0));
	TRY(w_truncate(c, 0, "/t1", 1));
	TRY(w_sync(c, -1));
	return 0;
}

/* xattrs: in the inode, in a block, replaced, removed. */
static int wl_xattr(struct ctx *c)
{
	uint8_t small[16], *big = gen(c, "xattr-big", 0, 600);

	memset(small, 'v', sizeof(small));
	TRY(w_put(c, 0, "/x", 0, 100, 0));
	TRY(w_setxattr(c, 0, "/x", "user.small", small, sizeof(small)));
	TRY(w_setxattr(c, 0, "/x", "user.big", big, 600));
	TRY(w_fsync_xattrs(c, "/x"));
	small[0] = 'w';
	TRY(w_setxattr(c, 0, "/x", "user.small", small, sizeof(small)));
	TRY(w_removexattr(c, 0, "/x", "user.big"));
	TRY(w_fsync_xattrs(c, "/x"));
	TRY(w_put(c, 0, "/y", 0, 10, 0));
	TRY(w_setxattr(c, 0, "/y", "user.big2", big, 600));
	TRY(w_fsync_xattrs(c, "/y"));
	free(big);
	return 0;
}

/* A directory grows past one block (second block, htree), then shrinks. */
static int wl_dirgrow(struct ctx *c)
{
	char p[160];
	unsigned n = c->block_size / 32 + 20;    /* 40-byte names: > 1 block */

	TRY(w_mkdir(c, 0, "/big"));
	TRY(w_sync(c, -1));
	for (unsigned i = 0; i < n; i++) {
		snprintf(p, sizeof(p), "/big/name-with-some-length-to-fill-%05u", i);
		TRY(w_write(c, 0, p, (const uint8_t *)"", 0, 0));
		if (i % 37 == 0)
			TRY(w_fsync(c, p, 0));
	}
	TRY(w_sync(c, -1));
	for (unsigned i = 0; i < n; i += 3) {
		snprintf(p, sizeof(p), "/big/name-with-some-length-to-fill-%05u", i);
		TRY(w_unlink(c, 0, p));
	}
	TRY(w_put(c, 0, "/big/final", 0, 100, 0));
	TRY(w_sync(c, -1));
	return 0;
}

/* mkdir/rmdir, nested. */
static int wl_dirs(struct ctx *c)
{
	TRY(w_mkdir(c, 0, "/a"));
	TRY(w_mkdir(c, 0, "/a/b"));
	TRY(w_mkdir(c, 0, "/a/b/c"));
	TRY(w_put(c, 0, "/a/b/c/f", 0, 500, 0));
	TRY(w_mkdir(c, 0, "/e"));
	TRY(w_sync(c, -1));
	TRY(w_unlink(c, 0, "/a/b/c/f"));
	TRY(w_rmdir(c, 0, "/a/b/c"));
	TRY(w_rmdir(c, 0, "/e"));
	TRY(w_mkdir(c, 0, "/a/g"));
	TRY(w_put(c, 0, "/a/g/h", 0, 1500, 0));
	TRY(w_sync(c, -1));
	return 0;
}

/* ---- several threads */

struct tharg {
	struct ctx *c;
	int id;
	int (*fn)(struct ctx *c, int id);
	int rc;
};

static void *thread_main(void *p)
{
	struct tharg *a = p;

	a->rc = a->fn(a->c, a->id);
	return NULL;
}

static int run_threads(struct ctx *c, int n, int (*fn)(struct ctx *c, int id))
{
	pthread_t t[8];
	struct tharg a[8];
	int rc = 0;

	for (int i = 0; i < n; i++) {
		a[i] = (struct tharg){ c, i, fn, 0 };
		if (pthread_create(&t[i], NULL, thread_main, &a[i]))
			return wfail(c, __LINE__, "pthread_create", -EAGAIN);
	}
	for (int i = 0; i < n; i++) {
		pthread_join(t[i], NULL);
		if (a[i].rc)
			rc = a[i].rc;
	}
	return rc;
}

/* Each thread: files in its own directory with fsync/fdatasync, renames
 * within it and into a shared directory, truncates, unlinks, mkdir/rmdir. */
static int th_mixed(struct ctx *c, int id)
{
	uint32_t bs = c->block_size;
	char p[160], q[160];

	for (int i = 0; i < 5; i++) {
		snprintf(p, sizeof(p), "/t%d/f%d", id, i);
		TRY(w_put(c, id, p, 0, (size_t)(mix(c->seed + id * 10 + i) % (3 * bs)), i & 1));
		if (i % 2 == 1) {
			snprintf(q, sizeof(q), "/shared/t%d-f%d", id, i);
			TRY(w_rename(c, id, p, q));
		}
		if (i == 2) {
			TRY(w_truncate(c, id, p, bs / 3));
			TRY(w_fsync(c, p, 0));
		}
		if (i == 3) {
			snprintf(p, sizeof(p), "/t%d/f0", id);
			TRY(w_unlink(c, id, p));
		}
		snprintf(p, sizeof(p), "/t%d/d%d", id, i);
		TRY(w_mkdir(c, id, p));
		if (i % 2 == 0)
			TRY(w_rmdir(c, id, p));
	}
	TRY(w_sync(c, id));
	return 0;
}

static int wl_threads(struct ctx *c)
{
	char p[32];

	TRY(w_mkdir(c, -1, "/shared"));
	for (int i = 0; i < 4; i++) {
		snprintf(p, sizeof(p), "/t%d", i);
		TRY(w_mkdir(c, -1, p));
	}
	TRY(w_sync(c, -1));
	return run_threads(c, 4, th_mixed);
}

/* Three threads fill one directory past a block (htree) while a fourth
 * truncates and unlinks an open file. */
static int th_dir(struct ctx *c, int id)
{
	char p[160];
	unsigned n = c->block_size / 80 + 10;

	if (id == 3) {
		uext4_file *f;
		uint64_t ino;

		TRY(w_put(c, id, "/tr", 0, 6 * c->block_size, 0));
		TRY(w_truncate(c, id, "/tr", c->block_size + 5));
		TRY(w_fsync(c, "/tr", 0));
		TRY(w_put(c, id, "/open", 0, 2 * c->block_size, 1));
		TRY(uext4_resolve(c->fs, "/open", 0, &ino));
		TRY(uext4_open(c->fs, ino, O_RDWR, &f));
		TRY(w_unlink(c, id, "/open"));
		TRY(w_sync(c, id));
		TRY(uext4_release(f));
		TRY(w_sync(c, id));
		return 0;
	}
	for (unsigned i = 0; i < n; i++) {
		snprintf(p, sizeof(p), "/shared/thread-%d-entry-with-a-long-name-%04u", id, i);
		TRY(w_write(c, id, p, (const uint8_t *)"", 0, 0));
		if (i % 17 == 0)
			TRY(w_fsync(c, p, 0));
	}
	TRY(w_sync(c, id));
	return 0;
}

static int wl_threads_dir(struct ctx *c)
{
	TRY(w_mkdir(c, -1, "/shared"));
	TRY(w_sync(c, -1));
	return run_threads(c, 4, th_dir);
}

struct workload {
	const char *name;
	int (*fn)(struct ctx *c);
	unsigned commit_secs;   /* 0: long (flushes only from fsync/sync/umount) */
	const char *what;
};

static const struct workload workloads[] = {
	{ "create_fsync", wl_create_fsync, 0, "creates, writes, fsync/fdatasync, append, overwrite" },
	{ "rename", wl_rename, 0, "renames within/across directories, over an existing file" },
	{ "unlink_open", wl_unlink_open, 0, "unlink of an open file, written after, released" },
	{ "first_orphan", wl_first_orphan, 0, "the mount's first write holds an unlinked open file" },
	{ "truncate", wl_truncate, 0, "shrinking and growing truncates" },
	{ "xattr", wl_xattr, 0, "xattr set (inode, block), replace, remove" },
	{ "dirgrow", wl_dirgrow, 0, "directory past one block (htree), unlinks" },
	{ "dirs", wl_dirs, 0, "mkdir/rmdir nested" },
	{ "threads", wl_threads, 1, "4 threads: create/fsync/rename/truncate/unlink/mkdir/rmdir" },
	{ "threads_dir", wl_threads_dir, 1, "3 threads grow one directory, 1 truncates + unlinks open" },
};

/* ------------------------------------------------------------ checking a state */

/* Does the recovered image show alternative a for (path, xname)? */
static bool alt_holds(uext4_fs *fs, const struct fact *f, const struct state *a, char *why,
		      size_t whylen)
{
	struct uext4_stat st;
	uint64_t ino;
	int r = uext4_resolve(fs, f->path, 0, &ino);

	if (f->xname[0]) {
		uint8_t buf[4096];
		ssize_t n = r ? r : uext4_getxattr(fs, ino, f->xname, buf, sizeof(buf));

		if (a->kind == E_ABSENT) {
			snprintf(why, whylen, "xattr %s present (%zd)", f->xname, n);
			return n == -ENODATA;
		}
		snprintf(why, whylen, "xattr %s: %zd, want %zu bytes", f->xname, n, a->len);
		return n >= 0 && (size_t)n == a->len && !memcmp(buf, a->data, a->len);
	}
	if (a->kind == E_ABSENT) {
		snprintf(why, whylen, "exists (resolve %d)", r);
		return r == -ENOENT;
	}
	if (r) {
		snprintf(why, whylen, "missing (%s)", strerror(-r));
		return false;
	}
	if ((r = uext4_getattr(fs, ino, &st))) {
		snprintf(why, whylen, "getattr %s", strerror(-r));
		return false;
	}
	if (a->kind == E_DIR) {
		snprintf(why, whylen, "not a directory (mode 0%o)", st.mode);
		return S_ISDIR(st.mode);
	}
	if (!S_ISREG(st.mode) || st.size != a->len) {
		snprintf(why, whylen, "mode 0%o size %llu, want a file of %zu bytes", st.mode,
			 (unsigned long long)st.size, a->len);
		return false;
	}
	uint8_t *buf = malloc(a->len ? a->len : 1);
	uext4_file *fh;
	bool ok = false;

	if (!uext4_open(fs, ino, O_RDONLY, &fh)) {
		ssize_t n = uext4_pread(fh, buf, a->len, 0);

		ok = n == (ssize_t)a->len && !memcmp(buf, a->data, a->len);
		uext4_release(fh);
		snprintf(why, whylen, "content differs (read %zd of %zu bytes)", n, a->len);
	} else {
		snprintf(why, whylen, "open failed");
	}
	free(buf);
	return ok;
}

static const char *kind_name(enum ekind k)
{
	static const char *n[] = { "absent", "file", "dir", "xattr" };

	return n[k];
}

/* Check every fact active in state k; appends messages to out. */
static int check_facts(struct ctx *c, const char *img, uint32_t k, char *out, size_t outlen,
		       unsigned *nchecked)
{
	struct uext4_opts o = { .read_only = 1 };
	uext4_fs *fs;
	int bad = 0, r = uext4_mount(img, &o, &fs);
	size_t used = strlen(out);

	if (r) {
		snprintf(out + used, outlen - used, "  read-only mount after recovery failed: %s\n",
			 uext4_last_error());
		return 1;
	}
	for (size_t i = 0; i < c->nfacts; i++) {
		const struct fact *f = &c->facts[i];
		char why[2][160] = { "", "" };
		bool ok = false;

		if (k < f->from || k >= f->until)
			continue;
		(*nchecked)++;
		for (int a = 0; a < f->nalt && !ok; a++)
			ok = alt_holds(fs, f, &f->alt[a], why[a], sizeof(why[a]));
		if (!ok && bad++ < 8) {
			used = strlen(out);
			snprintf(out + used, outlen - used,
				 "  fact %s%s%s (%s%s%s, fsynced at mark %u) broken: %s%s%s\n",
				 f->path, f->xname[0] ? " xattr " : "", f->xname,
				 kind_name(f->alt[0].kind), f->nalt > 1 ? " or " : "",
				 f->nalt > 1 ? kind_name(f->alt[1].kind) : "", f->from, why[0],
				 f->nalt > 1 ? "; " : "", why[1]);
		}
	}
	uext4_umount(fs);
	return bad != 0;
}

static int recover_image(const char *img, char *msg, size_t msglen)
{
	int r;

	if (uext4_recover) {
		struct uext4_recovery rec;

		r = uext4_recover(img, &rec);
	} else {
		struct uext4_opts o = { 0 };
		uext4_fs *fs;

		r = uext4_mount(img, &o, &fs);
		if (!r)
			r = uext4_umount(fs);
	}
	if (r)
		snprintf(msg, msglen, "  recovery failed: %s: %s\n", strerror(-r),
			 uext4_last_error());
	return r;
}

/* A crash state: epoch k, kept pieces. */
struct cstate {
	uint32_t k;
	bool *keep;             /* NULL: none */
	size_t n;               /* pieces in epoch k */
	const char *how;        /* "prefix", "all-subsets", "random", "in-order" */
};

static void describe_subset(struct ctx *c, const struct cstate *s, char *out, size_t outlen)
{
	size_t used = 0;
	unsigned kept = 0;

	for (size_t i = 0; i < s->n; i++)
		kept += s->keep && s->keep[i];
	used += (size_t)snprintf(out, outlen, "%s: %u of %zu pieces kept", s->how, kept, s->n);
	for (size_t i = 0; s->keep && i < s->n && used + 40 < outlen; i++) {
		uint64_t off;
		uint32_t len;

		if (!s->keep[i] || crashrec_piece(c->dev, s->k, i, &off, &len))
			continue;
		used += (size_t)snprintf(out + used, outlen - used, "%s#%zu@blk%llu", kept-- ==
					 0 ? "" : " ", i, (unsigned long long)(off / c->block_size));
	}
}

struct wstats {
	unsigned states, passed, fsck_bad, recover_bad, facts_bad, facts_checked;
};

/* Check one state; prints a report when it fails. */
static void check_state(struct ctx *c, const struct cstate *s, size_t idx, const char *img,
			const char *fscklog, struct wstats *ws, unsigned *kept_images)
{
	char msg[8192] = "";
	int fails = 0, r;

	ws->states++;
	r = crashrec_materialize(c->dev, s->k, s->keep, img);
	if (r) {
		printf("FAIL: materialize: %s\n", uext4_last_error());
		return;
	}
	if (recover_image(img, msg, sizeof(msg))) {
		ws->recover_bad++;
		fails++;
	}
	r = t_run_e2fsck(img, fscklog);
	if (r != 0) {
		size_t used = strlen(msg);
		FILE *f = fopen(fscklog, "r");
		char line[256];
		int n = 0;

		ws->fsck_bad++;
		fails++;
		snprintf(msg + used, sizeof(msg) - used, "  e2fsck -fn exit %d:\n", r);
		while (f && fgets(line, sizeof(line), f) && n < 12) {
			if (!strncmp(line, "e2fsck ", 7) || !strncmp(line, "Pass ", 5) ||
			    strstr(line, "contains a file system with errors"))
				continue;
			used = strlen(msg);
			snprintf(msg + used, sizeof(msg) - used, "    %s", line);
			n++;
		}
		if (f)
			fclose(f);
	}
	if (check_facts(c, img, s->k, msg, sizeof(msg), &ws->facts_checked)) {
		ws->facts_bad++;
		fails++;
	}
	if (!fails) {
		ws->passed++;
		return;
	}
	char sub[1024], keep_path[256] = "(not kept)";

	describe_subset(c, s, sub, sizeof(sub));
	if (*kept_images < 2) {
		mkdir("/tmp/uext4-crash-fail", 0755);
		snprintf(keep_path, sizeof(keep_path), "/tmp/uext4-crash-fail/%s-k%u-s%zu.img",
			 c->wname, s->k, idx);
		if (crashrec_materialize(c->dev, s->k, s->keep, keep_path) == 0)
			(*kept_images)++;
		else
			snprintf(keep_path, sizeof(keep_path), "(could not keep)");
	}
	printf("STATE FAIL workload %s seed %llu k=%u state #%zu (%s)\n"
	       "  image before recovery: %s\n%s",
	       c->wname, (unsigned long long)c->seed, s->k, idx, sub, keep_path, msg);
	fflush(stdout);
}

/* ------------------------------------------------------------ state selection */

static uint64_t rng_next(uint64_t *x)
{
	return t_rnd(x);
}

static void add_state(struct cstate **v, size_t *n, size_t *cap, uint32_t k, size_t pieces,
		      bool *keep, const char *how)
{
	*v = grow(*v, cap, *n, sizeof(**v));
	(*v)[(*n)++] = (struct cstate){ k, keep, pieces, how };
}

/*
 * The states of a recording: every prefix k, and per non-empty epoch
 * either every proper subset (few pieces) or `per` samples: one in-order
 * prefix of the epoch (a crash of a device that writes in order) and
 * random subsets (each piece kept with probability 1/2).
 */
static size_t pick_states(struct ctx *c, unsigned max_states, int only_k, uint64_t *rng,
			  struct cstate **out)
{
	uint32_t nf = crashrec_nflushes(c->dev);
	size_t n = 0, cap = 0, nonempty = 0;
	unsigned per;

	for (uint32_t k = 0; k <= nf; k++)
		nonempty += crashrec_nwrites_after(c->dev, k) > 0;
	per = max_states > nf + 1 ? (unsigned)((max_states - nf - 1) / MAX(nonempty, 1)) : 0;
	per = MAX(MIN(per, 8), max_states < 100 ? 1u : 2u);  /* sanitizers: fewer */
	for (uint32_t k = 0; k <= nf; k++) {
		size_t np = crashrec_nwrites_after(c->dev, k);
		/* the full epoch is state k+1's prefix, except after the last flush */
		size_t lim = np > 3 ? 0 : k < nf ? ((size_t)1 << np) - 1 : ((size_t)1 << np);

		if (only_k >= 0 && (uint32_t)only_k != k)
			continue;
		add_state(out, &n, &cap, k, np, NULL, "prefix");
		if (np == 0 || per == 0)
			continue;
		if (np <= 3 && lim - 1 <= per + 2) {
			for (size_t m = 1; m < lim; m++) {
				bool *keep = calloc(np, sizeof(bool));

				for (size_t i = 0; i < np; i++)
					keep[i] = (m >> i) & 1;
				add_state(out, &n, &cap, k, np, keep, "all-subsets");
			}
			continue;
		}
		for (unsigned s = 0; s < per; s++) {
			bool *keep = calloc(np, sizeof(bool));
			size_t upto = (size_t)(rng_next(rng) % np);

			for (size_t i = 0; i < np; i++)
				keep[i] = s == 0 ? i <= upto : (rng_next(rng) & 1);
			add_state(out, &n, &cap, k, np, keep, s == 0 ? "in-order" : "random");
		}
	}
	return n;
}

/* ------------------------------------------------------------ running */

struct opts {
	uint64_t seed;
	unsigned max_states;
	int only_k;
	unsigned workers;
	const char *image;
	const char *scratch;
	int fact_selftest;      /* -F: facts from mark 0 (must find failures) */
};

/* Worker w of nw checks states w, w+nw, ...; results through a pipe. */
static void run_worker(struct ctx *c, struct cstate *v, size_t n, unsigned w, unsigned nw,
		       const struct opts *o, struct wstats *ws)
{
	char img[600], log[600];
	unsigned kept = 0;

	snprintf(img, sizeof(img), "%s/state-%u.img", o->scratch, w);
	snprintf(log, sizeof(log), "%s/fsck-%u.log", o->scratch, w);
	for (size_t i = w; i < n; i += nw)
		check_state(c, &v[i], i, img, log, ws, &kept);
	unlink(img);
	unlink(log);
}

/*
 * The recorder itself: the state after the last flush with every piece of
 * the last epoch kept must equal what the device holds now.
 */
static int selfcheck_recorder(struct ctx *c, const char *scratch)
{
	uint32_t nf = crashrec_nflushes(c->dev);
	size_t np = crashrec_nwrites_after(c->dev, nf);
	bool *all = calloc(np + 1, sizeof(bool));
	uint64_t size = c->dev->size;
	uint8_t *live = malloc(size), *file = malloc(size);
	char path[600];
	int fd, bad = 1;

	for (size_t i = 0; i < np; i++)
		all[i] = true;
	snprintf(path, sizeof(path), "%s/selfcheck.img", scratch);
	if (!crashrec_materialize(c->dev, nf, all, path) && !bdev_read(c->dev, live, size, 0) &&
	    (fd = open(path, O_RDONLY)) >= 0) {
		bad = pread(fd, file, size, 0) != (ssize_t)size || memcmp(file, live, size);
		close(fd);
	}
	unlink(path);
	free(all);
	free(live);
	free(file);
	if (bad)
		printf("FAIL: recorder self-check: the final state differs from the device\n");
	return bad;
}

static int explore(struct ctx *c, const struct opts *o, struct wstats *total)
{
	uint64_t rng = mix(c->seed ^ str_hash(c->wname)) | 1;
	struct cstate *v = NULL;
	size_t n = pick_states(c, o->max_states, o->only_k, &rng, &v);
	struct wstats ws = { 0 };
	unsigned nw = o->workers;

	if (selfcheck_recorder(c, o->scratch))
		return 1;
	if (o->fact_selftest)   /* claim everything durable from the start */
		for (size_t i = 0; i < c->nfacts; i++)
			c->facts[i].from = 0;
	pid_t pids[16];
	int pipes[16][2];

	printf("  %s: %u flushes, %zu pieces logged; checking %zu crash states, %u facts\n",
	       c->wname, crashrec_nflushes(c->dev), ({
		       size_t t = 0;
		       for (uint32_t k = 0; k <= crashrec_nflushes(c->dev); k++)
			       t += crashrec_nwrites_after(c->dev, k);
		       t;
	       }), n, (unsigned)c->nfacts);
	fflush(stdout);
	for (unsigned w = 0; w < nw; w++) {
		if (pipe(pipes[w]) || (pids[w] = fork()) < 0) {
			perror("fork");
			exit(1);
		}
		if (pids[w] == 0) {
			struct wstats mine = { 0 };

			close(pipes[w][0]);
			run_worker(c, v, n, w, nw, o, &mine);
			if (write(pipes[w][1], &mine, sizeof(mine)) != sizeof(mine))
				_exit(1);
			_exit(0);
		}
		close(pipes[w][1]);
	}
	for (unsigned w = 0; w < nw; w++) {
		struct wstats got = { 0 };
		int st;

		if (read(pipes[w][0], &got, sizeof(got)) != sizeof(got))
			printf("FAIL: worker %u died\n", w), got.states = 1;
		close(pipes[w][0]);
		waitpid(pids[w], &st, 0);
		ws.states += got.states;
		ws.passed += got.passed;
		ws.fsck_bad += got.fsck_bad;
		ws.recover_bad += got.recover_bad;
		ws.facts_bad += got.facts_bad;
		ws.facts_checked += got.facts_checked;
	}
	for (size_t i = 0; i < n; i++)
		free(v[i].keep);
	free(v);
	printf("  %s: %u states checked, %u pass, %u fail (e2fsck %u, recovery %u, facts %u); "
	       "%u fact checks\n", c->wname, ws.states, ws.passed, ws.states - ws.passed,
	       ws.fsck_bad, ws.recover_bad, ws.facts_bad, ws.facts_checked);
	total->states += ws.states;
	total->passed += ws.passed;
	return ws.passed == ws.states ? 0 : 1;
}

static void ctx_free(struct ctx *c)
{
	for (size_t i = 0; i < c->nents; i++) {
		free(c->ents[i]->st.data);
		free(c->ents[i]);
	}
	for (size_t i = 0; i < c->nfacts; i++)
		for (int a = 0; a < c->facts[i].nalt; a++)
			free(c->facts[i].alt[a].data);
	free(c->ents);
	free(c->facts);
	pthread_mutex_destroy(&c->mu);
}

static int run_workload(const struct workload *w, const struct opts *o, struct wstats *total)
{
	struct ctx c = { .wname = w->name, .seed = o->seed };
	struct uext4_opts mo = { .commit_secs = w->commit_secs ? w->commit_secs : 3600 };
	int err, rc;

	pthread_mutex_init(&c.mu, NULL);
	printf("workload %s (%s), seed %llu\n", w->name, w->what, (unsigned long long)o->seed);
	c.dev = crashrec_open(o->image, &err);
	if (!c.dev) {
		printf("FAIL: crashrec_open %s: %s\n", o->image, uext4_last_error());
		return 1;
	}
	crashrec_hold(c.dev);   /* the mount's close leaves our reference */
	c.block_size = crashrec_unit(c.dev);
	err = super_mount_bdev(c.dev, &mo, &c.fs);
	if (err) {
		printf("FAIL: mount of the recording device: %s\n", uext4_last_error());
		bdev_close(c.dev);
		return 1;
	}
	rc = w->fn(&c) != 0;
	err = uext4_umount(c.fs);
	if (err)
		rc = wfail(&c, __LINE__, "uext4_umount", err) != 0;
	if (!rc)
		rc = explore(&c, o, total);
	else
		printf("FAIL: workload %s did not run to the end; no states checked\n", w->name);
	bdev_close(c.dev);
	ctx_free(&c);
	return rc;
}

/* ------------------------------------------------------------ overlay self-test */

struct ovl_arg {
	struct bdev *ovl;
	uint8_t *mirror;        /* expected contents; each thread owns a quarter */
	uint64_t lo, hi, rng;
	int bad;
};

/* Unaligned writes and reads inside [lo, hi), compared with a mirror. */
static void *ovl_thread(void *p)
{
	struct ovl_arg *a = p;
	uint8_t buf[10000], got[10000];

	for (int i = 0; i < 2000 && !a->bad; i++) {
		uint64_t len = rng_next(&a->rng) % sizeof(buf) + 1;
		uint64_t off = a->lo + rng_next(&a->rng) % (a->hi - a->lo - len);

		for (uint64_t j = 0; j < len; j++)
			buf[j] = (uint8_t)rng_next(&a->rng);
		if (i % 3 != 2) {
			if (bdev_write(a->ovl, buf, len, off))
				a->bad = 1;
			memcpy(a->mirror + off, buf, len);
		} else if (bdev_read(a->ovl, got, len, off) || memcmp(got, a->mirror + off, len)) {
			a->bad = 1;
		}
	}
	return NULL;
}

/* bdev_open_overlay: reads see writes (unaligned, several threads), the
 * base never changes, an odd-sized device's last chunk works. */
static int overlay_selftest(uint64_t seed)
{
	uint64_t size = 4 * 1024 * 1024 + 1536;        /* not a multiple of 4 KiB */
	struct bdev *base = bdev_open_memory(size), *ovl;
	uint8_t *orig = malloc(size), *mirror = malloc(size), *all = malloc(size);
	struct ovl_arg a[4];
	pthread_t t[4];
	int bad = 0;

	for (uint64_t i = 0; i < size; i++)
		orig[i] = (uint8_t)(i * 7 + i / 4096);
	bdev_write(base, orig, size, 0);
	memcpy(mirror, orig, size);
	ovl = bdev_open_overlay(base);
	for (int i = 0; i < 4; i++) {
		a[i] = (struct ovl_arg){ ovl, mirror, size / 4 * i, i == 3 ? size : size / 4 * (i + 1),
					 mix(seed + i) | 1, 0 };
		pthread_create(&t[i], NULL, ovl_thread, &a[i]);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(t[i], NULL);
		bad |= a[i].bad;
	}
	bad |= bdev_write(ovl, "tail", 4, size - 4) != 0;
	memcpy(mirror + size - 4, "tail", 4);
	bad |= bdev_read(ovl, all, size, 0) != 0 || memcmp(all, mirror, size) != 0;
	bad |= bdev_read(base, all, size, 0) != 0 || memcmp(all, orig, size) != 0;
	bad |= bdev_write(ovl, "x", 2, size - 1) == 0;  /* past the end: refused */
	bdev_close(ovl);       /* closes base too */
	free(orig);
	free(mirror);
	free(all);
	printf("overlay self-test (4 threads, unaligned I/O, odd size): %s\n", bad ? "FAIL" : "pass");
	return bad;
}

static void usage(void)
{
	fprintf(stderr, "usage: crash [-s SEED] [-m MAX_STATES] [-k K] [-j WORKERS] IMAGE "
		"WORKLOAD...|all\n       crash -l\n");
	exit(2);
}

int main(int argc, char **argv)
{
	struct opts o = { .max_states = 120, .only_k = -1, .workers = 2 };
	struct wstats total = { 0 };
	char scratch[512];
	const char *tmp = getenv("TMPDIR");
	int ch, rc = 0, nrun = 0;

	setvbuf(stdout, NULL, _IOLBF, 0);
	o.seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 20);
	while ((ch = getopt(argc, argv, "s:m:k:j:lFO")) != -1) {
		switch (ch) {
		case 's': o.seed = strtoull(optarg, NULL, 0); break;
		case 'm': o.max_states = (unsigned)atoi(optarg); break;
		case 'k': o.only_k = atoi(optarg); break;
		case 'F': o.fact_selftest = 1; break;
		case 'O': return overlay_selftest(o.seed);
		case 'j': o.workers = (unsigned)MAX(1, MIN(16, atoi(optarg))); break;
		case 'l':
			for (size_t i = 0; i < sizeof(workloads) / sizeof(workloads[0]); i++)
				printf("%-14s %s\n", workloads[i].name, workloads[i].what);
			return 0;
		default: usage();
		}
	}
	if (argc - optind < 2)
		usage();
	o.image = argv[optind++];
	snprintf(scratch, sizeof(scratch), "%s/uext4-crash.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(scratch)) {
		perror("mkdtemp");
		return 1;
	}
	o.scratch = scratch;
	printf("crash: image %s, seed %llu (crash -s %llu replays), at most %u states per "
	       "workload, recovery by %s\n", o.image, (unsigned long long)o.seed,
	       (unsigned long long)o.seed, o.max_states,
	       uext4_recover ? "uext4_recover()" : "read-write mount + unmount (no uext4_recover yet)");
	for (; optind < argc; optind++) {
		bool all = !strcmp(argv[optind], "all"), found = false;

		for (size_t i = 0; i < sizeof(workloads) / sizeof(workloads[0]); i++) {
			if (!all && strcmp(argv[optind], workloads[i].name))
				continue;
			found = true;
			rc |= run_workload(&workloads[i], &o, &total);
			nrun++;
		}
		if (!found) {
			printf("unknown workload %s\n", argv[optind]);
			rc = 1;
		}
	}
	rmdir(scratch);
	printf("crash: %d workloads, %u crash states checked, %u pass, %u fail (seed %llu)\n",
	       nrun, total.states, total.passed, total.states - total.passed,
	       (unsigned long long)o.seed);
	return rc;
}
