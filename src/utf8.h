/*
 * utf8.h - Unicode names of casefolded directories (utf8.c).
 *
 * ext4's encoding utf8-12.1 (s_encoding EXT4_ENC_UTF8_12_1): a name is
 * compared and hashed in its "nfdicf" form, as the kernel's fs/unicode
 * makes it: canonical decomposition (NFD), full case folding, the
 * Default_Ignorable_Code_Points removed, with the data of Unicode 12.1.  Byte for byte the kernel's and e2fsprogs' results, quirks
 * included (tests/utf8.c checks every code point against e2fsprogs).
 */
#ifndef UEXT4_UTF8_H
#define UEXT4_UTF8_H

#include <stddef.h>
#include <sys/types.h>

/* The longest folded name the hash is taken of (the kernel's PATH_MAX
 * buffer); a name of 255 bytes folds to far less. */
#define UTF8_FOLD_MAX 4096

/* 0 if the first len bytes of name (up to a NUL) are well-formed UTF-8 of
 * code points other than surrogates (assigned or not: the kernel's table
 * has them all), else -EINVAL (the kernel's utf8_validate(): what strict
 * mode refuses). */
int utf8_validate(const char *name, size_t len);

/* The nfdicf form of name into out (not NUL-terminated): its length, or
 * -EINVAL for a name that is not valid (the kernel's utf8_casefold(), which
 * also fails when the result and a NUL do not fit in outlen). */
ssize_t utf8_casefold(const char *name, size_t len, char *out, size_t outlen);

#endif
