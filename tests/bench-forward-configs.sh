#!/bin/sh
# bench-forward-configs.sh - bench/run-forward-configs.sh without a GPU: a
# stand-in for fadsl-attn records each call, so that the shapes of every set,
# the configurations per head dimension (FADSL_FWD_CONFIGS and, above 128,
# FADSL_FWD_CONFIGS_D256), the environment each run gets, the record count
# and the exit status on a failed run are checked.
set -u
srcdir=${srcdir:-.}
dir=${TMPDIR:-/tmp}/bench-forward-configs.$$
mkdir -p "$dir" || exit 99
trap 'rm -rf "$dir"' EXIT
trap 'exit 130' INT  # a signal ends the script (the EXIT trap cleans up), not only its current command
trap 'exit 143' TERM
failures=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}
# the stand-in: one line per call (pipeline, schedule, arguments), one JSON
# record into --json; it fails where FAIL_LABEL names the run's --label
cat > "$dir/attn" <<'STUB'
#!/bin/sh
echo "$FADSL_PIPELINE $FADSL_SCHEDULE $*" >> "$STUB_CALLS"
json="" label=""
while [ $# -gt 0 ]; do
  case "$1" in
    --json) json=$2; shift ;;
    --label) label=$2; shift ;;
  esac
  shift
done
[ -n "${FAIL_LABEL:-}" ] && [ "$label" = "$FAIL_LABEL" ] && exit 1
echo "{\"label\": \"$label\"}" >> "$json"
STUB
chmod +x "$dir/attn"
export STUB_CALLS="$dir/calls"
unset FADSL_FWD_CONFIGS FADSL_FWD_CONFIGS_D256

FADSL_ATTN="$dir/attn" FADSL_BENCH_SHAPES="std trading gqa d256" \
  sh "$srcdir/bench/run-forward-configs.sh" "$dir/out.jsonl" > "$dir/log" 2>&1
st=$?
[ "$st" -eq 0 ] || fail "exit status $st with every run passing"
n=$(wc -l < "$dir/calls")
# 12 standard shapes, 2 trading days and GQA at 3 configurations, 2 at D=256 at 2
[ "$n" -eq 49 ] && echo "ok: 49 runs" || fail "$n runs, wanted 49"
grep -q "run-forward-configs: 49 records" "$dir/log" && echo "ok: 49 records" || fail "record count: $(tail -1 "$dir/log")"
d256=$(grep -c ",256 " "$dir/calls")
[ "$d256" -eq 4 ] && echo "ok: 4 runs at D=256" || fail "$d256 runs at D=256, wanted 4"
if grep ",256 " "$dir/calls" | grep -qv "^tma_ws_pp .*--block-q 128 --block-k 64 --warps 8 --stages 2 "; then
  fail "a D=256 run outside FADSL_FWD_CONFIGS_D256's default: $(grep ',256 ' "$dir/calls" | head -1)"
else
  echo "ok: D=256 at tma_ws_pp 128x64, 2 stages"
fi
grep -q "^tma_ws_pp persistent --gpu --shape 1,64,8,16384,128 --causal --dtype bf16 --block-q 128 --block-k 128 --warps 8 --stages 3 " \
  "$dir/calls" && echo "ok: GQA at the persistent producer-warp configuration" || fail "no GQA run at tma_ws_pp persistent 128x128x3"
grep -q "^tma grid --gpu --shape 16,32,32,1024,64 --dtype f16 --block-q 128 --block-k 64 --warps 8 --stages 2 " \
  "$dir/calls" && echo "ok: D=64 N=1024 at tma 128x64" || fail "no D=64 N=1024 run at tma 128x64"

# a configuration given, one run failing: the others still run, exit status 1
: > "$dir/calls"
FADSL_ATTN="$dir/attn" FADSL_BENCH_SHAPES="d256" FADSL_FWD_CONFIGS_D256="tma_ws_pp:grid:128:32:3 tma_ws_pp:grid:128:64:2" \
  FAIL_LABEL="tma_ws_pp:grid:128:32:3" sh "$srcdir/bench/run-forward-configs.sh" "$dir/out.jsonl" > "$dir/log" 2>&1
st=$?
[ "$st" -eq 1 ] && echo "ok: exit status 1 after a failed run" || fail "exit status $st after a failed run"
[ "$(wc -l < "$dir/calls")" -eq 4 ] && echo "ok: every run ran" || fail "$(wc -l < "$dir/calls") runs, wanted 4"
grep -q "D=256 full f16 with tma_ws_pp:grid:128:32:3 FAILED" "$dir/log" && echo "ok: the failed run named" ||
  fail "the failure is not named: $(cat "$dir/log")"
grep -q "2 records in .*, 2 failed run(s)" "$dir/log" && echo "ok: 2 records, 2 failed" || fail "summary: $(tail -1 "$dir/log")"

[ "$failures" -eq 0 ]
