#!/bin/sh
# gpu-codegen.sh - the CUDA backend on a GPU: small kernels (tests/gpu/codegen.fa,
# tests/gpu/hopper.fa) and the attention kernels run on the GPU and on the CPU
# interpreter from the same inputs, and every buffer is compared
# (tests/gpu_codegen.c), once per pipeline choice (FADSL_PIPELINE: how loads
# feeding products reach shared memory on sm_90a, and whether block-pointer
# stores go out through the copy engine; each case's line says how many
# bulk-copy and bulk-store sites its code has), and once more per pipeline
# with FADSL_SCHEDULE=persistent (thread blocks looping over the programs).
# Exits 77 (skipped) where there is no GPU or no CUDA driver.
#   FADSL_TEST_SEED=N          reproduce a run's random inputs
#   FADSL_GPU_PIPELINES="..."  the choices to run (default: all of them, in the
#                              order they build on each other)
#   FADSL_GPU_SCHEDULES="..."  the schedules to run each with (default: grid persistent)
#   sh tests/gpu-codegen.sh mm   only the cases of kernels whose name contains "mm"
srcdir=${srcdir:-$(dirname "$0")/..}
pipelines=${FADSL_GPU_PIPELINES:-cp_async tma tma_async tma_ws tma_ws_pp}
schedules=${FADSL_GPU_SCHEDULES:-grid persistent}
failed=""
for s in $schedules; do
  for p in $pipelines; do
    echo "== FADSL_PIPELINE=$p FADSL_SCHEDULE=$s"
    FADSL_PIPELINE=$p FADSL_SCHEDULE=$s ./tests/gpu_codegen "$srcdir" "$@"
    st=$?
    [ $st -eq 77 ] && exit 77
    [ $st -ne 0 ] && failed="$failed $p/$s"
  done
done
if [ -n "$failed" ]; then
  echo "FAIL: the GPU disagrees with the interpreter with (FADSL_PIPELINE/FADSL_SCHEDULE) =$failed"
  exit 1
fi
echo "every case agrees with the interpreter with every pipeline ($pipelines) and schedule ($schedules)"
