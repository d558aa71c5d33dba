/* attention_ref.c - exact attention in float64 (see attention_ref.h).
 * Written for clarity, one query row at a time: scores, softmax, output;
 * the backward pass recomputes the probabilities the same way. */
#include "attention_ref.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int64_t qrow(const FaAttnShape *s, int b, int h, int i) {
  return (((int64_t)b * s->H + h) * s->Nq + i) * s->D;
}
static int64_t kvrow(const FaAttnShape *s, int b, int h, int j) {
  int kvh = h / (s->H / s->KVH);
  return (((int64_t)b * s->KVH + kvh) * s->Nkv + j) * s->D;
}

/* Probabilities of query row i against every key (0 for masked keys);
 * returns the natural-log softmax denominator. */
static double row_probs(const FaAttnShape *s, const double *q, const double *k, int b, int h, int i, double *p) {
  const double *qi = q + qrow(s, b, h, i);
  double m = -INFINITY;
  for (int j = 0; j < s->Nkv; j++) {
    if (s->causal && j > i) {
      p[j] = -INFINITY;
      continue;
    }
    const double *kj = k + kvrow(s, b, h, j);
    double dot = 0;
    for (int d = 0; d < s->D; d++)
      dot += qi[d] * kj[d];
    p[j] = dot * s->scale;
    if (p[j] > m)
      m = p[j];
  }
  if (m == -INFINITY) {
    for (int j = 0; j < s->Nkv; j++)
      p[j] = 0;
    return -INFINITY;
  }
  double l = 0;
  for (int j = 0; j < s->Nkv; j++) {
    p[j] = p[j] == -INFINITY ? 0 : exp(p[j] - m);
    l += p[j];
  }
  for (int j = 0; j < s->Nkv; j++)
    p[j] /= l;
  return m + log(l);
}

void fa_attn_ref_forward(const FaAttnShape *s, const double *q, const double *k, const double *v, double *o,
                         double *lse) {
  double *p = malloc((size_t)(s->Nkv > 0 ? s->Nkv : 1) * sizeof *p);
  if (!p)
    return;
  for (int b = 0; b < s->B; b++)
    for (int h = 0; h < s->H; h++)
      for (int i = 0; i < s->Nq; i++) {
        double L = row_probs(s, q, k, b, h, i, p);
        if (lse)
          lse[((int64_t)b * s->H + h) * s->Nq + i] = L;
        if (!o)
          continue;
        double *oi = o + qrow(s, b, h, i);
        memset(oi, 0, (size_t)s->D * sizeof *oi);
        for (int j = 0; j < s->Nkv; j++) {
          if (p[j] == 0)
            continue;
          const double *vj = v + kvrow(s, b, h, j);
          for (int d = 0; d < s->D; d++)
            oi[d] += p[j] * vj[d];
        }
      }
  free(p);
}

void fa_attn_ref_backward(const FaAttnShape *s, const double *q, const double *k, const double *v, const double *dO,
                          double *dq, double *dk, double *dv) {
  int64_t nq = (int64_t)s->B * s->H * s->Nq * s->D, nkv = (int64_t)s->B * s->KVH * s->Nkv * s->D;
  double *p = malloc((size_t)(s->Nkv > 0 ? s->Nkv : 1) * sizeof *p);
  double *dp = malloc((size_t)(s->Nkv > 0 ? s->Nkv : 1) * sizeof *dp);
  double *o = malloc((size_t)(s->D > 0 ? s->D : 1) * sizeof *o);
  if (!p || !dp || !o) {
    free(p);
    free(dp);
    free(o);
    return;
  }
  memset(dq, 0, (size_t)nq * sizeof *dq);
  memset(dk, 0, (size_t)nkv * sizeof *dk);
  memset(dv, 0, (size_t)nkv * sizeof *dv);
  for (int b = 0; b < s->B; b++)
    for (int h = 0; h < s->H; h++)
      for (int i = 0; i < s->Nq; i++) {
        row_probs(s, q, k, b, h, i, p);
        const double *qi = q + qrow(s, b, h, i), *doi = dO + qrow(s, b, h, i);
        double *dqi = dq + qrow(s, b, h, i);
        /* o_i and D_i = dO_i . o_i */
        memset(o, 0, (size_t)s->D * sizeof *o);
        for (int j = 0; j < s->Nkv; j++)
          if (p[j] != 0)
            for (int d = 0; d < s->D; d++)
              o[d] += p[j] * v[kvrow(s, b, h, j) + d];
        double Di = 0;
        for (int d = 0; d < s->D; d++)
          Di += doi[d] * o[d];
        for (int j = 0; j < s->Nkv; j++) {
          if (p[j] == 0)
            continue;
          int64_t r = kvrow(s, b, h, j);
          double dpij = 0;
          for (int d = 0; d < s->D; d++) {
            dpij += doi[d] * v[r + d];
            dv[r + d] += p[j] * doi[d];
          }
          dp[j] = p[j] * (dpij - Di) * s->scale;   /* dS_ij, with the scale of the scores */
          for (int d = 0; d < s->D; d++) {
            dqi[d] += dp[j] * k[r + d];
            dk[r + d] += dp[j] * qi[d];
          }
        }
      }
  free(p);
  free(dp);
  free(o);
}

void fa_attn_ref_rss(const FaAttnShape *s, const double *q, const double *k, const double *v, const double *dO,
                     double *o_rss, double *dq_rss, double *dk_rss, double *dv_rss) {
  int64_t nq = (int64_t)s->B * s->H * s->Nq * s->D, nkv = (int64_t)s->B * s->KVH * s->Nkv * s->D;
  double *p = malloc((size_t)(s->Nkv > 0 ? s->Nkv : 1) * sizeof *p);
  double *os = malloc((size_t)(s->D > 0 ? s->D : 1) * sizeof *os);
  double *q2 = malloc((size_t)(nq > 0 ? nq : 1) * sizeof *q2);
  double *dk2 = calloc((size_t)(nkv > 0 ? nkv : 1), sizeof *dk2), *dv2 = calloc((size_t)(nkv > 0 ? nkv : 1), sizeof *dv2);
  if (!p || !os || !q2 || !dk2 || !dv2)
    goto out;
  /* sums of squares first, square roots at the end */
  for (int b = 0; b < s->B; b++)
    for (int h = 0; h < s->H; h++)
      for (int i = 0; i < s->Nq; i++) {
        row_probs(s, q, k, b, h, i, p);
        int64_t qi = qrow(s, b, h, i);
        double *dq2 = q2 + qi;
        for (int d = 0; d < s->D; d++)
          os[d] = dq2[d] = 0;
        for (int j = 0; j < s->Nkv; j++)
          if (p[j] != 0)
            for (int d = 0; d < s->D; d++) {
              double t = p[j] * v[kvrow(s, b, h, j) + d];
              os[d] += t * t;
            }
        if (o_rss)
          for (int d = 0; d < s->D; d++)
            o_rss[qi + d] = sqrt(os[d]);
        if (!dO)
          continue;
        double D2 = 0;   /* D_rss^2 */
        for (int d = 0; d < s->D; d++)
          D2 += dO[qi + d] * dO[qi + d] * os[d];
        for (int j = 0; j < s->Nkv; j++) {
          if (p[j] == 0)
            continue;
          int64_t r = kvrow(s, b, h, j);
          double dp2 = 0;
          for (int d = 0; d < s->D; d++) {
            double t = dO[qi + d] * v[r + d];
            dp2 += t * t;
            dv2[r + d] += p[j] * p[j] * dO[qi + d] * dO[qi + d];
          }
          double ds2 = s->scale * s->scale * p[j] * p[j] * (dp2 + D2);
          for (int d = 0; d < s->D; d++) {
            dq2[d] += ds2 * k[r + d] * k[r + d];
            dk2[r + d] += ds2 * q[qi + d] * q[qi + d];
          }
        }
      }
  for (int64_t e = 0; dO && e < nq; e++)
    if (dq_rss)
      dq_rss[e] = sqrt(q2[e]);
  for (int64_t e = 0; dO && e < nkv; e++) {
    if (dk_rss)
      dk_rss[e] = sqrt(dk2[e]);
    if (dv_rss)
      dv_rss[e] = sqrt(dv2[e]);
  }
out:
  free(p), free(os), free(q2), free(dk2), free(dv2);
}

double fa_norm(const double *a, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; i++)
    s += a[i] * a[i];
  return sqrt(s);
}
