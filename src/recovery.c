/*
 * recovery.c - replaying a JBD2 journal (ours or the kernel's).
 *
 * Three passes as the kernel's jbd2 recovery: SCAN finds the committed
 * transactions from the log start (s_start, s_sequence), REVOKE collects
 * the revoke records of those transactions, REPLAY writes every logged
 * block home unless a transaction at least as new revoked it.  Our SCAN
 * remembers the tags and revoke records it saw, so the later passes do
 * not walk the log again.
 *
 * Where the log ends: at the first block that is not a journal block of
 * the expected sequence, or at a descriptor, revoke or commit block with
 * a bad checksum; everything from the transaction that contains that
 * block on is dropped (the kernel, on a bad descriptor/revoke checksum,
 * also looks at the commit time of what follows; we end there).
 *
 * A data block whose tag checksum fails (checksum v2/v3), inside a
 * committed transaction, is skipped as the kernel's and e2fsck's
 * do_one_pass() skip it: the rest of that transaction and every later
 * transaction are replayed, and only the bad block keeps what its home
 * held.  A block that a newer transaction revoked is not replayed anyway
 * and is no error.  A skipped block is an error: the superblock on disk
 * gets EXT4_ERROR_FS in s_state (written and flushed before the journal
 * is marked empty) so that e2fsck checks the file system, and
 * journal_replay names the first bad block (journal block, home block,
 * transaction) for the caller to report.  Checksum v1 (COMPAT_CHECKSUM,
 * crc32 over the whole transaction in the commit block) is not verified.
 */
#include "blockdev.h"
#include "error.h"
#include "internal.h"
#include "jbd2.h"
#include "journal.h"

#include <stdlib.h>
#include <string.h>

/* A logged block: where it is in the log, where it goes. */
struct rtag {
	uint64_t home;
	uint32_t logpos;
	uint32_t tid;
	bool escaped;
	bool bad_csum;          /* the tag's checksum does not match the block */
};
struct rrevoke {
	uint64_t block;
	uint32_t tid;
};

struct scan {
	struct jbd2_log *log;
	uint8_t *blk, *data;            /* block buffers */
	struct rtag *tags;
	size_t ntags, cap_tags, committed_tags;
	struct rrevoke *revs;
	size_t nrevs, cap_revs, committed_revs;
	uint32_t pos, tid, consumed;
	uint32_t transactions;
	bool bad_csum;
};

static bool tid_gt(uint32_t a, uint32_t b) { return (int32_t)(a - b) > 0; }

static int push_tag(struct scan *s, struct rtag t)
{
	if (s->ntags == s->cap_tags) {
		size_t cap = s->cap_tags ? s->cap_tags * 2 : 256;
		struct rtag *p = realloc(s->tags, cap * sizeof(*p));

		if (!p)
			return fs_err(ENOMEM, "journal recovery: out of memory");
		s->tags = p;
		s->cap_tags = cap;
	}
	s->tags[s->ntags++] = t;
	return 0;
}

static int push_revoke(struct scan *s, uint64_t block, uint32_t tid)
{
	if (s->nrevs == s->cap_revs) {
		size_t cap = s->cap_revs ? s->cap_revs * 2 : 256;
		struct rrevoke *p = realloc(s->revs, cap * sizeof(*p));

		if (!p)
			return fs_err(ENOMEM, "journal recovery: out of memory");
		s->revs = p;
		s->cap_revs = cap;
	}
	s->revs[s->nrevs++] = (struct rrevoke){block, tid};
	return 0;
}

/* Read the next log block into buf; false when the whole log was read. */
static int next_block(struct scan *s, void *buf, uint32_t *where, bool *end)
{
	struct jbd2_log *log = s->log;

	*end = false;
	if (s->consumed >= log->last - log->first) {
		*end = true;   /* a log can hold no more: never loop */
		return 0;
	}
	*where = s->pos;
	s->pos = jbd2_next(log, s->pos);
	s->consumed++;
	return jbd2_read_block(log, *where, buf);
}

/* Tags of a descriptor (already checked): queue its data blocks. */
static int scan_descriptor(struct scan *s, bool *end)
{
	const struct jbd2_fmt *f = &s->log->fmt;
	size_t tb = jbd2_tag_bytes(f), limit = f->block_size - jbd2_tail_bytes(f);
	size_t off = sizeof(struct jbd2_header);
	uint8_t *d = s->blk;

	while (off + tb <= limit) {
		const uint8_t *t = d + off;
		uint32_t flags = be16_get(t + 6), where;
		uint64_t home = be32_get(t);
		bool bad = false;
		int err;

		if (f->bit64)
			home |= (uint64_t)be32_get(t + 8) << 32;
		err = next_block(s, s->data, &where, end);
		if (err || *end)
			return err;
		/* A bad block is kept, marked: the replay skips it unless a
		 * newer transaction revoked it (then it is no error). */
		if (jbd2_has_csum(f)) {
			uint32_t c = jbd2_block_csum(f, s->tid, s->data);

			bad = f->csum_v3 ? be32_get(t + 12) != c : be16_get(t + 4) != (uint16_t)c;
		}
		err = push_tag(s, (struct rtag){home, where, s->tid, (flags & JBD2_FLAG_ESCAPE) != 0,
						bad});
		if (err)
			return err;
		off += tb;
		if (!(flags & JBD2_FLAG_SAME_UUID))
			off += 16;
		if (flags & JBD2_FLAG_LAST_TAG)
			break;
	}
	return 0;
}

static int scan_revoke(struct scan *s, uint32_t where)
{
	const struct jbd2_fmt *f = &s->log->fmt;
	uint32_t count = be32_get(s->blk + 12), rec = f->bit64 ? 8 : 4;

	if (count < sizeof(struct jbd2_revoke_header) ||
	    count > f->block_size - jbd2_tail_bytes(f))
		return fs_corrupt("journal revoke block at log block %u (tid %u): r_count %u "
				  "outside [16, %zu]", where, s->tid, count,
				  f->block_size - jbd2_tail_bytes(f));
	for (uint32_t off = sizeof(struct jbd2_revoke_header); off + rec <= count; off += rec) {
		uint64_t b = f->bit64 ? be64_get(s->blk + off) : be32_get(s->blk + off);
		int err = push_revoke(s, b, s->tid);

		if (err)
			return err;
	}
	return 0;
}

/* A commit block closed transaction s->tid: check where its blocks go. */
static int commit_transaction(struct scan *s, uint32_t where)
{
	uint64_t nblocks = s->log->fs->blocks_count;

	for (size_t i = s->committed_tags; i < s->ntags; i++)
		if (s->tags[i].home >= nblocks)
			return fs_corrupt("journal transaction %u (commit at log block %u): a tag "
					  "names block %llu beyond the file system's %llu blocks",
					  s->tid, where, (unsigned long long)s->tags[i].home,
					  (unsigned long long)nblocks);
	s->committed_tags = s->ntags;
	s->committed_revs = s->nrevs;
	s->transactions++;
	s->tid++;
	return 0;
}

/* One log block: a header of the expected sequence, or the end. */
static int scan_one(struct scan *s, bool *end)
{
	const struct jbd2_fmt *f = &s->log->fmt;
	uint32_t where;
	int err = next_block(s, s->blk, &where, end);

	if (err || *end)
		return err;
	if (be32_get(s->blk) != JBD2_MAGIC || be32_get(s->blk + 8) != s->tid) {
		*end = true;
		return 0;
	}
	switch (be32_get(s->blk + 4)) {
	case JBD2_DESCRIPTOR_BLOCK:
		if (jbd2_has_csum(f) && !jbd2_tail_ok(f, s->blk))
			break;
		return scan_descriptor(s, end);
	case JBD2_REVOKE_BLOCK:
		if (jbd2_has_csum(f) && !jbd2_tail_ok(f, s->blk))
			break;
		return scan_revoke(s, where);
	case JBD2_COMMIT_BLOCK:
		if (jbd2_has_csum(f) &&
		    be32_get(s->blk + offsetof(struct jbd2_commit_header, h_chksum)) !=
			    jbd2_commit_csum(f, s->blk))
			break;
		return commit_transaction(s, where);
	default:
		*end = true;   /* unknown block type (or a fast-commit block): end of log */
		return 0;
	}
	s->bad_csum = true;
	*end = true;
	return 0;
}

static int pass_scan(struct scan *s)
{
	bool end = false;

	while (!end) {
		int err = scan_one(s, &end);

		if (err)
			return err;
	}
	/* Drop what the uncommitted tail of the log held. */
	s->ntags = s->committed_tags;
	s->nrevs = s->committed_revs;
	return 0;
}

/* ---- revoke table: block -> newest revoking tid (open addressing) */
struct revtab {
	uint64_t *key;          /* block + 1; 0 = empty */
	uint32_t *tid;
	size_t mask;
};

static size_t rt_slot(const struct revtab *t, uint64_t block)
{
	return (size_t)((block * 0x9E3779B97F4A7C15ull) >> 20) & t->mask;
}

static int pass_revoke(struct scan *s, struct revtab *t)
{
	size_t cap = 16;

	while (cap < s->nrevs * 2)
		cap *= 2;
	t->key = calloc(cap, sizeof(*t->key));
	t->tid = calloc(cap, sizeof(*t->tid));
	t->mask = cap - 1;
	if (!t->key || !t->tid)
		return fs_err(ENOMEM, "journal recovery: out of memory for %zu revoke records",
			      s->nrevs);
	for (size_t i = 0; i < s->nrevs; i++) {
		size_t k = rt_slot(t, s->revs[i].block);

		while (t->key[k] && t->key[k] != s->revs[i].block + 1)
			k = (k + 1) & t->mask;
		if (!t->key[k] || tid_gt(s->revs[i].tid, t->tid[k]))
			t->tid[k] = s->revs[i].tid;
		t->key[k] = s->revs[i].block + 1;
	}
	return 0;
}

/* Revoked by a transaction at least as new as tid? */
static bool revoked(const struct revtab *t, uint64_t block, uint32_t tid)
{
	size_t k = rt_slot(t, block);

	while (t->key[k]) {
		if (t->key[k] == block + 1)
			return !tid_gt(tid, t->tid[k]);
		k = (k + 1) & t->mask;
	}
	return false;
}

/* A logged block with a bad checksum is not written: note it (the first
 * one is named in the report). */
static void note_bad_block(struct journal_replay *r, const struct rtag *g)
{
	if (r->bad_blocks++ == 0) {
		r->bad_home = g->home;
		r->bad_logpos = g->logpos;
		r->bad_tid = g->tid;
	}
}

static int pass_replay(struct scan *s, const struct revtab *t, struct journal_replay *r)
{
	struct uext4_fs *fs = s->log->fs;
	uint32_t bs = fs->block_size;

	r->blocks = 0;
	for (size_t i = 0; i < s->ntags; i++) {
		const struct rtag *g = &s->tags[i];
		int err;

		if (revoked(t, g->home, g->tid))
			continue;
		if (g->bad_csum) {
			note_bad_block(r, g);
			continue;
		}
		err = jbd2_read_block(s->log, g->logpos, s->data);
		if (err)
			return err;
		if (g->escaped)
			be32_put(s->data, JBD2_MAGIC);
		err = bdev_write(fs->dev, s->data, bs, g->home * bs);
		if (err < 0)
			return fs_err(-err, "journal recovery: writing block %llu (tid %u) failed",
				      (unsigned long long)g->home, g->tid);
		r->blocks++;
	}
	return 0;
}

/*
 * Fast commits follow the last full commit in the area after the log,
 * [last + 1, nblocks) (the kernel's j_fc_first = j_last + 1).  The journal
 * reads the area; the file system above checks and parses it (the host's
 * fc_scan, as the kernel's ext4_fc_replay_scan() behind jbd2's
 * fc_do_one_pass()) before anything is written, so that a refusal leaves
 * the image as it was.  tid: the transaction after the last committed one.
 */
static int scan_fast_commits(struct scan *s, const struct journal_host *host, void **fc)
{
	struct jbd2_log *log = s->log;
	uint32_t first = log->last + 1, n;
	uint8_t *area;
	int err = 0;

	*fc = NULL;
	if (!log->fc_blocks || first >= log->nblocks || !host->fc_scan)
		return 0;
	n = log->nblocks - first;
	area = malloc((size_t)n * log->fmt.block_size);
	if (!area)
		return fs_err(ENOMEM, "journal recovery: out of memory for %u fast-commit blocks", n);
	for (uint32_t i = 0; i < n && !err; i++)
		err = jbd2_read_block(log, first + i, area + (size_t)i * log->fmt.block_size);
	if (!err)
		err = host->fc_scan(log->fs, area, n, s->tid, fc);
	free(area);
	return err;
}

/* The replayed blocks are on the file system's device: flush it before the
 * log (on it or on an external device) forgets them. */
static int mark_empty(struct jbd2_log *log, uint32_t next_tid)
{
	struct jbd2_superblock *sb = jbd2_sb(log);
	int err = bdev_flush(log->fs->dev);

	if (err < 0)
		return fs_err(-err, "journal recovery: device flush failed");
	JPUT(sb, s_start, 0);
	JPUT(sb, s_sequence, next_tid);
	err = jbd2_write_sb(log);
	if (err)
		return err;
	err = bdev_flush(jbd2_dev(log));
	return err < 0 ? fs_err(-err, "journal recovery: journal device flush failed") : 0;
}

static int recover_log(struct jbd2_log *log, const struct journal_host *host,
		       struct journal_replay *r)
{
	struct jbd2_superblock *sb = jbd2_sb(log);
	uint32_t start = JGET(sb, s_start);
	struct scan s = {.log = log, .pos = start, .tid = JGET(sb, s_sequence)};
	struct revtab t = {0};
	int err;

	if (start < log->first || start >= log->last)
		return fs_corrupt("journal superblock: log start %u outside the log [%u, %u)",
				  start, log->first, log->last);
	s.blk = malloc(log->fmt.block_size);
	s.data = malloc(log->fmt.block_size);
	err = (!s.blk || !s.data) ? fs_err(ENOMEM, "journal recovery: out of memory") : 0;
	if (!err)
		err = pass_scan(&s);
	if (!err)
		err = scan_fast_commits(&s, host, &r->fc);
	if (!err)
		err = pass_revoke(&s, &t);
	if (!err)
		err = pass_replay(&s, &t, r);
	if (!err && r->bad_blocks)
		err = host->mark_error(log->fs);
	if (!err) {
		r->first_tid = JGET(sb, s_sequence);
		r->end_tid = s.tid;
		r->transactions = s.transactions;
		r->revoked = (uint32_t)s.nrevs;
		r->stopped_on_bad_csum = s.bad_csum;
		/* As the kernel: the next transaction is end + 1, so that
		 * nothing left in the log can pass for its successor.  With
		 * fast commits to replay, the caller empties the journal
		 * after their replay (journal_recover_finish()). */
		r->next_tid = s.tid + 1;
		if (!r->fc)
			err = mark_empty(log, r->next_tid);
	}
	if (err && r->fc && host->fc_free) {
		host->fc_free(r->fc);
		r->fc = NULL;
	}
	free(t.key);
	free(t.tid);
	free(s.tags);
	free(s.revs);
	free(s.blk);
	free(s.data);
	return err;
}

int journal_recover(struct uext4_fs *fs, const struct journal_host *host,
		    struct journal_replay *r)
{
	struct jbd2_log log;
	int err;

	memset(r, 0, sizeof(*r));
	if (!FS_HAS_COMPAT(fs, HAS_JOURNAL))
		return 0;
	err = jbd2_log_load(fs, host, &log);
	if (err)
		return err;
	if (JGET(jbd2_sb(&log), s_start) != 0)
		err = recover_log(&log, host, r);
	jbd2_log_free(&log);
	return err;
}

int journal_recover_finish(struct uext4_fs *fs, const struct journal_host *host, uint32_t next_tid)
{
	struct jbd2_log log;
	int err = jbd2_log_load(fs, host, &log);

	if (err)
		return err;
	err = mark_empty(&log, next_tid);
	jbd2_log_free(&log);
	return err;
}
