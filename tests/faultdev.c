/*
 * faultdev.c - fault-injection matrix on the faultdev block device.
 *
 * For each fault kind x op kind x journal on/off: build a fresh image in
 * /dev/shm with mke2fs, mount it through a faultdev, write and fsync a
 * "keep" file, arm the fault, run the op (its error may be anything but a
 * crash/hang), then cut the device off (every later write fails: a crash),
 * unmount, remount the file directly (journal recovery), check that the
 * fsynced contents of "keep" survived, unmount and run e2fsck -fn.
 * Prints a table; exits 1 on any FAIL.
 */
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "internal.h"
#include "faultdev.h"
#include "t.h"

enum { NOPS = 4, NKINDS = 6 };
static const char *op_names[NOPS] = { "create", "write+fsync", "unlink", "mkdir" };
static const char *kind_names[NKINDS] = { "eio-w", "eio-fl", "short-r", "torn", "enospc", "rdonly" };
static const char keep_data[] = "acknowledged by fsync before the fault";

static int mkimage(const char *img, int journal)
{
	char cmd[1024];
	snprintf(cmd, sizeof(cmd), "rm -f %s; mke2fs -q -F -t ext4 %s -b 4096 %s 16M >/dev/null 2>&1",
		 img, journal ? "" : "-O ^has_journal", img);
	return system(cmd);
}

static void rule_for(int kind, struct faultdev_rule *r)
{
	memset(r, 0, sizeof(*r));
	switch (kind) {
	case 0: r->kind = FD_EIO_NTH_WRITE; r->n = 1; break;
	case 1: r->kind = FD_EIO_NTH_FLUSH; r->n = 1; break;
	case 2: r->kind = FD_SHORT_READ; r->n = 1; r->k = 100; break;
	case 3: r->kind = FD_TORN_WRITE; r->n = 1; r->k = 512; break;
	case 4: r->kind = FD_ENOSPC; r->lo = 4u << 20; break;
	case 5: r->kind = FD_READ_ONLY; r->n = 1; break;
	}
}

static void run_op(uext4_fs *fs, int op)
{
	struct uext4_stat st;
	uext4_file *f;
	char buf[8192];

	memset(buf, 'x', sizeof(buf));
	switch (op) {
	case 0: uext4_create(fs, UEXT4_ROOT_INO, "new", 0644, &st); break;
	case 1:
		if (!uext4_create(fs, UEXT4_ROOT_INO, "data", 0644, &st) &&
		    !uext4_open(fs, st.ino, O_RDWR, &f)) {
			uext4_pwrite(f, buf, sizeof(buf), 0);
			uext4_fsync(f, 0);
			uext4_release(f);
		}
		break;
	case 2: uext4_unlink(fs, UEXT4_ROOT_INO, "victim"); break;
	case 3: uext4_mkdir(fs, UEXT4_ROOT_INO, "dir", 0755, &st); break;
	}
}

static int write_keep(uext4_fs *fs)
{
	struct uext4_stat st;
	uext4_file *f;
	int err = uext4_create(fs, UEXT4_ROOT_INO, "keep", 0644, &st);

	if (!err)
		err = uext4_create(fs, UEXT4_ROOT_INO, "victim", 0644, &st);
	if (!err)
		err = uext4_resolve(fs, "/keep", 0, &st.ino);
	if (!err)
		err = uext4_open(fs, st.ino, O_RDWR, &f);
	if (err)
		return err;
	if (uext4_pwrite(f, keep_data, sizeof(keep_data), 0) != (ssize_t)sizeof(keep_data))
		err = -EIO;
	if (!err)
		err = uext4_fsync(f, 0);
	uext4_release(f);
	return err;
}

static const char *check_keep(const char *img)
{
	uext4_fs *fs;
	uext4_file *f;
	uint64_t ino;
	char buf[sizeof(keep_data)];
	const char *why = NULL;
	struct uext4_opts mo = { 0 };

	if (uext4_mount(img, &mo, &fs))
		return "remount failed";
	if (uext4_resolve(fs, "/keep", 0, &ino) || uext4_open(fs, ino, O_RDONLY, &f))
		why = "fsynced file lost";
	else {
		if (uext4_pread(f, buf, sizeof(buf), 0) != (ssize_t)sizeof(buf) ||
		    memcmp(buf, keep_data, sizeof(buf)))
			why = "fsynced contents lost";
		uext4_release(f);
	}
	if (uext4_umount(fs) && !why)
		why = "umount after recovery failed";
	return why;
}

static const char *cell(const char *img, int kind, int op, int journal)
{
	struct uext4_opts mo = { .commit_secs = 3600 };
	struct faultdev_rule r;
	struct bdev *base, *dev;
	uext4_fs *fs;
	int err;
	char log[300];

	if (mkimage(img, journal))
		return "mke2fs failed";
	base = bdev_open_file(img, 0, &err);
	if (!base)
		return "open failed";
	dev = faultdev_open(base);
	if (super_mount_bdev(dev, &mo, &fs)) {
		bdev_close(dev);
		return "mount failed";
	}
	if (write_keep(fs)) {
		uext4_umount(fs);
		return "setup failed";
	}
	rule_for(kind, &r);
	faultdev_arm(dev, &r);
	run_op(fs, op);
	/* crash: nothing more reaches the image */
	r.kind = FD_READ_ONLY;
	r.n = 1;
	faultdev_arm(dev, &r);
	uext4_umount(fs);   /* error expected; closes dev and base */
	const char *why = check_keep(img);
	if (why)
		return why;
	snprintf(log, sizeof(log), "%s.%d-%d-%d.fsck.log", img, op, kind, journal);
	if (t_run_e2fsck(img, log) != 0) {
		fprintf(stderr, "e2fsck output kept in %s\n", log);
		return "e2fsck not clean";
	}
	unlink(log);
	return NULL;
}

int main(void)
{
	char img[256];
	int fails = 0;

	snprintf(img, sizeof(img), "/dev/shm/uext4-faultdev-%d.img", (int)getpid());
	printf("%-12s", "op \\ fault");
	for (int j = 0; j < 2; j++)
		for (int k = 0; k < NKINDS; k++)
			printf(" %-7s%c", kind_names[k], j ? 'N' : 'J');
	printf("\n");
	for (int op = 0; op < NOPS; op++) {
		printf("%-12s", op_names[op]);
		for (int j = 0; j < 2; j++)
			for (int k = 0; k < NKINDS; k++) {
				const char *why = cell(img, k, op, !j);
				printf(" %-8s", why ? "FAIL" : "ok");
				if (why) {
					fails++;
					fprintf(stderr, "FAIL %s/%s/%s: %s\n", op_names[op],
						kind_names[k], j ? "nojournal" : "journal", why);
				}
				fflush(stdout);
			}
		printf("\n");
	}
	unlink(img);
	printf("%s: %d failing cells (J = journal, N = no journal)\n", fails ? "FAIL" : "PASS", fails);
	return fails ? T_FAIL : T_PASS;
}
