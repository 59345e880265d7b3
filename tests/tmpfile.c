/*
 * tmpfile - O_TMPFILE through a mount, for tests/tmpfile.sh.  Each prints
 * one line per step ("step: ok ..." or "step: ERRNO-NAME"), the same on
 * any file system that does what the kernel's ext4 does:
 *
 *   tmpfile link DIR NAME1 NAME2
 *       an O_TMPFILE file in DIR: write DATA_SIZE bytes, read them back,
 *       fstat (no links); linkat(fd, "", AT_EMPTY_PATH) as DIR/NAME1,
 *       then linkat of /proc/self/fd/N as DIR/NAME2; fstat (2 links).
 *   tmpfile excl DIR NAME
 *       O_TMPFILE | O_EXCL: linkat must fail (ENOENT).
 *   tmpfile hold DIR
 *       an O_TMPFILE file of DATA_SIZE bytes, fsync'd; prints "ready
 *       INO" and waits, holding it open, until stdin ends.
 *   tmpfile check FILE
 *       FILE holds the data the others write.
 *   tmpfile lib IMAGE
 *       the same through libuext4 (uext4_tmpfile(), uext4_link()) on an
 *       image with a directory /d: O_RDONLY is EINVAL; an O_EXCL file
 *       cannot be linked (ENOENT); a file written and linked as /d/lib
 *       keeps its data; the ones not linked are freed at their release
 *       (the free-inode count); exit 1 on a failed check.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "uext4.h"
#include "t.h"

#define DATA_SIZE (300 * 1024 + 123)

static unsigned char data_at(size_t i)
{
	return (unsigned char)(i * 7 + i / 4096);
}

static int report(const char *step, int ret)
{
	if (ret < 0)
		printf("%s: %s\n", step, strerrorname_np(errno));
	else
		printf("%s: ok\n", step);
	return ret;
}

static int write_data(int fd)
{
	static unsigned char buf[DATA_SIZE];

	for (size_t i = 0; i < DATA_SIZE; i++)
		buf[i] = data_at(i);
	return pwrite(fd, buf, DATA_SIZE, 0) == DATA_SIZE ? 0 : -1;
}

/* 0 if fd (from offset 0) holds exactly the data. */
static int data_matches(int fd)
{
	static unsigned char buf[DATA_SIZE + 1];
	ssize_t got = pread(fd, buf, sizeof(buf), 0);

	if (got != DATA_SIZE) {
		errno = got < 0 ? errno : EBADMSG;
		return -1;
	}
	for (size_t i = 0; i < DATA_SIZE; i++)
		if (buf[i] != data_at(i)) {
			errno = EBADMSG;
			return -1;
		}
	return 0;
}

static void print_stat(int fd)
{
	struct stat st;

	if (report("fstat", fstat(fd, &st)) == 0)
		printf("  nlink %lu size %lld mode %o\n", (unsigned long)st.st_nlink,
		       (long long)st.st_size, st.st_mode);
}

static int open_tmpfile(const char *dir, int extra)
{
	int fd = open(dir, O_TMPFILE | O_RDWR | extra, 0640);

	report("open O_TMPFILE", fd);
	return fd;
}

static int do_link(const char *dir, const char *n1, const char *n2)
{
	char path[4096], proc[64];
	int fd = open_tmpfile(dir, 0);

	if (fd < 0)
		return 1;
	report("write", write_data(fd));
	report("read back", data_matches(fd));
	print_stat(fd);
	snprintf(path, sizeof(path), "%s/%s", dir, n1);
	report("linkat AT_EMPTY_PATH", linkat(fd, "", AT_FDCWD, path, AT_EMPTY_PATH));
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	snprintf(path, sizeof(path), "%s/%s", dir, n2);
	report("linkat /proc/self/fd", linkat(AT_FDCWD, proc, AT_FDCWD, path, AT_SYMLINK_FOLLOW));
	print_stat(fd);
	report("close", close(fd));
	return 0;
}

static int do_excl(const char *dir, const char *n1)
{
	char path[4096];
	int fd = open_tmpfile(dir, O_EXCL);

	if (fd < 0)
		return 1;
	snprintf(path, sizeof(path), "%s/%s", dir, n1);
	report("linkat O_EXCL", linkat(fd, "", AT_FDCWD, path, AT_EMPTY_PATH));
	close(fd);
	return 0;
}

static int do_hold(const char *dir)
{
	struct stat st;
	char c;
	int fd = open_tmpfile(dir, 0);

	if (fd < 0 || report("write", write_data(fd)) || report("fsync", fsync(fd)) ||
	    fstat(fd, &st))
		return 1;
	printf("ready %llu\n", (unsigned long long)st.st_ino);
	fflush(stdout);
	while (read(0, &c, 1) > 0)
		;
	close(fd);
	return 0;
}


static void lib_check(bool ok, const char *what, int ret)
{
	CHECK_ERR(ok, "lib: %s (%d)", what, ret);
}

static uint64_t lib_free_inodes(uext4_fs *fs)
{
	struct uext4_statfs st;

	return uext4_statfs(fs, &st) ? 0 : st.inodes_free;
}

/* uext4_tmpfile() then uext4_link() as name in dir; the link's result. */
static int lib_tmpfile_linked(uext4_fs *fs, uint64_t dir, int flags, const char *name,
			      const void *buf, size_t len)
{
	struct uext4_stat st;
	uext4_file *f;
	int ret = uext4_tmpfile(fs, dir, 0600, flags, &f, &st);

	lib_check(ret == 0 && st.nlink == 0, "uext4_tmpfile", ret);
	if (ret)
		return ret;
	if (len)
		lib_check(uext4_pwrite(f, buf, len, 0) == (ssize_t)len, "uext4_pwrite", 0);
	ret = uext4_link(fs, st.ino, dir, name, NULL);
	lib_check(uext4_release(f) == 0, "uext4_release", 0);
	return ret;
}

static int do_lib(const char *img)
{
	static unsigned char buf[DATA_SIZE], back[DATA_SIZE];
	struct uext4_opts o = {0};
	struct uext4_stat st;
	uext4_file *f;
	uext4_fs *fs;
	uint64_t dir, before;
	int ret = uext4_mount(img, &o, &fs);

	if (ret) {
		printf("lib: mount: %s\n", uext4_last_error());
		return 1;
	}
	for (size_t i = 0; i < DATA_SIZE; i++)
		buf[i] = data_at(i);
	ret = uext4_resolve(fs, "/d", 1, &dir);
	lib_check(ret == 0, "resolve /d", ret);
	before = lib_free_inodes(fs);
	ret = uext4_tmpfile(fs, dir, 0600, O_RDONLY, &f, NULL);
	lib_check(ret == -EINVAL && !f, "O_RDONLY is EINVAL", ret);
	ret = lib_tmpfile_linked(fs, dir, O_RDWR | O_EXCL, "excl", buf, 4096);
	lib_check(ret == -ENOENT, "an O_EXCL tmpfile cannot be linked", ret);
	lib_check(lib_free_inodes(fs) == before, "the O_EXCL tmpfile is freed at release", 0);
	ret = lib_tmpfile_linked(fs, dir, O_WRONLY, "lib", buf, DATA_SIZE);
	lib_check(ret == 0, "link a tmpfile", ret);
	lib_check(lib_free_inodes(fs) == before - 1, "the linked tmpfile stays", 0);
	ret = uext4_stat_path(fs, "/d/lib", &st);
	lib_check(ret == 0 && st.nlink == 1 && st.size == DATA_SIZE, "stat /d/lib", ret);
	if (ret == 0 && (ret = uext4_open(fs, st.ino, O_RDONLY, &f)) == 0) {
		lib_check(uext4_pread(f, back, DATA_SIZE, 0) == DATA_SIZE &&
			  !memcmp(buf, back, DATA_SIZE), "/d/lib holds the data", 0);
		uext4_release(f);
	}
	ret = uext4_umount(fs);
	lib_check(ret == 0, "umount", ret);
	printf("lib: %s\n", t_failures ? "FAIL" : "ok");
	return t_failures ? 1 : 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 5 && !strcmp(argv[1], "link"))
		return do_link(argv[2], argv[3], argv[4]);
	if (argc == 4 && !strcmp(argv[1], "excl"))
		return do_excl(argv[2], argv[3]);
	if (argc == 3 && !strcmp(argv[1], "hold"))
		return do_hold(argv[2]);
	if (argc == 3 && !strcmp(argv[1], "lib"))
		return do_lib(argv[2]);
	if (argc == 3 && !strcmp(argv[1], "check")) {
		int fd = open(argv[2], O_RDONLY);

		return report("check", fd < 0 ? -1 : data_matches(fd)) ? 1 : 0;
	}
	fprintf(stderr, "usage: tmpfile link DIR N1 N2 | excl DIR N | hold DIR | check FILE | lib IMAGE\n");
	return 2;
}
