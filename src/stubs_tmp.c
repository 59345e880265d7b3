/* TEMPORARY (removed at integration): weak stand-ins for modules being
 * written, so the tree links meanwhile.  A real module linked explicitly
 * overrides them. */
#include "internal.h"

__attribute__((weak)) int journal_open(struct uext4_fs *fs, struct journal **out) { *out = NULL; return 0; }
__attribute__((weak)) void journal_close(struct journal *j) {}
__attribute__((weak)) uint32_t journal_max_transaction(const struct journal *j) { return 1u << 30; }
__attribute__((weak)) uint32_t journal_first_tid(const struct journal *j) { return 1; }
__attribute__((weak)) int journal_commit(struct journal *j, uint32_t tid, const uint64_t *homes,
		   const uint8_t *copies, size_t n, const uint64_t *revoked, size_t nrevoked) { return -ENOSYS; }
__attribute__((weak)) int journal_mark_empty(struct journal *j) { return 0; }
__attribute__((weak)) int journal_recover(struct uext4_fs *fs, struct journal_replay *r)
{ return fs_err(ENOSYS, "journal recovery is not built in"); }
__attribute__((weak)) int orphan_init(struct uext4_fs *fs) { return 0; }
__attribute__((weak)) void orphan_destroy(struct uext4_fs *fs) {}
__attribute__((weak)) int orphan_add(struct handle *h, struct inode *inode) { return 0; }
__attribute__((weak)) int orphan_del(struct handle *h, struct inode *inode) { return 0; }
__attribute__((weak)) int orphan_cleanup(struct uext4_fs *fs, uint32_t *t, uint32_t *d) { *t = *d = 0; return 0; }
__attribute__((weak)) void orphan_umount(struct uext4_fs *fs) {}
__attribute__((weak)) struct bdev *bdev_open_overlay(struct bdev *base) { return NULL; }
