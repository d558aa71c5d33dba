/* hostdata.c - the data fadsl-tune puts into a problem's buffers, and the
 * comparison of candidates' outputs.
 *
 * `randn` and `rand` buffers are filled on the host and copied to the device.
 * The stream of numbers is cut into chunks of FILL_CHUNK elements, each with
 * its own xoshiro256** generator seeded from (seed, chunk number), so that
 * threads fill chunks independently and the contents do not depend on the
 * number of threads, nor on how a buffer is cut into pieces for copying.
 * Normal samples come from Box-Muller in single precision on pairs (both the
 * cosine and the sine branch are used); f64 buffers get these single
 * precision values too.  `empty` buffers are all-ones bytes:
 * a NaN in every float type, -1 in every integer type; a kernel that forgets
 * to write part of its output then disagrees with one that does not. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "tune.h"

enum { FILL_CHUNK = 1 << 16 };

static uint64_t splitmix64(uint64_t *state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

typedef struct Xoshiro {
  uint64_t s[4];
} Xoshiro;

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t xoshiro_next(Xoshiro *x) {
  uint64_t *s = x->s;
  uint64_t result = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = rotl(s[3], 45);
  return result;
}

static void xoshiro_seed(Xoshiro *x, uint64_t seed, uint64_t chunk) {
  uint64_t st = seed ^ (chunk * 0xd1342543de82ef95ull);
  for (int i = 0; i < 4; i++) x->s[i] = splitmix64(&st);
}

/* Chunk `chunk` of the stream, as floats: FILL_CHUNK values. */
static void gen_chunk(float *out, TuneFill fill, uint64_t seed, uint64_t chunk) {
  Xoshiro x;
  xoshiro_seed(&x, seed, chunk);
  for (int i = 0; i < FILL_CHUNK; i += 2) {
    uint64_t r = xoshiro_next(&x);
    /* two 24-bit uniforms from one draw */
    float a = (float)(r >> 40) * 0x1.0p-24f, b = (float)((r >> 16) & 0xffffffu) * 0x1.0p-24f;
    if (fill == TUNE_FILL_RAND) {
      out[i] = a;
      out[i + 1] = b;
    } else {
      float radius = sqrtf(-2.0f * logf(1.0f - a));   /* 1 - a is in (0, 1] */
      float angle = 6.28318530718f * b;
      out[i] = radius * cosf(angle);
      out[i + 1] = radius * sinf(angle);
    }
  }
}

static uint16_t f32_to_f16(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u, absx = x & 0x7fffffffu;
  if (absx > 0x7f800000u) return (uint16_t)(sign | 0x7e00u);   /* NaN */
  if (absx >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);  /* rounds to infinity */
  if (absx < 0x38800000u) {                                    /* subnormal half, or zero */
    float a;
    memcpy(&a, &absx, 4);
    /* the value in units of 2^-24, rounded to nearest even by the FPU */
    return (uint16_t)(sign | (uint32_t)nearbyintf(a * 16777216.0f));
  }
  uint32_t h = ((absx >> 13) - (112u << 10));
  uint32_t rem = absx & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1))) h++;
  return (uint16_t)(sign | h);
}

static float f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu, bits;
  if (e == 0) {
    float v = (float)m * 0x1.0p-24f;   /* zero or subnormal: exact */
    memcpy(&bits, &v, 4);
    bits |= sign;
  } else if (e == 31) {
    bits = sign | 0x7f800000u | (m << 13);   /* infinity or NaN */
  } else {
    bits = sign | ((e + 112u) << 23) | (m << 13);
  }
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

static uint16_t f32_to_bf16(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u);
  x += 0x7fffu + ((x >> 16) & 1);
  return (uint16_t)(x >> 16);
}

static float bf16_to_f32(uint16_t h) {
  uint32_t x = (uint32_t)h << 16;
  float f;
  memcpy(&f, &x, 4);
  return f;
}

static void store_element(void *dst, DType dt, size_t i, double v) {
  unsigned char *p = (unsigned char *)dst + i * (size_t)fa_dtype_size(dt);
  switch (dt) {
    case DT_F16: { uint16_t h = f32_to_f16((float)v); memcpy(p, &h, 2); break; }
    case DT_BF16: { uint16_t h = f32_to_bf16((float)v); memcpy(p, &h, 2); break; }
    case DT_F32: { float f = (float)v; memcpy(p, &f, 4); break; }
    case DT_F64: memcpy(p, &v, 8); break;
    case DT_I1: case DT_I8: { int8_t b = (int8_t)v; memcpy(p, &b, 1); break; }
    case DT_I16: { int16_t b = (int16_t)v; memcpy(p, &b, 2); break; }
    case DT_I32: { int32_t b = (int32_t)v; memcpy(p, &b, 4); break; }
    case DT_U32: { uint32_t b = (uint32_t)v; memcpy(p, &b, 4); break; }
    case DT_I64: { int64_t b = (int64_t)v; memcpy(p, &b, 8); break; }
    default: break;
  }
}

double fa_tune_load_element(const void *src, DType dt, size_t i) {
  const unsigned char *p = (const unsigned char *)src + i * (size_t)fa_dtype_size(dt);
  switch (dt) {
    case DT_F16: { uint16_t h; memcpy(&h, p, 2); return f16_to_f32(h); }
    case DT_BF16: { uint16_t h; memcpy(&h, p, 2); return bf16_to_f32(h); }
    case DT_F32: { float f; memcpy(&f, p, 4); return f; }
    case DT_F64: { double d; memcpy(&d, p, 8); return d; }
    case DT_I1: case DT_I8: { int8_t b; memcpy(&b, p, 1); return b; }
    case DT_I16: { int16_t b; memcpy(&b, p, 2); return b; }
    case DT_I32: { int32_t b; memcpy(&b, p, 4); return b; }
    case DT_U32: { uint32_t b; memcpy(&b, p, 4); return b; }
    case DT_I64: { int64_t b; memcpy(&b, p, 8); return (double)b; }
    default: return 0;
  }
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
/* float -> f16, 8 at a time with the F16C instructions (round to nearest
 * even, as f32_to_f16); the caller checks that the CPU has them. */
__attribute__((target("avx,f16c"))) static void f32_to_f16_f16c(uint16_t *dst, const float *src, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128((__m128i *)(dst + i), _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
  for (; i < n; i++) dst[i] = f32_to_f16(src[i]);
}
static bool have_f16c(void) { return __builtin_cpu_supports("f16c") && __builtin_cpu_supports("avx"); }
#else
static void f32_to_f16_f16c(uint16_t *dst, const float *src, size_t n) {
  for (size_t i = 0; i < n; i++) dst[i] = f32_to_f16(src[i]);
}
static bool have_f16c(void) { return false; }
#endif

/* Stores `n` generated values as dtype dt at dst. */
static void store_values(void *dst, DType dt, const float *v, size_t n, TuneFill fill) {
  bool integer = !fa_dtype_is_float(dt);
  if (!integer && dt != DT_F16 && dt != DT_BF16 && dt != DT_F32) {
    for (size_t i = 0; i < n; i++) store_element(dst, dt, i, v[i]);
    return;
  }
  switch (dt) {
    case DT_F16:
      if (have_f16c()) {
        f32_to_f16_f16c(dst, v, n);
        return;
      }
      for (size_t i = 0; i < n; i++) ((uint16_t *)dst)[i] = f32_to_f16(v[i]);
      return;
    case DT_BF16:
      for (size_t i = 0; i < n; i++) ((uint16_t *)dst)[i] = f32_to_bf16(v[i]);
      return;
    case DT_F32:
      memcpy(dst, v, n * sizeof *v);
      return;
    default:
      /* integers: small non-negative ones from rand, rounded 10 x normal from randn */
      for (size_t i = 0; i < n; i++)
        store_element(dst, dt, i, fill == TUNE_FILL_RAND ? floor(v[i] * 100.0) : nearbyint(v[i] * 10.0));
  }
}

typedef struct FillWork {
  unsigned char *dst;
  DType dt;
  size_t first, count;
  TuneFill fill;
  uint64_t seed;
  int nthreads, thread;
} FillWork;

/* Chunks thread, thread + nthreads, ... of the range. */
static void *fill_worker(void *arg) {
  const FillWork *w = arg;
  float *tmp = malloc(sizeof *tmp * FILL_CHUNK);
  if (!tmp) return NULL;
  size_t esize = (size_t)fa_dtype_size(w->dt), end = w->first + w->count;
  uint64_t c0 = w->first / FILL_CHUNK, c1 = (end + FILL_CHUNK - 1) / FILL_CHUNK;
  for (uint64_t c = c0 + (uint64_t)w->thread; c < c1; c += (uint64_t)w->nthreads) {
    gen_chunk(tmp, w->fill, w->seed, c);
    size_t lo = c * FILL_CHUNK, hi = lo + FILL_CHUNK;
    if (lo < w->first) lo = w->first;
    if (hi > end) hi = end;
    store_values(w->dst + (lo - w->first) * esize, w->dt, tmp + (lo - c * FILL_CHUNK), hi - lo, w->fill);
  }
  free(tmp);
  return NULL;
}

void fa_tune_fill_range(void *dst, DType dt, size_t first, size_t count, TuneFill fill, uint64_t seed,
                        int threads) {
  size_t bytes = count * (size_t)fa_dtype_size(dt);
  if (fill == TUNE_FILL_ZEROS || fill == TUNE_FILL_EMPTY) {
    memset(dst, fill == TUNE_FILL_ZEROS ? 0 : 0xff, bytes);
    return;
  }
  size_t chunks = count / FILL_CHUNK + 2;
  if (threads < 1) threads = 1;
  if ((size_t)threads > chunks) threads = (int)chunks;
  if (threads > 256) threads = 256;
  FillWork w[256];
  pthread_t t[256];
  bool started[256];
  for (int i = 0; i < threads; i++) {
    w[i] = (FillWork){dst, dt, first, count, fill, seed, threads, i};
    started[i] = i > 0 && pthread_create(&t[i], NULL, fill_worker, &w[i]) == 0;
  }
  fill_worker(&w[0]);
  for (int i = 1; i < threads; i++) {
    if (started[i])
      pthread_join(t[i], NULL);
    else
      fill_worker(&w[i]);   /* no thread: do its share here */
  }
}

void fa_tune_fill(void *dst, DType dt, size_t count, TuneFill fill, uint64_t seed) {
  fa_tune_fill_range(dst, dt, 0, count, fill, seed, 1);
}

double fa_tune_tolerance(DType dt) {
  switch (dt) {
    case DT_F16: return 2e-3;
    case DT_BF16: return 1e-2;
    case DT_F32: return 1e-4;
    case DT_F64: return 1e-10;
    default: return 0;   /* integers: exact */
  }
}

/* Elements [first, first + n) of src as doubles; `table` holds the value of
 * every 16-bit pattern for f16 and bf16 (NULL otherwise). */
static void load_block(const void *src, DType dt, const float *table, size_t first, size_t n, double *out) {
  if (table) {
    const uint16_t *p = (const uint16_t *)src + first;
    for (size_t i = 0; i < n; i++) out[i] = table[p[i]];
    return;
  }
  if (dt == DT_F32) {
    const float *p = (const float *)src + first;
    for (size_t i = 0; i < n; i++) out[i] = p[i];
    return;
  }
  for (size_t i = 0; i < n; i++) out[i] = fa_tune_load_element(src, dt, first + i);
}

/* The comparison of elements [lo, hi): sums and places, merged by the caller. */
typedef struct ComparePart {
  const void *a, *b;
  DType dt;
  const float *table;
  size_t lo, hi;
  double diff2, ref2, worst;
  size_t nonfinite, first_nonfinite, worst_at;
} ComparePart;

static void *compare_part(void *arg) {
  ComparePart *p = arg;
  enum { BLOCK = 2048 };
  double xs[BLOCK], ys[BLOCK];
  p->diff2 = p->ref2 = 0;
  p->worst = -1;
  p->nonfinite = 0;
  for (size_t base = p->lo; base < p->hi; base += BLOCK) {
    size_t n = p->hi - base < BLOCK ? p->hi - base : BLOCK;
    load_block(p->a, p->dt, p->table, base, n, xs);
    load_block(p->b, p->dt, p->table, base, n, ys);
    for (size_t j = 0; j < n; j++) {
      double x = xs[j], y = ys[j];
      if (!isfinite(x) || !isfinite(y)) {
        /* the same NaN / infinity in both (e.g. a never-written tail) is agreement */
        bool same = (isnan(x) && isnan(y)) || (!isnan(x) && !isnan(y) && x == y);
        if (!same && p->nonfinite++ == 0) p->first_nonfinite = base + j;
        continue;
      }
      double d = x - y;
      p->diff2 += d * d;
      p->ref2 += y * y;
      if (fabs(d) > p->worst) {
        p->worst = fabs(d);
        p->worst_at = base + j;
      }
    }
  }
  return NULL;
}

void fa_tune_compare_threads(const void *a, const void *b, DType dt, size_t count, int threads, TuneCompare *out) {
  memset(out, 0, sizeof *out);
  float *table = NULL;
  if ((dt == DT_F16 || dt == DT_BF16) && count > 65536 && (table = malloc(sizeof *table * 65536)))
    for (uint32_t h = 0; h < 65536; h++) table[h] = dt == DT_F16 ? f16_to_f32((uint16_t)h) : bf16_to_f32((uint16_t)h);
  /* threads for large buffers only: a thread per million elements at most */
  enum { MAX_PARTS = 64 };
  size_t most = count / (1u << 20) + 1;
  int parts = threads < 1 ? 1 : threads > MAX_PARTS ? MAX_PARTS : threads;
  if ((size_t)parts > most) parts = (int)most;
  ComparePart part[MAX_PARTS];
  pthread_t tid[MAX_PARTS];
  bool started[MAX_PARTS];
  for (int i = 0; i < parts; i++) {
    part[i] = (ComparePart){.a = a, .b = b, .dt = dt, .table = table, .lo = count * (size_t)i / (size_t)parts,
                            .hi = count * (size_t)(i + 1) / (size_t)parts};
    started[i] = i > 0 && pthread_create(&tid[i], NULL, compare_part, &part[i]) == 0;
  }
  compare_part(&part[0]);
  for (int i = 1; i < parts; i++) {
    if (started[i])
      pthread_join(tid[i], NULL);
    else
      compare_part(&part[i]);
  }
  /* merged: sums; the first non-finite mismatch, else the largest difference */
  double diff2 = 0, ref2 = 0, worst = -1;
  for (int i = 0; i < parts; i++) {
    diff2 += part[i].diff2;
    ref2 += part[i].ref2;
    if (part[i].nonfinite && !out->nonfinite_mismatch) out->first_bad = part[i].first_nonfinite;
    out->nonfinite_mismatch += part[i].nonfinite;
    if (!out->nonfinite_mismatch && part[i].worst > worst) {
      worst = part[i].worst;
      out->first_bad = part[i].worst_at;
    }
  }
  free(table);
  out->rel_err = ref2 > 0 ? sqrt(diff2 / ref2) : (diff2 > 0 ? INFINITY : 0);
}

void fa_tune_compare(const void *a, const void *b, DType dt, size_t count, TuneCompare *out) {
  fa_tune_compare_threads(a, b, dt, count, 1, out);
}
