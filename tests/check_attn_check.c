/* check_attn_check.c - the subset float64 checker of fadsl-attn
 * (examples/attention/attn_check.c) against the plain reference
 * (tests/attention_ref.c):
 *   - outputs equal to the reference (rounded to float32) pass with errors
 *     at float32 rounding, in full mode and in subset mode (a few heads,
 *     sampled rows), causal and not, GQA 2:1 and 3:1;
 *   - a wrong element in a checked row is found, in every output;
 *   - in subset mode a wrong element outside the subset is not compared
 *     (and the subset is said), but a NaN anywhere is counted;
 *   - the error scale: in full mode the checker's ||ref|| and ||ref_rss||
 *     equal those of the plain reference (fa_attn_ref_rss), and on ordinary
 *     data ||ref_rss|| stays within a factor 2 of ||ref|| (so the bounds are
 *     not loosened);
 *   - one key (N = 1): the exact dQ and dK are 0; outputs off by rounding
 *     noise pass the f16 bounds (an error relative to ||ref|| would be
 *     infinite), while a dS that forgets D, or a NaN, fails;
 *   - wrong gradients fail: zeroed, of the wrong sign, forgetting D.
 * Exit status 0 when every check holds. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention_ref.h"
#include "attn_check.h"

/* the outputs of plain attention (the sinks' gradient is tested with the variants) */
enum { PLAIN_N = FA_CHECK_DSINKS };
#include "interp.h"

static int failures;

/* What a wrong result must exceed: more than 3 times the largest bound
 * (3e-2, bf16 gradients), so that it fails every bound with a margin. */
#define WRONG 0.1

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
  double *ref[PLAIN_N], *rss[PLAIN_N];   /* float64 reference and its scale (rss[LSE] NULL) */
  int64_t n[PLAIN_N];                       /* elements of each output */
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
  double *os = malloc((size_t)t->nq * 8), *dqs = malloc((size_t)t->nq * 8);
  double *dks = malloc((size_t)t->nkv * 8), *dvs = malloc((size_t)t->nkv * 8);
  fa_attn_ref_rss(&s, q, k, v, dO, os, dqs, dks, dvs);
  double *refs[PLAIN_N] = {o, lse, dq, dk, dv}, *rss[PLAIN_N] = {os, NULL, dqs, dks, dvs};
  int64_t n[PLAIN_N] = {t->nq, t->rows, t->nq, t->nkv, t->nkv};
  for (int w = 0; w < PLAIN_N; w++) {
    t->ref[w] = refs[w];
    t->rss[w] = rss[w];
    t->n[w] = n[w];
  }
  free(q), free(k), free(v), free(dO);
}

static void drop(Data *t) {
  free(t->q), free(t->k), free(t->v), free(t->dO), free(t->o), free(t->lse2), free(t->dq), free(t->dk),
      free(t->dv);
  for (int w = 0; w < PLAIN_N; w++)
    free(t->ref[w]), free(t->rss[w]);
}

static float *output(Data *t, int w) {
  float *outs[PLAIN_N] = {t->o, t->lse2, t->dq, t->dk, t->dv};
  return outs[w];
}

static FaAttnCheckResult check(const Data *t, const FaAttnCheckOptions *o) {
  FaAttnData d = {DT_F32, t->q, t->k, t->v, t->dO, t->o, t->dq, t->dk, t->dv, t->lse2, NULL, NULL};
  FaAttnCheckResult r;
  if (!fa_attn_check(&t->s, &d, o, &r)) {
    printf("  FAIL: fa_attn_check ran out of memory\n");
    failures++;
  }
  printf("  checked %s\n ", r.subset);
  for (int w = 0; w < PLAIN_N; w++)
    printf(" %s %.2e (%lld el.)", fa_attn_check_name(w), r.err[w], (long long)r.elements[w]);
  printf("\n");
  return r;
}

static bool all_small(const FaAttnCheckResult *r) {
  for (int w = 0; w < PLAIN_N; w++)
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
  /* the checker's norms against the plain reference's, over every element */
  bool same = true;
  for (int w = 0; w < PLAIN_N; w++) {
    double rn = fa_norm(t.ref[w], t.n[w]), sn = t.rss[w] ? fa_norm(t.rss[w], t.n[w]) : rn;
    same = same && fabs(r.ref_norm[w] - rn) <= 1e-9 * rn && fabs(r.rss_norm[w] - sn) <= 1e-9 * sn;
    printf("  %s: ||ref|| %.6e (plain %.6e), ||ref_rss|| %.6e (plain %.6e), ratio %.3f\n", fa_attn_check_name(w),
           r.ref_norm[w], rn, r.rss_norm[w], sn, r.rss_norm[w] / r.ref_norm[w]);
  }
  expect(same, "the checker's ||ref|| and ||ref_rss|| equal the plain reference's (fa_attn_ref_rss)");
  bool strict = true;
  for (int w = 0; w < PLAIN_N; w++)
    strict = strict && r.rss_norm[w] >= r.ref_norm[w] * 0.5 && r.rss_norm[w] < 2 * r.ref_norm[w];
  expect(strict, "on ordinary data ||ref_rss|| is within a factor 2 of ||ref|| (the bounds keep their strictness)");
  r = check(&t, &sub);
  expect(all_small(&r) && strstr(r.subset, "2 of") && strstr(r.subset, "5 of"),
         "reference outputs pass the subset check, which says what it took");

  /* a wrong element in a checked row of every output: row 0 of head (0, 0) and key row 0 of kv head (0, 0) */
  float *outs[PLAIN_N] = {t.o, t.lse2, t.dq, t.dk, t.dv};
  for (int w = 0; w < PLAIN_N; w++) {
    int64_t at = w == FA_CHECK_LSE ? 0 : 3 % s.D;
    float keep = outs[w][at];
    outs[w][at] += 0.5f;
    FaAttnCheckResult a = check(&t, &full), b = check(&t, &sub);
    char what[96];
    snprintf(what, sizeof what, "a wrong %s element is found by both checks", fa_attn_check_name(w));
    expect(a.err[w] > 1e-4 && b.err[w] > 1e-4, what);
    outs[w][at] = keep;
  }
  /* wrong gradients (and outputs), as a kernel bug would give them: zeroed, of the wrong sign */
  for (int w = 0; w < PLAIN_N; w++) {
    if (w == FA_CHECK_LSE)
      continue;
    float *x = output(&t, w), *keep = malloc((size_t)t.n[w] * sizeof *keep);
    memcpy(keep, x, (size_t)t.n[w] * sizeof *keep);
    memset(x, 0, (size_t)t.n[w] * sizeof *x);
    FaAttnCheckResult a = check(&t, &full), b = check(&t, &sub);
    for (int64_t e = 0; e < t.n[w]; e++)
      x[e] = -keep[e];
    FaAttnCheckResult c = check(&t, &full), d = check(&t, &sub);
    char what[128];
    snprintf(what, sizeof what, "%s zeroed or of the wrong sign fails every bound (full and subset checks)",
             fa_attn_check_name(w));
    expect(a.err[w] > WRONG && b.err[w] > WRONG && c.err[w] > WRONG && d.err[w] > WRONG, what);
    memcpy(x, keep, (size_t)t.n[w] * sizeof *keep);
    free(keep);
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

/* dq and dk as kernels would give them if dS = P * dP forgot D:
 * dq_i = scale * sum_j P_ij dP_ij k_j, dk_j = scale * sum_i P_ij dP_ij q_i
 * (groups of one query head; P from the float64 LSE). */
static void forget_delta(Data *t) {
  const FaAttnShape *s = &t->s;
  int D = s->D;
  memset(t->dq, 0, (size_t)t->nq * sizeof *t->dq);
  memset(t->dk, 0, (size_t)t->nkv * sizeof *t->dk);
  for (int bh = 0; bh < s->B * s->H; bh++)
    for (int i = 0; i < s->Nq; i++)
      for (int j = 0; j < (s->causal ? i + 1 : s->Nkv); j++) {
        const float *qi = t->q + ((int64_t)bh * s->Nq + i) * D, *doi = t->dO + ((int64_t)bh * s->Nq + i) * D;
        int64_t kj = ((int64_t)bh * s->Nkv + j) * D;
        double sc = 0, dp = 0;
        for (int e = 0; e < D; e++) {
          sc += (double)qi[e] * t->k[kj + e];
          dp += (double)doi[e] * t->v[kj + e];
        }
        double ds = exp(sc * s->scale - t->ref[FA_CHECK_LSE][(int64_t)bh * s->Nq + i]) * dp * s->scale;
        for (int e = 0; e < D; e++) {
          t->dq[((int64_t)bh * s->Nq + i) * D + e] += (float)(ds * t->k[kj + e]);
          t->dk[kj + e] += (float)(ds * qi[e]);
        }
      }
}

/* One key: P = 1, dS = dP - D = 0, the exact dQ and dK are zero. */
static void one_key(FaAttnShape s, bool also_forget) {
  printf("one key: B=%d H=%d KVH=%d Nq=%d Nkv=%d D=%d %s\n", s.B, s.H, s.KVH, s.Nq, s.Nkv, s.D,
         s.causal ? "causal" : "full");
  Data t;
  make(&t, s);
  FaAttnCheckOptions full = fa_attn_check_defaults();
  full.threads = 2;
  FaAttnCheckResult r = check(&t, &full);
  expect(r.ref_norm[FA_CHECK_DQ] == 0 && r.ref_norm[FA_CHECK_DK] == 0 && r.rss_norm[FA_CHECK_DQ] > 0 &&
             r.rss_norm[FA_CHECK_DK] > 0 && all_small(&r),
         "the exact dq and dk are zero, their scale is not, and the exact outputs pass");
  /* rounding noise as a GPU leaves it (f32 products in another order, D from
   * the rounded O): 1e-4 of the scale, element by element, on every output */
  for (int w = 0; w < PLAIN_N; w++) {
    float *x = output(&t, w);
    for (int64_t e = 0; e < t.n[w]; e++)
      x[e] += (float)(1e-4 * uniform() * (t.rss[w] ? t.rss[w][e] : fabs(t.ref[w][e])));
  }
  r = check(&t, &full);
  bool pass = true;
  for (int w = 0; w < PLAIN_N; w++)
    pass = pass && r.err[w] < fa_attn_check_bound(DT_F16, w);
  expect(pass && r.err[FA_CHECK_DQ] > 0 && r.err[FA_CHECK_DK] > 0,
         "noise of 1e-4 of the scale passes the f16 bounds (relative to ||ref|| = 0 it would be infinite)");
  if (also_forget) {
    forget_delta(&t);
    r = check(&t, &full);
    expect(r.err[FA_CHECK_DQ] > WRONG && r.err[FA_CHECK_DK] > WRONG, "dq and dk of a dS that forgets D fail");
  }
  t.dq[1] = NAN;
  r = check(&t, &full);
  expect(isnan(r.err[FA_CHECK_DQ]) && r.nonfinite[FA_CHECK_DQ] == 1, "a NaN in dq fails");
  drop(&t);
}

int main(void) {
  run_shape((FaAttnShape){2, 4, 2, 37, 37, 16, true, 0.25});
  run_shape((FaAttnShape){1, 3, 1, 20, 29, 32, false, 1 / sqrt(32.0)});
  run_shape((FaAttnShape){2, 6, 2, 13, 13, 16, true, 0.3});
  run_shape((FaAttnShape){1, 2, 1, 300, 300, 64, false, 0.125});
  one_key((FaAttnShape){1, 2, 2, 1, 1, 16, false, 0.25}, true);
  one_key((FaAttnShape){1, 2, 2, 1, 1, 32, true, 1 / sqrt(32.0)}, true);
  one_key((FaAttnShape){2, 3, 3, 1, 1, 64, false, 0.125}, true);
  printf("%d failure(s)\n", failures);
  return failures ? 1 : 0;
}
