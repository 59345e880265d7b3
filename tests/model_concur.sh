#!/bin/bash
# model_concur.sh - a shorter run of the model test (tests/model.c) with
# 4 threads on a 4K ext4 image, named so tests/run.sh also runs it under
# TSan.  MODEL_SEED=N replays.
# test-timeout: 900
# run-in: release asan tsan
set -uo pipefail
. "$(dirname "$0")/lib.sh"
helper_test BIN model
dir=$(mktemp_dir)
img=$dir/concur.img
mke2fs -q -F -t ext4 "$img" 1G || fail "mke2fs"
test_seed model_concur MODEL_SEED
"$BIN" --threads 4 --ops "${MODEL_OPS:-3000}" --seed "$SEED" "$img" || exit 1
fsck_clean "$img" || exit 1
