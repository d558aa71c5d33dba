/* bind.c - argument sets: binding kernel arguments by name or position,
 * with the checks a caller needs (unknown name, wrong kind, duplicate,
 * missing). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_program.h"

FADSL_API int fadsl_kernel_param_count(const fadsl_kernel *k) { return k ? k->info->nparams : 0; }

FADSL_API const char *fadsl_kernel_name(const fadsl_kernel *k) { return k ? k->info->name : NULL; }

FADSL_API fadsl_status fadsl_kernel_param(const fadsl_kernel *k, int i, const char **name,
                                          fadsl_param_kind *kind) {
  if (!k || i < 0 || i >= k->info->nparams) return FADSL_ERROR_INVALID_ARGUMENT;
  const FaParamInfo *p = &k->info->params[i];
  if (name) *name = p->name;
  if (kind)
    *kind = p->kind == PARAM_POINTER  ? FADSL_PARAM_POINTER
            : p->kind == PARAM_SCALAR ? FADSL_PARAM_SCALAR
                                      : FADSL_PARAM_CONSTEXPR;
  return FADSL_SUCCESS;
}

const char *fa_rt_arg_kind_name(fadsl_arg_kind kind) {
  switch (kind) {
    case FADSL_ARG_NONE: return "nothing (FADSL_ARG_NONE)";
    case FADSL_ARG_PTR: return "a device pointer (FADSL_ARG_PTR)";
    case FADSL_ARG_I32: return "an i32 (FADSL_ARG_I32)";
    case FADSL_ARG_I64: return "an i64 (FADSL_ARG_I64)";
    case FADSL_ARG_F32: return "an f32 (FADSL_ARG_F32)";
    case FADSL_ARG_F64: return "an f64 (FADSL_ARG_F64)";
    case FADSL_ARG_INT: return "a constexpr int (FADSL_ARG_INT)";
    case FADSL_ARG_FLOAT: return "a constexpr float (FADSL_ARG_FLOAT)";
    case FADSL_ARG_BOOL: return "a constexpr bool (FADSL_ARG_BOOL)";
    case FADSL_ARG_DTYPE: return "a dtype (FADSL_ARG_DTYPE)";
  }
  return "an unknown kind of value";
}

fadsl_arg_kind fa_rt_scalar_arg_kind(DType dt) {
  switch (dt) {
    case DT_I1: case DT_I8: case DT_I16: case DT_I32: case DT_U32: return FADSL_ARG_I32;
    case DT_I64: return FADSL_ARG_I64;
    case DT_F16: case DT_BF16: case DT_F32: return FADSL_ARG_F32;
    case DT_F64: return FADSL_ARG_F64;
    default: return FADSL_ARG_NONE;
  }
}

static fadsl_context *args_ctx(const fadsl_args *a) { return a->kernel->program->ctx; }

FADSL_API fadsl_status fadsl_args_create(fadsl_kernel *k, fadsl_args **out) {
  if (!k || !out) return FADSL_ERROR_INVALID_ARGUMENT;
  *out = NULL;
  fadsl_args *a = calloc(1, sizeof *a);
  int n = k->info->nparams;
  FaRtArg *args = calloc(n > 0 ? (size_t)n : 1, sizeof *args);
  if (!a || !args) {
    free(a);
    free(args);
    return FADSL_ERROR_OUT_OF_MEMORY;
  }
  a->kernel = k;
  a->args = args;
  a->nargs = n;
  *out = a;
  return FADSL_SUCCESS;
}

FADSL_API void fadsl_args_destroy(fadsl_args *a) {
  if (!a) return;
  free(a->args);
  free(a);
}

FADSL_API void fadsl_args_clear(fadsl_args *a) {
  if (!a) return;
  memset(a->args, 0, sizeof *a->args * (size_t)(a->nargs > 0 ? a->nargs : 1));
  memset(&a->config, 0, sizeof a->config);
  a->has_grid = false;
  memset(a->grid, 0, sizeof a->grid);
}

static bool is_constexpr_kind(fadsl_arg_kind k) {
  return k == FADSL_ARG_INT || k == FADSL_ARG_FLOAT || k == FADSL_ARG_BOOL || k == FADSL_ARG_DTYPE;
}
static bool is_scalar_kind(fadsl_arg_kind k) {
  return k == FADSL_ARG_I32 || k == FADSL_ARG_I64 || k == FADSL_ARG_F32 || k == FADSL_ARG_F64;
}

/* Binds parameter i after checking the value's kind against it. */
static fadsl_status bind(fadsl_args *a, int i, fadsl_value v) {
  fadsl_context *ctx = args_ctx(a);
  const FaKernelInfo *k = a->kernel->info;
  const FaParamInfo *p = &k->params[i];
  const char *kname = k->name;
  if (a->args[i].bound)
    return fa_rt_fail(ctx, FADSL_ERROR_BINDING,
                      "argument '%s' (position %d) of kernel '%s' is already bound; call "
                      "fadsl_args_clear to bind a new set",
                      p->name, i, kname);
  switch (p->kind) {
    case PARAM_POINTER:
      if (v.kind != FADSL_ARG_PTR)
        return fa_rt_fail(ctx, FADSL_ERROR_BINDING,
                          "argument '%s' of kernel '%s' is a pointer and takes a device pointer "
                          "(FADSL_ARG_PTR), not %s",
                          p->name, kname, fa_rt_arg_kind_name(v.kind));
      break;
    case PARAM_SCALAR: {
      fadsl_arg_kind want = fa_rt_scalar_arg_kind(p->dtype);
      if (want == FADSL_ARG_NONE ? !is_scalar_kind(v.kind) : v.kind != want)
        return fa_rt_fail(ctx, FADSL_ERROR_BINDING,
                          "argument '%s' of kernel '%s' is a runtime scalar and takes %s, not %s",
                          p->name, kname,
                          want == FADSL_ARG_NONE ? "a scalar (FADSL_ARG_I32/I64/F32/F64)"
                                                 : fa_rt_arg_kind_name(want),
                          fa_rt_arg_kind_name(v.kind));
      break;
    }
    case PARAM_CONSTEXPR:
      if (!is_constexpr_kind(v.kind))
        return fa_rt_fail(ctx, FADSL_ERROR_BINDING,
                          "argument '%s' of kernel '%s' is a constexpr and takes FADSL_ARG_INT, "
                          "FADSL_ARG_FLOAT, FADSL_ARG_BOOL or FADSL_ARG_DTYPE, not %s",
                          p->name, kname, fa_rt_arg_kind_name(v.kind));
      break;
  }
  FaRtArg *slot = &a->args[i];
  if (v.kind == FADSL_ARG_DTYPE) {
    if (!v.v.dtype || !*v.v.dtype || strlen(v.v.dtype) >= sizeof slot->dtype_name)
      return fa_rt_fail(ctx, FADSL_ERROR_BINDING, "argument '%s' of kernel '%s': '%s' is not a dtype",
                        p->name, kname, v.v.dtype ? v.v.dtype : "(null)");
    strcpy(slot->dtype_name, v.v.dtype);
    v.v.dtype = slot->dtype_name;
  }
  slot->value = v;
  slot->bound = true;
  return FADSL_SUCCESS;
}

FADSL_API fadsl_status fadsl_args_set(fadsl_args *a, const char *name, fadsl_value v) {
  if (!a || !name) return FADSL_ERROR_INVALID_ARGUMENT;
  const FaKernelInfo *k = a->kernel->info;
  for (int i = 0; i < k->nparams; i++)
    if (strcmp(k->params[i].name, name) == 0) return bind(a, i, v);
  StrBuf names;
  fa_sb_init(&names);
  for (int i = 0; i < k->nparams; i++) fa_sb_printf(&names, "%s%s", i ? ", " : "", k->params[i].name);
  fadsl_status st = fa_rt_fail(args_ctx(a), FADSL_ERROR_BINDING,
                               "kernel '%s' has no parameter '%s' (its parameters: %s)", k->name,
                               name, names.data ? names.data : "none");
  fa_sb_free(&names);
  return st;
}

FADSL_API fadsl_status fadsl_args_set_at(fadsl_args *a, int position, fadsl_value v) {
  if (!a) return FADSL_ERROR_INVALID_ARGUMENT;
  const FaKernelInfo *k = a->kernel->info;
  if (position < 0 || position >= k->nparams)
    return fa_rt_fail(args_ctx(a), FADSL_ERROR_BINDING,
                      "kernel '%s' has %d parameters; there is no position %d", k->name,
                      k->nparams, position);
  return bind(a, position, v);
}

FADSL_API fadsl_status fadsl_args_set_ptr(fadsl_args *a, const char *n, uint64_t p) { return fadsl_args_set(a, n, fadsl_ptr(p)); }
FADSL_API fadsl_status fadsl_args_set_i32(fadsl_args *a, const char *n, int32_t v) { return fadsl_args_set(a, n, fadsl_i32(v)); }
FADSL_API fadsl_status fadsl_args_set_i64(fadsl_args *a, const char *n, int64_t v) { return fadsl_args_set(a, n, fadsl_i64(v)); }
FADSL_API fadsl_status fadsl_args_set_f32(fadsl_args *a, const char *n, float v) { return fadsl_args_set(a, n, fadsl_f32(v)); }
FADSL_API fadsl_status fadsl_args_set_f64(fadsl_args *a, const char *n, double v) { return fadsl_args_set(a, n, fadsl_f64(v)); }
FADSL_API fadsl_status fadsl_args_set_int(fadsl_args *a, const char *n, int64_t v) { return fadsl_args_set(a, n, fadsl_int(v)); }
FADSL_API fadsl_status fadsl_args_set_float(fadsl_args *a, const char *n, double v) { return fadsl_args_set(a, n, fadsl_float(v)); }
FADSL_API fadsl_status fadsl_args_set_bool(fadsl_args *a, const char *n, int v) { return fadsl_args_set(a, n, fadsl_bool(v)); }
FADSL_API fadsl_status fadsl_args_set_dtype(fadsl_args *a, const char *n, const char *d) { return fadsl_args_set(a, n, fadsl_dtype(d)); }

FADSL_API fadsl_status fadsl_args_set_config_axis(fadsl_args *a, const char *name, int value) {
  if (!a || !name) return FADSL_ERROR_INVALID_ARGUMENT;
  const FaConfigAxis *ax = fa_config_axis(name);
  if (!ax) {
    StrBuf names;
    fa_sb_init(&names);
    int n;
    const FaConfigAxis *axes = fa_config_axes(&n);
    for (int i = 0; i < n; i++) fa_sb_printf(&names, "%s%s", i ? ", " : "", axes[i].name);
    fadsl_status st = fa_rt_fail(args_ctx(a), FADSL_ERROR_INVALID_ARGUMENT,
                                 "'%s' is not a launch-configuration axis (%s)", name, names.data);
    fa_sb_free(&names);
    return st;
  }
  if (value != 0 && !fa_config_allowed(ax, value))
    return fa_rt_fail(args_ctx(a), FADSL_ERROR_INVALID_ARGUMENT, "%s must be 0 (not given) or %s, not %d", name,
                      ax->allowed, value);
  fa_config_set(&a->config, ax, value);
  return FADSL_SUCCESS;
}

FADSL_API int fadsl_config_value(const char *name, const char *text) {
  if (!text || !*text) return 0;
  int v;
  return fa_config_parse(fa_config_axis(name), text, &v) ? v : -1;
}

FADSL_API const char *fadsl_config_allowed(const char *name) {
  const FaConfigAxis *ax = fa_config_axis(name);
  return ax ? ax->allowed : NULL;
}

FADSL_API fadsl_status fadsl_args_set_config(fadsl_args *a, int warps, int stages) {
  if (!a) return FADSL_ERROR_INVALID_ARGUMENT;
  FaLaunchConfig keep = a->config;
  fadsl_status st = fadsl_args_set_config_axis(a, "warps", warps);
  if (st == FADSL_SUCCESS) st = fadsl_args_set_config_axis(a, "stages", stages);
  if (st != FADSL_SUCCESS) a->config = keep;
  return st;
}

fadsl_status fa_rt_check_grid(fadsl_context *ctx, const char *kernel, const int64_t grid[3], unsigned out[3]) {
  static const int64_t limit[3] = {2147483647, 65535, 65535};
  for (int d = 0; d < 3; d++) {
    if (grid[d] < 0 || grid[d] > limit[d])
      return fa_rt_fail(ctx, FADSL_ERROR_INVALID_ARGUMENT,
                        "kernel '%s': grid dimension %d is %" PRId64 " (must be 0..%" PRId64 ")", kernel, d,
                        grid[d], limit[d]);
    out[d] = (unsigned)grid[d];
  }
  return FADSL_SUCCESS;
}

FADSL_API fadsl_status fadsl_args_set_grid(fadsl_args *a, int64_t gx, int64_t gy, int64_t gz) {
  if (!a) return FADSL_ERROR_INVALID_ARGUMENT;
  const int64_t grid[3] = {gx, gy, gz};
  unsigned checked[3];
  fadsl_status st = fa_rt_check_grid(args_ctx(a), a->kernel->info->name, grid, checked);
  if (st != FADSL_SUCCESS) return st;
  a->has_grid = true;
  memcpy(a->grid, checked, sizeof checked);
  return FADSL_SUCCESS;
}

/* ---- values for the configuration's resolution ------------------------------------ */

FaConst fa_rt_arg_const(const fadsl_args *a, int i) {
  FaConst c;
  memset(&c, 0, sizeof c);
  const FaRtArg *arg = &a->args[i];
  if (!arg->bound) {
    const FaParamInfo *p = &a->kernel->info->params[i];
    if (p->kind == PARAM_CONSTEXPR && p->has_default) c = p->default_value;
    return c;
  }
  switch (arg->value.kind) {
    case FADSL_ARG_I32: c.kind = CK_INT; c.i = arg->value.v.i32; break;
    case FADSL_ARG_I64: case FADSL_ARG_INT: c.kind = CK_INT; c.i = arg->value.v.i64; break;
    case FADSL_ARG_BOOL: c.kind = CK_BOOL; c.i = arg->value.v.i64 != 0; break;
    case FADSL_ARG_F32: c.kind = CK_FLOAT; c.f = arg->value.v.f32; break;
    case FADSL_ARG_F64: case FADSL_ARG_FLOAT: c.kind = CK_FLOAT; c.f = arg->value.v.f64; break;
    case FADSL_ARG_DTYPE: c.kind = CK_DTYPE; c.dtype = fa_dtype_from_name(arg->dtype_name); break;
    default: break;
  }
  return c;
}

int fa_rt_bound_values(const fadsl_args *a, FaBinding *out) {
  const FaKernelInfo *k = a->kernel->info;
  int n = 0;
  for (int i = 0; i < k->nparams; i++) {
    FaConst c = fa_rt_arg_const(a, i);
    if (a->args[i].bound && c.kind != CK_NONE) out[n++] = (FaBinding){k->params[i].name, c};
  }
  return n;
}

/* A default point a launch chose before, kept on its kernel.  Choosing one
 * walks the space and evaluates the prune and prefer at each point: with a
 * prefer that takes none (attn_fwd up to d_head 128), every point, which
 * cost about a millisecond a launch on the host; the kept point costs a
 * comparison of keys.  The key holds the target, the given configuration and
 * the values in `known` the point can depend on (fa_autotune_point_reads),
 * so that launches that differ in other scalars (a sequence length no prune
 * reads) share it. */
struct FaRtDefaultMemo {
  FaRtDefaultMemo *next;
  char *key;
  FaAutotunePoint pt;           /* values, chosen and their strings in one block, `block` */
  void *block;
};

/* Launches of one kernel keep at most this many points (the oldest go). */
enum { DEFAULT_MEMO_MAX = 64 };

static void memo_entry_free(FaRtDefaultMemo *m) {
  free(m->key);
  free(m->block);
  free(m);
}

void fa_rt_default_memo_free(fadsl_kernel *k) {
  for (FaRtDefaultMemo *m = k->defaults, *next; m; m = next) {
    next = m->next;
    memo_entry_free(m);
  }
  k->defaults = NULL;
  k->ndefaults = 0;
}

/* A value, exactly (floats in hexadecimal). */
static void key_const(StrBuf *sb, FaConst c) {
  fa_sb_printf(sb, "%d:%" PRId64 ":%a:%d:%s;", (int)c.kind, c.i, c.f, (int)c.dtype, c.s ? c.s : "");
}

/* Whether the default point can depend on the value of `name`: the
 * kernel's answer for its parameters, worked out when the program was
 * loaded. */
static bool point_reads(const fadsl_kernel *kern, const char *name) {
  const FaKernelInfo *k = kern->info;
  if (kern->point_reads)
    for (int j = 0; j < k->nparams; j++)
      if (k->params[j].name == name || !strcmp(k->params[j].name, name))
        return kern->point_reads[j];
  return fa_autotune_point_reads(k, name);
}

static char *memo_key(const fadsl_kernel *kern, const FaBinding *known, int nknown, const FaLaunchConfig *given,
                      int arch) {
  StrBuf sb;
  fa_sb_init(&sb);
  fa_sb_printf(&sb, "arch=%d;", arch);
  int naxes;
  const FaConfigAxis *axes = fa_config_axes(&naxes);
  for (int i = 0; i < naxes; i++)
    fa_sb_printf(&sb, "%s=%d;", axes[i].name, given ? fa_config_get(given, &axes[i]) : 0);
  for (int i = 0; i < nknown; i++)
    if (known[i].name && point_reads(kern, known[i].name)) {
      fa_sb_printf(&sb, "%s=", known[i].name);
      key_const(&sb, known[i].value);
    }
  return sb.data ? sb.data : strdup("");
}

/* A copy of pt whose arrays and strings live in one malloc'd block (NULL when
 * out of memory). */
static void *copy_point(const FaKernelInfo *k, const FaAutotunePoint *pt, FaAutotunePoint *out) {
  int nt = k->ntune;
  size_t strings = 0;
  for (int t = 0; t < nt; t++)
    if (pt->values[t].kind == CK_STR && pt->values[t].s)
      strings += strlen(pt->values[t].s) + 1;
  size_t values_size = sizeof *pt->values * (size_t)(nt + 1);
  char *block = malloc(values_size + sizeof *pt->chosen * (size_t)(nt + 1) + strings);
  if (!block)
    return NULL;
  *out = *pt;
  out->values = (FaConst *)(void *)block;
  out->chosen = (bool *)(block + values_size);
  char *text = (char *)(out->chosen + nt + 1);
  for (int t = 0; t < nt; t++) {
    out->values[t] = pt->values[t];
    out->chosen[t] = pt->chosen[t];
    if (pt->values[t].kind == CK_STR && pt->values[t].s) {
      size_t len = strlen(pt->values[t].s) + 1;
      memcpy(text, pt->values[t].s, len);
      out->values[t].s = text;
      text += len;
    }
  }
  return block;
}

/* The kept point for key into pt (its arrays in arena); false when there is
 * none (or no memory for the copy). */
static bool memo_find(fadsl_kernel *kern, const char *key, Arena *arena, FaAutotunePoint *pt) {
  bool found = false;
  pthread_mutex_lock(&kern->program->lock);
  for (const FaRtDefaultMemo *m = kern->defaults; m && !found; m = m->next) {
    if (strcmp(m->key, key) != 0)
      continue;
    int nt = kern->info->ntune;
    FaConst *values = fa_arena_alloc(arena, sizeof *values * (size_t)(nt + 1));
    bool *chosen = fa_arena_alloc(arena, sizeof *chosen * (size_t)(nt + 1));
    if (values && chosen) {
      *pt = m->pt;
      memcpy(values, m->pt.values, sizeof *values * (size_t)nt);
      memcpy(chosen, m->pt.chosen, sizeof *chosen * (size_t)nt);
      pt->values = values;
      pt->chosen = chosen;
      found = true;
    }
  }
  pthread_mutex_unlock(&kern->program->lock);
  return found;
}

/* Keeps pt under key (taking key); drops the oldest beyond DEFAULT_MEMO_MAX.
 * Out of memory it keeps nothing: the next launch chooses again. */
static void memo_keep(fadsl_kernel *kern, char *key, const FaAutotunePoint *pt) {
  FaRtDefaultMemo *m = calloc(1, sizeof *m);
  if (m)
    m->block = copy_point(kern->info, pt, &m->pt);
  if (!m || !m->block) {
    free(m);
    free(key);
    return;
  }
  m->key = key;
  pthread_mutex_lock(&kern->program->lock);
  m->next = kern->defaults;
  kern->defaults = m;
  if (++kern->ndefaults > DEFAULT_MEMO_MAX) {
    FaRtDefaultMemo **last = &kern->defaults;
    while ((*last)->next)
      last = &(*last)->next;
    memo_entry_free(*last);
    *last = NULL;
    kern->ndefaults--;
  }
  pthread_mutex_unlock(&kern->program->lock);
}

fadsl_status fa_rt_default_point(fadsl_context *ctx, const fadsl_args *a, const FaBinding *known, int nknown,
                                 const FaLaunchConfig *given, int arch, Arena *arena, FaAutotunePoint *pt) {
  const FaKernelInfo *k = a->kernel->info;
  char *key = memo_key(a->kernel, known, nknown, given, arch);
  if (!key)
    return FADSL_ERROR_OUT_OF_MEMORY;
  if (memo_find(a->kernel, key, arena, pt)) {
    free(key);
  } else {
    if (!fa_autotune_default_point(arena, a->kernel->program->prog, k, known, nknown, given, arch, pt)) {
      free(key);
      return FADSL_ERROR_OUT_OF_MEMORY;
    }
    memo_keep(a->kernel, key, pt);
  }
  if (pt->none_passes && ctx->log.level >= FA_LOG_WARN) {
    StrBuf sb;
    fa_sb_init(&sb);
    const SrcLoc at = k->prune->loc;
    fa_sb_printf(&sb, "%s:%d:%d: ", at.src ? at.src->name : "?", at.line, at.col);
    fa_autotune_none_passes_message(k, pt, &sb);
    fa_sb_puts(&sb, "; using the first values:");
    for (int t = 0; t < k->ntune; t++) {
      if (!pt->chosen[t]) continue;
      fa_sb_printf(&sb, " %s=", k->tune[t].name);
      fa_const_print(pt->values[t], &sb);
    }
    fprintf(ctx->log.stream, "fadsl: warning: %s\n", sb.data ? sb.data : "");
    fa_sb_free(&sb);
  }
  return FADSL_SUCCESS;
}

/* Whether a constexpr is an axis of the kernel's @autotune space (then the
 * tuning database or the default fills it). */
static bool is_tune_axis(const FaKernelInfo *k, const char *name) {
  for (int i = 0; i < k->ntune; i++)
    if (strcmp(k->tune[i].name, name) == 0) return true;
  return false;
}

fadsl_status fa_rt_args_check_complete(const fadsl_args *a, bool compile_only) {
  const FaKernelInfo *k = a->kernel->info;
  StrBuf missing;
  fa_sb_init(&missing);
  int n = 0;
  for (int i = 0; i < k->nparams; i++) {
    const FaParamInfo *p = &k->params[i];
    if (a->args[i].bound) continue;
    bool needed = p->kind == PARAM_CONSTEXPR ? !p->has_default && !is_tune_axis(k, p->name)
                                             : !compile_only;
    if (!needed) continue;
    fa_sb_printf(&missing, "%s'%s' (%s)", n ? ", " : "", p->name,
                 p->kind == PARAM_POINTER ? "pointer"
                 : p->kind == PARAM_SCALAR ? "scalar"
                                           : "constexpr");
    n++;
  }
  fadsl_status st = FADSL_SUCCESS;
  if (n)
    st = fa_rt_fail(args_ctx(a), FADSL_ERROR_BINDING, "kernel '%s': missing argument%s %s",
                    k->name, n > 1 ? "s" : "", missing.data);
  fa_sb_free(&missing);
  return st;
}
