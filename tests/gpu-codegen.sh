#!/bin/sh
# gpu-codegen.sh - the CUDA backend on a GPU: small kernels (tests/gpu/codegen.fa)
# and the attention kernels run on the GPU and on the CPU interpreter from the
# same inputs, and every buffer is compared (tests/gpu_codegen.c).  Exits 77
# (skipped) where there is no GPU or no CUDA driver.
#   FADSL_TEST_SEED=N   reproduce a run's random inputs
#   sh tests/gpu-codegen.sh mm   only the cases of kernels whose name contains "mm"
srcdir=${srcdir:-$(dirname "$0")/..}
exec ./tests/gpu_codegen "$srcdir" "$@"
