#!/bin/sh
# cuda-sweep.sh - every kernel of examples/attention/attention.fa, for every
# head dimension 16..256, emitted and compiled by NVRTC for sm_80 and sm_90a
# (tests/cuda_sweep.c).  Quick by default (each kernel once per D and
# architecture, configurations rotating); FADSL_SWEEP=space compiles every
# configuration of every space (dtype and causal rotating; CI does this);
# FADSL_FULL_SWEEP=1 compiles the
# whole @autotune space for f16 and bf16, causal and not.  In every mode it
# also compiles each Hopper pipeline choice (FADSL_PIPELINE: tma, tma_async,
# tma_ws, tma_ws_pp) on sm_90a for the kernels with products at D = 64, 128,
# 256 and for tests/gpu/hopper.fa, each held to its cp_async twin (no more
# spills or ptxas performance notes, at most 227 KB of shared memory).
srcdir=${srcdir:-$(dirname "$0")/..}
exec ./tests/cuda_sweep "$srcdir"
