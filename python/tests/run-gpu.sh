#!/bin/sh
# run-gpu.sh - the Python package's tests on a machine with a CUDA GPU and torch
# (the GPU ones: accuracy against float64 SDPA, torch.compile, CUDA graphs,
# kernels on CUDA tensors, overhead; and all the others).
#
#   sh python/tests/run-gpu.sh [pytest options...]
#
# From the repository root.  The C libraries are taken from $FADSL_LIB_DIR, else
# from a build tree in ./build (built here by scripts/bootstrap.sh when missing);
# the package is used from python/ in place (no pip, no network).  Measured
# numbers go to $FADSL_GPU_REPORT (default ./gpu-report.jsonl).  The install
# test (it needs a network) is left out.  Exits 77 where torch sees no CUDA
# device.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
py=${PYTHON:-python3}
if ! "$py" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  echo "run-gpu: SKIP: no CUDA device visible to torch ($py)"
  exit 77
fi
if [ -z "${FADSL_LIB_DIR:-}" ]; then
  build=${FADSL_BUILD_DIR:-$top/build}
  if [ ! -f "$build/runtime/.libs/libfadsl.so.0" ] || [ ! -f "$build/examples/attention/.libs/libfadsl_attention.so.0" ]; then
    FADSL_BUILD_DIR=$build sh "$top/scripts/bootstrap.sh" || { echo "run-gpu: building the libraries failed"; exit 1; }
  else
    (cd "$build" && make -j"$(nproc)" runtime/libfadsl.la examples/attention/libfadsl_attention.la) >/dev/null || exit 1
  fi
  FADSL_LIB_DIR=$build/runtime/.libs:$build/examples/attention/.libs
fi
export FADSL_LIB_DIR
export PYTHONPATH=$top/python${PYTHONPATH:+:$PYTHONPATH}
report=${FADSL_GPU_REPORT:-$(pwd)/gpu-report.jsonl}
: > "$report"
export FADSL_GPU_REPORT=$report
export FADSL_TEST_INSTALL=0
cd "$top/python/tests" && exec "$py" -m pytest -rs -v "$@" .
