/* test_attention_interp.c - attention.fa's forward and backward kernels on
 * the CPU interpreter against the float64 reference, on fresh random inputs
 * every run.
 *
 * The seed is printed; FADSL_TEST_SEED=N reproduces a run.  Each case rounds
 * random inputs to f16 or bf16, runs the kernels on outputs poisoned with
 * NaN (so an element a kernel forgets to write fails), and compares every
 * output with the reference computed in float64 on the same rounded inputs
 * by the checker that fadsl-attn --check uses (attn_check.h, on every
 * element here): ||out - ref|| / max(||ref||, ||ref_rss||), where ref_rss is
 * the root-sum-square scale of the terms that the output sums (nonzero where
 * they cancel: with one key the exact dQ and dK are 0), against the bounds of
 * fa_attn_check_bound.  NaN never passes.
 *
 * Every case runs the backward pass two ways, each on one interpreter thread
 * and on three: fused (attn_bwd_prep, attn_bwd with dQ added atomically,
 * attn_bwd_dq_convert; with D computed in attn_bwd on every other case), and
 * deterministic (attn_bwd_d, attn_bwd_dkdv, attn_bwd_dq), whose gradients
 * on three threads must be those of one thread to the bit; each against
 * float64.
 *
 * Sanitizer builds run a lighter subset by default (it says so, and how
 * many); FADSL_TEST_FULL=1 runs every case there too, FADSL_TEST_LIGHT=1
 * runs the subset anywhere.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "attention_ref.h"
#include "attn_check.h"
#include "attn_interp.h"
#include "interp.h"

#ifndef FADSL_ATTENTION_SRC
#error "FADSL_ATTENTION_SRC must name attention.fa"
#endif

typedef struct Case {
  int B, H, KVH, Nq, Nkv, D;
  bool causal;
  DType dtype;
  int block_q, block_k;
  bool heavy;       /* left out of the light subset (sanitizer builds) */
  double far;       /* q shifted by -far, k by +far: every score far below 0, LSE too */
  double ramp;      /* key j's row shifted by ramp * j / Nkv: each row's scores climb (or fall)
                       along the keys, its maximum growing block after block by more than the
                       online softmax lets pass before it rescales, in some rows and not others */
} Case;

/* N not a multiple of the block (1, 77, 200), Nq != Nkv, GQA 4:1 and 3:1, causal and
 * not, D in {16, 32, 64, 128}, f16 and bf16; several tile shapes. */
static const Case cases[] = {
    {1, 2, 2, 1, 1, 16, false, DT_F16, 16, 16, false, 0, 0},
    {1, 2, 2, 1, 1, 32, true, DT_BF16, 16, 16, false, 0, 0},
    {2, 2, 2, 77, 77, 16, true, DT_F16, 32, 16, false, 0, 0},
    {1, 4, 1, 77, 77, 32, false, DT_F16, 32, 32, false, 0, 0},
    {1, 4, 1, 77, 77, 64, true, DT_BF16, 32, 16, false, 0, 0},
    {1, 2, 1, 200, 200, 128, true, DT_F16, 32, 32, false, 0, 0},
    {1, 1, 1, 200, 200, 128, false, DT_BF16, 32, 16, false, 0, 0},
    {1, 2, 2, 77, 200, 64, false, DT_F16, 32, 32, false, 0, 0},
    {1, 2, 2, 200, 33, 32, false, DT_BF16, 16, 16, false, 0, 0},
    {2, 4, 1, 200, 200, 64, false, DT_F16, 32, 32, false, 0, 0},
    {1, 2, 2, 128, 128, 16, true, DT_BF16, 32, 32, false, 0, 0},
    {1, 1, 1, 200, 200, 32, true, DT_F16, 16, 16, false, 0, 0},
    {1, 4, 2, 1, 77, 128, false, DT_F16, 32, 32, false, 0, 0},
    {1, 4, 1, 77, 77, 128, true, DT_BF16, 32, 32, false, 0, 0},
    /* scores of -300 (base 2) and lower: a key past the end of the sequence
       (a zero row of K) would have probability exp2(0 - LSE) = inf */
    {1, 2, 1, 50, 77, 64, false, DT_F16, 32, 16, false, 6.0, 0},
    {1, 2, 2, 40, 40, 32, true, DT_BF16, 16, 16, false, 6.0, 0},
    /* one key for many queries; D = 256 causal */
    {1, 4, 2, 77, 1, 64, false, DT_BF16, 32, 16, false, 0, 0},
    {1, 2, 1, 100, 100, 256, true, DT_BF16, 32, 32, false, 0, 0},
    {1, 8, 2, 200, 200, 16, true, DT_F16, 32, 16, false, 0, 0},
    {2, 2, 1, 33, 150, 64, false, DT_BF16, 32, 32, false, 0, 0},
    {1, 1, 1, 77, 77, 256, false, DT_F16, 16, 16, false, 0, 0},
    /* groups of 3 and 5 query heads per kv head (not powers of two) */
    {1, 6, 2, 77, 77, 32, true, DT_F16, 32, 16, false, 0, 0},
    {2, 3, 1, 200, 150, 64, false, DT_BF16, 32, 32, false, 0, 0},
    {1, 5, 1, 33, 33, 16, true, DT_BF16, 16, 16, false, 0, 0},
    /* longer sequences, larger tiles */
    {1, 4, 1, 1000, 1000, 64, true, DT_F16, 64, 32, true, 0, 0},
    {2, 2, 2, 513, 513, 128, false, DT_BF16, 64, 64, true, 0, 0},
    {1, 2, 1, 300, 700, 32, false, DT_F16, 32, 16, true, 0, 0},
    {1, 2, 2, 1000, 1000, 16, true, DT_BF16, 32, 32, true, 0, 0},
    /* row maxima that keep growing: the rescaling after the first key block */
    {1, 2, 1, 300, 300, 64, false, DT_F16, 32, 16, false, 0, 24.0},
    {1, 2, 2, 200, 200, 128, true, DT_BF16, 32, 32, false, 0, 24.0},
};

/* splitmix64 + Box-Muller: standard normal samples */
static uint64_t rng_state;
static uint64_t rng_next(void) {
  uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
static double rng_normal(void) {
  double u1 = ((double)(rng_next() >> 11) + 0.5) * 0x1p-53, u2 = (double)(rng_next() >> 11) * 0x1p-53;
  return sqrt(-2 * log(u1)) * cos(2 * M_PI * u2);
}

/* n random values in dtype (16-bit patterns): shift + N(0, 1), or for a
 * shifted array shift + N(0, 0.01) (scores far from 0 but not overflowing) */
static uint16_t *random_array(DType dt, int64_t n, double shift) {
  uint16_t *bits = malloc((size_t)n * 2);
  for (int64_t i = 0; i < n; i++)
    fa_host_set(dt, bits, i, shift + (shift != 0 ? 0.1 : 1.0) * rng_normal());
  return bits;
}

static void *poisoned(DType dt, int64_t n) {
  void *p = malloc((size_t)n * (size_t)fa_dtype_size(dt));
  for (int64_t i = 0; i < n; i++)
    fa_host_set(dt, p, i, NAN);
  return p;
}

static int failures;

/* Every output against float64, every element (the checker's full mode). */
static void check_all(const FaAttnShape *s, DType dt, const void *q, const void *k, const void *v, const void *dO,
                      const void *o, const float *lse2, const void *dq, const void *dk, const void *dv) {
  FaAttnData d = {dt, q, k, v, dO, o, dq, dk, dv, lse2, NULL, NULL};
  FaAttnCheckOptions opt = fa_attn_check_defaults();
  opt.full_work = HUGE_VAL;
  FaAttnCheckResult r;
  if (!fa_attn_check(s, &d, &opt, &r) || !strstr(r.subset, "everything")) {
    printf("    FAIL: the float64 check did not run on everything (%s)\n", r.subset);
    failures++;
    return;
  }
  for (int w = 0; w < FA_CHECK_N; w++) {
    if (w == FA_CHECK_DSINKS)
      continue;   /* no sinks here (tests/test_attention_variants.c) */
    double bound = fa_attn_check_bound(dt, w);
    bool ok = r.checked[w] && r.err[w] < bound && r.nonfinite[w] == 0;   /* false for NaN */
    printf("    %-4s err %.3e  (bound %.0e; ||ref|| %.3e, ||ref_rss|| %.3e)%s\n", fa_attn_check_name(w), r.err[w],
           bound, r.ref_norm[w], r.rss_norm[w], ok ? "" : "  FAIL");
    if (!ok)
      failures++;
  }
}

enum Mode { FUSED, FUSED_D, DETERMINISTIC };
static const char *const mode_names[] = {"fused", "fused, D in attn_bwd", "deterministic"};

/* The backward pass in one mode, into dq, dk, dv (poisoned first). */
static bool backward(FaAttnRunner *r, enum Mode m, int threads, const FaAttnShape *s, DType dt, const void *q,
                     const void *k, const void *v, const void *o, const void *dO, const float *lse2, void *dq,
                     void *dk, void *dv) {
  int64_t nq = (int64_t)s->B * s->H * s->Nq * s->D, nkv = (int64_t)s->B * s->KVH * s->Nkv * s->D;
  for (int64_t i = 0; i < nq; i++)
    fa_host_set(dt, dq, i, NAN);
  for (int64_t i = 0; i < nkv; i++) {
    fa_host_set(dt, dk, i, NAN);
    fa_host_set(dt, dv, i, NAN);
  }
  r->deterministic = m == DETERMINISTIC;
  r->fuse_delta = m == FUSED_D;
  r->threads = threads;
  bool ok = fa_attn_backward(r, s, dt, q, k, v, o, dO, lse2, dq, dk, dv);
  if (ok && r->ran_fused != (m != DETERMINISTIC)) {
    printf("    FAIL: the %s backward pass ran the %s kernels\n", mode_names[m], r->ran_fused ? "fused" : "other");
    failures++;
  }
  return ok;
}

static bool run_case(const Case *c, const char *program, int index) {
  FaAttnShape s = {c->B, c->H, c->KVH, c->Nq, c->Nkv, c->D, c->causal, 1.0 / sqrt((double)c->D)};
  printf("B=%d H=%d KVH=%d Nq=%d Nkv=%d D=%d %s %s (BLOCK_Q=%d BLOCK_K=%d)%s\n", c->B, c->H, c->KVH, c->Nq,
         c->Nkv, c->D, c->causal ? "causal" : "full", fa_dtype_name(c->dtype), c->block_q, c->block_k,
         c->far ? " scores far below 0" : c->ramp ? " scores climbing along the keys" : "");
  int64_t nq = (int64_t)c->B * c->H * c->Nq * c->D, nkv = (int64_t)c->B * c->KVH * c->Nkv * c->D;
  int64_t rows = (int64_t)c->B * c->H * c->Nq;
  uint16_t *q = random_array(c->dtype, nq, -c->far), *k = random_array(c->dtype, nkv, c->far);
  uint16_t *v = random_array(c->dtype, nkv, 0), *dO = random_array(c->dtype, nq, 0);
  for (int64_t i = 0; c->ramp != 0 && i < nkv; i++)
    fa_host_set(c->dtype, k, i, fa_host_get(c->dtype, k, i) + c->ramp * (double)(i / c->D % c->Nkv) / c->Nkv);
  void *o = poisoned(c->dtype, nq), *dq = poisoned(c->dtype, nq);
  void *dk = poisoned(c->dtype, nkv), *dv = poisoned(c->dtype, nkv);
  float *lse2 = poisoned(DT_F32, rows);

  FaCompiler fc;
  fa_compiler_init(&fc, stderr);
  FaAttnRunner r;
  bool ok = fa_attn_open(&r, &fc, program, c->block_q, c->block_k, 1);
  ok = ok && fa_attn_forward(&r, &s, c->dtype, q, k, v, o, lse2);
  size_t bq = (size_t)nq * (size_t)fa_dtype_size(c->dtype), bkv = (size_t)nkv * (size_t)fa_dtype_size(c->dtype);
  void *dq1 = malloc(bq), *dk1 = malloc(bkv), *dv1 = malloc(bkv);
  enum Mode modes[] = {index % 2 ? FUSED_D : FUSED, DETERMINISTIC};
  for (int mi = 0; mi < 2 && ok; mi++) {
    enum Mode m = modes[mi];
    printf("  %s\n", mode_names[m]);
    if (!backward(&r, m, 1, &s, c->dtype, q, k, v, o, dO, lse2, dq, dk, dv)) {
      ok = false;
      break;
    }
    check_all(&s, c->dtype, q, k, v, dO, o, lse2, dq, dk, dv);
    if (m != DETERMINISTIC) {
      /* the atomic additions into dQ from programs on three threads */
      printf("  %s, 3 threads\n", mode_names[m]);
      if (!backward(&r, m, 3, &s, c->dtype, q, k, v, o, dO, lse2, dq, dk, dv)) {
        ok = false;
        break;
      }
      check_all(&s, c->dtype, q, k, v, dO, o, lse2, dq, dk, dv);
      continue;
    }
    /* again on three threads: the same bits */
    if (!backward(&r, m, 3, &s, c->dtype, q, k, v, o, dO, lse2, dq1, dk1, dv1)) {
      ok = false;
      break;
    }
    bool same = !memcmp(dq, dq1, bq) && !memcmp(dk, dk1, bkv) && !memcmp(dv, dv1, bkv);
    printf("    bitwise the same on 3 threads: %s\n", same ? "yes" : "NO  FAIL");
    if (!same)
      failures++;
  }
  if (!ok) {
    printf("    FAIL: the kernels did not run\n");
    failures++;
  }
  fa_compiler_free(&fc);
  free(q), free(k), free(v), free(dO);
  free(o), free(dq), free(dk), free(dv), free(lse2);
  free(dq1), free(dk1), free(dv1);
  return ok;
}

int main(void) {
  const char *seed_env = getenv("FADSL_TEST_SEED");
  uint64_t seed = seed_env && *seed_env ? strtoull(seed_env, NULL, 0) : (uint64_t)time(NULL) ^ ((uint64_t)clock() << 32);
  rng_state = seed;
  printf("seed %llu (FADSL_TEST_SEED=%llu reproduces this run)\n", (unsigned long long)seed,
         (unsigned long long)seed);
  const char *program = fa_attn_find_program(NULL);
  if (!program)
    program = FADSL_ATTENTION_SRC;
  printf("program %s\n", program);
  bool light = false;
#ifdef FADSL_LIGHT_DEFAULT
  light = true;
#endif
  const char *full = getenv("FADSL_TEST_FULL");
  if (full && *full && strcmp(full, "0"))
    light = false;
  const char *lt = getenv("FADSL_TEST_LIGHT");
  if (lt && *lt && strcmp(lt, "0"))
    light = true;
  int n = FA_ARRAY_LEN(cases), run = 0;
  if (light) {
    int m = 0;
    for (int i = 0; i < n; i++)
      m += !cases[i].heavy;
    printf("light subset: %d of %d cases, the long sequences left out (%s; FADSL_TEST_FULL=1 runs them all)\n", m,
           n, lt && *lt && strcmp(lt, "0") ? "FADSL_TEST_LIGHT is set" : "a sanitizer build");
  }
  for (int i = 0; i < n; i++) {
    if (light && cases[i].heavy)
      continue;
    run_case(&cases[i], program, i);
    run++;
  }
  printf("%d cases, %d failed checks\n", run, failures);
  return failures ? 1 : 0;
}
