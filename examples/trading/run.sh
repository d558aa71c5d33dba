#!/bin/sh
# run.sh [N...] - the trading-day experiment on a CUDA GPU, one command:
#
#   sh examples/trading/run.sh                 # N = 512, 4096 and 23400
#   sh examples/trading/run.sh 23400           # one length (each takes minutes)
#
# From the repository root, on a machine with torch and a CUDA device.  The C
# libraries come from $FADSL_LIB_DIR, else from the build tree in ./build
# (built by scripts/bootstrap.sh when missing); the package is used from
# python/ in place.  Results: trading-N.json and trading-N.md in
# $TRADING_RESULTS (default examples/trading/results); extra options for
# trading.py in $TRADING_OPTS.  Exits 77 where torch sees no CUDA device.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
py=${PYTHON:-python3}
if ! "$py" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  echo "trading: SKIP: no CUDA device visible to torch ($py)"
  exit 77
fi
if [ -z "${FADSL_LIB_DIR:-}" ]; then
  build=${FADSL_BUILD_DIR:-$top/build}
  if [ ! -f "$build/examples/attention/.libs/libfadsl_attention.so.0" ]; then
    FADSL_BUILD_DIR=$build sh "$top/scripts/bootstrap.sh" || { echo "trading: building the libraries failed"; exit 1; }
  fi
  FADSL_LIB_DIR=$build/runtime/.libs:$build/examples/attention/.libs
fi
export FADSL_LIB_DIR PYTHONUNBUFFERED=1
export PYTHONPATH=$top/python${PYTHONPATH:+:$PYTHONPATH}
outdir=${TRADING_RESULTS:-$top/examples/trading/results}
mkdir -p "$outdir"
[ $# -gt 0 ] || set -- 512 4096 23400
status=0
for n in "$@"; do
  # shellcheck disable=SC2086
  "$py" "$top/examples/trading/trading.py" --lengths "$n" --out "$outdir/trading-$n.json" ${TRADING_OPTS:-} || status=1
done
exit $status
