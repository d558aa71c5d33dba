#!/bin/sh
# attention-fake-driver.sh - the host side of fadsl-attn --gpu and fadsl-run
# --gpu on a machine without a GPU, against the stand-in CUDA driver
# (tests/libfakecuda: device memory is host memory, a launch runs nothing):
# inputs are copied to the device and back, outputs are poisoned, every
# kernel is compiled by NVRTC and launched with a configuration that is
# printed with its source (default / explicit), and since no kernel ran, the
# outputs come back as NaN and --check must say so and fail.  SKIP (77)
# without NVRTC.
set -u
lib=tests/.libs/libfakecuda.so
[ -f "$lib" ] || { echo "attention-fake-driver: $lib was not built"; exit 99; }
attn=${FADSL_ATTN:-$(pwd)/examples/attention/fadsl-attn}
run=${FADSL_RUN:-$(pwd)/tools/fadsl-run}
srcdir=${srcdir:-.}
relerr="sh $srcdir/tests/npy-relerr.sh"
dir=${TMPDIR:-/tmp}/attention-fake-driver.$$
mkdir -p "$dir" || exit 99
trap 'rm -rf "$dir"' EXIT
trap 'exit 130' INT  # a signal ends the script (the EXIT trap cleans up), not only its current command
trap 'exit 143' TERM
FADSL_CUDA_DRIVER_PATH="$(cd "$(dirname "$lib")" && pwd)/libfakecuda.so"
FADSL_CACHE_DIR=$dir/cache
export FADSL_CUDA_DRIVER_PATH FADSL_CACHE_DIR
failures=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}
# has FILE TEXT WHAT: FILE contains TEXT
has() {
  if grep -qF -- "$2" "$1"; then echo "ok: $3"; else fail "$3: no '$2' in:"; sed 's/^/    /' "$1"; fi
}
# launched KERNEL PATTERN WHAT: the launch line of KERNEL in $dir/out matches PATTERN (grep)
launched() {
  if grep "^  $1 " "$dir/out" | grep -q -- "$2"; then echo "ok: $3"; else fail "$3: no '$2' in $1's launch:"; grep "^  $1 " "$dir/out"; fi
}

"$attn" --gpu --shape 1,6,2,77,32 --causal --backward --check --seed 1 > "$dir/out" 2>&1
status=$?
if grep -q "NVRTC not available" "$dir/out"; then
  echo "SKIP: no NVRTC here"; grep "NVRTC" "$dir/out"; exit 77
fi
[ "$status" -eq 1 ] && echo "ok: kernels that did not run fail --check (status 1)" || fail "status $status, want 1"
has "$dir/out" "GPU 0: Fake GPU" "the device is named"
# the backward pass is the deterministic one by default, the other with --fused
for k in attn_fwd attn_bwd_d attn_bwd_dkdv attn_bwd_dq; do
  has "$dir/out" "  $k " "$k launched and its config printed"
done
has "$dir/out" "deterministic: attn_bwd_d + attn_bwd_dkdv + attn_bwd_dq" "the deterministic backward pass by default"
"$attn" --gpu --shape 1,6,2,77,32 --causal --backward --check --seed 1 --fused > "$dir/out2" 2>&1
[ $? -eq 1 ] && echo "ok: --fused: kernels that did not run fail --check" || fail "--fused status"
for k in attn_bwd_prep attn_bwd attn_bwd_dq_convert; do
  has "$dir/out2" "  $k " "--fused: $k launched and its config printed"
done
has "$dir/out2" "fused: attn_bwd_prep + attn_bwd + attn_bwd_dq_convert" "--fused names its kernels"
# --heads: the fused pass with a program per query head (the C API's dkv_accum)
"$attn" --gpu --shape 1,6,2,77,32 --causal --backward --check --seed 1 --heads > "$dir/out4" 2>&1
[ $? -eq 1 ] && echo "ok: --heads: kernels that did not run fail --check" || fail "--heads status"
for k in attn_bwd_prep attn_bwd_dkdv_zero attn_bwd_heads attn_bwd_dq_convert attn_bwd_dkdv_convert; do
  has "$dir/out4" "  $k " "--heads: $k launched and its config printed"
done
has "$dir/out4" "fused, a program per query head: attn_bwd_prep + attn_bwd_dkdv_zero + attn_bwd_heads" \
  "--heads names its kernels"
"$attn" --gpu --shape 1,6,2,77,32 --causal --backward --fused --deterministic > "$dir/out3" 2>&1
[ $? -eq 2 ] && grep -q "give one" "$dir/out3" && echo "ok: --fused with --deterministic is refused" ||
  { fail "--fused --deterministic"; cat "$dir/out3"; }
has "$dir/out" "n_groups=3 d_head=32 is_causal=True T=f16 BLOCK_Q=128 BLOCK_K=128 warps=4 stages=2 (default)" \
  "attn_fwd: GQA 3:1, the default config"
has "$dir/out" "o   ||out - ref|| / max(||ref||, ||ref_rss||) = nan  (14784 NaN/inf values in the output)" \
  "poisoned O is caught"
has "$dir/out" "dv  ||out - ref|| / max(||ref||, ||ref_rss||) = nan  (4928 NaN/inf values in the output)" \
  "poisoned dV is caught"

# a backward pass's first call compiles its kernels side by side before it
# launches any: each launch then finds its kernel compiled (cache=memory in
# the log), and the listing still says the call compiled it (miss)
for mode in "" --fused; do
  FADSL_LOG=info FADSL_CACHE_DIR=$dir/cache-together$mode "$attn" --gpu --shape 1,2,2,50,16 --causal --backward \
    --seed 2 $mode > "$dir/together" 2>&1
  ks="attn_bwd_d attn_bwd_dkdv attn_bwd_dq"
  [ -n "$mode" ] && ks="attn_bwd_prep attn_bwd attn_bwd_dq_convert"
  for k in $ks; do
    grep -q "launch $k \[.*cache=memory" "$dir/together" && echo "ok: $mode $k compiled before the pass's launches" ||
      { fail "$mode $k: its launch compiled it (want it compiled with the pass's other kernels)"; grep "launch $k " "$dir/together"; }
    grep -q "^  $k .*kernel cache miss" "$dir/together" && echo "ok: $mode $k listed as compiled by this call" ||
      { fail "$mode $k: not listed as a miss"; grep "^  $k " "$dir/together"; }
  done
done

"$attn" --gpu --shape 2,4,2,100,64 --dtype bf16 --backward --fused --block-q 128 --block-k 64 --warps 8 --stages 3 \
  --save-inputs "$dir/in_" --o "$dir/o.npy" > "$dir/out" 2>&1
# (the forward kernel's pipeline, which the options do not set, comes from its default point:
# bulk copies on sm_90a, named in the listing)
has "$dir/out" "T=bf16 BLOCK_Q=128 BLOCK_K=64 warps=8 stages=3 (explicit+default)" "a forced config is explicit"
launched attn_fwd "pipeline tma, schedule grid" "the pipeline and schedule listed"
has "$dir/out" "attn_bwd       n_groups=2 d_head=64 is_causal=False T=bf16 BLOCK_Q=64 BLOCK_K=128" \
  "attn_bwd takes the tiles the other way round"
r=$($relerr "$dir/o.npy" "$dir/in_q.npy")
[ "${r#* }" = "51200 51200" ] && echo "ok: o.npy came back poisoned ($r)" || fail "o.npy: $r (want every element NaN)"

# --config: one kernel's own tiles, over --block-q and the others (the fused
# kernel at 64x128 on 8 warps while the forward pass keeps its default)
"$attn" --gpu --shape 2,4,2,100,64 --backward --fused --config attn_bwd:BLOCK_Q=64,BLOCK_K=128,warps=8 \
  > "$dir/out" 2>&1
has "$dir/out" "attn_bwd       n_groups=2 d_head=64 is_causal=False T=f16 BLOCK_Q=64 BLOCK_K=128 FUSE_D=False warps=8 stages=2 (explicit+default)" \
  "--config attn_bwd: its own tiles and warps"
has "$dir/out" "T=f16 BLOCK_Q=128 BLOCK_K=128 warps=4 stages=2 (default)" "--config attn_bwd: attn_fwd keeps its default"
"$attn" --gpu --shape 2,4,2,100,64 --backward --block-q 64 --block-k 32 --config attn_bwd_dq:BLOCK_Q=128,BLOCK_K=128,warps=8 \
  > "$dir/out" 2>&1
has "$dir/out" "attn_bwd_dq    n_groups=2 d_head=64 is_causal=False T=f16 BLOCK_Q=128 BLOCK_K=128 warps=8 stages=2 (explicit+default)" \
  "--config attn_bwd_dq over --block-q and --block-k"
has "$dir/out" "attn_bwd_dkdv  n_groups=2 d_head=64 is_causal=False T=f16 BLOCK_Q=32 BLOCK_K=64" \
  "--block-q and --block-k still fix the other kernels"
# --config's pipeline and schedule: one kernel's, over FADSL_PIPELINE's for the others
FADSL_PIPELINE=tma_async "$attn" --gpu --shape 2,4,2,100,64 --backward --fused \
  --config attn_fwd:BLOCK_K=128,pipeline=tma_ws_pp,schedule=persistent --config attn_bwd:pipeline=tma_ws,BLOCK_Q=64,BLOCK_K=128,warps=8 \
  > "$dir/out" 2>&1
launched attn_fwd "BLOCK_Q=128 BLOCK_K=128 warps=8 .*pipeline tma_ws_pp, schedule persistent" "--config attn_fwd: its pipeline and schedule"
launched attn_bwd "pipeline tma_ws, schedule grid" "--config attn_bwd: its pipeline"
launched attn_bwd_prep "pipeline tma_async," "the other kernels keep FADSL_PIPELINE's"

# the Hopper defaults of the deterministic backward pass (the stand-in driver
# is an sm_90a device; @autotune(prefer=...) in attention.fa): at d_head 64
# dK/dV takes 64x64 where the lengths are multiples of 8 and keeps 32x64
# where not; at d_head 128 dK/dV takes 64x64 with late waits and dQ 128x128
# with a producer warp
"$attn" --gpu --shape 1,2,2,256,64 --backward > "$dir/out" 2>&1
has "$dir/out" "attn_bwd_dkdv  n_groups=1 d_head=64 is_causal=False T=f16 BLOCK_Q=64 BLOCK_K=64 warps=4 stages=2 (default)" \
  "dK/dV at d_head 64, N=256: 64x64 by default on sm_90a"
"$attn" --gpu --shape 1,2,2,200,64 --backward > "$dir/out" 2>&1
has "$dir/out" "attn_bwd_dkdv  n_groups=1 d_head=64 is_causal=False T=f16 BLOCK_Q=64 BLOCK_K=64 warps=4 stages=2 (default)" \
  "dK/dV at d_head 64, N=200 (a multiple of 8, not of 16): 64x64 by default"
"$attn" --gpu --shape 1,2,2,204,64 --backward > "$dir/out" 2>&1
has "$dir/out" "attn_bwd_dkdv  n_groups=1 d_head=64 is_causal=False T=f16 BLOCK_Q=32 BLOCK_K=64 warps=4 stages=2 (default)" \
  "dK/dV at d_head 64, N=204 (not a multiple of 8): 32x64 by default"
"$attn" --gpu --shape 1,2,2,256,128 --causal --backward > "$dir/out" 2>&1
launched attn_bwd_dkdv "BLOCK_Q=64 BLOCK_K=64 warps=4 stages=2 (default).*pipeline tma_async," "dK/dV at d_head 128: 64x64 with tma_async by default on sm_90a"
launched attn_bwd_dq "BLOCK_Q=128 BLOCK_K=128 warps=8 stages=2 (default).*pipeline tma_ws_pp," "dQ at d_head 128: 128x128 with a producer warp by default on sm_90a"

# attn_fwd's Hopper defaults (fwd_hopper_default in attention_core.fa), at
# every length: at d_head 128 the producer warp's 128x128 with 2 stages in
# persistent blocks; at d_head 64 bulk copies at 128x128 on 4 warps
"$attn" --gpu --shape 1,1,1,1024,128 > "$dir/out" 2>&1
launched attn_fwd "BLOCK_Q=128 BLOCK_K=128 warps=8 stages=2 (default).*pipeline tma_ws_pp, schedule persistent" "attn_fwd at d_head 128: the producer warp by default on sm_90a"
# FADSL_PIPELINE fixes the pipeline before the default point is chosen: bulk
# copies alone take their own default tiles, not the producer warp's
FADSL_PIPELINE=tma "$attn" --gpu --shape 1,1,1,1024,128 > "$dir/out" 2>&1
launched attn_fwd "BLOCK_Q=128 BLOCK_K=64 warps=8 stages=2 (default).*pipeline tma, schedule grid" "FADSL_PIPELINE=tma at d_head 128: the default point of bulk copies alone"
"$attn" --gpu --shape 1,1,1,4096,64 > "$dir/out" 2>&1
launched attn_fwd "BLOCK_Q=128 BLOCK_K=128 warps=4 stages=2 (default).*pipeline tma, schedule grid" "attn_fwd at d_head 64: bulk copies at 128x128 on 4 warps by default"

# forward-only benchmark on files, JSON record
"$attn" --gpu --q "$dir/in_q.npy" --k "$dir/in_k.npy" --v "$dir/in_v.npy" --bench --iters 3 --min-ms 1 \
  --json "$dir/b.jsonl" > "$dir/out" 2>&1 || { fail "--bench on files"; cat "$dir/out"; }
has "$dir/out" "forward:      1.500 ms" "the fake driver's event time is the median"
has "$dir/b.jsonl" '"provider": "fadsl", "B": 2, "H": 4, "KVH": 2, "N": 100, "Nkv": 100, "D": 64, "causal": false' \
  "a JSON record with the shape"
has "$dir/b.jsonl" '"fwd_ms": 1.5' "the JSON record has the time"
[ "$(wc -l < "$dir/b.jsonl")" -eq 1 ] && echo "ok: one line" || fail "b.jsonl has $(wc -l < "$dir/b.jsonl") lines"

# the backward benchmark times both passes (the kernels are in the cache from above)
"$attn" --gpu --shape 1,6,2,77,32 --causal --bench --iters 3 --min-ms 1 --json "$dir/b2.jsonl" --seed 1 \
  > "$dir/out" 2>&1 || { fail "--bench with the backward pass"; cat "$dir/out"; }
has "$dir/out" "median of 3 runs; deterministic: attn_bwd_d + attn_bwd_dkdv + attn_bwd_dq" "--bench times the deterministic pass"
has "$dir/out" "median of 3 runs; fused: attn_bwd_prep + attn_bwd + attn_bwd_dq_convert" "... and the fused one"
has "$dir/b2.jsonl" '"bwd_mode": "deterministic"' "the JSON record names the pass"
has "$dir/b2.jsonl" '"bwd_fused_ms": 1.5' "the JSON record has the fused pass's time"
"$attn" --gpu --shape 1,6,2,77,32 --causal --bench --iters 3 --min-ms 1 --json "$dir/b3.jsonl" --seed 1 \
  --fused > "$dir/out" 2>&1 || { fail "--bench --fused"; cat "$dir/out"; }
has "$dir/b3.jsonl" '"bwd_mode": "fused"' "--fused: the JSON record names the pass"
has "$dir/b3.jsonl" '"bwd_deterministic_ms": 1.5' "--fused: the deterministic pass's time beside it"

# fadsl-run --gpu: an input buffer goes to the device and comes back unchanged
# (nothing ran); a buffer made for --out comes back zero-filled (NaN with
# --poison), as on the interpreter; open tile sizes are left to the runtime
fa=$srcdir/examples/attention/attention.fa
"$run" "$fa" attn_fwd --gpu -D n_groups=2 -D d_head=64 -D is_causal=False -D T=bf16 \
  --arg t_q="$dir/in_q.npy" --arg t_k="$dir/in_k.npy" --arg t_v="$dir/in_v.npy" --arg sm_scale=0.125 \
  --arg n_zh=4 --arg q_seq_len=100 --arg kv_seq_len=100 --arg t_o="$dir/in_q.npy" --out t_o="$dir/o2.npy" \
  --out t_lse="$dir/lse2.npy" > "$dir/out" 2>&1 || { fail "fadsl-run --gpu attn_fwd"; cat "$dir/out"; }
has "$dir/out" "attn_fwd on sm_90a [n_groups=2 d_head=64 is_causal=False T=bf16 BLOCK_Q=128 BLOCK_K=128] warps=4 stages=2 (default)" \
  "fadsl-run --gpu prints the launch"
r=$($relerr "$dir/o2.npy" "$dir/in_q.npy")
[ "$r" = "0.000e+00 0 51200" ] && echo "ok: an --arg buffer makes the round trip ($r)" || fail "o2.npy vs q: $r"
r=$($relerr "$dir/lse2.npy" "$dir/lse2.npy")
[ "$r" = "0.000e+00 0 800" ] && echo "ok: a buffer made for --out is zero-filled ($r)" || fail "lse2.npy: $r"
"$run" "$fa" attn_fwd --gpu --poison -D n_groups=2 -D d_head=64 -D is_causal=False -D T=bf16 \
  --arg t_q="$dir/in_q.npy" --arg t_k="$dir/in_k.npy" --arg t_v="$dir/in_v.npy" --arg sm_scale=0.125 \
  --arg n_zh=4 --arg q_seq_len=100 --arg kv_seq_len=100 --out t_o="$dir/o3.npy" \
  --out t_lse="$dir/lse3.npy" > "$dir/out" 2>&1 || { fail "fadsl-run --gpu --poison attn_fwd"; cat "$dir/out"; }
r=$($relerr "$dir/lse3.npy" "$dir/lse3.npy")
[ "${r#* }" = "800 800" ] && echo "ok: with --poison a buffer made for --out is NaN-filled ($r)" || fail "lse3.npy: $r"

# fadsl-run on the GPU and on the interpreter choose the same default point
# of an @autotune space (the first that the prune accepts) and start buffers
# made for --out from the same contents (tests/run/fill.fa)
fill=$srcdir/tests/run/fill.fa
"$run" "$fill" tiles --gpu --arg n=40 --out out="$dir/tg.npy" > "$dir/out" 2>&1 || { fail "tiles --gpu"; cat "$dir/out"; }
has "$dir/out" "tiles on sm_90a [BLOCK=16] warps=2 stages=3 (default), grid (3, 1, 1)" "the GPU's default point"
"$run" "$fill" tiles --interpret --arg n=40 --out out="$dir/ti.npy" > "$dir/out" 2>&1 || fail "tiles --interpret"
has "$dir/out" "tiles on the interpreter [BLOCK=16] warps=2 stages=3 (default), grid (3, 1, 1)" \
  "the interpreter's default point is the GPU's"
for poison in "" --poison; do
  "$run" "$fill" nothing --gpu $poison --arg n=5 --out out="$dir/ng.npy" --out outi="$dir/ngi.npy" > "$dir/out" 2>&1 ||
    { fail "nothing --gpu $poison"; cat "$dir/out"; }
  "$run" "$fill" nothing --interpret $poison --arg n=5 --out out="$dir/ni.npy" --out outi="$dir/nii.npy" \
    > "$dir/out" 2>&1 || { fail "nothing --interpret $poison"; cat "$dir/out"; }
  cmp -s "$dir/ng.npy" "$dir/ni.npy" && cmp -s "$dir/ngi.npy" "$dir/nii.npy" &&
    echo "ok: fresh --out buffers${poison:+ ($poison)}: the same bytes on the GPU and the interpreter" ||
    fail "fresh --out buffers${poison:+ ($poison)} differ between the GPU and the interpreter"
done

# a pass that never finishes (FAKE_CUDA_HANG: no recorded work completes) stops fadsl-attn within
# --timeout with a message, instead of waiting forever
FAKE_CUDA_HANG=1 timeout 60 "$attn" --gpu --shape 1,2,2,16,16 --seed 1 --timeout 0.5 > "$dir/out" 2>&1
st=$?
[ "$st" -eq 1 ] && echo "ok: a pass that never finishes stops fadsl-attn (status 1)" || { fail "hung pass: status $st"; cat "$dir/out"; }
has "$dir/out" "running the forward kernel: the GPU did not finish the work queued on the device within 0.5 s" \
  "the hang is reported"

echo "$failures failure(s)"
[ "$failures" -eq 0 ]
