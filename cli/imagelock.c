/*
 * imagelock.c - who holds the flock on an image, and a bounded wait for it.
 *
 * A uext4 process that writes an image holds LOCK_EX on it until it has
 * written everything back; a read-only mount holds LOCK_SH (uext4.c,
 * lock_image()).  When a lock is refused, the holder is found in
 * /proc/locks (pid, exclusive or shared) to name it, and a server that has
 * lost its mount (umount returned, the write-back still running) is waited
 * for on the lock itself, for a bounded time.
 */
#include "cli.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/time.h>

int lock_holder(int fd, struct lock_holder *h)
{
	char line[256], type[16], access[16], path[64];
	unsigned ma, mi;
	unsigned long ino;
	struct stat st;
	FILE *f;
	int pid, found = 0;

	memset(h, 0, sizeof(*h));
	if (fstat(fd, &st) || !(f = fopen("/proc/locks", "re")))
		return 0;
	/* "1: FLOCK  ADVISORY  WRITE 1234 fe:00:5678 0 EOF"; a waiter's line
	 * has "->" where the type is. */
	while (!found && fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%*d: %15s %*15s %15s %d %x:%x:%lu", type, access, &pid, &ma, &mi,
			   &ino) != 6 || strcmp(type, "FLOCK") || ino != st.st_ino ||
		    ma != major(st.st_dev) || mi != minor(st.st_dev))
			continue;
		h->pid = pid;
		h->exclusive = !strcmp(access, "WRITE");
		found = 1;
	}
	fclose(f);
	if (!found)
		return 0;
	snprintf(path, sizeof(path), "/proc/%d/comm", h->pid);
	if ((f = fopen(path, "re"))) {
		if (fgets(h->comm, sizeof(h->comm), f))
			h->comm[strcspn(h->comm, "\n")] = '\0';
		fclose(f);
	}
	return 1;
}

static volatile sig_atomic_t lock_timed_out;

static void on_alarm(int sig)
{
	(void)sig;
	lock_timed_out = 1;
}

int flock_bounded(int fd, int op, unsigned secs)
{
	/* No SA_RESTART: the alarm ends the blocked flock with EINTR.  The
	 * timer repeats each second, so an alarm that came just before the
	 * flock blocked cannot leave it waiting for ever. */
	struct sigaction sa = { .sa_handler = on_alarm }, old_sa;
	struct itimerval t = { .it_interval = { 1, 0 }, .it_value = { (time_t)secs, 0 } };
	struct itimerval off = { { 0, 0 }, { 0, 0 } }, old_t;
	int ret, err;

	lock_timed_out = 0;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGALRM, &sa, &old_sa);
	setitimer(ITIMER_REAL, &t, &old_t);
	while ((ret = flock(fd, op)) < 0 && errno == EINTR && !lock_timed_out)
		;
	err = errno;
	setitimer(ITIMER_REAL, &off, NULL);
	sigaction(SIGALRM, &old_sa, NULL);
	if (ret < 0 && lock_timed_out)
		err = ETIMEDOUT;
	errno = err;
	return ret;
}
