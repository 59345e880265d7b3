#!/bin/bash
# scripts/run.sh (make run) - install dependencies, build, and mount uext4.img
# on ./mnt with our FUSE server; `uext4 mount --create 1G` makes the image
# (ext4, uext4 mkfs's defaults) if it is absent.
#
# The mount is read-write; `uext4 mount -o ro` mounts read-only.
set -euo pipefail
cd "$(dirname "$0")/.."
PKGS="build-essential pkg-config libfuse3-dev liburing-dev fuse3 e2fsprogs fuse2fs attr acl util-linux kmod time libcap2-bin libarchive-dev xz-utils zstd gnuplot-nox stress-ng dbench clang libclang-rt-dev man-db libnbd-dev nbdkit libssl-dev fsverity xfsprogs"

missing=()
for p in $PKGS; do
	dpkg-query -W -f='${Status}' "$p" 2> /dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	if [ "$(id -u)" = 0 ] && command -v apt-get > /dev/null; then
		echo "installing: ${missing[*]}"
		DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}" ||
			{ apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"; }
	else
		echo "warning: missing packages (install them as root): ${missing[*]}" >&2
	fi
fi
[ -e /dev/fuse ] || modprobe fuse 2> /dev/null || true

make

[ -e uext4.img ] || echo "creating uext4.img: 1 GiB sparse, ext4 (uext4 mount --create)"
mkdir -p mnt
if mountpoint -q mnt; then
	echo "mnt is already a mount point (a previous 'make run'?):"
	findmnt mnt || true
	echo "unmount it first with:  build/uext4 umount mnt"
	exit 1
fi
echo "mounting uext4.img on mnt (read-write)"
build/uext4 mount --create 1G uext4.img mnt
echo "mounted.  Unmount with:  build/uext4 umount mnt  (returns once everything is written back)"
