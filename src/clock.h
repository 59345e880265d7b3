/*
 * clock.h - the clock of inode times and error records (clock.c).
 */
#ifndef UEXT4_CLOCK_H
#define UEXT4_CLOCK_H

#include <time.h>

/* Current time, for timestamps: the coarse clock, as the kernel's. */
struct timespec fs_now(void);
/* The precise real-time clock: what no stamp handed to us can exceed. */
struct timespec fs_now_fine(void);

#endif
