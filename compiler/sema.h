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

/* Appends "BLOCK=64 T=f16" (a space first when out is not empty). */
void fa_bindings_print(const FaBinding *b, int n, StrBuf *out);

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
  const Node *prefer;       /* @autotune(prefer=...) expression, or NULL: which point is the default
                               (autotune_point.h), never which points the tuner tries */
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
/* The index of the binding named `name` in b[0..n), or -1. */
int fa_binding_index(const FaBinding *b, int n, const char *name);

/* ---- the target, as a prune sees it -------------------------------------------------
 * An @autotune prune reads `arch`: the compute capability of the GPU the
 * kernel is compiled for, major * 10 + minor (80 for sm_80, 86, 89, 90 for
 * sm_90 and sm_90a alike, 100, ...), so that a kernel's default point can
 * differ between targets (a tile that fits an H200's shared memory and not
 * an A100's).  It is the compile target, not the device: FADSL_ARCH=sm_80
 * on an H200 makes it 80.  Where no GPU target is known (the CPU
 * interpreter, fadslc --check without --arch) it is FA_ARCH_NONE, 0: below
 * every GPU, so that `arch >= 90` is false there and the portable branch of
 * a prune is taken.  A kernel with a prune may not have a parameter of that
 * name (sema reports it).  The callers that choose a default point or
 * enumerate a space pass it explicitly; there is no global target. */
#define FA_PRUNE_ARCH "arch"
enum { FA_ARCH_NONE = 0 };

/* ---- the launch configuration --------------------------------------------------------
 * Choices made per launch that are not kernel parameters.  Each axis is one
 * row of the table in config_axes.c, which says everything the rest of the
 * system needs: its name (as @autotune, prune expressions, the tuning
 * database and the tools' --NAME options spell it), default, allowed
 * values, and the field of FaLaunchConfig that carries it (specialisation
 * copies the configuration into the IrKernel the CUDA backend plans from;
 * the runtime's variant key and launch log include every axis).  A new axis
 * is a field here and a row there. */
typedef struct FaLaunchConfig {
  int warps;                /* threads per program / 32 */
  int stages;               /* software pipelining depth */
  int pipeline;             /* FaPipelineKind (cuda_backend.h): how loads feeding products are pipelined */
  int schedule;             /* FaScheduleKind (cuda_backend.h): one thread block per program, or persistent */
} FaLaunchConfig;

typedef struct FaConfigAxis {
  const char *name;
  int default_value;
  int min, max;             /* allowed values: min..max ... */
  bool pow2;                /* ... and powers of two only */
  const char *allowed;      /* the same in words, for messages: "a power of two from 1 to 32" */
  size_t offset;            /* of its int field in FaLaunchConfig */
  const char *help;         /* one line for --help */
  const char *const *names; /* value v's name is names[v - min] (printed and parsed so), or NULL */
} FaConfigAxis;

/* The table; *n receives its length. */
const FaConfigAxis *fa_config_axes(int *n);
/* The axis of that name, or NULL (a kernel parameter, say). */
const FaConfigAxis *fa_config_axis(const char *name);
/* The axis's value in c (<= 0: not given). */
int fa_config_get(const FaLaunchConfig *c, const FaConfigAxis *ax);
void fa_config_set(FaLaunchConfig *c, const FaConfigAxis *ax, int value);
bool fa_config_allowed(const FaConfigAxis *ax, int64_t value);
/* Gives every axis not given (<= 0) its default. */
void fa_config_fill_defaults(FaLaunchConfig *c);
/* What a prune expression sees besides the point and the kernel's
 * parameters, as bindings: the launch-configuration axes that are not axes
 * of the kernel's @autotune space (the value in `given` where set, else the
 * default), then FA_PRUNE_ARCH with `arch` (below).  Writes at most
 * fa_config_axes' count + 1 to out; returns how many. */
int fa_config_prune_bindings(const FaKernelInfo *k, const FaLaunchConfig *given, int arch, FaBinding *out);
/* Appends "warps=4 stages=2" (the axes given, space separated; a space first
 * when out is not empty; named values by their names, and only where not
 * their defaults: "pipeline=tma"). */
void fa_config_print(const FaLaunchConfig *c, StrBuf *out);
/* An axis value from text: a number, or one of the axis's names.  False
 * when it is neither or not allowed. */
bool fa_config_parse(const FaConfigAxis *ax, const char *text, int *value);
/* The name of a value of a named axis, or NULL. */
const char *fa_config_value_name(const FaConfigAxis *ax, int value);
/* What a prune sees of an @autotune axis's value: a named launch setting as
 * its name (pipeline 5: "tma_ws_pp", so that a prune can say
 * `pipeline == "tma_ws_pp"`), anything else as it is. */
FaConst fa_config_prune_value(const char *axis, FaConst v);
/* Appends the value of @autotune axis `axis`: by its name where the axis is
 * a named launch setting ("pipeline" 5: "tma_ws_pp"), else as a constant. */
void fa_config_print_value(const char *axis, FaConst v, StrBuf *out);
/* The environment's choice for each named axis that `given` does not set
 * (<= 0): FADSL_<NAME> in upper case (FADSL_PIPELINE, FADSL_SCHEDULE), when
 * set and not empty, stored into *out (given and out may be the same).
 * False at the first variable whose value is not allowed: *bad gets its
 * axis and var (var_size bytes) the variable's name. */
bool fa_config_from_env(const FaLaunchConfig *given, FaLaunchConfig *out, const FaConfigAxis **bad, char *var,
                        size_t var_size);

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

/* The default specialisation of a kernel with nothing given, for target
 * `arch` (FA_ARCH_NONE: none): its default point (autotune_point.h: the
 * first point of the @autotune space that the prune admits, configuration
 * axes included), else each constexpr's default.  Stores the chosen axes' bindings (arena-allocated) and sets
 * *config; returns their number, or -1 (nothing reported) when some
 * constexpr has neither an axis nor a default. */
int fa_kernel_default_bindings(FaCompiler *fc, const FaProgram *p, const FaKernelInfo *k, int arch,
                               FaBinding **out, FaLaunchConfig *config);

#endif
