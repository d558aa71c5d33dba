#!/bin/sh
# tune-fake-driver.sh - fadsl-tune's tuning path on a machine without a GPU,
# against the stand-in CUDA driver (tests/libfakecuda: device memory is host
# memory, a launch runs nothing, every event pair reads 1.5 ms):
#   - buffers are made only when a launch that runs needs them: in
#     tests/tune/lazy.fa the two buffers used only after the tuned kernel are
#     never made, and the launch that uses them never runs;
#   - every candidate is compiled (NVRTC) and screened, and, all timing equal,
#     all of them get the final runs (20, or --runs);
#   - the report gives the setup phases and the timing rule, the result is
#     stored and a plain launch afterwards takes it ("tuned");
#   - --json carries the screening and flush numbers.
# SKIP (77) without NVRTC.
set -u
lib=tests/.libs/libfakecuda.so
[ -f "$lib" ] || { echo "tune-fake-driver: $lib was not built"; exit 99; }
tune=${FADSL_TUNE:-./autotune/fadsl-tune}
srcdir=${srcdir:-.}
dir=$(mktemp -d "${TMPDIR:-/tmp}/tune-fake-driver.XXXXXX") || exit 99
trap 'rm -rf "$dir"' EXIT
trap 'exit 130' INT  # a signal ends the script (the EXIT trap cleans up), not only its current command
trap 'exit 143' TERM
FADSL_CUDA_DRIVER_PATH="$(cd "$(dirname "$lib")" && pwd)/libfakecuda.so"
FADSL_CACHE_DIR=$dir/cache
export FADSL_CUDA_DRIVER_PATH FADSL_CACHE_DIR
unset FADSL_TUNE_DB || true
failures=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}
# has FILE TEXT WHAT: FILE contains TEXT
has() {
  if grep -qF -- "$2" "$1"; then echo "ok: $3"; else fail "$3: no '$2' in:"; sed 's/^/    /' "$1"; fi
}

FADSL_LOG=info "$tune" "$srcdir/tests/tune/lazy.fa" --db "$dir/db.json" --json "$dir/out.json" --jobs 2 \
  >"$dir/out" 2>"$dir/err"
status=$?
if grep -q "NVRTC not available" "$dir/out" "$dir/err"; then
  echo "SKIP: no NVRTC here"
  exit 77
fi
[ "$status" -eq 0 ] && echo "ok: lazy.fa tuned (status 0)" || { fail "status $status"; cat "$dir/out" "$dir/err"; }
has "$dir/out" "3 of 5 buffers made" "only the buffers of launches that run are made"
n=$(grep -c "fadsl: launch square" "$dir/err")
[ "$n" = 1 ] && echo "ok: square runs once, before axpy; not after it" || fail "square launched $n times, want 1"
n=$(grep -c ": screened, " "$dir/err")
[ "$n" = 6 ] && echo "ok: all 6 candidates screened" || fail "$n candidates screened, want 6"
has "$dir/out" "timing: 5 runs each, then 25 ms of warm-up and at least 20 runs and 100 ms of them for the 6 within 1.5x of the best (0 dropped)" "the timing rule is reported"
has "$dir/out" "L2 flushed by" "the flush is reported"
has "$dir/out" "setup " "the setup time is reported per kernel"
has "$dir/out" "generate " "the setup phases are reported"
has "$dir/out" "libfadsl now launches it with T=f16 BLOCK=64 warps=1 stages=2 (tuned)" \
  "equal times: the first candidate wins and is used"
has "$dir/out" "1 result stored in $dir/db.json" "the result is stored"
has "$dir/out.json" '"screen_runs": 5' "--json: screening runs"
has "$dir/out.json" '"dropped": false' "--json: per-candidate dropped flag"
# the fake driver times every run at 1.5 ms: 100 ms of runs are 67
has "$dir/out.json" '"runs": 67' "--json: final runs (100 ms of runs at 1.5 ms)"
has "$dir/out.json" '"min_ms": 100' "--json: the final round's duration"

# --runs: more final runs; the screening round stays 5
"$tune" "$srcdir/tests/tune/lazy.fa" --db "$dir/db.json" --force --runs 24 --min-ms 0 --only BLOCK=64 --json "$dir/out2.json" --quiet \
  >"$dir/out2" 2>"$dir/err2" || { fail "--runs 24: status $?"; cat "$dir/err2"; }
has "$dir/out2" "at least 24 runs and 0 ms of them for the 2 within 1.5x" "--runs sets the final round"
has "$dir/out2.json" '"runs": 24' "--min-ms 0: --runs alone"

# more final runs than one batch of queued runs holds (128)
"$tune" "$srcdir/tests/tune/lazy.fa" --db "$dir/db.json" --force --runs 130 --only BLOCK=64 --only warps=1 \
  --json "$dir/out3.json" --quiet >"$dir/out3" 2>"$dir/err3" || { fail "--runs 130: status $?"; cat "$dir/err3"; }
has "$dir/out3" "at least 130 runs and 100 ms of them for the 1 within 1.5x" "--runs 130: in two batches"
has "$dir/out3.json" '"runs": 130' "--runs 130: all runs counted"

# a candidate whose first launch never finishes (FAKE_CUDA_HANG: no recorded work completes) stops
# the tuner within --timeout, naming it, instead of waiting forever
FAKE_CUDA_HANG=1 timeout 60 "$tune" "$srcdir/tests/tune/lazy.fa" --db "$dir/db-hang.json" --force --timeout 1 \
  --only BLOCK=64 --only warps=1 --quiet >"$dir/out4" 2>"$dir/err4"
status=$?
[ "$status" -eq 1 ] && echo "ok: a hung launch stops the tuner (status 1)" || fail "hung launch: status $status, want 1"
has "$dir/err4" "did not finish the work queued on the device within 1 s" "the hang is reported"
has "$dir/err4" "kernel 'axpy', " "the hung kernel is named"
[ ! -s "$dir/db-hang.json" ] && echo "ok: nothing stored after a hang" || fail "a result was stored after a hang"

echo "$failures failure(s)"
[ "$failures" -eq 0 ]
