/* check_interp.c - unit tests of the CPU interpreter: each builtin's
 * semantics on small kernels built with the IR builder (so that these tests
 * do not depend on the front end): f16/bf16 rounding against exactly known
 * values, padding and boundary checks, masks, dropped out-of-bounds stores,
 * reductions, dot accumulation order and precision, loops, host functions,
 * atomics, threads, and the located errors of bad accesses.
 */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "interp.h"

/* ---- a tiny kernel-building kit ------------------------------------------------- */

static const char test_text[] =
    "line 1\nline 2\nline 3\nline 4\nline 5\nline 6\nline 7\nline 8\nline 9\nline 10\n";
static Source test_src = {"t.fa", test_text, sizeof test_text - 1};

typedef struct Kit {
  FaCompiler fc;
  IrFunction *fn;
  IrBuilder b;
  IrKernel k;
  FaInterp *in;
} Kit;

static SrcLoc L(int line, int col) { return fa_loc(&test_src, line, col); }

static void kit_init(Kit *t) {
  memset(t, 0, sizeof *t);
  fa_arena_init(&t->fc.arena);
  fa_diag_init(&t->fc.diag, NULL);
  t->fn = fa_ir_function_new(&t->fc.arena, "k", L(1, 1));
  t->b.fn = t->fn;
  t->b.region = t->fn->body;
  t->k.device = t->fn;
  t->k.warps = 4;
  t->k.stages = 2;
}

static void kit_free(Kit *t) {
  fa_interp_free(t->in);
  fa_diag_free(&t->fc.diag);
  fa_arena_free(&t->fc.arena);
}

static const char *diag_text(Kit *t) { return t->fc.diag.text.data ? t->fc.diag.text.data : ""; }

static IrType blk1(DType dt, int n) { return fa_type_block(dt, 1, &n); }
static IrType blk2(DType dt, int m, int n) {
  int s[2] = {m, n};
  return fa_type_block(dt, 2, s);
}

static IrValue *param_ptr(Kit *t, const char *name, DType dt) {
  return fa_ir_add_param(t->fn, name, fa_type_ptr(dt, 0, NULL), t->fn->nparams, L(1, 1))->value;
}
static IrValue *param_scalar(Kit *t, const char *name, DType dt) {
  return fa_ir_add_param(t->fn, name, fa_type_scalar(dt), t->fn->nparams, L(1, 1))->value;
}

static IrValue *op1(Kit *t, IrOpKind kind, int sub, IrType type, IrValue *a) {
  return fa_ir_op1(&t->b, kind, sub, L(2, 3), type, &a, 1);
}
static IrValue *op2(Kit *t, IrOpKind kind, int sub, IrType type, IrValue *a, IrValue *b) {
  IrValue *ops[2] = {a, b};
  return fa_ir_op1(&t->b, kind, sub, L(2, 3), type, ops, 2);
}
static IrValue *op3(Kit *t, IrOpKind kind, int sub, IrType type, IrValue *a, IrValue *b, IrValue *c) {
  IrValue *ops[3] = {a, b, c};
  return fa_ir_op1(&t->b, kind, sub, L(2, 3), type, ops, 3);
}
static IrValue *ci(Kit *t, IrType type, int64_t v) { return fa_ir_const_int(&t->b, L(2, 1), type, v); }
static IrValue *cf(Kit *t, IrType type, double v) { return fa_ir_const_float(&t->b, L(2, 1), type, v); }
static IrValue *i32(Kit *t, int64_t v) { return ci(t, fa_type_scalar(DT_I32), v); }
static IrValue *i64(Kit *t, int64_t v) { return ci(t, fa_type_scalar(DT_I64), v); }

static IrValue *arange(Kit *t, int n) {
  IrType ty = blk1(DT_I32, n);
  IrOp *op = fa_ir_op(&t->b, IR_ARANGE, L(2, 1), NULL, 0, &ty, 1);
  op->ival = 0;
  op->ival2 = n;
  return op->results[0];
}

/* p + offs for a scalar pointer p and an i32[n] block of offsets */
static IrValue *ptrs(Kit *t, IrValue *p, IrValue *offs) {
  IrType pt = fa_type_ptr(p->type.pointee, offs->type.rank, offs->type.shape);
  IrValue *sp = op1(t, IR_SPLAT, 0, pt, p);
  return op2(t, IR_PTR_ADD, 0, pt, sp, offs);
}

static IrValue *load(Kit *t, IrValue *p, IrValue *mask, IrValue *other) {
  IrValue *ops[3] = {p, mask, other};
  IrType ty = p->type;
  ty.dtype = p->type.pointee;
  ty.pointee = DT_VOID;
  return fa_ir_op1(&t->b, IR_LOAD, 0, L(3, 5), ty, ops, mask ? (other ? 3 : 2) : 1);
}

static void store_at(Kit *t, SrcLoc loc, IrValue *p, IrValue *v, IrValue *mask) {
  IrValue *ops[3] = {p, v, mask};
  fa_ir_op(&t->b, IR_STORE, loc, ops, mask ? 3 : 2, NULL, 0);
}
static void store(Kit *t, IrValue *p, IrValue *v, IrValue *mask) { store_at(t, L(4, 7), p, v, mask); }

static IrValue *bptr(Kit *t, IrValue *base, int rank, const int64_t *shape, const int64_t *strides,
                     const int64_t *offsets, const int *block) {
  IrValue *ops[1 + 3 * FA_MAX_RANK];
  ops[0] = base;
  for (int d = 0; d < rank; d++) {
    ops[1 + d] = i64(t, shape[d]);
    ops[1 + rank + d] = i64(t, strides[d]);
    ops[1 + 2 * rank + d] = i32(t, offsets[d]);
  }
  IrType ty = fa_type_blockptr(base->type.pointee, rank, block);
  IrOp *op = fa_ir_op(&t->b, IR_MAKE_BLOCK_PTR, L(2, 1), ops, 1 + 3 * rank, &ty, 1);
  for (int d = 0; d < rank; d++)
    op->perm[d] = rank - 1 - d;
  return op->results[0];
}

static IrValue *load_block(Kit *t, IrValue *bp, unsigned boundary, IrPadding pad) {
  IrType ty = fa_type_block(bp->type.pointee, bp->type.rank, bp->type.shape);
  IrOp *op = fa_ir_op(&t->b, IR_LOAD_BLOCK, L(5, 9), &bp, 1, &ty, 1);
  op->boundary = boundary;
  op->padding = pad;
  return op->results[0];
}

static void store_block(Kit *t, IrValue *bp, IrValue *v, unsigned boundary) {
  IrValue *ops[2] = {bp, v};
  IrOp *op = fa_ir_op(&t->b, IR_STORE_BLOCK, L(6, 2), ops, 2, NULL, 0);
  op->boundary = boundary;
}

static void ret(Kit *t) { fa_ir_op(&t->b, IR_RETURN, L(9, 1), NULL, 0, NULL, 0); }

/* Verifies the kernel, binds buffers (in parameter order; NULL data = scalar
 * taken from scal[]) and runs it on the given grid. */
typedef struct Arg {
  DType dtype;
  void *data;
  int64_t count;
  FaHostValue scalar;
} Arg;

static bool run_grid(Kit *t, const Arg *args, int nargs, int64_t gx, int64_t gy, int threads) {
  ck_assert_msg(fa_ir_verify(t->fn, &t->fc.diag), "IR does not verify: %s", diag_text(t));
  t->in = fa_interp_new(&t->fc, &t->k);
  ck_assert_ptr_nonnull(t->in);
  ck_assert_int_eq(nargs, t->fn->nparams);
  for (int i = 0; i < nargs; i++) {
    bool ok = args[i].data ? fa_interp_bind_buffer(t->in, i, args[i].dtype, args[i].data, args[i].count)
                           : fa_interp_bind_scalar(t->in, i, args[i].scalar);
    ck_assert_msg(ok, "binding %d: %s", i, diag_text(t));
  }
  int64_t grid[3] = {gx, gy, 1};
  FaInterpOptions opt = {threads, grid};
  return fa_interp_run(t->in, &opt);
}

static bool run1(Kit *t, const Arg *args, int nargs) { return run_grid(t, args, nargs, 1, 1, 1); }

static Arg buf(DType dt, void *data, int64_t n) {
  Arg a = {dt, data, n, {DT_VOID, 0, 0}};
  return a;
}

static uint32_t fbits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}

/* ---- rounding ------------------------------------------------------------------------- */

/* y[i] = (f32)(DT)(x[i]) for n elements; DT = f16 or bf16 */
static void round_trip(DType dt, const float *x, float *y, int n) {
  Kit t;
  kit_init(&t);
  IrValue *px = param_ptr(&t, "x", DT_F32), *py = param_ptr(&t, "y", DT_F32);
  IrValue *offs = arange(&t, n);
  IrValue *v = load(&t, ptrs(&t, px, offs), NULL, NULL);
  IrValue *h = op1(&t, IR_CAST, 0, blk1(dt, n), v);
  IrValue *back = op1(&t, IR_CAST, 0, blk1(DT_F32, n), h);
  store(&t, ptrs(&t, py, offs), back, NULL);
  ret(&t);
  Arg args[2] = {buf(DT_F32, (void *)x, n), buf(DT_F32, y, n)};
  ck_assert_msg(run1(&t, args, 2), "%s", diag_text(&t));
  kit_free(&t);
}

START_TEST(test_f16_rounding) {
  float x[16] = {
      1.0f + 0x1p-11f,          /* tie between 1 and 1+2^-10: to even, 1 */
      1.0f + 3 * 0x1p-11f,      /* tie between 1+2^-10 and 1+2^-9: to even, 1+2^-9 */
      65504.0f,                 /* largest finite */
      65519.0f,                 /* below the tie with 65536: stays 65504 */
      65520.0f,                 /* tie with 65536 (not representable): infinity */
      0x1p-24f,                 /* smallest subnormal */
      0x1p-25f,                 /* tie between 0 and 2^-24: to even, 0 */
      3 * 0x1p-26f,             /* 0.75 * 2^-24: up to 2^-24 */
      0.1f,
      -0.1f,
      1e-6f,                    /* subnormal range: multiple of 2^-24 nearest */
      -70000.0f,
      NAN,
      2049.0f,                  /* tie between 2048 and 2050: to even, 2048 */
      2051.0f,                  /* tie between 2050 and 2052: to even, 2052 */
      0x1p-14f * (1 + 0x1p-10f) /* smallest normal + 1 ulp: exact */
  };
  float want[16] = {1.0f, 1.0f + 0x1p-9f, 65504.0f, 65504.0f, INFINITY, 0x1p-24f, 0.0f, 0x1p-24f,
                    0.0999755859375f, -0.0999755859375f, 17 * 0x1p-24f, -INFINITY, NAN, 2048.0f, 2052.0f,
                    0x1p-14f * (1 + 0x1p-10f)};
  float y[16];
  round_trip(DT_F16, x, y, 16);
  for (int i = 0; i < 16; i++) {
    if (isnan(want[i]))
      ck_assert_msg(isnan(y[i]), "element %d: want NaN, got %a", i, (double)y[i]);
    else
      ck_assert_msg(fbits(y[i]) == fbits(want[i]), "element %d: %a -> %a, want %a", i, (double)x[i], (double)y[i],
                    (double)want[i]);
  }
}
END_TEST

START_TEST(test_bf16_rounding) {
  float x[8] = {1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, 0.1f, -3.0f, 1e-40f, 3.4e38f, NAN, 0x1p-133f};
  float want[8] = {1.0f, 1.0f + 0x1p-6f, 0.10009765625f, -3.0f, 0 /* set below */, INFINITY, NAN, 0x1p-133f};
  /* 1e-40 is an f32 subnormal; bf16 keeps 7 bits after the f32 subnormal's
   * leading bit position: the nearest multiple of 2^-133 */
  want[4] = (float)(nearbyint(1e-40f / 0x1p-133f) * 0x1p-133f);
  float y[8];
  round_trip(DT_BF16, x, y, 8);
  for (int i = 0; i < 8; i++) {
    if (isnan(want[i]))
      ck_assert_msg(isnan(y[i]), "element %d: want NaN", i);
    else
      ck_assert_msg(fbits(y[i]) == fbits(want[i]), "element %d: %a -> %a, want %a", i, (double)x[i], (double)y[i],
                    (double)want[i]);
  }
}
END_TEST

/* f16 / bf16 buffers hold the exact bit patterns */
START_TEST(test_half_memory) {
  Kit t;
  kit_init(&t);
  IrValue *px = param_ptr(&t, "x", DT_F32), *ph = param_ptr(&t, "h", DT_F16), *pb = param_ptr(&t, "b", DT_BF16);
  IrValue *po = param_ptr(&t, "o", DT_F32);
  IrValue *offs = arange(&t, 4);
  IrValue *v = load(&t, ptrs(&t, px, offs), NULL, NULL);
  store(&t, ptrs(&t, ph, offs), op1(&t, IR_CAST, 0, blk1(DT_F16, 4), v), NULL);
  store(&t, ptrs(&t, pb, offs), op1(&t, IR_CAST, 0, blk1(DT_BF16, 4), v), NULL);
  /* read the f16 back and add it to itself in f16 */
  IrValue *h = load(&t, ptrs(&t, ph, offs), NULL, NULL);
  IrValue *hh = op2(&t, IR_BINARY, BIN_ADD, blk1(DT_F16, 4), h, h);
  store(&t, ptrs(&t, po, offs), op1(&t, IR_CAST, 0, blk1(DT_F32, 4), hh), NULL);
  ret(&t);
  float x[4] = {1.0f, 65504.0f, 0x1p-24f, -2.0f};
  uint16_t hb[4] = {0}, bb[4] = {0};
  float o[4];
  Arg args[4] = {buf(DT_F32, x, 4), buf(DT_F16, hb, 4), buf(DT_BF16, bb, 4), buf(DT_F32, o, 4)};
  ck_assert_msg(run1(&t, args, 4), "%s", diag_text(&t));
  ck_assert_uint_eq(hb[0], 0x3c00);
  ck_assert_uint_eq(hb[1], 0x7bff);
  ck_assert_uint_eq(hb[2], 0x0001);
  ck_assert_uint_eq(hb[3], 0xc000);
  ck_assert_uint_eq(bb[0], 0x3f80);
  ck_assert_uint_eq(bb[1], 0x4780);   /* 65504 rounds to 65536 in bf16 */
  ck_assert_uint_eq(bb[3], 0xc000);
  ck_assert(o[0] == 2.0f);
  ck_assert(isinf(o[1]) && o[1] > 0);  /* 65504 + 65504 overflows f16 */
  ck_assert(o[2] == 0x1p-23f);
  ck_assert(o[3] == -4.0f);
  kit_free(&t);
}
END_TEST

/* f32 arithmetic rounds each result to f32; f16 arithmetic to f16 */
START_TEST(test_arith_rounding) {
  Kit t;
  kit_init(&t);
  IrValue *po = param_ptr(&t, "o", DT_F32);
  IrValue *a = cf(&t, blk1(DT_F32, 2), 16777216.0), *one = cf(&t, blk1(DT_F32, 2), 1.0);
  IrValue *s = op2(&t, IR_BINARY, BIN_ADD, blk1(DT_F32, 2), a, one);   /* 2^24 + 1 -> 2^24 */
  IrValue *h = cf(&t, blk1(DT_F16, 2), 2048.0), *h1 = cf(&t, blk1(DT_F16, 2), 1.0);
  IrValue *hs = op2(&t, IR_BINARY, BIN_ADD, blk1(DT_F16, 2), h, h1);   /* 2049 -> 2048 */
  IrValue *hsum = op1(&t, IR_CAST, 0, blk1(DT_F32, 2), hs);
  IrValue *third = op2(&t, IR_BINARY, BIN_DIV, blk1(DT_F32, 2), one, cf(&t, blk1(DT_F32, 2), 3.0));
  IrValue *offs = arange(&t, 2);
  IrValue *p = ptrs(&t, po, offs);
  store(&t, p, s, NULL);
  store(&t, op2(&t, IR_PTR_ADD, 0, p->type, p, ci(&t, blk1(DT_I32, 2), 2)), hsum, NULL);
  store(&t, op2(&t, IR_PTR_ADD, 0, p->type, p, ci(&t, blk1(DT_I32, 2), 4)), third, NULL);
  ret(&t);
  float o[6];
  Arg args[1] = {buf(DT_F32, o, 6)};
  ck_assert_msg(run1(&t, args, 1), "%s", diag_text(&t));
  ck_assert(o[0] == 16777216.0f && o[1] == 16777216.0f);
  ck_assert(o[2] == 2048.0f);
  ck_assert(o[4] == 1.0f / 3.0f);
  kit_free(&t);
}
END_TEST

/* exp2/log2/exp/log/sqrt are the f32 functions */
START_TEST(test_math_f32) {
  IrUnaryOp ops[6] = {UN_EXP2, UN_LOG2, UN_EXP, UN_LOG, UN_SQRT, UN_RSQRT};
  for (int k = 0; k < 6; k++) {
    Kit t;
    kit_init(&t);
    IrValue *px = param_ptr(&t, "x", DT_F32), *py = param_ptr(&t, "y", DT_F32);
    IrValue *offs = arange(&t, 8);
    IrValue *v = load(&t, ptrs(&t, px, offs), NULL, NULL);
    store(&t, ptrs(&t, py, offs), op1(&t, IR_UNARY, ops[k], blk1(DT_F32, 8), v), NULL);
    ret(&t);
    float x[8] = {0.5f, 1.0f, 2.0f, 3.3f, 10.0f, -1.5f, 0.0f, 1e-3f}, y[8];
    Arg args[2] = {buf(DT_F32, x, 8), buf(DT_F32, y, 8)};
    ck_assert_msg(run1(&t, args, 2), "%s", diag_text(&t));
    for (int i = 0; i < 8; i++) {
      float w = ops[k] == UN_EXP2 ? exp2f(x[i]) : ops[k] == UN_LOG2 ? log2f(x[i]) : ops[k] == UN_EXP ? expf(x[i])
              : ops[k] == UN_LOG ? logf(x[i]) : ops[k] == UN_SQRT ? sqrtf(x[i]) : 1.0f / sqrtf(x[i]);
      if (isnan(w))
        ck_assert(isnan(y[i]));
      else
        ck_assert_msg(fbits(w) == fbits(y[i]), "op %d x=%g: %a vs %a", ops[k], (double)x[i], (double)y[i], (double)w);
    }
    kit_free(&t);
  }
}
END_TEST

START_TEST(test_casts_int) {
  Kit t;
  kit_init(&t);
  IrValue *px = param_ptr(&t, "x", DT_F32), *pi = param_ptr(&t, "i", DT_I32), *pw = param_ptr(&t, "w", DT_I32);
  IrValue *offs = arange(&t, 8);
  IrValue *v = load(&t, ptrs(&t, px, offs), NULL, NULL);
  IrValue *iv = op1(&t, IR_CAST, 0, blk1(DT_I32, 8), v);
  store(&t, ptrs(&t, pi, offs), iv, NULL);
  /* i32 arithmetic wraps: x * 65536 * 65536 */
  IrValue *big = ci(&t, blk1(DT_I32, 8), 65536);
  IrValue *w = op2(&t, IR_BINARY, BIN_MUL, blk1(DT_I32, 8), op2(&t, IR_BINARY, BIN_MUL, blk1(DT_I32, 8), iv, big), big);
  IrValue *w2 = op2(&t, IR_BINARY, BIN_ADD, blk1(DT_I32, 8), w, op1(&t, IR_CAST, 0, blk1(DT_I32, 8),
                    op1(&t, IR_CAST, 0, blk1(DT_I8, 8), op2(&t, IR_BINARY, BIN_MUL, blk1(DT_I32, 8), iv,
                                                             ci(&t, blk1(DT_I32, 8), 100)))));
  store(&t, ptrs(&t, pw, offs), w2, NULL);
  ret(&t);
  float x[8] = {1.9f, -1.9f, 3e9f, -3e9f, NAN, 0.0f, 2.0f, -2.5f};
  int32_t ia[8], wa[8];
  Arg args[3] = {buf(DT_F32, x, 8), buf(DT_I32, ia, 8), buf(DT_I32, wa, 8)};
  ck_assert_msg(run1(&t, args, 3), "%s", diag_text(&t));
  int32_t want[8] = {1, -1, INT32_MAX, INT32_MIN, 0, 0, 2, -2};
  for (int i = 0; i < 8; i++)
    ck_assert_int_eq(ia[i], want[i]);
  /* (i * 2^32) wraps to 0; (i8)(i * 100) wraps: 100, -100, (i8)(INT32_MAX*100 wrapped)... */
  ck_assert_int_eq(wa[0], 100);
  ck_assert_int_eq(wa[1], -100);
  ck_assert_int_eq(wa[6], -56);   /* 200 as i8 */
  ck_assert_int_eq(wa[7], 56);    /* -200 as i8 */
  kit_free(&t);
}
END_TEST

/* ---- memory: padding, masks, boundary checks ---------------------------------------- */

/* A 3x5 f32 matrix read through a 4x8 block pointer at (offset_r, offset_c). */
static void block_load_case(unsigned boundary, IrPadding pad, int64_t r0, int64_t c0, float *out, int64_t nbuf,
                            bool expect_ok, const char *expect_msg) {
  Kit t;
  kit_init(&t);
  IrValue *px = param_ptr(&t, "x", DT_F32), *po = param_ptr(&t, "o", DT_F32);
  int blk[2] = {4, 8};
  int64_t shape[2] = {3, 5}, strides[2] = {5, 1}, offs[2] = {r0, c0};
  IrValue *bp = bptr(&t, px, 2, shape, strides, offs, blk);
  IrValue *v = load_block(&t, bp, boundary, pad);
  int64_t oshape[2] = {4, 8}, ostr[2] = {8, 1}, zero[2] = {0, 0};
  IrValue *bo = bptr(&t, po, 2, oshape, ostr, zero, blk);
  store_block(&t, bo, v, 0);
  ret(&t);
  float x[64];
  for (int i = 0; i < 64; i++)
    x[i] = (float)(i + 1);
  Arg args[2] = {buf(DT_F32, x, nbuf), buf(DT_F32, out, 32)};
  bool ok = run1(&t, args, 2);
  ck_assert_msg(ok == expect_ok, "run gave %d: %s", ok, diag_text(&t));
  if (expect_msg)
    ck_assert_msg(strstr(diag_text(&t), expect_msg), "diagnostic '%s' lacks '%s'", diag_text(&t), expect_msg);
  kit_free(&t);
}

START_TEST(test_block_padding) {
  float o[32];
  /* both axes checked, zero padding */
  block_load_case(3, PAD_ZERO, 0, 0, o, 15, true, NULL);
  for (int r = 0; r < 4; r++)
    for (int c = 0; c < 8; c++)
      ck_assert_msg(o[r * 8 + c] == (r < 3 && c < 5 ? (float)(r * 5 + c + 1) : 0.0f), "zero pad at %d,%d: %g", r, c,
                    (double)o[r * 8 + c]);
  /* NaN padding, block shifted to (1, 2) */
  block_load_case(3, PAD_NAN, 1, 2, o, 15, true, NULL);
  for (int r = 0; r < 4; r++)
    for (int c = 0; c < 8; c++) {
      int rr = r + 1, cc = c + 2;
      if (rr < 3 && cc < 5)
        ck_assert(o[r * 8 + c] == (float)(rr * 5 + cc + 1));
      else
        ck_assert_msg(isnan(o[r * 8 + c]), "NaN pad at %d,%d", r, c);
    }
  /* negative offsets are outside too */
  block_load_case(3, PAD_ZERO, -1, -2, o, 15, true, NULL);
  ck_assert(o[0] == 0.0f && o[8 + 2] == 1.0f);
  /* only rows checked: columns 5..7 read the next row's elements of the buffer */
  block_load_case(1, PAD_ZERO, 0, 0, o, 64, true, NULL);
  ck_assert(o[5] == 6.0f && o[7] == 8.0f && o[2 * 8 + 7] == 18.0f && o[3 * 8] == 0.0f);
  /* ... but not past the end of the buffer: a located error */
  block_load_case(1, PAD_ZERO, 0, 0, o, 15, false, "t.fa:5:9: error: load out of bounds of buffer 'x' (element 15, size 15)");
  /* unchecked axes: the same error for rows */
  block_load_case(0, PAD_ZERO, 1, 0, o, 15, false, "load out of bounds of buffer 'x'");
}
END_TEST

START_TEST(test_block_store_dropped) {
  Kit t;
  kit_init(&t);
  IrValue *po = param_ptr(&t, "o", DT_F32);
  int blk[2] = {4, 4};
  int64_t shape[2] = {3, 3}, strides[2] = {3, 1}, offs[2] = {1, -1};
  IrValue *bp = bptr(&t, po, 2, shape, strides, offs, blk);
  IrValue *r = op1(&t, IR_CAST, 0, blk2(DT_F32, 4, 4),
                   op1(&t, IR_RESHAPE, 0, blk2(DT_I32, 4, 4), arange(&t, 16)));
  store_block(&t, bp, r, 3);
  ret(&t);
  float o[9];
  for (int i = 0; i < 9; i++)
    o[i] = -1;
  Arg args[1] = {buf(DT_F32, o, 9)};
  ck_assert_msg(run1(&t, args, 1), "%s", diag_text(&t));
  /* block element (i, j) goes to (1 + i, j - 1) when inside 3x3 */
  float want[9] = {-1, -1, -1, 1, 2, 3, 5, 6, 7};
  for (int i = 0; i < 9; i++)
    ck_assert_msg(o[i] == want[i], "o[%d] = %g", i, (double)o[i]);
  kit_free(&t);
}
END_TEST

START_TEST(test_masked_pointer_ops) {
  Kit t;
  kit_init(&t);
  IrValue *px = param_ptr(&t, "x", DT_F32), *po = param_ptr(&t, "o", DT_F32), *pn = param_scalar(&t, "n", DT_I32);
  IrValue *offs = arange(&t, 8);
  IrValue *nb = op1(&t, IR_SPLAT, 0, blk1(DT_I32, 8), pn);
  IrValue *mask = op2(&t, IR_CMP, CMP_LT, blk1(DT_I1, 8), offs, nb);
  IrValue *other = cf(&t, blk1(DT_F32, 8), -7.0);
  IrValue *v = load(&t, ptrs(&t, px, offs), mask, other);      /* lanes >= n read nothing */
  IrValue *v0 = load(&t, ptrs(&t, px, offs), mask, NULL);      /* masked lanes give 0 */
  IrValue *s = op2(&t, IR_BINARY, BIN_ADD, blk1(DT_F32, 8), v, v0);
  IrValue *mask2 = op2(&t, IR_CMP, CMP_GE, blk1(DT_I1, 8), offs, ci(&t, blk1(DT_I32, 8), 2));
  IrValue *both = op2(&t, IR_BINARY, BIN_AND, blk1(DT_I1, 8), mask, mask2);
  store(&t, ptrs(&t, po, offs), s, both);                      /* lanes outside o are masked */
  ret(&t);
  float x[5] = {1, 2, 3, 4, 5}, o[5] = {0, 0, 0, 0, 0};
  Arg args[3] = {buf(DT_F32, x, 5), buf(DT_F32, o, 5), {DT_VOID, NULL, 0, fa_host_int(DT_I32, 5)}};
  ck_assert_msg(run1(&t, args, 3), "%s", diag_text(&t));
  float want[5] = {0, 0, 6, 8, 10};
  for (int i = 0; i < 5; i++)
    ck_assert_msg(o[i] == want[i], "o[%d] = %g", i, (double)o[i]);
  kit_free(&t);

  /* with n = 6 the load touches x[5]: a located error naming the buffer */
  kit_init(&t);
  px = param_ptr(&t, "x", DT_F32);
  po = param_ptr(&t, "o", DT_F32);
  pn = param_scalar(&t, "n", DT_I32);
  offs = arange(&t, 8);
  nb = op1(&t, IR_SPLAT, 0, blk1(DT_I32, 8), pn);
  mask = op2(&t, IR_CMP, CMP_LT, blk1(DT_I1, 8), offs, nb);
  v = load(&t, ptrs(&t, px, offs), mask, NULL);
  store_at(&t, L(7, 4), ptrs(&t, po, offs), v, mask);
  ret(&t);
  Arg args2[3] = {buf(DT_F32, x, 5), buf(DT_F32, o, 5), {DT_VOID, NULL, 0, fa_host_int(DT_I32, 6)}};
  ck_assert(!run1(&t, args2, 3));
  ck_assert_msg(strstr(diag_text(&t), "t.fa:3:5: error: load out of bounds of buffer 'x' (element 5, size 5)"), "%s",
                diag_text(&t));
  ck_assert_msg(strstr(diag_text(&t), "in program (0, 0, 0)"), "%s", diag_text(&t));
  kit_free(&t);
}
END_TEST

START_TEST(test_store_out_of_bounds_error) {
  Kit t;
  kit_init(&t);
  IrValue *po = param_ptr(&t, "out", DT_F32);
  IrValue *offs = arange(&t, 4);
  IrValue *p = ptrs(&t, po, op2(&t, IR_BINARY, BIN_SUB, blk1(DT_I32, 4), offs, ci(&t, blk1(DT_I32, 4), 1)));
  store_at(&t, L(8, 11), p, cf(&t, blk1(DT_F32, 4), 1.0), NULL);
  ret(&t);
  float o[4] = {0, 0, 0, 0};
  Arg args[1] = {buf(DT_F32, o, 4)};
  ck_assert(!run1(&t, args, 1));
  ck_assert_msg(strstr(diag_text(&t), "t.fa:8:11: error: store out of bounds of buffer 'out' (element -1, size 4)"),
                "%s", diag_text(&t));
  kit_free(&t);
}
END_TEST

/* ---- reductions and dot -------------------------------------------------------------- */

START_TEST(test_reductions) {
  Kit t;
  kit_init(&t);
  IrValue *px = param_ptr(&t, "x", DT_F32), *po = param_ptr(&t, "o", DT_F32);
  int blk[2] = {2, 4};
  int64_t shape[2] = {2, 4}, strides[2] = {4, 1}, zero[2] = {0, 0};
  IrValue *v = load_block(&t, bptr(&t, px, 2, shape, strides, zero, blk), 0, PAD_NONE);
  IrValue *r[6];
  r[0] = op1(&t, IR_REDUCE, RED_SUM, blk1(DT_F32, 2), v);
  r[0]->def->axis = 1;
  r[1] = op1(&t, IR_REDUCE, RED_MAX, blk1(DT_F32, 2), v);
  r[1]->def->axis = 1;
  r[2] = op1(&t, IR_REDUCE, RED_MIN, blk1(DT_F32, 2), v);
  r[2]->def->axis = 1;
  r[3] = op1(&t, IR_REDUCE, RED_SUM, blk1(DT_F32, 4), v);
  r[3]->def->axis = 0;
  r[4] = op1(&t, IR_REDUCE, RED_MAX, blk1(DT_F32, 4), v);
  r[4]->def->axis = 0;
  IrValue *s = op1(&t, IR_REDUCE, RED_SUM, fa_type_scalar(DT_F32), r[3]);   /* rank 1 -> scalar */
  int at = 0;
  for (int k = 0; k < 5; k++) {
    int n = r[k]->type.shape[0];
    IrValue *p = ptrs(&t, po, op2(&t, IR_BINARY, BIN_ADD, blk1(DT_I32, n), arange(&t, n), ci(&t, blk1(DT_I32, n), at)));
    store(&t, p, r[k], NULL);
    at += n;
  }
  store(&t, op2(&t, IR_PTR_ADD, 0, po->type, po, i32(&t, at)), s, NULL);
  ret(&t);
  float x[8] = {1, -2, 3, 0.5f, NAN, 4, -8, 2}, o[17];
  Arg args[2] = {buf(DT_F32, x, 8), buf(DT_F32, o, 17)};
  ck_assert_msg(run1(&t, args, 2), "%s", diag_text(&t));
  ck_assert(o[0] == 2.5f && isnan(o[1]));          /* sums of rows */
  ck_assert(o[2] == 3.0f && isnan(o[3]));          /* max: NaN propagates */
  ck_assert(o[4] == -2.0f && isnan(o[5]));         /* min */
  ck_assert(isnan(o[6]) && o[7] == 2 && o[8] == -5 && o[9] == 2.5f);   /* column sums */
  ck_assert(isnan(o[10]) && o[11] == 4 && o[12] == 3 && o[13] == 2);   /* column max */
  ck_assert(isnan(o[14]));
  kit_free(&t);
}
END_TEST

/* dot of f16 operands accumulates in f32, in k order, onto the accumulator */
START_TEST(test_dot_accumulation) {
  Kit t;
  kit_init(&t);
  IrValue *pa = param_ptr(&t, "a", DT_F16), *pb = param_ptr(&t, "b", DT_F16), *pc = param_ptr(&t, "c", DT_F32);
  IrValue *po = param_ptr(&t, "o", DT_F32), *ph = param_ptr(&t, "h", DT_F16);
  int ba[2] = {2, 4}, bb[2] = {4, 2}, bc[2] = {2, 2};
  int64_t sa[2] = {2, 4}, sta[2] = {4, 1}, sb[2] = {4, 2}, stb[2] = {2, 1}, sc[2] = {2, 2}, stc[2] = {2, 1};
  int64_t z[2] = {0, 0};
  IrValue *a = load_block(&t, bptr(&t, pa, 2, sa, sta, z, ba), 0, PAD_NONE);
  IrValue *b = load_block(&t, bptr(&t, pb, 2, sb, stb, z, bb), 0, PAD_NONE);
  IrValue *c = load_block(&t, bptr(&t, pc, 2, sc, stc, z, bc), 0, PAD_NONE);
  IrValue *d = op3(&t, IR_DOT, DOT_DEFAULT, blk2(DT_F32, 2, 2), a, b, c);
  IrValue *dh = op2(&t, IR_DOT, DOT_DEFAULT, blk2(DT_F16, 2, 2), a, b);
  store_block(&t, bptr(&t, po, 2, sc, stc, z, bc), d, 0);
  store_block(&t, bptr(&t, ph, 2, sc, stc, z, bc), dh, 0);
  ret(&t);
  /* a = [[2048, 1, 1, 0], [0, 1, 1, 2048]], b = [[8192, 0.5], [1, 0.25], [1, 0.125], [8192, 1]].
   * (a b)[0,0]: 2^24 first, then each +1 is lost in f32 (exact: 2^24 + 2);
   * (a b)[1,0]: 1 + 1 + 2^24 = 2^24 + 2, exact in f32.  Only f32
   * accumulation in k order gives both. */
  float fa[8] = {2048, 1, 1, 0, 0, 1, 1, 2048}, fb[8] = {8192, 0.5f, 1, 0.25f, 1, 0.125f, 8192, 1};
  uint16_t ha[8], hb[8], hh[4];
  for (int i = 0; i < 16; i++) {
    /* exact f16 encodings of these normal (or zero) values */
    float v = i < 8 ? fa[i] : fb[i - 8];
    int e = 0;
    frexpf(v, &e);
    uint16_t h = v == 0 ? 0 : (uint16_t)(((e - 1 + 15) << 10) | (uint16_t)((v / ldexpf(1, e - 1) - 1) * 1024));
    if (i < 8)
      ha[i] = h;
    else
      hb[i - 8] = h;
  }
  float cacc[4] = {0, 100, 0, 0}, o[4];
  Arg args[5] = {buf(DT_F16, ha, 8), buf(DT_F16, hb, 8), buf(DT_F32, cacc, 4), buf(DT_F32, o, 4), buf(DT_F16, hh, 4)};
  ck_assert_msg(run1(&t, args, 5), "%s", diag_text(&t));
  ck_assert_msg(o[0] == 16777216.0f, "o[0] = %.1f", (double)o[0]);
  ck_assert_msg(o[2] == 16777218.0f, "o[2] = %.1f", (double)o[2]);
  ck_assert_msg(o[1] == 100.0f + 1024.375f, "o[1] = %g", (double)o[1]);   /* onto the accumulator */
  ck_assert_msg(o[3] == 2048.375f, "o[3] = %g", (double)o[3]);
  /* an f16 result is rounded once at the end: 1024.375 -> 1024 (ulp 1 there) */
  ck_assert_uint_eq(hh[1], 0x6400);
  ck_assert_uint_eq(hh[3], 0x6800);   /* 2048.375 -> 2048 (ulp 2) */
  ck_assert_uint_eq(hh[0], 0x7c00);   /* 2^24 overflows f16 */
  kit_free(&t);
}
END_TEST

/* trans, expand_dims and broadcast give numpy's results */
START_TEST(test_shapes) {
  Kit t;
  kit_init(&t);
  IrValue *po = param_ptr(&t, "o", DT_I32);
  IrValue *r = op1(&t, IR_RESHAPE, 0, blk2(DT_I32, 2, 4), arange(&t, 8));
  IrValue *tr = op1(&t, IR_TRANS, 0, blk2(DT_I32, 4, 2), r);
  tr->def->perm[0] = 1;
  tr->def->perm[1] = 0;
  IrValue *col = op1(&t, IR_EXPAND_DIMS, 0, blk2(DT_I32, 2, 1), arange(&t, 2));
  col->def->axis = 1;
  IrValue *bc = op1(&t, IR_BROADCAST, 0, blk2(DT_I32, 2, 4), col);
  IrValue *sum = op2(&t, IR_BINARY, BIN_ADD, blk2(DT_I32, 2, 4), r, op2(&t, IR_BINARY, BIN_MUL, blk2(DT_I32, 2, 4), bc,
                                                                       ci(&t, blk2(DT_I32, 2, 4), 100)));
  IrValue *offs8 = op1(&t, IR_RESHAPE, 0, blk2(DT_I32, 4, 2), arange(&t, 8));
  store(&t, ptrs(&t, po, offs8), tr, NULL);
  IrValue *offs2 = op2(&t, IR_BINARY, BIN_ADD, blk2(DT_I32, 2, 4), op1(&t, IR_RESHAPE, 0, blk2(DT_I32, 2, 4), arange(&t, 8)),
                       ci(&t, blk2(DT_I32, 2, 4), 8));
  store(&t, ptrs(&t, po, offs2), sum, NULL);
  ret(&t);
  int32_t o[16];
  Arg args[1] = {buf(DT_I32, o, 16)};
  ck_assert_msg(run1(&t, args, 1), "%s", diag_text(&t));
  int32_t want[16] = {0, 4, 1, 5, 2, 6, 3, 7, 0, 1, 2, 3, 104, 105, 106, 107};
  for (int i = 0; i < 16; i++)
    ck_assert_int_eq(o[i], want[i]);
  kit_free(&t);
}
END_TEST

/* ---- control flow, programs, host functions --------------------------------------------- */

/* for i in range(lb, ub, step) with two iteration values that swap every iteration */
START_TEST(test_for_swap_and_if) {
  Kit t;
  kit_init(&t);
  IrValue *po = param_ptr(&t, "o", DT_I32);
  IrValue *ops[5] = {i32(&t, 1), i32(&t, 8), i32(&t, 2), i32(&t, 10), i32(&t, 20)};
  IrType ty[2] = {fa_type_scalar(DT_I32), fa_type_scalar(DT_I32)};
  IrOp *f = fa_ir_op(&t.b, IR_FOR, L(2, 1), ops, 5, ty, 2);
  IrRegion *body = fa_ir_region_new(t.fn);
  body->parent_op = f;
  f->regions[0] = body;
  f->nregions = 1;
  IrValue *iv = fa_ir_region_add_arg(t.fn, body, fa_type_scalar(DT_I32), "i", L(2, 1));
  IrValue *a = fa_ir_region_add_arg(t.fn, body, fa_type_scalar(DT_I32), "a", L(2, 1));
  IrValue *b = fa_ir_region_add_arg(t.fn, body, fa_type_scalar(DT_I32), "b", L(2, 1));
  IrBuilder outer = t.b;
  t.b.region = body;
  /* a, b = b, a + i   (iterations i = 1, 3, 5, 7) */
  IrValue *s = op2(&t, IR_BINARY, BIN_ADD, fa_type_scalar(DT_I32), a, iv);
  IrValue *y[2] = {b, s};
  fa_ir_op(&t.b, IR_YIELD, L(2, 1), y, 2, NULL, 0);
  t.b = outer;
  IrValue *ra = f->results[0], *rb = f->results[1];
  /* if ra > rb: o[2] = 1 else o[2] = 2, as an if with a result */
  IrValue *c = op2(&t, IR_CMP, CMP_GT, fa_type_scalar(DT_I1), ra, rb);
  IrType it = fa_type_scalar(DT_I32);
  IrOp *iff = fa_ir_op(&t.b, IR_IF, L(2, 1), &c, 1, &it, 1);
  iff->nregions = 2;
  for (int k = 0; k < 2; k++) {
    iff->regions[k] = fa_ir_region_new(t.fn);
    iff->regions[k]->parent_op = iff;
    t.b.region = iff->regions[k];
    IrValue *v = i32(&t, k == 0 ? 1 : 2);
    fa_ir_op(&t.b, IR_YIELD, L(2, 1), &v, 1, NULL, 0);
  }
  t.b = outer;
  store(&t, po, ra, NULL);
  store(&t, op2(&t, IR_PTR_ADD, 0, po->type, po, i32(&t, 1)), rb, NULL);
  store(&t, op2(&t, IR_PTR_ADD, 0, po->type, po, i32(&t, 2)), iff->results[0], NULL);
  ret(&t);
  int32_t o[3];
  Arg args[1] = {buf(DT_I32, o, 3)};
  ck_assert_msg(run1(&t, args, 1), "%s", diag_text(&t));
  /* (10,20) -i=1-> (20,11) -i=3-> (11,23) -i=5-> (23,16) -i=7-> (16,30) */
  ck_assert_int_eq(o[0], 16);
  ck_assert_int_eq(o[1], 30);
  ck_assert_int_eq(o[2], 2);
  kit_free(&t);
}
END_TEST

/* Every program of a 2-D grid writes its ids; atomic_add sums across programs,
 * sequentially and on threads. */
static void grid_case(int threads) {
  Kit t;
  kit_init(&t);
  IrValue *po = param_ptr(&t, "o", DT_I32), *ps = param_ptr(&t, "s", DT_F32);
  IrType i32t = fa_type_scalar(DT_I32);
  IrOp *px = fa_ir_op(&t.b, IR_PROGRAM_ID, L(2, 1), NULL, 0, &i32t, 1);
  IrOp *py = fa_ir_op(&t.b, IR_PROGRAM_ID, L(2, 1), NULL, 0, &i32t, 1);
  py->axis = 1;
  IrOp *nx = fa_ir_op(&t.b, IR_NUM_PROGRAMS, L(2, 1), NULL, 0, &i32t, 1);
  IrValue *lin = op2(&t, IR_BINARY, BIN_ADD, i32t, op2(&t, IR_BINARY, BIN_MUL, i32t, py->results[0], nx->results[0]),
                     px->results[0]);
  IrValue *val = op2(&t, IR_BINARY, BIN_ADD, i32t, op2(&t, IR_BINARY, BIN_MUL, i32t, px->results[0], i32(&t, 1000)),
                     py->results[0]);
  store(&t, op2(&t, IR_PTR_ADD, 0, po->type, po, lin), val, NULL);
  /* atomic_add(s + [0..3], 0.5) */
  IrValue *p = ptrs(&t, ps, arange(&t, 4));
  IrValue *ops[2] = {p, cf(&t, blk1(DT_F32, 4), 0.5)};
  IrType rt = blk1(DT_F32, 4);
  fa_ir_op(&t.b, IR_ATOMIC_ADD, L(2, 1), ops, 2, &rt, 1);
  ret(&t);
  int32_t o[7 * 5];
  float s[4] = {1, 2, 3, 4};
  memset(o, 0xff, sizeof o);
  Arg args[2] = {buf(DT_I32, o, 35), buf(DT_F32, s, 4)};
  ck_assert_msg(run_grid(&t, args, 2, 7, 5, threads), "%s", diag_text(&t));
  for (int y = 0; y < 5; y++)
    for (int x = 0; x < 7; x++)
      ck_assert_int_eq(o[y * 7 + x], x * 1000 + y);
  for (int i = 0; i < 4; i++)
    ck_assert(s[i] == (float)(i + 1) + 17.5f);
  kit_free(&t);
}

START_TEST(test_grid_and_atomics) { grid_case(1); }
END_TEST

START_TEST(test_threads) { grid_case(3); }
END_TEST

START_TEST(test_host_function) {
  FaCompiler fc;
  fa_arena_init(&fc.arena);
  fa_diag_init(&fc.diag, NULL);
  /* grid(n: i32, x: *f32, B: i32) = (cdiv(n, 16), B, 1) */
  IrFunction *g = fa_ir_function_new(&fc.arena, "grid", L(1, 1));
  IrValue *n = fa_ir_add_param(g, "n", fa_type_scalar(DT_I32), 0, L(1, 1))->value;
  fa_ir_add_param(g, "x", fa_type_ptr(DT_F32, 0, NULL), 1, L(1, 1));
  IrValue *B = fa_ir_add_param(g, "B", fa_type_scalar(DT_I32), 2, L(1, 1))->value;
  IrBuilder b = {g, g->body};
  IrType it = fa_type_scalar(DT_I32);
  IrValue *ops[2] = {n, fa_ir_const_int(&b, L(1, 1), it, 15)};
  IrValue *s = fa_ir_op1(&b, IR_BINARY, BIN_ADD, L(1, 1), it, ops, 2);
  IrValue *ops2[2] = {s, fa_ir_const_int(&b, L(1, 1), it, 16)};
  IrValue *q = fa_ir_op1(&b, IR_BINARY, BIN_DIV, L(1, 1), it, ops2, 2);
  IrValue *res[3] = {q, B, fa_ir_const_int(&b, L(1, 1), it, 1)};
  fa_ir_op(&b, IR_RETURN, L(1, 1), res, 3, NULL, 0);
  FaHostValue args[3] = {fa_host_int(DT_I32, 77), fa_host_int(DT_PTR, 0), fa_host_int(DT_I64, 3)};
  FaHostValue out[3];
  ck_assert(fa_interp_host_function(&fc, g, args, 3, out, 3));
  ck_assert_int_eq(out[0].i, 5);
  ck_assert_int_eq(out[1].i, 3);
  ck_assert_int_eq(out[2].i, 1);
  /* a value that does not fit i32 is refused */
  args[0] = fa_host_int(DT_I64, (int64_t)1 << 40);
  ck_assert(!fa_interp_host_function(&fc, g, args, 3, out, 3));
  ck_assert(strstr(fc.diag.text.data, "does not fit"));
  /* wrong arity */
  ck_assert(!fa_interp_host_function(&fc, g, args, 2, out, 3));
  fa_diag_free(&fc.diag);
  fa_arena_free(&fc.arena);
}
END_TEST

/* Integer division and remainder are total (lanes a where() discards may
 * divide by anything): x // 0 = 0, x % 0 = x, MIN // -1 = MIN, MIN % -1 = 0,
 * in i32 and i64; ordinary lanes truncate toward zero. */
START_TEST(test_total_division) {
  for (int wide = 0; wide < 2; wide++) {
    DType dt = wide ? DT_I64 : DT_I32;
    Kit t;
    kit_init(&t);
    IrValue *px = param_ptr(&t, "x", dt), *py = param_ptr(&t, "y", dt);
    IrValue *pq = param_ptr(&t, "q", dt), *pr = param_ptr(&t, "r", dt);
    IrValue *x = load(&t, ptrs(&t, px, arange(&t, 4)), NULL, NULL);
    IrValue *y = load(&t, ptrs(&t, py, arange(&t, 4)), NULL, NULL);
    store(&t, ptrs(&t, pq, arange(&t, 4)), op2(&t, IR_BINARY, BIN_DIV, blk1(dt, 4), x, y), NULL);
    store(&t, ptrs(&t, pr, arange(&t, 4)), op2(&t, IR_BINARY, BIN_MOD, blk1(dt, 4), x, y), NULL);
    ret(&t);
    int64_t min = wide ? INT64_MIN : INT32_MIN;
    int64_t xv[4] = {7, min, 0, -7}, yv[4] = {0, -1, 0, 2}, q[4], r[4];
    int32_t x32[4], y32[4], q32[4], r32[4];
    for (int i = 0; i < 4; i++) {
      x32[i] = (int32_t)xv[i];
      y32[i] = (int32_t)yv[i];
    }
    Arg args[4] = {buf(dt, wide ? (void *)xv : x32, 4), buf(dt, wide ? (void *)yv : y32, 4),
                   buf(dt, wide ? (void *)q : q32, 4), buf(dt, wide ? (void *)r : r32, 4)};
    ck_assert_msg(run1(&t, args, 4), "%s", diag_text(&t));
    int64_t want_q[4] = {0, min, 0, -3}, want_r[4] = {7, 0, 0, -1};
    for (int i = 0; i < 4; i++) {
      ck_assert_int_eq(wide ? q[i] : q32[i], want_q[i]);
      ck_assert_int_eq(wide ? r[i] : r32[i], want_r[i]);
    }
    kit_free(&t);
  }
}
END_TEST

START_TEST(test_errors) {
  /* device assert, unbound parameter */
  Kit t;
  kit_init(&t);
  int32_t n[1] = {0};
  Arg args[1] = {buf(DT_I32, n, 1)};
  IrValue *pn = param_ptr(&t, "n", DT_I32);
  IrValue *v = load(&t, pn, NULL, NULL);
  IrValue *c = op2(&t, IR_CMP, CMP_GT, fa_type_scalar(DT_I1), v, i32(&t, 0));
  IrOp *a = fa_ir_op(&t.b, IR_ASSERT, L(6, 5), &c, 1, NULL, 0);
  a->str = "n must be positive";
  ret(&t);
  ck_assert(!run1(&t, args, 1));
  ck_assert_msg(strstr(diag_text(&t), "t.fa:6:5: error: device assertion failed: n must be positive"), "%s",
                diag_text(&t));
  kit_free(&t);

  kit_init(&t);
  param_ptr(&t, "n", DT_I32);
  param_scalar(&t, "m", DT_I32);
  ret(&t);
  t.in = fa_interp_new(&t.fc, &t.k);
  ck_assert(fa_interp_bind_buffer(t.in, 0, DT_I32, n, 1));
  ck_assert(!fa_interp_bind_buffer(t.in, 1, DT_I32, n, 1));        /* m is a scalar */
  ck_assert(!fa_interp_bind_buffer(t.in, 0, DT_F32, n, 1));        /* wrong dtype */
  ck_assert(!fa_interp_run(t.in, NULL));
  ck_assert_msg(strstr(diag_text(&t), "parameter 'm' of kernel 'k' is not bound"), "%s", diag_text(&t));
  kit_free(&t);

  /* IR that breaks the invariants (an f32[8] + f32[4]) is refused, not run */
  kit_init(&t);
  param_ptr(&t, "n", DT_I32);
  op2(&t, IR_BINARY, BIN_ADD, blk1(DT_F32, 8), cf(&t, blk1(DT_F32, 8), 1.0), cf(&t, blk1(DT_F32, 4), 1.0));
  ret(&t);
  t.in = fa_interp_new(&t.fc, &t.k);
  ck_assert_ptr_null(t.in);
  ck_assert_msg(strstr(diag_text(&t), "invalid IR"), "%s", diag_text(&t));
  kit_free(&t);
}
END_TEST


/* advance moves a block pointer; PAD_NONE pads floats with NaN; 3-D block pointers */
START_TEST(test_advance_and_3d) {
  Kit t;
  kit_init(&t);
  IrValue *px = param_ptr(&t, "x", DT_F32), *po = param_ptr(&t, "o", DT_F32);
  int blk[1] = {8};
  int64_t shape[1] = {10}, strides[1] = {1}, offs[1] = {0};
  IrValue *bp = bptr(&t, px, 1, shape, strides, offs, blk);
  IrValue *adv_ops[2] = {bp, i32(&t, 8)};
  IrValue *bp2 = fa_ir_op1(&t.b, IR_ADVANCE, 0, L(2, 1), bp->type, adv_ops, 2);
  IrValue *a = load_block(&t, bp2, 1, PAD_NONE);
  IrValue *z = load_block(&t, bp2, 1, PAD_ZERO);
  store(&t, ptrs(&t, po, arange(&t, 8)), a, NULL);
  IrValue *o8 = op2(&t, IR_BINARY, BIN_ADD, blk1(DT_I32, 8), arange(&t, 8), ci(&t, blk1(DT_I32, 8), 8));
  store(&t, ptrs(&t, po, o8), z, NULL);
  /* a [2, 3, 5] tensor through a [2, 4, 8] block at (0, 1, 2): element (a, b, c) is x[15a + 5(b+1) + c+2] */
  int blk3[3] = {2, 4, 8};
  int64_t shape3[3] = {2, 3, 5}, strides3[3] = {15, 5, 1}, offs3[3] = {0, 1, 2};
  IrValue *b3 = load_block(&t, bptr(&t, px, 3, shape3, strides3, offs3, blk3), 7, PAD_ZERO);
  int64_t oshape[3] = {2, 4, 8}, ostr[3] = {32, 8, 1}, zero3[3] = {0, 0, 0};
  IrValue *o3 = op2(&t, IR_PTR_ADD, 0, po->type, po, i32(&t, 16));
  store_block(&t, bptr(&t, o3, 3, oshape, ostr, zero3, blk3), b3, 0);
  ret(&t);
  float x[30], o[16 + 64];
  for (int i = 0; i < 30; i++)
    x[i] = (float)(i + 1);
  Arg args[2] = {buf(DT_F32, x, 30), buf(DT_F32, o, 80)};
  ck_assert_msg(run1(&t, args, 2), "%s", diag_text(&t));
  ck_assert(o[0] == 9.0f && o[1] == 10.0f);
  for (int i = 2; i < 8; i++)
    ck_assert_msg(isnan(o[i]), "PAD_NONE gives NaN for floats (o[%d] = %g)", i, (double)o[i]);
  ck_assert(o[8] == 9.0f && o[9] == 10.0f && o[10] == 0.0f && o[15] == 0.0f);
  for (int a3 = 0; a3 < 2; a3++)
    for (int b = 0; b < 4; b++)
      for (int c = 0; c < 8; c++) {
        float want = b + 1 < 3 && c + 2 < 5 ? x[15 * a3 + 5 * (b + 1) + c + 2] : 0.0f;
        ck_assert_msg(o[16 + a3 * 32 + b * 8 + c] == want, "3-D block (%d,%d,%d)", a3, b, c);
      }
  kit_free(&t);
}
END_TEST

/* atomic_add in f16 rounds after each addition and returns the old values;
 * masked-off lanes neither add nor read */
START_TEST(test_atomic_f16_masked) {
  Kit t;
  kit_init(&t);
  IrValue *ph = param_ptr(&t, "h", DT_F16), *po = param_ptr(&t, "old", DT_F32);
  IrType i32t = fa_type_scalar(DT_I32);
  IrOp *pid = fa_ir_op(&t.b, IR_PROGRAM_ID, L(2, 1), NULL, 0, &i32t, 1);
  IrValue *offs = arange(&t, 4);
  IrValue *mask = op2(&t, IR_CMP, CMP_LT, blk1(DT_I1, 4), offs, ci(&t, blk1(DT_I32, 4), 2));
  IrValue *val = op1(&t, IR_CAST, 0, blk1(DT_F16, 4), cf(&t, blk1(DT_F32, 4), 0.1));
  IrValue *ops[3] = {ptrs(&t, ph, offs), val, mask};
  IrType rt = blk1(DT_F16, 4);
  IrOp *at = fa_ir_op(&t.b, IR_ATOMIC_ADD, L(2, 1), ops, 3, &rt, 1);
  /* old[pid * 4 + lane] = previous value */
  IrValue *base = op1(&t, IR_SPLAT, 0, blk1(DT_I32, 4), op2(&t, IR_BINARY, BIN_MUL, i32t, pid->results[0], i32(&t, 4)));
  store(&t, ptrs(&t, po, op2(&t, IR_BINARY, BIN_ADD, blk1(DT_I32, 4), base, offs)),
        op1(&t, IR_CAST, 0, blk1(DT_F32, 4), at->results[0]), NULL);
  ret(&t);
  uint16_t h[4] = {0x3c00, 0x3c00, 0x3c00, 0x3c00};   /* 1.0 */
  float old[12];
  Arg args[2] = {buf(DT_F16, h, 4), buf(DT_F32, old, 12)};
  ck_assert_msg(run_grid(&t, args, 2, 3, 1, 1), "%s", diag_text(&t));
  /* 1 + 0.1 (f16 0.0999755859375) = 1.0999755859375 -> f16 1.099609375 (0x3c66),
   * + 0.0999755859375 -> 1.1995849609375 -> 1.19921875 (0x3ccc), -> 1.298828125 (0x3d32) */
  ck_assert_uint_eq(h[0], 0x3d32);
  ck_assert_uint_eq(h[1], 0x3d32);
  ck_assert_uint_eq(h[2], 0x3c00);
  ck_assert_uint_eq(h[3], 0x3c00);
  ck_assert(old[0] == 1.0f && old[4] == 1.099609375f && old[8] == 1.19921875f);
  ck_assert(old[2] == 0.0f && old[11] == 0.0f);
  kit_free(&t);
}
END_TEST

/* A declared extent bounds the accesses even when the buffer is larger, and a
 * buffer smaller than its extent is refused before the run. */
START_TEST(test_declared_extent) {
  Kit t;
  kit_init(&t);
  IrParam *pp = fa_ir_add_param(t.fn, "x", fa_type_ptr(DT_F32, 0, NULL), 0, L(1, 1));
  pp->extent_rank = 1;
  IrValue *pn = param_scalar(&t, "n", DT_I32);
  /* load x[n - 1 + 1]: one past the extent */
  IrValue *v = load(&t, op2(&t, IR_PTR_ADD, 0, pp->value->type, pp->value, pn), NULL, NULL);
  store(&t, pp->value, v, NULL);
  ret(&t);
  /* extents(x, n) = (n,) */
  IrFunction *e = fa_ir_function_new(&t.fc.arena, "k.extents", L(1, 1));
  fa_ir_add_param(e, "x", fa_type_ptr(DT_F32, 0, NULL), 0, L(1, 1));
  IrValue *en = fa_ir_add_param(e, "n", fa_type_scalar(DT_I32), 1, L(1, 1))->value;
  IrBuilder eb = {e, e->body};
  IrValue *n64 = fa_ir_op1(&eb, IR_CAST, 0, L(1, 1), fa_type_scalar(DT_I64), &en, 1);
  fa_ir_op(&eb, IR_RETURN, L(1, 1), &n64, 1, NULL, 0);
  t.k.extents = e;
  float x[8] = {0};
  Arg args[2] = {buf(DT_F32, x, 8), {DT_VOID, NULL, 0, fa_host_int(DT_I32, 4)}};
  ck_assert(!run1(&t, args, 2));
  ck_assert_msg(strstr(diag_text(&t), "load out of bounds of buffer 'x' (element 4, size 4)"), "%s", diag_text(&t));
  int64_t dims[FA_MAX_RANK];
  ck_assert_int_eq(fa_interp_extent(t.in, 0, dims), 1);
  ck_assert_int_eq(dims[0], 4);
  ck_assert_int_eq(fa_interp_extent(t.in, 1, dims), 0);
  kit_free(&t);

  kit_init(&t);
  pp = fa_ir_add_param(t.fn, "x", fa_type_ptr(DT_F32, 0, NULL), 0, L(1, 1));
  pp->extent_rank = 1;
  param_scalar(&t, "n", DT_I32);
  ret(&t);
  e = fa_ir_function_new(&t.fc.arena, "k.extents", L(1, 1));
  fa_ir_add_param(e, "x", fa_type_ptr(DT_F32, 0, NULL), 0, L(1, 1));
  en = fa_ir_add_param(e, "n", fa_type_scalar(DT_I32), 1, L(1, 1))->value;
  eb.fn = e;
  eb.region = e->body;
  n64 = fa_ir_op1(&eb, IR_CAST, 0, L(1, 1), fa_type_scalar(DT_I64), &en, 1);
  fa_ir_op(&eb, IR_RETURN, L(1, 1), &n64, 1, NULL, 0);
  t.k.extents = e;
  Arg args2[2] = {buf(DT_F32, x, 8), {DT_VOID, NULL, 0, fa_host_int(DT_I32, 9)}};
  ck_assert(!run1(&t, args2, 2));
  ck_assert_msg(strstr(diag_text(&t), "buffer for 'x' has 8 elements, but its declared extent needs 9"), "%s",
                diag_text(&t));
  kit_free(&t);
}
END_TEST

/* With threads, a failing program is still reported with its location. */
START_TEST(test_threads_error) {
  Kit t;
  kit_init(&t);
  IrValue *po = param_ptr(&t, "o", DT_I32);
  IrType i32t = fa_type_scalar(DT_I32);
  IrOp *pid = fa_ir_op(&t.b, IR_PROGRAM_ID, L(2, 1), NULL, 0, &i32t, 1);
  store_at(&t, L(7, 3), op2(&t, IR_PTR_ADD, 0, po->type, po, pid->results[0]), pid->results[0], NULL);
  ret(&t);
  int32_t o[10];
  Arg args[1] = {buf(DT_I32, o, 10)};
  ck_assert(!run_grid(&t, args, 1, 64, 1, 4));
  ck_assert_msg(strstr(diag_text(&t), "t.fa:7:3: error: store out of bounds of buffer 'o'"), "%s", diag_text(&t));
  ck_assert_msg(strstr(diag_text(&t), "of kernel 'k' (grid 64 x 1 x 1)"), "%s", diag_text(&t));
  kit_free(&t);
}
END_TEST

static Suite *interp_suite(void) {
  Suite *s = suite_create("interp");
  TCase *tc = tcase_create("builtins");
  tcase_add_test(tc, test_f16_rounding);
  tcase_add_test(tc, test_bf16_rounding);
  tcase_add_test(tc, test_half_memory);
  tcase_add_test(tc, test_arith_rounding);
  tcase_add_test(tc, test_math_f32);
  tcase_add_test(tc, test_casts_int);
  tcase_add_test(tc, test_block_padding);
  tcase_add_test(tc, test_block_store_dropped);
  tcase_add_test(tc, test_masked_pointer_ops);
  tcase_add_test(tc, test_store_out_of_bounds_error);
  tcase_add_test(tc, test_reductions);
  tcase_add_test(tc, test_dot_accumulation);
  tcase_add_test(tc, test_shapes);
  tcase_add_test(tc, test_for_swap_and_if);
  tcase_add_test(tc, test_grid_and_atomics);
  tcase_add_test(tc, test_threads);
  tcase_add_test(tc, test_host_function);
  tcase_add_test(tc, test_total_division);
  tcase_add_test(tc, test_errors);
  tcase_add_test(tc, test_advance_and_3d);
  tcase_add_test(tc, test_atomic_f16_masked);
  tcase_add_test(tc, test_declared_extent);
  tcase_add_test(tc, test_threads_error);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(interp_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}
