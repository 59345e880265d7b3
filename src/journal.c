/*
 * journal.c - writing the JBD2 journal in the journal inode or on an
 * external journal device.
 *
 * trans.c hands over one transaction at a time, its metadata blocks
 * already copied and checksummed; journal_commit() writes it to the log in
 * the kernel's format (src/jbd2.h) and returns once it is durable.  Home
 * writes (checkpointing) are trans.c's: it issues them right after every
 * commit, so a device flush is all it takes to make the whole log free
 * again.  That keeps the log management simple: the log tail in the
 * journal superblock is only moved (flush, superblock write, flush) when
 * the log is about to overwrite blocks a recovery would still read, or
 * before the first transaction after the journal was empty.
 */
#include "bcache.h"
#include "blockdev.h"
#include "crc.h"
#include "error.h"
#include "internal.h"
#include "jbd2.h"
#include "journal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/*
 * A journal open for writing.  Not locked: journal_commit() and
 * journal_mark_empty() are called by one committer at a time (trans.c
 * serialises commits with its commit lock), and nothing else touches the
 * log state after journal_open().
 */
struct journal {
	struct jbd2_log log;
	uint32_t first_tid;     /* s_sequence at open */
	uint32_t head;          /* log block the next transaction starts at */
	uint32_t tail;          /* s_start on disk; 0 = the journal is empty */
	uint32_t used;          /* log blocks in [tail, head) a recovery would read */
	uint32_t next_tid;      /* sequence of the next transaction in the log */
	uint8_t *buf;           /* assembly area for one transaction */
	size_t buf_blocks;
	const struct uext4_fs *fs;
	const struct journal_host *host;  /* the file system's callbacks (its clock) */
};

/* ------------------------------------------------------------ log loading */

static void feature_names(uint32_t incompat, char *out, size_t size)
{
	static const struct { uint32_t bit; const char *name; } names[] = {
		{JBD2_FEATURE_INCOMPAT_REVOKE, "revoke"},
		{JBD2_FEATURE_INCOMPAT_64BIT, "64bit"},
		{JBD2_FEATURE_INCOMPAT_ASYNC_COMMIT, "async_commit"},
		{JBD2_FEATURE_INCOMPAT_CSUM_V2, "csum_v2"},
		{JBD2_FEATURE_INCOMPAT_CSUM_V3, "csum_v3"},
		{JBD2_FEATURE_INCOMPAT_FAST_COMMIT, "fast_commit"},
	};
	size_t n = 0;

	out[0] = '\0';
	for (unsigned bit = 0; bit < 32; bit++) {
		uint32_t m = 1u << bit;
		const char *name = NULL;
		char unk[24];

		if (!(incompat & m))
			continue;
		for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
			if (names[i].bit == m)
				name = names[i].name;
		if (!name) {
			snprintf(unk, sizeof(unk), "incompat_0x%x", m);
			name = unk;
		}
		n += (size_t)snprintf(out + n, n < size ? size - n : 0, "%s%s", n ? " " : "", name);
	}
}

void jbd2_fmt_from_sb(struct jbd2_log *log)
{
	struct jbd2_superblock *sb = jbd2_sb(log);
	uint32_t incompat = JGET(sb, s_feature_incompat);

	if (JGET(sb, s_header.h_blocktype) == JBD2_SUPERBLOCK_V1)
		incompat = 0;   /* v1 has no feature fields */
	log->fmt.block_size = log->fs->block_size;
	log->fmt.csum_v3 = (incompat & JBD2_FEATURE_INCOMPAT_CSUM_V3) != 0;
	log->fmt.csum_v2 = !log->fmt.csum_v3 && (incompat & JBD2_FEATURE_INCOMPAT_CSUM_V2);
	log->fmt.bit64 = (incompat & JBD2_FEATURE_INCOMPAT_64BIT) != 0;
	memcpy(log->fmt.uuid, sb->s_uuid, 16);
	log->fmt.seed = jbd2_uuid_seed(sb->s_uuid);
}

/* What messages call the journal: its inode, or the external device. */
static void journal_name(const struct journal_place *p, char *out, size_t size)
{
	if (p->user)
		snprintf(out, size, "external journal");
	else
		snprintf(out, size, "journal inode %llu", (unsigned long long)p->id);
}

/* Map journal blocks [0, count) to device blocks. */
static int map_blocks(struct jbd2_log *log, const struct journal_host *host,
		      const struct journal_place *p, uint32_t count)
{
	struct uext4_fs *fs = log->fs;
	uint32_t lblk = 0;
	char name[48];

	journal_name(p, name, sizeof(name));
	while (lblk < count) {
		uint64_t pblk, len;
		int err = host->map(fs, p->file, lblk, count - lblk, &pblk, &len);

		if (err)
			return err;
		if (pblk == 0 || len == 0)
			return fs_corrupt("%s: block %u is a hole", name, lblk);
		for (uint64_t i = 0; i < len && lblk < count; i++, lblk++) {
			uint64_t b = pblk + i;

			if (b < p->lo || b >= p->hi)
				return fs_corrupt("%s: block %u maps to %llu, outside the device's "
						  "blocks [%llu, %llu)", name, lblk,
						  (unsigned long long)b, (unsigned long long)p->lo,
						  (unsigned long long)p->hi);
			log->phys[lblk] = b;
		}
	}
	return 0;
}

int jbd2_read_block(struct jbd2_log *log, uint32_t i, void *buf)
{
	uint32_t bs = log->fs->block_size;
	int err;

	if (i >= log->nblocks)
		return fs_corrupt("journal: block %u beyond the journal's %u blocks", i,
				  log->nblocks);
	err = bdev_read(jbd2_dev(log), buf, bs, log->phys[i] * bs);
	if (err < 0)
		return fs_err(-err, "journal: reading log block %u (device block %llu) failed", i,
			      (unsigned long long)log->phys[i]);
	if (log->fs->bc)
		bcache_count_read(log->fs->bc, UEXT4_META_JOURNAL, 1);
	return 0;
}

int jbd2_write_sb(struct jbd2_log *log)
{
	struct jbd2_superblock *sb = jbd2_sb(log);
	int err;

	if (jbd2_has_csum(&log->fmt))
		JPUT(sb, s_checksum, jbd2_sb_csum(sb));
	err = bdev_write(jbd2_dev(log), sb, sizeof(*sb), log->phys[0] * log->fs->block_size);
	if (err < 0)
		return fs_err(-err, "journal: writing the journal superblock (block %llu) failed",
			      (unsigned long long)log->phys[0]);
	if (log->fs->bc)
		bcache_count_write(log->fs->bc, UEXT4_META_JOURNAL, 1);
	return 0;
}

void journal_uuid_str(const uint8_t *u, char *out)
{
	static const int dash[16] = {[4] = 1, [6] = 1, [8] = 1, [10] = 1};
	char *o = out;

	for (int i = 0; i < 16; i++)
		o += sprintf(o, "%s%02x", dash[i] ? "-" : "", u[i]);
}

/* An external log serves exactly one file system, ours (the kernel refuses
 * s_nr_users other than 1; mke2fs -J device= adds the file system's UUID). */
static int check_user(struct jbd2_log *log, const uint8_t *user)
{
	struct jbd2_superblock *sb = jbd2_sb(log);
	uint32_t n = JGET(sb, s_nr_users);
	char want[40], have[40];

	if (JGET(sb, s_header.h_blocktype) != JBD2_SUPERBLOCK_V2)
		return fs_err(EOPNOTSUPP, "external journal: superblock v1 has no users list");
	if (n != 1)
		return fs_err(EINVAL, "external journal has %u users; uext4, as the kernel, "
			      "supports exactly one", n);
	if (memcmp(sb->s_users, user, 16)) {
		journal_uuid_str(user, want);
		journal_uuid_str(sb->s_users, have);
		return fs_err(EINVAL, "external journal belongs to file system %s, not to this "
			      "one (%s)", have, want);
	}
	return 0;
}

/* The superblock's own fields, once it is in log->sbbuf. */
static int check_sb(struct jbd2_log *log, uint32_t mapped)
{
	struct jbd2_superblock *sb = jbd2_sb(log);
	uint32_t type = JGET(sb, s_header.h_blocktype);
	uint32_t maxlen = JGET(sb, s_maxlen), first = JGET(sb, s_first);
	uint32_t incompat = JGET(sb, s_feature_incompat);
	char names[160];

	if (JGET(sb, s_header.h_magic) != JBD2_MAGIC)
		return fs_corrupt("journal superblock: bad magic 0x%08x", JGET(sb, s_header.h_magic));
	if (type != JBD2_SUPERBLOCK_V1 && type != JBD2_SUPERBLOCK_V2)
		return fs_corrupt("journal superblock: unknown type %u", type);
	if (JGET(sb, s_blocksize) != log->fs->block_size)
		return fs_corrupt("journal superblock: block size %u differs from the file "
				  "system's %u", JGET(sb, s_blocksize), log->fs->block_size);
	if (maxlen > mapped || maxlen < 2)
		return fs_corrupt("journal superblock: s_maxlen %u, but the journal %s has %u "
				  "blocks", maxlen, log->external ? "device" : "inode", mapped);
	if (first < 1 || first >= maxlen)
		return fs_corrupt("journal superblock: s_first %u outside [1, %u)", first, maxlen);
	if (type == JBD2_SUPERBLOCK_V1)
		return 0;
	if (incompat & ~JBD2_KNOWN_INCOMPAT) {
		feature_names(incompat & ~JBD2_KNOWN_INCOMPAT, names, sizeof(names));
		return fs_err(EOPNOTSUPP, "journal has unknown incompatible features: %s", names);
	}
	if ((incompat & JBD2_FEATURE_INCOMPAT_CSUM_V2) && (incompat & JBD2_FEATURE_INCOMPAT_CSUM_V3))
		return fs_corrupt("journal superblock: both csum_v2 and csum_v3 set");
	if (incompat & (JBD2_FEATURE_INCOMPAT_CSUM_V2 | JBD2_FEATURE_INCOMPAT_CSUM_V3)) {
		if (sb->s_checksum_type != JBD2_CRC32C_CHKSUM)
			return fs_corrupt("journal superblock: checksum type %u, expected crc32c (4)",
					  sb->s_checksum_type);
		if (JGET(sb, s_checksum) != jbd2_sb_csum(sb))
			return fs_corrupt("journal superblock: checksum 0x%08x, computed 0x%08x",
					  JGET(sb, s_checksum), jbd2_sb_csum(sb));
	}
	return 0;
}

/* The log area: [s_first, s_maxlen), minus the fast-commit blocks at the
 * end when FAST_COMMIT is set (as the kernel's fast-commit setup). */
static int set_log_area(struct jbd2_log *log)
{
	struct jbd2_superblock *sb = jbd2_sb(log);
	uint32_t maxlen = JGET(sb, s_maxlen);

	log->first = JGET(sb, s_first);
	log->last = maxlen;
	log->fc_blocks = 0;
	if (JGET(sb, s_header.h_blocktype) == JBD2_SUPERBLOCK_V2 &&
	    (JGET(sb, s_feature_incompat) & JBD2_FEATURE_INCOMPAT_FAST_COMMIT)) {
		uint32_t fc = JGET(sb, s_num_fc_blks);

		log->fc_blocks = fc ? fc : JBD2_DEFAULT_FC_BLOCKS;
		/* As e2fsprogs: the log proper must keep the minimum size. */
		if (log->fc_blocks >= maxlen || maxlen - log->fc_blocks < JBD2_MIN_LOG_BLOCKS ||
		    maxlen - log->fc_blocks <= log->first + 1)
			return fs_corrupt("journal superblock: %u fast-commit blocks leave fewer than "
					  "%u log blocks in %u", log->fc_blocks, JBD2_MIN_LOG_BLOCKS,
					  maxlen);
		/* The log is [first, last); fast commits start at last + 1. */
		log->last = maxlen - log->fc_blocks;
	}
	if (log->last - log->first < 2)
		return fs_corrupt("journal superblock: log [%u, %u) too small", log->first, log->last);
	return 0;
}

static int load_from_place(struct jbd2_log *log, const struct journal_host *host,
			   const struct journal_place *p)
{
	struct uext4_fs *fs = log->fs;
	uint64_t mapped64 = p->size / fs->block_size;
	uint32_t mapped = mapped64 > (1u << 30) ? (1u << 30) : (uint32_t)mapped64;
	uint32_t maxlen;
	char name[48];
	int err;

	journal_name(p, name, sizeof(name));
	log->dev = p->dev;
	log->external = p->user != NULL;
	if (mapped < 2)
		return fs_corrupt("%s: size %llu holds no journal", name,
				  (unsigned long long)p->size);
	log->phys = calloc(1, sizeof(uint64_t));
	log->sbbuf = calloc(1, fs->block_size);
	if (!log->phys || !log->sbbuf)
		return fs_err(ENOMEM, "journal: out of memory");
	log->nblocks = 1;
	err = map_blocks(log, host, p, 1);
	if (!err)
		err = jbd2_read_block(log, 0, log->sbbuf);
	if (!err)
		err = check_sb(log, mapped);
	if (!err && p->user)
		err = check_user(log, p->user);
	if (err)
		return err;
	maxlen = JGET(jbd2_sb(log), s_maxlen);
	free(log->phys);
	log->phys = calloc(maxlen, sizeof(uint64_t));
	if (!log->phys)
		return fs_err(ENOMEM, "journal: out of memory for a %u-block map", maxlen);
	log->nblocks = maxlen;
	err = map_blocks(log, host, p, maxlen);
	if (!err)
		err = set_log_area(log);
	if (!err)
		jbd2_fmt_from_sb(log);
	return err;
}

int jbd2_log_load(struct uext4_fs *fs, const struct journal_host *host, struct jbd2_log *log)
{
	struct journal_place p = {0};
	int err;

	memset(log, 0, sizeof(*log));
	log->fs = fs;
	err = host->get(fs, &p);
	if (err)
		return err;
	err = load_from_place(log, host, &p);
	host->put(fs, p.file);
	if (err)
		jbd2_log_free(log);
	return err;
}

void jbd2_log_free(struct jbd2_log *log)
{
	free(log->phys);
	free(log->sbbuf);
	log->phys = NULL;
	log->sbbuf = NULL;
}

/* ------------------------------------------------------------ open/close */

/* As the kernel at a read-write mount: checksum v3 with metadata_csum
 * (v2 and v1 off), no checksums otherwise; revoke on; 64-bit tags when
 * block numbers may need them; no async commit (we flush before the
 * commit block). */
static void set_write_features(struct journal *j)
{
	struct uext4_fs *fs = j->log.fs;
	struct jbd2_superblock *sb = jbd2_sb(&j->log);
	uint32_t incompat = JGET(sb, s_feature_incompat);
	uint32_t compat = JGET(sb, s_feature_compat) & ~JBD2_FEATURE_COMPAT_CHECKSUM;

	incompat &= ~(JBD2_FEATURE_INCOMPAT_CSUM_V2 | JBD2_FEATURE_INCOMPAT_CSUM_V3 |
		      JBD2_FEATURE_INCOMPAT_ASYNC_COMMIT);
	incompat |= JBD2_FEATURE_INCOMPAT_REVOKE;
	if (fs->metadata_csum) {
		incompat |= JBD2_FEATURE_INCOMPAT_CSUM_V3;
		sb->s_checksum_type = JBD2_CRC32C_CHKSUM;
	} else {
		sb->s_checksum_type = 0;
		JPUT(sb, s_checksum, 0);
	}
	if (FS_HAS_INCOMPAT(fs, 64BIT) || fs->blocks_count > UINT32_MAX)
		incompat |= JBD2_FEATURE_INCOMPAT_64BIT;
	JPUT(sb, s_feature_incompat, incompat);
	JPUT(sb, s_feature_compat, compat);
	jbd2_fmt_from_sb(&j->log);
}

int journal_open(struct uext4_fs *fs, const struct journal_host *host, struct journal **out)
{
	struct journal *j;
	struct jbd2_superblock *sb;
	int err;

	*out = NULL;
	if (!FS_HAS_COMPAT(fs, HAS_JOURNAL))
		return 0;
	j = calloc(1, sizeof(*j));
	if (!j)
		return fs_err(ENOMEM, "journal: out of memory");
	j->fs = fs;
	j->host = host;
	err = jbd2_log_load(fs, host, &j->log);
	if (err) {
		free(j);
		return err;
	}
	sb = jbd2_sb(&j->log);
	if (JGET(sb, s_header.h_blocktype) != JBD2_SUPERBLOCK_V2)
		err = fs_err(EOPNOTSUPP, "journal superblock v1: uext4 writes v2 journals only "
			     "(tune2fs -O ^has_journal, then -j, upgrades it)");
	else if (JGET(sb, s_start) != 0)
		err = fs_err(EUCLEAN, "journal is not empty (log starts at block %u, tid %u): it "
			     "needs recovery before a read-write mount", JGET(sb, s_start),
			     JGET(sb, s_sequence));
	else if (JGET(sb, s_feature_ro_compat) != 0)
		err = fs_err(EOPNOTSUPP, "journal has unknown read-only-compatible features 0x%x",
			     JGET(sb, s_feature_ro_compat));
	if (err) {
		journal_close(j);
		return err;
	}
	/* FAST_COMMIT: we never write fast commits; the log simply ends
	 * before the fast-commit area (set_log_area), which stays untouched. */
	set_write_features(j);
	j->first_tid = JGET(sb, s_sequence);
	j->next_tid = j->first_tid;
	j->head = j->log.first;
	*out = j;
	return 0;
}

void journal_close(struct journal *j)
{
	if (!j)
		return;
	jbd2_log_free(&j->log);
	free(j->buf);
	free(j);
}

static uint32_t log_size(const struct journal *j) { return j->log.last - j->log.first; }

/* The kernel lets one transaction take a quarter of the log; descriptors,
 * revoke blocks and the commit block fit easily in the rest. */
uint32_t journal_max_transaction(const struct journal *j)
{
	return log_size(j) / 4;
}

uint32_t journal_first_tid(const struct journal *j) { return j->first_tid; }

/* ------------------------------------------------------------ commit */

/* Tags that fit one descriptor: header, first tag + UUID, more tags, tail. */
static uint32_t tags_per_descriptor(const struct jbd2_fmt *f)
{
	size_t room = f->block_size - sizeof(struct jbd2_header) - 16 - jbd2_tail_bytes(f);

	return (uint32_t)(room / jbd2_tag_bytes(f));
}

static uint32_t records_per_revoke(const struct jbd2_fmt *f)
{
	size_t room = f->block_size - sizeof(struct jbd2_revoke_header) - jbd2_tail_bytes(f);

	return (uint32_t)(room / (f->bit64 ? 8 : 4));
}

static void put_header(uint8_t *blk, uint32_t type, uint32_t tid)
{
	be32_put(blk, JBD2_MAGIC);
	be32_put(blk + 4, type);
	be32_put(blk + 8, tid);
}

static int grow_buf(struct journal *j, size_t blocks)
{
	uint8_t *p;

	if (blocks <= j->buf_blocks)
		return 0;
	p = realloc(j->buf, blocks * j->log.fmt.block_size);
	if (!p)
		return fs_err(ENOMEM, "journal: out of memory for a %zu-block transaction", blocks);
	j->buf = p;
	j->buf_blocks = blocks;
	return 0;
}

/* One tag at t for home, logged copy logged (already escaped). */
static void put_tag(const struct jbd2_fmt *f, uint8_t *t, uint64_t home, uint32_t flags,
		    uint32_t tid, const uint8_t *logged)
{
	size_t tb = jbd2_tag_bytes(f);

	memset(t, 0, tb);
	be32_put(t, (uint32_t)home);
	be16_put(t + 6, (uint16_t)flags);   /* t_flags: be16 at 6 (low half of tag3's be32) */
	if (f->bit64)
		be32_put(t + 8, (uint32_t)(home >> 32));
	if (f->csum_v3)
		be32_put(t + 12, jbd2_block_csum(f, tid, logged));
	else if (f->csum_v2)
		be16_put(t + 4, (uint16_t)jbd2_block_csum(f, tid, logged));
}

/* Descriptor + data blocks for homes[first, first+count) at out. */
static void build_descriptor(const struct jbd2_fmt *f, uint8_t *out, uint32_t tid,
			     const uint64_t *homes, const uint8_t *copies, size_t first,
			     size_t count)
{
	uint32_t bs = f->block_size;
	uint8_t *t = out + sizeof(struct jbd2_header);

	memset(out, 0, bs);
	put_header(out, JBD2_DESCRIPTOR_BLOCK, tid);
	for (size_t i = 0; i < count; i++) {
		uint8_t *data = out + (1 + i) * bs;
		uint32_t flags = i ? JBD2_FLAG_SAME_UUID : 0;

		memcpy(data, copies + (first + i) * bs, bs);
		if (be32_get(data) == JBD2_MAGIC) {
			memset(data, 0, 4);
			flags |= JBD2_FLAG_ESCAPE;
		}
		if (i + 1 == count)
			flags |= JBD2_FLAG_LAST_TAG;
		put_tag(f, t, homes[first + i], flags, tid, data);
		t += jbd2_tag_bytes(f);
		if (i == 0) {
			memcpy(t, f->uuid, 16);
			t += 16;
		}
	}
	if (jbd2_has_csum(f))
		jbd2_tail_set(f, out);
}

static bool in_sorted(const uint64_t *v, size_t n, uint64_t x)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (v[mid] == x)
			return true;
		if (v[mid] < x)
			lo = mid + 1;
		else
			hi = mid;
	}
	return false;
}

/* Revoke blocks at out; returns how many. A block logged in this same
 * transaction is not revoked (replay would skip its new copy). */
static size_t build_revokes(const struct jbd2_fmt *f, uint8_t *out, uint32_t tid,
			    const uint64_t *homes, size_t n, const uint64_t *revoked,
			    size_t nrevoked)
{
	uint32_t bs = f->block_size, per = records_per_revoke(f), rec = f->bit64 ? 8 : 4;
	size_t blocks = 0, used = 0;
	uint8_t *blk = NULL;

	for (size_t i = 0; i < nrevoked; i++) {
		if (in_sorted(homes, n, revoked[i]))
			continue;
		if (!blk || used == per) {
			if (blk) {
				be32_put(blk + 12, (uint32_t)(16 + used * rec));
				if (jbd2_has_csum(f))
					jbd2_tail_set(f, blk);
			}
			blk = out + blocks++ * bs;
			memset(blk, 0, bs);
			put_header(blk, JBD2_REVOKE_BLOCK, tid);
			used = 0;
		}
		if (f->bit64)
			be64_put(blk + 16 + used * rec, revoked[i]);
		else
			be32_put(blk + 16 + used * rec, (uint32_t)revoked[i]);
		used++;
	}
	if (blk) {
		be32_put(blk + 12, (uint32_t)(16 + used * rec));
		if (jbd2_has_csum(f))
			jbd2_tail_set(f, blk);
	}
	return blocks;
}

/* The device's own message (which names it: a path, an NBD URI and what
 * libnbd said) kept behind the journal's. */
static int dev_failed(int err, const char *what)
{
	char why[256];

	snprintf(why, sizeof(why), "%s", uext4_last_error());
	return fs_err(-err, "journal: %s failed: %s", what, why);
}

/* Write count assembled blocks at log positions from pos on, one device
 * write per run that is contiguous both in the log and on the device. */
static int write_log(struct journal *j, uint32_t pos, const uint8_t *data, size_t count)
{
	struct jbd2_log *log = &j->log;
	uint32_t bs = log->fmt.block_size;
	size_t done = 0;

	while (done < count) {
		size_t run = 1;
		int err;

		while (done + run < count && pos + run < log->last &&
		       log->phys[pos + run] == log->phys[pos] + run)
			run++;
		err = bdev_write(jbd2_dev(log), data + done * bs, run * bs, log->phys[pos] * bs);
		if (err < 0) {
			char what[96];

			snprintf(what, sizeof(what), "writing %zu log blocks at %u (device block %llu)",
				 run, pos, (unsigned long long)log->phys[pos]);
			return dev_failed(err, what);
		}
		bcache_count_write(log->fs->bc, UEXT4_META_JOURNAL, run);
		done += run;
		pos = (uint32_t)(pos + run);
		if (pos >= log->last)
			pos = log->first;
	}
	return 0;
}

/* The commit block: after the flush that made the log durable, one write
 * that is durable when it returns (FUA where the device has it, else write
 * + flush: bdev_write_fua()), as jbd2's REQ_PREFLUSH | REQ_FUA. */
static int write_log_fua(struct journal *j, uint32_t pos, const uint8_t *blk)
{
	struct jbd2_log *log = &j->log;
	uint32_t bs = log->fmt.block_size;
	int err = bdev_write_fua(jbd2_dev(log), blk, bs, log->phys[pos] * bs);

	if (err < 0) {
		char what[96];

		snprintf(what, sizeof(what), "writing the commit block at %u (device block %llu)",
			 pos, (unsigned long long)log->phys[pos]);
		return dev_failed(err, what);
	}
	bcache_count_write(log->fs->bc, UEXT4_META_JOURNAL, 1);
	return 0;
}

/* Flush the file system's device and, for an external journal, the log's:
 * ordered data and home writes are on the one, the log on the other (as
 * jbd2 flushes j_fs_dev before the commit block when it is not j_dev). */
static int flush_dev(struct journal *j)
{
	int err = bdev_flush(j->log.fs->dev);

	if (err < 0)
		return dev_failed(err, "device flush");
	err = j->log.external ? bdev_flush(j->log.dev) : 0;
	return err < 0 ? dev_failed(err, "journal device flush") : 0;
}

/* Make [head, ...) the start of the log for transaction tid: everything
 * older is home once the device is flushed. */
static int move_tail(struct journal *j, uint32_t tid)
{
	struct jbd2_superblock *sb = jbd2_sb(&j->log);
	int err = flush_dev(j);

	if (err)
		return err;
	JPUT(sb, s_start, j->head);
	JPUT(sb, s_sequence, tid);
	err = jbd2_write_sb(&j->log);
	if (!err)
		err = flush_dev(j);
	if (err)
		return err;
	j->tail = j->head;
	j->used = 0;
	j->next_tid = tid;
	return 0;
}

static int write_commit_block(struct journal *j, uint32_t pos, uint32_t tid)
{
	const struct jbd2_fmt *f = &j->log.fmt;
	uint8_t *blk = j->buf;
	struct timespec now = j->host->now(j->fs);

	memset(blk, 0, f->block_size);
	put_header(blk, JBD2_COMMIT_BLOCK, tid);
	be64_put(blk + offsetof(struct jbd2_commit_header, h_commit_sec), (uint64_t)now.tv_sec);
	be32_put(blk + offsetof(struct jbd2_commit_header, h_commit_nsec), (uint32_t)now.tv_nsec);
	/* v2/v3: h_chksum_type and size stay 0, h_chksum[0] is the crc32c. */
	if (jbd2_has_csum(f))
		be32_put(blk + offsetof(struct jbd2_commit_header, h_chksum),
			 jbd2_commit_csum(f, blk));
	return write_log_fua(j, pos, blk);
}

static int check_homes(struct journal *j, const uint64_t *homes, size_t n,
		       const uint64_t *revoked, size_t nrevoked)
{
	struct uext4_fs *fs = j->log.fs;
	uint64_t limit = j->log.fmt.bit64 ? fs->blocks_count : MIN(fs->blocks_count, 1ull << 32);

	for (size_t i = 0; i < n; i++)
		if (homes[i] >= limit || (i && homes[i] <= homes[i - 1]))
			return fs_err(EINVAL, "journal_commit: home block %llu (entry %zu) out of "
				      "range or out of order", (unsigned long long)homes[i], i);
	for (size_t i = 0; i < nrevoked; i++)
		if (revoked[i] >= limit)
			return fs_err(EINVAL, "journal_commit: revoked block %llu out of range",
				      (unsigned long long)revoked[i]);
	return 0;
}

int journal_commit(struct journal *j, uint32_t tid, const uint64_t *homes, const uint8_t *copies,
		   size_t n, const uint64_t *revoked, size_t nrevoked)
{
	const struct jbd2_fmt *f = &j->log.fmt;
	uint32_t per = tags_per_descriptor(f), rper = records_per_revoke(f);
	size_t ndesc = DIV_ROUND_UP(n, per), nrev = DIV_ROUND_UP(nrevoked, rper);
	size_t total = ndesc + n + nrev + 1, body, at = 0;
	uint32_t bs = f->block_size, pos;
	int err = check_homes(j, homes, n, revoked, nrevoked);

	if (err)
		return err;
	if (total > log_size(j))
		return fs_err(ENOSPC, "journal: transaction %u needs %zu log blocks, the log has %u",
			      tid, total, log_size(j));
	err = grow_buf(j, total);
	if (err)
		return err;
	/* Sequence numbers in the log must be consecutive, but trans.c skips
	 * the ids of empty transactions: a non-empty log continues with its
	 * own next number (tid only names the first transaction of a log). */
	if (j->tail != 0 || (int32_t)(tid - j->next_tid) < 0)
		tid = j->next_tid;
	/* The log must hold [tail, head + total). */
	if (j->tail == 0 || j->used + total > log_size(j)) {
		err = move_tail(j, tid);
		if (err)
			return err;
	}
	for (size_t i = 0; i < n; i += per) {
		size_t cnt = MIN(per, n - i);

		build_descriptor(f, j->buf + at * bs, tid, homes, copies, i, cnt);
		at += 1 + cnt;
	}
	at += build_revokes(f, j->buf + at * bs, tid, homes, n, revoked, nrevoked);
	body = at;
	err = write_log(j, j->head, j->buf, body);
	if (!err)
		err = flush_dev(j);     /* ordered data and the log before the commit block */
	pos = j->head;
	for (size_t i = 0; i < body; i++)
		pos = jbd2_next(&j->log, pos);
	if (!err)
		err = write_commit_block(j, pos, tid);   /* durable: FUA */
	if (err)
		return err;
	j->head = jbd2_next(&j->log, pos);
	j->used += (uint32_t)(body + 1);
	j->next_tid = tid + 1;
	return 0;
}

int journal_mark_empty(struct journal *j)
{
	struct jbd2_superblock *sb = jbd2_sb(&j->log);
	int err = flush_dev(j);

	if (err)
		return err;
	JPUT(sb, s_start, 0);
	JPUT(sb, s_sequence, j->next_tid);
	err = jbd2_write_sb(&j->log);
	if (!err)
		err = flush_dev(j);
	if (err)
		return err;
	j->tail = 0;
	j->used = 0;
	j->head = j->log.first;
	return 0;
}
