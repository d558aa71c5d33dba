#!/bin/sh
# Installs what a fresh Debian machine lacks (the build's tools and libraries,
# and NumPy for the tutorial), then configures and builds fadsl in ./build (or
# $FADSL_BUILD_DIR).  Safe to run again: it only rebuilds.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
build=${FADSL_BUILD_DIR:-$top/build}

need=""
command -v flex >/dev/null 2>&1 || need="$need flex"
command -v bison >/dev/null 2>&1 || need="$need bison"
command -v autoreconf >/dev/null 2>&1 || need="$need autoconf"
command -v automake >/dev/null 2>&1 || need="$need automake"
command -v libtoolize >/dev/null 2>&1 || need="$need libtool"
command -v pkg-config >/dev/null 2>&1 || need="$need pkg-config"
command -v make >/dev/null 2>&1 || need="$need make"
command -v cc >/dev/null 2>&1 || need="$need gcc"
if command -v pkg-config >/dev/null 2>&1; then
  pkg-config --exists check || need="$need check"
  pkg-config --exists jansson || need="$need libjansson-dev"
else
  need="$need check libjansson-dev"
fi
if [ -n "$need" ]; then
  if command -v apt-get >/dev/null 2>&1; then
    echo "bootstrap: installing:$need"
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO=sudo
    $SUDO apt-get update
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends $need
  else
    echo "bootstrap: missing:$need (install them and run again)" >&2
    exit 1
  fi
fi

# The tutorial (docs/tutorial.md) makes its inputs and reads its outputs with
# NumPy; the build and the tests do not need it, so failing to install it is
# only a note.
has_numpy() { "$1" -c 'import numpy' >/dev/null 2>&1; }
numpy_note() {
  if has_numpy python3; then
    return 0
  elif [ -x /usr/bin/python3 ] && has_numpy /usr/bin/python3; then
    echo "bootstrap: note: the python3 on PATH ($(command -v python3)) has no NumPy, /usr/bin/python3 has;" \
      "run the tutorial's commands with /usr/bin/python3, or python3 -m pip install numpy" >&2
  else
    echo "bootstrap: note: the tutorial needs NumPy: python3 -m pip install numpy" >&2
  fi
}
if ! has_numpy python3 && ! { [ -x /usr/bin/python3 ] && has_numpy /usr/bin/python3; } &&
   command -v apt-get >/dev/null 2>&1; then
  echo "bootstrap: installing: python3-numpy (for the tutorial)"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO=sudo
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends python3-numpy ||
    { $SUDO apt-get update && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends \
        python3-numpy; } || true
fi
numpy_note

cd "$top"
if [ ! -x configure ] || [ configure.ac -nt configure ]; then
  autoreconf -fi
fi
mkdir -p "$build"
cd "$build"
if [ ! -f Makefile ]; then
  "$top/configure" ${FADSL_CONFIGURE_FLAGS:-}
fi
make -j"$(nproc 2>/dev/null || echo 2)"
