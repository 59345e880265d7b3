/*
 * mountcheck.c - is an image in use by a mount?  The facts e2fsprogs'
 * ext2fs_check_mount_point() looks at, checked once when an image is
 * opened (never on a hot path):
 *
 *   - a block device: mounted (its major:minor, or one of its partitions',
 *     in /proc/self/mountinfo), else an exclusive open (O_EXCL), which
 *     fails with EBUSY while the kernel holds it (a mount in another mount
 *     namespace, a device-mapper or RAID member, a uext4 writing it);
 *   - an image file: the loop devices whose backing file it is (sysfs
 *     backing_file, matched by device and inode, else LOOP_GET_STATUS64's
 *     lo_device/lo_inode), checked as block devices.  A loop device that is
 *     only attached (not mounted, not held) is not "in use", as for e2fsck:
 *     nothing caches the file system then;
 *   - any file: a mount whose source is this very file (a FUSE mount:
 *     fuse2fs, a uext4 server), matched by device and inode.
 *
 * Every check is best effort: what cannot be read (no /sys, no permission
 * to open /dev/loopN) is skipped, so a missing fact never refuses an image.
 * No state, no locks.
 */
#include "mountcheck.h"
#include "error.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/loop.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

/* One line of /proc/self/mountinfo. */
struct mount_ent {
	unsigned major, minor;  /* of the mounted device; 0 for FUSE and such */
	char dir[PATH_MAX];     /* the mount point, unescaped */
	char fstype[64];
	char source[PATH_MAX];  /* unescaped */
};

/* mountinfo escapes space, tab, newline and backslash as \ooo. */
static void unescape(char *s)
{
	char *out = s;

	for (; *s; s++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' &&
		    s[3] >= '0' && s[3] <= '7') {
			*out++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
			s += 3;
		} else {
			*out++ = *s;
		}
	}
	*out = '\0';
}

/* The next entry of f, or 0 at the end.  Lines that do not parse are skipped. */
static int next_mount(FILE *f, struct mount_ent *m)
{
	char line[3 * PATH_MAX], *sep;

	while (fgets(line, sizeof(line), f)) {
		/* "ID PARENT MAJ:MIN ROOT DIR OPTS [OPTIONAL...] - FSTYPE SOURCE SUPEROPTS" */
		if (sscanf(line, "%*u %*u %u:%u %*s %4095s", &m->major, &m->minor, m->dir) != 3)
			continue;
		sep = strstr(line, " - ");
		if (!sep || sscanf(sep + 3, "%63s %4095s", m->fstype, m->source) != 2)
			continue;
		unescape(m->dir);
		unescape(m->source);
		return 1;
	}
	return 0;
}

/* The first mount point of block device dev, into dir; 1 if mounted. */
static int dev_mounted(dev_t dev, char *dir, size_t len)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	struct mount_ent m;
	int found = 0;

	if (!f)
		return 0;
	while (!found && next_mount(f, &m)) {
		if (m.major == major(dev) && m.minor == minor(dev)) {
			snprintf(dir, len, "%s", m.dir);
			found = 1;
		}
	}
	fclose(f);
	return found;
}

static int same_file(const struct stat *a, const struct stat *b)
{
	if (S_ISBLK(a->st_mode) && S_ISBLK(b->st_mode))
		return a->st_rdev == b->st_rdev;
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}

/* A mount whose source names the file st (FUSE: its source is a path). */
static int source_mounted(const struct stat *st, char *where, size_t len)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	struct mount_ent m;
	struct stat s;
	int found = 0;

	if (!f)
		return 0;
	while (!found && next_mount(f, &m)) {
		/* Kernel block-device mounts have the device's number (checked
		 * by dev_mounted); stat only the other sources that are paths. */
		if (m.major || m.source[0] != '/' || stat(m.source, &s) || !same_file(st, &s))
			continue;
		snprintf(where, len, "mounted on %s (%s)", m.dir, m.fstype);
		found = 1;
	}
	fclose(f);
	return found;
}

/* The first line of a small sysfs file, without its newline; 0 if read. */
static int read_line(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "re");
	int ok;

	if (!f)
		return -1;
	ok = fgets(buf, (int)len, f) != NULL;
	fclose(f);
	if (!ok)
		return -1;
	buf[strcspn(buf, "\n")] = '\0';
	return 0;
}

/* "MAJ:MIN" in a sysfs dev file. */
static int read_devnum(const char *path, dev_t *dev)
{
	char buf[32];
	unsigned ma, mi;

	if (read_line(path, buf, sizeof(buf)) || sscanf(buf, "%u:%u", &ma, &mi) != 2)
		return -1;
	*dev = makedev(ma, mi);
	return 0;
}

/* Block device dev (named name in /sys/block, /dev), or one of its
 * partitions, mounted: where says on what. */
static int blockdev_or_part_mounted(dev_t dev, const char *via, char *where, size_t len)
{
	char dir[PATH_MAX], path[PATH_MAX + 64], sys[64];
	struct dirent *e;
	DIR *d;
	dev_t part;
	int found = 0;

	if (dev_mounted(dev, dir, sizeof(dir))) {
		snprintf(where, len, "mounted on %s by the kernel%s%s%s", dir, via ? " (via " : "",
			 via ? via : "", via ? ")" : "");
		return 1;
	}
	snprintf(sys, sizeof(sys), "/sys/dev/block/%u:%u", major(dev), minor(dev));
	if (!(d = opendir(sys)))
		return 0;
	while (!found && (e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s/partition", sys, e->d_name);
		if (access(path, F_OK))
			continue;
		snprintf(path, sizeof(path), "%s/%s/dev", sys, e->d_name);
		if (read_devnum(path, &part) || !dev_mounted(part, dir, sizeof(dir)))
			continue;
		snprintf(where, len, "mounted on %s by the kernel (via /dev/%s)", dir, e->d_name);
		found = 1;
	}
	closedir(d);
	return found;
}

/* An exclusive open fails with EBUSY while the kernel holds the device. */
static int held_exclusively(const char *devpath)
{
	int fd = open(devpath, O_RDONLY | O_EXCL | O_CLOEXEC);

	if (fd >= 0) {
		close(fd);
		return 0;
	}
	return errno == EBUSY;
}

/* Is /dev/NAME (a loop device) backed by the file img? */
static int loop_backs(const char *name, const struct stat *img)
{
	char path[PATH_MAX], back[PATH_MAX];
	struct loop_info64 li;
	struct stat st;
	size_t n;
	int fd, ok;

	snprintf(path, sizeof(path), "/sys/block/%s/loop/backing_file", name);
	if (read_line(path, back, sizeof(back)))
		return 0;       /* not attached */
	n = strlen(back);
	if (n > 10 && !strcmp(back + n - 10, " (deleted)"))
		back[n - 10] = '\0';
	if (!stat(back, &st) && st.st_dev == img->st_dev && st.st_ino == img->st_ino)
		return 1;
	/* The path may be another mount namespace's: ask the device. */
	snprintf(path, sizeof(path), "/dev/%s", name);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return 0;
	ok = !ioctl(fd, LOOP_GET_STATUS64, &li) && li.lo_inode == img->st_ino &&
	     major(img->st_dev) == ((li.lo_device >> 8) & 0xfff) &&
	     minor(img->st_dev) == ((li.lo_device & 0xff) | ((li.lo_device >> 12) & 0xfff00));
	close(fd);
	return ok;
}

/* An image file: mounted through a loop device backed by it? */
static int file_loop_mounted(const struct stat *img, char *where, size_t len)
{
	char path[PATH_MAX], via[NAME_MAX + 8];
	struct dirent *e;
	DIR *d = opendir("/sys/block");
	dev_t dev;
	int found = 0;

	if (!d)
		return 0;
	while (!found && (e = readdir(d))) {
		if (strncmp(e->d_name, "loop", 4) || !loop_backs(e->d_name, img))
			continue;
		snprintf(path, sizeof(path), "/sys/block/%s/dev", e->d_name);
		snprintf(via, sizeof(via), "/dev/%s", e->d_name);
		if (read_devnum(path, &dev))
			continue;
		if (blockdev_or_part_mounted(dev, via, where, len))
			found = 1;
		else if (held_exclusively(via)) {
			snprintf(where, len, "attached to %s, which the kernel or another program "
				 "holds exclusively (mounted in another mount namespace?)", via);
			found = 1;
		}
	}
	closedir(d);
	return found;
}

int mount_listed(const char *path, char *where, size_t len)
{
	struct stat st;

	if (stat(path, &st))
		return 0;       /* the open that follows names the problem */
	if (S_ISBLK(st.st_mode) && blockdev_or_part_mounted(st.st_rdev, NULL, where, len))
		return 1;
	if (S_ISREG(st.st_mode) && file_loop_mounted(&st, where, len))
		return 1;
	return source_mounted(&st, where, len);
}

int mount_check(const char *path, char *where, size_t len)
{
	struct stat st;

	if (mount_listed(path, where, len))
		return 1;
	if (!stat(path, &st) && S_ISBLK(st.st_mode) && held_exclusively(path)) {
		snprintf(where, len, "held exclusively by the kernel or another program (a mount "
			 "in another mount namespace, a device-mapper or RAID member, a uext4 "
			 "writing it?)");
		return 1;
	}
	return 0;
}

int mount_check_refuse(const char *path)
{
	char where[PATH_MAX + 256];

	if (!mount_check(path, where, sizeof(where)))
		return 0;
	return fs_err(EBUSY, "%s: %s; refusing to write it", path, where);
}
