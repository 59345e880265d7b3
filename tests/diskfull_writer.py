#!/usr/bin/env python3
"""diskfull_writer.py DIR NFILES CHUNK SEED: append CHUNK-byte pieces of
seeded random data round-robin through NFILES new files in DIR until every
file's write(2) fails with ENOSPC.  Each write(2)'s return is checked: a
success (or short write) is acknowledged data; any error but ENOSPC, and
any failing close(2), is reported.  Prints one line per file:
"NAME BYTES SHA256" of the acknowledged bytes, then "errors N"."""
import errno, hashlib, os, random, sys

d, nfiles, chunk, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
rng = random.Random(seed)
errors = 0
files = []
for i in range(nfiles):
    name = "w%03d" % i
    try:
        fd = os.open(os.path.join(d, name), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    except OSError as e:
        if e.errno != errno.ENOSPC:
            print("open %s: %s" % (name, e), file=sys.stderr)
            errors += 1
        continue
    files.append([name, fd, 0, hashlib.sha256(), True])
live = len(files)
while live:
    for f in files:
        if not f[4]:
            continue
        data = rng.randbytes(chunk)
        try:
            n = os.write(f[1], data)
        except OSError as e:
            if e.errno != errno.ENOSPC:
                print("write %s: %s" % (f[0], e), file=sys.stderr)
                errors += 1
            f[4] = False
            live -= 1
            continue
        f[2] += n
        f[3].update(data[:n])
for f in files:
    try:
        os.close(f[1])
    except OSError as e:
        print("close %s: %s (acknowledged data lost)" % (f[0], e), file=sys.stderr)
        errors += 1
    print(f[0], f[2], f[3].hexdigest())
print("errors", errors)
