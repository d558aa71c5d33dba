#!/bin/sh
# The main job: set up a fresh machine if needed, build, and run attention.
# On a machine with an NVIDIA GPU it runs the forward and backward kernels on the
# GPU and benchmarks them; elsewhere it runs them on the CPU interpreter and checks
# them against a float64 reference.  Until a stage exists, it runs the furthest
# stage that does (see README.md).
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
sh "$top/scripts/bootstrap.sh"
build=${FADSL_BUILD_DIR:-$top/build}
prog="$top/examples/attention/attention.fa"

has_gpu() {
  command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1
}

if [ -x "$build/fadsl-attn" ]; then
  if has_gpu && "$build/fadsl-attn" --help 2>&1 | grep -q -- '--gpu'; then
    exec "$build/fadsl-attn" --gpu --bench --check --shape 1,12,12,4096,64 --causal --program "$prog"
  fi
  exec "$build/fadsl-attn" --interpret --check --shape 1,4,2,200,64 --causal --program "$prog"
fi
exec "$build/fadslc" --emit=ast "$prog"
