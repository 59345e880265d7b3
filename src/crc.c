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

static void init_once(void)
{
	build_crc32c_tables();
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
	const uint8_t *p = buf;

	crc_init();
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
__attribute__((target("sse4.2")))
static uint32_t crc32c_sse42(uint32_t crc, const uint8_t *p, size_t len)
{
#ifdef __x86_64__
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
