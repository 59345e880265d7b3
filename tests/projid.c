/*
 * projid.c - helper of tests/projid.sh (run only by it).
 *
 *   projid ops IMAGE      project ids through the library on IMAGE (made
 *                         with -O project): prints one line per step,
 *                         "NAME RESULT", RESULT OK, an errno name or a
 *                         value; projid.sh compares them with the kernel's
 *                         answers (written out there, from fs/ext4).
 *   projid set IMAGE PATH ID
 *                         uext4_set_projid() of PATH: prints OK or the
 *                         errno name (the refusals of images without the
 *                         feature, with 128-byte inodes, ...).
 */
#include "uext4.h"

#include <errno.h>
#include <linux/fs.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uext4_fs *fs;

static const char *result(int err)
{
	static char buf[32];

	if (err >= 0)
		return "OK";
	switch (-err) {
	case EPERM: return "EPERM";
	case EXDEV: return "EXDEV";
	case EOPNOTSUPP: return "EOPNOTSUPP";
	case EOVERFLOW: return "EOVERFLOW";
	case ENOENT: return "ENOENT";
	case EINVAL: return "EINVAL";
	}
	snprintf(buf, sizeof(buf), "errno%d", -err);
	return buf;
}

static uint64_t ino_of(const char *path)
{
	uint64_t ino = 0;

	if (uext4_resolve(fs, path, 0, &ino) < 0)
		fprintf(stderr, "projid: cannot resolve %s: %s\n", path, uext4_last_error());
	return ino;
}

static void step(const char *name, int err)
{
	printf("%s %s\n", name, result(err));
}

/* "NAME PROJID [P]": a path's id, and P where it has project inheritance. */
static void show(const char *path)
{
	struct uext4_fileattr fa = {0};
	int err = uext4_get_fileattr(fs, ino_of(path), &fa);

	if (err < 0)
		printf("get%s %s\n", path, result(err));
	else
		printf("get%s %u%s\n", path, fa.projid, (fa.flags & FS_PROJINHERIT_FL) ? " P" : "");
}

static int set_flags_add(const char *path, uint32_t add, uint32_t del)
{
	uint32_t fl;
	uint64_t ino = ino_of(path);
	int err = uext4_get_flags(fs, ino, &fl);

	return err < 0 ? err : uext4_set_flags(fs, ino, (fl | add) & ~del);
}

static int mkfile(const char *dir, const char *name)
{
	struct uext4_stat st;

	return uext4_create(fs, ino_of(dir), name, 0644, &st);
}

static int chown_to(const char *path, uint32_t uid)
{
	struct uext4_setattr a = {.valid = UEXT4_SET_UID | UEXT4_SET_GID, .uid = uid, .gid = uid};
	struct uext4_stat st;

	return uext4_setattr(fs, ino_of(path), &a, &st);
}

/* The sequence projid.sh runs on the kernel's terms. */
static void ops(void)
{
	struct uext4_stat st;
	struct uext4_fileattr fa;

	step("mkdir_a", uext4_mkdir(fs, 2, "a", 0755, &st));
	step("mkdir_b", uext4_mkdir(fs, 2, "b", 0755, &st));
	step("create_b_f", mkfile("/b", "f"));
	step("create_b_g", mkfile("/b", "g"));
	step("setproj_a_42", uext4_set_projid(fs, ino_of("/a"), 42));
	step("chattr_a_+P", set_flags_add("/a", FS_PROJINHERIT_FL, 0));
	step("chattr_b_f_+P", set_flags_add("/b/f", FS_PROJINHERIT_FL, 0));
	/* Inheritance: everything made in /a is in project 42; a directory
	 * takes +P too, a file does not show it. */
	step("create_a_f", mkfile("/a", "f"));
	step("mkdir_a_d", uext4_mkdir(fs, ino_of("/a"), "d", 0755, &st));
	step("symlink_a_l", uext4_symlink(fs, ino_of("/a"), "l", "f", &st));
	step("create_a_d_x", mkfile("/a/d", "x"));
	show("/a");
	show("/a/f");
	show("/a/d");
	show("/a/l");
	show("/a/d/x");
	show("/b/f");
	/* Into /a (+P, 42) only what is in 42: EXDEV. */
	step("rename_b_f_to_a", uext4_rename(fs, ino_of("/b"), "f", ino_of("/a"), "f2", 0));
	step("link_b_f_to_a", uext4_link(fs, ino_of("/b/f"), ino_of("/a"), "f3", &st));
	step("exchange_a_f_b_f", uext4_rename(fs, ino_of("/a"), "f", ino_of("/b"), "f",
					      UEXT4_RENAME_EXCHANGE));
	/* Out of /a into a directory without +P: allowed. */
	step("rename_a_f_to_b", uext4_rename(fs, ino_of("/a"), "f", ino_of("/b"), "h", 0));
	step("link_a_d_x_to_b", uext4_link(fs, ino_of("/a/d/x"), ino_of("/b"), "x", &st));
	/* ... and back, being in 42. */
	step("rename_b_h_to_a", uext4_rename(fs, ino_of("/b"), "h", ino_of("/a"), "h", 0));
	/* Renaming inside /a a file of another project: EXDEV too (the
	 * kernel checks the target directory whatever the source). */
	step("setproj_a_h_7", uext4_set_projid(fs, ino_of("/a/h"), 7));
	step("rename_a_h_in_a", uext4_rename(fs, ino_of("/a"), "h", ino_of("/a"), "h2", 0));
	step("setproj_a_h_42", uext4_set_projid(fs, ino_of("/a/h"), 42));
	step("rename_a_h_in_a", uext4_rename(fs, ino_of("/a"), "h", ino_of("/a"), "h2", 0));
	/* In project 42 now: /b/g may come in. */
	step("setproj_b_g_42", uext4_set_projid(fs, ino_of("/b/g"), 42));
	step("rename_b_g_to_a", uext4_rename(fs, ino_of("/b"), "g", ino_of("/a"), "g", 0));
	step("link_a_g_to_a", uext4_link(fs, ino_of("/a/g"), ino_of("/a"), "g2", &st));
	show("/a/g");
	/* -P: nothing is checked any more. */
	step("chattr_a_-P", set_flags_add("/a", 0, FS_PROJINHERIT_FL));
	step("rename_b_f_to_a", uext4_rename(fs, ino_of("/b"), "f", ino_of("/a"), "f", 0));
	show("/a/f");
	step("chattr_a_+P", set_flags_add("/a", FS_PROJINHERIT_FL, 0));
	/* Who may: the owner or root; an immutable inode keeps its id. */
	step("create_o", mkfile("/", "o"));
	step("chown_o_1000", chown_to("/o", 1000));
	uext4_set_caller(1001, 1001);
	step("nonowner_setproj_o_5", uext4_set_projid(fs, ino_of("/o"), 5));
	uext4_set_caller(1000, 1000);
	step("owner_setproj_o_5", uext4_set_projid(fs, ino_of("/o"), 5));
	uext4_set_caller(0, 0);
	step("chattr_o_+i", set_flags_add("/o", FS_IMMUTABLE_FL, 0));
	step("immutable_setproj_o_6", uext4_set_projid(fs, ino_of("/o"), 6));
	/* FSSETXATTR clearing +i and setting the id at once: allowed. */
	fa.flags = 0;
	step("get_o", uext4_get_fileattr(fs, ino_of("/o"), &fa));
	fa.flags &= ~(uint32_t)FS_IMMUTABLE_FL;
	fa.projid = 6;
	step("fileattr_o_-i_6", uext4_set_fileattr(fs, ino_of("/o"), &fa));
	show("/o");
	step("setproj_o_0", uext4_set_projid(fs, ino_of("/o"), 0));
	show("/o");
	step("setproj_b_65536", uext4_set_projid(fs, ino_of("/b"), 65536));
	show("/b");
}

int main(int argc, char **argv)
{
	struct uext4_opts o = {0};
	int err;

	if (argc < 3 || (strcmp(argv[1], "ops") && (strcmp(argv[1], "set") || argc != 5))) {
		fprintf(stderr, "usage: projid ops IMAGE | projid set IMAGE PATH ID\n");
		return 2;
	}
	if ((err = uext4_mount(argv[2], &o, &fs)) < 0) {
		fprintf(stderr, "projid: mount %s: %s\n", argv[2], uext4_last_error());
		return 1;
	}
	if (!strcmp(argv[1], "ops"))
		ops();
	else
		step("set", uext4_set_projid(fs, ino_of(argv[3]), (uint32_t)strtoul(argv[4], NULL, 10)));
	if ((err = uext4_umount(fs)) < 0) {
		fprintf(stderr, "projid: umount: %s\n", uext4_last_error());
		return 1;
	}
	return 0;
}
