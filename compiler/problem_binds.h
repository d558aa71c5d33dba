/* problem_binds.h - the constexpr values of a kernel for a stand-alone
 * compile (fadslc --emit=cuda|ptx|cubin, the NVRTC sweep test): those given
 * on the command line, then what the file's problem description passes when
 * it launches the kernel (evaluated with the problem's default sizes, which
 * -D may override by name), then the kernel's default point for the
 * @autotune axes still open (autotune_point.h), then the constexpr
 * defaults. */
#ifndef FADSL_PROBLEM_BINDS_H
#define FADSL_PROBLEM_BINDS_H

#include "sema.h"

/* The constexpr parameter of k with that name, or NULL. */
const FaParamInfo *fa_kernel_constexpr(const FaKernelInfo *k, const char *name);
/* Whether some @problem of p has a size of that name. */
bool fa_program_has_size(const FaProgram *p, const char *name);

/* `given`: -D values; names that are neither constexpr parameters of the
 * kernel nor sizes of a problem description are errors.  `arch`: the
 * target's compute capability, as the prune reads it (sema.h; FA_ARCH_NONE
 * when there is no GPU target).  *config is set from the default
 * configuration where its fields are 0.  Stores the bindings
 * (arena) and returns their number, or -1 after reporting errors (among
 * them: no point of the @autotune space passes its prune with the values
 * given, located at the prune). */
int fa_kernel_bindings_for_compile(FaCompiler *fc, const FaProgram *p, const FaKernelInfo *k,
                                   const FaBinding *given, int ngiven, int arch, FaBinding **out,
                                   FaLaunchConfig *config);

#endif
