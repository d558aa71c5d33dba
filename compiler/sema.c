/* sema.c - the program check: what a .fa module defines (kernels, helpers,
 * problem descriptions, module constants), the meaning of the decorators
 * (@kernel, @autotune, @problem) and of parameter annotations, and the
 * checks that do not depend on constexpr values: unknown names, unsupported
 * statements, recursion among helpers.
 *
 * Everything that depends on constexpr values (types, shapes, builtin
 * arguments) is checked when a kernel is specialised (lower.c).
 */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "autotune_point.h"
#include "modules.h"
#include "sema_internal.h"

typedef struct Checker {
  FaCompiler *fc;
  FaProgram *p;
  const Node *module;
  PtrVec consts;            /* const char*: names of module constants */
} Checker;

static void serr(Checker *C, SrcLoc loc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void serr(Checker *C, SrcLoc loc, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fa_diag_vreport(&C->fc->diag, loc, DIAG_ERROR, fmt, ap);
  va_end(ap);
}

static bool has_name(const PtrVec *v, const char *name) {
  for (int i = 0; i < v->len; i++)
    if (!strcmp((const char *)v->items[i], name))
      return true;
  return false;
}

const Node *fa_program_function(const FaProgram *p, const char *name) {
  for (int i = 0; i < p->nkernels; i++)
    if (!strcmp(p->kernels[i]->name, name))
      return p->kernels[i]->fn;
  for (int i = 0; i < p->nhelpers; i++)
    if (!strcmp(p->helpers[i]->name, name))
      return p->helpers[i];
  for (int i = 0; i < p->nproblems; i++)
    if (!strcmp(p->problems[i]->name, name))
      return p->problems[i]->fn;
  return NULL;
}

FaKernelInfo *fa_program_kernel(const FaProgram *p, const char *name) {
  for (int i = 0; p && i < p->nkernels; i++)
    if (!strcmp(p->kernels[i]->name, name))
      return p->kernels[i];
  return NULL;
}

int fa_binding_index(const FaBinding *b, int n, const char *name) {
  for (int i = 0; i < n; i++)
    if (b[i].name && !strcmp(b[i].name, name))
      return i;
  return -1;
}

static bool is_dtype_word(const char *name) {
  return !strcmp(name, "bool") || (fa_dtype_from_name(name) != DT_VOID && strcmp(name, "u32"));
}

/* ---- names ---------------------------------------------------------------------- */

/* Names a function may read: its parameters, anything it assigns, module
 * constants, functions, builtins and dtype names. */
typedef struct NameCtx {
  PtrVec local;
} NameCtx;

static void add_targets(NameCtx *nc, const Node *t) {
  if (!t)
    return;
  if (t->kind == N_NAME)
    fa_ptrvec_push(&nc->local, (void *)t->name);
  else if (t->kind == N_TUPLE || t->kind == N_LIST)
    for (int i = 0; i < t->args.len; i++)
      add_targets(nc, t->args.items[i]);
}

static void collect_locals(NameCtx *nc, const NodeList *body) {
  for (int i = 0; i < body->len; i++) {
    const Node *s = body->items[i];
    switch (s->kind) {
    case N_ASSIGN:
      for (int j = 0; j < s->args.len; j++)
        add_targets(nc, s->args.items[j]);
      break;
    case N_AUGASSIGN:
    case N_ANNASSIGN: add_targets(nc, s->lhs); break;
    case N_FOR:
      add_targets(nc, s->lhs);
      collect_locals(nc, &s->body);
      break;
    case N_IF:
      collect_locals(nc, &s->body);
      collect_locals(nc, &s->orelse);
      break;
    case N_WHILE: collect_locals(nc, &s->body); break;
    default: break;
    }
  }
}

static bool name_known(Checker *C, const NameCtx *nc, const char *name) {
  return (nc && has_name(&nc->local, name)) || has_name(&C->consts, name) || fa_program_function(C->p, name) ||
         fa_is_builtin_name(name) || is_dtype_word(name) || !strcmp(name, "...");
}

static void check_names(Checker *C, const NameCtx *nc, const Node *e);

static void check_names_list(Checker *C, const NameCtx *nc, const NodeList *l) {
  for (int i = 0; i < l->len; i++)
    check_names(C, nc, l->items[i]);
}

static void check_names(Checker *C, const NameCtx *nc, const Node *e) {
  if (!e)
    return;
  switch (e->kind) {
  case N_NAME:
    if (!name_known(C, nc, e->name))
      serr(C, e->loc, "unknown name '%s'", e->name);
    return;
  case N_KEYWORD: check_names(C, nc, e->rhs); return;
  case N_ATTR: check_names(C, nc, e->lhs); return;
  case N_ASSIGN:
    check_names(C, nc, e->rhs);
    for (int i = 0; i < e->args.len; i++) {
      const Node *t = e->args.items[i];
      if (t->kind == N_SUBSCRIPT || t->kind == N_ATTR)
        check_names(C, nc, t);
    }
    return;
  case N_ANNASSIGN: check_names(C, nc, e->rhs); return;
  case N_FOR:
    check_names(C, nc, e->rhs);
    check_names_list(C, nc, &e->body);
    return;
  case N_FUNC: return;
  default:
    check_names(C, nc, e->lhs);
    check_names(C, nc, e->rhs);
    check_names(C, nc, e->cond);
    check_names(C, nc, e->then);
    check_names(C, nc, e->els);
    check_names(C, nc, e->lo);
    check_names(C, nc, e->hi);
    check_names(C, nc, e->step);
    check_names_list(C, nc, &e->args);
    check_names_list(C, nc, &e->kwargs);
    check_names_list(C, nc, &e->body);
    check_names_list(C, nc, &e->orelse);
    return;
  }
}

/* Statements the language does not have. */
static void check_stmts(Checker *C, const NodeList *body, bool kernel) {
  for (int i = 0; i < body->len; i++) {
    const Node *s = body->items[i];
    switch (s->kind) {
    case N_WHILE: check_stmts(C, &s->body, kernel); break;
    case N_BREAK:
    case N_CONTINUE:
      serr(C, s->loc, "'%s' is not supported; a loop runs to the end of its range or until its condition is false",
           s->kind == N_BREAK ? "break" : "continue");
      break;
    case N_FUNC: serr(C, s->loc, "nested function definitions are not supported"); break;
    case N_RETURN:
      if (kernel && s->lhs)
        serr(C, s->loc, "a kernel cannot return a value; store results through pointers");
      break;
    case N_FOR: {
      const Node *it = s->rhs;
      if (s->lhs->kind != N_NAME)
        serr(C, s->lhs->loc, "the target of a 'for' loop must be a single name");
      else if (!it || it->kind != N_CALL || it->lhs->kind != N_NAME ||
               (strcmp(it->lhs->name, "range") && strcmp(it->lhs->name, "static_range")))
        serr(C, it ? it->loc : s->loc, "only 'for NAME in range(...)' and 'for NAME in static_range(...)' loops are "
                                       "supported");
      check_stmts(C, &s->body, kernel);
      break;
    }
    case N_IF:
      check_stmts(C, &s->body, kernel);
      check_stmts(C, &s->orelse, kernel);
      break;
    default: break;
    }
  }
}

static void check_body(Checker *C, const Node *fn, bool kernel) {
  NameCtx nc;
  memset(&nc, 0, sizeof nc);
  for (int i = 0; i < fn->params.len; i++)
    fa_ptrvec_push(&nc.local, (void *)fn->params.items[i]->name);
  collect_locals(&nc, &fn->body);
  check_stmts(C, &fn->body, kernel);
  check_names_list(C, &nc, &fn->body);
  fa_check_calls(C->fc, C->p, &nc.local, &C->consts, &fn->body, NULL, false);
  fa_ptrvec_free(&nc.local);
}

/* Names in a decorator expression: the kernel's parameters and globals. */
static void check_param_names(Checker *C, const Node *fn, const Node *e) {
  NameCtx nc;
  memset(&nc, 0, sizeof nc);
  for (int i = 0; i < fn->params.len; i++)
    fa_ptrvec_push(&nc.local, (void *)fn->params.items[i]->name);
  check_names(C, &nc, e);
  fa_check_calls(C->fc, C->p, &nc.local, &C->consts, NULL, e, false);
  fa_ptrvec_free(&nc.local);
}

/* ---- recursion among helpers ---------------------------------------------------- */

static void collect_calls(Checker *C, const Node *e, PtrVec *calls) {
  if (!e)
    return;
  if (e->kind == N_CALL && e->lhs->kind == N_NAME) {
    const Node *f = fa_program_function(C->p, e->lhs->name);
    if (f && !fa_func_is_kernel(f) && !fa_func_decorator(f, "problem"))
      fa_ptrvec_push(calls, (void *)e);
  }
  if (e->kind == N_FUNC)
    return;
  const Node *kids[] = {e->lhs, e->rhs, e->cond, e->then, e->els, e->lo, e->hi, e->step};
  for (int i = 0; i < FA_ARRAY_LEN(kids); i++)
    collect_calls(C, kids[i], calls);
  const NodeList *lists[] = {&e->args, &e->kwargs, &e->body, &e->orelse};
  for (int l = 0; l < FA_ARRAY_LEN(lists); l++)
    for (int i = 0; i < lists[l]->len; i++)
      collect_calls(C, lists[l]->items[i], calls);
}

/* Finds cycles in the helper call graph with an explicit stack (no
 * recursion, so a long chain of helpers cannot overflow the C stack). */
static void check_recursion(Checker *C) {
  int n = C->p->nhelpers;
  if (n == 0)
    return;
  PtrVec *calls = calloc((size_t)n, sizeof(PtrVec));
  int *state = calloc((size_t)n, sizeof(int)); /* 0 new, 1 on stack, 2 done */
  int *stack = calloc((size_t)n, sizeof(int)), *next = calloc((size_t)n, sizeof(int));
  if (!calls || !state || !stack || !next) {
    serr(C, fa_noloc(), "out of memory");
    goto out;
  }
  for (int i = 0; i < n; i++)
    for (int j = 0; j < C->p->helpers[i]->body.len; j++)
      collect_calls(C, C->p->helpers[i]->body.items[j], &calls[i]);
  for (int root = 0; root < n; root++) {
    if (state[root])
      continue;
    int sp = 0;
    stack[sp++] = root;
    state[root] = 1;
    next[root] = 0;
    while (sp > 0) {
      int h = stack[sp - 1];
      if (next[h] >= calls[h].len) {
        state[h] = 2;
        sp--;
        continue;
      }
      const Node *call = calls[h].items[next[h]++];
      const Node *callee = fa_program_function(C->p, call->lhs->name);
      int t = -1;
      for (int i = 0; i < n; i++)
        if (C->p->helpers[i] == callee)
          t = i;
      if (t < 0)
        continue;
      if (state[t] == 1) {
        if (t == h)
          serr(C, call->loc, "'%s' calls itself: helpers are inlined, so recursion is not supported",
               C->p->helpers[h]->name);
        else
          serr(C, call->loc, "'%s' calls '%s', which calls back into it: helpers are inlined, so recursion is not "
                             "supported", C->p->helpers[h]->name, C->p->helpers[t]->name);
      } else if (state[t] == 0) {
        state[t] = 1;
        next[t] = 0;
        stack[sp++] = t;
      }
    }
  }
out:
  for (int i = 0; calls && i < n; i++)
    fa_ptrvec_free(&calls[i]);
  free(calls);
  free(state);
  free(stack);
  free(next);
}

/* ---- decorators and parameters ---------------------------------------------------- */

static bool eval_const(Checker *C, const Node *e, FaConst *out) {
  int n;
  return fa_lower_eval_const(C->fc, C->p, C->module, e, NULL, 0, out, 1, &n);
}

static int param_index(const Node *fn, const char *name) {
  for (int i = 0; i < fn->params.len; i++)
    if (!strcmp(fn->params.items[i]->name, name))
      return i;
  return -1;
}

static bool is_constexpr_annot(const Node *an) { return an && an->kind == N_NAME && !strcmp(an->name, "constexpr"); }

/* The element type of `*X` or a scalar annotation X: a dtype, a constexpr
 * parameter of the kernel holding one, or a module constant holding one. */
static bool resolve_type_name(Checker *C, const Node *fn, const Node *an, const char *pname, DType *dt,
                              const char **dparam) {
  *dt = DT_VOID;
  *dparam = NULL;
  if (an->kind == N_PTR_TYPE) {
    serr(C, an->loc, "pointers to pointers are not supported (parameter '%s')", pname);
    return false;
  }
  if (an->kind != N_NAME) {
    serr(C, an->loc, "expected a type for parameter '%s' (a dtype, *dtype or constexpr)", pname);
    return false;
  }
  if (is_dtype_word(an->name)) {
    *dt = fa_dtype_from_name(an->name);
    return true;
  }
  int j = param_index(fn, an->name);
  if (j >= 0) {
    if (!is_constexpr_annot(fn->params.items[j]->annot)) {
      serr(C, an->loc, "'%s' is used as a type but is not a constexpr parameter", an->name);
      return false;
    }
    *dparam = an->name;
    return true;
  }
  if (has_name(&C->consts, an->name)) {
    FaConst c;
    if (!eval_const(C, an, &c))
      return false;
    if (c.kind != CK_DTYPE) {
      serr(C, an->loc, "'%s' is used as a type but is not a dtype", an->name);
      return false;
    }
    *dt = c.dtype;
    return true;
  }
  serr(C, an->loc, "unknown type '%s' for parameter '%s'", an->name, pname);
  return false;
}

static bool check_kernel_params(Checker *C, const Node *fn, FaKernelInfo *k) {
  bool ok = true;
  k->nparams = fn->params.len;
  k->params = fa_arena_alloc(&C->fc->arena, (size_t)(k->nparams + 1) * sizeof(FaParamInfo));
  if (!k->params)
    return false;
  for (int i = 0; i < fn->params.len; i++) {
    const Node *p = fn->params.items[i];
    FaParamInfo *pi = &k->params[i];
    pi->name = p->name;
    pi->node = p;
    for (int j = 0; j < i; j++)
      if (!strcmp(fn->params.items[j]->name, p->name)) {
        serr(C, p->loc, "duplicate parameter '%s'", p->name);
        ok = false;
      }
    const Node *an = p->annot;
    if (!an) {
      serr(C, p->loc, "kernel parameter '%s' needs a type (such as *f16, i32 or constexpr)", p->name);
      ok = false;
      continue;
    }
    if (is_constexpr_annot(an)) {
      pi->kind = PARAM_CONSTEXPR;
      if (p->rhs) {
        if (!eval_const(C, p->rhs, &pi->default_value))
          ok = false;
        else
          pi->has_default = true;
      }
      continue;
    }
    if (p->rhs) {
      serr(C, p->rhs->loc, "only constexpr parameters can have default values ('%s' is a runtime parameter)",
           p->name);
      ok = false;
    }
    if (an->kind == N_PTR_TYPE) {
      pi->kind = PARAM_POINTER;
      if (!resolve_type_name(C, fn, an->lhs, p->name, &pi->dtype, &pi->dtype_param))
        ok = false;
      if (an->args.len > FA_MAX_RANK) {
        serr(C, an->loc, "an extent has at most %d dimensions", FA_MAX_RANK);
        ok = false;
      }
      for (int j = 0; j < an->args.len; j++)
        check_param_names(C, fn, an->args.items[j]);
    } else {
      pi->kind = PARAM_SCALAR;
      if (!resolve_type_name(C, fn, an, p->name, &pi->dtype, &pi->dtype_param))
        ok = false;
    }
  }
  return ok;
}

static bool check_helper_params(Checker *C, const Node *fn) {
  bool ok = true;
  for (int i = 0; i < fn->params.len; i++) {
    const Node *p = fn->params.items[i];
    for (int j = 0; j < i; j++)
      if (!strcmp(fn->params.items[j]->name, p->name)) {
        serr(C, p->loc, "duplicate parameter '%s'", p->name);
        ok = false;
      }
    const Node *an = p->annot;
    if (an && !is_constexpr_annot(an)) {
      const Node *tn = an->kind == N_PTR_TYPE ? an->lhs : an;
      bool known = tn->kind == N_NAME && (is_dtype_word(tn->name) || param_index(fn, tn->name) >= 0 ||
                                          has_name(&C->consts, tn->name));
      if (!known) {
        serr(C, an->loc, "unknown type in the annotation of parameter '%s'", p->name);
        ok = false;
      }
    }
    if (p->rhs)
      check_names(C, NULL, p->rhs);
  }
  return ok;
}

/* A list of compile-time values, e.g. @autotune(BLOCK_Q=[64, 128]). */
static bool eval_list(Checker *C, const Node *e, const char *what, FaConst **vals, int *n) {
  if (e->kind != N_LIST && e->kind != N_TUPLE) {
    serr(C, e->loc, "%s must be a list of values, such as [64, 128]", what);
    return false;
  }
  if (e->args.len == 0) {
    serr(C, e->loc, "%s has no values", what);
    return false;
  }
  *n = e->args.len;
  *vals = fa_arena_alloc(&C->fc->arena, (size_t)*n * sizeof(FaConst));
  if (!*vals)
    return false;
  for (int i = 0; i < *n; i++)
    if (!eval_const(C, e->args.items[i], &(*vals)[i]))
      return false;
  return true;
}

/* The prune and the prefer expression see the parameters, the launch
 * configuration and the target's compute capability, FA_PRUNE_ARCH (sema.h):
 * each is checked for unknown names in that scope. */
static void check_prune(Checker *C, const Node *fn, const Node *expr) {
  NameCtx nc;
  memset(&nc, 0, sizeof nc);
  for (int j = 0; j < fn->params.len; j++)
    fa_ptrvec_push(&nc.local, (void *)fn->params.items[j]->name);
  int naxes;
  const FaConfigAxis *axes = fa_config_axes(&naxes);
  for (int a = 0; a < naxes; a++)
    fa_ptrvec_push(&nc.local, (void *)axes[a].name);
  fa_ptrvec_push(&nc.local, (void *)FA_PRUNE_ARCH);
  check_names(C, &nc, expr);
  fa_ptrvec_free(&nc.local);
}

/* A parameter named FA_PRUNE_ARCH would make `arch` in a prune or prefer
 * expression mean one thing in the kernel's body and another to whoever
 * reads the expression, so it is refused rather than shadowed (once, naming
 * the first of the two that the kernel has). */
static bool check_arch_clash(Checker *C, const Node *fn, const FaKernelInfo *k) {
  int clash = param_index(fn, FA_PRUNE_ARCH);
  if (clash < 0 || (!k->prune && !k->prefer))
    return true;
  serr(C, fn->params.items[clash]->loc,
       "parameter '%s' of kernel '%s' clashes with the target's compute capability, which "
       "@autotune(%s=...) reads as '%s': rename the parameter", FA_PRUNE_ARCH, fn->name,
       k->prune ? "prune" : "prefer", FA_PRUNE_ARCH);
  return false;
}

static bool check_autotune(Checker *C, const Node *fn, const Node *dec, FaKernelInfo *k) {
  bool ok = true;
  if (dec->args.len) {
    serr(C, dec->args.items[0]->loc, "@autotune takes keyword arguments only (NAME=[values], warps=, stages=, "
                                     "prune=, prefer=, key=)"); /* the launch-configuration axes, see config_axes.c */
    ok = false;
  }
  k->tune = fa_arena_alloc(&C->fc->arena, (size_t)(dec->kwargs.len + 1) * sizeof(FaTuneAxis));
  if (!k->tune)
    return false;
  for (int i = 0; i < dec->kwargs.len; i++) {
    const Node *kw = dec->kwargs.items[i];
    const char *name = kw->name;
    if (!strcmp(name, "prune") || !strcmp(name, "prefer")) {
      *(!strcmp(name, "prune") ? &k->prune : &k->prefer) = kw->rhs;
      check_prune(C, fn, kw->rhs);
      continue;
    }
    if (!strcmp(name, "key")) {
      const Node *e = kw->rhs;
      int n = (e->kind == N_TUPLE || e->kind == N_LIST) ? e->args.len : 1;
      k->key = fa_arena_alloc(&C->fc->arena, (size_t)(n + 1) * sizeof(char *));
      if (!k->key)
        return false;
      for (int j = 0; j < n; j++) {
        const Node *it = (e->kind == N_TUPLE || e->kind == N_LIST) ? e->args.items[j] : e;
        const char *pn = it->kind == N_NAME ? it->name : it->kind == N_STR ? it->str : NULL;
        if (!pn || param_index(fn, pn) < 0) {
          serr(C, it->loc, "@autotune key entries must name parameters of '%s'", fn->name);
          ok = false;
          continue;
        }
        k->key[k->nkey++] = pn;
      }
      continue;
    }
    FaTuneAxis *ax = &k->tune[k->ntune];
    ax->name = name;
    const FaConfigAxis *cfg = fa_config_axis(name);
    if (!cfg) {
      int j = param_index(fn, name);
      if (j < 0 || !is_constexpr_annot(fn->params.items[j]->annot)) {
        serr(C, kw->loc, "@autotune axis '%s' is not a constexpr parameter of '%s'", name, fn->name);
        ok = false;
        continue;
      }
    }
    for (int j = 0; j < k->ntune; j++)
      if (!strcmp(k->tune[j].name, name)) {
        serr(C, kw->loc, "@autotune axis '%s' is given twice", name);
        ok = false;
      }
    if (!eval_list(C, kw->rhs, fa_arena_printf(&C->fc->arena, "@autotune axis '%s'", name), &ax->values,
                   &ax->nvalues)) {
      ok = false;
      continue;
    }
    for (int j = 0; cfg && j < ax->nvalues; j++) {
      FaConst v = ax->values[j];
      int named;
      if (v.kind == CK_STR && cfg->names && fa_config_parse(cfg, v.s, &named)) /* pipeline=["cp_async", "tma"] */
        ax->values[j] = v = (FaConst){.kind = CK_INT, .i = named};
      if (v.kind != CK_INT || !fa_config_allowed(cfg, v.i)) {
        serr(C, kw->rhs->args.items[j]->loc, "%s must be %s", name, cfg->allowed);
        ok = false;
      }
    }
    k->ntune++;
  }
  return check_arch_clash(C, fn, k) && ok;
}

static bool check_kernel(Checker *C, const Node *fn, FaKernelInfo *k) {
  bool ok = check_kernel_params(C, fn, k);
  const Node *kd = fa_func_decorator(fn, "kernel");
  if (kd->args.len) {
    serr(C, kd->args.items[0]->loc, "@kernel takes keyword arguments only: grid=(...) and flops=...");
    ok = false;
  }
  for (int i = 0; i < kd->kwargs.len; i++) {
    const Node *kw = kd->kwargs.items[i];
    if (!strcmp(kw->name, "grid")) {
      k->grid = kw->rhs;
      if ((kw->rhs->kind == N_TUPLE || kw->rhs->kind == N_LIST) &&
          (kw->rhs->args.len < 1 || kw->rhs->args.len > 3)) {
        serr(C, kw->rhs->loc, "the grid must have 1 to 3 dimensions, got %d", kw->rhs->args.len);
        ok = false;
      }
    } else if (!strcmp(kw->name, "flops")) {
      k->flops = kw->rhs;
    } else {
      serr(C, kw->loc, "unknown argument '%s' of @kernel (expected grid= or flops=)", kw->name);
      ok = false;
      continue;
    }
    check_param_names(C, fn, kw->rhs);
  }
  if (!k->grid) {
    serr(C, kd->loc, "@kernel needs grid=(...): how many programs to launch");
    ok = false;
  }
  const Node *at = fa_func_decorator(fn, "autotune");
  if (at && !check_autotune(C, fn, at, k))
    ok = false;
  if (fn->annot && fn->annot->kind != N_NONE) {
    serr(C, fn->annot->loc, "a kernel returns nothing ('-> None' or no annotation)");
    ok = false;
  }
  return ok;
}

static bool check_problem(Checker *C, const Node *fn, FaProblemInfo *pr) {
  bool ok = true;
  const Node *d = fa_func_decorator(fn, "problem");
  if (d->args.len) {
    serr(C, d->args.items[0]->loc, "@problem takes keyword arguments only: SIZE=default, ...");
    ok = false;
  }
  pr->sizes = fa_arena_alloc(&C->fc->arena, (size_t)(fn->params.len + 1) * sizeof(FaBinding));
  if (!pr->sizes)
    return false;
  for (int i = 0; i < d->kwargs.len; i++) {
    const Node *kw = d->kwargs.items[i];
    int j = param_index(fn, kw->name);
    if (j < 0) {
      serr(C, kw->loc, "@problem size '%s' is not a parameter of '%s'", kw->name, fn->name);
      ok = false;
    } else if (fn->params.items[j]->rhs) {
      serr(C, kw->loc, "the default of '%s' is given both in @problem and in the parameter list", kw->name);
      ok = false;
    }
  }
  for (int i = 0; i < fn->params.len; i++) {
    const Node *p = fn->params.items[i];
    const Node *def = p->rhs;
    for (int j = 0; j < d->kwargs.len; j++)
      if (!strcmp(d->kwargs.items[j]->name, p->name))
        def = d->kwargs.items[j]->rhs;
    if (!def) {
      serr(C, p->loc, "problem size '%s' needs a default value (in @problem(...) or as '= value')", p->name);
      ok = false;
      continue;
    }
    FaBinding *b = &pr->sizes[pr->nsizes];
    b->name = p->name;
    if (!eval_const(C, def, &b->value)) {
      ok = false;
      continue;
    }
    pr->nsizes++;
  }
  /* the kernels it launches, by their parameters */
  NameCtx nc;
  memset(&nc, 0, sizeof nc);
  for (int i = 0; i < fn->params.len; i++)
    fa_ptrvec_push(&nc.local, (void *)fn->params.items[i]->name);
  collect_locals(&nc, &fn->body);
  ok = fa_check_calls(C->fc, C->p, &nc.local, &C->consts, &fn->body, NULL, true) && ok;
  fa_ptrvec_free(&nc.local);
  return ok;
}

/* ---- the module ---------------------------------------------------------------------- */

static const char *const known_decorators[] = {"kernel", "autotune", "problem"};

static bool check_decorators(Checker *C, const Node *fn) {
  bool ok = true;
  for (int i = 0; i < fn->decorators.len; i++) {
    const Node *d = fn->decorators.items[i];
    bool known = false;
    for (int j = 0; j < FA_ARRAY_LEN(known_decorators); j++)
      known |= !strcmp(d->name, known_decorators[j]);
    if (!known) {
      serr(C, d->loc, "unknown decorator '@%s' (expected @kernel, @autotune or @problem)", d->name);
      ok = false;
    }
    for (int j = 0; j < i; j++)
      if (!strcmp(fn->decorators.items[j]->name, d->name)) {
        serr(C, d->loc, "decorator '@%s' is given twice", d->name);
        ok = false;
      }
  }
  bool kernel = fa_func_decorator(fn, "kernel") != NULL, problem = fa_func_decorator(fn, "problem") != NULL;
  const Node *at = fa_func_decorator(fn, "autotune");
  if (at && !kernel) {
    serr(C, at->loc, "@autotune applies to kernels: add @kernel(grid=...)");
    ok = false;
  }
  if (kernel && problem) {
    serr(C, fn->loc, "'%s' cannot be both a @kernel and a @problem", fn->name);
    ok = false;
  }
  return ok;
}

static void *freeze(FaCompiler *fc, PtrVec *v) {
  void **a = fa_arena_alloc(&fc->arena, (size_t)(v->len + 1) * sizeof(void *));
  if (a && v->len)
    memcpy(a, v->items, (size_t)v->len * sizeof(void *));
  fa_ptrvec_free(v);
  return a;
}

FaProgram *fa_program_check(FaCompiler *fc, const Node *module) {
  if (!module || module->kind != N_MODULE)
    return NULL;
  /* what the module imports, linked in (modules.c) */
  if (!(module = fa_modules_link(fc, module)))
    return NULL;
  int errors0 = fc->diag.errors;
  Checker C;
  memset(&C, 0, sizeof C);
  C.fc = fc;
  C.module = module;
  C.p = fa_arena_alloc(&fc->arena, sizeof(FaProgram));
  if (!C.p)
    return NULL;
  C.p->module = module;
  PtrVec kernels = {0}, helpers = {0}, problems = {0}, fns = {0}, const_defs = {0};
  /* what the module defines */
  for (int i = 0; i < module->body.len; i++) {
    const Node *s = module->body.items[i];
    if (s->kind == N_FUNC) {
      for (int j = 0; j < fns.len; j++) {
        const Node *o = fns.items[j];
        if (!strcmp(o->name, s->name))
          serr(&C, s->loc, "'%s' is defined twice (first at line %d)", s->name, o->loc.line);
      }
      if (has_name(&C.consts, s->name))
        serr(&C, s->loc, "'%s' is already a module constant", s->name);
      fa_ptrvec_push(&fns, (void *)s);
      check_decorators(&C, s);
      if (fa_func_decorator(s, "problem"))
        fa_ptrvec_push(&problems, (void *)s);
      else if (fa_func_is_kernel(s))
        fa_ptrvec_push(&kernels, (void *)s);
      else
        fa_ptrvec_push(&helpers, (void *)s);
      continue;
    }
    const Node *target = NULL;
    if (s->kind == N_ANNASSIGN && s->rhs)
      target = s->lhs;
    else if (s->kind == N_ASSIGN && s->args.len == 1)
      target = s->args.items[0];
    else if (s->kind == N_EXPR_STMT && s->lhs->kind == N_STR)
      continue; /* docstring */
    if (!target || target->kind != N_NAME) {
      serr(&C, s->loc, "only function definitions and constants (NAME = value) are allowed at module level");
      continue;
    }
    for (int j = 0; j < fns.len; j++)
      if (!strcmp(((const Node *)fns.items[j])->name, target->name))
        serr(&C, target->loc, "'%s' is already defined as a function", target->name);
    if (has_name(&C.consts, target->name))
      serr(&C, target->loc, "module constant '%s' is defined twice", target->name);
    fa_ptrvec_push(&const_defs, (void *)s);
    fa_ptrvec_push(&C.consts, (void *)target->name);
  }
  fa_ptrvec_free(&fns);
  C.p->nhelpers = helpers.len;
  C.p->helpers = freeze(fc, &helpers);
  C.p->nproblems = 0;
  C.p->problems = fa_arena_alloc(&fc->arena, (size_t)(problems.len + 1) * sizeof(FaProblemInfo *));
  C.p->kernels = fa_arena_alloc(&fc->arena, (size_t)(kernels.len + 1) * sizeof(FaKernelInfo *));
  if (!C.p->helpers || !C.p->problems || !C.p->kernels) {
    fa_ptrvec_free(&kernels);
    fa_ptrvec_free(&problems);
    fa_ptrvec_free(&const_defs);
    fa_ptrvec_free(&C.consts);
    return NULL;
  }
  /* registered before any check so that names resolve */
  for (int i = 0; i < kernels.len; i++) {
    FaKernelInfo *k = fa_arena_alloc(&fc->arena, sizeof *k);
    if (!k)
      break;
    k->fn = kernels.items[i];
    k->name = k->fn->name;
    C.p->kernels[C.p->nkernels++] = k;
  }
  for (int i = 0; i < problems.len; i++) {
    FaProblemInfo *pr = fa_arena_alloc(&fc->arena, sizeof *pr);
    if (!pr)
      break;
    pr->fn = problems.items[i];
    pr->name = pr->fn->name;
    C.p->problems[C.p->nproblems++] = pr;
  }
  fa_ptrvec_free(&kernels);
  fa_ptrvec_free(&problems);
  /* a constant may name any function of the module (a tuple of helpers) */
  for (int i = 0; i < const_defs.len; i++)
    check_names(&C, NULL, ((const Node *)const_defs.items[i])->rhs);
  fa_ptrvec_free(&const_defs);
  /* module constants first: decorators and defaults use them */
  if (fc->diag.errors == errors0 && fa_lower_check_module(fc, C.p, module)) {
    for (int i = 0; i < C.p->nkernels; i++) {
      FaKernelInfo *k = C.p->kernels[i];
      check_kernel(&C, k->fn, k);
      check_body(&C, k->fn, true);
    }
    for (int i = 0; i < C.p->nhelpers; i++) {
      check_helper_params(&C, C.p->helpers[i]);
      check_body(&C, C.p->helpers[i], false);
    }
    for (int i = 0; i < C.p->nproblems; i++)
      check_problem(&C, C.p->problems[i]->fn, C.p->problems[i]);
    check_recursion(&C);
  }
  fa_ptrvec_free(&C.consts);
  return fc->diag.errors == errors0 ? C.p : NULL;
}

/* ---- defaults ---------------------------------------------------------------------------- */

int fa_kernel_default_bindings(FaCompiler *fc, const FaProgram *p, const FaKernelInfo *k, int arch,
                               FaBinding **out, FaLaunchConfig *config) {
  FaAutotunePoint pt;
  FaBinding *b = fa_arena_alloc(&fc->arena, (size_t)(k->ntune + 1) * sizeof(FaBinding));
  if (!b || !fa_autotune_default_point(&fc->arena, p, k, NULL, 0, NULL, arch, &pt))
    return -1;
  *config = pt.config;
  for (int i = 0; i < k->nparams; i++) {
    const FaParamInfo *pi = &k->params[i];
    bool axis = false;
    for (int t = 0; t < k->ntune; t++)
      axis |= !strcmp(k->tune[t].name, pi->name) && k->tune[t].nvalues > 0;
    if (pi->kind == PARAM_CONSTEXPR && !axis && !pi->has_default)
      return -1;
  }
  *out = b;
  return fa_autotune_point_bindings(k, &pt, b);
}
