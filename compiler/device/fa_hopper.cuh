/* fa_hopper.cuh - Hopper (sm_90) primitives of fadsl's device library:
 * mbarriers, bulk tensor copies (TMA), named barriers, register
 * reallocation between warpgroups (setmaxnreg, sm_90a) and the fences that
 * keep the C++ compiler from moving register accesses across asynchronous
 * warpgroup products.
 *
 * An mbarrier is a 64-bit object in shared memory that counts arrivals and,
 * for the copy engine, bytes still to land ("transactions").  A phase
 * completes when the expected arrivals have arrived and the expected bytes
 * have landed; waiting names the parity of the phase waited for.  A ring of
 * `stages` buffers uses one "full" and one "empty" mbarrier per buffer:
 * the thread issuing the copies into buffer s arms full[s] with the bytes
 * it expects, the copy engine completes them, the consumers wait on full[s],
 * read, and arrive on empty[s]; the issuer waits on empty[s] before it
 * refills the buffer.  Use n of buffer s (n = 0, 1, ...) is phase n of both
 * barriers: consumers wait for parity n & 1 of full[s], the issuer for the
 * release of use n - 1, parity (n & 1) ^ 1 of empty[s] (for n = 0 that is
 * the phase before the first, which counts as complete).
 *
 * Bulk tensor stores go the other way, from shared memory to global memory,
 * and complete in "bulk groups" of the thread that issued them (no
 * mbarrier): the writers of a staging tile fence their writes for the async
 * proxy and pass a barrier, one thread issues the stores (or reduce-adds)
 * and commits them as a group, and the same thread later waits until the
 * groups have read shared memory (before the tile is written again) or are
 * complete (before the block exits).
 *
 * Every routine here is for sm_90 and newer; the emitter only calls them
 * in kernels it plans for sm_90a.
 */
#ifndef FA_HOPPER_CUH
#define FA_HOPPER_CUH

#include "fa_mma.cuh"

namespace fa {

/* The driver's CUtensorMap (128 bytes, 64-byte aligned), built by the
 * runtime at launch (cuTensorMapEncodeTiled) and passed by value as a
 * `const __grid_constant__` kernel parameter, so that its address is one
 * the copy engine may read. */
struct alignas(64) TensorMap {
  unsigned long long opaque[16];
};

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900

/* ---- mbarriers ------------------------------------------------------------------------ */

/* One thread initialises each barrier; then every thread runs
 * mbar_init_fence() and a barrier before any use. */
FA_DEV void mbar_init(unsigned bar, unsigned arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(arrivals) : "memory");
}
/* Makes the initialisations visible to the other threads and to the copy
 * engine (the async proxy). */
FA_DEV void mbar_init_fence() { asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory"); }

/* Arrives (one of the expected arrivals) and adds `bytes` to the bytes the
 * current phase waits for. */
FA_DEV void mbar_arrive_expect_tx(unsigned bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}
/* Arrives (release semantics: this thread's earlier accesses happen before
 * the phase completes). */
FA_DEV void mbar_arrive(unsigned bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}
/* Whether the phase of that parity has completed (waits a while in
 * hardware before saying no). */
FA_DEV bool mbar_try_wait(unsigned bar, unsigned parity) {
  unsigned done;
  asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
               : "=r"(done)
               : "r"(bar), "r"(parity)
               : "memory");
  return done != 0;
}
/* Waits for the phase of that parity (acquire semantics: what the arriving
 * threads and the copy engine wrote before it completed is visible after). */
FA_DEV void mbar_wait(unsigned bar, unsigned parity) {
  while (!mbar_try_wait(bar, parity)) {
  }
}

/* Dynamic persistent scheduling with a producer warp (fa::next_tile_shared
 * says what is shared): the producer's thread takes the ticket of round r
 * (>= 1), writes the program into slot r % 2 at `slots` and arrives on that
 * slot's `full` mbarrier, whose completion publishes the write; each
 * compute warp waits for it, reads the slot and arrives on the slot's
 * `empty` mbarrier, which the producer waits for before writing the slot
 * again two rounds later.  Both sides run the same rounds and leave their
 * loops on the same program (past the last).  Round r uses slot (r - 1) % 2
 * for the ((r - 1) / 2)-th time: round 0 hands nothing over, so counting
 * from round 1 makes each slot's first use the first phase of its
 * mbarriers (counted from r, slot 0's first use, in round 2, would wait for
 * a phase of `empty` that no round completes, and the compute warps pass
 * its `full` wait on the fresh mbarrier's parity and read an unwritten
 * slot; tests/next-tile-protocol.py models both). */
FA_DEV unsigned next_tile_publish(unsigned *counter, unsigned G, unsigned slots, unsigned full, unsigned empty,
                                  unsigned r) {
  const unsigned t = G + atomicAdd(counter, 1u), s = (r - 1u) & 1u, use = (r - 1u) >> 1;
  mbar_wait(empty + 8u * s, (use & 1u) ^ 1u);
  asm volatile("st.shared.u32 [%0], %1;" ::"r"(slots + 4u * s), "r"(t) : "memory");
  mbar_arrive(full + 8u * s);
  return t;
}
FA_DEV unsigned next_tile_take(unsigned slots, unsigned full, unsigned empty, unsigned r, int lane) {
  const unsigned s = (r - 1u) & 1u, use = (r - 1u) >> 1;
  mbar_wait(full + 8u * s, use & 1u);
  unsigned t;
  asm volatile("ld.shared.u32 %0, [%1];" : "=r"(t) : "r"(slots + 4u * s) : "memory");
  __syncwarp();
  if (lane == 0)
    mbar_arrive(empty + 8u * s);
  return t;
}

/* Use n of a ring buffer: which buffer, and the parity of its phase. */
template <int STAGES> FA_DEV unsigned ring_slot(int n) { return (unsigned)n % STAGES; }
template <int STAGES> FA_DEV unsigned ring_parity(int n) { return ((unsigned)n / STAGES) & 1u; }

/* ---- bulk tensor copies ------------------------------------------------------------------ */

/* The generic address of a __grid_constant__ tensor map, as the copy
 * instructions take it. */
FA_DEV unsigned long long tmap_addr(const TensorMap &m) {
  return (unsigned long long)reinterpret_cast<const void *>(&m);
}

/* Fetches a tensor map into the copy engine's cache ahead of its first use. */
FA_DEV void tma_prefetch_map(const TensorMap &m) {
  asm volatile("prefetch.tensormap [%0];" ::"l"(tmap_addr(m)) : "memory");
}

/* Copies the box of tensor map m at coordinates c (innermost dimension
 * first, in elements; boxes reaching outside the tensor are filled as the
 * map says) into shared memory at dst (the map's swizzle applied), and
 * completes that many bytes on mbarrier bar. */
template <int R>
FA_DEV void tma_load(unsigned dst, const TensorMap &m, unsigned bar, const int (&c)[R]) {
  static_assert(R >= 1 && R <= 5, "tensor maps have 1 to 5 dimensions");
  const unsigned long long map = tmap_addr(m);
  if constexpr (R == 1)
    asm volatile("cp.async.bulk.tensor.1d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3}], [%2];"
                 ::"r"(dst), "l"(map), "r"(bar), "r"(c[0])
                 : "memory");
  else if constexpr (R == 2)
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], "
                 "[%2];" ::"r"(dst), "l"(map), "r"(bar), "r"(c[0]), "r"(c[1])
                 : "memory");
  else if constexpr (R == 3)
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, "
                 "%5}], [%2];" ::"r"(dst), "l"(map), "r"(bar), "r"(c[0]), "r"(c[1]), "r"(c[2])
                 : "memory");
  else if constexpr (R == 4)
    asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, "
                 "%5, %6}], [%2];" ::"r"(dst), "l"(map), "r"(bar), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3])
                 : "memory");
  else
    asm volatile("cp.async.bulk.tensor.5d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, "
                 "%5, %6, %7}], [%2];" ::"r"(dst), "l"(map), "r"(bar), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]),
                 "r"(c[4])
                 : "memory");
}

/* Writes the box of tensor map m at coordinates c (innermost first) from
 * shared memory at src (laid out with the map's swizzle); elements outside
 * the tensor are not written.  Joins the issuing thread's current bulk
 * group (bulk_commit closes it). */
template <int R>
FA_DEV void tma_store(const TensorMap &m, unsigned src, const int (&c)[R]) {
  static_assert(R >= 2 && R <= 5, "bulk stores here have 2 to 5 dimensions");
  const unsigned long long map = tmap_addr(m);
  if constexpr (R == 2)
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];" ::"l"(map), "r"(src),
                 "r"(c[0]), "r"(c[1])
                 : "memory");
  else if constexpr (R == 3)
    asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [%0, {%2, %3, %4}], [%1];" ::"l"(map),
                 "r"(src), "r"(c[0]), "r"(c[1]), "r"(c[2])
                 : "memory");
  else if constexpr (R == 4)
    asm volatile("cp.async.bulk.tensor.4d.global.shared::cta.bulk_group [%0, {%2, %3, %4, %5}], [%1];" ::"l"(map),
                 "r"(src), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3])
                 : "memory");
  else
    asm volatile("cp.async.bulk.tensor.5d.global.shared::cta.bulk_group [%0, {%2, %3, %4, %5, %6}], [%1];" ::"l"(map),
                 "r"(src), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]), "r"(c[4])
                 : "memory");
}

/* Adds the box at src to the tensor's elements at coordinates c, each
 * addition atomic (the map's element type: f32, f16 or bf16 here);
 * elements outside the tensor are left alone.  Joins the current bulk
 * group. */
template <int R>
FA_DEV void tma_reduce_add(const TensorMap &m, unsigned src, const int (&c)[R]) {
  static_assert(R >= 2 && R <= 5, "bulk reduce-adds here have 2 to 5 dimensions");
  const unsigned long long map = tmap_addr(m);
  if constexpr (R == 2)
    asm volatile("cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.tile.bulk_group"
                 " [%0, {%2, %3}], [%1];" ::"l"(map),
                 "r"(src), "r"(c[0]), "r"(c[1])
                 : "memory");
  else if constexpr (R == 3)
    asm volatile("cp.reduce.async.bulk.tensor.3d.global.shared::cta.add.tile.bulk_group"
                 " [%0, {%2, %3, %4}], [%1];" ::"l"(map),
                 "r"(src), "r"(c[0]), "r"(c[1]), "r"(c[2])
                 : "memory");
  else if constexpr (R == 4)
    asm volatile("cp.reduce.async.bulk.tensor.4d.global.shared::cta.add.tile.bulk_group"
                 " [%0, {%2, %3, %4, %5}], [%1];" ::"l"(map),
                 "r"(src), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3])
                 : "memory");
  else
    asm volatile("cp.reduce.async.bulk.tensor.5d.global.shared::cta.add.tile.bulk_group"
                 " [%0, {%2, %3, %4, %5, %6}], [%1];" ::"l"(map),
                 "r"(src), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]), "r"(c[4])
                 : "memory");
}

/* Closes the issuing thread's current bulk group (the stores issued since
 * the last commit). */
FA_DEV void bulk_commit() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }

/* Waits until at most N of this thread's bulk groups have not yet read
 * their shared memory (the staging tiles may be written again). */
template <int N> FA_DEV void bulk_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(N) : "memory");
}

/* Waits until at most N of this thread's bulk groups are incomplete (their
 * writes done). */
template <int N> FA_DEV void bulk_wait() { asm volatile("cp.async.bulk.wait_group %0;" ::"n"(N) : "memory"); }

/* ---- threads ----------------------------------------------------------------------------- */

/* True in exactly one lane of the calling warp (every lane must call it). */
FA_DEV bool elect_one() {
  unsigned is_leader = 0;
  asm volatile("{\n.reg .b32 r;\n.reg .pred p;\nelect.sync r|p, %1;\nselp.u32 %0, 1, 0, p;\n}\n"
               : "=r"(is_leader)
               : "r"(0xffffffffu));
  return is_leader != 0;
}

/* Named barriers 1..15 over a subset of the block's warps (0 is
 * __syncthreads'): `threads` (a multiple of 32) must arrive; sync also
 * waits for them, arrive does not. */
template <int ID, int THREADS> FA_DEV void named_sync() {
  asm volatile("bar.sync %0, %1;" ::"n"(ID), "n"(THREADS) : "memory");
}
template <int ID, int THREADS> FA_DEV void named_arrive() {
  asm volatile("bar.arrive %0, %1;" ::"n"(ID), "n"(THREADS) : "memory");
}

/* Ping-pong of two consumer warpgroups (warps 0-3 and 4-7): warpgroup g
 * waits for its turn on barrier 2 + g and gives the turn to the other on
 * 3 - g; immediate barrier ids let ptxas count the barriers a block uses. */
FA_DEV void wait_turn(int g) {
  if (g == 0)
    named_sync<2, 256>();
  else
    named_sync<3, 256>();
}
FA_DEV void pass_turn(int g) {
  if (g == 0)
    named_arrive<3, 256>();
  else
    named_arrive<2, 256>();
}

#endif /* sm_90 */

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
/* Moves registers between warpgroups (sm_90a, like wgmma): every warp of a
 * warpgroup executes the same one (the kernel needs
 * __launch_bounds__(threads, 1)); N is a multiple of 8 from 24 to 256. */
template <int N> FA_DEV void setmaxnreg_dec() { asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(N)); }
template <int N> FA_DEV void setmaxnreg_inc() { asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(N)); }
#endif

/* Ties the registers of an array to this point of the program: the C++
 * compiler may not move reads or writes of them across it.  Used around
 * asynchronous warpgroup products, whose accumulators the tensor cores own
 * from the issue to the wait. */
template <int N> FA_DEV void fence_regs(float (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i)
    asm volatile("" : "+f"(r[i])::"memory");
}
template <int N> FA_DEV void fence_regs(unsigned (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i)
    asm volatile("" : "+r"(r[i])::"memory");
}
template <int A, int B, int C> FA_DEV void fence_regs(unsigned (&r)[A][B][C]) {
#pragma unroll
  for (int i = 0; i < A; ++i)
#pragma unroll
    for (int j = 0; j < B; ++j)
      fence_regs(r[i][j]);
}

/* The elements of a 1-D block that the copy engine loaded into shared
 * memory in order (a ring vector's dense tile, the current buffer of its
 * loop's ring): V contiguous ones per read, the first log2(V) register bits
 * of L being the block's lowest bits. */
template <class L, int V, class T> FA_DEV void read_dense(T (&dst)[L::nregs], const unsigned char *tile, int toff) {
  const T *src = reinterpret_cast<const T *>(tile);
#pragma unroll
  for (int g = 0; g < L::nregs / V; ++g) {
    const int k = L::coord(toff, g * V, 0);
    if constexpr (V == 1) {
      dst[g] = src[k];
    } else {
      /* plain C++ reads, not asm: the compiler keeps them after the ring's
         wait (an asm statement with a memory clobber) and schedules them
         freely otherwise (volatile asm loads cost the fused backward pass 24
         registers at d_head 64) */
      constexpr int W = V * (int)sizeof(T) / 4;
      unsigned w[W];
      if constexpr (W == 1) {
        w[0] = *reinterpret_cast<const unsigned *>(src + k);
      } else if constexpr (W == 2) {
        const uint2 u = *reinterpret_cast<const uint2 *>(src + k);
        w[0] = u.x;
        w[1] = u.y;
      } else {
        const uint4 u = *reinterpret_cast<const uint4 *>(src + k);
        w[0] = u.x;
        w[1] = u.y;
        w[2] = u.z;
        w[3] = u.w;
      }
#pragma unroll
      for (int i = 0; i < V; ++i)
        dst[g * V + i] = unpack<T, W>(w, i);
    }
  }
}

} // namespace fa

#endif
