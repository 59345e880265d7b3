/*
 * faultdev.c - fault-injection matrix on the faultdev block device.
 *
 * One pristine image per journal mode (mke2fs, then a setup mount that
 * creates and fsyncs "keep" and the files the ops need); each cell copies
 * it, mounts the copy through a faultdev (cold caches, so reads reach the
 * device), arms one fault kind, runs one op kind and its sync point
 * (uext4_sync, the op's fsync, or the unmount), and checks:
 *
 *  - the fault fired (faultdev's counters), else the cell prints "n/f";
 *  - the first failing call returns the fault's error (-EIO; -ENOSPC or
 *    -EIO for a full backing file; -EROFS or -EIO for a read-only device),
 *    and some call fails: a fired fault is never reported as success;
 *  - a failed commit (sync point) aborts: a later create and a second
 *    sync fail (-EROFS with a journal, whatever errors= says; -EIO or
 *    -EROFS without), and once the device works again (disarmed) the
 *    unmount records the error: the superblock has EXT4_ERROR_FS and
 *    s_error_count > 0 after the remount;
 *  - a fault that failed only the op (a data write, a read) aborts
 *    nothing: a later create succeeds, the superblock has no error, and a
 *    file written and fsynced after the fault survives a crash (the
 *    device turning read-only before the unmount);
 *  - the fsynced "keep" survives, and e2fsck -fn is clean after recovery
 *    (the error flag alone: e2fsck -fn exits 0 with it).
 *
 * Then a small set of errors= cells (continue, remount-ro, panic in a
 * child process) with a journal-write fault on create.  Prints the
 * matrix (ok / FAIL / n/f; "-" where the fault cannot apply); exits 1 on
 * any FAIL.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "blockdev.h"
#include "faultdev.h"
#include "ondisk.h"
#include "mount.h"
#include "trans.h"
#include "uext4.h"
#include "t.h"

enum op {
	OP_CREATE, OP_WRITE_FSYNC, OP_RENAME, OP_UNLINK, OP_SETXATTR, OP_TRUNCATE,
	OP_MKDIR, OP_RMDIR, OP_FSYNC, OP_UMOUNT, NOPS
};
static const char *op_names[NOPS] = {
	"create", "write+fsync", "rename", "unlink", "setxattr", "truncate",
	"mkdir", "rmdir", "fsync", "unmount",
};

enum kind { K_EIO_W, K_EIO_W3, K_EIO_FL, K_SHORT_R, K_TORN, K_ENOSPC, K_RDONLY, K_RNG_SB, K_RNG_LOG, NKINDS };
static const char *kind_names[NKINDS] = {
	"eio-w", "eio-wk", "eio-fl", "short-r", "torn", "enospc", "rdonly", "rng-sb", "rng-log",
};

static const char keep_data[] = "acknowledged by fsync before the fault";
static const char keep2_data[] = "acknowledged by fsync after a fault that aborted nothing";

/* A pristine image per journal mode, and where its journal starts. */
struct pristine {
	char path[256];
	uint64_t log_lo, log_hi;     /* bytes: the journal's first extent (0: none) */
};

/* What a cell saw. */
struct outcome {
	int first_err;               /* first failing call's return (0: none failed) */
	const char *first_call;
	char first_msg[300];
	bool sync_failed;            /* a sync point (commit) failed */
	bool fired, read_only_fault;
};

/* ------------------------------------------------------------ helpers */

static int copy_file(const char *from, const char *to)
{
	char cmd[600];

	snprintf(cmd, sizeof(cmd), "cp --sparse=always %s %s", from, to);
	return t_sh("%s", cmd);
}

static int write_file(uext4_fs *fs, const char *name, const void *data, size_t len, bool sync)
{
	struct uext4_stat st;
	uext4_file *f;
	int err = uext4_create(fs, UEXT4_ROOT_INO, name, 0644, &st);

	if (err || (err = uext4_open(fs, st.ino, O_RDWR, &f)))
		return err;
	ssize_t n = uext4_pwrite(f, data, len, 0);
	if (n != (ssize_t)len)
		err = n < 0 ? (int)n : -EIO;
	if (!err && sync)
		err = uext4_fsync(f, 0);
	uext4_release(f);
	return err;
}

/* The journal's first extent, from debugfs (the log starts there). */
static void find_log(struct pristine *p)
{
	char cmd[400], line[512];
	unsigned a, b;
	unsigned long long lo, hi;
	FILE *f;

	snprintf(cmd, sizeof(cmd), "debugfs -R 'stat <8>' %s 2>/dev/null", p->path);
	if (!(f = popen(cmd, "r")))
		return;
	while (fgets(line, sizeof(line), f)) {
		char *q = strstr(line, "(0");
		if (q && sscanf(q, "(%u-%u):%llu-%llu", &a, &b, &lo, &hi) == 4 && a == 0) {
			p->log_lo = lo * 4096;
			p->log_hi = (hi + 1) * 4096;
		}
	}
	pclose(f);
}

static int make_pristine(struct pristine *p, int journal)
{
	char cmd[600], xa[8192];
	struct uext4_opts mo = { .commit_secs = 3600 };
	struct uext4_stat st;
	uext4_fs *fs;
	int err;

	snprintf(p->path, sizeof(p->path), "/dev/shm/uext4-faultdev-%d-%c.img", (int)getpid(),
		 journal ? 'J' : 'N');
	snprintf(cmd, sizeof(cmd), "rm -f %s; mke2fs -q -F -t ext4 %s -b 4096 %s 16M >/dev/null 2>&1",
		 p->path, journal ? "" : "-O ^has_journal", p->path);
	if (t_sh("%s", cmd))
		return -1;
	memset(xa, 'x', sizeof(xa));
	if ((err = uext4_mount(p->path, &mo, &fs)))
		return err;
	if (!(err = write_file(fs, "keep", keep_data, sizeof(keep_data), true)) &&
	    !(err = uext4_create(fs, UEXT4_ROOT_INO, "victim", 0644, &st)) &&
	    !(err = uext4_create(fs, UEXT4_ROOT_INO, "src", 0644, &st)) &&
	    !(err = uext4_create(fs, UEXT4_ROOT_INO, "xa", 0644, &st)) &&
	    !(err = uext4_mkdir(fs, UEXT4_ROOT_INO, "rdir", 0755, &st)))
		err = write_file(fs, "tr", xa, sizeof(xa), false);
	int uerr = uext4_umount(fs);
	if (err || uerr)
		return err ? err : uerr;
	p->log_lo = p->log_hi = 0;
	if (journal)
		find_log(p);
	return journal && !p->log_lo ? -1 : 0;
}

/* The rule of fault kind k on image p; false: the kind cannot apply. */
static bool rule_for(int k, const struct pristine *p, struct faultdev_rule *r)
{
	memset(r, 0, sizeof(*r));
	switch (k) {
	case K_EIO_W: r->kind = FD_EIO_NTH_WRITE; r->n = 1; break;
	/* With a journal the third write: the journal superblock, the log
	 * blocks, then the commit block; without, the second run of home
	 * writes (a setxattr writes two). */
	case K_EIO_W3: r->kind = FD_EIO_NTH_WRITE; r->n = p->log_lo ? 3 : 2; break;
	case K_EIO_FL: r->kind = FD_EIO_NTH_FLUSH; r->n = 1; break;
	case K_SHORT_R: r->kind = FD_SHORT_READ; r->n = 1; r->k = 100; break;
	case K_TORN: r->kind = FD_TORN_WRITE; r->n = 1; r->k = 512; break;
	case K_ENOSPC:
		/* The backing file is full: with a journal, past its first
		 * block (the journal superblock goes, the log does not);
		 * without, every write. */
		r->kind = FD_ENOSPC;
		r->lo = p->log_lo ? p->log_lo + 4096 : 0;
		break;
	case K_RDONLY: r->kind = FD_READ_ONLY; r->n = 1; break;
	case K_RNG_SB:
		/* Superblock and group descriptors: the first home write of
		 * every commit (with a journal: the checkpoint). */
		r->kind = FD_EIO_RANGE; r->lo = 0; r->hi = 8192; r->writes_only = 1;
		break;
	case K_RNG_LOG:
		if (!p->log_lo)
			return false;
		r->kind = FD_EIO_RANGE; r->lo = p->log_lo; r->hi = p->log_hi;
		break;
	}
	return true;
}

static bool one_shot(int k)
{
	return k == K_EIO_W || k == K_EIO_W3 || k == K_EIO_FL || k == K_SHORT_R || k == K_TORN;
}

/* May a call failing because of fault kind k return err? */
static bool allowed_err(int k, int err)
{
	if (k == K_ENOSPC)
		return err == -ENOSPC || err == -EIO;
	if (k == K_RDONLY)
		return err == -EROFS || err == -EIO;
	return err == -EIO;
}

static void note(struct outcome *o, const char *call, int err, bool sync_point)
{
	if (err && !o->first_err) {
		o->first_err = err;
		o->first_call = call;
		snprintf(o->first_msg, sizeof(o->first_msg), "%s", uext4_last_error());
	}
	if (err && sync_point)
		o->sync_failed = true;
}

static uint64_t ino_of(uext4_fs *fs, const char *path)
{
	uint64_t ino = 0;

	uext4_resolve(fs, path, 0, &ino);
	return ino;
}

/* The op's lookup is a call that can fail too. */
static uint64_t op_ino(uext4_fs *fs, const char *path, struct outcome *o)
{
	uint64_t ino = 0;

	note(o, "resolve", uext4_resolve(fs, path, 0, &ino), false);
	return ino;
}

/* ------------------------------------------------------------ a cell */

/* Before arming: what the op needs open or dirty. */
static int prepare(uext4_fs *fs, int op, uext4_file **f)
{
	struct uext4_stat st;
	char buf[8192];
	int err = 0;

	*f = NULL;
	memset(buf, 'f', sizeof(buf));
	/* The mount's first write (needs_recovery) before the fault: the
	 * faults hit the commit's own writes. */
	if ((err = trans_begin_writing(fs)))
		return err;
	if (op == OP_FSYNC) {
		if (!(err = uext4_create(fs, UEXT4_ROOT_INO, "fs1", 0644, &st)) &&
		    !(err = uext4_open(fs, st.ino, O_RDWR, f)) &&
		    uext4_pwrite(*f, buf, sizeof(buf), 0) != (ssize_t)sizeof(buf))
			err = -EIO;
	} else if (op == OP_UMOUNT) {
		err = uext4_create(fs, UEXT4_ROOT_INO, "u", 0644, &st);
	}
	return err;
}

/* The op and its sync point; for OP_UMOUNT the fs is gone after. */
static void run_op(uext4_fs *fs, int op, uext4_file *pf, struct outcome *o)
{
	struct uext4_stat st;
	struct uext4_setattr sa = { .valid = UEXT4_SET_SIZE, .size = 100 };
	uext4_file *f;
	char buf[8192];
	int err;

	memset(buf, 'x', sizeof(buf));
	switch (op) {
	case OP_CREATE: note(o, "create", uext4_create(fs, UEXT4_ROOT_INO, "new", 0644, &st), false); break;
	case OP_WRITE_FSYNC:
		err = uext4_create(fs, UEXT4_ROOT_INO, "data", 0644, &st);
		note(o, "create", err, false);
		if (err || (err = uext4_open(fs, st.ino, O_RDWR, &f))) {
			note(o, "open", err, false);
			break;
		}
		ssize_t n = uext4_pwrite(f, buf, sizeof(buf), 0);
		note(o, "pwrite", n < 0 ? (int)n : n != (ssize_t)sizeof(buf) ? -EIO : 0, false);
		note(o, "fsync", uext4_fsync(f, 0), true);
		uext4_release(f);
		return;
	case OP_RENAME: note(o, "rename", uext4_rename(fs, UEXT4_ROOT_INO, "src", UEXT4_ROOT_INO, "dst", 0), false); break;
	case OP_UNLINK: note(o, "unlink", uext4_unlink(fs, UEXT4_ROOT_INO, "victim"), false); break;
	case OP_SETXATTR: note(o, "setxattr", uext4_setxattr(fs, op_ino(fs, "/xa", o), "user.k", "v", 1, 0), false); break;
	case OP_TRUNCATE: note(o, "truncate", uext4_setattr(fs, op_ino(fs, "/tr", o), &sa, &st), false); break;
	case OP_MKDIR: note(o, "mkdir", uext4_mkdir(fs, UEXT4_ROOT_INO, "dir", 0755, &st), false); break;
	case OP_RMDIR: note(o, "rmdir", uext4_rmdir(fs, UEXT4_ROOT_INO, "rdir"), false); break;
	case OP_FSYNC:
		note(o, "fsync", uext4_fsync(pf, 0), true);
		return;
	case OP_UMOUNT:
		note(o, "umount", uext4_umount(fs), true);
		return;
	}
	note(o, "sync", uext4_sync(fs), true);
}

/* The superblock's error state as the image has it. */
static int read_error_state(const char *img, bool *error_fs, uint32_t *count)
{
	struct ext4_super_block sb;
	int fd = open(img, O_RDONLY);
	ssize_t n = fd < 0 ? -1 : pread(fd, &sb, sizeof(sb), EXT4_SUPERBLOCK_OFFSET);

	if (fd >= 0)
		close(fd);
	if (n != (ssize_t)sizeof(sb))
		return -1;
	*error_fs = (le16(sb.s_state) & EXT4_ERROR_FS) != 0;
	*count = le32(sb.s_error_count);
	return 0;
}

static bool file_has(uext4_fs *fs, const char *path, const char *data, size_t len)
{
	uext4_file *f;
	char buf[128];
	bool ok;

	if (uext4_open(fs, ino_of(fs, path), O_RDONLY, &f))
		return false;
	ok = uext4_pread(f, buf, len, 0) == (ssize_t)len && !memcmp(buf, data, len);
	uext4_release(f);
	return ok;
}

/* Remount from the file (journal recovery): the fsynced files. */
static const char *check_files(const char *img, bool want_keep2)
{
	struct uext4_opts mo = { 0 };
	const char *why = NULL;
	uext4_fs *fs;

	if (uext4_mount(img, &mo, &fs))
		return "remount failed";
	if (!file_has(fs, "/keep", keep_data, sizeof(keep_data)))
		why = "fsynced file lost";
	else if (want_keep2 && !file_has(fs, "/keep2", keep2_data, sizeof(keep2_data)))
		why = "file fsynced after a non-aborting fault lost";
	if (uext4_umount(fs) && !why)
		why = "umount after recovery failed";
	return why;
}

/* Mount img's copy through a faultdev. */
static int mount_faulty(const char *img, int errors, struct bdev **dev, uext4_fs **fs)
{
	struct uext4_opts mo = { .commit_secs = 3600, .errors = errors };
	struct bdev *base;
	int err;

	if (!(base = bdev_open_file(img, 0, &err)))
		return err ? err : -EIO;
	*dev = faultdev_open(base);
	return super_mount_bdev(*dev, &mo, fs);
}

static uint64_t faults_of(struct bdev *dev)
{
	struct faultdev_stats s;

	faultdev_stats(dev, &s);
	return s.faults;
}

/* After the op: the abort (or its absence) as the outcome says it must be. */
static const char *check_after(uext4_fs *fs, int journal, const struct outcome *o, bool *keep2)
{
	struct uext4_stat st;
	int err = uext4_create(fs, UEXT4_ROOT_INO, "later", 0644, &st);

	*keep2 = false;
	if (o->sync_failed) {
		if (err == 0)
			return "a create after the failed commit succeeded (not aborted)";
		if (journal ? err != -EROFS : err != -EROFS && err != -EIO)
			return "a create after the abort failed with an unexpected error";
		if (uext4_sync(fs) == 0)
			return "a sync after the abort succeeded";
		return NULL;
	}
	if (err)
		return "a create after a fault that aborted nothing failed";
	if (write_file(fs, "keep2", keep2_data, sizeof(keep2_data), true))
		return "write+fsync after a fault that aborted nothing failed";
	*keep2 = true;
	return NULL;
}

static const char *check_codes(int k, const struct outcome *o)
{
	if (!o->first_err)
		return "the fault fired but every call succeeded";
	if (!allowed_err(k, o->first_err))
		return "the first failing call returned an unexpected error";
	return NULL;
}

static const char *check_image(const char *img, const char *tag, bool abort_seen,
			       bool expect_flag, bool keep2)
{
	const char *why = check_files(img, keep2);
	bool error_fs = false;
	uint32_t count = 0;
	char log[300];

	if (why)
		return why;
	if (read_error_state(img, &error_fs, &count))
		return "cannot read the superblock";
	if (expect_flag && (!error_fs || !count))
		return "the abort is not recorded in the superblock";
	if (!abort_seen && error_fs)
		return "an error is recorded though nothing aborted";
	snprintf(log, sizeof(log), "%s.%s.fsck.log", img, tag);
	if (t_run_e2fsck(img, log) != 0) {
		fprintf(stderr, "e2fsck output kept in %s\n", log);
		return "e2fsck not clean";
	}
	unlink(log);
	return NULL;
}

/* One cell: NULL (ok), "n/f" (the fault did not fire) or why it failed. */
static const char *cell(const struct pristine *p, const char *img, int k, int op, int journal,
			int errors, struct outcome *o)
{
	struct faultdev_rule r;
	struct bdev *dev;
	uext4_fs *fs;
	uext4_file *pf;
	char tag[64];
	bool keep2 = false;
	const char *why;
	uint64_t before;

	memset(o, 0, sizeof(*o));
	if (!rule_for(k, p, &r))
		return "-";
	if (copy_file(p->path, img))
		return "copying the image failed";
	if (mount_faulty(img, errors, &dev, &fs))
		return "mount failed";
	if (prepare(fs, op, &pf)) {
		uext4_umount(fs);
		return "setup failed";
	}
	before = faults_of(dev);
	faultdev_arm(dev, &r);
	if (op == OP_UMOUNT) {
		/* The fault stays armed through the unmount: only a one-shot
		 * fault leaves a working device for the error record. */
		_Atomic uint64_t faults = 0;

		faultdev_count_into(dev, &faults);
		run_op(fs, op, NULL, o);
		o->fired = atomic_load(&faults) > 0;
		snprintf(tag, sizeof(tag), "%d-%d-%d", op, k, journal);
		if (!o->fired)
			return check_image(img, tag, false, false, false) ?: "n/f";
		if ((why = check_codes(k, o)))
			return why;
		return check_image(img, tag, o->sync_failed, o->sync_failed && one_shot(k), false);
	}
	run_op(fs, op, pf, o);
	o->fired = faults_of(dev) > before;
	faultdev_disarm(dev);
	why = o->fired ? check_codes(k, o) : NULL;
	if (!why)
		why = check_after(fs, journal, o, &keep2);
	if (pf)
		uext4_release(pf);
	if (!o->sync_failed) {
		/* crash: nothing more reaches the image */
		r.kind = FD_READ_ONLY;
		r.n = 1;
		faultdev_arm(dev, &r);
	}
	uext4_umount(fs);   /* after an abort: writes the error record */
	if (why)
		return why;
	snprintf(tag, sizeof(tag), "%d-%d-%d-%d", op, k, journal, errors);
	if ((why = check_image(img, tag, o->sync_failed, o->sync_failed, keep2)))
		return why;
	return o->fired ? NULL : "n/f";
}

/* ------------------------------------------------------------ errors= */

/* errors=panic: the child must exit 70 at the failed commit, having
 * recorded the error; the image recovers clean. */
static const char *panic_cell(const struct pristine *p, const char *img, int journal)
{
	struct faultdev_rule r;
	char msg[300], cmd[400];
	pid_t pid;
	int st;

	rule_for(K_EIO_W, p, &r);
	if (copy_file(p->path, img))
		return "copying the image failed";
	fflush(stdout);
	fflush(stderr);
	if ((pid = fork()) < 0)
		return "fork failed";
	snprintf(msg, sizeof(msg), "%s.panic.log", img);
	if (pid == 0) {
		struct bdev *dev;
		uext4_fs *fs;
		struct uext4_stat s;
		int fd = open(msg, O_WRONLY | O_CREAT | O_TRUNC, 0644);

		if (fd < 0 || dup2(fd, 2) < 0)
			_exit(3);

		if (mount_faulty(img, UEXT4_ERRORS_PANIC, &dev, &fs))
			_exit(2);
		faultdev_arm(dev, &r);
		uext4_create(fs, UEXT4_ROOT_INO, "new", 0644, &s);
		uext4_sync(fs);
		_exit(0);   /* no panic: wrong */
	}
	while (waitpid(pid, &st, 0) < 0)
		;
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 70)
		return "errors=panic did not exit 70 at the failed commit";
	snprintf(cmd, sizeof(cmd), "grep -q 'panic (errors=panic): .*injected write error' %s", msg);
	if (t_sh("%s", cmd))
		return "errors=panic did not say why it stopped";
	unlink(msg);
	return check_image(img, journal ? "panic-J" : "panic-N", true, true, false);
}

/* What the e2fsprogs tools see of the recorded error. */
static bool dumpe2fs_says_errors(const char *img)
{
	char cmd[400];

	snprintf(cmd, sizeof(cmd),
		 "dumpe2fs -h %s 2>/dev/null | grep -q '^Filesystem state:.*with errors'", img);
	return t_sh("%s", cmd) == 0;
}

static int errors_cells(const struct pristine *pj, const struct pristine *pn, const char *img)
{
	static const struct { int errors; const char *name; } pol[] = {
		{ UEXT4_ERRORS_CONTINUE, "continue" },
		{ UEXT4_ERRORS_RO, "remount-ro" },
		{ UEXT4_ERRORS_PANIC, "panic" },
	};
	int fails = 0;

	printf("\nerrors= (create, eio-w)   J        N\n");
	for (size_t i = 0; i < sizeof(pol) / sizeof(pol[0]); i++) {
		printf("%-25s", pol[i].name);
		for (int j = 0; j < 2; j++) {
			const struct pristine *p = j ? pn : pj;
			struct outcome o;
			const char *why;

			if (pol[i].errors == UEXT4_ERRORS_PANIC)
				why = panic_cell(p, img, !j);
			else
				why = cell(p, img, K_EIO_W, OP_CREATE, !j, pol[i].errors, &o);
			if (!why && !dumpe2fs_says_errors(img))
				why = "dumpe2fs -h does not say \"with errors\"";
			printf(" %-8s", !why ? "ok" : !strcmp(why, "n/f") ? "n/f" : "FAIL");
			if (why && strcmp(why, "n/f")) {
				fails++;
				fprintf(stderr, "FAIL errors=%s/%s: %s\n", pol[i].name,
					j ? "nojournal" : "journal", why);
			}
		}
		printf("\n");
	}
	return fails;
}

int main(void)
{
	struct pristine pj, pn;
	char img[256];
	int fails = 0, nf = 0;

	snprintf(img, sizeof(img), "/dev/shm/uext4-faultdev-%d.img", (int)getpid());
	if (make_pristine(&pj, 1) || make_pristine(&pn, 0)) {
		fprintf(stderr, "making the pristine images failed: %s\n", uext4_last_error());
		return T_FAIL;
	}
	printf("%-12s", "op \\ fault");
	for (int j = 0; j < 2; j++)
		for (int k = 0; k < NKINDS; k++)
			printf(" %-7s%c", kind_names[k], j ? 'N' : 'J');
	printf("\n");
	for (int op = 0; op < NOPS; op++) {
		printf("%-12s", op_names[op]);
		for (int j = 0; j < 2; j++)
			for (int k = 0; k < NKINDS; k++) {
				struct outcome o;
				const char *why = cell(j ? &pn : &pj, img, k, op, !j, 0, &o);
				bool is_nf = why && !strcmp(why, "n/f"), na = why && !strcmp(why, "-");

				printf(" %-8s", !why ? "ok" : is_nf ? "n/f" : na ? "-" : "FAIL");
				nf += is_nf;
				if (why && !is_nf && !na) {
					fails++;
					fprintf(stderr, "FAIL %s/%s/%s: %s (first failing call: %s = %d%s%s)\n",
						op_names[op], kind_names[k], j ? "nojournal" : "journal",
						why, o.first_call ? o.first_call : "none", o.first_err,
						o.first_msg[0] ? ": " : "", o.first_msg);
				}
				fflush(stdout);
			}
		printf("\n");
	}
	fails += errors_cells(&pj, &pn, img);
	unlink(img);
	unlink(pj.path);
	unlink(pn.path);
	printf("%s: %d failing cells, %d where the fault did not fire (n/f) "
	       "(J = journal, N = no journal, - = no journal to hit)\n",
	       fails ? "FAIL" : "PASS", fails, nf);
	return fails ? T_FAIL : T_PASS;
}
