#!/bin/sh
# attn-resources.sh - the default configuration of every kernel of
# examples/attention/attention.fa (forward, and both backward passes) at head
# dimensions 64, 128 and 256, compiled by NVRTC for sm_80 and sm_90a; the
# cubin's resources are read and a spill fails (tests/attn_resources.c).
# Arguments name kernels to limit it to.  SKIP (77) without NVRTC.
srcdir=${srcdir:-$(dirname "$0")/..}
exec ./tests/attn_resources "$srcdir" "$@"
