/* sema.h - what semantic analysis hands to the rest of the system: the
 * checked program (its kernels, their parameters, autotune spaces and
 * problem descriptions) and specialisation of a kernel into tile IR.
 *
 * fa_program_check() checks everything that does not depend on constexpr
 * values; fa_specialize() binds the constexprs and a launch configuration,
 * evaluates compile-time code (constexpr arithmetic, `if` on constexprs,
 * static_assert), inlines helpers and lowers the kernel to tile IR.
 */
#ifndef FADSL_SEMA_H
#define FADSL_SEMA_H

#include "ast.h"
#include "ir.h"

/* A compile-time value: the value of a constexpr parameter, a -D option, an
 * autotune choice or a problem size. */
typedef enum FaConstKind { CK_NONE, CK_INT, CK_FLOAT, CK_BOOL, CK_DTYPE, CK_STR } FaConstKind;

typedef struct FaConst {
  FaConstKind kind;
  int64_t i;          /* CK_INT, CK_BOOL (0/1) */
  double f;           /* CK_FLOAT */
  DType dtype;        /* CK_DTYPE */
  const char *s;      /* CK_STR */
} FaConst;

/* Parses "64", "1.5", "True", "f16", ... as given on a command line. */
bool fa_const_parse(const char *text, FaConst *out);
/* Writes the value as the language spells it ("64", "True", "f16"). */
void fa_const_print(FaConst c, StrBuf *out);

typedef struct FaBinding {
  const char *name;
  FaConst value;
} FaBinding;

typedef enum FaParamKind { PARAM_POINTER, PARAM_SCALAR, PARAM_CONSTEXPR } FaParamKind;

typedef struct FaParamInfo {
  const char *name;
  FaParamKind kind;
  DType dtype;              /* scalar dtype, or the pointee of a pointer; DT_VOID when
                               it names a dtype constexpr (see dtype_param) */
  const char *dtype_param;  /* e.g. "T" in `t_q: *T`, or NULL */
  bool has_default;         /* constexprs with `= value` */
  FaConst default_value;
  const Node *node;         /* the N_PARAM */
} FaParamInfo;

/* One axis of an @autotune space: a constexpr parameter, or the launch
 * configuration's "warps" / "stages". */
typedef struct FaTuneAxis {
  const char *name;
  FaConst *values;
  int nvalues;
} FaTuneAxis;

typedef struct FaKernelInfo {
  const char *name;
  const Node *fn;           /* the N_FUNC */
  FaParamInfo *params;
  int nparams;
  const Node *grid;         /* @kernel(grid=...) expression */
  const Node *flops;        /* @kernel(flops=...) expression, or NULL */
  FaTuneAxis *tune;         /* @autotune axes, or NULL */
  int ntune;
  const Node *prune;        /* @autotune(prune=...) expression, or NULL */
  const char **key;         /* @autotune(key=(...)) parameter names */
  int nkey;
} FaKernelInfo;

/* A problem description (@problem def): default sizes and a body that
 * allocates buffers and launches kernels in order. */
typedef struct FaProblemInfo {
  const char *name;
  const Node *fn;
  FaBinding *sizes;         /* defaults from the decorator, overridable */
  int nsizes;
} FaProblemInfo;

typedef struct FaProgram {
  const Node *module;
  FaKernelInfo **kernels;
  int nkernels;
  FaProblemInfo **problems;
  int nproblems;
  const Node **helpers;     /* N_FUNC without @kernel / @problem */
  int nhelpers;
} FaProgram;

/* Checks a parsed module.  Returns NULL after reporting errors. */
FaProgram *fa_program_check(FaCompiler *fc, const Node *module);
FaKernelInfo *fa_program_kernel(const FaProgram *p, const char *name);

/* The launch configuration of a specialisation. */
typedef struct FaLaunchConfig {
  int warps;                /* default 4 */
  int stages;               /* default 2 */
  int pipeline;             /* FaPipelineKind (cuda.h); 0: the default, cp_async */
} FaLaunchConfig;

/* Specialises a kernel: `binds` gives a value for constexpr parameters (those
 * with defaults may be left out; extra or unknown names are errors).  Returns
 * NULL after reporting errors. */
IrKernel *fa_specialize(FaCompiler *fc, const FaProgram *p, const FaKernelInfo *k,
                        const FaBinding *binds, int nbinds, FaLaunchConfig config);

/* Evaluates a compile-time expression of the program (an @autotune prune,
 * an @kernel flops or grid expression, a constexpr default, ...) with the
 * module's constants and `binds` (e.g. parameter values, problem sizes) in
 * scope.  fa_eval_const wants a single value; fa_eval_const_tuple accepts a
 * tuple of up to nmax values and returns how many it stored (-1 on error).
 * Errors are reported, located at the expression. */
bool fa_eval_const(FaCompiler *fc, const FaProgram *p, const Node *expr, const FaBinding *binds, int nbinds,
                   FaConst *out);
int fa_eval_const_tuple(FaCompiler *fc, const FaProgram *p, const Node *expr, const FaBinding *binds, int nbinds,
                        FaConst *out, int nmax);

/* The default specialisation of a kernel: the first value of each @autotune
 * axis (warps and stages included), else each constexpr's default.  Stores
 * the bindings (arena-allocated) and config; returns their number, or -1
 * (nothing reported) when some constexpr has neither. */
int fa_kernel_default_bindings(FaCompiler *fc, const FaKernelInfo *k, FaBinding **out, FaLaunchConfig *config);

/* `fadslc --check`: specialises every kernel that has a default
 * specialisation.  Returns false after reporting errors; *nchecked (may be
 * NULL) counts the kernels specialised. */
bool fa_check_kernels(FaCompiler *fc, const FaProgram *p, int *nchecked);

#endif
