/* fadslc_cuda.h - fadslc's --emit=plan|cuda|ptx|cubin (fadslc_cuda.c):
 * specialise a kernel, plan it and print the plan, or emit its CUDA C++ and
 * compile that with NVRTC through the runtime's wrapper. */
#ifndef FADSL_FADSLC_CUDA_H
#define FADSL_FADSLC_CUDA_H

#include <stdio.h>

#include "ast.h"
#include "sema.h"

typedef struct FaCompileRequest {
  const char *kernel;         /* --kernel NAME */
  const FaBinding *defines;   /* -D NAME=VALUE, parsed */
  int ndefines;
  FaLaunchConfig config;      /* fields 0: the kernel's default configuration */
  const char *arch;           /* --arch; NULL: sm_80 */
  const char *what;           /* "plan", "cuda", "ptx" or "cubin" */
  const char *const *assume;  /* --assume NAME%K[,...]: facts about runtime arguments */
  int nassume;
} FaCompileRequest;

/* Writes the requested output to `out`.  Returns false after reporting
 * errors through fc->diag. */
bool fa_fadslc_compile(FaCompiler *fc, const Node *module, const FaCompileRequest *req, FILE *out);

#endif
