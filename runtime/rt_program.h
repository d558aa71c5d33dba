/* rt_program.h - programs, kernels, argument sets and compiled
 * specialisations inside libfadsl (program.c, bind.c, launch.c). */
#ifndef FADSL_RT_PROGRAM_H
#define FADSL_RT_PROGRAM_H

#include "../compiler/cuda_backend.h"
#include "ast.h"
#include "autotune_point.h"
#include "interp.h"
#include "ir.h"
#include "rt.h"
#include "sema.h"

typedef struct FaRtVariant FaRtVariant;

struct fadsl_program {
  fadsl_context *ctx;
  FaCompiler fc;                /* the parsed and checked program */
  FaProgram *prog;
  char *name;                   /* file name, or the name given with a string */
  fadsl_kernel *kernels;        /* one per prog->kernels[i] */
  int nkernels;
  pthread_mutex_t lock;         /* specialisation and the variant lists */
};

typedef struct FaRtDefaultMemo FaRtDefaultMemo;

struct fadsl_kernel {
  fadsl_program *program;
  const FaKernelInfo *info;
  FaRtVariant *variants;        /* compiled specialisations, newest first */
  FaRtDefaultMemo *defaults;    /* default points chosen before, newest first (bind.c) */
  int ndefaults;
  bool *point_reads;            /* per parameter: whether the default point can depend on it
                                   (fa_autotune_point_reads, once per kernel; NULL: ask each time) */
};

/* Frees a kernel's kept default points (fadsl_program_destroy). */
void fa_rt_default_memo_free(fadsl_kernel *k);

/* One bound argument. */
typedef struct FaRtArg {
  bool bound;
  fadsl_value value;            /* a FADSL_ARG_DTYPE name points to dtype_name */
  char dtype_name[16];
} FaRtArg;

struct fadsl_args {
  fadsl_kernel *kernel;
  FaRtArg *args;                /* one per kernel parameter, in source order */
  int nargs;
  FaLaunchConfig config;        /* explicit launch configuration; 0 = not given */
  bool has_grid;                /* fadsl_args_set_grid: this grid instead of the kernel's */
  unsigned grid[3];
};

/* One specialisation of a kernel (constexpr values + config) for one arch,
 * generated, compiled and (in a device context, when first launched)
 * loaded.  Immutable once on the kernel's list, except the module, which is
 * loaded under the program lock. */
/* The last arguments a host function of a variant (its grid or its buffer
 * extents) ran on, and what it returned: a launch with the same scalars
 * reuses the results instead of interpreting the function again (launch.c). */
typedef struct FaRtHostMemo {
  int nargs, nresults;          /* 0 results: nothing kept */
  FaHostValue *args, *results;  /* one block */
} FaRtHostMemo;

void fa_rt_host_memo_free(FaRtHostMemo *m);

/* The last TMA descriptor built for a tensor-map argument of a variant and
 * what it was built from (launch.c): the encoding is a function of these
 * alone, so a launch on the same buffer and extents reuses it. */
typedef struct FaRtMapMemo {
  bool valid;
  uint64_t ptr;
  uint64_t dims[FA_MAX_RANK];
  CUtensorMap map;
} FaRtMapMemo;

struct FaRtVariant {
  FaRtVariant *next;
  FaRtHostMemo grid_memo, extents_memo;   /* guarded by the program's lock */
  FaRtMapMemo *map_memo;        /* per argument of cuda.args (NULL until a launch needs one); the lock's too */
  int per_sm;                   /* resident blocks per multiprocessor (the driver's), 0 until asked */
  unsigned char key[32];        /* hash of arch, constexpr values, config and argument facts */
  FaCompiler fc;                /* owns ir and cuda */
  IrKernel *ir;
  FaCudaKernel cuda;
  char arch[16];
  char *constexprs;             /* "BLOCK_Q=64 d_head=64 T=f16" */
  FaLaunchConfig config;
  char config_label[96];        /* "warps=4 stages=2" */
  char *assume;                 /* the facts about the arguments it was specialised on: "N%16" */
  unsigned char *cubin;
  size_t cubin_size;
  FaCacheHit hit;               /* how the cubin was obtained */
  FaKernelResources resources;  /* from the cubin and ptxas' report; -1s when unknown */
  bool loaded;
  FaRtModule module;
};

/* Kind-name of an argument kind, for messages: "a pointer", "an i32", ... */
const char *fa_rt_arg_kind_name(fadsl_arg_kind kind);

/* The argument kind a runtime scalar of this dtype takes, or FADSL_ARG_NONE
 * when the dtype is not known until the constexprs are (DT_VOID). */
fadsl_arg_kind fa_rt_scalar_arg_kind(DType dt);

/* Checks that every argument a launch needs is bound (compile_only: only
 * constexprs).  Reports all missing ones in one message. */
fadsl_status fa_rt_args_check_complete(const fadsl_args *a, bool compile_only);

/* The compile-time value of argument i as bound (constexprs and runtime
 * scalars), else a constexpr's declared default, else CK_NONE (pointers,
 * unbound arguments). */
FaConst fa_rt_arg_const(const fadsl_args *a, int i);

/* The bound constexprs and runtime scalars as bindings, for the default
 * point's `known` (autotune_point.h); out has room for the kernel's
 * parameters.  Returns how many. */
int fa_rt_bound_values(const fadsl_args *a, FaBinding *out);

/* The default point for the axes `known` and `given` leave open
 * (autotune_point.h), the prune reading `arch` (the compile target's compute
 * capability; FA_ARCH_NONE on the interpreter), with the runtime's rule for
 * a space whose prune rejects every point: its first values, and a warning
 * (FADSL_LOG=warn). */
fadsl_status fa_rt_default_point(fadsl_context *ctx, const fadsl_args *a, const FaBinding *known, int nknown,
                                 const FaLaunchConfig *given, int arch, Arena *arena, FaAutotunePoint *pt);

/* Checks a grid against CUDA's limits (x < 2^31, y and z < 2^16) and
 * stores it; FADSL_ERROR_INVALID_ARGUMENT naming the kernel otherwise. */
fadsl_status fa_rt_check_grid(fadsl_context *ctx, const char *kernel, const int64_t grid[3], unsigned out[3]);

void fa_rt_variant_free(fadsl_context *ctx, FaRtVariant *v);

#endif
