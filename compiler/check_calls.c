/* check_calls.c - the arguments of every call, checked on the program before
 * any specialisation (see fa_check_calls in sema_internal.h).
 *
 * Specialisation (lower.c) binds a call's arguments when it lowers the call,
 * so a kernel that is never specialised - one whose constexprs have no
 * default, checked with `fadslc --check` - and a branch not taken for the
 * constexprs at hand would keep a misspelt keyword (`load(p, msk=m)`) unseen
 * until someone launches it.  This pass sees every call of every kernel,
 * helper and problem description once, whatever the constexprs, and checks
 * what needs no types: the keywords' names, the number of positional
 * arguments and the required ones.  Builtins are checked against their table
 * in lower.c (fa_builtin_signature), so a new builtin is checked by the row
 * that defines it; so are the methods of blocks (x.sum(axis=1) is
 * sum(x, axis=1); x.to(dtype)).  The messages are the ones specialisation
 * would give.
 */
#include <string.h>

#include "sema_internal.h"

typedef struct CallChecker {
  FaCompiler *fc;
  const FaProgram *p;
  const PtrVec *locals, *consts;
  bool launches;        /* calls of kernels are launches (in a @problem) */
} CallChecker;

static bool in_list(const PtrVec *v, const char *name) {
  for (int i = 0; v && i < v->len; i++)
    if (!strcmp((const char *)v->items[i], name))
      return true;
  return false;
}

/* Matches the call's `npos` positional arguments (a method's receiver
 * counted) and its keyword arguments to the parameters `names` (required[i]:
 * parameter i must be given) and reports the first mismatch, in the words of
 * bind_args in lower.c (of the @problem runner, autotune/problem.c, for a
 * kernel launch); `exactly` words the message about too many arguments. */
static void check_binding(CallChecker *K, const Node *call, int npos, const char *fname, const char *const *names,
                          int n, const bool *required, bool exactly) {
  bool launch = K->launches;
  bool *given = fa_arena_alloc(&K->fc->arena, (size_t)(n + 1) * sizeof *given);
  if (!given)
    return;
  memset(given, 0, (size_t)(n + 1) * sizeof *given);
  if (npos > n && launch) {
    fa_error(&K->fc->diag, call->args.items[n]->loc, "kernel '%s' takes %d arguments, not %d", fname, n, npos);
    return;
  }
  if (npos > n) {
    fa_error(&K->fc->diag, call->loc, "%s() takes %s %d argument%s (%d given)", fname, exactly ? "exactly" : "at most",
             n, n == 1 ? "" : "s", npos);
    return;
  }
  for (int i = 0; i < npos; i++)
    given[i] = true;
  for (int k = 0; k < call->kwargs.len; k++) {
    const Node *kw = call->kwargs.items[k];
    int j = -1;
    for (int i = 0; i < n && j < 0; i++)
      if (!strcmp(names[i], kw->name))
        j = i;
    if (j < 0 && launch) {
      fa_error(&K->fc->diag, kw->loc, "kernel '%s' has no parameter '%s'", fname, kw->name);
      return;
    }
    if (j < 0) {
      fa_error(&K->fc->diag, kw->loc, "%s() got an unexpected keyword argument '%s'", fname, kw->name);
      return;
    }
    if (given[j]) {
      fa_error(&K->fc->diag, kw->loc, "%s() got multiple values for argument '%s'", fname, kw->name);
      return;
    }
    given[j] = true;
  }
  for (int i = 0; i < n; i++)
    if (required[i] && !given[i]) {
      fa_error(&K->fc->diag, call->loc, "%s() missing required argument '%s'", fname, names[i]);
      return;
    }
}

/* npos: the positional arguments, a method's receiver included. */
static void check_builtin_call(CallChecker *K, const Node *call, int npos, const char *name,
                               const FaBuiltinSignature *sig) {
  if (sig->variadic && npos > sig->nparams && call->kwargs.len == 0)
    return;
  if (sig->vararg > 0 && npos > sig->vararg + 1)
    npos = sig->vararg + 1; /* the arguments from `vararg` on are gathered into one */
  bool *required = fa_arena_alloc(&K->fc->arena, (size_t)(sig->nparams + 1) * sizeof *required);
  if (!required)
    return;
  for (int i = 0; i < sig->nparams; i++)
    required[i] = i < sig->nreq;
  check_binding(K, call, npos, name, sig->params, sig->nparams, required, sig->nreq == sig->nparams);
}

/* A helper, or (in a @problem) a kernel: its parameter list is the signature;
 * parameters without a default are required, except that a launch may leave
 * constexprs with defaults, tunables and warps/stages to the runtime. */
static void check_function_call(CallChecker *K, const Node *call, const Node *fn) {
  int n = fn->params.len;
  const char **names = fa_arena_alloc(&K->fc->arena, (size_t)(n + 1) * sizeof *names);
  bool *required = fa_arena_alloc(&K->fc->arena, (size_t)(n + 1) * sizeof *required);
  if (!names || !required)
    return;
  bool kernel = fa_func_is_kernel(fn);
  for (int i = 0; i < n; i++) {
    const Node *pa = fn->params.items[i];
    names[i] = pa->name;
    required[i] = !kernel && !pa->rhs;
  }
  check_binding(K, call, call->args.len, fn->name, names, n, required, false);
}

/* x.to(dtype) and x.NAME(...) for the builtins that are methods of blocks
 * (NAME(x, ...)); other attributes are left to specialisation. */
static void check_method_call(CallChecker *K, const Node *call, const char *name) {
  if (!strcmp(name, "to")) {
    static const char *const dtype[] = {"dtype"};
    static const bool req[] = {true};
    check_binding(K, call, call->args.len, "to", dtype, 1, req, true);
    return;
  }
  FaBuiltinSignature sig;
  if (fa_builtin_is_method(name) && fa_builtin_signature(name, &sig))
    check_builtin_call(K, call, call->args.len + 1, name, &sig);
}

static void check_call(CallChecker *K, const Node *call) {
  const Node *callee = call->lhs;
  if (callee && callee->kind == N_ATTR && !K->launches) {
    check_method_call(K, call, callee->name);
    return;
  }
  if (!callee || callee->kind != N_NAME)
    return;
  const char *name = callee->name;
  if (in_list(K->locals, name) || in_list(K->consts, name))
    return;
  const Node *fn = fa_program_function(K->p, name);
  if (fn) {
    bool kernel = fa_func_is_kernel(fn), problem = fa_func_decorator(fn, "problem") != NULL;
    if ((kernel && K->launches) || (!kernel && !problem && !K->launches))
      check_function_call(K, call, fn);
    return;
  }
  if (K->launches)
    return;   /* a @problem's allocations (randn, zeros, ...) are checked where they run */
  DType dt = fa_dtype_from_name(name);
  if ((dt != DT_VOID && strcmp(name, "u32")) || !strcmp(name, "bool")) {
    static const char *const x[] = {"x"};
    static const bool req[] = {true};
    check_binding(K, call, call->args.len, name, x, 1, req, true);
    return;
  }
  FaBuiltinSignature sig;
  if (fa_builtin_signature(name, &sig))
    check_builtin_call(K, call, call->args.len, name, &sig);
}

static void walk(CallChecker *K, const Node *e);

static void walk_list(CallChecker *K, const NodeList *l) {
  for (int i = 0; i < l->len; i++)
    walk(K, l->items[i]);
}

/* Every node below e (the parser bounds the depth, so recursion is safe). */
static void walk(CallChecker *K, const Node *e) {
  if (!e || e->kind == N_FUNC)
    return;
  if (e->kind == N_CALL)
    check_call(K, e);
  const Node *kids[] = {e->lhs, e->rhs, e->cond, e->then, e->els, e->lo, e->hi, e->step};
  for (int i = 0; i < FA_ARRAY_LEN(kids); i++)
    walk(K, kids[i]);
  walk_list(K, &e->args);
  walk_list(K, &e->kwargs);
  walk_list(K, &e->body);
  walk_list(K, &e->orelse);
}

bool fa_check_calls(FaCompiler *fc, const FaProgram *p, const PtrVec *locals, const PtrVec *consts,
                    const NodeList *body, const Node *expr, bool launches) {
  CallChecker K = {fc, p, locals, consts, launches};
  int errors0 = fc->diag.errors;
  if (body)
    walk_list(&K, body);
  walk(&K, expr);
  return fc->diag.errors == errors0;
}
