/*
 * unit_namecache.c - the name cache (src/namecache.c) never answers with a
 * stale positive or negative entry.
 *
 * Each check warms the cache first: the names an operation touches are
 * looked up (twice: the first lookup inserts, the second is answered from
 * the cache) before the operation, and looked up again after it, through
 * uext4_lookup() and uext4_stat_path().  For every namespace operation:
 * create, mkdir, mknod, symlink and link over a negative entry; unlink and
 * rmdir of a positive one; rename in one directory, across directories,
 * over an existing name, NOREPLACE (refused: nothing changes), EXCHANGE
 * (also of two directories: ".." of both), WHITEOUT; ".." of a directory
 * moved elsewhere; a removed directory's inode number reused by a new
 * directory (".." and a negative entry looked up inside); names of 48
 * (the longest cached), 49 and 255 bytes.  The scenario runs in a linear
 * directory, an htree directory (300 entries) and an inline-data directory
 * (made by debugfs, converted to a block directory by the first create),
 * each with the default cache, a one-bucket cache (UEXT4_NAMECACHE=4:
 * every insert replaces another entry) and with the cache off
 * (uext4_opts.no_name_cache), so a difference between the three is a
 * failure.  The same three for a casefolded directory (+F), where names
 * are looked up, created, unlinked and renamed under several cases
 * (casefold_scenario()).
 *
 * Concurrency: 2 writer threads own disjoint name sets in two shared
 * directories and create, unlink and rename (in and across the two
 * directories, and over their own names) at random, checking each of
 * their names by lookup after each operation, while 2 reader threads look
 * up every name of both directories as fast as they can (so inserts race
 * with the changes).  At the end every name is looked up and compared with
 * what readdir (which never uses the cache) says and with the writers'
 * records.  Then the same race narrowed to one name: 2 readers look it
 * up without pause while a writer creates and unlinks it, each step
 * followed by a lookup that must agree, with every insert delayed by
 * 50 us after its directory read (UEXT4_NAMECACHE_DELAY_US) so that
 * changes fall between reads and inserts (without the token check this
 * finds stale entries in every run).  The seed is printed (NC_SEED=N replays the operation streams;
 * NC_OPS=N sets each writer's operations).  e2fsck -fn must be clean after
 * every unmount.
 */
/* run-in: release asan tsan */
#include "uext4.h"
#include "t.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/wait.h>
#include <unistd.h>

static char tmpdir[128];

/* How a scenario mounts: the cache's configuration. */
enum nc_mode { NC_DEFAULT, NC_TINY, NC_OFF };
static const char *const mode_name[] = {"default cache", "one-bucket cache", "cache off"};

static uext4_fs *mount_rw(const char *img, enum nc_mode m)
{
	struct uext4_opts o = {0};
	uext4_fs *fs = NULL;
	int err;

	if (m == NC_TINY)
		setenv("UEXT4_NAMECACHE", "4", 1);
	else
		unsetenv("UEXT4_NAMECACHE");
	o.no_name_cache = m == NC_OFF;
	err = uext4_mount(img, &o, &fs);
	unsetenv("UEXT4_NAMECACHE");
	if (err) {
		fprintf(stderr, "mount %s: %d %s\n", img, err, uext4_last_error());
		exit(T_FAIL);
	}
	return fs;
}

static void umount_and_fsck(uext4_fs *fs, const char *img, const char *what)
{
	int rc = uext4_umount(fs);

	T_CHECK(rc == 0, "%s: umount: %d %s", what, rc, uext4_last_error());
	if (!t_fsck_clean(img))
		fprintf(stderr, "  (after %s)\n", what);
}

/* ------------------------------------------------------------- checks */

struct ctx {
	uext4_fs *fs;
	const char *what;       /* scenario, for messages */
	uint64_t d, e;          /* the directory under test and a second one */
	char dpath[64], epath[64]; /* their paths from the root */
};

/* name in dir must be want (0: absent), by lookup and by path. */
static void expect(struct ctx *c, uint64_t dir, const char *dpath, const char *name,
		   uint64_t want, const char *when)
{
	struct uext4_stat st;
	char path[400];

	for (int i = 0; i < 2; i++) { /* the second one is served by the cache */
		int r = uext4_lookup(c->fs, dir, name, &st);

		if (want)
			T_CHECK(r == 0 && st.ino == want, "%s, %s: lookup %s/%s: %d ino %llu, want %llu",
				c->what, when, dpath, name, r, r ? 0ull : (unsigned long long)st.ino,
				(unsigned long long)want);
		else
			T_CHECK(r == -ENOENT, "%s, %s: lookup %s/%s: %d (ino %llu), want ENOENT",
				c->what, when, dpath, name, r, r ? 0ull : (unsigned long long)st.ino);
	}
	if (!dpath[0] || strlen(name) > 255)
		return;
	snprintf(path, sizeof(path), "%s/%s", dpath, name);
	int r = uext4_stat_path(c->fs, path, &st);
	if (want)
		T_CHECK(r == 0 && st.ino == want, "%s, %s: stat_path %s: %d, want ino %llu", c->what,
			when, path, r, (unsigned long long)want);
	else
		T_CHECK(r == -ENOENT, "%s, %s: stat_path %s: %d, want ENOENT", c->what, when, path, r);
}

static uint64_t ino_of(struct ctx *c, uint64_t dir, const char *name)
{
	struct uext4_stat st;

	return uext4_lookup(c->fs, dir, name, &st) == 0 ? st.ino : 0;
}

#define D(c, name, want, when) expect(c, (c)->d, (c)->dpath, name, want, when)
#define E(c, name, want, when) expect(c, (c)->e, (c)->epath, name, want, when)
#define OK(call) do { int r_ = (call); T_CHECK(r_ == 0, "%s: %s: %d %s", c->what, #call, r_, \
						   uext4_last_error()); } while (0)

static uint64_t mk(struct ctx *c, const char *name)
{
	struct uext4_stat st = {0};

	D(c, name, 0, "before create");
	OK(uext4_create(c->fs, c->d, name, 0644, &st));
	D(c, name, st.ino, "after create");
	return st.ino;
}

/* Create-like operations over warm negative entries. */
static void check_creates(struct ctx *c)
{
	struct uext4_stat st = {0};
	uint64_t a = mk(c, "a");

	D(c, "sub", 0, "before mkdir");
	OK(uext4_mkdir(c->fs, c->d, "sub", 0755, &st));
	D(c, "sub", st.ino, "after mkdir");
	D(c, "fifo", 0, "before mknod");
	OK(uext4_mknod(c->fs, c->d, "fifo", S_IFIFO | 0644, 0, &st));
	D(c, "fifo", st.ino, "after mknod");
	D(c, "sym", 0, "before symlink");
	OK(uext4_symlink(c->fs, c->d, "sym", "a", &st));
	D(c, "sym", st.ino, "after symlink");
	D(c, "hard", 0, "before link");
	OK(uext4_link(c->fs, a, c->d, "hard", &st));
	D(c, "hard", a, "after link");
	/* A refused create changes nothing. */
	T_CHECK(uext4_create(c->fs, c->d, "a", 0644, &st) == -EEXIST, "%s: create over a", c->what);
	D(c, "a", a, "after refused create");
}

static void check_removes(struct ctx *c)
{
	uint64_t a = ino_of(c, c->d, "a"), sub = ino_of(c, c->d, "sub");

	D(c, "a", a, "before unlink");
	OK(uext4_unlink(c->fs, c->d, "a"));
	D(c, "a", 0, "after unlink");
	D(c, "hard", a, "other link after unlink");
	D(c, "sub", sub, "before rmdir");
	OK(uext4_rmdir(c->fs, c->d, "sub"));
	D(c, "sub", 0, "after rmdir");
	T_CHECK(uext4_unlink(c->fs, c->d, "a") == -ENOENT, "%s: second unlink", c->what);
}

static void check_renames_here(struct ctx *c)
{
	uint64_t x = mk(c, "x"), z = mk(c, "z"), l = ino_of(c, c->d, "hard");

	D(c, "y", 0, "before rename x y");
	OK(uext4_rename(c->fs, c->d, "x", c->d, "y", 0));
	D(c, "x", 0, "after rename x y");
	D(c, "y", x, "after rename x y");
	/* Over an existing name. */
	D(c, "z", z, "before rename y z");
	OK(uext4_rename(c->fs, c->d, "y", c->d, "z", 0));
	D(c, "y", 0, "after rename y over z");
	D(c, "z", x, "after rename y over z");
	/* NOREPLACE onto an existing name: refused, nothing moves. */
	T_CHECK(uext4_rename(c->fs, c->d, "z", c->d, "hard", UEXT4_RENAME_NOREPLACE) == -EEXIST,
		"%s: rename NOREPLACE over hard", c->what);
	D(c, "z", x, "after refused NOREPLACE");
	D(c, "hard", l, "after refused NOREPLACE");
	D(c, "nr", 0, "before NOREPLACE to a new name");
	OK(uext4_rename(c->fs, c->d, "z", c->d, "nr", UEXT4_RENAME_NOREPLACE));
	D(c, "z", 0, "after NOREPLACE");
	D(c, "nr", x, "after NOREPLACE");
	/* EXCHANGE. */
	OK(uext4_rename(c->fs, c->d, "nr", c->d, "hard", UEXT4_RENAME_EXCHANGE));
	D(c, "nr", l, "after EXCHANGE");
	D(c, "hard", x, "after EXCHANGE");
	/* WHITEOUT: the old name becomes a new character device. */
	D(c, "w", 0, "before WHITEOUT");
	OK(uext4_rename(c->fs, c->d, "hard", c->d, "w", UEXT4_RENAME_WHITEOUT));
	D(c, "w", x, "after WHITEOUT");
	uint64_t wh = ino_of(c, c->d, "hard");
	struct uext4_stat st;
	T_CHECK(wh && wh != x && uext4_getattr(c->fs, wh, &st) == 0 && S_ISCHR(st.mode),
		"%s: whiteout in place of \"hard\": ino %llu", c->what, (unsigned long long)wh);
	OK(uext4_unlink(c->fs, c->d, "hard"));
	D(c, "hard", 0, "whiteout unlinked");
}

/* Renames between d and e, directories among them (".." follows). */
static void check_renames_across(struct ctx *c)
{
	struct uext4_stat st;
	uint64_t f = mk(c, "f");

	E(c, "f2", 0, "before cross rename");
	OK(uext4_rename(c->fs, c->d, "f", c->e, "f2", 0));
	D(c, "f", 0, "after cross rename");
	E(c, "f2", f, "after cross rename");
	OK(uext4_mkdir(c->fs, c->d, "dd", 0755, &st));
	uint64_t dd = st.ino;
	char ddpath[100];
	snprintf(ddpath, sizeof(ddpath), "%s/dd", c->dpath);
	expect(c, dd, ddpath, "..", c->d, "before moving dd");
	expect(c, dd, ddpath, "q", 0, "before moving dd");
	OK(uext4_rename(c->fs, c->d, "dd", c->e, "dd", 0));
	snprintf(ddpath, sizeof(ddpath), "%s/dd", c->epath);
	expect(c, dd, ddpath, "..", c->e, "after moving dd");
	D(c, "dd", 0, "after moving dd");
	E(c, "dd", dd, "after moving dd");
	/* Exchange two directories across parents: both ".." change. */
	OK(uext4_mkdir(c->fs, c->d, "ee", 0755, &st));
	uint64_t ee = st.ino;
	expect(c, ee, "", "..", c->d, "before exchange");
	OK(uext4_rename(c->fs, c->d, "ee", c->e, "dd", UEXT4_RENAME_EXCHANGE));
	expect(c, ee, "", "..", c->e, "after exchange");
	expect(c, dd, "", "..", c->d, "after exchange");
	D(c, "ee", dd, "after exchange");
	E(c, "dd", ee, "after exchange");
	/* Directory over an empty directory, across parents. */
	OK(uext4_rename(c->fs, c->d, "ee", c->e, "dd", 0));
	D(c, "ee", 0, "after rename over a dir");
	E(c, "dd", dd, "after rename over a dir");
	expect(c, dd, "", "..", c->e, "after rename over a dir");
}

/* A removed directory's number taken by a new directory: nothing of the
 * old one shows through (".." and names cached inside it). */
static void check_reuse(struct ctx *c)
{
	struct uext4_stat st;
	uint64_t first;

	OK(uext4_mkdir(c->fs, c->e, "r1", 0755, &st));
	first = st.ino;
	expect(c, first, "", "..", c->e, "old dir");
	expect(c, first, "", "q", 0, "old dir");
	OK(uext4_create(c->fs, first, "q", 0644, &st));
	expect(c, first, "", "q", st.ino, "old dir");
	OK(uext4_unlink(c->fs, first, "q"));
	OK(uext4_rmdir(c->fs, c->e, "r1"));
	for (int i = 0; i < 8; i++) { /* the number is usually the next one given out */
		char n[16];

		snprintf(n, sizeof(n), "r%d", i + 2);
		OK(uext4_mkdir(c->fs, c->d, n, 0755, &st));
		expect(c, st.ino, "", "..", c->d, "new dir (maybe reused number)");
		expect(c, st.ino, "", "q", 0, "new dir (maybe reused number)");
	}
}

static void check_long_names(struct ctx *c)
{
	static const size_t lens[] = {47, 48, 49, 200, 255};

	for (unsigned i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		char n[256], m[256];

		memset(n, 'a' + (char)i, lens[i]);
		n[lens[i]] = 0;
		snprintf(m, sizeof(m), "%s", n);
		m[0] = 'Z';
		uint64_t ino = mk(c, n);
		OK(uext4_rename(c->fs, c->d, n, c->d, m, 0));
		D(c, n, 0, "long name renamed");
		D(c, m, ino, "long name renamed");
		OK(uext4_unlink(c->fs, c->d, m));
		D(c, m, 0, "long name unlinked");
	}
}

/* Make dir ready: an htree needs many entries first. */
static void fill(struct ctx *c, int n)
{
	for (int i = 0; i < n; i++) {
		char name[64];
		struct uext4_stat st;

		snprintf(name, sizeof(name), "filler-with-a-long-name-%05d", i);
		OK(uext4_create(c->fs, c->d, name, 0644, &st));
	}
}

static void scenario(const char *img, const char *dname, enum nc_mode m, int fillers)
{
	struct ctx cc = {0}, *c = &cc;
	struct uext4_stat st;
	char what[128];

	snprintf(what, sizeof(what), "%s, %s", dname, mode_name[m]);
	c->what = what;
	c->fs = mount_rw(img, m);
	if (uext4_stat_path(c->fs, dname, &st)) {
		OK(uext4_mkdir(c->fs, 2, dname + 1, 0755, &st)); /* in the root */
		c->d = st.ino;
		fill(c, fillers);
	}
	c->d = st.ino;
	snprintf(c->dpath, sizeof(c->dpath), "%s", dname);
	snprintf(c->epath, sizeof(c->epath), "%s-other", dname);
	if (uext4_stat_path(c->fs, c->epath, &st))
		OK(uext4_mkdir(c->fs, 2, c->epath + 1, 0755, &st));
	c->e = st.ino;
	check_creates(c);
	check_removes(c);
	check_renames_here(c);
	check_renames_across(c);
	check_reuse(c);
	check_long_names(c);
	umount_and_fsck(c->fs, img, what);
}

/* ------------------------------------------------------------- threads */

#define NW 2                    /* writers */
#define NR 2                    /* readers */
#define PER_WRITER 24           /* names per writer */

struct shared {
	uext4_fs *fs;
	uint64_t dir[2];
	atomic_bool stop;
	atomic_ulong lookups;
};

struct writer {
	struct shared *s;
	int id;
	uint64_t rng;
	long ops;
	uint64_t ino[2][PER_WRITER];    /* what each own name should be (0: absent) */
};

static uint64_t rnd(uint64_t *x)
{
	return t_rnd(x);
}

static void wname(char *buf, size_t n, int w, int i)
{
	snprintf(buf, n, "w%d-name-%d", w, i);
}

static void wcheck(struct writer *w, int d, int i, const char *op)
{
	char name[32];
	struct uext4_stat st;

	wname(name, sizeof(name), w->id, i);
	int r = uext4_lookup(w->s->fs, w->s->dir[d], name, &st);
	if (w->ino[d][i])
		T_CHECK(r == 0 && st.ino == w->ino[d][i], "after %s: dir %d %s: %d ino %llu, want %llu",
			op, d, name, r, r ? 0ull : (unsigned long long)st.ino,
			(unsigned long long)w->ino[d][i]);
	else
		T_CHECK(r == -ENOENT, "after %s: dir %d %s: %d, want ENOENT", op, d, name, r);
}

static void writer_step(struct writer *w)
{
	uext4_fs *fs = w->s->fs;
	int d = (int)(rnd(&w->rng) % 2), i = (int)(rnd(&w->rng) % PER_WRITER);
	int d2 = (int)(rnd(&w->rng) % 2), j = (int)(rnd(&w->rng) % PER_WRITER);
	char a[32], b[32];
	struct uext4_stat st;

	wname(a, sizeof(a), w->id, i);
	wname(b, sizeof(b), w->id, j);
	if (!w->ino[d][i]) {
		int r = uext4_create(fs, w->s->dir[d], a, 0644, &st);
		T_CHECK(r == 0, "create %s: %d %s", a, r, uext4_last_error());
		w->ino[d][i] = r ? 0 : st.ino;
		wcheck(w, d, i, "create");
	} else if (rnd(&w->rng) % 3 == 0) {
		int r = uext4_unlink(fs, w->s->dir[d], a);
		T_CHECK(r == 0, "unlink %s: %d %s", a, r, uext4_last_error());
		w->ino[d][i] = 0;
		wcheck(w, d, i, "unlink");
	} else if (d != d2 || i != j) {
		unsigned fl = rnd(&w->rng) % 4 == 0 && w->ino[d2][j] ? UEXT4_RENAME_EXCHANGE : 0;
		int r = uext4_rename(fs, w->s->dir[d], a, w->s->dir[d2], b, fl);
		T_CHECK(r == 0, "rename %s -> %s flags %u: %d %s", a, b, fl, r, uext4_last_error());
		if (fl) {
			uint64_t x = w->ino[d][i];
			w->ino[d][i] = w->ino[d2][j];
			w->ino[d2][j] = x;
		} else {
			w->ino[d2][j] = w->ino[d][i];
			w->ino[d][i] = 0;
		}
		wcheck(w, d, i, "rename (old name)");
		wcheck(w, d2, j, "rename (new name)");
	}
}

static void *writer_main(void *arg)
{
	struct writer *w = arg;

	for (long k = 0; k < w->ops; k++)
		writer_step(w);
	return NULL;
}

static void *reader_main(void *arg)
{
	struct shared *s = arg;
	unsigned long n = 0;

	while (!atomic_load(&s->stop)) {
		for (int d = 0; d < 2; d++)
			for (int w = 0; w < NW; w++)
				for (int i = 0; i < PER_WRITER; i++) {
					char name[32];
					struct uext4_stat st;

					/* Stat what it finds: the number may be
					 * freed and reused by a writer between
					 * the name and the getattr, which loads
					 * the inode while its itable slot is
					 * rewritten, or stats a new inode while
					 * its create fills it in (both races in
					 * inode.c once; TSan guards them here). */
					wname(name, sizeof(name), w, i);
					uext4_lookup(s->fs, s->dir[d], name, &st);
					n++;
				}
	}
	atomic_fetch_add(&s->lookups, n);
	return NULL;
}

struct listing {
	char names[NW * PER_WRITER][32];
	uint64_t ino[NW * PER_WRITER];
	int n;
};

static int list_fill(void *ctx, const char *name, size_t len, uint64_t ino, unsigned dtype,
		     uint64_t next)
{
	struct listing *l = ctx;

	if (name[0] == '.' || l->n >= NW * PER_WRITER || len >= 32)
		return 0;
	memcpy(l->names[l->n], name, len);
	l->names[l->n][len] = 0;
	l->ino[l->n++] = ino;
	return 0;
}

/* After the run: lookups agree with readdir and with the writers. */
static void final_check(struct shared *s, struct writer *w)
{
	for (int d = 0; d < 2; d++) {
		struct listing *l = calloc(1, sizeof(*l));

		T_CHECK(uext4_readdir(s->fs, s->dir[d], 0, list_fill, l) == 0, "readdir %d", d);
		for (int k = 0; k < NW; k++)
			for (int i = 0; i < PER_WRITER; i++) {
				char name[32];
				uint64_t listed = 0;
				struct uext4_stat st;

				wname(name, sizeof(name), k, i);
				for (int x = 0; x < l->n; x++)
					if (!strcmp(l->names[x], name))
						listed = l->ino[x];
				int r = uext4_lookup(s->fs, s->dir[d], name, &st);
				uint64_t got = r == 0 ? st.ino : 0;
				T_CHECK((r == 0 || r == -ENOENT) && got == listed,
					"final: dir %d %s: lookup %d ino %llu, readdir %llu", d, name,
					r, (unsigned long long)got, (unsigned long long)listed);
				T_CHECK(listed == w[k].ino[d][i], "final: dir %d %s: readdir %llu, "
					"writer %llu", d, name, (unsigned long long)listed,
					(unsigned long long)w[k].ino[d][i]);
			}
		free(l);
	}
}

static void concurrent(const char *img, uint64_t seed, long ops)
{
	struct shared s = {0};
	struct writer w[NW];
	pthread_t wt[NW], rt[NR];
	struct uext4_stat st;

	s.fs = mount_rw(img, NC_DEFAULT);
	for (int d = 0; d < 2; d++) {
		char n[32];

		snprintf(n, sizeof(n), "conc%d", d);
		T_CHECK(uext4_mkdir(s.fs, 2, n, 0755, &st) == 0, "mkdir %s", n);
		s.dir[d] = st.ino;
	}
	for (int k = 0; k < NW; k++) {
		w[k] = (struct writer){.s = &s, .id = k, .rng = seed * 2 + (uint64_t)k * 7919 + 1,
				       .ops = ops};
	}
	for (int k = 0; k < NR; k++)
		pthread_create(&rt[k], NULL, reader_main, &s);
	for (int k = 0; k < NW; k++)
		pthread_create(&wt[k], NULL, writer_main, &w[k]);
	for (int k = 0; k < NW; k++)
		pthread_join(wt[k], NULL);
	atomic_store(&s.stop, true);
	for (int k = 0; k < NR; k++)
		pthread_join(rt[k], NULL);
	final_check(&s, w);
	printf("concurrent: %d writers x %ld operations, %lu lookups by %d readers\n", NW, ops,
	       atomic_load(&s.lookups), NR);
	umount_and_fsck(s.fs, img, "concurrent");
}

/*
 * The race the insert token exists for, narrowed to one name: readers
 * look up "hot" without pause (each miss reads the directory and then
 * inserts) while a writer creates and unlinks it, checking after each
 * step that a lookup agrees.  A stale insert (a read before the change,
 * inserted after it) shows as a wrong answer right after the change.
 */
struct hot {
	uext4_fs *fs;
	uint64_t dir;
	atomic_bool stop;
};

static void *hot_reader(void *arg)
{
	struct hot *h = arg;
	struct uext4_stat st;

	/* Stat what it finds (see reader_main): the writer frees and reuses
	 * the same inode number over and over. */
	while (!atomic_load_explicit(&h->stop, memory_order_relaxed))
		uext4_lookup(h->fs, h->dir, "hot", &st);
	return NULL;
}

static void hot_race(const char *img, long ops)
{
	struct hot h = {0};
	pthread_t rt[NR];
	struct uext4_stat st;
	long wrong = 0;

	/* Each insert waits 50 us after its directory read: many a create
	 * and unlink of the writer fall into that window. */
	setenv("UEXT4_NAMECACHE_DELAY_US", "50", 1);
	h.fs = mount_rw(img, NC_DEFAULT);
	unsetenv("UEXT4_NAMECACHE_DELAY_US");
	T_CHECK(uext4_mkdir(h.fs, 2, "hotdir", 0755, &st) == 0, "mkdir /hotdir");
	h.dir = st.ino;
	for (int k = 0; k < NR; k++)
		pthread_create(&rt[k], NULL, hot_reader, &h);
	for (long i = 0; i < ops; i++) {
		uint64_t ino;
		int r = uext4_create(h.fs, h.dir, "hot", 0644, &st);

		T_CHECK(r == 0, "hot: create: %d %s", r, uext4_last_error());
		ino = st.ino;
		r = uext4_lookup(h.fs, h.dir, "hot", &st);
		wrong += !(r == 0 && st.ino == ino);
		r = uext4_unlink(h.fs, h.dir, "hot");
		T_CHECK(r == 0, "hot: unlink: %d %s", r, uext4_last_error());
		r = uext4_lookup(h.fs, h.dir, "hot", &st);
		wrong += r != -ENOENT;
	}
	atomic_store(&h.stop, true);
	for (int k = 0; k < NR; k++)
		pthread_join(rt[k], NULL);
	T_CHECK(wrong == 0, "hot: %ld lookups right after a create or unlink were stale", wrong);
	printf("hot race: %ld create+unlink pairs with %d readers on the name\n", ops, NR);
	umount_and_fsck(h.fs, img, "hot race");
}

/* ------------------------------------------------------------- main */

/*
 * A casefolded directory (+F on a -O casefold image): the cache is keyed
 * by the folded name, so every case shares one entry.  Each name is
 * looked up under several cases (warming negative entries for all of
 * them), then created, unlinked and renamed under yet another case; every
 * case must follow each change.  An invalidation by the name's bytes
 * instead of its folded form leaves the other cases stale here.
 */
static void casefold_scenario(const char *img, const char *dname, enum nc_mode m)
{
	static const char *const foo[] = {"foo", "FOO", "Foo", "fOo"};
	static const char *const ae[] = {"\xc3\xa4rger", "\xc3\x84RGER", "a\xcc\x88rger"}; /* ä, Ä, a + U+0308 */
	struct ctx cx = {.what = mode_name[m]}, *c = &cx;
	struct uext4_stat st;
	uint32_t fl;
	uint64_t ino, ino2;

	c->fs = mount_rw(img, m);
	snprintf(c->dpath, sizeof(c->dpath), "%s", dname);
	OK(uext4_mkdir(c->fs, UEXT4_ROOT_INO, dname + 1, 0755, &st));
	c->d = st.ino;
	OK(uext4_get_flags(c->fs, c->d, &fl));
	OK(uext4_set_flags(c->fs, c->d, fl | 0x40000000u)); /* +F */
	for (int i = 0; i < 4; i++)
		D(c, foo[i], 0, "casefold: absent");
	OK(uext4_create(c->fs, c->d, "fOO", S_IFREG | 0644, &st));
	ino = st.ino;
	for (int i = 0; i < 4; i++)
		D(c, foo[i], ino, "casefold: after create of fOO");
	OK(uext4_unlink(c->fs, c->d, "Foo"));
	for (int i = 0; i < 4; i++)
		D(c, foo[i], 0, "casefold: after unlink as Foo");
	for (int i = 0; i < 3; i++)
		D(c, ae[i], 0, "casefold: absent (non-ASCII)");
	OK(uext4_create(c->fs, c->d, ae[2], S_IFREG | 0644, &st));
	ino2 = st.ino;
	for (int i = 0; i < 3; i++)
		D(c, ae[i], ino2, "casefold: after create of a+U+0308rger");
	OK(uext4_rename(c->fs, c->d, ae[1], c->d, "FOO", 0));
	for (int i = 0; i < 3; i++)
		D(c, ae[i], 0, "casefold: after rename away");
	for (int i = 0; i < 4; i++)
		D(c, foo[i], ino2, "casefold: after rename to FOO");
	OK(uext4_unlink(c->fs, c->d, "foo"));
	for (int i = 0; i < 4; i++)
		D(c, foo[i], 0, "casefold: after the last unlink");
	OK(uext4_rmdir(c->fs, UEXT4_ROOT_INO, dname + 1));
	umount_and_fsck(c->fs, img, "casefold scenario");
}

int main(void)
{
	char img[200], img_inline[200];
	const char *env = getenv("NC_SEED");
	uint64_t seed = env ? strtoull(env, NULL, 10) : (uint64_t)time(NULL) ^ (uint64_t)getpid();
	long ops = getenv("NC_OPS") ? atol(getenv("NC_OPS")) : 4000;

	printf("unit_namecache: seed %llu (replay: NC_SEED=%llu)\n", (unsigned long long)seed,
	       (unsigned long long)seed);
	t_tmpdir(tmpdir, sizeof(tmpdir), "unit_namecache");
	snprintf(img, sizeof(img), "%s/n.img", tmpdir);
	snprintf(img_inline, sizeof(img_inline), "%s/i.img", tmpdir);
	if (t_make_image(img, "64M", "-t ext4") ||
	    t_make_image(img_inline, "64M", "-t ext4 -O inline_data")) {
		printf("SKIP: mke2fs failed\n");
		t_sh("rm -rf %s", tmpdir);
		return T_SKIP;
	}
	for (int m = NC_DEFAULT; m <= NC_OFF; m++) {
		char lin[32], htr[32], inl[32];

		snprintf(lin, sizeof(lin), "/lin%d", m);
		snprintf(htr, sizeof(htr), "/htree%d", m);
		snprintf(inl, sizeof(inl), "/inl%d", m);
		scenario(img, lin, (enum nc_mode)m, 0);
		scenario(img, htr, (enum nc_mode)m, 300);
		/* debugfs makes inline directories on an inline_data image. */
		if (t_sh("debugfs -w -R 'mkdir %s' %s >/dev/null 2>&1", inl + 1, img_inline) == 0)
			scenario(img_inline, inl, (enum nc_mode)m, 0);
		else
			T_CHECK(0, "debugfs mkdir %s failed", inl);
	}
	snprintf(img_inline, sizeof(img_inline), "%s/c.img", tmpdir);
	if (t_make_image(img_inline, "64M", "-t ext4 -O casefold") == 0) {
		for (int m = NC_DEFAULT; m <= NC_OFF; m++) {
			char cf[32];

			snprintf(cf, sizeof(cf), "/cf%d", m);
			casefold_scenario(img_inline, cf, (enum nc_mode)m);
		}
	} else {
		printf("no casefold image (mke2fs -O casefold failed): casefold scenario skipped\n");
	}
	concurrent(img, seed, ops);
	hot_race(img, ops / 2);
	if (t_failures)
		printf("FAIL: %d checks failed (seed %llu)\n", t_failures, (unsigned long long)seed);
	else
		printf("PASS\n");
	t_sh("rm -rf %s", tmpdir);
	return t_failures ? T_FAIL : T_PASS;
}
