/* check_layout.c - unit tests of the CUDA backend's layouts (compiler/layout.c)
 * and of its layout pass on kernels built with the IR builder:
 *   - every constructed layout is a bijection (modulo copies) between
 *     (register, lane, warp) and the block's elements;
 *   - the mma.sync layouts hold exactly the elements PTX's m16n8k16
 *     fragments say (checked against the formulas of the PTX manual);
 *   - slice, trans, reshape and broadcast-source layouts give each thread
 *     the coordinates the operation implies;
 *   - an accumulator cast to f16 is a valid A operand of the next product
 *     without moving data (the attention forward's P @ V);
 *   - the pass puts dot results, reductions, elementwise ops and
 *     loop-carried values in the layouts that avoid conversions, and the
 *     emitter turns such a kernel into CUDA C++.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_backend.h"
#include "layout.h"

/* ---- evaluating a layout on the host ---------------------------------------------- */

static int flat_index(const FaLayout *l, int reg, int lane, int warp) {
  int x = 0;
  for (int i = 0; i < l->nreg; i++)
    if ((reg >> i) & 1)
      x |= 1 << l->reg[i];
  for (int i = 0; i < FA_LAYOUT_LANE_BITS; i++)
    if (((lane >> i) & 1) && l->lane[i] >= 0)
      x |= 1 << l->lane[i];
  for (int i = 0; i < l->nwarp; i++)
    if (((warp >> i) & 1) && l->warp[i] >= 0)
      x |= 1 << l->warp[i];
  return x;
}

static int coord(const FaLayout *l, int flat, int d) {
  int first, count;
  fa_layout_dim_bits(l, d, &first, &count);
  return (flat >> first) & ((1 << count) - 1);
}

/* Every element held by some thread, each by (1 << copies) threads where
 * copies counts the lane and warp bits that select nothing. */
static void assert_bijection(const FaLayout *l) {
  char why[128];
  ck_assert_msg(fa_layout_check(l, why, sizeof why), "layout check: %s", why);
  int numel = 1 << l->nbits, warps = 1 << l->nwarp;
  int copies = 1;
  for (int i = 0; i < FA_LAYOUT_LANE_BITS; i++)
    if (l->lane[i] < 0)
      copies *= 2;
  for (int i = 0; i < l->nwarp; i++)
    if (l->warp[i] < 0)
      copies *= 2;
  int *seen = calloc((size_t)numel, sizeof *seen);
  ck_assert_ptr_nonnull(seen);
  for (int w = 0; w < warps; w++)
    for (int t = 0; t < 32; t++)
      for (int r = 0; r < (1 << l->nreg); r++) {
        int x = flat_index(l, r, t, w);
        ck_assert_int_lt(x, numel);
        seen[x]++;
      }
  for (int x = 0; x < numel; x++)
    ck_assert_int_eq(seen[x], copies);
  free(seen);
}

/* ---- constructions ---------------------------------------------------------------------- */

START_TEST(test_blocked_bijection) {
  static const int shapes[][4] = {{1, 1, 1},    {1, 8, 1},    {1, 64, 1},   {1, 1024, 1}, {2, 64, 64},
                                  {2, 16, 128}, {2, 128, 16}, {2, 1, 256},  {2, 256, 1},  {3, 4, 16, 64},
                                  {3, 2, 8, 8}, {2, 4096, 4}, {2, 32, 32},  {1, 2, 1},    {3, 1, 1, 1}};
  static const int warps[] = {1, 2, 4, 8, 16, 32};
  static const int vecs[] = {1, 2, 4, 8, 16};
  for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
    int rank = shapes[s][0];
    const int *shape = &shapes[s][1];
    for (size_t w = 0; w < sizeof warps / sizeof *warps; w++)
      for (size_t v = 0; v < sizeof vecs / sizeof *vecs; v++) {
        int order[3];
        for (int k = 0; k < rank; k++)
          order[k] = rank - 1 - k;
        FaLayout l;
        ck_assert(fa_layout_blocked(&l, rank, shape, order, vecs[v], warps[w]));
        assert_bijection(&l);
        /* the other order: first dimension fastest */
        for (int k = 0; k < rank; k++)
          order[k] = k;
        ck_assert(fa_layout_blocked(&l, rank, shape, order, vecs[v], warps[w]));
        assert_bijection(&l);
      }
  }
}
END_TEST

START_TEST(test_blocked_vectors_and_coalescing) {
  /* f16 [64, 64], 4 warps: 8 elements in a row per thread, 8 threads per
     row of 64, then rows */
  int shape[2] = {64, 64}, order[2] = {1, 0};
  FaLayout l;
  ck_assert(fa_layout_blocked(&l, 2, shape, order, 8, 4));
  for (int r = 0; r < 8; r++) {
    int x = flat_index(&l, r, 0, 0);
    ck_assert_int_eq(coord(&l, x, 0), 0);
    ck_assert_int_eq(coord(&l, x, 1), r);
  }
  ck_assert_int_eq(coord(&l, flat_index(&l, 0, 1, 0), 1), 8);
  ck_assert_int_eq(coord(&l, flat_index(&l, 0, 8, 0), 0), 1);
  /* column-major (dimension 0 fastest): registers run down a column */
  order[0] = 0;
  order[1] = 1;
  ck_assert(fa_layout_blocked(&l, 2, shape, order, 8, 4));
  for (int r = 0; r < 8; r++)
    ck_assert_int_eq(coord(&l, flat_index(&l, r, 0, 0), 0), r);
  /* a block smaller than the threads: fewer elements per thread first */
  int small[1] = {256};
  int o1[1] = {0};
  ck_assert(fa_layout_blocked(&l, 1, small, o1, 4, 4));
  ck_assert_int_eq(fa_layout_lane_dups(&l), 0);
  ck_assert_int_eq(fa_layout_warp_dups(&l), 0);
  ck_assert_int_eq(1 << l.nreg, 2);
  /* rejected: shapes that are not powers of two */
  int bad[2] = {48, 64};
  ck_assert(!fa_layout_blocked(&l, 2, bad, order, 8, 4));
}
END_TEST

/* PTX ISA, "Matrix fragments for mma.m16n8k16 with floating point type":
 * groupID g = lane >> 2, threadID_in_group t = lane % 4;
 *   C/D: c_i at row g + 8 * (i >= 2), column 2t + (i & 1);
 *   A:   a_i at row g + 8 * ((i >> 1) & 1), column 2t + (i & 1) + 8 * (i >= 4);
 *   B:   b_i at row 2t + (i & 1) + 8 * (i >= 2), column g. */
START_TEST(test_mma_fragments_match_ptx) {
  static const int shapes[][3] = {{16, 8, 16}, {64, 64, 64}, {128, 64, 32}, {16, 128, 256}, {256, 16, 16},
                                  {32, 32, 128}};
  static const int warps[] = {1, 2, 4, 8};
  for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
    for (size_t w = 0; w < sizeof warps / sizeof *warps; w++) {
      int M = shapes[s][0], N = shapes[s][1], K = shapes[s][2], W = warps[w], wm, wn;
      ck_assert(fa_mma_warps(M, N, K, W, &wm, &wn));
      ck_assert_int_le(wm * wn, W);
      FaLayout c, a, b;
      ck_assert(fa_layout_mma(&c, M, N, W, wm, wn));
      ck_assert(fa_layout_dot_operand(&a, 0, M, N, K, W, wm, wn));
      ck_assert(fa_layout_dot_operand(&b, 1, M, N, K, W, wm, wn));
      assert_bijection(&c);
      assert_bijection(&a);
      assert_bijection(&b);
      int MT = M / (16 * wm), NT = N / (8 * wn), KT = K / 16;
      ck_assert_int_eq(1 << c.nreg, MT * NT * 4);
      ck_assert_int_eq(1 << a.nreg, MT * KT * 8);
      ck_assert_int_eq(1 << b.nreg, NT * KT * 4);
      for (int warp = 0; warp < W; warp++) {
        int pm = warp % wm, pn = (warp / wm) % wn; /* the warp's place (fa_mma.cuh) */
        for (int lane = 0; lane < 32; lane++) {
          int g = lane >> 2, t = lane & 3;
          for (int mt = 0; mt < MT; mt++)
            for (int nt = 0; nt < NT; nt++)
              for (int i = 0; i < 4; i++) {
                int x = flat_index(&c, (mt * NT + nt) * 4 + i, lane, warp);
                ck_assert_int_eq(coord(&c, x, 0), (mt * wm + pm) * 16 + g + 8 * (i >= 2));
                ck_assert_int_eq(coord(&c, x, 1), (fa_mma_n_contiguous(wm, wn) ? pn * NT + nt : nt * wn + pn) * 8 + 2 * t + (i & 1));
              }
          for (int mt = 0; mt < MT; mt++)
            for (int kt = 0; kt < KT; kt++)
              for (int i = 0; i < 8; i++) {
                int x = flat_index(&a, (mt * KT + kt) * 8 + i, lane, warp);
                ck_assert_int_eq(coord(&a, x, 0), (mt * wm + pm) * 16 + g + 8 * ((i >> 1) & 1));
                ck_assert_int_eq(coord(&a, x, 1), kt * 16 + 2 * t + (i & 1) + 8 * (i >= 4));
              }
          for (int nt = 0; nt < NT; nt++)
            for (int kt = 0; kt < KT; kt++)
              for (int i = 0; i < 4; i++) {
                int x = flat_index(&b, (nt * KT + kt) * 4 + i, lane, warp);
                ck_assert_int_eq(coord(&b, x, 0), kt * 16 + 2 * t + (i & 1) + 8 * (i >= 2));
                ck_assert_int_eq(coord(&b, x, 1), (fa_mma_n_contiguous(wm, wn) ? pn * NT + nt : nt * wn + pn) * 8 + g);
              }
        }
      }
    }
  int wm, wn;
  ck_assert(!fa_mma_warps(8, 64, 64, 4, &wm, &wn));
  ck_assert(!fa_mma_warps(64, 4, 64, 4, &wm, &wn));
  ck_assert(!fa_mma_warps(64, 64, 8, 4, &wm, &wn));
}
END_TEST

START_TEST(test_accumulator_is_next_a_operand) {
  /* S = Q K^T [BQ, BK] then O = P V with P = S cast: with the warps along M
     only, the accumulator of the first is the A operand of the second */
  static const int cfg[][3] = {{64, 64, 4}, {128, 64, 8}, {128, 128, 4}, {64, 32, 4}, {128, 32, 8}};
  for (size_t i = 0; i < sizeof cfg / sizeof *cfg; i++) {
    int BQ = cfg[i][0], BK = cfg[i][1], W = cfg[i][2], D = 64;
    int wm1, wn1, wm2, wn2;
    ck_assert(fa_mma_warps(BQ, BK, D, W, &wm1, &wn1));
    ck_assert(fa_mma_warps(BQ, D, BK, W, &wm2, &wn2));
    FaLayout s, p;
    ck_assert(fa_layout_mma(&s, BQ, BK, W, wm1, wn1));
    ck_assert(fa_layout_dot_operand(&p, 0, BQ, D, BK, W, wm2, wn2));
    int perm[FA_LAYOUT_MAX_BITS];
    ck_assert_msg(fa_layout_register_permutation(&s, &p, perm), "BQ=%d BK=%d warps=%d", BQ, BK, W);
  }
  /* warps split along N in the first product: the threads differ */
  FaLayout s, p;
  ck_assert(fa_layout_mma(&s, 64, 64, 8, 4, 2));
  ck_assert(fa_layout_dot_operand(&p, 0, 64, 64, 64, 8, 4, 2));
  int perm[FA_LAYOUT_MAX_BITS];
  ck_assert(!fa_layout_register_permutation(&s, &p, perm));
}
END_TEST

START_TEST(test_slice_trans_reshape_broadcast) {
  int shape[3] = {4, 16, 32}, order[3] = {2, 1, 0};
  FaLayout l;
  ck_assert(fa_layout_blocked(&l, 3, shape, order, 4, 4));
  for (int axis = 0; axis < 3; axis++) {
    FaLayout s;
    fa_layout_slice(&s, &l, axis);
    ck_assert_int_eq(s.rank, 2);
    assert_bijection(&s);
    /* every register of the slice holds what the source's registers hold,
       with the axis dropped */
    for (int w = 0; w < 4; w++)
      for (int t = 0; t < 32; t++)
        for (int r = 0; r < (1 << l.nreg); r++) {
          int x = flat_index(&l, r, t, w);
          int kept = 0, n = 0, rs = 0;
          for (int i = 0; i < l.nreg; i++) {
            int first, count;
            fa_layout_dim_bits(&l, axis, &first, &count);
            if (l.reg[i] >= first && l.reg[i] < first + count)
              continue;
            if ((r >> i) & 1)
              rs |= 1 << n;
            n++;
          }
          int y = flat_index(&s, rs, t, w);
          for (int d = 0, e = 0; d < 3; d++) {
            if (d == axis)
              continue;
            ck_assert_int_eq(coord(&s, y, e), coord(&l, x, d));
            e++;
            kept++;
          }
          ck_assert_int_eq(kept, 2);
        }
  }
  /* trans */
  int perm[3] = {2, 0, 1};
  FaLayout t;
  fa_layout_trans(&t, &l, perm);
  assert_bijection(&t);
  ck_assert_int_eq(t.shape[0], 32);
  for (int w = 0; w < 4; w++)
    for (int th = 0; th < 32; th++)
      for (int r = 0; r < (1 << l.nreg); r++) {
        int x = flat_index(&l, r, th, w), y = flat_index(&t, r, th, w);
        for (int d = 0; d < 3; d++)
          ck_assert_int_eq(coord(&t, y, d), coord(&l, x, perm[d]));
      }
  /* reshape keeps the flat index */
  int flat[1] = {4 * 16 * 32};
  FaLayout f;
  fa_layout_reshape(&f, &l, 1, flat);
  assert_bijection(&f);
  ck_assert_int_eq(flat_index(&f, 5, 7, 1), flat_index(&l, 5, 7, 1));
  /* a [4, 1, 32] operand broadcast to [4, 16, 32] */
  int src[3] = {4, 1, 32};
  FaLayout b;
  fa_layout_broadcast_source(&b, &l, 3, src);
  assert_bijection(&b);
  for (int w = 0; w < 4; w++)
    for (int th = 0; th < 32; th++) {
      int x = flat_index(&l, 0, th, w), y = flat_index(&b, 0, th, w);
      ck_assert_int_eq(coord(&b, y, 0), coord(&l, x, 0));
      ck_assert_int_eq(coord(&b, y, 2), coord(&l, x, 2));
    }
}
END_TEST

START_TEST(test_check_rejects) {
  FaLayout l;
  int shape[2] = {64, 64}, order[2] = {1, 0};
  ck_assert(fa_layout_blocked(&l, 2, shape, order, 8, 4));
  char why[128];
  FaLayout bad = l;
  bad.lane[0] = bad.lane[1]; /* one bit twice, another never */
  ck_assert(!fa_layout_check(&bad, why, sizeof why));
  ck_assert_ptr_nonnull(strstr(why, "selected"));
  bad = l;
  bad.reg[0] = -1;
  ck_assert(!fa_layout_check(&bad, why, sizeof why));
  bad = l;
  bad.nbits = 11;
  ck_assert(!fa_layout_check(&bad, why, sizeof why));
}
END_TEST

/* ---- the pass and the emitter on a small kernel ----------------------------------------------- */

static const char kernel_text[] = "line 1\nline 2\nline 3\nline 4\nline 5\n";
static Source kernel_src = {"k.fa", kernel_text, sizeof kernel_text - 1};

/* s = dot(a, b) for a, b loaded through pointers; m = max(s, 1);
 * o = dot(exp2(s - m[:, None]).to(f16), v) accumulated over a loop; stores. */
START_TEST(test_pass_on_attention_like_kernel) {
  FaCompiler fc;
  fa_compiler_init(&fc, NULL);
  SrcLoc loc = fa_loc(&kernel_src, 1, 1);
  IrFunction *fn = fa_ir_function_new(&fc.arena, "k", loc);
  IrBuilder b = {fn, fn->body};
  IrValue *pa = fa_ir_add_param(fn, "a", fa_type_ptr(DT_F16, 0, NULL), 0, loc)->value;
  IrValue *po = fa_ir_add_param(fn, "o", fa_type_ptr(DT_F32, 0, NULL), 1, loc)->value;
  int s64[2] = {64, 64}, s1[1] = {64}, s64x1[2] = {64, 1}, s4096[1] = {4096};
  IrType h2 = fa_type_block(DT_F16, 2, s64), f2 = fa_type_block(DT_F32, 2, s64), f1 = fa_type_block(DT_F32, 1, s1);
  IrType i1d = fa_type_block(DT_I32, 1, s4096), i2 = fa_type_block(DT_I32, 2, s64);
  /* offsets 0..4095 as [64, 64] */
  IrOp *ar = fa_ir_op(&b, IR_ARANGE, loc, NULL, 0, &i1d, 1);
  ar->ival = 0;
  ar->ival2 = 4096;
  IrValue *offs = fa_ir_op1(&b, IR_RESHAPE, 0, loc, i2, &ar->results[0], 1);
  IrValue *pas = fa_ir_op1(&b, IR_SPLAT, 0, loc, fa_type_ptr(DT_F16, 2, s64), &pa, 1);
  IrValue *ptrs_ops[2] = {pas, offs};
  IrValue *ptrs = fa_ir_op1(&b, IR_PTR_ADD, 0, loc, fa_type_ptr(DT_F16, 2, s64), ptrs_ops, 2);
  IrValue *x = fa_ir_op1(&b, IR_LOAD, 0, loc, h2, &ptrs, 1);
  x->name = "x";
  /* loop: acc += dot(exp2(s - max(s)).to(f16), x) with s = dot(x, x) */
  IrValue *zero = fa_ir_const_float(&b, loc, f2, 0.0);
  IrValue *lb = fa_ir_const_int(&b, loc, fa_type_scalar(DT_I32), 0);
  IrValue *ub = fa_ir_const_int(&b, loc, fa_type_scalar(DT_I32), 4);
  IrValue *st = fa_ir_const_int(&b, loc, fa_type_scalar(DT_I32), 1);
  IrValue *fops[4] = {lb, ub, st, zero};
  IrOp *loop = fa_ir_op(&b, IR_FOR, loc, fops, 4, &f2, 1);
  IrRegion *body = fa_ir_region_new(fn);
  loop->regions[0] = body;
  loop->nregions = 1;
  body->parent_op = loop;
  fa_ir_region_add_arg(fn, body, fa_type_scalar(DT_I32), "it", loc);
  IrValue *acc = fa_ir_region_add_arg(fn, body, f2, "acc", loc);
  IrBuilder bb = {fn, body};
  IrValue *dops[2] = {x, x};
  IrValue *s = fa_ir_op1(&bb, IR_DOT, DOT_DEFAULT, loc, f2, dops, 2);
  IrOp *red = fa_ir_op(&bb, IR_REDUCE, loc, &s, 1, &f1, 1);
  red->sub = RED_MAX;
  red->axis = 1;
  IrOp *ex = fa_ir_op(&bb, IR_EXPAND_DIMS, loc, &red->results[0], 1, (IrType[]){fa_type_block(DT_F32, 2, s64x1)}, 1);
  ex->axis = 1;
  IrValue *mb = fa_ir_op1(&bb, IR_BROADCAST, 0, loc, f2, &ex->results[0], 1);
  IrValue *sub_ops[2] = {s, mb};
  IrValue *d = fa_ir_op1(&bb, IR_BINARY, BIN_SUB, loc, f2, sub_ops, 2);
  IrValue *p = fa_ir_op1(&bb, IR_UNARY, UN_EXP2, loc, f2, &d, 1);
  IrValue *ph = fa_ir_op1(&bb, IR_CAST, 0, loc, h2, &p, 1);
  IrValue *d2ops[3] = {ph, x, acc};
  IrValue *acc2 = fa_ir_op1(&bb, IR_DOT, DOT_DEFAULT, loc, f2, d2ops, 3);
  fa_ir_op(&bb, IR_YIELD, loc, &acc2, 1, NULL, 0);
  /* store the result through pointers */
  IrValue *pos = fa_ir_op1(&b, IR_SPLAT, 0, loc, fa_type_ptr(DT_F32, 2, s64), &po, 1);
  IrValue *optrs_ops[2] = {pos, offs};
  IrValue *optrs = fa_ir_op1(&b, IR_PTR_ADD, 0, loc, fa_type_ptr(DT_F32, 2, s64), optrs_ops, 2);
  IrValue *sops[2] = {optrs, loop->results[0]};
  fa_ir_op(&b, IR_STORE, loc, sops, 2, NULL, 0);
  fa_ir_op(&b, IR_RETURN, loc, NULL, 0, NULL, 0);
  ck_assert_msg(fa_ir_verify(fn, &fc.diag), "%s", fc.diag.text.data ? fc.diag.text.data : "");

  IrKernel k = {.device = fn, .warps = 4, .stages = 2};
  FaLayoutPlan plan;
  ck_assert(fa_assign_layouts(&fc, &k, &plan));
  const FaDotPlan *dp1 = s->def->aux, *dp2 = acc2->def->aux;
  ck_assert_int_eq(dp1->kind, FA_DOT_MMA);
  ck_assert_int_eq(dp2->kind, FA_DOT_MMA);
  ck_assert_int_eq(dp1->wm, 4);
  ck_assert_int_eq(dp1->wn, 1);
  /* results, the loop-carried accumulator and the elementwise chain share
     the accumulator layout; the reduction is its slice */
  ck_assert_ptr_eq(s->layout, dp1->acc);
  ck_assert_ptr_eq(acc->layout, dp2->acc);
  ck_assert_ptr_eq(loop->results[0]->layout, acc->layout);
  ck_assert_ptr_eq(p->layout, s->layout);
  ck_assert_ptr_eq(ph->layout, s->layout);
  FaLayout sl;
  fa_layout_slice(&sl, s->layout, 1);
  ck_assert(fa_layout_equal(red->results[0]->layout, &sl));
  /* P goes into the second product from registers, without a conversion */
  ck_assert(dp2->a_in_regs);
  /* x (whose pointers share offsets with the stores of the accumulator) came
     out in the accumulator layout, which for a square block is an A operand */
  int perm[FA_LAYOUT_MAX_BITS];
  ck_assert_int_eq(dp1->a_in_regs, fa_layout_register_permutation(x->layout, dp1->a, perm));
  ck_assert(fa_value_is_virtual(&plan, zero));
  ck_assert(fa_value_is_virtual(&plan, ar->results[0]));
  for (int i = 0; i < plan.layouts.len; i++)
    assert_bijection(plan.layouts.items[i]);
  fa_layout_plan_free(&plan);

  /* the emitter: one translation unit, the device library included, both
     products on the tensor cores, P taken from registers */
  FaCudaTarget target;
  ck_assert(fa_cuda_target_parse("sm_90a", &target));
  FaCudaKernel out;
  ck_assert_msg(fa_emit_cuda(&fc, &k, target, &out), "%s", fc.diag.text.data ? fc.diag.text.data : "");
  if (getenv("CHECK_LAYOUT_DUMP"))
    fputs(out.source, stderr);
  ck_assert_ptr_nonnull(strstr(out.source, "#include \"fadsl_device.cuh\""));
  ck_assert_ptr_nonnull(strstr(out.source, "__launch_bounds__(128)"));
  ck_assert_ptr_nonnull(strstr(out.source, "fa::stage<")); /* B operands from shared memory */
  /* sm_90a: both products are warpgroup instructions (4 warps along M), the
     second with P in registers; tiles swizzled and fenced for the async proxy */
  ck_assert_ptr_nonnull(strstr(out.source, "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16"));
  ck_assert_ptr_nonnull(strstr(out.source, "A from registers"));
  ck_assert_ptr_nonnull(strstr(out.source, "fa::SwzTile<64, 128>"));
  ck_assert_ptr_nonnull(strstr(out.source, "fa::fence_async_smem();"));
  ck_assert_ptr_null(strstr(out.source, "fa::mma_rs<"));
  ck_assert_ptr_nonnull(strstr(out.source, "fa::reduce<fa::OpMax"));
  ck_assert_ptr_null(strstr(out.source, "fa::convert<fa_L")); /* no layout conversion through shared memory */
  ck_assert_ptr_nonnull(strstr(out.source, "// k.fa:1:"));
  ck_assert_int_eq(out.threads, 128);
  ck_assert_int_eq(out.nargs, 2);
  ck_assert_int_eq(out.args[0].kind, CUDA_ARG_POINTER);
  ck_assert_int_eq(out.args[0].dtype, DT_F16);
  ck_assert_int_eq(out.args[0].align, 16);
  ck_assert_uint_gt(out.shared_bytes, 64 * 64 * 2);
  /* emitting again (another target) gives the same layouts */
  ck_assert(fa_cuda_target_parse("sm_80", &target));
  FaCudaKernel again;
  ck_assert(fa_emit_cuda(&fc, &k, target, &again));
  ck_assert_ptr_nonnull(strstr(again.source, "fa::mma_rs<"));
  ck_assert_ptr_null(strstr(again.source, "wgmma"));
  ck_assert_ptr_nonnull(strstr(again.source, "fa::PadTile<144>"));   /* 64 halves + 16 bytes of padding */
  fa_compiler_free(&fc);
}
END_TEST

START_TEST(test_targets_and_headers) {
  FaCudaTarget t;
  char buf[32];
  ck_assert(fa_cuda_target_parse("sm_80", &t));
  ck_assert_int_eq(t.sm, 80);
  ck_assert(!t.arch_specific);
  ck_assert(fa_cuda_target_parse("sm_90a", &t));
  ck_assert_int_eq(t.sm, 90);
  ck_assert(t.arch_specific);
  fa_cuda_target_name(t, buf, sizeof buf);
  ck_assert_str_eq(buf, "sm_90a");
  ck_assert(fa_cuda_target_parse("compute_86", &t));
  ck_assert_int_eq(t.sm, 86);
  ck_assert(!fa_cuda_target_parse("sm_75", &t));
  ck_assert(!fa_cuda_target_parse("sm_80a", &t));
  ck_assert(!fa_cuda_target_parse("sm_", &t));
  ck_assert(!fa_cuda_target_parse("gfx90a", &t));
  ck_assert(!fa_cuda_target_parse("sm_90b", &t));
  int n = 0;
  const FaEmbeddedHeader *h = fa_device_headers(&n);
  ck_assert_int_ge(n, 4);
  bool main_header = false;
  for (int i = 0; i < n; i++) {
    ck_assert_ptr_nonnull(h[i].text);
    ck_assert_ptr_null(strstr(h[i].text, "#include <")); /* nothing from the toolkit */
    if (!strcmp(h[i].name, "fadsl_device.cuh"))
      main_header = true;
  }
  ck_assert(main_header);
}
END_TEST

static Suite *layout_suite(void) {
  Suite *s = suite_create("layout");
  TCase *tc = tcase_create("layouts");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_blocked_bijection);
  tcase_add_test(tc, test_blocked_vectors_and_coalescing);
  tcase_add_test(tc, test_mma_fragments_match_ptx);
  tcase_add_test(tc, test_accumulator_is_next_a_operand);
  tcase_add_test(tc, test_slice_trans_reshape_broadcast);
  tcase_add_test(tc, test_check_rejects);
  tcase_add_test(tc, test_pass_on_attention_like_kernel);
  tcase_add_test(tc, test_targets_and_headers);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(layout_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}
