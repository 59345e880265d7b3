/*
 * caller.h - the calling thread's identity (caller.c).
 */
#ifndef UEXT4_CALLER_H
#define UEXT4_CALLER_H

#include <stdint.h>

/* Identity set by uext4_set_caller() for this thread. */
uint32_t caller_uid(void);
uint32_t caller_gid(void);
/* The calling thread's umask (uext4_set_umask()). */
uint32_t caller_umask(void);

#endif
