/*
 * leaf_hint.c - the htree leaf hints (dir.c) against a model.
 *
 *   leaf_hint IMG_A IMG_B SEED OPS
 *
 * A create consults its leaf's hint (a Bloom filter of the names, the last
 * entry, a bound on the earlier entries' slack) instead of scanning the
 * leaf.  A wrong hint shows as a create that succeeds over an existing
 * name, a lost or overwritten entry, or an entry placed elsewhere than the
 * first fit a full scan picks.  So, in one htree directory, OPS random
 * operations (exclusive creates of new and of existing names, unlinks,
 * renames within the directory, links, re-creates of removed names; names
 * of 1..80 bytes so that slack varies) run against a model of the names:
 * every result must match the model (EEXIST exactly when the name is
 * there, ENOENT exactly when not), and afterwards every model name is
 * looked up and the listing has exactly the model's size.  The same
 * sequence runs on IMG_A with the default cache and on IMG_B with a
 * 256 KiB cache, where leaves keep losing their buffers (and hints) and
 * are scanned again: with fixed times both images must hold the same
 * directory bytes (the script compares them, and runs e2fsck -fn).
 * Prints the seed.  Exit 0 pass, 1 fail.
 */
#include "uext4.h"
#include "t.h"

#include <stdbool.h>

#define MAXN 4096
#define NAME_MAX_LEN 80

struct model {
	char name[MAXN][NAME_MAX_LEN + 1];
	bool present[MAXN];
	unsigned count;
};

static uint64_t rnd_state;

static unsigned rnd(unsigned n)
{
	return (unsigned)t_rnd_below(&rnd_state, n);
}

/* Name i: a fixed random length (1..80) and content from i alone. */
static void make_name(char *out, unsigned i)
{
	uint64_t s = (uint64_t)i * 0x9E3779B97F4A7C15ull + 1;
	unsigned len = 1 + (unsigned)((s >> 33) % NAME_MAX_LEN);
	int n = snprintf(out, NAME_MAX_LEN + 1, "%x-", i);

	for (unsigned k = (unsigned)n; k < len; k++) {
		s = s * 6364136223846793005ull + 1442695040888963407ull;
		out[k] = (char)('a' + (s >> 59) % 26);
	}
	out[len > (unsigned)n ? len : (unsigned)n] = '\0';
}

static int count_entry(void *ctx, const char *name, size_t len, uint64_t ino,
		       unsigned type, uint64_t next)
{
	(void)name; (void)ino; (void)type; (void)next;
	if (!(len == 1 && name[0] == '.') && !(len == 2 && name[0] == '.' && name[1] == '.'))
		(*(unsigned *)ctx)++;
	return 0;
}

static void one_op(uext4_fs *fs, uint64_t dir, struct model *m, uint64_t target)
{
	unsigned i = rnd(MAXN), j = rnd(MAXN), op = rnd(10);
	struct uext4_stat st;
	int r;

	if (op < 5) {   /* create: EEXIST exactly when present */
		r = uext4_create(fs, dir, m->name[i], 0644, &st);
		T_CHECK(r == (m->present[i] ? -EEXIST : 0), "create %s: %d, model %d",
			m->name[i], r, m->present[i]);
		if (r == 0) {
			m->present[i] = true;
			m->count++;
		}
	} else if (op < 7) {   /* unlink */
		r = uext4_unlink(fs, dir, m->name[i]);
		T_CHECK(r == (m->present[i] ? 0 : -ENOENT), "unlink %s: %d, model %d",
			m->name[i], r, m->present[i]);
		if (r == 0) {
			m->present[i] = false;
			m->count--;
		}
	} else if (op < 9) {   /* rename i -> j, NOREPLACE */
		if (i == j)
			return;
		r = uext4_rename(fs, dir, m->name[i], dir, m->name[j], UEXT4_RENAME_NOREPLACE);
		T_CHECK(r == (!m->present[i] ? -ENOENT : m->present[j] ? -EEXIST : 0),
			"rename %s -> %s: %d, model %d %d", m->name[i], m->name[j], r,
			m->present[i], m->present[j]);
		if (r == 0) {
			m->present[i] = false;
			m->present[j] = true;
		}
	} else {   /* a link to the target file */
		r = uext4_link(fs, target, dir, m->name[i], &st);
		T_CHECK(r == (m->present[i] ? -EEXIST : 0), "link %s: %d, model %d",
			m->name[i], r, m->present[i]);
		if (r == 0) {
			m->present[i] = true;
			m->count++;
		}
	}
}

static int run(const char *img, uint64_t cache, uint64_t seed, unsigned ops, struct model *m)
{
	struct uext4_opts o = { .cache_bytes = cache, .use_fixed_time = 1,
				.fixed_time = 1700000000, .no_name_cache = 1 };
	struct uext4_stat st;
	uext4_fs *fs;
	uint64_t dir, target;
	unsigned listed = 0;
	int r;

	memset(m, 0, sizeof(*m));
	for (unsigned i = 0; i < MAXN; i++)
		make_name(m->name[i], i);
	rnd_state = seed | 1;
	if ((r = uext4_mount(img, &o, &fs))) {
		fprintf(stderr, "mount %s: %s\n", img, uext4_last_error());
		return 1;
	}
	T_CHECK(uext4_mkdir(fs, 2, "d", 0755, &st) == 0, "mkdir: %s", uext4_last_error());
	dir = st.ino;
	T_CHECK(uext4_mkdir(fs, 2, "t", 0755, &st) == 0, "mkdir t: %s", uext4_last_error());
	T_CHECK(uext4_create(fs, st.ino, "target", 0644, &st) == 0, "target: %s",
		uext4_last_error());
	target = st.ino;
	/* Fill first, so the directory is an htree of many leaves. */
	for (unsigned i = 0; i < MAXN; i += 2) {
		T_CHECK(uext4_create(fs, dir, m->name[i], 0644, &st) == 0, "fill %s: %s",
			m->name[i], uext4_last_error());
		m->present[i] = true;
		m->count++;
	}
	for (unsigned k = 0; k < ops && t_failures < 20; k++)
		one_op(fs, dir, m, target);
	for (unsigned i = 0; i < MAXN; i++) {
		r = uext4_lookup(fs, dir, m->name[i], &st);
		T_CHECK(r == (m->present[i] ? 0 : -ENOENT), "final lookup %s: %d, model %d",
			m->name[i], r, m->present[i]);
	}
	T_CHECK(uext4_readdir(fs, dir, 0, count_entry, &listed) == 0, "readdir: %s",
		uext4_last_error());
	T_CHECK(listed == m->count, "listed %u names, model %u", listed, m->count);
	T_CHECK(uext4_getattr(fs, dir, &st) == 0 && (st.flags & 0x1000u), "not an htree");
	T_CHECK(uext4_umount(fs) == 0, "umount: %s", uext4_last_error());
	return t_failures ? 1 : 0;
}

int main(int argc, char **argv)
{
	static struct model ma, mb;
	uint64_t seed;
	unsigned ops;

	if (argc != 5) {
		fprintf(stderr, "usage: leaf_hint IMG_A IMG_B SEED OPS\n");
		return 2;
	}
	seed = strtoull(argv[3], NULL, 0);
	ops = (unsigned)strtoul(argv[4], NULL, 0);
	printf("seed=%llu ops=%u\n", (unsigned long long)seed, ops);
	if (run(argv[1], 0, seed, ops, &ma) || run(argv[2], 256 << 10, seed, ops, &mb))
		return T_FAIL;
	T_CHECK(memcmp(ma.present, mb.present, sizeof(ma.present)) == 0, "models differ");
	return t_failures ? T_FAIL : T_PASS;
}
