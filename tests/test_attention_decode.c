/* test_attention_decode.c - decoding from a paged KV cache (decode.fa:
 * attn_decode_split + attn_decode_combine) on the CPU interpreter against
 * float64, on fresh random inputs every run.
 *
 * The cases are data: tests/variants/decode-cases.txt, one per line,
 *     B SQ H KVH D PAGE MAXLEN DTYPE SPLITS BLOCK_K [causal] [lens=A,B,...]
 * (lengths drawn from 0 .. MAXLEN unless given; the pages of every sequence
 * are scattered over the cache in a random order, with spare pages between
 * them), then RANDOM_CASES drawn from the seed.  o is compared with
 * ||o - ref|| / max(||ref||, ||ref_rss||) and lse with ||lse - ref|| / ||ref||
 * against the bounds of the forward pass; a token that sees no key must give
 * o = 0 and lse = +inf.  FADSL_TEST_SEED=N reproduces a run. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "attn_check.h"
#include "attn_decode.h"
#include "attn_interp.h"
#include "interp.h"

#ifndef FA_SRCDIR
#error "FA_SRCDIR must name the source tree"
#endif

enum { RANDOM_CASES = 4, MAX_B = 16 };

typedef struct Case {
  FaDecodeShape s;
  int maxlen, splits, block_k;
  DType dtype;
  int nlens, lens[MAX_B];
  char line[256];
} Case;

static uint64_t rng_state;
static uint64_t rng_next(void) {
  uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
static int rng_int(int lo, int hi) { return lo + (int)(rng_next() % (uint64_t)(hi - lo + 1)); }
static double rng_normal(void) {
  double u1 = ((double)(rng_next() >> 11) + 0.5) * 0x1p-53, u2 = (double)(rng_next() >> 11) * 0x1p-53;
  return sqrt(-2 * log(u1)) * cos(2 * M_PI * u2);
}

static void *random_array(DType dt, int64_t n) {
  void *p = malloc((size_t)(n ? n : 1) * (size_t)fa_dtype_size(dt));
  for (int64_t i = 0; p && i < n; i++)
    fa_host_set(dt, p, i, rng_normal());
  return p;
}

static int failures;

static bool parse_case(const char *line, Case *c) {
  memset(c, 0, sizeof *c);
  snprintf(c->line, sizeof c->line, "%s", line);
  char dt[16];
  int off = 0;
  if (sscanf(line, "%d %d %d %d %d %d %d %15s %d %d %n", &c->s.B, &c->s.Sq, &c->s.H, &c->s.KVH, &c->s.D,
             &c->s.page_size, &c->maxlen, dt, &c->splits, &c->block_k, &off) < 10 || c->s.B > MAX_B)
    return false;
  c->dtype = !strcmp(dt, "bf16") ? DT_BF16 : DT_F16;
  char rest[256];
  snprintf(rest, sizeof rest, "%s", line + off);
  for (char *save = NULL, *t = strtok_r(rest, " \t\n", &save); t; t = strtok_r(NULL, " \t\n", &save)) {
    if (!strcmp(t, "causal")) {
      c->s.causal = true;
    } else if (!strncmp(t, "lens=", 5)) {
      for (char *q = t + 5; *q && c->nlens < MAX_B;) {
        c->lens[c->nlens++] = (int)strtol(q, &q, 10);
        if (*q == ',')
          q++;
      }
    } else {
      return false;
    }
  }
  return c->nlens == 0 || c->nlens == c->s.B;
}

static void random_case(Case *c) {
  memset(c, 0, sizeof *c);
  static const int heads[][2] = {{4, 1}, {8, 2}, {2, 2}, {6, 3}};
  int h = rng_int(0, 3);
  c->s.B = rng_int(1, 4);
  c->s.Sq = rng_int(1, 3);
  c->s.H = heads[h][0];
  c->s.KVH = heads[h][1];
  c->s.D = rng_int(0, 1) ? 16 : 32;
  c->s.page_size = rng_int(0, 1) ? 16 : 32;
  c->maxlen = rng_int(1, 300);
  c->dtype = rng_int(0, 1) ? DT_BF16 : DT_F16;
  c->splits = rng_int(1, 5);
  c->block_k = 16;
  c->s.causal = rng_int(0, 1);
  snprintf(c->line, sizeof c->line, "(random)");
}

static void run_case(Case *c) {
  FaDecodeShape *s = &c->s;
  s->scale = 1.0 / sqrt((double)s->D);
  int32_t lens[MAX_B];
  int pages = 0;
  s->max_blocks = (c->maxlen + s->page_size - 1) / s->page_size;
  if (s->max_blocks < 1)
    s->max_blocks = 1;
  for (int b = 0; b < s->B; b++) {
    lens[b] = c->nlens ? c->lens[b] : rng_int(0, c->maxlen);
    pages += (lens[b] + s->page_size - 1) / s->page_size;
  }
  /* every sequence's pages, scattered over a cache with spare pages */
  s->num_blocks = pages + rng_int(1, 4);
  int *order = malloc((size_t)s->num_blocks * sizeof *order);
  int32_t *table = calloc((size_t)s->B * s->max_blocks, sizeof *table);
  for (int i = 0; i < s->num_blocks; i++)
    order[i] = i;
  for (int i = s->num_blocks - 1; i > 0; i--) {
    int j = rng_int(0, i), t = order[i];
    order[i] = order[j];
    order[j] = t;
  }
  int next = 0;
  for (int b = 0; b < s->B; b++)
    for (int p = 0; p < s->max_blocks; p++)
      table[(int64_t)b * s->max_blocks + p] = p * s->page_size < lens[b] ? order[next++] : rng_int(0, s->num_blocks - 1);
  printf("B=%d Sq=%d H=%d KVH=%d D=%d page=%d lengths", s->B, s->Sq, s->H, s->KVH, s->D, s->page_size);
  for (int b = 0; b < s->B; b++)
    printf("%s%d", b ? "," : " ", lens[b]);
  printf(" %s%s splits=%d BLOCK_K=%d  [%s]\n", s->causal ? "causal " : "", fa_dtype_name(c->dtype), c->splits,
         c->block_k, c->line);
  char why[300];
  if (!fa_decode_ok(s, table, lens, why, sizeof why)) {
    printf("    FAIL: %s\n", why);
    failures++;
    free(order), free(table);
    return;
  }
  int64_t nq = (int64_t)s->B * s->Sq * s->H * s->D, ncache = (int64_t)s->num_blocks * s->page_size * s->KVH * s->D;
  void *q = random_array(c->dtype, nq), *kc = random_array(c->dtype, ncache), *vc = random_array(c->dtype, ncache);
  void *o = malloc((size_t)nq * 2);
  float *lse2 = malloc((size_t)s->B * s->H * s->Sq * sizeof *lse2);
  for (int64_t i = 0; i < nq; i++)
    fa_host_set(c->dtype, o, i, NAN);
  for (int64_t i = 0; i < (int64_t)s->B * s->H * s->Sq; i++)
    lse2[i] = NAN;
  FaDecodeData d = {c->dtype, q, kc, vc, table, lens, o, lse2};
  FaCompiler fc;
  fa_compiler_init(&fc, stderr);
  FaAttnRunner r;
  bool ok = fa_attn_open(&r, &fc, FA_SRCDIR "/examples/attention/decode.fa", 0, 0, 1) &&
            fa_decode_run(&r, s, &d, c->splits, c->block_k, o, lse2);
  FaDecodeCheck res;
  if (!ok || !fa_decode_check(s, &d, &res)) {
    printf("    FAIL: the kernels did not run\n");
    failures++;
  } else {
    static const char *const names[2] = {"o", "lse"};
    for (int w = 0; w < 2; w++) {
      double bound = fa_attn_check_bound(c->dtype, w == 0 ? FA_CHECK_O : FA_CHECK_LSE);
      bool good = res.err[w] < bound && res.nonfinite[w] == 0;
      printf("    %-4s err %.3e  (bound %.0e; ||ref|| %.3e)%s\n", names[w], res.err[w], bound, res.ref_norm[w],
             good ? "" : "  FAIL");
      failures += !good;
    }
  }
  fa_compiler_free(&fc);
  free(q), free(kc), free(vc), free(o), free(lse2), free(order), free(table);
}

int main(int argc, char **argv) {
  const char *seed_env = getenv("FADSL_TEST_SEED");
  uint64_t seed = seed_env && *seed_env ? strtoull(seed_env, NULL, 0) : (uint64_t)time(NULL) ^ ((uint64_t)clock() << 32);
  rng_state = seed;
  printf("seed %llu (FADSL_TEST_SEED=%llu reproduces this run)\n", (unsigned long long)seed,
         (unsigned long long)seed);
  const char *path = argc > 1 ? argv[1] : FA_SRCDIR "/tests/variants/decode-cases.txt";
  FILE *f = fopen(path, "r");
  if (!f) {
    printf("FAIL: cannot read %s\n", path);
    return 1;
  }
  int run = 0;
  char line[256];
  for (int lineno = 1; fgets(line, sizeof line, f); lineno++) {
    char *p = line + strspn(line, " \t");
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
