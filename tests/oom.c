/*
 * oom.c - out of memory is an error, never a crash.
 *
 *   oom BASE-IMAGE WORKDIR STEP START [MAXN]
 *
 * This program defines malloc, calloc, realloc and aligned_alloc itself
 * (forwarding to glibc's __libc_* entry points), so every allocation the
 * statically linked library makes passes through fail_now().  For N = 1, 2,
 * ... a forked child copies BASE-IMAGE, arms the failure at its Nth
 * allocation (that one call returns NULL; the rest succeed), and runs the
 * (N runs START, START+STEP, ...: the workload makes ~4000 allocations, so
 * STEP > 1 keeps the test short; the script picks a random START, printed)
 * workload: mount, mkdir, create, write, rename, setxattr, unlink, umount.
 * The first step that fails must fail with -ENOMEM (a step after it is not
 * run; umount always is).  The child must exit normally (a signal is a
 * crash; an alarm of 20 s is a hang).  Then the parent checks the image:
 * e2fsck -fn clean, or clean after uext4_recover() (an ENOMEM that aborted
 * the journal leaves a log to replay, as a crash would).  The sweep ends at
 * the first N whose workload completes without meeting the failure.
 *
 * Release build only: under ASan/TSan the sanitizer owns malloc and these
 * definitions would fight its interceptors, so there the program only says
 * so and skips.
 */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#include <stdio.h>
int main(void)
{
	printf("SKIP: oom interposes malloc, which the sanitizer owns in this build\n");
	return 77;
}
#else
#include <signal.h>
#include <stdatomic.h>

#include "uext4.h"
#include "t.h"

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);

static atomic_long g_countdown;  /* >0: armed; the call that takes it to 0 fails */
static atomic_int g_failed;      /* the injected failure happened */

static int fail_now(void)
{
	if (atomic_load_explicit(&g_countdown, memory_order_relaxed) <= 0)
		return 0;
	if (atomic_fetch_sub(&g_countdown, 1) == 1) {
		atomic_store(&g_failed, 1);
		return 1;
	}
	return 0;
}

void *malloc(size_t n)
{
	if (fail_now()) { errno = ENOMEM; return NULL; }
	return __libc_malloc(n);
}

void *calloc(size_t a, size_t b)
{
	if (fail_now()) { errno = ENOMEM; return NULL; }
	return __libc_calloc(a, b);
}

void *realloc(void *p, size_t n)
{
	if (fail_now()) { errno = ENOMEM; return NULL; }
	return __libc_realloc(p, n);
}

void *aligned_alloc(size_t al, size_t n)
{
	if (fail_now()) { errno = ENOMEM; return NULL; }
	return __libc_memalign(al, n);
}

/* The workload; returns the first step's error (0: all done). */
static int workload(const char *img, const char **step)
{
	struct uext4_opts o = { 0 };
	struct uext4_stat d, f;
	static char buf[20000];
	uext4_file *fh = NULL;
	uext4_fs *fs;
	ssize_t w;
	int err, uerr;

	memset(buf, 'x', sizeof buf);
	*step = "mount";
	if ((err = uext4_mount(img, &o, &fs)))
		return err;
	*step = "mkdir";
	if ((err = uext4_mkdir(fs, 2, "dir", 0755, &d)))
		goto out;
	*step = "create";
	if ((err = uext4_create(fs, d.ino, "a", 0644, &f)))
		goto out;
	*step = "open";
	if ((err = uext4_open(fs, f.ino, O_RDWR, &fh)))
		goto out;
	*step = "write";
	w = uext4_pwrite(fh, buf, sizeof buf, 0);
	if (w < 0) { err = (int)w; goto out; }
	*step = "release";
	err = uext4_release(fh);
	fh = NULL;
	if (err)
		goto out;
	*step = "rename";
	if ((err = uext4_rename(fs, d.ino, "a", 2, "b", 0)))
		goto out;
	*step = "setxattr";
	if ((err = uext4_setxattr(fs, f.ino, "user.big", buf, 200, 0)))
		goto out;
	*step = "create2";
	if ((err = uext4_create(fs, 2, "c", 0644, &f)))
		goto out;
	*step = "unlink";
	if ((err = uext4_unlink(fs, 2, "c")))
		goto out;
out:
	if (fh)
		uext4_release(fh);
	uerr = uext4_umount(fs);
	if (!err && uerr) {
		*step = "umount";
		err = uerr;
	}
	return err;
}

/* Child: exit 0 workload done without meeting the failure, 1 failed with
 * ENOMEM, 2 failed with something else. */
static void child(const char *img, long n)
{
	const char *step = "?";
	int err;

	alarm(20);
	atomic_store(&g_countdown, n);
	err = workload(img, &step);
	atomic_store(&g_countdown, 0);
	/* -EAGAIN: pthread_create()'s word for out of resources (a mount whose
	 * commit thread could not start), passed through as it is. */
	if (err && err != -ENOMEM && err != -EAGAIN) {
		fprintf(stderr, "N=%ld: %s failed with %s, not ENOMEM\n", n, step, strerror(-err));
		_exit(2);
	}
	if (!err && atomic_load(&g_failed))
		fprintf(stderr, "N=%ld: failure absorbed (workload completed)\n", n);
	_exit(atomic_load(&g_failed) ? 1 : 0);
}

static int copy_file(const char *from, const char *to)
{
	char cmd[2 * 4096 + 64];
	snprintf(cmd, sizeof cmd, "cp --sparse=always '%s' '%s'", from, to);
	return system(cmd);
}

/* e2fsck clean, or clean after recovery. */
static int image_ok(const char *img, const char *log, long n)
{
	if (t_run_e2fsck(img, log) == 0)
		return 1;
	int r = uext4_recover(img, NULL);
	if (r) {
		fprintf(stderr, "N=%ld: image not clean and recover failed: %s\n", n, strerror(-r));
		return 0;
	}
	if (t_run_e2fsck(img, log) == 0)
		return 1;
	fprintf(stderr, "N=%ld: e2fsck -fn not clean after recovery (log %s)\n", n, log);
	return 0;
}

int main(int argc, char **argv)
{
	char img[4096], log[4096];
	long maxn = argc > 5 ? atol(argv[5]) : 100000, n, crashes = 0, bad = 0, recovered = 0;
	long step, runs = 0;

	/* OOM_DEBUG=N: run the workload once in this process on BASE-IMAGE
	 * itself (for a debugger); the image is changed. */
	if (getenv("OOM_DEBUG") && argc > 1)
		child(argv[1], atol(getenv("OOM_DEBUG")));
	if (argc < 5) {
		fprintf(stderr, "usage: oom BASE-IMAGE WORKDIR STEP START [MAXN]\n");
		return T_FAIL;
	}
	snprintf(img, sizeof img, "%s/oom.img", argv[2]);
	snprintf(log, sizeof log, "%s/e2fsck.log", argv[2]);
	step = atol(argv[3]) > 0 ? atol(argv[3]) : 1;
	for (n = atol(argv[4]) > 0 ? atol(argv[4]) : 1; n <= maxn; n += step, runs++) {
		int st;
		pid_t pid;

		if (copy_file(argv[1], img))
			return T_FAIL;
		if ((pid = fork()) == 0)
			child(img, n);
		waitpid(pid, &st, 0);
		if (WIFSIGNALED(st)) {
			fprintf(stderr, "N=%ld: CRASH, signal %d%s\n", n, WTERMSIG(st),
				WTERMSIG(st) == SIGALRM ? " (hang)" : "");
			crashes++;
			continue;
		}
		if (WEXITSTATUS(st) == 2)
			bad++;
		if (t_run_e2fsck(img, log) != 0)
			recovered++;
		if (!image_ok(img, log, n))
			bad++;
		if (WEXITSTATUS(st) == 0)
			break;
	}
	printf("oom: N = %s..%ld step %ld (%ld runs), %ld crashes, %ld bad results, %ld needed recovery\n",
	       argv[4], n, step, runs + 1, crashes, bad, recovered);
	T_CHECK(n <= maxn, "workload never completed within %ld allocations", maxn);
	T_CHECK(crashes == 0, "%ld crashes", crashes);
	T_CHECK(bad == 0, "%ld bad results", bad);
	return t_failures ? T_FAIL : T_PASS;
}
#endif
