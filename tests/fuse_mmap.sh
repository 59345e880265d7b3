#!/bin/bash
# fuse_mmap.sh - shared writable mmap of a file opened near full.
# Near full (on images under about 56 MiB, from the start) the server opens
# files for writing FOPEN_DIRECT_IO (fuse/fuse.c, full_guard), which the
# kernel maps MAP_SHARED only if the server claims FUSE_DIRECT_IO_ALLOW_MMAP
# at INIT (fuse/loop.c adds it: libfuse 3.14 cannot); without it mmap fails
# with ENODEV where the kernel's ext4 maps the file.  On a 32 MiB image with
# the default mount: a file written with write(2), then changed through a
# MAP_SHARED mapping and msync; a read(2) on another descriptor sees the
# mapped writes at once (the kernel writes the pages back before a direct
# read); after `uext4 umount` the image holds them (debugfs), and e2fsck -fn
# is clean.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
fuse_test python3
mkdir "$T/m"
mke2fs -q -F -t ext4 "$T/a.img" 32M || fail "mke2fs"
"$UEXT4" mount "$T/a.img" "$T/m" > "$T/mount.log" 2>&1 || { cat "$T/mount.log"; fail "uext4 mount"; }
MOUNTS+=("$T/m")

# Writes FILE: 256 KiB of 'a' by write(2), then every 4 KiB page's first
# 100 bytes through a shared mapping; prints the expected content's md5.
python3 - "$T/m/f" > "$T/expect.md5" << 'EOF' || fail "shared mmap write on the uext4 mount (see above)"
import hashlib, mmap, os, sys
path = sys.argv[1]
size, page = 256 << 10, 4096
fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
os.write(fd, b"a" * size)
try:
    m = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
except OSError as e:
    sys.exit(f"mmap MAP_SHARED of a file opened for writing: {e}")
expect = bytearray(b"a" * size)
for off in range(0, size, page):
    line = (b"page %d " % (off // page)).ljust(100, b"m")
    m[off:off + 100] = line
    expect[off:off + 100] = line
m.flush()
other = os.open(path, os.O_RDONLY)
got = b"".join(iter(lambda: os.read(other, 1 << 16), b""))
if got != bytes(expect):
    sys.exit("read(2) after msync does not see the mapped writes")
os.close(other)
m.close()
os.close(fd)
print(hashlib.md5(expect).hexdigest())
EOF
"$UEXT4" umount "$T/m" || fail "uext4 umount"
got=$(debugfs -R "cat /f" "$T/a.img" 2> /dev/null | md5sum | cut -d' ' -f1)
[ "$got" = "$(cat "$T/expect.md5")" ] || fail "the image holds other data than was written through the mapping"
fsck_clean "$T/a.img" || fail "e2fsck after the uext4 mount"
san_check || fail "sanitizer reports"
echo "fuse_mmap: OK (shared writable mmap of a direct-io file, data on disk, image clean)"
