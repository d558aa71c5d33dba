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

# --list over the flagship example
if "$fadslc" --list "$attention" > "$dir/list" 2> "$dir/err"; then
  cat > "$dir/want" <<'LIST'
kernel attn_fwd
helper attn_fwd_inner
kernel attn_bwd_d
kernel attn_bwd_dkdv
helper attn_bwd_dkdv_inner
kernel attn_bwd_dq
helper attn_bwd_dq_inner
problem attention
LIST
  if cmp -s "$dir/list" "$dir/want"; then echo "ok: fadslc --list attention.fa"
  else echo "FAIL: fadslc --list attention.fa"; diff "$dir/want" "$dir/list"; failures=$((failures + 1)); fi
else
  echo "FAIL: fadslc --list attention.fa"; cat "$dir/err"; failures=$((failures + 1))
fi

[ "$failures" -eq 0 ] || { echo "$failures failures"; exit 1; }
exit 0
