/*
 * orphan.c - orphan inode checks, driven by tests/orphan.sh (subcommands).
 *
 *   orphan unlinkopen IMG        a file unlinked while open lives until its
 *                                close; its space comes back only then
 *   orphan kill IMG N            N files written, opened, unlinked, sync,
 *                                then _exit(0) without unmounting
 *   orphan killtrunc IMG         a shrinking truncate cut between its two
 *                                handles (orphan added + i_size set), _exit
 *   orphan mount IMG             read-write mount (runs orphan cleanup),
 *                                prints what it did and statfs, unmounts
 *   orphan recover IMG           the same through uext4_recover()
 *   orphan statfs IMG            prints free blocks / inodes (read-write
 *                                mount + unmount)
 *
 * Prints "key=value" lines the script parses; exit 0 ok, 1 failure.
 */
#include "icache.h"
#include "inode.h"
#include "internal.h"
#include "lock.h"
#include "ondisk.h"
#include "orphan.h"
#include "trans.h"
#include "uext4.h"
#include "t.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>


static void die(const char *what, int err)
{
	printf("FAIL %s: %s (%s)\n", what, strerror(err < 0 ? -err : err), uext4_last_error());
	exit(1);
}

static uext4_fs *mount_rw(const char *img)
{
	struct uext4_opts o = {0};
	uext4_fs *fs;
	int err = uext4_mount(img, &o, &fs);

	if (err)
		die("mount", err);
	return fs;
}

static void fill(uint8_t *buf, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		buf[i] = (uint8_t)(seed * 131 + i * 7 + (i >> 9));
}

static void get_statfs(uext4_fs *fs, struct uext4_statfs *st)
{
	int err = uext4_sync(fs);

	if (err || (err = uext4_statfs(fs, st)))
		die("sync/statfs", err);
}

static bool on_orphan_list(uext4_fs *fs, uint64_t ino)
{
	struct inode *n;
	bool on;

	if (iget(fs, ino, &n))
		return false;
	on = atomic_load(&n->istate) & (INODE_ORPHAN_FILE | INODE_ORPHAN_LIST);
	iput(fs, n);
	return on;
}

/* (a) unlinked while open: data readable and writable, space kept until close. */
static int cmd_unlinkopen(const char *img)
{
	uext4_fs *fs = mount_rw(img);
	struct uext4_statfs s0, s1, s2, s3;
	struct uext4_stat st;
	uext4_file *f;
	size_t len = 256 * 1024;
	uint8_t *buf = malloc(len), *back = malloc(len);
	int err;

	get_statfs(fs, &s0);
	if ((err = uext4_create(fs, UEXT4_ROOT_INO, "victim", 0644, &st)))
		die("create", err);
	if ((err = uext4_open(fs, st.ino, O_RDWR, &f)))
		die("open", err);
	fill(buf, len, 1);
	CHECK(uext4_pwrite(f, buf, len, 0) == (ssize_t)len, "write %zu bytes to inode %llu", len,
	      (unsigned long long)st.ino);
	get_statfs(fs, &s1);
	CHECK(s1.blocks_free < s0.blocks_free, "blocks used by the file: %llu",
	      (unsigned long long)(s0.blocks_free - s1.blocks_free));
	if ((err = uext4_unlink(fs, UEXT4_ROOT_INO, "victim")))
		die("unlink", err);
	CHECK(uext4_lookup(fs, UEXT4_ROOT_INO, "victim", &st) == -ENOENT, "name is gone");
	CHECK(on_orphan_list(fs, st.ino), "inode %llu is on an orphan list",
	      (unsigned long long)st.ino);
	get_statfs(fs, &s2);
	CHECK(s2.blocks_free == s1.blocks_free && s2.inodes_free == s1.inodes_free,
	      "space not back while open: free blocks %llu (was %llu), inodes %llu (was %llu)",
	      (unsigned long long)s2.blocks_free, (unsigned long long)s1.blocks_free,
	      (unsigned long long)s2.inodes_free, (unsigned long long)s1.inodes_free);
	memset(back, 0, len);
	CHECK(uext4_pread(f, back, len, 0) == (ssize_t)len && memcmp(buf, back, len) == 0,
	      "read back through the open handle");
	fill(buf, 65536, 2);
	CHECK(uext4_pwrite(f, buf, 65536, len) == 65536, "write 64 KiB more while unlinked");
	CHECK(uext4_pread(f, back, 65536, len) == 65536 && memcmp(buf, back, 65536) == 0,
	      "read that back");
	if ((err = uext4_release(f)))
		die("release", err);
	get_statfs(fs, &s3);
	CHECK(s3.blocks_free == s0.blocks_free && s3.inodes_free == s0.inodes_free,
	      "space back after close: free blocks %llu (before create %llu), inodes %llu (%llu)",
	      (unsigned long long)s3.blocks_free, (unsigned long long)s0.blocks_free,
	      (unsigned long long)s3.inodes_free, (unsigned long long)s0.inodes_free);
	struct orphan_stats os;
	orphan_get_stats(fs, &os);
	CHECK(os.file_free == os.file_capacity && os.list_len == 0 &&
	      le32(fs->sb.s_last_orphan) == 0, "orphan lists empty again (file %u/%u free)",
	      os.file_free, os.file_capacity);
	free(buf);
	free(back);
	if ((err = uext4_umount(fs)))
		die("umount", err);
	return t_failures ? 1 : 0;
}

/* (b)/(c) N files unlinked while open, then the process dies. */
static int cmd_kill(const char *img, unsigned n)
{
	uext4_fs *fs = mount_rw(img);
	uext4_file **files = calloc(n, sizeof(*files));
	size_t len = 12 * 1024;
	uint8_t *buf = malloc(len);
	struct orphan_stats os;
	int err;

	for (unsigned i = 0; i < n; i++) {
		struct uext4_stat st;
		char name[32];

		snprintf(name, sizeof(name), "k%u", i);
		if ((err = uext4_create(fs, UEXT4_ROOT_INO, name, 0644, &st)) ||
		    (err = uext4_open(fs, st.ino, O_RDWR, &files[i])))
			die("create/open", err);
		fill(buf, len, i);
		if (uext4_pwrite(files[i], buf, len, 0) != (ssize_t)len)
			die("write", EIO);
	}
	if ((err = uext4_sync(fs)))
		die("sync", err);
	for (unsigned i = 0; i < n; i++) {
		char name[32];

		snprintf(name, sizeof(name), "k%u", i);
		if ((err = uext4_unlink(fs, UEXT4_ROOT_INO, name)))
			die("unlink", err);
	}
	if ((err = uext4_sync(fs)))
		die("sync", err);
	orphan_get_stats(fs, &os);
	printf("orphans_in_file=%u\n", os.file_capacity - os.file_free);
	printf("orphans_in_list=%u\n", os.list_len);
	printf("last_orphan=%u\n", le32(fs->sb.s_last_orphan));
	fflush(stdout);
	_exit(os.file_capacity - os.file_free + os.list_len == n ? 0 : 1);
}

/* (d) crash between the two handles of a shrinking truncate: the inode is
 * on an orphan list with i_size cut and its blocks still allocated. */
static int cmd_killtrunc(const char *img)
{
	uext4_fs *fs = mount_rw(img);
	struct uext4_stat st;
	uext4_file *f;
	struct inode *n;
	struct handle *h;
	size_t len = 200 * 1024;
	uint8_t *buf = malloc(len);
	int err;

	if ((err = uext4_create(fs, UEXT4_ROOT_INO, "cut", 0644, &st)) ||
	    (err = uext4_open(fs, st.ino, O_RDWR, &f)))
		die("create/open", err);
	fill(buf, len, 9);
	if (uext4_pwrite(f, buf, len, 0) != (ssize_t)len)
		die("write", EIO);
	if ((err = uext4_sync(fs)) || (err = iget(fs, st.ino, &n)))
		die("sync/iget", err);
	urw_wrlock(&n->lock);
	if ((err = handle_begin(fs, &h)))
		die("handle", err);
	if ((err = orphan_add(h, n)))
		die("orphan_add", err);
	n->size = 5000;
	if ((err = inode_write(h, n)))
		die("inode_write", err);
	handle_end(h);
	urw_unlock(&n->lock);
	if ((err = uext4_sync(fs)))
		die("sync", err);
	printf("ino=%llu\n", (unsigned long long)st.ino);
	printf("last_orphan=%u\n", le32(fs->sb.s_last_orphan));
	fflush(stdout);
	_exit(0);
}

static int cmd_mount(const char *img)
{
	uext4_fs *fs = mount_rw(img);
	struct uext4_recovery r;
	struct uext4_statfs s;
	int err;

	if ((err = uext4_recovery_info(fs, &r)))
		die("recovery_info", err);
	printf("orphans_truncated=%u\n", r.orphans_truncated);
	printf("orphans_deleted=%u\n", r.orphans_deleted);
	get_statfs(fs, &s);
	printf("blocks_free=%llu\n", (unsigned long long)s.blocks_free);
	printf("inodes_free=%llu\n", (unsigned long long)s.inodes_free);
	if ((err = uext4_umount(fs)))
		die("umount", err);
	return 0;
}

/* uext4_recover(): mount read-write and unmount, reporting what it did. */
static int cmd_recover(const char *img)
{
	struct uext4_recovery r;
	int err = uext4_recover(img, &r);

	if (err)
		die("uext4_recover", err);
	printf("orphans_truncated=%u\n", r.orphans_truncated);
	printf("orphans_deleted=%u\n", r.orphans_deleted);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 3 && !strcmp(argv[1], "recover"))
		return cmd_recover(argv[2]);
	if (argc >= 3 && !strcmp(argv[1], "unlinkopen"))
		return cmd_unlinkopen(argv[2]);
	if (argc >= 4 && !strcmp(argv[1], "kill"))
		return cmd_kill(argv[2], (unsigned)atoi(argv[3]));
	if (argc >= 3 && !strcmp(argv[1], "killtrunc"))
		return cmd_killtrunc(argv[2]);
	if (argc >= 3 && (!strcmp(argv[1], "mount") || !strcmp(argv[1], "statfs")))
		return cmd_mount(argv[2]);
	fprintf(stderr, "usage: orphan unlinkopen|kill|killtrunc|mount|recover|statfs IMG [N]\n");
	return 2;
}
