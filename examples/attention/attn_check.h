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
#include "ir.h"

enum { FA_CHECK_O, FA_CHECK_LSE, FA_CHECK_DQ, FA_CHECK_DK, FA_CHECK_DV, FA_CHECK_N };

typedef struct FaAttnData {
  DType dtype;
  const void *q, *k, *v, *dO;      /* inputs; dO NULL: forward only */
  const void *o, *dq, *dk, *dv;    /* outputs; dq/dk/dv only with dO */
  const float *lse2;               /* may be NULL */
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
  double err[FA_CHECK_N];         /* ||out - ref|| / ||ref|| over the checked elements; NaN when one
                                     of them is not finite */
  int64_t elements[FA_CHECK_N];   /* how many elements were compared */
  int64_t nonfinite[FA_CHECK_N];  /* NaN/inf values anywhere in the output (checked or not) */
  char subset[512];               /* what was checked, in words */
} FaAttnCheckResult;

/* Computes the reference on the chosen subset and compares.  Returns false
 * only when memory or threads ran out. */
bool fa_attn_check(const FaAttnShape *s, const FaAttnData *d, const FaAttnCheckOptions *opt, FaAttnCheckResult *res);

/* Names for messages: "o", "lse", "dq", "dk", "dv". */
const char *fa_attn_check_name(int which);

#endif
