/*
 * journal_limit.c - one long transaction stays within its share.
 *
 *   journal_limit IMAGE CACHE_BYTES NFILES
 *
 * Creates NFILES empty files in IMAGE (1000 per directory d0, d1, ...;
 * a mount of its own, unmounted), then mounts IMAGE cache_bytes = CACHE_BYTES and
 * commit_secs = 3600, so that no timer commit happens, and dirties
 * metadata without a sync: a chmod of every file (its inode-table block)
 * and a setxattr of a 64-byte value on every file (in-inode space).
 * Every commit meanwhile is forced by the dirty limit.  Checks, with the
 * statistics API: the most blocks in one commit is at most the
 * transaction's limit, min(journal size / 4, cache blocks / 4) (jbd2's
 * max transaction; a share of the cache), and the workload committed more
 * than three times that in all (so the limit was needed: with it off, one
 * commit at unmount would take everything and the first check fails).
 * Prints "base_kib N" (RSS before the second mount, after the first
 * one's unmount) and "vmhwm_kib N" (the peak since: VmHWM is reset
 * through /proc/self/clear_refs) for the script's bound.
 */
#include "uext4.h"
#include "bcache.h"
#include "journal.h"
#include "t.h"

#define PER_DIR 1000

static int create_all(const char *img, long nfiles)
{
	struct uext4_opts o = { 0 };
	struct uext4_stat st;
	uint64_t dir = 2;
	char name[32];
	uext4_fs *fs;
	int err;

	if ((err = uext4_mount(img, &o, &fs)))
		return err;
	for (long i = 0; i < nfiles && !err; i++) {
		if (i % PER_DIR == 0) {
			snprintf(name, sizeof name, "d%ld", i / PER_DIR);
			if ((err = uext4_mkdir(fs, 2, name, 0755, &st)))
				break;
			dir = st.ino;
		}
		snprintf(name, sizeof name, "f%ld", i % PER_DIR);
		err = uext4_create(fs, dir, name, 0644, &st);
	}
	int uerr = uext4_umount(fs);
	return err ? err : uerr;
}

/* chmod (pass 0) or setxattr (pass 1) every file of every directory. */
static int dirty_all(uext4_fs *fs, int pass, long *done)
{
	struct uext4_setattr a = { .valid = UEXT4_SET_MODE, .mode = 0600 };
	char value[64];
	int err = 0;

	memset(value, 'v', sizeof value);
	for (long d = 0;; d++) {
		struct uext4_stat dst, st;
		char name[32];

		snprintf(name, sizeof name, "d%ld", d);
		if ((err = uext4_lookup(fs, 2, name, &dst)))
			return err == -ENOENT && d > 0 ? 0 : err;
		for (long i = 0; i < PER_DIR; i++) {
			snprintf(name, sizeof name, "f%ld", i);
			if ((err = uext4_lookup(fs, dst.ino, name, &st)))
				return err == -ENOENT && i > 0 ? 0 : err;
			err = pass == 0 ? uext4_setattr(fs, st.ino, &a, NULL)
					: uext4_setxattr(fs, st.ino, "user.limit", value, sizeof value, 0);
			if (err)
				return err;
			++*done;
		}
	}
}

int main(int argc, char **argv)
{
	struct uext4_opts o = { .commit_secs = 3600 };
	struct uext4_stats st;
	uint64_t limit, jmax, cblocks;
	long done = 0;
	uext4_fs *fs;
	int err;

	if (argc != 4) {
		fprintf(stderr, "usage: journal_limit IMAGE CACHE_BYTES NFILES\n");
		return 2;
	}
	o.cache_bytes = strtoull(argv[2], NULL, 0);
	if ((err = create_all(argv[1], strtol(argv[3], NULL, 10)))) {
		fprintf(stderr, "creating the files: %s\n", uext4_last_error());
		return T_FAIL;
	}
	/* The peak RSS from here on (the creating mount's is not ours). */
	FILE *cr = fopen("/proc/self/clear_refs", "w");
	if (cr) {
		fputs("5", cr);
		fclose(cr);
	}
	long base = t_status_kib("VmRSS");

	if ((err = uext4_mount(argv[1], &o, &fs))) {
		fprintf(stderr, "mount: %s\n", uext4_last_error());
		return T_FAIL;
	}
	T_CHECK(fs->journal != NULL, "the image has no journal");
	if (!fs->journal)
		return T_FAIL;
	jmax = journal_max_transaction(fs->journal);
	cblocks = bcache_mem_limit(fs->bc) / fs->block_size / 4;
	limit = jmax < cblocks ? jmax : cblocks;
	uext4_stats_enable(fs, 1);
	uext4_stats_reset(fs);
	for (int pass = 0; pass < 2 && !err; pass++)
		err = dirty_all(fs, pass, &done);
	T_CHECK(err == 0, "after %ld changes: %s (%s)", done, strerror(-err), uext4_last_error());
	uext4_stats_get(fs, &st);
	printf("%ld changes: %" PRIu64 " commits, %" PRIu64 " blocks, at most %" PRIu64
	       " in one; limit %" PRIu64 " (journal max %" PRIu64 ", cache share %" PRIu64 ")\n",
	       done, st.journal.commits, st.journal.blocks, st.journal.blocks_max, limit, jmax,
	       cblocks);
	T_CHECK(st.journal.blocks_max <= limit, "a commit of %" PRIu64 " blocks (limit %" PRIu64 ")",
		st.journal.blocks_max, limit);
	T_CHECK(st.journal.blocks > 3 * limit, "only %" PRIu64 " blocks committed: the workload does "
		"not test the limit %" PRIu64, st.journal.blocks, limit);
	err = uext4_umount(fs);
	T_CHECK(err == 0, "umount: %s", strerror(-err));
	printf("base_kib %ld\nvmhwm_kib %ld\n", base, t_status_kib("VmHWM"));
	return t_failures ? T_FAIL : T_PASS;
}
