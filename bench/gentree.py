#!/usr/bin/env python3
"""gentree.py DIR [FILES] [BYTES] - a deterministic tree for bench/mkfs.sh.

About FILES files (default 60000) holding about BYTES bytes (default 1 GiB)
in a few levels of directories, with sizes spread as in a system image:
most files small (a few hundred bytes to 64 KiB), a few large (up to
64 MiB), some empty; 1% symlinks, 0.5% hard links, a few sparse files.
Everything comes from a seeded generator (GENTREE_SEED, default 1): the
same arguments give the same tree.  The seed is printed.
"""
import os
import random
import sys


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    top = sys.argv[1]
    nfiles = int(sys.argv[2]) if len(sys.argv) > 2 else 60000
    total = int(sys.argv[3]) if len(sys.argv) > 3 else 1 << 30
    seed = int(os.environ.get("GENTREE_SEED", "1"))
    rnd = random.Random(seed)
    print("gentree: dir=%s files=%d bytes=%d seed=%d" % (top, nfiles, total, seed))
    # Sizes: 2% empty, 90% small (log-uniform 100 B - 64 KiB), the rest
    # large (log-uniform 64 KiB - 64 MiB), scaled so the sum is `total`.
    sizes = []
    for _ in range(nfiles):
        r = rnd.random()
        if r < 0.02:
            sizes.append(0)
        elif r < 0.92:
            sizes.append(int(100 * (655.36 ** rnd.random())))
        else:
            sizes.append(int(65536 * (1024 ** rnd.random())))
    scale = total / max(1, sum(sizes))
    sizes = [int(s * scale) for s in sizes]
    # A random block of data reused at random offsets: fast and not
    # compressible.
    pool = rnd.randbytes(8 << 20)
    dirs = [top]
    os.makedirs(top, exist_ok=True)
    made = []
    for i, size in enumerate(sizes):
        if i % 40 == 0:
            parent = dirs[rnd.randrange(len(dirs))]
            if parent.count("/") - top.count("/") < 5:
                d = os.path.join(parent, "d%05d" % i)
                os.mkdir(d)
                dirs.append(d)
        d = dirs[rnd.randrange(len(dirs))]
        path = os.path.join(d, "f%05d" % i)
        kind = rnd.random()
        if kind < 0.01 and made:
            os.symlink(os.path.relpath(made[rnd.randrange(len(made))], d), path)
            continue
        if kind < 0.015 and made:
            os.link(made[rnd.randrange(len(made))], path)
            continue
        with open(path, "wb") as f:
            if kind < 0.017 and size > 65536:
                # Sparse: data at the start and the end, a hole between.
                f.write(pool[:4096])
                f.seek(size - 4096)
                f.write(pool[4096:8192])
            else:
                left = size
                while left > 0:
                    n = min(left, len(pool) // 2)
                    off = rnd.randrange(len(pool) - n + 1)
                    f.write(pool[off:off + n])
                    left -= n
        os.chmod(path, 0o644 if rnd.random() < 0.9 else 0o755)
        made.append(path)
    print("gentree: %d directories, %d entries" % (len(dirs), nfiles))


if __name__ == "__main__":
    main()
