/*
 * nullfs.c - a FUSE filesystem that does no work, for measuring request
 * loops (see fuse/loop.h) and the cost of a FUSE round trip.
 *
 *   nullfs [-f] [--loop=st|mt|pool|uring] [--threads=N] [--idle=N] [--clone-fd]
 *          [--create [--timeout=SECONDS] [--writeback]] MOUNTPOINT
 *
 * Default mode: every name in the root exists and is a 4 KiB regular file;
 * reads return zeros.  Entry and attribute timeouts are 0 and opens use
 * direct_io, so every stat(), open() and read() of a client reaches this
 * server.
 *
 * --create mode (the ceiling of the FUSE create path, bench/create.sh): the
 * root starts empty; lookups of unknown names answer ENOENT (not cached,
 * as uext4's read-write mount does); mkdir and create hand out new fake
 * inode numbers.  Only directories are remembered (a small table, so path
 * walks through them work); files are not, so the stub does no per-file
 * work.  unlink/rmdir succeed without doing anything.  Entries and
 * attributes use --timeout (default 1 s, uext4's read-write timeout).
 *
 * --writeback (with --create): ask for the kernel's writeback cache, as
 * uext4's read-write mount does.  The kernel then owns a regular file's
 * times and sends a SETATTR of the new ctime after every UNLINK or RENAME
 * of one (fuse_update_ctime()); the stub answers it with the fake
 * attributes.  It is the ceiling of a server with uext4's cache settings.
 *
 * Without -f it returns once the mount is ready (fuse_daemonize).
 */
#define FUSE_USE_VERSION 312
#include "../fuse/loop.h"
#include "../fuse/loop.c"
#include "../fuse/uring.c"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define FILE_SIZE 4096

/* Inode numbers handed out by --create mode carry their type in this bit. */
#define DIR_BIT (1ull << 62)

static void null_attr(fuse_ino_t ino, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = ino;
	if (ino == FUSE_ROOT_ID || (ino & DIR_BIT)) {
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

/* ---- --create mode -------------------------------------------------------- */

static int create_mode;
static int writeback;           /* --writeback; set before the session starts */
static double create_timeout = 1.0;
static atomic_uint_fast64_t next_ino = 2;

/* Directories made by mkdir: (parent, name) -> inode.  A chained hash table
 * that only grows; protected by dir_lock. */
#define DIR_BUCKETS 1024
struct dir_node {
	struct dir_node *next;
	fuse_ino_t parent, ino;
	char name[];
};
static struct dir_node *dir_table[DIR_BUCKETS];
static pthread_mutex_t dir_lock = PTHREAD_MUTEX_INITIALIZER;

static unsigned dir_bucket(fuse_ino_t parent, const char *name)
{
	uint64_t h = 1469598103934665603ull ^ parent;

	for (; *name; name++)
		h = (h ^ (unsigned char)*name) * 1099511628211ull;
	return (unsigned)(h % DIR_BUCKETS);
}

static fuse_ino_t dir_find(fuse_ino_t parent, const char *name)
{
	fuse_ino_t ino = 0;

	pthread_mutex_lock(&dir_lock);
	for (struct dir_node *d = dir_table[dir_bucket(parent, name)]; d; d = d->next)
		if (d->parent == parent && !strcmp(d->name, name)) {
			ino = d->ino;
			break;
		}
	pthread_mutex_unlock(&dir_lock);
	return ino;
}

static int dir_add(fuse_ino_t parent, const char *name, fuse_ino_t ino)
{
	size_t len = strlen(name);
	struct dir_node *d = malloc(sizeof(*d) + len + 1);
	unsigned b = dir_bucket(parent, name);

	if (!d)
		return ENOMEM;
	d->parent = parent;
	d->ino = ino;
	memcpy(d->name, name, len + 1);
	pthread_mutex_lock(&dir_lock);
	d->next = dir_table[b];
	dir_table[b] = d;
	pthread_mutex_unlock(&dir_lock);
	return 0;
}

static void fake_entry(fuse_ino_t ino, struct fuse_entry_param *e)
{
	memset(e, 0, sizeof(*e));
	e->ino = ino;
	e->attr_timeout = create_timeout;
	e->entry_timeout = create_timeout;
	null_attr(ino, &e->attr);
}

static void create_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fuse_entry_param e;
	fuse_ino_t ino = dir_find(parent, name);

	if (!ino) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	fake_entry(ino, &e);
	fuse_reply_entry(req, &e);
}

static void null_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	struct fuse_entry_param e;
	fuse_ino_t ino = atomic_fetch_add(&next_ino, 1) | DIR_BIT;
	int err = dir_add(parent, name, ino);

	if (err) {
		fuse_reply_err(req, err);
		return;
	}
	fake_entry(ino, &e);
	fuse_reply_entry(req, &e);
}

static void null_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
			struct fuse_file_info *fi)
{
	struct fuse_entry_param e;

	fake_entry(atomic_fetch_add(&next_ino, 1), &e);
	fuse_reply_create(req, &e, fi);
}

static void null_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	fuse_reply_err(req, 0);
}

static void null_remove(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	fuse_reply_err(req, 0);
}

static void null_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	fuse_reply_none(req);
}

static void null_init(void *userdata, struct fuse_conn_info *conn)
{
	if (writeback && (conn->capable & FUSE_CAP_WRITEBACK_CACHE))
		conn->want |= FUSE_CAP_WRITEBACK_CACHE;
}

/* --writeback: the times the kernel writes back (and any other change)
 * are accepted and forgotten. */
static void null_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
			 struct fuse_file_info *fi)
{
	struct stat st;

	null_attr(ino, &st);
	fuse_reply_attr(req, &st, create_timeout);
}

/* ---- both modes ------------------------------------------------------------ */

static void null_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fuse_entry_param e;

	if (create_mode) {
		create_lookup(req, parent, name);
		return;
	}
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
	fuse_reply_attr(req, &st, create_mode ? create_timeout : 0);
}

static void null_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	fi->direct_io = !create_mode;
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
	off_t count = create_mode ? 2 : 5;   /* --create: nothing is listed */

	for (off_t i = off; i < count; i++) {
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

/* --create mode adds the namespace operations. */
static const struct fuse_lowlevel_ops null_create_ops = {
	.init = null_init,
	.setattr = null_setattr,
	.lookup = null_lookup,
	.forget = null_forget,
	.getattr = null_getattr,
	.open = null_open,
	.read = null_read,
	.readdir = null_readdir,
	.mkdir = null_mkdir,
	.create = null_create,
	.release = null_release,  /* no flush, like uext4: the kernel stops sending it */
	.unlink = null_remove,
	.rmdir = null_remove,
};

static void usage(void)
{
	fprintf(stderr, "usage: nullfs [-f] [--loop=st|mt|pool|uring] [--threads=N] "
		"[--idle=N] [--clone-fd] [--create [--timeout=SECONDS] [--writeback]] MOUNTPOINT\n");
	exit(2);
}

int main(int argc, char **argv)
{
	struct uext4_loop_opts lo = { .kind = UEXT4_LOOP_ST, .max_idle = -1 };
	const char *env_loop = getenv("UEXT4_FUSE_LOOP");  /* default, as uext4 mount */
	char *fargv[] = { argv[0], "-o", "fsname=nullfs,subtype=nullfs", NULL };
	struct fuse_args args = FUSE_ARGS_INIT(3, fargv);
	const char *mnt = NULL;
	int foreground = 0, ret;

	if (env_loop && *env_loop && uext4_loop_parse(env_loop, &lo.kind))
		usage();
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
		else if (!strcmp(a, "--create"))
			create_mode = 1;
		else if (!strncmp(a, "--timeout=", 10))
			create_timeout = atof(a + 10);
		else if (!strcmp(a, "--writeback"))
			writeback = 1;
		else if (a[0] == '-' || mnt)
			usage();
		else
			mnt = a;
	}
	if (!mnt)
		usage();

	const struct fuse_lowlevel_ops *ops = create_mode ? &null_create_ops : &null_ops;
	struct fuse_session *se = fuse_session_new(&args, ops, sizeof(*ops), NULL);
	if (!se) {
		fuse_opt_free_args(&args);
		return 1;
	}
	if (fuse_set_signal_handlers(se) || fuse_session_mount(se, mnt)) {
		fuse_session_destroy(se);
		fuse_opt_free_args(&args);
		return 1;
	}
	fuse_daemonize(foreground);
	ret = uext4_loop_run(se, &lo);
	fuse_session_unmount(se);
	fuse_remove_signal_handlers(se);
	fuse_session_destroy(se);
	fuse_opt_free_args(&args);   /* fuse_session_new() may have added to them */
	return ret < 0 ? 1 : 0;
}
