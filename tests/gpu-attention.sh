#!/bin/sh
# gpu-attention.sh - attention.fa on the GPU, forward and backward:
#  1. fadsl-attn --gpu --check (float64 reference) over the interpreter test's
#     cases: N = 1, 77, 200, Nq != Nkv, GQA 4:1 and 3:1, causal and not,
#     D in {16, 32, 64, 128, 256}, f16 and bf16; one key (exact dQ = dK = 0,
#     measured against the root-sum-square scale, see fadsl-attn --help);
#     a few with forced configs (BLOCK_Q=32 among them);
#  2. long sequences: the trading day (B=1, H=12, N=23400, D=64, causal),
#     N = 8192 and 16384 (float64 on a stated subset of heads and rows);
#  3. fadsl-run --gpu against fadsl-run --interpret, kernel by kernel, on the
#     same .npy inputs and config (agreement within the dtype's bound), the
#     deterministic backward kernels and the fused pass's attn_bwd and
#     attn_bwd_dq_convert.
# fadsl-attn runs its default backward pass (the deterministic one);
# FADSL_ATTN_OPTIONS="--fused" runs every case with the other.
# Exits 77 (skipped) where the runtime finds no GPU (fadsl-attn --gpu cannot
# create a context on device 0); a failing case prints everything fadsl-attn
# or fadsl-run said.
#   FADSL_TEST_SEED=N          reproduce a run's random inputs (case i uses N + i)
#   FADSL_GPU_TEST_QUICK=1     leave out the long sequences
#   FADSL_GPU_WRAPPER="..."    run every GPU command under this prefix, e.g.
#                              "compute-sanitizer --tool memcheck" (with the
#                              installed tools or after libtool --mode=execute)
#   FADSL_GPU_PIPELINES="..."  the pipeline choices to run it with, one run each
#                              (default: all, cp_async tma tma_async tma_ws tma_ws_pp);
#                              FADSL_PIPELINE=X runs once with X
#   FADSL_GPU_SCHEDULES="..."  the schedules each pipeline runs with (default:
#                              grid persistent); FADSL_SCHEDULE=X runs with X only
set -u

# ---- one run per pipeline choice (how loads feeding products are pipelined)
#      and schedule (one thread block per program, or persistent) ----
if [ -z "${FADSL_PIPELINE:-}" ] || [ -z "${FADSL_SCHEDULE:-}" ]; then
  failed=""
  for s in ${FADSL_SCHEDULE:-${FADSL_GPU_SCHEDULES:-grid persistent}}; do
    for p in ${FADSL_PIPELINE:-${FADSL_GPU_PIPELINES:-cp_async tma tma_async tma_ws tma_ws_pp}}; do
      echo "==== FADSL_PIPELINE=$p FADSL_SCHEDULE=$s"
      FADSL_PIPELINE=$p FADSL_SCHEDULE=$s sh "$0" "$@"
      st=$?
      [ "$st" -eq 77 ] && exit 77
      [ "$st" -ne 0 ] && failed="$failed $p/$s"
    done
  done
  if [ -n "$failed" ]; then
    echo "FAIL: attention on the GPU failed with (FADSL_PIPELINE/FADSL_SCHEDULE) =$failed"
    exit 1
  fi
  exit 0
fi
echo "pipeline $FADSL_PIPELINE, schedule $FADSL_SCHEDULE"
attn=${FADSL_ATTN:-$(pwd)/examples/attention/fadsl-attn}
run=${FADSL_RUN:-$(pwd)/tools/fadsl-run}
srcdir=${srcdir:-.}
fa=$srcdir/examples/attention/attention.fa
relerr="sh $srcdir/tests/npy-relerr.sh"
wrap=${FADSL_GPU_WRAPPER:-}
dir=${TMPDIR:-/tmp}/gpu-attention.$$
mkdir -p "$dir" || exit 99
trap 'rm -rf "$dir"' EXIT
trap 'exit 130' INT  # a signal ends the script (the EXIT trap cleans up), not only its current command
trap 'exit 143' TERM
seed=${FADSL_TEST_SEED:-$(date +%s)}
echo "seed $seed (FADSL_TEST_SEED=$seed reproduces this run)"

# ---- is there a GPU? (the runtime decides: fadsl_context_create(0)) ----
"$attn" --gpu --shape 1,1,1,1,16 --seed 1 > "$dir/probe" 2>&1
status=$?
if grep -q "no GPU:" "$dir/probe"; then
  sed -n 's/.*no GPU: /SKIP: no GPU: /p' "$dir/probe"
  exit 77
fi
if [ "$status" -ne 0 ]; then
  echo "FAIL: a GPU is there but the smallest attention run failed (status $status):"
  cat "$dir/probe"
  exit 1
fi
grep '^GPU' "$dir/probe"

failures=0 cases=0 notes=""
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

# gpu_case SHAPE DTYPE CAUSAL [OPTIONS...]: fadsl-attn --gpu --check, forward and backward
gpu_case() {
  shape=$1 dtype=$2 causal=$3
  shift 3
  cases=$((cases + 1))
  s=$((seed + cases))
  c=""
  [ "$causal" = causal ] && c=--causal
  $wrap "$attn" --gpu --shape "$shape" --dtype "$dtype" $c --backward --check --seed "$s" ${FADSL_ATTN_OPTIONS:-} "$@" \
    > "$dir/out" 2>&1
  st=$?
  what="--shape $shape --dtype $dtype $c --seed $s $*"
  if [ "$st" -eq 0 ]; then
    echo "ok: $what: $(grep -E '^  (o|lse|dq|dk|dv) ' "$dir/out" | awk '{printf "%s %s  ", $1, $NF}')"
    return
  fi
  d=$(echo "$shape" | awk -F, '{print $NF}')
  if [ "$d" = 256 ] && grep -q "failed: unsupported" "$dir/out"; then
    echo "note: $what: D=256 is not supported on this GPU:"
    grep -A2 "failed: unsupported" "$dir/out" | sed 's/^/    /'
    notes="$notes D=256"
    return
  fi
  fail "fadsl-attn --gpu $what (status $st):"
  sed 's/^/    /' "$dir/out"
}

echo "== the interpreter test's cases, against float64"
gpu_case 1,2,2,1,16 f16 full
gpu_case 1,2,2,1,32 bf16 causal
gpu_case 2,2,2,77,16 f16 causal
gpu_case 1,4,1,77,32 f16 full
gpu_case 1,4,1,77,64 bf16 causal
gpu_case 1,2,1,200,128 f16 causal
gpu_case 1,1,1,200,128 bf16 full
gpu_case 1,2,2,77,200,64 f16 full
gpu_case 1,2,2,200,33,32 bf16 full
gpu_case 2,4,1,200,64 f16 full
gpu_case 1,2,2,128,16 bf16 causal
gpu_case 1,1,1,200,32 f16 causal
gpu_case 1,4,2,1,77,128 f16 full
gpu_case 1,4,1,77,128 bf16 causal
gpu_case 1,8,2,200,16 f16 causal
gpu_case 2,2,1,33,150,64 bf16 full
gpu_case 1,6,2,77,32 f16 causal
gpu_case 2,3,1,200,150,64 bf16 full
gpu_case 1,5,1,33,16 bf16 causal
gpu_case 1,4,1,1000,64 f16 causal
gpu_case 2,2,2,513,128 bf16 full
gpu_case 1,2,1,300,700,32 f16 full
gpu_case 1,1,1,77,256 f16 full
gpu_case 1,2,2,200,256 bf16 causal
echo "== sequence lengths that are multiples of 16 (launches specialise on them: wider loads)"
gpu_case 1,4,2,256,64 f16 causal
gpu_case 2,2,1,512,128 bf16 full
gpu_case 1,2,2,384,256,32 f16 full
gpu_case 1,3,1,64,128 bf16 causal
echo "== one key: P = 1, the exact dQ and dK are 0 (errors against ||ref_rss||)"
# the seed of a run on an H200 whose tiny dQ, dK failed a check relative to ||ref|| alone
gpu_case 1,2,2,1,16 f16 full --seed 1796007389
gpu_case 2,4,2,1,64 f16 full
gpu_case 1,3,1,1,128 bf16 causal
gpu_case 1,2,2,1,16 f16 full --block-q 64 --block-k 32 --warps 4 --stages 2
echo "== forced configurations"
gpu_case 1,4,1,333,64 f16 causal --block-q 128 --block-k 64 --warps 8 --stages 3
gpu_case 1,6,2,333,128 bf16 full --block-q 64 --block-k 64 --warps 4 --stages 2
gpu_case 2,2,2,257,32 f16 causal --block-q 128 --block-k 32 --warps 4 --stages 4
gpu_case 1,3,1,100,16 f16 full --block-q 64 --block-k 32 --stages 2
gpu_case 1,4,2,300,64 f16 causal --block-q 32 --block-k 32 --warps 4 --stages 3
gpu_case 2,2,2,200,128 bf16 full --block-q 32 --block-k 32 --warps 4 --stages 2
# several times more programs than an H200 holds thread blocks: with
# FADSL_SCHEDULE=persistent each block takes many, from the counter where
# they differ in work (causal), with a producer warp handing them over
gpu_case 4,8,8,2048,64 f16 causal --block-q 128 --block-k 128 --warps 8 --stages 3
gpu_case 4,8,4,2048,128 bf16 causal --block-q 128 --block-k 64 --warps 8 --stages 2

if [ -z "${FADSL_GPU_TEST_QUICK:-}" ]; then
  echo "== long sequences (float64 on a subset of heads and rows)"
  gpu_case 1,12,12,23400,64 f16 causal
  gpu_case 1,4,4,8192,128 f16 full
  gpu_case 1,8,2,8192,64 bf16 causal
  gpu_case 1,2,2,16384,64 f16 causal
  gpu_case 1,2,1,16384,128 f16 full
else
  echo "note: FADSL_GPU_TEST_QUICK is set: the long sequences are left out"
fi

# ---- fadsl-run --gpu against --interpret, kernel by kernel ----
# compare NAME A.npy B.npy BOUND: A (GPU) against B (interpreter)
compare() {
  r=$($relerr "$2" "$3") || { fail "$1: cannot compare $2 and $3"; return; }
  set -- "$1" "$r" "$4"
  e=${2%% *} rest=${2#* } bad=${rest%% *}
  if [ "$bad" -eq 0 ] && awk "BEGIN { exit !($e < $3) }"; then
    echo "ok: $1: GPU vs interpreter $e (bound $3)"
  else
    fail "$1: GPU vs interpreter: relative error $e, $bad non-finite values (bound $3)"
  fi
}

# run_both NAME KERNEL ARGS...: the kernel on the interpreter and on the GPU;
# outputs in $dir/NAME.i.*.npy and $dir/NAME.g.*.npy (--out t_x=@x becomes x)
run_both() {
  name=$1 kernel=$2
  shift 2
  for mode in i g; do
    args=""
    for a in "$@"; do
      case "$a" in
        *=@*) a="${a%%=@*}=$dir/$name.$mode.${a#*=@}.npy" ;;
      esac
      args="$args $a"
    done
    if [ "$mode" = i ]; then
      "$run" "$fa" "$kernel" --interpret --threads 4 $args > "$dir/run.out" 2>&1
    else
      $wrap "$run" "$fa" "$kernel" --gpu $args > "$dir/run.out" 2>&1
    fi
    st=$?
    if [ "$st" -ne 0 ]; then
      fail "fadsl-run $kernel --$([ $mode = i ] && echo interpret || echo gpu) (status $st):"
      echo "    fadsl-run $fa $kernel $args"
      sed 's/^/    /' "$dir/run.out"
      return 1
    fi
  done
  grep -h "^fadsl-run: " "$dir/run.out" | sed 's/^/    /'
  return 0
}

# vs_interpreter B H KVH N D CAUSAL DTYPE: the four kernels, each fed the
# interpreter's outputs of the previous ones
vs_interpreter() {
  B=$1 H=$2 KVH=$3 N=$4 D=$5 causal=$6 dt=$7
  cases=$((cases + 1))
  s=$((seed + cases))
  c=""
  [ "$causal" = causal ] && c=--causal
  tag="B=$B H=$H KVH=$KVH N=$N D=$D $causal $dt"
  echo "-- $tag (seed $s)"
  "$attn" --interpret --shape "$B,$H,$KVH,$N,$D" --dtype "$dt" $c --backward --seed "$s" --threads 4 \
    --save-inputs "$dir/in_" > "$dir/out" 2>&1 || { fail "making inputs for $tag"; cat "$dir/out"; return; }
  G=$((H / KVH)) zh=$((B * KVH))
  isc=False
  [ "$causal" = causal ] && isc=True
  scale=$(awk "BEGIN { printf \"%.9g\", 1 / sqrt($D) }")
  if [ "$dt" = bf16 ]; then fb=1e-2 gb=3e-2; else fb=2e-3 gb=1e-2; fi
  common="-D n_groups=$G -D d_head=$D -D T=$dt --arg n_zh=$zh --arg q_seq_len=$N"
  qkv="--arg t_q=$dir/in_q.npy --arg t_k=$dir/in_k.npy --arg t_v=$dir/in_v.npy --arg sm_scale=$scale --arg kv_seq_len=$N -D is_causal=$isc"
  run_both fwd attn_fwd $common $qkv -D BLOCK_Q=64 -D BLOCK_K=32 --out t_o=@o --out t_lse=@lse || return
  compare "$tag attn_fwd o" "$dir/fwd.g.o.npy" "$dir/fwd.i.o.npy" $fb
  compare "$tag attn_fwd lse" "$dir/fwd.g.lse.npy" "$dir/fwd.i.lse.npy" 1e-4
  run_both d attn_bwd_d $common --arg t_o="$dir/fwd.i.o.npy" --arg t_do="$dir/in_do.npy" --out t_pdp=@delta || return
  compare "$tag attn_bwd_d delta" "$dir/d.g.delta.npy" "$dir/d.i.delta.npy" $fb
  bwd="--arg t_do=$dir/in_do.npy --arg t_lse=$dir/fwd.i.lse.npy --arg t_pdp=$dir/d.i.delta.npy"
  run_both dkdv attn_bwd_dkdv $common $qkv $bwd -D BLOCK_Q=32 -D BLOCK_K=64 --out t_dk=@dk --out t_dv=@dv || return
  compare "$tag attn_bwd_dkdv dk" "$dir/dkdv.g.dk.npy" "$dir/dkdv.i.dk.npy" $gb
  compare "$tag attn_bwd_dkdv dv" "$dir/dkdv.g.dv.npy" "$dir/dkdv.i.dv.npy" $gb
  run_both dq attn_bwd_dq $common $qkv $bwd -D BLOCK_Q=64 -D BLOCK_K=32 --out t_dq=@dq || return
  compare "$tag attn_bwd_dq dq" "$dir/dq.g.dq.npy" "$dir/dq.i.dq.npy" $gb
  # the fused pass: attn_bwd (dQ added atomically into a zero-filled float32
  # accumulator, in another order on the GPU), then attn_bwd_dq_convert
  run_both fused attn_bwd $common $qkv $bwd --arg t_o="$dir/fwd.i.o.npy" -D BLOCK_Q=32 -D BLOCK_K=64 \
    --out t_dk=@dk --out t_dv=@dv --out t_dq_acc=@acc || return
  compare "$tag attn_bwd dk" "$dir/fused.g.dk.npy" "$dir/fused.i.dk.npy" $gb
  compare "$tag attn_bwd dv" "$dir/fused.g.dv.npy" "$dir/fused.i.dv.npy" $gb
  compare "$tag attn_bwd dq accumulator" "$dir/fused.g.acc.npy" "$dir/fused.i.acc.npy" $gb
  run_both conv attn_bwd_dq_convert -D n_groups=$G -D d_head=$D -D T=$dt --arg n_zh=$zh --arg q_seq_len=$N \
    --arg sm_scale=$scale --arg t_dq_acc="$dir/fused.i.acc.npy" --out t_dq=@dq || return
  compare "$tag attn_bwd_dq_convert dq" "$dir/conv.g.dq.npy" "$dir/conv.i.dq.npy" $fb
  compare "$tag fused dq against attn_bwd_dq's" "$dir/conv.i.dq.npy" "$dir/dq.i.dq.npy" $gb
}

echo "== fadsl-run --gpu against --interpret"
vs_interpreter 1 4 2 77 64 causal f16
vs_interpreter 2 3 1 50 32 full bf16
vs_interpreter 1 2 2 130 128 causal f16
vs_interpreter 1 2 2 1 16 full bf16

[ -n "$notes" ] && echo "note: not supported on this GPU:$notes"
echo "$cases cases, $failures failure(s)"
[ "$failures" -eq 0 ]
