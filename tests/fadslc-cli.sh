#!/bin/sh
# fadslc-cli.sh - the compiler driver's command line: modes, usage errors
# (status 2), program errors (status 1, nothing on stdout), -o.
set -u
fadslc=${FADSLC:-$(pwd)/fadslc}
srcdir=${srcdir:-.}
dir=${TMPDIR:-/tmp}/fa-cli.$$
mkdir -p "$dir" || exit 99
trap 'rm -rf "$dir"' EXIT INT TERM
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

# --list over the flagship example: its kernels, its problem and the core's
# helpers it imports (by their linked names)
if "$fadslc" --list "$attention" > "$dir/list" 2> "$dir/err"; then
  cat > "$dir/want" <<'LIST'
helper attention_core.fwd_tiles_ok
helper attention_core.dkdv_tiles_ok
helper attention_core.dq_tiles_ok
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
helper attention_core.band_bounds
helper attention_core.band_mask
helper attention_core.attn_fwd_program
helper attention_core.attn_fwd_inner
helper attention_core.online_softmax_step
helper attention_core.no_delta_hook
helper attention_core.attn_bwd_d_program
helper attention_core.attn_bwd_dkdv_program
helper attention_core.attn_bwd_dkdv_inner
helper attention_core.attn_bwd_dq_program
helper attention_core.attn_bwd_dq_inner
kernel attn_fwd
kernel attn_bwd_d
kernel attn_bwd_dkdv
kernel attn_bwd_dq
problem attention
LIST
  if cmp -s "$dir/list" "$dir/want"; then echo "ok: fadslc --list attention.fa"
  else echo "FAIL: fadslc --list attention.fa"; diff "$dir/want" "$dir/list"; failures=$((failures + 1)); fi
else
  echo "FAIL: fadslc --list attention.fa"; cat "$dir/err"; failures=$((failures + 1))
fi

[ "$failures" -eq 0 ] || { echo "$failures failures"; exit 1; }
exit 0
