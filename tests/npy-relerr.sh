#!/bin/sh
# npy-relerr.sh A.npy B.npy - compares two float32 .npy files (as fadsl-run
# and fadsl-attn write them) element by element and prints
#     RELERR NONFINITE COUNT
# where RELERR = ||A - B|| / ||B|| over the elements finite in A, NONFINITE
# counts the NaN/inf elements of A (B is the reference), COUNT the elements.
# Where B is zero everywhere (a gradient that cancels exactly, as dK and dQ
# do with one key) RELERR is the root mean square of A - B instead: the
# tests feed inputs of unit scale, so that is the error relative to the
# terms that cancelled (A holds their rounding, not zeros, on the GPU).
# Exit status 2 when a file is not a float32 .npy or the sizes differ.
set -u
[ $# -eq 2 ] || { echo "usage: npy-relerr.sh A.npy B.npy" >&2; exit 2; }

# data offset of a version 1 or 2 .npy holding little-endian float32
offset() {
  major=$(od -A n -t u1 -j 6 -N 1 "$1" | tr -d ' ')
  case "$major" in
    1) hl=$(od -A n -t u2 -j 8 -N 2 "$1" | tr -d ' '); echo $((10 + hl)) ;;
    2) hl=$(od -A n -t u4 -j 8 -N 4 "$1" | tr -d ' '); echo $((12 + hl)) ;;
    *) echo "npy-relerr: $1 is not a .npy file (version '$major')" >&2; return 1 ;;
  esac
  head -c 200 "$1" | grep -q "'<f4'" || { echo "npy-relerr: $1 does not hold float32 ('<f4')" >&2; return 1; }
}
oa=$(offset "$1") || exit 2
ob=$(offset "$2") || exit 2
na=$(( ($(wc -c < "$1") - oa) / 4 ))
nb=$(( ($(wc -c < "$2") - ob) / 4 ))
[ "$na" -eq "$nb" ] || { echo "npy-relerr: $1 has $na elements, $2 has $nb" >&2; exit 2; }
dir=${TMPDIR:-/tmp}/npy-relerr.$$
mkdir -p "$dir" || exit 2
trap 'rm -rf "$dir"' EXIT
trap 'exit 130' INT  # a signal ends the script (the EXIT trap cleans up), not only its current command
trap 'exit 143' TERM
od -A n -v -t f4 -j "$oa" "$1" | tr -s ' ' '\n' | sed '/^$/d' > "$dir/a"
od -A n -v -t f4 -j "$ob" "$2" | tr -s ' ' '\n' | sed '/^$/d' > "$dir/b"
paste "$dir/a" "$dir/b" | awk '
  { n++
    if ($1 ~ /nan|inf/) { bad++; if ($2 !~ /nan|inf/) r += $2 * $2; next }
    if ($2 ~ /nan|inf/) { bad++; next }
    d = $1 - $2; num += d * d; r += $2 * $2 }
  END { if (r > 0) e = sqrt(num / r); else e = (n > bad ? sqrt(num / (n - bad)) : 0)
        printf "%.3e %d %d\n", e, bad, n }'
