/*
 * umount.c - `uext4 umount MOUNTPOINT`, and the status file a mount server
 * leaves for it.
 *
 * fusermount3 -u returns as soon as the kernel has let go of the mount; the
 * server only then writes everything back and closes the image.  This
 * command unmounts and returns when the server has finished, with the
 * server's verdict:
 *
 *   - The mount server (cmd_mount) keeps a status file while it serves:
 *     "running PID START" (START: the process's start time, so a reused
 *     pid is not mistaken for it) from before the mount is live, then, once
 *     the image is written back and unmounted and before its flock is
 *     released, "ok PID START" or "failed PID START" and a line with the
 *     message.  It is keyed by the image file's device and inode number
 *     and the mount point (a hash of its absolute path, as mountinfo shows
 *     it: a read-only and a read-write mount of one image each have their
 *     own), in a directory of the server's user, derived from the uid alone so
 *     that both sides agree whatever their environment:
 *         root                       /run/uext4
 *         others, if /run/user/UID   /run/user/UID/uext4
 *         else                       /tmp/uext4-UID
 *     (mode 0700; a directory not owned by that user, or a symlink, is not
 *     used).  Each update is a new file renamed over the old one.  umount
 *     removes the file it read; a mount prunes files whose server has been
 *     gone for 10 minutes (unmounted another way, or killed).
 *   - umount finds the mount in /proc/self/mountinfo (type fuse.uext4; the
 *     source is the image's absolute path, which cmd_mount gives as
 *     fsname; user_id= is the server's uid), reads the server's pid from
 *     the status file, opens a pidfd on it and the image (for its flock),
 *     then unmounts (umount2 as root, fusermount3 -u otherwise), waits
 *     until a read-write server releases its exclusive flock on the image
 *     and until the server process has exited, and reads the final status.
 *     A server that is gone without a final status (killed) means the
 *     image needs recovery: that is an error too.
 *   - A mount of a file system that is mounted elsewhere too (a bind mount,
 *     or the second mount of an image, which mount.fuse.uext4 makes a bind
 *     of the first) is only unmounted: its server goes on serving.  The
 *     last one left may be a bind whose mount point is not the server's:
 *     its status file is then the image's one running server's.
 */
#include "cli.h"
#include "mountinfo.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define STATUS_MSG_MAX 1024

/* ------------------------------------------------------------ status file */

/* The status directory of uid (see the top); create it if asked.
 * 0, or -1 if there is none we may trust. */
static int status_dir(uid_t uid, int create, char *buf, size_t len)
{
	char run[64];
	struct stat st;

	snprintf(run, sizeof(run), "/run/user/%u", (unsigned)uid);
	if (uid == 0)
		snprintf(buf, len, "/run/uext4");
	else if (!stat(run, &st) && S_ISDIR(st.st_mode) && st.st_uid == uid)
		snprintf(buf, len, "%s/uext4", run);
	else
		snprintf(buf, len, "/tmp/uext4-%u", (unsigned)uid);
	if (create && mkdir(buf, 0700) && errno != EEXIST)
		return -1;
	if (lstat(buf, &st) || !S_ISDIR(st.st_mode) || st.st_uid != uid || (st.st_mode & 022))
		return -1;
	return 0;
}

/* FNV-1a, for the keys of URIs and mount points. */
static uint64_t fnv1a(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
	return h;
}

/* mp: the mount point's absolute path. */
static int status_path(uid_t uid, dev_t dev, ino_t ino, const char *mp, int create, char *buf,
		       size_t len)
{
	char dir[128];            /* the paths of status_dir are short */

	if (status_dir(uid, create, dir, sizeof(dir)))
		return -1;
	snprintf(buf, len, "%s/%llx-%llx-%llx", dir, (unsigned long long)dev,
		 (unsigned long long)ino, (unsigned long long)fnv1a(mp));
	return 0;
}

/* An NBD URI has no inode: its status file is keyed by device 0 and a
 * hash (FNV-1a) of the URI, which the mount's source repeats exactly. */
static int is_uri(const char *image)
{
	return !strncmp(image, "nbd", 3) && strstr(image, "://");
}

static int image_key(const char *image, dev_t *dev, ino_t *ino)
{
	struct stat st;

	if (is_uri(image)) {
		*dev = 0;
		*ino = (ino_t)fnv1a(image);
		return 0;
	}
	if (stat(image, &st))
		return -1;
	*dev = st.st_dev;
	*ino = st.st_ino;
	return 0;
}

/* The server's status file; "" when it has none (best effort: the mount
 * works without it, only `uext4 umount` cannot report then). */
static char server_status[PATH_MAX];

/* A process's start time (clock ticks since boot, /proc/PID/stat field
 * 22): with the pid, it names the process even after the pid is reused. */
static unsigned long long start_time(long pid)
{
	char path[64], buf[1024], *p;
	unsigned long long t = 0;
	FILE *f;
	int i;

	snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
	f = fopen(path, "r");
	if (!f)
		return 0;
	p = fgets(buf, sizeof(buf), f) ? strrchr(buf, ')') : NULL;   /* after comm */
	fclose(f);
	for (i = 2; p && i < 22; i++)   /* p is before field i */
		p = strchr(p + 1, ' ');
	if (p)
		t = strtoull(p + 1, NULL, 10);
	return t;
}

static void status_write(const char *state, const char *msg)
{
	char tmp[PATH_MAX + 16];
	FILE *f;

	if (!server_status[0])
		return;
	snprintf(tmp, sizeof(tmp), "%s.%ld", server_status, (long)getpid());
	f = fopen(tmp, "w");
	if (!f)
		return;
	fprintf(f, "%s %ld %llu\n%s\n", state, (long)getpid(), start_time(getpid()),
		msg ? msg : "");
	if (fclose(f) || rename(tmp, server_status))
		unlink(tmp);
}

static int status_read(const char *path, char state[16], long *pid, unsigned long long *start,
		       char *msg, size_t msglen);

#define PRUNE_AGE (10 * 60)     /* seconds */

/*
 * Files whose server is gone (pid and start time no longer match) and that
 * nobody read for PRUNE_AGE: final statuses of mounts unmounted some other
 * way, servers killed long ago.  Keeps the directory small.
 */
static void status_prune(const char *dir)
{
	char path[PATH_MAX + 256], state[16], msg[16];
	unsigned long long start;
	struct dirent *d;
	struct stat st;
	DIR *dp = opendir(dir);
	long pid;

	if (!dp)
		return;
	while ((d = readdir(dp))) {
		if (d->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, d->d_name);
		if (lstat(path, &st) || !S_ISREG(st.st_mode) || time(NULL) - st.st_mtime < PRUNE_AGE)
			continue;
		if (status_read(path, state, &pid, &start, msg, sizeof(msg)) == 0 &&
		    start_time(pid) == start)
			continue;       /* its server still runs */
		unlink(path);
	}
	closedir(dp);
}

void mount_status_begin(const char *image, const char *mountpoint)
{
	char mp[PATH_MAX];
	dev_t dev;
	ino_t ino;
	char *slash;

	/* The path mountinfo will show, which umount matches. */
	if (!realpath(mountpoint, mp) || image_key(image, &dev, &ino) ||
	    status_path(getuid(), dev, ino, mp, 1, server_status, sizeof(server_status)))
		server_status[0] = '\0';
	status_write("running", NULL);
	slash = strrchr(server_status, '/');
	if (slash) {
		*slash = '\0';
		status_prune(server_status);
		*slash = '/';
	}
}

void mount_status_end(int status, const char *msg)
{
	status_write(status ? "failed" : "ok", status ? msg : NULL);
}

/* Read a status file: state word, pid, its start time and the message.
 * 0, or -1 if none. */
static int status_read(const char *path, char state[16], long *pid, unsigned long long *start,
		       char *msg, size_t msglen)
{
	FILE *f = fopen(path, "r");
	int ok;

	if (!f)
		return -1;
	ok = fscanf(f, "%15s %ld %llu", state, pid, start) == 3;
	msg[0] = '\0';
	if (ok && fgetc(f) == '\n' && fgets(msg, (int)msglen, f))
		msg[strcspn(msg, "\n")] = '\0';
	fclose(f);
	return ok ? 0 : -1;
}

/* ---------------------------------------------------------------- mountinfo */

struct mount_entry {
	char devno[32];         /* MAJ:MIN of the file system */
	char fstype[64];
	char source[PATH_MAX];
	int read_only;
	long uid;               /* user_id= of a FUSE mount, or -1 */
};

/* Parse one mountinfo line; fills e if its mount point is mp. */
static int match_line(char *line, const char *mp, struct mount_entry *e)
{
	char *field[6], *save = NULL, *p, *rest;
	int i;

	for (i = 0, p = strtok_r(line, " ", &save); p && i < 6; p = strtok_r(NULL, " ", &save))
		field[i++] = p;
	if (i < 6)
		return 0;
	mountinfo_unescape(field[4]);
	if (mp && strcmp(field[4], mp))
		return 0;
	snprintf(e->devno, sizeof(e->devno), "%s", field[2]);
	if (!mp)
		return 1;
	/* optional fields up to "-", then fstype, source, super options */
	while (p && strcmp(p, "-"))
		p = strtok_r(NULL, " ", &save);
	if (!p)
		return 0;
	rest = strtok_r(NULL, " ", &save);
	snprintf(e->fstype, sizeof(e->fstype), "%s", rest ? rest : "");
	rest = strtok_r(NULL, " ", &save);
	snprintf(e->source, sizeof(e->source), "%s", rest ? rest : "");
	mountinfo_unescape(e->source);
	e->read_only = !strncmp(field[5], "ro", 2) && (field[5][2] == ',' || !field[5][2]);
	rest = strtok_r(NULL, " \n", &save);
	p = rest ? strstr(rest, "user_id=") : NULL;
	e->uid = p ? strtol(p + 8, NULL, 10) : -1;
	return 1;
}

/* The topmost mount on mp; 0, or -1 if mp is not a mount point. */
static int find_mount(const char *mp, struct mount_entry *e)
{
	FILE *f = fopen("/proc/self/mountinfo", "r");
	char line[3 * PATH_MAX];
	struct mount_entry cur;
	int found = -1;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (match_line(line, mp, &cur)) {
			*e = cur;       /* later lines are mounted on top */
			found = 0;
		}
	fclose(f);
	return found;
}

/* How many mounts show the file system devno (bind mounts, a second
 * mount of one image through mount.fuse.uext4). */
static int mounts_of(const char *devno)
{
	FILE *f = fopen("/proc/self/mountinfo", "r");
	char line[3 * PATH_MAX];
	struct mount_entry cur;
	int n = 0;

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (match_line(line, NULL, &cur) && !strcmp(cur.devno, devno))
			n++;
	fclose(f);
	return n;
}

/*
 * The absolute path of the mount point, without touching the mount itself
 * (a dead FUSE mount answers ENOTCONN): the parent is resolved, the last
 * component appended.
 */
static int mount_point_path(const char *arg, char *out, size_t len)
{
	char copy[PATH_MAX], parent[PATH_MAX];
	char *slash, *base;
	size_t n;

	snprintf(copy, sizeof(copy), "%s", arg);
	n = strlen(copy);
	while (n > 1 && copy[n - 1] == '/')
		copy[--n] = '\0';
	slash = strrchr(copy, '/');
	base = slash ? slash + 1 : copy;
	if (!strcmp(base, ".") || !strcmp(base, "..") || !strcmp(copy, "/"))
		return realpath(copy, out) ? 0 : -1;
	if (slash == copy)
		snprintf(parent, sizeof(parent), "/");
	else if (slash) {
		*slash = '\0';
		if (!realpath(copy, parent))
			return -1;
	} else if (!getcwd(parent, sizeof(parent)))
		return -1;
	if ((size_t)snprintf(out, len, "%s%s%s", parent, strcmp(parent, "/") ? "/" : "", base) >= len) {
		errno = ENAMETOOLONG;
		return -1;
	}
	return 0;
}

/* ------------------------------------------------------------------ umount */

static int pidfd_of(long pid)
{
	return (int)syscall(SYS_pidfd_open, (pid_t)pid, 0);
}

static int unmount(const struct command *c, const char *mp)
{
	pid_t pid;
	int status;

	if (geteuid() == 0) {
		if (umount2(mp, 0) == 0)
			return 0;
		return fail_host(c, mp, errno);
	}
	pid = fork();
	if (pid < 0)
		return fail_host(c, "fork", errno);
	if (pid == 0) {
		execlp("fusermount3", "fusermount3", "-u", "--", mp, (char *)NULL);
		fprintf(stderr, "uext4 %s: fusermount3: %s\n", c->name, strerror(errno));
		_exit(127);
	}
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return fail_host(c, "waitpid", errno);
	/* fusermount3 said why */
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}

/* Block until the process behind pidfd has exited. */
static void wait_exit(int pidfd)
{
	struct pollfd p = { .fd = pidfd, .events = POLLIN };

	while (poll(&p, 1, -1) < 0 && errno == EINTR)
		;
}

struct server_ref {
	char status[PATH_MAX];  /* its status file, or "" */
	long pid;               /* 0 if unknown or gone */
	int pidfd;              /* -1 if none */
	int image_fd;           /* for the flock; -1 if none */
};

/*
 * The status file of the running server of image (dev, ino) mounted on
 * another mount point: mp is then a bind of that mount, which stays after
 * the first one went (mount.fuse.uext4 makes one for a second mount of an
 * image).  0 with its path in buf, or -1 if not exactly one.
 */
static int status_of_image(uid_t uid, dev_t dev, ino_t ino, char *buf, size_t len)
{
	char dir[128], prefix[64], path[PATH_MAX], state[16], msg[16];
	unsigned long long start;
	struct dirent *d;
	DIR *dp;
	long pid;
	int found = 0;

	if (status_dir(uid, 0, dir, sizeof(dir)) || !(dp = opendir(dir)))
		return -1;
	snprintf(prefix, sizeof(prefix), "%llx-%llx-", (unsigned long long)dev,
		 (unsigned long long)ino);
	while ((d = readdir(dp))) {
		if (strncmp(d->d_name, prefix, strlen(prefix)) || strchr(d->d_name, '.'))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, d->d_name);
		if (status_read(path, state, &pid, &start, msg, sizeof(msg)) ||
		    strcmp(state, "running") || start_time(pid) != start)
			continue;
		if (found++)
			break;
		snprintf(buf, len, "%s", path);
	}
	closedir(dp);
	return found == 1 ? 0 : -1;
}

/* Before unmounting: the status file, the pid, the image. */
static int find_server(const struct command *c, const char *mp, const struct mount_entry *e,
		       struct server_ref *s)
{
	char state[16], msg[STATUS_MSG_MAX];
	unsigned long long start;
	dev_t dev;
	ino_t ino;
	uid_t uid;

	s->status[0] = '\0';
	s->pid = 0;
	s->pidfd = s->image_fd = -1;
	if ((e->source[0] != '/' && !is_uri(e->source)) || image_key(e->source, &dev, &ino)) {
		fprintf(stderr, "uext4 %s: %s: cannot find its image '%s'%s%s\n", c->name, mp,
			e->source, e->source[0] == '/' ? ": " : " (not an absolute path)",
			e->source[0] == '/' ? strerror(errno) : "");
		return 1;
	}
	uid = e->uid < 0 ? getuid() : (uid_t)e->uid;
	if (status_path(uid, dev, ino, mp, 0, s->status, sizeof(s->status)) ||
	    (access(s->status, F_OK) &&
	     status_of_image(uid, dev, ino, s->status, sizeof(s->status))) ||
	    status_read(s->status, state, &s->pid, &start, msg, sizeof(msg))) {
		s->status[0] = '\0';
		s->pid = 0;
	} else if (strcmp(state, "running")) {
		s->pid = 0;     /* a stale file */
	} else {
		/* open first, then check it is still that process */
		s->pidfd = pidfd_of(s->pid);
		if (s->pidfd >= 0 && start_time(s->pid) != start) {
			close(s->pidfd);
			s->pidfd = -1;
		}
		if (s->pidfd < 0)
			s->pid = 0;     /* the server is gone */
	}
	s->image_fd = is_uri(e->source) ? -1 : open(e->source, O_RDONLY | O_CLOEXEC);
	return 0;
}

/* After unmounting: wait for the server, then its verdict. */
static int server_verdict(const struct command *c, const char *mp, const struct mount_entry *e,
			  struct server_ref *s)
{
	char state[16] = "", msg[STATUS_MSG_MAX] = "";
	unsigned long long start;
	long pid = 0;

	/* A read-write server holds LOCK_EX until its write-back is done. */
	if (s->image_fd >= 0 && !e->read_only)
		while (flock(s->image_fd, LOCK_SH) && errno == EINTR)
			;
	if (s->pidfd >= 0)
		wait_exit(s->pidfd);
	if (!s->status[0]) {
		fprintf(stderr, "uext4 %s: %s: unmounted, but its server left no status; "
			"cannot tell whether %s was written back\n", c->name, mp, e->source);
		return 1;
	}
	if (status_read(s->status, state, &pid, &start, msg, sizeof(msg)) || !strcmp(state, "running")) {
		fprintf(stderr, "uext4 %s: %s: the server%s exited without writing %s back "
			"(killed?); it needs recovery: uext4 recover %s\n", c->name, mp,
			s->pid ? "" : " had already", e->source, e->source);
		return 1;
	}
	unlink(s->status);      /* read: nobody needs it any more */
	if (strcmp(state, "ok")) {
		fprintf(stderr, "uext4 %s: %s: writing back %s failed: %s\n", c->name, mp, e->source,
			msg[0] ? msg : "(no message)");
		return 1;
	}
	return 0;
}

int cmd_umount(const struct command *c, int argc, char **argv)
{
	char mp[PATH_MAX];
	struct mount_entry e;
	struct server_ref s;
	int ret;

	if (next_opt(c, argc, argv, "") != -1)
		return usage_error(c, NULL);
	if (argc - optind != 1)
		return usage_error(c, argc - optind ? "too many arguments" : "missing MOUNTPOINT");
	if (mount_point_path(argv[optind], mp, sizeof(mp)))
		return fail_host(c, argv[optind], errno);
	if (find_mount(mp, &e)) {
		struct stat st;

		if (lstat(argv[optind], &st))
			return fail_host(c, argv[optind], errno);
		fprintf(stderr, "uext4 %s: %s: not a mount point\n", c->name, argv[optind]);
		return 1;
	}
	if (strcmp(e.fstype, "fuse.uext4")) {
		fprintf(stderr, "uext4 %s: %s: not a uext4 mount (it is %s); use umount\n", c->name,
			argv[optind], e.fstype);
		return 1;
	}
	/* Mounted elsewhere too (a bind): the server goes on serving the
	 * others, so there is no write-back to wait for. */
	if (mounts_of(e.devno) > 1)
		return unmount(c, mp);
	if (find_server(c, mp, &e, &s))
		return 1;
	ret = unmount(c, mp);
	if (ret == 0)
		ret = server_verdict(c, mp, &e, &s);
	if (s.pidfd >= 0)
		close(s.pidfd);
	if (s.image_fd >= 0)
		close(s.image_fd);
	return ret;
}
