/* attn_variant.h - what an attention variant changes, as data: the sliding
 * window, score capping, ALiBi slopes, attention sinks and packed
 * variable-length batches of fadsl-attn's --window, --softcap, --alibi,
 * --sinks and --cu-seqlens, and the arithmetic they imply, written once for
 * the float64 checker (attn_check.c), the interpreter runner (attn_interp.c)
 * and fadsl-attn's FLOP counts.
 *
 * Positions.  Queries and keys are aligned at position 0 (of their sequence,
 * when packed).  Query i sees key j when
 *     i - window_left <= j <= i + window_right
 * (either bound -1: unbounded on that side; causal attention is
 * window_right = 0) and, when packed, when both are in the same sequence.
 *
 * Scores.  s = scale * q.k, then s = softcap * tanh(s / softcap) when
 * softcap > 0, then s -= alibi[h] * |i - j| when alibi is given (h the query
 * head).  With sinks, exp(sinks[h]) joins every row's softmax denominator and
 * contributes no value.  A row that sees no key (and has no sink) has O = 0
 * and LSE = +inf (the convention of FlashAttention, which makes the row's
 * probabilities 0 in the backward pass).
 *
 * Packed batches (cu_seqlens_q != NULL): q, o, dO, dq are [1, H, total_q, D],
 * k, v, dk, dv [1, KVH, total_k, D]; sequence s holds query rows
 * cu_seqlens_q[s] .. cu_seqlens_q[s + 1] - 1 and key rows
 * cu_seqlens_k[s] .. cu_seqlens_k[s + 1] - 1 (cu_seqlens_k NULL: the same
 * offsets as the queries).
 */
#ifndef FADSL_ATTN_VARIANT_H
#define FADSL_ATTN_VARIANT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "attention_ref.h"

typedef struct FaAttnVariant {
  bool window;                  /* window_left/right apply (causal folds in as right = 0) */
  int window_left, window_right;
  double softcap;               /* 0: none */
  const float *alibi;           /* [H] slopes, or NULL */
  const float *sinks;           /* [H] logits, or NULL */
  const int32_t *cu_seqlens_q;  /* [nseq + 1], or NULL: one sequence per batch entry */
  const int32_t *cu_seqlens_k;  /* [nseq + 1], or NULL: cu_seqlens_q */
  int nseq;
} FaAttnVariant;

/* Whether v changes anything (NULL or all defaults: plain attention). */
bool fa_attn_variant_any(const FaAttnVariant *v);

/* The window the variant and s->causal give: false when there is none
 * (every key visible). */
bool fa_attn_variant_window(const FaAttnVariant *v, const FaAttnShape *s, int *left, int *right);

/* The sequence of query row i (or key row j with keys = true) and its
 * position in it; for unpacked inputs the sequence is 0 and the position the
 * row.  Returns the sequence. */
int fa_attn_variant_seq(const FaAttnVariant *v, const FaAttnShape *s, int64_t row, bool keys, int64_t *pos);

/* Whether query row i may see key row j (same sequence, inside the window). */
bool fa_attn_variant_visible(const FaAttnVariant *v, const FaAttnShape *s, int64_t i, int64_t j);

/* The modified score of query head h at positions (pi, pj) from the scaled
 * score s, and its derivative d(modified)/d(s) in *grad. */
double fa_attn_variant_score(const FaAttnVariant *v, int h, double s, int64_t pi, int64_t pj, double *grad);

/* The sink logit of head h, or -inf without sinks. */
double fa_attn_variant_sink(const FaAttnVariant *v, int h);

/* Visible (query, key) pairs of one head, summed over the batch (the FLOP
 * counts: 4 * pairs * D * H forward). */
double fa_attn_variant_pairs(const FaAttnVariant *v, const FaAttnShape *s);

/* Checks the variant against the shape (window bounds, softcap, offsets
 * that increase and end at the totals, B = 1 when packed); on failure writes
 * the reason into why. */
bool fa_attn_variant_ok(const FaAttnVariant *v, const FaAttnShape *s, char *why, size_t whylen);

/* "window 16,0 softcap 30 alibi sinks packed (3 sequences)" or "plain", for
 * messages; writes into buf and returns it. */
const char *fa_attn_variant_describe(const FaAttnVariant *v, const FaAttnShape *s, char *buf, size_t len);

#endif
