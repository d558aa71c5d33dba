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
 *              stores through a block pointer) and vector width, with the
 *              divisibility facts that allowed the width;
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
 * CUDA_ARG_TENSOR_MAP argument (cuda.h); a producer warp is a second
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

#include "cuda.h"
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
} FaTileFormat;

typedef enum FaTileFill {
  FA_FILL_REGISTERS,        /* written from the value's registers after its definition (fa::stage) */
  FA_FILL_CP_ASYNC,         /* loaded from global memory by cp.async, iterations ahead (a pipeline) */
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
  struct FaPipelinePlan *pipeline; /* FA_FILL_CP_ASYNC: the pipeline filling it */
  struct FaAccessPlan *load;       /* FA_FILL_CP_ASYNC: the load */
  size_t buf_bytes;         /* one buffer: rows * pitch */
  int nbufs;                /* buffers: the pipeline's stages, else 1 */
  size_t offset;            /* bytes from the start of the dynamic shared memory (tiles first) */
  int live_start, live_end; /* lifetime: positions of ops in pre-order; tiles whose lifetimes do
                               not overlap share memory */
} FaTilePlan;

/* ---- loads and stores --------------------------------------------------------------------- */

typedef enum FaAccessMethod {
  FA_ACCESS_ELEMENT,        /* pointer tensors: each element through its own pointer */
  FA_ACCESS_VECTOR,         /* block pointer: `vec` contiguous elements per access (1: scalar) */
  FA_ACCESS_CP_ASYNC,       /* block pointer loaded straight into a tile by cp.async (pipelined) */
  FA_ACCESS_ATOMIC,         /* atomic_add: one thread per element (or one thread for a scalar) */
  FA_ACCESS_REDUCE,         /* atomic_add through a block pointer: a reduce-store, `vec` contiguous
                               elements per red.global.add (see FaReduceInstr), one owner per element */
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

typedef struct FaAccessPlan {
  const IrOp *op;           /* IR_LOAD, IR_STORE, IR_ATOMIC_ADD, IR_LOAD_BLOCK, IR_STORE_BLOCK,
                               IR_ATOMIC_ADD_BLOCK */
  FaAccessMethod method;
  int vec;                  /* elements per access */
  const FaLayout *layout;   /* the layout it runs in */
  FaVecFacts facts;         /* block pointers */
  FaTilePlan *tile;         /* FA_ACCESS_CP_ASYNC: the tile it fills */
  struct FaPipelinePlan *pipeline;
  int carried;              /* FA_ACCESS_CP_ASYNC: the block pointer is argument `carried` of the
                               loop body, updated by `advance` (loop-invariant steps) each iteration */
  const IrOp *advance;
  size_t scratch;           /* bytes of scratch (an atomic_add on a scalar whose result is used) */
  FaReduceInstr red;        /* FA_ACCESS_REDUCE: the instruction */
} FaAccessPlan;

/* ---- pipelines ----------------------------------------------------------------------------- */

typedef enum FaPipeSync {
  FA_SYNC_CP_ASYNC_GROUPS,  /* cp.async commit groups waited with cp.async.wait_group, and CTA barriers */
} FaPipeSync;

/* One step of a pipeline's synchronisation, in the order the code runs it. */
typedef enum FaPipeStepKind {
  FA_STEP_BARRIER,          /* a CTA barrier (__syncthreads); `why` says what it separates */
  FA_STEP_ISSUE,            /* issue the loads of iteration `arg` ahead (skipped past the loop's end) */
  FA_STEP_COMMIT,           /* close the cp.async group of what was just issued */
  FA_STEP_WAIT_GROUPS,      /* wait until at most `arg` groups are in flight */
  FA_STEP_PROXY_FENCE,      /* make the generic proxy's writes visible to the async proxy (wgmma) */
} FaPipeStepKind;

typedef enum FaStepWhy {
  FA_WHY_NONE,
  FA_WHY_BUFFERS_REUSED,    /* before the prologue: the buffers may have held other tiles */
  FA_WHY_BUFFER_FREE,       /* every warp is done with the buffer refilled now */
  FA_WHY_LANDED,            /* this iteration's tiles are complete and visible to every warp */
} FaStepWhy;

typedef struct FaPipeStep {
  FaPipeStepKind kind;
  int arg;
  FaStepWhy why;
} FaPipeStep;

enum { FA_PIPE_MAX_STEPS = 24, FA_PIPE_MAX_STAGES = 8 };

typedef struct FaPipelinePlan {
  int id;
  const IrOp *loop;         /* the IR_FOR */
  int stages;               /* buffers in each tile's ring */
  int ahead;                /* iterations issued ahead: stages - 1 */
  FaPipeSync sync;
  FaAccessPlan **loads;     /* in the loop body's order */
  int nloads;
  /* before the loop, at the head of each iteration, after the loop */
  FaPipeStep prologue[FA_PIPE_MAX_STEPS], head[FA_PIPE_MAX_STEPS], epilogue[FA_PIPE_MAX_STEPS];
  int nprologue, nhead, nepilogue;
} FaPipelinePlan;

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
} FaProductWait;

typedef struct FaProductPlan {
  const IrOp *dot;
  FaProductInstr instr;
  DType in, acc;            /* operand and accumulator dtypes */
  int M, N, K;
  int mt, nt, kt, wm, wn;   /* tensor cores, per warp: 16-row blocks, n8 blocks, k16 steps;
                               warps along M and N */
  FaOperandSource a_src, b_src;
  const IrValue *a_regs;    /* registers read for A (the cast's f32 source for FA_OPND_REGISTERS_F32) */
  FaTilePlan *a_tile, *b_tile;
  bool a_k_inner, b_k_inner;/* the tile runs along K (K-major) */
  bool a_flip, b_flip;      /* the operand is the transpose of the tile's value */
  FaProductWait wait;
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
  size_t scratch;           /* library scratch above the tiles (the largest need of any op) */
  size_t tile_align;        /* tiles start at multiples of it (1024: the 128-byte swizzle's period) */
  size_t align_pad;         /* bytes the launch adds so the buffer can be moved to that boundary */
  size_t total;             /* dynamic shared memory requested at launch */
} FaSmemPlan;

typedef enum FaWarpRoleKind {
  FA_ROLE_COMPUTE,          /* loads, computes and stores */
} FaWarpRoleKind;

typedef struct FaWarpRole {
  FaWarpRoleKind kind;
  int first_warp, nwarps;
  int max_registers;        /* per thread (setmaxnreg); 0: left to the compiler and __launch_bounds__ */
} FaWarpRole;

typedef enum FaBarrierKind {
  FA_BARRIER_CTA,           /* __syncthreads (named barrier 0, every thread) */
} FaBarrierKind;

/* What a barrier is used for (bits of FaBarrierPlan.uses). */
enum {
  FA_BARRIER_FOR_TILES = 1,     /* writing tiles from registers */
  FA_BARRIER_FOR_PIPELINE = 2,  /* pipeline buffers */
  FA_BARRIER_FOR_SCRATCH = 4,   /* library scratch (conversions, reductions and scans across warps, FMA,
                                   atomics) */
};

typedef struct FaBarrierPlan {
  FaBarrierKind kind;
  int id;                   /* the hardware barrier */
  int threads;              /* threads taking part */
  unsigned uses;
} FaBarrierPlan;

typedef enum FaScheduleKind {
  FA_SCHEDULE_GRID,         /* one thread block per program, the grid as @kernel(grid=...) gives it */
} FaScheduleKind;

typedef struct FaSchedulePlan {
  FaScheduleKind kind;
} FaSchedulePlan;

/* Per value (by IrValue.id). */
typedef struct FaValuePlan {
  bool live;                /* some live op uses it */
  int div_log2;             /* integers: a known power-of-two divisor; pointers: alignment in elements */
  int nontile_uses;         /* live uses other than products reading its tile */
  FaConversionPlan *convs;  /* converted copies made right after the definition */
  int nconvs;
  FaTilePlan *tile;         /* its shared-memory copy, or NULL */
  FaProductPlan *fused_add_of; /* on an addition's result: the product it computes */
} FaValuePlan;

typedef struct FaOpMap FaOpMap;   /* op -> its plan (cuda_plan.c) */

struct FaCudaPlan {
  FaCompiler *fc;
  const IrKernel *k;
  const IrFunction *fn;
  FaCudaTarget target;
  int warps, stages;
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
  FaReducePlan **reduces;
  int nreduces;
  FaScanPlan **scans;
  int nscans;
  FaPrintPlan **prints;
  int nprints;
  bool async_proxy_reads;   /* some product reads tiles through the async proxy (wgmma): every
                               tile write is followed by a proxy fence */
  FaSmemPlan smem;
  FaWarpRole roles[4];
  int nroles;
  FaBarrierPlan barriers[4];
  int nbarriers;
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
/* Whether operand i of op is read from a tile rather than from registers. */
bool fa_plan_reads_tile(const IrOp *op, int i);

/* Writes the plan as text, one decision per line. */
void fa_cuda_plan_print(const FaCudaPlan *plan, StrBuf *out);

/* Prints CUDA C++ from a plan (emit_cuda.c).  Returns false after
 * reporting errors. */
bool fa_emit_cuda_plan(const FaCudaPlan *plan, FaCudaKernel *out);

#endif
