/*
 * unit_dirw.c - the directory write side (dir_add, dir_remove,
 * dir_retarget, dir_make, dir_is_empty) against an in-memory model.
 *
 * For each image flavour (4K ext4 with metadata_csum, 1K blocks, no
 * metadata_csum, ext3 block maps, no dir_index, inline_data, large_dir)
 * the test makes several directories, and one thread per directory adds
 * thousands of names of random length (1..255), removes random ones,
 * retargets some and adds again; after each phase every name is looked up
 * and the directory is listed (whole and in small resumed chunks) and
 * compared with the model.  Names are hard links to a few target inodes
 * per directory whose link counts are set to match at the end, so e2fsck
 * sees a consistent file system: after unmount `e2fsck -fn` must be clean.
 * Where loop mounts work the kernel mounts the image read-only and its
 * readdir must list exactly the model's names and inode numbers.
 *
 * 1K blocks with long names drive the index to 2 levels (and to 3 levels
 * with large_dir; without it the kernel's "directory index full" ENOSPC
 * must come back cleanly).
 *
 * Environment: UEXT4_DIRW_SEED (random seed), UEXT4_DIRW_SCALE (percent of
 * the default name counts; 25 under TSan), UEXT4_DIRW_KEEP (keep a failing
 * image).  An argument runs only the flavours whose name contains it.
 * Exit 0 pass, 1 fail, 77 skip.
 */
/* run-in: release asan tsan */
#include "bcache.h"
#include "dir.h"
#include "file.h"
#include "icache.h"
#include "inode.h"
#include "internal.h"
#include "lock.h"
#include "ondisk.h"
#include "trans.h"
#include "xattr.h"
#include "uext4.h"
#include "t.h"

#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define NTARGETS 8
#define MAXDIRS 4

static int failures;
static pthread_mutex_t out_lock = PTHREAD_MUTEX_INITIALIZER;

#define FAIL(...) do {                                                  \
	pthread_mutex_lock(&out_lock);                                  \
	fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);            \
	fprintf(stderr, __VA_ARGS__);                                   \
	fprintf(stderr, " (last error: %s)\n", uext4_last_error());     \
	failures++;                                                     \
	pthread_mutex_unlock(&out_lock);                                \
} while (0)

/* ------------------------------------------------------------ model */

struct ment {
	char name[256];
	uint8_t len;
	bool live;
	int target;             /* index into targets, or -1 for a foreign inode */
	uint64_t ino;
};

struct model {
	struct ment *e;
	size_t n, cap;
	uint32_t *table;        /* open addressing: index + 1, 0 empty */
	size_t tcap;
	size_t live;
};

static uint64_t name_hash(const char *s, size_t len)
{
	uint64_t h = 0xcbf29ce484222325ULL;

	for (size_t i = 0; i < len; i++)
		h = (h ^ (unsigned char)s[i]) * 0x100000001b3ULL;
	return h;
}

static void model_init(struct model *m, size_t cap)
{
	m->cap = cap;
	m->n = m->live = 0;
	m->e = calloc(cap, sizeof(*m->e));
	m->tcap = 1;
	while (m->tcap < cap * 2)
		m->tcap <<= 1;
	m->table = calloc(m->tcap, sizeof(*m->table));
	if (!m->e || !m->table) {
		perror("calloc");
		exit(1);
	}
}

static void model_free(struct model *m)
{
	free(m->e);
	free(m->table);
}

/* Index of name in the model (live or not), or -1. */
static long model_find(const struct model *m, const char *name, size_t len)
{
	for (size_t i = name_hash(name, len) & (m->tcap - 1);; i = (i + 1) & (m->tcap - 1)) {
		uint32_t v = m->table[i];

		if (!v)
			return -1;
		if (m->e[v - 1].len == len && memcmp(m->e[v - 1].name, name, len) == 0)
			return v - 1;
	}
}

static struct ment *model_insert(struct model *m, const char *name, size_t len)
{
	size_t i = name_hash(name, len) & (m->tcap - 1);

	if (m->n >= m->cap)
		return NULL;
	while (m->table[i])
		i = (i + 1) & (m->tcap - 1);
	m->table[i] = (uint32_t)(m->n + 1);
	struct ment *e = &m->e[m->n++];
	memcpy(e->name, name, len);
	e->len = (uint8_t)len;
	return e;
}

/* ------------------------------------------------------------ rng */

static uint64_t rng_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static const char name_chars[] =
	"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-+=,@";

static size_t random_name(uint64_t *rng, char *buf, unsigned minlen, unsigned maxlen)
{
	size_t len = minlen + rng_next(rng) % (maxlen - minlen + 1);

	for (size_t i = 0; i < len; i++)
		buf[i] = name_chars[rng_next(rng) % (sizeof(name_chars) - 1)];
	if ((len == 1 && buf[0] == '.') || (len == 2 && buf[0] == '.' && buf[1] == '.'))
		buf[0] = 'x';
	return len;
}

/* ------------------------------------------------------------ one directory */

struct dirtest {
	struct uext4_fs *fs;
	struct inode *dir;
	struct inode *targets[NTARGETS];
	uint32_t tlinks[NTARGETS];
	struct model m;
	uint64_t seed;
	unsigned nadd, minlen, maxlen;
	bool expect_full;       /* index may fill up: ENOSPC ends the adds */
	bool hit_full;
	int idx;
};

static int op_begin(struct dirtest *t, struct handle **h)
{
	urw_wrlock(&t->dir->lock);
	int err = handle_begin(t->fs, h);

	if (err)
		urw_unlock(&t->dir->lock);
	return err;
}

static int op_end(struct dirtest *t, struct handle *h, int err)
{
	int e2 = handle_end(h);

	urw_unlock(&t->dir->lock);
	return err ? err : e2;
}

static int add_name(struct dirtest *t, const char *name, size_t len, int target)
{
	struct handle *h;
	uint64_t ino;
	unsigned ft;
	int err = op_begin(t, &h);

	if (err)
		return err;
	err = dir_lookup_locked(t->fs, t->dir, name, len, &ino, &ft);
	if (err == 0)
		err = -EEXIST;
	else if (err == -ENOENT)
		err = dir_add(h, t->dir, name, len, t->targets[target]->ino, EXT4_FT_REG_FILE);
	return op_end(t, h, err);
}

static void phase_add(struct dirtest *t, uint64_t *rng, unsigned count)
{
	char name[256];

	for (unsigned i = 0; i < count && !t->hit_full; i++) {
		size_t len = random_name(rng, name, t->minlen, t->maxlen);
		int target = (int)(rng_next(rng) % NTARGETS);
		long at = model_find(&t->m, name, len);

		if (at >= 0 && t->m.e[at].live) {
			i--;
			continue;
		}
		int err = add_name(t, name, len, target);
		if (err == -ENOSPC && t->expect_full) {
			t->hit_full = true;
			pthread_mutex_lock(&out_lock);
			printf("  dir %d: ENOSPC after %zu names: %s\n", t->idx, t->m.live,
			       uext4_last_error());
			pthread_mutex_unlock(&out_lock);
			break;
		}
		if (err) {
			FAIL("dir %d: add '%.*s' (%zu bytes): %d", t->idx, (int)len, name, len, err);
			return;
		}
		struct ment *e = at >= 0 ? &t->m.e[at] : model_insert(&t->m, name, len);
		if (!e) {
			FAIL("model full");
			return;
		}
		e->live = true;
		e->target = target;
		e->ino = t->targets[target]->ino;
		t->tlinks[target]++;
		t->m.live++;
	}
}

/* A random live entry pointing at one of our targets, or NULL. */
static struct ment *pick_live(struct dirtest *t, uint64_t *rng)
{
	for (int tries = 0; tries < 1000; tries++) {
		struct ment *e = &t->m.e[rng_next(rng) % t->m.n];

		if (e->live && e->target >= 0 && !(e->len > 4 && !memcmp(e->name, "keep", 4)))
			return e;
	}
	return NULL;
}

static void phase_remove(struct dirtest *t, uint64_t *rng, unsigned count)
{
	for (unsigned i = 0; i < count; i++) {
		struct ment *e = pick_live(t, rng);
		struct handle *h;

		if (!e)
			break;
		/* First with a wrong inode number: -ESTALE, nothing changes. */
		int err = op_begin(t, &h);
		if (!err)
			err = op_end(t, h, dir_remove(h, t->dir, e->name, e->len, e->ino + 1));
		if (err != -ESTALE)
			FAIL("dir %d: remove '%.*s' with a wrong inode: %d", t->idx, e->len, e->name,
			     err);
		err = op_begin(t, &h);
		if (!err)
			err = op_end(t, h, dir_remove(h, t->dir, e->name, e->len, e->ino));
		if (err) {
			FAIL("dir %d: remove '%.*s': %d", t->idx, e->len, e->name, err);
			return;
		}
		e->live = false;
		t->tlinks[e->target]--;
		t->m.live--;
	}
	/* An absent name. */
	struct handle *h;
	int err = op_begin(t, &h);
	if (!err)
		err = op_end(t, h, dir_remove(h, t->dir, "no such name", 12, 1234));
	if (err != -ENOENT)
		FAIL("dir %d: removing an absent name gave %d", t->idx, err);
}

static void phase_retarget(struct dirtest *t, uint64_t *rng, unsigned count)
{
	for (unsigned i = 0; i < count; i++) {
		struct ment *e = pick_live(t, rng);
		int nt = (int)(rng_next(rng) % NTARGETS);
		struct handle *h;

		if (!e)
			break;
		int err = op_begin(t, &h);
		if (!err)
			err = op_end(t, h, dir_retarget(h, t->dir, e->name, e->len,
							t->targets[nt]->ino, EXT4_FT_REG_FILE));
		if (err) {
			FAIL("dir %d: retarget '%.*s': %d", t->idx, e->len, e->name, err);
			return;
		}
		t->tlinks[e->target]--;
		t->tlinks[nt]++;
		e->target = nt;
		e->ino = t->targets[nt]->ino;
	}
}

/* ------------------------------------------------------------ checks */

struct listing {
	struct dirtest *t;
	uint32_t *seen;         /* per model entry: pass number when listed */
	uint32_t pass;
	size_t count, dots;
	unsigned stop_every, since;
	uint64_t last_cookie;
	bool bad;
};

static int list_fill(void *ctx, const char *name, size_t len, uint64_t ino, unsigned dtype,
		     uint64_t next)
{
	struct listing *l = ctx;
	struct dirtest *t = l->t;

	l->last_cookie = next;
	if ((len == 1 && name[0] == '.') || (len == 2 && name[0] == '.' && name[1] == '.')) {
		l->dots++;
	} else {
		long at = model_find(&t->m, name, len);

		if (at < 0 || !t->m.e[at].live) {
			if (!l->bad)
				FAIL("dir %d: readdir lists '%.*s', not in the model", t->idx,
				     (int)len, name);
			l->bad = true;
		} else if (t->m.e[at].ino != ino || dtype != DT_REG) {
			if (!l->bad)
				FAIL("dir %d: readdir '%.*s' ino %lu type %u, model %lu", t->idx,
				     (int)len, name, (unsigned long)ino, dtype,
				     (unsigned long)t->m.e[at].ino);
			l->bad = true;
		} else if (l->seen[at] == l->pass) {
			if (!l->bad)
				FAIL("dir %d: readdir lists '%.*s' twice", t->idx, (int)len, name);
			l->bad = true;
		} else {
			l->seen[at] = l->pass;
		}
	}
	l->count++;
	return l->stop_every && ++l->since >= l->stop_every;
}

/* List the whole directory, stopping every stop_every entries and
 * resuming from the last cookie. */
static void check_listing(struct dirtest *t, struct listing *l, unsigned stop_every,
			  const char *phase)
{
	uint64_t cookie = 0;
	int err = 0;

	l->pass++;
	l->count = l->dots = 0;
	l->bad = false;
	l->stop_every = stop_every;
	for (;;) {
		size_t before = l->count;

		l->since = 0;
		err = dir_iterate(t->fs, t->dir, cookie, list_fill, l);
		if (err || l->count == before)
			break;
		cookie = l->last_cookie;
		if (!stop_every)
			break;
	}
	if (err)
		FAIL("dir %d %s: readdir: %d", t->idx, phase, err);
	if (l->count != t->m.live + 2 || l->dots != 2)
		FAIL("dir %d %s: readdir (chunks of %u) listed %zu entries (%zu dots), model "
		     "has %zu + 2", t->idx, phase, stop_every, l->count, l->dots,
		     t->m.live);
}

static void check_lookups(struct dirtest *t, const char *phase)
{
	size_t bad = 0;

	for (size_t i = 0; i < t->m.n; i++) {
		struct ment *e = &t->m.e[i];
		uint64_t ino = 0;
		unsigned dt = 0;
		int err = dir_lookup(t->fs, t->dir, e->name, e->len, &ino, &dt);

		if (e->live ? (err || ino != e->ino) : err != -ENOENT) {
			if (bad++ < 3)
				FAIL("dir %d %s: lookup '%.*s': %d ino %lu, model %s %lu", t->idx,
				     phase, e->len, e->name, err, (unsigned long)ino,
				     e->live ? "live" : "removed", (unsigned long)e->ino);
		}
	}
}

static void check_all(struct dirtest *t, struct listing *l, const char *phase)
{
	check_lookups(t, phase);
	check_listing(t, l, 0, phase);
	check_listing(t, l, 37, phase);
}

/* A reader running while the writer removes, retargets and adds: the
 * keepN names (never changed) must always be found, and every listing
 * (resumed in chunks, across leaf splits) must show each exactly once. */
struct reader {
	struct dirtest *t;
	_Atomic bool stop;
	unsigned keep_seen[NTARGETS];
	unsigned dots, since;
	uint64_t last_cookie;
	unsigned listings;
};

static int reader_fill(void *ctx, const char *name, size_t len, uint64_t ino, unsigned dtype,
		       uint64_t next)
{
	struct reader *r = ctx;

	r->last_cookie = next;
	if (len == 5 && !memcmp(name, "keep", 4) && name[4] >= '0' && name[4] < '0' + NTARGETS)
		r->keep_seen[name[4] - '0']++;
	if ((len == 1 && name[0] == '.') || (len == 2 && !memcmp(name, "..", 2)))
		r->dots++;
	return ++r->since >= 61;
}

static void *reader_thread(void *arg)
{
	struct reader *r = arg;
	struct dirtest *t = r->t;

	while (!atomic_load(&r->stop)) {
		uint64_t cookie = 0, ino;
		unsigned dt;
		int err;

		memset(r->keep_seen, 0, sizeof(r->keep_seen));
		r->dots = 0;
		do {
			r->since = 0;
			r->last_cookie = cookie;
			err = dir_iterate(t->fs, t->dir, cookie, reader_fill, r);
			if (r->last_cookie == cookie)
				break;
			cookie = r->last_cookie;
		} while (!err);
		if (err)
			FAIL("dir %d: concurrent readdir: %d", t->idx, err);
		for (int i = 0; i < NTARGETS; i++) {
			char name[8];

			if (r->keep_seen[i] != 1)
				FAIL("dir %d: concurrent readdir listed keep%d %u times", t->idx, i,
				     r->keep_seen[i]);
			snprintf(name, sizeof(name), "keep%d", i % 10);
			err = dir_lookup(t->fs, t->dir, name, 5, &ino, &dt);
			if (err || ino != t->targets[i]->ino)
				FAIL("dir %d: concurrent lookup keep%d: %d", t->idx, i, err);
		}
		if (r->dots != 2)
			FAIL("dir %d: concurrent readdir listed %u dots", t->idx, r->dots);
		r->listings++;
		if (failures)
			break;
	}
	return NULL;
}

static void *dir_thread(void *arg)
{
	struct dirtest *t = arg;
	uint64_t rng = t->seed;
	struct listing l = { .t = t };
	struct reader rd = { .t = t };
	pthread_t rth;

	l.seen = calloc(t->m.cap, sizeof(*l.seen));
	phase_add(t, &rng, t->nadd);
	check_all(t, &l, "after adds");
	/* From here on the directory keeps its format (linear or htree), so
	 * readdir cookies stay meaningful for a concurrent reader. */
	pthread_create(&rth, NULL, reader_thread, &rd);
	phase_remove(t, &rng, (unsigned)(t->m.live / 3));
	check_all(t, &l, "after removes");
	phase_retarget(t, &rng, (unsigned)(t->m.live / 10));
	check_all(t, &l, "after retargets");
	if (!t->hit_full)
		phase_add(t, &rng, t->nadd / 4);
	check_all(t, &l, "after re-adds");
	atomic_store(&rd.stop, true);
	pthread_join(rth, NULL);
	pthread_mutex_lock(&out_lock);
	printf("  dir %d: %u concurrent listings checked\n", t->idx, rd.listings);
	pthread_mutex_unlock(&out_lock);
	free(l.seen);
	return NULL;
}

/* ".." retargeted (to the same parent, so e2fsck stays happy) and "."
 * looked up, whatever the directory's format. */
static void check_dotdot(struct dirtest *t)
{
	uint64_t root = t->fs->root->ino, ino = 0;
	struct handle *h;
	unsigned dt;
	int err = op_begin(t, &h);

	if (!err)
		err = op_end(t, h, dir_retarget(h, t->dir, "..", 2, root, EXT4_FT_DIR));
	if (err)
		FAIL("dir %d: retarget '..': %d", t->idx, err);
	if (dir_lookup(t->fs, t->dir, "..", 2, &ino, &dt) || ino != root || dt != DT_DIR)
		FAIL("dir %d: '..' is %lu type %u", t->idx, (unsigned long)ino, dt);
	if (dir_lookup(t->fs, t->dir, ".", 1, &ino, &dt) || ino != t->dir->ino)
		FAIL("dir %d: '.' is %lu", t->idx, (unsigned long)ino);
}

/* ------------------------------------------------------------ setup */

/* Depth of an htree directory: indirect_levels + 1, or 0 if linear. */
static int htree_levels(struct uext4_fs *fs, struct inode *dir)
{
	struct buf *b;
	int levels = 0;

	urw_rdlock(&dir->lock);
	if ((dir->flags & EXT4_INDEX_FL) && inode_bread(fs, dir, 0, UEXT4_META_DIR, &b) == 0) {
		levels = ((struct dx_root_info *)(b->data + 24))->indirect_levels + 1;
		brelse(fs->bc, b);
	}
	urw_unlock(&dir->lock);
	return levels;
}

/* A new subdirectory of parent, linked as name. */
static struct inode *make_dir(struct uext4_fs *fs, struct inode *parent, const char *name)
{
	struct inode *d = NULL;
	struct handle *h;
	int err;

	urw_wrlock(&parent->lock);
	if ((err = handle_begin(fs, &h)) == 0) {
		err = inode_new(h, parent, S_IFDIR | 0755, &d);
		if (!err)
			err = dir_make(h, d, parent->ino);
		if (!err)
			err = dir_add(h, parent, name, strlen(name), d->ino, EXT4_FT_DIR);
		if (!err) {
			d->links = 2;
			parent->links++;
			err = inode_write(h, d);
		}
		if (!err)
			err = inode_write(h, parent);
		err = err ? err : handle_end(h);
		if (err && h)
			handle_end(h);
	}
	urw_unlock(&parent->lock);
	if (err) {
		FAIL("mkdir %s: %d", name, err);
		return NULL;
	}
	return d;
}

/* The targets, each with a "keepN" name that is never removed. */
static int make_targets(struct dirtest *t)
{
	for (int i = 0; i < NTARGETS; i++) {
		struct handle *h;
		char name[16];
		int err = op_begin(t, &h);

		if (err)
			return err;
		err = inode_new(h, t->dir, S_IFREG | 0644, &t->targets[i]);
		err = op_end(t, h, err);
		if (err)
			return err;
		/* A link count > 0 at once, so the inode is never freed. */
		t->targets[i]->links = 1;
		snprintf(name, sizeof(name), "keep%d", i);
		if ((err = add_name(t, name, strlen(name), i)))
			return err;
		struct ment *e = model_insert(&t->m, name, strlen(name));
		e->live = true;
		e->target = i;
		e->ino = t->targets[i]->ino;
		t->tlinks[i] = 1;
		t->m.live++;
	}
	return 0;
}

/* Write the targets' link counts as the model counts them. */
static int fix_links(struct dirtest *t)
{
	int err = 0;

	for (int i = 0; i < NTARGETS && !err; i++) {
		struct inode *x = t->targets[i];
		struct handle *h;

		urw_wrlock(&x->lock);
		if ((err = handle_begin(t->fs, &h)) == 0) {
			x->links = t->tlinks[i];
			err = inode_write(h, x);
			int e2 = handle_end(h);
			err = err ? err : e2;
		}
		urw_unlock(&x->lock);
	}
	return err;
}

/* Kernel check: readdir of each directory through a read-only loop mount
 * lists exactly the model. */
static void kernel_compare(const char *img, struct dirtest *ts, int ndirs, char names[][16])
{
	char mnt[] = "/tmp/dirw_mnt_XXXXXX";
	char cmd[512];

	if (!t_can_loop() || !mkdtemp(mnt)) {
		printf("  kernel check skipped (not root, or no loop device)\n");
		return;
	}
	snprintf(cmd, sizeof(cmd), "mount -o loop,ro -t ext4 %s %s 2>/dev/null", img, mnt);
	if (t_sh("%s", cmd) != 0) {
		printf("  kernel check skipped (loop mount failed)\n");
		rmdir(mnt);
		return;
	}
	for (int d = 0; d < ndirs; d++) {
		struct dirtest *t = &ts[d];
		char path[300];
		size_t count = 0, bad = 0;
		DIR *dp;
		struct dirent *de;

		snprintf(path, sizeof(path), "%s/%s", mnt, names[d]);
		if (!(dp = opendir(path))) {
			FAIL("kernel: opendir %s", path);
			continue;
		}
		while ((de = readdir(dp))) {
			size_t len = strlen(de->d_name);
			long at;

			if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
				continue;
			count++;
			at = model_find(&t->m, de->d_name, len);
			if ((at < 0 || !t->m.e[at].live || t->m.e[at].ino != de->d_ino) &&
			    bad++ < 3)
				FAIL("kernel: %s lists '%s' ino %lu, not in the model", names[d],
				     de->d_name, (unsigned long)de->d_ino);
		}
		closedir(dp);
		if (count != t->m.live)
			FAIL("kernel: %s lists %zu names, model %zu", names[d], count, t->m.live);
	}
	snprintf(cmd, sizeof(cmd), "umount %s", mnt);
	if (t_sh("%s", cmd) != 0)
		FAIL("umount %s", mnt);
	rmdir(mnt);
	printf("  kernel readdir matches the model\n");
}

struct flavour {
	const char *name;
	const char *mkfs;       /* mke2fs options */
	int ndirs;
	unsigned nadd, minlen, maxlen;
	bool expect_full;       /* may hit "directory index full" */
	int want_levels;        /* minimum htree depth of dir 0 at the end */
	const char *post;       /* debugfs requests (\n-separated) for the fresh image */
	unsigned size_mb;       /* image size, 0 = 512 MiB */
};

/* TSan runs about 10x slower: a quarter of the names by default there
 * (the depth targets are only checked at full scale). */
#if defined(__SANITIZE_THREAD__)
static int scale_pct = 25;
#else
static int scale_pct = 100;
#endif

static void run_flavour(const struct flavour *fl, uint64_t seed)
{
	char img[] = "/tmp/dirw_XXXXXX";
	char cmd[512], dnames[MAXDIRS][16];
	struct dirtest ts[MAXDIRS];
	pthread_t th[MAXDIRS];
	struct uext4_opts o = { 0 };
	struct uext4_fs *fs;
	int fd = mkstemp(img), err, fail0 = failures;
	unsigned nadd = (unsigned)((uint64_t)fl->nadd * (unsigned)scale_pct / 100);

	printf("%s (mke2fs %s): %d directories x %u names of %u..%u bytes\n", fl->name,
	       fl->mkfs, fl->ndirs, nadd, fl->minlen, fl->maxlen);
	fflush(stdout);
	if (fd < 0) {
		FAIL("mkstemp");
		return;
	}
	close(fd);
	snprintf(cmd, sizeof(cmd), "mke2fs -q -F %s %s %uM >/dev/null 2>&1", fl->mkfs, img,
		 fl->size_mb ? fl->size_mb : 512);
	if (t_sh("%s", cmd) != 0) {
		FAIL("%s", cmd);
		unlink(img);
		return;
	}
	if (fl->post) {
		snprintf(cmd, sizeof(cmd), "printf '%s' | debugfs -w -f - %s >/dev/null 2>&1",
			 fl->post, img);
		if (t_sh("%s", cmd) != 0)
			FAIL("%s", cmd);
	}
	if ((err = uext4_mount(img, &o, &fs))) {
		FAIL("mount %s: %d", img, err);
		unlink(img);
		return;
	}
	memset(ts, 0, sizeof(ts));
	for (int d = 0; d < fl->ndirs; d++) {
		struct dirtest *t = &ts[d];

		snprintf(dnames[d], sizeof(dnames[d]), "d%d", d);
		t->fs = fs;
		t->idx = d;
		t->seed = seed + (uint64_t)d * 7919;
		t->nadd = nadd;
		t->minlen = fl->minlen;
		t->maxlen = fl->maxlen;
		t->expect_full = fl->expect_full;
		model_init(&t->m, nadd + nadd / 4 + NTARGETS + 16);
		if (!(t->dir = make_dir(fs, fs->root, dnames[d])))
			goto out;
		if (dir_is_empty(fs, t->dir) != 1)
			FAIL("new directory %s is not empty", dnames[d]);
		if ((err = make_targets(t))) {
			FAIL("targets: %d", err);
			goto out;
		}
		if (dir_is_empty(fs, t->dir) != 0)
			FAIL("directory %s with names is empty", dnames[d]);
	}
	for (int d = 0; d < fl->ndirs; d++)
		pthread_create(&th[d], NULL, dir_thread, &ts[d]);
	for (int d = 0; d < fl->ndirs; d++)
		pthread_join(th[d], NULL);
	for (int d = 0; d < fl->ndirs; d++)
		check_dotdot(&ts[d]);
	for (int d = 0; d < fl->ndirs; d++) {
		int lv = htree_levels(fs, ts[d].dir);

		printf("  d%d: %zu names, %lu blocks, htree levels %d%s\n", d, ts[d].m.live,
		       (unsigned long)(ts[d].dir->size / fs->block_size), lv,
		       ts[d].hit_full ? " (index full)" : "");
		if (d == 0 && lv < fl->want_levels && scale_pct >= 100)
			FAIL("d0 reached %d htree levels, want %d", lv, fl->want_levels);
		if (fl->expect_full && !ts[d].hit_full && lv < 3 && scale_pct >= 100)
			FAIL("d%d: expected the index to fill up", d);
		if ((err = fix_links(&ts[d])))
			FAIL("link counts: %d", err);
	}
out:
	for (int d = 0; d < fl->ndirs; d++) {
		for (int i = 0; i < NTARGETS; i++)
			if (ts[d].targets[i])
				iput(fs, ts[d].targets[i]);
		if (ts[d].dir)
			iput(fs, ts[d].dir);
	}
	if ((err = uext4_umount(fs)))
		FAIL("umount: %d", err);
	snprintf(cmd, sizeof(cmd), "e2fsck -fn %s > %s.fsck 2>&1", img, img);
	if (t_sh("%s", cmd) != 0) {
		FAIL("e2fsck -fn %s not clean:", img);
		snprintf(cmd, sizeof(cmd), "head -30 %s.fsck >&2", img);
		t_sh("%s", cmd);
	} else {
		printf("  e2fsck -fn clean\n");
	}
	if (failures == fail0)
		kernel_compare(img, ts, fl->ndirs, dnames);
	for (int d = 0; d < fl->ndirs; d++)
		model_free(&ts[d].m);
	snprintf(cmd, sizeof(cmd), "%s.fsck", img);
	unlink(cmd);
	if (failures == fail0 || getenv("UEXT4_DIRW_KEEP") == NULL)
		unlink(img);
	else
		printf("  image kept: %s\n", img);
	fflush(stdout);
}

/* ------------------------------------------------------------ inline_data */

/* inl3 holds more than i_block: remove an entry of the system.data part
 * and the first of the i_block part in place, and give both inodes a
 * name in t's directory (so link counts stay right). */
static void inline_xattr_part(struct uext4_fs *fs, struct dirtest *t)
{
	static const char *names[] = { "file_004", "file_000" };
	struct inode *d3;
	uint64_t ino;
	unsigned dt;
	struct handle *h;
	int err;

	if (dir_lookup(fs, fs->root, "inl3", 4, &ino, &dt) || iget(fs, ino, &d3)) {
		FAIL("inl3 missing");
		return;
	}
	size_t xlen = 0;
	ssize_t got = xattr_get_raw(fs, d3, EXT4_XATTR_INDEX_SYSTEM, "data", 4, NULL, 0);
	if (got > 0)
		xlen = (size_t)got;
	printf("  inl3: inline flag %d, %zu bytes in system.data\n",
	       !!(d3->flags & EXT4_INLINE_DATA_FL), xlen);
	if (!(d3->flags & EXT4_INLINE_DATA_FL) || xlen == 0)
		FAIL("the kernel did not make inl3 an inline directory with a system.data part");
	for (int i = 0; i < 2; i++) {
		uint64_t x = 0;

		if (dir_lookup(fs, d3, names[i], 8, &x, &dt)) {
			FAIL("inl3: lookup %s", names[i]);
			break;
		}
		urw_wrlock(&d3->lock);
		if ((err = handle_begin(fs, &h)) == 0) {
			err = dir_remove(h, d3, names[i], 8, x);
			int e2 = handle_end(h);
			err = err ? err : e2;
		}
		urw_unlock(&d3->lock);
		if (err || dir_lookup(fs, d3, names[i], 8, &ino, &dt) != -ENOENT ||
		    !(d3->flags & EXT4_INLINE_DATA_FL))
			FAIL("inl3: remove %s: %d", names[i], err);
		urw_wrlock(&t->dir->lock);
		if ((err = handle_begin(fs, &h)) == 0) {
			err = dir_add(h, t->dir, names[i], 8, x, EXT4_FT_REG_FILE);
			int e2 = handle_end(h);
			err = err ? err : e2;
		}
		urw_unlock(&t->dir->lock);
		if (err)
			FAIL("re-add %s: %d", names[i], err);
		struct ment *e = model_insert(&t->m, names[i], 8);
		e->live = true;
		e->target = -1;
		e->ino = x;
		t->m.live++;
	}
	/* Rename file_005 inside inl3 to a name longer than the room left
	 * inline (a shorter one now fits where the removed entries were, as
	 * on the kernel): the add moves inl3, system.data part included, to a
	 * block. */
	char long5[101];
	memset(long5, 'r', 100);
	memcpy(long5, "file_005_", 9);
	long5[100] = 0;
	uint64_t x5 = 0;
	if (dir_lookup(fs, d3, "file_005", 8, &x5, &dt))
		FAIL("inl3: lookup file_005");
	urw_wrlock(&d3->lock);
	if ((err = handle_begin(fs, &h)) == 0) {
		err = dir_remove(h, d3, "file_005", 8, x5);
		if (!err)
			err = dir_add(h, d3, long5, 100, x5, EXT4_FT_REG_FILE);
		int e2 = handle_end(h);
		err = err ? err : e2;
	}
	urw_unlock(&d3->lock);
	if (err || (d3->flags & EXT4_INLINE_DATA_FL))
		FAIL("inl3: rename file_005 (conversion with a system.data part): %d", err);
	if (dir_lookup(fs, d3, long5, 100, &ino, &dt) || ino != x5)
		FAIL("inl3: %s", long5);
	for (int i = 1; i < 6; i++) {
		char nm[16];

		snprintf(nm, sizeof(nm), "file_00%d", i % 10);
		if (i < 4 && dir_lookup(fs, d3, nm, 8, &ino, &dt))
			FAIL("inl3: %s lost", nm);
		if (i >= 4 && dir_lookup(fs, d3, nm, 8, &ino, &dt) != -ENOENT)
			FAIL("inl3: %s still there", nm);
	}
	if (dir_is_empty(fs, d3) != 0)
		FAIL("inl3 empty");
	iput(fs, d3);
}

/* Inline directories made by debugfs: edit in place, then convert. */
static void run_inline(uint64_t seed)
{
	char img[] = "/tmp/dirw_inl_XXXXXX";
	char cmd[1024];
	int fd = mkstemp(img), err;
	struct uext4_opts o = { 0 };
	struct uext4_fs *fs;
	struct inode *d1 = NULL, *d2 = NULL;
	uint64_t ino_a = 0, ino_b = 0, ino_c = 0, ino;
	unsigned dt;
	struct handle *h;
	struct dirtest t = { .idx = 0 };
	char knames[1][16] = { "inl1" };

	model_init(&t.m, 2000 + 8);
	printf("inline_data directories (debugfs-made, edited, then moved to a block)\n");
	if (fd < 0)
		return;
	close(fd);
	snprintf(cmd, sizeof(cmd),
		 "mke2fs -q -F -t ext4 -O inline_data %s 64M >/dev/null 2>&1 && "
		 "debugfs -w %s -R 'mkdir inl1' >/dev/null 2>&1 && "
		 "debugfs -w %s -R 'mkdir inl2' >/dev/null 2>&1 && "
		 "for f in a b c; do debugfs -w %s -R \"write /dev/null inl1/$f\" >/dev/null 2>&1; done",
		 img, img, img, img);
	if (t_sh("%s", cmd) != 0) {
		FAIL("%s", cmd);
		goto out_unlink;
	}
	/* An inline directory whose entries spill into system.data: only the
	 * kernel makes those (debugfs moves a full inline directory to a
	 * block), so where loop mounts work it writes one. */
	char mnt[] = "/tmp/dirw_imnt_XXXXXX";
	bool have_inl3 = false;
	if (t_can_loop() && mkdtemp(mnt)) {
		snprintf(cmd, sizeof(cmd), "mount -o loop -t ext4 %s %s 2>/dev/null && "
			 "mkdir %s/inl3 && touch %s/inl3/file_000 %s/inl3/file_001 "
			 "%s/inl3/file_002 %s/inl3/file_003 %s/inl3/file_004 %s/inl3/file_005; "
			 "umount %s", img, mnt, mnt, mnt, mnt, mnt, mnt, mnt, mnt, mnt);
		have_inl3 = t_sh("%s", cmd) == 0;
		rmdir(mnt);
	}
	if (!have_inl3)
		printf("  no loop mount: the system.data part of inline directories is not "
		       "tested\n");
	if ((err = uext4_mount(img, &o, &fs))) {
		FAIL("mount: %d", err);
		goto out_unlink;
	}
	if (dir_lookup(fs, fs->root, "inl1", 4, &ino, &dt) || iget(fs, ino, &d1) ||
	    dir_lookup(fs, fs->root, "inl2", 4, &ino, &dt) || iget(fs, ino, &d2)) {
		FAIL("inline dirs missing");
		goto out_umount;
	}
	if (!(d1->flags & EXT4_INLINE_DATA_FL)) {
		printf("  debugfs made no inline directory: inline part skipped\n");
		goto out_umount;
	}
	if (dir_lookup(fs, d1, "a", 1, &ino_a, &dt) || dir_lookup(fs, d1, "b", 1, &ino_b, &dt) ||
	    dir_lookup(fs, d1, "c", 1, &ino_c, &dt))
		FAIL("inline lookups");
	if (dir_is_empty(fs, d2) != 1 || dir_is_empty(fs, d1) != 0)
		FAIL("inline dir_is_empty");
	/* ".." of an inline directory is the parent number in i_block. */
	urw_wrlock(&d2->lock);
	if ((err = handle_begin(fs, &h)) == 0) {
		err = dir_retarget(h, d2, "..", 2, UEXT4_ROOT_INO, EXT4_FT_DIR);
		int e2 = handle_end(h);
		err = err ? err : e2;
	}
	urw_unlock(&d2->lock);
	if (err || dir_lookup(fs, d2, "..", 2, &ino, &dt) || ino != UEXT4_ROOT_INO ||
	    !(d2->flags & EXT4_INLINE_DATA_FL))
		FAIL("inline '..' retarget: %d", err);
	/* Remove "a" and move it to inl2 ... no: inl2 stays inline and empty.
	 * "a" goes back into inl1 after the conversion below. */
	urw_wrlock(&d1->lock);
	err = handle_begin(fs, &h);
	if (!err) {
		int e1 = dir_remove(h, d1, "a", 1, ino_a);
		int e2 = dir_retarget(h, d1, "b", 1, ino_c, EXT4_FT_REG_FILE);
		int e3 = dir_retarget(h, d1, "c", 1, ino_b, EXT4_FT_REG_FILE);
		err = e1 ? e1 : e2 ? e2 : e3;
		int e4 = handle_end(h);
		err = err ? err : e4;
	}
	urw_unlock(&d1->lock);
	if (err)
		FAIL("inline remove/retarget: %d", err);
	if (!(d1->flags & EXT4_INLINE_DATA_FL))
		FAIL("inline directory converted by a remove");
	if (dir_lookup(fs, d1, "a", 1, &ino, &dt) != -ENOENT ||
	    dir_lookup(fs, d1, "b", 1, &ino, &dt) || ino != ino_c ||
	    dir_lookup(fs, d1, "c", 1, &ino, &dt) || ino != ino_b)
		FAIL("inline lookups after edits");
	/* Adds: the first moves the directory to a block; then many more
	 * (through an htree); "a" comes back last so its link count holds. */
	uint64_t rng = seed;
	char name[256];
	unsigned n = 2000;

	t.fs = fs;
	t.dir = d1;
	urw_wrlock(&d1->lock);
	err = handle_begin(fs, &h);
	if (!err) {
		for (unsigned i = 0; i < n && !err; i++) {
			size_t len = random_name(&rng, name, 3, 255);

			if (model_find(&t.m, name, len) >= 0)
				continue;
			err = dir_add(h, d1, name, len, ino_c, EXT4_FT_REG_FILE);
			struct ment *e = model_insert(&t.m, name, len);
			e->live = true;
			e->ino = ino_c;
			e->target = -1;
			t.m.live++;
		}
		if (!err)
			err = dir_add(h, d1, "a", 1, ino_a, EXT4_FT_REG_FILE);
		int e2 = handle_end(h);
		err = err ? err : e2;
	}
	urw_unlock(&d1->lock);
	if (err)
		FAIL("adds to the inline directory: %d", err);
	if (d1->flags & EXT4_INLINE_DATA_FL)
		FAIL("inline directory not converted by an add");
	for (const char *s = "abc"; *s; s++) {
		struct ment *e = model_insert(&t.m, s, 1);
		e->live = true;
		e->target = -1;
		e->ino = *s == 'a' ? ino_a : *s == 'b' ? ino_c : ino_b;
		t.m.live++;
	}
	struct listing l = { .t = &t, .seen = calloc(t.m.cap, sizeof(uint32_t)) };
	check_all(&t, &l, "inline converted");
	free(l.seen);
	printf("  inl1 now %lu blocks, htree levels %d\n",
	       (unsigned long)(d1->size / fs->block_size), htree_levels(fs, d1));
	if (have_inl3)
		inline_xattr_part(fs, &t);
	/* ino_c has 1 + n links now (b and the new names): set it. */
	struct inode *c;
	if (iget(fs, ino_c, &c) == 0) {
		urw_wrlock(&c->lock);
		if (handle_begin(fs, &h) == 0) {
			c->links = (uint32_t)(t.m.live - (have_inl3 ? 4 : 2));
			inode_write(h, c);
			handle_end(h);
		}
		urw_unlock(&c->lock);
		iput(fs, c);
	}
out_umount:
	if (d1)
		iput(fs, d1);
	if (d2)
		iput(fs, d2);
	if ((err = uext4_umount(fs)))
		FAIL("umount: %d", err);
	snprintf(cmd, sizeof(cmd), "e2fsck -fn %s > %s.fsck 2>&1", img, img);
	if (t_sh("%s", cmd) != 0) {
		FAIL("e2fsck -fn %s not clean:", img);
		snprintf(cmd, sizeof(cmd), "head -30 %s.fsck >&2", img);
		t_sh("%s", cmd);
	} else {
		printf("  e2fsck -fn clean\n");
		if (t.m.live)
			kernel_compare(img, &t, 1, knames);
	}
	snprintf(cmd, sizeof(cmd), "%s.fsck", img);
	unlink(cmd);
out_unlink:
	model_free(&t.m);
	unlink(img);
}

int main(int argc, char **argv)
{
	static const struct flavour flavours[] = {
		{ "4K ext4, metadata_csum", "-t ext4 -b 4096", 4, 12000, 1, 255, false, 2, NULL, 0 },
		{ "1K ext4, metadata_csum", "-t ext4 -b 1024", 4, 6000, 1, 255, false, 2, NULL, 0 },
		{ "1K ext4, no metadata_csum", "-t ext4 -b 1024 -O ^metadata_csum", 2, 6000, 1, 255,
		  false, 2, NULL, 0 },
		{ "1K ext3 (block maps)", "-t ext3 -b 1024", 2, 5000, 1, 255, false, 2, NULL, 0 },
		{ "4K ext4, no dir_index (linear)", "-t ext4 -O ^dir_index", 2, 3000, 1, 255, false,
		  0, NULL, 0 },
		{ "1K ext4, long names, no large_dir", "-t ext4 -b 1024", 1, 40000, 200, 255, true,
		  2, NULL, 0 },
		{ "1K ext4, long names, large_dir", "-t ext4 -b 1024 -O large_dir", 1, 40000, 200,
		  255, false, 3, NULL, 0 },
		{ "1K ext4, tea hash, unsigned", "-t ext4 -b 1024", 1, 6000, 1, 255, false, 2,
		  "ssv def_hash_version tea\\nssv flags 2\\n", 0 },
		{ "4K ext4, legacy hash, short names", "-t ext4", 1, 20000, 1, 12, false, 1,
		  "ssv def_hash_version legacy\\n", 0 },
		{ "1K ext4, disk full", "-t ext4 -b 1024", 1, 40000, 200, 255, true, 1, NULL, 6 },
		{ "4K ext4, inline_data (new dirs are block dirs)", "-t ext4 -O inline_data", 2,
		  3000, 1, 255, false, 1, NULL, 0 },
	};
	uint64_t seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 20);
	const char *only = argc > 1 ? argv[1] : NULL;

	if (getenv("UEXT4_DIRW_SEED"))
		seed = strtoull(getenv("UEXT4_DIRW_SEED"), NULL, 0);
	if (getenv("UEXT4_DIRW_SCALE"))
		scale_pct = atoi(getenv("UEXT4_DIRW_SCALE"));
	t_need_tools("mke2fs e2fsck");
	printf("unit_dirw: seed %llu (UEXT4_DIRW_SEED), scale %d%%\n", (unsigned long long)seed,
	       scale_pct);
	for (size_t i = 0; i < sizeof(flavours) / sizeof(flavours[0]); i++) {
		if (only && !strstr(flavours[i].name, only))
			continue;
		run_flavour(&flavours[i], seed + i * 1000003);
	}
	if (!only || strstr("inline", only))
		run_inline(seed);
	printf(failures ? "unit_dirw: %d FAILURES\n" : "unit_dirw: all passed\n", failures);
	return failures ? 1 : 0;
}
