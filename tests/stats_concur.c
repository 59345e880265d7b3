/*
 * stats_concur.c - the lock and I/O statistics.
 *
 * On a fresh image made with uext4_mkfs:
 *   1. Statistics off: creates, a sync: every lock class and the journal
 *      counters stay at zero (the block counters, always on, move).
 *   2. Forced contention: two threads take ONE lock (a ulock of class
 *      "leaf"), the first holding it until the second is about to try,
 *      in rounds until a contention shows (at most 200): that class shows
 *      contentions > 0 and wait time > 0, and acquisitions = 2 per round.
 *   3. Separate directories: NT threads create files, each in its own
 *      directory, and chmod each, through the library: the directory
 *      class shows an acquisition per create, the inode class one per
 *      chmod, and both zero contentions.  Then each unlinks its files:
 *      nobody holds them, so no orphan entry is taken (classes
 *      "orphan_file" and "orphan_list" at 0); made again and unlinked
 *      while open, the orphan file's entries are claimed once per unlink;
 *      the directory locks uncontended throughout.  Every class's counts are printed; a class other than
 *      those two that contends is reported (not failed: removing it is
 *      other work).
 *   4. A sync: the journal counted a commit with blocks, and the block
 *      counters show inode-table, directory, bitmap and journal writes.
 *   5. Statistics off again: more creates change no lock counter.
 *   6. The text and JSON reports name every class; reset zeroes them.
 *   7. After unmount, e2fsck -fn is clean.
 */
/* run-in: release asan tsan */
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#include "internal.h"
#include "lock.h"
#include "uext4.h"
#include "t.h"

#define NT 4
static int g_files = 2000;
static uext4_fs *g_fs;

static const struct uext4_lock_stats *cls(const struct uext4_stats *s, const char *name)
{
	for (unsigned i = 0; i < s->nlocks; i++)
		if (!strcmp(s->locks[i].name, name))
			return &s->locks[i];
	fprintf(stderr, "FAIL: no lock class '%s' in the statistics\n", name);
	exit(T_FAIL);
}

static void print_locks(const char *when, const struct uext4_stats *s)
{
	printf("%s:\n", when);
	for (unsigned i = 0; i < s->nlocks; i++) {
		const struct uext4_lock_stats *l = &s->locks[i];

		printf("  %-14s acq %10llu  cont %8llu  wait %10llu ns  max %9llu ns\n", l->name,
		       (unsigned long long)l->acquisitions, (unsigned long long)l->contentions,
		       (unsigned long long)l->wait_ns, (unsigned long long)l->wait_max_ns);
	}
}

static void get(struct uext4_stats *s)
{
	int r = uext4_stats_get(g_fs, s);

	T_CHECK(r == 0, "uext4_stats_get: %s", uext4_last_error());
}

/* ---------------------------------------------------- 2: one lock, two threads */

static struct ulock g_lock;
static atomic_int g_round, g_held, g_trying, g_done;

static void spin_ns(uint64_t ns)
{
	uint64_t t0 = lockstat_now_ns();

	while (lockstat_now_ns() - t0 < ns)
		;
}

/* Round r (main starts it, and the next once the contender is done): the
 * holder takes the lock, waits until the other thread says it is about
 * to take it too, holds it 2 ms longer, lets go. */
static void *holder(void *arg)
{
	int rounds = *(int *)arg;

	for (int r = 1; r <= rounds; r++) {
		while (atomic_load(&g_round) != r)
			;
		ulock_lock(&g_lock);
		atomic_store(&g_held, r);
		while (atomic_load(&g_trying) != r)
			;
		spin_ns(2000000);
		ulock_unlock(&g_lock);
	}
	return NULL;
}

static void *contender(void *arg)
{
	int rounds = *(int *)arg;

	for (int r = 1; r <= rounds; r++) {
		while (atomic_load(&g_held) != r)
			;
		atomic_store(&g_trying, r);
		ulock_lock(&g_lock);
		ulock_unlock(&g_lock);
		atomic_store(&g_done, r);
	}
	return NULL;
}

/* Rounds of forced contention until the class shows one (at most max). */
static void forced_contention(void)
{
	struct uext4_stats s;
	const struct uext4_lock_stats *l;
	int rounds = 0, max = 200;

	ulock_init(&g_lock, RANK_LEAF);
	uext4_stats_reset(g_fs);
	for (int batch = 10; rounds < max; batch *= 2) {
		pthread_t a, b;
		int n = MIN(batch, max - rounds);

		atomic_store(&g_round, 0);
		atomic_store(&g_held, 0);
		atomic_store(&g_trying, 0);
		atomic_store(&g_done, 0);
		pthread_create(&a, NULL, holder, &n);
		pthread_create(&b, NULL, contender, &n);
		for (int r = 1; r <= n; r++) {
			atomic_store(&g_round, r);
			while (atomic_load(&g_done) != r)
				;
		}
		pthread_join(a, NULL);
		pthread_join(b, NULL);
		rounds += n;
		get(&s);
		if (cls(&s, "leaf")->contentions > 0)
			break;
	}
	get(&s);
	l = cls(&s, "leaf");
	printf("forced contention: %d rounds: leaf acq %llu cont %llu wait %llu ns max %llu ns\n",
	       rounds, (unsigned long long)l->acquisitions, (unsigned long long)l->contentions,
	       (unsigned long long)l->wait_ns, (unsigned long long)l->wait_max_ns);
	/* Other leaf locks (slab, errors) may be taken by the commit thread. */
	T_CHECK(l->acquisitions >= 2ull * (unsigned)rounds, "%llu acquisitions for %d rounds",
		(unsigned long long)l->acquisitions, rounds);
	T_CHECK(l->contentions > 0, "no contention counted in %d rounds of forced contention",
		rounds);
	T_CHECK(l->wait_ns > 0 && l->wait_max_ns > 0 && l->wait_max_ns <= l->wait_ns,
		"wait %llu ns, max %llu ns", (unsigned long long)l->wait_ns,
		(unsigned long long)l->wait_max_ns);
	/* The holder spun 2 ms after the contender said it was trying. */
	T_CHECK(l->wait_max_ns >= 100000, "longest wait %llu ns, expected most of 2 ms",
		(unsigned long long)l->wait_max_ns);
	ulock_destroy(&g_lock);
}

/* ---------------------------------------------------- 3: separate directories */

struct creator {
	int id;
	uint64_t dir;
	int errors;
};

static void *create_thread(void *arg)
{
	struct creator *c = arg;
	char name[32];

	for (int i = 0; i < g_files; i++) {
		struct uext4_setattr a = { .valid = UEXT4_SET_MODE, .mode = 0600 };
		struct uext4_stat st;
		int r;

		snprintf(name, sizeof(name), "f-%d-%06d", c->id, i);
		r = uext4_create(g_fs, c->dir, name, S_IFREG | 0644, &st);
		/* A chmod takes the new inode's own lock. */
		if (r == 0)
			r = uext4_setattr(g_fs, st.ino, &a, NULL);
		if (r < 0 && c->errors++ < 5)
			fprintf(stderr, "FAIL: thread %d: create/chmod %s: %s\n", c->id, name,
				uext4_last_error());
	}
	return NULL;
}

static void *unlink_thread(void *arg)
{
	struct creator *c = arg;
	char name[32];

	for (int i = 0; i < g_files; i++) {
		snprintf(name, sizeof(name), "f-%d-%06d", c->id, i);
		int r = uext4_unlink(g_fs, c->dir, name);

		if (r < 0 && c->errors++ < 5)
			fprintf(stderr, "FAIL: thread %d: unlink %s: %s\n", c->id, name,
				uext4_last_error());
	}
	return NULL;
}

/* As unlink_thread(), each file held open across its unlink: its inode
 * goes on the orphan file until the release frees it. */
static void *open_unlink_thread(void *arg)
{
	struct creator *c = arg;
	char name[32];

	for (int i = 0; i < g_files; i++) {
		struct uext4_stat st;
		uext4_file *f = NULL;
		int r;

		snprintf(name, sizeof(name), "f-%d-%06d", c->id, i);
		r = uext4_lookup(g_fs, c->dir, name, &st);
		if (r == 0)
			r = uext4_open(g_fs, st.ino, O_RDONLY, &f);
		if (r == 0)
			r = uext4_unlink(g_fs, c->dir, name);
		if (f && uext4_release(f) < 0 && r == 0)
			r = -EIO;
		if (r < 0 && c->errors++ < 5)
			fprintf(stderr, "FAIL: thread %d: open+unlink %s: %s\n", c->id, name,
				uext4_last_error());
	}
	return NULL;
}

/* NT threads, each in its own directory: create (and chmod) g_files
 * files, or unlink those a round made. */
static int run_in_dirs(uint64_t *dirs, int round, void *(*fn)(void *))
{
	pthread_t t[NT];
	struct creator c[NT];
	int errors = 0;

	for (int i = 0; i < NT; i++) {
		c[i] = (struct creator){ .id = i + NT * round, .dir = dirs[i] };
		pthread_create(&t[i], NULL, fn, &c[i]);
	}
	for (int i = 0; i < NT; i++) {
		pthread_join(t[i], NULL);
		errors += c[i].errors;
	}
	return errors;
}

static int create_in_dirs(uint64_t *dirs, int round)
{
	return run_in_dirs(dirs, round, create_thread);
}

/* Contention elsewhere is reported, not failed: removing it is other
 * work, not what this test checks. */
static void note_other_contention(const struct uext4_stats *s, const char *what)
{
	for (unsigned i = 0; i < s->nlocks; i++)
		if (s->locks[i].contentions && strcmp(s->locks[i].name, "inode") &&
		    strcmp(s->locks[i].name, "directory"))
			printf("NOTE: %s in separate directories: class %s contended %llu times "
			       "(%llu ns)\n", what, s->locks[i].name,
			       (unsigned long long)s->locks[i].contentions,
			       (unsigned long long)s->locks[i].wait_ns);
}

static void separate_directories(uint64_t *dirs)
{
	struct uext4_stats s;
	const struct uext4_lock_stats *ino, *dir;

	uext4_stats_reset(g_fs);
	T_CHECK(create_in_dirs(dirs, 1) == 0, "creates failed");
	get(&s);
	print_locks("creates in separate directories", &s);
	ino = cls(&s, "inode");
	dir = cls(&s, "directory");
	T_CHECK(dir->acquisitions >= (uint64_t)NT * g_files, "directory locks: %llu acquisitions "
		"for %d creates", (unsigned long long)dir->acquisitions, NT * g_files);
	T_CHECK(ino->acquisitions >= (uint64_t)NT * g_files, "inode locks: %llu acquisitions "
		"for %d chmods", (unsigned long long)ino->acquisitions, NT * g_files);
	T_CHECK(dir->contentions == 0, "directory locks contended %llu times (waited %llu ns)",
		(unsigned long long)dir->contentions, (unsigned long long)dir->wait_ns);
	T_CHECK(ino->contentions == 0, "inode locks contended %llu times (waited %llu ns)",
		(unsigned long long)ino->contentions, (unsigned long long)ino->wait_ns);
	note_other_contention(&s, "creates");

	/* An unlink of a file nobody holds frees it in its own handle: no
	 * orphan entry, no orphan-list lock. */
	uext4_stats_reset(g_fs);
	T_CHECK(run_in_dirs(dirs, 1, unlink_thread) == 0, "unlinks failed");
	get(&s);
	print_locks("unlinks in separate directories", &s);
	T_CHECK(cls(&s, "orphan_file")->acquisitions == 0 &&
		cls(&s, "orphan_list")->acquisitions == 0,
		"unlinks of files nobody holds: %llu orphan-file entries, %llu orphan-list "
		"locks (want 0)", (unsigned long long)cls(&s, "orphan_file")->acquisitions,
		(unsigned long long)cls(&s, "orphan_list")->acquisitions);
	T_CHECK(cls(&s, "directory")->contentions == 0, "directory locks contended in unlinks");
	note_other_contention(&s, "unlinks");
	/* Held open, each inode takes an orphan-file entry until released. */
	T_CHECK(create_in_dirs(dirs, 1) == 0, "creates failed");
	uext4_stats_reset(g_fs);
	T_CHECK(run_in_dirs(dirs, 1, open_unlink_thread) == 0, "open+unlinks failed");
	get(&s);
	print_locks("unlinks of open files in separate directories", &s);
	T_CHECK(cls(&s, "orphan_file")->acquisitions >= (uint64_t)NT * g_files,
		"orphan file: %llu entries claimed for %d unlinks of open files",
		(unsigned long long)cls(&s, "orphan_file")->acquisitions, NT * g_files);
	T_CHECK(cls(&s, "directory")->contentions == 0, "directory locks contended in unlinks");
	/* The same files again, for the later steps. */
	T_CHECK(create_in_dirs(dirs, 1) == 0, "creates failed");
}

/* ---------------------------------------------------- main */

static bool locks_all_zero(const struct uext4_stats *s)
{
	for (unsigned i = 0; i < s->nlocks; i++)
		if (s->locks[i].acquisitions || s->locks[i].contentions || s->locks[i].wait_ns)
			return false;
	return true;
}

static bool locks_equal(const struct uext4_stats *a, const struct uext4_stats *b)
{
	return a->nlocks == b->nlocks &&
	       !memcmp(a->locks, b->locks, a->nlocks * sizeof(a->locks[0]));
}

static void check_reports(void)
{
	static char buf[65536];
	int n = uext4_stats_format(g_fs, buf, sizeof buf, 0);
	struct uext4_stats s;

	T_CHECK(n > 0 && (size_t)n < sizeof buf, "text report: %d", n);
	T_CHECK(!strncmp(buf, "statistics: on", 14), "text report starts: %.40s", buf);
	get(&s);
	for (unsigned i = 0; i < s.nlocks; i++)
		T_CHECK(strstr(buf, s.locks[i].name), "text report lacks class %s", s.locks[i].name);
	T_CHECK(strstr(buf, "inode_table") && strstr(buf, "commit latency"), "text sections");
	n = uext4_stats_format(g_fs, buf, sizeof buf, 1);
	T_CHECK(n > 2 && buf[0] == '{' && buf[n - 2] == '}' && buf[n - 1] == '\n',
		"JSON report shape: %.40s", buf);
	T_CHECK(strstr(buf, "\"directory\":{\"acquisitions\":"), "JSON lacks the directory class");
	/* Too small a buffer: the length needed, and a NUL-terminated prefix. */
	char small[16];
	int m = uext4_stats_format(g_fs, small, sizeof small, 1);

	T_CHECK(m >= n - 64 && small[15] == '\0', "short buffer: %d", m);
	uext4_stats_reset(g_fs);
	get(&s);
	for (unsigned i = 0; i < s.nlocks; i++)
		T_CHECK(s.locks[i].contentions == 0 && s.locks[i].wait_ns == 0,
			"class %s not reset", s.locks[i].name);
	T_CHECK(s.journal.commits == 0 && s.io.writes[UEXT4_META_INODE_TABLE] == 0,
		"journal/io not reset");
}

int main(int argc, char **argv)
{
	char img[] = "/tmp/uext4-stats-XXXXXX", cmd[512];
	struct uext4_mkfs_opts mo = { .size = 256ull << 20, .inodes = 65536 };
	struct uext4_opts o = { 0 };
	struct uext4_stats s0, s1;
	uint64_t dirs[NT];
	int fd;

	if (argc > 1)
		g_files = atoi(argv[1]);
	fd = mkstemp(img);
	if (fd < 0) {
		perror("mkstemp");
		return T_FAIL;
	}
	close(fd);
	mo.force = 1;
	if (uext4_mkfs(img, &mo, NULL) < 0) {
		fprintf(stderr, "FAIL: mkfs: %s\n", uext4_last_error());
		return T_FAIL;
	}
	if (uext4_mount(img, &o, &g_fs) < 0) {
		fprintf(stderr, "FAIL: mount: %s\n", uext4_last_error());
		return T_FAIL;
	}
	for (int i = 0; i < NT; i++) {
		struct uext4_stat st;
		char name[16];

		snprintf(name, sizeof name, "d%d", i);
		T_CHECK(uext4_mkdir(g_fs, UEXT4_ROOT_INO, name, S_IFDIR | 0755, &st) == 0,
			"mkdir %s: %s", name, uext4_last_error());
		dirs[i] = st.ino;
	}

	/* 1. Off: nothing counted. */
	T_CHECK(create_in_dirs(dirs, 0) == 0, "creates failed");
	T_CHECK(uext4_sync(g_fs) == 0, "sync: %s", uext4_last_error());
	get(&s0);
	T_CHECK(!s0.enabled, "statistics on before uext4_stats_enable");
	T_CHECK(locks_all_zero(&s0), "lock counters moved while statistics were off");
	T_CHECK(s0.journal.commits == 0 && s0.journal.blocks == 0 && s0.journal.commit_ns == 0,
		"journal counters moved while off: %llu commits",
		(unsigned long long)s0.journal.commits);
	T_CHECK(s0.io.writes[UEXT4_META_INODE_TABLE] > 0 && s0.io.writes[UEXT4_META_JOURNAL] > 0,
		"block write counters (always on) did not move: itable %llu journal %llu",
		(unsigned long long)s0.io.writes[UEXT4_META_INODE_TABLE],
		(unsigned long long)s0.io.writes[UEXT4_META_JOURNAL]);

	T_CHECK(uext4_stats_enable(g_fs, 1) == 0, "enable returned the wrong previous state");
	forced_contention();                    /* 2 */
	separate_directories(dirs);             /* 3 */

	/* 4. A commit, counted. */
	T_CHECK(uext4_sync(g_fs) == 0, "sync: %s", uext4_last_error());
	get(&s1);
	printf("journal: %llu commits, %llu blocks (max %llu), latency %llu ns (max %llu), "
	       "held back %llu ns, %llu handles waited %llu ns\n",
	       (unsigned long long)s1.journal.commits, (unsigned long long)s1.journal.blocks,
	       (unsigned long long)s1.journal.blocks_max, (unsigned long long)s1.journal.commit_ns,
	       (unsigned long long)s1.journal.commit_max_ns,
	       (unsigned long long)s1.journal.blocked_ns,
	       (unsigned long long)s1.journal.handle_waits,
	       (unsigned long long)s1.journal.handle_wait_ns);
	T_CHECK(s1.journal.commits >= 1 && s1.journal.blocks > 0 && s1.journal.commit_ns > 0 &&
		s1.journal.blocks_max <= s1.journal.blocks, "journal counters after a sync");
	for (unsigned k = 0; k < UEXT4_META_NKINDS; k++)
		printf("  blocks %-12s read %8llu written %8llu\n", uext4_meta_kind_name(k),
		       (unsigned long long)s1.io.reads[k], (unsigned long long)s1.io.writes[k]);
	T_CHECK(s1.io.writes[UEXT4_META_INODE_TABLE] > 0 && s1.io.writes[UEXT4_META_DIR] > 0 &&
		s1.io.writes[UEXT4_META_BITMAP] > 0 && s1.io.writes[UEXT4_META_JOURNAL] > 0,
		"write counters by kind");
	check_reports();                        /* 6 */

	/* 5. Off again: lock counters do not move. */
	T_CHECK(uext4_stats_enable(g_fs, 0) == 1, "disable returned the wrong previous state");
	get(&s0);
	T_CHECK(create_in_dirs(dirs, 2) == 0, "creates failed");
	get(&s1);
	T_CHECK(locks_equal(&s0, &s1), "lock counters moved while statistics were off");

	/* 7. */
	T_CHECK(uext4_umount(g_fs) == 0, "umount: %s", uext4_last_error());
	t_fsck_clean(img);
	snprintf(cmd, sizeof cmd, "%s.fsck", img);
	unlink(cmd);
	unlink(img);
	printf("%s\n", t_failures ? "FAILED" : "ok");
	return t_failures ? T_FAIL : T_PASS;
}
