/*
 * unit_acl.c - POSIX ACLs the library applies itself (src/acl.c), through
 * the public API, against what the kernel's posix_acl_create() and
 * posix_acl_chmod() give (worked out by hand below; tests/acl.sh compares
 * the same rules with the kernel's ext4 itself):
 *   - no default ACL on the parent: create/mknod/mkdir clear the caller's
 *     umask (uext4_set_umask()) from the mode, and store no ACL;
 *   - a default ACL: the umask is ignored, the mode is masked by the ACL,
 *     the new inode gets it as its access ACL (owner, mask and other
 *     entries masked by the mode), a directory also as its default ACL; a
 *     default ACL the mode can say all of gives no access ACL; symlinks
 *     get nothing;
 *   - setattr of the mode rewrites the access ACL's owner, mask and other
 *     entries, and one that no longer needs an ACL loses it;
 *   - failure injection: create and mkdir in the directory with a default
 *     ACL, with the N-th metadata read or block/inode allocation failing
 *     (EIO, ENOSPC), for every N until it succeeds: a failed one leaves
 *     the free block and inode counts and the directory as they were, and
 *     e2fsck -fn is clean; with 128-byte inodes the ACLs need an xattr
 *     block (its allocation fails too), with 256-byte ones they fit in the
 *     inode and cost no block.
 * Exit 0 pass, 1 fail, 77 skip.
 */
#include "fault.h"
#include "uext4.h"
#include "t.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#define A_USER_OBJ 0x01
#define A_USER 0x02
#define A_GROUP_OBJ 0x04
#define A_GROUP 0x08
#define A_MASK 0x10
#define A_OTHER 0x20
#define NOID 0xFFFFFFFFu

static char img[300], trial_img[300];

/* An ACL in the setxattr(2) format from (tag, perm, id) triples. */
struct xacl {
	uint8_t b[4 + 16 * 8];
	size_t len;
};

static struct xacl xacl_of(const uint32_t (*e)[3], size_t n)
{
	struct xacl a = { .len = 4 + n * 8 };
	uint32_t v = 2;

	memcpy(a.b, &v, 4);
	for (size_t i = 0; i < n; i++) {
		uint16_t tag = (uint16_t)e[i][0], perm = (uint16_t)e[i][1];

		memcpy(a.b + 4 + i * 8, &tag, 2);
		memcpy(a.b + 6 + i * 8, &perm, 2);
		memcpy(a.b + 8 + i * 8, &e[i][2], 4);
	}
	return a;
}
#define XACL(...) ({ static const uint32_t e_[][3] = { __VA_ARGS__ }; \
		     xacl_of(e_, sizeof(e_) / sizeof(e_[0])); })

static uint64_t ino_of(uext4_fs *fs, const char *path)
{
	uint64_t ino = 0;

	return uext4_resolve(fs, path, 0, &ino) ? 0 : ino;
}

static uint32_t mode_of(uext4_fs *fs, const char *path)
{
	struct uext4_stat st;

	return uext4_stat_path(fs, path, &st) ? 0 : st.mode;
}

/* path's ACL name equals want (NULL: absent). */
static void check_acl(uext4_fs *fs, const char *path, const char *name, const struct xacl *want)
{
	uint8_t buf[512];
	ssize_t n = uext4_getxattr(fs, ino_of(fs, path), name, buf, sizeof(buf));

	if (!want) {
		T_CHECK(n == -ENODATA, "%s %s: %zd (%s), want none", path, name, n,
			uext4_last_error());
		return;
	}
	T_CHECK(n == (ssize_t)want->len && !memcmp(buf, want->b, want->len),
		"%s %s: %zd bytes, want %zu (or other entries)", path, name, n, want->len);
}

static const char *ACC = "system.posix_acl_access", *DEF = "system.posix_acl_default";

/* /a: default ACL with a named user and group; /m: one the mode can say. */
static int setup(uext4_fs *fs)
{
	struct xacl d = XACL({A_USER_OBJ, 7, NOID}, {A_USER, 7, 1000}, {A_GROUP_OBJ, 5, NOID},
			     {A_GROUP, 6, 3000}, {A_MASK, 7, NOID}, {A_OTHER, 0, NOID});
	struct xacl m = XACL({A_USER_OBJ, 7, NOID}, {A_GROUP_OBJ, 5, NOID}, {A_OTHER, 5, NOID});
	int err = 0;

	err |= uext4_mkdir(fs, UEXT4_ROOT_INO, "a", 0755, NULL);
	err |= uext4_mkdir(fs, UEXT4_ROOT_INO, "m", 0755, NULL);
	err |= uext4_mkdir(fs, UEXT4_ROOT_INO, "p", 0755, NULL);
	if (err)
		return -1;
	err |= uext4_setxattr(fs, ino_of(fs, "/a"), DEF, d.b, d.len, 0);
	err |= uext4_setxattr(fs, ino_of(fs, "/m"), DEF, m.b, m.len, 0);
	return err ? -1 : 0;
}

static void semantics(uext4_fs *fs)
{
	uint64_t a = ino_of(fs, "/a"), m = ino_of(fs, "/m"), p = ino_of(fs, "/p");

	uext4_set_umask(022);
	T_CHECK(!uext4_create(fs, p, "f", 0666, NULL), "create /p/f: %s", uext4_last_error());
	T_CHECK(!uext4_mkdir(fs, p, "d", 0777, NULL), "mkdir /p/d: %s", uext4_last_error());
	T_CHECK(mode_of(fs, "/p/f") == (S_IFREG | 0644), "/p/f mode %o", mode_of(fs, "/p/f"));
	T_CHECK(mode_of(fs, "/p/d") == (S_IFDIR | 0755), "/p/d mode %o", mode_of(fs, "/p/d"));
	check_acl(fs, "/p/f", ACC, NULL);

	/* 0666 & the default ACL: owner rw-, mask rw- (rwx & rw-), other ---. */
	T_CHECK(!uext4_create(fs, a, "f", 0666, NULL), "create /a/f: %s", uext4_last_error());
	T_CHECK(mode_of(fs, "/a/f") == (S_IFREG | 0660), "/a/f mode %o", mode_of(fs, "/a/f"));
	struct xacl fa = XACL({A_USER_OBJ, 6, NOID}, {A_USER, 7, 1000}, {A_GROUP_OBJ, 5, NOID},
			      {A_GROUP, 6, 3000}, {A_MASK, 6, NOID}, {A_OTHER, 0, NOID});
	check_acl(fs, "/a/f", ACC, &fa);
	check_acl(fs, "/a/f", DEF, NULL);

	/* A directory keeps the default ACL as its own. */
	T_CHECK(!uext4_mkdir(fs, a, "d", 0777, NULL), "mkdir /a/d: %s", uext4_last_error());
	T_CHECK(mode_of(fs, "/a/d") == (S_IFDIR | 0770), "/a/d mode %o", mode_of(fs, "/a/d"));
	struct xacl da = XACL({A_USER_OBJ, 7, NOID}, {A_USER, 7, 1000}, {A_GROUP_OBJ, 5, NOID},
			      {A_GROUP, 6, 3000}, {A_MASK, 7, NOID}, {A_OTHER, 0, NOID});
	check_acl(fs, "/a/d", ACC, &da);
	check_acl(fs, "/a/d", DEF, &da);
	/* ... and passes it on. */
	T_CHECK(!uext4_mknod(fs, ino_of(fs, "/a/d"), "fifo", S_IFIFO | 0644, 0, NULL),
		"mknod /a/d/fifo: %s", uext4_last_error());
	T_CHECK(mode_of(fs, "/a/d/fifo") == (S_IFIFO | 0640), "/a/d/fifo mode %o",
		mode_of(fs, "/a/d/fifo"));
	struct xacl pa = XACL({A_USER_OBJ, 6, NOID}, {A_USER, 7, 1000}, {A_GROUP_OBJ, 5, NOID},
			      {A_GROUP, 6, 3000}, {A_MASK, 4, NOID}, {A_OTHER, 0, NOID});
	check_acl(fs, "/a/d/fifo", ACC, &pa);
	T_CHECK(!uext4_symlink(fs, a, "l", "f", NULL), "symlink /a/l: %s", uext4_last_error());
	check_acl(fs, "/a/l", ACC, NULL);

	/* The umask does not apply under a default ACL; one the mode can say
	 * all of stores no access ACL. */
	uext4_set_umask(077);
	T_CHECK(!uext4_create(fs, m, "f", 0666, NULL), "create /m/f: %s", uext4_last_error());
	T_CHECK(mode_of(fs, "/m/f") == (S_IFREG | 0644), "/m/f mode %o", mode_of(fs, "/m/f"));
	check_acl(fs, "/m/f", ACC, NULL);
	uext4_set_umask(0);

	/* chmod rewrites owner, mask and other; named entries stay. */
	struct uext4_setattr sa = { .valid = UEXT4_SET_MODE, .mode = 0604 };

	T_CHECK(!uext4_setattr(fs, ino_of(fs, "/a/f"), &sa, NULL), "chmod /a/f: %s",
		uext4_last_error());
	struct xacl fc = XACL({A_USER_OBJ, 6, NOID}, {A_USER, 7, 1000}, {A_GROUP_OBJ, 5, NOID},
			      {A_GROUP, 6, 3000}, {A_MASK, 0, NOID}, {A_OTHER, 4, NOID});
	check_acl(fs, "/a/f", ACC, &fc);
	T_CHECK(mode_of(fs, "/a/f") == (S_IFREG | 0604), "/a/f mode %o", mode_of(fs, "/a/f"));
	/* The default ACL of a directory is not touched by its chmod. */
	sa.mode = 0700;
	T_CHECK(!uext4_setattr(fs, ino_of(fs, "/a/d"), &sa, NULL), "chmod /a/d: %s",
		uext4_last_error());
	check_acl(fs, "/a/d", DEF, &da);
	struct xacl dc = XACL({A_USER_OBJ, 7, NOID}, {A_USER, 7, 1000}, {A_GROUP_OBJ, 5, NOID},
			      {A_GROUP, 6, 3000}, {A_MASK, 0, NOID}, {A_OTHER, 0, NOID});
	check_acl(fs, "/a/d", ACC, &dc);
}

/* ------------------------------------------------------------ undo */

static int op_create(uext4_fs *fs) { return uext4_create(fs, ino_of(fs, "/a"), "new", 0666, NULL); }
static int op_mkdir(uext4_fs *fs) { return uext4_mkdir(fs, ino_of(fs, "/a"), "new", 0777, NULL); }

struct counts {
	uint64_t blocks_free, inodes_free;
	uint32_t dir_nlink;
};

static void counts_of(uext4_fs *fs, struct counts *c)
{
	struct uext4_statfs sf;
	struct uext4_stat st;

	uext4_statfs(fs, &sf);
	uext4_stat_path(fs, "/a", &st);
	*c = (struct counts){ sf.blocks_free, sf.inodes_free, st.nlink };
}

/* 1: ran without reaching point n; 0: went on; -1: a check failed. */
static int trial(const char *what, int (*op)(uext4_fs *), unsigned sites, int ferr, unsigned n)
{
	struct uext4_opts o = {0};
	struct counts before, after;
	uext4_fs *fs;
	int err, res = 0;

	if (t_sh("cp %s %s", img, trial_img) || uext4_mount(trial_img, &o, &fs)) {
		fprintf(stderr, "FAIL %s: cannot mount the copy: %s\n", what, uext4_last_error());
		return -1;
	}
	counts_of(fs, &before);
	uext4_umount(fs);
	if (uext4_mount(trial_img, &o, &fs))
		return -1;
	fault_inject_arm(sites, n, ferr);
	err = op(fs);
	bool fired = fault_inject_fired();
	fault_inject_disarm();
	if (!fired)
		res = 1;
	if (err && !fired) {
		fprintf(stderr, "FAIL %s: failed without injection: %s\n", what, uext4_last_error());
		res = -1;
	}
	if (err && fired) {
		char msg[512];

		snprintf(msg, sizeof(msg), "%s", uext4_last_error());
		counts_of(fs, &after);
		if (before.blocks_free != after.blocks_free ||
		    before.inodes_free != after.inodes_free || before.dir_nlink != after.dir_nlink ||
		    ino_of(fs, "/a/new")) {
			fprintf(stderr, "FAIL %s point %u: the failed operation (%s) left changes: "
				"free blocks %llu -> %llu, inodes %llu -> %llu, /a links %u -> %u, "
				"/a/new %s\n", what, n,
				msg, (unsigned long long)before.blocks_free,
				(unsigned long long)after.blocks_free,
				(unsigned long long)before.inodes_free,
				(unsigned long long)after.inodes_free, before.dir_nlink, after.dir_nlink,
				ino_of(fs, "/a/new") ? "exists" : "absent");
			res = -1;
		}
		err = op(fs);
		T_CHECK(err == 0, "%s point %u: the retry: %s", what, n, uext4_last_error());
	}
	if (!err) {
		/* create 0666 -> 0660, mkdir 0777 -> 0770 under /a's ACL */
		uint32_t md = mode_of(fs, "/a/new");
		T_CHECK((md & 0777) == (S_ISDIR(md) ? 0770u : 0660u), "%s point %u: mode %o", what,
			n, md);
		uint8_t buf[256];
		T_CHECK(uext4_getxattr(fs, ino_of(fs, "/a/new"), ACC, buf, sizeof(buf)) == 52,
			"%s point %u: no access ACL: %s", what, n, uext4_last_error());
	}
	if (uext4_umount(fs)) {
		fprintf(stderr, "FAIL %s: unmount: %s\n", what, uext4_last_error());
		res = -1;
	}
	if (t_sh("e2fsck -fn %s > %s.fsck 2>&1", trial_img, trial_img)) {
		fprintf(stderr, "FAIL %s point %u: e2fsck -fn is not clean:\n", what, n);
		t_sh("head -20 %s.fsck >&2", trial_img);
		res = -1;
	}
	return res;
}

static void sweep(const char *flavour, const char *name, int (*op)(uext4_fs *), unsigned sites,
		  int ferr)
{
	char what[200];

	snprintf(what, sizeof(what), "%s %s, %s failing with %s", flavour, name,
		 sites == FAULT_READ ? "reads" : "allocations", strerror(ferr));
	for (unsigned n = 1; n < 200; n++) {
		int r = trial(what, op, sites, ferr, n);

		if (r < 0)
			t_failures++;
		if (r != 0) {
			if (r > 0)
				printf("  %s: %u fault points\n", what, n - 1);
			return;
		}
	}
	fprintf(stderr, "FAIL %s: more than 200 fault points\n", what);
	t_failures++;
}

static void run_flavour(const char *flavour, const char *mkfs)
{
	struct uext4_opts o = {0};
	uext4_fs *fs;

	printf("flavour %s (mke2fs %s)\n", flavour, mkfs);
	/* A file of the size first: mke2fs then says nothing on stdout. */
	if (t_sh("rm -f %s && truncate -s 8M %s && mke2fs -q -F %s %s 2>/dev/null", img, img, mkfs,
	       img) || uext4_mount(img, &o, &fs)) {
		fprintf(stderr, "FAIL %s: cannot make the image: %s\n", flavour, uext4_last_error());
		t_failures++;
		return;
	}
	if (setup(fs)) {
		fprintf(stderr, "FAIL %s: setup: %s\n", flavour, uext4_last_error());
		t_failures++;
		uext4_umount(fs);
		return;
	}
	T_CHECK(!uext4_umount(fs), "%s: unmount: %s", flavour, uext4_last_error());
	sweep(flavour, "create", op_create, FAULT_READ, EIO);
	sweep(flavour, "create", op_create, FAULT_ALLOC_BLOCK | FAULT_ALLOC_INODE, ENOSPC);
	sweep(flavour, "mkdir", op_mkdir, FAULT_READ, EIO);
	sweep(flavour, "mkdir", op_mkdir, FAULT_ALLOC_BLOCK | FAULT_ALLOC_INODE, ENOSPC);
	if (uext4_mount(img, &o, &fs)) {
		fprintf(stderr, "FAIL %s: mount: %s\n", flavour, uext4_last_error());
		t_failures++;
		return;
	}
	semantics(fs);
	T_CHECK(!uext4_umount(fs), "%s: unmount: %s", flavour, uext4_last_error());
	if (t_sh("e2fsck -fn %s > %s.fsck 2>&1", img, img)) {
		fprintf(stderr, "FAIL %s: e2fsck -fn is not clean after the checks:\n", flavour);
		t_sh("head -20 %s.fsck >&2", img);
		t_failures++;
	}
}

int main(void)
{
	const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";

	t_need_tools("mke2fs e2fsck");
	snprintf(img, sizeof(img), "%s/unit_acl.%d.img", tmp, (int)getpid());
	snprintf(trial_img, sizeof(trial_img), "%s/unit_acl.%d.trial", tmp, (int)getpid());
	run_flavour("inode256", "-t ext4 -I 256");
	run_flavour("inode128", "-t ext4 -I 128 -b 1024");
	t_sh("rm -f %s %s %s.fsck %s.fsck", img, trial_img, img, trial_img);
	printf("%s: %d failures\n", t_failures ? "FAIL" : "PASS", t_failures);
	return t_failures ? T_FAIL : T_PASS;
}
