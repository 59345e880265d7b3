/*
 * fuzz/fuzz_write.c - (b): mount read-write, a fixed script of writes,
 * unmount; mount again (recovery of whatever the script left) and walk.
 * Errors are expected on a hostile image; crashes, leaks and hangs are not.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void write_file(uext4_fs *fs, uint64_t ino, uint64_t off, size_t len)
{
	static char buf[20000];
	uext4_file *f;

	memset(buf, 'w', sizeof(buf));
	if (uext4_open(fs, ino, O_RDWR, &f))
		return;
	uext4_pwrite(f, buf, len < sizeof(buf) ? len : sizeof(buf), off);
	uext4_release(f);
}

static void truncate_to(uext4_fs *fs, uint64_t ino, uint64_t size)
{
	struct uext4_setattr a = { .valid = UEXT4_SET_SIZE, .size = size };

	uext4_setattr(fs, ino, &a, NULL);
}

/* What a user would do: on new names and on the names the image has. */
static void write_script(uext4_fs *fs)
{
	struct uext4_stat st, d;

	if (!uext4_create(fs, UEXT4_ROOT_INO, "fz_new", 0644, &st)) {
		write_file(fs, st.ino, 0, 5000);
		write_file(fs, st.ino, 70000, 3000);
		uext4_setxattr(fs, st.ino, "user.fz", "value", 5, 0);
		truncate_to(fs, st.ino, 1000);
		uext4_rename(fs, UEXT4_ROOT_INO, "fz_new", UEXT4_ROOT_INO, "fz_moved", 0);
	}
	if (!uext4_mkdir(fs, UEXT4_ROOT_INO, "fz_dir", 0755, &d)) {
		char name[16];
		for (int i = 0; i < 40; i++) {
			snprintf(name, sizeof(name), "e%02d", i);
			uext4_mknod(fs, d.ino, name, S_IFREG | 0600, 0, NULL);
		}
		uext4_symlink(fs, d.ino, "ln", "../fz_moved", NULL);
		uext4_rename(fs, UEXT4_ROOT_INO, "fz_moved", d.ino, "e05", 0);
		for (int i = 0; i < 40; i += 3) {
			snprintf(name, sizeof(name), "e%02d", i);
			uext4_unlink(fs, d.ino, name);
		}
	}
	/* names the seed images have (fuzz/mkcorpus.sh) */
	if (!uext4_lookup(fs, UEXT4_ROOT_INO, "file", &st)) {
		write_file(fs, st.ino, 100, 9000);
		uext4_setxattr(fs, st.ino, "user.big", "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx", 40, 0);
		uext4_removexattr(fs, st.ino, "user.a");
		truncate_to(fs, st.ino, 3);
	}
	uext4_unlink(fs, UEXT4_ROOT_INO, "link");
	uext4_rename(fs, UEXT4_ROOT_INO, "dir", UEXT4_ROOT_INO, "dir2", 0);
	uext4_unlink(fs, UEXT4_ROOT_INO, "sparse");
	uext4_rmdir(fs, UEXT4_ROOT_INO, "empty");
	uext4_mkdir(fs, UEXT4_ROOT_INO, "empty", 0700, NULL);
	uext4_sync(fs);
	uext4_rmdir(fs, UEXT4_ROOT_INO, "fz_dir");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *img = fuzz_copy_input(data, size);
	uext4_fs *fs;

	if (img && !fuzz_mount_buffer(img, size, 0, &fs)) {
		write_script(fs);
		uext4_umount(fs);
		if (!fuzz_mount_buffer(img, size, 0, &fs)) {
			fuzz_walk(fs);
			uext4_umount(fs);
		}
	}
	free(img);
	return 0;
}
