#!/bin/bash
# mk_orphan_stuck.sh OUT.img [file|list] - a crash left four orphans
# (files unlinked while open: no names, links_count 0): three good ones
# and, second of the four, one whose extent tree is deeper than the
# maximum (as mk_extent_too_deep.sh), so freeing it meets corruption.  They
# are in the orphan file (file, default; orphan_present set) or on the
# legacy list (list: s_last_orphan, then i_dtime links).  /keep and
# /dir/keep2 are live files.  Prints the inode numbers: good ones, then
# the bad one.
set -e
out=${1:?usage: mk_orphan_stuck.sh OUT.img [file|list]}
fmt=${2:-file}
here=$(cd "$(dirname "$0")" && pwd)
"$here/mk_extent_too_deep.sh" "$out" "$fmt" > /dev/null || exit $?
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for i in 1 2 3; do head -c $((3000 * i)) /dev/urandom > "$tmp/o$i"; done
debugfs -w -f - "$out" > /dev/null 2>&1 << EOC
write $tmp/o1 o1
write $tmp/o2 o2
write $tmp/o3 o3
EOC
ino_of() { debugfs -R "stat /$1" "$out" 2> /dev/null | sed -n 's/^Inode: *\([0-9]*\).*/\1/p'; }
o1=$(ino_of o1) o2=$(ino_of o2) o3=$(ino_of o3) bad=$(ino_of bad)
[ -n "$o1" ] && [ -n "$o2" ] && [ -n "$o3" ] && [ -n "$bad" ] || { echo "mk_orphan_stuck.sh: debugfs failed" >&2; exit 1; }
{
	for f in o1 o2 o3 bad; do echo "unlink /$f"; done
	for i in $o1 $o2 $o3 $bad; do echo "sif <$i> links_count 0"; done
} | debugfs -w -f - "$out" > /dev/null 2>&1
le32() { printf "\\$(printf %03o $(($1 & 255)))\\$(printf %03o $((($1 >> 8) & 255)))\\$(printf %03o $((($1 >> 16) & 255)))\\$(printf %03o $((($1 >> 24) & 255)))"; }
if [ "$fmt" = list ]; then
	debugfs -w -f - "$out" > /dev/null 2>&1 << EOC
sif <$o1> dtime $bad
sif <$bad> dtime $o2
sif <$o2> dtime $o3
ssv last_orphan $o1
EOC
else
	ofino=$(dumpe2fs -h "$out" 2> /dev/null | sed -n 's/^Orphan file inode: *//p')
	blk=$(debugfs -R "bmap <$ofino> 0" "$out" 2> /dev/null)
	[ -n "$blk" ] || { echo "mk_orphan_stuck.sh: no orphan file block" >&2; exit 1; }
	{ le32 $o1; le32 $bad; le32 $o2; le32 $o3; } |
		dd of="$out" bs=1 seek=$((blk * 1024)) conv=notrunc 2> /dev/null
	debugfs -w -R "feature orphan_present" "$out" > /dev/null 2>&1
fi
echo "orphans ($fmt): good $o1 $o2 $o3, bad $bad (extent tree deeper than the maximum)"
