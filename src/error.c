/*
 * error.c - error messages, and what a mount does when a write meets
 * corruption.
 *
 * Messages: the function that detects a problem names it (structure,
 * inode, block) in a thread-local "last error" for uext4_last_error();
 * callers above only pass the negative errno up.
 *
 * Errors (fs_error(), as the kernel's __ext4_error()): the superblock's
 * error fields (EXT4_ERROR_FS in s_state, s_error_count, s_first_error_*
 * once, s_last_error_* every time) are recorded here, the superblock is
 * written at once outside the journal and flushed, and then the errors=
 * policy acts: continue; remount-ro (fs->aborted: no handle begins and
 * nothing more is committed, as the kernel aborts its journal; reads go
 * on); panic (the process exits, nothing further written).
 *
 * What protects what: struct fs_errors's lock (a leaf) protects every
 * field but policy and writable (immutable after mount); it is held across
 * the superblock write so that two errors' writes cannot cross.  fs->sb is
 * the commit's (trans_lock_super()); the error fields reach it through
 * fs_errors_fold() from super_write(), so every later commit carries them,
 * and `image` is the superblock as that commit wrote it (`pending` until
 * its writes succeed, fs_errors_committed()): an error write
 * starts from it, never from fs->sb, which a running handle may be changing
 * (s_last_orphan) and which holds the aborted transaction's changes.
 * The write itself (checksum, device, flush) is the mount's: error.c sits
 * below the checksums and the devices and calls nothing above it.
 */
#include "clock.h"
#include "error.h"
#include "internal.h"
#include "lock.h"
#include "ondisk.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static _Thread_local char last_error[512];
/* The error behind last_error was recorded (fs_error()): a caller passing
 * it up through FS_ERROR_SEEN does not count it twice. */
static _Thread_local bool last_recorded;

static void set_msg(const char *prefix, const char *fmt, va_list ap)
{
	size_t n = 0;

	last_recorded = false;
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

void fs_clear_err(void)
{
	last_error[0] = '\0';
	last_recorded = false;
}

const char *uext4_last_error(void)
{
	return last_error;
}

/* ------------------------------------------------------------ error state */

struct fs_errors {
	struct ulock lock;              /* RANK_ERRORS: all below but policy, writable */
	int policy;                     /* UEXT4_ERRORS_CONTINUE / _RO / _PANIC */
	bool writable;                  /* read-write mount: errors go to disk */
	_Atomic uint32_t seq;           /* errors recorded since mount */
	struct ext4_super_block rec;    /* error fields and s_state's ERROR_FS */
	struct ext4_super_block image;  /* the superblock the last commit wrote */
	struct ext4_super_block pending; /* the one the running commit writes */
	char first_msg[256];            /* this mount's first error, for EROFS */
	fs_write_super_fn write_super;  /* immutable: puts a superblock on the device */
	bool journal_aborted;           /* a write-back error aborted the journal */
};

/* The superblock's error fields: s_error_count .. s_last_error_func (the
 * range the kernel keeps across journal replay), then the time _hi bytes
 * and the error codes. */
#define ERR_START offsetof(struct ext4_super_block, s_error_count)
#define ERR_END offsetof(struct ext4_super_block, s_mount_opts)
#define ERR_HI_START offsetof(struct ext4_super_block, s_first_error_time_hi)
#define ERR_HI_END (offsetof(struct ext4_super_block, s_last_error_errcode) + 1)

static void copy_error_fields(struct ext4_super_block *dst, const struct ext4_super_block *src)
{
	memcpy((uint8_t *)dst + ERR_START, (const uint8_t *)src + ERR_START, ERR_END - ERR_START);
	memcpy((uint8_t *)dst + ERR_HI_START, (const uint8_t *)src + ERR_HI_START,
	       ERR_HI_END - ERR_HI_START);
	dst->s_state = cpu_to_le16(le16(dst->s_state) | (le16(src->s_state) & EXT4_ERROR_FS));
}

void fs_errors_keep_across_replay(struct ext4_super_block *replayed,
				  const struct ext4_super_block *before)
{
	copy_error_fields(replayed, before);
}

/* errors= from the mount options, else s_errors; remount-ro when neither
 * says (as the kernel). */
static int choose_policy(const struct uext4_fs *fs, const struct uext4_opts *o)
{
	unsigned v = o && o->errors ? (unsigned)o->errors : le16(fs->sb.s_errors);

	return v == UEXT4_ERRORS_CONTINUE || v == UEXT4_ERRORS_PANIC ? (int)v : UEXT4_ERRORS_RO;
}

int fs_errors_init(struct uext4_fs *fs, const struct uext4_opts *o, fs_write_super_fn write_super)
{
	struct fs_errors *e;

	if (o && (o->errors < 0 || o->errors > UEXT4_ERRORS_PANIC))
		return fs_err(EINVAL, "bad errors= value %d", o->errors);
	if (!(e = calloc(1, sizeof(*e))))
		return fs_err(ENOMEM, "out of memory");
	ulock_init(&e->lock, RANK_ERRORS);
	e->policy = choose_policy(fs, o);
	e->writable = !fs->read_only;
	e->write_super = write_super;
	copy_error_fields(&e->rec, &fs->sb);
	e->image = fs->sb;
	e->pending = fs->sb;
	fs->errs = e;
	return 0;
}

void fs_errors_destroy(struct uext4_fs *fs)
{
	if (!fs->errs)
		return;
	ulock_destroy(&fs->errs->lock);
	free(fs->errs);
	fs->errs = NULL;
}

void fs_errors_fold(struct uext4_fs *fs, struct ext4_super_block *sb)
{
	struct fs_errors *e = fs->errs;

	if (!e)
		return;
	ulock_lock(&e->lock);
	copy_error_fields(sb, &e->rec);
	e->pending = *sb;
	ulock_unlock(&e->lock);
}

/* Only a superblock that reached the log (or home) may be written with
 * an error: a failed commit's counts never did (journal abort). */
void fs_errors_committed(struct uext4_fs *fs)
{
	struct fs_errors *e = fs->errs;

	if (!e)
		return;
	ulock_lock(&e->lock);
	e->image = e->pending;
	ulock_unlock(&e->lock);
}

void fs_errors_merge(struct uext4_fs *fs, struct ext4_super_block *sb)
{
	struct fs_errors *e = fs->errs;

	if (!e)
		return;
	ulock_lock(&e->lock);
	copy_error_fields(sb, &e->rec);
	ulock_unlock(&e->lock);
}

uint32_t fs_errors_seq(struct uext4_fs *fs)
{
	return fs->errs ? atomic_load(&fs->errs->seq) : 0;
}

/* The image with the error fields to the primary superblock, flushed
 * (as ext4_commit_super()).  e->lock held. */
static int write_image(struct uext4_fs *fs, struct fs_errors *e)
{
	struct ext4_super_block sb = e->image;

	copy_error_fields(&sb, &e->rec);
	return e->write_super(fs, &sb);
}

int fs_errors_write_super(struct uext4_fs *fs, uint32_t clear_incompat, uint16_t set_state)
{
	struct fs_errors *e = fs->errs;
	struct ext4_super_block *im;
	int err;

	if (!e || !e->writable)
		return 0;
	ulock_lock(&e->lock);
	im = &e->image;
	im->s_feature_incompat = cpu_to_le32(le32(im->s_feature_incompat) & ~clear_incompat);
	im->s_state = cpu_to_le16(le16(im->s_state) | set_state);
	err = write_image(fs, e);
	ulock_unlock(&e->lock);
	return err;
}

int fs_errors_refuse(struct uext4_fs *fs)
{
	struct fs_errors *e = fs->errs;
	char first[sizeof(e->first_msg)] = "";
	bool aborted = false;

	/* The operation that met the error, cleaning up: keep its message. */
	if (last_recorded)
		return -EROFS;
	if (e) {
		ulock_lock(&e->lock);
		memcpy(first, e->first_msg, sizeof(first));
		aborted = e->journal_aborted;
		ulock_unlock(&e->lock);
	}
	if (aborted)
		return fs_err(EROFS, "the journal was aborted after a write error%s%.256s; the "
			      "file system is read-only until it is unmounted (run e2fsck)",
			      *first ? ": " : "", first);
	return fs_err(EROFS, "the file system was made read-only after an error%s%.256s "
		      "(errors=remount-ro); unmount and run e2fsck", *first ? ": " : "", first);
}

/* s_*_error_errcode: the kernel's architecture-independent codes. */
static uint8_t errcode_of(int err)
{
	static const struct { int err; uint8_t code; } map[] = {
		{ EIO, 2 }, { ENOMEM, 3 }, { EFSBADCRC, 4 }, { EFSCORRUPTED, 5 },
		{ ENOSPC, 6 }, { ENOKEY, 7 }, { EROFS, 8 }, { EFBIG, 9 }, { EEXIST, 10 },
		{ ERANGE, 11 }, { EOVERFLOW, 12 }, { EBUSY, 13 }, { ENOTDIR, 14 },
		{ ENOTEMPTY, 15 }, { ESHUTDOWN, 16 }, { EFAULT, 17 },
	};

	if (err == 0)
		return 5;
	for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
		if (map[i].err == err)
			return map[i].code;
	return 1;
}

static void put_func(uint8_t dst[32], const char *func)
{
	memset(dst, 0, 32);
	if (func)
		memcpy(dst, func, MIN(strlen(func), (size_t)31));
}

/* The error into e->rec, as the kernel's __save_error_info().  e->lock held. */
static void record(struct fs_errors *e, int err, uint64_t ino, uint64_t block, const char *func)
{
	struct ext4_super_block *r = &e->rec;
	uint64_t now = (uint64_t)MAX(fs_now().tv_sec, 0);

	if (now >= 1ull << 40)
		now = (1ull << 40) - 1;
	r->s_state = cpu_to_le16(le16(r->s_state) | EXT4_ERROR_FS);
	r->s_last_error_time = cpu_to_le32((uint32_t)now);
	r->s_last_error_time_hi = (uint8_t)(now >> 32);
	put_func(r->s_last_error_func, func);
	r->s_last_error_line = 0;
	r->s_last_error_ino = cpu_to_le32((uint32_t)ino);
	r->s_last_error_block = cpu_to_le64(block);
	r->s_last_error_errcode = errcode_of(err);
	if (!r->s_first_error_time && !r->s_first_error_time_hi) {
		r->s_first_error_time = r->s_last_error_time;
		r->s_first_error_time_hi = r->s_last_error_time_hi;
		memcpy(r->s_first_error_func, r->s_last_error_func, 32);
		r->s_first_error_line = 0;
		r->s_first_error_ino = r->s_last_error_ino;
		r->s_first_error_block = r->s_last_error_block;
		r->s_first_error_errcode = r->s_last_error_errcode;
	}
	r->s_error_count = cpu_to_le32(le32(r->s_error_count) + 1);
	if (!atomic_fetch_add(&e->seq, 1))
		snprintf(e->first_msg, sizeof(e->first_msg), "%.255s", last_error);
}

/* Append to this thread's message what the policy did. */
static void note_policy(const char *what)
{
	size_t n = strlen(last_error);

	if (n < sizeof(last_error))
		snprintf(last_error + n, sizeof(last_error) - n, "%s", what);
}

/* Record err (positive) and act as errors= says; the message is set.
 * force_ro (a journal abort): read-only even under errors=continue. */
static void handle_error(struct uext4_fs *fs, int err, uint64_t ino, uint64_t block,
			 const char *func, bool force_ro)
{
	struct fs_errors *e = fs ? fs->errs : NULL;
	int werr = 0;

	if (!e)
		return;
	last_recorded = true;
	if (e->writable && (force_ro || e->policy != UEXT4_ERRORS_CONTINUE))
		atomic_store(&fs->aborted, true);   /* before anything can commit */
	ulock_lock(&e->lock);
	e->journal_aborted |= force_ro;
	record(e, err, ino, block, func);
	if (e->writable)
		werr = write_image(fs, e);
	ulock_unlock(&e->lock);
	if (werr)
		note_policy(" (and recording the error in the superblock failed)");
	if (!e->writable)
		return;
	if (e->policy == UEXT4_ERRORS_PANIC) {
		fprintf(stderr, "uext4: panic (errors=panic): %s; nothing further is written\n",
			last_error);
		_exit(70);
	}
	if (force_ro)
		note_policy("; the journal is aborted and the file system is now read-only "
			    "(whatever errors= says, as the kernel's ext4): further writes are "
			    "refused until it is unmounted; run e2fsck");
	else if (e->policy == UEXT4_ERRORS_RO)
		note_policy("; the file system is now read-only (errors=remount-ro): further "
			    "writes are refused until it is unmounted; run e2fsck");
}

int fs_error(struct uext4_fs *fs, int err, uint64_t ino, uint64_t block, const char *func,
	     const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	set_msg(err == EUCLEAN ? "corrupt " : NULL, fmt, ap);
	va_end(ap);
	handle_error(fs, err, ino, block, func, false);
	return -err;
}

/*
 * A commit's write or flush failed with err (negative).  With a journal
 * this is jbd2_journal_abort(): a log block, the commit block, the
 * journal superblock or a checkpoint (home) write did not reach the
 * device, so nothing more may be logged or written home; the kernel's
 * ext4 then goes read-only whatever errors= says (ext4_journal_check_start()
 * finds the journal aborted and calls ext4_abort()), and errors=panic
 * panics.  Without a journal the metadata write-back failed (the kernel
 * notices the block device's write-back error as ext4_check_bdev_write_error()
 * does and calls ext4_error()): errors= decides.  Either way the error
 * goes into the superblock now if the device takes it, and again at
 * unmount (finish_aborted()).  The caller gets -EIO, as jbd2 reports a
 * failed commit, whatever the device said (the message keeps that);
 * -ENOMEM when the commit ran out of memory after taking its blocks.
 */
int fs_write_error(struct uext4_fs *fs, int err, bool journal, const char *func)
{
	char why[sizeof(last_error)];
	int code = err == -ENOMEM ? ENOMEM : EIO;

	snprintf(why, sizeof(why), "%s", last_error);
	fs_err(code, "%s: %s (%s)", journal ? "journal aborted: writing a transaction failed"
						 : "writing metadata back failed",
	       *why ? why : "device error", strerror(err < 0 ? -err : err));
	handle_error(fs, code, 0, 0, func, journal);
	return -code;
}

int fs_error_seen(struct uext4_fs *fs, int err, uint64_t ino, uint64_t block, const char *func)
{
	if (err == -EUCLEAN && !last_recorded)
		handle_error(fs, EUCLEAN, ino, block, func, false);
	return err;
}

/* uext4_record_error(): as fs_error() records, but the policy does not
 * act: the caller (a failed fill) still unmounts cleanly, and the fields
 * folded into every later superblock write keep the mark. */
int uext4_record_error(uext4_fs *fs, int err, const char *what)
{
	struct fs_errors *e = fs ? fs->errs : NULL;
	int werr;

	if (!e || !e->writable)
		return fs_err(EROFS, "recording an error: the file system is mounted read-only");
	ulock_lock(&e->lock);
	record(e, err < 0 ? -err : err, 0, 0, what);
	werr = write_image(fs, e);
	ulock_unlock(&e->lock);
	return werr ? fs_err(-werr, "recording an error in the superblock failed") : 0;
}
