/*
 * verity.c - fs-verity on ext4: verified reads, enabling, measuring.
 *
 * Where ext4 keeps a verity file's metadata (fs/ext4/verity.c,
 * Documentation/filesystems/ext4/verity.rst), all past i_size:
 *   [0, i_size)            the data
 *   up to a 64 KiB boundary a hole (meta_pos = i_size rounded up to 64 KiB)
 *   meta_pos               the Merkle tree, top level first: tree block n
 *                          at meta_pos + n * block_size
 *   desc_pos               the descriptor (256 bytes, then the signature),
 *                          at the first file-system block boundary after
 *                          the tree
 *   last 4 bytes of the last mapped block: the descriptor's size (le32),
 *   found through the end of the last extent.
 * The hashes (fs/verity, Documentation/filesystems/fsverity.rst): a block
 * hashes as H(salt zero-padded to the hash's block size || block); the last
 * data block is zero-padded; a tree block holds its children's hashes,
 * zero-padded.  The root hash is the hash of the one top tree block (of
 * the one data block of a one-block file, zeros for an empty one).  The
 * file digest is H(the 256-byte descriptor with sig_size 0).
 *
 * Reads are checked as the kernel's verify.c: a data block's hash against
 * its tree block, each tree block against its parent up to the first one
 * already verified (cached in memory, immutable) or to the root hash.
 */
#include "balloc.h"
#include "error.h"
#include "file.h"
#include "flags.h"
#include "inode.h"
#include "internal.h"
#include "lock.h"
#include "ondisk.h"
#include "orphan.h"
#include "trans.h"
#include "verity.h"

#include <uext4.h>

#include <errno.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define VERITY_META_ALIGN 65536u   /* ext4_verity_metadata_pos() */
#define VERITY_MAX_LEVELS 8        /* FS_VERITY_MAX_LEVELS */
#define VERITY_DESC_SIZE 256u      /* struct fsverity_descriptor */
#define VERITY_MAX_DESC 16384u     /* FS_VERITY_MAX_DESCRIPTOR_SIZE */
#define VERITY_MAX_SALT 32u
#define VERITY_MAX_SIG (VERITY_MAX_DESC - VERITY_DESC_SIZE)
/* Verified tree blocks kept in memory per file (64 MiB of 4 KiB blocks);
 * a larger tree is checked from the root on every read. */
#define VERITY_CACHE_BLOCKS 16384u
#define VERITY_IO_CHUNK (1u << 20) /* bytes read or written at a time */

/* The on-disk descriptor (the kernel's private struct fsverity_descriptor:
 * __reserved_0x04 of the uapi one is sig_size). */
struct verity_desc {
	uint8_t version;            /* 1 */
	uint8_t hash_algorithm;     /* UEXT4_VERITY_SHA256 / _SHA512 */
	uint8_t log_blocksize;
	uint8_t salt_size;
	uint32_t sig_size;          /* le: bytes of signature after the descriptor */
	uint64_t data_size;         /* le: i_size */
	uint8_t root_hash[64];
	uint8_t salt[32];
	uint8_t reserved[144];      /* zeros */
};
_Static_assert(sizeof(struct verity_desc) == VERITY_DESC_SIZE, "fsverity_descriptor");

/* The shape of one file's tree (fsverity_init_merkle_tree_params()). */
struct verity_params {
	const EVP_MD *md;
	unsigned alg, digest_size, log_bs, log_arity;
	uint32_t bs;
	uint8_t salt_pad[128];      /* the salt, zero-padded to the hash's block size */
	unsigned salt_pad_len;      /* 0: no salt */
	uint64_t data_size, data_blocks;
	unsigned levels;            /* 0 for files of one block or none */
	uint64_t level_start[VERITY_MAX_LEVELS]; /* first tree block of each level, 0 lowest */
	uint64_t tree_blocks;
};

/* Immutable once published in inode->verity, but for blocks[]: each entry
 * NULL until a verified copy of that tree block is set by CAS (then
 * immutable; a loser frees its copy). */
struct verity_info {
	struct verity_params p;
	uint8_t root_hash[64];
	uint8_t digest[64];         /* the file digest (measure) */
	uint64_t meta_pos, desc_pos;
	uint32_t sig_size;
	struct verity_desc desc;    /* as on disk */
	uint64_t cached;            /* entries in blocks[] (0: no cache) */
	_Atomic(uint8_t *) blocks[];
};

/* ------------------------------------------------------------ hashing */

static int params_init(struct uext4_fs *fs, const struct inode *inode, struct verity_params *p,
		       unsigned alg, unsigned log_bs, const void *salt, unsigned salt_size,
		       uint64_t data_size)
{
	long page = sysconf(_SC_PAGESIZE);
	unsigned md_block;
	uint64_t blocks;

	memset(p, 0, sizeof(*p));
	if (alg == UEXT4_VERITY_SHA256) {
		p->md = EVP_sha256(), p->digest_size = 32, md_block = 64;
	} else if (alg == UEXT4_VERITY_SHA512) {
		p->md = EVP_sha512(), p->digest_size = 64, md_block = 128;
	} else {
		return fs_err(EINVAL, "verity: inode %llu: unknown hash algorithm %u",
			      (unsigned long long)inode->ino, alg);
	}
	/* 1 KiB up to the page and the file-system block, as the kernel. */
	if (log_bs < 10 || log_bs > 16 || (1ul << log_bs) > (unsigned long)(page > 0 ? page : 4096) ||
	    (1u << log_bs) > fs->block_size)
		return fs_err(EINVAL, "verity: inode %llu: Merkle tree block size %llu unsupported "
			      "(1024 up to the page size and the block size %u)",
			      (unsigned long long)inode->ino, 1ull << MIN(log_bs, 63u),
			      fs->block_size);
	if (salt_size > VERITY_MAX_SALT)
		return fs_err(EMSGSIZE, "verity: salt of %u bytes (at most 32)", salt_size);
	p->alg = alg;
	p->log_bs = log_bs;
	p->bs = 1u << log_bs;
	p->log_arity = log_bs - (unsigned)__builtin_ctz(p->digest_size);
	if (salt_size) {
		memcpy(p->salt_pad, salt, salt_size);
		p->salt_pad_len = md_block;
	}
	p->data_size = data_size;
	p->data_blocks = blocks = (data_size + p->bs - 1) >> log_bs;
	while (blocks > 1) {
		if (p->levels >= VERITY_MAX_LEVELS)
			return fs_err(EFBIG, "verity: inode %llu: too large for a Merkle tree",
				      (unsigned long long)inode->ino);
		blocks = (blocks + (1ull << p->log_arity) - 1) >> p->log_arity;
		p->level_start[p->levels++] = blocks;
	}
	for (int l = (int)p->levels - 1; l >= 0; l--) {
		uint64_t n = p->level_start[l];

		p->level_start[l] = p->tree_blocks;
		p->tree_blocks += n;
	}
	return 0;
}

/* out = H(salt || block) of one Merkle block. */
static int hash_block(const struct verity_params *p, EVP_MD_CTX *ctx, const uint8_t *block,
		      uint8_t *out)
{
	if (EVP_DigestInit_ex(ctx, p->md, NULL) != 1 ||
	    (p->salt_pad_len && EVP_DigestUpdate(ctx, p->salt_pad, p->salt_pad_len) != 1) ||
	    EVP_DigestUpdate(ctx, block, p->bs) != 1 || EVP_DigestFinal_ex(ctx, out, NULL) != 1)
		return fs_err(EIO, "verity: the hash (libcrypto) failed");
	return 0;
}

static EVP_MD_CTX *ctx_new(void)
{
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();

	if (!ctx)
		fs_err(ENOMEM, "verity: out of memory for a hash context");
	return ctx;
}

/* ------------------------------------------------- loading the metadata */

static uint64_t meta_pos_of(uint64_t size)
{
	return (size + VERITY_META_ALIGN - 1) & ~(uint64_t)(VERITY_META_ALIGN - 1);
}

/* The end (in blocks) of the file's last extent, 0 if none past from. */
static int last_extent_end(struct uext4_fs *fs, struct inode *inode, uint64_t from,
			   uint64_t *end)
{
	uint64_t lblk = from;

	*end = 0;
	while (lblk < (1ull << 32)) {
		struct block_map m;
		int err = inode_map(fs, inode, lblk, (1ull << 32) - lblk, &m);

		if (err)
			return err;
		if (m.pblk && m.len)
			*end = lblk + m.len;
		lblk += m.len ? m.len : 1;
	}
	return 0;
}

static int bad_meta(const struct inode *inode, const char *what)
{
	return fs_err(EUCLEAN, "verity: inode %llu: %s", (unsigned long long)inode->ino, what);
}

/* Where the descriptor is and how long (ext4_get_verity_descriptor_location()). */
static int find_descriptor(struct uext4_fs *fs, struct inode *inode, uint64_t *pos,
			   uint32_t *size)
{
	uint64_t meta = meta_pos_of(inode->size), end, size_pos;
	unsigned shift = (unsigned)__builtin_ctz(fs->block_size);
	uint32_t le;
	ssize_t n;
	int err;

	if (!(inode->flags & EXT4_EXTENTS_FL) || (inode->flags & EXT4_INLINE_DATA_FL))
		return bad_meta(inode, "a verity file must be extent-mapped");
	if ((err = last_extent_end(fs, inode, meta >> shift, &end)))
		return err;
	size_pos = end << shift;
	if (size_pos < meta + sizeof(le))
		return bad_meta(inode, "no verity descriptor past the end of the file "
				"(the metadata is missing or cut off)");
	size_pos -= sizeof(le);
	if ((n = file_read_raw(fs, inode, &le, sizeof(le), size_pos)) < 0)
		return (int)n;
	*size = le32(le);
	if (*size < VERITY_DESC_SIZE || *size > VERITY_MAX_DESC || *size > size_pos)
		return bad_meta(inode, "the verity descriptor's size is out of range "
				"(the metadata is damaged or cut off)");
	*pos = (size_pos - *size) & ~(uint64_t)(fs->block_size - 1);
	if (*pos < meta)
		return bad_meta(inode, "the verity descriptor lies before the metadata");
	return 0;
}

static bool all_zero(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return false;
	return true;
}

/* Check a descriptor as fsverity_create_info() does; set up vi->p. */
static int parse_descriptor(struct uext4_fs *fs, struct inode *inode, struct verity_info *vi,
			    uint32_t desc_size)
{
	const struct verity_desc *d = &vi->desc;
	int err;

	if (d->version != 1)
		return bad_meta(inode, "unknown verity descriptor version");
	if (!all_zero(d->reserved, sizeof(d->reserved)))
		return bad_meta(inode, "reserved bits set in the verity descriptor");
	vi->sig_size = le32(d->sig_size);
	if (vi->sig_size > desc_size - VERITY_DESC_SIZE)
		return bad_meta(inode, "the verity signature runs past the descriptor");
	if (le64(d->data_size) != inode->size)
		return bad_meta(inode, "the verity descriptor's data size is not i_size");
	if (d->salt_size > VERITY_MAX_SALT)
		return bad_meta(inode, "the verity salt is too long");
	if ((err = params_init(fs, inode, &vi->p, d->hash_algorithm, d->log_blocksize, d->salt,
			       d->salt_size, inode->size)))
		return err == -EINVAL ? bad_meta(inode, "the verity descriptor's parameters are "
						 "unsupported") : err;
	if (vi->meta_pos + (vi->p.tree_blocks << vi->p.log_bs) > vi->desc_pos)
		return bad_meta(inode, "the Merkle tree overlaps the verity descriptor");
	memcpy(vi->root_hash, d->root_hash, vi->p.digest_size);
	return 0;
}

static int file_digest(const struct verity_params *p, const struct verity_desc *d, uint8_t *out)
{
	struct verity_desc copy = *d;

	copy.sig_size = 0;
	if (EVP_Digest(&copy, sizeof(copy), out, NULL, p->md, NULL) != 1)
		return fs_err(EIO, "verity: the hash (libcrypto) failed");
	return 0;
}

/* Read and check the descriptor.  Caller holds inode->lock. */
static int load_info(struct uext4_fs *fs, struct inode *inode, struct verity_info **out)
{
	struct verity_info *vi;
	uint64_t pos = 0;
	uint32_t size = 0;
	ssize_t n;
	int err;

	if ((err = find_descriptor(fs, inode, &pos, &size)))
		return err;
	vi = calloc(1, sizeof(*vi));
	if (!vi)
		return fs_err(ENOMEM, "verity: out of memory");
	vi->meta_pos = meta_pos_of(inode->size);
	vi->desc_pos = pos;
	if ((n = file_read_raw(fs, inode, &vi->desc, sizeof(vi->desc), pos)) < 0) {
		free(vi);
		return (int)n;
	}
	if ((err = parse_descriptor(fs, inode, vi, size)) ||
	    (err = file_digest(&vi->p, &vi->desc, vi->digest))) {
		free(vi);
		return err;
	}
	if (vi->p.tree_blocks <= VERITY_CACHE_BLOCKS) {
		struct verity_info *big = realloc(vi, sizeof(*vi) + vi->p.tree_blocks *
						  sizeof(vi->blocks[0]));

		if (!big) {
			free(vi);
			return fs_err(ENOMEM, "verity: out of memory");
		}
		vi = big;
		vi->cached = vi->p.tree_blocks;
		for (uint64_t i = 0; i < vi->cached; i++)
			atomic_init(&vi->blocks[i], NULL);
	}
	*out = vi;
	return 0;
}

void verity_release(struct inode *inode)
{
	struct verity_info *vi = atomic_exchange(&inode->verity, NULL);

	if (!vi)
		return;
	for (uint64_t i = 0; i < vi->cached; i++)
		free(atomic_load_explicit(&vi->blocks[i], memory_order_relaxed));
	free(vi);
}

/* The inode's verity state, loaded once.  Caller holds inode->lock. */
static int get_info(struct uext4_fs *fs, struct inode *inode, struct verity_info **out)
{
	struct verity_info *vi = atomic_load_explicit(&inode->verity, memory_order_acquire);
	struct verity_info *none = NULL;
	int err;

	if (vi) {
		*out = vi;
		return 0;
	}
	if (!(inode->flags & EXT4_VERITY_FL))
		return fs_err(ENODATA, "verity: inode %llu is not an fs-verity file",
			      (unsigned long long)inode->ino);
	if ((err = load_info(fs, inode, &vi)))
		return err;
	if (!atomic_compare_exchange_strong_explicit(&inode->verity, &none, vi,
						     memory_order_acq_rel, memory_order_acquire)) {
		struct inode tmp = {0};

		atomic_init(&tmp.verity, vi);
		verity_release(&tmp);   /* another reader published first */
		vi = none;
	}
	*out = vi;
	return 0;
}

/* ------------------------------------------------------ verified reads */

/* Tree block tblk, verified (from the cache) or NULL. */
static const uint8_t *cached_block(struct verity_info *vi, uint64_t tblk)
{
	return tblk < vi->cached ? atomic_load_explicit(&vi->blocks[tblk], memory_order_acquire)
				 : NULL;
}

/* Keep a verified tree block; *buf is the cache's copy after. */
static void cache_block(struct verity_info *vi, uint64_t tblk, uint8_t **buf)
{
	uint8_t *none = NULL;

	if (tblk >= vi->cached)
		return;
	if (atomic_compare_exchange_strong_explicit(&vi->blocks[tblk], &none, *buf,
						    memory_order_acq_rel, memory_order_acquire)) {
		*buf = NULL;            /* the cache owns it */
		return;
	}
	free(*buf);
	*buf = NULL;
}

struct level_pos {
	uint64_t tblk;              /* tree block holding the hash */
	unsigned hoff;              /* the hash's offset in it */
};

static struct level_pos hash_pos(const struct verity_params *p, uint64_t dblk, unsigned level)
{
	uint64_t j = dblk >> (level * p->log_arity);   /* index of the block hashed */

	return (struct level_pos){
		.tblk = p->level_start[level] + (j >> p->log_arity),
		.hoff = (unsigned)(j & ((1ull << p->log_arity) - 1)) * p->digest_size,
	};
}

static int mismatch(const struct inode *inode, const char *what, uint64_t n)
{
	return fs_err(EIO, "verity: inode %llu: %s %llu does not match its Merkle tree hash",
		      (unsigned long long)inode->ino, what, (unsigned long long)n);
}

/* Check data block dblk (p.bs bytes) against the tree (the kernel's
 * verify_data_block()): read up the levels to a verified block or the
 * root, then check down.  Caller holds inode->lock. */
static int verify_data_block(struct uext4_fs *fs, struct inode *inode, struct verity_info *vi,
			     EVP_MD_CTX *ctx, uint64_t dblk, const uint8_t *data)
{
	const struct verity_params *p = &vi->p;
	uint8_t *chain[VERITY_MAX_LEVELS] = {0};
	uint8_t got[64];
	const uint8_t *want = vi->root_hash;
	unsigned n = 0;
	int err = 0;

	for (; n < p->levels; n++) {
		struct level_pos at = hash_pos(p, dblk, n);
		const uint8_t *c = cached_block(vi, at.tblk);
		ssize_t r;

		if (c) {
			want = c + at.hoff;
			break;
		}
		if (!(chain[n] = malloc(p->bs))) {
			err = fs_err(ENOMEM, "verity: out of memory");
			goto out;
		}
		r = file_read_raw(fs, inode, chain[n], p->bs, vi->meta_pos + (at.tblk << p->log_bs));
		if (r < 0) {
			err = (int)r;
			goto out;
		}
	}
	/* Down: each block read must hash to what its parent holds. */
	for (unsigned l = n; l-- > 0;) {
		struct level_pos at = hash_pos(p, dblk, l);

		if ((err = hash_block(p, ctx, chain[l], got)))
			goto out;
		if (memcmp(got, want, p->digest_size)) {
			err = mismatch(inode, "Merkle tree block", at.tblk);
			goto out;
		}
		want = chain[l] + at.hoff;
		if (at.tblk < vi->cached) {   /* verified: the cache's copy from now on */
			cache_block(vi, at.tblk, &chain[l]);
			want = cached_block(vi, at.tblk) + at.hoff;
		}
	}
	if ((err = hash_block(p, ctx, data, got)))
		goto out;
	if (memcmp(got, want, p->digest_size))
		err = mismatch(inode, "data block", dblk);
out:
	for (unsigned l = 0; l < VERITY_MAX_LEVELS; l++)
		free(chain[l]);
	return err;
}

/* Read whole Merkle blocks [first, first+count) of data into tmp (zeros
 * past i_size) and check each. */
static int read_verified(struct uext4_fs *fs, struct inode *inode, struct verity_info *vi,
			 EVP_MD_CTX *ctx, uint8_t *tmp, uint64_t first, uint64_t count)
{
	const struct verity_params *p = &vi->p;
	uint64_t start = first << p->log_bs, len = count << p->log_bs;
	ssize_t r = file_read_raw(fs, inode, tmp, (size_t)len, start);

	if (r < 0)
		return (int)r;
	if (start + len > inode->size)   /* the last block: zeros past the end, as a page */
		memset(tmp + (inode->size - start), 0, (size_t)(start + len - inode->size));
	for (uint64_t i = 0; i < count; i++) {
		int err = verify_data_block(fs, inode, vi, ctx, first + i, tmp + (i << p->log_bs));

		if (err)
			return err;
	}
	return 0;
}

static ssize_t pread_locked(struct uext4_fs *fs, struct inode *inode, struct verity_info *vi,
			    uint8_t *buf, size_t size, uint64_t off)
{
	const struct verity_params *p = &vi->p;
	uint64_t end = off + size;
	/* The Merkle blocks the range covers, up to a chunk at a time. */
	uint64_t span = (((end - 1) >> p->log_bs) - (off >> p->log_bs) + 1) << p->log_bs;
	size_t chunk = (size_t)MIN(span, (uint64_t)VERITY_IO_CHUNK);
	uint64_t per = chunk >> p->log_bs;
	uint8_t *tmp = malloc(chunk);
	EVP_MD_CTX *ctx = ctx_new();
	size_t done = 0;
	int err = 0;

	if (!tmp || !ctx) {
		err = ctx ? fs_err(ENOMEM, "verity: out of memory") : -ENOMEM;
		goto out;
	}
	while (off + done < end) {
		uint64_t pos = off + done, first = pos >> p->log_bs;
		uint64_t last = (end - 1) >> p->log_bs, count = MIN(last - first + 1, per);
		uint64_t skip = pos - (first << p->log_bs);
		size_t n = (size_t)MIN((count << p->log_bs) - skip, end - pos);

		if ((err = read_verified(fs, inode, vi, ctx, tmp, first, count)))
			break;
		memcpy(buf + done, tmp + skip, n);
		done += n;
	}
out:
	free(tmp);
	EVP_MD_CTX_free(ctx);
	return err ? err : (ssize_t)done;   /* no short read over a bad block: FUSE hides it */
}

ssize_t verity_pread(struct uext4_fs *fs, struct inode *inode, void *buf, size_t size,
		     uint64_t off)
{
	struct verity_info *vi;
	ssize_t ret;
	int err;

	urw_rdlock(&inode->lock);
	if (!(inode->flags & EXT4_VERITY_FL)) {
		urw_unlock(&inode->lock);
		return file_pread(fs, inode, buf, size, off);
	}
	if (size > SSIZE_MAX)
		size = SSIZE_MAX;
	if (off >= inode->size || size == 0) {
		urw_unlock(&inode->lock);
		return 0;
	}
	size = (size_t)MIN((uint64_t)size, inode->size - off);
	if ((err = get_info(fs, inode, &vi)))
		ret = err;
	else
		ret = pread_locked(fs, inode, vi, buf, size, off);
	urw_unlock(&inode->lock);
	return ret;
}

/* ------------------------------------------------------------ enabling */

/* Hash data blocks, then each level from the level below; tree laid out
 * as on disk (top level first).  root gets the root hash. */
static int build_tree(struct uext4_fs *fs, struct inode *inode, const struct verity_params *p,
		      uint8_t *tree, uint8_t *root)
{
	uint64_t per = VERITY_IO_CHUNK >> p->log_bs;
	uint8_t *tmp = malloc(VERITY_IO_CHUNK);
	EVP_MD_CTX *ctx = ctx_new();
	uint8_t *level0 = p->levels ? tree + (p->level_start[0] << p->log_bs) : root;
	int err = 0;

	memset(root, 0, 64);
	if (!tmp || !ctx) {
		err = ctx ? fs_err(ENOMEM, "verity: out of memory") : -ENOMEM;
		goto out;
	}
	for (uint64_t b = 0; b < p->data_blocks && !err; b += per) {
		uint64_t count = MIN(per, p->data_blocks - b), start = b << p->log_bs;
		uint64_t len = count << p->log_bs;
		ssize_t r = file_read_raw(fs, inode, tmp, (size_t)len, start);

		if (r < 0) {
			err = (int)r;
			break;
		}
		if (start + len > p->data_size)
			memset(tmp + (p->data_size - start), 0, (size_t)(start + len - p->data_size));
		for (uint64_t i = 0; i < count && !err; i++)
			err = hash_block(p, ctx, tmp + (i << p->log_bs),
					 level0 + (b + i) * p->digest_size);
	}
	for (unsigned l = 1; l < p->levels && !err; l++) {
		uint64_t below = (l == 1 ? p->tree_blocks : p->level_start[l - 2]) -
				 p->level_start[l - 1];

		for (uint64_t i = 0; i < below && !err; i++)
			err = hash_block(p, ctx, tree + ((p->level_start[l - 1] + i) << p->log_bs),
					 tree + (p->level_start[l] << p->log_bs) + i * p->digest_size);
	}
	if (!err && p->levels)
		err = hash_block(p, ctx, tree, root);   /* the top block is tree block 0 */
out:
	free(tmp);
	EVP_MD_CTX_free(ctx);
	return err;
}

/* Write bytes past i_size, leaving i_size and the times as they were
 * (the kernel's pagecache_write() beyond EOF).  Caller holds inode->lock. */
static int write_past_eof(struct uext4_fs *fs, struct inode *inode, const uint8_t *buf,
			  uint64_t len, uint64_t off)
{
	for (uint64_t done = 0; done < len;) {
		size_t n = (size_t)MIN(len - done, (uint64_t)VERITY_IO_CHUNK);
		uint64_t size = inode->size;
		struct timespec mtime = inode->mtime, ctime = inode->ctime;
		struct handle *h;
		int err;

		if ((err = handle_begin(fs, &h)))
			return err;
		err = file_write_locked(h, inode, buf + done, n, off + done);
		inode->size = size;
		inode->mtime = mtime;
		inode->ctime = ctime;
		err = first_err(err, inode_write(h, inode));
		if ((err = first_err(err, handle_end(h))))
			return err;
		done += n;
	}
	return 0;
}

/* The descriptor, the signature, zeros, and the le32 size at the end of
 * the last block (ext4_write_verity_descriptor()). */
static int write_descriptor(struct uext4_fs *fs, struct inode *inode, const struct verity_desc *d,
			    const void *sig, uint32_t sig_size, uint64_t desc_pos)
{
	uint32_t desc_size = VERITY_DESC_SIZE + sig_size, le = cpu_to_le32(desc_size);
	uint64_t bmask = fs->block_size - 1;
	uint64_t total = ((desc_size + sizeof(le) + bmask) & ~bmask);
	uint8_t *buf = calloc(1, total);
	int err;

	if (!buf)
		return fs_err(ENOMEM, "verity: out of memory");
	memcpy(buf, d, sizeof(*d));
	if (sig_size)
		memcpy(buf + VERITY_DESC_SIZE, sig, sig_size);
	memcpy(buf + total - sizeof(le), &le, sizeof(le));
	err = write_past_eof(fs, inode, buf, total, desc_pos);
	free(buf);
	return err;
}

static int check_enable_args(struct uext4_fs *fs, const struct uext4_verity_enable *a)
{
	if (fs->read_only)
		return fs_err(EROFS, "verity: the file system is mounted read-only");
	if (!FS_HAS_RO_COMPAT(fs, VERITY))
		return fs_err(EOPNOTSUPP, "verity: the file system lacks the verity feature "
			      "(tune2fs -O verity, or uext4 mkfs -O verity)");
	if (a->block_size & (a->block_size - 1))
		return fs_err(EINVAL, "verity: Merkle tree block size %u is not a power of 2",
			      a->block_size);
	if (a->salt_size > VERITY_MAX_SALT)
		return fs_err(EMSGSIZE, "verity: salt of %u bytes (at most 32)", a->salt_size);
	if (a->sig_size > VERITY_MAX_SIG)
		return fs_err(EMSGSIZE, "verity: signature of %u bytes (at most %u)", a->sig_size,
			      VERITY_MAX_SIG);
	return 0;
}

/* ext4_begin_enable_verity()'s checks on the inode (locked). */
static int check_enable_inode(const struct inode *inode)
{
	unsigned long long ino = (unsigned long long)inode->ino;

	if (S_ISDIR(inode->mode))
		return fs_err(EISDIR, "verity: inode %llu is a directory", ino);
	if (!S_ISREG(inode->mode))
		return fs_err(EINVAL, "verity: inode %llu is not a regular file", ino);
	if (inode->flags & EXT4_VERITY_FL)
		return fs_err(EEXIST, "verity: inode %llu is already an fs-verity file", ino);
	if (inode->flags & (EXT4_APPEND_FL | EXT4_IMMUTABLE_FL))
		return flags_refuse(inode, "enable verity");
	if (inode->flags & EXT4_INLINE_DATA_FL)
		return fs_err(EOPNOTSUPP, "verity: inode %llu has inline data (not supported "
			      "here; write it past 60 bytes first)", ino);
	if (!(inode->flags & EXT4_EXTENTS_FL))
		return fs_err(EOPNOTSUPP, "verity: inode %llu is block-mapped: ext4 keeps "
			      "verity metadata only in extent-mapped files", ino);
	return 0;
}

/* Drop what lies past i_size and put the inode on the orphan list, so a
 * crash before the flag is set leaves the file as it was (orphan cleanup
 * truncates to i_size). */
static int begin_enable(struct uext4_fs *fs, struct inode *inode)
{
	struct handle *h;
	int err;

	if (inode->pa)
		balloc_release_prealloc(fs, inode);
	if ((err = handle_begin(fs, &h)))
		return err;
	err = inode_truncate_blocks(h, inode, DIV_ROUND_UP(inode->size, fs->block_size));
	err = first_err(err, inode_write(h, inode));
	if (!err)
		err = orphan_add(h, inode);
	return first_err(err, handle_end(h));
}

/* One transaction: off the orphan list and, on success, the flag; on
 * failure the metadata written is freed again. */
static int end_enable(struct uext4_fs *fs, struct inode *inode, bool ok)
{
	struct handle *h;
	int err;

	if ((err = handle_begin(fs, &h)))
		return err;
	if (ok) {
		inode->flags |= EXT4_VERITY_FL;
	} else {
		err = inode_truncate_blocks(h, inode, DIV_ROUND_UP(inode->size, fs->block_size));
	}
	err = first_err(err, orphan_del(h, inode));
	err = first_err(err, inode_write(h, inode));
	return first_err(err, handle_end(h));
}

static int enable_locked(struct uext4_fs *fs, struct inode *inode,
			 const struct uext4_verity_enable *a)
{
	uint32_t bs = a->block_size ? a->block_size : MIN(4096u, fs->block_size);
	unsigned alg = a->hash_algorithm ? a->hash_algorithm : UEXT4_VERITY_SHA256;
	struct verity_params p;
	struct verity_desc d = {0};
	uint8_t *tree = NULL;
	uint64_t meta, tree_bytes;
	int err;

	if ((err = check_enable_inode(inode)) ||
	    (err = params_init(fs, inode, &p, alg, (unsigned)__builtin_ctz(bs), a->salt,
			       a->salt_size, inode->size)))
		return err;
	tree_bytes = p.tree_blocks << p.log_bs;
	if (tree_bytes && !(tree = calloc(1, tree_bytes)))
		return fs_err(ENOMEM, "verity: out of memory for a Merkle tree of %llu bytes",
			      (unsigned long long)tree_bytes);
	d.version = 1;
	d.hash_algorithm = (uint8_t)alg;
	d.log_blocksize = (uint8_t)p.log_bs;
	d.salt_size = (uint8_t)a->salt_size;
	d.sig_size = cpu_to_le32(a->sig_size);
	d.data_size = cpu_to_le64(inode->size);
	if (a->salt_size)
		memcpy(d.salt, a->salt, a->salt_size);
	meta = meta_pos_of(inode->size);
	if ((err = build_tree(fs, inode, &p, tree, d.root_hash)) ||
	    (err = begin_enable(fs, inode))) {
		free(tree);
		return err;
	}
	if (!(err = write_past_eof(fs, inode, tree, tree_bytes, meta)))
		err = write_descriptor(fs, inode, &d, a->sig, a->sig_size,
				       (meta + tree_bytes + fs->block_size - 1) &
					       ~(uint64_t)(fs->block_size - 1));
	free(tree);
	return first_err(err, end_enable(fs, inode, err == 0));
}

int verity_enable(struct uext4_fs *fs, struct inode *inode, const struct uext4_verity_enable *a)
{
	int err = check_enable_args(fs, a);

	if (err)
		return err;
	urw_wrlock(&inode->lock);
	err = enable_locked(fs, inode, a);
	urw_unlock(&inode->lock);
	return err;
}

/* ---------------------------------------------- measuring, metadata */

int verity_measure(struct uext4_fs *fs, struct inode *inode, struct uext4_verity_digest *d)
{
	struct verity_info *vi;
	int err;

	urw_rdlock(&inode->lock);
	err = get_info(fs, inode, &vi);
	urw_unlock(&inode->lock);
	if (err)
		return err;
	d->algorithm = (uint16_t)vi->p.alg;
	d->size = (uint16_t)vi->p.digest_size;
	memset(d->digest, 0, sizeof(d->digest));
	memcpy(d->digest, vi->digest, vi->p.digest_size);
	return 0;
}

/* Bytes [off, off+len) of an area of size bytes: how many to copy. */
static size_t clip(uint64_t size, uint64_t off, size_t len)
{
	return off >= size ? 0 : (size_t)MIN((uint64_t)len, size - off);
}

static ssize_t read_metadata_locked(struct uext4_fs *fs, struct inode *inode,
				    struct verity_info *vi, int type, uint64_t off, void *buf,
				    size_t len)
{
	size_t n;

	switch (type) {
	case UEXT4_VERITY_MERKLE_TREE:
		n = clip(vi->p.tree_blocks << vi->p.log_bs, off, len);
		return n ? file_read_raw(fs, inode, buf, n, vi->meta_pos + off) : 0;
	case UEXT4_VERITY_DESCRIPTOR: {
		/* As the kernel hands it out: no signature, sig_size 0. */
		struct verity_desc d = vi->desc;

		d.sig_size = 0;
		n = clip(sizeof(d), off, len);
		if (n)
			memcpy(buf, (uint8_t *)&d + off, n);
		return (ssize_t)n;
	}
	case UEXT4_VERITY_SIGNATURE:
		if (!vi->sig_size)
			return fs_err(ENODATA, "verity: inode %llu has no signature",
				      (unsigned long long)inode->ino);
		n = clip(vi->sig_size, off, len);
		return n ? file_read_raw(fs, inode, buf, n, vi->desc_pos + VERITY_DESC_SIZE + off)
			 : 0;
	default:
		return fs_err(EINVAL, "verity: unknown metadata type %d", type);
	}
}

ssize_t verity_read_metadata(struct uext4_fs *fs, struct inode *inode, int type, uint64_t off,
			     void *buf, size_t len)
{
	struct verity_info *vi;
	ssize_t ret;
	int err;

	urw_rdlock(&inode->lock);
	if ((err = get_info(fs, inode, &vi)))
		ret = err;
	else
		ret = read_metadata_locked(fs, inode, vi, type, off, buf, len);
	urw_unlock(&inode->lock);
	return ret;
}
