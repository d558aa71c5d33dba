/* check_run.c - the language's scan, index, random and control-flow builtins
 * on the CPU interpreter, against references computed here: the kernels of
 * tests/gpu/codegen.fa (which tests/gpu_codegen.c also runs on the GPU, against
 * the interpreter) on deterministic inputs, compared with what C computes for
 * them - cumulative sums and products and associative scans in index order,
 * argmax/argmin by a linear search, an independent Philox 4x32 (checked
 * against the published known-answer vectors) for rand/randn, erf/fma from
 * libm, the loops and early returns written out in C, and device_print's text.
 */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ast.h"
#include "interp.h"
#include "sema.h"

#ifndef FA_SRCDIR
#define FA_SRCDIR "."
#endif

static const char *codegen_path(void) { return FA_SRCDIR "/tests/gpu/codegen.fa"; }

/* ---- running one kernel ---------------------------------------------------------------- */

enum { MAX_BUFS = 16 };

typedef struct Run {
  FaCompiler fc;
  IrKernel *k;
  FaInterp *in;
  void *bufs[MAX_BUFS];
  int nbufs;
} Run;

/* Parses the file and specialises `kernel` with "NAME=VALUE ..." constexprs. */
static void r_init(Run *r, const char *kernel, const char *constexprs) {
  memset(r, 0, sizeof *r);
  fa_compiler_init(&r->fc, stderr);
  const Source *src = fa_source_read(&r->fc, codegen_path());
  Node *mod = src ? fa_parse(&r->fc, src) : NULL;
  FaProgram *p = mod ? fa_program_check(&r->fc, mod) : NULL;
  ck_assert_msg(p, "cannot load %s", codegen_path());
  FaKernelInfo *ki = fa_program_kernel(p, kernel);
  ck_assert_msg(ki, "no kernel %s", kernel);
  FaBinding binds[16];
  int nb = 0;
  char buf[256];
  snprintf(buf, sizeof buf, "%s", constexprs);
  for (char *tok = strtok(buf, " "); tok && nb < 16; tok = strtok(NULL, " ")) {
    char *eq = strchr(tok, '=');
    ck_assert(eq);
    *eq = '\0';
    binds[nb].name = fa_arena_strdup(&r->fc.arena, tok);
    ck_assert(fa_const_parse(eq + 1, &binds[nb].value));
    nb++;
  }
  FaLaunchConfig cfg = {.warps = 4, .stages = 2};
  r->k = fa_specialize(&r->fc, p, ki, binds, nb, cfg);
  ck_assert_msg(r->k, "cannot specialise %s: %s", kernel, r->fc.diag.text.data ? r->fc.diag.text.data : "");
  r->in = fa_interp_new(&r->fc, r->k);
  ck_assert(r->in);
}

static int r_param(Run *r, const char *name) {
  int p = fa_interp_param_index(r->in, name);
  ck_assert_msg(p >= 0, "no parameter %s", name);
  return p;
}

static void r_scalar(Run *r, const char *name, double v) {
  int p = r_param(r, name);
  DType dt = r->k->device->params[p].value->type.dtype;
  FaHostValue hv = fa_dtype_is_float(dt) ? fa_host_float(dt, v) : fa_host_int(dt, (int64_t)v);
  ck_assert(fa_interp_bind_scalar(r->in, p, hv));
}

/* A zeroed buffer of the parameter's declared extent (scalars bound first). */
static void *r_buf(Run *r, const char *name, int64_t *count) {
  int p = r_param(r, name);
  int64_t dims[FA_MAX_RANK], n = 1;
  int rank = fa_interp_extent(r->in, p, dims);
  ck_assert(rank > 0);
  for (int d = 0; d < rank; d++)
    n *= dims[d];
  DType dt = r->k->device->params[p].value->type.pointee;
  void *data = calloc((size_t)n, (size_t)fa_dtype_size(dt));
  ck_assert(data && r->nbufs < MAX_BUFS);
  r->bufs[r->nbufs++] = data;
  ck_assert(fa_interp_bind_buffer(r->in, p, dt, data, n));
  if (count)
    *count = n;
  return data;
}

static void r_run_threads(Run *r, int threads) {
  FaInterpOptions opt = {threads, NULL};
  ck_assert_msg(fa_interp_run(r->in, &opt), "%s", r->fc.diag.text.data ? r->fc.diag.text.data : "");
}

static void r_run(Run *r) {
  FaInterpOptions opt = {1, NULL};
  ck_assert_msg(fa_interp_run(r->in, &opt), "%s", r->fc.diag.text.data ? r->fc.diag.text.data : "");
}

static void r_free(Run *r) {
  for (int i = 0; i < r->nbufs; i++)
    free(r->bufs[i]);
  fa_interp_free(r->in);
  fa_compiler_free(&r->fc);
}

/* Deterministic inputs in [lo, hi). */
static uint64_t lcg = 88172645463325252ull;
static double urand(double lo, double hi) {
  lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
  return lo + (hi - lo) * (double)(lcg >> 11) / 9007199254740992.0;
}

static void fill_f32(float *x, int64_t n, double lo, double hi) {
  for (int64_t i = 0; i < n; i++)
    x[i] = (float)urand(lo, hi);
}

static bool close_to(double got, double want, double atol, double rtol) {
  if (isnan(want))
    return isnan(got);
  return fabs(got - want) <= atol + rtol * fabs(want);
}

/* ---- erf, fma, clamp ----------------------------------------------------------------- */

START_TEST(test_erf_fma_clamp) {
  Run r;
  r_init(&r, "mathx", "T=f32 BLOCK=64");
  int n = 200;
  r_scalar(&r, "n", n);
  float *x = r_buf(&r, "x", NULL), *y = r_buf(&r, "y", NULL), *z = r_buf(&r, "z", NULL);
  float *oe = r_buf(&r, "o_erf", NULL), *of = r_buf(&r, "o_fma", NULL), *oc = r_buf(&r, "o_clamp", NULL);
  float *oa = r_buf(&r, "o_clamp_all", NULL);
  fill_f32(x, n, -3, 3);
  fill_f32(y, n, -2, 2);
  fill_f32(z, n, -2, 2);
  r_run(&r);
  for (int i = 0; i < n; i++) {
    float a = i % 7 == 3 ? NAN : x[i];
    ck_assert_msg(close_to(oe[i], erf(a), 2e-7, 2e-7), "erf(%g) = %g, not %g", a, oe[i], erf(a));
    float want = fmaf(a, y[i], z[i]); /* one rounding */
    ck_assert_msg(isnan(a) ? isnan(of[i]) : of[i] == want, "fma at %d: %a, not %a", i, of[i], want);
    /* propagate_nan="none": a NaN x gives the lower bound */
    float c = isnan(a) ? -1.0f : fminf(fmaxf(a, -1.0f), 1.0f);
    ck_assert_msg(oc[i] == c, "clamp at %d: %g, not %g", i, oc[i], c);
    float ca = isnan(a) ? NAN : fminf(fmaxf(a, y[i]), 1.5f);
    ck_assert_msg(close_to(oa[i], ca, 0, 0), "clamp(all) at %d: %g, not %g", i, oa[i], ca);
  }
  r_free(&r);
}
END_TEST

/* ---- atomic_add through block pointers ------------------------------------------------- */

/* block_atomics: program (i, p) adds rows i .. i+BM-1 of x at rows shifted
 * down by p, clipped at the edges.  With P = 2 an element receives at most
 * two additions into zero, 0 + a + b, whose f32 (and T) result does not
 * depend on their order: the sums must be the C float sums to the bit, from
 * random inputs and with 1 or 3 interpreter threads.  With P = 4 the inputs
 * are multiples of 1/8, whose sums are exact in any order. */
static void block_atomics_case(const char *T, DType dt, int M, int N, int P, bool exact_inputs, int threads) {
  Run r;
  char cx[64];
  snprintf(cx, sizeof cx, "T=%s BM=16 BN=64", T);   /* N <= BN: one tile across */
  r_init(&r, "block_atomics", cx);
  r_scalar(&r, "M", M);
  r_scalar(&r, "N", N);
  r_scalar(&r, "P", P);
  float *x = r_buf(&r, "x", NULL), *acc = r_buf(&r, "acc", NULL);
  int32_t *cnt = r_buf(&r, "cnt", NULL);
  void *acc_t = r_buf(&r, "acc_t", NULL);
  for (int i = 0; i < M * N; i++)
    x[i] = exact_inputs ? (float)((int)urand(-16, 17) / 8.0) : (float)urand(-3, 3);
  r_run_threads(&r, threads);
  for (int row = 0; row < M; row++)
    for (int c = 0; c < N; c++) {
      float want = 0;
      int n = 0;
      for (int p = 0; p < P; p++) {
        int src = row - p;   /* the row of x that program p adds here */
        if (src < 0)
          continue;
        want += x[src * N + c];
        n++;
      }
      int i = row * N + c;
      ck_assert_msg(cnt[i] == n, "cnt[%d][%d] = %d, not %d (threads %d)", row, c, cnt[i], n, threads);
      ck_assert_msg(acc[i] == want, "acc[%d][%d] = %a, not %a (threads %d)", row, c, acc[i], want, threads);
    }
  /* T: each addend rounded to T, each sum rounded to T */
  char one[8];
  for (int row = 0; row < M; row++)
    for (int c = 0; c < N; c++) {
      double sum = 0;
      for (int p = 0; p < P; p++) {
        int src = row - p;
        if (src < 0)
          continue;
        fa_host_set(dt, one, 0, x[src * N + c]);
        fa_host_set(dt, one, 0, sum + fa_host_get(dt, one, 0));
        sum = fa_host_get(dt, one, 0);
      }
      double got = fa_host_get(dt, acc_t, row * N + c);
      ck_assert_msg(got == sum, "acc_t[%d][%d] = %a, not %a (%s, threads %d)", row, c, got, sum, T, threads);
    }
  r_free(&r);
}

START_TEST(test_block_atomics) {
  static const char *const names[] = {"f32", "f16", "bf16"};
  static const DType dts[] = {DT_F32, DT_F16, DT_BF16};
  for (int t = 0; t < 3; t++)
    for (int threads = 1; threads <= 3; threads += 2) {
      block_atomics_case(names[t], dts[t], 37, 45, 2, false, threads);   /* odd sizes: every edge clipped */
      block_atomics_case(names[t], dts[t], 64, 64, 4, true, threads);
    }
}
END_TEST

/* ---- scans ------------------------------------------------------------------------------ */

START_TEST(test_scans) {
  Run r;
  enum { N = 16, BM = 8 };
  int M = 21;
  r_init(&r, "scans", "N=16 BM=8");
  r_scalar(&r, "M", M);
  float *x = r_buf(&r, "x", NULL), *w = r_buf(&r, "w", NULL);
  float *c0 = r_buf(&r, "c0", NULL), *c1 = r_buf(&r, "c1", NULL), *crev = r_buf(&r, "crev", NULL);
  float *cprod = r_buf(&r, "cprod", NULL), *sa = r_buf(&r, "sa", NULL), *sb = r_buf(&r, "sb", NULL);
  float *ra = r_buf(&r, "ra", NULL), *rb = r_buf(&r, "rb", NULL);
  int32_t *cnt = r_buf(&r, "cnt", NULL);
  fill_f32(x, M * N, -2, 2);
  fill_f32(w, M * N, -2, 2);
  r_run(&r);
  for (int row = 0; row < M; row++) {
    /* along axis 0: within the program's block of BM rows */
    for (int col = 0; col < N; col++) {
      double s = 0;
      for (int q = row - row % BM; q <= row; q++)
        s += x[q * N + col];
      ck_assert_msg(close_to(c0[row * N + col], s, 1e-5, 1e-5), "cumsum axis 0 at (%d, %d)", row, col);
    }
    const float *v = x + row * N, *g = w + row * N;
    double s = 0, prod = 1, A = 1, B = 0;
    int count = 0;
    for (int col = 0; col < N; col++) {
      s += v[col];
      prod *= (double)(float)(g[col] * 0.5f * 0.2f + 1.0f);
      /* (A, B) then (a, b): x -> a * (A x + B) + b */
      double a = g[col] * 0.5f;
      A = col ? A * a : a;
      B = col ? B * a + v[col] : v[col];
      count += v[col] > 0;
      int at = row * N + col;
      ck_assert_msg(close_to(c1[at], s, 1e-5, 1e-5), "cumsum at (%d, %d): %g, not %g", row, col, c1[at], s);
      ck_assert_msg(close_to(cprod[at], prod, 1e-5, 1e-5), "cumprod at (%d, %d)", row, col);
      ck_assert_msg(close_to(sa[at], A, 1e-6, 1e-5) && close_to(sb[at], B, 1e-5, 1e-5),
                    "associative_scan at (%d, %d): (%g, %g), not (%g, %g)", row, col, sa[at], sb[at], A, B);
      ck_assert_int_eq(cnt[at], count);
    }
    /* reverse: from the last element, the scanned part first */
    s = 0;
    A = 1;
    B = 0;
    for (int col = N - 1; col >= 0; col--) {
      s += v[col];
      double a = g[col] * 0.5f;
      A = col < N - 1 ? A * a : a;
      B = col < N - 1 ? B * a + v[col] : v[col];
      int at = row * N + col;
      ck_assert_msg(close_to(crev[at], s, 1e-5, 1e-5), "reverse cumsum at (%d, %d)", row, col);
      ck_assert_msg(close_to(ra[at], A, 1e-6, 1e-5) && close_to(rb[at], B, 1e-5, 1e-5),
                    "reverse associative_scan at (%d, %d): (%g, %g), not (%g, %g)", row, col, ra[at], rb[at], A, B);
    }
  }
  r_free(&r);
}
END_TEST

/* ---- argmax / argmin ---------------------------------------------------------------------- */

/* Index of the largest (sign 1) or smallest (-1) of n values at stride st:
 * NaN beats every number; ties go to the first (last when !first). */
static int arg_ref(const double *q, int n, int st, int sign, bool first) {
  int best = 0;
  for (int i = 1; i < n; i++) {
    double b = q[best * st], v = q[i * st];
    bool better = isnan(b) ? (!first && isnan(v)) : isnan(v) || sign * v > sign * b || (!first && v == b);
    if (better)
      best = i;
  }
  return best;
}

START_TEST(test_argx) {
  Run r;
  enum { BM = 8, N = 16 };
  r_init(&r, "argx", "T=f32 BM=8 N=16");
  float *x = r_buf(&r, "x", NULL);
  int32_t *amax1 = r_buf(&r, "amax1", NULL), *amin1 = r_buf(&r, "amin1", NULL), *amax0 = r_buf(&r, "amax0", NULL);
  int32_t *last1 = r_buf(&r, "last1", NULL), *keep = r_buf(&r, "keep", NULL);
  fill_f32(x, BM * N, -2, 2);
  double q[BM * N];
  for (int i = 0; i < BM * N; i++)
    q[i] = i % 37 == 5 ? NAN : floor((double)(x[i] * 2.0f));
  r_run(&r);
  for (int row = 0; row < BM; row++) {
    ck_assert_int_eq(amax1[row], arg_ref(q + row * N, N, 1, 1, true));
    ck_assert_int_eq(amin1[row], arg_ref(q + row * N, N, 1, -1, true));
    ck_assert_int_eq(last1[row], arg_ref(q + row * N, N, 1, 1, false));
    ck_assert_int_eq(keep[row], arg_ref(q + row * N, N, 1, -1, true));
  }
  for (int col = 0; col < N; col++)
    ck_assert_int_eq(amax0[col], arg_ref(q + col, BM, N, 1, true));
  /* the inputs do have ties and NaNs in the rows checked */
  ck_assert(isnan(q[5]) && isnan(q[42]));
  r_free(&r);
}
END_TEST

/* ---- reduce with a combine function, xor_sum, max(return_indices) ---------------------------- */

START_TEST(test_reduce_fn) {
  Run r;
  enum { BM = 8, N = 16 };
  r_init(&r, "reducefn", "BM=8 N=16");
  float *x = r_buf(&r, "x", NULL), *m1 = r_buf(&r, "m1", NULL), *m0 = r_buf(&r, "m0", NULL);
  float *top = r_buf(&r, "top", NULL);
  int32_t *k = r_buf(&r, "k", NULL), *i1 = r_buf(&r, "i1", NULL), *x1 = r_buf(&r, "x1", NULL);
  int32_t *x0 = r_buf(&r, "x0", NULL), *mi = r_buf(&r, "mi", NULL);
  for (int i = 0; i < BM * N; i++) {
    x[i] = (float)floor(urand(-4, 4)); /* ties */
    k[i] = (int32_t)floor(urand(-1e6, 1e6));
  }
  r_run(&r);
  double best = -INFINITY;
  for (int row = 0; row < BM; row++) {
    int at = 0, xr = 0;
    for (int col = 0; col < N; col++) {
      if (x[row * N + col] > x[row * N + at])
        at = col;
      xr ^= k[row * N + col];
      best = fmax(best, x[row * N + col]);
    }
    ck_assert(m1[row] == x[row * N + at]);
    ck_assert_int_eq(i1[row], at);
    ck_assert_int_eq(mi[row], at);
    ck_assert_int_eq(x1[row], xr);
  }
  for (int col = 0; col < N; col++) {
    double m = -INFINITY;
    int xc = 0;
    for (int row = 0; row < BM; row++) {
      m = fmax(m, x[row * N + col]);
      xc ^= k[row * N + col];
    }
    ck_assert(m0[col] == m);
    ck_assert_int_eq(x0[col], xc);
  }
  ck_assert(top[0] == best);
  r_free(&r);
}
END_TEST

/* ---- Philox ------------------------------------------------------------------------------ */

/* Philox 4x32 written from the paper (Salmon et al., "Parallel random numbers:
 * as easy as 1, 2, 3", SC'11): multipliers 0xD2511F53 and 0xCD9E8D57, Weyl
 * key increments 0x9E3779B9 and 0xBB67AE85. */
static void ref_philox(const uint32_t in[4], const uint32_t key[2], int rounds, uint32_t out[4]) {
  uint32_t x0 = in[0], x1 = in[1], x2 = in[2], x3 = in[3], k0 = key[0], k1 = key[1];
  for (int r = 0; r < rounds; r++) {
    uint64_t m0 = (uint64_t)x0 * 0xD2511F53u, m1 = (uint64_t)x2 * 0xCD9E8D57u;
    uint32_t y0 = (uint32_t)(m1 >> 32) ^ x1 ^ k0, y1 = (uint32_t)m1, y2 = (uint32_t)(m0 >> 32) ^ x3 ^ k1,
             y3 = (uint32_t)m0;
    x0 = y0, x1 = y1, x2 = y2, x3 = y3;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  out[0] = x0, out[1] = x1, out[2] = x2, out[3] = x3;
}

/* The known-answer vectors of the Random123 distribution (philox4x32, 10 rounds). */
START_TEST(test_philox_known_answers) {
  static const struct {
    uint32_t ctr[4], key[2], out[4];
  } kat[] = {
      {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
      {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff},
       {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
      {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0},
       {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
  };
  for (size_t i = 0; i < sizeof kat / sizeof *kat; i++) {
    uint32_t out[4];
    ref_philox(kat[i].ctr, kat[i].key, 10, out);
    for (int j = 0; j < 4; j++)
      ck_assert_msg(out[j] == kat[i].out[j], "vector %zu word %d: %08x, not %08x", i, j, out[j], kat[i].out[j]);
  }
}
END_TEST

/* Triton's uint32 -> [0, 1): the bits as int32, negatives folded to -x - 1,
 * times the largest f32 scale that keeps 2^31 - 1 below 1. */
static float ref_uniform(uint32_t u) {
  int64_t x = (int32_t)u;
  if (x < 0)
    x = -x - 1;
  float scale = 4.6566127342e-10f;
  return (float)x * scale;
}

static void ref_counter(int64_t seed, int32_t offset, int rounds, uint32_t out[4]) {
  uint32_t ctr[4] = {(uint32_t)offset, 0, 0, 0};
  uint32_t key[2] = {(uint32_t)(uint64_t)seed, (uint32_t)((uint64_t)seed >> 32)};
  ref_philox(ctr, key, rounds, out);
}

static void check_rand(int seed) {
  Run r;
  int n = 1000;
  double p = 0.3;
  r_init(&r, "philox", "BLOCK=256");
  r_scalar(&r, "n", n);
  r_scalar(&r, "seed", seed);
  r_scalar(&r, "p", p);
  float *u = r_buf(&r, "u", NULL), *u7 = r_buf(&r, "u7", NULL);
  int8_t *keep = r_buf(&r, "keep", NULL);
  r_run(&r);
  double mean = 0;
  int kept = 0;
  for (int i = 0; i < n; i++) {
    uint32_t c[4], d[4], e[4];
    ref_counter(seed, i, 10, c);
    ref_counter(seed + 1, i, 10, d);
    ref_counter(seed, i, 7, e);
    ck_assert_msg(u[i] == ref_uniform(c[0]), "rand(%d, %d) = %a, not %a", seed, i, u[i], ref_uniform(c[0]));
    ck_assert_msg(u7[i] == ref_uniform(e[0]), "rand(n_rounds=7) at %d", i);
    ck_assert_int_eq(keep[i], ref_uniform(d[0]) > (float)p);
    ck_assert(u[i] >= 0.0f && u[i] < 1.0f);
    mean += u[i];
    kept += keep[i];
  }
  mean /= n;
  ck_assert_msg(fabs(mean - 0.5) < 0.04, "mean %g", mean);
  ck_assert_msg(abs(kept - 700) < 60, "%d of %d kept at p = %g", kept, n, p);
  r_free(&r);
}

START_TEST(test_rand) {
  check_rand(1234);
  check_rand(-7); /* an i32 seed is sign-extended: the key's high word is 0xffffffff */
}
END_TEST

START_TEST(test_randn) {
  Run r;
  int n = 4096, seed = 42;
  r_init(&r, "gauss", "BLOCK=128");
  r_scalar(&r, "n", n);
  r_scalar(&r, "seed", seed);
  float *g = r_buf(&r, "g", NULL);
  r_run(&r);
  double mean = 0, var = 0;
  for (int i = 0; i < n; i++) {
    uint32_t c[4];
    ref_counter(seed, i, 10, c);
    double u1 = ref_uniform(c[0]), u2 = ref_uniform(c[1]);
    if (u1 < 1.0e-7)
      u1 = (float)1.0e-7;
    double want = sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
    ck_assert_msg(close_to(g[i], want, 2e-6, 2e-6), "randn at %d: %.9g, not %.9g", i, g[i], want);
    mean += g[i];
    var += (double)g[i] * g[i];
  }
  mean /= n;
  var = var / n - mean * mean;
  ck_assert_msg(fabs(mean) < 0.06 && fabs(var - 1) < 0.1, "mean %g variance %g", mean, var);
  r_free(&r);
}
END_TEST

/* ---- control flow ------------------------------------------------------------------------ */

static void check_control(int k, double lo) {
  Run r;
  enum { BLOCK = 128, NP = 16 };
  int n = 1000;
  r_init(&r, "control", "BLOCK=128 NP=16");
  r_scalar(&r, "n", n);
  r_scalar(&r, "k", k);
  r_scalar(&r, "lo", lo);
  float *x = r_buf(&r, "x", NULL), *o = r_buf(&r, "o", NULL);
  int32_t *steps = r_buf(&r, "steps", NULL);
  fill_f32(x, n, -5, 5);
  for (int i = 0; i < NP; i++)
    steps[i] = -99;
  r_run(&r);
  int programs = (n + BLOCK - 1) / BLOCK;
  for (int pid = 0; pid < NP; pid++) {
    if (pid >= programs) {
      ck_assert_int_eq(steps[pid], -99); /* returned before storing */
      continue;
    }
    float v[BLOCK];
    double big = 0;
    for (int e = 0; e < BLOCK; e++) {
      int i = pid * BLOCK + e;
      v[e] = i < n ? x[i] : 0.0f;
      big = fmax(big, fabs(v[e]));
    }
    int it = 0;
    while (big >= 1.0 && it < k) {
      big = 0;
      for (int e = 0; e < BLOCK; e++) {
        v[e] *= 0.5f;
        big = fmax(big, fabs(v[e]));
      }
      it++;
    }
    ck_assert_int_eq(steps[pid], it);
    for (int e = 0; e < BLOCK && pid * BLOCK + e < n; e++) {
      double acc = (double)v[e] * 6; /* v * 1 + v * 2 + v * 3 */
      double want = k < 0 ? -acc : k > 100 ? (lo > 0 ? 0 : acc) : acc + lo;
      ck_assert_msg(close_to(o[pid * BLOCK + e], want, 1e-5, 1e-6), "k=%d lo=%g: o[%d] = %g, not %g", k, lo,
                    pid * BLOCK + e, o[pid * BLOCK + e], want);
    }
  }
  r_free(&r);
}

START_TEST(test_control) {
  check_control(5, 0.25);
  check_control(1, 0.25);
  check_control(-1, 0.25);
  check_control(200, 0.25);
  check_control(200, -0.5);
}
END_TEST

static void check_returns(int lim) {
  Run r;
  r_init(&r, "returns", "");
  r_scalar(&r, "lim", lim);
  int32_t *o = r_buf(&r, "o", NULL);
  r_run(&r);
  for (int pid = 0; pid < 8; pid++) {
    int want = pid < 2 ? -1 : pid < 4 ? pid : (pid % 2 && lim > 0) ? -1 : pid * 10;
    ck_assert_msg(o[pid] == want, "lim=%d: o[%d] = %d, not %d", lim, pid, o[pid], want);
  }
  r_free(&r);
}

START_TEST(test_returns) {
  check_returns(1);
  check_returns(0);
}
END_TEST

START_TEST(test_while_matmul) {
  Run r;
  int M = 40, N = 24, K = 50;
  r_init(&r, "mmw", "T=f32 BM=16 BN=16 BK=16");
  r_scalar(&r, "M", M);
  r_scalar(&r, "N", N);
  r_scalar(&r, "K", K);
  float *a = r_buf(&r, "a", NULL), *b = r_buf(&r, "b", NULL), *c = r_buf(&r, "c", NULL);
  fill_f32(a, M * K, -1, 1);
  fill_f32(b, K * N, -1, 1);
  r_run(&r);
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++) {
      double d = 0;
      for (int k = 0; k < K; k++)
        d += (double)a[i * K + k] * b[k * N + j];
      ck_assert_msg(close_to(c[i * N + j], d, 1e-5, 1e-5), "c[%d][%d] = %g, not %g", i, j, c[i * N + j], d);
    }
  r_free(&r);
}
END_TEST

/* ---- shapes and methods -------------------------------------------------------------------- */

START_TEST(test_shapes) {
  Run r;
  enum { BM = 16, BN = 32, BK = 16 };
  r_init(&r, "shapes", "T=f32 BM=16 BN=32 BK=16");
  float *a = r_buf(&r, "a", NULL), *b = r_buf(&r, "b", NULL), *c = r_buf(&r, "c", NULL);
  float *at = r_buf(&r, "at", NULL), *t3 = r_buf(&r, "t3", NULL), *rs = r_buf(&r, "rs", NULL);
  float *rm = r_buf(&r, "rm", NULL);
  fill_f32(a, BM * BK, -1, 1);
  fill_f32(b, BK * BN, -1, 1);
  r_run(&r);
  for (int i = 0; i < BM; i++) {
    double s = 0, m = -INFINITY;
    for (int k = 0; k < BK; k++) {
      s += a[i * BK + k];
      m = fmax(m, a[i * BK + k]);
      ck_assert(at[k * BM + i] == a[i * BK + k]);
    }
    ck_assert(close_to(rs[i], s, 1e-5, 1e-5));
    ck_assert(rm[i] == m);
    for (int j = 0; j < BN; j++) {
      double d = 0;
      for (int k = 0; k < BK; k++)
        d += (double)a[i * BK + k] * b[k * BN + j];
      ck_assert_msg(close_to(c[i * BN + j], d, 1e-5, 1e-5), "a @ b at (%d, %d)", i, j);
    }
  }
  /* permute(2, 0, 1) of the [8, 16, 4] block 0, 1, ...: t3[i][j][k] = x3[j][k][i] */
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 8; j++)
      for (int k = 0; k < 16; k++)
        ck_assert_int_eq((int)t3[(i * 8 + j) * 16 + k], (j * 16 + k) * 4 + i);
  r_free(&r);
}
END_TEST

/* ---- device_print ---------------------------------------------------------------------------- */

START_TEST(test_device_print) {
  Run r;
  r_init(&r, "printer", "");
  int32_t *x = r_buf(&r, "x", NULL);
  x[0] = 1, x[1] = 2, x[2] = -3, x[3] = 4;
  FILE *out = tmpfile();
  ck_assert(out);
  fa_interp_set_print(r.in, out);
  r_run(&r);
  char text[2048] = {0};
  rewind(out);
  size_t len = fread(text, 1, sizeof text - 1, out);
  text[len] = '\0';
  fclose(out);
  const char *want = "pid (0, 0, 0) idx (0) v: 1\n"
                     "pid (0, 0, 0) idx (1) v: 2\n"
                     "pid (0, 0, 0) idx (2) v: -3\n"
                     "pid (0, 0, 0) idx (3) v: 4\n"
                     "pid (0, 0, 0) pid: 0xa\n"
                     "pid (1, 0, 0) idx (0) v: 1\n"
                     "pid (1, 0, 0) idx (1) v: 2\n"
                     "pid (1, 0, 0) idx (2) v: -3\n"
                     "pid (1, 0, 0) idx (3) v: 4\n"
                     "pid (1, 0, 0) pid: 0x1a\n";
  ck_assert_str_eq(text, want);
  r_free(&r);
}
END_TEST

static Suite *run_suite(void) {
  Suite *s = suite_create("run");
  TCase *tc = tcase_create("builtins");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_erf_fma_clamp);
  tcase_add_test(tc, test_block_atomics);
  tcase_add_test(tc, test_scans);
  tcase_add_test(tc, test_argx);
  tcase_add_test(tc, test_reduce_fn);
  tcase_add_test(tc, test_philox_known_answers);
  tcase_add_test(tc, test_rand);
  tcase_add_test(tc, test_randn);
  tcase_add_test(tc, test_control);
  tcase_add_test(tc, test_returns);
  tcase_add_test(tc, test_while_matmul);
  tcase_add_test(tc, test_shapes);
  tcase_add_test(tc, test_device_print);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(run_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
