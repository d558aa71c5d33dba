/* cuda_plan.h - the CUDA backend's decisions about one specialised kernel,
 * as data: the plan.
 *
 * fa_cuda_plan() (cuda_plan.c) looks at a kernel's tile IR, assigns layouts
 * (layout.c) and decides how every part of it becomes GPU code.
 * fa_emit_cuda_plan() (emit_cuda.c) prints CUDA C++ from the plan and
 * decides nothing of its own; fa_cuda_plan_print() writes the plan as text
 * (`fadslc --emit=plan`), one decision per line naming the source location
 * of its op, so that test cases (tests/plan/) can pin decisions on a
 * machine without a GPU.
 *
 * A plan holds:
 *   facts      what is known of the runtime arguments (the alignment of
 *              pointers, divisors of integers: the specialisation), and
 *              the power-of-two divisor of every integer scalar derived
 *              from them (FaValuePlan.div_log2);
 *   values     liveness, the layout conversions each value needs, and its
 *              shared-memory copy (tile), if any;
 *   tiles      shared-memory copies of tensor-core operands: format (padded
 *              rows or a 32/64/128-byte swizzle), offset, buffers, how they
 *              are filled (written from registers, or loaded by cp.async);
 *   accesses   every load and store: method (one element per pointer,
 *              vectors of a block pointer, cp.async into a tile, reduce-
 *              stores through a block pointer, bulk tensor copies in and
 *              out of tiles) and vector width, with the divisibility facts
 *              that allowed the width;
 *   pipelines  loops whose block-pointer loads are issued ahead: depth, and
 *              the synchronisation steps in order (where each wait sits);
 *   products   every dot: instruction (wgmma, mma.sync, FMA), operand
 *              sources (registers, tiles), warp split, fused additions;
 *   reductions the slice layout of each result and its scratch space (with
 *              a combine function: the axis's bits as steps);
 *   scans      the axis's bits as steps, and the scratch across warps;
 *   prints     device_print: the layout read, which threads print;
 *   smem       the shared-memory budget: tiles, library scratch, alignment;
 *   roles      which warps do what and their register budgets;
 *   barriers   the barriers the kernel uses and what for;
 *   schedule   how programs map onto thread blocks.
 *
 * How the Hopper pipeline extends it (new enum values and fields, no new
 * structure): a TMA load is an FaAccessPlan of method FA_ACCESS_TMA filling
 * a tile of fill FA_FILL_TMA, whose box and swizzle become a
 * CUDA_ARG_TENSOR_MAP argument (cuda_backend.h); a producer warp is a second
 * FaWarpRole (FA_ROLE_PRODUCER, with max_registers for setmaxnreg) and the
 * consumer warpgroups FA_ROLE_COMPUTE roles with theirs; the ring of
 * `stages` buffers with full/empty mbarriers is an FaPipelinePlan whose sync
 * is an mbarrier kind, whose steps are mbarrier arrive/wait steps, and whose
 * barriers are FaBarrierPlan entries (their bytes in FaSmemPlan); an
 * asynchronous wgmma waited for late is an FaProductPlan whose `wait` names
 * where; persistent scheduling is an FaSchedulePlan kind.
 */
#ifndef FADSL_CUDA_PLAN_H
#define FADSL_CUDA_PLAN_H

#include <stdbool.h>
#include <stddef.h>

#include "cuda_backend.h"
#include "layout.h"

/* ---- layout conversions ------------------------------------------------------------------ */

typedef struct FaConversionPlan {
  const FaLayout *from, *to;
  bool in_registers;        /* same threads, other registers (fa::regmap); else through shared memory */
  size_t scratch;           /* bytes of scratch for the round trip (0 in registers) */
} FaConversionPlan;

/* ---- tiles ------------------------------------------------------------------------------------ */

typedef enum FaTileFormat {
  FA_TILE_PADDED,           /* rows padded by 16 bytes (fa::PadTile), read with ldmatrix */
  FA_TILE_SWIZZLED,         /* 16-byte chunks XOR-swizzled within 32/64/128-byte rows (fa::SwzTile),
                               the layouts wgmma's shared-memory descriptors read */
  FA_TILE_DENSE,            /* a vector, its elements in order without padding or swizzle: loaded by
                               the copy engine with a loop's ring, read into registers where its load
                               stands (a ring vector, cuda_plan.c 5d) */
} FaTileFormat;

typedef enum FaTileFill {
  FA_FILL_REGISTERS,        /* written from the value's registers after its definition (fa::stage) */
  FA_FILL_CP_ASYNC,         /* loaded from global memory by cp.async, iterations ahead (a pipeline) */
  FA_FILL_TMA,              /* loaded by the bulk copy engine (its access's FaTmaPlan), in a pipeline
                               or once */
  FA_FILL_STAGED,           /* a staging tile: the value of a block-pointer store (or atomic_add)
                               written from registers, then read by the bulk copy engine, which
                               writes (adds) it to global memory (FA_ACCESS_TMA_STORE) */
} FaTileFill;

typedef struct FaTilePlan {
  int id;                   /* index in FaCudaPlan.tiles */
  const IrValue *value;     /* the value copied */
  int inner;                /* the dimension stored contiguously */
  int rows;                 /* rows (the other dimension) */
  int pitch;                /* bytes per row (swizzled: the row's bytes) */
  FaTileFormat format;
  int swizzle;              /* FA_TILE_SWIZZLED: the swizzle width in bytes (32, 64, 128) */
  int store_vec;            /* FA_FILL_REGISTERS: elements per shared-memory store */
  FaTileFill fill;
  struct FaPipelinePlan *pipeline; /* FA_FILL_CP_ASYNC, FA_FILL_TMA in a loop: the pipeline filling it */
  struct FaAccessPlan *load;       /* FA_FILL_CP_ASYNC, FA_FILL_TMA: the load; FA_FILL_STAGED: the store */
  size_t buf_bytes;         /* one buffer: rows * pitch */
  int nbufs;                /* buffers: the pipeline's stages, else 1 */
  size_t offset;            /* bytes from the start of the dynamic shared memory (tiles first) */
  int live_start, live_end; /* lifetime: positions of ops in pre-order; tiles whose lifetimes do
                               not overlap share memory */
  const struct FaTilePlan *alias; /* the same memory as this earlier tile (a ring two loops share) */
  bool drains;              /* it shares memory with a staging tile (FA_FILL_STAGED) that the copy engine
                               may still be reading: before the tile is written, the issuing thread
                               waits until every bulk store has read its staging tile (a staging
                               tile always does, before it is written) */
} FaTilePlan;

/* ---- loads and stores --------------------------------------------------------------------- */

typedef enum FaAccessMethod {
  FA_ACCESS_ELEMENT,        /* pointer tensors: each element through its own pointer */
  FA_ACCESS_VECTOR,         /* block pointer: `vec` contiguous elements per access (1: scalar) */
  FA_ACCESS_CP_ASYNC,       /* block pointer loaded straight into a tile by cp.async (pipelined) */
  FA_ACCESS_ATOMIC,         /* atomic_add: one thread per element (or one thread for a scalar) */
  FA_ACCESS_REDUCE,         /* atomic_add through a block pointer: a reduce-store, `vec` contiguous
                               elements per red.global.add (see FaReduceInstr), one owner per element */
  FA_ACCESS_TMA,            /* block pointer loaded into a tile by bulk tensor copies (FaTmaPlan) */
  FA_ACCESS_TMA_STORE,      /* store (or atomic_add) through a block pointer by bulk tensor copies: the
                               value written into a staging tile (`tile`), then one thread issues
                               cp.async.bulk.tensor (store) or cp.reduce.async.bulk.tensor .add
                               (atomic_add) per panel (FaTmaPlan) and commits them as a bulk group */
} FaAccessMethod;

/* The instruction of an FA_ACCESS_REDUCE access. */
typedef enum FaReduceInstr {
  FA_RED_SCALAR,            /* red.global.add.<type>: one element per instruction */
  FA_RED_VECTOR,            /* red.global.add.v2/.v4.f32 (sm_90): `vec` elements per instruction */
  FA_RED_CAS,               /* bf16 below sm_90 (no red.add.bf16): a compare-and-swap loop per element */
} FaReduceInstr;

/* What limits the vector width of a block-pointer access (the first that
 * binds, in this order). */
typedef enum FaVecLimit {
  FA_VEC_NO_ORIGIN,         /* the block pointer's make_block_ptr cannot be told */
  FA_VEC_NO_UNIT_STRIDE,    /* no dimension has the constant stride 1 */
  FA_VEC_LAYOUT,            /* the thread's registers in a row along that dimension */
  FA_VEC_16_BYTES,          /* the widest access, 16 bytes */
  FA_VEC_BASE,              /* the base pointer's known alignment */
  FA_VEC_STRIDE,            /* another dimension's stride */
  FA_VEC_OFFSET,            /* the offsets along the contiguous dimension (advances included) */
  FA_VEC_BOUND,             /* the checked bound along the contiguous dimension */
  FA_VEC_4_BYTES,           /* vectors narrower than 4 bytes are not used */
  FA_VEC_REDUCE_INSTR,      /* a reduce-store: the target's red.global.add has no vector of this dtype
                               (vectors: f32 on sm_90 and later) */
} FaVecLimit;

/* The facts behind a vector width, as log2 of elements (FA_DIV_UNKNOWN: no
 * fact needed). */
enum { FA_DIV_MAX = 30, FA_DIV_UNKNOWN = -1 };

typedef struct FaVecFacts {
  int dim;                  /* the dimension of stride 1, or -1 */
  int layout_log2, bytes_log2, base_log2, stride_log2, offset_log2, bound_log2;
  const IrValue *stride;    /* the binding stride (FA_VEC_STRIDE), bound (FA_VEC_BOUND) or base */
  FaVecLimit limit;         /* what bound the width */
} FaVecFacts;

/* ---- bulk tensor copies (TMA) ------------------------------------------------------------
 * A block-pointer load whose value only feeds products through a swizzled
 * tile can be copied by the copy engine, box by box, when its view is the
 * pointer parameter's declared extent seen through block coordinates: each
 * dimension of the block pointer has the shape and stride of one dimension
 * of the extent (row-major), the dimension of stride 1 among them, and the
 * base is the parameter plus whole coordinates along the other dimensions
 * (proved by matching the offset's terms against the extent's strides, as
 * polynomials over the parameters and the kernel's scalars).  Then the
 * tensor's edges are the view's, and the copy engine's out-of-bounds fill
 * (zero, or NaN) is exactly the padding the load asks for.
 *
 * A block-pointer store or atomic_add whose view passes the same proof is
 * written by the copy engine too (FA_ACCESS_TMA_STORE): the value goes from
 * registers into a staging tile laid out as the map's box and swizzle want
 * (FA_FILL_STAGED), every writer fences it for the async proxy, the compute
 * warps pass a barrier, and one thread issues a store (or, atomic_add of
 * f32 / f16 / bf16, a reduce-add) per panel and commits them as one bulk
 * group.  The copy engine drops what falls outside the tensor, which is
 * exactly the store's boundary check, as the tensor's edges are the view's.
 * Before the staging tile (or a tile sharing its memory, FaTilePlan.drains)
 * is written again, the issuing thread waits until the copy engine has read
 * it (cp.async.bulk.wait_group.read 0) and the writers pass a barrier; the
 * block waits for the stores' completion before it exits. */

/* A sum of terms coef * atom * atom ...; an atom is parameter `a` (a < FA_SYM_VALUE)
 * or the device function's scalar value a - FA_SYM_VALUE. */
enum { FA_SYM_MAX_ATOMS = 6, FA_SYM_MAX_TERMS = 8, FA_SYM_VALUE = 1 << 20 };
typedef struct FaSymTerm {
  long long coef;
  int natoms;
  int atoms[FA_SYM_MAX_ATOMS]; /* sorted */
} FaSymTerm;
typedef struct FaSymPoly {
  int nterms;
  FaSymTerm terms[FA_SYM_MAX_TERMS];
} FaSymPoly;

/* Why a load that could be copied by TMA is not (FA_TMA_OK: it is). */
typedef enum FaTmaRefusal {
  FA_TMA_OK,
  FA_TMA_NOT_CHOSEN,        /* the launch configuration's pipeline is cp_async */
  FA_TMA_TARGET,            /* not sm_90a (the tiles are not swizzled) */
  FA_TMA_NOT_TILE,          /* the value is used other than as a product's swizzled tile */
  FA_TMA_IN_LOOP,           /* in a loop, but not a load the loop's pipeline issues ahead */
  FA_TMA_NO_ORIGIN,         /* its make_block_ptr cannot be told */
  FA_TMA_NO_PARAM,          /* the base is not a pointer parameter plus an offset */
  FA_TMA_NO_EXTENT,         /* the parameter declares no extent in terms of the parameters */
  FA_TMA_SHAPE,             /* a dimension's shape and stride are not those of a dimension of the extent */
  FA_TMA_INNER,             /* the extent's innermost dimension is not the tile's contiguous one */
  FA_TMA_OFFSET,            /* the base offset is not whole coordinates along the extent's other dimensions */
  FA_TMA_SCOPE,             /* a coordinate uses a value the copy's issuer cannot see */
  FA_TMA_STRIDE_ALIGN,      /* a stride of the extent may not be a multiple of 16 bytes */
  FA_TMA_BASE_ALIGN,        /* the parameter may not be 16-byte aligned */
  FA_TMA_BOX,               /* a box dimension above 256 elements */
  FA_TMA_PIPELINE,          /* another load of its pipeline cannot be a bulk copy */
  FA_TMA_LIMIT,             /* too many tensor maps or barriers */
  FA_TMA_RANK,              /* stores: not a 2-D block */
  FA_TMA_REDUCE_DTYPE,      /* atomic_add: the copy engine's reduce-add is used for f32, f16 and bf16 only */
  FA_TMA_STAGING,           /* stores: no swizzled staging tile for it (rows of 32, 64 or a multiple of 128
                               bytes in groups of 8 rows; elements of a dtype tensor maps have, of 2 bytes
                               or more) */
  FA_TMA_SMEM,              /* stores: the staging tile would not fit in shared memory */
  FA_TMA_NEGATIVE,          /* stores: a block offset may be negative (the copy engine faults on a bulk store
                               at negative coordinates: CUDA_ERROR_ILLEGAL_INSTRUCTION on an H200, where
                               loads there are padded) */
  FA_TMA_ALIASED,           /* stores: another op of the kernel loads or stores through the same pointer
                               parameter (or one that cannot be told), and the bulk store's writes would
                               land in no order with it (atomic_adds among themselves excepted: they
                               commute) */
} FaTmaRefusal;

/* A tensor-map argument of the kernel (fa_tmapN): built at launch from a
 * pointer parameter's declared extent (FaCudaArg of kind CUDA_ARG_TENSOR_MAP). */
typedef struct FaTensorMapPlan {
  int id;
  int param;                /* the pointer parameter */
  int rank;                 /* dimensions of the map, outermost first below */
  int dims_end[FA_MAX_RANK];/* map dimension i covers extent dimensions dims_end[i-1] .. dims_end[i]-1 */
  int box[FA_MAX_RANK];     /* elements per copy along each */
  int swizzle;              /* bytes: 32, 64, 128 (the tile's) */
  bool nan_fill;            /* padding="nan": out-of-bounds elements read as NaN; else zero */
  bool store;               /* written by bulk stores or reduce-adds (its box is the staging tile's panel),
                               never shared with a map loads use */
} FaTensorMapPlan;

typedef struct FaTmaPlan {
  FaTensorMapPlan *map;
  int block_dim[FA_MAX_RANK]; /* per map dimension: the block pointer's dimension whose offset is its
                                 coordinate, or -1: the outer dimension */
  int outer;                /* the map dimension whose coordinate comes from the base, or -1 */
  FaSymPoly outer_coord;    /* that coordinate (atoms: parameters and scalars of the kernel) */
  int inner_dim;            /* the block dimension of stride 1 (the tile's contiguous one) */
  int panels;               /* copies per tile: one per swizzle width of its rows */
  int panel_elems;          /* elements of a row per copy */
  size_t panel_bytes;       /* bytes per copy: rows * swizzle width */
  size_t bytes;             /* per tile: panels * panel_bytes */
  int barrier;              /* a load outside loops: its mbarrier (index into FaCudaPlan.barriers) */
  const IrOp *wait_before;  /* a load outside loops: the threads wait for it before this op (a loop with a
                               software pipeline: after the copies of its prologue, so that the first
                               of those are in flight with this one) */
  const IrOp *wait_after;   /* where wait_before lies in a loop below the load's own statements: the
                               statement holding that loop, after which the threads wait again (at once
                               where the loop ran), so that no copy is in flight when the loop ran no
                               iteration and the tile's memory is used again or the block exits */
  bool reduce;              /* FA_ACCESS_TMA_STORE of an atomic_add: cp.reduce.async.bulk.tensor .add */
  int drain_pending;        /* FA_ACCESS_TMA_STORE: before the staging tile is written, the issuing thread
                               waits until every bulk group but the newest `drain_pending` has read its
                               staging tile (the groups of the stores since the last one whose tile
                               shares this one's memory: they complete in commit order) */
  bool drain_writes;        /* FA_ACCESS_TMA_STORE: that wait is for the groups' writes too, not only their
                               reads (a store in a loop: the previous iteration's may write the same
                               elements, and bulk groups' writes land in no order among themselves) */
  const struct FaTilePlan *drain_with; /* FA_ACCESS_TMA_STORE: the drain and the barrier before the
                               staging tile is written are those of this register-filled tile's
                               stage, earlier in the same region with nothing in between that
                               writes shared memory or commits bulk stores (NULL: its own) */
} FaTmaPlan;

typedef struct FaAccessPlan {
  const IrOp *op;           /* IR_LOAD, IR_STORE, IR_ATOMIC_ADD, IR_LOAD_BLOCK, IR_STORE_BLOCK,
                               IR_ATOMIC_ADD_BLOCK */
  FaAccessMethod method;
  int vec;                  /* elements per access */
  const FaLayout *layout;   /* the layout it runs in */
  FaVecFacts facts;         /* block pointers */
  FaTilePlan *tile;         /* FA_ACCESS_CP_ASYNC, FA_ACCESS_TMA: the tile it fills; FA_ACCESS_TMA_STORE:
                               its staging tile */
  struct FaPipelinePlan *pipeline;
  int carried;              /* FA_ACCESS_CP_ASYNC, FA_ACCESS_TMA in a pipeline: the block pointer is
                               argument `carried` of the loop body, updated by `advance`
                               (loop-invariant steps) each iteration */
  const IrOp *advance;
  size_t scratch;           /* bytes of scratch (an atomic_add on a scalar whose result is used) */
  FaReduceInstr red;        /* FA_ACCESS_REDUCE: the instruction */
  FaTmaPlan *tma;           /* FA_ACCESS_TMA, FA_ACCESS_TMA_STORE */
  FaTmaRefusal tma_refusal; /* a load into a swizzled tile, or (pipeline tma and later, sm_90a) a
                               block-pointer store or atomic_add, that is not a bulk copy: why */
  int tma_refusal_dim;      /* the dimension the refusal is about, or -1 */
} FaAccessPlan;

/* ---- pipelines ----------------------------------------------------------------------------- */

typedef enum FaPipeSync {
  FA_SYNC_CP_ASYNC_GROUPS,  /* cp.async commit groups waited with cp.async.wait_group, and CTA barriers */
  FA_SYNC_MBARRIER,         /* bulk tensor copies on a ring of full/empty mbarriers (fa_hopper.cuh) */
} FaPipeSync;

/* One step of a pipeline's synchronisation, in the order the code runs it. */
typedef enum FaPipeStepKind {
  FA_STEP_BARRIER,          /* a CTA barrier (__syncthreads); `why` says what it separates */
  FA_STEP_ISSUE,            /* issue the loads of iteration `arg` ahead (skipped past the loop's end);
                               mbarrier rings: arm full[] with the bytes, then the copies */
  FA_STEP_COMMIT,           /* close the cp.async group of what was just issued */
  FA_STEP_WAIT_GROUPS,      /* wait until at most `arg` groups are in flight */
  FA_STEP_PROXY_FENCE,      /* make the generic proxy's writes visible to the async proxy (wgmma) */
  FA_STEP_WAIT_EMPTY,       /* wait until the buffer of iteration `arg` ahead is released (empty[]) */
  FA_STEP_WAIT_FULL,        /* wait until this iteration's copies have landed (full[]) */
  FA_STEP_RELEASE,          /* this iteration's buffers are read: arrive on empty[] */
  FA_STEP_DRAIN_STORES,     /* the issuing thread waits until the bulk stores have read their staging
                               tiles (a buffer shares their memory, FaTilePlan.drains) */
} FaPipeStepKind;

typedef enum FaStepWhy {
  FA_WHY_NONE,
  FA_WHY_BUFFERS_REUSED,    /* before the prologue: the buffers may have held other tiles */
  FA_WHY_BUFFER_FREE,       /* every warp is done with the buffer refilled now */
  FA_WHY_LANDED,            /* this iteration's tiles are complete and visible to every warp */
} FaStepWhy;

/* Who runs a step. */
typedef enum FaStepBy {
  FA_BY_ALL,                /* every thread that computes */
  FA_BY_ISSUER,             /* one thread (thread 0) */
  FA_BY_WARP,               /* one lane of each warp that computes, after the warp's other lanes */
  FA_BY_PRODUCER,           /* the producer warp's issuing thread (warp specialisation) */
} FaStepBy;

typedef struct FaPipeStep {
  FaPipeStepKind kind;
  int arg;
  FaStepWhy why;
  FaStepBy by;
} FaPipeStep;

enum { FA_PIPE_MAX_STEPS = 24, FA_PIPE_MAX_STAGES = 8 };

/* Split rings (with a producer warp): each load of a ring has mbarriers of
 * its own, full and empty (load j's buffer of stage s is slot
 * j * stages + s of the ring's two barriers), so that a tile read early in
 * an iteration (K for S = Q K^T) is released as soon as its readers are
 * done and the producer refills it while the rest of the iteration runs,
 * instead of when the last tile of the iteration is done with. */
typedef enum FaRingRelease {
  FA_RELEASE_TAIL,          /* at the end of the iteration */
  FA_RELEASE_BEFORE,        /* before op `release_before` of the body, after the wgmma wait there */
  FA_RELEASE_DEFERRED,      /* after the deferred product's wait, in the next iteration */
} FaRingRelease;

typedef struct FaRingLoad {
  bool next_head;           /* read by the deferred product only: waited for at the head of the next
                               iteration (and before the last deferred product after the loop) */
  FaRingRelease release;
  const IrOp *release_before;
} FaRingLoad;

typedef struct FaPipelinePlan {
  int id;
  const IrOp *loop;         /* the IR_FOR */
  int stages;               /* buffers in each tile's ring */
  int ahead;                /* iterations issued ahead: stages - 1 */
  FaPipeSync sync;
  FaAccessPlan **loads;     /* in the loop body's order */
  int nloads;
  /* before the loop, at the head of each iteration, at its end (after the
     last read of its buffers), after the loop */
  FaPipeStep prologue[FA_PIPE_MAX_STEPS], head[FA_PIPE_MAX_STEPS], tail[FA_PIPE_MAX_STEPS],
      epilogue[FA_PIPE_MAX_STEPS];
  int nprologue, nhead, ntail, nepilogue;
  /* warp specialisation: what the producer does in each iteration of its
     copy of the loop (it runs ahead as far as the empty barriers let it) */
  FaPipeStep producer[FA_PIPE_MAX_STEPS];
  int nproducer;
  const struct FaPipelinePlan *shares; /* its ring (barriers, counter, buffers) is this earlier one's */
  /* pipeline tma_ws_pp: the loop's first product (S = Q K^T), issued for
     iteration it + 1 at the head of iteration it, so that it runs while the
     rest of iteration it (the softmax) does; the first one before the loop */
  struct FaProductPlan *rotated;
  const char *no_rotation;  /* why not, when tma_ws_pp asked for it and the loop has a first product */
  /* pipeline tma_ws_pp: the loop's last product (O += P V in attention),
     deferred to the next iteration: there it is issued right after the
     loop's first product (`defer_after`, S = Q K^T), in its turn, and
     waited for before `defer_wait_before`, the first op that reads the
     carried accumulator (O * alpha); the last one after the loop.  So the
     tensor cores run P V while the warps do the next block's softmax
     (FlashAttention-3's intra-warpgroup overlap, without a second
     accumulator).  Its A fragments are packed where it stands and kept
     until the wait; its ring buffer is released after the wait, one
     iteration late. */
  struct FaProductPlan *deferred;
  struct FaProductPlan *defer_after;
  const IrOp *defer_wait_before;
  int defer_carried;        /* the loop-carried value it accumulates into */
  /* the op that commits defer_after; and, where the first read of the
     carried accumulator is an online softmax's rescale that only the
     deferred product reads (rescale_moves_to_head), that rescale: then the
     product's wait, the release of its ring buffer, the packing of the next
     one's A fragments (its operand kept in registers across the back edge)
     and the rescale (its factors kept likewise) stand at the head of the
     next iteration, before defer_head, and defer_wait_before is NULL */
  const IrOp *defer_head;
  const IrOp *defer_rescale;
  const char *no_deferral;  /* why not, when tma_ws_pp asked for it */
  int acc_registers;        /* estimated registers per compute thread that the loop's products hold
                               (accumulators, register A operands) with the rotation's second
                               accumulator (FA_ROTATION_REGISTERS at most) */
  /* FA_SYNC_MBARRIER: the barriers (indices into FaCudaPlan.barriers, `stages`
     mbarriers each), the bytes one iteration's copies bring; uses of the
     ring are counted over the whole kernel (one counter per ring), so
     that a loop run several times continues the phases */
  int full, empty;
  int ring;                 /* its use counter (fa_ringN) */
  size_t tx_bytes;
  FaRingLoad *split;        /* per load (FaRingLoad), or NULL: one full and one empty barrier a stage for all */
  const char *no_split;     /* why not, with a producer warp and more than one load */
  FaTmaRefusal tma_refusal; /* why the loads stay cp.async (FA_TMA_OK: they do not) */
  const FaAccessPlan *refused; /* the load that decided it */
} FaPipelinePlan;

/* The most registers a compute thread may hold for a loop's products
   (estimated as FaPipelinePlan.acc_registers) for the rotation (tma_ws_pp) */
#define FA_ROTATION_REGISTERS 184

/* ---- products ------------------------------------------------------------------------------- */

typedef enum FaProductInstr {
  FA_INSTR_WGMMA,           /* warpgroup wgmma.mma_async m64nNk16 (sm_90a), B through a descriptor */
  FA_INSTR_MMA_SYNC,        /* warp mma.sync m16n8k16, tiles read with ldmatrix */
  FA_INSTR_FMA,             /* CUDA cores, operands through shared memory */
} FaProductInstr;

typedef enum FaOperandSource {
  FA_OPND_REGISTERS,        /* registers in the operand's fragment (or, for FMA, register) layout */
  FA_OPND_REGISTERS_F32,    /* f32 registers rounded to the input type as they are packed (x.to(T)) */
  FA_OPND_TILE,             /* a shared-memory tile */
} FaOperandSource;

typedef enum FaProductWait {
  FA_WAIT_AT_ONCE,          /* wgmma: committed and waited for at the end of the product */
  FA_WAIT_LATE,             /* wgmma: committed, and waited for at FaProductPlan.wait_at (wgmma.wait_group
                               with that point's pending count), as late as the data allow */
} FaProductWait;

/* Where asynchronous warpgroup products are waited for: before an op of a
 * region (the first that reads one of their accumulators, or that writes a
 * tile, or holds regions of its own), or at the region's end (before its
 * yield: the loop's back edge, the end of an if's branch).  wgmma groups
 * complete in the order they were committed, so `pending` (the products
 * committed after the newest one waited for, which may stay in flight) is
 * what wgmma.wait_group is given. */
typedef struct FaWgmmaWait {
  const IrOp *before;       /* or NULL: at the end of `region` */
  const IrRegion *region;
  int pending;
  struct FaProductPlan **products; /* the products complete after it (their accumulators fenced) */
  int nproducts;
} FaWgmmaWait;

typedef struct FaProductPlan {
  const IrOp *dot;
  FaProductInstr instr;
  DType in, acc;            /* operand and accumulator dtypes */
  int M, N, K;
  int mt, nt, kt, wm, wn;   /* tensor cores, per warp: 16-row blocks, n8 blocks, k16 steps;
                               warps along M and N */
  int wg_n;                 /* wgmma: warpgroups along N, each issuing m64n(N / wg_n) on its own
                               columns of the same 64 rows (1: the warpgroups split M) */
  FaOperandSource a_src, b_src;
  const IrValue *a_regs;    /* registers read for A (the cast's f32 source for FA_OPND_REGISTERS_F32) */
  FaTilePlan *a_tile, *b_tile;
  bool a_k_inner, b_k_inner;/* the tile runs along K (K-major) */
  bool a_flip, b_flip;      /* the operand is the transpose of the tile's value */
  FaProductWait wait;
  FaWgmmaWait *wait_at;     /* FA_WAIT_LATE */
  bool takes_turn;          /* ping-pong: issued in its consumer warpgroup's turn (named barriers) */
  bool rotated;             /* the first product of a ring loop, issued one iteration ahead (see
                               FaPipelinePlan.rotated) */
  bool deferred;            /* the last product of a ring loop, issued in the next iteration (see
                               FaPipelinePlan.deferred) */
  const char *why_at_once;  /* FA_WAIT_AT_ONCE under a pipeline with late waits: why this one is not */
  const char *why_not_wgmma;/* mma.sync on a target with wgmma: what stands in the way */
  const IrOp *fused_add;    /* r = addend + dot(...) computed as one product accumulating onto addend */
  int addend;               /* the add's operand that is not the product */
  const FaLayout *la, *lb;  /* FMA: the operands' register layouts */
  bool tf32;                /* FMA of f32 with precision tf32: operands rounded first */
  size_t scratch;           /* FMA: bytes of scratch */
} FaProductPlan;

/* ---- reductions ---------------------------------------------------------------------------- */

/* The bits of a block's flat element index that an axis spans, lowest
 * first, each named by the bit of the register index, lane or warp that
 * selects it: the steps of fa::scan and fa::combine_all (fa_tile.cuh). */
typedef enum FaAxisBitKind { FA_AXIS_REGISTER, FA_AXIS_LANE, FA_AXIS_WARP } FaAxisBitKind;

typedef struct FaAxisBit {
  FaAxisBitKind kind;
  int bit;                  /* of the register index, lane or warp */
} FaAxisBit;

typedef struct FaAxisSteps {
  FaAxisBit bits[FA_LAYOUT_MAX_BITS];
  int nbits;
  bool across_warps;        /* some bit is a warp bit: totals exchanged through shared memory */
} FaAxisSteps;

enum { FA_COMBINE_MAX_VALUES = 8 }; /* blocks scanned or reduced together with one combine function */

typedef struct FaReducePlan {
  const IrOp *op;           /* IR_REDUCE, or IR_REDUCE_FN (a combine function) */
  const FaLayout *src;      /* the operands' layout */
  const FaLayout *slice;    /* where the results come out (NULL for scalars) */
  unsigned lane_mask, warp_mask; /* lane / warp bits combined (shuffles; across warps: shared memory) */
  size_t scratch;           /* across warps: bytes */
  int nresults;
  FaConversionPlan to_result[FA_COMBINE_MAX_VALUES]; /* per result: slice -> its layout (from == to: none) */
  /* IR_REDUCE_FN: every element combined with its whole row (fa::combine_all
     over `steps`, in index order), on structs of one element of each operand
     (elem_bytes each), then the axis's registers dropped */
  FaAxisSteps steps;
  size_t elem_bytes;
} FaReducePlan;

/* ---- scans ----------------------------------------------------------------------------------- */

typedef struct FaScanPlan {
  const IrOp *op;           /* IR_SCAN */
  const FaLayout *layout;   /* of the operands and the results: the scan runs in any */
  bool reverse;
  FaAxisSteps steps;        /* fa::scan's steps along the axis */
  size_t elem_bytes;        /* the struct of one element of each scanned value */
  size_t scratch;           /* across warps: warps * 32 * registers * elem_bytes */
} FaScanPlan;

/* ---- device_print ------------------------------------------------------------------------------ */

typedef struct FaPrintPlan {
  const IrOp *op;           /* IR_PRINT */
  const FaLayout *layout;   /* the layout its blocks are read in (NULL: scalars only, from thread 0) */
  bool owners_only;         /* the layout has copies in several threads: only each element's owner prints */
} FaPrintPlan;

/* ---- the kernel as a whole ------------------------------------------------------------- */

typedef struct FaSmemPlan {
  size_t tiles;             /* bytes of tiles, from offset 0 */
  size_t barriers;          /* bytes of mbarriers, from offset `tiles` (8 each) */
  size_t scratch;           /* library scratch above the tiles and mbarriers (the largest need of any op) */
  size_t tile_align;        /* tiles start at multiples of it (1024: the 128-byte swizzle's period) */
  size_t align_pad;         /* bytes the launch adds so the buffer can be moved to that boundary */
  size_t total;             /* dynamic shared memory requested at launch */
} FaSmemPlan;

typedef enum FaWarpRoleKind {
  FA_ROLE_COMPUTE,          /* loads, computes and stores */
  FA_ROLE_PRODUCER,         /* a warpgroup of which one thread runs the producer's slice of the
                               kernel and issues the bulk copies; the others exit */
} FaWarpRoleKind;

typedef struct FaWarpRole {
  FaWarpRoleKind kind;
  int first_warp, nwarps;
  int max_registers;        /* per thread (setmaxnreg); 0: left to the compiler and __launch_bounds__ */
} FaWarpRole;

typedef enum FaBarrierKind {
  FA_BARRIER_CTA,           /* __syncthreads (named barrier 0, every thread) */
  FA_BARRIER_NAMED,         /* bar.sync / bar.arrive `id` over `threads` (warp specialisation: the
                               compute threads' barrier; ping-pong: each consumer warpgroup's turn) */
  FA_BARRIER_MBARRIER,      /* `slots` mbarriers in shared memory at `offset`, `arrivals` each */
} FaBarrierKind;

/* What an mbarrier is for. */
typedef enum FaMbarrierUse {
  FA_MBAR_FULL,             /* a ring's buffers have landed (armed with the bytes by the issuer) */
  FA_MBAR_EMPTY,            /* a ring's buffers are read (each compute warp arrives) */
  FA_MBAR_LOAD,             /* one bulk copy outside loops has landed */
  FA_MBAR_TILE,             /* persistent, with a producer warp: the compute threads are done with
                               a tile's loads outside loops */
  FA_MBAR_NEXT_FULL,        /* dynamic persistent, with a producer warp: the next program's id is in
                               its slot (the producer arrives) */
  FA_MBAR_NEXT_EMPTY,       /* ... each compute warp has read it */
} FaMbarrierUse;

/* What a barrier is used for (bits of FaBarrierPlan.uses). */
enum {
  FA_BARRIER_FOR_TILES = 1,     /* writing tiles from registers */
  FA_BARRIER_FOR_PIPELINE = 2,  /* pipeline buffers */
  FA_BARRIER_FOR_SCRATCH = 4,   /* library scratch (conversions, reductions and scans across warps, FMA,
                                   atomics) */
  FA_BARRIER_FOR_TURNS = 8,     /* ping-pong: warpgroup `warpgroup`'s turn to issue its products */
  FA_BARRIER_FOR_TILE_END = 16, /* persistent: the end of a program, its shared memory free for the next */
  FA_BARRIER_FOR_STORES = 32,   /* bulk stores: their staging tiles written and free again */
  FA_BARRIER_FOR_NEXT = 64,     /* dynamic persistent: the next program's id read from its slot */
};

typedef struct FaBarrierPlan {
  FaBarrierKind kind;
  int id;                   /* the hardware barrier */
  int threads;              /* threads taking part */
  unsigned uses;
  /* FA_BARRIER_MBARRIER */
  FaMbarrierUse mbar;
  int slots;                /* consecutive mbarriers (a ring's stages) */
  int arrivals;             /* arrivals that complete a phase */
  size_t offset;            /* bytes from the start of the dynamic shared memory */
  const struct FaPipelinePlan *pipeline; /* FA_MBAR_FULL / FA_MBAR_EMPTY */
  const struct FaAccessPlan *load;       /* FA_MBAR_LOAD */
  int warpgroup;            /* FA_BARRIER_FOR_TURNS */
} FaBarrierPlan;

enum { FA_MAX_BARRIERS = 24, FA_MAX_TENSOR_MAPS = 16 };

/* The most dynamic shared memory a thread block may have on sm_90 (H100,
 * H200): a staging tile that would take the kernel past it is refused. */
enum { FA_SMEM_MAX_SM90 = 227 * 1024 };
/* What a multiprocessor of sm_90 has in all, and what it keeps of it for
 * each resident thread block: blocks of S bytes of dynamic shared memory
 * that fit one SM number FA_SMEM_SM_SM90 / (S + FA_SMEM_BLOCK_RESERVED). */
enum { FA_SMEM_SM_SM90 = 228 * 1024, FA_SMEM_BLOCK_RESERVED = 1024 };

/* Persistent kernels: the order in which a thread block's loop visits the
 * programs (tiles).  Thread block b runs programs b, b + G, b + 2G, ... of
 * the order (G thread blocks), so the programs running at one time are
 * neighbours in it. */
typedef enum FaTileOrder {
  FA_ORDER_LINEAR,          /* program_id(0) fastest, then (1), then (2), as the hardware dispatches a
                               grid: neighbouring programs share their operands (a head's K and V)
                               in L2 */
  FA_ORDER_LONGEST_FIRST,   /* the programs whose loops run longest first: along program_id(axis)
                               (descending or ascending, as the loops' trip counts grow), in groups
                               of `group` programs along the other axes (which share operands in
                               L2), each group's programs along `axis` in turn */
} FaTileOrder;

typedef struct FaSchedulePlan {
  FaScheduleKind kind;      /* what the kernel does: FA_SCHEDULE_GRID or FA_SCHEDULE_PERSISTENT */
  const char *no_persistent;/* why not, when it was asked for */
  FaTileOrder order;
  int axis;                 /* FA_ORDER_LONGEST_FIRST: the program_id axis the work depends on */
  bool descending;          /* larger program ids along it run longer */
  int group;                /* FA_ORDER_LONGEST_FIRST: programs along the other axes per group */
  long long work[2];        /* the evidence: the loops' iterations at program_id(axis) = 1 and 2 (the
                               others 0, integer arguments 4096) */
  const char *linear_why;   /* FA_ORDER_LINEAR: why the work was not found to depend on a program id */
  bool grid_ordered;        /* FA_SCHEDULE_GRID, FA_ORDER_LONGEST_FIRST, descending: a thread block's program ids
                               come from its linear index through the persistent kernels' order
                               (fa::tile_coords: longest first along axis, in groups of `group`
                               programs along the others), so that the hardware, which starts thread
                               blocks in the order of their linear index, starts the longest programs
                               of every group first, not those of the first heads */
  int tile_barrier;         /* with a producer warp and loads outside loops: the mbarrier (index into
                               barriers) the compute threads arrive on when a tile is done, which the
                               producer waits on before loading the next tile's; -1 if none */
  bool end_sync;            /* persistent: the compute warps meet at a barrier at the end of each program,
                               before the next writes shared memory they may still read (not needed
                               where they write none: every tile filled by the copy engine, no scratch) */
  bool dynamic;             /* persistent, longest first: after its first program a thread block takes
                               the next from a counter in global memory (an extra kernel argument the
                               launch zeroes), so blocks that finish early take more, as the hardware
                               does with one block per program; else block b runs b, b + G, ... */
  int next_full, next_empty;/* dynamic with a producer warp: the mbarriers (2 slots each) through which
                               the producer hands the compute warps the next program; -1 if none */
  size_t next_slots;        /* dynamic: two 32-bit slots for the next program's id (shared memory offset) */
  const IrOp *tile_release_after; /* with tile_barrier: the op of the kernel's body after which no compute
                               thread reads those tiles (their last products complete), where they
                               arrive, so that the producer loads the next program's under the end of
                               this one; NULL: at the end of the program */
} FaSchedulePlan;

enum { FA_SCHEDULE_GROUP = 8 };

/* Per value (by IrValue.id). */
typedef struct FaValuePlan {
  bool live;                /* some live op uses it */
  int div_log2;             /* integers: a known power-of-two divisor; pointers: alignment in elements */
  int nontile_uses;         /* live uses other than products reading its tile */
  FaConversionPlan *convs;  /* converted copies made right after the definition */
  int nconvs;
  FaTilePlan *tile;         /* its shared-memory copy, or NULL */
  FaProductPlan *fused_add_of; /* on an addition's result: the product it computes */
  const IrValue *unit_factors; /* on a product x * f[:, None] with f an online softmax's rescale factor
                               (cuda_plan.c, 6b): the broadcast factors; each thread multiplies only
                               when a factor it holds is not 1 */
  bool producer;            /* warp specialisation: the producer computes it too */
} FaValuePlan;

typedef struct FaOpMap FaOpMap;   /* op -> its plan (cuda_plan.c) */

struct FaCudaPlan {
  FaCompiler *fc;
  const IrKernel *k;
  const IrFunction *fn;
  FaCudaTarget target;
  int warps, stages;
  FaPipelineKind pipeline;  /* the launch configuration's choice (never FA_PIPELINE_DEFAULT) */
  FaLayoutPlan layouts;     /* the layout pass's results (IrValue.layout and op->aux are set too) */
  FaArgFact *facts;         /* what the specialisation assumes of the arguments */
  int nfacts;
  FaValuePlan *values;      /* by value id */
  int nvalues;
  FaTilePlan **tiles;       /* in order of definition */
  int ntiles;
  FaAccessPlan **accesses;  /* in program order */
  int naccesses;
  FaPipelinePlan **pipelines;
  int npipelines;
  FaProductPlan **products; /* in program order */
  int nproducts;
  FaWgmmaWait **waits;      /* where late products are waited for, in program order */
  int nwaits;
  FaReducePlan **reduces;
  int nreduces;
  FaScanPlan **scans;
  int nscans;
  FaPrintPlan **prints;
  int nprints;
  bool async_proxy_reads;   /* some product reads tiles through the async proxy (wgmma): every
                               tile write is followed by a proxy fence */
  bool bulk_stores;         /* some store is a bulk tensor copy (FA_ACCESS_TMA_STORE): thread 0 issues
                               them all and waits until they have read their staging tiles before
                               the block exits (their writes are done with the grid) */
  FaSmemPlan smem;
  FaWarpRole roles[4];
  int nroles;
  FaBarrierPlan barriers[FA_MAX_BARRIERS];
  int nbarriers;
  FaTensorMapPlan *tmaps[FA_MAX_TENSOR_MAPS]; /* the kernel's tensor-map arguments, after its parameters */
  int ntmaps;
  int nrings;               /* mbarrier rings (pipelines of FA_SYNC_MBARRIER): kernel-wide use counters */
  /* warp specialisation (pipeline tma_ws and later): a producer warpgroup
     after the compute warps runs the producer's slice of the kernel (the
     scalar ops the bulk copies' loop bounds and coordinates depend on,
     FaValuePlan.producer / fa_plan_in_producer) and issues every copy */
  bool warp_specialised;
  const char *no_warp_specialisation; /* why not, when it was asked for */
  int threads;              /* per thread block: 32 * warps, + 128 with a producer warpgroup */
  int min_blocks;           /* __launch_bounds__' second argument (1 with setmaxnreg), or 0 */
  int ring_registers;       /* with ring vectors and min_blocks: the registers a thread that leaves */
  /* ping-pong (pipeline tma_ws_pp): in the loops of `pingpong_loops`, each
     of two consumer warpgroups waits for its turn (named barrier) before its
     first product of an iteration and gives the turn to the other after its
     last one */
  const IrOp **pingpong_loops;
  int npingpong;
  const char *no_pingpong;  /* why not, when it was asked for */
  FaSchedulePlan schedule;
  const IrOp **order;       /* every op of the device function, in pre-order */
  int nops;
  FaOpMap *ops;
};

/* Plans one specialised kernel for a target, assuming `facts` of its
 * arguments (pointers named in no fact are taken to be 16-byte aligned, as
 * cudaMalloc's allocations are; integers named in none have no known
 * divisor).  Arena data lives as long as fc; call fa_cuda_plan_free after
 * use.  Returns false after reporting errors. */
bool fa_cuda_plan(FaCompiler *fc, const IrKernel *k, FaCudaTarget target, const FaArgFact *facts, int nfacts,
                  FaCudaPlan *out);
void fa_cuda_plan_free(FaCudaPlan *plan);

/* The plan of an op, or NULL. */
const FaProductPlan *fa_plan_product(const FaCudaPlan *plan, const IrOp *dot);
const FaAccessPlan *fa_plan_access(const FaCudaPlan *plan, const IrOp *op);
const FaReducePlan *fa_plan_reduce(const FaCudaPlan *plan, const IrOp *op);
const FaPipelinePlan *fa_plan_pipeline(const FaCudaPlan *plan, const IrOp *loop);
const FaScanPlan *fa_plan_scan(const FaCudaPlan *plan, const IrOp *op);
const FaPrintPlan *fa_plan_print(const FaCudaPlan *plan, const IrOp *op);
static inline const FaValuePlan *fa_plan_value(const FaCudaPlan *plan, const IrValue *v) {
  return &plan->values[v->id];
}
/* The layout in which op reads operand i (NULL: a scalar, a block pointer,
 * an operand read from a tile, or one taken in whatever layout it has). */
const FaLayout *fa_plan_operand_layout(const FaCudaPlan *plan, const IrOp *op, int i);
/* Whether an op's code is emitted (it has effects or a live result). */
bool fa_plan_op_live(const FaCudaPlan *plan, const IrOp *op);
/* Warp specialisation: whether the producer runs op (its slice). */
bool fa_plan_in_producer(const FaCudaPlan *plan, const IrOp *op);
/* Whether operand i of op is read from a tile rather than from registers. */
bool fa_plan_reads_tile(const IrOp *op, int i);

/* For the planner (cuda_plan_tma.c): whether a block-pointer load (into
 * tile t), store or atomic_add (from staging tile t) can be bulk tensor
 * copies issued by code in region `issue` (or a region inside it).
 * FA_TMA_OK fills *map (its id left 0) and *out (out->map left NULL);
 * otherwise *dim is the block dimension the refusal is about, or -1. */
/* Whether every offset of block pointer bp, which stores into pointer
 * parameter `param`, is provably non-negative: built from constants, program
 * ids, the integer parameters that are dimensions of param's extent, and
 * additions, products, maxima ... of such, advanced by such, through loops
 * whose carried offsets stay so. */
bool fa_plan_blockptr_nonneg(const FaCudaPlan *p, const IrValue *bp, int param);
FaTmaRefusal fa_plan_tma_view(const FaCudaPlan *p, const IrOp *access, const FaTilePlan *t, const IrRegion *issue,
                              FaTensorMapPlan *map, FaTmaPlan *out, int *dim);
const char *fa_tma_refusal_text(FaTmaRefusal r);
/* The pointer parameter a pointer (scalar, block of pointers, block
 * pointer) is computed from, or -1 when that cannot be told. */
int fa_plan_pointer_param(const IrFunction *fn, const IrValue *v);

/* Writes the plan as text, one decision per line. */
void fa_cuda_plan_print(const FaCudaPlan *plan, StrBuf *out);

/* Prints CUDA C++ from a plan (emit_cuda.c).  Returns false after
 * reporting errors. */
bool fa_emit_cuda_plan(const FaCudaPlan *plan, FaCudaKernel *out);

#endif
