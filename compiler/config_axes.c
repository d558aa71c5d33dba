/* config_axes.c - the launch-configuration axes (see sema.h): one row each. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sema.h"

/* FaPipelineKind (cuda_backend.h) from 1: each adds one mechanism to the one before */
static const char *const pipeline_names[] = {"cp_async", "tma", "tma_async", "tma_ws", "tma_ws_pp"};
/* FaScheduleKind (cuda_backend.h) from 1 */
static const char *const schedule_names[] = {"grid", "persistent"};

static const FaConfigAxis axes[] = {
    {"warps", 4, 1, 32, true, "a power of two from 1 to 32", offsetof(FaLaunchConfig, warps),
     "warps per program, 32 threads each", NULL},
    {"stages", 2, 1, 16, false, "an integer from 1 to 16", offsetof(FaLaunchConfig, stages),
     "software pipelining depth: buffers per loaded tile", NULL},
    {"pipeline", 2, 1, 5, false, "one of cp_async, tma, tma_async, tma_ws, tma_ws_pp (1 to 5)",
     offsetof(FaLaunchConfig, pipeline),
     "how loads feeding products are pipelined on sm_90a: cp_async, tma (the default: bulk tensor copies, "
     "measured 1.3 to 1.5x cp_async at the same configurations on an H200), tma_async, tma_ws, tma_ws_pp; other targets use cp.async",
     pipeline_names},
    {"schedule", 1, 1, 2, false, "one of grid, persistent (1 to 2)", offsetof(FaLaunchConfig, schedule),
     "how programs map onto thread blocks: grid (one each) or persistent (one per resident block, "
     "each looping over programs)",
     schedule_names},
};

const FaConfigAxis *fa_config_axes(int *n) {
  *n = (int)(sizeof axes / sizeof *axes);
  return axes;
}

const FaConfigAxis *fa_config_axis(const char *name) {
  for (size_t i = 0; name && i < sizeof axes / sizeof *axes; i++)
    if (!strcmp(axes[i].name, name))
      return &axes[i];
  return NULL;
}

int fa_config_get(const FaLaunchConfig *c, const FaConfigAxis *ax) {
  int v;
  memcpy(&v, (const char *)c + ax->offset, sizeof v);
  return v;
}

void fa_config_set(FaLaunchConfig *c, const FaConfigAxis *ax, int value) {
  memcpy((char *)c + ax->offset, &value, sizeof value);
}

bool fa_config_allowed(const FaConfigAxis *ax, int64_t value) {
  if (value < ax->min || value > ax->max)
    return false;
  return !ax->pow2 || (value & (value - 1)) == 0;
}

void fa_config_fill_defaults(FaLaunchConfig *c) {
  for (size_t i = 0; i < sizeof axes / sizeof *axes; i++)
    if (fa_config_get(c, &axes[i]) <= 0)
      fa_config_set(c, &axes[i], axes[i].default_value);
}

/* The numeric axes always; a named one (pipeline, schedule) only where it
 * is not its default, so that the common launch reads "warps=4 stages=2". */
void fa_config_print(const FaLaunchConfig *c, StrBuf *out) {
  for (size_t i = 0; i < sizeof axes / sizeof *axes; i++) {
    int v = fa_config_get(c, &axes[i]);
    const char *name = fa_config_value_name(&axes[i], v);
    if (name && v == axes[i].default_value)
      continue;
    if (v > 0 && name)
      fa_sb_printf(out, "%s%s=%s", out->len ? " " : "", axes[i].name, name);
    else if (v > 0)
      fa_sb_printf(out, "%s%s=%d", out->len ? " " : "", axes[i].name, v);
  }
}

/* The name of v where `axis` is a named launch setting, else NULL. */
static const char *axis_value_name(const char *axis, FaConst v) {
  return v.kind == CK_INT ? fa_config_value_name(fa_config_axis(axis), (int)v.i) : NULL;
}

FaConst fa_config_prune_value(const char *axis, FaConst v) {
  const char *name = axis_value_name(axis, v);
  if (name)
    return (FaConst){.kind = CK_STR, .s = name};
  return v;
}

void fa_config_print_value(const char *axis, FaConst v, StrBuf *out) {
  const char *name = axis_value_name(axis, v);
  if (name)
    fa_sb_puts(out, name);
  else
    fa_const_print(v, out);
}

const char *fa_config_value_name(const FaConfigAxis *ax, int value) {
  if (!ax || !ax->names || value < ax->min || value > ax->max)
    return NULL;
  return ax->names[value - ax->min];
}

bool fa_config_from_env(const FaLaunchConfig *given, FaLaunchConfig *out, const FaConfigAxis **bad, char *var,
                        size_t var_size) {
  for (size_t i = 0; i < sizeof axes / sizeof *axes; i++) {
    if (!axes[i].names || fa_config_get(given, &axes[i]) > 0)
      continue;
    char name[48];
    int n = snprintf(name, sizeof name, "FADSL_%s", axes[i].name);
    for (int c = 6; c < n && name[c]; c++)
      if (name[c] >= 'a' && name[c] <= 'z')
        name[c] = (char)(name[c] - 'a' + 'A');
    const char *text = getenv(name);
    if (!text || !*text)
      continue;
    int v;
    if (!fa_config_parse(&axes[i], text, &v)) {
      if (bad)
        *bad = &axes[i];
      if (var && var_size)
        snprintf(var, var_size, "%s", name);
      return false;
    }
    fa_config_set(out, &axes[i], v);
  }
  return true;
}

bool fa_config_parse(const FaConfigAxis *ax, const char *text, int *value) {
  if (!ax || !text || !*text)
    return false;
  for (int v = ax->min; ax->names && v <= ax->max; v++)
    if (!strcmp(text, ax->names[v - ax->min])) {
      *value = v;
      return true;
    }
  char *end = NULL;
  long n = strtol(text, &end, 10);
  if (!end || *end || !fa_config_allowed(ax, n))
    return false;
  *value = (int)n;
  return true;
}

int fa_config_prune_bindings(const FaKernelInfo *k, const FaLaunchConfig *given, int arch, FaBinding *out) {
  int n = 0;
  for (size_t i = 0; i < sizeof axes / sizeof *axes; i++) {
    bool in_space = false;
    for (int t = 0; t < k->ntune; t++)
      in_space |= !strcmp(k->tune[t].name, axes[i].name);
    if (in_space)
      continue;
    int v = given ? fa_config_get(given, &axes[i]) : 0;
    out[n].name = axes[i].name;
    out[n++].value =
        fa_config_prune_value(axes[i].name, (FaConst){CK_INT, v > 0 ? v : axes[i].default_value, 0, DT_VOID, NULL});
  }
  out[n].name = FA_PRUNE_ARCH;
  out[n++].value = (FaConst){CK_INT, arch, 0, DT_VOID, NULL};
  return n;
}
