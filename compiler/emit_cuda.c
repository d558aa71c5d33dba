/* emit_cuda.c - the CUDA C++ emitter: one specialised IrKernel becomes one
 * self-contained translation unit for NVRTC.
 *
 * Shape of the output (see docs/performance.md):
 *   - a header comment naming the kernel, target and configuration;
 *   - `#include "fadsl_device.cuh"` (the embedded device library) and one
 *     `using fa_LN = fa::Layout<...>` per layout that the kernel uses, with
 *     a comment describing it;
 *   - the `extern "C" __global__ __launch_bounds__(32 * warps)` kernel, whose
 *     body follows the tile IR op by op, each preceded by the source line it
 *     comes from.  Scalars are C variables named after the source variables;
 *     a block value is a register array of compile-time size (its layout's
 *     registers per thread), written by fully unrolled loops over the
 *     thread's elements; for and if become C loops and ifs over those arrays.
 *   - constants, splats and aranges are not stored: each use computes them in
 *     the layout it needs (an arange element is its coordinate in that
 *     layout);
 *   - where a value's layout differs from what a use needs, a converted copy
 *     is made once, right after the value's definition.
 * Shared memory is one dynamic buffer; every library routine that needs
 * scratch space (layout conversions, reductions across warps, FMA dots)
 * finds it free on entry and leaves it free, so they all share offset 0 and
 * the kernel asks for the largest.
 */
#include "config.h"

#include <ctype.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda.h"
#include "interp.h"
#include "layout.h"

/* ---- per-value bookkeeping ---------------------------------------------------------------- */

typedef struct Conversion {
  const FaLayout *layout;
  const char *name;
} Conversion;

typedef struct ValInfo {
  const char *name;         /* C identifier */
  Conversion *convs;        /* converted copies to make after the definition */
  int nconvs;
  int div_log2;             /* integers and pointers: a known power-of-two divisor (elements) */
  /* a shared-memory copy ("tile") for tensor-core products, written after the definition */
  bool staged;
  int tile_inner;           /* the dimension stored contiguously */
  int tile_pitch;           /* bytes per row (swizzled: the row's bytes) */
  int tile_sw;              /* 0: padded rows; else the swizzle width in bytes (SwzTile) */
  int stage_vec;            /* elements per store when writing it */
  int tile_rows;            /* rows (the other dimension) */
  size_t tile_offset;       /* in the dynamic shared memory */
  int nontile_uses;         /* live uses other than products reading the tile */
  /* a tile filled by cp.async, `pipe_stages` iterations of its loop ahead */
  int pipe_stages;          /* 0: not pipelined */
  size_t tile_buf_bytes;    /* one buffer of the pipeline */
  const char *pipe_counter; /* the loop's iteration counter */
  int pipe_vec;             /* elements per cp.async */
  const IrOp *pipe_loop;    /* the loop */
  int pipe_arg;             /* the block pointer: argument pipe_arg of the loop's body */
  const IrOp *pipe_advance; /* its update at the end of each iteration */
  /* x = a + dot(...) computed as one product accumulating onto a */
  const IrOp *fused_add;    /* on the product's result: the add that computes it */
  const IrOp *fused_dot;    /* on the add's result: the product */
  int fused_addend;         /* on the add's result: the operand (0 or 1) that is not the product */
} ValInfo;

typedef struct Emitter {
  FaCompiler *fc;
  const IrKernel *k;
  const IrFunction *fn;
  FaCudaTarget target;
  FaLayoutPlan plan;
  ValInfo *vi;              /* by value id */
  int nvalues;
  PtrVec names;             /* identifiers in use */
  StrBuf body;
  int indent;
  bool *live;               /* by value id: some live op uses it */
  bool *layout_used;        /* by layout id: the type alias is needed */
  bool *toff_used;          /* by layout id: the thread offset variable is needed */
  int nlayouts_alloc;
  size_t scratch_bytes;     /* shared memory for library scratch */
  size_t tile_bytes;        /* shared memory for tiles, below the scratch */
  bool swizzled_tiles;      /* some tile is swizzled: the tiles start at a 1024-byte boundary */
  bool async_reads;         /* some product reads its tiles with wgmma (the async proxy) */
  StrBuf helpers;           /* device functions written for this kernel (wgmma products) */
  int nhelpers;
  int last_line;            /* of the last source line comment */
  const Source *last_src;
  int tmp_counter;
  bool ok;
} Emitter;

static void fail(Emitter *em, SrcLoc loc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void fail(Emitter *em, SrcLoc loc, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fa_diag_vreport(&em->fc->diag, loc, DIAG_ERROR, fmt, ap);
  va_end(ap);
  em->ok = false;
}

static char *aprintf(Emitter *em, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static char *aprintf(Emitter *em, const char *fmt, ...) {
  va_list ap;
  StrBuf sb;
  fa_sb_init(&sb);
  va_start(ap, fmt);
  fa_sb_vprintf(&sb, fmt, ap);
  va_end(ap);
  char *s = fa_arena_strdup(&em->fc->arena, sb.data ? sb.data : "");
  fa_sb_free(&sb);
  if (!s)
    em->ok = false;
  return s ? s : "";
}

static void line(Emitter *em, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void line(Emitter *em, const char *fmt, ...) {
  for (int i = 0; i < em->indent; i++)
    fa_sb_puts(&em->body, "  ");
  va_list ap;
  va_start(ap, fmt);
  fa_sb_vprintf(&em->body, fmt, ap);
  va_end(ap);
  fa_sb_putc(&em->body, '\n');
}

static bool is_block(const IrValue *v) { return v->type.rank > 0 && v->type.dtype != DT_BLOCKPTR; }

static ValInfo *info(Emitter *em, const IrValue *v) { return &em->vi[v->id]; }

/* ---- names ------------------------------------------------------------------------------------- */

static const char *const reserved_words[] = {
    "alignas", "alignof", "and", "and_eq", "asm", "auto", "bitand", "bitor", "bool", "break", "case",
    "catch", "char", "char16_t", "char32_t", "class", "compl", "const", "constexpr", "const_cast",
    "continue", "decltype", "default", "delete", "do", "double", "dynamic_cast", "else", "enum",
    "explicit", "export", "extern", "false", "float", "for", "friend", "goto", "if", "inline", "int",
    "long", "mutable", "namespace", "new", "noexcept", "not", "not_eq", "nullptr", "operator", "or",
    "or_eq", "private", "protected", "public", "register", "reinterpret_cast", "return", "short",
    "signed", "sizeof", "static", "static_assert", "static_cast", "struct", "switch", "template",
    "this", "thread_local", "throw", "true", "try", "typedef", "typeid", "typename", "union",
    "unsigned", "using", "virtual", "void", "volatile", "wchar_t", "while", "xor", "xor_eq",
    "threadIdx", "blockIdx", "blockDim", "gridDim", "warpSize", "fa", "std", "main", "min", "max",
    "abs", "exp", "exp2", "log", "log2", "sqrt", "sin", "cos", "pow", "floor", "ceil", "tanh",
    "printf", "assert", "NULL", "half", "bf16", "uint", "dim3", "uint3", "float4", "int4",
};

static bool name_taken(Emitter *em, const char *s) {
  for (size_t i = 0; i < sizeof reserved_words / sizeof *reserved_words; i++)
    if (!strcmp(reserved_words[i], s))
      return true;
  for (int i = 0; i < em->names.len; i++)
    if (!strcmp(em->names.items[i], s))
      return true;
  return false;
}

/* A fresh C identifier based on a source name: invalid characters replaced,
 * the prefix fa_ (the emitter's own names) and C++ words avoided. */
static const char *fresh_name(Emitter *em, const char *hint) {
  char base[64];
  size_t n = 0;
  if (!hint || !*hint)
    hint = "t";
  for (const char *p = hint; *p && n + 1 < sizeof base - 8; p++)
    base[n++] = (char)(isalnum((unsigned char)*p) || *p == '_' ? *p : '_');
  base[n] = '\0';
  if (isdigit((unsigned char)base[0]) || !strncmp(base, "fa_", 3) || !strncmp(base, "__", 2)) {
    memmove(base + 2, base, n + 1);
    base[0] = 'v';
    base[1] = '_';
  }
  const char *name = fa_arena_strdup(&em->fc->arena, base);
  for (int i = 1; name && name_taken(em, name); i++)
    name = aprintf(em, "%s_%d", base, i);
  if (!name) {
    em->ok = false;
    return "fa_oom";
  }
  fa_ptrvec_push(&em->names, (void *)name);
  return name;
}

static const char *fresh_tmp(Emitter *em, const char *what) {
  return aprintf(em, "fa_%s%d", what, em->tmp_counter++);
}

/* ---- types and literals ---------------------------------------------------------------------------- */

static const char *ctype(DType dt) {
  switch (dt) {
  case DT_I1: return "bool";
  case DT_I8: return "signed char";
  case DT_I16: return "short";
  case DT_I32: return "int";
  case DT_I64: return "long long";
  case DT_U32: return "unsigned";
  case DT_F16: return "fa::half";
  case DT_BF16: return "fa::bf16";
  case DT_F32: return "float";
  case DT_F64: return "double";
  default: return "void";
  }
}

/* The C type of one element of a value (pointers included). */
static const char *elem_ctype(Emitter *em, IrType t) {
  if (t.dtype == DT_PTR)
    return aprintf(em, "%s *", ctype(t.pointee));
  if (t.dtype == DT_BLOCKPTR)
    return aprintf(em, "fa::BlockPtr<%s, %d>", ctype(t.pointee), t.rank);
  return ctype(t.dtype);
}

static int nregs(const FaLayout *l) { return 1 << l->nreg; }

static const char *layout_name(Emitter *em, const FaLayout *l) {
  if (l->id >= 0 && l->id < em->nlayouts_alloc)
    em->layout_used[l->id] = true;
  return aprintf(em, "fa_L%d", l->id);
}

static const char *thread_offset(Emitter *em, const FaLayout *l) {
  layout_name(em, l);
  if (l->id >= 0 && l->id < em->nlayouts_alloc)
    em->toff_used[l->id] = true;
  return aprintf(em, "fa_t%d", l->id);
}

static const char *float_literal(Emitter *em, DType dt, double v) {
  if (dt == DT_F16 || dt == DT_BF16) {
    unsigned bits = dt == DT_F16 ? fa_double_to_f16_bits(v) : fa_double_to_bf16_bits(v);
    return aprintf(em, "%s{0x%04x}", ctype(dt), bits);
  }
  if (isnan(v))
    return dt == DT_F64 ? "(double)fa::f32_nan()" : "fa::f32_nan()";
  if (isinf(v))
    return aprintf(em, "%s%sfa::f32_inf()", v < 0 ? "-" : "", dt == DT_F64 ? "(double)" : "");
  char buf[64];
  if (dt == DT_F64)
    snprintf(buf, sizeof buf, "%.17g", v);
  else
    snprintf(buf, sizeof buf, "%.9g", (double)(float)v);
  if (!strpbrk(buf, ".eE"))
    strcat(buf, ".0");
  return aprintf(em, "%s%s", buf, dt == DT_F64 ? "" : "f");
}

static const char *int_literal(Emitter *em, DType dt, int64_t v) {
  switch (dt) {
  case DT_I1: return v & 1 ? "true" : "false";
  case DT_I64:
    if (v == INT64_MIN)
      return "(-9223372036854775807LL - 1)";
    return aprintf(em, "%" PRId64 "LL", v);
  case DT_U32: return aprintf(em, "%" PRIu32 "u", (uint32_t)v);
  case DT_I8: return aprintf(em, "(signed char)%d", (int)(int8_t)v);
  case DT_I16: return aprintf(em, "(short)%d", (int)(int16_t)v);
  default: {
    int32_t x = (int32_t)v;
    if (x == INT32_MIN)
      return "(-2147483647 - 1)";
    return aprintf(em, "%" PRId32, x);
  }
  }
}

static const char *const_literal(Emitter *em, const IrOp *op) {
  DType dt = op->results[0]->type.dtype;
  if (fa_dtype_is_float(dt))
    return float_literal(em, dt, op->fval);
  if (dt == DT_PTR)
    return "nullptr";
  return int_literal(em, dt, op->ival);
}

/* ---- element expressions ------------------------------------------------------------------------ */

/* For a value computed at its uses: the dimension of its arange (after
 * expand_dims / trans), or -1 when it is uniform. */
static int virtual_dim(const IrValue *v, const IrValue **root) {
  const IrOp *op = v->def;
  switch (op->kind) {
  case IR_ARANGE: *root = v; return 0;
  case IR_CONST:
  case IR_SPLAT: *root = v; return -1;
  case IR_BROADCAST:
  case IR_RESHAPE: return virtual_dim(op->operands[0], root);
  case IR_EXPAND_DIMS: {
    int d = virtual_dim(op->operands[0], root);
    return d >= 0 && d >= op->axis ? d + 1 : d;
  }
  case IR_TRANS: {
    int d = virtual_dim(op->operands[0], root);
    if (d < 0)
      return d;
    for (int i = 0; i < v->type.rank; i++)
      if (op->perm[i] == d)
        return i;
    return d;
  }
  default: *root = v; return -1;
  }
}

static const char *value_ref(Emitter *em, const IrValue *v);

/* Element fa_e of value x in layout `need` (NULL for scalars). */
static const char *elem(Emitter *em, const IrValue *x, const FaLayout *need) {
  if (!is_block(x))
    return value_ref(em, x);
  if (fa_value_is_virtual(&em->plan, x)) {
    const IrValue *root = x;
    int d = virtual_dim(x, &root);
    const IrOp *rop = root->def;
    if (rop->kind == IR_CONST)
      return const_literal(em, rop);
    if (rop->kind == IR_SPLAT)
      return value_ref(em, rop->operands[0]);
    if (rop->kind == IR_ARANGE && need) {
      const char *ln = layout_name(em, need);
      const char *t = thread_offset(em, need);
      if (rop->ival == 0)
        return aprintf(em, "%s::coord(%s, fa_e, %d)", ln, t, d);
      return aprintf(em, "(%" PRId64 " + %s::coord(%s, fa_e, %d))", rop->ival, ln, t, d);
    }
    fail(em, x->loc, "internal compiler error: cannot compute this value where it is used");
    return "0";
  }
  const ValInfo *vi = info(em, x);
  if (!need || !x->layout || x->layout == need)
    return aprintf(em, "%s[fa_e]", vi->name);
  for (int i = 0; i < vi->nconvs; i++)
    if (vi->convs[i].layout == need)
      return aprintf(em, "%s[fa_e]", vi->convs[i].name);
  fail(em, x->loc, "internal compiler error: no converted copy of '%s' in layout %d", vi->name, need->id);
  return "0";
}

static const char *value_ref(Emitter *em, const IrValue *v) {
  if (v->def && v->def->kind == IR_CONST && v->type.rank == 0)
    return const_literal(em, v->def); /* constants are written where they are used */
  const ValInfo *vi = info(em, v);
  return vi->name ? vi->name : "fa_undefined";
}

/* The array holding x in layout `need`: x itself, its converted copy, or a
 * temporary filled with a virtual value's elements. */
static const char *array_in(Emitter *em, const IrValue *x, const FaLayout *need) {
  if (!fa_value_is_virtual(&em->plan, x) && (x->layout == need || !need)) {
    return info(em, x)->name;
  }
  if (!fa_value_is_virtual(&em->plan, x)) {
    const ValInfo *vi = info(em, x);
    for (int i = 0; i < vi->nconvs; i++)
      if (vi->convs[i].layout == need)
        return vi->convs[i].name;
    fail(em, x->loc, "internal compiler error: no converted copy of '%s'", vi->name);
    return "fa_undefined";
  }
  const char *tmp = fresh_tmp(em, "tmp");
  const char *ex = elem(em, x, need);
  line(em, "%s %s[%d];", elem_ctype(em, x->type), tmp, nregs(need));
  line(em, "#pragma unroll");
  line(em, "for (int fa_e = 0; fa_e < %d; ++fa_e)", nregs(need));
  line(em, "  %s[fa_e] = %s;", tmp, ex);
  return tmp;
}

static const FaLayout *need_of(Emitter *em, const IrOp *op, int i) {
  return fa_layout_operand_need(em->fc, &em->plan, op, i);
}

static const char *operand(Emitter *em, const IrOp *op, int i) {
  return elem(em, op->operands[i], need_of(em, op, i));
}

/* ---- divisibility ----------------------------------------------------------------------------------- */

enum { DIV_MAX = 30 };

static int ctz64(uint64_t x) {
  if (!x)
    return DIV_MAX;
  int n = 0;
  while (!(x & 1) && n < DIV_MAX) {
    x >>= 1;
    n++;
  }
  return n;
}

static int min_i(int a, int b) { return a < b ? a : b; }

static int div_of(Emitter *em, const IrValue *v) { return v ? info(em, v)->div_log2 : 0; }

/* Known power-of-two divisors of integer and pointer scalars (pointers in
 * elements: a pointer parameter is assumed 16-byte aligned, as cudaMalloc
 * and the runtime's allocations are; FaCudaKernel says so). */
static void analyse_div_op(Emitter *em, const IrOp *op) {
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
      d = div_of(em, op->operands[0]);
    break;
  case IR_BINARY:
    switch (op->sub) {
    case BIN_ADD:
    case BIN_SUB: d = min_i(div_of(em, op->operands[0]), div_of(em, op->operands[1])); break;
    case BIN_MUL: d = min_i(DIV_MAX, div_of(em, op->operands[0]) + div_of(em, op->operands[1])); break;
    default: break;
    }
    break;
  case IR_PTR_ADD:
    if (r->type.rank == 0)
      d = min_i(div_of(em, op->operands[0]), div_of(em, op->operands[1]));
    break;
  case IR_SELECT:
    if (r->type.rank == 0)
      d = min_i(div_of(em, op->operands[1]), div_of(em, op->operands[2]));
    break;
  default: break;
  }
  if (r->type.rank == 0)
    info(em, r)->div_log2 = d;
}

/* Divisibility of a block pointer's offset along dimension dim, over every
 * way the value can be reached (advances, loop iterations). */
static int blockptr_offset_div(Emitter *em, const IrValue *v, int dim, const IrValue *stop, int depth) {
  if (!v || depth > 64)
    return 0;
  if (v == stop)
    return DIV_MAX;
  if (v->def) {
    const IrOp *op = v->def;
    switch (op->kind) {
    case IR_MAKE_BLOCK_PTR: {
      int rank = v->type.rank;
      return div_of(em, op->operands[1 + 2 * rank + dim]);
    }
    case IR_ADVANCE:
      return min_i(blockptr_offset_div(em, op->operands[0], dim, stop, depth + 1),
                   div_of(em, op->operands[1 + dim]));
    case IR_FOR: {
      for (int i = 0; i < op->nresults; i++)
        if (op->results[i] == v)
          return blockptr_offset_div(em, op->regions[0]->args[1 + i], dim, stop, depth + 1);
      return 0;
    }
    case IR_IF: {
      int d = DIV_MAX;
      for (int i = 0; i < op->nresults; i++)
        if (op->results[i] == v)
          for (int r = 0; r < op->nregions; r++) {
            const IrOp *y = op->regions[r]->last;
            if (!y || y->kind != IR_YIELD || i >= y->noperands)
              return 0;
            d = min_i(d, blockptr_offset_div(em, y->operands[i], dim, stop, depth + 1));
          }
      return d;
    }
    default: return 0;
    }
  }
  if (v->region && v->region->parent_op && v->region->parent_op->kind == IR_FOR) {
    const IrOp *f = v->region->parent_op;
    for (int j = 1; j < v->region->nargs; j++)
      if (v->region->args[j] == v) {
        int init = blockptr_offset_div(em, f->operands[3 + j - 1], dim, stop, depth + 1);
        const IrOp *y = v->region->last;
        if (!y || y->kind != IR_YIELD || j - 1 >= y->noperands)
          return 0;
        int step = blockptr_offset_div(em, y->operands[j - 1], dim, v, depth + 1);
        return min_i(init, step);
      }
  }
  return 0;
}


/* Elements per access of a block-pointer load or store in layout l: the
 * registers in a row along the dimension of constant stride 1, as far as
 * alignment (base, other strides, offsets) and the checked bounds allow, in
 * accesses of 4, 8 or 16 bytes. */
static int block_vector_width(Emitter *em, const IrValue *bp, const FaLayout *l, unsigned boundary) {
  const IrOp *mk = fa_blockptr_origin(bp);
  int rank = bp->type.rank, size = fa_dtype_size(bp->type.pointee);
  if (!mk || size <= 0 || mk->noperands != 1 + 3 * rank)
    return 1;
  int c = -1;
  for (int d = 0; d < rank && c < 0; d++) {
    int64_t s;
    if (fa_ir_const_int_value(mk->operands[1 + rank + d], &s) && s == 1)
      c = d;
  }
  if (c < 0)
    return 1;
  int first, count;
  fa_layout_dim_bits(l, c, &first, &count);
  int run = 0;
  while (run < l->nreg && run < count && l->reg[run] == first + run)
    run++;
  int vlog = run;
  int maxlog = 0;
  while ((1 << (maxlog + 1)) * size <= 16)
    maxlog++;
  vlog = min_i(vlog, maxlog);
  vlog = min_i(vlog, div_of(em, mk->operands[0]));
  for (int d = 0; d < rank; d++)
    if (d != c) {
      int64_t s;
      vlog = min_i(vlog, fa_ir_const_int_value(mk->operands[1 + rank + d], &s) ? ctz64((uint64_t)s) : div_of(em, mk->operands[1 + rank + d]));
    }
  vlog = min_i(vlog, blockptr_offset_div(em, bp, c, NULL, 0));
  if (boundary & (1u << c))
    vlog = min_i(vlog, div_of(em, mk->operands[1 + c]));
  while (vlog > 0 && (1 << vlog) * size < 4)
    vlog = 0;
  return 1 << vlog;
}

/* ---- conversions ---------------------------------------------------------------------------------- */

static void add_conversion(Emitter *em, const IrValue *x, const FaLayout *need) {
  if (!need || !is_block(x) || fa_value_is_virtual(&em->plan, x) || x->layout == need)
    return;
  ValInfo *vi = info(em, x);
  for (int i = 0; i < vi->nconvs; i++)
    if (vi->convs[i].layout == need)
      return;
  Conversion *c = fa_arena_alloc(&em->fc->arena, (size_t)(vi->nconvs + 1) * sizeof *c);
  if (!c) {
    em->ok = false;
    return;
  }
  if (vi->nconvs)
    memcpy(c, vi->convs, (size_t)vi->nconvs * sizeof *c);
  c[vi->nconvs].layout = need;
  c[vi->nconvs].name = NULL; /* named when emitted */
  vi->convs = c;
  vi->nconvs++;
}

/* ---- tiles (shared-memory copies of dot operands) ------------------------------------------- */

/* For a product whose A operand is x.to(f16 / bf16) of an f32 x in
 * registers: x (the fragments are rounded as they are packed); else NULL. */
static const IrValue *fused_cast_source(const FaLayoutPlan *plan, const IrOp *op, int i) {
  const FaDotPlan *dp = op->kind == IR_DOT ? op->aux : NULL;
  if (!dp || dp->kind != FA_DOT_MMA || i != 0 || !dp->a_in_regs)
    return NULL;
  const IrValue *a = op->operands[0];
  if (fa_value_is_virtual(plan, a) || !a->def || a->def->kind != IR_CAST)
    return NULL;
  const IrValue *x = a->def->operands[0];
  if (x->type.dtype != DT_F32 || fa_value_is_virtual(plan, x) || !x->layout)
    return NULL;
  return x;
}

static bool reads_tile(const IrOp *op, int i) {
  const FaDotPlan *dp = op->kind == IR_DOT ? op->aux : NULL;
  return dp && dp->kind == FA_DOT_MMA && (i == 1 || (i == 0 && !dp->a_in_regs));
}

/* The value whose tile a dot operand reads (the operand, or what it is the
 * transpose of), and whether the operand is that value transposed. */
static const IrValue *tile_source(Emitter *em, const IrValue *x, bool *flip) {
  *flip = false;
  if (x->def && x->def->kind == IR_TRANS && x->type.rank == 2 && x->def->perm[0] == 1 &&
      !fa_value_is_virtual(&em->plan, x->def->operands[0]) && x->def->operands[0]->layout) {
    *flip = true;
    return x->def->operands[0];
  }
  return x;
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
static bool has_wgmma(const Emitter *em) { return em->target.sm == 90 && em->target.arch_specific; }

static bool swizzle_ok(const Emitter *em, int size, int row_bytes, int rows) {
  if (!has_wgmma(em) || size != 2 || rows % 8 != 0)
    return false;
  return row_bytes == 32 || row_bytes == 64 || row_bytes % 128 == 0;
}

static void request_tile(Emitter *em, const IrValue *x) {
  ValInfo *vi = info(em, x);
  if (vi->staged || !x->layout || x->type.rank != 2)
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
  vi->staged = true;
  vi->tile_inner = d_in;
  vi->stage_vec = v;
  vi->tile_rows = x->type.shape[1 - d_in];
  int row_bytes = x->type.shape[d_in] * size;
  if (swizzle_ok(em, size, row_bytes, vi->tile_rows)) {
    vi->tile_pitch = row_bytes;
    vi->tile_sw = row_bytes < 128 ? row_bytes : 128;
    em->swizzled_tiles = true;
  } else {
    vi->tile_pitch = row_bytes + 16;
    vi->tile_sw = 0;
  }
}

/* The tile format type of fa_mma.cuh. */
static const char *tile_format(Emitter *em, const IrValue *x) {
  const ValInfo *vi = info(em, x);
  if (vi->tile_sw)
    return aprintf(em, "fa::SwzTile<%d, %d>", vi->tile_rows, vi->tile_sw);
  return aprintf(em, "fa::PadTile<%d>", vi->tile_pitch);
}

/* Tiles share shared memory where their lifetimes do not overlap (the two
 * loops of the causal forward pass, say).  A lifetime is a range of
 * positions in the program (ops in pre-order): from the definition (for a
 * pipelined load, its loop: the first buffers are filled before it) to the
 * last product reading the tile, extended to the end of every loop around
 * that product which does not also contain the definition (the tile is read
 * again in the next iteration). */
static bool op_live(Emitter *em, const IrOp *op);
static void list_ops(const IrRegion *r, PtrVec *ops);

typedef struct TileSpan {
  int id;                   /* value id */
  int start, end;
  size_t size;
} TileSpan;

static int op_position(const PtrVec *ops, const IrOp *op) {
  for (int i = 0; i < ops->len; i++)
    if (ops->items[i] == op)
      return i;
  return -1;
}

static int subtree_ops(const IrOp *op) {
  int n = 0;
  for (int r = 0; r < op->nregions; r++)
    for (const IrOp *o = op->regions[r]->first; o; o = o->next)
      n += 1 + subtree_ops(o);
  return n;
}

static int span_end_of_use(const PtrVec *ops, const IrOp *use, const IrOp *def_op) {
  int end = op_position(ops, use);
  for (const IrRegion *r = use->parent; r && r->parent_op; r = r->parent_op->parent) {
    const IrOp *owner = r->parent_op;
    if (owner == def_op)
      break;
    bool contains_def = false;
    for (const IrRegion *d = def_op ? def_op->parent : NULL; d && d->parent_op; d = d->parent_op->parent)
      if (d->parent_op == owner)
        contains_def = true;
    if ((owner->kind == IR_FOR || owner->kind == IR_WHILE) && !contains_def) {
      int e = op_position(ops, owner) + subtree_ops(owner);
      if (e > end)
        end = e;
    }
  }
  return end;
}

static void allocate_tiles(Emitter *em) {
  PtrVec ops = {0};
  list_ops(em->fn->body, &ops);
  TileSpan *spans = calloc((size_t)(em->nvalues > 0 ? em->nvalues : 1), sizeof *spans);
  int n = 0;
  for (int i = 0; spans && i < ops.len; i++) {
    const IrOp *op = ops.items[i];
    const IrValue *defined[64];
    int nd = 0;
    for (int r = 0; r < op->nresults && nd < 64; r++)
      defined[nd++] = op->results[r];
    for (int g = 0; g < op->nregions; g++)
      for (int a = 0; a < op->regions[g]->nargs && nd < 64; a++)
        defined[nd++] = op->regions[g]->args[a];
    for (int k = 0; k < nd; k++) {
      const IrValue *x = defined[k];
      ValInfo *vi = info(em, x);
      if (!vi->staged)
        continue;
      vi->tile_buf_bytes = (size_t)vi->tile_rows * (size_t)vi->tile_pitch;
      TileSpan *t = &spans[n++];
      t->id = x->id;
      t->size = vi->tile_buf_bytes * (size_t)(vi->pipe_stages > 1 ? vi->pipe_stages : 1);
      const IrOp *def_op = vi->pipe_loop ? vi->pipe_loop : op;
      t->start = op_position(&ops, def_op);
      t->end = vi->pipe_loop ? t->start + subtree_ops(vi->pipe_loop) : t->start;
      /* the products reading it */
      for (int u = 0; u < ops.len; u++) {
        const IrOp *use = ops.items[u];
        if (use->kind != IR_DOT || !op_live(em, use))
          continue;
        for (int j = 0; j < 2; j++) {
          bool flip;
          if (!reads_tile(use, j) || fused_cast_source(&em->plan, use, j) ||
              tile_source(em, use->operands[j], &flip) != x)
            continue;
          /* a product fused into an addition is computed at the addition */
          const IrOp *at = info(em, use->results[0])->fused_add ? info(em, use->results[0])->fused_add : use;
          int e = span_end_of_use(&ops, at, x->def ? x->def : NULL);
          if (e > t->end)
            t->end = e;
        }
      }
    }
  }
  /* first fit, in order of definition (swizzled tiles start at multiples of
     1024 bytes, the period of the 128-byte swizzle) */
  size_t align = em->swizzled_tiles ? 1024 : 16;
  for (int i = 0; i < n; i++) {
    size_t off = 0;
    for (bool moved = true; moved;) {
      moved = false;
      for (int j = 0; j < i; j++) {
        const TileSpan *o = &spans[j];
        size_t ooff = em->vi[o->id].tile_offset;
        bool overlap_time = !(o->end < spans[i].start || spans[i].end < o->start);
        bool overlap_space = off < ooff + o->size && ooff < off + spans[i].size;
        if (overlap_time && overlap_space) {
          off = (ooff + o->size + align - 1) & ~(align - 1);
          moved = true;
        }
      }
    }
    em->vi[spans[i].id].tile_offset = off;
    if (off + spans[i].size > em->tile_bytes)
      em->tile_bytes = off + spans[i].size;
  }
  em->tile_bytes = (em->tile_bytes + 15) & ~(size_t)15;
  free(spans);
  fa_ptrvec_free(&ops);
}

/* ---- software pipelining of loads into tiles ----------------------------------------------------
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

static void plan_pipeline_load(Emitter *em, const IrOp *loop, const IrOp *op) {
  const IrRegion *body = loop->regions[0];
  const IrValue *x = op->results[0], *bp = op->operands[0];
  ValInfo *vi = info(em, x);
  if (!em->live[x->id] || !vi->staged || vi->nontile_uses > 0 || op->padding == PAD_NAN || x->type.rank != 2 ||
      !x->layout)
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
  int v = block_vector_width(em, bp, x->layout, op->boundary);
  int size = fa_dtype_size(x->type.dtype);
  const FaLayout *l = x->layout;
  int first, count;
  fa_layout_dim_bits(l, vi->tile_inner, &first, &count);
  if (v * size < 4 || v > vi->stage_vec || l->nreg == 0 || l->reg[0] != first)
    return;
  vi->pipe_stages = em->k->stages > 8 ? 8 : em->k->stages;
  vi->pipe_vec = v;
  vi->pipe_loop = loop;
  vi->pipe_arg = j;
  vi->pipe_advance = adv;
}

static void plan_pipelines(Emitter *em, const IrRegion *r) {
  for (const IrOp *op = r->first; op; op = op->next) {
    if (op->kind == IR_FOR && em->k->stages >= 2)
      for (const IrOp *b = op->regions[0]->first; b; b = b->next)
        if (b->kind == IR_LOAD_BLOCK)
          plan_pipeline_load(em, op, b);
    for (int i = 0; i < op->nregions; i++)
      plan_pipelines(em, op->regions[i]);
  }
}

/* The shared-memory address of x's tile (the current buffer of a pipeline). */
static const char *tile_address(Emitter *em, const IrValue *x) {
  const ValInfo *vi = info(em, x);
  if (vi->pipe_stages > 1)
    return aprintf(em, "fa::smem_addr(fa_smem + %zu + (%s %% %d) * %zu)", vi->tile_offset, vi->pipe_counter,
                   vi->pipe_stages, vi->tile_buf_bytes);
  return aprintf(em, "fa::smem_addr(fa_smem + %zu)", vi->tile_offset);
}

/* cp.async of x's block for the iteration `times` ahead of block pointer bp, into buffer `buf`. */
static void emit_async_load(Emitter *em, const IrValue *x, const char *bp, int times, const char *buf) {
  const ValInfo *vi = info(em, x);
  const IrOp *op = x->def, *adv = vi->pipe_advance;
  StrBuf d;
  fa_sb_init(&d);
  for (int k = 1; k < adv->noperands; k++)
    fa_sb_printf(&d, "%s(int)%s", k > 1 ? ", " : "", value_ref(em, adv->operands[k]));
  const char *ln = layout_name(em, x->layout);
  line(em, "fa::load_block_async<%s, %d, 0x%xu, %d, %s>(fa::smem_addr(fa_smem + %zu + (%s) * %zu), "
           "fa::advance_by(%s, {%s}, %d), %s, %s::owner(fa_lane, fa_warp));",
       ln, vi->pipe_vec, op->boundary, vi->tile_inner, tile_format(em, x), vi->tile_offset, buf, vi->tile_buf_bytes,
       bp, d.data ? d.data : "", times, thread_offset(em, x->layout), ln);
  fa_sb_free(&d);
}

/* a + dot(x, y) (either order) becomes dot(x, y, a) on the tensor cores: the
 * product accumulates onto a in its registers instead of into a second
 * accumulator that is added afterwards (f32 rounding order aside, the same
 * sum; the interpreter adds the finished product). */
static void plan_fused_adds(Emitter *em, const IrRegion *r) {
  for (const IrOp *op = r->first; op; op = op->next) {
    for (int i = 0; i < op->nregions; i++)
      plan_fused_adds(em, op->regions[i]);
    if (op->kind != IR_BINARY || op->sub != BIN_ADD || !em->live[op->results[0]->id] ||
        op->results[0]->type.dtype != DT_F32 || !is_block(op->results[0]))
      continue;
    for (int k = 0; k < 2; k++) {
      const IrValue *d = op->operands[k], *other = op->operands[1 - k];
      const IrOp *dot = d->def;
      const FaDotPlan *dp = dot && dot->kind == IR_DOT ? dot->aux : NULL;
      if (!dp || dp->kind != FA_DOT_MMA || dot->noperands != 2 || d->type.dtype != DT_F32 || dot->parent != op->parent ||
          info(em, d)->nontile_uses != 1 || info(em, d)->nconvs != 0 || d->layout != dp->acc ||
          op->results[0]->layout != dp->acc || other == d || info(em, d)->fused_add)
        continue;
      info(em, d)->fused_add = op;
      info(em, op->results[0])->fused_dot = dot;
      info(em, op->results[0])->fused_addend = 1 - k;
      break;
    }
  }
}

/* ---- liveness ----------------------------------------------------------------------------------- */

static bool has_effects(IrOpKind k) {
  switch (k) {
  case IR_STORE:
  case IR_STORE_BLOCK:
  case IR_ATOMIC_ADD:
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

static bool op_live(Emitter *em, const IrOp *op) {
  if (has_effects(op->kind))
    return true;
  for (int i = 0; i < op->nresults; i++)
    if (em->live[op->results[i]->id])
      return true;
  return false;
}

static void list_ops(const IrRegion *r, PtrVec *ops) {
  for (const IrOp *op = r->first; op; op = op->next) {
    fa_ptrvec_push(ops, (void *)op);
    for (int i = 0; i < op->nregions; i++)
      list_ops(op->regions[i], ops);
  }
}

/* One backward pass: in the flattened program order every use comes after
 * its definition, so marking in reverse order reaches a fixed point. */
static void compute_liveness(Emitter *em) {
  PtrVec ops = {0};
  list_ops(em->fn->body, &ops);
  for (int n = ops.len - 1; n >= 0; n--) {
    const IrOp *op = ops.items[n];
    if (!op_live(em, op))
      continue;
    const IrOp *owner = op->kind == IR_YIELD && op->parent ? op->parent->parent_op : NULL;
    for (int i = 0; i < op->noperands; i++) {
      const IrValue *x = op->operands[i];
      if (owner && owner->kind == IR_IF && i < owner->nresults && !em->live[owner->results[i]->id])
        continue; /* an if's result nobody reads (its uses come later: they are marked already) */
      const IrValue *f = fused_cast_source(&em->plan, op, i);
      if (f) {
        x = f;
      } else if (reads_tile(op, i)) {
        bool flip;
        x = tile_source(em, x, &flip);
      }
      if (!reads_tile(op, i))
        em->vi[x->id].nontile_uses++;
      em->live[x->id] = true;
    }
  }
  fa_ptrvec_free(&ops);
}

static void collect_conversions(Emitter *em, const IrRegion *r) {
  for (const IrOp *op = r->first; op; op = op->next) {
    if (!op_live(em, op))
      continue;
    const IrOp *owner = op->kind == IR_YIELD ? r->parent_op : NULL;
    for (int i = 0; i < op->noperands; i++) {
      if (owner && owner->kind == IR_IF && i < owner->nresults && !em->live[owner->results[i]->id])
        continue;
      const IrValue *f = fused_cast_source(&em->plan, op, i);
      if (f) {
        add_conversion(em, f, need_of(em, op, i));
      } else if (reads_tile(op, i)) {
        bool flip;
        request_tile(em, tile_source(em, op->operands[i], &flip));
      } else {
        add_conversion(em, op->operands[i], need_of(em, op, i));
      }
    }
    for (int i = 0; i < op->nregions; i++)
      collect_conversions(em, op->regions[i]);
  }
}

/* Library scratch space: above the tiles. */
static const char *scratch(Emitter *em) {
  return em->tile_bytes ? aprintf(em, "(fa_smem + %zu)", em->tile_bytes) : "fa_smem";
}

static void note_scratch(Emitter *em, size_t bytes) {
  if (bytes > em->scratch_bytes)
    em->scratch_bytes = bytes;
}

static void emit_stage(Emitter *em, const IrValue *x) {
  const ValInfo *vi = info(em, x);
  /* products of the previous iteration, or of a tile that shared this
     memory, may still read it */
  line(em, "__syncthreads();");
  line(em, "fa::stage<%s, %d, %d, %s>(fa_smem + %zu, %s, %s);  // shared-memory copy for tensor-core products",
       layout_name(em, x->layout), vi->tile_inner, vi->stage_vec, tile_format(em, x), vi->tile_offset, vi->name,
       thread_offset(em, x->layout));
  if (em->async_reads)
    line(em, "fa::fence_async_smem();  // the tensor cores read it through the async proxy");
  line(em, "__syncthreads();");
}

/* dst (declared, in layout `to`) = src (in layout `from`), a block of type t. */
static void emit_convert(Emitter *em, const char *dst, const char *src, IrType t, const FaLayout *from,
                         const FaLayout *to) {
  int perm[FA_LAYOUT_MAX_BITS];
  if (fa_layout_register_permutation(from, to, perm)) {
    StrBuf sb;
    fa_sb_init(&sb);
    for (int b = 0; b < to->nreg; b++)
      fa_sb_printf(&sb, "%s%d", b ? ", " : "", perm[b]);
    line(em, "fa::regmap<fa::Bits<%s>>(%s, %s);  // same threads, other registers", sb.data ? sb.data : "", dst,
         src);
    fa_sb_free(&sb);
    return;
  }
  line(em, "fa::convert<%s, %s>(%s, %s, fa_lane, fa_warp, %s);", layout_name(em, from), layout_name(em, to), dst, src,
       scratch(em));
  int size = t.dtype == DT_PTR ? 8 : fa_dtype_size(t.dtype);
  note_scratch(em, (size_t)fa_type_numel(t) * (size_t)(size > 0 ? size : 1));
}

/* Emits the converted copies of x that its uses need. */
static void emit_conversions(Emitter *em, const IrValue *x) {
  if (!is_block(x) || fa_value_is_virtual(&em->plan, x))
    return;
  ValInfo *vi = info(em, x);
  if (vi->staged && vi->pipe_stages <= 1)
    emit_stage(em, x);
  const FaLayout *src = x->layout;
  for (int i = 0; i < vi->nconvs; i++) {
    Conversion *c = &vi->convs[i];
    const FaLayout *dst = c->layout;
    c->name = fresh_name(em, aprintf(em, "%s_L%d", vi->name, dst->id));
    const char *t = elem_ctype(em, x->type);
    line(em, "%s %s[%d];  // %s in %s", t, c->name, nregs(dst), vi->name, layout_name(em, dst));
    emit_convert(em, c->name, vi->name, x->type, src, dst);
  }
}

/* ---- ops ------------------------------------------------------------------------------------------------- */

static void emit_region(Emitter *em, const IrRegion *r);

static void source_comment(Emitter *em, SrcLoc loc) {
  if (!loc.src || (loc.src == em->last_src && loc.line == em->last_line))
    return;
  em->last_src = loc.src;
  em->last_line = loc.line;
  const char *p = loc.src->text;
  for (int l = 1; p && *p && l < loc.line; p++)
    if (*p == '\n')
      l++;
  const char *name = loc.src->name ? loc.src->name : "<string>";
  const char *slash = strrchr(name, '/');
  if (slash)
    name = slash + 1;
  StrBuf sb;
  fa_sb_init(&sb);
  while (p && *p == ' ')
    p++;
  for (int n = 0; p && *p && *p != '\n' && n < 100; p++, n++)
    fa_sb_putc(&sb, (*p == '\t' || *p == '\r') ? ' ' : *p);
  /* a comment must not end in a backslash (line continuation) */
  while (sb.len > 0 && (sb.data[sb.len - 1] == '\\' || sb.data[sb.len - 1] == ' '))
    sb.data[--sb.len] = '\0';
  line(em, "// %s:%d: %s", name, loc.line, sb.data ? sb.data : "");
  fa_sb_free(&sb);
}

/* Declares the result of op as a block array or a scalar. */
static void declare_block(Emitter *em, const IrValue *r, const char *comment) {
  line(em, "%s %s[%d];%s%s", elem_ctype(em, r->type), info(em, r)->name, nregs(r->layout), comment ? "  // " : "",
       comment ? comment : "");
}

/* "const T name" for a scalar: the pointer itself is const for pointers. */
static const char *const_decl(Emitter *em, const IrValue *v) {
  if (v->type.dtype == DT_PTR)
    return aprintf(em, "%s *const %s", ctype(v->type.pointee), info(em, v)->name);
  return aprintf(em, "const %s %s", elem_ctype(em, v->type), info(em, v)->name);
}

static void emit_elementwise(Emitter *em, const IrValue *r, const char *expr) {
  if (!is_block(r)) {
    line(em, "%s = %s;", const_decl(em, r), expr);
    return;
  }
  declare_block(em, r, NULL);
  line(em, "#pragma unroll");
  line(em, "for (int fa_e = 0; fa_e < %d; ++fa_e)", nregs(r->layout));
  line(em, "  %s[fa_e] = %s;", info(em, r)->name, expr);
}

static const char *unary_expr(Emitter *em, const IrOp *op, const char *a) {
  DType dt = op->results[0]->type.dtype;
  switch ((IrUnaryOp)op->sub) {
  case UN_NEG: return dt == DT_I8 || dt == DT_I16 ? aprintf(em, "(%s)(-%s)", ctype(dt), a) : aprintf(em, "(-%s)", a);
  case UN_NOT: return aprintf(em, "(!%s)", a);
  case UN_INVERT: return dt == DT_I1 ? aprintf(em, "(!%s)", a) : aprintf(em, "(%s)(~%s)", ctype(dt), a);
  case UN_ABS: return aprintf(em, "fa::abs(%s)", a);
  case UN_EXP: return aprintf(em, "fa::exp(%s)", a);
  case UN_EXP2: return aprintf(em, "fa::exp2(%s)", a);
  case UN_LOG: return aprintf(em, "fa::log(%s)", a);
  case UN_LOG2: return aprintf(em, "fa::log2(%s)", a);
  case UN_SQRT: return aprintf(em, "fa::sqrt(%s)", a);
  case UN_RSQRT: return aprintf(em, "fa::rsqrt(%s)", a);
  case UN_SIN: return aprintf(em, "fa::sin(%s)", a);
  case UN_COS: return aprintf(em, "fa::cos(%s)", a);
  case UN_FLOOR: return aprintf(em, "fa::floor(%s)", a);
  case UN_CEIL: return aprintf(em, "fa::ceil(%s)", a);
  case UN_SIGMOID: return aprintf(em, "fa::sigmoid(%s)", a);
  case UN_TANH: return aprintf(em, "fa::tanh(%s)", a);
  case UN_ERF: return aprintf(em, "fa::erf(%s)", a);
  }
  fail(em, op->loc, "the CUDA backend does not support this unary operation");
  return a;
}

static const char *binary_expr(Emitter *em, const IrOp *op, const char *a, const char *b) {
  DType dt = op->results[0]->type.dtype;
  bool narrow = dt == DT_I8 || dt == DT_I16 || dt == DT_I1;
  const char *sym = NULL;
  switch ((IrBinaryOp)op->sub) {
  case BIN_ADD: sym = "+"; break;
  case BIN_SUB: sym = "-"; break;
  case BIN_MUL: sym = "*"; break;
  case BIN_DIV: sym = "/"; break;
  case BIN_MOD:
    if (fa_dtype_is_float(dt))
      return aprintf(em, "fa::mod(%s, %s)", a, b);
    sym = "%";
    break;
  case BIN_MAX: return aprintf(em, "fa::maximum(%s, %s)", a, b);
  case BIN_MIN: return aprintf(em, "fa::minimum(%s, %s)", a, b);
  case BIN_AND: sym = "&"; break;
  case BIN_OR: sym = "|"; break;
  case BIN_XOR: sym = "^"; break;
  case BIN_SHL: return aprintf(em, "fa::shl(%s, %s)", a, b);
  case BIN_SHR: return aprintf(em, "fa::shr(%s, %s)", a, b);
  case BIN_POW: return aprintf(em, "fa::pow(%s, %s)", a, b);
  case BIN_MAXNUM: return aprintf(em, "fa::maxnum(%s, %s)", a, b);
  case BIN_MINNUM: return aprintf(em, "fa::minnum(%s, %s)", a, b);
  }
  if (!sym) {
    fail(em, op->loc, "the CUDA backend does not support this binary operation");
    return a;
  }
  if (narrow)
    return aprintf(em, "(%s)(%s %s %s)", ctype(dt), a, sym, b);
  return aprintf(em, "(%s %s %s)", a, sym, b);
}

static const char *cmp_sym(int sub) {
  switch ((IrCmpOp)sub) {
  case CMP_LT: return "<";
  case CMP_LE: return "<=";
  case CMP_GT: return ">";
  case CMP_GE: return ">=";
  case CMP_EQ: return "==";
  case CMP_NE: return "!=";
  }
  return "==";
}

static const char *cast_expr(Emitter *em, DType to, DType from, const char *a) {
  if (to == from)
    return a;
  if (fa_dtype_is_int(to) && to != DT_I1 && fa_dtype_is_int(from))
    return aprintf(em, "(%s)%s", ctype(to), a);
  return aprintf(em, "fa::convert<%s>(%s)", ctype(to), a);
}

static const char *zero_of(Emitter *em, DType dt) {
  if (fa_dtype_is_float(dt))
    return float_literal(em, dt, 0.0);
  if (dt == DT_PTR)
    return "nullptr";
  return int_literal(em, dt, 0);
}

static void emit_load(Emitter *em, const IrOp *op) {
  const IrValue *r = op->results[0];
  const char *p = operand(em, op, 0);
  const char *other = op->noperands > 2 ? operand(em, op, 2) : zero_of(em, r->type.dtype);
  const char *ex = op->noperands > 1 ? aprintf(em, "(%s ? *%s : %s)", operand(em, op, 1), p, other)
                                     : aprintf(em, "*%s", p);
  emit_elementwise(em, r, ex);
}

/* store / atomic_add through pointers: only one of the threads holding
 * copies of an element touches memory. */
static void emit_store(Emitter *em, const IrOp *op) {
  bool atomic = op->kind == IR_ATOMIC_ADD;
  const IrValue *ptrs = op->operands[0];
  if (!is_block(ptrs)) {
    const char *p = operand(em, op, 0), *v = operand(em, op, 1);
    const char *cond = op->noperands > 2 ? operand(em, op, 2) : NULL;
    if (!atomic) {
      /* every thread would store the same value; one is enough */
      line(em, "if (threadIdx.x == 0%s%s)", cond ? " && " : "", cond ? cond : "");
      line(em, "  *%s = %s;", p, v);
      return;
    }
    const IrValue *r = op->results[0];
    if (!em->live[r->id]) {
      line(em, "if (threadIdx.x == 0%s%s)", cond ? " && " : "", cond ? cond : "");
      line(em, "  fa::atomic_add(%s, %s);", p, v);
      return;
    }
    const char *t = elem_ctype(em, r->type);
    line(em, "%s %s = %s;", t, info(em, r)->name, zero_of(em, r->type.dtype));
    line(em, "{  // one thread adds; all see the previous value");
    line(em, "  %s *fa_old = static_cast<%s *>(static_cast<void *>(%s));", t, t, scratch(em));
    line(em, "  if (threadIdx.x == 0)");
    line(em, "    *fa_old = %s ? fa::atomic_add(%s, %s) : %s;", cond ? cond : "true", p, v,
         zero_of(em, r->type.dtype));
    line(em, "  __syncthreads();");
    line(em, "  %s = *fa_old;", info(em, r)->name);
    line(em, "  __syncthreads();");
    line(em, "}");
    note_scratch(em, 16);
    return;
  }
  const FaLayout *l = atomic ? op->results[0]->layout : op->aux;
  if (!l) {
    fail(em, op->loc, "internal compiler error: store without a layout");
    return;
  }
  const char *p = operand(em, op, 0), *v = operand(em, op, 1);
  const char *cond = op->noperands > 2 ? operand(em, op, 2) : NULL;
  bool dups = fa_layout_lane_dups(l) || fa_layout_warp_dups(l);
  const char *ln = layout_name(em, l);
  if (atomic && !em->live[op->results[0]->id]) {
    /* the previous values are not used: one thread per element adds */
    if (dups)
      line(em, "if (%s::owner(fa_lane, fa_warp))", ln);
    line(em, "#pragma unroll");
    line(em, "for (int fa_e = 0; fa_e < %d; ++fa_e)", nregs(l));
    if (cond)
      line(em, "  if (%s) fa::atomic_add(%s, %s);", cond, p, v);
    else
      line(em, "  fa::atomic_add(%s, %s);", p, v);
    return;
  }
  if (atomic) {
    const IrValue *r = op->results[0];
    declare_block(em, r, NULL);
    if (dups) {
      /* only the owner adds; the copies would see 0 as the previous value */
      fail(em, op->loc, "atomic_add on a block with copies in several threads (%d elements for %d threads) is "
           "not supported by the CUDA backend yet; use a block of at least as many elements as threads",
           (int)fa_type_numel(r->type), 32 * em->plan.warps);
      return;
    }
    line(em, "#pragma unroll");
    line(em, "for (int fa_e = 0; fa_e < %d; ++fa_e)", nregs(l));
    line(em, "  %s[fa_e] = %s%s%s fa::atomic_add(%s, %s)%s;", info(em, r)->name, cond ? "(" : "", cond ? cond : "",
         cond ? ") ?" : "", p, v, cond ? aprintf(em, " : %s", zero_of(em, r->type.dtype)) : "");
    return;
  }
  if (dups)
    line(em, "if (%s::owner(fa_lane, fa_warp))", ln);
  line(em, "#pragma unroll");
  line(em, "for (int fa_e = 0; fa_e < %d; ++fa_e)", nregs(l));
  if (cond)
    line(em, "  if (%s) *%s = %s;", cond, p, v);
  else
    line(em, "  *%s = %s;", p, v);
}

static void emit_make_block_ptr(Emitter *em, const IrOp *op) {
  const IrValue *r = op->results[0];
  int rank = r->type.rank;
  StrBuf sb;
  fa_sb_init(&sb);
  fa_sb_printf(&sb, "%s, {", value_ref(em, op->operands[0]));
  for (int d = 0; d < rank; d++)
    fa_sb_printf(&sb, "%s(long long)%s", d ? ", " : "", value_ref(em, op->operands[1 + d]));
  fa_sb_puts(&sb, "}, {");
  for (int d = 0; d < rank; d++)
    fa_sb_printf(&sb, "%s(long long)%s", d ? ", " : "", value_ref(em, op->operands[1 + rank + d]));
  fa_sb_puts(&sb, "}, {");
  for (int d = 0; d < rank; d++)
    fa_sb_printf(&sb, "%s(int)%s", d ? ", " : "", value_ref(em, op->operands[1 + 2 * rank + d]));
  fa_sb_puts(&sb, "}");
  line(em, "const %s %s = {%s};", elem_ctype(em, r->type), info(em, r)->name, sb.data ? sb.data : "");
  fa_sb_free(&sb);
}

static void emit_advance(Emitter *em, const IrOp *op) {
  const IrValue *r = op->results[0];
  StrBuf sb;
  fa_sb_init(&sb);
  for (int d = 0; d < r->type.rank; d++)
    fa_sb_printf(&sb, "%s(int)%s", d ? ", " : "", value_ref(em, op->operands[1 + d]));
  line(em, "const %s %s = fa::advance(%s, {%s});", elem_ctype(em, r->type), info(em, r)->name,
       value_ref(em, op->operands[0]), sb.data ? sb.data : "");
  fa_sb_free(&sb);
}

static const char *pad_value(Emitter *em, DType dt, IrPadding pad) {
  if (pad == PAD_NAN && fa_dtype_is_float(dt))
    return float_literal(em, dt, NAN);
  return zero_of(em, dt);
}

static void emit_load_block(Emitter *em, const IrOp *op) {
  const IrValue *r = op->results[0];
  if (info(em, r)->pipe_stages > 1) {
    line(em, "// %s: loaded into shared memory by cp.async, %d iterations ahead (see the loop's head)",
         info(em, r)->name, info(em, r)->pipe_stages - 1);
    return;
  }
  const FaLayout *l = r->layout;
  int v = block_vector_width(em, op->operands[0], l, op->boundary);
  declare_block(em, r, aprintf(em, "%s, %d-element accesses", layout_name(em, l), v));
  line(em, "fa::load_block<%s, %d, 0x%xu>(%s, %s, %s, %s);", layout_name(em, l), v, op->boundary, info(em, r)->name,
       value_ref(em, op->operands[0]), thread_offset(em, l), pad_value(em, r->type.dtype, op->padding));
}

static void emit_store_block(Emitter *em, const IrOp *op) {
  const FaLayout *l = op->aux;
  const char *arr = array_in(em, op->operands[1], l);
  int v = block_vector_width(em, op->operands[0], l, op->boundary);
  line(em, "fa::store_block<%s, %d, 0x%xu>(%s, %s, %s, %s::owner(fa_lane, fa_warp));", layout_name(em, l), v,
       op->boundary, value_ref(em, op->operands[0]), arr, thread_offset(em, l), layout_name(em, l));
}

/* Register-bit lists for fa::Bits<>. */
static const char *bits_list(Emitter *em, const int *v, int n) {
  StrBuf sb;
  fa_sb_init(&sb);
  for (int i = 0; i < n; i++)
    fa_sb_printf(&sb, "%s%d", i ? ", " : "", v[i]);
  const char *s = aprintf(em, "fa::Bits<%s>", sb.data ? sb.data : "");
  fa_sb_free(&sb);
  return s;
}

static void emit_reduce(Emitter *em, const IrOp *op) {
  const IrValue *x = op->operands[0], *r = op->results[0];
  const FaLayout *src = need_of(em, op, 0);
  DType dt = x->type.dtype;
  if (dt == DT_I1 || dt == DT_PTR) {
    fail(em, op->loc, "the CUDA backend cannot reduce %s values", fa_dtype_name(dt));
    return;
  }
  int first, count;
  fa_layout_dim_bits(src, op->axis, &first, &count);
  int keep[FA_LAYOUT_MAX_BITS], red[FA_LAYOUT_MAX_BITS], nk = 0, nr = 0;
  for (int i = 0; i < src->nreg; i++) {
    if (src->reg[i] >= first && src->reg[i] < first + count)
      red[nr++] = i;
    else
      keep[nk++] = i;
  }
  int lane_mask = 0, warp_mask = 0;
  for (int i = 0; i < FA_LAYOUT_LANE_BITS; i++)
    if (src->lane[i] >= first && src->lane[i] < first + count)
      lane_mask |= 1 << i;
  for (int i = 0; i < src->nwarp; i++)
    if (src->warp[i] >= first && src->warp[i] < first + count)
      warp_mask |= 1 << i;
  /* f16 / bf16 accumulate in f32, like the interpreter */
  bool widen = dt == DT_F16 || dt == DT_BF16;
  const char *acc_t = widen ? "float" : ctype(dt);
  const char *in = array_in(em, x, src);
  if (widen) {
    const char *w = fresh_tmp(em, "wide");
    line(em, "float %s[%d];", w, nregs(src));
    line(em, "#pragma unroll");
    line(em, "for (int fa_e = 0; fa_e < %d; ++fa_e)", nregs(src));
    line(em, "  %s[fa_e] = fa::to_f32(%s[fa_e]);", w, in);
    in = w;
  }
  int nd = 1 << nk;
  const char *opname = op->sub == RED_SUM ? "fa::OpSum" : op->sub == RED_MAX ? "fa::OpMax" : "fa::OpMin";
  /* the result comes out in the slice of the operand's layout */
  const FaLayout *sl = NULL;
  if (is_block(r)) {
    FaLayout x;
    fa_layout_slice(&x, src, op->axis);
    sl = fa_layout_intern(em->fc, &em->plan, &x);
    if (!sl || sl->id >= em->nlayouts_alloc) {
      fail(em, op->loc, "internal compiler error: too many layouts");
      return;
    }
  }
  bool direct = is_block(r) && !widen && sl == r->layout;
  const char *dst = direct ? info(em, r)->name : fresh_tmp(em, "red");
  if (direct)
    declare_block(em, r, layout_name(em, r->layout));
  else
    line(em, "%s %s[%d];", acc_t, dst, nd);
  line(em, "fa::reduce<%s, %s, %s, 0x%x, 0x%x>(%s, %s, fa_lane, fa_warp, %s);", opname, bits_list(em, keep, nk),
       bits_list(em, red, nr), (unsigned)lane_mask, (unsigned)warp_mask, dst, in, scratch(em));
  if (warp_mask) {
    int size = widen ? 4 : fa_dtype_size(dt);
    note_scratch(em, (size_t)em->plan.warps * 32u * (size_t)nd * (size_t)size);
  }
  if (is_block(r)) {
    if (widen) {
      const char *rounded = sl == r->layout ? info(em, r)->name : fresh_tmp(em, "red");
      if (sl == r->layout)
        declare_block(em, r, layout_name(em, r->layout));
      else
        line(em, "%s %s[%d];", ctype(dt), rounded, nd);
      line(em, "#pragma unroll");
      line(em, "for (int fa_e = 0; fa_e < %d; ++fa_e)", nd);
      line(em, "  %s[fa_e] = fa::convert<%s>(%s[fa_e]);", rounded, ctype(dt), dst);
      dst = rounded;
    }
    if (sl != r->layout) {
      declare_block(em, r, layout_name(em, r->layout));
      emit_convert(em, info(em, r)->name, dst, r->type, sl, r->layout);
    }
  } else {
    line(em, "const %s %s = %s;", ctype(dt), info(em, r)->name,
         widen ? aprintf(em, "fa::convert<%s>(%s[0])", ctype(dt), dst) : aprintf(em, "%s[0]", dst));
  }
}

/* ---- wgmma (sm_90a) ------------------------------------------------------------------------------------
 * A product of f16/bf16 blocks runs as warpgroup instructions wgmma.m64nNk16
 * when its accumulator layout is the mma.sync one with every warp along M
 * (wm = warps, a multiple of 4, wn = 1): then, for each of the warp's
 * 16-row blocks mt, the four warps of warpgroup g hold rows (mt * wm + 4g) *
 * 16 .. + 63, and each thread's accumulator registers of that block are, in
 * order, wgmma's for m64nN.  B is read from its swizzled tile through a
 * shared-memory descriptor; A from registers (the mma.sync A fragments,
 * which are wgmma's too) or from its swizzled tile.  Everything else (other
 * warp splits, padded tiles) keeps mma.sync, with the same layouts. */

typedef struct WgmmaDot {
  int mt, nt, kt, wm;       /* 16-row blocks per warp, n8 blocks, k16 steps, warps along M */
  DType in;                 /* f16 or bf16 */
  bool a_f32;               /* A: f32 registers rounded to `in` on the way (x.to(T) fused) */
  bool a_tile;              /* A from its tile (else registers of type `in`) */
  bool a_k_inner, b_k_inner;
  const ValInfo *ai, *bi;   /* the tiles (ai NULL when A is in registers) */
} WgmmaDot;

/* The tiles a tensor-core product reads: B's, and A's unless A comes from
 * registers; each the operand's own value or what it is the transpose of,
 * and whether the tile runs along K. */
typedef struct DotTiles {
  const IrValue *bs, *as;   /* as NULL: A in registers */
  const ValInfo *bi, *ai;
  bool b_k_inner, a_k_inner;
} DotTiles;

static DotTiles dot_tiles(Emitter *em, const IrOp *op) {
  const FaDotPlan *dp = op->aux;
  DotTiles t = {0};
  bool flip;
  t.bs = tile_source(em, op->operands[1], &flip);
  t.bi = info(em, t.bs);
  t.b_k_inner = flip ? t.bi->tile_inner == 1 : t.bi->tile_inner == 0;
  t.a_k_inner = true;
  if (!dp->a_in_regs) {
    t.as = tile_source(em, op->operands[0], &flip);
    t.ai = info(em, t.as);
    t.a_k_inner = flip ? t.ai->tile_inner == 0 : t.ai->tile_inner == 1;
  }
  return t;
}

/* Whether a tensor-core product (FA_DOT_MMA) runs as wgmma. */
static bool wgmma_fits(const Emitter *em, const IrOp *op, const DotTiles *t) {
  const FaDotPlan *dp = op->aux;
  int warps = em->plan.warps, N = op->operands[1]->type.shape[1], K = op->operands[0]->type.shape[1];
  return has_wgmma(em) && warps % 4 == 0 && dp->wm == warps && dp->wn == 1 && N % 8 == 0 && N <= 256 &&
         K % 16 == 0 && t->bi->staged && t->bi->tile_sw != 0 && (!t->ai || (t->ai->staged && t->ai->tile_sw != 0));
}

/* The swizzle mode of a descriptor: 1, 2, 3 for 128, 64, 32 bytes. */
static int swizzle_mode(int sw) { return sw == 128 ? 1 : sw == 64 ? 2 : 3; }

/* C expressions for a tile's descriptor fields: the byte offset of element
 * (mn0, k0) (mn along M or N), leading and stride byte offsets.  A K-major
 * tile (k contiguous) has rows along mn, a tile of the other kind rows
 * along k; 8 rows make one swizzle period (SBO apart), and blocks of SW
 * bytes along the row are ROWS * SW apart (the LBO of an MN-major operand;
 * a K-major one never crosses a block within a k16 step). */
static void wgmma_operand(Emitter *em, const ValInfo *t, bool k_inner, const char *mn0, const char *k0,
                          const char **off, int *lbo, int *sbo) {
  int sw = t->tile_sw, block = t->tile_rows * sw;
  if (k_inner) {
    *off = aprintf(em, "((%s) * 2 / %d) * %d + (%s) * %d + ((%s) * 2) %% %d", k0, sw, block, mn0, sw, k0, sw);
    *lbo = 16;
  } else {
    *off = aprintf(em, "((%s) * 2 / %d) * %d + (%s) * %d", mn0, sw, block, k0, sw);
    *lbo = block;
  }
  *sbo = 8 * sw;
}

/* The helper's signature: the accumulator, A (a tile address, or the
 * registers in the fragment layout), B's tile address, the warp. */
static void wgmma_signature(Emitter *em, const WgmmaDot *w, const char *name) {
  StrBuf *h = &em->helpers;
  int N = w->nt * 8;
  fa_sb_printf(h, "// c += a . b: wgmma.m64n%dk16, A from %s, B from a swizzled tile (%s-major)\n", N,
               w->a_tile ? "a swizzled tile" : w->a_f32 ? "f32 registers rounded on the way" : "registers",
               w->b_k_inner ? "K" : "N");
  fa_sb_printf(h, "static __device__ __forceinline__ void %s(float (&c)[%d], ", name, w->mt * w->nt * 4);
  if (w->a_tile)
    fa_sb_puts(h, "unsigned a_tile, ");
  else
    fa_sb_printf(h, "const %s (&a)[%d], ", w->a_f32 ? "float" : ctype(w->in), w->mt * w->kt * 8);
  fa_sb_puts(h, "unsigned b_tile, int warp) {\n");
}

/* A from registers: the warp's fragments of row block mt for every k step,
 * packed before the fence (wgmma reads them asynchronously). */
static void wgmma_a_fragments(Emitter *em, const WgmmaDot *w) {
  StrBuf *h = &em->helpers;
  fa_sb_printf(h, "    unsigned af[%d][4];\n#pragma unroll\n    for (int kt = 0; kt < %d; ++kt) {\n", w->kt, w->kt);
  fa_sb_printf(h, "      const int ia = (mt * %d + kt) * 8;\n#pragma unroll\n      for (int i = 0; i < 4; ++i)\n",
               w->kt);
  if (w->a_f32)
    fa_sb_printf(h, "        af[kt][i] = fa::pack2_from_f32(a[ia + 2 * i], a[ia + 2 * i + 1], %s{});\n",
                 ctype(w->in));
  else
    fa_sb_puts(h, "        af[kt][i] = fa::pack2(a[ia + 2 * i], a[ia + 2 * i + 1]);\n");
  fa_sb_puts(h, "    }\n");
}

/* The descriptors of step kt: B's, and A's when A is a tile (its rows start
 * at the warpgroup's 64-row block of row block mt). */
static void wgmma_descriptors(Emitter *em, const WgmmaDot *w) {
  StrBuf *h = &em->helpers;
  const char *off;
  int lbo, sbo;
  wgmma_operand(em, w->bi, w->b_k_inner, "0", "kt * 16", &off, &lbo, &sbo);
  fa_sb_printf(h, "      const unsigned long long db = fa::wgmma_desc(b_tile + %s, %d, %d, %d);\n", off, lbo, sbo,
               swizzle_mode(w->bi->tile_sw));
  if (w->a_tile) {
    wgmma_operand(em, w->ai, w->a_k_inner, aprintf(em, "(mt * %d + 4 * g) * 16", w->wm), "kt * 16", &off, &lbo, &sbo);
    fa_sb_printf(h, "      const unsigned long long da = fa::wgmma_desc(a_tile + %s, %d, %d, %d);\n", off, lbo, sbo,
                 swizzle_mode(w->ai->tile_sw));
  }
}

/* The instruction of step kt: R accumulator registers (read and written),
 * then A (a descriptor, or 4 fragment registers), B's descriptor and the
 * scale-d operand (1: accumulate), turned into the predicate p. */
static void wgmma_instruction(Emitter *em, const WgmmaDot *w) {
  StrBuf *h = &em->helpers;
  const char *ptx = w->in == DT_BF16 ? "bf16" : "f16";
  int R = w->nt * 4, na = w->a_tile ? 1 : 4;
  fa_sb_puts(h, "      asm volatile(\"{\\n.reg .pred p;\\n");
  fa_sb_printf(h, "setp.ne.b32 p, %%%d, 0;\\n", R + na + 1);
  fa_sb_printf(h, "wgmma.mma_async.sync.aligned.m64n%dk16.f32.%s.%s {", w->nt * 8, ptx, ptx);
  for (int i = 0; i < R; i++)
    fa_sb_printf(h, "%s%%%d", i ? ", " : "", i);
  if (w->a_tile)
    fa_sb_printf(h, "}, %%%d, %%%d, p, 1, 1, %d, %d;\\n}\\n\"\n", R, R + 1, w->a_k_inner ? 0 : 1,
                 w->b_k_inner ? 0 : 1);
  else
    fa_sb_printf(h, "}, {%%%d, %%%d, %%%d, %%%d}, %%%d, p, 1, 1, %d;\\n}\\n\"\n", R, R + 1, R + 2, R + 3, R + 4,
                 w->b_k_inner ? 0 : 1);
  fa_sb_puts(h, "                   : ");
  for (int i = 0; i < R; i++)
    fa_sb_printf(h, "%s\"+f\"(c[mt * %d + %d])", i ? ", " : "", R, i);
  fa_sb_puts(h, "\n                   : ");
  if (w->a_tile)
    fa_sb_puts(h, "\"l\"(da), ");
  else
    fa_sb_puts(h, "\"r\"(af[kt][0]), \"r\"(af[kt][1]), \"r\"(af[kt][2]), \"r\"(af[kt][3]), ");
  fa_sb_puts(h, "\"l\"(db), \"r\"(1));\n");
}

/* Writes the device function for one product (into em->helpers) and
 * returns its name: per row block mt, the fence and the k16 steps; one
 * commit and wait for the whole product. */
static const char *emit_wgmma_helper(Emitter *em, const WgmmaDot *w) {
  const char *name = aprintf(em, "fa_wgmma_%d", em->nhelpers++);
  StrBuf *h = &em->helpers;
  wgmma_signature(em, w, name);
  fa_sb_printf(h, "  const int g = warp >> 2;  // warpgroup\n  (void)g;\n");
  fa_sb_printf(h, "#pragma unroll\n  for (int mt = 0; mt < %d; ++mt) {\n", w->mt);
  if (!w->a_tile)
    wgmma_a_fragments(em, w);
  fa_sb_puts(h, "    fa::wgmma_fence();\n");
  fa_sb_printf(h, "#pragma unroll\n    for (int kt = 0; kt < %d; ++kt) {\n", w->kt);
  wgmma_descriptors(em, w);
  wgmma_instruction(em, w);
  fa_sb_puts(h, "    }\n  }\n");
  fa_sb_puts(h, "  fa::wgmma_commit();\n  fa::wgmma_wait<0>();\n}\n\n");
  return name;
}

/* Whether some product of the kernel runs on wgmma (its tiles are then
 * written with a proxy fence before the barrier that publishes them). */
static void plan_async_reads(Emitter *em, const IrRegion *r) {
  for (const IrOp *op = r->first; op; op = op->next) {
    const FaDotPlan *dp = op->kind == IR_DOT ? op->aux : NULL;
    if (dp && dp->kind == FA_DOT_MMA && op_live(em, op)) {
      DotTiles t = dot_tiles(em, op);
      if (wgmma_fits(em, op, &t))
        em->async_reads = true;
    }
    for (int i = 0; i < op->nregions; i++)
      plan_async_reads(em, op->regions[i]);
  }
}

/* r = dot(...) (+ the accumulator operand), or, for a fused add, r = the
 * add's other operand + dot(...). */
static void emit_dot_into(Emitter *em, const IrOp *op, const IrValue *r, const IrOp *add, int addend) {
  const FaDotPlan *dp = op->aux;
  const IrValue *a = op->operands[0], *b = op->operands[1];
  const FaLayout *lc = dp->acc;
  DType in = a->type.dtype, out = r->type.dtype;
  int M = a->type.shape[0], K = a->type.shape[1], N = b->type.shape[1];
  DType acc_dt;
  if (dp->kind == FA_DOT_MMA)
    acc_dt = DT_F32;
  else if (in == DT_F64)
    acc_dt = DT_F64;
  else if (fa_dtype_is_float(in))
    acc_dt = DT_F32;
  else if (in == DT_I64)
    acc_dt = DT_I64;
  else
    acc_dt = DT_I32;
  const char *acc_t = ctype(acc_dt);
  bool direct = acc_dt == out;
  const char *c = direct ? info(em, r)->name : fresh_tmp(em, "acc");
  if (direct)
    declare_block(em, r, layout_name(em, lc));
  else
    line(em, "%s %s[%d];", acc_t, c, nregs(lc));
  line(em, "#pragma unroll");
  line(em, "for (int fa_e = 0; fa_e < %d; ++fa_e)", nregs(lc));
  if (add)
    line(em, "  %s[fa_e] = %s;  // the product accumulates onto the other addend", c, operand(em, add, addend));
  else if (op->noperands > 2)
    line(em, "  %s[fa_e] = %s;", c, cast_expr(em, acc_dt, op->operands[2]->type.dtype, operand(em, op, 2)));
  else
    line(em, "  %s[fa_e] = %s;", c, zero_of(em, acc_dt));
  if (dp->kind == FA_DOT_MMA) {
    int mt = M / (16 * dp->wm), nt = N / (8 * dp->wn), kt = K / 16;
    DotTiles t = dot_tiles(em, op);
    const IrValue *bs = t.bs, *as = t.as;
    bool a_k_inner = t.a_k_inner, b_k_inner = t.b_k_inner;
    const IrValue *fused = fused_cast_source(&em->plan, op, 0);
    if (wgmma_fits(em, op, &t)) {
      WgmmaDot w = {mt, nt, kt, dp->wm, in, fused != NULL, !dp->a_in_regs, a_k_inner, b_k_inner, t.ai, t.bi};
      const char *fn = emit_wgmma_helper(em, &w);
      if (fused)
        line(em, "%s(%s, %s, %s, fa_warp);  // A = %s.to(%s)", fn, c, array_in(em, fused, dp->a), tile_address(em, bs),
             info(em, fused)->name, fa_dtype_name(in));
      else if (dp->a_in_regs)
        line(em, "%s(%s, %s, %s, fa_warp);", fn, c, array_in(em, a, dp->a), tile_address(em, bs));
      else
        line(em, "%s(%s, %s, %s, fa_warp);", fn, c, tile_address(em, as), tile_address(em, bs));
      line(em, "// (wgmma: %d x %d blocks of 64 rows per warpgroup, n%d, %d steps of k16)", mt, dp->wm / 4, N, kt);
    } else {
      const char *b_tile = tile_address(em, bs);
      const char *fb = tile_format(em, bs);
      if (fused) {
        line(em, "fa::mma_rs_cvt<%d, %d, %d, %d, %d, %s, %s, %s>(%s, %s, %s, fa_lane, fa_warp);  // A = %s.to(%s)", mt,
             nt, kt, dp->wm, dp->wn, b_k_inner ? "true" : "false", fb, ctype(in), c, array_in(em, fused, dp->a),
             b_tile, info(em, fused)->name, fa_dtype_name(in));
      } else if (dp->a_in_regs) {
        line(em, "fa::mma_rs<%d, %d, %d, %d, %d, %s, %s>(%s, %s, %s, fa_lane, fa_warp);", mt, nt, kt, dp->wm, dp->wn,
             b_k_inner ? "true" : "false", fb, c, array_in(em, a, dp->a), b_tile);
      } else {
        line(em, "fa::mma_ss<%d, %d, %d, %d, %d, %s, %s, %s, %s, %s>(%s, %s, %s, fa_lane, fa_warp);", mt, nt, kt,
             dp->wm, dp->wn, a_k_inner ? "true" : "false", b_k_inner ? "true" : "false", tile_format(em, as), fb,
             ctype(in), c, tile_address(em, as), b_tile);
      }
      line(em, "// (per warp: %d x %d tiles of 16x8, %d steps of k16)", mt, nt, kt);
    }
  }
  const FaLayout *la = dp->kind == FA_DOT_MMA ? NULL : need_of(em, op, 0);
  const FaLayout *lb = dp->kind == FA_DOT_MMA ? NULL : need_of(em, op, 1);
  const char *aa = la ? array_in(em, a, la) : NULL, *bb = lb ? array_in(em, b, lb) : NULL;
  if (dp->kind == FA_DOT_FMA && in == DT_F32 && op->sub == DOT_TF32) {
    /* tf32: operands rounded to 10 mantissa bits first, as the interpreter does */
    const char *ta = fresh_tmp(em, "tf32a"), *tb = fresh_tmp(em, "tf32b");
    line(em, "float %s[%d], %s[%d];", ta, nregs(la), tb, nregs(lb));
    line(em, "#pragma unroll");
    line(em, "for (int fa_e = 0; fa_e < %d; ++fa_e) %s[fa_e] = fa::round_tf32(%s[fa_e]);", nregs(la), ta, aa);
    line(em, "#pragma unroll");
    line(em, "for (int fa_e = 0; fa_e < %d; ++fa_e) %s[fa_e] = fa::round_tf32(%s[fa_e]);", nregs(lb), tb, bb);
    aa = ta;
    bb = tb;
  }
  if (dp->kind == FA_DOT_FMA) {
    line(em, "fa::dot_fma<%s, %s, %s, %d, %d, %d>(%s, %s, %s, fa_lane, fa_warp, %s);", layout_name(em, la),
         layout_name(em, lb), layout_name(em, lc), M, N, K, c, aa, bb, scratch(em));
    int size = fa_dtype_size(in);
    note_scratch(em, (size_t)(M * K + K * N) * (size_t)size);
  }
  if (!direct) {
    declare_block(em, r, layout_name(em, lc));
    line(em, "#pragma unroll");
    line(em, "for (int fa_e = 0; fa_e < %d; ++fa_e)", nregs(lc));
    line(em, "  %s[fa_e] = %s;", info(em, r)->name, cast_expr(em, out, acc_dt, aprintf(em, "%s[fa_e]", c)));
  }
}

static void emit_dot(Emitter *em, const IrOp *op) {
  if (info(em, op->results[0])->fused_add) {
    line(em, "// (computed by the addition below, accumulating onto its other operand)");
    return;
  }
  emit_dot_into(em, op, op->results[0], NULL, 0);
}

/* broadcast, expand_dims, reshape, trans of stored values. */
static void emit_reshape_like(Emitter *em, const IrOp *op) {
  const IrValue *x = op->operands[0], *r = op->results[0];
  const FaLayout *need = need_of(em, op, 0);
  const char *src = array_in(em, x, need);
  if (op->kind != IR_BROADCAST || fa_type_numel(x->type) == fa_type_numel(r->type)) {
    /* the same registers under another shape */
    line(em, "%s (&%s)[%d] = %s;  // %s", elem_ctype(em, r->type), info(em, r)->name, nregs(r->layout), src,
         layout_name(em, r->layout));
    return;
  }
  /* broadcast: register bit i of the result is register bit map[i] of the
   * operand, or none for the stretched dimensions */
  const FaLayout *l = r->layout;
  unsigned stretched = 0;
  for (int d = 0; d < r->type.rank; d++)
    if (x->type.shape[d] != r->type.shape[d]) {
      int first, count;
      fa_layout_dim_bits(l, d, &first, &count);
      for (int j = 0; j < count; j++)
        stretched |= 1u << (first + j);
    }
  int map[FA_LAYOUT_MAX_BITS], n = 0;
  for (int i = 0; i < l->nreg; i++)
    map[i] = (stretched & (1u << l->reg[i])) ? -1 : n++;
  declare_block(em, r, layout_name(em, l));
  line(em, "fa::regmap<%s>(%s, %s);  // broadcast", bits_list(em, map, l->nreg), info(em, r)->name, src);
}

static void emit_assert(Emitter *em, const IrOp *op) {
  const char *msg = op->str ? op->str : "device assertion failed";
  StrBuf esc;
  fa_sb_init(&esc);
  for (const char *p = msg; *p; p++) {
    if (*p == '"' || *p == '\\')
      fa_sb_putc(&esc, '\\');
    if ((unsigned char)*p < 0x20)
      fa_sb_putc(&esc, ' ');
    else
      fa_sb_putc(&esc, *p);
  }
  const char *file = op->loc.src && op->loc.src->name ? op->loc.src->name : "<string>";
  StrBuf fesc;
  fa_sb_init(&fesc);
  for (const char *p = file; *p; p++) {
    if (*p == '"' || *p == '\\')
      fa_sb_putc(&fesc, '\\');
    fa_sb_putc(&fesc, (unsigned char)*p < 0x20 ? ' ' : *p);
  }
  const char *call = aprintf(em, "fa::assert_fail(\"%s\", \"%s\", %d, \"%s\")", esc.data ? esc.data : "",
                             fesc.data ? fesc.data : "", op->loc.line, em->fn->name ? em->fn->name : "kernel");
  fa_sb_free(&esc);
  fa_sb_free(&fesc);
  if (!is_block(op->operands[0])) {
    line(em, "if (!(%s)) %s;", value_ref(em, op->operands[0]), call);
    return;
  }
  const FaLayout *l = op->aux;
  line(em, "#pragma unroll");
  line(em, "for (int fa_e = 0; fa_e < %d; ++fa_e)", nregs(l));
  line(em, "  if (!(%s)) %s;", operand(em, op, 0), call);
}

/* Declares the variable of a loop-carried value or an if result. */
static void declare_var(Emitter *em, const IrValue *v, const char *name) {
  if (is_block(v))
    line(em, "%s %s[%d];  // %s", elem_ctype(em, v->type), name, nregs(v->layout), layout_name(em, v->layout));
  else
    line(em, "%s %s;", elem_ctype(em, v->type), name);
}

/* dst = value (in dst's layout). */
static void assign_var(Emitter *em, const char *dst, const IrValue *dstv, const IrOp *user, int i) {
  const IrValue *x = user->operands[i];
  if (is_block(dstv)) {
    line(em, "#pragma unroll");
    line(em, "for (int fa_e = 0; fa_e < %d; ++fa_e)", nregs(dstv->layout));
    line(em, "  %s[fa_e] = %s;", dst, operand(em, user, i));
  } else {
    line(em, "%s = %s;", dst, value_ref(em, x));
  }
}

static void emit_for(Emitter *em, const IrOp *op) {
  IrRegion *body = op->regions[0];
  int n = op->nresults;
  /* loop-carried variables: named after the iteration values */
  for (int i = 0; i < n; i++) {
    IrValue *arg = body->args[1 + i];
    const char *name = fresh_name(em, arg->name ? arg->name : op->results[i]->name);
    info(em, arg)->name = name;
    info(em, op->results[i])->name = name;
    declare_var(em, arg, name);
    assign_var(em, name, arg, op, 3 + i);
  }
  IrValue *iv = body->args[0];
  const char *ivn = fresh_name(em, iv->name ? iv->name : "iv");
  info(em, iv)->name = ivn;
  /* pipelined loads of this loop */
  PtrVec piped = {0};
  for (const IrOp *b = body->first; b; b = b->next)
    if (b->kind == IR_LOAD_BLOCK && info(em, b->results[0])->pipe_loop == op)
      fa_ptrvec_push(&piped, b->results[0]);
  const char *counter = NULL;
  int stages = 0;
  const char *lb = value_ref(em, op->operands[0]), *ub = value_ref(em, op->operands[1]);
  const char *step = value_ref(em, op->operands[2]);
  if (piped.len > 0) {
    counter = fresh_tmp(em, "it");
    stages = info(em, piped.items[0])->pipe_stages;
    line(em, "// software pipeline: the tiles of the next %d iterations are loaded while this one computes", stages - 1);
    line(em, "int %s = 0;", counter);
    line(em, "__syncthreads();  // the buffers may have held other tiles");
    for (int s = 0; s + 1 < stages; s++) {
      line(em, "if (%s + %d * %s < %s) {", lb, s, step, ub);
      em->indent++;
      for (int i = 0; i < piped.len; i++) {
        const IrValue *x = piped.items[i];
        info(em, x)->pipe_counter = counter;
        emit_async_load(em, x, value_ref(em, op->operands[3 + info(em, x)->pipe_arg - 1]), s, aprintf(em, "%d", s));
      }
      em->indent--;
      line(em, "}");
      line(em, "fa::cp_async_commit();");
    }
  }
  line(em, "for (%s %s = %s; %s < %s; %s += %s) {", ctype(iv->type.dtype), ivn, lb, ivn, ub, ivn, step);
  em->indent++;
  if (piped.len > 0) {
    line(em, "__syncthreads();  // every warp is done with the buffer refilled now");
    line(em, "if (%s + %d * %s < %s) {", ivn, stages - 1, step, ub);
    em->indent++;
    for (int i = 0; i < piped.len; i++) {
      const IrValue *x = piped.items[i];
      emit_async_load(em, x, info(em, body->args[info(em, x)->pipe_arg])->name, stages - 1,
                      aprintf(em, "(%s + %d) %% %d", counter, stages - 1, stages));
    }
    em->indent--;
    line(em, "}");
    line(em, "fa::cp_async_commit();");
    line(em, "fa::cp_async_wait<%d>();  // this iteration's tiles have landed", stages - 1);
    if (em->async_reads)
      line(em, "fa::fence_async_smem();  // visible to the tensor cores' async proxy too");
    line(em, "__syncthreads();");
  }
  for (int i = 0; i < n; i++)
    emit_conversions(em, body->args[1 + i]);
  emit_region(em, body);
  /* the yield: through temporaries when an update reads another carried value */
  const IrOp *y = body->last;
  if (y && y->kind == IR_YIELD && y->noperands == n) {
    bool swap = false;
    for (int i = 0; i < n; i++)
      for (int j = 0; j < n; j++)
        if (i != j && y->operands[i] == body->args[1 + j])
          swap = true;
    const char **tmp = fa_arena_alloc(&em->fc->arena, (size_t)(n + 1) * sizeof *tmp);
    if (!tmp) {
      em->ok = false;
      return;
    }
    for (int i = 0; i < n; i++) {
      IrValue *arg = body->args[1 + i];
      if (y->operands[i] == arg && !fa_value_is_virtual(&em->plan, arg)) {
        tmp[i] = NULL;
        continue;
      }
      if (swap) {
        tmp[i] = fresh_tmp(em, "next");
        declare_var(em, arg, tmp[i]);
        assign_var(em, tmp[i], arg, y, i);
      } else {
        assign_var(em, info(em, arg)->name, arg, y, i);
        tmp[i] = NULL;
      }
    }
    if (swap)
      for (int i = 0; i < n; i++)
        if (tmp[i]) {
          IrValue *arg = body->args[1 + i];
          if (is_block(arg)) {
            line(em, "#pragma unroll");
            line(em, "for (int fa_e = 0; fa_e < %d; ++fa_e)", nregs(arg->layout));
            line(em, "  %s[fa_e] = %s[fa_e];", info(em, arg)->name, tmp[i]);
          } else {
            line(em, "%s = %s;", info(em, arg)->name, tmp[i]);
          }
        }
  }
  if (counter)
    line(em, "++%s;", counter);
  em->indent--;
  line(em, "}");
  if (counter)
    line(em, "fa::cp_async_wait<0>();");
  fa_ptrvec_free(&piped);
  for (int i = 0; i < n; i++)
    emit_conversions(em, op->results[i]);
}

static void emit_if(Emitter *em, const IrOp *op) {
  for (int i = 0; i < op->nresults; i++) {
    if (!em->live[op->results[i]->id])
      continue; /* (the flag of an early return after the last statement, say) */
    const char *name = fresh_name(em, op->results[i]->name);
    info(em, op->results[i])->name = name;
    declare_var(em, op->results[i], name);
  }
  line(em, "if (%s) {", value_ref(em, op->operands[0]));
  for (int r = 0; r < op->nregions; r++) {
    if (r == 1)
      line(em, "} else {");
    em->indent++;
    const IrRegion *reg = op->regions[r];
    emit_region(em, reg);
    const IrOp *y = reg->last;
    if (y && y->kind == IR_YIELD)
      for (int i = 0; i < y->noperands && i < op->nresults; i++)
        if (em->live[op->results[i]->id])
          assign_var(em, info(em, op->results[i])->name, op->results[i], y, i);
    em->indent--;
  }
  line(em, "}");
  for (int i = 0; i < op->nresults; i++)
    emit_conversions(em, op->results[i]);
}

/* ---- scans, random numbers, device_print, while loops ---------------------------------------------- */

static void emit_fma(Emitter *em, const IrOp *op) {
  emit_elementwise(em, op->results[0],
                   aprintf(em, "fa::fma(%s, %s, %s)", operand(em, op, 0), operand(em, op, 1), operand(em, op, 2)));
}

static void emit_rand(Emitter *em, const IrOp *op) {
  emit_elementwise(em, op->results[0],
                   aprintf(em, "fa::%s<%d>(%s, %s)", op->sub == RAND_NORMAL ? "rand_normal" : "rand_uniform",
                           (int)op->ival, value_ref(em, op->operands[0]), operand(em, op, 1)));
}

/* Bytes of the struct holding one element of each scanned value (C++ layout). */
static size_t scan_struct_bytes(const IrOp *op) {
  size_t off = 0, align = 1;
  for (int k = 0; k < op->nresults; k++) {
    size_t s = (size_t)fa_dtype_size(op->results[k]->type.dtype);
    off = (off + s - 1) / s * s + s;
    if (s > align)
      align = s;
  }
  return (off + align - 1) / align * align;
}

/* The struct a scan works on, written ahead of the kernel: one field per
 * scanned value, the combine region as its `combine`, and a lane shuffle. */
static const char *emit_scan_struct(Emitter *em, const IrOp *op) {
  const char *t = aprintf(em, "fa_Scan%d", em->nhelpers++);
  const IrRegion *c = op->regions[0];
  int n = op->nresults;
  StrBuf saved = em->body;
  int saved_indent = em->indent;
  fa_sb_init(&em->body);
  em->indent = 1;
  line(em, "// the combine function of the scan at line %d", op->loc.line);
  line(em, "struct %s {", t);
  for (int k = 0; k < n; k++)
    line(em, "  %s v%d;", ctype(op->results[k]->type.dtype), k);
  line(em, "  FA_DEV static %s combine(const %s &fa_a, const %s &fa_b) {", t, t, t);
  em->indent = 2;
  for (int k = 0; k < 2 * n; k++) {
    const IrValue *arg = c->args[k];
    info(em, arg)->name = fresh_name(em, arg->name);
    line(em, "const %s %s = fa_%c.v%d;", ctype(arg->type.dtype), info(em, arg)->name, k < n ? 'a' : 'b', k % n);
  }
  int last_line = em->last_line;
  em->last_line = op->loc.line; /* the combine's source lines, not the scan's */
  emit_region(em, c);
  em->last_line = last_line;
  const IrOp *y = c->last;
  StrBuf init;
  fa_sb_init(&init);
  for (int k = 0; y && k < y->noperands; k++)
    fa_sb_printf(&init, "%s%s", k ? ", " : "", value_ref(em, y->operands[k]));
  line(em, "return %s{%s};", t, init.data ? init.data : "");
  fa_sb_free(&init);
  em->indent = 1;
  line(em, "  }");
  StrBuf sh;
  fa_sb_init(&sh);
  for (int k = 0; k < n; k++)
    fa_sb_printf(&sh, "%sfa::shfl_xor(v%d, fa_m)", k ? ", " : "", k);
  line(em, "  FA_DEV %s shfl_xor(int fa_m) const { return %s{%s}; }", t, t, sh.data ? sh.data : "");
  fa_sb_free(&sh);
  line(em, "};");
  fa_sb_putc(&em->body, '\n');
  fa_sb_puts(&em->helpers, em->body.data ? em->body.data : "");
  fa_sb_free(&em->body);
  em->body = saved;
  em->indent = saved_indent;
  return t;
}

/* scan: the elements packed into the struct, fa::scan over the axis's bits
 * (whatever hardware holds them), unpacked into the results. */
/* The hardware bits that hold an axis of layout l, lowest first, as
 * fa::scan's step codes; *warps: some are warp bits. */
static const char *axis_steps(Emitter *em, const FaLayout *l, int axis, bool *warps) {
  int first, count;
  fa_layout_dim_bits(l, axis, &first, &count);
  StrBuf steps;
  fa_sb_init(&steps);
  *warps = false;
  for (int b = first; b < first + count; b++) {
    int code = -1;
    for (int i = 0; i < l->nreg; i++)
      if (l->reg[i] == b)
        code = i;
    for (int i = 0; i < FA_LAYOUT_LANE_BITS; i++)
      if (l->lane[i] == b)
        code = 32 + i;
    for (int i = 0; i < l->nwarp; i++)
      if (l->warp[i] == b)
        code = 64 + i, *warps = true;
    fa_sb_printf(&steps, ", %d", code);
  }
  const char *r = aprintf(em, "%s", steps.data ? steps.data : "");
  fa_sb_free(&steps);
  return r;
}

/* The operands packed into an array of the combine struct, in layout l. */
static const char *pack_operands(Emitter *em, const IrOp *op, const char *t, const FaLayout *l) {
  const char *buf = fresh_tmp(em, "comb");
  int nr = nregs(l);
  line(em, "%s %s[%d];", t, buf, nr);
  line(em, "#pragma unroll");
  line(em, "for (int fa_e = 0; fa_e < %d; ++fa_e) {", nr);
  for (int k = 0; k < op->noperands; k++)
    line(em, "  %s[fa_e].v%d = %s;", buf, k, operand(em, op, k));
  line(em, "}");
  return buf;
}

/* reduce with a combine function: every element combined with the whole of
 * its row (fa::combine_all), then the registers of the axis dropped (the
 * slice layout), converted where a result is wanted in another layout. */
static void emit_reduce_fn(Emitter *em, const IrOp *op) {
  const FaLayout *src = need_of(em, op, 0);
  const char *t = emit_scan_struct(em, op);
  bool warps;
  const char *steps = axis_steps(em, src, op->axis, &warps);
  const char *buf = pack_operands(em, op, t, src);
  line(em, "fa::combine_all<%s>(%s, fa_lane, fa_warp, %s);  // along axis %d of %s", steps[0] ? steps + 2 : "", buf,
       scratch(em), op->axis, layout_name(em, src));
  if (warps)
    note_scratch(em, (size_t)em->plan.warps * 32u * (size_t)nregs(src) * scan_struct_bytes(op));
  int first, count, keep[FA_LAYOUT_MAX_BITS], nk = 0;
  fa_layout_dim_bits(src, op->axis, &first, &count);
  for (int i = 0; i < src->nreg; i++)
    if (src->reg[i] < first || src->reg[i] >= first + count)
      keep[nk++] = i;
  const FaLayout *sl = NULL;
  if (is_block(op->results[0])) {
    FaLayout x;
    fa_layout_slice(&x, src, op->axis);
    sl = fa_layout_intern(em->fc, &em->plan, &x);
    if (!sl || sl->id >= em->nlayouts_alloc) {
      fail(em, op->loc, "internal compiler error: too many layouts");
      return;
    }
  }
  const char *red = fresh_tmp(em, "red");
  line(em, "%s %s[%d];", t, red, 1 << nk);
  line(em, "fa::regmap<%s>(%s, %s);", bits_list(em, keep, nk), red, buf);
  for (int k = 0; k < op->nresults; k++) {
    const IrValue *r = op->results[k];
    if (!em->live[r->id])
      continue;
    if (!is_block(r)) {
      line(em, "const %s %s = %s[0].v%d;", ctype(r->type.dtype), info(em, r)->name, red, k);
      continue;
    }
    const char *dst = sl == r->layout ? info(em, r)->name : fresh_tmp(em, "red");
    if (sl == r->layout)
      declare_block(em, r, layout_name(em, sl));
    else
      line(em, "%s %s[%d];", ctype(r->type.dtype), dst, nregs(sl));
    line(em, "#pragma unroll");
    line(em, "for (int fa_e = 0; fa_e < %d; ++fa_e)", nregs(sl));
    line(em, "  %s[fa_e] = %s[fa_e].v%d;", dst, red, k);
    if (sl != r->layout) {
      declare_block(em, r, layout_name(em, r->layout));
      emit_convert(em, info(em, r)->name, dst, r->type, sl, r->layout);
    }
  }
}

static void emit_scan(Emitter *em, const IrOp *op) {
  const FaLayout *l = op->results[0]->layout;
  if (!l) {
    fail(em, op->loc, "internal compiler error: scan without a layout");
    return;
  }
  const char *t = emit_scan_struct(em, op);
  bool warps;
  const char *steps = axis_steps(em, l, op->axis, &warps);
  const char *buf = pack_operands(em, op, t, l);
  int nr = nregs(l);
  line(em, "fa::scan<%s%s>(%s, fa_lane, fa_warp, %s);  // along axis %d of %s", op->ival ? "true" : "false", steps, buf,
       scratch(em), op->axis, layout_name(em, l));
  if (warps)
    note_scratch(em, (size_t)em->plan.warps * 32u * (size_t)nr * scan_struct_bytes(op));
  for (int k = 0; k < op->nresults; k++) {
    const IrValue *r = op->results[k];
    if (!em->live[r->id])
      continue;
    declare_block(em, r, layout_name(em, l));
    line(em, "#pragma unroll");
    line(em, "for (int fa_e = 0; fa_e < %d; ++fa_e)", nr);
    line(em, "  %s[fa_e] = %s[fa_e].v%d;", info(em, r)->name, buf, k);
  }
}

/* A C string literal's contents for text that goes into a printf format. */
static const char *format_text(Emitter *em, const char *s) {
  StrBuf sb;
  fa_sb_init(&sb);
  for (const char *p = s ? s : ""; *p; p++) {
    if (*p == '%')
      fa_sb_puts(&sb, "%%");
    else if (*p == '"' || *p == '\\')
      fa_sb_printf(&sb, "\\%c", *p);
    else
      fa_sb_putc(&sb, (unsigned char)*p < 0x20 ? ' ' : *p);
  }
  const char *r = aprintf(em, "%s", sb.data ? sb.data : "");
  fa_sb_free(&sb);
  return r;
}

/* The printf conversion and argument of one element (as the interpreter prints it). */
static void print_conversion(Emitter *em, DType dt, bool hex, const char *x, const char **fmt, const char **arg) {
  bool half = dt == DT_F16 || dt == DT_BF16;
  if (fa_dtype_is_float(dt) && !hex) {
    *fmt = dt == DT_F64 ? "%.17g" : "%.9g";
    *arg = dt == DT_F64 ? x : aprintf(em, "(double)fa::to_f32(%s)", x);
  } else if (fa_dtype_is_float(dt)) {
    *fmt = dt == DT_F64 ? "0x%016llx" : half ? "0x%04x" : "0x%08x";
    *arg = dt == DT_F64 ? aprintf(em, "fa::Raw<double>::get(%s)", x)
           : half       ? aprintf(em, "(unsigned)%s.bits", x)
                        : aprintf(em, "fa::f32_to_bits(%s)", x);
  } else if (hex) {
    int bits = fa_dtype_bits(dt);
    *fmt = "0x%llx";
    *arg = bits >= 64 ? aprintf(em, "(unsigned long long)%s", x)
                      : aprintf(em, "((unsigned long long)%s & 0x%llxull)", x, (1ull << bits) - 1);
  } else {
    *fmt = "%lld";
    *arg = aprintf(em, "(long long)%s", x);
  }
}

/* device_print: scalars from thread 0, block elements from their owners,
 * with the program id and the element's coordinates. */
static void emit_print(Emitter *em, const IrOp *op) {
  const char *prefix = format_text(em, op->str);
  if (op->noperands == 0) {
    line(em, "if (threadIdx.x == 0)");
    line(em, "  printf(\"pid (%%d, %%d, %%d) %s\\n\", (int)blockIdx.x, (int)blockIdx.y, (int)blockIdx.z);", prefix);
    return;
  }
  for (int k = 0; k < op->noperands; k++) {
    const IrValue *x = op->operands[k];
    const char *which = op->noperands > 1 ? aprintf(em, " (operand %d)", k) : "";
    const char *fmt, *arg;
    if (!is_block(x)) {
      print_conversion(em, x->type.dtype, op->ival != 0, value_ref(em, x), &fmt, &arg);
      line(em, "if (threadIdx.x == 0)");
      line(em, "  printf(\"pid (%%d, %%d, %%d) %s%s: %s\\n\", (int)blockIdx.x, (int)blockIdx.y, (int)blockIdx.z, %s);",
           prefix, which, fmt, arg);
      continue;
    }
    const FaLayout *l = op->aux;
    const char *ln = layout_name(em, l), *toff = thread_offset(em, l);
    print_conversion(em, x->type.dtype, op->ival != 0, operand(em, op, k), &fmt, &arg);
    StrBuf idx, coords;
    fa_sb_init(&idx);
    fa_sb_init(&coords);
    for (int d = 0; d < x->type.rank; d++) {
      fa_sb_printf(&idx, "%s%%d", d ? ", " : "");
      fa_sb_printf(&coords, ", %s::coord(%s, fa_e, %d)", ln, toff, d);
    }
    if (fa_layout_lane_dups(l) || fa_layout_warp_dups(l))
      line(em, "if (%s::owner(fa_lane, fa_warp))", ln);
    line(em, "#pragma unroll");
    line(em, "for (int fa_e = 0; fa_e < %d; ++fa_e)", nregs(l));
    line(em, "  printf(\"pid (%%d, %%d, %%d) idx (%s) %s%s: %s\\n\", (int)blockIdx.x, (int)blockIdx.y, (int)blockIdx.z%s, "
             "%s);", idx.data ? idx.data : "", prefix, which, fmt, coords.data ? coords.data : "", arg);
    fa_sb_free(&idx);
    fa_sb_free(&coords);
  }
}

/* while: the carried variables (one C variable for the condition's and the
 * body's arguments and the results), the condition at the top of an endless
 * loop, the body and the updates. */
static void emit_while(Emitter *em, const IrOp *op) {
  const IrRegion *cond = op->regions[0], *body = op->regions[1];
  int n = op->nresults;
  for (int i = 0; i < n; i++) {
    const char *name = fresh_name(em, body->args[i]->name ? body->args[i]->name : op->results[i]->name);
    info(em, cond->args[i])->name = name;
    info(em, body->args[i])->name = name;
    info(em, op->results[i])->name = name;
    declare_var(em, body->args[i], name);
    assign_var(em, name, body->args[i], op, i);
  }
  line(em, "while (true) {");
  em->indent++;
  for (int i = 0; i < n; i++)
    emit_conversions(em, cond->args[i]);
  emit_region(em, cond);
  const IrOp *yc = cond->last;
  if (yc && yc->kind == IR_YIELD && yc->noperands == 1)
    line(em, "if (!(%s))", value_ref(em, yc->operands[0]));
  line(em, "  break;");
  for (int i = 0; i < n; i++)
    emit_conversions(em, body->args[i]);
  emit_region(em, body);
  const IrOp *y = body->last;
  if (y && y->kind == IR_YIELD && y->noperands == n) {
    /* through temporaries: an update may read another carried variable */
    const char **tmp = fa_arena_alloc(&em->fc->arena, (size_t)(n + 1) * sizeof *tmp);
    if (!tmp) {
      em->ok = false;
      return;
    }
    for (int i = 0; i < n; i++) {
      tmp[i] = NULL;
      if (y->operands[i] == body->args[i])
        continue;
      tmp[i] = fresh_tmp(em, "next");
      declare_var(em, body->args[i], tmp[i]);
      assign_var(em, tmp[i], body->args[i], y, i);
    }
    for (int i = 0; i < n; i++) {
      if (!tmp[i])
        continue;
      const IrValue *arg = body->args[i];
      if (is_block(arg)) {
        line(em, "#pragma unroll");
        line(em, "for (int fa_e = 0; fa_e < %d; ++fa_e)", nregs(arg->layout));
        line(em, "  %s[fa_e] = %s[fa_e];", info(em, arg)->name, tmp[i]);
      } else {
        line(em, "%s = %s;", info(em, arg)->name, tmp[i]);
      }
    }
  }
  em->indent--;
  line(em, "}");
  for (int i = 0; i < n; i++)
    emit_conversions(em, op->results[i]);
}

static void emit_op(Emitter *em, const IrOp *op) {
  if (op->kind == IR_YIELD || op->kind == IR_RETURN)
    return;
  /* values computed at their uses need no code here */
  if (op->nresults == 1 && is_block(op->results[0]) && fa_value_is_virtual(&em->plan, op->results[0]))
    return;
  if (op->kind == IR_CONST || !op_live(em, op))
    return;
  source_comment(em, op->loc);
  const IrValue *r = op->nresults > 0 ? op->results[0] : NULL;
  if (r && op->kind != IR_FOR && op->kind != IR_IF && op->kind != IR_WHILE) {
    for (int i = 0; i < op->nresults; i++)
      info(em, op->results[i])->name = fresh_name(em, op->results[i]->name);
  }
  switch (op->kind) {
  case IR_PROGRAM_ID:
  case IR_NUM_PROGRAMS: {
    static const char axes[] = "xyz";
    int axis = op->axis >= 0 && op->axis < 3 ? op->axis : 0;
    line(em, "const %s %s = (%s)%s.%c;", ctype(r->type.dtype), info(em, r)->name, ctype(r->type.dtype),
         op->kind == IR_PROGRAM_ID ? "blockIdx" : "gridDim", axes[axis]);
    break;
  }
  case IR_ARANGE:
  case IR_SPLAT:
    break; /* virtual */
  case IR_BROADCAST:
  case IR_EXPAND_DIMS:
  case IR_RESHAPE:
  case IR_TRANS:
    if (is_block(r))
      emit_reshape_like(em, op);
    else
      line(em, "%s = %s;", const_decl(em, r), operand(em, op, 0));
    break;
  case IR_CAST:
    emit_elementwise(em, r, cast_expr(em, r->type.dtype, op->operands[0]->type.dtype, operand(em, op, 0)));
    break;
  case IR_UNARY: emit_elementwise(em, r, unary_expr(em, op, operand(em, op, 0))); break;
  case IR_BINARY:
    if (info(em, r)->fused_dot) {
      source_comment(em, info(em, r)->fused_dot->loc);
      emit_dot_into(em, info(em, r)->fused_dot, r, op, info(em, r)->fused_addend);
      break;
    }
    emit_elementwise(em, r, binary_expr(em, op, operand(em, op, 0), operand(em, op, 1)));
    break;
  case IR_CMP:
    emit_elementwise(em, r, aprintf(em, "(%s %s %s)", operand(em, op, 0), cmp_sym(op->sub), operand(em, op, 1)));
    break;
  case IR_SELECT:
    emit_elementwise(em, r,
                     aprintf(em, "(%s ? %s : %s)", operand(em, op, 0), operand(em, op, 1), operand(em, op, 2)));
    break;
  case IR_PTR_ADD:
    emit_elementwise(em, r, aprintf(em, "(%s + %s)", operand(em, op, 0), operand(em, op, 1)));
    break;
  case IR_REDUCE: emit_reduce(em, op); break;
  case IR_DOT: emit_dot(em, op); break;
  case IR_LOAD: emit_load(em, op); break;
  case IR_STORE:
  case IR_ATOMIC_ADD: emit_store(em, op); break;
  case IR_MAKE_BLOCK_PTR: emit_make_block_ptr(em, op); break;
  case IR_ADVANCE: emit_advance(em, op); break;
  case IR_LOAD_BLOCK: emit_load_block(em, op); break;
  case IR_STORE_BLOCK: emit_store_block(em, op); break;
  case IR_FOR: emit_for(em, op); return;
  case IR_IF: emit_if(em, op); return;
  case IR_ASSERT: emit_assert(em, op); break;
  case IR_FMA: emit_fma(em, op); break;
  case IR_RAND: emit_rand(em, op); break;
  case IR_SCAN: emit_scan(em, op); break;
  case IR_REDUCE_FN: emit_reduce_fn(em, op); break;
  case IR_PRINT: emit_print(em, op); break;
  case IR_WHILE: emit_while(em, op); return;
  default: fail(em, op->loc, "the CUDA backend does not support '%s' yet", fa_ir_op_name(op->kind)); return;
  }
  for (int i = 0; i < op->nresults; i++)
    emit_conversions(em, op->results[i]);
}

static void emit_region(Emitter *em, const IrRegion *r) {
  for (const IrOp *op = r->first; op && em->ok; op = op->next)
    emit_op(em, op);
}

/* Divisibility of every integer scalar, in program order, before emitting:
 * a load in a loop needs what the end of the loop body adds to its pointer. */
static void analyse_divisibility(Emitter *em, const IrRegion *r) {
  for (const IrOp *op = r->first; op; op = op->next) {
    analyse_div_op(em, op);
    if (op->kind == IR_FOR && op->nregions == 1 && op->regions[0]->nargs > 0)
      info(em, op->regions[0]->args[0])->div_log2 = min_i(div_of(em, op->operands[0]), div_of(em, op->operands[2]));
    for (int i = 0; i < op->nregions; i++)
      analyse_divisibility(em, op->regions[i]);
  }
}

/* ---- the kernel ----------------------------------------------------------------------------------------- */

static void emit_prologue(Emitter *em, StrBuf *out, const FaCudaKernel *kout) {
  char arch[32];
  fa_cuda_target_name(em->target, arch, sizeof arch);
  const char *file = em->fn->loc.src && em->fn->loc.src->name ? em->fn->loc.src->name : "<string>";
  fa_sb_printf(out, "// %s: kernel '%s' for %s, %d warps (%d threads), %d stages.\n", file,
               em->fn->name ? em->fn->name : "?", arch, em->plan.warps, kout->threads, em->k->stages);
  fa_sb_puts(out, "// Generated by fadsl " PACKAGE_VERSION " from the kernel's specialised tile IR.\n");
  fa_sb_printf(out, "// Dynamic shared memory: %zu bytes.\n", kout->shared_bytes);
  fa_sb_puts(out, "#include \"fadsl_device.cuh\"\n\n");
  bool any = false;
  for (int i = 0; i < em->plan.layouts.len; i++) {
    const FaLayout *l = em->plan.layouts.items[i];
    if (!em->layout_used[l->id])
      continue;
    if (!any)
      fa_sb_puts(out, "// Layouts: bit i of (register index, lane, warp) selects that bit of the row-major\n"
                      "// flat element index (-1: threads differing in that bit hold copies).\n");
    any = true;
    fa_sb_puts(out, "// ");
    fa_layout_describe(l, out);
    fa_sb_printf(out, "\nusing fa_L%d = ", l->id);
    fa_layout_print_type(l, out);
    fa_sb_puts(out, ";\n");
  }
  if (any)
    fa_sb_putc(out, '\n');
  if (em->helpers.data)
    fa_sb_puts(out, em->helpers.data);
  fa_sb_printf(out, "extern \"C\" __global__ void __launch_bounds__(%d) %s(", kout->threads, kout->entry);
  for (int i = 0; i < em->fn->nparams; i++) {
    const IrValue *v = em->fn->params[i].value;
    fa_sb_printf(out, "%s%s%s%s", i ? ", " : "", elem_ctype(em, v->type), v->type.dtype == DT_PTR ? "" : " ",
                 info(em, v)->name);
  }
  fa_sb_puts(out, ") {\n");
  if (em->swizzled_tiles) {
    /* swizzled tiles need a 1024-byte boundary; the launch reserves 1024 more bytes for it */
    fa_sb_puts(out, "  extern __shared__ __attribute__((aligned(1024))) unsigned char fa_smem_base[];\n");
    fa_sb_puts(out, "  unsigned char *const fa_smem = fa_smem_base + ((1024u - (fa::smem_addr(fa_smem_base) & 1023u)) & "
                    "1023u);\n");
  } else {
    fa_sb_puts(out, "  extern __shared__ __attribute__((aligned(16))) unsigned char fa_smem[];\n");
  }
  /* (maybe_unused: a kernel of scalars only uses neither) */
  fa_sb_puts(out, "  [[maybe_unused]] const int fa_lane = (int)threadIdx.x & 31, fa_warp = (int)threadIdx.x >> 5;\n");
  for (int i = 0; i < em->plan.layouts.len; i++) {
    const FaLayout *l = em->plan.layouts.items[i];
    if (em->toff_used[l->id])
      fa_sb_printf(out, "  const int fa_t%d = fa_L%d::thread_offset(fa_lane, fa_warp);\n", l->id, l->id);
  }
}

bool fa_emit_cuda(FaCompiler *fc, const IrKernel *k, FaCudaTarget target, FaCudaKernel *out) {
  memset(out, 0, sizeof *out);
  if (!k || !k->device) {
    fa_error(&fc->diag, fa_noloc(), "internal compiler error: no kernel to emit");
    return false;
  }
  if (target.sm < 80) {
    fa_error(&fc->diag, k->device->loc, "the CUDA backend needs sm_80 or newer (got sm_%d)", target.sm);
    return false;
  }
  Emitter em;
  memset(&em, 0, sizeof em);
  em.fc = fc;
  em.k = k;
  em.fn = k->device;
  em.target = target;
  em.ok = true;
  fa_sb_init(&em.body);
  em.indent = 1;
  int errors_before = fc->diag.errors;
  if (!fa_assign_layouts(fc, k, &em.plan)) {
    fa_layout_plan_free(&em.plan);
    fa_sb_free(&em.body);
    return false;
  }
  em.nvalues = em.fn->next_value_id;
  em.vi = calloc((size_t)(em.nvalues > 0 ? em.nvalues : 1), sizeof *em.vi);
  if (!em.vi) {
    fa_error(&fc->diag, em.fn->loc, "out of memory in the CUDA emitter");
    fa_layout_plan_free(&em.plan);
    fa_sb_free(&em.body);
    return false;
  }
  /* parameters */
  for (int i = 0; i < em.fn->nparams; i++) {
    const IrValue *v = em.fn->params[i].value;
    ValInfo *vi = info(&em, v);
    vi->name = fresh_name(&em, em.fn->params[i].name ? em.fn->params[i].name : v->name);
    if (v->type.dtype == DT_PTR) {
      int size = fa_dtype_size(v->type.pointee), d = 0;
      while (size > 0 && (size << (d + 1)) <= 16)
        d++;
      vi->div_log2 = d;
    }
  }
  analyse_divisibility(&em, em.fn->body);
  em.live = calloc((size_t)(em.nvalues > 0 ? em.nvalues : 1), sizeof *em.live);
  if (!em.live) {
    em.ok = false;
  } else {
    compute_liveness(&em);
    collect_conversions(&em, em.fn->body);
    plan_pipelines(&em, em.fn->body);
    plan_fused_adds(&em, em.fn->body);
    allocate_tiles(&em);
    plan_async_reads(&em, em.fn->body);
  }
  /* layout ids may grow while emitting (operand needs are interned lazily) */
  em.nlayouts_alloc = em.plan.layouts.len + 256;
  em.layout_used = calloc((size_t)em.nlayouts_alloc, 1);
  em.toff_used = calloc((size_t)em.nlayouts_alloc, 1);
  if (!em.layout_used || !em.toff_used)
    em.ok = false;
  if (em.ok)
    emit_region(&em, em.fn->body);
  if (em.ok && em.plan.layouts.len > em.nlayouts_alloc) {
    fa_error(&fc->diag, em.fn->loc, "internal compiler error: too many layouts");
    em.ok = false;
  }
  bool ok = em.ok && fc->diag.errors == errors_before;
  if (ok) {
    out->entry = fresh_name(&em, em.fn->name ? em.fn->name : "kernel");
    out->threads = 32 * em.plan.warps;
    out->shared_bytes = em.tile_bytes + ((em.scratch_bytes + 15) & ~(size_t)15) + (em.swizzled_tiles ? 1024 : 0);
    out->nargs = em.fn->nparams;
    out->args = fa_arena_alloc(&fc->arena, (size_t)(out->nargs > 0 ? out->nargs : 1) * sizeof *out->args);
    if (!out->args)
      ok = false;
    for (int i = 0; ok && i < out->nargs; i++) {
      const IrValue *v = em.fn->params[i].value;
      out->args[i].kind = v->type.dtype == DT_PTR ? CUDA_ARG_POINTER : CUDA_ARG_SCALAR;
      out->args[i].param = i;
      out->args[i].dtype = v->type.dtype == DT_PTR ? v->type.pointee : v->type.dtype;
      out->args[i].align = v->type.dtype == DT_PTR ? 16 : 0; /* see the divisibility analysis */
    }
  }
  if (ok) {
    StrBuf src;
    fa_sb_init(&src);
    emit_prologue(&em, &src, out);
    fa_sb_puts(&src, em.body.data ? em.body.data : "");
    fa_sb_puts(&src, "}\n");
    out->source = fa_arena_strdup(&fc->arena, src.data ? src.data : "");
    fa_sb_free(&src);
    if (!out->source)
      ok = false;
  }
  if (!ok && fc->diag.errors == errors_before)
    fa_error(&fc->diag, em.fn->loc, "internal compiler error: CUDA emission of '%s' failed",
             em.fn->name ? em.fn->name : "?");
  fa_ptrvec_free(&em.names);
  fa_sb_free(&em.body);
  fa_sb_free(&em.helpers);
  free(em.vi);
  free(em.live);
  free(em.layout_used);
  free(em.toff_used);
  fa_layout_plan_free(&em.plan);
  if (!ok)
    memset(out, 0, sizeof *out);
  return ok;
}
