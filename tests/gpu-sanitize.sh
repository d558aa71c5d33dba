#!/bin/sh
# gpu-sanitize.sh - compute-sanitizer over the kernels fadsl generates, with
# every pipeline choice and schedule: memcheck (out-of-bounds and misaligned accesses,
# the bulk copies' tensor maps included), racecheck (shared-memory hazards:
# the rings of tiles, their mbarriers and the barriers around them) and
# synccheck (barriers reached by the wrong threads: named barriers of
# producer and consumer warpgroups, __syncthreads in divergent code).
# Runs tests/gpu_codegen on the attention and Hopper cases (GPU against
# interpreter as well) and fadsl-attn on two small shapes, under each tool.
# Exits 77 (skipped) where there is no GPU or no compute-sanitizer.
#   FADSL_GPU_PIPELINES="..."   the choices (default: all)
#   FADSL_GPU_SCHEDULES="..."   the schedules each runs with (default: grid persistent)
#   FADSL_SANITIZE_TOOLS="..."  the tools (default: memcheck racecheck synccheck)
#   COMPUTE_SANITIZER=PATH      the sanitizer (default: on PATH, else the toolkit's)
set -u
srcdir=${srcdir:-$(dirname "$0")/..}
attn=${FADSL_ATTN:-$(pwd)/examples/attention/fadsl-attn}
san=${COMPUTE_SANITIZER:-$(command -v compute-sanitizer 2>/dev/null || echo /usr/local/cuda/bin/compute-sanitizer)}
dir=${TMPDIR:-/tmp}/gpu-sanitize.$$
mkdir -p "$dir" || exit 99
trap 'rm -rf "$dir"' EXIT
trap 'exit 130' INT  # a signal ends the script (the EXIT trap cleans up), not only its current command
trap 'exit 143' TERM

# a GPU? (the runtime decides)
"$attn" --gpu --shape 1,1,1,1,16 --seed 1 > "$dir/probe" 2>&1
if grep -q "no GPU:" "$dir/probe"; then
  sed -n 's/.*no GPU: /SKIP: no GPU: /p' "$dir/probe"
  exit 77
fi
if [ ! -x "$san" ]; then
  echo "SKIP: no compute-sanitizer (set COMPUTE_SANITIZER=PATH)"
  exit 77
fi
# libtool wrappers must be run through libtool for the sanitizer to see the binary
lt=""
[ -x ./libtool ] && lt="./libtool --mode=execute"

failures=0 runs=0
for tool in ${FADSL_SANITIZE_TOOLS:-memcheck racecheck synccheck}; do
  opts="--tool $tool --error-exitcode 3 --print-limit 20"
  [ "$tool" = racecheck ] && opts="$opts --racecheck-report all"
  for sch in ${FADSL_GPU_SCHEDULES:-grid persistent}; do
  for p in ${FADSL_GPU_PIPELINES:-cp_async tma tma_async tma_ws tma_ws_pp}; do
    before=$failures
    for what in codegen attn; do
      runs=$((runs + 1))
      if [ $what = codegen ]; then
        # the Hopper cases, the attention cases and the block atomics only:
        # they are what the pipelines change (bulk copies in and out of
        # shared memory; filters are substrings of kernel names)
        for filter in kmm heads accum tstore block_atomics attn; do
          if FADSL_PIPELINE=$p FADSL_SCHEDULE=$sch $lt "$san" $opts ./tests/gpu_codegen "$srcdir" "$filter" >> "$dir/out" 2>&1; then
            # what ran, so that a pass can be told from a run of nothing
            echo "    gpu_codegen $filter: $(grep -E 'cases passed' "$dir/out" | tail -1);" \
              "$(grep -E 'SUMMARY' "$dir/out" | tail -1 | sed 's/^=* *//')"
          else
            echo "FAIL: $tool, FADSL_PIPELINE=$p FADSL_SCHEDULE=$sch, gpu_codegen $filter:"
            tail -40 "$dir/out" | sed 's/^/    /'
            failures=$((failures + 1))
          fi
          : > "$dir/out"
        done
      else
        for shape in 1,2,2,77,64 1,2,1,200,128; do
          if FADSL_PIPELINE=$p FADSL_SCHEDULE=$sch $lt "$san" $opts "$attn" --gpu --shape $shape --causal --backward --seed 7 \
            > "$dir/out" 2>&1; then
            echo "    fadsl-attn $shape: $(grep -E 'SUMMARY' "$dir/out" | tail -1 | sed 's/^=* *//')"
          else
            echo "FAIL: $tool, FADSL_PIPELINE=$p FADSL_SCHEDULE=$sch, fadsl-attn --shape $shape --causal --backward:"
            tail -40 "$dir/out" | sed 's/^/    /'
            failures=$((failures + 1))
          fi
        done
      fi
    done
    [ "$failures" -eq "$before" ] && echo "ok: $tool with FADSL_PIPELINE=$p FADSL_SCHEDULE=$sch"
  done
  done
done
echo "$runs runs, $failures failure(s)"
[ "$failures" -eq 0 ]
