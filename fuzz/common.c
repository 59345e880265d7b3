/*
 * fuzz/common.c - mount from the fuzzer's buffer, and a bounded tree walk.
 */
#include "common.h"
#include "blockdev.h"
#include "mount.h"
#include "uext4.h"
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <string.h>
#include <sys/stat.h>

/* A device on the caller's buffer; closing it frees only the struct.
 * One mount uses it at a time; the library serialises nothing here, as
 * the memory device does (disjoint blocks from many threads are fine). */
static int buf_read(struct bdev *d, void *out, size_t len, uint64_t off)
{
	if (off > d->size || len > d->size - off)
		return -EIO;
	memcpy(out, (uint8_t *)d->priv + off, len);
	return 0;
}

static int buf_write(struct bdev *d, const void *in, size_t len, uint64_t off)
{
	if (off > d->size || len > d->size - off)
		return -EIO;
	memcpy((uint8_t *)d->priv + off, in, len);
	return 0;
}

static int buf_flush(struct bdev *d) { return 0; }
static void buf_close(struct bdev *d) { free(d); }
static const struct bdev_ops buf_ops = { buf_read, buf_write, buf_flush, buf_close };

uint8_t *fuzz_copy_input(const uint8_t *data, size_t size)
{
	uint8_t *buf;

	if (size < 2048 || size > FUZZ_MAX_IMAGE)
		return NULL;
	buf = malloc(size);
	if (buf)
		memcpy(buf, data, size);
	return buf;
}

int fuzz_mount_buffer(uint8_t *buf, size_t size, int read_only, uext4_fs **out)
{
	struct uext4_opts o;
	struct bdev *dev;

	*out = NULL;
	dev = calloc(1, sizeof(*dev));
	if (!dev)
		return -ENOMEM;
	dev->ops = &buf_ops;
	dev->size = size;
	dev->read_only = read_only;
	dev->priv = buf;
	memset(&o, 0, sizeof(o));
	o.read_only = read_only;
	o.cache_bytes = FUZZ_CACHE_BYTES;
	o.errors = UEXT4_ERRORS_RO;
	o.commit_secs = 3600;   /* commits at sync and unmount only: reproducible */
	o.use_fixed_time = 1;
	o.fixed_time = 1700000000;
	int err = super_mount_bdev(dev, &o, out);
	/* FUZZ_DEBUG=1: say why an input is refused (when reading a crash) */
	if (err && getenv("FUZZ_DEBUG"))
		fprintf(stderr, "fuzz: mount: %s\n", uext4_last_error());
	return err;
}

/* Bounds of one walk: entries visited, directory depth, bytes read. */
enum { WALK_MAX_ENTRIES = 2000, WALK_MAX_DEPTH = 24, WALK_FILE_BYTES = 256 << 10 };

struct walk {
	uext4_fs *fs;
	unsigned visited;
	char buf[65536];
};

struct dirlist {
	size_t n, cap;
	struct { uint64_t ino; char name[256]; } *e;
};

static int collect(void *ctx, const char *name, size_t namelen, uint64_t ino,
		   unsigned dtype, uint64_t next_cookie)
{
	struct dirlist *l = ctx;

	if ((namelen == 1 && name[0] == '.') || (namelen == 2 && !memcmp(name, "..", 2)))
		return 0;
	if (l->n >= WALK_MAX_ENTRIES || namelen > 255)
		return 1;
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 32;
		void *p = realloc(l->e, cap * sizeof(*l->e));
		if (!p)
			return 1;
		l->e = p;
		l->cap = cap;
	}
	l->e[l->n].ino = ino;
	memcpy(l->e[l->n].name, name, namelen);
	l->e[l->n].name[namelen] = 0;
	l->n++;
	return 0;
}

static void walk_xattrs(struct walk *w, uint64_t ino)
{
	char names[4096];
	ssize_t n = uext4_listxattr(w->fs, ino, names, sizeof(names) - 1);

	if (n <= 0)
		return;
	names[n] = 0;
	for (ssize_t i = 0; i < n; i += (ssize_t)strlen(names + i) + 1)
		uext4_getxattr(w->fs, ino, names + i, w->buf, sizeof(w->buf));
}

static void walk_file(struct walk *w, uint64_t ino, uint64_t size)
{
	uext4_file *f;
	uint64_t off, done = 0;

	if (uext4_open(w->fs, ino, O_RDONLY, &f))
		return;
	for (off = 0; done < WALK_FILE_BYTES; off += sizeof(w->buf)) {
		ssize_t r = uext4_pread(f, w->buf, sizeof(w->buf), off);
		if (r <= 0)
			break;
		done += (uint64_t)r;
	}
	if (size > sizeof(w->buf))   /* the end of a big (maybe sparse) file */
		uext4_pread(f, w->buf, sizeof(w->buf), size - sizeof(w->buf));
	uext4_lseek(f, 0, SEEK_HOLE);
	uext4_release(f);
}

static void walk_dir(struct walk *w, uint64_t dir, unsigned depth)
{
	struct dirlist l = { 0 };

	if (depth > WALK_MAX_DEPTH)
		return;
	uext4_readdir(w->fs, dir, 0, collect, &l);
	for (size_t i = 0; i < l.n && w->visited < WALK_MAX_ENTRIES; i++) {
		struct uext4_stat st;

		w->visited++;
		if (uext4_lookup(w->fs, dir, l.e[i].name, &st))
			continue;
		walk_xattrs(w, st.ino);
		if (S_ISDIR(st.mode))
			walk_dir(w, st.ino, depth + 1);
		else if (S_ISREG(st.mode))
			walk_file(w, st.ino, st.size);
		else if (S_ISLNK(st.mode))
			uext4_readlink(w->fs, st.ino, w->buf, sizeof(w->buf));
	}
	free(l.e);
}

void fuzz_walk(uext4_fs *fs)
{
	struct walk *w = malloc(sizeof(*w));
	struct uext4_statfs sf;

	if (!w)
		return;
	w->fs = fs;
	w->visited = 0;
	uext4_statfs(fs, &sf);
	walk_xattrs(w, UEXT4_ROOT_INO);
	walk_dir(w, UEXT4_ROOT_INO, 0);
	free(w);
}
