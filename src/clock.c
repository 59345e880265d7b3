/*
 * clock.c - the clock of inode times and error records (clock.h).
 */
#include "clock.h"

/*
 * The kernel's clock for inode times: current_time() reads the coarse
 * real-time clock (one jiffy steps), and so must we.  With the FUSE
 * writeback cache the kernel stamps the mtime and ctime of the regular
 * files it writes, and we stamp everything else; were our clock the
 * precise one, a file the kernel stamps just after we made another could
 * look older than it (fstests generic/423).  The nanoseconds still go to
 * the *_extra fields.  The kernel's own ext4 stores coarse times too,
 * except (multigrain timestamps, Linux 6.13+) for a change right after a
 * stat of the same inode within one tick, which it stamps finely so that
 * the change shows; here two changes within one tick may share a time.
 * Those fine times also raise the floor of the kernel's coarse clock, so
 * a writeback-cache stamp may be ahead of ours: fs_time() (inode.c) never
 * gives less than the last such stamp the cache sent (fs_time_floor_raise()).
 */
struct timespec fs_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME_COARSE, &ts);
	return ts;
}

struct timespec fs_now_fine(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return ts;
}
