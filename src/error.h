/*
 * error.h - error messages, and errors recorded on disk (error.c).
 */
#ifndef UEXT4_ERROR_H
#define UEXT4_ERROR_H

#include <stdbool.h>
#include <stdint.h>

/* Record a message for uext4_last_error() and return -err. */
int fs_err(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Same, for corruption: message prefixed "corrupt <what>:", returns -EUCLEAN. */
int fs_corrupt(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void fs_clear_err(void);
/* Of two steps that both had to run, the first one's error (0: none). */
static inline int first_err(int err, int later)
{
	return err ? err : later;
}
struct uext4_fs;
/*
 * Corruption (or a failed metadata write) met by an operation on a mounted
 * file system: besides the message (as fs_err()), record it on disk as the
 * kernel's __ext4_error() does (s_state |= EXT4_ERROR_FS, s_error_count,
 * s_first_error_* / s_last_error_*: time, inode, block, function, errno;
 * the superblock written at once, outside the journal) and act as the
 * mount's errors= policy says: continue; remount-ro (writes refused with
 * EROFS from now on, reads still served); panic (the process exits without
 * writing anything further).  ino and block may be 0.  Returns -err.
 */
int fs_error(struct uext4_fs *fs, int err, uint64_t ino, uint64_t block, const char *func,
	     const char *fmt, ...) __attribute__((format(printf, 6, 7)));
#define FS_ERROR(fs, err, ino, block, ...) \
	fs_error((fs), (err), (ino), (block), __func__, __VA_ARGS__)
/* A write path got err (negative) back from a check shared with the read
 * path, which has set the message: if it is corruption (-EUCLEAN), record
 * it and act as fs_error() does, keeping the message.  Returns err. */
int fs_error_seen(struct uext4_fs *fs, int err, uint64_t ino, uint64_t block, const char *func);
#define FS_ERROR_SEEN(fs, err, ino, block) fs_error_seen((fs), (err), (ino), (block), __func__)
/* A commit's write or flush failed (err negative, message set): with a
 * journal, abort it (read-only whatever errors= says, as jbd2 and ext4);
 * without, record it and act as errors= says.  Returns -EIO (-ENOMEM for
 * a commit out of memory). */
int fs_write_error(struct uext4_fs *fs, int err, bool journal, const char *func);
/* The error state of a mount (error.c).  fs_errors_init() at mount once
 * the superblock is read (before a journal replay, which may record
 * errors too): the policy (opts, else s_errors) and the error fields
 * recorded so far. */
struct ext4_super_block;
struct uext4_opts;
/* Puts sb on the device now, checksummed and flushed (the mount's: the
 * error record calls nothing above its layer).  0 or -errno. */
typedef int (*fs_write_super_fn)(struct uext4_fs *fs, struct ext4_super_block *sb);
int fs_errors_init(struct uext4_fs *fs, const struct uext4_opts *o, fs_write_super_fn write_super);
void fs_errors_destroy(struct uext4_fs *fs);
/* Commit (super_write): the recorded error fields into sb (the caller
 * sets its checksum); sb is then the image later error writes start from. */
void fs_errors_fold(struct uext4_fs *fs, struct ext4_super_block *sb);
/* The commit that folded it wrote it: later error writes start from it. */
void fs_errors_committed(struct uext4_fs *fs);
/* The recorded error fields into a copy of the superblock (uext4_info). */
void fs_errors_merge(struct uext4_fs *fs, struct ext4_super_block *sb);
/* Errors recorded since mount (the commit compares it around its writes). */
uint32_t fs_errors_seq(struct uext4_fs *fs);
/* Write the last committed superblock with the error fields straight to
 * the device and flush it; clear_incompat / set_state change that image
 * first (the unmount of an aborted mount). */
int fs_errors_write_super(struct uext4_fs *fs, uint32_t clear_incompat, uint16_t set_state);
/* Writes refused after an error (errors=remount-ro or panic): -EROFS with
 * a message naming the first error. */
int fs_errors_refuse(struct uext4_fs *fs);
/* Journal replay rewrote the superblock: put back the error fields of the
 * one read before (as the kernel's ext4_load_journal()). */
void fs_errors_keep_across_replay(struct ext4_super_block *replayed,
				  const struct ext4_super_block *before);

#endif
