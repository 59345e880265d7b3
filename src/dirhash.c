/*
 * dirhash.c - the directory name hashes of htree (dx) directories.
 *
 * Written from the format description (Documentation/filesystems/ext4/
 * directory.rst) and the facts of the kernel's fs/ext4/hash.c: the legacy
 * "dx_hack" hash, half-MD4 and TEA over a padded buffer of 32-bit words,
 * each in a signed-char and an unsigned-char variant (the variant that
 * matches how `char` behaved on the machine that created the file system;
 * the superblock's s_flags records it).
 *
 * The major hash always has bit 0 clear: bit 0 of an index entry's hash
 * marks a hash collision continuing into the next leaf.  The value
 * 0xfffffffe is reserved (it is the 32-bit end-of-directory readdir
 * position, EXT4_HTREE_EOF_32BIT << 1), so it is moved one step down.
 */
#include "dirhash.h"
#include "error.h"
#include "ondisk.h"

#include <errno.h>
#include <string.h>

#define HTREE_EOF_32BIT 0x7fffffffu

static uint32_t rol32(uint32_t v, unsigned s)
{
	return (v << s) | (v >> (32 - s));
}

/* A byte of the name, read as the creating machine's `char` would be. */
static int32_t name_byte(const char *name, size_t i, bool unsigned_char)
{
	if (unsigned_char)
		return (int32_t)(uint8_t)name[i];
	return (int32_t)(int8_t)name[i];
}

/* The legacy hash (kernel dx_hack_hash): a simple multiplicative mix. */
static uint32_t legacy_hash(const char *name, size_t len, bool unsigned_char)
{
	uint32_t h0 = 0x12a3fe2d, h1 = 0x37abe8f9;

	for (size_t i = 0; i < len; i++) {
		/* The product is computed in signed int arithmetic in the
		 * kernel; doing it in uint32_t gives the same bits. */
		uint32_t mix = (uint32_t)name_byte(name, i, unsigned_char) * 7152373u;
		uint32_t h = h1 + (h0 ^ mix);

		if (h & 0x80000000u)
			h -= 0x7fffffff;
		h1 = h0;
		h0 = h;
	}
	return h0 << 1;
}

/*
 * Fill nwords 32-bit words from (at most 4 * nwords bytes of) the name.
 * Bytes are shifted in big-end first; unused words and the unused part of
 * the last word are filled with a pad derived from the remaining length,
 * so names differing only in length hash differently.
 */
static void name_to_words(const char *name, size_t len, uint32_t *out, int nwords,
			  bool unsigned_char)
{
	uint32_t pad = (uint32_t)len | ((uint32_t)len << 8);
	uint32_t val;
	int left = nwords;

	pad |= pad << 16;
	val = pad;
	if (len > (size_t)nwords * 4)
		len = (size_t)nwords * 4;
	for (size_t i = 0; i < len; i++) {
		val = (uint32_t)name_byte(name, i, unsigned_char) + (val << 8);
		if (i % 4 == 3) {
			*out++ = val;
			val = pad;
			left--;
		}
	}
	if (--left >= 0)
		*out++ = val;
	while (--left >= 0)
		*out++ = pad;
}

/* TEA block cipher, 16 rounds, used as a compression function. */
static void tea_transform(uint32_t buf[4], const uint32_t in[4])
{
	uint32_t sum = 0, b0 = buf[0], b1 = buf[1];
	uint32_t a = in[0], b = in[1], c = in[2], d = in[3];

	for (int n = 0; n < 16; n++) {
		sum += 0x9E3779B9u;
		b0 += ((b1 << 4) + a) ^ (b1 + sum) ^ ((b1 >> 5) + b);
		b1 += ((b0 << 4) + c) ^ (b0 + sum) ^ ((b0 >> 5) + d);
	}
	buf[0] += b0;
	buf[1] += b1;
}

/* The three MD4 round functions and constants. */
#define MD4_F(x, y, z) ((z) ^ ((x) & ((y) ^ (z))))
#define MD4_G(x, y, z) (((x) & (y)) + (((x) ^ (y)) & (z)))
#define MD4_H(x, y, z) ((x) ^ (y) ^ (z))
#define MD4_K2 013240474631u
#define MD4_K3 015666365641u
#define MD4_STEP(f, a, b, c, d, x, s) ((a) = rol32((a) + f((b), (c), (d)) + (x), (s)))

/* Half MD4: MD4's three rounds over 8 words instead of 16. */
static void half_md4_transform(uint32_t buf[4], const uint32_t in[8])
{
	uint32_t a = buf[0], b = buf[1], c = buf[2], d = buf[3];

	MD4_STEP(MD4_F, a, b, c, d, in[0], 3);
	MD4_STEP(MD4_F, d, a, b, c, in[1], 7);
	MD4_STEP(MD4_F, c, d, a, b, in[2], 11);
	MD4_STEP(MD4_F, b, c, d, a, in[3], 19);
	MD4_STEP(MD4_F, a, b, c, d, in[4], 3);
	MD4_STEP(MD4_F, d, a, b, c, in[5], 7);
	MD4_STEP(MD4_F, c, d, a, b, in[6], 11);
	MD4_STEP(MD4_F, b, c, d, a, in[7], 19);

	MD4_STEP(MD4_G, a, b, c, d, in[1] + MD4_K2, 3);
	MD4_STEP(MD4_G, d, a, b, c, in[3] + MD4_K2, 5);
	MD4_STEP(MD4_G, c, d, a, b, in[5] + MD4_K2, 9);
	MD4_STEP(MD4_G, b, c, d, a, in[7] + MD4_K2, 13);
	MD4_STEP(MD4_G, a, b, c, d, in[0] + MD4_K2, 3);
	MD4_STEP(MD4_G, d, a, b, c, in[2] + MD4_K2, 5);
	MD4_STEP(MD4_G, c, d, a, b, in[4] + MD4_K2, 9);
	MD4_STEP(MD4_G, b, c, d, a, in[6] + MD4_K2, 13);

	MD4_STEP(MD4_H, a, b, c, d, in[3] + MD4_K3, 3);
	MD4_STEP(MD4_H, d, a, b, c, in[7] + MD4_K3, 9);
	MD4_STEP(MD4_H, c, d, a, b, in[2] + MD4_K3, 11);
	MD4_STEP(MD4_H, b, c, d, a, in[6] + MD4_K3, 15);
	MD4_STEP(MD4_H, a, b, c, d, in[1] + MD4_K3, 3);
	MD4_STEP(MD4_H, d, a, b, c, in[5] + MD4_K3, 9);
	MD4_STEP(MD4_H, c, d, a, b, in[0] + MD4_K3, 11);
	MD4_STEP(MD4_H, b, c, d, a, in[4] + MD4_K3, 15);

	buf[0] += a;
	buf[1] += b;
	buf[2] += c;
	buf[3] += d;
}

/* Initial state: the MD4 constants unless the superblock has a seed. */
static void init_state(uint32_t buf[4], const uint32_t seed[4])
{
	buf[0] = 0x67452301;
	buf[1] = 0xefcdab89;
	buf[2] = 0x98badcfe;
	buf[3] = 0x10325476;
	if (seed && (seed[0] | seed[1] | seed[2] | seed[3]))
		memcpy(buf, seed, 4 * sizeof(uint32_t));
}

int dirhash(int version, const uint32_t seed[4], const char *name, size_t len,
	    uint32_t *hash, uint32_t *minor_hash)
{
	uint32_t buf[4], in[8];
	uint32_t major = 0, minor = 0;
	bool uns = false;

	init_state(buf, seed);
	switch (version) {
	case DX_HASH_LEGACY_UNSIGNED:
		uns = true;
		/* fall through */
	case DX_HASH_LEGACY:
		major = legacy_hash(name, len, uns);
		break;
	case DX_HASH_HALF_MD4_UNSIGNED:
		uns = true;
		/* fall through */
	case DX_HASH_HALF_MD4:
		/* 32 bytes per round; an empty name hashes nothing. */
		for (size_t off = 0; off < len; off += 32) {
			name_to_words(name + off, len - off, in, 8, uns);
			half_md4_transform(buf, in);
		}
		major = buf[1];
		minor = buf[2];
		break;
	case DX_HASH_TEA_UNSIGNED:
		uns = true;
		/* fall through */
	case DX_HASH_TEA:
		for (size_t off = 0; off < len; off += 16) {
			name_to_words(name + off, len - off, in, 4, uns);
			tea_transform(buf, in);
		}
		major = buf[0];
		minor = buf[1];
		break;
	case DX_HASH_SIPHASH:
		return fs_err(EOPNOTSUPP, "directory hash: siphash (casefolded "
			      "directories) is not supported");
	default:
		return fs_corrupt("directory hash: unknown hash version %d", version);
	}
	major &= ~1u;
	if (major == (HTREE_EOF_32BIT << 1))
		major = (HTREE_EOF_32BIT - 1) << 1;
	*hash = major;
	if (minor_hash)
		*minor_hash = minor;
	return 0;
}
