/*
 * quotatree.c - unit test of src/quotatree.c, the v2r1 quota file format.
 *
 *   quotatree selftest SEED   insert ids in random order into a new file in
 *                             memory; every id found, the walk in id order,
 *                             the free-entry list and the file length sound
 *   quotatree dump FILE TYPE  print "id space inodes bsoft bhard isoft ihard
 *                             btime itime"
 *                             of every entry of a quota file (0 user,
 *                             1 group, 2 project), for comparison with
 *                             debugfs list_quota (tests/quota.sh)
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "quotatree.h"

struct mem {
	uint8_t *p;
	uint32_t blocks, cap;
};

static int mem_read(void *ctx, uint32_t blk, uint8_t *buf)
{
	struct mem *m = ctx;

	if (blk >= m->blocks)
		return -EIO;
	memcpy(buf, m->p + (size_t)blk * QT_BLOCK_SIZE, QT_BLOCK_SIZE);
	return 0;
}

static int mem_write(void *ctx, uint32_t blk, const uint8_t *buf)
{
	struct mem *m = ctx;

	if (blk > m->blocks)
		return -EIO; /* only one past the end grows the file */
	if (blk == m->blocks) {
		if (m->blocks == m->cap) {
			m->cap = m->cap ? m->cap * 2 : 8;
			m->p = realloc(m->p, (size_t)m->cap * QT_BLOCK_SIZE);
			if (!m->p)
				return -ENOMEM;
		}
		m->blocks++;
	}
	memcpy(m->p + (size_t)blk * QT_BLOCK_SIZE, buf, QT_BLOCK_SIZE);
	return 0;
}

struct walk {
	long n;
	int64_t last;
	int bad;
};

static int count_one(void *arg, const struct qt_entry *e, const struct qt_where *w)
{
	struct walk *k = arg;

	if ((int64_t)e->id <= k->last || e->curspace != (uint64_t)e->id * 3 ||
	    e->curinodes != (e->id & 0xff) + 1) {
		fprintf(stderr, "walk: id %u after %lld, space %llu\n", e->id, (long long)k->last,
			(unsigned long long)e->curspace);
		k->bad++;
	}
	k->last = e->id;
	k->n++;
	return 0;
}

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static int selftest(uint64_t seed)
{
	struct mem m = { 0 };
	struct qt_io io = { &m, mem_read, mem_write };
	enum { N = 3000 };
	static uint32_t ids[N];
	struct qt_entry e;
	struct qt_where w;
	struct qt_info info;
	uint64_t s = seed | 1;
	int fails = 0;

	if (qt_format(&io, QT_PROJECT) || qt_read_info(&io, QT_PROJECT, &info) ||
	    qt_read_info(&io, QT_USER, &info) != -EUCLEAN) {
		fprintf(stderr, "format or header check failed\n");
		return 1;
	}
	ids[0] = 0;
	ids[1] = 0xffffffffu;
	for (int i = 2; i < N; i++)  /* dense runs and sparse ids */
		ids[i] = i % 3 ? (uint32_t)rnd(&s) : (uint32_t)(rnd(&s) % 5000);
	for (int i = 0; i < N; i++) {
		struct qt_entry v = { .curspace = (uint64_t)ids[i] * 3,
				      .curinodes = (ids[i] & 0xff) + 1 };
		int err = qt_insert(&io, ids[i], &v, &w);

		if (err == -EEXIST) {
			ids[i] = ids[0]; /* a repeat: must have been refused */
			continue;
		}
		if (err) {
			fprintf(stderr, "insert %u: %d\n", ids[i], err);
			return 1;
		}
	}
	for (int i = 0; i < N; i++)
		if (qt_lookup(&io, ids[i], &e, &w) || e.id != ids[i] ||
		    e.curspace != (uint64_t)ids[i] * 3) {
			fprintf(stderr, "lookup %u failed\n", ids[i]);
			fails++;
		}
	if (qt_lookup(&io, 12345678, &e, &w) != -ENOENT && (fails += 1))
		fprintf(stderr, "an id never inserted was found\n");
	struct walk k = { .last = -1 };
	qt_iterate(&io, count_one, &k);
	long distinct = 0;
	for (int i = 0; i < N; i++) {
		int seen = 0;
		for (int j = 0; j < i && !seen; j++)
			seen = ids[j] == ids[i];
		distinct += !seen;
	}
	if (k.bad || k.n != distinct) {
		fprintf(stderr, "walk: %ld entries, %ld ids, %d bad\n", k.n, distinct, k.bad);
		fails++;
	}
	qt_read_info(&io, QT_PROJECT, &info);
	if (info.blocks != m.blocks) {
		fprintf(stderr, "info says %u blocks, the file has %u\n", info.blocks, m.blocks);
		fails++;
	}
	/* The free-entry list: doubly linked, every block on it not full. */
	uint32_t prev = 0, blk = info.free_entry, steps = 0;
	while (blk && steps++ < m.blocks) {
		const uint8_t *b = m.p + (size_t)blk * QT_BLOCK_SIZE;
		uint32_t next, bprev;
		uint16_t n;

		memcpy(&next, b, 4);
		memcpy(&bprev, b + 4, 4);
		memcpy(&n, b + 8, 2);
		if (bprev != prev || n >= QT_ENTRIES_PER_BLOCK) {
			fprintf(stderr, "free-entry list: block %u prev %u (want %u) entries %u\n",
				blk, bprev, prev, n);
			fails++;
			break;
		}
		prev = blk;
		blk = next;
	}
	printf("selftest seed %llu: %ld ids in %u quota blocks, %s\n", (unsigned long long)seed,
	       k.n, m.blocks, fails ? "FAILED" : "ok");
	free(m.p);
	return fails != 0;
}

static int load(const char *path, struct mem *m)
{
	FILE *f = fopen(path, "rb");
	long size;

	if (!f || fseek(f, 0, SEEK_END) || (size = ftell(f)) < 0 || fseek(f, 0, SEEK_SET))
		return -1;
	m->blocks = m->cap = (uint32_t)(size / QT_BLOCK_SIZE);
	m->p = malloc((size_t)size + 1);
	if (!m->p || fread(m->p, 1, (size_t)size, f) != (size_t)size)
		return -1;
	fclose(f);
	return 0;
}

static int print_one(void *arg, const struct qt_entry *e, const struct qt_where *w)
{
	printf("%u %llu %llu %llu %llu %llu %llu %llu %llu\n", e->id,
	       (unsigned long long)e->curspace, (unsigned long long)e->curinodes,
	       (unsigned long long)e->bsoftlimit, (unsigned long long)e->bhardlimit,
	       (unsigned long long)e->isoftlimit, (unsigned long long)e->ihardlimit,
	       (unsigned long long)e->btime, (unsigned long long)e->itime);
	return 0;
}

int main(int argc, char **argv)
{
	struct mem m = { 0 };
	struct qt_io io = { &m, mem_read, mem_write };
	struct qt_info info;

	if (argc == 3 && !strcmp(argv[1], "selftest"))
		return selftest(strtoull(argv[2], NULL, 0));
	if (argc < 4 || load(argv[2], &m)) {
		fprintf(stderr, "usage: quotatree selftest SEED | dump FILE TYPE\n");
		return 2;
	}
	if (qt_read_info(&io, atoi(argv[3]), &info)) {
		fprintf(stderr, "%s: not a quota file of type %s\n", argv[2], argv[3]);
		free(m.p);
		return 1;
	}
	if (!strcmp(argv[1], "dump")) {
		int err = qt_iterate(&io, print_one, NULL);

		free(m.p);
		return err != 0;
	}
	return 2;
}
