/*
 * mountcheck.h - is an image in use by a mount? (mountcheck.c)
 */
#ifndef UEXT4_MOUNTCHECK_H
#define UEXT4_MOUNTCHECK_H

#include <stddef.h>

/* 1 and where ("mounted on /mnt/K by the kernel (via /dev/loop3)") when
 * path is mounted, else 0; see uext4_in_use() in include/uext4.h. */
int mount_check(const char *path, char *where, size_t len);
/* The same, less the exclusive-open test of a block device: only what the
 * mount table shows (a uext4 server that is unmounting holds its device
 * open exclusively until it has written back). */
int mount_listed(const char *path, char *where, size_t len);
/* Before a read-write open of path: 0, or -EBUSY with the message
 * "PATH: mounted on ...; refusing to write it" (fs_err). */
int mount_check_refuse(const char *path);

#endif
