#!/bin/sh
# installcheck.sh PREFIX [SRCDIR] - the installed library, the way a user
# builds against it: both example programs of docs/runtime.md are compiled
# with `pkg-config --cflags --libs fadsl` (and fadsl-attention), linked
# against the libraries under PREFIX/lib and run on the installed
# attention.fa; the installed fadsl-attn runs one case on the interpreter.
#
# PREFIX is where `make install` put the files (with DESTDIR: DESTDIR/prefix);
# the .pc files are read with their prefix redefined to it, so a staged
# install works too.  With a GPU both programs must run and print finite
# values; without one they must fail cleanly with the library's "no GPU"
# message, and the script says so (exit 0: the build and link are what was
# checked).  Exit 1 on any failure.
#   CC, PKG_CONFIG          compiler and pkg-config to use
set -u
[ $# -ge 1 ] || { echo "usage: tests/installcheck.sh PREFIX [SRCDIR]" >&2; exit 2; }
prefix=$1
srcdir=${2:-.}
cc=${CC:-cc}
pkgconfig=${PKG_CONFIG:-pkg-config}
libdir=$prefix/lib
[ -d "$libdir/pkgconfig" ] || libdir=$(dirname "$(find "$prefix" -name fadsl.pc | head -n1)")/..
[ -f "$libdir/pkgconfig/fadsl.pc" ] || { echo "FAIL: no fadsl.pc under $prefix"; exit 1; }
dir=${TMPDIR:-/tmp}/fadsl-installcheck.$$
mkdir -p "$dir" || exit 1
trap 'rm -rf "$dir"' EXIT
trap 'exit 130' INT  # a signal ends the script (the EXIT trap cleans up), not only its current command
trap 'exit 143' TERM
PKG_CONFIG_PATH="$libdir/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
export PKG_CONFIG_PATH
LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export LD_LIBRARY_PATH
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

fa=$(find "$prefix" -name attention.fa | head -n1)
[ -n "$fa" ] || fa=$srcdir/examples/attention/attention.fa
echo "installed under $prefix; attention.fa: $fa"

# build NAME FENCE PACKAGE: extract the docs example in ```FENCE and build it
build() {
  sed -n "/^\`\`\`$2\$/,/^\`\`\`\$/p" "$srcdir/docs/runtime.md" | sed '1d;$d' > "$dir/$1.c"
  [ -s "$dir/$1.c" ] || { fail "no \`\`\`$2 example in docs/runtime.md"; return 1; }
  flags=$("$pkgconfig" --define-variable=prefix="$prefix" --cflags --libs "$3") ||
    { fail "pkg-config --cflags --libs $3"; return 1; }
  echo "cc $1.c $flags -lm"
  # shellcheck disable=SC2086 (flags are words)
  "$cc" -std=c11 -Wall -Wextra -Werror "$dir/$1.c" $flags -lm -o "$dir/$1" || { fail "$1 did not build"; return 1; }
}

# run NAME ARGS...: with a GPU the program must succeed and print finite
# numbers; without one fail with status 1 and the "no GPU" message
nogpu=0
run() {
  name=$1
  shift
  out=$("$dir/$name" "$@" 2>&1)
  rc=$?
  echo "$out" | sed "s/^/  $name: /"
  case "$out" in
    *"no GPU: "*)
      [ "$rc" -eq 1 ] || fail "$name: exit status $rc without a GPU (want 1)"
      nogpu=1
      return ;;
  esac
  [ "$rc" -eq 0 ] || { fail "$name: exit status $rc"; return; }
  case "$out" in
    *nan*|*inf*|*NaN*|*Inf*) fail "$name printed a non-finite value" ;;
  esac
}

build runtime_example c fadsl && run runtime_example "$fa"
build attention_example C fadsl-attention && run attention_example

# the installed command-line tool, on the interpreter (no GPU needed)
if [ -x "$prefix/bin/fadsl-attn" ]; then
  "$prefix/bin/fadsl-attn" --interpret --shape 1,2,1,33,32 --causal --check --backward --seed 7 > "$dir/attn.out" 2>&1 ||
    { cat "$dir/attn.out"; fail "installed fadsl-attn --interpret --check"; }
else
  fail "no fadsl-attn in $prefix/bin"
fi

if [ "$failures" -ne 0 ]; then
  echo "installcheck: $failures failure(s)"
  exit 1
fi
if [ "$nogpu" = 1 ]; then
  echo "installcheck: built and linked against the installed library; no GPU here, so the programs failed cleanly (launches not checked)"
else
  echo "installcheck: both programs built against the installed library and ran on the GPU"
fi
exit 0
