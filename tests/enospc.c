/*
 * enospc.c - filling a small image: every failure is ENOSPC, nothing written
 * before is lost, and deleting everything gives the space back.
 *
 *   enospc fill IMAGE       blocks run out (data) or inodes run out
 *   enospc reserved IMAGE   a non-root caller stops at the reserved blocks,
 *                           root can still write; a punch by the non-root
 *                           caller that splits an extent still succeeds
 *                           (its tree block may use the reserved blocks,
 *                           as on the kernel's ext4: generic/256)
 *   enospc busy IMAGE       one write larger than the free space that no
 *                           commit holds back: the rest is space an
 *                           uncommitted unlink freed ("busy" until its
 *                           commit); the write must store every byte,
 *                           not stop short where the busy blocks begin
 *
 * fill: NTHREADS threads each create files in their own directory and
 * write them in random-sized chunks, with some mkdir, long symlinks and
 * block-sized xattrs mixed in, until creates and writes both fail.  Any
 * error other than -ENOSPC fails the test; a short write is allowed.  Then
 * every file must read back exactly (size and bytes), the image is
 * unmounted and must pass e2fsck -fn, is mounted again and read back again;
 * everything is deleted, statfs must show the fresh free block/inode counts
 * again (blocks within a small slack), and a second fill must reach nearly
 * as far as the first.  Finally e2fsck -fn once more.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "uext4.h"
#include "t.h"

#define NTHREADS 4
#define MAX_FILES 100000
#define CHUNK_MAX (256 * 1024)

static uext4_fs *g_fs;
static const char *g_img;
static atomic_int g_bad;

struct file_rec {
	uint64_t ino;
	uint32_t id;            /* content seed */
	uint64_t size;          /* bytes successfully written */
	uint64_t dir;
	char name[32];
};

struct filler {
	int id;
	uint64_t rng;
	uint64_t dir;           /* own directory */
	struct file_rec *files;
	size_t nfiles;
	unsigned char *buf;
	uint64_t bytes;
	unsigned enospc_create, enospc_write, enospc_other;
	unsigned mkdirs, symlinks, xattrs;
};

static uint64_t rnd(struct filler *f)
{
	return t_rnd(&f->rng);
}

#define BAD(...) do {                                                     \
	fprintf(stderr, "FAIL: ");                                           \
	fprintf(stderr, __VA_ARGS__);                                        \
	fprintf(stderr, " [%s]\n", uext4_last_error());                      \
	atomic_fetch_add(&g_bad, 1);                                         \
} while (0)

/* The bytes of file `id` at [off, off+len): a function of both. */
static void pattern(uint32_t id, uint64_t off, unsigned char *p, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		uint64_t o = off + i;
		p[i] = (unsigned char)(t_mix(((uint64_t)id << 40) ^ (o >> 3)) >> (o % 8 * 8));
	}
}

/* An error where only -ENOSPC is acceptable. */
static bool expect_enospc(long r, const char *what, uint64_t ino)
{
	if (r == -ENOSPC)
		return true;
	BAD("%s (ino %llu): %s, only ENOSPC is acceptable", what, (unsigned long long)ino,
	    strerror((int)-r));
	return false;
}

/* Write file f in chunks until ENOSPC or max bytes. Returns false on ENOSPC. */
static bool write_file(struct filler *fl, struct file_rec *f, uint64_t max)
{
	uext4_file *h;
	int r = uext4_open(g_fs, f->ino, O_RDWR, &h);
	if (r < 0) {
		BAD("open ino %llu: %s", (unsigned long long)f->ino, strerror(-r));
		return false;
	}
	bool ok = true;
	while (f->size < max) {
		size_t len = 1 + rnd(fl) % CHUNK_MAX;
		if (len > max - f->size)
			len = (size_t)(max - f->size);
		pattern(f->id, f->size, fl->buf, len);
		ssize_t w = uext4_pwrite(h, fl->buf, len, f->size);
		if (w > 0) {
			f->size += (uint64_t)w;
			fl->bytes += (uint64_t)w;
		}
		if (w == (ssize_t)len)
			continue;
		if (w < 0) {
			expect_enospc(w, "pwrite", f->ino);
			fl->enospc_write++;
			ok = false;
			break;
		}
		/* short write: the next one must fail with ENOSPC */
	}
	uext4_release(h);
	return ok;
}

/* Extra kinds of allocation under pressure: directories, block symlinks,
 * xattr blocks.  Only ENOSPC may fail them. */
static void extra_op(struct filler *fl, unsigned k)
{
	char name[64], target[1000];
	struct uext4_stat st;
	int r;
	switch (rnd(fl) % 3) {
	case 0:
		snprintf(name, sizeof(name), "d%u", k);
		r = uext4_mkdir(g_fs, fl->dir, name, S_IFDIR | 0755, &st);
		if (r == 0)
			fl->mkdirs++;
		else
			expect_enospc(r, "mkdir", fl->dir);
		break;
	case 1:
		snprintf(name, sizeof(name), "l%u", k);
		memset(target, 'x', 900);
		target[900] = 0;
		r = uext4_symlink(g_fs, fl->dir, name, target, &st);
		if (r == 0)
			fl->symlinks++;
		else
			expect_enospc(r, "symlink", fl->dir);
		break;
	default:
		if (!fl->nfiles)
			break;
		memset(target, 'v', 700);
		r = uext4_setxattr(g_fs, fl->files[fl->nfiles - 1].ino, "user.big", target, 700, 0);
		if (r == 0)
			fl->xattrs++;
		else
			expect_enospc(r, "setxattr", fl->files[fl->nfiles - 1].ino);
	}
}

static void *fill_thread(void *arg)
{
	struct filler *fl = arg;
	bool create_full = false, write_full = false;
	uint64_t max_file = 1 + rnd(fl) % (1u << 20);
	for (unsigned k = 0; fl->nfiles < MAX_FILES && !(create_full && write_full); k++) {
		if (k % 5 == 2)
			extra_op(fl, k);
		if (!create_full) {
			struct file_rec *f = &fl->files[fl->nfiles];
			snprintf(f->name, sizeof(f->name), "f%u", k);
			struct uext4_stat st;
			int r = uext4_create(g_fs, fl->dir, f->name, S_IFREG | 0644, &st);
			if (r < 0) {
				expect_enospc(r, "create", fl->dir);
				fl->enospc_create++;
				create_full = true;
				continue;
			}
			f->ino = st.ino;
			f->id = (uint32_t)(fl->id << 24 | k);
			f->size = 0;
			f->dir = fl->dir;
			fl->nfiles++;
			/* small files when inodes are the limit, bigger ones otherwise */
			max_file = rnd(fl) % 4 == 0 ? rnd(fl) % 3000 : 1 + rnd(fl) % (1u << 20);
		}
		if (!fl->nfiles)
			break;
		write_full = !write_file(fl, &fl->files[fl->nfiles - 1],
					 create_full ? UINT64_MAX / 2 : max_file);
		if (write_full && !create_full)
			continue; /* blocks are gone: empty files may still be created */
	}
	return NULL;
}

static void verify_files(struct filler *fls, const char *when)
{
	unsigned char *want = t_xmalloc(1 << 20), *got = t_xmalloc(1 << 20);
	for (int t = 0; t < NTHREADS; t++) {
		for (size_t i = 0; i < fls[t].nfiles; i++) {
			struct file_rec *f = &fls[t].files[i];
			struct uext4_stat st;
			int r = uext4_lookup(g_fs, f->dir, f->name, &st);
			if (r < 0 || st.ino != f->ino) {
				BAD("%s: lookup %s: %s", when, f->name, r < 0 ? strerror(-r) : "other inode");
				continue;
			}
			if (st.size != f->size) {
				BAD("%s: ino %llu size %llu, written %llu", when, (unsigned long long)f->ino,
				    (unsigned long long)st.size, (unsigned long long)f->size);
				continue;
			}
			uext4_file *h;
			if ((r = uext4_open(g_fs, f->ino, O_RDONLY, &h)) < 0) {
				BAD("%s: open ino %llu: %s", when, (unsigned long long)f->ino, strerror(-r));
				continue;
			}
			for (uint64_t off = 0; off < f->size; off += 1 << 20) {
				size_t len = f->size - off < (1 << 20) ? (size_t)(f->size - off) : 1 << 20;
				ssize_t n = uext4_pread(h, got, len, off);
				pattern(f->id, off, want, len);
				if (n != (ssize_t)len || memcmp(got, want, len)) {
					BAD("%s: ino %llu: data at [%llu,+%zu) does not read back (%zd)", when,
					    (unsigned long long)f->ino, (unsigned long long)off, len, n);
					break;
				}
			}
			uext4_release(h);
		}
	}
	free(want);
	free(got);
}

static int mount_rw(void)
{
	struct uext4_opts o = { 0 };
	int r = uext4_mount(g_img, &o, &g_fs);
	if (r < 0)
		printf("FAIL: mount %s: %s (%s)\n", g_img, strerror(-r), uext4_last_error());
	return r;
}

static int umount_fs(void)
{
	int r = uext4_umount(g_fs);
	g_fs = NULL;
	if (r < 0)
		BAD("umount: %s", strerror(-r));
	return r;
}

static int fsck(void)
{
	if (!t_fsck_clean(g_img))
		return -1;
	printf("e2fsck -fn: clean\n");
	return 0;
}

static void statfs_print(const char *when, struct uext4_statfs *sf)
{
	int r = uext4_statfs(g_fs, sf);
	if (r < 0) {
		BAD("statfs: %s", strerror(-r));
		memset(sf, 0, sizeof(*sf));
		return;
	}
	printf("%-22s blocks free %llu avail %llu of %llu; inodes free %llu of %llu\n", when,
	       (unsigned long long)sf->blocks_free, (unsigned long long)sf->blocks_avail,
	       (unsigned long long)sf->blocks, (unsigned long long)sf->inodes_free,
	       (unsigned long long)sf->inodes);
}

/* One fill by NTHREADS threads in /wN directories.  Returns bytes written. */
static uint64_t fill(struct filler *fls, uint64_t seed, int round)
{
	pthread_t tid[NTHREADS];
	for (int t = 0; t < NTHREADS; t++) {
		struct filler *fl = &fls[t];
		memset(fl, 0, sizeof(*fl));
		fl->id = t;
		fl->rng = t_mix(seed + (uint64_t)t * 7919 + (uint64_t)round) | 1;
		fl->files = t_xmalloc(MAX_FILES * sizeof(*fl->files));
		fl->buf = t_xmalloc(CHUNK_MAX);
		char name[16];
		snprintf(name, sizeof(name), "w%d", t);
		struct uext4_stat st;
		int r = uext4_mkdir(g_fs, UEXT4_ROOT_INO, name, S_IFDIR | 0755, &st);
		if (r < 0) {
			BAD("mkdir /%s: %s", name, strerror(-r));
			return 0;
		}
		fl->dir = st.ino;
	}
	for (int t = 0; t < NTHREADS; t++)
		pthread_create(&tid[t], NULL, fill_thread, &fls[t]);
	uint64_t bytes = 0;
	for (int t = 0; t < NTHREADS; t++) {
		pthread_join(tid[t], NULL);
		struct filler *fl = &fls[t];
		bytes += fl->bytes;
		printf("  thread %d: %zu files, %llu bytes, %u mkdir, %u symlinks, %u xattrs, "
		       "ENOSPC on create %u write %u\n", t, fl->nfiles, (unsigned long long)fl->bytes,
		       fl->mkdirs, fl->symlinks, fl->xattrs, fl->enospc_create, fl->enospc_write);
		free(fl->buf);
		fl->buf = NULL;
	}
	return bytes;
}

struct rm_ctx {
	char (*names)[300];
	size_t n, cap;
};

static int collect(void *ctx, const char *name, size_t len, uint64_t ino, unsigned dtype,
		   uint64_t next)
{
	struct rm_ctx *c = ctx;
	if ((len == 1 && name[0] == '.') || (len == 2 && !memcmp(name, "..", 2)) || len >= 300)
		return 0;
	if (c->n == c->cap) {
		c->cap = c->cap ? c->cap * 2 : 256;
		c->names = t_xrealloc(c->names, c->cap * sizeof(*c->names));
	}
	memcpy(c->names[c->n], name, len);
	c->names[c->n][len] = 0;
	c->n++;
	return 0;
}

/* Remove everything below dir (and the entries of dir). */
static void remove_tree(uint64_t dir)
{
	struct rm_ctx c = { 0 };
	int r = uext4_readdir(g_fs, dir, 0, collect, &c);
	if (r < 0)
		BAD("readdir ino %llu: %s", (unsigned long long)dir, strerror(-r));
	for (size_t i = 0; i < c.n; i++) {
		struct uext4_stat st;
		if (dir == UEXT4_ROOT_INO && !strcmp(c.names[i], "lost+found"))
			continue;
		r = uext4_lookup(g_fs, dir, c.names[i], &st);
		if (r < 0) {
			BAD("lookup %s: %s", c.names[i], strerror(-r));
			continue;
		}
		if (S_ISDIR(st.mode)) {
			remove_tree(st.ino);
			r = uext4_rmdir(g_fs, dir, c.names[i]);
		} else {
			r = uext4_unlink(g_fs, dir, c.names[i]);
		}
		if (r < 0)
			BAD("remove %s: %s", c.names[i], strerror(-r));
	}
	free(c.names);
}

static int run_fill(uint64_t seed)
{
	static struct filler fls[NTHREADS];
	struct uext4_statfs fresh, full, empty;
	if (mount_rw() < 0)
		return T_FAIL;
	statfs_print("fresh:", &fresh);
	uint64_t bytes1 = fill(fls, seed, 1);
	statfs_print("after fill:", &full);
	bool inodes_limited = full.inodes_free == 0;
	/* ENOSPC came for a reason: blocks or inodes (nearly) used up */
	T_CHECK(full.inodes_free == 0 || full.blocks_free <= full.blocks / 20 + 64,
		"ENOSPC with %llu of %llu blocks and %llu inodes still free",
		(unsigned long long)full.blocks_free, (unsigned long long)full.blocks,
		(unsigned long long)full.inodes_free);
	verify_files(fls, "after fill");
	umount_fs();
	fsck();
	if (mount_rw() < 0)
		return T_FAIL;
	verify_files(fls, "after remount");
	remove_tree(UEXT4_ROOT_INO);
	statfs_print("after deleting all:", &empty);
	T_CHECK(empty.inodes_free == fresh.inodes_free, "inodes free %llu after deleting, fresh %llu",
		(unsigned long long)empty.inodes_free, (unsigned long long)fresh.inodes_free);
	/* a grown root directory may keep a block or two */
	T_CHECK(empty.blocks_free + 4 >= fresh.blocks_free && empty.blocks_free <= fresh.blocks_free,
		"blocks free %llu after deleting, fresh %llu",
		(unsigned long long)empty.blocks_free, (unsigned long long)fresh.blocks_free);
	for (int t = 0; t < NTHREADS; t++)
		free(fls[t].files);
	printf("second fill\n");
	uint64_t bytes2 = fill(fls, seed, 2);
	statfs_print("after second fill:", &full);
	if (!inodes_limited)
		T_CHECK(bytes2 >= bytes1 * 9 / 10, "second fill wrote %llu bytes, the first %llu",
			(unsigned long long)bytes2, (unsigned long long)bytes1);
	verify_files(fls, "after second fill");
	remove_tree(UEXT4_ROOT_INO);
	for (int t = 0; t < NTHREADS; t++)
		free(fls[t].files);
	statfs_print("after deleting again:", &empty);
	T_CHECK(empty.inodes_free == fresh.inodes_free, "inodes free %llu after deleting, fresh %llu",
		(unsigned long long)empty.inodes_free, (unsigned long long)fresh.inodes_free);
	umount_fs();
	fsck();
	printf("filled %llu then %llu bytes\n", (unsigned long long)bytes1, (unsigned long long)bytes2);
	return 0;
}

static uint64_t g_last_ino;     /* the file write_as() made last */

/* Write as (uid, gid) into a new file until ENOSPC; returns bytes. */
static uint64_t write_as(uint32_t uid, const char *name, uint64_t limit)
{
	uext4_set_caller(uid, uid);
	struct uext4_stat st;
	int r = uext4_create(g_fs, UEXT4_ROOT_INO, name, S_IFREG | 0644, &st);
	if (r < 0) {
		expect_enospc(r, "create", UEXT4_ROOT_INO);
		uext4_set_caller(0, 0);
		return 0;
	}
	struct filler fl = { .rng = 12345, .buf = t_xmalloc(CHUNK_MAX) };
	struct file_rec f = { .ino = st.ino, .id = uid + 77 };
	g_last_ino = st.ino;
	write_file(&fl, &f, limit);
	free(fl.buf);
	uext4_set_caller(0, 0);
	return f.size;
}

/*
 * generic/256: as uid on a file system full for it, punch every other
 * block of the first `blocks` of its file ino: each punch splits an
 * extent, and the tree soon needs a new block, which only the reserved
 * blocks can give.  Every punch must succeed, as on the kernel's ext4.
 */
static void punch_every_other(uint32_t uid, uint64_t ino, uint32_t bs, unsigned blocks)
{
	uext4_file *f = NULL;
	unsigned done = 0;

	uext4_set_caller(uid, uid);
	int r = uext4_open(g_fs, ino, O_RDWR, &f);
	T_CHECK(r == 0, "open of inode %llu as uid %u: %d", (unsigned long long)ino, uid, r);
	for (unsigned i = 1; r == 0 && i < blocks; i += 2, done++) {
		r = uext4_fallocate(f, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (uint64_t)i * bs, bs);
		T_CHECK(r == 0, "punch of block %u as uid %u on a full file system: %s (%s)", i, uid,
			strerror(-r), uext4_last_error());
	}
	if (f)
		uext4_release(f);
	uext4_set_caller(0, 0);
	printf("uid %u punched %u blocks of a full file system\n", uid, done);
}

/* As uid, a file of 9 blocks punched at 1, 3 and 5: four extents, all
 * that the inode holds, the last one three blocks long.  Returns its inode. */
static uint64_t make_full_root(uint32_t uid, uint32_t bs)
{
	struct uext4_stat st;
	uext4_file *f = NULL;
	char *buf = t_xmalloc(9 * bs);
	int r;

	memset(buf, 'r', 9 * bs);
	uext4_set_caller(uid, uid);
	r = uext4_create(g_fs, UEXT4_ROOT_INO, "user-frag", S_IFREG | 0644, &st);
	T_CHECK(r == 0, "create user-frag: %d", r);
	if (r == 0 && (r = uext4_open(g_fs, st.ino, O_RDWR, &f)) == 0) {
		T_CHECK(uext4_pwrite(f, buf, 9 * bs, 0) == (ssize_t)(9 * bs), "write user-frag");
		for (unsigned i = 1; i <= 5; i += 2)
			T_CHECK(uext4_fallocate(f, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
						(uint64_t)i * bs, bs) == 0, "punch user-frag");
		uext4_release(f);
	}
	free(buf);
	uext4_set_caller(0, 0);
	return r == 0 ? st.ino : 0;
}

static int run_reserved(void)
{
	struct uext4_statfs sf;
	if (mount_rw() < 0)
		return T_FAIL;
	struct uext4_info info;
	uext4_info(g_fs, &info);
	statfs_print("fresh:", &sf);
	printf("reserved blocks: %llu\n", (unsigned long long)info.reserved_blocks);
	T_CHECK(info.reserved_blocks > 0, "the image has no reserved blocks (mke2fs -m 5?)");
	uint64_t frag = make_full_root(1000, info.block_size);
	uint64_t user = write_as(1000, "user-file", UINT64_MAX / 2), user_ino = g_last_ino;
	statfs_print("after user fill:", &sf);
	printf("user 1000 wrote %llu bytes before ENOSPC\n", (unsigned long long)user);
	T_CHECK(sf.blocks_free >= info.reserved_blocks * 9 / 10,
		"a non-root caller used reserved blocks: %llu free, %llu reserved",
		(unsigned long long)sf.blocks_free, (unsigned long long)info.reserved_blocks);
	T_CHECK(sf.blocks_avail <= 64, "non-root ENOSPC with %llu blocks available",
		(unsigned long long)sf.blocks_avail);
	uint64_t more = write_as(1000, "user-file2", 64 * 1024);
	T_CHECK(more == 0, "non-root wrote %llu more bytes after ENOSPC", (unsigned long long)more);
	/* Block 7 splits the inode's fourth extent: a tree block first. */
	punch_every_other(1000, frag, info.block_size, 8);
	punch_every_other(1000, user_ino, info.block_size, 1024);
	uint64_t root = write_as(0, "root-file", 256 * 1024);
	printf("root wrote %llu bytes into the reserved blocks\n", (unsigned long long)root);
	T_CHECK(root == 256 * 1024, "root could write only %llu of 256 KiB into the reserved blocks",
		(unsigned long long)root);
	uint64_t root2 = write_as(0, "root-file2", UINT64_MAX / 2);
	statfs_print("after root fill:", &sf);
	printf("root then filled %llu more bytes\n", (unsigned long long)root2);
	umount_fs();
	fsck();
	return 0;
}

/*
 * busy: a 16 MiB file written and committed, then unlinked without a
 * commit, so its blocks are free but busy (not handed out before the
 * unlink commits).  One write of most of the free space must commit and go
 * on when the blocks outside the busy ones run out: a short count here is
 * what the writeback cache loses (the kernel's dirty pages come back as
 * such writes, and a short one is a failed write-back).
 */
static int run_busy(void)
{
	const size_t big = 16u << 20;
	struct uext4_opts o = { .commit_secs = 3600 };  /* no timer commit in between */
	struct uext4_statfs sf;
	struct uext4_stat st;
	uext4_file *f = NULL;
	unsigned char *buf = t_xmalloc(big);
	int r = uext4_mount(g_img, &o, &g_fs);

	if (r < 0) {
		printf("FAIL: mount %s: %s (%s)\n", g_img, strerror(-r), uext4_last_error());
		free(buf);
		return -1;
	}
	memset(buf, 0xb5, big);
	T_CHECK(uext4_create(g_fs, UEXT4_ROOT_INO, "big", S_IFREG | 0644, &st) == 0, "create big");
	T_CHECK(uext4_open(g_fs, st.ino, O_RDWR, &f) == 0, "open big");
	T_CHECK(uext4_pwrite(f, buf, big, 0) == (ssize_t)big, "write 16 MiB: %s", uext4_last_error());
	uext4_release(f);
	T_CHECK(uext4_sync(g_fs) == 0, "sync");
	T_CHECK(uext4_unlink(g_fs, UEXT4_ROOT_INO, "big") == 0, "unlink big");
	uext4_statfs(g_fs, &sf);
	statfs_print("after the unlink (not committed):", &sf);
	/* All the free space but 1 MiB (metadata), most of it busy. */
	size_t want = (size_t)(sf.blocks_avail * sf.block_size) - (1u << 20);
	if (want > big)
		want = big;
	T_CHECK(want > (8u << 20), "only %zu bytes free after freeing 16 MiB", want);
	T_CHECK(uext4_create(g_fs, UEXT4_ROOT_INO, "after", S_IFREG | 0644, &st) == 0, "create after");
	T_CHECK(uext4_open(g_fs, st.ino, O_RDWR, &f) == 0, "open after");
	ssize_t n = uext4_pwrite(f, buf, want, 0);
	printf("one write of %zu bytes into busy space: %zd\n", want, n);
	T_CHECK(n == (ssize_t)want, "the write into busy space stored %zd of %zu bytes: %s", n, want,
		n < 0 ? uext4_last_error() : "a short count");
	uext4_release(f);
	free(buf);
	umount_fs();
	fsck();
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 3 || argc > 4) {
		fprintf(stderr, "usage: enospc fill|reserved|busy IMAGE [SEED]\n");
		return 2;
	}
	g_img = argv[2];
	setvbuf(stdout, NULL, _IOLBF, 0); /* keep stdout and stderr in order in logs */
	uint64_t seed;
	if (argc == 4) {
		seed = strtoull(argv[3], NULL, 0);
	} else {
		struct timeval tv;
		gettimeofday(&tv, NULL);
		seed = ((uint64_t)tv.tv_sec * 1000003u ^ (uint64_t)tv.tv_usec) % 1000000000;
	}
	printf("enospc %s %s, seed %llu (replay: enospc %s IMAGE %llu)\n", argv[1], g_img,
	       (unsigned long long)seed, argv[1], (unsigned long long)seed);
	int r;
	if (!strcmp(argv[1], "fill"))
		r = run_fill(seed);
	else if (!strcmp(argv[1], "reserved"))
		r = run_reserved();
	else if (!strcmp(argv[1], "busy"))
		r = run_busy();
	else
		return 2;
	if (r || t_failures || atomic_load(&g_bad)) {
		printf("FAIL\n");
		return T_FAIL;
	}
	printf("enospc %s passed\n", argv[1]);
	return T_PASS;
}
