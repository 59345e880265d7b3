/*
 * seed002.c - many threads creating many empty files in sibling directories.
 *
 *   seed002 [--threads N] [--files N] IMAGE
 *
 * On a fresh image (seed002.sh makes it: ext4 with flex_bg, enough
 * inodes), mkdir /common and N sibling directories /common/dK; then N
 * threads each create FILES empty files in their own directory with
 * uext4_create.  Checks:
 *   - the inode-table read counter (reads[UEXT4_META_INODE_TABLE]) does not
 *     grow during the creates: new inodes go into inode-table blocks that
 *     are set up in memory, never read back (the cache is big enough);
 *   - files of different directories never share an inode-table block
 *     (block = (ino - 1) % inodes_per_group * inode_size / block_size within
 *     the group), so directories do not contend for the same blocks;
 *   - every file can be looked up afterwards (a sample) and readdir counts
 *     match;
 *   - after uext4_umount, e2fsck -fn is clean.
 * Counters and files/s are printed (informational, not asserted).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <time.h>

#include "uext4.h"
#include "t.h"

static uext4_fs *g_fs;
static int g_files = 20000;

struct creator {
	int id;
	uint64_t dir;
	uint64_t *inos;
	int created;
	int errors;
};

static void *create_thread(void *arg)
{
	struct creator *c = arg;
	char name[32];
	for (int i = 0; i < g_files; i++) {
		snprintf(name, sizeof(name), "file-%06d", i);
		struct uext4_stat st;
		int r = uext4_create(g_fs, c->dir, name, S_IFREG | 0644, &st);
		if (r < 0) {
			if (c->errors++ < 5)
				fprintf(stderr, "FAIL: thread %d: create d%d/%s: %s (%s)\n", c->id, c->id,
					name, strerror(-r), uext4_last_error());
			continue;
		}
		c->inos[c->created++] = st.ino;
	}
	return NULL;
}

static int count_fill(void *ctx, const char *name, size_t len, uint64_t ino, unsigned dtype,
		      uint64_t next)
{
	(*(uint64_t *)ctx)++;
	return 0;
}

static void print_counters(const char *when, const struct uext4_counters *c)
{
	static const char *const kinds[UEXT4_META_NKINDS] = {
		"super", "gdesc", "bitmap", "itable", "dir", "extent", "xattr", "data", "other",
	};
	printf("%-16s reads:", when);
	for (int k = 0; k < UEXT4_META_NKINDS; k++)
		printf(" %s=%llu", kinds[k], (unsigned long long)c->reads[k]);
	printf(" | hits=%llu misses=%llu evictions=%llu cached=%llu MiB\n",
	       (unsigned long long)c->cache_hits, (unsigned long long)c->cache_misses,
	       (unsigned long long)c->cache_evictions,
	       (unsigned long long)(c->cached_bytes >> 20));
}

int main(int argc, char **argv)
{
	int nthreads = 16;
	const char *img = NULL;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--threads") && i + 1 < argc)
			nthreads = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--files") && i + 1 < argc)
			g_files = atoi(argv[++i]);
		else if (!img && argv[i][0] != '-')
			img = argv[i];
		else
			img = NULL, i = argc;
	}
	if (!img || nthreads < 1 || nthreads > 256 || g_files < 1) {
		fprintf(stderr, "usage: seed002 [--threads N] [--files N] IMAGE\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0); /* keep stdout and stderr in order in logs */
	printf("seed002: %s, %d threads x %d empty files in sibling directories\n", img, nthreads,
	       g_files);
	struct uext4_opts o = { .cache_bytes = 1ull << 30 };
	int r = uext4_mount(img, &o, &g_fs);
	if (r < 0) {
		printf("FAIL: mount %s: %s (%s)\n", img, strerror(-r), uext4_last_error());
		return T_FAIL;
	}
	struct uext4_info info;
	uext4_info(g_fs, &info);
	printf("block size %u, inode size %u, %u inodes per group, %u groups, %u groups per flex\n",
	       info.block_size, info.inode_size, info.inodes_per_group, info.groups_count,
	       1u << info.log_groups_per_flex);
	T_CHECK(info.free_inodes >= (uint64_t)nthreads * (uint64_t)g_files + nthreads + 1,
		"the image has only %u free inodes", info.free_inodes);

	struct uext4_stat st;
	r = uext4_mkdir(g_fs, UEXT4_ROOT_INO, "common", S_IFDIR | 0755, &st);
	if (r < 0) {
		printf("FAIL: mkdir /common: %s (%s)\n", strerror(-r), uext4_last_error());
		return T_FAIL;
	}
	uint64_t common = st.ino;
	struct creator *cr = calloc((size_t)nthreads, sizeof(*cr));
	for (int i = 0; i < nthreads; i++) {
		char name[16];
		snprintf(name, sizeof(name), "d%d", i);
		r = uext4_mkdir(g_fs, common, name, S_IFDIR | 0755, &st);
		if (r < 0) {
			printf("FAIL: mkdir /common/%s: %s (%s)\n", name, strerror(-r),
			       uext4_last_error());
			return T_FAIL;
		}
		cr[i].id = i;
		cr[i].dir = st.ino;
		cr[i].inos = t_xmalloc((size_t)g_files * sizeof(uint64_t));
		printf("  /common/%s: ino %llu (group %llu)\n", name, (unsigned long long)st.ino,
		       (unsigned long long)((st.ino - 1) / info.inodes_per_group));
	}

	struct uext4_counters c0, c1;
	uext4_get_counters(g_fs, &c0);
	print_counters("before creates", &c0);
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	pthread_t *tid = calloc((size_t)nthreads, sizeof(*tid));
	for (int i = 0; i < nthreads; i++)
		pthread_create(&tid[i], NULL, create_thread, &cr[i]);
	uint64_t total = 0;
	int errors = 0;
	for (int i = 0; i < nthreads; i++) {
		pthread_join(tid[i], NULL);
		total += (uint64_t)cr[i].created;
		errors += cr[i].errors;
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	uext4_get_counters(g_fs, &c1);
	double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	print_counters("after creates", &c1);
	printf("created %llu files in %.2f s: %.0f files/s (informational)\n",
	       (unsigned long long)total, secs, secs > 0 ? (double)total / secs : 0.0);
	T_CHECK(errors == 0, "%d creates failed", errors);
	T_CHECK(c1.reads[UEXT4_META_INODE_TABLE] == c0.reads[UEXT4_META_INODE_TABLE],
		"inode-table blocks were read during the creates: %llu -> %llu",
		(unsigned long long)c0.reads[UEXT4_META_INODE_TABLE],
		(unsigned long long)c1.reads[UEXT4_META_INODE_TABLE]);

	/* inode-table blocks per directory must be disjoint */
	uint32_t ipb = info.block_size / info.inode_size;
	uint64_t nblocks = ((uint64_t)info.inodes_count + ipb - 1) / ipb;
	int16_t *owner = t_xmalloc(nblocks * sizeof(*owner));
	for (uint64_t b = 0; b < nblocks; b++)
		owner[b] = -1;
	uint64_t shared = 0, shared_reported = 0;
	for (int i = 0; i < nthreads; i++) {
		for (int k = 0; k < cr[i].created; k++) {
			uint64_t ino = cr[i].inos[k];
			uint64_t group = (ino - 1) / info.inodes_per_group;
			uint64_t index = (ino - 1) % info.inodes_per_group;
			uint64_t b = group * ((info.inodes_per_group + ipb - 1) / ipb) + index / ipb;
			if (ino < 1 || ino > info.inodes_count || b >= nblocks) {
				T_CHECK(0, "thread %d got inode number %llu out of range", i,
					(unsigned long long)ino);
				continue;
			}
			if (owner[b] == -1) {
				owner[b] = (int16_t)i;
			} else if (owner[b] != i) {
				shared++;
				if (shared_reported++ < 5)
					fprintf(stderr, "inode %llu of d%d shares inode-table block %llu "
						"of group %llu with d%d\n", (unsigned long long)ino, i,
						(unsigned long long)(index / ipb),
						(unsigned long long)group, owner[b]);
			}
		}
	}
	uint64_t used_blocks = 0;
	for (uint64_t b = 0; b < nblocks; b++)
		used_blocks += owner[b] != -1;
	printf("the files use %llu inode-table blocks; %llu inodes are in blocks another "
	       "directory uses too\n", (unsigned long long)used_blocks, (unsigned long long)shared);
	T_CHECK(shared == 0, "%llu files share inode-table blocks with other directories' files",
		(unsigned long long)shared);
	free(owner);

	/* the directories hold what was created */
	for (int i = 0; i < nthreads; i++) {
		uint64_t n = 0;
		r = uext4_readdir(g_fs, cr[i].dir, 0, count_fill, &n);
		T_CHECK(r == 0 && n == (uint64_t)cr[i].created + 2,
			"readdir d%d: %d, %llu entries, created %d", i, r, (unsigned long long)n,
			cr[i].created);
		for (int k = 0; k < g_files; k += 997) {
			char name[32];
			snprintf(name, sizeof(name), "file-%06d", k);
			r = uext4_lookup(g_fs, cr[i].dir, name, &st);
			T_CHECK(r == 0 && st.ino == cr[i].inos[k] && S_ISREG(st.mode) && st.size == 0,
				"lookup d%d/%s: %d ino %llu", i, name, r, (unsigned long long)st.ino);
		}
		free(cr[i].inos);
	}
	free(cr);
	free(tid);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	r = uext4_umount(g_fs);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	T_CHECK(r == 0, "umount: %s (%s)", strerror(-r), uext4_last_error());
	printf("umount (write-back) took %.2f s\n",
	       (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
	if (t_fsck_clean(img))
		printf("e2fsck -fn: clean\n");
	printf("%s\n", t_failures ? "FAIL" : "seed002 passed");
	return t_failures ? T_FAIL : T_PASS;
}
