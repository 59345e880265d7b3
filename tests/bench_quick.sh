#!/bin/bash
# bench_quick.sh - the benchmark report's smoke run:
# bench/report.sh --quick with this build's binaries must produce a
# BENCHMARKS-style file whose every table row has numbers and whose every
# plot is a PNG; the library's FxMark tables must all be there with numbers;
# the servers it started must report no sanitizer error; the lock and I/O
# statistics section has a lock-class and a journal row for every workload
# on the library (locks acquired in MWCL), and on the FUSE mount exactly
# one UNLINK per unlink and one CREATE per create, and MWUL ran on
# nullfs --writeback (nullfs-wb) too.  Then the checker
# itself: a report with a non-number in a table, a missing plot, a plot
# that is not a PNG or no lock-class tables must be refused.
# Skips only without gnuplot (the plots); the systems this machine lacks
# (the kernel column without root) are left out of the run, and said so.
# run-in: release asan-long
# test-timeout: 300
# run-alone: it times the benchmarks it runs
. "$(dirname "$0")/lib.sh"
setup_traps
command -v gnuplot >/dev/null || skip "gnuplot missing (apt-get install gnuplot-nox)"
[ -x "$UEXT4_BUILD/bench/fxmark" ] || fail "no $UEXT4_BUILD/bench/fxmark: build first"
d=$(mktemp_dir)
san_logs_in "$d"
can_loop || note "not root or no loop device: the kernel column is left out"
[ -c /dev/fuse ] || note "no /dev/fuse: the FUSE columns are left out"

note "bench/report.sh --quick"
start=$(date +%s)
BENCH_BUILD=$UEXT4_BUILD "$TOP/bench/report.sh" --quick --out "$d/r/BENCHMARKS.md" > "$d/out" 2>&1
rc=$?
cat "$d/out"
[ $rc = 0 ] || fail "report.sh --quick exited $rc"
note "took $(($(date +%s) - start)) s"
md=$d/r/BENCHMARKS.md
[ -s "$md" ] || fail "no $md"
grep -q "^check: .* is well formed" "$d/out" || fail "report.sh did not check its report"

note "the report measured this commit and has every FxMark workload with library numbers"
grep -q "^Commit measured: $(git -C "$TOP" rev-parse HEAD)" "$md" || fail "wrong or no commit in the report"
for wl in MWCL MWCM MWUL MWUM MWRL MWRM DWTL MRPL MRPM MRDL MRDM; do
	sec=$(awk -v h="### $wl:" 'index($0, h) == 1 { on = 1; next } on && /^##/ { exit } on' "$md")
	[ -n "$sec" ] || fail "no section for $wl"
	# The lib column is the first after threads; 1 and 2 threads ran.
	for n in 1 2; do
		grep -Eq "^\| $n \| [0-9]+(\.[0-9]+)? \|" <<< "$sec" || fail "$wl: no library number for $n threads"
	done
	[ -s "$d/r/plots/$wl.png" ] || fail "$wl: no plot"
done
grep -q '^| lib MWCL: 2 threads (A) vs 1 (B) | [0-9]' "$md" || fail "the Targets section does not evaluate MWCL"
grep -q 'LOCK-STATS' "$md" || fail "no place marked for the lock statistics"

note "the lock and I/O statistics: every workload, counters that moved, FUSE requests per operation"
# section SYS: the statistics of SYS at 2 threads (quick runs 1 and 2).
section() { awk -v h="### $1, 2 threads" '$0 == h { on = 1; next } on && /^###? / { exit } on' "$md"; }
lib=$(section lib)
[ -n "$lib" ] || fail "no lock statistics for lib at 2 threads"
for wl in MWCL MWCM MWUL MWUM MWRL MWRM DWTL MRPL MRPM MRDL MRDM; do
	grep -Eq "^\| $wl [a-z_]+ \| [0-9]+ \| [0-9]+ \|" <<< "$lib" || fail "lib: no lock class row for $wl"
	grep -Eq "^\| $wl \| [0-9]+ \| [0-9]+ \| [0-9.]+x \|" <<< "$lib" || fail "lib: no journal row with both throughputs for $wl"
done
# Creating files takes locks: the most contended class of MWCL was acquired.
acq=$(awk -F'|' '$2 ~ /^ MWCL [a-z_]+ $/ { print $3 + 0; exit }' <<< "$lib")
[ "${acq:-0}" -gt 0 ] || fail "lib MWCL: no lock acquisition counted"
if [ -c /dev/fuse ]; then
	fuse=$(section fuse)
	[ -n "$fuse" ] || fail "no statistics for the FUSE mount at 2 threads"
	# Columns: workload LOOKUP GETATTR SETATTR CREATE MKDIR UNLINK ...: every
	# unlink reached the server as one UNLINK, every create as one CREATE.
	col() { awk -F'|' -v w=" $1 " -v c="$2" '/^\| workload \| LOOKUP \|/ { on = 1 } on && $2 == w { print $c + 0; exit }' <<< "$fuse"; }
	awk -v v="$(col MWUL 8)" 'BEGIN { exit !(v >= 0.99 && v <= 1.01) }' ||
		fail "fuse MWUL: $(col MWUL 8) UNLINK requests per unlink, not 1"
	awk -v v="$(col MWCL 6)" 'BEGIN { exit !(v >= 0.99 && v <= 1.01) }' ||
		fail "fuse MWCL: $(col MWCL 6) CREATE requests per create, not 1"
	# The stub with the writeback cache ran MWUL, and the ratio to it is there.
	sec=$(awk 'index($0, "### MWUL:") == 1 { on = 1; next } on && /^##/ { exit } on' "$md")
	grep -q '^| threads | .*nullfs-wb .*| FUSE/nullfs-wb |$' <<< "$sec" || fail "MWUL: no nullfs-wb column"
	grep -Eq '^\| 2 \|.* [0-9.]+x \|$' <<< "$sec" || fail "MWUL: no FUSE/nullfs-wb ratio at 2 threads"
fi

note "every image the run wrote is e2fsck -fn clean"
grep -q '^- fxmark, .* on lib: e2fsck -fn clean' "$md" || fail "no e2fsck -fn of the library's fxmark image in the report"
if grep -Eq 'NOT CLEAN|e2fsck found' "$md"; then
	fail "an image is not clean: $(grep -E 'NOT CLEAN|e2fsck found' "$md" | head -3)"
fi

note "every part produced its tables (those whose tool this machine has)"
while read -r line; do
	case $line in
	*"stress-ng"*) command -v stress-ng > /dev/null || continue ;;
	*"dbench"*) command -v dbench > /dev/null || continue ;;
	esac
	fail "a part produced nothing: $line"
done < <(grep '^_No results' "$md")

note "no sanitizer report from the servers"
if ls "$d"/san.* > /dev/null 2>&1; then
	head -30 "$d"/san.*
	fail "sanitizer reports (above)"
fi

note "the checker refuses broken reports"
check() { "$TOP/bench/report.sh" --check "$1" > "$d/check.out" 2>&1; }
check "$md" || { cat "$d/check.out"; fail "--check refuses the report it just wrote"; }
mkdir -p "$d/bad/plots"
cp "$d/r/plots/"*.png "$d/bad/plots/"
# a cell that is not a number: the first library number of the MWCL table
awk 'done == 0 && /^\| 1 \| [0-9]/ { sub(/\| 1 \| [0-9.]+/, "| 1 | abc"); done = 1 } { print }' "$md" > "$d/bad/BENCHMARKS.md"
check "$d/bad/BENCHMARKS.md" && fail "--check accepted a table cell \"abc\""
grep -q 'is not a number' "$d/check.out" || fail "--check did not name the bad cell: $(cat "$d/check.out")"
cp "$md" "$d/bad/BENCHMARKS.md"
rm "$d/bad/plots/MWCL.png"
check "$d/bad/BENCHMARKS.md" && fail "--check accepted a missing plot"
grep -q 'MWCL.png is missing' "$d/check.out" || fail "--check did not name the missing plot"
echo "not a png" > "$d/bad/plots/MWCL.png"
check "$d/bad/BENCHMARKS.md" && fail "--check accepted a plot that is not a PNG"
grep -q 'MWCL.png is not a PNG' "$d/check.out" || fail "--check did not name the bad plot"
awk '/^\| workload, lock class \|/ { skip = 1 } skip && /^$/ { skip = 0 } !skip' "$md" > "$d/bad/BENCHMARKS.md"
cp "$d/r/plots/"*.png "$d/bad/plots/"
check "$d/bad/BENCHMARKS.md" && fail "--check accepted a report without its lock-class tables"
grep -q 'no statistics table' "$d/check.out" || fail "--check did not name the missing statistics: $(cat "$d/check.out")"
echo "PASS: bench_quick"
