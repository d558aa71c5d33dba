/* attn_check.h - attention outputs (O, LSE, dQ, dK, dV) against exact
 * attention in float64, on all of them or, where that would take too long,
 * on a stated subset.
 *
 * The float64 reference of a long sequence costs O(Nq * Nkv * D) per head,
 * so on large shapes the check takes a few (batch, head) pairs and, past a
 * length, a sample of query rows and key rows (evenly spaced, first and last
 * included).  Each reference value is still exact: a sampled query row gets
 * its whole softmax, and a sampled key row's dK and dV sum over every query
 * row of every head of its group.  The work is spread over threads.  The
 * result says in words what was checked.
 *
 * The error of each output is
 *
 *     ||out - ref|| / max(||ref||, ||ref_rss||)
 *
 * over the checked elements, where ref_rss is the output recomputed with
 * every sum and difference replaced by the root-sum-square of its terms'
 * magnitudes (fa_attn_ref_rss in attention_ref.h gives the formulas).  The
 * rounding errors of a computation are proportional to the magnitudes of the
 * terms that it adds, not to what is left after they cancel: with a single
 * key, P = 1 and dS = P * (dP - D) = 0 exactly, so the exact dQ and dK are
 * zero while any implementation's are tiny but not zero, and an error
 * relative to ||ref|| alone would be infinite.  Root-sum-square rather than
 * sums of absolute values because rounding errors of independent terms add
 * like a random walk: on ordinary data ||ref_rss|| stays close to ||ref||, so
 * the bounds are as strict as before (sums of absolute values grow with the
 * sequence length where the reference does not, and would let, say, a dQ of
 * the wrong sign pass on long sequences).  LSE is a logarithm, not a
 * cancelling sum: it is measured against ||ref||.
 *
 * Layouts and conventions are those of attention_ref.h (q, o, dO, dq
 * [B, H, Nq, D]; k, v, dk, dv [B, KVH, Nkv, D]); data arrays hold `dtype`
 * values (f16/bf16 as 16-bit patterns, or f32); lse2 is the kernels'
 * base-2 log-sum-exp, float32 [B, H, Nq].
 */
#ifndef FADSL_ATTN_CHECK_H
#define FADSL_ATTN_CHECK_H

#include <stdbool.h>
#include <stdint.h>

#include "attention_ref.h"
#include "attn_variant.h"
#include "ir.h"

enum { FA_CHECK_O, FA_CHECK_LSE, FA_CHECK_DQ, FA_CHECK_DK, FA_CHECK_DV, FA_CHECK_DSINKS, FA_CHECK_N };

typedef struct FaAttnData {
  DType dtype;
  const void *q, *k, *v, *dO;      /* inputs; dO NULL: forward only */
  const void *o, *dq, *dk, *dv;    /* outputs; dq/dk/dv only with dO */
  const float *lse2;               /* may be NULL; +inf for a row that sees no key */
  const FaAttnVariant *variant;    /* NULL: plain (causal or not, as the shape says) */
  const float *dsinks;             /* [H], the sinks' gradient (with dO and variant->sinks), or NULL */
} FaAttnData;

typedef struct FaAttnCheckOptions {
  int threads;              /* <= 0: one per online CPU */
  double full_work;         /* check everything when the estimated multiply-adds are at most this */
  int max_heads;            /* otherwise at most this many (batch, query head) pairs (1 or 2) */
  int sample_above;         /* ... and past this length, a sample of rows */
  int sample_rows;          /* of this many rows */
} FaAttnCheckOptions;

/* full_work 4e9, max_heads 2, sample_above 4096, sample_rows 512, threads
 * from the machine. */
FaAttnCheckOptions fa_attn_check_defaults(void);

typedef struct FaAttnCheckResult {
  bool checked[FA_CHECK_N];       /* which outputs were compared */
  double err[FA_CHECK_N];         /* ||out - ref|| / max(||ref||, ||ref_rss||) over the checked
                                     elements; NaN when one of them is not finite */
  double ref_norm[FA_CHECK_N];    /* ||ref|| over the checked elements */
  double rss_norm[FA_CHECK_N];    /* ||ref_rss|| over the checked elements (= ||ref|| for lse) */
  int64_t elements[FA_CHECK_N];   /* how many elements were compared */
  int64_t nonfinite[FA_CHECK_N];  /* NaN/inf values anywhere in the output (checked or not) */
  char subset[512];               /* what was checked, in words */
} FaAttnCheckResult;

/* Computes the reference on the chosen subset and compares.  Returns false
 * only when memory or threads ran out. */
bool fa_attn_check(const FaAttnShape *s, const FaAttnData *d, const FaAttnCheckOptions *opt, FaAttnCheckResult *res);

/* The bound on err[which] that the tests and fadsl-attn --check apply:
 * f16 2e-3 (o), 1e-2 (dq, dk, dv, dsinks); bf16 1e-2, 3e-2; 1e-4 for lse. */
double fa_attn_check_bound(DType dtype, int which);

/* Names for messages: "o", "lse", "dq", "dk", "dv", "dsinks". */
const char *fa_attn_check_name(int which);

#endif
