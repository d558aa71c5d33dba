/* cuda_target.c - names of the GPU architectures the CUDA backend targets. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_backend.h"

/* Accepts "sm_80", "sm_86", "sm_90", "sm_90a", "compute_80" ... (also "80",
 * "90a").  The backend needs mma.sync m16n8k16 with bf16 and cp.async, so
 * anything below sm_80 is refused; an "a" suffix (arch-specific features
 * such as wgmma) exists only for sm_90 and later. */
bool fa_cuda_target_parse(const char *arch, FaCudaTarget *out) {
  if (!arch || !out)
    return false;
  if (!strncmp(arch, "sm_", 3))
    arch += 3;
  else if (!strncmp(arch, "compute_", 8))
    arch += 8;
  if (arch[0] < '1' || arch[0] > '9')
    return false;
  char *end;
  long sm = strtol(arch, &end, 10);
  if (end == arch || sm < 80 || sm > 999)
    return false;
  bool specific = false;
  if (*end == 'a') {
    specific = true;
    end++;
  }
  if (*end != '\0' || (specific && sm < 90))
    return false;
  out->sm = (int)sm;
  out->arch_specific = specific;
  return true;
}

void fa_cuda_target_name(FaCudaTarget t, char *buf, size_t size) {
  snprintf(buf, size, "sm_%d%s", t.sm, t.arch_specific ? "a" : "");
}

/* The pipeline choices are the values of the launch-configuration axis
 * "pipeline" (config_axes.c). */
const char *fa_pipeline_name(int kind) {
  const char *n = fa_config_value_name(fa_config_axis("pipeline"), kind > 0 ? kind : FA_PIPELINE_CP_ASYNC);
  return n ? n : "?";
}

int fa_pipeline_parse(const char *name) {
  int v;
  return fa_config_parse(fa_config_axis("pipeline"), name, &v) ? v : -1;
}

const char *fa_pipeline_names(void) { return "cp_async, tma, tma_async, tma_ws, tma_ws_pp"; }
