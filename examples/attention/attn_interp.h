/* attn_interp.h - the attention program (attention.fa) run on the CPU
 * interpreter: forward and backward over host arrays.
 *
 * Layouts (row-major, contiguous): q, o, dO, dQ are [B, H, Nq, D]; k, v, dK,
 * dV are [B, KVH, Nkv, D], with H a multiple of KVH (grouped-query
 * attention: query head h uses key/value head h / (H / KVH)).  These are the
 * layouts attention.fa calls [B*H, Nq, D] and [B*KVH, Nkv, D].  Data arrays
 * hold `dtype` values (f16 or bf16 as 16-bit patterns, or f32).
 *
 * The forward pass also returns lse2, the base-2 log-sum-exp of each query
 * row's scaled scores, float32 [B, H, Nq], which the backward pass needs:
 * lse2 = log2(sum_j exp(scale * q.k_j)) = lse / ln(2).
 */
#ifndef FADSL_ATTN_INTERP_H
#define FADSL_ATTN_INTERP_H

#include <stdbool.h>

#include "ast.h"
#include "attention_ref.h"
#include "attn_variant.h"
#include "ir.h"
#include "sema.h"

typedef struct FaAttnRunner {
  FaCompiler *fc;           /* diagnostics go to fc->diag */
  const FaProgram *prog;    /* the checked attention.fa */
  int block_q, block_k;     /* tile sizes for attn_fwd and attn_bwd_dq (BLOCK_Q % BLOCK_K == 0);
                               attn_bwd_dkdv takes the smaller as BLOCK_Q, the larger as BLOCK_K */
  int threads;              /* interpreter threads (programs of these kernels never overlap, but for the
                               fused backward pass's atomic additions into dQ) */
  bool deterministic;       /* backward: attn_bwd_d, attn_bwd_dkdv and attn_bwd_dq (bitwise reproducible);
                               else the fused attn_bwd_prep, attn_bwd and attn_bwd_dq_convert where the
                               program has them (the deterministic kernels where it has not) */
  bool fuse_delta;          /* fused backward: D computed in attn_bwd (FUSE_D), attn_bwd_prep only zeroing */
  bool heads;               /* fused backward: one program per query head (attn_bwd_heads, dK and dV added
                               into float32 accumulators, attn_bwd_dkdv_convert) */
  bool ran_fused;           /* set by the backward calls: which pass ran */
  bool ran_heads;           /* and whether the fused one ran a program per query head */
} FaAttnRunner;

/* The attention program to use: `override` when given; else the file named
 * by $FADSL_ATTENTION_PROGRAM; else the copy in the source tree this program
 * was built from, if it is still there; else the installed copy.  Returns
 * NULL (with a message on stderr) when none exists. */
const char *fa_attn_find_program(const char *override);

/* `override` when given, else `file` (attention_variants.fa, decode.fa) in
 * the directory of the attention program fa_attn_find_program(NULL) finds,
 * written into buf; NULL (with a message on stderr) when it is not there. */
const char *fa_attn_find_sibling(const char *override, const char *file, char *buf, size_t len);

/* Reads and checks the program.  Errors go to fc->diag.  The backward pass
 * is the fused one (set r->deterministic afterwards for the other). */
bool fa_attn_open(FaAttnRunner *r, FaCompiler *fc, const char *path, int block_q, int block_k, int threads);

/* Checks that the kernels can run this shape (D in {16, ..., 256}, GQA
 * divisibility, causal needs Nq == Nkv; any number of heads per group); on
 * failure writes the reason into why.  `backward` is kept for callers: the
 * backward pass takes every shape the forward pass does. */
bool fa_attn_shape_ok(const FaAttnShape *s, bool backward, char *why, size_t whylen);

bool fa_attn_forward(FaAttnRunner *r, const FaAttnShape *s, DType dtype, const void *q, const void *k, const void *v,
                     void *o, float *lse2);

/* dO is the gradient of the loss with respect to o; o and lse2 come from the
 * forward pass. */
bool fa_attn_backward(FaAttnRunner *r, const FaAttnShape *s, DType dtype, const void *q, const void *k,
                      const void *v, const void *o, const void *dO, const float *lse2, void *dq, void *dk, void *dv);

/* The same with a variant (attn_variant.h; NULL: plain), for a program whose
 * kernels take the variant's parameters by the names of
 * examples/attention/variants/ (window_left, window_right, softcap,
 * t_alibi, t_sinks, t_dsinks, n_heads, t_cu_seqlens_q, t_cu_seqlens_k,
 * n_seqs, max_seqlen_q, max_seqlen_k) and, where it has them, the flags of
 * attention_variants.fa (HAS_WINDOW, HAS_SOFTCAP, HAS_ALIBI, HAS_SINKS,
 * VARLEN).  Causal attention is is_causal where a kernel has it, else
 * window_right = 0.  A variant the program has no parameters for is an
 * error, not ignored.  With sinks, dsinks (may be NULL) receives their
 * gradient [H]. */
bool fa_attn_forward_variant(FaAttnRunner *r, const FaAttnShape *s, const FaAttnVariant *var, DType dtype,
                             const void *q, const void *k, const void *v, void *o, float *lse2);
bool fa_attn_backward_variant(FaAttnRunner *r, const FaAttnShape *s, const FaAttnVariant *var, DType dtype,
                              const void *q, const void *k, const void *v, const void *o, const void *dO,
                              const float *lse2, void *dq, void *dk, void *dv, float *dsinks);

#endif
