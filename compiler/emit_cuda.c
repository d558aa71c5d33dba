/* emit_cuda.c - the CUDA C++ printer: one planned kernel (cuda_plan.h)
 * becomes one self-contained translation unit for NVRTC.  Every decision
 * (instructions, tiles, vector widths, pipelines, shared memory) is the
 * plan's; this file only names values and writes the code.
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
 * scratch space (layout conversions, reductions and scans across warps,
 * FMA dots) finds it free on entry and leaves it free, so they all share
 * offset 0 above the tiles and the kernel asks for the largest (the plan's
 * FaSmemPlan).
 */
#include "config.h"

#include <ctype.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_plan.h"
#include "interp.h"
#include "layout.h"

/* ---- printing state ---------------------------------------------------------------------------
 * Everything decided about the kernel is in the plan (cuda_plan.h); the
 * printer keeps only the names it has given values, converted copies and
 * pipeline counters. */

typedef struct ValNames {
  const char *name;         /* C identifier */
  const char **convs;       /* per planned conversion: the copy's name, once emitted */
} ValNames;

typedef struct Emitter {
  FaCompiler *fc;
  const FaCudaPlan *plan;
  const FaLayoutPlan *layouts;
  const IrKernel *k;
  const IrFunction *fn;
  ValNames *vn;             /* by value id */
  const char **pipe_counter;/* by pipeline id: the ring's iteration counter */
  const IrValue **by_id;    /* every value of the device function, by id */
  bool producer_mode;       /* writing the producer warp's slice (warp specialisation) */
  int ring_ahead;           /* tiles of rings are read for this many uses ahead (a rotated product;
                               -1: the use before, a deferred product) */
  /* the loop being written whose last product is deferred (FaPipelinePlan.deferred) */
  const FaPipelinePlan *defer;
  const char *defer_frags;  /* its A fragments, packed where it stands, read at its issue */
  const char *defer_flag;   /* a deferred product waits for its issue */
  const char *defer_acc;    /* the carried accumulator it adds into */
  const char *defer_scale;  /* the factors of its rescale, kept for the next iteration's head
                               (FaPipelinePlan.defer_rescale) */
  const char *defer_pend;   /* ... and its A operand, kept likewise, packed there */
  const char *defer_inflight; /* a deferred product issued and not yet waited for */
  const char *defer_pack_fn, *defer_issue_fn;
  const char **helper_names;/* by product index: its wgmma helper, once written */
  const char **late_acc;    /* by product index: the accumulator array of a product waited for late */
  const char **late_af;     /* ... and the array of its A fragments, if they come from registers */
  PtrVec names;             /* identifiers in use */
  StrBuf body;
  int indent;
  bool *layout_used;        /* by layout id: the type alias is needed */
  bool *toff_used;          /* by layout id: the thread offset variable is needed */
  long toff_at;             /* persistent: where in `body` the compute role's loop over programs
                               declares the thread offsets (-1: in the prologue) */
  int toff_indent;
  int nlayouts;
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

static ValNames *names_of(Emitter *em, const IrValue *v) { return &em->vn[v->id]; }

static const FaValuePlan *vplan(const Emitter *em, const IrValue *v) { return fa_plan_value(em->plan, v); }

static bool is_virtual(const Emitter *em, const IrValue *v) { return fa_value_is_virtual(em->layouts, v); }

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
  if (l->id >= 0 && l->id < em->nlayouts)
    em->layout_used[l->id] = true;
  return aprintf(em, "fa_L%d", l->id);
}

static const char *thread_offset(Emitter *em, const FaLayout *l) {
  layout_name(em, l);
  if (l->id >= 0 && l->id < em->nlayouts)
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

/* The name of x's converted copy in layout `need`, or NULL. */
static const char *conv_name(Emitter *em, const IrValue *x, const FaLayout *need) {
  const FaValuePlan *vp = vplan(em, x);
  const ValNames *vn = names_of(em, x);
  for (int i = 0; i < vp->nconvs; i++)
    if (vp->convs[i].to == need)
      return vn->convs ? vn->convs[i] : NULL;
  return NULL;
}

/* Element fa_e of value x in layout `need` (NULL for scalars). */
static const char *elem(Emitter *em, const IrValue *x, const FaLayout *need) {
  if (!is_block(x))
    return value_ref(em, x);
  if (is_virtual(em, x)) {
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
  const ValNames *vn = names_of(em, x);
  if (!need || !x->layout || x->layout == need)
    return aprintf(em, "%s[fa_e]", vn->name);
  const char *c = conv_name(em, x, need);
  if (c)
    return aprintf(em, "%s[fa_e]", c);
  fail(em, x->loc, "internal compiler error: no converted copy of '%s' in layout %d", vn->name, need->id);
  return "0";
}

static const char *value_ref(Emitter *em, const IrValue *v) {
  if (v->def && v->def->kind == IR_CONST && v->type.rank == 0)
    return const_literal(em, v->def); /* constants are written where they are used */
  const ValNames *vn = names_of(em, v);
  return vn->name ? vn->name : "fa_undefined";
}

/* The array holding x in layout `need`: x itself, its converted copy, or a
 * temporary filled with a virtual value's elements. */
static const char *array_in(Emitter *em, const IrValue *x, const FaLayout *need) {
  if (!is_virtual(em, x) && (x->layout == need || !need)) {
    return names_of(em, x)->name;
  }
  if (!is_virtual(em, x)) {
    const char *c = conv_name(em, x, need);
    if (c)
      return c;
    fail(em, x->loc, "internal compiler error: no converted copy of '%s'", names_of(em, x)->name);
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
  return fa_plan_operand_layout(em->plan, op, i);
}

static const char *operand(Emitter *em, const IrOp *op, int i) {
  return elem(em, op->operands[i], need_of(em, op, i));
}

/* Library scratch space: above the tiles. */
static const char *scratch(Emitter *em) {
  size_t at = em->plan->smem.tiles + em->plan->smem.barriers;
  return at ? aprintf(em, "(fa_smem + %zu)", at) : "fa_smem";
}

/* The tile format type of fa_mma.cuh. */
static const char *tile_format(Emitter *em, const FaTilePlan *t) {
  if (t->format == FA_TILE_SWIZZLED)
    return aprintf(em, "fa::SwzTile<%d, %d>", t->rows, t->swizzle);
  return aprintf(em, "fa::PadTile<%d>", t->pitch);
}

/* The shared-memory address of a tile (the current buffer of a pipeline). */
static const char *tile_address(Emitter *em, const FaTilePlan *t) {
  if (t->nbufs > 1 && em->ring_ahead)
    return aprintf(em, "fa::smem_addr(fa_smem + %zu + ((%s %c %d) %% %d) * %zu)", t->offset,
                   em->pipe_counter[t->pipeline->id], em->ring_ahead < 0 ? '-' : '+', abs(em->ring_ahead), t->nbufs,
                   t->buf_bytes);
  if (t->nbufs > 1)
    return aprintf(em, "fa::smem_addr(fa_smem + %zu + (%s %% %d) * %zu)", t->offset,
                   em->pipe_counter[t->pipeline->id], t->nbufs, t->buf_bytes);
  return aprintf(em, "fa::smem_addr(fa_smem + %zu)", t->offset);
}

/* The barrier among the threads that compute. */
static const char *barrier_stmt(Emitter *em) {
  /* with a producer warpgroup, only the compute warps (named barrier 1) */
  return em->plan->warp_specialised ? "fa::sync_compute();" : "__syncthreads();";
}

/* Thread 0 issues every bulk store; before memory a staging tile shares is
 * written, it waits until the copy engine has read what they staged (the
 * barrier after this tells the other threads). */
static void emit_drain(Emitter *em, int pending, bool writes) {
  const char *wait = writes ? "bulk_wait" : "bulk_wait_read", *done = writes ? "are complete" : "have read their "
                                                                                                 "staging tiles";
  if (pending)
    line(em, "if (threadIdx.x == 0) fa::%s<%d>();  // all but the newest %d bulk stores %s", wait, pending, pending,
         done);
  else
    line(em, "if (threadIdx.x == 0) fa::%s<0>();  // the bulk stores %s", wait, done);
}

/* The bulk store whose drain rides on the closing barrier of tile t's stage
 * (FaTmaPlan.drain_with), or NULL. */
static const FaAccessPlan *store_drained_with(Emitter *em, const FaTilePlan *t) {
  for (int i = 0; i < em->plan->naccesses; i++) {
    const FaAccessPlan *ap = em->plan->accesses[i];
    if (ap->method == FA_ACCESS_TMA_STORE && ap->tma->drain_with == t)
      return ap;
  }
  return NULL;
}

static void emit_stage(Emitter *em, const IrValue *x) {
  const FaTilePlan *t = vplan(em, x)->tile;
  if (t->drains)
    emit_drain(em, 0, false);
  /* products of the previous iteration, or of a tile that shared this
     memory, may still read it */
  line(em, "%s", barrier_stmt(em));
  line(em, "fa::stage<%s, %d, %d, %s>(fa_smem + %zu, %s, %s);  // shared-memory copy for tensor-core products",
       layout_name(em, x->layout), t->inner, t->store_vec, tile_format(em, t), t->offset, names_of(em, x)->name,
       thread_offset(em, x->layout));
  if (em->plan->async_proxy_reads)
    line(em, "fa::fence_async_smem();  // the tensor cores read it through the async proxy");
  const FaAccessPlan *carried = store_drained_with(em, t);
  if (carried) /* the barrier below tells every thread that the copy engine has read that staging tile */
    emit_drain(em, carried->tma->drain_pending, carried->tma->drain_writes);
  line(em, "%s", barrier_stmt(em));
}

/* dst (declared, in layout c->to) = src (in layout c->from). */
static void emit_convert(Emitter *em, const char *dst, const char *src, const FaConversionPlan *c) {
  int perm[FA_LAYOUT_MAX_BITS];
  if (c->in_registers && fa_layout_register_permutation(c->from, c->to, perm)) {
    StrBuf sb;
    fa_sb_init(&sb);
    for (int b = 0; b < c->to->nreg; b++)
      fa_sb_printf(&sb, "%s%d", b ? ", " : "", perm[b]);
    line(em, "fa::regmap<fa::Bits<%s>>(%s, %s);  // same threads, other registers", sb.data ? sb.data : "", dst,
         src);
    fa_sb_free(&sb);
    return;
  }
  line(em, "fa::convert<%s, %s>(%s, %s, fa_lane, fa_warp, %s);", layout_name(em, c->from), layout_name(em, c->to), dst,
       src, scratch(em));
}

/* Emits the tile and the converted copies of x that its uses need. */
static void emit_conversions(Emitter *em, const IrValue *x) {
  if (!is_block(x) || is_virtual(em, x))
    return;
  const FaValuePlan *vp = vplan(em, x);
  ValNames *vn = names_of(em, x);
  if (vp->tile && vp->tile->fill == FA_FILL_REGISTERS)
    emit_stage(em, x);
  if (vp->nconvs && !vn->convs) {
    vn->convs = fa_arena_alloc(&em->fc->arena, (size_t)vp->nconvs * sizeof *vn->convs);
    if (!vn->convs) {
      em->ok = false;
      return;
    }
  }
  for (int i = 0; i < vp->nconvs; i++) {
    const FaConversionPlan *c = &vp->convs[i];
    vn->convs[i] = fresh_name(em, aprintf(em, "%s_L%d", vn->name, c->to->id));
    const char *t = elem_ctype(em, x->type);
    line(em, "%s %s[%d];  // %s in %s", t, vn->convs[i], nregs(c->to), vn->name, layout_name(em, c->to));
    emit_convert(em, vn->convs[i], vn->name, c);
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
  const char *name = fa_loc_file_base(loc);
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
  line(em, "%s %s[%d];%s%s", elem_ctype(em, r->type), names_of(em, r)->name, nregs(r->layout), comment ? "  // " : "",
       comment ? comment : "");
}

/* "const T name" for a scalar: the pointer itself is const for pointers. */
static const char *const_decl(Emitter *em, const IrValue *v) {
  if (v->type.dtype == DT_PTR)
    return aprintf(em, "%s *const %s", ctype(v->type.pointee), names_of(em, v)->name);
  return aprintf(em, "const %s %s", elem_ctype(em, v->type), names_of(em, v)->name);
}

static void emit_elementwise(Emitter *em, const IrValue *r, const char *expr) {
  if (!is_block(r)) {
    line(em, "%s = %s;", const_decl(em, r), expr);
    return;
  }
  declare_block(em, r, NULL);
  line(em, "#pragma unroll");
  line(em, "for (int fa_e = 0; fa_e < %d; ++fa_e)", nregs(r->layout));
  line(em, "  %s[fa_e] = %s;", names_of(em, r)->name, expr);
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
  case UN_TANH_APPROX: return aprintf(em, "fa::tanh_approx(%s)", a);
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
  case BIN_DIV:
    if (fa_dtype_is_float(dt))
      sym = "/";
    else   /* total: a lane that a where() or a mask discards may divide by zero */
      return aprintf(em, "fa::div<%s>(%s, %s)", ctype(dt), a, b);
    break;
  case BIN_MOD:
    if (fa_dtype_is_float(dt))
      return aprintf(em, "fa::mod(%s, %s)", a, b);
    return aprintf(em, "fa::mod<%s>(%s, %s)", ctype(dt), a, b);
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

/* A broadcast's register map: register bit i of the result is register
 * bit map[i] of the operand, or none for the stretched dimensions. */
static const char *broadcast_bits(Emitter *em, const IrOp *op) {
  const IrValue *x = op->operands[0], *r = op->results[0];
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
  return bits_list(em, map, l->nreg);
}

/* x * f[:, None] with f an online softmax's rescale factor (the plan's
 * unit_factors): the elements copied, then multiplied only where a factor
 * this thread holds is not 1 (x * 1 is x, so the result is the same). */
static void emit_unit_rescale(Emitter *em, const IrOp *op) {
  const IrValue *r = op->results[0];
  const IrOp *b = vplan(em, r)->unit_factors->def;
  const FaLayout *need = need_of(em, b, 0);
  const char *factors = array_in(em, b->operands[0], need);
  int k = op->operands[0] == vplan(em, r)->unit_factors ? 1 : 0; /* the operand rescaled */
  declare_block(em, r, NULL);
  line(em, "#pragma unroll");
  line(em, "for (int fa_e = 0; fa_e < %d; ++fa_e)", nregs(r->layout));
  line(em, "  %s[fa_e] = %s;", names_of(em, r)->name, operand(em, op, k));
  line(em, "if (!fa::all_ones(%s)) {  // a running maximum moved: rescale", factors);
  em->indent++;
  line(em, "#pragma unroll");
  line(em, "for (int fa_e = 0; fa_e < %d; ++fa_e)", nregs(r->layout));
  line(em, "  %s[fa_e] = %s;", names_of(em, r)->name, binary_expr(em, op, operand(em, op, 0), operand(em, op, 1)));
  em->indent--;
  line(em, "}");
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
    if (!vplan(em, r)->live) {
      line(em, "if (threadIdx.x == 0%s%s)", cond ? " && " : "", cond ? cond : "");
      line(em, "  fa::atomic_add(%s, %s);", p, v);
      return;
    }
    const char *t = elem_ctype(em, r->type);
    line(em, "%s %s = %s;", t, names_of(em, r)->name, zero_of(em, r->type.dtype));
    line(em, "{  // one thread adds; all see the previous value");
    line(em, "  %s *fa_old = static_cast<%s *>(static_cast<void *>(%s));", t, t, scratch(em));
    line(em, "  if (threadIdx.x == 0)");
    line(em, "    *fa_old = %s ? fa::atomic_add(%s, %s) : %s;", cond ? cond : "true", p, v,
         zero_of(em, r->type.dtype));
    line(em, "  %s", barrier_stmt(em));
    line(em, "  %s = *fa_old;", names_of(em, r)->name);
    line(em, "  %s", barrier_stmt(em));
    line(em, "}");
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
  if (atomic && !vplan(em, op->results[0])->live) {
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
    declare_block(em, r, NULL); /* the plan refuses copies in several threads here */
    line(em, "#pragma unroll");
    line(em, "for (int fa_e = 0; fa_e < %d; ++fa_e)", nregs(l));
    line(em, "  %s[fa_e] = %s%s%s fa::atomic_add(%s, %s)%s;", names_of(em, r)->name, cond ? "(" : "", cond ? cond : "",
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

/* With a producer warp, the consumers compute block pointers that only the
 * producer's copies read (the code is one for both): say they are unused. */
static void note_producer_use(Emitter *em, const IrValue *bp) {
  if (!em->plan->warp_specialised || em->producer_mode)
    return;
  for (int n = 0; n < em->plan->nops; n++) {
    const IrOp *use = em->plan->order[n];
    if (use->kind != IR_LOAD_BLOCK || use->operands[0] != bp)
      continue;
    const FaAccessPlan *ap = fa_plan_access(em->plan, use);
    if (ap && ap->method == FA_ACCESS_TMA && !ap->pipeline) {
      line(em, "(void)%s;  // read by the producer warp", names_of(em, bp)->name);
      return;
    }
  }
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
  line(em, "const %s %s = {%s};", elem_ctype(em, r->type), names_of(em, r)->name, sb.data ? sb.data : "");
  fa_sb_free(&sb);
  note_producer_use(em, r);
}

static void emit_advance(Emitter *em, const IrOp *op) {
  const IrValue *r = op->results[0];
  StrBuf sb;
  fa_sb_init(&sb);
  for (int d = 0; d < r->type.rank; d++)
    fa_sb_printf(&sb, "%s(int)%s", d ? ", " : "", value_ref(em, op->operands[1 + d]));
  line(em, "const %s %s = fa::advance(%s, {%s});", elem_ctype(em, r->type), names_of(em, r)->name,
       value_ref(em, op->operands[0]), sb.data ? sb.data : "");
  fa_sb_free(&sb);
  note_producer_use(em, r);
}

static const char *pad_value(Emitter *em, DType dt, IrPadding pad) {
  if (pad == PAD_NAN && fa_dtype_is_float(dt))
    return float_literal(em, dt, NAN);
  return zero_of(em, dt);
}

/* ---- bulk tensor copies (TMA) ---------------------------------------------------------------
 * The copies of a tile: one per swizzle width of its rows ("panel"), each a
 * box of the tensor map at the coordinates of the block pointer (the
 * block's offsets, the base's outer coordinate), landing at the panel's
 * place in the tile and completing on an mbarrier. */

static const char *mbar_address(Emitter *em, int barrier, const char *slot) {
  const FaBarrierPlan *b = &em->plan->barriers[barrier];
  if (!slot)
    return aprintf(em, "fa::smem_addr(fa_smem + %zu)", b->offset);
  return aprintf(em, "(fa::smem_addr(fa_smem + %zu) + 8u * %s)", b->offset, slot);
}

/* A ring's full or empty mbarrier of stage `slot`; of load j's own
 * barriers in a split ring (FaPipelinePlan.split; j < 0: unsplit). */
static const char *ring_mbar(Emitter *em, const FaPipelinePlan *pp, int barrier, int j, const char *slot) {
  if (!pp->split || j < 0)
    return mbar_address(em, barrier, slot);
  return mbar_address(em, barrier, j ? aprintf(em, "(%d + %s)", j * pp->stages, slot) : slot);
}

/* Persistent kernels with a producer warp: the compute threads say they are
 * done with the tiles of loads outside loops (FaSchedulePlan.tile_barrier),
 * after the op the plan names (else at the end of the program). */
static bool releases_tiles_after(const Emitter *em, const IrOp *op) {
  const FaSchedulePlan *s = &em->plan->schedule;
  return !em->producer_mode && s->tile_barrier >= 0 && op == s->tile_release_after;
}

/* ... inside the loop op, before the last deferred product it issues after
 * its iterations (which reads no such tile: the planner would have kept the
 * release at the end of the program) */
static bool releases_tiles_in_loop(const Emitter *em, const IrOp *op) {
  const FaPipelinePlan *pp = op->kind == IR_FOR ? fa_plan_pipeline(em->plan, op) : NULL;
  return releases_tiles_after(em, op) && pp && pp->deferred;
}

static void emit_tile_release(Emitter *em) {
  line(em, "fa::mbar_arrive(%s);  // done with this program's copies outside loops: the producer may load the next's",
       mbar_address(em, em->plan->schedule.tile_barrier, NULL));
}

/* The C expression of a coordinate polynomial (cuda_plan.h). */
static const char *poly_expr(Emitter *em, const FaSymPoly *c) {
  StrBuf sb;
  fa_sb_init(&sb);
  fa_sb_puts(&sb, "(int)(");
  if (!c->nterms)
    fa_sb_puts(&sb, "0");
  for (int i = 0; i < c->nterms; i++) {
    const FaSymTerm *t = &c->terms[i];
    fa_sb_printf(&sb, "%s%lldLL", i ? " + " : "", t->coef);
    for (int a = 0; a < t->natoms; a++) {
      int atom = t->atoms[a];
      const IrValue *v = NULL;
      if (atom < FA_SYM_VALUE && atom < em->fn->nparams)
        v = em->fn->params[atom].value;
      else if (atom >= FA_SYM_VALUE && atom - FA_SYM_VALUE < em->plan->nvalues)
        v = em->by_id[atom - FA_SYM_VALUE];
      if (!v) {
        fail(em, em->fn->loc, "internal compiler error: a TMA coordinate names an unknown value");
        break;
      }
      fa_sb_printf(&sb, " * (long long)%s", value_ref(em, v));
    }
  }
  fa_sb_putc(&sb, ')');
  const char *r = aprintf(em, "%s", sb.data ? sb.data : "0");
  fa_sb_free(&sb);
  return r;
}

/* The coordinates (innermost first) of panel pn of a tile's copies, from
 * block pointer `fa_bp` and the outer coordinate `outer`. */
static const char *tma_coords(Emitter *em, const FaTmaPlan *t, int pn, const char *outer) {
  StrBuf c;
  fa_sb_init(&c);
  for (int i = t->map->rank - 1; i >= 0; i--) {
    fa_sb_puts(&c, i == t->map->rank - 1 ? "" : ", ");
    int d = t->block_dim[i];
    if (d < 0)
      fa_sb_puts(&c, outer);
    else if (d == t->inner_dim && pn)
      fa_sb_printf(&c, "fa_bp.offset[%d] + %d", d, pn * t->panel_elems);
    else
      fa_sb_printf(&c, "fa_bp.offset[%d]", d);
  }
  const char *r = aprintf(em, "%s", c.data ? c.data : "");
  fa_sb_free(&c);
  return r;
}

/* The copies of ap's tile from block pointer `bp` (a C expression) into the
 * buffer at byte offset `buf` (an expression) of the tile, on mbarrier
 * `bar`, after arming it with their bytes. */
static void emit_tma_copies(Emitter *em, const FaAccessPlan *ap, const char *bp, const char *buf, const char *bar) {
  const FaTmaPlan *t = ap->tma;
  const FaTensorMapPlan *m = t->map;
  const char *outer = t->outer >= 0 ? poly_expr(em, &t->outer_coord) : NULL;
  const IrValue *x = ap->op->results[0];
  line(em, "{  // %s: %d cop%s of %zu bytes (tensor map %d)", x->name ? x->name : "the tile", t->panels,
       t->panels == 1 ? "y" : "ies", t->panel_bytes, m->id);
  em->indent++;
  line(em, "const auto &fa_bp = %s;", bp);
  for (int pn = 0; pn < t->panels; pn++)
    line(em, "fa::tma_load<%d>(fa::smem_addr(fa_smem + %zu + %s), fa_tmap%d, %s, {%s});", m->rank,
         ap->tile->offset + (size_t)pn * t->panel_bytes, buf, m->id, bar, tma_coords(em, t, pn, outer));
  em->indent--;
  line(em, "}");
}

/* A load outside loops: one thread arms its mbarrier and issues the copies
 * here; every thread waits before the first op that reads the tile. */
static void emit_tma_once(Emitter *em, const FaAccessPlan *ap) {
  const FaTmaPlan *t = ap->tma;
  const char *bar = mbar_address(em, t->barrier, NULL);
  if (em->plan->warp_specialised && !em->producer_mode) {
    line(em, "// %s: loaded into shared memory by the producer warp (waited for before its first reader)",
         names_of(em, ap->op->results[0])->name);
    return;
  }
  if (em->producer_mode) {
    if (em->plan->schedule.tile_barrier >= 0)
      line(em, "if (fa_tiles_done) fa::mbar_wait(%s, (fa_tiles_done - 1u) & 1u);  // the previous program is done "
               "with its copy",
           mbar_address(em, em->plan->schedule.tile_barrier, NULL));
    line(em, "fa::mbar_arrive_expect_tx(%s, %zuu);  // %s", bar, t->bytes,
         ap->op->results[0]->name ? ap->op->results[0]->name : "a tile");
    emit_tma_copies(em, ap, value_ref(em, ap->op->operands[0]), "0", bar);
    return;
  }
  line(em, "// %s: loaded into shared memory by the copy engine (waited for before its first reader)",
       names_of(em, ap->op->results[0])->name);
  if (ap->tile->drains)
    emit_drain(em, 0, false);
  line(em, "%s  // the tile's memory may have held other tiles", barrier_stmt(em));
  line(em, "if (threadIdx.x == 0) {");
  em->indent++;
  line(em, "fa::mbar_arrive_expect_tx(%s, %zuu);", bar, t->bytes);
  emit_tma_copies(em, ap, value_ref(em, ap->op->operands[0]), "0", bar);
  em->indent--;
  line(em, "}");
}

static void emit_tma_wait(Emitter *em, const FaAccessPlan *ap, const char *why) {
  line(em, "fa::mbar_wait(%s, %s);  // %s %s", mbar_address(em, ap->tma->barrier, NULL),
       em->plan->schedule.kind == FA_SCHEDULE_PERSISTENT ? "fa_tiles_done & 1u" : "0",
       names_of(em, ap->op->results[0])->name, why);
}

/* The waits, before op, for the loads outside loops whose first reader it
 * is (a loop with a software pipeline: emit_for calls this after the
 * copies of its prologue). */
static void emit_tma_waits(Emitter *em, const IrOp *op) {
  for (int i = 0; em->producer_mode == false && i < em->plan->naccesses; i++) {
    const FaAccessPlan *ap = em->plan->accesses[i];
    if (ap->method == FA_ACCESS_TMA && !ap->pipeline && ap->tma->wait_before == op)
      emit_tma_wait(em, ap, "has landed");
  }
}

/* After op, the waits for the loads whose first reader is a loop below it
 * (plan_tma_load): done at once where that loop ran, they keep a copy from
 * being in flight past it where the loop ran no iteration. */
static void emit_tma_waits_after(Emitter *em, const IrOp *op) {
  for (int i = 0; em->producer_mode == false && i < em->plan->naccesses; i++) {
    const FaAccessPlan *ap = em->plan->accesses[i];
    if (ap->method == FA_ACCESS_TMA && !ap->pipeline && ap->tma->wait_after == op)
      emit_tma_wait(em, ap, "has landed (at once where the loop above read it)");
  }
}

/* A ring vector (FA_TILE_DENSE): the copy engine loaded this iteration's
 * box into the ring's current buffer (waited for at the loop's head); each
 * thread reads its elements, `vec` contiguous ones at a time where its
 * registers hold runs of the block (at most 16 bytes). */
static void emit_ring_vector_read(Emitter *em, const IrOp *op, const FaAccessPlan *ap) {
  const IrValue *r = op->results[0];
  const FaTilePlan *t = ap->tile;
  const FaLayout *l = r->layout;
  int size = fa_dtype_size(r->type.dtype), v = 1, bits = 0;
  /* register bit b is the block's element bit b for b < bits */
  while (bits < l->nreg && l->reg[bits] == bits && 2 * v * size <= 16) {
    bits++;
    v *= 2;
  }
  declare_block(em, r, aprintf(em, "%s, %d-element reads", layout_name(em, l), v));
  line(em, "fa::read_dense<%s, %d>(%s, fa_smem + %zu + (%s %% %d) * %zuu, %s);  // loaded by the copy engine with "
           "the loop's ring",
       layout_name(em, l), v, names_of(em, r)->name, t->offset, em->pipe_counter[t->pipeline->id], t->nbufs,
       t->buf_bytes, thread_offset(em, l));
}

static void emit_load_block(Emitter *em, const IrOp *op) {
  const IrValue *r = op->results[0];
  const FaAccessPlan *ap = fa_plan_access(em->plan, op);
  if (!ap) {
    fail(em, op->loc, "internal compiler error: a load without a plan");
    return;
  }
  if (ap->method == FA_ACCESS_CP_ASYNC) {
    line(em, "// %s: loaded into shared memory by cp.async, %d iterations ahead (see the loop's head)",
         names_of(em, r)->name, ap->pipeline->ahead);
    return;
  }
  if (ap->method == FA_ACCESS_TMA && ap->pipeline && ap->tile->format == FA_TILE_DENSE) {
    emit_ring_vector_read(em, op, ap);
    return;
  }
  if (ap->method == FA_ACCESS_TMA && ap->pipeline && em->plan->warp_specialised) {
    line(em, "// %s: loaded into shared memory by the copy engine, issued by the producer warp up to %d "
             "iteration%s ahead",
         names_of(em, r)->name, ap->pipeline->stages, ap->pipeline->stages == 1 ? "" : "s");
    return;
  }
  if (ap->method == FA_ACCESS_TMA && ap->pipeline) {
    line(em, "// %s: loaded into shared memory by the copy engine, %d iteration%s ahead (see the loop's head)",
         names_of(em, r)->name, ap->pipeline->ahead, ap->pipeline->ahead == 1 ? "" : "s");
    return;
  }
  if (ap->method == FA_ACCESS_TMA) {
    emit_tma_once(em, ap);
    return;
  }
  const FaLayout *l = r->layout;
  int v = ap->vec;
  declare_block(em, r, aprintf(em, "%s, %d-element accesses", layout_name(em, l), v));
  line(em, "fa::load_block<%s, %d, 0x%xu>(%s, %s, %s, %s);", layout_name(em, l), v, op->boundary, names_of(em, r)->name,
       value_ref(em, op->operands[0]), thread_offset(em, l), pad_value(em, r->type.dtype, op->padding));
}

/* A bulk store or reduce-add (FA_ACCESS_TMA_STORE): once the copy engine
 * has read what the last bulk store staged and every warp is done with the
 * memory, the value goes into its staging tile, fenced for the async proxy;
 * after a barrier thread 0 issues one copy per panel and commits them as one
 * bulk group, which the next drain (or the block's end) waits for. */
static void emit_tma_store(Emitter *em, const IrOp *op, const FaAccessPlan *ap) {
  const FaTilePlan *t = ap->tile;
  const FaTmaPlan *tm = ap->tma;
  const FaLayout *l = ap->layout;
  const char *arr = array_in(em, op->operands[1], l);
  const char *outer = tm->outer >= 0 ? poly_expr(em, &tm->outer_coord) : NULL;
  line(em, "// %s by the copy engine from a staging tile: %d cop%s of %zu bytes (tensor map %d)",
       tm->reduce ? "added" : "written", tm->panels, tm->panels == 1 ? "y" : "ies", tm->panel_bytes, tm->map->id);
  if (tm->drain_with) {
    line(em, "// (drained before the barrier after %s's stage)", names_of(em, tm->drain_with->value)->name);
  } else {
    emit_drain(em, tm->drain_pending, tm->drain_writes);
    line(em, "%s  // every warp is done with the staging tile's memory", barrier_stmt(em));
  }
  /* the addresses computed here, not held in registers from the kernel's start (fa::opaque) */
  line(em, "fa::stage<%s, %d, %d, %s>(fa_smem + %zu, %s, fa::opaque(%s));", layout_name(em, l), t->inner,
       t->store_vec, tile_format(em, t), t->offset, arr, thread_offset(em, l));
  line(em, "fa::fence_async_smem();  // the copy engine reads it through the async proxy");
  line(em, "%s", barrier_stmt(em));
  line(em, "if (threadIdx.x == 0) {");
  em->indent++;
  line(em, "const auto &fa_bp = %s;", value_ref(em, op->operands[0]));
  for (int pn = 0; pn < tm->panels; pn++)
    line(em, "fa::%s<%d>(fa_tmap%d, fa::smem_addr(fa_smem + %zu), {%s});", tm->reduce ? "tma_reduce_add" : "tma_store",
         tm->map->rank, tm->map->id, t->offset + (size_t)pn * tm->panel_bytes, tma_coords(em, tm, pn, outer));
  line(em, "fa::bulk_commit();");
  em->indent--;
  line(em, "}");
}

static void emit_store_block(Emitter *em, const IrOp *op) {
  const FaAccessPlan *ap = fa_plan_access(em->plan, op);
  const FaLayout *l = op->aux;
  if (!ap || !l) {
    fail(em, op->loc, "internal compiler error: a store without a plan");
    return;
  }
  if (ap->method == FA_ACCESS_TMA_STORE) {
    emit_tma_store(em, op, ap);
    return;
  }
  const char *arr = array_in(em, op->operands[1], l);
  int v = ap->vec;
  line(em, "fa::store_block<%s, %d, 0x%xu>(%s, %s, %s, %s::owner(fa_lane, fa_warp));", layout_name(em, l), v,
       op->boundary, value_ref(em, op->operands[0]), arr, thread_offset(em, l), layout_name(em, l));
}

/* atomic_add through a block pointer (FA_ACCESS_REDUCE): the plan's width
 * and instruction; the tile library's fa::red_block issues them, each
 * element by its owner. */
static void emit_atomic_add_block(Emitter *em, const IrOp *op) {
  const FaAccessPlan *ap = fa_plan_access(em->plan, op);
  const FaLayout *l = op->aux;
  if (ap && l && ap->method == FA_ACCESS_TMA_STORE) {
    emit_tma_store(em, op, ap);
    return;
  }
  if (!ap || !l || ap->method != FA_ACCESS_REDUCE) {
    fail(em, op->loc, "internal compiler error: an atomic_add through a block pointer without a plan");
    return;
  }
  const char *arr = array_in(em, op->operands[1], l);
  const char *instr = ap->red == FA_RED_VECTOR ? "fa::RED_VECTOR" : ap->red == FA_RED_CAS ? "fa::RED_CAS"
                                                                                           : "fa::RED_SCALAR";
  line(em, "fa::red_block<%s, %d, 0x%xu, %s>(%s, %s, %s, %s::owner(fa_lane, fa_warp));", layout_name(em, l), ap->vec,
       op->boundary, instr, value_ref(em, op->operands[0]), arr, thread_offset(em, l), layout_name(em, l));
}

static void emit_reduce(Emitter *em, const IrOp *op) {
  const IrValue *x = op->operands[0], *r = op->results[0];
  const FaReducePlan *rp = fa_plan_reduce(em->plan, op);
  if (!rp) {
    fail(em, op->loc, "internal compiler error: a reduction without a plan");
    return;
  }
  const FaLayout *src = rp->src;
  DType dt = x->type.dtype;
  int first, count;
  fa_layout_dim_bits(src, op->axis, &first, &count);
  int keep[FA_LAYOUT_MAX_BITS], red[FA_LAYOUT_MAX_BITS], nk = 0, nr = 0;
  for (int i = 0; i < src->nreg; i++) {
    if (src->reg[i] >= first && src->reg[i] < first + count)
      red[nr++] = i;
    else
      keep[nk++] = i;
  }
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
  const FaLayout *sl = rp->slice;
  bool direct = is_block(r) && !widen && sl == r->layout;
  const char *dst = direct ? names_of(em, r)->name : fresh_tmp(em, "red");
  if (direct)
    declare_block(em, r, layout_name(em, r->layout));
  else
    line(em, "%s %s[%d];", acc_t, dst, nd);
  line(em, "fa::reduce<%s, %s, %s, 0x%x, 0x%x>(%s, %s, fa_lane, fa_warp, %s);", opname, bits_list(em, keep, nk),
       bits_list(em, red, nr), rp->lane_mask, rp->warp_mask, dst, in, scratch(em));
  if (is_block(r)) {
    if (widen) {
      const char *rounded = sl == r->layout ? names_of(em, r)->name : fresh_tmp(em, "red");
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
      emit_convert(em, names_of(em, r)->name, dst, &rp->to_result[0]);
    }
  } else {
    line(em, "const %s %s = %s;", ctype(dt), names_of(em, r)->name,
         widen ? aprintf(em, "fa::convert<%s>(%s[0])", ctype(dt), dst) : aprintf(em, "%s[0]", dst));
  }
}

/* Whether any product of the kernel is a wgmma (whose descriptors want the
 * warp's index in uniform registers, see emit_prologue). */
static bool plan_has_wgmma(const FaCudaPlan *plan) {
  for (int i = 0; i < plan->nproducts; i++)
    if (plan->products[i]->instr == FA_INSTR_WGMMA)
      return true;
  return false;
}

/* ---- wgmma (sm_90a) ------------------------------------------------------------------------------------
 * A product the plan gives to wgmma (see cuda_plan.c) becomes one device
 * function written ahead of the kernel: per 16-row block of the warp, the
 * fence and the k16 steps of wgmma.m64nNk16 through shared-memory
 * descriptors; then one commit and the wait. */

/* The swizzle mode of a descriptor: 1, 2, 3 for 128, 64, 32 bytes. */
static int swizzle_mode(int sw) { return sw == 128 ? 1 : sw == 64 ? 2 : 3; }

/* C expressions for a tile's descriptor fields: the byte offset of element
 * (mn0, k0) (mn along M or N), leading and stride byte offsets.  A K-major
 * tile (k contiguous) has rows along mn, a tile of the other kind rows
 * along k; 8 rows make one swizzle period (SBO apart), and blocks of SW
 * bytes along the row are ROWS * SW apart (the LBO of an MN-major operand;
 * a K-major one never crosses a block within a k16 step). */
static void wgmma_operand(Emitter *em, const FaTilePlan *t, bool k_inner, const char *mn0, const char *k0,
                          const char **off, int *lbo, int *sbo) {
  int sw = t->swizzle, block = t->rows * sw;
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
/* PREPACKED: A's fragments come packed by the caller (a deferred product's,
 * FaPipelinePlan.deferred) instead of being packed from registers here. */
static void wgmma_signature(Emitter *em, const FaProductPlan *w, const char *name, bool prepacked) {
  StrBuf *h = &em->helpers;
  int N = w->nt * 8;
  bool a_tile = w->a_src == FA_OPND_TILE, a_f32 = w->a_src == FA_OPND_REGISTERS_F32;
  fa_sb_printf(h, "// c += a . b: wgmma.m64n%dk16, A from %s, B from a swizzled tile (%s-major)\n", N,
               a_tile           ? "a swizzled tile"
               : prepacked      ? "fragments packed before"
               : a_f32          ? "f32 registers rounded on the way"
                                : "registers",
               w->b_k_inner ? "K" : "N");
  fa_sb_printf(h, "static __device__ __forceinline__ void %s(float (&c)[%d], ", name, w->mt * w->nt * 4);
  if (a_tile)
    fa_sb_puts(h, "unsigned a_tile, ");
  else if (prepacked)
    fa_sb_printf(h, "const unsigned (&afs)[%d][%d][4], ", w->mt, w->kt);
  else
    fa_sb_printf(h, "const %s (&a)[%d], ", a_f32 ? "float" : ctype(w->in), w->mt * w->kt * 8);
  if (!a_tile && !prepacked && w->wait == FA_WAIT_LATE) /* the fragments the tensor cores read until the wait */
    fa_sb_printf(h, "unsigned (&afs)[%d][%d][4], ", w->mt, w->kt);
  fa_sb_puts(h, "unsigned b_tile, int warp) {\n");
}

/* A from registers: the warp's fragments of row block mt for every k step,
 * packed before the fence (wgmma reads them asynchronously). */
static void wgmma_a_fragments(Emitter *em, const FaProductPlan *w) {
  StrBuf *h = &em->helpers;
  if (w->wait == FA_WAIT_LATE) /* kept by the caller until the wait */
    fa_sb_printf(h, "    unsigned (&af)[%d][4] = afs[mt];\n#pragma unroll\n    for (int kt = 0; kt < %d; ++kt) {\n",
                 w->kt, w->kt);
  else
    fa_sb_printf(h, "    unsigned af[%d][4];\n#pragma unroll\n    for (int kt = 0; kt < %d; ++kt) {\n", w->kt, w->kt);
  fa_sb_printf(h, "      const int ia = (mt * %d + kt) * 8;\n#pragma unroll\n      for (int i = 0; i < 4; ++i)\n",
               w->kt);
  if (w->a_src == FA_OPND_REGISTERS_F32)
    fa_sb_printf(h, "        af[kt][i] = fa::pack2_from_f32(a[ia + 2 * i], a[ia + 2 * i + 1], %s{});\n",
                 ctype(w->in));
  else
    fa_sb_puts(h, "        af[kt][i] = fa::pack2(a[ia + 2 * i], a[ia + 2 * i + 1]);\n");
  fa_sb_puts(h, "    }\n");
}

/* The first column of B that warpgroup g reads, and the first row of A of
 * its row block MT (an expression): with the warpgroups along N
 * (FaProductPlan.wg_n) every one has the same rows and its own columns. */
static const char *wgmma_b_col0(Emitter *em, const FaProductPlan *w) {
  return w->wg_n > 1 ? aprintf(em, "g * %d", w->N / w->wg_n) : "0";
}

static const char *wgmma_a_row0(Emitter *em, const FaProductPlan *w, const char *mt) {
  if (w->wg_n > 1)
    return aprintf(em, "(%s) * 64", mt);
  return aprintf(em, "((%s) * %d + 4 * g) * 16", mt, w->wm);
}

/* The descriptors of step kt: B's, and A's when A is a tile (its rows start
 * at the warpgroup's 64-row block of row block mt).  Each is the operand's
 * base descriptor (wgmma_descriptor_bases, built once per product) with the
 * step's byte offset added to its address field: encoding every step from
 * scratch cost ptxas a dozen instructions per wgmma, as many as the softmax's
 * arithmetic in attention's loop. */
static void wgmma_descriptors(Emitter *em, const FaProductPlan *w) {
  StrBuf *h = &em->helpers;
  const char *off, *off0, *n0 = wgmma_b_col0(em, w);
  int lbo, sbo;
  wgmma_operand(em, w->b_tile, w->b_k_inner, n0, "kt * 16", &off, &lbo, &sbo);
  wgmma_operand(em, w->b_tile, w->b_k_inner, n0, "0", &off0, &lbo, &sbo);
  fa_sb_printf(h, "      const unsigned long long db = fa::desc_add(db0, (%s) - (%s));\n", off, off0);
  if (w->a_src == FA_OPND_TILE) {
    wgmma_operand(em, w->a_tile, w->a_k_inner, wgmma_a_row0(em, w, "mt"), "kt * 16", &off, &lbo, &sbo);
    wgmma_operand(em, w->a_tile, w->a_k_inner, wgmma_a_row0(em, w, "0"), "0", &off0, &lbo, &sbo);
    fa_sb_printf(h, "      const unsigned long long da = fa::desc_add(da0, (%s) - (%s));\n", off, off0);
  }
}

/* The base descriptors of a product's operands (their first step), before
 * the loops over row blocks and steps. */
static void wgmma_descriptor_bases(Emitter *em, const FaProductPlan *w) {
  StrBuf *h = &em->helpers;
  const char *off0;
  int lbo, sbo;
  wgmma_operand(em, w->b_tile, w->b_k_inner, wgmma_b_col0(em, w), "0", &off0, &lbo, &sbo);
  fa_sb_printf(h, "  const unsigned long long db0 = fa::wgmma_desc(b_tile + %s, %d, %d, %d);\n", off0, lbo, sbo,
               swizzle_mode(w->b_tile->swizzle));
  if (w->a_src == FA_OPND_TILE) {
    wgmma_operand(em, w->a_tile, w->a_k_inner, wgmma_a_row0(em, w, "0"), "0", &off0, &lbo, &sbo);
    fa_sb_printf(h, "  const unsigned long long da0 = fa::wgmma_desc(a_tile + %s, %d, %d, %d);\n", off0, lbo, sbo,
                 swizzle_mode(w->a_tile->swizzle));
  }
}

/* Whether a product's accumulator starts at zero: a dot with no
 * accumulator operand, not fused into an addition. */
static bool starts_from_zero(const FaProductPlan *w) {
  return !w->fused_add && w->dot->noperands <= 2;
}

/* The instruction of step kt: R accumulator registers (read and written),
 * then A (a descriptor, or 4 fragment registers), B's descriptor and the
 * scale-d operand (1: accumulate), turned into the predicate p.  A product
 * from zero does not accumulate in its first step: the zeros are then dead,
 * and ptxas need not materialise them while other products are in flight
 * (it would wait for those first, its note C7517). */
static void wgmma_instruction(Emitter *em, const FaProductPlan *w) {
  StrBuf *h = &em->helpers;
  const char *ptx = w->in == DT_BF16 ? "bf16" : "f16";
  bool a_tile = w->a_src == FA_OPND_TILE;
  int R = w->nt * 4, na = a_tile ? 1 : 4;
  fa_sb_puts(h, "      asm volatile(\"{\\n.reg .pred p;\\n");
  fa_sb_printf(h, "setp.ne.b32 p, %%%d, 0;\\n", R + na + 1);
  fa_sb_printf(h, "wgmma.mma_async.sync.aligned.m64n%dk16.f32.%s.%s {", w->nt * 8, ptx, ptx);
  for (int i = 0; i < R; i++)
    fa_sb_printf(h, "%s%%%d", i ? ", " : "", i);
  if (a_tile)
    fa_sb_printf(h, "}, %%%d, %%%d, p, 1, 1, %d, %d;\\n}\\n\"\n", R, R + 1, w->a_k_inner ? 0 : 1,
                 w->b_k_inner ? 0 : 1);
  else
    fa_sb_printf(h, "}, {%%%d, %%%d, %%%d, %%%d}, %%%d, p, 1, 1, %d;\\n}\\n\"\n", R, R + 1, R + 2, R + 3, R + 4,
                 w->b_k_inner ? 0 : 1);
  fa_sb_puts(h, "                   : ");
  for (int i = 0; i < R; i++)
    fa_sb_printf(h, "%s\"+f\"(c[mt * %d + %d])", i ? ", " : "", R, i);
  fa_sb_puts(h, "\n                   : ");
  if (a_tile)
    fa_sb_puts(h, "\"l\"(da), ");
  else
    fa_sb_puts(h, "\"r\"(af[kt][0]), \"r\"(af[kt][1]), \"r\"(af[kt][2]), \"r\"(af[kt][3]), ");
  fa_sb_puts(h, starts_from_zero(w) ? "\"l\"(db), \"r\"((int)(kt != 0)));\n" : "\"l\"(db), \"r\"(1));\n");
}

/* Writes the device function for one product (into em->helpers) and
 * returns its name: per row block mt, the fence and the k16 steps; one
 * commit for the whole product, and the wait unless the plan waits for it
 * later (FA_WAIT_LATE: at its FaWgmmaWait, emit_wgmma_waits). */
static const char *write_wgmma_helper(Emitter *em, const FaProductPlan *w, const char *name, bool prepacked) {
  StrBuf *h = &em->helpers;
  wgmma_signature(em, w, name, prepacked);
  fa_sb_printf(h, "  const int g = warp >> 2;  // warpgroup\n  (void)g;\n");
  /* the accumulators materialised before the first instruction: else the
     C++ compiler sinks their initialisation between the row blocks'
     instructions, and ptxas serialises them (C7517) */
  if (em->plan->pipeline != FA_PIPELINE_CP_ASYNC)
    fa_sb_puts(h, "  fa::fence_regs(c);\n");
  wgmma_descriptor_bases(em, w);
  fa_sb_printf(h, "#pragma unroll\n  for (int mt = 0; mt < %d; ++mt) {\n", w->mt);
  if (prepacked)
    fa_sb_printf(h, "    const unsigned (&af)[%d][4] = afs[mt];\n", w->kt);
  else if (w->a_src != FA_OPND_TILE)
    wgmma_a_fragments(em, w);
  fa_sb_puts(h, "    fa::wgmma_fence();\n");
  fa_sb_printf(h, "#pragma unroll\n    for (int kt = 0; kt < %d; ++kt) {\n", w->kt);
  wgmma_descriptors(em, w);
  wgmma_instruction(em, w);
  fa_sb_puts(h, "    }\n  }\n");
  if (prepacked)
    fa_sb_puts(h, "  fa::wgmma_commit();  // waited for before the carried accumulator is read\n}\n\n");
  else if (w->wait == FA_WAIT_LATE)
    fa_sb_puts(h, "  fa::wgmma_commit();  // waited for later (the plan's wgmma.wait_group)\n}\n\n");
  else
    fa_sb_puts(h, "  fa::wgmma_commit();\n  fa::wgmma_wait<0>();\n}\n\n");
  return name;
}

static const char *emit_wgmma_helper(Emitter *em, const FaProductPlan *w) {
  return write_wgmma_helper(em, w, aprintf(em, "fa_wgmma_%d", em->nhelpers++), false);
}

/* A deferred product (FaPipelinePlan.deferred) is written as two device
 * functions: one packs its A fragments where the product stands, the other
 * issues it from them in the next iteration (committing its group). */
static void emit_deferred_helpers(Emitter *em, const FaProductPlan *w) {
  int idx = em->nhelpers++;
  const char *pack = aprintf(em, "fa_wgmma_%d_pack", idx), *issue = aprintf(em, "fa_wgmma_%d_issue", idx);
  StrBuf *h = &em->helpers;
  bool a_f32 = w->a_src == FA_OPND_REGISTERS_F32;
  fa_sb_printf(h, "// a deferred product's A fragments, packed from %s\n", a_f32 ? "f32 registers" : "registers");
  fa_sb_printf(h, "static __device__ __forceinline__ void %s(const %s (&a)[%d], unsigned (&afs)[%d][%d][4]) {\n", pack,
               a_f32 ? "float" : ctype(w->in), w->mt * w->kt * 8, w->mt, w->kt);
  fa_sb_printf(h, "#pragma unroll\n  for (int mt = 0; mt < %d; ++mt) {\n", w->mt);
  wgmma_a_fragments(em, w);
  fa_sb_puts(h, "  }\n}\n\n");
  em->defer_pack_fn = pack;
  em->defer_issue_fn = write_wgmma_helper(em, w, issue, true);
}

/* The rescale of the carried accumulator that moved to the next
 * iteration's head (FaPipelinePlan.defer_rescale; after the loop, before the
 * last issue): the factors kept from the iteration before, broadcast as the
 * rescale's own operand was, and the multiplication skipped where every
 * factor is 1, as emit_unit_rescale. */
static void emit_kept_rescale(Emitter *em, const IrOp *op) {
  const IrValue *r = op->results[0], *factors = vplan(em, r)->unit_factors;
  const char *scale = fresh_tmp(em, "scale");
  int k = op->operands[0] == factors ? 1 : 0; /* the operand rescaled */
  line(em, "%s %s[%d];  // %s", elem_ctype(em, factors->type), scale, nregs(r->layout), layout_name(em, r->layout));
  line(em, "fa::regmap<%s>(%s, %s);  // the factors kept from the iteration before, broadcast",
       broadcast_bits(em, factors->def), scale, em->defer_scale);
  line(em, "if (!fa::all_ones(%s)) {  // a running maximum moved: rescale before the product adds on", em->defer_scale);
  line(em, "  #pragma unroll");
  line(em, "  for (int fa_e = 0; fa_e < %d; ++fa_e)", nregs(r->layout));
  line(em, "    %s[fa_e] = (%s[fa_e] * %s[fa_e]);", em->defer_acc, k == 0 ? em->defer_acc : scale,
       k == 0 ? scale : em->defer_acc);
  line(em, "}");
}

/* At the rescale's own place: its result is the accumulator itself, and
 * the factors are kept for the next head. */
static void emit_rescale_kept_for_head(Emitter *em, const IrOp *op) {
  const IrValue *r = op->results[0];
  const IrOp *b = vplan(em, r)->unit_factors->def;
  const FaLayout *need = need_of(em, b, 0);
  const char *factors = array_in(em, b->operands[0], need);
  line(em, "%s (&%s)[%d] = %s;  // rescaled at the next iteration's head",
       elem_ctype(em, r->type), names_of(em, r)->name, nregs(r->layout), em->defer_acc);
  line(em, "#pragma unroll");
  line(em, "for (int fa_e = 0; fa_e < %d; ++fa_e)", nregs(need));
  line(em, "  %s[fa_e] = %s[fa_e];", em->defer_scale, factors);
}

/* The deferred product of the iteration before, accumulating into the
 * carried accumulator (its ring buffer is the use before this one's). */
static void emit_deferred_issue(Emitter *em, const FaPipelinePlan *pp) {
  em->ring_ahead = -1;
  const char *b_tile = tile_address(em, pp->deferred->b_tile);
  em->ring_ahead = 0;
  const FaProductPlan *w = pp->deferred;
  line(em, "%s(%s, %s, %s, fa_warp);", em->defer_issue_fn, em->defer_acc, em->defer_frags, b_tile);
  line(em, "// (wgmma: %d x %d blocks of 64 rows per warpgroup, n%d, %d steps of k16; deferred)", w->mt, w->wm / 4,
       w->N / w->wg_n, w->kt);
}

/* Each warp, after its last read of a ring buffer, releases it (empty[]):
 * the buffers of use `use` of the ring, or in a split ring load j's alone
 * (j < 0: every load's, unsplit). */
static void emit_ring_release(Emitter *em, const FaPipelinePlan *pp, int j, const char *use, const char *whose) {
  const IrValue *v = j >= 0 ? pp->loads[j]->op->results[0] : NULL;
  if (v)
    line(em, "__syncwarp();  // every lane of the warp is done with %s buffer of %s", whose, v->name ? v->name : "a tile");
  else
    line(em, "__syncwarp();  // every lane of the warp is done with %s buffers", whose);
  line(em, "if (fa_lane == 0)");
  line(em, "  fa::mbar_arrive(%s);",
       ring_mbar(em, pp, pp->empty, j, aprintf(em, "fa::ring_slot<%d>(%s)", pp->stages, use)));
}

/* Split rings: every thread waits for load j's copies of use `use`. */
static void emit_load_wait(Emitter *em, const FaPipelinePlan *pp, int j, const char *use, const char *whose) {
  const IrValue *v = pp->loads[j]->op->results[0];
  line(em, "fa::mbar_wait(%s, fa::ring_parity<%d>(%s));  // %s %s has landed",
       ring_mbar(em, pp, pp->full, j, aprintf(em, "fa::ring_slot<%d>(%s)", pp->stages, use)), pp->stages, use, whose,
       v->name ? v->name : "tile");
}

/* Split rings: the releases planned before op (FA_RELEASE_BEFORE), after
 * its wgmma waits. */
static void emit_releases_before(Emitter *em, const IrOp *op) {
  for (int i = 0; !em->producer_mode && i < em->plan->npipelines; i++) {
    const FaPipelinePlan *pp = em->plan->pipelines[i];
    for (int j = 0; pp->split && j < pp->nloads; j++)
      if (pp->split[j].release == FA_RELEASE_BEFORE && pp->split[j].release_before == op && em->pipe_counter[pp->id])
        emit_ring_release(em, pp, j, em->pipe_counter[pp->id], "this iteration's (its products are complete)");
  }
}

/* The deferred product of the iteration before complete, and its ring
 * buffer released (GUARDED: only where there was one). */
static void emit_deferred_wait_from(Emitter *em, const FaPipelinePlan *pp, const char *guard, int back) {
  line(em, "fa::wgmma_wait<0>();  // the deferred product of the iteration before%s", back > 1 ? " last" : "");
  line(em, "fa::fence_regs(%s);", em->defer_acc);
  line(em, "fa::fence_regs(%s);", em->defer_frags);
  if (guard)
    line(em, "if (%s) {", guard);
  em->indent += guard != NULL;
  const char *before = aprintf(em, "%s - %d", em->pipe_counter[pp->id], back);
  for (int j = pp->split ? 0 : -1; j < (pp->split ? pp->nloads : 0); j++)
    if (j < 0 || pp->split[j].release == FA_RELEASE_DEFERRED)
      emit_ring_release(em, pp, j, before, back > 1 ? "the iteration before last's" : "the iteration before's");
  em->indent -= guard != NULL;
  if (guard)
    line(em, "}");
}

static void emit_deferred_wait(Emitter *em, const FaPipelinePlan *pp, bool guarded) {
  emit_deferred_wait_from(em, pp, guarded ? em->defer_flag : NULL, 1);
}

/* A deferred product waited for at the next iteration's head
 * (FaPipelinePlan.defer_rescale): its operand and the rescale's factors
 * kept in registers across the back edge (the factors 1 and the operand 0
 * before the first iteration, so that the head's work needs no branch: ptxas
 * serialises the products around a branch that writes an accumulator). */
static void emit_late_pack_state(Emitter *em, const FaPipelinePlan *pp) {
  const FaProductPlan *w = pp->deferred;
  const IrOp *b = vplan(em, pp->defer_rescale->results[0])->unit_factors->def;
  em->defer_scale = fresh_tmp(em, "defer_scale");
  em->defer_pend = fresh_tmp(em, "defer_a");
  em->defer_inflight = fresh_tmp(em, "inflight");
  int nf = nregs(need_of(em, b, 0)), na = w->mt * w->kt * 8;
  bool a_f32 = w->a_src == FA_OPND_REGISTERS_F32;
  line(em, "%s %s[%d];  // the factors of the rescale, applied at the next iteration's head",
       elem_ctype(em, b->operands[0]->type), em->defer_scale, nf);
  line(em, "%s %s[%d];  // the deferred product's A operand, packed at the next iteration's head",
       a_f32 ? "float" : ctype(w->in), em->defer_pend, na);
  line(em, "#pragma unroll");
  line(em, "for (int fa_e = 0; fa_e < %d; ++fa_e)", nf);
  line(em, "  %s[fa_e] = 1.0f;", em->defer_scale);
  line(em, "#pragma unroll");
  line(em, "for (int fa_e = 0; fa_e < %d; ++fa_e)", na);
  line(em, "  %s[fa_e] = 0;", em->defer_pend);
  line(em, "bool %s = false;  // a deferred product issued, waited for at the next head", em->defer_inflight);
}

/* The head: the product issued in the iteration before complete (its ring
 * buffer, two uses back, released), and the last iteration's operand packed
 * into the fragments the next issue reads. */
static void emit_late_pack_head(Emitter *em, const FaPipelinePlan *pp) {
  emit_deferred_wait_from(em, pp, em->defer_inflight, 2);
  line(em, "%s = false;", em->defer_inflight);
  line(em, "%s(%s, %s);  // A of the product the next issue adds on", em->defer_pack_fn, em->defer_pend,
       em->defer_frags);
}

static int product_index(const Emitter *em, const FaProductPlan *pp) {
  for (int i = 0; i < em->plan->nproducts; i++)
    if (em->plan->products[i] == pp)
      return i;
  return -1;
}

/* wgmma.wait_group at a wait point of the plan, then fences on the
 * registers the tensor cores owned until then (the accumulators, A's
 * fragments), so that the C++ compiler reads them only after the wait. */
static void emit_wgmma_waits(Emitter *em, const IrOp *before, const IrRegion *end_of) {
  for (int i = 0; !em->producer_mode && i < em->plan->nwaits; i++) {
    const FaWgmmaWait *w = em->plan->waits[i];
    if (before ? w->before != before : (w->before || w->region != end_of))
      continue;
    line(em, "fa::wgmma_wait<%d>();  // %d product%s complete%s", w->pending, w->nproducts,
         w->nproducts == 1 ? "" : "s", w->pending ? aprintf(em, ", %d still in flight", w->pending) : "");
    for (int j = 0; j < w->nproducts; j++) {
      int idx = product_index(em, w->products[j]);
      if (idx < 0 || !em->late_acc[idx]) {
        fail(em, w->products[j]->dot->loc, "internal compiler error: a wait for a product not issued yet");
        return;
      }
      line(em, "fa::fence_regs(%s);", em->late_acc[idx]);
      if (em->late_af[idx])
        line(em, "fa::fence_regs(%s);", em->late_af[idx]);
    }
  }
}

static void emit_wgmma(Emitter *em, const FaProductPlan *pp, const char *c) {
  const FaDotPlan *dp = pp->dot->aux;
  int idx = product_index(em, pp);
  const char *fn = idx >= 0 && em->helper_names[idx] ? em->helper_names[idx] : emit_wgmma_helper(em, pp);
  if (idx >= 0)
    em->helper_names[idx] = fn;
  const char *b_tile = tile_address(em, pp->b_tile);
  const char *afs = "";
  if (pp->wait == FA_WAIT_LATE && idx >= 0) {
    em->late_acc[idx] = c;
    if (pp->a_src != FA_OPND_TILE) {
      const char *name = fresh_tmp(em, "af");
      line(em, "unsigned %s[%d][%d][4];  // A's fragments, read by the tensor cores until the wait", name, pp->mt, pp->kt);
      em->late_af[idx] = name;
      afs = aprintf(em, "%s, ", name);
    }
  }
  if (pp->a_src == FA_OPND_REGISTERS_F32)
    line(em, "%s(%s, %s, %s%s, fa_warp);  // A = %s.to(%s)", fn, c, array_in(em, pp->a_regs, dp->a), afs, b_tile,
         names_of(em, pp->a_regs)->name, fa_dtype_name(pp->in));
  else if (pp->a_src == FA_OPND_REGISTERS)
    line(em, "%s(%s, %s, %s%s, fa_warp);", fn, c, array_in(em, pp->a_regs, dp->a), afs, b_tile);
  else
    line(em, "%s(%s, %s, %s, fa_warp);", fn, c, tile_address(em, pp->a_tile), b_tile);
  if (pp->wait == FA_WAIT_LATE)
    line(em, "// (committed; waited for %s)",
         pp->wait_at && pp->wait_at->before ? "before a later op" : "at the end of this block");
  line(em, "// (wgmma: %d x %d blocks of 64 rows per warpgroup, n%d, %d steps of k16)", pp->mt, pp->wm / 4,
       pp->N / pp->wg_n, pp->kt);
}

static void emit_mma_sync(Emitter *em, const FaProductPlan *pp, const char *c) {
  const FaDotPlan *dp = pp->dot->aux;
  int mt = pp->mt, nt = pp->nt, kt = pp->kt;
  const char *b_tile = tile_address(em, pp->b_tile);
  const char *fb = tile_format(em, pp->b_tile);
  const char *bk = pp->b_k_inner ? "true" : "false";
  if (pp->a_src == FA_OPND_REGISTERS_F32) {
    line(em, "fa::mma_rs_cvt<%d, %d, %d, %d, %d, %s, %s, %s>(%s, %s, %s, fa_lane, fa_warp);  // A = %s.to(%s)", mt,
         nt, kt, pp->wm, pp->wn, bk, fb, ctype(pp->in), c, array_in(em, pp->a_regs, dp->a), b_tile,
         names_of(em, pp->a_regs)->name, fa_dtype_name(pp->in));
  } else if (pp->a_src == FA_OPND_REGISTERS) {
    line(em, "fa::mma_rs<%d, %d, %d, %d, %d, %s, %s>(%s, %s, %s, fa_lane, fa_warp);", mt, nt, kt, pp->wm, pp->wn, bk,
         fb, c, array_in(em, pp->a_regs, dp->a), b_tile);
  } else {
    line(em, "fa::mma_ss<%d, %d, %d, %d, %d, %s, %s, %s, %s, %s>(%s, %s, %s, fa_lane, fa_warp);", mt, nt, kt, pp->wm,
         pp->wn, pp->a_k_inner ? "true" : "false", bk, tile_format(em, pp->a_tile), fb, ctype(pp->in), c,
         tile_address(em, pp->a_tile), b_tile);
  }
  line(em, "// (per warp: %d x %d tiles of 16x8, %d steps of k16)", mt, nt, kt);
}

static void emit_fma(Emitter *em, const FaProductPlan *pp, const char *c) {
  const IrOp *op = pp->dot;
  const FaLayout *la = pp->la, *lb = pp->lb, *lc = ((const FaDotPlan *)op->aux)->acc;
  const char *aa = array_in(em, op->operands[0], la), *bb = array_in(em, op->operands[1], lb);
  if (pp->tf32) {
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
  line(em, "fa::dot_fma<%s, %s, %s, %d, %d, %d>(%s, %s, %s, fa_lane, fa_warp, %s);", layout_name(em, la),
       layout_name(em, lb), layout_name(em, lc), pp->M, pp->N, pp->K, c, aa, bb, scratch(em));
}

/* r = dot(...) (+ the accumulator operand), or, for a fused add, r = the
 * add's other operand + dot(...). */
static void emit_dot_into(Emitter *em, const FaProductPlan *pp, const IrValue *r, bool declare) {
  const IrOp *op = pp->dot, *add = r == op->results[0] ? NULL : pp->fused_add;
  const FaLayout *lc = ((const FaDotPlan *)op->aux)->acc;
  DType out = r->type.dtype, acc_dt = pp->acc;
  bool direct = acc_dt == out;
  const char *c = direct ? names_of(em, r)->name : fresh_tmp(em, "acc");
  if (direct && declare)
    declare_block(em, r, layout_name(em, lc));
  else if (!direct)
    line(em, "%s %s[%d];", ctype(acc_dt), c, nregs(lc));
  line(em, "#pragma unroll");
  line(em, "for (int fa_e = 0; fa_e < %d; ++fa_e)", nregs(lc));
  if (add)
    line(em, "  %s[fa_e] = %s;  // the product accumulates onto the other addend", c, operand(em, add, pp->addend));
  else if (op->noperands > 2)
    line(em, "  %s[fa_e] = %s;", c, cast_expr(em, acc_dt, op->operands[2]->type.dtype, operand(em, op, 2)));
  else
    line(em, "  %s[fa_e] = %s;", c, zero_of(em, acc_dt));
  if (pp->deferred) {
    const FaDotPlan *dp = op->aux;
    if (!direct || !em->defer || em->defer->deferred != pp) {
      fail(em, op->loc, "internal compiler error: a deferred product outside its loop");
      return;
    }
    if (em->defer_pend) {
      line(em, "#pragma unroll");
      line(em, "for (int fa_e = 0; fa_e < %d; ++fa_e)", pp->mt * pp->kt * 8);
      line(em, "  %s[fa_e] = %s[fa_e];  // A = %s, packed at the next iteration's head", em->defer_pend,
           array_in(em, pp->a_regs, dp->a), names_of(em, pp->a_regs)->name);
    } else {
      line(em, "%s(%s, %s);  // A = %s.to(%s), read by its issue in the next iteration", em->defer_pack_fn,
           array_in(em, pp->a_regs, dp->a), em->defer_frags, names_of(em, pp->a_regs)->name, fa_dtype_name(pp->in));
    }
    line(em, "%s = true;", em->defer_flag);
    return;
  }
  if (pp->takes_turn)
    line(em, "fa::wait_turn(fa_warp >> 2);  // this warpgroup's turn to issue a product");
  switch (pp->instr) {
  case FA_INSTR_WGMMA: emit_wgmma(em, pp, c); break;
  case FA_INSTR_MMA_SYNC: emit_mma_sync(em, pp, c); break;
  case FA_INSTR_FMA: emit_fma(em, pp, c); break;
  }
  if (em->defer && em->defer->defer_after == pp) {
    line(em, "if (%s) {  // the iteration before's deferred product, running under this one's softmax",
         em->defer_flag);
    em->indent++;
    emit_deferred_issue(em, em->defer);
    if (em->defer_inflight)
      line(em, "%s = true;", em->defer_inflight);
    em->indent--;
    line(em, "} else {  // an empty group: the waits count the same groups either way");
    /* the fence the issue path has: without it ptxas injects one where the
       paths join, in every iteration (its note C7519) */
    line(em, "  fa::wgmma_fence();");
    line(em, "  fa::wgmma_commit();");
    line(em, "}");
  }
  if (pp->takes_turn)
    line(em, "fa::pass_turn(fa_warp >> 2);  // the other warpgroup's turn");
  if (!direct) {
    declare_block(em, r, layout_name(em, lc));
    line(em, "#pragma unroll");
    line(em, "for (int fa_e = 0; fa_e < %d; ++fa_e)", nregs(lc));
    line(em, "  %s[fa_e] = %s;", names_of(em, r)->name, cast_expr(em, out, acc_dt, aprintf(em, "%s[fa_e]", c)));
  }
}

static void emit_dot(Emitter *em, const IrOp *op) {
  const FaProductPlan *pp = fa_plan_product(em->plan, op);
  if (!pp) {
    fail(em, op->loc, "internal compiler error: a product without a plan");
    return;
  }
  if (pp->fused_add) {
    line(em, "// (computed by the addition below, accumulating onto its other operand)");
    return;
  }
  if (pp->rotated) {
    line(em, "// %s: issued by the previous iteration (or before the loop), complete at its back edge",
         names_of(em, op->results[0])->name);
    return;
  }
  emit_dot_into(em, pp, op->results[0], true);
}

/* broadcast, expand_dims, reshape, trans of stored values. */
static void emit_reshape_like(Emitter *em, const IrOp *op) {
  const IrValue *x = op->operands[0], *r = op->results[0];
  const FaLayout *need = need_of(em, op, 0);
  const char *src = array_in(em, x, need);
  if (op->kind != IR_BROADCAST || fa_type_numel(x->type) == fa_type_numel(r->type)) {
    /* the same registers under another shape */
    line(em, "%s (&%s)[%d] = %s;  // %s", elem_ctype(em, r->type), names_of(em, r)->name, nregs(r->layout), src,
         layout_name(em, r->layout));
    return;
  }
  declare_block(em, r, layout_name(em, r->layout));
  line(em, "fa::regmap<%s>(%s, %s);  // broadcast", broadcast_bits(em, op), names_of(em, r)->name, src);
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

/* cp.async of a pipelined load's block for the iteration `times` ahead of
 * block pointer bp, into buffer `buf`. */
static void emit_async_load(Emitter *em, const FaAccessPlan *ap, const char *bp, int times, const char *buf) {
  const IrValue *x = ap->op->results[0];
  const FaTilePlan *t = ap->tile;
  const IrOp *adv = ap->advance;
  StrBuf d;
  fa_sb_init(&d);
  for (int k = 1; k < adv->noperands; k++)
    fa_sb_printf(&d, "%s(int)%s", k > 1 ? ", " : "", value_ref(em, adv->operands[k]));
  const char *ln = layout_name(em, x->layout);
  line(em, "fa::load_block_async<%s, %d, 0x%xu, %d, %s>(fa::smem_addr(fa_smem + %zu + (%s) * %zu), "
           "fa::advance_by(%s, {%s}, %d), %s, %s::owner(fa_lane, fa_warp));",
       ln, ap->vec, ap->op->boundary, t->inner, tile_format(em, t), t->offset, buf, t->buf_bytes, bp,
       d.data ? d.data : "", times, thread_offset(em, x->layout), ln);
  fa_sb_free(&d);
}

typedef enum PipeWhere { PIPE_BEFORE, PIPE_HEAD, PIPE_AFTER } PipeWhere;

/* The comment a pipeline step's code carries. */
static const char *step_comment(const FaPipeStep *s) {
  switch (s->why) {
  case FA_WHY_BUFFERS_REUSED: return "  // the buffers may have held other tiles";
  case FA_WHY_BUFFER_FREE: return "  // every warp is done with the buffer refilled now";
  case FA_WHY_LANDED: return "  // this iteration's tiles have landed";
  case FA_WHY_NONE: break;
  }
  return s->kind == FA_STEP_PROXY_FENCE ? "  // visible to the tensor cores' async proxy too" : "";
}

/* The block pointer of load ap for the iteration `times` ahead, before the
 * loop (from its initial block pointers) or in it. */
static const char *pipe_blockptr(Emitter *em, const FaPipelinePlan *pp, const FaAccessPlan *ap, int times,
                                 bool before) {
  const IrOp *loop = pp->loop, *adv = ap->advance;
  const char *bp = before ? value_ref(em, loop->operands[3 + ap->carried - 1])
                          : names_of(em, loop->regions[0]->args[ap->carried])->name;
  StrBuf d;
  fa_sb_init(&d);
  for (int k = 1; k < adv->noperands; k++)
    fa_sb_printf(&d, "%s(int)%s", k > 1 ? ", " : "", value_ref(em, adv->operands[k]));
  const char *r = aprintf(em, "fa::advance_by(%s, {%s}, %d)", bp, d.data ? d.data : "", times);
  fa_sb_free(&d);
  return r;
}

/* A step of an mbarrier ring (FA_SYNC_MBARRIER).  Use n of the ring is
 * counter + arg; its buffer is n % stages (fa::ring_slot), the parity of
 * its phase (n / stages) & 1 (fa::ring_parity). */
static void emit_ring_step(Emitter *em, const FaPipelinePlan *pp, const FaPipeStep *s, PipeWhere where) {
  const IrOp *loop = pp->loop;
  const char *counter = em->pipe_counter[pp->id];
  const char *use = s->arg ? aprintf(em, "%s + %d", counter, s->arg) : counter;
  const char *slot = aprintf(em, "fa::ring_slot<%d>(%s)", pp->stages, use);
  const char *parity = aprintf(em, "fa::ring_parity<%d>(%s)", pp->stages, use);
  bool before = where == PIPE_BEFORE;
  const char *iv = before ? value_ref(em, loop->operands[0]) : names_of(em, loop->regions[0]->args[0])->name;
  const char *exists = aprintf(em, "%s + %d * %s < %s", iv, s->arg, value_ref(em, loop->operands[2]),
                               value_ref(em, loop->operands[1]));
  if (s->by == FA_BY_PRODUCER) /* the producer's own iteration: it exists */
    exists = "true";
  if (pp->split && s->by != FA_BY_PRODUCER && s->by != FA_BY_WARP && s->kind != FA_STEP_WAIT_FULL) {
    fail(em, loop->loc, "internal compiler error: a split ring without a producer warp");
    return;
  }
  switch (s->kind) {
  case FA_STEP_WAIT_EMPTY:
    if (s->by == FA_BY_PRODUCER && pp->split)
      break; /* each load's, with its copies (FA_STEP_ISSUE) */
    if (s->by == FA_BY_PRODUCER) {
      line(em, "fa::mbar_wait(%s, %s ^ 1u);  // this iteration's buffer is free", mbar_address(em, pp->empty, slot),
           parity);
      break;
    }
    line(em, "if (%s%s)  // the buffer of iteration +%d is free", s->by == FA_BY_ISSUER ? "threadIdx.x == 0 && " : "",
         exists, s->arg);
    line(em, "  fa::mbar_wait(%s, %s ^ 1u);", mbar_address(em, pp->empty, slot), parity);
    break;
  case FA_STEP_ISSUE: {
    if (s->by == FA_BY_PRODUCER && pp->split) {
      /* each load's buffer as soon as it is free, on its own barriers */
      for (int j = 0; j < pp->nloads; j++) {
        const FaAccessPlan *ap = pp->loads[j];
        const IrValue *v = ap->op->results[0];
        line(em, "fa::mbar_wait(%s, %s ^ 1u);  // %s's buffer is free", ring_mbar(em, pp, pp->empty, j, slot), parity,
             v->name ? v->name : "the tile");
        const char *full = ring_mbar(em, pp, pp->full, j, slot);
        line(em, "fa::mbar_arrive_expect_tx(%s, %zuu);", full, ap->tma->bytes);
        emit_tma_copies(em, ap, pipe_blockptr(em, pp, ap, s->arg, before),
                        aprintf(em, "%s * %zuu", slot, ap->tile->buf_bytes), full);
      }
      break;
    }
    if (s->by == FA_BY_PRODUCER)
      line(em, "{  // this iteration's copies");
    else
      line(em, "if (%s%s) {  // the copies of iteration +%d", s->by == FA_BY_ISSUER ? "threadIdx.x == 0 && " : "",
           exists, s->arg);
    em->indent++;
    const char *full = mbar_address(em, pp->full, slot);
    line(em, "fa::mbar_arrive_expect_tx(%s, %zuu);", full, pp->tx_bytes);
    for (int j = 0; j < pp->nloads; j++) {
      const FaAccessPlan *ap = pp->loads[j];
      emit_tma_copies(em, ap, pipe_blockptr(em, pp, ap, s->arg, before),
                      aprintf(em, "%s * %zuu", slot, ap->tile->buf_bytes), full);
    }
    em->indent--;
    line(em, "}");
    break;
  }
  case FA_STEP_WAIT_FULL:
    if (pp->split) {
      for (int j = 0; j < pp->nloads; j++) {
        if (!pp->split[j].next_head) {
          emit_load_wait(em, pp, j, use, "this iteration's");
        } else if (em->defer != pp) {
          fail(em, loop->loc, "internal compiler error: a load waited for by a deferred product outside its loop");
          return;
        } else {
          line(em, "if (%s)", em->defer_flag);
          em->indent++;
          emit_load_wait(em, pp, j, aprintf(em, "%s - 1", use), "the iteration before's");
          em->indent--;
        }
      }
      break;
    }
    line(em, "fa::mbar_wait(%s, %s);  // this iteration's tiles have landed", mbar_address(em, pp->full, slot), parity);
    break;
  case FA_STEP_RELEASE:
    if (pp->split) {
      for (int j = 0; j < pp->nloads; j++)
        if (pp->split[j].release == FA_RELEASE_TAIL)
          emit_ring_release(em, pp, j, use, "this iteration's");
      break;
    }
    if (pp->deferred) {
      line(em, "// (this iteration's buffers are released after its deferred product, in the next iteration)");
      break;
    }
    emit_ring_release(em, pp, -1, use, "this iteration's");
    break;
  case FA_STEP_BARRIER: line(em, "%s%s", barrier_stmt(em), step_comment(s)); break;
  case FA_STEP_DRAIN_STORES: emit_drain(em, 0, false); break;
  default: fail(em, loop->loc, "internal compiler error: a cp.async step in an mbarrier ring"); break;
  }
}

/* The steps of a pipeline before its loop (PIPE_BEFORE: from the loop's
 * initial block pointers), at the head of an iteration, or after it. */
static void emit_pipe_steps(Emitter *em, const FaPipelinePlan *pp, const FaPipeStep *steps, int n, PipeWhere where) {
  const IrOp *loop = pp->loop;
  const IrRegion *body = loop->regions[0];
  const char *ub = value_ref(em, loop->operands[1]), *step = value_ref(em, loop->operands[2]);
  const char *counter = em->pipe_counter[pp->id];
  for (int i = 0; i < n; i++) {
    const FaPipeStep *s = &steps[i];
    if (pp->sync == FA_SYNC_MBARRIER) {
      emit_ring_step(em, pp, s, where);
      continue;
    }
    switch (s->kind) {
    case FA_STEP_BARRIER: line(em, "%s%s", barrier_stmt(em), step_comment(s)); break;
    case FA_STEP_DRAIN_STORES: emit_drain(em, 0, false); break;
    case FA_STEP_COMMIT: line(em, "fa::cp_async_commit();"); break;
    case FA_STEP_WAIT_GROUPS: line(em, "fa::cp_async_wait<%d>();%s", s->arg, step_comment(s)); break;
    case FA_STEP_PROXY_FENCE: line(em, "fa::fence_async_smem();%s", step_comment(s)); break;
    case FA_STEP_ISSUE: {
      bool before = where == PIPE_BEFORE;
      line(em, "if (%s + %d * %s < %s) {", before ? value_ref(em, loop->operands[0]) : names_of(em, body->args[0])->name,
           s->arg, step, ub);
      em->indent++;
      for (int j = 0; j < pp->nloads; j++) {
        const FaAccessPlan *ap = pp->loads[j];
        const char *bp = before ? value_ref(em, loop->operands[3 + ap->carried - 1])
                                : names_of(em, body->args[ap->carried])->name;
        const char *buf = before ? aprintf(em, "%d", s->arg) : aprintf(em, "(%s + %d) %% %d", counter, s->arg, pp->stages);
        emit_async_load(em, ap, bp, s->arg, buf);
      }
      em->indent--;
      line(em, "}");
      break;
    }
    case FA_STEP_WAIT_EMPTY:
    case FA_STEP_WAIT_FULL:
    case FA_STEP_RELEASE: fail(em, loop->loc, "internal compiler error: an mbarrier step in a cp.async pipeline"); break;
    }
  }
}


/* ---- the next iteration's first product, issued ahead (FaPipelinePlan.rotated) -------------------
 * Before the loop the first iteration's product is issued and waited for
 * into the current accumulator; at the head of each iteration the next
 * iteration's into the next one, from the ring's next buffer (waited on
 * full[] first); at the back edge it is waited for and becomes current. */

static void emit_rotated_product(Emitter *em, const FaPipelinePlan *pp, const char *into, int ahead) {
  const FaProductPlan *rp = pp->rotated;
  const IrValue *r = rp->dot->results[0];
  const char *counter = em->pipe_counter[pp->id];
  const char *use = ahead ? aprintf(em, "%s + %d", counter, ahead) : counter;
  line(em, "fa::mbar_wait(%s, fa::ring_parity<%d>(%s));  // the tiles of iteration +%d have landed",
       mbar_address(em, pp->full, aprintf(em, "fa::ring_slot<%d>(%s)", pp->stages, use)), pp->stages, use, ahead);
  const char *saved = names_of(em, r)->name;
  names_of(em, r)->name = into;
  em->ring_ahead = ahead;
  emit_dot_into(em, rp, r, false);
  em->ring_ahead = 0;
  names_of(em, r)->name = saved;
}

static const char *emit_rotated_first(Emitter *em, const FaPipelinePlan *pp, const char **next) {
  const FaProductPlan *rp = pp->rotated;
  const IrValue *r = rp->dot->results[0];
  const FaLayout *lc = ((const FaDotPlan *)rp->dot->aux)->acc;
  const char *cur = fresh_name(em, r->name ? r->name : "s");
  *next = fresh_name(em, aprintf(em, "%s_next", cur));
  names_of(em, r)->name = cur;
  const IrOp *loop = pp->loop;
  line(em, "// %s: each iteration's is issued by the one before, the first here", cur);
  line(em, "%s %s[%d], %s[%d];  // %s", ctype(rp->acc), cur, nregs(lc), *next, nregs(lc), layout_name(em, lc));
  line(em, "if (%s < %s) {", value_ref(em, loop->operands[0]), value_ref(em, loop->operands[1]));
  em->indent++;
  emit_rotated_product(em, pp, cur, 0);
  line(em, "fa::wgmma_wait<0>();");
  line(em, "fa::fence_regs(%s);", cur);
  em->indent--;
  line(em, "}");
  return cur;
}

static void emit_rotated_next(Emitter *em, const FaPipelinePlan *pp, const char *next, const char *iv,
                              const char *step, const char *ub) {
  line(em, "if (%s + %s < %s) {  // the next iteration's %s, running under this one", iv, step, ub,
       names_of(em, pp->rotated->dot->results[0])->name);
  em->indent++;
  emit_rotated_product(em, pp, next, 1);
  em->indent--;
  line(em, "}");
}

static void emit_rotated_back_edge(Emitter *em, const FaPipelinePlan *pp, const char *cur, const char *next,
                                   const char *iv, const char *step, const char *ub) {
  line(em, "fa::wgmma_wait<0>();  // the next iteration's %s too", cur);
  line(em, "fa::fence_regs(%s);", next);
  line(em, "if (%s + %s < %s) {", iv, step, ub);
  line(em, "#pragma unroll");
  line(em, "  for (int fa_e = 0; fa_e < %d; ++fa_e)", nregs(((const FaDotPlan *)pp->rotated->dot->aux)->acc));
  line(em, "    %s[fa_e] = %s[fa_e];", cur, next);
  line(em, "}");
}

static void emit_for(Emitter *em, const IrOp *op) {
  IrRegion *body = op->regions[0];
  int n = op->nresults;
  /* loop-carried variables: named after the iteration values */
  for (int i = 0; i < n; i++) {
    IrValue *arg = body->args[1 + i];
    const char *name = fresh_name(em, arg->name ? arg->name : op->results[i]->name);
    names_of(em, arg)->name = name;
    names_of(em, op->results[i])->name = name;
    declare_var(em, arg, name);
    assign_var(em, name, arg, op, 3 + i);
  }
  IrValue *iv = body->args[0];
  const char *ivn = fresh_name(em, iv->name ? iv->name : "iv");
  names_of(em, iv)->name = ivn;
  /* the loads of this loop issued ahead */
  const FaPipelinePlan *pp = fa_plan_pipeline(em->plan, op);
  const char *counter = NULL;
  const char *lb = value_ref(em, op->operands[0]), *ub = value_ref(em, op->operands[1]);
  const char *step = value_ref(em, op->operands[2]);
  if (pp && pp->sync == FA_SYNC_MBARRIER) {
    /* the ring's use counter runs over the whole kernel (declared at its top) */
    counter = aprintf(em, "fa_ring%d", pp->ring);
    em->pipe_counter[pp->id] = counter;
    if (em->plan->warp_specialised)
      line(em, "// software pipeline: the producer warp has the copy engine load the tiles of up to %d iterations "
               "ahead (mbarrier ring %d)",
           pp->stages, pp->ring);
    else
      line(em, "// software pipeline: the copy engine loads the tiles of the next %d iteration%s while this one "
               "computes (mbarrier ring %d)",
           pp->ahead, pp->ahead == 1 ? "" : "s", pp->ring);
    emit_pipe_steps(em, pp, pp->prologue, pp->nprologue, PIPE_BEFORE);
  } else if (pp) {
    counter = fresh_tmp(em, "it");
    em->pipe_counter[pp->id] = counter;
    line(em, "// software pipeline: the tiles of the next %d iterations are loaded while this one computes", pp->ahead);
    line(em, "int %s = 0;", counter);
    emit_pipe_steps(em, pp, pp->prologue, pp->nprologue, PIPE_BEFORE);
  }
  if (pp)
    emit_tma_waits(em, op);   /* the tiles loaded before the loop, now that its first copies are in flight */
  const char *cur = NULL, *next = NULL;
  if (pp && pp->rotated && !em->producer_mode)
    cur = emit_rotated_first(em, pp, &next);
  const FaPipelinePlan *outer_defer = em->defer;
  if (pp && pp->deferred && !em->producer_mode) {
    const FaProductPlan *dp = pp->deferred;
    em->defer = pp;
    em->defer_frags = fresh_tmp(em, "defer_af");
    em->defer_flag = fresh_tmp(em, "deferred");
    em->defer_acc = names_of(em, body->args[1 + pp->defer_carried])->name;
    emit_deferred_helpers(em, dp);
    line(em, "unsigned %s[%d][%d][4];  // the deferred product's A fragments", em->defer_frags, dp->mt, dp->kt);
    line(em, "bool %s = false;  // a deferred product waits for its issue", em->defer_flag);
    em->defer_scale = em->defer_pend = em->defer_inflight = NULL;
    if (pp->defer_rescale)
      emit_late_pack_state(em, pp);
  }
  line(em, "for (%s %s = %s; %s < %s; %s += %s) {", ctype(iv->type.dtype), ivn, lb, ivn, ub, ivn, step);
  em->indent++;
  if (pp)
    emit_pipe_steps(em, pp, pp->head, pp->nhead, PIPE_HEAD);
  if (cur)
    emit_rotated_next(em, pp, next, ivn, step, ub);
  for (int i = 0; i < n; i++)
    emit_conversions(em, body->args[1 + i]);
  emit_region(em, body);
  if (cur)
    emit_rotated_back_edge(em, pp, cur, next, ivn, step, ub);
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
      if (y->operands[i] == arg && !is_virtual(em, arg)) {
        tmp[i] = NULL;
        continue;
      }
      if (swap) {
        tmp[i] = fresh_tmp(em, "next");
        declare_var(em, arg, tmp[i]);
        assign_var(em, tmp[i], arg, y, i);
      } else {
        assign_var(em, names_of(em, arg)->name, arg, y, i);
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
            line(em, "  %s[fa_e] = %s[fa_e];", names_of(em, arg)->name, tmp[i]);
          } else {
            line(em, "%s = %s;", names_of(em, arg)->name, tmp[i]);
          }
        }
  }
  if (pp)
    emit_pipe_steps(em, pp, pp->tail, pp->ntail, PIPE_HEAD);
  if (counter)
    line(em, "++%s;", counter);
  em->indent--;
  line(em, "}");
  if (em->defer && em->defer == pp) {
    if (releases_tiles_in_loop(em, op))
      emit_tile_release(em);   /* the producer loads the next program's under the last deferred product */
    if (pp->defer_rescale)
      emit_late_pack_head(em, pp);
    line(em, "if (%s) {  // the last iteration's deferred product", em->defer_flag);
    em->indent++;
    for (int j = 0; pp->split && j < pp->nloads; j++)
      if (pp->split[j].next_head)
        emit_load_wait(em, pp, j, aprintf(em, "%s - 1", counter), "the last iteration's");
    if (pp->defer_rescale)
      emit_kept_rescale(em, pp->defer_rescale);
    emit_deferred_issue(em, pp);
    emit_deferred_wait(em, pp, false);
    em->indent--;
    line(em, "}");
  }
  em->defer = outer_defer;
  if (pp)
    emit_pipe_steps(em, pp, pp->epilogue, pp->nepilogue, PIPE_AFTER);
  for (int i = 0; i < n; i++)
    emit_conversions(em, op->results[i]);
}

static void emit_if(Emitter *em, const IrOp *op) {
  for (int i = 0; i < op->nresults; i++) {
    if (!vplan(em, op->results[i])->live)
      continue; /* (the flag of an early return after the last statement, say) */
    const char *name = fresh_name(em, op->results[i]->name);
    names_of(em, op->results[i])->name = name;
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
        if (vplan(em, op->results[i])->live)
          assign_var(em, names_of(em, op->results[i])->name, op->results[i], y, i);
    em->indent--;
  }
  line(em, "}");
  for (int i = 0; i < op->nresults; i++)
    emit_conversions(em, op->results[i]);
}

/* ---- scans, reductions with a combine function, random numbers, device_print, while loops ------------ */

static void emit_fma_op(Emitter *em, const IrOp *op) {
  emit_elementwise(em, op->results[0],
                   aprintf(em, "fa::fma(%s, %s, %s)", operand(em, op, 0), operand(em, op, 1), operand(em, op, 2)));
}

static void emit_rand(Emitter *em, const IrOp *op) {
  emit_elementwise(em, op->results[0],
                   aprintf(em, "fa::%s<%d>(%s, %s)", op->sub == RAND_NORMAL ? "rand_normal" : "rand_uniform",
                           (int)op->ival, value_ref(em, op->operands[0]), operand(em, op, 1)));
}

/* The struct a scan or a reduction with a combine function works on,
 * written ahead of the kernel: one field per value, the combine region as
 * its `combine`, and a lane shuffle. */
static const char *emit_combine_struct(Emitter *em, const IrOp *op) {
  const char *t = aprintf(em, "fa_Scan%d", em->nhelpers++);
  const IrRegion *c = op->regions[0];
  int n = op->nresults;
  StrBuf saved = em->body;
  int saved_indent = em->indent;
  fa_sb_init(&em->body);
  em->indent = 1;
  line(em, "// the combine function of the %s at line %d", op->kind == IR_SCAN ? "scan" : "reduction", op->loc.line);
  line(em, "struct %s {", t);
  for (int k = 0; k < n; k++)
    line(em, "  %s v%d;", ctype(op->results[k]->type.dtype), k);
  line(em, "  FA_DEV static %s combine(const %s &fa_a, const %s &fa_b) {", t, t, t);
  em->indent = 2;
  for (int k = 0; k < 2 * n; k++) {
    const IrValue *arg = c->args[k];
    names_of(em, arg)->name = fresh_name(em, arg->name);
    line(em, "const %s %s = fa_%c.v%d;", ctype(arg->type.dtype), names_of(em, arg)->name, k < n ? 'a' : 'b', k % n);
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

/* fa::scan's step codes of the planned axis bits, each after ", ": r
 * (register bit r), 32 + l (lane bit l), 64 + w (warp bit w). */
static const char *step_codes(Emitter *em, const FaAxisSteps *st) {
  static const int base[] = {[FA_AXIS_REGISTER] = 0, [FA_AXIS_LANE] = 32, [FA_AXIS_WARP] = 64};
  StrBuf sb;
  fa_sb_init(&sb);
  for (int i = 0; i < st->nbits; i++)
    fa_sb_printf(&sb, ", %d", base[st->bits[i].kind] + st->bits[i].bit);
  const char *r = aprintf(em, "%s", sb.data ? sb.data : "");
  fa_sb_free(&sb);
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
  const FaReducePlan *rp = fa_plan_reduce(em->plan, op);
  if (!rp) {
    fail(em, op->loc, "internal compiler error: a reduction without a plan");
    return;
  }
  const FaLayout *src = rp->src, *sl = rp->slice;
  const char *t = emit_combine_struct(em, op);
  const char *steps = step_codes(em, &rp->steps);
  const char *buf = pack_operands(em, op, t, src);
  line(em, "fa::combine_all<%s>(%s, fa_lane, fa_warp, %s);  // along axis %d of %s", steps[0] ? steps + 2 : "", buf,
       scratch(em), op->axis, layout_name(em, src));
  int first, count, keep[FA_LAYOUT_MAX_BITS], nk = 0;
  fa_layout_dim_bits(src, op->axis, &first, &count);
  for (int i = 0; i < src->nreg; i++)
    if (src->reg[i] < first || src->reg[i] >= first + count)
      keep[nk++] = i;
  const char *red = fresh_tmp(em, "red");
  line(em, "%s %s[%d];", t, red, 1 << nk);
  line(em, "fa::regmap<%s>(%s, %s);", bits_list(em, keep, nk), red, buf);
  for (int k = 0; k < op->nresults; k++) {
    const IrValue *r = op->results[k];
    if (!vplan(em, r)->live)
      continue;
    if (!is_block(r)) {
      line(em, "const %s %s = %s[0].v%d;", ctype(r->type.dtype), names_of(em, r)->name, red, k);
      continue;
    }
    const FaConversionPlan *c = &rp->to_result[k];
    bool direct = c->to == c->from;
    const char *dst = direct ? names_of(em, r)->name : fresh_tmp(em, "red");
    if (direct)
      declare_block(em, r, layout_name(em, sl));
    else
      line(em, "%s %s[%d];", ctype(r->type.dtype), dst, nregs(sl));
    line(em, "#pragma unroll");
    line(em, "for (int fa_e = 0; fa_e < %d; ++fa_e)", nregs(sl));
    line(em, "  %s[fa_e] = %s[fa_e].v%d;", dst, red, k);
    if (!direct) {
      declare_block(em, r, layout_name(em, r->layout));
      emit_convert(em, names_of(em, r)->name, dst, c);
    }
  }
}

/* scan: the elements packed into the struct, fa::scan over the axis's bits
 * (whatever hardware holds them), unpacked into the results. */
static void emit_scan(Emitter *em, const IrOp *op) {
  const FaScanPlan *sp = fa_plan_scan(em->plan, op);
  if (!sp) {
    fail(em, op->loc, "internal compiler error: a scan without a plan");
    return;
  }
  const FaLayout *l = sp->layout;
  const char *t = emit_combine_struct(em, op);
  const char *buf = pack_operands(em, op, t, l);
  int nr = nregs(l);
  line(em, "fa::scan<%s%s>(%s, fa_lane, fa_warp, %s);  // along axis %d of %s", sp->reverse ? "true" : "false",
       step_codes(em, &sp->steps), buf, scratch(em), op->axis, layout_name(em, l));
  for (int k = 0; k < op->nresults; k++) {
    const IrValue *r = op->results[k];
    if (!vplan(em, r)->live)
      continue;
    declare_block(em, r, layout_name(em, l));
    line(em, "#pragma unroll");
    line(em, "for (int fa_e = 0; fa_e < %d; ++fa_e)", nr);
    line(em, "  %s[fa_e] = %s[fa_e].v%d;", names_of(em, r)->name, buf, k);
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

/* device_print: scalars from thread 0, block elements from the threads the
 * plan names, with the program id and the element's coordinates. */
static void emit_print(Emitter *em, const IrOp *op) {
  const FaPrintPlan *pp = fa_plan_print(em->plan, op);
  if (!pp) {
    fail(em, op->loc, "internal compiler error: a print without a plan");
    return;
  }
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
    const FaLayout *l = pp->layout;
    const char *ln = layout_name(em, l), *toff = thread_offset(em, l);
    print_conversion(em, x->type.dtype, op->ival != 0, operand(em, op, k), &fmt, &arg);
    StrBuf idx, coords;
    fa_sb_init(&idx);
    fa_sb_init(&coords);
    for (int d = 0; d < x->type.rank; d++) {
      fa_sb_printf(&idx, "%s%%d", d ? ", " : "");
      fa_sb_printf(&coords, ", %s::coord(%s, fa_e, %d)", ln, toff, d);
    }
    if (pp->owners_only)
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
    names_of(em, cond->args[i])->name = name;
    names_of(em, body->args[i])->name = name;
    names_of(em, op->results[i])->name = name;
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
        line(em, "  %s[fa_e] = %s[fa_e];", names_of(em, arg)->name, tmp[i]);
      } else {
        line(em, "%s = %s;", names_of(em, arg)->name, tmp[i]);
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
  emit_wgmma_waits(em, op, NULL);
  emit_releases_before(em, op);
  if (em->defer && !em->producer_mode && op == em->defer->defer_wait_before)
    emit_deferred_wait(em, em->defer, true);
  if (em->defer && !em->producer_mode && em->defer->defer_rescale && op == em->defer->defer_head) {
    emit_late_pack_head(em, em->defer);
    emit_kept_rescale(em, em->defer->defer_rescale);
  }
  /* values computed at their uses need no code here */
  if (op->nresults == 1 && is_block(op->results[0]) && is_virtual(em, op->results[0]))
    return;
  if (op->kind == IR_CONST || !fa_plan_op_live(em->plan, op))
    return;
  if (!(op->kind == IR_FOR && fa_plan_pipeline(em->plan, op)))
    emit_tma_waits(em, op);
  source_comment(em, op->loc);
  const IrValue *r = op->nresults > 0 ? op->results[0] : NULL;
  const FaProductPlan *dotp = op->kind == IR_DOT ? fa_plan_product(em->plan, op) : NULL;
  if (r && op->kind != IR_FOR && op->kind != IR_IF && op->kind != IR_WHILE && !(dotp && dotp->rotated)) {
    for (int i = 0; i < op->nresults; i++)
      names_of(em, op->results[i])->name = fresh_name(em, op->results[i]->name);
  }
  switch (op->kind) {
  case IR_PROGRAM_ID:
  case IR_NUM_PROGRAMS: {
    static const char axes[] = "xyz";
    int axis = op->axis >= 0 && op->axis < 3 ? op->axis : 0;
    if ((em->plan->schedule.kind == FA_SCHEDULE_PERSISTENT || em->plan->schedule.grid_ordered) &&
        op->kind == IR_PROGRAM_ID)
      line(em, "const %s %s = (%s)fa_pid.v[%d];", ctype(r->type.dtype), names_of(em, r)->name, ctype(r->type.dtype),
           axis);
    else if (em->plan->schedule.kind == FA_SCHEDULE_PERSISTENT)
      line(em, "const %s %s = (%s)fa_grid_%c;", ctype(r->type.dtype), names_of(em, r)->name, ctype(r->type.dtype),
           axes[axis]);
    else
      line(em, "const %s %s = (%s)%s.%c;", ctype(r->type.dtype), names_of(em, r)->name, ctype(r->type.dtype),
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
    if (vplan(em, r)->fused_add_of) {
      source_comment(em, vplan(em, r)->fused_add_of->dot->loc);
      emit_dot_into(em, vplan(em, r)->fused_add_of, r, true);
      break;
    }
    if (vplan(em, r)->unit_factors && em->defer && em->defer->defer_rescale == op) {
      emit_rescale_kept_for_head(em, op);
      break;
    }
    if (vplan(em, r)->unit_factors) {
      emit_unit_rescale(em, op);
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
  case IR_ATOMIC_ADD_BLOCK: emit_atomic_add_block(em, op); break;
  case IR_FOR: emit_for(em, op); return;
  case IR_IF: emit_if(em, op); return;
  case IR_ASSERT: emit_assert(em, op); break;
  case IR_FMA: emit_fma_op(em, op); break;
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
  for (const IrOp *op = r->first; op && em->ok; op = op->next) {
    emit_op(em, op);
    emit_tma_waits_after(em, op);
    if (releases_tiles_after(em, op) && !releases_tiles_in_loop(em, op))
      emit_tile_release(em);
  }
  emit_wgmma_waits(em, NULL, r);
}


/* ---- the producer warp (warp specialisation) ----------------------------------------------------
 * One thread of the producer warpgroup runs the producer's slice of the
 * kernel (fa_plan_in_producer): the scalars, block pointers and control flow
 * the bulk copies need, and in each ring loop, each iteration, waits until
 * the ring's next buffer is released and issues the copies into it; a
 * load outside loops is issued where it stands.  Its loops carry only the
 * values of the slice. */

static void emit_producer_region(Emitter *em, const IrRegion *r);

static void emit_producer_for(Emitter *em, const IrOp *op) {
  IrRegion *body = op->regions[0];
  int n = op->nresults;
  for (int i = 0; i < n; i++) {
    IrValue *arg = body->args[1 + i];
    if (!vplan(em, arg)->producer)
      continue;
    const char *name = fresh_name(em, arg->name ? arg->name : op->results[i]->name);
    names_of(em, arg)->name = name;
    names_of(em, op->results[i])->name = name;
    declare_var(em, arg, name);
    assign_var(em, name, arg, op, 3 + i);
  }
  IrValue *iv = body->args[0];
  const char *ivn = fresh_name(em, iv->name ? iv->name : "iv");
  names_of(em, iv)->name = ivn;
  const FaPipelinePlan *pp = fa_plan_pipeline(em->plan, op);
  if (pp && pp->sync == FA_SYNC_MBARRIER)
    em->pipe_counter[pp->id] = aprintf(em, "fa_ring%d", pp->ring);
  else
    pp = NULL;
  source_comment(em, op->loc);
  line(em, "for (%s %s = %s; %s < %s; %s += %s) {", ctype(iv->type.dtype), ivn, value_ref(em, op->operands[0]), ivn,
       value_ref(em, op->operands[1]), ivn, value_ref(em, op->operands[2]));
  em->indent++;
  if (pp)
    emit_pipe_steps(em, pp, pp->producer, pp->nproducer, PIPE_HEAD);
  emit_producer_region(em, body);
  const IrOp *y = body->last;
  if (y && y->kind == IR_YIELD && y->noperands == n) {
    /* through temporaries: an update may read another carried value */
    const char **tmp = fa_arena_alloc(&em->fc->arena, (size_t)(n + 1) * sizeof *tmp);
    if (!tmp) {
      em->ok = false;
      return;
    }
    for (int i = 0; i < n; i++) {
      IrValue *arg = body->args[1 + i];
      tmp[i] = NULL;
      if (!vplan(em, arg)->producer || y->operands[i] == arg)
        continue;
      tmp[i] = fresh_tmp(em, "next");
      declare_var(em, arg, tmp[i]);
      assign_var(em, tmp[i], arg, y, i);
    }
    for (int i = 0; i < n; i++)
      if (tmp[i])
        line(em, "%s = %s;", names_of(em, body->args[1 + i])->name, tmp[i]);
  }
  if (pp)
    line(em, "++%s;", em->pipe_counter[pp->id]);
  em->indent--;
  line(em, "}");
}

static void emit_producer_if(Emitter *em, const IrOp *op) {
  for (int i = 0; i < op->nresults; i++) {
    if (!vplan(em, op->results[i])->producer)
      continue;
    const char *name = fresh_name(em, op->results[i]->name);
    names_of(em, op->results[i])->name = name;
    declare_var(em, op->results[i], name);
  }
  source_comment(em, op->loc);
  line(em, "if (%s) {", value_ref(em, op->operands[0]));
  for (int r = 0; r < op->nregions; r++) {
    if (r == 1)
      line(em, "} else {");
    em->indent++;
    emit_producer_region(em, op->regions[r]);
    const IrOp *y = op->regions[r]->last;
    if (y && y->kind == IR_YIELD)
      for (int i = 0; i < y->noperands && i < op->nresults; i++)
        if (vplan(em, op->results[i])->producer)
          assign_var(em, names_of(em, op->results[i])->name, op->results[i], y, i);
    em->indent--;
  }
  line(em, "}");
}

static void emit_producer_region(Emitter *em, const IrRegion *r) {
  for (const IrOp *op = r->first; op && em->ok; op = op->next) {
    if (!fa_plan_in_producer(em->plan, op) || op->kind == IR_YIELD || op->kind == IR_RETURN)
      continue;
    switch (op->kind) {
    case IR_FOR: emit_producer_for(em, op); break;
    case IR_IF: emit_producer_if(em, op); break;
    case IR_LOAD_BLOCK: {
      const FaAccessPlan *ap = fa_plan_access(em->plan, op);
      source_comment(em, op->loc);
      if (ap && ap->method == FA_ACCESS_TMA)
        emit_tma_once(em, ap);
      break;
    }
    default: emit_op(em, op); break;
    }
  }
}

/* Persistent kernels: each role's body inside the loop over the programs
 * this thread block runs (FaSchedulePlan); `fa_pid` replaces blockIdx. */
static bool tiles_counted(const Emitter *em) {
  for (int i = 0; i < em->plan->naccesses; i++)
    if (em->plan->accesses[i]->method == FA_ACCESS_TMA && !em->plan->accesses[i]->pipeline)
      return true;
  return false;
}

static void emit_tile_loop_open(Emitter *em, bool compute) {
  const FaSchedulePlan *s = &em->plan->schedule;
  if (s->grid_ordered)
    line(em,
         "const fa::TileId fa_pid = fa::tile_coords<%d, %s, %d>(blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * "
         "blockIdx.z), gridDim.x, gridDim.y, gridDim.z);  // longest first (the plan's schedule)",
         s->axis, s->descending ? "true" : "false", s->group);
  if (s->kind != FA_SCHEDULE_PERSISTENT)
    return;
  bool counted = tiles_counted(em);
  if (counted)
    line(em, "unsigned fa_tiles_done = 0;  // programs run so far: the phase of the mbarriers of loads outside loops");
  if (s->dynamic) {
    /* round 0 runs program blockIdx.x; each later one the next program
       nobody has taken (fa::next_tile_shared, fa::next_tile_publish) */
    char next[320], slots[200] = "";
    if (s->next_full >= 0) /* the slots and their mbarriers, as the producer and the compute warps name them */
      snprintf(slots, sizeof slots,
               "fa::smem_addr(fa_smem + %zu), fa::smem_addr(fa_smem + %zu), fa::smem_addr(fa_smem + %zu)", s->next_slots,
               em->plan->barriers[s->next_full].offset, em->plan->barriers[s->next_empty].offset);
    if (s->next_full < 0)
      snprintf(next, sizeof next,
               "fa::next_tile_shared(fa_tile_counter, gridDim.x, reinterpret_cast<unsigned *>(fa_smem + %zu), fa_round)",
               s->next_slots);
    else if (!compute)
      snprintf(next, sizeof next, "fa::next_tile_publish(fa_tile_counter, gridDim.x, %s, fa_round)", slots);
    else
      snprintf(next, sizeof next, "fa::next_tile_take(%s, fa_round, fa_lane)", slots);
    line(em, "for (unsigned fa_round = 0, fa_tile = blockIdx.x; fa_tile < fa_grid_x * fa_grid_y * fa_grid_z; "
             "++fa_round, fa_tile = %s%s) {",
         next, counted ? ", ++fa_tiles_done" : "");
  } else if (s->order == FA_ORDER_LONGEST_FIRST) {
    /* the programs in rounds of gridDim.x, each round's in the order
       opposite to the round before (b, then gridDim.x - 1 - b): with the
       longest first, thread block 0 would otherwise take the longest of
       every round (measured on causal attention: 8% slower than the grid) */
    line(em, "for (unsigned fa_round = 0, fa_tile = blockIdx.x; fa_tile < fa_grid_x * fa_grid_y * fa_grid_z; "
             "++fa_round, fa_tile = fa::snake_tile(fa_round, blockIdx.x, gridDim.x)%s) {",
         counted ? ", ++fa_tiles_done" : "");
  } else {
    line(em, "for (unsigned fa_tile = blockIdx.x; fa_tile < fa_grid_x * fa_grid_y * fa_grid_z; fa_tile += gridDim.x%s) {",
         counted ? ", ++fa_tiles_done" : "");
  }
  em->indent++;
  if (s->order == FA_ORDER_LONGEST_FIRST)
    line(em,
         "const fa::TileId fa_pid = fa::tile_coords<%d, %s, %d>(fa_tile, fa_grid_x, fa_grid_y, fa_grid_z);  // longest "
         "first",
         s->axis, s->descending ? "true" : "false", s->group);
  else
    line(em, "const fa::TileId fa_pid = fa::tile_coords<-1, false, 1>(fa_tile, fa_grid_x, fa_grid_y, fa_grid_z);");
  if (!compute)
    return;
  /* the thread's ids and the shared memory's address, opaque to the
     compiler in each program: else it computes the addresses derived from
     them once, before the loop, and holds them in registers across every
     program (in the compile sweep 8 to 20 more registers than the kernel
     with one block per program, and spills) */
  line(em, "int fa_lane_p = fa_lane, fa_warp_p = fa_warp;  // recomputed per program (see emit_tile_loop_open)");
  line(em, "unsigned char *fa_smem_p = fa_smem;");
  line(em, "asm volatile(\"\" : \"+r\"(fa_lane_p), \"+r\"(fa_warp_p), \"+l\"(fa_smem_p));");
  line(em, "const int fa_lane = fa_lane_p, fa_warp = fa_warp_p;");
  line(em, "unsigned char *const fa_smem = fa_smem_p;");
  line(em, "(void)fa_lane, (void)fa_warp, (void)fa_smem;");
  em->toff_at = (long)em->body.len;
  em->toff_indent = em->indent;
}

static void emit_tile_loop_close(Emitter *em, bool compute) {
  const FaSchedulePlan *s = &em->plan->schedule;
  if (s->kind != FA_SCHEDULE_PERSISTENT)
    return;
  if (compute && s->tile_barrier >= 0 && !s->tile_release_after)
    emit_tile_release(em);
  if (compute && s->end_sync)
    line(em, "%s  // this program's shared memory is free for the next", barrier_stmt(em));
  em->indent--;
  line(em, "}");
}

/* Before the block exits, its bulk stores have read their staging tiles
 * (the shared memory goes to the next block).  Their writes need no wait:
 * they are done when the grid is, like every other write of the kernel,
 * and waiting for them kept a block's multiprocessor idle for the time of
 * a round trip to memory at every block's end. */
static void emit_stores_complete(Emitter *em) {
  if (em->plan->bulk_stores)
    line(em, "if (threadIdx.x == 0) fa::bulk_wait_read<0>();  // the bulk stores have read their staging tiles "
             "before the block exits");
}

/* The kernel's body split into its two roles, one branch each of a single
 * if/else (what setmaxnreg needs): the producer warpgroup (whose other
 * threads leave at once) and the compute warpgroups. */
static void emit_roles(Emitter *em) {
  const FaCudaPlan *p = em->plan;
  int saved_names = em->names.len;
  line(em, "if (fa_warp >= %d) {  // the producer warpgroup", p->warps);
  em->indent++;
  if (p->roles[1].max_registers)
    line(em, "fa::setmaxnreg_dec<%d>();  // its registers go to the consumers", p->roles[1].max_registers);
  line(em, "if (fa_warp == %d && fa_lane == 0) {  // one thread issues every bulk copy", p->warps);
  em->indent++;
  for (int i = 0; i < p->nrings; i++)
    line(em, "int fa_ring%d = 0;  // uses of mbarrier ring %d so far", i, i);
  em->producer_mode = true;
  emit_tile_loop_open(em, false);
  emit_producer_region(em, em->fn->body);
  emit_tile_loop_close(em, false);
  em->producer_mode = false;
  em->indent--;
  line(em, "}");
  em->indent--;
  line(em, "} else {  // the compute warpgroups (consumers)");
  em->indent++;
  /* the consumers name the values afresh */
  for (int i = 0; i < p->nvalues; i++)
    if (em->by_id[i]) {
      em->vn[i].name = NULL;
      em->vn[i].convs = NULL;
    }
  for (int i = 0; i < em->fn->nparams; i++) /* params keep their names */
    (void)i;
  em->names.len = saved_names;
  em->last_line = 0;
  em->last_src = NULL;
  if (p->roles[0].max_registers)
    line(em, "fa::setmaxnreg_inc<%d>();", p->roles[0].max_registers);
  if (p->npingpong)
    line(em, "if ((fa_warp >> 2) == 0) fa::named_arrive<2, 256>();  // warpgroup 0 issues first");
  for (int i = 0; i < p->nrings; i++)
    line(em, "int fa_ring%d = 0;  // uses of mbarrier ring %d so far", i, i);
  emit_tile_loop_open(em, true);
  emit_region(em, em->fn->body);
  emit_tile_loop_close(em, true);
  emit_stores_complete(em);
  em->indent--;
  line(em, "}");
}

/* ---- the kernel ----------------------------------------------------------------------------------------- */

static void emit_mbarrier_init(Emitter *em, StrBuf *out);

/* The thread offsets the layouts' accesses use (at the kernel's start, or
 * in each program of a persistent kernel). */
static void emit_thread_offsets(Emitter *em, StrBuf *out, int indent) {
  for (int i = 0; i < em->layouts->layouts.len; i++) {
    const FaLayout *l = em->layouts->layouts.items[i];
    if (em->toff_used[l->id])
      fa_sb_printf(out, "%*sconst int fa_t%d = fa_L%d::thread_offset(fa_lane, fa_warp);\n", 2 * indent, "", l->id,
                   l->id);
  }
}

static void emit_prologue(Emitter *em, StrBuf *out, const FaCudaKernel *kout) {
  char arch[32];
  fa_cuda_target_name(em->plan->target, arch, sizeof arch);
  const char *file = em->fn->loc.src && em->fn->loc.src->name ? em->fn->loc.src->name : "<string>";
  fa_sb_printf(out, "// %s: kernel '%s' for %s, %d warps (%d threads), %d stages", file,
               em->fn->name ? em->fn->name : "?", arch, em->plan->warps, kout->threads, em->k->stages);
  if (em->plan->pipeline != FA_PIPELINE_CP_ASYNC)
    fa_sb_printf(out, ", pipeline %s", fa_pipeline_name(em->plan->pipeline));
  if (em->plan->schedule.kind == FA_SCHEDULE_PERSISTENT)
    fa_sb_puts(out, ", persistent");
  fa_sb_puts(out, ".\n");
  fa_sb_puts(out, "// Generated by fadsl " PACKAGE_VERSION " from the kernel's specialised tile IR.\n");
  fa_sb_printf(out, "// Dynamic shared memory: %zu bytes.\n", kout->shared_bytes);
  if (em->plan->warp_specialised) /* the library's barriers among the compute warps only */
    fa_sb_printf(out, "#define FA_COMPUTE_THREADS %d\n", 32 * em->plan->warps);
  fa_sb_puts(out, "#include \"fadsl_device.cuh\"\n\n");
  bool any = false;
  for (int i = 0; i < em->layouts->layouts.len; i++) {
    const FaLayout *l = em->layouts->layouts.items[i];
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
  if (em->plan->min_blocks)
    fa_sb_printf(out, "extern \"C\" __global__ void __launch_bounds__(%d, %d) %s(", kout->threads, em->plan->min_blocks,
                 kout->entry);
  else
    fa_sb_printf(out, "extern \"C\" __global__ void __launch_bounds__(%d) %s(", kout->threads, kout->entry);
  for (int i = 0; i < em->fn->nparams; i++) {
    const IrValue *v = em->fn->params[i].value;
    fa_sb_printf(out, "%s%s%s%s", i ? ", " : "", elem_ctype(em, v->type), v->type.dtype == DT_PTR ? "" : " ",
                 names_of(em, v)->name);
  }
  for (int i = 0; i < em->plan->ntmaps; i++)
    fa_sb_printf(out, ", const __grid_constant__ fa::TensorMap fa_tmap%d", i);
  if (kout->persistent) /* the grid of programs (the launch's grid is the resident thread blocks) */
    fa_sb_puts(out, ", const unsigned fa_grid_x, const unsigned fa_grid_y, const unsigned fa_grid_z");
  if (kout->tile_counter) /* dynamic: the programs taken so far (zeroed by the launch) */
    fa_sb_puts(out, ", unsigned *const fa_tile_counter");
  fa_sb_puts(out, ") {\n");
  if (em->plan->smem.tile_align >= 1024) {
    /* swizzled tiles need a 1024-byte boundary; the launch reserves 1024 more bytes for it */
    fa_sb_puts(out, "  extern __shared__ __attribute__((aligned(1024))) unsigned char fa_smem_base[];\n");
    fa_sb_puts(out, "  unsigned char *const fa_smem = fa_smem_base + ((1024u - (fa::smem_addr(fa_smem_base) & 1023u)) & "
                    "1023u);\n");
  } else {
    fa_sb_puts(out, "  extern __shared__ __attribute__((aligned(16))) unsigned char fa_smem[];\n");
  }
  /* (maybe_unused: a kernel of scalars only uses neither).  The warp's index
     comes through a shuffle from lane 0 so that ptxas knows it is the same
     in every lane and keeps what derives from it (the warpgroup's wgmma
     descriptors, above all) in uniform registers instead of moving it there
     before every instruction. */
  if (plan_has_wgmma(em->plan))
    fa_sb_puts(out, "  [[maybe_unused]] const int fa_lane = (int)threadIdx.x & 31, "
                    "fa_warp = __shfl_sync(0xffffffffu, (int)threadIdx.x >> 5, 0);\n");
  else /* (elsewhere the shuffle only hides from the compiler what it can fold) */
    fa_sb_puts(out, "  [[maybe_unused]] const int fa_lane = (int)threadIdx.x & 31, fa_warp = (int)threadIdx.x >> 5;\n");
  if (em->toff_at < 0)
    emit_thread_offsets(em, out, 1);
  emit_mbarrier_init(em, out);
}

/* The mbarriers, initialised by one thread and published to every thread
 * and to the copy engine before anything uses them; the tensor maps
 * fetched ahead; a use counter per ring. */
static void emit_mbarrier_init(Emitter *em, StrBuf *out) {
  const FaCudaPlan *p = em->plan;
  bool any = false;
  for (int i = 0; i < p->nbarriers; i++)
    any |= p->barriers[i].kind == FA_BARRIER_MBARRIER;
  if (!any)
    return;
  fa_sb_puts(out, "  if (threadIdx.x == 0) {  // the mbarriers (fa_hopper.cuh)\n");
  for (int i = 0; i < p->nbarriers; i++) {
    const FaBarrierPlan *b = &p->barriers[i];
    if (b->kind != FA_BARRIER_MBARRIER)
      continue;
    static const char *const what[] = {"full", "empty", "load", "tile", "next program's id", "its slot read"};
    fa_sb_printf(out, "    for (int fa_s = 0; fa_s < %d; ++fa_s)  // %s\n", b->slots, what[b->mbar]);
    fa_sb_printf(out, "      fa::mbar_init(fa::smem_addr(fa_smem + %zu) + 8u * fa_s, %du);\n", b->offset, b->arrivals);
  }
  for (int i = 0; i < p->ntmaps; i++)
    fa_sb_printf(out, "    fa::tma_prefetch_map(fa_tmap%d);\n", i);
  fa_sb_puts(out, "  }\n  fa::mbar_init_fence();\n  __syncthreads();\n");
  for (int i = 0; !p->warp_specialised && i < p->nrings; i++) /* each role counts its own */
    fa_sb_printf(out, "  int fa_ring%d = 0;  // uses of mbarrier ring %d so far\n", i, i);
}

bool fa_emit_cuda_plan(const FaCudaPlan *plan, FaCudaKernel *out) {
  memset(out, 0, sizeof *out);
  FaCompiler *fc = plan->fc;
  Emitter em;
  memset(&em, 0, sizeof em);
  em.fc = fc;
  em.plan = plan;
  em.layouts = &plan->layouts;
  em.k = plan->k;
  em.fn = plan->fn;
  em.ok = true;
  em.toff_at = -1;
  fa_sb_init(&em.body);
  em.indent = 1;
  int errors_before = fc->diag.errors;
  em.nlayouts = plan->layouts.layouts.len;
  em.vn = calloc((size_t)(plan->nvalues > 0 ? plan->nvalues : 1), sizeof *em.vn);
  em.pipe_counter = calloc((size_t)plan->npipelines + 1, sizeof *em.pipe_counter);
  em.by_id = calloc((size_t)(plan->nvalues > 0 ? plan->nvalues : 1), sizeof *em.by_id);
  em.late_acc = calloc((size_t)plan->nproducts + 1, sizeof *em.late_acc);
  em.late_af = calloc((size_t)plan->nproducts + 1, sizeof *em.late_af);
  em.helper_names = calloc((size_t)plan->nproducts + 1, sizeof *em.helper_names);
  for (int n = 0; em.by_id && n < plan->nops; n++)
    for (int r = 0; r < plan->order[n]->nresults; r++)
      if (plan->order[n]->results[r]->id < plan->nvalues)
        em.by_id[plan->order[n]->results[r]->id] = plan->order[n]->results[r];
  em.layout_used = calloc((size_t)em.nlayouts + 1, 1);
  em.toff_used = calloc((size_t)em.nlayouts + 1, 1);
  if (!em.vn || !em.pipe_counter || !em.by_id || !em.late_acc || !em.late_af || !em.helper_names || !em.layout_used ||
      !em.toff_used) {
    fa_error(&fc->diag, em.fn->loc, "out of memory in the CUDA emitter");
    em.ok = false;
  }
  /* parameters */
  for (int i = 0; em.ok && i < em.fn->nparams; i++) {
    const IrValue *v = em.fn->params[i].value;
    names_of(&em, v)->name = fresh_name(&em, em.fn->params[i].name ? em.fn->params[i].name : v->name);
  }
  if (em.ok && plan->warp_specialised) {
    emit_roles(&em);
  } else if (em.ok) {
    emit_tile_loop_open(&em, true);
    emit_region(&em, em.fn->body);
    emit_tile_loop_close(&em, true);
    emit_stores_complete(&em);
  }
  bool ok = em.ok && fc->diag.errors == errors_before;
  if (ok) {
    out->entry = fresh_name(&em, em.fn->name ? em.fn->name : "kernel");
    out->threads = plan->threads;
    out->shared_bytes = plan->smem.total;
    out->persistent = plan->schedule.kind == FA_SCHEDULE_PERSISTENT;
    out->tile_counter = out->persistent && plan->schedule.dynamic;
    out->nargs = em.fn->nparams + plan->ntmaps + (out->persistent ? 3 : 0) + (out->tile_counter ? 1 : 0);
    out->args = fa_arena_alloc(&fc->arena, (size_t)(out->nargs > 0 ? out->nargs : 1) * sizeof *out->args);
    if (!out->args)
      ok = false;
    for (int i = 0; ok && i < plan->ntmaps; i++) {
      const FaTensorMapPlan *m = plan->tmaps[i];
      FaCudaArg *a = &out->args[em.fn->nparams + i];
      memset(a, 0, sizeof *a);
      a->kind = CUDA_ARG_TENSOR_MAP;
      a->param = m->param;
      a->dtype = em.fn->params[m->param].value->type.pointee;
      a->rank = m->rank;
      for (int d = 0; d < m->rank; d++) {
        a->box[d] = m->box[d];
        a->dims_end[d] = m->dims_end[d];
      }
      a->swizzle_bytes = m->swizzle;
      a->nan_fill = m->nan_fill;
    }
    for (int d = 0; ok && out->persistent && d < 3; d++) {
      FaCudaArg *a = &out->args[em.fn->nparams + plan->ntmaps + d];
      memset(a, 0, sizeof *a);
      a->kind = CUDA_ARG_GRID;
      a->param = d;
      a->dtype = DT_U32;
    }
    if (ok && out->tile_counter) {
      FaCudaArg *a = &out->args[out->nargs - 1];
      memset(a, 0, sizeof *a);
      a->kind = CUDA_ARG_TILE_COUNTER;
      a->param = -1;
      a->dtype = DT_U32;
    }
    for (int i = 0; ok && i < em.fn->nparams; i++) {
      const IrValue *v = em.fn->params[i].value;
      out->args[i].kind = v->type.dtype == DT_PTR ? CUDA_ARG_POINTER : CUDA_ARG_SCALAR;
      out->args[i].param = i;
      out->args[i].dtype = v->type.dtype == DT_PTR ? v->type.pointee : v->type.dtype;
      if (v->type.dtype == DT_PTR) /* the alignment the plan assumed */
        out->args[i].align = fa_dtype_size(v->type.pointee) << vplan(&em, v)->div_log2;
    }
  }
  if (ok) {
    StrBuf src;
    fa_sb_init(&src);
    emit_prologue(&em, &src, out);
    const char *body = em.body.data ? em.body.data : "";
    if (em.toff_at >= 0 && (size_t)em.toff_at <= em.body.len) {
      fa_sb_printf(&src, "%.*s", (int)em.toff_at, body);
      emit_thread_offsets(&em, &src, em.toff_indent);
      fa_sb_puts(&src, body + em.toff_at);
    } else {
      fa_sb_puts(&src, body);
    }
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
  free(em.vn);
  free(em.pipe_counter);
  free(em.by_id);
  free(em.late_acc);
  free(em.late_af);
  free(em.helper_names);
  free(em.layout_used);
  free(em.toff_used);
  if (!ok)
    memset(out, 0, sizeof *out);
  return ok;
}

bool fa_emit_cuda(FaCompiler *fc, const IrKernel *k, FaCudaTarget target, FaCudaKernel *out) {
  memset(out, 0, sizeof *out);
  FaCudaPlan plan;
  if (!fa_cuda_plan(fc, k, target, NULL, 0, &plan))
    return false;
  bool ok = fa_emit_cuda_plan(&plan, out);
  fa_cuda_plan_free(&plan);
  return ok;
}
