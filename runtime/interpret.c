/* interpret.c - fadsl_interpret: a kernel run on the CPU interpreter over
 * host memory, with the same argument sets as fadsl_launch.
 *
 * Pointer arguments are host addresses (bound with fadsl_args_set_ptr); each
 * must lie in one of the regions the caller hands over, which plays the part
 * cuMemGetAddressRange plays for device memory: the buffer bound to the
 * interpreter runs from the pointer to the end of its region, so every access
 * is checked against memory the caller owns (and against the parameter's
 * declared extent, when it has one).
 *
 * The configuration is resolved as for a launch, without the tuning
 * database (whose entries describe GPUs): explicit values, else the default
 * point of the @autotune space (autotune_point.h) for no GPU target.
 * Each call specialises the kernel afresh (milliseconds, next to an
 * interpreted run). */
#include "config.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "interp.h"
#include "rt_program.h"

/* ---- the configuration --------------------------------------------------------- */

typedef struct InterpPlan {
  Arena arena;
  FaBinding *binds;             /* every constexpr with a value */
  int nbinds;
  FaLaunchConfig config;
  char *config_label;           /* "warps=4 stages=2" (arena) */
  const char *source;           /* "explicit", "default", "explicit+default" */
} InterpPlan;

/* The caller's values where bound, else the default point (autotune_point.h). */
static fadsl_status resolve(fadsl_context *ctx, const fadsl_args *a, InterpPlan *plan) {
  const FaKernelInfo *k = a->kernel->info;
  FaBinding *known = fa_arena_alloc(&plan->arena, sizeof *known * (size_t)(k->nparams + 1));
  plan->binds = fa_arena_alloc(&plan->arena, sizeof *plan->binds * (size_t)(k->nparams + 1));
  if (!known || !plan->binds) return FADSL_ERROR_OUT_OF_MEMORY;
  int nknown = fa_rt_bound_values(a, known);
  FaAutotunePoint pt;
  /* the interpreter is no GPU: a prune's `arch` is FA_ARCH_NONE (sema.h) */
  fadsl_status st = fa_rt_default_point(ctx, a, known, nknown, &a->config, FA_ARCH_NONE, &plan->arena, &pt);
  if (st != FADSL_SUCCESS) return st;
  plan->config = pt.config;
  plan->source = pt.source;
  StrBuf label;
  fa_sb_init(&label);
  fa_config_print(&plan->config, &label);
  plan->config_label = fa_arena_strdup(&plan->arena, label.data ? label.data : "");
  fa_sb_free(&label);
  if (!plan->config_label) return FADSL_ERROR_OUT_OF_MEMORY;
  for (int i = 0; i < k->nparams; i++) {
    const FaParamInfo *p = &k->params[i];
    if (p->kind != PARAM_CONSTEXPR) continue;
    FaConst c = fa_rt_arg_const(a, i);
    for (int t = 0; t < k->ntune; t++)
      if (pt.chosen[t] && !strcmp(k->tune[t].name, p->name)) c = pt.values[t];
    if (a->args[i].bound && a->args[i].value.kind == FADSL_ARG_DTYPE && c.dtype == DT_VOID)
      return fa_rt_fail(ctx, FADSL_ERROR_BINDING,
                        "argument '%s' of kernel '%s': '%s' is not a dtype (f16, bf16, f32, f64, "
                        "i32, i64, ...)",
                        p->name, k->name, a->args[i].dtype_name);
    if (c.kind == CK_NONE) continue;   /* missing ones were reported before */
    plan->binds[plan->nbinds].name = p->name;
    plan->binds[plan->nbinds++].value = c;
  }
  return FADSL_SUCCESS;
}

/* ---- binding host memory ---------------------------------------------------------- */

static FaHostValue scalar_value(const FaRtArg *arg) {
  switch (arg->value.kind) {
    case FADSL_ARG_I32: return fa_host_int(DT_I32, arg->value.v.i32);
    case FADSL_ARG_I64: return fa_host_int(DT_I64, arg->value.v.i64);
    case FADSL_ARG_F32: return fa_host_float(DT_F32, arg->value.v.f32);
    case FADSL_ARG_F64: return fa_host_float(DT_F64, arg->value.v.f64);
    default: return fa_host_int(DT_I64, arg->value.v.i64);
  }
}

/* The region holding [ptr, ptr + 1 byte), or NULL. */
static const fadsl_host_region *region_of(uintptr_t ptr, const fadsl_host_region *regions,
                                          int nregions) {
  for (int r = 0; r < nregions; r++) {
    uintptr_t base = (uintptr_t)regions[r].data;
    if (regions[r].data && ptr >= base && ptr < base + regions[r].bytes) return &regions[r];
  }
  return NULL;
}

static fadsl_status bind_pointer(fadsl_context *ctx, const FaKernelInfo *k, FaInterp *in, int p,
                                 const IrParam *ip, uint64_t ptr, const fadsl_host_region *regions,
                                 int nregions) {
  DType et = ip->value->type.pointee;
  size_t esize = (size_t)fa_dtype_size(et);
  if (ptr == 0)
    return fa_rt_fail(ctx, FADSL_ERROR_INVALID_ARGUMENT, "kernel '%s': argument '%s' is a null pointer",
                      k->name, ip->name);
  const fadsl_host_region *r = region_of((uintptr_t)ptr, regions, nregions);
  if (!r)
    return fa_rt_fail(ctx, FADSL_ERROR_INVALID_ARGUMENT,
                      "kernel '%s': argument '%s' (0x%" PRIx64 ") lies in none of the %d host "
                      "buffers given to fadsl_interpret",
                      k->name, ip->name, ptr, nregions);
  if (esize > 1 && ptr % esize)
    return fa_rt_fail(ctx, FADSL_ERROR_INVALID_ARGUMENT,
                      "kernel '%s': argument '%s' (0x%" PRIx64 ") is not aligned to its %zu-byte "
                      "%s elements",
                      k->name, ip->name, ptr, esize, fa_dtype_name(et));
  size_t bytes = (size_t)((uintptr_t)r->data + r->bytes - (uintptr_t)ptr);
  int64_t dims[FA_MAX_RANK];
  int rank = fa_interp_extent(in, p, dims);
  if (rank < 0) return FADSL_ERROR_PROGRAM;
  int64_t need = 1;
  for (int d = 0; d < rank; d++) need *= dims[d] > 0 ? dims[d] : 0;
  if (rank > 0 && (uint64_t)need * esize > bytes) {
    StrBuf shape;
    fa_sb_init(&shape);
    for (int d = 0; d < rank; d++) fa_sb_printf(&shape, "%s%" PRId64, d ? ", " : "", dims[d]);
    fadsl_status st = fa_rt_fail(
        ctx, FADSL_ERROR_INVALID_ARGUMENT,
        "kernel '%s': buffer '%s' is too small: the kernel declares %s[%s] (%" PRIu64
        " bytes) but the host buffer holds %zu bytes from that address",
        k->name, ip->name, fa_dtype_name(et), shape.data, (uint64_t)need * esize, bytes);
    fa_sb_free(&shape);
    return st;
  }
  if (!fa_interp_bind_buffer(in, p, et, (void *)(uintptr_t)ptr, (int64_t)(bytes / esize)))
    return FADSL_ERROR_PROGRAM;
  return FADSL_SUCCESS;
}

/* Binds every runtime argument: scalars first, since the declared extents
 * the pointers are checked against depend on them. */
static fadsl_status bind_all(fadsl_context *ctx, const fadsl_args *a, FaInterp *in, const IrKernel *ir,
                             const fadsl_host_region *regions, int nregions) {
  const FaKernelInfo *k = a->kernel->info;
  const IrFunction *dev = ir->device;
  for (int pass = 0; pass < 2; pass++)
    for (int p = 0; p < dev->nparams; p++) {
      const IrParam *ip = &dev->params[p];
      const FaRtArg *arg = &a->args[ip->source_index];
      bool pointer = ip->value->type.dtype == DT_PTR;
      if (pointer != (pass == 1)) continue;
      if (pointer && arg->value.kind != FADSL_ARG_PTR)
        return fa_rt_fail(ctx, FADSL_ERROR_BINDING, "argument '%s' of kernel '%s' is a pointer, not %s",
                          ip->name, k->name, fa_rt_arg_kind_name(arg->value.kind));
      fadsl_status st = FADSL_SUCCESS;
      if (pointer)
        st = bind_pointer(ctx, k, in, p, ip, arg->value.v.ptr, regions, nregions);
      else if (!fa_interp_bind_scalar(in, p, scalar_value(arg)))
        st = FADSL_ERROR_PROGRAM;
      if (st != FADSL_SUCCESS) return st;
    }
  return FADSL_SUCCESS;
}

/* ---- the call ----------------------------------------------------------------------- */

static void describe(const InterpPlan *plan, fadsl_interpret_info *info) {
  StrBuf sb;
  fa_sb_init(&sb);
  fa_bindings_print(plan->binds, plan->nbinds, &sb);
  snprintf(info->constexprs, sizeof info->constexprs, "%s", sb.data ? sb.data : "");
  fa_sb_free(&sb);
  info->warps = plan->config.warps;
  info->stages = plan->config.stages;
  info->config_source = plan->source;
}

/* The compiler's messages as the context's last error. */
static fadsl_status fail_diag(fadsl_context *ctx, fadsl_status st, const FaCompiler *fc, const char *what) {
  return fa_rt_fail(ctx, st, "%s%s", what,
                    fc->diag.text.data && fc->diag.text.len ? fc->diag.text.data : "(no message)");
}

static fadsl_status run(fadsl_kernel *k, const fadsl_args *a, const InterpPlan *plan,
                        const fadsl_host_region *regions, int nregions,
                        const fadsl_interpret_options *opt, fadsl_interpret_info *info) {
  fadsl_program *prog = k->program;
  fadsl_context *ctx = prog->ctx;
  FaCompiler fc;
  fa_compiler_init(&fc, NULL);
  /* the front end's data is shared with launches: specialise under the lock */
  pthread_mutex_lock(&prog->lock);
  IrKernel *ir = fa_specialize(&fc, prog->prog, k->info, plan->binds, plan->nbinds, plan->config);
  pthread_mutex_unlock(&prog->lock);
  fadsl_status st = FADSL_SUCCESS;
  FaInterp *in = NULL;
  if (!ir || fc.diag.errors > 0) {
    st = fa_rt_fail(ctx, FADSL_ERROR_PROGRAM,
                    "kernel '%s' could not be specialised for %s %s:\n%s",
                    k->info->name, info->constexprs, plan->config_label,
                    fc.diag.text.data ? fc.diag.text.data : "");
  } else if (!(in = fa_interp_new(&fc, ir))) {
    st = fail_diag(ctx, FADSL_ERROR_PROGRAM, &fc, "");
  } else {
    st = bind_all(ctx, a, in, ir, regions, nregions);
    if (st == FADSL_ERROR_PROGRAM) st = fail_diag(ctx, FADSL_ERROR_INVALID_ARGUMENT, &fc, "");
  }
  int64_t grid[3] = {0, 0, 0};
  bool given = opt && (opt->grid[0] || opt->grid[1] || opt->grid[2]);
  if (st == FADSL_SUCCESS && given) {
    for (int d = 0; d < 3; d++) grid[d] = opt->grid[d] > 0 ? opt->grid[d] : 1;
  } else if (st == FADSL_SUCCESS && a->has_grid) {
    for (int d = 0; d < 3; d++) grid[d] = a->grid[d];
  } else if (st == FADSL_SUCCESS && !fa_interp_grid(in, grid)) {
    st = fail_diag(ctx, FADSL_ERROR_PROGRAM, &fc, "computing the grid failed:\n");
  }
  for (int d = 0; st == FADSL_SUCCESS && d < 3; d++)
    if (grid[d] < 0)
      st = fa_rt_fail(ctx, FADSL_ERROR_INVALID_ARGUMENT, "kernel '%s': grid dimension %d is %" PRId64,
                      k->info->name, d, grid[d]);
  memcpy(info->grid, grid, sizeof grid);
  if (st == FADSL_SUCCESS && grid[0] && grid[1] && grid[2]) {
    FaInterpOptions io = {opt && opt->threads > 1 ? opt->threads : 1, grid};
    if (!fa_interp_run(in, &io)) st = fail_diag(ctx, FADSL_ERROR_PROGRAM, &fc, "");
  }
  fa_interp_free(in);
  fa_compiler_free(&fc);
  return st;
}

FADSL_API fadsl_status fadsl_interpret(fadsl_kernel *k, const fadsl_args *a,
                                       const fadsl_host_region *regions, int nregions,
                                       const fadsl_interpret_options *opt,
                                       fadsl_interpret_info *info) {
  fadsl_interpret_info scratch;
  if (!info) info = &scratch;
  memset(info, 0, sizeof *info);
  if (!k || !a || nregions < 0 || (nregions > 0 && !regions)) return FADSL_ERROR_INVALID_ARGUMENT;
  fadsl_context *ctx = k->program->ctx;
  if (a->kernel != k)
    return fa_rt_fail(ctx, FADSL_ERROR_INVALID_ARGUMENT,
                      "the arguments were made for kernel '%s', not '%s'", a->kernel->info->name,
                      k->info->name);
  fadsl_status st = fa_rt_args_check_complete(a, false);
  if (st != FADSL_SUCCESS) return st;
  InterpPlan *plan = calloc(1, sizeof *plan);
  if (!plan) return FADSL_ERROR_OUT_OF_MEMORY;
  fa_arena_init(&plan->arena);
  st = resolve(ctx, a, plan);
  if (st == FADSL_SUCCESS) {
    describe(plan, info);
    st = run(k, a, plan, regions, nregions, opt, info);
  }
  if (st == FADSL_SUCCESS && ctx->log.level >= FA_LOG_INFO)
    fprintf(ctx->log.stream,
            "fadsl: interpret %s [%s] %s (%s) grid=(%" PRId64 ",%" PRId64 ",%" PRId64
            ") threads=%d\n",
            k->info->name, info->constexprs, plan->config_label, info->config_source,
            info->grid[0], info->grid[1], info->grid[2], opt && opt->threads > 1 ? opt->threads : 1);
  fa_arena_free(&plan->arena);
  free(plan);
  return st;
}
