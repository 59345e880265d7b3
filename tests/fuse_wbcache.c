/*
 * fuse_wbcache.c - helper of tests/fuse_wbcache.sh (run only by it): the
 * cases where the FUSE writeback cache made the mount differ from the
 * kernel's ext4 (fstests generic/436, 553, 451).  Each mode prints
 * lines the script compares between a kernel ext4 mount and a uext4 one.
 *
 *   fuse_wbcache seek DIR        SEEK_DATA/SEEK_HOLE of files whose data is
 *                                still in dirty pages.
 *   fuse_wbcache immutable DIR   chattr +i on an open file with dirty pages,
 *                                then copy_file_range into it.
 *   fuse_wbcache dio FILE SEED   AIO O_DIRECT writes racing buffered reads;
 *                                a buffered read after each write must see
 *                                it.
 *   fuse_wbcache tsorder DIR     generic/423's objects, one after another:
 *                                no time may go backwards from one to the
 *                                next.
 *   fuse_wbcache maxsize DIR     generic/308: a block written just below
 *                                the largest file size, then writes at and
 *                                across it from a new open: what write(2)
 *                                and fsync return.
 *   fuse_wbcache maxfresh DIR    a new file written at once at that size:
 *                                refused at write(2) or at fsync.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/aio_abi.h>
#include <linux/fs.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <unistd.h>

#include "t.h"

static void die(const char *what)
{
	perror(what);
	exit(2);
}

static void path_in(char *buf, size_t len, const char *dir, const char *name, int i)
{
	snprintf(buf, len, "%s/%s%d", dir, name, i);
}

static void print_seek(int fd, const char *name, off_t off)
{
	off_t d = lseek(fd, off, SEEK_DATA), h;
	int de = errno;

	h = lseek(fd, off, SEEK_HOLE);
	printf("%s %jd data %jd%s hole %jd%s\n", name, (intmax_t)off, (intmax_t)d,
	       d < 0 ? (de == ENXIO ? " ENXIO" : " ERR") : "", (intmax_t)h,
	       h < 0 ? (errno == ENXIO ? " ENXIO" : " ERR") : "");
}

static void fill(int fd, off_t off, size_t len, int byte)
{
	char buf[8192];

	memset(buf, byte, sizeof(buf));
	while (len) {
		size_t n = len < sizeof(buf) ? len : sizeof(buf);

		if (pwrite(fd, buf, n, off) != (ssize_t)n)
			die("pwrite");
		off += (off_t)n;
		len -= n;
	}
}

/* Files whose data is (partly) in dirty pages: the probes are made before
 * any close or fsync.  generic/436's first case is "new". */
static int mode_seek(const char *dir)
{
	static const off_t probes[] = { 0, 1, 4095, 4096, 8191, 8192, 65536,
					1 << 20, (1 << 20) + 4096, (2 << 20) - 1, 2 << 20 };
	char p[4096];
	int fd[3];

	path_in(p, sizeof(p), dir, "new", 0);             /* 8 KiB, never written back */
	if ((fd[0] = open(p, O_CREAT | O_RDWR, 0644)) < 0)
		die(p);
	fill(fd[0], 0, 8192, 'a');
	path_in(p, sizeof(p), dir, "sparse", 0);          /* data, hole, dirty page, hole */
	if ((fd[1] = open(p, O_CREAT | O_RDWR, 0644)) < 0 || ftruncate(fd[1], 2 << 20))
		die(p);
	fill(fd[1], 0, 4096, 'b');
	if (fsync(fd[1]))
		die("fsync");
	fill(fd[1], 1 << 20, 4096, 'c');
	path_in(p, sizeof(p), dir, "grown", 0);           /* extended past its size on disk */
	if ((fd[2] = open(p, O_CREAT | O_RDWR, 0644)) < 0)
		die(p);
	fill(fd[2], 0, 4096, 'd');
	if (fsync(fd[2]))
		die("fsync");
	fill(fd[2], 65536, 4096, 'e');
	for (size_t i = 0; i < sizeof(probes) / sizeof(probes[0]); i++) {
		print_seek(fd[0], "new", probes[i]);
		print_seek(fd[1], "sparse", probes[i]);
		print_seek(fd[2], "grown", probes[i]);
	}
	for (int i = 0; i < 3; i++)
		close(fd[i]);
	return 0;
}

static const char *err_name(int e)
{
	return e == EPERM ? "EPERM" : e == EOPNOTSUPP ? "EOPNOTSUPP" : strerror(e);
}

static int set_immutable(int fd, int on)
{
	int fl;

	if (ioctl(fd, FS_IOC_GETFLAGS, &fl))
		return -1;
	fl = on ? fl | FS_IMMUTABLE_FL : fl & ~FS_IMMUTABLE_FL;
	return ioctl(fd, FS_IOC_SETFLAGS, &fl);
}

static uint32_t file_sum(int fd, off_t *size)
{
	char buf[65536];
	uint32_t sum = 0;
	off_t off = 0;
	ssize_t n;

	while ((n = pread(fd, buf, sizeof(buf), off)) > 0) {
		for (ssize_t i = 0; i < n; i++)
			sum = sum * 31 + (unsigned char)buf[i];
		off += n;
	}
	*size = off;
	return sum;
}

/* generic/553: a file made immutable while open takes no more data; what
 * was written before the flag stays. */
static int mode_immutable(const char *dir)
{
	char src[4096], dst[4096];
	int in, out;
	ssize_t n;
	off_t size;
	loff_t pin = 0, pout = 0;

	path_in(src, sizeof(src), dir, "src", 0);
	path_in(dst, sizeof(dst), dir, "dst", 0);
	if ((in = open(src, O_CREAT | O_RDWR, 0644)) < 0)
		die(src);
	fill(in, 0, 128 << 10, 'a');
	if ((out = open(dst, O_CREAT | O_RDWR, 0644)) < 0)
		die(dst);
	fill(out, 0, 64 << 10, 'b');    /* dirty pages when the flag comes */
	if (set_immutable(out, 1))
		die("chattr +i");
	n = copy_file_range(in, &pin, out, &pout, 32 << 10, 0);
	printf("copy_file_range into the immutable file: %s\n", n < 0 ? err_name(errno) : "done");
	printf("fsync of the immutable file: %s\n", fsync(out) ? err_name(errno) : "ok");
	if (set_immutable(out, 0))
		die("chattr -i");
	close(out);
	close(in);
	if ((out = open(dst, O_RDONLY)) < 0)
		die(dst);
	uint32_t sum = file_sum(out, &size);
	printf("after: size %jd sum %08x\n", (intmax_t)size, sum);
	close(out);
	return 0;
}

/* ------------------------------------------------------------- dio */

#define DIO_SIZE (640 << 10)    /* generic/451's 655360 bytes */

struct dio_reader {
	const char *path;
	atomic_int *stop;
};

/* Buffered reads of the whole file, to keep its pages cached. */
static void *dio_reader(void *arg)
{
	struct dio_reader *r = arg;
	char *buf = t_xmalloc(DIO_SIZE);
	int fd = open(r->path, O_RDONLY);

	if (fd < 0)
		die("reader");
	while (!atomic_load(r->stop))
		if (pread(fd, buf, DIO_SIZE, 0) < 0)
			die("reader pread");
	close(fd);
	free(buf);
	return NULL;
}

static int aio_write_wait(aio_context_t ctx, int fd, void *buf)
{
	struct iocb cb = { .aio_fildes = (uint32_t)fd, .aio_lio_opcode = IOCB_CMD_PWRITE,
			   .aio_buf = (uint64_t)(uintptr_t)buf, .aio_nbytes = DIO_SIZE };
	struct iocb *list[1] = { &cb };
	struct io_event ev;

	if (syscall(SYS_io_submit, ctx, 1, list) != 1)
		die("io_submit");
	if (syscall(SYS_io_getevents, ctx, 1, 1, &ev, NULL) != 1)
		die("io_getevents");
	return ev.res == DIO_SIZE ? 0 : -1;
}

/* generic/451: alternate two patterns with AIO O_DIRECT while two threads
 * read the file through the page cache; after each write a buffered read
 * must see the new pattern. */
static int mode_dio(const char *path, unsigned seed)
{
	atomic_int stop = 0;
	struct dio_reader r = { .path = path, .stop = &stop };
	pthread_t th[2];
	aio_context_t ctx = 0;
	char *pat[2], *got = t_xmalloc(DIO_SIZE);
	int fd, stale = 0, rounds = 200, rfd;

	srand(seed);
	if (posix_memalign((void **)&pat[0], 4096, DIO_SIZE) ||
	    posix_memalign((void **)&pat[1], 4096, DIO_SIZE))
		die("memory");
	memset(pat[0], 0x55 ^ (rand() & 0x0f), DIO_SIZE);
	memset(pat[1], 0xaa ^ (rand() & 0x0f), DIO_SIZE);
	if ((fd = open(path, O_CREAT | O_RDWR | O_DIRECT, 0600)) < 0)
		die(path);
	if (pwrite(fd, pat[0], DIO_SIZE, 0) != DIO_SIZE || fsync(fd))
		die("first write");
	if (syscall(SYS_io_setup, 4, &ctx))
		die("io_setup");
	for (int i = 0; i < 2; i++)
		pthread_create(&th[i], NULL, dio_reader, &r);
	for (int i = 0; i < rounds && stale == 0; i++) {
		char *p = pat[(i + 1) & 1];

		if (aio_write_wait(ctx, fd, p))
			die("aio write");
		if ((rfd = open(path, O_RDONLY)) < 0 || pread(rfd, got, DIO_SIZE, 0) != DIO_SIZE)
			die("check read");
		close(rfd);
		if (memcmp(got, p, DIO_SIZE)) {
			stale++;
			printf("round %d: a buffered read after the AIO O_DIRECT write saw stale data\n", i);
		}
	}
	atomic_store(&stop, 1);
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	syscall(SYS_io_destroy, ctx);
	close(fd);
	free(pat[0]);
	free(pat[1]);
	free(got);
	printf("dio: %s\n", stale ? "STALE" : "coherent");
	return stale ? 1 : 0;
}

/* ------------------------------------------------------------- tsorder */

/* generic/423 makes a fifo, a char device, a directory, a block device, a
 * 20 KiB file (written: with the writeback cache the kernel, not the
 * server, stamps its mtime and ctime), a symlink, a socket and a hard link,
 * and wants each object's times no earlier than the one made before it.
 * One round takes well under a clock tick, so a server stamping finer
 * times than the kernel's current_time() fails nearly every round. */
#define TS_ROUNDS 40

enum ts_check { TS_OWN, TS_NEXT_M, TS_NEXT_C, TS_NEXT_B, TS_LINK, TS_NCHECKS };
static const char *const ts_check_name[TS_NCHECKS] = {
	"mtime <= ctime (and btime before both) of one object",
	"mtime of each object <= the next one's",
	"ctime of each object <= the next one's",
	"btime of each object <= the next one's",
	"hard link: socket's ctime <= the file's new ctime",
};
static unsigned ts_fails[TS_NCHECKS];

static int ts_later(struct statx_timestamp a, struct statx_timestamp b)
{
	return a.tv_sec != b.tv_sec ? a.tv_sec > b.tv_sec : a.tv_nsec > b.tv_nsec;
}

/* Counts a check "a <= b" that fails, and shows the first of each kind. */
static void ts_expect(enum ts_check c, const char *what, struct statx_timestamp a,
		      struct statx_timestamp b)
{
	if (!ts_later(a, b))
		return;
	if (!ts_fails[c]++)
		fprintf(stderr, "%s: %lld.%09u > %lld.%09u\n", what, (long long)a.tv_sec,
			a.tv_nsec, (long long)b.tv_sec, b.tv_nsec);
}

static struct statx ts_stat(const char *path)
{
	struct statx st;

	if (statx(AT_FDCWD, path, AT_SYMLINK_NOFOLLOW,
		  STATX_BASIC_STATS | STATX_BTIME, &st))
		die(path);
	if (st.stx_mask & STATX_BTIME) {
		ts_expect(TS_OWN, path, st.stx_btime, st.stx_mtime);
		ts_expect(TS_OWN, path, st.stx_btime, st.stx_ctime);
	}
	ts_expect(TS_OWN, path, st.stx_mtime, st.stx_ctime);
	return st;
}

static void ts_make_file(const char *path)
{
	char buf[1024] = { 0 };
	int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0644);

	if (fd < 0)
		die(path);
	for (int i = 0; i < 20; i++)
		if (write(fd, buf, sizeof(buf)) != (ssize_t)sizeof(buf))
			die("write");
	close(fd);
}

static void ts_make_socket(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);

	if (fd < 0 || strlen(path) >= sizeof(sa.sun_path))
		die("socket");
	strcpy(sa.sun_path, path);
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)))
		die(path);
	close(fd);
}

/* Makes object I of generic/423's list at PATH. */
static void ts_make(int i, const char *path)
{
	int r = 0;

	switch (i) {
	case 0: r = mkfifo(path, 0600); break;
	case 1: r = mknod(path, S_IFCHR | 0600, makedev(1, 3)); break;
	case 2: r = mkdir(path, 0755); break;
	case 3: r = mknod(path, S_IFBLK | 0600, makedev(7, 123)); break;
	case 4: ts_make_file(path); break;
	case 5: r = symlink("nowhere", path); break;
	case 6: ts_make_socket(path); break;
	}
	if (r)
		die(path);
}

static void ts_round(const char *dir, int round)
{
	static const char *const names[] = { "fifo", "null", "dir", "loopy", "file",
					     "symlink", "sock" };
	enum { N = sizeof(names) / sizeof(names[0]) };
	char path[N][4096], file[4096], what[4096 + 16];
	struct statx st[N], ln;

	for (int i = 0; i < N; i++) {
		snprintf(path[i], sizeof(path[i]), "%s/%d-%s", dir, round, names[i]);
		ts_make(i, path[i]);
		st[i] = ts_stat(path[i]);
		if (!i)
			continue;
		ts_expect(TS_NEXT_M, path[i], st[i - 1].stx_mtime, st[i].stx_mtime);
		ts_expect(TS_NEXT_C, path[i], st[i - 1].stx_ctime, st[i].stx_ctime);
		if (st[i - 1].stx_mask & st[i].stx_mask & STATX_BTIME)
			ts_expect(TS_NEXT_B, path[i], st[i - 1].stx_btime, st[i].stx_btime);
	}
	snprintf(file, sizeof(file), "%s/%d-link", dir, round);
	if (link(path[4], file))
		die(file);
	snprintf(what, sizeof(what), "%s (link)", file);
	ln = ts_stat(file);
	ts_expect(TS_LINK, what, st[6].stx_ctime, ln.stx_ctime);
}

static int mode_tsorder(const char *dir)
{
	for (int r = 0; r < TS_ROUNDS; r++)
		ts_round(dir, r);
	for (int c = 0; c < TS_NCHECKS; c++)
		printf("%s: %u went backwards in %d rounds\n", ts_check_name[c], ts_fails[c],
		       TS_ROUNDS);
	return 0;
}

/* One pwrite of len bytes at off, then fsync: what each returned. */
static void maxsize_write(const char *path, const char *what, off_t off, size_t len)
{
	static char buf[1 << 16];
	int fd = open(path, O_WRONLY | O_CREAT, 0644);
	ssize_t n;
	int e;

	if (fd < 0)
		die(path);
	memset(buf, 'm', sizeof(buf));
	n = pwrite(fd, buf, len, off);
	e = errno;
	printf("%s: pwrite %zu at %jd: %zd%s%s", what, len, (intmax_t)off, n,
	       n < 0 ? " " : "", n < 0 ? strerror(e) : "");
	printf(", fsync %s\n", fsync(fd) ? strerror(errno) : "ok");
	close(fd);
}

/* generic/308: ext4's largest size is 2^32 - 1 blocks (s_maxbytes). */
static int mode_maxsize(const char *dir)
{
	char path[4096];
	struct statvfs sv;
	off_t bs, max;

	if (statvfs(dir, &sv))
		die(dir);
	bs = (off_t)sv.f_bsize;
	max = (off_t)((1ull << 32) - 1) * bs;
	snprintf(path, sizeof(path), "%s/big", dir);
	maxsize_write(path, "below", max - bs, (size_t)bs);
	maxsize_write(path, "at", max, (size_t)bs);
	maxsize_write(path, "across", max - bs / 2, (size_t)bs);
	snprintf(path, sizeof(path), "%s/big2", dir);
	maxsize_write(path, "near", max - 2 * bs, (size_t)bs);
	maxsize_write(path, "to the end", max - bs, 2 * (size_t)bs);
	return 0;
}

/*
 * A new file written at once at ext4's largest size: the kernel's ext4
 * refuses the write(2); the FUSE cache cannot tell, and takes it, so its
 * fsync must fail.  "refused" either way; "lost" if both succeeded.
 */
static int mode_maxfresh(const char *dir)
{
	char path[4096], buf[512];
	struct statvfs sv;
	off_t max;
	int fd;

	if (statvfs(dir, &sv))
		die(dir);
	max = (off_t)((1ull << 32) - 1) * (off_t)sv.f_bsize;
	snprintf(path, sizeof(path), "%s/fresh", dir);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
	if (fd < 0)
		die(path);
	memset(buf, 'f', sizeof(buf));
	if (pwrite(fd, buf, sizeof(buf), max) < 0 || fsync(fd) < 0)
		printf("fresh: refused: %s\n", errno == EFBIG ? "EFBIG" : strerror(errno));
	else
		printf("fresh: lost (write and fsync succeeded)\n");
	close(fd);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "seek"))
		return mode_seek(argv[2]);
	if (argc == 3 && !strcmp(argv[1], "immutable"))
		return mode_immutable(argv[2]);
	if (argc == 3 && !strcmp(argv[1], "tsorder"))
		return mode_tsorder(argv[2]);
	if (argc == 3 && !strcmp(argv[1], "maxsize"))
		return mode_maxsize(argv[2]);
	if (argc == 3 && !strcmp(argv[1], "maxfresh"))
		return mode_maxfresh(argv[2]);
	if (argc == 4 && !strcmp(argv[1], "dio"))
		return mode_dio(argv[2], (unsigned)strtoul(argv[3], NULL, 10));
	fprintf(stderr, "usage: fuse_wbcache seek DIR | immutable DIR | tsorder DIR | maxsize DIR | maxfresh DIR | dio FILE SEED\n");
	return 2;
}
