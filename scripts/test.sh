#!/bin/sh
# Sets up a fresh machine if needed, builds, and runs every test:
#   make check               (normal build, in ./build; every autotune configuration compiled)
#   make installcheck        (normal build, installed into ./build/stage: programs built
#                             against it with pkg-config, as docs/runtime.md shows)
#   pytest python/tests      (the Python package, pip-installed into build/pyvenv)
#   make check               (ASan + UBSan build, in ./build-san; skip with FADSL_NO_SANITIZERS=1)
# Prints one closing line "tests: N passed, N failed, N skipped" and exits
# non-zero when any test failed.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
jobs=$(nproc 2>/dev/null || echo 2)
status=0
pass=0; fail=0; skip=0

count() {  # adds the counts of one test-suite.log summary
  log="$1"
  [ -f "$log" ] || return 0
  p=$(sed -n 's/^# PASS: *\([0-9]*\).*/\1/p' "$log" | head -n1)
  f=$(sed -n 's/^# FAIL: *\([0-9]*\).*/\1/p' "$log" | head -n1)
  e=$(sed -n 's/^# ERROR: *\([0-9]*\).*/\1/p' "$log" | head -n1)
  x=$(sed -n 's/^# XPASS: *\([0-9]*\).*/\1/p' "$log" | head -n1)
  s=$(sed -n 's/^# SKIP: *\([0-9]*\).*/\1/p' "$log" | head -n1)
  pass=$((pass + ${p:-0})); fail=$((fail + ${f:-0} + ${e:-0} + ${x:-0})); skip=$((skip + ${s:-0}))
}

run_suite() {  # run_suite BUILD_DIR CONFIGURE_FLAGS
  dir="$1"; flags="$2"
  FADSL_BUILD_DIR="$dir" FADSL_CONFIGURE_FLAGS="$flags" sh "$top/scripts/bootstrap.sh" || { status=1; fail=$((fail + 1)); return; }
  (cd "$dir" && make -j"$jobs" check) || status=1
  # test logs are named after the tests; the summary is in test-suite.log
  if [ -f "$dir/test-suite.log" ]; then
    count "$dir/test-suite.log"
    grep -q '^# FAIL: *[1-9]\|^# ERROR: *[1-9]' "$dir/test-suite.log" && cat "$dir/test-suite.log"
  fi
}

# The normal build also compiles every configuration of attention.fa's
# autotune spaces with NVRTC (tests/cuda-sweep.sh); the sanitizer build keeps
# the quick rotation, since the compiler under test there is the same.
FADSL_SWEEP=${FADSL_SWEEP:-space}
export FADSL_SWEEP
run_suite "$top/build" ""
stage="$top/build/stage"
rm -rf "$stage"
if (cd "$top/build" && make install DESTDIR="$stage" > install.log 2>&1 && make installcheck DESTDIR="$stage"); then
  pass=$((pass + 1))
else
  echo "installcheck FAILED (install log: build/install.log)"
  fail=$((fail + 1)); status=1
fi
# The Python package: installed with pip from python/ into a virtual
# environment in build/ (libraries from ./build; numpy, pytest and ml_dtypes
# from PyPI), then its pytest suite: the interpreter path against float64,
# errors, kernels through fadsl.load, and an install from a clean clone into a
# fresh environment (torch and GPU tests report themselves skipped here).
run_python() {
  py=$(command -v python3 || true)
  if [ -n "$py" ] && ! "$py" -c 'import venv, ensurepip' 2>/dev/null && command -v apt-get >/dev/null 2>&1 &&
     [ "$(id -u)" -eq 0 ]; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3-venv > /dev/null 2>&1
  fi
  if [ -z "$py" ] || ! "$py" -c 'import venv, ensurepip' 2>/dev/null; then
    echo "python: SKIP (no python3 with venv and ensurepip)"; skip=$((skip + 1)); return
  fi
  venv=$top/build/pyvenv
  log=$top/build/python-tests.log
  [ -x "$venv/bin/python" ] || "$py" -m venv "$venv" || { fail=$((fail + 1)); status=1; return; }
  if ! { "$venv/bin/python" -m pip install -q --upgrade numpy pytest ml_dtypes &&
         FADSL_BUILD_DIR=$top/build "$venv/bin/python" -m pip install -q --force-reinstall --no-deps "$top/python"; } \
       > "$top/build/python-install.log" 2>&1; then
    cat "$top/build/python-install.log"; echo "python: installing the package FAILED"
    fail=$((fail + 1)); status=1; return
  fi
  (cd "$top/python/tests" && "$venv/bin/python" -m pytest -q -rs -p no:cacheprovider .) > "$log" 2>&1
  rc=$?
  summary=$(grep -E '(passed|failed|error|skipped).* in [0-9.]+s' "$log" | tail -n1)
  [ -n "$summary" ] || summary=$(tail -n1 "$log")
  p=$(echo " $summary" | sed -n 's/.*[^0-9]\([0-9][0-9]*\) passed.*/\1/p')
  f=$(echo " $summary" | sed -n 's/.*[^0-9]\([0-9][0-9]*\) failed.*/\1/p')
  e=$(echo " $summary" | sed -n 's/.*[^0-9]\([0-9][0-9]*\) error.*/\1/p')
  s=$(echo " $summary" | sed -n 's/.*[^0-9]\([0-9][0-9]*\) skipped.*/\1/p')
  echo "python: $summary"
  pass=$((pass + ${p:-0})); fail=$((fail + ${f:-0} + ${e:-0})); skip=$((skip + ${s:-0}))
  if [ "$rc" -ne 0 ]; then
    cat "$log"; status=1
    [ -n "$p$f$e" ] || fail=$((fail + 1))   # pytest did not get to run the tests
  fi
}
run_python
if [ "${FADSL_NO_SANITIZERS:-0}" != 1 ]; then
  FADSL_SWEEP=quick
  # LeakSanitizer's tracking of dynamic TLS through __tls_get_addr breaks on
  # NVRTC's threads here (its tracer faults on a bogus DTLS block at exit, for
  # some kernels every time): leaks are still checked, TLS blocks are found
  # without the interception
  LSAN_OPTIONS="${LSAN_OPTIONS:+$LSAN_OPTIONS:}intercept_tls_get_addr=0"
  export LSAN_OPTIONS
  run_suite "$top/build-san" "--enable-sanitizers"
fi
echo "tests: $pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ] || status=1
exit $status
