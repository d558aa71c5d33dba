#!/bin/sh
# fadsl-attn.sh - fadsl-attn end to end without a GPU: --interpret --check on
# random inputs (GQA 3:1 and 4:1, causal and not, Nq != Nkv; the fused pass
# with a program per query head too) and on .npy files,
# the same kernels through fadsl-run giving the same bits, a deliberately
# wrong attention.fa failing --check, shape and usage errors, and --gpu
# failing cleanly where there is no GPU.
set -u
attn=${FADSL_ATTN:-$(pwd)/examples/attention/fadsl-attn}
run=${FADSL_RUN:-$(pwd)/tools/fadsl-run}
srcdir=${srcdir:-.}
fa=$srcdir/examples/attention/attention.fa
relerr="sh $srcdir/tests/npy-relerr.sh"
dir=${TMPDIR:-/tmp}/fadsl-attn-test.$$
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
    echo "ok: fadsl-attn $* -> $(grep -F -m1 -- "$msg" "$dir/out" | cut -c1-120)"
  fi
}

# the float64 check on the interpreter, every output, whole shapes
expect 0 "checked everything" --interpret --shape 1,6,2,77,32 --causal --backward --check --seed 1
expect 0 "dv  ||out - ref||" --interpret --shape 2,4,1,33,50,16 --backward --check --dtype bf16 --seed 2
expect 0 "lse ||out - ref||" --interpret --shape 1,3,1,1,64 --check --seed 3
# the fused pass with 128 queries a step (attn_bwd's wide loop: LSE read and
# the query offsets made after the products are issued, dV's product after dS)
expect 0 "checked everything" --interpret --shape 1,4,2,300,64 --causal --backward --fused --check \
  --block-q 128 --block-k 128 --seed 9
expect 0 "checked everything" --interpret --shape 2,2,2,129,257,64 --backward --fused --check \
  --block-q 128 --block-k 128 --dtype bf16 --seed 9
# the fused pass with one program per query head (attn_bwd_heads: dK and dV
# added into float32 accumulators, then attn_bwd_dkdv_convert)
expect 0 "checked everything" --interpret --shape 1,6,2,77,64 --causal --backward --fused --heads --check --seed 4
expect 0 "(fused, a program per query head)" --interpret --shape 1,6,2,77,64 --causal --backward --fused --heads --seed 4
expect 0 "dk  ||out - ref||" --interpret --shape 2,4,1,100,120,32 --backward --heads --fuse-delta --check --seed 5
expect 0 "(fused, a program per query head, D in attn_bwd_heads)" --interpret --shape 2,4,1,100,120,32 --backward \
  --heads --fuse-delta --seed 5
expect 0 "dv  ||out - ref||" --interpret --shape 1,8,2,64,16 --causal --backward --fused --heads --check --dtype bf16 --seed 6
# without grouped queries the pass is attn_bwd's, as in the library
expect 0 "(fused)" --interpret --shape 1,2,2,40,16 --backward --heads --check --seed 7
expect 2 "--heads is a form of the fused backward pass" --interpret --shape 1,4,2,16,16 --backward --heads \
  --deterministic
expect 2 "--heads is for plain attention" --interpret --shape 1,4,2,16,16 --backward --heads --window 4,0
# by default a program per query head where a group has 4 query heads or
# more (plain attention), one per kv head below that, with a variant, or
# with --no-heads
expect 0 "(fused, a program per query head)" --interpret --shape 1,4,1,40,16 --backward --fused --seed 8
expect 0 "checked everything" --interpret --shape 1,8,2,33,16 --causal --backward --fused --check --seed 8
expect 0 "(fused)" --interpret --shape 1,6,2,40,16 --backward --fused --seed 8
expect 0 "(fused)" --interpret --shape 1,4,1,40,16 --backward --fused --no-heads --seed 8
expect 0 "(fused)" --interpret --shape 1,4,1,40,16 --backward --fused --window 8,0 --seed 8

# files: inputs saved by one run are read back by another, with the same results
"$attn" --interpret --shape 1,4,2,45,64 --causal --backward --seed 4 --save-inputs "$dir/in_" \
  --o "$dir/o1.npy" --lse "$dir/lse1.npy" --dq "$dir/dq1.npy" --dk "$dir/dk1.npy" --dv "$dir/dv1.npy" \
  > "$dir/out" 2>&1 || { fail "saving inputs"; cat "$dir/out"; }
expect 0 "checked everything" --interpret --causal --q "$dir/in_q.npy" --k "$dir/in_k.npy" --v "$dir/in_v.npy" \
  --do "$dir/in_do.npy" --o "$dir/o2.npy" --dk "$dir/dk2.npy" --check
for t in o dk; do
  r=$($relerr "$dir/${t}2.npy" "$dir/${t}1.npy")
  [ "${r%% *}" = "0.000e+00" ] && echo "ok: $t from files = $t from the same random inputs" \
    || fail "$t from files differs from $t of the same inputs: $r"
done

# random inputs are filled in chunks of 2^16 elements, on as many threads as
# --threads allows: the same values for any thread count (K here spans 18
# chunks), and K and V drawn apart
for t in 1 3; do
  "$attn" --interpret --shape 1,1,1,1,70000,16 --seed 6 --threads $t --save-inputs "$dir/r${t}_" > "$dir/out" 2>&1 \
    || { fail "random inputs on $t threads"; cat "$dir/out"; }
done
r=$($relerr "$dir/r3_k.npy" "$dir/r1_k.npy")
[ "${r%% *}" = "0.000e+00" ] && echo "ok: random K on 3 threads = on 1 thread" || fail "random K depends on the threads: $r"
r=$($relerr "$dir/r1_v.npy" "$dir/r1_k.npy")
[ "${r%% *}" != "0.000e+00" ] && echo "ok: random V differs from K ($r)" || fail "random V equals K"

# fadsl-run runs attn_fwd on the same files and config: the same bits
"$run" "$fa" attn_fwd --interpret -D n_groups=2 -D d_head=64 -D is_causal=True -D T=f16 -D BLOCK_Q=32 \
  -D BLOCK_K=32 --arg t_q="$dir/in_q.npy" --arg t_k="$dir/in_k.npy" --arg t_v="$dir/in_v.npy" \
  --arg sm_scale=0.125 --arg n_zh=2 --arg q_seq_len=45 --arg kv_seq_len=45 --out t_o="$dir/o3.npy" \
  --out t_lse="$dir/lse3.npy" > "$dir/out" 2>&1 || { fail "fadsl-run attn_fwd"; cat "$dir/out"; }
r=$($relerr "$dir/o3.npy" "$dir/o1.npy")
[ "${r%% *}" = "0.000e+00" ] && echo "ok: fadsl-run attn_fwd = fadsl-attn forward ($r)" \
  || fail "fadsl-run attn_fwd differs from fadsl-attn: $r"

# a wrong kernel must fail --check: P V scaled by 1.01 in the core that
# attention.fa imports (from its own directory, where the copy is)
cp "$fa" "$dir/wrong.fa"
sed 's/b_o += dot(b_p, b_v, out_dtype=f32)/b_o += dot(b_p, b_v, out_dtype=f32) * 1.01/' \
  "$(dirname "$fa")/attention_core.fa" > "$dir/attention_core.fa"
grep -q '\* 1.01' "$dir/attention_core.fa" || fail "could not make the wrong attention_core.fa"
expect 1 "(above the test bound)" --interpret --program "$dir/wrong.fa" --shape 1,2,2,40,16 --check --seed 5

# shapes and usage
expect 1 "head dimension 48" --interpret --shape 1,2,2,16,48
expect 1 "must be a multiple of the 4 key/value heads" --interpret --shape 1,6,4,16,16
expect 1 "causal attention needs as many queries as keys" --interpret --shape 1,2,2,16,32,16 --causal
expect 2 "--bench, --json, --warps, --stages and --config are for --gpu" --interpret --shape 1,2,2,16,16 --bench
expect 2 "--bench, --json, --warps, --stages and --config are for --gpu" --interpret --shape 1,2,2,16,16 \
  --config attn_fwd:BLOCK_Q=64
expect 2 "KERNEL one of attn_fwd, attn_bwd_dkdv, attn_bwd_dq, attn_bwd, attn_bwd_heads" --gpu --shape 1,2,2,16,16 \
  --config attn_bwd_d:BLOCK_Q=64
expect 2 "KERNEL one of attn_fwd" --gpu --shape 1,2,2,16,16 --config BLOCK_Q=64
expect 2 "pipeline=tma_wss: want one of cp_async, tma, tma_async, tma_ws, tma_ws_pp" --gpu --shape 1,2,2,16,16 \
  --config attn_bwd:pipeline=tma_wss
expect 2 "schedule=: want one of grid, persistent" --gpu --shape 1,2,2,16,16 --config attn_fwd:BLOCK_Q=64,schedule=
expect 2 "takes BLOCK_Q=N, BLOCK_K=N, warps=N, stages=N, pipeline=NAME" --gpu --shape 1,2,2,16,16 \
  --config attn_fwd:blocks=64
expect 2 "each a positive number" --gpu --shape 1,2,2,16,16 --config attn_bwd:BLOCK_Q=64,warps=
expect 2 "--json writes the --bench record" --gpu --shape 1,2,2,16,16 --json "$dir/x.jsonl"
expect 2 "give --block-q and --block-k together" --gpu --shape 1,2,2,16,16 --block-q 64
expect 2 "--forward-only times the forward pass alone" --gpu --shape 1,2,2,16,16 --forward-only
expect 2 "--forward-only times the forward pass alone" --gpu --shape 1,2,2,16,16 --bench --backward --forward-only
expect 2 "choose one of --interpret and --gpu" --shape 1,2,2,16,16

# --gpu where there is none: a clean failure naming the cause
"$attn" --gpu --shape 1,2,2,16,16 > "$dir/out" 2>&1
status=$?
if grep -q "no GPU:" "$dir/out"; then
  [ "$status" -eq 1 ] && echo "ok: --gpu without a GPU: $(grep 'no GPU:' "$dir/out" | cut -c1-100)" \
    || fail "--gpu without a GPU exits $status (want 1)"
else
  echo "note: a GPU is present (status $status); the no-GPU message is not tested here"
fi

echo "$failures failure(s)"
[ "$failures" -eq 0 ]
