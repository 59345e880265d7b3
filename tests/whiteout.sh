#!/bin/bash
# whiteout.sh - renameat2(RENAME_WHITEOUT) and overlayfs on a uext4 upper
# layer, against the kernel.
#
# 1. The same renames (tests/whiteout.c: renameat2 with the flags named) in
#    a fresh image on the kernel's ext4 (loop mount) and on a uext4 mount:
#    a file, a directory (to another parent), over an existing name, in a
#    setgid directory, with a umask; WHITEOUT with NOREPLACE (target there
#    or not), with EXCHANGE (EINVAL), by a non-root user (allowed since
#    Linux 5.8: the whiteout is theirs).  The
#    results and stat of every name (type, mode, owner, group, device
#    numbers, links) must be the kernel's; the kernel's view of the uext4
#    image after unmount too.
# 2. The library (uext4_rename with UEXT4_RENAME_WHITEOUT) leaves the same
#    0/0 device.  (Its undo at every failure point is in unit_undo.)
# 3. overlayfs with upperdir and workdir on a uext4 mount over a lower
#    directory: create, delete (a whiteout appears in the upper layer),
#    rename of a lower file and a lower directory, then the merged view and
#    the upper layer are compared with the same on a kernel ext4 upper
#    layer.  If the kernel refuses the FUSE upper layer, this part says so
#    and is skipped alone.
# Every image ends e2fsck -fn clean.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
fuse_test setpriv:util-linux
need_loop
need_helper HELPER whiteout
km=$T/k fm=$T/f
mkdir -p "$km" "$fm"
mount_uext4() { # IMAGE DIR [OPTS]
	"$UEXT4" mount ${3:+-o "$3"} "$1" "$2" || fail "uext4 mount $1"
	MOUNTS+=("$2")
}
umount_uext4() { "$UEXT4" umount "$1" || fail "uext4 umount $1"; }
fsck_clean() {
	e2fsck -fn "$1" > "$T/fsck.out" 2>&1 || { cat "$T/fsck.out"; bad "e2fsck -fn $2"; }
}
newimg() { rm -f "$1"; mke2fs -q -t ext4 -F "$1" 64M > /dev/null || fail "mke2fs"; }
# stat of every name below DIR, sorted (the kernel lists in hash order).
stat_all() {
	(cd "$1" && find . -path ./lost+found -prune -o -mindepth 1 -print0 | sort -z |
		xargs -0 stat -c '%n %F %a %u:%g %t,%T links=%h') | sed 's/character special file/chardev/'
}

# ------------------------------------------------------- 1. renameat2
note "1. renameat2 with RENAME_WHITEOUT, kernel and uext4 mount"
renames() { # DIR: the renames, each result on a line
	local d=$1 r
	cd "$d" || return 1
	mkdir -p a b sg && echo f > a/f1 && echo g > a/f2 && echo h > a/f3 && mkdir a/sub &&
		echo i > b/t && echo j > a/f4 && echo k > a/f5 && chown 0:1234 sg && chmod 2777 sg &&
		echo l > sg/s && chmod 777 a || return 1
	echo "file: $("$HELPER" sys a/f1 a/f1.new whiteout)"
	echo "dir to another parent: $("$HELPER" sys a/sub b/sub whiteout)"
	echo "over a name: $("$HELPER" sys a/f2 b/t whiteout)"
	echo "setgid dir: $("$HELPER" sys sg/s sg/s2 whiteout)"
	echo "umask 077: $(umask 077; "$HELPER" sys a/f3 a/f3.new whiteout)"
	echo "noreplace, target there: $("$HELPER" sys a/f4 a/f5 whiteout noreplace)"
	echo "noreplace, no target: $("$HELPER" sys a/f4 a/f4.new whiteout noreplace)"
	echo "exchange: $("$HELPER" sys a/f5 a/f4.new whiteout exchange)"
	echo "missing source: $("$HELPER" sys a/none a/none2 whiteout)"
	echo "whiteout over a whiteout: $("$HELPER" sys a/f5 a/f1 whiteout)"
	echo "non-root: $(setpriv --reuid=65534 --regid=65534 --clear-groups "$HELPER" sys a/f1.new a/f1.nobody whiteout)"
	cd / || return 1
}
newimg "$T/k.img"
newimg "$T/u.img"
kmount "$T/k.img" "$km" rw || fail "kernel mount"
renames "$km" > "$T/ren.k" || fail "renames on the kernel"
stat_all "$km" > "$T/stat.k"
umount "$km"
mount_uext4 "$T/u.img" "$fm" allow_other
renames "$fm" > "$T/ren.u" || fail "renames on the uext4 mount"
stat_all "$fm" > "$T/stat.u"
umount_uext4 "$fm"
paste -d'|' "$T/ren.k" "$T/ren.u" | awk -F'|' '{ printf "%-40s | %s\n", $1, $2 }'
diff "$T/ren.k" "$T/ren.u" > /dev/null || bad "renameat2 results differ from the kernel's"
grep -q '^exchange: EINVAL' "$T/ren.u" || bad "WHITEOUT|EXCHANGE was not EINVAL"
grep -q '^./a/f1.new chardev 0 65534:65534 0,0 links=1$' "$T/stat.u" ||
	bad "a non-root user's whiteout is not theirs"
cat "$T/stat.u"
diff "$T/stat.k" "$T/stat.u" || bad "the names after the renames differ from the kernel's"
grep -q '^./a/f2 chardev 0 0:0 0,0 links=1$' "$T/stat.u" || bad "no 0/0 whiteout at a/f2"
grep -q '^./sg/s chardev 0 0:1234 ' "$T/stat.u" || bad "the whiteout in a setgid directory has not its group"
kmount "$T/u.img" "$km" || fail "kernel mount of the uext4 image"
stat_all "$km" > "$T/stat.uk"
umount "$km"
diff "$T/stat.u" "$T/stat.uk" || bad "the kernel sees the uext4 image differently"
fsck_clean "$T/k.img" "kernel image"
fsck_clean "$T/u.img" "uext4 image"

# ------------------------------------------------------- 2. library
note "2. the library's UEXT4_RENAME_WHITEOUT"
newimg "$T/l.img"
kmount "$T/l.img" "$km" rw || fail "kernel mount"
mkdir "$km/d" && echo x > "$km/d/x" && echo y > "$km/y" || fail "making the tree"
umount "$km"
out=$("$HELPER" lib "$T/l.img" /d/x /x whiteout | tr '\n' ' ')
echo "library: $out"
[ "$out" = "OK 20000 0 0 0,0 1 " ] || bad "library whiteout: '$out', want 'OK 20000 0 0 0,0 1'"
out=$("$HELPER" lib "$T/l.img" /x /y whiteout exchange)
[ "$out" = EINVAL ] || bad "library WHITEOUT|EXCHANGE: $out"
fsck_clean "$T/l.img" "library image"
kmount "$T/l.img" "$km" || fail "kernel mount"
stat -c '%F %a %t,%T' "$km/d/x" | grep -qx 'character special file 0 0,0' || bad "kernel view of the library's whiteout"
umount "$km"

# ------------------------------------------------------- 3. overlayfs
note "3. overlayfs with its upper layer on a uext4 mount"
ovl_ops() { # MERGED: create, delete, rename over the lower layer
	local m=$1
	echo new > "$m/created" &&
		rm "$m/lower_file" &&
		rm -r "$m/lower_dir_gone" &&
		mv "$m/lower_renamed" "$m/renamed_file" &&
		mv "$m/lower_dir" "$m/renamed_dir" &&
		echo more >> "$m/renamed_file" &&
		mkdir "$m/newdir" && echo n > "$m/newdir/n" && mv "$m/created" "$m/newdir/created"
}
ovl_run() { # UPPERFS-MOUNT TAG: overlay with upper/work under it
	local u=$1 tag=$2
	local low=$T/lower.$tag mer=$T/merged.$tag
	rm -rf "$low" && mkdir -p "$low/lower_dir/in" "$low/lower_dir_gone" "$mer" "$u/upper" "$u/work"
	echo lf > "$low/lower_file" && echo lr > "$low/lower_renamed" &&
		echo ld > "$low/lower_dir/in/f" && echo g > "$low/lower_dir_gone/g"
	if ! mount -t overlay overlay -o "lowerdir=$low,upperdir=$u/upper,workdir=$u/work" "$mer" \
		2> "$T/ovl.$tag.err"; then
		return 2
	fi
	MOUNTS+=("$mer")
	ovl_ops "$mer" || { umount "$mer"; return 1; }
	(cd "$mer" && find . -mindepth 1 -print0 | sort -z | xargs -0 stat -c '%n %F %a %s' &&
		find . -type f -print0 | sort -z | xargs -0 md5sum) > "$T/view.$tag"
	umount "$mer" || return 1
	(cd "$u/upper" && find . -mindepth 1 -print0 | sort -z | xargs -0 stat -c '%n %F %a %t,%T') \
		> "$T/upper.$tag"
}
newimg "$T/ok.img"
newimg "$T/ou.img"
kmount "$T/ok.img" "$km" rw || fail "kernel mount"
ovl_run "$km" k || fail "overlayfs on the kernel's ext4 failed: $(cat "$T/ovl.k.err")"
umount "$km"
mount_uext4 "$T/ou.img" "$fm"
ovl_run "$fm" u
rc=$?
if [ $rc = 2 ]; then
	echo "SKIPPED (part 3 only): the kernel refused a uext4 (FUSE) upper layer:"
	cat "$T/ovl.u.err"
	dmesg | grep -i overlay | tail -5
elif [ $rc != 0 ]; then
	bad "overlayfs operations on the uext4 upper layer failed"
else
	dmesg | grep -i 'overlayfs' | tail -3
	cat "$T/view.u" "$T/upper.u"
	diff "$T/view.k" "$T/view.u" || bad "overlay merged view differs from the kernel upper layer's"
	diff "$T/upper.k" "$T/upper.u" || bad "overlay upper layer differs from the kernel's"
	grep -q '^./lower_file character special file 0 0,0$' "$T/upper.u" ||
		bad "no whiteout for the deleted lower file in the upper layer"
fi
umount_uext4 "$fm"
fsck_clean "$T/ok.img" "overlay kernel image"
fsck_clean "$T/ou.img" "overlay uext4 image"

san_check
[ "$FAILS" = 0 ] || fail "$FAILS check(s) failed"
echo "whiteout: OK"
