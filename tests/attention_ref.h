/* attention_ref.h - exact attention in float64, the yardstick for the
 * attention kernels (forward O and LSE, backward dQ, dK, dV).
 *
 * Layouts are row-major: q, o, dO, dQ are [B, H, Nq, D]; k, v, dK, dV are
 * [B, KVH, Nkv, D]; lse is [B, H, Nq].  Query head h reads key/value head
 * h / (H / KVH) (grouped-query attention; H must be a multiple of KVH).
 * Scores are scale * q.k; with causal masking query i sees keys j <= i
 * (top-left alignment).  lse is the natural logarithm of the softmax
 * denominator, log(sum_j exp(scale * q_i.k_j)); a row with no visible key
 * has lse = -inf and output 0.
 */
#ifndef FADSL_ATTENTION_REF_H
#define FADSL_ATTENTION_REF_H

#include <stdbool.h>
#include <stdint.h>

typedef struct FaAttnShape {
  int B, H, KVH, Nq, Nkv, D;
  bool causal;
  double scale;
} FaAttnShape;

/* o and lse may be NULL when not wanted. */
void fa_attn_ref_forward(const FaAttnShape *s, const double *q, const double *k, const double *v, double *o,
                         double *lse);
/* Gradients of sum(o * dO) with respect to q, k and v. */
void fa_attn_ref_backward(const FaAttnShape *s, const double *q, const double *k, const double *v, const double *dO,
                          double *dq, double *dk, double *dv);

/* ||a - b|| / ||b|| over n elements (Euclidean norms); NaN if any element of
 * a is NaN or infinite, so that NaN never passes a bound. */
double fa_rel_err(const double *a, const double *b, int64_t n);

#endif
