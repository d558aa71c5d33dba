/* fa_tile.cuh - distributed layouts, reductions, layout conversions and
 * block memory access of fadsl's device library.
 *
 * A block value of an emitted kernel lives in registers: each thread holds a
 * small array, and a layout says which element of the block each register
 * of each thread holds.  All layouts are "linear" over power-of-two shapes:
 * number the elements of the block by their row-major flat index; then each
 * bit of the register index, of the lane id and of the warp id selects one
 * bit of that flat index (or none, for hardware that holds copies).  The
 * flat index of register e in thread (lane, warp) is the OR of the selected
 * bits.  The compiler's layout pass (compiler/layout.c) picks these bit
 * assignments; this header only evaluates them, at compile time for the
 * register part (loops over registers are fully unrolled) and once per
 * kernel for the thread part.
 */
#ifndef FA_TILE_CUH
#define FA_TILE_CUH

#include "fa_scalar.cuh"

#define FA_CX __host__ __device__ constexpr

namespace fa {

/* The barrier that library routines (conversions and reductions through
 * shared memory, FMA products, the emitted code's tile writes) use among
 * the threads that compute.  Where a kernel has a producer warpgroup that
 * never reaches these, it defines FA_COMPUTE_THREADS (the compute threads,
 * warps 0 .. n-1) before including the library, and they synchronise on
 * named barrier 1 instead of __syncthreads' barrier 0. */
FA_DEV void sync_compute() {
#ifdef FA_COMPUTE_THREADS
  asm volatile("bar.sync 1, %0;" ::"n"(FA_COMPUTE_THREADS) : "memory");
#else
  __syncthreads();
#endif
}

/* x, opaque to the compiler: what is computed from it is computed where it
 * is used rather than once, early, and held in registers.  (A staging
 * tile's swizzled addresses, computed from the thread's offset before a
 * loop and held across it, cost a kernel at the edge of its registers
 * spills.) */
FA_DEV int opaque(int x) {
  asm volatile("" : "+r"(x));
  return x;
}

/* ---- bit lists ---------------------------------------------------------------------- */

/* Bits<p0, p1, ...>: bit i of an index selects flat-index bit p_i (none if p_i < 0). */
template <int... P> struct Bits {
  enum : int { n = sizeof...(P) };
  /* Maps an index to the flat-index bits it selects. */
  FA_CX static int gather(int x) {
    int r = 0, i = 0;
    ((r |= (P >= 0 ? ((x >> i) & 1) << (P >= 0 ? P : 0) : 0), ++i), ...);
    return r;
  }
  /* The index bits that select nothing: hardware holding copies. */
  FA_CX static int dup_mask() {
    int r = 0, i = 0;
    ((r |= (P < 0 ? 1 << i : 0), ++i), ...);
    return r;
  }
};

FA_CX int log2i(int x) { return x <= 1 ? 0 : 1 + log2i(x >> 1); }
FA_CX int popcount(int x) { return x == 0 ? 0 : (x & 1) + popcount((int)((unsigned)x >> 1)); }

/* Scatters the low bits of k into the set bits of mask (like pdep). */
FA_CX int deposit(int k, int mask) {
  int r = 0;
  for (int b = 0; b < 31; ++b)
    if ((mask >> b) & 1) {
      r |= (k & 1) << b;
      k >>= 1;
    }
  return r;
}

/* ---- shapes and layouts ------------------------------------------------------------------ */

template <int... D> struct Shape {
  enum : int { rank = sizeof...(D), numel = (1 * ... * D) };
  FA_CX static int dim(int d) {
    constexpr int a[] = {D..., 1};
    return a[d];
  }
  /* Position of dimension d's lowest bit in the row-major flat index. */
  FA_CX static int shift(int d) {
    constexpr int a[] = {D..., 1};
    int s = 0;
    for (int i = d + 1; i < rank; ++i)
      s += log2i(a[i]);
    return s;
  }
};

/* S: the block's shape; Regs, Lanes, Warps: what each bit of the register
 * index, lane id and warp id selects. */
template <class S, class Regs, class Lanes, class Warps> struct Layout {
  using shape = S;
  using lanes = Lanes;
  using warps = Warps;
  /* each flat-index bit is selected by at most one of register, lane and
     warp: coord() and the tile addresses add the parts instead of or-ing them */
  static_assert((Regs::gather(-1) & (Lanes::gather(-1) | Warps::gather(-1))) == 0 &&
                    (Lanes::gather(-1) & Warps::gather(-1)) == 0,
                "a layout's register, lane and warp bits select disjoint flat-index bits");
  /* (enums rather than static members: they need no storage in the PTX) */
  enum : int { nregs = 1 << Regs::n, lane_dups = Lanes::dup_mask(), warp_dups = Warps::dup_mask() };
  FA_CX static int reg_offset(int e) { return Regs::gather(e); }
  /* The flat-index bits that the calling thread's position selects. */
  FA_DEV static int thread_offset(int lane, int warp) { return Lanes::gather(lane) | Warps::gather(warp); }
  /* Among the threads holding copies of the same elements, exactly one owns them. */
  FA_DEV static bool owner(int lane, int warp) { return ((lane & lane_dups) | (warp & warp_dups)) == 0; }
  /* Coordinate along dimension d of register e, given thread_offset().  The
   * thread's bits and the register's are disjoint, so the coordinate is the
   * sum of the thread's part and a constant for each register: written as
   * that sum, the compiler folds the constant into address offsets and
   * comparisons instead of recomputing the coordinate for every element. */
  FA_CX static int coord(int toff, int e, int d) {
    return ((toff >> S::shift(d)) & (S::dim(d) - 1)) + ((reg_offset(e) >> S::shift(d)) & (S::dim(d) - 1));
  }
};

/* ---- register moves ------------------------------------------------------------------------ */

/* dst[e] = src[Map::gather(e)]: layout changes that stay within each thread
 * (register permutations, broadcasts of replicated dimensions). */
template <class Map, class T, int ND, int NS> FA_DEV void regmap(T (&dst)[ND], const T (&src)[NS]) {
#pragma unroll
  for (int e = 0; e < ND; ++e)
    dst[e] = src[Map::gather(e)];
}

/* Whether every element is 1 (a NaN is not): the check before a rescale
 * that multiplying by 1 would leave unchanged. */
template <class T, int N> FA_DEV bool all_ones(const T (&x)[N]) {
  bool ones = true;
#pragma unroll
  for (int e = 0; e < N; ++e)
    ones = ones && x[e] == T(1);
  return ones;
}

/* Any layout change, through shared memory: every thread writes its elements
 * at their flat index (copies write equal values), then reads the ones its
 * new layout gives it.  `smem` holds at least Shape::numel elements and is
 * free on entry; it is free again on exit. */
template <class LS, class LD, class T>
FA_DEV void convert(T (&dst)[LD::nregs], const T (&src)[LS::nregs], int lane, int warp, void *smem) {
  T *buf = static_cast<T *>(smem);
  const int ts = LS::thread_offset(lane, warp);
#pragma unroll
  for (int e = 0; e < LS::nregs; ++e)
    buf[ts | LS::reg_offset(e)] = src[e];
  sync_compute();
  const int td = LD::thread_offset(lane, warp);
#pragma unroll
  for (int e = 0; e < LD::nregs; ++e)
    dst[e] = buf[td | LD::reg_offset(e)];
  sync_compute();
}

/* ---- warp shuffles ------------------------------------------------------------------------------ */

FA_DEV unsigned shfl_xor_u32(unsigned v, int mask) {
  unsigned r;
  asm volatile("shfl.sync.bfly.b32 %0, %1, %2, 0x1f, 0xffffffff;" : "=r"(r) : "r"(v), "r"(mask));
  return r;
}
FA_DEV float shfl_xor(float v, int m) { return bits_to_f32(shfl_xor_u32(f32_to_bits(v), m)); }
FA_DEV int shfl_xor(int v, int m) { return (int)shfl_xor_u32((unsigned)v, m); }
FA_DEV unsigned shfl_xor(unsigned v, int m) { return shfl_xor_u32(v, m); }
FA_DEV long long shfl_xor(long long v, int m) {
  unsigned long long u = (unsigned long long)v;
  unsigned lo = shfl_xor_u32((unsigned)u, m), hi = shfl_xor_u32((unsigned)(u >> 32), m);
  return (long long)(((unsigned long long)hi << 32) | lo);
}
FA_DEV half shfl_xor(half v, int m) { return half{(unsigned short)shfl_xor_u32(v.bits, m)}; }
FA_DEV bf16 shfl_xor(bf16 v, int m) { return bf16{(unsigned short)shfl_xor_u32(v.bits, m)}; }
FA_DEV bool shfl_xor(bool v, int m) { return shfl_xor_u32(v ? 1u : 0u, m) != 0; }
FA_DEV signed char shfl_xor(signed char v, int m) { return (signed char)shfl_xor_u32((unsigned)(int)v, m); }
FA_DEV short shfl_xor(short v, int m) { return (short)shfl_xor_u32((unsigned)(int)v, m); }
FA_DEV double shfl_xor(double v, int m) {
  long long b;
  asm("mov.b64 %0, %1;" : "=l"(b) : "d"(v));
  b = shfl_xor(b, m);
  double r;
  asm("mov.b64 %0, %1;" : "=d"(r) : "l"(b));
  return r;
}

/* ---- reductions ------------------------------------------------------------------------------------ */

struct OpSum {
  template <class T> FA_DEV static T apply(T a, T b) { return a + b; }
};
struct OpMax {
  template <class T> FA_DEV static T apply(T a, T b) { return maximum(a, b); }
};
struct OpMin {
  template <class T> FA_DEV static T apply(T a, T b) { return minimum(a, b); }
};

/* Reduces the elements that differ only in the reduced index bits:
 *   - within a thread: source register KeepMap::gather(r) | RedMap::gather(k)
 *     for k = 0, 1, ... folds into destination register r;
 *   - across lanes: a butterfly over LANE_MASK (every lane ends with the same
 *     bits, since the operations are commutative);
 *   - across warps: through shared memory, the warps of WARP_MASK combined in
 *     warp order, so that every copy is bitwise equal.  `smem` holds
 *     (number of warps) * 32 * ND elements and is free on entry and exit. */
template <class Op, class KeepMap, class RedMap, int LANE_MASK, int WARP_MASK, class T, int ND, int NS>
FA_DEV void reduce(T (&dst)[ND], const T (&src)[NS], int lane, int warp, void *smem) {
  /* within a thread as a pairwise tree (element k with k + s, s = 1, 2, 4,
     ...): log2 of the count dependent steps rather than the count, which
     matters where the reduction stands between a product and the work that
     needs its result (a softmax's row maximum) */
  constexpr int NK = 1 << RedMap::n;
#pragma unroll
  for (int r = 0; r < ND; ++r) {
    T part[NK];
#pragma unroll
    for (int k = 0; k < NK; ++k)
      part[k] = src[KeepMap::gather(r) | RedMap::gather(k)];
#pragma unroll
    for (int s = 1; s < NK; s *= 2)
#pragma unroll
      for (int k = 0; k + s < NK; k += 2 * s)
        part[k] = Op::apply(part[k], part[k + s]);
    dst[r] = part[0];
  }
#pragma unroll
  for (int b = 0; b < 5; ++b)
    if ((LANE_MASK >> b) & 1) {
#pragma unroll
      for (int r = 0; r < ND; ++r)
        dst[r] = Op::apply(dst[r], shfl_xor(dst[r], 1 << b));
    }
  if (WARP_MASK != 0) {
    T *buf = static_cast<T *>(smem);
#pragma unroll
    for (int r = 0; r < ND; ++r)
      buf[(warp * 32 + lane) * ND + r] = dst[r];
    sync_compute();
    const int base = warp & ~WARP_MASK;
#pragma unroll
    for (int r = 0; r < ND; ++r) {
      T acc = buf[(base * 32 + lane) * ND + r];
#pragma unroll
      for (int k = 1; k < (1 << popcount(WARP_MASK)); ++k)
        acc = Op::apply(acc, buf[((base | deposit(k, WARP_MASK)) * 32 + lane) * ND + r]);
      dst[r] = acc;
    }
    sync_compute();
  }
}

/* ---- scans --------------------------------------------------------------------------------------------- *
 * An inclusive scan along one axis, in whatever layout the block has.  The
 * axis's flat-index bits, from the lowest, are each selected by one bit of the
 * register index, lane or warp; STEPS lists them in that order, coded as r
 * (register bit r), 32 + l (lane bit l) or 64 + w (warp bit w).  The scan runs
 * on the hypercube of those bits, lowest first: every element keeps the total
 * of its sub-cube and its prefix within it; joining two sub-cubes, the later
 * one's prefixes take the earlier one's total in front.  T is a struct with
 * `static T combine(const T &earlier, const T &later)` and `T shfl_xor(int)
 * const`; REVERSE scans from the last element (the higher index is earlier).
 * The warp steps exchange totals through `smem` (warps * 32 * N elements of
 * T), free on entry and exit. */
template <bool REVERSE, int S, class T, int N>
FA_DEV void scan_step(T (&pre)[N], T (&tot)[N], int lane, int warp, void *smem) {
  if constexpr (S < 32) {
    constexpr int m = 1 << S;
#pragma unroll
    for (int e = 0; e < N; ++e) {
      if (e & m)
        continue;
      const int first = REVERSE ? (e | m) : e, later = REVERSE ? e : (e | m);
      const T t = T::combine(tot[first], tot[later]);
      pre[later] = T::combine(tot[first], pre[later]);
      tot[e] = t;
      tot[e | m] = t;
    }
  } else {
    T other[N];
    if constexpr (S < 64) {
#pragma unroll
      for (int e = 0; e < N; ++e)
        other[e] = tot[e].shfl_xor(1 << (S - 32));
    } else {
      T *buf = static_cast<T *>(smem);
#pragma unroll
      for (int e = 0; e < N; ++e)
        buf[(warp * 32 + lane) * N + e] = tot[e];
      __syncthreads();
      const int partner = warp ^ (1 << (S - 64));
#pragma unroll
      for (int e = 0; e < N; ++e)
        other[e] = buf[(partner * 32 + lane) * N + e];
      __syncthreads();
    }
    const int bit = S < 64 ? (lane >> (S - 32)) & 1 : (warp >> (S - 64)) & 1;
    const bool later = REVERSE ? bit == 0 : bit == 1;
#pragma unroll
    for (int e = 0; e < N; ++e) {
      if (later) {
        pre[e] = T::combine(other[e], pre[e]);
        tot[e] = T::combine(other[e], tot[e]);
      } else {
        tot[e] = T::combine(tot[e], other[e]);
      }
    }
  }
}

template <bool REVERSE, class T, int N> FA_DEV void scan_steps(T (&)[N], T (&)[N], int, int, void *) {}
template <bool REVERSE, int S, int... REST, class T, int N>
FA_DEV void scan_steps(T (&pre)[N], T (&tot)[N], int lane, int warp, void *smem) {
  scan_step<REVERSE, S>(pre, tot, lane, warp, smem);
  scan_steps<REVERSE, REST...>(pre, tot, lane, warp, smem);
}

template <bool REVERSE, int... STEPS, class T, int N> FA_DEV void scan(T (&v)[N], int lane, int warp, void *smem) {
  T tot[N];
#pragma unroll
  for (int e = 0; e < N; ++e)
    tot[e] = v[e];
  scan_steps<REVERSE, STEPS...>(v, tot, lane, warp, smem);
}

/* Every element becomes the combination (in index order) of all the elements
 * along the axis: a reduction's result, in each of its copies. */
template <int... STEPS, class T, int N> FA_DEV void combine_all(T (&v)[N], int lane, int warp, void *smem) {
  T pre[N];
#pragma unroll
  for (int e = 0; e < N; ++e)
    pre[e] = v[e];
  scan_steps<false, STEPS...>(pre, v, lane, warp, smem);
}

/* ---- bit-level packing of elements ------------------------------------------------------------------- */

template <class T> struct Raw;
template <> struct Raw<half> {
  FA_DEV static unsigned long long get(half x) { return x.bits; }
  FA_DEV static half put(unsigned long long u) { return half{(unsigned short)u}; }
};
template <> struct Raw<bf16> {
  FA_DEV static unsigned long long get(bf16 x) { return x.bits; }
  FA_DEV static bf16 put(unsigned long long u) { return bf16{(unsigned short)u}; }
};
template <> struct Raw<float> {
  FA_DEV static unsigned long long get(float x) { return f32_to_bits(x); }
  FA_DEV static float put(unsigned long long u) { return bits_to_f32((unsigned)u); }
};
template <> struct Raw<double> {
  FA_DEV static unsigned long long get(double x) {
    unsigned long long u;
    asm("mov.b64 %0, %1;" : "=l"(u) : "d"(x));
    return u;
  }
  FA_DEV static double put(unsigned long long u) {
    double d;
    asm("mov.b64 %0, %1;" : "=d"(d) : "l"(u));
    return d;
  }
};
template <> struct Raw<bool> {
  FA_DEV static unsigned long long get(bool x) { return x ? 1u : 0u; }
  FA_DEV static bool put(unsigned long long u) { return (u & 0xff) != 0; }
};
#define FA_RAW_INT(T, MASK)                                                                        \
  template <> struct Raw<T> {                                                                      \
    FA_DEV static unsigned long long get(T x) { return (unsigned long long)x & MASK; }             \
    FA_DEV static T put(unsigned long long u) { return (T)u; }                                     \
  };
FA_RAW_INT(signed char, 0xffull)
FA_RAW_INT(short, 0xffffull)
FA_RAW_INT(int, 0xffffffffull)
FA_RAW_INT(unsigned, 0xffffffffull)
FA_RAW_INT(long long, ~0ull)
#undef FA_RAW_INT

/* ---- global memory ------------------------------------------------------------------------------------- */

/* A generic address of global memory as a global-window address. */
FA_DEV unsigned long long global_addr(const void *p) {
  unsigned long long g;
  asm("cvta.to.global.u64 %0, %1;" : "=l"(g) : "l"(p));
  return g;
}

/* Vector accesses of W 32-bit words (4, 8 or 16 bytes), at addresses aligned
 * to their size, in the global state space: block pointers address only
 * global memory (kernel arguments), and generic accesses (SASS LD.E/ST.E)
 * take the path that tells shared from global addresses. */
template <int W> FA_DEV void ld_words(const void *p, unsigned (&w)[W]) {
  const unsigned long long g = global_addr(p);
  if constexpr (W == 1) {
    asm volatile("ld.global.u32 %0, [%1];" : "=r"(w[0]) : "l"(g));
  } else if constexpr (W == 2) {
    asm volatile("ld.global.v2.u32 {%0, %1}, [%2];" : "=r"(w[0]), "=r"(w[1]) : "l"(g));
  } else {
    asm volatile("ld.global.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(w[0]), "=r"(w[1]), "=r"(w[2]), "=r"(w[3])
                 : "l"(g));
  }
}
template <int W> FA_DEV void st_words(void *p, const unsigned (&w)[W]) {
  const unsigned long long g = global_addr(p);
  if constexpr (W == 1) {
    asm volatile("st.global.u32 [%0], %1;" ::"l"(g), "r"(w[0]) : "memory");
  } else if constexpr (W == 2) {
    asm volatile("st.global.v2.u32 [%0], {%1, %2};" ::"l"(g), "r"(w[0]), "r"(w[1]) : "memory");
  } else {
    asm volatile("st.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(g), "r"(w[0]), "r"(w[1]), "r"(w[2]), "r"(w[3])
                 : "memory");
  }
}

/* Element i of a vector of V elements of T held in 32-bit words (little endian). */
template <class T, int W> FA_DEV T unpack(const unsigned (&w)[W], int i) {
  constexpr int size = (int)sizeof(T);
  if constexpr (size >= 4) {
    unsigned long long u = w[i * size / 4];
    if constexpr (size == 8)
      u |= (unsigned long long)w[i * 2 + 1] << 32;
    return Raw<T>::put(u);
  } else {
    return Raw<T>::put(w[i * size / 4] >> (8 * ((i * size) % 4)));
  }
}
template <class T, int W> FA_DEV void pack(unsigned (&w)[W], int i, T x) {
  constexpr int size = (int)sizeof(T);
  const unsigned long long u = Raw<T>::get(x);
  if constexpr (size >= 4) {
    w[i * size / 4] = (unsigned)u;
    if constexpr (size == 8)
      w[i * 2 + 1] = (unsigned)(u >> 32);
  } else {
    const int sh = 8 * ((i * size) % 4);
    const unsigned m = ((1u << (8 * size)) - 1u) << sh;
    w[i * size / 4] = (w[i * size / 4] & ~m) | (((unsigned)u << sh) & m);
  }
}

/* A block pointer (make_block_ptr): a 2-D..4-D window of a strided tensor. */
template <class T, int R> struct BlockPtr {
  T *base;
  long long shape[R];
  long long stride[R];
  int offset[R];
};

template <class T, int R> FA_DEV BlockPtr<T, R> advance(BlockPtr<T, R> p, const int (&delta)[R]) {
#pragma unroll
  for (int d = 0; d < R; ++d)
    p.offset[d] += delta[d];
  return p;
}

/* Flat element offset and bounds check of the element whose block coordinates
 * are those of register e. */
template <class L, unsigned CHECK, class T, int R>
FA_DEV long long block_address(const BlockPtr<T, R> &p, int toff, int e, bool &in) {
  long long off = 0;
  in = true;
#pragma unroll
  for (int d = 0; d < R; ++d) {
    /* the block's origin and the element's place in the block apart: the
       origin is the same for every element and computed once, the place a
       per-thread part plus a constant the address can carry */
    const int k = L::coord(toff, e, d);
    off += (long long)p.offset[d] * p.stride[d] + (long long)k * p.stride[d];
    if ((CHECK >> d) & 1) {
      const long long c = (long long)p.offset[d] + k;
      in = in && c >= 0 && c < p.shape[d];
    }
  }
  return off;
}

/* load(block_ptr): V elements per access along dimension CONTIG (stride 1);
 * the first log2(V) register bits of L are that dimension's lowest bits, and
 * the compiler proved every vector aligned and wholly inside or outside the
 * checked bounds.  Out-of-bounds elements get `pad`. */
template <class L, int V, unsigned CHECK, class T, int R>
FA_DEV void load_block(T (&dst)[L::nregs], const BlockPtr<T, R> &p, int toff, T pad) {
#pragma unroll
  for (int g = 0; g < L::nregs / V; ++g) {
    bool in;
    const long long off = block_address<L, CHECK>(p, toff, g * V, in);
    if constexpr (V == 1) {
      dst[g] = in ? p.base[off] : pad;
    } else {
      constexpr int W = V * (int)sizeof(T) / 4;
      unsigned w[W];
#pragma unroll
      for (int i = 0; i < W; ++i)
        w[i] = 0;
      if (in)
        ld_words<W>(p.base + off, w);
      /* zero padding is already in w: a selection would read the loaded
         words where it stands, waiting for the load there (ptxas puts it
         right after the load) */
      const bool pad_is_zero = Raw<T>::get(pad) == 0;
#pragma unroll
      for (int i = 0; i < V; ++i)
        dst[g * V + i] = (in || pad_is_zero) ? unpack<T, W>(w, i) : pad;
    }
  }
}

/* store(block_ptr, value): the same access pattern; out-of-bounds elements are
 * dropped, and only one of the threads holding copies of an element writes it. */
template <class L, int V, unsigned CHECK, class T, int R>
FA_DEV void store_block(const BlockPtr<T, R> &p, const T (&src)[L::nregs], int toff, bool owner) {
  if (!owner)
    return;
#pragma unroll
  for (int g = 0; g < L::nregs / V; ++g) {
    bool in;
    const long long off = block_address<L, CHECK>(p, toff, g * V, in);
    if (!in)
      continue;
    if constexpr (V == 1) {
      p.base[off] = src[g];
    } else {
      constexpr int W = V * (int)sizeof(T) / 4;
      unsigned w[W];
#pragma unroll
      for (int i = 0; i < W; ++i)
        w[i] = 0;
#pragma unroll
      for (int i = 0; i < V; ++i)
        pack<T, W>(w, i, src[g * V + i]);
      st_words<W>(p.base + off, w);
    }
  }
}

/* ---- atomics ------------------------------------------------------------------------------------------------ */

FA_DEV float atomic_add(float *p, float v) {
  float old;
  asm volatile("atom.add.f32 %0, [%1], %2;" : "=f"(old) : "l"(p), "f"(v) : "memory");
  return old;
}
FA_DEV double atomic_add(double *p, double v) {
  double old;
  asm volatile("atom.add.f64 %0, [%1], %2;" : "=d"(old) : "l"(p), "d"(v) : "memory");
  return old;
}
FA_DEV int atomic_add(int *p, int v) {
  int old;
  asm volatile("atom.add.u32 %0, [%1], %2;" : "=r"(old) : "l"(p), "r"(v) : "memory");
  return old;
}
FA_DEV unsigned atomic_add(unsigned *p, unsigned v) {
  unsigned old;
  asm volatile("atom.add.u32 %0, [%1], %2;" : "=r"(old) : "l"(p), "r"(v) : "memory");
  return old;
}
FA_DEV long long atomic_add(long long *p, long long v) {
  long long old;
  asm volatile("atom.add.u64 %0, [%1], %2;" : "=l"(old) : "l"(p), "l"(v) : "memory");
  return old;
}
FA_DEV half atomic_add(half *p, half v) {
  half old;
  asm volatile("atom.add.noftz.f16 %0, [%1], %2;" : "=h"(old.bits) : "l"(p), "h"(v.bits) : "memory");
  return old;
}
/* bf16: a compare-and-swap loop on the enclosing aligned 32-bit word (atom.add.bf16
   needs sm_90); the sum is rounded to bf16 like the interpreter's. */
FA_DEV bf16 atomic_add(bf16 *p, bf16 v) {
  const unsigned long long addr = (unsigned long long)p;
  unsigned *word = (unsigned *)(addr & ~3ull);
  const int sh = (addr & 2) ? 16 : 0;
  unsigned cur = *(volatile unsigned *)word, prev;
  do {
    prev = cur;
    const bf16 old{(unsigned short)(prev >> sh)};
    const bf16 sum = f32_to_bf16(to_f32(old) + to_f32(v));
    const unsigned next = (prev & ~(0xffffu << sh)) | ((unsigned)sum.bits << sh);
    asm volatile("atom.cas.b32 %0, [%1], %2, %3;" : "=r"(cur) : "l"(word), "r"(prev), "r"(next) : "memory");
  } while (cur != prev);
  return bf16{(unsigned short)(prev >> sh)};
}

/* ---- reduce-stores: atomic_add through a block pointer ------------------------------------------------------
 * red.global.add adds without handing the previous value back, so the memory
 * system need not return anything.  fa::red_block walks a block as
 * store_block does (the same addresses, bounds and owners) and issues, per
 * group of V contiguous elements, the instruction the plan chose: one
 * red.global.add per element, a v2/v4.f32 vector (sm_90), or for bf16 below
 * sm_90, which has no red.add.bf16, the compare-and-swap loop of
 * atomic_add. */

enum RedInstr { RED_SCALAR, RED_VECTOR, RED_CAS };

FA_DEV void red_add(float *p, float v) { asm volatile("red.global.add.f32 [%0], %1;" ::"l"(p), "f"(v) : "memory"); }
FA_DEV void red_add(double *p, double v) { asm volatile("red.global.add.f64 [%0], %1;" ::"l"(p), "d"(v) : "memory"); }
FA_DEV void red_add(int *p, int v) { asm volatile("red.global.add.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory"); }
FA_DEV void red_add(unsigned *p, unsigned v) {
  asm volatile("red.global.add.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
FA_DEV void red_add(long long *p, long long v) {
  asm volatile("red.global.add.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
FA_DEV void red_add(half *p, half v) {
  asm volatile("red.global.add.noftz.f16 [%0], %1;" ::"l"(p), "h"(v.bits) : "memory");
}
FA_DEV void red_add(bf16 *p, bf16 v) {
#if __CUDA_ARCH__ >= 900
  asm volatile("red.global.add.noftz.bf16 [%0], %1;" ::"l"(p), "h"(v.bits) : "memory");
#else
  (void)atomic_add(p, v);
#endif
}

/* V (2 or 4) contiguous f32, 8- or 16-byte aligned: one vector reduction on
 * sm_90 and later (the plan asks for it only there). */
template <int V> FA_DEV void red_add_vector(float *p, const float *v) {
#if __CUDA_ARCH__ >= 900
  if constexpr (V == 4)
    asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(p), "f"(v[0]), "f"(v[1]), "f"(v[2]),
                 "f"(v[3])
                 : "memory");
  else
    asm volatile("red.global.add.v2.f32 [%0], {%1, %2};" ::"l"(p), "f"(v[0]), "f"(v[1]) : "memory");
#else
#pragma unroll
  for (int i = 0; i < V; ++i)
    red_add(p + i, v[i]);
#endif
}

template <class L, int V, unsigned CHECK, RedInstr I, class T, int R>
FA_DEV void red_block(const BlockPtr<T, R> &p, const T (&src)[L::nregs], int toff, bool owner) {
  if (!owner)
    return;
#pragma unroll
  for (int g = 0; g < L::nregs / V; ++g) {
    bool in;
    const long long off = block_address<L, CHECK>(p, toff, g * V, in);
    if (!in)
      continue;
    if constexpr (I == RED_VECTOR)
      red_add_vector<V>(p.base + off, &src[g * V]);
    else if constexpr (I == RED_CAS)
      (void)atomic_add(p.base + off, src[g]);
    else
      red_add(p.base + off, src[g]);
  }
}

/* ---- persistent kernels: which program a thread block runs next ----------------------------------------------- */

/* A persistent kernel's thread block b runs the programs t = b, b + G,
 * b + 2G, ... (G thread blocks; longest first: snake_tile's) of an order over the grid (gx, gy, gz) of
 * programs; tile_coords gives program t's ids.  AXIS < 0: the hardware's
 * order, x fastest.  Else longest first along AXIS (DESCENDING: from the
 * largest id down), in groups of GROUP programs along the other two axes
 * (flattened, the lower one fastest): the group's programs at the first id
 * along AXIS, then at the next, ...; then the next group.  Every t below
 * gx * gy * gz maps to one program and back. */
struct TileId {
  unsigned v[3];
};

/* The position in that order of thread block b's program in round r (of
 * G programs each), in alternating directions: b in even rounds, G - 1 - b
 * in odd ones, so that over two rounds of programs whose work falls
 * steadily every block gets about the same. */
FA_DEV unsigned snake_tile(unsigned r, unsigned b, unsigned G) { return r * G + ((r & 1u) ? G - 1u - b : b); }

/* Dynamic persistent scheduling, where programs differ in work: round 0
 * of thread block b runs program b of the order, and every later round the
 * next one nobody has taken, the G programs of round 0 plus a ticket of
 * `counter` (global memory, zeroed before the launch).  Blocks that finish
 * early take more programs, as the hardware does with one block per
 * program, so no static assignment's imbalance remains.  Here every thread
 * computes: thread 0 takes the ticket for round r (>= 1) into slot r % 2 of
 * `slots` (shared memory) and the others read it after a barrier; a slot
 * is written again two rounds later, after the next round's barrier, which
 * every thread reaches only after reading it. */
FA_DEV unsigned next_tile_shared(unsigned *counter, unsigned G, unsigned *slots, unsigned r) {
  if (threadIdx.x == 0)
    slots[r & 1u] = G + atomicAdd(counter, 1u);
  sync_compute();
  return slots[r & 1u];
}

template <int AXIS, bool DESCENDING, int GROUP>
FA_DEV TileId tile_coords(unsigned t, unsigned gx, unsigned gy, unsigned gz) {
  TileId r;
  if constexpr (AXIS < 0) {
    r.v[0] = t % gx;
    t /= gx;
    r.v[1] = t % gy;
    r.v[2] = t / gy;
  } else {
    static_assert(AXIS < 3 && GROUP >= 1, "tile_coords: AXIS is 0, 1 or 2");
    const unsigned g[3] = {gx, gy, gz};
    constexpr int A1 = AXIS == 0 ? 1 : 0, A2 = AXIS == 2 ? 1 : 2; /* the other axes, lower first */
    const unsigned along = g[AXIS], others = g[A1] * g[A2];
    const unsigned group = t / (along * (unsigned)GROUP);  /* which group of other programs */
    const unsigned first = group * (unsigned)GROUP;
    const unsigned width = others - first < (unsigned)GROUP ? others - first : (unsigned)GROUP;
    const unsigned in = t - group * along * (unsigned)GROUP; /* < along * width */
    const unsigned a = in / width, o = first + in % width;
    r.v[AXIS] = DESCENDING ? along - 1 - a : a;
    r.v[A1] = o % g[A1];
    r.v[A2] = o / g[A1];
  }
  return r;
}

/* ---- device-side assertions ----------------------------------------------------------------------------------- */

/* __assertfail is declared by NVRTC itself: it reports the failure (message,
   file, line, kernel) and stops the kernel with an error. */
FA_DEV void assert_fail(const char *message, const char *file, unsigned line, const char *kernel) {
  __assertfail(message, file, line, kernel, 1);
}

} // namespace fa

#endif
