/* lower.c - specialisation of a kernel and lowering to the tile IR.
 *
 * The lowering is an abstract interpreter over the checked AST: it walks a
 * kernel's body with an environment that maps each name to a value (LVal),
 * which is either known at compile time (a constexpr, a literal, a dtype, a
 * tuple of those, a function) or a tile-IR value built so far.  Operators on
 * two compile-time values fold; anything touching a runtime value emits IR,
 * with every implicit conversion (cast, splat, broadcast) made explicit.
 * `if` on a compile-time condition lowers only the taken branch; helpers are
 * inlined at each call with their parameters bound to the argument values,
 * so a helper's constexpr parameters are folded per call site.
 *
 * The same evaluator, with IR emission switched off, evaluates module-level
 * constants, decorator arguments, and fa_eval_const() for the tuner.
 */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "sema_internal.h"

/* ---- values ------------------------------------------------------------------- */

typedef enum LKind {
  LV_CONST,   /* c: a compile-time scalar (int, float, bool, dtype, str, None) */
  LV_IR,      /* v: a runtime value (scalar, block, pointer, block pointer) */
  LV_TUPLE,   /* elems[n] */
  LV_FUNC,    /* fn: a helper or kernel; or builtin: a builtin's name */
  LV_UNDEF,   /* a name with no value at this point; why says what happened */
} LKind;

typedef struct LVal LVal;
struct LVal {
  LKind kind;
  FaConst c;
  IrValue *v;
  LVal **elems;
  int n;
  const Node *fn;
  const char *builtin;
  const char *why;
};

typedef struct Var {
  const char *name;
  LVal *val;
  SrcLoc at;                 /* where it was last assigned (for messages) */
} Var;

typedef struct Scope {
  Var *vars;
  int n, cap;
} Scope;

typedef struct NameSet {
  const char **names;
  int n, cap;
} NameSet;

/* A statement list being lowered, and where in it we are: liveness questions
 * ("is x read after this loop?") look at what follows in every enclosing
 * list, and at the whole body of every enclosing loop. */
typedef struct Frame {
  const NodeList *list;
  int idx;
  bool loop_body;
  const Node *cond;          /* a while loop's condition: read again after its body */
} Frame;

typedef struct PtrParam {
  const char *name;
  IrType type;
  const Node *node;
} PtrParam;

/* One function being lowered: the kernel, or one inlined helper call. */
typedef struct FuncCtx {
  const Node *fn;            /* N_FUNC, or NULL for an expression on its own */
  Scope scope;
  NameSet locals;            /* names assigned anywhere in fn: reading one before it is bound is an error */
  PtrParam *ptr_params;      /* pointer parameters: they stay pointers of their type */
  int nptr_params;
  int runtime_depth;         /* nesting of runtime if / for / while (and the guards of early returns) */
  int loop_depth;            /* nesting of runtime for / while */
  bool returned;             /* the path being lowered has returned (everything after it is dead) */
  LVal *ret;
  /* early returns (a return under a runtime condition): the pseudo-variables
   * RETURNED (i1: has this program returned?) and RET#k (the value, or the
   * k-th value of a returned tuple) live in the scope, merged by ifs like any
   * variable; everything after such a return runs under `if not RETURNED`. */
  bool cond_return;          /* some return happened under a runtime condition */
  bool ret_seen;             /* some such return has been lowered: */
  int ret_arity;             /* -1: it returns a single value; k >= 0: a tuple of k */
  bool ret_value;            /* some return gives a value (not None) */
  SrcLoc ret_at;             /* the first return */
  Frame *frames;
  int nframes, capframes;
} FuncCtx;

typedef struct Lower {
  int ntemps;                /* synthetic names made so far (tmp_name) */
  FaCompiler *fc;
  Arena *A;
  const FaProgram *prog;
  const Node *module;
  Scope mod;                 /* module-level constants */
  IrBuilder b;
  bool have_ir;              /* false: compile-time evaluation only */
  bool host;                 /* lowering a grid / extents function */
  FuncCtx *fx;
  const Node *inline_stack[FA_MAX_INLINE_DEPTH];
  int ninline;
  bool err;
} Lower;

static LVal *lerr(Lower *L, SrcLoc loc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static LVal *lerr(Lower *L, SrcLoc loc, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fa_diag_vreport(&L->fc->diag, loc, DIAG_ERROR, fmt, ap);
  va_end(ap);
  L->err = true;
  return NULL;
}

static LVal *oom(Lower *L) { return lerr(L, fa_noloc(), "out of memory"); }

static LVal *lv_new(Lower *L, LKind k) {
  LVal *v = fa_arena_alloc(L->A, sizeof *v);
  if (!v)
    return oom(L);
  v->kind = k;
  return v;
}

static LVal *lv_const(Lower *L, FaConst c) {
  LVal *v = lv_new(L, LV_CONST);
  if (v)
    v->c = c;
  return v;
}

static LVal *lv_ir(Lower *L, IrValue *iv) {
  if (!iv)
    return L->err ? NULL : oom(L);
  LVal *v = lv_new(L, LV_IR);
  if (v)
    v->v = iv;
  return v;
}

static LVal *lv_none(Lower *L) { return lv_const(L, fa_const_none()); }

static LVal *lv_undef(Lower *L, const char *why) {
  LVal *v = lv_new(L, LV_UNDEF);
  if (v)
    v->why = why;
  return v;
}

static LVal *lv_tuple(Lower *L, int n) {
  LVal *v = lv_new(L, LV_TUPLE);
  if (!v)
    return NULL;
  v->n = n;
  if (n > 0 && !(v->elems = fa_arena_alloc(L->A, (size_t)n * sizeof(LVal *))))
    return oom(L);
  return v;
}

static bool is_ir(const LVal *v) { return v && v->kind == LV_IR; }
static bool is_num_const(const LVal *v) { return v && v->kind == LV_CONST && fa_const_is_number(v->c); }
static bool is_ptr(const LVal *v) { return is_ir(v) && v->v->type.dtype == DT_PTR; }
static bool is_bptr(const LVal *v) { return is_ir(v) && v->v->type.dtype == DT_BLOCKPTR; }
static bool is_data(const LVal *v) {
  return is_ir(v) && v->v->type.dtype != DT_PTR && v->v->type.dtype != DT_BLOCKPTR;
}

/* How a value is described in messages. */
static const char *describe(Lower *L, const LVal *v) {
  if (!v)
    return "?";
  switch (v->kind) {
  case LV_CONST: {
    if (v->c.kind == CK_NONE)
      return "None";
    StrBuf sb;
    fa_sb_init(&sb);
    fa_sb_printf(&sb, "%s ", fa_const_kind_name(v->c.kind));
    fa_const_print(v->c, &sb);
    const char *s = fa_arena_strdup(L->A, sb.data);
    fa_sb_free(&sb);
    return s ? s : "?";
  }
  case LV_IR: {
    IrType t = v->v->type;
    if (t.dtype == DT_PTR && t.rank == 0)
      return fa_arena_printf(L->A, "pointer *%s", fa_dtype_name(t.pointee));
    if (t.dtype == DT_PTR)
      return fa_arena_printf(L->A, "block of pointers %s", fa_type_str(L->A, t));
    if (t.dtype == DT_BLOCKPTR)
      return fa_arena_printf(L->A, "block pointer %s", fa_type_str(L->A, t));
    return fa_arena_printf(L->A, "%s %s", t.rank ? "block" : "scalar", fa_type_str(L->A, t));
  }
  case LV_TUPLE: return fa_arena_printf(L->A, "tuple of %d", v->n);
  case LV_FUNC: return v->builtin ? fa_arena_printf(L->A, "builtin '%s'", v->builtin)
                                  : fa_arena_printf(L->A, "function '%s'", v->fn->name);
  case LV_UNDEF: return "undefined";
  }
  return "?";
}

/* ---- scopes and name sets ------------------------------------------------------- */

static bool grow(Lower *L, void **items, int *cap, int need, size_t elem) {
  if (need <= *cap)
    return true;
  int nc = *cap ? *cap * 2 : 16;
  while (nc < need)
    nc *= 2;
  void *n = fa_arena_alloc(L->A, (size_t)nc * elem);
  if (!n) {
    oom(L);
    return false;
  }
  if (*cap)
    memcpy(n, *items, (size_t)*cap * elem);
  *items = n;
  *cap = nc;
  return true;
}

static Var *scope_find(Scope *s, const char *name) {
  for (int i = s->n - 1; i >= 0; i--)
    if (!strcmp(s->vars[i].name, name))
      return &s->vars[i];
  return NULL;
}

static LVal *scope_get(Scope *s, const char *name) {
  Var *v = scope_find(s, name);
  return v ? v->val : NULL;
}

/* Binds name to val, noting where (a zero location keeps the previous one). */
static bool scope_assign(Lower *L, Scope *s, const char *name, LVal *val, SrcLoc at) {
  Var *v = scope_find(s, name);
  if (v) {
    v->val = val;
    if (at.src)
      v->at = at;
    return true;
  }
  if (!grow(L, (void **)&s->vars, &s->cap, s->n + 1, sizeof(Var)))
    return false;
  s->vars[s->n].name = name;
  s->vars[s->n].val = val;
  s->vars[s->n].at = at;
  s->n++;
  return true;
}

static bool scope_set(Lower *L, Scope *s, const char *name, LVal *val) {
  return scope_assign(L, s, name, val, fa_noloc());
}

/* Where name was last assigned in s (a zero location when unknown). */
static SrcLoc scope_loc(Scope *s, const char *name) {
  Var *v = scope_find(s, name);
  return v ? v->at : fa_noloc();
}

static bool scope_copy(Lower *L, const Scope *from, Scope *to) {
  to->n = 0;
  to->cap = 0;
  to->vars = NULL;
  if (!grow(L, (void **)&to->vars, &to->cap, from->n + 1, sizeof(Var)))
    return false;
  if (from->n)
    memcpy(to->vars, from->vars, (size_t)from->n * sizeof(Var));
  to->n = from->n;
  return true;
}

static bool nameset_has(const NameSet *s, const char *name) {
  for (int i = 0; i < s->n; i++)
    if (!strcmp(s->names[i], name))
      return true;
  return false;
}

static bool nameset_add(Lower *L, NameSet *s, const char *name) {
  if (nameset_has(s, name))
    return true;
  if (!grow(L, (void **)&s->names, &s->cap, s->n + 1, sizeof(char *)))
    return false;
  s->names[s->n++] = name;
  return true;
}

/* ---- syntactic queries (for loops and runtime ifs) --------------------------------- */

static bool add_target_names(Lower *L, const Node *t, NameSet *out) {
  if (!t)
    return true;
  if (t->kind == N_NAME)
    return nameset_add(L, out, t->name);
  if (t->kind == N_TUPLE || t->kind == N_LIST) {
    for (int i = 0; i < t->args.len; i++)
      if (!add_target_names(L, t->args.items[i], out))
        return false;
  }
  return true;
}

static int static_truth(Lower *L, const Node *e, const NameSet *changed);

/* Every name a statement list may assign (all branches, nested loops); with
 * `changed` (the names the list may assign at all), not the branches of an
 * `if` whose condition static_truth knows to be false. */
static bool collect_assigned_in(Lower *L, const NodeList *list, NameSet *out, const NameSet *changed) {
  for (int i = 0; i < list->len; i++) {
    const Node *s = list->items[i];
    bool ok = true;
    switch (s->kind) {
    case N_ASSIGN:
      for (int j = 0; j < s->args.len && ok; j++)
        ok = add_target_names(L, s->args.items[j], out);
      break;
    case N_AUGASSIGN:
    case N_ANNASSIGN:
      ok = add_target_names(L, s->lhs, out);
      break;
    case N_FOR:
      ok = add_target_names(L, s->lhs, out) && collect_assigned_in(L, &s->body, out, changed);
      break;
    case N_IF: {
      int truth = changed ? static_truth(L, s->cond, changed) : -1;
      ok = (truth == 0 || collect_assigned_in(L, &s->body, out, changed)) &&
           (truth == 1 || collect_assigned_in(L, &s->orelse, out, changed));
      break;
    }
    case N_WHILE:
      ok = collect_assigned_in(L, &s->body, out, changed);
      break;
    default:
      break;
    }
    if (!ok)
      return false;
  }
  return true;
}

static bool collect_assigned(Lower *L, const NodeList *list, NameSet *out) {
  return collect_assigned_in(L, list, out, NULL);
}

/* The value of a condition where it is known before the code under it is
 * lowered: True, False, a name bound to a compile-time constant that
 * `changed` (the names the enclosing loop may assign) does not hold, and
 * not, and, or of those.  1 or 0; -1 where it is known only when lowered. */
static int static_truth(Lower *L, const Node *e, const NameSet *changed) {
  switch (e->kind) {
  case N_TRUE: return 1;
  case N_FALSE: return 0;
  case N_NAME: {
    if (nameset_has(changed, e->name))
      return -1;
    LVal *v = scope_get(&L->fx->scope, e->name);
    return v && v->kind == LV_CONST ? fa_const_truth(v->c) : -1;
  }
  case N_UNARY: {
    int t = e->op == OP_NOT ? static_truth(L, e->lhs, changed) : -1;
    return t < 0 ? -1 : !t;
  }
  case N_BINARY: {
    if (e->op != OP_AND && e->op != OP_OR)
      return -1;
    int a = static_truth(L, e->lhs, changed), b = static_truth(L, e->rhs, changed);
    if (e->op == OP_AND)
      return a == 0 || b == 0 ? 0 : a == 1 && b == 1 ? 1 : -1;
    return a == 1 || b == 1 ? 1 : a == 0 && b == 0 ? 0 : -1;
  }
  default: return -1;
  }
}

/* The names a runtime loop's body may assign, leaving out the branches it
 * cannot take (`if FLAG:` on a constant the loop does not change): a name
 * that holds None, a tuple or a function before the loop may be reassigned
 * under a branch that the kernel's constants rule out. */
static bool collect_loop_assigned(Lower *L, const NodeList *body, const char *target, NameSet *out) {
  NameSet changed = {0}, taken = {0};
  if (!collect_assigned(L, body, &changed) ||
      (target && !nameset_add(L, &changed, target)) || /* the loop's own variable changes too */
      !collect_assigned_in(L, body, &taken, &changed))
    return false;
  /* in the order of the whole scan (the order of the loop's values); the
     loop's variable, added last, only where the body assigns it */
  for (int i = 0; i < changed.n; i++)
    if (nameset_has(&taken, changed.names[i]) && !nameset_add(L, out, changed.names[i]))
      return false;
  return true;
}

static bool expr_reads(const Node *e, const char *name);

static bool list_reads(const NodeList *l, const char *name) {
  for (int i = 0; i < l->len; i++)
    if (expr_reads(l->items[i], name))
      return true;
  return false;
}

/* Whether an expression (or a statement, taken as a whole) reads `name`. */
static bool expr_reads(const Node *e, const char *name) {
  if (!e)
    return false;
  switch (e->kind) {
  case N_NAME: return !strcmp(e->name, name);
  case N_INT: case N_FLOAT: case N_STR: case N_TRUE: case N_FALSE: case N_NONE:
  case N_PASS: case N_BREAK: case N_CONTINUE: case N_FUNC:
    return false;
  case N_ASSIGN: {
    if (expr_reads(e->rhs, name))
      return true;
    /* targets read only through subscripts / attributes */
    for (int i = 0; i < e->args.len; i++) {
      const Node *t = e->args.items[i];
      if ((t->kind == N_SUBSCRIPT || t->kind == N_ATTR) && expr_reads(t, name))
        return true;
    }
    return false;
  }
  case N_ANNASSIGN: return expr_reads(e->rhs, name);
  case N_FOR:
    return expr_reads(e->rhs, name) || list_reads(&e->body, name);
  default:
    return expr_reads(e->lhs, name) || expr_reads(e->rhs, name) || expr_reads(e->cond, name) ||
           expr_reads(e->then, name) || expr_reads(e->els, name) || expr_reads(e->lo, name) ||
           expr_reads(e->hi, name) || expr_reads(e->step, name) || list_reads(&e->args, name) ||
           list_reads(&e->kwargs, name) || list_reads(&e->body, name) || list_reads(&e->orelse, name);
  }
}

static bool target_assigns(const Node *t, const char *name) {
  if (!t)
    return false;
  if (t->kind == N_NAME)
    return !strcmp(t->name, name);
  if (t->kind == N_TUPLE || t->kind == N_LIST)
    for (int i = 0; i < t->args.len; i++)
      if (target_assigns(t->args.items[i], name))
        return true;
  return false;
}

typedef enum Exposure { EXP_NONE, EXP_READ, EXP_ASSIGNED } Exposure;

/* Whether a statement list may read `name` before it assigns it (so the
 * value from before the list, or from the previous iteration, flows in). */
static Exposure exposure(const NodeList *list, const char *name) {
  for (int i = 0; i < list->len; i++) {
    const Node *s = list->items[i];
    switch (s->kind) {
    case N_ASSIGN:
    case N_ANNASSIGN:
      if (expr_reads(s, name))
        return EXP_READ;
      if (s->kind == N_ANNASSIGN ? target_assigns(s->lhs, name) : false)
        return EXP_ASSIGNED;
      for (int j = 0; s->kind == N_ASSIGN && j < s->args.len; j++)
        if (target_assigns(s->args.items[j], name))
          return EXP_ASSIGNED;
      break;
    case N_AUGASSIGN:
      if (target_assigns(s->lhs, name) || expr_reads(s->rhs, name))
        return EXP_READ;
      break;
    case N_IF: {
      if (expr_reads(s->cond, name))
        return EXP_READ;
      Exposure a = exposure(&s->body, name), b = exposure(&s->orelse, name);
      if (a == EXP_READ || b == EXP_READ)
        return EXP_READ;
      if (a == EXP_ASSIGNED && b == EXP_ASSIGNED)
        return EXP_ASSIGNED;
      break;
    }
    case N_FOR:
    case N_WHILE:
      if (expr_reads(s->rhs, name) || expr_reads(s->cond, name) || exposure(&s->body, name) == EXP_READ)
        return EXP_READ;
      break;
    default:
      if (expr_reads(s, name))
        return EXP_READ;
      break;
    }
  }
  return EXP_NONE;
}

/* Whether `name` may be read after the statement being lowered, in the
 * current function: in the rest of every enclosing statement list, and
 * anywhere in an enclosing loop's body (the next iteration). */
static bool live_after(Lower *L, const char *name) {
  FuncCtx *fx = L->fx;
  for (int f = fx->nframes - 1; f >= 0; f--) {
    const Frame *fr = &fx->frames[f];
    int from = fr->loop_body ? 0 : fr->idx + 1;
    for (int i = from; i < fr->list->len; i++)
      if (expr_reads(fr->list->items[i], name))
        return true;
    if (fr->cond && expr_reads(fr->cond, name))
      return true;
  }
  return false;
}

/* ---- emitting IR ------------------------------------------------------------------ */

static IrOp *emit(Lower *L, IrOpKind kind, int sub, SrcLoc loc, IrValue **ops, int nops, const IrType *types,
                  int ntypes) {
  if (!L->have_ir) {
    lerr(L, loc, "a compile-time constant is required here, but this needs a value known only at run time");
    return NULL;
  }
  IrOp *op = fa_ir_op(&L->b, kind, loc, ops, nops, types, ntypes);
  if (!op) {
    oom(L);
    return NULL;
  }
  op->sub = sub;
  return op;
}

static IrValue *emit1(Lower *L, IrOpKind kind, int sub, SrcLoc loc, IrType t, IrValue **ops, int nops) {
  IrOp *op = emit(L, kind, sub, loc, ops, nops, &t, 1);
  return op ? op->results[0] : NULL;
}

static IrValue *const_ir(Lower *L, FaConst c, IrType t, SrcLoc loc) {
  IrOp *op = emit(L, IR_CONST, 0, loc, NULL, 0, &t, 1);
  if (!op)
    return NULL;
  if (fa_dtype_is_float(t.dtype)) {
    op->fval = fa_const_as_double(c);
    op->ival = (int64_t)op->fval;
  } else {
    double d = fa_const_as_double(c);
    if (c.kind == CK_FLOAT) {
      if (!(d > -9.2e18 && d < 9.2e18)) {
        lerr(L, loc, "the value %g does not fit %s", d, fa_dtype_name(t.dtype));
        return NULL;
      }
      op->ival = (int64_t)d;
    } else {
      op->ival = c.i;
    }
    if (t.dtype == DT_I1)
      op->ival = op->ival != 0;
    op->fval = (double)op->ival;
  }
  return op->results[0];
}

static IrType same_shape_type(IrType shape_of, DType dt) {
  IrType t = fa_type_block(dt, shape_of.rank, shape_of.shape);
  return t;
}

static IrValue *cast_ir(Lower *L, IrValue *v, DType dt, SrcLoc loc) {
  if (!v)
    return NULL;
  if (v->type.dtype == dt)
    return v;
  if (v->type.dtype == DT_PTR || v->type.dtype == DT_BLOCKPTR || dt == DT_PTR || dt == DT_BLOCKPTR) {
    lerr(L, loc, "cannot convert %s to %s", fa_type_str(L->A, v->type), fa_dtype_name(dt));
    return NULL;
  }
  return emit1(L, IR_CAST, 0, loc, same_shape_type(v->type, dt), &v, 1);
}

/* Broadcasts (numpy rules, already checked) a value to a shape: scalars are
 * splatted, lower ranks get leading size-1 dims, size-1 dims are stretched. */
static IrValue *bcast_ir(Lower *L, IrValue *v, int rank, const int *shape, SrcLoc loc) {
  if (!v)
    return NULL;
  IrType t = v->type;
  IrType want = t;
  want.rank = rank;
  for (int i = 0; i < rank; i++)
    want.shape[i] = shape[i];
  if (fa_type_equal(t, want))
    return v;
  if (t.rank == 0)
    return rank == 0 ? v : emit1(L, IR_SPLAT, 0, loc, want, &v, 1);
  while (v && v->type.rank < rank) {
    IrType e = v->type;
    for (int i = e.rank; i > 0; i--)
      e.shape[i] = e.shape[i - 1];
    e.shape[0] = 1;
    e.rank++;
    IrOp *op = emit(L, IR_EXPAND_DIMS, 0, loc, &v, 1, &e, 1);
    if (!op)
      return NULL;
    op->axis = 0;
    v = op->results[0];
  }
  if (!v || fa_type_equal(v->type, want))
    return v;
  return emit1(L, IR_BROADCAST, 0, loc, want, &v, 1);
}

/* Makes a runtime value of dtype `dt` (DT_VOID: the value's own, or a
 * literal's default) from any scalar or block value. */
static IrValue *to_ir(Lower *L, LVal *v, DType dt, SrcLoc loc) {
  if (!v)
    return NULL;
  if (v->kind == LV_IR)
    return dt == DT_VOID ? v->v : cast_ir(L, v->v, dt, loc);
  if (is_num_const(v)) {
    DType d = dt != DT_VOID ? dt : fa_const_default_dtype(v->c);
    if (d == DT_PTR || d == DT_BLOCKPTR) {
      lerr(L, loc, "expected a pointer, got %s", describe(L, v));
      return NULL;
    }
    if (fa_dtype_is_int(d) && v->c.kind != CK_FLOAT && d != DT_I1 && !fa_int_fits(v->c.i, d)) {
      lerr(L, loc, "the constant %lld does not fit %s", (long long)v->c.i, fa_dtype_name(d));
      return NULL;
    }
    return const_ir(L, v->c, fa_type_scalar(d), loc);
  }
  lerr(L, loc, "expected a number or a block, got %s", describe(L, v));
  return NULL;
}

/* A value of exactly type `t` (dtype and shape) from a literal or runtime value. */
static IrValue *to_ir_type(Lower *L, LVal *v, IrType t, SrcLoc loc) {
  if (!v)
    return NULL;
  if (is_num_const(v))
    return const_ir(L, v->c, t, loc);
  IrValue *x = to_ir(L, v, t.dtype, loc);
  return x ? bcast_ir(L, x, t.rank, t.shape, loc) : NULL;
}

/* Converts a value to i1 (`!= 0` for numbers). */
static IrValue *to_bool_ir(Lower *L, LVal *v, SrcLoc loc) {
  if (!v)
    return NULL;
  if (v->kind == LV_CONST) {
    if (!fa_const_is_number(v->c) && v->c.kind != CK_NONE) {
      lerr(L, loc, "expected a condition, got %s", describe(L, v));
      return NULL;
    }
    return const_ir(L, fa_const_bool(fa_const_truth(v->c)), fa_type_scalar(DT_I1), loc);
  }
  if (!is_data(v)) {
    lerr(L, loc, "expected a condition, got %s", describe(L, v));
    return NULL;
  }
  IrValue *x = v->v;
  if (x->type.dtype == DT_I1)
    return x;
  IrValue *zero = const_ir(L, fa_const_int(0), x->type, loc);
  if (!zero)
    return NULL;
  IrValue *ops[2] = {x, zero};
  return emit1(L, IR_CMP, CMP_NE, loc, same_shape_type(x->type, DT_I1), ops, 2);
}

static int64_t const_int_of(const LVal *v) { return v->c.i; }

/* A compile-time integer (bools are not accepted). */
static bool want_int(Lower *L, LVal *v, const Node *at, const char *what, int64_t *out) {
  if (!v)
    return false;
  if (v->kind != LV_CONST || v->c.kind != CK_INT) {
    if (v->kind == LV_IR)
      lerr(L, at->loc, "%s must be a compile-time integer, but it is a value known only at run time", what);
    else
      lerr(L, at->loc, "%s must be an integer, got %s", what, describe(L, v));
    return false;
  }
  *out = const_int_of(v);
  return true;
}

static bool want_dtype(Lower *L, LVal *v, const Node *at, const char *what, DType *out) {
  if (!v)
    return false;
  if (v->kind != LV_CONST || v->c.kind != CK_DTYPE) {
    lerr(L, at->loc, "%s must be a dtype (such as f16 or f32), got %s", what, describe(L, v));
    return false;
  }
  *out = v->c.dtype;
  return true;
}

/* A tuple (or list) of compile-time ints; a single int is taken as a 1-tuple
 * when `allow_scalar`. */
static int want_int_tuple(Lower *L, LVal *v, const Node *at, const char *what, int64_t *out, int max,
                          bool allow_scalar) {
  if (!v)
    return -1;
  if (allow_scalar && v->kind == LV_CONST && v->c.kind == CK_INT) {
    out[0] = v->c.i;
    return 1;
  }
  if (v->kind != LV_TUPLE) {
    lerr(L, at->loc, "%s must be a tuple of integers, got %s", what, describe(L, v));
    return -1;
  }
  if (v->n > max) {
    lerr(L, at->loc, "%s has %d entries; at most %d are supported", what, v->n, max);
    return -1;
  }
  for (int i = 0; i < v->n; i++) {
    LVal *e = v->elems[i];
    if (e->kind != LV_CONST || e->c.kind != CK_INT) {
      lerr(L, at->loc, "%s must be a tuple of compile-time integers; entry %d is %s", what, i,
           describe(L, e));
      return -1;
    }
    out[i] = e->c.i;
  }
  return v->n;
}

static bool check_block_shape(Lower *L, const Node *at, const char *what, int rank, const int64_t *dims,
                              int *shape) {
  int64_t numel = 1;
  for (int i = 0; i < rank; i++) {
    if (!fa_is_pow2(dims[i])) {
      lerr(L, at->loc, "%s: dimension %d is %lld; block dimensions must be powers of two", what, i,
           (long long)dims[i]);
      return false;
    }
    numel *= dims[i];
    if (numel > FA_MAX_BLOCK_NUMEL) {
      lerr(L, at->loc, "%s: a block of more than %d elements is not supported", what, FA_MAX_BLOCK_NUMEL);
      return false;
    }
    shape[i] = (int)dims[i];
  }
  return true;
}

/* ---- operators ----------------------------------------------------------------------- */

static FaOpClass op_class(OpKind op) {
  switch (op) {
  case OP_DIV: return OPC_TRUEDIV;
  case OP_FLOORDIV: case OP_MOD: return OPC_FLOORMOD;
  case OP_SHL: case OP_SHR: case OP_BITAND: case OP_BITOR: case OP_BITXOR: return OPC_BITWISE;
  case OP_LT: case OP_LE: case OP_GT: case OP_GE: case OP_EQ: case OP_NE: return OPC_COMPARE;
  default: return OPC_ARITH;
  }
}

static bool is_cmp(OpKind op) { return op_class(op) == OPC_COMPARE; }

static IrCmpOp cmp_of(OpKind op) {
  switch (op) {
  case OP_LT: return CMP_LT;
  case OP_LE: return CMP_LE;
  case OP_GT: return CMP_GT;
  case OP_GE: return CMP_GE;
  case OP_EQ: return CMP_EQ;
  default: return CMP_NE;
  }
}

/* Brings two operands to a common dtype (by `cls`) and shape.  Returns the
 * dtype, or DT_VOID after an error. */
static DType unify(Lower *L, FaOpClass cls, LVal *a, LVal *b, const char *opname, SrcLoc loc, IrValue **xa,
                   IrValue **xb) {
  DType da = is_ir(a) ? a->v->type.dtype : DT_VOID, db = is_ir(b) ? b->v->type.dtype : DT_VOID;
  FaConstKind ka = is_num_const(a) ? a->c.kind : CK_NONE, kb = is_num_const(b) ? b->c.kind : CK_NONE;
  if ((!is_data(a) && !is_num_const(a)) || (!is_data(b) && !is_num_const(b))) {
    lerr(L, loc, "unsupported operand types for '%s': %s and %s", opname, describe(L, a), describe(L, b));
    return DT_VOID;
  }
  DType dt = fa_promote(cls, da, ka, ka ? &a->c : NULL, db, kb, kb ? &b->c : NULL);
  if (dt == DT_VOID) {
    lerr(L, loc, "operator '%s' is not defined on %s and %s", opname, describe(L, a), describe(L, b));
    return DT_VOID;
  }
  int ra = is_ir(a) ? a->v->type.rank : 0, rb = is_ir(b) ? b->v->type.rank : 0;
  const int *sa = is_ir(a) ? a->v->type.shape : NULL, *sb = is_ir(b) ? b->v->type.shape : NULL;
  int rank, shape[FA_MAX_RANK];
  if (!fa_broadcast_shapes(ra, sa, rb, sb, &rank, shape)) {
    lerr(L, loc, "operands of '%s' have incompatible shapes %s and %s", opname, fa_shape_str(L->A, ra, sa),
         fa_shape_str(L->A, rb, sb));
    return DT_VOID;
  }
  IrType t = fa_type_block(dt, rank, shape);
  *xa = to_ir_type(L, a, t, loc);
  *xb = *xa ? to_ir_type(L, b, t, loc) : NULL;
  return *xa && *xb ? dt : DT_VOID;
}

static LVal *ptr_arith(Lower *L, OpKind op, LVal *a, LVal *b, SrcLoc loc) {
  LVal *p = is_ptr(a) ? a : b, *o = is_ptr(a) ? b : a;
  if (is_ptr(o) || (op != OP_ADD && op != OP_SUB) || (op == OP_SUB && p != a)) {
    return lerr(L, loc, "operator '%s' is not defined on %s and %s (pointers take '+' or '-' of integer offsets)",
                fa_op_spelling(op), describe(L, a), describe(L, b));
  }
  IrValue *off = to_ir(L, o, DT_VOID, loc);
  if (!off)
    return NULL;
  if (!fa_dtype_is_int(off->type.dtype))
    return lerr(L, loc, "a pointer offset must be an integer, got %s", describe(L, o));
  if (off->type.dtype == DT_I1 && !(off = cast_ir(L, off, DT_I32, loc)))
    return NULL;
  IrType pt = p->v->type;
  int rank, shape[FA_MAX_RANK];
  if (!fa_broadcast_shapes(pt.rank, pt.shape, off->type.rank, off->type.shape, &rank, shape))
    return lerr(L, loc, "pointers of shape %s and offsets of shape %s cannot be broadcast together",
                fa_shape_str(L->A, pt.rank, pt.shape), fa_shape_str(L->A, off->type.rank, off->type.shape));
  IrValue *pv = bcast_ir(L, p->v, rank, shape, loc);
  off = bcast_ir(L, off, rank, shape, loc);
  if (!pv || !off)
    return NULL;
  if (op == OP_SUB && !(off = emit1(L, IR_UNARY, UN_NEG, loc, off->type, &off, 1)))
    return NULL;
  IrValue *ops[2] = {pv, off};
  return lv_ir(L, emit1(L, IR_PTR_ADD, 0, loc, fa_type_ptr(pt.pointee, rank, shape), ops, 2));
}

static LVal *matmul(Lower *L, LVal *x, LVal *y, SrcLoc loc);

static LVal *binop(Lower *L, OpKind op, LVal *a, LVal *b, SrcLoc loc) {
  if (!a || !b)
    return NULL;
  const char *opname = fa_op_spelling(op);
  if (a->kind == LV_CONST && b->kind == LV_CONST) {
    FaConst r;
    const char *why = NULL;
    if (!fa_const_binary(op, a->c, b->c, &r, &why))
      return lerr(L, loc, "%s (operands %s and %s)", why, describe(L, a), describe(L, b));
    return lv_const(L, r);
  }
  if (a->kind == LV_TUPLE && b->kind == LV_TUPLE && (op == OP_EQ || op == OP_NE)) {
    bool eq = a->n == b->n;
    for (int i = 0; eq && i < a->n; i++) {
      LVal *e = binop(L, OP_EQ, a->elems[i], b->elems[i], loc);
      if (!e)
        return NULL;
      if (e->kind != LV_CONST)
        return lerr(L, loc, "tuples can be compared only at compile time");
      eq = fa_const_truth(e->c);
    }
    return lv_const(L, fa_const_bool(op == OP_EQ ? eq : !eq));
  }
  if (is_bptr(a) || is_bptr(b))
    return lerr(L, loc, "operator '%s' is not defined on a block pointer; move it with advance()", opname);
  if (is_ptr(a) || is_ptr(b))
    return ptr_arith(L, op, a, b, loc);
  if (op == OP_MATMUL)
    return matmul(L, a, b, loc);
  if (op == OP_AND || op == OP_OR) {
    IrValue *x = to_bool_ir(L, a, loc), *y = x ? to_bool_ir(L, b, loc) : NULL;
    if (!y)
      return NULL;
    int rank, shape[FA_MAX_RANK];
    if (!fa_broadcast_shapes(x->type.rank, x->type.shape, y->type.rank, y->type.shape, &rank, shape))
      return lerr(L, loc, "operands of '%s' have incompatible shapes", opname);
    x = bcast_ir(L, x, rank, shape, loc);
    y = bcast_ir(L, y, rank, shape, loc);
    if (!x || !y)
      return NULL;
    IrValue *ops[2] = {x, y};
    return lv_ir(L, emit1(L, IR_BINARY, op == OP_AND ? BIN_AND : BIN_OR, loc, x->type, ops, 2));
  }
  IrValue *x, *y;
  DType dt = unify(L, op_class(op), a, b, opname, loc, &x, &y);
  if (dt == DT_VOID)
    return NULL;
  IrValue *ops[2] = {x, y};
  if (is_cmp(op))
    return lv_ir(L, emit1(L, IR_CMP, cmp_of(op), loc, same_shape_type(x->type, DT_I1), ops, 2));
  int sub;
  switch (op) {
  case OP_ADD: sub = BIN_ADD; break;
  case OP_SUB: sub = BIN_SUB; break;
  case OP_MUL: sub = BIN_MUL; break;
  case OP_DIV: sub = BIN_DIV; break;
  case OP_FLOORDIV: sub = BIN_DIV; break;
  case OP_MOD: sub = BIN_MOD; break;
  case OP_POW:
    if (!fa_dtype_is_float(dt))
      return lerr(L, loc, "'**' on runtime values needs float operands (got %s); convert with .to(f32)",
                  fa_dtype_name(dt));
    sub = BIN_POW;
    break;
  case OP_SHL: sub = BIN_SHL; break;
  case OP_SHR: sub = BIN_SHR; break;
  case OP_BITAND: sub = BIN_AND; break;
  case OP_BITOR: sub = BIN_OR; break;
  case OP_BITXOR: sub = BIN_XOR; break;
  default: return lerr(L, loc, "operator '%s' is not supported here", opname);
  }
  IrValue *r = emit1(L, IR_BINARY, sub, loc, x->type, ops, 2);
  if (r && op == OP_FLOORDIV && fa_dtype_is_float(dt))
    r = emit1(L, IR_UNARY, UN_FLOOR, loc, r->type, &r, 1);
  return lv_ir(L, r);
}

static LVal *unop(Lower *L, OpKind op, LVal *a, SrcLoc loc) {
  if (!a)
    return NULL;
  if (a->kind == LV_CONST) {
    FaConst r;
    const char *why = NULL;
    if (!fa_const_unary(op, a->c, &r, &why))
      return lerr(L, loc, "%s: %s", why, describe(L, a));
    return lv_const(L, r);
  }
  if (op == OP_NOT) {
    IrValue *x = to_bool_ir(L, a, loc);
    return x ? lv_ir(L, emit1(L, IR_UNARY, UN_NOT, loc, x->type, &x, 1)) : NULL;
  }
  if (!is_data(a))
    return lerr(L, loc, "unary '%s' is not defined on %s", fa_op_spelling(op), describe(L, a));
  IrValue *x = a->v;
  DType dt = x->type.dtype;
  switch (op) {
  case OP_POS:
    return dt == DT_I1 ? lv_ir(L, cast_ir(L, x, DT_I32, loc)) : a;
  case OP_NEG:
    if (dt == DT_I1 && !(x = cast_ir(L, x, DT_I32, loc)))
      return NULL;
    return lv_ir(L, emit1(L, IR_UNARY, UN_NEG, loc, x->type, &x, 1));
  case OP_INVERT:
    if (fa_dtype_is_float(dt))
      return lerr(L, loc, "'~' needs an integer or boolean operand, got %s", describe(L, a));
    return lv_ir(L, emit1(L, IR_UNARY, dt == DT_I1 ? UN_NOT : UN_INVERT, loc, x->type, &x, 1));
  default:
    return lerr(L, loc, "unsupported unary operator");
  }
}

/* ---- names ------------------------------------------------------------------------------ */

static LVal *eval(Lower *L, const Node *e);
static bool lower_block(Lower *L, const NodeList *list, bool loop_body);
static bool lower_block_ex(Lower *L, const NodeList *list, bool loop_body, const Node *cond);
static LVal *inline_call(Lower *L, const Node *fn, const Node *call);

static const char *const dtype_names[] = {"i1", "bool", "i8", "i16", "i32", "i64", "f16", "bf16", "f32", "f64"};

static bool is_dtype_name(const char *name) {
  for (int i = 0; i < FA_ARRAY_LEN(dtype_names); i++)
    if (!strcmp(dtype_names[i], name))
      return true;
  return false;
}

static LVal *lookup(Lower *L, const char *name, SrcLoc loc) {
  FuncCtx *fx = L->fx;
  if (fx) {
    LVal *v = scope_get(&fx->scope, name);
    if (v) {
      if (v->kind == LV_UNDEF)
        return lerr(L, loc, "'%s' has no value here: %s", name, v->why);
      return v;
    }
    if (nameset_has(&fx->locals, name))
      return lerr(L, loc, "local variable '%s' is used before it is assigned", name);
  }
  LVal *v = scope_get(&L->mod, name);
  if (v)
    return v;
  if (L->prog) {
    const Node *fn = fa_program_function(L->prog, name);
    if (fn) {
      LVal *f = lv_new(L, LV_FUNC);
      if (f)
        f->fn = fn;
      return f;
    }
  }
  if (is_dtype_name(name))
    return lv_const(L, fa_const_dtype(fa_dtype_from_name(name)));
  if (fa_is_builtin_name(name)) {
    LVal *f = lv_new(L, LV_FUNC);
    if (f)
      f->builtin = name;
    return f;
  }
  return lerr(L, loc, "unknown name '%s'", name);
}

/* A name bound to v in the current function's scope, for calls the compiler
 * makes up (method calls, combine functions): no source name starts with '@'. */
static Node *tmp_name(Lower *L, LVal *v, SrcLoc loc) {
  if (!v)
    return NULL;
  if (!L->fx) {
    lerr(L, loc, "this needs a value known only at run time");
    return NULL;
  }
  Node *n = fa_node_new(L->fc, N_NAME, loc);
  if (!n || !(n->name = fa_arena_printf(L->A, "@t%d", L->ntemps++))) {
    oom(L);
    return NULL;
  }
  return scope_set(L, &L->fx->scope, n->name, v) ? n : NULL;
}

/* ---- attributes and subscripts ----------------------------------------------------------- */

static LVal *trans_value(Lower *L, LVal *x, SrcLoc loc) {
  if (!x)
    return NULL;
  if (!is_data(x) || x->v->type.rank != 2)
    return lerr(L, loc, "trans() needs a 2-D block, got %s", describe(L, x));
  IrType t = x->v->type;
  IrType r = t;
  r.shape[0] = t.shape[1];
  r.shape[1] = t.shape[0];
  IrOp *op = emit(L, IR_TRANS, 0, loc, &x->v, 1, &r, 1);
  if (!op)
    return NULL;
  op->perm[0] = 1;
  op->perm[1] = 0;
  return lv_ir(L, op->results[0]);
}

static LVal *eval_attr(Lower *L, const Node *e) {
  LVal *x = eval(L, e->lhs);
  if (!x)
    return NULL;
  const char *a = e->name;
  if (!strcmp(a, "dtype")) {
    if (is_ir(x)) {
      IrType t = x->v->type;
      return lv_const(L, fa_const_dtype(t.dtype == DT_PTR || t.dtype == DT_BLOCKPTR ? t.pointee : t.dtype));
    }
    return lerr(L, e->loc, "'.dtype' needs a runtime value, got %s", describe(L, x));
  }
  if (!strcmp(a, "shape")) {
    if (!is_ir(x))
      return lerr(L, e->loc, "'.shape' needs a block, got %s", describe(L, x));
    IrType t = x->v->type;
    LVal *tup = lv_tuple(L, t.rank);
    for (int i = 0; tup && i < t.rank; i++)
      if (!(tup->elems[i] = lv_const(L, fa_const_int(t.shape[i]))))
        return NULL;
    return tup;
  }
  if (!strcmp(a, "T"))
    return trans_value(L, x, e->loc);
  return lerr(L, e->loc, "unknown attribute '%s' of %s", a, describe(L, x));
}

static LVal *eval_subscript(Lower *L, const Node *e) {
  LVal *x = eval(L, e->lhs);
  if (!x)
    return NULL;
  if (x->kind == LV_TUPLE) {
    if (e->args.len != 1 || e->args.items[0]->kind == N_SLICE)
      return lerr(L, e->loc, "a tuple takes a single integer index");
    LVal *iv = eval(L, e->args.items[0]);
    int64_t i;
    if (!want_int(L, iv, e->args.items[0], "a tuple index", &i))
      return NULL;
    if (i < 0)
      i += x->n;
    if (i < 0 || i >= x->n)
      return lerr(L, e->args.items[0]->loc, "tuple index out of range (the tuple has %d entries)", x->n);
    return x->elems[i];
  }
  if (!is_data(x))
    return lerr(L, e->loc, "%s cannot be subscripted", describe(L, x));
  IrValue *v = x->v;
  int rank = v->type.rank, nslices = 0;
  for (int i = 0; i < e->args.len; i++) {
    const Node *s = e->args.items[i];
    if (s->kind == N_SLICE && !s->lo && !s->hi && !s->step)
      nslices++;
    else if (s->kind != N_NONE)
      return lerr(L, s->loc, "block subscripts may only be ':' (keep a dimension) or None (add one)");
  }
  if (nslices != rank)
    return lerr(L, e->loc, "subscript has %d ':' entries but the block has rank %d", nslices, rank);
  if (e->args.len > FA_MAX_RANK)
    return lerr(L, e->loc, "blocks of rank more than %d are not supported", FA_MAX_RANK);
  if (rank == 0) {
    int shape[FA_MAX_RANK];
    for (int i = 0; i < e->args.len; i++)
      shape[i] = 1;
    return lv_ir(L, bcast_ir(L, v, e->args.len, shape, e->loc));
  }
  for (int i = 0; i < e->args.len; i++) {
    if (e->args.items[i]->kind != N_NONE)
      continue;
    IrType t = v->type;
    for (int d = t.rank; d > i; d--)
      t.shape[d] = t.shape[d - 1];
    t.shape[i] = 1;
    t.rank++;
    IrOp *op = emit(L, IR_EXPAND_DIMS, 0, e->loc, &v, 1, &t, 1);
    if (!op)
      return NULL;
    op->axis = i;
    v = op->results[0];
  }
  return lv_ir(L, v);
}

/* ---- builtins -------------------------------------------------------------------------- */

typedef struct Builtin Builtin;
typedef LVal *(*BuiltinFn)(Lower *L, const Builtin *bi, const Node *call, const Node **a);

enum { MAX_BUILTIN_PARAMS = 6, MAX_SCAN_VALUES = 8 };

struct Builtin {
  const char *name;
  BuiltinFn fn;
  int nreq;                   /* the first nreq parameters are required */
  bool host_ok;               /* allowed in grid / extent expressions and constant evaluation */
  int sub;                    /* IrUnaryOp / IrReduceOp / IrBinaryOp for families */
  const char *params[MAX_BUILTIN_PARAMS + 1];
  int vararg;                 /* > 0: positional arguments from this one on are gathered into a tuple
                                 for that parameter (reshape(x, 4, 8) = reshape(x, (4, 8))) */
};

/* Matches a call's positional and keyword arguments to parameter names. */
static bool bind_args(Lower *L, const Node *call, const char *fname, const char *const *names, int n, int nreq,
                      const Node **out) {
  for (int i = 0; i < n; i++)
    out[i] = NULL;
  if (call->args.len > n) {
    lerr(L, call->loc, "%s() takes %s %d argument%s (%d given)", fname, nreq == n ? "exactly" : "at most", n,
         n == 1 ? "" : "s", call->args.len);
    return false;
  }
  for (int i = 0; i < call->args.len; i++)
    out[i] = call->args.items[i];
  for (int k = 0; k < call->kwargs.len; k++) {
    const Node *kw = call->kwargs.items[k];
    int j = -1;
    for (int i = 0; i < n; i++)
      if (!strcmp(names[i], kw->name))
        j = i;
    if (j < 0) {
      lerr(L, kw->loc, "%s() got an unexpected keyword argument '%s'", fname, kw->name);
      return false;
    }
    if (out[j]) {
      lerr(L, kw->loc, "%s() got multiple values for argument '%s'", fname, kw->name);
      return false;
    }
    out[j] = kw->rhs;
  }
  for (int i = 0; i < nreq; i++)
    if (!out[i]) {
      lerr(L, call->loc, "%s() missing required argument '%s'", fname, names[i]);
      return false;
    }
  return true;
}

static LVal *eval_opt(Lower *L, const Node *n) { return n ? eval(L, n) : lv_none(L); }

static bool is_none(const LVal *v) { return v && v->kind == LV_CONST && v->c.kind == CK_NONE; }

static LVal *b_program_id(Lower *L, const Builtin *bi, const Node *call, const Node **a) {
  int64_t axis;
  if (!want_int(L, eval(L, a[0]), a[0], "the axis", &axis))
    return NULL;
  if (axis < 0 || axis > 2)
    return lerr(L, a[0]->loc, "%s() axis must be 0, 1 or 2, got %lld", bi->name, (long long)axis);
  IrOp *op = emit(L, bi->sub, 0, call->loc, NULL, 0, &(IrType){DT_I32, DT_VOID, 0, {0}}, 1);
  if (!op)
    return NULL;
  op->axis = (int)axis;
  return lv_ir(L, op->results[0]);
}

static LVal *b_arange(Lower *L, const Builtin *bi, const Node *call, const Node **a) {
  (void)bi;
  int64_t lo, hi;
  if (!want_int(L, eval(L, a[0]), a[0], "arange() start", &lo) ||
      !want_int(L, eval(L, a[1]), a[1], "arange() end", &hi))
    return NULL;
  if (hi <= lo)
    return lerr(L, call->loc, "arange(%lld, %lld) is empty", (long long)lo, (long long)hi);
  int64_t n = hi - lo;
  if (!fa_is_pow2(n))
    return lerr(L, call->loc, "arange(%lld, %lld) has %lld elements; block lengths must be powers of two",
                (long long)lo, (long long)hi, (long long)n);
  if (n > FA_MAX_BLOCK_NUMEL || !fa_int_fits(lo, DT_I32) || !fa_int_fits(hi, DT_I32))
    return lerr(L, call->loc, "arange(%lld, %lld) is too large", (long long)lo, (long long)hi);
  int shape[1] = {(int)n};
  IrOp *op = emit(L, IR_ARANGE, 0, call->loc, NULL, 0, &(IrType){DT_I32, DT_VOID, 1, {shape[0]}}, 1);
  if (!op)
    return NULL;
  op->ival = lo;
  op->ival2 = hi;
  return lv_ir(L, op->results[0]);
}

static bool want_shape(Lower *L, const Node *n, const char *what, int *rank, int *shape) {
  int64_t dims[FA_MAX_RANK];
  LVal *v = eval(L, n);
  int r = want_int_tuple(L, v, n, what, dims, FA_MAX_RANK, true);
  if (r < 0 || !check_block_shape(L, n, what, r, dims, shape))
    return false;
  *rank = r;
  return true;
}

static LVal *b_full(Lower *L, const Builtin *bi, const Node *call, const Node **a) {
  bool zeros = !strcmp(bi->name, "zeros");
  const Node *nshape = a[0], *nvalue = zeros ? NULL : a[1], *ndtype = zeros ? a[1] : a[2];
  int rank, shape[FA_MAX_RANK];
  DType dt;
  if (!want_shape(L, nshape, fa_arena_printf(L->A, "%s() shape", bi->name), &rank, shape) || !want_dtype(L, eval(L, ndtype), ndtype, "dtype", &dt))
    return NULL;
  IrType t = fa_type_block(dt, rank, shape);
  if (zeros)
    return lv_ir(L, const_ir(L, fa_const_int(0), t, call->loc));
  LVal *v = eval(L, nvalue);
  if (!v)
    return NULL;
  if (is_num_const(v))
    return lv_ir(L, const_ir(L, v->c, t, call->loc));
  if (!is_data(v) || v->v->type.rank != 0)
    return lerr(L, nvalue->loc, "full() needs a scalar value, got %s", describe(L, v));
  return lv_ir(L, to_ir_type(L, v, t, call->loc));
}

/* A tuple of scalar integers (compile-time or runtime), converted to `dt`. */
static int want_index_tuple(Lower *L, const Node *n, const char *what, DType dt, IrValue **out) {
  LVal *v = eval(L, n);
  if (!v)
    return -1;
  if (v->kind != LV_TUPLE)
    return lerr(L, n->loc, "%s must be a tuple, got %s", what, describe(L, v)), -1;
  if (v->n > FA_MAX_RANK)
    return lerr(L, n->loc, "%s has %d entries; at most %d are supported", what, v->n, FA_MAX_RANK), -1;
  for (int i = 0; i < v->n; i++) {
    LVal *e = v->elems[i];
    bool ok = (is_num_const(e) && e->c.kind != CK_FLOAT) ||
              (is_data(e) && e->v->type.rank == 0 && fa_dtype_is_int(e->v->type.dtype));
    if (!ok)
      return lerr(L, n->loc, "%s: entry %d must be an integer scalar, got %s", what, i, describe(L, e)), -1;
    if (!(out[i] = to_ir(L, e, dt, n->loc)))
      return -1;
  }
  return v->n;
}

static LVal *b_make_block_ptr(Lower *L, const Builtin *bi, const Node *call, const Node **a) {
  (void)bi;
  LVal *base = eval(L, a[0]);
  if (!base)
    return NULL;
  if (!is_ptr(base) || base->v->type.rank != 0)
    return lerr(L, a[0]->loc, "make_block_ptr() needs a pointer as its base, got %s", describe(L, base));
  IrValue *shape[FA_MAX_RANK], *strides[FA_MAX_RANK], *offsets[FA_MAX_RANK];
  int64_t bshape[FA_MAX_RANK], order[FA_MAX_RANK];
  int r0 = want_index_tuple(L, a[1], "make_block_ptr() shape", DT_I64, shape);
  if (r0 < 0)
    return NULL;
  int r1 = want_index_tuple(L, a[2], "make_block_ptr() strides", DT_I64, strides);
  if (r1 < 0)
    return NULL;
  int r2 = want_index_tuple(L, a[3], "make_block_ptr() offsets", DT_I32, offsets);
  if (r2 < 0)
    return NULL;
  int r3 = want_int_tuple(L, eval(L, a[4]), a[4], "make_block_ptr() block_shape", bshape, FA_MAX_RANK, false);
  if (r3 < 0)
    return NULL;
  int r4 = want_int_tuple(L, eval(L, a[5]), a[5], "make_block_ptr() order", order, FA_MAX_RANK, false);
  if (r4 < 0)
    return NULL;
  const char *names[5] = {"shape", "strides", "offsets", "block_shape", "order"};
  int ranks[5] = {r0, r1, r2, r3, r4};
  for (int i = 1; i < 5; i++)
    if (ranks[i] != r0)
      return lerr(L, a[i + 1]->loc,
                  "make_block_ptr(): %s has %d dimension%s but shape has %d; all must have the same rank",
                  names[i], ranks[i], ranks[i] == 1 ? "" : "s", r0);
  if (r0 == 0)
    return lerr(L, call->loc, "make_block_ptr() needs at least one dimension");
  int bs[FA_MAX_RANK];
  if (!check_block_shape(L, a[4], "make_block_ptr() block_shape", r0, bshape, bs))
    return NULL;
  unsigned seen = 0;
  for (int i = 0; i < r0; i++) {
    if (order[i] < 0 || order[i] >= r0 || (seen & (1u << order[i])))
      return lerr(L, a[5]->loc, "make_block_ptr() order must be a permutation of 0..%d", r0 - 1);
    seen |= 1u << order[i];
  }
  IrValue *ops[1 + 3 * FA_MAX_RANK];
  int n = 0;
  ops[n++] = base->v;
  for (int i = 0; i < r0; i++)
    ops[n++] = shape[i];
  for (int i = 0; i < r0; i++)
    ops[n++] = strides[i];
  for (int i = 0; i < r0; i++)
    ops[n++] = offsets[i];
  IrType t = fa_type_blockptr(base->v->type.pointee, r0, bs);
  IrOp *op = emit(L, IR_MAKE_BLOCK_PTR, 0, call->loc, ops, n, &t, 1);
  if (!op)
    return NULL;
  for (int i = 0; i < r0; i++)
    op->perm[i] = (int)order[i];
  return lv_ir(L, op->results[0]);
}

static LVal *b_advance(Lower *L, const Builtin *bi, const Node *call, const Node **a) {
  (void)bi;
  LVal *p = eval(L, a[0]);
  if (!p)
    return NULL;
  if (!is_bptr(p))
    return lerr(L, a[0]->loc, "advance() needs a block pointer, got %s", describe(L, p));
  IrValue *offs[FA_MAX_RANK];
  int r = want_index_tuple(L, a[1], "advance() offsets", DT_I32, offs);
  if (r < 0)
    return NULL;
  if (r != p->v->type.rank)
    return lerr(L, a[1]->loc, "advance() got %d offset%s for a block pointer of rank %d", r, r == 1 ? "" : "s",
                p->v->type.rank);
  IrValue *ops[1 + FA_MAX_RANK];
  ops[0] = p->v;
  for (int i = 0; i < r; i++)
    ops[1 + i] = offs[i];
  return lv_ir(L, emit1(L, IR_ADVANCE, 0, call->loc, p->v->type, ops, 1 + r));
}

/* boundary_check=(axes...) for a block pointer of rank `rank`. */
static bool want_boundary(Lower *L, const Node *n, int rank, unsigned *out) {
  *out = 0;
  if (!n)
    return true;
  LVal *v = eval(L, n);
  if (!v)
    return false;
  if (is_none(v))
    return true;
  int64_t axes[FA_MAX_RANK * 2];
  if (v->kind == LV_TUPLE && v->n > FA_MAX_RANK * 2) {
    lerr(L, n->loc, "boundary_check lists too many axes");
    return false;
  }
  int k = want_int_tuple(L, v, n, "boundary_check", axes, FA_MAX_RANK * 2, true);
  if (k < 0)
    return false;
  for (int i = 0; i < k; i++) {
    if (axes[i] < 0 || axes[i] >= rank) {
      lerr(L, n->loc, "boundary_check axis %lld is out of range for a block pointer of rank %d", (long long)axes[i],
           rank);
      return false;
    }
    *out |= 1u << axes[i];
  }
  return true;
}

/* Brings mask (and a value) to the pointers' shape; `value_dt` is the dtype
 * the value is converted to. */
static bool prepare_masked(Lower *L, const char *fname, IrValue **ptrs, LVal *mask, const Node *nmask, LVal *val,
                           const Node *nval, IrValue **xmask, IrValue **xval, SrcLoc loc) {
  IrType pt = (*ptrs)->type;
  int rank = pt.rank, shape[FA_MAX_RANK];
  memcpy(shape, pt.shape, sizeof shape);
  *xmask = NULL;
  *xval = NULL;
  if (mask && !is_none(mask)) {
    if (!(*xmask = to_bool_ir(L, mask, nmask->loc)))
      return false;
    IrType mt = (*xmask)->type;
    int r2, s2[FA_MAX_RANK];
    if (!fa_broadcast_shapes(rank, shape, mt.rank, mt.shape, &r2, s2)) {
      lerr(L, nmask->loc, "%s(): the mask of shape %s does not fit pointers of shape %s", fname,
           fa_shape_str(L->A, mt.rank, mt.shape), fa_shape_str(L->A, rank, shape));
      return false;
    }
    rank = r2;
    memcpy(shape, s2, sizeof shape);
  }
  if (val && !is_none(val)) {
    int vr = is_ir(val) ? val->v->type.rank : 0;
    const int *vs = is_ir(val) ? val->v->type.shape : NULL;
    int r2, s2[FA_MAX_RANK];
    bool ok = fa_broadcast_shapes(rank, shape, vr, vs, &r2, s2) && r2 == rank;
    for (int i = 0; ok && i < rank; i++)
      ok = s2[i] == shape[i];
    if (!ok) {
      lerr(L, nval->loc, "%s(): a value of shape %s does not fit pointers of shape %s", fname,
           fa_shape_str(L->A, vr, vs), fa_shape_str(L->A, rank, shape));
      return false;
    }
    if (!is_num_const(val) && !is_data(val)) {
      lerr(L, nval->loc, "%s(): expected a number or block, got %s", fname, describe(L, val));
      return false;
    }
    if (!(*xval = to_ir_type(L, val, fa_type_block(pt.pointee, rank, shape), nval->loc)))
      return false;
  }
  if (!(*ptrs = bcast_ir(L, *ptrs, rank, shape, loc)))
    return false;
  if (*xmask && !(*xmask = bcast_ir(L, *xmask, rank, shape, loc)))
    return false;
  return true;
}

static LVal *b_load(Lower *L, const Builtin *bi, const Node *call, const Node **a) {
  (void)bi;
  LVal *p = eval(L, a[0]);
  if (!p)
    return NULL;
  if (is_bptr(p)) {
    if (a[1] || a[2])
      return lerr(L, (a[1] ? a[1] : a[2])->loc,
                  "load() through a block pointer takes boundary_check= and padding=, not mask= or other=");
    IrType t = p->v->type;
    unsigned boundary;
    if (!want_boundary(L, a[3], t.rank, &boundary))
      return NULL;
    IrPadding pad = PAD_NONE;
    if (a[4]) {
      LVal *pv = eval(L, a[4]);
      if (!pv)
        return NULL;
      if (pv->kind == LV_CONST && pv->c.kind == CK_STR && !strcmp(pv->c.s, "zero"))
        pad = PAD_ZERO;
      else if (pv->kind == LV_CONST && pv->c.kind == CK_STR && !strcmp(pv->c.s, "nan"))
        pad = PAD_NAN;
      else if (!is_none(pv))
        return lerr(L, a[4]->loc, "padding must be \"zero\" or \"nan\", got %s", describe(L, pv));
      if (pad == PAD_NAN && !fa_dtype_is_float(t.pointee))
        return lerr(L, a[4]->loc, "padding=\"nan\" needs a float element type, not %s", fa_dtype_name(t.pointee));
    }
    IrType rt = fa_type_block(t.pointee, t.rank, t.shape);
    IrOp *op = emit(L, IR_LOAD_BLOCK, 0, call->loc, &p->v, 1, &rt, 1);
    if (!op)
      return NULL;
    op->boundary = boundary;
    op->padding = pad;
    return lv_ir(L, op->results[0]);
  }
  if (!is_ptr(p))
    return lerr(L, a[0]->loc, "load() needs a pointer, a block of pointers or a block pointer, got %s",
                describe(L, p));
  if (a[3] || a[4])
    return lerr(L, (a[3] ? a[3] : a[4])->loc,
                "boundary_check= and padding= are for block pointers; use mask= and other= with pointers");
  LVal *mask = a[1] ? eval(L, a[1]) : NULL;
  if (a[1] && !mask)
    return NULL;
  LVal *other = a[2] ? eval(L, a[2]) : NULL;
  if (a[2] && !other)
    return NULL;
  if (other && !is_none(other) && (!mask || is_none(mask)))
    return lerr(L, a[2]->loc, "load(): other= needs a mask=");
  IrValue *ptrs = p->v, *xm, *xo;
  if (!prepare_masked(L, "load", &ptrs, mask, a[1], other, a[2], &xm, &xo, call->loc))
    return NULL;
  IrValue *ops[3] = {ptrs, xm, xo};
  int n = xo ? 3 : xm ? 2 : 1;
  return lv_ir(L, emit1(L, IR_LOAD, 0, call->loc, fa_type_block(ptrs->type.pointee, ptrs->type.rank,
                                                                ptrs->type.shape), ops, n));
}

/* The element types atomic_add adds through a block pointer (those of the
 * hardware's atom/red instructions, and bf16 by compare-and-swap). */
static bool atomic_block_dtype_ok(DType dt) {
  return dt == DT_F16 || dt == DT_BF16 || dt == DT_F32 || dt == DT_F64 || dt == DT_I32 || dt == DT_U32 ||
         dt == DT_I64;
}

/* store(block_ptr, value) and atomic_add(block_ptr, value): a block of
 * exactly the tile's shape (or a number or scalar, splatted), converted to
 * the element type; elements outside the checked axes are dropped.  The
 * atomic form adds each element into memory (a reduce-store: it gives no
 * value back, unlike atomic_add on pointers). */
static LVal *store_block(Lower *L, const Builtin *bi, const Node *call, const Node **a, LVal *p, LVal *val,
                         bool atomic) {
  const char *fn = bi->name;
  if (a[2])
    return lerr(L, a[2]->loc, "%s() through a block pointer takes boundary_check=, not mask=", fn);
  IrType t = p->v->type;
  unsigned boundary;
  if (!want_boundary(L, a[3], t.rank, &boundary))
    return NULL;
  if (atomic && !atomic_block_dtype_ok(t.pointee))
    return lerr(L, a[0]->loc,
                "atomic_add() through a block pointer adds f16, bf16, f32, f64, i32, u32 or i64 elements, not %s",
                fa_dtype_name(t.pointee));
  if (!is_num_const(val) && !is_data(val))
    return lerr(L, a[1]->loc, "%s() needs a number or a block as its value, got %s", fn, describe(L, val));
  if (is_ir(val) && val->v->type.rank != 0) {
    IrType vt = val->v->type;
    bool same = vt.rank == t.rank;
    for (int i = 0; same && i < t.rank; i++)
      same = vt.shape[i] == t.shape[i];
    if (!same)
      return lerr(L, a[1]->loc, "%s(): the value has shape %s but the block pointer's block is %s", fn,
                  fa_shape_str(L->A, vt.rank, vt.shape), fa_shape_str(L->A, t.rank, t.shape));
  }
  IrValue *x = to_ir_type(L, val, fa_type_block(t.pointee, t.rank, t.shape), a[1]->loc);
  if (!x)
    return NULL;
  IrValue *ops[2] = {p->v, x};
  IrOp *op = emit(L, atomic ? IR_ATOMIC_ADD_BLOCK : IR_STORE_BLOCK, 0, call->loc, ops, 2, NULL, 0);
  if (!op)
    return NULL;
  op->boundary = boundary;
  if (atomic)
    return lv_undef(L, "atomic_add() through a block pointer gives no value (atomic_add on pointers gives the "
                       "previous values)");
  return lv_none(L);
}

static LVal *b_store(Lower *L, const Builtin *bi, const Node *call, const Node **a) {
  bool atomic = !strcmp(bi->name, "atomic_add");
  LVal *p = eval(L, a[0]);
  if (!p)
    return NULL;
  LVal *val = eval(L, a[1]);
  if (!val)
    return NULL;
  if (is_bptr(p))
    return store_block(L, bi, call, a, p, val, atomic);
  if (!is_ptr(p))
    return lerr(L, a[0]->loc, "%s() needs a pointer, a block of pointers or a block pointer, got %s", bi->name,
                describe(L, p));
  if (a[3])
    return lerr(L, a[3]->loc, "boundary_check= is for block pointers; use mask= with pointers");
  if (is_none(val))   /* (prepare_masked takes None as "no value", for load's other=) */
    return lerr(L, a[1]->loc, "%s() needs a number or a block as its value, got %s", bi->name, describe(L, val));
  LVal *mask = a[2] ? eval(L, a[2]) : NULL;
  if (a[2] && !mask)
    return NULL;
  IrValue *ptrs = p->v, *xm, *xv;
  if (!prepare_masked(L, bi->name, &ptrs, mask, a[2], val, a[1], &xm, &xv, call->loc))
    return NULL;
  IrValue *ops[3] = {ptrs, xv, xm};
  int n = xm ? 3 : 2;
  if (atomic)
    return lv_ir(L, emit1(L, IR_ATOMIC_ADD, 0, call->loc, xv->type, ops, n));
  return emit(L, IR_STORE, 0, call->loc, ops, n, NULL, 0) ? lv_none(L) : NULL;
}

/* The operands of a product, checked: 2-D blocks that chain, of one
 * supported dtype, every dimension at least 16.  `what` names the operation
 * in messages ("dot()" or "operator '@'"). */
static bool dot_operands(Lower *L, const char *what, LVal *x, SrcLoc xloc, LVal *y, SrcLoc yloc, SrcLoc loc) {
  for (int i = 0; i < 2; i++) {
    LVal *v = i ? y : x;
    if (!is_data(v) || v->v->type.rank != 2) {
      lerr(L, i ? yloc : xloc, "%s needs 2-D blocks, got %s", what, describe(L, v));
      return false;
    }
  }
  IrType ta = x->v->type, tb = y->v->type;
  const char *sa = fa_shape_str(L->A, 2, ta.shape), *sb = fa_shape_str(L->A, 2, tb.shape);
  if (ta.shape[1] != tb.shape[0])
    return lerr(L, loc, "%s: shapes %s and %s do not chain ([M, K] x [K, N])", what, sa, sb), false;
  if (ta.shape[0] < 16 || ta.shape[1] < 16 || tb.shape[1] < 16)
    return lerr(L, loc, "%s: every dimension must be at least 16, got %s x %s", what, sa, sb), false;
  if (ta.dtype != tb.dtype)
    return lerr(L, loc, "%s: operands must have the same dtype, got %s and %s", what, fa_dtype_name(ta.dtype),
                fa_dtype_name(tb.dtype)), false;
  DType in = ta.dtype;
  if (in != DT_F16 && in != DT_BF16 && in != DT_F32 && in != DT_F64)
    return lerr(L, loc, "%s: operands must be f16, bf16, f32 or f64, got %s", what, fa_dtype_name(in)), false;
  return true;
}

/* a @ b: dot(a, b) with the default accumulation (f32; f64 for f64). */
static LVal *matmul(Lower *L, LVal *x, LVal *y, SrcLoc loc) {
  if (!dot_operands(L, "operator '@'", x, loc, y, loc, loc))
    return NULL;
  IrType ta = x->v->type, tb = y->v->type;
  int rs[2] = {ta.shape[0], tb.shape[1]};
  IrType rt = fa_type_block(ta.dtype == DT_F64 ? DT_F64 : DT_F32, 2, rs);
  IrValue *ops[2] = {x->v, y->v};
  return lv_ir(L, emit1(L, IR_DOT, DOT_DEFAULT, loc, rt, ops, 2));
}

static LVal *b_dot(Lower *L, const Builtin *bi, const Node *call, const Node **a) {
  (void)bi;
  LVal *x = eval(L, a[0]);
  LVal *y = x ? eval(L, a[1]) : NULL;
  if (!y)
    return NULL;
  if (!dot_operands(L, "dot()", x, a[0]->loc, y, a[1]->loc, call->loc))
    return NULL;
  IrType ta = x->v->type, tb = y->v->type;
  DType in = ta.dtype;
  DType out = in == DT_F64 ? DT_F64 : DT_F32;
  if (a[3]) {
    LVal *od = eval(L, a[3]);
    if (!od)
      return NULL;
    if (!is_none(od) && !want_dtype(L, od, a[3], "out_dtype", &out))
      return NULL;
    bool ok = (out == DT_F32 && in != DT_F64) || (out == in && (in == DT_F16 || in == DT_F64));
    if (!ok)
      return lerr(L, a[3]->loc, "dot(): out_dtype %s is not supported for %s operands", fa_dtype_name(out),
                  fa_dtype_name(in));
  }
  int prec = DOT_DEFAULT;
  if (a[4]) {
    LVal *pv = eval(L, a[4]);
    if (!pv)
      return NULL;
    if (pv->kind == LV_CONST && pv->c.kind == CK_STR && !strcmp(pv->c.s, "ieee"))
      prec = DOT_IEEE;
    else if (pv->kind == LV_CONST && pv->c.kind == CK_STR && !strcmp(pv->c.s, "tf32"))
      prec = DOT_TF32;
    else if (!(is_none(pv) || (pv->kind == LV_CONST && pv->c.kind == CK_STR && !strcmp(pv->c.s, "default"))))
      return lerr(L, a[4]->loc, "dot(): precision must be \"ieee\", \"tf32\" or \"default\", got %s",
                  describe(L, pv));
  }
  int rs[2] = {ta.shape[0], tb.shape[1]};
  IrType rt = fa_type_block(out, 2, rs);
  IrValue *ops[3] = {x->v, y->v, NULL};
  int n = 2;
  if (a[2]) {
    LVal *acc = eval(L, a[2]);
    if (!acc)
      return NULL;
    if (!is_none(acc)) {
      if (!is_data(acc) || !fa_type_equal(acc->v->type, rt))
        return lerr(L, a[2]->loc, "dot(): the accumulator must be %s, got %s", fa_type_str(L->A, rt),
                    describe(L, acc));
      ops[n++] = acc->v;
    }
  }
  return lv_ir(L, emit1(L, IR_DOT, prec, call->loc, rt, ops, n));
}

static double fold_math(int sub, double x) {
  switch (sub) {
  case UN_EXP: return exp(x);
  case UN_EXP2: return exp2(x);
  case UN_LOG: return log(x);
  case UN_LOG2: return log2(x);
  case UN_SQRT: return sqrt(x);
  case UN_RSQRT: return 1.0 / sqrt(x);
  case UN_ABS: return fabs(x);
  case UN_SIN: return sin(x);
  case UN_COS: return cos(x);
  case UN_FLOOR: return floor(x);
  case UN_CEIL: return ceil(x);
  case UN_SIGMOID: return 1.0 / (1.0 + exp(-x));
  case UN_TANH:
  case UN_TANH_APPROX: return tanh(x);
  case UN_ERF: return erf(x);
  default: return x;
  }
}

static LVal *b_math(Lower *L, const Builtin *bi, const Node *call, const Node **a) {
  LVal *x = eval(L, a[0]);
  if (!x)
    return NULL;
  if (is_num_const(x)) {
    if (bi->sub == UN_ABS && x->c.kind != CK_FLOAT) {
      if (x->c.i == INT64_MIN)
        return lerr(L, call->loc, "integer overflow in a compile-time expression");
      return lv_const(L, fa_const_int(x->c.i < 0 ? -x->c.i : x->c.i));
    }
    return lv_const(L, fa_const_float(fold_math(bi->sub, fa_const_as_double(x->c))));
  }
  if (!is_data(x))
    return lerr(L, a[0]->loc, "%s() needs a number or a block, got %s", bi->name, describe(L, x));
  IrValue *v = x->v;
  if (bi->sub == UN_ABS && fa_dtype_is_int(v->type.dtype)) {
    if (v->type.dtype == DT_I1)
      return x;
  } else if (!fa_dtype_is_float(v->type.dtype) && !(v = cast_ir(L, v, DT_F32, call->loc))) {
    return NULL;
  }
  return lv_ir(L, emit1(L, IR_UNARY, bi->sub, call->loc, v->type, &v, 1));
}

static bool want_propagate_nan(Lower *L, const Node *n, bool dflt_all, bool *all);
static IrValue *minmax_ir(Lower *L, bool is_max, bool nan_all, IrValue *x, IrValue *y, SrcLoc loc);

/* maximum(x, y) / minimum(x, y) of two evaluated values: folded when both are
 * compile-time numbers, else elementwise after promotion and broadcasting
 * (nan_all: a NaN operand gives NaN; else, on floats, the other operand). */
static LVal *maximum_values(Lower *L, bool is_max, bool nan_all, const char *name, LVal *x, LVal *y, SrcLoc loc) {
  if (is_num_const(x) && is_num_const(y)) {
    FaConst r;
    const char *why;
    if (!fa_const_binary(OP_LT, x->c, y->c, &r, &why))
      return lerr(L, loc, "%s", why);
    return (r.i != 0) == is_max ? y : x;
  }
  IrValue *vx, *vy;
  if (unify(L, OPC_ARITH, x, y, name, loc, &vx, &vy) == DT_VOID)
    return NULL;
  return lv_ir(L, minmax_ir(L, is_max, nan_all, vx, vy, loc));
}

static LVal *b_maximum(Lower *L, const Builtin *bi, const Node *call, const Node **a) {
  LVal *x = eval(L, a[0]);
  LVal *y = x ? eval(L, a[1]) : NULL;
  if (!y)
    return NULL;
  bool nan_all;
  if (!want_propagate_nan(L, a[2], true, &nan_all))
    return NULL;
  return maximum_values(L, bi->sub == BIN_MAX, nan_all, bi->name, x, y, call->loc);
}

static LVal *reduce_value(Lower *L, int red, IrValue *v, int axis, SrcLoc loc) {
  IrType t = v->type, r = t;
  for (int d = axis; d < t.rank - 1; d++)
    r.shape[d] = t.shape[d + 1];
  r.rank--;
  IrOp *op = emit(L, IR_REDUCE, red, loc, &v, 1, &r, 1);
  if (!op)
    return NULL;
  op->axis = axis;
  return lv_ir(L, op->results[0]);
}

static IrValue *expand_at(Lower *L, IrValue *v, int axis, SrcLoc loc);
static bool want_flag(Lower *L, const Node *n, const char *what, bool dflt, bool *out);
static LVal *arg_index(Lower *L, IrValue *v, int axis, bool is_max, bool first, bool keep, SrcLoc loc);

/* max(a, b, ...) / min(a, b, ...) whose first argument is a number or a
 * scalar (not a block): the largest / smallest, folded on compile-time
 * numbers, else elementwise maximum / minimum, as Triton reads Python's
 * max and min.  Works in grid and extent expressions too. */
static LVal *extreme_of_scalars(Lower *L, const Builtin *bi, const Node *call, LVal *first) {
  if (call->args.len < 2 || call->kwargs.len)
    return lerr(L, call->loc, "%s() of %s takes two or more numbers or scalars", bi->name,
                first->kind == LV_CONST ? "compile-time values" : "scalars");
  LVal *best = first;
  for (int i = 1; best && i < call->args.len; i++) {
    LVal *y = eval(L, call->args.items[i]);
    if (!y)
      return NULL;
    if ((!is_num_const(best) && !is_data(best)) || (!is_num_const(y) && !is_data(y)))
      return lerr(L, call->loc, "%s() needs numbers or a block, got %s and %s", bi->name, describe(L, best),
                  describe(L, y));
    best = maximum_values(L, bi->sub == RED_MAX, true, bi->name, best, y, call->loc);
  }
  return best;
}

/* max / min / sum along an axis; max(a, b, ...) of numbers and scalars. */
static LVal *b_reduce(Lower *L, const Builtin *bi, const Node *call, const Node **a) {
  LVal *x = eval(L, a[0]);
  if (!x)
    return NULL;
  bool scalar = x->kind == LV_CONST || (is_data(x) && x->v->type.rank == 0);
  if (scalar && bi->sub != RED_SUM && (x->kind == LV_CONST || (call->args.len >= 2 && !call->kwargs.len)))
    return extreme_of_scalars(L, bi, call, x);
  if (!is_data(x) || x->v->type.rank == 0)
    return lerr(L, a[0]->loc, "%s() reduces a block along an axis; got %s", bi->name, describe(L, x));
  IrValue *v = x->v;
  int rank = v->type.rank;
  bool sum = bi->sub == RED_SUM, keep, indices = false, first = true;
  if (!want_flag(L, sum ? a[2] : a[4], "keep_dims", false, &keep) ||
      (!sum && !want_flag(L, a[2], "return_indices", false, &indices)) ||
      (!sum && !want_flag(L, a[3], "return_indices_tie_break_left", true, &first)))
    return NULL;
  if (sum && a[3]) {
    LVal *dv = eval(L, a[3]);
    DType dt;
    if (!dv)
      return NULL;
    if (!is_none(dv) && (!want_dtype(L, dv, a[3], "dtype", &dt) || !(v = cast_ir(L, v, dt, call->loc))))
      return NULL;
  }
  if (v->type.dtype == DT_I1 && !(v = cast_ir(L, v, DT_I32, call->loc)))
    return NULL;
  LVal *axv = eval_opt(L, a[1]);
  if (!axv)
    return NULL;
  if (indices && is_none(axv))
    return lerr(L, call->loc, "%s(return_indices=True) needs an axis", bi->name);
  if (is_none(axv)) {
    /* all axes, innermost first */
    LVal *r = x;
    IrValue *cur = v;
    for (int d = rank - 1; d >= 0; d--) {
      r = reduce_value(L, bi->sub, cur, d, call->loc);
      if (!r)
        return NULL;
      cur = r->v;
    }
    if (keep) {
      int shape[FA_MAX_RANK];
      for (int i = 0; i < rank; i++)
        shape[i] = 1;
      return lv_ir(L, bcast_ir(L, cur, rank, shape, call->loc));
    }
    return r;
  }
  int64_t axis;
  if (!want_int(L, axv, a[1], "the axis", &axis))
    return NULL;
  if (axis < -rank || axis >= rank)
    return lerr(L, a[1]->loc, "axis %lld is out of range for a block of rank %d", (long long)axis, rank);
  if (axis < 0)
    axis += rank;
  LVal *r = reduce_value(L, bi->sub, v, (int)axis, call->loc);
  if (r && keep)
    r = lv_ir(L, expand_at(L, r->v, (int)axis, call->loc));
  if (!r || !indices)
    return r;
  /* max(x, axis, return_indices=True): the values and their indices */
  LVal *t = lv_tuple(L, 2), *i = t ? arg_index(L, v, (int)axis, bi->sub == RED_MAX, first, keep, call->loc) : NULL;
  if (!i)
    return NULL;
  t->elems[0] = r;
  t->elems[1] = i;
  return t;
}

/* where(c, x, y): promotion of x and y, broadcasting of all three. */
static LVal *where_values(Lower *L, LVal *c, LVal *x, LVal *y, SrcLoc cloc, SrcLoc loc) {
  if (c->kind == LV_CONST && x->kind == LV_CONST && y->kind == LV_CONST)
    return fa_const_truth(c->c) ? x : y;
  IrValue *vc = to_bool_ir(L, c, cloc), *vx, *vy;
  if (!vc || unify(L, OPC_SELECT, x, y, "where", loc, &vx, &vy) == DT_VOID)
    return NULL;
  int rank, shape[FA_MAX_RANK];
  if (!fa_broadcast_shapes(vc->type.rank, vc->type.shape, vx->type.rank, vx->type.shape, &rank, shape))
    return lerr(L, loc, "the condition of shape %s does not fit values of shape %s",
                fa_shape_str(L->A, vc->type.rank, vc->type.shape), fa_shape_str(L->A, vx->type.rank, vx->type.shape));
  vc = bcast_ir(L, vc, rank, shape, loc);
  vx = vc ? bcast_ir(L, vx, rank, shape, loc) : NULL;
  vy = vx ? bcast_ir(L, vy, rank, shape, loc) : NULL;
  if (!vy)
    return NULL;
  IrValue *ops[3] = {vc, vx, vy};
  return lv_ir(L, emit1(L, IR_SELECT, 0, loc, vx->type, ops, 3));
}

static LVal *b_where(Lower *L, const Builtin *bi, const Node *call, const Node **a) {
  (void)bi;
  LVal *c = eval(L, a[0]);
  LVal *x = c ? eval(L, a[1]) : NULL;
  LVal *y = x ? eval(L, a[2]) : NULL;
  if (!y)
    return NULL;
  return where_values(L, c, x, y, a[0]->loc, call->loc);
}

static LVal *b_cdiv(Lower *L, const Builtin *bi, const Node *call, const Node **a) {
  (void)bi;
  LVal *x = eval(L, a[0]);
  LVal *y = x ? eval(L, a[1]) : NULL;
  if (!y)
    return NULL;
  if (x->kind == LV_CONST && y->kind == LV_CONST) {
    FaConst r;
    const char *why;
    if (!fa_const_cdiv(x->c, y->c, &r, &why))
      return lerr(L, call->loc, "%s", why);
    return lv_const(L, r);
  }
  for (int i = 0; i < 2; i++) {
    LVal *v = i ? y : x;
    bool ok = (is_num_const(v) && v->c.kind != CK_FLOAT) || (is_data(v) && fa_dtype_is_int(v->v->type.dtype));
    if (!ok)
      return lerr(L, a[i]->loc, "cdiv() needs integers, got %s", describe(L, v));
  }
  LVal *one = lv_const(L, fa_const_int(1));
  LVal *t = binop(L, OP_ADD, x, y, call->loc);
  t = binop(L, OP_SUB, t, one, call->loc);
  return binop(L, OP_FLOORDIV, t, y, call->loc);
}

static LVal *b_static_assert(Lower *L, const Builtin *bi, const Node *call, const Node **a) {
  (void)bi;
  LVal *c = eval(L, a[0]);
  if (!c)
    return NULL;
  if (c->kind != LV_CONST)
    return lerr(L, a[0]->loc, "static_assert() needs a compile-time condition, got %s", describe(L, c));
  if (fa_const_truth(c->c))
    return lv_none(L);
  if (a[1]) {
    LVal *m = eval(L, a[1]);
    if (!m)
      return NULL;
    if (m->kind == LV_CONST && m->c.kind == CK_STR)
      return lerr(L, call->loc, "static assertion failed: %s", m->c.s);
  }
  return lerr(L, call->loc, "static assertion failed");
}

static LVal *b_device_assert(Lower *L, const Builtin *bi, const Node *call, const Node **a) {
  (void)bi;
  LVal *c = eval(L, a[0]);
  if (!c)
    return NULL;
  const char *msg = "assertion failed";
  if (a[1]) {
    LVal *m = eval(L, a[1]);
    if (!m)
      return NULL;
    if (m->kind != LV_CONST || m->c.kind != CK_STR)
      return lerr(L, a[1]->loc, "device_assert() message must be a string");
    msg = m->c.s;
  }
  IrValue *v = to_bool_ir(L, c, a[0]->loc);
  if (!v)
    return NULL;
  IrOp *op = emit(L, IR_ASSERT, 0, call->loc, &v, 1, NULL, 0);
  if (!op)
    return NULL;
  op->str = msg;
  return lv_none(L);
}

static LVal *b_convert(Lower *L, const Builtin *bi, const Node *call, const Node **a) {
  (void)call;
  LVal *x = eval(L, a[0]);
  if (!x)
    return NULL;
  bool to_float = !strcmp(bi->name, "float");
  if (x->kind == LV_CONST && x->c.kind == CK_STR && to_float) {
    const char *s = x->c.s;
    if (!strcmp(s, "inf") || !strcmp(s, "+inf"))
      return lv_const(L, fa_const_float(INFINITY));
    if (!strcmp(s, "-inf"))
      return lv_const(L, fa_const_float(-INFINITY));
    if (!strcmp(s, "nan"))
      return lv_const(L, fa_const_float(NAN));
    FaConst c;
    if (fa_const_parse(s, &c) && fa_const_is_number(c))
      return lv_const(L, fa_const_float(fa_const_as_double(c)));
    return lerr(L, a[0]->loc, "float() cannot convert the string \"%s\"", s);
  }
  if (!is_num_const(x))
    return lerr(L, a[0]->loc, "%s() converts compile-time numbers; use .to(%s) for runtime values, got %s", bi->name,
                to_float ? "f32" : "i32", describe(L, x));
  if (to_float)
    return lv_const(L, fa_const_float(fa_const_as_double(x->c)));
  if (x->c.kind == CK_FLOAT) {
    if (!(x->c.f > -9.2e18 && x->c.f < 9.2e18))
      return lerr(L, a[0]->loc, "int() of %g is out of range", x->c.f);
    return lv_const(L, fa_const_int((int64_t)x->c.f));
  }
  return lv_const(L, fa_const_int(x->c.i));
}

static LVal *b_len(Lower *L, const Builtin *bi, const Node *call, const Node **a) {
  (void)bi;
  (void)call;
  LVal *x = eval(L, a[0]);
  if (!x)
    return NULL;
  if (x->kind == LV_TUPLE)
    return lv_const(L, fa_const_int(x->n));
  if (x->kind == LV_CONST && x->c.kind == CK_STR)
    return lv_const(L, fa_const_int((int64_t)strlen(x->c.s)));
  return lerr(L, a[0]->loc, "len() needs a tuple, got %s", describe(L, x));
}

/* x.to(dtype) and cast(x, dtype) */
static LVal *convert_to(Lower *L, LVal *x, const Node *ndt, SrcLoc loc) {
  DType dt;
  if (!x || !want_dtype(L, eval(L, ndt), ndt, "the target dtype", &dt))
    return NULL;
  if (!is_num_const(x) && !is_data(x))
    return lerr(L, loc, "cannot convert %s to %s", describe(L, x), fa_dtype_name(dt));
  if (is_data(x) && dt == DT_I1 && x->v->type.dtype != DT_I1)
    return lv_ir(L, to_bool_ir(L, x, loc));
  return lv_ir(L, to_ir(L, x, dt, loc));
}

static LVal *b_cast(Lower *L, const Builtin *bi, const Node *call, const Node **a) {
  (void)bi;
  return convert_to(L, eval(L, a[0]), a[1], call->loc);
}

static bool want_flag(Lower *L, const Node *n, const char *what, bool dflt, bool *out);

static LVal *b_reshape(Lower *L, const Builtin *bi, const Node *call, const Node **a) {
  LVal *x = eval(L, a[0]);
  if (!x)
    return NULL;
  if (!is_data(x))
    return lerr(L, a[0]->loc, "%s() needs a block, got %s", bi->name, describe(L, x));
  IrType t = x->v->type;
  if (!strcmp(bi->name, "expand_dims")) {
    int64_t axis;
    if (!want_int(L, eval(L, a[1]), a[1], "the axis", &axis))
      return NULL;
    if (axis < 0)
      axis += t.rank + 1;
    if (axis < 0 || axis > t.rank || t.rank >= FA_MAX_RANK)
      return lerr(L, a[1]->loc, "expand_dims(): axis is out of range for a block of rank %d", t.rank);
    if (t.rank == 0) {
      int one[1] = {1};
      return lv_ir(L, bcast_ir(L, x->v, 1, one, call->loc));
    }
    IrType r = t;
    for (int d = r.rank; d > axis; d--)
      r.shape[d] = r.shape[d - 1];
    r.shape[axis] = 1;
    r.rank++;
    IrOp *op = emit(L, IR_EXPAND_DIMS, 0, call->loc, &x->v, 1, &r, 1);
    if (!op)
      return NULL;
    op->axis = (int)axis;
    return lv_ir(L, op->results[0]);
  }
  int rank, shape[FA_MAX_RANK];
  if (!want_shape(L, a[1], fa_arena_printf(L->A, "%s() shape", bi->name), &rank, shape))
    return NULL;
  bool reorder; /* reshape(can_reorder=True) may reorder; this one never does */
  if (!strcmp(bi->name, "reshape") && !want_flag(L, a[2], "can_reorder", false, &reorder))
    return NULL;
  IrType r = fa_type_block(t.dtype, rank, shape);
  if (!strcmp(bi->name, "broadcast_to")) {
    int r2, s2[FA_MAX_RANK];
    bool ok = fa_broadcast_shapes(t.rank, t.shape, rank, shape, &r2, s2) && r2 == rank;
    for (int i = 0; ok && i < rank; i++)
      ok = s2[i] == shape[i];
    if (!ok)
      return lerr(L, call->loc, "broadcast_to(): shape %s cannot be broadcast to %s",
                  fa_shape_str(L->A, t.rank, t.shape), fa_shape_str(L->A, rank, shape));
    return lv_ir(L, bcast_ir(L, x->v, rank, shape, call->loc));
  }
  if (fa_type_numel(r) != fa_type_numel(t))
    return lerr(L, call->loc, "reshape(): %s and %s have different numbers of elements",
                fa_shape_str(L->A, t.rank, t.shape), fa_shape_str(L->A, rank, shape));
  if (t.rank == 0)
    return lv_ir(L, bcast_ir(L, x->v, rank, shape, call->loc));
  return lv_ir(L, emit1(L, IR_RESHAPE, 0, call->loc, r, &x->v, 1));
}

/* ---- builtins of the scan, index and random families --------------------------------------------- */

/* A compile-time axis of a block of rank `rank` (negative counts from the end). */
static bool want_axis(Lower *L, const Node *n, int rank, int *out) {
  int64_t axis;
  if (!want_int(L, eval(L, n), n, "the axis", &axis))
    return false;
  if (axis < -rank || axis >= rank) {
    lerr(L, n->loc, "axis %lld is out of range for a block of rank %d", (long long)axis, rank);
    return false;
  }
  *out = (int)(axis < 0 ? axis + rank : axis);
  return true;
}

/* A compile-time bool (True / False, or 0 / 1); `dflt` when the argument is absent. */
static bool want_flag(Lower *L, const Node *n, const char *what, bool dflt, bool *out) {
  *out = dflt;
  if (!n)
    return true;
  LVal *v = eval(L, n);
  if (!v)
    return false;
  if (v->kind != LV_CONST || (v->c.kind != CK_BOOL && v->c.kind != CK_INT)) {
    lerr(L, n->loc, "%s must be True or False, got %s", what, describe(L, v));
    return false;
  }
  *out = v->c.i != 0;
  return true;
}

/* A block operand (rank >= 1) of a builtin. */
static LVal *want_block(Lower *L, const char *fname, const Node *n) {
  LVal *x = eval(L, n);
  if (!x)
    return NULL;
  if (!is_data(x) || x->v->type.rank == 0)
    return lerr(L, n->loc, "%s() needs a block, got %s", fname, describe(L, x));
  return x;
}

/* fma(x, y, z) = x * y + z rounded once; three operands promoted and broadcast together. */
static LVal *b_fma(Lower *L, const Builtin *bi, const Node *call, const Node **a) {
  (void)bi;
  LVal *v[3];
  for (int i = 0; i < 3; i++)
    if (!(v[i] = eval(L, a[i])))
      return NULL;
  if (is_num_const(v[0]) && is_num_const(v[1]) && is_num_const(v[2])) {
    bool ints = v[0]->c.kind != CK_FLOAT && v[1]->c.kind != CK_FLOAT && v[2]->c.kind != CK_FLOAT;
    if (ints) {
      LVal *p = binop(L, OP_MUL, v[0], v[1], call->loc);
      return p ? binop(L, OP_ADD, p, v[2], call->loc) : NULL;
    }
    return lv_const(L, fa_const_float(fma(fa_const_as_double(v[0]->c), fa_const_as_double(v[1]->c),
                                          fa_const_as_double(v[2]->c))));
  }
  IrValue *x, *y, *z, *w;
  /* the dtype and shape of all three: x with y, then that with z */
  if (unify(L, OPC_ARITH, v[0], v[1], "fma", call->loc, &x, &y) == DT_VOID)
    return NULL;
  LVal *xy = lv_ir(L, x);
  if (!xy || unify(L, OPC_ARITH, xy, v[2], "fma", call->loc, &w, &z) == DT_VOID)
    return NULL;
  IrType t = w->type;
  x = bcast_ir(L, cast_ir(L, x, t.dtype, call->loc), t.rank, t.shape, call->loc);
  y = x ? bcast_ir(L, cast_ir(L, y, t.dtype, call->loc), t.rank, t.shape, call->loc) : NULL;
  if (!y)
    return NULL;
  IrValue *ops[3] = {x, y, z};
  return lv_ir(L, emit1(L, IR_FMA, 0, call->loc, t, ops, 3));
}

/* propagate_nan="all" (NaN in an operand gives NaN) or "none" (a NaN operand
 * is ignored: IEEE maxNum / minNum). */
static bool want_propagate_nan(Lower *L, const Node *n, bool dflt_all, bool *all) {
  *all = dflt_all;
  if (!n)
    return true;
  LVal *v = eval(L, n);
  if (!v)
    return false;
  bool is_str = v->kind == LV_CONST && v->c.kind == CK_STR;
  if (is_str && !strcmp(v->c.s, "all"))
    *all = true;
  else if (is_str && !strcmp(v->c.s, "none"))
    *all = false;
  else if (!is_none(v)) {
    lerr(L, n->loc, "propagate_nan must be \"all\" or \"none\", got %s", describe(L, v));
    return false;
  }
  return true;
}

static IrValue *minmax_ir(Lower *L, bool is_max, bool nan_all, IrValue *x, IrValue *y, SrcLoc loc) {
  int sub = is_max ? BIN_MAX : BIN_MIN;
  if (!nan_all && fa_dtype_is_float(x->type.dtype))
    sub = is_max ? BIN_MAXNUM : BIN_MINNUM;
  IrValue *ops[2] = {x, y};
  return emit1(L, IR_BINARY, sub, loc, x->type, ops, 2);
}

/* clamp(x, min, max, propagate_nan): minimum(maximum(x, min), max) after
 * promotion and broadcasting; by default (as Triton) a NaN x gives min. */
static LVal *b_clamp(Lower *L, const Builtin *bi, const Node *call, const Node **a) {
  (void)bi;
  LVal *v[3];
  for (int i = 0; i < 3; i++)
    if (!(v[i] = eval(L, a[i])))
      return NULL;
  bool nan_all;
  if (!want_propagate_nan(L, a[3], false, &nan_all))
    return NULL;
  if (is_num_const(v[0]) && is_num_const(v[1]) && is_num_const(v[2])) {
    FaConst lt;
    const char *why;
    LVal *r = v[0];
    if (!fa_const_binary(OP_LT, r->c, v[1]->c, &lt, &why))
      return lerr(L, call->loc, "%s", why);
    if (lt.i)
      r = v[1];
    if (!fa_const_binary(OP_LT, v[2]->c, r->c, &lt, &why))
      return lerr(L, call->loc, "%s", why);
    return lt.i ? v[2] : r;
  }
  IrValue *x, *lo, *t, *hi;
  if (unify(L, OPC_ARITH, v[0], v[1], "clamp", call->loc, &x, &lo) == DT_VOID)
    return NULL;
  LVal *xl = lv_ir(L, x);
  if (!xl || unify(L, OPC_ARITH, xl, v[2], "clamp", call->loc, &t, &hi) == DT_VOID)
    return NULL;
  IrType rt = t->type;
  x = t;
  lo = bcast_ir(L, cast_ir(L, lo, rt.dtype, call->loc), rt.rank, rt.shape, call->loc);
  IrValue *m = lo ? minmax_ir(L, true, nan_all, x, lo, call->loc) : NULL;
  return m ? lv_ir(L, minmax_ir(L, false, nan_all, m, hi, call->loc)) : NULL;
}

/* An IR_SCAN or IR_REDUCE_FN of n values along axis; its combine region is
 * empty (the caller fills it and ends it with a yield).  The region's
 * arguments are args[0..2n). */
static IrOp *new_scan(Lower *L, IrOpKind kind, IrValue **xs, int n, int axis, bool reverse, SrcLoc loc,
                      IrRegion **region) {
  IrRegion *c = fa_ir_region_new(L->b.fn);
  if (!c)
    return oom(L), NULL;
  for (int h = 0; h < 2; h++)
    for (int k = 0; k < n; k++)
      if (!fa_ir_region_add_arg(L->b.fn, c, fa_type_scalar(xs[k]->type.dtype), h ? "b" : "a", loc))
        return oom(L), NULL;
  IrType types[MAX_SCAN_VALUES];
  for (int k = 0; k < n; k++) {
    types[k] = xs[k]->type;
    if (kind == IR_REDUCE_FN) {
      for (int d = axis; d + 1 < types[k].rank; d++)
        types[k].shape[d] = types[k].shape[d + 1];
      types[k].rank--;
    }
  }
  IrOp *op = emit(L, kind, 0, loc, xs, n, types, n);
  if (!op)
    return NULL;
  op->axis = axis;
  op->ival = reverse;
  op->regions[0] = c;
  op->nregions = 1;
  c->parent_op = op;
  *region = c;
  return op;
}

/* cumsum(input, axis=0, reverse=False, dtype=None) / cumprod(input, axis=0, reverse=False):
 * a scan with + or *; i1 becomes i32, f16 / bf16 accumulate in f32 and each
 * result is rounded once. */
static LVal *b_cumulative(Lower *L, const Builtin *bi, const Node *call, const Node **a) {
  LVal *x = want_block(L, bi->name, a[0]);
  if (!x)
    return NULL;
  IrValue *v = x->v;
  int axis = 0;
  bool reverse;
  if ((a[1] && !want_axis(L, a[1], v->type.rank, &axis)) || !want_flag(L, a[2], "reverse", false, &reverse))
    return NULL;
  if (bi->sub == BIN_ADD && a[3]) {
    LVal *dv = eval(L, a[3]);
    DType dt;
    if (!dv)
      return NULL;
    if (!is_none(dv)) {
      if (!want_dtype(L, dv, a[3], "dtype", &dt))
        return NULL;
      if (!(v = cast_ir(L, v, dt, call->loc)))
        return NULL;
    }
  }
  DType out = v->type.dtype == DT_I1 ? DT_I32 : v->type.dtype;
  DType acc = out == DT_F16 || out == DT_BF16 ? DT_F32 : out;
  if (!(v = cast_ir(L, v, acc, call->loc)))
    return NULL;
  IrRegion *c;
  IrOp *op = new_scan(L, IR_SCAN, &v, 1, axis, reverse, call->loc, &c);
  if (!op)
    return NULL;
  IrRegion *outer = L->b.region;
  L->b.region = c;
  IrValue *ops[2] = {c->args[0], c->args[1]};
  IrValue *r = emit1(L, IR_BINARY, bi->sub, call->loc, fa_type_scalar(acc), ops, 2);
  bool ok = r && emit(L, IR_YIELD, 0, call->loc, &r, 1, NULL, 0);
  L->b.region = outer;
  if (!ok)
    return NULL;
  return lv_ir(L, cast_ir(L, op->results[0], out, call->loc));
}

/* Ops a combine function may contain: computations on its scalar arguments. */
static const IrOp *foreign_op(const IrRegion *r) {
  for (const IrOp *op = r->first; op; op = op->next) {
    switch (op->kind) {
    case IR_CONST: case IR_CAST: case IR_UNARY: case IR_BINARY: case IR_CMP: case IR_SELECT: case IR_FMA:
    case IR_YIELD:
      break;
    case IR_IF:
      for (int i = 0; i < op->nregions; i++) {
        const IrOp *f = foreign_op(op->regions[i]);
        if (f)
          return f;
      }
      break;
    default: return op;
    }
    for (int i = 0; i < op->noperands; i++)
      if (op->operands[i]->type.rank != 0)
        return op;
  }
  return NULL;
}

/* The combine function's result for operand k, as a scalar of dtype dt. */
static IrValue *combine_result(Lower *L, LVal *v, DType dt, int k, SrcLoc loc) {
  if (is_num_const(v))
    return const_ir(L, v->c, fa_type_scalar(dt), loc);
  if (is_data(v) && v->v->type.rank == 0 && v->v->type.dtype == dt)
    return v->v;
  lerr(L, loc, "the combine function must return a scalar of dtype %s (the dtype of operand %d), got %s",
       fa_dtype_name(dt), k, describe(L, v));
  return NULL;
}

/* The blocks of a scan or reduction: one block, or a tuple of blocks of one shape. */
static int combine_inputs(Lower *L, const char *fname, LVal *in, const Node *at, IrValue **xs, bool *tuple) {
  *tuple = in->kind == LV_TUPLE;
  int n = *tuple ? in->n : 1;
  if (n < 1 || n > MAX_SCAN_VALUES)
    return lerr(L, at->loc, "%s() takes a block or a tuple of 1 to %d blocks, got %s", fname, MAX_SCAN_VALUES,
                describe(L, in)), -1;
  for (int k = 0; k < n; k++) {
    LVal *e = *tuple ? in->elems[k] : in;
    if (!is_data(e) || e->v->type.rank == 0)
      return lerr(L, at->loc, "%s() needs blocks, got %s", fname, describe(L, e)), -1;
    xs[k] = e->v;
    if (k > 0 && (xs[k]->type.rank != xs[0]->type.rank ||
                  memcmp(xs[k]->type.shape, xs[0]->type.shape, sizeof(int) * (size_t)xs[0]->type.rank)))
      return lerr(L, at->loc, "%s(): the blocks have different shapes %s and %s", fname,
                  fa_shape_str(L->A, xs[0]->type.rank, xs[0]->type.shape),
                  fa_shape_str(L->A, xs[k]->type.rank, xs[k]->type.shape)), -1;
  }
  return n;
}

/* Lowers combine_fn(a_0, ..., a_n-1, b_0, ..., b_n-1) into the region c of a
 * scan or reduction (the arguments are c's), ending it with the yield. */
static bool lower_combine(Lower *L, const char *fname, IrRegion *c, IrValue **xs, int n, bool tuple, LVal *fn,
                          const Node *fn_at, SrcLoc loc) {
  if (fn->kind != LV_FUNC) {
    lerr(L, fn_at->loc, "%s() needs a function as combine_fn, got %s", fname, describe(L, fn));
    return false;
  }
  Node *fcall = fa_node_new(L->fc, N_CALL, loc);
  Node *callee = fcall ? tmp_name(L, fn, fn_at->loc) : NULL;
  if (!callee)
    return L->err ? false : (oom(L), false);
  fcall->lhs = callee;
  for (int i = 0; i < 2 * n; i++) {
    Node *arg = tmp_name(L, lv_ir(L, c->args[i]), fn_at->loc);
    if (!arg)
      return false;
    fa_nodelist_push(L->fc, &fcall->args, arg);
  }
  IrRegion *outer = L->b.region;
  L->b.region = c;
  LVal *r = eval(L, fcall);
  IrValue *ys[MAX_SCAN_VALUES];
  bool ok = r != NULL;
  if (ok && tuple != (r->kind == LV_TUPLE)) {
    lerr(L, fn_at->loc, "the combine function must return %s, got %s",
         tuple ? fa_arena_printf(L->A, "a tuple of %d scalars", n) : "one scalar", describe(L, r));
    ok = false;
  } else if (ok && tuple && r->n != n) {
    lerr(L, fn_at->loc, "the combine function must return a tuple of %d scalars, got %d", n, r->n);
    ok = false;
  }
  for (int k = 0; ok && k < n; k++)
    ok = (ys[k] = combine_result(L, tuple ? r->elems[k] : r, xs[k]->type.dtype, k, fn_at->loc)) != NULL;
  ok = ok && emit(L, IR_YIELD, 0, loc, ys, n, NULL, 0);
  L->b.region = outer;
  if (!ok)
    return false;
  const IrOp *bad = foreign_op(c);
  if (bad) {
    lerr(L, bad->loc, "the combine function of %s() may only compute on its scalar arguments; '%s' is not allowed "
                      "there", fname, fa_ir_op_name(bad->kind));
    return false;
  }
  return true;
}

/* The results of a scan or reduction: a value, or a tuple. */
static LVal *combine_results(Lower *L, IrOp *op, bool tuple) {
  if (!tuple)
    return lv_ir(L, op->results[0]);
  LVal *t = lv_tuple(L, op->nresults);
  for (int k = 0; t && k < op->nresults; k++)
    if (!(t->elems[k] = lv_ir(L, op->results[k])))
      return NULL;
  return t;
}

/* associative_scan(input, axis, combine_fn, reverse=False): input a block or a
 * tuple of blocks of one shape; combine_fn a helper (or builtin) taking
 * 2n scalars (the earlier values, then the later ones) and returning n. */
static LVal *b_associative_scan(Lower *L, const Builtin *bi, const Node *call, const Node **a) {
  LVal *in = eval(L, a[0]);
  IrValue *xs[MAX_SCAN_VALUES];
  bool tuple, reverse;
  int n = in ? combine_inputs(L, bi->name, in, a[0], xs, &tuple) : -1, axis;
  if (n < 0 || !want_axis(L, a[1], xs[0]->type.rank, &axis) || !want_flag(L, a[3], "reverse", false, &reverse))
    return NULL;
  LVal *fn = eval(L, a[2]);
  IrRegion *c;
  IrOp *op = fn ? new_scan(L, IR_SCAN, xs, n, axis, reverse, call->loc, &c) : NULL;
  if (!op || !lower_combine(L, bi->name, c, xs, n, tuple, fn, a[2], call->loc))
    return NULL;
  return combine_results(L, op, tuple);
}

/* A reduction with a combine region along one axis, or all (axis None:
 * innermost first); keep_dims keeps the reduced axes as size 1.  The region
 * is filled by lower_combine (fn) or holds the binary op `sub`. */
static LVal *reduce_with(Lower *L, const char *fname, IrValue **xs, int n, bool tuple, LVal *axv, const Node *axis_at,
                         bool keep, LVal *fn, const Node *fn_at, int sub, SrcLoc loc) {
  int rank = xs[0]->type.rank, axes[FA_MAX_RANK], naxes = 0;
  if (is_none(axv)) {
    for (int d = rank - 1; d >= 0; d--)
      axes[naxes++] = d;
  } else {
    int64_t ax;
    if (!want_int(L, axv, axis_at, "the axis", &ax))
      return NULL;
    if (ax < -rank || ax >= rank)
      return lerr(L, axis_at->loc, "axis %lld is out of range for a block of rank %d", (long long)ax, rank);
    axes[naxes++] = (int)(ax < 0 ? ax + rank : ax);
  }
  IrValue *cur[MAX_SCAN_VALUES];
  memcpy(cur, xs, (size_t)n * sizeof *cur);
  for (int i = 0; i < naxes; i++) {
    IrRegion *c;
    IrOp *op = new_scan(L, IR_REDUCE_FN, cur, n, axes[i], false, loc, &c);
    if (!op)
      return NULL;
    if (fn) {
      if (!lower_combine(L, fname, c, cur, n, tuple, fn, fn_at, loc))
        return NULL;
    } else {
      IrRegion *outer = L->b.region;
      L->b.region = c;
      IrValue *ops[2] = {c->args[0], c->args[1]};
      IrValue *r = emit1(L, IR_BINARY, sub, loc, fa_type_scalar(cur[0]->type.dtype), ops, 2);
      bool ok = r && emit(L, IR_YIELD, 0, loc, &r, 1, NULL, 0);
      L->b.region = outer;
      if (!ok)
        return NULL;
    }
    for (int k = 0; k < n; k++)
      cur[k] = op->results[k];
  }
  for (int k = 0; keep && k < n; k++) {
    if (naxes == 1) {
      cur[k] = expand_at(L, cur[k], axes[0], loc);
    } else {
      int shape[FA_MAX_RANK];
      for (int d = 0; d < rank; d++)
        shape[d] = 1;
      cur[k] = bcast_ir(L, cur[k], rank, shape, loc);
    }
    if (!cur[k])
      return NULL;
  }
  if (!tuple)
    return lv_ir(L, cur[0]);
  LVal *t = lv_tuple(L, n);
  for (int k = 0; t && k < n; k++)
    if (!(t->elems[k] = lv_ir(L, cur[k])))
      return NULL;
  return t;
}

/* reduce(input, axis, combine_fn, keep_dims=False), as Triton's tl.reduce. */
static LVal *b_reduce_fn(Lower *L, const Builtin *bi, const Node *call, const Node **a) {
  LVal *in = eval(L, a[0]);
  IrValue *xs[MAX_SCAN_VALUES];
  bool tuple, keep;
  int n = in ? combine_inputs(L, bi->name, in, a[0], xs, &tuple) : -1;
  LVal *axv = n > 0 ? eval(L, a[1]) : NULL;
  LVal *fn = axv ? eval(L, a[2]) : NULL;
  if (!fn || !want_flag(L, a[3], "keep_dims", false, &keep))
    return NULL;
  return reduce_with(L, bi->name, xs, n, tuple, axv, a[1], keep, fn, a[2], 0, call->loc);
}

/* xor_sum(input, axis=None, keep_dims=False): the exclusive or of integers. */
static LVal *b_xor_sum(Lower *L, const Builtin *bi, const Node *call, const Node **a) {
  LVal *x = want_block(L, bi->name, a[0]);
  bool keep;
  if (!x || !want_flag(L, a[2], "keep_dims", false, &keep))
    return NULL;
  IrValue *v = x->v;
  if (!fa_dtype_is_int(v->type.dtype))
    return lerr(L, a[0]->loc, "xor_sum() needs integers, got %s", describe(L, x));
  LVal *axv = eval_opt(L, a[1]);
  return axv ? reduce_with(L, bi->name, &v, 1, false, axv, a[1], keep, NULL, NULL, BIN_XOR, call->loc) : NULL;
}

/* Inserts a size-1 dimension at axis (a scalar becomes a block of one). */
static IrValue *expand_at(Lower *L, IrValue *v, int axis, SrcLoc loc) {
  IrType t = v->type;
  if (t.rank == 0)
    return bcast_ir(L, v, 1, (int[]){1}, loc);
  for (int d = t.rank; d > axis; d--)
    t.shape[d] = t.shape[d - 1];
  t.shape[axis] = 1;
  t.rank++;
  IrOp *op = emit(L, IR_EXPAND_DIMS, 0, loc, &v, 1, &t, 1);
  if (!op)
    return NULL;
  op->axis = axis;
  return op->results[0];
}

/* argmax / argmin(input, axis, tie_break_left=True, keep_dims=False): the
 * first (tie_break_left=False: the last) index along axis where the maximum
 * (minimum) is, as i32; NaN counts as larger (smaller) than every number, as
 * in max / min.  Lowered as the reduction, a comparison with its broadcast
 * result and a min (max) reduction of the matching indices. */
/* The index part of argmax / argmin (and max(return_indices=True)) of v along axis. */
static LVal *arg_index(Lower *L, IrValue *v, int axis, bool is_max, bool first, bool keep, SrcLoc loc) {
  IrType t = v->type;
  if (t.dtype == DT_I1 && !(v = cast_ir(L, v, DT_I32, loc)))
    return NULL;
  t = v->type;
  LVal *m = reduce_value(L, is_max ? RED_MAX : RED_MIN, v, axis, loc);
  IrValue *mb = m ? expand_at(L, m->v, axis, loc) : NULL;
  if (!(mb = mb ? bcast_ir(L, mb, t.rank, t.shape, loc) : NULL))
    return NULL;
  IrType bt = same_shape_type(t, DT_I1);
  IrValue *ops[2] = {v, mb};
  IrValue *hit = emit1(L, IR_CMP, CMP_EQ, loc, bt, ops, 2);
  if (hit && fa_dtype_is_float(t.dtype)) {
    /* the maximum is NaN where the input has one: those positions match */
    IrValue *vn_ops[2] = {v, v}, *mn_ops[2] = {mb, mb};
    IrValue *vn = emit1(L, IR_CMP, CMP_NE, loc, bt, vn_ops, 2);
    IrValue *mn = vn ? emit1(L, IR_CMP, CMP_NE, loc, bt, mn_ops, 2) : NULL;
    IrValue *both_ops[2] = {vn, mn}, *both = mn ? emit1(L, IR_BINARY, BIN_AND, loc, bt, both_ops, 2) : NULL;
    IrValue *or_ops[2] = {hit, both};
    hit = both ? emit1(L, IR_BINARY, BIN_OR, loc, bt, or_ops, 2) : NULL;
  }
  if (!hit)
    return NULL;
  int len = t.shape[axis];
  IrOp *ar = emit(L, IR_ARANGE, 0, loc, NULL, 0, &(IrType){DT_I32, DT_VOID, 1, {len}}, 1);
  if (!ar)
    return NULL;
  ar->ival = 0;
  ar->ival2 = len;
  IrValue *idx = ar->results[0];
  for (int d = 0; idx && d < t.rank; d++)
    if (d != axis)
      idx = expand_at(L, idx, d, loc);
  IrType it = same_shape_type(t, DT_I32);
  idx = idx ? bcast_ir(L, idx, it.rank, it.shape, loc) : NULL;
  IrValue *none = const_ir(L, fa_const_int(first ? len : -1), it, loc);
  if (!idx || !none)
    return NULL;
  IrValue *sel_ops[3] = {hit, idx, none};
  IrValue *cand = emit1(L, IR_SELECT, 0, loc, it, sel_ops, 3);
  LVal *r = cand ? reduce_value(L, first ? RED_MIN : RED_MAX, cand, axis, loc) : NULL;
  if (!r || !keep)
    return r;
  return lv_ir(L, expand_at(L, r->v, axis, loc));
}

/* argmax / argmin(input, axis, tie_break_left=True, keep_dims=False): the
 * first (tie_break_left=False: the last) index along axis where the maximum
 * (minimum) is, as i32; NaN counts as larger (smaller) than every number, as
 * in max / min.  Lowered as the reduction, a comparison with its broadcast
 * result and a min (max) reduction of the matching indices. */
static LVal *b_argmax(Lower *L, const Builtin *bi, const Node *call, const Node **a) {
  LVal *x = want_block(L, bi->name, a[0]);
  if (!x)
    return NULL;
  int axis;
  bool first, keep;
  if (!want_axis(L, a[1], x->v->type.rank, &axis) || !want_flag(L, a[2], "tie_break_left", true, &first) ||
      !want_flag(L, a[3], "keep_dims", false, &keep))
    return NULL;
  return arg_index(L, x->v, axis, bi->sub == RED_MAX, first, keep, call->loc);
}

/* rand / randn(seed, offset, n_rounds=10): Philox 4x32 on the counter
 * (offset, 0, 0, 0) with the key (seed & 0xffffffff, seed >> 32); f32 of the
 * offsets' shape.  The seed is an integer scalar (i32 seeds are sign-extended
 * to 64 bits); the offsets are i32 integers (i1, i8, i16 are widened). */
static LVal *b_rand(Lower *L, const Builtin *bi, const Node *call, const Node **a) {
  LVal *seed = eval(L, a[0]);
  LVal *off = seed ? eval(L, a[1]) : NULL;
  if (!off)
    return NULL;
  bool seed_ok = (is_num_const(seed) && seed->c.kind != CK_FLOAT) ||
                 (is_data(seed) && seed->v->type.rank == 0 && fa_dtype_is_int(seed->v->type.dtype));
  if (!seed_ok)
    return lerr(L, a[0]->loc, "%s() needs an integer scalar as its seed, got %s", bi->name, describe(L, seed));
  bool off_ok = (is_num_const(off) && off->c.kind != CK_FLOAT) || (is_data(off) && fa_dtype_is_int(off->v->type.dtype));
  if (!off_ok)
    return lerr(L, a[1]->loc, "%s() needs integer offsets, got %s", bi->name, describe(L, off));
  if (is_data(off) && off->v->type.dtype == DT_I64)
    return lerr(L, a[1]->loc, "%s() takes i32 offsets (a 32-bit Philox counter); got i64 offsets", bi->name);
  int64_t rounds = 10;
  if (a[2] && !want_int(L, eval(L, a[2]), a[2], "n_rounds", &rounds))
    return NULL;
  if (rounds < 1 || rounds > 64)
    return lerr(L, a[2]->loc, "n_rounds must be from 1 to 64, got %lld", (long long)rounds);
  IrValue *sv = to_ir(L, seed, DT_I64, a[0]->loc);
  IrValue *ov = sv ? to_ir(L, off, DT_I32, a[1]->loc) : NULL;
  if (!ov)
    return NULL;
  IrValue *ops[2] = {sv, ov};
  IrType rt = same_shape_type(ov->type, DT_F32);
  IrOp *op = emit(L, IR_RAND, bi->sub, call->loc, ops, 2, &rt, 1);
  if (!op)
    return NULL;
  op->ival = rounds;
  return lv_ir(L, op->results[0]);
}

/* device_print(prefix, *args, hex=False): prints every element of each
 * argument with its program and index (blocks are broadcast to one shape). */
static LVal *b_device_print(Lower *L, const Builtin *bi, const Node *call, const Node **a) {
  (void)bi;
  LVal *pv = eval(L, a[0]);
  if (!pv)
    return NULL;
  if (pv->kind != LV_CONST || pv->c.kind != CK_STR)
    return lerr(L, a[0]->loc, "device_print() needs a string as its prefix, got %s", describe(L, pv));
  bool hex;
  if (!want_flag(L, a[2], "hex", false, &hex))
    return NULL;
  LVal *args = a[1] ? eval(L, a[1]) : NULL;
  if (a[1] && !args)
    return NULL;
  int n = !args ? 0 : args->kind == LV_TUPLE ? args->n : 1;
  if (n > 32)
    return lerr(L, call->loc, "device_print() prints at most 32 values at once, got %d", n);
  IrValue *vs[32];
  int rank = 0, shape[FA_MAX_RANK];
  for (int k = 0; k < n; k++) {
    LVal *e = args->kind == LV_TUPLE ? args->elems[k] : args;
    if (!is_num_const(e) && !is_data(e))
      return lerr(L, a[1]->loc, "device_print() prints numbers and blocks, got %s", describe(L, e));
    if (!(vs[k] = to_ir(L, e, DT_VOID, a[1]->loc)))
      return NULL;
    IrType t = vs[k]->type;
    if (t.rank > 0 && !fa_broadcast_shapes(rank, shape, t.rank, t.shape, &rank, shape))
      return lerr(L, a[1]->loc, "device_print(): the blocks have incompatible shapes");
  }
  for (int k = 0; k < n; k++)
    if (vs[k]->type.rank > 0 && !(vs[k] = bcast_ir(L, vs[k], rank, shape, call->loc)))
      return NULL;
  /* "x", "x:" and "x: " all print as "x: value" */
  size_t len = strlen(pv->c.s);
  char *prefix = fa_arena_strdup(L->A, pv->c.s);
  if (!prefix)
    return oom(L);
  while (len > 0 && prefix[len - 1] == ' ')
    prefix[--len] = '\0';
  if (len > 0 && prefix[len - 1] == ':')
    prefix[--len] = '\0';
  IrOp *op = emit(L, IR_PRINT, 0, call->loc, vs, n, NULL, 0);
  if (!op)
    return NULL;
  op->str = prefix;
  op->ival = hex;
  return lv_none(L);
}

/* permute(x, dims) and trans(x, dims): result dimension i is x's dims[i]; trans
 * without dims swaps the two dimensions of a 2-D block. */
static LVal *b_permute(Lower *L, const Builtin *bi, const Node *call, const Node **a) {
  LVal *x = eval(L, a[0]);
  if (!x)
    return NULL;
  if (!a[1] && !strcmp(bi->name, "trans"))
    return trans_value(L, x, call->loc);
  if (!is_data(x) || x->v->type.rank == 0)
    return lerr(L, a[0]->loc, "%s() needs a block, got %s", bi->name, describe(L, x));
  IrType t = x->v->type;
  int64_t dims[FA_MAX_RANK + 1];
  LVal *dv = eval(L, a[1]);
  int n = want_int_tuple(L, dv, a[1], "the dimensions", dims, FA_MAX_RANK, true);
  if (n < 0)
    return NULL;
  unsigned seen = 0;
  bool ok = n == t.rank;
  for (int i = 0; ok && i < n; i++) {
    if (dims[i] < 0)
      dims[i] += t.rank;
    ok = dims[i] >= 0 && dims[i] < t.rank && !(seen & (1u << dims[i]));
    if (ok)
      seen |= 1u << dims[i];
  }
  if (!ok)
    return lerr(L, a[1]->loc, "%s(): the dimensions must be a permutation of 0..%d for a block of rank %d", bi->name,
                t.rank - 1, t.rank);
  IrType r = t;
  bool identity = true;
  for (int i = 0; i < n; i++) {
    r.shape[i] = t.shape[dims[i]];
    identity = identity && dims[i] == i;
  }
  if (identity)
    return x;
  IrOp *op = emit(L, IR_TRANS, 0, call->loc, &x->v, 1, &r, 1);
  if (!op)
    return NULL;
  for (int i = 0; i < n; i++)
    op->perm[i] = (int)dims[i];
  return lv_ir(L, op->results[0]);
}

/* ravel(x): the elements as a 1-D block, in row-major order. */
static LVal *b_ravel(Lower *L, const Builtin *bi, const Node *call, const Node **a) {
  LVal *x = want_block(L, bi->name, a[0]);
  if (!x)
    return NULL;
  IrType t = x->v->type;
  if (t.rank == 1)
    return x;
  int n = (int)fa_type_numel(t);
  return lv_ir(L, emit1(L, IR_RESHAPE, 0, call->loc, fa_type_block(t.dtype, 1, &n), &x->v, 1));
}

static LVal *b_range(Lower *L, const Builtin *bi, const Node *call, const Node **a) {
  (void)a;
  return lerr(L, call->loc, "%s() can only be the iterable of a 'for' loop", bi->name);
}

#define P(...) {__VA_ARGS__, NULL}
static const Builtin builtins[] = {
    {"program_id", b_program_id, 1, false, IR_PROGRAM_ID, P("axis"), 0},
    {"num_programs", b_program_id, 1, false, IR_NUM_PROGRAMS, P("axis"), 0},
    {"arange", b_arange, 2, false, 0, P("start", "end"), 0},
    {"zeros", b_full, 2, false, 0, P("shape", "dtype"), 0},
    {"full", b_full, 3, false, 0, P("shape", "value", "dtype"), 0},
    {"make_block_ptr", b_make_block_ptr, 6, false, 0,
     P("base", "shape", "strides", "offsets", "block_shape", "order"), 0},
    {"advance", b_advance, 2, false, 0, P("base", "offsets"), 0},
    {"load", b_load, 1, false, 0, P("pointer", "mask", "other", "boundary_check", "padding"), 0},
    {"store", b_store, 2, false, 0, P("pointer", "value", "mask", "boundary_check"), 0},
    {"atomic_add", b_store, 2, false, 0, P("pointer", "val", "mask", "boundary_check"), 0},
    {"dot", b_dot, 2, false, 0, P("a", "b", "acc", "out_dtype", "precision"), 0},
    {"trans", b_permute, 1, false, 0, P("x", "dims"), 1},
    {"permute", b_permute, 2, false, 0, P("input", "dims"), 1},
    {"exp", b_math, 1, true, UN_EXP, P("x"), 0},
    {"exp2", b_math, 1, true, UN_EXP2, P("x"), 0},
    {"log", b_math, 1, true, UN_LOG, P("x"), 0},
    {"log2", b_math, 1, true, UN_LOG2, P("x"), 0},
    {"sqrt", b_math, 1, true, UN_SQRT, P("x"), 0},
    {"rsqrt", b_math, 1, true, UN_RSQRT, P("x"), 0},
    {"abs", b_math, 1, true, UN_ABS, P("x"), 0},
    {"sin", b_math, 1, true, UN_SIN, P("x"), 0},
    {"cos", b_math, 1, true, UN_COS, P("x"), 0},
    {"floor", b_math, 1, true, UN_FLOOR, P("x"), 0},
    {"ceil", b_math, 1, true, UN_CEIL, P("x"), 0},
    {"sigmoid", b_math, 1, true, UN_SIGMOID, P("x"), 0},
    {"tanh", b_math, 1, true, UN_TANH, P("x"), 0},
    {"tanh_approx", b_math, 1, true, UN_TANH_APPROX, P("x"), 0},
    {"erf", b_math, 1, true, UN_ERF, P("x"), 0},
    {"fma", b_fma, 3, true, 0, P("x", "y", "z"), 0},
    {"clamp", b_clamp, 3, true, 0, P("x", "min", "max", "propagate_nan"), 0},
    {"maximum", b_maximum, 2, true, BIN_MAX, P("x", "y", "propagate_nan"), 0},
    {"minimum", b_maximum, 2, true, BIN_MIN, P("x", "y", "propagate_nan"), 0},
    {"max", b_reduce, 1, true, RED_MAX,
     P("input", "axis", "return_indices", "return_indices_tie_break_left", "keep_dims"), 0},
    {"min", b_reduce, 1, true, RED_MIN,
     P("input", "axis", "return_indices", "return_indices_tie_break_left", "keep_dims"), 0},
    {"sum", b_reduce, 1, false, RED_SUM, P("input", "axis", "keep_dims", "dtype"), 0},
    {"reduce", b_reduce_fn, 3, false, 0, P("input", "axis", "combine_fn", "keep_dims"), 0},
    {"xor_sum", b_xor_sum, 1, false, 0, P("input", "axis", "keep_dims"), 0},
    {"argmax", b_argmax, 2, false, RED_MAX, P("input", "axis", "tie_break_left", "keep_dims"), 0},
    {"argmin", b_argmax, 2, false, RED_MIN, P("input", "axis", "tie_break_left", "keep_dims"), 0},
    {"cumsum", b_cumulative, 1, false, BIN_ADD, P("input", "axis", "reverse", "dtype"), 0},
    {"cumprod", b_cumulative, 1, false, BIN_MUL, P("input", "axis", "reverse"), 0},
    {"associative_scan", b_associative_scan, 3, false, 0, P("input", "axis", "combine_fn", "reverse"), 0},
    {"rand", b_rand, 2, false, RAND_UNIFORM, P("seed", "offset", "n_rounds"), 0},
    {"randn", b_rand, 2, false, RAND_NORMAL, P("seed", "offset", "n_rounds"), 0},
    {"where", b_where, 3, true, 0, P("condition", "x", "y"), 0},
    {"cdiv", b_cdiv, 2, true, 0, P("x", "div"), 0},
    {"static_assert", b_static_assert, 1, true, 0, P("cond", "msg"), 0},
    {"device_assert", b_device_assert, 1, false, 0, P("cond", "msg"), 0},
    {"device_print", b_device_print, 1, false, 0, P("prefix", "args", "hex"), 1},
    {"float", b_convert, 1, true, 0, P("x"), 0},
    {"int", b_convert, 1, true, 0, P("x"), 0},
    {"len", b_len, 1, true, 0, P("x"), 0},
    {"cast", b_cast, 2, false, 0, P("x", "dtype"), 0},
    {"reshape", b_reshape, 2, false, 0, P("x", "shape", "can_reorder"), 1},
    {"ravel", b_ravel, 1, false, 0, P("x"), 0},
    {"expand_dims", b_reshape, 2, false, 0, P("x", "axis"), 0},
    {"broadcast_to", b_reshape, 2, false, 0, P("x", "shape"), 1},
    {"range", b_range, 0, true, 0, P("start", "stop", "step"), 0},
    {"static_range", b_range, 0, true, 0, P("start", "stop", "step"), 0},
};
#undef P

static const Builtin *find_builtin(const char *name) {
  for (int i = 0; i < FA_ARRAY_LEN(builtins); i++)
    if (!strcmp(builtins[i].name, name))
      return &builtins[i];
  return NULL;
}

bool fa_is_builtin_name(const char *name) { return find_builtin(name) != NULL; }

/* max(a, b, c, ...) of numbers and scalars takes any number of positional
 * arguments (and then no keywords). */
static bool builtin_is_variadic(const Builtin *bi) { return bi->fn == b_reduce && bi->sub != RED_SUM; }

bool fa_builtin_signature(const char *name, FaBuiltinSignature *out) {
  const Builtin *bi = find_builtin(name);
  if (!bi)
    return false;
  out->params = bi->params;
  out->nparams = 0;
  while (bi->params[out->nparams])
    out->nparams++;
  out->nreq = bi->nreq;
  out->variadic = builtin_is_variadic(bi);
  out->vararg = bi->vararg;
  return true;
}

static LVal *call_builtin(Lower *L, const Builtin *bi, const Node *call) {
  if (L->host && !bi->host_ok)
    return lerr(L, call->loc, "%s() cannot be used in a grid or extent expression", bi->name);
  int n = 0;
  while (bi->params[n])
    n++;
  /* (more positional arguments than parameters; b_reduce reads them all) */
  if (builtin_is_variadic(bi) && call->args.len > n && !call->kwargs.len) {
    const Node *a[MAX_BUILTIN_PARAMS] = {call->args.items[0], call->args.items[1], NULL};
    return bi->fn(L, bi, call, a);
  }
  if (bi->vararg > 0 && call->args.len > bi->vararg + 1) {
    /* f(x, 4, 8) is f(x, (4, 8)) */
    Node *c = fa_node_new(L->fc, N_CALL, call->loc);
    Node *t = c ? fa_node_new(L->fc, N_TUPLE, call->args.items[bi->vararg]->loc) : NULL;
    if (!t)
      return oom(L);
    *c = *call;
    c->args = (NodeList){0};
    for (int i = 0; i < call->args.len; i++)
      fa_nodelist_push(L->fc, i < bi->vararg ? &c->args : &t->args, call->args.items[i]);
    fa_nodelist_push(L->fc, &c->args, t);
    call = c;
  }
  const Node *a[MAX_BUILTIN_PARAMS];
  if (!bind_args(L, call, bi->name, bi->params, n, bi->nreq, a))
    return NULL;
  return bi->fn(L, bi, call, a);
}

/* Builtins that are also methods of blocks: x.sum(axis=1) is sum(x, axis=1). */
static const char *const method_names[] = {
    "sum", "max", "min", "argmax", "argmin", "cumsum", "cumprod", "associative_scan", "reduce", "xor_sum", "reshape",
    "permute",
    "trans", "broadcast_to", "expand_dims", "ravel", "abs", "exp", "exp2", "log", "log2", "sqrt", "rsqrt", "sin",
    "cos", "floor", "ceil", "sigmoid", "tanh", "tanh_approx", "erf", "fma", "cdiv",
};

static bool is_method(const char *name) {
  for (int i = 0; i < FA_ARRAY_LEN(method_names); i++)
    if (!strcmp(method_names[i], name))
      return true;
  return false;
}

bool fa_builtin_is_method(const char *name) { return is_method(name); }

/* x.NAME(args) for a method builtin: NAME(x, args), x evaluated once. */
static LVal *method_call(Lower *L, const Node *e) {
  const Node *callee = e->lhs;
  LVal *self = eval(L, callee->lhs);
  if (!self)
    return NULL;
  if (!is_data(self))
    return lerr(L, callee->loc, "'.%s()' is a method of blocks and scalars, not of %s", callee->name,
                describe(L, self));
  Node *c = fa_node_new(L->fc, N_CALL, e->loc);
  Node *x = c ? tmp_name(L, self, callee->lhs->loc) : NULL;
  if (!x)
    return L->err ? NULL : oom(L);
  *c = *e;
  c->args = (NodeList){0};
  fa_nodelist_push(L->fc, &c->args, x);
  for (int i = 0; i < e->args.len; i++)
    fa_nodelist_push(L->fc, &c->args, e->args.items[i]);
  return call_builtin(L, find_builtin(callee->name), c);
}

static LVal *eval_call(Lower *L, const Node *e) {
  const Node *callee = e->lhs;
  if (callee->kind == N_ATTR) {
    /* methods */
    if (!strcmp(callee->name, "to")) {
      LVal *x = eval(L, callee->lhs);
      if (!x)
        return NULL;
      static const char *const names[] = {"dtype"};
      const Node *a[1];
      if (!bind_args(L, e, "to", names, 1, 1, a))
        return NULL;
      return convert_to(L, x, a[0], e->loc);
    }
    if (is_method(callee->name))
      return method_call(L, e);
  }
  LVal *f = eval(L, callee);
  if (!f)
    return NULL;
  if (f->kind == LV_FUNC && f->builtin)
    return call_builtin(L, find_builtin(f->builtin), e);
  if (f->kind == LV_FUNC) {
    const Node *fn = f->fn;
    if (fa_func_is_kernel(fn))
      return lerr(L, e->loc, "'%s' is a kernel; kernels are launched from a @problem, not called from device code",
                  fn->name);
    if (fa_func_decorator(fn, "problem"))
      return lerr(L, e->loc, "'%s' is a problem description and cannot be called from device code", fn->name);
    if (L->host)
      return lerr(L, e->loc, "helper '%s' cannot be called in a grid or extent expression", fn->name);
    return inline_call(L, fn, e);
  }
  if (f->kind == LV_CONST && f->c.kind == CK_DTYPE) {
    /* f32(x): conversion */
    static const char *const names[] = {"x"};
    const Node *a[1];
    if (!bind_args(L, e, fa_dtype_name(f->c.dtype), names, 1, 1, a))
      return NULL;
    LVal *x = eval(L, a[0]);
    if (!x)
      return NULL;
    if (is_num_const(x)) {
      DType dt = f->c.dtype;
      if (dt == DT_I1)
        return lv_const(L, fa_const_bool(fa_const_truth(x->c)));
      if (fa_dtype_is_float(dt))
        return lv_const(L, fa_const_float(fa_const_as_double(x->c)));
      return lv_const(L, fa_const_int(x->c.kind == CK_FLOAT ? (int64_t)x->c.f : x->c.i));
    }
    if (!is_data(x))
      return lerr(L, a[0]->loc, "cannot convert %s to %s", describe(L, x), fa_dtype_name(f->c.dtype));
    return lv_ir(L, to_ir(L, x, f->c.dtype, e->loc));
  }
  return lerr(L, callee->loc, "%s is not callable", describe(L, f));
}

/* ---- expressions ------------------------------------------------------------------------- */

static LVal *eval(Lower *L, const Node *e) {
  if (L->err)
    return NULL;
  switch (e->kind) {
  case N_NAME:
    if (!strcmp(e->name, "..."))
      return lerr(L, e->loc, "'...' is not a value");
    return lookup(L, e->name, e->loc);
  case N_INT: return lv_const(L, fa_const_int(e->int_val));
  case N_FLOAT: return lv_const(L, fa_const_float(e->float_val));
  case N_STR: {
    FaConst c = fa_const_none();
    c.kind = CK_STR;
    c.s = e->str ? e->str : "";
    return lv_const(L, c);
  }
  case N_TRUE: return lv_const(L, fa_const_bool(true));
  case N_FALSE: return lv_const(L, fa_const_bool(false));
  case N_NONE: return lv_none(L);
  case N_UNARY: return unop(L, e->op, eval(L, e->lhs), e->loc);
  case N_BINARY: {
    LVal *a = eval(L, e->lhs);
    if (!a)
      return NULL;
    if ((e->op == OP_AND || e->op == OP_OR) && a->kind == LV_CONST) {
      bool t = fa_const_truth(a->c);
      if ((e->op == OP_AND) != t)
        return a; /* short circuit: the right side is not evaluated */
      return eval(L, e->rhs);
    }
    LVal *b = eval(L, e->rhs);
    return b ? binop(L, e->op, a, b, e->loc) : NULL;
  }
  case N_IFEXP: {
    LVal *c = eval(L, e->cond);
    if (!c)
      return NULL;
    if (c->kind == LV_CONST)
      return eval(L, fa_const_truth(c->c) ? e->then : e->els);
    if (!is_data(c) || c->v->type.rank != 0)
      return lerr(L, e->cond->loc, "the condition of 'x if c else y' must be a scalar, got %s", describe(L, c));
    LVal *x = eval(L, e->then);
    LVal *y = x ? eval(L, e->els) : NULL;
    return y ? where_values(L, c, x, y, e->cond->loc, e->loc) : NULL;
  }
  case N_CALL: return eval_call(L, e);
  case N_ATTR: return eval_attr(L, e);
  case N_SUBSCRIPT: return eval_subscript(L, e);
  case N_TUPLE:
  case N_LIST: {
    LVal *t = lv_tuple(L, e->args.len);
    for (int i = 0; t && i < e->args.len; i++)
      if (!(t->elems[i] = eval(L, e->args.items[i])))
        return NULL;
    return t;
  }
  case N_KEYWORD: return lerr(L, e->loc, "a keyword argument is not allowed here");
  case N_SLICE: return lerr(L, e->loc, "a slice is only allowed inside a subscript");
  case N_PTR_TYPE: return lerr(L, e->loc, "a pointer type is not a value");
  default: return lerr(L, e->loc, "%s is not an expression", fa_node_kind_name(e->kind));
  }
}

/* ---- assignment ---------------------------------------------------------------------------- */

static bool assign_name(Lower *L, const char *name, LVal *v, const Node *at) {
  FuncCtx *fx = L->fx;
  for (int i = 0; i < fx->nptr_params; i++) {
    const PtrParam *pp = &fx->ptr_params[i];
    if (strcmp(pp->name, name))
      continue;
    if (!is_ptr(v) || !fa_type_equal(v->v->type, pp->type)) {
      lerr(L, at->loc, "cannot assign %s to '%s', a parameter of pointer type *%s", describe(L, v), name,
           fa_dtype_name(pp->type.pointee));
      return false;
    }
  }
  if (v->kind == LV_IR && !v->v->name && v->v->def)
    v->v->name = name;
  return scope_assign(L, &fx->scope, name, v, at->loc);
}

static bool assign_target(Lower *L, const Node *t, LVal *v) {
  switch (t->kind) {
  case N_NAME:
    if (!strcmp(t->name, "..."))
      break;
    return assign_name(L, t->name, v, t);
  case N_TUPLE:
  case N_LIST:
    if (v->kind != LV_TUPLE) {
      lerr(L, t->loc, "cannot unpack %s into %d names", describe(L, v), t->args.len);
      return false;
    }
    if (v->n != t->args.len) {
      lerr(L, t->loc, "cannot unpack a tuple of %d values into %d names", v->n, t->args.len);
      return false;
    }
    for (int i = 0; i < v->n; i++)
      if (!assign_target(L, t->args.items[i], v->elems[i]))
        return false;
    return true;
  case N_SUBSCRIPT:
    lerr(L, t->loc, "assignment to a subscript is not supported; blocks are values (use where() or store())");
    return false;
  case N_ATTR:
    lerr(L, t->loc, "assignment to an attribute is not supported");
    return false;
  default:
    break;
  }
  lerr(L, t->loc, "cannot assign to %s", fa_node_kind_name(t->kind));
  return false;
}

/* A value of exactly type t from v, or NULL (no error reported). */
static IrValue *coerce_exact(Lower *L, LVal *v, IrType t, SrcLoc loc) {
  if (is_ir(v))
    return fa_type_equal(v->v->type, t) ? v->v : NULL;
  if (is_num_const(v) && t.dtype != DT_PTR && t.dtype != DT_BLOCKPTR)
    return const_ir(L, v->c, t, loc);
  return NULL;
}

/* The type a value would have as a runtime value, for if/loop merging. */
static bool runtime_type(const LVal *v, IrType *t) {
  if (is_ir(v)) {
    *t = v->v->type;
    return true;
  }
  if (is_num_const(v)) {
    *t = fa_type_scalar(fa_const_default_dtype(v->c));
    return true;
  }
  return false;
}

/* ---- control flow ---------------------------------------------------------------------------- */

/* The pseudo-variables of early returns (FuncCtx): '@' starts no source name. */
#define RETURNED_VAR "@returned"

static bool is_pseudo(const char *name) { return name[0] == '@'; }

static const char *ret_var(Lower *L, int k) { return fa_arena_printf(L->A, "@ret#%d", k); }

static bool push_frame(Lower *L, const NodeList *list, bool loop_body, const Node *cond) {
  FuncCtx *fx = L->fx;
  if (!grow(L, (void **)&fx->frames, &fx->capframes, fx->nframes + 1, sizeof(Frame)))
    return false;
  fx->frames[fx->nframes].list = list;
  fx->frames[fx->nframes].idx = 0;
  fx->frames[fx->nframes].loop_body = loop_body;
  fx->frames[fx->nframes].cond = cond;
  fx->nframes++;
  return true;
}

/* A value of type t for a path on which it is never used (the other branch
 * of an if after a return): zeros, or a block pointer to nothing. */
static IrValue *poison_ir(Lower *L, IrType t, SrcLoc loc) {
  if (t.dtype != DT_BLOCKPTR)
    return const_ir(L, fa_const_int(0), t, loc);
  IrValue *ops[1 + 3 * FA_MAX_RANK];
  int n = 0;
  if (!(ops[n++] = const_ir(L, fa_const_int(0), fa_type_ptr(t.pointee, 0, NULL), loc)))
    return NULL;
  for (int k = 0; k < 3 * t.rank; k++)
    if (!(ops[n++] = const_ir(L, fa_const_int(0), fa_type_scalar(k < 2 * t.rank ? DT_I64 : DT_I32), loc)))
      return NULL;
  IrOp *op = emit(L, IR_MAKE_BLOCK_PTR, 0, loc, ops, n, &t, 1);
  if (!op)
    return NULL;
  for (int d = 0; d < t.rank; d++)
    op->perm[d] = t.rank - 1 - d;
  return op->results[0];
}

static const char *fn_name(Lower *L) { return L->fx && L->fx->fn ? L->fx->fn->name : "this function"; }

/* One branch of a runtime if (or of the guard after an early return). */
typedef struct Branch {
  IrRegion *region;
  Scope scope;               /* the variables at the end of the branch */
  bool dead;                 /* the branch returned: its variables are never used */
} Branch;

/* The results of an IR_IF being built. */
typedef struct IfMerge {
  IrValue **yt, **ye;
  IrType *types;
  const char **names;
  SrcLoc *at;
  int n;
} IfMerge;

/* Adds result `name` to the if: `a` from the then branch, `b` from the else
 * branch (either NULL: a value never used there), of type t. */
static bool add_if_result(Lower *L, IfMerge *m, const Branch *bt, const Branch *be, const char *name, LVal *a,
                          LVal *b, IrType t, SrcLoc at, SrcLoc loc) {
  IrRegion *outer = L->b.region;
  L->b.region = bt->region;
  m->yt[m->n] = a ? coerce_exact(L, a, t, loc) : poison_ir(L, t, loc);
  L->b.region = be->region;
  m->ye[m->n] = b ? coerce_exact(L, b, t, loc) : poison_ir(L, t, loc);
  L->b.region = outer;
  if (L->err)
    return false;
  if (!m->yt[m->n] || !m->ye[m->n]) {
    IrType ta, tb;
    const char *da = a && runtime_type(a, &ta) ? fa_type_str(L->A, ta) : describe(L, a);
    const char *db = b && runtime_type(b, &tb) ? fa_type_str(L->A, tb) : describe(L, b);
    if (is_pseudo(name))
      lerr(L, loc, "'%s' returns %s on one path and %s on another", fn_name(L), da, db);
    else
      lerr(L, loc, "'%s' has type %s in one branch of this 'if' and %s in the other", name, da, db);
    return false;
  }
  m->types[m->n] = t;
  m->names[m->n] = name;
  m->at[m->n] = at;
  m->n++;
  return true;
}

/* The type a merged value takes: the runtime side's, else the promotion of two literals. */
static bool merged_type(Lower *L, const char *name, LVal *a, LVal *b, IrType *t, SrcLoc loc) {
  IrType ta, tb;
  bool ka = a && runtime_type(a, &ta), kb = b && runtime_type(b, &tb);
  if ((a && !ka) || (b && !kb)) {
    if (is_pseudo(name))
      lerr(L, loc, "'%s' returns %s on one path and %s on another; only numbers, blocks and pointers can be returned "
                   "under a runtime condition", fn_name(L), describe(L, a), describe(L, b));
    else
      lerr(L, loc, "'%s' holds %s in one branch of this runtime 'if' and %s in the other; only numbers and "
                   "blocks can differ between branches", name, describe(L, a), describe(L, b));
    return false;
  }
  if (a && is_ir(a))
    *t = ta;
  else if (b && is_ir(b))
    *t = tb;
  else if (a && b)
    *t = fa_type_scalar(fa_promote(OPC_SELECT, DT_VOID, a->c.kind, &a->c, DT_VOID, b->c.kind, &b->c));
  else
    *t = a ? ta : tb;
  return true;
}

/* Merges one name after a runtime if.  A dead branch (it returned), or for
 * a return value a branch that did not return, does not care about the
 * name: the other branch's value is taken. */
static bool merge_name(Lower *L, IfMerge *m, const Branch *bt, const Branch *be, const Scope *before, const char *name,
                       SrcLoc loc) {
  FuncCtx *fx = L->fx;
  LVal *a = scope_get((Scope *)&bt->scope, name), *b = scope_get((Scope *)&be->scope, name);
  LVal *old = scope_get((Scope *)before, name);
  SrcLoc at = scope_loc((Scope *)&bt->scope, name);
  if (a == old)
    at = scope_loc((Scope *)&be->scope, name);
  bool ret_flag = !strcmp(name, RETURNED_VAR), pseudo = is_pseudo(name);
  if (ret_flag) {
    LVal *no = lv_const(L, fa_const_bool(false));
    if (!no)
      return false;
    a = a ? a : no;
    b = b ? b : no;
  }
  bool undef_a = !a || a->kind == LV_UNDEF, undef_b = !b || b->kind == LV_UNDEF;
  bool care_a = pseudo ? !undef_a : !bt->dead, care_b = pseudo ? !undef_b : !be->dead;
  if (!care_a && !care_b)
    return true; /* stays as before */
  if (care_a != care_b) {
    LVal *v = care_a ? a : b;
    const Branch *br = care_a ? bt : be;
    if (!v || v->kind == LV_UNDEF || v == old || !is_ir(v))
      return scope_assign(L, &fx->scope, name, v, scope_loc((Scope *)&br->scope, name));
    if (!pseudo && !live_after(L, name)) {
      LVal *u = lv_undef(L, fa_arena_printf(L->A, "it was changed inside the runtime 'if' at line %d", loc.line));
      return u && scope_assign(L, &fx->scope, name, u, scope_loc((Scope *)&br->scope, name));
    }
    IrType t;
    return merged_type(L, name, v, NULL, &t, loc) &&
           add_if_result(L, m, bt, be, name, care_a ? a : NULL, care_b ? b : NULL, t, scope_loc((Scope *)&br->scope, name),
                         loc);
  }
  if (a == b)
    return !a || scope_assign(L, &fx->scope, name, a, at);
  if (undef_a || undef_b) {
    LVal *u = lv_undef(L, fa_arena_printf(L->A, "it is assigned in only one branch of the 'if' at line %d", loc.line));
    return u && scope_set(L, &fx->scope, name, u);
  }
  if (a->kind == LV_CONST && b->kind == LV_CONST && fa_const_equal(a->c, b->c) && a->c.kind == b->c.kind)
    return scope_assign(L, &fx->scope, name, a, at);
  if (!pseudo && !live_after(L, name)) {
    LVal *u = lv_undef(L, fa_arena_printf(L->A, "it was changed inside the runtime 'if' at line %d", loc.line));
    return u && scope_assign(L, &fx->scope, name, u, at);
  }
  IrType t;
  return merged_type(L, name, a, b, &t, loc) && add_if_result(L, m, bt, be, name, a, b, t, at, loc);
}

/* Ends a runtime if: the names assigned in either branch (and the
 * pseudo-variables of early returns) become its results where needed. */
static bool finish_if(Lower *L, SrcLoc loc, IrValue *cv, const NameSet *assigned, const Scope *before, Branch *bt,
                      Branch *be) {
  FuncCtx *fx = L->fx;
  NameSet names = {0};
  for (int i = 0; i < assigned->n; i++)
    if (!nameset_add(L, &names, assigned->names[i]))
      return false;
  const Scope *scopes[2] = {&bt->scope, &be->scope};
  for (int s = 0; s < 2; s++)
    for (int i = 0; i < scopes[s]->n; i++)
      if (is_pseudo(scopes[s]->vars[i].name) && strncmp(scopes[s]->vars[i].name, "@t", 2) &&
          !nameset_add(L, &names, scopes[s]->vars[i].name))
        return false;
  IfMerge m = {0};
  size_t cap = (size_t)names.n + 1;
  m.yt = fa_arena_alloc(L->A, cap * sizeof(IrValue *));
  m.ye = fa_arena_alloc(L->A, cap * sizeof(IrValue *));
  m.types = fa_arena_alloc(L->A, cap * sizeof(IrType));
  m.names = fa_arena_alloc(L->A, cap * sizeof(char *));
  m.at = fa_arena_alloc(L->A, cap * sizeof(SrcLoc));
  if (!m.yt || !m.ye || !m.types || !m.names || !m.at)
    return oom(L), false;
  for (int i = 0; i < names.n; i++)
    if (!merge_name(L, &m, bt, be, before, names.names[i], loc))
      return false;
  IrRegion *outer = L->b.region;
  L->b.region = bt->region;
  IrOp *y1 = emit(L, IR_YIELD, 0, loc, m.yt, m.n, NULL, 0);
  L->b.region = be->region;
  IrOp *y2 = y1 ? emit(L, IR_YIELD, 0, loc, m.ye, m.n, NULL, 0) : NULL;
  L->b.region = outer;
  IrOp *op = y2 ? emit(L, IR_IF, 0, loc, &cv, 1, m.types, m.n) : NULL;
  if (!op)
    return false;
  op->regions[0] = bt->region;
  op->regions[1] = be->region;
  op->nregions = 2;
  bt->region->parent_op = op;
  be->region->parent_op = op;
  for (int i = 0; i < m.n; i++) {
    op->results[i]->name = is_pseudo(m.names[i]) ? NULL : m.names[i];
    LVal *r = lv_ir(L, op->results[i]);
    if (!r || !scope_assign(L, &fx->scope, m.names[i], r, m.at[i]))
      return false;
  }
  fx->returned = bt->dead && be->dead;
  return true;
}

static bool lower_if(Lower *L, const Node *s) {
  FuncCtx *fx = L->fx;
  LVal *c = eval(L, s->cond);
  if (!c)
    return false;
  if (c->kind == LV_CONST)
    return lower_block(L, fa_const_truth(c->c) ? &s->body : &s->orelse, false);
  if (!is_data(c) || c->v->type.rank != 0) {
    lerr(L, s->cond->loc, "the condition of an 'if' must be a scalar or a compile-time value, got %s",
         describe(L, c));
    return false;
  }
  IrValue *cv = to_bool_ir(L, c, s->cond->loc);
  if (!cv)
    return false;
  NameSet assigned = {0};
  if (!collect_assigned(L, &s->body, &assigned) || !collect_assigned(L, &s->orelse, &assigned))
    return false;
  Scope before;
  Branch bt = {fa_ir_region_new(L->b.fn), {0}, false}, be = {fa_ir_region_new(L->b.fn), {0}, false};
  IrRegion *outer = L->b.region;
  if (!bt.region || !be.region || !scope_copy(L, &fx->scope, &before) || !scope_copy(L, &before, &fx->scope))
    return oom(L), false;
  fx->runtime_depth++;
  L->b.region = bt.region;
  bool ok = lower_block(L, &s->body, false);
  bt.scope = fx->scope;
  bt.dead = fx->returned;
  fx->returned = false;
  if (ok && scope_copy(L, &before, &fx->scope)) {
    L->b.region = be.region;
    ok = lower_block(L, &s->orelse, false);
  }
  be.scope = fx->scope;
  be.dead = fx->returned;
  fx->returned = false;
  fx->runtime_depth--;
  L->b.region = outer;
  if (!ok || !scope_copy(L, &before, &fx->scope))
    return false;
  return finish_if(L, s->loc, cv, &assigned, &before, &bt, &be);
}

/* Whether an earlier return happened under a runtime condition that this
 * point does not know the value of. */
static bool returned_at_run_time(Lower *L) {
  LVal *r = scope_get(&L->fx->scope, RETURNED_VAR);
  return r && r->kind == LV_IR;
}

typedef bool (*GuardedFn)(Lower *L, void *ctx);

/* After a return under a runtime condition: what follows (fn) runs under
 * `if not RETURNED`; on the other path the program has returned.  The frame
 * at `depth` (when > 0) is moved to its list's end, which the guard covers. */
static bool lower_guarded(Lower *L, SrcLoc loc, const NameSet *assigned, GuardedFn fn, void *ctx, int depth) {
  FuncCtx *fx = L->fx;
  IrValue *r = to_bool_ir(L, scope_get(&fx->scope, RETURNED_VAR), loc);
  IrValue *cv = r ? emit1(L, IR_UNARY, UN_NOT, loc, r->type, &r, 1) : NULL;
  if (!cv)
    return false;
  Scope before;
  Branch bt = {fa_ir_region_new(L->b.fn), {0}, false}, be = {fa_ir_region_new(L->b.fn), {0}, true};
  IrRegion *outer = L->b.region;
  LVal *no = lv_const(L, fa_const_bool(false));
  if (!no || !bt.region || !be.region || !scope_copy(L, &fx->scope, &before) ||
      !scope_set(L, &fx->scope, RETURNED_VAR, no))
    return oom(L), false;
  fx->runtime_depth++;
  L->b.region = bt.region;
  bool ok = fn(L, ctx);
  bt.scope = fx->scope;
  bt.dead = fx->returned;
  fx->returned = false;
  fx->runtime_depth--;
  L->b.region = outer;
  if (!ok || !scope_copy(L, &before, &fx->scope) || !scope_copy(L, &before, &be.scope))
    return false;
  if (depth > 0)
    fx->frames[depth - 1].idx = fx->frames[depth - 1].list->len - 1;
  return finish_if(L, loc, cv, assigned, &before, &bt, &be);
}

/* A range() bound: a compile-time or runtime integer scalar, as i32. */
static IrValue *range_bound(Lower *L, const Node *n, int64_t *cval, bool *is_const) {
  LVal *v = eval(L, n);
  if (!v)
    return NULL;
  *is_const = false;
  if (v->kind == LV_CONST && (v->c.kind == CK_INT || v->c.kind == CK_BOOL)) {
    if (!fa_int_fits(v->c.i, DT_I32)) {
      lerr(L, n->loc, "range() bound %lld does not fit i32", (long long)v->c.i);
      return NULL;
    }
    *is_const = true;
    *cval = v->c.i;
    return to_ir(L, v, DT_I32, n->loc);
  }
  if (!is_data(v) || v->v->type.rank != 0 || !fa_dtype_is_int(v->v->type.dtype)) {
    lerr(L, n->loc, "range() needs integer scalars, got %s", describe(L, v));
    return NULL;
  }
  return cast_ir(L, v->v, DT_I32, n->loc);
}

/* The values a runtime loop's assigned names have before it. */
static LVal **values_before(Lower *L, const NameSet *assigned) {
  LVal **olds = fa_arena_alloc(L->A, (size_t)(assigned->n + 1) * sizeof(LVal *));
  if (!olds)
    return oom(L), NULL;
  for (int i = 0; i < assigned->n; i++)
    olds[i] = scope_get(&L->fx->scope, assigned->names[i]);
  return olds;
}

/* A runtime loop must leave every variable it reassigns with the dtype and
 * shape it had before the loop (as Triton requires), whether or not the
 * variable is used after the loop.  Checked at the end of the body. */
static bool check_loop_types(Lower *L, const Node *loop, const NameSet *assigned, LVal **olds, const char *target) {
  FuncCtx *fx = L->fx;
  for (int i = 0; i < assigned->n; i++) {
    const char *name = assigned->names[i];
    LVal *old = olds[i], *cur = scope_get(&fx->scope, name);
    IrType t;
    if ((target && !strcmp(name, target)) || !old || !cur || cur->kind == LV_UNDEF || !runtime_type(old, &t))
      continue;
    bool same = is_ir(cur) ? fa_type_equal(cur->v->type, t)
                           : is_num_const(cur) && t.dtype != DT_PTR && t.dtype != DT_BLOCKPTR;
    if (same)
      continue;
    IrType ct;
    const char *now = runtime_type(cur, &ct) ? fa_type_str(L->A, ct) : describe(L, cur);
    SrcLoc at = scope_loc(&fx->scope, name);
    lerr(L, at.src ? at : loop->loc,
         "'%s' is reassigned in the loop with type %s, but it has type %s before the loop at line %d; a loop must "
         "keep the dtype and shape of every variable it reassigns", name, now, fa_type_str(L->A, t), loop->loc.line);
    return false;
  }
  return true;
}

/* The loop-carried variables of a loop: defined before it, changed in the
 * body, and read before being changed in the body (or by the condition of
 * a while loop) or after the loop. */
static int carried_names(Lower *L, const Node *s, const NameSet *assigned, LVal **olds, const char *target,
                         const char **cname, IrValue **init, bool *carried) {
  int ncar = 0;
  for (int i = 0; i < assigned->n; i++) {
    const char *name = assigned->names[i];
    LVal *old = olds[i];
    if ((target && !strcmp(name, target)) || !old || old->kind == LV_UNDEF)
      continue;
    if (exposure(&s->body, name) != EXP_READ && !expr_reads(s->cond, name) && !live_after(L, name))
      continue;
    if (!is_ir(old) && !is_num_const(old)) {
      lerr(L, s->loc, "'%s' holds %s and is reassigned in this runtime loop; only numbers, blocks and pointers "
                      "can be carried through a loop", name, describe(L, old));
      return -1;
    }
    if (!(init[ncar] = to_ir(L, old, DT_VOID, s->loc)))
      return -1;
    carried[i] = true;
    cname[ncar++] = name;
  }
  return ncar;
}

/* The values a loop body yields for its carried variables. */
static bool carried_yields(Lower *L, const Node *s, int ncar, const char **cname, const IrType *types,
                           IrValue **yields) {
  for (int i = 0; i < ncar; i++) {
    LVal *cur = scope_get(&L->fx->scope, cname[i]);
    if (!cur || cur->kind == LV_UNDEF) {
      lerr(L, s->loc, "loop-carried variable '%s' has no value at the end of the loop body (%s)", cname[i],
           cur ? cur->why : "never assigned");
      return false;
    }
    if (!(yields[i] = coerce_exact(L, cur, types[i], s->loc))) {
      lerr(L, s->loc, "loop-carried variable '%s' changes type in the loop", cname[i]);
      return false;
    }
  }
  return true;
}

/* After a loop: the carried names take its results, the other names it
 * assigned have no value. */
static bool after_loop(Lower *L, const Node *s, const NameSet *assigned, const bool *carried, const char *target,
                       IrOp *op, int ncar, const char **cname) {
  FuncCtx *fx = L->fx;
  for (int i = 0; i < ncar; i++) {
    op->results[i]->name = cname[i];
    if (!scope_set(L, &fx->scope, cname[i], lv_ir(L, op->results[i])))
      return false;
  }
  for (int i = 0; i < assigned->n; i++) {
    if (carried[i])
      continue;
    const char *why = target && !strcmp(assigned->names[i], target)
                          ? fa_arena_printf(L->A, "it is the variable of the loop at line %d, which is not "
                                                  "available after the loop", s->loc.line)
                          : fa_arena_printf(L->A, "it is assigned inside the loop at line %d and not carried "
                                                  "out of it", s->loc.line);
    LVal *u = lv_undef(L, why);
    if (!u || !scope_set(L, &fx->scope, assigned->names[i], u))
      return false;
  }
  if (target && !nameset_has(assigned, target)) {
    LVal *u = lv_undef(L, fa_arena_printf(L->A, "it is the variable of the loop at line %d, which is not "
                                                "available after the loop", s->loc.line));
    if (!u || !scope_set(L, &fx->scope, target, u))
      return false;
  }
  return true;
}

/* Iterations from..n-1 of an unrolled static_range loop. */
typedef struct StaticLoop {
  const Node *s;
  const int64_t *values;
  int n, from;
  const NameSet *assigned;
} StaticLoop;

static bool lower_static_iters(Lower *L, void *p) {
  StaticLoop *sl = p;
  FuncCtx *fx = L->fx;
  for (int i = sl->from; i < sl->n; i++) {
    LVal *iv = lv_const(L, fa_const_int(sl->values[i]));
    if (!iv || !scope_assign(L, &fx->scope, sl->s->lhs->name, iv, sl->s->lhs->loc) ||
        !lower_block(L, &sl->s->body, true))
      return false;
    if (fx->returned)
      return true;
    if (i + 1 < sl->n && returned_at_run_time(L)) {
      StaticLoop rest = *sl;
      rest.from = i + 1;
      return lower_guarded(L, sl->s->loc, sl->assigned, lower_static_iters, &rest, 0);
    }
  }
  return true;
}

/* for NAME in static_range(start, stop, step): the body lowered once per
 * value, with NAME a compile-time integer. */
static bool lower_static_for(Lower *L, const Node *s) {
  const Node *it = s->rhs;
  if (it->kwargs.len) {
    lerr(L, it->kwargs.items[0]->loc, "static_range() takes no keyword arguments");
    return false;
  }
  if (it->args.len < 1 || it->args.len > 3) {
    lerr(L, it->loc, "static_range() takes 1 to 3 arguments (%d given)", it->args.len);
    return false;
  }
  int64_t b[3] = {0, 0, 1};
  for (int i = 0; i < it->args.len; i++) {
    const Node *a = it->args.items[i];
    int64_t v;
    if (!want_int(L, eval(L, a), a, "a static_range() bound", &v))
      return false;
    b[it->args.len == 1 ? 1 : i] = v;
  }
  if (b[2] == 0) {
    lerr(L, it->args.items[2]->loc, "static_range() step must not be zero");
    return false;
  }
  enum { MAX_UNROLL = 4096 };
  int64_t *vals = fa_arena_alloc(L->A, MAX_UNROLL * sizeof(int64_t));
  if (!vals)
    return oom(L), false;
  int n = 0;
  for (int64_t v = b[0]; b[2] > 0 ? v < b[1] : v > b[1]; v += b[2]) {
    if (n == MAX_UNROLL) {
      lerr(L, it->loc, "static_range() unrolls at most %d iterations", MAX_UNROLL);
      return false;
    }
    vals[n++] = v;
  }
  NameSet assigned = {0};
  if (!collect_assigned(L, &s->body, &assigned) || !nameset_add(L, &assigned, s->lhs->name))
    return false;
  StaticLoop sl = {s, vals, n, 0, &assigned};
  if (!lower_static_iters(L, &sl))
    return false;
  if (L->fx->returned)
    return true;
  LVal *u = lv_undef(L, fa_arena_printf(L->A, "it is the variable of the loop at line %d, which is not available "
                                              "after the loop", s->loc.line));
  return u && scope_set(L, &L->fx->scope, s->lhs->name, u);
}

static bool lower_for(Lower *L, const Node *s) {
  FuncCtx *fx = L->fx;
  const Node *it = s->rhs;
  if (s->lhs->kind != N_NAME) {
    lerr(L, s->lhs->loc, "the target of a 'for' loop must be a single name");
    return false;
  }
  if (it->kind == N_CALL && it->lhs->kind == N_NAME && !strcmp(it->lhs->name, "static_range"))
    return lower_static_for(L, s);
  if (it->kind != N_CALL || it->lhs->kind != N_NAME || strcmp(it->lhs->name, "range")) {
    lerr(L, it->loc, "only 'for NAME in range(...)' and 'for NAME in static_range(...)' loops are supported");
    return false;
  }
  if (it->kwargs.len) {
    lerr(L, it->kwargs.items[0]->loc, "range() takes no keyword arguments");
    return false;
  }
  if (it->args.len < 1 || it->args.len > 3) {
    lerr(L, it->loc, "range() takes 1 to 3 arguments (%d given)", it->args.len);
    return false;
  }
  IrValue *lb, *ub, *step;
  int64_t c;
  bool cst;
  if (it->args.len == 1) {
    if (!(ub = range_bound(L, it->args.items[0], &c, &cst)) ||
        !(lb = const_ir(L, fa_const_int(0), fa_type_scalar(DT_I32), it->loc)))
      return false;
  } else {
    if (!(lb = range_bound(L, it->args.items[0], &c, &cst)) || !(ub = range_bound(L, it->args.items[1], &c, &cst)))
      return false;
  }
  if (it->args.len == 3) {
    if (!(step = range_bound(L, it->args.items[2], &c, &cst)))
      return false;
    if (cst && c <= 0) {
      lerr(L, it->args.items[2]->loc, "range() step must be positive, got %lld", (long long)c);
      return false;
    }
  } else if (!(step = const_ir(L, fa_const_int(1), fa_type_scalar(DT_I32), it->loc))) {
    return false;
  }
  const char *target = s->lhs->name;
  NameSet assigned = {0};
  if (!collect_loop_assigned(L, &s->body, target, &assigned))
    return false;
  LVal **olds = values_before(L, &assigned);
  const char **cname = fa_arena_alloc(L->A, (size_t)(assigned.n + 1) * sizeof(char *));
  IrValue **init = fa_arena_alloc(L->A, (size_t)(assigned.n + 4) * sizeof(IrValue *));
  bool *carried = fa_arena_alloc(L->A, (size_t)(assigned.n + 1) * sizeof(bool));
  if (!olds || !cname || !init || !carried)
    return oom(L), false;
  init[0] = lb;
  init[1] = ub;
  init[2] = step;
  int ncar = carried_names(L, s, &assigned, olds, target, cname, init + 3, carried);
  if (ncar < 0)
    return false;
  IrRegion *outer = L->b.region, *body = fa_ir_region_new(L->b.fn);
  IrValue *iv = body ? fa_ir_region_add_arg(L->b.fn, body, fa_type_scalar(DT_I32), target, s->lhs->loc) : NULL;
  if (!iv || !scope_set(L, &fx->scope, target, lv_ir(L, iv)))
    return L->err ? false : (oom(L), false);
  IrType *types = fa_arena_alloc(L->A, (size_t)(ncar + 1) * sizeof(IrType));
  IrValue **yields = fa_arena_alloc(L->A, (size_t)(ncar + 1) * sizeof(IrValue *));
  if (!types || !yields)
    return oom(L), false;
  for (int i = 0; i < ncar; i++) {
    types[i] = init[3 + i]->type;
    IrValue *arg = fa_ir_region_add_arg(L->b.fn, body, types[i], cname[i], s->loc);
    LVal *lv = lv_ir(L, arg);
    if (!lv || !scope_set(L, &fx->scope, cname[i], lv))
      return false;
  }
  fx->runtime_depth++;
  fx->loop_depth++;
  L->b.region = body;
  bool ok = lower_block(L, &s->body, true) && check_loop_types(L, s, &assigned, olds, target) &&
            carried_yields(L, s, ncar, cname, types, yields) && emit(L, IR_YIELD, 0, s->loc, yields, ncar, NULL, 0);
  fx->runtime_depth--;
  fx->loop_depth--;
  L->b.region = outer;
  if (!ok)
    return false;
  IrOp *op = emit(L, IR_FOR, 0, s->loc, init, 3 + ncar, types, ncar);
  if (!op)
    return false;
  op->regions[0] = body;
  op->nregions = 1;
  body->parent_op = op;
  return after_loop(L, s, &assigned, carried, target, op, ncar, cname);
}

/* while COND: BODY - the condition is a region of its own, evaluated on the
 * carried values before each iteration. */
static bool lower_while(Lower *L, const Node *s) {
  FuncCtx *fx = L->fx;
  NameSet assigned = {0};
  if (!collect_loop_assigned(L, &s->body, NULL, &assigned))
    return false;
  LVal **olds = values_before(L, &assigned);
  const char **cname = fa_arena_alloc(L->A, (size_t)(assigned.n + 1) * sizeof(char *));
  IrValue **init = fa_arena_alloc(L->A, (size_t)(assigned.n + 1) * sizeof(IrValue *));
  bool *carried = fa_arena_alloc(L->A, (size_t)(assigned.n + 1) * sizeof(bool));
  if (!olds || !cname || !init || !carried)
    return oom(L), false;
  int ncar = carried_names(L, s, &assigned, olds, NULL, cname, init, carried);
  if (ncar < 0)
    return false;
  IrRegion *outer = L->b.region, *rc = fa_ir_region_new(L->b.fn), *rb = fa_ir_region_new(L->b.fn);
  IrType *types = fa_arena_alloc(L->A, (size_t)(ncar + 1) * sizeof(IrType));
  IrValue **yields = fa_arena_alloc(L->A, (size_t)(ncar + 1) * sizeof(IrValue *));
  Scope before;
  if (!rc || !rb || !types || !yields || !scope_copy(L, &fx->scope, &before))
    return oom(L), false;
  for (int i = 0; i < ncar; i++) {
    types[i] = init[i]->type;
    if (!fa_ir_region_add_arg(L->b.fn, rc, types[i], cname[i], s->loc) ||
        !fa_ir_region_add_arg(L->b.fn, rb, types[i], cname[i], s->loc))
      return oom(L), false;
  }
  fx->runtime_depth++;
  fx->loop_depth++;
  /* the condition, on the values at the start of an iteration */
  for (int i = 0; i < ncar; i++)
    if (!scope_set(L, &fx->scope, cname[i], lv_ir(L, rc->args[i])))
      return false;
  L->b.region = rc;
  LVal *c = eval(L, s->cond);
  bool ok = c != NULL;
  if (ok && c->kind == LV_CONST && !fa_const_truth(c->c)) {
    /* never runs: the variables keep their values */
    fx->runtime_depth--;
    fx->loop_depth--;
    L->b.region = outer;
    return scope_copy(L, &before, &fx->scope);
  }
  if (ok && c->kind == LV_CONST) {
    lerr(L, s->cond->loc, "the condition of this 'while' loop is always true, so it would never end (there is no "
                          "'break')");
    ok = false;
  } else if (ok && (!is_data(c) || c->v->type.rank != 0)) {
    lerr(L, s->cond->loc, "the condition of a 'while' loop must be a scalar, got %s", describe(L, c));
    ok = false;
  }
  IrValue *cv = ok ? to_bool_ir(L, c, s->cond->loc) : NULL;
  ok = cv && emit(L, IR_YIELD, 0, s->cond->loc, &cv, 1, NULL, 0);
  /* the body */
  for (int i = 0; ok && i < ncar; i++)
    ok = scope_set(L, &fx->scope, cname[i], lv_ir(L, rb->args[i]));
  L->b.region = rb;
  ok = ok && lower_block_ex(L, &s->body, true, s->cond) && check_loop_types(L, s, &assigned, olds, NULL) &&
       carried_yields(L, s, ncar, cname, types, yields) && emit(L, IR_YIELD, 0, s->loc, yields, ncar, NULL, 0);
  fx->runtime_depth--;
  fx->loop_depth--;
  L->b.region = outer;
  if (!ok)
    return false;
  IrOp *op = emit(L, IR_WHILE, 0, s->loc, init, ncar, types, ncar);
  if (!op)
    return false;
  op->regions[0] = rc;
  op->regions[1] = rb;
  op->nregions = 2;
  rc->parent_op = op;
  rb->parent_op = op;
  return after_loop(L, s, &assigned, carried, NULL, op, ncar, cname);
}

/* return under a runtime condition (or after one): the value goes to the
 * RET#k pseudo-variables and RETURNED becomes true on this path. */
static bool store_return(Lower *L, LVal *v, SrcLoc loc) {
  FuncCtx *fx = L->fx;
  int arity = v->kind == LV_TUPLE ? v->n : -1;
  if (fx->ret_seen && fx->ret_arity != arity) {
    const char *now = arity < 0 ? "one value" : fa_arena_printf(L->A, "a tuple of %d", arity);
    const char *then = fx->ret_arity < 0 ? "one value" : fa_arena_printf(L->A, "a tuple of %d", fx->ret_arity);
    lerr(L, loc, "this 'return' gives %s, the one at line %d %s", now, fx->ret_at.line, then);
    return false;
  }
  if (!fx->ret_seen)
    fx->ret_at = loc;
  fx->ret_seen = true;
  fx->ret_arity = arity;
  fx->cond_return = true;
  if (!is_none(v))
    fx->ret_value = true;
  for (int k = 0; k < (arity < 0 ? 1 : arity); k++) {
    LVal *e = arity < 0 ? v : v->elems[k];
    if (e->kind == LV_TUPLE) {
      lerr(L, loc, "a nested tuple cannot be returned under a runtime condition");
      return false;
    }
    if (!scope_assign(L, &fx->scope, ret_var(L, k), e, loc))
      return false;
  }
  LVal *yes = lv_const(L, fa_const_bool(true));
  return yes && scope_assign(L, &fx->scope, RETURNED_VAR, yes, loc);
}

static bool lower_return(Lower *L, const Node *s) {
  FuncCtx *fx = L->fx;
  if (fx->loop_depth > 0) {
    lerr(L, s->loc, "'return' inside a 'for' or 'while' loop is not supported (a loop runs to its end); return "
                    "after the loop, or use static_range() for a loop unrolled at compile time");
    return false;
  }
  bool kernel = fx->fn && fa_func_is_kernel(fx->fn);
  if (kernel && s->lhs) {
    lerr(L, s->loc, "a kernel cannot return a value; store results through pointers");
    return false;
  }
  LVal *v = s->lhs ? eval(L, s->lhs) : lv_none(L);
  if (!v)
    return false;
  if (fx->runtime_depth > 0 || fx->cond_return) {
    if (!store_return(L, v, s->loc))
      return false;
  } else {
    fx->ret = v;
  }
  fx->returned = true;
  return true;
}

static bool lower_stmt(Lower *L, const Node *s);

/* Statements list[from..] of the list whose frame is at `depth`; after a
 * statement that returned under a runtime condition, the rest runs under
 * the guard of that return. */
typedef struct RestOfList {
  const NodeList *list;
  int from, depth;
} RestOfList;

static bool lower_stmts(Lower *L, const NodeList *list, int from, int depth);

static bool lower_rest(Lower *L, void *p) {
  RestOfList *r = p;
  return lower_stmts(L, r->list, r->from, r->depth);
}

static bool lower_stmts(Lower *L, const NodeList *list, int from, int depth) {
  FuncCtx *fx = L->fx;
  for (int i = from; i < list->len; i++) {
    fx->frames[depth - 1].idx = i;
    if (!lower_stmt(L, list->items[i]) || L->err)
      return false;
    if (fx->returned)
      return true;
    if (i + 1 < list->len && returned_at_run_time(L)) {
      NameSet assigned = {0};
      NodeList rest = {list->items + i + 1, list->len - i - 1};
      RestOfList r = {list, i + 1, depth};
      return collect_assigned(L, &rest, &assigned) &&
             lower_guarded(L, list->items[i + 1]->loc, &assigned, lower_rest, &r, depth);
    }
  }
  return true;
}

/* A statement list; `cond` (a while loop's condition) is read again after it. */
static bool lower_block_ex(Lower *L, const NodeList *list, bool loop_body, const Node *cond) {
  FuncCtx *fx = L->fx;
  if (!push_frame(L, list, loop_body, cond))
    return false;
  int depth = fx->nframes;
  bool ok = lower_stmts(L, list, 0, depth);
  fx->nframes = depth - 1;
  return ok && !L->err;
}

static bool lower_block(Lower *L, const NodeList *list, bool loop_body) {
  return lower_block_ex(L, list, loop_body, NULL);
}

static bool lower_stmt(Lower *L, const Node *s) {
  switch (s->kind) {
  case N_EXPR_STMT:
    if (s->lhs->kind == N_STR)
      return true; /* docstring */
    return eval(L, s->lhs) != NULL;
  case N_ASSIGN: {
    LVal *v = eval(L, s->rhs);
    if (!v)
      return false;
    for (int i = 0; i < s->args.len; i++)
      if (!assign_target(L, s->args.items[i], v))
        return false;
    return true;
  }
  case N_AUGASSIGN: {
    if (s->lhs->kind != N_NAME) {
      lerr(L, s->lhs->loc, "augmented assignment needs a plain name on the left");
      return false;
    }
    LVal *cur = lookup(L, s->lhs->name, s->lhs->loc);
    LVal *r = cur ? eval(L, s->rhs) : NULL;
    LVal *v = r ? binop(L, s->op, cur, r, s->loc) : NULL;
    return v && assign_name(L, s->lhs->name, v, s->lhs);
  }
  case N_ANNASSIGN: {
    if (s->lhs->kind != N_NAME || !s->rhs) {
      lerr(L, s->loc, "an annotated assignment needs a name and a value");
      return false;
    }
    LVal *v = eval(L, s->rhs);
    if (!v)
      return false;
    const Node *an = s->annot;
    if (an && an->kind == N_NAME && !strcmp(an->name, "constexpr")) {
      if (v->kind == LV_IR) {
        lerr(L, s->rhs->loc, "'%s' is declared constexpr but its value is known only at run time", s->lhs->name);
        return false;
      }
    } else if (an) {
      LVal *t = eval(L, an);
      DType dt;
      if (!t || !want_dtype(L, t, an, "the annotation", &dt))
        return false;
      if (!(v = lv_ir(L, to_ir(L, v, dt, s->loc))))
        return false;
    }
    return assign_name(L, s->lhs->name, v, s->lhs);
  }
  case N_IF: return lower_if(L, s);
  case N_FOR: return lower_for(L, s);
  case N_WHILE: return lower_while(L, s);
  case N_BREAK:
  case N_CONTINUE:
    lerr(L, s->loc, "'%s' is not supported; a loop runs to the end of its range or until its condition is false",
         s->kind == N_BREAK ? "break" : "continue");
    return false;
  case N_RETURN: return lower_return(L, s);
  case N_PASS: return true;
  case N_FUNC:
    lerr(L, s->loc, "nested function definitions are not supported");
    return false;
  default:
    lerr(L, s->loc, "%s is not supported here", fa_node_kind_name(s->kind));
    return false;
  }
}

/* ---- helpers ------------------------------------------------------------------------------ */

/* Resolves a type name of an annotation (a dtype, or a name bound to one). */
static bool annot_dtype(Lower *L, const Node *an, DType *out) {
  if (an->kind != N_NAME)
    return false;
  if (is_dtype_name(an->name)) {
    *out = fa_dtype_from_name(an->name);
    return true;
  }
  LVal *v = L->fx ? scope_get(&L->fx->scope, an->name) : NULL;
  if (!v)
    v = scope_get(&L->mod, an->name);
  if (v && v->kind == LV_CONST && v->c.kind == CK_DTYPE) {
    *out = v->c.dtype;
    return true;
  }
  return false;
}

/* Checks (and converts) an argument against a helper parameter's annotation. */
static LVal *bind_helper_param(Lower *L, const Node *fn, const Node *p, LVal *v, SrcLoc at) {
  const Node *an = p->annot;
  if (!an)
    return v;
  if (an->kind == N_NAME && !strcmp(an->name, "constexpr")) {
    if (v->kind == LV_IR)
      return lerr(L, at, "argument '%s' of '%s' must be a compile-time value (the parameter is constexpr), got %s",
                  p->name, fn->name, describe(L, v));
    return v;
  }
  if (an->kind == N_PTR_TYPE) {
    if (!is_ptr(v) || v->v->type.rank != 0)
      return lerr(L, at, "argument '%s' of '%s' must be a pointer, got %s", p->name, fn->name, describe(L, v));
    DType want;
    if (annot_dtype(L, an->lhs, &want) && want != v->v->type.pointee)
      return lerr(L, at, "argument '%s' of '%s' must be a pointer to %s, got %s", p->name, fn->name,
                  fa_dtype_name(want), describe(L, v));
    FuncCtx *fx = L->fx;
    PtrParam *pp = fa_arena_alloc(L->A, (size_t)(fx->nptr_params + 1) * sizeof(PtrParam));
    if (!pp)
      return oom(L);
    if (fx->nptr_params)
      memcpy(pp, fx->ptr_params, (size_t)fx->nptr_params * sizeof(PtrParam));
    pp[fx->nptr_params].name = p->name;
    pp[fx->nptr_params].type = v->v->type;
    pp[fx->nptr_params].node = p;
    fx->ptr_params = pp;
    fx->nptr_params++;
    return v;
  }
  DType dt;
  if (annot_dtype(L, an, &dt)) {
    if (!is_num_const(v) && !is_data(v))
      return lerr(L, at, "argument '%s' of '%s' must be a number of type %s, got %s", p->name, fn->name,
                  fa_dtype_name(dt), describe(L, v));
    return lv_ir(L, to_ir(L, v, dt, at));
  }
  return lerr(L, an->loc, "unknown type in the annotation of parameter '%s'", p->name);
}

/* What a helper with returns under runtime conditions returns: the merged
 * RET#k values, when every path returned. */
static LVal *early_result(Lower *L, FuncCtx *cx, const Node *call) {
  if (!cx->returned) {
    if (cx->ret_value)
      return lerr(L, cx->fn->loc, "'%s' returns a value on some paths but reaches its end (returning nothing) on "
                                  "others", cx->fn->name);
    return lv_none(L);
  }
  int n = cx->ret_arity < 0 ? 1 : cx->ret_arity;
  LVal *t = cx->ret_arity < 0 ? NULL : lv_tuple(L, n);
  if (cx->ret_arity >= 0 && !t)
    return NULL;
  for (int k = 0; k < n; k++) {
    LVal *v = scope_get(&cx->scope, ret_var(L, k));
    if (!v || v->kind == LV_UNDEF)
      return lerr(L, call->loc, "internal compiler error: no return value of '%s'", cx->fn->name);
    if (!t)
      return v;
    t->elems[k] = v;
  }
  return t;
}

static LVal *inline_call(Lower *L, const Node *fn, const Node *call) {
  for (int i = 0; i < L->ninline; i++)
    if (L->inline_stack[i] == fn)
      return lerr(L, call->loc, "recursive call of '%s': helpers are inlined, so recursion is not supported",
                  fn->name);
  if (L->ninline >= FA_MAX_INLINE_DEPTH)
    return lerr(L, call->loc, "helper calls are nested more than %d deep", FA_MAX_INLINE_DEPTH);
  int n = fn->params.len;
  const char **names = fa_arena_alloc(L->A, (size_t)(n + 1) * sizeof(char *));
  const Node **a = fa_arena_alloc(L->A, (size_t)(n + 1) * sizeof(Node *));
  LVal **vals = fa_arena_alloc(L->A, (size_t)(n + 1) * sizeof(LVal *));
  if (!names || !a || !vals)
    return oom(L);
  for (int i = 0; i < n; i++)
    names[i] = fn->params.items[i]->name;
  if (!bind_args(L, call, fn->name, names, n, 0, a))
    return NULL;
  for (int i = 0; i < n; i++) {
    if (a[i]) {
      if (!(vals[i] = eval(L, a[i])))
        return NULL;
    } else if (!fn->params.items[i]->rhs) {
      return lerr(L, call->loc, "%s() missing required argument '%s'", fn->name, names[i]);
    }
  }
  FuncCtx cx;
  memset(&cx, 0, sizeof cx);
  cx.fn = fn;
  if (!collect_assigned(L, &fn->body, &cx.locals))
    return NULL;
  FuncCtx *caller = L->fx;
  L->fx = &cx;
  L->inline_stack[L->ninline++] = fn;
  bool ok = true;
  for (int i = 0; i < n && ok; i++) {
    const Node *p = fn->params.items[i];
    LVal *v = vals[i] ? vals[i] : eval(L, p->rhs); /* defaults see the module scope */
    v = v ? bind_helper_param(L, fn, p, v, a[i] ? a[i]->loc : call->loc) : NULL;
    ok = v && scope_set(L, &cx.scope, p->name, v);
  }
  if (ok)
    ok = lower_block(L, &fn->body, false);
  L->ninline--;
  L->fx = caller;
  if (!ok)
    return NULL;
  if (cx.cond_return)
    return early_result(L, &cx, call);
  return cx.ret ? cx.ret : lv_none(L);
}

/* ---- module scope ---------------------------------------------------------------------------- */

static LVal *const_value(Lower *L, LVal *v, const Node *at) {
  if (!v)
    return NULL;
  if (v->kind == LV_CONST || v->kind == LV_FUNC)
    return v;
  if (v->kind == LV_TUPLE) {
    for (int i = 0; i < v->n; i++)
      if (!const_value(L, v->elems[i], at))
        return NULL;
    return v;
  }
  return lerr(L, at->loc, "expected a compile-time value, got %s", describe(L, v));
}

/* Evaluates the module's constant definitions in order. */
static bool build_module_scope(Lower *L) {
  const Node *m = L->module;
  if (!m)
    return true;
  bool saved_ir = L->have_ir;
  L->have_ir = false;
  FuncCtx *saved_fx = L->fx;
  L->fx = NULL;
  bool ok = true;
  for (int i = 0; i < m->body.len && ok; i++) {
    const Node *s = m->body.items[i];
    if (s->kind == N_ANNASSIGN && s->lhs && s->lhs->kind == N_NAME && s->rhs) {
      LVal *v = const_value(L, eval(L, s->rhs), s->rhs);
      DType dt;
      if (v && s->annot && s->annot->kind == N_NAME && strcmp(s->annot->name, "constexpr") &&
          annot_dtype(L, s->annot, &dt)) {
        if (!is_num_const(v)) {
          lerr(L, s->rhs->loc, "'%s' is declared %s but its value is %s", s->lhs->name, fa_dtype_name(dt),
               describe(L, v));
          v = NULL;
        } else if (fa_dtype_is_float(dt)) {
          v = lv_const(L, fa_const_float(fa_const_as_double(v->c)));
        } else if (dt == DT_I1) {
          v = lv_const(L, fa_const_bool(fa_const_truth(v->c)));
        } else if (v->c.kind == CK_FLOAT) {
          lerr(L, s->rhs->loc, "'%s' is declared %s but its value is a float", s->lhs->name, fa_dtype_name(dt));
          v = NULL;
        } else {
          v = lv_const(L, fa_const_int(v->c.i));
        }
      }
      ok = v && scope_set(L, &L->mod, s->lhs->name, v);
    } else if (s->kind == N_ASSIGN) {
      LVal *v = const_value(L, eval(L, s->rhs), s->rhs);
      for (int j = 0; v && j < s->args.len; j++) {
        const Node *t = s->args.items[j];
        if (t->kind != N_NAME) {
          lerr(L, t->loc, "a module-level constant must be assigned to a single name");
          v = NULL;
        } else if (!scope_set(L, &L->mod, t->name, v)) {
          v = NULL;
        }
      }
      ok = v != NULL;
    }
  }
  L->have_ir = saved_ir;
  L->fx = saved_fx;
  return ok;
}

static void lower_init(Lower *L, FaCompiler *fc, const FaProgram *p, const Node *module) {
  memset(L, 0, sizeof *L);
  L->fc = fc;
  L->A = &fc->arena;
  L->prog = p;
  L->module = module ? module : p ? p->module : NULL;
}

bool fa_lower_check_module(FaCompiler *fc, const FaProgram *p, const Node *module) {
  Lower L;
  lower_init(&L, fc, p, module);
  return build_module_scope(&L);
}

bool fa_lower_eval_const(FaCompiler *fc, const FaProgram *p, const Node *module, const Node *expr,
                         const FaBinding *binds, int nbinds, FaConst *out, int nmax, int *nout) {
  Lower L;
  lower_init(&L, fc, p, module);
  *nout = 0;
  if (!expr || !build_module_scope(&L))
    return false;
  FuncCtx cx;
  memset(&cx, 0, sizeof cx);
  L.fx = &cx;
  for (int i = 0; i < nbinds; i++) {
    LVal *v = lv_const(&L, binds[i].value);
    if (!v || !scope_set(&L, &cx.scope, binds[i].name, v))
      return false;
  }
  LVal *v = eval(&L, expr);
  if (!v)
    return false;
  if (v->kind == LV_TUPLE) {
    if (nmax <= 1) {
      lerr(&L, expr->loc, "expected a single value, got a tuple of %d", v->n);
      return false;
    }
    if (v->n > nmax) {
      lerr(&L, expr->loc, "expected at most %d values, got %d", nmax, v->n);
      return false;
    }
    for (int i = 0; i < v->n; i++) {
      if (v->elems[i]->kind != LV_CONST) {
        lerr(&L, expr->loc, "expected compile-time values; entry %d is %s", i, describe(&L, v->elems[i]));
        return false;
      }
      out[i] = v->elems[i]->c;
    }
    *nout = v->n;
    return true;
  }
  if (v->kind != LV_CONST) {
    lerr(&L, expr->loc, "expected a compile-time value, got %s", describe(&L, v));
    return false;
  }
  out[0] = v->c;
  *nout = 1;
  return true;
}

/* ---- specialisation ---------------------------------------------------------------------------- */

typedef struct KernelSetup {
  const FaKernelInfo *k;
  FaConst *cv;      /* constexpr values, by parameter index */
  IrType *types;    /* runtime parameter types, by parameter index */
} KernelSetup;

/* A function with the kernel's runtime parameters, and a context in which
 * every parameter name is bound (runtime ones to the function's parameters,
 * constexprs to their values). */
static IrFunction *begin_function(Lower *L, const KernelSetup *ks, const char *name, FuncCtx *cx) {
  const FaKernelInfo *k = ks->k;
  IrFunction *f = fa_ir_function_new(L->A, name, k->fn->loc);
  if (!f)
    return oom(L), NULL;
  memset(cx, 0, sizeof *cx);
  cx->fn = k->fn;
  for (int i = 0; i < k->nparams; i++) {
    const FaParamInfo *pi = &k->params[i];
    LVal *v;
    if (pi->kind == PARAM_CONSTEXPR) {
      v = lv_const(L, ks->cv[i]);
    } else {
      IrParam *ip = fa_ir_add_param(f, pi->name, ks->types[i], i, pi->node->loc);
      if (!ip)
        return oom(L), NULL;
      const Node *an = pi->node->annot;
      if (pi->kind == PARAM_POINTER && an && an->kind == N_PTR_TYPE)
        ip->extent_rank = an->args.len;
      v = lv_ir(L, ip->value);
    }
    if (!v || !scope_set(L, &cx->scope, pi->name, v))
      return NULL;
  }
  L->b.fn = f;
  L->b.region = f->body;
  L->fx = cx;
  return f;
}

static IrValue *host_int(Lower *L, const Node *e, DType dt, const char *what) {
  LVal *v = eval(L, e);
  if (!v)
    return NULL;
  bool ok = (v->kind == LV_CONST && (v->c.kind == CK_INT || v->c.kind == CK_BOOL)) ||
            (is_data(v) && v->v->type.rank == 0 && fa_dtype_is_int(v->v->type.dtype));
  if (!ok) {
    lerr(L, e->loc, "%s must be an integer scalar, got %s", what, describe(L, v));
    return NULL;
  }
  return to_ir(L, v, dt, e->loc);
}

static IrFunction *lower_grid(Lower *L, const KernelSetup *ks) {
  FuncCtx cx;
  IrFunction *f = begin_function(L, ks, fa_arena_printf(L->A, "%s.grid", ks->k->name), &cx);
  if (!f)
    return NULL;
  L->host = true;
  IrValue *dims[3] = {NULL, NULL, NULL};
  const Node *g = ks->k->grid;
  int n = 0;
  if (g && (g->kind == N_TUPLE || g->kind == N_LIST)) {
    if (g->args.len < 1 || g->args.len > 3) {
      lerr(L, g->loc, "the grid must have 1 to 3 dimensions, got %d", g->args.len);
      return NULL;
    }
    for (; n < g->args.len; n++)
      if (!(dims[n] = host_int(L, g->args.items[n], DT_I32, "a grid dimension")))
        return NULL;
  } else if (g) {
    if (!(dims[n++] = host_int(L, g, DT_I32, "the grid")))
      return NULL;
  }
  for (; n < 3; n++)
    if (!(dims[n] = const_ir(L, fa_const_int(1), fa_type_scalar(DT_I32), g ? g->loc : ks->k->fn->loc)))
      return NULL;
  if (!emit(L, IR_RETURN, 0, g ? g->loc : ks->k->fn->loc, dims, 3, NULL, 0))
    return NULL;
  L->host = false;
  return f;
}

static IrFunction *lower_extents(Lower *L, const KernelSetup *ks) {
  const FaKernelInfo *k = ks->k;
  int total = 0;
  for (int i = 0; i < k->nparams; i++) {
    const Node *an = k->params[i].node->annot;
    if (k->params[i].kind == PARAM_POINTER && an && an->kind == N_PTR_TYPE)
      total += an->args.len;
  }
  if (total == 0)
    return NULL;
  FuncCtx cx;
  IrFunction *f = begin_function(L, ks, fa_arena_printf(L->A, "%s.extents", k->name), &cx);
  if (!f)
    return NULL;
  L->host = true;
  IrValue **vals = fa_arena_alloc(L->A, (size_t)total * sizeof(IrValue *));
  if (!vals)
    return oom(L), NULL;
  int n = 0;
  for (int i = 0; i < k->nparams; i++) {
    const Node *an = k->params[i].node->annot;
    if (k->params[i].kind != PARAM_POINTER || !an || an->kind != N_PTR_TYPE)
      continue;
    for (int j = 0; j < an->args.len; j++)
      if (!(vals[n++] = host_int(L, an->args.items[j], DT_I64, "an extent")))
        return NULL;
  }
  if (!emit(L, IR_RETURN, 0, k->fn->loc, vals, n, NULL, 0))
    return NULL;
  L->host = false;
  return f;
}

static int param_index(const FaKernelInfo *k, const char *name) {
  for (int i = 0; i < k->nparams; i++)
    if (!strcmp(k->params[i].name, name))
      return i;
  return -1;
}

/* Binds the constexprs of a kernel and resolves its parameter types. */
static bool setup_kernel(Lower *L, const FaKernelInfo *k, const FaBinding *binds, int nbinds, KernelSetup *ks) {
  int np = k->nparams;
  ks->k = k;
  ks->cv = fa_arena_alloc(L->A, (size_t)(np + 1) * sizeof(FaConst));
  ks->types = fa_arena_alloc(L->A, (size_t)(np + 1) * sizeof(IrType));
  bool *have = fa_arena_alloc(L->A, (size_t)(np + 1));
  if (!ks->cv || !ks->types || !have)
    return oom(L), false;
  SrcLoc kloc = k->fn->loc;
  for (int b = 0; b < nbinds; b++) {
    int i = param_index(k, binds[b].name);
    if (i < 0) {
      lerr(L, kloc, "kernel '%s' has no parameter '%s'", k->name, binds[b].name);
      return false;
    }
    if (k->params[i].kind != PARAM_CONSTEXPR) {
      lerr(L, kloc, "'%s' is a runtime parameter of kernel '%s'; only constexpr parameters take compile-time values",
           binds[b].name, k->name);
      return false;
    }
    if (have[i]) {
      lerr(L, kloc, "constexpr '%s' of kernel '%s' is given more than once", binds[b].name, k->name);
      return false;
    }
    have[i] = true;
    ks->cv[i] = binds[b].value;
  }
  for (int i = 0; i < np; i++) {
    const FaParamInfo *pi = &k->params[i];
    if (pi->kind != PARAM_CONSTEXPR || have[i])
      continue;
    if (!pi->has_default) {
      lerr(L, pi->node->loc, "kernel '%s' needs a value for constexpr parameter '%s' (it has no default)", k->name,
           pi->name);
      return false;
    }
    ks->cv[i] = pi->default_value;
  }
  for (int i = 0; i < np; i++) {
    const FaParamInfo *pi = &k->params[i];
    if (pi->kind == PARAM_CONSTEXPR)
      continue;
    DType dt = pi->dtype;
    if (pi->dtype_param) {
      int j = param_index(k, pi->dtype_param);
      LVal *mv = j < 0 ? scope_get(&L->mod, pi->dtype_param) : NULL;
      FaConst c = j >= 0 ? ks->cv[j] : mv && mv->kind == LV_CONST ? mv->c : fa_const_none();
      if (c.kind != CK_DTYPE) {
        LVal *cl = lv_const(L, c);
        lerr(L, pi->node->annot ? pi->node->annot->loc : pi->node->loc,
             "'%s' must be a dtype: it is the element type of parameter '%s', but it is %s", pi->dtype_param,
             pi->name, describe(L, cl));
        return false;
      }
      dt = c.dtype;
    }
    if (dt == DT_VOID || dt == DT_PTR || dt == DT_BLOCKPTR) {
      lerr(L, pi->node->loc, "parameter '%s' has no usable type", pi->name);
      return false;
    }
    ks->types[i] = pi->kind == PARAM_POINTER ? fa_type_ptr(dt, 0, NULL) : fa_type_scalar(dt);
  }
  return true;
}

IrKernel *fa_specialize(FaCompiler *fc, const FaProgram *p, const FaKernelInfo *k, const FaBinding *binds,
                        int nbinds, FaLaunchConfig config) {
  Lower L;
  lower_init(&L, fc, p, NULL);
  if (!k || !build_module_scope(&L))
    return NULL;
  fa_config_fill_defaults(&config);
  int naxes;
  const FaConfigAxis *axes = fa_config_axes(&naxes);
  for (int a = 0; a < naxes; a++)
    if (!fa_config_allowed(&axes[a], fa_config_get(&config, &axes[a]))) {
      lerr(&L, k->fn->loc, "%s must be %s, got %d", axes[a].name, axes[a].allowed, fa_config_get(&config, &axes[a]));
      return NULL;
    }
  KernelSetup ks;
  if (!setup_kernel(&L, k, binds, nbinds, &ks))
    return NULL;
  /* the device function */
  FuncCtx cx;
  IrFunction *dev = begin_function(&L, &ks, k->name, &cx);
  if (!dev)
    return NULL;
  L.have_ir = true;
  if (!collect_assigned(&L, &k->fn->body, &cx.locals))
    return NULL;
  for (int i = 0; i < k->nparams; i++) {
    if (k->params[i].kind != PARAM_POINTER)
      continue;
    PtrParam *pp = fa_arena_alloc(L.A, (size_t)(cx.nptr_params + 1) * sizeof(PtrParam));
    if (!pp)
      return oom(&L), NULL;
    if (cx.nptr_params)
      memcpy(pp, cx.ptr_params, (size_t)cx.nptr_params * sizeof(PtrParam));
    pp[cx.nptr_params].name = k->params[i].name;
    pp[cx.nptr_params].type = ks.types[i];
    pp[cx.nptr_params].node = k->params[i].node;
    cx.ptr_params = pp;
    cx.nptr_params++;
  }
  if (!lower_block(&L, &k->fn->body, false))
    return NULL;
  if (!emit(&L, IR_RETURN, 0, k->fn->loc, NULL, 0, NULL, 0))
    return NULL;
  IrFunction *grid = lower_grid(&L, &ks);
  if (!grid)
    return NULL;
  IrFunction *ext = lower_extents(&L, &ks);
  if (L.err)
    return NULL;
  /* verification failures are compiler bugs; they are reported as such */
  if (!fa_ir_verify(dev, &fc->diag) || !fa_ir_verify(grid, &fc->diag) || (ext && !fa_ir_verify(ext, &fc->diag)))
    return NULL;
  IrKernel *K = fa_arena_alloc(L.A, sizeof *K);
  if (!K)
    return oom(&L), NULL;
  K->device = dev;
  K->grid = grid;
  K->extents = ext;
  K->warps = config.warps;
  K->stages = config.stages;
  K->pipeline = config.pipeline;
  K->schedule = config.schedule;
  return K;
}
