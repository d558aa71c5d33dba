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
 * loop of mma instructions over registers.
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

/* c += a . b for one warp's MT x NT x KT tiles (layouts above). */
template <int MT, int NT, int KT, class T>
FA_DEV void mma(float (&c)[MT * NT * 4], const T (&a)[MT * KT * 8], const T (&b)[NT * KT * 4]) {
#pragma unroll
  for (int kt = 0; kt < KT; ++kt)
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        const int ia = (mt * KT + kt) * 8, ib = (nt * KT + kt) * 4, ic = (mt * NT + nt) * 4;
        mma_16816(c[ic], c[ic + 1], c[ic + 2], c[ic + 3], pack2(a[ia], a[ia + 1]), pack2(a[ia + 2], a[ia + 3]),
                  pack2(a[ia + 4], a[ia + 5]), pack2(a[ia + 6], a[ia + 7]), pack2(b[ib], b[ib + 1]),
                  pack2(b[ib + 2], b[ib + 3]), T{});
      }
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
  __syncthreads();
  const int tc = LC::thread_offset(lane, warp);
#pragma unroll
  for (int e = 0; e < LC::nregs; ++e) {
    const int m = LC::coord(tc, e, 0), n = LC::coord(tc, e, 1);
    Acc acc = c[e];
    for (int k = 0; k < K; ++k)
      acc = acc + convert<Acc>(sa[m * K + k]) * convert<Acc>(sb[k * N + n]);
    c[e] = acc;
  }
  __syncthreads();
}

/* ---- shared memory ------------------------------------------------------------------------ */

FA_DEV unsigned smem_addr(const void *p) {
  unsigned r;
  asm("{ .reg .u64 a; cvta.to.shared.u64 a, %1; cvt.u32.u64 %0, a; }" : "=r"(r) : "l"(p));
  return r;
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

/* cp.async of 16 bytes; src_bytes = 0 fills the destination with zeros. */
FA_DEV void cp_async_16(unsigned dst, const void *src, int src_bytes) {
  asm volatile("{ .reg .u64 g; cvta.to.global.u64 g, %1; cp.async.cg.shared.global [%0], [g], 16, %2; }" ::"r"(dst),
               "l"(src), "r"(src_bytes)
               : "memory");
}
FA_DEV void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N> FA_DEV void cp_async_wait() { asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory"); }

} // namespace fa

#endif
