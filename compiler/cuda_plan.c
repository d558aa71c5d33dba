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
 *   6. additions fused into products;
 *   7. tile offsets (tiles with disjoint lifetimes share memory);
 *   8. products: instruction and operand sources;
 *   9. loads and stores: method and vector width;
 *  10. reductions, scans and prints; the synchronisation steps of each
 *      pipeline; the shared memory budget; warp roles, barriers and the
 *      schedule.
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
  PtrVec tiles, accesses, pipelines, products, reduces, scans, prints;
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
  int first, count;
  fa_layout_dim_bits(l, d_in, &first, &count);
  int run = 0;
  while (run < l->nreg && run < count && l->reg[run] == first + run)
    run++;
  int v = 1 << run;
  while (v * size > 16)
    v /= 2;
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
        request_tile(pl, tile_source(pl, op->operands[i], &flip));
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

static void plan_pipeline_load(Planner *pl, const IrOp *loop, const IrOp *op) {
  const IrRegion *body = loop->regions[0];
  const IrValue *x = op->results[0], *bp = op->operands[0];
  FaValuePlan *vp = val(pl, x);
  if (!vp->live || !vp->tile || vp->nontile_uses > 0 || op->padding == PAD_NAN || x->type.rank != 2 || !x->layout)
    return;
  int j = -1;
  for (int a = 1; a < body->nargs; a++)
    if (body->args[a] == bp)
      j = a;
  const IrOp *y = body->last;
  if (j < 0 || !y || y->kind != IR_YIELD || j - 1 >= y->noperands)
    return;
  const IrValue *next = y->operands[j - 1];
  const IrOp *adv = next->def;
  if (!adv || adv->kind != IR_ADVANCE || adv->operands[0] != bp)
    return;
  for (int d = 1; d < adv->noperands; d++) {
    const IrValue *delta = adv->operands[d];
    if (!defined_outside(delta, loop) && !(delta->def && delta->def->kind == IR_CONST))
      return;
  }
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
    }
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
    for (bool moved = true; moved;) {
      moved = false;
      for (int j = 0; j < i; j++) {
        const FaTilePlan *o = tiles[j];
        size_t osize = o->buf_bytes * (size_t)o->nbufs;
        bool overlap_time = !(o->live_end < t->live_start || t->live_end < o->live_start);
        bool overlap_space = off < o->offset + osize && o->offset < off + size;
        if (overlap_time && overlap_space) {
          off = (o->offset + osize + align - 1) & ~(align - 1);
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
}

/* ---- 8. products ---------------------------------------------------------------------------------------
 * On sm_90a a product of f16/bf16 blocks runs as warpgroup instructions
 * wgmma.m64nNk16 when its accumulator layout is the mma.sync one with every
 * warp along M (wm = warps, a multiple of 4, wn = 1): then, for each of the
 * warp's 16-row blocks mt, the four warps of warpgroup g hold rows (mt * wm
 * + 4g) * 16 .. + 63, and each thread's accumulator registers of that block
 * are, in order, wgmma's for m64nN.  B is read from its swizzled tile
 * through a shared-memory descriptor; A from registers (the mma.sync A
 * fragments, which are wgmma's too) or from its swizzled tile.  Everything
 * else (other warp splits, padded tiles) keeps mma.sync, with the same
 * layouts. */

static bool wgmma_fits(const FaCudaPlan *p, const IrOp *op, const FaProductPlan *pp) {
  const FaDotPlan *dp = op->aux;
  int warps = p->warps, N = pp->N, K = pp->K;
  return has_wgmma(p) && warps % 4 == 0 && dp->wm == warps && dp->wn == 1 && N % 8 == 0 && N <= 256 &&
         K % 16 == 0 && pp->b_tile && pp->b_tile->format == FA_TILE_SWIZZLED &&
         (pp->a_src != FA_OPND_TILE || (pp->a_tile && pp->a_tile->format == FA_TILE_SWIZZLED));
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
    pp->instr = wgmma_fits(pl->p, op, pp) ? FA_INSTR_WGMMA : FA_INSTR_MMA_SYNC;
    pp->wait = FA_WAIT_AT_ONCE;
    /* tiles read through the async proxy are fenced after every write */
    if (pp->instr == FA_INSTR_WGMMA)
      pl->p->async_proxy_reads = true;
  }
  op_insert(pl->p->ops, op)->product = pp;
  fa_ptrvec_push(&pl->products, pp);
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

static void plan_access(Planner *pl, const IrOp *op) {
  FaOpPlan *o = op_insert(pl->p->ops, op);
  if (o->access) { /* a pipelined load */
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
    break;
  case IR_STORE_BLOCK:
    ap->method = FA_ACCESS_VECTOR;
    ap->layout = op->aux;
    if (ap->layout)
      ap->vec = block_vector_width(pl, op->operands[0], ap->layout, op->boundary, &ap->facts);
    break;
  case IR_ATOMIC_ADD_BLOCK: plan_reduce_block(pl, op, ap); break;
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
 *   after the loop: wait for everything. */
static void push_step(FaPipeStep *steps, int *n, FaPipeStepKind kind, int arg, FaStepWhy why) {
  if (*n < FA_PIPE_MAX_STEPS)
    steps[(*n)++] = (FaPipeStep){kind, arg, why};
}

static void plan_pipeline_steps(FaCudaPlan *p, FaPipelinePlan *pp) {
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

static void plan_kernel(Planner *pl) {
  FaCudaPlan *p = pl->p;
  for (int i = 0; i < p->npipelines; i++)
    plan_pipeline_steps(p, p->pipelines[i]);
  p->smem.scratch = scratch_bytes(p);
  p->smem.total = p->smem.tiles + ((p->smem.scratch + 15) & ~(size_t)15) + p->smem.align_pad;
  p->roles[0] = (FaWarpRole){FA_ROLE_COMPUTE, 0, p->warps, 0};
  p->nroles = 1;
  unsigned uses = 0;
  for (int i = 0; i < p->ntiles; i++)
    if (p->tiles[i]->fill == FA_FILL_REGISTERS)
      uses |= FA_BARRIER_FOR_TILES;
  if (p->npipelines)
    uses |= FA_BARRIER_FOR_PIPELINE;
  if (p->smem.scratch)
    uses |= FA_BARRIER_FOR_SCRATCH;
  if (uses) {
    p->barriers[0] = (FaBarrierPlan){FA_BARRIER_CTA, 0, 32 * p->warps, uses};
    p->nbarriers = 1;
  }
  p->schedule.kind = FA_SCHEDULE_GRID;
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
  if (pl.ok) {
    plan_fused_adds(&pl, out->fn->body);
    allocate_tiles(&pl);
  }
  if (pl.ok)
    plan_ops(&pl);
  out->pipelines = (FaPipelinePlan **)freeze(&pl, &pl.pipelines, &out->npipelines);
  out->products = (FaProductPlan **)freeze(&pl, &pl.products, &out->nproducts);
  out->accesses = (FaAccessPlan **)freeze(&pl, &pl.accesses, &out->naccesses);
  out->reduces = (FaReducePlan **)freeze(&pl, &pl.reduces, &out->nreduces);
  out->scans = (FaScanPlan **)freeze(&pl, &pl.scans, &out->nscans);
  out->prints = (FaPrintPlan **)freeze(&pl, &pl.prints, &out->nprints);
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
