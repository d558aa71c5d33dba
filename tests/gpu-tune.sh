#!/bin/sh
# gpu-tune.sh - fadsl-tune end to end on a GPU:
#   1. tests/tune/small.fa: the problem runs `square` first (it produces the
#      input of the tunable `axpy`), axpy is tuned, the result is stored in a
#      fresh database, and a plain launch afterwards takes its config from it
#      ("tuned");
#   2. the same again without --force: the database answers, nothing is timed;
#   3. --force: tuned again, the entry replaced (still one entry);
#   4. attention.fa's forward kernel at a small size over a reduced space
#      (with the timing rule, the L2 flush and the setup breakdown reported);
#   5. tests/tune/mismatch.fa: candidates that compute different results are
#      rejected as a possible compiler bug;
#   6. (FADSL_GPU_TUNE_FULL=1) every attention kernel at the file's sizes.
# Everything the tuner prints is shown.  Exits 77 (SKIP) without a GPU.
set -u

srcdir=${srcdir:-.}
tune=${FADSL_TUNE:-./autotune/fadsl-tune}
if [ ! -x "$tune" ]; then
  echo "FAIL: $tune not built"
  exit 1
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/fadsl-gpu-tune.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
FADSL_CACHE_DIR="$work/cache"
export FADSL_CACHE_DIR
unset FADSL_TUNE_DB FADSL_LOG || true
db="$work/tune.json"
failures=0

fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

# run NAME ARGS...: runs fadsl-tune, shows its output, leaves the status in $rc
run() {
  name=$1
  shift
  echo "==== $name: fadsl-tune $*"
  "$tune" "$@" >"$work/$name.out" 2>"$work/$name.err"
  rc=$?
  echo "---- stdout"
  cat "$work/$name.out"
  echo "---- stderr"
  cat "$work/$name.err"
  echo "---- exit status $rc"
}

# json_ok FILE: the file parses as JSON (with whatever is installed)
json_ok() {
  if command -v jq >/dev/null 2>&1; then
    jq -e . "$1" >/dev/null
  elif command -v python3 >/dev/null 2>&1; then
    python3 -c 'import json, sys; json.load(open(sys.argv[1]))' "$1"
  else
    grep -q '"results"' "$1"
  fi
}

# entries FILE: number of entries in a database
entries() {
  if command -v jq >/dev/null 2>&1; then
    jq '.entries | length' "$1"
  elif command -v python3 >/dev/null 2>&1; then
    python3 -c 'import json, sys; print(len(json.load(open(sys.argv[1]))["entries"]))' "$1"
  else
    grep -c '"tuned_at"' "$1"
  fi
}

# ---- 1. small.fa, tuned -------------------------------------------------------------
run small "$srcdir/tests/tune/small.fa" --db "$db" --json "$work/small.json" --jobs 4
if [ "$rc" -eq 3 ]; then
  echo "SKIP: no GPU (fadsl-tune exits 3)"
  exit 77
fi
[ "$rc" -eq 0 ] || fail "small.fa: exit status $rc"
grep -q "rank" "$work/small.out" || fail "small.fa: no result table"
grep -q "1 result stored in $db" "$work/small.out" || fail "small.fa: nothing stored"
grep -q "libfadsl now launches it with .*(tuned)" "$work/small.out" ||
  fail "small.fa: a launch after tuning did not take the tuned config"
grep -q "compiler bug" "$work/small.out" && fail "small.fa: candidates disagree (see above)"
[ -f "$db" ] || fail "no database at $db"
json_ok "$db" || fail "the database is not JSON"
json_ok "$work/small.json" || fail "--json output is not JSON"
grep -q '"kernel": "axpy"' "$db" || fail "no axpy entry in the database"
grep -q '"n": 1000' "$db" || fail "the axpy entry lacks key n=1000"
grep -q '"median_ms"' "$db" || fail "the entry has no timing"
echo "database:"
cat "$db"

# ---- 2. again: the database answers ----------------------------------------------------
FADSL_LOG=info
export FADSL_LOG
run small-again "$srcdir/tests/tune/small.fa" --db "$db"
unset FADSL_LOG
[ "$rc" -eq 0 ] || fail "small.fa again: exit status $rc"
grep -q "already tuned" "$work/small-again.out" || fail "small.fa again: tuned a second time without --force"
grep -q "fadsl: launch axpy .*(tuned)" "$work/small-again.err" ||
  fail "small.fa again: FADSL_LOG=info does not show a tuned launch of axpy"

# ---- 3. --force: tuned again, the entry replaced ------------------------------------
run small-force "$srcdir/tests/tune/small.fa" --db "$db" --force --quiet
[ "$rc" -eq 0 ] || fail "small.fa --force: exit status $rc"
n=$(entries "$db")
[ "$n" = 1 ] || fail "after --force the database has $n entries, not 1"

# a different size is a different key: a second entry
run small-size "$srcdir/tests/tune/small.fa" --db "$db" --size N=5000 --quiet
[ "$rc" -eq 0 ] || fail "small.fa --size N=5000: exit status $rc"
n=$(entries "$db")
[ "$n" = 2 ] || fail "after --size N=5000 the database has $n entries, not 2"

# ---- 4. attention's forward kernel, small and reduced -----------------------------------
run attn-fwd "$srcdir/examples/attention/attention.fa" --db "$db" --kernel attn_fwd \
  --size N=512 --size B=1 --only BLOCK_Q=64,128 --only BLOCK_K=64 --only warps=4 --only stages=2 \
  --json "$work/attn.json"
[ "$rc" -eq 0 ] || fail "attention.fa attn_fwd: exit status $rc"
grep -q "libfadsl now launches it with .*(tuned)" "$work/attn-fwd.out" ||
  fail "attn_fwd: a launch after tuning did not take the tuned config"
grep -q "compiler bug" "$work/attn-fwd.out" && fail "attn_fwd: candidates disagree (see above)"
grep -q "TFLOP/s" "$work/attn-fwd.out" || fail "attn_fwd: no TFLOP/s column"
json_ok "$work/attn.json" || fail "attn_fwd: --json output is not JSON"
# the timing rule and where the time went are reported
grep -q "timing: 5 runs each, then 25 ms of warm-up and at least 20 runs and 100 ms of them for the" "$work/attn-fwd.out" || fail "attn_fwd: no timing rule line"
grep -q "L2 flushed by [0-9]* memsets* of [0-9]* MiB" "$work/attn-fwd.out" || fail "attn_fwd: no L2 flush"
grep -q "setup .*buffers made" "$work/attn-fwd.out" || fail "attn_fwd: no setup breakdown"
grep -q '"runs": 20' "$work/attn.json" || fail "attn_fwd: no candidate with 20 final runs in --json"

# ---- 5. candidates that disagree are rejected as a possible compiler bug -------------------
run mismatch "$srcdir/tests/tune/mismatch.fa" --db "$work/mismatch-db.json"
[ "$rc" -eq 0 ] || fail "mismatch.fa: exit status $rc (the first candidate should still win)"
grep -q "BLOCK=64  \[mismatch\] possible compiler bug" "$work/mismatch.out" ||
  fail "mismatch.fa: BLOCK=64 disagrees with BLOCK=32 and was not rejected"
grep -q "BLOCK=128  \[mismatch\] possible compiler bug" "$work/mismatch.out" ||
  fail "mismatch.fa: BLOCK=128 disagrees with BLOCK=32 and was not rejected"
grep -q "NOTE: candidates disagreed" "$work/mismatch.out" || fail "mismatch.fa: no compiler-bug note"

# ---- 6. all of attention.fa (slow: on request) ------------------------------------------
if [ "${FADSL_GPU_TUNE_FULL:-0}" = 1 ]; then
  run attn-full "$srcdir/examples/attention/attention.fa" --db "$db" --json "$work/attn-full.json"
  [ "$rc" -eq 0 ] || fail "attention.fa: exit status $rc"
  grep -q "compiler bug" "$work/attn-full.out" && fail "attention.fa: candidates disagree (see above)"
fi

if [ "$failures" -ne 0 ]; then
  echo "$failures check(s) failed"
  exit 1
fi
echo "PASS"
exit 0
