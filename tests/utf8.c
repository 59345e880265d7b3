/* run-in: release asan */
/*
 * utf8.c - the casefold normaliser (src/utf8.c) against e2fsprogs' own.
 *
 * The oracle is e2fsprogs' table and code for encoding utf8-12.1, the ones
 * e2fsck hashes casefolded names with (lib/ext2fs/nls_utf8.c, a copy of the
 * kernel's fs/unicode tables): libext2fs.so.2 is opened at run time and its
 * ext2fs_load_nls_table(EXT4_ENC_UTF8_12_1) gives the functions.  Compared:
 *  - every code point 0..0x10FFFF (surrogates too, encoded as three bytes):
 *    validity, the folded bytes and their length;
 *  - random names of mixed code points (combining marks, ignorables,
 *    Hangul, foldings, astral planes) and raw bytes (stray continuations,
 *    cut sequences, overlong forms), with random output lengths: validity,
 *    folded bytes, and the error when the output does not fit;
 *  - a few facts written out (ß folds to ss, NFC and NFD the same).
 * Skips when the machine has no libext2fs.so.2.
 */
#include "utf8.h"
#include "t.h"

#include <dlfcn.h>

/* e2fsprogs 1.47's lib/ext2fs/ext2fsP.h layout. */
struct nls_table;
struct nls_ops {
	int (*casefold)(const struct nls_table *t, const unsigned char *str, size_t len,
			unsigned char *dest, size_t dlen);
	int (*validate)(const struct nls_table *t, char *s, size_t len, char **pos);
};
struct nls_table {
	int version;
	const struct nls_ops *ops;
};

static const struct nls_table *oracle;

#define OUT_MAX 4096

/* Both normalisers on one name with an output of outlen bytes. */
static void compare(const char *name, size_t len, size_t outlen, const char *what)
{
	char mine[OUT_MAX], theirs[OUT_MAX], *pos = NULL, copy[512];
	ssize_t m;
	int t, mv, tv;

	if (len > sizeof(copy))
		return;
	memcpy(copy, name, len);
	mv = utf8_validate(name, len);
	tv = oracle->ops->validate(oracle, copy, len, &pos);
	m = utf8_casefold(name, len, mine, outlen);
	t = oracle->ops->casefold(oracle, (const unsigned char *)name, len,
				  (unsigned char *)theirs, outlen);
	if ((mv == 0) != (tv == 0) || (m < 0) != (t < 0) ||
	    (m >= 0 && (m != t || memcmp(mine, theirs, (size_t)m)))) {
		char hex[3 * 512 + 1] = "";

		for (size_t i = 0; i < len && i < 200; i++)
			sprintf(hex + 3 * i, "%02x ", (unsigned char)name[i]);
		T_CHECK(0, "%s: name %s(len %zu, out %zu): valid %d/%d, fold %zd/%d\n",
			what, hex, len, outlen, mv, tv, m, t);
	}
}

static size_t put_cp(char *out, uint32_t cp)
{
	if (cp < 0x80) {
		out[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		out[0] = (char)(0xC0 | cp >> 6);
		out[1] = (char)(0x80 | (cp & 0x3F));
		return 2;
	}
	if (cp < 0x10000) {
		out[0] = (char)(0xE0 | cp >> 12);
		out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
		out[2] = (char)(0x80 | (cp & 0x3F));
		return 3;
	}
	out[0] = (char)(0xF0 | cp >> 18);
	out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
	out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
	out[3] = (char)(0x80 | (cp & 0x3F));
	return 4;
}

static void every_code_point(void)
{
	char name[8];
	int before = t_failures;

	for (uint32_t cp = 0; cp <= 0x10FFFF && t_failures - before < 20; cp++) {
		size_t n = put_cp(name, cp);

		compare(name, n, OUT_MAX, "code point");
		/* After a letter and before a mark: ordering, stray bytes. */
		name[n] = (char)0xCC;	/* U+0316, class 220 */
		name[n + 1] = (char)0x96;
		compare(name, n + 2, OUT_MAX, "code point + U+0316");
	}
	printf("every code point: %d differences\n", t_failures - before);
}

/* Ranges where folding, decomposition, ordering and validity happen. */
static const uint32_t pick_ranges[][2] = {
	{ 0x20, 0x7F }, { 0xC0, 0x250 }, { 0x300, 0x370 }, { 0x370, 0x400 },
	{ 0x400, 0x530 }, { 0x591, 0x5C8 }, { 0x900, 0x9FF }, { 0x1100, 0x1200 },
	{ 0x1E00, 0x2000 }, { 0x2000, 0x2070 }, { 0x2100, 0x2190 }, { 0x2C00, 0x2D30 },
	{ 0xA640, 0xA800 }, { 0xAC00, 0xD7A4 }, { 0xD7B0, 0xD800 }, { 0xD800, 0xE000 },
	{ 0xF900, 0xFB50 }, { 0xFE00, 0xFE30 }, { 0xFF00, 0xFFFF }, { 0x10400, 0x10500 },
	{ 0x10C80, 0x10D00 }, { 0x16E40, 0x16EA0 }, { 0x1D150, 0x1D250 }, { 0x1E900, 0x1E960 },
	{ 0x1F000, 0x1FB00 }, { 0xE0000, 0xE1000 }, { 0x0, 0x110000 },
};

static size_t random_name(uint64_t *rs, char *name, size_t room)
{
	size_t n = 0, items = 1 + t_rnd_below(rs, 12);

	for (size_t i = 0; i < items && n + 4 <= room; i++) {
		uint64_t kind = t_rnd_below(rs, 20);

		if (kind == 0) {		/* a raw byte */
			name[n++] = (char)(0x80 + t_rnd_below(rs, 0x80));
		} else if (kind == 1 && n) {	/* cut the last sequence */
			n--;
		} else {
			const uint32_t *r = pick_ranges[t_rnd_below(rs,
				sizeof(pick_ranges) / sizeof(pick_ranges[0]))];
			n += put_cp(name + n, r[0] + (uint32_t)t_rnd_below(rs, r[1] - r[0]));
		}
	}
	return n;
}

static void random_names(uint64_t seed, long count)
{
	uint64_t rs = seed;
	char name[64];
	int before = t_failures;

	for (long i = 0; i < count && t_failures - before < 20; i++) {
		size_t len = random_name(&rs, name, sizeof(name));

		compare(name, len, OUT_MAX, "random name");
		compare(name, len, t_rnd_below(&rs, 4 * len + 2), "random name, short output");
	}
	printf("%ld random names: %d differences\n", count, t_failures - before);
}

static void facts(void)
{
	char out[64];
	ssize_t n;

	n = utf8_casefold("Stra\xc3\x9f" "e", 7, out, sizeof(out));
	T_CHECK(n == 7 && !memcmp(out, "strasse", 7), "ß folds to ss: %zd\n", n);
	/* U+00C5 (NFC) and A + U+030A (NFD): one form, a + U+030A. */
	n = utf8_casefold("\xc3\x85", 2, out, sizeof(out));
	T_CHECK(n == 3 && !memcmp(out, "a\xcc\x8a", 3), "Å: %zd\n", n);
	n = utf8_casefold("A\xcc\x8a", 3, out, sizeof(out));
	T_CHECK(n == 3 && !memcmp(out, "a\xcc\x8a", 3), "A + ring: %zd\n", n);
	T_CHECK(utf8_validate("a\xff", 2) == -EINVAL, "0xff is not UTF-8\n");
	T_CHECK(utf8_validate("\xed\xa0\x80", 3) == -EINVAL, "a surrogate is not valid\n");
	/* U+1FA70 (Unicode 13): valid, but 12.1 does not fold or decompose
	 * it; U+1E921 (Adlam, 9.0) folds. */
	T_CHECK(utf8_validate("\xf0\x9f\xa9\xb0", 4) == 0, "U+1FA70 is valid\n");
	n = utf8_casefold("\xf0\x9e\xa4\x80", 4, out, sizeof(out));
	T_CHECK(n == 4 && !memcmp(out, "\xf0\x9e\xa4\xa2", 4), "U+1E900 folds to U+1E922: %zd\n", n);
}

int main(int argc, char **argv)
{
	const struct nls_table *(*load)(int);
	void *lib = dlopen("libext2fs.so.2", RTLD_NOW);
	uint64_t seed = t_seed("utf8", "UTF8_SEED");
	long count = argc > 1 ? atol(argv[1]) : 300000;

	if (!lib) {
		printf("SKIP: no libext2fs.so.2 (e2fsprogs' library, the oracle): %s\n", dlerror());
		return T_SKIP;
	}
	load = (const struct nls_table *(*)(int))dlsym(lib, "ext2fs_load_nls_table");
	oracle = load ? load(1) : NULL;
	if (!oracle) {
		printf("SKIP: this libext2fs has no utf8-12.1 table (built without casefold)\n");
		return T_SKIP;
	}
	facts();
	every_code_point();
	random_names(seed, count);
	printf("%s\n", t_failures ? "FAIL" : "PASS");
	return t_failures ? 1 : 0;
}
