/*
 * nullfs.c - a FUSE filesystem that does no work, for measuring request
 * loops (see fuse/loop.h) and the cost of a FUSE round trip.
 *
 *   nullfs [-f] [--loop=st|mt|pool] [--threads=N] [--idle=N] [--clone-fd]
 *          MOUNTPOINT
 *
 * Every name in the root exists and is a 4 KiB regular file; reads return
 * zeros.  Entry and attribute timeouts are 0 and opens use direct_io, so
 * every stat(), open() and read() of a client reaches this server.  Without
 * -f it returns once the mount is ready (fuse_daemonize).
 */
#define FUSE_USE_VERSION 312
#include "../fuse/loop.h"
#include "../fuse/loop.c"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define FILE_SIZE 4096

static void null_attr(fuse_ino_t ino, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = ino;
	if (ino == FUSE_ROOT_ID) {
		st->st_mode = S_IFDIR | 0755;
		st->st_nlink = 2;
	} else {
		st->st_mode = S_IFREG | 0644;
		st->st_nlink = 1;
		st->st_size = FILE_SIZE;
	}
}

/* A stable inode number per name, so the kernel sees distinct files. */
static fuse_ino_t name_ino(const char *name)
{
	uint64_t h = 1469598103934665603ull;

	for (; *name; name++)
		h = (h ^ (unsigned char)*name) * 1099511628211ull;
	return (h % 1000000007ull) + 2;
}

static void null_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fuse_entry_param e;

	if (parent != FUSE_ROOT_ID) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	memset(&e, 0, sizeof(e));
	e.ino = name_ino(name);
	null_attr(e.ino, &e.attr);
	fuse_reply_entry(req, &e);
}

static void null_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct stat st;

	null_attr(ino, &st);
	fuse_reply_attr(req, &st, 0);
}

static void null_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	fi->direct_io = 1;
	fuse_reply_open(req, fi);
}

static void null_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		      struct fuse_file_info *fi)
{
	static const char zeros[FILE_SIZE];

	if (off >= FILE_SIZE)
		size = 0;
	else if (size > (size_t)(FILE_SIZE - off))
		size = FILE_SIZE - off;
	fuse_reply_buf(req, zeros, size);
}

static void null_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			 struct fuse_file_info *fi)
{
	static const char *names[] = { ".", "..", "a", "b", "c" };
	char buf[1024];
	size_t used = 0;
	struct stat st;

	for (off_t i = off; i < 5; i++) {
		null_attr(i < 2 ? FUSE_ROOT_ID : name_ino(names[i]), &st);
		size_t n = fuse_add_direntry(req, buf + used, sizeof(buf) - used,
					     names[i], &st, i + 1);
		if (used + n > size || used + n > sizeof(buf))
			break;
		used += n;
	}
	fuse_reply_buf(req, buf, used);
}

static const struct fuse_lowlevel_ops null_ops = {
	.lookup = null_lookup,
	.getattr = null_getattr,
	.open = null_open,
	.read = null_read,
	.readdir = null_readdir,
};

static void usage(void)
{
	fprintf(stderr, "usage: nullfs [-f] [--loop=st|mt|pool] [--threads=N] "
		"[--idle=N] [--clone-fd] MOUNTPOINT\n");
	exit(2);
}

int main(int argc, char **argv)
{
	struct uext4_loop_opts lo = { .kind = UEXT4_LOOP_ST, .max_idle = -1 };
	char *fargv[] = { argv[0], "-o", "fsname=nullfs,subtype=nullfs", NULL };
	struct fuse_args args = FUSE_ARGS_INIT(3, fargv);
	const char *mnt = NULL;
	int foreground = 0, ret;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "-f"))
			foreground = 1;
		else if (!strncmp(a, "--loop=", 7)) {
			if (uext4_loop_parse(a + 7, &lo.kind))
				usage();
		} else if (!strncmp(a, "--threads=", 10))
			lo.threads = (unsigned)atoi(a + 10);
		else if (!strncmp(a, "--idle=", 7))
			lo.max_idle = atoi(a + 7);
		else if (!strcmp(a, "--clone-fd"))
			lo.clone_fd = 1;
		else if (a[0] == '-' || mnt)
			usage();
		else
			mnt = a;
	}
	if (!mnt)
		usage();

	struct fuse_session *se = fuse_session_new(&args, &null_ops, sizeof(null_ops), NULL);
	if (!se)
		return 1;
	if (fuse_set_signal_handlers(se) || fuse_session_mount(se, mnt)) {
		fuse_session_destroy(se);
		return 1;
	}
	fuse_daemonize(foreground);
	ret = uext4_loop_run(se, &lo);
	fuse_session_unmount(se);
	fuse_remove_signal_handlers(se);
	fuse_session_destroy(se);
	return ret < 0 ? 1 : 0;
}
