/*
 * unit_lookup.c - lookup counts through the public API (uext4_lookup_ref,
 * uext4_forget), as the FUSE frontend uses them.
 *
 * On a fresh 4 KiB ext4 image:
 *   1. A file counted twice, then unlinked: getattr still works (nlink 0),
 *      its data reads back, 50 creates never get its number; the first
 *      forget keeps it, the second frees it (getattr fails).
 *   2. A forget of more than was counted stops at 0 (no reference dropped
 *      twice: the file is then unlinked and freed at once); forgets of an
 *      uncounted inode and of the root do nothing; lookup_ref of an inode
 *      number not in use fails and counts nothing.
 *   3. 4 threads count and forget one file 20,000 times each while a fifth
 *      unlinks it: it is freed only after the last forget.
 *   4. A directory removed while counted, then an unmount with the count
 *      still held: the unmount frees it; e2fsck -fn is clean and debugfs
 *      says its inode is not in use.
 */
/* run-in: release asan tsan */
#include "uext4.h"
#include "t.h"

#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/wait.h>
#include <unistd.h>

static char tmpdir[128], img[200];

static uext4_fs *mount_rw(void)
{
	struct uext4_opts o = {0};
	uext4_fs *fs = NULL;
	int err = uext4_mount(img, &o, &fs);

	if (err) {
		fprintf(stderr, "mount %s: %d %s\n", img, err, uext4_last_error());
		exit(T_FAIL);
	}
	return fs;
}

static uint64_t make_file(uext4_fs *fs, uint64_t dir, const char *name, const char *data)
{
	struct uext4_stat st;
	uext4_file *f;
	int err = uext4_create(fs, dir, name, S_IFREG | 0644, &st);

	T_CHECK(err == 0, "create %s: %d %s", name, err, uext4_last_error());
	if (err)
		exit(T_FAIL);
	err = uext4_open(fs, st.ino, O_RDWR, &f);
	T_CHECK(err == 0, "open %s: %d", name, err);
	if (!err) {
		ssize_t n = uext4_pwrite(f, data, strlen(data), 0);

		T_CHECK(n == (ssize_t)strlen(data), "pwrite %s: %zd", name, n);
		uext4_release(f);
	}
	return st.ino;
}

static void check_alive_unlinked(uext4_fs *fs, uint64_t ino, const char *data, const char *when)
{
	struct uext4_stat st;
	uext4_file *f;
	char buf[256] = {0};
	int err = uext4_getattr(fs, ino, &st);

	T_CHECK(err == 0 && st.nlink == 0, "%s: getattr of counted unlinked inode %llu: %d nlink %u %s",
		when, (unsigned long long)ino, err, err ? 0 : st.nlink, uext4_last_error());
	if (!data)
		return;
	err = uext4_open(fs, ino, O_RDONLY, &f);
	T_CHECK(err == 0, "%s: open of counted unlinked inode: %d %s", when, err, uext4_last_error());
	if (!err) {
		ssize_t n = uext4_pread(f, buf, sizeof(buf) - 1, 0);

		T_CHECK(n == (ssize_t)strlen(data) && !strcmp(buf, data), "%s: data %zd '%s'", when,
			n, buf);
		uext4_release(f);
	}
}

/* 50 creates in dir: none may get number ino. */
static void creates_avoid(uext4_fs *fs, uint64_t dir, const char *prefix, uint64_t ino, bool dirs)
{
	for (int i = 0; i < 50; i++) {
		char name[64];
		struct uext4_stat st;
		int err;

		snprintf(name, sizeof(name), "%s%d", prefix, i);
		err = dirs ? uext4_mkdir(fs, dir, name, S_IFDIR | 0755, &st)
			   : uext4_create(fs, dir, name, S_IFREG | 0644, &st);
		T_CHECK(err == 0, "create %s: %d %s", name, err, uext4_last_error());
		T_CHECK(err || st.ino != ino, "%s got number %llu of a counted unlinked inode", name,
			(unsigned long long)ino);
	}
}

static void case_unlinked_file(uext4_fs *fs)
{
	uint64_t ino = make_file(fs, UEXT4_ROOT_INO, "a", "the data of a");
	struct uext4_stat st;
	int err;

	T_CHECK(uext4_lookup_ref(fs, ino, &st) == 0 && st.ino == ino, "lookup_ref a");
	T_CHECK(uext4_lookup_ref(fs, ino, NULL) == 0, "lookup_ref a again");
	err = uext4_unlink(fs, UEXT4_ROOT_INO, "a");
	T_CHECK(err == 0, "unlink a: %d %s", err, uext4_last_error());
	check_alive_unlinked(fs, ino, "the data of a", "after unlink");
	creates_avoid(fs, UEXT4_ROOT_INO, "n", ino, false);
	uext4_forget(fs, ino, 1);
	check_alive_unlinked(fs, ino, "the data of a", "after the first forget");
	uext4_forget(fs, ino, 1);
	err = uext4_getattr(fs, ino, &st);
	T_CHECK(err < 0, "getattr of inode %llu after its last forget: %d (freed?)",
		(unsigned long long)ino, err);
}

static void case_bad_forgets(uext4_fs *fs)
{
	uint64_t ino = make_file(fs, UEXT4_ROOT_INO, "b", "b");
	struct uext4_stat st;
	int err;

	T_CHECK(uext4_lookup_ref(fs, ino, NULL) == 0, "lookup_ref b");
	uext4_forget(fs, ino, 5);
	uext4_forget(fs, ino, 1);
	uext4_forget(fs, make_file(fs, UEXT4_ROOT_INO, "c", "c"), 3);
	T_CHECK(uext4_lookup_ref(fs, UEXT4_ROOT_INO, NULL) == 0, "lookup_ref of the root");
	uext4_forget(fs, UEXT4_ROOT_INO, 7);
	err = uext4_unlink(fs, UEXT4_ROOT_INO, "b");
	T_CHECK(err == 0, "unlink b: %d", err);
	T_CHECK(uext4_getattr(fs, ino, &st) < 0, "b is not freed at its unlink (count left?)");
	err = uext4_lookup_ref(fs, ino, NULL);
	T_CHECK(err < 0, "lookup_ref of freed inode %llu: %d", (unsigned long long)ino, err);
	T_CHECK(uext4_getattr(fs, ino, &st) < 0, "freed inode came back");
	err = uext4_lookup_ref(fs, 1u << 30, NULL);
	T_CHECK(err < 0, "lookup_ref of inode 2^30: %d", err);
}

struct race {
	uext4_fs *fs;
	uint64_t ino;
	_Atomic int started;
};

static void *counter(void *arg)
{
	struct race *r = arg;

	atomic_fetch_add(&r->started, 1);
	for (int i = 0; i < 20000; i++) {
		int err = uext4_lookup_ref(r->fs, r->ino, NULL);

		T_CHECK(err == 0, "lookup_ref %d: %d %s", i, err, uext4_last_error());
		if (err)
			break;
		uext4_forget(r->fs, r->ino, 1);
	}
	return NULL;
}

static void case_race(uext4_fs *fs)
{
	struct race r = { .fs = fs, .ino = make_file(fs, UEXT4_ROOT_INO, "r", "race") };
	pthread_t t[4];
	struct uext4_stat st;
	int err;

	/* The threads' counts must keep it: one count of ours stays until
	 * they are done, as the kernel's would. */
	T_CHECK(uext4_lookup_ref(fs, r.ino, NULL) == 0, "lookup_ref r");
	for (int i = 0; i < 4; i++)
		pthread_create(&t[i], NULL, counter, &r);
	while (atomic_load(&r.started) < 4)
		sched_yield();
	err = uext4_unlink(fs, UEXT4_ROOT_INO, "r");
	T_CHECK(err == 0, "unlink r: %d", err);
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	check_alive_unlinked(fs, r.ino, "race", "after the racing counts");
	uext4_forget(fs, r.ino, 1);
	T_CHECK(uext4_getattr(fs, r.ino, &st) < 0, "r is not freed after the last forget");
}

static uint64_t case_rmdir_held(uext4_fs *fs)
{
	struct uext4_stat st;
	int err = uext4_mkdir(fs, UEXT4_ROOT_INO, "d", S_IFDIR | 0755, &st);
	uint64_t ino = st.ino;

	T_CHECK(err == 0, "mkdir d: %d", err);
	T_CHECK(uext4_lookup_ref(fs, ino, NULL) == 0, "lookup_ref d");
	err = uext4_rmdir(fs, UEXT4_ROOT_INO, "d");
	T_CHECK(err == 0, "rmdir d: %d %s", err, uext4_last_error());
	check_alive_unlinked(fs, ino, NULL, "after rmdir");
	creates_avoid(fs, UEXT4_ROOT_INO, "dd", ino, true);
	return ino;     /* still counted at unmount */
}

int main(void)
{
	uext4_fs *fs;
	uint64_t held;
	int err, rc;

	t_tmpdir(tmpdir, sizeof(tmpdir), "unit_lookup");
	snprintf(img, sizeof(img), "%s/l.img", tmpdir);
	if (t_sh("mke2fs -q -F -t ext4 -b 4096 %s 32M >/dev/null 2>&1", img)) {
		printf("SKIP: mke2fs failed\n");
		return T_SKIP;
	}
	fs = mount_rw();
	case_unlinked_file(fs);
	case_bad_forgets(fs);
	case_race(fs);
	held = case_rmdir_held(fs);
	err = uext4_umount(fs);
	T_CHECK(err == 0, "umount: %d %s", err, uext4_last_error());
	t_fsck_clean(img);
	rc = t_sh("debugfs -R 'testi <%llu>' %s 2>/dev/null | grep -q 'is not in use'",
		(unsigned long long)held, img);
	T_CHECK(rc == 0, "inode %llu (removed, counted at unmount) is not free after unmount",
		(unsigned long long)held);
	t_sh("rm -rf %s", tmpdir);
	if (t_failures) {
		printf("unit_lookup: %d failures\n", t_failures);
		return T_FAIL;
	}
	printf("unit_lookup: OK\n");
	return T_PASS;
}
