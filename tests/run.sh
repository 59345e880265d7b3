#!/bin/bash
# run.sh - run every test (behind `make check`; build first: make check does).
#
# Runs, for each build that exists (release build/, asan build/asan/ with
# ASan+UBSan, tsan build/tsan/), the tests that name that build in their
# "run-in:" tag line, "# run-in: release asan tsan" in a script or
# "/* run-in: ... */" in a C test (a test with a .sh wrapper is tagged
# there); a test without the line runs in release and asan.  MODE-long
# ("asan-long") runs the test in MODE only under make check-long
# (UEXT4_LONG=1): the slowest sanitizer runs, whose paths the release run
# and the other sanitizer tests already cover, kept out of make check's hour.
# A test is a program build/<mode>/tests/NAME (from tests/NAME.c) or a script
# tests/NAME.sh.  Not run directly: helper tools (walk) and programs that
# have a tests/NAME.sh wrapper (the wrapper runs them).  lib.sh, mktree.sh
# and run.sh are not tests.  Scripts get UEXT4_BUILD=build dir and
# UEXT4=build dir/uext4 in their environment.
#
# Exit status of a test: 0 pass, 77 skip, anything else fail.  Each test's
# output goes to build/test-logs/MODE-NAME.log; failures' logs are printed.
# Per-test timeout: TEST_TIMEOUT (600 s) or a "# test-timeout: N" line in a
# script.  Options: MODES="release asan" limits the builds, TESTS="oracle
# threads" limits the tests, JOBS=2 runs two tests at a time (make check
# does; a test tagged "# run-alone" still runs by itself).  TSan tests run
# under setarch -R (no address randomisation), which TSan needs here.
set -uo pipefail
TOP=$(cd "$(dirname "$0")/.." && pwd)
cd "$TOP" || exit 1
# BUILDROOT=dir runs the builds in dir, dir/asan, dir/tsan (make BUILDDIR=...).
BUILDROOT=${BUILDROOT:-build}
case "$BUILDROOT" in /*) LOGDIR=$BUILDROOT/test-logs ;; *) LOGDIR=$TOP/$BUILDROOT/test-logs ;; esac
mkdir -p "$LOGDIR"
HELPERS=" walk fc_fault quotatree "
MODES=${MODES:-release asan tsan}
TEST_TIMEOUT=${TEST_TIMEOUT:-600}
# JOBS tests at a time (make check: 2, one per core here).
JOBS=${JOBS:-1}
PASS=0 FAILN=0 SKIPN=0
FAILED_LOGS=()

builddir() {
	case "$1" in release) echo "$BUILDROOT" ;; *) echo "$BUILDROOT/$1" ;; esac
}

# runs_in NAME MODE: NAME's tag line lists MODE (default: release asan).
runs_in() {
	local src modes=
	for src in "tests/$1.sh" "tests/$1.c"; do
		[ -f "$src" ] || continue
		modes=$(sed -n 's,^\(#\|/\*\) *run-in: *\([a-z -]*\).*,\2,p' "$src" | head -1)
		[ -n "$modes" ] && break
	done
	case " ${modes:-release asan} " in *" $2 "*) return 0 ;; esac
	case " $modes " in *" $2-long "*) [ "${UEXT4_LONG:-0}" = 1 ] && return 0 ;; esac
	return 1
}

wanted() { # wanted NAME: in TESTS (if set)
	[ -z "${TESTS:-}" ] && return 0
	case " $TESTS " in *" $1 "*) return 0 ;; esac
	return 1
}

script_timeout() {
	local t
	t=$(sed -n 's/^# test-timeout: *\([0-9][0-9]*\).*/\1/p' "$1" | head -1)
	echo "${t:-$TEST_TIMEOUT}"
}

# run_one MODE NAME TIMEOUT CMD...: runs in the background (a job); its
# result goes to stdout as one line and to $LOGDIR/.result-MODE-NAME.
run_one() {
	local mode=$1 name=$2 limit=$3 log rc start secs result
	shift 3
	log=$LOGDIR/$mode-$name.log
	start=$(date +%s)
	{
		echo "# $mode $name: $*"
		echo "# UEXT4_BUILD=$UEXT4_BUILD"
	} > "$log"
	timeout -k 30 "$limit" "$@" >> "$log" 2>&1 < /dev/null
	rc=$?
	secs=$(($(date +%s) - start))
	case $rc in
	0) result=PASS ;;
	77) result="SKIP ($(grep -m1 -i 'skip' "$log" | cut -c1-100))" ;;
	124 | 137) result="FAIL (timeout after ${limit}s)" ;;
	*) result="FAIL (exit $rc)" ;;
	esac
	echo "${result%% *} $log" > "$LOGDIR/.result-$mode-$name"
	printf '%-8s %-28s %4ss  %s\n' "$mode" "$name" "$secs" "$result"
}

# The jobs, in order: "MODE NAME TIMEOUT ALONE CMD..." (ALONE: 1 for a test
# tagged "# run-alone", which runs with no other test beside it).
JOBLIST=()
add_job() { JOBLIST+=("$*"); }

# alone FILE: tagged "# run-alone" (it measures time, or loads the machine
# so that another test's time limits would not hold).
alone() { [ -f "$1" ] && grep -q '^# run-alone' "$1" && echo 1 || echo 0; }

list_mode() {
	local mode=$1 b name f tsan=
	b=$(builddir "$mode")
	if [ ! -d "$b/tests" ]; then
		printf '%-8s %-28s %4s   %s\n' "$mode" "-" "" "SKIP (no $b/tests: build with make BUILD=$mode)"
		SKIPN=$((SKIPN + 1))
		return
	fi
	case "$b" in /*) ;; *) b=$TOP/$b ;; esac
	# TSan needs a non-randomised address space layout on newer kernels.
	[ "$mode" = tsan ] && [ -n "$TSAN_SETARCH" ] && tsan="setarch $(uname -m) -R"
	for f in "$b"/tests/*; do
		[ -f "$f" ] && [ -x "$f" ] || continue
		name=$(basename "$f")
		case "$HELPERS" in *" $name "*) continue ;; esac
		[ -e "$TOP/tests/$name.sh" ] && continue
		runs_in "$name" "$mode" || continue
		wanted "$name" || continue
		add_job "$mode $name $TEST_TIMEOUT $(alone "tests/$name.c") $tsan $f"
	done
	for f in tests/*.sh; do
		name=$(basename "$f" .sh)
		case "$name" in lib | mktree | run) continue ;; esac
		runs_in "$name" "$mode" || continue
		wanted "$name" || continue
		add_job "$mode $name.sh $(script_timeout "$f") $(alone "$f") $tsan bash $TOP/$f"
	done
}

# run_job "MODE NAME TIMEOUT ALONE CMD...": in the background, with the
# mode's build in the environment.
run_job() {
	local mode name limit solo b
	read -r mode name limit solo _ <<< "$1"
	local -a cmd
	read -r -a cmd <<< "$1"
	b=$(builddir "$mode")
	case "$b" in /*) ;; *) b=$TOP/$b ;; esac
	(export UEXT4_BUILD=$b UEXT4=$b/uext4; run_one "$mode" "$name" "$limit" "${cmd[@]:4}") &
}

TSAN_SETARCH=
if setarch "$(uname -m)" -R true 2> /dev/null; then TSAN_SETARCH=1; fi
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1 second_deadlock_stack=1}
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

echo "uext4 tests: modes: $MODES; $JOBS at a time; logs in $LOGDIR"
rm -f "$LOGDIR"/.result-*
for mode in $MODES; do list_mode "$mode"; done
running=0
for job in "${JOBLIST[@]}"; do
	read -r _ _ _ solo _ <<< "$job"
	# A run-alone test waits for the machine to be free, and holds it.
	limit=$JOBS
	[ "$solo" = 1 ] && limit=1
	while [ "$running" -ge "$limit" ]; do wait -n; running=$((running - 1)); done
	run_job "$job"
	running=$((running + 1))
	if [ "$solo" = 1 ]; then wait; running=0; fi
done
wait

# Tally in job order (the lines above came in the order the jobs ended).
for job in "${JOBLIST[@]}"; do
	read -r mode name _ <<< "$job"
	read -r result log < "$LOGDIR/.result-$mode-$name" 2> /dev/null || result=FAIL
	case $result in
	PASS) PASS=$((PASS + 1)) ;;
	SKIP) SKIPN=$((SKIPN + 1)) ;;
	*) FAILN=$((FAILN + 1)); FAILED_LOGS+=("${log:-$LOGDIR/$mode-$name.log}") ;;
	esac
done

for log in "${FAILED_LOGS[@]}"; do
	echo
	echo "======== $log (last 150 lines)"
	tail -n 150 "$log"
done
echo "$PASS passed, $FAILN failed, $SKIPN skipped"
[ "$FAILN" = 0 ]
