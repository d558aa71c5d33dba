/* attn_check.c - attention outputs against float64 on a subset (see
 * attn_check.h).
 *
 * Work is organised per head: the inputs of one query head (or of the query
 * heads of one key/value group) are converted to doubles once, then a pool of
 * threads takes rows from a shared counter.  Each thread sums squared
 * differences, squared reference values and squared root-sum-square scales
 * (see attn_check.h) in its own accumulator; they are added at the end, so
 * the result does not depend on the thread count beyond the order of a few
 * float64 additions. */
#include "attn_check.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "interp.h"

static const char *const names[FA_CHECK_N] = {"o", "lse", "dq", "dk", "dv", "dsinks"};

const char *fa_attn_check_name(int which) { return which >= 0 && which < FA_CHECK_N ? names[which] : "?"; }

double fa_attn_check_bound(DType dtype, int which) {
  bool bf = dtype == DT_BF16;
  switch (which) {
  case FA_CHECK_O:
    return bf ? 1e-2 : 2e-3;
  case FA_CHECK_LSE:
    return 1e-4;
  default:
    return bf ? 3e-2 : 1e-2;
  }
}

FaAttnCheckOptions fa_attn_check_defaults(void) {
  FaAttnCheckOptions o = {0, 4e9, 2, 4096, 512};
  return o;
}

typedef struct Acc {
  double d2[FA_CHECK_N], r2[FA_CHECK_N], s2[FA_CHECK_N];
  int64_t n[FA_CHECK_N], bad[FA_CHECK_N];
} Acc;

/* What the row jobs read; one head (forward, dQ) or one group (dK, dV) at a time. */
typedef struct Check {
  const FaAttnShape *s;
  const FaAttnData *d;
  const FaAttnVariant *var;     /* NULL: plain */
  int G;                        /* query heads per key/value head */
  int b, h, kvh;                /* the current query head / key-value head */
  double *Q, *DO;               /* current query head's rows (forward job), [Nq * D] */
  double *K, *V;                /* current key/value head, [Nkv * D] */
  double **Qg, **DOg;           /* every query head of the group (key job) */
  double *lse_g, *delta_g;      /* [G * Nq]: natural-log LSE and rowsum(dO * O) of the group */
  double *delta_rss2_g;         /* [G * Nq]: the square of D's root-sum-square scale */
  const int64_t *rows;          /* the query rows (forward job) or key rows (key job) */
} Check;

typedef struct Scratch {
  double *p, *g, *vec;          /* [Nkv] probabilities and score derivatives, [4 * D] */
  double *dsink, *dsink2;       /* [H]: the sinks' gradient and its scale squared, summed here */
  Acc acc;
} Scratch;

typedef void (*RowJob)(Check *c, int64_t index, Scratch *sc);

typedef struct Pool {
  RowJob job;
  Check *c;
  int64_t n;
  atomic_llong next;
  Scratch *sc;
} Pool;

typedef struct Worker {
  Pool *pool;
  int index;
} Worker;

static void *work(void *arg) {
  Worker *w = arg;
  Pool *p = w->pool;
  for (;;) {
    int64_t i = atomic_fetch_add(&p->next, 1);
    if (i >= p->n)
      break;
    p->job(p->c, i, &p->sc[w->index]);
  }
  return NULL;
}

/* Runs job(c, i) for i in [0, n) on `threads` threads (on the calling thread
 * alone where threads cannot be started). */
static void run_rows(RowJob job, Check *c, int64_t n, Scratch *sc, int threads) {
  Pool p = {job, c, n, 0, sc};
  atomic_init(&p.next, 0);
  pthread_t tid[256];
  Worker w[256];
  int started = 0;
  if (threads > 256)
    threads = 256;
  for (int t = 1; t < threads && t < n; t++) {
    w[t].pool = &p;
    w[t].index = t;
    if (pthread_create(&tid[t], NULL, work, &w[t]) != 0)
      break;
    started = t;
  }
  w[0].pool = &p;
  w[0].index = 0;
  work(&w[0]);
  for (int t = 1; t <= started; t++)
    pthread_join(tid[t], NULL);
}

static double dot(const double *a, const double *b, int n) {
  double s = 0;
  for (int i = 0; i < n; i++)
    s += a[i] * b[i];
  return s;
}

/* n elements of a tensor from element `base` on (one head), as doubles. */
static double *slice(DType dt, const void *data, int64_t base, int64_t n) {
  double *x = malloc((size_t)(n > 0 ? n : 1) * sizeof *x);
  if (x)
    for (int64_t i = 0; i < n; i++)
      x[i] = fa_host_get(dt, data, base + i);
  return x;
}

/* Adds n elements of an output to the sums of `which`; rss2 holds the
 * squared scales (NULL: the reference is its own scale). */
static void compare(Acc *a, int which, DType dt, const void *data, int64_t off, const double *ref,
                    const double *rss2, int64_t n, double mul) {
  for (int64_t e = 0; e < n; e++) {
    double got = fa_host_get(dt, data, off + e) * mul;
    if (isinf(ref[e])) {
      /* the LSE of a row that sees no key: it must be the same infinity */
      a->bad[which] += got != ref[e];
      a->n[which]++;
      continue;
    }
    if (!isfinite(got)) {
      a->bad[which]++;
    } else {
      double d = got - ref[e];
      a->d2[which] += d * d;
    }
    a->r2[which] += ref[e] * ref[e];
    a->s2[which] += rss2 ? rss2[e] : ref[e] * ref[e];
    a->n[which]++;
  }
}

/* Softmax row of query row i (q_i) of query head h against every key row:
 * p[j] normalised (0 where the key is not visible), g[j] the derivative of
 * the variant's score modification; *psink the sink's probability.  Returns
 * the natural-log denominator, +inf for a row that sees nothing. */
static double softmax_row(const Check *c, int h, const double *qi, int64_t i, double *p, double *g, double *psink) {
  const FaAttnShape *s = c->s;
  int D = s->D;
  double sink = fa_attn_variant_sink(c->var, h), m = sink;
  int64_t pi;
  fa_attn_variant_seq(c->var, s, i, false, &pi);
  for (int64_t j = 0; j < s->Nkv; j++) {
    if (!fa_attn_variant_visible(c->var, s, i, j)) {
      p[j] = -INFINITY;
      g[j] = 0;
      continue;
    }
    int64_t pj;
    fa_attn_variant_seq(c->var, s, j, true, &pj);
    p[j] = fa_attn_variant_score(c->var, h, s->scale * dot(qi, c->K + j * D, D), pi, pj, &g[j]);
    if (p[j] > m)
      m = p[j];
  }
  *psink = 0;
  if (m == -INFINITY) {
    for (int64_t j = 0; j < s->Nkv; j++)
      p[j] = 0;
    return INFINITY;
  }
  double l = 0;
  for (int64_t j = 0; j < s->Nkv; j++) {
    p[j] = p[j] == -INFINITY ? 0 : exp(p[j] - m);
    l += p[j];
  }
  double es = exp(sink - m);   /* 0 without sinks */
  l += es;
  for (int64_t j = 0; j < s->Nkv; j++)
    p[j] /= l;
  *psink = es / l;
  return m + log(l);
}

/* One sampled query row of the current head: O, LSE and dQ (and, when
 * everything is checked, its share of the sinks' gradient). */
static void forward_row(Check *c, int64_t r, Scratch *sc) {
  const FaAttnShape *s = c->s;
  const FaAttnData *d = c->d;
  int D = s->D;
  int64_t i = c->rows[r];
  const double *qi = c->Q + i * D;
  double psink;
  double L = softmax_row(c, c->h, qi, i, sc->p, sc->g, &psink);
  double *o = sc->vec, *dq = sc->vec + D, *o2 = sc->vec + 2 * D, *dq2 = sc->vec + 3 * D;
  memset(sc->vec, 0, (size_t)4 * D * sizeof *sc->vec);
  for (int64_t j = 0; j < s->Nkv; j++) {
    if (sc->p[j] == 0)
      continue;
    for (int e = 0; e < D; e++) {
      double t = sc->p[j] * c->V[j * D + e];
      o[e] += t;
      o2[e] += t * t;
    }
  }
  int64_t row = ((int64_t)c->b * s->H + c->h) * s->Nq + i;
  compare(&sc->acc, FA_CHECK_O, d->dtype, d->o, row * D, o, o2, D, 1.0);
  if (d->lse2)
    compare(&sc->acc, FA_CHECK_LSE, DT_F32, d->lse2, row, &L, NULL, 1, M_LN2);
  if (!d->dO)
    return;
  const double *doi = c->DO + i * D;
  double delta = dot(doi, o, D), delta2 = 0;
  for (int e = 0; e < D; e++)
    delta2 += doi[e] * doi[e] * o2[e];
  for (int64_t j = 0; j < s->Nkv; j++) {
    if (sc->p[j] == 0)
      continue;
    const double *vj = c->V + j * D, *kj = c->K + j * D;
    double dp2 = 0;
    for (int e = 0; e < D; e++)
      dp2 += doi[e] * doi[e] * vj[e] * vj[e];
    double gs = sc->g[j] * s->scale;
    double ds = sc->p[j] * (dot(doi, vj, D) - delta) * gs;
    double ds2 = sc->p[j] * sc->p[j] * (dp2 + delta2) * gs * gs;
    for (int e = 0; e < D; e++) {
      dq[e] += ds * kj[e];
      dq2[e] += ds2 * kj[e] * kj[e];
    }
  }
  compare(&sc->acc, FA_CHECK_DQ, d->dtype, d->dq, row * D, dq, dq2, D, 1.0);
  /* d loss / d sink_h = sum over rows of -P_sink * (dP_sink - D) with dP_sink = 0 */
  if (sc->dsink && psink > 0) {
    sc->dsink[c->h] -= psink * delta;
    sc->dsink2[c->h] += psink * psink * delta2;
  }
}

/* Every query row of head g of the current group: LSE, delta and delta's
 * scale, which the key rows' gradients need. */
static void group_stats_row(Check *c, int64_t index, Scratch *sc) {
  const FaAttnShape *s = c->s;
  int D = s->D;
  int64_t g = index / s->Nq, i = index % s->Nq;
  const double *qi = c->Qg[g] + i * D, *doi = c->DOg[g] + i * D;
  double psink;
  double L = softmax_row(c, c->kvh * c->G + (int)g, qi, i, sc->p, sc->g, &psink);
  double delta = 0, *o2 = sc->vec, delta2 = 0;
  memset(o2, 0, (size_t)D * sizeof *o2);
  for (int64_t j = 0; j < s->Nkv; j++) {
    if (sc->p[j] == 0)
      continue;
    const double *vj = c->V + j * D;
    delta += sc->p[j] * dot(doi, vj, D);
    for (int e = 0; e < D; e++)
      o2[e] += sc->p[j] * sc->p[j] * vj[e] * vj[e];
  }
  for (int e = 0; e < D; e++)
    delta2 += doi[e] * doi[e] * o2[e];
  c->lse_g[index] = L;
  c->delta_g[index] = delta;
  c->delta_rss2_g[index] = delta2;
}

/* One sampled key row of the current key/value head: dK and dV, summed over
 * every query row of every query head of the group. */
static void key_row(Check *c, int64_t r, Scratch *sc) {
  const FaAttnShape *s = c->s;
  const FaAttnData *d = c->d;
  int D = s->D;
  int64_t j = c->rows[r], pj;
  fa_attn_variant_seq(c->var, s, j, true, &pj);
  const double *kj = c->K + j * D, *vj = c->V + j * D;
  double *dk = sc->vec, *dv = sc->vec + D, *dk2 = sc->vec + 2 * D, *dv2 = sc->vec + 3 * D;
  memset(sc->vec, 0, (size_t)4 * D * sizeof *sc->vec);
  for (int g = 0; g < c->G; g++)
    for (int64_t i = 0; i < s->Nq; i++) {
      if (!fa_attn_variant_visible(c->var, s, i, j))
        continue;
      int64_t pi, gi = (int64_t)g * s->Nq + i;
      fa_attn_variant_seq(c->var, s, i, false, &pi);
      const double *qi = c->Qg[g] + i * D, *doi = c->DOg[g] + i * D;
      double grad;
      double sc_ij = fa_attn_variant_score(c->var, c->kvh * c->G + g, s->scale * dot(qi, kj, D), pi, pj, &grad);
      double p = exp(sc_ij - c->lse_g[gi]);
      double gs = grad * s->scale;
      double ds = p * (dot(doi, vj, D) - c->delta_g[gi]) * gs;
      double dp2 = 0;
      for (int e = 0; e < D; e++)
        dp2 += doi[e] * doi[e] * vj[e] * vj[e];
      double ds2 = p * p * (dp2 + c->delta_rss2_g[gi]) * gs * gs;
      for (int e = 0; e < D; e++) {
        dv[e] += p * doi[e];
        dk[e] += ds * qi[e];
        dv2[e] += p * p * doi[e] * doi[e];
        dk2[e] += ds2 * qi[e] * qi[e];
      }
    }
  int64_t row = ((int64_t)c->b * s->KVH + c->kvh) * s->Nkv + j;
  compare(&sc->acc, FA_CHECK_DK, d->dtype, d->dk, row * D, dk, dk2, D, 1.0);
  compare(&sc->acc, FA_CHECK_DV, d->dtype, d->dv, row * D, dv, dv2, D, 1.0);
}

/* All n rows, or `want` of them evenly spaced (first and last included). */
static int64_t *choose_rows(int64_t n, bool sample, int want, int64_t *count) {
  int64_t m = sample && want >= 2 && want < n ? want : n;
  int64_t *r = malloc((size_t)m * sizeof *r);
  if (!r)
    return NULL;
  for (int64_t k = 0; k < m; k++)
    r[k] = m == n ? k : k * (n - 1) / (m - 1);
  *count = m;
  return r;
}

/* NaN and infinities; with allow_inf, +inf does not count (the LSE of a
 * row that sees no key: whether it should be there, the check says). */
static int64_t count_nonfinite(DType dt, const void *data, int64_t n, bool allow_inf) {
  int64_t bad = 0;
  if (!data)
    return 0;
  for (int64_t i = 0; i < n; i++) {
    double x = fa_host_get(dt, data, i);
    bad += !isfinite(x) && !(allow_inf && x == INFINITY);
  }
  return bad;
}

bool fa_attn_check(const FaAttnShape *s, const FaAttnData *d, const FaAttnCheckOptions *opt, FaAttnCheckResult *res) {
  memset(res, 0, sizeof *res);
  FaAttnCheckOptions o = opt ? *opt : fa_attn_check_defaults();
  int threads = o.threads > 0 ? o.threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
  if (threads < 1)
    threads = 1;
  bool backward = d->dO && d->dq && d->dk && d->dv;
  int D = s->D, G = s->H / s->KVH;
  int64_t nq = (int64_t)s->B * s->H * s->Nq * D, nkv = (int64_t)s->B * s->KVH * s->Nkv * D;
  int64_t nrows = (int64_t)s->B * s->H * s->Nq;
  const FaAttnVariant *var = fa_attn_variant_any(d->variant) ? d->variant : NULL;
  res->nonfinite[FA_CHECK_O] = count_nonfinite(d->dtype, d->o, nq, false);
  res->nonfinite[FA_CHECK_LSE] = count_nonfinite(DT_F32, d->lse2, nrows, true);
  if (backward) {
    res->nonfinite[FA_CHECK_DQ] = count_nonfinite(d->dtype, d->dq, nq, false);
    res->nonfinite[FA_CHECK_DK] = count_nonfinite(d->dtype, d->dk, nkv, false);
    res->nonfinite[FA_CHECK_DV] = count_nonfinite(d->dtype, d->dv, nkv, false);
  }
  bool sinks = backward && var && var->sinks && d->dsinks;
  if (sinks)
    res->nonfinite[FA_CHECK_DSINKS] = count_nonfinite(DT_F32, d->dsinks, s->H, false);

  /* what to check */
  double work = (double)s->B * s->H * s->Nq * s->Nkv * D * (backward ? 9 : 2);
  bool full = work <= o.full_work;
  int npairs = 0, pb[2] = {0, 0}, ph[2] = {0, 0};
  if (!full) {
    npairs = 1;
    if (o.max_heads >= 2 && (s->B > 1 || s->H > 1)) {
      pb[1] = s->B - 1;
      ph[1] = s->H - 1;
      npairs = 2;
    }
  }
  int64_t nqr = 0, nkr = 0;
  int64_t *qrows = choose_rows(s->Nq, !full && s->Nq > o.sample_above, o.sample_rows, &nqr);
  int64_t *krows = choose_rows(s->Nkv, !full && s->Nkv > o.sample_above, o.sample_rows, &nkr);
  int64_t longest = s->Nq > s->Nkv ? s->Nq : s->Nkv;
  Scratch *sc = calloc((size_t)threads, sizeof *sc);
  bool ok = qrows && krows && sc;
  /* the sinks' gradient sums over every row of every batch entry */
  bool dsinks = sinks && full;
  for (int t = 0; ok && t < threads; t++) {
    sc[t].p = malloc((size_t)longest * sizeof(double));
    sc[t].g = malloc((size_t)longest * sizeof(double));
    sc[t].vec = malloc((size_t)4 * D * sizeof(double));
    sc[t].dsink = dsinks ? calloc((size_t)s->H, sizeof(double)) : NULL;
    sc[t].dsink2 = dsinks ? calloc((size_t)s->H, sizeof(double)) : NULL;
    ok = sc[t].p && sc[t].g && sc[t].vec && (!dsinks || (sc[t].dsink && sc[t].dsink2));
  }
  Check c;
  memset(&c, 0, sizeof c);
  c.s = s;
  c.d = d;
  c.var = var;
  c.G = G;

  /* forward (and dQ) per query head */
  int nheads = full ? s->B * s->H : npairs;
  for (int k = 0; ok && k < nheads; k++) {
    c.b = full ? k / s->H : pb[k];
    c.h = full ? k % s->H : ph[k];
    c.kvh = c.h / G;
    int64_t qbase = ((int64_t)c.b * s->H + c.h) * s->Nq * D, kvbase = ((int64_t)c.b * s->KVH + c.kvh) * s->Nkv * D;
    c.Q = slice(d->dtype, d->q, qbase, s->Nq * D);
    c.K = slice(d->dtype, d->k, kvbase, s->Nkv * D);
    c.V = slice(d->dtype, d->v, kvbase, s->Nkv * D);
    c.DO = backward ? slice(d->dtype, d->dO, qbase, s->Nq * D) : NULL;
    c.rows = qrows;
    ok = c.Q && c.K && c.V && (!backward || c.DO);
    if (ok)
      run_rows(forward_row, &c, nqr, sc, threads);
    free(c.Q), free(c.K), free(c.V), free(c.DO);
    c.Q = c.K = c.V = c.DO = NULL;
  }

  /* dK and dV per key/value head (whole groups of query heads) */
  int nkvheads = full ? s->B * s->KVH : npairs;
  if (!full && npairs == 2 && pb[0] == pb[1] && ph[0] / G == ph[1] / G)
    nkvheads = 1;   /* both pairs in one group */
  for (int k = 0; ok && backward && k < nkvheads; k++) {
    c.b = full ? k / s->KVH : pb[k];
    c.kvh = full ? k % s->KVH : ph[k] / G;
    int64_t kvbase = ((int64_t)c.b * s->KVH + c.kvh) * s->Nkv * D;
    c.K = slice(d->dtype, d->k, kvbase, s->Nkv * D);
    c.V = slice(d->dtype, d->v, kvbase, s->Nkv * D);
    c.Qg = calloc((size_t)G, sizeof *c.Qg);
    c.DOg = calloc((size_t)G, sizeof *c.DOg);
    c.lse_g = malloc((size_t)G * (size_t)s->Nq * sizeof(double));
    c.delta_g = malloc((size_t)G * (size_t)s->Nq * sizeof(double));
    c.delta_rss2_g = malloc((size_t)G * (size_t)s->Nq * sizeof(double));
    ok = c.K && c.V && c.Qg && c.DOg && c.lse_g && c.delta_g && c.delta_rss2_g;
    for (int g = 0; ok && g < G; g++) {
      int64_t qbase = ((int64_t)c.b * s->H + (int64_t)c.kvh * G + g) * s->Nq * D;
      c.Qg[g] = slice(d->dtype, d->q, qbase, s->Nq * D);
      c.DOg[g] = slice(d->dtype, d->dO, qbase, s->Nq * D);
      ok = c.Qg[g] && c.DOg[g];
    }
    if (ok) {
      run_rows(group_stats_row, &c, (int64_t)G * s->Nq, sc, threads);
      c.rows = krows;
      run_rows(key_row, &c, nkr, sc, threads);
    }
    for (int g = 0; c.Qg && c.DOg && g < G; g++)
      free(c.Qg[g]), free(c.DOg[g]);
    free(c.Qg), free(c.DOg), free(c.lse_g), free(c.delta_g), free(c.delta_rss2_g), free(c.K), free(c.V);
    c.Qg = c.DOg = NULL;
    c.lse_g = c.delta_g = c.delta_rss2_g = c.K = c.V = NULL;
  }

  /* the sinks' gradient, head by head */
  for (int h = 0; ok && dsinks && h < s->H; h++) {
    double ref = 0, rss2 = 0;
    for (int t = 0; t < threads; t++) {
      ref += sc[t].dsink[h];
      rss2 += sc[t].dsink2[h];
    }
    compare(&sc[0].acc, FA_CHECK_DSINKS, DT_F32, d->dsinks, h, &ref, &rss2, 1, 1.0);
  }

  /* results */
  Acc total;
  memset(&total, 0, sizeof total);
  for (int t = 0; sc && t < threads; t++)
    for (int w = 0; w < FA_CHECK_N; w++) {
      total.d2[w] += sc[t].acc.d2[w];
      total.r2[w] += sc[t].acc.r2[w];
      total.s2[w] += sc[t].acc.s2[w];
      total.n[w] += sc[t].acc.n[w];
      total.bad[w] += sc[t].acc.bad[w];
    }
  for (int w = 0; w < FA_CHECK_N; w++) {
    res->checked[w] = total.n[w] > 0;
    res->elements[w] = total.n[w];
    res->ref_norm[w] = sqrt(total.r2[w]);
    res->rss_norm[w] = sqrt(total.s2[w]);
    double den = total.r2[w] > total.s2[w] ? total.r2[w] : total.s2[w];
    res->err[w] = total.bad[w] ? NAN : den == 0 ? (total.d2[w] == 0 ? 0 : INFINITY) : sqrt(total.d2[w] / den);
  }
  if (full) {
    snprintf(res->subset, sizeof res->subset, "everything: all %d (batch, head) pairs, all rows", s->B * s->H);
  } else {
    char q[96], kk[160] = "";
    if (nqr == s->Nq)
      snprintf(q, sizeof q, "all %d query rows", s->Nq);
    else
      snprintf(q, sizeof q, "%lld of %d query rows (evenly spaced)", (long long)nqr, s->Nq);
    if (backward)
      snprintf(kk, sizeof kk, "; dK, dV on %s%lld of %d key rows of their kv heads, summed over all %d query heads "
               "of the group", nkr == s->Nkv ? "all " : "", (long long)nkr, s->Nkv, G);
    if (npairs == 2)
      snprintf(res->subset, sizeof res->subset, "2 of %d (batch, head) pairs, (0, 0) and (%d, %d); %s%s",
               s->B * s->H, pb[1], ph[1], q, kk);
    else
      snprintf(res->subset, sizeof res->subset, "1 of %d (batch, head) pairs, (0, 0); %s%s", s->B * s->H, q, kk);
    if (sinks) {
      size_t n = strlen(res->subset);
      snprintf(res->subset + n, sizeof res->subset - n, "; not dsinks (it sums over every row)");
    }
  }
  for (int t = 0; sc && t < threads; t++)
    free(sc[t].p), free(sc[t].g), free(sc[t].vec), free(sc[t].dsink), free(sc[t].dsink2);
  free(sc);
  free(qrows);
  free(krows);
  return ok;
}
