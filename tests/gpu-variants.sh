#!/bin/sh
# gpu-variants.sh - the attention variants and decoding on the GPU against
# float64 (fadsl-attn --gpu --check through libfadsl_attention's _ex and
# decoding calls):
#  1. each variant alone and combined, GQA, odd lengths, f16 and bf16, rows
#     that see one key or none, packed sequences of uneven lengths;
#  2. a variant's own program (--program variants/window.fa);
#  3. long sequences: the trading day with a 1k window, D=128 N=16k with
#     softcap + window + sinks (float64 on a stated subset of heads and rows);
#  4. decoding from a paged KV cache: several splits, GQA 8:1, causal
#     multi-token steps, a 32k-key cache.
# Exits 77 (skipped) where the runtime finds no GPU.  FADSL_TEST_SEED=N
# reproduces a run; FADSL_GPU_TEST_QUICK=1 leaves out the long sequences.
set -u
attn=${FADSL_ATTN:-$(pwd)/examples/attention/fadsl-attn}
run=${FADSL_RUN:-$(pwd)/tools/fadsl-run}
srcdir=${srcdir:-.}
adir=$srcdir/examples/attention
dir=${TMPDIR:-/tmp}/gpu-variants.$$
mkdir -p "$dir" || exit 99
trap 'rm -rf "$dir"' EXIT
trap 'exit 130' INT  # a signal ends the script (the EXIT trap cleans up), not only its current command
trap 'exit 143' TERM
seed=${FADSL_TEST_SEED:-$(date +%s)}
echo "seed $seed (FADSL_TEST_SEED=$seed reproduces this run)"

"$attn" --gpu --shape 1,1,1,16,16 --window 4,0 --seed 1 > "$dir/probe" 2>&1
status=$?
if grep -q "no GPU:" "$dir/probe"; then
  sed -n 's/.*no GPU: /SKIP: no GPU: /p' "$dir/probe"
  exit 77
fi
if [ "$status" -ne 0 ]; then
  echo "FAIL: a GPU is there but the smallest variant run failed (status $status):"
  cat "$dir/probe"
  exit 1
fi
grep '^GPU' "$dir/probe"

failures=0 cases=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

npy() {   # FILE DTYPE N STEP: N values 0, STEP, 2 STEP, ...
  "$run" "$srcdir/tests/run/fill.fa" fill --interpret -D T="$2" --arg n="$3" --arg step="$4" --out out="$1" \
    > "$dir/fill.out" 2>&1 || { fail "making $1"; cat "$dir/fill.out"; }
}
npy "$dir/slopes8.npy" f32 8 0.0625
npy "$dir/sinks8.npy" f32 8 0.25
npy "$dir/slopes12.npy" f32 12 0.02
npy "$dir/sinks12.npy" f32 12 0.1
npy "$dir/sinks16.npy" f32 16 0.1
npy "$dir/cu.npy" i32 5 101         # 0, 101, ..., 404: four sequences of 101
npy "$dir/cu_day.npy" i32 4 7800   # the trading day as three packed sequences of 7800

# variant ARGS...: fadsl-attn --gpu --check (forward and backward unless --decode)
variant() {
  cases=$((cases + 1))
  s=$((seed + cases))
  "$attn" --gpu --check --seed "$s" "$@" > "$dir/out" 2>&1
  st=$?
  if [ "$st" -eq 0 ]; then
    echo "ok: $* --seed $s: $(grep -E '^  (o|lse|dq|dk|dv|dsinks) ' "$dir/out" | awk '{printf "%s %s  ", $1, $NF}')"
  else
    fail "fadsl-attn --gpu --check --seed $s $* (status $st):"
    sed 's/^/    /' "$dir/out"
  fi
}

echo "== each variant, and combinations"
variant --shape 1,8,2,77,64 --window 16,0 --backward
variant --shape 2,8,8,200,128 --window 33,40 --backward --dtype bf16
variant --shape 1,8,2,300,100,64 --window 0,0 --causal --backward
variant --shape 1,8,2,90,20,64 --window 0,3 --backward
variant --shape 2,8,4,177,64 --softcap 30 --causal --backward
variant --shape 1,8,1,130,128 --softcap 5 --backward --dtype bf16
variant --shape 1,8,8,150,64 --alibi "$dir/slopes8.npy" --causal --backward
variant --shape 2,8,2,64,64 --sinks "$dir/sinks8.npy" --dsinks "$dir/ds.npy" --backward
variant --shape 1,8,2,404,64 --cu-seqlens "$dir/cu.npy" --causal --backward
variant --shape 1,8,2,404,128 --cu-seqlens "$dir/cu.npy" --window 20,20 --sinks "$dir/sinks8.npy" \
  --dsinks "$dir/ds.npy" --backward --dtype bf16
variant --shape 1,8,4,257,64 --window 64,0 --softcap 20 --alibi "$dir/slopes8.npy" --sinks "$dir/sinks8.npy" \
  --dsinks "$dir/ds.npy" --backward
variant --shape 1,8,8,1,1,64 --window 0,0 --sinks "$dir/sinks8.npy" --dsinks "$dir/ds.npy" --backward

echo "== a variant's own program"
variant --program "$adir/variants/window.fa" --shape 1,8,2,200,64 --window 10,10 --backward
variant --program "$adir/variants/softcap.fa" --shape 1,8,2,200,64 --softcap 15 --causal --backward
variant --program "$adir/variants/varlen.fa" --shape 1,8,2,404,64 --cu-seqlens "$dir/cu.npy" --backward

if [ "${FADSL_GPU_TEST_QUICK:-0}" != 1 ]; then
  echo "== long sequences (float64 on a stated subset)"
  variant --shape 1,12,12,23400,64 --causal --window 1024,0 --backward
  variant --shape 1,16,16,16384,128 --window 4096,4096 --softcap 50 --sinks "$dir/sinks16.npy" \
    --dsinks "$dir/ds.npy" --backward --dtype bf16
  variant --shape 1,12,12,23400,64 --cu-seqlens "$dir/cu_day.npy" --causal --alibi "$dir/slopes12.npy" --backward
fi

echo "== decoding from a paged KV cache"
variant --decode-shape 4,1,32,8,128,64,4000
variant --decode-shape 8,4,16,2,64,16,1000 --causal --dtype bf16
variant --decode-shape 2,1,8,1,128,256,32768 --num-splits 16
variant --decode-shape 16,2,64,8,128,64,8192 --causal

echo "$cases cases, $failures failed"
[ "$failures" -eq 0 ]
