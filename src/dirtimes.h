/*
 * dirtimes.h - a directory's mtime and ctime under parallel changes
 * (dirtimes.c).
 */
#ifndef UEXT4_DIRTIMES_H
#define UEXT4_DIRTIMES_H

#include <time.h>

struct handle;
struct inode;

/* Set dir's mtime and ctime and write its inode, under the directory's
 * attribute lock: with dir->lock shared, several writers do this at once. */
int dirtimes_touch_shared(struct handle *h, struct inode *dir);
/* A directory's mtime and ctime, consistent with each other while
 * dirtimes_touch_shared() runs elsewhere (a seqcount: no lock, nothing
 * written). */
void dirtimes_read(const struct inode *dir, struct timespec *mtime, struct timespec *ctime);

#endif
