/* gpu_codegen.c - runs small kernels on the GPU (through libfadsl) and on the
 * CPU interpreter, from the same random inputs, and compares every buffer
 * afterwards.  It checks the CUDA backend: layouts, masks, boundary checks,
 * reductions, scans, tensor-core and FMA products, atomics, loops, random
 * numbers; and the attention kernels on small shapes.
 *
 * usage: gpu_codegen SRCDIR [FILTER]
 *        gpu_codegen SRCDIR --compile [FILTER]   no GPU needed: the kernels of
 *            tests/gpu/codegen.fa emitted (the variant a launch with the case's
 *            scalars runs: their divisibility facts) and compiled by NVRTC for
 *            sm_80 and sm_90a (one case per kernel; FADSL_CODEGEN_COMPILE=all:
 *            every case); a compile error or an NVRTC warning fails
 * Exit status: 0 all cases passed, 1 some failed, 77 no GPU (no NVRTC) (skipped).
 * FADSL_TEST_SEED=N reproduces a run's inputs.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <time.h>

#include "../compiler/cuda_backend.h"
#include "ast.h"
#include "cuda_plan.h"
#include "cuda_loader.h"
#include "fadsl.h"
#include "interp.h"
#include "nvrtc_compile.h"
#include "sema.h"

typedef struct Case {
  const char *file;        /* relative to SRCDIR */
  const char *kernel;
  const char *constexprs;  /* NAME=VALUE ... */
  const char *scalars;     /* NAME=VALUE ... (runtime scalar parameters) */
  int warps, stages;
  const char *init;        /* NAME=LO:HI ...: uniform inputs of a buffer (default -2:2) */
  double rtol, atol;       /* per element: |gpu - cpu| <= atol + rtol * |cpu| */
} Case;

#define CG "tests/gpu/codegen.fa"
#define HOP "tests/gpu/hopper.fa"
#define ATT "examples/attention/attention.fa"
#define MM "examples/matmul/matmul.fa"

static const Case cases[] = {
    /* elementwise: f16/bf16 results are compared to one ulp and a little
       (exp2 / log2 are approximate on the GPU) */
    {CG, "ew", "T=f32 BLOCK=128", "n=1000", 4, 2, NULL, 2e-5, 1e-5},
    {CG, "ew", "T=f16 BLOCK=256", "n=777", 4, 2, NULL, 2e-3, 1e-3},
    {CG, "ew", "T=bf16 BLOCK=64", "n=333", 2, 2, NULL, 1e-2, 1e-2},
    {CG, "ew", "T=f16 BLOCK=16", "n=50", 4, 2, NULL, 2e-3, 1e-3},
    /* tanh_approx: the hardware's relative error (about 2^-11), plus f16's half ulp */
    {CG, "approx", "T=f32 BLOCK=128", "n=1000", 4, 2, NULL, 1e-3, 1e-6},
    {CG, "approx", "T=f16 BLOCK=64", "n=333", 4, 2, NULL, 2e-3, 1e-6},
    {CG, "ints", "BLOCK=128", "n=1001", 4, 2, "x=-100000:100000", 0, 0},
    {CG, "ints", "BLOCK=1024", "n=5000", 8, 2, "x=-100000:100000", 0, 0},
    {CG, "divs", "BLOCK=128", "n=1000", 4, 2, "x=-3:3", 0, 0},
    /* reductions: rows split over lanes, warps and registers */
    {CG, "red", "N=64 T=f16 BM=32", "M=77 P=3", 4, 2, NULL, 1e-5, 1e-5},
    {CG, "red", "N=16 T=f32 BM=128", "M=300 P=3", 8, 2, NULL, 1e-5, 1e-5},
    {CG, "red", "N=256 T=bf16 BM=4", "M=10 P=3", 4, 2, NULL, 1e-5, 1e-5},
    {CG, "red", "N=8 T=f32 BM=8", "M=20 P=3", 1, 2, NULL, 1e-5, 1e-5},
    {CG, "red", "N=128 T=f32 BM=2", "M=5 P=3", 8, 2, NULL, 1e-5, 1e-5},
    /* products through the tensor cores (f32 accumulation in another order:
       compared with a tolerance relative to the sum of |products|) */
    {CG, "mm", "T=f16 BM=64 BN=64 BK=32 TRANS_B=False ACC=True", "M=100 N=90 K=70", 4, 2, NULL, 1e-3, 2e-3},
    {CG, "mm", "T=f16 BM=64 BN=64 BK=32 TRANS_B=True ACC=False", "M=100 N=90 K=70", 4, 2, NULL, 1e-3, 2e-3},
    {CG, "mm", "T=bf16 BM=32 BN=128 BK=64 TRANS_B=True ACC=False", "M=64 N=200 K=130", 8, 2, NULL, 1e-2, 1e-2},
    {CG, "mm", "T=f16 BM=128 BN=32 BK=16 TRANS_B=False ACC=True", "M=129 N=33 K=48", 8, 2, NULL, 1e-3, 2e-3},
    {CG, "mm", "T=f16 BM=16 BN=16 BK=16 TRANS_B=False ACC=False", "M=40 N=40 K=40", 4, 2, NULL, 1e-3, 2e-3},
    {CG, "mm", "T=f16 BM=64 BN=32 BK=32 TRANS_B=True ACC=True", "M=70 N=50 K=300", 4, 4, NULL, 1e-3, 2e-3},
    {CG, "mm", "T=bf16 BM=64 BN=64 BK=64 TRANS_B=False ACC=False", "M=64 N=64 K=1000", 4, 3, NULL, 1e-2, 1e-2},
    {CG, "mm", "T=f32 BM=32 BN=32 BK=16 TRANS_B=True ACC=True", "M=50 N=45 K=20", 4, 2, NULL, 1e-5, 1e-5},
    /* shapes of the warpgroup products on sm_90a (wgmma): two 64-row blocks per
       warp, n256, rows of 32 and 64 bytes (32B and 64B swizzles), 8 warps */
    {CG, "mm", "T=f16 BM=128 BN=256 BK=16 TRANS_B=False ACC=True", "M=130 N=260 K=50", 4, 2, NULL, 1e-3, 2e-3},
    {CG, "mm", "T=bf16 BM=64 BN=16 BK=32 TRANS_B=False ACC=False", "M=70 N=40 K=100", 4, 2, NULL, 1e-2, 1e-2},
    {CG, "mm", "T=f16 BM=128 BN=64 BK=64 TRANS_B=True ACC=True", "M=200 N=100 K=150", 8, 3, NULL, 1e-3, 2e-3},
    {CG, "mm", "T=bf16 BM=64 BN=128 BK=32 TRANS_B=True ACC=False", "M=64 N=128 K=96", 4, 2, NULL, 1e-2, 1e-2},
    {CG, "mmt", "T=f16 BM=64 BN=64 BK=32", "M=100 N=70 K=90", 4, 2, NULL, 1e-3, 2e-3},
    {CG, "mmt", "T=bf16 BM=128 BN=32 BK=16", "M=150 N=40 K=64", 8, 2, NULL, 1e-2, 1e-2},
    {CG, "chain", "T=f16 BM=128 BN=64 BK=32 BD=128", "", 4, 2, "a=-1:1 b=-1:1", 2e-3, 2e-3},
    {CG, "chain", "T=f16 BM=64 BN=64 BK=32 BD=64", "", 4, 2, "a=-1:1 b=-1:1", 2e-3, 2e-3},
    {CG, "chain", "T=bf16 BM=128 BN=32 BK=64 BD=16", "", 8, 2, "a=-1:1 b=-1:1", 1e-2, 1e-2},
    /* block pointers at every edge */
    {CG, "edges", "T=f16 BM=32 BN=64", "M=70 N=100", 4, 2, NULL, 0, 0},
    {CG, "edges", "T=f32 BM=16 BN=8", "M=33 N=17", 2, 2, NULL, 0, 0},
    {CG, "edges", "T=bf16 BM=64 BN=128", "M=64 N=128", 8, 2, NULL, 0, 0},
    /* atomics: the order of additions differs */
    {CG, "atomics", "BLOCK=256", "n=3000", 4, 2, NULL, 1e-5, 1e-5},
    {CG, "atomics", "BLOCK=32", "n=100", 4, 2, NULL, 1e-5, 1e-5},
    /* atomic_add through block pointers: clipped tiles, scalar reductions (N odd),
       v4.f32 vectors on sm_90 (N a multiple of 16), f16 and bf16 (CAS below sm_90) */
    {CG, "block_atomics", "T=f16 BM=32 BN=64", "M=70 N=100 P=3", 4, 2, NULL, 2e-3, 2e-3},
    {CG, "block_atomics", "T=bf16 BM=16 BN=128", "M=64 N=128 P=2", 4, 2, NULL, 1e-2, 1e-2},
    {CG, "block_atomics", "T=f32 BM=64 BN=32", "M=130 N=48 P=4", 8, 2, NULL, 1e-5, 1e-5},
    /* rows a multiple of 16 elements: with the Hopper pipelines, f32 and f16 bulk reduce-adds */
    {CG, "block_atomics", "T=f16 BM=32 BN=64", "M=70 N=96 P=3", 4, 2, NULL, 2e-3, 2e-3},
    {CG, "loops", "BM=32 BN=64", "M=70 N=300", 4, 2, NULL, 1e-5, 1e-5},
    {CG, "loops", "BM=4 BN=128", "M=9 N=129", 1, 2, NULL, 1e-5, 1e-5},
    /* an online softmax whose rescale is skipped where its factors are 1 */
    {CG, "online", "D=64 T=f16 BM=64 BN=32", "M=100 N=1000", 4, 2, "x=-20:20 v=-1:1", 2e-3, 2e-3},
    {CG, "online", "D=128 T=bf16 BM=32 BN=64", "M=45 N=333", 4, 2, "x=-20:20 v=-1:1", 1e-2, 1e-2},
    /* erf (2 ulp on the GPU, about 1 in the C library), fma (one rounding on both)
       and clamp */
    {CG, "mathx", "T=f32 BLOCK=128", "n=1000", 4, 2, NULL, 3e-7, 3e-7},
    {CG, "mathx", "T=f16 BLOCK=256", "n=777", 4, 2, NULL, 1e-3, 1e-3},
    {CG, "mathx", "T=bf16 BLOCK=64", "n=333", 2, 2, NULL, 1e-2, 1e-2},
    /* scans along axes held by registers, lanes and warps (f32 sums in another
       order) */
    {CG, "scans", "N=32 BM=16", "M=50", 4, 2, NULL, 1e-5, 1e-4},
    {CG, "scans", "N=128 BM=4", "M=9", 8, 2, NULL, 1e-5, 1e-4},
    {CG, "scans", "N=8 BM=64", "M=100", 2, 2, NULL, 1e-5, 1e-4},
    {CG, "scans", "N=256 BM=1", "M=3", 4, 2, NULL, 1e-5, 2e-4},
    /* argmax / argmin with ties and NaNs: the same indices */
    {CG, "argx", "T=f32 BM=16 N=64", "", 4, 2, NULL, 0, 0},
    {CG, "argx", "T=f16 BM=64 N=32", "", 8, 2, NULL, 0, 0},
    {CG, "argx", "T=bf16 BM=2 N=256", "", 4, 2, NULL, 0, 0},
    /* reduce with combine functions, xor_sum, max(return_indices=True): exact */
    {CG, "reducefn", "BM=16 N=64", "", 4, 2, "k=-100000:100000", 0, 0},
    {CG, "reducefn", "BM=128 N=8", "", 8, 2, "k=-100000:100000", 0, 0},
    {CG, "reducefn", "BM=2 N=512", "", 4, 2, "k=-100000:100000", 0, 0},
    /* rand: the same bits; randn: logf and cosf of the GPU */
    {CG, "philox", "BLOCK=256", "n=3000 seed=1234 p=0.3", 4, 2, NULL, 0, 0},
    {CG, "philox", "BLOCK=64", "n=100 seed=-7 p=0.5", 2, 2, NULL, 0, 0},
    {CG, "gauss", "BLOCK=128", "n=5000 seed=42", 4, 2, NULL, 1e-5, 2e-6},
    /* early returns, while, static_range */
    {CG, "control", "BLOCK=128 NP=16", "n=1000 k=5 lo=0.25", 4, 2, "x=-5:5", 1e-6, 1e-6},
    {CG, "control", "BLOCK=64 NP=32", "n=700 k=-1 lo=0.25", 2, 2, "x=-5:5", 1e-6, 1e-6},
    {CG, "control", "BLOCK=256 NP=8", "n=1000 k=200 lo=-0.5", 8, 2, "x=-5:5", 1e-6, 1e-6},
    {CG, "mmw", "T=f16 BM=64 BN=64 BK=32", "M=100 N=90 K=70", 4, 2, NULL, 1e-3, 2e-3},
    {CG, "mmw", "T=f32 BM=32 BN=32 BK=16", "M=50 N=45 K=20", 4, 2, NULL, 1e-5, 1e-5},
    {CG, "returns", "", "lim=1", 1, 2, NULL, 0, 0},
    {CG, "returns", "", "lim=0", 2, 2, NULL, 0, 0},
    /* @, reshape, 3-D permute, trans with dims, methods */
    {CG, "shapes", "T=f16 BM=32 BN=32 BK=32", "", 4, 2, "a=-1:1 b=-1:1", 1e-3, 2e-3},
    {CG, "shapes", "T=f32 BM=16 BN=64 BK=16", "", 4, 2, "a=-1:1 b=-1:1", 1e-5, 1e-5},
    /* device_print (the lines go to standard output) */
    {CG, "printer", "", "", 1, 2, "x=-100:100", 0, 0},
    /* views the Hopper pipelines copy with the bulk copy engine (with
       FADSL_PIPELINE=tma or later on sm_90a): K and N blocks reaching past
       the matrices (zero and NaN fill), a [B, H, N, D] tensor's merged outer
       coordinate and its transposed view */
    {HOP, "kmm", "K=200 N=96 T=f16 BM=128 BN=64 BK=64 NAN_PAD=False", "M=300", 4, 2, "a=-1:1 b=-1:1", 1e-3, 2e-3},
    {HOP, "kmm", "K=200 N=96 T=bf16 BM=64 BN=64 BK=32 NAN_PAD=False", "M=70", 4, 3, "a=-1:1 b=-1:1", 1e-2, 1e-2},
    {HOP, "kmm", "K=256 N=128 T=f16 BM=128 BN=128 BK=64 NAN_PAD=True", "M=130", 8, 2, "a=-1:1 b=-1:1", 1e-3, 2e-3},
    {HOP, "kmm", "K=200 N=64 T=f16 BM=64 BN=64 BK=64 NAN_PAD=True", "M=64", 4, 2, "a=-1:1 b=-1:1", 1e-3, 2e-3},
    /* (X X^T is rounded to T before it meets V, so its entries must stay
       small: with x in [-0.5, 0.5] the diagonal |x_i|^2 was about 5, where
       one f16 step is 2^-8, and the GPU's and the interpreter's f32 sums
       rounded one of them apart for some inputs (seed 1796177205, with
       every pipeline and the code of before: 6 elements of O off by 3.4e-3).
       In [-0.125, 0.125] it is about 0.3 (f16 step 2^-12), and 0.7 at
       D=128 (bf16 step 2^-8): a step flipped stays within the tolerances.) */
    {HOP, "heads", "D=64 T=f16 BN=128 BK=64", "B=2 H=3 N=200", 4, 2, "x=-0.125:0.125 v=-1:1", 2e-3, 2e-3},
    {HOP, "heads", "D=128 T=bf16 BN=64 BK=32", "B=1 H=2 N=77", 4, 3, "x=-0.125:0.125 v=-1:1", 1e-2, 1e-2},
    /* bulk reduce-adds (and stores) in a loop, from several programs onto
       the same rows of a [Z, N, D] tensor, the last block cut at N: N = 208
       (a multiple of 16: S^T's store is a bulk copy too, from a staging
       tile of its own) and N = 150 (S^T's rows not 16-byte multiples: plain
       stores); S^T is rounded to T before its product, so q stays small
       (as in heads) for a rounding step flipped to stay within the
       tolerances */
    {HOP, "accum", "D=64 T=f16 BQ=64 BK=64", "Z=2 N=208", 4, 2, "q=-0.125:0.125 k=-1:1", 2e-3, 2e-3},
    {HOP, "accum", "D=128 T=bf16 BQ=64 BK=128", "Z=1 N=150", 8, 2, "q=-0.125:0.125 k=-1:1", 1e-2, 1e-2},
    /* ring vectors: a 1-D block used in registers rides the loop's ring of
       bulk copies (K = 200: rows of 16-byte multiples, the last block cut
       at K), or keeps its own loads (K = 198, f16: the ring is cp.async) */
    {HOP, "vring", "N=64 T=f16 V=f32 BM=64 BK=64", "M=130 K=200 Z=3 z=2", 4, 2, "a=-1:1 b=-1:1", 1e-3, 2e-3},
    {HOP, "vring", "N=128 T=bf16 V=f16 BM=128 BK=64", "M=300 K=200 Z=2 z=1", 8, 3, "a=-1:1 b=-1:1", 1e-2, 1e-2},
    {HOP, "vring", "N=64 T=f16 V=f16 BM=64 BK=64", "M=64 K=198 Z=1 z=0", 4, 2, "a=-1:1 b=-1:1", 1e-3, 2e-3},
    /* a bulk store through a transposed view, the last block cut at N */
    {HOP, "tstore", "D=64 T=f16 BN=64", "N=150", 4, 2, NULL, 0, 0},
    {HOP, "tstore", "D=128 T=bf16 BN=32", "N=77", 8, 2, NULL, 0, 0},
    /* the Triton-style matmul with runtime sizes: multiples of 16 (launches
       specialise on them: 16-byte cp.async pipelines) and odd sizes (scalar
       loads), default and small tiles */
    {MM, "matmul", "T=f16 BLOCK_M=128 BLOCK_N=128 BLOCK_K=64 GROUP_M=8", "M=256 N=384 K=192", 8, 3, NULL, 1e-3, 2e-3},
    {MM, "matmul", "T=f16 BLOCK_M=128 BLOCK_N=128 BLOCK_K=64 GROUP_M=8", "M=100 N=70 K=90", 8, 3, NULL, 1e-3, 2e-3},
    {MM, "matmul", "T=bf16 BLOCK_M=64 BLOCK_N=64 BLOCK_K=32 GROUP_M=8", "M=640 N=144 K=48", 4, 2, NULL, 1e-2, 1e-2},
    {MM, "matmul", "T=bf16 BLOCK_M=64 BLOCK_N=128 BLOCK_K=32 GROUP_M=8", "M=333 N=130 K=17", 4, 4, NULL, 1e-2, 1e-2},
    /* attention on small shapes (the random LSE and D keep the exponents of
       the backward pass in range) */
    {ATT, "attn_fwd", "n_groups=2 d_head=64 is_causal=False T=f16 BLOCK_Q=64 BLOCK_K=32", "n_zh=2 q_seq_len=77 kv_seq_len=100 sm_scale=0.125",
     4, 2, NULL, 2e-3, 2e-3},
    {ATT, "attn_fwd", "n_groups=2 d_head=64 is_causal=False T=f16 BLOCK_Q=64 BLOCK_K=32", "n_zh=2 q_seq_len=77 kv_seq_len=300 sm_scale=0.125",
     4, 3, NULL, 2e-3, 2e-3},
    {ATT, "attn_fwd", "n_groups=1 d_head=128 is_causal=True T=f16 BLOCK_Q=128 BLOCK_K=64", "n_zh=2 q_seq_len=333 kv_seq_len=333 sm_scale=0.088",
     8, 3, NULL, 2e-3, 2e-3},
    {ATT, "attn_fwd", "n_groups=1 d_head=64 is_causal=False T=bf16 BLOCK_Q=64 BLOCK_K=64", "n_zh=2 q_seq_len=64 kv_seq_len=1 sm_scale=0.125",
     4, 1, NULL, 1e-2, 1e-2},
    {ATT, "attn_fwd", "n_groups=1 d_head=32 is_causal=True T=bf16 BLOCK_Q=128 BLOCK_K=64", "n_zh=3 q_seq_len=200 kv_seq_len=200 sm_scale=0.17",
     8, 2, NULL, 1e-2, 1e-2},
    {ATT, "attn_fwd", "n_groups=4 d_head=128 is_causal=True T=f16 BLOCK_Q=64 BLOCK_K=64", "n_zh=1 q_seq_len=130 kv_seq_len=130 sm_scale=0.088",
     4, 2, NULL, 2e-3, 2e-3},
    {ATT, "attn_fwd", "n_groups=1 d_head=16 is_causal=False T=f16 BLOCK_Q=64 BLOCK_K=64", "n_zh=2 q_seq_len=1 kv_seq_len=65 sm_scale=0.25",
     4, 2, NULL, 2e-3, 2e-3},
    {ATT, "attn_bwd_d", "n_groups=2 d_head=64 T=f16 BLOCK_Q=16", "n_zh=2 q_seq_len=77", 4, 2, NULL, 1e-4, 1e-4},
    /* lengths that are multiples of 16: the variants launches specialise on them */
    {ATT, "attn_bwd_d", "n_groups=2 d_head=64 T=f16 BLOCK_Q=16", "n_zh=2 q_seq_len=96", 4, 2, NULL, 1e-4, 1e-4},
    {ATT, "attn_bwd_dkdv", "n_groups=2 d_head=64 is_causal=True T=f16 BLOCK_Q=32 BLOCK_K=64",
     "n_zh=2 q_seq_len=128 kv_seq_len=192 sm_scale=0.125", 4, 2, "t_lse=10:12 t_pdp=-0.5:0.5", 5e-3, 5e-3},
    {ATT, "attn_bwd_dq", "n_groups=1 d_head=64 is_causal=False T=bf16 BLOCK_Q=64 BLOCK_K=32",
     "n_zh=2 q_seq_len=160 kv_seq_len=96 sm_scale=0.125", 4, 3, "t_lse=10:12 t_pdp=-0.5:0.5", 2e-2, 2e-2},
    {ATT, "attn_fwd", "n_groups=2 d_head=128 is_causal=True T=f16 BLOCK_Q=128 BLOCK_K=32", "n_zh=1 q_seq_len=256 kv_seq_len=256 sm_scale=0.088",
     4, 2, NULL, 2e-3, 2e-3},
    {ATT, "attn_bwd_dkdv", "n_groups=2 d_head=64 is_causal=False T=f16 BLOCK_Q=32 BLOCK_K=64",
     "n_zh=2 q_seq_len=77 kv_seq_len=100 sm_scale=0.125", 4, 2, "t_lse=10:12 t_pdp=-0.5:0.5", 5e-3, 5e-3},
    {ATT, "attn_bwd_dkdv", "n_groups=1 d_head=32 is_causal=True T=bf16 BLOCK_Q=64 BLOCK_K=128",
     "n_zh=2 q_seq_len=150 kv_seq_len=150 sm_scale=0.17", 8, 2, "t_lse=8:10 t_pdp=-0.5:0.5", 2e-2, 2e-2},
    {ATT, "attn_bwd_dq", "n_groups=2 d_head=64 is_causal=True T=f16 BLOCK_Q=64 BLOCK_K=32",
     "n_zh=2 q_seq_len=100 kv_seq_len=100 sm_scale=0.125", 4, 2, "t_lse=10:12 t_pdp=-0.5:0.5", 5e-3, 5e-3},
    {ATT, "attn_bwd_dq", "n_groups=1 d_head=128 is_causal=False T=f16 BLOCK_Q=128 BLOCK_K=128",
     "n_zh=1 q_seq_len=90 kv_seq_len=140 sm_scale=0.088", 8, 2, "t_lse=14:16 t_pdp=-0.5:0.5", 5e-3, 5e-3},
    /* 64-row blocks on 8 warps: on sm_90a the two warpgroups split N, each
       a wgmma on its own columns (B N-major and K-major, a product whose
       accumulator is converted into the next one's A), or keep mma.sync
       where a warpgroup's columns start inside a swizzle row (BN=64) */
    {HOP, "kmm", "K=256 N=128 T=f16 BM=64 BN=128 BK=64 NAN_PAD=False", "M=200", 8, 2, "a=-1:1 b=-1:1", 1e-3, 2e-3},
    {HOP, "kmm", "K=200 N=96 T=bf16 BM=64 BN=64 BK=32 NAN_PAD=False", "M=70", 8, 3, "a=-1:1 b=-1:1", 1e-2, 1e-2},
    {HOP, "heads", "D=128 T=f16 BN=64 BK=64", "B=1 H=2 N=150", 8, 2, "x=-0.125:0.125 v=-1:1", 2e-3, 2e-3},
    /* the fused backward pass: dQ_i of 64 query rows split across the
       warpgroups, added atomically (in another order than the interpreter's) */
    {ATT, "attn_bwd", "n_groups=2 d_head=64 is_causal=True T=f16 BLOCK_Q=64 BLOCK_K=128",
     "n_zh=1 q_seq_len=200 kv_seq_len=200 sm_scale=0.125", 8, 2, "t_lse=10:12 t_pdp=-0.5:0.5", 5e-3, 5e-3},
    {ATT, "attn_bwd", "n_groups=1 d_head=128 is_causal=False T=bf16 BLOCK_Q=64 BLOCK_K=128",
     "n_zh=2 q_seq_len=150 kv_seq_len=270 sm_scale=0.088", 8, 2, "t_lse=14:16 t_pdp=-0.5:0.5", 2e-2, 2e-2},
    /* with a program per query head, dK and dV added into float32
       accumulators as well (attn_bwd_heads) */
    {ATT, "attn_bwd_heads", "n_groups=3 d_head=64 is_causal=True T=f16 BLOCK_Q=64 BLOCK_K=128",
     "n_zh=1 q_seq_len=200 kv_seq_len=200 sm_scale=0.125", 8, 2, "t_lse=10:12 t_pdp=-0.5:0.5", 5e-3, 5e-3},
    {ATT, "attn_bwd_heads", "n_groups=4 d_head=128 is_causal=False T=bf16 BLOCK_Q=64 BLOCK_K=128",
     "n_zh=2 q_seq_len=150 kv_seq_len=270 sm_scale=0.088", 8, 2, "t_lse=14:16 t_pdp=-0.5:0.5", 2e-2, 2e-2},
    /* around it: zeros in its accumulators, and dK and dV rounded from them */
    {ATT, "attn_bwd_dkdv_zero", "d_head=64 BLOCK_K=32", "n_zh=3 kv_seq_len=150", 4, 2, NULL, 0, 0},
    {ATT, "attn_bwd_dkdv_convert", "d_head=128 T=bf16 BLOCK_K=32", "n_zh=2 kv_seq_len=150", 4, 2, NULL, 0, 0},
};

/* ---- small helpers ------------------------------------------------------------------- */

static uint64_t rng_state;
static double urand(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return (double)(rng_state >> 11) / 9007199254740992.0;
}

/* Finds NAME=VALUE in a space-separated list; copies VALUE into buf. */
static bool lookup(const char *list, const char *name, char *buf, size_t size) {
  size_t n = strlen(name);
  for (const char *p = list; p && *p;) {
    while (*p == ' ')
      p++;
    const char *end = strchr(p, ' ');
    if (!end)
      end = p + strlen(p);
    if ((size_t)(end - p) > n && !strncmp(p, name, n) && p[n] == '=') {
      size_t len = (size_t)(end - p) - n - 1;
      if (len >= size)
        len = size - 1;
      memcpy(buf, p + n + 1, len);
      buf[len] = '\0';
      return true;
    }
    p = end;
  }
  return false;
}

static double half_to_double(uint16_t h) {
  int s = h >> 15, e = (h >> 10) & 0x1f, m = h & 0x3ff;
  double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(m + 1024, e - 25);
  return s ? -v : v;
}

static double elem(DType dt, const void *buf, int64_t i) {
  switch (dt) {
  case DT_F16: return half_to_double(((const uint16_t *)buf)[i]);
  case DT_BF16: return fa_bf16_bits_to_double(((const uint16_t *)buf)[i]);
  case DT_F32: return ((const float *)buf)[i];
  case DT_F64: return ((const double *)buf)[i];
  case DT_I1:
  case DT_I8: return ((const int8_t *)buf)[i];
  case DT_I16: return ((const int16_t *)buf)[i];
  case DT_I32: return ((const int32_t *)buf)[i];
  case DT_U32: return ((const uint32_t *)buf)[i];
  case DT_I64: return (double)((const int64_t *)buf)[i];
  default: return 0;
  }
}

static void fill(DType dt, void *buf, int64_t n, double lo, double hi) {
  for (int64_t i = 0; i < n; i++) {
    double u = lo + (hi - lo) * urand();
    switch (dt) {
    case DT_F16: ((uint16_t *)buf)[i] = fa_double_to_f16_bits(u); break;
    case DT_BF16: ((uint16_t *)buf)[i] = fa_double_to_bf16_bits(u); break;
    case DT_F32: ((float *)buf)[i] = (float)u; break;
    case DT_F64: ((double *)buf)[i] = u; break;
    case DT_I1: ((int8_t *)buf)[i] = u > (lo + hi) / 2; break;
    case DT_I8: ((int8_t *)buf)[i] = (int8_t)floor(u); break;
    case DT_I16: ((int16_t *)buf)[i] = (int16_t)floor(u); break;
    case DT_I32: ((int32_t *)buf)[i] = (int32_t)floor(u); break;
    case DT_U32: ((uint32_t *)buf)[i] = (uint32_t)floor(fabs(u)); break;
    case DT_I64: ((int64_t *)buf)[i] = (int64_t)floor(u); break;
    default: break;
    }
  }
}

static fadsl_value scalar_value(DType dt, const char *text) {
  switch (dt) {
  case DT_I64: return fadsl_i64(strtoll(text, NULL, 10));
  case DT_F32: return fadsl_f32((float)strtod(text, NULL));
  case DT_F64: return fadsl_f64(strtod(text, NULL));
  default: return fadsl_i32((int32_t)strtol(text, NULL, 10));
  }
}

/* ---- one case -------------------------------------------------------------------------- */

typedef struct Buffer {
  const char *name;
  DType dtype;
  int64_t count;
  void *init, *cpu, *gpu;
  uint64_t dev;
} Buffer;

/* The case's kernel specialised with its constexprs (stored in binds) and
 * configuration; NULL after reporting why. */
static IrKernel *specialise_case(FaCompiler *fc, const char *path, const Case *c, const char *label,
                                 FaBinding *binds, int *nb) {
  const Source *src = fa_source_read(fc, path);
  Node *mod = src ? fa_parse(fc, src) : NULL;
  FaProgram *p = mod ? fa_program_check(fc, mod) : NULL;
  FaKernelInfo *ki = p ? fa_program_kernel(p, c->kernel) : NULL;
  if (!ki) {
    fprintf(stderr, "FAIL %s: cannot load the kernel\n", label);
    return NULL;
  }
  *nb = 0;
  for (int i = 0; i < ki->nparams && *nb < 32; i++) {
    char v[64];
    if (ki->params[i].kind == PARAM_CONSTEXPR && lookup(c->constexprs, ki->params[i].name, v, sizeof v)) {
      binds[*nb].name = ki->params[i].name;
      if (!fa_const_parse(v, &binds[*nb].value)) {
        fprintf(stderr, "FAIL %s: bad constexpr %s\n", label, v);
        return NULL;
      }
      (*nb)++;
    }
  }
  FaLaunchConfig cfg = {.warps = c->warps, .stages = c->stages};
  return fa_specialize(fc, p, ki, binds, *nb, cfg);
}

static int run_case(const char *srcdir, const Case *c, fadsl_context *ctx) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", srcdir, c->file);
  char label[512];
  snprintf(label, sizeof label, "%s [%s] %s warps=%d", c->kernel, c->constexprs, c->scalars, c->warps);
  FaCompiler fc;
  fa_compiler_init(&fc, stderr);
  int failed = 1;
  Buffer *bufs = NULL;
  int nbufs = 0;
  FaInterp *in = NULL;
  fadsl_program *prog = NULL;
  fadsl_args *args = NULL;

  /* the interpreter's specialisation */
  FaBinding binds[32];
  int nb = 0;
  IrKernel *ir = specialise_case(&fc, path, c, label, binds, &nb);
  in = ir ? fa_interp_new(&fc, ir) : NULL;
  if (!in) {
    fprintf(stderr, "FAIL %s: cannot specialise\n", label);
    goto done;
  }
  const IrFunction *fn = ir->device;
  for (int i = 0; i < fn->nparams; i++) {
    const IrValue *v = fn->params[i].value;
    char text[64];
    if (v->type.dtype == DT_PTR)
      continue;
    if (!lookup(c->scalars, fn->params[i].name, text, sizeof text)) {
      fprintf(stderr, "FAIL %s: no value for scalar '%s'\n", label, fn->params[i].name);
      goto done;
    }
    FaHostValue hv = fa_dtype_is_float(v->type.dtype) ? fa_host_float(v->type.dtype, strtod(text, NULL))
                                                       : fa_host_int(v->type.dtype, strtoll(text, NULL, 10));
    if (!fa_interp_bind_scalar(in, i, hv))
      goto done;
  }
  bufs = calloc((size_t)fn->nparams, sizeof *bufs);
  if (!bufs)
    goto done;
  for (int i = 0; i < fn->nparams; i++) {
    const IrValue *v = fn->params[i].value;
    if (v->type.dtype != DT_PTR)
      continue;
    int64_t dims[FA_MAX_RANK];
    int r = fa_interp_extent(in, i, dims);
    if (r <= 0) {
      fprintf(stderr, "FAIL %s: pointer '%s' declares no extent\n", label, fn->params[i].name);
      goto done;
    }
    Buffer *b = &bufs[nbufs++];
    b->name = fn->params[i].name;
    b->dtype = v->type.pointee;
    b->count = 1;
    for (int d = 0; d < r; d++)
      b->count *= dims[d];
    size_t bytes = (size_t)(b->count > 0 ? b->count : 1) * (size_t)fa_dtype_size(b->dtype);
    b->init = malloc(bytes);
    b->cpu = malloc(bytes);
    b->gpu = malloc(bytes);
    if (!b->init || !b->cpu || !b->gpu)
      goto done;
    double lo = -2, hi = 2;
    char range[64];
    if (lookup(c->init, b->name, range, sizeof range))
      sscanf(range, "%lf:%lf", &lo, &hi);
    fill(b->dtype, b->init, b->count, lo, hi);
    memcpy(b->cpu, b->init, bytes);
    if (!fa_interp_bind_buffer(in, i, b->dtype, b->cpu, b->count))
      goto done;
  }
  FaInterpOptions iopt = {1, NULL};
  if (!fa_interp_run(in, &iopt)) {
    fprintf(stderr, "FAIL %s: the interpreter failed\n", label);
    goto done;
  }

  /* the GPU */
  fadsl_kernel *k = NULL;
  if (fadsl_program_load_file(ctx, path, &prog) || fadsl_program_kernel(prog, c->kernel, &k) ||
      fadsl_args_create(k, &args)) {
    fprintf(stderr, "FAIL %s: %s\n", label, fadsl_context_last_error(ctx));
    goto done;
  }
  for (int i = 0; i < nb; i++) {
    FaConst v = binds[i].value;
    fadsl_status st = v.kind == CK_DTYPE  ? fadsl_args_set_dtype(args, binds[i].name, fa_dtype_name(v.dtype))
                      : v.kind == CK_BOOL ? fadsl_args_set_bool(args, binds[i].name, (int)v.i)
                      : v.kind == CK_FLOAT ? fadsl_args_set_float(args, binds[i].name, v.f)
                                           : fadsl_args_set_int(args, binds[i].name, v.i);
    if (st) {
      fprintf(stderr, "FAIL %s: %s\n", label, fadsl_context_last_error(ctx));
      goto done;
    }
  }
  for (int i = 0, bi = 0; i < fn->nparams; i++) {
    const IrValue *v = fn->params[i].value;
    fadsl_status st;
    if (v->type.dtype == DT_PTR) {
      Buffer *b = &bufs[bi++];
      size_t bytes = (size_t)(b->count > 0 ? b->count : 1) * (size_t)fa_dtype_size(b->dtype);
      st = fadsl_malloc(ctx, bytes, &b->dev);
      if (!st)
        st = fadsl_memcpy_htod(ctx, b->dev, b->init, bytes);
      if (!st)
        st = fadsl_args_set_ptr(args, b->name, b->dev);
    } else {
      char text[64];
      lookup(c->scalars, fn->params[i].name, text, sizeof text);
      st = fadsl_args_set(args, fn->params[i].name, scalar_value(v->type.dtype, text));
    }
    if (st) {
      fprintf(stderr, "FAIL %s: %s\n", label, fadsl_context_last_error(ctx));
      goto done;
    }
  }
  fadsl_args_set_config(args, c->warps, c->stages);
  fadsl_kernel_info info;
  fadsl_status st = fadsl_launch(k, args, NULL, &info);
  if (st == FADSL_SUCCESS)
    st = fadsl_synchronize_within(ctx, NULL, 120);
  if (st == FADSL_ERROR_TIMEOUT) {   /* the GPU stays busy with it: nothing after it could run */
    fprintf(stderr, "FAIL %s: %s; stopping\n", label, fadsl_context_last_error(ctx));
    fflush(NULL);
    _exit(1);
  }
  if (st) {
    fprintf(stderr, "FAIL %s: %s\n", label, fadsl_context_last_error(ctx));
    goto done;
  }
  failed = 0;
  for (int i = 0; i < nbufs; i++) {
    Buffer *b = &bufs[i];
    size_t bytes = (size_t)(b->count > 0 ? b->count : 1) * (size_t)fa_dtype_size(b->dtype);
    if (fadsl_memcpy_dtoh(ctx, b->gpu, b->dev, bytes)) {
      fprintf(stderr, "FAIL %s: %s\n", label, fadsl_context_last_error(ctx));
      failed = 1;
      break;
    }
    int64_t bad = 0, first = -1;
    double maxerr = 0, num = 0, den = 0;
    for (int64_t e = 0; e < b->count; e++) {
      double g = elem(b->dtype, b->gpu, e), r = elem(b->dtype, b->cpu, e);
      bool ok;
      if (isnan(r) || isnan(g))
        ok = isnan(r) && isnan(g);
      else if (isinf(r) || isinf(g))
        ok = g == r;
      else {
        double d = fabs(g - r);
        ok = d <= c->atol + c->rtol * fabs(r);
        if (d > maxerr)
          maxerr = d;
        num += d * d;
        den += r * r;
      }
      if (!ok) {
        if (first < 0)
          first = e;
        bad++;
      }
    }
    if (bad) {
      fprintf(stderr, "FAIL %s: buffer '%s': %lld of %lld elements differ; first at %lld: gpu %.9g, cpu %.9g\n",
              label, b->name, (long long)bad, (long long)b->count, (long long)first,
              elem(b->dtype, b->gpu, first), elem(b->dtype, b->cpu, first));
      failed = 1;
    } else {
      printf("  %-8s %-10s max |diff| %.3g, rel. norm %.3g\n", c->kernel, b->name, maxerr,
             den > 0 ? sqrt(num / den) : 0.0);
    }
  }
  /* which pipeline the code took: bulk copies and producer warps are plan
     decisions, so a case that should exercise them says whether it did */
  int copies = 0, stores = 0;
  for (const char *t = info.cuda_source; t && (t = strstr(t, "fa::tma_load<")); t++)
    copies++;
  for (const char *t = info.cuda_source; t && (t = strstr(t, "fa::tma_store<")); t++)
    stores++;
  for (const char *t = info.cuda_source; t && (t = strstr(t, "fa::tma_reduce_add<")); t++)
    stores++;
  const char *pipeline = getenv("FADSL_PIPELINE");
  printf("%s %s (%d registers, %d bytes spilled, %zu bytes shared; pipeline %s, %d bulk-copy sites, %d bulk-store "
         "sites%s%s)\n",
         failed ? "FAIL" : "ok  ", label, info.registers, info.spill_bytes, info.shared_bytes,
         pipeline && *pipeline ? pipeline : "cp_async", copies, stores,
         info.cuda_source && strstr(info.cuda_source, "setmaxnreg") ? ", a producer warpgroup" : "",
         info.cuda_source && strstr(info.cuda_source, "for (unsigned fa_tile") ? ", persistent" : "");
done:
  for (int i = 0; i < nbufs; i++) {
    if (bufs[i].dev)
      fadsl_free(ctx, bufs[i].dev);
    free(bufs[i].init);
    free(bufs[i].cpu);
    free(bufs[i].gpu);
  }
  free(bufs);
  if (args)
    fadsl_args_destroy(args);
  if (prog)
    fadsl_program_destroy(prog);
  if (in)
    fa_interp_free(in);
  fa_compiler_free(&fc);
  return failed;
}

/* ---- compiling (gpu_codegen SRCDIR --compile): NVRTC, no GPU --------------------------------------- */

/* The facts a launch with the case's scalars gives the plan (the runtime's
 * rule, compute_facts in runtime/launch.c; the buffers it allocates are
 * aligned, so the pointers give none): the variant the GPU run compiles. */
static int case_facts(const Case *c, const IrFunction *fn, FaArgFact *facts, int max) {
  int n = 0;
  for (int i = 0; i < fn->nparams && n < max; i++) {
    const IrValue *v = fn->params[i].value;
    char text[64];
    if (v->type.dtype == DT_PTR || !fa_dtype_is_int(v->type.dtype) ||
        !lookup(c->scalars, fn->params[i].name, text, sizeof text))
      continue;
    if (fa_arg_fact_of_int(fn->params[i].name, strtoll(text, NULL, 10), &facts[n]))
      n++;
  }
  return n;
}

static int compile_case(const char *srcdir, const Case *c, const FaNvrtcApi *api, const char *arch) {
  char path[4096], label[600];
  snprintf(path, sizeof path, "%s/%s", srcdir, c->file);
  FaCompiler fc;
  fa_compiler_init(&fc, stderr);
  FaBinding binds[32];
  int nb = 0, failed = 1;
  snprintf(label, sizeof label, "%s [%s] warps=%d stages=%d %s", c->kernel, c->constexprs, c->warps, c->stages, arch);
  IrKernel *ir = specialise_case(&fc, path, c, label, binds, &nb);
  FaArgFact facts[32];
  int nf = ir ? case_facts(c, ir->device, facts, 32) : 0;
  if (nf > 0) {
    StrBuf sb;
    fa_sb_init(&sb);
    fa_arg_facts_print(facts, nf, &sb);
    snprintf(label, sizeof label, "%s [%s] warps=%d stages=%d assume=[%s] %s", c->kernel, c->constexprs, c->warps,
             c->stages, sb.data ? sb.data : "", arch);
    fa_sb_free(&sb);
  }
  FaCudaTarget target;
  FaCudaKernel ck;
  FaCudaPlan plan;
  bool planned = ir && fa_cuda_target_parse(arch, &target) && fa_cuda_plan(&fc, ir, target, facts, nf, &plan);
  bool emitted = planned && fa_emit_cuda_plan(&plan, &ck);
  if (planned)
    fa_cuda_plan_free(&plan);
  if (!emitted) {
    fprintf(stderr, "FAIL %s: could not emit CUDA\n", label);
    fa_compiler_free(&fc);
    return 1;
  }
  int nh = 0;
  const FaEmbeddedHeader *hs = fa_device_headers(&nh);
  const char *names[16], *texts[16];
  for (int i = 0; i < nh && i < 16; i++) {
    names[i] = hs[i].name;
    texts[i] = hs[i].text;
  }
  FaNvrtcOptions opt;
  fa_nvrtc_options_init(&opt, arch);
  FaNvrtcOutput out;
  memset(&out, 0, sizeof out);
  StrBuf err;
  fa_sb_init(&err);
  fadsl_status st = fa_nvrtc_compile(api, ck.source, "codegen.cu", names, texts, nh < 16 ? nh : 16, &opt, &out, &err);
  if (st != FADSL_SUCCESS)
    fprintf(stderr, "FAIL %s: NVRTC: %s\n", label, err.data ? err.data : out.log);
  else if (out.log && strstr(out.log, "warning"))
    fprintf(stderr, "FAIL %s: NVRTC warned about the generated code:\n%s\n", label, out.log);
  else
    failed = 0;
  if (!failed)
    printf("ok   %s\n", label);
  fflush(stdout);
  fa_sb_free(&err);
  fa_nvrtc_output_free(&out);
  fa_compiler_free(&fc);
  return failed;
}

static int compile_all(const char *srcdir, const char *filter) {
  FaCudaLoader loader;
  fa_loader_init(&loader, 0);
  const char *why = NULL;
  const FaNvrtcApi *api = fa_loader_nvrtc(&loader, &why);
  if (!api) {
    printf("SKIP: NVRTC could not be loaded (%s)\n", why ? why : "?");
    fa_loader_free(&loader);
    return 77;
  }
  bool every = getenv("FADSL_CODEGEN_COMPILE") && !strcmp(getenv("FADSL_CODEGEN_COMPILE"), "all");
  static const char *const archs[] = {"sm_80", "sm_90a"};
  int failures = 0, run = 0;
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    const Case *c = &cases[i];
    if (strcmp(c->file, CG) || (filter && !strstr(c->kernel, filter)))
      continue;
    bool seen = false;
    for (size_t j = 0; j < i && !every; j++)
      seen = seen || !strcmp(cases[j].kernel, c->kernel);
    if (seen)
      continue;
    for (int a = 0; a < 2; a++, run++)
      failures += compile_case(srcdir, c, api, archs[a]);
  }
  printf("%d of %d compiles succeeded (%s)\n", run - failures, run,
         every ? "every case" : "one case per kernel; FADSL_CODEGEN_COMPILE=all for every case");
  fa_loader_free(&loader);
  return failures ? 1 : 0;
}

/* ---- timing (gpu_codegen SRCDIR bench): not part of the test ------------------------------------- */

typedef struct BenchCase {
  const char *kernel;
  int d_head, n;            /* head dimension, sequence length */
  bool causal;
  int block_q, block_k, warps, stages;
} BenchCase;

static void bench(const char *srcdir, fadsl_context *ctx, const char *only) {
  static const BenchCase bc[] = {
      {"attn_fwd", 128, 4096, false, 128, 64, 8, 2},  {"attn_fwd", 128, 4096, false, 128, 64, 8, 3},
      {"attn_fwd", 128, 4096, false, 128, 128, 8, 2}, {"attn_fwd", 128, 4096, false, 64, 64, 4, 3},
      {"attn_fwd", 128, 4096, false, 128, 32, 4, 3},  {"attn_fwd", 64, 4096, false, 128, 64, 8, 3},
      {"attn_fwd", 64, 4096, false, 64, 64, 4, 3},    {"attn_fwd", 64, 4096, false, 128, 128, 8, 3},
      {"attn_fwd", 128, 16384, true, 128, 64, 8, 2},  {"attn_fwd", 128, 16384, false, 128, 64, 8, 2},
      {"attn_fwd", 64, 16384, false, 128, 64, 8, 2},  {"attn_bwd_dkdv", 128, 4096, false, 64, 128, 8, 2},
      {"attn_bwd_dq", 128, 4096, false, 128, 64, 8, 2},
  };
  char path[4096];
  snprintf(path, sizeof path, "%s/" ATT, srcdir);
  fadsl_program *prog = NULL;
  if (fadsl_program_load_file(ctx, path, &prog)) {
    fprintf(stderr, "bench: %s\n", fadsl_context_last_error(ctx));
    return;
  }
  for (size_t i = 0; i < sizeof bc / sizeof *bc; i++) {
    const BenchCase *b = &bc[i];
    if (only && !strstr(b->kernel, only))
      continue;
    int heads = 2048 / b->d_head, batch = 16384 / b->n;
    size_t qn = (size_t)batch * heads * b->n * b->d_head, ln = (size_t)batch * heads * b->n;
    uint64_t q, k, v, o, lse, dq, dk, dv, dlt, dO;
    fadsl_malloc(ctx, qn * 2, &q);
    fadsl_malloc(ctx, qn * 2, &k);
    fadsl_malloc(ctx, qn * 2, &v);
    fadsl_malloc(ctx, qn * 2, &o);
    fadsl_malloc(ctx, qn * 2, &dq);
    fadsl_malloc(ctx, qn * 2, &dk);
    fadsl_malloc(ctx, qn * 2, &dv);
    fadsl_malloc(ctx, qn * 2, &dO);
    fadsl_malloc(ctx, ln * 4, &lse);
    fadsl_malloc(ctx, ln * 4, &dlt);
    uint16_t *h = malloc(qn * 2);
    float *hl = malloc(ln * 4);
    for (size_t e = 0; e < qn; e++)
      h[e] = fa_double_to_f16_bits(urand() * 2 - 1);
    for (size_t e = 0; e < ln; e++)
      hl[e] = 12.0f;
    fadsl_memcpy_htod(ctx, q, h, qn * 2);
    fadsl_memcpy_htod(ctx, k, h, qn * 2);
    fadsl_memcpy_htod(ctx, v, h, qn * 2);
    fadsl_memcpy_htod(ctx, dO, h, qn * 2);
    fadsl_memcpy_htod(ctx, lse, hl, ln * 4);
    fadsl_memcpy_htod(ctx, dlt, hl, ln * 4);
    free(h);
    free(hl);
    fadsl_kernel *kn;
    fadsl_args *a;
    fadsl_program_kernel(prog, b->kernel, &kn);
    fadsl_args_create(kn, &a);
    fadsl_args_set_ptr(a, "t_q", q);
    fadsl_args_set_ptr(a, "t_k", k);
    fadsl_args_set_ptr(a, "t_v", v);
    fadsl_args_set_f32(a, "sm_scale", (float)(1.0 / sqrt(b->d_head)));
    fadsl_args_set_ptr(a, "t_lse", lse);
    if (!strcmp(b->kernel, "attn_fwd")) {
      fadsl_args_set_ptr(a, "t_o", o);
    } else {
      fadsl_args_set_ptr(a, "t_do", dO);
      fadsl_args_set_ptr(a, "t_pdp", dlt);
      if (!strcmp(b->kernel, "attn_bwd_dq")) {
        fadsl_args_set_ptr(a, "t_dq", dq);
      } else {
        fadsl_args_set_ptr(a, "t_dk", dk);
        fadsl_args_set_ptr(a, "t_dv", dv);
      }
    }
    fadsl_args_set_i32(a, "n_zh", batch * heads);
    fadsl_args_set_i32(a, "q_seq_len", b->n);
    fadsl_args_set_i32(a, "kv_seq_len", b->n);
    fadsl_args_set_int(a, "n_groups", 1);
    fadsl_args_set_int(a, "d_head", b->d_head);
    fadsl_args_set_bool(a, "is_causal", b->causal);
    fadsl_args_set_dtype(a, "T", "f16");
    fadsl_args_set_int(a, "BLOCK_Q", b->block_q);
    fadsl_args_set_int(a, "BLOCK_K", b->block_k);
    fadsl_args_set_config(a, b->warps, b->stages);
    fadsl_kernel_info info;
    void *e0, *e1;
    fadsl_event_create(ctx, &e0);
    fadsl_event_create(ctx, &e1);
    fadsl_status st = FADSL_SUCCESS;
    for (int w = 0; w < 3 && !st; w++)
      st = fadsl_launch(kn, a, NULL, &info);
    int reps = 20;
    fadsl_event_record(ctx, e0, NULL);
    for (int r = 0; r < reps && !st; r++)
      st = fadsl_launch(kn, a, NULL, &info);
    fadsl_event_record(ctx, e1, NULL);
    float ms = 0;
    if (!st)
      st = fadsl_event_elapsed_ms(ctx, e0, e1, &ms);
    double flops = 4.0 * batch * heads * (double)b->n * b->n * b->d_head * (b->causal ? 0.5 : 1.0);
    if (strcmp(b->kernel, "attn_fwd"))
      flops *= strcmp(b->kernel, "attn_bwd_dq") ? 1.0 : 0.75; /* dkdv: 4 of the 5 products; dq: 3 */
    if (st)
      printf("bench %s: %s\n", b->kernel, fadsl_context_last_error(ctx));
    else
      printf("bench %-14s D=%-3d N=%-5d %s BQ=%-3d BK=%-3d warps=%d stages=%d: %7.3f ms  %6.1f TFLOP/s  (%d regs, "
             "%d spilled, %zu B shared)\n",
             b->kernel, b->d_head, b->n, b->causal ? "causal" : "full  ", b->block_q, b->block_k, b->warps, b->stages,
             ms / reps, flops / (ms / reps * 1e-3) / 1e12, info.registers, info.spill_bytes, info.shared_bytes);
    fflush(stdout);
    fadsl_event_destroy(ctx, e0);
    fadsl_event_destroy(ctx, e1);
    fadsl_args_destroy(a);
    uint64_t all[] = {q, k, v, o, lse, dq, dk, dv, dlt, dO};
    for (size_t j = 0; j < sizeof all / sizeof *all; j++)
      fadsl_free(ctx, all[j]);
  }
  fadsl_program_destroy(prog);
}

int main(int argc, char **argv) {
  const char *srcdir = argc > 1 ? argv[1] : ".";
  const char *filter = argc > 2 ? argv[2] : NULL;
  if (filter && !strcmp(filter, "--compile"))
    return compile_all(srcdir, argc > 3 ? argv[3] : NULL);
  const char *seed_env = getenv("FADSL_TEST_SEED");
  uint64_t seed = seed_env ? strtoull(seed_env, NULL, 10) : (uint64_t)time(NULL);
  printf("seed %llu (FADSL_TEST_SEED reproduces it)\n", (unsigned long long)seed);
  fadsl_context *ctx = NULL;
  fadsl_status st = fadsl_context_create(0, &ctx);
  if (st == FADSL_ERROR_NO_DRIVER || st == FADSL_ERROR_NO_DEVICE) {
    printf("SKIP: no GPU (%s)\n", ctx ? fadsl_context_last_error(ctx) : fadsl_status_string(st));
    fadsl_context_destroy(ctx);
    return 77;
  }
  if (st) {
    fprintf(stderr, "cannot create a context: %s\n", ctx ? fadsl_context_last_error(ctx) : fadsl_status_string(st));
    fadsl_context_destroy(ctx);
    return 1;
  }
  if (filter && !strncmp(filter, "bench", 5)) {
    bench(srcdir, ctx, argc > 3 ? argv[3] : NULL);
    fadsl_context_destroy(ctx);
    return 0;
  }
  int failures = 0, run = 0;
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    if (filter && !strstr(cases[i].kernel, filter))
      continue;
    rng_state = seed * 2654435761u + i * 97 + 1;
    run++;
    failures += run_case(srcdir, &cases[i], ctx);
  }
  printf("%d of %d cases passed\n", run - failures, run);
  fadsl_context_destroy(ctx);
  return failures ? 1 : 0;
}
