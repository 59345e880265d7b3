#!/bin/bash
# fuzz/run.sh [SECS] - run each harness (FUZZ_HARNESSES, default all four)
# for SECS seconds (default 60) on its corpus, one after the other; print
# per harness the executions, exec/s, coverage (cov: edges, ft) and the
# crashes (crash-, leak-, timeout-, oom- files written to
# build/fuzz/artifacts/HARNESS/), and append that line to fuzz/LOG.md.
# The corpus (build/fuzz/corpus/HARNESS) starts from fuzz/mkcorpus.sh's
# seeds and keeps what the runs add.  Build first: make fuzz-build.
set -u
secs=${1:-60}
here=$(cd "$(dirname "$0")/.." && pwd)
B=$here/build/fuzz
harnesses=${FUZZ_HARNESSES:-fuzz_mount fuzz_write fuzz_recovery fuzz_mkfs_tar}
[ -d "$B/seeds" ] || "$here/fuzz/mkcorpus.sh" "$B/seeds" || exit 1
commit=$(git -C "$here" rev-parse --short HEAD 2> /dev/null || echo unknown)
status=0
for h in $harnesses; do
	bin=$B/fuzz/$h
	[ -x "$bin" ] || { echo "$h: no $bin (make fuzz-build)"; status=1; continue; }
	corpus=$B/corpus/$h art=$B/artifacts/$h/ log=$B/logs/$h.$$.log
	mkdir -p "$corpus" "$art" "$B/logs"
	before=$(ls "$art" | wc -l)
	t0=$(date +%s)
	# -timeout and -malloc_limit_mb bound one input, -max_len the image
	# size; -rss_limit_mb is the whole process, with the corpus that
	# libFuzzer keeps in memory (hundreds of 1-4 MiB images).
	"$bin" -max_total_time="$secs" -timeout=10 -malloc_limit_mb=1024 -rss_limit_mb=4096 -max_len=4194304 \
		-print_final_stats=1 -artifact_prefix="$art" "$corpus" "$B/seeds/$h" > "$log" 2>&1
	rc=$?
	ran=$(( $(date +%s) - t0 ))   # shorter than $secs when a crash stops it
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
	[ -n "$execs" ] || execs=$(sed -n 's/^#\([0-9][0-9]*\).*/\1/p' "$log" | tail -1)  # stopped early
	rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
	cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
	ft=$(grep -o 'ft: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
	crashes=$(( $(ls "$art" | wc -l) - before ))
	line="| $(date -u +%Y-%m-%dT%H:%MZ) | $commit | $h | $ran | ${execs:-0} | ${rate:-0} | ${cov:-0} | ${ft:-0} | $crashes |"
	echo "$h: ${execs:-0} executions, ${rate:-0} exec/s, cov ${cov:-0} edges, ft ${ft:-0}, $crashes crashes (rc $rc, log $log)"
	[ "$crashes" -eq 0 ] || { ls -t "$art" | head -"$crashes"; grep -m3 -E "ERROR|SUMMARY" "$log"; status=1; }
	flock "$here/fuzz/LOG.md" sh -c "echo '$line' >> '$here/fuzz/LOG.md'"
done
exit $status
