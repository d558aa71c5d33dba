#!/bin/sh
# host-time.sh [N...] - host time per call of the attention library's forward
# and backward passes (bench/host_time.c) at B=1 H=8 D=64 causal, N = 64, 256
# and 1024 unless given: the cost of a launch at sizes where the GPU's work is
# shorter.  On a machine without a GPU, FADSL_CUDA_DRIVER_PATH naming the test
# suite's stand-in driver (build/tests/.libs/libfakecuda.so) times the
# library's own share.  Run from the repository root with the build in ./build
# (FADSL_BUILD=DIR).
set -u
build=${FADSL_BUILD:-./build}
libs=$build/runtime/.libs:$build/examples/attention/.libs
[ -e "$build/runtime/.libs/libfadsl.so" ] || { echo "host-time: no libfadsl in $build/runtime/.libs" >&2; exit 2; }
exe=${TMPDIR:-/tmp}/fadsl-host-time.$$
trap 'rm -f "$exe"' EXIT
${CC:-cc} -O2 -o "$exe" bench/host_time.c -Iruntime -Iexamples/attention -L"$build/runtime/.libs" \
  -L"$build/examples/attention/.libs" -lfadsl_attention -lfadsl || exit 2
[ $# -gt 0 ] || set -- 64 256 1024
for n in "$@"; do
  LD_LIBRARY_PATH=$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} "$exe" "$n" 500 || exit 1
done
