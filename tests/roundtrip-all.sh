#!/bin/sh
# roundtrip-all.sh - every .fa file in the source tree must survive
# `fadslc --roundtrip` (parse, print back as source, parse again, same tree),
# except the cases that exist to be rejected: those under tests/errors/ and
# files whose `# EXPECT:` lines announce errors and which do not parse.
set -u
fadslc=${FADSLC:-$(pwd)/fadslc}
srcdir=${srcdir:-.}
failures=0
count=0
list=${TMPDIR:-/tmp}/fa-roundtrip.$$
trap 'rm -f "$list"' EXIT
trap 'exit 130' INT  # a signal ends the script (the EXIT trap cleans up), not only its current command
trap 'exit 143' TERM
find "$srcdir" -name '*.fa' -type f ! -path '*/tests/errors/*' ! -path '*/_build/*' ! -path '*/fuzz*' | sort > "$list"
while IFS= read -r f; do
  if "$fadslc" --roundtrip "$f" > /dev/null 2> "$list.err"; then
    count=$((count + 1))
  elif grep -aq '^# EXPECT:' "$f" && ! "$fadslc" --emit=ast -o /dev/null "$f" 2> /dev/null; then
    echo "skipped (an error case): $f"
  else
    echo "FAIL: $f"
    head -c 3000 "$list.err"
    failures=$((failures + 1))
  fi
done < "$list"
rm -f "$list.err"
echo "$count files round-tripped, $failures failures"
[ "$count" -gt 0 ] || { echo "FAIL: no .fa files found under $srcdir"; exit 1; }
[ "$failures" -eq 0 ]
