#!/bin/sh
# ir-cases.sh - the compiler's text outputs checked by cases: every
# tests/ir/*.fa (the tile IR) and tests/plan/*.fa (the CUDA backend's plan,
# fadslc --emit=plan) states a command and what its output must contain, in
# the manner of FileCheck:
#     # RUN: fadslc --emit=ir %s --kernel k -D B=64     (%s: the file; %S: the source tree)
#     # CHECK: text          must appear in the output, after the previous CHECK's match
#     # CHECK-NOT: text      must not appear anywhere in the output
# The command must succeed.  These check properties (which ops, which types,
# which instructions and access widths) rather than whole dumps, so that
# unrelated changes do not break them.  Arguments, if any, name the folders
# to run (default: tests/ir tests/plan).
set -u
fadslc=${FADSLC:-$(pwd)/fadslc}
srcdir=${srcdir:-.}
tmp=${TMPDIR:-/tmp}/fa-ir.$$
trap 'rm -f "$tmp".*' EXIT
trap 'exit 130' INT  # a signal ends the script (the EXIT trap cleans up), not only its current command
trap 'exit 143' TERM
failures=0
count=0
dirs=${*:-tests/ir tests/plan}
for d in $dirs; do
for f in "$srcdir/$d"/*.fa; do
  count=$((count + 1))
  cmd=$(grep -a '^# RUN:' "$f" | head -n 1 | sed -e 's/^# RUN:[ 	]*//' -e "s|^fadslc|$fadslc|" \
        -e "s|%s|$f|g" -e "s|%S|$srcdir|g")
  if [ -z "$cmd" ]; then
    echo "FAIL: $f: no RUN line"; failures=$((failures + 1)); continue
  fi
  if ! sh -c "$cmd" > "$tmp.out" 2> "$tmp.err"; then
    echo "FAIL: $f: the command failed: $cmd"; cat "$tmp.err"; failures=$((failures + 1)); continue
  fi
  grep -a '^# CHECK' "$f" > "$tmp.checks"
  if ! awk '
      NR == FNR { text = text $0 "\n"; next }
      /^# CHECK-NOT:/ { s = $0; sub(/^# CHECK-NOT:[ ]*/, "", s)
                        if (index(text, s)) { print "  unexpected: " s; bad = 1 }; next }
      /^# CHECK:/     { s = $0; sub(/^# CHECK:[ ]*/, "", s)
                        i = index(substr(text, pos + 1), s)
                        if (!i) { print "  not found (in order): " s; bad = 1 } else pos += i + length(s) - 1 }
      END { exit bad }' "$tmp.out" "$tmp.checks"; then
    echo "FAIL: $f ($cmd)"; failures=$((failures + 1)); continue
  fi
  echo "PASS: $f"
done
done
echo "$count cases, $failures failed"
[ "$count" -gt 0 ] && [ "$failures" -eq 0 ]
