#!/bin/sh
# fadslc-cli.sh - the compiler driver's command line: modes, usage errors
# (status 2), program errors (status 1, nothing on stdout), -o.
set -u
fadslc=${FADSLC:-$(pwd)/fadslc}
srcdir=${srcdir:-.}
dir=${TMPDIR:-/tmp}/fa-cli.$$
mkdir -p "$dir" || exit 99
trap 'rm -rf "$dir"' EXIT
trap 'exit 130' INT  # a signal ends the script (the EXIT trap cleans up), not only its current command
trap 'exit 143' TERM
failures=0

# check WANT_STATUS STDOUT_PATTERN(or -) STDERR_PATTERN(or -) ARGS...
check() {
  want=$1 out_pat=$2 err_pat=$3
  shift 3
  "$fadslc" "$@" > "$dir/out" 2> "$dir/err"
  status=$?
  ok=yes
  [ "$status" -eq "$want" ] || ok=no
  if [ "$out_pat" = - ]; then [ ! -s "$dir/out" ] || ok=no
  else grep -q -e "$out_pat" "$dir/out" || ok=no; fi
  if [ "$err_pat" = - ]; then [ ! -s "$dir/err" ] || ok=no
  else grep -q -e "$err_pat" "$dir/err" || ok=no; fi
  if [ "$ok" = yes ]; then
    echo "ok: fadslc $*"
  else
    echo "FAIL: fadslc $* (status $status, wanted $want)"
    echo "--- stdout"; head -c 1000 "$dir/out"; echo "--- stderr"; head -c 1000 "$dir/err"
    failures=$((failures + 1))
  fi
}

printf 'def f(a):\n    return a + 1\n' > "$dir/good.fa"
printf 'def f(a):\n    return a +\n' > "$dir/bad.fa"
attention="$srcdir/examples/attention/attention.fa"

# usage errors: status 2, a message, nothing on stdout
check 2 - 'no input file'
check 2 - 'unknown option' --frobnicate "$dir/good.fa"
check 2 - "unknown output 'bogus'" --emit=bogus "$dir/good.fa"
check 2 - 'choose one of' --list --emit=ast "$dir/good.fa"
check 2 - 'only one input file' "$dir/good.fa" "$dir/good.fa"
check 2 - 'NAME=VALUE' -D 1x=2 "$dir/good.fa"
check 2 - 'NAME=VALUE' -D novalue "$dir/good.fa"
check 2 - 'needs a kernel name' "$dir/good.fa" --kernel
check 2 - 'needs a file name' "$dir/good.fa" -o
check 0 'usage: fadslc' - --help
check 0 '^fadslc (fadsl) ' - --version

# program errors: status 1, located diagnostics, nothing on stdout
check 1 - 'cannot read' --emit=ast "$dir/missing.fa"
check 1 - "bad.fa:2:15: error: syntax error" --emit=ast "$dir/bad.fa"
check 1 - "bad.fa:2:15: error:" --emit=source "$dir/bad.fa"
check 1 - "bad.fa:2:15: error:" --list "$dir/bad.fa"
check 1 - "bad.fa:2:15: error:" --roundtrip "$dir/bad.fa"
check 1 - "bad.fa:2:15: error:" "$dir/bad.fa"

# the front end's modes
check 0 '^1:1 KEYWORD def$' - --emit=tokens "$dir/good.fa"
check 0 '^      PARAM a <1:7>$' - --emit=ast "$dir/good.fa"
check 0 '^    return a + 1$' - --emit=source "$dir/good.fa"
check 0 '^helper f$' - --list "$dir/good.fa"
check 0 - - --roundtrip "$dir/good.fa"
check 0 - - --emit=source -o "$dir/printed.fa" "$dir/good.fa"
check 0 - - --roundtrip "$dir/printed.fa"
rm -f "$dir/none.fa"
check 1 - 'error:' --emit=source -o "$dir/none.fa" "$dir/bad.fa"
if [ -e "$dir/none.fa" ]; then echo "FAIL: -o written despite errors"; failures=$((failures + 1)); fi

# --assume: facts about runtime arguments for the plan and the code
matmul="$srcdir/examples/matmul/matmul.fa"
check 2 - '--assume needs NAME%K' --emit=plan --kernel matmul "$matmul" --assume
check 1 - '--assume K16: expected NAME%K' --emit=plan --kernel matmul "$matmul" --assume K16
check 1 - 'must be a power of two' --emit=plan --kernel matmul "$matmul" --assume K%12
check 1 - "'BLOCK_M' is not a runtime integer or pointer parameter of 'matmul'" \
  --emit=plan --kernel matmul "$matmul" --assume BLOCK_M%16
check 1 - "'Q' is not a runtime integer" --emit=cuda --kernel matmul "$matmul" --assume M%16,Q%16
check 0 '^arg K: i32 multiple of 32$' - --emit=plan --kernel matmul "$matmul" --assume K%32
check 0 '^arg a: \*f16 aligned to 4 bytes$' - --emit=plan --kernel matmul "$matmul" --assume a%4,K%16
check 0 '^arg b: \*f16 aligned to 16 bytes (assumed)$' - --emit=plan --kernel matmul "$matmul" --assume a%4

# --list over the flagship example: its kernels, its problem and the core's
# helpers it imports (by their linked names)
if "$fadslc" --list "$attention" > "$dir/list" 2> "$dir/err"; then
  cat > "$dir/want" <<'LIST'
helper attention_core.fwd_tiles_ok
helper attention_core.dkdv_acc_regs
helper attention_core.dkdv_tiles_ok
helper attention_core.bwd_tiles_ok
helper attention_core.bwd_wide_tiles_ok
helper attention_core.dq_tiles_ok
helper attention_core.fwd_schedule_ok
helper attention_core.fwd_ws_tiles_ok
helper attention_core.dq_smem_ok
helper attention_core.dkdv_pipeline_ok
helper attention_core.dq_pipeline_ok
helper attention_core.bwd_pipeline_ok
helper attention_core.bwd_ws_tiles_ok
helper attention_core.no_score
helper attention_core.no_score_grad
helper attention_core.causal_mask
helper attention_core.no_init_rows
helper attention_core.params_as_context
helper attention_core.padded_locate
helper attention_core.padded_q_rows
helper attention_core.padded_kv_rows
helper attention_core.padded_lengths
helper attention_core.all_keys
helper attention_core.all_queries
helper attention_core.causal_keys
helper attention_core.causal_queries
helper attention_core.tile_runs
helper attention_core.run_of
helper attention_core.bounded_keys
helper attention_core.bounded_queries
helper attention_core.consecutive_runs
helper attention_core.runs_extent
helper attention_core.any_run_masked
helper attention_core.run_of_runs
helper attention_core.in_masked_run
helper attention_core.band_bounds
helper attention_core.band_mask
helper attention_core.attn_fwd_program
helper attention_core.attn_fwd_inner
helper attention_core.online_softmax_step
helper attention_core.no_delta_hook
helper attention_core.attn_bwd_d_program
helper attention_core.attn_bwd_dkdv_program
helper attention_core.attn_bwd_kv_program
helper attention_core.attn_bwd_kv_inner
helper attention_core.attn_bwd_dq_program
helper attention_core.attn_bwd_dq_inner
helper attention_core.attn_bwd_prep_program
helper attention_core.attn_bwd_program
helper attention_core.attn_bwd_dkdv_convert_program
helper attention_core.attn_bwd_dkdv_zero_program
helper attention_core.attn_bwd_dq_convert_program
helper attention_core.dkdv_hopper_default
helper attention_core.dq_hopper_default
helper attention_core.fwd_hopper_default
helper attention_core.bwd_hopper_default
kernel attn_fwd
kernel attn_bwd_d
kernel attn_bwd_dkdv
kernel attn_bwd_dq
kernel attn_bwd_prep
kernel attn_bwd
kernel attn_bwd_dq_convert
kernel attn_bwd_heads
kernel attn_bwd_dkdv_zero
kernel attn_bwd_dkdv_convert
problem attention
LIST
  if cmp -s "$dir/list" "$dir/want"; then echo "ok: fadslc --list attention.fa"
  else echo "FAIL: fadslc --list attention.fa"; diff "$dir/want" "$dir/list"; failures=$((failures + 1)); fi
else
  echo "FAIL: fadslc --list attention.fa"; cat "$dir/err"; failures=$((failures + 1))
fi

# --check specialises every kernel: -D values, then the @autotune default point
# (the first configuration that the prune accepts), then constexpr defaults.
# A kernel that still lacks a value is reported in a note (status 0).
cat > "$dir/add.fa" <<'FA'
@kernel(grid=(cdiv(n, BLOCK),))
def add(x: *f32[n], out: *T[n], n: i32, T: constexpr, BLOCK: constexpr):
    offs = program_id(0) * BLOCK + arange(0, BLOCK)
    store(out + offs, load(x + offs, mask=offs < n), mask=offs < n)

@kernel(grid=(cdiv(n, BLOCK),))
@autotune(BLOCK=[8, 16, 32], prune=BLOCK >= 16)
def tuned(x: *f32[n], n: i32, BLOCK: constexpr):
    static_assert(BLOCK >= 16, "BLOCK below 16")
    offs = program_id(0) * BLOCK + arange(0, BLOCK)
    store(x + offs, 1.0, mask=offs < n)
FA
check 0 - "add.fa:1:1: note: kernel 'add' was not specialised, so only its names and calls were checked: no value for T, BLOCK" \
  --check "$dir/add.fa"
check 0 - "no value for BLOCK " --check "$dir/add.fa" -D T=f16
check 0 - - --check "$dir/add.fa" -D T=f16 -D BLOCK=64
check 1 - "add.fa:3:36: error: arange(0, 12) has 12 elements" --check "$dir/add.fa" -D T=f16 -D BLOCK=12
check 1 - "add.fa:9:5: error: static assertion failed: BLOCK below 16" --check "$dir/add.fa" -D T=f16 -D BLOCK=8
check 1 - "error: -D TT: no kernel of .*add.fa has a constexpr parameter 'TT'" --check "$dir/add.fa" -D TT=f16
check 1 - "error: -D T is given twice" --check "$dir/add.fa" -D T=f16 -D T=f32
check 1 - "error: -D T=f17: not a value" --check "$dir/add.fa" -D T=f17
check 0 - - --check "$attention"

[ "$failures" -eq 0 ] || { echo "$failures failures"; exit 1; }
exit 0
