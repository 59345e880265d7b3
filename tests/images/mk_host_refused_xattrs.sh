#!/bin/bash
# mk_host_refused_xattrs.sh OUT.img - a clean ea_inode image whose xattrs a
# host may refuse when `uext4 get` copies them out, next
# to xattrs every host takes:
#   /link        symlink: user.onlink = "bar" (Linux refuses user.* on
#                symlinks: EPERM), trusted.onlink = "ok"
#   /big8k       user.big = 8192 bytes (an EA inode; too big for an ext4
#                host without ea_inode: ENOSPC), user.good = "8k"
#   /big70k      user.huge = 70000 bytes (over the VFS's 64 KiB: E2BIG on
#                any host), user.small = "ok"
#   /hello.txt   user.<255 x "n"> (a 260-byte name, over XATTR_NAME_MAX:
#                ERANGE), user.good = "hello", trusted.good = "yes"
#   /dir/a       user. (empty name after the prefix: EINVAL), user.good = "a"
#   /dir/b, /sub/deep/f  user.good = "b", "f"
# Values are made of printable bytes (debugfs takes them on its command
# line); e2fsck -fy then fixes debugfs's i_blocks accounting of EA inodes.
set -eu
out=${1:?usage: mk_host_refused_xattrs.sh OUT.img}
. "$(dirname "$0")/mk_lib.inc"
mk_need mke2fs debugfs e2fsck
mk_scratch
t=$tmp/tree
mkdir -p "$t/dir" "$t/sub/deep"
echo hello > "$t/hello.txt"
for f in a b c; do echo "$f" > "$t/dir/$f"; done
echo deep > "$t/sub/deep/f"
echo 8k > "$t/big8k"
echo 70k > "$t/big70k"
ln -s hello.txt "$t/link"
mke2fs -q -F -t ext4 -b 4096 -O ea_inode -N 512 -d "$t" "$out" 16M > "$tmp/mke2fs.log" 2>&1 ||
	{ cat "$tmp/mke2fs.log"; exit 1; }
val() { yes "$1" | tr -d '\n' | head -c "$2"; }
long=$(printf 'n%.0s' $(seq 255))
{
	echo "ea_set /link user.onlink bar"
	echo "ea_set /link trusted.onlink ok"
	echo "ea_set /big8k user.big $(val 0123456789abcdef 8192)"
	echo "ea_set /big8k user.good 8k"
	# libext2fs reads no xattr of an inode with a value over 64 KiB: last.
	echo "ea_set /big70k user.small ok"
	echo "ea_set /big70k user.huge $(val fedcba9876543210 70000)"
	echo "ea_set /hello.txt user.$long v"
	echo "ea_set /hello.txt user.good hello"
	echo "ea_set /hello.txt trusted.good yes"
	echo "ea_set /dir/a user. emptyname"
	echo "ea_set /dir/a user.good a"
	echo "ea_set /dir/b user.good b"
	echo "ea_set /sub/deep/f user.good f"
} > "$tmp/cmds"
# One debugfs run per command: -f reads lines into a short buffer.
while IFS= read -r c; do
	debugfs -w -R "$c" "$out" > "$tmp/dbg.log" 2>&1 || { cat "$tmp/dbg.log"; exit 1; }
done < "$tmp/cmds"
e2fsck -fy "$out" > /dev/null 2>&1 || true
e2fsck -fn "$out" > "$tmp/fsck.log" 2>&1 || { cat "$tmp/fsck.log"; exit 1; }
debugfs -R "ea_list /big8k" "$out" 2> /dev/null | grep -q "user.big (8192)" ||
	{ echo "mk_host_refused_xattrs: /big8k has no 8 KiB value"; exit 1; }
# /big70k: 8 blocks of its one xattr value (libext2fs cannot list it).
[ "$(debugfs -R "stat /big70k" "$out" 2> /dev/null | awk '/Blockcount:/ {print $4}')" -gt 140 ] ||
	{ echo "mk_host_refused_xattrs: /big70k has no 70000-byte value"; exit 1; }
echo "ea_inode image: /big8k (8 KiB) and /big70k (70000 bytes) have values in EA inodes; /link has user.onlink (user.* on a symlink); /hello.txt a 260-byte name; /dir/a the name 'user.'"
