/*
 * mmp.c - multi-mount protection (-O mmp), the protocol of the kernel's
 * fs/ext4/mmp.c and e2fsprogs' lib/ext2fs/mmp.c, for images on shared
 * storage (an NBD or RBD export two hosts reach): one block,
 * s_mmp_block, whose sequence number the node holding the file system
 * read-write rewrites every s_mmp_update_interval seconds.
 *
 * Opening read-write (mmp_start(), as ext4_multi_mount_protect()):
 *   - seq CLEAN: nobody holds it; claim it at once;
 *   - seq FSCK: e2fsck runs on it; refuse;
 *   - any other: a holder may be alive.  Wait the check interval twice
 *     and a second (at most interval + 60 s), read again: a changed seq
 *     is a live holder, refused by name; an unchanged one is a holder
 *     that died (a crash, kill -9): claim it.
 *   Claiming writes a new random seq, our node and device name, waits as
 *   long again (0 s for a clean block) and reads it back: another node
 *   claiming at the same time has overwritten it, and one of the two
 *   refuses.
 * While mounted, a thread reads the block (it must still say what we
 * wrote: another node may have taken it while we stalled) and writes the
 * next seq, every update interval, as kmmpd.  A block taken from us is an
 * error under the mount's errors= policy (the kernel's ext4_error()), and
 * the thread stops.  Unmount joins the thread and writes seq CLEAN, if
 * the block is still ours.  Read-only mounts do none of this: as the
 * kernel, they neither check nor write the block.
 *
 * Every read of the block goes to the device (bdev_read_uncached(), never
 * the buffer cache): another node writes it.  This file sits in the
 * objects layer and calls the device, the checksum and the error record.
 */
#include "mmp.h"
#include "blockdev.h"
#include "crc.h"
#include "error.h"
#include "internal.h"
#include "lock.h"
#include "ondisk.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/utsname.h>
#include <time.h>

/*
 * One mount's MMP state, fs->mmp.  Immutable after mmp_start(): block,
 * check_secs, update_secs, devname.  mine (the block as we last wrote it)
 * is written by mmp_start(), then only by the thread, then by mmp_stop()
 * after the join.  lock protects stop and lost, and is the mutex of wake;
 * it nests nothing and is held across no I/O (unranked, a leaf).
 */
struct mmp_state {
	uint64_t block;
	unsigned update_secs;       /* s_mmp_update_interval, at least 1 */
	unsigned check_secs;        /* an opener's wait unit, as the kernel's */
	struct mmp_struct mine;
	pthread_t thread;
	bool thread_started;
	pthread_mutex_t lock;
	pthread_cond_t wake;        /* on CLOCK_MONOTONIC */
	bool stop;                  /* unmount: the thread returns */
	bool lost;                  /* another node took the block: never write it again */
};

/* ------------------------------------------------------------ the block */

static uint32_t mmp_csum(uint32_t seed, const struct mmp_struct *m)
{
	return crc32c(seed, m, offsetof(struct mmp_struct, mmp_checksum));
}

static void set_csum(struct uext4_fs *fs, struct mmp_struct *m)
{
	if (fs->metadata_csum)
		m->mmp_checksum = cpu_to_le32(mmp_csum(fs->csum_seed, m));
}

static uint64_t mmp_offset(struct uext4_fs *fs, uint64_t block)
{
	return block * fs->block_size;
}

/* Read the block from the device (past every cache); check magic and checksum. */
static int read_block(struct uext4_fs *fs, uint64_t block, struct mmp_struct *m)
{
	int err = bdev_read_uncached(fs->dev, m, sizeof(*m), mmp_offset(fs, block));

	if (err < 0)
		return fs_err(-err, "reading the MMP block %llu failed: %s",
			      (unsigned long long)block, strerror(-err));
	if (le32(m->mmp_magic) != EXT4_MMP_MAGIC)
		return fs_corrupt("MMP block %llu: bad magic 0x%x (run e2fsck)",
				  (unsigned long long)block, le32(m->mmp_magic));
	if (fs->metadata_csum && le32(m->mmp_checksum) != mmp_csum(fs->csum_seed, m))
		return fs_corrupt("MMP block %llu: bad checksum (run e2fsck)",
				  (unsigned long long)block);
	return 0;
}

/* Write m now, durably (the kernel's REQ_SYNC, e2fsprogs' flush). */
static int write_block(struct uext4_fs *fs, uint64_t block, struct mmp_struct *m)
{
	struct timespec now;
	int err;

	clock_gettime(CLOCK_REALTIME, &now);
	m->mmp_time = cpu_to_le64((uint64_t)now.tv_sec);
	set_csum(fs, m);
	err = bdev_write_fua(fs->dev, m, sizeof(*m), mmp_offset(fs, block));
	if (err < 0)
		return fs_err(-err, "writing the MMP block %llu failed: %s",
			      (unsigned long long)block, strerror(-err));
	return 0;
}

/* A NUL-terminated copy of a fixed-size name field. */
static void field_str(char *out, size_t len, const uint8_t *field, size_t flen)
{
	size_t n = strnlen((const char *)field, flen);

	if (n >= len)
		n = len - 1;
	memcpy(out, field, n);
	out[n] = '\0';
}

/* "node NAME, device DEV" of the block's last writer, for messages. */
static void holder(const struct mmp_struct *m, char *out, size_t len)
{
	char node[65], dev[33];

	field_str(node, sizeof(node), m->mmp_nodename, sizeof(m->mmp_nodename));
	field_str(dev, sizeof(dev), m->mmp_bdevname, sizeof(m->mmp_bdevname));
	snprintf(out, len, "node %s, device %s", *node ? node : "(unnamed)",
		 *dev ? dev : "(unnamed)");
}

/* This host's name and our name of the device, as the holder. */
static void sign(struct mmp_struct *m, const char *devname)
{
	struct utsname u;
	size_t n;

	memset(m->mmp_nodename, 0, sizeof(m->mmp_nodename));
	if (uname(&u) == 0)
		memcpy(m->mmp_nodename, u.nodename, strnlen(u.nodename, sizeof(m->mmp_nodename)));
	memset(m->mmp_bdevname, 0, sizeof(m->mmp_bdevname));
	if (!devname)
		return;
	/* A long path keeps its end, which names the file (e2fsprogs keeps
	 * the start; the kernel writes a short name such as "loop0"). */
	n = strlen(devname);
	if (n >= sizeof(m->mmp_bdevname))
		devname += n - (sizeof(m->mmp_bdevname) - 1);
	memcpy(m->mmp_bdevname, devname, strnlen(devname, sizeof(m->mmp_bdevname) - 1));
}

/* A random sequence a holder may write: 1 .. EXT4_MMP_SEQ_MAX. */
static uint32_t new_seq(void)
{
	uint32_t s = 0;

	do {
		if (getrandom(&s, sizeof(s), 0) != (ssize_t)sizeof(s)) {
			struct timespec t;

			clock_gettime(CLOCK_MONOTONIC, &t);
			s = (uint32_t)t.tv_nsec ^ (uint32_t)t.tv_sec * 2654435761u;
		}
	} while (s == 0 || s > EXT4_MMP_SEQ_MAX);
	return s;
}

void mmp_init_block(struct mmp_struct *m, uint16_t update_secs, const char *devname,
		    int64_t time, bool metadata_csum, uint32_t csum_seed)
{
	memset(m, 0, sizeof(*m));
	m->mmp_magic = cpu_to_le32(EXT4_MMP_MAGIC);
	m->mmp_seq = cpu_to_le32(EXT4_MMP_SEQ_CLEAN);
	m->mmp_time = cpu_to_le64((uint64_t)time);
	sign(m, devname);
	m->mmp_check_interval = cpu_to_le16(update_secs < EXT4_MMP_MIN_CHECK_INTERVAL
					    ? EXT4_MMP_MIN_CHECK_INTERVAL : update_secs);
	if (metadata_csum)
		m->mmp_checksum = cpu_to_le32(mmp_csum(csum_seed, m));
}

/* ------------------------------------------------------------ waiting */

/* Sleep secs seconds, or until mmp_stop() (true: stopped). */
static bool sleep_or_stop(struct mmp_state *s, unsigned secs)
{
	struct timespec until;
	bool stop;

	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_sec += secs;
	lockstat_pthread_lock(&s->lock, LOCKSTAT_OTHER);
	while (!s->stop && pthread_cond_timedwait(&s->wake, &s->lock, &until) != ETIMEDOUT)
		;
	stop = s->stop;
	pthread_mutex_unlock(&s->lock);
	return stop;
}

/* How long an opener waits on a block it found held: twice the check
 * interval and a second, at most the interval + 60 s (the kernel's). */
static unsigned wait_secs(const struct mmp_state *s)
{
	unsigned a = 2 * s->check_secs + 1, b = s->check_secs + 60;

	return a < b ? a : b;
}

/* ------------------------------------------------------------ the thread */

static void *mmp_main(void *arg)
{
	struct uext4_fs *fs = arg;
	struct mmp_state *s = fs->mmp;
	unsigned failed = 0;
	uint32_t seq = 0;

	for (;;) {
		struct mmp_struct now;
		int err;

		if (++seq > EXT4_MMP_SEQ_MAX)
			seq = 1;
		s->mine.mmp_seq = cpu_to_le32(seq);
		err = write_block(fs, s->block, &s->mine);
		if (err && failed++ % 60 == 0)   /* as kmmpd: one report a minute */
			FS_ERROR(fs, -err, 0, s->block, "writing the MMP block failed");
		if (sleep_or_stop(s, s->update_secs))
			return NULL;
		if (err)
			continue;   /* the device does not hold what we wrote: nothing to compare */
		/* Still ours?  (kmmpd reads it back when it was late; reading
		 * every time also finds a node that took it while we stalled.) */
		if ((err = read_block(fs, s->block, &now))) {
			/* As kmmpd: an error, and the thread stops. */
			FS_ERROR(fs, -err, 0, s->block, "MMP: reading the block back failed");
			return NULL;
		}
		if (now.mmp_seq != s->mine.mmp_seq ||
		    memcmp(now.mmp_nodename, s->mine.mmp_nodename, sizeof(now.mmp_nodename))) {
			char who[128];

			holder(&now, who, sizeof(who));
			lockstat_pthread_lock(&s->lock, LOCKSTAT_OTHER);
			s->lost = true;
			pthread_mutex_unlock(&s->lock);
			FS_ERROR(fs, EBUSY, 0, s->block,
				 "MMP: the file system seems to be mounted twice: %s took the MMP "
				 "block from this mount", who);
			return NULL;
		}
	}
}

/* ------------------------------------------------------------ mount, unmount */

static int state_new(struct uext4_fs *fs, struct mmp_state **out)
{
	struct mmp_state *s = calloc(1, sizeof(*s));
	pthread_condattr_t ca;

	if (!s)
		return fs_err(ENOMEM, "out of memory for the MMP state");
	pthread_mutex_init(&s->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&s->wake, &ca);
	pthread_condattr_destroy(&ca);
	s->block = le64(fs->sb.s_mmp_block);
	s->update_secs = le16(fs->sb.s_mmp_update_interval);
	if (s->update_secs == 0)
		s->update_secs = EXT4_MMP_UPDATE_INTERVAL;
	*out = s;
	return 0;
}

static void state_free(struct mmp_state *s)
{
	pthread_cond_destroy(&s->wake);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

/* The check interval: the superblock's update interval, at least 5 s, or
 * the block's if larger; bounded by 300 s so that the wait is (the kernel
 * would wait up to 65535 + 60 s on a block saying so). */
static unsigned check_secs(const struct uext4_fs *fs, const struct mmp_struct *m)
{
	unsigned c = le16(fs->sb.s_mmp_update_interval);

	if (c < EXT4_MMP_MIN_CHECK_INTERVAL)
		c = EXT4_MMP_MIN_CHECK_INTERVAL;
	if (le16(m->mmp_check_interval) > c)
		c = le16(m->mmp_check_interval);
	return c > EXT4_MMP_MAX_CHECK_INTERVAL ? EXT4_MMP_MAX_CHECK_INTERVAL : c;
}

static int refuse_busy(uint64_t block, const struct mmp_struct *m, unsigned waited)
{
	char who[128];

	holder(m, who, sizeof(who));
	return fs_err(EBUSY, "in use by %s: the multi-mount protection block %llu changed "
		      "within %u s (the file system is mounted on that node; unmount it there)",
		      who, (unsigned long long)block, waited);
}

/* A block that was not clean: wait, and refuse if its holder is alive. */
static int wait_for_holder(struct uext4_fs *fs, struct mmp_state *s, struct mmp_struct *m)
{
	uint32_t seq = m->mmp_seq;
	char who[128];
	int err;

	holder(m, who, sizeof(who));
	fprintf(stderr, "uext4: multi-mount protection: the file system was last used by %s "
		"and not released; waiting %u s to see whether that node still holds it\n",
		who, wait_secs(s));
	if (sleep_or_stop(s, wait_secs(s)))
		return fs_err(EINTR, "MMP: the wait was interrupted");
	if ((err = read_block(fs, s->block, m)))
		return err;
	if (m->mmp_seq != seq)
		return refuse_busy(s->block, m, wait_secs(s));
	return 0;
}

/* Write a new random seq with our names, wait (0 s after a clean block),
 * and read it back: still ours, or another node claimed it too. */
static int claim(struct uext4_fs *fs, struct mmp_state *s, const struct mmp_struct *m,
		 const char *devname, unsigned wait)
{
	struct mmp_struct back;
	int err;

	s->mine = *m;
	s->mine.mmp_seq = cpu_to_le32(new_seq());
	sign(&s->mine, devname);
	if ((err = write_block(fs, s->block, &s->mine)))
		return err;
	if (wait && sleep_or_stop(s, wait))
		return fs_err(EINTR, "MMP: the wait was interrupted");
	if ((err = read_block(fs, s->block, &back)))
		return err;
	if (back.mmp_seq != s->mine.mmp_seq)
		return refuse_busy(s->block, &back, wait);
	s->mine.mmp_check_interval = cpu_to_le16((uint16_t)s->check_secs);
	return 0;
}

static int protect(struct uext4_fs *fs, struct mmp_state *s, const char *devname)
{
	struct mmp_struct m;
	unsigned wait = 0;
	int err;

	if (s->block <= fs->first_data_block || s->block >= fs->blocks_count)
		return fs_corrupt("superblock: MMP block %llu is outside the file system "
				  "(run e2fsck)", (unsigned long long)s->block);
	if ((err = read_block(fs, s->block, &m)))
		return err;
	s->check_secs = check_secs(fs, &m);
	if (le32(m.mmp_seq) == EXT4_MMP_SEQ_FSCK) {
		char who[128];

		holder(&m, who, sizeof(who));
		return fs_err(EBUSY, "in use by e2fsck (%s): the multi-mount protection block "
			      "says a file system check runs; wait for it (if none runs, e2fsck "
			      "-f there clears it)", who);
	}
	if (le32(m.mmp_seq) != EXT4_MMP_SEQ_CLEAN) {
		wait = wait_secs(s);
		if ((err = wait_for_holder(fs, s, &m)))
			return err;
	}
	if ((err = claim(fs, s, &m, devname, wait)))
		return err;
	if ((err = pthread_create(&s->thread, NULL, mmp_main, fs)))
		return fs_err(err, "cannot start the MMP thread: %s", strerror(err));
	s->thread_started = true;
	return 0;
}

int mmp_start(struct uext4_fs *fs, const char *devname)
{
	struct mmp_state *s = NULL;
	int err;

	if (!FS_HAS_INCOMPAT(fs, MMP))
		return 0;
	if ((err = state_new(fs, &s)))
		return err;
	fs->mmp = s;
	err = protect(fs, s, devname);
	if (err) {
		/* The thread never started (it is the last step); nothing of
		 * ours to release: a claim that lost stays as the other node
		 * wrote it. */
		fs->mmp = NULL;
		state_free(s);
	}
	return err;
}

int mmp_stop(struct uext4_fs *fs)
{
	struct mmp_state *s = fs->mmp;
	struct mmp_struct now;
	int err = 0;

	if (!s)
		return 0;
	lockstat_pthread_lock(&s->lock, LOCKSTAT_OTHER);
	s->stop = true;
	pthread_cond_broadcast(&s->wake);
	pthread_mutex_unlock(&s->lock);
	pthread_join(s->thread, NULL);
	/* As e2fsprogs' ext2fs_mmp_stop(): clean only what is still ours. */
	if (!s->lost && !(err = read_block(fs, s->block, &now)) &&
	    now.mmp_seq == s->mine.mmp_seq &&
	    !memcmp(now.mmp_nodename, s->mine.mmp_nodename, sizeof(now.mmp_nodename))) {
		s->mine.mmp_seq = cpu_to_le32(EXT4_MMP_SEQ_CLEAN);
		err = write_block(fs, s->block, &s->mine);
	}
	fs->mmp = NULL;
	state_free(s);
	return err;
}
