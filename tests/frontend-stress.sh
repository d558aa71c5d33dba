#!/bin/sh
# frontend-stress.sh - inputs too big or too odd to commit, generated here:
# 100,000 open brackets, a 1,000,000-term expression, deep unary chains,
# deep indentation, a long elif chain, a 10 MB program, binary garbage, very
# long lines.  Each must give its diagnostic (exit status 1, nothing on stdout)
# or parse - never a crash, a hang or a stack overflow.
set -u
fadslc=${FADSLC:-$(pwd)/fadslc}
srcdir=${srcdir:-.}
dir=${TMPDIR:-/tmp}/fa-stress.$$
mkdir -p "$dir" || exit 99
trap 'rm -rf "$dir"' EXIT
trap 'exit 130' INT  # a signal ends the script (the EXIT trap cleans up), not only its current command
trap 'exit 143' TERM
failures=0

# expect_error NAME MESSAGE: fadslc --check NAME.fa fails with MESSAGE
expect_error() {
  f="$dir/$1.fa"
  "$fadslc" --check "$f" > "$dir/out" 2> "$dir/err"
  status=$?
  if [ "$status" -ne 1 ] || [ -s "$dir/out" ] || ! grep -q "^$f:[0-9]*:[0-9]*: error: .*$2" "$dir/err"; then
    echo "FAIL: $1: status $status, wanted 1 and '$2'"; head -c 2000 "$dir/err"; echo
    failures=$((failures + 1))
  else
    echo "ok: $1: $(grep -m1 ': error: ' "$dir/err" | cut -c1-150)"
  fi
}

# expect_ok NAME ARGS...: fadslc ARGS NAME.fa succeeds
expect_ok() {
  name=$1; shift
  "$fadslc" "$@" "$dir/$name.fa" > "$dir/out" 2> "$dir/err"
  status=$?
  if [ "$status" -ne 0 ]; then
    echo "FAIL: $name: status $status"; head -c 2000 "$dir/err"; echo
    failures=$((failures + 1))
  else
    echo "ok: $name parses"
  fi
}

# expect_no_crash NAME: exit status 0 or 1, and 1 only with a located error
expect_no_crash() {
  f="$dir/$1.fa"
  "$fadslc" --check "$f" > "$dir/out" 2> "$dir/err"
  status=$?
  if [ "$status" -eq 0 ] || { [ "$status" -eq 1 ] && [ ! -s "$dir/out" ] && grep -q "^$f:[0-9]*:[0-9]*: error: " "$dir/err"; }; then
    echo "ok: $1 (status $status)"
  else
    echo "FAIL: $1: status $status"; head -c 2000 "$dir/err"; echo
    failures=$((failures + 1))
  fi
}

awk 'BEGIN { printf "x = "; for (i = 0; i < 100000; i++) printf "("; print "1" }' > "$dir/brackets.fa"
expect_error brackets "too many nested brackets"

awk 'BEGIN { printf "x = "; for (i = 0; i < 100000; i++) printf "("; for (i = 0; i < 100000; i++) printf ")"; print "" }' > "$dir/balanced.fa"
expect_error balanced "too many nested brackets"

awk 'BEGIN { printf "x = "; for (i = 0; i < 190; i++) printf "f("; printf "1"; for (i = 0; i < 190; i++) printf ")"; print "" }' > "$dir/nested190.fa"
expect_ok nested190 --emit=source

awk 'BEGIN { printf "x = a"; for (i = 1; i < 1000000; i++) printf "+a"; print "" }' > "$dir/chain.fa"
expect_error chain "expression too deeply nested"

awk 'BEGIN { printf "x = a"; for (i = 1; i < 900; i++) printf " * a"; print "" }' > "$dir/chain900.fa"
expect_ok chain900 --emit=source

awk 'BEGIN { printf "x = "; for (i = 0; i < 100000; i++) printf "-"; print "a" }' > "$dir/unary.fa"
expect_error unary "too deeply nested"

awk 'BEGIN { printf "x = "; for (i = 0; i < 3000; i++) printf "not "; print "a" }' > "$dir/nots.fa"
expect_error nots "too deeply nested"

awk 'BEGIN { printf "x = "; for (i = 0; i < 3000; i++) printf "a if b else "; print "c" }' > "$dir/ifexp.fa"
expect_error ifexp "too deeply nested"

awk 'BEGIN { printf "x = 2"; for (i = 0; i < 5000; i++) printf " ** 2"; print "" }' > "$dir/power.fa"
expect_error power "too deeply nested"

awk 'BEGIN { for (i = 0; i < 300; i++) { for (j = 0; j < i; j++) printf " "; print "if a:" } for (j = 0; j < 300; j++) printf " "; print "pass" }' > "$dir/indent.fa"
expect_error indent "too many levels of indentation"

awk 'BEGIN { print "if a:\n    pass"; for (i = 0; i < 20000; i++) print "elif a:\n    pass" }' > "$dir/elif.fa"
expect_error elif "too deeply nested"

awk 'BEGIN { printf "x = ["; for (i = 0; i < 200000; i++) printf "%d, ", i; print "]" }' > "$dir/longlist.fa"
expect_ok longlist --emit=tokens

awk 'BEGIN { printf "f("; for (i = 0; i < 50000; i++) printf "a%d=%d, ", i, i; print "a7=1)" }' > "$dir/kwargs.fa"
expect_error kwargs "duplicate keyword argument 'a7'"

awk 'BEGIN { printf "x = "; for (i = 0; i < 2000000; i++) printf "a"; print "" }' > "$dir/longname.fa"
expect_error longname "identifier too long"

awk 'BEGIN { printf "x = \""; for (i = 0; i < 2000000; i++) printf "a"; print "\"" }' > "$dir/longstring.fa"
expect_error longstring "literal too long"

awk 'BEGIN { printf "x = \""; for (i = 0; i < 2000000; i++) printf "a"; print "" }' > "$dir/longunterminated.fa"
expect_error longunterminated "unterminated string"

# 10 MB: copies of the attention core (a file without imports), functions renamed apart
src="$srcdir/examples/attention/attention_core.fa"
if [ -f "$src" ]; then
  : > "$dir/big.fa"
  i=0
  while [ "$(wc -c < "$dir/big.fa")" -lt 10485760 ]; do
    sed -e "s/\\(def [a-z_]*\\)(/\\1_$i(/" "$src" >> "$dir/big.fa"
    i=$((i + 1))
  done
  expect_ok big --list
  echo "    ($(wc -c < "$dir/big.fa") bytes, $(wc -l < "$dir/out") functions)"
else
  echo "FAIL: $src not found"; failures=$((failures + 1))
fi

# binary garbage: a fixed pseudo-random byte stream, and every byte value
LC_ALL=C awk 'BEGIN { srand(12345); for (i = 0; i < 300000; i++) printf "%c", int(rand() * 255) + 1 }' > "$dir/garbage.fa"
expect_no_crash garbage
LC_ALL=C awk 'BEGIN { for (r = 0; r < 4; r++) for (i = 1; i < 256; i++) printf "%c", i }' > "$dir/bytes.fa"
expect_no_crash bytes
printf '\0\0\0' > "$dir/nuls.fa"
expect_error nuls "NUL character in source"
printf 'x = 1\r\ny = 2\r\n\r\nif x:\r\n    y = 3\r\n' > "$dir/crlf.fa"
expect_ok crlf --roundtrip
printf 'x = (1 +\n' > "$dir/eof-in-bracket.fa"
expect_error eof-in-bracket "'(' was never closed"
printf 'def f():' > "$dir/eof-after-colon.fa"
expect_error eof-after-colon "syntax error"
printf 'x = \\' > "$dir/eof-backslash.fa"
expect_error eof-backslash "line-continuation"

if [ "$failures" -ne 0 ]; then
  echo "$failures failures"
  exit 1
fi
exit 0
