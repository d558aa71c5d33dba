#!/bin/sh
# gpu-backward-session.sh OUTDIR PART - what the attention backward passes
# need from a GPU machine, from the repository root with the build in ./build,
# in parts that each fit a ten-minute call:
#   tests   tests/gpu-backward.sh (both passes against float64, bitwise
#           reproducibility, block-pointer atomics, compute-sanitizer, the
#           Python GPU tests) and tests/gpu-attention.sh with --fused
#           (the quick set; the deterministic pass is its default)
#   bench   bench/run-attention.sh (every standard shape and the trading day:
#           the deterministic backward pass timed with the fused one beside it)
#           into OUTDIR/attention.jsonl, then the GQA shape of cuDNN's
#           benchmark (B=1, 64 query heads over 8, D=128, N=16k, bf16) and
#           D=256, and the table (bench/compare.py, with OUTDIR/peers.jsonl
#           when the peers' records are there: ../shared/bench/anchors.py)
#   delta   the fused pass with D computed in attn_bwd (--fuse-delta) against
#           attn_bwd_prep's on four shapes: which the default should be
#   resources  tests/attn-resources.sh (no GPU needed; for the record)
#   schedules  the fused pass at D=64 (128x128 tiles on 8 warps) as it is
#           (tma_async, one block per program) against a producer warpgroup
#           (tma_ws) in persistent blocks, which loads the next program's K
#           and V under the end of this one, and on the grid, at the
#           standard D=64 shapes and the trading day, labels X, WP and WG
#           in OUTDIR/schedules.jsonl (cuDNN beside: ../shared/bench/
#           anchors.py in the same call)
# Logs and records go to OUTDIR.
set -u
[ $# -ge 2 ] || { echo "usage: bench/gpu-backward-session.sh OUTDIR tests|bench|delta|resources|schedules" >&2; exit 2; }
out=$1 part=$2
mkdir -p "$out" || exit 2
build=${FADSL_BUILD:-./build}
attn=$build/examples/attention/fadsl-attn
here=$(dirname "$0")
rc=0
case "$part" in
  tests)
    ( cd "$build" && srcdir=.. sh ../tests/gpu-backward.sh ) > "$out/gpu-backward.log" 2>&1 || rc=1
    tail -n 5 "$out/gpu-backward.log"
    ( cd "$build" && srcdir=.. FADSL_GPU_TEST_QUICK=1 FADSL_ATTN_OPTIONS=--fused sh ../tests/gpu-attention.sh ) \
      > "$out/gpu-attention-deterministic.log" 2>&1 || rc=1
    tail -n 3 "$out/gpu-attention-deterministic.log"
    ;;
  bench)
    sh "$here/run-attention.sh" "$out/attention.jsonl" > "$out/run-attention.log" 2>&1 || rc=1
    for extra in "1,64,8,16384,128 --dtype bf16" "1,64,8,16384,128 --dtype bf16 --causal" "2,16,16,4096,256" \
                 "2,16,16,4096,256 --causal"; do
      # shellcheck disable=SC2086
      "$attn" --gpu --shape $extra --bench --json "$out/attention.jsonl" --seed 1 --check \
        >> "$out/run-attention.log" 2>&1 || rc=1
    done
    peers=""
    [ -f "$out/peers.jsonl" ] && peers="$out/peers.jsonl"
    python3 "$here/compare.py" "$out/attention.jsonl" $peers --out "$out/table.md" || rc=1
    ;;
  delta)
    for shape in "16,32,32,1024,64" "1,32,32,16384,64 --causal" "4,16,16,4096,128" "1,12,12,23400,64 --causal"; do
      for mode in "" --fuse-delta; do
        # shellcheck disable=SC2086
        "$attn" --gpu --shape $shape --bench --json "$out/fuse-delta.jsonl" --label "${mode:-prep}" --seed 1 $mode \
          >> "$out/fuse-delta.log" 2>&1 || rc=1
      done
    done
    grep -E "^backward:" "$out/fuse-delta.log"
    ;;
  resources)
    ( cd "$build" && srcdir=.. sh ../tests/attn-resources.sh ) > "$out/attn-resources.log" 2>&1 || rc=1
    tail -n 1 "$out/attn-resources.log"
    ;;
  schedules)
    ws=attn_bwd:BLOCK_Q=128,BLOCK_K=128,warps=8,stages=2,pipeline=tma_ws
    for shape in "16,32,32,1024,64" "16,32,32,1024,64 --causal" "4,32,32,4096,64" "4,32,32,4096,64 --causal" \
                 "1,32,32,16384,64" "1,32,32,16384,64 --causal" "1,12,12,23400,64 --causal"; do
      for label in X WP WG; do
        case $label in
          X) config="" ;;
          WP) config="--config $ws,schedule=persistent" ;;
          WG) config="--config $ws,schedule=grid" ;;
        esac
        # shellcheck disable=SC2086
        "$attn" --gpu --shape $shape --bench --fused --min-ms 100 --json "$out/schedules.jsonl" --label $label \
          --seed 1 $config >> "$out/schedules.log" 2>&1 || rc=1
      done
    done
    grep -E "^backward:.*fused" "$out/schedules.log"
    ;;
  *)
    echo "gpu-backward-session: unknown part '$part' (tests, bench, delta, resources or schedules)" >&2
    exit 2
    ;;
esac
exit $rc
