/* cuda_plan.c - the CUDA backend's planning step: every decision about how
 * a specialised kernel becomes GPU code, made once and recorded in an
 * FaCudaPlan (see cuda_plan.h), which emit_cuda.c prints.
 *
 * The steps, in order (later ones read what earlier ones decided):
 *   1. layouts (layout.c);
 *   2. divisibility of integer scalars, from the facts about the arguments;
 *   3. liveness;
 *   4. the layout each op reads each operand in, the conversions that
 *      needs, and the tiles tensor-core products read;
 *   5. pipelines: loads in loops issued ahead into rings of tile buffers;
 *      then which of them, and which loads outside loops, are bulk tensor
 *      copies (TMA, cuda_plan_tma.c), with their mbarriers, and which
 *      block-pointer stores and atomic_adds are bulk copies out of staging
 *      tiles;
 *   6. additions fused into products;
 *   7. tile offsets (tiles with disjoint lifetimes share memory);
 *   8. products: instruction and operand sources;
 *   9. loads and stores: method and vector width; the shared memory of
 *      bulk stores' staging tiles (refused where it would not fit);
 *  10. reductions, scans and prints; the synchronisation steps of each
 *      pipeline;
 *  11. the schedule (persistent or not, the tile order); the shared memory
 *      budget; warp roles and barriers.
 */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_plan.h"

/* ---- the op map: op -> what was planned for it --------------------------------------------- */

typedef struct FaOpPlan {
  const IrOp *op;
  const FaLayout **needs;   /* per operand (see fa_plan_operand_layout) */
  FaAccessPlan *access;
  FaProductPlan *product;
  FaReducePlan *reduce;
  FaScanPlan *scan;
  FaPrintPlan *print;
  FaPipelinePlan *pipeline;
  bool producer;            /* warp specialisation: in the producer's slice */
  bool tma_considered;      /* a load into a swizzled tile that is not a bulk copy: why not */
  FaTmaRefusal tma_refusal;
  int tma_dim;
} FaOpPlan;

struct FaOpMap {
  FaOpPlan *slots;
  size_t mask;              /* capacity - 1 (a power of two, at least twice the ops) */
};

static size_t op_hash(const IrOp *op, size_t mask) {
  uint64_t x = (uint64_t)(uintptr_t)op;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  return (size_t)x & mask;
}

static FaOpPlan *op_find(const FaOpMap *m, const IrOp *op) {
  if (!m || !m->slots)
    return NULL;
  for (size_t i = op_hash(op, m->mask);; i = (i + 1) & m->mask) {
    if (m->slots[i].op == op)
      return &m->slots[i];
    if (!m->slots[i].op)
      return NULL;
  }
}

static FaOpPlan *op_insert(FaOpMap *m, const IrOp *op) {
  size_t i = op_hash(op, m->mask);
  while (m->slots[i].op && m->slots[i].op != op)
    i = (i + 1) & m->mask;
  m->slots[i].op = op;
  return &m->slots[i];
}

/* ---- the planner ---------------------------------------------------------------------------------- */

typedef struct Planner {
  FaCudaPlan *p;
  FaCompiler *fc;
  PtrVec tiles, accesses, pipelines, products, reduces, scans, prints, waits;
  const IrOp **fused_add;   /* by value id, on a product's result: the addition computing it */
  int *fused_addend;        /* by value id, on the addition's result */
  const IrOp **fused_dot;   /* by value id, on the addition's result: the product */
  bool ok;
} Planner;

static bool is_block(const IrValue *v) { return v->type.rank > 0 && v->type.dtype != DT_BLOCKPTR; }

static FaValuePlan *val(const Planner *pl, const IrValue *v) { return &pl->p->values[v->id]; }

static bool is_virtual(const Planner *pl, const IrValue *v) { return fa_value_is_virtual(&pl->p->layouts, v); }

static void *palloc(Planner *pl, size_t size) {
  void *x = fa_arena_alloc(&pl->fc->arena, size ? size : 1);
  if (!x)
    pl->ok = false;
  return x;
}

static int min_i(int a, int b) { return a < b ? a : b; }

static int ctz64(uint64_t x) {
  if (!x)
    return FA_DIV_MAX;
  int n = 0;
  while (!(x & 1) && n < FA_DIV_MAX) {
    x >>= 1;
    n++;
  }
  return n;
}

static void list_ops(const IrRegion *r, PtrVec *ops) {
  for (const IrOp *op = r->first; op; op = op->next) {
    fa_ptrvec_push(ops, (void *)op);
    for (int i = 0; i < op->nregions; i++)
      list_ops(op->regions[i], ops);
  }
}

static int op_position(const FaCudaPlan *p, const IrOp *op) {
  for (int i = 0; i < p->nops; i++)
    if (p->order[i] == op)
      return i;
  return -1;
}

/* ---- 2. divisibility ------------------------------------------------------------------------------ */

static int div_of(const Planner *pl, const IrValue *v) { return v ? val(pl, v)->div_log2 : 0; }

static const FaArgFact *find_fact(const FaCudaPlan *p, const char *name) {
  for (int i = 0; name && i < p->nfacts; i++)
    if (p->facts[i].name && !strcmp(p->facts[i].name, name))
      return &p->facts[i];
  return NULL;
}

/* Pointers: their alignment in elements, from the fact about them or the
 * assumption of 16 bytes (cudaMalloc's allocations; the runtime passes the
 * fact for what it is given).  Integers: the fact's divisor. */
static void plan_params(Planner *pl) {
  const IrFunction *fn = pl->p->fn;
  for (int i = 0; i < fn->nparams; i++) {
    const IrValue *v = fn->params[i].value;
    const FaArgFact *f = find_fact(pl->p, fn->params[i].name);
    int d = 0;
    if (v->type.dtype == DT_PTR) {
      int size = fa_dtype_size(v->type.pointee);
      long long bytes = f ? f->multiple : 16;
      while (size > 0 && (long long)size << (d + 1) <= bytes && d < FA_DIV_MAX)
        d++;
    } else if (f && fa_dtype_is_int(v->type.dtype)) {
      d = ctz64((uint64_t)f->multiple);
    }
    val(pl, v)->div_log2 = d;
  }
}

/* Known power-of-two divisors of integer and pointer scalars (pointers in
 * elements). */
static void analyse_div_op(Planner *pl, const IrOp *op) {
  if (op->nresults != 1)
    return;
  IrValue *r = op->results[0];
  int d = 0;
  switch (op->kind) {
  case IR_CONST:
    if (fa_dtype_is_int(r->type.dtype))
      d = ctz64((uint64_t)op->ival);
    break;
  case IR_CAST:
    if (fa_dtype_is_int(r->type.dtype) && fa_dtype_is_int(op->operands[0]->type.dtype))
      d = div_of(pl, op->operands[0]);
    break;
  case IR_BINARY:
    switch (op->sub) {
    case BIN_ADD:
    case BIN_SUB: d = min_i(div_of(pl, op->operands[0]), div_of(pl, op->operands[1])); break;
    case BIN_MUL: d = min_i(FA_DIV_MAX, div_of(pl, op->operands[0]) + div_of(pl, op->operands[1])); break;
    default: break;
    }
    break;
  case IR_PTR_ADD:
    if (r->type.rank == 0)
      d = min_i(div_of(pl, op->operands[0]), div_of(pl, op->operands[1]));
    break;
  case IR_SELECT:
    if (r->type.rank == 0)
      d = min_i(div_of(pl, op->operands[1]), div_of(pl, op->operands[2]));
    break;
  default: break;
  }
  if (r->type.rank == 0)
    val(pl, r)->div_log2 = d;
}

/* In program order: a load in a loop needs what the end of the loop body
 * adds to its pointer. */
static void analyse_divisibility(Planner *pl, const IrRegion *r) {
  for (const IrOp *op = r->first; op; op = op->next) {
    analyse_div_op(pl, op);
    if (op->kind == IR_FOR && op->nregions == 1 && op->regions[0]->nargs > 0)
      val(pl, op->regions[0]->args[0])->div_log2 = min_i(div_of(pl, op->operands[0]), div_of(pl, op->operands[2]));
    for (int i = 0; i < op->nregions; i++)
      analyse_divisibility(pl, op->regions[i]);
  }
}

/* Divisibility of a block pointer's offset along dimension dim, over every
 * way the value can be reached (advances, iterations of for and while
 * loops, branches). */
static int blockptr_offset_div(const Planner *pl, const IrValue *v, int dim, const IrValue *stop, int depth) {
  if (!v || depth > 64)
    return 0;
  if (v == stop)
    return FA_DIV_MAX;
  if (v->def) {
    const IrOp *op = v->def;
    switch (op->kind) {
    case IR_MAKE_BLOCK_PTR: {
      int rank = v->type.rank;
      return div_of(pl, op->operands[1 + 2 * rank + dim]);
    }
    case IR_ADVANCE:
      return min_i(blockptr_offset_div(pl, op->operands[0], dim, stop, depth + 1), div_of(pl, op->operands[1 + dim]));
    case IR_FOR: {
      for (int i = 0; i < op->nresults; i++)
        if (op->results[i] == v)
          return blockptr_offset_div(pl, op->regions[0]->args[1 + i], dim, stop, depth + 1);
      return 0;
    }
    case IR_WHILE: {
      for (int i = 0; i < op->nresults; i++)
        if (op->results[i] == v && op->nregions == 2)
          return blockptr_offset_div(pl, op->regions[1]->args[i], dim, stop, depth + 1);
      return 0;
    }
    case IR_IF: {
      int d = FA_DIV_MAX;
      for (int i = 0; i < op->nresults; i++)
        if (op->results[i] == v)
          for (int r = 0; r < op->nregions; r++) {
            const IrOp *y = op->regions[r]->last;
            if (!y || y->kind != IR_YIELD || i >= y->noperands)
              return 0;
            d = min_i(d, blockptr_offset_div(pl, y->operands[i], dim, stop, depth + 1));
          }
      return d;
    }
    default: return 0;
    }
  }
  /* a while loop's condition and body see the same carried values: the
     initial one and what each iteration of the body makes of it */
  if (v->region && v->region->parent_op && v->region->parent_op->kind == IR_WHILE &&
      v->region->parent_op->nregions == 2) {
    const IrOp *w = v->region->parent_op;
    const IrRegion *body = w->regions[1];
    for (int j = 0; j < v->region->nargs; j++)
      if (v->region->args[j] == v) {
        if (j >= w->noperands || j >= body->nargs)
          return 0;
        int init = blockptr_offset_div(pl, w->operands[j], dim, stop, depth + 1);
        const IrOp *y = body->last;
        if (!y || y->kind != IR_YIELD || j >= y->noperands)
          return 0;
        int step = blockptr_offset_div(pl, y->operands[j], dim, body->args[j], depth + 1);
        return min_i(init, step);
      }
  }
  if (v->region && v->region->parent_op && v->region->parent_op->kind == IR_FOR) {
    const IrOp *f = v->region->parent_op;
    for (int j = 1; j < v->region->nargs; j++)
      if (v->region->args[j] == v) {
        int init = blockptr_offset_div(pl, f->operands[3 + j - 1], dim, stop, depth + 1);
        const IrOp *y = v->region->last;
        if (!y || y->kind != IR_YIELD || j - 1 >= y->noperands)
          return 0;
        int step = blockptr_offset_div(pl, y->operands[j - 1], dim, v, depth + 1);
        return min_i(init, step);
      }
  }
  return 0;
}

/* Narrows *vlog to x; when that lowers it, x's constraint is the limit. */
static void narrow(FaVecFacts *f, int *vlog, int x, FaVecLimit why) {
  if (x < *vlog) {
    *vlog = x;
    f->limit = why;
  }
}

/* Elements per access of a block-pointer load or store in layout l: the
 * registers in a row along the dimension of constant stride 1, as far as
 * alignment (base, other strides, offsets) and the checked bounds allow, in
 * accesses of 4, 8 or 16 bytes.  The facts behind the width go to *f. */
static int block_vector_width(const Planner *pl, const IrValue *bp, const FaLayout *l, unsigned boundary,
                              FaVecFacts *f) {
  memset(f, 0, sizeof *f);
  f->dim = -1;
  f->layout_log2 = f->bytes_log2 = f->base_log2 = f->stride_log2 = f->offset_log2 = f->bound_log2 = FA_DIV_UNKNOWN;
  const IrOp *mk = fa_blockptr_origin(bp);
  int rank = bp->type.rank, size = fa_dtype_size(bp->type.pointee);
  f->limit = FA_VEC_NO_ORIGIN;
  if (!mk || size <= 0 || mk->noperands != 1 + 3 * rank)
    return 1;
  int c = -1;
  for (int d = 0; d < rank && c < 0; d++) {
    int64_t s;
    if (fa_ir_const_int_value(mk->operands[1 + rank + d], &s) && s == 1)
      c = d;
  }
  f->limit = FA_VEC_NO_UNIT_STRIDE;
  if (c < 0)
    return 1;
  f->dim = c;
  int first, count;
  fa_layout_dim_bits(l, c, &first, &count);
  int run = 0;
  while (run < l->nreg && run < count && l->reg[run] == first + run)
    run++;
  int vlog = run;
  f->layout_log2 = run;
  f->limit = FA_VEC_LAYOUT;
  int maxlog = 0;
  while ((1 << (maxlog + 1)) * size <= 16)
    maxlog++;
  f->bytes_log2 = maxlog;
  narrow(f, &vlog, maxlog, FA_VEC_16_BYTES);
  f->base_log2 = div_of(pl, mk->operands[0]);
  f->stride = mk->operands[0];
  narrow(f, &vlog, f->base_log2, FA_VEC_BASE);
  int smin = FA_DIV_MAX;
  const IrValue *sval = NULL;
  for (int d = 0; d < rank; d++)
    if (d != c) {
      int64_t s;
      const IrValue *sv = mk->operands[1 + rank + d];
      int x = fa_ir_const_int_value(sv, &s) ? ctz64((uint64_t)s) : div_of(pl, sv);
      if (x < smin || !sval) {
        smin = x;
        sval = sv;
      }
    }
  if (sval) {
    f->stride_log2 = smin;
    if (smin < vlog)
      f->stride = sval;
    narrow(f, &vlog, smin, FA_VEC_STRIDE);
  }
  f->offset_log2 = blockptr_offset_div(pl, bp, c, NULL, 0);
  narrow(f, &vlog, f->offset_log2, FA_VEC_OFFSET);
  if (boundary & (1u << c)) {
    f->bound_log2 = div_of(pl, mk->operands[1 + c]);
    if (f->bound_log2 < vlog)
      f->stride = mk->operands[1 + c];
    narrow(f, &vlog, f->bound_log2, FA_VEC_BOUND);
  }
  if (vlog > 0 && (1 << vlog) * size < 4) {
    vlog = 0;
    f->limit = FA_VEC_4_BYTES;
  }
  return 1 << vlog;
}

/* ---- 3. liveness ---------------------------------------------------------------------------------- */

bool fa_plan_reads_tile(const IrOp *op, int i) {
  const FaDotPlan *dp = op->kind == IR_DOT ? op->aux : NULL;
  return dp && dp->kind == FA_DOT_MMA && (i == 1 || (i == 0 && !dp->a_in_regs));
}

/* For a product whose A operand is x.to(f16 / bf16) of an f32 x in
 * registers: x (the fragments are rounded as they are packed); else NULL. */
static const IrValue *fused_cast_source(const Planner *pl, const IrOp *op, int i) {
  const FaDotPlan *dp = op->kind == IR_DOT ? op->aux : NULL;
  if (!dp || dp->kind != FA_DOT_MMA || i != 0 || !dp->a_in_regs)
    return NULL;
  const IrValue *a = op->operands[0];
  if (is_virtual(pl, a) || !a->def || a->def->kind != IR_CAST)
    return NULL;
  const IrValue *x = a->def->operands[0];
  if (x->type.dtype != DT_F32 || is_virtual(pl, x) || !x->layout)
    return NULL;
  return x;
}

/* The value whose tile a dot operand reads (the operand, or what it is the
 * transpose of), and whether the operand is that value transposed. */
static const IrValue *tile_source(const Planner *pl, const IrValue *x, bool *flip) {
  *flip = false;
  if (x->def && x->def->kind == IR_TRANS && x->type.rank == 2 && x->def->perm[0] == 1 &&
      !is_virtual(pl, x->def->operands[0]) && x->def->operands[0]->layout) {
    *flip = true;
    return x->def->operands[0];
  }
  return x;
}

static bool has_effects(IrOpKind k) {
  switch (k) {
  case IR_STORE:
  case IR_STORE_BLOCK:
  case IR_ATOMIC_ADD:
  case IR_ATOMIC_ADD_BLOCK:
  case IR_ASSERT:
  case IR_PRINT:
  case IR_FOR:
  case IR_WHILE:
  case IR_IF:
  case IR_YIELD:
  case IR_RETURN: return true;
  default: return false;
  }
}

bool fa_plan_op_live(const FaCudaPlan *p, const IrOp *op) {
  if (has_effects(op->kind))
    return true;
  for (int i = 0; i < op->nresults; i++)
    if (p->values[op->results[i]->id].live)
      return true;
  return false;
}

/* Whether operand i of op is yielded into a result of an if that nobody
 * reads (the flag of an early return after the last statement, say): it is
 * no use of the value. */
static bool yields_unread(const FaCudaPlan *p, const IrOp *op, int i) {
  const IrOp *owner = op->kind == IR_YIELD && op->parent ? op->parent->parent_op : NULL;
  return owner && owner->kind == IR_IF && i < owner->nresults && !p->values[owner->results[i]->id].live;
}

/* One backward pass: in the flattened program order every use comes after
 * its definition, so marking in reverse order reaches a fixed point (an if's
 * results are used after the if's regions, so they are marked before its
 * yields are seen). */
static void compute_liveness(Planner *pl) {
  FaCudaPlan *p = pl->p;
  for (int n = p->nops - 1; n >= 0; n--) {
    const IrOp *op = p->order[n];
    if (!fa_plan_op_live(p, op))
      continue;
    for (int i = 0; i < op->noperands; i++) {
      if (yields_unread(p, op, i))
        continue;
      const IrValue *x = op->operands[i];
      const IrValue *f = fused_cast_source(pl, op, i);
      if (f) {
        x = f;
      } else if (fa_plan_reads_tile(op, i)) {
        bool flip;
        x = tile_source(pl, x, &flip);
      }
      if (!fa_plan_reads_tile(op, i))
        val(pl, x)->nontile_uses++;
      val(pl, x)->live = true;
    }
  }
}

/* ---- 4. operand layouts, conversions, tiles ---------------------------------------------------- */

static void add_conversion(Planner *pl, const IrValue *x, const FaLayout *need) {
  if (!need || !is_block(x) || is_virtual(pl, x) || x->layout == need)
    return;
  FaValuePlan *vp = val(pl, x);
  for (int i = 0; i < vp->nconvs; i++)
    if (vp->convs[i].to == need)
      return;
  FaConversionPlan *c = palloc(pl, (size_t)(vp->nconvs + 1) * sizeof *c);
  if (!c)
    return;
  if (vp->nconvs)
    memcpy(c, vp->convs, (size_t)vp->nconvs * sizeof *c);
  FaConversionPlan *n = &c[vp->nconvs];
  n->from = x->layout;
  n->to = need;
  int perm[FA_LAYOUT_MAX_BITS];
  n->in_registers = fa_layout_register_permutation(x->layout, need, perm);
  if (!n->in_registers) {
    int size = x->type.dtype == DT_PTR ? 8 : fa_dtype_size(x->type.dtype);
    n->scratch = (size_t)fa_type_numel(x->type) * (size_t)(size > 0 ? size : 1);
  }
  vp->convs = c;
  vp->nconvs++;
}

static int dim_of_bit(const FaLayout *l, int bit) {
  for (int d = 0; d < l->rank; d++) {
    int first, count;
    fa_layout_dim_bits(l, d, &first, &count);
    if (bit >= first && bit < first + count)
      return d;
  }
  return l->rank - 1;
}

/* Tiles take the swizzled layouts wgmma reads (fa_mma.cuh's SwzTile) on
 * targets with wgmma, when the element is 16 bits wide (the products wgmma
 * does here), rows are 32, 64 or a multiple of 128 bytes long, and come in
 * groups of 8 (the swizzle's period). */
static bool has_wgmma(const FaCudaPlan *p) { return p->target.sm == 90 && p->target.arch_specific; }

static bool swizzle_ok(const FaCudaPlan *p, int size, int row_bytes, int rows) {
  if (!has_wgmma(p) || size != 2 || rows % 8 != 0)
    return false;
  return row_bytes == 32 || row_bytes == 64 || row_bytes % 128 == 0;
}

/* Elements a thread writes to shared memory at once from layout l along
 * dimension dim: its registers' run of consecutive elements there, at most
 * 16 bytes. */
static int store_vec_along(const FaLayout *l, int dim, int size) {
  int first, count, run = 0;
  fa_layout_dim_bits(l, dim, &first, &count);
  while (run < l->nreg && run < count && l->reg[run] == first + run)
    run++;
  int v = 1 << run;
  while (v * size > 16)
    v /= 2;
  return v;
}

/* A shared-memory copy of x, stored along the dimension its registers run
 * along, written in vectors of up to 16 bytes. */
static void request_tile(Planner *pl, const IrValue *x) {
  FaValuePlan *vp = val(pl, x);
  if (vp->tile || !x->layout || x->type.rank != 2)
    return;
  FaTilePlan *t = palloc(pl, sizeof *t);
  if (!t)
    return;
  const FaLayout *l = x->layout;
  int size = fa_dtype_size(x->type.dtype);
  int d_in = l->nreg > 0 ? dim_of_bit(l, l->reg[0]) : 1;
  int v = store_vec_along(l, d_in, size);
  t->value = x;
  t->inner = d_in;
  t->store_vec = v;
  t->rows = x->type.shape[1 - d_in];
  t->fill = FA_FILL_REGISTERS;
  t->nbufs = 1;
  int row_bytes = x->type.shape[d_in] * size;
  if (swizzle_ok(pl->p, size, row_bytes, t->rows)) {
    t->format = FA_TILE_SWIZZLED;
    t->pitch = row_bytes;
    t->swizzle = row_bytes < 128 ? row_bytes : 128;
  } else {
    t->format = FA_TILE_PADDED;
    t->pitch = row_bytes + 16;
  }
  t->buf_bytes = (size_t)t->rows * (size_t)t->pitch;
  vp->tile = t;
  fa_ptrvec_push(&pl->tiles, t);
}

/* What keeps a product's warps from wgmma (NULL: nothing): whole
 * warpgroups, and with more than one along N a single one along M (its 64
 * rows; fa_mma_n_contiguous). */
static const char *wgmma_warps_unfit(const FaCudaPlan *p, const FaDotPlan *dp) {
  if (p->warps % 4 || dp->wm * dp->wn != p->warps)
    return "its warps are not whole warpgroups";
  if (dp->wn > 1 && !fa_mma_n_contiguous(dp->wm, dp->wn))
    return dp->wm < 4 ? "fewer than the 64 rows a warpgroup takes" : "its warps split both M and N";
  return NULL;
}

/* Whether wgmma can take a product whose warpgroups have n columns each of
 * K deep, reading A from a_tile where a_from_tile (else registers) and B
 * from b_tile; else *why says what stands in the way. */
static bool wgmma_fits(const FaCudaPlan *p, int n, int K, const FaTilePlan *a_tile, bool a_from_tile,
                       const FaTilePlan *b_tile, const char **why) {
  if (!has_wgmma(p))
    *why = "no wgmma on the target";
  else if (n % 8)
    *why = "N is not a multiple of 8";
  else if (n > 256)
    *why = "more than 256 columns a warpgroup";
  else if (K % 16)
    *why = "K is not a multiple of 16";
  else if (!b_tile || b_tile->format != FA_TILE_SWIZZLED)
    *why = "B's tile is not swizzled";
  else if (a_from_tile && (!a_tile || a_tile->format != FA_TILE_SWIZZLED))
    *why = "A's tile is not swizzled";
  else
    return true;
  return false;
}

/* A product whose warpgroups split N (wgmma_groups_along_n) reads each
 * one's columns of an N-major B through a descriptor of its own, which
 * must start on a column block of the tile's swizzle.  Where a
 * warpgroup's columns are narrower than the swizzle (d_head 64 split over
 * two warpgroups: 64 bytes each of 128-byte rows) the tile takes the
 * narrower swizzle instead (SwzTile cuts its rows into blocks that wide;
 * its other readers' descriptors and copies follow the width), so that
 * the product is wgmma, not mma.sync. */
static void narrow_swizzle_for_split(Planner *pl, const IrOp *op, const IrValue *b, bool flip) {
  const FaCudaPlan *p = pl->p;
  const FaDotPlan *dp = op->aux;
  FaTilePlan *t = val(pl, b)->tile;
  if (op->kind != IR_DOT || !dp || dp->kind != FA_DOT_MMA || !t || t->format != FA_TILE_SWIZZLED || dp->wn < 2 ||
      wgmma_warps_unfit(p, dp))
    return;
  bool k_inner = flip ? t->inner == 1 : t->inner == 0;
  int n = (int)op->operands[1]->type.shape[1] / dp->wn, bytes = n * fa_dtype_size(op->operands[1]->type.dtype);
  if (k_inner || bytes % t->swizzle == 0)
    return;
  /* nor where wgmma is out of reach anyway (plan_product asks the same) */
  bool a_flip, a_from_tile = !dp->a_in_regs && !fused_cast_source(pl, op, 0);
  const FaTilePlan *at = val(pl, tile_source(pl, op->operands[0], &a_flip))->tile;
  const char *why;
  if (!wgmma_fits(p, n, (int)op->operands[0]->type.shape[1], at, a_from_tile, t, &why))
    return;
  int sw = t->swizzle;
  while (sw > 32 && bytes % sw)
    sw /= 2;
  if (bytes % sw == 0)
    t->swizzle = sw;
}

/* Records the layout each live op reads each operand in (interning it, in
 * program order: layout ids follow), the conversions that makes, and the
 * tiles products read. */
static void collect_operands(Planner *pl) {
  FaCudaPlan *p = pl->p;
  for (int n = 0; n < p->nops && pl->ok; n++) {
    const IrOp *op = p->order[n];
    if (!fa_plan_op_live(p, op))
      continue;
    FaOpPlan *o = op_insert(p->ops, op);
    o->needs = palloc(pl, (size_t)(op->noperands + 1) * sizeof *o->needs);
    if (!o->needs)
      return;
    for (int i = 0; i < op->noperands; i++) {
      if (yields_unread(p, op, i))
        continue;
      const IrValue *f = fused_cast_source(pl, op, i);
      if (fa_plan_reads_tile(op, i) && !f) {
        bool flip;
        const IrValue *src = tile_source(pl, op->operands[i], &flip);
        request_tile(pl, src);
        if (i == 1)
          narrow_swizzle_for_split(pl, op, src, flip);
        continue;
      }
      o->needs[i] = fa_layout_operand_need(pl->fc, &p->layouts, op, i);
      add_conversion(pl, f ? f : op->operands[i], o->needs[i]);
    }
  }
}

const FaLayout *fa_plan_operand_layout(const FaCudaPlan *plan, const IrOp *op, int i) {
  const FaOpPlan *o = op_find(plan->ops, op);
  return o && o->needs && i >= 0 && i < op->noperands ? o->needs[i] : NULL;
}

/* ---- 5. software pipelining of loads into tiles ----------------------------------------------------
 * A load of a block pointer in a loop body whose value only feeds tensor-core
 * products (through its tile) is issued with cp.async `stages - 1`
 * iterations ahead, into a ring of `stages` buffers, when its block pointer
 * is a loop-carried value advanced by loop-invariant steps (so the pointer
 * of a later iteration is known early).  Each iteration: barrier (everyone is
 * done with the buffer about to be refilled), issue the load of iteration
 * it + stages - 1, wait for the group of iteration it, barrier, compute. */

static bool within(const IrRegion *r, const IrOp *loop) {
  for (; r; r = r->parent_op ? r->parent_op->parent : NULL)
    if (r->parent_op == loop)
      return true;
  return false;
}

static bool defined_outside(const IrValue *v, const IrOp *loop) {
  if (v->def)
    return !within(v->def->parent, loop);
  return !v->region || !within(v->region, loop);
}

static FaPipelinePlan *pipeline_of(Planner *pl, const IrOp *loop) {
  FaOpPlan *o = op_insert(pl->p->ops, loop);
  if (o->pipeline)
    return o->pipeline;
  FaPipelinePlan *pp = palloc(pl, sizeof *pp);
  if (!pp)
    return NULL;
  pp->id = pl->pipelines.len;
  pp->loop = loop;
  pp->stages = pl->p->stages > FA_PIPE_MAX_STAGES ? FA_PIPE_MAX_STAGES : pl->p->stages;
  pp->ahead = pp->stages - 1;
  pp->sync = FA_SYNC_CP_ASYNC_GROUPS;
  o->pipeline = pp;
  fa_ptrvec_push(&pl->pipelines, pp);
  return pp;
}

/* Which argument of the loop's body the block pointer of load op is, when
 * the body advances it by loop-invariant steps at its end (so that the
 * pointer of a later iteration is known early), with that advance; else -1. */
static int carried_pointer(const IrOp *loop, const IrOp *op, const IrOp **advance) {
  const IrRegion *body = loop->regions[0];
  const IrValue *bp = op->operands[0];
  int j = -1;
  for (int a = 1; a < body->nargs; a++)
    if (body->args[a] == bp)
      j = a;
  const IrOp *y = body->last;
  if (j < 0 || !y || y->kind != IR_YIELD || j - 1 >= y->noperands)
    return -1;
  const IrOp *adv = y->operands[j - 1]->def;
  if (!adv || adv->kind != IR_ADVANCE || adv->operands[0] != bp)
    return -1;
  for (int d = 1; d < adv->noperands; d++) {
    const IrValue *delta = adv->operands[d];
    if (!defined_outside(delta, loop) && !(delta->def && delta->def->kind == IR_CONST))
      return -1;
  }
  *advance = adv;
  return j;
}

static void plan_pipeline_load(Planner *pl, const IrOp *loop, const IrOp *op) {
  const IrValue *x = op->results[0], *bp = op->operands[0];
  FaValuePlan *vp = val(pl, x);
  /* cp.async fills with zeros only; NaN padding rides along only where the
     copy engine may take the load (and leaves the ring again if it cannot,
     plan_tma_pipeline) */
  bool nan_ok = pl->p->pipeline >= FA_PIPELINE_TMA && has_wgmma(pl->p);
  if (!vp->live || !vp->tile || vp->nontile_uses > 0 || (op->padding == PAD_NAN && !nan_ok) || x->type.rank != 2 ||
      !x->layout)
    return;
  const IrOp *adv = NULL;
  int j = carried_pointer(loop, op, &adv);
  if (j < 0)
    return;
  /* the tile stored along the dimension of stride 1, whole vectors per copy */
  FaVecFacts facts;
  int v = block_vector_width(pl, bp, x->layout, op->boundary, &facts);
  int size = fa_dtype_size(x->type.dtype);
  const FaLayout *l = x->layout;
  int first, count;
  fa_layout_dim_bits(l, vp->tile->inner, &first, &count);
  if (v * size < 4 || v > vp->tile->store_vec || l->nreg == 0 || l->reg[0] != first)
    return;
  FaPipelinePlan *pp = pipeline_of(pl, loop);
  FaAccessPlan *ap = palloc(pl, sizeof *ap);
  FaAccessPlan **loads = pp ? palloc(pl, (size_t)(pp->nloads + 1) * sizeof *loads) : NULL;
  if (!ap || !loads)
    return;
  ap->op = op;
  ap->method = FA_ACCESS_CP_ASYNC;
  ap->vec = v;
  ap->layout = x->layout;
  ap->facts = facts;
  ap->tile = vp->tile;
  ap->pipeline = pp;
  ap->carried = j;
  ap->advance = adv;
  op_insert(pl->p->ops, op)->access = ap;
  if (pp->nloads)
    memcpy(loads, pp->loads, (size_t)pp->nloads * sizeof *loads);
  loads[pp->nloads++] = ap;
  pp->loads = loads;
  vp->tile->fill = FA_FILL_CP_ASYNC;
  vp->tile->pipeline = pp;
  vp->tile->load = ap;
  vp->tile->nbufs = pp->stages;
}

static void plan_pipelines(Planner *pl, const IrRegion *r) {
  for (const IrOp *op = r->first; op && pl->ok; op = op->next) {
    if (op->kind == IR_FOR && pl->p->stages >= 2)
      for (const IrOp *b = op->regions[0]->first; b; b = b->next)
        if (b->kind == IR_LOAD_BLOCK)
          plan_pipeline_load(pl, op, b);
    for (int i = 0; i < op->nregions; i++)
      plan_pipelines(pl, op->regions[i]);
  }
}


/* ---- 5b. bulk tensor copies (TMA) -------------------------------------------------------------
 * With a pipeline choice of tma or later (sm_90a), a pipeline whose every
 * load can be a bulk copy (cuda_plan_tma.c) becomes a ring of full/empty
 * mbarriers, and so does a load outside loops whose value only feeds
 * products through its tile (Q in attention): one copy, waited for before
 * the first op that reads the tile.  Everything else stays as it was, and
 * the access says why. */

static bool tma_chosen(const FaCudaPlan *p) { return p->pipeline >= FA_PIPELINE_TMA; }

static FaTensorMapPlan *intern_tmap(Planner *pl, const FaTensorMapPlan *m) {
  FaCudaPlan *p = pl->p;
  for (int i = 0; i < p->ntmaps; i++) {
    const FaTensorMapPlan *o = p->tmaps[i];
    if (o->param == m->param && o->rank == m->rank && o->swizzle == m->swizzle && o->nan_fill == m->nan_fill &&
        o->store == m->store && !memcmp(o->dims_end, m->dims_end, sizeof o->dims_end) &&
        !memcmp(o->box, m->box, sizeof o->box))
      return p->tmaps[i];
  }
  if (p->ntmaps >= FA_MAX_TENSOR_MAPS)
    return NULL;
  FaTensorMapPlan *n = palloc(pl, sizeof *n);
  if (!n)
    return NULL;
  *n = *m;
  n->id = p->ntmaps;
  p->tmaps[p->ntmaps++] = n;
  return n;
}

/* `slots` mbarriers of `arrivals` each; their offsets come with the budget. */
static int add_mbarrier(FaCudaPlan *p, FaMbarrierUse use, int slots, int arrivals) {
  if (p->nbarriers >= FA_MAX_BARRIERS)
    return -1;
  FaBarrierPlan *b = &p->barriers[p->nbarriers];
  memset(b, 0, sizeof *b);
  b->kind = FA_BARRIER_MBARRIER;
  b->id = -1;
  b->mbar = use;
  b->slots = slots;
  b->arrivals = arrivals;
  return p->nbarriers++;
}

static void note_refusal(Planner *pl, const IrOp *op, FaTmaRefusal why, int dim) {
  FaOpPlan *o = op_insert(pl->p->ops, op);
  o->tma_considered = true;
  o->tma_refusal = why;
  o->tma_dim = dim;
}

static bool in_loop(const IrOp *op) {
  for (const IrRegion *r = op->parent; r && r->parent_op; r = r->parent_op->parent)
    if (r->parent_op->kind == IR_FOR)
      return true;
  return false;
}

/* A ring that stays cp.async cannot pad with NaN: such loads leave it
 * (plain vector loads, their tiles written from registers). */
static void drop_nan_loads(Planner *pl, FaPipelinePlan *pp) {
  int kept = 0;
  for (int i = 0; i < pp->nloads; i++) {
    FaAccessPlan *ap = pp->loads[i];
    if (ap->op->padding != PAD_NAN) {
      pp->loads[kept++] = ap;
      continue;
    }
    FaTilePlan *t = ap->tile;
    t->fill = FA_FILL_REGISTERS;
    t->pipeline = NULL;
    t->load = NULL;
    t->nbufs = 1;
    FaOpPlan *o = op_insert(pl->p->ops, ap->op);
    o->access = NULL;
    o->tma_considered = true;
    o->tma_refusal = ap->tma_refusal;
    o->tma_dim = ap->tma_refusal_dim;
  }
  pp->nloads = kept;
}

static bool loop_contains(const IrOp *outer, const IrOp *op) {
  for (const IrRegion *r = op->parent; r && r->parent_op; r = r->parent_op->parent)
    if (r->parent_op == outer)
      return true;
  return false;
}

/* An earlier ring whose barriers, use counter and (with a producer warp)
 * buffers this pipeline's loads can take over: the same stages and tiles of
 * the same formats in the same order, in a loop that is neither inside nor
 * around this one (the two loops of the causal forward pass).  Both loops
 * then count their uses of one ring in program order, as the producer and
 * the consumers both run them. */
static const FaPipelinePlan *shareable_ring(Planner *pl, const FaPipelinePlan *pp) {
  for (int i = 0; i < pl->pipelines.len; i++) {
    const FaPipelinePlan *q = pl->pipelines.items[i];
    if (q == pp || q->sync != FA_SYNC_MBARRIER || q->shares || q->stages != pp->stages || q->nloads != pp->nloads ||
        loop_contains(q->loop, pp->loop) || loop_contains(pp->loop, q->loop))
      continue;
    bool same = true;
    for (int j = 0; j < pp->nloads && same; j++) {
      const FaTilePlan *a = q->loads[j]->tile, *b = pp->loads[j]->tile;
      same = a->rows == b->rows && a->pitch == b->pitch && a->format == b->format && a->swizzle == b->swizzle &&
             a->inner == b->inner;
    }
    if (same)
      return q;
  }
  return NULL;
}

static void plan_tma_pipeline(Planner *pl, FaPipelinePlan *pp) {
  FaCudaPlan *p = pl->p;
  FaTmaPlan *plans = palloc(pl, (size_t)pp->nloads * sizeof *plans);
  FaTensorMapPlan *maps = palloc(pl, (size_t)pp->nloads * sizeof *maps);
  if (!plans || !maps)
    return;
  for (int i = 0; i < pp->nloads; i++) {
    FaAccessPlan *ap = pp->loads[i];
    int dim = -1;
    FaTmaRefusal why = fa_plan_tma_view(p, ap->op, ap->tile, pp->loop->parent, &maps[i], &plans[i], &dim);
    ap->tma_refusal = why;
    ap->tma_refusal_dim = dim;
    if (why != FA_TMA_OK && pp->tma_refusal == FA_TMA_OK) {
      pp->tma_refusal = why;
      pp->refused = ap;
    }
  }
  if (pp->tma_refusal == FA_TMA_OK) {
    for (int i = 0; i < pp->nloads; i++)
      if (!(plans[i].map = intern_tmap(pl, &maps[i])))
        pp->tma_refusal = FA_TMA_LIMIT;
    pp->shares = shareable_ring(pl, pp);
    if (pp->shares) {
      pp->full = pp->shares->full;
      pp->empty = pp->shares->empty;
    } else {
      pp->full = add_mbarrier(p, FA_MBAR_FULL, pp->stages, 1);
      pp->empty = add_mbarrier(p, FA_MBAR_EMPTY, pp->stages, p->warps);
    }
    if (pp->full < 0 || pp->empty < 0)
      pp->tma_refusal = FA_TMA_LIMIT;
  }
  if (pp->tma_refusal != FA_TMA_OK) {
    for (int i = 0; i < pp->nloads; i++)
      if (pp->loads[i]->tma_refusal == FA_TMA_OK || pp->tma_refusal == FA_TMA_LIMIT) {
        pp->loads[i]->tma_refusal = pp->tma_refusal == FA_TMA_LIMIT ? FA_TMA_LIMIT : FA_TMA_PIPELINE;
        pp->loads[i]->tma_refusal_dim = -1;
      }
    drop_nan_loads(pl, pp);
    return;
  }
  if (!pp->shares)
    p->barriers[pp->full].pipeline = p->barriers[pp->empty].pipeline = pp;
  pp->sync = FA_SYNC_MBARRIER;
  pp->ring = pp->shares ? pp->shares->ring : p->nrings++;
  for (int i = 0; i < pp->nloads; i++) {
    FaAccessPlan *ap = pp->loads[i];
    FaTmaPlan *t = palloc(pl, sizeof *t);
    if (!t)
      return;
    *t = plans[i];
    t->barrier = -1;
    ap->method = FA_ACCESS_TMA;
    ap->tma = t;
    ap->tile->fill = FA_FILL_TMA;
    pp->tx_bytes += t->bytes;
  }
}

/* Whether `test` holds for op or for an op of its regions, at any depth. */
typedef bool (*OpTest)(Planner *pl, const IrOp *op, const void *arg);

static bool op_or_nested(Planner *pl, const IrOp *op, OpTest test, const void *arg) {
  if (test(pl, op, arg))
    return true;
  for (int g = 0; g < op->nregions; g++)
    for (const IrOp *o = op->regions[g]->first; o; o = o->next)
      if (op_or_nested(pl, o, test, arg))
        return true;
  return false;
}

static bool dot_reads_tile_of(Planner *pl, const IrOp *op, const void *x) {
  if (op->kind == IR_DOT && fa_plan_op_live(pl->p, op))
    for (int j = 0; j < 2; j++) {
      bool flip;
      if (fa_plan_reads_tile(op, j) && !fused_cast_source(pl, op, j) && tile_source(pl, op->operands[j], &flip) == x)
        return true;
    }
  return false;
}

/* The op of `r` (from `after` on) before which a load outside loops is
 * waited for: the first whose ops read x's tile. */
static bool reads_tile_of(Planner *pl, const IrOp *op, const IrValue *x) {
  return op_or_nested(pl, op, dot_reads_tile_of, x);
}

/* An access the copy engine makes: op's bulk copies into (or out of) tile t. */
static void set_tma_access(FaAccessPlan *ap, const IrOp *op, FaAccessMethod method, const FaLayout *layout,
                           FaTilePlan *t, FaTmaPlan *tma) {
  ap->op = op;
  ap->method = method;
  ap->vec = 1;
  ap->layout = layout;
  ap->tile = t;
  ap->tma = tma;
  ap->tma_refusal_dim = -1;
}

/* A tile loaded before a loop nest whose software-pipelined loop reads it
 * first (K and V before the walk over the query heads and their blocks):
 * the threads wait for it after that loop's first copies are issued, so
 * that the two loads' latencies overlap instead of adding up.  From `o`,
 * the statement holding the first reader, down through loops without a
 * pipeline whose first reader is again a loop: the pipelined loop, or
 * NULL where the first reader is no such loop (a wait in a loop's body is
 * done again each iteration, at once after the first, so it moves only
 * where it buys the overlap). */
static const IrOp *first_pipelined_reader(Planner *pl, const IrOp *o, const IrValue *x) {
  if (o->kind != IR_FOR || o->nregions != 1)
    return NULL;
  const FaOpPlan *loop = op_find(pl->p->ops, o);
  if (loop && loop->pipeline)
    return o;
  for (const IrOp *b = o->regions[0]->first; b; b = b->next)
    if (reads_tile_of(pl, b, x))
      return first_pipelined_reader(pl, b, x);
  return NULL;
}

static void plan_tma_load(Planner *pl, const IrOp *op) {
  FaCudaPlan *p = pl->p;
  const IrValue *x = op->results[0];
  FaValuePlan *vp = val(pl, x);
  if (!vp->live || !vp->tile || (op_find(p->ops, op) && op_find(p->ops, op)->access))
    return;
  if (vp->nontile_uses > 0 || vp->tile->format != FA_TILE_SWIZZLED) {
    note_refusal(pl, op, FA_TMA_NOT_TILE, -1);
    return;
  }
  if (in_loop(op)) {
    note_refusal(pl, op, FA_TMA_IN_LOOP, -1);
    return;
  }
  FaTensorMapPlan map;
  FaTmaPlan plan;
  int dim = -1;
  FaTmaRefusal why = fa_plan_tma_view(p, op, vp->tile, op->parent, &map, &plan, &dim);
  const IrOp *wait = NULL;
  for (const IrOp *o = op->next; o && !wait; o = o->next)
    if (reads_tile_of(pl, o, x))
      wait = o;
  if (why == FA_TMA_OK && (!wait || !(plan.map = intern_tmap(pl, &map)) ||
                           (plan.barrier = add_mbarrier(p, FA_MBAR_LOAD, 1, 1)) < 0))
    why = FA_TMA_LIMIT;
  FaAccessPlan *ap = why == FA_TMA_OK ? palloc(pl, sizeof *ap) : NULL;
  FaTmaPlan *t = ap ? palloc(pl, sizeof *t) : NULL;
  if (!t) {
    note_refusal(pl, op, why, dim);
    return;
  }
  *t = plan;
  t->wait_before = wait;
  set_tma_access(ap, op, FA_ACCESS_TMA, x->layout, vp->tile, t);
  p->barriers[t->barrier].load = ap;
  vp->tile->fill = FA_FILL_TMA;
  vp->tile->load = ap;
  op_insert(p->ops, op)->access = ap;
}

/* ---- bulk stores: a block-pointer store or atomic_add through a staging tile ----
 * Its value is written from registers into a tile laid out as the tensor
 * map's box wants (the copy engine's swizzle of the rows: no bank conflicts
 * for the accumulator's fragments either), which one thread then hands to
 * the copy engine, a panel (one swizzle width of the rows) per copy. */

/* The dimension of constant stride 1 of a block pointer (the copy's
 * innermost), else the last. */
static int unit_stride_dim(const IrOp *mk, int rank) {
  for (int d = 0; d < rank; d++) {
    int64_t s;
    if (fa_ir_const_int_value(mk->operands[1 + rank + d], &s) && s == 1)
      return d;
  }
  return rank - 1;
}

/* Elements a store's tensor map can have (the runtime's encoding, launch.c),
 * of 2 bytes or more (16-byte pieces of a staging tile's rows). */
static bool tensor_map_dtype_ok(DType dt) {
  switch (dt) {
  case DT_F16:
  case DT_BF16:
  case DT_F32:
  case DT_F64:
  case DT_I16:
  case DT_I32:
  case DT_I64: return true;
  default: return false;
  }
}

/* The staging tile of a store or atomic_add (not yet in the plan): rows
 * along the block pointer's dimension of stride 1, swizzled as wide as the
 * rows allow, written `store_vec` elements at a time from the value's
 * layout. */
static FaTmaRefusal staging_tile(const IrOp *op, FaTilePlan *t) {
  const IrValue *bp = op->operands[0], *x = op->operands[1];
  const FaLayout *l = op->aux;
  DType dt = x->type.dtype;
  memset(t, 0, sizeof *t);
  if (x->type.rank != 2 || bp->type.rank != 2)
    return FA_TMA_RANK;
  if (op->kind == IR_ATOMIC_ADD_BLOCK && dt != DT_F32 && dt != DT_F16 && dt != DT_BF16)
    return FA_TMA_REDUCE_DTYPE;
  const IrOp *mk = fa_blockptr_origin(bp);
  if (!mk || mk->noperands != 1 + 3 * 2 || !l)
    return FA_TMA_NO_ORIGIN;
  int inner = unit_stride_dim(mk, 2), size = fa_dtype_size(dt);
  int row_bytes = x->type.shape[inner] * size, rows = x->type.shape[1 - inner];
  if (!tensor_map_dtype_ok(dt) || rows % 8 || (row_bytes != 32 && row_bytes != 64 && row_bytes % 128 != 0))
    return FA_TMA_STAGING;
  int v = store_vec_along(l, inner, size);
  t->value = x;
  t->inner = inner;
  t->rows = rows;
  t->pitch = row_bytes;
  t->format = FA_TILE_SWIZZLED;
  t->swizzle = row_bytes < 128 ? row_bytes : 128;
  t->store_vec = v;
  t->fill = FA_FILL_STAGED;
  t->nbufs = 1;
  t->buf_bytes = (size_t)rows * (size_t)row_bytes;
  return FA_TMA_OK;
}

/* Whether an op other than `store` may access the memory of pointer
 * parameter `param`: a bulk store's writes land asynchronously, in no order
 * with the kernel's other loads and stores there (atomic_adds whose results
 * are not read commute with a reduce-add, so those may share it). */
static bool param_accessed_elsewhere(const FaCudaPlan *p, const IrOp *store, int param) {
  bool adds = store->kind == IR_ATOMIC_ADD_BLOCK;
  for (int n = 0; n < p->nops; n++) {
    const IrOp *op = p->order[n];
    if (op == store || !fa_plan_op_live(p, op))
      continue;
    switch (op->kind) {
    case IR_ATOMIC_ADD_BLOCK:
      if (adds)
        continue;
      break;
    case IR_ATOMIC_ADD:
      if (adds && !p->values[op->results[0]->id].live)
        continue;
      break;
    case IR_LOAD:
    case IR_STORE:
    case IR_LOAD_BLOCK:
    case IR_STORE_BLOCK: break;
    default: continue;
    }
    int other = fa_plan_pointer_param(p->fn, op->operands[0]);
    if (other < 0 || other == param)
      return true;
  }
  return false;
}

/* A store or atomic_add through a block pointer as bulk tensor copies from
 * a staging tile, when the view is its pointer's declared extent; else the
 * refusal, which plan_access records with the plain form. */
static void plan_tma_store(Planner *pl, const IrOp *op) {
  FaCudaPlan *p = pl->p;
  FaTilePlan stage;
  FaTensorMapPlan map;
  FaTmaPlan plan;
  int dim = -1;
  FaTmaRefusal why = staging_tile(op, &stage);
  if (why == FA_TMA_OK)
    why = fa_plan_tma_view(p, op, &stage, op->parent, &map, &plan, &dim);
  if (why == FA_TMA_OK && !fa_plan_blockptr_nonneg(p, op->operands[0], map.param))
    why = FA_TMA_NEGATIVE;
  if (why == FA_TMA_OK && param_accessed_elsewhere(p, op, map.param))
    why = FA_TMA_ALIASED;
  if (why == FA_TMA_OK && !(plan.map = intern_tmap(pl, &map)))
    why = FA_TMA_LIMIT;
  FaAccessPlan *ap = why == FA_TMA_OK ? palloc(pl, sizeof *ap) : NULL;
  FaTmaPlan *t = ap ? palloc(pl, sizeof *t) : NULL;
  FaTilePlan *tile = t ? palloc(pl, sizeof *tile) : NULL;
  if (!tile) {
    note_refusal(pl, op, why, dim);
    return;
  }
  *t = plan;
  t->barrier = -1;
  *tile = stage;
  tile->load = ap;
  set_tma_access(ap, op, FA_ACCESS_TMA_STORE, op->aux, tile, t);
  fa_ptrvec_push(&pl->tiles, tile);
  op_insert(p->ops, op)->access = ap;
  p->bulk_stores = true;
}

static void plan_tma(Planner *pl) {
  FaCudaPlan *p = pl->p;
  if (!tma_chosen(p))
    return;
  for (int i = 0; i < pl->pipelines.len; i++) {
    FaPipelinePlan *pp = pl->pipelines.items[i];
    if (!has_wgmma(p)) {
      pp->tma_refusal = FA_TMA_TARGET;
      for (int j = 0; j < pp->nloads; j++) {
        pp->loads[j]->tma_refusal = FA_TMA_TARGET;
        pp->loads[j]->tma_refusal_dim = -1;
      }
      continue;
    }
    plan_tma_pipeline(pl, pp);
  }
  for (int n = 0; n < p->nops && pl->ok; n++) {
    const IrOp *op = p->order[n];
    if (op->kind != IR_LOAD_BLOCK || !fa_plan_op_live(p, op) || !val(pl, op->results[0])->tile)
      continue;
    if (!has_wgmma(p))
      note_refusal(pl, op, FA_TMA_TARGET, -1);
    else
      plan_tma_load(pl, op);
  }
  /* stores of 2-D blocks after the loads (their tensor maps follow the
     loads'); a store of another rank is no candidate, as a load that feeds
     no tile is none */
  for (int n = 0; n < p->nops && pl->ok && has_wgmma(p); n++) {
    const IrOp *op = p->order[n];
    if ((op->kind == IR_STORE_BLOCK || op->kind == IR_ATOMIC_ADD_BLOCK) && fa_plan_op_live(p, op) &&
        op->operands[1]->type.rank == 2)
      plan_tma_store(pl, op);
  }
}


/* ---- 5d. ring vectors --------------------------------------------------------------------------------
 * A load of a 1-D block in the body of a loop whose ring the copy engine
 * fills (one thread issuing, or the producer warp), whose value is used in
 * registers (LSE and D in the backward passes' loops over queries), rides
 * the same ring when its block pointer is carried like the ring's: its box
 * is copied into a dense tile of its own `ahead` iterations early, with the
 * products' tiles and on their barriers, and where the load stands each
 * thread reads its elements from shared memory, instead of waiting there
 * for global memory.  A load the copy engine cannot take (its view, a
 * stride not a multiple of 16 bytes) stays a load of its own. */

static bool ring_is_shared(Planner *pl, const FaPipelinePlan *pp) {
  for (int i = 0; i < pl->pipelines.len; i++)
    if (((const FaPipelinePlan *)pl->pipelines.items[i])->shares == pp)
      return true;
  return pp->shares != NULL;
}

static void plan_ring_vector(Planner *pl, FaPipelinePlan *pp, const IrOp *op) {
  FaCudaPlan *p = pl->p;
  const IrValue *x = op->results[0];
  FaValuePlan *vp = val(pl, x);
  const FaOpPlan *o = op_find(p->ops, op);
  int size = fa_dtype_size(x->type.dtype);
  const IrOp *adv = NULL;
  int carried = carried_pointer(pp->loop, op, &adv);
  if (!vp->live || vp->tile || (o && o->access) || x->type.rank != 1 || !x->layout ||
      !tensor_map_dtype_ok(x->type.dtype) || carried < 0)
    return;
  FaTilePlan *t = palloc(pl, sizeof *t);
  FaAccessPlan *ap = t ? palloc(pl, sizeof *ap) : NULL;
  FaTmaPlan *tp = ap ? palloc(pl, sizeof *tp) : NULL;
  FaAccessPlan **loads = tp ? palloc(pl, (size_t)(pp->nloads + 1) * sizeof *loads) : NULL;
  if (!loads)
    return;
  t->value = x;
  t->inner = 0;
  t->rows = 1;
  t->pitch = (int)x->type.shape[0] * size;
  t->format = FA_TILE_DENSE;
  t->buf_bytes = ((size_t)t->pitch + 127) & ~(size_t)127; /* a bulk copy's destination: 128-byte aligned */
  FaTensorMapPlan map;
  int dim = -1;
  if (fa_plan_tma_view(p, op, t, pp->loop->parent, &map, tp, &dim) != FA_TMA_OK || !(tp->map = intern_tmap(pl, &map)))
    return;
  tp->barrier = -1;
  t->fill = FA_FILL_TMA;
  t->pipeline = pp;
  t->load = ap;
  t->nbufs = pp->stages;
  set_tma_access(ap, op, FA_ACCESS_TMA, x->layout, t, tp);
  ap->pipeline = pp;
  ap->carried = carried;
  ap->advance = adv;
  op_insert(p->ops, op)->access = ap;
  if (pp->nloads)
    memcpy(loads, pp->loads, (size_t)pp->nloads * sizeof *loads);
  loads[pp->nloads++] = ap;
  pp->loads = loads;
  pp->tx_bytes += tp->bytes;
  vp->tile = t;
  fa_ptrvec_push(&pl->tiles, t);
}

static void plan_ring_vectors(Planner *pl) {
  for (int i = 0; i < pl->pipelines.len && pl->ok; i++) {
    FaPipelinePlan *pp = pl->pipelines.items[i];
    if (pp->sync != FA_SYNC_MBARRIER || ring_is_shared(pl, pp))
      continue;
    for (const IrOp *b = pp->loop->regions[0]->first; b; b = b->next)
      if (b->kind == IR_LOAD_BLOCK && fa_plan_op_live(pl->p, b))
        plan_ring_vector(pl, pp, b);
  }
}

/* ---- 5c. warp specialisation (pipeline tma_ws and later) ------------------------------------------
 * When every load a loop issues ahead is a bulk copy (a ring) and what its
 * copies need -- the loop bounds, the block pointers, the outer coordinates,
 * the control flow around them -- are scalars computed without block
 * values, a producer warpgroup after the compute warps runs that slice of
 * the kernel, one thread of it waiting for free buffers and issuing the
 * copies of every ring and of the loads outside loops; the compute warps
 * (consumers) only wait for full buffers and release them.  The slice is
 * found by following the operands of what the copies need, back to the
 * parameters. */

typedef struct Slicer {
  Planner *pl;
  const char *why;          /* set when the slice would need something the producer cannot compute */
  const IrOp *why_op;
} Slicer;

static void slice_value(Slicer *s, const IrValue *v);

static bool producer_op_ok(Slicer *s, const IrOp *op) {
  switch (op->kind) {
  case IR_FOR:
  case IR_IF:
    return true;
  case IR_LOAD_BLOCK: {
    const FaOpPlan *o = op_find(s->pl->p->ops, op);
    return o && o->access && o->access->method == FA_ACCESS_TMA && !o->access->pipeline;
  }
  case IR_CONST:
  case IR_PROGRAM_ID:
  case IR_NUM_PROGRAMS:
  case IR_CAST:
  case IR_UNARY:
  case IR_BINARY:
  case IR_CMP:
  case IR_SELECT:
  case IR_PTR_ADD:
  case IR_LOAD:
  case IR_MAKE_BLOCK_PTR:
  case IR_ADVANCE:
    for (int i = 0; i < op->nresults; i++)
      if (is_block(op->results[i]))
        return false;
    for (int i = 0; i < op->noperands; i++)
      if (is_block(op->operands[i]))
        return false;
    return true;
  default:
    return false;
  }
}

static void slice_op(Slicer *s, const IrOp *op) {
  FaOpPlan *o = op_insert(s->pl->p->ops, op);
  if (o->producer)
    return;
  o->producer = true;
  if (!producer_op_ok(s, op)) {
    if (!s->why) {
      s->why = op->kind == IR_LOAD_BLOCK ? "a load the producer would issue is not a bulk copy"
                                         : "a copy's loop bounds or coordinates depend on block values";
      s->why_op = op;
    }
    return;
  }
  int nops = op->kind == IR_FOR ? 3 : op->kind == IR_IF ? 1 : op->noperands;
  for (int i = 0; i < nops && i < op->noperands; i++)
    slice_value(s, op->operands[i]);
  if (op->parent && op->parent->parent_op)
    slice_op(s, op->parent->parent_op);
}

static const IrOp *yield_of(const IrRegion *r) {
  return r->last && r->last->kind == IR_YIELD ? r->last : NULL;
}

/* Position i (result i, region argument i + 1) of a loop. */
static void slice_carried(Slicer *s, const IrOp *loop, int i) {
  const IrRegion *body = loop->regions[0];
  const IrOp *y = yield_of(body);
  val(s->pl, loop->results[i])->producer = true;
  val(s->pl, body->args[1 + i])->producer = true;
  slice_op(s, loop);
  if (3 + i < loop->noperands)
    slice_value(s, loop->operands[3 + i]);
  if (y && i < y->noperands)
    slice_value(s, y->operands[i]);
}

static void slice_value(Slicer *s, const IrValue *v) {
  if (!v)
    return;
  FaValuePlan *vp = val(s->pl, v);
  if (vp->producer)
    return;
  vp->producer = true;
  if (v->def) {
    const IrOp *op = v->def;
    int i = 0;
    while (i < op->nresults && op->results[i] != v)
      i++;
    if (op->kind == IR_FOR) {
      vp->producer = false;
      slice_carried(s, op, i);
    } else if (op->kind == IR_IF) {
      slice_op(s, op);
      for (int r = 0; r < op->nregions; r++) {
        const IrOp *y = yield_of(op->regions[r]);
        if (y && i < y->noperands)
          slice_value(s, y->operands[i]);
      }
    } else {
      slice_op(s, op);
    }
    return;
  }
  if (v->region && v->region->parent_op) {
    const IrOp *f = v->region->parent_op;
    int j = 0;
    while (j < v->region->nargs && v->region->args[j] != v)
      j++;
    if (f->kind == IR_FOR && j > 0) {
      vp->producer = false;
      slice_carried(s, f, j - 1);
    } else {
      slice_op(s, f);
    }
  }
}

static void slice_coordinates(Slicer *s, const FaTmaPlan *t) {
  for (int i = 0; i < t->outer_coord.nterms; i++)
    for (int a = 0; a < t->outer_coord.terms[i].natoms; a++) {
      int atom = t->outer_coord.terms[i].atoms[a];
      if (atom >= FA_SYM_VALUE)
        for (int n = 0; n < s->pl->p->nops; n++)
          for (int r = 0; r < s->pl->p->order[n]->nresults; r++)
            if (s->pl->p->order[n]->results[r]->id == atom - FA_SYM_VALUE)
              slice_value(s, s->pl->p->order[n]->results[r]);
    }
}

/* The copies outside loops whose first reader is a loop nest with a
 * pipelined loop in it: waited for inside the nest, after that loop's
 * first copies (first_pipelined_reader), and again after the nest.  Not
 * with a producer warp: it issues these copies and the loop's one after
 * another anyway, and a wait moved into the nest costs the compute warps
 * registers there and buys nothing. */
static void move_tma_waits(Planner *pl) {
  FaCudaPlan *p = pl->p;
  for (int n = 0; !p->warp_specialised && n < p->nops; n++) {
    const FaOpPlan *o = op_find(p->ops, p->order[n]);
    FaAccessPlan *ap = o ? o->access : NULL;
    if (!ap || ap->method != FA_ACCESS_TMA || ap->pipeline || !ap->tma->wait_before)
      continue;
    const IrOp *deep = first_pipelined_reader(pl, ap->tma->wait_before, ap->op->results[0]);
    if (deep && deep != ap->tma->wait_before) {
      ap->tma->wait_after = ap->tma->wait_before;
      ap->tma->wait_before = deep;
    }
  }
}

static void plan_warp_specialisation(Planner *pl) {
  FaCudaPlan *p = pl->p;
  if (p->pipeline < FA_PIPELINE_TMA_WS)
    return;
  const char *why = NULL;
  int rings = 0;
  for (int i = 0; i < pl->pipelines.len && !why; i++) {
    const FaPipelinePlan *pp = pl->pipelines.items[i];
    if (pp->sync != FA_SYNC_MBARRIER)
      why = "a pipeline's loads are not all bulk copies";
    rings++;
  }
  if (!why && !rings)
    why = "no loop issues bulk copies ahead";
  if (!why && p->warps % 4 != 0)
    why = "the compute warps are not whole warpgroups";
  Slicer s = {pl, NULL, NULL};
  for (int i = 0; !why && i < pl->pipelines.len; i++) {
    const FaPipelinePlan *pp = pl->pipelines.items[i];
    slice_op(&s, pp->loop);
    for (int j = 0; j < pp->nloads; j++) {
      slice_carried(&s, pp->loop, pp->loads[j]->carried - 1);
      slice_coordinates(&s, pp->loads[j]->tma);
    }
  }
  for (int n = 0; !why && n < p->nops; n++) {
    const FaOpPlan *o = op_find(p->ops, p->order[n]);
    if (o && o->access && o->access->method == FA_ACCESS_TMA && !o->access->pipeline) {
      slice_op(&s, p->order[n]);
      slice_coordinates(&s, o->access->tma);
    }
  }
  if (!why)
    why = s.why;
  if (why) {
    p->no_warp_specialisation = why;
    for (int n = 0; n < p->nops; n++) { /* no producer after all */
      FaOpPlan *o = op_find(p->ops, p->order[n]);
      if (o)
        o->producer = false;
    }
    for (int v = 0; v < p->nvalues; v++)
      p->values[v].producer = false;
    return;
  }
  p->warp_specialised = true;
}

bool fa_plan_in_producer(const FaCudaPlan *plan, const IrOp *op) {
  const FaOpPlan *o = op_find(plan->ops, op);
  return plan->warp_specialised && o && o->producer;
}

/* ---- 6. additions fused into products ---------------------------------------------------------------
 * a + dot(x, y) (either order) becomes dot(x, y, a) on the tensor cores: the
 * product accumulates onto a in its registers instead of into a second
 * accumulator that is added afterwards (f32 rounding order aside, the same
 * sum; the interpreter adds the finished product). */
static void plan_fused_adds(Planner *pl, const IrRegion *r) {
  for (const IrOp *op = r->first; op; op = op->next) {
    for (int i = 0; i < op->nregions; i++)
      plan_fused_adds(pl, op->regions[i]);
    if (op->kind != IR_BINARY || op->sub != BIN_ADD || !val(pl, op->results[0])->live ||
        op->results[0]->type.dtype != DT_F32 || !is_block(op->results[0]))
      continue;
    for (int k = 0; k < 2; k++) {
      const IrValue *d = op->operands[k], *other = op->operands[1 - k];
      const IrOp *dot = d->def;
      const FaDotPlan *dp = dot && dot->kind == IR_DOT ? dot->aux : NULL;
      if (!dp || dp->kind != FA_DOT_MMA || dot->noperands != 2 || d->type.dtype != DT_F32 || dot->parent != op->parent ||
          val(pl, d)->nontile_uses != 1 || val(pl, d)->nconvs != 0 || d->layout != dp->acc ||
          op->results[0]->layout != dp->acc || other == d || pl->fused_add[d->id])
        continue;
      pl->fused_add[d->id] = op;
      pl->fused_dot[op->results[0]->id] = dot;
      pl->fused_addend[op->results[0]->id] = 1 - k;
      break;
    }
  }
}

/* ---- 6b. rescales skipped where their factors are 1 -----------------------------------------------------
 * x * f[:, None] (either order), with f = exp2(m - b) or exp(m - b) and b a
 * running maximum of m (maximum(m, y), or a selection among such values and
 * m itself): the rescale of an online softmax, whose factor is exactly 1
 * wherever the maximum did not move, which in a long loop is most of the
 * time.  Each thread then checks the few factors it holds and multiplies its
 * elements only when one of them is not 1.  x * 1 is x exactly (a NaN stays
 * a NaN), so the result is the same bit for bit; the gain is the multiplies
 * a warp skips when none of its lanes needs them.  Only where the factors
 * are at most an eighth of the elements: otherwise the check costs about as
 * much as the multiplies. */

static bool is_running_max_of(const IrValue *b, const IrValue *m, int depth) {
  if (b == m)
    return true;
  const IrOp *d = b->def;
  if (!d || depth > 4)
    return false;
  if (d->kind == IR_BINARY && (d->sub == BIN_MAX || d->sub == BIN_MAXNUM))
    return d->operands[0] == m || d->operands[1] == m;
  if (d->kind == IR_SELECT) {
    bool arms = false;
    for (int i = 1; i < 3; i++) {
      const IrValue *a = d->operands[i];
      if (a->def && a->def->kind == IR_CONST)
        continue; /* a row with nothing seen yet takes a constant base */
      if (!is_running_max_of(a, m, depth + 1))
        return false;
      arms = true;
    }
    return arms;
  }
  return false;
}

/* f = exp2(m - b) or exp(m - b) with b a running maximum of m. */
static bool is_max_rescale_factor(const IrValue *f) {
  const IrOp *e = f->def;
  if (!e || e->kind != IR_UNARY || (e->sub != UN_EXP2 && e->sub != UN_EXP))
    return false;
  const IrOp *d = e->operands[0]->def;
  return d && d->kind == IR_BINARY && d->sub == BIN_SUB && is_running_max_of(d->operands[1], d->operands[0], 0);
}

/* The broadcast whose operand's registers a rescale checks, or NULL. */
static const IrOp *rescale_broadcast(const Planner *pl, const IrValue *x, const IrValue *r) {
  const IrOp *b = x->def;
  if (!b || b->kind != IR_BROADCAST || is_virtual(pl, x) || is_virtual(pl, b->operands[0]) ||
      fa_type_numel(b->operands[0]->type) >= fa_type_numel(x->type))
    return NULL;
  const FaLayout *need = fa_plan_operand_layout(pl->p, b, 0);
  if (!need || !r->layout || (1 << need->nreg) * 8 > (1 << r->layout->nreg))
    return NULL;
  const IrValue *f = b->operands[0];
  for (int i = 0; i < 4 && f->def && (f->def->kind == IR_EXPAND_DIMS || f->def->kind == IR_RESHAPE); i++)
    f = f->def->operands[0];
  return is_max_rescale_factor(f) ? b : NULL;
}

static void plan_unit_factors(Planner *pl, const IrRegion *r) {
  for (const IrOp *op = r->first; op; op = op->next) {
    for (int i = 0; i < op->nregions; i++)
      plan_unit_factors(pl, op->regions[i]);
    const IrValue *res = op->nresults == 1 ? op->results[0] : NULL;
    if (op->kind != IR_BINARY || op->sub != BIN_MUL || !res || !is_block(res) || !fa_dtype_is_float(res->type.dtype) ||
        !val(pl, res)->live || is_virtual(pl, res) || val(pl, res)->fused_add_of)
      continue;
    for (int k = 0; k < 2; k++)
      if (rescale_broadcast(pl, op->operands[k], res)) {
        val(pl, res)->unit_factors = op->operands[k];
        break;
      }
  }
}

/* ---- 7. tile offsets ----------------------------------------------------------------------------------
 * Tiles share shared memory where their lifetimes do not overlap (the two
 * loops of the causal forward pass, say).  A lifetime is a range of
 * positions in the program (ops in pre-order): from the definition (for a
 * pipelined load, its loop: the first buffers are filled before it) to the
 * last product reading the tile, extended to the end of every loop (for or
 * while) around that product which does not also contain the definition
 * (the tile is read again in the next iteration). */

static int subtree_ops(const IrOp *op) {
  int n = 0;
  for (int r = 0; r < op->nregions; r++)
    for (const IrOp *o = op->regions[r]->first; o; o = o->next)
      n += 1 + subtree_ops(o);
  return n;
}

static int span_end_of_use(const FaCudaPlan *p, const IrOp *use, const IrOp *def_op) {
  int end = op_position(p, use);
  for (const IrRegion *r = use->parent; r && r->parent_op; r = r->parent_op->parent) {
    const IrOp *owner = r->parent_op;
    if (owner == def_op)
      break;
    bool contains_def = false;
    for (const IrRegion *d = def_op ? def_op->parent : NULL; d && d->parent_op; d = d->parent_op->parent)
      if (d->parent_op == owner)
        contains_def = true;
    if ((owner->kind == IR_FOR || owner->kind == IR_WHILE) && !contains_def) {
      int e = op_position(p, owner) + subtree_ops(owner);
      if (e > end)
        end = e;
    }
  }
  return end;
}

/* The lifetime of the tile of x, defined by op at position pos. */
static void tile_lifetime(Planner *pl, FaTilePlan *t, const IrOp *op) {
  FaCudaPlan *p = pl->p;
  const IrValue *x = t->value;
  const IrOp *def_op = t->pipeline ? t->pipeline->loop : op;
  t->live_start = op_position(p, def_op);
  t->live_end = t->pipeline ? t->live_start + subtree_ops(t->pipeline->loop) : t->live_start;
  for (int u = 0; u < p->nops; u++) {
    const IrOp *use = p->order[u];
    if (use->kind != IR_DOT || !fa_plan_op_live(p, use))
      continue;
    for (int j = 0; j < 2; j++) {
      bool flip;
      if (!fa_plan_reads_tile(use, j) || fused_cast_source(pl, use, j) || tile_source(pl, use->operands[j], &flip) != x)
        continue;
      /* a product fused into an addition is computed at the addition */
      const IrOp *at = pl->fused_add[use->results[0]->id] ? pl->fused_add[use->results[0]->id] : use;
      int e = span_end_of_use(p, at, x->def ? x->def : NULL);
      if (e > t->live_end)
        t->live_end = e;
    }
  }
}

/* A store outside loops followed by straight-line code alone to the end
 * of its region (dV's and dK's at a kernel's end): its staging tile is kept
 * to that end, so that the next such store stages in other memory, free
 * there since the loops' tiles are dead, instead of waiting until the copy
 * engine has read this one.  (Not with a producer warp: the tiles it fills
 * keep their memory for the whole kernel, and the staging tiles would add
 * to it.) */
static void keep_to_straight_end(const FaCudaPlan *p, FaTilePlan *t, const IrOp *store) {
  const IrOp *last = store;
  for (const IrOp *o = store->next; o; o = o->next) {
    if (o->nregions > 0)
      return;
    last = o;
  }
  t->live_end = op_position(p, last) + 1;
}

/* A staging tile is busy from its store until the copy engine has read it,
 * which the next write of its memory waits for: its own store's, an
 * iteration later, in the loop around it (so no other tile written in that
 * loop shares its memory), or that of a tile placed in its memory
 * afterwards (FaTilePlan.drains).  So the staging tiles of stores in two
 * loops one after the other share memory (each waits before it is written),
 * those of two stores in one loop do not (the second would wait for the
 * first every iteration). */
static void staging_lifetime(const FaCudaPlan *p, FaTilePlan *t, const IrOp *store) {
  const IrOp *inner = store;
  for (const IrRegion *r = store->parent; r && r->parent_op && inner == store; r = r->parent_op->parent)
    if (r->parent_op->kind == IR_FOR || r->parent_op->kind == IR_WHILE)
      inner = r->parent_op;
  t->live_start = op_position(p, inner);
  t->live_end = t->live_start + subtree_ops(inner);
  if (inner == store && !p->warp_specialised)
    keep_to_straight_end(p, t, store);
}

/* The staging tile of a bulk store at op, or NULL. */
static FaTilePlan *staging_tile_of(const FaCudaPlan *p, const IrOp *op) {
  const FaOpPlan *o = op_find(p->ops, op);
  return o && o->access && o->access->method == FA_ACCESS_TMA_STORE ? o->access->tile : NULL;
}

static bool tiles_overlap(const FaTilePlan *a, const FaTilePlan *b);

/* Whether a loop holds both lifetimes: then each tile is written after the
 * other in some iteration. */
static bool in_one_loop(const FaCudaPlan *p, const FaTilePlan *a, const FaTilePlan *b) {
  int lo = a->live_start < b->live_start ? a->live_start : b->live_start;
  int hi = a->live_end > b->live_end ? a->live_end : b->live_end;
  for (int n = 0; n <= lo && n < p->nops; n++) {
    const IrOp *op = p->order[n];
    if ((op->kind == IR_FOR || op->kind == IR_WHILE) && hi <= n + subtree_ops(op))
      return true;
  }
  return false;
}

/* Tiles that share memory with a staging tile written before them wait,
 * before they are written, until the copy engine has read it: a tile after
 * the staging tile in the program, or before it in a loop around both (the
 * next iteration's), or any in a persistent kernel (the next program writes
 * its tiles after this one's stores).  Two staging tiles need not: a
 * staging tile always waits before it is written. */
static void mark_draining_tiles(FaCudaPlan *p) {
  bool persistent = p->k->schedule == FA_SCHEDULE_PERSISTENT;
  for (int i = 0; i < p->ntiles; i++) {
    FaTilePlan *t = p->tiles[i];
    t->drains = false;
    for (int j = 0; j < p->ntiles && t->fill != FA_FILL_STAGED && !t->drains; j++) {
      const FaTilePlan *s = p->tiles[j];
      if (s->fill == FA_FILL_STAGED && tiles_overlap(t, s))
        t->drains = persistent || s->live_start < t->live_start || in_one_loop(p, t, s);
    }
  }
}

static void allocate_tiles(Planner *pl) {
  FaCudaPlan *p = pl->p;
  /* in order of definition */
  FaTilePlan **tiles = palloc(pl, (size_t)(pl->tiles.len + 1) * sizeof *tiles);
  if (!tiles)
    return;
  int n = 0;
  for (int i = 0; i < p->nops; i++) {
    const IrOp *op = p->order[i];
    const IrValue *defined[64];
    int nd = 0;
    for (int r = 0; r < op->nresults && nd < 64; r++)
      defined[nd++] = op->results[r];
    for (int g = 0; g < op->nregions; g++)
      for (int a = 0; a < op->regions[g]->nargs && nd < 64; a++)
        defined[nd++] = op->regions[g]->args[a];
    for (int k = 0; k < nd && n < pl->tiles.len; k++) {
      FaTilePlan *t = val(pl, defined[k])->tile;
      if (!t)
        continue;
      t->id = n;
      tiles[n++] = t;
      tile_lifetime(pl, t, op);
      /* with a producer warp, the copy engine may fill a tile whenever its
         ring lets it: its memory is its own for the whole kernel */
      if (p->warp_specialised && t->fill == FA_FILL_TMA) {
        t->live_start = 0;
        t->live_end = p->nops;
      }
    }
    FaTilePlan *st = staging_tile_of(p, op);
    if (st && n < pl->tiles.len) {
      st->id = n;
      tiles[n++] = st;
      staging_lifetime(p, st, op);
    }
  }
  /* a ring that two loops share: the second loop's tiles are the first's */
  for (int i = 0; p->warp_specialised && i < n; i++) {
    FaTilePlan *t = tiles[i];
    const FaPipelinePlan *q = t->pipeline ? t->pipeline->shares : NULL;
    for (int j = 0; q && j < t->pipeline->nloads; j++)
      if (t->pipeline->loads[j]->tile == t)
        t->alias = q->loads[j]->tile;
  }
  /* first fit, in order of definition (swizzled tiles start at multiples of
     1024 bytes, the period of the 128-byte swizzle) */
  bool swizzled = false;
  for (int i = 0; i < n; i++)
    swizzled |= tiles[i]->format == FA_TILE_SWIZZLED;
  size_t align = swizzled ? 1024 : 16, top = 0;
  for (int i = 0; i < n; i++) {
    FaTilePlan *t = tiles[i];
    size_t size = t->buf_bytes * (size_t)t->nbufs, off = 0;
    size_t a = t->format == FA_TILE_DENSE ? 128 : align; /* a dense tile has no swizzle period */
    if (t->alias) {
      t->offset = t->alias->offset;
      continue;
    }
    for (bool moved = true; moved;) {
      moved = false;
      for (int j = 0; j < i; j++) {
        const FaTilePlan *o = tiles[j];
        if (o->alias)
          continue;
        size_t osize = o->buf_bytes * (size_t)o->nbufs;
        bool overlap_time = !(o->live_end < t->live_start || t->live_end < o->live_start);
        bool overlap_space = off < o->offset + osize && o->offset < off + size;
        if (overlap_time && overlap_space) {
          off = (o->offset + osize + a - 1) & ~(a - 1);
          moved = true;
        }
      }
    }
    t->offset = off;
    if (off + size > top)
      top = off + size;
  }
  p->tiles = tiles;
  p->ntiles = n;
  p->smem.tile_align = align;
  p->smem.tiles = (top + 15) & ~(size_t)15;
  p->smem.align_pad = swizzled ? 1024 : 0;
  mark_draining_tiles(p);
}

/* ---- 8. products ---------------------------------------------------------------------------------------
 * On sm_90a a product of f16/bf16 blocks runs as warpgroup instructions
 * wgmma.m64nNk16 when its accumulator layout is the mma.sync one with every
 * warp along M (wm = warps, a multiple of 4, wn = 1): then, for each of the
 * warp's 16-row blocks mt, the four warps of warpgroup g hold rows (mt * wm
 * + 4g) * 16 .. + 63, and each thread's accumulator registers of that block
 * are, in order, wgmma's for m64nN.  With 64 rows and more warpgroups (wm =
 * 4, wn = warps / 4: a 64-row block on 8 warps) warpgroup g holds the same
 * rows and columns g * N / wn onwards, its registers those of m64n(N / wn):
 * the warpgroups split N (FaProductPlan.wg_n), each reading its own columns
 * of B.  B is read from its swizzled tile through a shared-memory
 * descriptor; A from registers (the mma.sync A fragments, which are wgmma's
 * too) or from its swizzled tile.  Everything else (other warp splits,
 * padded tiles, column blocks that start inside a swizzle row of an
 * N-major B) keeps mma.sync, with the same layouts. */

/* The warpgroups along N a wgmma of this product would have (1: they
 * split M), or 0 with *why saying what stands in the way. */
static int wgmma_groups_along_n(const FaCudaPlan *p, const FaDotPlan *dp, const FaProductPlan *pp,
                                const char **why) {
  if ((*why = wgmma_warps_unfit(p, dp)))
    return 0;
  if (dp->wn == 1)
    return 1;
  int n = pp->N / dp->wn;
  if (n % 8) {
    *why = "a warpgroup's columns are not a multiple of 8";
    return 0;
  }
  /* an N-major B's column blocks start on a swizzle row */
  if (!pp->b_tile || pp->b_tile->format != FA_TILE_SWIZZLED || pp->b_tile->swizzle <= 0) {
    *why = "B's tile is not swizzled";
    return 0;
  }
  if (!pp->b_k_inner && (n * fa_dtype_size(pp->in)) % pp->b_tile->swizzle) {
    *why = "a warpgroup's columns of B start inside a swizzle row";
    return 0;
  }
  return dp->wn;
}

static DType accumulator_dtype(const FaDotPlan *dp, DType in) {
  if (dp->kind == FA_DOT_MMA)
    return DT_F32;
  if (in == DT_F64)
    return DT_F64;
  if (fa_dtype_is_float(in))
    return DT_F32;
  return in == DT_I64 ? DT_I64 : DT_I32;
}

static void plan_product(Planner *pl, const IrOp *op) {
  const FaDotPlan *dp = op->aux;
  FaProductPlan *pp = palloc(pl, sizeof *pp);
  if (!pp || !dp)
    return;
  const IrValue *a = op->operands[0], *b = op->operands[1];
  pp->dot = op;
  pp->in = a->type.dtype;
  pp->acc = accumulator_dtype(dp, pp->in);
  pp->M = a->type.shape[0];
  pp->K = a->type.shape[1];
  pp->N = b->type.shape[1];
  pp->wm = dp->wm;
  pp->wn = dp->wn;
  pp->fused_add = pl->fused_add[op->results[0]->id];
  if (pp->fused_add) {
    pp->addend = pl->fused_addend[pp->fused_add->results[0]->id];
    val(pl, pp->fused_add->results[0])->fused_add_of = pp;
  }
  if (dp->kind == FA_DOT_FMA) {
    pp->instr = FA_INSTR_FMA;
    pp->a_src = pp->b_src = FA_OPND_REGISTERS;
    pp->la = fa_plan_operand_layout(pl->p, op, 0);
    pp->lb = fa_plan_operand_layout(pl->p, op, 1);
    pp->tf32 = pp->in == DT_F32 && op->sub == DOT_TF32;
    pp->scratch = (size_t)(pp->M * pp->K + pp->K * pp->N) * (size_t)fa_dtype_size(pp->in);
  } else {
    pp->mt = pp->M / (16 * dp->wm);
    pp->nt = pp->N / (8 * dp->wn);
    pp->kt = pp->K / 16;
    const IrValue *bs = tile_source(pl, b, &pp->b_flip);
    pp->b_src = FA_OPND_TILE;
    pp->b_tile = val(pl, bs)->tile;
    pp->b_k_inner = pp->b_tile && (pp->b_flip ? pp->b_tile->inner == 1 : pp->b_tile->inner == 0);
    pp->a_k_inner = true;
    const IrValue *f = fused_cast_source(pl, op, 0);
    if (f) {
      pp->a_src = FA_OPND_REGISTERS_F32;
      pp->a_regs = f;
    } else if (dp->a_in_regs) {
      pp->a_src = FA_OPND_REGISTERS;
      pp->a_regs = a;
    } else {
      const IrValue *as = tile_source(pl, a, &pp->a_flip);
      pp->a_src = FA_OPND_TILE;
      pp->a_tile = val(pl, as)->tile;
      pp->a_k_inner = pp->a_tile && (pp->a_flip ? pp->a_tile->inner == 0 : pp->a_tile->inner == 1);
    }
    if (!pp->b_tile || (pp->a_src == FA_OPND_TILE && !pp->a_tile)) {
      fa_error(&pl->fc->diag, op->loc, "internal compiler error: a tensor-core product without its tile");
      pl->ok = false;
      return;
    }
    const char *why = NULL;
    int groups = wgmma_groups_along_n(pl->p, dp, pp, &why);
    bool fits = groups > 0 && wgmma_fits(pl->p, pp->N / groups, pp->K, pp->a_src == FA_OPND_TILE ? pp->a_tile : NULL,
                                         pp->a_src == FA_OPND_TILE, pp->b_tile, &why);
    pp->instr = fits ? FA_INSTR_WGMMA : FA_INSTR_MMA_SYNC;
    if (pp->instr == FA_INSTR_MMA_SYNC && has_wgmma(pl->p))
      pp->why_not_wgmma = why;
    pp->wg_n = pp->instr == FA_INSTR_WGMMA ? groups : 1;
    pp->wait = FA_WAIT_AT_ONCE;
    /* tiles read through the async proxy are fenced after every write */
    if (pp->instr == FA_INSTR_WGMMA)
      pl->p->async_proxy_reads = true;
  }
  op_insert(pl->p->ops, op)->product = pp;
  fa_ptrvec_push(&pl->products, pp);
}


/* ---- 8b. late waits of warpgroup products (pipeline tma_async and later) ------------------------
 * A wgmma product is committed at its op and waited for as late as the
 * data allow: before the first op of its region that reads its accumulator
 * (a branch: whose code does), or writes shared memory it reads (a tile
 * there: it may still read the old one), or holds a loop or a branch with
 * products or tile writes (whose code the region's count of groups in
 * flight cannot see into), else at the end of the region (before its
 * yield).  A branch of elementwise code (the masks of attention) leaves the
 * products it does not read in flight.  Groups complete in commit order, so
 * a wait leaves the products committed after the newest one it is for in
 * flight.  A product stays synchronous when its accumulator is
 * read right after it anyway: converted to another layout, copied into a
 * tile, or rounded to another dtype. */

static const char *why_synchronous(Planner *pl, const FaProductPlan *pp) {
  const IrValue *r = pp->fused_add ? pp->fused_add->results[0] : pp->dot->results[0];
  const FaValuePlan *vp = val(pl, r);
  if (vp->nconvs)
    return "its result is converted to another layout";
  if (vp->tile)
    return "its result is copied into a tile";
  if (r->type.dtype != pp->acc)
    return "its result is rounded to another dtype";
  return NULL;
}

typedef struct WaitQueue {
  FaProductPlan *items[64];
  int n;
} WaitQueue;

static void add_wait(Planner *pl, const IrOp *before, const IrRegion *region, WaitQueue *q, int upto) {
  FaWgmmaWait *w = palloc(pl, sizeof *w);
  FaProductPlan **ps = palloc(pl, (size_t)(upto + 1) * sizeof *ps);
  if (!w || !ps)
    return;
  w->before = before;
  w->region = region;
  w->pending = q->n - upto - 1;
  w->products = ps;
  for (int i = 0; i <= upto; i++) {
    ps[w->nproducts++] = q->items[i];
    q->items[i]->wait_at = w;
  }
  memmove(q->items, q->items + upto + 1, (size_t)(q->n - upto - 1) * sizeof *q->items);
  q->n -= upto + 1;
  fa_ptrvec_push(&pl->waits, w);
}

/* The product an op issues (the dot, or the addition a dot is fused into). */
static FaProductPlan *committed_by_any(Planner *pl, const IrOp *op) {
  FaProductPlan *pp = NULL;
  if (op->kind == IR_DOT) {
    pp = (FaProductPlan *)fa_plan_product(pl->p, op);
    return pp && !pp->fused_add ? pp : NULL;
  }
  return op->nresults == 1 ? val(pl, op->results[0])->fused_add_of : NULL;
}

/* The async product an op commits (the dot, or the addition a dot is fused into). */
static FaProductPlan *committed_by(Planner *pl, const IrOp *op) {
  FaProductPlan *pp = NULL;
  if (op->kind == IR_DOT) {
    pp = (FaProductPlan *)fa_plan_product(pl->p, op);
    if (pp && pp->fused_add)
      return NULL;
  } else if (op->nresults == 1) {
    pp = val(pl, op->results[0])->fused_add_of;
  }
  return pp && pp->wait == FA_WAIT_LATE ? pp : NULL;
}

static bool writes_tile(Planner *pl, const IrOp *op) {
  for (int i = 0; i < op->nresults; i++) {
    const FaTilePlan *t = val(pl, op->results[i])->tile;
    if (t && t->fill == FA_FILL_REGISTERS)
      return true;
  }
  const FaAccessPlan *ap = fa_plan_access(pl->p, op);
  return ap && ((ap->method == FA_ACCESS_TMA && !ap->pipeline) || ap->method == FA_ACCESS_TMA_STORE);
}

static bool tiles_overlap(const FaTilePlan *a, const FaTilePlan *b) {
  return a && b && a->offset < b->offset + b->buf_bytes * (size_t)b->nbufs &&
         b->offset < a->offset + a->buf_bytes * (size_t)a->nbufs;
}

/* Whether op (writes_tile) writes shared memory that product pp reads: a
 * tile of its results (tiles whose lifetimes do not overlap share memory,
 * so by address, not by name). */
static bool overwrites(const FaTilePlan *t, const FaProductPlan *pp) {
  return t && (tiles_overlap(t, pp->b_tile) || (pp->a_src == FA_OPND_TILE && tiles_overlap(t, pp->a_tile)));
}

static bool writes_tile_read_by(Planner *pl, const IrOp *op, const FaProductPlan *pp) {
  for (int i = 0; i < op->nresults; i++)
    if (overwrites(val(pl, op->results[i])->tile, pp))
      return true;
  return overwrites(staging_tile_of(pl->p, op), pp); /* a bulk store's staging tile */
}

/* Whether op's code reads v: an operand, or, where op commits product pp
 * (its dot, or the addition it is fused into), the dot's operands and the
 * registers its A fragments are packed from. */
static bool reads_value(const IrOp *op, const FaProductPlan *pp, const IrValue *v) {
  for (int k = 0; k < op->noperands; k++)
    if (op->operands[k] == v)
      return true;
  if (!pp)
    return false;
  for (int k = 0; k < pp->dot->noperands; k++)
    if (pp->dot->operands[k] == v)
      return true;
  return pp->a_regs == v;
}

/* Whether the code of region r (and the regions within it) commits or
 * waits for a product, writes a tile or loops: then a branch holding it
 * waits for every product in flight first. */
static bool region_syncs(Planner *pl, const IrRegion *r) {
  for (const IrOp *op = r->first; op; op = op->next) {
    if (!fa_plan_op_live(pl->p, op))
      continue;
    if (op->kind != IR_IF && op->nregions)
      return true;
    if (committed_by_any(pl, op) || writes_tile(pl, op))
      return true;
    for (int g = 0; g < op->nregions; g++)
      if (region_syncs(pl, op->regions[g]))
        return true;
  }
  return false;
}

/* Whether an op of region r (or of the regions within it) reads v. */
static bool region_reads(const IrRegion *r, const IrValue *v) {
  for (const IrOp *op = r->first; op; op = op->next) {
    if (reads_value(op, NULL, v))
      return true;
    for (int g = 0; g < op->nregions; g++)
      if (region_reads(op->regions[g], v))
        return true;
  }
  return false;
}

/* The newest product in q whose accumulator op reads (an operand, or the
 * code of its regions) or whose tile it writes, or -1.  A branch whose code
 * commits, waits, writes a tile or loops waits for every product in flight:
 * the counts of groups in flight inside it could not see those outside. */
static int newest_read(Planner *pl, const IrOp *op, const FaProductPlan *pp, const WaitQueue *q) {
  if (op->nregions && op->kind != IR_IF)
    return q->n - 1;
  for (int g = 0; g < op->nregions; g++)
    if (region_syncs(pl, op->regions[g]))
      return q->n - 1;
  bool tile_write = writes_tile(pl, op);
  int newest = -1;
  for (int i = 0; i < q->n; i++) {
    const FaProductPlan *o = q->items[i];
    const IrValue *acc = o->fused_add ? o->fused_add->results[0] : o->dot->results[0];
    if (reads_value(op, pp, acc) || (tile_write && writes_tile_read_by(pl, op, o)))
      newest = i;
    for (int g = 0; g < op->nregions && newest < i; g++)
      if (region_reads(op->regions[g], acc))
        newest = i;
  }
  return newest;
}

static void plan_waits_in(Planner *pl, const IrRegion *r) {
  WaitQueue q = {{0}, 0};
  for (const IrOp *op = r->first; op && pl->ok; op = op->next) {
    if (!fa_plan_op_live(pl->p, op) || op->kind == IR_YIELD || op->kind == IR_RETURN)
      continue;
    FaProductPlan *pp = committed_by(pl, op);
    int newest = newest_read(pl, op, pp, &q);
    if (newest >= 0)
      add_wait(pl, op, r, &q, newest);
    if (pp) {
      if (q.n == (int)(sizeof q.items / sizeof *q.items))
        add_wait(pl, op, r, &q, 0);
      q.items[q.n++] = pp;
    }
    for (int g = 0; g < op->nregions; g++)
      plan_waits_in(pl, op->regions[g]);
  }
  if (q.n)
    add_wait(pl, NULL, r, &q, q.n - 1);
}

static void plan_product_waits(Planner *pl) {
  FaCudaPlan *p = pl->p;
  if (p->pipeline < FA_PIPELINE_TMA_ASYNC)
    return;
  for (int i = 0; i < p->nproducts; i++) {
    FaProductPlan *pp = p->products[i];
    if (pp->instr != FA_INSTR_WGMMA)
      continue;
    pp->why_at_once = why_synchronous(pl, pp);
    if (!pp->why_at_once)
      pp->wait = FA_WAIT_LATE;
  }
  plan_waits_in(pl, p->fn->body);
}


/* ---- 8c. ping-pong of two consumer warpgroups (pipeline tma_ws_pp) -------------------------------
 * With a producer warp and two consumer warpgroups on separate rows, the
 * products of a ring loop are issued in turns: a warpgroup waits for its
 * turn (named barrier 2 + g) before each product it issues and gives the
 * turn to the other (3 - g) right after, so that the tensor cores run one
 * warpgroup's product while the other computes between its own (the
 * softmax).  Warpgroup 0 holds the first turn.  A loop whose body
 * synchronises all compute warps (conversions or reductions through shared
 * memory, tile writes, FMA products) does not take turns: a warpgroup
 * waiting for its turn while the other waits at that barrier would
 * deadlock. */

static const char *syncs_compute_warps(Planner *pl, const IrRegion *r) {
  for (const IrOp *op = r->first; op; op = op->next) {
    if (!fa_plan_op_live(pl->p, op))
      continue;
    for (int i = 0; i < op->nresults; i++) {
      const FaValuePlan *vp = val(pl, op->results[i]);
      for (int c = 0; c < vp->nconvs; c++)
        if (!vp->convs[c].in_registers)
          return "a layout conversion through shared memory";
      if (vp->tile && vp->tile->fill == FA_FILL_REGISTERS)
        return "a tile written from registers";
    }
    const FaReducePlan *rp = fa_plan_reduce(pl->p, op);
    if (rp && rp->warp_mask)
      return "a reduction across warps";
    for (int i = 0; rp && i < rp->nresults; i++)
      if (rp->to_result[i].scratch)
        return "a layout conversion through shared memory";
    const FaScanPlan *sp = fa_plan_scan(pl->p, op);
    if (sp && sp->scratch)
      return "a scan across warps";
    if (fa_plan_print(pl->p, op))
      return "a device_print";
    const FaProductPlan *pp = fa_plan_product(pl->p, op);
    if (pp && pp->instr == FA_INSTR_FMA)
      return "a product on the CUDA cores";
    const FaAccessPlan *ap = fa_plan_access(pl->p, op);
    if (ap && ap->scratch)
      return "an atomic whose result is read";
    if (ap && ap->method == FA_ACCESS_TMA_STORE)
      return "a bulk store's staging tile written from registers";
    for (int g = 0; g < op->nregions; g++) {
      const char *why = syncs_compute_warps(pl, op->regions[g]);
      if (why)
        return why;
    }
  }
  return NULL;
}

static void plan_pingpong(Planner *pl) {
  FaCudaPlan *p = pl->p;
  if (p->pipeline < FA_PIPELINE_TMA_WS_PP)
    return;
  if (!p->warp_specialised) {
    p->no_pingpong = "no producer warp";
    return;
  }
  if (p->warps != 8) {
    p->no_pingpong = "it needs two consumer warpgroups (8 warps)";
    return;
  }
  const IrOp **loops = palloc(pl, (size_t)(pl->pipelines.len + 1) * sizeof *loops);
  if (!loops)
    return;
  for (int i = 0; i < pl->pipelines.len; i++) {
    const FaPipelinePlan *pp = pl->pipelines.items[i];
    const char *why = syncs_compute_warps(pl, pp->loop->regions[0]);
    int turns = 0;
    for (const IrOp *op = pp->loop->regions[0]->first; op && !why; op = op->next) {
      FaProductPlan *prod = committed_by_any(pl, op);
      if (prod && prod->instr == FA_INSTR_WGMMA)
        turns++;
    }
    if (why || !turns) {
      if (!p->no_pingpong)
        p->no_pingpong = why ? why : "a ring loop issues no warpgroup products";
      continue;
    }
    for (const IrOp *op = pp->loop->regions[0]->first; op; op = op->next) {
      FaProductPlan *prod = committed_by_any(pl, op);
      if (prod && prod->instr == FA_INSTR_WGMMA)
        prod->takes_turn = true;
    }
    loops[p->npingpong++] = pp->loop;
  }
  p->pingpong_loops = loops;
}


/* ---- 8d. the next iteration's first product issued ahead (pipeline tma_ws_pp) -----------------------
 * In a ring loop with a producer warp, the loop's first product (S = Q K^T
 * in attention) is issued for iteration it + 1 at the head of iteration it,
 * into a second accumulator, and waited for at the back edge, where it
 * becomes the current one; iteration it's own was issued by the previous
 * iteration (the first before the loop).  So the tensor cores compute the
 * next block's S while the warps do this block's softmax: FlashAttention-3's
 * intra-warpgroup overlap, found from the IR.  It needs the product's
 * operands to come from outside the loop or from the ring (nothing the
 * iteration computes), its result to be used in the loop body only and
 * read from registers (a warpgroup product waited for late). */

static bool outside_or_ring(Planner *pl, const IrValue *x, const FaPipelinePlan *pp) {
  if (defined_outside(x, pp->loop))
    return true;
  const FaOpPlan *o = x->def ? op_find(pl->p->ops, x->def) : NULL;
  return o && o->access && o->access->pipeline == pp;
}

/* The registers a compute thread holds for the loop's products: each
 * accumulator M x N spread over the compute threads, each register A
 * operand (two 16-bit elements a register).  Rotation keeps one more
 * accumulator live across the whole body.  In the sweep (tests/cuda_sweep.c,
 * ptxas of CUDA 12) rotated loops estimated at 144-184 registers (with the
 * second accumulator) compiled without spills and those at 192 and more
 * spilled (64 bytes and up) where the unrotated ones did not, so rotation
 * is refused above 184 of the 240 registers a consumer gets
 * (FA_ROTATION_REGISTERS). */

static int loop_acc_registers(Planner *pl, const FaPipelinePlan *pp, int threads) {
  long regs = 0;
  for (int i = 0; i < pl->p->nproducts; i++) {
    const FaProductPlan *prod = pl->p->products[i];
    if (!within(prod->dot->parent, pp->loop))
      continue;
    regs += (long)prod->M * prod->N;
    if (prod->a_src != FA_OPND_TILE)
      regs += (long)prod->M * prod->K / 2;
  }
  return threads > 0 ? (int)(regs / threads) : 0;
}

static long long loop_trips(Planner *pl, const IrOp *loop);

/* ---- 8c'. the loop's last product deferred to the next iteration (pipeline tma_ws_pp) ----------------
 * FlashAttention-3's intra-warpgroup overlap, found from the IR: in a ring
 * loop with a producer warp whose last warpgroup product accumulates onto a
 * loop-carried value (O = O * alpha + dot(P, V)) that nothing else in the
 * iteration reads after it, the product is issued by the next iteration,
 * right after that iteration's first product (S = Q K^T), and waited for
 * before the first op that reads the carried value (O * alpha), so that it
 * runs under the next block's softmax; the last one is issued after the
 * loop.  Unlike issuing S ahead (below) this needs no second accumulator:
 * only the A fragments, packed where the product stands, live on until
 * the wait.  Its B tile comes from the ring, whose buffer is released after
 * the wait, an iteration late (the producer waits for it). */

/* A product whose wait the printer writes itself (deferred, rotated) leaves
 * the plan's wait point; waits left with no product go. */
static void unwait(FaProductPlan *prod) {
  FaWgmmaWait *w = prod->wait_at;
  if (w) {
    int keep = 0;
    for (int k = 0; k < w->nproducts; k++)
      if (w->products[k] != prod)
        w->products[keep++] = w->products[k];
    w->nproducts = keep;
  }
  prod->wait_at = NULL;
}

static void drop_empty_waits(Planner *pl) {
  int keep = 0;
  for (int i = 0; i < pl->waits.len; i++) {
    FaWgmmaWait *w = pl->waits.items[i];
    if (w->nproducts)
      pl->waits.items[keep++] = w;
  }
  pl->waits.len = keep;
}

static bool reads_here(Planner *pl, const IrOp *op, const void *v) {
  return reads_value(op, committed_by_any(pl, op), v);
}

static bool commits_here(Planner *pl, const IrOp *op, const void *unused) {
  (void)unused;
  return fa_plan_op_live(pl->p, op) && committed_by_any(pl, op);
}

static bool op_reads(Planner *pl, const IrOp *op, const IrValue *v) {
  return op_or_nested(pl, op, reads_here, v);
}

static bool holds_product(Planner *pl, const IrOp *op) {
  return op_or_nested(pl, op, commits_here, NULL);
}

/* Where the first read of the carried accumulator is an online softmax's
 * rescale (O * alpha[:, None], the plan's unit factors) whose result only
 * the deferred product adds onto, and nothing else reads the accumulator
 * before that product, the deferred product is waited for at the head of the
 * next iteration instead of before the rescale: there, before the loop's
 * first product is issued, the wait, the release of its ring buffer, the
 * packing of this iteration's A operand (kept in registers until then) and
 * the rescale (its factors kept likewise) stand together.  The deferred
 * product then runs under the whole softmax of the iteration after its
 * issue.  Waited for before the rescale, it ran under the row maximum alone:
 * ptxas 13 schedules a wait for the product at the top of the block that
 * holds the softmax's exponentials (bench/results/2026-12-05-h100). */
static bool rescale_moves_to_head(Planner *pl, const IrRegion *body, const IrOp *reader, const IrOp *last_op,
                                   const IrValue *arg) {
  FaCudaPlan *p = pl->p;
  if (reader->kind != IR_BINARY || reader->nresults != 1)
    return false;
  const IrValue *r = reader->results[0];
  const IrValue *factors = val(pl, r)->unit_factors;
  if (!factors || reader->noperands != 2)
    return false;
  const IrValue *rescaled = reader->operands[0] == factors ? reader->operands[1] : reader->operands[0];
  if (rescaled != arg || val(pl, r)->nconvs || r->layout != arg->layout)
    return false;
  /* the rescaled value is the deferred product's addend and nothing else;
     nothing between the rescale and the product reads the accumulator */
  if (last_op->kind != IR_BINARY || (last_op->operands[0] != r && last_op->operands[1] != r))
    return false;
  for (int n = 0; n < p->nops; n++) {
    const IrOp *use = p->order[n];
    if (use == last_op)
      continue;
    for (int k = 0; k < use->noperands; k++)
      if (use->operands[k] == r)
        return false;
  }
  bool between = false;
  for (const IrOp *op = body->first; op && op != last_op; op = op->next) {
    if (between && fa_plan_op_live(p, op) && op_reads(pl, op, arg))
      return false;
    between |= op == reader;
  }
  return between;
}

static const char *why_not_deferred(Planner *pl, FaPipelinePlan *pp) {
  FaCudaPlan *p = pl->p;
  const IrRegion *body = pp->loop->regions[0];
  FaProductPlan *first = NULL, *last = NULL;
  const IrOp *first_op = NULL, *last_op = NULL;
  int nproducts = 0;
  for (const IrOp *op = body->first; op; op = op->next) {
    if (op->nregions && holds_product(pl, op))
      return "a product of the loop stands in a branch or loop of its own";
    FaProductPlan *prod = fa_plan_op_live(p, op) ? committed_by_any(pl, op) : NULL;
    if (!prod)
      continue;
    if (!first) {
      first = prod;
      first_op = op;
    }
    last = prod;
    last_op = op;
    nproducts++;
  }
  if (nproducts < 2)
    return "the loop has fewer than two products";
  if (first->instr != FA_INSTR_WGMMA || last->instr != FA_INSTR_WGMMA)
    return "the loop's first or last product is not a warpgroup product";
  if (first->wait != FA_WAIT_LATE || last->wait != FA_WAIT_LATE)
    return "the loop's first or last product is waited for at once";
  if (!last->wait_at || last->wait_at->before || last->wait_at->region != body)
    return "the loop's last product is waited for before the end of the iteration";
  if (!last->fused_add)
    return "the loop's last product does not accumulate onto another value";
  if (last->a_src == FA_OPND_TILE)
    return "the loop's last product reads its A operand from a tile";
  if (!last->b_tile || last->b_tile->pipeline != pp || last->b_tile->nbufs < 2)
    return "the loop's last product does not read its B operand from the loop's ring";
  /* its result is the carried value and nothing else */
  const IrValue *r = last->fused_add->results[0];
  const IrOp *y = body->last;
  int carried = -1;
  for (int k = 0; y && y->kind == IR_YIELD && k < y->noperands; k++)
    if (y->operands[k] == r)
      carried = carried < 0 ? k : -2;
  if (carried < 0)
    return "the loop's last product is not carried to the next iteration as one value";
  for (int n = 0; n < p->nops; n++) {
    const IrOp *use = p->order[n];
    if (use == y)
      continue;
    for (int k = 0; k < use->noperands; k++)
      if (use->operands[k] == r)
        return "the loop's last product's result is read in its iteration";
  }
  const IrValue *arg = body->args[1 + carried];
  if (arg->layout != r->layout || val(pl, arg)->nconvs || val(pl, arg)->tile || val(pl, r)->nconvs)
    return "the carried accumulator changes layout";
  if (val(pl, pp->loop->results[carried])->nconvs)
    return "the carried accumulator changes layout after the loop";
  /* the first op that reads the carried value comes after the first
     product, with no product between them (they would wait for it) */
  const IrOp *reader = NULL;
  bool after_first = false;
  for (const IrOp *op = body->first; op && !reader; op = op->next) {
    if (!fa_plan_op_live(p, op) || op->kind == IR_YIELD)
      continue;
    if (op_reads(pl, op, arg))
      reader = op;
    else if (op != first_op && holds_product(pl, op))
      return "a product stands between the loop's first product and the first read of the carried accumulator";
    else if (op == last_op)
      break;
    after_first |= op == first_op && !reader;
  }
  if (!reader || !after_first)
    return "the carried accumulator is not read between the loop's first and last products";
  pp->deferred = last;
  pp->defer_after = first;
  pp->defer_wait_before = reader;
  pp->defer_carried = carried;
  pp->defer_head = first_op;
  /* a candidate, taken or not by plan_late_pack once the rings are planned */
  if (rescale_moves_to_head(pl, body, reader, last_op, arg))
    pp->defer_rescale = reader;
  return NULL;
}

/* Waits between the first product and the deferred one's wait have one
 * more group in flight behind them (the deferred product, committed right
 * after the first); the deferred product's own wait at the back edge goes. */
static void one_more_pending_before(Planner *pl, const IrRegion *body, const IrOp *op) {
  for (int i = 0; i < pl->waits.len; i++) {
    FaWgmmaWait *w = pl->waits.items[i];
    if (w->before == op && w->region == body)
      w->pending++;
  }
}

static void retime_waits_for_deferral(Planner *pl, const FaPipelinePlan *pp) {
  const IrRegion *body = pp->loop->regions[0];
  bool between = false;
  for (const IrOp *op = body->first; op; op = op->next) {
    if (between)
      one_more_pending_before(pl, body, op);
    if (committed_by_any(pl, op) == pp->defer_after)
      between = true;
    if (op == pp->defer_wait_before)
      break;
  }
  FaProductPlan *last = pp->deferred;
  unwait(last);
  last->deferred = true;
  last->takes_turn = false;
}

static void plan_deferral(Planner *pl) {
  FaCudaPlan *p = pl->p;
  if (p->pipeline < FA_PIPELINE_TMA_WS_PP || !p->warp_specialised)
    return;
  for (int i = 0; i < pl->pipelines.len; i++) {
    FaPipelinePlan *pp = pl->pipelines.items[i];
    if (pp->sync != FA_SYNC_MBARRIER)
      continue;
    pp->no_deferral = why_not_deferred(pl, pp);
    if (!pp->no_deferral)
      retime_waits_for_deferral(pl, pp);
  }
  drop_empty_waits(pl);
}

/* The deferred product waited for at the next iteration's head
 * (rescale_moves_to_head), where the ring allows it: its ring buffer is then
 * released two iterations after its load's, so the buffers of the other
 * loads, released with it in a ring that is not split, would be refilled
 * only after the head that waits for them with 2 stages, and in a split
 * ring with 1 stage its own next tile would (the head waits for that tile
 * before it releases the buffer: tests/check_split_ring's late protocol).
 * Split rings with 2 stages or more, or 3 stages or more.  The waits from
 * the old wait's place to the end of the iteration get the deferred product
 * in flight behind them too. */
static void plan_late_pack(Planner *pl) {
  for (int i = 0; i < pl->pipelines.len; i++) {
    FaPipelinePlan *pp = pl->pipelines.items[i];
    if (!pp->deferred || !pp->defer_rescale)
      continue;
    if (pp->stages < (pp->split ? 2 : 3)) {
      pp->defer_rescale = NULL;
      continue;
    }
    const IrRegion *body = pp->loop->regions[0];
    bool after = false;
    for (const IrOp *op = body->first; op; op = op->next) {
      if (after)
        one_more_pending_before(pl, body, op);
      after |= op == pp->defer_wait_before;
    }
    pp->defer_wait_before = NULL;
  }
}

static void plan_rotation(Planner *pl) {
  FaCudaPlan *p = pl->p;
  if (p->pipeline < FA_PIPELINE_TMA_WS_PP || !p->warp_specialised)
    return;
  for (int i = 0; i < pl->pipelines.len; i++) {
    FaPipelinePlan *pp = pl->pipelines.items[i];
    FaProductPlan *first = NULL;
    if (pp->deferred) {
      pp->no_rotation = "the loop's last product is deferred to the next iteration instead";
      continue;
    }
    for (const IrOp *op = pp->loop->regions[0]->first; op && !first; op = op->next)
      if (fa_plan_op_live(p, op))
        first = committed_by_any(pl, op);
    if (!first || first->instr != FA_INSTR_WGMMA) {
      pp->no_rotation = "the loop's first product is not a warpgroup product";
      continue;
    }
    if (first->wait != FA_WAIT_LATE) {
      pp->no_rotation = "the loop's first product is waited for at once";
      continue;
    }
    if (first->fused_add || first->dot->noperands != 2 || first->a_src != FA_OPND_TILE) {
      pp->no_rotation = "the loop's first product accumulates or reads its A operand from registers";
      continue;
    }
    bool flip;
    if (!outside_or_ring(pl, tile_source(pl, first->dot->operands[0], &flip), pp) ||
        !outside_or_ring(pl, tile_source(pl, first->dot->operands[1], &flip), pp)) {
      pp->no_rotation = "the loop's first product reads a value the iteration computes";
      continue;
    }
    /* its result stays in the body */
    const IrValue *r = first->dot->results[0];
    bool inside = true;
    for (int n = 0; n < p->nops && inside; n++) {
      const IrOp *use = p->order[n];
      for (int k = 0; k < use->noperands; k++)
        if (use->operands[k] == r && !within(use->parent, pp->loop))
          inside = false;
    }
    const IrOp *y = pp->loop->regions[0]->last;
    for (int k = 0; y && k < y->noperands; k++)
      inside &= y->operands[k] != r;
    if (!inside) {
      pp->no_rotation = "the loop's first product's result is used after the loop";
      continue;
    }
    pp->acc_registers = loop_acc_registers(pl, pp, p->warps * 32) + first->M * first->N / (p->warps * 32);
    if (pp->acc_registers > FA_ROTATION_REGISTERS) {
      pp->no_rotation = "a second accumulator would not fit the registers";
      continue;
    }
    pp->rotated = first;
  }
  /* In a persistent kernel (the loop over programs around the body) two
     rotated loops spilled where one did not (attention's causal forward
     pass at d_head 128, 8 warps, in the sweep): there only the loop with
     the most iterations at sample sizes (cuda_plan.c's evaluator: integer
     arguments 4096, program ids 8) is rotated */
  if (p->k->schedule == FA_SCHEDULE_PERSISTENT) {
    FaPipelinePlan *keep = NULL;
    long long most = -1;
    for (int i = 0; i < pl->pipelines.len; i++) {
      FaPipelinePlan *pp = pl->pipelines.items[i];
      long long n = pp->rotated ? loop_trips(pl, pp->loop) : -1;
      if (pp->rotated && (n > most || !keep)) {
        most = n;
        keep = pp;
      }
    }
    for (int i = 0; i < pl->pipelines.len; i++) {
      FaPipelinePlan *pp = pl->pipelines.items[i];
      if (pp->rotated && pp != keep) {
        pp->rotated = NULL;
        pp->no_rotation = "a persistent kernel issues ahead in one loop only, the one with the most iterations";
      }
    }
  }
  for (int i = 0; i < pl->pipelines.len; i++) {
    FaPipelinePlan *pp = pl->pipelines.items[i];
    FaProductPlan *first = pp->rotated;
    if (!first)
      continue;
    /* its own wait goes: the back edge waits for the next one */
    unwait(first);
    first->rotated = true;
  }
  drop_empty_waits(pl);
}

static size_t smem_needed(const FaCudaPlan *p);

/* Split rings (FaRingLoad).  A load's buffer can be released early when
 * every use of its value in the kernel is a product in the loop body (not
 * in a branch of its own) reading it as a tile: then it is released where
 * the last of them is complete, the wgmma wait of an asynchronous one or
 * the op after a synchronous one; one read by the deferred product is
 * released after that product's wait, and if nothing else reads it, it is
 * waited for only at the next iteration's head, where that product is
 * issued.  Any other use (elementwise reads of the tile, a view, a carried
 * value) keeps the release at the end of the iteration. */
static bool reads_as_tile(Planner *pl, const IrOp *use, const IrValue *v) {
  if (use->kind != IR_DOT || !fa_plan_op_live(pl->p, use))
    return false;
  for (int j = 0; j < use->noperands; j++)
    if (use->operands[j] == v && (j > 1 || !fa_plan_reads_tile(use, j) || fused_cast_source(pl, use, j)))
      return false;
  return true;
}

/* The op of the body before which product `prod` (issued by `issue`) has
 * read its operands: its wgmma wait, or the next op after a synchronous
 * product; NULL: only at the end of the iteration. */
static const IrOp *complete_before(Planner *pl, const FaProductPlan *prod, const IrOp *issue, const IrRegion *body) {
  if (prod->instr == FA_INSTR_WGMMA && prod->wait == FA_WAIT_LATE) {
    const FaWgmmaWait *w = prod->wait_at;
    return w && w->before && w->region == body ? w->before : NULL;
  }
  const IrOp *after = issue->next;
  while (after && !fa_plan_op_live(pl->p, after) && after->kind != IR_YIELD)
    after = after->next;
  return after && after->kind != IR_YIELD ? after : NULL;
}

static int position_in(const IrRegion *body, const IrOp *op) {
  int at = 0;
  for (const IrOp *o = body->first; o && o != op; o = o->next)
    at++;
  return at;
}

static const char *plan_ring_load(Planner *pl, const FaPipelinePlan *pp, const FaAccessPlan *ap, FaRingLoad *out) {
  const FaCudaPlan *p = pl->p;
  const IrRegion *body = pp->loop->regions[0];
  const IrValue *v = ap->op->results[0];
  memset(out, 0, sizeof *out);
  out->release = FA_RELEASE_TAIL;
  bool by_deferred = false, by_others = false;
  int latest = -1;
  const IrOp *latest_op = NULL;
  for (int n = 0; n < p->nops; n++) {
    const IrOp *use = p->order[n];
    bool uses = false;
    for (int k = 0; k < use->noperands; k++)
      uses |= use->operands[k] == v;
    if (!uses)
      continue;
    const FaProductPlan *prod = use->parent == body && reads_as_tile(pl, use, v) ? fa_plan_product(p, use) : NULL;
    if (!prod)
      return "a use of the tile is not a product in the loop's body";
    if (prod == pp->deferred) {
      by_deferred = true;
      continue;
    }
    by_others = true;
    /* the op that issues it: the addition it is fused into, or the dot */
    const IrOp *issue = prod->fused_add ? prod->fused_add : use;
    const IrOp *done = issue->parent == body ? complete_before(pl, prod, issue, body) : NULL;
    if (!done)
      return "a product reading the tile completes only at the end of the iteration";
    int at = position_in(body, done);
    if (at > latest) {
      latest = at;
      latest_op = done;
    }
  }
  if (by_deferred) {
    out->release = FA_RELEASE_DEFERRED;
    out->next_head = !by_others;
  } else if (latest_op) {
    out->release = FA_RELEASE_BEFORE;
    out->release_before = latest_op;
  }
  return NULL;
}

/* The loops of a shared ring split all or none (their producer copies and
 * compute warps count the same barriers); a ring's barriers get a slot for
 * each load's stages. */
static void plan_split_rings(Planner *pl) {
  FaCudaPlan *p = pl->p;
  if (!p->warp_specialised)
    return;
  for (int i = 0; i < pl->pipelines.len; i++) {
    FaPipelinePlan *pp = pl->pipelines.items[i];
    if (pp->sync != FA_SYNC_MBARRIER || pp->nloads < 2)
      continue;
    if (pp->rotated) {
      pp->no_split = "the loop's first product is issued ahead";
      continue;
    }
    FaRingLoad *split = palloc(pl, (size_t)pp->nloads * sizeof *split);
    if (!split)
      return;
    bool early = false;
    for (int j = 0; j < pp->nloads && !pp->no_split; j++) {
      pp->no_split = plan_ring_load(pl, pp, pp->loads[j], &split[j]);
      early |= split[j].release != split[0].release || split[j].release_before != split[0].release_before ||
               split[j].next_head != split[0].next_head;
    }
    if (!pp->no_split && !early)
      pp->no_split = "every load of the ring is released at the same point";
    if (!pp->no_split)
      pp->split = split;
  }
  for (int i = 0; i < pl->pipelines.len; i++) {
    FaPipelinePlan *root = pl->pipelines.items[i];
    if (root->shares || root->sync != FA_SYNC_MBARRIER)
      continue;
    bool all = root->split != NULL;
    const char *why = "another loop sharing the ring is not split";
    for (int k = 0; k < pl->pipelines.len; k++) {
      const FaPipelinePlan *q = pl->pipelines.items[k];
      if (q->shares == root && !q->split)
        all = false;
    }
    /* (the extra barriers, rounded as plan_kernel rounds them) */
    if (all && smem_needed(p) + 16 * (size_t)root->stages * (size_t)(root->nloads - 1) + 16 > FA_SMEM_MAX_SM90) {
      all = false;
      why = "a full and an empty mbarrier a stage for each load would not fit in shared memory";
    }
    for (int k = 0; k < pl->pipelines.len && !all; k++) {
      FaPipelinePlan *q = pl->pipelines.items[k];
      if ((q == root || q->shares == root) && q->split) {
        q->split = NULL;
        q->no_split = why;
      }
    }
    if (all) {
      p->barriers[root->full].slots = root->stages * root->nloads;
      p->barriers[root->empty].slots = root->stages * root->nloads;
    }
  }
}

/* ---- 9. loads and stores ---------------------------------------------------------------------------- */

/* atomic_add through a block pointer, the reduce-store method: the elements
 * go out as a block store's would (in the value's layout, each by its one
 * owner), every `vec` contiguous elements in one red.global.add.  Vectors of
 * f32 (v2, v4) exist on sm_90 and later; there the width is the store's,
 * from the same facts (alignment, strides, offsets, checked bound), else one
 * element per instruction, and bf16 below sm_90 (no red.add.bf16) by
 * compare-and-swap. */
static void plan_reduce_block(Planner *pl, const IrOp *op, FaAccessPlan *ap) {
  DType dt = op->operands[1]->type.dtype;
  int sm = pl->p->target.sm;
  ap->method = FA_ACCESS_REDUCE;
  ap->layout = op->aux;
  ap->red = dt == DT_BF16 && sm < 90 ? FA_RED_CAS : FA_RED_SCALAR;
  if (!ap->layout)
    return;
  ap->vec = block_vector_width(pl, op->operands[0], ap->layout, op->boundary, &ap->facts);
  if (ap->vec > 1 && (dt != DT_F32 || sm < 90)) {
    ap->vec = 1;
    ap->facts.limit = FA_VEC_REDUCE_INSTR;
  }
  if (ap->vec > 1)
    ap->red = FA_RED_VECTOR;
}

/* A store through a block pointer from registers: vectors of the value's
 * layout (or, atomic_add, reduce-stores). */
static void plan_block_store(Planner *pl, const IrOp *op, FaAccessPlan *ap) {
  ap->vec = 1;
  if (op->kind == IR_ATOMIC_ADD_BLOCK) {
    plan_reduce_block(pl, op, ap);
    return;
  }
  ap->method = FA_ACCESS_VECTOR;
  ap->layout = op->aux;
  if (ap->layout)
    ap->vec = block_vector_width(pl, op->operands[0], ap->layout, op->boundary, &ap->facts);
}

static void plan_access(Planner *pl, const IrOp *op) {
  FaOpPlan *o = op_insert(pl->p->ops, op);
  if (o->access) { /* a pipelined load, or a bulk copy */
    fa_ptrvec_push(&pl->accesses, o->access);
    return;
  }
  FaAccessPlan *ap = palloc(pl, sizeof *ap);
  if (!ap)
    return;
  ap->op = op;
  ap->vec = 1;
  switch (op->kind) {
  case IR_LOAD:
    ap->method = FA_ACCESS_ELEMENT;
    ap->layout = op->results[0]->layout;
    break;
  case IR_STORE:
    ap->method = FA_ACCESS_ELEMENT;
    ap->layout = op->aux;
    break;
  case IR_ATOMIC_ADD: {
    const IrValue *r = op->results[0];
    ap->method = FA_ACCESS_ATOMIC;
    ap->layout = r->layout;
    if (!is_block(op->operands[0]) && val(pl, r)->live)
      ap->scratch = 16; /* one thread adds, every thread reads the previous value */
    if (is_block(op->operands[0]) && val(pl, r)->live && r->layout &&
        (fa_layout_lane_dups(r->layout) || fa_layout_warp_dups(r->layout))) {
      /* only the owner adds; the copies would see 0 as the previous value */
      fa_error(&pl->fc->diag, op->loc,
               "atomic_add on a block with copies in several threads (%d elements for %d threads) is "
               "not supported by the CUDA backend yet; use a block of at least as many elements as threads",
               (int)fa_type_numel(r->type), 32 * pl->p->warps);
      pl->ok = false;
    }
    break;
  }
  case IR_LOAD_BLOCK:
    ap->method = FA_ACCESS_VECTOR;
    ap->layout = op->results[0]->layout;
    ap->vec = block_vector_width(pl, op->operands[0], ap->layout, op->boundary, &ap->facts);
    ap->tma_refusal = o->tma_considered ? o->tma_refusal : FA_TMA_OK;
    ap->tma_refusal_dim = o->tma_dim;
    break;
  case IR_STORE_BLOCK:
  case IR_ATOMIC_ADD_BLOCK:
    plan_block_store(pl, op, ap);
    ap->tma_refusal = o->tma_considered ? o->tma_refusal : FA_TMA_OK;
    ap->tma_refusal_dim = o->tma_dim;
    break;
  default: return;
  }
  o->access = ap;
  fa_ptrvec_push(&pl->accesses, ap);
}

/* ---- 10. reductions, scans, prints ------------------------------------------------------------- */

static void plan_fail(Planner *pl, const IrOp *op, const char *msg) {
  fa_error(&pl->fc->diag, op->loc, "%s", msg);
  pl->ok = false;
}

/* The lane and warp bits of layout l that hold axis `axis`. */
static void axis_masks(const FaLayout *l, int axis, unsigned *lanes, unsigned *warps) {
  int first, count;
  fa_layout_dim_bits(l, axis, &first, &count);
  *lanes = *warps = 0;
  for (int i = 0; i < FA_LAYOUT_LANE_BITS; i++)
    if (l->lane[i] >= first && l->lane[i] < first + count)
      *lanes |= 1u << i;
  for (int i = 0; i < l->nwarp; i++)
    if (l->warp[i] >= first && l->warp[i] < first + count)
      *warps |= 1u << i;
}

/* The hardware bits of layout l that select the flat-index bits of an axis,
 * lowest first; false if one is held by none (no layout does that). */
static bool axis_steps(const FaLayout *l, int axis, FaAxisSteps *out) {
  int first, count;
  fa_layout_dim_bits(l, axis, &first, &count);
  memset(out, 0, sizeof *out);
  for (int b = first; b < first + count; b++) {
    FaAxisBit x = {FA_AXIS_REGISTER, -1};
    for (int i = 0; i < l->nreg; i++)
      if (l->reg[i] == b)
        x = (FaAxisBit){FA_AXIS_REGISTER, i};
    for (int i = 0; i < FA_LAYOUT_LANE_BITS; i++)
      if (l->lane[i] == b)
        x = (FaAxisBit){FA_AXIS_LANE, i};
    for (int i = 0; i < l->nwarp; i++)
      if (l->warp[i] == b)
        x = (FaAxisBit){FA_AXIS_WARP, i};
    if (x.bit < 0 || out->nbits >= FA_LAYOUT_MAX_BITS)
      return false;
    out->across_warps |= x.kind == FA_AXIS_WARP;
    out->bits[out->nbits++] = x;
  }
  return true;
}

/* Bytes of the struct that holds one element of each value an op scans or
 * reduces with its combine function (C++'s layout of the fields in order). */
static size_t combine_struct_bytes(const IrOp *op) {
  size_t off = 0, align = 1;
  for (int k = 0; k < op->nresults; k++) {
    size_t size = (size_t)fa_dtype_size(op->results[k]->type.dtype);
    off = (off + size - 1) / size * size + size;
    if (size > align)
      align = size;
  }
  return (off + align - 1) / align * align;
}

/* The way a reduction's result k leaves the slice layout for its own. */
static void plan_to_result(Planner *pl, FaReducePlan *rp, int k) {
  const IrValue *r = rp->op->results[k];
  FaConversionPlan *c = &rp->to_result[k];
  c->from = c->to = rp->slice;
  if (!rp->slice || !is_block(r) || !val(pl, r)->live || rp->slice == r->layout)
    return;
  int perm[FA_LAYOUT_MAX_BITS];
  c->to = r->layout;
  c->in_registers = fa_layout_register_permutation(rp->slice, r->layout, perm);
  int size = r->type.dtype == DT_PTR ? 8 : fa_dtype_size(r->type.dtype);
  if (!c->in_registers)
    c->scratch = (size_t)fa_type_numel(r->type) * (size_t)(size > 0 ? size : 1);
}

/* sum / max / min along an axis (fa::reduce), or a reduction with a combine
 * function (fa::combine_all over the axis's bits). */
static void plan_reduce(Planner *pl, const IrOp *op) {
  const IrValue *x = op->operands[0], *r = op->results[0];
  bool combine = op->kind == IR_REDUCE_FN;
  DType dt = x->type.dtype;
  if (!combine && (dt == DT_I1 || dt == DT_PTR)) {
    fa_error(&pl->fc->diag, op->loc, "the CUDA backend cannot reduce %s values", fa_dtype_name(dt));
    pl->ok = false;
    return;
  }
  if (op->nresults > FA_COMBINE_MAX_VALUES) {
    plan_fail(pl, op, "internal compiler error: a reduction of too many values");
    return;
  }
  FaReducePlan *rp = palloc(pl, sizeof *rp);
  if (!rp)
    return;
  const FaLayout *src = fa_plan_operand_layout(pl->p, op, 0);
  rp->op = op;
  rp->src = src;
  rp->nresults = op->nresults;
  if (!src) {
    plan_fail(pl, op, "internal compiler error: a reduction without a layout");
    return;
  }
  int first, count, nk = 0;
  fa_layout_dim_bits(src, op->axis, &first, &count);
  for (int i = 0; i < src->nreg; i++)
    if (!(src->reg[i] >= first && src->reg[i] < first + count))
      nk++;
  axis_masks(src, op->axis, &rp->lane_mask, &rp->warp_mask);
  if (combine) {
    if (!axis_steps(src, op->axis, &rp->steps)) {
      plan_fail(pl, op, "internal compiler error: an axis that no thread holds");
      return;
    }
    rp->elem_bytes = combine_struct_bytes(op);
    /* every thread's struct of every register, exchanged between warps */
    if (rp->steps.across_warps)
      rp->scratch = (size_t)pl->p->warps * 32u * ((size_t)1 << src->nreg) * rp->elem_bytes;
  } else if (rp->warp_mask) {
    bool widen = dt == DT_F16 || dt == DT_BF16; /* f16 / bf16 accumulate in f32, like the interpreter */
    int size = widen ? 4 : fa_dtype_size(dt);
    rp->scratch = (size_t)pl->p->warps * 32u * ((size_t)1 << nk) * (size_t)size;
  }
  if (is_block(r)) {
    /* the results come out in the slice of the operand's layout */
    FaLayout s;
    fa_layout_slice(&s, src, op->axis);
    rp->slice = fa_layout_intern(pl->fc, &pl->p->layouts, &s);
    if (!rp->slice) {
      plan_fail(pl, op, "internal compiler error: too many layouts");
      return;
    }
  }
  for (int k = 0; k < op->nresults; k++)
    plan_to_result(pl, rp, k);
  op_insert(pl->p->ops, op)->reduce = rp;
  fa_ptrvec_push(&pl->reduces, rp);
}

/* An inclusive scan runs in the layout its operands and results share
 * (fa::scan over the axis's bits: registers, then shuffles, then warps
 * through shared memory). */
static void plan_scan(Planner *pl, const IrOp *op) {
  const FaLayout *l = op->results[0]->layout;
  if (!l) {
    plan_fail(pl, op, "internal compiler error: a scan without a layout");
    return;
  }
  FaScanPlan *sp = palloc(pl, sizeof *sp);
  if (!sp)
    return;
  sp->op = op;
  sp->layout = l;
  sp->reverse = op->ival != 0;
  if (!axis_steps(l, op->axis, &sp->steps)) {
    plan_fail(pl, op, "internal compiler error: an axis that no thread holds");
    return;
  }
  sp->elem_bytes = combine_struct_bytes(op);
  if (sp->steps.across_warps)
    sp->scratch = (size_t)pl->p->warps * 32u * ((size_t)1 << l->nreg) * sp->elem_bytes;
  op_insert(pl->p->ops, op)->scan = sp;
  fa_ptrvec_push(&pl->scans, sp);
}

/* device_print reads its blocks in the op's layout; where that layout has
 * copies of an element in several threads, only its owner prints it. */
static void plan_print(Planner *pl, const IrOp *op) {
  FaPrintPlan *pp = palloc(pl, sizeof *pp);
  if (!pp)
    return;
  pp->op = op;
  bool blocks = false;
  for (int i = 0; i < op->noperands; i++)
    blocks |= is_block(op->operands[i]);
  pp->layout = blocks ? op->aux : NULL;
  if (blocks && !pp->layout) {
    plan_fail(pl, op, "internal compiler error: a print without a layout");
    return;
  }
  pp->owners_only = pp->layout && (fa_layout_lane_dups(pp->layout) || fa_layout_warp_dups(pp->layout));
  op_insert(pl->p->ops, op)->print = pp;
  fa_ptrvec_push(&pl->prints, pp);
}

/* Products, accesses, reductions, scans and prints of the live ops, in
 * program order. */
static void plan_ops(Planner *pl) {
  FaCudaPlan *p = pl->p;
  for (int n = 0; n < p->nops && pl->ok; n++) {
    const IrOp *op = p->order[n];
    if (!fa_plan_op_live(p, op))
      continue;
    switch (op->kind) {
    case IR_DOT:
      if (op->aux)
        plan_product(pl, op);
      break;
    case IR_LOAD:
    case IR_STORE:
    case IR_ATOMIC_ADD:
    case IR_LOAD_BLOCK:
    case IR_STORE_BLOCK:
    case IR_ATOMIC_ADD_BLOCK: plan_access(pl, op); break;
    case IR_REDUCE:
      if (!fa_value_is_virtual(&p->layouts, op->results[0]) || !is_block(op->results[0]))
        plan_reduce(pl, op);
      break;
    case IR_REDUCE_FN: plan_reduce(pl, op); break;
    case IR_SCAN: plan_scan(pl, op); break;
    case IR_PRINT: plan_print(pl, op); break;
    default: break;
    }
  }
}

/* The synchronisation of a cp.async pipeline, in the order the code runs:
 *   before the loop: barrier (the buffers may have held other tiles), then
 *     for s < ahead: issue iteration s, commit;
 *   each iteration: barrier (the buffer refilled now is free), issue
 *     iteration it + ahead, commit, wait until `ahead` groups are in flight
 *     (this iteration's have landed), proxy fence if wgmma reads the tiles,
 *     barrier (every warp's copies are visible);
 *   after the loop: wait for everything.
 * Of an mbarrier ring (bulk copies):
 *   before the loop: barrier (the buffers may have held other tiles), then
 *     for s < ahead: wait until the buffer of iteration s is released, and
 *     one thread issues its copies (arming full[]);
 *   each iteration: the same for it + ahead; every thread waits on full[]
 *     for this iteration's copies;
 *   at the end of each iteration (after the last read of its buffers):
 *     each warp releases them (one arrival on empty[]). */
static void push_step(FaPipeStep *steps, int *n, FaPipeStepKind kind, int arg, FaStepWhy why) {
  if (*n < FA_PIPE_MAX_STEPS)
    steps[(*n)++] = (FaPipeStep){kind, arg, why, FA_BY_ALL};
}

static void push_step_by(FaPipeStep *steps, int *n, FaPipeStepKind kind, int arg, FaStepBy by) {
  if (*n < FA_PIPE_MAX_STEPS)
    steps[(*n)++] = (FaPipeStep){kind, arg, FA_WHY_NONE, by};
}

/* Every thread waits for the buffer to be released, not only the issuer:
 * a wait loop on a path that only some threads of a warpgroup take
 * serialises its wgmma products (ptxas C7518); with a producer warp
 * (tma_ws) only the producer waits. */
static void plan_mbarrier_steps(FaPipelinePlan *pp) {
  push_step(pp->prologue, &pp->nprologue, FA_STEP_BARRIER, 0, FA_WHY_BUFFERS_REUSED);
  for (int s = 0; s < pp->ahead; s++) {
    push_step_by(pp->prologue, &pp->nprologue, FA_STEP_WAIT_EMPTY, s, FA_BY_ALL);
    push_step_by(pp->prologue, &pp->nprologue, FA_STEP_ISSUE, s, FA_BY_ISSUER);
  }
  push_step_by(pp->head, &pp->nhead, FA_STEP_WAIT_EMPTY, pp->ahead, FA_BY_ALL);
  push_step_by(pp->head, &pp->nhead, FA_STEP_ISSUE, pp->ahead, FA_BY_ISSUER);
  push_step(pp->head, &pp->nhead, FA_STEP_WAIT_FULL, 0, FA_WHY_LANDED);
  push_step_by(pp->tail, &pp->ntail, FA_STEP_RELEASE, 0, FA_BY_WARP);
}

/* With a producer warp the consumers only wait and release; the producer
 * waits for each buffer's release and issues, iteration by iteration. */
static void plan_producer_steps(FaPipelinePlan *pp) {
  push_step(pp->head, &pp->nhead, FA_STEP_WAIT_FULL, 0, FA_WHY_LANDED);
  push_step_by(pp->tail, &pp->ntail, FA_STEP_RELEASE, 0, FA_BY_WARP);
  push_step_by(pp->producer, &pp->nproducer, FA_STEP_WAIT_EMPTY, 0, FA_BY_PRODUCER);
  push_step_by(pp->producer, &pp->nproducer, FA_STEP_ISSUE, 0, FA_BY_PRODUCER);
}

/* Whether a buffer of the ring shares memory with a bulk store's staging
 * tile: then the prologue first waits until the copy engine has read it. */
static bool ring_drains(const FaPipelinePlan *pp) {
  for (int i = 0; i < pp->nloads; i++)
    if (pp->loads[i]->tile && pp->loads[i]->tile->drains)
      return true;
  return false;
}

static void plan_pipeline_steps(FaCudaPlan *p, FaPipelinePlan *pp) {
  if (pp->sync == FA_SYNC_MBARRIER && p->warp_specialised) {
    plan_producer_steps(pp);
    return;
  }
  if (ring_drains(pp))
    push_step_by(pp->prologue, &pp->nprologue, FA_STEP_DRAIN_STORES, 0, FA_BY_ISSUER);
  if (pp->sync == FA_SYNC_MBARRIER) {
    plan_mbarrier_steps(pp);
    return;
  }
  push_step(pp->prologue, &pp->nprologue, FA_STEP_BARRIER, 0, FA_WHY_BUFFERS_REUSED);
  for (int s = 0; s < pp->ahead; s++) {
    push_step(pp->prologue, &pp->nprologue, FA_STEP_ISSUE, s, FA_WHY_NONE);
    push_step(pp->prologue, &pp->nprologue, FA_STEP_COMMIT, 0, FA_WHY_NONE);
  }
  push_step(pp->head, &pp->nhead, FA_STEP_BARRIER, 0, FA_WHY_BUFFER_FREE);
  push_step(pp->head, &pp->nhead, FA_STEP_ISSUE, pp->ahead, FA_WHY_NONE);
  push_step(pp->head, &pp->nhead, FA_STEP_COMMIT, 0, FA_WHY_NONE);
  push_step(pp->head, &pp->nhead, FA_STEP_WAIT_GROUPS, pp->ahead, FA_WHY_LANDED);
  if (p->async_proxy_reads)
    push_step(pp->head, &pp->nhead, FA_STEP_PROXY_FENCE, 0, FA_WHY_NONE);
  push_step(pp->head, &pp->nhead, FA_STEP_BARRIER, 0, FA_WHY_NONE);
  push_step(pp->epilogue, &pp->nepilogue, FA_STEP_WAIT_GROUPS, 0, FA_WHY_NONE);
}

static void note(size_t *max, size_t bytes) {
  if (bytes > *max)
    *max = bytes;
}

/* ---- 11. the schedule: persistent kernels and their tile order -------------------------------------
 * With schedule persistent the kernel is launched on as many thread blocks
 * as the GPU holds at once, each looping over programs (tiles) in an order
 * the plan chooses.  Programs differ in work when the trip counts of their
 * loops depend on a program id (causal attention: a query block's key loop
 * ends at its diagonal); the plan finds that by evaluating the loops'
 * bounds, a slice of integer scalar ops, at sample values (integer
 * arguments 4096, the program id at 1 and 2, the other ids 0) and orders
 * the programs longest first along that axis, so that the short ones fill
 * in at the end (longest processing time first); else the hardware's order,
 * program_id(0) fastest, which keeps programs sharing operands together. */

typedef struct Evaluator {
  const FaCudaPlan *p;
  int axis;                 /* the program id varied (-1: all of them) */
  long long at;             /* its value */
  long long *memo;          /* by value id */
  unsigned char *state;     /* 0 unknown, 1 known, 2 not computable */
} Evaluator;

static bool eval_int(Evaluator *ev, const IrValue *v, long long *out);

static bool eval_op(Evaluator *ev, const IrOp *op, const IrValue *v, long long *out) {
  long long a = 0, b = 0, c = 0;
  switch (op->kind) {
  case IR_CONST: *out = op->ival; return true;
  case IR_PROGRAM_ID: *out = op->axis == ev->axis || ev->axis < 0 ? ev->at : 0; return true;
  case IR_NUM_PROGRAMS: *out = 64; return true;
  case IR_CAST:
    if (!eval_int(ev, op->operands[0], &a))
      return false;
    switch (v->type.dtype) {
    case DT_I1: *out = a != 0; break;
    case DT_I8: *out = (int8_t)a; break;
    case DT_I16: *out = (int16_t)a; break;
    case DT_I32: *out = (int32_t)a; break;
    case DT_U32: *out = (uint32_t)a; break;
    default: *out = a; break;
    }
    return true;
  case IR_UNARY:
    if (!eval_int(ev, op->operands[0], &a))
      return false;
    switch (op->sub) {
    case UN_NEG: *out = -a; return true;
    case UN_NOT: *out = !a; return true;
    case UN_INVERT: *out = ~a; return true;
    case UN_ABS: *out = a < 0 ? -a : a; return true;
    default: return false;
    }
  case IR_BINARY:
    if (!eval_int(ev, op->operands[0], &a) || !eval_int(ev, op->operands[1], &b))
      return false;
    switch (op->sub) {
    case BIN_ADD: *out = a + b; return true;
    case BIN_SUB: *out = a - b; return true;
    case BIN_MUL: *out = a * b; return true;
    case BIN_DIV: if (!b) return false; *out = a / b; return true;
    case BIN_MOD: if (!b) return false; *out = a % b; return true;
    case BIN_MAX: *out = a > b ? a : b; return true;
    case BIN_MIN: *out = a < b ? a : b; return true;
    case BIN_AND: *out = a & b; return true;
    case BIN_OR: *out = a | b; return true;
    case BIN_XOR: *out = a ^ b; return true;
    case BIN_SHL: if (b < 0 || b > 62) return false; *out = a << b; return true;
    case BIN_SHR: if (b < 0 || b > 62) return false; *out = a >> b; return true;
    default: return false;
    }
  case IR_CMP:
    if (!eval_int(ev, op->operands[0], &a) || !eval_int(ev, op->operands[1], &b))
      return false;
    switch (op->sub) {
    case CMP_LT: *out = a < b; return true;
    case CMP_LE: *out = a <= b; return true;
    case CMP_GT: *out = a > b; return true;
    case CMP_GE: *out = a >= b; return true;
    case CMP_EQ: *out = a == b; return true;
    default: *out = a != b; return true;
    }
  case IR_SELECT:
    if (!eval_int(ev, op->operands[0], &c))
      return false;
    return eval_int(ev, op->operands[c ? 1 : 2], out);
  case IR_IF: {
    if (!eval_int(ev, op->operands[0], &c))
      return false;
    const IrRegion *r = op->regions[c ? 0 : 1];
    const IrOp *y = r ? r->last : NULL;
    for (int i = 0; i < op->nresults; i++)
      if (op->results[i] == v)
        return y && y->kind == IR_YIELD && i < y->noperands && eval_int(ev, y->operands[i], out);
    return false;
  }
  default: return false;
  }
}

static bool eval_int(Evaluator *ev, const IrValue *v, long long *out) {
  if (v->type.rank != 0 || !fa_dtype_is_int(v->type.dtype) || v->id < 0 || v->id >= ev->p->nvalues)
    return false;
  if (ev->state[v->id] == 1) {
    *out = ev->memo[v->id];
    return true;
  }
  if (ev->state[v->id] == 2)
    return false;
  ev->state[v->id] = 2; /* until known (and against cycles) */
  bool ok;
  if (!v->def)
    ok = !v->region && (*out = 4096, true); /* an integer argument; region arguments vary */
  else
    ok = eval_op(ev, v->def, v, out);
  if (ok) {
    ev->state[v->id] = 1;
    ev->memo[v->id] = *out;
  }
  return ok;
}

/* The iterations of the loops in r, a loop's count multiplied by the
 * iterations of the loops in its body (where their bounds do not depend on
 * the loop's own values: else by 1), or -1 when some bound is not
 * computable. */
static long long region_work(Evaluator *ev, const IrRegion *r) {
  long long total = 0;
  for (const IrOp *op = r->first; op; op = op->next) {
    if (op->kind == IR_FOR) {
      long long lb, ub, step;
      if (!eval_int(ev, op->operands[0], &lb) || !eval_int(ev, op->operands[1], &ub) ||
          !eval_int(ev, op->operands[2], &step) || step <= 0)
        return -1;
      long long inner = region_work(ev, op->regions[0]);
      if (ub > lb)
        total += (ub - lb + step - 1) / step * (inner > 0 ? inner : 1);
    } else if (op->kind == IR_IF) {
      long long c;
      for (int k = 0; k < op->nregions; k++) {
        if (eval_int(ev, op->operands[0], &c) && (c != 0) != (k == 0))
          continue; /* the branch not taken */
        long long w = region_work(ev, op->regions[k]);
        if (w < 0)
          return -1;
        total += w;
      }
    }
  }
  return total;
}

static bool evaluator(Planner *pl, Evaluator *ev, int axis, long long at) {
  FaCudaPlan *p = pl->p;
  size_t n = (size_t)(p->nvalues > 0 ? p->nvalues : 1);
  *ev = (Evaluator){p, axis, at, palloc(pl, n * sizeof(long long)), palloc(pl, n)};
  if (!ev->memo || !ev->state)
    return false;
  memset(ev->state, 0, n);
  return true;
}

static long long work_at(Planner *pl, int axis, long long at) {
  Evaluator ev;
  return evaluator(pl, &ev, axis, at) ? region_work(&ev, pl->p->fn->body) : -1;
}

/* One loop's iterations at sample sizes (every program id 8), or -1. */
static long long loop_trips(Planner *pl, const IrOp *loop) {
  Evaluator ev;
  long long lb, ub, step;
  if (!evaluator(pl, &ev, -1, 8) || !eval_int(&ev, loop->operands[0], &lb) || !eval_int(&ev, loop->operands[1], &ub) ||
      !eval_int(&ev, loop->operands[2], &step) || step <= 0)
    return -1;
  return ub > lb ? (ub - lb + step - 1) / step : 0;
}

/* The programs' order where their work differs (FaSchedulePlan.order):
 * the program id whose value changes the loops' iterations most. */
static void plan_tile_order(Planner *pl) {
  FaCudaPlan *p = pl->p;
  FaSchedulePlan *s = &p->schedule;
  bool used[3] = {false, false, false};
  for (int n = 0; n < p->nops; n++)
    if (p->order[n]->kind == IR_PROGRAM_ID && p->order[n]->axis >= 0 && p->order[n]->axis < 3)
      used[p->order[n]->axis] = true;
  long long best = 0;
  s->linear_why = "no loop's trip count depends on a program id";
  for (int a = 0; a < 3; a++) {
    if (!used[a])
      continue;
    long long w1 = work_at(pl, a, 1), w2 = work_at(pl, a, 2);
    if (w1 < 0 || w2 < 0) {
      s->linear_why = "the loops' bounds are not computable from integer arguments and program ids";
      continue;
    }
    long long d = w2 > w1 ? w2 - w1 : w1 - w2;
    if (d > best) {
      best = d;
      s->order = FA_ORDER_LONGEST_FIRST;
      s->axis = a;
      s->descending = w2 > w1;
      s->group = FA_SCHEDULE_GROUP;
      s->work[0] = w1;
      s->work[1] = w2;
      s->linear_why = NULL;
    }
  }
}

/* The op of the kernel's body that holds op (op itself at the top level). */
static const IrOp *body_op_of(const FaCudaPlan *p, const IrOp *op) {
  while (op && op->parent && op->parent != p->fn->body)
    op = op->parent->parent_op;
  return op;
}

/* Where the compute threads are done with the tiles of loads outside loops
 * (FaSchedulePlan.tile_release_after): after the op of the body that holds
 * the last product reading one of them, or that product's wait where the
 * wait comes later; NULL (the end of the program) when a product reading
 * one is deferred past its loop or waited for at the end of the body. */
static const IrOp *once_tiles_released_after(const FaCudaPlan *p) {
  const IrOp *last = NULL;
  int last_pos = -1;
  for (int i = 0; i < p->nproducts; i++) {
    const FaProductPlan *pp = p->products[i];
    bool reads = false;
    const FaTilePlan *tiles[2] = {pp->a_src == FA_OPND_TILE ? pp->a_tile : NULL,
                                  pp->b_src == FA_OPND_TILE ? pp->b_tile : NULL};
    for (int k = 0; k < 2; k++)
      reads |= tiles[k] && tiles[k]->fill == FA_FILL_TMA && !tiles[k]->pipeline;
    if (!reads)
      continue;
    if (pp->deferred)
      return NULL;
    const IrOp *at = body_op_of(p, pp->dot);
    if (pp->wait == FA_WAIT_LATE && pp->wait_at) {
      const FaWgmmaWait *w = pp->wait_at;
      if (w->region == p->fn->body && !w->before)
        return NULL;
      const IrOp *waited = body_op_of(p, w->before ? w->before : w->region->parent_op);
      if (op_position(p, waited) > op_position(p, at))
        at = waited;
    }
    int pos = op_position(p, at);
    if (pos > last_pos) {
      last_pos = pos;
      last = at;
    }
  }
  return last;
}

/* Where programs differ in work (longest first), a static assignment of
 * programs to thread blocks leaves some blocks with more work than others
 * however it is ordered (simulated for causal attention at 132 thread
 * blocks: 59% of the ideal at 4 x 16 heads of 32 query blocks with the
 * rounds of block b in alternating directions, 91% at 16 heads of 128), so
 * the blocks take programs from a counter instead, in the same order.  With
 * a producer warp, it takes them and hands them to the compute warps
 * through two slots with a pair of mbarriers each (fa::next_tile_publish). */
static void plan_dynamic(Planner *pl) {
  FaCudaPlan *p = pl->p;
  FaSchedulePlan *s = &p->schedule;
  s->next_full = s->next_empty = -1;
  if (s->kind != FA_SCHEDULE_PERSISTENT || s->order != FA_ORDER_LONGEST_FIRST)
    return;
  if (p->warp_specialised) {
    int full = add_mbarrier(p, FA_MBAR_NEXT_FULL, 2, 1);
    int empty = full < 0 ? -1 : add_mbarrier(p, FA_MBAR_NEXT_EMPTY, 2, p->warps);
    if (empty < 0) {
      p->nbarriers -= full >= 0;   /* too many barriers: the static order stays */
      return;
    }
    s->next_full = full;
    s->next_empty = empty;
  }
  s->dynamic = true;
}

/* Persistent when asked for and possible (else FaSchedulePlan.no_persistent). */
static void plan_persistent(Planner *pl) {
  FaCudaPlan *p = pl->p;
  FaSchedulePlan *s = &p->schedule;
  if (p->k->schedule != FA_SCHEDULE_PERSISTENT)
    return;
  /* a load outside loops waits for the phase of its mbarrier that is the
     count of programs run: it must run in every program */
  for (int i = 0; i < p->naccesses; i++)
    if (p->accesses[i]->method == FA_ACCESS_TMA && !p->accesses[i]->pipeline &&
        p->accesses[i]->op->parent != p->fn->body) {
      s->no_persistent = "a bulk copy outside loops is inside a condition (its mbarrier's phases would not count "
                         "the programs)";
      return;
    }
  s->kind = FA_SCHEDULE_PERSISTENT;
  /* with a producer warp that loads tiles outside loops (Q), the compute
     threads say when they are done with a tile's, before the producer
     loads the next tile's into the same buffers */
  bool once = false;
  for (int i = 0; i < p->naccesses; i++)
    once |= p->accesses[i]->method == FA_ACCESS_TMA && !p->accesses[i]->pipeline;
  if (p->warp_specialised && once) {
    s->tile_barrier = add_mbarrier(p, FA_MBAR_TILE, 1, 32 * p->warps);
    if (s->tile_barrier < 0) {
      s->kind = FA_SCHEDULE_GRID;
      s->no_persistent = "too many barriers";
    }
    /* a tile filled by the copy engine with a producer warp owns its memory
       for the whole kernel (allocate_tiles), so the next program's copy may
       land as soon as this program's products are done reading it */
    s->tile_release_after = once_tiles_released_after(p);
  }
  plan_dynamic(pl);
}

static void plan_schedule(Planner *pl) {
  FaSchedulePlan *s = &pl->p->schedule;
  s->kind = FA_SCHEDULE_GRID;
  s->tile_barrier = -1;
  s->tile_release_after = NULL;
  s->axis = -1;
  plan_tile_order(pl);
  plan_persistent(pl);
  /* one thread block per program: the hardware starts them in the order of
     their linear index, the work axis fastest.  Where larger ids along it
     run longer (descending: the causal forward and dQ passes), the ids come
     from that index through the persistent order, longest first in groups
     of programs along the other axes (the heads, which share operands in
     L2): reversing the axis alone left the heads one after another, and
     the last head's longest program started when little else was left to
     run beside it.  Where smaller ids run longer (ascending: dK/dV), the
     hardware's order is longest first along the axis already, and
     interleaving the heads measured slower (the fused backward pass 2 to
     6% on an H200, 2026-12-04 runs 44 to 46): it is kept */
  s->grid_ordered = s->kind == FA_SCHEDULE_GRID && s->order == FA_ORDER_LONGEST_FIRST && s->descending;
}

/* ---- the kernel as a whole ---------------------------------------------------------------------------- */

/* Library scratch sits above the tiles; every user finds it free on entry
 * and leaves it free, so the kernel needs the largest single need. */
static size_t scratch_bytes(const FaCudaPlan *p) {
  size_t s = 0;
  for (int i = 0; i < p->nvalues; i++)
    for (int c = 0; c < p->values[i].nconvs; c++)
      note(&s, p->values[i].convs[c].scratch);
  for (int i = 0; i < p->nreduces; i++) {
    note(&s, p->reduces[i]->scratch);
    for (int k = 0; k < p->reduces[i]->nresults; k++)
      note(&s, p->reduces[i]->to_result[k].scratch);
  }
  for (int i = 0; i < p->nscans; i++)
    note(&s, p->scans[i]->scratch);
  for (int i = 0; i < p->nproducts; i++)
    note(&s, p->products[i]->scratch);
  for (int i = 0; i < p->naccesses; i++)
    note(&s, p->accesses[i]->scratch);
  return s;
}

/* ---- 9b. shared memory for the staging tiles of bulk stores -------------------------------------
 * A staging tile is the shared memory a bulk store costs.  Where the kernel
 * would need more than a thread block may have (227 KB on sm_90), the last
 * bulk store in program order goes back to its plain form (the plan says
 * why), and the tiles are placed again, until it fits. */

/* Dynamic shared memory the kernel will ask for (as plan_kernel counts it,
 * with the mbarrier a persistent kernel with a producer warp may add). */
static size_t smem_needed(const FaCudaPlan *p) {
  size_t bars = 0;
  for (int i = 0; i < p->nbarriers; i++)
    if (p->barriers[i].kind == FA_BARRIER_MBARRIER)
      bars += 8 * (size_t)p->barriers[i].slots;
  if (p->k->schedule == FA_SCHEDULE_PERSISTENT && p->warp_specialised)
    bars += 8;
  return p->smem.tiles + ((bars + 15) & ~(size_t)15) + ((scratch_bytes(p) + 15) & ~(size_t)15) + p->smem.align_pad;
}

/* Removes a tensor map no access uses any more (the kernel's arguments
 * follow the remaining maps' new numbers). */
static void drop_tmap_if_unused(FaCudaPlan *p, const FaTensorMapPlan *m) {
  for (int i = 0; i < p->naccesses; i++)
    if (p->accesses[i]->tma && p->accesses[i]->tma->map == m)
      return;
  int keep = 0;
  for (int i = 0; i < p->ntmaps; i++)
    if (p->tmaps[i] != m) {
      p->tmaps[keep] = p->tmaps[i];
      p->tmaps[keep]->id = keep;
      keep++;
    }
  p->ntmaps = keep;
}

static void unstage_store(Planner *pl, FaAccessPlan *ap) {
  FaCudaPlan *p = pl->p;
  const FaTensorMapPlan *m = ap->tma->map;
  ap->tma = NULL;
  ap->tile = NULL;
  plan_block_store(pl, ap->op, ap);
  ap->tma_refusal = FA_TMA_SMEM;
  ap->tma_refusal_dim = -1;
  drop_tmap_if_unused(p, m);
  p->bulk_stores = false;
  for (int i = 0; i < p->naccesses; i++)
    p->bulk_stores |= p->accesses[i]->method == FA_ACCESS_TMA_STORE;
}

static void plan_store_budget(Planner *pl) {
  FaCudaPlan *p = pl->p;
  while (p->bulk_stores && smem_needed(p) > FA_SMEM_MAX_SM90 && pl->ok) {
    FaAccessPlan *last = NULL;
    for (int i = 0; i < p->naccesses; i++)
      if (p->accesses[i]->method == FA_ACCESS_TMA_STORE)
        last = p->accesses[i];
    if (!last)
      return;
    unstage_store(pl, last);
    allocate_tiles(pl);
  }
}

/* ---- 9c. how long a bulk store's staging tile waits for the earlier ones ------------------------
 * Bulk groups finish reading shared memory in the order they were committed,
 * so before a staging tile is written the issuing thread waits only for the
 * groups older than the newest ones that do not touch its memory: those of
 * the stores its region issues on every path since the last store whose
 * tile shares its memory (or since an op whose code holds bulk stores, or
 * the region's start; in a loop, the previous iteration's are older).
 * cp.async.bulk.wait_group.read N leaves the N newest unread. */

static bool in_for_or_while(const IrOp *op) {
  for (const IrRegion *r = op->parent; r && r->parent_op; r = r->parent_op->parent)
    if (r->parent_op->kind == IR_FOR || r->parent_op->kind == IR_WHILE)
      return true;
  return false;
}

static bool is_bulk_store(Planner *pl, const IrOp *op, const void *unused) {
  (void)unused;
  return staging_tile_of(pl->p, op) != NULL;
}

static void plan_store_drains(Planner *pl) {
  FaCudaPlan *p = pl->p;
  for (int i = 0; i < p->naccesses; i++) {
    FaAccessPlan *ap = p->accesses[i];
    if (ap->method != FA_ACCESS_TMA_STORE)
      continue;
    int pending = 0;
    for (const IrOp *o = ap->op->prev; o; o = o->prev) {
      if (!fa_plan_op_live(p, o))
        continue;
      if (o->nregions) {
        if (op_or_nested(pl, o, is_bulk_store, NULL))
          break;
        continue;
      }
      const FaTilePlan *t = staging_tile_of(p, o);
      if (t && tiles_overlap(t, ap->tile))
        break;
      pending += t != NULL;
    }
    ap->tma->drain_pending = pending;
    /* a store (not a reduce-add: additions commute) in a loop may write the
       elements its previous iteration wrote, which must land first */
    ap->tma->drain_writes = !ap->tma->reduce && in_for_or_while(ap->op);
  }
}

/* ---- barriers before shared-memory writes ----------------------------------------------------
 * A register-filled tile is written behind a barrier, as products of the
 * previous iteration may still read it, and a staging tile behind the drain
 * of the bulk stores and a barrier.  A bulk store whose staging tile is
 * written right after a register-filled tile's stage in the same region
 * (only ops that neither write shared memory nor commit bulk stores between)
 * drains before that stage's closing barrier, which then also tells every
 * thread that the copy engine has read the staging tile.
 * (A register-filled tile whose readers all complete before a later barrier
 * of the same iteration could also be written without the barrier before
 * it.  That was measured on an H200 (2026-12-04, runs 42 and 48): within
 * the spread at d_head 128, 9% slower in the fused backward pass at d_head
 * 64 without the causal mask; so every such tile keeps its barrier.) */

/* The register-filled tile that op stages where it stands, or NULL (a value
 * computed at its uses has no code, nor stage, there). */
static FaTilePlan *staged_tile_of(Planner *pl, const IrOp *op) {
  for (int i = 0; i < op->nresults; i++) {
    FaTilePlan *t = val(pl, op->results[i])->tile;
    if (t && t->fill == FA_FILL_REGISTERS && !is_virtual(pl, op->results[i]))
      return t;
  }
  return NULL;
}

/* The register-filled tile whose stage's closing barrier can carry the drain
 * of the bulk store ap, or NULL.  With a producer warp too: thread 0, which
 * issues and drains the bulk stores, is a compute thread, and the stage's
 * closing barrier is the compute warps' named barrier. */
static const FaTilePlan *drain_carrier(Planner *pl, const FaAccessPlan *ap) {
  for (const IrOp *o = ap->op->prev; o; o = o->prev) {
    if (!fa_plan_op_live(pl->p, o))
      continue;
    if (o->nregions)
      return NULL;
    const FaTilePlan *t = staged_tile_of(pl, o);
    if (t)
      return tiles_overlap(t, ap->tile) ? NULL : t;
    const FaAccessPlan *other = fa_plan_access(pl->p, o);
    if (other && (other->tile || other->method == FA_ACCESS_TMA_STORE))
      return NULL;
  }
  return NULL;
}

static void plan_barriers(Planner *pl) {
  FaCudaPlan *p = pl->p;
  for (int i = 0; i < p->naccesses; i++) {
    FaAccessPlan *ap = p->accesses[i];
    if (ap->method == FA_ACCESS_TMA_STORE)
      ap->tma->drain_with = drain_carrier(pl, ap);
  }
}

/* A kernel with ring vectors asks ptxas (__launch_bounds__' second
 * argument) for registers that let as many blocks share a multiprocessor as
 * its shared memory does (FA_SMEM_SM_SM90, less FA_SMEM_BLOCK_RESERVED per
 * block), where that leaves at least 160 registers a thread: reading a
 * vector from shared memory instead of global memory took the fused
 * backward pass at d_head 64 from 168 registers (three blocks an SM) to 192
 * (two) when ptxas was left to choose; with the bound it fits 168 again (8
 * bytes spilled).  At 128 a thread dK/dV at 64x64 on 4 warps spilled 288 to
 * 404 bytes (ptxas, CUDA 13): below 160 ptxas chooses. */
static void plan_ring_occupancy(FaCudaPlan *p) {
  bool vectors = false;
  for (int i = 0; i < p->ntiles; i++)
    vectors |= p->tiles[i]->format == FA_TILE_DENSE;
  if (!vectors || p->warp_specialised || p->target.sm != 90)
    return;
  int blocks = (int)(FA_SMEM_SM_SM90 / (p->smem.total + FA_SMEM_BLOCK_RESERVED));
  int regs = blocks > 0 ? FA_REGISTERS_SM / (blocks * p->threads) / 8 * 8 : 0;
  if (blocks >= 2 && regs >= 160) {
    p->min_blocks = blocks;
    p->ring_registers = regs > 255 ? 255 : regs;
  }
}

static void plan_kernel(Planner *pl) {
  FaCudaPlan *p = pl->p;
  for (int i = 0; i < p->npipelines; i++)
    plan_pipeline_steps(p, p->pipelines[i]);
  plan_schedule(pl);
  /* mbarriers: 8 bytes each, right after the tiles */
  for (int i = 0; i < p->nbarriers; i++)
    if (p->barriers[i].kind == FA_BARRIER_MBARRIER) {
      p->barriers[i].offset = p->smem.tiles + p->smem.barriers;
      p->smem.barriers += 8 * (size_t)p->barriers[i].slots;
    }
  if (p->schedule.dynamic) { /* the next program's two slots, beside the mbarriers */
    p->schedule.next_slots = p->smem.tiles + p->smem.barriers;
    p->smem.barriers += 8;
  }
  p->smem.barriers = (p->smem.barriers + 15) & ~(size_t)15;
  p->smem.scratch = scratch_bytes(p);
  p->smem.total = p->smem.tiles + p->smem.barriers + ((p->smem.scratch + 15) & ~(size_t)15) + p->smem.align_pad;
  p->roles[0] = (FaWarpRole){FA_ROLE_COMPUTE, 0, p->warps, 0};
  p->nroles = 1;
  p->threads = 32 * p->warps;
  if (p->warp_specialised) {
    /* one producer warpgroup after the compute warps.  Registers move to the
       consumers (setmaxnreg) only where the block has more than 256 threads:
       at 256 or fewer every thread may have 255 already */
    p->threads += 128;
    p->min_blocks = 1;
    int producer = 0, consumer = 0;
    if (p->threads > 256) {
      producer = 24;
      consumer = (FA_REGISTERS_SM - 128 * producer) / (32 * p->warps) / 8 * 8;
      if (consumer > 240)
        consumer = 240;
    }
    p->roles[0].max_registers = consumer;
    p->roles[1] = (FaWarpRole){FA_ROLE_PRODUCER, p->warps, 4, producer};
    p->nroles = 2;
  }
  plan_ring_occupancy(p);
  unsigned uses = 0;
  for (int i = 0; i < p->ntiles; i++)
    if (p->tiles[i]->fill == FA_FILL_REGISTERS)
      uses |= FA_BARRIER_FOR_TILES;
  for (int i = 0; i < p->npipelines; i++) {
    const FaPipelinePlan *pp = p->pipelines[i];
    for (int k = 0; k < pp->nprologue; k++)
      if (pp->prologue[k].kind == FA_STEP_BARRIER)
        uses |= FA_BARRIER_FOR_PIPELINE;
    for (int k = 0; k < pp->nhead; k++)
      if (pp->head[k].kind == FA_STEP_BARRIER)
        uses |= FA_BARRIER_FOR_PIPELINE;
  }
  if (p->smem.scratch)
    uses |= FA_BARRIER_FOR_SCRATCH;
  if (p->bulk_stores)
    uses |= FA_BARRIER_FOR_STORES;
  if (p->schedule.kind == FA_SCHEDULE_PERSISTENT) {
    /* the compute warps write shared memory through tiles filled from
       registers or by cp.async, staging tiles and scratch; with a producer
       warp that is all (a copy engine's tile owns its memory for the whole kernel, and
       the next program's copies wait for the compute threads to release
       them), so without those the warps need not meet between programs:
       a consumer warpgroup may start the next program while the other ends
       this one */
    bool writes = p->smem.scratch > 0 || !p->warp_specialised;
    /* (a staging tile is written only after its own drain and barrier) */
    for (int i = 0; i < p->ntiles; i++)
      writes |= p->tiles[i]->fill != FA_FILL_TMA && p->tiles[i]->fill != FA_FILL_STAGED;
    p->schedule.end_sync = writes;
    if (writes)
      uses |= FA_BARRIER_FOR_TILE_END;
    if (p->schedule.dynamic && !p->warp_specialised)
      uses |= FA_BARRIER_FOR_NEXT;
  }
  if (uses && p->nbarriers < FA_MAX_BARRIERS) {
    /* with a producer warpgroup the compute warps synchronise among
       themselves (named barrier 1, fa::sync_compute) */
    FaBarrierPlan *b = &p->barriers[p->nbarriers++];
    memset(b, 0, sizeof *b);
    b->kind = p->warp_specialised ? FA_BARRIER_NAMED : FA_BARRIER_CTA;
    b->id = p->warp_specialised ? 1 : 0;
    b->threads = 32 * p->warps;
    b->uses = uses;
  }
  for (int g = 0; p->npingpong && g < 2 && p->nbarriers < FA_MAX_BARRIERS; g++) {
    FaBarrierPlan *b = &p->barriers[p->nbarriers++];
    memset(b, 0, sizeof *b);
    b->kind = FA_BARRIER_NAMED;
    b->id = 2 + g;
    b->threads = 256;
    b->uses = FA_BARRIER_FOR_TURNS;
    b->warpgroup = g;
  }
}

/* ---- driver ------------------------------------------------------------------------------------------ */

static void *freeze(Planner *pl, PtrVec *v, int *n) {
  void **a = palloc(pl, (size_t)(v->len + 1) * sizeof *a);
  if (a && v->len)
    memcpy(a, v->items, (size_t)v->len * sizeof *a);
  *n = a ? v->len : 0;
  fa_ptrvec_free(v);
  return a;
}

static bool plan_setup(Planner *pl, const FaArgFact *facts, int nfacts) {
  FaCudaPlan *p = pl->p;
  p->nvalues = p->fn->next_value_id;
  size_t nv = (size_t)(p->nvalues > 0 ? p->nvalues : 1);
  p->values = palloc(pl, nv * sizeof *p->values);
  pl->fused_add = palloc(pl, nv * sizeof *pl->fused_add);
  pl->fused_dot = palloc(pl, nv * sizeof *pl->fused_dot);
  pl->fused_addend = palloc(pl, nv * sizeof *pl->fused_addend);
  p->facts = palloc(pl, (size_t)(nfacts + 1) * sizeof *p->facts);
  if (p->facts && nfacts > 0)
    memcpy(p->facts, facts, (size_t)nfacts * sizeof *facts);
  p->nfacts = p->facts ? nfacts : 0;
  PtrVec ops = {0};
  list_ops(p->fn->body, &ops);
  if (ops.len && !ops.items)
    pl->ok = false;
  p->order = (const IrOp **)freeze(pl, &ops, &p->nops);
  p->ops = palloc(pl, sizeof *p->ops);
  size_t cap = 16;
  while (cap < 2 * (size_t)p->nops + 2)
    cap *= 2;
  if (p->ops) {
    p->ops->slots = palloc(pl, cap * sizeof *p->ops->slots);
    p->ops->mask = cap - 1;
  }
  return pl->ok && p->ops && p->ops->slots;
}

bool fa_cuda_plan(FaCompiler *fc, const IrKernel *k, FaCudaTarget target, const FaArgFact *facts, int nfacts,
                  FaCudaPlan *out) {
  memset(out, 0, sizeof *out);
  if (!k || !k->device) {
    fa_error(&fc->diag, fa_noloc(), "internal compiler error: no kernel to emit");
    return false;
  }
  if (target.sm < 80) {
    fa_error(&fc->diag, k->device->loc, "the CUDA backend needs sm_80 or newer (got sm_%d)", target.sm);
    return false;
  }
  out->fc = fc;
  out->k = k;
  out->fn = k->device;
  out->target = target;
  out->stages = k->stages;
  out->pipeline = k->pipeline > FA_PIPELINE_DEFAULT && k->pipeline < FA_PIPELINE_COUNT ? (FaPipelineKind)k->pipeline
                                                                                        : FA_PIPELINE_CP_ASYNC;
  int errors_before = fc->diag.errors;
  if (!fa_assign_layouts(fc, k, &out->layouts)) {
    fa_cuda_plan_free(out);
    return false;
  }
  out->warps = out->layouts.warps;
  Planner pl = {0};
  pl.p = out;
  pl.fc = fc;
  pl.ok = true;
  if (plan_setup(&pl, facts, nfacts)) {
    plan_params(&pl);
    analyse_divisibility(&pl, out->fn->body);
    compute_liveness(&pl);
    collect_operands(&pl);
  }
  if (pl.ok)
    plan_pipelines(&pl, out->fn->body);
  if (pl.ok)
    plan_tma(&pl);
  if (pl.ok)
    plan_ring_vectors(&pl);
  if (pl.ok)
    plan_warp_specialisation(&pl);
  if (pl.ok)
    move_tma_waits(&pl);
  if (pl.ok) {
    plan_fused_adds(&pl, out->fn->body);
    allocate_tiles(&pl);
  }
  if (pl.ok)
    plan_ops(&pl);
  if (pl.ok)
    plan_unit_factors(&pl, out->fn->body);
  /* the plans of the ops are final from here on */
  out->products = (FaProductPlan **)freeze(&pl, &pl.products, &out->nproducts);
  out->accesses = (FaAccessPlan **)freeze(&pl, &pl.accesses, &out->naccesses);
  out->reduces = (FaReducePlan **)freeze(&pl, &pl.reduces, &out->nreduces);
  out->scans = (FaScanPlan **)freeze(&pl, &pl.scans, &out->nscans);
  out->prints = (FaPrintPlan **)freeze(&pl, &pl.prints, &out->nprints);
  if (pl.ok)
    plan_store_budget(&pl);
  if (pl.ok)
    plan_store_drains(&pl);
  if (pl.ok)
    plan_product_waits(&pl);
  if (pl.ok)
    plan_pingpong(&pl);
  if (pl.ok)
    plan_deferral(&pl);
  if (pl.ok)
    plan_rotation(&pl);
  if (pl.ok)
    plan_split_rings(&pl);
  if (pl.ok)
    plan_late_pack(&pl);
  if (pl.ok)
    plan_barriers(&pl);
  out->pipelines = (FaPipelinePlan **)freeze(&pl, &pl.pipelines, &out->npipelines);
  out->waits = (FaWgmmaWait **)freeze(&pl, &pl.waits, &out->nwaits);
  fa_ptrvec_free(&pl.tiles);
  if (pl.ok)
    plan_kernel(&pl);
  if (!pl.ok || fc->diag.errors != errors_before) {
    if (fc->diag.errors == errors_before)
      fa_error(&fc->diag, out->fn->loc, "out of memory in the CUDA backend");
    fa_cuda_plan_free(out);
    return false;
  }
  return true;
}

void fa_cuda_plan_free(FaCudaPlan *plan) {
  if (!plan)
    return;
  fa_layout_plan_free(&plan->layouts);
  plan->ops = NULL; /* the rest lives in the compiler's arena */
}

const FaProductPlan *fa_plan_product(const FaCudaPlan *plan, const IrOp *dot) {
  const FaOpPlan *o = op_find(plan->ops, dot);
  return o ? o->product : NULL;
}

const FaAccessPlan *fa_plan_access(const FaCudaPlan *plan, const IrOp *op) {
  const FaOpPlan *o = op_find(plan->ops, op);
  return o ? o->access : NULL;
}

const FaReducePlan *fa_plan_reduce(const FaCudaPlan *plan, const IrOp *op) {
  const FaOpPlan *o = op_find(plan->ops, op);
  return o ? o->reduce : NULL;
}

const FaPipelinePlan *fa_plan_pipeline(const FaCudaPlan *plan, const IrOp *loop) {
  const FaOpPlan *o = op_find(plan->ops, loop);
  return o ? o->pipeline : NULL;
}

const FaScanPlan *fa_plan_scan(const FaCudaPlan *plan, const IrOp *op) {
  const FaOpPlan *o = op_find(plan->ops, op);
  return o ? o->scan : NULL;
}

const FaPrintPlan *fa_plan_print(const FaCudaPlan *plan, const IrOp *op) {
  const FaOpPlan *o = op_find(plan->ops, op);
  return o ? o->print : NULL;
}
