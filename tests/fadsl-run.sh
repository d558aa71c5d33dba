#!/bin/sh
# fadsl-run.sh - fadsl-run end to end on the interpreter: buffers created for
# --out, .npy inputs converted to the parameters' types (f16 rounding), the
# values written back, and every argument mistake or bad access reported by
# name with exit status 1 (2 for bad usage).  The kernels are tests/run/fill.fa.
set -u
run=${FADSL_RUN:-$(pwd)/tools/fadsl-run}
srcdir=${srcdir:-.}
fa=$srcdir/tests/run/fill.fa
dir=${TMPDIR:-/tmp}/fadsl-run-test.$$
mkdir -p "$dir" || exit 99
trap 'rm -rf "$dir"' EXIT
trap 'exit 130' INT  # a signal ends the script (the EXIT trap cleans up), not only its current command
trap 'exit 143' TERM
failures=0

fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

# values F.npy: the float32 elements of a .npy (version 1 header) as bit
# patterns in hex, one per line (exact, unlike a decimal print)
values() {
  hl=$(od -A n -t u2 -j 8 -N 2 "$1" | tr -d ' ')
  od -A n -v -t x4 -j $((10 + hl)) "$1" | tr -s ' ' '\n' | sed '/^$/d'
}

# expect_values F.npy "HEX0 HEX1 ..." "what they are": the first elements are exactly these
expect_values() {
  got=$(values "$1" | head -n "$(echo "$2" | wc -w)" | tr '\n' ' ' | sed 's/ $//')
  if [ "$got" != "$2" ]; then
    fail "$1: float32 bits '$got', wanted '$2' ($3)"
  else
    echo "ok: $(basename "$1") = $3"
  fi
}

# expect_ints F.npy "V0 V1 ..." "what they are": the first int32 elements are exactly these
expect_ints() {
  hl=$(od -A n -t u2 -j 8 -N 2 "$1" | tr -d ' ')
  got=$(od -A n -v -t d4 -j $((10 + hl)) "$1" | tr -s ' ' '\n' | sed '/^$/d' | head -n "$(echo "$2" | wc -w)" |
        tr '\n' ' ' | sed 's/ $//')
  if [ "$got" != "$2" ]; then
    fail "$1: int32 values '$got', wanted '$2' ($3)"
  else
    echo "ok: $(basename "$1") = $3"
  fi
}

# expect STATUS MESSAGE ARGS...: fadsl-run ARGS exits with STATUS and says MESSAGE
expect() {
  want=$1 msg=$2
  shift 2
  "$run" "$@" > "$dir/out" 2> "$dir/err"
  status=$?
  if [ "$status" -ne "$want" ] || ! grep -qF -- "$msg" "$dir/err"; then
    fail "fadsl-run $*: status $status, wanted $want and '$msg'"
    cat "$dir/err"
  else
    echo "ok: $(grep -F -m1 -- "$msg" "$dir/err" | cut -c1-150)"
  fi
}

# an output-only buffer of the declared extent, float32 and f16
"$run" "$fa" fill --interpret -D T=f32 --arg n=37 --arg step=0.5 --out out="$dir/x.npy" || fail "fill f32"
expect_values "$dir/x.npy" "00000000 3f000000 3f800000 3fc00000 40000000 40200000" "0 0.5 1 1.5 2 2.5"
[ "$(values "$dir/x.npy" | wc -l)" -eq 37 ] || fail "x.npy does not hold 37 elements"
grep -q "'shape': (37,)" "$dir/x.npy" || fail "x.npy header lacks shape (37,)"
"$run" "$fa" fill --interpret -D T=f16 -D BLOCK=32 --arg n=37 --arg step=0.3333333333 --out out="$dir/y.npy" \
  || fail "fill f16"
# f16 values, written as float32: 1/3 -> 0.333251953125, 2/3 -> 0.66650390625
expect_values "$dir/y.npy" "00000000 3eaaa000 3f2aa000 3f800000" "0 0.333251953125 0.66650390625 1"

# inputs converted to the parameter's dtype; T taken from y.npy when not given
"$run" "$fa" add --interpret -D T=f16 --arg x="$dir/x.npy" --arg y="$dir/y.npy" --arg n=37 \
  --out out="$dir/o.npy" || fail "add f16"
# 0.5 + 0.333251953125 = 0.833251953125, a tie in f16: to even, 0.8330078125
expect_values "$dir/o.npy" "00000000 3f554000 3fd54000 40200000" "0 0.8330078125 1.666015625 2.5"
expect 0 "T = f32, from" "$fa" add --interpret --arg x="$dir/x.npy" --arg y="$dir/y.npy" --arg n=37 \
  --out out="$dir/o32.npy"
expect_values "$dir/o32.npy" "00000000 3f555000 3fd55000 40200000" "0 0.833251953125 1.66650390625 2.5"

# integer division in lanes that where() discards (by zero, MIN // -1) does not
# fault, and // and % are total: x // 0 is 0, x % 0 is x
"$run" "$fa" divide --interpret --arg n=5 --out out="$dir/dq.npy" --out raw="$dir/dr.npy" \
  --out raw2="$dir/dr2.npy" || fail "divide"
expect_ints "$dir/dq.npy" "-524788 -1000 0 1049576 524788" "discarded lanes divide by 0 and -1"
expect_ints "$dir/dr.npy" "-500 -1000 0 1000 500" "1000 // v, v = -2..2"
expect_ints "$dir/dr2.npy" "0 0 1000 0 0" "1000 % v, v = -2..2"

# argument mistakes
expect 1 "missing --arg y=FILE.npy for the pointer parameter 'y'" \
  "$fa" add --interpret -D T=f16 --arg x="$dir/x.npy" --arg n=37 --out out="$dir/o.npy"
expect 1 "missing --arg n=NUMBER for the i32 scalar parameter 'n'" \
  "$fa" add --interpret -D T=f16 --arg x="$dir/x.npy" --arg y="$dir/y.npy"
expect 1 "kernel 'add' has no parameter 'zz'" \
  "$fa" add --interpret -D T=f16 --arg x="$dir/x.npy" --arg y="$dir/y.npy" --arg n=37 --arg zz=1
expect 1 "but 'x' declares the extent [36] = 36 elements" \
  "$fa" add --interpret -D T=f16 --arg x="$dir/x.npy" --arg y="$dir/y.npy" --arg n=36
expect 1 "'n' is a scalar parameter and wants a number" \
  "$fa" add --interpret -D T=f16 --arg x="$dir/x.npy" --arg y="$dir/y.npy" --arg n="$dir/x.npy"
expect 1 "'y' is a pointer parameter and wants a .npy file" \
  "$fa" add --interpret -D T=f16 --arg x="$dir/x.npy" --arg y=3 --arg n=37
expect 1 "the value does not fit" \
  "$fa" add --interpret -D T=f16 --arg x="$dir/x.npy" --arg y="$dir/y.npy" --arg n=99999999999
expect 1 "has no kernel 'nope'" "$fa" nope --interpret
expect 1 "'out' declares no extent, so its size is unknown" \
  "$fa" copy4 --interpret --arg x="$dir/x.npy" --out out="$dir/c.npy"

# bad accesses are located errors, not crashes
line=$(grep -n 'a = load(x + offs)' "$fa" | cut -d: -f1)
expect 1 "fill.fa:$line:9: error: load out of bounds of buffer 'x' (element 37, size 37)" \
  "$fa" overread --interpret --arg x="$dir/x.npy" --arg n=37 --out out="$dir/o.npy"
expect 1 "in program (2, 0, 0) of kernel 'overread'" \
  "$fa" overread --interpret --arg x="$dir/x.npy" --arg n=37 --out out="$dir/o.npy"
"$run" "$fa" fill --interpret -D T=f32 -D BLOCK=2 --arg n=3 --arg step=1 --out out="$dir/x3.npy" || fail "fill 3"
expect 1 "load out of bounds of buffer 'x' (element 3, size 3)" \
  "$fa" copy4 --interpret --arg x="$dir/x3.npy" --arg out="$dir/x.npy"

# files that cannot be read are named with what is wrong, also when T was to
# be inferred from them (no -D T)
printf 'hello, world\n' > "$dir/text.npy"
head -c 100 "$dir/y.npy" > "$dir/short-header.npy"
head -c 150 "$dir/x.npy" > "$dir/short-data.npy"
for bad in "missing.npy: No such file or directory" "text.npy: not a .npy file" \
           "short-header.npy: truncated .npy file (100 bytes" \
           "short-data.npy: truncated .npy file: holds 22 bytes of data"; do
  f=${bad%%:*}
  expect 1 "fadsl-run: --arg y: $dir/$bad" "$fa" add --interpret --arg x="$dir/x.npy" --arg y="$dir/$f" \
    --arg n=37 --out out="$dir/o.npy"
  if grep -q "needs a value for constexpr" "$dir/err"; then fail "$f is reported as a missing constexpr"; fi
  expect 1 "fadsl-run: --arg x: $dir/$bad" "$fa" add --interpret -D T=f32 --arg x="$dir/$f" --arg y="$dir/y.npy" \
    --arg n=37 --out out="$dir/o.npy"
done

# shapes, not only element counts: a [4, 5] file holds an extent [4, 5],
# [2, 2, 5] (an axis split) or [20, 1, 1] (merged), not [5, 2, 2] or [5, 4, 1]
"$run" "$fa" iota2 --interpret --arg r=4 --arg c=5 --out out="$dir/m45.npy" 2> /dev/null || fail "iota2"
grep -q "'shape': (4, 5)" "$dir/m45.npy" || fail "m45.npy header lacks shape (4, 5)"
for abc in "4 5 1" "2 2 5" "20 1 1" "1 4 5"; do
  set -- $abc
  "$run" "$fa" copy3 --interpret --arg x="$dir/m45.npy" --arg a="$1" --arg b="$2" --arg c="$3" \
    --out out="$dir/c3.npy" 2> "$dir/err" && echo "ok: a [4, 5] file for the extent [$abc]" ||
    { fail "a [4, 5] file refused for the extent [$abc]"; cat "$dir/err"; }
done
expect 1 "--arg x=$dir/m45.npy: the file's shape [4, 5] is not the extent [5, 2, 2] that 'x' declares: the same 20 elements" \
  "$fa" copy3 --interpret --arg x="$dir/m45.npy" --arg a=5 --arg b=2 --arg c=2 --out out="$dir/c3.npy"
expect 1 "the file's shape [4, 5] is not the extent [5, 4, 1]" \
  "$fa" copy3 --interpret --arg x="$dir/m45.npy" --arg a=5 --arg b=4 --arg c=1 --out out="$dir/c3.npy"

# the same name twice is refused
expect 2 "fadsl-run: --arg n is given twice (the second time as --arg n=38)" \
  "$fa" add --interpret -D T=f16 --arg x="$dir/x.npy" --arg y="$dir/y.npy" --arg n=37 --arg n=38
expect 2 "fadsl-run: --out out is given twice" \
  "$fa" fill --interpret -D T=f32 --arg n=37 --arg step=1 --out out="$dir/a.npy" --out out="$dir/b.npy"
expect 2 "fadsl-run: -D T is given twice" "$fa" fill --interpret -D T=f32 -D T=f16 --arg n=37 --arg step=1
expect 1 "the constexpr 'T' is given twice (-D T and --arg T)" \
  "$fa" fill --interpret -D T=f32 --arg T=f16 --arg n=37 --arg step=1 --out out="$dir/a.npy"

# the interpreter runs the @autotune default point (the first the prune
# accepts), as a GPU launch does, and says so
expect 0 "fadsl-run: tiles on the interpreter [BLOCK=16] warps=2 stages=3 (default), grid (3, 1, 1)" \
  "$fa" tiles --interpret --arg n=40 --out out="$dir/t.npy"
expect_ints "$dir/t.npy" "16 16 16" "BLOCK=16 ran"
expect 0 "[BLOCK=32] warps=2 stages=3 (explicit+default), grid (2, 1, 1)" \
  "$fa" tiles --interpret -D BLOCK=32 --arg n=40 --out out="$dir/t.npy"
expect 0 "[BLOCK=8] warps=8 stages=1 (explicit), grid (5, 1, 1)" \
  "$fa" tiles --interpret -D BLOCK=8 --warps 8 --stages 1 --arg n=40 --out out="$dir/t.npy"

# no point passes the prune with warps=4 given: the first values run, as a
# launch runs them, with a warning at the prune
expect 0 "warning: no point of the @autotune space of kernel 'tiles' passes its prune with warps=4 given; running the first values" \
  "$fa" tiles --interpret --warps 4 --arg n=40 --out out="$dir/t.npy"
expect 0 "[BLOCK=8] warps=4 stages=3 (explicit+default), grid (5, 1, 1)" \
  "$fa" tiles --interpret --warps 4 --arg n=40 --out out="$dir/t.npy"
expect_ints "$dir/t.npy" "8 8 8" "BLOCK=8 ran"
# a configuration axis takes the values its table row allows
expect 2 "fadsl-run: --warps must be a power of two from 1 to 32, not '3'" "$fa" tiles --interpret --warps 3 --arg n=40
# the named axes take their names, as --help says, and their numbers
expect 0 "[BLOCK=16] warps=2 stages=3 pipeline=tma_ws (explicit+default)" \
  "$fa" tiles --interpret --pipeline tma_ws --arg n=40 --out out="$dir/t.npy"
expect 0 "[BLOCK=16] warps=2 stages=3 schedule=persistent (explicit+default)" \
  "$fa" tiles --interpret --schedule 2 --arg n=40 --out out="$dir/t.npy"
expect 2 "fadsl-run: --pipeline must be one of cp_async, tma, tma_async, tma_ws, tma_ws_pp (1 to 5), not 'tma_wss'" \
  "$fa" tiles --interpret --pipeline tma_wss --arg n=40

# buffers made for --out start zero-filled; --poison fills float ones with NaN
# bytes (integers stay zero): the same contents as on the GPU
# (tests/attention-fake-driver.sh checks the GPU side)
"$run" "$fa" nothing --interpret --arg n=3 --out out="$dir/z.npy" --out outi="$dir/zi.npy" 2> /dev/null ||
  fail "nothing"
expect_values "$dir/z.npy" "00000000 00000000 00000000" "zeros"
expect_ints "$dir/zi.npy" "0 0 0" "zeros"
"$run" "$fa" nothing --interpret --poison --arg n=3 --out out="$dir/p.npy" --out outi="$dir/pi.npy" 2> /dev/null ||
  fail "nothing --poison"
expect_values "$dir/p.npy" "ffffffff ffffffff ffffffff" "NaN bytes"
expect_ints "$dir/pi.npy" "0 0 0" "zeros"

# usage
expect 2 "--grid is for --interpret" "$fa" add --gpu -D T=f16 --grid 2
# --gpu where there is no GPU: a clean failure naming the cause (tests/gpu-attention.sh runs it on one)
"$run" "$fa" fill --gpu -D T=f32 --arg n=37 --arg step=0.5 --out out="$dir/g.npy" > "$dir/out" 2> "$dir/err"
status=$?
if grep -q "no GPU:" "$dir/err"; then
  [ "$status" -eq 1 ] && echo "ok: --gpu without a GPU: $(cut -c1-100 "$dir/err")" || fail "--gpu without a GPU: status $status"
elif [ "$status" -eq 0 ]; then
  expect_values "$dir/g.npy" "00000000 3f000000 3f800000 3fc00000 40000000 40200000" "0 0.5 1 1.5 2 2.5 (GPU)"
else
  fail "fadsl-run --gpu fill: status $status"
  cat "$dir/err"
fi
expect 2 "choose one of --interpret and --gpu" "$fa" add
expect 2 "unknown option" "$fa" add --interpret --frobnicate

echo "$failures failure(s)"
[ "$failures" -eq 0 ]
