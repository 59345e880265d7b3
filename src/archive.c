/*
 * archive.c - fill an image from a tar stream (uext4_populate_archive),
 * through libarchive: any format and filter it reads (tar, pax, GNU tar;
 * gzip, xz, zstd, bzip2, ...).
 *
 * The stream is sequential, so the fill is one thread in archive order,
 * which makes it deterministic for free.  Each member is created through
 * the public write API under root's identity with umask 0, then given the
 * archive's attributes: xattrs and ACLs first (an access ACL sets the
 * permission bits), then one setattr with mode, owner, size (a trailing
 * hole of a sparse file) and times.  Directories get their times at the
 * end, as tar does (creating their entries would change them), and every
 * inode its flags (immutable or append-only would refuse later members
 * and hard links).
 *
 * The rules for odd members, as GNU tar applies them (uext4 mkfs --help
 * documents them):
 *   - leading "/" is stripped from member and link names (one warning);
 *   - a ".." component stops the fill with an error naming the member;
 *   - a member whose parents were not seen gets them made (0755, root),
 *     their attributes fixed when the directory's own member comes;
 *   - a later member with the same path replaces the earlier one (tar x),
 *     a directory over a directory only updates its attributes, anything
 *     over a non-empty directory is an error;
 *   - a hard link must name a member seen earlier, else the fill stops
 *     naming both paths;
 *   - a path through a symlink or a non-directory is an error (the fill
 *     never follows links: nothing can escape dir).
 *
 * Times: a member without an atime (ustar; GNU tar's pax stores none)
 * gets its mtime, so that the image depends on the archive alone; ctime and
 * crtime are the library's "now" (the fixed time with use_fixed_time).
 * clamp_times clamps atime and mtime, as mke2fs does.
 *
 * Nothing here is shared between threads: the caller's one thread runs
 * the whole fill (and keeps the identity root, umask 0, that it sets).
 */
#include "caller.h"
#include "error.h"
#include "internal.h"
#include "ondisk.h"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#define AR_READ_BLOCK (1u << 20)        /* libarchive's read size from fd */
#define AR_WRITE_CHUNK (1u << 20)       /* data coalesced before a pwrite */

/* What is set after the last member, as tar's fix-ups: a directory's
 * times (its entries change them) and any inode's flags (immutable or
 * append-only would refuse the members and links that follow). */
struct ar_late {
	uint64_t ino;
	struct timespec atime, mtime;
	uint32_t flags;
	bool dir;           /* set atime and mtime */
	bool gone;          /* removed by a later member: skip */
	char *member;       /* for messages */
};

struct ar_fill {
	uext4_fs *fs;
	uint64_t root;
	const struct uext4_populate_opts *o;
	struct archive *a;
	const char *member;             /* the member being copied, for messages */
	bool warned_abs;
	struct ar_late *late;
	size_t nlate, caplate;
	uint8_t *wbuf;                  /* AR_WRITE_CHUNK */
	struct uext4_populate_progress prog;
	/* The last parent directory resolved, as most members share it. */
	char *last_parent;
	uint64_t last_parent_ino;
};

/* ------------------------------------------------------------ messages */

/* What ran out when an operation failed with ENOSPC: inodes or blocks. */
static const char *ran_out(struct ar_fill *f, bool creating)
{
	struct uext4_statfs st;

	if (creating && uext4_statfs(f->fs, &st) == 0 && st.inodes_free == 0)
		return "no free inodes left in the image";
	return "no free blocks left in the image";
}

/* Set the message for a failure of what on the current member, keeping
 * the library's message; returns err (negative). */
static int member_err(struct ar_fill *f, int err, const char *what, bool creating)
{
	char lib[512];

	snprintf(lib, sizeof(lib), "%s", uext4_last_error());
	if (err == -ENOSPC)
		return fs_err(ENOSPC, "archive member \"%s\": %s: %s", f->member, what,
			      ran_out(f, creating));
	return fs_err(-err, "archive member \"%s\": %s: %s", f->member, what,
		      *lib ? lib : strerror(-err));
}

/* ------------------------------------------------------------ names */

/*
 * The member's path made relative and split into its components in place
 * (the separators become NULs): "", ".", and leading "/" vanish, ".." is
 * refused.  comp[] points at each component; *n their number (0: dir
 * itself).  what says which name this is, for the messages.
 */
static int split_name(struct ar_fill *f, char *path, const char *what, char ***comp, size_t *n)
{
	size_t cap = 8, k = 0;
	char **c;
	char *save = NULL, *tok;

	if (*path == '/' && !f->warned_abs) {
		fprintf(stderr, "uext4: removing leading '/' from member names\n");
		f->warned_abs = true;
	}
	if (!(c = malloc(cap * sizeof(*c))))
		return fs_err(ENOMEM, "out of memory");
	for (tok = strtok_r(path, "/", &save); tok; tok = strtok_r(NULL, "/", &save)) {
		if (!strcmp(tok, "."))
			continue;
		if (!strcmp(tok, "..")) {
			free(c);
			return fs_err(EINVAL, "archive member \"%s\": %s has a \"..\" component "
				      "(it would escape the image's directory): refused",
				      f->member, what);
		}
		if (k == cap) {
			char **nc = realloc(c, 2 * cap * sizeof(*c));

			if (!nc) {
				free(c);
				return fs_err(ENOMEM, "out of memory");
			}
			c = nc;
			cap *= 2;
		}
		c[k++] = tok;
	}
	*comp = c;
	*n = k;
	return 0;
}

/* The parent directory for comp[0..n-1], made where missing (0755, root). */
static int walk_parents(struct ar_fill *f, char **comp, size_t n, uint64_t *dir)
{
	uint64_t ino = f->root;

	for (size_t i = 0; i < n; i++) {
		struct uext4_stat st;
		int err = uext4_lookup(f->fs, ino, comp[i], &st);

		if (err == -ENOENT) {
			err = uext4_mkdir(f->fs, ino, comp[i], 0755, &st);
			if (err)
				return member_err(f, err, "making a missing parent directory", true);
		} else if (err) {
			return member_err(f, err, "looking up a parent directory", false);
		} else if (!S_ISDIR(st.mode)) {
			return fs_err(ENOTDIR, "archive member \"%s\": parent \"%s\" is not a "
				      "directory in the image (a %s)", f->member, comp[i],
				      S_ISLNK(st.mode) ? "symlink, which the fill does not follow"
						       : "non-directory");
		}
		ino = st.ino;
	}
	*dir = ino;
	return 0;
}

/* The parent of comp[0..n-1] (n >= 1), through a one-entry cache. */
static int parent_of(struct ar_fill *f, char **comp, size_t n, uint64_t *dir)
{
	size_t len = 0;
	char *key, *p;
	int err;

	for (size_t i = 0; i + 1 < n; i++)
		len += strlen(comp[i]) + 1;
	if (!(key = malloc(len + 1)))
		return fs_err(ENOMEM, "out of memory");
	p = key;
	for (size_t i = 0; i + 1 < n; i++)
		p += sprintf(p, "%s/", comp[i]);
	*p = 0;
	/* make_room() drops the cache when it removes a directory. */
	if (f->last_parent && !strcmp(f->last_parent, key)) {
		free(key);
		*dir = f->last_parent_ino;
		return 0;
	}
	err = walk_parents(f, comp, n - 1, dir);
	free(f->last_parent);
	f->last_parent = err ? NULL : key;
	if (err)
		free(key);
	else
		f->last_parent_ino = *dir;
	return err;
}

/* ------------------------------------------------------------ attributes */

static struct timespec clamp(const struct ar_fill *f, struct timespec t)
{
	if (f->o && f->o->clamp_times && t.tv_sec >= f->o->clamp_time &&
	    !(t.tv_sec == f->o->clamp_time && t.tv_nsec == 0)) {
		t.tv_sec = f->o->clamp_time;
		t.tv_nsec = 0;
	}
	return t;
}

static struct timespec entry_mtime(struct ar_fill *f, struct archive_entry *e)
{
	struct timespec t = { 0, 0 };

	if (archive_entry_mtime_is_set(e)) {
		t.tv_sec = archive_entry_mtime(e);
		t.tv_nsec = archive_entry_mtime_nsec(e);
	}
	return clamp(f, t);
}

/* The archive's atime, else its mtime (ustar has none; a fixed value keeps
 * the image reproducible). */
static struct timespec entry_atime(struct ar_fill *f, struct archive_entry *e)
{
	struct timespec t;

	if (!archive_entry_atime_is_set(e))
		return entry_mtime(f, e);
	t.tv_sec = archive_entry_atime(e);
	t.tv_nsec = archive_entry_atime_nsec(e);
	return clamp(f, t);
}

/* ACLs copied (copy_extended()): the raw xattrs GNU tar stores with
 * --xattrs-include='*' are exact (numeric ids); libarchive's ACL entries
 * stand in for those missing. */
#define ACL_ACCESS_DONE 1
#define ACL_DEFAULT_DONE 2

static int copy_xattrs(struct ar_fill *f, uint64_t ino, struct archive_entry *e, int *acls)
{
	const char *name;
	const void *value;
	size_t size;

	if (archive_entry_xattr_reset(e) == 0)
		return 0;
	while (archive_entry_xattr_next(e, &name, &value, &size) == ARCHIVE_OK) {
		if (!strcmp(name, "system.posix_acl_access"))
			*acls |= ACL_ACCESS_DONE;
		else if (!strcmp(name, "system.posix_acl_default"))
			*acls |= ACL_DEFAULT_DONE;
		int err = uext4_setxattr(f->fs, ino, name, value, size, 0);

		if (err) {
			char what[300];

			snprintf(what, sizeof(what), "setting xattr \"%.255s\"", name);
			return member_err(f, err, what, false);
		}
	}
	return 0;
}

/* One libarchive POSIX.1e ACL entry as a VFS xattr entry (tag, perm, id). */
static void put_acl_entry(uint8_t *p, int tag, int perm, int id)
{
	uint16_t t = 0, pm = 0;
	uint32_t q = ACL_UNDEFINED_ID;

	switch (tag) {
	case ARCHIVE_ENTRY_ACL_USER_OBJ: t = ACL_TAG_USER_OBJ; break;
	case ARCHIVE_ENTRY_ACL_USER: t = ACL_TAG_USER; q = (uint32_t)id; break;
	case ARCHIVE_ENTRY_ACL_GROUP_OBJ: t = ACL_TAG_GROUP_OBJ; break;
	case ARCHIVE_ENTRY_ACL_GROUP: t = ACL_TAG_GROUP; q = (uint32_t)id; break;
	case ARCHIVE_ENTRY_ACL_MASK: t = ACL_TAG_MASK; break;
	case ARCHIVE_ENTRY_ACL_OTHER: t = ACL_TAG_OTHER; break;
	}
	if (perm & ARCHIVE_ENTRY_ACL_READ)
		pm |= 4;
	if (perm & ARCHIVE_ENTRY_ACL_WRITE)
		pm |= 2;
	if (perm & ARCHIVE_ENTRY_ACL_EXECUTE)
		pm |= 1;
	t = cpu_to_le16(t);
	pm = cpu_to_le16(pm);
	q = cpu_to_le32(q);
	memcpy(p, &t, 2);
	memcpy(p + 2, &pm, 2);
	memcpy(p + 4, &q, 4);
}

/* The VFS order: USER_OBJ, USER (by id), GROUP_OBJ, GROUP (by id), MASK, OTHER. */
static int acl_rank(const uint8_t *p)
{
	uint16_t t;

	memcpy(&t, p, 2);
	switch (le16(t)) {
	case ACL_TAG_USER_OBJ: return 0;
	case ACL_TAG_USER: return 1;
	case ACL_TAG_GROUP_OBJ: return 2;
	case ACL_TAG_GROUP: return 3;
	case ACL_TAG_MASK: return 4;
	default: return 5;
	}
}

static int acl_cmp(const void *a, const void *b)
{
	int ra = acl_rank(a), rb = acl_rank(b);
	uint32_t ia, ib;

	if (ra != rb)
		return ra - rb;
	memcpy(&ia, (const uint8_t *)a + 4, 4);
	memcpy(&ib, (const uint8_t *)b + 4, 4);
	ia = le32(ia);
	ib = le32(ib);
	return ia < ib ? -1 : ia > ib;
}

/* A named ACL qualifier without an id (GNU tar's text ACLs name users
 * and groups): a number, else the host's user or group of that name, as
 * tar x resolves it. */
static int acl_qualifier(struct ar_fill *f, int tag, const char *name, int *id)
{
	char *end;
	long v;

	if (!name || !*name)
		return fs_err(EINVAL, "archive member \"%s\": an ACL entry with neither a user "
			      "nor a group id", f->member);
	v = strtol(name, &end, 10);
	if (!*end && v >= 0 && v <= INT32_MAX) {
		*id = (int)v;
		return 0;
	}
	if (tag == ARCHIVE_ENTRY_ACL_USER) {
		struct passwd *pw = getpwnam(name);

		if (pw) {
			*id = (int)pw->pw_uid;
			return 0;
		}
	} else {
		struct group *gr = getgrnam(name);

		if (gr) {
			*id = (int)gr->gr_gid;
			return 0;
		}
	}
	return fs_err(EINVAL, "archive member \"%s\": its ACL names %s \"%s\", unknown on "
		      "this host and without a numeric id", f->member,
		      tag == ARCHIVE_ENTRY_ACL_USER ? "user" : "group", name);
}

/* The archive's ACL of one type (access or default) as the xattr name. */
static int copy_acl(struct ar_fill *f, uint64_t ino, struct archive_entry *e, int type,
		    const char *xname)
{
	int n = archive_entry_acl_reset(e, type), got = 0;
	int etype, perm, tag, id;
	const char *qname;
	uint8_t *buf;
	int err;

	if (n <= 0)
		return 0;
	if (!(buf = malloc(ACL_HDR + (size_t)n * ACL_LONG_ENTRY)))
		return fs_err(ENOMEM, "out of memory");
	uint32_t v = cpu_to_le32(ACL_XATTR_VERSION);

	memcpy(buf, &v, 4);
	while (got < n && archive_entry_acl_next(e, type, &etype, &perm, &tag, &id, &qname) ==
			  ARCHIVE_OK) {
		if ((tag == ARCHIVE_ENTRY_ACL_USER || tag == ARCHIVE_ENTRY_ACL_GROUP) && id < 0 &&
		    (err = acl_qualifier(f, tag, qname, &id))) {
			free(buf);
			return err;
		}
		put_acl_entry(buf + ACL_HDR + (size_t)got++ * ACL_LONG_ENTRY, tag, perm, id);
	}
	qsort(buf + ACL_HDR, (size_t)got, ACL_LONG_ENTRY, acl_cmp);
	err = uext4_setxattr(f->fs, ino, xname, buf, ACL_HDR + (size_t)got * ACL_LONG_ENTRY, 0);
	free(buf);
	if (err) {
		char what[64];

		snprintf(what, sizeof(what), "setting its ACL (%s)", xname);
		return member_err(f, err, what, false);
	}
	return 0;
}

/*
 * xattrs and ACLs, unless the caller said no_copy_xattrs.  *has_acl: an
 * access ACL was set, which set the permission bits (the mask as the
 * group's, as the kernel keeps them): set_attrs() keeps those, as
 * libarchive's mode of an entry with an ACL has the ACL's group::
 * entry in place of the mask.
 */
static int copy_extended(struct ar_fill *f, uint64_t ino, struct archive_entry *e,
			 bool *has_acl)
{
	int acls = 0, err;

	*has_acl = false;
	if (f->o && f->o->no_copy_xattrs)
		return 0;
	if ((err = copy_xattrs(f, ino, e, &acls)))
		return err;
	if (!(acls & ACL_ACCESS_DONE) && archive_entry_acl_reset(e, ARCHIVE_ENTRY_ACL_TYPE_ACCESS) > 0) {
		if ((err = copy_acl(f, ino, e, ARCHIVE_ENTRY_ACL_TYPE_ACCESS,
				    "system.posix_acl_access")))
			return err;
		acls |= ACL_ACCESS_DONE;
	}
	*has_acl = acls & ACL_ACCESS_DONE;
	if (!(acls & ACL_DEFAULT_DONE) && archive_entry_filetype(e) == AE_IFDIR)
		return copy_acl(f, ino, e, ARCHIVE_ENTRY_ACL_TYPE_DEFAULT,
				"system.posix_acl_default");
	return 0;
}

/* The permission bits the archive recorded.  libarchive stores an access
 * ACL's group:: entry in the mode's group bits, where ext4 (and the tar
 * header) keep the mask: with a mask, the group bits are the mask's. */
static uint32_t entry_perm(struct archive_entry *e)
{
	uint32_t perm = archive_entry_perm(e) & 07777;
	int type, p, tag, id;
	const char *name;

	if (archive_entry_acl_reset(e, ARCHIVE_ENTRY_ACL_TYPE_ACCESS) <= 0)
		return perm;
	while (archive_entry_acl_next(e, ARCHIVE_ENTRY_ACL_TYPE_ACCESS, &type, &p, &tag, &id,
				      &name) == ARCHIVE_OK)
		if (tag == ARCHIVE_ENTRY_ACL_MASK)
			perm = (perm & ~070u) | ((p & ARCHIVE_ENTRY_ACL_READ) ? 040 : 0) |
			       ((p & ARCHIVE_ENTRY_ACL_WRITE) ? 020 : 0) |
			       ((p & ARCHIVE_ENTRY_ACL_EXECUTE) ? 010 : 0);
	return perm;
}

/* Owner, mode (not for symlinks), size (given) and times (unless deferred,
 * for directories) in one setattr. */
static int set_attrs(struct ar_fill *f, uint64_t ino, struct archive_entry *e, bool is_root,
		     const uint64_t *size, bool has_acl)
{
	struct uext4_setattr sa = { 0 };
	int type = archive_entry_filetype(e);
	int err;
	struct uext4_stat cur;

	sa.valid = UEXT4_SET_UID | UEXT4_SET_GID;
	sa.uid = (uint32_t)archive_entry_uid(e);
	sa.gid = (uint32_t)archive_entry_gid(e);
	if (is_root && f->o && f->o->root_owner_set) {
		sa.uid = f->o->root_uid;
		sa.gid = f->o->root_gid;
	}
	if (type != AE_IFLNK) {
		sa.valid |= UEXT4_SET_MODE;
		sa.mode = entry_perm(e);
		if (has_acl) {
			if ((err = uext4_getattr(f->fs, ino, &cur)))
				return member_err(f, err, "reading back its mode", false);
			sa.mode = (sa.mode & 07000) | (cur.mode & 0777);
		}
	}
	if (size) {
		sa.valid |= UEXT4_SET_SIZE;
		sa.size = *size;
	}
	if (type != AE_IFDIR) {
		sa.valid |= UEXT4_SET_ATIME | UEXT4_SET_MTIME;
		sa.atime = entry_atime(f, e);
		sa.mtime = entry_mtime(f, e);
	}
	if ((err = uext4_setattr(f->fs, ino, &sa, NULL)))
		return member_err(f, err, "setting its attributes", size != NULL);
	return 0;
}

/* The inode flags the archive sets (libarchive's Linux FS_*_FL). */
static uint32_t entry_flags(struct archive_entry *e)
{
	unsigned long set = 0, clear = 0;

	archive_entry_fflags(e, &set, &clear);
	return (uint32_t)set;
}

/* Add flags to what the inode has (extents, inline data, ... stay). */
static int add_flags(uext4_fs *fs, uint64_t ino, uint32_t flags)
{
	uint32_t cur;
	int err = uext4_get_flags(fs, ino, &cur);

	return err ? err : uext4_set_flags(fs, ino, cur | flags);
}

/* Note ino for the end: times when a directory, flags when any. */
static int defer(struct ar_fill *f, uint64_t ino, struct archive_entry *e, bool dir)
{
	uint32_t flags = entry_flags(e);
	struct ar_late *l;

	if (!dir && !flags)
		return 0;
	if (f->nlate == f->caplate) {
		size_t cap = f->caplate ? 2 * f->caplate : 256;

		if (!(l = realloc(f->late, cap * sizeof(*l))))
			return fs_err(ENOMEM, "out of memory");
		f->late = l;
		f->caplate = cap;
	}
	l = &f->late[f->nlate];
	*l = (struct ar_late){ .ino = ino, .flags = flags, .dir = dir };
	if (dir) {
		l->atime = entry_atime(f, e);
		l->mtime = entry_mtime(f, e);
	}
	if (!(l->member = strdup(f->member)))
		return fs_err(ENOMEM, "out of memory");
	f->nlate++;
	return 0;
}

/* ino was freed (a later member replaced it): its number may come back. */
static void forget_late(struct ar_fill *f, uint64_t ino)
{
	for (size_t i = 0; i < f->nlate; i++)
		if (f->late[i].ino == ino)
			f->late[i].gone = true;
}

/* Every directory's times, then every flag, in archive order (a later
 * member for the same directory wins). */
static int finish_late(struct ar_fill *f)
{
	for (size_t i = 0; i < f->nlate; i++) {
		struct ar_late *l = &f->late[i];
		struct uext4_setattr sa = { .valid = UEXT4_SET_ATIME | UEXT4_SET_MTIME,
					    .atime = l->atime, .mtime = l->mtime };
		int err = l->dir && !l->gone ? uext4_setattr(f->fs, l->ino, &sa, NULL) : 0;

		if (err) {
			f->member = l->member;
			return member_err(f, err, "setting the directory's times", false);
		}
	}
	for (size_t i = 0; i < f->nlate; i++) {
		struct ar_late *l = &f->late[i];
		int err = l->flags && !l->gone ? add_flags(f->fs, l->ino, l->flags) : 0;

		if (err) {
			f->member = l->member;
			return member_err(f, err, "setting its inode flags", false);
		}
	}
	return 0;
}

static void free_late(struct ar_fill *f)
{
	for (size_t i = 0; i < f->nlate; i++)
		free(f->late[i].member);
	free(f->late);
}

/* ------------------------------------------------------------ progress */

static void report(struct ar_fill *f)
{
	if (!f->o || !f->o->progress)
		return;
	int64_t n = archive_filter_bytes(f->a, -1);

	f->prog.bytes_done = n > 0 ? (uint64_t)n : 0;
	f->o->progress(f->o->progress_ctx, &f->prog);
}

/* ------------------------------------------------------------ data */

struct ar_writer {
	uext4_file *file;
	uint64_t off;       /* file offset of wbuf[0] */
	size_t len;         /* bytes held in wbuf */
};

static int flush_data(struct ar_fill *f, struct ar_writer *w)
{
	size_t done = 0;

	while (done < w->len) {
		ssize_t n = uext4_pwrite(w->file, f->wbuf + done, w->len - done, w->off + done);

		if (n < 0)
			return member_err(f, (int)n, "writing its data", false);
		if (n == 0)
			return fs_err(EIO, "archive member \"%s\": writing its data: short write",
				      f->member);
		done += (size_t)n;
	}
	w->off += w->len;
	w->len = 0;
	return 0;
}

/* The data blocks libarchive hands out, at their offsets (holes between
 * them stay holes), coalesced into AR_WRITE_CHUNK writes.  *end gets the
 * end of the last data written. */
static int copy_data(struct ar_fill *f, uext4_file *file, uint64_t *end)
{
	struct ar_writer w = { file, 0, 0 };
	const void *buf;
	size_t size;
	la_int64_t off;
	int r, err;

	*end = 0;
	while ((r = archive_read_data_block(f->a, &buf, &size, &off)) == ARCHIVE_OK ||
	       r == ARCHIVE_WARN) {
		const uint8_t *p = buf;

		if (off < 0)
			return fs_err(EINVAL, "archive member \"%s\": data at a negative offset",
				      f->member);
		if ((uint64_t)off != w.off + w.len && (err = flush_data(f, &w)))
			return err;
		if (w.len == 0)
			w.off = (uint64_t)off;
		while (size) {
			size_t n = MIN(size, AR_WRITE_CHUNK - w.len);

			memcpy(f->wbuf + w.len, p, n);
			w.len += n;
			p += n;
			size -= n;
			if (w.len == AR_WRITE_CHUNK && (err = flush_data(f, &w)))
				return err;
		}
		if (w.off + w.len > *end)
			*end = w.off + w.len;
		report(f);
	}
	if (r != ARCHIVE_EOF)
		return fs_err(EIO, "archive member \"%s\": reading its data: %s", f->member,
			      archive_error_string(f->a) ? archive_error_string(f->a)
							 : "read error");
	return flush_data(f, &w);
}

/* ------------------------------------------------------------ members */

/* Make room for a new member called name in dir: remove what is there,
 * unless it is a directory and the member one too (*keep: its inode).
 * Anything over a non-empty directory is refused (as tar x fails). */
static int make_room(struct ar_fill *f, uint64_t dir, const char *name, bool new_is_dir,
		     uint64_t *keep)
{
	struct uext4_stat st;
	int err = uext4_lookup(f->fs, dir, name, &st);

	*keep = 0;
	if (err == -ENOENT)
		return 0;
	if (err)
		return member_err(f, err, "looking it up", false);
	if (S_ISDIR(st.mode) && new_is_dir) {
		*keep = st.ino;
		return 0;
	}
	if (S_ISDIR(st.mode)) {
		/* The parent cache may name it. */
		free(f->last_parent);
		f->last_parent = NULL;
		err = uext4_rmdir(f->fs, dir, name);
		if (err == -ENOTEMPTY)
			return fs_err(ENOTEMPTY, "archive member \"%s\": would replace a non-empty "
				      "directory of an earlier member: refused", f->member);
	} else {
		err = uext4_unlink(f->fs, dir, name);
	}
	if (err)
		return member_err(f, err, "replacing the earlier member of that path", false);
	if (S_ISDIR(st.mode) || st.nlink <= 1)
		forget_late(f, st.ino);
	return 0;
}

static int make_file(struct ar_fill *f, uint64_t dir, const char *name,
		     struct archive_entry *e, uint64_t *ino)
{
	struct uext4_stat st;
	uext4_file *file;
	uint64_t end, size;
	bool acl;
	int err = uext4_create(f->fs, dir, name, 0600, &st);

	if (err)
		return member_err(f, err, "creating it", true);
	*ino = st.ino;
	if ((err = uext4_open(f->fs, st.ino, O_WRONLY, &file)))
		return member_err(f, err, "opening it", false);
	err = copy_data(f, file, &end);
	uext4_release(file);
	if (err)
		return err;
	size = archive_entry_size_is_set(e) ? (uint64_t)archive_entry_size(e) : end;
	if ((err = copy_extended(f, st.ino, e, &acl)))
		return err;
	return set_attrs(f, st.ino, e, false, &size, acl);
}

static int make_hardlink(struct ar_fill *f, uint64_t dir, const char *name,
			 struct archive_entry *e)
{
	char *target = strdup(archive_entry_hardlink(e));
	char **comp = NULL;
	size_t n;
	uint64_t ino = f->root;
	struct uext4_stat st = { 0 };
	int err;

	if (!target)
		return fs_err(ENOMEM, "out of memory");
	if ((err = split_name(f, target, "its hard-link target", &comp, &n))) {
		free(target);
		return err;
	}
	for (size_t i = 0; !err && i < n; i++) {
		err = uext4_lookup(f->fs, ino, comp[i], &st);
		if (!err && i + 1 < n && !S_ISDIR(st.mode))
			err = -ENOTDIR;
		ino = st.ino;
	}
	if (!err && (n == 0 || S_ISDIR(st.mode)))
		err = fs_err(EPERM, "archive member \"%s\": a hard link to the directory \"%s\": "
			     "refused", f->member, archive_entry_hardlink(e));
	else if (err == -ENOENT || err == -ENOTDIR)
		err = fs_err(ENOENT, "archive member \"%s\": a hard link to \"%s\", which no "
			     "earlier member made", f->member, archive_entry_hardlink(e));
	else if (!err) {
		/* The same inode under that name already (a repeated member). */
		struct uext4_stat cur;

		if (uext4_lookup(f->fs, dir, name, &cur) == 0 && cur.ino == ino)
			goto out;
		uint64_t keep;

		if (!(err = make_room(f, dir, name, false, &keep)) &&
		    (err = uext4_link(f->fs, ino, dir, name, NULL)))
			err = member_err(f, err, "linking it", false);
	} else {
		err = member_err(f, err, "looking up its hard-link target", false);
	}
out:
	free(comp);
	free(target);
	return err;
}

/* Everything but hard links and regular files: make it, then its
 * attributes (a directory's times at the end). */
static int make_other(struct ar_fill *f, uint64_t dir, const char *name,
		      struct archive_entry *e, uint64_t keep)
{
	int type = archive_entry_filetype(e);
	struct uext4_stat st;
	uint64_t ino = keep;
	bool acl;
	int err = 0;

	if (type == AE_IFDIR) {
		if (!keep && (err = uext4_mkdir(f->fs, dir, name, 0700, &st)))
			return member_err(f, err, "making the directory", true);
	} else if (type == AE_IFLNK) {
		const char *t = archive_entry_symlink(e);

		if (!t)
			return fs_err(EINVAL, "archive member \"%s\": a symlink without a target",
				      f->member);
		if ((err = uext4_symlink(f->fs, dir, name, t, &st)))
			return member_err(f, err, "making the symlink", true);
	} else if (type == AE_IFCHR || type == AE_IFBLK || type == AE_IFIFO || type == AE_IFSOCK) {
		uint64_t rdev = 0;

		if (type == AE_IFCHR || type == AE_IFBLK)
			rdev = makedev(archive_entry_rdevmajor(e), archive_entry_rdevminor(e));
		if ((err = uext4_mknod(f->fs, dir, name, (uint32_t)type | 0600, rdev, &st)))
			return member_err(f, err, "making the node", true);
	} else {
		return fs_err(EINVAL, "archive member \"%s\": unknown file type 0%o", f->member,
			      (unsigned)type);
	}
	if (!keep)
		ino = st.ino;
	if ((err = copy_extended(f, ino, e, &acl)) ||
	    (err = set_attrs(f, ino, e, false, NULL, acl)))
		return err;
	return defer(f, ino, e, type == AE_IFDIR);
}

/* The member that names dir itself ("./"): its attributes. */
static int fill_root(struct ar_fill *f, struct archive_entry *e)
{
	bool acl;
	int err;

	if (archive_entry_filetype(e) != AE_IFDIR)
		return fs_err(EINVAL, "archive member \"%s\": names the top directory but is "
			      "not a directory", f->member);
	if ((err = copy_extended(f, f->root, e, &acl)) ||
	    (err = set_attrs(f, f->root, e, true, NULL, acl)))
		return err;
	return defer(f, f->root, e, true);
}

static int fill_member(struct ar_fill *f, struct archive_entry *e)
{
	char *path = strdup(f->member);
	char **comp = NULL;
	size_t n = 0;
	uint64_t dir = 0, keep = 0, ino = 0;
	int type = archive_entry_filetype(e);
	int err;

	if (!path)
		return fs_err(ENOMEM, "out of memory");
	err = split_name(f, path, "its name", &comp, &n);
	if (!err && n == 0) {
		err = archive_entry_hardlink(e) ? fs_err(EINVAL, "archive member \"%s\": a hard "
							 "link naming the top directory", f->member)
						: fill_root(f, e);
		goto out;
	}
	if (!err)
		err = parent_of(f, comp, n, &dir);
	if (err)
		goto out;
	const char *name = comp[n - 1];

	if (archive_entry_hardlink(e)) {
		err = make_hardlink(f, dir, name, e);
		goto out;
	}
	if ((err = make_room(f, dir, name, type == AE_IFDIR, &keep)))
		goto out;
	if (type == AE_IFREG) {
		if (!(err = make_file(f, dir, name, e, &ino)))
			err = defer(f, ino, e, false);
	} else {
		err = make_other(f, dir, name, e, keep);
	}
out:
	free(comp);
	free(path);
	return err;
}

/* ------------------------------------------------------------ the stream */

static int stream_err(struct ar_fill *f, const char *what)
{
	const char *s = archive_error_string(f->a);
	int e = archive_errno(f->a);

	return fs_err(EINVAL, "%s%s%s%s: %s", what, f->member ? " after member \"" : "",
		      f->member ? f->member : "", f->member ? "\"" : "",
		      s ? s : (e > 0 ? strerror(e) : "not a readable archive"));
}

/* A reader of every format and filter on fd; 0 or -errno (message set). */
static int open_stream(struct ar_fill *f, int fd)
{
	if (!(f->a = archive_read_new()))
		return fs_err(ENOMEM, "out of memory");
	archive_read_support_filter_all(f->a);
	archive_read_support_format_all(f->a);
	if (archive_read_open_fd(f->a, fd, AR_READ_BLOCK) != ARCHIVE_OK)
		return stream_err(f, "opening the archive");
	return 0;
}

static int fill_all(struct ar_fill *f)
{
	struct archive_entry *e;
	char *last = NULL;
	int r, err = 0;

	while ((r = archive_read_next_header(f->a, &e)) == ARCHIVE_OK || r == ARCHIVE_WARN) {
		const char *p = archive_entry_pathname(e);

		if (!p) {
			err = fs_err(EINVAL, "an archive member without a usable name (after "
				     "\"%s\")", last ? last : "the start");
			break;
		}
		free(last);
		if (!(last = strdup(p))) {
			err = fs_err(ENOMEM, "out of memory");
			break;
		}
		f->member = last;
		if ((err = fill_member(f, e)))
			break;
		f->prog.files_done++;
		report(f);
	}
	if (!err && r != ARCHIVE_EOF) {
		f->member = last;
		err = stream_err(f, "reading the archive");
	}
	f->member = NULL;
	free(last);
	return err;
}

/* dir's owner from root_owner, before any member (the archive may have no
 * member for the top directory). */
static int root_owner(struct ar_fill *f)
{
	struct uext4_setattr sa = { .valid = UEXT4_SET_UID | UEXT4_SET_GID };

	if (!f->o || !f->o->root_owner_set)
		return 0;
	sa.uid = f->o->root_uid;
	sa.gid = f->o->root_gid;
	return uext4_setattr(f->fs, f->root, &sa, NULL);
}

int uext4_populate_archive(uext4_fs *fs, uint64_t dir, int fd,
			   const struct uext4_populate_opts *o)
{
	struct ar_fill f = { .fs = fs, .root = dir, .o = o };
	struct stat st;
	int err;

	fs_clear_err();
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode))
		f.prog.bytes_total = (uint64_t)st.st_size;
	if (!(f.wbuf = malloc(AR_WRITE_CHUNK)))
		return fs_err(ENOMEM, "out of memory");
	/* The fill acts as root with no umask; the caller's own identity and
	 * umask come back at the end. */
	uint32_t uid = caller_uid(), gid = caller_gid(), umask = caller_umask();
	uext4_set_caller(0, 0);
	uext4_set_umask(0);
	if ((err = open_stream(&f, fd)))
		;
	else if ((err = root_owner(&f)))
		err = fs_err(-err, "setting the owner of the top directory: %s",
			     uext4_last_error());
	if (!err)
		err = fill_all(&f);
	if (!err)
		err = finish_late(&f);
	if (!err) {
		/* Done: the whole stream counts as read (libarchive stops at the
		 * end-of-archive blocks, before the padding of the last record). */
		if (f.prog.bytes_total && o && o->progress) {
			f.prog.bytes_done = f.prog.bytes_total;
			o->progress(o->progress_ctx, &f.prog);
		} else {
			report(&f);
		}
	}
	if (f.a)
		archive_read_free(f.a);
	free_late(&f);
	free(f.wbuf);
	free(f.last_parent);
	uext4_set_caller(uid, gid);
	uext4_set_umask(umask);
	return err;
}
