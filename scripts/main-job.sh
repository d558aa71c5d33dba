#!/bin/sh
# The main job: set up a fresh machine if needed, build, and run attention.
# On a machine with an NVIDIA GPU it runs the forward and backward kernels on the
# GPU (the trading-day shape), times them and checks them against a float64
# reference; elsewhere it runs them on the CPU interpreter, with the same check.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
sh "$top/scripts/bootstrap.sh"
build=${FADSL_BUILD_DIR:-$top/build}
prog="$top/examples/attention/attention.fa"

attn="$build/examples/attention/fadsl-attn"
# A GPU is there when libfadsl can open a device context on it.
if "$attn" --gpu --shape 1,1,1,16,16 >/dev/null 2>&1; then
  # one trading day at one-second resolution: 23,400 steps, 12 heads, causal,
  # forward and backward, timed, and checked against a float64 reference
  exec "$attn" --gpu --shape 1,12,12,23400,64 --causal --backward --bench --check --program "$prog"
fi
echo "main-job: no GPU here; running attention on the CPU interpreter instead"
exec "$attn" --interpret --shape 1,4,2,200,64 --causal --backward --check --program "$prog"
