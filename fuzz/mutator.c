/*
 * fuzz/mutator.c - a structure-aware libFuzzer mutator for ext4 images.
 *
 * It parses the image (superblock, group descriptors, the used inodes of
 * the first groups, their extent nodes, directory and htree blocks, xattr
 * blocks, and the journal's superblock, descriptor, revoke and commit
 * blocks), picks one structure, changes one field in it (a boundary value,
 * off by one, a bit, random) and recomputes that structure's checksum
 * (metadata_csum, journal csum v2/v3) with the library's crc32c(), so that
 * mutated metadata gets past the checksum checks.  One time in four, or
 * when the input is not an ext4 image, libFuzzer's raw mutator runs
 * instead.  The image never grows.  Layout facts: the ext4 and jbd2
 * on-disk formats (src/ondisk.h, src/jbd2.h).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "common.h"

uint32_t crc32c(uint32_t crc, const void *buf, size_t len);
size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t max);
size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max, unsigned seed);

int fuzz_mutator_journal_bias;

enum kind { K_SB, K_GD, K_INODE, K_EXTENT, K_DIR, K_HTREE, K_XATTR,
	    K_JSB, K_JDESC, K_JREVOKE, K_JCOMMIT, K_JDATA };
struct target {
	enum kind kind;
	size_t off, len;
	uint32_t owner_seed;    /* inode checksum seed, for its blocks */
	uint64_t num;           /* group, inode or block number */
};
enum { MAX_TARGETS = 512 };

struct img {
	uint8_t *d;
	size_t size;
	uint32_t bs, ipg, inode_size, desc_size, ngroups, first_data;
	uint64_t blocks;
	int csum, jcsum;        /* metadata_csum; journal checksum v2/v3 */
	uint32_t seed, jseed;
	size_t ntargets;
	struct target t[MAX_TARGETS];
	uint64_t rng;
};

static uint32_t le16(const uint8_t *p) { return p[0] | p[1] << 8; }
static uint32_t le32(const uint8_t *p) { return p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24; }
static uint32_t be32(const uint8_t *p) { return (uint32_t)p[0] << 24 | p[1] << 16 | p[2] << 8 | p[3]; }
static void put_le16(uint8_t *p, uint32_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }
static void put_le32(uint8_t *p, uint32_t v) { put_le16(p, v); put_le16(p + 2, v >> 16); }
static void put_be32(uint8_t *p, uint32_t v) { p[0] = (uint8_t)(v >> 24); p[1] = (uint8_t)(v >> 16); p[2] = (uint8_t)(v >> 8); p[3] = (uint8_t)v; }

static uint64_t rnd(struct img *m)
{
	m->rng ^= m->rng << 13;
	m->rng ^= m->rng >> 7;
	m->rng ^= m->rng << 17;
	return m->rng;
}

static uint8_t *block_at(struct img *m, uint64_t blk)
{
	if (blk == 0 || blk >= m->blocks || (blk + 1) * m->bs > m->size)
		return NULL;
	return m->d + blk * m->bs;
}

static void add(struct img *m, enum kind k, size_t off, size_t len, uint32_t oseed, uint64_t num)
{
	if (m->ntargets < MAX_TARGETS && off + len <= m->size)
		m->t[m->ntargets++] = (struct target){ k, off, len, oseed, num };
}

static uint32_t inode_seed(struct img *m, uint64_t ino, const uint8_t *raw)
{
	uint8_t b[4];

	put_le32(b, (uint32_t)ino);
	uint32_t c = crc32c(m->seed, b, 4);
	return crc32c(c, raw + 0x64, 4);
}

static uint8_t *inode_at(struct img *m, uint64_t ino)
{
	uint64_t g = (ino - 1) / m->ipg, idx = (ino - 1) % m->ipg;
	size_t gdo = (size_t)(m->first_data + 1) * m->bs + g * m->desc_size;
	uint64_t itable;

	if (ino == 0 || g >= m->ngroups || gdo + m->desc_size > m->size)
		return NULL;
	itable = le32(m->d + gdo + 8);
	if (m->desc_size >= 64)
		itable |= (uint64_t)le32(m->d + gdo + 0x28) << 32;
	if (itable >= m->blocks || itable * m->bs + (idx + 1) * m->inode_size > m->size)
		return NULL;
	return m->d + itable * m->bs + idx * m->inode_size;
}

/* The physical block of logical block lblk of an extent-mapped inode
 * (depth at most 3), or 0; adds the index/leaf blocks met as targets. */
static uint64_t map_block(struct img *m, const uint8_t *node, size_t room, uint32_t lblk,
			  uint32_t oseed, int level, int add_nodes)
{
	uint32_t n, depth;

	if (room < 12 || le16(node) != 0xF30A || level > 3)
		return 0;
	n = le16(node + 2);
	depth = le16(node + 6);
	if (12 + (size_t)n * 12 > room)
		return 0;
	for (uint32_t i = n; i-- > 0;) {
		const uint8_t *e = node + 12 + i * 12;
		if (le32(e) > lblk)
			continue;
		if (depth == 0) {
			uint32_t len = le16(e + 4);
			if (len > 32768)
				len -= 32768;
			if (lblk - le32(e) >= len)
				return 0;
			return ((uint64_t)le16(e + 6) << 32 | le32(e + 8)) + (lblk - le32(e));
		}
		uint64_t child = (uint64_t)le16(e + 8) << 32 | le32(e + 4);
		uint8_t *cb = block_at(m, child);
		if (!cb)
			return 0;
		if (add_nodes)
			add(m, K_EXTENT, (size_t)(cb - m->d), m->bs, oseed, child);
		return map_block(m, cb, m->bs, lblk, oseed, level + 1, add_nodes);
	}
	return 0;
}

static void parse_dir(struct img *m, const uint8_t *raw, uint32_t oseed, uint64_t ino)
{
	uint64_t size = le32(raw + 4);

	for (uint32_t l = 0; l < 8 && (uint64_t)l * m->bs < size; l++) {
		uint64_t blk = map_block(m, raw + 0x28, 60, l, oseed, 0, l == 0);
		uint8_t *b = block_at(m, blk);
		if (!b)
			continue;
		/* htree root (block 0 of an indexed dir) or an interior node:
		 * a dirent of inode 0 spanning the block */
		int htree = (le32(raw + 0x20) & 0x1000) &&
			    (l == 0 || (le32(b) == 0 && le16(b + 4) == m->bs));
		add(m, htree ? K_HTREE : K_DIR, (size_t)(b - m->d), m->bs, oseed, ino);
	}
}

static void parse_inode(struct img *m, uint64_t ino)
{
	uint8_t *raw = inode_at(m, ino);
	uint32_t mode, oseed;

	if (!raw || (le16(raw) == 0 && le16(raw + 0x1A) == 0))
		return;
	oseed = inode_seed(m, ino, raw);
	mode = le16(raw) & 0xF000;
	add(m, K_INODE, (size_t)(raw - m->d), m->inode_size, oseed, ino);
	if (le32(raw + 0x20) & 0x80000) {
		if (mode == 0x4000)
			parse_dir(m, raw, oseed, ino);
		else
			map_block(m, raw + 0x28, 60, 0, oseed, 0, 1);
	}
	uint64_t acl = le32(raw + 0x68) | (uint64_t)le16(raw + 0x76) << 32;
	uint8_t *xb = block_at(m, acl);
	if (xb && le32(xb) == 0xEA020000)
		add(m, K_XATTR, (size_t)(xb - m->d), m->bs, 0, acl);
}

static void parse_journal(struct img *m, uint64_t jino)
{
	uint8_t *raw = inode_at(m, jino);
	uint8_t *jsb;
	uint32_t maxlen, oseed;

	if (!raw || !(le32(raw + 0x20) & 0x80000))
		return;
	oseed = inode_seed(m, jino, raw);
	jsb = block_at(m, map_block(m, raw + 0x28, 60, 0, oseed, 0, 0));
	if (!jsb || be32(jsb) != 0xC03B3998)
		return;
	add(m, K_JSB, (size_t)(jsb - m->d), 1024, 0, 0);
	m->jcsum = (be32(jsb + 0x28) & 0x18) != 0;
	m->jseed = crc32c(~0u, jsb + 0x30, 16);
	maxlen = be32(jsb + 0x10);
	for (uint32_t l = 1; l < maxlen && l < 1024; l++) {
		uint8_t *b = block_at(m, map_block(m, raw + 0x28, 60, l, oseed, 0, 0));
		if (!b)
			continue;
		if (be32(b) != 0xC03B3998) {
			if (m->ntargets < MAX_TARGETS / 2 && l < 64)
				add(m, K_JDATA, (size_t)(b - m->d), m->bs, 0, l);
			continue;
		}
		switch (be32(b + 4)) {
		case 1: add(m, K_JDESC, (size_t)(b - m->d), m->bs, 0, l); break;
		case 2: add(m, K_JCOMMIT, (size_t)(b - m->d), m->bs, 0, l); break;
		case 5: add(m, K_JREVOKE, (size_t)(b - m->d), m->bs, 0, l); break;
		}
	}
}

static int parse(struct img *m)
{
	uint8_t *sb = m->d + 1024;
	uint32_t bpg, logbs;

	if (m->size < 4096 || le16(sb + 0x38) != 0xEF53)
		return -1;
	logbs = le32(sb + 0x18);
	bpg = le32(sb + 0x20);
	m->ipg = le32(sb + 0x28);
	if (logbs > 6 || bpg == 0 || m->ipg == 0)
		return -1;
	m->bs = 1024u << logbs;
	m->first_data = le32(sb + 0x14);
	m->blocks = le32(sb + 4);
	if (m->blocks > m->size / m->bs)
		m->blocks = m->size / m->bs;
	m->inode_size = le32(sb + 0x4C) ? le16(sb + 0x58) : 128;
	if (m->inode_size < 128 || m->inode_size > m->bs)
		return -1;
	m->desc_size = (le32(sb + 0x60) & 0x80) ? le16(sb + 0xFE) : 32;
	if (m->desc_size < 32 || m->desc_size > 1024)
		m->desc_size = 32;
	m->ngroups = m->blocks > m->first_data ?
		     (uint32_t)((m->blocks - m->first_data + bpg - 1) / bpg) : 0;
	m->csum = (le32(sb + 0x64) & 0x400) != 0;
	m->seed = (le32(sb + 0x60) & 0x2000) ? le32(sb + 0x270) : crc32c(~0u, sb + 0x68, 16);
	add(m, K_SB, 1024, 1024, 0, 0);
	for (uint32_t g = 0; g < m->ngroups && g < 64; g++)
		add(m, K_GD, (size_t)(m->first_data + 1) * m->bs + g * m->desc_size,
		    m->desc_size, 0, g);
	if (fuzz_mutator_journal_bias)
		parse_journal(m, le32(sb + 0xE0));
	for (uint64_t ino = 1; ino <= m->ipg && ino <= 64; ino++)
		parse_inode(m, ino);
	if (!fuzz_mutator_journal_bias)
		parse_journal(m, le32(sb + 0xE0));
	return 0;
}

/* Checksums, as the kernel's ext4 and jbd2 compute them. */
static void fix_csum(struct img *m, const struct target *t)
{
	uint8_t *p = m->d + t->off, b[8] = { 0 };
	uint32_t c;

	switch (t->kind) {
	case K_SB:
		if (m->csum)
			put_le32(p + 0x3FC, crc32c(~0u, p, 0x3FC));
		return;
	case K_GD:
		if (!m->csum)
			return;
		put_le32(b, (uint32_t)t->num);
		put_le16(p + 0x1E, 0);
		c = crc32c(crc32c(m->seed, b, 4), p, t->len);
		put_le16(p + 0x1E, c);
		return;
	case K_INODE: {
		int hi = m->inode_size > 128 && le16(p + 0x80) >= 4;
		if (!m->csum)
			return;
		put_le16(p + 0x7C, 0);
		if (hi)
			put_le16(p + 0x82, 0);
		c = crc32c(inode_seed(m, t->num, p), p, m->inode_size);
		put_le16(p + 0x7C, c);
		if (hi)
			put_le16(p + 0x82, c >> 16);
		return;
	}
	case K_EXTENT: {
		size_t tail = 12 + (size_t)le16(p + 4) * 12;
		if (m->csum && tail + 4 <= m->bs)
			put_le32(p + tail, crc32c(t->owner_seed, p, tail));
		return;
	}
	case K_DIR:
		if (m->csum && le32(p + m->bs - 12) == 0 && le16(p + m->bs - 8) == 12)
			put_le32(p + m->bs - 4, crc32c(t->owner_seed, p, m->bs - 12));
		return;
	case K_HTREE: {
		size_t co = le32(p) == 0 ? 8 : 0x20;  /* interior node : root */
		size_t limit = le16(p + co), count = le16(p + co + 2);
		size_t tail = co + limit * 8;
		if (!m->csum || tail + 8 > m->bs || count > limit)
			return;
		c = crc32c(t->owner_seed, p, co + count * 8);
		put_le32(p + tail + 4, crc32c(c, p + tail, 4));
		return;
	}
	case K_XATTR:
		if (!m->csum)
			return;
		put_le32(b, (uint32_t)t->num);
		put_le32(b + 4, (uint32_t)(t->num >> 32));
		put_le32(p + 0x10, 0);
		put_le32(p + 0x10, crc32c(crc32c(m->seed, b, 8), p, m->bs));
		return;
	case K_JSB:
		if (m->jcsum) {
			put_be32(p + 0xFC, 0);
			put_be32(p + 0xFC, crc32c(~0u, p, 1024));
		}
		return;
	case K_JDESC:
	case K_JREVOKE:
		if (m->jcsum) {
			put_be32(p + m->bs - 4, 0);
			put_be32(p + m->bs - 4, crc32c(m->jseed, p, m->bs));
		}
		return;
	case K_JCOMMIT:
		if (m->jcsum) {
			put_be32(p + 16, 0);
			put_be32(p + 16, crc32c(m->jseed, p, m->bs));
		}
		return;
	case K_JDATA:
		return;
	}
}

static int big_endian(enum kind k) { return k >= K_JSB; }

/* One field of the target: its offset (in the first 128 bytes mostly,
 * where headers are), width and a new value. */
static void mutate_field(struct img *m, const struct target *t)
{
	static const uint32_t special[] = { 0, 1, 2, 0x7F, 0x80, 0xFF, 0x100, 0x7FFF, 0x8000,
					    0xFFFF, 0x10000, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF };
	unsigned w = 1u << (rnd(m) % 3);
	size_t span = (rnd(m) % 4) ? (t->len < 128 ? t->len : 128) : t->len;
	size_t off = (rnd(m) % (span / w)) * w;
	uint8_t *p = m->d + t->off + off;
	int be = big_endian(t->kind);
	uint32_t old = w == 1 ? p[0] : w == 2 ? (be ? (uint32_t)(p[0] << 8 | p[1]) : le16(p))
					: (be ? be32(p) : le32(p));
	uint32_t v;

	switch (rnd(m) % 6) {
	case 0: v = special[rnd(m) % (sizeof(special) / sizeof(special[0]))]; break;
	case 1: v = old + 1; break;
	case 2: v = old - 1; break;
	case 3: v = old ^ (1u << (rnd(m) % (8 * w))); break;
	case 4: v = (uint32_t)m->blocks + (uint32_t)(rnd(m) % 3) - 1; break;
	default: v = (uint32_t)rnd(m); break;
	}
	if (w == 1)
		p[0] = (uint8_t)v;
	else if (w == 2) {
		if (be) { p[0] = (uint8_t)(v >> 8); p[1] = (uint8_t)v; } else put_le16(p, v);
	} else if (be)
		put_be32(p, v);
	else
		put_le32(p, v);
}

size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max, unsigned seed)
{
	struct img *m = malloc(sizeof(*m));
	size_t n;

	if (!m)
		return LLVMFuzzerMutate(data, size, size);
	memset(m, 0, offsetof(struct img, t));
	m->d = data;
	m->size = size;
	m->rng = seed * 0x9E3779B97F4A7C15ull + 1;
	if (rnd(m) % 4 == 0 || parse(m) || m->ntargets == 0) {
		free(m);
		return LLVMFuzzerMutate(data, size, size);
	}
	n = 1 + rnd(m) % 2;
	for (size_t i = 0; i < n; i++) {
		const struct target *t;
		size_t pick = rnd(m) % m->ntargets;
		/* the journal harness: the journal's blocks three times in four */
		if (fuzz_mutator_journal_bias && rnd(m) % 4) {
			for (size_t k = 0; k < m->ntargets; k++)
				if (m->t[(pick + k) % m->ntargets].kind >= K_JSB) {
					pick = (pick + k) % m->ntargets;
					break;
				}
		}
		t = &m->t[pick];
		mutate_field(m, t);
		fix_csum(m, t);
	}
	free(m);
	return size;
}
