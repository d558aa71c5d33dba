#!/bin/sh
# variant-compile.sh - every kernel of the attention variants (examples/
# attention/variants/*.fa, attention_variants.fa with every flag on, and
# decode.fa) emitted by fadslc and compiled by NVRTC to a cubin for sm_80 and
# sm_90a.  A failed compile, or an NVRTC warning, fails the test (SKIP, 77,
# when NVRTC cannot be loaded).  Each line gives the cold compile time as a
# user pays it on first use: the front end (parse, check, specialise, emit:
# fadslc --emit=cuda) and front end + NVRTC (fadslc --emit=cubin), in
# seconds on this machine: CPU seconds (user + system, where /usr/bin/time
# is there: they do not depend on what else the machine runs) and wall time.
# D and the dtype rotate from one kernel to the next (D = 64 and 128, f16 and
# bf16); GQA 4:1.
# FADSL_VARIANT_ARCHS="sm_90a" limits the architectures.
set -u
fadslc=${FADSLC:-$(pwd)/fadslc}
srcdir=${srcdir:-.}
dir=$srcdir/examples/attention
tmp=${TMPDIR:-/tmp}/fa-variant-compile.$$
mkdir -p "$tmp" || exit 99
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT  # a signal ends the script (the EXIT trap cleans up), not only its current command
trap 'exit 143' TERM
archs=${FADSL_VARIANT_ARCHS:-"sm_80 sm_90a"}

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }

# is NVRTC there?  (a tiny kernel)
printf '@kernel(grid=(1,))\ndef k(x: *f32[16]):\n    store(x + arange(0, 16), 1.0)\n' > "$tmp/probe.fa"
if ! "$fadslc" --emit=cubin --arch sm_80 "$tmp/probe.fa" --kernel k -o "$tmp/probe.cubin" > "$tmp/probe.out" 2>&1; then
  if grep -qi "nvrtc" "$tmp/probe.out"; then
    echo "SKIP: NVRTC cannot compile here:"; cat "$tmp/probe.out"; exit 77
  fi
  echo "FAIL: the probe kernel did not compile"; cat "$tmp/probe.out"; exit 1
fi

failures=0
count=0
pick=0
timer=""
[ -x /usr/bin/time ] && /usr/bin/time -f cpu_%U true > /dev/null 2>&1 && timer="/usr/bin/time -f cpu_%U+%S"
# compile FILE LABEL KERNEL -D...: emit and compile one kernel for each architecture
compile() {
  file=$1 label=$2 kernel=$3
  shift 3
  for arch in $archs; do
    count=$((count + 1))
    t0=$(now)
    if ! "$fadslc" --emit=cuda --arch "$arch" "$file" --kernel "$kernel" "$@" -o "$tmp/k.cu" > "$tmp/out" 2>&1; then
      echo "FAIL $label $kernel $arch: fadslc --emit=cuda $*"; cat "$tmp/out"; failures=$((failures + 1)); continue
    fi
    t1=$(now)
    if ! $timer "$fadslc" --emit=cubin --arch "$arch" "$file" --kernel "$kernel" "$@" -o "$tmp/k.cubin" > "$tmp/out" 2>&1; then
      echo "FAIL $label $kernel $arch: fadslc --emit=cubin $*"; cat "$tmp/out"; failures=$((failures + 1)); continue
    fi
    t2=$(now)
    cpu=$(sed -n 's/^cpu_//p' "$tmp/out" | awk -F+ '{ printf "%.2fs", $1 + $2 }')
    sed -i '/^cpu_/d' "$tmp/out"
    if grep -qi "warning" "$tmp/out"; then
      echo "FAIL $label $kernel $arch: NVRTC warned"; cat "$tmp/out"; failures=$((failures + 1)); continue
    fi
    printf 'ok   %-20s %-19s %-7s front end %5ss  with NVRTC %6ss wall, %6s CPU  (%s)\n' "$label" "$kernel" \
      "$arch" "$(elapsed "$t0" "$t1")" "$(elapsed "$t1" "$t2")" "${cpu:-?}" "$*"
  done
}

# the constexprs of the next kernel beyond the @autotune defaults, in $dims
# (D and the dtype rotating)
next_dims() {
  pick=$((pick + 1))
  d=128
  [ $((pick % 2)) -eq 0 ] && d=64
  t=bf16
  [ $(((pick / 2) % 2)) -eq 0 ] && t=f16
  dims="-D d_head=$d -D n_groups=4 -D T=$t"
}

kernels() { "$fadslc" --list "$1" | awk '$1 == "kernel" { print $2 }'; }

for v in window softcap alibi sinks varlen; do
  f=$dir/variants/$v.fa
  ks=$(kernels "$f")
  [ -n "$ks" ] || { echo "FAIL $v: no kernels listed in $f"; failures=$((failures + 1)); }
  for k in $ks; do
    extra=""
    case "$k" in
      attn_zero_f32) compile "$f" "$v" "$k"; continue ;;
      attn_bwd_d | attn_bwd_prep | attn_bwd_dq_convert) ;;
      *) grep -q "is_causal" "$f" && extra="-D is_causal=True" ;;
    esac
    next_dims
    compile "$f" "$v" "$k" $dims $extra
  done
done
f=$dir/attention_variants.fa
flags="-D HAS_WINDOW=True -D HAS_SOFTCAP=True -D HAS_ALIBI=True -D HAS_SINKS=True -D VARLEN=True"
for k in attn_fwd attn_bwd_dkdv attn_bwd_dq attn_bwd; do
  next_dims
  compile "$f" "combined(all flags)" "$k" $dims $flags
done
next_dims
compile "$f" "combined(all flags)" attn_bwd_d $dims -D HAS_SINKS=True -D VARLEN=True
next_dims
compile "$f" "combined(all flags)" attn_bwd_prep $dims -D HAS_SINKS=True -D VARLEN=True
next_dims
compile "$f" "combined(all flags)" attn_bwd_dq_convert $dims -D VARLEN=True
compile "$f" "combined" attn_zero_f32
f=$dir/decode.fa
compile "$f" decode attn_decode_split -D d_head=128 -D n_groups=8 -D page_size=64 -D is_causal=True -D T=bf16 -D ROWS=16
compile "$f" decode attn_decode_combine -D d_head=128 -D n_groups=8 -D T=bf16 -D ROWS=16 -D SPLITS=16
compile "$f" decode attn_copy -D T=bf16
echo "$count compiles, $failures failed"
[ "$failures" -eq 0 ]
