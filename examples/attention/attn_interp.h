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
#include "ir.h"
#include "sema.h"

typedef struct FaAttnRunner {
  FaCompiler *fc;           /* diagnostics go to fc->diag */
  const FaProgram *prog;    /* the checked attention.fa */
  int block_q, block_k;     /* tile sizes for attn_fwd and attn_bwd_dq (BLOCK_Q % BLOCK_K == 0);
                               attn_bwd_dkdv takes the smaller as BLOCK_Q, the larger as BLOCK_K */
  int threads;              /* interpreter threads (programs of these kernels never overlap) */
} FaAttnRunner;

/* The attention program to use: `override` when given; else the file named
 * by $FADSL_ATTENTION_PROGRAM; else the copy in the source tree this program
 * was built from, if it is still there; else the installed copy.  Returns
 * NULL (with a message on stderr) when none exists. */
const char *fa_attn_find_program(const char *override);

/* Reads and checks the program.  Errors go to fc->diag. */
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

#endif
