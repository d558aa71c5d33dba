/* check_sema.c - unit tests of the middle of the compiler: the promotion
 * table and broadcasting (types.c), compile-time evaluation (consteval.c),
 * the program check (sema.c) and specialisation into verified tile IR
 * (lower.c), including every kernel of examples/attention/attention.fa over
 * its autotune space and head dims 16..256.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autotune_point.h"
#include "sema_internal.h"

#ifndef FA_SRCDIR
#define FA_SRCDIR "."
#endif

/* ---- helpers ----------------------------------------------------------------------- */

typedef struct Ctx {
  FaCompiler fc;
  Node *module;
  FaProgram *prog;
} Ctx;

static void ctx_init(Ctx *c) {
  memset(c, 0, sizeof *c);
  fa_compiler_init(&c->fc, NULL);
}

static void ctx_free(Ctx *c) { fa_compiler_free(&c->fc); }

static const char *diag(Ctx *c) { return c->fc.diag.text.data ? c->fc.diag.text.data : ""; }

/* Parses and checks a program given as text; returns the program or NULL. */
static FaProgram *program(Ctx *c, const char *text) {
  Source *src = fa_source_new(&c->fc, "t.fa", text, strlen(text));
  ck_assert_ptr_nonnull(src);
  c->module = fa_parse(&c->fc, src);
  ck_assert_msg(c->module != NULL, "parse failed: %s", diag(c));
  c->prog = fa_program_check(&c->fc, c->module);
  return c->prog;
}

static IrKernel *specialize(Ctx *c, const char *kernel, const FaBinding *b, int n) {
  FaKernelInfo *k = fa_program_kernel(c->prog, kernel);
  ck_assert_msg(k != NULL, "no kernel %s", kernel);
  FaLaunchConfig cfg = {.warps = 4, .stages = 2};
  return fa_specialize(&c->fc, c->prog, k, b, n, cfg);
}

/* Specialises the only kernel `k` of a program; fails the test on errors. */
static IrKernel *lower_ok(Ctx *c, const char *text, const FaBinding *b, int n) {
  ck_assert_msg(program(c, text) != NULL, "check failed: %s", diag(c));
  IrKernel *k = specialize(c, "k", b, n);
  ck_assert_msg(k != NULL, "specialisation failed: %s", diag(c));
  return k;
}

/* Expects one error containing `msg` at line:col. */
static void expect_error(Ctx *c, int line, int col, const char *msg) {
  char where[64];
  snprintf(where, sizeof where, "t.fa:%d:%d: error: ", line, col);
  const char *d = diag(c);
  const char *at = strstr(d, where);
  ck_assert_msg(at != NULL, "expected an error at %d:%d, got:\n%s", line, col, d);
  const char *eol = strchr(at, '\n');
  size_t len = eol ? (size_t)(eol - at) : strlen(at);
  char *lineb = strndup(at, len);
  ck_assert_msg(strstr(lineb, msg) != NULL, "expected '%s' in: %s", msg, lineb);
  free(lineb);
  ck_assert_int_eq(c->fc.diag.errors, 1);
}

static void lower_fails(Ctx *c, const char *text, int line, int col, const char *msg) {
  if (program(c, text))
    ck_assert_ptr_null(specialize(c, "k", NULL, 0));
  expect_error(c, line, col, msg);
}

/* Visits every op of a function, regions included. */
typedef void (*OpVisit)(const IrOp *op, void *arg);
static void walk_region(const IrRegion *r, OpVisit f, void *arg) {
  for (const IrOp *op = r->first; op; op = op->next) {
    f(op, arg);
    for (int i = 0; i < op->nregions; i++)
      walk_region(op->regions[i], f, arg);
  }
}

typedef struct OpCount {
  IrOpKind kind;
  int n;
  const IrOp *last;
} OpCount;
static void count_visit(const IrOp *op, void *arg) {
  OpCount *c = arg;
  if (op->kind == c->kind) {
    c->n++;
    c->last = op;
  }
}
static int count_ops(const IrFunction *fn, IrOpKind kind, const IrOp **last) {
  OpCount c = {kind, 0, NULL};
  walk_region(fn->body, count_visit, &c);
  if (last)
    *last = c.last;
  return c.n;
}

/* The value stored by the last store of the kernel. */
static IrType stored_type(const IrKernel *k) {
  const IrOp *st = NULL;
  if (!count_ops(k->device, IR_STORE, &st))
    count_ops(k->device, IR_STORE_BLOCK, &st);
  ck_assert_ptr_nonnull(st);
  return st->operands[1]->type;
}

static FaBinding bind(const char *name, FaConst v) {
  FaBinding b = {name, v};
  return b;
}

/* ---- types.c -------------------------------------------------------------------------- */

START_TEST(test_promotion_table) {
  static const struct {
    FaOpClass cls;
    DType a;
    FaConstKind aw;
    DType b;
    FaConstKind bw;
    DType want;
  } cases[] = {
      {OPC_ARITH, DT_F16, CK_NONE, DT_F32, CK_NONE, DT_F32},
      {OPC_ARITH, DT_F16, CK_NONE, DT_F16, CK_NONE, DT_F16},
      {OPC_ARITH, DT_BF16, CK_NONE, DT_F16, CK_NONE, DT_F32},
      {OPC_ARITH, DT_F32, CK_NONE, DT_F64, CK_NONE, DT_F64},
      {OPC_ARITH, DT_I32, CK_NONE, DT_F16, CK_NONE, DT_F16},
      {OPC_ARITH, DT_I32, CK_NONE, DT_I64, CK_NONE, DT_I64},
      {OPC_ARITH, DT_I1, CK_NONE, DT_I1, CK_NONE, DT_I32},
      {OPC_ARITH, DT_I1, CK_NONE, DT_I32, CK_NONE, DT_I32},
      {OPC_BITWISE, DT_I1, CK_NONE, DT_I1, CK_NONE, DT_I1},
      {OPC_BITWISE, DT_F32, CK_NONE, DT_I32, CK_NONE, DT_VOID},
      {OPC_COMPARE, DT_I1, CK_NONE, DT_I1, CK_NONE, DT_I1},
      {OPC_COMPARE, DT_I32, CK_NONE, DT_F32, CK_NONE, DT_F32},
      {OPC_TRUEDIV, DT_I32, CK_NONE, DT_I32, CK_NONE, DT_F32},
      {OPC_TRUEDIV, DT_F16, CK_NONE, DT_F16, CK_NONE, DT_F32},
      {OPC_FLOORMOD, DT_I32, CK_NONE, DT_I32, CK_NONE, DT_I32},
      {OPC_FLOORMOD, DT_I64, CK_NONE, DT_I32, CK_NONE, DT_I64},
      /* literals adapt to the typed operand */
      {OPC_ARITH, DT_F16, CK_NONE, DT_VOID, CK_FLOAT, DT_F16},
      {OPC_ARITH, DT_VOID, CK_FLOAT, DT_BF16, CK_NONE, DT_BF16},
      {OPC_ARITH, DT_F16, CK_NONE, DT_VOID, CK_INT, DT_F16},
      {OPC_ARITH, DT_I64, CK_NONE, DT_VOID, CK_INT, DT_I64},
      {OPC_ARITH, DT_I32, CK_NONE, DT_VOID, CK_FLOAT, DT_F32},
      {OPC_ARITH, DT_I1, CK_NONE, DT_VOID, CK_BOOL, DT_I32},
      {OPC_BITWISE, DT_I1, CK_NONE, DT_VOID, CK_BOOL, DT_I1},
      {OPC_COMPARE, DT_F16, CK_NONE, DT_VOID, CK_FLOAT, DT_F16},
      {OPC_TRUEDIV, DT_I32, CK_NONE, DT_VOID, CK_INT, DT_F32},
      {OPC_TRUEDIV, DT_F16, CK_NONE, DT_VOID, CK_FLOAT, DT_F32},
      {OPC_SELECT, DT_VOID, CK_FLOAT, DT_VOID, CK_INT, DT_F32},
      {OPC_ARITH, DT_PTR, CK_NONE, DT_I32, CK_NONE, DT_VOID},
  };
  for (int i = 0; i < FA_ARRAY_LEN(cases); i++) {
    FaConst av = cases[i].aw == CK_FLOAT ? fa_const_float(0.5) : fa_const_int(2);
    FaConst bv = cases[i].bw == CK_FLOAT ? fa_const_float(0.5) : fa_const_int(2);
    if (cases[i].aw == CK_BOOL)
      av = fa_const_bool(true);
    if (cases[i].bw == CK_BOOL)
      bv = fa_const_bool(true);
    DType got = fa_promote(cases[i].cls, cases[i].a, cases[i].aw, cases[i].aw ? &av : NULL, cases[i].b, cases[i].bw,
                           cases[i].bw ? &bv : NULL);
    ck_assert_msg(got == cases[i].want, "case %d: got %s, want %s", i, fa_dtype_name(got),
                  fa_dtype_name(cases[i].want));
  }
  /* an int literal too large for i32 widens to i64 */
  FaConst big = fa_const_int(INT64_C(1) << 40);
  ck_assert_int_eq(fa_promote(OPC_ARITH, DT_I32, CK_NONE, NULL, DT_VOID, CK_INT, &big), DT_I64);
  ck_assert_int_eq(fa_const_default_dtype(big), DT_I64);
  ck_assert_int_eq(fa_const_default_dtype(fa_const_int(7)), DT_I32);
  ck_assert_int_eq(fa_const_default_dtype(fa_const_float(7)), DT_F32);
}
END_TEST

START_TEST(test_broadcasting) {
  int r, s[FA_MAX_RANK];
  int a[] = {64, 1}, b[] = {1, 32}, c[] = {32}, d[] = {64, 32}, e[] = {16};
  ck_assert(fa_broadcast_shapes(2, a, 2, b, &r, s));
  ck_assert_int_eq(r, 2);
  ck_assert_int_eq(s[0], 64);
  ck_assert_int_eq(s[1], 32);
  ck_assert(fa_broadcast_shapes(2, d, 1, c, &r, s));
  ck_assert_int_eq(r, 2);
  ck_assert_int_eq(s[1], 32);
  ck_assert(fa_broadcast_shapes(0, NULL, 2, d, &r, s));
  ck_assert_int_eq(r, 2);
  ck_assert(!fa_broadcast_shapes(2, d, 1, e, &r, s));
  ck_assert(!fa_broadcast_shapes(1, c, 1, e, &r, s));
  ck_assert(fa_is_pow2(1) && fa_is_pow2(256) && !fa_is_pow2(0) && !fa_is_pow2(96) && !fa_is_pow2(-4));
}
END_TEST

/* ---- consteval.c ---------------------------------------------------------------------- */

START_TEST(test_const_fold) {
  FaConst r;
  const char *err = NULL;
  ck_assert(fa_const_binary(OP_FLOORDIV, fa_const_int(-7), fa_const_int(2), &r, &err));
  ck_assert_int_eq(r.i, -3); /* truncating, like the runtime */
  ck_assert(fa_const_binary(OP_MOD, fa_const_int(-7), fa_const_int(2), &r, &err));
  ck_assert_int_eq(r.i, -1);
  ck_assert(fa_const_binary(OP_DIV, fa_const_int(7), fa_const_int(2), &r, &err));
  ck_assert_int_eq(r.kind, CK_FLOAT);
  ck_assert(r.f == 3.5);
  ck_assert(fa_const_binary(OP_FLOORDIV, fa_const_float(-7), fa_const_int(2), &r, &err));
  ck_assert(r.f == -4.0);
  ck_assert(fa_const_binary(OP_POW, fa_const_int(2), fa_const_int(10), &r, &err));
  ck_assert_int_eq(r.i, 1024);
  ck_assert(!fa_const_binary(OP_DIV, fa_const_int(1), fa_const_int(0), &r, &err));
  ck_assert(strstr(err, "division by zero"));
  ck_assert(!fa_const_binary(OP_MOD, fa_const_int(1), fa_const_int(0), &r, &err));
  ck_assert(!fa_const_binary(OP_MUL, fa_const_int(INT64_MAX), fa_const_int(2), &r, &err));
  ck_assert(strstr(err, "overflow"));
  ck_assert(!fa_const_binary(OP_SHL, fa_const_int(1), fa_const_int(64), &r, &err));
  ck_assert(fa_const_binary(OP_EQ, fa_const_dtype(DT_F16), fa_const_dtype(DT_F16), &r, &err));
  ck_assert(r.kind == CK_BOOL && r.i == 1);
  ck_assert(fa_const_binary(OP_NE, fa_const_dtype(DT_F16), fa_const_int(3), &r, &err));
  ck_assert(r.i == 1);
  ck_assert(!fa_const_binary(OP_LT, fa_const_dtype(DT_F16), fa_const_int(3), &r, &err));
  ck_assert(fa_const_binary(OP_BITAND, fa_const_bool(true), fa_const_bool(false), &r, &err));
  ck_assert(r.kind == CK_BOOL && r.i == 0);
  ck_assert(fa_const_binary(OP_ADD, fa_const_bool(true), fa_const_bool(true), &r, &err));
  ck_assert(r.kind == CK_INT && r.i == 2);
  ck_assert(fa_const_cdiv(fa_const_int(100), fa_const_int(64), &r, &err) && r.i == 2);
  ck_assert(!fa_const_cdiv(fa_const_int(100), fa_const_int(0), &r, &err));
  ck_assert(fa_const_unary(OP_NOT, fa_const_int(0), &r, &err) && r.kind == CK_BOOL && r.i == 1);
  ck_assert(!fa_const_unary(OP_NEG, fa_const_int(INT64_MIN), &r, &err));
}
END_TEST

START_TEST(test_const_parse_print) {
  static const char *const texts[] = {"64", "-3", "True", "False", "f16", "bf16", "1.5", "0.1", "1e-08", "None"};
  for (int i = 0; i < FA_ARRAY_LEN(texts); i++) {
    FaConst c;
    ck_assert_msg(fa_const_parse(texts[i], &c), "%s", texts[i]);
    StrBuf sb;
    fa_sb_init(&sb);
    fa_const_print(c, &sb);
    FaConst d;
    ck_assert(fa_const_parse(sb.data, &d));
    ck_assert_msg(fa_const_equal(c, d) && c.kind == d.kind, "%s -> %s", texts[i], sb.data);
    fa_sb_free(&sb);
  }
  FaConst c;
  ck_assert(fa_const_parse("0x40", &c) && c.i == 64);
  ck_assert(fa_const_parse("bool", &c) && c.kind == CK_DTYPE && c.dtype == DT_I1);
  ck_assert(!fa_const_parse("", &c));
  ck_assert(!fa_const_parse("x64", &c));
  ck_assert(!fa_const_parse("99999999999999999999", &c));
  StrBuf sb;
  fa_sb_init(&sb);
  fa_const_print(fa_const_float(2.0), &sb);
  ck_assert_str_eq(sb.data, "2.0");
  fa_sb_free(&sb);
}
END_TEST

static const char consts_src[] =
    "LOG2E: constexpr = 1.4426950408889634\n"
    "ACC = f32\n"
    "B = 64 * 2\n"
    "@kernel(grid=(cdiv(n, BLOCK), 1), flops=2 * n * BLOCK)\n"
    "@autotune(BLOCK=[64, B], warps=[4, 8], stages=[2], prune=BLOCK % 64 == 0 and n > 0, key=(n,))\n"
    "def k(x: *ACC, n: i32, BLOCK: constexpr, C: constexpr = B // 2 - 1):\n"
    "    static_assert(C == 63)\n"
    "    store(x + arange(0, BLOCK), zeros((BLOCK,), ACC))\n";

START_TEST(test_const_eval_program) {
  Ctx c;
  ctx_init(&c);
  FaProgram *p = program(&c, consts_src);
  ck_assert_msg(p != NULL, "%s", diag(&c));
  FaKernelInfo *k = fa_program_kernel(p, "k");
  ck_assert_ptr_nonnull(k);
  ck_assert_int_eq(k->nparams, 4);
  ck_assert_int_eq(k->params[0].kind, PARAM_POINTER);
  ck_assert_int_eq(k->params[0].dtype, DT_F32);
  ck_assert_int_eq(k->params[1].kind, PARAM_SCALAR);
  ck_assert_int_eq(k->params[1].dtype, DT_I32);
  ck_assert_int_eq(k->params[3].kind, PARAM_CONSTEXPR);
  ck_assert(k->params[3].has_default && k->params[3].default_value.i == 63);
  /* the autotune space, with warps and stages axes */
  ck_assert_int_eq(k->ntune, 3);
  ck_assert_str_eq(k->tune[0].name, "BLOCK");
  ck_assert_int_eq(k->tune[0].nvalues, 2);
  ck_assert_int_eq(k->tune[0].values[1].i, 128);
  ck_assert_str_eq(k->tune[1].name, "warps");
  ck_assert_int_eq(k->nkey, 1);
  ck_assert_str_eq(k->key[0], "n");
  /* prune and flops evaluate under bindings */
  FaBinding b[2] = {bind("BLOCK", fa_const_int(128)), bind("n", fa_const_int(1000))};
  FaConst v;
  ck_assert(fa_eval_const(&c.fc, p, k->prune, b, 2, &v));
  ck_assert(v.kind == CK_BOOL && v.i == 1);
  ck_assert(fa_eval_const(&c.fc, p, k->flops, b, 2, &v));
  ck_assert_int_eq(v.i, 256000);
  FaConst g[3];
  ck_assert_int_eq(fa_eval_const_tuple(&c.fc, p, k->grid, b, 2, g, 3), 2);
  ck_assert_int_eq(g[0].i, 8);
  b[0].value = fa_const_int(96);
  ck_assert(fa_eval_const(&c.fc, p, k->prune, b, 2, &v));
  ck_assert(v.i == 0);
  /* a missing binding is a located error */
  ck_assert(!fa_eval_const(&c.fc, p, k->flops, b, 1, &v));
  ck_assert(strstr(diag(&c), "unknown name 'n'"));
  /* defaults: the first value of each axis */
  FaBinding *db;
  FaLaunchConfig cfg;
  int n = fa_kernel_default_bindings(&c.fc, p, k, FA_ARCH_NONE, &db, &cfg);
  ck_assert_int_eq(n, 1);
  ck_assert_int_eq(db[0].value.i, 64);
  ck_assert_int_eq(cfg.warps, 4);
  ck_assert_int_eq(cfg.stages, 2);
  ctx_free(&c);
}
END_TEST

START_TEST(test_const_eval_errors) {
  Ctx c;
  ctx_init(&c);
  lower_fails(&c,
              "@kernel(grid=(1,))\n"
              "def k(x: *f32, D: constexpr = 8):\n"
              "    n = D // (D - 8)\n",
              3, 9, "division by zero");
  ctx_free(&c);
  ctx_init(&c);
  lower_fails(&c,
              "@kernel(grid=(1,))\n"
              "def k(x: *f32, D: constexpr = 8):\n"
              "    static_assert(D % 16 == 0, 'D must be a multiple of 16')\n",
              3, 5, "static assertion failed: D must be a multiple of 16");
  ctx_free(&c);
  ctx_init(&c);
  ck_assert_ptr_null(program(&c, "X = 1 // 0\n"));
  expect_error(&c, 1, 5, "division by zero");
  ctx_free(&c);
}
END_TEST

/* ---- lowering ---------------------------------------------------------------------------- */

START_TEST(test_literal_adapts) {
  Ctx c;
  ctx_init(&c);
  IrKernel *k = lower_ok(&c,
                         "@kernel(grid=(1,))\n"
                         "def k(x: *f16, y: *f16):\n"
                         "    offs = arange(0, 64)\n"
                         "    v = load(x + offs)\n"
                         "    store(y + offs, v * 0.5 + 1)\n",
                         NULL, 0);
  IrType t = stored_type(k);
  ck_assert_int_eq(t.dtype, DT_F16);
  ck_assert_int_eq(count_ops(k->device, IR_CAST, NULL), 0); /* no hidden upcast */
  ctx_free(&c);
}
END_TEST

START_TEST(test_promotions_in_ir) {
  static const struct {
    const char *expr;
    DType want;
  } cases[] = {
      {"a16 + a32", DT_F32}, {"i + a16", DT_F16},  {"i / 2", DT_F32},     {"i // 2", DT_I32},
      {"i % 3", DT_I32},     {"i + l", DT_I64},    {"m + m", DT_I32},     {"m & m", DT_I1},
      {"i < 3", DT_I1},      {"i * 1.5", DT_F32},  {"a16 / a16", DT_F32}, {"a16 // 2.0", DT_F32},
      {"maximum(a16, 0)", DT_F16}, {"where(m, a16, 0.0)", DT_F16}, {"exp2(a16)", DT_F16},
      {"sum(a16, 0)", DT_F16}, {"sum(m, 0)", DT_I32}, {"i.to(bf16)", DT_BF16}, {"(a32 > 0).to(f32)", DT_F32},
  };
  for (int i = 0; i < FA_ARRAY_LEN(cases); i++) {
    char text[1024];
    snprintf(text, sizeof text,
             "@kernel(grid=(1,))\n"
             "def k(p16: *f16, p32: *f32, pl: *i64, out: *%s):\n"
             "    o = arange(0, 16)\n"
             "    a16 = load(p16 + o)\n"
             "    a32 = load(p32 + o)\n"
             "    l = load(pl + o)\n"
             "    i = o\n"
             "    m = o < 8\n"
             "    r = %s\n"
             "    static_assert(r.dtype == %s)\n",
             fa_dtype_name(cases[i].want), cases[i].expr, fa_dtype_name(cases[i].want));
    Ctx c;
    ctx_init(&c);
    ck_assert_msg(program(&c, text) != NULL, "%s: %s", cases[i].expr, diag(&c));
    ck_assert_msg(specialize(&c, "k", NULL, 0) != NULL, "%s: %s", cases[i].expr, diag(&c));
    ctx_free(&c);
  }
}
END_TEST

START_TEST(test_broadcast_in_ir) {
  Ctx c;
  ctx_init(&c);
  IrKernel *k = lower_ok(&c,
                         "@kernel(grid=(1,))\n"
                         "def k(x: *f32):\n"
                         "    r = arange(0, 64)\n"
                         "    q = arange(0, 32)\n"
                         "    offs = r[:, None] * 32 + q[None, :]\n"
                         "    static_assert(offs.shape == (64, 32))\n"
                         "    store(x + offs, 1.0)\n",
                         NULL, 0);
  ck_assert_int_eq(count_ops(k->device, IR_EXPAND_DIMS, NULL), 2);
  ck_assert_int_eq(count_ops(k->device, IR_BROADCAST, NULL), 2);
  IrType t = stored_type(k);
  ck_assert_int_eq(t.rank, 2);
  ck_assert_int_eq(t.shape[0], 64);
  ck_assert_int_eq(t.shape[1], 32);
  ctx_free(&c);
}
END_TEST

START_TEST(test_loop_carried) {
  Ctx c;
  ctx_init(&c);
  IrKernel *k = lower_ok(&c,
                         "@kernel(grid=(1,))\n"
                         "def k(x: *f32, n: i32):\n"
                         "    acc = zeros((16,), f32)\n"
                         "    j = 0\n"
                         "    t = 5\n"
                         "    for s in range(n):\n"
                         "        tmp = load(x + j + arange(0, 16))\n"
                         "        t = 7\n"
                         "        acc += tmp\n"
                         "        j += 16\n"
                         "    store(x + arange(0, 16), acc)\n",
                         NULL, 0);
  const IrOp *f = NULL;
  ck_assert_int_eq(count_ops(k->device, IR_FOR, &f), 1);
  /* acc and j are carried; t is dead after the loop and tmp is local */
  ck_assert_int_eq(f->nresults, 2);
  ck_assert_int_eq(f->regions[0]->nargs, 3);
  ck_assert_int_eq(f->noperands, 5);
  ctx_free(&c);
}
END_TEST

START_TEST(test_runtime_if) {
  Ctx c;
  ctx_init(&c);
  IrKernel *k = lower_ok(&c,
                         "@kernel(grid=(1,))\n"
                         "def k(x: *f32, n: i32):\n"
                         "    v = 1.0\n"
                         "    w = 0\n"
                         "    if n > 3:\n"
                         "        v = load(x)\n"
                         "        w = 2\n"
                         "    elif n < 0:\n"
                         "        v = 3.0\n"
                         "    store(x, v + w)\n",
                         NULL, 0);
  ck_assert_int_eq(count_ops(k->device, IR_IF, NULL), 2);
  const IrOp *f = k->device->body->first;
  while (f && f->kind != IR_IF)
    f = f->next;
  ck_assert_ptr_nonnull(f);
  ck_assert_int_eq(f->nresults, 2); /* the outer if: v and w */
  ck_assert_int_eq(f->results[0]->type.dtype, DT_F32);
  ck_assert_int_eq(f->results[1]->type.dtype, DT_I32);
  ctx_free(&c);
}
END_TEST

START_TEST(test_constexpr_if_and_helpers) {
  Ctx c;
  ctx_init(&c);
  const char *src = "def pick(a, b, FIRST: constexpr):\n"
                    "    if FIRST:\n"
                    "        return a, b\n"
                    "    else:\n"
                    "        return b, a\n"
                    "def scale(p, s: f32 = 2.0):\n"
                    "    return load(p) * s\n"
                    "@kernel(grid=(1,))\n"
                    "def k(x: *f32, y: *f32, FLAG: constexpr = True):\n"
                    "    u, v = pick(x, y, FIRST=FLAG)\n"
                    "    if FLAG:\n"
                    "        store(u, scale(v))\n"
                    "    else:\n"
                    "        this_is_not_lowered(1)\n";
  /* the branch not taken only needs to parse... but names are still checked */
  ck_assert_ptr_null(program(&c, src));
  ck_assert(strstr(diag(&c), "unknown name 'this_is_not_lowered'"));
  ctx_free(&c);
  ctx_init(&c);
  char *ok = strdup(src);
  char *bad = strstr(ok, "this_is_not_lowered(1)");
  memcpy(bad, "static_assert(False)  ", 22);
  IrKernel *k = lower_ok(&c, ok, NULL, 0);
  ck_assert_int_eq(count_ops(k->device, IR_LOAD, NULL), 1);
  const IrOp *st = NULL;
  ck_assert_int_eq(count_ops(k->device, IR_STORE, &st), 1);
  ck_assert_ptr_eq(st->operands[0], k->device->params[0].value); /* stored through x */
  ctx_free(&c);
  ctx_init(&c);
  FaBinding b = bind("FLAG", fa_const_bool(false));
  ck_assert_ptr_nonnull(program(&c, ok));
  ck_assert_ptr_null(specialize(&c, "k", &b, 1));
  ck_assert(strstr(diag(&c), "static assertion failed"));
  ctx_free(&c);
  free(ok);
}
END_TEST

START_TEST(test_specialize_bindings) {
  Ctx c;
  ctx_init(&c);
  const char *src = "@kernel(grid=(1,))\n"
                    "def k(x: *T, n: i32, B: constexpr, T: constexpr = f16):\n"
                    "    store(x + arange(0, B), zeros((B,), T))\n";
  ck_assert_ptr_nonnull(program(&c, src));
  ck_assert_ptr_null(specialize(&c, "k", NULL, 0));
  expect_error(&c, 2, 22, "needs a value for constexpr parameter 'B'");
  ctx_free(&c);

  ctx_init(&c);
  ck_assert_ptr_nonnull(program(&c, src));
  FaBinding b[2] = {bind("B", fa_const_int(32)), bind("Q", fa_const_int(1))};
  ck_assert_ptr_null(specialize(&c, "k", b, 2));
  expect_error(&c, 1, 1, "has no parameter 'Q'");
  ctx_free(&c);

  ctx_init(&c);
  ck_assert_ptr_nonnull(program(&c, src));
  b[1] = bind("n", fa_const_int(1));
  ck_assert_ptr_null(specialize(&c, "k", b, 2));
  expect_error(&c, 1, 1, "'n' is a runtime parameter");
  ctx_free(&c);

  ctx_init(&c);
  ck_assert_ptr_nonnull(program(&c, src));
  b[1] = bind("T", fa_const_int(3));
  ck_assert_ptr_null(specialize(&c, "k", b, 2));
  expect_error(&c, 2, 10, "'T' must be a dtype");
  ctx_free(&c);

  ctx_init(&c);
  ck_assert_ptr_nonnull(program(&c, src));
  b[1] = bind("T", fa_const_dtype(DT_BF16));
  IrKernel *k = specialize(&c, "k", b, 2);
  ck_assert_msg(k != NULL, "%s", diag(&c));
  ck_assert_int_eq(k->device->nparams, 2);
  ck_assert_str_eq(k->device->params[0].name, "x");
  ck_assert_int_eq(k->device->params[0].value->type.dtype, DT_PTR);
  ck_assert_int_eq(k->device->params[0].value->type.pointee, DT_BF16);
  ck_assert_int_eq(k->device->params[1].source_index, 1);
  ck_assert_ptr_null(k->extents);
  ck_assert_ptr_nonnull(k->grid);
  ctx_free(&c);
}
END_TEST

START_TEST(test_grid_and_extents) {
  Ctx c;
  ctx_init(&c);
  IrKernel *k = lower_ok(&c,
                         "@kernel(grid=(cdiv(n, B), h))\n"
                         "def k(a: i32, x: *f32[h, n * 2], h: i32, n: i32, y: *f16[n], B: constexpr = 64):\n"
                         "    pass\n",
                         NULL, 0);
  ck_assert_int_eq(k->device->nparams, 5);
  ck_assert_int_eq(k->device->params[1].extent_rank, 2);
  ck_assert_int_eq(k->device->params[4].extent_rank, 1);
  ck_assert_int_eq(k->device->params[4].source_index, 4);
  ck_assert_int_eq(k->grid->nparams, 5);
  const IrOp *ret = k->grid->body->last;
  ck_assert_int_eq(ret->kind, IR_RETURN);
  ck_assert_int_eq(ret->noperands, 3);
  for (int i = 0; i < 3; i++)
    ck_assert_int_eq(ret->operands[i]->type.dtype, DT_I32);
  ck_assert_ptr_nonnull(k->extents);
  ret = k->extents->body->last;
  ck_assert_int_eq(ret->noperands, 3);
  for (int i = 0; i < 3; i++)
    ck_assert_int_eq(ret->operands[i]->type.dtype, DT_I64);
  ctx_free(&c);
}
END_TEST

START_TEST(test_ir_printing) {
  Ctx c;
  ctx_init(&c);
  IrKernel *k = lower_ok(&c,
                         "@kernel(grid=(1,))\n"
                         "def k(x: *f32, n: i32):\n"
                         "    acc = zeros((16, 16), f32)\n"
                         "    for i in range(0, n, 2):\n"
                         "        acc = dot(acc, acc, acc)\n"
                         "    store(x + arange(0, 16)[:, None] * 16 + arange(0, 16)[None, :], acc)\n",
                         NULL, 0);
  StrBuf a, b;
  fa_sb_init(&a);
  fa_sb_init(&b);
  fa_ir_print_kernel(k, &a);
  fa_ir_print_kernel(k, &b);
  ck_assert_str_eq(a.data, b.data);
  ck_assert(strstr(a.data, "func @k(%0.x: ptr<f32>, %1.n: i32)"));
  ck_assert(strstr(a.data, "= for "));
  ck_assert(strstr(a.data, "dot.default"));
  ck_assert(strstr(a.data, "f32[16,16]"));
  ck_assert(strstr(a.data, "func @k.grid("));
  ck_assert(strstr(a.data, "yield"));
  fa_sb_free(&a);
  fa_sb_free(&b);
  ctx_free(&c);
}
END_TEST

/* ---- attention.fa ------------------------------------------------------------------------- */

static FaProgram *load_file(Ctx *c, const char *path) {
  Source *src = fa_source_read(&c->fc, path);
  ck_assert_msg(src != NULL, "cannot read %s", path);
  c->module = fa_parse(&c->fc, src);
  ck_assert_msg(c->module != NULL, "%s does not parse:\n%s", path, diag(c));
  c->prog = fa_program_check(&c->fc, c->module);
  ck_assert_msg(c->prog != NULL, "%s does not check:\n%s", path, diag(c));
  return c->prog;
}

static const FaTuneAxis *axis_of(const FaKernelInfo *k, const char *name) {
  for (int i = 0; i < k->ntune; i++)
    if (!strcmp(k->tune[i].name, name))
      return &k->tune[i];
  return NULL;
}

static int param_of(const FaKernelInfo *k, const char *name) {
  for (int i = 0; i < k->nparams; i++)
    if (!strcmp(k->params[i].name, name))
      return i;
  return -1;
}

/* The first autotune value or default of each constexpr; head dims and
 * group counts without a default get 64 and 1 (the test sets them). */
static int base_bindings(FaCompiler *fc, const FaProgram *p, const FaKernelInfo *k, FaBinding *out,
                         FaLaunchConfig *cfg) {
  FaBinding *defs;
  int n = fa_kernel_default_bindings(fc, p, k, FA_ARCH_NONE, &defs, cfg);
  if (n >= 0) {
    for (int i = 0; i < n && i < 32; i++)
      out[i] = defs[i];
    return n;
  }
  cfg->warps = 4;
  cfg->stages = 2;
  n = 0;
  for (int i = 0; i < k->nparams && n < 32; i++) {
    const FaParamInfo *pi = &k->params[i];
    if (pi->kind != PARAM_CONSTEXPR)
      continue;
    const FaTuneAxis *ax = axis_of(k, pi->name);
    if (ax)
      out[n++] = bind(pi->name, ax->values[0]);
    else if (pi->has_default)
      out[n++] = bind(pi->name, pi->default_value);
    else if (!strcmp(pi->name, "d_head") || !strcmp(pi->name, "D"))
      out[n++] = bind(pi->name, fa_const_int(64));
    else if (!strcmp(pi->name, "n_groups"))
      out[n++] = bind(pi->name, fa_const_int(1));
    else if (!strcmp(pi->name, "is_causal"))
      out[n++] = bind(pi->name, fa_const_bool(false));
    else if (!strcmp(pi->name, "T"))
      out[n++] = bind(pi->name, fa_const_dtype(DT_F16));
    else
      ck_abort_msg("kernel %s: no value for constexpr %s", k->name, pi->name);
  }
  return n;
}

/* Checks what every specialised attention kernel must satisfy. */
static void check_kernel_ir(const FaKernelInfo *k, const IrKernel *ir) {
  int nruntime = 0;
  for (int i = 0; i < k->nparams; i++)
    nruntime += k->params[i].kind != PARAM_CONSTEXPR;
  ck_assert_int_eq(ir->device->nparams, nruntime);
  for (int i = 0; i < ir->device->nparams; i++) {
    const IrParam *p = &ir->device->params[i];
    const FaParamInfo *pi = &k->params[p->source_index];
    ck_assert_str_eq(p->name, pi->name);
    ck_assert(pi->kind != PARAM_CONSTEXPR);
    ck_assert_int_eq(p->value->type.dtype == DT_PTR, pi->kind == PARAM_POINTER);
    if (i > 0)
      ck_assert_int_gt(p->source_index, ir->device->params[i - 1].source_index);
  }
  ck_assert_int_eq(ir->grid->body->last->noperands, 3);
  /* every kernel writes something: stores, or additions into accumulators */
  ck_assert_int_ge(count_ops(ir->device, IR_STORE_BLOCK, NULL) + count_ops(ir->device, IR_STORE, NULL) +
                       count_ops(ir->device, IR_ATOMIC_ADD_BLOCK, NULL),
                   1);
}

START_TEST(test_attention_kernels) {
  Ctx c;
  ctx_init(&c);
  FaProgram *p = load_file(&c, FA_SRCDIR "/examples/attention/attention.fa");
  ck_assert_int_ge(p->nkernels, 1);
  static const int dims[] = {16, 32, 64, 128, 256};
  int total = 0, with_dot = 0;
  for (int ki = 0; ki < p->nkernels; ki++) {
    const FaKernelInfo *k = p->kernels[ki];
    FaBinding defs[32];
    FaLaunchConfig cfg;
    int ndef = base_bindings(&c.fc, p, k, defs, &cfg);
    const FaTuneAxis *bq = axis_of(k, "BLOCK_Q"), *bk = axis_of(k, "BLOCK_K");
    int nq = bq ? bq->nvalues : 1, nk = bk ? bk->nvalues : 1;
    const char *dname = param_of(k, "d_head") >= 0 ? "d_head" : param_of(k, "D") >= 0 ? "D" : NULL;
    bool has_causal = param_of(k, "is_causal") >= 0;
    for (int di = 0; di < FA_ARRAY_LEN(dims); di++)
      for (int qi = 0; qi < nq; qi++)
        for (int kj = 0; kj < nk; kj++)
          for (int causal = 0; causal < (has_causal ? 2 : 1); causal++) {
            FaBinding b[32];
            int n = 0;
            for (int i = 0; i < ndef && n < 28; i++) {
              const char *nm = defs[i].name;
              if ((bq && !strcmp(nm, "BLOCK_Q")) || (bk && !strcmp(nm, "BLOCK_K")) || (dname && !strcmp(nm, dname)) ||
                  !strcmp(nm, "is_causal"))
                continue;
              b[n++] = defs[i];
            }
            if (bq)
              b[n++] = bind("BLOCK_Q", bq->values[qi]);
            if (bk)
              b[n++] = bind("BLOCK_K", bk->values[kj]);
            if (dname)
              b[n++] = bind(dname, fa_const_int(dims[di]));
            if (has_causal)
              b[n++] = bind("is_causal", fa_const_bool(causal));
            if (k->prune) {
              FaConst keep;
              /* the prune may mention runtime sizes; skip it when it cannot be evaluated here.
                 It sees the launch settings at their defaults, as a launch's does. */
              int errs = c.fc.diag.errors;
              FaBinding pb[32];
              memcpy(pb, b, (size_t)n * sizeof *b);
              pb[n] = bind("warps", fa_const_int(4));
              pb[n + 1] = bind("stages", fa_const_int(2));
              pb[n + 2] = bind("pipeline", fa_config_prune_value("pipeline", fa_const_int(2)));   /* "tma" */
              pb[n + 3] = bind("schedule", fa_config_prune_value("schedule", fa_const_int(1))); /* "grid" */
              pb[n + 4] = bind("arch", fa_const_int(FA_ARCH_NONE));   /* as the interpreter sees it */
              if (fa_eval_const(&c.fc, p, k->prune, pb, n + 5, &keep) && !fa_const_truth(keep))
                continue;
              c.fc.diag.errors = errs;
            }
            for (int i = 0; i < n; i++)
              if (param_of(k, b[i].name) < 0)
                b[i] = b[--n];
            IrKernel *ir = fa_specialize(&c.fc, p, k, b, n, cfg);
            ck_assert_msg(ir != NULL, "%s with %s=%d BLOCK_Q=%d BLOCK_K=%d causal=%d:\n%s", k->name,
                          dname ? dname : "-", dims[di], bq ? (int)bq->values[qi].i : 0,
                          bk ? (int)bk->values[kj].i : 0, causal, diag(&c));
            check_kernel_ir(k, ir);
            with_dot += count_ops(ir->device, IR_DOT, NULL) > 0;
            total++;
          }
  }
  fprintf(stderr, "attention: %d specialisations\n", total);
  ck_assert_int_gt(total, 10);
  ck_assert_int_gt(with_dot, 0);
  ctx_free(&c);
}
END_TEST

/* attention forward: the loop carries the accumulators and block pointers. */
START_TEST(test_attention_forward_shape) {
  Ctx c;
  ctx_init(&c);
  FaProgram *p = load_file(&c, FA_SRCDIR "/examples/attention/attention.fa");
  FaKernelInfo *k = fa_program_kernel(p, "attn_fwd");
  ck_assert_msg(k != NULL, "attention.fa has no attn_fwd");
  FaBinding defs[32];
  FaLaunchConfig cfg;
  int n = base_bindings(&c.fc, p, k, defs, &cfg);
  IrKernel *ir = fa_specialize(&c.fc, p, k, defs, n, cfg);
  ck_assert_msg(ir != NULL, "%s", diag(&c));
  const IrOp *f = NULL;
  ck_assert_int_ge(count_ops(ir->device, IR_FOR, &f), 1);
  int carried_bptr = 0, carried_acc = 0;
  for (int i = 0; i < f->nresults; i++) {
    IrType t = f->results[i]->type;
    carried_bptr += t.dtype == DT_BLOCKPTR;
    carried_acc += t.dtype == DT_F32 && t.rank == 2;
  }
  ck_assert_int_ge(carried_bptr, 2);
  ck_assert_int_eq(carried_acc, 1);
  ck_assert_int_ge(count_ops(ir->device, IR_DOT, NULL), 2);
  ck_assert_int_ge(count_ops(ir->device, IR_REDUCE, NULL), 2);
  ctx_free(&c);
}
END_TEST

/* The launch-configuration axes: one table says names, defaults, allowed
 * values and fields; the prune sees the axes a space does not list. */
START_TEST(test_config_axes) {
  int n;
  const FaConfigAxis *axes = fa_config_axes(&n);
  ck_assert_int_ge(n, 2);
  const FaConfigAxis *w = fa_config_axis("warps"), *st = fa_config_axis("stages");
  ck_assert_ptr_nonnull(w);
  ck_assert_ptr_nonnull(st);
  ck_assert_ptr_null(fa_config_axis("BLOCK_Q"));
  ck_assert_ptr_null(fa_config_axis(NULL));
  ck_assert(fa_config_allowed(w, 8) && !fa_config_allowed(w, 6) && !fa_config_allowed(w, 64) &&
            !fa_config_allowed(w, 0));
  ck_assert(fa_config_allowed(st, 3) && !fa_config_allowed(st, 17) && !fa_config_allowed(st, 0));
  FaLaunchConfig c = {.stages = 5};
  fa_config_fill_defaults(&c);
  ck_assert_int_eq(c.warps, 4);
  ck_assert_int_eq(c.stages, 5);
  fa_config_set(&c, w, 16);
  ck_assert_int_eq(c.warps, 16);
  ck_assert_int_eq(fa_config_get(&c, st), 5);
  StrBuf sb;
  fa_sb_init(&sb);
  fa_sb_puts(&sb, "[BLOCK=64]");
  fa_config_print(&c, &sb);
  ck_assert_str_eq(sb.data, "[BLOCK=64] warps=16 stages=5");
  fa_sb_free(&sb);
  /* a named axis: printed and parsed by name (or number) */
  const FaConfigAxis *pl = fa_config_axis("pipeline");
  ck_assert_ptr_nonnull(pl);
  int v = 0;
  ck_assert(fa_config_parse(pl, "tma_ws", &v) && v == 4);
  ck_assert(fa_config_parse(pl, "2", &v) && v == 2);
  ck_assert(!fa_config_parse(pl, "tma_wz", &v) && !fa_config_parse(pl, "6", &v) && !fa_config_parse(pl, "", &v));
  ck_assert_str_eq(fa_config_value_name(pl, 5), "tma_ws_pp");
  ck_assert_ptr_null(fa_config_value_name(w, 4));
  ck_assert(fa_config_parse(w, "8", &v) && v == 8 && !fa_config_parse(w, "7", &v));
  for (int i = 0; i < n; i++) {
    ck_assert(fa_config_allowed(&axes[i], axes[i].default_value));
    ck_assert_ptr_eq(fa_config_axis(axes[i].name), &axes[i]);
  }
  /* a kernel whose space lists stages sees warps from the given config (or its default) */
  Ctx ctx;
  ctx_init(&ctx);
  program(&ctx, "@kernel(grid=(1,))\n@autotune(B=[16, 32], stages=[2, 3])\ndef k(x: *f32, B: constexpr):\n    pass\n");
  FaKernelInfo *k = fa_program_kernel(ctx.prog, "k");
  ck_assert_ptr_nonnull(k);
  FaBinding b[8];
  FaLaunchConfig given = {.warps = 8};
  /* the axes outside the space, then the target's compute capability */
  ck_assert_int_eq(fa_config_prune_bindings(k, &given, 90, b), n);
  ck_assert_str_eq(b[0].name, "warps");
  ck_assert_int_eq(b[0].value.i, 8);
  ck_assert_str_eq(b[n - 1].name, "arch");
  ck_assert_int_eq(b[n - 1].value.i, 90);
  ck_assert_int_eq(fa_config_prune_bindings(k, NULL, FA_ARCH_NONE, b), n);
  ck_assert_int_eq(b[0].value.i, 4);
  ck_assert_int_eq(b[n - 1].value.i, 0);
  FaBinding *defs;
  FaLaunchConfig dflt;
  ck_assert_int_eq(fa_kernel_default_bindings(&ctx.fc, ctx.prog, k, FA_ARCH_NONE, &defs, &dflt), 1);
  ck_assert_int_eq(dflt.warps, 4);
  ck_assert_int_eq(dflt.stages, 2);
  ctx_free(&ctx);
  /* a named axis in @autotune: its values by name */
  ctx_init(&ctx);
  program(&ctx, "@kernel(grid=(1,))\n@autotune(B=[16], pipeline=[\"cp_async\", \"tma_ws_pp\"])\n"
                "def k(x: *f32, B: constexpr):\n    pass\n");
  k = fa_program_kernel(ctx.prog, "k");
  ck_assert_ptr_nonnull(k);
  ck_assert_int_eq(k->ntune, 2);
  ck_assert_str_eq(k->tune[1].name, "pipeline");
  ck_assert_int_eq(k->tune[1].nvalues, 2);
  ck_assert(k->tune[1].values[0].kind == CK_INT && k->tune[1].values[0].i == 1);
  ck_assert(k->tune[1].values[1].kind == CK_INT && k->tune[1].values[1].i == 5);
  ctx_free(&ctx);
}
END_TEST

/* The default point of an @autotune space (autotune_point.h), the one
 * definition every tool and the runtime use. */
static const char point_src[] =
    "@kernel(grid=(1,))\n"
    "@autotune(A=[16, 32, 64], B=[64, 32], warps=[8, 4], prune=A % B == 0 and A <= n and stages < 3 and C == 7)\n"
    "def k(x: *f32, n: i32, A: constexpr, B: constexpr, C: constexpr = 7):\n"
    "    pass\n";

static const char *point_text(const FaKernelInfo *k, const FaAutotunePoint *pt) {
  static char buf[256];
  StrBuf sb;
  fa_sb_init(&sb);
  for (int t = 0; t < k->ntune; t++) {
    fa_sb_printf(&sb, "%s%s%s=", t ? " " : "", pt->chosen[t] ? "" : "!", k->tune[t].name);
    fa_const_print(pt->values[t], &sb);
  }
  fa_config_print(&pt->config, &sb);
  snprintf(buf, sizeof buf, "%s", sb.data ? sb.data : "");
  fa_sb_free(&sb);
  return buf;
}

START_TEST(test_autotune_default_point) {
  Ctx c;
  ctx_init(&c);
  FaProgram *p = program(&c, point_src);
  ck_assert_msg(p != NULL, "%s", diag(&c));
  const FaKernelInfo *k = fa_program_kernel(p, "k");
  FaAutotunePoint pt;
  /* nothing known: A % B rejects A=16 and A=32/B=64; at A=32, B=32 the prune
     reads n, which is unknown, so it admits the point */
  ck_assert(fa_autotune_default_point(&c.fc.arena, p, k, NULL, 0, NULL, FA_ARCH_NONE, &pt));
  ck_assert_str_eq(point_text(k, &pt), "A=32 B=32 warps=8 warps=8 stages=2");
  ck_assert(!pt.none_passes);
  ck_assert_int_eq(pt.nchosen, 3);
  ck_assert_str_eq(pt.source, "default");
  FaBinding out[4];
  ck_assert_int_eq(fa_autotune_point_bindings(k, &pt, out), 2);
  ck_assert_str_eq(out[0].name, "A");
  ck_assert_str_eq(out[1].name, "B");
  /* a runtime value the prune reads, and a given configuration axis outside
     the space: n=40 admits A=32, B=32; stages=3 (given) rejects everything */
  FaBinding known[3] = {bind("n", fa_const_int(40))};
  FaLaunchConfig given = {.warps = 0, .stages = 3};
  ck_assert(fa_autotune_default_point(&c.fc.arena, p, k, known, 1, NULL, FA_ARCH_NONE, &pt));
  ck_assert_str_eq(point_text(k, &pt), "A=32 B=32 warps=8 warps=8 stages=2");
  ck_assert(fa_autotune_default_point(&c.fc.arena, p, k, known, 1, &given, FA_ARCH_NONE, &pt));
  ck_assert(pt.none_passes);
  ck_assert_str_eq(point_text(k, &pt), "A=16 B=64 warps=8 warps=8 stages=3");
  ck_assert_str_eq(pt.source, "explicit+default");
  /* n=8: no tile fits, nothing passes; the open axes take their first values */
  known[0] = bind("n", fa_const_int(8));
  ck_assert(fa_autotune_default_point(&c.fc.arena, p, k, known, 1, NULL, FA_ARCH_NONE, &pt));
  ck_assert(pt.none_passes);
  ck_assert_str_eq(point_text(k, &pt), "A=16 B=64 warps=8 warps=8 stages=2");
  ck_assert_str_eq(pt.source, "default");
  /* the prune sees the constexprs' defaults, and what the caller gives instead */
  known[0] = bind("n", fa_const_int(1000));
  known[1] = bind("C", fa_const_int(8));
  ck_assert(fa_autotune_default_point(&c.fc.arena, p, k, known, 2, NULL, FA_ARCH_NONE, &pt));
  ck_assert(pt.none_passes);
  /* a fixed axis keeps its value and is never judged by the prune: A=16 with
     B=64 and warps=4 given is taken as it is (explicit); A=16 alone leaves
     B and warps open, and none of their values passes with it */
  known[1] = bind("A", fa_const_int(16));
  known[2] = bind("B", fa_const_int(64));
  given = (FaLaunchConfig){.warps = 4, .stages = 0};
  ck_assert(fa_autotune_default_point(&c.fc.arena, p, k, known, 3, &given, FA_ARCH_NONE, &pt));
  ck_assert(!pt.none_passes);
  ck_assert_int_eq(pt.nchosen, 0);
  ck_assert_str_eq(point_text(k, &pt), "!A=16 !B=64 !warps=4 warps=4 stages=2");
  ck_assert_str_eq(pt.source, "explicit");
  ck_assert_int_eq(fa_autotune_point_bindings(k, &pt, out), 0);
  ck_assert(fa_autotune_default_point(&c.fc.arena, p, k, known, 2, NULL, FA_ARCH_NONE, &pt));
  ck_assert(pt.none_passes);
  ck_assert_str_eq(point_text(k, &pt), "!A=16 B=64 warps=8 warps=8 stages=2");
  ck_assert_str_eq(pt.source, "explicit+default");
  StrBuf sb;
  fa_sb_init(&sb);
  fa_autotune_none_passes_message(k, &pt, &sb);
  ck_assert_str_eq(sb.data, "no point of the @autotune space of kernel 'k' passes its prune with A=16 given");
  fa_sb_free(&sb);
  /* the compile-time tools' rule: an error located at the prune */
  fa_autotune_report_none_passes(&c.fc, k, &pt);
  expect_error(&c, 2, 59, "passes its prune with A=16 given");
  ctx_free(&c);
}
END_TEST

/* A prune reads the target's compute capability as `arch` (sema.h): the
 * same space has a default per target, 0 standing for no GPU. */
START_TEST(test_autotune_prune_reads_arch) {
  Ctx c;
  ctx_init(&c);
  FaProgram *p = program(&c, "@kernel(grid=(1,))\n"
                             "@autotune(B=[128, 64], warps=[8, 4], prune=B == 64 or arch >= 90)\n"
                             "def k(x: *f32, B: constexpr):\n    pass\n");
  ck_assert_msg(p != NULL, "%s", diag(&c));
  const FaKernelInfo *k = fa_program_kernel(p, "k");
  static const struct {
    int arch;
    const char *point;
  } want[] = {{90, "B=128 warps=8 warps=8 stages=2"}, {100, "B=128 warps=8 warps=8 stages=2"},
              {80, "B=64 warps=8 warps=8 stages=2"}, {FA_ARCH_NONE, "B=64 warps=8 warps=8 stages=2"}};
  for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
    FaAutotunePoint pt;
    ck_assert(fa_autotune_default_point(&c.fc.arena, p, k, NULL, 0, NULL, want[i].arch, &pt));
    ck_assert(!pt.none_passes);
    ck_assert_str_eq(point_text(k, &pt), want[i].point);
  }
  FaBinding *defs;
  FaLaunchConfig cfg;
  ck_assert_int_eq(fa_kernel_default_bindings(&c.fc, p, k, 90, &defs, &cfg), 1);
  ck_assert_int_eq(defs[0].value.i, 128);
  ck_assert_int_eq(fa_kernel_default_bindings(&c.fc, p, k, 80, &defs, &cfg), 1);
  ck_assert_int_eq(defs[0].value.i, 64);
  ctx_free(&c);
  /* a parameter of that name is refused, where the kernel declares it */
  ctx_init(&c);
  ck_assert_ptr_null(program(&c, "@kernel(grid=(1,))\n"
                                 "@autotune(B=[128, 64], prune=arch >= 90)\n"
                                 "def k(x: *f32, arch: i32, B: constexpr):\n    pass\n"));
  expect_error(&c, 3, 16, "parameter 'arch' of kernel 'k' clashes with the target's compute capability");
  ctx_free(&c);
  /* without a prune there is nothing to clash with */
  ctx_init(&c);
  ck_assert_ptr_nonnull(program(&c, "@kernel(grid=(1,))\n@autotune(B=[128, 64])\n"
                                    "def k(x: *f32, arch: i32, B: constexpr):\n    pass\n"));
  ctx_free(&c);
}
END_TEST

/* @autotune(prefer=...) (autotune_point.h, rule 2): the default is the first
 * point that the prune admits and prefer takes, else the prune's first; a
 * fixed axis narrows both; an error does not prefer (rule 3). */
START_TEST(test_autotune_prefer) {
  Ctx c;
  ctx_init(&c);
  FaProgram *p = program(&c, "@kernel(grid=(1,))\n"
                             "@autotune(B=[128, 64, 32], warps=[8, 4], prune=B * warps <= 512,\n"
                             "          prefer=(B == 32 and arch == 90) or (B == 64 and n > 0))\n"
                             "def k(x: *f32, n: i32, B: constexpr):\n    pass\n");
  ck_assert_msg(p != NULL, "%s", diag(&c));
  const FaKernelInfo *k = fa_program_kernel(p, "k");
  ck_assert_ptr_nonnull(k->prefer);
  FaAutotunePoint pt;
  /* arch 90: B=32 on 8 warps, later in the space than the prune's first */
  ck_assert(fa_autotune_default_point(&c.fc.arena, p, k, NULL, 0, NULL, 90, &pt));
  ck_assert_str_eq(point_text(k, &pt), "B=32 warps=8 warps=8 stages=2");
  ck_assert(pt.preferred && !pt.none_passes);
  /* arch 80: prefer reads n, unknown, at B=64: an error, not preferred; so
     nothing is, and the prune's first point stays the default */
  ck_assert(fa_autotune_default_point(&c.fc.arena, p, k, NULL, 0, NULL, 80, &pt));
  ck_assert_str_eq(point_text(k, &pt), "B=128 warps=4 warps=4 stages=2");
  ck_assert(!pt.preferred && !pt.none_passes);
  /* with n known, B=64 on 8 warps */
  FaBinding known[2] = {bind("n", fa_const_int(1))};
  ck_assert(fa_autotune_default_point(&c.fc.arena, p, k, known, 1, NULL, 80, &pt));
  ck_assert_str_eq(point_text(k, &pt), "B=64 warps=8 warps=8 stages=2");
  /* warps=4 given: among the points with 4 warps, B=32 on Hopper */
  FaLaunchConfig given = {.warps = 4, .stages = 0};
  ck_assert(fa_autotune_default_point(&c.fc.arena, p, k, NULL, 0, &given, 90, &pt));
  ck_assert_str_eq(point_text(k, &pt), "B=32 !warps=4 warps=4 stages=2");
  /* B=128 given: prefer takes nothing with it; the prune's first (4 warps) */
  known[0] = bind("B", fa_const_int(128));
  ck_assert(fa_autotune_default_point(&c.fc.arena, p, k, known, 1, NULL, 90, &pt));
  ck_assert_str_eq(point_text(k, &pt), "!B=128 warps=4 warps=4 stages=2");
  ck_assert(!pt.preferred && !pt.none_passes);
  ctx_free(&c);
  /* prefer sees what the prune sees, and no more; `arch` as a parameter clashes */
  ctx_init(&c);
  ck_assert_ptr_null(program(&c, "@kernel(grid=(1,))\n@autotune(B=[128, 64], prefer=B == nb)\n"
                                 "def k(x: *f32, B: constexpr):\n    pass\n"));
  expect_error(&c, 2, 36, "unknown name 'nb'");
  ctx_free(&c);
  ctx_init(&c);
  ck_assert_ptr_null(program(&c, "@kernel(grid=(1,))\n@autotune(B=[128, 64], prefer=arch >= 90)\n"
                                 "def k(x: *f32, arch: i32, B: constexpr):\n    pass\n"));
  expect_error(&c, 3, 16, "which @autotune(prefer=...) reads as 'arch'");
  ctx_free(&c);
}
END_TEST

static Suite *sema_suite(void) {
  Suite *s = suite_create("sema");
  TCase *t = tcase_create("types");
  tcase_add_test(t, test_promotion_table);
  tcase_add_test(t, test_broadcasting);
  suite_add_tcase(s, t);
  t = tcase_create("consteval");
  tcase_add_test(t, test_const_fold);
  tcase_add_test(t, test_const_parse_print);
  tcase_add_test(t, test_const_eval_program);
  tcase_add_test(t, test_const_eval_errors);
  tcase_add_test(t, test_config_axes);
  tcase_add_test(t, test_autotune_default_point);
  tcase_add_test(t, test_autotune_prune_reads_arch);
  tcase_add_test(t, test_autotune_prefer);
  suite_add_tcase(s, t);
  t = tcase_create("lower");
  tcase_add_test(t, test_literal_adapts);
  tcase_add_test(t, test_promotions_in_ir);
  tcase_add_test(t, test_broadcast_in_ir);
  tcase_add_test(t, test_loop_carried);
  tcase_add_test(t, test_runtime_if);
  tcase_add_test(t, test_constexpr_if_and_helpers);
  tcase_add_test(t, test_specialize_bindings);
  tcase_add_test(t, test_grid_and_extents);
  tcase_add_test(t, test_ir_printing);
  suite_add_tcase(s, t);
  t = tcase_create("attention");
  tcase_set_timeout(t, 120);
  tcase_add_test(t, test_attention_kernels);
  tcase_add_test(t, test_attention_forward_shape);
  suite_add_tcase(s, t);
  return s;
}

int main(void) {
  SRunner *r = srunner_create(sema_suite());
  srunner_run_all(r, CK_NORMAL);
  int failed = srunner_ntests_failed(r);
  srunner_free(r);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
