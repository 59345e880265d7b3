#!/bin/bash
# mk_bad_default_acl.sh OUT.img - a directory /d whose default ACL
# (system.posix_acl_default) is malformed: its MASK entry follows OTHER;
# /file and /dir are healthy.  e2fsck does not look inside ACLs; the
# kernel refuses to create in /d (EINVAL), and so does the library
# (EUCLEAN, recorded), since what a new inode would inherit is unknown.
set -e
out=${1:?usage: mk_bad_default_acl.sh OUT.img}
. "$(dirname "$0")/mk_lib.inc"
mk_need mke2fs debugfs
# On-disk ACL: version 1, USER_OBJ rwx, GROUP_OBJ r-x, OTHER r-x, MASK rwx.
printf '\x01\x00\x00\x00\x01\x00\x07\x00\x04\x00\x05\x00\x20\x00\x05\x00\x10\x00\x07\x00' > "$out.acl"
mk_healthy "$out" <<CMDS
mkdir d
ea_set -r -f $out.acl d system.posix_acl_default
CMDS
rm -f "$out.acl"
debugfs -R 'ea_list d' "$out" 2>/dev/null | grep -q posix_acl_default ||
	{ echo "debugfs did not store the ACL"; exit 1; }
echo "inode $(mk_ino "$out" d): directory /d with a malformed default ACL (MASK after OTHER)"
