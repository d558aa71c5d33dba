/* cuda_backend.h - the CUDA backend: layout assignment (layout.c) and the CUDA C++
 * emitter (emit_cuda.c) for a specialised IrKernel, and the device-side tile
 * library that the emitted code includes.
 *
 * The emitted translation unit is self-contained: it includes only
 * "fadsl_device.cuh" (the tile library, handed to NVRTC as an embedded
 * header), never the CUDA toolkit's headers, so that a machine with only the
 * driver and libnvrtc can compile it.
 */
#ifndef FADSL_CUDA_H
#define FADSL_CUDA_H

#include "ast.h"
#include "ir.h"
#include "sema.h"

typedef struct FaCudaTarget {
  int sm;                   /* compute capability * 10: 80, 86, 89, 90 ... */
  bool arch_specific;       /* sm_90a: wgmma, setmaxnreg (only with sm == 90) */
} FaCudaTarget;

/* "sm_80" / "sm_90a" -> target; false when not understood. */
bool fa_cuda_target_parse(const char *arch, FaCudaTarget *out);
/* Writes the NVRTC -arch value, e.g. "sm_90a". */
void fa_cuda_target_name(FaCudaTarget t, char *buf, size_t size);

/* How the loads of block pointers that feed products reach shared memory,
 * and what runs beside them: a launch-configuration choice (FaLaunchConfig.
 * pipeline, FADSL_PIPELINE for the tools and the runtime).  Each choice adds
 * one mechanism to the one before it, so that a fault can be pinned to one;
 * where a kernel cannot take a mechanism (a load the bulk copy engine cannot
 * do, a loop without pipelined loads), the plan says why and keeps the
 * previous one.  Every choice past cp_async is compiled and checked in CI
 * but not yet run on a GPU (docs/performance.md). */
typedef enum FaPipelineKind {
  FA_PIPELINE_DEFAULT = 0,  /* not given: FA_PIPELINE_CP_ASYNC */
  FA_PIPELINE_CP_ASYNC,     /* cp.async into rings of tiles, CTA barriers; products waited for at once */
  FA_PIPELINE_TMA,          /* bulk tensor copies (TMA) on full/empty mbarrier rings, one thread issuing */
  FA_PIPELINE_TMA_ASYNC,    /* + warpgroup products waited for as late as their data allow */
  FA_PIPELINE_TMA_WS,       /* + a producer warp issues the copies (warp specialisation, setmaxnreg) */
  FA_PIPELINE_TMA_WS_PP,    /* + two consumer warpgroups take turns on their products (ping-pong) */
  FA_PIPELINE_COUNT
} FaPipelineKind;

/* "cp_async", "tma", "tma_async", "tma_ws", "tma_ws_pp" (the default for 0). */
const char *fa_pipeline_name(int kind);
/* The kind of a name, or -1. */
int fa_pipeline_parse(const char *name);
/* The names, comma separated, for messages. */
const char *fa_pipeline_names(void);

/* How programs map onto thread blocks (the launch-configuration axis
 * "schedule"); cuda_plan.h's FaSchedulePlan says what the plan made of it. */
typedef enum FaScheduleKind {
  FA_SCHEDULE_DEFAULT = 0,  /* not given: FA_SCHEDULE_GRID */
  FA_SCHEDULE_GRID,         /* one thread block per program, the grid @kernel(grid=...) gives */
  FA_SCHEDULE_PERSISTENT,   /* as many thread blocks as the GPU holds at once, each looping over
                               programs (tiles) in the plan's order; not yet run on a GPU */
  FA_SCHEDULE_COUNT
} FaScheduleKind;

/* How one kernel argument is passed to cuLaunchKernel. */
typedef enum FaCudaArgKind {
  CUDA_ARG_POINTER,         /* device pointer, 8 bytes: IrFunction param `param` */
  CUDA_ARG_SCALAR,          /* scalar of dtype `dtype`: IrFunction param `param` */
  CUDA_ARG_TENSOR_MAP,      /* CUtensorMap (128 bytes, __grid_constant__) built by the
                               runtime for pointer param `param` (TMA) */
  CUDA_ARG_GRID,            /* persistent kernels: dimension `param` (0, 1, 2) of the grid of
                               programs @kernel(grid=...) gives, an unsigned 32-bit integer */
  CUDA_ARG_TILE_COUNTER,    /* dynamic persistent kernels: a device pointer to an unsigned 32-bit
                               counter of programs taken, zeroed on the launch's stream before it */
} FaCudaArgKind;

typedef struct FaCudaArg {
  FaCudaArgKind kind;
  int param;                /* index into IrKernel.device->params */
  DType dtype;              /* scalar dtype, or the pointee */
  int align;                /* CUDA_ARG_POINTER: the byte alignment the generated code assumes
                               of the pointer (vectorised accesses); a launch must refuse a
                               pointer that is not a multiple of it */
  /* CUDA_ARG_TENSOR_MAP only: the tiled view the kernel expects, outermost
     dimension first.  Dimension i of the map covers the dimensions
     dims_end[i-1] .. dims_end[i] - 1 of the parameter's declared extent
     (row-major), merged into one; box[i] elements of it are copied. */
  int rank;
  int64_t box[FA_MAX_RANK];
  int dims_end[FA_MAX_RANK];
  int swizzle_bytes;        /* 0, 32, 64 or 128 */
  bool nan_fill;            /* out-of-bounds elements read as NaN (else zero) */
} FaCudaArg;

typedef struct FaCudaKernel {
  char *source;             /* the CUDA C++ translation unit (arena) */
  const char *entry;        /* its extern "C" kernel name */
  int threads;              /* block size: 32 * warps (+ a producer warpgroup, if any) */
  size_t shared_bytes;      /* dynamic shared memory to request at launch */
  FaCudaArg *args;          /* the kernel's parameters, in order */
  int nargs;
  bool persistent;          /* launched on as many thread blocks as fit the GPU at once (at most
                               one per program), each looping over the programs; the grid of
                               programs is passed in the CUDA_ARG_GRID arguments */
  bool tile_counter;        /* persistent and dynamic: its last argument is CUDA_ARG_TILE_COUNTER */
} FaCudaKernel;

/* Emits one specialised kernel (plans it with no facts about its arguments
 * and prints the plan, see cuda_plan.h).  Returns false after reporting
 * errors (for constructs the backend cannot lower, with the source
 * location). */
bool fa_emit_cuda(FaCompiler *fc, const IrKernel *k, FaCudaTarget target, FaCudaKernel *out);

/* ---- the entry point: a kernel of a checked program to CUDA C++ ------------------------ */

/* What a specialisation assumes of one runtime argument: an integer is a
 * multiple of `multiple`, a pointer's address is (bytes). */
typedef struct FaArgFact {
  const char *name;         /* the parameter */
  long long multiple;       /* a power of two >= 1 */
} FaArgFact;

/* How launches specialise on their runtime arguments (Triton's rule, with
 * one more step): an integer argument that is a multiple of
 * FA_SPECIALISE_MULTIPLE, or failing that of FA_SPECIALISE_MULTIPLE_MIN,
 * and a pointer's alignment (counted up to FA_SPECIALISE_MULTIPLE bytes), are
 * facts the plan may use (vector loads, cp.async); other values give no fact
 * about an integer and the alignment they have about a pointer.  The step
 * at 8 is for lengths such as 23400: eight elements of 16 bits are a
 * 16-byte vector, and a row of eight f32 a 32-byte one, so the checked
 * loads of such a length can still be vectors.  The facts are part of the
 * variant's key, so launches with N = 1000, N = 1004 and N = 1024 run
 * three variants, each correct for its values. */
enum { FA_SPECIALISE_MULTIPLE = 16, FA_SPECIALISE_MULTIPLE_MIN = 8 };

/* The 32-bit registers of one multiprocessor (sm_80 and sm_90): a kernel's
 * per-thread registers times the threads of its blocks on an SM share them
 * (the planner's register budgets, the tuner's check of compiled candidates). */
enum { FA_REGISTERS_SM = 65536 };

/* The fact an integer argument's value gives (%16 or %8); false when none. */
bool fa_arg_fact_of_int(const char *name, int64_t value, FaArgFact *out);
/* The fact a pointer argument's address gives (address 0: not bound yet,
 * taken as aligned). */
FaArgFact fa_arg_fact_of_pointer(const char *name, uint64_t address);
/* Appends the facts, in order: "M%16 N%16 x%4"; nothing for none.  The
 * runtime passes the facts that say more than a plan assumes without them
 * (integers with a divisor, pointers aligned to less than 16 bytes) and
 * keys its variants on this text. */
void fa_arg_facts_print(const FaArgFact *facts, int n, StrBuf *out);
/* Parses "NAME%K[,NAME%K...]" (K a power of two) into facts, appending to
 * *facts (arena); false with a message in *why when malformed. */
bool fa_arg_facts_parse(Arena *arena, const char *text, FaArgFact **facts, int *n, const char **why);

/* Everything that selects one compiled variant of a kernel. */
typedef struct FaCudaSpec {
  const FaProgram *program;
  const FaKernelInfo *kernel;
  const FaBinding *binds;   /* constexpr values (see fa_specialize) */
  int nbinds;
  FaLaunchConfig config;    /* fields <= 0 take their defaults */
  FaCudaTarget target;
  const FaArgFact *facts;   /* what is known of the runtime arguments (may be NULL) */
  int nfacts;
} FaCudaSpec;

typedef enum FaCudaStage {
  FA_CUDA_SPECIALISE_FAILED,/* errors in specialisation (static_assert, shapes, ...) */
  FA_CUDA_EMIT_FAILED,      /* specialised, but the backend cannot lower it */
  FA_CUDA_DONE,
} FaCudaStage;

typedef struct FaCudaPlan FaCudaPlan;

/* Specialises a kernel and emits its CUDA C++: the one way the runtime,
 * fadslc and fadsl-tune turn a kernel into code.  *ir is the specialised
 * kernel whenever specialisation succeeded (NULL otherwise); when `plan` is
 * not NULL it receives the plan the code was printed from (free it with
 * fa_cuda_plan_free).  Errors are reported through fc->diag. */
FaCudaStage fa_cuda_compile(FaCompiler *fc, const FaCudaSpec *spec, IrKernel **ir, FaCudaKernel *out,
                            FaCudaPlan *plan);

/* The device-side tile library: name and text of each embedded header. */
typedef struct FaEmbeddedHeader {
  const char *name;         /* e.g. "fadsl_device.cuh" */
  const char *text;
} FaEmbeddedHeader;
const FaEmbeddedHeader *fa_device_headers(int *count);

#endif
