/* cuda_plan_tma.c - whether a block-pointer load, store or atomic_add can be
 * a bulk tensor copy (TMA), and the copy's tensor map, boxes and coordinates
 * (see the TMA section of cuda_plan.h).
 *
 * The proof is symbolic.  Integer scalars are read as polynomials: sums of
 * terms coef * atom * atom ..., where an atom is a parameter of the kernel
 * (the same in the device function and in the host function that computes
 * the declared extents) or, in the device function, a scalar value that is
 * not a sum or product (program_id, a quotient, ...).  Integer casts that do
 * not narrow are seen through.  A block pointer's view is a tensor map's
 * when:
 *   - its base is pointer parameter P plus an offset;
 *   - P declares an extent [e0, ..., eR-1] (row-major: the stride of
 *     dimension e is the product of the dimensions after it);
 *   - every dimension d of the block pointer has the shape and stride of a
 *     distinct extent dimension, and the one of stride 1 (the tile's
 *     contiguous dimension) is the extent's innermost;
 *   - the extent dimensions no block dimension takes are the outermost ones
 *     (0 .. k-1), merged into one dimension of the map, and every term of
 *     the offset is a multiple of that merged dimension's stride: the
 *     quotient is the coordinate along it, whatever the program's way of
 *     writing it (z * H * N * D + h * N * D and (z * H + h) * N * D alike);
 * and the copy engine's constraints hold: P aligned to 16 bytes and every
 * stride of the map a multiple of 16 bytes (from the argument facts and
 * the divisibility of the parameters), boxes of at most 256 elements.
 * Matching shapes exactly (not only strides) makes the tensor's edges the
 * view's edges, so the copy engine fills what the block pointer would pad
 * and drops what a store's boundary check would.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "cuda_plan.h"

/* ---- polynomials -------------------------------------------------------------------------- */

static int cmp_int(const void *a, const void *b) {
  int x = *(const int *)a, y = *(const int *)b;
  return (x > y) - (x < y);
}

static bool same_atoms(const FaSymTerm *a, const FaSymTerm *b) {
  if (a->natoms != b->natoms)
    return false;
  for (int i = 0; i < a->natoms; i++)
    if (a->atoms[i] != b->atoms[i])
      return false;
  return true;
}

/* Adds a term, combining it with one of the same atoms; false when full. */
static bool poly_add_term(FaSymPoly *p, const FaSymTerm *t) {
  if (t->coef == 0)
    return true;
  for (int i = 0; i < p->nterms; i++)
    if (same_atoms(&p->terms[i], t)) {
      p->terms[i].coef += t->coef;
      if (p->terms[i].coef == 0)
        p->terms[i] = p->terms[--p->nterms];
      return true;
    }
  if (p->nterms >= FA_SYM_MAX_TERMS)
    return false;
  p->terms[p->nterms++] = *t;
  return true;
}

static bool poly_const(FaSymPoly *p, long long c) {
  memset(p, 0, sizeof *p);
  FaSymTerm t = {c, 0, {0}};
  return poly_add_term(p, &t);
}

static bool poly_atom(FaSymPoly *p, int atom) {
  memset(p, 0, sizeof *p);
  FaSymTerm t = {1, 1, {atom}};
  return poly_add_term(p, &t);
}

static bool poly_sum(FaSymPoly *out, const FaSymPoly *a, const FaSymPoly *b, long long sign) {
  FaSymPoly r = *a;
  for (int i = 0; i < b->nterms; i++) {
    FaSymTerm t = b->terms[i];
    t.coef *= sign;
    if (!poly_add_term(&r, &t))
      return false;
  }
  *out = r;
  return true;
}

static bool poly_product(FaSymPoly *out, const FaSymPoly *a, const FaSymPoly *b) {
  FaSymPoly r;
  memset(&r, 0, sizeof r);
  for (int i = 0; i < a->nterms; i++)
    for (int j = 0; j < b->nterms; j++) {
      const FaSymTerm *x = &a->terms[i], *y = &b->terms[j];
      if (x->natoms + y->natoms > FA_SYM_MAX_ATOMS)
        return false;
      FaSymTerm t;
      t.coef = x->coef * y->coef;
      t.natoms = x->natoms + y->natoms;
      memcpy(t.atoms, x->atoms, (size_t)x->natoms * sizeof *t.atoms);
      memcpy(t.atoms + x->natoms, y->atoms, (size_t)y->natoms * sizeof *t.atoms);
      qsort(t.atoms, (size_t)t.natoms, sizeof *t.atoms, cmp_int);
      if (!poly_add_term(&r, &t))
        return false;
    }
  *out = r;
  return true;
}

static bool poly_equal(const FaSymPoly *a, const FaSymPoly *b) {
  FaSymPoly d;
  return poly_sum(&d, a, b, -1) && d.nterms == 0;
}

static int param_index(const IrFunction *fn, const IrValue *v) {
  for (int i = 0; i < fn->nparams; i++)
    if (fn->params[i].value == v)
      return i;
  return -1;
}

/* The polynomial of integer scalar v of function fn; in a host function
 * (device == false) only parameters may be atoms.  False when it has no
 * polynomial form within the bounds. */
static bool sym_of(const IrFunction *fn, const IrValue *v, bool device, FaSymPoly *out, int depth) {
  if (!v || depth > 48 || v->type.rank != 0 || !fa_dtype_is_int(v->type.dtype) || v->type.dtype == DT_I1)
    return false;
  int pi = param_index(fn, v);
  if (pi >= 0)
    return poly_atom(out, pi);
  const IrOp *op = v->def;
  if (op && op->kind == IR_CONST)
    return poly_const(out, op->ival);
  if (op && op->kind == IR_CAST && op->noperands == 1) {
    const IrValue *x = op->operands[0];
    /* widening (or same-width) integer casts keep the value */
    if (fa_dtype_is_int(x->type.dtype) && x->type.dtype != DT_I1 && x->type.dtype != DT_U32 &&
        fa_dtype_bits(v->type.dtype) >= fa_dtype_bits(x->type.dtype))
      return sym_of(fn, x, device, out, depth + 1);
  }
  if (op && op->kind == IR_BINARY && (op->sub == BIN_ADD || op->sub == BIN_SUB || op->sub == BIN_MUL)) {
    FaSymPoly a, b;
    if (sym_of(fn, op->operands[0], device, &a, depth + 1) && sym_of(fn, op->operands[1], device, &b, depth + 1)) {
      if (op->sub == BIN_MUL)
        return poly_product(out, &a, &b);
      return poly_sum(out, &a, &b, op->sub == BIN_SUB ? -1 : 1);
    }
  }
  if (!device || v->region)
    return false; /* host values and loop-carried scalars are no atoms */
  return poly_atom(out, FA_SYM_VALUE + v->id);
}

/* q = t / d for single terms: d's coefficient divides t's and d's atoms are
 * among t's. */
static bool term_divide(const FaSymTerm *t, const FaSymTerm *d, FaSymTerm *q) {
  if (d->coef == 0 || t->coef % d->coef != 0)
    return false;
  q->coef = t->coef / d->coef;
  q->natoms = 0;
  int j = 0;
  for (int i = 0; i < t->natoms; i++) {
    if (j < d->natoms && t->atoms[i] == d->atoms[j]) {
      j++;
      continue;
    }
    if (j < d->natoms && t->atoms[i] > d->atoms[j])
      return false;
    q->atoms[q->natoms++] = t->atoms[i];
  }
  return j == d->natoms;
}

/* The power-of-two divisor (log2) every value of the polynomial has, from
 * what the plan knows of the parameters and scalars. */
static int poly_div_log2(const FaCudaPlan *p, const IrFunction *dev, const FaSymPoly *poly) {
  int best = FA_DIV_MAX;
  for (int i = 0; i < poly->nterms; i++) {
    const FaSymTerm *t = &poly->terms[i];
    long long c = t->coef < 0 ? -t->coef : t->coef;
    int d = 0;
    while (c > 0 && !(c & 1) && d < FA_DIV_MAX) {
      c >>= 1;
      d++;
    }
    for (int a = 0; a < t->natoms; a++) {
      int atom = t->atoms[a];
      const IrValue *v = NULL;
      if (atom < FA_SYM_VALUE) {
        if (atom < dev->nparams)
          v = dev->params[atom].value;
      } else {
        int id = atom - FA_SYM_VALUE;
        d += id >= 0 && id < p->nvalues ? p->values[id].div_log2 : 0;
        continue;
      }
      d += v ? p->values[v->id].div_log2 : 0;
    }
    if (d < best)
      best = d;
  }
  return best > FA_DIV_MAX ? FA_DIV_MAX : best;
}

/* ---- the view of a block pointer ---------------------------------------------------------- */

/* The extent dimensions of pointer parameter `param`, from the host function
 * that computes them (its results list every declared extent in parameter
 * order). */
static int extent_polys(const IrKernel *k, int param, FaSymPoly *dims) {
  const IrFunction *dev = k->device, *ext = k->extents;
  if (!ext || param < 0 || param >= dev->nparams || dev->params[param].extent_rank <= 0)
    return 0;
  const IrOp *ret = ext->body ? ext->body->last : NULL;
  if (!ret || ret->kind != IR_RETURN)
    return 0;
  int at = 0;
  for (int i = 0; i < param; i++)
    at += dev->params[i].extent_rank;
  int rank = dev->params[param].extent_rank;
  if (rank > FA_MAX_RANK || at + rank > ret->noperands)
    return 0;
  for (int e = 0; e < rank; e++)
    if (!sym_of(ext, ret->operands[at + e], false, &dims[e], 0))
      return -1;
  return rank;
}

/* base = P + offset (through any number of ptr_adds). */
static int base_param(const IrFunction *dev, const IrValue *base, FaSymPoly *offset) {
  poly_const(offset, 0);
  for (int depth = 0; base && depth < 16; depth++) {
    int pi = param_index(dev, base);
    if (pi >= 0)
      return base->type.dtype == DT_PTR ? pi : -1;
    const IrOp *op = base->def;
    if (!op || op->kind != IR_PTR_ADD || base->type.rank != 0)
      return -1;
    FaSymPoly term;
    if (!sym_of(dev, op->operands[1], true, &term, 0) || !poly_sum(offset, offset, &term, 1))
      return -1;
    base = op->operands[0];
  }
  return -1;
}

/* Whether region r is `inner` or encloses it. */
static bool region_encloses(const IrRegion *r, const IrRegion *inner) {
  for (const IrRegion *x = inner; x; x = x->parent_op ? x->parent_op->parent : NULL)
    if (x == r)
      return true;
  return false;
}

/* Every scalar atom of the coordinate is defined where code at `issue` can
 * see it (a region enclosing it). */
static bool atoms_visible(const FaCudaPlan *p, const FaSymPoly *c, const IrRegion *issue) {
  for (int i = 0; i < c->nterms; i++)
    for (int a = 0; a < c->terms[i].natoms; a++) {
      int atom = c->terms[i].atoms[a];
      if (atom < FA_SYM_VALUE)
        continue;
      const IrValue *v = NULL;
      for (int n = 0; n < p->nops && !v; n++)
        for (int r = 0; r < p->order[n]->nresults; r++)
          if (p->order[n]->results[r]->id == atom - FA_SYM_VALUE)
            v = p->order[n]->results[r];
      if (!v || !v->def || !region_encloses(v->def->parent, issue))
        return false;
    }
  return true;
}

/* The block a block-pointer access moves: a load's result, a store's (or
 * atomic_add's) value. */
/* ---- non-negative offsets (bulk stores) ----
 * A value is non-negative when it is built from non-negative constants,
 * program ids and counts by additions, products, maxima, minima, divisions,
 * remainders, widening casts and selections of such; a loop's carried value
 * (or result) when its initial value is and its next value is, given that
 * it is (`assumed`, the loop arguments taken so far). */
enum { NONNEG_DEPTH = 64, NONNEG_ASSUMED = 16 };
typedef struct NonNeg {
  const IrValue *assumed[NONNEG_ASSUMED];
  int nassumed;
  int depth;
  const IrFunction *fn;
  unsigned long long sizes;  /* integer parameters that are dimensions of the stored tensor's extent: the
                                runtime encodes its tensor map only with positive dimensions */
} NonNeg;

static bool nonneg(NonNeg *nn, const IrValue *v);

static const IrValue *yield_operand(const IrRegion *r, int i) {
  const IrOp *y = r ? r->last : NULL;
  return y && y->kind == IR_YIELD && i >= 0 && i < y->noperands ? y->operands[i] : NULL;
}

/* Carried value i of loop `f` (its argument `arg`, or NULL for its result). */
static bool carried_nonneg(NonNeg *nn, const IrOp *f, int i, const IrValue *arg) {
  if (f->kind != IR_FOR || 3 + i >= f->noperands || !nonneg(nn, f->operands[3 + i]))
    return false;
  const IrRegion *body = f->regions[0];
  if (!arg)
    arg = 1 + i < body->nargs ? body->args[1 + i] : NULL;
  for (int a = 0; a < nn->nassumed; a++)
    if (nn->assumed[a] == arg)
      return true;
  if (!arg || nn->nassumed == NONNEG_ASSUMED)
    return false;
  nn->assumed[nn->nassumed++] = arg;
  bool ok = nonneg(nn, yield_operand(body, i));
  nn->nassumed--;
  return ok;
}

static bool region_arg_nonneg(NonNeg *nn, const IrValue *v) {
  const IrOp *f = v->region->parent_op;
  if (!f || f->kind != IR_FOR)
    return false;
  for (int a = 0; a < nn->nassumed; a++)
    if (nn->assumed[a] == v)
      return true;
  if (v == v->region->args[0]) /* the induction variable: from lb by steps */
    return nonneg(nn, f->operands[0]) && nonneg(nn, f->operands[2]);
  for (int j = 1; j < v->region->nargs; j++)
    if (v->region->args[j] == v)
      return carried_nonneg(nn, f, j - 1, v);
  return false;
}

static bool const_int(const IrValue *v, long long *c) {
  if (!v || !v->def || v->def->kind != IR_CONST || !fa_dtype_is_int(v->type.dtype))
    return false;
  *c = v->def->ival;
  return true;
}

/* (x + a) - b with constants a >= b >= 0 and x non-negative: cdiv's
 * (n + d - 1) / d. */
static bool sub_nonneg(NonNeg *nn, const IrOp *op) {
  long long a, b;
  const IrOp *add = op->operands[0]->def;
  if (!const_int(op->operands[1], &b) || b < 0 || !add || add->kind != IR_BINARY || add->sub != BIN_ADD)
    return false;
  for (int i = 0; i < 2; i++)
    if (const_int(add->operands[i], &a) && a >= b)
      return nonneg(nn, add->operands[1 - i]);
  return false;
}

static bool op_nonneg(NonNeg *nn, const IrOp *op, const IrValue *v) {
  int rank = op->kind == IR_MAKE_BLOCK_PTR ? (op->noperands - 1) / 3 : op->noperands - 1;
  switch (op->kind) {
  case IR_CONST: return fa_dtype_is_int(v->type.dtype) && op->ival >= 0;
  case IR_PROGRAM_ID:
  case IR_NUM_PROGRAMS: return true;
  case IR_CAST:
    return fa_dtype_is_int(v->type.dtype) && fa_dtype_is_int(op->operands[0]->type.dtype) &&
           fa_dtype_bits(v->type.dtype) >= fa_dtype_bits(op->operands[0]->type.dtype) && nonneg(nn, op->operands[0]);
  case IR_SELECT: return nonneg(nn, op->operands[1]) && nonneg(nn, op->operands[2]);
  case IR_BINARY:
    switch (op->sub) {
    case BIN_ADD:
    case BIN_MUL:
    case BIN_MIN:
    case BIN_DIV: return nonneg(nn, op->operands[0]) && nonneg(nn, op->operands[1]);
    case BIN_MOD: return nonneg(nn, op->operands[0]); /* a remainder has the dividend's sign */
    case BIN_MAX: return nonneg(nn, op->operands[0]) || nonneg(nn, op->operands[1]);
    case BIN_SHR: return nonneg(nn, op->operands[0]);
    case BIN_SUB: return sub_nonneg(nn, op);
    default: return false;
    }
  case IR_MAKE_BLOCK_PTR:
    for (int d = 0; d < rank; d++)
      if (!nonneg(nn, op->operands[1 + 2 * rank + d]))
        return false;
    return true;
  case IR_ADVANCE:
    for (int d = 1; d < op->noperands; d++)
      if (!nonneg(nn, op->operands[d]))
        return false;
    return nonneg(nn, op->operands[0]);
  case IR_FOR:
    for (int i = 0; i < op->nresults; i++)
      if (op->results[i] == v)
        return carried_nonneg(nn, op, i, NULL);
    return false;
  case IR_IF:
    for (int i = 0; i < op->nresults; i++)
      if (op->results[i] == v) {
        for (int r = 0; r < op->nregions; r++)
          if (!nonneg(nn, yield_operand(op->regions[r], i)))
            return false;
        return op->nregions == 2;
      }
    return false;
  default: return false;
  }
}

static bool nonneg(NonNeg *nn, const IrValue *v) {
  if (!v || nn->depth > NONNEG_DEPTH)
    return false;
  int pi = param_index(nn->fn, v);
  if (pi >= 0)
    return pi < 64 && (nn->sizes >> pi & 1);
  nn->depth++;
  bool ok = v->def ? op_nonneg(nn, v->def, v) : v->region ? region_arg_nonneg(nn, v) : false;
  nn->depth--;
  return ok;
}

bool fa_plan_blockptr_nonneg(const FaCudaPlan *p, const IrValue *bp, int param) {
  NonNeg nn = {{0}, 0, 0, p->fn, 0};
  FaSymPoly ext[FA_MAX_RANK];
  int rank = extent_polys(p->k, param, ext);
  for (int e = 0; e < rank; e++)
    if (ext[e].nterms == 1 && ext[e].terms[0].coef == 1 && ext[e].terms[0].natoms == 1 &&
        ext[e].terms[0].atoms[0] < 64)
      nn.sizes |= 1ull << ext[e].terms[0].atoms[0];
  return nonneg(&nn, bp);
}

static const IrValue *moved_value(const IrOp *op) {
  return op->kind == IR_LOAD_BLOCK ? op->results[0] : op->operands[1];
}

FaTmaRefusal fa_plan_tma_view(const FaCudaPlan *p, const IrOp *access, const FaTilePlan *t, const IrRegion *issue,
                              FaTensorMapPlan *map, FaTmaPlan *out, int *dim) {
  const IrFunction *dev = p->fn;
  const IrValue *bp = access->operands[0], *x = moved_value(access);
  memset(map, 0, sizeof *map);
  memset(out, 0, sizeof *out);
  *dim = -1;
  const IrOp *mk = fa_blockptr_origin(bp);
  int rank = bp->type.rank;
  bool dense = t->format == FA_TILE_DENSE; /* a ring vector: one row, no swizzle */
  if (!mk || mk->noperands != 1 + 3 * rank || x->type.rank != rank || rank != (dense ? 1 : 2))
    return FA_TMA_NO_ORIGIN;
  FaSymPoly offset;
  int param = base_param(dev, mk->operands[0], &offset);
  if (param < 0)
    return FA_TMA_NO_PARAM;
  FaSymPoly ext[FA_MAX_RANK];
  int erank = extent_polys(p->k, param, ext);
  if (erank < rank)
    return FA_TMA_NO_EXTENT;
  /* row-major strides of the extent */
  FaSymPoly stride[FA_MAX_RANK];
  poly_const(&stride[erank - 1], 1);
  for (int e = erank - 2; e >= 0; e--)
    if (!poly_product(&stride[e], &stride[e + 1], &ext[e + 1]))
      return FA_TMA_NO_EXTENT;
  /* each block dimension is an extent dimension */
  int taken[FA_MAX_RANK], of_block[FA_MAX_RANK];
  for (int e = 0; e < erank; e++)
    taken[e] = -1;
  for (int d = 0; d < rank; d++) {
    FaSymPoly shape, str;
    of_block[d] = -1;
    if (sym_of(dev, mk->operands[1 + d], true, &shape, 0) && sym_of(dev, mk->operands[1 + rank + d], true, &str, 0))
      for (int e = erank - 1; e >= 0 && of_block[d] < 0; e--)
        if (taken[e] < 0 && poly_equal(&str, &stride[e]) && poly_equal(&shape, &ext[e])) {
          taken[e] = d;
          of_block[d] = e;
        }
    if (of_block[d] < 0) {
      *dim = d;
      return FA_TMA_SHAPE;
    }
  }
  if (taken[erank - 1] != t->inner)
    return FA_TMA_INNER;
  /* the others are the outermost dimensions, merged; the offset is whole
     coordinates along them */
  int nouter = 0;
  while (nouter < erank && taken[nouter] < 0)
    nouter++;
  for (int e = nouter; e < erank; e++)
    if (taken[e] < 0)
      return FA_TMA_OFFSET;
  FaSymPoly coord;
  poly_const(&coord, 0);
  if (nouter == 0) {
    if (offset.nterms)
      return FA_TMA_OFFSET;
  } else {
    const FaSymPoly *s = &stride[nouter - 1];
    if (s->nterms != 1)
      return FA_TMA_OFFSET;
    for (int i = 0; i < offset.nterms; i++) {
      FaSymTerm q;
      if (!term_divide(&offset.terms[i], &s->terms[0], &q) || !poly_add_term(&coord, &q))
        return FA_TMA_OFFSET;
    }
    if (!atoms_visible(p, &coord, issue))
      return FA_TMA_SCOPE;
  }
  /* the copy engine's constraints */
  int size = fa_dtype_size(x->type.dtype);
  int need = 0; /* log2 of the elements in 16 bytes */
  while ((size << need) < 16)
    need++;
  if (p->values[dev->params[param].value->id].div_log2 < need)
    return FA_TMA_BASE_ALIGN;
  for (int e = 0; e < erank - 1; e++)
    if (e >= nouter - 1 && poly_div_log2(p, dev, &stride[e]) < need) {
      *dim = e;
      return FA_TMA_STRIDE_ALIGN;
    }
  /* the map: [merged outer dims,] then the block's dims in the extent's order */
  int m = 0;
  if (nouter > 0) {
    map->dims_end[m] = nouter;
    map->box[m] = 1;
    out->block_dim[m] = -1;
    out->outer = m;
    m++;
  } else {
    out->outer = -1;
  }
  int sw = t->swizzle, rows = t->rows;
  out->inner_dim = t->inner;
  out->panel_elems = dense ? (int)x->type.shape[t->inner] : sw / size;
  out->panels = x->type.shape[t->inner] / out->panel_elems;
  for (int e = nouter; e < erank; e++) {
    int d = taken[e];
    map->dims_end[m] = e + 1;
    map->box[m] = d == t->inner ? out->panel_elems : x->type.shape[d];
    out->block_dim[m] = d;
    if (map->box[m] > 256) {
      *dim = d;
      return FA_TMA_BOX;
    }
    m++;
  }
  if (out->panels < 1 || (dense ? out->panel_elems * size % 16 != 0 : rows != x->type.shape[1 - t->inner]))
    return FA_TMA_BOX; /* (without a swizzle the box's rows are whole 16-byte units) */
  map->rank = m;
  map->param = param;
  map->swizzle = sw;
  map->nan_fill = access->kind == IR_LOAD_BLOCK && access->padding == PAD_NAN;
  map->store = access->kind != IR_LOAD_BLOCK;
  out->reduce = access->kind == IR_ATOMIC_ADD_BLOCK;
  out->outer_coord = coord;
  out->panel_bytes = dense ? (size_t)out->panel_elems * (size_t)size : (size_t)rows * (size_t)sw;
  out->bytes = out->panel_bytes * (size_t)out->panels;
  return FA_TMA_OK;
}

/* The pointer parameter a pointer (a scalar, a block of pointers or a block
 * pointer) is computed from, or -1 when that cannot be told. */
int fa_plan_pointer_param(const IrFunction *fn, const IrValue *v) {
  for (int depth = 0; v && depth < 64; depth++) {
    int pi = param_index(fn, v);
    if (pi >= 0)
      return v->type.dtype == DT_PTR ? pi : -1;
    if (v->type.dtype == DT_BLOCKPTR) {
      const IrOp *mk = fa_blockptr_origin(v);
      v = mk ? mk->operands[0] : NULL;
      continue;
    }
    const IrOp *op = v->def;
    if (!op)
      return -1;
    switch (op->kind) {
    case IR_PTR_ADD:
    case IR_SPLAT:
    case IR_BROADCAST:
    case IR_EXPAND_DIMS:
    case IR_RESHAPE:
    case IR_TRANS: v = op->operands[0]; break;
    default: return -1;
    }
  }
  return -1;
}

const char *fa_tma_refusal_text(FaTmaRefusal r) {
  switch (r) {
  case FA_TMA_OK: return "a bulk copy";
  case FA_TMA_NOT_CHOSEN: return "the pipeline is cp_async";
  case FA_TMA_TARGET: return "needs sm_90a";
  case FA_TMA_NOT_TILE: return "not only a product's swizzled tile";
  case FA_TMA_IN_LOOP: return "in a loop without being issued ahead";
  case FA_TMA_NO_ORIGIN: return "its make_block_ptr cannot be told";
  case FA_TMA_NO_PARAM: return "its base is not a pointer parameter plus an offset";
  case FA_TMA_NO_EXTENT: return "the pointer declares no extent in terms of the parameters";
  case FA_TMA_SHAPE: return "a dimension is not one of the extent's (shape and stride)";
  case FA_TMA_INNER: return "the extent's innermost dimension is not the tile's contiguous one";
  case FA_TMA_OFFSET: return "the base offset is not whole coordinates along the extent's outer dimensions";
  case FA_TMA_SCOPE: return "a coordinate uses a value the issuing code cannot see";
  case FA_TMA_STRIDE_ALIGN: return "a stride may not be a multiple of 16 bytes";
  case FA_TMA_BASE_ALIGN: return "the pointer may not be 16-byte aligned";
  case FA_TMA_BOX: return "a box dimension is larger than 256";
  case FA_TMA_PIPELINE: return "another load of its pipeline is not a bulk copy";
  case FA_TMA_LIMIT: return "too many tensor maps or barriers";
  case FA_TMA_RANK: return "not a 2-D block";
  case FA_TMA_REDUCE_DTYPE: return "the copy engine's reduce-add is used for f32, f16 and bf16 only";
  case FA_TMA_STAGING:
    return "no swizzled staging tile for it (rows of 32, 64 or a multiple of 128 bytes in groups of 8; elements "
           "f16, bf16, f32, f64, i16, i32 or i64)";
  case FA_TMA_SMEM: return "its staging tile would not fit in shared memory (227 KB)";
  case FA_TMA_NEGATIVE: return "a block offset may be negative (the copy engine faults on stores there)";
  case FA_TMA_ALIASED:
    return "the kernel accesses the tensor elsewhere too (a bulk store's writes land asynchronously)";
  }
  return "?";
}
