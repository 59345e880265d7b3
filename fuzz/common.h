/*
 * fuzz/common.h - what the libFuzzer harnesses share: mounting an image
 * held in the fuzzer's buffer (the internal memory device, nothing touches
 * a file) and walking a mounted tree with bounded work.
 */
#ifndef UEXT4_FUZZ_COMMON_H
#define UEXT4_FUZZ_COMMON_H
#include <stddef.h>
#include <stdint.h>
#include "uext4.h"

/* Inputs above this are ignored: images are 1-4 MiB. */
#define FUZZ_MAX_IMAGE (4u << 20)
/* Buffer cache limit per mount: small, so memory per input stays bounded. */
#define FUZZ_CACHE_BYTES (2u << 20)

/* Mount the image in buf[0..size) in place (read_only or not), with
 * errors=remount-ro so that a mutated s_errors never exits the process.
 * The buffer outlives the mount: what the mount wrote stays in it, for a
 * second mount.  0 or -errno. */
int fuzz_mount_buffer(uint8_t *buf, size_t size, int read_only, uext4_fs **out);
/* A malloc'd copy of the input, or NULL (too small, too big). */
uint8_t *fuzz_copy_input(const uint8_t *data, size_t size);
/* Walk the tree from the root: readdir, getattr, read each file (bounded
 * bytes), readlink, listxattr and getxattr of each name; statfs. */
void fuzz_walk(uext4_fs *fs);
/* Aim the mutator at the journal's blocks (fuzz_recovery). */
extern int fuzz_mutator_journal_bias;
#endif
