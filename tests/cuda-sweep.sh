#!/bin/sh
# cuda-sweep.sh - every kernel of examples/attention/attention.fa, for every
# head dimension 16..256, emitted and compiled by NVRTC for sm_80 and sm_90a
# (tests/cuda_sweep.c).  Quick by default (each kernel once per D and
# architecture, configurations rotating); FADSL_SWEEP=space compiles every
# configuration of every space (dtype and causal rotating; CI does this);
# FADSL_FULL_SWEEP=1 compiles the
# whole @autotune space for f16 and bf16, causal and not.
srcdir=${srcdir:-$(dirname "$0")/..}
exec ./tests/cuda_sweep "$srcdir"
