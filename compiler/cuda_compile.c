/* cuda_compile.c - the entry point of the CUDA backend (see cuda.h):
 * specialise a kernel of a checked program, plan it, print the plan. */
#include "config.h"

#include <string.h>

#include "cuda.h"
#include "cuda_plan.h"

FaCudaStage fa_cuda_compile(FaCompiler *fc, const FaCudaSpec *spec, IrKernel **ir, FaCudaKernel *out,
                            FaCudaPlan *plan) {
  memset(out, 0, sizeof *out);
  if (plan)
    memset(plan, 0, sizeof *plan);
  *ir = NULL;
  FaLaunchConfig config = spec->config;
  fa_config_fill_defaults(&config);
  int errors = fc->diag.errors;
  IrKernel *k = fa_specialize(fc, spec->program, spec->kernel, spec->binds, spec->nbinds, config);
  if (!k || fc->diag.errors > errors)
    return FA_CUDA_SPECIALISE_FAILED;
  *ir = k;
  FaCudaPlan local;
  FaCudaPlan *p = plan ? plan : &local;
  if (!fa_cuda_plan(fc, k, spec->target, spec->facts, spec->nfacts, p))
    return FA_CUDA_EMIT_FAILED;
  bool ok = fa_emit_cuda_plan(p, out) && fc->diag.errors == errors;
  if (!plan)
    fa_cuda_plan_free(p);
  return ok ? FA_CUDA_DONE : FA_CUDA_EMIT_FAILED;
}
