/* fa_mma.cuh - tensor-core matrix products (mma.sync m16n8k16), ldmatrix and
 * cp.async for fadsl's device library.
 *
 * Register layouts of the operands and the accumulator (the compiler's
 * layout pass builds the same ones; see compiler/layout.c):
 *   accumulator [M, N] f32, per warp MT x NT tiles of 16 x 8, tile (mt, nt)
 *     in registers ((mt * NT + nt) * 4 + i):  i = 0, 1: row g, columns 2t, 2t+1;
 *     i = 2, 3: row g + 8 (g = lane / 4, t = lane % 4);
 *   A [M, K], tiles 16 x 16, tile (mt, kt) in ((mt * KT + kt) * 8 + i):
 *     i = 0,1: (g, 2t..2t+1), 2,3: (g+8, 2t..), 4,5: (g, 2t+8..), 6,7: (g+8, 2t+8..);
 *   B [K, N], tiles 16 x 8, tile (kt, nt) in ((nt * KT + kt) * 4 + i):
 *     i = 0,1: (k = 2t..2t+1, n = g), i = 2,3: (k = 2t+8.., n = g).
 * These are the fragments of PTX's mma.m16n8k16 .row.col, so a product is a
 * loop of mma instructions over registers (and ldmatrix from tiles).
 */
#ifndef FA_MMA_CUH
#define FA_MMA_CUH

#include "fa_tile.cuh"

namespace fa {

template <class T> FA_DEV unsigned pack2(T lo, T hi) { return (unsigned)lo.bits | ((unsigned)hi.bits << 16); }

FA_DEV void mma_16816(float &c0, float &c1, float &c2, float &c3, unsigned a0, unsigned a1, unsigned a2,
                      unsigned a3, unsigned b0, unsigned b1, half) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
               "{%8, %9}, {%0, %1, %2, %3};"
               : "+f"(c0), "+f"(c1), "+f"(c2), "+f"(c3)
               : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
FA_DEV void mma_16816(float &c0, float &c1, float &c2, float &c3, unsigned a0, unsigned a1, unsigned a2,
                      unsigned a3, unsigned b0, unsigned b1, bf16) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
               "{%8, %9}, {%0, %1, %2, %3};"
               : "+f"(c0), "+f"(c1), "+f"(c2), "+f"(c3)
               : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

/* c += a . b on CUDA cores, for operands the tensor cores do not take (f32,
 * f64, integers, small shapes): a and b go to shared memory at their flat
 * indices, then each thread sums its own elements in the order k = 0, 1, ...
 * like the interpreter.  `smem` holds M*K + K*N elements of T and is free on
 * entry and exit. */
template <class LA, class LB, class LC, int M, int N, int K, class T, class Acc>
FA_DEV void dot_fma(Acc (&c)[LC::nregs], const T (&a)[LA::nregs], const T (&b)[LB::nregs], int lane, int warp,
                    void *smem) {
  T *sa = static_cast<T *>(smem);
  T *sb = sa + M * K;
  const int ta = LA::thread_offset(lane, warp), tb = LB::thread_offset(lane, warp);
#pragma unroll
  for (int e = 0; e < LA::nregs; ++e)
    sa[ta | LA::reg_offset(e)] = a[e];
#pragma unroll
  for (int e = 0; e < LB::nregs; ++e)
    sb[tb | LB::reg_offset(e)] = b[e];
  sync_compute();
  const int tc = LC::thread_offset(lane, warp);
#pragma unroll
  for (int e = 0; e < LC::nregs; ++e) {
    const int m = LC::coord(tc, e, 0), n = LC::coord(tc, e, 1);
    Acc acc = c[e];
    for (int k = 0; k < K; ++k)
      acc = acc + convert<Acc>(sa[m * K + k]) * convert<Acc>(sb[k * N + n]);
    c[e] = acc;
  }
  sync_compute();
}

/* ---- shared memory ------------------------------------------------------------------------ */

FA_DEV unsigned smem_addr(const void *p) {
  unsigned r;
  asm("{ .reg .u64 a; cvta.to.shared.u64 a, %1; cvt.u32.u64 %0, a; }" : "=r"(r) : "l"(p));
  return r;
}

/* Shared-memory copies of dot operands ("tiles"): a 2-D block stored with
 * one of its dimensions (D_IN) contiguous.  A tile format F maps (row, byte
 * of the row) to a byte offset, F::at(r, cb), where 16-byte pieces of a row
 * stay contiguous (ldmatrix, cp.async and 16-byte stores see no difference):
 *   PadTile<PITCH>: rows of PITCH bytes (the row length plus 16, which
 *     spreads the 8 rows an ldmatrix reads over all banks);
 *   SwzTile<ROWS, SW>: the layouts wgmma reads through its shared-memory
 *     descriptors.  Each row is cut into blocks of SW = 32, 64 or 128 bytes;
 *     block b of every row forms a ROWS x SW array (rows SW bytes apart,
 *     the arrays ROWS * SW bytes apart), and the 16-byte pieces of each
 *     1024-byte (128B), 512-byte or 256-byte run are permuted by XOR-ing
 *     address bits 4.. with bits 7.. (the hardware's 128B / 64B / 32B
 *     swizzle): no bank conflicts, and no padding.  The tile must start at
 *     a multiple of 1024 bytes. */
template <int PITCH> struct PadTile {
  enum : int { linear = 0 };
  static FA_CX int at(int r, int cb) { return r * PITCH + cb; }
  static FA_CX bool rows_fit(int) { return true; }
};
/* linear: at() is linear over GF(2) in the bits of r and cb (the fields it
 * places them in are disjoint powers of two, and the swizzle XORs address
 * bits with other address bits), so the offset of a sum of disjoint bits is
 * the XOR of their offsets (stage() uses this). */
template <int ROWS, int SW> struct SwzTile {
  static_assert(SW == 32 || SW == 64 || SW == 128, "swizzle width");
  static_assert((ROWS & (ROWS - 1)) == 0, "rows: a power of two");
  enum : int { linear = 1 };
  static FA_CX int at(int r, int cb) {
    const int a = (cb / SW) * (ROWS * SW) + r * SW + cb % SW;
    return a ^ (((a >> 7) & (SW / 16 - 1)) << 4);
  }
  static FA_CX bool rows_fit(int rows) { return rows <= ROWS; }
};

/* The tile offset of the element at flat index f of layout L (coordinates
 * along D_IN in elements of SIZE bytes). */
template <class L, int D_IN, class F, int SIZE> FA_CX int tile_offset(int f) {
  return F::at(L::coord(f, 0, 1 - D_IN), L::coord(f, 0, D_IN) * SIZE);
}
/* The offset bits that some thread's position can set (F linear): the OR of
 * the offsets of the lane and warp bits. */
template <class L, int D_IN, class F, int SIZE> FA_CX int thread_offset_bits() {
  int m = 0;
  for (int i = 0; i < L::lanes::n; ++i)
    m |= tile_offset<L, D_IN, F, SIZE>(L::lanes::gather(1 << i));
  for (int i = 0; i < L::warps::n; ++i)
    m |= tile_offset<L, D_IN, F, SIZE>(L::warps::gather(1 << i));
  return m;
}
/* Whether the XOR form stage() uses gives F::at for every thread and every
 * V-th register: checked, for the kernel's own layouts, as it is compiled.
 * SwzTile::at is linear when a block's rows fit the tile's (the row field
 * then stays below the column-block field: F::rows_fit, asserted for every
 * layout), and the form is then exact; the exhaustive comparison below runs
 * where it is cheap enough for the compiler's constant evaluation (up to
 * 4096 thread-register pairs: it gives up on the 16384 of D = 256's
 * 128-row tiles), which covers each tile format and layout family. */
template <class L, int D_IN, int V, class F, int SIZE> FA_CX bool xor_form_exact() {
  if ((1 << (L::lanes::n + L::warps::n)) * (L::nregs / V) > 4096)
    return true;
  const int bits = thread_offset_bits<L, D_IN, F, SIZE>();
  for (int lane = 0; lane < (1 << L::lanes::n); ++lane)
    for (int warp = 0; warp < (1 << L::warps::n); ++warp) {
      const int toff = L::lanes::gather(lane) | L::warps::gather(warp);
      const int t = tile_offset<L, D_IN, F, SIZE>(toff);
      for (int g = 0; g < L::nregs / V; ++g) {
        const int k = tile_offset<L, D_IN, F, SIZE>(L::reg_offset(g * V));
        const int r = L::coord(toff, g * V, 1 - D_IN), c = L::coord(toff, g * V, D_IN);
        if (((t ^ (k & bits)) + (k & ~bits)) != F::at(r, c * SIZE))
          return false;
      }
    }
  return true;
}

/* The offset in a tile of format F of register g * V's element of layout L,
 * for the thread at toff (thread_at: element_base's value for it).  With a
 * swizzled tile this is the thread's offset XOR a constant (F linear, the
 * thread's and the register's index bits disjoint); the constant's bits
 * that no thread sets are added, the rest XOR-ed: one instruction per
 * distinct XOR and the additions folded into the stores' offsets, instead
 * of the swizzle computed for every element. */
template <class L, int D_IN, class F, int SIZE> FA_DEV int element_base(int toff) {
  if constexpr (F::linear)
    return tile_offset<L, D_IN, F, SIZE>(toff);
  else
    return toff;
}
template <class L, int D_IN, int V, class F, int SIZE> FA_DEV int element_at(int thread_at, int g) {
  if constexpr (F::linear) {
    static_assert(F::rows_fit(L::shape::dim(1 - D_IN)), "the block's rows fit the tile's");
    static_assert(xor_form_exact<L, D_IN, V, F, SIZE>(), "the XOR form of the swizzled offsets");
    constexpr int bits = thread_offset_bits<L, D_IN, F, SIZE>();
    const int k = tile_offset<L, D_IN, F, SIZE>(L::reg_offset(g * V));
    return (thread_at ^ (k & bits)) + (k & ~bits);
  } else {
    const int toff = thread_at;
    return F::at(L::coord(toff, g * V, 1 - D_IN), L::coord(toff, g * V, D_IN) * SIZE);
  }
}

/* Stores of W 32-bit words into shared memory at a shared-window address
 * (st.shared: a generic st would take the path of global stores). */
template <int W> FA_DEV void st_shared_words(unsigned addr, const unsigned (&w)[W]) {
  if constexpr (W == 1) {
    asm volatile("st.shared.u32 [%0], %1;" ::"r"(addr), "r"(w[0]) : "memory");
  } else if constexpr (W == 2) {
    asm volatile("st.shared.v2.u32 [%0], {%1, %2};" ::"r"(addr), "r"(w[0]), "r"(w[1]) : "memory");
  } else {
    asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};" ::"r"(addr), "r"(w[0]), "r"(w[1]), "r"(w[2]),
                 "r"(w[3])
                 : "memory");
  }
}

/* Writes a block held in layout L into its tile of format F, V elements
 * (registers in a row along D_IN) per store.  Threads holding copies write
 * equal values. */
template <class L, int D_IN, int V, class F, class T>
FA_DEV void stage(unsigned char *tile, const T (&src)[L::nregs], int toff) {
  const unsigned base = smem_addr(tile);   /* the tile's shared-window address, once */
  constexpr int SIZE = (int)sizeof(T);
  const int thread_at = element_base<L, D_IN, F, SIZE>(toff);
#pragma unroll
  for (int g = 0; g < L::nregs / V; ++g) {
    const int at = element_at<L, D_IN, V, F, SIZE>(thread_at, g);
    if constexpr (V * SIZE >= 4) {
      constexpr int W = V * SIZE / 4;
      unsigned w[W];
#pragma unroll
      for (int i = 0; i < W; ++i)
        w[i] = 0;
#pragma unroll
      for (int i = 0; i < V; ++i)
        pack<T, W>(w, i, src[g * V + i]);
      st_shared_words<W>(base + (unsigned)at, w);
    } else {
#pragma unroll
      for (int i = 0; i < V; ++i)
        reinterpret_cast<T *>(tile + at)[i] = src[g * V + i];
    }
  }
}

/* ldmatrix: four 8x8 matrices of 16-bit elements; lane l gives the address of
 * row l % 8 of matrix l / 8; register i receives the fragment of matrix i. */
FA_DEV void ldmatrix_x4(unsigned (&r)[4], unsigned addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
FA_DEV void ldmatrix_x4_trans(unsigned (&r)[4], unsigned addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

/* Fragments of tiles (fa_mma.cuh's register order).  A [M, K] stored with k
 * contiguous (K_INNER) or m contiguous; B [K, N] stored with k contiguous
 * (K_INNER) or n contiguous.  Each lane supplies one row address of the 8x8
 * matrices; .trans transposes the matrices stored the other way round. */
template <bool K_INNER, class F>
FA_DEV void load_a_frag(unsigned (&r)[4], unsigned tile, int m0, int k0, int lane) {
  if constexpr (K_INNER) {
    const int m = m0 + (lane & 7) + ((lane >> 3) & 1) * 8, k = k0 + (lane >> 4) * 8;
    ldmatrix_x4(r, tile + F::at(m, k * 2));
  } else {
    const int k = k0 + (lane & 7) + (lane >> 4) * 8, m = m0 + ((lane >> 3) & 1) * 8;
    ldmatrix_x4_trans(r, tile + F::at(k, m * 2));
  }
}
/* B fragments {b0, b1} of one n8 column block over k0 .. k0+15 (lanes
 * 0..15 supply the addresses). */
template <bool K_INNER, class F>
FA_DEV void load_b_frag_x2(unsigned (&r)[2], unsigned tile, int n0, int k0, int lane) {
  const int l = lane & 15;
  if constexpr (K_INNER) {
    const int n = n0 + (l & 7), k = k0 + (l >> 3) * 8;
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];"
                 : "=r"(r[0]), "=r"(r[1])
                 : "r"(tile + F::at(n, k * 2)));
  } else {
    const int k = k0 + (l & 7) + (l >> 3) * 8;
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];"
                 : "=r"(r[0]), "=r"(r[1])
                 : "r"(tile + F::at(k, n0 * 2)));
  }
}

/* One k16 step of a product whose B is read from a tile: the warp's place
 * along N is wn = (warp / WM) % WN; 8-column blocks interleave, except with
 * one warpgroup along M (WM = 4), where each warp holds N / WN consecutive
 * columns (fa_mma_n_contiguous in layout.c: the columns of one warpgroup
 * are then those of one wgmma). */
template <int MT, int NT, int WM, int WN, bool B_K_INNER, class FB, class T>
FA_DEV void mma_k_step(float (&c)[MT * NT * 4], const unsigned (&af)[MT][4], unsigned b_tile, int kt, int lane,
                       int warp) {
  const int wn = (warp / WM) % WN;
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
    unsigned bf[2];
    load_b_frag_x2<B_K_INNER, FB>(bf, b_tile, (WM == 4 && WN > 1 ? wn * NT + nt : nt * WN + wn) * 8, kt * 16, lane);
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      const int ic = (mt * NT + nt) * 4;
      mma_16816(c[ic], c[ic + 1], c[ic + 2], c[ic + 3], af[mt][0], af[mt][1], af[mt][2], af[mt][3], bf[0], bf[1],
                T{});
    }
  }
}

/* Two f32 rounded to a packed pair of T (the first in the low half), one instruction. */
FA_DEV unsigned pack2_from_f32(float lo, float hi, half) {
  unsigned r;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
FA_DEV unsigned pack2_from_f32(float lo, float hi, bf16) {
  unsigned r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}

/* A fragments of an f32 block cast to T on the way (x.to(f16) feeding a
 * product: the rounded copy is never stored). */
template <int MT, int KT, class T>
FA_DEV void a_frags_from_f32(unsigned (&af)[MT][4], const float (&a)[MT * KT * 8], int kt) {
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
    const int ia = (mt * KT + kt) * 8;
#pragma unroll
    for (int i = 0; i < 4; ++i)
      af[mt][i] = pack2_from_f32(a[ia + 2 * i], a[ia + 2 * i + 1], T{});
  }
}

template <int MT, int KT, class T>
FA_DEV void a_frags_from_regs(unsigned (&af)[MT][4], const T (&a)[MT * KT * 8], int kt) {
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
    const int ia = (mt * KT + kt) * 8;
    af[mt][0] = pack2(a[ia], a[ia + 1]);
    af[mt][1] = pack2(a[ia + 2], a[ia + 3]);
    af[mt][2] = pack2(a[ia + 4], a[ia + 5]);
    af[mt][3] = pack2(a[ia + 6], a[ia + 7]);
  }
}

/* c += a . b, A in registers (layout of fa_mma.cuh), B from a tile.  (B is
 * read one k16 step at a time: reading two with ldmatrix.x4 halves the
 * instructions but keeps more fragments live, and registers decide how
 * many programs an SM runs.) */
template <int MT, int NT, int KT, int WM, int WN, bool B_K_INNER, class FB, class T>
FA_DEV void mma_rs(float (&c)[MT * NT * 4], const T (&a)[MT * KT * 8], unsigned b_tile, int lane, int warp) {
#pragma unroll
  for (int kt = 0; kt < KT; ++kt) {
    unsigned af[MT][4];
    a_frags_from_regs<MT, KT>(af, a, kt);
    mma_k_step<MT, NT, WM, WN, B_K_INNER, FB, T>(c, af, b_tile, kt, lane, warp);
  }
}

/* c += a.to(T) . b for an f32 a in registers, B from a tile. */
template <int MT, int NT, int KT, int WM, int WN, bool B_K_INNER, class FB, class T>
FA_DEV void mma_rs_cvt(float (&c)[MT * NT * 4], const float (&a)[MT * KT * 8], unsigned b_tile, int lane,
                       int warp) {
#pragma unroll
  for (int kt = 0; kt < KT; ++kt) {
    unsigned af[MT][4];
    a_frags_from_f32<MT, KT, T>(af, a, kt);
    mma_k_step<MT, NT, WM, WN, B_K_INNER, FB, T>(c, af, b_tile, kt, lane, warp);
  }
}

/* c += a . b, both from tiles; the warp's place along M is warp % WM
 * (16-row blocks interleaved). */
template <int MT, int NT, int KT, int WM, int WN, bool A_K_INNER, bool B_K_INNER, class FA, class FB, class T>
FA_DEV void mma_ss(float (&c)[MT * NT * 4], unsigned a_tile, unsigned b_tile, int lane, int warp) {
  const int wm = warp % WM;
#pragma unroll
  for (int kt = 0; kt < KT; ++kt) {
    unsigned af[MT][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
      load_a_frag<A_K_INNER, FA>(af[mt], a_tile, (mt * WM + wm) * 16, kt * 16, lane);
    mma_k_step<MT, NT, WM, WN, B_K_INNER, FB, T>(c, af, b_tile, kt, lane, warp);
  }
}

/* ---- wgmma (sm_90a) ---------------------------------------------------------------------- */

/* A shared-memory matrix descriptor: start address, leading and stride
 * byte offsets (multiples of 16) and swizzle mode (1: 128B, 2: 64B, 3: 32B). */
FA_DEV unsigned long long wgmma_desc(unsigned addr, int lbo, int sbo, int mode) {
  return (unsigned long long)((addr & 0x3FFFFu) >> 4) | ((unsigned long long)((lbo >> 4) & 0x3FFF) << 16) |
         ((unsigned long long)((sbo >> 4) & 0x3FFF) << 32) | ((unsigned long long)mode << 62);
}
/* The descriptor of the address BYTES (a multiple of 16, >= 0) past D's:
 * the address field (bits 0-13, the address over 16) takes the addition
 * without a carry into the fields above it, because shared-memory addresses
 * are below 2^18; the upper word (the stride and swizzle fields) is the same. */
FA_DEV unsigned long long desc_add(unsigned long long d, int bytes) {
  const unsigned lo = (unsigned)d + ((unsigned)bytes >> 4);
  return (d & 0xFFFFFFFF00000000ull) | lo;
}
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
/* Shared memory written by ordinary stores (or cp.async) and read next by
 * wgmma: each writer fences before the barrier. */
FA_DEV void fence_async_smem() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }
FA_DEV void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
FA_DEV void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N> FA_DEV void wgmma_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory"); }
#endif

FA_DEV void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N> FA_DEV void cp_async_wait() { asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory"); }

/* cp.async of 4, 8 or 16 bytes (16: .cg, around L1); src_bytes = 0 fills the
 * destination with zeros and reads nothing. */
template <int BYTES> FA_DEV void cp_async(unsigned dst, const void *src, int src_bytes) {
  static_assert(BYTES == 4 || BYTES == 8 || BYTES == 16, "cp.async copies 4, 8 or 16 bytes");
  if constexpr (BYTES == 16)
    asm volatile("{ .reg .u64 g; cvta.to.global.u64 g, %1; cp.async.cg.shared.global [%0], [g], 16, %2; }" ::"r"(dst),
                 "l"(src), "r"(src_bytes)
                 : "memory");
  else
    asm volatile("{ .reg .u64 g; cvta.to.global.u64 g, %1; cp.async.ca.shared.global [%0], [g], %2, %3; }" ::"r"(dst),
                 "l"(src), "n"(BYTES), "r"(src_bytes)
                 : "memory");
}

/* load(block_ptr) straight into a tile (as stage() would write it), with
 * cp.async: V elements per copy along D_IN (the dimension of stride 1),
 * elements outside the checked bounds zero.  Completes at cp_async_wait. */
template <class L, int V, unsigned CHECK, int D_IN, class F, class T, int R>
FA_DEV void load_block_async(unsigned tile, const BlockPtr<T, R> &p, int toff, bool owner) {
  if (!owner)
    return;
  constexpr int SIZE = (int)sizeof(T);
  const int thread_at = element_base<L, D_IN, F, SIZE>(toff);
#pragma unroll
  for (int g = 0; g < L::nregs / V; ++g) {
    bool in;
    const long long off = block_address<L, CHECK>(p, toff, g * V, in);
    const int at = element_at<L, D_IN, V, F, SIZE>(thread_at, g);
    cp_async<V * SIZE>(tile + at, in ? p.base + off : p.base, in ? V * SIZE : 0);
  }
}

/* A block pointer moved on by `times` steps of `delta` (the pipelined loads
 * of later iterations). */
template <class T, int R>
FA_DEV BlockPtr<T, R> advance_by(BlockPtr<T, R> p, const int (&delta)[R], int times) {
#pragma unroll
  for (int d = 0; d < R; ++d)
    p.offset[d] += delta[d] * times;
  return p;
}

} // namespace fa

#endif
