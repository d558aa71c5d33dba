/* problem_binds.c - constexpr values for a stand-alone compile (see
 * problem_binds.h). */
#include "problem_binds.h"

#include <string.h>

static int find_binding(const FaBinding *b, int n, const char *name) {
  for (int i = 0; i < n; i++)
    if (b[i].name && !strcmp(b[i].name, name))
      return i;
  return -1;
}

static const FaParamInfo *find_constexpr(const FaKernelInfo *k, const char *name) {
  for (int i = 0; i < k->nparams; i++)
    if (k->params[i].kind == PARAM_CONSTEXPR && !strcmp(k->params[i].name, name))
      return &k->params[i];
  return NULL;
}

static bool is_problem_size(const FaProgram *p, const char *name) {
  for (int i = 0; i < p->nproblems; i++)
    if (find_binding(p->problems[i]->sizes, p->problems[i]->nsizes, name) >= 0)
      return true;
  return false;
}

/* Evaluates without reporting: a problem's local assignments may be buffer
 * allocations, which are not compile-time values. */
static bool eval_quietly(FaCompiler *fc, const FaProgram *p, const Node *e, const FaBinding *b, int n,
                         FaConst *out) {
  Diag saved = fc->diag;
  fa_diag_init(&fc->diag, NULL);
  bool ok = fa_eval_const(fc, p, e, b, n, out) && fc->diag.errors == 0;
  fa_diag_free(&fc->diag);
  fc->diag = saved;
  return ok;
}

/* The call of kernel k in a problem's body, or NULL. */
static const Node *find_launch(const Node *fn, const char *kernel) {
  for (int i = 0; i < fn->body.len; i++) {
    const Node *s = fn->body.items[i];
    if (s->kind == N_EXPR_STMT && s->lhs && s->lhs->kind == N_CALL && s->lhs->lhs &&
        s->lhs->lhs->kind == N_NAME && !strcmp(s->lhs->lhs->name, kernel))
      return s->lhs;
  }
  return NULL;
}

/* Whether an @autotune axis already has a value: a launch-configuration
 * axis in *config, a constexpr among the first `base` bindings. */
static bool axis_fixed(const FaTuneAxis *ax, const FaBinding *b, int base, const FaLaunchConfig *config) {
  const FaConfigAxis *cfg = fa_config_axis(ax->name);
  return cfg ? fa_config_get(config, cfg) > 0 : find_binding(b, base, ax->name) >= 0;
}

/* Chooses a value for each @autotune axis not bound yet (launch-configuration
 * axes into *config unless set): the first combination, in the order of the
 * declaration (last axis fastest), that the prune expression accepts. */
static bool autotune_default(FaCompiler *fc, const FaProgram *p, const FaKernelInfo *k, FaBinding *b, int *n,
                             int cap, FaLaunchConfig *config) {
  int nt = k->ntune;
  int idx[16] = {0};
  if (nt > 16)
    nt = 16;
  int base = *n;
  /* every axis given explicitly: that configuration, whatever the prune says */
  bool free_axis = false;
  for (int a = 0; a < nt; a++) {
    const FaTuneAxis *ax = &k->tune[a];
    free_axis = free_axis || (!axis_fixed(ax, b, base, config) && ax->nvalues > 0);
  }
  if (!free_axis)
    return true;
  int naxes;
  const FaConfigAxis *axes = fa_config_axes(&naxes);
  for (;;) {
    int m = base;
    for (int a = 0; a < nt && m + naxes < cap; a++) {
      const FaTuneAxis *ax = &k->tune[a];
      if (ax->nvalues <= 0 || axis_fixed(ax, b, base, config))
        continue;
      b[m].name = ax->name;
      b[m].value = ax->values[idx[a]];
      m++;
    }
    /* configuration axes given on the command line take part in the prune too */
    for (int x = 0; x < naxes && m < cap; x++)
      if (fa_config_get(config, &axes[x]) > 0)
        b[m++] = (FaBinding){axes[x].name, {CK_INT, fa_config_get(config, &axes[x]), 0, DT_VOID, NULL}};
    FaConst keep = {CK_BOOL, 1, 0, DT_VOID, NULL};
    if (k->prune && !fa_eval_const(fc, p, k->prune, b, m, &keep))
      return false;
    if (keep.i) {
      /* move the configuration axes out of the bindings */
      int w = base;
      for (int i = base; i < m; i++) {
        const FaConfigAxis *cfg = fa_config_axis(b[i].name);
        if (cfg) {
          if (fa_config_get(config, cfg) <= 0)
            fa_config_set(config, cfg, (int)b[i].value.i);
          continue;
        }
        b[w++] = b[i];
      }
      *n = w;
      return true;
    }
    /* next combination */
    int a = nt - 1;
    for (; a >= 0; a--) {
      if (++idx[a] < k->tune[a].nvalues)
        break;
      idx[a] = 0;
    }
    if (a < 0) {
      fa_error(&fc->diag, k->prune ? k->prune->loc : fa_noloc(),
               "no configuration of kernel '%s' passes its @autotune prune with these values", k->name);
      return false;
    }
  }
}

int fa_kernel_bindings_for_compile(FaCompiler *fc, const FaProgram *p, const FaKernelInfo *k,
                                   const FaBinding *given, int ngiven, FaBinding **out,
                                   FaLaunchConfig *config) {
  int cap = k->nparams + ngiven + k->ntune + 8;
  FaBinding *b = fa_arena_alloc(&fc->arena, (size_t)cap * sizeof *b);
  /* problem sizes and locals, for evaluating the launch's arguments */
  int scap = 256;
  FaBinding *env = fa_arena_alloc(&fc->arena, (size_t)scap * sizeof *env);
  if (!b || !env) {
    fa_error(&fc->diag, fa_noloc(), "out of memory");
    return -1;
  }
  int n = 0;
  for (int i = 0; i < ngiven; i++) {
    if (find_constexpr(k, given[i].name)) {
      if (find_binding(b, n, given[i].name) < 0)
        b[n++] = given[i];
    } else if (!is_problem_size(p, given[i].name)) {
      fa_error(&fc->diag, fa_noloc(), "-D %s: kernel '%s' has no constexpr parameter '%s' (and no problem size "
               "has that name)", given[i].name, k->name, given[i].name);
      return -1;
    }
  }
  /* what a problem description passes */
  for (int pi = 0; pi < p->nproblems; pi++) {
    const FaProblemInfo *pr = p->problems[pi];
    const Node *call = find_launch(pr->fn, k->name);
    if (!call)
      continue;
    int ne = 0;
    for (int i = 0; i < pr->nsizes && ne < scap; i++) {
      int g = find_binding(given, ngiven, pr->sizes[i].name);
      env[ne++] = g >= 0 ? given[g] : pr->sizes[i];
    }
    for (int i = 0; i < pr->fn->body.len; i++) {
      const Node *s = pr->fn->body.items[i];
      if (s->kind != N_ASSIGN || !s->rhs || s->args.len != 1 || s->args.items[0]->kind != N_NAME || ne >= scap)
        continue;
      FaConst v;
      if (eval_quietly(fc, p, s->rhs, env, ne, &v)) {
        env[ne].name = s->args.items[0]->name;
        env[ne].value = v;
        ne++;
      }
    }
    for (int i = 0; i < call->kwargs.len; i++) {
      const Node *kw = call->kwargs.items[i];
      if (!kw->name || !find_constexpr(k, kw->name) || find_binding(b, n, kw->name) >= 0 || n >= cap)
        continue;
      FaConst v;
      if (!fa_eval_const(fc, p, kw->rhs, env, ne, &v))
        return -1;
      b[n].name = kw->name;
      b[n].value = v;
      n++;
    }
    for (int i = 0; i < call->args.len && i < k->nparams; i++) {
      const FaParamInfo *pa = &k->params[i];
      if (pa->kind != PARAM_CONSTEXPR || find_binding(b, n, pa->name) >= 0 || n >= cap)
        continue;
      FaConst v;
      if (!fa_eval_const(fc, p, call->args.items[i], env, ne, &v))
        return -1;
      b[n].name = pa->name;
      b[n].value = v;
      n++;
    }
    break;
  }
  /* the autotune space: its first configuration that the prune accepts */
  if (k->ntune > 0 && !autotune_default(fc, p, k, b, &n, cap, config))
    return -1;
  /* constexpr defaults */
  for (int i = 0; i < k->nparams; i++) {
    const FaParamInfo *pa = &k->params[i];
    if (pa->kind == PARAM_CONSTEXPR && pa->has_default && find_binding(b, n, pa->name) < 0 && n < cap) {
      b[n].name = pa->name;
      b[n].value = pa->default_value;
      n++;
    }
  }
  fa_config_fill_defaults(config);
  *out = b;
  return n;
}
