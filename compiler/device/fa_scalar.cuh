/* fa_scalar.cuh - scalar types and numerics of fadsl's device library.
 *
 * Part of the device-side tile library that kernels emitted by fadsl include
 * ("fadsl_device.cuh").  It is handed to NVRTC as an embedded header and uses
 * nothing from the CUDA toolkit's headers: only what NVRTC declares by itself
 * (threadIdx, __syncthreads, the math builtins) and inline PTX.
 *
 * Numerics, matching the CPU interpreter (compiler/interp.h):
 *   - f16 and bf16 are storage types; arithmetic on them converts to f32,
 *     computes in f32 and rounds the result back (round to nearest even), as
 *     the interpreter does.  Conversions use cvt.rn (PTX).
 *   - exp2 is ex2.approx.ftz.f32: relative error about 2^-22 (2 ulp), results
 *     below 2^-126 flush to zero.  exp(x) is ex2.approx(x * log2(e)); the
 *     rounding of the product adds a relative error of about |x| * 2^-24.
 *     log2 is lg2.approx.ftz.f32 (absolute error about 2^-22 near 1,
 *     relative 2 ulp elsewhere); log(x) = lg2.approx(x) * ln(2).  rsqrt is
 *     rsqrt.approx.ftz.f32 (2 ulp).  Everything else (sqrt, division, sin,
 *     cos, tanh, pow, fmod) is the IEEE-rounded or library-accurate CUDA
 *     builtin, like the interpreter's C library calls.  tanh_approx is
 *     tanh.approx.f32 (relative error about 2^-11; exact tanh on f64), the
 *     interpreter's tanhf.
 *   - maximum/minimum propagate NaN (max.NaN.f32); maxnum/minnum ignore a NaN
 *     operand (max.f32: IEEE maxNum).
 *   - erf is the CUDA builtin erff (2 ulp), fma is fma.rn (one rounding; on
 *     f16/bf16 the f32 fma is rounded to the format, like the interpreter).
 *   - rand / randn: Philox 4x32 and the conversions of the interpreter
 *     (interp.c), bit for bit for rand; randn's Box-Muller uses logf, cosf
 *     (1 and 2 ulp) and sqrtf (IEEE), so it agrees to a few ulp.
 *   - float -> int conversions truncate and saturate, NaN gives 0 (cvt.rzi).
 *   - shifts by the operand's width or more give 0 (or the sign for >> of a
 *     negative signed value).
 *   - integer division and remainder are total: a / 0 is 0, a % 0 is a,
 *     MIN / -1 wraps (div, mod below).
 */
#ifndef FA_SCALAR_CUH
#define FA_SCALAR_CUH

#define FA_DEV __device__ __forceinline__
#define FA_HD __host__ __device__ __forceinline__

namespace fa {

typedef signed char i8;
typedef short i16;
typedef int i32;
typedef long long i64;
typedef unsigned u32;
typedef unsigned long long u64;

/* ---- bit casts ------------------------------------------------------------- */

FA_DEV float bits_to_f32(unsigned u) {
  float f;
  asm("mov.b32 %0, %1;" : "=f"(f) : "r"(u));
  return f;
}
FA_DEV unsigned f32_to_bits(float f) {
  unsigned u;
  asm("mov.b32 %0, %1;" : "=r"(u) : "f"(f));
  return u;
}

/* ---- 16-bit floats ------------------------------------------------------------ */

struct half {
  unsigned short bits;
};
struct bf16 {
  unsigned short bits;
};

FA_DEV float to_f32(half h) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h.bits));
  return f;
}
FA_DEV float to_f32(bf16 h) { return bits_to_f32((unsigned)h.bits << 16); }
FA_DEV float to_f32(float x) { return x; }

FA_DEV half f32_to_f16(float f) {
  half h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h.bits) : "f"(f));
  return h;
}
FA_DEV bf16 f32_to_bf16(float f) {
  bf16 h;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h.bits) : "f"(f));
  return h;
}
FA_DEV half f64_to_f16(double d) {
  half h;
  asm("cvt.rn.f16.f64 %0, %1;" : "=h"(h.bits) : "d"(d));
  return h;
}
FA_DEV double to_f64(half h) {
  double d;
  asm("cvt.f64.f16 %0, %1;" : "=d"(d) : "h"(h.bits));
  return d;
}
FA_DEV double to_f64(bf16 h) { return (double)to_f32(h); }

/* Arithmetic on 16-bit floats: computed in f32, rounded once. */
#define FA_HALF_OPS(T, ROUND)                                                                      \
  FA_DEV T operator+(T a, T b) { return ROUND(to_f32(a) + to_f32(b)); }                            \
  FA_DEV T operator-(T a, T b) { return ROUND(to_f32(a) - to_f32(b)); }                            \
  FA_DEV T operator*(T a, T b) { return ROUND(to_f32(a) * to_f32(b)); }                            \
  FA_DEV T operator/(T a, T b) { return ROUND(to_f32(a) / to_f32(b)); }                            \
  FA_DEV T operator-(T a) {                                                                        \
    T r;                                                                                           \
    r.bits = (unsigned short)(a.bits ^ 0x8000u);                                                   \
    return r;                                                                                      \
  }                                                                                                \
  FA_DEV bool operator<(T a, T b) { return to_f32(a) < to_f32(b); }                                \
  FA_DEV bool operator<=(T a, T b) { return to_f32(a) <= to_f32(b); }                              \
  FA_DEV bool operator>(T a, T b) { return to_f32(a) > to_f32(b); }                                \
  FA_DEV bool operator>=(T a, T b) { return to_f32(a) >= to_f32(b); }                              \
  FA_DEV bool operator==(T a, T b) { return to_f32(a) == to_f32(b); }                              \
  FA_DEV bool operator!=(T a, T b) { return to_f32(a) != to_f32(b); }
FA_HALF_OPS(half, f32_to_f16)
FA_HALF_OPS(bf16, f32_to_bf16)
#undef FA_HALF_OPS

/* ---- conversions: convert<To>(from) ------------------------------------------------
 * float -> float rounds to nearest even; float -> int truncates toward zero and
 * saturates (NaN -> 0); int -> int wraps; anything -> bool is `!= 0`.
 */
template <class To> struct Convert;

template <> struct Convert<float> {
  FA_DEV static float from(float x) { return x; }
  FA_DEV static float from(double x) { return (float)x; }
  FA_DEV static float from(half x) { return to_f32(x); }
  FA_DEV static float from(bf16 x) { return to_f32(x); }
  template <class I> FA_DEV static float from(I x) { return (float)x; }
};
template <> struct Convert<double> {
  FA_DEV static double from(double x) { return x; }
  FA_DEV static double from(float x) { return (double)x; }
  FA_DEV static double from(half x) { return to_f64(x); }
  FA_DEV static double from(bf16 x) { return to_f64(x); }
  template <class I> FA_DEV static double from(I x) { return (double)x; }
};
template <> struct Convert<half> {
  FA_DEV static half from(half x) { return x; }
  FA_DEV static half from(float x) { return f32_to_f16(x); }
  FA_DEV static half from(double x) { return f64_to_f16(x); }
  FA_DEV static half from(bf16 x) { return f32_to_f16(to_f32(x)); } /* exact widening first */
  template <class I> FA_DEV static half from(I x) { return f64_to_f16((double)x); }
};
template <> struct Convert<bf16> {
  FA_DEV static bf16 from(bf16 x) { return x; }
  FA_DEV static bf16 from(float x) { return f32_to_bf16(x); }
  /* f64 -> bf16 goes through f32: a double rounding, off by one bf16 ulp only
     when the f64 value lies within 2^-24 relative of a bf16 rounding tie. */
  FA_DEV static bf16 from(double x) { return f32_to_bf16((float)x); }
  FA_DEV static bf16 from(half x) { return f32_to_bf16(to_f32(x)); }
  template <class I> FA_DEV static bf16 from(I x) { return f32_to_bf16((float)x); }
};
template <> struct Convert<bool> {
  FA_DEV static bool from(half x) { return to_f32(x) != 0.0f; }
  FA_DEV static bool from(bf16 x) { return to_f32(x) != 0.0f; }
  template <class X> FA_DEV static bool from(X x) { return x != 0; }
};

/* float -> integer: truncate, saturate, NaN -> 0 (PTX cvt.rzi semantics). */
FA_DEV long long f64_to_i64(double d) {
  long long r;
  asm("cvt.rzi.s64.f64 %0, %1;" : "=l"(r) : "d"(d));
  return r;
}
FA_DEV int f64_to_i32(double d) {
  int r;
  asm("cvt.rzi.s32.f64 %0, %1;" : "=r"(r) : "d"(d));
  return r;
}
FA_DEV unsigned f64_to_u32(double d) {
  unsigned r;
  asm("cvt.rzi.u32.f64 %0, %1;" : "=r"(r) : "d"(d));
  return r;
}
FA_DEV int f32_to_i32(float f) {
  int r;
  asm("cvt.rzi.s32.f32 %0, %1;" : "=r"(r) : "f"(f));
  return r;
}
FA_DEV long long f32_to_i64(float f) {
  long long r;
  asm("cvt.rzi.s64.f32 %0, %1;" : "=l"(r) : "f"(f));
  return r;
}
FA_DEV unsigned f32_to_u32(float f) {
  unsigned r;
  asm("cvt.rzi.u32.f32 %0, %1;" : "=r"(r) : "f"(f));
  return r;
}
FA_DEV int clamp_i32(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

#define FA_INT_CONVERT(T, FROM_F32, FROM_F64)                                                      \
  template <> struct Convert<T> {                                                                  \
    FA_DEV static T from(float x) { return FROM_F32; }                                             \
    FA_DEV static T from(double x) { return FROM_F64; }                                            \
    FA_DEV static T from(half h) { return from(to_f32(h)); }                                       \
    FA_DEV static T from(bf16 h) { return from(to_f32(h)); }                                       \
    template <class I> FA_DEV static T from(I x) { return (T)x; }                                  \
  };
FA_INT_CONVERT(int, f32_to_i32(x), f64_to_i32(x))
FA_INT_CONVERT(long long, f32_to_i64(x), f64_to_i64(x))
FA_INT_CONVERT(unsigned, f32_to_u32(x), f64_to_u32(x))
FA_INT_CONVERT(short, (short)clamp_i32(f32_to_i32(x), -32768, 32767),
               (short)clamp_i32(f64_to_i32(x), -32768, 32767))
FA_INT_CONVERT(signed char, (signed char)clamp_i32(f32_to_i32(x), -128, 127),
               (signed char)clamp_i32(f64_to_i32(x), -128, 127))
#undef FA_INT_CONVERT

template <class To, class From> FA_DEV To convert(From x) { return Convert<To>::from(x); }

/* ---- constants ------------------------------------------------------------------ */

template <class T> FA_DEV T from_double(double x) { return Convert<T>::from(x); }
template <> FA_DEV float from_double<float>(double x) { return (float)x; }
FA_DEV float f32_inf() { return bits_to_f32(0x7f800000u); }
FA_DEV float f32_nan() { return bits_to_f32(0x7fc00000u); }

/* Rounds an f32 to tf32 (10 mantissa bits), to nearest even, like the
   interpreter; infinities and NaN pass unchanged. */
FA_DEV float round_tf32(float x) {
  unsigned u = f32_to_bits(x);
  if ((u & 0x7f800000u) != 0x7f800000u)
    u = (u + 0xfffu + ((u >> 13) & 1u)) & ~0x1fffu;
  return bits_to_f32(u);
}

/* ---- math ------------------------------------------------------------------------ */

FA_DEV float exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
FA_DEV float log2(float x) {
  float y;
  asm("lg2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
FA_DEV float exp(float x) { return exp2(x * 1.4426950408889634f); }
FA_DEV float log(float x) { return log2(x) * 0.6931471805599453f; }
FA_DEV float sqrt(float x) { return ::sqrtf(x); }
FA_DEV float rsqrt(float x) {
  float y;
  asm("rsqrt.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
FA_DEV float sin(float x) { return ::sinf(x); }
FA_DEV float cos(float x) { return ::cosf(x); }
FA_DEV float tanh(float x) { return ::tanhf(x); }
/* tanh.approx.f32: one MUFU instruction, relative error at most about 2^-11
 * (PTX ISA), against tanhf's two dozen instructions and a branch. */
FA_DEV float tanh_approx(float x) {
  float y;
  asm("tanh.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
FA_DEV float floor(float x) { return ::floorf(x); }
FA_DEV float ceil(float x) { return ::ceilf(x); }
FA_DEV float abs(float x) { return ::fabsf(x); }
FA_DEV float sigmoid(float x) { return 1.0f / (1.0f + exp(-x)); }
FA_DEV float pow(float x, float y) { return ::powf(x, y); }
FA_DEV float mod(float x, float y) { return ::fmodf(x, y); }
FA_DEV float erf(float x) { return ::erff(x); }
FA_DEV float fma(float a, float b, float c) { return __fmaf_rn(a, b, c); }
FA_DEV float maxnum(float a, float b) {
  float r;
  asm("max.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
}
FA_DEV float minnum(float a, float b) {
  float r;
  asm("min.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
}
FA_DEV float maximum(float a, float b) {
  float r;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
}
FA_DEV float minimum(float a, float b) {
  float r;
  asm("min.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
}

FA_DEV double exp2(double x) { return ::exp2(x); }
FA_DEV double log2(double x) { return ::log2(x); }
FA_DEV double exp(double x) { return ::exp(x); }
FA_DEV double log(double x) { return ::log(x); }
FA_DEV double sqrt(double x) { return ::sqrt(x); }
FA_DEV double rsqrt(double x) { return 1.0 / ::sqrt(x); }
FA_DEV double sin(double x) { return ::sin(x); }
FA_DEV double cos(double x) { return ::cos(x); }
FA_DEV double tanh(double x) { return ::tanh(x); }
FA_DEV double tanh_approx(double x) { return ::tanh(x); }   /* no f64 approximation: exact */
FA_DEV double floor(double x) { return ::floor(x); }
FA_DEV double ceil(double x) { return ::ceil(x); }
FA_DEV double abs(double x) { return ::fabs(x); }
FA_DEV double sigmoid(double x) { return 1.0 / (1.0 + ::exp(-x)); }
FA_DEV double pow(double x, double y) { return ::pow(x, y); }
FA_DEV double mod(double x, double y) { return ::fmod(x, y); }
FA_DEV double erf(double x) { return ::erf(x); }
FA_DEV double fma(double a, double b, double c) { return __fma_rn(a, b, c); }
FA_DEV double maxnum(double a, double b) { return ::fmax(a, b); }
FA_DEV double minnum(double a, double b) { return ::fmin(a, b); }
FA_DEV double maximum(double a, double b) { return (a != a || a > b) ? a : (b != b ? b : (a == b ? a : b)); }
FA_DEV double minimum(double a, double b) { return (a != a || a < b) ? a : (b != b ? b : (a == b ? a : b)); }

/* 16-bit floats: compute in f32, round once. */
#define FA_HALF_MATH1(T, F)                                                                        \
  FA_DEV T F(T x) { return Convert<T>::from(F(to_f32(x))); }
#define FA_HALF_MATH2(T, F)                                                                        \
  FA_DEV T F(T x, T y) { return Convert<T>::from(F(to_f32(x), to_f32(y))); }
#define FA_HALF_MATH(T)                                                                            \
  FA_HALF_MATH1(T, exp2) FA_HALF_MATH1(T, log2) FA_HALF_MATH1(T, exp) FA_HALF_MATH1(T, log)        \
  FA_HALF_MATH1(T, sqrt) FA_HALF_MATH1(T, rsqrt) FA_HALF_MATH1(T, sin) FA_HALF_MATH1(T, cos)       \
  FA_HALF_MATH1(T, tanh) FA_HALF_MATH1(T, tanh_approx) FA_HALF_MATH1(T, floor) FA_HALF_MATH1(T, ceil) FA_HALF_MATH1(T, sigmoid)  \
  FA_HALF_MATH1(T, erf) FA_HALF_MATH2(T, pow) FA_HALF_MATH2(T, mod)                                \
  FA_HALF_MATH2(T, maxnum) FA_HALF_MATH2(T, minnum)                                                \
  FA_DEV T fma(T a, T b, T c) { return Convert<T>::from(__fmaf_rn(to_f32(a), to_f32(b), to_f32(c))); } \
  FA_DEV T abs(T x) {                                                                              \
    T r;                                                                                           \
    r.bits = (unsigned short)(x.bits & 0x7fffu);                                                   \
    return r;                                                                                      \
  }                                                                                                \
  FA_DEV T maximum(T a, T b) { return Convert<T>::from(maximum(to_f32(a), to_f32(b))); }          \
  FA_DEV T minimum(T a, T b) { return Convert<T>::from(minimum(to_f32(a), to_f32(b))); }
FA_HALF_MATH(half)
FA_HALF_MATH(bf16)
#undef FA_HALF_MATH
#undef FA_HALF_MATH1
#undef FA_HALF_MATH2

/* Integers. */
template <class I> FA_DEV I abs(I x) { return x < 0 ? (I)-x : x; }
template <class I> FA_DEV I maximum(I a, I b) { return a > b ? a : b; }
template <class I> FA_DEV I minimum(I a, I b) { return a < b ? a : b; }
template <class I> FA_DEV I maxnum(I a, I b) { return a > b ? a : b; }
template <class I> FA_DEV I minnum(I a, I b) { return a < b ? a : b; }
template <class I> FA_DEV I fma(I a, I b, I c) { return (I)((unsigned long long)a * (unsigned long long)b + (unsigned long long)c); }
/* Integer division and remainder are total, as in the interpreter: lanes
   that a where() or a mask discards may divide by zero, and C++ leaves that
   (and MIN / -1) undefined.  a / 0 is 0 and a % 0 is a, so that
   a == (a / b) * b + a % b still holds; MIN / -1 wraps to MIN, remainder 0.
   With a constant divisor the checks fold away. */
template <class I> FA_DEV I div(I a, I b) {
  if (b == 0)
    return (I)0;
  if ((I)-1 < (I)0 && b == (I)-1)
    return (I)(0ull - (unsigned long long)a);
  return (I)(a / b);
}
template <class I> FA_DEV I mod(I a, I b) {
  if (b == 0)
    return a;
  if ((I)-1 < (I)0 && b == (I)-1)
    return (I)0;
  return (I)(a % b);
}
template <class I> FA_DEV I pow(I base, I e) {
  I r = 1;
  if (e < 0)
    return (I)(base == 1 ? 1 : base == -1 ? ((e & 1) ? -1 : 1) : 0);
  while (e > 0) {
    if (e & 1)
      r = (I)(r * base);
    base = (I)(base * base);
    e = (I)(e >> 1);
  }
  return r;
}
/* Shifts whose count may reach the width: defined, unlike C's. */
template <class I> FA_DEV I shl(I a, I b) {
  return (b < 0 || b >= (I)(8 * sizeof(I))) ? (I)0 : (I)((unsigned long long)a << b);
}
template <class I> FA_DEV I shr(I a, I b) {
  if (b < 0 || b >= (I)(8 * sizeof(I)))
    return (I)(((I)-1 < 0 && a < 0) ? -1 : 0);
  return (I)(a >> b);
}
FA_DEV bool shl(bool a, bool b) { return b ? false : a; }
FA_DEV bool shr(bool a, bool b) { return b ? false : a; }

/* ---- random numbers (tl.rand / tl.randn) ------------------------------------------
 * Philox 4x32 (Salmon et al., SC'11) on the counter (offset, 0, 0, 0) and the
 * key (seed & 0xffffffff, seed >> 32), ROUNDS rounds. */
FA_DEV unsigned umulhi(unsigned a, unsigned b) {
  unsigned r;
  asm("mul.hi.u32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
  return r;
}
template <int ROUNDS> FA_DEV void philox4x32(unsigned (&c)[4], unsigned k0, unsigned k1) {
#pragma unroll
  for (int r = 0; r < ROUNDS; ++r) {
    const unsigned hi0 = umulhi(0xD2511F53u, c[0]), lo0 = 0xD2511F53u * c[0];
    const unsigned hi1 = umulhi(0xCD9E8D57u, c[2]), lo1 = 0xCD9E8D57u * c[2];
    const unsigned n0 = hi1 ^ c[1] ^ k0, n2 = hi0 ^ c[3] ^ k1;
    c[0] = n0;
    c[1] = lo1;
    c[2] = n2;
    c[3] = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
}
/* A uint32 as a float in [0, 1): read as an int32, folded onto [0, 2^31)
 * (x < 0: -x - 1), converted to f32 and scaled by the f32 below 2^-31. */
FA_DEV float philox_uniform(unsigned u) {
  const unsigned m = (u >> 31) ? ~u : u;
  return __int2float_rn((int)m) * 0x1.fffffep-32f;
}
template <int ROUNDS> FA_DEV float rand_uniform(long long seed, int offset) {
  unsigned c[4] = {(unsigned)offset, 0u, 0u, 0u};
  philox4x32<ROUNDS>(c, (unsigned)seed, (unsigned)((unsigned long long)seed >> 32));
  return philox_uniform(c[0]);
}
/* Box-Muller on the first two outputs, as Triton's randn. */
template <int ROUNDS> FA_DEV float rand_normal(long long seed, int offset) {
  unsigned c[4] = {(unsigned)offset, 0u, 0u, 0u};
  philox4x32<ROUNDS>(c, (unsigned)seed, (unsigned)((unsigned long long)seed >> 32));
  float u1 = philox_uniform(c[0]);
  const float u2 = philox_uniform(c[1]);
  u1 = u1 < 1.0e-7f ? 1.0e-7f : u1;
  const float th = __fmul_rn(6.283185307179586f, u2);
  const float r = ::sqrtf(__fmul_rn(-2.0f, ::logf(u1)));
  return __fmul_rn(r, ::cosf(th));
}

} // namespace fa

#endif
