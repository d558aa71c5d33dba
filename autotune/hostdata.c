/* hostdata.c - the data fadsl-tune puts into a problem's buffers, and the
 * comparison of candidates' outputs.
 *
 * Buffers are filled on the host from a seeded generator (splitmix64), so a
 * run is reproducible, then copied to the device.  `empty` buffers are
 * poisoned with NaN (all-ones bytes for integers): a kernel that forgets to
 * write part of its output then disagrees with one that does not. */
#include <math.h>
#include <string.h>

#include "tune.h"

static uint64_t splitmix64(uint64_t *state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* Uniform in [0, 1) with 53 random bits. */
static double uniform(uint64_t *state) { return (double)(splitmix64(state) >> 11) * 0x1.0p-53; }

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
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ffu;
  float v;
  if (e == 0) {
    v = ldexpf((float)m, -24);
  } else if (e == 31) {
    v = m ? NAN : INFINITY;
  } else {
    v = ldexpf((float)(m | 0x400u), (int)e - 25);
  }
  uint32_t bits;
  memcpy(&bits, &v, 4);
  bits |= sign;
  memcpy(&v, &bits, 4);
  return v;
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

void fa_tune_fill(void *dst, DType dt, size_t count, TuneFill fill, uint64_t seed) {
  size_t bytes = count * (size_t)fa_dtype_size(dt);
  if (fill == TUNE_FILL_ZEROS) {
    memset(dst, 0, bytes);
    return;
  }
  if (fill == TUNE_FILL_EMPTY) {
    if (!fa_dtype_is_float(dt)) {
      memset(dst, 0xff, bytes);
      return;
    }
    for (size_t i = 0; i < count; i++) store_element(dst, dt, i, NAN);
    return;
  }
  uint64_t state = seed;
  bool integer = !fa_dtype_is_float(dt);
  for (size_t i = 0; i < count; i++) {
    double v;
    if (fill == TUNE_FILL_RAND) {
      v = uniform(&state);
      if (integer) v = floor(v * 100);   /* small non-negative integers */
    } else {
      /* Box-Muller; one value per pair keeps the code short */
      double u1 = uniform(&state), u2 = uniform(&state);
      v = sqrt(-2.0 * log(1.0 - u1)) * cos(2.0 * M_PI * u2);
      if (integer) v = nearbyint(v * 10);
    }
    store_element(dst, dt, i, v);
  }
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

void fa_tune_compare(const void *a, const void *b, DType dt, size_t count, TuneCompare *out) {
  memset(out, 0, sizeof *out);
  double diff2 = 0, ref2 = 0, worst = -1;
  bool first_nonfinite = true;
  for (size_t i = 0; i < count; i++) {
    double x = fa_tune_load_element(a, dt, i), y = fa_tune_load_element(b, dt, i);
    bool fx = isfinite(x), fy = isfinite(y);
    if (!fx || !fy) {
      /* the same NaN / infinity in both (e.g. a never-written tail) is agreement */
      bool same = (isnan(x) && isnan(y)) || (!isnan(x) && !isnan(y) && x == y);
      if (!same) {
        if (first_nonfinite) out->first_bad = i;
        first_nonfinite = false;
        out->nonfinite_mismatch++;
      }
      continue;
    }
    double d = x - y;
    diff2 += d * d;
    ref2 += y * y;
    if (first_nonfinite && fabs(d) > worst) {
      worst = fabs(d);
      out->first_bad = i;
    }
  }
  out->rel_err = ref2 > 0 ? sqrt(diff2 / ref2) : (diff2 > 0 ? INFINITY : 0);
}
