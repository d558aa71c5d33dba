#!/bin/sh
# main-job-verdict.sh - the main job's closing line (scripts/attention-verdict.sh)
# from fadsl-attn's output: a real run on the interpreter passes with every
# error and the bounds named; a GPU run is named with its device and speed;
# an error above its bound, a NaN and a run that stopped before its check fail.
set -u
srcdir=${srcdir:-.}
attn=${FADSL_ATTN:-$(pwd)/examples/attention/fadsl-attn}
verdict="sh $srcdir/scripts/attention-verdict.sh"
dir=${TMPDIR:-/tmp}/main-job-verdict.$$
mkdir -p "$dir" || exit 99
trap 'rm -rf "$dir"' EXIT
trap 'exit 130' INT  # a signal ends the script (the EXIT trap cleans up), not only its current command
trap 'exit 143' TERM
failures=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}
# expect STATUS TEXT OUTPUT.txt ATTN_STATUS WHERE: the verdict exits with STATUS and says TEXT
expect() {
  line=$($verdict "$3" "$4" "$5")
  st=$?
  case "$line" in
    *"$2"*) [ "$st" -eq "$1" ] && echo "ok: $line" || fail "status $st, wanted $1: $line" ;;
    *) fail "wanted '$2' in: $line" ;;
  esac
}

"$attn" --interpret --shape 1,2,1,40,32 --causal --backward --check --seed 3 \
  --program "$srcdir/examples/attention/attention.fa" > "$dir/real.txt" 2>&1
expect 0 "main-job: PASS: attention forward+backward (B=1 H=2 KVH=1 Nq=40 Nkv=40 D=32 causal f16) on the CPU interpreter: errors against float64 o " \
  "$dir/real.txt" $? interpreter
expect 0 ", lse " "$dir/real.txt" 0 interpreter
expect 0 ", dv " "$dir/real.txt" 0 interpreter
expect 0 "; all within the bounds (o 2e-3, lse 1e-4, dq/dk/dv 1e-2)" "$dir/real.txt" 0 interpreter

cat > "$dir/gpu.txt" <<'OUT'
random inputs, seed 1733000000
attention B=1 H=12 KVH=12 Nq=23400 Nkv=23400 D=64 causal f16 scale=0.125
GPU 0: NVIDIA H200 (compute capability 9.0, sm_90a, 132 SMs, 140 GiB)
against float64 (on the same f16 inputs; 6.1 s), checked 2 of 12 (batch, head) pairs:
  o   ||out - ref|| / max(||ref||, ||ref_rss||) = 2.492e-04
  lse ||out - ref|| / ||ref|| = 3.722e-08
  dq  ||out - ref|| / max(||ref||, ||ref_rss||) = 3.142e-04
  dk  ||out - ref|| / max(||ref||, ||ref_rss||) = 3.170e-04
  dv  ||out - ref|| / max(||ref||, ||ref_rss||) = 2.889e-04
forward:      4.321 ms    204.1 TFLOP/s  (median of 47 runs)
backward:    12.345 ms    171.0 TFLOP/s  (median of 20 runs; attn_bwd_d + attn_bwd_dkdv + attn_bwd_dq)
OUT
expect 0 "PASS: attention forward+backward (B=1 H=12 KVH=12 Nq=23400 Nkv=23400 D=64 causal f16) on the GPU (NVIDIA H200, sm_90a): errors against float64 o 2.492e-04, lse 3.722e-08, dq 3.142e-04, dk 3.170e-04, dv 2.889e-04; all within the bounds (o 2e-3, lse 1e-4, dq/dk/dv 1e-2); forward 204.1 TFLOP/s, backward 171.0 TFLOP/s" \
  "$dir/gpu.txt" 0 GPU

sed -e 's/= 3.142e-04/= 5.271e-02  (above the test bound)/' \
    -e 's/= 2.889e-04/= nan  (14784 NaN\/inf values in the output)  (above the test bound)/' "$dir/gpu.txt" > "$dir/bad.txt"
expect 1 "FAIL: attention forward+backward (B=1 H=12 KVH=12 Nq=23400 Nkv=23400 D=64 causal f16) on the GPU (NVIDIA H200, sm_90a): errors against float64 o 2.492e-04, lse 3.722e-08, dq 5.271e-02 (ABOVE its bound), dk 3.170e-04, dv nan (ABOVE its bound); not all within the bounds" \
  "$dir/bad.txt" 1 GPU

head -n 3 "$dir/gpu.txt" > "$dir/stopped.txt"
expect 1 "FAIL: attention (B=1 H=12 KVH=12 Nq=23400 Nkv=23400 D=64 causal f16) on the GPU (NVIDIA H200, sm_90a) stopped before its check (fadsl-attn exit status 134" \
  "$dir/stopped.txt" 134 GPU

echo "$failures failure(s)"
[ "$failures" -eq 0 ]
