#!/bin/bash
# fuzz_smoke.sh - the fuzzers in make check: build the libFuzzer
# harnesses (fuzz/, clang + ASan + UBSan + libFuzzer, build dir
# UEXT4_BUILD/fuzz), run each for FUZZ_SMOKE_SECS (15) seconds on a fresh
# seed corpus (fuzz/mkcorpus.sh), and replay every input kept under
# tests/fuzz-regress/HARNESS/ (each was a crash, leak or hang once: it must
# now run clean).  A crash, sanitizer report, leak, timeout (10 s per
# input) or allocation over 1 GiB fails the test, naming the harness and
# the input.  The harnesses are one sanitizer build of their own, the same
# in every mode, so the test runs in the release pass only.
# test-timeout: 300
# run-in: release
. "$(dirname "$0")/lib.sh"
setup_traps
command -v clang > /dev/null || skip "no clang (apt-get install clang)"
D=$(mktemp_dir)
echo 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { return 0; }' > "$D/t.c"
clang -fsanitize=fuzzer,address,undefined -o "$D/t" "$D/t.c" 2> "$D/t.err" ||
	{ cat "$D/t.err"; skip "clang cannot link libFuzzer (-fsanitize=fuzzer)"; }
FB=$UEXT4_BUILD/fuzz
note "building the harnesses in $FB"
make -s -C "$TOP" BUILD=fuzz BUILDDIR="$FB" -j2 fuzz-bins > "$D/build.log" 2>&1 ||
	{ tail -30 "$D/build.log"; fail "make fuzz-bins"; }
"$TOP/fuzz/mkcorpus.sh" "$D/seeds" || fail "fuzz/mkcorpus.sh"
secs=${FUZZ_SMOKE_SECS:-15}
# one input: 10 s, 1 GiB per allocation; the process (with the corpus
# libFuzzer keeps in memory): 4 GiB
opts=(-timeout=10 -malloc_limit_mb=1024 -rss_limit_mb=4096 -max_len=4194304)
bad=0
for h in fuzz_mount fuzz_write fuzz_recovery fuzz_mkfs_tar; do
	mkdir -p "$D/corpus/$h" "$D/art/$h"
	"$FB/fuzz/$h" "${opts[@]}" -max_total_time="$secs" -print_final_stats=1 \
		-artifact_prefix="$D/art/$h/" "$D/corpus/$h" "$D/seeds/$h" > "$D/$h.log" 2>&1
	rc=$?
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$D/$h.log" | tail -1)
	cov=$(grep -o 'cov: [0-9]*' "$D/$h.log" | tail -1)
	echo "$h: ${secs}s, ${execs:-0} executions, ${cov:-no coverage}, exit $rc"
	if [ $rc -ne 0 ] || [ -n "$(ls "$D/art/$h")" ]; then
		grep -m5 -E "ERROR|SUMMARY|Test unit written" "$D/$h.log"
		echo "FAIL: $h: crash input(s): $(ls "$D/art/$h")"
		bad=1
	fi
	[ "${execs:-0}" -gt 0 ] || { echo "FAIL: $h ran no input"; bad=1; }
	regress=$TOP/tests/fuzz-regress/$h
	n=0
	for f in "$regress"/*; do
		[ -f "$f" ] || continue
		n=$((n + 1))
		"$FB/fuzz/$h" "${opts[@]}" "$f" > "$D/replay.log" 2>&1 ||
			{ grep -m5 -E "ERROR|SUMMARY" "$D/replay.log"; echo "FAIL: $h: regression input $f"; bad=1; }
	done
	echo "$h: replayed $n regression input(s) from tests/fuzz-regress/$h"
done
[ $bad -eq 0 ] || fail "a harness crashed (logs above)"
echo "PASS: 4 harnesses ran ${secs}s each and every regression input replays clean"
