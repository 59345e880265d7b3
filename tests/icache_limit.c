/*
 * icache_limit.c - the inode cache limit (uext4_opts.inode_cache) holds.
 *
 * A fresh image (mke2fs run here) mounted with inode_cache = 1000.  A
 * workload touches NFILES inodes (100,000; 20,000 under a sanitizer):
 * creates them (100 directories), stats every one by name, opens and
 * releases every one, and chmods every one (dirtying its inode-table
 * block).  After every 500 operations the inodes cached (icache_counts(),
 * internal) must be at most LIMIT + what is pinned: the root, the current
 * directory, and nothing else.  Then PINNED files are opened and kept
 * open, and PINNED more counted with uext4_lookup_ref() (a FUSE lookup
 * count): while they are held the cache may hold LIMIT + 2 * PINNED + 2,
 * not more, as the rest of the files are stat'ed again; after releasing
 * and forgetting them it goes back under LIMIT + 2.
 *
 * The check can fail: the same stat pass with the default limit must end
 * with more than 4 * LIMIT inodes cached (else the bound proves nothing).
 * Unmount, e2fsck -fn.
 */
#include "uext4.h"
#include "icache.h"
#include "t.h"

#define LIMIT 1000
#define PER_DIR 1000
#define PINNED 300
#define CHECK_EVERY 500

static long nfiles = 100000;
static uint64_t dirs[200];
static uint64_t worst; /* the most inodes cached seen at a check */

static void name_of(long i, char *name, size_t len)
{
	snprintf(name, len, "f%07ld", i);
}

/* Cached inodes within LIMIT + pinned; remembers the worst. */
static void check_count(uext4_fs *fs, uint64_t pinned, const char *phase, long i)
{
	uint64_t cached, idle;

	icache_counts(fs, &cached, &idle);
	if (cached > worst)
		worst = cached;
	T_CHECK(cached <= LIMIT + pinned, "%s, file %ld: %" PRIu64 " inodes cached (%" PRIu64
		" idle), limit %u + %" PRIu64 " pinned", phase, i, cached, idle, LIMIT, pinned);
}

static int create_all(uext4_fs *fs)
{
	struct uext4_stat st;
	char name[32];
	int err;

	for (long i = 0; i < nfiles; i++) {
		if (i % PER_DIR == 0) {
			snprintf(name, sizeof name, "d%ld", i / PER_DIR);
			if ((err = uext4_mkdir(fs, 2, name, 0755, &st)))
				return err;
			dirs[i / PER_DIR] = st.ino;
		}
		name_of(i, name, sizeof name);
		if ((err = uext4_create(fs, dirs[i / PER_DIR], name, 0644, &st)))
			return err;
		if (i % CHECK_EVERY == 0)
			check_count(fs, 2, "create", i);
	}
	return 0;
}

/* op: 0 stat by name, 1 open + release, 2 chmod. */
static int touch_all(uext4_fs *fs, int op, uint64_t pinned, const char *phase)
{
	struct uext4_stat st;
	char name[32];
	int err;

	for (long i = 0; i < nfiles; i++) {
		name_of(i, name, sizeof name);
		if ((err = uext4_lookup(fs, dirs[i / PER_DIR], name, &st)))
			return err;
		if (op == 1) {
			uext4_file *f;

			if ((err = uext4_open(fs, st.ino, O_RDONLY, &f)))
				return err;
			uext4_release(f);
		} else if (op == 2) {
			struct uext4_setattr a = { .valid = UEXT4_SET_MODE, .mode = 0600 };

			if ((err = uext4_setattr(fs, st.ino, &a, NULL)))
				return err;
		}
		if (i % CHECK_EVERY == 0)
			check_count(fs, pinned, phase, i);
	}
	return 0;
}

/* Files 0..PINNED-1 open, PINNED..2*PINNED-1 lookup-counted. */
static int pin(uext4_fs *fs, uext4_file **fh, uint64_t *counted)
{
	struct uext4_stat st;
	char name[32];
	int err;

	for (long i = 0; i < 2 * PINNED; i++) {
		name_of(i, name, sizeof name);
		if (i < PINNED) {
			if ((err = uext4_lookup(fs, dirs[0], name, &st)) ||
			    (err = uext4_open(fs, st.ino, O_RDONLY, &fh[i])))
				return err;
		} else {
			if ((err = uext4_lookup_counted(fs, dirs[0], name, &st)))
				return err;
			counted[i - PINNED] = st.ino;
		}
	}
	return 0;
}

static int run(const char *img)
{
	struct uext4_opts o = { .inode_cache = LIMIT };
	static uext4_file *fh[PINNED];
	static uint64_t counted[PINNED];
	uint64_t cached;
	uext4_fs *fs;
	int err;

	if ((err = uext4_mount(img, &o, &fs)))
		return err;
	if ((err = create_all(fs)) || (err = touch_all(fs, 0, 2, "stat")) ||
	    (err = touch_all(fs, 1, 2, "open/release")) || (err = touch_all(fs, 2, 2, "chmod"))) {
		fprintf(stderr, "workload: %s (%s)\n", strerror(-err), uext4_last_error());
		uext4_umount(fs);
		return err;
	}
	printf("limit %u: at most %" PRIu64 " inodes cached over %ld files x 4 passes\n",
	       LIMIT, worst, nfiles);
	if ((err = pin(fs, fh, counted))) {
		fprintf(stderr, "pin: %s\n", strerror(-err));
		uext4_umount(fs);
		return err;
	}
	worst = 0;
	err = touch_all(fs, 0, 2 * PINNED + 2, "stat with pinned");
	printf("%d open + %d lookup-counted: at most %" PRIu64 " inodes cached\n", PINNED, PINNED,
	       worst);
	for (int i = 0; i < PINNED; i++) {
		uext4_release(fh[i]);
		uext4_forget(fs, counted[i], 1);
	}
	if (!err)
		err = touch_all(fs, 0, 2, "stat after unpinning");
	T_CHECK(err == 0, "stat pass: %s", strerror(-err));
	icache_counts(fs, &cached, NULL);
	T_CHECK(cached <= LIMIT + 2, "%" PRIu64 " cached after unpinning", cached);
	return uext4_umount(fs);
}

/* With the default limit the same pass keeps far more: the check bites. */
static int run_default(const char *img)
{
	struct uext4_opts o = { 0 };
	uint64_t cached;
	uext4_fs *fs;
	int err;

	if ((err = uext4_mount(img, &o, &fs)))
		return err;
	worst = 0;
	for (long i = 0; i < nfiles / PER_DIR; i++) {
		struct uext4_stat st;
		char name[32];

		snprintf(name, sizeof name, "d%ld", i);
		if ((err = uext4_lookup(fs, 2, name, &st)))
			break;
		dirs[i] = st.ino;
	}
	for (long i = 0; !err && i < nfiles; i++) {
		struct uext4_stat st;
		char name[32];

		name_of(i, name, sizeof name);
		err = uext4_lookup(fs, dirs[i / PER_DIR], name, &st);
	}
	icache_counts(fs, &cached, NULL);
	printf("default limit: %" PRIu64 " inodes cached after the stat pass\n", cached);
	T_CHECK(cached > 4 * LIMIT, "default limit keeps only %" PRIu64 " inodes", cached);
	int uerr = uext4_umount(fs);
	return err ? err : uerr;
}

int main(void)
{
	char dir[] = "/tmp/uext4-icache_limit.XXXXXX", img[64], log[80], opts[64];
	int err;

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
	nfiles = 20000;
#endif
	if (!mkdtemp(dir))
		return T_FAIL;
	snprintf(img, sizeof img, "%s/a.img", dir);
	snprintf(log, sizeof log, "%s/e2fsck.log", dir);
	snprintf(opts, sizeof opts, "-t ext4 -N %ld", nfiles + 1000);
	if (t_make_image(img, "512M", opts))
		return T_SKIP;  /* no mke2fs */
	err = run(img);
	T_CHECK(err == 0, "limited run: %s", strerror(-err));
	if (!err) {
		err = run_default(img);
		T_CHECK(err == 0, "default run: %s", strerror(-err));
	}
	T_CHECK(t_run_e2fsck(img, log) == 0, "e2fsck -fn found problems (see %s)", log);
	if (!t_failures) {
		unlink(img);
		unlink(log);
		rmdir(dir);
	}
	return t_failures ? T_FAIL : T_PASS;
}
