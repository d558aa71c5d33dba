/* ir.c - tile IR: dtypes and types, the builder, the printer and the verifier. */
#include "ir.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- dtypes ------------------------------------------------------------------ */

static const struct {
  const char *name;
  int size;
} dtype_info[DT_COUNT] = {
    [DT_VOID] = {"void", 0},  [DT_I1] = {"i1", 1},     [DT_I8] = {"i8", 1},
    [DT_I16] = {"i16", 2},    [DT_I32] = {"i32", 4},   [DT_I64] = {"i64", 8},
    [DT_U32] = {"u32", 4},    [DT_F16] = {"f16", 2},   [DT_BF16] = {"bf16", 2},
    [DT_F32] = {"f32", 4},    [DT_F64] = {"f64", 8},   [DT_PTR] = {"ptr", 8},
    [DT_BLOCKPTR] = {"blockptr", 0},
};

const char *fa_dtype_name(DType dt) {
  return dt >= 0 && dt < DT_COUNT ? dtype_info[dt].name : "?";
}

DType fa_dtype_from_name(const char *name) {
  if (!strcmp(name, "bool"))
    return DT_I1;
  for (int i = DT_I1; i <= DT_F64; i++)
    if (!strcmp(name, dtype_info[i].name))
      return (DType)i;
  return DT_VOID;
}

int fa_dtype_size(DType dt) { return dt >= 0 && dt < DT_COUNT ? dtype_info[dt].size : 0; }

bool fa_dtype_is_float(DType dt) {
  return dt == DT_F16 || dt == DT_BF16 || dt == DT_F32 || dt == DT_F64;
}

bool fa_dtype_is_int(DType dt) {
  return dt == DT_I1 || dt == DT_I8 || dt == DT_I16 || dt == DT_I32 || dt == DT_I64 || dt == DT_U32;
}

int fa_dtype_bits(DType dt) {
  switch (dt) {
  case DT_I1: return 1;
  case DT_I8: return 8;
  case DT_I16: return 16;
  case DT_I32: case DT_U32: return 32;
  case DT_I64: return 64;
  default: return 0;
  }
}

/* ---- types -------------------------------------------------------------------- */

static IrType make_type(DType dt, DType pointee, int rank, const int *shape) {
  IrType t;
  memset(&t, 0, sizeof t);
  t.dtype = dt;
  t.pointee = pointee;
  t.rank = rank < 0 ? 0 : rank > FA_MAX_RANK ? FA_MAX_RANK : rank;
  for (int i = 0; i < t.rank; i++)
    t.shape[i] = shape[i];
  return t;
}

IrType fa_type_scalar(DType dt) { return make_type(dt, DT_VOID, 0, NULL); }
IrType fa_type_block(DType dt, int rank, const int *shape) { return make_type(dt, DT_VOID, rank, shape); }
IrType fa_type_ptr(DType pointee, int rank, const int *shape) { return make_type(DT_PTR, pointee, rank, shape); }
IrType fa_type_blockptr(DType pointee, int rank, const int *block_shape) {
  return make_type(DT_BLOCKPTR, pointee, rank, block_shape);
}

bool fa_type_equal(IrType a, IrType b) {
  if (a.dtype != b.dtype || a.rank != b.rank)
    return false;
  if ((a.dtype == DT_PTR || a.dtype == DT_BLOCKPTR) && a.pointee != b.pointee)
    return false;
  for (int i = 0; i < a.rank; i++)
    if (a.shape[i] != b.shape[i])
      return false;
  return true;
}

int64_t fa_type_numel(IrType t) {
  int64_t n = 1;
  for (int i = 0; i < t.rank; i++)
    n *= t.shape[i];
  return n;
}

static void print_shape(IrType t, StrBuf *out) {
  if (t.rank == 0)
    return;
  fa_sb_putc(out, '[');
  for (int i = 0; i < t.rank; i++)
    fa_sb_printf(out, "%s%d", i ? "," : "", t.shape[i]);
  fa_sb_putc(out, ']');
}

void fa_type_print(IrType t, StrBuf *out) {
  if (t.dtype == DT_PTR || t.dtype == DT_BLOCKPTR)
    fa_sb_printf(out, "%s<%s>", fa_dtype_name(t.dtype), fa_dtype_name(t.pointee));
  else
    fa_sb_puts(out, fa_dtype_name(t.dtype));
  print_shape(t, out);
}

/* ---- building ------------------------------------------------------------------- */

IrFunction *fa_ir_function_new(Arena *arena, const char *name, SrcLoc loc) {
  IrFunction *fn = fa_arena_alloc(arena, sizeof *fn);
  if (!fn)
    return NULL;
  fn->arena = arena;
  fn->name = name;
  fn->loc = loc;
  fn->body = fa_ir_region_new(fn);
  return fn->body ? fn : NULL;
}

IrValue *fa_ir_value_new(IrFunction *fn, IrType type, SrcLoc loc) {
  IrValue *v = fa_arena_alloc(fn->arena, sizeof *v);
  if (!v)
    return NULL;
  v->id = fn->next_value_id++;
  v->type = type;
  v->loc = loc;
  return v;
}

/* Appends to an arena-backed array by copying it one element larger.  IR
 * arrays are small and built once, so the quadratic copy does not matter. */
static void *grow_array(Arena *a, void *items, int len, size_t elem_size) {
  void *n = fa_arena_alloc(a, (size_t)(len + 1) * elem_size);
  if (n && len)
    memcpy(n, items, (size_t)len * elem_size);
  return n;
}

IrParam *fa_ir_add_param(IrFunction *fn, const char *name, IrType type, int source_index, SrcLoc loc) {
  IrParam *params = grow_array(fn->arena, fn->params, fn->nparams, sizeof *params);
  IrValue *v = fa_ir_value_new(fn, type, loc);
  if (!params || !v)
    return NULL;
  v->name = name;
  fn->params = params;
  IrParam *p = &fn->params[fn->nparams++];
  p->name = name;
  p->source_index = source_index;
  p->value = v;
  p->extent_rank = 0;
  return p;
}

IrRegion *fa_ir_region_new(IrFunction *fn) { return fa_arena_alloc(fn->arena, sizeof(IrRegion)); }

IrValue *fa_ir_region_add_arg(IrFunction *fn, IrRegion *r, IrType type, const char *name, SrcLoc loc) {
  IrValue **args = grow_array(fn->arena, r->args, r->nargs, sizeof *args);
  IrValue *v = fa_ir_value_new(fn, type, loc);
  if (!args || !v)
    return NULL;
  v->name = name;
  v->region = r;
  r->args = args;
  r->args[r->nargs++] = v;
  return v;
}

IrOp *fa_ir_op(IrBuilder *b, IrOpKind kind, SrcLoc loc, IrValue **operands, int noperands,
               const IrType *result_types, int nresults) {
  Arena *a = b->fn->arena;
  IrOp *op = fa_arena_alloc(a, sizeof *op);
  if (!op)
    return NULL;
  op->kind = kind;
  op->loc = loc;
  if (noperands > 0) {
    op->operands = fa_arena_alloc(a, (size_t)noperands * sizeof(IrValue *));
    if (!op->operands)
      return NULL;
    memcpy(op->operands, operands, (size_t)noperands * sizeof(IrValue *));
  }
  op->noperands = noperands;
  if (nresults > 0) {
    op->results = fa_arena_alloc(a, (size_t)nresults * sizeof(IrValue *));
    if (!op->results)
      return NULL;
    for (int i = 0; i < nresults; i++) {
      IrValue *v = fa_ir_value_new(b->fn, result_types[i], loc);
      if (!v)
        return NULL;
      v->def = op;
      op->results[i] = v;
    }
  }
  op->nresults = nresults;
  IrRegion *r = b->region;
  op->parent = r;
  op->prev = r->last;
  if (r->last)
    r->last->next = op;
  else
    r->first = op;
  r->last = op;
  return op;
}

IrValue *fa_ir_op1(IrBuilder *b, IrOpKind kind, int sub, SrcLoc loc, IrType type, IrValue **operands,
                   int noperands) {
  IrOp *op = fa_ir_op(b, kind, loc, operands, noperands, &type, 1);
  if (!op)
    return NULL;
  op->sub = sub;
  return op->results[0];
}

IrValue *fa_ir_const_int(IrBuilder *b, SrcLoc loc, IrType type, int64_t v) {
  IrOp *op = fa_ir_op(b, IR_CONST, loc, NULL, 0, &type, 1);
  if (!op)
    return NULL;
  op->ival = v;
  op->fval = (double)v;
  return op->results[0];
}

IrValue *fa_ir_const_float(IrBuilder *b, SrcLoc loc, IrType type, double v) {
  IrOp *op = fa_ir_op(b, IR_CONST, loc, NULL, 0, &type, 1);
  if (!op)
    return NULL;
  op->fval = v;
  op->ival = isfinite(v) && fabs(v) < 9.2e18 ? (int64_t)v : 0;
  return op->results[0];
}

bool fa_ir_const_int_value(const IrValue *v, int64_t *out) {
  for (int depth = 0; v && v->def && depth < 8; depth++) {
    const IrOp *op = v->def;
    if (op->kind == IR_CONST && fa_dtype_is_int(v->type.dtype)) {
      *out = op->ival;
      return true;
    }
    if (op->kind == IR_CAST && fa_dtype_is_int(v->type.dtype) && fa_dtype_is_int(op->operands[0]->type.dtype))
      v = op->operands[0];
    else
      return false;
  }
  return false;
}

/* ---- printing ------------------------------------------------------------------- */

static const char *const op_names[IR_OP_COUNT] = {
    [IR_CONST] = "const",           [IR_PROGRAM_ID] = "program_id",   [IR_NUM_PROGRAMS] = "num_programs",
    [IR_ARANGE] = "arange",         [IR_SPLAT] = "splat",             [IR_BROADCAST] = "broadcast",
    [IR_EXPAND_DIMS] = "expand_dims", [IR_RESHAPE] = "reshape",       [IR_TRANS] = "trans",
    [IR_CAST] = "cast",             [IR_UNARY] = "unary",             [IR_BINARY] = "binary",
    [IR_CMP] = "cmp",               [IR_SELECT] = "select",           [IR_REDUCE] = "reduce",
    [IR_DOT] = "dot",               [IR_PTR_ADD] = "ptr_add",         [IR_LOAD] = "load",
    [IR_STORE] = "store",           [IR_ATOMIC_ADD] = "atomic_add",   [IR_MAKE_BLOCK_PTR] = "make_block_ptr",
    [IR_ADVANCE] = "advance",       [IR_LOAD_BLOCK] = "load_block",   [IR_STORE_BLOCK] = "store_block",
    [IR_FOR] = "for",               [IR_IF] = "if",                   [IR_YIELD] = "yield",
    [IR_RETURN] = "return",         [IR_ASSERT] = "assert",           [IR_FMA] = "fma",
    [IR_SCAN] = "scan",             [IR_REDUCE_FN] = "reduce_fn",     [IR_RAND] = "rand",               [IR_PRINT] = "print",
    [IR_WHILE] = "while",           [IR_ATOMIC_ADD_BLOCK] = "atomic_add_block",
};

const char *fa_ir_op_name(IrOpKind kind) {
  return kind >= 0 && kind < IR_OP_COUNT && op_names[kind] ? op_names[kind] : "?";
}

static const char *const unary_names[] = {
    [UN_NEG] = "neg",   [UN_NOT] = "not",     [UN_INVERT] = "invert", [UN_ABS] = "abs",
    [UN_EXP] = "exp",   [UN_EXP2] = "exp2",   [UN_LOG] = "log",       [UN_LOG2] = "log2",
    [UN_SQRT] = "sqrt", [UN_RSQRT] = "rsqrt", [UN_SIN] = "sin",       [UN_COS] = "cos",
    [UN_FLOOR] = "floor", [UN_CEIL] = "ceil", [UN_SIGMOID] = "sigmoid", [UN_TANH] = "tanh", [UN_TANH_APPROX] = "tanh_approx",
    [UN_ERF] = "erf",
};
static const char *const binary_names[] = {
    [BIN_ADD] = "add", [BIN_SUB] = "sub", [BIN_MUL] = "mul", [BIN_DIV] = "div", [BIN_MOD] = "mod",
    [BIN_MAX] = "max", [BIN_MIN] = "min", [BIN_AND] = "and", [BIN_OR] = "or",   [BIN_XOR] = "xor",
    [BIN_SHL] = "shl", [BIN_SHR] = "shr", [BIN_POW] = "pow", [BIN_MAXNUM] = "maxnum", [BIN_MINNUM] = "minnum",
};
static const char *const cmp_names[] = {
    [CMP_LT] = "lt", [CMP_LE] = "le", [CMP_GT] = "gt", [CMP_GE] = "ge", [CMP_EQ] = "eq", [CMP_NE] = "ne",
};
static const char *const reduce_names[] = {[RED_SUM] = "sum", [RED_MAX] = "max", [RED_MIN] = "min"};
static const char *const precision_names[] = {[DOT_DEFAULT] = "default", [DOT_IEEE] = "ieee", [DOT_TF32] = "tf32"};
static const char *const padding_names[] = {[PAD_NONE] = "none", [PAD_ZERO] = "zero", [PAD_NAN] = "nan"};
static const char *const rand_names[] = {[RAND_UNIFORM] = "uniform", [RAND_NORMAL] = "normal"};

static const char *sub_name(const IrOp *op) {
#define PICK(table)                                                                                \
  (op->sub >= 0 && op->sub < FA_ARRAY_LEN(table) && table[op->sub] ? table[op->sub] : "?")
  switch (op->kind) {
  case IR_UNARY: return PICK(unary_names);
  case IR_BINARY: return PICK(binary_names);
  case IR_CMP: return PICK(cmp_names);
  case IR_REDUCE: return PICK(reduce_names);
  case IR_DOT: return PICK(precision_names);
  case IR_RAND: return PICK(rand_names);
  default: return NULL;
  }
#undef PICK
}

static void print_value(const IrValue *v, StrBuf *out) {
  fa_sb_printf(out, "%%%d", v->id);
  if (v->name)
    fa_sb_printf(out, ".%s", v->name);
}

static void print_indent(StrBuf *out, int depth) {
  for (int i = 0; i < depth; i++)
    fa_sb_puts(out, "  ");
}

static void print_region(const IrRegion *r, StrBuf *out, int depth);

static void print_attrs(const IrOp *op, StrBuf *out) {
  switch (op->kind) {
  case IR_CONST:
    if (fa_dtype_is_float(op->results[0]->type.dtype))
      fa_sb_printf(out, " %.17g", op->fval);
    else
      fa_sb_printf(out, " %" PRId64, op->ival);
    break;
  case IR_PROGRAM_ID:
  case IR_NUM_PROGRAMS:
  case IR_EXPAND_DIMS:
  case IR_REDUCE:
    fa_sb_printf(out, " axis=%d", op->axis);
    break;
  case IR_ARANGE:
    fa_sb_printf(out, " %" PRId64 ", %" PRId64, op->ival, op->ival2);
    break;
  case IR_TRANS:
  case IR_MAKE_BLOCK_PTR: {
    int rank = op->results[0]->type.rank;
    fa_sb_puts(out, op->kind == IR_TRANS ? " perm=(" : " order=(");
    for (int i = 0; i < rank; i++)
      fa_sb_printf(out, "%s%d", i ? "," : "", op->perm[i]);
    fa_sb_putc(out, ')');
    break;
  }
  case IR_LOAD_BLOCK:
  case IR_STORE_BLOCK:
  case IR_ATOMIC_ADD_BLOCK: {
    fa_sb_puts(out, " boundary=(");
    bool first = true;
    for (int i = 0; i < FA_MAX_RANK; i++)
      if (op->boundary & (1u << i)) {
        fa_sb_printf(out, "%s%d", first ? "" : ",", i);
        first = false;
      }
    fa_sb_putc(out, ')');
    if (op->kind == IR_LOAD_BLOCK && op->padding >= 0 && op->padding <= PAD_NAN)
      fa_sb_printf(out, " padding=%s", padding_names[op->padding]);
    break;
  }
  case IR_ASSERT:
  case IR_PRINT:
    if (op->str)
      fa_sb_printf(out, " \"%s\"", op->str);
    if (op->kind == IR_PRINT && op->ival)
      fa_sb_puts(out, " hex");
    break;
  case IR_SCAN:
  case IR_REDUCE_FN:
    fa_sb_printf(out, " axis=%d%s", op->axis, op->ival ? " reverse" : "");
    break;
  case IR_RAND:
    fa_sb_printf(out, " rounds=%" PRId64, op->ival);
    break;
  default:
    break;
  }
}

static const char *region_label(const IrOp *op, int r) {
  switch (op->kind) {
  case IR_IF: return r == 0 ? "then" : "else";
  case IR_WHILE: return r == 0 ? "cond" : "body";
  case IR_SCAN:
  case IR_REDUCE_FN: return "combine";
  default: return "body";
  }
}

static void print_op(const IrOp *op, StrBuf *out, int depth) {
  print_indent(out, depth);
  for (int i = 0; i < op->nresults; i++) {
    fa_sb_puts(out, i ? ", " : "");
    print_value(op->results[i], out);
  }
  if (op->nresults)
    fa_sb_puts(out, " = ");
  fa_sb_puts(out, fa_ir_op_name(op->kind));
  const char *sub = sub_name(op);
  if (sub)
    fa_sb_printf(out, ".%s", sub);
  for (int i = 0; i < op->noperands; i++) {
    fa_sb_puts(out, i ? ", " : " ");
    print_value(op->operands[i], out);
  }
  print_attrs(op, out);
  if (op->nresults) {
    fa_sb_puts(out, " : ");
    for (int i = 0; i < op->nresults; i++) {
      fa_sb_puts(out, i ? ", " : "");
      fa_type_print(op->results[i]->type, out);
    }
  }
  if (op->loc.src)
    fa_sb_printf(out, "  # %d:%d", op->loc.line, op->loc.col);
  fa_sb_putc(out, '\n');
  for (int r = 0; r < op->nregions; r++) {
    print_indent(out, depth);
    fa_sb_puts(out, region_label(op, r));
    print_region(op->regions[r], out, depth);
  }
}

static void print_region(const IrRegion *r, StrBuf *out, int depth) {
  fa_sb_putc(out, '(');
  for (int i = 0; i < r->nargs; i++) {
    fa_sb_puts(out, i ? ", " : "");
    print_value(r->args[i], out);
    fa_sb_puts(out, ": ");
    fa_type_print(r->args[i]->type, out);
  }
  fa_sb_puts(out, ") {\n");
  for (const IrOp *op = r->first; op; op = op->next)
    print_op(op, out, depth + 1);
  print_indent(out, depth);
  fa_sb_puts(out, "}\n");
}

void fa_ir_print(const IrFunction *fn, StrBuf *out) {
  fa_sb_printf(out, "func @%s(", fn->name ? fn->name : "?");
  for (int i = 0; i < fn->nparams; i++) {
    fa_sb_puts(out, i ? ", " : "");
    print_value(fn->params[i].value, out);
    fa_sb_puts(out, ": ");
    fa_type_print(fn->params[i].value->type, out);
    if (fn->params[i].extent_rank)
      fa_sb_printf(out, " extent_rank=%d", fn->params[i].extent_rank);
  }
  fa_sb_puts(out, ") ");
  print_region(fn->body, out, 0);
}

void fa_ir_print_kernel(const IrKernel *k, StrBuf *out) {
  fa_sb_printf(out, "# kernel %s: warps=%d stages=%d\n", k->device && k->device->name ? k->device->name : "?",
               k->warps, k->stages);
  if (k->device)
    fa_ir_print(k->device, out);
  if (k->grid) {
    fa_sb_puts(out, "# grid\n");
    fa_ir_print(k->grid, out);
  }
  if (k->extents) {
    fa_sb_puts(out, "# extents\n");
    fa_ir_print(k->extents, out);
  }
}

/* ---- verification ---------------------------------------------------------------- */

typedef struct Verifier {
  const IrFunction *fn;
  Diag *diag;
  bool ok;
  unsigned char *defined;     /* by value id: 1 while in scope */
  int nvalues;
} Verifier;

static void verify_fail(Verifier *v, const IrOp *op, const char *what) {
  StrBuf sb;
  fa_sb_init(&sb);
  fa_sb_printf(&sb, "internal compiler error: invalid IR in '%s': %s op: %s", v->fn->name ? v->fn->name : "?",
               op ? fa_ir_op_name(op->kind) : "function", what);
  fa_error(v->diag, op ? op->loc : v->fn->loc, "%s", sb.data ? sb.data : what);
  fa_sb_free(&sb);
  v->ok = false;
}

static bool in_scope(Verifier *v, const IrValue *val) {
  return val && val->id >= 0 && val->id < v->nvalues && v->defined[val->id];
}

static void set_scope(Verifier *v, const IrValue *val, unsigned char on) {
  if (val && val->id >= 0 && val->id < v->nvalues)
    v->defined[val->id] = on;
}

static bool is_block(IrType t) { return t.rank > 0; }

static bool same_shape(IrType a, IrType b) {
  if (a.rank != b.rank)
    return false;
  for (int i = 0; i < a.rank; i++)
    if (a.shape[i] != b.shape[i])
      return false;
  return true;
}

static bool is_pow2(int n) { return n > 0 && (n & (n - 1)) == 0; }

static void verify_scan(Verifier *v, const IrOp *op) {
  int n = op->noperands;
  if (n < 1 || op->nresults != n || op->nregions != 1 || !op->regions[0] || op->regions[0]->nargs != 2 * n) {
    verify_fail(v, op, "takes n blocks, has n results and a combine region of 2n arguments");
    return;
  }
  IrType t0 = op->operands[0]->type;
  if (t0.rank < 1 || op->axis < 0 || op->axis >= t0.rank)
    verify_fail(v, op, "scans a block along one of its axes");
  for (int i = 0; i < n; i++) {
    IrType t = op->operands[i]->type;
    const IrRegion *c = op->regions[0];
    IrType rt = op->results[i]->type, want = t;
    if (op->kind == IR_REDUCE_FN && op->axis >= 0 && op->axis < t.rank) {
      for (int d = op->axis; d + 1 < t.rank; d++)
        want.shape[d] = t.shape[d + 1];
      want.rank--;
    }
    if (!same_shape(t, t0) || !fa_type_equal(want, rt))
      verify_fail(v, op, "operands of one shape; each result of its operand's type (a reduction drops the axis)");
    if (c->args[i]->type.rank != 0 || c->args[n + i]->type.rank != 0 || c->args[i]->type.dtype != t.dtype ||
        c->args[n + i]->type.dtype != t.dtype)
      verify_fail(v, op, "the combine region takes scalars of the operands' dtypes");
  }
}

/* Whether val is an argument of r or defined by an op inside r (at any depth). */
static bool defined_within(const IrValue *val, const IrRegion *r) {
  const IrRegion *at = val->def ? val->def->parent : val->region;
  for (; at; at = at->parent_op ? at->parent_op->parent : NULL)
    if (at == r)
      return true;
  return false;
}

/* A scan's combine region is a function of its arguments only. */
static void verify_closed(Verifier *v, const IrRegion *r, const IrRegion *closure) {
  for (const IrOp *op = r->first; op; op = op->next) {
    for (int i = 0; i < op->noperands; i++)
      if (!defined_within(op->operands[i], closure))
        verify_fail(v, op, "a combine region uses a value defined outside it");
    for (int i = 0; i < op->nregions; i++)
      if (op->regions[i])
        verify_closed(v, op->regions[i], closure);
  }
}

/* Checks the operand/result typing rules of ir.h for one op. */
static void verify_types(Verifier *v, const IrOp *op) {
  IrType r = op->nresults ? op->results[0]->type : fa_type_scalar(DT_VOID);
  IrValue *const *a = op->operands;
  int n = op->noperands;
  for (int i = 0; i < op->nresults; i++) {
    IrType t = op->results[i]->type;
    for (int d = 0; d < t.rank; d++)
      if (!is_pow2(t.shape[d]))
        verify_fail(v, op, "block dimension is not a power of two");
  }
  switch (op->kind) {
  case IR_CONST:
  case IR_PROGRAM_ID:
  case IR_NUM_PROGRAMS:
    if (n != 0 || op->nresults != 1)
      verify_fail(v, op, "takes no operands and has one result");
    break;
  case IR_ARANGE:
    if (r.rank != 1 || r.shape[0] != op->ival2 - op->ival)
      verify_fail(v, op, "result shape must be [end - start]");
    break;
  case IR_SPLAT:
    if (n != 1 || is_block(a[0]->type) || !is_block(r) || a[0]->type.dtype != r.dtype)
      verify_fail(v, op, "splats a scalar into a block of the same dtype");
    break;
  case IR_BROADCAST:
    if (n != 1 || a[0]->type.rank != r.rank || a[0]->type.dtype != r.dtype)
      verify_fail(v, op, "broadcasts a block to a block of equal rank and dtype");
    else
      for (int d = 0; d < r.rank; d++)
        if (a[0]->type.shape[d] != r.shape[d] && a[0]->type.shape[d] != 1)
          verify_fail(v, op, "only size-1 dimensions can be broadcast");
    break;
  case IR_EXPAND_DIMS:
    if (n != 1 || r.rank != a[0]->type.rank + 1 || op->axis < 0 || op->axis >= r.rank || r.shape[op->axis] != 1)
      verify_fail(v, op, "inserts one size-1 dimension");
    break;
  case IR_RESHAPE:
    if (n != 1 || fa_type_numel(a[0]->type) != fa_type_numel(r))
      verify_fail(v, op, "keeps the element count");
    break;
  case IR_TRANS:
    if (n != 1 || a[0]->type.rank != r.rank)
      verify_fail(v, op, "permutes dimensions");
    else
      for (int d = 0; d < r.rank; d++)
        if (op->perm[d] < 0 || op->perm[d] >= r.rank || r.shape[d] != a[0]->type.shape[op->perm[d]])
          verify_fail(v, op, "result shape does not match the permutation");
    break;
  case IR_CAST:
    if (n != 1 || !same_shape(a[0]->type, r))
      verify_fail(v, op, "keeps the shape");
    break;
  case IR_UNARY:
    if (n != 1 || !fa_type_equal(a[0]->type, r))
      verify_fail(v, op, "operand and result have the same type");
    break;
  case IR_BINARY:
    if (n != 2 || !fa_type_equal(a[0]->type, r) || !fa_type_equal(a[1]->type, r))
      verify_fail(v, op, "operands and result have the same type");
    break;
  case IR_CMP:
    if (n != 2 || !fa_type_equal(a[0]->type, a[1]->type) || r.dtype != DT_I1 || !same_shape(a[0]->type, r))
      verify_fail(v, op, "compares two operands of one type into i1 of their shape");
    break;
  case IR_SELECT:
    if (n != 3 || a[0]->type.dtype != DT_I1 || !same_shape(a[0]->type, r) || !fa_type_equal(a[1]->type, r) ||
        !fa_type_equal(a[2]->type, r))
      verify_fail(v, op, "selects between two values of the result type under an i1 of its shape");
    break;
  case IR_REDUCE:
    if (n != 1 || op->axis < 0 || op->axis >= a[0]->type.rank || r.rank != a[0]->type.rank - 1 ||
        r.dtype != a[0]->type.dtype)
      verify_fail(v, op, "drops the reduced axis and keeps the dtype");
    break;
  case IR_DOT: {
    if (n < 2 || n > 3) {
      verify_fail(v, op, "takes a, b and an optional accumulator");
      break;
    }
    IrType ta = a[0]->type, tb = a[1]->type;
    if (ta.rank != 2 || tb.rank != 2 || r.rank != 2 || ta.shape[1] != tb.shape[0] || r.shape[0] != ta.shape[0] ||
        r.shape[1] != tb.shape[1] || ta.dtype != tb.dtype)
      verify_fail(v, op, "shapes must be [M,K] x [K,N] -> [M,N] with equal operand dtypes");
    if (n == 3 && !fa_type_equal(a[2]->type, r))
      verify_fail(v, op, "the accumulator has the result type");
    break;
  }
  case IR_PTR_ADD:
    if (n != 2 || a[0]->type.dtype != DT_PTR || r.dtype != DT_PTR || !fa_dtype_is_int(a[1]->type.dtype) ||
        !same_shape(a[1]->type, r) || a[0]->type.pointee != r.pointee)
      verify_fail(v, op, "adds integer offsets of the result's shape to a pointer");
    else if (is_block(a[0]->type) && !same_shape(a[0]->type, r))
      verify_fail(v, op, "a block of pointers must have the result's shape");
    break;
  case IR_LOAD:
    if (n < 1 || n > 3 || a[0]->type.dtype != DT_PTR || r.dtype != a[0]->type.pointee ||
        !same_shape(a[0]->type, r))
      verify_fail(v, op, "loads the pointee type in the pointers' shape");
    break;
  case IR_STORE:
  case IR_ATOMIC_ADD:
    if (n < 2 || n > 3 || a[0]->type.dtype != DT_PTR || a[1]->type.dtype != a[0]->type.pointee ||
        !same_shape(a[0]->type, a[1]->type))
      verify_fail(v, op, "stores a value of the pointee type in the pointers' shape");
    break;
  case IR_MAKE_BLOCK_PTR:
    if (r.dtype != DT_BLOCKPTR || n != 1 + 3 * r.rank || a[0]->type.dtype != DT_PTR || a[0]->type.rank != 0)
      verify_fail(v, op, "takes a base pointer and rank shapes, strides and offsets");
    break;
  case IR_ADVANCE:
    if (n < 1 || a[0]->type.dtype != DT_BLOCKPTR || n != 1 + a[0]->type.rank || !fa_type_equal(a[0]->type, r))
      verify_fail(v, op, "takes a block pointer and one offset per dimension");
    break;
  case IR_LOAD_BLOCK:
    if (n != 1 || a[0]->type.dtype != DT_BLOCKPTR || r.dtype != a[0]->type.pointee || !same_shape(a[0]->type, r))
      verify_fail(v, op, "loads the block pointer's element type in its block shape");
    break;
  case IR_STORE_BLOCK:
  case IR_ATOMIC_ADD_BLOCK:
    if (n != 2 || a[0]->type.dtype != DT_BLOCKPTR || a[1]->type.dtype != a[0]->type.pointee ||
        !same_shape(a[0]->type, a[1]->type) || op->nresults != 0)
      verify_fail(v, op, "stores a block of the block pointer's element type and shape");
    break;
  case IR_FOR:
    if (n < 3 || op->nregions != 1 || op->regions[0]->nargs != n - 2 || op->nresults != n - 3)
      verify_fail(v, op, "takes lb, ub, step and inits; its body takes iv and the iteration values");
    else
      for (int i = 3; i < n; i++)
        if (!fa_type_equal(a[i]->type, op->regions[0]->args[i - 2]->type) ||
            !fa_type_equal(a[i]->type, op->results[i - 3]->type))
          verify_fail(v, op, "an iteration value changes type");
    break;
  case IR_IF:
    if (n != 1 || a[0]->type.dtype != DT_I1 || is_block(a[0]->type) || op->nregions != 2)
      verify_fail(v, op, "takes an i1 scalar and two regions");
    break;
  case IR_FMA:
    if (n != 3 || !fa_type_equal(a[0]->type, r) || !fa_type_equal(a[1]->type, r) || !fa_type_equal(a[2]->type, r))
      verify_fail(v, op, "operands and result have the same type");
    break;
  case IR_SCAN:
  case IR_REDUCE_FN: verify_scan(v, op); break;
  case IR_RAND:
    if (n != 2 || a[0]->type.dtype != DT_I64 || is_block(a[0]->type) || a[1]->type.dtype != DT_I32 ||
        r.dtype != DT_F32 || !same_shape(a[1]->type, r))
      verify_fail(v, op, "takes an i64 seed and i32 offsets and gives f32 of the offsets' shape");
    break;
  case IR_PRINT:
    for (int i = 0; i < n; i++)
      for (int j = 0; j < i; j++)
        if (is_block(a[i]->type) && is_block(a[j]->type) && !same_shape(a[i]->type, a[j]->type))
          verify_fail(v, op, "prints blocks of one shape");
    break;
  case IR_WHILE:
    if (op->nregions != 2 || !op->regions[0] || !op->regions[1] || op->regions[0]->nargs != n ||
        op->regions[1]->nargs != n || op->nresults != n) {
      verify_fail(v, op, "takes inits; its cond and body regions take the iteration values");
      break;
    }
    for (int i = 0; i < n; i++)
      if (!fa_type_equal(a[i]->type, op->regions[0]->args[i]->type) ||
          !fa_type_equal(a[i]->type, op->regions[1]->args[i]->type) ||
          !fa_type_equal(a[i]->type, op->results[i]->type))
        verify_fail(v, op, "an iteration value changes type");
    break;
  default:
    break;
  }
}

static void verify_region(Verifier *v, const IrRegion *r, const IrOp *owner);

static void verify_terminator(Verifier *v, const IrRegion *r, const IrOp *owner) {
  const IrOp *last = r->last;
  if (!last) {
    verify_fail(v, owner, "region is empty (it must end in yield or return)");
    return;
  }
  if (owner == NULL) {
    if (last->kind != IR_RETURN)
      verify_fail(v, last, "a function body must end in return");
    return;
  }
  if (last->kind != IR_YIELD) {
    verify_fail(v, last, "a for/if region must end in yield");
    return;
  }
  if (owner->kind == IR_WHILE && r == owner->regions[0]) {
    if (last->noperands != 1 || last->operands[0]->type.dtype != DT_I1 || is_block(last->operands[0]->type))
      verify_fail(v, last, "the condition region of a while loop yields one i1 scalar");
    return;
  }
  if (owner->kind == IR_SCAN || owner->kind == IR_REDUCE_FN) {
    bool ok = last->noperands == owner->nresults;
    for (int i = 0; ok && i < last->noperands; i++)
      ok = !is_block(last->operands[i]->type) && last->operands[i]->type.dtype == owner->results[i]->type.dtype;
    if (!ok)
      verify_fail(v, last, "a combine region yields one scalar of each operand's dtype");
    verify_closed(v, r, r);
    return;
  }
  if (last->noperands != owner->nresults) {
    verify_fail(v, last, "yields a different number of values than its op has results");
    return;
  }
  for (int i = 0; i < last->noperands; i++)
    if (!fa_type_equal(last->operands[i]->type, owner->results[i]->type))
      verify_fail(v, last, "yields a value whose type differs from the op's result");
}

static void verify_op(Verifier *v, const IrOp *op) {
  for (int i = 0; i < op->noperands; i++)
    if (!in_scope(v, op->operands[i]))
      verify_fail(v, op, "uses a value that is not defined before it in an enclosing region");
  if ((op->kind == IR_YIELD || op->kind == IR_RETURN) && op->next)
    verify_fail(v, op, "a terminator must be the last op of its region");
  verify_types(v, op);
  for (int i = 0; i < op->nregions; i++)
    verify_region(v, op->regions[i], op);
  for (int i = 0; i < op->nresults; i++)
    set_scope(v, op->results[i], 1);
}

static void verify_region(Verifier *v, const IrRegion *r, const IrOp *owner) {
  if (!r) {
    verify_fail(v, owner, "missing region");
    return;
  }
  for (int i = 0; i < r->nargs; i++)
    set_scope(v, r->args[i], 1);
  for (const IrOp *op = r->first; op; op = op->next) {
    if (op->parent != r)
      verify_fail(v, op, "op's parent link is wrong");
    verify_op(v, op);
  }
  verify_terminator(v, r, owner);
  /* values defined inside go out of scope at the end of the region */
  for (int i = 0; i < r->nargs; i++)
    set_scope(v, r->args[i], 0);
  for (const IrOp *op = r->first; op; op = op->next)
    for (int i = 0; i < op->nresults; i++)
      set_scope(v, op->results[i], 0);
}

bool fa_ir_verify(const IrFunction *fn, Diag *diag) {
  Verifier v = {fn, diag, true, NULL, fn->next_value_id};
  v.defined = calloc((size_t)(fn->next_value_id > 0 ? fn->next_value_id : 1), 1);
  if (!v.defined) {
    fa_error(diag, fn->loc, "out of memory while verifying IR");
    return false;
  }
  for (int i = 0; i < fn->nparams; i++)
    set_scope(&v, fn->params[i].value, 1);
  verify_region(&v, fn->body, NULL);
  free(v.defined);
  return v.ok;
}
