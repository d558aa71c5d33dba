#!/bin/sh
# run-case.sh FILE.fa - runs one data-driven test case (the log compiler of
# every .fa file in TESTS).
#
# A case states what it expects in comments:
#     # RUN: fadslc --check %s          the command (%s is the file); may repeat
#     # EXPECT: 12:5: error: <substring of the message>
#
# Error case (the file has EXPECT lines): the command (default
# `fadslc --check %s`) must exit with status 1, print nothing on stdout, and
# report exactly as many errors as there are EXPECT lines, each EXPECT
# matching a different reported error (line, column and message substring).
#
# Accepted case (no EXPECT lines): `fadslc --roundtrip %s` must succeed (the
# file parses, and printing it back as source and parsing that gives the
# same tree); then every RUN command must exit with status 0.  The default
# RUN is `fadslc --check %s`, except for files in a parse/ directory, which
# need only parse.
#
# `fadslc` is the one in the build directory (override with FADSLC=...).
set -u
file=${1:?usage: run-case.sh FILE.fa}
fadslc=${FADSLC:-$(pwd)/fadslc}
tmp=${TMPDIR:-/tmp}/fa-case.$$
trap 'rm -f "$tmp".*' EXIT
trap 'exit 130' INT  # a signal ends the script (the EXIT trap cleans up), not only its current command
trap 'exit 143' TERM

if [ ! -x "$fadslc" ]; then
  echo "run-case.sh: no fadslc at $fadslc" >&2
  exit 99
fi

# The RUN commands, with fadslc and %s substituted, one per line.
runs() {
  grep -a '^# RUN:' "$file" | sed -e 's/^# RUN:[ 	]*//' -e "s|^fadslc|$fadslc|" -e "s|%s|$file|g"
}

fail() {
  echo "FAIL: $file: $*"
  exit 1
}

grep -a '^# EXPECT:' "$file" | sed -e 's/^# EXPECT:[ 	]*//' > "$tmp.expect"
nexpect=$(wc -l < "$tmp.expect" | tr -d ' ')

if [ "$nexpect" -gt 0 ]; then
  cmd=$(runs | head -n 1)
  [ -n "$cmd" ] || cmd="$fadslc --check $file"
  echo "running: $cmd"
  sh -c "$cmd" > "$tmp.out" 2> "$tmp.err"
  status=$?
  cat "$tmp.err"
  [ "$status" -eq 1 ] || fail "exit status $status, expected 1"
  [ ! -s "$tmp.out" ] || fail "something was printed on stdout"
  # the reported errors, as LINE:COL: error: MESSAGE
  awk -v f="$file:" 'index($0, f) == 1 && index($0, ": error: ") > 0 { print substr($0, length(f) + 1) }' \
    "$tmp.err" > "$tmp.got"
  ngot=$(wc -l < "$tmp.got" | tr -d ' ')
  [ "$ngot" -eq "$nexpect" ] || fail "$ngot errors reported, $nexpect expected"
  # each expectation must match a different error: same LINE:COL, message containing the text
  awk '
    NR == FNR { got[FNR] = $0; n = FNR; next }
    {
      want = $0
      split(want, p, ":"); loc = p[1] ":" p[2] ":"
      msg = want; sub(/^[0-9]+:[0-9]+:[ ]*error:[ ]*/, "", msg)
      found = 0
      for (i = 1; i <= n; i++) {
        if (used[i]) continue
        g = got[i]
        if (index(g, loc) == 1 && index(g, ": error: ") > 0 && index(g, msg) > 0) { used[i] = 1; found = 1; break }
      }
      if (!found) { print "no reported error matches: " want; bad = 1 }
    }
    END { exit bad }' "$tmp.got" "$tmp.expect" || fail "expectations not met"
  echo "PASS: $file ($nexpect errors as expected)"
  exit 0
fi

echo "running: $fadslc --roundtrip $file"
"$fadslc" --roundtrip "$file" > "$tmp.out" 2> "$tmp.err"
status=$?
cat "$tmp.err"
[ "$status" -eq 0 ] || fail "the round trip failed (status $status)"
[ ! -s "$tmp.err" ] || fail "diagnostics printed for an accepted file"

runs > "$tmp.runs"
if [ ! -s "$tmp.runs" ]; then
  case "$file" in
    */parse/*) ;;
    *) echo "$fadslc --check $file" > "$tmp.runs" ;;
  esac
fi
while IFS= read -r cmd; do
  echo "running: $cmd"
  sh -c "$cmd" > "$tmp.out" 2> "$tmp.err"
  status=$?
  cat "$tmp.err"
  [ "$status" -eq 0 ] || fail "'$cmd' exited with status $status"
done < "$tmp.runs"
echo "PASS: $file"
exit 0
