/* fadsl-attn - exact attention (attention.fa) as a user runs it.
 *
 *   fadsl-attn --interpret [--causal] [--dtype f16|bf16] --q q.npy --k k.npy --v v.npy
 *              [--do do.npy] --o o.npy [--lse lse.npy] [--dq dq.npy --dk dk.npy --dv dv.npy]
 *              [--scale S] [--check] [--program attention.fa]
 *   fadsl-attn --interpret --shape B,H,KVH,N,D [--backward] [--seed N] [--check] ...
 *
 * q is [B, H, Nq, D]; k and v are [B, KVH, Nkv, D] with H a multiple of KVH
 * (grouped-query attention).  Inputs may be float16 or float32 .npy files and
 * are rounded to --dtype (default f16); outputs are float32 .npy.  The scale
 * defaults to 1/sqrt(D).  Causal masking lets query i see keys 0..i, so it
 * needs Nq == Nkv.  --lse writes the natural-log log-sum-exp of each query
 * row, [B, H, Nq].  With --do (or --backward on random inputs) the backward
 * kernels run too and --dq/--dk/--dv are written.
 *
 * Exit status: 0 success, 1 errors (or --check beyond the bounds), 2 usage.
 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "attention_ref.h"
#include "attn_interp.h"
#include "interp.h"
#include "npy.h"

enum { EXIT_ERRORS = 1, EXIT_USAGE = 2 };

typedef struct Options {
  bool interpret, gpu, causal, check, backward;
  DType dtype;
  const char *q, *k, *v, *dO, *o, *lse, *dq, *dk, *dv, *program;
  double scale;
  bool has_scale, has_shape, has_seed;
  int shape[6];         /* B, H, KVH, Nq, Nkv, D */
  uint64_t seed;
  int block_q, block_k, threads;
} Options;

static void usage(FILE *f) {
  fputs("usage: fadsl-attn --interpret [--causal] [--dtype f16|bf16] --q q.npy --k k.npy --v v.npy\n"
        "                  [--do do.npy] --o o.npy [--lse lse.npy] [--dq dq.npy --dk dk.npy --dv dv.npy]\n"
        "                  [--scale S] [--check]\n"
        "       fadsl-attn --interpret --shape B,H,KVH,N,D [--backward] [--seed N] [--check] [outputs...]\n"
        "Exact attention (attention.fa): O = softmax(scale * Q K^T) V, and its gradients.\n"
        "  q: [B, H, Nq, D]; k, v: [B, KVH, Nkv, D], H a multiple of KVH (grouped-query attention)\n"
        "  --interpret          run the kernels on the CPU interpreter\n"
        "  --gpu                run them on the GPU (not available yet)\n"
        "  --dtype f16|bf16     precision of the kernels (default f16); inputs (float16 or float32\n"
        "                       .npy) are rounded to it; outputs are written as float32 .npy\n"
        "  --causal             query i sees keys 0..i (needs Nq == Nkv)\n"
        "  --scale S            softmax scale (default 1/sqrt(D))\n"
        "  --do FILE            gradient of the loss with respect to O: runs the backward pass\n"
        "  --lse FILE           natural-log log-sum-exp of each query row, [B, H, Nq]\n"
        "  --shape B,H,KVH,N,D  random normal inputs instead of files (B,H,KVH,NQ,NKV,D also works)\n"
        "  --backward           with --shape: a random dO too, and the backward pass\n"
        "  --seed N             seed of the random inputs (printed when not given)\n"
        "  --check              print ||out - ref|| / ||ref|| against a float64 reference\n"
        "  --block-q N, --block-k N  tile sizes for the interpreter (default 32, 32)\n"
        "  --threads N          interpreter threads (default 1)\n"
        "  --program FILE       attention.fa to use (default: the installed one)\n",
        f);
}

static int usage_error(const char *fmt, const char *arg) {
  fprintf(stderr, "fadsl-attn: ");
  fprintf(stderr, fmt, arg);
  fprintf(stderr, "\n(try fadsl-attn --help)\n");
  return EXIT_USAGE;
}

static bool parse_pos_int(const char *s, int *out) {
  char *e;
  errno = 0;
  long v = strtol(s, &e, 10);
  if (errno || *e || e == s || v <= 0 || v > (1L << 30))
    return false;
  *out = (int)v;
  return true;
}

static int parse_options(int argc, char **argv, Options *o) {
  memset(o, 0, sizeof *o);
  o->dtype = DT_F16;
  o->block_q = o->block_k = 32;
  o->threads = 1;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *val = i + 1 < argc ? argv[i + 1] : NULL;
    struct {
      const char *opt;
      const char **dst;
    } files[] = {{"--q", &o->q},     {"--k", &o->k},   {"--v", &o->v},     {"--do", &o->dO},
                 {"--o", &o->o},     {"--lse", &o->lse}, {"--dq", &o->dq}, {"--dk", &o->dk},
                 {"--dv", &o->dv},   {"--program", &o->program}};
    bool matched = false;
    for (int f = 0; f < FA_ARRAY_LEN(files); f++)
      if (!strcmp(a, files[f].opt)) {
        if (!val)
          return usage_error("%s needs a file name", a);
        *files[f].dst = val;
        i++;
        matched = true;
      }
    if (matched)
      continue;
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      usage(stdout);
      exit(0);
    } else if (!strcmp(a, "--interpret")) {
      o->interpret = true;
    } else if (!strcmp(a, "--gpu")) {
      o->gpu = true;
    } else if (!strcmp(a, "--causal")) {
      o->causal = true;
    } else if (!strcmp(a, "--check")) {
      o->check = true;
    } else if (!strcmp(a, "--backward")) {
      o->backward = true;
    } else if (!strcmp(a, "--dtype")) {
      if (!val)
        return usage_error("%s needs f16 or bf16", a);
      if (!strcmp(val, "f16") || !strcmp(val, "float16"))
        o->dtype = DT_F16;
      else if (!strcmp(val, "bf16") || !strcmp(val, "bfloat16"))
        o->dtype = DT_BF16;
      else
        return usage_error("--dtype takes f16 or bf16, not '%s'", val);
      i++;
    } else if (!strcmp(a, "--scale")) {
      char *e;
      if (!val || (o->scale = strtod(val, &e), *e) || e == val || !(o->scale > 0) || !isfinite(o->scale))
        return usage_error("--scale needs a positive number", a);
      o->has_scale = true;
      i++;
    } else if (!strcmp(a, "--shape")) {
      if (!val)
        return usage_error("%s needs B,H,KVH,N,D", a);
      int v[6], n = 0;
      char *copy = strdup(val), *save = NULL;
      for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (n == 6 || !parse_pos_int(t, &v[n])) {
          free(copy);
          return usage_error("--shape wants B,H,KVH,N,D (positive integers), not '%s'", val);
        }
        n++;
      }
      free(copy);
      if (n == 5) {
        int s[6] = {v[0], v[1], v[2], v[3], v[3], v[4]};
        memcpy(o->shape, s, sizeof s);
      } else if (n == 6) {
        memcpy(o->shape, v, sizeof v);
      } else {
        return usage_error("--shape wants B,H,KVH,N,D, not '%s'", val);
      }
      o->has_shape = true;
      i++;
    } else if (!strcmp(a, "--seed")) {
      char *e;
      if (!val || (o->seed = strtoull(val, &e, 0), *e) || e == val)
        return usage_error("--seed needs a number", a);
      o->has_seed = true;
      i++;
    } else if (!strcmp(a, "--block-q") || !strcmp(a, "--block-k") || !strcmp(a, "--threads")) {
      int *dst = !strcmp(a, "--threads") ? &o->threads : a[8] == 'q' ? &o->block_q : &o->block_k;
      if (!val || !parse_pos_int(val, dst))
        return usage_error("%s needs a positive number", a);
      i++;
    } else {
      return usage_error("unknown argument '%s'", a);
    }
  }
  if (o->interpret == o->gpu)
    return usage_error("%s", "choose one of --interpret and --gpu");
  if (o->has_shape) {
    if (o->q || o->k || o->v || o->dO)
      return usage_error("%s", "--shape makes random inputs: give it without --q/--k/--v/--do");
  } else {
    if (!o->q || !o->k || !o->v)
      return usage_error("%s", "needs --q, --k and --v (or --shape for random inputs)");
    if (o->backward)
      return usage_error("%s", "--backward is for random inputs (--shape); with files give --do");
  }
  if ((o->dq || o->dk || o->dv) && !o->dO && !o->backward)
    return usage_error("%s", "--dq/--dk/--dv need --do (the backward pass)");
  return 0;
}

/* ---- inputs ------------------------------------------------------------------- */

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

/* An input tensor in the kernels' dtype, and its exact values. */
typedef struct Tensor {
  int64_t shape[4];
  int64_t n;
  void *data;           /* dtype values */
  double *vals;
} Tensor;

static bool alloc_tensor(Tensor *t, DType dt, const int64_t *shape) {
  memcpy(t->shape, shape, sizeof t->shape);
  t->n = shape[0] * shape[1] * shape[2] * shape[3];
  t->data = malloc((size_t)(t->n ? t->n : 1) * (size_t)fa_dtype_size(dt));
  t->vals = malloc((size_t)(t->n ? t->n : 1) * sizeof(double));
  return t->data && t->vals;
}

static bool random_tensor(Tensor *t, DType dt, const int64_t *shape) {
  if (!alloc_tensor(t, dt, shape))
    return false;
  for (int64_t i = 0; i < t->n; i++) {
    fa_host_set(dt, t->data, i, rng_normal());
    t->vals[i] = fa_host_get(dt, t->data, i);
  }
  return true;
}

static bool read_tensor(const char *what, const char *path, DType dt, Tensor *t) {
  FaNpy a;
  char err[600];
  if (!fa_npy_read(path, &a, err, sizeof err)) {
    fprintf(stderr, "fadsl-attn: --%s: %s\n", what, err);
    return false;
  }
  if (a.ndim != 4 || (a.dtype != DT_F16 && a.dtype != DT_F32)) {
    fprintf(stderr, "fadsl-attn: --%s %s: want a 4-D float16 or float32 array, got a %d-D %s array\n", what, path,
            a.ndim, fa_npy_dtype_name(a.dtype));
    fa_npy_free(&a);
    return false;
  }
  if (a.shape[0] > INT32_MAX || a.shape[1] > INT32_MAX || a.shape[2] > INT32_MAX || a.shape[3] > INT32_MAX) {
    fprintf(stderr, "fadsl-attn: --%s %s: dimensions too large\n", what, path);
    fa_npy_free(&a);
    return false;
  }
  bool ok = alloc_tensor(t, dt, a.shape);
  if (ok) {
    fa_host_convert(a.dtype, a.data, dt, t->data, t->n);
    for (int64_t i = 0; i < t->n; i++)
      t->vals[i] = fa_host_get(dt, t->data, i);
  }
  fa_npy_free(&a);
  return ok;
}

static void free_tensor(Tensor *t) {
  free(t->data);
  free(t->vals);
}

static void *alloc_poisoned(DType dt, int64_t n) {
  void *p = malloc((size_t)(n ? n : 1) * (size_t)fa_dtype_size(dt));
  if (p)
    for (int64_t i = 0; i < n; i++)
      fa_host_set(dt, p, i, NAN);
  return p;
}

/* Writes n values of dtype as a float32 .npy of the given shape. */
static bool write_f32(const char *path, DType dt, const void *data, int ndim, const int64_t *shape, double mul) {
  int64_t n = 1;
  for (int i = 0; i < ndim; i++)
    n *= shape[i];
  float *f = malloc((size_t)(n ? n : 1) * sizeof *f);
  if (!f)
    return false;
  for (int64_t i = 0; i < n; i++)
    f[i] = (float)(fa_host_get(dt, data, i) * mul);
  char err[600];
  bool ok = fa_npy_write(path, DT_F32, ndim, shape, f, err, sizeof err);
  if (!ok)
    fprintf(stderr, "fadsl-attn: %s\n", err);
  free(f);
  return ok;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void report(const char *what, DType dt, const void *data, const double *ref, int64_t n, double mul,
                   double bound, bool *within) {
  double *got = malloc((size_t)(n ? n : 1) * sizeof *got);
  if (!got)
    return;
  for (int64_t i = 0; i < n; i++)
    got[i] = fa_host_get(dt, data, i) * mul;
  double e = fa_rel_err(got, ref, n);
  bool ok = e < bound;
  printf("  %-3s ||out - ref|| / ||ref|| = %.3e%s\n", what, e, ok ? "" : "  (above the test bound)");
  if (!ok)
    *within = false;
  free(got);
}

int main(int argc, char **argv) {
  Options o;
  int rc = parse_options(argc, argv, &o);
  if (rc)
    return rc;
  if (o.gpu) {
    fprintf(stderr, "fadsl-attn: --gpu is not available yet; use --interpret\n");
    return EXIT_USAGE;
  }
  const char *program = fa_attn_find_program(o.program);
  if (!program)
    return EXIT_ERRORS;

  DType dt = o.dtype;
  Tensor q = {0}, k = {0}, v = {0}, dO = {0};
  bool backward = o.dO || o.backward;
  bool ok = true;
  if (o.has_shape) {
    if (!o.has_seed)
      o.seed = (uint64_t)time(NULL);
    rng_state = o.seed;
    printf("random inputs, seed %llu\n", (unsigned long long)o.seed);
    int64_t qs[4] = {o.shape[0], o.shape[1], o.shape[3], o.shape[5]};
    int64_t ks[4] = {o.shape[0], o.shape[2], o.shape[4], o.shape[5]};
    ok = random_tensor(&q, dt, qs) && random_tensor(&k, dt, ks) && random_tensor(&v, dt, ks) &&
         (!backward || random_tensor(&dO, dt, qs));
  } else {
    ok = read_tensor("q", o.q, dt, &q) && read_tensor("k", o.k, dt, &k) && read_tensor("v", o.v, dt, &v) &&
         (!o.dO || read_tensor("do", o.dO, dt, &dO));
  }
  if (!ok)
    goto fail;

  FaAttnShape s = {(int)q.shape[0], (int)q.shape[1], (int)k.shape[1], (int)q.shape[2], (int)k.shape[2],
                   (int)q.shape[3], o.causal, 0};
  s.scale = o.has_scale ? o.scale : 1.0 / sqrt((double)s.D);
  if (k.shape[0] != q.shape[0] || k.shape[3] != q.shape[3] || memcmp(k.shape, v.shape, sizeof k.shape) ||
      (backward && memcmp(dO.shape, q.shape, sizeof q.shape))) {
    fprintf(stderr,
            "fadsl-attn: shapes do not fit: q [%lld, %lld, %lld, %lld], k [%lld, %lld, %lld, %lld], "
            "v [%lld, %lld, %lld, %lld]%s; want q [B, H, Nq, D], k and v [B, KVH, Nkv, D], dO like q\n",
            (long long)q.shape[0], (long long)q.shape[1], (long long)q.shape[2], (long long)q.shape[3],
            (long long)k.shape[0], (long long)k.shape[1], (long long)k.shape[2], (long long)k.shape[3],
            (long long)v.shape[0], (long long)v.shape[1], (long long)v.shape[2], (long long)v.shape[3],
            backward ? " and dO" : "");
    goto fail;
  }
  char why[300];
  if (!fa_attn_shape_ok(&s, backward, why, sizeof why)) {
    fprintf(stderr, "fadsl-attn: %s\n", why);
    goto fail;
  }
  printf("attention B=%d H=%d KVH=%d Nq=%d Nkv=%d D=%d %s %s scale=%g\n", s.B, s.H, s.KVH, s.Nq, s.Nkv, s.D,
         s.causal ? "causal" : "full", fa_dtype_name(dt), s.scale);

  int64_t rows = (int64_t)s.B * s.H * s.Nq;
  void *out = alloc_poisoned(dt, q.n), *dq = NULL, *dk = NULL, *dv = NULL;
  float *lse2 = alloc_poisoned(DT_F32, rows);
  if (backward) {
    dq = alloc_poisoned(dt, q.n);
    dk = alloc_poisoned(dt, k.n);
    dv = alloc_poisoned(dt, v.n);
  }
  FaCompiler fc;
  fa_compiler_init(&fc, stderr);
  FaAttnRunner r;
  ok = out && lse2 && (!backward || (dq && dk && dv));
  ok = ok && fa_attn_open(&r, &fc, program, o.block_q, o.block_k, o.threads);
  double t0 = now_s();
  ok = ok && fa_attn_forward(&r, &s, dt, q.data, k.data, v.data, out, lse2);
  double t1 = now_s();
  if (ok)
    printf("forward: %.2f s on the interpreter\n", t1 - t0);
  ok = ok && (!backward || fa_attn_backward(&r, &s, dt, q.data, k.data, v.data, out, dO.data, lse2, dq, dk, dv));
  if (ok && backward)
    printf("backward: %.2f s on the interpreter\n", now_s() - t1);

  int64_t rshape[3] = {s.B, s.H, s.Nq};
  if (ok && o.o)
    ok = write_f32(o.o, dt, out, 4, q.shape, 1.0);
  if (ok && o.lse)
    ok = write_f32(o.lse, DT_F32, lse2, 3, rshape, M_LN2);
  if (ok && o.dq)
    ok = write_f32(o.dq, dt, dq, 4, q.shape, 1.0);
  if (ok && o.dk)
    ok = write_f32(o.dk, dt, dk, 4, k.shape, 1.0);
  if (ok && o.dv)
    ok = write_f32(o.dv, dt, dv, 4, v.shape, 1.0);

  bool within = true;
  if (ok && o.check) {
    double *ro = malloc((size_t)q.n * sizeof *ro), *rl = malloc((size_t)rows * sizeof *rl);
    if (ro && rl) {
      fa_attn_ref_forward(&s, q.vals, k.vals, v.vals, ro, rl);
      bool bf = dt == DT_BF16;
      printf("against float64 (on the same %s inputs):\n", fa_dtype_name(dt));
      report("o", dt, out, ro, q.n, 1.0, bf ? 1e-2 : 2e-3, &within);
      report("lse", DT_F32, lse2, rl, rows, M_LN2, 1e-4, &within);
      if (backward) {
        double *rq = malloc((size_t)q.n * sizeof *rq), *rk = malloc((size_t)k.n * sizeof *rk);
        double *rv = malloc((size_t)v.n * sizeof *rv);
        if (rq && rk && rv) {
          fa_attn_ref_backward(&s, q.vals, k.vals, v.vals, dO.vals, rq, rk, rv);
          report("dq", dt, dq, rq, q.n, 1.0, bf ? 3e-2 : 1e-2, &within);
          report("dk", dt, dk, rk, k.n, 1.0, bf ? 3e-2 : 1e-2, &within);
          report("dv", dt, dv, rv, v.n, 1.0, bf ? 3e-2 : 1e-2, &within);
        }
        free(rq);
        free(rk);
        free(rv);
      }
    }
    free(ro);
    free(rl);
  }
  fa_compiler_free(&fc);
  free(out);
  free(lse2);
  free(dq);
  free(dk);
  free(dv);
  free_tensor(&q);
  free_tensor(&k);
  free_tensor(&v);
  free_tensor(&dO);
  return ok && within ? 0 : EXIT_ERRORS;
fail:
  free_tensor(&q);
  free_tensor(&k);
  free_tensor(&v);
  free_tensor(&dO);
  return EXIT_ERRORS;
}
