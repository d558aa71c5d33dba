#!/bin/sh
# gpu-codegen-compile.sh - the kernels of tests/gpu/codegen.fa (every op the CUDA
# backend prints: scans, random numbers, device_print, while loops, ...) emitted
# and compiled by NVRTC for sm_80 and sm_90a, without a GPU; a compile error or
# an NVRTC warning fails.  One case per kernel; FADSL_CODEGEN_COMPILE=all compiles
# every case of tests/gpu_codegen.c.  Exits 77 (skipped) where NVRTC cannot be loaded.
srcdir=${srcdir:-$(dirname "$0")/..}
exec ./tests/gpu_codegen "$srcdir" --compile "$@"
