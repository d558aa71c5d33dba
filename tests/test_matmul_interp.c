/* test_matmul_interp.c - examples/matmul/matmul.fa on the CPU interpreter
 * against a float64 reference, on fresh random inputs every run.
 *
 * Sizes both odd (partial blocks along every dimension, a partial GROUP_M
 * group, K not a multiple of BLOCK_K) and multiples of 16; f16 and bf16;
 * the kernel's default tiles and smaller ones.  Inputs are uniform in
 * [-1, 1) rounded to the dtype; C is poisoned with NaN first, so an element
 * the kernel forgets fails.  The reference sums the same rounded inputs in
 * float64.  Each element must be within
 *     2 ulp of the dtype at |ref|  +  K * 2^-22 * sum_k |a_ik b_kj|
 * (rounding the result once, plus f32 accumulation in another order), and
 * ||C - ref|| / ||ref|| must stay below 2^-11 (f16) or 2^-8 (bf16), about
 * twice what rounding the result to the dtype gives.  NaN never passes.  The seed is printed; FADSL_TEST_SEED=N reproduces a run.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "interp.h"
#include "sema.h"

#ifndef FADSL_MATMUL_SRC
#error "FADSL_MATMUL_SRC must name matmul.fa"
#endif

typedef struct Case {
  int M, N, K;
  DType dtype;
  int bm, bn, bk;   /* 0: the kernel's defaults */
} Case;

static const Case cases[] = {
    {100, 70, 90, DT_F16, 0, 0, 0},      /* odd everywhere, one program row partial */
    {128, 256, 96, DT_F16, 0, 0, 0},     /* multiples of 16; K not a multiple of BLOCK_K */
    {300, 130, 17, DT_BF16, 64, 64, 32}, /* several groups of GROUP_M rows, the last one partial */
    {64, 64, 64, DT_BF16, 0, 0, 0},      /* smaller than one block */
    {1, 33, 200, DT_F16, 64, 64, 32},    /* one row */
    {640, 144, 48, DT_F16, 64, 64, 16},  /* 10 block rows: a full group and a partial one */
};

static uint64_t rng_state;
static double uniform(void) {
  rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
  return (double)(rng_state >> 11) / 9007199254740992.0 * 2.0 - 1.0;
}

static double ulp_at(DType dt, double x) {
  int mant = dt == DT_F16 ? 10 : 7;
  double ax = fabs(x);
  double tiny = dt == DT_F16 ? ldexp(1.0, -24) : ldexp(1.0, -133);
  if (ax == 0)
    return tiny;
  int e;
  frexp(ax, &e);
  double u = ldexp(1.0, e - 1 - mant);
  return u > tiny ? u : tiny;
}

static bool run_case(const FaProgram *p, FaCompiler *fc, const Case *c) {
  const FaKernelInfo *k = fa_program_kernel(p, "matmul");
  if (!k) {
    fprintf(stderr, "no kernel matmul\n");
    return false;
  }
  /* the kernel's default tiles (the first point of its @autotune space), or the case's */
  FaBinding b[5] = {{"T", {CK_DTYPE, 0, 0, c->dtype, NULL}},
                    {"BLOCK_M", {CK_INT, c->bm ? c->bm : 128, 0, DT_VOID, NULL}},
                    {"BLOCK_N", {CK_INT, c->bn ? c->bn : 128, 0, DT_VOID, NULL}},
                    {"BLOCK_K", {CK_INT, c->bk ? c->bk : 64, 0, DT_VOID, NULL}},
                    {"GROUP_M", {CK_INT, 8, 0, DT_VOID, NULL}}};
  int nb = 5;
  FaLaunchConfig cfg = {.warps = 8, .stages = 3};
  IrKernel *ir = fa_specialize(fc, p, k, b, nb, cfg);
  if (!ir) {
    fprintf(stderr, "%s", fc->diag.text.data ? fc->diag.text.data : "specialisation failed\n");
    return false;
  }
  int M = c->M, N = c->N, K = c->K;
  uint16_t *a = malloc(sizeof *a * (size_t)M * K), *bb = malloc(sizeof *bb * (size_t)K * N);
  uint16_t *out = malloc(sizeof *out * (size_t)M * N);
  double *ad = malloc(sizeof *ad * (size_t)M * K), *bd = malloc(sizeof *bd * (size_t)K * N);
  bool ok = a && bb && out && ad && bd;
  for (int64_t i = 0; ok && i < (int64_t)M * K; i++) {
    fa_host_set(c->dtype, a, i, uniform());
    ad[i] = fa_host_get(c->dtype, a, i);
  }
  for (int64_t i = 0; ok && i < (int64_t)K * N; i++) {
    fa_host_set(c->dtype, bb, i, uniform());
    bd[i] = fa_host_get(c->dtype, bb, i);
  }
  for (int64_t i = 0; ok && i < (int64_t)M * N; i++)
    fa_host_set(c->dtype, out, i, NAN);
  FaInterp *in = ok ? fa_interp_new(fc, ir) : NULL;
  ok = in != NULL;
  ok = ok && fa_interp_bind_buffer(in, fa_interp_param_index(in, "a"), c->dtype, a, (int64_t)M * K);
  ok = ok && fa_interp_bind_buffer(in, fa_interp_param_index(in, "b"), c->dtype, bb, (int64_t)K * N);
  ok = ok && fa_interp_bind_buffer(in, fa_interp_param_index(in, "c"), c->dtype, out, (int64_t)M * N);
  ok = ok && fa_interp_bind_scalar(in, fa_interp_param_index(in, "M"), fa_host_int(DT_I32, M));
  ok = ok && fa_interp_bind_scalar(in, fa_interp_param_index(in, "N"), fa_host_int(DT_I32, N));
  ok = ok && fa_interp_bind_scalar(in, fa_interp_param_index(in, "K"), fa_host_int(DT_I32, K));
  FaInterpOptions opt = {2, NULL};
  ok = ok && fa_interp_run(in, &opt);
  if (!ok)
    fprintf(stderr, "%s", fc->diag.text.data ? fc->diag.text.data : "interpreter setup failed\n");
  double err2 = 0, ref2 = 0;
  int64_t bad = 0, first_bad = -1;
  for (int i = 0; ok && i < M; i++)
    for (int j = 0; j < N; j++) {
      double ref = 0, mag = 0;
      for (int kk = 0; kk < K; kk++) {
        ref += ad[(int64_t)i * K + kk] * bd[(int64_t)kk * N + j];
        mag += fabs(ad[(int64_t)i * K + kk] * bd[(int64_t)kk * N + j]);
      }
      double got = fa_host_get(c->dtype, out, (int64_t)i * N + j);
      double tol = 2 * ulp_at(c->dtype, ref) + K * ldexp(1.0, -22) * mag;
      if (!(fabs(got - ref) <= tol)) {
        if (first_bad < 0)
          first_bad = (int64_t)i * N + j;
        bad++;
      }
      err2 += (got - ref) * (got - ref);
      ref2 += ref * ref;
    }
  double rel = ref2 > 0 ? sqrt(err2 / ref2) : sqrt(err2);
  double bound = c->dtype == DT_F16 ? ldexp(1.0, -11) : ldexp(1.0, -8);
  bool pass = ok && bad == 0 && rel <= bound;
  printf("%s: matmul M=%d N=%d K=%d %s blocks %dx%dx%d: ||C - ref|| / ||ref|| = %.3g (bound %.3g), %lld elements "
         "off",
         pass ? "ok" : "FAIL", M, N, K, fa_dtype_name(c->dtype), c->bm ? c->bm : 128, c->bn ? c->bn : 128,
         c->bk ? c->bk : 64, rel, bound, (long long)bad);
  if (first_bad >= 0)
    printf(" (first at row %lld, column %lld: %g)", (long long)(first_bad / N), (long long)(first_bad % N),
           fa_host_get(c->dtype, out, first_bad));
  printf("\n");
  if (in)
    fa_interp_free(in);
  free(a);
  free(bb);
  free(out);
  free(ad);
  free(bd);
  return pass;
}

int main(void) {
  const char *seed_env = getenv("FADSL_TEST_SEED");
  uint64_t seed = seed_env ? strtoull(seed_env, NULL, 10) : (uint64_t)time(NULL);
  rng_state = seed;
  printf("seed %llu (FADSL_TEST_SEED=%llu reproduces this run)\n", (unsigned long long)seed,
         (unsigned long long)seed);
  int failed = 0;
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    FaCompiler cfc;
    fa_compiler_init(&cfc, NULL);
    /* a fresh compiler per case: the specialisation's IR lives in it */
    Source *s2 = fa_source_read(&cfc, FADSL_MATMUL_SRC);
    Node *m2 = s2 ? fa_parse(&cfc, s2) : NULL;
    FaProgram *p2 = m2 ? fa_program_check(&cfc, m2) : NULL;
    failed += !(p2 && run_case(p2, &cfc, &cases[i]));
    fa_compiler_free(&cfc);
  }
  printf("%zu cases, %d failed\n", sizeof cases / sizeof *cases, failed);
  return failed ? 1 : 0;
}
