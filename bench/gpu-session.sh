#!/bin/sh
# gpu-session.sh OUTDIR - everything the attention variants need from a GPU
# machine, in one call from the repository root with the build in ./build:
# the variants' GPU tests against float64 (tests/gpu-variants.sh, the long
# sequences left to the benchmark's checks) and their benchmark with the
# peers (bench/run-variants.sh).  Logs and records go to OUTDIR; designed to
# finish within ten minutes on an H200 (FADSL_BENCH_QUICK=1: the trading day
# only, for a shorter run).
set -u
[ $# -ge 1 ] || { echo "usage: bench/gpu-session.sh OUTDIR" >&2; exit 2; }
out=$1
mkdir -p "$out" || exit 2
build=${FADSL_BUILD:-./build}
rc=0
( cd "$build" && srcdir=.. FADSL_GPU_TEST_QUICK=1 sh ../tests/gpu-variants.sh ) > "$out/gpu-variants.log" 2>&1 || rc=1
tail -n 3 "$out/gpu-variants.log"
sh "$(dirname "$0")/run-variants.sh" "$out" > "$out/run-variants.log" 2>&1 || rc=1
tail -n 40 "$out/run-variants.log"
exit $rc
