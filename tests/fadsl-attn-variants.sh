#!/bin/sh
# fadsl-attn-variants.sh - fadsl-attn's variant and decoding options end to end
# on the interpreter: --window, --softcap, --alibi, --sinks/--dsinks and
# --cu-seqlens alone and combined (the built-in attention_variants.fa and a
# single variant's program) passing --check against float64, the files they
# read and write, a deliberately wrong variant failing --check, --decode on
# random and on saved inputs, and every usage and input error with its message.
set -u
attn=${FADSL_ATTN:-$(pwd)/examples/attention/fadsl-attn}
run=${FADSL_RUN:-$(pwd)/tools/fadsl-run}
srcdir=${srcdir:-.}
adir=$srcdir/examples/attention
fill=$srcdir/tests/run/fill.fa
dir=${TMPDIR:-/tmp}/fadsl-attn-variants.$$
mkdir -p "$dir" || exit 99
trap 'rm -rf "$dir"' EXIT
trap 'exit 130' INT  # a signal ends the script (the EXIT trap cleans up), not only its current command
trap 'exit 143' TERM
failures=0

fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

# expect STATUS MESSAGE ARGS...: fadsl-attn ARGS exits with STATUS and prints MESSAGE
expect() {
  want=$1 msg=$2
  shift 2
  "$attn" "$@" > "$dir/out" 2>&1
  status=$?
  if [ "$status" -ne "$want" ] || ! grep -qF -- "$msg" "$dir/out"; then
    fail "fadsl-attn $*: status $status, wanted $want and '$msg'"
    cat "$dir/out"
  else
    echo "ok: fadsl-attn $* -> $(grep -F -m1 -- "$msg" "$dir/out" | cut -c1-110)"
  fi
}

# npy FILE DTYPE N STEP: N values 0, STEP, 2 STEP, ... (float32 or int32), through fadsl-run
npy() {
  "$run" "$fill" fill --interpret -D T="$2" --arg n="$3" --arg step="$4" --out out="$1" > "$dir/fill.out" 2>&1 ||
    { fail "making $1"; cat "$dir/fill.out"; }
}
npy "$dir/slopes4.npy" f32 4 0.125
npy "$dir/sinks4.npy" f32 4 0.5
npy "$dir/slopes3.npy" f32 3 0.125
npy "$dir/cu.npy" i32 4 25          # 0, 25, 50, 75: three sequences of 25
npy "$dir/cu_short.npy" i32 4 20    # ends at 60

# each variant, and combinations, against float64 (every element)
expect 0 "checked everything" --interpret --shape 1,4,2,77,32 --window 16,0 --backward --check --seed 1
expect 0 "checked everything" --interpret --shape 2,4,1,60,64 --softcap 8 --causal --backward --check --seed 2
expect 0 "checked everything" --interpret --shape 1,4,4,50,32 --alibi "$dir/slopes4.npy" --backward --check --seed 3
expect 0 "dsinks ||out - ref||" --interpret --shape 1,4,2,40,32 --sinks "$dir/sinks4.npy" --dsinks "$dir/ds.npy" \
  --backward --check --seed 4
expect 0 "checked everything" --interpret --shape 1,4,2,75,32 --cu-seqlens "$dir/cu.npy" --causal --backward \
  --check --seed 5
expect 0 "window 8,8 softcap 20 alibi sinks" --interpret --shape 1,4,2,90,32 --window 8,8 --softcap 20 \
  --alibi "$dir/slopes4.npy" --sinks "$dir/sinks4.npy" --dsinks "$dir/ds.npy" --backward --check --seed 6
expect 0 "checked everything" --interpret --shape 1,4,1,75,16 --dtype bf16 --window 10,-1 \
  --cu-seqlens "$dir/cu.npy" --sinks "$dir/sinks4.npy" --backward --check --seed 7
# causal with Nq != Nkv (positions aligned at 0), and rows that see no key
expect 0 "checked everything" --interpret --shape 1,2,2,70,20,32 --window 0,2 --backward --check --seed 8
grep -q "'shape': (4,)" "$dir/ds.npy" && echo "ok: --dsinks wrote [H] = (4,)" || fail "ds.npy is not [4]"

# a single variant's own program, and what it does not have
expect 0 "checked everything" --interpret --program "$adir/variants/window.fa" --shape 1,2,2,64,16 \
  --window 5,5 --backward --check --seed 9
expect 1 "has no parameters for softcap" --interpret --program "$adir/variants/window.fa" --shape 1,2,2,64,16 \
  --softcap 5
# a wrong variant fails the check: the window one key too wide on the right
mkdir -p "$dir/variants"
cp "$adir/attention_core.fa" "$adir/attention.fa" "$dir/"
sed 's/return band_mask(qi, kj, ctx\[0\], ctx\[1\])/return band_mask(qi, kj - 1, ctx[0], ctx[1])/' \
  "$adir/variants/window.fa" > "$dir/variants/window.fa"
grep -q 'kj - 1' "$dir/variants/window.fa" || fail "could not make the wrong window.fa"
expect 1 "(above the test bound)" --interpret --program "$dir/variants/window.fa" --shape 1,2,2,64,16 \
  --window 5,5 --check --seed 10

# decoding from a paged KV cache
expect 0 "every token of every head" --interpret --decode-shape 3,2,8,2,64,16,200 --causal --check --seed 11
expect 0 "lse ||out - ref||" --interpret --decode-shape 2,1,4,1,32,32,700 --num-splits 3 --check --seed 12 \
  --o "$dir/do.npy" --lse "$dir/dl.npy"
grep -q "'shape': (2, 1, 4, 32)" "$dir/do.npy" && echo "ok: --decode --o wrote [B, Sq, H, D]" || fail "do.npy shape"
grep -q "'shape': (2, 4, 1)" "$dir/dl.npy" && echo "ok: --decode --lse wrote [B, H, Sq]" || fail "dl.npy shape"

# usage and input errors
expect 2 "--window wants L,R" --interpret --shape 1,2,2,16,16 --window 3
expect 2 "--window wants L,R" --interpret --shape 1,2,2,16,16 --window -2,0
expect 2 "--softcap needs a positive number" --interpret --shape 1,2,2,16,16 --softcap 0
expect 2 "--dsinks is the gradient of --sinks" --interpret --shape 1,2,2,16,16 --dsinks "$dir/x.npy"
expect 2 "--dsinks needs the backward pass" --interpret --shape 1,4,2,16,16 --sinks "$dir/sinks4.npy" \
  --dsinks "$dir/x.npy"
expect 1 "want 4 values (one per query head), got 3" --interpret --shape 1,4,2,16,16 --alibi "$dir/slopes3.npy"
expect 1 "want a 1-D int32 array" --interpret --shape 1,4,2,75,16 --cu-seqlens "$dir/slopes4.npy"
expect 1 "need B = 1" --interpret --shape 2,4,2,75,16 --cu-seqlens "$dir/cu.npy"
expect 1 "ends at 60 but the packed tensors hold 75 rows" --interpret --shape 1,4,2,75,16 \
  --cu-seqlens "$dir/cu_short.npy"
expect 2 "--decode needs --q, --k-cache" --interpret --decode
expect 2 "not the options of the other passes" --interpret --decode-shape 1,1,4,1,32,16,64 --window 2,2
expect 2 "are for --decode" --interpret --shape 1,2,2,16,16 --num-splits 2
expect 2 "--decode-shape wants" --interpret --decode-shape 1,1,4
expect 1 "page size 8" --interpret --decode-shape 1,1,4,1,32,8,64

echo "$failures failure(s)"
[ "$failures" -eq 0 ]
