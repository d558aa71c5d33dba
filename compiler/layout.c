/* layout.c - distributed layouts (see layout.h) and the layout assignment
 * pass of the CUDA backend.
 *
 * The pass gives every block value a layout in three rounds, each followed
 * by propagation along the edges where a layout carries over for free:
 *   1. the results of dot: the mma.sync accumulator layout (they are the
 *      expensive values: softmax statistics, masks and scalings of the
 *      attention kernels then run directly on the accumulator fragments);
 *   2. the results of block-pointer loads: blocked, vectorised along the
 *      dimension of stride 1;
 *   3. whatever is left, in program order: the default blocked layout.
 * Propagation: elementwise ops, loop-carried values and if results share one
 * layout; expand_dims/reshape keep the bits; trans permutes them; reduce
 * slices its operand's layout; broadcast asks of its operand the result's
 * layout without the stretched dimensions.  The first layout to reach a value
 * wins; where an operand's layout differs from what its user needs, the
 * emitter converts it (emit_cuda.c), once, right after its definition.
 * Constants, splats and aranges have no layout at all: they are computed at
 * each use in the layout the use needs.
 */
#include "layout.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- bit bookkeeping -------------------------------------------------------------- */

static int ilog2(int x) {
  int r = 0;
  while ((1 << r) < x)
    r++;
  return r;
}

static bool is_pow2(int x) { return x > 0 && (x & (x - 1)) == 0; }

void fa_layout_dim_bits(const FaLayout *l, int d, int *first, int *count) {
  int off = 0;
  for (int i = l->rank - 1; i > d; i--)
    off += ilog2(l->shape[i]);
  *first = off;
  *count = ilog2(l->shape[d]);
}

/* Sets kind, rank, shape and nbits; clears the bit lists. */
static bool layout_init(FaLayout *l, FaLayoutKind kind, int rank, const int *shape, int warps) {
  memset(l, 0, sizeof *l);
  l->kind = kind;
  l->id = -1;
  if (rank < 0 || rank > FA_MAX_RANK || !is_pow2(warps) || ilog2(warps) > FA_LAYOUT_MAX_WARP_BITS)
    return false;
  l->rank = rank;
  for (int d = 0; d < rank; d++) {
    if (!is_pow2(shape[d]))
      return false;
    l->shape[d] = shape[d];
    l->nbits += ilog2(shape[d]);
  }
  if (l->nbits > FA_LAYOUT_MAX_BITS)
    return false;
  l->nwarp = ilog2(warps);
  for (int i = 0; i < FA_LAYOUT_LANE_BITS; i++)
    l->lane[i] = -1;
  for (int i = 0; i < FA_LAYOUT_MAX_WARP_BITS; i++)
    l->warp[i] = -1;
  return true;
}

static void push_reg(FaLayout *l, int pos) {
  if (l->nreg < FA_LAYOUT_MAX_BITS)
    l->reg[l->nreg++] = (signed char)pos;
}

bool fa_layout_blocked(FaLayout *out, int rank, const int *shape, const int *order, int vec, int warps) {
  if (!layout_init(out, FA_LAYOUT_BLOCKED, rank, shape, warps) || !is_pow2(vec))
    return false;
  int seq[FA_LAYOUT_MAX_BITS], n = 0;
  unsigned seen = 0;
  for (int k = 0; k < rank; k++) {
    int d = order[k];
    if (d < 0 || d >= rank || (seen & (1u << d)))
      return false;
    seen |= 1u << d;
    int first, count;
    fa_layout_dim_bits(out, d, &first, &count);
    for (int j = 0; j < count; j++)
      seq[n++] = first + j;
  }
  int first0, count0;
  fa_layout_dim_bits(out, rank > 0 ? order[0] : 0, &first0, &count0);
  int vbits = rank > 0 ? ilog2(vec) : 0;
  if (vbits > count0)
    vbits = count0;
  /* a small block: fewer elements per thread rather than threads holding copies */
  if (vbits > n - FA_LAYOUT_LANE_BITS - out->nwarp)
    vbits = n - FA_LAYOUT_LANE_BITS - out->nwarp > 0 ? n - FA_LAYOUT_LANE_BITS - out->nwarp : 0;
  int i = 0;
  for (; i < vbits; i++)
    push_reg(out, seq[i]);
  for (int b = 0; b < FA_LAYOUT_LANE_BITS; b++)
    out->lane[b] = (signed char)(i < n ? seq[i++] : -1);
  for (int b = 0; b < out->nwarp; b++)
    out->warp[b] = (signed char)(i < n ? seq[i++] : -1);
  for (; i < n; i++)
    push_reg(out, seq[i]);
  return true;
}

bool fa_mma_n_contiguous(int wm, int wn) { return wm == 4 && wn > 1; }

bool fa_mma_warps(int M, int N, int K, int warps, int *wm, int *wn) {
  if (M < 16 || N < 8 || K < 16 || !is_pow2(M) || !is_pow2(N) || !is_pow2(K) || !is_pow2(warps))
    return false;
  int m = warps < M / 16 ? warps : M / 16;
  int rest = warps / m;
  int n = rest < N / 8 ? rest : N / 8;
  *wm = m;
  *wn = n;
  return true;
}

bool fa_layout_mma(FaLayout *out, int M, int N, int warps, int wm, int wn) {
  int shape[2] = {M, N};
  if (!layout_init(out, FA_LAYOUT_MMA, 2, shape, warps) || M < 16 || N < 8 || wm * wn > warps ||
      !is_pow2(wm) || !is_pow2(wn) || wm > M / 16 || wn > N / 8)
    return false;
  int ln = ilog2(N), lm = ilog2(M), lwm = ilog2(wm), lwn = ilog2(wn);
#define NB(i) (i)
#define MB(j) (ln + (j))
  push_reg(out, NB(0));
  push_reg(out, MB(3));
  out->lane[0] = (signed char)NB(1);
  out->lane[1] = (signed char)NB(2);
  out->lane[2] = (signed char)MB(0);
  out->lane[3] = (signed char)MB(1);
  out->lane[4] = (signed char)MB(2);
  int w = 0;
  for (int j = 0; j < lwm; j++)
    out->warp[w++] = (signed char)MB(4 + j);
  int nw = fa_mma_n_contiguous(wm, wn) ? ln - lwn : 3; /* the warps' lowest column bit */
  for (int j = 0; j < lwn; j++)
    out->warp[w++] = (signed char)NB(nw + j);
  for (int j = 3; j < ln; j++)
    if (j < nw || j >= nw + lwn)
      push_reg(out, NB(j));
  for (int j = 4 + lwm; j < lm; j++)
    push_reg(out, MB(j));
#undef NB
#undef MB
  return true;
}

bool fa_layout_dot_operand(FaLayout *out, int operand, int M, int N, int K, int warps, int wm, int wn) {
  if (M < 16 || N < 8 || K < 16 || wm * wn > warps || wm > M / 16 || wn > N / 8)
    return false;
  int lwm = ilog2(wm), lwn = ilog2(wn), lk = ilog2(K);
  if (operand == 0) {
    int shape[2] = {M, K};
    if (!layout_init(out, FA_LAYOUT_DOT_A, 2, shape, warps))
      return false;
    int lm = ilog2(M);
#define KB(i) (i)
#define MB(j) (lk + (j))
    push_reg(out, KB(0));
    push_reg(out, MB(3));
    push_reg(out, KB(3));
    out->lane[0] = (signed char)KB(1);
    out->lane[1] = (signed char)KB(2);
    out->lane[2] = (signed char)MB(0);
    out->lane[3] = (signed char)MB(1);
    out->lane[4] = (signed char)MB(2);
    for (int j = 0; j < lwm; j++)
      out->warp[j] = (signed char)MB(4 + j);
    for (int j = 4; j < lk; j++)
      push_reg(out, KB(j));
    for (int j = 4 + lwm; j < lm; j++)
      push_reg(out, MB(j));
#undef KB
#undef MB
  } else {
    int shape[2] = {K, N};
    if (!layout_init(out, FA_LAYOUT_DOT_B, 2, shape, warps))
      return false;
    int ln = ilog2(N);
#define NB(i) (i)
#define KB(j) (ln + (j))
    push_reg(out, KB(0));
    push_reg(out, KB(3));
    out->lane[0] = (signed char)KB(1);
    out->lane[1] = (signed char)KB(2);
    out->lane[2] = (signed char)NB(0);
    out->lane[3] = (signed char)NB(1);
    out->lane[4] = (signed char)NB(2);
    int nw = fa_mma_n_contiguous(wm, wn) ? ln - lwn : 3;
    for (int j = 0; j < lwn; j++)
      out->warp[lwm + j] = (signed char)NB(nw + j);
    for (int j = 4; j < lk; j++)
      push_reg(out, KB(j));
    for (int j = 3; j < ln; j++)
      if (j < nw || j >= nw + lwn)
        push_reg(out, NB(j));
#undef NB
#undef KB
  }
  return true;
}

/* Removes the flat-index bits in `removed` (a mask) and renumbers the rest:
 * registers selecting removed bits disappear, lanes and warps hold copies. */
static void remove_bits(FaLayout *l, unsigned removed) {
  int below[FA_LAYOUT_MAX_BITS + 1];
  int c = 0;
  for (int p = 0; p <= FA_LAYOUT_MAX_BITS; p++) {
    below[p] = c;
    if (p < FA_LAYOUT_MAX_BITS && (removed & (1u << p)))
      c++;
  }
#define RENUM(x) ((x) < 0 || (removed & (1u << (x))) ? -1 : (x) - below[(x)])
  int n = 0;
  for (int i = 0; i < l->nreg; i++) {
    int p = RENUM(l->reg[i]);
    if (p >= 0)
      l->reg[n++] = (signed char)p;
  }
  l->nreg = n;
  for (int i = 0; i < FA_LAYOUT_LANE_BITS; i++)
    l->lane[i] = (signed char)RENUM(l->lane[i]);
  for (int i = 0; i < l->nwarp; i++)
    l->warp[i] = (signed char)RENUM(l->warp[i]);
#undef RENUM
}

void fa_layout_slice(FaLayout *out, const FaLayout *in, int axis) {
  *out = *in;
  out->kind = FA_LAYOUT_DERIVED;
  out->desc = NULL;
  out->id = -1;
  int first, count;
  fa_layout_dim_bits(in, axis, &first, &count);
  unsigned removed = 0;
  for (int j = 0; j < count; j++)
    removed |= 1u << (first + j);
  remove_bits(out, removed);
  for (int d = axis; d + 1 < in->rank; d++)
    out->shape[d] = in->shape[d + 1];
  out->rank = in->rank - 1;
  out->nbits = in->nbits - count;
}

void fa_layout_reshape(FaLayout *out, const FaLayout *in, int rank, const int *shape) {
  *out = *in;
  if (out->rank != rank || memcmp(out->shape, shape, (size_t)rank * sizeof(int))) {
    out->kind = FA_LAYOUT_DERIVED;
    out->desc = NULL;
  }
  out->id = -1;
  out->rank = rank;
  memset(out->shape, 0, sizeof out->shape);
  for (int d = 0; d < rank; d++)
    out->shape[d] = shape[d];
}

void fa_layout_trans(FaLayout *out, const FaLayout *in, const int *perm) {
  *out = *in;
  out->kind = FA_LAYOUT_DERIVED;
  out->desc = NULL;
  out->id = -1;
  for (int d = 0; d < in->rank; d++)
    out->shape[d] = in->shape[perm[d]];
  /* new position of every old flat-index bit */
  int map[FA_LAYOUT_MAX_BITS];
  for (int d = 0; d < in->rank; d++) {
    int nf, nc, of, oc;
    fa_layout_dim_bits(out, d, &nf, &nc);
    fa_layout_dim_bits(in, perm[d], &of, &oc);
    for (int j = 0; j < oc; j++)
      map[of + j] = nf + j;
  }
  for (int i = 0; i < out->nreg; i++)
    out->reg[i] = (signed char)map[in->reg[i]];
  for (int i = 0; i < FA_LAYOUT_LANE_BITS; i++)
    out->lane[i] = (signed char)(in->lane[i] < 0 ? -1 : map[in->lane[i]]);
  for (int i = 0; i < out->nwarp; i++)
    out->warp[i] = (signed char)(in->warp[i] < 0 ? -1 : map[in->warp[i]]);
}

void fa_layout_broadcast_source(FaLayout *out, const FaLayout *result, int rank, const int *src_shape) {
  *out = *result;
  out->kind = FA_LAYOUT_DERIVED;
  out->desc = NULL;
  out->id = -1;
  unsigned removed = 0;
  for (int d = 0; d < rank; d++)
    if (src_shape[d] != result->shape[d]) {
      int first, count;
      fa_layout_dim_bits(result, d, &first, &count);
      for (int j = 0; j < count; j++)
        removed |= 1u << (first + j);
      out->nbits -= count;
      out->shape[d] = src_shape[d];
    }
  remove_bits(out, removed);
}

bool fa_layout_equal(const FaLayout *a, const FaLayout *b) {
  if (a == b)
    return true;
  if (a->rank != b->rank || a->nreg != b->nreg || a->nwarp != b->nwarp)
    return false;
  for (int d = 0; d < a->rank; d++)
    if (a->shape[d] != b->shape[d])
      return false;
  return !memcmp(a->reg, b->reg, (size_t)a->nreg) && !memcmp(a->lane, b->lane, FA_LAYOUT_LANE_BITS) &&
         !memcmp(a->warp, b->warp, (size_t)a->nwarp);
}

bool fa_layout_register_permutation(const FaLayout *a, const FaLayout *b, int perm[FA_LAYOUT_MAX_BITS]) {
  if (a->nbits != b->nbits || a->nreg != b->nreg || a->nwarp != b->nwarp ||
      memcmp(a->lane, b->lane, FA_LAYOUT_LANE_BITS) || memcmp(a->warp, b->warp, (size_t)a->nwarp))
    return false;
  for (int i = 0; i < b->nreg; i++) {
    perm[i] = -1;
    for (int j = 0; j < a->nreg; j++)
      if (a->reg[j] == b->reg[i])
        perm[i] = j;
    if (perm[i] < 0)
      return false;
  }
  return true;
}

bool fa_layout_check(const FaLayout *l, char *why, size_t why_size) {
  int count[FA_LAYOUT_MAX_BITS] = {0};
  if (l->nbits < 0 || l->nbits > FA_LAYOUT_MAX_BITS || l->nreg > FA_LAYOUT_MAX_BITS ||
      l->nwarp > FA_LAYOUT_MAX_WARP_BITS) {
    snprintf(why, why_size, "bit counts out of range");
    return false;
  }
  int bits = 0;
  for (int d = 0; d < l->rank; d++) {
    if (!is_pow2(l->shape[d])) {
      snprintf(why, why_size, "dimension %d is not a power of two", d);
      return false;
    }
    bits += ilog2(l->shape[d]);
  }
  if (bits != l->nbits) {
    snprintf(why, why_size, "nbits %d does not match the shape (%d)", l->nbits, bits);
    return false;
  }
  for (int i = 0; i < l->nreg; i++) {
    if (l->reg[i] < 0 || l->reg[i] >= l->nbits) {
      snprintf(why, why_size, "register bit %d selects %d", i, l->reg[i]);
      return false;
    }
    count[l->reg[i]]++;
  }
  for (int i = 0; i < FA_LAYOUT_LANE_BITS; i++) {
    if (l->lane[i] >= l->nbits) {
      snprintf(why, why_size, "lane bit %d selects %d", i, l->lane[i]);
      return false;
    }
    if (l->lane[i] >= 0)
      count[l->lane[i]]++;
  }
  for (int i = 0; i < l->nwarp; i++) {
    if (l->warp[i] >= l->nbits) {
      snprintf(why, why_size, "warp bit %d selects %d", i, l->warp[i]);
      return false;
    }
    if (l->warp[i] >= 0)
      count[l->warp[i]]++;
  }
  for (int p = 0; p < l->nbits; p++)
    if (count[p] != 1) {
      snprintf(why, why_size, "flat-index bit %d is selected %d times", p, count[p]);
      return false;
    }
  return true;
}

int fa_layout_lane_dups(const FaLayout *l) {
  int m = 0;
  for (int i = 0; i < FA_LAYOUT_LANE_BITS; i++)
    if (l->lane[i] < 0)
      m |= 1 << i;
  return m;
}

int fa_layout_warp_dups(const FaLayout *l) {
  int m = 0;
  for (int i = 0; i < l->nwarp; i++)
    if (l->warp[i] < 0)
      m |= 1 << i;
  return m;
}

static void print_bits(const signed char *v, int n, StrBuf *out) {
  fa_sb_puts(out, "fa::Bits<");
  for (int i = 0; i < n; i++)
    fa_sb_printf(out, "%s%d", i ? ", " : "", v[i]);
  fa_sb_puts(out, ">");
}

void fa_layout_print_type(const FaLayout *l, StrBuf *out) {
  fa_sb_puts(out, "fa::Layout<fa::Shape<");
  for (int d = 0; d < l->rank; d++)
    fa_sb_printf(out, "%s%d", d ? ", " : "", l->shape[d]);
  fa_sb_puts(out, ">, ");
  print_bits(l->reg, l->nreg, out);
  fa_sb_puts(out, ", ");
  print_bits(l->lane, FA_LAYOUT_LANE_BITS, out);
  fa_sb_puts(out, ", ");
  print_bits(l->warp, l->nwarp, out);
  fa_sb_puts(out, ">");
}

static const char *kind_name(FaLayoutKind k) {
  switch (k) {
  case FA_LAYOUT_BLOCKED: return "blocked";
  case FA_LAYOUT_MMA: return "mma accumulator";
  case FA_LAYOUT_DOT_A: return "mma operand A";
  case FA_LAYOUT_DOT_B: return "mma operand B";
  case FA_LAYOUT_DERIVED: return "derived";
  }
  return "?";
}

void fa_layout_describe(const FaLayout *l, StrBuf *out) {
  fa_sb_printf(out, "%s [", l->desc ? l->desc : kind_name(l->kind));
  for (int d = 0; d < l->rank; d++)
    fa_sb_printf(out, "%s%d", d ? ", " : "", l->shape[d]);
  fa_sb_printf(out, "]: %d registers", 1 << l->nreg);
  int ld = fa_layout_lane_dups(l), wd = fa_layout_warp_dups(l);
  if (ld || wd)
    fa_sb_printf(out, ", copies over lanes 0x%x warps 0x%x", (unsigned)ld, (unsigned)wd);
}

/* ---- the plan ------------------------------------------------------------------------------- */

const FaLayout *fa_layout_intern(FaCompiler *fc, FaLayoutPlan *plan, const FaLayout *l) {
  for (int i = 0; i < plan->layouts.len; i++) {
    const FaLayout *x = plan->layouts.items[i];
    if (fa_layout_equal(x, l))
      return x;
  }
  FaLayout *copy = fa_arena_alloc(&fc->arena, sizeof *copy);
  if (!copy)
    return NULL;
  *copy = *l;
  copy->id = plan->layouts.len;
  if (!copy->desc) {
    StrBuf sb;
    fa_sb_init(&sb);
    fa_sb_puts(&sb, kind_name(l->kind));
    if (l->kind == FA_LAYOUT_BLOCKED && l->nreg > 0) {
      /* registers in a row along the fastest dimension */
      int vec = 1;
      for (int i = 0; i < l->nreg && l->reg[i] == l->reg[0] + i; i++)
        vec *= 2;
      fa_sb_printf(&sb, ", %d per thread in a row", vec);
    }
    copy->desc = fa_arena_strdup(&fc->arena, sb.data ? sb.data : "");
    fa_sb_free(&sb);
  }
  fa_ptrvec_push(&plan->layouts, copy);
  return plan->layouts.items ? copy : NULL;
}

static const FaLayout *intern_or_null(FaCompiler *fc, FaLayoutPlan *plan, bool ok, const FaLayout *l) {
  return ok ? fa_layout_intern(fc, plan, l) : NULL;
}

const FaLayout *fa_layout_default(FaCompiler *fc, FaLayoutPlan *plan, IrType t) {
  int order[FA_MAX_RANK];
  for (int k = 0; k < t.rank; k++)
    order[k] = t.rank - 1 - k;
  int size = t.dtype == DT_PTR ? 8 : fa_dtype_size(t.dtype);
  int vec = size > 0 && size <= 16 ? 16 / size : 1;
  FaLayout l;
  return intern_or_null(fc, plan, fa_layout_blocked(&l, t.rank, t.shape, order, vec, plan->warps), &l);
}

bool fa_value_is_virtual(const FaLayoutPlan *plan, const IrValue *v) {
  return plan->is_virtual && v->id >= 0 && plan->is_virtual[v->id];
}

void fa_layout_plan_free(FaLayoutPlan *plan) {
  fa_ptrvec_free(&plan->layouts);
  free(plan->is_virtual);
  plan->is_virtual = NULL;
}

/* ---- the pass --------------------------------------------------------------------------------- */

typedef struct Pass {
  FaCompiler *fc;
  FaLayoutPlan *plan;
  const IrFunction *fn;
  PtrVec *uses;           /* by value id: the ops using it */
  PtrVec values;          /* every value defined in the function, in program order */
  PtrVec ops;             /* every op, in program order */
  PtrVec work;            /* values whose layout is newly set */
  unsigned char *root;    /* by value id, for virtual values: 1 uniform (const/splat), 2 arange-based */
  bool ok;
} Pass;

static bool is_block(const IrValue *v) {
  return v->type.rank > 0 && v->type.dtype != DT_BLOCKPTR;
}

static void collect_region(Pass *p, const IrRegion *r) {
  for (int i = 0; i < r->nargs; i++)
    fa_ptrvec_push(&p->values, r->args[i]);
  for (IrOp *op = r->first; op; op = op->next) {
    fa_ptrvec_push(&p->ops, op);
    for (int i = 0; i < op->noperands; i++) {
      IrValue *v = op->operands[i];
      if (v->id >= 0 && v->id < p->fn->next_value_id)
        fa_ptrvec_push(&p->uses[v->id], op);
    }
    for (int i = 0; i < op->nregions; i++)
      collect_region(p, op->regions[i]);
    for (int i = 0; i < op->nresults; i++)
      fa_ptrvec_push(&p->values, op->results[i]);
  }
}

/* Which values are computed at their uses (layout.h: is_virtual). */
static void mark_virtual(Pass *p) {
  for (int i = 0; i < p->ops.len; i++) {
    const IrOp *op = p->ops.items[i];
    if (op->nresults != 1 || !is_block(op->results[0]))
      continue;
    int id = op->results[0]->id;
    unsigned char src = op->noperands > 0 ? p->root[op->operands[0]->id] : 0;
    unsigned char r = 0;
    switch (op->kind) {
    case IR_CONST:
    case IR_SPLAT: r = 1; break;
    case IR_ARANGE: r = 2; break;
    case IR_EXPAND_DIMS:
    case IR_BROADCAST:
    case IR_TRANS: r = src; break;
    case IR_RESHAPE: r = src == 1 ? 1 : 0; break;
    default: break;
    }
    p->root[id] = r;
    p->plan->is_virtual[id] = r != 0;
  }
}

static void set_layout(Pass *p, IrValue *v, const FaLayout *l) {
  if (!l) {
    p->ok = false;
    return;
  }
  if (!is_block(v) || fa_value_is_virtual(p->plan, v) || v->layout)
    return;
  v->layout = (struct FaLayout *)l;
  fa_ptrvec_push(&p->work, v);
}

static const FaLayout *reshaped(Pass *p, const FaLayout *l, IrType t) {
  FaLayout x;
  fa_layout_reshape(&x, l, t.rank, t.shape);
  return fa_layout_intern(p->fc, p->plan, &x);
}

static bool is_elementwise(IrOpKind k) {
  switch (k) {
  case IR_UNARY:
  case IR_BINARY:
  case IR_CMP:
  case IR_SELECT:
  case IR_CAST:
  case IR_PTR_ADD:
  case IR_LOAD:
  case IR_STORE:
  case IR_ATOMIC_ADD:
  case IR_ASSERT:
  case IR_FMA:
  case IR_RAND:
  case IR_SCAN:     /* results and operands share one layout: the scan works on any */
  case IR_PRINT: return true;
  default: return false;
  }
}

static IrOp *region_yield(const IrRegion *r) { return r && r->last && r->last->kind == IR_YIELD ? r->last : NULL; }

/* Links result i of a FOR or IF with everything that must share its layout. */
static void set_carried(Pass *p, IrOp *op, int i, const FaLayout *l) {
  if (i < 0 || i >= op->nresults)
    return;
  set_layout(p, op->results[i], l);
  if (op->kind == IR_FOR) {
    IrRegion *body = op->regions[0];
    if (3 + i < op->noperands)
      set_layout(p, op->operands[3 + i], l);
    if (body && 1 + i < body->nargs)
      set_layout(p, body->args[1 + i], l);
    IrOp *y = region_yield(body);
    if (y && i < y->noperands)
      set_layout(p, y->operands[i], l);
  } else if (op->kind == IR_IF) {
    for (int r = 0; r < op->nregions; r++) {
      IrOp *y = region_yield(op->regions[r]);
      if (y && i < y->noperands)
        set_layout(p, y->operands[i], l);
    }
  } else if (op->kind == IR_WHILE && op->nregions == 2) {
    if (i < op->noperands)
      set_layout(p, op->operands[i], l);
    for (int r = 0; r < 2; r++)
      if (op->regions[r] && i < op->regions[r]->nargs)
        set_layout(p, op->regions[r]->args[i], l);
    IrOp *y = region_yield(op->regions[1]);
    if (y && i < y->noperands)
      set_layout(p, y->operands[i], l);
  }
}

/* v (an operand or result of op) has just got its layout: pass it on. */
static void propagate_through(Pass *p, IrOp *op, IrValue *v) {
  const FaLayout *l = v->layout;
  bool is_result = false;
  for (int i = 0; i < op->nresults; i++)
    if (op->results[i] == v)
      is_result = true;
  if (is_elementwise(op->kind)) {
    for (int i = 0; i < op->noperands; i++)
      if (is_block(op->operands[i]))
        set_layout(p, op->operands[i], l);
    for (int i = 0; i < op->nresults; i++)
      set_layout(p, op->results[i], l);
    return;
  }
  switch (op->kind) {
  case IR_EXPAND_DIMS:
  case IR_RESHAPE:
    if (is_result)
      set_layout(p, op->operands[0], reshaped(p, l, op->operands[0]->type));
    else
      set_layout(p, op->results[0], reshaped(p, l, op->results[0]->type));
    break;
  case IR_TRANS: {
    FaLayout x;
    if (is_result) {
      int inv[FA_MAX_RANK];
      for (int d = 0; d < l->rank; d++)
        inv[op->perm[d]] = d;
      fa_layout_trans(&x, l, inv);
      set_layout(p, op->operands[0], fa_layout_intern(p->fc, p->plan, &x));
    } else {
      fa_layout_trans(&x, l, op->perm);
      set_layout(p, op->results[0], fa_layout_intern(p->fc, p->plan, &x));
    }
    break;
  }
  case IR_BROADCAST:
    if (is_result) {
      FaLayout x;
      fa_layout_broadcast_source(&x, l, op->operands[0]->type.rank, op->operands[0]->type.shape);
      set_layout(p, op->operands[0], fa_layout_intern(p->fc, p->plan, &x));
    }
    break;
  case IR_REDUCE:
  case IR_REDUCE_FN:
    /* the results: slices of the (first) operand's layout; the operands of a
       reduction with a combine function are taken in the first one's */
    if (is_result || (op->kind == IR_REDUCE_FN && v != op->operands[0]))
      break;
    for (int i = 1; op->kind == IR_REDUCE_FN && i < op->noperands; i++)
      set_layout(p, op->operands[i], l);
    if (is_block(op->results[0])) {
      FaLayout x;
      fa_layout_slice(&x, l, op->axis);
      for (int i = 0; i < op->nresults; i++)
        set_layout(p, op->results[i], fa_layout_intern(p->fc, p->plan, &x));
    }
    break;
  case IR_DOT:
    if (is_result && op->noperands == 3)
      set_layout(p, op->operands[2], l);
    break;
  case IR_YIELD: {
    IrOp *parent = op->parent ? op->parent->parent_op : NULL;
    /* (a while loop's condition yields its i1 scalar, a scan's combine scalars) */
    if (parent && parent->kind != IR_SCAN && parent->kind != IR_REDUCE_FN &&
        !(parent->kind == IR_WHILE && op->parent == parent->regions[0]))
      for (int i = 0; i < op->noperands; i++)
        if (op->operands[i] == v)
          set_carried(p, parent, i, l);
    break;
  }
  case IR_FOR:
    for (int i = 3; i < op->noperands; i++)
      if (op->operands[i] == v)
        set_carried(p, op, i - 3, l);
    for (int i = 0; i < op->nresults; i++)
      if (op->results[i] == v)
        set_carried(p, op, i, l);
    break;
  case IR_IF:
    for (int i = 0; i < op->nresults; i++)
      if (op->results[i] == v)
        set_carried(p, op, i, l);
    break;
  case IR_WHILE:
    for (int i = 0; i < op->noperands; i++)
      if (op->operands[i] == v)
        set_carried(p, op, i, l);
    for (int i = 0; i < op->nresults; i++)
      if (op->results[i] == v)
        set_carried(p, op, i, l);
    break;
  default:
    break;
  }
}

static void drain(Pass *p) {
  while (p->work.len > 0 && p->ok) {
    IrValue *v = p->work.items[--p->work.len];
    if (v->def)
      propagate_through(p, v->def, v);
    if (v->region && v->region->parent_op) {
      IrOp *owner = v->region->parent_op;
      if (owner->kind == IR_FOR)
        for (int j = 1; j < v->region->nargs; j++)
          if (v->region->args[j] == v)
            set_carried(p, owner, j - 1, v->layout);
      if (owner->kind == IR_WHILE)
        for (int j = 0; j < v->region->nargs; j++)
          if (v->region->args[j] == v)
            set_carried(p, owner, j, v->layout);
    }
    PtrVec *u = &p->uses[v->id];
    for (int i = 0; i < u->len; i++)
      propagate_through(p, u->items[i], v);
  }
}

/* The make_block_ptr a block pointer value comes from, following advance,
 * loop-carried values (whose every update must come from the same origin)
 * and if results; NULL when it cannot be told. */
static const IrOp *blockptr_origin_depth(const IrValue *v, int depth) {
  if (depth > 64 || !v)
    return NULL;
  if (v->def) {
    const IrOp *op = v->def;
    switch (op->kind) {
    case IR_MAKE_BLOCK_PTR: return op;
    case IR_ADVANCE: return blockptr_origin_depth(op->operands[0], depth + 1);
    case IR_FOR:
    case IR_WHILE:
    case IR_IF: {
      int i = -1;
      for (int r = 0; r < op->nresults; r++)
        if (op->results[r] == v)
          i = r;
      if (op->kind == IR_FOR)
        return i >= 0 && 3 + i < op->noperands ? blockptr_origin_depth(op->operands[3 + i], depth + 1) : NULL;
      if (op->kind == IR_WHILE)
        return i >= 0 && i < op->noperands ? blockptr_origin_depth(op->operands[i], depth + 1) : NULL;
      const IrOp *a = NULL;
      for (int r = 0; r < op->nregions; r++) {
        const IrOp *y = region_yield(op->regions[r]);
        const IrOp *o = y && i >= 0 && i < y->noperands ? blockptr_origin_depth(y->operands[i], depth + 1) : NULL;
        if (!o || (a && a != o))
          return NULL;
        a = o;
      }
      return a;
    }
    default: return NULL;
    }
  }
  if (v->region && v->region->parent_op && v->region->parent_op->kind == IR_FOR) {
    const IrOp *f = v->region->parent_op;
    for (int j = 1; j < v->region->nargs; j++)
      if (v->region->args[j] == v)
        return 3 + j - 1 < f->noperands ? blockptr_origin_depth(f->operands[3 + j - 1], depth + 1) : NULL;
  }
  if (v->region && v->region->parent_op && v->region->parent_op->kind == IR_WHILE) {
    const IrOp *w = v->region->parent_op;
    for (int j = 0; j < v->region->nargs; j++)
      if (v->region->args[j] == v)
        return j < w->noperands ? blockptr_origin_depth(w->operands[j], depth + 1) : NULL;
  }
  return NULL;
}

const IrOp *fa_blockptr_origin(const IrValue *v) { return blockptr_origin_depth(v, 0); }


/* The fastest dimension of a block-pointer load: the one of constant stride 1,
 * else the first of the make_block_ptr's order. */
static void blockptr_order(const IrValue *bp, int rank, int *order) {
  const IrOp *mk = fa_blockptr_origin(bp);
  int fastest = rank - 1;
  if (mk && mk->noperands == 1 + 3 * rank) {
    fastest = mk->perm[0] >= 0 && mk->perm[0] < rank ? mk->perm[0] : rank - 1;
    for (int d = 0; d < rank; d++) {
      int64_t s;
      if (fa_ir_const_int_value(mk->operands[1 + rank + d], &s) && s == 1) {
        fastest = d;
        break;
      }
    }
  }
  int k = 0;
  order[k++] = fastest;
  for (int d = rank - 1; d >= 0; d--)
    if (d != fastest)
      order[k++] = d;
}

static void plan_dot(Pass *p, IrOp *op) {
  FaDotPlan *dp = fa_arena_alloc(&p->fc->arena, sizeof *dp);
  if (!dp) {
    p->ok = false;
    return;
  }
  op->aux = dp;
  IrType ta = op->operands[0]->type, tb = op->operands[1]->type, tr = op->results[0]->type;
  int M = ta.shape[0], K = ta.shape[1], N = tb.shape[1];
  bool half = ta.dtype == DT_F16 || ta.dtype == DT_BF16;
  /* constants as operands (rare) go the simple way */
  bool stored = !fa_value_is_virtual(p->plan, op->operands[0]) && !fa_value_is_virtual(p->plan, op->operands[1]);
  int wm, wn;
  if (half && stored && fa_mma_warps(M, N, K, p->plan->warps, &wm, &wn)) {
    FaLayout a, b, c;
    bool ok = fa_layout_mma(&c, M, N, p->plan->warps, wm, wn) &&
              fa_layout_dot_operand(&a, 0, M, N, K, p->plan->warps, wm, wn) &&
              fa_layout_dot_operand(&b, 1, M, N, K, p->plan->warps, wm, wn);
    if (ok) {
      char buf[64];
      snprintf(buf, sizeof buf, "mma accumulator, warps %dx%d", wm, wn);
      c.desc = fa_arena_strdup(&p->fc->arena, buf);
      snprintf(buf, sizeof buf, "mma operand A, warps %dx%d", wm, wn);
      a.desc = fa_arena_strdup(&p->fc->arena, buf);
      snprintf(buf, sizeof buf, "mma operand B, warps %dx%d", wm, wn);
      b.desc = fa_arena_strdup(&p->fc->arena, buf);
      dp->kind = FA_DOT_MMA;
      dp->wm = wm;
      dp->wn = wn;
      dp->acc = fa_layout_intern(p->fc, p->plan, &c);
      dp->a = fa_layout_intern(p->fc, p->plan, &a);
      dp->b = fa_layout_intern(p->fc, p->plan, &b);
      if (!dp->acc || !dp->a || !dp->b)
        p->ok = false;
      return;
    }
  }
  dp->kind = FA_DOT_FMA;
  dp->acc = fa_layout_default(p->fc, p->plan, tr);
  dp->a = NULL; /* taken as they are */
  dp->b = NULL;
  if (!dp->acc) {
    fa_error(&p->fc->diag, op->loc, "dot of [%d, %d] x [%d, %d] does not fit the CUDA backend's layouts", M, K,
             K, N);
    p->ok = false;
  }
}

static const FaLayout *op_layout(const IrOp *op) {
  if (op->kind == IR_STORE || op->kind == IR_STORE_BLOCK || op->kind == IR_ATOMIC_ADD_BLOCK ||
      op->kind == IR_ASSERT || op->kind == IR_PRINT)
    return op->aux;
  if (op->nresults > 0 && is_block(op->results[0]))
    return op->results[0]->layout;
  return NULL;
}

const FaLayout *fa_layout_operand_need(FaCompiler *fc, FaLayoutPlan *plan, const IrOp *op, int i) {
  const IrValue *x = op->operands[i];
  if (!is_block(x))
    return NULL;
  const FaLayout *own = x->layout ? x->layout : fa_layout_default(fc, plan, x->type);
  const FaLayout *l = op_layout(op);
  if (is_elementwise(op->kind))
    return l;
  switch (op->kind) {
  case IR_EXPAND_DIMS:
  case IR_RESHAPE: {
    if (!l)
      return NULL;
    FaLayout r;
    fa_layout_reshape(&r, l, x->type.rank, x->type.shape);
    return fa_layout_intern(fc, plan, &r);
  }
  case IR_TRANS: {
    if (!l)
      return NULL;
    int inv[FA_MAX_RANK];
    for (int d = 0; d < l->rank; d++)
      inv[op->perm[d]] = d;
    FaLayout r;
    fa_layout_trans(&r, l, inv);
    return fa_layout_intern(fc, plan, &r);
  }
  case IR_BROADCAST: {
    if (!l)
      return NULL;
    FaLayout r;
    fa_layout_broadcast_source(&r, l, x->type.rank, x->type.shape);
    return fa_layout_intern(fc, plan, &r);
  }
  case IR_DOT: {
    const FaDotPlan *dp = op->aux;
    if (!dp)
      return NULL;
    if (i == 2)
      return dp->acc;
    if (dp->kind == FA_DOT_MMA)
      return i == 0 && dp->a_in_regs ? dp->a : own; /* else staged from its own layout */
    return own;
  }
  case IR_REDUCE: return own;
  case IR_REDUCE_FN: {
    const IrValue *x0 = op->operands[0];
    return x0->layout ? x0->layout : fa_layout_default(fc, plan, x0->type);
  }
  case IR_STORE_BLOCK:
  case IR_ATOMIC_ADD_BLOCK: return l;
  case IR_YIELD: {
    const IrOp *parent = op->parent ? op->parent->parent_op : NULL;
    if (!parent || i >= parent->nresults)
      return NULL;
    return parent->results[i]->layout;
  }
  case IR_FOR:
    return i >= 3 && i - 3 < op->nresults ? op->results[i - 3]->layout : NULL;
  case IR_WHILE:
    return i < op->nresults ? op->results[i]->layout : NULL;
  default: return NULL;
  }
}

static bool run_pass(Pass *p, const IrKernel *k) {
  const IrFunction *fn = k->device;
  collect_region(p, fn->body);
  /* a kernel may be emitted more than once (one target after another) */
  for (int i = 0; i < p->values.len; i++)
    ((IrValue *)p->values.items[i])->layout = NULL;
  mark_virtual(p);
  /* 1. dot results */
  for (int i = 0; i < p->ops.len && p->ok; i++) {
    IrOp *op = p->ops.items[i];
    if (op->kind == IR_DOT) {
      plan_dot(p, op);
      if (p->ok)
        set_layout(p, op->results[0], ((FaDotPlan *)op->aux)->acc);
      drain(p);
    }
  }
  /* 2. block-pointer loads */
  for (int i = 0; i < p->ops.len && p->ok; i++) {
    IrOp *op = p->ops.items[i];
    if (op->kind == IR_LOAD_BLOCK && !op->results[0]->layout) {
      IrType t = op->results[0]->type;
      int order[FA_MAX_RANK];
      blockptr_order(op->operands[0], t.rank, order);
      int size = fa_dtype_size(t.dtype);
      FaLayout l;
      bool ok = fa_layout_blocked(&l, t.rank, t.shape, order, size > 0 && size <= 16 ? 16 / size : 1,
                                  p->plan->warps);
      set_layout(p, op->results[0], intern_or_null(p->fc, p->plan, ok, &l));
      drain(p);
    }
  }
  /* 3. everything else, in program order */
  for (int i = 0; i < p->values.len && p->ok; i++) {
    IrValue *v = p->values.items[i];
    if (is_block(v) && !fa_value_is_virtual(p->plan, v) && !v->layout) {
      set_layout(p, v, fa_layout_default(p->fc, p->plan, v->type));
      drain(p);
    }
  }
  /* where the A operands of tensor-core products come from */
  for (int i = 0; i < p->ops.len && p->ok; i++) {
    IrOp *op = p->ops.items[i];
    FaDotPlan *dp = op->kind == IR_DOT ? op->aux : NULL;
    if (!dp || dp->kind != FA_DOT_MMA)
      continue;
    const IrValue *a = op->operands[0];
    int perm[FA_LAYOUT_MAX_BITS];
    if (fa_value_is_virtual(p->plan, a) || !a->layout) {
      dp->a_in_regs = false;
    } else if (fa_layout_register_permutation(a->layout, dp->a, perm)) {
      dp->a_in_regs = true;
    } else {
      /* converting into fragments would cost registers for the whole loop: the
         shared-memory copy (written once) is read with ldmatrix instead */
      dp->a_in_regs = false;
    }
  }
  /* a loop's results are its carried variables after the last iteration */
  for (int i = 0; i < p->ops.len && p->ok; i++) {
    IrOp *op = p->ops.items[i];
    if (op->kind == IR_FOR)
      for (int j = 0; j < op->nresults && 1 + j < op->regions[0]->nargs; j++)
        if (is_block(op->results[j]))
          op->results[j]->layout = op->regions[0]->args[1 + j]->layout;
    if (op->kind == IR_WHILE)
      for (int j = 0; j < op->nresults && j < op->regions[0]->nargs; j++)
        if (is_block(op->results[j]))
          op->results[j]->layout = op->regions[0]->args[j]->layout;
  }
  /* execution layouts of ops without a block result */
  for (int i = 0; i < p->ops.len && p->ok; i++) {
    IrOp *op = p->ops.items[i];
    const FaLayout *l = NULL;
    if (op->kind == IR_STORE || op->kind == IR_ASSERT || op->kind == IR_PRINT) {
      for (int j = 0; j < op->noperands && !l; j++)
        if (is_block(op->operands[j]))
          l = op->operands[j]->layout;
      if (!l && op->noperands > 0 && is_block(op->operands[0]))
        l = fa_layout_default(p->fc, p->plan, op->operands[0]->type);
      op->aux = (void *)l;
    } else if (op->kind == IR_STORE_BLOCK || op->kind == IR_ATOMIC_ADD_BLOCK) {
      l = op->operands[1]->layout;
      if (!l)
        l = fa_layout_default(p->fc, p->plan, op->operands[1]->type);
      op->aux = (void *)l;
    }
  }
  return p->ok;
}

bool fa_assign_layouts(FaCompiler *fc, const IrKernel *k, FaLayoutPlan *plan) {
  memset(plan, 0, sizeof *plan);
  plan->warps = k->warps > 0 ? k->warps : 4;
  if (!is_pow2(plan->warps) || plan->warps > 32) {
    fa_error(&fc->diag, k->device->loc, "warps must be a power of two from 1 to 32 (got %d)", plan->warps);
    return false;
  }
  int n = k->device->next_value_id;
  Pass p = {0};
  p.fc = fc;
  p.plan = plan;
  p.fn = k->device;
  p.ok = true;
  p.uses = calloc((size_t)(n > 0 ? n : 1), sizeof *p.uses);
  p.root = calloc((size_t)(n > 0 ? n : 1), 1);
  plan->is_virtual = calloc((size_t)(n > 0 ? n : 1), sizeof(bool));
  if (!p.uses || !p.root || !plan->is_virtual) {
    fa_error(&fc->diag, k->device->loc, "out of memory in the layout pass");
    p.ok = false;
  } else {
    run_pass(&p, k);
    if (!p.ok && fc->diag.errors == 0)
      fa_error(&fc->diag, k->device->loc, "internal compiler error: layout assignment failed for '%s'",
               k->device->name ? k->device->name : "?");
  }
  if (p.uses)
    for (int i = 0; i < n; i++)
      fa_ptrvec_free(&p.uses[i]);
  free(p.uses);
  free(p.root);
  fa_ptrvec_free(&p.values);
  fa_ptrvec_free(&p.ops);
  fa_ptrvec_free(&p.work);
  return p.ok;
}
