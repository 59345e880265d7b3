/*
 * crc.c - CRC32C (metadata_csum) and CRC16 (gdt_csum).
 *
 * Both are "raw": no inversion before or after, like the kernel's
 * crc32c_le()/ext4_chksum() and crc16(); ext4 callers pass ~0 as the seed
 * where the format says so.  CRC32C uses the SSE4.2 crc32 instruction when
 * the CPU has it (checked once at run time) and slicing-by-8 tables
 * otherwise.  The tables are built once, on first use, under pthread_once
 * so concurrent first callers are safe; after that they are read-only.
 */
#include "crc.h"
#include "ondisk.h"

#include <pthread.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <nmmintrin.h>
#define HAVE_X86_CRC32 1
#endif

#define CRC32C_POLY_REFLECTED 0x82F63B78u
#define CRC16_POLY_REFLECTED 0xA001u

/* crc32c_table[k][b]: CRC of byte b followed by k zero bytes. */
static uint32_t crc32c_table[8][256];
/*
 * Three lanes of LANE bytes are summed at once (crc32c_sse42()): the crc32
 * instruction can start one step per cycle but takes three to finish, so
 * one chain of steps runs at a third of the speed three independent ones
 * do.  The lanes are joined by linearity: the CRC of A then B is the CRC
 * of A carried over LANE zero bytes, xor the CRC of B from zero.
 * lane_shift[k][b] carries the byte b << 8k over LANE zero bytes.
 */
#define LANE 1360u  /* three lanes and 16 bytes: a 4 KiB block */
static uint32_t lane_shift[4][256];
static uint16_t crc16_table[256];
static bool use_hw;
static pthread_once_t tables_once = PTHREAD_ONCE_INIT;

static void build_crc32c_tables(void)
{
	for (unsigned i = 0; i < 256; i++) {
		uint32_t c = i;

		for (int bit = 0; bit < 8; bit++)
			c = (c >> 1) ^ ((c & 1) ? CRC32C_POLY_REFLECTED : 0);
		crc32c_table[0][i] = c;
	}
	for (unsigned i = 0; i < 256; i++)
		for (int k = 1; k < 8; k++) {
			uint32_t prev = crc32c_table[k - 1][i];

			crc32c_table[k][i] = (prev >> 8) ^ crc32c_table[0][prev & 0xff];
		}
}

static void build_crc16_table(void)
{
	for (unsigned i = 0; i < 256; i++) {
		uint16_t c = (uint16_t)i;

		for (int bit = 0; bit < 8; bit++)
			c = (uint16_t)((c >> 1) ^ ((c & 1) ? CRC16_POLY_REFLECTED : 0));
		crc16_table[i] = c;
	}
}

static uint32_t crc32c_sw_tables(uint32_t crc, const uint8_t *p, size_t len);

/* The carry of each of the 32 register bits over LANE zero bytes (the
 * table CRC, so any CPU), combined into lane_shift. */
static void build_lane_shift(void)
{
	static const uint8_t zeros[LANE];
	uint32_t bit[32];

	for (int i = 0; i < 32; i++)
		bit[i] = crc32c_sw_tables(1u << i, zeros, LANE);
	for (int k = 0; k < 4; k++)
		for (unsigned b = 0; b < 256; b++) {
			uint32_t v = 0;

			for (int j = 0; j < 8; j++)
				if (b & (1u << j))
					v ^= bit[8 * k + j];
			lane_shift[k][b] = v;
		}
}

static void init_once(void)
{
	build_crc32c_tables();
	build_lane_shift();
	build_crc16_table();
#ifdef HAVE_X86_CRC32
	__builtin_cpu_init();
	use_hw = __builtin_cpu_supports("sse4.2");
#endif
}

static inline void crc_init(void)
{
	pthread_once(&tables_once, init_once);
}

static inline uint32_t load_le32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return le32(v);
}

uint32_t crc32c_sw(uint32_t crc, const void *buf, size_t len)
{
	crc_init();
	return crc32c_sw_tables(crc, buf, len);
}

/* Slicing by 8, the tables built. */
static uint32_t crc32c_sw_tables(uint32_t crc, const uint8_t *p, size_t len)
{
	/* Eight bytes per step: each byte indexes its own table, which
	 * already accounts for the bytes that follow it. */
	while (len >= 8) {
		uint32_t lo = crc ^ load_le32(p);
		uint32_t hi = load_le32(p + 4);

		crc = crc32c_table[7][lo & 0xff] ^ crc32c_table[6][(lo >> 8) & 0xff] ^
		      crc32c_table[5][(lo >> 16) & 0xff] ^ crc32c_table[4][lo >> 24] ^
		      crc32c_table[3][hi & 0xff] ^ crc32c_table[2][(hi >> 8) & 0xff] ^
		      crc32c_table[1][(hi >> 16) & 0xff] ^ crc32c_table[0][hi >> 24];
		p += 8;
		len -= 8;
	}
	while (len--)
		crc = (crc >> 8) ^ crc32c_table[0][(crc ^ *p++) & 0xff];
	return crc;
}

#ifdef HAVE_X86_CRC32
static uint32_t lane_carry(uint32_t c)
{
	return lane_shift[0][c & 0xff] ^ lane_shift[1][(c >> 8) & 0xff] ^
	       lane_shift[2][(c >> 16) & 0xff] ^ lane_shift[3][c >> 24];
}

static uint64_t load64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return v;
}

__attribute__((target("sse4.2")))
static uint32_t crc32c_sse42(uint32_t crc, const uint8_t *p, size_t len)
{
#ifdef __x86_64__
	while (len >= 3 * LANE) {
		uint64_t a = crc, b = 0, c = 0;

		for (unsigned i = 0; i < LANE; i += 8) {
			a = _mm_crc32_u64(a, load64(p + i));
			b = _mm_crc32_u64(b, load64(p + LANE + i));
			c = _mm_crc32_u64(c, load64(p + 2 * LANE + i));
		}
		crc = lane_carry(lane_carry((uint32_t)a) ^ (uint32_t)b) ^ (uint32_t)c;
		p += 3 * LANE;
		len -= 3 * LANE;
	}

	uint64_t c = crc;

	while (len >= 8) {
		uint64_t v;

		memcpy(&v, p, 8);
		c = _mm_crc32_u64(c, v);
		p += 8;
		len -= 8;
	}
	crc = (uint32_t)c;
#endif
	while (len >= 4) {
		uint32_t v;

		memcpy(&v, p, 4);
		crc = _mm_crc32_u32(crc, v);
		p += 4;
		len -= 4;
	}
	while (len--)
		crc = _mm_crc32_u8(crc, *p++);
	return crc;
}
#endif

bool crc32c_hw_available(void)
{
	crc_init();
	return use_hw;
}

uint32_t crc32c_hw(uint32_t crc, const void *buf, size_t len)
{
#ifdef HAVE_X86_CRC32
	if (crc32c_hw_available())
		return crc32c_sse42(crc, buf, len);
#endif
	return crc32c_sw(crc, buf, len);
}

uint32_t crc32c(uint32_t crc, const void *buf, size_t len)
{
	crc_init();
#ifdef HAVE_X86_CRC32
	if (use_hw)
		return crc32c_sse42(crc, buf, len);
#endif
	return crc32c_sw(crc, buf, len);
}

uint16_t crc16(uint16_t crc, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	crc_init();
	while (len--)
		crc = (uint16_t)((crc >> 8) ^ crc16_table[(crc ^ *p++) & 0xff]);
	return crc;
}
