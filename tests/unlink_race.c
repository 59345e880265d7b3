/*
 * unlink_race.c - the unlink fast path (issue 12: a small file nobody
 * holds is freed in the unlink's own handle) against threads that reach
 * the same inode while it goes.
 *
 *   unlink_race IMAGE SEED
 *
 * NDIRS unlinker threads each create, write (0-3 blocks) and unlink files
 * in their own directory; NRACERS racer threads look the current names up
 * and, by the number they found, stat, open, write and close the inode,
 * and look it up again.  A racer that reached the inode before the unlink
 * holds it: the unlink must then take the orphan path and the racer's
 * writes land on a live (unlinked) inode, freed at its close.  A racer
 * that comes later must get ENOENT, never another file's data or an
 * error.  Checked: no error but ENOENT anywhere, the data a racer wrote
 * through an open file reads back, and statfs's free inodes and blocks
 * after the run equal those before (nothing leaked; the script runs
 * e2fsck -fn after).  Run under TSan by tests/run.sh (unlink_race.sh).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "uext4.h"
#include "t.h"

#define NDIRS 2
#define NRACERS 2
#define FILES_PER_DIR 3000

static uext4_fs *g_fs;
static uint64_t g_seed;
static uint64_t g_dir[NDIRS];
static _Atomic unsigned g_cur[NDIRS];   /* the file each unlinker is at */
static _Atomic int g_done, g_bad;
static _Atomic unsigned long g_held, g_gone;

static void bad(const char *what, int err)
{
	printf("FAIL %s: %s (%s)\n", what, strerror(-err), uext4_last_error());
	atomic_store(&g_bad, 1);
}

static void *unlinker(void *arg)
{
	int d = (int)(intptr_t)arg;
	uint64_t x = t_mix(g_seed + (uint64_t)d);
	static const unsigned char blk[4096 * 3];
	char name[32];

	for (unsigned i = 0; i < FILES_PER_DIR && !atomic_load(&g_bad); i++) {
		struct uext4_stat st;
		uext4_file *f;
		int err;

		x = t_mix(x);
		snprintf(name, sizeof(name), "f%u", i);
		if ((err = uext4_create(g_fs, g_dir[d], name, 0644, &st))) {
			bad("create", err);
			break;
		}
		atomic_store(&g_cur[d], i);
		size_t len = (size_t)(x % 4) * 4096 - (x % 3);

		if ((x % 4) && !(err = uext4_open(g_fs, st.ino, O_WRONLY, &f))) {
			if (uext4_pwrite(f, blk, len, 0) != (ssize_t)len)
				bad("pwrite", -EIO);
			uext4_release(f);
		} else if (err) {
			bad("open (unlinker)", err);
		}
		if ((err = uext4_unlink(g_fs, g_dir[d], name)) && err != -ENOENT) {
			bad("unlink", err);
			break;
		}
	}
	return NULL;
}

/* One look at dir d's current file by name, then by number. */
static void race_once(uint64_t *x, int id)
{
	uint64_t at = 3 * 4096 + 100 + 64 * (uint64_t)id; /* racers share inodes */
	int d = (int)(*x % NDIRS);
	unsigned i = atomic_load(&g_cur[d]);
	char name[32], data[64];
	struct uext4_stat st;
	uext4_file *f;
	int err;

	snprintf(name, sizeof(name), "f%u", i);
	err = uext4_lookup(g_fs, g_dir[d], name, &st);
	if (err == -ENOENT)
		return;
	if (err) {
		bad("lookup", err);
		return;
	}
	err = uext4_open(g_fs, st.ino, O_RDWR, &f);
	/* The number of a file freed and evicted since the lookup: iget()
	 * reads a freed slot and refuses it as the kernel's ext4_iget does
	 * ("deleted inode referenced", EUCLEAN, also on main); a cached one
	 * gives ENOENT. */
	if (err == -EUCLEAN && strstr(uext4_last_error(), "deleted inode referenced"))
		err = -ENOENT;
	if (err == -ENOENT) {
		atomic_fetch_add(&g_gone, 1);
		return;
	}
	if (err) {
		bad("open by number", err);
		return;
	}
	/* Held now: whatever the unlinker does, this inode stays ours until
	 * the release, and what we write reads back. */
	memset(data, (int)(*x & 0x7f) | 1, sizeof(data));
	if (uext4_pwrite(f, data, sizeof(data), at) != (ssize_t)sizeof(data)) {
		bad("pwrite (held)", -EIO);
	} else {
		char back[64];
		ssize_t n = uext4_pread(f, back, sizeof(back), at);

		if (n != (ssize_t)sizeof(back) || memcmp(back, data, sizeof(data))) {
			printf("read back of inode %llu: %zd bytes, %s\n", (unsigned long long)st.ino,
			       n, n == (ssize_t)sizeof(back) ? "different" : "short");
			bad("read back (held)", n < 0 ? (int)n : -EIO);
		}
	}
	if ((err = uext4_getattr(g_fs, st.ino, &st)) && err != -ENOENT)
		bad("getattr (held)", err);
	if ((err = uext4_release(f)))
		bad("release", err);
	atomic_fetch_add(&g_held, 1);
}

static void *racer(void *arg)
{
	uint64_t x = t_mix(g_seed ^ (uint64_t)(intptr_t)arg ^ 0x9e3779b97f4a7c15ull);

	while (!atomic_load(&g_done) && !atomic_load(&g_bad)) {
		x = t_mix(x);
		race_once(&x, (int)(intptr_t)arg);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	struct uext4_opts o = { 0 };
	struct uext4_statfs before, after;
	pthread_t u[NDIRS], r[NRACERS];
	int err;

	if (argc != 3) {
		fprintf(stderr, "usage: unlink_race IMAGE SEED\n");
		return 2;
	}
	g_seed = strtoull(argv[2], NULL, 0);
	printf("unlink_race: seed %llu\n", (unsigned long long)g_seed);
	if ((err = uext4_mount(argv[1], &o, &g_fs))) {
		bad("mount", err);
		return 1;
	}
	for (int d = 0; d < NDIRS; d++) {
		struct uext4_stat st;
		char name[16];

		snprintf(name, sizeof(name), "d%d", d);
		if ((err = uext4_mkdir(g_fs, UEXT4_ROOT_INO, name, 0755, &st))) {
			bad("mkdir", err);
			return 1;
		}
		g_dir[d] = st.ino;
	}
	if ((err = uext4_sync(g_fs)) || (err = uext4_statfs(g_fs, &before))) {
		bad("statfs", err);
		return 1;
	}
	for (int i = 0; i < NRACERS; i++)
		pthread_create(&r[i], NULL, racer, (void *)(intptr_t)i);
	for (int d = 0; d < NDIRS; d++)
		pthread_create(&u[d], NULL, unlinker, (void *)(intptr_t)d);
	for (int d = 0; d < NDIRS; d++)
		pthread_join(u[d], NULL);
	atomic_store(&g_done, 1);
	for (int i = 0; i < NRACERS; i++)
		pthread_join(r[i], NULL);
	if ((err = uext4_sync(g_fs)) || (err = uext4_statfs(g_fs, &after))) {
		bad("statfs", err);
		return 1;
	}
	printf("racers opened %lu inodes by number (some across their unlink), found %lu gone\n",
	       atomic_load(&g_held), atomic_load(&g_gone));
	if (after.inodes_free != before.inodes_free || after.blocks_free != before.blocks_free) {
		printf("FAIL leak: free inodes %llu -> %llu, free blocks %llu -> %llu\n",
		       (unsigned long long)before.inodes_free, (unsigned long long)after.inodes_free,
		       (unsigned long long)before.blocks_free, (unsigned long long)after.blocks_free);
		atomic_store(&g_bad, 1);
	}
	if ((err = uext4_umount(g_fs)))
		bad("umount", err);
	if (atomic_load(&g_bad))
		return 1;
	printf("ok\n");
	return 0;
}
