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

/* The scale the errors of o, dq, dk and dv are measured against (any of
 * the outputs may be NULL): each output recomputed in float64 with every sum
 * and difference replaced by the root-sum-square of its terms' scales
 * (inputs and probabilities count at their magnitude):
 *     o_rss[i]   = sqrt(sum_j P_ij^2 V_j^2)                      (per element)
 *     dP_rss[ij] = sqrt(sum_d dO_id^2 V_jd^2)
 *     D_rss[i]   = sqrt(sum_d dO_id^2 o_rss_id^2)                 D = rowsum(dO * o)
 *     dS_rss[ij] = scale * P_ij * sqrt(dP_rss_ij^2 + D_rss_i^2)   dS = scale * P * (dP - D)
 *     dq_rss[i]  = sqrt(sum_j dS_rss_ij^2 K_j^2),  dk_rss[j] = sqrt(sum_i dS_rss_ij^2 Q_i^2),
 *     dv_rss[j]  = sqrt(sum_i P_ij^2 dO_i^2).
 * Rounding errors of the terms of a sum add up like a random walk, so an
 * implementation's error is proportional to these (and not to the reference
 * itself, which cancellation can make arbitrarily small: with one key,
 * P = 1 and dS = dP - D = 0 exactly).  On data without such cancellation
 * they are close to |reference| (see tests/check_attn_check.c). */
void fa_attn_ref_rss(const FaAttnShape *s, const double *q, const double *k, const double *v, const double *dO,
                     double *o_rss, double *dq_rss, double *dk_rss, double *dv_rss);

/* Euclidean norm of n elements. */
double fa_norm(const double *a, int64_t n);

#endif
