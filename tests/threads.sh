#!/bin/bash
# threads.sh - run build/tests/threads (8 threads walking one mounted image)
# on the "lite" image: every part of mktree.sh, small enough for TSan.
# THREADS_SEED=N reproduces a run.
# run-in: release asan tsan
set -uo pipefail
. "$(dirname "$0")/lib.sh"
helper_test BIN threads
img=$(image_get lite) || fail "could not build the lite image"
"$BIN" "$img" ${THREADS_SEED:+"$THREADS_SEED"}
rc=$?
fsck_clean "$img" || rc=1
exit $rc
