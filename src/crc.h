/*
 * crc.h - the two CRC32C implementations behind crc32c(), exposed so the
 * unit test can compare them.  Everything else calls crc32c() (below),
 * which picks the hardware one at run time when the CPU has it.
 */
#ifndef UEXT4_CRC_H
#define UEXT4_CRC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Raw CRC32C with slicing-by-8 tables (any CPU). */
uint32_t crc32c_sw(uint32_t crc, const void *buf, size_t len);
/* True when crc32c_hw() may be called (x86-64 with SSE4.2). */
bool crc32c_hw_available(void);
/* Raw CRC32C with the SSE4.2 crc32 instruction; only if available. */
uint32_t crc32c_hw(uint32_t crc, const void *buf, size_t len);

/* ---------------------------------------------------------------- crc.c */
/* Raw CRC32C (Castagnoli), no pre/post inversion, as ext4_chksum(). */
uint32_t crc32c(uint32_t crc, const void *buf, size_t len);
/* CRC16 (ANSI, poly 0x8005 reflected) for gdt_csum group descriptors. */
uint16_t crc16(uint16_t crc, const void *buf, size_t len);


#endif
