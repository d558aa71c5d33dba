/* problem.c - running a @problem description.
 *
 *     @problem(B=2, N=1024, T=f16)
 *     def attention(B, N, T):
 *         G = 4                                  # compile-time locals
 *         q = randn((B, N, 64), T)               # buffers: randn, rand, zeros, empty
 *         attn_fwd(q, ..., n_zh=B, T=T)          # kernel launches, in order
 *
 * The sizes come from the decorator (or parameter defaults), overridden by
 * --size.  Assignments whose right side is not an allocation are evaluated
 * as compile-time expressions.  `if` on a compile-time condition is allowed;
 * nothing else is (a problem describes data, not computation).  A buffer
 * is made and filled on the device only when a launch that runs (or is
 * tuned) first needs it.  Before each
 * launch the hook decides what happens: launch as libfadsl would, launch with
 * a given config (the tuner's winner), skip, or stop. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "tune.h"

static const char *const alloc_names[] = {"randn", "rand", "zeros", "empty"};

static int alloc_kind(const Node *call) {
  if (!call || call->kind != N_CALL || !call->lhs || call->lhs->kind != N_NAME) return -1;
  for (int i = 0; i < FA_ARRAY_LEN(alloc_names); i++)
    if (!strcmp(call->lhs->name, alloc_names[i])) return i;
  return -1;
}

static int find_buffer(const TuneRun *run, const char *name) {
  for (int i = run->nbufs - 1; i >= 0; i--)
    if (!strcmp(run->bufs[i].name, name)) return i;
  return -1;
}

static int find_env(const TuneRun *run, const char *name) {
  for (int i = run->nenv - 1; i >= 0; i--)
    if (!strcmp(run->env[i].name, name)) return i;
  return -1;
}

static bool env_set(TuneRun *run, const char *name, FaConst value) {
  int at = find_env(run, name);
  if (at >= 0) {
    run->env[at].value = value;
    return true;
  }
  if (run->nenv == run->capenv) {
    int cap = run->capenv ? 2 * run->capenv : 32;
    FaBinding *e = fa_arena_alloc(&run->fc->arena, sizeof *e * (size_t)cap);
    if (!e) return false;
    if (run->nenv) memcpy(e, run->env, sizeof *e * (size_t)run->nenv);
    run->env = e;
    run->capenv = cap;
  }
  run->env[run->nenv].name = name;
  run->env[run->nenv].value = value;
  run->nenv++;
  return true;
}

static bool eval(TuneRun *run, const Node *e, FaConst *out) {
  if (e->kind == N_NAME && find_buffer(run, e->name) >= 0 && find_env(run, e->name) < 0) {
    fa_error(&run->fc->diag, e->loc, "'%s' is a buffer; a compile-time value is needed here", e->name);
    return false;
  }
  return fa_eval_const(run->fc, run->prog, e, run->env, run->nenv, out);
}

/* ---- buffers ---------------------------------------------------------------------- */

/* Host staging for randn/rand data: filled in threads, copied piece by
 * piece, reused for every buffer (fresh memory per buffer costs page faults). */
enum { STAGE_BYTES = 64 << 20 };

static bool device_fill(TuneRun *run, TuneBuffer *b, int index) {
  double t0 = fa_tune_now();
  fadsl_status st = fadsl_malloc(run->ctx, b->bytes, &b->dptr);
  if (st != FADSL_SUCCESS) {
    fa_error(&run->fc->diag, b->loc, "cannot allocate buffer '%s' (%zu bytes) on the GPU: %s", b->name,
             b->bytes, fadsl_context_last_error(run->ctx));
    return false;
  }
  if (b->fill == TUNE_FILL_ZEROS || b->fill == TUNE_FILL_EMPTY) {
    /* all-ones bytes: NaN in every float type, -1 in every integer type */
    st = fadsl_memset(run->ctx, b->dptr, b->fill == TUNE_FILL_ZEROS ? 0 : 0xff, b->bytes);
    run->copy_s += fa_tune_now() - t0;
  } else {
    size_t esize = (size_t)fa_dtype_size(b->dtype);
    size_t per = STAGE_BYTES / esize;
    if (per > b->count) per = b->count;
    void *stage = malloc(per * esize);
    if (!stage) {
      fa_error(&run->fc->diag, b->loc, "out of host memory filling buffer '%s'", b->name);
      return false;
    }
    run->copy_s += fa_tune_now() - t0;
    /* a different stream of numbers for every buffer, the same on every run */
    uint64_t seed = run->opt->seed * 1000003u + (uint64_t)index * 7919u + 1;
    for (size_t first = 0; first < b->count && st == FADSL_SUCCESS; first += per) {
      size_t n = b->count - first < per ? b->count - first : per;
      double t1 = fa_tune_now();
      fa_tune_fill_range(stage, b->dtype, first, n, b->fill, seed, run->opt->jobs);
      double t2 = fa_tune_now();
      st = fadsl_memcpy_htod(run->ctx, b->dptr + first * esize, stage, n * esize);
      run->fill_s += t2 - t1;
      run->copy_s += fa_tune_now() - t2;
    }
    free(stage);
  }
  if (st != FADSL_SUCCESS) {
    fa_error(&run->fc->diag, b->loc, "cannot fill buffer '%s': %s", b->name, fadsl_context_last_error(run->ctx));
    return false;
  }
  return true;
}

bool fa_tune_materialise(TuneRun *run, const TuneLaunch *l) {
  if (!run->on_device) return true;
  for (int i = 0; i < l->kernel->nparams; i++) {
    int at = l->args[i].buffer;
    if (l->kernel->params[i].kind != PARAM_POINTER || at < 0) continue;
    TuneBuffer *b = &run->bufs[at];
    if (b->materialised) continue;
    if (b->bytes && !device_fill(run, b, at)) return false;
    b->materialised = true;
    run->nmade++;
    run->bytes_made += b->bytes;
  }
  return true;
}

static bool allocate(TuneRun *run, const char *name, const Node *call, int kind) {
  Diag *d = &run->fc->diag;
  if (call->args.len != 2 || call->kwargs.len != 0) {
    fa_error(d, call->loc, "%s takes (shape, dtype): e.g. %s((B, N, D), f16)", alloc_names[kind], alloc_names[kind]);
    return false;
  }
  FaConst shape[FA_MAX_RANK + 1], dt;
  int rank = fa_eval_const_tuple(run->fc, run->prog, call->args.items[0], run->env, run->nenv, shape,
                                 FA_MAX_RANK + 1);
  if (rank < 0) return false;
  if (rank == 0 || rank > FA_MAX_RANK) {
    fa_error(d, call->args.items[0]->loc, "a buffer has 1 to %d dimensions, not %d", FA_MAX_RANK, rank);
    return false;
  }
  if (!eval(run, call->args.items[1], &dt)) return false;
  if (dt.kind != CK_DTYPE || dt.dtype == DT_VOID || dt.dtype == DT_PTR || dt.dtype == DT_BLOCKPTR) {
    fa_error(d, call->args.items[1]->loc, "the second argument of %s must be a dtype (f16, bf16, f32, ...)",
             alloc_names[kind]);
    return false;
  }
  if (run->nbufs == run->capbufs) {
    int cap = run->capbufs ? 2 * run->capbufs : 16;
    TuneBuffer *nb = realloc(run->bufs, sizeof *nb * (size_t)cap);
    if (!nb) return false;
    run->bufs = nb;
    run->capbufs = cap;
  }
  TuneBuffer *b = &run->bufs[run->nbufs];
  memset(b, 0, sizeof *b);
  b->name = name;
  b->dtype = dt.dtype;
  b->rank = rank;
  b->fill = (TuneFill)kind;
  b->loc = call->loc;
  b->count = 1;
  for (int i = 0; i < rank; i++) {
    if (shape[i].kind != CK_INT || shape[i].i < 0) {
      fa_error(d, call->args.items[0]->loc, "dimension %d of buffer '%s' is not a non-negative integer", i, name);
      return false;
    }
    b->shape[i] = shape[i].i;
    if (shape[i].i > 0 && b->count > ((size_t)1 << 40) / (size_t)shape[i].i) {
      fa_error(d, call->args.items[0]->loc, "buffer '%s' is too large", name);
      return false;
    }
    b->count *= (size_t)shape[i].i;
  }
  b->bytes = b->count * (size_t)fa_dtype_size(b->dtype);
  /* a name bound to a compile-time value before is a buffer now */
  int e = find_env(run, name);
  if (e >= 0) run->env[e].name = "";
  run->nbufs++;
  return true;   /* made on the device when a launch first needs it */
}

void fa_tune_run_release(TuneRun *run) {
  for (int i = 0; i < run->nbufs; i++)
    if (run->bufs[i].dptr) fadsl_free(run->ctx, run->bufs[i].dptr);
  free(run->bufs);
  run->bufs = NULL;
  run->nbufs = run->capbufs = 0;
}

/* ---- launches --------------------------------------------------------------------- */

static const FaKernelInfo *called_kernel(const FaProgram *p, const Node *call) {
  if (!call || call->kind != N_CALL || !call->lhs || call->lhs->kind != N_NAME) return NULL;
  return fa_program_kernel(p, call->lhs->name);
}

static int param_index(const FaKernelInfo *k, const char *name) {
  for (int i = 0; i < k->nparams; i++)
    if (!strcmp(k->params[i].name, name)) return i;
  return -1;
}

/* The dtype a pointer or scalar parameter has at this launch (resolving
 * `*T` through the launch's value of T). */
static DType param_dtype(const FaKernelInfo *k, const TuneArg *args, int i) {
  const FaParamInfo *p = &k->params[i];
  if (p->dtype != DT_VOID || !p->dtype_param) return p->dtype;
  int t = param_index(k, p->dtype_param);
  if (t < 0) return DT_VOID;
  if (args[t].given && args[t].value.kind == CK_DTYPE) return args[t].value.dtype;
  if (k->params[t].has_default && k->params[t].default_value.kind == CK_DTYPE)
    return k->params[t].default_value.dtype;
  return DT_VOID;
}

static bool bind_arg(TuneRun *run, const FaKernelInfo *k, TuneArg *args, int i, const Node *e) {
  Diag *d = &run->fc->diag;
  const FaParamInfo *p = &k->params[i];
  if (args[i].given) {
    fa_error(d, e->loc, "argument '%s' of kernel '%s' is given twice", p->name, k->name);
    return false;
  }
  args[i].given = true;
  args[i].buffer = -1;
  if (p->kind == PARAM_POINTER) {
    int b = e->kind == N_NAME ? find_buffer(run, e->name) : -1;
    if (b < 0) {
      fa_error(d, e->loc, "argument '%s' of kernel '%s' is a pointer: pass a buffer allocated in the problem "
               "(randn, rand, zeros, empty)", p->name, k->name);
      return false;
    }
    args[i].buffer = b;
    return true;
  }
  if (!eval(run, e, &args[i].value)) return false;
  if (p->kind == PARAM_SCALAR &&
      !(args[i].value.kind == CK_INT || args[i].value.kind == CK_FLOAT || args[i].value.kind == CK_BOOL)) {
    fa_error(d, e->loc, "argument '%s' of kernel '%s' is a runtime scalar and needs a number", p->name, k->name);
    return false;
  }
  return true;
}

/* Checks what the kernel needs against the buffers it is given. */
static bool check_launch(TuneRun *run, const TuneLaunch *l) {
  Diag *d = &run->fc->diag;
  const FaKernelInfo *k = l->kernel;
  for (int i = 0; i < k->nparams; i++) {
    const FaParamInfo *p = &k->params[i];
    const TuneArg *a = &l->args[i];
    if (p->kind != PARAM_CONSTEXPR && !a->given) {
      fa_error(d, l->call->loc, "the launch of kernel '%s' does not give argument '%s'", k->name, p->name);
      return false;
    }
    if (p->kind == PARAM_POINTER) {
      DType want = param_dtype(k, l->args, i);
      const TuneBuffer *b = &run->bufs[a->buffer];
      if (want != DT_VOID && want != b->dtype) {
        fa_error(d, l->call->loc, "kernel '%s' takes '%s' as *%s, but buffer '%s' holds %s", k->name, p->name,
                 fa_dtype_name(want), b->name, fa_dtype_name(b->dtype));
        return false;
      }
    }
  }
  return true;
}

static bool run_launch(TuneRun *run, const Node *call, const FaKernelInfo *k, int index, bool *stop) {
  Diag *d = &run->fc->diag;
  TuneLaunch l;
  memset(&l, 0, sizeof l);
  l.problem = run->problem;
  l.kernel = k;
  l.call = call;
  l.index = index;
  l.args = fa_arena_alloc(&run->fc->arena, sizeof *l.args * (size_t)(k->nparams + 1));
  if (!l.args) return false;
  for (int i = 0; i < k->nparams; i++) l.args[i].buffer = -1;
  if (call->args.len > k->nparams) {
    fa_error(d, call->args.items[k->nparams]->loc, "kernel '%s' takes %d arguments, not %d", k->name, k->nparams,
             call->args.len);
    return false;
  }
  for (int i = 0; i < call->args.len; i++)
    if (!bind_arg(run, k, l.args, i, call->args.items[i])) return false;
  for (int i = 0; i < call->kwargs.len; i++) {
    const Node *kw = call->kwargs.items[i];
    int at = param_index(k, kw->name);
    if (at < 0) {
      fa_error(d, kw->loc, "kernel '%s' has no parameter '%s'", k->name, kw->name);
      return false;
    }
    if (!bind_arg(run, k, l.args, at, kw->rhs)) return false;
  }
  if (!check_launch(run, &l)) return false;

  TuneConfig cfg;
  memset(&cfg, 0, sizeof cfg);
  TuneAction act = run->hook ? run->hook(run->user, run, &l, &cfg) : TUNE_LAUNCH_DEFAULT;
  if (act == TUNE_ABORT) return false;
  if (act == TUNE_STOP) {
    *stop = true;
    return true;
  }
  if (act == TUNE_SKIP || !run->on_device) return true;

  /* launch it, as the tuner's own or as libfadsl would choose */
  if (!fa_tune_materialise(run, &l)) return false;
  double t1 = fa_tune_now();
  fadsl_kernel *rk = NULL;
  StrBuf err;
  fa_sb_init(&err);
  bool ok = false;
  if (fadsl_program_kernel(run->rprog, k->name, &rk) == FADSL_SUCCESS) {
    fadsl_args *a = fa_tune_make_args(run, &l, rk, act == TUNE_LAUNCH_CONFIG ? &cfg : NULL, &err);
    if (a) {
      fadsl_status st = fadsl_launch(rk, a, NULL, NULL);
      if (st == FADSL_SUCCESS) st = fadsl_synchronize(run->ctx, NULL);
      if (st != FADSL_SUCCESS)
        fa_sb_printf(&err, "%s", fadsl_context_last_error(run->ctx));
      else
        ok = true;
      fadsl_args_destroy(a);
    }
  } else {
    fa_sb_printf(&err, "%s", fadsl_context_last_error(run->ctx));
  }
  run->launch_s += fa_tune_now() - t1;
  if (!ok) fa_error(d, call->loc, "launching kernel '%s' failed: %s", k->name, err.data ? err.data : "");
  fa_sb_free(&err);
  return ok;
}

/* ---- the body --------------------------------------------------------------------- */

static bool run_body(TuneRun *run, const NodeList *body, int *nlaunch, bool *stop) {
  Diag *d = &run->fc->diag;
  for (int i = 0; i < body->len && !*stop; i++) {
    const Node *s = body->items[i];
    switch (s->kind) {
      case N_PASS: continue;
      case N_EXPR_STMT: {
        if (s->lhs && s->lhs->kind == N_STR) continue;   /* a docstring */
        const FaKernelInfo *k = called_kernel(run->prog, s->lhs);
        if (!k) {
          fa_error(d, s->loc, "a @problem statement must be an assignment or a kernel launch");
          return false;
        }
        if (!run_launch(run, s->lhs, k, (*nlaunch)++, stop)) return false;
        continue;
      }
      case N_ASSIGN: {
        if (s->args.len != 1 || s->args.items[0]->kind != N_NAME) {
          fa_error(d, s->loc, "a @problem assignment has one name on its left");
          return false;
        }
        const char *name = s->args.items[0]->name;
        int kind = alloc_kind(s->rhs);
        if (kind >= 0) {
          if (!allocate(run, name, s->rhs, kind)) return false;
          continue;
        }
        FaConst v;
        if (!eval(run, s->rhs, &v) || !env_set(run, name, v)) return false;
        continue;
      }
      case N_IF: {
        FaConst c;
        if (!eval(run, s->cond, &c)) return false;
        bool taken = c.kind == CK_FLOAT ? c.f != 0 : c.i != 0;
        if (!run_body(run, taken ? &s->body : &s->orelse, nlaunch, stop)) return false;
        continue;
      }
      default:
        fa_error(d, s->loc, "a @problem body holds assignments, buffer allocations (randn, rand, zeros, empty), "
                 "kernel launches and 'if' on compile-time values; not this statement");
        return false;
    }
  }
  return true;
}

int fa_tune_run_problem(TuneRun *run, const FaProblemInfo *pr) {
  run->problem = pr;
  run->nenv = 0;
  for (int i = 0; i < pr->nsizes; i++) {
    FaConst v = pr->sizes[i].value;
    for (int j = 0; j < run->opt->nsizes; j++)
      if (!strcmp(run->opt->sizes[j].name, pr->sizes[i].name)) v = run->opt->sizes[j].value;
    if (!env_set(run, pr->sizes[i].name, v)) return TUNE_EXIT_FAILED;
  }
  int nlaunch = 0;
  bool stop = false;
  run->exit_status = TUNE_EXIT_OK;
  if (!run_body(run, &pr->fn->body, &nlaunch, &stop))
    return run->exit_status != TUNE_EXIT_OK ? run->exit_status : TUNE_EXIT_FAILED;
  return TUNE_EXIT_OK;
}

static bool body_launches(const NodeList *body, const char *name) {
  for (int i = 0; i < body->len; i++) {
    const Node *s = body->items[i];
    if (s->kind == N_EXPR_STMT && s->lhs && s->lhs->kind == N_CALL && s->lhs->lhs &&
        s->lhs->lhs->kind == N_NAME && !strcmp(s->lhs->lhs->name, name))
      return true;
    if (s->kind == N_IF && (body_launches(&s->body, name) || body_launches(&s->orelse, name))) return true;
  }
  return false;
}

bool fa_tune_problem_launches(const FaProblemInfo *pr, const char *name) {
  return body_launches(&pr->fn->body, name);
}

/* ---- values for the runtime ----------------------------------------------------------- */

int fa_tune_launch_bindings(TuneRun *run, const TuneLaunch *l, const char *const *skip, int nskip,
                            FaBinding **out) {
  const FaKernelInfo *k = l->kernel;
  FaBinding *b = fa_arena_alloc(&run->fc->arena, sizeof *b * (size_t)(k->nparams + 1));
  if (!b) return -1;
  int n = 0;
  for (int i = 0; i < k->nparams; i++) {
    const FaParamInfo *p = &k->params[i];
    if (p->kind == PARAM_POINTER) continue;
    bool skipped = false;
    for (int s = 0; s < nskip; s++) skipped |= !strcmp(skip[s], p->name);
    if (skipped) continue;
    if (l->args[i].given) {
      b[n].name = p->name;
      b[n++].value = l->args[i].value;
    } else if (p->has_default && p->default_value.kind != CK_NONE) {
      b[n].name = p->name;
      b[n++].value = p->default_value;
    }
  }
  *out = b;
  return n;
}

static fadsl_value value_for(const FaParamInfo *p, DType dt, FaConst c, uint64_t ptr) {
  if (p->kind == PARAM_POINTER) return fadsl_ptr(ptr);
  if (p->kind == PARAM_CONSTEXPR) {
    switch (c.kind) {
      case CK_BOOL: return fadsl_bool((int)c.i);
      case CK_FLOAT: return fadsl_float(c.f);
      case CK_DTYPE: return fadsl_dtype(fa_dtype_name(c.dtype));
      default: return fadsl_int(c.i);
    }
  }
  double f = c.kind == CK_FLOAT ? c.f : (double)c.i;
  switch (dt) {
    case DT_I64: return fadsl_i64(c.kind == CK_FLOAT ? (int64_t)c.f : c.i);
    case DT_F64: return fadsl_f64(f);
    case DT_F16: case DT_BF16: case DT_F32: return fadsl_f32((float)f);
    default: return fadsl_i32((int32_t)(c.kind == CK_FLOAT ? (int64_t)c.f : c.i));
  }
}

int fa_tune_launch_facts(TuneRun *run, const TuneLaunch *l, FaArgFact **out) {
  const FaKernelInfo *k = l->kernel;
  FaArgFact *f = fa_arena_alloc(&run->fc->arena, sizeof *f * (size_t)(k->nparams + 1));
  if (!f) return -1;
  int n = 0;
  for (int i = 0; i < k->nparams; i++) {
    const FaParamInfo *p = &k->params[i];
    const TuneArg *arg = &l->args[i];
    if (!arg->given) continue;
    if (p->kind == PARAM_POINTER) {
      /* what libfadsl sees: the buffer's address (0 until it is made) */
      uint64_t ptr = arg->buffer >= 0 ? run->bufs[arg->buffer].dptr : 0;
      FaArgFact pf = fa_arg_fact_of_pointer(p->name, ptr);
      if (pf.multiple < FA_SPECIALISE_MULTIPLE) f[n++] = pf;
      continue;
    }
    DType dt = param_dtype(k, l->args, i);
    if (p->kind != PARAM_SCALAR || fa_dtype_is_float(dt)) continue;
    /* the value as fa_tune_make_args binds it */
    const FaConst *c = &arg->value;
    int64_t v = c->kind == CK_FLOAT ? (int64_t)c->f : c->i;
    if (dt != DT_I64) v = (int32_t)v;
    if (fa_arg_fact_of_int(p->name, v, &f[n])) n++;
  }
  *out = f;
  return n;
}

fadsl_args *fa_tune_make_args(TuneRun *run, const TuneLaunch *l, fadsl_kernel *k, const TuneConfig *cfg,
                              StrBuf *err) {
  const FaKernelInfo *ki = l->kernel;
  fadsl_args *a = NULL;
  if (fadsl_args_create(k, &a) != FADSL_SUCCESS) {
    fa_sb_puts(err, "out of memory");
    return NULL;
  }
  fadsl_status st = FADSL_SUCCESS;
  for (int i = 0; i < ki->nparams && st == FADSL_SUCCESS; i++) {
    const FaParamInfo *p = &ki->params[i];
    const TuneArg *arg = &l->args[i];
    const FaConst *c = arg->given ? &arg->value : NULL;
    if (cfg && p->kind == PARAM_CONSTEXPR)
      for (int v = 0; v < cfg->nvalues; v++)
        if (!strcmp(cfg->values[v].name, p->name)) c = &cfg->values[v].value;
    if (!c && !(p->kind == PARAM_POINTER && arg->given)) continue;
    uint64_t ptr = p->kind == PARAM_POINTER && arg->buffer >= 0 ? run->bufs[arg->buffer].dptr : 0;
    FaConst none;
    memset(&none, 0, sizeof none);
    st = fadsl_args_set(a, p->name, value_for(p, param_dtype(ki, l->args, i), c ? *c : none, ptr));
  }
  int naxes;
  const FaConfigAxis *axes = fa_config_axes(&naxes);
  for (int x = 0; x < naxes && st == FADSL_SUCCESS && cfg; x++)
    if (fa_config_get(&cfg->config, &axes[x]) > 0)
      st = fadsl_args_set_config_axis(a, axes[x].name, fa_config_get(&cfg->config, &axes[x]));
  if (st != FADSL_SUCCESS) {
    fa_sb_printf(err, "%s", fadsl_context_last_error(run->ctx));
    fadsl_args_destroy(a);
    return NULL;
  }
  return a;
}
