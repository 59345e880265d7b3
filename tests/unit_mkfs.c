/*
 * unit_mkfs.c - uext4_mkfs() geometry and a file system at an offset.
 *
 *  1. Geometry (dry runs): for sizes from 2 MiB to 16 TiB, block size,
 *     blocks, inodes, inodes per group, reserved GDT blocks, journal and
 *     orphan file size and features equal what Debian's mke2fs 1.47.0
 *     printed (dumpe2fs -h) for `mke2fs -t ext4 -O orphan_file,
 *     metadata_csum_seed` of the same size; a dry run creates nothing.
 *  2. Offset: a file system made 1 MiB into a file whose first MiB holds a
 *     pattern: the pattern is unchanged; uext4_mount with opts.offset
 *     mounts it, a directory and a file written there read back after a
 *     remount; a mount without the offset is refused (no superblock
 *     there); e2fsck -fn of the file system's bytes (copied out) is clean.
 *  3. Refusal: a second uext4_mkfs without force fails with EEXIST naming
 *     an ext4 file system and leaves every byte as it was.
 */
#include "t.h"
#include "uext4.h"

#include <fcntl.h>
#include <unistd.h>

struct want {
	const char *size;
	uint64_t bytes;
	uint32_t bs;
	uint64_t blocks;
	uint32_t inodes, ipg, rsv_gdt, journal, orphan;
	int resize_inode;
};

#define MIB (1024ull * 1024)
#define GIB (1024 * MIB)
#define TIB (1024 * GIB)

/* From dumpe2fs -h of mke2fs 1.47.0's images (Debian's mke2fs.conf). */
static const struct want wants[] = {
	{ "2M", 2 * MIB, 1024, 2048, 256, 256, 15, 1024, 32, 1 },
	{ "64M", 64 * MIB, 1024, 65536, 16384, 2048, 256, 4096, 32, 1 },
	{ "1G", GIB, 4096, 262144, 65536, 8192, 127, 8192, 64, 1 },
	{ "16T", 16 * TIB, 4096, 4294967296ull, 268435456u, 2048, 0, 262144, 512, 0 },
};

static void check_geometry(const char *dir)
{
	char path[4096];

	snprintf(path, sizeof(path), "%s/dry.img", dir);
	for (size_t i = 0; i < sizeof(wants) / sizeof(wants[0]); i++) {
		const struct want *w = &wants[i];
		struct uext4_mkfs_opts o = { .size = w->bytes, .dry_run = 1 };
		struct uext4_mkfs_geometry g;
		int ret = uext4_mkfs(path, &o, &g);

		T_CHECK(ret == 0, "%s: dry run: %s", w->size, uext4_last_error());
		if (ret)
			continue;
		T_CHECK(g.block_size == w->bs, "%s: block size %u", w->size, g.block_size);
		T_CHECK(g.blocks_count == w->blocks, "%s: blocks %" PRIu64, w->size, g.blocks_count);
		T_CHECK(g.inodes_count == w->inodes, "%s: inodes %u", w->size, g.inodes_count);
		T_CHECK(g.inodes_per_group == w->ipg, "%s: ipg %u", w->size, g.inodes_per_group);
		T_CHECK(g.reserved_gdt_blocks == w->rsv_gdt, "%s: rsv gdt %u", w->size,
			g.reserved_gdt_blocks);
		T_CHECK(g.journal_blocks == w->journal, "%s: journal %u", w->size, g.journal_blocks);
		T_CHECK(g.orphan_file_blocks == w->orphan, "%s: orphan %u", w->size,
			g.orphan_file_blocks);
		T_CHECK(!!strstr(g.features, "resize_inode") == w->resize_inode, "%s: features %s",
			w->size, g.features);
		T_CHECK(strstr(g.features, "metadata_csum_seed") && strstr(g.features, "orphan_file"),
			"%s: features %s", w->size, g.features);
		T_CHECK(access(path, F_OK) != 0, "%s: the dry run created %s", w->size, path);
	}
}

static int write_file(uext4_fs *fs, uint64_t dir, const char *name, const char *data)
{
	struct uext4_stat st;
	uext4_file *f;
	int ret = uext4_create(fs, dir, name, 0644, &st);

	if (ret)
		return ret;
	if ((ret = uext4_open(fs, st.ino, O_RDWR, &f)))
		return ret;
	ret = uext4_pwrite(f, data, strlen(data), 0) == (ssize_t)strlen(data) ? 0 : -EIO;
	uext4_release(f);
	return ret;
}

/* Bytes [off, off+len) of path into a new file out. */
static int copy_range(const char *path, uint64_t off, uint64_t len, const char *out)
{
	int in = open(path, O_RDONLY), o = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	char *buf = t_xmalloc(1 << 20);
	int ret = in >= 0 && o >= 0 ? 0 : -1;

	while (!ret && len) {
		size_t n = len < (1 << 20) ? (size_t)len : (1 << 20);
		ssize_t r = pread(in, buf, n, (off_t)off);

		if (r <= 0 || write(o, buf, (size_t)r) != r)
			ret = -1;
		off += (uint64_t)(r > 0 ? r : 0);
		len -= (uint64_t)(r > 0 ? r : 0);
	}
	free(buf);
	if (in >= 0)
		close(in);
	if (o >= 0)
		close(o);
	return ret;
}

static void check_offset(const char *dir)
{
	const uint64_t off = MIB, size = 32 * MIB;
	char path[4096], part[4096], cmd[8300];
	uint8_t *pattern = t_xmalloc(off), *back = t_xmalloc(off);
	struct uext4_mkfs_opts mo = { .size = size, .offset = off };
	struct uext4_opts opts = { .offset = off };
	struct uext4_mkfs_geometry g;
	struct uext4_stat st;
	uext4_fs *fs = NULL;
	uint64_t d;
	char buf[64];
	uext4_file *f;
	int fd;

	snprintf(path, sizeof(path), "%s/disk.img", dir);
	snprintf(part, sizeof(part), "%s/part.img", dir);
	for (uint64_t i = 0; i < off; i++)
		pattern[i] = (uint8_t)(i * 7 + 3);
	pattern[510] = 0, pattern[511] = 0;     /* no MBR signature */
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	T_CHECK(fd >= 0 && write(fd, pattern, off) == (ssize_t)off, "write %s", path);
	close(fd);
	T_CHECK(uext4_mkfs(path, &mo, &g) == 0, "mkfs at offset: %s", uext4_last_error());
	fd = open(path, O_RDONLY);
	T_CHECK(fd >= 0 && pread(fd, back, off, 0) == (ssize_t)off, "read back");
	close(fd);
	T_CHECK(memcmp(pattern, back, off) == 0, "the bytes before the offset changed");
	T_CHECK(uext4_mount(path, &(struct uext4_opts){ 0 }, &fs) < 0,
		"a mount without the offset worked");
	T_CHECK(uext4_mount(path, &opts, &fs) == 0, "mount at offset: %s", uext4_last_error());
	if (!fs)
		return;
	T_CHECK(uext4_mkdir(fs, UEXT4_ROOT_INO, "dir", 0755, &st) == 0, "mkdir: %s",
		uext4_last_error());
	d = st.ino;
	T_CHECK(write_file(fs, d, "file", "hello at an offset\n") == 0, "write: %s",
		uext4_last_error());
	T_CHECK(uext4_umount(fs) == 0, "umount: %s", uext4_last_error());
	opts.read_only = 1;
	T_CHECK(uext4_mount(path, &opts, &fs) == 0, "remount: %s", uext4_last_error());
	T_CHECK(uext4_stat_path(fs, "/dir/file", &st) == 0, "stat: %s", uext4_last_error());
	T_CHECK(uext4_open(fs, st.ino, O_RDONLY, &f) == 0, "open");
	memset(buf, 0, sizeof(buf));
	T_CHECK(uext4_pread(f, buf, sizeof(buf), 0) == 19 && !strcmp(buf, "hello at an offset\n"),
		"read back '%s'", buf);
	uext4_release(f);
	uext4_umount(fs);
	T_CHECK(copy_range(path, off, size, part) == 0, "copy out the file system");
	snprintf(cmd, sizeof(cmd), "e2fsck -fn '%s' > '%s.fsck' 2>&1", part, part);
	if (system("command -v e2fsck > /dev/null") == 0)
		T_CHECK(system(cmd) == 0, "e2fsck -fn of the file system at the offset is not "
			"clean (%s.fsck)", part);

	/* 3: refusal without force leaves every byte */
	{
		struct uext4_mkfs_opts again = { .size = size, .offset = off };
		uint8_t *before = t_xmalloc(size), *after = t_xmalloc(size);
		int ret;

		fd = open(path, O_RDONLY);
		T_CHECK(pread(fd, before, size, (off_t)off) == (ssize_t)size, "read");
		ret = uext4_mkfs(path, &again, &g);
		T_CHECK(ret == -EEXIST && strstr(uext4_last_error(), "ext4 file system"),
			"mkfs over a file system: %d %s", ret, uext4_last_error());
		T_CHECK(pread(fd, after, size, (off_t)off) == (ssize_t)size, "read");
		T_CHECK(memcmp(before, after, size) == 0, "a refused mkfs changed the image");
		close(fd);
		free(before);
		free(after);
	}
	free(pattern);
	free(back);
}

int main(void)
{
	char tmpl[] = "/tmp/unit_mkfs.XXXXXX";
	const char *dir = mkdtemp(tmpl);
	char cmd[256];

	if (!dir) {
		perror("mkdtemp");
		return T_FAIL;
	}
	check_geometry(dir);
	check_offset(dir);
	if (!t_failures) {
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
		if (system(cmd) != 0)
			fprintf(stderr, "could not remove %s\n", dir);
	} else {
		fprintf(stderr, "%d failures; files kept in %s\n", t_failures, dir);
	}
	return t_failures ? T_FAIL : T_PASS;
}
