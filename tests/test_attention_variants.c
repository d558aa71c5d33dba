/* test_attention_variants.c - the attention variants (examples/attention/
 * variants/ and attention_variants.fa, which combines them) on the CPU
 * interpreter, forward and backward, against float64, on fresh random inputs
 * every run.
 *
 * The cases are data: tests/variants/cases.txt holds one per line,
 *     PROGRAM B H KVH NQ NKV D DTYPE BLOCK_Q BLOCK_K [OPTION ...]
 * with PROGRAM relative to examples/attention/ (or absolute) and the options
 *     causal  window=L,R  softcap=C  alibi  sinks  seqlens=A,B,...  kvseqlens=A,B,...
 * (alibi and sinks draw random slopes and logits; seqlens packs sequences of
 * those lengths, NQ and NKV being their sums; kvseqlens gives the keys their
 * own lengths).  A new case is a new line.  Then RANDOM_CASES more cases
 * are drawn from the seed: random combinations of every option on random
 * small shapes of attention_variants.fa.
 *
 * Each case rounds the inputs to f16 or bf16, runs the kernels on outputs
 * poisoned with NaN, and compares every output (o, lse, dq, dk, dv and, with
 * sinks, dsinks) with the float64 reference of attn_check.h on every element:
 * ||out - ref|| / max(||ref||, ||ref_rss||) against fa_attn_check_bound.
 * NaN never passes; a row that sees no key must give O = 0 and LSE = +inf.
 * The backward pass runs fused (dQ added atomically) and deterministic, both
 * checked, and the deterministic one again on three interpreter threads,
 * which must give the same dQ, dK and dV to the bit.
 * The seed is printed; FADSL_TEST_SEED=N reproduces a run.
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
#include "attn_variant.h"
#include "interp.h"

#ifndef FA_SRCDIR
#error "FA_SRCDIR must name the source tree"
#endif

enum { RANDOM_CASES = 6, MAX_SEQS = 16 };

typedef struct Case {
  char program[128];
  FaAttnShape s;
  DType dtype;
  int block_q, block_k;
  FaAttnVariant v;
  bool alibi, sinks;
  int nseq, seqlens[MAX_SEQS], kvseqlens[MAX_SEQS];
  bool kv_own;
  char line[512];
} Case;

/* splitmix64 + Box-Muller */
static uint64_t rng_state;
static uint64_t rng_next(void) {
  uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
static double rng_uniform(void) { return (double)(rng_next() >> 11) * 0x1p-53; }
static double rng_normal(void) {
  double u1 = rng_uniform() + 0x1p-54, u2 = rng_uniform();
  return sqrt(-2 * log(u1)) * cos(2 * M_PI * u2);
}
static int rng_int(int lo, int hi) { return lo + (int)(rng_next() % (uint64_t)(hi - lo + 1)); }

static void *random_array(DType dt, int64_t n) {
  void *p = malloc((size_t)(n ? n : 1) * (size_t)fa_dtype_size(dt));
  for (int64_t i = 0; p && i < n; i++)
    fa_host_set(dt, p, i, rng_normal());
  return p;
}

static void *poisoned(DType dt, int64_t n) {
  void *p = malloc((size_t)(n ? n : 1) * (size_t)fa_dtype_size(dt));
  for (int64_t i = 0; p && i < n; i++)
    fa_host_set(dt, p, i, NAN);
  return p;
}

static int failures;

static bool parse_list(const char *s, int *out, int *n) {
  *n = 0;
  while (*s && *n < MAX_SEQS) {
    char *e;
    long v = strtol(s, &e, 10);
    if (e == s || v < 0)
      return false;
    out[(*n)++] = (int)v;
    s = *e == ',' ? e + 1 : e;
    if (*e && *e != ',')
      return false;
  }
  return *n > 0;
}

static bool parse_option(Case *c, const char *o) {
  if (!strcmp(o, "causal"))
    c->s.causal = true;
  else if (!strncmp(o, "window=", 7))
    c->v.window = sscanf(o + 7, "%d,%d", &c->v.window_left, &c->v.window_right) == 2;
  else if (!strncmp(o, "softcap=", 8))
    c->v.softcap = atof(o + 8);
  else if (!strcmp(o, "alibi"))
    c->alibi = true;
  else if (!strcmp(o, "sinks"))
    c->sinks = true;
  else if (!strncmp(o, "seqlens=", 8))
    return parse_list(o + 8, c->seqlens, &c->nseq);
  else if (!strncmp(o, "kvseqlens=", 10)) {
    int n;
    c->kv_own = true;
    return parse_list(o + 10, c->kvseqlens, &n) && n == c->nseq;
  } else
    return false;
  return true;
}

static bool parse_case(const char *line, Case *c) {
  memset(c, 0, sizeof *c);
  snprintf(c->line, sizeof c->line, "%s", line);
  char dt[16];
  int off = 0;
  if (sscanf(line, "%127s %d %d %d %d %d %d %15s %d %d %n", c->program, &c->s.B, &c->s.H, &c->s.KVH, &c->s.Nq,
             &c->s.Nkv, &c->s.D, dt, &c->block_q, &c->block_k, &off) < 10)
    return false;
  c->dtype = !strcmp(dt, "bf16") ? DT_BF16 : DT_F16;
  c->s.scale = 1.0 / sqrt((double)c->s.D);
  char opts[512];
  snprintf(opts, sizeof opts, "%s", line + off);
  for (char *save = NULL, *t = strtok_r(opts, " \t\n", &save); t; t = strtok_r(NULL, " \t\n", &save))
    if (!parse_option(c, t))
      return false;
  return true;
}

/* Draws a random combination on a small shape of the combined program. */
static void random_case(Case *c) {
  memset(c, 0, sizeof *c);
  snprintf(c->program, sizeof c->program, "attention_variants.fa");
  static const int heads[][2] = {{2, 2}, {4, 2}, {3, 1}, {4, 1}, {1, 1}};
  int hh = rng_int(0, 4);
  c->s.H = heads[hh][0];
  c->s.KVH = heads[hh][1];
  c->s.D = rng_int(0, 1) ? 16 : 32;
  c->dtype = rng_int(0, 1) ? DT_BF16 : DT_F16;
  static const int tiles[][2] = {{16, 16}, {32, 16}, {32, 32}};
  int t = rng_int(0, 2);
  c->block_q = tiles[t][0];
  c->block_k = tiles[t][1];
  c->s.causal = rng_int(0, 2) == 0;
  if (rng_int(0, 1)) {
    c->v.window = true;
    c->v.window_left = rng_int(-1, 40);
    c->v.window_right = c->s.causal ? 0 : rng_int(-1, 40);
  }
  if (rng_int(0, 2) == 0)
    c->v.softcap = 5 + 20 * rng_uniform();
  c->alibi = rng_int(0, 2) == 0;
  c->sinks = rng_int(0, 2) == 0;
  if (rng_int(0, 2) == 0) {
    c->s.B = 1;
    c->nseq = rng_int(1, 4);
    for (int i = 0; i < c->nseq; i++) {
      c->seqlens[i] = rng_int(0, 60);
      c->s.Nq += c->seqlens[i];
    }
    if (c->s.Nq == 0)
      c->s.Nq = c->seqlens[0] = 1;
  } else {
    c->s.B = rng_int(1, 2);
    c->s.Nq = rng_int(1, 90);
    c->s.Nkv = rng_int(0, 3) == 0 ? rng_int(1, 90) : c->s.Nq;
  }
  c->s.scale = 1.0 / sqrt((double)c->s.D);
  snprintf(c->line, sizeof c->line, "(random)");
}

/* Fills in what the options imply: packed offsets, slopes, sinks. */
static void finish_case(Case *c, int32_t *cu_q, int32_t *cu_k, float *slopes, float *sinks) {
  if (c->nseq) {
    c->s.B = 1;
    cu_q[0] = cu_k[0] = 0;
    for (int i = 0; i < c->nseq; i++) {
      cu_q[i + 1] = cu_q[i] + c->seqlens[i];
      cu_k[i + 1] = cu_k[i] + (c->kv_own ? c->kvseqlens[i] : c->seqlens[i]);
    }
    c->s.Nq = cu_q[c->nseq];
    c->s.Nkv = cu_k[c->nseq];
    c->v.cu_seqlens_q = cu_q;
    c->v.cu_seqlens_k = c->kv_own ? cu_k : NULL;
    c->v.nseq = c->nseq;
  }
  for (int h = 0; h < c->s.H; h++) {
    slopes[h] = (float)exp2(-8.0 * (h + 1) / c->s.H);   /* ALiBi's geometric slopes */
    sinks[h] = (float)(2 * rng_normal());
  }
  c->v.alibi = c->alibi ? slopes : NULL;
  c->v.sinks = c->sinks ? sinks : NULL;
}

static void check_all(const Case *c, const void *q, const void *k, const void *v, const void *dO, const void *o,
                      const float *lse2, const void *dq, const void *dk, const void *dv, const float *dsinks) {
  FaAttnData d = {c->dtype, q, k, v, dO, o, dq, dk, dv, lse2, &c->v, c->sinks ? dsinks : NULL};
  FaAttnCheckOptions opt = fa_attn_check_defaults();
  opt.full_work = HUGE_VAL;
  FaAttnCheckResult r;
  if (!fa_attn_check(&c->s, &d, &opt, &r) || !strstr(r.subset, "everything")) {
    printf("    FAIL: the float64 check did not run on everything (%s)\n", r.subset);
    failures++;
    return;
  }
  for (int w = 0; w < FA_CHECK_N; w++) {
    if (w == FA_CHECK_DSINKS && !c->sinks)
      continue;
    double bound = fa_attn_check_bound(c->dtype, w);
    bool ok = r.checked[w] && r.err[w] < bound && r.nonfinite[w] == 0;   /* false for NaN */
    printf("    %-6s err %.3e  (bound %.0e; ||ref|| %.3e, ||ref_rss|| %.3e)%s\n", fa_attn_check_name(w), r.err[w],
           bound, r.ref_norm[w], r.rss_norm[w], ok ? "" : "  FAIL");
    if (!ok)
      failures++;
  }
}

static void run_case(Case *c) {
  int32_t cu_q[MAX_SEQS + 1], cu_k[MAX_SEQS + 1];
  float slopes[64], sinks[64];
  finish_case(c, cu_q, cu_k, slopes, sinks);
  const FaAttnShape *s = &c->s;
  char desc[160];
  printf("%s B=%d H=%d KVH=%d Nq=%d Nkv=%d D=%d %s %s (BLOCK_Q=%d BLOCK_K=%d)  [%s]\n", c->program, s->B, s->H,
         s->KVH, s->Nq, s->Nkv, s->D, fa_attn_variant_describe(&c->v, s, desc, sizeof desc),
         fa_dtype_name(c->dtype), c->block_q, c->block_k, c->line);
  int64_t nq = (int64_t)s->B * s->H * s->Nq * s->D, nkv = (int64_t)s->B * s->KVH * s->Nkv * s->D;
  int64_t rows = (int64_t)s->B * s->H * s->Nq;
  void *q = random_array(c->dtype, nq), *k = random_array(c->dtype, nkv);
  void *v = random_array(c->dtype, nkv), *dO = random_array(c->dtype, nq);
  void *o = poisoned(c->dtype, nq), *dq = poisoned(c->dtype, nq);
  void *dk = poisoned(c->dtype, nkv), *dv = poisoned(c->dtype, nkv);
  float *lse2 = poisoned(DT_F32, rows), *dsinks = poisoned(DT_F32, s->H);
  char path[512];
  if (c->program[0] == '/')
    snprintf(path, sizeof path, "%s", c->program);
  else
    snprintf(path, sizeof path, "%s/examples/attention/%s", FA_SRCDIR, c->program);
  FaCompiler fc;
  fa_compiler_init(&fc, stderr);
  FaAttnRunner r;
  bool ok = fa_attn_open(&r, &fc, path, c->block_q, c->block_k, 1);
  ok = ok && fa_attn_forward_variant(&r, s, &c->v, c->dtype, q, k, v, o, lse2);
  size_t bq = (size_t)nq * (size_t)fa_dtype_size(c->dtype), bkv = (size_t)nkv * (size_t)fa_dtype_size(c->dtype);
  void *dq1 = malloc(bq), *dk1 = malloc(bkv), *dv1 = malloc(bkv);
  float *dsinks1 = malloc((size_t)s->H * sizeof *dsinks1);
  /* fused, deterministic, deterministic on three threads (the same bits of
     dQ, dK and dV: the sinks' gradient is summed atomically in both passes) */
  for (int run = 0; run < 3 && ok; run++) {
    r.deterministic = run > 0;
    r.threads = run == 2 ? 3 : 1;
    void *xq = run == 2 ? dq1 : dq, *xk = run == 2 ? dk1 : dk, *xv = run == 2 ? dv1 : dv;
    float *xs = run == 2 ? dsinks1 : dsinks;
    ok = fa_attn_backward_variant(&r, s, &c->v, c->dtype, q, k, v, o, dO, lse2, xq, xk, xv, xs);
    if (!ok)
      break;
    if (r.ran_fused != (run == 0)) {
      printf("    FAIL: the %s backward pass did not run\n", run == 0 ? "fused" : "deterministic");
      failures++;
    }
    if (run < 2) {
      printf("  %s\n", run == 0 ? "fused" : "deterministic");
      check_all(c, q, k, v, dO, o, lse2, dq, dk, dv, dsinks);
    } else {
      bool same = !memcmp(dq, dq1, bq) && !memcmp(dk, dk1, bkv) && !memcmp(dv, dv1, bkv);
      printf("    deterministic dq, dk, dv bitwise the same on 3 threads: %s\n", same ? "yes" : "NO  FAIL");
      failures += !same;
    }
  }
  if (!ok) {
    printf("    FAIL: the kernels did not run\n");
    failures++;
  }
  fa_compiler_free(&fc);
  free(q), free(k), free(v), free(dO), free(o), free(dq), free(dk), free(dv), free(lse2), free(dsinks);
  free(dq1), free(dk1), free(dv1), free(dsinks1);
}

int main(int argc, char **argv) {
  const char *seed_env = getenv("FADSL_TEST_SEED");
  uint64_t seed = seed_env && *seed_env ? strtoull(seed_env, NULL, 0) : (uint64_t)time(NULL) ^ ((uint64_t)clock() << 32);
  rng_state = seed;
  printf("seed %llu (FADSL_TEST_SEED=%llu reproduces this run)\n", (unsigned long long)seed,
         (unsigned long long)seed);
  char path[512];
  snprintf(path, sizeof path, "%s", argc > 1 ? argv[1] : FA_SRCDIR "/tests/variants/cases.txt");
  FILE *f = fopen(path, "r");
  if (!f) {
    printf("FAIL: cannot read %s\n", path);
    return 1;
  }
  int run = 0;
  char line[512];
  for (int lineno = 1; fgets(line, sizeof line, f); lineno++) {
    char *p = line;
    while (*p == ' ' || *p == '\t')
      p++;
    if (*p == '#' || *p == '\n' || !*p)
      continue;
    line[strcspn(line, "\n")] = '\0';
    Case c;
    if (!parse_case(p, &c)) {
      printf("FAIL: %s:%d: cannot read the case '%s'\n", path, lineno, p);
      failures++;
      continue;
    }
    run_case(&c);
    run++;
  }
  fclose(f);
  for (int i = 0; i < RANDOM_CASES; i++) {
    Case c;
    random_case(&c);
    run_case(&c);
    run++;
  }
  printf("%d cases, %d failed checks\n", run, failures);
  return failures || run == 0 ? 1 : 0;
}
