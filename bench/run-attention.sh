#!/bin/sh
# run-attention.sh OUT.jsonl [--pipeline NAME] [--schedule NAME] [FADSL-ATTN OPTIONS...] - fadsl's attention benchmark.
#
# Runs fadsl-attn --gpu --bench --json over the standard shapes (16k tokens,
# hidden 2048: D in {64, 128}, N in {1024, 4096, 16384}, B = 16384 / N,
# H = 2048 / D, causal and not), the trading day (B in {1, 4}, H = 12,
# N = 23400, D = 64, causal), f16, grouped-query attention at cuDNN's own
# benchmark shape (B = 1, 64 query heads over 8 K/V heads, N = 16384,
# D = 128, causal, bf16) and D = 256 (B = 1, H = 16, N = 16384, causal and
# not; FADSL_BENCH_SHAPES picks among the sets std, trading, gqa, d256),
# forward and backward, and writes one JSON
# record per shape to OUT.jsonl (replacing it).  Each record has provider
# "fadsl", B, H, KVH, N, D, causal, dtype, the config of every kernel and
# where it came from, fwd/bwd ms and TFLOP/s (4*B*H*N*N*D, x0.5 causal, x2.5
# backward) of the deterministic backward pass (bwd_mode "deterministic";
# with the extra option --fused the fused one), the other backward pass's
# beside it (bwd_fused_ms / _tflops, or bwd_deterministic_*), the device
# memory used and, unless FADSL_BENCH_CHECK=0, the errors against float64
# (on a stated subset of heads and rows).
# Extra options go to every fadsl-attn run (e.g. --block-q 128 --block-k 64).
# --pipeline NAME (or FADSL_PIPELINE=NAME) chooses how the kernels pipeline
# the loads that feed their products on sm_90a: cp_async, tma (the default
# there; other targets use cp_async), tma_async, tma_ws, tma_ws_pp
# (docs/performance.md); each record then says "pipeline": NAME ("default"
# without a choice: the record's "arch" says which), so one output file per
# choice compares them with
# bench/compare.py.  --schedule NAME (or FADSL_SCHEDULE=NAME): grid (the
# default, one thread block per program) or persistent (thread blocks
# looping over the programs, the longest first); records say "schedule".
# FADSL_BENCH_TUNE=1 first tunes every shape with fadsl-tune (each kernel of
# attention.fa at that shape's sizes, those of the deterministic backward pass
# and, with --size deterministic=False, of the fused one, or only the kernels
# FADSL_BENCH_TUNE_KERNELS names, with FADSL_BENCH_TUNE_ARGS added to each
# fadsl-tune command, e.g. "--only BLOCK_Q=128"; into the database
# libfadsl reads: FADSL_TUNE_DB, else the cache root's tune.json), so the
# records show the tuned configurations; the tuner's output goes to
# OUT.jsonl.tune.log.
#
# Run from the repository root with the build in ./build (FADSL_BUILD=DIR
# for another; FADSL_ATTN=PATH names the binary directly).  bench/compare.py
# turns this file and the peers' records (PyTorch SDPA timings, one JSON per line) into a table.
# Exit status 1 when a shape failed (the others still run and are recorded).
set -u
[ $# -ge 1 ] || { echo "usage: bench/run-attention.sh OUT.jsonl [fadsl-attn options...]" >&2; exit 2; }
out=$1
shift
while [ "${1:-}" = --pipeline ] || [ "${1:-}" = --schedule ]; do
  [ $# -ge 2 ] || { echo "run-attention: $1 needs a name" >&2; exit 2; }
  if [ "$1" = --pipeline ]; then export FADSL_PIPELINE="$2"; else export FADSL_SCHEDULE="$2"; fi
  shift 2
done
pipeline=${FADSL_PIPELINE:-default}
schedule=${FADSL_SCHEDULE:-grid}
extra="$*"   # options for every run (simple words: no quoting needed)
build=${FADSL_BUILD:-./build}
attn=${FADSL_ATTN:-$build/examples/attention/fadsl-attn}
[ -x "$attn" ] || { echo "run-attention: $attn not found (build in ./build, or set FADSL_BUILD / FADSL_ATTN)" >&2; exit 2; }
check=--check
[ "${FADSL_BENCH_CHECK:-1}" = 0 ] && check=""
: > "$out" || exit 2
failures=0

tune=${FADSL_TUNE:-$build/autotune/fadsl-tune}
srcdir=$(cd "$(dirname "$0")/.." && pwd)
if [ "${FADSL_BENCH_TUNE:-0}" = 1 ]; then
  [ -x "$tune" ] || { echo "run-attention: $tune not found (FADSL_TUNE=PATH names it)" >&2; exit 2; }
  : > "$out.tune.log" || exit 2
fi

bench() {   # B H N D causal|full [KVH [DTYPE]]
  c=""
  [ "$5" = causal ] && c=--causal
  kvh=${6:-$2}
  dtype=${7:-f16}
  echo "== B=$1 H=$2 KVH=$kvh N=$3 D=$4 $5 $dtype"
  if [ "${FADSL_BENCH_TUNE:-0}" = 1 ]; then
    tc=False
    [ "$5" = causal ] && tc=True
    # every kernel of the default (deterministic) pass, then the fused pass's
    # tunable one (FADSL_BENCH_TUNE_KERNELS: only these, in one run each)
    if [ -n "${FADSL_BENCH_TUNE_KERNELS:-}" ]; then
      runs=""
      for k in $FADSL_BENCH_TUNE_KERNELS; do runs="$runs --kernel:$k"; done
    else
      runs=": --size:deterministic=False:--kernel:attn_bwd"
    fi
    for only in $runs; do
      only=$(echo "$only" | tr ':' ' ')
      if ! "$tune" "$srcdir/examples/attention/attention.fa" --size B="$1" --size H="$2" --size KVH="$kvh" \
          --size N="$3" --size D="$4" --size causal=$tc --size T="$dtype" $only ${FADSL_BENCH_TUNE_ARGS:-} \
          >> "$out.tune.log" 2>&1; then
        echo "run-attention: tuning B=$1 H=$2 N=$3 D=$4 $5 ($only) FAILED (see $out.tune.log)" >&2
        failures=$((failures + 1))
      fi
    done
  fi
  if ! "$attn" --gpu --shape "$1,$2,$kvh,$3,$4" $c --dtype "$dtype" --bench --json "$out" --seed 1 $check $extra; then
    echo "run-attention: B=$1 H=$2 KVH=$kvh N=$3 D=$4 $5 $dtype FAILED" >&2
    failures=$((failures + 1))
  fi
}

. "$srcdir/bench/shape-sets.sh"
shape_sets "${FADSL_BENCH_SHAPES:-std trading gqa d256}" bench || exit 2
# every record names the pipeline and schedule it was measured with
sed -i "s/^{\"provider\": \"fadsl\", /{\"provider\": \"fadsl\", \"pipeline\": \"$pipeline\", \"schedule\": \"$schedule\", /" "$out"
echo "run-attention: $(wc -l < "$out") records in $out (pipeline $pipeline, schedule $schedule), $failures failed shape(s)"
[ "$failures" -eq 0 ]
