#!/bin/sh
# The main job: set up a fresh machine if needed, build, and run attention.
# On a machine with an NVIDIA GPU it runs the forward and backward kernels on the
# GPU (the trading-day shape), times them and checks them against a float64
# reference; elsewhere it runs them on the CPU interpreter, with the same check.
#
# It prints a line as each phase starts, keeps the build's output in a log
# file (shown, with its name, only when the build fails), and ends with one
# verdict line:
#   main-job: PASS: attention forward+backward, B=1 H=12 ... on the GPU (NVIDIA H200 ...):
#             errors against float64 o 2.4e-04, lse 3.6e-08, ... all within the bounds (...)
# or "main-job: FAIL: ..." saying what failed.  Exit status 0 on PASS, 1 on FAIL.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
build=${FADSL_BUILD_DIR:-$top/build}
prog="$top/examples/attention/attention.fa"
attn="$build/examples/attention/fadsl-attn"
mkdir -p "$build" || exit 1
log="$build/main-job-build.log"
probe="$build/main-job-gpu-probe.txt"
out="$build/main-job-attention.txt"

fail() {
  echo "main-job: FAIL: $*"
  exit 1
}

# ---- 1. set up and build ----
echo "main-job: [1/3] installing what is missing and building in $build (output: $log)"
start=$(date +%s)
if ! sh "$top/scripts/bootstrap.sh" > "$log" 2>&1; then
  echo "main-job: the build failed; the end of $log:"
  tail -n 40 "$log" | sed 's/^/    /'
  fail "the set-up or the build failed (the whole output is in $log)"
fi
grep '^bootstrap: ' "$log" | sed 's/^/    /'
echo "main-job:       built in $(($(date +%s) - start)) s; the tools are $build/fadslc, $build/tools/fadsl-run,"
echo "main-job:       $build/examples/attention/fadsl-attn and $build/autotune/fadsl-tune ('make install' puts them on PATH)"

# ---- 2. a GPU? ----
# There is one when libfadsl can open a device context on it and run a tiny
# attention; "no GPU: ..." says why not.  Any other failure is a failure.
echo "main-job: [2/3] looking for a GPU"
if "$attn" --gpu --shape 1,1,1,16,16 --program "$prog" > "$probe" 2>&1; then
  where=GPU
  args="--gpu --shape 1,12,12,23400,64 --causal --backward --bench --check"
  echo "main-job:       found: $(sed -n 's/^GPU 0: //p' "$probe" | head -n 1)"
elif grep -q 'no GPU' "$probe"; then
  where=interpreter
  args="--interpret --shape 1,4,2,200,64 --causal --backward --check"
  echo "main-job:       none ($(sed -n 's/^fadsl-attn: no GPU: //p' "$probe" | head -n 1))"
  echo "main-job:       running attention on the CPU interpreter instead, on a smaller shape"
else
  sed 's/^/    /' "$probe"
  fail "a GPU is there but a tiny attention failed on it (output above, also in $probe)"
fi

# ---- 3. attention, checked against float64 ----
# one trading day at one-second resolution on the GPU: 23,400 steps, 12
# heads, causal, forward and backward, timed, and checked against a float64
# reference; the interpreter runs a smaller shape with the same checks
echo "main-job: [3/3] attention forward and backward on the $where, checked against float64: fadsl-attn $args"
# shellcheck disable=SC2086
"$attn" $args --program "$prog" > "$out" 2>&1
status=$?
sed 's/^/    /' "$out"

# ---- the verdict ----
exec sh "$top/scripts/attention-verdict.sh" "$out" "$status" "$where"
