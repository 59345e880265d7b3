/*
 * quotatree.c - the v2r1 quota file format (see quotatree.h).
 */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "ondisk.h"
#include "quotatree.h"

#define QT_TREE_ROOT 1u
#define QT_TREE_DEPTH 4
#define QT_REFS (QT_BLOCK_SIZE / 4)
#define QT_VERSION 1u
/* Info block fields, after the 8-byte header. */
#define QT_INFO_OFF 8u

static const uint32_t qt_magic[QT_NTYPES] = { 0xd9c01f11, 0xd9c01927, 0xd9c03f14 };

/* Unaligned little-endian fields (an entry's u64s sit at 4 mod 8). */
static uint32_t get32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return le32(v); }
static void put32(uint8_t *p, uint32_t v) { v = cpu_to_le32(v); memcpy(p, &v, 4); }
static uint16_t get16(const uint8_t *p) { uint16_t v; memcpy(&v, p, 2); return le16(v); }
static void put16(uint8_t *p, uint16_t v) { v = cpu_to_le16(v); memcpy(p, &v, 2); }
static uint64_t get64(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return le64(v); }
static void put64(uint8_t *p, uint64_t v) { v = cpu_to_le64(v); memcpy(p, &v, 8); }

/* Data block header: next, previous block with free entries; entries. */
#define DH_NEXT 0
#define DH_PREV 4
#define DH_ENTRIES 8

static unsigned tree_index(uint32_t id, int depth)
{
	return (id >> ((QT_TREE_DEPTH - depth - 1) * 8)) & 0xff;
}

static void info_decode(const uint8_t *b, struct qt_info *i)
{
	const uint8_t *p = b + QT_INFO_OFF;

	i->bgrace = get32(p);
	i->igrace = get32(p + 4);
	i->flags = get32(p + 8);
	i->blocks = get32(p + 12);
	i->free_blk = get32(p + 16);
	i->free_entry = get32(p + 20);
}

static void info_encode(uint8_t *b, const struct qt_info *i)
{
	uint8_t *p = b + QT_INFO_OFF;

	put32(p, i->bgrace);
	put32(p + 4, i->igrace);
	put32(p + 8, i->flags);
	put32(p + 12, i->blocks);
	put32(p + 16, i->free_blk);
	put32(p + 20, i->free_entry);
}

/* The info lives in block 0 beside the header: read, change, write. */
static int info_load(const struct qt_io *io, struct qt_info *i)
{
	uint8_t b[QT_BLOCK_SIZE];
	int err = io->read(io->ctx, 0, b);

	if (!err)
		info_decode(b, i);
	return err;
}

static int info_store(const struct qt_io *io, const struct qt_info *i)
{
	uint8_t b[QT_BLOCK_SIZE];
	int err = io->read(io->ctx, 0, b);

	if (err)
		return err;
	info_encode(b, i);
	return io->write(io->ctx, 0, b);
}

int qt_format(const struct qt_io *io, enum qt_type type)
{
	uint8_t b[QT_BLOCK_SIZE] = { 0 };
	struct qt_info i = { .bgrace = QT_DEFAULT_GRACE, .igrace = QT_DEFAULT_GRACE,
			     .blocks = QT_TREE_ROOT + 1 };
	int err;

	put32(b, qt_magic[type]);
	put32(b + 4, QT_VERSION);
	info_encode(b, &i);
	if ((err = io->write(io->ctx, 0, b)))
		return err;
	memset(b, 0, sizeof(b));
	return io->write(io->ctx, QT_TREE_ROOT, b);
}

int qt_set_grace(const struct qt_io *io, uint32_t bgrace, uint32_t igrace)
{
	struct qt_info i;
	int err = info_load(io, &i);

	if (err)
		return err;
	i.bgrace = bgrace;
	i.igrace = igrace;
	return info_store(io, &i);
}

int qt_read_info(const struct qt_io *io, enum qt_type type, struct qt_info *info)
{
	uint8_t b[QT_BLOCK_SIZE];
	int err = io->read(io->ctx, 0, b);

	if (err)
		return err;
	if (get32(b) != qt_magic[type] || get32(b + 4) != QT_VERSION)
		return -EUCLEAN;
	info_decode(b, info);
	if (info->blocks <= QT_TREE_ROOT)
		return -EUCLEAN;
	return 0;
}

void qt_encode(uint8_t *p, const struct qt_entry *e)
{
	put32(p, e->id);
	put32(p + 4, 0);
	put64(p + 8, e->ihardlimit);
	put64(p + 16, e->isoftlimit);
	put64(p + 24, e->curinodes);
	put64(p + 32, e->bhardlimit);
	put64(p + 40, e->bsoftlimit);
	put64(p + 48, e->curspace);
	put64(p + 56, e->btime);
	put64(p + 64, e->itime);
	static const uint8_t zero[QT_ENTRY_SIZE];
	if (!memcmp(p, zero, QT_ENTRY_SIZE))
		put64(p + 64, 1);
}

void qt_decode(const uint8_t *p, struct qt_entry *e)
{
	e->id = get32(p);
	e->ihardlimit = get64(p + 8);
	e->isoftlimit = get64(p + 16);
	e->curinodes = get64(p + 24);
	e->bhardlimit = get64(p + 32);
	e->bsoftlimit = get64(p + 40);
	e->curspace = get64(p + 48);
	e->btime = get64(p + 56);
	e->itime = get64(p + 64);
	/* The escaped all-zero entry of id 0. */
	if (e->id == 0 && e->itime == 1 && !e->ihardlimit && !e->isoftlimit && !e->curinodes &&
	    !e->bhardlimit && !e->bsoftlimit && !e->curspace && !e->btime)
		e->itime = 0;
}

static bool entry_unused(const uint8_t *p)
{
	for (unsigned i = 0; i < QT_ENTRY_SIZE; i++)
		if (p[i])
			return false;
	return true;
}

/* A block number read from the file must lie inside it. */
static int check_ref(const struct qt_info *i, uint32_t blk)
{
	return blk > QT_TREE_ROOT && blk < i->blocks ? 0 : -EUCLEAN;
}

/* Find id's entry in data block blk. */
static int find_in_data(const struct qt_io *io, uint32_t blk, uint32_t id, struct qt_entry *e,
			struct qt_where *w)
{
	uint8_t b[QT_BLOCK_SIZE];
	int err = io->read(io->ctx, blk, b);

	if (err)
		return err;
	for (unsigned k = 0; k < QT_ENTRIES_PER_BLOCK; k++) {
		const uint8_t *p = b + QT_DATA_HEADER + k * QT_ENTRY_SIZE;

		if (entry_unused(p) || get32(p) != id)
			continue;
		qt_decode(p, e);
		w->blk = blk;
		w->off = QT_DATA_HEADER + k * QT_ENTRY_SIZE;
		return 0;
	}
	return -EUCLEAN; /* the tree points here, the entry is not */
}

int qt_lookup(const struct qt_io *io, uint32_t id, struct qt_entry *e, struct qt_where *w)
{
	uint8_t b[QT_BLOCK_SIZE];
	struct qt_info info;
	uint32_t blk = QT_TREE_ROOT;
	int err = info_load(io, &info);

	for (int depth = 0; !err && depth < QT_TREE_DEPTH; depth++) {
		if ((err = io->read(io->ctx, blk, b)))
			break;
		blk = get32(b + 4 * tree_index(id, depth));
		if (blk == 0)
			return -ENOENT;
		err = check_ref(&info, blk);
	}
	return err ? err : find_in_data(io, blk, id, e, w);
}

/* A block for the tree or for data: the head of the free-block list, or
 * one past the end of the file.  Its contents are the caller's to write. */
static int get_free_block(const struct qt_io *io, struct qt_info *i, uint32_t *out)
{
	uint8_t b[QT_BLOCK_SIZE];
	int err;

	if (i->free_blk) {
		if ((err = check_ref(i, i->free_blk)) || (err = io->read(io->ctx, i->free_blk, b)))
			return err;
		*out = i->free_blk;
		i->free_blk = get32(b + DH_NEXT);
	} else {
		memset(b, 0, sizeof(b));
		/* Written now, so the file's length covers it. */
		if ((err = io->write(io->ctx, i->blocks, b)))
			return err;
		*out = i->blocks++;
	}
	return info_store(io, i);
}

/* Unlink data block blk (contents b) from the free-entry list. */
static int unlink_free_entry(const struct qt_io *io, struct qt_info *i, uint32_t blk,
			     uint8_t *b)
{
	uint32_t next = get32(b + DH_NEXT), prev = get32(b + DH_PREV);
	uint8_t t[QT_BLOCK_SIZE];
	int err = 0;

	if (next) {
		if ((err = check_ref(i, next)) || (err = io->read(io->ctx, next, t)))
			return err;
		put32(t + DH_PREV, prev);
		if ((err = io->write(io->ctx, next, t)))
			return err;
	}
	if (prev) {
		if ((err = check_ref(i, prev)) || (err = io->read(io->ctx, prev, t)))
			return err;
		put32(t + DH_NEXT, next);
		err = io->write(io->ctx, prev, t);
	} else {
		i->free_entry = next;
		err = info_store(io, i);
	}
	put32(b + DH_NEXT, 0);
	put32(b + DH_PREV, 0);
	return err;
}

/* Put e in a free entry of a data block (the kernel's find_free_dqentry). */
static int add_entry(const struct qt_io *io, struct qt_info *i, const struct qt_entry *e,
		     struct qt_where *w)
{
	uint8_t b[QT_BLOCK_SIZE];
	uint32_t blk;
	int err;

	if (i->free_entry) {
		blk = i->free_entry;
		if ((err = check_ref(i, blk)) || (err = io->read(io->ctx, blk, b)))
			return err;
	} else {
		if ((err = get_free_block(io, i, &blk)))
			return err;
		memset(b, 0, sizeof(b));
		i->free_entry = blk;
		if ((err = info_store(io, i)))
			return err;
	}
	uint16_t n = get16(b + DH_ENTRIES);

	if (n >= QT_ENTRIES_PER_BLOCK)
		return -EUCLEAN;
	if (n + 1u >= QT_ENTRIES_PER_BLOCK && (err = unlink_free_entry(io, i, blk, b)))
		return err;
	for (unsigned k = 0; k < QT_ENTRIES_PER_BLOCK; k++) {
		uint8_t *p = b + QT_DATA_HEADER + k * QT_ENTRY_SIZE;

		if (!entry_unused(p))
			continue;
		put16(b + DH_ENTRIES, (uint16_t)(n + 1));
		qt_encode(p, e);
		w->blk = blk;
		w->off = QT_DATA_HEADER + k * QT_ENTRY_SIZE;
		return io->write(io->ctx, blk, b);
	}
	return -EUCLEAN; /* count says room, the entries say none */
}

/* Insert below tree block blk at depth (the kernel's do_insert_tree). */
static int insert_tree(const struct qt_io *io, struct qt_info *i, uint32_t blk, int depth,
		       const struct qt_entry *e, struct qt_where *w)
{
	uint8_t b[QT_BLOCK_SIZE];
	unsigned idx = tree_index(e->id, depth);
	uint32_t ref;
	int err;

	if ((err = io->read(io->ctx, blk, b)))
		return err;
	ref = get32(b + 4 * idx);
	if (ref && (err = check_ref(i, ref)))
		return err;
	if (depth == QT_TREE_DEPTH - 1) {
		if (ref)
			return -EEXIST;
		if ((err = add_entry(io, i, e, w)))
			return err;
		ref = w->blk;
	} else {
		if (!ref) {
			uint8_t z[QT_BLOCK_SIZE] = { 0 };
			uint32_t nb;

			if ((err = get_free_block(io, i, &nb)) || (err = io->write(io->ctx, nb, z)))
				return err;
			if ((err = insert_tree(io, i, nb, depth + 1, e, w)))
				return err;
			/* blk may have been read again meanwhile: reread. */
			if ((err = io->read(io->ctx, blk, b)))
				return err;
			put32(b + 4 * idx, nb);
			return io->write(io->ctx, blk, b);
		}
		return insert_tree(io, i, ref, depth + 1, e, w);
	}
	/* The leaf's data block may be this tree block's neighbour: reread. */
	if ((err = io->read(io->ctx, blk, b)))
		return err;
	put32(b + 4 * idx, ref);
	return io->write(io->ctx, blk, b);
}

int qt_insert(const struct qt_io *io, uint32_t id, const struct qt_entry *e,
	      struct qt_where *w)
{
	struct qt_info info;
	struct qt_entry x = *e;
	int err = info_load(io, &info);

	x.id = id;
	return err ? err : insert_tree(io, &info, QT_TREE_ROOT, 0, &x, w);
}

static int walk(const struct qt_io *io, const struct qt_info *info, uint32_t blk, int depth,
		uint32_t prefix, int (*fn)(void *, const struct qt_entry *, const struct qt_where *),
		void *arg)
{
	uint8_t b[QT_BLOCK_SIZE];
	int err = io->read(io->ctx, blk, b);

	for (unsigned k = 0; !err && k < QT_REFS; k++) {
		uint32_t ref = get32(b + 4 * k), id = prefix << 8 | k;
		struct qt_entry e;
		struct qt_where w;

		if (!ref)
			continue;
		if ((err = check_ref(info, ref)))
			break;
		if (depth < QT_TREE_DEPTH - 1)
			err = walk(io, info, ref, depth + 1, id, fn, arg);
		else if ((err = find_in_data(io, ref, id, &e, &w)) == 0)
			err = fn(arg, &e, &w);
	}
	return err;
}

int qt_iterate(const struct qt_io *io, int (*fn)(void *arg, const struct qt_entry *e,
						  const struct qt_where *w),
	       void *arg)
{
	struct qt_info info;
	int err = info_load(io, &info);

	return err ? err : walk(io, &info, QT_TREE_ROOT, 0, 0, fn, arg);
}
