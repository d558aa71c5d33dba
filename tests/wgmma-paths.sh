#!/bin/sh
# wgmma-paths.sh - which tensor-core path attention.fa's kernels take, at
# their default configurations (the ones launches use without tuning):
# for sm_90a every product must be a warpgroup product (wgmma), with no
# mma.sync left; for sm_80 every product mma.sync.  Each product the
# emitter writes leaves one comment line, "// (wgmma: ..." or "// (per
# warp: ...", which this counts.  Needs no GPU and no NVRTC (CUDA C++ only).
set -u
fadslc=${FADSLC:-$(pwd)/fadslc}
srcdir=${srcdir:-.}
fa=$srcdir/examples/attention/attention.fa
dir=${TMPDIR:-/tmp}/wgmma-paths.$$
mkdir -p "$dir" || exit 99
trap 'rm -rf "$dir"' EXIT
trap 'exit 130' INT  # a signal ends the script (the EXIT trap cleans up), not only its current command
trap 'exit 143' TERM
failures=0 cases=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

for k in attn_fwd attn_bwd_dkdv attn_bwd_dq; do
  for D in 64 128; do
    for causal in False True; do
      for arch in sm_90a sm_80; do
        cases=$((cases + 1))
        what="$k d_head=$D is_causal=$causal $arch"
        if ! "$fadslc" --emit=cuda --arch $arch "$fa" --kernel $k -D d_head=$D -D is_causal=$causal \
             -o "$dir/k.cu" > "$dir/err" 2>&1; then
          fail "$what: fadslc failed"; cat "$dir/err"; continue
        fi
        wg=$(grep -c '// (wgmma: ' "$dir/k.cu")
        mma=$(grep -c '// (per warp: ' "$dir/k.cu")
        if [ $arch = sm_90a ]; then
          [ "$wg" -gt 0 ] && [ "$mma" -eq 0 ] || fail "$what: $wg warpgroup and $mma mma.sync products"
        else
          [ "$wg" -eq 0 ] && [ "$mma" -gt 0 ] || fail "$what: $wg warpgroup and $mma mma.sync products"
        fi
        [ $failures -eq 0 ] && [ $arch = sm_90a ] && echo "ok: $what: $wg products, all wgmma"
      done
    done
  done
done
echo "$cases cases, $failures failure(s)"
[ $failures -eq 0 ]
