#!/bin/sh
# runtime-doc-example.sh - the example program of docs/runtime.md, extracted
# and built by make (tests/runtime_doc_example), run on attention.fa.  With a
# GPU it must run and print a finite output; without one it must fail
# cleanly with the library's message (then the test reports SKIP).
set -u
srcdir=${srcdir:-.}
prog=./tests/runtime_doc_example
[ -x "$prog" ] || { echo "runtime-doc-example: $prog was not built"; exit 99; }
# (sanitizer builds: the CUDA driver needs AddressSanitizer's shadow gap)
ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}protect_shadow_gap=0"
export ASAN_OPTIONS
out=$("$prog" "$srcdir/examples/attention/attention.fa" 2>&1)
rc=$?
echo "$out"
case "$out" in
  *"no GPU: no CUDA driver found (libcuda.so.1 could not be loaded: "*|*"no GPU: no CUDA device"*)
    [ "$rc" -eq 1 ] || { echo "FAIL: exit status $rc without a GPU (want 1)"; exit 1; }
    echo "SKIP: no GPU here; the example built and failed cleanly"
    exit 77 ;;
esac
[ "$rc" -eq 0 ] || { echo "FAIL: exit status $rc"; exit 1; }
echo "$out" | grep -q '^attn_fwd on sm_' || { echo "FAIL: no launch line"; exit 1; }
value=$(echo "$out" | sed -n 's/^O\[0, 0, 0\] = //p')
case "$value" in
  ""|*nan*|*inf*) echo "FAIL: output value '$value'"; exit 1 ;;
esac
exit 0
