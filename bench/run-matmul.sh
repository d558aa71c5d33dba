#!/bin/sh
# run-matmul.sh OUT.jsonl - examples/matmul/matmul.fa (the Triton-style matrix
# product, M/N/K runtime i32) against torch.matmul (cuBLAS), in one run.
#
# For each dtype (f16, bf16) and size (4096^3, 8192^3, and 4095^3, whose odd
# sizes get the variant with scalar loads), fadsl-tune times
#   - the default configuration (the first point of matmul's @autotune space
#     that passes its prune: what a launch uses with an empty database), with
#     every axis pinned to it by --only, and
#   - the whole space (the tuned configuration),
# each with CUDA events, an L2 flush before every timed run and the median of
# at least 20 runs and 100 ms of them after 25 ms of warm-up (docs/tuning.md), into a database of its own
# (OUT.jsonl.d/tune.json, so the user's is left alone); then PyTorch times
# torch.matmul on the same shapes the same way (25 ms of warm-up, then the
# median of at least 20 runs and 100 ms of them, an L2 flush before each).
# One JSON record per measurement goes to OUT.jsonl (replacing it):
# provider ("fadsl default", "fadsl tuned", "torch.matmul"), dtype, M, N, K, ms, TFLOP/s (2*M*N*K / time), and for fadsl the config; a
# table with the ratios to torch.matmul is printed at the end.  The tuner's
# output and JSON stay in OUT.jsonl.d/.
#
# Run from the repository root with the build in ./build (FADSL_BUILD=DIR
# for another; FADSL_TUNE=PATH names fadsl-tune directly; PYTHON=... the
# interpreter that has torch).  FADSL_BENCH_SIZES="4096 8192" and
# FADSL_BENCH_DTYPES="f16" narrow the run; FADSL_BENCH_TUNE_ARGS adds
# fadsl-tune options to the tuned runs (e.g. "--only stages=3,4 --jobs 16").
# Exit status 1 when a measurement failed (the others still run and are
# recorded).
set -u
[ $# -eq 1 ] || { echo "usage: bench/run-matmul.sh OUT.jsonl" >&2; exit 2; }
out=$1
build=${FADSL_BUILD:-./build}
tune=${FADSL_TUNE:-$build/autotune/fadsl-tune}
python=${PYTHON:-python3}
srcdir=$(cd "$(dirname "$0")/.." && pwd)
fa=$srcdir/examples/matmul/matmul.fa
sizes=${FADSL_BENCH_SIZES:-4096 8192 4095}
dtypes=${FADSL_BENCH_DTYPES:-f16 bf16}
tune_args=${FADSL_BENCH_TUNE_ARGS:-}
[ -x "$tune" ] || { echo "run-matmul: $tune not found (build in ./build, or set FADSL_BUILD / FADSL_TUNE)" >&2; exit 2; }
"$python" -c 'import json' 2>/dev/null || { echo "run-matmul: $python cannot run (set PYTHON)" >&2; exit 2; }
work=$out.d
mkdir -p "$work" || exit 2
: > "$out" || exit 2
db=$work/tune.json
failures=0

# record.py TUNE.json PROVIDER DTYPE N: the winner of a fadsl-tune --json run as one record
record() {
  "$python" - "$@" >> "$out" <<'PY'
import json, sys
path, provider, dtype, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
doc = json.load(open(path))
job = doc["results"][0]
w = job.get("winner")
if not w or w.get("median_ms") is None:
    sys.exit("no timed winner in " + path)
print(json.dumps({"provider": provider, "dtype": dtype, "M": n, "N": n, "K": n,
                  "ms": w["median_ms"], "tflops": 2.0 * n * n * n / (w["median_ms"] * 1e-3) / 1e12,
                  "config": w["label"], "runs": w.get("runs"), "registers": w.get("registers"),
                  "shared_bytes": w.get("shared_bytes"), "gpu": doc.get("gpu")}))
PY
}

# the default configuration as --only options, from a dry run
only_default() {   # DTYPE N
  "$tune" "$fa" --dry-run --quiet --size M="$2" --size N="$2" --size K="$2" --size T="$1" --json - 2>/dev/null |
    "$python" -c '
import json, sys
d = json.load(sys.stdin)["results"][0]["default"]
print(" ".join("--only " + kv for kv in d.split()))'
}

for dt in $dtypes; do
  for n in $sizes; do
    echo "== matmul $dt M=N=K=$n"
    sz="--size M=$n --size N=$n --size K=$n --size T=$dt"
    only=$(only_default "$dt" "$n")
    if [ -z "$only" ]; then
      echo "run-matmul: no default configuration for $dt $n" >&2
      failures=$((failures + 1))
      continue
    fi
    # shellcheck disable=SC2086 # word splitting of the option lists is intended
    if "$tune" "$fa" $sz $only --force --db "$db" --json "$work/default-$dt-$n.json" \
         > "$work/default-$dt-$n.log" 2>&1 &&
       record "$work/default-$dt-$n.json" "fadsl default" "$dt" "$n"; then :; else
      echo "run-matmul: default config $dt $n FAILED (see $work/default-$dt-$n.log)" >&2
      failures=$((failures + 1))
    fi
    # shellcheck disable=SC2086
    if "$tune" "$fa" $sz $tune_args --force --db "$db" --json "$work/tuned-$dt-$n.json" \
         > "$work/tuned-$dt-$n.log" 2>&1 &&
       record "$work/tuned-$dt-$n.json" "fadsl tuned" "$dt" "$n"; then :; else
      echo "run-matmul: tuning $dt $n FAILED (see $work/tuned-$dt-$n.log)" >&2
      failures=$((failures + 1))
    fi
  done
done

echo "== torch.matmul"
if ! "$python" - "$sizes" "$dtypes" >> "$out" <<'PY'
import json, sys
import torch
sizes = [int(s) for s in sys.argv[1].split()]
dtypes = {"f16": torch.float16, "bf16": torch.bfloat16}
flush = torch.empty(256 << 20, dtype=torch.int8, device="cuda")
for name in sys.argv[2].split():
    for n in sizes:
        a = torch.randn(n, n, device="cuda", dtype=dtypes[name])
        b = torch.randn(n, n, device="cuda", dtype=dtypes[name])
        c = torch.empty(n, n, device="cuda", dtype=dtypes[name])
        # timed as fadsl-tune times fadsl's candidates: 25 ms of warm-up, then at
        # least 20 runs and 100 ms of them queued back to back, each after an L2
        # flush, their events read at the end (a run per host round trip would let
        # the GPU idle between runs and hold a clock sustained work does not get)
        torch.matmul(a, b, out=c)
        torch.cuda.synchronize()
        s0, s1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s0.record()
        for _ in range(3):
            torch.matmul(a, b, out=c)
        s1.record()
        s1.synchronize()
        est = max(s0.elapsed_time(s1) / 3, 1e-3)
        for _ in range(int(25 / est) + 1):
            torch.matmul(a, b, out=c)
        runs = max(20, min(2000, int(100 / est) + 1))
        events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(runs)]
        for start, end in events:
            flush.zero_()
            start.record()
            torch.matmul(a, b, out=c)
            end.record()
        torch.cuda.synchronize()
        times = [start.elapsed_time(end) for start, end in events]
        ms = sorted(times)[len(times) // 2]
        print(json.dumps({"provider": "torch.matmul", "dtype": name, "M": n, "N": n, "K": n, "ms": ms,
                          "tflops": 2.0 * n * n * n / (ms * 1e-3) / 1e12, "runs": len(times),
                          "torch": torch.__version__, "gpu": torch.cuda.get_device_name()}))
PY
then
  echo "run-matmul: torch.matmul FAILED" >&2
  failures=$((failures + 1))
fi

"$python" - "$out" <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
peer = {(r["dtype"], r["M"]): r["tflops"] for r in recs if r["provider"] == "torch.matmul"}
print("%-6s %6s  %-14s %9s %9s  %s" % ("dtype", "M=N=K", "provider", "TFLOP/s", "x cuBLAS", "config"))
for r in recs:
    p = peer.get((r["dtype"], r["M"]))
    ratio = "%.2f" % (r["tflops"] / p) if p else "-"
    print("%-6s %6d  %-14s %9.1f %9s  %s" % (r["dtype"], r["M"], r["provider"], r["tflops"], ratio,
                                            r.get("config", "")))
PY
echo "run-matmul: $(wc -l < "$out") records in $out, $failures failed"
[ "$failures" -eq 0 ]
