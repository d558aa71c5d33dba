#!/bin/sh
# tuner-speed.sh [FADSL-TUNE OPTIONS...] - how long fadsl-tune takes, cold,
# on the job the Triton comparison uses: attention forward, head dimension
# 128, one key (B=4, H=16, N=4096, not causal), 28 candidates.
#
# attention.fa's own attn_fwd space gives 24 candidates at D=128, so this
# runs a copy of the file whose attn_fwd prune admits 32: the six BLOCK_Q x
# BLOCK_K pairs in {32, 64, 128} with BLOCK_Q % BLOCK_K == 0 (the kernel
# asserts it), stages 2..4, 4 warps, and 8 warps on the pairs of at least
# 64x64 and on every pair at 2 stages.  The GPU's shared memory drops some:
# on an H200, 4 with padded tiles (sm_80 code; 28 left, Triton's number) and
# 2 with the swizzled tiles of sm_90a (30 left).
# The kernel cache and tuning database start empty (a fresh FADSL_CACHE_DIR
# and --db), so every candidate is compiled and timed.
# Run from the repository root with the build in ./build (FADSL_BUILD=DIR).
set -u
build=${FADSL_BUILD:-./build}
tune=$build/autotune/fadsl-tune
[ -x "$tune" ] || { echo "tuner-speed: $tune not found" >&2; exit 2; }
dir=${TMPDIR:-/tmp}/fadsl-tuner-speed.$$
mkdir -p "$dir/cache" || exit 2
trap 'rm -rf "$dir"' EXIT
trap 'exit 130' INT  # a signal ends the script (the EXIT trap cleans up), not only its current command
trap 'exit 143' TERM
old='prune=fwd_tiles_ok(BLOCK_Q, BLOCK_K, warps, d_head)'
new='prune=BLOCK_Q % BLOCK_K == 0 and (warps == 4 or BLOCK_Q * BLOCK_K >= 64 * 64 or stages == 2) and (d_head <= 128 or BLOCK_Q <= 64)'
sed "0,/$old/s//$new/" examples/attention/attention.fa > "$dir/attention.fa"
cp examples/attention/attention_core.fa "$dir/"   # what the copy imports
cmp -s examples/attention/attention.fa "$dir/attention.fa" && { echo "tuner-speed: the attn_fwd prune was not found" >&2; exit 2; }
start=$(date +%s.%N)
FADSL_CACHE_DIR=$dir/cache "$tune" "$dir/attention.fa" --kernel attn_fwd --db "$dir/tune.json" \
  --size B=4 --size H=16 --size KVH=16 --size N=4096 --size D=128 --size causal=False "$@"
rc=$?
end=$(date +%s.%N)
echo "tuner-speed: fadsl-tune exit $rc, wall $(echo "$end - $start" | bc 2>/dev/null || awk "BEGIN{print $end - $start}") s"
exit $rc
