/* check_attention_host.c - libfadsl_attention's host calls (the kernels on
 * the CPU interpreter) against the float64 reference: forward (O and LSE),
 * backward, and backward from a given delta, including the gradient of a loss
 * that reads the LSE; the fused and the deterministic backward pass
 * (fadsl_attention_backward_host_ex), with a program per query head too;
 * grouped-query attention, causal masking, odd lengths,
 * Nq != Nkv, f16 and bf16; threads; and the refusals with their messages
 * (check_shape, null and misaligned pointers).  No GPU needed. */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "attention_ref.h"
#include "fadsl_attention.h"
#include "interp.h"

static fadsl_context *ctx;
static fadsl_attention *attn;

static void setup(void) {
  unsetenv("FADSL_LOG");
  ck_assert_int_eq(fadsl_context_create(-1, &ctx), FADSL_SUCCESS);
  fadsl_status st = fadsl_attention_create(ctx, &attn);
  ck_assert_msg(st == FADSL_SUCCESS, "%s", fadsl_attention_last_error(attn));
}

static void teardown(void) {
  fadsl_attention_destroy(attn);
  fadsl_context_destroy(ctx);
}

static const char *err(void) { return fadsl_attention_last_error(attn); }

/* One problem: inputs rounded to the dtype, kept as bits and as doubles. */
typedef struct Problem {
  FaAttnShape s;
  fadsl_attention_dtype dtype;
  int64_t nq, nkv, nrows;
  uint16_t *q, *k, *v, *dO, *o, *dq, *dk, *dv;
  double *qd, *kd, *vd, *dOd;
  float *lse, *delta;
} Problem;

static DType dt_of(fadsl_attention_dtype d) { return d == FADSL_ATTENTION_BF16 ? DT_BF16 : DT_F16; }

/* xorshift normal-ish values in [-2, 2] */
static double rnd(uint64_t *state) {
  uint64_t x = *state;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  *state = x;
  double u = (double)(x >> 11) / (double)(1ull << 53);
  double w = (double)((x * 2654435761u) >> 11 & ((1ull << 40) - 1)) / (double)(1ull << 40);
  return 2.0 * (u + w - 1.0);
}

static void fill(uint16_t *bits, double *vals, int64_t n, DType dt, uint64_t *seed) {
  for (int64_t i = 0; i < n; i++) {
    double x = fa_round_to_dtype(dt, rnd(seed));
    bits[i] = dt == DT_BF16 ? fa_double_to_bf16_bits(x) : fa_double_to_f16_bits(x);
    vals[i] = x;
  }
}

static void problem_init(Problem *p, int B, int H, int KVH, int Nq, int Nkv, int D, bool causal,
                         fadsl_attention_dtype dtype, uint64_t seed) {
  memset(p, 0, sizeof *p);
  FaAttnShape s = {B, H, KVH, Nq, Nkv, D, causal, 1.0 / sqrt((double)D)};
  p->s = s;
  p->dtype = dtype;
  p->nq = (int64_t)B * H * Nq * D;
  p->nkv = (int64_t)B * KVH * Nkv * D;
  p->nrows = (int64_t)B * H * Nq;
  uint16_t **bq[] = {&p->q, &p->dO, &p->o, &p->dq}, **bkv[] = {&p->k, &p->v, &p->dk, &p->dv};
  for (int i = 0; i < 4; i++) *bq[i] = calloc((size_t)p->nq, 2);
  for (int i = 0; i < 4; i++) *bkv[i] = calloc((size_t)p->nkv, 2);
  p->qd = calloc((size_t)p->nq, sizeof(double));
  p->dOd = calloc((size_t)p->nq, sizeof(double));
  p->kd = calloc((size_t)p->nkv, sizeof(double));
  p->vd = calloc((size_t)p->nkv, sizeof(double));
  p->lse = calloc((size_t)p->nrows, sizeof(float));
  p->delta = calloc((size_t)p->nrows, sizeof(float));
  DType dt = dt_of(dtype);
  fill(p->q, p->qd, p->nq, dt, &seed);
  fill(p->k, p->kd, p->nkv, dt, &seed);
  fill(p->v, p->vd, p->nkv, dt, &seed);
  fill(p->dO, p->dOd, p->nq, dt, &seed);
}

static void problem_free(Problem *p) {
  void *all[] = {p->q, p->k, p->v, p->dO, p->o, p->dq, p->dk, p->dv,
                 p->qd, p->kd, p->vd, p->dOd, p->lse, p->delta};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) free(all[i]);
}

/* ||out - ref|| / ||ref|| with out as dtype bits; NaN fails. */
static double rel_err(const uint16_t *bits, DType dt, const double *ref, int64_t n) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < n; i++) {
    double x = dt == DT_BF16 ? fa_bf16_bits_to_double(bits[i]) : fa_f16_bits_to_double(bits[i]);
    if (isnan(x)) return INFINITY;
    num += (x - ref[i]) * (x - ref[i]);
    den += ref[i] * ref[i];
  }
  return sqrt(num) / sqrt(den);
}

static fadsl_status forward(Problem *p, int threads) {
  const FaAttnShape *s = &p->s;
  return fadsl_attention_forward_host(attn, p->q, p->k, p->v, p->o, p->lse, s->B, s->H, s->KVH, s->Nq, s->Nkv,
                                      s->D, s->causal, 0.0f, p->dtype, threads);
}

static void check_forward(int B, int H, int KVH, int Nq, int Nkv, int D, bool causal, fadsl_attention_dtype dt,
                          double bound) {
  Problem p;
  problem_init(&p, B, H, KVH, Nq, Nkv, D, causal, dt, 0x9e3779b97f4a7c15ull + (uint64_t)Nq);
  ck_assert_msg(forward(&p, 2) == FADSL_SUCCESS, "%s", err());
  double *o = calloc((size_t)p.nq, sizeof(double)), *lse = calloc((size_t)p.nrows, sizeof(double));
  fa_attn_ref_forward(&p.s, p.qd, p.kd, p.vd, o, lse);
  double e = rel_err(p.o, dt_of(dt), o, p.nq);
  ck_assert_msg(e < bound, "O: relative error %g (bound %g) at B=%d H=%d KVH=%d Nq=%d Nkv=%d D=%d causal=%d", e,
                bound, B, H, KVH, Nq, Nkv, D, causal);
  double num = 0, den = 0;   /* lse is base 2: lse_nat = lse * ln 2 */
  for (int64_t i = 0; i < p.nrows; i++) {
    double x = p.lse[i] * M_LN2;
    num += (x - lse[i]) * (x - lse[i]);
    den += lse[i] * lse[i];
  }
  ck_assert_msg(sqrt(num) / sqrt(den) < 1e-4, "LSE: relative error %g", sqrt(num) / sqrt(den));
  free(o);
  free(lse);
  problem_free(&p);
}

START_TEST(test_forward_gqa_unequal_lengths_f16) { check_forward(2, 4, 2, 37, 53, 32, false, FADSL_ATTENTION_F16, 2e-3); }
END_TEST

START_TEST(test_forward_causal_odd_bf16) { check_forward(1, 3, 1, 45, 45, 16, true, FADSL_ATTENTION_BF16, 1e-2); }
END_TEST

START_TEST(test_forward_d64_mha) { check_forward(1, 2, 2, 70, 70, 64, true, FADSL_ATTENTION_F16, 2e-3); }
END_TEST

/* The extra gradient of sum_i g_i * lse_nat_i: d lse_i / d s_ij = P_ij with
 * s_ij = scale * q_i . k_j, so dq_i += g_i * scale * sum_j P_ij k_j and
 * dk_j += scale * sum_i g_i P_ij q_i (dv does not change). */
static void lse_grad_ref(const Problem *p, const double *g, double *dq, double *dk) {
  const FaAttnShape *s = &p->s;
  int G = s->H / s->KVH, D = s->D;
  double *w = calloc((size_t)s->Nkv, sizeof(double));
  for (int b = 0; b < s->B; b++)
    for (int h = 0; h < s->H; h++) {
      int64_t qh = ((int64_t)b * s->H + h) * s->Nq, kh = ((int64_t)b * s->KVH + h / G) * s->Nkv;
      for (int i = 0; i < s->Nq; i++) {
        int last = s->causal ? i : s->Nkv - 1;
        double m = -INFINITY, l = 0;
        for (int j = 0; j <= last; j++) {
          double d = 0;
          for (int c = 0; c < D; c++) d += p->qd[(qh + i) * D + c] * p->kd[(kh + j) * D + c];
          w[j] = d * s->scale;
          m = w[j] > m ? w[j] : m;
        }
        for (int j = 0; j <= last; j++) l += exp(w[j] - m);
        double gi = g[qh + i];
        for (int j = 0; j <= last; j++) {
          double P = exp(w[j] - m) / l;
          for (int c = 0; c < D; c++) {
            dq[(qh + i) * D + c] += gi * s->scale * P * p->kd[(kh + j) * D + c];
            dk[(kh + j) * D + c] += s->scale * gi * P * p->qd[(qh + i) * D + c];
          }
        }
      }
    }
  free(w);
}

static void check_backward(int B, int H, int KVH, int Nq, int Nkv, int D, bool causal, fadsl_attention_dtype dt,
                           double bound) {
  Problem p;
  problem_init(&p, B, H, KVH, Nq, Nkv, D, causal, dt, 0x243f6a8885a308d3ull + (uint64_t)Nkv);
  const FaAttnShape *s = &p.s;
  DType t = dt_of(dt);
  ck_assert_msg(forward(&p, 1) == FADSL_SUCCESS, "%s", err());
  fadsl_status st = fadsl_attention_backward_host(attn, p.q, p.k, p.v, p.o, p.lse, p.dO, p.dq, p.dk, p.dv, p.delta,
                                                  s->B, s->H, s->KVH, s->Nq, s->Nkv, s->D, s->causal, 0.0f, dt, 2);
  ck_assert_msg(st == FADSL_SUCCESS, "%s", err());
  double *dq = calloc((size_t)p.nq, sizeof(double)), *dk = calloc((size_t)p.nkv, sizeof(double)),
         *dv = calloc((size_t)p.nkv, sizeof(double));
  fa_attn_ref_backward(s, p.qd, p.kd, p.vd, p.dOd, dq, dk, dv);
  double eq = rel_err(p.dq, t, dq, p.nq), ek = rel_err(p.dk, t, dk, p.nkv), ev = rel_err(p.dv, t, dv, p.nkv);
  ck_assert_msg(eq < bound && ek < bound && ev < bound, "dq %g dk %g dv %g (bound %g)", eq, ek, ev, bound);

  /* From a given delta: rowsum(dO * O) minus g gives the gradient of
   * sum(O * dO) + sum(g * lse_nat). */
  double *g = calloc((size_t)p.nrows, sizeof(double));
  uint64_t seed = 77;
  for (int64_t r = 0; r < p.nrows; r++) {
    double rowsum = 0;
    for (int c = 0; c < s->D; c++) {
      double o = t == DT_BF16 ? fa_bf16_bits_to_double(p.o[r * s->D + c]) : fa_f16_bits_to_double(p.o[r * s->D + c]);
      rowsum += o * p.dOd[r * s->D + c];
    }
    g[r] = rnd(&seed) * 0.5;
    p.delta[r] = (float)(rowsum - g[r]);
  }
  memset(p.dq, 0xff, (size_t)p.nq * 2);   /* NaN bits: every element must be written */
  memset(p.dk, 0xff, (size_t)p.nkv * 2);
  memset(p.dv, 0xff, (size_t)p.nkv * 2);
  st = fadsl_attention_backward_delta_host(attn, p.q, p.k, p.v, p.lse, p.dO, p.dq, p.dk, p.dv, p.delta, s->B, s->H,
                                           s->KVH, s->Nq, s->Nkv, s->D, s->causal, 0.0f, dt, 2);
  ck_assert_msg(st == FADSL_SUCCESS, "%s", err());
  lse_grad_ref(&p, g, dq, dk);
  eq = rel_err(p.dq, t, dq, p.nq);
  ek = rel_err(p.dk, t, dk, p.nkv);
  ev = rel_err(p.dv, t, dv, p.nkv);
  ck_assert_msg(eq < bound && ek < bound && ev < bound, "with the LSE's gradient: dq %g dk %g dv %g (bound %g)", eq,
                ek, ev, bound);
  free(g);
  free(dq);
  free(dk);
  free(dv);
  problem_free(&p);
}

START_TEST(test_backward_causal_gqa_f16) { check_backward(1, 4, 2, 33, 33, 32, true, FADSL_ATTENTION_F16, 1e-2); }
END_TEST

START_TEST(test_backward_unequal_bf16) { check_backward(2, 2, 1, 19, 41, 16, false, FADSL_ATTENTION_BF16, 3e-2); }
END_TEST

/* fadsl_attention_backward_host_ex: fused (its own accumulator, or the
 * caller's, which then holds dQ / scale; with delta computed in attn_bwd),
 * and deterministic (the caller's accumulator left alone), each against
 * float64; the deterministic gradients the same to the bit on 1 and 3
 * threads. */
static void backward_ex(Problem *p, const fadsl_attention_options *o, int threads) {
  const FaAttnShape *s = &p->s;
  memset(p->dq, 0xff, (size_t)p->nq * 2);   /* NaN bits: every element must be written */
  memset(p->dk, 0xff, (size_t)p->nkv * 2);
  memset(p->dv, 0xff, (size_t)p->nkv * 2);
  fadsl_status st = fadsl_attention_backward_host_ex(attn, o, p->q, p->k, p->v, p->o, p->lse, p->dO, p->dq, p->dk,
                                                     p->dv, p->delta, s->B, s->H, s->KVH, s->Nq, s->Nkv, s->D, 0.0f,
                                                     p->dtype, threads);
  ck_assert_msg(st == FADSL_SUCCESS, "%s", err());
}

static void check_grads(Problem *p, const double *dq, const double *dk, const double *dv, double bound,
                        const char *what) {
  DType t = dt_of(p->dtype);
  double eq = rel_err(p->dq, t, dq, p->nq), ek = rel_err(p->dk, t, dk, p->nkv), ev = rel_err(p->dv, t, dv, p->nkv);
  ck_assert_msg(eq < bound && ek < bound && ev < bound, "%s: dq %g dk %g dv %g (bound %g)", what, eq, ek, ev, bound);
}

START_TEST(test_backward_ex_modes) {
  Problem p;
  problem_init(&p, 1, 4, 2, 45, 70, 32, false, FADSL_ATTENTION_BF16, 11);
  const FaAttnShape *s = &p.s;
  ck_assert_msg(forward(&p, 1) == FADSL_SUCCESS, "%s", err());
  double *dq = calloc((size_t)p.nq, sizeof(double)), *dk = calloc((size_t)p.nkv, sizeof(double)),
         *dv = calloc((size_t)p.nkv, sizeof(double));
  fa_attn_ref_backward(s, p.qd, p.kd, p.vd, p.dOd, dq, dk, dv);
  double bound = 3e-2;
  backward_ex(&p, NULL, 2);   /* the defaults: fused, the call's own accumulator */
  check_grads(&p, dq, dk, dv, bound, "fused");

  size_t acc_bytes = fadsl_attention_dq_accum_bytes(s->B, s->H, s->Nq, s->D);
  ck_assert_uint_eq(acc_bytes, (size_t)4 * s->B * s->H * s->Nq * s->D);
  float *acc = malloc(acc_bytes);
  memset(acc, 0xff, acc_bytes);
  fadsl_attention_options o;
  fadsl_attention_options_init(&o);
  o.dq_accum = (uint64_t)(uintptr_t)acc;
  backward_ex(&p, &o, 3);
  check_grads(&p, dq, dk, dv, bound, "fused, the caller's accumulator");
  /* it holds dQ before the scale and the rounding */
  for (int64_t i = 0; i < p.nq; i++)
    ck_assert_msg(fabs(acc[i] * s->scale - dq[i]) <= 0.05 * (1 + fabs(dq[i])), "accumulator[%lld] %g, dq %g",
                  (long long)i, acc[i] * s->scale, dq[i]);
  o.fuse_delta = 1;
  backward_ex(&p, &o, 1);
  check_grads(&p, dq, dk, dv, bound, "fused, delta in attn_bwd");
  o.fuse_delta = 0;

  memset(acc, 0xff, acc_bytes);
  o.deterministic = 1;
  backward_ex(&p, &o, 1);
  check_grads(&p, dq, dk, dv, bound, "deterministic");
  for (int64_t i = 0; i < p.nq; i++)
    ck_assert_msg(isnan(acc[i]), "the deterministic pass wrote the accumulator (%lld: %g)", (long long)i, acc[i]);
  size_t bq = (size_t)p.nq * 2, bkv = (size_t)p.nkv * 2;
  uint16_t *dq1 = malloc(bq), *dk1 = malloc(bkv), *dv1 = malloc(bkv);
  memcpy(dq1, p.dq, bq);
  memcpy(dk1, p.dk, bkv);
  memcpy(dv1, p.dv, bkv);
  backward_ex(&p, &o, 3);
  ck_assert_msg(!memcmp(dq1, p.dq, bq) && !memcmp(dk1, p.dk, bkv) && !memcmp(dv1, p.dv, bkv),
                "the deterministic pass gave other bits on 3 threads");

  /* refusals */
  o.fuse_delta = 1;
  ck_assert_int_eq(fadsl_attention_backward_host_ex(attn, &o, p.q, p.k, p.v, p.o, p.lse, p.dO, p.dq, p.dk, p.dv,
                                                    p.delta, s->B, s->H, s->KVH, s->Nq, s->Nkv, s->D, 0.0f, p.dtype,
                                                    1),
                   FADSL_ERROR_INVALID_ARGUMENT);
  ck_assert_msg(strstr(err(), "fuse_delta is for the fused backward pass, which a deterministic call does not run"),
                "%s", err());
  fadsl_attention_options_init(&o);
  o.softcap = 5;
  ck_assert_int_eq(fadsl_attention_backward_host_ex(attn, &o, p.q, p.k, p.v, p.o, p.lse, p.dO, p.dq, p.dk, p.dv,
                                                    p.delta, s->B, s->H, s->KVH, s->Nq, s->Nkv, s->D, 0.0f, p.dtype,
                                                    1),
                   FADSL_ERROR_UNSUPPORTED);
  ck_assert_msg(strstr(err(), "the host calls run plain attention"), "%s", err());
  fadsl_attention_options_init(&o);
  o.size = 4;
  ck_assert_int_eq(fadsl_attention_backward_host_ex(attn, &o, p.q, p.k, p.v, p.o, p.lse, p.dO, p.dq, p.dk, p.dv,
                                                    p.delta, s->B, s->H, s->KVH, s->Nq, s->Nkv, s->D, 0.0f, p.dtype,
                                                    1),
                   FADSL_ERROR_INVALID_ARGUMENT);
  ck_assert_msg(strstr(err(), "the options' size 4 is too small"), "%s", err());
  free(dq1), free(dk1), free(dv1);
  free(acc);
  free(dq), free(dk), free(dv);
  problem_free(&p);
}
END_TEST

/* The fused pass with a program per query head (dkv_accum): with grouped
 * queries it writes the caller's dK and dV accumulators (poisoned before)
 * and gives the gradients of float64, delta computed by attn_bwd_prep or in
 * attn_bwd_heads; without grouping the accumulators are left alone; a
 * misaligned one is refused. */
static void check_heads(int H, int KVH, bool causal, fadsl_attention_dtype dt, double bound) {
  Problem p;
  problem_init(&p, 2, H, KVH, 57, 57, 32, causal, dt, 23 + (uint64_t)H);
  const FaAttnShape *s = &p.s;
  ck_assert_msg(forward(&p, 1) == FADSL_SUCCESS, "%s", err());
  double *dq = calloc((size_t)p.nq, sizeof(double)), *dk = calloc((size_t)p.nkv, sizeof(double)),
         *dv = calloc((size_t)p.nkv, sizeof(double));
  fa_attn_ref_backward(s, p.qd, p.kd, p.vd, p.dOd, dq, dk, dv);
  size_t dkv_bytes = fadsl_attention_dkv_accum_bytes(s->B, s->KVH, s->Nkv, s->D);
  ck_assert_uint_eq(dkv_bytes, (size_t)2 * 4 * s->B * s->KVH * s->Nkv * s->D);
  float *dkv = malloc(dkv_bytes + 4);
  fadsl_attention_options o;
  fadsl_attention_options_init(&o);
  o.causal = causal;
  o.dkv_accum = (uint64_t)(uintptr_t)dkv;
  for (int fuse_delta = 0; fuse_delta < 2; fuse_delta++) {
    memset(dkv, 0xff, dkv_bytes);
    o.fuse_delta = fuse_delta;
    backward_ex(&p, &o, 2);
    check_grads(&p, dq, dk, dv, bound, fuse_delta ? "a program per query head, delta in attn_bwd_heads"
                                                  : "a program per query head");
    /* dK's accumulator and then dV's: the gradients before the rounding */
    for (int64_t i = 0; i < p.nkv; i++) {
      bool grouped = H > KVH;
      float ak = dkv[i], av = dkv[p.nkv + i];
      if (!grouped) {
        ck_assert_msg(isnan(ak) && isnan(av), "H == KVH: the accumulators were written (%lld)", (long long)i);
        continue;
      }
      ck_assert_msg(fabs(ak - dk[i]) <= 0.05 * (1 + fabs(dk[i])), "dK accumulator[%lld] %g, dk %g", (long long)i,
                    ak, dk[i]);
      ck_assert_msg(fabs(av - dv[i]) <= 0.05 * (1 + fabs(dv[i])), "dV accumulator[%lld] %g, dv %g", (long long)i,
                    av, dv[i]);
    }
  }
  o.fuse_delta = 0;
  o.dkv_accum = (uint64_t)(uintptr_t)dkv + 2;
  ck_assert_int_eq(fadsl_attention_backward_host_ex(attn, &o, p.q, p.k, p.v, p.o, p.lse, p.dO, p.dq, p.dk, p.dv,
                                                    p.delta, s->B, s->H, s->KVH, s->Nq, s->Nkv, s->D, 0.0f, p.dtype,
                                                    1),
                   FADSL_ERROR_INVALID_ARGUMENT);
  ck_assert_msg(strstr(err(), "dkv_accum is not 4-byte aligned"), "%s", err());
  ck_assert_uint_eq(fadsl_attention_dkv_accum_bytes(0, 1, 1, 1), 0);
  free(dkv);
  free(dq), free(dk), free(dv);
  problem_free(&p);
}

START_TEST(test_backward_ex_heads_causal_f16) { check_heads(6, 2, true, FADSL_ATTENTION_F16, 1e-2); }
END_TEST

START_TEST(test_backward_ex_heads_bf16) { check_heads(4, 1, false, FADSL_ATTENTION_BF16, 3e-2); }
END_TEST

START_TEST(test_backward_ex_heads_ungrouped) { check_heads(3, 3, true, FADSL_ATTENTION_F16, 1e-2); }
END_TEST

/* Threads share programs that write disjoint rows: the result is the same
 * bit for bit. */
START_TEST(test_threads_same_bits) {
  Problem a, b;
  problem_init(&a, 1, 2, 1, 130, 130, 32, true, FADSL_ATTENTION_F16, 5);
  problem_init(&b, 1, 2, 1, 130, 130, 32, true, FADSL_ATTENTION_F16, 5);
  ck_assert_msg(forward(&a, 1) == FADSL_SUCCESS, "%s", err());
  ck_assert_msg(forward(&b, 2) == FADSL_SUCCESS, "%s", err());
  ck_assert_int_eq(memcmp(a.o, b.o, (size_t)a.nq * 2), 0);
  ck_assert_int_eq(memcmp(a.lse, b.lse, (size_t)a.nrows * 4), 0);
  problem_free(&a);
  problem_free(&b);
}
END_TEST

#define ck_refused(call, needle)                                                             \
  do {                                                                                      \
    fadsl_status st_ = (call);                                                              \
    ck_assert_msg(st_ == FADSL_ERROR_INVALID_ARGUMENT, "status %d: %s", st_, err());        \
    ck_assert_msg(strstr(err(), (needle)), "message '%s' lacks '%s'", err(), (needle));      \
  } while (0)

START_TEST(test_refusals) {
  ck_assert_int_eq(fadsl_attention_check_shape(attn, 1, 8, 2, 100, 100, 64, 1, 0.0f, FADSL_ATTENTION_F16),
                   FADSL_SUCCESS);
  ck_refused(fadsl_attention_check_shape(attn, 1, 6, 4, 100, 100, 64, 0, 0.0f, FADSL_ATTENTION_F16),
             "fadsl_attention_check_shape: H=6 query heads are not a multiple of KVH=4 key/value heads");
  ck_refused(fadsl_attention_check_shape(attn, 1, 4, 4, 100, 100, 48, 0, 0.0f, FADSL_ATTENTION_F16),
             "head dimension D=48: it must be 16, 32, 64, 128 or 256");
  ck_refused(fadsl_attention_check_shape(attn, 1, 4, 4, 100, 90, 64, 1, 0.0f, FADSL_ATTENTION_F16),
             "causal attention needs Nq == Nkv");
  ck_refused(fadsl_attention_check_shape(attn, 1, 4, 4, 100, 100, 64, 0, -1.0f, FADSL_ATTENTION_F16),
             "scale -1: want a positive finite number");
  ck_refused(fadsl_attention_check_shape(attn, 1, 4, 4, 100, 100, 64, 0, 0.0f, (fadsl_attention_dtype)7),
             "unknown dtype 7");
  Problem p;
  problem_init(&p, 1, 2, 2, 16, 16, 16, false, FADSL_ATTENTION_F16, 9);
  ck_refused(fadsl_attention_forward_host(attn, p.q, NULL, p.v, p.o, p.lse, 1, 2, 2, 16, 16, 16, 0, 0.0f,
                                          FADSL_ATTENTION_F16, 1),
             "fadsl_attention_forward_host: k is a null pointer");
  ck_refused(fadsl_attention_forward_host(attn, (char *)p.q + 1, p.k, p.v, p.o, p.lse, 1, 2, 2, 16, 16, 16, 0, 0.0f,
                                          FADSL_ATTENTION_F16, 1),
             "q (0x");
  ck_assert_msg(strstr(err(), "is not 2-byte aligned"), "%s", err());
  ck_assert_int_eq(fadsl_attention_forward_host(NULL, p.q, p.k, p.v, p.o, p.lse, 1, 2, 2, 16, 16, 16, 0, 0.0f,
                                                FADSL_ATTENTION_F16, 1),
                   FADSL_ERROR_INVALID_ARGUMENT);
  problem_free(&p);
}
END_TEST

int main(void) {
  Suite *s = suite_create("attention_host");
  TCase *tc = tcase_create("host");
  tcase_set_timeout(tc, 120);
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, test_forward_gqa_unequal_lengths_f16);
  tcase_add_test(tc, test_forward_causal_odd_bf16);
  tcase_add_test(tc, test_forward_d64_mha);
  tcase_add_test(tc, test_backward_causal_gqa_f16);
  tcase_add_test(tc, test_backward_unequal_bf16);
  tcase_add_test(tc, test_backward_ex_modes);
  tcase_add_test(tc, test_backward_ex_heads_causal_f16);
  tcase_add_test(tc, test_backward_ex_heads_bf16);
  tcase_add_test(tc, test_backward_ex_heads_ungrouped);
  tcase_add_test(tc, test_threads_same_bits);
  tcase_add_test(tc, test_refusals);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
