/*
 * t.h - helpers shared by the C test programs.
 *
 *  - check macros (T_CHECK, CHECK, CHECK_ERR) that print what failed and
 *    count failures (atomically: threads check too);
 *  - t_sh()/t_sh_out(): run a shell command; t_make_image(): mke2fs;
 *    t_fsck_clean(): e2fsck -fn must find nothing; t_can_loop(): whether
 *    the kernel's ext4 can be asked (root and loop devices);
 *  - t_rnd(): the random numbers, from a seed t_seed() takes from the
 *    environment or the clock and prints, so a failure can be replayed;
 *  - a content hash of file data that does not depend on how the data was
 *    read (fixed 4 KiB logical blocks, all-zero blocks hashed cheaply so a
 *    5 GiB sparse file costs little);
 *  - the canonical one-line description of a path that walk.c prints and
 *    threads.c digests, so both agree on what "the same tree" means;
 *  - t_run_e2fsck(): the oracle run on an image, without a shell.
 *
 * Everything is static so each test program is a single translation unit.
 */
#ifndef UEXT4_TESTS_T_H
#define UEXT4_TESTS_T_H

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------------ checks */

/* Atomic: worker threads of the concurrency tests check too. */
static _Atomic int t_failures __attribute__((unused));

/* Count a failure and print where it is; the caller prints the rest. The
 * test's own output so far goes first, so the log reads in order. */
static inline void t_fail_at(const char *file, int line, const char *cond)
{
	t_failures++;
	fflush(stdout);
	fprintf(stderr, "FAIL %s:%d: %s: ", file, line, cond);
}

#define T_CHECK(cond, ...) do {                                          \
	if (!(cond)) {                                                   \
		t_fail_at(__FILE__, __LINE__, #cond);                    \
		fprintf(stderr, __VA_ARGS__);                            \
		fputc('\n', stderr);                                     \
	}                                                                \
} while (0)
#define CHECK(cond, ...) T_CHECK(cond, __VA_ARGS__)

#ifdef UEXT4_H
/* CHECK of a library call: the message ends with the library's last error. */
#define CHECK_ERR(cond, ...) do {                                        \
	if (!(cond)) {                                                   \
		t_fail_at(__FILE__, __LINE__, #cond);                    \
		fprintf(stderr, __VA_ARGS__);                            \
		fprintf(stderr, " [last error: %s]\n", uext4_last_error()); \
	}                                                                \
} while (0)

/* A library call that should have worked failed with err (negative errno or
 * errno): count it and say what, why and the library's message. */
static inline void t_fail_call(const char *what, int err)
{
	t_failures++;
	fflush(stdout);
	fprintf(stderr, "FAIL %s: %s (%s)\n", what, strerror(err < 0 ? -err : err),
		uext4_last_error());
}
#endif

/* Exit codes understood by tests/run.sh. */
#define T_PASS 0
#define T_FAIL 1
#define T_SKIP 77

/* e2fsck -fn img, its output to log: its exit status (0: clean), or a
 * negative errno when it could not be started. */
static inline int t_run_e2fsck(const char *img, const char *log)
{
	posix_spawn_file_actions_t fa;
	char *argv[] = { "e2fsck", "-fn", (char *)img, NULL };
	pid_t pid;
	int st, r;

	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 1, log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	posix_spawn_file_actions_adddup2(&fa, 1, 2);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	r = posix_spawnp(&pid, "e2fsck", &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (r)
		return -r;
	while (waitpid(pid, &st, 0) < 0)
		;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* ------------------------------------------------------------ commands */

/* Run a shell command built from fmt: its exit status, 128 + the signal
 * that killed it, or -1 when no shell could be started. */
__attribute__((format(printf, 1, 2)))
static inline int t_sh(const char *fmt, ...)
{
	char cmd[4096];
	va_list ap;
	int st;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	fflush(NULL);   /* the command's output goes after ours */
	st = system(cmd);
	if (st == -1)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* mke2fs -q -F OPTS IMG SIZE, quietly: 0, or its status after counting a
 * failure and saying what failed. */
static inline int t_make_image(const char *img, const char *size, const char *opts)
{
	int rc = t_sh("mke2fs -q -F %s '%s' %s > /dev/null 2>&1", opts, img, size);

	if (rc) {
		t_failures++;
		fflush(stdout);
		fprintf(stderr, "FAIL: mke2fs %s %s %s: status %d\n", opts, img, size, rc);
	}
	return rc;
}

/* e2fsck -fn must find nothing: true if so; otherwise a failure is counted
 * and the start of e2fsck's report printed. */
static inline int t_fsck_clean(const char *img)
{
	int rc = t_sh("e2fsck -fn '%s' > '%s.fsck' 2>&1", img, img);

	if (rc == 0)
		return 1;
	t_failures++;
	fflush(stdout);
	fprintf(stderr, "FAIL: e2fsck -fn %s is not clean (status %d):\n", img, rc);
	t_sh("head -30 '%s.fsck' >&2", img);
	return 0;
}

/* Skip the test (T_SKIP, naming the first one missing) unless each of the
 * space-separated tools is installed. */
static inline void t_need_tools(const char *tools)
{
	char buf[256], *save, *t;

	snprintf(buf, sizeof(buf), "%s", tools);
	for (t = strtok_r(buf, " ", &save); t; t = strtok_r(NULL, " ", &save)) {
		if (t_sh("command -v %s > /dev/null", t) != 0) {
			printf("SKIP: %s missing\n", t);
			exit(T_SKIP);
		}
	}
}

/* A new directory $TMPDIR/NAME.XXXXXX (or under /tmp) in buf; the test fails
 * without one. */
static inline void t_tmpdir(char *buf, size_t len, const char *name)
{
	const char *tmp = getenv("TMPDIR");

	snprintf(buf, len, "%s/%s.XXXXXX", tmp && *tmp ? tmp : "/tmp", name);
	if (!mkdtemp(buf)) {
		fprintf(stderr, "FAIL: mkdtemp %s: %s\n", buf, strerror(errno));
		exit(T_FAIL);
	}
}

/* Whether the kernel's ext4 can be compared with: root, loop devices, and
 * UEXT4_NO_LOOP unset or 0 (as lib.sh's can_loop). */
static inline int t_can_loop(void)
{
	const char *no = getenv("UEXT4_NO_LOOP");

	return geteuid() == 0 && (!no || !strcmp(no, "0")) &&
	       access("/dev/loop-control", F_OK) == 0;
}

/* ------------------------------------------------------------ random */

/* xorshift64*: fast, and the same sequence from a seed on every machine.
 * The state must not be 0 (t_seed never returns 0). */
static inline uint64_t t_rnd(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 0x2545F4914F6CDD1DULL;
}

/* A number in [0, n), 0 when n is 0. */
static inline uint64_t t_rnd_below(uint64_t *s, uint64_t n)
{
	return n ? t_rnd(s) % n : 0;
}

/* The seed of a run: $var if set, else $SEED, else from the clock and the
 * process id. Printed as "NAME: seed N (VAR=N repeats)". Never 0. */
static inline uint64_t t_seed(const char *name, const char *var)
{
	const char *env = getenv(var);
	uint64_t seed;

	if (!env)
		env = getenv("SEED");
	seed = env ? strtoull(env, NULL, 0)
		   : ((uint64_t)time(NULL) * 2654435761u) ^ ((uint64_t)getpid() << 16);
	if (!seed)
		seed = 1;
	printf("%s: seed %" PRIu64 " (%s=%" PRIu64 " repeats)\n", name, seed, var, seed);
	return seed;
}

/* A field of /proc/self/status in KiB ("VmHWM", "VmRSS"), or -1. */
static inline long t_status_kib(const char *field)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256], fmt[32];
	long kib = -1;

	if (!f)
		return -1;
	snprintf(fmt, sizeof fmt, "%s: %%ld kB", field);
	while (fgets(line, sizeof line, f))
		if (sscanf(line, fmt, &kib) == 1)
			break;
	fclose(f);
	return kib;
}

static inline void *t_xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);
	if (!p) {
		fprintf(stderr, "out of memory (%zu bytes)\n", n);
		exit(T_FAIL);
	}
	return p;
}

static inline void *t_xrealloc(void *p, size_t n)
{
	p = realloc(p, n ? n : 1);
	if (!p) {
		fprintf(stderr, "out of memory (%zu bytes)\n", n);
		exit(T_FAIL);
	}
	return p;
}

/* What a command prints on stdout, in a malloc'd string ("" when it could
 * not be started). */
static inline char *t_sh_out(const char *cmd)
{
	FILE *p = popen(cmd, "r");
	size_t len = 0, cap = 1 << 16, got;
	char *s = t_xmalloc(cap);

	s[0] = 0;
	if (!p)
		return s;
	while ((got = fread(s + len, 1, cap - len - 1, p)) > 0) {
		len += got;
		if (cap - len < 4096)
			s = t_xrealloc(s, cap *= 2);
	}
	s[len] = 0;
	pclose(p);
	return s;
}

/* ------------------------------------------------------------ hashing */

/* The hash loops only touch buffers the test owns; sanitizing them makes the
 * ASan/UBSan runs hash 5 GiB sparse files tens of times slower. */
#if defined(__clang__) || __GNUC__ >= 8
#define T_NO_SANITIZE __attribute__((no_sanitize("address", "undefined", "thread")))
#else
#define T_NO_SANITIZE
#endif

#define T_FNV_INIT 0xcbf29ce484222325ULL
#define T_FNV_PRIME 0x100000001b3ULL

/* FNV-1a over bytes: for names and xattr values. */
T_NO_SANITIZE static inline uint64_t t_fnv(uint64_t h, const void *p, size_t n)
{
	const unsigned char *b = p;
	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * T_FNV_PRIME;
	return h;
}

/* Final avalanche so nearby inputs give unrelated digests (splitmix64). */
static inline uint64_t t_mix(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ULL;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

/*
 * Data hash in 4096-byte logical blocks.  Feed any number of bytes in any
 * pieces; the result only depends on the byte sequence.  A block of zeros
 * is folded in with one multiply (holes are common and large); other
 * blocks 8 bytes per multiply.
 */
#define T_HBLK 4096
struct t_datahash {
	uint64_t h;
	uint64_t len;
	size_t fill;
	unsigned char blk[T_HBLK];
};

static inline void t_datahash_init(struct t_datahash *d)
{
	d->h = T_FNV_INIT;
	d->len = 0;
	d->fill = 0;
}

T_NO_SANITIZE static inline int t_all_zero(const unsigned char *p, size_t n)
{
	const uint64_t *w = (const uint64_t *)(const void *)p;
	for (size_t i = 0; i < n / 8; i++)
		if (w[i])
			return 0;
	for (size_t i = n / 8 * 8; i < n; i++)
		if (p[i])
			return 0;
	return 1;
}

T_NO_SANITIZE static inline uint64_t t_hash_block(uint64_t h, const unsigned char *p, size_t n)
{
	if (n == T_HBLK && t_all_zero(p, n))
		return (h ^ 0x5a5a5a5a5a5a5a5aULL) * T_FNV_PRIME;
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		uint64_t w;
		__builtin_memcpy(&w, p + i, 8);
		h = (h ^ w) * T_FNV_PRIME;
	}
	return t_fnv(h, p + i, n - i);
}

static inline void t_datahash_update(struct t_datahash *d, const void *buf, size_t n)
{
	const unsigned char *p = buf;
	d->len += n;
	if (d->fill) {
		size_t take = T_HBLK - d->fill < n ? T_HBLK - d->fill : n;
		memcpy(d->blk + d->fill, p, take);
		d->fill += take;
		p += take;
		n -= take;
		if (d->fill < T_HBLK)
			return;
		d->h = t_hash_block(d->h, d->blk, T_HBLK);
		d->fill = 0;
	}
	for (; n >= T_HBLK; p += T_HBLK, n -= T_HBLK)
		d->h = t_hash_block(d->h, p, T_HBLK);
	memcpy(d->blk, p, n);
	d->fill = n;
}

static inline uint64_t t_datahash_final(struct t_datahash *d)
{
	if (d->fill)
		d->h = t_hash_block(d->h, d->blk, d->fill);
	d->fill = 0;
	return t_mix(d->h ^ d->len);
}

/* ------------------------------------------------------------ canonical lines */

/* Fields of a canonical line; walk's --no-FIELD options clear them. */
enum {
	TF_INO = 1 << 0, TF_MODE = 1 << 1, TF_NLINK = 1 << 2, TF_UID = 1 << 3,
	TF_GID = 1 << 4, TF_SIZE = 1 << 5, TF_DIRSIZE = 1 << 6, TF_BLOCKS = 1 << 7,
	TF_MTIME = 1 << 8, TF_CTIME = 1 << 9, TF_ATIME = 1 << 10, TF_NSEC = 1 << 11,
	TF_RDEV = 1 << 12, TF_LINK = 1 << 13, TF_DATA = 1 << 14, TF_XATTR = 1 << 15,
	TF_DIRNLINK = 1 << 16,
	TF_ALL = (1 << 17) - 1,
};

static const struct { const char *name; unsigned bit; } t_field_names[] = {
	{ "ino", TF_INO }, { "mode", TF_MODE }, { "nlink", TF_NLINK },
	{ "uid", TF_UID }, { "gid", TF_GID }, { "size", TF_SIZE },
	{ "dirsize", TF_DIRSIZE }, { "blocks", TF_BLOCKS }, { "mtime", TF_MTIME },
	{ "ctime", TF_CTIME }, { "atime", TF_ATIME }, { "nsec", TF_NSEC },
	{ "rdev", TF_RDEV }, { "link", TF_LINK }, { "data", TF_DATA },
	{ "xattr", TF_XATTR }, { "dirnlink", TF_DIRNLINK },
};

/* What a backend learnt about one path. */
struct t_attr {
	uint64_t ino;
	uint32_t mode, nlink, uid, gid;
	uint64_t size, blocks;
	unsigned rdev_major, rdev_minor;
	struct timespec mtime, ctime, atime;
	char *link;             /* symlink target (malloc'd, may hold any byte) */
	size_t link_len;
	int have_data;
	uint64_t data_hash;
	char *xattrs;           /* "name:hash;name:hash" sorted, malloc'd, or NULL */
	char err[128];          /* "" or what failed for this path */
};

#ifdef UEXT4_H
/* The stat fields of a canonical line, from the library's view. */
static inline void t_attr_from_stat(const struct uext4_stat *st, struct t_attr *a)
{
	a->ino = st->ino;
	a->mode = st->mode;
	a->nlink = st->nlink;
	a->uid = st->uid;
	a->gid = st->gid;
	a->size = st->size;
	a->blocks = st->blocks;
	a->rdev_major = major((dev_t)st->rdev);
	a->rdev_minor = minor((dev_t)st->rdev);
	a->mtime = st->mtime;
	a->ctime = st->ctime;
	a->atime = st->atime;
}
#endif

/* A growing string. */
struct t_buf {
	char *s;
	size_t len, cap;
};

static inline void t_buf_add(struct t_buf *b, const char *s, size_t n)
{
	if (b->len + n + 1 > b->cap) {
		b->cap = (b->len + n + 1) * 2;
		b->s = t_xrealloc(b->s, b->cap);
	}
	memcpy(b->s + b->len, s, n);
	b->len += n;
	b->s[b->len] = 0;
}

__attribute__((format(printf, 2, 3)))
static inline void t_buf_printf(struct t_buf *b, const char *fmt, ...)
{
	char tmp[256];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n < sizeof(tmp)) {
		t_buf_add(b, tmp, (size_t)n);
		return;
	}
	char *big = t_xmalloc((size_t)n + 1);
	va_start(ap, fmt);
	vsnprintf(big, (size_t)n + 1, fmt, ap);
	va_end(ap);
	t_buf_add(b, big, (size_t)n);
	free(big);
}

/* Bytes outside printable ASCII, space, '\\', ':', ';' and '=' become \xHH so
 * a line splits unambiguously and sorts by path. */
static inline void t_buf_escape(struct t_buf *b, const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c <= 0x20 || c >= 0x7f || c == '\\' || c == ':' || c == ';' || c == '=')
			t_buf_printf(b, "\\x%02x", c);
		else
			t_buf_add(b, (const char *)&c, 1);
	}
}

static inline char t_type_char(uint32_t mode)
{
	switch (mode & S_IFMT) {
	case S_IFREG: return 'f';
	case S_IFDIR: return 'd';
	case S_IFLNK: return 'l';
	case S_IFCHR: return 'c';
	case S_IFBLK: return 'b';
	case S_IFIFO: return 'p';
	case S_IFSOCK: return 's';
	default: return '?';
	}
}

static inline void t_buf_time(struct t_buf *b, const char *key,
			      const struct timespec *ts, unsigned fields)
{
	if (fields & TF_NSEC)
		t_buf_printf(b, " %s=%lld.%09ld", key, (long long)ts->tv_sec, ts->tv_nsec);
	else
		t_buf_printf(b, " %s=%lld", key, (long long)ts->tv_sec);
}

/* Append the canonical line (with '\n') for path to b. */
static inline void t_format_line(struct t_buf *b, const char *path, size_t pathlen,
				 const struct t_attr *a, unsigned fields)
{
	int is_dir = S_ISDIR(a->mode);
	t_buf_escape(b, path, pathlen);
	if (fields & TF_INO)
		t_buf_printf(b, " ino=%" PRIu64, a->ino);
	t_buf_printf(b, " type=%c", t_type_char(a->mode));
	if (fields & TF_MODE)
		t_buf_printf(b, " mode=%04o", (unsigned)(a->mode & 07777));
	if ((fields & TF_NLINK) && (!is_dir || (fields & TF_DIRNLINK)))
		t_buf_printf(b, " nlink=%u", (unsigned)a->nlink);
	if (fields & TF_UID)
		t_buf_printf(b, " uid=%u", (unsigned)a->uid);
	if (fields & TF_GID)
		t_buf_printf(b, " gid=%u", (unsigned)a->gid);
	if ((fields & TF_SIZE) && (!is_dir || (fields & TF_DIRSIZE)))
		t_buf_printf(b, " size=%" PRIu64, a->size);
	if (fields & TF_BLOCKS)
		t_buf_printf(b, " blocks=%" PRIu64, a->blocks);
	if (fields & TF_MTIME)
		t_buf_time(b, "mtime", &a->mtime, fields);
	if (fields & TF_CTIME)
		t_buf_time(b, "ctime", &a->ctime, fields);
	if (fields & TF_ATIME)
		t_buf_time(b, "atime", &a->atime, fields);
	if ((fields & TF_RDEV) && (S_ISCHR(a->mode) || S_ISBLK(a->mode)))
		t_buf_printf(b, " rdev=%u:%u", a->rdev_major, a->rdev_minor);
	if ((fields & TF_LINK) && S_ISLNK(a->mode) && a->link) {
		t_buf_add(b, " link=", 6);
		t_buf_escape(b, a->link, a->link_len);
	}
	if ((fields & TF_DATA) && a->have_data)
		t_buf_printf(b, " data=%016" PRIx64, a->data_hash);
	if (fields & TF_XATTR)
		t_buf_printf(b, " xattr=%s", a->xattrs && a->xattrs[0] ? a->xattrs : "-");
	if (a->err[0])
		t_buf_printf(b, " err=%s", a->err);
	t_buf_add(b, "\n", 1);
}

/* ------------------------------------------------------------ xattr lists */

static inline int t_cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/*
 * Turn a NUL-separated name list into "name:hash;..." sorted by name.
 * get(ctx, name, &val) returns the value length (val malloc'd) or a
 * negative errno; a failing name is shown as name:E<errno>.
 */
typedef long (*t_getx_fn)(void *ctx, const char *name, char **val);

static inline char *t_xattr_summary(const char *list, size_t len, t_getx_fn get, void *ctx)
{
	size_t n = 0;
	for (size_t i = 0; i < len; i += strlen(list + i) + 1)
		n++;
	char **names = t_xmalloc(n * sizeof(*names));
	n = 0;
	for (size_t i = 0; i < len; i += strlen(list + i) + 1)
		if (list[i])
			names[n++] = (char *)list + i;
	qsort(names, n, sizeof(*names), t_cmp_str);
	struct t_buf b = { 0 };
	t_buf_add(&b, "", 0);
	for (size_t i = 0; i < n; i++) {
		char *val = NULL;
		long vl = get(ctx, names[i], &val);
		if (i)
			t_buf_add(&b, ";", 1);
		t_buf_escape(&b, names[i], strlen(names[i]));
		if (vl < 0)
			t_buf_printf(&b, ":E%ld", -vl);
		else
			t_buf_printf(&b, ":%016" PRIx64, t_mix(t_fnv(T_FNV_INIT, val, (size_t)vl) ^ (uint64_t)vl));
		free(val);
	}
	free(names);
	return b.s;
}

#endif
