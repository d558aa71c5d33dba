/* layout.h - distributed layouts of block values for the CUDA backend, and
 * the layout assignment pass.
 *
 * One program instance runs as one thread block of 32 * warps threads, and
 * each block value of the tile IR is spread over those threads' registers.
 * A layout says which thread holds which element.  Every layout here is
 * *linear over the bits of the element index*: number the elements of a
 * block by their row-major flat index (shapes are powers of two, so the
 * index of dimension d occupies a fixed run of bits); then each bit of a
 * thread's register index, of its lane id and of its warp id selects one bit
 * of the flat index, or none (replication: threads differing only in that bit
 * hold copies of the same elements).  Register bits never select nothing, and
 * every flat-index bit is selected exactly once, so (register, lane, warp)
 * modulo copies is a bijection onto the elements.
 *
 * Triton's blocked layouts (sizePerThread / threadsPerWarp / warpsPerCTA /
 * order, wrapping when the block is larger than the CTA tile), the
 * mma.sync m16n8k16 accumulator and operand fragments, and slices of any of
 * these along a reduced axis are all of this form, and so are the results of
 * expand_dims, reshape (the flat index does not change), trans (the bits are
 * permuted) and the operand side of a broadcast (the broadcast dimension's
 * bits are dropped).  Converting between two layouts is then a register
 * permutation when the thread bits agree, and a round trip through shared
 * memory otherwise.  The device library (compiler/device/fa_tile.cuh)
 * evaluates the same bit lists.
 */
#ifndef FADSL_LAYOUT_H
#define FADSL_LAYOUT_H

#include <stdbool.h>

#include "ast.h"
#include "ir.h"

enum {
  FA_LAYOUT_MAX_BITS = 30, /* flat-index bits: blocks of up to 2^30 elements */
  FA_LAYOUT_LANE_BITS = 5,
  FA_LAYOUT_MAX_WARP_BITS = 5, /* up to 32 warps (1024 threads) */
};

typedef enum FaLayoutKind {
  FA_LAYOUT_BLOCKED,  /* coalesced memory access */
  FA_LAYOUT_MMA,      /* mma.sync m16n8k16 accumulator */
  FA_LAYOUT_DOT_A,    /* mma.sync A operand fragments */
  FA_LAYOUT_DOT_B,    /* mma.sync B operand fragments */
  FA_LAYOUT_DERIVED,  /* slice / broadcast operand / trans / reshape of another */
} FaLayoutKind;

typedef struct FaLayout {
  FaLayoutKind kind;
  int rank;
  int shape[FA_MAX_RANK];
  int nbits;                                 /* log2 of the element count */
  int nreg;                                  /* register index bits: 2^nreg registers */
  int nwarp;                                 /* warp id bits: log2(warps) */
  signed char reg[FA_LAYOUT_MAX_BITS];       /* flat-index bit each selects (never -1) */
  signed char lane[FA_LAYOUT_LANE_BITS];     /* ... or -1: copies */
  signed char warp[FA_LAYOUT_MAX_WARP_BITS]; /* ... or -1: copies */
  const char *desc;                          /* for comments in emitted code */
  int id;                                    /* index in a layout table; -1 when not interned */
} FaLayout;

/* ---- construction (out is filled; false when the shape does not fit) ------- */

/* A blocked layout: `vec` elements per thread along the fastest dimension
 * order[0] (a power of two), then the lanes and warps along the dimensions
 * in `order` (fastest first), then the registers again (wrapping). */
bool fa_layout_blocked(FaLayout *out, int rank, const int *shape, const int *order, int vec, int warps);

/* How the warps of a dot of [M, K] x [K, N] share the work: wm warps along
 * M (16-row blocks, interleaved), wn along N (8-column blocks interleaved,
 * or N / wn consecutive columns each where fa_mma_n_contiguous); wm * wn
 * <= warps, and the remaining warps compute copies.  False when M < 16,
 * N < 8 or K < 16 (the product cannot use m16n8k16). */
bool fa_mma_warps(int M, int N, int K, int warps, int *wm, int *wn);
/* Whether the warps along N hold consecutive columns: with one warpgroup
 * along M (wm = 4) and more along N, whose columns are then those of one
 * wgmma each (cuda_plan.c); else 8-column blocks interleave. */
bool fa_mma_n_contiguous(int wm, int wn);
/* The accumulator [M, N] of mma.sync m16n8k16 (register order as fa_mma.cuh). */
bool fa_layout_mma(FaLayout *out, int M, int N, int warps, int wm, int wn);
/* The A [M, K] (operand 0) or B [K, N] (operand 1) fragments of the same product. */
bool fa_layout_dot_operand(FaLayout *out, int operand, int M, int N, int K, int warps, int wm, int wn);

/* The layout of a reduction's result: `axis` removed; registers selecting its
 * bits disappear, lanes and warps selecting them hold copies. */
void fa_layout_slice(FaLayout *out, const FaLayout *in, int axis);
/* The same bits for another shape with the same element count (reshape,
 * expand_dims: the row-major flat index does not change). */
void fa_layout_reshape(FaLayout *out, const FaLayout *in, int rank, const int *shape);
/* The layout of trans(x, perm) given x's layout (result dim i = x's dim perm[i]). */
void fa_layout_trans(FaLayout *out, const FaLayout *in, const int *perm);
/* The layout a broadcast's operand (of shape src_shape, with 1 where the
 * result is stretched) must have for the broadcast to stay in registers:
 * the stretched dimensions' bits removed. */
void fa_layout_broadcast_source(FaLayout *out, const FaLayout *result, int rank, const int *src_shape);

bool fa_layout_equal(const FaLayout *a, const FaLayout *b);
/* True when b holds the same elements in every thread as a, possibly in other
 * registers (same lane and warp bits, same set of register bits).  Then
 * perm[i] = the register bit of a that selects what register bit i of b does. */
bool fa_layout_register_permutation(const FaLayout *a, const FaLayout *b, int perm[FA_LAYOUT_MAX_BITS]);

/* Checks the invariants (bits in range, each flat-index bit selected exactly
 * once, no register bit selecting nothing).  Returns false and writes why. */
bool fa_layout_check(const FaLayout *l, char *why, size_t why_size);

/* Lane / warp bits that select nothing (the masks of copies). */
int fa_layout_lane_dups(const FaLayout *l);
int fa_layout_warp_dups(const FaLayout *l);
/* Flat-index bits of dimension d: [first, first + count). */
void fa_layout_dim_bits(const FaLayout *l, int d, int *first, int *count);

/* Writes e.g. "fa::Layout<fa::Shape<64, 64>, fa::Bits<0, 9>, fa::Bits<...>, fa::Bits<...>>". */
void fa_layout_print_type(const FaLayout *l, StrBuf *out);
/* Writes a one-line description: kind, shape, and the bit lists. */
void fa_layout_describe(const FaLayout *l, StrBuf *out);

/* ---- the layout assignment pass ------------------------------------------------------- */

/* How a dot is lowered. */
typedef enum FaDotKind {
  FA_DOT_MMA,   /* mma.sync m16n8k16, f16/bf16 operands, f32 accumulation */
  FA_DOT_FMA,   /* CUDA cores through shared memory (f32/f64/int operands, small shapes) */
} FaDotKind;

/* FA_DOT_MMA reads its B operand, and its A operand unless a_in_regs, from
 * a shared-memory copy of the value (written once, after the value's
 * definition) with ldmatrix; A comes from registers in layout `a` when the
 * value already is in that layout up to a register permutation (the
 * accumulator of a previous product, cast), or when it is defined outside
 * the loop around the product and small enough to stay in registers. */
typedef struct FaDotPlan {
  FaDotKind kind;
  int wm, wn;                 /* FA_DOT_MMA: warps along M and N */
  const FaLayout *a, *b;      /* the register fragments of the operands */
  const FaLayout *acc;        /* the layout of its result (and accumulator) */
  bool a_in_regs;             /* FA_DOT_MMA: A from registers (layout a), else shared memory */
} FaDotPlan;

/* Per-kernel results of the pass. */
typedef struct FaLayoutPlan {
  int warps;
  PtrVec layouts;             /* FaLayout*, interned: equal layouts are one pointer */
  /* by value id (IrFunction.next_value_id entries): */
  bool *is_virtual;           /* constants, splats, aranges (and broadcasts etc. of them):
                                 computed where used, in whatever layout the use needs */
  /* by op: FaDotPlan for IR_DOT (op->aux), the op layout for stores (op->aux) */
} FaLayoutPlan;

/* Interns a layout in the plan (arena copy); returns the canonical pointer. */
const FaLayout *fa_layout_intern(FaCompiler *fc, FaLayoutPlan *plan, const FaLayout *l);

/* The default layout of a block of the given type: blocked, last dimension
 * fastest, 16-byte vectors. */
const FaLayout *fa_layout_default(FaCompiler *fc, FaLayoutPlan *plan, IrType t);

/* Assigns IrValue.layout to every non-virtual block value of the kernel's
 * device function (region arguments included), an FaDotPlan to every IR_DOT
 * (op->aux) and an execution layout to every IR_STORE / IR_STORE_BLOCK /
 * IR_ATOMIC_ADD_BLOCK / IR_ATOMIC_ADD (op->aux, const FaLayout *).  Returns false after reporting
 * errors (for shapes no layout fits). */
bool fa_assign_layouts(FaCompiler *fc, const IrKernel *k, FaLayoutPlan *plan);

/* The layout in which operand `i` of `op` must be given, for an op executing
 * in `op_layout` (its result's layout, or its op->aux layout); NULL when the
 * operand is a scalar or a block pointer, or when the op takes it in
 * whatever layout it has (reduce, load/store of block pointers' values). */
const FaLayout *fa_layout_operand_need(FaCompiler *fc, FaLayoutPlan *plan, const IrOp *op, int i);

/* The make_block_ptr that a block-pointer value comes from (through advance,
 * loop-carried values and if results), or NULL when that cannot be told. */
const IrOp *fa_blockptr_origin(const IrValue *v);

/* True for values computed where they are used (see FaLayoutPlan.is_virtual). */
bool fa_value_is_virtual(const FaLayoutPlan *plan, const IrValue *v);

void fa_layout_plan_free(FaLayoutPlan *plan);

#endif
