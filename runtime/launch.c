/* launch.c - from bound arguments to a running kernel:
 *   resolve the config (explicit > tuning database > default)
 *   -> fa_cuda_compile (specialise, plan, print) -> cubin (cache / NVRTC)
 *   -> module load -> grid (the caller's, else @kernel(grid=...)) -> cuLaunchKernel. */
#include "config.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cubin.h"
#include "interp.h"
#include "rt_program.h"
#include "tune_db.h"

/* ---- the plan: constexpr values and config of one call ------------------------- */

typedef struct FaRtPlan {
  Arena arena;
  FaBinding *binds;             /* every constexpr with a value, in parameter order */
  int nbinds;
  FaLaunchConfig config;
  const char *source;           /* where the tunable choices came from */
  FaArgFact *facts;             /* what the runtime arguments' values give (see cuda_backend.h) */
  int nfacts;
  char *assume;                 /* the facts as text, "M%16 N%16" (arena) */
  char arch[16];
  int sm;
  bool arch_specific;
  unsigned char key[FA_SHA256_BYTES];
} FaRtPlan;

static const FaParamInfo *find_param(const FaKernelInfo *k, const char *name, int *index) {
  for (int i = 0; i < k->nparams; i++)
    if (strcmp(k->params[i].name, name) == 0) {
      if (index) *index = i;
      return &k->params[i];
    }
  return NULL;
}

/* A bound constexpr as an FaConst. */
static fadsl_status const_of(fadsl_context *ctx, const FaKernelInfo *k, int i, const FaRtArg *arg,
                             FaConst *out) {
  memset(out, 0, sizeof *out);
  switch (arg->value.kind) {
    case FADSL_ARG_INT: out->kind = CK_INT; out->i = arg->value.v.i64; break;
    case FADSL_ARG_BOOL: out->kind = CK_BOOL; out->i = arg->value.v.i64 != 0; break;
    case FADSL_ARG_FLOAT: out->kind = CK_FLOAT; out->f = arg->value.v.f64; break;
    case FADSL_ARG_DTYPE:
      out->kind = CK_DTYPE;
      out->dtype = fa_dtype_from_name(arg->dtype_name);
      if (out->dtype == DT_VOID)
        return fa_rt_fail(ctx, FADSL_ERROR_BINDING,
                          "argument '%s' of kernel '%s': '%s' is not a dtype (f16, bf16, f32, "
                          "f64, i32, i64, ...)",
                          k->params[i].name, k->name, arg->dtype_name);
      break;
    default:
      return fa_rt_fail(ctx, FADSL_ERROR_BINDING, "argument '%s' of kernel '%s' is not a constexpr",
                        k->params[i].name, k->name);
  }
  return FADSL_SUCCESS;
}

/* The value of key parameter `name` for the tuning lookup (CK_NONE when
 * unknown). */
static FaConst key_value(const fadsl_args *a, const char *name) {
  int i;
  if (!find_param(a->kernel->info, name, &i)) {
    FaConst none;
    memset(&none, 0, sizeof none);
    return none;
  }
  return fa_rt_arg_const(a, i);
}

/* Takes what the tuning database's entry gives for the axes the caller left
 * open: configuration axes into *given, constexpr axes appended to known.
 * Returns whether it gave anything. */
static bool take_tuned(const FaKernelInfo *k, const FaTuneChoice *choice, FaBinding *known, int *nknown,
                       FaLaunchConfig *given) {
  bool took = false;
  int naxes;
  const FaConfigAxis *axes = fa_config_axes(&naxes);
  for (int x = 0; x < naxes; x++) {
    int v = fa_config_get(&choice->config, &axes[x]);
    if (fa_config_get(given, &axes[x]) > 0 || v <= 0) continue;
    fa_config_set(given, &axes[x], v);
    took = true;
  }
  for (int t = 0; t < k->ntune; t++) {
    if (fa_autotune_axis_fixed(k, t, known, *nknown, given)) continue;
    for (int c = 0; c < choice->nvalues; c++)
      if (!strcmp(choice->values[c].name, k->tune[t].name)) {
        known[(*nknown)++] = choice->values[c];
        took = true;
        break;
      }
  }
  return took;
}

/* Resolves every tunable choice: explicit > tuning database > default. */
static fadsl_status resolve_plan(fadsl_context *ctx, const fadsl_args *a, FaRtPlan *plan) {
  const FaKernelInfo *k = a->kernel->info;
  int nt = k->ntune;

  /* 1. explicit: the axes the caller bound; the other bound values are what a
     prune may read */
  FaBinding *known = fa_arena_alloc(&plan->arena, sizeof *known * (size_t)(k->nparams + nt + 1));
  if (!known) return FADSL_ERROR_OUT_OF_MEMORY;
  int nknown = fa_rt_bound_values(a, known);
  FaLaunchConfig given = a->config;
  bool any_open = false;
  for (int t = 0; t < nt; t++) any_open |= !fa_autotune_axis_fixed(k, t, known, nknown, &given);

  /* 2. the tuning database, for the axes still open */
  FaTuneChoice choice;
  memset(&choice, 0, sizeof choice);
  if (any_open && ctx->tune_db) {
    FaBinding *key = fa_arena_alloc(&plan->arena, sizeof *key * (size_t)(k->nkey + 1));
    if (!key) return FADSL_ERROR_OUT_OF_MEMORY;
    for (int j = 0; j < k->nkey; j++) {
      key[j].name = k->key[j];
      key[j].value = key_value(a, k->key[j]);
    }
    FaTuneQuery q = {ctx->tune_db, a->kernel->program->name, k->name, key, k->nkey,
                     ctx->device_ready ? ctx->info.name : "", plan->arch, PACKAGE_VERSION};
    /* the parsed database is kept by the context: a launch only checks that
       the file did not change (one stat), so small kernels do not pay a JSON
       parse each */
    fa_tune_lookup_cached(ctx->tune_cache, &q, &plan->arena, &choice);
  }
  bool from_db = choice.match != FA_TUNE_NOT_FOUND && take_tuned(k, &choice, known, &nknown, &given);

  /* FADSL_PIPELINE, FADSL_SCHEDULE: the pipeline (how loads feeding products
     are pipelined on sm_90a, cuda_backend.h) and the schedule (persistent or not) of
     every launch that does not set them itself, over the database's.  Fixed
     before the default point is chosen, so that its other axes are the ones
     prune and prefer give that pipeline (a point preferred for a producer
     warp is not taken with bulk copies alone); the source stays "default"
     where the caller fixed nothing. */
  FaLaunchConfig with_env = given;
  const FaConfigAxis *bad = NULL;
  char var[48];
  if (!fa_config_from_env(&a->config, &with_env, &bad, var, sizeof var))
    return fa_rt_fail(ctx, FADSL_ERROR_INVALID_ARGUMENT, "%s=%s: not %s", var, getenv(var), bad->allowed);

  /* 3. the default point (autotune_point.h) for what is still open, for the
     architecture compiled for (FADSL_ARCH's when set, as the code is) */
  FaAutotunePoint pt;
  fadsl_status st = fa_rt_default_point(ctx, a, known, nknown, &with_env, plan->sm, &plan->arena, &pt);
  if (st != FADSL_SUCCESS) return st;
  plan->config = pt.config;
  fa_config_fill_defaults(&plan->config);
  plan->source = from_db ? (choice.match == FA_TUNE_EXACT ? "tuned" : "nearest")
                 : fa_autotune_any_fixed(k, known, nknown, &given) ? pt.source : "default";

  /* the constexpr bindings, in parameter order */
  plan->binds = fa_arena_alloc(&plan->arena, sizeof *plan->binds * (size_t)(k->nparams + 1));
  if (!plan->binds) return FADSL_ERROR_OUT_OF_MEMORY;
  for (int i = 0; i < k->nparams; i++) {
    const FaParamInfo *p = &k->params[i];
    if (p->kind != PARAM_CONSTEXPR) continue;
    FaBinding *b = &plan->binds[plan->nbinds];
    b->name = p->name;
    if (a->args[i].bound) {
      st = const_of(ctx, k, i, &a->args[i], &b->value);
      if (st != FADSL_SUCCESS) return st;
      plan->nbinds++;
      continue;
    }
    const FaConst *v = NULL;
    for (int t = 0; t < nt; t++)
      if (!strcmp(k->tune[t].name, p->name) && !fa_config_axis(p->name)) v = &pt.values[t];
    if (!v && p->has_default && p->default_value.kind != CK_NONE) v = &p->default_value;
    if (!v || v->kind == CK_NONE) continue;   /* fa_rt_args_check_complete has reported real omissions */
    b->value = *v;
    plan->nbinds++;
  }
  return FADSL_SUCCESS;
}

/* The facts this call's runtime arguments give the specialisation (see
 * cuda_backend.h): integers that are multiples of 16, pointers aligned to less than
 * 16 bytes (a pointer not bound yet, in a compile-only call, is taken to be
 * aligned, as every allocation is; the launch decides on the real one). */
static fadsl_status compute_facts(const fadsl_args *a, FaRtPlan *plan) {
  const FaKernelInfo *k = a->kernel->info;
  plan->facts = fa_arena_alloc(&plan->arena, sizeof *plan->facts * (size_t)(k->nparams + 1));
  if (!plan->facts) return FADSL_ERROR_OUT_OF_MEMORY;
  for (int i = 0; i < k->nparams; i++) {
    const FaParamInfo *p = &k->params[i];
    const FaRtArg *arg = &a->args[i];
    if (!arg->bound) continue;
    FaArgFact f;
    if (p->kind == PARAM_SCALAR && (arg->value.kind == FADSL_ARG_I32 || arg->value.kind == FADSL_ARG_I64)) {
      int64_t v = arg->value.kind == FADSL_ARG_I32 ? arg->value.v.i32 : arg->value.v.i64;
      if (fa_arg_fact_of_int(p->name, v, &f)) plan->facts[plan->nfacts++] = f;
    } else if (p->kind == PARAM_POINTER && arg->value.kind == FADSL_ARG_PTR) {
      f = fa_arg_fact_of_pointer(p->name, arg->value.v.ptr);
      if (f.multiple < FA_SPECIALISE_MULTIPLE) plan->facts[plan->nfacts++] = f;
    }
  }
  StrBuf sb;
  fa_sb_init(&sb);
  fa_arg_facts_print(plan->facts, plan->nfacts, &sb);
  plan->assume = fa_arena_strdup(&plan->arena, sb.data ? sb.data : "");
  fa_sb_free(&sb);
  return plan->assume ? FADSL_SUCCESS : FADSL_ERROR_OUT_OF_MEMORY;
}

/* "BLOCK_Q=64 T=f16" */
static char *describe_binds(const FaRtPlan *plan) {
  StrBuf sb;
  fa_sb_init(&sb);
  fa_bindings_print(plan->binds, plan->nbinds, &sb);
  if (!sb.data) fa_sb_puts(&sb, "");
  return fa_sb_take(&sb);
}

/* "warps=4 stages=2": every axis of the configuration. */
static void config_label(const FaLaunchConfig *c, char *buf, size_t size) {
  StrBuf sb;
  fa_sb_init(&sb);
  fa_config_print(c, &sb);
  snprintf(buf, size, "%s", sb.data ? sb.data : "");
  fa_sb_free(&sb);
}

static void plan_key(FaRtPlan *plan, const char *constexprs) {
  FaSha256 h;
  fa_sha256_init(&h);
  fa_cache_key_str(&h, plan->arch);
  fa_cache_key_str(&h, constexprs);
  fa_cache_key_str(&h, plan->assume);
  int naxes;
  const FaConfigAxis *axes = fa_config_axes(&naxes);
  for (int x = 0; x < naxes; x++) {
    int v = fa_config_get(&plan->config, &axes[x]);
    fa_cache_key_field(&h, &v, sizeof v);
  }
  fa_sha256_final(&h, plan->key);
}

/* ---- specialisations ---------------------------------------------------------------- */

void fa_rt_variant_free(fadsl_context *ctx, FaRtVariant *v) {
  if (!v) return;
  if (v->loaded) fa_rt_module_unload(ctx, &v->module);
  fa_rt_host_memo_free(&v->grid_memo);
  fa_rt_host_memo_free(&v->extents_memo);
  free(v->map_memo);
  free(v->cubin);
  free(v->constexprs);
  free(v->assume);
  fa_compiler_free(&v->fc);
  free(v);
}

static FaRtVariant *find_variant(fadsl_kernel *k, const unsigned char key[FA_SHA256_BYTES]) {
  for (FaRtVariant *v = k->variants; v; v = v->next)
    if (memcmp(v->key, key, FA_SHA256_BYTES) == 0) return v;
  return NULL;
}

/* Specialises and emits; called with the program lock held. */
static fadsl_status generate(fadsl_kernel *k, const FaRtPlan *plan, FaRtVariant *v) {
  fadsl_program *prog = k->program;
  fadsl_context *ctx = prog->ctx;
  FaCudaSpec spec = {prog->prog, k->info, plan->binds, plan->nbinds, plan->config,
                     {plan->sm, plan->arch_specific}, plan->facts, plan->nfacts};
  FaCudaStage stage = fa_cuda_compile(&v->fc, &spec, &v->ir, &v->cuda, NULL);
  if (stage == FA_CUDA_SPECIALISE_FAILED)
    return fa_rt_fail(ctx, FADSL_ERROR_PROGRAM,
                      "kernel '%s' could not be specialised for %s %s:\n%s",
                      k->info->name, v->constexprs, v->config_label,
                      v->fc.diag.text.data ? v->fc.diag.text.data : "");
  if (stage != FA_CUDA_DONE)
    return fa_rt_fail(ctx, FADSL_ERROR_PROGRAM,
                      "kernel '%s' (%s %s) could not be lowered to CUDA for %s:\n%s",
                      k->info->name, v->constexprs, v->config_label,
                      plan->arch, v->fc.diag.text.data ? v->fc.diag.text.data : "");
  return FADSL_SUCCESS;
}

/* Compiles the emitted source (through the cache). */
static fadsl_status compile_variant(fadsl_context *ctx, fadsl_kernel *k, FaRtVariant *v) {
  int nh = 0;
  const FaEmbeddedHeader *hs = fa_device_headers(&nh);
  const char **names = calloc((size_t)nh + 1, sizeof *names);
  const char **texts = calloc((size_t)nh + 1, sizeof *texts);
  if (!names || !texts) {
    free(names);
    free(texts);
    return FADSL_ERROR_OUT_OF_MEMORY;
  }
  for (int i = 0; i < nh; i++) {
    names[i] = hs[i].name;
    texts[i] = hs[i].text;
  }
  char *unit = fa_arena_printf(&v->fc.arena, "%s.cu", k->info->name);
  FaRtBinary bin;
  fadsl_status st = fa_rt_build_cubin(ctx, v->cuda.source, unit ? unit : "kernel.cu", names, texts,
                                      nh, v->arch, &bin);
  free(names);
  free(texts);
  if (st != FADSL_SUCCESS) {
    /* say which kernel the generated code belongs to */
    char *copy = fa_rt_last_error_copy(ctx);
    fa_rt_fail(ctx, st, "kernel '%s' (%s %s): %s", k->info->name, v->constexprs, v->config_label,
               copy ? copy : "(out of memory for the message)");
    free(copy);
    return st;
  }
  v->cubin = bin.cubin;
  v->cubin_size = bin.size;
  v->hit = bin.hit;
  StrBuf notes;
  fa_sb_init(&notes);
  fa_kernel_resources(bin.cubin, bin.size, bin.log, v->cuda.entry, &v->resources, &notes);
  if (notes.len && ctx->log.level >= FA_LOG_DEBUG)
    fprintf(ctx->log.stream, "fadsl: debug: %s", notes.data);
  fa_sb_free(&notes);
  free(bin.log);
  return FADSL_SUCCESS;
}

/* Finds or builds the specialisation for a plan. */
static fadsl_status get_variant(fadsl_kernel *k, FaRtPlan *plan, FaRtVariant **out,
                                FaCacheHit *hit) {
  fadsl_program *prog = k->program;
  fadsl_context *ctx = prog->ctx;
  char *constexprs = describe_binds(plan);
  if (!constexprs) return FADSL_ERROR_OUT_OF_MEMORY;
  plan_key(plan, constexprs);

  pthread_mutex_lock(&prog->lock);
  FaRtVariant *found = find_variant(k, plan->key);
  pthread_mutex_unlock(&prog->lock);
  if (found) {
    free(constexprs);
    *out = found;
    *hit = FA_CACHE_HIT_MEMORY;
    return FADSL_SUCCESS;
  }

  FaRtVariant *v = calloc(1, sizeof *v);
  if (!v) {
    free(constexprs);
    return FADSL_ERROR_OUT_OF_MEMORY;
  }
  fa_compiler_init(&v->fc, NULL);
  memcpy(v->key, plan->key, sizeof v->key);
  snprintf(v->arch, sizeof v->arch, "%s", plan->arch);
  v->constexprs = constexprs;
  v->config = plan->config;
  config_label(&v->config, v->config_label, sizeof v->config_label);
  v->assume = strdup(plan->assume);
  if (!v->assume) {
    fa_rt_variant_free(ctx, v);
    return FADSL_ERROR_OUT_OF_MEMORY;
  }
  /* The front end's data is shared by all specialisations: generate one at
   * a time.  NVRTC, the slow part, runs outside the lock. */
  pthread_mutex_lock(&prog->lock);
  fadsl_status st = generate(k, plan, v);
  pthread_mutex_unlock(&prog->lock);
  if (st == FADSL_SUCCESS) st = compile_variant(ctx, k, v);
  if (st != FADSL_SUCCESS) {
    fa_rt_variant_free(ctx, v);
    return st;
  }
  pthread_mutex_lock(&prog->lock);
  found = find_variant(k, plan->key);
  if (!found) {
    v->next = k->variants;
    k->variants = v;
  }
  pthread_mutex_unlock(&prog->lock);
  *hit = v->hit;
  if (found) {   /* another thread finished the same specialisation first */
    fa_rt_variant_free(ctx, v);
    v = found;
  }
  *out = v;
  return FADSL_SUCCESS;
}

/* ---- common front half of launch and compile --------------------------------------- */

static const char *hit_name(FaCacheHit h) {
  return h == FA_CACHE_HIT_MEMORY ? "memory" : h == FA_CACHE_HIT_DISK ? "disk" : "miss";
}

static void fill_info(const fadsl_kernel *k, const FaRtVariant *v, const FaRtPlan *plan,
                      FaCacheHit hit, fadsl_kernel_info *info) {
  if (!info) return;
  memset(info, 0, sizeof *info);
  info->kernel = k->info->name;
  info->entry = v->cuda.entry;
  info->arch = v->arch;
  info->constexprs = v->constexprs;
  info->warps = v->config.warps;
  info->stages = v->config.stages;
  info->config_source = plan->source;   /* a string constant */
  info->cache = hit_name(hit);
  info->threads = v->cuda.threads;
  info->shared_bytes = v->cuda.shared_bytes;
  info->registers = v->resources.registers;
  info->spill_bytes = v->resources.spill_stores < 0
                          ? -1
                          : v->resources.spill_stores + (v->resources.spill_loads > 0 ? v->resources.spill_loads : 0);
  info->local_bytes = v->resources.stack_frame;
  info->static_shared_bytes = v->resources.static_shared;
  info->max_threads = v->resources.max_threads;
  /* the axes' names (config_axes.c); off sm_90a every choice compiles to cp.async */
  bool hopper = plan->arch_specific && plan->sm == 90;
  info->pipeline = hopper ? fa_config_value_name(fa_config_axis("pipeline"), v->config.pipeline) : "cp_async";
  info->schedule = fa_config_value_name(fa_config_axis("schedule"), v->config.schedule);
  if (!info->pipeline) info->pipeline = "cp_async";
  if (!info->schedule) info->schedule = "grid";
  if (v->loaded && info->registers < 0) info->registers = v->module.registers;
  if (v->loaded && info->local_bytes < 0) info->local_bytes = v->module.local_bytes;
  if (v->loaded && info->static_shared_bytes < 0) info->static_shared_bytes = v->module.static_shared;
  if (info->spill_bytes < 0 && info->local_bytes == 0) info->spill_bytes = 0;
  info->cuda_source = v->cuda.source;
}

static fadsl_status prepare(fadsl_kernel *k, const fadsl_args *a, const char *arch,
                            bool compile_only, FaRtPlan *plan, FaRtVariant **v, FaCacheHit *hit) {
  fadsl_context *ctx = k->program->ctx;
  if (a->kernel != k)
    return fa_rt_fail(ctx, FADSL_ERROR_INVALID_ARGUMENT,
                      "the arguments were made for kernel '%s', not '%s'", a->kernel->info->name,
                      k->info->name);
  fadsl_status st = fa_rt_args_check_complete(a, compile_only);
  if (st != FADSL_SUCCESS) return st;
  if (!arch) {
    st = fa_rt_device(ctx, NULL);
    if (st != FADSL_SUCCESS) return st;
    arch = ctx->info.arch;
  }
  if (!fa_arch_parse(arch, &plan->sm, &plan->arch_specific) || strncmp(arch, "sm_", 3) != 0 ||
      strlen(arch) >= sizeof plan->arch)
    return fa_rt_fail(ctx, FADSL_ERROR_INVALID_ARGUMENT,
                      "unknown GPU architecture '%s' (expected e.g. sm_80 or sm_90a)", arch);
  if (plan->arch_specific && plan->sm != 90)
    return fa_rt_fail(ctx, FADSL_ERROR_UNSUPPORTED,
                      "architecture '%s': the only arch-specific target fadsl generates code for "
                      "is sm_90a", arch);
  snprintf(plan->arch, sizeof plan->arch, "%s", arch);
  st = resolve_plan(ctx, a, plan);
  if (st == FADSL_SUCCESS) st = compute_facts(a, plan);
  if (st != FADSL_SUCCESS) return st;
  return get_variant(k, plan, v, hit);
}

FADSL_API fadsl_status fadsl_compile(fadsl_kernel *k, const fadsl_args *a, const char *arch,
                                     fadsl_kernel_info *info) {
  if (info) memset(info, 0, sizeof *info);
  if (!k || !a) return FADSL_ERROR_INVALID_ARGUMENT;
  FaRtPlan plan;
  memset(&plan, 0, sizeof plan);
  fa_arena_init(&plan.arena);
  FaRtVariant *v = NULL;
  FaCacheHit hit = FA_CACHE_MISS;
  fadsl_status st = prepare(k, a, arch, true, &plan, &v, &hit);
  if (st == FADSL_SUCCESS) fill_info(k, v, &plan, hit, info);
  fa_arena_free(&plan.arena);
  return st;
}

/* ---- launching ---------------------------------------------------------------------- */

/* The host value of a bound runtime argument, for the host functions. */
static FaHostValue host_value(const FaRtArg *arg, DType dt) {
  switch (arg->value.kind) {
    case FADSL_ARG_PTR: return fa_host_int(DT_PTR, (int64_t)arg->value.v.ptr);
    case FADSL_ARG_I32: return fa_host_int(dt, arg->value.v.i32);
    case FADSL_ARG_I64: return fa_host_int(dt, arg->value.v.i64);
    case FADSL_ARG_F32: return fa_host_float(dt, arg->value.v.f32);
    case FADSL_ARG_F64: return fa_host_float(dt, arg->value.v.f64);
    default: return fa_host_int(dt, arg->value.v.i64);
  }
}

static bool same_host_values(const FaHostValue *a, const FaHostValue *b, int n) {
  for (int i = 0; i < n; i++)
    if (a[i].dtype != b[i].dtype || a[i].i != b[i].i || memcmp(&a[i].f, &b[i].f, sizeof a[i].f) != 0)
      return false;
  return true;
}

/* The results kept for these arguments, into results; false when the memo
 * holds other arguments (or none). */
static bool host_memo_find(fadsl_kernel *k, const FaRtHostMemo *m, const FaHostValue *args, int nargs,
                           FaHostValue *results, int nresults) {
  pthread_mutex_lock(&k->program->lock);
  bool hit = m->nresults == nresults && m->nargs == nargs && same_host_values(m->args, args, nargs);
  if (hit) memcpy(results, m->results, sizeof *results * (size_t)nresults);
  pthread_mutex_unlock(&k->program->lock);
  return hit;
}

static void host_memo_keep(fadsl_kernel *k, FaRtHostMemo *m, const FaHostValue *args, int nargs,
                           const FaHostValue *results, int nresults) {
  FaHostValue *block = malloc(sizeof *block * (size_t)(nargs + nresults));
  if (!block) return;   /* nothing kept: the next launch interprets again */
  memcpy(block, args, sizeof *block * (size_t)nargs);
  memcpy(block + nargs, results, sizeof *block * (size_t)nresults);
  pthread_mutex_lock(&k->program->lock);
  free(m->args);
  *m = (FaRtHostMemo){nargs, nresults, block, block + nargs};
  pthread_mutex_unlock(&k->program->lock);
}

void fa_rt_host_memo_free(FaRtHostMemo *m) {
  free(m->args);
  *m = (FaRtHostMemo){0, 0, NULL, NULL};
}

/* Runs a host function (grid or extents) of the specialisation on the
 * bound arguments, or takes the results of the last run when the arguments
 * are the same (memo: a launch interpreted both functions again, a fifth of
 * its host time).  A scratch compiler keeps its allocations and messages out
 * of the specialisation's, which lives as long as the program. */
static fadsl_status run_host_function(fadsl_context *ctx, fadsl_kernel *k, const fadsl_args *a,
                                      const IrFunction *fn, FaRtHostMemo *memo, const char *what,
                                      FaHostValue *results, int nresults) {
  FaHostValue *args = calloc((size_t)fn->nparams + 1, sizeof *args);
  if (!args) return FADSL_ERROR_OUT_OF_MEMORY;
  for (int i = 0; i < fn->nparams; i++) {
    int src = fn->params[i].source_index;
    DType dt = fn->params[i].value->type.dtype;
    args[i] = src >= 0 && src < a->nargs && a->args[src].bound ? host_value(&a->args[src], dt)
                                                                : fa_host_int(dt, 0);
  }
  if (host_memo_find(k, memo, args, fn->nparams, results, nresults)) {
    free(args);
    return FADSL_SUCCESS;
  }
  FaCompiler scratch;
  fa_compiler_init(&scratch, NULL);
  bool ok = fa_interp_host_function(&scratch, fn, args, fn->nparams, results, nresults);
  fadsl_status st = FADSL_SUCCESS;
  if (!ok || scratch.diag.errors > 0)
    st = fa_rt_fail(ctx, FADSL_ERROR_PROGRAM, "kernel '%s': computing its %s failed:\n%s",
                    k->info->name, what, scratch.diag.text.data ? scratch.diag.text.data : "");
  fa_compiler_free(&scratch);
  if (st == FADSL_SUCCESS) host_memo_keep(k, memo, args, fn->nparams, results, nresults);
  free(args);
  return st;
}

/* The grid: the caller's (fadsl_args_set_grid), else @kernel(grid=...) on
 * the bound arguments. */
static fadsl_status compute_grid(fadsl_context *ctx, fadsl_kernel *k, const fadsl_args *a,
                                 FaRtVariant *v, unsigned grid[3]) {
  if (a->has_grid) {
    memcpy(grid, a->grid, sizeof a->grid);
    return FADSL_SUCCESS;
  }
  FaHostValue r[3];
  memset(r, 0, sizeof r);
  fadsl_status st = run_host_function(ctx, k, a, v->ir->grid, &v->grid_memo, "grid", r, 3);
  if (st != FADSL_SUCCESS) return st;
  int64_t g[3];
  for (int i = 0; i < 3; i++) g[i] = fa_dtype_is_float(r[i].dtype) ? (int64_t)r[i].f : r[i].i;
  return fa_rt_check_grid(ctx, k->info->name, g, grid);
}

/* Extents of the pointer parameters that declare them: dims[p] for device
 * parameter p (NULL rows for the others). */
typedef struct FaRtExtents {
  int rank[64];
  int64_t dims[64][FA_MAX_RANK];
} FaRtExtents;

static fadsl_status compute_extents(fadsl_context *ctx, fadsl_kernel *k, const fadsl_args *a,
                                    FaRtVariant *v, FaRtExtents *ext) {
  memset(ext, 0, sizeof *ext);
  const IrFunction *dev = v->ir->device;
  if (!v->ir->extents) return FADSL_SUCCESS;
  int total = 0;
  for (int p = 0; p < dev->nparams && p < 64; p++) total += dev->params[p].extent_rank;
  if (total == 0) return FADSL_SUCCESS;
  FaHostValue *r = calloc((size_t)total, sizeof *r);
  if (!r) return FADSL_ERROR_OUT_OF_MEMORY;
  fadsl_status st = run_host_function(ctx, k, a, v->ir->extents, &v->extents_memo, "buffer extents", r, total);
  int at = 0;
  for (int p = 0; st == FADSL_SUCCESS && p < dev->nparams && p < 64; p++) {
    int rank = dev->params[p].extent_rank;
    ext->rank[p] = rank > FA_MAX_RANK ? FA_MAX_RANK : rank;
    for (int d = 0; d < rank; d++, at++)
      if (d < FA_MAX_RANK) ext->dims[p][d] = r[at].i;
  }
  free(r);
  return st;
}

/* Checks that each pointer with a declared extent points into an
 * allocation big enough for it (where the driver can tell). */
static fadsl_status check_buffers(fadsl_context *ctx, const fadsl_kernel *k, const fadsl_args *a,
                                  const FaRtVariant *v, const FaRtExtents *ext) {
  const IrFunction *dev = v->ir->device;
  for (int p = 0; p < dev->nparams && p < 64; p++) {
    if (!ext->rank[p]) continue;
    const IrParam *ip = &dev->params[p];
    uint64_t ptr = a->args[ip->source_index].value.v.ptr;
    int64_t count = 1;
    for (int d = 0; d < ext->rank[p]; d++) count *= ext->dims[p][d] > 0 ? ext->dims[p][d] : 0;
    uint64_t bytes = (uint64_t)count * (uint64_t)fa_dtype_size(ip->value->type.pointee);
    if (bytes == 0) continue;
    if (ptr == 0)
      return fa_rt_fail(ctx, FADSL_ERROR_INVALID_ARGUMENT,
                        "kernel '%s': argument '%s' is a null pointer but the kernel reads %" PRIu64
                        " bytes through it",
                        k->info->name, ip->name, bytes);
    CUdeviceptr base = 0;
    size_t size = 0;
    const FaDriverApi *d;
    if (fa_rt_enter(ctx, &d) != FADSL_SUCCESS) return FADSL_ERROR_CUDA;
    CUresult r = d->cuMemGetAddressRange(&base, &size, (CUdeviceptr)ptr);
    fa_rt_leave(ctx);
    if (r != CUDA_SUCCESS) continue;   /* memory the driver cannot describe: trust the caller */
    if ((uint64_t)ptr + bytes > (uint64_t)base + size) {
      StrBuf dims;
      fa_sb_init(&dims);
      for (int dd = 0; dd < ext->rank[p]; dd++)
        fa_sb_printf(&dims, "%s%" PRId64, dd ? ", " : "", ext->dims[p][dd]);
      fadsl_status st = fa_rt_fail(
          ctx, FADSL_ERROR_INVALID_ARGUMENT,
          "kernel '%s': buffer '%s' is too small: the kernel declares %s[%s] (%" PRIu64
          " bytes) but the allocation holds %" PRIu64 " bytes from that address",
          k->info->name, ip->name, fa_dtype_name(ip->value->type.pointee), dims.data, bytes,
          (uint64_t)(base + size - ptr));
      fa_sb_free(&dims);
      return st;
    }
  }
  return FADSL_SUCCESS;
}

static uint16_t f32_to_f16_bits(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u;
  int32_t exp = (int32_t)((x >> 23) & 0xff) - 127 + 15;
  uint32_t mant = x & 0x7fffffu;
  if (((x >> 23) & 0xff) == 0xff) return (uint16_t)(sign | 0x7c00u | (mant ? 0x200u : 0));
  if (exp >= 31) return (uint16_t)(sign | 0x7c00u);
  if (exp <= 0) {   /* subnormal or zero */
    if (exp < -10) return (uint16_t)sign;
    mant |= 0x800000u;
    int shift = 14 - exp;
    uint32_t h = mant >> shift, rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1))) h++;
    return (uint16_t)(sign | h);
  }
  uint32_t h = (uint32_t)exp << 10 | mant >> 13, rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1))) h++;   /* may carry into inf: correct */
  return (uint16_t)(sign | h);
}

static uint16_t f32_to_bf16_bits(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40);   /* quiet NaN */
  x += 0x7fffu + ((x >> 16) & 1);
  return (uint16_t)(x >> 16);
}

/* Packs a runtime scalar as the kernel's parameter of dtype dt. */
static fadsl_status pack_scalar(fadsl_context *ctx, const fadsl_kernel *k, const char *name,
                                const FaRtArg *arg, DType dt, void *slot) {
  fadsl_arg_kind want = fa_rt_scalar_arg_kind(dt);
  if (want == FADSL_ARG_NONE || arg->value.kind != want)
    return fa_rt_fail(ctx, FADSL_ERROR_BINDING,
                      "argument '%s' of kernel '%s' is a runtime %s scalar and takes %s, not %s",
                      name, k->info->name, fa_dtype_name(dt), fa_rt_arg_kind_name(want),
                      fa_rt_arg_kind_name(arg->value.kind));
  int32_t i = arg->value.v.i32;
  switch (dt) {
    case DT_I1: { uint8_t b = i != 0; memcpy(slot, &b, 1); break; }
    case DT_I8: { int8_t b = (int8_t)i; memcpy(slot, &b, 1); break; }
    case DT_I16: { int16_t b = (int16_t)i; memcpy(slot, &b, 2); break; }
    case DT_I32: case DT_U32: memcpy(slot, &i, 4); break;
    case DT_I64: memcpy(slot, &arg->value.v.i64, 8); break;
    case DT_F16: { uint16_t h = f32_to_f16_bits(arg->value.v.f32); memcpy(slot, &h, 2); break; }
    case DT_BF16: { uint16_t h = f32_to_bf16_bits(arg->value.v.f32); memcpy(slot, &h, 2); break; }
    case DT_F32: memcpy(slot, &arg->value.v.f32, 4); break;
    case DT_F64: memcpy(slot, &arg->value.v.f64, 8); break;
    default: break;
  }
  return FADSL_SUCCESS;
}

static bool tensor_map_dtype(DType dt, CUtensorMapDataType *out) {
  switch (dt) {
    case DT_F16: *out = CU_TENSOR_MAP_DATA_TYPE_FLOAT16; return true;
    case DT_BF16: *out = CU_TENSOR_MAP_DATA_TYPE_BFLOAT16; return true;
    case DT_F32: *out = CU_TENSOR_MAP_DATA_TYPE_FLOAT32; return true;
    case DT_F64: *out = CU_TENSOR_MAP_DATA_TYPE_FLOAT64; return true;
    case DT_I32: *out = CU_TENSOR_MAP_DATA_TYPE_INT32; return true;
    case DT_I64: *out = CU_TENSOR_MAP_DATA_TYPE_INT64; return true;
    case DT_I8: case DT_I1: *out = CU_TENSOR_MAP_DATA_TYPE_UINT8; return true;
    case DT_I16: *out = CU_TENSOR_MAP_DATA_TYPE_UINT16; return true;
    default: return false;
  }
}

/* Checks one tensor map against the copy engine's rules before the driver
 * sees it, so that a refusal names what is wrong. */
static fadsl_status check_tensor_map(fadsl_context *ctx, const fadsl_kernel *k, const IrParam *ip,
                                     uint64_t ptr, int rank, const cuuint64_t *gdim,
                                     const cuuint64_t *gstride, const cuuint32_t *box, uint64_t elem,
                                     int swizzle) {
  const char *why = NULL;
  char detail[160] = "";
  if (ptr % 16) {
    why = "the pointer is not 16-byte aligned";
  } else if (box[0] * elem % 16 || (swizzle && box[0] * elem > (uint64_t)swizzle)) {
    why = "the box's rows are not a multiple of 16 bytes within the swizzle width";
  }
  for (int i = 0; !why && i < rank; i++) {
    if (gdim[i] == 0 || gdim[i] > ((uint64_t)1 << 32)) {
      why = "a dimension is empty or larger than 2^32";
      snprintf(detail, sizeof detail, " (dimension %d: %" PRIu64 ")", rank - 1 - i, (uint64_t)gdim[i]);
    } else if (box[i] < 1 || box[i] > 256) {
      why = "a box dimension is not 1..256";
    } else if (i > 0 && (gstride[i - 1] % 16 || gstride[i - 1] >= ((uint64_t)1 << 40))) {
      why = "a stride is not a multiple of 16 bytes below 2^40";
      snprintf(detail, sizeof detail, " (%" PRIu64 " bytes)", (uint64_t)gstride[i - 1]);
    }
  }
  if (!why) return FADSL_SUCCESS;
  return fa_rt_fail(ctx, FADSL_ERROR_INVALID_ARGUMENT,
                    "kernel '%s': argument '%s' cannot be read or written by the bulk copy engine: %s%s "
                    "(the kernel was compiled for the pipeline that needs it; FADSL_PIPELINE=cp_async "
                    "does without)",
                    k->info->name, ip->name, why, detail);
}

static bool map_memo_find(const fadsl_kernel *k, const FaRtMapMemo *m, uint64_t ptr,
                          const uint64_t dims[FA_MAX_RANK], CUtensorMap *map) {
  if (!m) return false;
  pthread_mutex_lock(&k->program->lock);
  bool hit = m->valid && m->ptr == ptr && memcmp(m->dims, dims, sizeof m->dims) == 0;
  if (hit) memcpy(map, &m->map, sizeof *map);
  pthread_mutex_unlock(&k->program->lock);
  return hit;
}

static void map_memo_keep(const fadsl_kernel *k, FaRtMapMemo *m, uint64_t ptr, const uint64_t dims[FA_MAX_RANK],
                          const CUtensorMap *map) {
  if (!m) return;
  pthread_mutex_lock(&k->program->lock);
  m->valid = true;
  m->ptr = ptr;
  memcpy(m->dims, dims, sizeof m->dims);
  memcpy(&m->map, map, sizeof *map);
  pthread_mutex_unlock(&k->program->lock);
}

/* The map memo of a variant's arguments, made on first use (NULL when out of
 * memory: every launch then encodes). */
static FaRtMapMemo *map_memos(const fadsl_kernel *k, FaRtVariant *v) {
  pthread_mutex_lock(&k->program->lock);
  if (!v->map_memo) {
    size_t bytes = sizeof *v->map_memo * ((size_t)v->cuda.nargs + 1);   /* a multiple of the alignment */
    v->map_memo = aligned_alloc(_Alignof(FaRtMapMemo), bytes);
    if (v->map_memo) memset(v->map_memo, 0, bytes);
  }
  FaRtMapMemo *m = v->map_memo;
  pthread_mutex_unlock(&k->program->lock);
  return m;
}

/* Builds the TMA descriptor of a tensor-map argument from its pointer
 * parameter's declared extent (row-major, contiguous): map dimension i
 * (outermost first) merges the extent dimensions dims_end[i-1] ..
 * dims_end[i] - 1; the box, the swizzle and the out-of-bounds fill are the
 * plan's (see FaCudaArg).  A launch on the same pointer and extents as the
 * argument's last one takes that one's descriptor from the variant's memo. */
static fadsl_status encode_tensor_map(fadsl_context *ctx, const fadsl_kernel *k,
                                      const FaCudaArg *arg, const IrParam *ip, uint64_t ptr,
                                      const FaRtExtents *ext, FaRtMapMemo *memo, CUtensorMap *map) {
  int p = arg->param, rank = arg->rank;
  int erank = p < 64 ? ext->rank[p] : 0;
  CUtensorMapDataType dt;
  bool groups_ok = rank >= 1 && rank <= FA_MAX_RANK && erank > 0 && arg->dims_end[rank - 1] == erank;
  for (int i = 0; groups_ok && i < rank; i++)
    groups_ok = arg->dims_end[i] > (i ? arg->dims_end[i - 1] : 0);
  if (!groups_ok || !tensor_map_dtype(arg->dtype, &dt))
    return fa_rt_fail(ctx, FADSL_ERROR_UNSUPPORTED,
                      "kernel '%s': parameter '%s' needs a TMA descriptor of rank %d, but it "
                      "declares an extent of rank %d (or an unsupported dtype)",
                      k->info->name, ip->name, rank, erank);
  uint64_t dims[FA_MAX_RANK] = {0};   /* outermost first */
  for (int i = 0, first = 0; i < rank; first = arg->dims_end[i++]) {
    dims[i] = 1;
    for (int e = first; e < arg->dims_end[i]; e++)
      dims[i] *= ext->dims[p][e] > 0 ? (uint64_t)ext->dims[p][e] : 0;
  }
  const FaDriverApi *d = ctx->drv;
  if (!d->cuTensorMapEncodeTiled)
    return fa_rt_fail(ctx, FADSL_ERROR_UNSUPPORTED,
                      "kernel '%s' accesses '%s' with the bulk copy engine, but the CUDA driver has no "
                      "cuTensorMapEncodeTiled (it needs CUDA 12 or newer); FADSL_PIPELINE=cp_async "
                      "compiles the kernel without it",
                      k->info->name, ip->name);
  if (map_memo_find(k, memo, ptr, dims, map)) return FADSL_SUCCESS;
  cuuint64_t gdim[FA_MAX_RANK], gstride[FA_MAX_RANK];
  cuuint32_t box[FA_MAX_RANK], estride[FA_MAX_RANK];
  uint64_t elem = (uint64_t)fa_dtype_size(arg->dtype), stride = elem;
  for (int i = 0; i < rank; i++) {   /* innermost first, as the driver wants */
    gdim[i] = (cuuint64_t)dims[rank - 1 - i];
    box[i] = (cuuint32_t)arg->box[rank - 1 - i];
    estride[i] = 1;
    if (i > 0) gstride[i - 1] = stride;
    stride *= gdim[i];
  }
  fadsl_status st =
      check_tensor_map(ctx, k, ip, ptr, rank, gdim, gstride, box, elem, arg->swizzle_bytes);
  if (st != FADSL_SUCCESS) return st;
  CUtensorMapSwizzle sw = arg->swizzle_bytes == 128  ? CU_TENSOR_MAP_SWIZZLE_128B
                          : arg->swizzle_bytes == 64 ? CU_TENSOR_MAP_SWIZZLE_64B
                          : arg->swizzle_bytes == 32 ? CU_TENSOR_MAP_SWIZZLE_32B
                                                     : CU_TENSOR_MAP_SWIZZLE_NONE;
  /* the driver encodes only with a context current (CUDA_ERROR_INVALID_CONTEXT
     otherwise) */
  st = fa_rt_enter(ctx, NULL);
  if (st != FADSL_SUCCESS) return st;
  CUresult r = d->cuTensorMapEncodeTiled(
      map, dt, (cuuint32_t)rank, (void *)(uintptr_t)ptr, gdim, gstride, box, estride,
      CU_TENSOR_MAP_INTERLEAVE_NONE, sw, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
      arg->nan_fill ? CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA
                    : CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  fa_rt_leave(ctx);
  if (r != CUDA_SUCCESS) {
    char what[160];
    snprintf(what, sizeof what, "cuTensorMapEncodeTiled for '%s' of kernel '%s'", ip->name,
             k->info->name);
    return fa_rt_cuda_fail(ctx, r, what);
  }
  map_memo_keep(k, memo, ptr, dims, map);
  return FADSL_SUCCESS;
}

/* Says where the driver's view of a loaded kernel differs from what was
 * read from its cubin (a cubin layout this reader does not know). */
static void cross_check_driver(fadsl_context *ctx, const FaRtVariant *v) {
  const FaKernelResources *r = &v->resources;
  const FaRtModule *m = &v->module;
  struct { const char *what; int cubin, driver; } f[] = {
      {"registers", r->registers, m->registers},
      {"bytes of local memory", r->stack_frame, m->local_bytes},
      {"bytes of static shared memory", r->static_shared, m->static_shared}};
  for (int i = 0; i < FA_ARRAY_LEN(f); i++)
    if (f[i].cubin >= 0 && f[i].driver >= 0 && f[i].cubin != f[i].driver)
      fprintf(ctx->log.stream, "fadsl: debug: %s: the cubin says %d %s, the driver %d\n",
              v->cuda.entry, f[i].cubin, f[i].what, f[i].driver);
}

/* Loads the variant's module on first launch. */
static fadsl_status ensure_loaded(fadsl_context *ctx, fadsl_program *prog, FaRtVariant *v) {
  pthread_mutex_lock(&prog->lock);
  fadsl_status st = FADSL_SUCCESS;
  if (!v->loaded) {
    st = fa_rt_module_load(ctx, v->cubin, v->cuda.entry, v->cuda.shared_bytes, &v->module);
    v->loaded = st == FADSL_SUCCESS;
    if (v->loaded && ctx->log.level >= FA_LOG_DEBUG) cross_check_driver(ctx, v);
  }
  pthread_mutex_unlock(&prog->lock);
  return st;
}

/* A persistent kernel's thread blocks: as many as the GPU holds at once
 * (the driver's occupancy for this block size and shared memory, times the
 * multiprocessors; one per multiprocessor where the driver cannot say), at
 * most one per program.  They loop over the programs. */
static fadsl_status persistent_blocks(fadsl_context *ctx, fadsl_kernel *k, FaRtVariant *v,
                                      const unsigned grid[3], unsigned *blocks) {
  uint64_t programs = (uint64_t)grid[0] * grid[1] * grid[2];
  if (programs > UINT32_MAX)
    return fa_rt_fail(ctx, FADSL_ERROR_INVALID_ARGUMENT,
                      "kernel '%s': %" PRIu64 " programs are more than a persistent kernel counts "
                      "(FADSL_SCHEDULE=grid runs them)",
                      k->info->name, programs);
  pthread_mutex_lock(&k->program->lock);
  int per_sm = v->per_sm;   /* asked once per variant: the answer depends on it alone */
  pthread_mutex_unlock(&k->program->lock);
  const FaDriverApi *d;
  if (per_sm <= 0 && fa_rt_enter(ctx, &d) == FADSL_SUCCESS) {
    int n = 0;
    if (d->cuOccupancyMaxActiveBlocksPerMultiprocessor &&
        d->cuOccupancyMaxActiveBlocksPerMultiprocessor(&n, v->module.function, v->cuda.threads,
                                                       v->cuda.shared_bytes) == CUDA_SUCCESS &&
        n > 0)
      per_sm = n;
    fa_rt_leave(ctx);
    pthread_mutex_lock(&k->program->lock);
    v->per_sm = per_sm;
    pthread_mutex_unlock(&k->program->lock);
  }
  if (per_sm <= 0) per_sm = 1;
  int sms = ctx->info.multiprocessors > 0 ? ctx->info.multiprocessors : 1;
  uint64_t resident = (uint64_t)per_sm * (uint64_t)sms;
  *blocks = (unsigned)(programs < resident ? programs : resident);
  return FADSL_SUCCESS;
}

static fadsl_status launch_variant(fadsl_kernel *k, const fadsl_args *a, FaRtVariant *v,
                                   void *stream, unsigned grid[3], unsigned blocks[3]) {
  fadsl_context *ctx = k->program->ctx;
  fadsl_status st = ensure_loaded(ctx, k->program, v);
  if (st == FADSL_SUCCESS) st = compute_grid(ctx, k, a, v, grid);
  FaRtExtents *ext = calloc(1, sizeof *ext);
  if (!ext) return FADSL_ERROR_OUT_OF_MEMORY;
  if (st == FADSL_SUCCESS) st = compute_extents(ctx, k, a, v, ext);
  if (st == FADSL_SUCCESS) st = check_buffers(ctx, k, a, v, ext);
  int n = v->cuda.nargs;
  void **params = calloc((size_t)n + 1, sizeof *params);
  uint64_t *slots = calloc((size_t)n + 1, sizeof *slots);
  CUtensorMap *maps = aligned_alloc(64, sizeof(CUtensorMap) * ((size_t)n + 1));
  if (!params || !slots || !maps) st = st == FADSL_SUCCESS ? FADSL_ERROR_OUT_OF_MEMORY : st;
  const IrFunction *dev = v->ir->device;
  int counter = -1;   /* the CUDA_ARG_TILE_COUNTER argument */
  FaRtMapMemo *memos = NULL;
  for (int j = 0; st == FADSL_SUCCESS && j < n; j++) {
    const FaCudaArg *arg = &v->cuda.args[j];
    if (arg->kind == CUDA_ARG_TILE_COUNTER) { /* filled at the launch (fa_rt_launch_counted) */
      slots[j] = 0;
      params[j] = &slots[j];
      counter = j;
      continue;
    }
    if (arg->kind == CUDA_ARG_GRID) { /* persistent: the grid of programs, one dimension */
      uint32_t g = arg->param >= 0 && arg->param < 3 ? grid[arg->param] : 0;
      slots[j] = 0;
      memcpy(&slots[j], &g, sizeof g);
      params[j] = &slots[j];
      continue;
    }
    if (arg->param < 0 || arg->param >= dev->nparams) {
      st = fa_rt_fail(ctx, FADSL_ERROR_PROGRAM, "kernel '%s': argument %d names no parameter",
                      k->info->name, j);
      break;
    }
    const IrParam *ip = &dev->params[arg->param];
    const FaRtArg *bound = &a->args[ip->source_index];
    switch (arg->kind) {
      case CUDA_ARG_POINTER:
        slots[j] = bound->value.v.ptr;
        params[j] = &slots[j];
        /* the variant was chosen on this pointer's alignment; a mismatch is a bug here */
        if (arg->align > 1 && bound->value.v.ptr % (uint64_t)arg->align != 0)
          st = fa_rt_fail(ctx, FADSL_ERROR_PROGRAM,
                          "kernel '%s': internal error: argument '%s' is not aligned to the %d bytes its "
                          "code assumes",
                          k->info->name, ip->name, arg->align);
        break;
      case CUDA_ARG_SCALAR:
        st = pack_scalar(ctx, k, ip->name, bound, arg->dtype, &slots[j]);
        params[j] = &slots[j];
        break;
      case CUDA_ARG_TENSOR_MAP:
        if (!memos) memos = map_memos(k, v);
        st = encode_tensor_map(ctx, k, arg, ip, bound->value.v.ptr, ext, memos ? &memos[j] : NULL, &maps[j]);
        params[j] = &maps[j];
        break;
      case CUDA_ARG_GRID: /* handled above */
      case CUDA_ARG_TILE_COUNTER:
        break;
    }
  }
  memcpy(blocks, grid, 3 * sizeof *grid);
  if (st == FADSL_SUCCESS && v->cuda.persistent && grid[0] && grid[1] && grid[2]) {
    blocks[1] = blocks[2] = 1;
    st = persistent_blocks(ctx, k, v, grid, &blocks[0]);
  }
  if (st == FADSL_SUCCESS && grid[0] && grid[1] && grid[2] && counter >= 0)
    st = fa_rt_launch_counted(ctx, &v->module, blocks, (unsigned)v->cuda.threads, v->cuda.shared_bytes, stream,
                              params, &slots[counter]);
  else if (st == FADSL_SUCCESS && grid[0] && grid[1] && grid[2])
    st = fa_rt_launch_raw(ctx, &v->module, blocks, (unsigned)v->cuda.threads, v->cuda.shared_bytes,
                          stream, params);
  free(params);
  free(slots);
  free(maps);
  free(ext);
  return st;
}

FADSL_API fadsl_status fadsl_launch(fadsl_kernel *k, const fadsl_args *a, void *stream,
                                    fadsl_kernel_info *info) {
  if (info) memset(info, 0, sizeof *info);
  if (!k || !a) return FADSL_ERROR_INVALID_ARGUMENT;
  fadsl_context *ctx = k->program->ctx;
  fadsl_status st = fa_rt_device(ctx, NULL);
  if (st != FADSL_SUCCESS) return st;
  FaRtPlan plan;
  memset(&plan, 0, sizeof plan);
  fa_arena_init(&plan.arena);
  FaRtVariant *v = NULL;
  FaCacheHit hit = FA_CACHE_MISS;
  unsigned grid[3] = {0, 0, 0}, blocks[3] = {0, 0, 0};
  st = prepare(k, a, NULL, false, &plan, &v, &hit);
  if (st == FADSL_SUCCESS) st = launch_variant(k, a, v, stream, grid, blocks);
  if (st == FADSL_SUCCESS) {
    char persistent[48] = "";
    if (v->cuda.persistent) snprintf(persistent, sizeof persistent, " persistent blocks=%u", blocks[0]);
    if (ctx->log.level >= FA_LOG_INFO)
      fprintf(ctx->log.stream,
              "fadsl: launch %s [%s] %s (%s) assume=[%s] arch=%s grid=(%u,%u,%u)%s "
              "threads=%d smem=%zu cache=%s\n",
              k->info->name, v->constexprs, v->config_label, plan.source, v->assume, v->arch, grid[0],
              grid[1], grid[2], persistent, v->cuda.threads, v->cuda.shared_bytes, hit_name(hit));
    fill_info(k, v, &plan, hit, info);
    if (info) memcpy(info->grid, grid, sizeof grid);
  }
  fa_arena_free(&plan.arena);
  return st;
}
