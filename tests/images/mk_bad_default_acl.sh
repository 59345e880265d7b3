#!/bin/bash
# mk_bad_default_acl.sh OUT.img - a directory /d whose default ACL
# (system.posix_acl_default) is malformed: its MASK entry follows OTHER;
# /file and /dir are healthy.  e2fsck does not look inside ACLs; the
# kernel refuses to create in /d (EINVAL), and so does the library
# (EUCLEAN, recorded), since what a new inode would inherit is unknown.
set -e
out=${1:?usage: mk_bad_default_acl.sh OUT.img}
for t in mke2fs debugfs; do command -v $t >/dev/null || { echo "SKIP: $t not installed"; exit 77; }; done
rm -f "$out"
mke2fs -q -F -t ext4 -b 1024 "$out" 8M >/dev/null
echo healthy > "$out.tmp"
# On-disk ACL: version 1, USER_OBJ rwx, GROUP_OBJ r-x, OTHER r-x, MASK rwx.
printf '\x01\x00\x00\x00\x01\x00\x07\x00\x04\x00\x05\x00\x20\x00\x05\x00\x10\x00\x07\x00' > "$out.acl"
debugfs -w -f - "$out" >/dev/null 2>&1 <<CMDS
write $out.tmp file
mkdir dir
mkdir d
ea_set -r -f $out.acl d system.posix_acl_default
CMDS
rm -f "$out.tmp" "$out.acl"
debugfs -R 'ea_list d' "$out" 2>/dev/null | grep -q posix_acl_default ||
	{ echo "debugfs did not store the ACL"; exit 1; }
echo "inode $(debugfs -R 'stat d' "$out" 2>/dev/null | awk '/^Inode:/ {print $2; exit}'): directory /d with a malformed default ACL (MASK after OTHER)"
