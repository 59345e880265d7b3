/*
 * blockdev.c - block device backends behind struct bdev_ops.
 *
 * file:   an image file or a block device, accessed with pread/pwrite
 *         (thread-safe: no shared file offset), fdatasync for flush.
 * nbd:    an NBD export (nbd.c); bdev_open_path() picks it for an NBD URI.
 * memory: a calloc'd buffer, optionally loaded from an image; writes stay
 *         in memory.  Used by tests and by the memory_backend mount option.
 *
 * Callers only use the ops (bdev_read() etc.), so further backends (a
 * crash-recording one is planned) slot in without changing them.  Every
 * backend rejects I/O beyond d->size with -EIO and a message naming the
 * offset, so a corrupt block number never reads out of bounds.
 *
 * Locking: a bdev is immutable after open except for the device contents;
 * concurrent I/O to different ranges is safe.  Ordering of I/O to the same
 * block is the buffer cache's job (struct buf.lock).
 */
#include "blockdev.h"
#include "error.h"
#include "internal.h"
#include "mountcheck.h"
#include "nbd.h"

#include <fcntl.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/ioctl.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <unistd.h>

struct file_dev {
	struct bdev bdev;
	int fd;
	/* The descriptor's file offset, which only sendfile (bdev_send_from_fd)
	 * uses (everything else is pread/pwrite): held while it is set and used. */
	pthread_mutex_t pos_lock;
	uint64_t base;   /* byte offset of the device's byte 0 in the file */
	char *path;      /* for messages */
	int discard;     /* opened with discard: bdev_discard() punches holes */
	int is_blk;      /* a block device (BLKDISCARD) rather than a file */
};

struct mem_dev {
	struct bdev bdev;
	uint8_t *data;   /* bdev.size bytes */
};

/* Rejects [off, off+len) unless it lies inside the device. */
static int check_range(struct bdev *d, const char *what, size_t len, uint64_t off)
{
	if (off > d->size || len > d->size - off)
		return fs_err(EIO, "%s of %zu bytes at offset %llu is past the end of the "
			      "device (%llu bytes)", what, len, (unsigned long long)off,
			      (unsigned long long)d->size);
	return 0;
}

/* ------------------------------------------------------------- file */

static struct file_dev *to_file_dev(struct bdev *d)
{
	return (struct file_dev *)d;
}

static int file_read(struct bdev *d, void *buf, size_t len, uint64_t off)
{
	struct file_dev *f = to_file_dev(d);
	uint8_t *p = buf;
	int err = check_range(d, "read", len, off);

	if (err)
		return err;
	while (len > 0) {
		ssize_t n = pread(f->fd, p, len, (off_t)(f->base + off));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return fs_err(errno, "%s: read at offset %llu failed: %s", f->path,
				      (unsigned long long)off, strerror(errno));
		if (n == 0)   /* the file shrank under us */
			return fs_err(EIO, "%s: read at offset %llu is past the end of the file",
				      f->path, (unsigned long long)off);
		p += n;
		len -= (size_t)n;
		off += (uint64_t)n;
	}
	return 0;
}

static int file_write(struct bdev *d, const void *buf, size_t len, uint64_t off)
{
	struct file_dev *f = to_file_dev(d);
	const uint8_t *p = buf;
	int err;

	if (d->read_only)
		return fs_err(EROFS, "%s: write at offset %llu on a read-only device",
			      f->path, (unsigned long long)off);
	err = check_range(d, "write", len, off);
	if (err)
		return err;
	while (len > 0) {
		ssize_t n = pwrite(f->fd, p, len, (off_t)(f->base + off));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return fs_err(errno, "%s: write at offset %llu failed: %s", f->path,
				      (unsigned long long)off, strerror(errno));
		if (n == 0)
			return fs_err(EIO, "%s: write at offset %llu made no progress",
				      f->path, (unsigned long long)off);
		p += n;
		len -= (size_t)n;
		off += (uint64_t)n;
	}
	return 0;
}

static int file_flush(struct bdev *d)
{
	struct file_dev *f = to_file_dev(d);

	if (d->read_only)
		return 0;
	while (fdatasync(f->fd) < 0) {
		if (errno != EINTR)
			return fs_err(errno, "%s: fdatasync failed: %s", f->path, strerror(errno));
	}
	return 0;
}

static void file_close(struct bdev *d)
{
	struct file_dev *f = to_file_dev(d);

	close(f->fd);
	pthread_mutex_destroy(&f->pos_lock);
	free(f->path);
	free(f);
}

/* A file forgets the range by a hole (fallocate PUNCH_HOLE), a block device
 * by BLKDISCARD.  Advice: a file system that cannot punch holes only keeps
 * the bytes. */
static int file_discard(struct bdev *d, uint64_t off, uint64_t len)
{
	struct file_dev *f = to_file_dev(d);
	uint64_t r[2] = { f->base + off, len };

	if (!f->discard || d->read_only)
		return 0;
	if (!len)
		return 1;       /* the query of bdev_discards() */
	if (check_range(d, "discard", (size_t)len, off))
		return 0;
	if (f->is_blk)
		(void)ioctl(f->fd, BLKDISCARD, r);
	else
		(void)fallocate(f->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
				(off_t)r[0], (off_t)len);
	return 0;
}

/* A block device's page cache may hold the range from before another
 * node wrote it: drop it (clean pages; advice, so errors are ignored). */
static int file_read_uncached(struct bdev *d, void *buf, size_t len, uint64_t off)
{
	struct file_dev *f = to_file_dev(d);

	if (f->is_blk)
		(void)posix_fadvise(f->fd, (off_t)(f->base + off), (off_t)len, POSIX_FADV_DONTNEED);
	return file_read(d, buf, len, off);
}

static const struct bdev_ops file_ops = {
	.read = file_read,
	.read_uncached = file_read_uncached,
	.write = file_write,
	.flush = file_flush,
	.close = file_close,
	.discard = file_discard,   /* no write_fua: bdev_write_fua() writes and flushes */
};

int bdev_write_fua(struct bdev *d, const void *buf, size_t len, uint64_t off)
{
	int err;

	if (d->ops->write_fua)
		return d->ops->write_fua(d, buf, len, off);
	err = bdev_write(d, buf, len, off);
	return err ? err : bdev_flush(d);
}

int bdev_read_uncached(struct bdev *d, void *buf, size_t len, uint64_t off)
{
	return d->ops->read_uncached ? d->ops->read_uncached(d, buf, len, off)
				     : bdev_read(d, buf, len, off);
}

int bdev_discard(struct bdev *d, uint64_t off, uint64_t len)
{
	return d->ops->discard && len ? d->ops->discard(d, off, len) : 0;
}

int bdev_discards(struct bdev *d)
{
	return d->ops->discard ? d->ops->discard(d, 0, 0) : 0;
}

struct bdev *bdev_open_path(const char *path, int read_only, uint64_t offset, int discard,
			    int *err)
{
	struct bdev *d;

	if (bdev_is_nbd_uri(path))
		return bdev_open_nbd(path, read_only, offset, discard, err);
	/* Writing what the kernel has mounted corrupts it (the NBD server
	 * guards its exports). */
	if (!read_only && (*err = mount_check_refuse(path)))
		return NULL;
	d = bdev_open_file_at(path, read_only, offset, err);
	if (d) {
		struct stat st;

		to_file_dev(d)->discard = discard;
		to_file_dev(d)->is_blk = !fstat(to_file_dev(d)->fd, &st) && S_ISBLK(st.st_mode);
	}
	return d;
}

int bdev_copy_from_fd(struct bdev *d, int src, uint64_t src_off, size_t len, uint64_t off)
{
	struct file_dev *f;
	loff_t in = (loff_t)src_off, out;
	size_t done = 0;

	if (d->ops != &file_ops)
		return -EOPNOTSUPP;
	if (d->read_only)
		return fs_err(EROFS, "copy to a read-only device");
	if (check_range(d, "write", len, off))
		return -EIO;
	f = to_file_dev(d);
	out = (loff_t)(f->base + off);
	while (done < len) {
		ssize_t n = copy_file_range(src, &in, f->fd, &out, len - done, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return done ? (int)MIN(done, (size_t)INT32_MAX) : -errno;
		if (n == 0)
			break;  /* end of the source */
		done += (size_t)n;
	}
	return (int)done;
}

int bdev_send_from_fd(struct bdev *d, int src, uint64_t src_off, size_t len, uint64_t off)
{
	struct file_dev *f;
	off_t in = (off_t)src_off;
	size_t done = 0;
	int err = 0;

	if (d->ops != &file_ops)
		return -EOPNOTSUPP;
	if (d->read_only)
		return fs_err(EROFS, "copy to a read-only device");
	if (check_range(d, "write", len, off))
		return -EIO;
	f = to_file_dev(d);
	pthread_mutex_lock(&f->pos_lock);
	if (lseek(f->fd, (off_t)(f->base + off), SEEK_SET) < 0)
		err = -errno;
	while (!err && done < len) {
		ssize_t n = sendfile(f->fd, src, &in, len - done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			err = -errno;
		else if (n == 0)
			break;  /* end of the source */
		else
			done += (size_t)n;
	}
	pthread_mutex_unlock(&f->pos_lock);
	return done ? (int)MIN(done, (size_t)INT32_MAX) : err;
}

/* Size in bytes of a regular file or block device. */
static int fd_size(int fd, const char *path, uint64_t *size)
{
	struct stat st;

	if (fstat(fd, &st) < 0)
		return fs_err(errno, "%s: fstat failed: %s", path, strerror(errno));
	if (S_ISREG(st.st_mode)) {
		*size = (uint64_t)st.st_size;
		return 0;
	}
	if (S_ISBLK(st.st_mode)) {
		if (ioctl(fd, BLKGETSIZE64, size) < 0)
			return fs_err(errno, "%s: BLKGETSIZE64 failed: %s", path, strerror(errno));
		return 0;
	}
	return fs_err(EINVAL, "%s: not a regular file or block device", path);
}

/* A block device written is opened exclusively, as the kernel opens the
 * devices it mounts: neither can mount it while the other writes it. */
static int excl_if_blockdev(const char *path)
{
	struct stat st;

	return !stat(path, &st) && S_ISBLK(st.st_mode) ? O_EXCL : 0;
}

struct bdev *bdev_open_file(const char *path, int read_only, int *err)
{
	return bdev_open_file_at(path, read_only, 0, err);
}

struct bdev *bdev_open_file_at(const char *path, int read_only, uint64_t offset, int *err)
{
	struct file_dev *f;
	int fd, e;
	uint64_t size;

	fd = open(path, (read_only ? O_RDONLY : O_RDWR | excl_if_blockdev(path)) | O_CLOEXEC);
	if (fd < 0 && errno == EBUSY)
		*err = fs_err(EBUSY, "%s: held exclusively by the kernel or another program "
			      "(mounted?); refusing to write it", path);
	else if (fd < 0)
		*err = fs_err(errno, "%s: cannot open: %s", path, strerror(errno));
	if (fd < 0) {
		return NULL;
	}
	e = fd_size(fd, path, &size);
	if (!e && offset > size)
		e = fs_err(EINVAL, "%s: offset %llu is past the end of the file (%llu bytes)",
			   path, (unsigned long long)offset, (unsigned long long)size);
	if (e) {
		close(fd);
		*err = e;
		return NULL;
	}
	f = calloc(1, sizeof(*f));
	if (f)
		f->path = strdup(path);
	if (!f || !f->path) {
		free(f);
		close(fd);
		*err = fs_err(ENOMEM, "%s: out of memory opening the device", path);
		return NULL;
	}
	f->fd = fd;
	pthread_mutex_init(&f->pos_lock, NULL);
	f->base = offset;
	f->bdev.ops = &file_ops;
	f->bdev.size = size - offset;
	f->bdev.read_only = read_only;
	f->bdev.priv = f;
	*err = 0;
	return &f->bdev;
}

/* ------------------------------------------------------------- memory */

static struct mem_dev *to_mem_dev(struct bdev *d)
{
	return (struct mem_dev *)d;
}

static int mem_read(struct bdev *d, void *buf, size_t len, uint64_t off)
{
	int err = check_range(d, "read", len, off);

	if (err)
		return err;
	memcpy(buf, to_mem_dev(d)->data + off, len);
	return 0;
}

static int mem_write(struct bdev *d, const void *buf, size_t len, uint64_t off)
{
	int err;

	if (d->read_only)
		return fs_err(EROFS, "write at offset %llu on a read-only memory device",
			      (unsigned long long)off);
	err = check_range(d, "write", len, off);
	if (err)
		return err;
	memcpy(to_mem_dev(d)->data + off, buf, len);
	return 0;
}

static int mem_flush(struct bdev *d)
{
	return 0;
}

static void mem_close(struct bdev *d)
{
	struct mem_dev *m = to_mem_dev(d);

	free(m->data);
	free(m);
}

static const struct bdev_ops mem_ops = {
	.read = mem_read,
	.write = mem_write,
	.flush = mem_flush,
	.close = mem_close,
};

struct bdev *bdev_open_memory(uint64_t size)
{
	struct mem_dev *m;

	if (size > SIZE_MAX)
		return NULL;
	m = calloc(1, sizeof(*m));
	if (!m)
		return NULL;
	/* calloc(0) may return NULL; keep a valid pointer for empty devices. */
	m->data = calloc(1, size ? (size_t)size : 1);
	if (!m->data) {
		free(m);
		return NULL;
	}
	m->bdev.ops = &mem_ops;
	m->bdev.size = size;
	m->bdev.read_only = 0;
	m->bdev.priv = m;
	return &m->bdev;
}

struct bdev *bdev_open_memory_copy(const char *path, int *err)
{
	return bdev_open_memory_copy_at(path, 0, err);
}

struct bdev *bdev_open_memory_copy_at(const char *path, uint64_t offset, int *err)
{
	struct bdev *file, *mem;
	int e;

	file = bdev_open_path(path, 1, offset, 0, err);
	if (!file)
		return NULL;
	mem = bdev_open_memory(file->size);
	if (!mem) {
		*err = fs_err(ENOMEM, "%s: cannot allocate %llu bytes to load the image",
			      path, (unsigned long long)file->size);
		bdev_close(file);
		return NULL;
	}
	e = file->size ? bdev_read(file, to_mem_dev(mem)->data, (size_t)file->size, 0) : 0;
	bdev_close(file);
	if (e) {
		bdev_close(mem);
		*err = e;
		return NULL;
	}
	*err = 0;
	return mem;
}
