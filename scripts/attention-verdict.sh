#!/bin/sh
# attention-verdict.sh OUTPUT STATUS WHERE - the main job's closing line, from
# what `fadsl-attn ... --check` printed (OUTPUT, a file), its exit status and
# where it ran (GPU or interpreter):
#   main-job: PASS: attention forward+backward (B=1 H=12 ... causal f16) on the GPU (NVIDIA H200, sm_90a):
#     errors against float64 o 2.4e-04, lse 3.6e-08, dq ..., dk ..., dv ...; all within the bounds (...);
#     forward 204.1 TFLOP/s, backward 171.0 TFLOP/s
#   main-job: FAIL: ... dq 5.3e-02 (ABOVE its bound) ...
# Exits 0 on PASS, 1 on FAIL.  (scripts/main-job.sh; tests/main-job-verdict.sh)
set -u
out=${1:?usage: attention-verdict.sh OUTPUT STATUS WHERE}
status=${2:?}
where=${3:?}

shape=$(sed -n 's/^attention //p' "$out" | head -n 1 | sed 's/ scale=.*//')
device=$(sed -n 's/^GPU 0: //p' "$out" | head -n 1 | sed 's/ (compute capability [^,]*, \([^,]*\),.*/, \1/')
if [ "$where" = GPU ]; then on="the GPU${device:+ ($device)}"; else on="the CPU interpreter"; fi
# "  dq  ||out - ref|| / ... = 5.271e-02  (above the test bound)" -> "dq 5.271e-02 (ABOVE its bound)"
errors=$(sed -n 's/^  \(o\|lse\|dq\|dk\|dv\) .* = \([^ ]*\)\(.*\)$/\1 \2 \3/p' "$out" |
  awk '{ printf "%s%s %s%s", sep, $1, $2, ($0 ~ /above the test bound|NaN/) ? " (ABOVE its bound)" : ""; sep = ", " }')
# the bounds fadsl-attn checks, for f16, the main job's dtype (examples/attention/attn_check.c)
bounds="o 2e-3, lse 1e-4, dq/dk/dv 1e-2"
speed=$(sed -n 's/^\(forward\|backward\): .* \([0-9.]*\) TFLOP\/s.*/\1 \2 TFLOP\/s/p' "$out" | paste -sd, - |
  sed 's/,/, /g')

if [ -z "$errors" ]; then
  echo "main-job: FAIL: attention${shape:+ ($shape)} on $on stopped before its check" \
    "(fadsl-attn exit status $status; its output is in $out)"
  exit 1
fi
if [ "$status" -ne 0 ]; then
  echo "main-job: FAIL: attention forward+backward ($shape) on $on: errors against float64 $errors;" \
    "not all within the bounds ($bounds)"
  exit 1
fi
echo "main-job: PASS: attention forward+backward ($shape) on $on: errors against float64 $errors;" \
  "all within the bounds ($bounds)${speed:+; $speed}"
