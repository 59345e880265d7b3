#!/bin/bash
# run.sh - run every benchmark in bench/ (every bench/*.sh but this one) and keep the
# output in bench/results/ (gitignored) as well as on stdout.  Build first
# with `make` (the release build; or use `make bench`, which does both).
# Benchmarks, not tests: `make check` does not run them.  `make bench-each`
# runs this; `make bench` runs bench/report.sh (BENCHMARKS.md) instead.
#   read_bench.sh  stat/read through lib, FUSE, kernel, fuse2fs
#   create.sh      file creation (seed 002): lib, FUSE, nullfs, kernel, fuse2fs
#   fuse_loop.sh   FUSE request loops on nullfs
#   orphan.sh      stress-orphan truncates, unlinks, fsync latency (seed 000)
#   real.sh        dbench, rsync, tar x/c, rm -rf, git, sqlite on the mount
#                  (each loop), fuse2fs and the kernel (apt-get install
#                  dbench rsync sqlite3 git)
#   mkfs.sh        uext4 mkfs -d (1 thread, all) against mke2fs -d and the
#                  kernel's cp -a / tar x into a loop mount
# BENCHES="create read_bench" runs only those.
set -u
cd "$(dirname "$0")/.." || exit 1
mkdir -p bench/results
log=bench/results/run-$(date +%Y%m%d-%H%M%S).log
status=0
for b in bench/*.sh; do
	[ "$b" = bench/run.sh ] && continue
	[ "$b" = bench/report.sh ] && continue   # the report runs the others itself
	if [ -n "${BENCHES:-}" ]; then
		case " $BENCHES " in *" $(basename "$b" .sh) "*) ;; *) continue ;; esac
	fi
	[ -x "$b" ] || continue
	echo "==== $b" | tee -a "$log"
	"$b" 2>&1 | tee -a "$log"
	rc=${PIPESTATUS[0]}
	[ "$rc" -eq 0 ] || { echo "==== $b failed (exit $rc)" | tee -a "$log"; status=1; }
done
echo "bench/run.sh: log in $log"
exit $status
