#!/bin/sh
# run-variants.sh OUTDIR - the attention variants' benchmark, in one GPU run:
#   1. fadsl: fadsl-attn --gpu --bench --check --json for each variant (the
#      same set as variants_peers.py: a 1k causal window, softcap, ALiBi,
#      sinks and packed sequences causal, a window with sinks, softcap with a
#      4k window) on the trading day (B=1, H=12, N=23400, D=64) and D=128 at
#      16k tokens (B=1, H=16), bf16, forward and backward, each variant's
#      kernels compiled cold (a fresh kernel cache: first_fwd_s/first_bwd_s
#      are front end + NVRTC + the first run); then decoding from a paged KV
#      cache (fadsl-attn --decode-shape ... --bench, next to a device copy);
#   2. the peers: bench/variants_peers.py (FlexAttention with the same score
#      and mask functions, SDPA where it has the variant, flash_attn_with_kvcache
#      when installed, torch's device copy), when PyTorch is there;
#   3. the table: bench/compare_variants.py > OUTDIR/table.md.
# Records: OUTDIR/fadsl.jsonl, OUTDIR/peers.jsonl.  Run from the repository
# root with the build in ./build (FADSL_BUILD=DIR).  FADSL_BENCH_CHECK=0 skips
# the float64 checks; FADSL_BENCH_QUICK=1 runs only the trading day;
# FADSL_BENCH_PARTS chooses the parts and their order (default
# "variants decode peers"; e.g. "peers decode variants" to time the peers
# first when a time limit may cut the run short).
# Exit status 1 when a run failed (the others still run and are recorded).
set -u
[ $# -ge 1 ] || { echo "usage: bench/run-variants.sh OUTDIR" >&2; exit 2; }
out=$1
mkdir -p "$out" || exit 2
build=${FADSL_BUILD:-./build}
attn=${FADSL_ATTN:-$build/examples/attention/fadsl-attn}
[ -x "$attn" ] || { echo "run-variants: $attn not found (build in ./build, or set FADSL_BUILD / FADSL_ATTN)" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
check=--check
[ "${FADSL_BENCH_CHECK:-1}" = 0 ] && check=""
parts=${FADSL_BENCH_PARTS:-variants decode peers}
for part in $parts; do   # every name checked before any part runs
  case $part in
    variants|decode|peers) ;;
    *) echo "run-variants: unknown part '$part' in FADSL_BENCH_PARTS (variants, decode, peers)" >&2; exit 2 ;;
  esac
done
: > "$out/fadsl.jsonl" || exit 2
failures=0

# the variants' arrays: ALiBi's geometric slopes, random sink logits, equal packed sequences
python3 - "$out" <<'PY' || { echo "run-variants: python3 is needed to write the input arrays" >&2; exit 2; }
import math, random, struct, sys
out = sys.argv[1]

def save(path, code, values):   # a 1-D .npy (format 1.0) without numpy
    header = "{'descr': '<%s', 'fortran_order': False, 'shape': (%d,), }" % (code, len(values))
    header += " " * (63 - (len(header) + 10) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode())
        f.write(struct.pack("<%d%s" % (len(values), "f" if code == "f4" else "i"), *values))

rng = random.Random(0)
for H in (12, 16):
    save(f"{out}/slopes{H}.npy", "f4", [2.0 ** (-8.0 * (h + 1) / H) for h in range(H)])
    save(f"{out}/sinks{H}.npy", "f4", [0.5 * rng.gauss(0, 1) for _ in range(H)])
for N in (23400, 16384):
    n = N // 4
    save(f"{out}/cu{N}.npy", "i4", [0, n, 2 * n, 3 * n, N])
PY

# bench LABEL SHAPE H N OPTIONS...: one variant at one shape, its kernels compiled cold
bench() {
  label=$1 shape=$2 H=$3 N=$4
  shift 4
  echo "== $label at $shape"
  cache=$(mktemp -d "${TMPDIR:-/tmp}/fadsl-variant-cache.XXXXXX")
  if ! FADSL_CACHE_DIR=$cache "$attn" --gpu --shape "$shape" --dtype bf16 --bench --json "$out/fadsl.jsonl" \
      --label "$label" --seed 1 $check "$@"; then
    echo "run-variants: $label at $shape FAILED" >&2
    failures=$((failures + 1))
  fi
  rm -rf "$cache"
}

# the variants at the trading day and D=128 16k
variants() {
  shapes="1,12,12,23400,64:12:23400"
  [ "${FADSL_BENCH_QUICK:-0}" = 1 ] || shapes="$shapes 1,16,16,16384,128:16:16384"
  for s in $shapes; do
    shape=${s%%:*}
    rest=${s#*:}
    H=${rest%%:*}
    N=${rest#*:}
    bench "window=1024,0" "$shape" "$H" "$N" --window 1024,0
    bench "softcap=50+window=-1,0" "$shape" "$H" "$N" --softcap 50 --causal
    bench "alibi+window=-1,0" "$shape" "$H" "$N" --alibi "$out/slopes$H.npy" --causal
    bench "sinks+window=-1,0" "$shape" "$H" "$N" --sinks "$out/sinks$H.npy" --dsinks "$out/dsinks.npy" --causal
    bench "varlen=4+window=-1,0" "$shape" "$H" "$N" --cu-seqlens "$out/cu$N.npy" --causal
    bench "window=1024,0+sinks" "$shape" "$H" "$N" --window 1024,0 --sinks "$out/sinks$H.npy" --dsinks "$out/dsinks.npy"
    bench "softcap=50+window=4096,0" "$shape" "$H" "$N" --softcap 50 --window 4096,0
    bench "plain causal" "$shape" "$H" "$N" --causal
  done
}

# decoding: 64 sequences of 32k keys and 8 of 128k, GQA 4:1, D=128, pages of 64
decode() {
  for d in 64,1,32,8,128,64,32768 8,1,32,8,128,64,131072 64,4,32,8,128,64,32768; do
    echo "== decode $d"
    if ! "$attn" --gpu --decode-shape "$d" --causal --dtype bf16 --bench --json "$out/fadsl.jsonl" --label "decode $d" \
        --seed 1 $check; then
      echo "run-variants: decode $d FAILED" >&2
      failures=$((failures + 1))
    fi
  done
}

peers() {
  if python3 -c "import torch, triton" 2> /dev/null; then
    echo "== peers"
    python3 "$here/variants_peers.py" --out "$out/peers.jsonl" \
      --decode "64,1,32,8,128,64,32768;8,1,32,8,128,64,131072;64,4,32,8,128,64,32768" \
      $([ "${FADSL_BENCH_QUICK:-0}" = 1 ] && echo --shapes day) || failures=$((failures + 1))
  else
    echo "run-variants: PyTorch with Triton not found: no peers" >&2
    : > "$out/peers.jsonl"
  fi
}

for part in $parts; do
  $part
done
[ -f "$out/peers.jsonl" ] || : > "$out/peers.jsonl"
python3 "$here/compare_variants.py" "$out/fadsl.jsonl" "$out/peers.jsonl" > "$out/table.md" && cat "$out/table.md"
[ "$failures" -eq 0 ]
