/*
 * threads.c - many threads reading one mounted image at once.
 *
 *   threads IMAGE [SEED]
 *
 * One thread first walks the whole tree (stat, readdir, read all data,
 * listxattr/getxattr, readlink) and computes a digest of the canonical
 * lines (t.h) of every path.  Then NTHREADS threads share the same
 * uext4_fs and each walks the tree in its own random order, reading
 * directories in random-sized pieces resumed by cookie and cross-checking
 * readdir against lookup.  Every thread must get the same digest as the
 * single thread.  The digest is a sum of per-path hashes, so it does not
 * depend on order.  Run under TSan by tests/run.sh (via threads.sh).
 */
#include <pthread.h>
#include <sys/time.h>

#include "uext4.h"
#include "t.h"

#define NTHREADS 8
#define READ_CHUNK (256 * 1024)

static uext4_fs *g_fs;

struct walker {
	int id;
	uint64_t rng;           /* xorshift state; 0 = no shuffling */
	uint64_t digest;
	uint64_t paths;
	uint64_t errors;
	char *buf;              /* READ_CHUNK bytes */
};

static uint64_t rnd(struct walker *w)
{
	return t_rnd(&w->rng);
}

static void report(struct walker *w, const char *op, const char *path, long err)
{
	w->errors++;
	fprintf(stderr, "thread %d: %s %s: %s (%s)\n", w->id, op, path,
		strerror((int)-err), uext4_last_error());
}

static long getx(void *ctx, const char *name, char **val)
{
	uint64_t ino = *(uint64_t *)ctx;
	ssize_t n = uext4_getxattr(g_fs, ino, name, NULL, 0);
	if (n < 0)
		return (long)n;
	*val = t_xmalloc((size_t)n);
	return (long)uext4_getxattr(g_fs, ino, name, *val, (size_t)n);
}

static void read_attr(struct walker *w, const struct uext4_stat *st, const char *path,
		      struct t_attr *a)
{
	t_attr_from_stat(st, a);
	if (S_ISLNK(st->mode)) {
		a->link = t_xmalloc(8192);
		ssize_t n = uext4_readlink(g_fs, st->ino, a->link, 8192);
		if (n < 0) {
			report(w, "readlink", path, (long)n);
			n = 0;
		}
		a->link_len = (size_t)n;
	}
	if (S_ISREG(st->mode)) {
		uext4_file *f;
		int r = uext4_open(g_fs, st->ino, 0, &f);
		if (r < 0) {
			report(w, "open", path, r);
		} else {
			struct t_datahash h;
			t_datahash_init(&h);
			uint64_t off = 0;
			ssize_t n;
			while ((n = uext4_pread(f, w->buf, READ_CHUNK, off)) > 0) {
				t_datahash_update(&h, w->buf, (size_t)n);
				off += (uint64_t)n;
			}
			if (n < 0)
				report(w, "pread", path, (long)n);
			a->have_data = 1;
			a->data_hash = t_datahash_final(&h);
			uext4_release(f);
		}
	}
	ssize_t n = uext4_listxattr(g_fs, st->ino, NULL, 0);
	if (n >= 0) {
		char *list = t_xmalloc((size_t)n + 1);
		n = uext4_listxattr(g_fs, st->ino, list, (size_t)n);
		if (n >= 0) {
			uint64_t ino = st->ino;
			a->xattrs = t_xattr_summary(list, (size_t)n, getx, &ino);
		}
		free(list);
	}
	if (n < 0)
		report(w, "listxattr", path, (long)n);
}

struct dent {
	char *name;
	size_t len;
	uint64_t ino;
};

struct dent_list {
	struct dent *v;
	size_t n, cap;
	size_t piece;           /* stop after this many entries in one call */
	size_t taken;
	uint64_t resume;        /* cookie after the last entry taken */
};

static int collect(void *ctx, const char *name, size_t namelen, uint64_t ino,
		   unsigned dtype, uint64_t next_cookie)
{
	struct dent_list *l = ctx;
	l->resume = next_cookie;
	l->taken++;
	if (!((namelen == 1 && name[0] == '.') || (namelen == 2 && !memcmp(name, "..", 2)))) {
		if (l->n == l->cap) {
			l->cap = l->cap ? l->cap * 2 : 64;
			l->v = t_xrealloc(l->v, l->cap * sizeof(*l->v));
		}
		l->v[l->n].name = t_xmalloc(namelen + 1);
		memcpy(l->v[l->n].name, name, namelen);
		l->v[l->n].name[namelen] = 0;
		l->v[l->n].len = namelen;
		l->v[l->n].ino = ino;
		l->n++;
	}
	return l->piece && l->taken >= l->piece;
}

/* Read a whole directory, in random-sized pieces when shuffling. */
static int read_dir(struct walker *w, uint64_t ino, const char *path, struct dent_list *l)
{
	uint64_t cookie = 0;
	for (;;) {
		l->piece = w->rng ? 1 + rnd(w) % 50 : 0;
		l->taken = 0;
		int r = uext4_readdir(g_fs, ino, cookie, collect, l);
		if (r < 0) {
			report(w, "readdir", path, r);
			return r;
		}
		if (!l->piece || l->taken < l->piece)
			return 0;
		cookie = l->resume;
	}
}

static void walk(struct walker *w, uint64_t ino, const char *path)
{
	struct uext4_stat st;
	struct t_attr a = { 0 };
	int r = uext4_getattr(g_fs, ino, &st);
	if (r < 0) {
		report(w, "getattr", path, r);
		return;
	}
	read_attr(w, &st, path, &a);
	struct t_buf b = { 0 };
	t_format_line(&b, path, strlen(path), &a, TF_ALL);
	w->digest += t_mix(t_fnv(T_FNV_INIT, b.s, b.len));
	w->paths++;
	free(b.s);
	free(a.link);
	free(a.xattrs);
	if (!S_ISDIR(st.mode))
		return;
	struct dent_list l = { 0 };
	if (read_dir(w, ino, path, &l) < 0)
		w->digest += 1;  /* make the digest differ */
	for (size_t i = l.n; w->rng && i > 1; i--) {
		size_t j = rnd(w) % i;
		struct dent t = l.v[i - 1];
		l.v[i - 1] = l.v[j];
		l.v[j] = t;
	}
	for (size_t i = 0; i < l.n; i++) {
		size_t pl = strlen(path);
		char *child = t_xmalloc(pl + 1 + l.v[i].len + 1);
		memcpy(child, path, pl);
		child[pl] = '/';
		memcpy(child + pl + 1, l.v[i].name, l.v[i].len + 1);
		if (w->rng && rnd(w) % 8 == 0) {
			struct uext4_stat ls;
			r = uext4_lookup(g_fs, ino, l.v[i].name, &ls);
			if (r < 0)
				report(w, "lookup", child, r);
			else if (ls.ino != l.v[i].ino) {
				w->errors++;
				fprintf(stderr, "thread %d: lookup %s gives inode %llu, readdir %llu\n",
					w->id, child, (unsigned long long)ls.ino,
					(unsigned long long)l.v[i].ino);
			}
		}
		walk(w, l.v[i].ino, child);
		free(child);
		free(l.v[i].name);
	}
	free(l.v);
}

static void *thread_main(void *arg)
{
	struct walker *w = arg;
	walk(w, UEXT4_ROOT_INO, ".");
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc < 2 || argc > 3) {
		fprintf(stderr, "usage: threads IMAGE [SEED]\n");
		return 2;
	}
	uint64_t seed;
	if (argc == 3) {
		seed = strtoull(argv[2], NULL, 0);
	} else {
		struct timeval tv;
		gettimeofday(&tv, NULL);
		seed = (uint64_t)tv.tv_sec * 1000003u ^ (uint64_t)tv.tv_usec;
	}
	printf("threads: image %s, %d threads, seed %llu (rerun: threads IMAGE %llu)\n",
	       argv[1], NTHREADS, (unsigned long long)seed, (unsigned long long)seed);

	struct uext4_opts o = { .read_only = 1 };
	int r = uext4_mount(argv[1], &o, &g_fs);
	if (r < 0) {
		printf("FAIL: mount %s: %s (%s)\n", argv[1], strerror(-r), uext4_last_error());
		return T_FAIL;
	}
	struct walker single = { .id = 0, .buf = t_xmalloc(READ_CHUNK) };
	walk(&single, UEXT4_ROOT_INO, ".");
	printf("single thread: %llu paths, digest %016llx, %llu errors\n",
	       (unsigned long long)single.paths, (unsigned long long)single.digest,
	       (unsigned long long)single.errors);
	T_CHECK(single.errors == 0, "single-thread walk had errors");
	T_CHECK(single.paths > 1, "tree has only %llu paths", (unsigned long long)single.paths);

	struct walker w[NTHREADS];
	pthread_t tid[NTHREADS];
	for (int i = 0; i < NTHREADS; i++) {
		w[i] = (struct walker){ .id = i + 1, .buf = t_xmalloc(READ_CHUNK) };
		w[i].rng = t_mix(seed + (uint64_t)i) | 1;
		r = pthread_create(&tid[i], NULL, thread_main, &w[i]);
		if (r) {
			printf("FAIL: pthread_create: %s\n", strerror(r));
			return T_FAIL;
		}
	}
	for (int i = 0; i < NTHREADS; i++) {
		pthread_join(tid[i], NULL);
		printf("thread %d: %llu paths, digest %016llx, %llu errors\n", w[i].id,
		       (unsigned long long)w[i].paths, (unsigned long long)w[i].digest,
		       (unsigned long long)w[i].errors);
		T_CHECK(w[i].errors == 0, "thread %d had errors", w[i].id);
		T_CHECK(w[i].paths == single.paths && w[i].digest == single.digest,
			"thread %d saw a different tree than the single thread", w[i].id);
		free(w[i].buf);
	}
	free(single.buf);
	r = uext4_umount(g_fs);
	T_CHECK(r == 0, "umount: %s", uext4_last_error());
	printf("%s\n", t_failures ? "FAIL" : "all threads agree");
	return t_failures ? T_FAIL : T_PASS;
}
