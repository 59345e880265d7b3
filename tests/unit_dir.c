/*
 * unit_dir.c - directory lookup and readdir (dir.c, htree.c, dirhash.c).
 *
 * 1. dirhash(): legacy, half_md4 and tea vectors against debugfs dx_hash
 *    for random names (with bytes >= 0x80) and random seeds, plus the
 *    zero-seed default; unsigned variants and siphash refusal.
 * 2. Corruption: damaged dx root fields, dx entries pointing at the root or
 *    out of the directory, bad leaf dirents (rec_len 0/13/past the block,
 *    name_len > rec_len, inode out of range) must give -EUCLEAN with a
 *    message naming the problem; 60 randomly damaged images are listed and
 *    looked up without crash or hang (run under ASan).
 * 3. Images from a generated tree: /small, /big with UNIT_DIR_BIG entries
 *    (default 50,000, a 2-level htree; 20,000 in sanitizer builds), /mid
 *    (500), /collide (legacy-hash collision pairs + 300), /empty, and for
 *    inline_data images small inline dirs.  Flavours: 4 KiB and 1 KiB
 *    blocks, tea, legacy, the unsigned-hash flag (half_md4 and legacy), no
 *    metadata_csum, inline_data; most populated through a kernel loop
 *    mount (kernel-made htrees, inline dirents in system.data), some with
 *    mke2fs -d + e2fsck -fyD.  Every directory is listed with readdir
 *    stopped every k entries (k random, "stop before" and "stop after" an
 *    entry), compared with the tree ("." and ".." included), every name is
 *    looked up, a missing name gives -ENOENT, and resuming from cookies
 *    (all of them for small dirs, 200 random ones for big dirs) must
 *    continue exactly with the next entry.  Four threads list and look up
 *    /big at once on the first image.  e2fsck -fn is clean on every image.
 *
 * Seed: UNIT_DIR_SEED (printed).  UNIT_DIR_KEEP=1 keeps failing images.
 * Needs mke2fs/debugfs/e2fsck (skip 77); without loop mounts the
 * kernel-populated images are skipped.
 */
#include "dirhash.h"
#include "internal.h"
#include "ondisk.h"
#include "uext4.h"
#include "t.h"

#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Entries of /big: 50,000 gives a 2-level htree; sanitizer builds use
 * fewer to stay inside run.sh's per-test timeout. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define DEFAULT_BIG 20000
#else
#define DEFAULT_BIG 50000
#endif

static uint64_t rng_state;

static uint64_t rnd(void)
{
	return t_rnd(&rng_state);
}

static unsigned rnd_below(unsigned n)
{
	return (unsigned)t_rnd_below(&rng_state, n);
}

/* ------------------------------------------------------------ names */

/* A random file name: safe ASCII, sometimes bytes >= 0x80 (which hash
 * differently with signed and unsigned char). */
static void random_name(char *buf, unsigned len, bool high)
{
	static const char set[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-";

	for (unsigned i = 0; i < len; i++) {
		if (high && rnd_below(4) == 0)
			buf[i] = (char)(0x80 + rnd_below(0x80));
		else
			buf[i] = set[rnd_below(sizeof(set) - 1)];
	}
	buf[len] = '\0';
	if (strcmp(buf, ".") == 0 || strcmp(buf, "..") == 0)
		buf[0] = 'x';
}

/* A set of strings (open addressing), for unique names. */
struct strset {
	char **slot;
	size_t cap, n;
};

static uint64_t str_hash(const char *s)
{
	uint64_t h = 1469598103934665603ULL;

	for (; *s; s++)
		h = (h ^ (uint8_t)*s) * 1099511628211ULL;
	return h;
}

static bool strset_add(struct strset *s, const char *name)
{
	size_t i;

	if (2 * (s->n + 1) > s->cap) {
		struct strset t = { calloc(s->cap ? s->cap * 2 : 1024, sizeof(char *)),
				    s->cap ? s->cap * 2 : 1024, 0 };

		for (size_t j = 0; j < s->cap; j++) {
			size_t k;

			if (!s->slot[j])
				continue;
			for (k = str_hash(s->slot[j]) & (t.cap - 1); t.slot[k]; k = (k + 1) & (t.cap - 1))
				;
			t.slot[k] = s->slot[j];
			t.n++;
		}
		free(s->slot);
		*s = t;
	}
	for (i = str_hash(name) & (s->cap - 1); s->slot[i]; i = (i + 1) & (s->cap - 1))
		if (strcmp(s->slot[i], name) == 0)
			return false;
	s->slot[i] = strdup(name);
	s->n++;
	return true;
}

/* ------------------------------------------------------------ 1. dirhash */

static void uuid_words(const char *uuid, uint32_t w[4])
{
	uint8_t b[16];
	unsigned n = 0;

	for (const char *p = uuid; *p && n < 16; p++) {
		unsigned v;

		if (*p == '-')
			continue;
		sscanf(p, "%2x", &v);
		b[n++] = (uint8_t)v;
		p++;
	}
	for (int i = 0; i < 4; i++)
		w[i] = b[4 * i] | (uint32_t)b[4 * i + 1] << 8 | (uint32_t)b[4 * i + 2] << 16 |
		       (uint32_t)b[4 * i + 3] << 24;
}

static void test_dirhash_vectors(const char *tmp)
{
	static const char *algs[] = { "legacy", "half_md4", "tea" };
	enum { NNAMES = 400 };
	char cmdfile[512], outfile[512], img[512], line[2048];
	char (*names)[256] = malloc(NNAMES * 256);
	char (*seeds)[40] = malloc(NNAMES * 40);
	int alg_of[NNAMES];
	FILE *f;
	int checked = 0;

	printf("dirhash: %d names x {legacy, half_md4, tea} against debugfs dx_hash\n", NNAMES);
	snprintf(img, sizeof(img), "%s/hash.img", tmp);
	snprintf(cmdfile, sizeof(cmdfile), "%s/hash.cmd", tmp);
	snprintf(outfile, sizeof(outfile), "%s/hash.out", tmp);
	if (t_sh("mke2fs -q -F -t ext4 %s 4M >/dev/null 2>&1", img)) {
		CHECK_ERR(0, "mke2fs for the hash image");
		return;
	}
	f = fopen(cmdfile, "w");
	for (int i = 0; i < NNAMES; i++) {
		unsigned len = i < 40 ? (unsigned)i % 40 + 1 : 1 + rnd_below(255);

		random_name(names[i], len, true);
		if (names[i][0] == '-')
			names[i][0] = 'm';  /* not an option to dx_hash */
		if (i % 5 == 0)
			strcpy(seeds[i], "00000000-0000-0000-0000-000000000000");
		else
			snprintf(seeds[i], 40, "%08x-%04x-%04x-%04x-%04x%08x", (unsigned)rnd(),
				 (unsigned)rnd() & 0xffff, (unsigned)rnd() & 0xffff,
				 (unsigned)rnd() & 0xffff, (unsigned)rnd() & 0xffff, (unsigned)rnd());
		alg_of[i] = (int)rnd_below(3);
		fprintf(f, "dx_hash -h %s -s %s %s\n", algs[alg_of[i]], seeds[i], names[i]);
	}
	fclose(f);
	if (t_sh("debugfs -f %s %s >%s 2>/dev/null", cmdfile, img, outfile)) {
		CHECK_ERR(0, "debugfs dx_hash run");
		return;
	}
	f = fopen(outfile, "r");
	for (int i = 0; i < NNAMES && fgets(line, sizeof(line), f);) {
		char *is = strstr(line, " is 0x");
		unsigned want_h, want_m;
		uint32_t seed[4], h, m;

		if (strncmp(line, "Hash of ", 8) != 0 || !is)
			continue;
		/* Skip names debugfs did not answer for. */
		while (i < NNAMES && (strncmp(line + 8, names[i], strlen(names[i])) ||
				      strncmp(line + 8 + strlen(names[i]), " is 0x", 6)))
			i++;
		if (i == NNAMES)
			break;
		/* The name may contain " is 0x": use the last one. */
		for (char *q = is; (q = strstr(q + 1, " is 0x"));)
			is = q;
		if (sscanf(is, " is 0x%x (minor 0x%x)", &want_h, &want_m) != 2)
			continue;
		uuid_words(seeds[i], seed);
		CHECK_ERR(dirhash(alg_of[i], seed, names[i], strlen(names[i]), &h, &m) == 0,
		      "dirhash %s", algs[alg_of[i]]);
		CHECK_ERR(h == want_h && m == want_m,
		      "dirhash %s seed %s name #%d (len %zu): got 0x%x/0x%x, debugfs 0x%x/0x%x",
		      algs[alg_of[i]], seeds[i], i, strlen(names[i]), h, m, want_h, want_m);
		checked++;
		i++;
	}
	fclose(f);
	CHECK_ERR(checked == NNAMES, "only %d of %d dx_hash results parsed", checked, NNAMES);
	{
		/* Unsigned variants agree with the signed ones on ASCII names, differ
		 * on bytes >= 0x80; siphash is refused. */
		uint32_t h1, h2, m1, m2;

		dirhash(DX_HASH_TEA, NULL, "hello", 5, &h1, &m1);
		dirhash(DX_HASH_TEA_UNSIGNED, NULL, "hello", 5, &h2, &m2);
		CHECK_ERR(h1 == h2 && m1 == m2, "tea unsigned on ASCII");
		dirhash(DX_HASH_HALF_MD4, NULL, "h\xe9llo", 5, &h1, &m1);
		dirhash(DX_HASH_HALF_MD4_UNSIGNED, NULL, "h\xe9llo", 5, &h2, &m2);
		CHECK_ERR(h1 != h2, "half_md4 unsigned on a high byte");
		CHECK_ERR(dirhash(DX_HASH_SIPHASH, NULL, "a", 1, &h1, &m1) == -EOPNOTSUPP, "siphash");
		CHECK_ERR(dirhash(77, NULL, "a", 1, &h1, &m1) < 0, "unknown version");
	}
	printf("dirhash: %d vectors checked\n", checked);
	free(names);
	free(seeds);
}

/* ------------------------------------------------------------ 2. trees */

struct tdir {
	char path[600];         /* "/big" */
	char parent[600];
	char **names;
	bool *isdir;
	size_t n;
};

#define MAX_TDIRS 32
static struct tdir tdirs[MAX_TDIRS];
static int ntdirs;

static struct tdir *tdir_new(const char *path, const char *parent)
{
	struct tdir *d = &tdirs[ntdirs++];

	snprintf(d->path, sizeof(d->path), "%s", path);
	if (snprintf(d->parent, sizeof(d->parent), "%s", parent) >= (int)sizeof(d->parent))
		d->parent[0] = '\0';
	return d;
}

static void tdir_add(struct tdir *d, const char *name, bool isdir)
{
	d->names = realloc(d->names, (d->n + 1) * sizeof(char *));
	d->isdir = realloc(d->isdir, (d->n + 1) * sizeof(bool));
	d->names[d->n] = strdup(name);
	d->isdir[d->n] = isdir;
	d->n++;
}

static bool tdir_has(const struct tdir *d, const char *name)
{
	for (size_t i = 0; i < d->n; i++)
		if (strcmp(d->names[i], name) == 0)
			return true;
	return false;
}

/* Fill d with n unique random names (every 1000th a subdirectory). */
static void tdir_fill_random(struct tdir *d, size_t n, unsigned maxlen)
{
	struct strset s = { 0 };
	char buf[256];

	for (size_t i = 0; i < d->n; i++)
		strset_add(&s, d->names[i]);
	while (d->n < n) {
		unsigned len = 1 + rnd_below(maxlen);

		random_name(buf, len, true);
		if (strset_add(&s, buf))
			tdir_add(d, buf, d->n % 1000 == 999);
	}
	for (size_t i = 0; i < s.cap; i++)
		free(s.slot[i]);
	free(s.slot);
}

/* Names whose legacy hashes collide (the legacy hash has no minor hash,
 * so these share a full readdir position in the kernel's scheme). */
static void tdir_fill_collisions(struct tdir *d, unsigned pairs)
{
	enum { BITS = 22 };
	uint32_t *tab = calloc(1u << BITS, sizeof(uint32_t));
	char (*names)[16] = malloc((size_t)(1u << BITS) * 16);
	unsigned found = 0;

	for (uint32_t i = 1; i < (1u << BITS) && found < pairs; i++) {
		uint32_t h, m, slot;

		snprintf(names[i], 16, "c%07x", (unsigned)(rnd() & 0xfffffff));
		dirhash(DX_HASH_LEGACY, NULL, names[i], strlen(names[i]), &h, &m);
		slot = (h >> 1) & ((1u << BITS) - 1);
		if (tab[slot]) {
			uint32_t h2, m2;

			dirhash(DX_HASH_LEGACY, NULL, names[tab[slot]], strlen(names[tab[slot]]),
				&h2, &m2);
			if (h2 == h && !tdir_has(d, names[tab[slot]]) && !tdir_has(d, names[i]) &&
			    strcmp(names[tab[slot]], names[i]) != 0) {
				tdir_add(d, names[tab[slot]], false);
				tdir_add(d, names[i], false);
				found++;
			}
		}
		tab[slot] = i;
	}
	printf("tree: %u legacy-hash collision pairs in %s\n", found, d->path);
	free(tab);
	free(names);
}

/* Create the tree under root; returns 0 or -1 (with a message). */
static int make_tree_on_disk(const char *root)
{
	char p[2048];

	for (int i = 0; i < ntdirs; i++) {
		struct tdir *d = &tdirs[i];

		if (snprintf(p, sizeof(p), "%s%s", root, d->path) >= (int)sizeof(p))
			return -1;
		mkdir(p, 0755);
		for (size_t j = 0; j < d->n; j++) {
			if (snprintf(p, sizeof(p), "%s%s/%s", root, d->path, d->names[j]) >=
			    (int)sizeof(p))
				return -1;
			if (d->isdir[j]) {
				mkdir(p, 0755);
			} else {
				int fd = open(p, O_CREAT | O_WRONLY, 0644);

				if (fd < 0) {
					perror(p);
					return -1;
				}
				close(fd);
			}
		}
	}
	return 0;
}

static void build_trees(size_t big, unsigned big_maxlen, bool inline_tree)
{
	struct tdir *d;

	for (int i = 0; i < ntdirs; i++) {
		for (size_t j = 0; j < tdirs[i].n; j++)
			free(tdirs[i].names[j]);
		free(tdirs[i].names);
		free(tdirs[i].isdir);
	}
	memset(tdirs, 0, sizeof(tdirs));
	ntdirs = 0;
	d = tdir_new("/", "/");
	tdir_add(d, "small", true);
	tdir_add(d, "mid", true);
	tdir_add(d, "empty", true);
	if (!inline_tree) {
		tdir_add(d, "big", true);
		tdir_add(d, "collide", true);
	} else {
		tdir_add(d, "tiny", true);
		tdir_add(d, "in2", true);
	}
	tdir_add(d, "lost+found", true);
	d = tdir_new("/small", "/");
	for (int i = 0; i < 9; i++) {
		char n[16];

		snprintf(n, sizeof(n), "f%d", i);
		tdir_add(d, n, false);
	}
	tdir_add(d, "sub", true);
	d = tdir_new("/small/sub", "/small");
	tdir_add(d, "a", false);
	tdir_add(d, "bb", false);
	tdir_add(d, "a-much-longer-name-for-this-entry", false);
	tdir_fill_random(tdir_new("/mid", "/"), 500, 60);
	tdir_new("/empty", "/");
	tdir_new("/lost+found", "/");
	if (!inline_tree) {
		tdir_fill_random(tdir_new("/big", "/"), big, big_maxlen);
		d = tdir_new("/collide", "/");
		tdir_fill_collisions(d, 12);
		tdir_fill_random(d, d->n + 300, 40);
	} else {
		d = tdir_new("/tiny", "/");
		tdir_add(d, "x", false);
		tdir_add(d, "yy", true);
		tdir_new("/tiny/yy", "/tiny");
		d = tdir_new("/in2", "/");
		for (int i = 0; i < 7; i++) {
			char n[32];

			snprintf(n, sizeof(n), "entry%02d", i);
			tdir_add(d, n, false);
		}
	}
	/* Subdirectories of /big and /mid are empty directories. */
	for (int i = 0, n = ntdirs; i < n; i++) {
		if (strcmp(tdirs[i].path, "/big") && strcmp(tdirs[i].path, "/mid"))
			continue;
		for (size_t j = 0; j < tdirs[i].n && ntdirs < MAX_TDIRS; j++) {
			if (tdirs[i].isdir[j]) {
				char p[600];

				if (snprintf(p, sizeof(p), "%s/%s", tdirs[i].path,
					     tdirs[i].names[j]) >= (int)sizeof(p))
					continue;
				tdir_new(p, tdirs[i].path);
			}
		}
	}
}

/* ------------------------------------------------------------ readdir */

struct listing {
	char **names;
	uint64_t *inos, *cookies;
	unsigned *dtypes;
	size_t n, cap;
	size_t taken, stop_after;   /* stop when taken reaches stop_after */
	bool consume_on_stop;       /* the stopping entry counts as taken */
	bool stopped;               /* the callback returned nonzero */
};

static void listing_push(struct listing *l, const char *name, size_t len, uint64_t ino,
			 unsigned dtype, uint64_t next)
{
	if (l->n == l->cap) {
		l->cap = l->cap ? l->cap * 2 : 64;
		l->names = realloc(l->names, l->cap * sizeof(char *));
		l->inos = realloc(l->inos, l->cap * sizeof(uint64_t));
		l->cookies = realloc(l->cookies, l->cap * sizeof(uint64_t));
		l->dtypes = realloc(l->dtypes, l->cap * sizeof(unsigned));
	}
	l->names[l->n] = strndup(name, len);
	l->inos[l->n] = ino;
	l->cookies[l->n] = next;
	l->dtypes[l->n] = dtype;
	l->n++;
}

static void listing_free(struct listing *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->names[i]);
	free(l->names);
	free(l->inos);
	free(l->cookies);
	free(l->dtypes);
	memset(l, 0, sizeof(*l));
}

static int fill_cb(void *ctx, const char *name, size_t len, uint64_t ino, unsigned dtype,
		   uint64_t next)
{
	struct listing *l = ctx;

	if (l->stop_after && l->taken == l->stop_after && !l->consume_on_stop)
		return l->stopped = true;
	listing_push(l, name, len, ino, dtype, next);
	l->taken++;
	if (l->stop_after && l->taken == l->stop_after && l->consume_on_stop)
		return l->stopped = true;
	return 0;
}

/* List dir in pieces of at most k entries; returns 0 or an error. */
static int list_dir(uext4_fs *fs, uint64_t ino, unsigned k, struct listing *l, size_t expect)
{
	uint64_t cookie = 0;

	for (size_t calls = 0; calls < 4 * expect + 100; calls++) {
		int err;

		l->taken = 0;
		l->stopped = false;
		l->stop_after = k ? 1 + rnd_below(k) : 0;
		l->consume_on_stop = rnd() & 1;
		err = uext4_readdir(fs, ino, cookie, fill_cb, l);
		if (err)
			return err;
		if (!l->stopped)
			return 0;
		CHECK_ERR(l->taken > 0, "readdir stopped before any entry");
		cookie = l->cookies[l->n - 1];
	}
	CHECK_ERR(0, "readdir of inode %" PRIu64 " does not end", ino);
	return -ELOOP;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void check_dir(uext4_fs *fs, const struct tdir *d, const char *img)
{
	struct listing l = { 0 }, full = { 0 };
	uint64_t ino, parent;
	char **want, **got;
	size_t ngot = 0;
	int err;

	err = uext4_resolve(fs, d->path, 1, &ino);
	CHECK_ERR(err == 0, "%s: resolve %s: %d", img, d->path, err);
	if (err)
		return;
	uext4_resolve(fs, d->parent, 1, &parent);
	err = list_dir(fs, ino, 1 + rnd_below(d->n > 100 ? 300 : 8), &l, d->n + 2);
	CHECK_ERR(err == 0, "%s: readdir %s: %d", img, d->path, err);
	CHECK_ERR(l.n == d->n + 2, "%s: readdir %s: %zu entries, want %zu", img, d->path, l.n,
	      d->n + 2);
	want = malloc((d->n + 1) * sizeof(char *));
	got = malloc((l.n + 1) * sizeof(char *));
	if (d->n)
		memcpy(want, d->names, d->n * sizeof(char *));
	qsort(want, d->n, sizeof(char *), cmp_str);
	for (size_t i = 0; i < l.n; i++) {
		if (strcmp(l.names[i], ".") == 0) {
			CHECK_ERR(l.inos[i] == ino, "%s: '.' of %s", img, d->path);
		} else if (strcmp(l.names[i], "..") == 0) {
			CHECK_ERR(l.inos[i] == parent, "%s: '..' of %s is %" PRIu64 ", want %" PRIu64,
			      img, d->path, l.inos[i], parent);
		} else {
			struct uext4_stat st;

			got[ngot++] = l.names[i];
			err = uext4_lookup(fs, ino, l.names[i], &st);
			CHECK_ERR(err == 0 && st.ino == l.inos[i], "%s: lookup %s/%s: %d", img, d->path,
			      l.names[i], err);
			CHECK_ERR(l.dtypes[i] == (S_ISDIR(st.mode) ? DT_DIR : DT_REG),
			      "%s: dtype of %s/%s: %u", img, d->path, l.names[i], l.dtypes[i]);
		}
	}
	qsort(got, ngot, sizeof(char *), cmp_str);
	CHECK_ERR(ngot == d->n, "%s: %s lists %zu names, want %zu", img, d->path, ngot, d->n);
	for (size_t i = 0; i < ngot && i < d->n; i++) {
		if (strcmp(got[i], want[i]) != 0) {
			CHECK_ERR(0, "%s: %s: listed '%s', expected '%s'", img, d->path, got[i], want[i]);
			break;
		}
	}
	/* Every expected name is found by lookup (also catches names readdir lost). */
	for (size_t i = 0; i < d->n; i++) {
		uint64_t x;
		char path[2048];

		if (snprintf(path, sizeof(path), "%s/%s", strcmp(d->path, "/") ? d->path : "",
			     d->names[i]) >= (int)sizeof(path))
			continue;
		err = uext4_resolve(fs, path, 0, &x);
		CHECK_ERR(err == 0, "%s: resolve %s: %d", img, path, err);
	}
	err = uext4_lookup(fs, ino, "no-such-name-in-this-dir", NULL);
	CHECK_ERR(err == -ENOENT, "%s: lookup of a missing name in %s: %d", img, d->path, err);

	/* Exact resume: readdir(cookie after entry i) starts with entry i+1. */
	err = list_dir(fs, ino, 0, &full, d->n + 2);
	CHECK_ERR(err == 0 && full.n == l.n, "%s: single-call readdir of %s: %d, %zu entries", img,
	      d->path, err, full.n);
	for (size_t i = 0; i < l.n && i < full.n; i++) {
		if (strcmp(l.names[i], full.names[i]) || l.cookies[i] != full.cookies[i]) {
			CHECK_ERR(0, "%s: %s: piecewise and single-call readdir differ at %zu", img,
			      d->path, i);
			break;
		}
	}
	for (unsigned t = 0; t < 200 && full.n; t++) {
		size_t i = d->n < 400 ? t % full.n : rnd_below((unsigned)full.n);
		struct listing one = { .stop_after = 1, .consume_on_stop = true };

		if (d->n < 400 && t >= full.n)
			break;
		err = uext4_readdir(fs, ino, full.cookies[i], fill_cb, &one);
		CHECK_ERR(err == 0, "%s: resume %s at %zu: %d", img, d->path, i, err);
		if (i + 1 == full.n)
			CHECK_ERR(one.n == 0, "%s: resume %s after the last entry gave '%s'", img,
			      d->path, one.n ? one.names[0] : "");
		else
			CHECK_ERR(one.n == 1 && strcmp(one.names[0], full.names[i + 1]) == 0,
			      "%s: resume %s after entry %zu (cookie 0x%" PRIx64 "): got '%s', "
			      "want '%s'", img, d->path, i, full.cookies[i],
			      one.n ? one.names[0] : "(none)", full.names[i + 1]);
		listing_free(&one);
	}
	free(want);
	free(got);
	listing_free(&l);
	listing_free(&full);
}

/* ------------------------------------------------------------ 3. corruption */

/* Physical blocks of a file, from debugfs "blocks". */
static size_t file_blocks(const char *img, const char *path, uint64_t *out, size_t max)
{
	char cmd[1024];
	size_t n = 0;
	FILE *p;

	snprintf(cmd, sizeof(cmd), "debugfs -R 'blocks %s' %s 2>/dev/null", path, img);
	p = popen(cmd, "r");
	if (!p)
		return 0;
	while (n < max && fscanf(p, "%" SCNu64, &out[n]) == 1)
		n++;
	pclose(p);
	return n;
}

static void patch(const char *img, uint64_t off, const void *bytes, size_t len)
{
	int fd = open(img, O_WRONLY);

	CHECK_ERR(fd >= 0 && pwrite(fd, bytes, len, (off_t)off) == (ssize_t)len, "patch %s", img);
	close(fd);
}

static int count_cb(void *ctx, const char *name, size_t len, uint64_t ino, unsigned dtype,
		    uint64_t next)
{
	size_t *n = ctx;

	return ++*n > 100000;  /* a runaway listing stops here and fails below */
}

/* List and look up everything in dir; returns the first error (or 0). */
static int exercise_dir(uext4_fs *fs, const char *path, const struct tdir *d)
{
	uint64_t ino;
	size_t n = 0;
	int err = uext4_resolve(fs, path, 1, &ino), first = 0;

	if (err)
		return err;
	err = uext4_readdir(fs, ino, 0, count_cb, &n);
	CHECK_ERR(n <= 100000, "readdir of corrupt %s does not end", path);
	first = err;
	for (size_t i = 0; d && i < d->n; i++) {
		err = uext4_lookup(fs, ino, d->names[i], NULL);
		if (err && err != -ENOENT && !first)
			first = err;
	}
	return first;
}

struct corruption {
	const char *what;
	unsigned block;         /* index into the directory's blocks */
	unsigned off;           /* byte offset in the block */
	uint8_t bytes[4];
	unsigned len;
	const char *msg;        /* expected in the error message */
};

static void test_corruption(const char *tmp)
{
	static const struct corruption cases[] = {
		{ "dx root count > limit", 0, 34, { 0xff, 0x7f }, 2, "count" },
		{ "dx root indirect_levels 3", 0, 30, { 3 }, 1, "indirect levels" },
		{ "dx root hash version 9", 0, 28, { 9 }, 1, "hash version" },
		{ "dx root limit wrong", 0, 32, { 7, 0 }, 2, "limit" },
		{ "dx entry points at the root", 0, 36, { 0, 0, 0, 0 }, 4, "outside" },
		{ "dx entry beyond the directory", 0, 36, { 0xff, 0xff, 0, 0 }, 4, "outside" },
		{ "leaf rec_len 0", 1, 4, { 0, 0 }, 2, "bad rec_len" },
		{ "leaf rec_len 13", 1, 4, { 13, 0 }, 2, "bad rec_len" },
		{ "leaf rec_len past the block", 1, 4, { 0xfc, 0x0f }, 2, "bad rec_len" },
		{ "leaf name_len > rec_len", 1, 6, { 0xff }, 1, "bad rec_len" },
		{ "leaf inode out of range", 1, 0, { 0xff, 0xff, 0xff, 0x7f }, 4, "out of range" },
	};
	char img[512], root[512], work[512];
	struct uext4_opts o = { .read_only = 1 };
	uint64_t blocks[64];
	size_t nblocks;
	const struct tdir *mid = NULL;
	int err;

	printf("corruption: damaged htree and leaf blocks of a 1 KiB, no-csum image\n");
	build_trees(10, 255, false);
	for (int i = 0; i < ntdirs; i++)
		if (strcmp(tdirs[i].path, "/mid") == 0)
			mid = &tdirs[i];
	snprintf(root, sizeof(root), "%s/tree-corrupt", tmp);
	snprintf(img, sizeof(img), "%s/corrupt.img", tmp);
	snprintf(work, sizeof(work), "%s/work.img", tmp);
	mkdir(root, 0755);
	CHECK_ERR(make_tree_on_disk(root) == 0, "tree for the corruption image");
	fflush(stdout);
	if (t_sh("mke2fs -q -F -t ext4 -b 1024 -O ^metadata_csum -d %s %s 16M >/dev/null", root,
		img) || t_sh("rm -rf %s", root)) {
		CHECK_ERR(0, "mke2fs for the corruption image");
		return;
	}
	t_sh("e2fsck -fyD %s >/dev/null 2>&1", img);
	nblocks = file_blocks(img, "/mid", blocks, 64);
	CHECK_ERR(nblocks > 4, "/mid has %zu blocks", nblocks);
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]) && nblocks > 4; c++) {
		const struct corruption *k = &cases[c];
		uext4_fs *fs;

		t_sh("cp %s %s", img, work);
		/* Leaf cases damage the block the first dx entry points to. */
		patch(work, (k->block ? blocks[1] : blocks[0]) * 1024 + k->off, k->bytes, k->len);
		err = uext4_mount(work, &o, &fs);
		CHECK_ERR(err == 0, "mount %s", work);
		if (err)
			continue;
		err = exercise_dir(fs, "/mid", mid);
		CHECK_ERR(err == -EUCLEAN && strstr(uext4_last_error(), k->msg),
		      "%s: got %d, want -EUCLEAN with '%s'", k->what, err, k->msg);
		printf("  %-32s -> %d %s\n", k->what, err, uext4_last_error());
		uext4_umount(fs);
	}

	/* Random damage: anything may be reported, nothing may crash or hang. */
	for (int round = 0; round < 60 && nblocks > 4; round++) {
		uext4_fs *fs;
		int nerr = 0;

		t_sh("cp %s %s", img, work);
		for (int j = 0; j < 1 + (int)rnd_below(8); j++) {
			uint8_t v = (uint8_t)rnd();
			uint64_t blk = blocks[rnd_below((unsigned)nblocks)];

			patch(work, blk * 1024 + rnd_below(1024), &v, 1);
		}
		if (uext4_mount(work, &o, &fs))
			continue;
		for (int i = 0; i < ntdirs; i++)
			nerr += exercise_dir(fs, tdirs[i].path, &tdirs[i]) != 0;
		uext4_umount(fs);
	}
	printf("corruption: 60 randomly damaged images listed without crash or hang\n");
	unlink(work);
	unlink(img);
}

/* ------------------------------------------------------------ threads */

struct thr_arg {
	uext4_fs *fs;
	const struct tdir *d;
	uint64_t ino;
	unsigned id;
	int errors;
};

struct thr_count {
	size_t n, stop_every, since;
	uint64_t last;
};

static int thr_fill(void *ctx, const char *name, size_t len, uint64_t ino, unsigned dtype,
		    uint64_t next)
{
	struct thr_count *c = ctx;

	if (c->since == c->stop_every)
		return 1;   /* not taken: resume from the previous cookie */
	c->n++;
	c->since++;
	c->last = next;
	return 0;
}

/* Each thread lists the directory in pieces and looks up a share of it. */
static void *thr_main(void *p)
{
	struct thr_arg *a = p;
	struct thr_count c = { .stop_every = 3 + a->id };
	uint64_t cookie = 0;

	for (int calls = 0; calls < 1000000; calls++) {
		c.since = 0;
		if (uext4_readdir(a->fs, a->ino, cookie, thr_fill, &c)) {
			a->errors++;
			break;
		}
		if (c.since < c.stop_every)
			break;
		cookie = c.last;
	}
	if (c.n != a->d->n + 2)
		a->errors++;
	for (size_t i = a->id; i < a->d->n; i += 4) {
		if (uext4_lookup(a->fs, a->ino, a->d->names[i], NULL))
			a->errors++;
	}
	return NULL;
}

static void test_threads(uext4_fs *fs, const struct tdir *d, const char *img)
{
	struct thr_arg a[4];
	pthread_t t[4];
	uint64_t ino;

	if (uext4_resolve(fs, d->path, 1, &ino))
		return;
	for (unsigned i = 0; i < 4; i++) {
		a[i] = (struct thr_arg){ .fs = fs, .d = d, .ino = ino, .id = i };
		pthread_create(&t[i], NULL, thr_main, &a[i]);
	}
	for (unsigned i = 0; i < 4; i++) {
		pthread_join(t[i], NULL);
		CHECK_ERR(a[i].errors == 0, "%s: thread %u: %d errors listing/looking up %s", img, i,
		      a[i].errors, d->path);
	}
	printf("image %s: 4 threads listed and looked up %s concurrently\n", img, d->path);
}

/* ------------------------------------------------------------ images */

struct flavour {
	const char *name;
	const char *mkfs_opts;
	const char *hash_alg;   /* s_def_hash_version set before indexing */
	bool unsigned_hash;     /* set s_flags unsigned before indexing */
	bool inline_tree;
	bool kernel;            /* populate through a kernel loop mount */
};

static const struct flavour flavours[] = {
	/* mke2fs 1.47.0 has no -E hash_alg: the hash is set with debugfs
	 * before the directories are built.  Most images are populated through
	 * a kernel loop mount (kernel-made htrees, inline dirents in the
	 * system.data xattr); "mke2fs-d" ones with mke2fs -d (linear, which is
	 * quadratic in libext2fs, so their big dir is capped) then indexed by
	 * e2fsck -D. */
	{ "4k", "-b 4096", NULL, false, false, true },
	{ "1k", "-b 1024", NULL, false, false, true },
	{ "tea", "-b 4096", "tea", false, false, true },
	{ "legacy", "-b 4096", "legacy", false, false, true },
	{ "unsigned-md4", "-b 4096", NULL, true, false, true },
	{ "unsigned-legacy-1k", "-b 1024", "legacy", true, false, true },
	{ "mke2fs-d-1k-nocsum", "-b 1024 -O ^metadata_csum", "tea", false, false, false },
	{ "mke2fs-d-4k-legacy", "-b 4096", "legacy", false, false, false },
	{ "inline-mke2fs-d", "-O inline_data -I 256", NULL, false, true, false },
	{ "inline-kernel", "-O inline_data -I 256", NULL, false, true, true },
};

/* Build the image of a flavour; returns 0, 77 (cannot here) or 1. */
static int make_flavour_image(const char *tmp, const struct flavour *fl, const char *img)
{
	char root[512], opts[1024];
	int err;

	snprintf(root, sizeof(root), "%s/tree-%s", tmp, fl->name);
	mkdir(root, 0755);
	if (!fl->kernel && make_tree_on_disk(root))
		return 1;
	snprintf(opts, sizeof(opts), "-t ext4 -N 70000 %s %s%s", fl->mkfs_opts,
		 fl->kernel ? "" : "-d ", fl->kernel ? "" : root);
	if (t_make_image(img, "256M", opts))
		return 1;
	if (fl->unsigned_hash &&
	    t_sh("debugfs -w -R 'ssv flags 2' %s >/dev/null 2>&1", img))
		return 1;
	if (fl->hash_alg && t_sh("debugfs -w -R 'ssv def_hash_version %s' %s >/dev/null 2>&1",
				fl->hash_alg, img))
		return 1;
	if (fl->kernel) {
		if (t_sh("mount -o loop %s %s 2>/dev/null", img, root)) {
			rmdir(root);
			return 77;
		}
		err = make_tree_on_disk(root);
		/* Always unmount, even when populating failed. */
		if (t_sh("umount %s", root) || err)
			return 1;
		rmdir(root);
		return 0;
	}
	t_sh("rm -rf %s", root);
	/* mke2fs -d builds linear directories; e2fsck -D indexes them. */
	err = t_sh("e2fsck -fyD %s >/dev/null 2>&1", img);
	return err == 0 || err == 1 ? 0 : 1;
}

static void test_image(const char *tmp, const struct flavour *fl, size_t big)
{
	char img[512];
	uext4_fs *fs;
	struct uext4_opts o = { .read_only = 1 };
	int err;

	if (!fl->kernel && big > 5000)
		big = 5000;
	/* 1 KiB blocks: shorter names, or 50,000 entries overflow a 2-level
	 * htree (the kernel then says ENOSPC). */
	build_trees(big, strstr(fl->mkfs_opts, "1024") ? 48 : 255, fl->inline_tree);
	snprintf(img, sizeof(img), "%s/%s.img", tmp, fl->name);
	printf("image %s: mke2fs %s, hash %s%s, %s, %d dirs\n", fl->name, fl->mkfs_opts,
	       fl->hash_alg ? fl->hash_alg : "default", fl->unsigned_hash ? " unsigned" : "",
	       fl->kernel ? "kernel-populated" : "mke2fs -d + e2fsck -D", ntdirs);
	err = make_flavour_image(tmp, fl, img);
	if (err == 77) {
		printf("image %s: SKIP (no loop mount on this machine)\n", fl->name);
		unlink(img);
		return;
	}
	CHECK_ERR(err == 0, "building image %s", fl->name);
	if (err)
		return;
	err = t_sh("e2fsck -fn %s >/dev/null 2>&1", img);
	CHECK_ERR(err == 0, "e2fsck -fn %s not clean: %d", fl->name, err);
	fflush(stdout);
	if (!fl->inline_tree) {
		t_sh("debugfs -R 'htree /big' %s 2>/dev/null | grep -m1 -E 'Indirect levels' "
		    "| sed 's/^/  \\/big: /'", img);
		t_sh("debugfs -R 'htree /collide' %s 2>/dev/null | grep -m1 -E 'Hash Version' "
		    "| sed 's/^/  \\/collide: /'", img);
	} else {
		t_sh("debugfs -R 'stat /in2' %s 2>/dev/null | grep -E 'Flags|Size of inline' "
		    "| sed 's/^/  \\/in2: /'", img);
	}
	err = uext4_mount(img, &o, &fs);
	CHECK_ERR(err == 0, "mount %s: %d", fl->name, err);
	if (err)
		return;
	CHECK_ERR(fs->hash_unsigned == fl->unsigned_hash, "%s: hash_unsigned", fl->name);
	for (int i = 0; i < ntdirs; i++)
		check_dir(fs, &tdirs[i], fl->name);
	for (int i = 0; i < ntdirs && fl == &flavours[0]; i++)
		if (strcmp(tdirs[i].path, "/big") == 0)
			test_threads(fs, &tdirs[i], fl->name);
	uext4_umount(fs);
	err = t_sh("e2fsck -fn %s >/dev/null 2>&1", img);
	CHECK_ERR(err == 0, "e2fsck -fn %s after the test: %d", fl->name, err);
	if (t_failures && getenv("UNIT_DIR_KEEP"))
		printf("image %s kept for debugging\n", img);
	else
		unlink(img);
	printf("image %s: %s\n", fl->name, t_failures ? "failures so far" : "ok");
}

int main(void)
{
	const char *b = getenv("UNIT_DIR_BIG");
	size_t big = b ? strtoul(b, NULL, 10) : DEFAULT_BIG;
	char tmp[256];

	rng_state = t_seed("unit_dir", "UNIT_DIR_SEED");
	printf("unit_dir: big dir %zu entries\n", big);
	t_need_tools("mke2fs debugfs e2fsck");
	t_tmpdir(tmp, sizeof(tmp), "unit_dir");
	test_dirhash_vectors(tmp);
	test_corruption(tmp);
	for (size_t i = 0; i < sizeof(flavours) / sizeof(flavours[0]); i++)
		test_image(tmp, &flavours[i], big);
	if (!(t_failures && getenv("UNIT_DIR_KEEP")))
		t_sh("rm -rf %s", tmp);
	printf("unit_dir: %s (%d failures)\n", t_failures ? "FAIL" : "PASS", t_failures);
	return t_failures ? 1 : 0;
}
