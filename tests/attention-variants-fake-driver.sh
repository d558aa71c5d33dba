#!/bin/sh
# attention-variants-fake-driver.sh - the host side of the variant and
# decoding calls (fadsl-attn --gpu through fadsl_attention_forward_ex,
# _backward_ex and _decode) against the stand-in CUDA driver
# (tests/libfakecuda: device memory is host memory, a launch runs nothing):
# every kernel of the variant program is compiled by NVRTC and launched with
# all its arguments bound and its buffers checked against their declared
# extents, the configuration is printed, and since nothing ran the outputs
# come back NaN and --check fails.  SKIP (77) without NVRTC.
set -u
lib=tests/.libs/libfakecuda.so
[ -f "$lib" ] || { echo "attention-variants-fake-driver: $lib was not built"; exit 99; }
attn=${FADSL_ATTN:-$(pwd)/examples/attention/fadsl-attn}
run=${FADSL_RUN:-$(pwd)/tools/fadsl-run}
srcdir=${srcdir:-.}
dir=${TMPDIR:-/tmp}/attention-variants-fake.$$
mkdir -p "$dir" || exit 99
trap 'rm -rf "$dir"' EXIT
trap 'exit 130' INT  # a signal ends the script (the EXIT trap cleans up), not only its current command
trap 'exit 143' TERM
failures=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}
has() {
  if grep -qF -- "$2" "$1"; then echo "ok: $3"; else fail "$3: no '$2' in:"; sed 's/^/    /' "$1"; fi
}
npy() {
  "$run" "$srcdir/tests/run/fill.fa" fill --interpret -D T="$2" --arg n="$3" --arg step="$4" --out out="$1" \
    > /dev/null 2>&1 || fail "making $1"
}
npy "$dir/s4.npy" f32 4 0.25
npy "$dir/cu.npy" i32 3 30          # 0, 30, 60
FADSL_CUDA_DRIVER_PATH="$(cd "$(dirname "$lib")" && pwd)/libfakecuda.so"
FADSL_CACHE_DIR=$dir/cache
export FADSL_CUDA_DRIVER_PATH FADSL_CACHE_DIR

# every variant at once, packed sequences, GQA 2:1, forward and backward
"$attn" --gpu --shape 1,4,2,60,16 --window 8,0 --softcap 20 --alibi "$dir/s4.npy" --sinks "$dir/s4.npy" \
  --dsinks "$dir/ds.npy" --cu-seqlens "$dir/cu.npy" --backward --check --seed 1 > "$dir/out" 2>&1
status=$?
if grep -q "NVRTC not available" "$dir/out"; then
  echo "SKIP: no NVRTC here"; grep "NVRTC" "$dir/out"; exit 77
fi
[ "$status" -eq 1 ] && echo "ok: kernels that did not run fail --check (status 1)" || fail "status $status, want 1"
for k in attn_fwd attn_bwd_d attn_bwd_dkdv attn_bwd_dq; do
  has "$dir/out" "  $k " "$k of the variant program launched and its config printed"
done
"$attn" --gpu --shape 1,4,2,60,16 --window 8,0 --softcap 20 --alibi "$dir/s4.npy" --sinks "$dir/s4.npy" \
  --dsinks "$dir/ds.npy" --cu-seqlens "$dir/cu.npy" --backward --fused --check --seed 1 > "$dir/out2" 2>&1
for k in attn_bwd_prep attn_bwd attn_bwd_dq_convert; do
  has "$dir/out2" "  $k " "--fused: $k of the variant program launched and its config printed"
done
has "$dir/out" "HAS_WINDOW=True HAS_SOFTCAP=True HAS_ALIBI=True HAS_SINKS=True VARLEN=True" \
  "the flags of every variant are on"
has "$dir/out" "grid (1, 4, 2)" "packed: the grid's third axis is the sequences"
has "$dir/out" "dsinks ||out - ref|| / max(||ref||, ||ref_rss||) = nan" "poisoned dsinks is caught"

# the variant program's backward kernels are compiled side by side before the
# pass launches any (attention_compile.c): each launch finds its kernel compiled
FADSL_LOG=info FADSL_CACHE_DIR=$dir/cache-together "$attn" --gpu --shape 1,2,2,40,16 --window 5,0 --backward \
  --seed 3 > "$dir/together" 2>&1
for k in attn_bwd_d attn_bwd_dkdv attn_bwd_dq; do
  grep -q "launch $k \[.*cache=memory" "$dir/together" && echo "ok: $k of the variant program compiled with its pass" ||
    { fail "$k of the variant program: compiled by its own launch"; grep "launch $k " "$dir/together"; }
done

# decoding: the split and combine kernels, with an explicit number of splits
"$attn" --gpu --decode-shape 2,2,8,2,16,16,100 --causal --num-splits 3 --check --seed 2 > "$dir/out" 2>&1
status=$?
[ "$status" -eq 1 ] && echo "ok: decoding that did not run fails --check (status 1)" || fail "decode status $status, want 1"
has "$dir/out" "3 splits" "the splits asked for"
has "$dir/out" "o   ||out - ref||" "the decoding outputs were checked"

echo "$failures failure(s)"
[ "$failures" -eq 0 ]
