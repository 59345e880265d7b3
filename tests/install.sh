#!/bin/bash
# install.sh - the installation, as a user sees it:
#   - make install DESTDIR=$D PREFIX=/usr puts every file in place
#     (libuext4.so.N.M.P with soname libuext4.so.N, N = UEXT4_VERSION_MAJOR,
#     the two symlinks, libuext4.a, uext4.h, uext4.pc, uext4, the mount
#     helpers, both man pages), and make uninstall removes every one;
#   - the shared library exports only uext4_* (nm -D --defined-only);
#   - a C program built with `pkg-config --cflags --libs uext4` against the
#     INSTALLED tree (PKG_CONFIG_SYSROOT_DIR) mounts an image made by mke2fs
#     and lists its root: the same names as debugfs's ls; it runs from
#     LD_LIBRARY_PATH=$D/usr/lib (ldd shows that copy), and checks
#     uext4_version_ok(); a second build with `pkg-config --static` links
#     libuext4 statically (no libuext4.so in ldd) and lists the same;
#   - libuext4.a defines no global symbol outside uext4_* (nm -g
#     --defined-only), and a program that defines its own crc32c and bread
#     (other signatures; both are internal names of the library) links
#     statically against it, mounts an image and reads a file;
#   - man -l renders both pages (a NAME section), and the uext4(1) page
#     holds every line of `uext4 --help` and of each `uext4 help COMMAND`;
#   - mount -o remount,ro and remount,rw through the helper change the
#     mounted file system (creates refused, then allowed), as fstests do;
#     the umount of a bind mount of one of its files returns at once;
#   - two mounts of one image (fstests generic/732): files moved in one
#     read in the other, a read-only third refused, either unmounted
#     first; the same transcript as the kernel's ext4 on a loop device;
#   - mount.fuse.uext4 adds suid,dev unless nosuid or nodev was given, as
#     mount.fuse3 does (mount(8) passes a helper neither);
#   - as root, in a private mount namespace whose /usr/sbin and /usr/bin
#     are the host's with $D/usr/sbin and $D/usr/bin laid over them (an overlay, gone with the namespace:
#     nothing is written outside the temporary directory), mount(8) finds
#     mount.fuse.uext4: `mount -t fuse.uext4 -o allow_other,default_permissions
#     IMG DIR` mounts read-write with those options and neither nosuid nor
#     nodev, a set-user-ID program and a device node there work as on the
#     kernel's loop mount, and with -o nosuid,nodev neither works; a file written there
#     is in the image after `umount DIR` (and the server's flock on the
#     image, which it holds until everything is written back); with
#     -o uhelper=uext4, umount(8) runs umount.uext4, which waits: the flock
#     is free as soon as umount returns; debugfs and the kernel's ext4 see
#     both files, e2fsck -fn is clean; an fstab line (mount --fstab) with
#     noauto,x-systemd.automount,ro mounts read-only (writes fail, the
#     file reads back; its x-* option gives it a utab entry, so umount(8)
#     runs umount.fuse.uext4) and umount unmounts it.
# It is about packaging, not memory: it runs in the release build only.
# run-in: release
set -uo pipefail
. "$(dirname "$0")/lib.sh"

# ---------------------------------------------------- inside the namespace
# install.sh --ns D IMG MNT: the mount(8) part, run by unshare -m below.
if [ "${1:-}" = --ns ]; then
	D=$2 IMG=$3 MNT=$4
	# suid_dev_works DIR: which of "suid dev" work in DIR: a set-user-ID
	# root copy of id(1) run by nobody says euid 0; a copy of /dev/null
	# made there with mknod takes a write.
	suid_dev_works() {
		local works=
		cp /usr/bin/id "$1/suid-id" && chmod 4755 "$1/suid-id" || fail "set-user-ID copy of id in $1"
		mknod -m 666 "$1/null" c 1 3 || fail "mknod in $1"
		[ "$(setpriv --reuid=65534 --regid=65534 --clear-groups "$1/suid-id" -u 2> /dev/null)" = 0 ] && works=suid
		{ echo x > "$1/null"; } 2> /dev/null && works="$works dev"
		rm -f "$1/suid-id" "$1/null"
		echo "${works# }"
	}
	# nobody must reach DIR's files.
	chmod 755 "$(dirname "$MNT")"
	command -v setpriv > /dev/null || { echo "SKIP: setpriv missing"; exit 77; }
	# mount(8) looks for /sbin/mount.TYPE (and /sbin/fs.d, /sbin/fs) and
	# runs it with PATH reset to the standard one: the helper finds uext4
	# where make install put it, /usr/bin.
	for d in sbin bin; do
		mount -t overlay overlay -o "lowerdir=$D/usr/$d:/usr/$d" "/usr/$d" ||
			{ echo "SKIP: cannot lay an overlay on /usr/$d"; exit 77; }
	done
	[ -x /sbin/mount.fuse.uext4 ] || fail "/sbin/mount.fuse.uext4 not visible through the overlay"
	cmp -s /usr/bin/uext4 "$D/usr/bin/uext4" || fail "/usr/bin/uext4 is not the installed one"
	unset UEXT4
	# mount(8)'s utab (the options it keeps for itself), private too.
	mkdir -p /run/mount && mount -t tmpfs -o size=1M utab /run/mount || fail "tmpfs on /run/mount"

	KWORKS=
	if can_loop; then
		note "the kernel's loop mount: set-user-ID programs and device nodes work"
		kmount "$IMG" "$MNT" rw || fail "kernel mount"
		KWORKS=$(suid_dev_works "$MNT")
		kumount "$MNT"
		[ "$KWORKS" = "suid dev" ] || fail "the probe fails on the kernel's mount: '$KWORKS'"
	fi
	note "mount -t fuse.uext4 -o nosuid,nodev IMG DIR: neither works"
	mount -t fuse.uext4 -o nosuid,nodev,allow_other "$IMG" "$MNT" || fail "mount -o nosuid,nodev: exit $?"
	opts=$(findmnt -n -o OPTIONS "$MNT")
	case ",$opts," in *,nosuid,*nodev,* | *,nodev,*nosuid,*) ;; *) fail "-o nosuid,nodev not passed: $opts" ;; esac
	got=$(suid_dev_works "$MNT")
	[ -z "$got" ] || fail "works on a nosuid,nodev mount: $got"
	umount "$MNT" || fail "umount: exit $?"
	timeout 60 flock "$IMG" true || fail "the server did not release the image in 60 s"

	note "mount -t fuse.uext4 -o allow_other,default_permissions IMG DIR"
	mount -t fuse.uext4 -o allow_other,default_permissions "$IMG" "$MNT" || fail "mount -t fuse.uext4: exit $?"
	[ "$(findmnt -n -o FSTYPE "$MNT")" = fuse.uext4 ] || fail "not a fuse.uext4 mount: $(findmnt -n "$MNT")"
	opts=$(findmnt -n -o OPTIONS "$MNT")
	echo "  options: $opts"
	case ",$opts," in *,rw,*) ;; *) fail "not read-write: $opts" ;; esac
	case ",$opts," in *,allow_other,*) ;; *) fail "allow_other not passed: $opts" ;; esac
	case ",$opts," in *,default_permissions,*) ;; *) fail "default_permissions not passed: $opts" ;; esac
	case ",$opts," in *,nosuid,* | *,nodev,*) fail "nosuid or nodev without being asked: $opts" ;; esac
	got=$(suid_dev_works "$MNT")
	echo "  works: $got (the kernel's loop mount: ${KWORKS:-not run})"
	[ "$got" = "suid dev" ] || fail "a set-user-ID program or a device node does not work: '$got'"
	echo "written through mount(8)" > "$MNT/hello" || fail "write in the mount"
	mkdir "$MNT/newdir" || fail "mkdir in the mount"
	note "mount -o remount,ro DIR, then remount,rw (fstests' _scratch_remount)"
	mount -t fuse.uext4 -o remount,ro "$IMG" "$MNT" || fail "mount -o remount,ro: exit $?"
	case ",$(findmnt -n -o OPTIONS "$MNT")," in *,ro,*) ;; *) fail "not read-only after remount,ro: $(findmnt -n -o OPTIONS "$MNT")" ;; esac
	touch "$MNT/after-ro" 2> "$IMG.ro-err" && fail "a create succeeded on the read-only remount"
	grep -q "Read-only file system" "$IMG.ro-err" || fail "create after remount,ro: $(cat "$IMG.ro-err")"
	[ "$(cat "$MNT/hello")" = "written through mount(8)" ] || fail "/hello unreadable after remount,ro"
	mount -o remount,rw "$MNT" || fail "mount -o remount,rw: exit $?"
	echo again > "$MNT/after-rw" || fail "write after remount,rw"
	note "umount DIR, then flock IMG (the server holds it until written back)"
	umount "$MNT" || fail "umount: exit $?"
	mountpoint -q "$MNT" && fail "still mounted after umount"
	timeout 60 flock "$IMG" true || fail "the server did not release the image in 60 s"
	[ "$(debugfs -R 'cat /hello' "$IMG" 2> /dev/null)" = "written through mount(8)" ] ||
		fail "/hello not in the image after umount"
	fsck_clean "$IMG" || fail "e2fsck after the read-write mount"

	note "mount -t fuse.uext4 -o uhelper=uext4: umount runs umount.uext4 and waits"
	mount -t fuse.uext4 -o uhelper=uext4 "$IMG" "$MNT" || fail "mount -o uhelper=uext4: exit $?"
	echo "second" > "$MNT/second" || fail "write in the mount"
	# A bind mount of one of its files (generic/306): its umount must
	# not wait for the server, which still serves $MNT.
	touch "$IMG.bindpoint" || fail "bind mount point"
	mount --bind "$MNT/second" "$IMG.bindpoint" || fail "mount --bind of a file of the mount"
	timeout 20 umount "$IMG.bindpoint" || fail "umount of the bind mount: exit $? (124: it waited for the server)"
	umount "$MNT" || fail "umount: exit $?"
	flock -n "$IMG" true || fail "umount returned while the server still held the image (umount.uext4 not run?)"
	[ "$(debugfs -R 'cat /second' "$IMG" 2> /dev/null)" = "second" ] || fail "/second not in the image when umount returned"
	fsck_clean "$IMG" || fail "e2fsck after the uhelper mount"

	# two_mounts SRC TYPE OPTS ORDER: fstests generic/732 with mount -t
	# TYPE -o OPTS: SRC mounted on two directories, files moved in one and
	# read in the other; a read-only third mount of SRC; the two unmounted
	# in ORDER (12 or 21), the second still serving after the first is
	# gone.  A transcript, compared between the kernel and uext4.
	two_mounts() {
		local src=$1 type=$2 o=$3 a=$MNT.1 b=$MNT.2 first second
		mkdir -p "$a" "$b" "$MNT.3"
		mount -t "$type" -o "$o" "$src" "$a" || fail "mount -t $type $src: exit $?"
		mount -t "$type" -o "$o" "$src" "$b" && echo "second mount: ok" || echo "second mount: refused"
		mkdir "$a/A" "$a/B" && touch "$a/A/f" && mv "$a/A/f" "$a/B/" || fail "mkdir, touch, mv in $a"
		echo "B in the second: $(ls "$b/B" 2>&1)"
		echo moved > "$b/B/f" && mv "$b/B/f" "$b/A/" || fail "write, mv in $b"
		echo "A/f in the first: $(cat "$a/A/f" 2>&1)"
		mount -t "$type" -o "$o,ro" "$src" "$MNT.3" 2> /dev/null && echo "read-only third: ok" ||
			echo "read-only third: refused"
		if mountpoint -q "$MNT.3"; then umount "$MNT.3"; fi
		if [ "$4" = 12 ]; then first=$a second=$b; else first=$b second=$a; fi
		timeout 20 umount "$first" || fail "umount of the first of two mounts: exit $? (124: it waited for the server)"
		echo "after one umount: $(cat "$second/A/f" 2>&1); $(touch "$second/B/g" 2>&1 && echo created)"
		umount "$second" || fail "umount of the second: exit $?"
		if mountpoint -q "$a" || mountpoint -q "$b"; then fail "still mounted after both umounts"; fi
		rmdir "$a" "$b" "$MNT.3"
	}
	note "two mounts of one image (fstests generic/732), each unmounted first"
	for order in 12 21; do
		mke2fs -q -F -t ext4 "$IMG.two" 32M || fail "mke2fs"
		two_mounts "$IMG.two" fuse.uext4 uhelper=uext4 $order > "$IMG.two-u"
		# umount.uext4 waited for the server of the last one
		flock -n "$IMG.two" true || fail "umount of the last of two mounts returned before the server let go"
		[ "$(debugfs -R 'cat /A/f' "$IMG.two" 2> /dev/null)" = moved ] || fail "/A/f not in the image"
		debugfs -R 'stat /B/g' "$IMG.two" 2> /dev/null | grep -q Inode: || fail "/B/g not in the image"
		fsck_clean "$IMG.two" || fail "e2fsck after two mounts"
		sed 's/^/  uext4: /' "$IMG.two-u"
		if can_loop; then
			mke2fs -q -F -t ext4 "$IMG.k" 32M || fail "mke2fs"
			dev=$(losetup -f --show "$IMG.k") || fail "losetup"
			two_mounts "$dev" ext4 rw $order > "$IMG.two-k"
			losetup -d "$dev"
			cmp -s "$IMG.two-k" "$IMG.two-u" ||
				{ diff "$IMG.two-k" "$IMG.two-u"; fail "two mounts: uext4 differs from the kernel's ext4"; }
			echo "  as on the kernel's ext4 (order $order)"
		fi
	done

	note "fstab line: IMG DIR fuse.uext4 noauto,x-systemd.automount,ro 0 0"
	FSTAB=$(dirname "$IMG")/fstab
	echo "$IMG $MNT fuse.uext4 noauto,x-systemd.automount,ro 0 0" > "$FSTAB"
	mount --fstab "$FSTAB" "$MNT" || fail "mount --fstab: exit $?"
	opts=$(findmnt -n -o OPTIONS "$MNT")
	echo "  options: $opts"
	case ",$opts," in *,ro,*) ;; *) fail "fstab ro mount is not read-only: $opts" ;; esac
	[ "$(cat "$MNT/hello")" = "written through mount(8)" ] || fail "fstab mount: /hello reads wrong"
	if out=$(touch "$MNT/nope" 2>&1); then fail "a write succeeded on the ro mount"; fi
	case "$out" in *"Read-only file system"*) echo "  write refused: $out" ;; *) fail "write on ro mount: $out" ;; esac
	# x-systemd.automount gives the mount a utab entry: umount finds the
	# type fuse.uext4 in mountinfo then and runs umount.fuse.uext4.
	grep -q "TARGET=$MNT " /run/mount/utab || fail "no utab entry for the fstab mount: $(cat /run/mount/utab)"
	grep "TARGET=$MNT " /run/mount/utab | sed 's/^/  utab: /'
	umount "$MNT" || fail "umount of the fstab mount: exit $?"
	mountpoint -q "$MNT" && fail "fstab mount still mounted after umount"
	timeout 60 flock "$IMG" true || fail "the ro server did not let go of the image in 60 s"
	exit 0
fi

# ------------------------------------------------------------- the outside
setup_traps
need pkg-config nm readelf cc man mke2fs debugfs
export LC_ALL=C
T=$(mktemp_dir)
D=$T/destdir
ver() { sed -n "s/^#define UEXT4_VERSION_$1 \\([0-9]*\\)$/\\1/p" "$TOP/include/uext4.h"; }
MAJOR=$(ver MAJOR) VERSION=$(ver MAJOR).$(ver MINOR).$(ver PATCH)

note "make install DESTDIR=\$T/destdir PREFIX=/usr (version $VERSION)"
make -s -C "$TOP" BUILDDIR="$UEXT4_BUILD" install DESTDIR="$D" PREFIX=/usr > "$T/install.log" 2>&1 ||
	{ cat "$T/install.log"; fail "make install"; }
EXPECT="usr/bin/uext4
usr/include/uext4.h
usr/lib/libuext4.a
usr/lib/libuext4.so
usr/lib/libuext4.so.$MAJOR
usr/lib/libuext4.so.$VERSION
usr/lib/pkgconfig/uext4.pc
usr/sbin/mount.fuse.uext4
usr/sbin/umount.fuse.uext4
usr/sbin/umount.uext4
usr/share/man/man1/uext4.1
usr/share/man/man3/libuext4.3"
GOT=$(cd "$D" && find . ! -type d | sed 's|^\./||' | sort)
[ "$GOT" = "$EXPECT" ] || { diff <(echo "$EXPECT") <(echo "$GOT"); bad "installed files differ from the list above"; }
[ "$(readlink "$D/usr/lib/libuext4.so")" = "libuext4.so.$MAJOR" ] || bad "libuext4.so does not point at libuext4.so.$MAJOR"
[ "$(readlink "$D/usr/lib/libuext4.so.$MAJOR")" = "libuext4.so.$VERSION" ] || bad "libuext4.so.$MAJOR does not point at the real file"
SONAME=$(readelf -d "$D/usr/lib/libuext4.so.$VERSION" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[ "$SONAME" = "libuext4.so.$MAJOR" ] || bad "soname is '$SONAME', not libuext4.so.$MAJOR"
"$D/usr/bin/uext4" --version | grep -qx "uext4 $VERSION" || bad "uext4 --version: $("$D/usr/bin/uext4" --version)"

note "nm -D --defined-only: only uext4_*"
nm -D --defined-only "$D/usr/lib/libuext4.so.$VERSION" > "$T/syms"
NSYM=$(awk '$2 != "A"' "$T/syms" | wc -l)
OTHER=$(awk '$2 != "A" && $3 !~ /^uext4_/' "$T/syms")
[ -z "$OTHER" ] || bad "exported symbols not named uext4_*: $(echo "$OTHER" | head -5)"
[ "$NSYM" -gt 50 ] || bad "only $NSYM exported symbols: the API is missing"
grep -q ' T uext4_mount$' "$T/syms" || bad "uext4_mount not exported"
echo "  $NSYM symbols, all uext4_*"

note "a program built with pkg-config against the installed tree"
IMG=$T/demo.img
mkdir -p "$T/src/sub"
for i in $(seq 1 40); do echo "file $i" > "$T/src/file$i"; done
ln -s file1 "$T/src/link"
mke2fs -q -F -t ext4 -d "$T/src" "$IMG" 16M || fail "mke2fs"
cat > "$T/demo.c" << 'CEOF'
#include <stdio.h>
#include <string.h>
#include <uext4.h>

static int print(void *ctx, const char *name, size_t len, uint64_t ino, unsigned type,
		 uint64_t next)
{
	if (!(len == 1 && name[0] == '.') && !(len == 2 && !memcmp(name, "..", 2)))
		printf("%.*s\n", (int)len, name);
	return 0;
}

int main(int argc, char **argv)
{
	struct uext4_opts o = { .read_only = 1 };
	uext4_fs *fs;

	if (!uext4_version_ok(UEXT4_VERSION_MAJOR, UEXT4_VERSION_MINOR)) {
		fprintf(stderr, "libuext4 %s is not compatible\n", uext4_version());
		return 1;
	}
	if (argc != 2 || uext4_mount(argv[1], &o, &fs) < 0) {
		fprintf(stderr, "demo: %s\n", uext4_last_error());
		return 1;
	}
	int err = uext4_readdir(fs, UEXT4_ROOT_INO, 0, print, NULL);
	uext4_umount(fs);
	return err < 0;
}
CEOF
export PKG_CONFIG_SYSROOT_DIR=$D PKG_CONFIG_PATH=$D/usr/lib/pkgconfig
FLAGS=$(pkg-config --cflags --libs uext4) || fail "pkg-config --cflags --libs uext4"
echo "  pkg-config: $FLAGS"
case "$FLAGS" in *"-I$D/usr/include"*"-L$D/usr/lib"*) ;; *) bad "pkg-config flags do not point into DESTDIR: $FLAGS" ;; esac
# shellcheck disable=SC2086 # FLAGS is a list of flags
cc -std=c17 -Wall -Werror -o "$T/demo" "$T/demo.c" $FLAGS || fail "building the demo with pkg-config's flags"
# debugfs ls: "INO (REC_LEN) NAME" groups; keep the names.
debugfs -R 'ls -p /' "$IMG" 2> /dev/null | awk -F/ 'NF >= 6 && $6 != "." && $6 != ".." { print $6 }' | sort > "$T/expect"
[ "$(wc -l < "$T/expect")" -eq 43 ] || bad "debugfs lists $(wc -l < "$T/expect") names, not 43 (40 files, sub, link, lost+found)"
LD_LIBRARY_PATH=$D/usr/lib "$T/demo" "$IMG" > "$T/got.raw" || fail "the demo failed"
sort "$T/got.raw" > "$T/got"
diff "$T/expect" "$T/got" > /dev/null || { diff "$T/expect" "$T/got" | head; bad "the demo's listing differs from debugfs ls"; }
# ldd's output in a variable: `ldd | grep -q` under pipefail fails when
# grep's early exit gets ldd a SIGPIPE (it did, once in make check).
LDD=$(LD_LIBRARY_PATH=$D/usr/lib ldd "$T/demo")
case "$LDD" in *"libuext4.so.$MAJOR => $D/usr/lib/libuext4.so.$MAJOR "*) ;;
*) bad "the demo does not load the installed libuext4.so.$MAJOR: $(grep uext4 <<<"$LDD")" ;; esac
echo "  the demo lists the $(wc -l < "$T/got") names debugfs lists"

note "static: pkg-config --static"
SFLAGS=$(pkg-config --static --cflags --libs uext4) || fail "pkg-config --static"
echo "  pkg-config --static: $SFLAGS"
# libuext4 from libuext4.a, the libraries it needs (named by --static's
# Libs.private: libarchive, pthread) as usual: a fully static program would
# need libarchive's own static dependencies (libacl, ...), not installed.
# shellcheck disable=SC2086 # SFLAGS is a list of flags
cc -std=c17 -Wall -Werror -o "$T/demo-static" "$T/demo.c" ${SFLAGS/-luext4/-l:libuext4.a} ||
	fail "linking libuext4.a with pkg-config --static's flags"
case "$(ldd "$T/demo-static" 2>&1)" in *libuext4*) bad "demo-static still loads libuext4.so" ;; esac
"$T/demo-static" "$IMG" | sort | diff -q "$T/expect" - > /dev/null || bad "the static demo's listing differs"

note "nm -g --defined-only libuext4.a: only uext4_* (the static library takes no other names)"
nm -g --defined-only "$D/usr/lib/libuext4.a" > "$T/asyms" || fail "nm libuext4.a"
NASYM=$(awk 'NF == 3' "$T/asyms" | wc -l)
AOTHER=$(awk 'NF == 3 && $3 !~ /^uext4_/ { print $3 }' "$T/asyms")
[ -z "$AOTHER" ] || bad "libuext4.a defines $(echo "$AOTHER" | wc -l) global symbols not named uext4_*: $(echo $AOTHER | cut -c1-200)"
[ "$NASYM" -gt 50 ] || bad "libuext4.a defines only $NASYM global symbols: the API is missing"
echo "  $NASYM global symbols, $(echo -n "$AOTHER" | grep -c .) not uext4_*"

note "a static program with its own crc32c and bread (other signatures) links and runs"
# Both names are functions of the library's own (checksums, the block
# cache): unless the archive keeps them to itself, the link fails on a
# second definition, or the library calls the program's functions.
cat > "$T/names.c" << 'CEOF'
#include <stdio.h>
#include <string.h>
#include <uext4.h>

/* The program's own crc32c and bread, nothing like the library's. */
unsigned long crc32c(const char *s)
{
	unsigned long h = 0;
	while (*s)
		h = h * 31 + (unsigned char)*s++;
	return h;
}

const char *bread(int slices)
{
	return slices > 1 ? "a loaf" : "a slice";
}

int main(int argc, char **argv)
{
	struct uext4_opts o = { .read_only = 1 };
	char buf[64] = "";
	uext4_file *f;
	uext4_fs *fs;
	uint64_t ino;
	ssize_t n;

	printf("crc32c(abc) = %lu, bread(2) = %s\n", crc32c("abc"), bread(2));
	if (argc != 2 || uext4_mount(argv[1], &o, &fs) < 0 ||
	    uext4_resolve(fs, "/file7", 1, &ino) < 0 || uext4_open(fs, ino, 0, &f) < 0) {
		fprintf(stderr, "names: %s\n", uext4_last_error());
		return 1;
	}
	n = uext4_pread(f, buf, sizeof(buf) - 1, 0);
	uext4_release(f);
	uext4_umount(fs);
	if (n < 0)
		return 1;
	printf("/file7: %s", buf);
	return 0;
}
CEOF
# shellcheck disable=SC2086 # SFLAGS is a list of flags
if cc -std=c17 -Wall -Werror -o "$T/names" "$T/names.c" ${SFLAGS/-luext4/-l:libuext4.a} 2> "$T/names.err"; then
	got=$("$T/names" "$IMG" 2>&1)
	want=$(printf 'crc32c(abc) = 96354, bread(2) = a loaf\n/file7: file 7')
	[ "$got" = "$want" ] || bad "the program with its own crc32c and bread prints '$got', not '$want'"
	echo "$got" | sed 's/^/  /'
else
	head -5 "$T/names.err"
	bad "a program defining crc32c and bread does not link against libuext4.a"
fi

note "man pages"
for page in man1/uext4.1 man3/libuext4.3; do
	MANWIDTH=300 man -l "$D/usr/share/man/$page" 2> "$T/man.err" | col -bx > "$T/$(basename "$page").txt"
	[ -s "$T/man.err" ] && { cat "$T/man.err"; bad "man -l $page: warnings"; }
	lines=$(wc -l < "$T/$(basename "$page").txt")
	grep -q '^NAME$' "$T/$(basename "$page").txt" || bad "man -l $page: no NAME section"
	echo "  $page: $lines lines"
	[ "$lines" -gt 50 ] || bad "man -l $page: only $lines lines"
done
# Every line of the help text is a line of uext4(1) (whitespace trimmed).
{
	"$D/usr/bin/uext4" --help
	for c in $("$D/usr/bin/uext4" --help | sed -n '/^COMMANDS$/,/^$/{s/^    \([a-z][a-z0-9]*\)  .*/\1/p}'); do
		"$D/usr/bin/uext4" help "$c" | sed '1,/^$/d'
	done
} | sed 's/^ *//; s/ *$//; s/  */ /g' | grep -v '^$' | sort -u > "$T/help.lines"
sed 's/^ *//; s/ *$//; s/  */ /g' "$T/uext4.1.txt" | sort -u > "$T/man.lines"
MISSING=$(comm -23 "$T/help.lines" "$T/man.lines")
[ -z "$MISSING" ] || { echo "$MISSING" | head -10; bad "$(echo "$MISSING" | wc -l) lines of --help are not in uext4(1)"; }
echo "  uext4(1) holds all $(wc -l < "$T/help.lines") distinct lines of the help text"
grep -q 'uext4_version_ok' "$T/libuext4.3.txt" || bad "libuext4(3) does not document uext4_version_ok"

note "mount.fuse.uext4's options (UEXT4=echo: the command it would run)"
H=$D/usr/sbin/mount.fuse.uext4
got=$(UEXT4="echo" "$H" /i.img /m -o noauto,x-systemd.automount,ro,nofail,_netdev,comment=x,defaults,user,allow_other,uhelper=uext4 -o commit=2 -n -v -t fuse.uext4)
[ "$got" = "mount -o ro,allow_other,commit=2,dev,suid /i.img /m" ] || bad "mount.fuse.uext4 runs '$got'"
got=$(UEXT4="echo" "$H" /i.img /m -r)
[ "$got" = "mount -o ro,dev,suid /i.img /m" ] || bad "mount.fuse.uext4 -r runs '$got'"
got=$(UEXT4="echo" "$H" /i.img /m -o defaults,noauto)
[ "$got" = "mount -o dev,suid /i.img /m" ] || bad "mount.fuse.uext4 with only ignored options runs '$got'"
got=$(UEXT4="echo" "$H" /i.img /m -o nosuid,rw -o nodev)
[ "$got" = "mount -o nosuid,rw,nodev /i.img /m" ] || bad "mount.fuse.uext4 -o nosuid,rw -o nodev runs '$got'"
got=$(UEXT4="echo" "$H" /i.img /m -o nodev)
[ "$got" = "mount -o nodev,suid /i.img /m" ] || bad "mount.fuse.uext4 -o nodev runs '$got'"
got=$(UEXT4="echo" "$D/usr/sbin/umount.uext4" /m -v -n)
[ "$got" = "umount /m" ] || bad "umount.uext4 runs '$got'"
UEXT4="false" "$H" /i.img /m -f -o ro || bad "mount.fuse.uext4 -f (fake) did not exit 0 without running uext4"
"$H" /i.img 2> /dev/null && bad "mount.fuse.uext4 without DIR succeeded"
echo "  ignored: noauto, x-*, nofail, _netdev, comment=, defaults, user, uhelper=; passed: ro, allow_other, commit=; added: dev, suid"

note "mount(8) and fstab"
if [ "$(id -u)" != 0 ]; then
	echo "  SKIP (part): mount -t fuse.uext4 needs root"
elif [ ! -c /dev/fuse ] || ! command -v unshare > /dev/null; then
	echo "  SKIP (part): /dev/fuse or unshare missing"
else
	MIMG=$T/mount.img MNT=$T/mnt
	mkdir "$MNT"
	mke2fs -q -F -t ext4 "$MIMG" 32M || fail "mke2fs"
	MOUNTS+=("$MNT")
	unshare -m --propagation private "$0" --ns "$D" "$MIMG" "$MNT"
	rc=$?
	case $rc in
	0) ;;
	77) echo "  SKIP (part): the namespace part skipped (see above)" ;;
	*) bad "the mount(8) part failed (exit $rc)" ;;
	esac
	if [ $rc = 0 ] && can_loop; then
		KM=$T/kmnt
		mkdir "$KM"
		kmount "$MIMG" "$KM" || fail "kernel mount"
		[ "$(cat "$KM/hello" 2> /dev/null)" = "written through mount(8)" ] || bad "the kernel does not see /hello"
		[ -d "$KM/newdir" ] || bad "the kernel does not see /newdir"
		[ "$(cat "$KM/second" 2> /dev/null)" = second ] || bad "the kernel does not see /second"
		kumount "$KM"
		echo "  the kernel's ext4 sees the file written through mount -t fuse.uext4"
	fi
fi

note "make uninstall"
make -s -C "$TOP" BUILDDIR="$UEXT4_BUILD" uninstall DESTDIR="$D" PREFIX=/usr > "$T/uninstall.log" 2>&1 ||
	{ cat "$T/uninstall.log"; fail "make uninstall"; }
LEFT=$(find "$D" ! -type d)
[ -z "$LEFT" ] || bad "make uninstall left: $LEFT"

[ $FAILS = 0 ] || fail "$FAILS check(s) failed"
echo "PASS"
