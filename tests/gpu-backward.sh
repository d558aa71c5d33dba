#!/bin/sh
# gpu-backward.sh - the two attention backward passes on the GPU, in one call
# (run from the build directory, srcdir=.. as for make check):
#  1. both against float64 (fadsl-attn --gpu --check) on every shape class:
#     odd lengths, Nq != Nkv, GQA 4:1 and 3:1, causal and not, one key,
#     D 16 to 256, f16 and bf16, forced configurations, a long sequence; the
#     fused pass with D computed in attn_bwd (--fuse-delta); variants with
#     --fused (the deterministic pass is theirs in tests/gpu-variants.sh);
#  2. the deterministic pass bitwise the same across two runs (the dq, dk and
#     dv .npy files compared byte for byte), and whether the fused pass's
#     gradients differ between two runs (reported, not failed);
#  3. atomic_add through block pointers against the interpreter
#     (tests/gpu_codegen's block_atomics cases; skipped where it is not built);
#  4. compute-sanitizer memcheck and racecheck on both passes, small shapes
#     (reported skipped where compute-sanitizer is not installed);
#  5. the Python package's GPU tests (python/tests/test_gpu.py: both passes
#     against float64 SDPA, bitwise determinism through torch), where torch
#     and the package are installed in $FADSL_PYTHON (default python3).
# Exits 77 (skipped) where the runtime finds no GPU.
#   FADSL_TEST_SEED=N    reproduce a run's random inputs
set -u
attn=${FADSL_ATTN:-$(pwd)/examples/attention/fadsl-attn}
srcdir=${srcdir:-.}
dir=${TMPDIR:-/tmp}/gpu-backward.$$
mkdir -p "$dir" || exit 99
trap 'rm -rf "$dir"' EXIT
trap 'exit 130' INT  # a signal ends the script (the EXIT trap cleans up), not only its current command
trap 'exit 143' TERM
seed=${FADSL_TEST_SEED:-$(date +%s)}
echo "seed $seed (FADSL_TEST_SEED=$seed reproduces this run)"

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

failures=0 cases=0 skipped=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

# check SHAPE DTYPE CAUSAL [OPTIONS...]: fadsl-attn --gpu --check, forward and backward
check() {
  shape=$1 dtype=$2 causal=$3
  shift 3
  cases=$((cases + 1))
  c=""
  [ "$causal" = causal ] && c=--causal
  what="--shape $shape --dtype $dtype $c $*"
  if "$attn" --gpu --shape "$shape" --dtype "$dtype" $c --backward --check --seed $((seed + cases)) "$@" \
      > "$dir/out" 2>&1; then
    echo "ok: $what: $(grep -E '^  (dq|dk|dv|dsinks) ' "$dir/out" | awk '{printf "%s %s  ", $1, $NF}')"
  else
    fail "fadsl-attn --gpu $what:"
    sed 's/^/    /' "$dir/out"
  fi
}

echo "== 1. both passes against float64"
for mode in --fused --deterministic; do
  echo "-- backward: ${mode#--}"
  check 1,2,2,1,16 f16 full $mode
  check 1,2,2,77,1,64 bf16 full $mode          # one key for 77 queries
  check 2,2,2,77,16 f16 causal $mode
  check 1,4,1,77,32 f16 full $mode
  check 1,4,1,77,64 bf16 causal $mode
  check 1,6,2,77,32 f16 causal $mode           # three query heads per kv head
  check 1,2,2,77,200,64 f16 full $mode
  check 1,2,2,200,33,32 bf16 full $mode
  check 2,3,1,200,150,64 bf16 full $mode
  check 1,2,1,200,128 f16 causal $mode
  check 1,4,2,1,77,128 f16 full $mode
  check 2,2,2,513,128 bf16 full $mode
  check 1,1,1,77,256 f16 full $mode
  check 1,2,2,200,256 bf16 causal $mode
  check 1,4,2,256,64 f16 causal $mode          # lengths a multiple of 16: wider loads and reductions
  check 1,2,1,384,256,32 f16 full $mode
  check 1,4,2,300,64 f16 causal --block-q 32 --block-k 32 --warps 4 --stages 3 $mode
  check 1,6,2,333,128 bf16 full --block-q 64 --block-k 64 --warps 4 --stages 2 $mode
  check 1,8,2,8192,64 bf16 causal $mode
done
echo "-- the fused pass with D in attn_bwd"
check 1,4,2,77,64 f16 causal --fuse-delta
check 2,3,1,200,150,128 bf16 full --fuse-delta
echo "-- variants, fused"
check 1,4,2,300,64 f16 causal --window 64,0 --fused
check 1,4,2,300,64 bf16 full --softcap 20 --fused

echo "== 2. bitwise reproducibility across two runs"
# twice SHAPE DTYPE CAUSAL TAG OPTIONS: dq, dk, dv of two runs on the same
# inputs; the gradients that differ go to $differ (false when a run failed)
twice() {
  shape=$1 dtype=$2 causal=$3 tag=$4
  shift 4
  c=""
  [ "$causal" = causal ] && c=--causal
  for run in a b; do
    mkdir -p "$dir/$tag.$run"
    if ! "$attn" --gpu --shape "$shape" --dtype "$dtype" $c --backward --seed "$seed" "$@" \
        --dq "$dir/$tag.$run/dq.npy" --dk "$dir/$tag.$run/dk.npy" --dv "$dir/$tag.$run/dv.npy" > "$dir/out" 2>&1; then
      fail "$tag $shape $causal, run $run: fadsl-attn failed"
      sed 's/^/    /' "$dir/out"
      return 1
    fi
  done
  differ=""
  for g in dq dk dv; do
    cmp -s "$dir/$tag.a/$g.npy" "$dir/$tag.b/$g.npy" || differ="$differ $g"
  done
  return 0
}
for shape in 2,8,2,1000,64 1,4,1,777,1234,128 1,2,2,513,256 1,12,12,4096,64; do
  for causal in causal full; do
    case "$shape" in *,1234,*) [ $causal = causal ] && continue ;; esac
    cases=$((cases + 1))
    if twice "$shape" bf16 $causal det --deterministic; then
      if [ -z "$differ" ]; then
        echo "ok: --deterministic $shape $causal: dq, dk, dv the same to the bit in two runs"
      else
        fail "--deterministic $shape $causal: these differ between two runs:$differ"
      fi
    fi
    twice "$shape" bf16 $causal fused --fused && echo "note: fused $shape $causal: differing between two runs:${differ:- nothing}"
  done
done

echo "== 3. atomic_add through block pointers against the interpreter"
if [ ! -x ./tests/gpu_codegen ]; then
  # a check program (no Check needed): make check, or make tests/gpu_codegen, builds it
  echo "SKIP: tests/gpu_codegen is not built (make check or make tests/gpu_codegen builds it; it needs no Check)"
  skipped=$((skipped + 1))
else
  cases=$((cases + 1))
  if ./tests/gpu_codegen "$srcdir" block_atomics > "$dir/out" 2>&1; then
    echo "ok: $(tail -n 1 "$dir/out")"
  else
    fail "tests/gpu_codegen block_atomics:"
    sed 's/^/    /' "$dir/out"
  fi
fi

echo "== 4. compute-sanitizer"
cs=$(command -v compute-sanitizer || true)
[ -z "$cs" ] && [ -x /usr/local/cuda/bin/compute-sanitizer ] && cs=/usr/local/cuda/bin/compute-sanitizer
[ -z "$cs" ] && [ -x /usr/local/cuda/compute-sanitizer/compute-sanitizer ] && cs=/usr/local/cuda/compute-sanitizer/compute-sanitizer
if [ -z "$cs" ]; then
  echo "SKIP: compute-sanitizer is not installed"
  skipped=$((skipped + 1))
else
  # fadsl-attn may be libtool's wrapper script: run the real binary through it
  run="$cs"
  [ -x ./libtool ] && run="./libtool --mode=execute $cs"
  for tool in memcheck racecheck; do
    for mode in --fused --deterministic; do
      cases=$((cases + 1))
      if $run --tool $tool --error-exitcode 3 "$attn" --gpu --shape 1,4,2,200,64 --causal --backward --seed 2 $mode \
          > "$dir/out" 2>&1; then
        echo "ok: $tool ${mode#--}: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$dir/out" | tail -n 1)"
      else
        fail "compute-sanitizer --tool $tool on the ${mode:-fused} backward pass:"
        tail -n 40 "$dir/out" | sed 's/^/    /'
      fi
    done
  done
fi

echo "== 5. the Python package on the GPU"
py=${FADSL_PYTHON:-python3}
if "$py" -c "import torch, fadsl; assert torch.cuda.is_available()" > /dev/null 2>&1; then
  cases=$((cases + 1))
  if (cd "$srcdir/python/tests" && "$py" -m pytest -q -rs -p no:cacheprovider test_gpu.py) > "$dir/out" 2>&1; then
    echo "ok: $(tail -n 1 "$dir/out")"
  else
    fail "python/tests/test_gpu.py:"
    tail -n 60 "$dir/out" | sed 's/^/    /'
  fi
else
  echo "SKIP: $py has no torch with CUDA, or no fadsl package"
  skipped=$((skipped + 1))
fi

echo "$cases cases, $failures failure(s), $skipped part(s) skipped"
[ "$failures" -eq 0 ]
