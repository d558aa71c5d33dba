/* check_attn_check.c - the subset float64 checker of fadsl-attn
 * (examples/attention/attn_check.c) against the plain reference
 * (tests/attention_ref.c):
 *   - outputs equal to the reference (rounded to float32) pass with errors
 *     at float32 rounding, in full mode and in subset mode (a few heads,
 *     sampled rows), causal and not, GQA 2:1 and 3:1;
 *   - a wrong element in a checked row is found, in every output;
 *   - in subset mode a wrong element outside the subset is not compared
 *     (and the subset is said), but a NaN anywhere is counted.
 * Exit status 0 when every check holds. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention_ref.h"
#include "attn_check.h"
#include "interp.h"

static int failures;

static void expect(bool cond, const char *what) {
  printf("  %s: %s\n", cond ? "ok" : "FAIL", what);
  if (!cond)
    failures++;
}

static uint64_t rng = 12345;
static double uniform(void) {
  rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
  return (double)(rng >> 11) * 0x1p-53 * 2 - 1;
}

typedef struct Data {
  FaAttnShape s;
  int64_t nq, nkv, rows;
  float *q, *k, *v, *dO, *o, *lse2, *dq, *dk, *dv;
} Data;

static float *randf(int64_t n, double *exact) {
  float *f = malloc((size_t)n * sizeof *f);
  for (int64_t i = 0; i < n; i++)
    exact[i] = f[i] = (float)uniform();
  return f;
}

static float *tof(const double *x, int64_t n, double mul) {
  float *f = malloc((size_t)n * sizeof *f);
  for (int64_t i = 0; i < n; i++)
    f[i] = (float)(x[i] * mul);
  return f;
}

/* Random float32 inputs, and outputs from the float64 reference. */
static void make(Data *t, FaAttnShape s) {
  t->s = s;
  t->nq = (int64_t)s.B * s.H * s.Nq * s.D;
  t->nkv = (int64_t)s.B * s.KVH * s.Nkv * s.D;
  t->rows = (int64_t)s.B * s.H * s.Nq;
  double *q = malloc((size_t)t->nq * 8), *k = malloc((size_t)t->nkv * 8), *v = malloc((size_t)t->nkv * 8);
  double *dO = malloc((size_t)t->nq * 8), *o = malloc((size_t)t->nq * 8), *lse = malloc((size_t)t->rows * 8);
  double *dq = malloc((size_t)t->nq * 8), *dk = malloc((size_t)t->nkv * 8), *dv = malloc((size_t)t->nkv * 8);
  t->q = randf(t->nq, q);
  t->k = randf(t->nkv, k);
  t->v = randf(t->nkv, v);
  t->dO = randf(t->nq, dO);
  fa_attn_ref_forward(&s, q, k, v, o, lse);
  fa_attn_ref_backward(&s, q, k, v, dO, dq, dk, dv);
  t->o = tof(o, t->nq, 1);
  t->lse2 = tof(lse, t->rows, 1 / M_LN2);
  t->dq = tof(dq, t->nq, 1);
  t->dk = tof(dk, t->nkv, 1);
  t->dv = tof(dv, t->nkv, 1);
  free(q), free(k), free(v), free(dO), free(o), free(lse), free(dq), free(dk), free(dv);
}

static void drop(Data *t) {
  free(t->q), free(t->k), free(t->v), free(t->dO), free(t->o), free(t->lse2), free(t->dq), free(t->dk),
      free(t->dv);
}

static FaAttnCheckResult check(const Data *t, const FaAttnCheckOptions *o) {
  FaAttnData d = {DT_F32, t->q, t->k, t->v, t->dO, t->o, t->dq, t->dk, t->dv, t->lse2};
  FaAttnCheckResult r;
  if (!fa_attn_check(&t->s, &d, o, &r)) {
    printf("  FAIL: fa_attn_check ran out of memory\n");
    failures++;
  }
  printf("  checked %s\n ", r.subset);
  for (int w = 0; w < FA_CHECK_N; w++)
    printf(" %s %.2e (%lld el.)", fa_attn_check_name(w), r.err[w], (long long)r.elements[w]);
  printf("\n");
  return r;
}

static bool all_small(const FaAttnCheckResult *r) {
  for (int w = 0; w < FA_CHECK_N; w++)
    if (!r->checked[w] || !(r->err[w] < 1e-6) || r->nonfinite[w])
      return false;
  return true;
}

static void run_shape(FaAttnShape s) {
  printf("B=%d H=%d KVH=%d Nq=%d Nkv=%d D=%d %s\n", s.B, s.H, s.KVH, s.Nq, s.Nkv, s.D, s.causal ? "causal" : "full");
  Data t;
  make(&t, s);
  FaAttnCheckOptions full = fa_attn_check_defaults();
  full.threads = 3;
  FaAttnCheckOptions sub = full;
  sub.full_work = 0;       /* always a subset */
  sub.sample_above = 8;    /* and sampled rows */
  sub.sample_rows = 5;
  FaAttnCheckResult r = check(&t, &full);
  expect(all_small(&r) && strstr(r.subset, "everything"), "reference outputs pass the full check");
  r = check(&t, &sub);
  expect(all_small(&r) && strstr(r.subset, "2 of") && strstr(r.subset, "5 of"),
         "reference outputs pass the subset check, which says what it took");

  /* a wrong element in a checked row of every output: row 0 of head (0, 0) and key row 0 of kv head (0, 0) */
  float *outs[FA_CHECK_N] = {t.o, t.lse2, t.dq, t.dk, t.dv};
  for (int w = 0; w < FA_CHECK_N; w++) {
    int64_t at = w == FA_CHECK_LSE ? 0 : 3 % s.D;
    float keep = outs[w][at];
    outs[w][at] += 0.5f;
    FaAttnCheckResult a = check(&t, &full), b = check(&t, &sub);
    char what[96];
    snprintf(what, sizeof what, "a wrong %s element is found by both checks", fa_attn_check_name(w));
    expect(a.err[w] > 1e-4 && b.err[w] > 1e-4, what);
    outs[w][at] = keep;
  }
  /* outside the subset: head (0, 1) is not one of (0, 0), (B-1, H-1) when H > 2 */
  if (s.H > 2) {
    int64_t at = ((int64_t)0 * s.H + 1) * s.Nq * s.D + 2;
    float keep = t.dq[at];
    t.dq[at] += 0.5f;
    FaAttnCheckResult a = check(&t, &full), b = check(&t, &sub);
    expect(a.err[FA_CHECK_DQ] > 1e-4 && b.err[FA_CHECK_DQ] < 1e-6,
           "an element of an unchecked head counts in the full check only");
    t.dq[at] = NAN;
    b = check(&t, &sub);
    expect(b.nonfinite[FA_CHECK_DQ] == 1 && b.err[FA_CHECK_DQ] < 1e-6,
           "a NaN outside the subset is counted as non-finite");
    t.dq[at] = keep;
  }
  drop(&t);
}

int main(void) {
  run_shape((FaAttnShape){2, 4, 2, 37, 37, 16, true, 0.25});
  run_shape((FaAttnShape){1, 3, 1, 20, 29, 32, false, 1 / sqrt(32.0)});
  run_shape((FaAttnShape){2, 6, 2, 13, 13, 16, true, 0.3});
  printf("%d failure(s)\n", failures);
  return failures ? 1 : 0;
}
