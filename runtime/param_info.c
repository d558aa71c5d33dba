/* param_info.c - fadsl_kernel_param_info: what a binding layer (the Python
 * package, a C++ wrapper) needs to know about a kernel parameter to convert a
 * caller's value into the right fadsl_value: its element dtype or the dtype
 * constexpr that names it, a default, and whether @autotune chooses it. */
#include <string.h>

#include "rt_program.h"

static int is_tune_axis(const FaKernelInfo *k, const char *name) {
  for (int i = 0; i < k->ntune; i++)
    if (strcmp(k->tune[i].name, name) == 0) return 1;
  return 0;
}

FADSL_API fadsl_status fadsl_kernel_param_info(const fadsl_kernel *k, int i, fadsl_param_info *out) {
  if (!out) return FADSL_ERROR_INVALID_ARGUMENT;
  memset(out, 0, sizeof *out);
  if (!k || i < 0 || i >= k->info->nparams) return FADSL_ERROR_INVALID_ARGUMENT;
  const FaParamInfo *p = &k->info->params[i];
  out->name = p->name;
  out->kind = p->kind == PARAM_POINTER  ? FADSL_PARAM_POINTER
              : p->kind == PARAM_SCALAR ? FADSL_PARAM_SCALAR
                                        : FADSL_PARAM_CONSTEXPR;
  if (p->kind != PARAM_CONSTEXPR) {
    out->dtype = p->dtype != DT_VOID ? fa_dtype_name(p->dtype) : NULL;
    out->dtype_param = p->dtype_param;
  }
  out->has_default = p->kind == PARAM_CONSTEXPR && p->has_default;
  out->tunable = p->kind == PARAM_CONSTEXPR && is_tune_axis(k->info, p->name);
  return FADSL_SUCCESS;
}
