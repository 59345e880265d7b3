/*
 * mkfs.c - uext4_mkfs(): write a new ext2/3/4 file system straight into a
 * file or block device (not through a mount).
 *
 * Geometry and defaults follow mke2fs 1.47 (lib/ext2fs/initialize.c for the
 * group geometry and reserved GDT blocks, alloc_tables.c for flex_bg
 * placement, mkjournal.c for the journal's size and place, orphan.c for the
 * orphan file's size), written from those facts; the code is ours.
 *
 * What is written: the superblock and its backups (sparse_super groups),
 * the group descriptors and their backups, the resize inode (7) with the
 * reserved GDT blocks' lists, the bitmaps of groups that are initialised,
 * the inode-table blocks holding inodes 1..12, the root directory and
 * lost+found, the journal superblock (inode 8) and the orphan file (12).
 * Nothing else: on a regular file the whole range is punched first (reads
 * as zeros, as mke2fs's discard does), so inode tables of groups with no
 * inode in use are left unwritten (INODE_UNINIT, itable_unused), and so are
 * block bitmaps of groups holding nothing but their own tables
 * (BLOCK_UNINIT).  That keeps a 16 TiB image well under a second.
 *
 * Blocks in use are kept as a sorted list of runs (struct run) plus the
 * superblock/GDT backup regions, which are computed; the allocator finds
 * the first free run at or after a goal.  Per group only the count of used
 * blocks and whether anything but its own tables is there are kept.
 *
 * Single-threaded; nothing is shared.
 */
#include "crc.h"
#include "error.h"
#include "inode.h"
#include "jbd2.h"
#include "mmp.h"
#include "mountcheck.h"
#include "nbd.h"
#include "ondisk.h"
#include "quotatree.h"

#include <fcntl.h>
#include <limits.h>
#include <linux/falloc.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MK_FIRST_INO 11
#define MK_LPF_INO 11
#define MK_MAX_EXTENT_LEN 32768u
#define EXT2_ERRORS_CONTINUE 1
#define EXT4_DEFM_XATTR_USER 0x0004
#define EXT4_DEFM_ACL 0x0008
#define EXT3_JNL_BACKUP_BLOCKS 1
#define LARGE_INODE_EXTRA 32    /* sizeof(ext2_inode_large) - 128, as mke2fs */

/* ------------------------------------------------------------ features */

struct feature_name {
	const char *name;
	int kind;               /* 0 compat, 1 incompat, 2 ro_compat */
	uint32_t mask;
};

/* The features uext4 mkfs can make, in dumpe2fs's order (compat, incompat,
 * ro_compat, low bit first).  "extents" and "gdt_csum" are aliases. */
static const struct feature_name features[] = {
	{ "has_journal", 0, EXT4_FEATURE_COMPAT_HAS_JOURNAL },
	{ "ext_attr", 0, EXT4_FEATURE_COMPAT_EXT_ATTR },
	{ "resize_inode", 0, EXT4_FEATURE_COMPAT_RESIZE_INODE },
	{ "dir_index", 0, EXT4_FEATURE_COMPAT_DIR_INDEX },
	{ "sparse_super2", 0, EXT4_FEATURE_COMPAT_SPARSE_SUPER2 },
	{ "fast_commit", 0, EXT4_FEATURE_COMPAT_FAST_COMMIT },
	{ "stable_inodes", 0, EXT4_FEATURE_COMPAT_STABLE_INODES },
	{ "orphan_file", 0, EXT4_FEATURE_COMPAT_ORPHAN_FILE },
	{ "filetype", 1, EXT4_FEATURE_INCOMPAT_FILETYPE },
	{ "journal_dev", 1, EXT4_FEATURE_INCOMPAT_JOURNAL_DEV },
	{ "meta_bg", 1, EXT4_FEATURE_INCOMPAT_META_BG },
	{ "extent", 1, EXT4_FEATURE_INCOMPAT_EXTENTS },
	{ "64bit", 1, EXT4_FEATURE_INCOMPAT_64BIT },
	{ "mmp", 1, EXT4_FEATURE_INCOMPAT_MMP },
	{ "flex_bg", 1, EXT4_FEATURE_INCOMPAT_FLEX_BG },
	{ "ea_inode", 1, EXT4_FEATURE_INCOMPAT_EA_INODE },
	{ "metadata_csum_seed", 1, EXT4_FEATURE_INCOMPAT_CSUM_SEED },
	{ "large_dir", 1, EXT4_FEATURE_INCOMPAT_LARGEDIR },
	{ "casefold", 1, EXT4_FEATURE_INCOMPAT_CASEFOLD },
	{ "sparse_super", 2, EXT4_FEATURE_RO_COMPAT_SPARSE_SUPER },
	{ "large_file", 2, EXT4_FEATURE_RO_COMPAT_LARGE_FILE },
	{ "huge_file", 2, EXT4_FEATURE_RO_COMPAT_HUGE_FILE },
	{ "uninit_bg", 2, EXT4_FEATURE_RO_COMPAT_GDT_CSUM },
	{ "dir_nlink", 2, EXT4_FEATURE_RO_COMPAT_DIR_NLINK },
	{ "extra_isize", 2, EXT4_FEATURE_RO_COMPAT_EXTRA_ISIZE },
	{ "quota", 2, EXT4_FEATURE_RO_COMPAT_QUOTA },
	{ "bigalloc", 2, EXT4_FEATURE_RO_COMPAT_BIGALLOC },
	{ "metadata_csum", 2, EXT4_FEATURE_RO_COMPAT_METADATA_CSUM },
	{ "project", 2, EXT4_FEATURE_RO_COMPAT_PROJECT },
	{ "verity", 2, EXT4_FEATURE_RO_COMPAT_VERITY },
	{ "extents", 1, EXT4_FEATURE_INCOMPAT_EXTENTS },
	{ "gdt_csum", 2, EXT4_FEATURE_RO_COMPAT_GDT_CSUM },
};
#define N_FEATURES (sizeof(features) / sizeof(features[0]))
#define N_ALIASES 2     /* the last entries: not printed */
#define N_PRINTED (N_FEATURES - N_ALIASES)

/* /etc/mke2fs.conf of Debian's e2fsprogs 1.47: base_features, then per type. */
#define BASE_COMPAT (EXT4_FEATURE_COMPAT_RESIZE_INODE | EXT4_FEATURE_COMPAT_DIR_INDEX | \
		     EXT4_FEATURE_COMPAT_EXT_ATTR)
#define BASE_INCOMPAT EXT4_FEATURE_INCOMPAT_FILETYPE
#define BASE_RO (EXT4_FEATURE_RO_COMPAT_SPARSE_SUPER | EXT4_FEATURE_RO_COMPAT_LARGE_FILE)

struct feats {
	uint32_t f[3];
};

static void type_defaults(int type, struct feats *ft)
{
	ft->f[0] = BASE_COMPAT;
	ft->f[1] = BASE_INCOMPAT;
	ft->f[2] = BASE_RO;
	if (type >= 3)
		ft->f[0] |= EXT4_FEATURE_COMPAT_HAS_JOURNAL;
	if (type == 4) {
		ft->f[1] |= EXT4_FEATURE_INCOMPAT_EXTENTS | EXT4_FEATURE_INCOMPAT_FLEX_BG |
			    EXT4_FEATURE_INCOMPAT_64BIT | EXT4_FEATURE_INCOMPAT_CSUM_SEED;
		ft->f[2] |= EXT4_FEATURE_RO_COMPAT_HUGE_FILE | EXT4_FEATURE_RO_COMPAT_METADATA_CSUM |
			    EXT4_FEATURE_RO_COMPAT_DIR_NLINK | EXT4_FEATURE_RO_COMPAT_EXTRA_ISIZE;
		/* uext4's additions to mke2fs's ext4 defaults */
		ft->f[0] |= EXT4_FEATURE_COMPAT_ORPHAN_FILE;
	}
}

static const struct feature_name *feature_lookup(const char *name, size_t len)
{
	for (size_t i = 0; i < N_FEATURES; i++)
		if (strlen(features[i].name) == len && !strncmp(features[i].name, name, len))
			return &features[i];
	return NULL;
}

static void feature_string(const struct feats *ft, char *buf, size_t len)
{
	size_t n = 0;

	buf[0] = 0;
	for (size_t i = 0; i < N_PRINTED; i++)
		if (ft->f[features[i].kind] & features[i].mask)
			n += (size_t)snprintf(buf + n, n < len ? len - n : 0, "%s%s", n ? " " : "",
					      features[i].name);
}

/* Apply "-O a,b,^c"; records in *asked the features named explicitly. */
static int apply_feature_list(const char *list, struct feats *ft, struct feats *asked)
{
	const char *p = list;

	while (p && *p) {
		size_t len = strcspn(p, ", \t");
		int off = 0;
		const char *n = p;
		const struct feature_name *f;

		if (len == 0) {
			p++;
			continue;
		}
		if (*n == '^' || *n == '-') {
			off = 1;
			n++;
		} else if (*n == '+') {
			n++;
		}
		if (!strncmp(p, "none", len) && len == 4) {
			ft->f[0] = ft->f[1] = ft->f[2] = 0;
			p += len;
			continue;
		}
		f = feature_lookup(n, len - (size_t)(n - p));
		if (!f) {
			char known[512];
			struct feats all = { { ~0u, ~0u, ~0u } };

			feature_string(&all, known, sizeof(known));
			return fs_err(EINVAL, "-O: unknown or unsupported feature '%.*s' (uext4 mkfs "
				      "makes: %s)", (int)len, p, known);
		}
		if (off)
			ft->f[f->kind] &= ~f->mask;
		else
			ft->f[f->kind] |= f->mask;
		asked->f[f->kind] |= f->mask;
		p += len;
	}
	return 0;
}


/* ------------------------------------------------------------ state */

struct run {
	uint64_t start, len;
};

struct mk {
	const struct uext4_mkfs_opts *o;
	/* Inodes past lost+found, in mke2fs's order: the project quota
	 * file, then the orphan file (0: none); the last inode in use. */
	uint32_t prj_ino, orphan_ino, last_used_ino;
	uint8_t qtypes;             /* UEXT4_MKFS_QUOTA_* made */
	const char *path;
	int fd;
	uint64_t base;              /* byte offset of block 0 in the file */
	int zeroed;                 /* the range reads as zeros */
	int is_blockdev;
	uint64_t written;

	struct feats ft;
	uint32_t bs, log_bs, apb;   /* block size, log2(bs) - 10, addresses per block */
	uint64_t blocks;
	uint64_t r_blocks;
	uint32_t first_data, bpg, ipg, itb, ngroups, desc_size, desc_blocks, rsv_gdt;
	uint32_t inode_size, inodes_count, flex, log_flex;
	/* bigalloc: a cluster is 2^cbits blocks (0 without); bpg is then
	 * cpg << cbits.  Block 0 of a 1 KiB-block bigalloc file system is
	 * group 0's first (s_first_data_block 0): the superblock is block 1
	 * (sb0_shift 1). */
	uint32_t cbits, cpg, sb0_shift;
	uint32_t journal_blocks, orphan_blocks;
	uint32_t fc_blocks;         /* fast-commit blocks after the journal's log */
	uint32_t backup_bgs[2];     /* sparse_super2: the backup groups (0 = none) */
	/* -J device=: the external journal's UUID, block size, device
	 * number (0 for a regular file) and where its JBD2 superblock is. */
	struct {
		int fd;
		uint8_t uuid[16];
		uint32_t bs;
		uint32_t rdev;
		uint64_t jsb_off;
	} jdev;
	int csum, gdt_csum, extents;
	uint32_t csum_seed;
	uint8_t uuid[16], hash_seed[16];
	int64_t now;
	char label[16];

	struct run *runs;           /* blocks in use, sorted, merged */
	size_t nruns, runs_cap;
	uint32_t *gused;            /* per group: blocks in runs */
	uint8_t *gforeign;          /* per group: holds more than its own tables */
	uint64_t *bb, *ib, *it;     /* per group: bitmap and table locations */
	uint64_t overhead;
	uint8_t *gdt;               /* desc_blocks * bs bytes */
	uint8_t *ibuf;              /* one inode (inode_size bytes, up to a block) */
	struct ext4_super_block sb;
};

static int has_f(const struct mk *m, int kind, uint32_t mask)
{
	return (m->ft.f[kind] & mask) != 0;
}
#define HAS_COMPAT(m, x) has_f(m, 0, EXT4_FEATURE_COMPAT_##x)
#define HAS_INCOMPAT(m, x) has_f(m, 1, EXT4_FEATURE_INCOMPAT_##x)
#define HAS_RO(m, x) has_f(m, 2, EXT4_FEATURE_RO_COMPAT_##x)

static uint64_t group_first(const struct mk *m, uint32_t g)
{
	return m->first_data + (uint64_t)g * m->bpg;
}

static uint64_t group_size(const struct mk *m, uint32_t g)
{
	if (g + 1 < m->ngroups)
		return m->bpg;
	return m->blocks - group_first(m, g);
}

static uint32_t group_of(const struct mk *m, uint64_t blk)
{
	return (uint32_t)((blk - m->first_data) / m->bpg);
}

static int is_power_of(uint32_t n, uint32_t base)
{
	while (n > 1 && n % base == 0)
		n /= base;
	return n == 1;
}

/* Group g holds a superblock backup (all groups without sparse_super;
 * with sparse_super2 only the groups s_backup_bgs names). */
static int group_has_super(const struct mk *m, uint32_t g)
{
	if (g == 0)
		return 1;
	if (HAS_COMPAT(m, SPARSE_SUPER2))
		return g == m->backup_bgs[0] || g == m->backup_bgs[1];
	if (g <= 1 || !HAS_RO(m, SPARSE_SUPER))
		return 1;
	if (!(g & 1))
		return 0;
	return is_power_of(g, 3) || is_power_of(g, 5) || is_power_of(g, 7);
}

/* The first power of base at or above g (UINT32_MAX if none fits). */
static uint32_t power_at_least(uint32_t base, uint32_t g)
{
	uint64_t p = base;

	while (p < g)
		p *= base;
	return p > UINT32_MAX ? UINT32_MAX : (uint32_t)p;
}

/* The first group at or after g that holds a superblock backup. */
static uint32_t next_super_group(const struct mk *m, uint32_t g)
{
	uint32_t best;

	if (g == 0)
		return 0;
	if (HAS_COMPAT(m, SPARSE_SUPER2)) {
		best = UINT32_MAX;
		for (int i = 0; i < 2; i++)
			if (m->backup_bgs[i] >= g && m->backup_bgs[i] < best)
				best = m->backup_bgs[i];
		return best;
	}
	if (g <= 1 || !HAS_RO(m, SPARSE_SUPER))
		return g;
	best = power_at_least(3, g);
	if (power_at_least(5, g) < best)
		best = power_at_least(5, g);
	if (power_at_least(7, g) < best)
		best = power_at_least(7, g);
	return best;
}

/* Descriptors per block: the groups of a meta group (meta_bg). */
static uint32_t desc_per_block(const struct mk *m)
{
	return m->bs / m->desc_size;
}

/* meta_bg (s_first_meta_bg 0, as mke2fs makes it): the first, second and
 * last group of each meta group hold its one descriptor block
 * (ext2fs_super_and_bgd_loc2()). */
static int group_has_meta_desc(const struct mk *m, uint32_t g)
{
	uint32_t r = g % desc_per_block(m);

	return HAS_INCOMPAT(m, META_BG) && (r == 0 || r == 1 || r == desc_per_block(m) - 1);
}

/* The first group at or after g holding a meta_bg descriptor block. */
static uint32_t next_meta_desc_group(const struct mk *m, uint32_t g)
{
	uint32_t r = g % desc_per_block(m);

	if (!HAS_INCOMPAT(m, META_BG))
		return UINT32_MAX;
	if (r <= 1 || r == desc_per_block(m) - 1)
		return g;
	return g - r + desc_per_block(m) - 1;
}

/* The first group at or after g with a backup region (backup_len > 0). */
static uint32_t next_region_group(const struct mk *m, uint32_t g)
{
	uint32_t s = next_super_group(m, g), d = next_meta_desc_group(m, g);

	return s < d ? s : d;
}

/* Blocks at the start of group g taken by the superblock, GDT and reserved
 * GDT; with meta_bg by the superblock and the meta group's descriptor
 * block. */
static uint32_t backup_len(const struct mk *m, uint32_t g)
{
	uint32_t boot = g == 0 ? m->sb0_shift : 0;

	if (HAS_INCOMPAT(m, META_BG))
		return boot + (group_has_super(m, g) ? 1 : 0) + (group_has_meta_desc(m, g) ? 1 : 0);
	if (!group_has_super(m, g))
		return 0;
	return boot + 1 + m->desc_blocks + m->rsv_gdt;
}

/* Block of group g's superblock (copy). */
static uint64_t super_blk(const struct mk *m, uint32_t g)
{
	return group_first(m, g) + (g == 0 ? m->sb0_shift : 0);
}

/* ------------------------------------------------------------ clusters */

static uint64_t cl_mask(const struct mk *m)
{
	return ((uint64_t)1 << m->cbits) - 1;
}

static uint64_t cl_round_up(const struct mk *m, uint64_t blk)
{
	return (blk + cl_mask(m)) & ~cl_mask(m);
}

/* Clusters of group g holding anything: the backup region and the runs
 * (each counted once however many of its blocks are used). */
static uint32_t group_used_clusters(const struct mk *m, uint32_t g);

/* ------------------------------------------------------------ allocator */

/* Index of the first run ending after blk. */
static size_t run_search(const struct mk *m, uint64_t blk)
{
	size_t lo = 0, hi = m->nruns;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (m->runs[mid].start + m->runs[mid].len <= blk)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* If blk is in use, the first block after what covers it; else blk. */
static uint64_t skip_used(const struct mk *m, uint64_t blk)
{
	while (blk < m->blocks) {
		uint32_t g = group_of(m, blk);
		uint64_t gs = group_first(m, g);
		size_t i;

		if (blk < gs + backup_len(m, g)) {
			blk = gs + backup_len(m, g);
			continue;
		}
		i = run_search(m, blk);
		if (i < m->nruns && m->runs[i].start <= blk) {
			blk = m->runs[i].start + m->runs[i].len;
			continue;
		}
		return blk;
	}
	return blk;
}

/* Length of the free stretch at free block blk, at most max. */
static uint64_t free_len(const struct mk *m, uint64_t blk, uint64_t max)
{
	size_t i = run_search(m, blk);
	uint64_t end = m->blocks;
	uint32_t g = group_of(m, blk) + 1;

	if (i < m->nruns && m->runs[i].start < end)
		end = m->runs[i].start;
	/* the next backup region */
	g = next_region_group(m, g);
	if (g < m->ngroups && backup_len(m, g) && group_first(m, g) < end)
		end = group_first(m, g);
	return end - blk < max ? end - blk : max;
}

static int run_insert(struct mk *m, uint64_t start, uint64_t len)
{
	size_t i = run_search(m, start);

	if (i > 0 && m->runs[i - 1].start + m->runs[i - 1].len == start) {
		m->runs[i - 1].len += len;
		if (i < m->nruns && m->runs[i].start == start + len) {
			m->runs[i - 1].len += m->runs[i].len;
			memmove(&m->runs[i], &m->runs[i + 1], (m->nruns - i - 1) * sizeof(*m->runs));
			m->nruns--;
		}
		return 0;
	}
	if (i < m->nruns && m->runs[i].start == start + len) {
		m->runs[i].start = start;
		m->runs[i].len += len;
		return 0;
	}
	if (m->nruns == m->runs_cap) {
		size_t cap = m->runs_cap ? m->runs_cap * 2 : 256;
		struct run *r = realloc(m->runs, cap * sizeof(*r));

		if (!r)
			return fs_err(ENOMEM, "mkfs: out of memory for the block map");
		m->runs = r;
		m->runs_cap = cap;
	}
	memmove(&m->runs[i + 1], &m->runs[i], (m->nruns - i) * sizeof(*m->runs));
	m->runs[i] = (struct run){ start, len };
	m->nruns++;
	return 0;
}

/* Mark [start, start+len) used; owner is the group whose own table it is,
 * or UINT32_MAX for anything else. */
static int mark_used(struct mk *m, uint64_t start, uint64_t len, uint32_t owner)
{
	uint64_t b = start, end = start + len;
	int err = run_insert(m, start, len);

	while (!err && b < end) {
		uint32_t g = group_of(m, b);
		uint64_t gend = group_first(m, g) + group_size(m, g);
		uint64_t n = (end < gend ? end : gend) - b;

		m->gused[g] += (uint32_t)n;
		if (g != owner)
			m->gforeign[g] = 1;
		b += n;
	}
	return err;
}

/* The first free block at or after blk starting a wholly free cluster
 * (bigalloc: a file's data and mapping blocks take clusters of their own,
 * the group tables are packed block by block, as mke2fs places them). */
static uint64_t skip_used_cluster(const struct mk *m, uint64_t blk)
{
	for (;;) {
		blk = skip_used(m, blk);
		if (blk >= m->blocks || !(blk & cl_mask(m)))
			return blk;
		blk = cl_round_up(m, blk);
	}
}

/* Free blocks at blk (a cluster's first) in whole clusters, at most max
 * rounded up to clusters. */
static uint64_t free_len_clusters(const struct mk *m, uint64_t blk, uint64_t max)
{
	return free_len(m, blk, cl_round_up(m, max)) & ~cl_mask(m);
}

/* n contiguous free blocks at or after goal; with bigalloc, anything not
 * a group's own table takes whole clusters. */
static int alloc_contig(struct mk *m, uint64_t goal, uint64_t n, uint32_t owner, uint64_t *out)
{
	uint64_t b = goal < m->first_data ? m->first_data : goal;
	bool whole = m->cbits && owner == UINT32_MAX;
	uint64_t need = whole ? cl_round_up(m, n) : n;

	while (b < m->blocks) {
		uint64_t len;

		b = whole ? skip_used_cluster(m, b) : skip_used(m, b);
		if (b >= m->blocks)
			break;
		len = whole ? free_len_clusters(m, b, need) : free_len(m, b, need);
		if (len == need) {
			*out = b;
			return mark_used(m, b, need, owner);
		}
		b += whole && !len ? free_len(m, b, need) : len;
	}
	return fs_err(ENOSPC, "mkfs: no room for %llu contiguous blocks of metadata: the file "
		      "system is too small for its inode tables and journal (%llu blocks)",
		      (unsigned long long)n, (unsigned long long)m->blocks);
}

/* A file's blocks: up to want blocks in runs from goal on. */
struct fmap {
	struct run *r;
	size_t n;
	uint64_t blocks;
};

static int fmap_add(struct fmap *f, uint64_t start, uint64_t len)
{
	if (f->n && f->r[f->n - 1].start + f->r[f->n - 1].len == start) {
		f->r[f->n - 1].len += len;
	} else {
		struct run *r = realloc(f->r, (f->n + 1) * sizeof(*r));

		if (!r)
			return fs_err(ENOMEM, "mkfs: out of memory");
		f->r = r;
		f->r[f->n++] = (struct run){ start, len };
	}
	f->blocks += len;
	return 0;
}

static int alloc_file(struct mk *m, uint64_t goal, uint64_t want, struct fmap *f)
{
	uint64_t b = goal < m->first_data ? m->first_data : goal;
	int wrapped = 0, err;

	while (want) {
		uint64_t len, take;

		b = skip_used_cluster(m, b);
		if (b >= m->blocks) {
			if (wrapped)
				return fs_err(ENOSPC, "mkfs: the file system (%llu blocks) is too "
					      "small for its journal and directories",
					      (unsigned long long)m->blocks);
			wrapped = 1;
			b = m->first_data;
			continue;
		}
		/* whole clusters (bigalloc); the file maps only what it wants */
		len = free_len_clusters(m, b, want);
		if (!len) {
			b += free_len(m, b, want);
			continue;
		}
		take = len < want ? len : want;
		if ((err = mark_used(m, b, len, UINT32_MAX)) || (err = fmap_add(f, b, take)))
			return err;
		b += len;
		want -= take;
	}
	return 0;
}

/* ------------------------------------------------------------ output */

static int wr(struct mk *m, uint64_t blk, const void *buf, size_t len)
{
	const uint8_t *p = buf;
	uint64_t off = m->base + blk * m->bs;

	while (len) {
		ssize_t n = pwrite(m->fd, p, len, (off_t)off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return fs_err(n < 0 ? errno : EIO, "mkfs: %s: write of block %llu failed: %s",
				      m->path, (unsigned long long)blk,
				      n < 0 ? strerror(errno) : "no progress");
		p += n;
		len -= (size_t)n;
		off += (uint64_t)n;
		m->written += (uint64_t)n;
	}
	return 0;
}

/* Zeros over [blk, blk+count) (only needed when the range was not punched). */
static int wr_zero(struct mk *m, uint64_t blk, uint64_t count)
{
	static const uint8_t zero[65536];
	uint64_t per = sizeof(zero) / m->bs;

	if (m->is_blockdev) {
		uint64_t r[2] = { m->base + blk * m->bs, count * m->bs };

		if (ioctl(m->fd, BLKZEROOUT, r) == 0)
			return 0;
	}
	while (count) {
		uint64_t n = count < per ? count : per;
		int err = wr(m, blk, zero, (size_t)(n * m->bs));

		if (err)
			return err;
		blk += n;
		count -= n;
	}
	return 0;
}

static void put16(void *p, uint16_t v) { v = cpu_to_le16(v); memcpy(p, &v, 2); }
static void put32(void *p, uint32_t v) { v = cpu_to_le32(v); memcpy(p, &v, 4); }

static uint32_t inode_seed(const struct mk *m, uint32_t ino, uint32_t gen)
{
	uint32_t le = cpu_to_le32(ino), lg = cpu_to_le32(gen);

	return crc32c(crc32c(m->csum_seed, &le, 4), &lg, 4);
}

/* ------------------------------------------------------------ geometry */

static int parse_type(const char *t)
{
	if (!t || !strcmp(t, "ext4"))
		return 4;
	if (!strcmp(t, "ext3"))
		return 3;
	if (!strcmp(t, "ext2"))
		return 2;
	return 0;
}

/* mke2fs.conf's size types: block size and inode ratio by size. */
static void size_type(uint64_t bytes, uint32_t *bs, uint32_t *ratio)
{
	const uint64_t mib = 1024 * 1024;

	if (bytes < 3 * mib) {
		*bs = 1024, *ratio = 8192;          /* floppy */
	} else if (bytes < 512 * mib) {
		*bs = 1024, *ratio = 4096;          /* small */
	} else if (bytes < 4 * 1024 * 1024 * mib) {
		*bs = 4096, *ratio = 16384;         /* default */
	} else if (bytes < 16 * 1024 * 1024 * mib) {
		*bs = 4096, *ratio = 32768;         /* big */
	} else {
		*bs = 4096, *ratio = 65536;         /* huge */
	}
}

static uint64_t div_ceil(uint64_t a, uint64_t b)
{
	return (a + b - 1) / b;
}

/* calc_reserved_gdt_blocks(): room to grow to 1024 times the size (or
 * 2^32 blocks). */
static uint32_t reserved_gdt(const struct mk *m)
{
	uint64_t max_blocks = 0xffffffffu;
	uint32_t gdpb = m->bs / m->desc_size;
	uint64_t rsv_groups, rsv;

	if (m->blocks < max_blocks / 1024)
		max_blocks = m->blocks * 1024;
	rsv_groups = div_ceil(max_blocks - m->first_data, m->bpg);
	rsv = div_ceil(rsv_groups, gdpb);
	/* unsigned in mke2fs: fewer than the descriptor blocks wraps to a
	 * huge count, capped at a block of addresses */
	rsv = rsv >= m->desc_blocks ? rsv - m->desc_blocks : m->apb;
	return rsv > m->apb ? m->apb : (uint32_t)rsv;
}

/* ext2fs_default_journal_size() of 1.47.0, in blocks. */
static uint32_t default_journal_blocks(uint64_t blocks)
{
	if (blocks < 2048)
		return 0;
	if (blocks < 32768)
		return 1024;
	if (blocks < 256 * 1024)
		return 4096;
	if (blocks < 512 * 1024)
		return 8192;
	if (blocks < 4096 * 1024)
		return 16384;
	if (blocks < 8192 * 1024)
		return 32768;
	if (blocks < 16384 * 1024)
		return 65536;
	if (blocks < 32768 * 1024)
		return 131072;
	return 262144;
}

/* ext2fs_default_orphan_file_blocks() of 1.47.0. */
static uint32_t default_orphan_blocks(uint64_t blocks)
{
	if (blocks < 128 * 1024)
		return 32;
	if (blocks < 2 * 1024 * 1024)
		return (uint32_t)(blocks / 4096);
	return 512;
}

/* Features: type defaults, -O, then the rules mke2fs applies. */
/* -O quota, project, -E quotatype=: which quota files, and the numbers
 * of the inodes after lost+found (mke2fs makes the project quota file
 * before the orphan file). */
static void setup_quota(struct mk *m)
{
	uint32_t next = MK_LPF_INO + 1;

	/* As mke2fs 1.47: prjquota turns project on; the types count only
	 * with the quota feature. */
	if (m->o->quota_types & UEXT4_MKFS_QUOTA_PRJ)
		m->ft.f[2] |= EXT4_FEATURE_RO_COMPAT_PROJECT;
	if (HAS_RO(m, QUOTA))
		m->qtypes = m->o->quota_types ? m->o->quota_types
					      : UEXT4_MKFS_QUOTA_USR | UEXT4_MKFS_QUOTA_GRP |
						(HAS_RO(m, PROJECT) ? UEXT4_MKFS_QUOTA_PRJ : 0);
	m->prj_ino = m->qtypes & UEXT4_MKFS_QUOTA_PRJ ? next++ : 0;
	m->orphan_ino = HAS_COMPAT(m, ORPHAN_FILE) ? next++ : 0;
	m->last_used_ino = next - 1;
}

static int setup_features(struct mk *m, int type)
{
	struct feats asked = { { 0, 0, 0 } };
	int err;

	type_defaults(type, &m->ft);
	if (m->o->features && (err = apply_feature_list(m->o->features, &m->ft, &asked)))
		return err;
	if (HAS_INCOMPAT(m, JOURNAL_DEV)) {
		/* As mke2fs: a journal device keeps only metadata_csum. */
		m->ft.f[0] = 0;
		m->ft.f[1] = EXT4_FEATURE_INCOMPAT_JOURNAL_DEV;
		m->ft.f[2] &= EXT4_FEATURE_RO_COMPAT_METADATA_CSUM;
		m->csum = HAS_RO(m, METADATA_CSUM);
		return m->o->journal_device ? fs_err(EINVAL, "-O journal_dev makes a journal "
						     "device: it cannot use -J device=") : 0;
	}
	if (m->o->journal_device && !HAS_COMPAT(m, HAS_JOURNAL))
		return fs_err(EINVAL, "-J device=%s needs has_journal", m->o->journal_device);
	if (HAS_INCOMPAT(m, 64BIT) && !HAS_INCOMPAT(m, EXTENTS))
		return fs_err(EINVAL, "extents must be enabled for a 64-bit file system (as "
			      "mke2fs): add -O extent or -O ^64bit");
	if (HAS_RO(m, METADATA_CSUM) && HAS_RO(m, GDT_CSUM)) {
		/* metadata_csum supersedes uninit_bg, as in mke2fs */
		m->ft.f[2] &= ~EXT4_FEATURE_RO_COMPAT_GDT_CSUM;
	}
	if (HAS_INCOMPAT(m, CSUM_SEED) && !HAS_RO(m, METADATA_CSUM)) {
		if (asked.f[1] & EXT4_FEATURE_INCOMPAT_CSUM_SEED)
			return fs_err(EINVAL, "the metadata_csum_seed feature needs metadata_csum");
		m->ft.f[1] &= ~EXT4_FEATURE_INCOMPAT_CSUM_SEED;
	}
	if (HAS_COMPAT(m, ORPHAN_FILE) && !HAS_COMPAT(m, HAS_JOURNAL)) {
		if (asked.f[0] & EXT4_FEATURE_COMPAT_ORPHAN_FILE)
			return fs_err(EINVAL, "the orphan_file feature needs a journal (has_journal)");
		m->ft.f[0] &= ~EXT4_FEATURE_COMPAT_ORPHAN_FILE;
	}
	/* -E encoding= turns casefold on, as mke2fs; flags need it. */
	if (m->o->encoding)
		m->ft.f[1] |= EXT4_FEATURE_INCOMPAT_CASEFOLD;
	if (HAS_RO(m, PROJECT) && m->inode_size == EXT4_GOOD_OLD_INODE_SIZE)
		return fs_err(EINVAL, "-I 128: 128-byte inodes are too small for project ids "
			      "(-O project), as mke2fs says");
	if (m->o->encoding_flags && !HAS_INCOMPAT(m, CASEFOLD))
		return fs_err(EINVAL, "-E encoding_flags= needs casefold (-O casefold or "
			      "-E encoding=)");
	if (HAS_COMPAT(m, RESIZE_INODE) && !HAS_RO(m, SPARSE_SUPER))
		return fs_err(EINVAL, "reserved online resize blocks are not supported on a "
			      "non-sparse file system (as mke2fs): add -O ^resize_inode");
	if (HAS_INCOMPAT(m, META_BG) && HAS_COMPAT(m, RESIZE_INODE))
		return fs_err(EINVAL, "the resize_inode and meta_bg features are not compatible "
			      "(as mke2fs): add -O ^resize_inode");
	m->csum = HAS_RO(m, METADATA_CSUM);
	m->gdt_csum = HAS_RO(m, GDT_CSUM);
	m->extents = HAS_INCOMPAT(m, EXTENTS);
	return 0;
}

/* sparse_super2's backup groups as asked (-E num_backup_sb=, 2 by
 * default): group 1 and the last group (~0 until the count is known). */
static void asked_backup_bgs(const struct mk *m, uint32_t bgs[2])
{
	uint32_t n = m->o->num_backup_sb_set ? m->o->num_backup_sb : 2;

	bgs[0] = n >= 1 ? 1 : 0;
	bgs[1] = n >= 2 ? UINT32_MAX : 0;
}

/* Does the last group hold a backup (ext2fs_initialize()'s test, made
 * before s_backup_bgs is settled)? */
static int last_group_has_backup(const struct mk *m)
{
	uint32_t bgs[2];

	if (!HAS_COMPAT(m, SPARSE_SUPER2))
		return group_has_super(m, m->ngroups - 1);
	asked_backup_bgs(m, bgs);
	return m->ngroups == 2 ? bgs[0] != 0 : bgs[1] != 0;
}

/* s_backup_bgs as ext2fs_initialize() settles them: clamped to the last
 * group, no duplicate, in ascending order (a single backup in [1]). */
static void settle_backup_bgs(struct mk *m)
{
	uint32_t *b = m->backup_bgs;

	if (!HAS_COMPAT(m, SPARSE_SUPER2))
		return;
	asked_backup_bgs(m, b);
	for (int i = 0; i < 2; i++)
		if (b[i] >= m->ngroups)
			b[i] = m->ngroups - 1;
	if (b[0] == b[1])
		b[1] = 0;
	if (b[0] > b[1]) {
		uint32_t t = b[0];

		b[0] = b[1];
		b[1] = t;
	}
}

/* Inode count and per-group geometry, as ext2fs_initialize(): may shrink
 * blocks_per_group (too many inodes per group) or drop a last group too
 * small for its tables. */
static int setup_groups(struct mk *m, uint64_t want_inodes, double reserved_ratio)
{
	uint64_t orig_blocks = m->blocks;

	/* EXT2_MAX_BLOCKS_PER_GROUP: 65528 for blocks over 8 KiB; with
	 * bigalloc the same bound holds clusters per group */
	m->cpg = m->bs * 8 < 65528 ? m->bs * 8 : 65528;
	m->bpg = m->cpg << m->cbits;
retry:
	m->ngroups = (uint32_t)div_ceil(m->blocks - m->first_data, m->bpg);
	if (m->ngroups == 0)
		return fs_err(EINVAL, "the file system is too small (%llu blocks)",
			      (unsigned long long)m->blocks);
	m->desc_blocks = (uint32_t)div_ceil(m->ngroups, m->bs / m->desc_size);
	{
		uint64_t inodes = want_inodes < MK_FIRST_INO + 1 ? MK_FIRST_INO + 1 : want_inodes;
		uint64_t ipg = div_ceil(inodes, m->ngroups);
		uint32_t ipb = m->bs / m->inode_size;

		if (ipg > m->bs * 8) {
			if (m->cpg >= 256) {
				m->cpg -= 8;
				m->bpg = m->cpg << m->cbits;
				m->blocks = orig_blocks;
				goto retry;
			}
			return fs_err(EINVAL, "too many inodes (%llu) for the file system",
				      (unsigned long long)inodes);
		}
		if (ipg > 65536u - ipb)
			ipg = 65536u - ipb;
		for (;;) {
			uint64_t itb = div_ceil(ipg * m->inode_size, m->bs);
			uint64_t p = itb * m->bs / m->inode_size;

			if (p < 8)
				p = 8;
			p &= ~7ull;
			if (p * m->ngroups > 0xffffffffull) {
				ipg--;
				continue;
			}
			m->ipg = (uint32_t)p;
			m->itb = (uint32_t)div_ceil(p * m->inode_size, m->bs);
			break;
		}
		m->inodes_count = m->ipg * m->ngroups;
	}
	m->rsv_gdt = HAS_COMPAT(m, RESIZE_INODE) ? reserved_gdt(m) : 0;
	if (m->rsv_gdt + m->desc_blocks > m->bpg * 3 / 4) {
		/* as ext2fs_initialize(): descriptors that would take more
		 * than 3/4 of a group go into meta groups */
		m->ft.f[1] |= EXT4_FEATURE_INCOMPAT_META_BG;
		m->ft.f[0] &= ~EXT4_FEATURE_COMPAT_RESIZE_INODE;
		m->rsv_gdt = 0;
	}
	if (3 + m->itb + m->rsv_gdt + (HAS_INCOMPAT(m, META_BG) ? 1 : m->desc_blocks) > m->bpg)
		return fs_err(EINVAL, "too many inodes: %u inode-table blocks per group do not fit "
			      "in a group of %u blocks", m->itb, m->bpg);
	{
		uint64_t overhead = 2 + m->itb;
		uint64_t rem = (m->blocks - m->first_data) % m->bpg;

		/* whether the last group has a backup; mke2fs counts the whole
		 * descriptor table there even with meta_bg */
		if (last_group_has_backup(m))
			overhead += 1 + m->desc_blocks + m->rsv_gdt;
		if (m->ngroups == 1 && rem && rem < overhead)
			return fs_err(EINVAL, "the file system is too small (%llu blocks) for its "
				      "metadata", (unsigned long long)m->blocks);
		if (rem && rem < overhead + 50) {
			m->blocks -= rem;
			m->r_blocks = (uint64_t)(reserved_ratio * (double)m->blocks / 100.0);
			goto retry;
		}
	}
	settle_backup_bgs(m);
	return 0;
}

/* Block size, inode ratio and inode size: by the size type unless given. */
static int setup_sizes(struct mk *m, uint64_t bytes, uint32_t *ratio)
{
	const struct uext4_mkfs_opts *o = m->o;
	uint32_t bs;

	size_type(bytes, &bs, ratio);
	if (o->block_size) {
		if (o->block_size < 1024 || o->block_size > EXT4_MAX_BLOCK_SIZE ||
		    (o->block_size & (o->block_size - 1)))
			return fs_err(EINVAL, "-b %u: block size must be a power of 2 from 1024 to "
				      "65536", o->block_size);
		bs = o->block_size;
	}
	if (m->jdev.bs && !o->block_size)
		bs = m->jdev.bs;    /* as mke2fs: the journal device's */
	if (m->jdev.bs && bs != m->jdev.bs)
		return fs_err(EINVAL, "-b %u differs from the journal device's block size %u",
			      bs, m->jdev.bs);
	if (o->inode_ratio) {
		if (o->inode_ratio < 1024 || o->inode_ratio > 64 * 1024 * 1024)
			return fs_err(EINVAL, "-i %u: bytes per inode must be 1024 to 67108864",
				      o->inode_ratio);
		*ratio = o->inode_ratio;
	}
	if (*ratio < bs)
		*ratio = bs;
	m->inode_size = o->inode_size ? o->inode_size : 256;
	if (m->inode_size < 128 || m->inode_size > bs || (m->inode_size & (m->inode_size - 1)))
		return fs_err(EINVAL, "-I %u: inode size must be a power of 2 from 128 to the block "
			      "size", m->inode_size);
	m->bs = bs;
	m->log_bs = (uint32_t)__builtin_ctz(bs) - 10;
	m->apb = bs / 4;
	m->first_data = bs == 1024 ? 1 : 0;
	m->blocks = bytes / bs;
	/* mke2fs rounds the size down to whole pages; 4 KiB here whatever the
	 * host's page size, so that the image does not depend on the host
	 * (blocks of a page or more are whole pages already) */
	if (bs < 4096)
		m->blocks &= ~(uint64_t)(4096 / bs - 1);
	if (m->blocks < 64)
		return fs_err(EINVAL, "%llu bytes is too small for a file system (at least 64 "
			      "blocks of %u bytes)", (unsigned long long)bytes, bs);
	return 0;
}

/* Reserved blocks (-m) and the inode count (-N, or by the ratio). */
static int setup_counts(struct mk *m, uint32_t ratio, uint64_t *inodes, double *reserved)
{
	const struct uext4_mkfs_opts *o = m->o;

	if (m->blocks > 0xffffffffull && !HAS_INCOMPAT(m, 64BIT))
		return fs_err(EINVAL, "%llu blocks need the 64bit feature",
			      (unsigned long long)m->blocks);
	if (m->blocks > (1ull << 48))
		return fs_err(EINVAL, "%llu blocks is beyond ext4's 2^48", (unsigned long long)m->blocks);
	*reserved = o->reserved_set ? o->reserved_percent : 5.0;
	if (*reserved < 0 || *reserved > 50)
		return fs_err(EINVAL, "-m %g: the reserved percentage must be 0 to 50", *reserved);
	m->r_blocks = (uint64_t)(*reserved * (double)m->blocks / 100.0);
	/* the ratio mke2fs keeps when it drops a too-small last group */
	*reserved = 100.0 * (double)m->r_blocks / (double)m->blocks;
	*inodes = o->inodes ? o->inodes : m->blocks * m->bs / ratio;
	if (*inodes > 0xffffffffull) {
		if (o->inodes || !HAS_INCOMPAT(m, 64BIT))
			return fs_err(EINVAL, "%llu inodes: at most 2^32-1", (unsigned long long)*inodes);
		*inodes = 0xffffffffull;
	}
	if (*inodes * m->inode_size >= m->blocks * m->bs)
		return fs_err(EINVAL, "-N %llu: too many inodes for %llu blocks",
			      (unsigned long long)*inodes, (unsigned long long)m->blocks);
	return 0;
}

static int setup_flex(struct mk *m)
{
	uint32_t f = m->o->flex_bg_size ? m->o->flex_bg_size : 16;

	m->flex = 0;
	if (!HAS_INCOMPAT(m, FLEX_BG))
		return 0;
	if (f & (f - 1) || f > (1u << 31))
		return fs_err(EINVAL, "-G %u: the flex_bg size must be a power of 2", f);
	m->flex = f;
	m->log_flex = (uint32_t)__builtin_ctz(f);
	return 0;
}

/* Journal (-J size=, or mke2fs's table; none when the file system is too
 * small for one, as mke2fs) and orphan file sizes. */
static int setup_journal(struct mk *m)
{
	const struct uext4_mkfs_opts *o = m->o;

	if (HAS_COMPAT(m, HAS_JOURNAL) && !o->journal_device) {
		uint64_t j = o->journal_mib ? (uint64_t)o->journal_mib * 1024 * 1024 / m->bs
					    : default_journal_blocks(m->blocks);
		/* fast_commit: -J fast_commit_size= KiB, else 1/64 of the
		 * default journal (ext2fs_get_journal_params()), even when
		 * -J size= is given, as mke2fs */
		uint64_t fc = !HAS_COMPAT(m, FAST_COMMIT) ? 0
			    : o->fast_commit_kib ? (uint64_t)o->fast_commit_kib * 1024 / m->bs
			    : default_journal_blocks(m->blocks) / 64;

		if (!o->journal_mib && !default_journal_blocks(m->blocks)) {
			m->ft.f[0] &= ~(EXT4_FEATURE_COMPAT_HAS_JOURNAL | EXT4_FEATURE_COMPAT_ORPHAN_FILE);
			return 0;
		}
		if (j < 1024 || j + fc > 10240000)
			return fs_err(EINVAL, "the journal must have 1024 to 10240000 blocks (%llu "
				      "asked, %llu of them for fast commits)",
				      (unsigned long long)(j + fc), (unsigned long long)fc);
		if (j + fc > m->blocks / 2)
			return fs_err(EINVAL, "the journal (%llu blocks) is too big for a file "
				      "system of %llu blocks", (unsigned long long)(j + fc),
				      (unsigned long long)m->blocks);
		m->journal_blocks = (uint32_t)j;
		m->fc_blocks = (uint32_t)fc;
	}
	if (HAS_COMPAT(m, ORPHAN_FILE)) {
		uint64_t ob = o->orphan_file_blocks ? o->orphan_file_blocks
			    : o->orphan_file_size ? div_ceil(o->orphan_file_size, m->bs)
			    : default_orphan_blocks(m->blocks);

		if (ob * m->bs > 8 * 1024 * 1024)   /* the kernel's limit */
			ob = 8 * 1024 * 1024 / m->bs;
		m->orphan_blocks = ob ? (uint32_t)ob : 1;
	}
	return 0;
}

/* -O bigalloc, -C: the cluster size (16 blocks by default, as mke2fs);
 * block 0 is then group 0's first whatever the block size. */
static int setup_cluster(struct mk *m, uint32_t *ratio)
{
	uint32_t cs = m->o->cluster_size;

	if (!HAS_RO(m, BIGALLOC)) {
		if (cs && cs != m->bs)
			return fs_err(EINVAL, "-C %u: a cluster size needs -O bigalloc", cs);
		return 0;
	}
	if (!m->extents)
		return fs_err(EINVAL, "bigalloc needs extents (as mke2fs): add -O extent");
	if (!cs)
		cs = m->bs * 16;
	if (cs < m->bs || (cs & (cs - 1)) || cs / m->bs > (1u << 16))
		return fs_err(EINVAL, "-C %u: the cluster size must be a power of 2 from the block "
			      "size (%u) to 2^16 blocks", cs, m->bs);
	m->cbits = (uint32_t)__builtin_ctz(cs / m->bs);
	if (*ratio < cs)
		*ratio = cs;    /* at most an inode per cluster, as mke2fs */
	m->first_data = 0;
	m->sb0_shift = m->bs == 1024;
	m->blocks &= ~cl_mask(m);
	if (m->blocks < 64 || m->blocks >> m->cbits < 8)
		return fs_err(EINVAL, "the file system is too small for clusters of %u bytes", cs);
	return 0;
}

static int setup_geometry(struct mk *m, uint64_t bytes)
{
	int type = parse_type(m->o->fs_type);
	uint32_t ratio = 0;
	uint64_t inodes = 0;
	double reserved = 0;
	int err;

	if (!type)
		return fs_err(EINVAL, "-t %s: unknown file system type (ext2, ext3 or ext4)",
			      m->o->fs_type);
	if ((err = setup_sizes(m, bytes, &ratio)) || (err = setup_features(m, type)) ||
	    (err = setup_cluster(m, &ratio)))
		return err;
	if (HAS_INCOMPAT(m, JOURNAL_DEV)) {
		m->bpg = m->bs * 8;   /* no groups, no inodes: only the counts shown */
		return 0;
	}
	m->desc_size = HAS_INCOMPAT(m, 64BIT) ? EXT4_MIN_DESC_SIZE_64BIT : EXT4_MIN_DESC_SIZE;
	/* as mke2fs past 2^32 - 1 blocks; below that a resize inode with no
	 * reserved GDT block is made when none is needed (64 KiB blocks) */
	if (m->blocks > 0xffffffffull)
		m->ft.f[0] &= ~EXT4_FEATURE_COMPAT_RESIZE_INODE;
	if ((err = setup_counts(m, ratio, &inodes, &reserved)) ||
	    (err = setup_groups(m, inodes, reserved)))
		return err;
	if ((err = setup_flex(m)) || (err = setup_journal(m)))
		return err;
	setup_quota(m);   /* after the journal's setup, which may drop orphan_file */
	if (m->inodes_count < (m->last_used_ino > MK_FIRST_INO ? m->last_used_ino : MK_FIRST_INO + 1))
		return fs_err(EINVAL, "the file system is too small: %u inodes fit, fewer than "
			      "the reserved ones, root and lost+found (use a larger size or -N)",
			      m->inodes_count);
	return 0;
}

/* ------------------------------------------------------------ tables */

/* Bitmaps and inode tables of every group: with flex_bg packed at the
 * start of each flex group (block bitmaps, inode bitmaps, inode tables),
 * as ext2fs_allocate_group_table() places them; else in each group. */
static int place_tables(struct mk *m)
{
	for (uint32_t g = 0; g < m->ngroups; g++) {
		uint64_t gb, ib, it;
		int err;

		if (m->flex) {
			uint32_t fg0 = g & ~(m->flex - 1);
			uint32_t last = (g | (m->flex - 1)) < m->ngroups ? (g | (m->flex - 1))
									 : m->ngroups - 1;
			/* room left for each kind of table: the flex group's size,
			 * or in the last one the groups it has (alloc_tables.c
			 * takes a full flex group when that is one group) */
			uint32_t slots = (last & (m->flex - 1)) ? last - fg0 + 1 : m->flex;

			if (g == fg0) {
				gb = group_first(m, fg0);
				ib = 0, it = 0;
			} else {
				gb = m->bb[g - 1] + 1;
			}
			if ((err = alloc_contig(m, gb, 1, g, &m->bb[g])))
				return err;
			ib = g == fg0 ? m->bb[g] + slots : m->ib[g - 1] + 1;
			if ((err = alloc_contig(m, ib, 1, g, &m->ib[g])))
				return err;
			it = g == fg0 ? m->ib[g] + slots : m->it[g - 1] + m->itb;
			if ((err = alloc_contig(m, it, m->itb, g, &m->it[g])))
				return err;
		} else {
			gb = group_first(m, g);
			if ((err = alloc_contig(m, gb, 1, g, &m->bb[g])) ||
			    (err = alloc_contig(m, m->bb[g] + 1, 1, g, &m->ib[g])) ||
			    (err = alloc_contig(m, m->ib[g] + 1, m->itb, g, &m->it[g])))
				return err;
			if (group_of(m, m->it[g] + m->itb - 1) != g)
				return fs_err(ENOSPC, "mkfs: group %u has no room for its inode table", g);
		}
	}
	return 0;
}

static uint32_t group_used_clusters(const struct mk *m, uint32_t g)
{
	uint64_t gs = group_first(m, g), ge = gs + group_size(m, g);
	uint64_t last = UINT64_MAX, used = 0;   /* last cluster counted */

	if (backup_len(m, g)) {
		last = (gs + backup_len(m, g) - 1) >> m->cbits;
		used = last - (gs >> m->cbits) + 1;
	}
	for (size_t i = run_search(m, gs); i < m->nruns && m->runs[i].start < ge; i++) {
		uint64_t a = m->runs[i].start > gs ? m->runs[i].start : gs;
		uint64_t b = m->runs[i].start + m->runs[i].len;
		uint64_t ca = a >> m->cbits, cb = ((b < ge ? b : ge) - 1) >> m->cbits;

		if (last != UINT64_MAX && ca <= last)
			ca = last + 1;
		if (ca <= cb)
			used += cb - ca + 1;
		if (last == UINT64_MAX || cb > last)
			last = cb;
	}
	return (uint32_t)used;
}

/* Free blocks of group g; with bigalloc free clusters (the descriptor's
 * unit). */
static uint32_t group_free(const struct mk *m, uint32_t g)
{
	if (m->cbits)
		return (uint32_t)(cl_round_up(m, group_size(m, g)) >> m->cbits) -
		       group_used_clusters(m, g);
	return (uint32_t)(group_size(m, g) - backup_len(m, g) - m->gused[g]);
}

/* get_midpoint_journal_block() of mkjournal.c: a group near the middle
 * with the most free blocks. */
static uint64_t journal_goal(const struct mk *m)
{
	uint32_t g = group_of(m, (m->blocks - m->first_data) / 2);
	uint32_t start, end, best;

	if (m->log_flex && g > m->flex) {
		g &= ~(m->flex - 1);
		while (g < m->ngroups && group_free(m, g) == 0)
			g++;
		if (g == m->ngroups)
			g = 0;
		start = g;
	} else {
		start = g > 0 ? g - 1 : g;
	}
	end = g + 1 < m->ngroups ? g + 1 : g;
	best = start;
	for (uint32_t i = start + 1; i <= end; i++)
		if (group_free(m, i) > group_free(m, best))
			best = i;
	return group_first(m, best);
}

/* ------------------------------------------------------------ inodes */

static void inode_init(const struct mk *m, struct ext4_inode *in, uint16_t mode, uint16_t links)
{
	bool large = m->inode_size > EXT4_GOOD_OLD_INODE_SIZE;
	struct timespec now = ext4_time_fit((struct timespec){.tv_sec = (time_t)m->now}, large);
	uint32_t t = (uint32_t)now.tv_sec;
	/* Epoch bits: how many 2^32 s past the signed 32-bit range. */
	uint32_t extra = (uint32_t)((now.tv_sec - (int64_t)(int32_t)now.tv_sec) >> 32) &
			 EXT4_EPOCH_MASK;

	memset(in, 0, sizeof(*in));
	in->i_mode = cpu_to_le16(mode);
	in->i_links_count = cpu_to_le16(links);
	in->i_atime = in->i_ctime = in->i_mtime = cpu_to_le32(t);
	if (large) {
		in->i_extra_isize = cpu_to_le16(LARGE_INODE_EXTRA);
		in->i_crtime = cpu_to_le32(t);
		in->i_atime_extra = in->i_ctime_extra = in->i_mtime_extra =
			in->i_crtime_extra = cpu_to_le32(extra);
	}
}

static void inode_set_size(struct ext4_inode *in, uint64_t size, uint64_t blocks512)
{
	in->i_size_lo = cpu_to_le32((uint32_t)size);
	in->i_size_high = cpu_to_le32((uint32_t)(size >> 32));
	in->i_blocks_lo = cpu_to_le32((uint32_t)blocks512);
	in->i_blocks_high = cpu_to_le16((uint16_t)(blocks512 >> 32));
}

static int wr_bytes(struct mk *m, uint64_t pos, const void *buf, size_t len);

/* Checksum an inode (inode_size bytes at raw) and write it in place. */
static int write_inode(struct mk *m, uint32_t ino, uint8_t *raw)
{
	uint32_t g = (ino - 1) / m->ipg, idx = (ino - 1) % m->ipg;
	uint64_t off = (uint64_t)idx * m->inode_size;
	struct ext4_inode *in = (struct ext4_inode *)raw;
	uint64_t pos;

	if (m->csum) {
		uint32_t c;

		in->i_checksum_lo = 0;
		if (m->inode_size > EXT4_GOOD_OLD_INODE_SIZE)
			in->i_checksum_hi = 0;
		c = crc32c(inode_seed(m, ino, le32(in->i_generation)), raw, m->inode_size);
		in->i_checksum_lo = cpu_to_le16((uint16_t)c);
		if (m->inode_size > EXT4_GOOD_OLD_INODE_SIZE)
			in->i_checksum_hi = cpu_to_le16((uint16_t)(c >> 16));
	}
	pos = m->it[g] * m->bs + off;
	return wr_bytes(m, pos, raw, m->inode_size);
}

/* i_block of an extent-mapped file: the extents in the inode, or one level
 * of leaf blocks (allocated and written here). */
static int map_extents(struct mk *m, uint32_t ino, struct ext4_inode *in, const struct fmap *f,
		       uint64_t *meta_blocks)
{
	size_t next = 0;
	struct ext4_extent ext[4096];
	uint32_t lblk = 0;
	size_t leaf_max = (m->bs - sizeof(struct ext4_extent_header) -
			   (m->csum ? sizeof(struct ext4_extent_tail) : 0)) /
			  sizeof(struct ext4_extent);
	struct ext4_extent_header *eh = (struct ext4_extent_header *)in->i_block;
	size_t n = 0;

	for (size_t i = 0; i < f->n; i++)
		for (uint64_t done = 0; done < f->r[i].len;) {
			uint64_t len = f->r[i].len - done;
			uint64_t pb = f->r[i].start + done;

			if (len > MK_MAX_EXTENT_LEN)
				len = MK_MAX_EXTENT_LEN;
			if (n == sizeof(ext) / sizeof(ext[0]))
				return fs_err(EFBIG, "mkfs: inode %u needs too many extents", ino);
			ext[n].ee_block = cpu_to_le32(lblk);
			ext[n].ee_len = cpu_to_le16((uint16_t)len);
			ext[n].ee_start_hi = cpu_to_le16((uint16_t)(pb >> 32));
			ext[n].ee_start_lo = cpu_to_le32((uint32_t)pb);
			n++;
			lblk += (uint32_t)len;
			done += len;
		}
	eh->eh_magic = cpu_to_le16(EXT4_EXT_MAGIC);
	eh->eh_max = cpu_to_le16(4);
	*meta_blocks = 0;
	if (n <= 4) {
		eh->eh_entries = cpu_to_le16((uint16_t)n);
		memcpy(eh + 1, ext, n * sizeof(ext[0]));
		return 0;
	}
	{
		size_t leaves = div_ceil(n, leaf_max);
		struct ext4_extent_idx *idx = (struct ext4_extent_idx *)(eh + 1);
		uint8_t *blk;
		uint64_t lb;
		int err;

		if (leaves > 4)
			return fs_err(EFBIG, "mkfs: inode %u needs %zu extents", ino, n);
		if ((err = alloc_contig(m, f->r[f->n - 1].start + f->r[f->n - 1].len, leaves,
					UINT32_MAX, &lb)))
			return err;
		if (!(blk = calloc(1, m->bs)))
			return fs_err(ENOMEM, "mkfs: out of memory");
		eh->eh_entries = cpu_to_le16((uint16_t)leaves);
		eh->eh_depth = cpu_to_le16(1);
		for (size_t l = 0; l < leaves && !err; l++, next += leaf_max) {
			struct ext4_extent_header *lh = (struct ext4_extent_header *)blk;
			size_t cnt = n - next < leaf_max ? n - next : leaf_max;

			memset(blk, 0, m->bs);
			lh->eh_magic = cpu_to_le16(EXT4_EXT_MAGIC);
			lh->eh_entries = cpu_to_le16((uint16_t)cnt);
			lh->eh_max = cpu_to_le16((uint16_t)leaf_max);
			memcpy(lh + 1, &ext[next], cnt * sizeof(ext[0]));
			if (m->csum) {
				size_t tail = sizeof(*lh) + leaf_max * sizeof(ext[0]);

				put32(blk + tail, crc32c(inode_seed(m, ino, le32(in->i_generation)),
							 blk, tail));
			}
			idx[l].ei_block = ext[next].ee_block;
			idx[l].ei_leaf_lo = cpu_to_le32((uint32_t)(lb + l));
			idx[l].ei_leaf_hi = cpu_to_le16((uint16_t)((lb + l) >> 32));
			err = wr(m, lb + l, blk, m->bs);
		}
		free(blk);
		*meta_blocks = leaves;
		return err;
	}
}

/* Logical block i of f's physical block. */
static uint64_t fmap_block(const struct fmap *f, uint64_t i)
{
	for (size_t r = 0; r < f->n; r++) {
		if (i < f->r[r].len)
			return f->r[r].start + i;
		i -= f->r[r].len;
	}
	return 0;
}

/* One indirect block at level (1 = IND) mapping logical blocks from *next;
 * allocated at *meta (advancing it). */
static int write_indirect(struct mk *m, const struct fmap *f, int level, uint64_t *next,
			  uint64_t *meta, uint32_t *out)
{
	uint32_t *blk = calloc(1, m->bs);
	uint64_t me = (*meta)++;
	int err = 0;

	if (!blk)
		return fs_err(ENOMEM, "mkfs: out of memory");
	for (uint32_t i = 0; i < m->apb && *next < f->blocks && !err; i++) {
		if (level == 1) {
			blk[i] = cpu_to_le32((uint32_t)fmap_block(f, (*next)++));
		} else {
			uint32_t child;

			err = write_indirect(m, f, level - 1, next, meta, &child);
			blk[i] = cpu_to_le32(child);
		}
	}
	if (!err)
		err = wr(m, me, blk, m->bs);
	free(blk);
	*out = (uint32_t)me;
	return err;
}

static uint64_t indirect_count(const struct mk *m, uint64_t n)
{
	uint64_t a = m->apb, c = 0;

	if (n <= EXT4_NDIR_BLOCKS)
		return 0;
	n -= EXT4_NDIR_BLOCKS;
	c += 1;                                 /* IND */
	if (n <= a)
		return c;
	n -= a;
	if (n <= a * a)
		return c + 1 + div_ceil(n, a);      /* DIND + its INDs */
	c += 1 + a;
	n -= a * a;
	return c + 1 + div_ceil(n, a * a) + div_ceil(n, a);
}

/* i_block of a block-mapped file: direct blocks and indirect trees, the
 * indirect blocks allocated as one run after the data. */
static int map_indirect(struct mk *m, struct ext4_inode *in, const struct fmap *f,
			uint64_t *meta_blocks)
{
	uint64_t count = indirect_count(m, f->blocks), meta, next = 0;
	int err;

	for (uint32_t i = 0; i < EXT4_NDIR_BLOCKS && next < f->blocks; i++)
		in->i_block[i] = cpu_to_le32((uint32_t)fmap_block(f, next++));
	*meta_blocks = count;
	if (!count)
		return 0;
	if ((err = alloc_contig(m, f->r[f->n - 1].start + f->r[f->n - 1].len, count, UINT32_MAX,
				&meta)))
		return err;
	for (int level = 1; level <= 3 && next < f->blocks; level++) {
		uint32_t top;

		if ((err = write_indirect(m, f, level, &next, &meta, &top)))
			return err;
		in->i_block[EXT4_IND_BLOCK + level - 1] = cpu_to_le32(top);
	}
	return 0;
}

/* Blocks a file of runs f and meta mapping blocks holds: with bigalloc
 * whole clusters (each run starts one; the mapping blocks take their own),
 * which is what i_blocks counts, as the kernel and e2fsck. */
static uint64_t mapped_clusters(const struct mk *m, const struct fmap *f, uint64_t meta)
{
	uint64_t n = cl_round_up(m, meta);

	for (size_t i = 0; i < f->n; i++)
		n += cl_round_up(m, f->r[i].len);
	return n;
}

/* Map f into inode in (extents or block map); i_blocks counts the mapping
 * blocks too. */
static int map_file(struct mk *m, uint32_t ino, struct ext4_inode *in, const struct fmap *f,
		    uint64_t size)
{
	uint64_t meta = 0;
	int err;

	if (m->extents) {
		in->i_flags |= cpu_to_le32(EXT4_EXTENTS_FL);
		err = map_extents(m, ino, in, f, &meta);
	} else {
		err = map_indirect(m, in, f, &meta);
	}
	inode_set_size(in, size, mapped_clusters(m, f, meta) * (m->bs / 512));
	return err;
}

/* ------------------------------------------------------------ directories */

/* rec_len on disk: a whole 64 KiB block is stored as 65535
 * (EXT4_MAX_REC_LEN), as the kernel's ext4_rec_len_to_disk() and
 * e2fsprogs write it. */
static uint16_t rec_len_disk(uint32_t len)
{
	return len >= 65536 ? 65535 : (uint16_t)len;
}

static uint8_t *dirent(uint8_t *p, uint32_t ino, uint32_t rec_len, const char *name, uint8_t ft)
{
	size_t len = strlen(name);

	put32(p, ino);
	put16(p + 4, rec_len_disk(rec_len));
	p[6] = (uint8_t)len;
	p[7] = ft;
	memcpy(p + 8, name, len);
	return p + rec_len;
}

/* The checksum tail of a directory leaf block (metadata_csum). */
static void dir_tail(const struct mk *m, uint8_t *blk, uint32_t ino)
{
	uint8_t *t = blk + m->bs - sizeof(struct ext4_dir_entry_tail);

	if (!m->csum)
		return;
	memset(t, 0, sizeof(struct ext4_dir_entry_tail));
	put16(t + 4, sizeof(struct ext4_dir_entry_tail));
	t[7] = EXT4_FT_DIR_CSUM;
	put32(t + 8, crc32c(inode_seed(m, ino, 0), blk, m->bs - sizeof(struct ext4_dir_entry_tail)));
}

static int make_dir(struct mk *m, uint32_t ino, uint32_t parent, uint16_t mode, uint16_t links,
		    uint32_t nblocks, const char *child, uint32_t child_ino, uint8_t *raw)
{
	struct ext4_inode *in = (struct ext4_inode *)raw;
	uint32_t room = m->bs - (m->csum ? sizeof(struct ext4_dir_entry_tail) : 0);
	uint8_t ftd = HAS_INCOMPAT(m, FILETYPE) ? EXT4_FT_DIR : 0;
	struct fmap f = { 0 };
	uint8_t *blk = calloc(1, m->bs);
	int err;

	if (!blk)
		return fs_err(ENOMEM, "mkfs: out of memory");
	err = alloc_file(m, group_first(m, 0), nblocks, &f);
	for (uint64_t i = 0; i < nblocks && !err; i++) {
		uint8_t *p = blk;

		memset(blk, 0, m->bs);
		if (i == 0) {
			p = dirent(p, ino, 12, ".", ftd);
			if (child) {
				p = dirent(p, parent, 12, "..", ftd);
				dirent(p, child_ino, room - 24, child, ftd);
			} else {
				dirent(p, parent, room - 12, "..", ftd);
			}
		} else {
			put16(p + 4, rec_len_disk(room));
		}
		dir_tail(m, blk, ino);
		err = wr(m, fmap_block(&f, i), blk, m->bs);
	}
	free(blk);
	if (!err) {
		inode_init(m, in, mode, links);
		err = map_file(m, ino, in, &f, (uint64_t)nblocks * m->bs);
	}
	free(f.r);
	return err;
}

/* lost+found: at least 16 KiB and 2 blocks, at most 12 blocks, as mke2fs. */
static uint32_t lpf_blocks(const struct mk *m)
{
	uint32_t n = 1, size = 0;

	for (uint32_t i = 1; i < EXT4_NDIR_BLOCKS; i++) {
		size += m->bs;
		if (size >= 16 * 1024 && size >= 2 * m->bs)
			break;
		n++;
	}
	return n;
}

static int make_root_and_lpf(struct mk *m)
{
	uint8_t *raw = m->ibuf;
	struct ext4_inode *in = (struct ext4_inode *)raw;
	int err;

	memset(raw, 0, m->inode_size);
	if ((err = make_dir(m, EXT4_ROOT_INO, EXT4_ROOT_INO, 040755, 3, 1, "lost+found",
			    MK_LPF_INO, raw)))
		return err;
	if (m->o->root_owner_set) {
		in->i_uid = cpu_to_le16((uint16_t)m->o->root_uid);
		in->i_uid_high = cpu_to_le16((uint16_t)(m->o->root_uid >> 16));
		in->i_gid = cpu_to_le16((uint16_t)m->o->root_gid);
		in->i_gid_high = cpu_to_le16((uint16_t)(m->o->root_gid >> 16));
	}
	if ((err = write_inode(m, EXT4_ROOT_INO, raw)))
		return err;
	memset(raw, 0, m->inode_size);
	if ((err = make_dir(m, MK_LPF_INO, EXT4_ROOT_INO, 040700, 2, lpf_blocks(m), NULL, 0, raw)))
		return err;
	return write_inode(m, MK_LPF_INO, raw);
}

/* ------------------------------------------------------------ resize inode */

/* The groups holding backups, ascending (ext2fs_list_backups()). */
static uint32_t next_backup(const struct mk *m, uint32_t *three, uint32_t *five, uint32_t *seven)
{
	uint32_t *min = three, ret;

	if (HAS_COMPAT(m, SPARSE_SUPER2)) {
		/* s_backup_bgs[0], then [1], skipping a 0 (no backup) */
		while (*three <= 2) {
			uint32_t b = m->backup_bgs[*three - 1];

			*three += 1;
			if (b)
				return b;
		}
		return m->ngroups;
	}
	if (!HAS_RO(m, SPARSE_SUPER)) {
		ret = *min;
		*min += 1;
		return ret;
	}
	if (*five < *min)
		min = five;
	if (*seven < *min)
		min = seven;
	ret = *min;
	*min *= (min == three ? 3 : min == five ? 5 : 7);
	return ret;
}

/* Inode 7: a double-indirect block whose entries are the primary reserved
 * GDT blocks, each of which lists its backups (res_gdt.c's layout). */
static int make_resize_inode(struct mk *m)
{
	uint8_t *raw = m->ibuf;
	struct ext4_inode *in = (struct ext4_inode *)raw;
	uint32_t *dind, *list;
	uint64_t dblk, nblocks = 1, size;
	uint64_t sb_blk = super_blk(m, 0);
	int err;

	memset(raw, 0, m->inode_size);
	inode_init(m, in, 0100600, 1);
	if (!HAS_COMPAT(m, RESIZE_INODE))
		return write_inode(m, EXT4_RESIZE_INO, raw);
	if ((err = alloc_contig(m, sb_blk + m->desc_blocks + m->rsv_gdt + 2 + m->itb, 1,
				UINT32_MAX, &dblk)))
		return err;
	dind = calloc(1, m->bs);
	list = calloc(1, m->bs);
	if (!dind || !list) {
		free(dind);
		free(list);
		return fs_err(ENOMEM, "mkfs: out of memory");
	}
	for (uint32_t r = 0; r < m->rsv_gdt && !err; r++) {
		uint64_t gdt_blk = sb_blk + 1 + m->desc_blocks + r;
		uint32_t three = 1, five = 5, seven = 7, g, last = 0;

		dind[(m->desc_blocks + r) % m->apb] = cpu_to_le32((uint32_t)gdt_blk);
		nblocks++;
		memset(list, 0, m->bs);
		while ((g = next_backup(m, &three, &five, &seven)) < m->ngroups) {
			list[last++] = cpu_to_le32((uint32_t)(gdt_blk - m->sb0_shift +
							      (uint64_t)g * m->bpg));
			nblocks++;
		}
		err = wr(m, gdt_blk, list, m->bs);
	}
	if (!err)
		err = wr(m, dblk, dind, m->bs);
	free(dind);
	free(list);
	if (err)
		return err;
	in->i_block[EXT4_DIND_BLOCK] = cpu_to_le32((uint32_t)dblk);
	size = ((uint64_t)m->apb * m->apb + m->apb + EXT4_NDIR_BLOCKS) * m->bs;
	/* bigalloc: e2fsck counts a cluster per block here */
	inode_set_size(in, size, (nblocks << m->cbits) * (m->bs / 512));
	return write_inode(m, EXT4_RESIZE_INO, raw);
}

/* ------------------------------------------------------------ journal */

static void jput32(void *p, uint32_t v)
{
	v = __builtin_bswap32(v);
	memcpy(p, &v, 4);
}

static int make_journal(struct mk *m, struct ext4_super_block *sb)
{
	uint8_t *raw = m->ibuf;
	struct ext4_inode *in = (struct ext4_inode *)raw;
	struct fmap f = { 0 };
	/* the log, then the fast-commit area (fast_commit) */
	uint32_t total = m->journal_blocks + m->fc_blocks;
	uint8_t *blk;
	int err;

	if (!HAS_COMPAT(m, HAS_JOURNAL))
		return 0;
	if (m->o->journal_device) {
		/* As ext2fs_add_journal_device(): no journal inode. */
		memcpy(sb->s_journal_uuid, m->jdev.uuid, 16);
		sb->s_journal_dev = cpu_to_le32(m->jdev.rdev);
		return 0;
	}
	memset(raw, 0, m->inode_size);
	inode_init(m, in, 0100600, 1);
	/* mke2fs puts an extent-mapped journal mid-disk, a block-mapped one
	 * from the start */
	if ((err = alloc_file(m, m->extents ? journal_goal(m) : m->first_data, total, &f)) ||
	    (err = map_file(m, EXT4_JOURNAL_INO, in, &f, (uint64_t)total * m->bs)))
		goto out;
	/* the journal's blocks (not its mapping blocks) count as overhead, as
	 * mke2fs counts them */
	m->overhead += cl_round_up(m, total) >> m->cbits;
	if (!m->zeroed)
		for (size_t i = 0; i < f.n && !err; i++)
			err = wr_zero(m, f.r[i].start, f.r[i].len);
	if (err || !(blk = calloc(1, m->bs))) {
		err = err ? err : fs_err(ENOMEM, "mkfs: out of memory");
		goto out;
	}
	jput32(blk + 0x00, JBD2_MAGIC);
	jput32(blk + 0x04, 4);                /* superblock v2 */
	jput32(blk + 0x0C, m->bs);
	jput32(blk + 0x10, total);            /* s_maxlen */
	jput32(blk + 0x14, 1);                /* s_first */
	jput32(blk + 0x18, 1);                /* s_sequence */
	memcpy(blk + 0x30, m->uuid, 16);
	jput32(blk + 0x40, 1);                /* s_nr_users */
	/* s_num_fc_blks; the JBD2 FAST_COMMIT bit stays clear, as mke2fs
	 * leaves it: the kernel sets it when it mounts */
	jput32(blk + 0x54, m->fc_blocks);
	err = wr(m, f.r[0].start, blk, m->bs);
	free(blk);
	if (err)
		goto out;
	memcpy(sb->s_jnl_blocks, in->i_block, sizeof(in->i_block));
	sb->s_jnl_blocks[15] = in->i_size_high;
	sb->s_jnl_blocks[16] = in->i_size_lo;
	sb->s_jnl_backup_type = EXT3_JNL_BACKUP_BLOCKS;
	sb->s_journal_inum = cpu_to_le32(EXT4_JOURNAL_INO);
	err = write_inode(m, EXT4_JOURNAL_INO, raw);
out:
	free(f.r);
	return err;
}

/* ------------------------------------------------------------ orphan file */

static int make_orphan_file(struct mk *m)
{
	uint8_t *raw = m->ibuf;
	struct ext4_inode *in = (struct ext4_inode *)raw;
	struct fmap f = { 0 };
	uint8_t *blk;
	int err;

	if (!HAS_COMPAT(m, ORPHAN_FILE))
		return 0;
	memset(raw, 0, m->inode_size);
	inode_init(m, in, 0100600, 1);
	if ((err = alloc_file(m, group_first(m, 0), m->orphan_blocks, &f)) ||
	    (err = map_file(m, m->orphan_ino, in, &f, (uint64_t)m->orphan_blocks * m->bs)))
		goto out;
	if (!(blk = calloc(1, m->bs))) {
		err = fs_err(ENOMEM, "mkfs: out of memory");
		goto out;
	}
	for (uint64_t i = 0; i < f.blocks && !err; i++) {
		uint64_t pb = fmap_block(&f, i);
		size_t entries = m->bs - sizeof(struct ext4_orphan_block_tail);

		memset(blk, 0, m->bs);
		put32(blk + entries, EXT4_ORPHAN_BLOCK_MAGIC);
		if (m->csum) {
			uint64_t le = cpu_to_le64(pb);
			uint32_t c = crc32c(inode_seed(m, m->orphan_ino, 0), &le, 8);

			put32(blk + entries + 4, crc32c(c, blk, entries));
		}
		err = wr(m, pb, blk, m->bs);
	}
	free(blk);
	if (!err)
		err = write_inode(m, m->orphan_ino, raw);
out:
	free(f.r);
	return err;
}

/* -O mmp: the MMP block, clean, where mke2fs's ext2fs_mmp_init() puts it:
 * the first free block, taken after the journal and before the orphan file. */
static int make_mmp(struct mk *m)
{
	uint16_t secs = m->o->mmp_update_interval ? m->o->mmp_update_interval
						   : EXT4_MMP_UPDATE_INTERVAL;
	struct mmp_struct mmp;
	uint8_t *blk;
	uint64_t b;
	int err;

	if (!HAS_INCOMPAT(m, MMP))
		return 0;
	if (m->o->mmp_update_interval > EXT4_MMP_MAX_UPDATE_INTERVAL)
		return fs_err(EINVAL, "mkfs: mmp_update_interval %u is above the largest, %u s",
			      m->o->mmp_update_interval, EXT4_MMP_MAX_UPDATE_INTERVAL);
	if ((err = alloc_contig(m, m->first_data, 1, UINT32_MAX, &b)))
		return err;
	if (!(blk = calloc(1, m->bs)))
		return fs_err(ENOMEM, "mkfs: out of memory");
	mmp_init_block(&mmp, secs, m->path, m->now, m->csum, m->csum_seed);
	memcpy(blk, &mmp, sizeof(mmp));
	err = wr(m, b, blk, m->bs);
	free(blk);
	m->sb.s_mmp_block = cpu_to_le64(b);
	m->sb.s_mmp_update_interval = cpu_to_le16(secs);
	return err;
}

/* Inodes 1, 3-6, 9, 10: reserved, empty, with a valid checksum (inode 1,
 * the bad blocks inode, with the times as mke2fs gives it). */
static int make_reserved_inodes(struct mk *m)
{
	static const uint32_t ino[] = { 1, 3, 4, 5, 6, 9, 10 };
	uint8_t *raw = m->ibuf;
	int err;

	for (size_t i = 0; i < sizeof(ino) / sizeof(ino[0]); i++) {
		struct ext4_inode *in = (struct ext4_inode *)raw;

		memset(raw, 0, m->inode_size);
		if (m->inode_size > EXT4_GOOD_OLD_INODE_SIZE)
			in->i_extra_isize = cpu_to_le16(LARGE_INODE_EXTRA);
		if (ino[i] == EXT4_BAD_INO) {
			inode_init(m, in, 0, 0);
			in->i_crtime = 0;
		}
		if ((err = write_inode(m, ino[i], raw)))
			return err;
	}
	return 0;
}

/* ------------------------------------------------------------ quota files */

/* A quota file built in memory (quotatree.c's struct qt_io), then
 * written as the quota inode's blocks. */
struct qmem {
	uint8_t *p;
	uint32_t blocks, cap;
};

static int qmem_read(void *ctx, uint32_t blk, uint8_t *buf)
{
	struct qmem *q = ctx;

	if (blk >= q->blocks)
		return -EIO;
	memcpy(buf, q->p + (size_t)blk * QT_BLOCK_SIZE, QT_BLOCK_SIZE);
	return 0;
}

static int qmem_write(void *ctx, uint32_t blk, const uint8_t *buf)
{
	struct qmem *q = ctx;

	if (blk > q->blocks)
		return -EIO;
	if (blk == q->blocks) {
		if (q->blocks == q->cap) {
			uint8_t *p = realloc(q->p, (size_t)(q->cap ? q->cap * 2 : 8) * QT_BLOCK_SIZE);

			if (!p)
				return -ENOMEM;
			q->p = p;
			q->cap = q->cap ? q->cap * 2 : 8;
		}
		q->blocks++;
	}
	memcpy(q->p + (size_t)blk * QT_BLOCK_SIZE, buf, QT_BLOCK_SIZE);
	return 0;
}

/* The inodes mkfs makes that e2fsck counts: root and lost+found. */
struct qcharge {
	uint32_t id[QT_NTYPES];
	uint64_t bytes;
};

/* Add one inode of c's to its id's entry (new or existing). */
static int qmem_charge(struct qmem *q, const struct qt_io *io, int type, const struct qcharge *c)
{
	struct qt_entry e = { .curspace = c->bytes, .curinodes = 1 };
	struct qt_where w;
	int err = qt_lookup(io, c->id[type], &e, &w);

	if (err == -ENOENT) {
		e = (struct qt_entry){ .curspace = c->bytes, .curinodes = 1 };
		return qt_insert(io, c->id[type], &e, &w);
	}
	if (err)
		return err;
	e.curspace += c->bytes;
	e.curinodes++;
	qt_encode(q->p + (size_t)w.blk * QT_BLOCK_SIZE + w.off, &e);
	return 0;
}

static int write_quota_file(struct mk *m, uint32_t ino, const struct qmem *q)
{
	uint8_t *raw = m->ibuf, *blk = NULL;
	struct ext4_inode *in = (struct ext4_inode *)raw;
	uint64_t size = (uint64_t)q->blocks * QT_BLOCK_SIZE;
	struct fmap f = { 0 };
	int err;

	memset(raw, 0, m->inode_size);
	inode_init(m, in, 0100600, 1);
	if ((err = alloc_file(m, group_first(m, 0), div_ceil(size, m->bs), &f)) ||
	    (err = map_file(m, ino, in, &f, size)))
		goto out;
	/* As mke2fs: the kernel's quota files are immutable to users. */
	in->i_flags |= cpu_to_le32(EXT4_IMMUTABLE_FL);
	if (!(blk = calloc(1, m->bs))) {
		err = fs_err(ENOMEM, "mkfs: out of memory");
		goto out;
	}
	for (uint64_t i = 0; i < f.blocks && !err; i++) {
		uint64_t from = i * m->bs, len = MIN(size - from, (uint64_t)m->bs);

		memset(blk, 0, m->bs);
		memcpy(blk, q->p + from, len);
		err = wr(m, fmap_block(&f, i), blk, m->bs);
	}
	if (!err)
		err = write_inode(m, ino, raw);
out:
	free(blk);
	free(f.r);
	return err;
}

/* -O quota: the quota files of the types asked for, with id 0's (or
 * root_owner's) usage of root and lost+found, as mke2fs leaves them. */
static int make_quota_files(struct mk *m)
{
	static const uint32_t bit[QT_NTYPES] = { UEXT4_MKFS_QUOTA_USR, UEXT4_MKFS_QUOTA_GRP,
						 UEXT4_MKFS_QUOTA_PRJ };
	uint32_t ino[QT_NTYPES] = { EXT4_USR_QUOTA_INO, EXT4_GRP_QUOTA_INO, m->prj_ino };
	struct qcharge c[2] = {
		{ { m->o->root_owner_set ? m->o->root_uid : 0,
		    m->o->root_owner_set ? m->o->root_gid : 0, 0 }, m->bs },
		{ { 0, 0, 0 }, (uint64_t)lpf_blocks(m) * m->bs },
	};
	int err = 0;

	for (int t = 0; t < QT_NTYPES && !err; t++) {
		struct qmem q = { 0 };
		struct qt_io io = { &q, qmem_read, qmem_write };

		if (!(m->qtypes & bit[t]))
			continue;
		err = qt_format(&io, t);
		for (int i = 0; i < 2 && !err; i++)
			err = qmem_charge(&q, &io, t, &c[i]);
		if (err < 0)
			err = fs_err(-err, "mkfs: building the quota file of inode %u", ino[t]);
		if (!err)
			err = write_quota_file(m, ino[t], &q);
		free(q.p);
	}
	if (!err && (m->qtypes & (UEXT4_MKFS_QUOTA_USR)))
		m->sb.s_usr_quota_inum = cpu_to_le32(EXT4_USR_QUOTA_INO);
	if (!err && (m->qtypes & (UEXT4_MKFS_QUOTA_GRP)))
		m->sb.s_grp_quota_inum = cpu_to_le32(EXT4_GRP_QUOTA_INO);
	if (!err && m->prj_ino)
		m->sb.s_prj_quota_inum = cpu_to_le32(m->prj_ino);
	return err;
}

/* ------------------------------------------------------------ descriptors, bitmaps */

static uint8_t *gd_at(const struct mk *m, uint32_t g)
{
	return m->gdt + (size_t)g * m->desc_size;
}

static void gd_set_csum(const struct mk *m, uint32_t g)
{
	uint8_t *gd = gd_at(m, g);
	uint32_t le = cpu_to_le32(g);
	size_t off = offsetof(struct ext4_group_desc, bg_checksum);
	static const uint8_t zero2[2];

	if (m->csum) {
		uint32_t c = crc32c(m->csum_seed, &le, 4);

		c = crc32c(c, gd, off);
		c = crc32c(c, zero2, 2);
		if (m->desc_size > off + 2)
			c = crc32c(c, gd + off + 2, m->desc_size - off - 2);
		put16(gd + off, (uint16_t)c);
	} else if (m->gdt_csum) {
		uint16_t c = crc16(0xFFFF, m->uuid, 16);

		c = crc16(c, &le, 4);
		c = crc16(c, gd, off);
		if (m->desc_size > off + 2)
			c = crc16(c, gd + off + 2, m->desc_size - off - 2);
		put16(gd + off, c);
	}
}

static void gd_fill(struct mk *m, uint32_t g, uint32_t free_blocks, uint32_t free_inodes,
		    uint32_t dirs, uint32_t unused, uint16_t flags)
{
	struct ext4_group_desc *d = (struct ext4_group_desc *)gd_at(m, g);

	d->bg_block_bitmap_lo = cpu_to_le32((uint32_t)m->bb[g]);
	d->bg_inode_bitmap_lo = cpu_to_le32((uint32_t)m->ib[g]);
	d->bg_inode_table_lo = cpu_to_le32((uint32_t)m->it[g]);
	d->bg_free_blocks_count_lo = cpu_to_le16((uint16_t)free_blocks);
	d->bg_free_inodes_count_lo = cpu_to_le16((uint16_t)free_inodes);
	d->bg_used_dirs_count_lo = cpu_to_le16((uint16_t)dirs);
	d->bg_flags = cpu_to_le16(flags);
	d->bg_itable_unused_lo = cpu_to_le16((uint16_t)unused);
	if (m->desc_size >= EXT4_MIN_DESC_SIZE_64BIT) {
		d->bg_block_bitmap_hi = cpu_to_le32((uint32_t)(m->bb[g] >> 32));
		d->bg_inode_bitmap_hi = cpu_to_le32((uint32_t)(m->ib[g] >> 32));
		d->bg_inode_table_hi = cpu_to_le32((uint32_t)(m->it[g] >> 32));
		d->bg_free_blocks_count_hi = cpu_to_le16((uint16_t)(free_blocks >> 16));
		d->bg_free_inodes_count_hi = cpu_to_le16((uint16_t)(free_inodes >> 16));
		d->bg_used_dirs_count_hi = cpu_to_le16((uint16_t)(dirs >> 16));
		d->bg_itable_unused_hi = cpu_to_le16((uint16_t)(unused >> 16));
	}
}

static void set_bits(uint8_t *map, uint64_t from, uint64_t to)
{
	for (uint64_t i = from; i < to; i++)
		map[i >> 3] |= (uint8_t)(1u << (i & 7));
}

/* Group g's block bitmap: its backup region, the runs inside it, and the
 * bits past its end. */
static void build_block_bitmap(const struct mk *m, uint32_t g, uint8_t *map)
{
	uint64_t gs = group_first(m, g), ge = gs + group_size(m, g);

	uint32_t c = m->cbits;

	/* a bit per cluster (bigalloc): set when any of its blocks is used */
	memset(map, 0, m->bs);
	if (backup_len(m, g))
		set_bits(map, 0, ((backup_len(m, g) - 1) >> c) + 1);
	for (size_t i = run_search(m, gs); i < m->nruns && m->runs[i].start < ge; i++) {
		uint64_t a = m->runs[i].start > gs ? m->runs[i].start : gs;
		uint64_t b = m->runs[i].start + m->runs[i].len;

		set_bits(map, (a - gs) >> c, (((b < ge ? b : ge) - gs - 1) >> c) + 1);
	}
	set_bits(map, cl_round_up(m, ge - gs) >> c, (uint64_t)m->bs * 8);
}

/* Descriptors and the bitmaps that are initialised. */
static int write_groups(struct mk *m, uint32_t used_inodes, uint32_t *dirs_in,
			uint64_t *free_blocks)
{
	uint8_t *map = malloc(m->bs);
	int uninit = m->csum || m->gdt_csum;
	int err = 0;

	if (!map)
		return fs_err(ENOMEM, "mkfs: out of memory");
	*free_blocks = 0;
	for (uint32_t g = 0; g < m->ngroups && !err; g++) {
		uint64_t first_ino = (uint64_t)g * m->ipg + 1;
		uint32_t used = first_ino > used_inodes ? 0
			: (uint32_t)((used_inodes - first_ino + 1) < m->ipg ?
				     used_inodes - first_ino + 1 : m->ipg);
		uint32_t fb = group_free(m, g);
		uint16_t flags = 0;
		struct ext4_group_desc *d = (struct ext4_group_desc *)gd_at(m, g);

		*free_blocks += (uint64_t)fb << m->cbits;   /* the superblock counts blocks */
		if (uninit) {
			if (!used)
				flags |= EXT4_BG_INODE_UNINIT;
			if (!m->gforeign[g] && !used && g + 1 < m->ngroups)
				flags |= EXT4_BG_BLOCK_UNINIT;
			if (m->zeroed || m->o->itable_zero)
				flags |= EXT4_BG_INODE_ZEROED;
		}
		gd_fill(m, g, fb, m->ipg - used, dirs_in[g], uninit ? m->ipg - used : 0, flags);
		if (!(flags & EXT4_BG_BLOCK_UNINIT)) {
			build_block_bitmap(m, g, map);
			if (m->csum) {
				uint32_t c = crc32c(m->csum_seed, map, (m->bpg >> m->cbits) / 8);

				d->bg_block_bitmap_csum_lo = cpu_to_le16((uint16_t)c);
				if (m->desc_size >= EXT4_MIN_DESC_SIZE_64BIT)
					d->bg_block_bitmap_csum_hi = cpu_to_le16((uint16_t)(c >> 16));
			}
			err = wr(m, m->bb[g], map, m->bs);
		}
		if (!err && !(flags & EXT4_BG_INODE_UNINIT)) {
			memset(map, 0, m->bs);
			set_bits(map, 0, used);
			set_bits(map, m->ipg, (uint64_t)m->bs * 8);
			if (m->csum) {
				uint32_t c = crc32c(m->csum_seed, map, m->ipg / 8);

				d->bg_inode_bitmap_csum_lo = cpu_to_le16((uint16_t)c);
				if (m->desc_size >= EXT4_MIN_DESC_SIZE_64BIT)
					d->bg_inode_bitmap_csum_hi = cpu_to_le16((uint16_t)(c >> 16));
			}
			err = wr(m, m->ib[g], map, m->bs);
		}
		gd_set_csum(m, g);
	}
	free(map);
	return err;
}

/* ------------------------------------------------------------ superblock */

static void put_time(uint32_t *lo, uint8_t *hi, int64_t t)
{
	*lo = cpu_to_le32((uint32_t)t);
	*hi = (uint8_t)((uint64_t)t >> 32);
}

static void fill_super(struct mk *m, struct ext4_super_block *sb, uint64_t free_blocks,
		       uint32_t free_inodes)
{
	sb->s_inodes_count = cpu_to_le32(m->inodes_count);
	sb->s_blocks_count_lo = cpu_to_le32((uint32_t)m->blocks);
	sb->s_blocks_count_hi = cpu_to_le32((uint32_t)(m->blocks >> 32));
	sb->s_r_blocks_count_lo = cpu_to_le32((uint32_t)m->r_blocks);
	sb->s_r_blocks_count_hi = cpu_to_le32((uint32_t)(m->r_blocks >> 32));
	sb->s_free_blocks_count_lo = cpu_to_le32((uint32_t)free_blocks);
	sb->s_free_blocks_count_hi = cpu_to_le32((uint32_t)(free_blocks >> 32));
	sb->s_free_inodes_count = cpu_to_le32(free_inodes);
	sb->s_first_data_block = cpu_to_le32(m->first_data);
	sb->s_log_block_size = cpu_to_le32(m->log_bs);
	sb->s_log_cluster_size = cpu_to_le32(m->log_bs + m->cbits);
	sb->s_blocks_per_group = cpu_to_le32(m->bpg);
	sb->s_clusters_per_group = cpu_to_le32(m->bpg >> m->cbits);
	sb->s_inodes_per_group = cpu_to_le32(m->ipg);
	put_time(&sb->s_wtime, &sb->s_wtime_hi, m->now);
	put_time(&sb->s_mkfs_time, &sb->s_mkfs_time_hi, m->now);
	put_time(&sb->s_lastcheck, &sb->s_lastcheck_hi, m->now);
	sb->s_max_mnt_count = cpu_to_le16(0xFFFF);
	sb->s_magic = cpu_to_le16(EXT4_SUPER_MAGIC);
	sb->s_state = cpu_to_le16(EXT4_VALID_FS);
	sb->s_errors = cpu_to_le16(EXT2_ERRORS_CONTINUE);
	sb->s_rev_level = cpu_to_le32(1);
	sb->s_first_ino = cpu_to_le32(MK_FIRST_INO);
	sb->s_inode_size = cpu_to_le16((uint16_t)m->inode_size);
	sb->s_feature_compat = cpu_to_le32(m->ft.f[0]);
	sb->s_feature_incompat = cpu_to_le32(m->ft.f[1]);
	sb->s_feature_ro_compat = cpu_to_le32(m->ft.f[2]);
	memcpy(sb->s_uuid, m->uuid, 16);
	memcpy(sb->s_volume_name, m->label, 16);
	sb->s_reserved_gdt_blocks = cpu_to_le16((uint16_t)m->rsv_gdt);
	for (int i = 0; i < 4; i++) {
		uint32_t w;

		memcpy(&w, m->hash_seed + 4 * i, 4);
		sb->s_hash_seed[i] = w;     /* stored as the bytes of the UUID */
	}
	sb->s_def_hash_version = DX_HASH_HALF_MD4;
	if (HAS_INCOMPAT(m, CASEFOLD)) {   /* utf8-12.1, the only encoding */
		sb->s_encoding = cpu_to_le16(EXT4_ENC_UTF8_12_1);
		sb->s_encoding_flags = cpu_to_le16(m->o->encoding_flags);
	}
	sb->s_desc_size = cpu_to_le16(HAS_INCOMPAT(m, 64BIT) ? (uint16_t)m->desc_size : 0);
	sb->s_default_mount_opts = cpu_to_le32(EXT4_DEFM_XATTR_USER | EXT4_DEFM_ACL);
	if (m->inode_size >= EXT4_GOOD_OLD_INODE_SIZE + LARGE_INODE_EXTRA) {
		sb->s_min_extra_isize = cpu_to_le16(LARGE_INODE_EXTRA);
		sb->s_want_extra_isize = cpu_to_le16(LARGE_INODE_EXTRA);
	}
	sb->s_flags = cpu_to_le32((char)-1 < 0 ? EXT2_FLAGS_SIGNED_HASH : EXT2_FLAGS_UNSIGNED_HASH);
	sb->s_log_groups_per_flex = (uint8_t)m->log_flex;
	if (m->csum)
		sb->s_checksum_type = EXT4_CRC32C_CHKSUM;
	if (HAS_INCOMPAT(m, CSUM_SEED))
		sb->s_checksum_seed = cpu_to_le32(m->csum_seed);
	sb->s_overhead_clusters = cpu_to_le32((uint32_t)m->overhead);
	if (HAS_COMPAT(m, ORPHAN_FILE))
		sb->s_orphan_file_inum = cpu_to_le32(m->orphan_ino);
	/* meta_bg: s_first_meta_bg stays 0 (every descriptor block in its
	 * meta group), as mke2fs makes it */
	sb->s_backup_bgs[0] = cpu_to_le32(m->backup_bgs[0]);
	sb->s_backup_bgs[1] = cpu_to_le32(m->backup_bgs[1]);
}

static void super_csum(const struct mk *m, struct ext4_super_block *sb)
{
	if (m->csum)
		sb->s_checksum = cpu_to_le32(crc32c(~0u, sb, offsetof(struct ext4_super_block,
								      s_checksum)));
}

/* Write len bytes at byte pos of the file system. */
static int wr_bytes(struct mk *m, uint64_t pos, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	while (len) {
		ssize_t n = pwrite(m->fd, p, len, (off_t)(m->base + pos));

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return fs_err(n < 0 ? errno : EIO, "mkfs: %s: write at byte %llu failed: %s",
				      m->path, (unsigned long long)pos,
				      n < 0 ? strerror(errno) : "no progress");
		p += n;
		len -= (size_t)n;
		pos += (uint64_t)n;
		m->written += (uint64_t)n;
	}
	return 0;
}

/* The superblock and descriptor table in every group that has a copy.
 * The primary superblock is at byte 1024; a backup starts its group's
 * first block. */
static uint64_t group_desc_bytes(const struct mk *m, uint32_t g)
{
	if (HAS_INCOMPAT(m, META_BG))
		return group_has_meta_desc(m, g) ? m->bs : 0;
	return group_has_super(m, g) ? (uint64_t)m->desc_blocks * m->bs : 0;
}

/* Group g's descriptor copy: the whole table after its superblock, or with
 * meta_bg its meta group's block after the superblock if it has one. */
static int write_group_descs(struct mk *m, uint32_t g)
{
	uint64_t at = super_blk(m, g) + (group_has_super(m, g) ? 1 : 0);

	if (!HAS_INCOMPAT(m, META_BG))
		return group_has_super(m, g) ? wr(m, at, m->gdt, (size_t)m->desc_blocks * m->bs) : 0;
	if (!group_has_meta_desc(m, g))
		return 0;
	return wr(m, at, m->gdt + (size_t)(g / desc_per_block(m)) * m->bs, m->bs);
}

static int write_supers(struct mk *m, struct ext4_super_block *sb)
{
	uint64_t to_write = 0;
	int err = 0;

	for (uint32_t g = 0; g < m->ngroups; g++)
		to_write += (group_has_super(m, g) ? sizeof(*sb) : 0) + group_desc_bytes(m, g);
	sb->s_kbytes_written = cpu_to_le64((m->written + to_write) / 1024);
	for (uint32_t g = 0; g < m->ngroups && !err; g++) {
		uint64_t at = group_first(m, g);

		if (group_has_super(m, g)) {
			sb->s_block_group_nr = cpu_to_le16((uint16_t)g);
			super_csum(m, sb);
			err = wr_bytes(m, g == 0 ? EXT4_SUPERBLOCK_OFFSET : at * m->bs, sb,
				       sizeof(*sb));
		}
		if (!err)
			err = write_group_descs(m, g);
	}
	sb->s_block_group_nr = 0;
	super_csum(m, sb);
	return err;
}

/* ------------------------------------------------------------ external journals */

/* The JBD2 superblock sits in the block after the one holding the ext4
 * superblock (ext2fs_journal_sb_start()). */
static uint64_t jsb_block(uint32_t bs)
{
	return EXT4_SUPERBLOCK_OFFSET / bs + 1;
}

/* -O journal_dev, as mke2fs's create_journal_dev(): the whole device is
 * the log, its superblock (no users yet) after the ext4 superblock, which
 * alone is written (no groups, no inodes). */
static int make_journal_dev(struct mk *m)
{
	struct ext4_super_block *sb = &m->sb;
	uint64_t at = jsb_block(m->bs);
	uint8_t *blk;
	int err = 0;

	if (!m->zeroed)
		err = wr_zero(m, 0, m->blocks);
	if (err || !(blk = calloc(1, m->bs)))
		return err ? err : fs_err(ENOMEM, "mkfs: out of memory");
	jput32(blk + 0x00, JBD2_MAGIC);
	jput32(blk + 0x04, 4);                /* superblock v2 */
	jput32(blk + 0x0C, m->bs);
	jput32(blk + 0x10, m->blocks > UINT32_MAX ? UINT32_MAX : (uint32_t)m->blocks);
	jput32(blk + 0x14, (uint32_t)at + 1); /* s_first */
	jput32(blk + 0x18, 1);                /* s_sequence */
	memcpy(blk + 0x30, m->uuid, 16);
	err = wr(m, at, blk, m->bs);
	free(blk);
	if (err)
		return err;
	fill_super(m, sb, 0, 0);
	sb->s_flags = 0;
	/* What mke2fs 1.47.0 records from its I/O counters with -t ext4
	 * (measured: 5 kB with 1 KiB blocks, 4 kB with 2 and 4 KiB; nothing
	 * without metadata_csum), so that dumpe2fs -h shows the same. */
	sb->s_kbytes_written = cpu_to_le64(m->csum ? (m->bs == 1024 ? 5 : 4) : 0);
	super_csum(m, sb);
	return wr_bytes(m, EXT4_SUPERBLOCK_OFFSET, sb, sizeof(*sb));
}

static int jdev_read(struct mk *m, void *buf, size_t len, uint64_t off)
{
	ssize_t n = pread(m->jdev.fd, buf, len, (off_t)off);

	if (n == (ssize_t)len)
		return 0;
	return fs_err(n < 0 ? errno : EIO, "-J device=%s: read at byte %llu failed: %s",
		      m->o->journal_device, (unsigned long long)off,
		      n < 0 ? strerror(errno) : "short read");
}

/* -J device=PATH: open the journal device and take its UUID, block size
 * and device number (0 for a regular file: the kernel then needs
 * journal_path=). */
static int open_journal_device(struct mk *m)
{
	const char *path = m->o->journal_device;
	struct ext4_super_block js;
	struct stat st;
	uint32_t lbs;
	int err;

	/* A block device exclusively: refused while the kernel uses it. */
	m->jdev.fd = open(path, O_RDWR | O_CLOEXEC |
			  (!stat(path, &st) && S_ISBLK(st.st_mode) ? O_EXCL : 0));
	if (m->jdev.fd < 0 || fstat(m->jdev.fd, &st))
		return fs_err(errno, "-J device=%s: %s", path, strerror(errno));
	if ((err = jdev_read(m, &js, sizeof(js), EXT4_SUPERBLOCK_OFFSET)))
		return err;
	lbs = le32(js.s_log_block_size);
	if (le16(js.s_magic) != EXT4_SUPER_MAGIC ||
	    !(le32(js.s_feature_incompat) & EXT4_FEATURE_INCOMPAT_JOURNAL_DEV) || lbs > 2)
		return fs_err(EINVAL, "-J device=%s: not a journal device (make one with uext4 "
			      "mkfs -O journal_dev)", path);
	memcpy(m->jdev.uuid, js.s_uuid, 16);
	m->jdev.bs = 1024u << lbs;
	m->jdev.rdev = S_ISBLK(st.st_mode) ? (uint32_t)st.st_rdev : 0;
	m->jdev.jsb_off = jsb_block(m->jdev.bs) * m->jdev.bs;
	return 0;
}

/* Add the new file system to the journal's users, as mke2fs does. */
static int add_journal_user(struct mk *m)
{
	uint8_t *jsb = calloc(1, m->jdev.bs);
	uint32_t n;
	int err;

	if (!jsb)
		return fs_err(ENOMEM, "mkfs: out of memory");
	err = jdev_read(m, jsb, m->jdev.bs, m->jdev.jsb_off);
	n = err ? 0 : be32_get(jsb + 0x40);
	if (!err && (be32_get(jsb) != JBD2_MAGIC || n >= 48))
		err = fs_err(EINVAL, "-J device=%s: bad journal superblock, or %u users already",
			     m->o->journal_device, n);
	if (!err) {
		memcpy(jsb + 0x100 + 16 * n, m->uuid, 16);
		jput32(jsb + 0x40, n + 1);
		if (be32_get(jsb + 0x28) & (JBD2_FEATURE_INCOMPAT_CSUM_V2 |
					    JBD2_FEATURE_INCOMPAT_CSUM_V3))
			jput32(jsb + 0xFC, jbd2_sb_csum((struct jbd2_superblock *)jsb));
		if (pwrite(m->jdev.fd, jsb, m->jdev.bs, (off_t)m->jdev.jsb_off) != (ssize_t)m->jdev.bs ||
		    fdatasync(m->jdev.fd))
			err = fs_err(errno ? errno : EIO, "-J device=%s: writing its users failed",
				     m->o->journal_device);
	}
	free(jsb);
	return err;
}

/* ------------------------------------------------------------ target */

/* What the first bytes of a target say it holds, or NULL. */
static const char *probe_signature(const uint8_t *p, size_t len)
{
	static char what[96];

#define AT(off, s) (len >= (size_t)(off) + sizeof(s) - 1 && !memcmp(p + (off), s, sizeof(s) - 1))
	if (len >= 1082 && p[1080] == 0x53 && p[1081] == 0xEF) {
		uint32_t compat, incompat;

		memcpy(&compat, p + 1024 + 0x5C, 4);
		memcpy(&incompat, p + 1024 + 0x60, 4);
		compat = le32(compat), incompat = le32(incompat);
		snprintf(what, sizeof(what), "an %s file system",
			 incompat & (EXT4_FEATURE_INCOMPAT_EXTENTS | EXT4_FEATURE_INCOMPAT_FLEX_BG |
				     EXT4_FEATURE_INCOMPAT_64BIT) ? "ext4"
			 : compat & EXT4_FEATURE_COMPAT_HAS_JOURNAL ? "ext3" : "ext2");
		return what;
	}
	if (AT(0, "XFSB"))
		return "an XFS file system";
	if (AT(0x10040, "_BHRfS_M"))
		return "a btrfs file system";
	if (AT(0, "LUKS\xba\xbe"))
		return "a LUKS encrypted volume";
	if (AT(0, "hsqs"))
		return "a squashfs file system";
	if (AT(4086, "SWAPSPACE2") || AT(4086, "SWAP-SPACE"))
		return "swap space";
	if (AT(32769, "CD001"))
		return "an ISO 9660 file system";
	if (len >= 1028 && p[1024] == 0x10 && p[1025] == 0x20 && p[1026] == 0xF5 && p[1027] == 0xF2)
		return "an F2FS file system";
	if (AT(512, "EFI PART"))
		return "a GPT partition table";
	if (len >= 512 && p[510] == 0x55 && p[511] == 0xAA) {
		if (AT(54, "FAT") || AT(82, "FAT32"))
			return "a FAT file system";
		return "a DOS/MBR partition table";
	}
#undef AT
	return NULL;
}

static int probe_target(struct mk *m, uint64_t avail)
{
	size_t len = avail < 69632 ? (size_t)avail : 69632;
	uint8_t *buf = calloc(1, len ? len : 1);
	const char *what;
	ssize_t n;

	if (!buf)
		return fs_err(ENOMEM, "mkfs: out of memory");
	n = pread(m->fd, buf, len, (off_t)m->base);
	if (n < 0) {
		int e = errno;

		free(buf);
		return fs_err(e, "mkfs: %s: cannot read: %s", m->path, strerror(e));
	}
	what = probe_signature(buf, (size_t)n);
	free(buf);
	if (what)
		return fs_err(EEXIST, "%s%s already holds %s: not overwritten (force with -F)",
			      m->path, m->base ? " at that offset" : "", what);
	return 0;
}

static int random_bytes(uint8_t *p, size_t n)
{
	while (n) {
		ssize_t r = getrandom(p, n, 0);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return fs_err(errno, "mkfs: getrandom failed: %s", strerror(errno));
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

static int make_uuid(struct mk *m)
{
	const struct uext4_mkfs_opts *o = m->o;
	int err = 0;

	switch (o->uuid_kind) {
	case UEXT4_MKFS_UUID_GIVEN:
		memcpy(m->uuid, o->uuid, 16);
		break;
	case UEXT4_MKFS_UUID_CLEAR:
		memset(m->uuid, 0, 16);
		break;
	case UEXT4_MKFS_UUID_TIME: {
		/* version 1: 100 ns ticks since 1582-10-15, random clock and node */
		struct timespec ts;
		uint64_t t;

		clock_gettime(CLOCK_REALTIME, &ts);
		t = (uint64_t)ts.tv_sec * 10000000 + (uint64_t)ts.tv_nsec / 100 +
		    0x01B21DD213814000ull;
		if ((err = random_bytes(m->uuid + 8, 8)))
			return err;
		m->uuid[0] = (uint8_t)(t >> 24), m->uuid[1] = (uint8_t)(t >> 16);
		m->uuid[2] = (uint8_t)(t >> 8), m->uuid[3] = (uint8_t)t;
		m->uuid[4] = (uint8_t)(t >> 40), m->uuid[5] = (uint8_t)(t >> 32);
		m->uuid[6] = (uint8_t)(((t >> 56) & 0x0F) | 0x10), m->uuid[7] = (uint8_t)(t >> 48);
		m->uuid[8] = (uint8_t)((m->uuid[8] & 0x3F) | 0x80);
		m->uuid[10] |= 0x01;    /* multicast bit: not a real MAC address */
		break;
	}
	case UEXT4_MKFS_UUID_RANDOM:
		if ((err = random_bytes(m->uuid, 16)))
			return err;
		m->uuid[6] = (uint8_t)((m->uuid[6] & 0x0F) | 0x40);
		m->uuid[8] = (uint8_t)((m->uuid[8] & 0x3F) | 0x80);
		break;
	default:
		return fs_err(EINVAL, "mkfs: unknown UUID kind %d", o->uuid_kind);
	}
	if (o->hash_seed_set) {
		memcpy(m->hash_seed, o->hash_seed, 16);
	} else {
		if ((err = random_bytes(m->hash_seed, 16)))
			return err;
		m->hash_seed[6] = (uint8_t)((m->hash_seed[6] & 0x0F) | 0x40);
		m->hash_seed[8] = (uint8_t)((m->hash_seed[8] & 0x3F) | 0x80);
	}
	m->csum_seed = crc32c(~0u, m->uuid, 16);
	return 0;
}

/* Open (or create, with a size) the target; its usable size in bytes. */
static int open_target(struct mk *m, uint64_t *bytes, int *created)
{
	const struct uext4_mkfs_opts *o = m->o;
	char where[PATH_MAX + 256];
	struct stat st;
	uint64_t have;

	*created = 0;
	if (bdev_is_nbd_uri(m->path))   /* not a file named "nbd://..." in the cwd */
		return fs_err(EOPNOTSUPP, "%s: mkfs writes a file or block device, not an NBD "
			      "export: make the image locally, or map the export (nbd-client, "
			      "/dev/nbdX) and give the device", m->path);
	/* A mounted image (through a loop device, or a FUSE mount's source) */
	if (!o->dry_run && mount_check(m->path, where, sizeof(where)))
		return fs_err(EBUSY, "%s is in use: %s; not overwritten", m->path, where);
	/* O_EXCL on a block device: EBUSY while it is mounted or in use */
	m->fd = open(m->path, (o->dry_run ? O_RDONLY : O_RDWR) | O_CLOEXEC |
		     (stat(m->path, &st) == 0 && S_ISBLK(st.st_mode) && !o->dry_run ? O_EXCL : 0));
	if (m->fd < 0 && errno == ENOENT) {
		if (!o->size)
			return fs_err(ENOENT, "%s does not exist: give a SIZE to create it", m->path);
		if (o->dry_run) {
			*created = 1;
			*bytes = o->size;
			return 0;
		}
		m->fd = open(m->path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
		if (m->fd >= 0)
			*created = 1;
	}
	if (m->fd < 0 && errno == EBUSY)
		return fs_err(EBUSY, "%s is in use (mounted?): not overwritten", m->path);
	if (m->fd < 0)
		return fs_err(errno, "%s: cannot open: %s", m->path, strerror(errno));
	/* the lock a read-write uext4 mount or command holds on its image */
	if (!o->dry_run && flock(m->fd, LOCK_EX | LOCK_NB) < 0 && errno == EWOULDBLOCK)
		return fs_err(EBUSY, "%s is in use by another process writing it (a read-write "
			      "mount?): not overwritten", m->path);
	if (fstat(m->fd, &st) < 0)
		return fs_err(errno, "%s: fstat failed: %s", m->path, strerror(errno));
	if (S_ISBLK(st.st_mode)) {
		m->is_blockdev = 1;
		if (ioctl(m->fd, BLKGETSIZE64, &have) < 0)
			return fs_err(errno, "%s: BLKGETSIZE64 failed: %s", m->path, strerror(errno));
	} else if (S_ISREG(st.st_mode)) {
		have = (uint64_t)st.st_size;
	} else {
		return fs_err(EINVAL, "%s: not a regular file or block device", m->path);
	}
	if (o->size) {
		*bytes = o->size;
		if (m->is_blockdev && o->offset + o->size > have)
			return fs_err(ENOSPC, "%s: %llu bytes from offset %llu do not fit in the "
				      "device (%llu bytes)", m->path, (unsigned long long)o->size,
				      (unsigned long long)o->offset, (unsigned long long)have);
	} else {
		if (have <= o->offset)
			return fs_err(EINVAL, "%s: the file has %llu bytes, nothing after offset "
				      "%llu: give a SIZE", m->path, (unsigned long long)have,
				      (unsigned long long)o->offset);
		*bytes = have - o->offset;
	}
	if (!*created && !o->force && !o->dry_run && have > o->offset) {
		int err = probe_target(m, have - o->offset);

		if (err)
			return err;
	}
	if (!o->dry_run && S_ISREG(st.st_mode) && have < o->offset + *bytes &&
	    ftruncate(m->fd, (off_t)(o->offset + *bytes)) < 0)
		return fs_err(errno, "%s: cannot extend to %llu bytes: %s", m->path,
			      (unsigned long long)(o->offset + *bytes), strerror(errno));
	if (!o->dry_run && S_ISREG(st.st_mode))
		m->zeroed = *created ||
			    fallocate(m->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
				      (off_t)o->offset, (off_t)*bytes) == 0;
	return 0;
}

static void fill_geometry(const struct mk *m, struct uext4_mkfs_geometry *g, uint64_t free_blocks,
			  uint32_t free_inodes)
{
	memset(g, 0, sizeof(*g));
	g->block_size = m->bs;
	g->inode_size = m->inode_size;
	g->desc_size = m->desc_size;
	g->blocks_count = m->blocks;
	g->reserved_blocks = m->r_blocks;
	g->free_blocks = free_blocks;
	g->overhead_blocks = m->overhead;
	g->inodes_count = m->inodes_count;
	g->free_inodes = free_inodes;
	g->groups_count = m->ngroups;
	g->blocks_per_group = m->bpg;
	g->inodes_per_group = m->ipg;
	g->inode_blocks_per_group = m->itb;
	g->first_data_block = m->first_data;
	g->reserved_gdt_blocks = m->rsv_gdt;
	g->flex_bg_size = m->flex;
	g->journal_blocks = m->journal_blocks;
	g->orphan_file_blocks = m->orphan_blocks;
	g->feature_compat = m->ft.f[0];
	g->feature_incompat = m->ft.f[1];
	g->feature_ro_compat = m->ft.f[2];
	feature_string(&m->ft, g->features, sizeof(g->features));
	memcpy(g->uuid, m->uuid, 16);
	memcpy(g->hash_seed, m->hash_seed, 16);
	g->zeroed = m->zeroed;
	g->bytes_written = m->written;
	g->backup_bgs[0] = m->backup_bgs[0];
	g->backup_bgs[1] = m->backup_bgs[1];
	g->fast_commit_blocks = m->fc_blocks;
	g->cluster_size = m->bs << m->cbits;
}

uint32_t uext4_mkfs_backup_groups(const struct uext4_mkfs_geometry *g, uint32_t *groups,
				  uint32_t max)
{
	struct mk m = { 0 };
	uint32_t n = 0;

	m.ft.f[0] = g->feature_compat;
	m.ft.f[2] = g->feature_ro_compat;
	m.ngroups = g->groups_count;
	m.backup_bgs[0] = g->backup_bgs[0];
	m.backup_bgs[1] = g->backup_bgs[1];
	for (uint32_t i = 1; i < g->groups_count; i++)
		if (group_has_super(&m, i)) {
			if (n < max)
				groups[n] = i;
			n++;
		}
	return n;
}

/* On a target that was not punched (a block device): zero the first 4 KiB
 * (as mke2fs zaps them, so no old signature survives there) and, without
 * lazy init (no uninit_bg or metadata_csum, or -E lazy_itable_init=0),
 * every inode table, before any inode is written into them. */
static int zero_stale(struct mk *m)
{
	/* the boot area and the old primary superblock: until the new one is
	 * written last, a failed mkfs leaves no file system that looks whole */
	static const uint8_t zero[4096];
	int err = wr_bytes(m, 0, zero, sizeof(zero));

	if (!(m->o->itable_zero || !(m->csum || m->gdt_csum)))
		return err;
	for (uint32_t g = 0; g < m->ngroups && !err; g++)
		err = wr_zero(m, m->it[g], m->itb);
	return err;
}

/* Everything after the geometry: tables, files, descriptors, superblocks. */
static int build(struct mk *m, uint64_t *free_blocks, uint32_t *free_inodes)
{
	uint32_t used_inodes = m->last_used_ino;
	uint32_t *dirs = calloc(m->ngroups, sizeof(*dirs));
	uint64_t backups = 0;
	int err;

	m->gused = calloc(m->ngroups, sizeof(*m->gused));
	m->gforeign = calloc(m->ngroups, 1);
	m->bb = calloc(m->ngroups, sizeof(*m->bb));
	m->ib = calloc(m->ngroups, sizeof(*m->ib));
	m->it = calloc(m->ngroups, sizeof(*m->it));
	m->gdt = calloc(m->desc_blocks, m->bs);
	/* inodes are built in struct ext4_inode, written inode_size bytes */
	m->ibuf = calloc(1, m->inode_size > 1024 ? m->inode_size : 1024);
	if (!dirs || !m->gused || !m->gforeign || !m->bb || !m->ib || !m->it || !m->gdt ||
	    !m->ibuf) {
		free(dirs);
		return fs_err(ENOMEM, "mkfs: out of memory for %u groups", m->ngroups);
	}
	err = place_tables(m);
	if (!err && !m->zeroed)
		err = zero_stale(m);
	for (uint32_t g = 0; g < m->ngroups; g++)
		backups += backup_len(m, g);
	if (m->cbits) {
		/* s_overhead_clusters: the clusters the tables and backups touch */
		for (uint32_t g = 0; g < m->ngroups; g++)
			m->overhead += group_used_clusters(m, g);
	} else {
		for (size_t i = 0; i < m->nruns; i++)
			m->overhead += m->runs[i].len;
		m->overhead += backups + m->first_data;
	}
	if (!err)
		err = make_root_and_lpf(m);
	if (!err)
		err = make_resize_inode(m);
	if (!err)
		err = make_journal(m, &m->sb);
	if (!err)
		err = make_mmp(m);
	if (!err)
		err = make_orphan_file(m);
	if (!err)
		err = make_reserved_inodes(m);
	if (!err)
		err = make_quota_files(m);
	if (!err) {
		dirs[(EXT4_ROOT_INO - 1) / m->ipg]++;
		dirs[(MK_LPF_INO - 1) / m->ipg]++;
		err = write_groups(m, used_inodes, dirs, free_blocks);
	}
	free(dirs);
	*free_inodes = m->inodes_count - used_inodes;
	return err;
}

static void mk_free(struct mk *m)
{
	free(m->runs);
	free(m->gused);
	free(m->gforeign);
	free(m->bb);
	free(m->ib);
	free(m->it);
	free(m->gdt);
	free(m->ibuf);
	if (m->fd >= 0)
		close(m->fd);
	if (m->jdev.fd >= 0)
		close(m->jdev.fd);
}

/* Free blocks a dry run reports: the blocks minus the backups and tables
 * and every file mkfs would make. */
static uint64_t dry_free_blocks(const struct mk *m)
{
	uint64_t used = m->first_data, n = 0;

	for (uint32_t g = 0; g < m->ngroups; g++)
		used += backup_len(m, g);
	used += (uint64_t)m->ngroups * (2 + m->itb);
	n = (uint64_t)m->journal_blocks + m->fc_blocks;
	used += n + (m->extents ? (n / MK_MAX_EXTENT_LEN > 4 ? 1 : 0) : indirect_count(m, n));
	used += 1 + lpf_blocks(m) + (HAS_COMPAT(m, RESIZE_INODE) ? 1 : 0);
	used += m->orphan_blocks + (m->extents ? 0 : indirect_count(m, m->orphan_blocks));
	return m->blocks - used;
}

int uext4_mkfs(const char *path, const struct uext4_mkfs_opts *o, struct uext4_mkfs_geometry *out)
{
	struct uext4_mkfs_opts none = { 0 };
	struct mk m = { 0 };
	uint64_t bytes = 0, free_blocks = 0;
	uint32_t free_inodes = 0;
	int created = 0, err;

	fs_clear_err();
	if (!path)
		return fs_err(EINVAL, "uext4_mkfs: no image path given");
	m.o = o ? o : &none;
	m.path = path;
	m.fd = -1;
	m.jdev.fd = -1;
	m.base = m.o->offset;
	m.now = m.o->use_fixed_time ? m.o->fixed_time : (int64_t)time(NULL);
	if (m.now < 0)
		return fs_err(EINVAL, "mkfs: time %lld is before 1970", (long long)m.now);
	if (m.o->label && strlen(m.o->label) > 16)
		return fs_err(EINVAL, "-L %s: a label has at most 16 bytes", m.o->label);
	if (m.o->label)
		memcpy(m.label, m.o->label, strlen(m.o->label));
	if ((m.o->journal_device && (err = open_journal_device(&m))) ||
	    (err = open_target(&m, &bytes, &created)) || (err = setup_geometry(&m, bytes)) ||
	    (err = make_uuid(&m)))
		goto out;
	if (m.o->dry_run) {
		m.overhead = 0;
		fill_geometry(&m, out ? out : &(struct uext4_mkfs_geometry){ 0 },
			      dry_free_blocks(&m), m.inodes_count -
			      m.last_used_ino);
		if (out)
			out->created = created;
		goto out;
	}
	if (HAS_INCOMPAT(&m, JOURNAL_DEV)) {
		if ((err = make_journal_dev(&m)))
			goto out;
	} else {
		if ((err = build(&m, &free_blocks, &free_inodes)))
			goto out;
		fill_super(&m, &m.sb, free_blocks, free_inodes);
		if ((err = write_supers(&m, &m.sb)))
			goto out;
	}
	if (fdatasync(m.fd) < 0) {
		err = fs_err(errno, "%s: fdatasync failed: %s", path, strerror(errno));
		goto out;
	}
	if (m.o->journal_device && (err = add_journal_user(&m)))
		goto out;
	if (out) {
		fill_geometry(&m, out, free_blocks, free_inodes);
		out->created = created;
	}
out:
	mk_free(&m);
	if (err && created && !m.o->dry_run)
		unlink(path);
	return err;
}
