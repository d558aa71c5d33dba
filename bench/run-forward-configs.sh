#!/bin/sh
# run-forward-configs.sh OUT.jsonl - the forward pass of attention.fa at fixed
# configurations, each shape with each, timed as bench/run-attention.sh times
# it (fadsl-attn --gpu --bench --forward-only: at least 200 ms of runs after
# 25 ms of warm-up, an L2 flush before each, the median), one JSON record per
# shape and configuration in OUT.jsonl (replacing it), its "label" the
# configuration.  To compare configurations with the peers in one call (the
# tuner picks among them too, but in its own runs):
#   bench/run-forward-configs.sh fwd.jsonl
#   python3 ../shared/bench/anchors.py --providers sdpa_cudnn --shapes std --out peers.jsonl
#   python3 bench/compare_configs.py fwd.jsonl peers.jsonl [--best best.jsonl]
# FADSL_FWD_CONFIGS: the configurations, each PIPELINE:SCHEDULE:BLOCK_Q:BLOCK_K:STAGES
# with 8 warps (default: the three fastest on an H200 on 2026-12-03,
# "tma:grid:128:64:2 tma_ws_pp:grid:128:128:3 tma_ws_pp:persistent:128:128:3");
# FADSL_FWD_CONFIGS_D256 the same for head dimensions above 128, where those
# tiles do not fit (default: "tma_ws_pp:grid:128:64:2
# tma_ws_pp:persistent:128:64:2", the fastest there); a configuration that
# does not fit a shape's head dimension fails that run alone.  FADSL_BENCH_SHAPES: the shape sets, as bench/run-attention.sh's (std
# trading gqa d256; default std trading gqa).  Run from the repository root
# with the build in ./build (FADSL_BUILD=DIR, FADSL_ATTN=PATH).  Exit status
# 1 when a run failed (the others still run and are recorded).
set -u
[ $# -eq 1 ] || { echo "usage: bench/run-forward-configs.sh OUT.jsonl" >&2; exit 2; }
out=$1
build=${FADSL_BUILD:-./build}
attn=${FADSL_ATTN:-$build/examples/attention/fadsl-attn}
[ -x "$attn" ] || { echo "run-forward-configs: $attn not found (build in ./build, or set FADSL_BUILD / FADSL_ATTN)" >&2; exit 2; }
configs=${FADSL_FWD_CONFIGS:-tma:grid:128:64:2 tma_ws_pp:grid:128:128:3 tma_ws_pp:persistent:128:128:3}
configs_d256=${FADSL_FWD_CONFIGS_D256:-tma_ws_pp:grid:128:64:2 tma_ws_pp:persistent:128:64:2}
: > "$out" || exit 2
failures=0

one() {   # B H N D causal|full KVH DTYPE CONFIG
  IFS=: read -r pipeline schedule bq bk stages <<EOC
$8
EOC
  c=""
  [ "$5" = causal ] && c=--causal
  if ! FADSL_PIPELINE=$pipeline FADSL_SCHEDULE=$schedule "$attn" --gpu --shape "$1,$2,$6,$3,$4" $c --dtype "$7" \
      --block-q "$bq" --block-k "$bk" --warps 8 --stages "$stages" --bench --forward-only --seed 1 \
      --json "$out" --label "$8"; then
    echo "run-forward-configs: B=$1 H=$2 KVH=$6 N=$3 D=$4 $5 $7 with $8 FAILED" >&2
    failures=$((failures + 1))
  fi
}
shape() {   # B H N D causal|full [KVH [DTYPE]]
  echo "== B=$1 H=$2 KVH=${6:-$2} N=$3 D=$4 $5 ${7:-f16}"
  cfgs=$configs
  [ "$4" -gt 128 ] && cfgs=$configs_d256
  for cfg in $cfgs; do
    one "$1" "$2" "$3" "$4" "$5" "${6:-$2}" "${7:-f16}" "$cfg"
  done
}

. "$(cd "$(dirname "$0")" && pwd)/shape-sets.sh"
shape_sets "${FADSL_BENCH_SHAPES:-std trading gqa}" shape || exit 2
echo "run-forward-configs: $(wc -l < "$out") records in $out, $failures failed run(s)"
[ "$failures" -eq 0 ]
