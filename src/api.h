/*
 * api.h - what the public API layer (api.c) offers the library.
 */
#ifndef UEXT4_API_H
#define UEXT4_API_H

#include <stdint.h>

/* ---------------------------------------------------------------- api.c */
/* Identity set by uext4_set_caller() for this thread. */
uint32_t caller_uid(void);
uint32_t caller_gid(void);
/* The calling thread's umask (uext4_set_umask()). */
uint32_t caller_umask(void);

#endif
