/*
 * fuse_handle - file handles through a mount, for tests/fuse_handle.sh:
 *
 *   fuse_handle save DIR OUT NAME...
 *       name_to_handle_at(2) of each NAME (relative to DIR, not followed);
 *       writes "NAME TYPE HEX" lines to OUT.
 *   fuse_handle open DIR IN
 *       open_by_handle_at(2) of each handle of IN, with a descriptor of DIR
 *       naming the mount; prints "NAME ino INO sum SUM" (SUM: a checksum
 *       of a regular file's contents, 0 for others) or "NAME ERRNO-NAME".
 *
 * open_by_handle_at needs CAP_DAC_READ_SEARCH (root).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "t.h"

#define HANDLE_MAX 128  /* MAX_HANDLE_SZ */

static int save(const char *dir, const char *out, char **names, int n)
{
	int dfd = open(dir, O_RDONLY | O_DIRECTORY);
	FILE *f = fopen(out, "w");

	if (dfd < 0 || !f) {
		perror(dfd < 0 ? dir : out);
		return T_FAIL;
	}
	for (int i = 0; i < n; i++) {
		union {
			struct file_handle fh;
			char space[sizeof(struct file_handle) + HANDLE_MAX];
		} h;
		int mount_id;

		h.fh.handle_bytes = HANDLE_MAX;
		if (name_to_handle_at(dfd, names[i], &h.fh, &mount_id, 0)) {
			fprintf(stderr, "name_to_handle_at %s: %s\n", names[i], strerror(errno));
			return T_FAIL;
		}
		fprintf(f, "%s %d ", names[i], h.fh.handle_type);
		for (unsigned j = 0; j < h.fh.handle_bytes; j++)
			fprintf(f, "%02x", (unsigned char)h.fh.f_handle[j]);
		fputc('\n', f);
	}
	close(dfd);
	return fclose(f) ? 1 : 0;
}

/* A checksum of what fd reads (a regular file's contents). */
static unsigned long content_sum(int fd)
{
	unsigned char buf[4096];
	unsigned long sum = 0;
	ssize_t got;

	while ((got = read(fd, buf, sizeof(buf))) > 0)
		for (ssize_t i = 0; i < got; i++)
			sum = sum * 31 + buf[i];
	return got < 0 ? 1 : sum;
}

static void open_one(int mfd, const char *name, int type, const char *hex)
{
	union {
		struct file_handle fh;
		char space[sizeof(struct file_handle) + HANDLE_MAX];
	} h;
	size_t len = strlen(hex) / 2;
	struct stat st;
	int fd;

	if (len > HANDLE_MAX) {
		printf("%s bad-handle\n", name);
		return;
	}
	h.fh.handle_bytes = (unsigned)len;
	h.fh.handle_type = type;
	for (size_t j = 0; j < len; j++)
		sscanf(hex + 2 * j, "%2hhx", (unsigned char *)&h.fh.f_handle[j]);
	fd = open_by_handle_at(mfd, &h.fh, O_RDONLY);
	if (fd < 0) {
		printf("%s %s\n", name, strerrorname_np(errno));
		return;
	}
	if (fstat(fd, &st)) {
		printf("%s fstat-%s\n", name, strerrorname_np(errno));
	} else {
		printf("%s ino %llu sum %lu\n", name, (unsigned long long)st.st_ino,
		       S_ISREG(st.st_mode) ? content_sum(fd) : 0UL);
	}
	close(fd);
}

static int open_all(const char *dir, const char *in)
{
	int mfd = open(dir, O_RDONLY | O_DIRECTORY);
	FILE *f = fopen(in, "r");
	char name[256], hex[2 * HANDLE_MAX + 2];
	int type;

	if (mfd < 0 || !f) {
		perror(mfd < 0 ? dir : in);
		return T_FAIL;
	}
	while (fscanf(f, "%255s %d %257s", name, &type, hex) == 3)
		open_one(mfd, name, type, hex);
	fclose(f);
	close(mfd);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 4 && !strcmp(argv[1], "save"))
		return save(argv[2], argv[3], argv + 4, argc - 4);
	if (argc == 4 && !strcmp(argv[1], "open"))
		return open_all(argv[2], argv[3]);
	fprintf(stderr, "usage: fuse_handle save DIR OUT NAME... | open DIR IN\n");
	return 2;
}
