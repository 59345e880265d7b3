/*
 * ondisk.h - ext4 on-disk structures and constants.
 *
 * Written from the format description in the kernel's
 * Documentation/filesystems/ext4/.  All multi-byte fields are little
 * endian on disk; read them through le16()/le32()/le64().
 */
#ifndef UEXT4_ONDISK_H
#define UEXT4_ONDISK_H

#include <stddef.h>
#include <stdint.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
static inline uint16_t le16(uint16_t v) { return __builtin_bswap16(v); }
static inline uint32_t le32(uint32_t v) { return __builtin_bswap32(v); }
static inline uint64_t le64(uint64_t v) { return __builtin_bswap64(v); }
#else
static inline uint16_t le16(uint16_t v) { return v; }
static inline uint32_t le32(uint32_t v) { return v; }
static inline uint64_t le64(uint64_t v) { return v; }
#endif
#define cpu_to_le16 le16
#define cpu_to_le32 le32
#define cpu_to_le64 le64

#define EXT4_SUPER_MAGIC 0xEF53
#define EXT4_SUPERBLOCK_OFFSET 1024
#define EXT4_MIN_BLOCK_SIZE 1024
#define EXT4_MAX_BLOCK_SIZE 65536
#define EXT4_GOOD_OLD_REV 0
#define EXT4_GOOD_OLD_INODE_SIZE 128
#define EXT4_GOOD_OLD_FIRST_INO 11

/* Special inodes */
#define EXT4_BAD_INO 1
#define EXT4_ROOT_INO 2
#define EXT4_USR_QUOTA_INO 3
#define EXT4_GRP_QUOTA_INO 4
#define EXT4_RESIZE_INO 7
#define EXT4_JOURNAL_INO 8

/* Compat features */
#define EXT4_FEATURE_COMPAT_DIR_PREALLOC 0x0001
#define EXT4_FEATURE_COMPAT_IMAGIC_INODES 0x0002
#define EXT4_FEATURE_COMPAT_HAS_JOURNAL 0x0004
#define EXT4_FEATURE_COMPAT_EXT_ATTR 0x0008
#define EXT4_FEATURE_COMPAT_RESIZE_INODE 0x0010
#define EXT4_FEATURE_COMPAT_DIR_INDEX 0x0020
#define EXT4_FEATURE_COMPAT_LAZY_BG 0x0040
#define EXT4_FEATURE_COMPAT_EXCLUDE_BITMAP 0x0100
#define EXT4_FEATURE_COMPAT_SPARSE_SUPER2 0x0200
#define EXT4_FEATURE_COMPAT_FAST_COMMIT 0x0400
#define EXT4_FEATURE_COMPAT_STABLE_INODES 0x0800
#define EXT4_FEATURE_COMPAT_ORPHAN_FILE 0x1000

/* Read-only compat features */
#define EXT4_FEATURE_RO_COMPAT_SPARSE_SUPER 0x0001
#define EXT4_FEATURE_RO_COMPAT_LARGE_FILE 0x0002
#define EXT4_FEATURE_RO_COMPAT_BTREE_DIR 0x0004
#define EXT4_FEATURE_RO_COMPAT_HUGE_FILE 0x0008
#define EXT4_FEATURE_RO_COMPAT_GDT_CSUM 0x0010
#define EXT4_FEATURE_RO_COMPAT_DIR_NLINK 0x0020
#define EXT4_FEATURE_RO_COMPAT_EXTRA_ISIZE 0x0040
#define EXT4_FEATURE_RO_COMPAT_HAS_SNAPSHOT 0x0080
#define EXT4_FEATURE_RO_COMPAT_QUOTA 0x0100
#define EXT4_FEATURE_RO_COMPAT_BIGALLOC 0x0200
#define EXT4_FEATURE_RO_COMPAT_METADATA_CSUM 0x0400
#define EXT4_FEATURE_RO_COMPAT_REPLICA 0x0800
#define EXT4_FEATURE_RO_COMPAT_READONLY 0x1000
#define EXT4_FEATURE_RO_COMPAT_PROJECT 0x2000
#define EXT4_FEATURE_RO_COMPAT_SHARED_BLOCKS 0x4000
#define EXT4_FEATURE_RO_COMPAT_VERITY 0x8000
#define EXT4_FEATURE_RO_COMPAT_ORPHAN_PRESENT 0x10000

/* Incompat features */
#define EXT4_FEATURE_INCOMPAT_COMPRESSION 0x0001
#define EXT4_FEATURE_INCOMPAT_FILETYPE 0x0002
#define EXT4_FEATURE_INCOMPAT_RECOVER 0x0004
#define EXT4_FEATURE_INCOMPAT_JOURNAL_DEV 0x0008
#define EXT4_FEATURE_INCOMPAT_META_BG 0x0010
#define EXT4_FEATURE_INCOMPAT_EXTENTS 0x0040
#define EXT4_FEATURE_INCOMPAT_64BIT 0x0080
#define EXT4_FEATURE_INCOMPAT_MMP 0x0100
#define EXT4_FEATURE_INCOMPAT_FLEX_BG 0x0200
#define EXT4_FEATURE_INCOMPAT_EA_INODE 0x0400
#define EXT4_FEATURE_INCOMPAT_DIRDATA 0x1000
#define EXT4_FEATURE_INCOMPAT_CSUM_SEED 0x2000
#define EXT4_FEATURE_INCOMPAT_LARGEDIR 0x4000
#define EXT4_FEATURE_INCOMPAT_INLINE_DATA 0x8000
#define EXT4_FEATURE_INCOMPAT_ENCRYPT 0x10000
#define EXT4_FEATURE_INCOMPAT_CASEFOLD 0x20000
/* s_encoding and s_encoding_flags of a casefold file system. */
#define EXT4_ENC_UTF8_12_1 1
#define EXT4_ENC_STRICT_MODE_FL 0x0001 /* refuse names that are not valid UTF-8 */

/* Superblock: 1024 bytes at byte offset 1024. */
struct ext4_super_block {
	uint32_t s_inodes_count;         /* 0x00 */
	uint32_t s_blocks_count_lo;
	uint32_t s_r_blocks_count_lo;
	uint32_t s_free_blocks_count_lo;
	uint32_t s_free_inodes_count;    /* 0x10 */
	uint32_t s_first_data_block;
	uint32_t s_log_block_size;
	uint32_t s_log_cluster_size;
	uint32_t s_blocks_per_group;     /* 0x20 */
	uint32_t s_clusters_per_group;
	uint32_t s_inodes_per_group;
	uint32_t s_mtime;
	uint32_t s_wtime;                /* 0x30 */
	uint16_t s_mnt_count;
	uint16_t s_max_mnt_count;
	uint16_t s_magic;                /* 0x38 */
	uint16_t s_state;
	uint16_t s_errors;
	uint16_t s_minor_rev_level;
	uint32_t s_lastcheck;            /* 0x40 */
	uint32_t s_checkinterval;
	uint32_t s_creator_os;
	uint32_t s_rev_level;
	uint16_t s_def_resuid;           /* 0x50 */
	uint16_t s_def_resgid;
	uint32_t s_first_ino;
	uint16_t s_inode_size;
	uint16_t s_block_group_nr;
	uint32_t s_feature_compat;
	uint32_t s_feature_incompat;     /* 0x60 */
	uint32_t s_feature_ro_compat;
	uint8_t s_uuid[16];              /* 0x68 */
	char s_volume_name[16];          /* 0x78 */
	char s_last_mounted[64];         /* 0x88 */
	uint32_t s_algorithm_usage_bitmap; /* 0xC8 */
	uint8_t s_prealloc_blocks;
	uint8_t s_prealloc_dir_blocks;
	uint16_t s_reserved_gdt_blocks;
	uint8_t s_journal_uuid[16];      /* 0xD0 */
	uint32_t s_journal_inum;         /* 0xE0 */
	uint32_t s_journal_dev;
	uint32_t s_last_orphan;
	uint32_t s_hash_seed[4];         /* 0xEC */
	uint8_t s_def_hash_version;      /* 0xFC */
	uint8_t s_jnl_backup_type;
	uint16_t s_desc_size;
	uint32_t s_default_mount_opts;   /* 0x100 */
	uint32_t s_first_meta_bg;
	uint32_t s_mkfs_time;
	uint32_t s_jnl_blocks[17];       /* 0x10C */
	uint32_t s_blocks_count_hi;      /* 0x150 */
	uint32_t s_r_blocks_count_hi;
	uint32_t s_free_blocks_count_hi;
	uint16_t s_min_extra_isize;      /* 0x15C */
	uint16_t s_want_extra_isize;
	uint32_t s_flags;                /* 0x160 */
	uint16_t s_raid_stride;
	uint16_t s_mmp_update_interval;
	uint64_t s_mmp_block;            /* 0x168 */
	uint32_t s_raid_stripe_width;    /* 0x170 */
	uint8_t s_log_groups_per_flex;
	uint8_t s_checksum_type;
	uint8_t s_encryption_level;
	uint8_t s_reserved_pad;
	uint64_t s_kbytes_written;       /* 0x178 */
	uint32_t s_snapshot_inum;        /* 0x180 */
	uint32_t s_snapshot_id;
	uint64_t s_snapshot_r_blocks_count;
	uint32_t s_snapshot_list;        /* 0x190 */
	uint32_t s_error_count;
	uint32_t s_first_error_time;
	uint32_t s_first_error_ino;
	uint64_t s_first_error_block;    /* 0x1A0 */
	uint8_t s_first_error_func[32];  /* 0x1A8 */
	uint32_t s_first_error_line;     /* 0x1C8 */
	uint32_t s_last_error_time;
	uint32_t s_last_error_ino;       /* 0x1D0 */
	uint32_t s_last_error_line;
	uint64_t s_last_error_block;     /* 0x1D8 */
	uint8_t s_last_error_func[32];   /* 0x1E0 */
	uint8_t s_mount_opts[64];        /* 0x200 */
	uint32_t s_usr_quota_inum;       /* 0x240 */
	uint32_t s_grp_quota_inum;
	uint32_t s_overhead_clusters;
	uint32_t s_backup_bgs[2];
	uint8_t s_encrypt_algos[4];      /* 0x254 */
	uint8_t s_encrypt_pw_salt[16];   /* 0x258 */
	uint32_t s_lpf_ino;              /* 0x268 */
	uint32_t s_prj_quota_inum;
	uint32_t s_checksum_seed;        /* 0x270 */
	uint8_t s_wtime_hi;
	uint8_t s_mtime_hi;
	uint8_t s_mkfs_time_hi;
	uint8_t s_lastcheck_hi;
	uint8_t s_first_error_time_hi;
	uint8_t s_last_error_time_hi;
	uint8_t s_first_error_errcode;
	uint8_t s_last_error_errcode;
	uint16_t s_encoding;             /* 0x27C */
	uint16_t s_encoding_flags;
	uint32_t s_orphan_file_inum;     /* 0x280 */
	uint32_t s_reserved[94];
	uint32_t s_checksum;             /* 0x3FC */
};
_Static_assert(sizeof(struct ext4_super_block) == 1024, "superblock size");
_Static_assert(offsetof(struct ext4_super_block, s_hash_seed) == 0xEC, "s_hash_seed");
_Static_assert(offsetof(struct ext4_super_block, s_log_groups_per_flex) == 0x174, "flex");
_Static_assert(offsetof(struct ext4_super_block, s_checksum_seed) == 0x270, "csum seed");
_Static_assert(offsetof(struct ext4_super_block, s_orphan_file_inum) == 0x280, "orphan");
_Static_assert(offsetof(struct ext4_super_block, s_checksum) == 0x3FC, "s_checksum");

/* The multi-mount protection block (s_mmp_block, -O mmp): 1024 bytes at
 * the start of its block.  The holder rewrites mmp_seq every
 * s_mmp_update_interval seconds; CLEAN: nobody holds it; FSCK: e2fsck
 * does.  The checksum (metadata_csum) is crc32c(csum seed) of the bytes
 * before it. */
struct mmp_struct {
	uint32_t mmp_magic;              /* EXT4_MMP_MAGIC */
	uint32_t mmp_seq;
	uint64_t mmp_time;               /* seconds, of the last write */
	uint8_t mmp_nodename[64];        /* the holder's host name */
	uint8_t mmp_bdevname[32];        /* the holder's name for the device */
	uint16_t mmp_check_interval;     /* seconds an opener waits, at least */
	uint16_t mmp_pad1;
	uint32_t mmp_pad2[226];
	uint32_t mmp_checksum;           /* 0x3FC */
};
_Static_assert(sizeof(struct mmp_struct) == 1024, "mmp size");
_Static_assert(offsetof(struct mmp_struct, mmp_check_interval) == 0x70, "mmp interval");
_Static_assert(offsetof(struct mmp_struct, mmp_checksum) == 0x3FC, "mmp checksum");
#define EXT4_MMP_MAGIC 0x004D4D50u
#define EXT4_MMP_SEQ_CLEAN 0xFF4D4D50u
#define EXT4_MMP_SEQ_FSCK 0xE24D4D50u
#define EXT4_MMP_SEQ_MAX 0xE24D4D4Fu     /* largest sequence a holder writes */
#define EXT4_MMP_UPDATE_INTERVAL 5       /* mke2fs's default s_mmp_update_interval */
#define EXT4_MMP_MAX_UPDATE_INTERVAL 300 /* the largest mke2fs accepts */
#define EXT4_MMP_MIN_CHECK_INTERVAL 5
#define EXT4_MMP_MAX_CHECK_INTERVAL 300
#define EXT4_MMP_CHECK_MULT 2

#define EXT4_CRC32C_CHKSUM 1
#define EXT4_VALID_FS 0x0001
#define EXT4_ERROR_FS 0x0002
#define EXT4_ORPHAN_FS 0x0004
/* s_flags */
#define EXT2_FLAGS_SIGNED_HASH 0x0001
#define EXT2_FLAGS_UNSIGNED_HASH 0x0002

/* Group descriptor: 32 bytes, or 64 with INCOMPAT_64BIT and s_desc_size >= 64. */
struct ext4_group_desc {
	uint32_t bg_block_bitmap_lo;
	uint32_t bg_inode_bitmap_lo;
	uint32_t bg_inode_table_lo;
	uint16_t bg_free_blocks_count_lo;
	uint16_t bg_free_inodes_count_lo;
	uint16_t bg_used_dirs_count_lo;
	uint16_t bg_flags;
	uint32_t bg_exclude_bitmap_lo;
	uint16_t bg_block_bitmap_csum_lo;
	uint16_t bg_inode_bitmap_csum_lo;
	uint16_t bg_itable_unused_lo;
	uint16_t bg_checksum;
	/* 64-byte descriptors only: */
	uint32_t bg_block_bitmap_hi;
	uint32_t bg_inode_bitmap_hi;
	uint32_t bg_inode_table_hi;
	uint16_t bg_free_blocks_count_hi;
	uint16_t bg_free_inodes_count_hi;
	uint16_t bg_used_dirs_count_hi;
	uint16_t bg_itable_unused_hi;
	uint32_t bg_exclude_bitmap_hi;
	uint16_t bg_block_bitmap_csum_hi;
	uint16_t bg_inode_bitmap_csum_hi;
	uint32_t bg_reserved;
};
_Static_assert(sizeof(struct ext4_group_desc) == 64, "gd size");
#define EXT4_MIN_DESC_SIZE 32
#define EXT4_MIN_DESC_SIZE_64BIT 64
#define EXT4_BG_INODE_UNINIT 0x0001
#define EXT4_BG_BLOCK_UNINIT 0x0002
#define EXT4_BG_INODE_ZEROED 0x0004

/* Inode */
#define EXT4_NDIR_BLOCKS 12
#define EXT4_IND_BLOCK 12
#define EXT4_DIND_BLOCK 13
#define EXT4_TIND_BLOCK 14
#define EXT4_N_BLOCKS 15

struct ext4_inode {
	uint16_t i_mode;           /* 0x00 */
	uint16_t i_uid;
	uint32_t i_size_lo;
	uint32_t i_atime;
	uint32_t i_ctime;
	uint32_t i_mtime;          /* 0x10 */
	uint32_t i_dtime;
	uint16_t i_gid;
	uint16_t i_links_count;
	uint32_t i_blocks_lo;
	uint32_t i_flags;          /* 0x20 */
	uint32_t i_version_lo;     /* osd1 */
	uint32_t i_block[EXT4_N_BLOCKS]; /* 0x28 */
	uint32_t i_generation;     /* 0x64 */
	uint32_t i_file_acl_lo;
	uint32_t i_size_high;
	uint32_t i_obso_faddr;     /* 0x70 */
	uint16_t i_blocks_high;    /* osd2 */
	uint16_t i_file_acl_high;
	uint16_t i_uid_high;
	uint16_t i_gid_high;
	uint16_t i_checksum_lo;
	uint16_t i_reserved;
	/* large inodes (s_inode_size > 128) */
	uint16_t i_extra_isize;    /* 0x80 */
	uint16_t i_checksum_hi;
	uint32_t i_ctime_extra;
	uint32_t i_mtime_extra;
	uint32_t i_atime_extra;
	uint32_t i_crtime;         /* 0x90 */
	uint32_t i_crtime_extra;
	uint32_t i_version_hi;
	uint32_t i_projid;
};
_Static_assert(offsetof(struct ext4_inode, i_block) == 0x28, "i_block");
_Static_assert(offsetof(struct ext4_inode, i_extra_isize) == 0x80, "extra_isize");
_Static_assert(sizeof(struct ext4_inode) == 0xA0, "inode size");
#define EXT4_INODE_CSUM_HI_END (offsetof(struct ext4_inode, i_checksum_hi) + 2)
#define EXT4_EPOCH_BITS 2
#define EXT4_EPOCH_MASK 3
/* The seconds an inode's time can hold (the kernel's EXT4_TIMESTAMP_MIN,
 * EXT4_EXTRA_TIMESTAMP_MAX, EXT4_NON_EXTRA_TIMESTAMP_MAX): signed 32 bits,
 * which the two epoch bits of a *_extra field extend upwards by 3 * 2^32,
 * from 1901-12-13 20:45:52 to 2038-01-19 03:14:07 or 2446-05-10 22:38:55. */
#define EXT4_TIME_MIN (-0x80000000LL)
#define EXT4_TIME_MAX_NO_EXTRA 0x7fffffffLL
#define EXT4_TIME_MAX_EXTRA 0x37fffffffLL

/* i_flags */
#define EXT4_SECRM_FL 0x00000001
#define EXT4_SYNC_FL 0x00000008
#define EXT4_IMMUTABLE_FL 0x00000010
#define EXT4_APPEND_FL 0x00000020
#define EXT4_NOATIME_FL 0x00000080
#define EXT4_INDEX_FL 0x00001000
#define EXT4_JOURNAL_DATA_FL 0x00004000
#define EXT4_TOPDIR_FL 0x00020000
#define EXT4_HUGE_FILE_FL 0x00040000
#define EXT4_EXTENTS_FL 0x00080000
#define EXT4_VERITY_FL 0x00100000
#define EXT4_EA_INODE_FL 0x00200000
#define EXT4_INLINE_DATA_FL 0x10000000
#define EXT4_PROJINHERIT_FL 0x20000000
#define EXT4_CASEFOLD_FL 0x40000000
#define EXT4_ENCRYPT_FL 0x00000800

/* Extents */
#define EXT4_EXT_MAGIC 0xF30A
struct ext4_extent_header {
	uint16_t eh_magic;
	uint16_t eh_entries;
	uint16_t eh_max;
	uint16_t eh_depth;
	uint32_t eh_generation;
};
struct ext4_extent {
	uint32_t ee_block;     /* first logical block */
	uint16_t ee_len;       /* > 32768: unwritten, length - 32768 */
	uint16_t ee_start_hi;
	uint32_t ee_start_lo;
};
struct ext4_extent_idx {
	uint32_t ei_block;
	uint32_t ei_leaf_lo;
	uint16_t ei_leaf_hi;
	uint16_t ei_unused;
};
struct ext4_extent_tail {
	uint32_t et_checksum;  /* crc32c(uuid+inum+igeneration+extentblock) */
};
#define EXT4_EXT_INIT_MAX_LEN 32768
#define EXT4_EXT_MAX_DEPTH 5

/* Directory entries */
#define EXT4_NAME_LEN 255
struct ext4_dir_entry_2 {
	uint32_t inode;
	uint16_t rec_len;
	uint8_t name_len;
	uint8_t file_type;
	char name[];
};
#define EXT4_FT_UNKNOWN 0
#define EXT4_FT_REG_FILE 1
#define EXT4_FT_DIR 2
#define EXT4_FT_CHRDEV 3
#define EXT4_FT_BLKDEV 4
#define EXT4_FT_FIFO 5
#define EXT4_FT_SOCK 6
#define EXT4_FT_SYMLINK 7
#define EXT4_FT_MAX 8
#define EXT4_FT_DIR_CSUM 0xDE
/* Fake dirent at the end of each leaf block with metadata_csum. */
struct ext4_dir_entry_tail {
	uint32_t det_reserved_zero1;
	uint16_t det_rec_len;      /* 12 */
	uint8_t det_reserved_zero2;
	uint8_t det_reserved_ft;   /* 0xDE */
	uint32_t det_checksum;
};
#define EXT4_DIR_REC_LEN(name_len) (((name_len) + 8 + 3) & ~3u)

/* htree */
struct dx_root_info {
	uint32_t reserved_zero;
	uint8_t hash_version;
	uint8_t info_length;       /* 8 */
	uint8_t indirect_levels;
	uint8_t unused_flags;
};
struct dx_entry {
	uint32_t hash;
	uint32_t block;
};
struct dx_countlimit {
	uint16_t limit;
	uint16_t count;
};
struct dx_tail {
	uint32_t dt_reserved;
	uint32_t dt_checksum;
};
#define DX_HASH_LEGACY 0
#define DX_HASH_HALF_MD4 1
#define DX_HASH_TEA 2
#define DX_HASH_LEGACY_UNSIGNED 3
#define DX_HASH_HALF_MD4_UNSIGNED 4
#define DX_HASH_TEA_UNSIGNED 5
#define DX_HASH_SIPHASH 6

/* Extended attributes */
#define EXT4_XATTR_MAGIC 0xEA020000
struct ext4_xattr_header {
	uint32_t h_magic;
	uint32_t h_refcount;
	uint32_t h_blocks;         /* must be 1 */
	uint32_t h_hash;
	uint32_t h_checksum;       /* crc32c(uuid+blocknr+xattrblock) */
	uint32_t h_reserved[3];
};
struct ext4_xattr_ibody_header {
	uint32_t h_magic;
};
struct ext4_xattr_entry {
	uint8_t e_name_len;
	uint8_t e_name_index;
	uint16_t e_value_offs;
	uint32_t e_value_inum;
	uint32_t e_value_size;
	uint32_t e_hash;
	char e_name[];
};
#define EXT4_XATTR_PAD 4
#define EXT4_XATTR_ROUND 3
#define EXT4_XATTR_LEN(name_len) (((name_len) + EXT4_XATTR_ROUND + sizeof(struct ext4_xattr_entry)) & ~EXT4_XATTR_ROUND)
#define EXT4_XATTR_SIZE(size) (((size) + EXT4_XATTR_ROUND) & ~EXT4_XATTR_ROUND)
#define EXT4_XATTR_INDEX_USER 1
#define EXT4_XATTR_INDEX_POSIX_ACL_ACCESS 2
#define EXT4_XATTR_INDEX_POSIX_ACL_DEFAULT 3
#define EXT4_XATTR_INDEX_TRUSTED 4
#define EXT4_XATTR_INDEX_LUSTRE 5
#define EXT4_XATTR_INDEX_SECURITY 6
#define EXT4_XATTR_INDEX_SYSTEM 7
#define EXT4_XATTR_INDEX_RICHACL 8
#define EXT4_XATTR_INDEX_ENCRYPTION 9
#define EXT4_XATTR_INDEX_HURD 10

/* Inline data: i_block holds the first 60 bytes, the rest lives in the
 * "system.data" in-inode xattr. */
#define EXT4_MIN_INLINE_DATA_SIZE 60
#define EXT4_INLINE_DOTDOT_SIZE 4

/* Orphan file block tail (Documentation/filesystems/ext4/orphan.rst) */
#define EXT4_ORPHAN_BLOCK_MAGIC 0x0b10ca04
struct ext4_orphan_block_tail {
	uint32_t ob_magic;
	uint32_t ob_checksum;      /* crc32c(csum_seed+inode_num+inode_gen+block) */
};

/* POSIX ACLs in the system.posix_acl_* xattrs (acl.c, xattr.c). */
/*
 * On disk (the kernel's fs/ext4/acl.h): a 4-byte header (version 1), then
 * entries of 4 bytes (tag, perm) for USER_OBJ/GROUP_OBJ/MASK/OTHER, or 8
 * bytes (tag, perm, id) for USER/GROUP, all little-endian.  getxattr(2)
 * uses the VFS format (include/uapi/linux/posix_acl_xattr.h): a 4-byte
 * header (version 2), then 8-byte entries (tag, perm, id), id = -1 unless
 * USER/GROUP.
 */
#define ACL_DISK_VERSION 1
#define ACL_XATTR_VERSION 2
#define ACL_TAG_USER_OBJ 0x01
#define ACL_TAG_USER 0x02
#define ACL_TAG_GROUP_OBJ 0x04
#define ACL_TAG_GROUP 0x08
#define ACL_TAG_MASK 0x10
#define ACL_TAG_OTHER 0x20
#define ACL_UNDEFINED_ID 0xFFFFFFFFu
#define ACL_SHORT_ENTRY 4
#define ACL_LONG_ENTRY 8
#define ACL_HDR 4

/* ---- fast commits (Documentation/filesystems/ext4/journal.rst, "Fast
 * commits"; fs/ext4/fast_commit.h): the area after the JBD2 log holds a
 * stream of little-endian tag-length-value records, never across a block
 * end.  HEAD opens the area; each fast commit ends with a TAIL whose crc
 * is crc32c(0, every record since the previous TAIL, this TAIL's tag,
 * length and tid) and whose length pads the block. */
#define EXT4_FC_TAG_ADD_RANGE 0x0001
#define EXT4_FC_TAG_DEL_RANGE 0x0002
#define EXT4_FC_TAG_CREAT 0x0003
#define EXT4_FC_TAG_LINK 0x0004
#define EXT4_FC_TAG_UNLINK 0x0005
#define EXT4_FC_TAG_INODE 0x0006
#define EXT4_FC_TAG_PAD 0x0007
#define EXT4_FC_TAG_TAIL 0x0008
#define EXT4_FC_TAG_HEAD 0x0009
#define EXT4_FC_SUPPORTED_FEATURES 0x0u

struct ext4_fc_tl {
	uint16_t fc_tag;
	uint16_t fc_len;        /* bytes of the value that follows */
};
struct ext4_fc_head {
	uint32_t fc_features;
	uint32_t fc_tid;
};
struct ext4_fc_add_range {
	uint32_t fc_ino;
	uint8_t fc_ex[12];      /* a struct ext4_extent */
};
struct ext4_fc_del_range {
	uint32_t fc_ino;
	uint32_t fc_lblk;
	uint32_t fc_len;
};
struct ext4_fc_dentry_info {
	uint32_t fc_parent_ino;
	uint32_t fc_ino;
	/* the name follows: fc_len - 8 bytes */
};
struct ext4_fc_inode {
	uint32_t fc_ino;
	/* the raw inode follows: fc_len - 4 bytes */
};
struct ext4_fc_tail {
	uint32_t fc_tid;
	uint32_t fc_crc;
};
_Static_assert(sizeof(struct ext4_fc_add_range) == 16, "fc add range");

#endif
