/*
 * unlink_race.c - an unlink that frees the inode in its own handle, racing
 * with lookups that open the file by its number (run by
 * tests/unlink_race.sh, also under TSan).
 *
 *   unlink_race IMG PAIRS ROUNDS [SEED]
 *
 * Each pair of threads shares one directory.  The unlinker creates "f",
 * maybe writes a block to it, and unlinks it, ROUNDS times.  The opener
 * looks "f" up, opens the number it got, writes a pattern of its own and
 * reads it back before it releases the file.  The unlinker that holds the
 * only reference frees the inode at once (no orphan entry); one that met
 * an opener leaves it to the opener's release.  Whichever way a race goes:
 * an open of a number whose name went is refused or gets a live file (the
 * unlinked one or a new "f"), never a freed one, whose blocks e2fsck would
 * find claimed by a free inode; the pattern reads back; the unlinker's
 * calls all succeed.  The script runs e2fsck -fn afterwards.
 *
 * An open of a number racing the release that frees the file (its last
 * reference) must get a live file or be refused, never one freed under
 * it.
 *
 * That race's window is microseconds wide, so first the claim itself
 * (inode_claim_free()) is raced against a lock-free iget() of the same
 * inode, HANDSHAKES times: the claim must never succeed while a reference
 * the grab was handed is held, and a claim that gives up must not make
 * the grab fail.
 */
#include "icache.h"
#include "inode.h"
#include "uext4.h"
#include "t.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MAX_PAIRS 8

static uext4_fs *fs;
static unsigned rounds, seed0;
static uint64_t dirs[MAX_PAIRS];
static atomic_bool done[MAX_PAIRS];
static _Atomic uint64_t opened, refused;

static void *unlinker(void *arg)
{
	unsigned p = (unsigned)(uintptr_t)arg, seed = seed0 + p * 7919u;
	char block[4096];
	int err;

	memset(block, 'u', sizeof(block));
	for (unsigned r = 0; r < rounds && !atomic_load(&t_failures); r++) {
		struct uext4_stat st;
		uext4_file *f;

		if ((err = uext4_create(fs, dirs[p], "f", S_IFREG | 0644, &st))) {
			t_fail_call("create f", err);
			break;
		}
		/* Half of them with a block, so that a free has one to give back. */
		if (rand_r(&seed) % 2 && (err = uext4_open(fs, st.ino, O_RDWR, &f)) == 0) {
			if (uext4_pwrite(f, block, sizeof(block), 0) != (ssize_t)sizeof(block))
				t_fail_call("write f", -EIO);
			uext4_release(f);
		} else if (err) {
			t_fail_call("open new f", err);
		}
		if ((err = uext4_unlink(fs, dirs[p], "f")))
			t_fail_call("unlink f", err);
	}
	atomic_store(&done[p], true);
	return NULL;
}

/* Open what "f" named, write our pattern at block 1, read it back. */
static void open_and_write(unsigned p, uint64_t ino, unsigned n)
{
	char pat[4096], back[4096];
	uext4_file *f;
	int err = uext4_open(fs, ino, O_RDWR, &f);

	/* Gone: refused while cached (ENOENT), or freed and out of the
	 * cache, when its slot on disk says so (a number not in use reads as
	 * EUCLEAN "not in use", as for a directory entry naming it). */
	if (err == -ENOENT || err == -ESTALE ||
	    (err == -EUCLEAN && strstr(uext4_last_error(), "not in use"))) {
		atomic_fetch_add(&refused, 1);
		return;
	}
	if (err) {
		t_fail_call("open looked-up f", err);
		return;
	}
	atomic_fetch_add(&opened, 1);
	memset(pat, (int)('a' + (p * 31 + n) % 26), sizeof(pat));
	if (uext4_pwrite(f, pat, sizeof(pat), 4096) != (ssize_t)sizeof(pat))
		t_fail_call("write looked-up f", -EIO);
	else if (uext4_pread(f, back, sizeof(back), 4096) != (ssize_t)sizeof(back) ||
		 memcmp(pat, back, sizeof(pat)))
		t_fail_call("read back looked-up f", -EIO);
	if ((err = uext4_release(f)))
		t_fail_call("release looked-up f", err);
}

static void *opener(void *arg)
{
	unsigned p = (unsigned)(uintptr_t)arg;

	for (unsigned n = 0; !atomic_load(&done[p]) && !atomic_load(&t_failures); n++) {
		struct uext4_stat st;
		int err = uext4_lookup(fs, dirs[p], "f", &st);

		if (err == -ENOENT)
			continue;
		if (err) {
			t_fail_call("lookup f", err);
			break;
		}
		open_and_write(p, st.ino, n);
	}
	return NULL;
}

/* ------------------------------------------------ the claim against a grab */

#define HANDSHAKES 20000

static struct inode *victim;
static uint64_t victim_ino;
static _Atomic unsigned go_round, claim_done, grab_done; /* round numbers, spun on */
static bool grabbed[HANDSHAKES];               /* written by the grabber */

static void *grabber(void *arg)
{
	for (unsigned r = 1; r <= HANDSHAKES; r++) {
		struct inode *n;

		while (atomic_load(&go_round) < r)
			;
		grabbed[r - 1] = iget(fs, victim_ino, &n) == 0;
		/* A reference handed out is held until the claim of the
		 * round is over: the claim must have seen it. */
		while (atomic_load(&claim_done) < r)
			;
		if (grabbed[r - 1])
			iput(fs, n);
		atomic_store(&grab_done, r);
	}
	return NULL;
}

/* Both sides at once, HANDSHAKES times: the number of rounds where both
 * won; *neither counts those where both lost (a grab refused by a claim
 * that gave up: a live file's lookup would fail). */
static unsigned race_claims(unsigned *claims, unsigned *neither)
{
	pthread_t g;
	unsigned both = 0, seed = seed0;

	pthread_create(&g, NULL, grabber, NULL);
	for (unsigned r = 1; r <= HANDSHAKES; r++) {
		bool claimed;

		atomic_store(&go_round, r);
		/* A random head start for the grabber (spun, not slept), so
		 * that either side wins some rounds. */
		for (volatile unsigned spin = (unsigned)rand_r(&seed) % 96; spin; spin--)
			;
		claimed = inode_claim_free(victim);
		atomic_store(&claim_done, r);
		while (atomic_load(&grab_done) < r)
			;
		if (claimed) {
			(*claims)++;
			both += grabbed[r - 1];
			inode_unclaim_free(victim);
		} else {
			*neither += !grabbed[r - 1];
		}
	}
	pthread_join(g, NULL);
	return both;
}

static int handshake_phase(void)
{
	struct uext4_stat st;
	unsigned claims = 0, neither = 0, both;
	int err;

	if ((err = uext4_create(fs, UEXT4_ROOT_INO, "victim", S_IFREG | 0644, &st)))
		return t_fail_call("create victim", err), 1;
	victim_ino = st.ino;
	if ((err = iget(fs, victim_ino, &victim)))
		return t_fail_call("iget victim", err), 1;
	both = race_claims(&claims, &neither);
	iput(fs, victim);
	printf("claims raced with grabs: %u rounds, %u claims won, %u both won, %u both lost\n",
	       HANDSHAKES, claims, both, neither);
	if (both) {
		printf("FAIL a claim won while a grabbed reference was held\n");
		atomic_fetch_add(&t_failures, 1);
	}
	if (neither) {
		printf("FAIL a claim that gave up made a grab of the live inode fail\n");
		atomic_fetch_add(&t_failures, 1);
	}
	if ((err = uext4_unlink(fs, UEXT4_ROOT_INO, "victim")))
		t_fail_call("unlink victim", err);
	return both || neither;
}

/* ------------------------------------- the last iput() against an open */

#define LATE_ROUNDS 4000

static _Atomic uint64_t late_ino;
static _Atomic unsigned late_go, late_put, late_done; /* round numbers, spun on */
static _Atomic unsigned late_opened, late_dead;

/* Open the number main just unlinked while main drops the last reference:
 * an open that succeeds must keep the file alive (its write must not land
 * in a freed inode, whose blocks nobody would own). */
static void *late_opener(void *arg)
{
	char block[4096];

	memset(block, 'l', sizeof(block));
	for (unsigned r = 1; r <= LATE_ROUNDS; r++) {
		struct uext4_stat st;
		uext4_file *f;
		int err;

		while (atomic_load(&late_go) < r)
			;
		err = uext4_open(fs, atomic_load(&late_ino), O_RDWR, &f);
		while (atomic_load(&late_put) < r)
			;
		if (err == 0) {
			atomic_fetch_add(&late_opened, 1);
			if (uext4_getattr(fs, atomic_load(&late_ino), &st) != 0)
				atomic_fetch_add(&late_dead, 1);
			if (uext4_pwrite(f, block, sizeof(block), 0) != (ssize_t)sizeof(block))
				t_fail_call("write of the late-opened file", -EIO);
			uext4_release(f);
		} else if (err != -ENOENT && !(err == -EUCLEAN &&
						strstr(uext4_last_error(), "not in use"))) {
			t_fail_call("late open", err);
		}
		atomic_store(&late_done, r);
	}
	return NULL;
}

static int late_phase(void)
{
	pthread_t t;
	unsigned seed = seed0 * 3u + 1;
	int err = 0;

	pthread_create(&t, NULL, late_opener, NULL);
	for (unsigned r = 1; r <= LATE_ROUNDS; r++) {
		struct uext4_stat st;
		uext4_file *f = NULL;

		/* Held open across its unlink: its last iput() frees it. */
		if ((err = uext4_create(fs, UEXT4_ROOT_INO, "late", S_IFREG | 0644, &st)) ||
		    (err = uext4_open(fs, st.ino, O_RDWR, &f)) ||
		    (err = uext4_unlink(fs, UEXT4_ROOT_INO, "late"))) {
			t_fail_call("late: create, open, unlink", err);
			if (f)
				uext4_release(f);
			break;
		}
		atomic_store(&late_ino, st.ino);
		atomic_store(&late_go, r);
		for (volatile unsigned spin = (unsigned)rand_r(&seed) % 2048; spin; spin--)
			;
		uext4_release(f);
		atomic_store(&late_put, r);
		while (atomic_load(&late_done) < r)
			;
	}
	if (err) {
		atomic_store(&late_go, LATE_ROUNDS);
		atomic_store(&late_put, LATE_ROUNDS);
	}
	pthread_join(t, NULL);
	printf("opens racing the last release: %u rounds, %u opened, %u of those found "
	       "the file freed\n", LATE_ROUNDS, atomic_load(&late_opened), atomic_load(&late_dead));
	if (atomic_load(&late_dead)) {
		printf("FAIL an open file was freed under its holder\n");
		atomic_fetch_add(&t_failures, 1);
	}
	return err || atomic_load(&late_dead);
}

/* A file unlinked while held, still held at unmount: the unmount frees it
 * (e2fsck finds no orphan and no leak), though its reference is not
 * dropped.  Held by iget(), not uext4_open(): the unmount releases the
 * cache's memory, not a uext4_file's. */
static int hold_unlinked_across_umount(void)
{
	struct uext4_stat st;
	struct inode *held;
	uext4_file *f;
	char block[4096];
	int err;

	memset(block, 'h', sizeof(block));
	if ((err = uext4_create(fs, UEXT4_ROOT_INO, "held", S_IFREG | 0644, &st)) ||
	    (err = uext4_open(fs, st.ino, O_RDWR, &f)))
		return t_fail_call("create held", err), 1;
	if (uext4_pwrite(f, block, sizeof(block), 0) != (ssize_t)sizeof(block))
		t_fail_call("write held", -EIO);
	uext4_release(f);
	if ((err = iget(fs, st.ino, &held)))
		return t_fail_call("iget held", err), 1;
	if ((err = uext4_unlink(fs, UEXT4_ROOT_INO, "held")))
		return t_fail_call("unlink held", err), 1;
	return 0;
}

int main(int argc, char **argv)
{
	pthread_t th[2 * MAX_PAIRS];
	unsigned pairs;
	int err;

	if (argc < 4) {
		fprintf(stderr, "usage: unlink_race IMG PAIRS ROUNDS [SEED]\n");
		return 2;
	}
	pairs = (unsigned)atoi(argv[2]);
	rounds = (unsigned)atoi(argv[3]);
	if (pairs < 1 || pairs > MAX_PAIRS || rounds < 1) {
		fprintf(stderr, "unlink_race: PAIRS 1..%d, ROUNDS >= 1\n", MAX_PAIRS);
		return 2;
	}
	seed0 = argc > 4 ? (unsigned)atoi(argv[4]) : 1;
	if ((err = uext4_mount(argv[1], NULL, &fs))) {
		t_fail_call("mount", err);
		return 1;
	}
	if (handshake_phase() || late_phase())
		return 1;
	for (unsigned p = 0; p < pairs; p++) {
		char name[16];
		struct uext4_stat st;

		snprintf(name, sizeof(name), "d%u", p);
		if ((err = uext4_mkdir(fs, UEXT4_ROOT_INO, name, 0755, &st))) {
			t_fail_call("mkdir", err);
			return 1;
		}
		dirs[p] = st.ino;
	}
	for (unsigned p = 0; p < pairs; p++) {
		pthread_create(&th[2 * p], NULL, unlinker, (void *)(uintptr_t)p);
		pthread_create(&th[2 * p + 1], NULL, opener, (void *)(uintptr_t)p);
	}
	for (unsigned i = 0; i < 2 * pairs; i++)
		pthread_join(th[i], NULL);
	printf("opens of a looked-up f: %llu succeeded, %llu refused (gone)\n",
	       (unsigned long long)opened, (unsigned long long)refused);
	if (hold_unlinked_across_umount())
		return 1;
	if ((err = uext4_umount(fs)))
		t_fail_call("umount", err);
	if (!t_failures && opened == 0)
		printf("note: no opener won a race this run\n");
	return t_failures ? 1 : 0;
}
