/* problem_binds.c - constexpr values for a stand-alone compile (see
 * problem_binds.h). */
#include "problem_binds.h"

#include <string.h>

#include "autotune_point.h"

const FaParamInfo *fa_kernel_constexpr(const FaKernelInfo *k, const char *name) {
  for (int i = 0; i < k->nparams; i++)
    if (k->params[i].kind == PARAM_CONSTEXPR && !strcmp(k->params[i].name, name))
      return &k->params[i];
  return NULL;
}

bool fa_program_has_size(const FaProgram *p, const char *name) {
  for (int i = 0; i < p->nproblems; i++)
    if (fa_binding_index(p->problems[i]->sizes, p->problems[i]->nsizes, name) >= 0)
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

/* The call of kernel k in a problem's statements, or NULL.  Inside an `if`
 * on a compile-time condition (the problem's sizes in env), the branch the
 * sizes take comes first; a kernel that only the other branch launches
 * (the problem's deterministic backward pass, say) takes its values there. */
static const Node *find_launch(FaCompiler *fc, const FaProgram *p, const NodeList *body, const char *kernel,
                               const FaBinding *env, int ne) {
  for (int i = 0; i < body->len; i++) {
    const Node *s = body->items[i];
    if (s->kind == N_EXPR_STMT && s->lhs && s->lhs->kind == N_CALL && s->lhs->lhs &&
        s->lhs->lhs->kind == N_NAME && !strcmp(s->lhs->lhs->name, kernel))
      return s->lhs;
    if (s->kind != N_IF)
      continue;
    FaConst c;
    bool else_first = s->cond && eval_quietly(fc, p, s->cond, env, ne, &c) &&
                      (c.kind == CK_BOOL || c.kind == CK_INT) && !c.i;
    const Node *call = find_launch(fc, p, else_first ? &s->orelse : &s->body, kernel, env, ne);
    if (!call)
      call = find_launch(fc, p, else_first ? &s->body : &s->orelse, kernel, env, ne);
    if (call)
      return call;
  }
  return NULL;
}

/* The default point of the autotune space for the axes not bound yet
 * (autotune_point.h), appended to b[0..*n) and into *config; no point that
 * passes the prune is an error here. */
static bool autotune_default(FaCompiler *fc, const FaProgram *p, const FaKernelInfo *k, int arch, FaBinding *b,
                             int *n, FaLaunchConfig *config) {
  FaAutotunePoint pt;
  if (!fa_autotune_default_point(&fc->arena, p, k, b, *n, config, arch, &pt)) {
    fa_error(&fc->diag, fa_noloc(), "out of memory");
    return false;
  }
  if (pt.none_passes) {
    fa_autotune_report_none_passes(fc, k, &pt);
    return false;
  }
  *n += fa_autotune_point_bindings(k, &pt, b + *n);
  *config = pt.config;
  return true;
}

int fa_kernel_bindings_for_compile(FaCompiler *fc, const FaProgram *p, const FaKernelInfo *k,
                                   const FaBinding *given, int ngiven, int arch, FaBinding **out,
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
    if (fa_kernel_constexpr(k, given[i].name)) {
      if (fa_binding_index(b, n, given[i].name) < 0)
        b[n++] = given[i];
    } else if (!fa_program_has_size(p, given[i].name)) {
      fa_error(&fc->diag, fa_noloc(), "-D %s: kernel '%s' has no constexpr parameter '%s' (and no problem size "
               "has that name)", given[i].name, k->name, given[i].name);
      return -1;
    }
  }
  /* what a problem description passes */
  for (int pi = 0; pi < p->nproblems; pi++) {
    const FaProblemInfo *pr = p->problems[pi];
    int ne = 0;
    for (int i = 0; i < pr->nsizes && ne < scap; i++) {
      int g = fa_binding_index(given, ngiven, pr->sizes[i].name);
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
    const Node *call = find_launch(fc, p, &pr->fn->body, k->name, env, ne);
    if (!call)
      continue;
    for (int i = 0; i < call->kwargs.len; i++) {
      const Node *kw = call->kwargs.items[i];
      if (!kw->name || !fa_kernel_constexpr(k, kw->name) || fa_binding_index(b, n, kw->name) >= 0 || n >= cap)
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
      if (pa->kind != PARAM_CONSTEXPR || fa_binding_index(b, n, pa->name) >= 0 || n >= cap)
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
  /* the autotune space: its default point */
  if (k->ntune > 0 && !autotune_default(fc, p, k, arch, b, &n, config))
    return -1;
  /* constexpr defaults */
  for (int i = 0; i < k->nparams; i++) {
    const FaParamInfo *pa = &k->params[i];
    if (pa->kind == PARAM_CONSTEXPR && pa->has_default && fa_binding_index(b, n, pa->name) < 0 && n < cap) {
      b[n].name = pa->name;
      b[n].value = pa->default_value;
      n++;
    }
  }
  fa_config_fill_defaults(config);
  *out = b;
  return n;
}
