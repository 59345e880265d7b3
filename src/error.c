/*
 * error.c - the thread-local "last error" message behind uext4_last_error().
 *
 * The function that detects a problem names it (structure, inode, block);
 * callers above only pass the negative errno up.
 */
#include "internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char last_error[512];

static void set_msg(const char *prefix, const char *fmt, va_list ap)
{
	size_t n = 0;

	if (prefix)
		n = (size_t)snprintf(last_error, sizeof(last_error), "%s", prefix);
	if (n < sizeof(last_error))
		vsnprintf(last_error + n, sizeof(last_error) - n, fmt, ap);
}

int fs_err(int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	set_msg(NULL, fmt, ap);
	va_end(ap);
	return -err;
}

int fs_corrupt(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	set_msg("corrupt ", fmt, ap);
	va_end(ap);
	return -EUCLEAN;
}

/* Stand-in until the error policy lands: the message only. */
int fs_error(struct uext4_fs *fs, int err, uint64_t ino, uint64_t block, const char *func,
	     const char *fmt, ...)
{
	va_list ap;

	(void)fs; (void)ino; (void)block; (void)func;
	va_start(ap, fmt);
	set_msg(err == EUCLEAN ? "corrupt " : NULL, fmt, ap);
	va_end(ap);
	return -err;
}

void fs_clear_err(void)
{
	last_error[0] = '\0';
}

const char *uext4_last_error(void)
{
	return last_error;
}
