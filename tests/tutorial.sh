#!/bin/sh
# tutorial.sh - the kernels of docs/tutorial.md (its ```python blocks that
# start with "# NAME.fa:"), run as the tutorial runs them: fadslc --check
# with and without -D, fadsl-run on the interpreter with NumPy inputs, the
# values and messages the tutorial shows, and the vectorisation remark of its
# section on speed.  SKIP (77) when no python3 here has NumPy.
set -u
srcdir=${srcdir:-.}
fadslc=${FADSLC:-$(pwd)/fadslc}
run=${FADSL_RUN:-$(pwd)/tools/fadsl-run}
doc=$srcdir/docs/tutorial.md
py=""
for p in python3 /usr/bin/python3; do
  if "$p" -c 'import numpy' > /dev/null 2>&1; then py=$p; break; fi
done
[ -n "$py" ] || { echo "SKIP: no python3 with NumPy (the tutorial needs it)"; exit 77; }
dir=${TMPDIR:-/tmp}/tutorial-test.$$
mkdir -p "$dir" || exit 99
trap 'rm -rf "$dir"' EXIT
trap 'exit 130' INT  # a signal ends the script (the EXIT trap cleans up), not only its current command
trap 'exit 143' TERM
failures=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}
# has FILE TEXT WHAT
has() {
  if grep -qF -- "$2" "$1"; then echo "ok: $3"; else fail "$3: no '$2' in:"; sed 's/^/    /' "$1"; fi
}

awk -v dir="$dir" '
  /^```python$/ { inblock = 1; file = ""; next }
  /^```$/ { if (file != "") close(file); inblock = 0; file = ""; next }
  inblock && file == "" && /^# [a-z_]+\.fa:/ { name = $2; sub(/:$/, "", name); file = dir "/" name }
  inblock && file != "" { print > file }' "$doc"
for f in add.fa softmax.fa; do
  [ -s "$dir/$f" ] || { echo "FAIL: docs/tutorial.md has no $f block"; exit 1; }
done
cd "$dir" || exit 99

# section 1: --check
"$fadslc" --check add.fa > out 2> err; st=$?
[ "$st" -eq 0 ] && echo "ok: fadslc --check add.fa: status 0" || fail "fadslc --check add.fa: status $st"
has err "note: kernel 'add' was not specialised, so only its names and calls were checked: no value for T, BLOCK" \
  "without -D, a note says add was not specialised"
"$fadslc" --check add.fa -D T=f16 -D BLOCK=16 > out 2> err && [ ! -s err ] &&
  echo "ok: fadslc --check add.fa -D T=f16 -D BLOCK=16 is silent" || { fail "--check with -D"; cat err; }
sed 's/mask=mask, other/msk=mask, other/' add.fa > typo.fa
"$fadslc" --check typo.fa > out 2> err
has err "typo.fa:6:24: error: load() got an unexpected keyword argument 'msk'" "a misspelt keyword, located"

# section 2: run it on the interpreter
"$py" -c "import numpy as np; np.save('x.npy', np.arange(37, dtype=np.float32) / 2);
np.save('y.npy', np.full(37, 1/3, dtype=np.float32)); np.save('short.npy', np.zeros(30, np.float32))"
"$run" add.fa add --interpret -D T=f16 -D BLOCK=16 --arg x=x.npy --arg y=y.npy --arg n=37 --out out=out.npy \
  > out 2> err || { fail "fadsl-run add"; cat err; }
has err "fadsl-run: add on the interpreter [T=f16 BLOCK=16] warps=4 stages=2 (default), grid (3, 1, 1)" "what ran"
"$py" -c "import numpy as np; o = np.load('out.npy'); assert o.dtype == np.float32 and o.shape == (37,);
assert list(o[:2]) == [0.333251953125, 0.8330078125], o[:2]" && echo "ok: out.npy = x + y rounded to f16" ||
  fail "out.npy"
"$run" add.fa add --interpret -D T=f16 -D BLOCK=16 --arg x=short.npy --arg y=y.npy --arg n=37 --out out=o.npy \
  > out 2> err
has err "fadsl-run: --arg x=short.npy: the file holds 30 elements (shape [30]), but 'x' declares the extent [37] = 37 elements" \
  "a short file"
"$run" add.fa add --interpret -D BLOCK=16 --arg x=x.npy --arg y=yy.npy --arg n=37 --out out=o.npy > out 2> err
has err "fadsl-run: --arg y: yy.npy: No such file or directory" "a missing file"

# section 5: softmax, and a transposed input
"$py" -c "import numpy as np; r = np.random.default_rng(1); np.save('m.npy', r.standard_normal((5, 20), np.float32));
np.save('mt.npy', r.standard_normal((20, 5), np.float32))"
"$run" softmax.fa softmax --interpret -D T=f16 -D BLOCK_R=4 -D BLOCK_C=32 --arg x=m.npy --arg n_rows=5 \
  --arg n_cols=20 --out y=y.npy > out 2> err || { fail "fadsl-run softmax"; cat err; }
"$py" -c "import numpy as np; x = np.load('m.npy').astype(np.float16).astype(np.float64); y = np.load('y.npy')
e = np.exp(x - x.max(axis=1, keepdims=True)); ref = e / e.sum(axis=1, keepdims=True)
assert y.shape == (5, 20) and np.abs(y - ref).max() < 2e-3, np.abs(y - ref).max()" &&
  echo "ok: softmax rows match numpy" || fail "softmax values"
"$run" softmax.fa softmax --interpret -D T=f16 -D BLOCK_R=4 -D BLOCK_C=32 --arg x=mt.npy --arg n_rows=5 \
  --arg n_cols=20 --out y=y.npy > out 2> err
has err "fadsl-run: --arg x=mt.npy: the file's shape [20, 5] is not the extent [5, 20] that 'x' declares" \
  "a transposed array is refused"

# section 7: a runtime row stride is loaded one element at a time, a constexpr one by 16 bytes
"$fadslc" --emit=cuda softmax.fa --kernel softmax -D T=f16 -D BLOCK_R=16 -D BLOCK_C=64 > cu 2> err
has cu "// fa_L0, 1-element accesses" "runtime n_cols: 1-element accesses"
sed 's/n_rows: i32, n_cols: i32,/n_rows: i32, n_cols: constexpr,/' softmax.fa > softmax_c.fa
"$fadslc" --emit=cuda softmax_c.fa --kernel softmax -D T=f16 -D BLOCK_R=16 -D BLOCK_C=64 -D n_cols=64 > cu 2> err
has cu "// fa_L0, 8-element accesses" "constexpr n_cols=64: 8-element accesses"
"$fadslc" --emit=cuda softmax_c.fa --kernel softmax -D T=f16 -D BLOCK_R=16 -D BLOCK_C=64 -D n_cols=20 > cu 2> err
has cu "// fa_L0, 4-element accesses" "constexpr n_cols=20: 4-element accesses"

echo "$failures failure(s)"
[ "$failures" -eq 0 ]
