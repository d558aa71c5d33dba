#!/bin/sh
# matmul-nvrtc.sh - examples/matmul/matmul.fa's default configuration
# compiled by NVRTC for sm_80 and sm_90a, in both variants launches select:
# sizes that are multiples of 16 (--assume M%16,N%16,K%16: 16-byte cp.async
# pipelines) and sizes of no known divisor (scalar loads); f16 and bf16.
# SKIP (77) without NVRTC.
set -u
fadslc=${FADSLC:-$(pwd)/fadslc}
srcdir=${srcdir:-.}
fa=$srcdir/examples/matmul/matmul.fa
dir=${TMPDIR:-/tmp}/matmul-nvrtc.$$
mkdir -p "$dir" || exit 99
trap 'rm -rf "$dir"' EXIT
trap 'exit 130' INT  # a signal ends the script (the EXIT trap cleans up), not only its current command
trap 'exit 143' TERM
failures=0 n=0
for arch in sm_90a sm_80; do
  for facts in "--assume M%16,N%16,K%16" ""; do
    for T in f16 bf16; do
      [ "$arch" = sm_80 ] && [ "$T" = bf16 ] && continue   # one dtype is enough there
      n=$((n + 1))
      # shellcheck disable=SC2086 # $facts is two words or none
      if "$fadslc" --emit=cubin --arch $arch "$fa" --kernel matmul -D T=$T $facts -o "$dir/k.cubin" \
           > "$dir/err" 2>&1; then
        echo "ok: matmul $arch T=$T ${facts:-(no facts)}: $(wc -c < "$dir/k.cubin") bytes"
      elif grep -q "NVRTC" "$dir/err" && grep -q "not found\|cannot be loaded\|could not be loaded" "$dir/err"; then
        echo "SKIP: no NVRTC here"; cat "$dir/err"; exit 77
      else
        echo "FAIL: matmul $arch T=$T ${facts:-(no facts)}"; cat "$dir/err"; failures=$((failures + 1))
      fi
    done
  done
done
echo "$n compiles, $failures failed"
[ "$failures" -eq 0 ]
