#!/bin/sh
# runtime-fake-driver.sh - runs check_runtime_fakegpu with the stand-in CUDA
# driver (tests/libfakecuda, built from runtime_fake_cuda.c) loaded through
# FADSL_CUDA_DRIVER_PATH, so that the launch path is tested where there is
# no GPU.  (Not as libcuda.so.1 on the library path: NVRTC opens that name
# too and must not find the stand-in.)
set -u
lib=tests/.libs/libfakecuda.so
[ -f "$lib" ] || { echo "runtime-fake-driver: $lib was not built"; exit 99; }
FADSL_CUDA_DRIVER_PATH="$(cd "$(dirname "$lib")" && pwd)/libfakecuda.so" ./tests/check_runtime_fakegpu
