/* interp.c - the CPU interpreter over a specialised kernel's tile IR.
 *
 * The numerics it implements are written down in interp.h.  How it works:
 *
 * Every IR value has a slot, indexed by the value's id, holding all the
 * elements of the value (blocks are interpreted as whole arrays, one op at a
 * time, the numpy way).  Shapes are static, so a slot's storage is
 * allocated the first time its value is defined and reused on every later
 * definition (loop iterations, later programs).  Float values of every float
 * dtype are held as doubles carrying exactly a value of their dtype, integer
 * values as int64 wrapped to their dtype, pointers as (buffer, element
 * offset) pairs, block pointers as a small struct.
 *
 * Memory is reached only through the buffers bound to the kernel's pointer
 * parameters; the buffer id of a pointer is its parameter's index and every
 * access is checked against that buffer's bound, so a bad program gets a
 * located error, never a stray access.
 */
#include "interp.h"

#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* ---- dtypes and rounding ------------------------------------------------------- */

typedef enum Cat { CAT_NONE, CAT_FLOAT, CAT_INT, CAT_PTR, CAT_BPTR } Cat;

static Cat cat_of(DType dt) {
  switch (dt) {
  case DT_F16: case DT_BF16: case DT_F32: case DT_F64: return CAT_FLOAT;
  case DT_I1: case DT_I8: case DT_I16: case DT_I32: case DT_I64: case DT_U32: return CAT_INT;
  case DT_PTR: return CAT_PTR;
  case DT_BLOCKPTR: return CAT_BPTR;
  default: return CAT_NONE;
  }
}

static bool is_signed_int(DType dt) { return dt == DT_I8 || dt == DT_I16 || dt == DT_I32 || dt == DT_I64; }

/* Wraps an integer to the dtype's width (two's complement). */
static int64_t wrap_int(DType dt, int64_t v) {
  switch (dt) {
  case DT_I1: return v & 1;
  case DT_I8: return (int8_t)(uint8_t)(uint64_t)v;
  case DT_I16: return (int16_t)(uint16_t)(uint64_t)v;
  case DT_I32: return (int32_t)(uint32_t)(uint64_t)v;
  case DT_U32: return (int64_t)(uint32_t)(uint64_t)v;
  default: return v;
  }
}

/* Rounds x to a binary format with p significant bits, minimum normal
 * exponent emin and largest finite value maxfin (round to nearest even,
 * subnormals kept, overflow to infinity).  Exact for any double input. */
static double round_format_slow(double x, int p, int emin, double maxfin) {
  if (x == 0 || !isfinite(x))
    return x;
  int e;
  (void)frexp(x, &e);
  int lead = e - 1;
  if (lead < emin)
    lead = emin;
  double q = ldexp(1.0, lead - (p - 1));
  double r = nearbyint(x / q) * q;
  if (fabs(r) > maxfin)
    return copysign(INFINITY, x);
  return r;
}

/* The same, fast path for the normal range: round the double's significand
 * to p bits with integer arithmetic. */
static double round_format(double x, int p, int emin, double maxfin) {
  uint64_t u;
  memcpy(&u, &x, 8);
  int e = (int)((u >> 52) & 0x7ff) - 1023;
  if (e == 1024)
    return x;                         /* inf, NaN */
  if (e < emin)
    return round_format_slow(x, p, emin, maxfin);
  int drop = 52 - (p - 1);
  uint64_t half = ((uint64_t)1 << (drop - 1)) - 1 + ((u >> drop) & 1);
  u += half;
  u &= ~(((uint64_t)1 << drop) - 1);
  double r;
  memcpy(&r, &u, 8);
  if (fabs(r) > maxfin)
    return copysign(INFINITY, x);
  return r;
}

#define F16_MAX 65504.0
#define BF16_MAX 3.3895313892515355e38  /* (2 - 2^-7) * 2^127 */
#define F32_MAX 3.4028234663852886e38

static double round_f16(double x) { return round_format(x, 11, -14, F16_MAX); }
static double round_bf16(double x) { return round_format(x, 8, -126, BF16_MAX); }
static double round_tf32(double x) { return round_format(x, 11, -126, F32_MAX); }

/* Rounds a double to a float dtype's value set. */
static double round_dt(DType dt, double x) {
  switch (dt) {
  case DT_F16: return round_f16(x);
  case DT_BF16: return round_bf16(x);
  case DT_F32: return (double)(float)x;
  default: return x;
  }
}

static double half_bits_to_double(uint16_t h) {
  int s = h >> 15, e = (h >> 10) & 0x1f, m = h & 0x3ff;
  double v;
  if (e == 0)
    v = (double)m * 0x1p-24;
  else if (e == 31)
    v = m ? NAN : INFINITY;
  else {
    uint64_t u = ((uint64_t)(e - 15 + 1023) << 52) | ((uint64_t)m << 42);
    memcpy(&v, &u, 8);
  }
  return s ? -v : v;
}

static uint16_t double_to_half_bits(double x) {
  uint16_t sign = signbit(x) ? 0x8000 : 0;
  if (isnan(x))
    return sign | 0x7e00;
  x = fabs(round_f16(x));
  if (isinf(x))
    return sign | 0x7c00;
  if (x < 0x1p-14)
    return sign | (uint16_t)(x * 0x1p24);
  uint64_t u;
  memcpy(&u, &x, 8);
  int e = (int)((u >> 52) & 0x7ff) - 1023;
  return sign | (uint16_t)((e + 15) << 10) | (uint16_t)((u >> 42) & 0x3ff);
}

static double bf16_bits_to_double(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static uint16_t double_to_bf16_bits(double x) {
  if (isnan(x))
    return (signbit(x) ? 0x8000 : 0) | 0x7fc0;
  float f = (float)round_bf16(x);
  uint32_t u;
  memcpy(&u, &f, 4);
  return (uint16_t)(u >> 16);
}

/* ---- runtime values ----------------------------------------------------------- */

typedef struct BlockPtr {
  int32_t buf;
  int64_t base;
  int rank;
  int64_t shape[FA_MAX_RANK];
  int64_t strides[FA_MAX_RANK];
  int64_t offsets[FA_MAX_RANK];
} BlockPtr;

typedef struct Slot {
  int64_t cap;        /* elements allocated */
  double *f;          /* CAT_FLOAT */
  int64_t *i;         /* CAT_INT; CAT_PTR: element offsets */
  int32_t *buf;       /* CAT_PTR: buffer ids (-1: null) */
  BlockPtr bp;        /* CAT_BPTR */
} Slot;

typedef struct Buffer {
  bool bound;
  DType dtype;
  void *data;
  int64_t count;      /* elements the caller gave */
  int64_t limit;      /* elements a program may access (the declared extent, if any) */
  const char *name;
} Buffer;

/* What a run shares between its threads. */
typedef struct Shared {
  const IrFunction *fn;
  Buffer *bufs;
  int nbufs;
  const FaHostValue *scalars;   /* per parameter; NULL for host functions' pointer args */
  int64_t grid[3];
  bool threaded;
  pthread_mutex_t atomic_lock;   /* atomic_add and device_print with threads */
  FILE *print_to;               /* device_print; NULL: stdout */
} Shared;

/* One interpreter thread: the slots of every value, and the first error. */
typedef struct Exec {
  const Shared *sh;
  Slot *slots;
  int nslots;
  int64_t pid[3];
  bool failed;
  SrcLoc err_loc;
  char err_msg[400];
  /* scratch for dot and index maps */
  float *fs[3];
  int64_t fs_cap[3];
  int64_t *map;
  int64_t map_cap;
  unsigned char *valid;
  int64_t valid_cap;
} Exec;

static bool fail(Exec *x, SrcLoc loc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static bool fail(Exec *x, SrcLoc loc, const char *fmt, ...) {
  if (!x->failed) {
    x->failed = true;
    x->err_loc = loc;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(x->err_msg, sizeof x->err_msg, fmt, ap);
    va_end(ap);
  }
  return false;
}

static int64_t type_numel(IrType t) {
  int64_t n = 1;
  for (int i = 0; i < t.rank; i++)
    n *= t.shape[i];
  return n;
}

static Slot *slot_of(Exec *x, const IrValue *v) { return &x->slots[v->id]; }

/* The slot of a value about to be defined, with room for its elements. */
static Slot *def_slot(Exec *x, const IrValue *v) {
  Slot *s = &x->slots[v->id];
  Cat c = cat_of(v->type.dtype);
  int64_t n = type_numel(v->type);
  if (c == CAT_BPTR || c == CAT_NONE)
    return s;
  if (s->cap >= n && (c != CAT_FLOAT || s->f) && (c != CAT_INT || s->i) && (c != CAT_PTR || (s->i && s->buf)))
    return s;
  free(s->f);
  free(s->i);
  free(s->buf);
  s->f = NULL;
  s->i = NULL;
  s->buf = NULL;
  s->cap = 0;
  if (c == CAT_FLOAT)
    s->f = malloc((size_t)n * sizeof(double));
  else
    s->i = malloc((size_t)n * sizeof(int64_t));
  if (c == CAT_PTR)
    s->buf = malloc((size_t)n * sizeof(int32_t));
  if ((c == CAT_FLOAT && !s->f) || (c != CAT_FLOAT && !s->i) || (c == CAT_PTR && !s->buf)) {
    fail(x, v->loc, "out of memory in the interpreter");
    return NULL;
  }
  s->cap = n;
  return s;
}

static float *scratch_f(Exec *x, int which, int64_t n) {
  if (x->fs_cap[which] < n) {
    float *p = realloc(x->fs[which], (size_t)n * sizeof(float));
    if (!p)
      return NULL;
    x->fs[which] = p;
    x->fs_cap[which] = n;
  }
  return x->fs[which];
}

static int64_t *scratch_map(Exec *x, int64_t n) {
  if (x->map_cap < n) {
    int64_t *p = realloc(x->map, (size_t)n * sizeof(int64_t));
    if (!p)
      return NULL;
    x->map = p;
    x->map_cap = n;
  }
  return x->map;
}

static unsigned char *scratch_valid(Exec *x, int64_t n) {
  if (x->valid_cap < n) {
    unsigned char *p = realloc(x->valid, (size_t)n);
    if (!p)
      return NULL;
    x->valid = p;
    x->valid_cap = n;
  }
  return x->valid;
}

/* Copies the elements of src's slot into dst's slot (equal types). */
static bool copy_value(Exec *x, const IrValue *dst, const IrValue *src) {
  if (dst == src)
    return true;
  Slot *s = slot_of(x, src);
  Slot *d = def_slot(x, dst);
  if (!d)
    return false;
  int64_t n = type_numel(dst->type);
  switch (cat_of(dst->type.dtype)) {
  case CAT_FLOAT: memcpy(d->f, s->f, (size_t)n * sizeof(double)); break;
  case CAT_INT: memcpy(d->i, s->i, (size_t)n * sizeof(int64_t)); break;
  case CAT_PTR:
    memcpy(d->i, s->i, (size_t)n * sizeof(int64_t));
    memcpy(d->buf, s->buf, (size_t)n * sizeof(int32_t));
    break;
  case CAT_BPTR: d->bp = s->bp; break;
  default: break;
  }
  return true;
}

/* Copies n values into n destinations "at once": a destination may also be a
 * source (a loop that yields its iteration values swapped). */
static bool copy_values(Exec *x, IrValue *const *dst, IrValue *const *src, int n, SrcLoc loc) {
  bool overlap = false;
  for (int i = 0; i < n && !overlap; i++)
    for (int j = 0; j < n; j++)
      if (j != i && src[i] == dst[j])
        overlap = true;
  if (!overlap) {
    for (int i = 0; i < n; i++)
      if (!copy_value(x, dst[i], src[i]))
        return false;
    return true;
  }
  /* Rare: snapshot the sources first. */
  Slot *snap = calloc((size_t)n, sizeof *snap);
  if (!snap)
    return fail(x, loc, "out of memory in the interpreter");
  bool ok = true;
  for (int i = 0; i < n && ok; i++) {
    Slot *s = slot_of(x, src[i]);
    int64_t m = type_numel(src[i]->type);
    snap[i].bp = s->bp;
    if (s->f && (snap[i].f = malloc((size_t)m * sizeof(double))))
      memcpy(snap[i].f, s->f, (size_t)m * sizeof(double));
    if (s->i && (snap[i].i = malloc((size_t)m * sizeof(int64_t))))
      memcpy(snap[i].i, s->i, (size_t)m * sizeof(int64_t));
    if (s->buf && (snap[i].buf = malloc((size_t)m * sizeof(int32_t))))
      memcpy(snap[i].buf, s->buf, (size_t)m * sizeof(int32_t));
    if ((s->f && !snap[i].f) || (s->i && !snap[i].i) || (s->buf && !snap[i].buf))
      ok = fail(x, loc, "out of memory in the interpreter");
  }
  for (int i = 0; i < n && ok; i++) {
    Slot *d = def_slot(x, dst[i]);
    if (!d) {
      ok = false;
      break;
    }
    int64_t m = type_numel(dst[i]->type);
    d->bp = snap[i].bp;
    if (snap[i].f)
      memcpy(d->f, snap[i].f, (size_t)m * sizeof(double));
    if (snap[i].i)
      memcpy(d->i, snap[i].i, (size_t)m * sizeof(int64_t));
    if (snap[i].buf)
      memcpy(d->buf, snap[i].buf, (size_t)m * sizeof(int32_t));
  }
  for (int i = 0; i < n; i++) {
    free(snap[i].f);
    free(snap[i].i);
    free(snap[i].buf);
  }
  free(snap);
  return ok;
}

/* Scalar readers (element 0 of a slot). */
static int64_t scalar_int(Exec *x, const IrValue *v) {
  Slot *s = slot_of(x, v);
  if (cat_of(v->type.dtype) == CAT_FLOAT)
    return (int64_t)s->f[0];
  return s->i[0];
}

/* ---- memory --------------------------------------------------------------------- */

static const char *buf_name(const Shared *sh, int32_t b) {
  return b >= 0 && b < sh->nbufs && sh->bufs[b].name ? sh->bufs[b].name : "?";
}

/* Checks one access; `what` is "load", "store" or "atomic_add". */
static bool check_access(Exec *x, SrcLoc loc, const char *what, int32_t b, int64_t off) {
  const Shared *sh = x->sh;
  if (b < 0 || b >= sh->nbufs || !sh->bufs[b].bound)
    return fail(x, loc, "%s through a null pointer (no buffer)", what);
  const Buffer *B = &sh->bufs[b];
  if (off < 0 || off >= B->limit)
    return fail(x, loc, "%s out of bounds of buffer '%s' (element %lld, size %lld)", what, buf_name(sh, b),
                (long long)off, (long long)B->limit);
  return true;
}

static double mem_read_f(const Buffer *B, int64_t off) {
  switch (B->dtype) {
  case DT_F16: return half_bits_to_double(((const uint16_t *)B->data)[off]);
  case DT_BF16: return bf16_bits_to_double(((const uint16_t *)B->data)[off]);
  case DT_F32: return ((const float *)B->data)[off];
  case DT_F64: return ((const double *)B->data)[off];
  default: return 0;
  }
}

static int64_t mem_read_i(const Buffer *B, int64_t off) {
  switch (B->dtype) {
  case DT_I1: return ((const uint8_t *)B->data)[off] != 0;
  case DT_I8: return ((const int8_t *)B->data)[off];
  case DT_I16: return ((const int16_t *)B->data)[off];
  case DT_I32: return ((const int32_t *)B->data)[off];
  case DT_I64: return ((const int64_t *)B->data)[off];
  case DT_U32: return ((const uint32_t *)B->data)[off];
  default: return 0;
  }
}

static void mem_write_f(const Buffer *B, int64_t off, double v) {
  switch (B->dtype) {
  case DT_F16: ((uint16_t *)B->data)[off] = double_to_half_bits(v); break;
  case DT_BF16: ((uint16_t *)B->data)[off] = double_to_bf16_bits(v); break;
  case DT_F32: ((float *)B->data)[off] = (float)v; break;
  case DT_F64: ((double *)B->data)[off] = v; break;
  default: break;
  }
}

static void mem_write_i(const Buffer *B, int64_t off, int64_t v) {
  switch (B->dtype) {
  case DT_I1: ((uint8_t *)B->data)[off] = v != 0; break;
  case DT_I8: ((int8_t *)B->data)[off] = (int8_t)v; break;
  case DT_I16: ((int16_t *)B->data)[off] = (int16_t)v; break;
  case DT_I32: ((int32_t *)B->data)[off] = (int32_t)v; break;
  case DT_I64: ((int64_t *)B->data)[off] = v; break;
  case DT_U32: ((uint32_t *)B->data)[off] = (uint32_t)v; break;
  default: break;
  }
}

/* ---- elementwise ops ----------------------------------------------------------------- */

/* Element stride of an operand: 0 when a scalar meets a block (the IR makes
 * operands equal-shaped; this keeps the interpreter forgiving). */
static int64_t estride(const IrValue *v) { return type_numel(v->type) == 1 ? 0 : 1; }

static bool op_const(Exec *x, const IrOp *op) {
  const IrValue *r = op->results[0];
  Slot *s = def_slot(x, r);
  if (!s)
    return false;
  int64_t n = type_numel(r->type);
  switch (cat_of(r->type.dtype)) {
  case CAT_FLOAT: {
    double v = round_dt(r->type.dtype, op->fval);
    for (int64_t i = 0; i < n; i++)
      s->f[i] = v;
    return true;
  }
  case CAT_INT: {
    int64_t v = wrap_int(r->type.dtype, op->ival);
    for (int64_t i = 0; i < n; i++)
      s->i[i] = v;
    return true;
  }
  case CAT_PTR:   /* a null pointer constant */
    for (int64_t i = 0; i < n; i++) {
      s->i[i] = op->ival;
      s->buf[i] = -1;
    }
    return true;
  default:
    return fail(x, op->loc, "the interpreter does not support constants of type %s", fa_dtype_name(r->type.dtype));
  }
}

static double un_float(IrUnaryOp u, DType dt, double a, bool *ok) {
  if (dt == DT_F64) {
    switch (u) {
    case UN_NEG: return -a;
    case UN_ABS: return fabs(a);
    case UN_EXP: return exp(a);
    case UN_EXP2: return exp2(a);
    case UN_LOG: return log(a);
    case UN_LOG2: return log2(a);
    case UN_SQRT: return sqrt(a);
    case UN_RSQRT: return 1.0 / sqrt(a);
    case UN_SIN: return sin(a);
    case UN_COS: return cos(a);
    case UN_FLOOR: return floor(a);
    case UN_CEIL: return ceil(a);
    case UN_SIGMOID: return 1.0 / (1.0 + exp(-a));
    case UN_TANH:
    case UN_TANH_APPROX: return tanh(a);
    case UN_ERF: return erf(a);
    default: *ok = false; return 0;
    }
  }
  float f = (float)a;
  switch (u) {
  case UN_NEG: return -a;
  case UN_ABS: return fabs(a);
  case UN_EXP: return expf(f);
  case UN_EXP2: return exp2f(f);
  case UN_LOG: return logf(f);
  case UN_LOG2: return log2f(f);
  case UN_SQRT: return sqrtf(f);
  case UN_RSQRT: return 1.0f / sqrtf(f);
  case UN_SIN: return sinf(f);
  case UN_COS: return cosf(f);
  case UN_FLOOR: return floorf(f);
  case UN_CEIL: return ceilf(f);
  case UN_SIGMOID: return 1.0f / (1.0f + expf(-f));
  case UN_TANH:
  case UN_TANH_APPROX: return tanhf(f);
  case UN_ERF: return erff(f);
  default: *ok = false; return 0;
  }
}

static bool op_unary(Exec *x, const IrOp *op) {
  const IrValue *a = op->operands[0], *r = op->results[0];
  Slot *sa = slot_of(x, a), *sr = def_slot(x, r);
  if (!sr)
    return false;
  int64_t n = type_numel(r->type), st = estride(a);
  DType dt = r->type.dtype;
  IrUnaryOp u = (IrUnaryOp)op->sub;
  if (cat_of(dt) == CAT_FLOAT) {
    bool ok = true;
    for (int64_t i = 0; i < n && ok; i++)
      sr->f[i] = round_dt(dt, un_float(u, dt, sa->f[i * st], &ok));
    if (!ok)
      return fail(x, op->loc, "unary op %d is not defined on %s", op->sub, fa_dtype_name(dt));
    return true;
  }
  if (cat_of(dt) != CAT_INT)
    return fail(x, op->loc, "the interpreter does not support unary ops on %s", fa_dtype_name(dt));
  for (int64_t i = 0; i < n; i++) {
    int64_t v = sa->i[i * st];
    switch (u) {
    case UN_NEG: v = (int64_t)(0 - (uint64_t)v); break;
    case UN_NOT: v = v == 0; break;
    case UN_INVERT: v = (int64_t)~(uint64_t)v; break;
    case UN_ABS: v = v < 0 ? (int64_t)(0 - (uint64_t)v) : v; break;
    default: return fail(x, op->loc, "unary op %d is not defined on %s", op->sub, fa_dtype_name(dt));
    }
    sr->i[i] = wrap_int(dt, v);
  }
  return true;
}

static double bin_float(IrBinaryOp b, DType dt, double p, double q, bool *ok) {
  switch (b) {
  case BIN_ADD: return p + q;
  case BIN_SUB: return p - q;
  case BIN_MUL: return p * q;
  case BIN_DIV: return p / q;
  case BIN_MOD: return fmod(p, q);
  case BIN_MAX: return isnan(p) || isnan(q) ? NAN : p > q ? p : q;
  case BIN_MIN: return isnan(p) || isnan(q) ? NAN : p < q ? p : q;
  case BIN_POW: return dt == DT_F64 ? pow(p, q) : (double)powf((float)p, (float)q);
  case BIN_MAXNUM: return isnan(p) ? q : isnan(q) ? p : p > q ? p : q;
  case BIN_MINNUM: return isnan(p) ? q : isnan(q) ? p : p < q ? p : q;
  default: *ok = false; return 0;
  }
}

static bool bin_int(Exec *x, const IrOp *op, DType dt, int64_t p, int64_t q, int64_t *out) {
  uint64_t up = (uint64_t)p, uq = (uint64_t)q;
  int w = fa_dtype_is_int(dt) ? fa_dtype_bits(dt) : 64;
  switch ((IrBinaryOp)op->sub) {
  case BIN_ADD: *out = (int64_t)(up + uq); break;
  case BIN_SUB: *out = (int64_t)(up - uq); break;
  case BIN_MUL: *out = (int64_t)(up * uq); break;
  case BIN_DIV:
  case BIN_MOD:
    /* total, like the CUDA code's fa::div / fa::mod: lanes that a where() or
       a mask discards may divide by zero.  x // 0 is 0 and x % 0 is x (so
       x == (x // y) * y + x % y still holds); MIN // -1 wraps */
    if (q == 0)
      *out = op->sub == BIN_DIV ? 0 : p;
    else if (q == -1)   /* avoids INT64_MIN / -1 */
      *out = op->sub == BIN_DIV ? (int64_t)(0 - up) : 0;
    else
      *out = op->sub == BIN_DIV ? p / q : p % q;
    break;
  case BIN_MAX:
  case BIN_MAXNUM: *out = p > q ? p : q; break;
  case BIN_MIN:
  case BIN_MINNUM: *out = p < q ? p : q; break;
  case BIN_AND: *out = p & q; break;
  case BIN_OR: *out = p | q; break;
  case BIN_XOR: *out = p ^ q; break;
  case BIN_SHL: *out = q < 0 || q >= w ? 0 : (int64_t)(up << q); break;
  case BIN_SHR:
    if (q < 0 || q >= w)
      *out = is_signed_int(dt) && p < 0 ? -1 : 0;
    else
      *out = p >> q;   /* values are held sign- or zero-extended, so this is the dtype's shift */
    break;
  case BIN_POW: {
    int64_t r = 1;
    if (q < 0)
      r = p == 1 ? 1 : p == -1 ? ((q & 1) ? -1 : 1) : 0;
    else
      for (uint64_t base = up, e = uq; e; e >>= 1, base *= base)
        if (e & 1)
          r = (int64_t)((uint64_t)r * base);
    *out = r;
    break;
  }
  default: return fail(x, op->loc, "binary op %d is not defined on integers", op->sub);
  }
  *out = wrap_int(dt, *out);
  return true;
}

static bool op_binary(Exec *x, const IrOp *op) {
  const IrValue *a = op->operands[0], *b = op->operands[1], *r = op->results[0];
  Slot *sa = slot_of(x, a), *sb = slot_of(x, b), *sr = def_slot(x, r);
  if (!sr)
    return false;
  int64_t n = type_numel(r->type), ta = estride(a), tb = estride(b);
  DType dt = r->type.dtype;
  if (cat_of(dt) == CAT_FLOAT) {
    bool ok = true;
    IrBinaryOp bo = (IrBinaryOp)op->sub;
    /* the common ops get their own loops */
    switch (bo) {
    case BIN_ADD:
      for (int64_t i = 0; i < n; i++) sr->f[i] = round_dt(dt, sa->f[i * ta] + sb->f[i * tb]);
      return true;
    case BIN_SUB:
      for (int64_t i = 0; i < n; i++) sr->f[i] = round_dt(dt, sa->f[i * ta] - sb->f[i * tb]);
      return true;
    case BIN_MUL:
      for (int64_t i = 0; i < n; i++) sr->f[i] = round_dt(dt, sa->f[i * ta] * sb->f[i * tb]);
      return true;
    default:
      break;
    }
    for (int64_t i = 0; i < n && ok; i++)
      sr->f[i] = round_dt(dt, bin_float(bo, dt, sa->f[i * ta], sb->f[i * tb], &ok));
    if (!ok)
      return fail(x, op->loc, "binary op %d is not defined on %s", op->sub, fa_dtype_name(dt));
    return true;
  }
  if (cat_of(dt) != CAT_INT)
    return fail(x, op->loc, "the interpreter does not support binary ops on %s", fa_dtype_name(dt));
  for (int64_t i = 0; i < n; i++)
    if (!bin_int(x, op, dt, sa->i[i * ta], sb->i[i * tb], &sr->i[i]))
      return false;
  return true;
}

static bool cmp_holds(IrCmpOp c, int ord /* -1, 0, 1; 2 = unordered */) {
  if (ord == 2)
    return c == CMP_NE;
  switch (c) {
  case CMP_LT: return ord < 0;
  case CMP_LE: return ord <= 0;
  case CMP_GT: return ord > 0;
  case CMP_GE: return ord >= 0;
  case CMP_EQ: return ord == 0;
  default: return ord != 0;
  }
}

static bool op_cmp(Exec *x, const IrOp *op) {
  const IrValue *a = op->operands[0], *b = op->operands[1], *r = op->results[0];
  Slot *sa = slot_of(x, a), *sb = slot_of(x, b), *sr = def_slot(x, r);
  if (!sr)
    return false;
  int64_t n = type_numel(r->type), ta = estride(a), tb = estride(b);
  IrCmpOp c = (IrCmpOp)op->sub;
  switch (cat_of(a->type.dtype)) {
  case CAT_FLOAT:
    for (int64_t i = 0; i < n; i++) {
      double p = sa->f[i * ta], q = sb->f[i * tb];
      int ord = isnan(p) || isnan(q) ? 2 : p < q ? -1 : p > q ? 1 : 0;
      sr->i[i] = cmp_holds(c, ord);
    }
    return true;
  case CAT_INT:
    for (int64_t i = 0; i < n; i++) {
      int64_t p = sa->i[i * ta], q = sb->i[i * tb];
      sr->i[i] = cmp_holds(c, p < q ? -1 : p > q ? 1 : 0);
    }
    return true;
  case CAT_PTR:
    for (int64_t i = 0; i < n; i++) {
      if (sa->buf[i * ta] != sb->buf[i * tb] && (c != CMP_EQ && c != CMP_NE))
        return fail(x, op->loc, "comparing pointers into different buffers");
      int64_t p = sa->i[i * ta], q = sb->i[i * tb];
      int ord = sa->buf[i * ta] != sb->buf[i * tb] ? 1 : p < q ? -1 : p > q ? 1 : 0;
      sr->i[i] = cmp_holds(c, ord);
    }
    return true;
  default:
    return fail(x, op->loc, "the interpreter does not support comparisons of %s", fa_dtype_name(a->type.dtype));
  }
}

static bool op_select(Exec *x, const IrOp *op) {
  const IrValue *c = op->operands[0], *a = op->operands[1], *b = op->operands[2], *r = op->results[0];
  Slot *sc = slot_of(x, c), *sa = slot_of(x, a), *sb = slot_of(x, b), *sr = def_slot(x, r);
  if (!sr)
    return false;
  int64_t n = type_numel(r->type), tc = estride(c), ta = estride(a), tb = estride(b);
  switch (cat_of(r->type.dtype)) {
  case CAT_FLOAT:
    for (int64_t i = 0; i < n; i++)
      sr->f[i] = sc->i[i * tc] ? sa->f[i * ta] : sb->f[i * tb];
    return true;
  case CAT_INT:
    for (int64_t i = 0; i < n; i++)
      sr->i[i] = sc->i[i * tc] ? sa->i[i * ta] : sb->i[i * tb];
    return true;
  case CAT_PTR:
    for (int64_t i = 0; i < n; i++) {
      bool t = sc->i[i * tc] != 0;
      sr->i[i] = t ? sa->i[i * ta] : sb->i[i * tb];
      sr->buf[i] = t ? sa->buf[i * ta] : sb->buf[i * tb];
    }
    return true;
  case CAT_BPTR:
    sr->bp = sc->i[0] ? sa->bp : sb->bp;
    return true;
  default:
    return fail(x, op->loc, "the interpreter does not support where() on %s", fa_dtype_name(r->type.dtype));
  }
}

/* fma(a, b, c): one rounding in f32 (f16 / bf16 then round the f32 result),
 * in f64 for f64; integers wrap. */
static bool op_fma(Exec *x, const IrOp *op) {
  const IrValue *r = op->results[0];
  Slot *sa = slot_of(x, op->operands[0]), *sb = slot_of(x, op->operands[1]), *sc = slot_of(x, op->operands[2]);
  Slot *sr = def_slot(x, r);
  if (!sr)
    return false;
  int64_t n = type_numel(r->type), ta = estride(op->operands[0]), tb = estride(op->operands[1]),
          tc = estride(op->operands[2]);
  DType dt = r->type.dtype;
  if (dt == DT_F64) {
    for (int64_t i = 0; i < n; i++) sr->f[i] = fma(sa->f[i * ta], sb->f[i * tb], sc->f[i * tc]);
  } else if (cat_of(dt) == CAT_FLOAT) {
    for (int64_t i = 0; i < n; i++)
      sr->f[i] = round_dt(dt, fmaf((float)sa->f[i * ta], (float)sb->f[i * tb], (float)sc->f[i * tc]));
  } else if (cat_of(dt) == CAT_INT) {
    for (int64_t i = 0; i < n; i++)
      sr->i[i] = wrap_int(dt, (int64_t)((uint64_t)sa->i[i * ta] * (uint64_t)sb->i[i * tb] + (uint64_t)sc->i[i * tc]));
  } else {
    return fail(x, op->loc, "the interpreter does not support fma on %s", fa_dtype_name(dt));
  }
  return true;
}

/* ---- random numbers -------------------------------------------------------------------
 * Philox 4x32 (Salmon et al., SC'11), as Triton's tl.rand / tl.randn use it:
 * counter (offset, 0, 0, 0), key (seed low 32 bits, seed high 32 bits). */
static void philox4x32(uint32_t c[4], uint32_t k0, uint32_t k1, int rounds) {
  for (int r = 0; r < rounds; r++) {
    uint64_t p0 = (uint64_t)0xD2511F53u * c[0], p1 = (uint64_t)0xCD9E8D57u * c[2];
    uint32_t n0 = (uint32_t)(p1 >> 32) ^ c[1] ^ k0, n2 = (uint32_t)(p0 >> 32) ^ c[3] ^ k1;
    c[0] = n0;
    c[1] = (uint32_t)p1;
    c[2] = n2;
    c[3] = (uint32_t)p0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
}

/* A uint32 as a uniform float in [0, 1): the bits read as an int32 x, folded
 * onto [0, 2^31) (x < 0: -x - 1), converted to f32 (round to nearest) and
 * multiplied by the f32 just below 2^-31. */
static float philox_uniform(uint32_t u) {
  uint32_t m = (u >> 31) ? ~u : u;
  return (float)(int32_t)m * 0x1.fffffep-32f;
}

static double rand_value(IrRandKind kind, int64_t seed, int32_t offset, int rounds) {
  uint32_t c[4] = {(uint32_t)offset, 0, 0, 0};
  philox4x32(c, (uint32_t)(uint64_t)seed, (uint32_t)((uint64_t)seed >> 32), rounds);
  float u1 = philox_uniform(c[0]);
  if (kind == RAND_UNIFORM)
    return u1;
  /* Box-Muller on the first two outputs */
  float u2 = philox_uniform(c[1]);
  if (u1 < 1.0e-7f)
    u1 = 1.0e-7f;
  float th = 6.283185307179586f * u2;
  float rad = sqrtf(-2.0f * logf(u1));
  return rad * cosf(th);
}

static bool op_rand(Exec *x, const IrOp *op) {
  const IrValue *off = op->operands[1], *r = op->results[0];
  Slot *so = slot_of(x, off), *sr = def_slot(x, r);
  if (!sr)
    return false;
  int64_t seed = scalar_int(x, op->operands[0]), n = type_numel(r->type), st = estride(off);
  for (int64_t i = 0; i < n; i++)
    sr->f[i] = rand_value((IrRandKind)op->sub, seed, (int32_t)so->i[i * st], (int)op->ival);
  return true;
}

/* ---- device_print ----------------------------------------------------------------------- */

static void print_element(FILE *out, const IrValue *v, const Slot *s, int64_t i, bool hex) {
  DType dt = v->type.dtype;
  if (cat_of(dt) == CAT_FLOAT) {
    double f = s->f[i];
    if (!hex) {
      fprintf(out, dt == DT_F64 ? "%.17g" : "%.9g", f);
    } else if (dt == DT_F64) {
      uint64_t u;
      memcpy(&u, &f, 8);
      fprintf(out, "0x%016llx", (unsigned long long)u);
    } else if (dt == DT_F32) {
      float g = (float)f;
      uint32_t u;
      memcpy(&u, &g, 4);
      fprintf(out, "0x%08x", u);
    } else {
      fprintf(out, "0x%04x", dt == DT_F16 ? double_to_half_bits(f) : double_to_bf16_bits(f));
    }
    return;
  }
  int64_t k = s->i[i];
  if (!hex) {
    fprintf(out, "%lld", (long long)k);
  } else {
    int bits = fa_dtype_bits(dt);
    uint64_t mask = bits >= 64 ? ~0ull : (1ull << bits) - 1;
    fprintf(out, "0x%llx", (unsigned long long)((uint64_t)k & mask));
  }
}

/* One line per operand and element: "pid (x, y, z) idx (i, j) PREFIX: value",
 * " (operand k)" after the prefix when there are several operands. */
static bool op_print(Exec *x, const IrOp *op) {
  Shared *sh = (Shared *)x->sh;
  FILE *out = sh->print_to ? sh->print_to : stdout;
  bool hex = op->ival != 0;
  if (sh->threaded)
    pthread_mutex_lock(&sh->atomic_lock);
  if (op->noperands == 0)
    fprintf(out, "pid (%lld, %lld, %lld) %s\n", (long long)x->pid[0], (long long)x->pid[1], (long long)x->pid[2],
            op->str ? op->str : "");
  for (int k = 0; k < op->noperands; k++) {
    const IrValue *v = op->operands[k];
    Slot *sv = slot_of(x, v);
    IrType t = v->type;
    int64_t n = type_numel(t), idx[FA_MAX_RANK] = {0};
    for (int64_t i = 0; i < n; i++) {
      fprintf(out, "pid (%lld, %lld, %lld) ", (long long)x->pid[0], (long long)x->pid[1], (long long)x->pid[2]);
      if (t.rank > 0) {
        fputs("idx (", out);
        for (int d = 0; d < t.rank; d++)
          fprintf(out, "%s%lld", d ? ", " : "", (long long)idx[d]);
        fputs(") ", out);
      }
      fputs(op->str ? op->str : "", out);
      if (op->noperands > 1)
        fprintf(out, " (operand %d)", k);
      fputs(": ", out);
      print_element(out, v, sv, i, hex);
      fputc('\n', out);
      for (int d = t.rank - 1; d >= 0; d--) {
        if (++idx[d] < t.shape[d])
          break;
        idx[d] = 0;
      }
    }
  }
  fflush(out);
  if (sh->threaded)
    pthread_mutex_unlock(&sh->atomic_lock);
  return true;
}

/* Float -> integer: truncate toward zero, saturate, NaN -> 0 (the GPU's cvt.rzi). */
static int64_t float_to_int(DType dt, double v) {
  if (isnan(v))
    return 0;
  v = trunc(v);
  double lo, hi;
  switch (dt) {
  case DT_I8: lo = -128; hi = 127; break;
  case DT_I16: lo = -32768; hi = 32767; break;
  case DT_I32: lo = -2147483648.0; hi = 2147483647.0; break;
  case DT_U32: lo = 0; hi = 4294967295.0; break;
  default:
    if (v >= 9223372036854775807.0)
      return INT64_MAX;
    if (v <= -9223372036854775808.0)
      return INT64_MIN;
    return (int64_t)v;
  }
  return (int64_t)(v < lo ? lo : v > hi ? hi : v);
}

static bool op_cast(Exec *x, const IrOp *op) {
  const IrValue *a = op->operands[0], *r = op->results[0];
  Slot *sa = slot_of(x, a), *sr = def_slot(x, r);
  if (!sr)
    return false;
  int64_t n = type_numel(r->type), st = estride(a);
  DType from = a->type.dtype, to = r->type.dtype;
  Cat cf = cat_of(from), ct = cat_of(to);
  if (cf == CAT_FLOAT && ct == CAT_FLOAT) {
    if (to == DT_F64 || (to == DT_F32 && from != DT_F64) || from == to) {
      for (int64_t i = 0; i < n; i++) sr->f[i] = sa->f[i * st];   /* exact widening */
    } else if (to == DT_F16) {
      for (int64_t i = 0; i < n; i++) sr->f[i] = round_f16(sa->f[i * st]);
    } else if (to == DT_BF16) {
      for (int64_t i = 0; i < n; i++) sr->f[i] = round_bf16(sa->f[i * st]);
    } else {
      for (int64_t i = 0; i < n; i++) sr->f[i] = round_dt(to, sa->f[i * st]);
    }
    return true;
  }
  if (cf == CAT_FLOAT && ct == CAT_INT) {
    for (int64_t i = 0; i < n; i++) {
      double v = sa->f[i * st];
      sr->i[i] = to == DT_I1 ? v != 0 : float_to_int(to, v);
    }
    return true;
  }
  if (cf == CAT_INT && ct == CAT_FLOAT) {
    for (int64_t i = 0; i < n; i++) {
      int64_t v = sa->i[i * st];
      sr->f[i] = to == DT_F32 ? (double)(float)v : round_dt(to, (double)v);
    }
    return true;
  }
  if (cf == CAT_INT && ct == CAT_INT) {
    for (int64_t i = 0; i < n; i++) {
      int64_t v = sa->i[i * st];
      sr->i[i] = to == DT_I1 ? v != 0 : wrap_int(to, v);
    }
    return true;
  }
  if (cf == CAT_PTR && ct == CAT_PTR) {   /* a pointer to another element type: same element offsets */
    if (fa_dtype_size(a->type.pointee) != fa_dtype_size(r->type.pointee))
      return fail(x, op->loc, "the interpreter cannot reinterpret a pointer to %s as a pointer to %s",
                  fa_dtype_name(a->type.pointee), fa_dtype_name(r->type.pointee));
    for (int64_t i = 0; i < n; i++) {
      sr->i[i] = sa->i[i * st];
      sr->buf[i] = sa->buf[i * st];
    }
    return true;
  }
  return fail(x, op->loc, "the interpreter does not support a cast from %s to %s", fa_dtype_name(from),
              fa_dtype_name(to));
}

/* ---- shape ops ---------------------------------------------------------------------- */

/* Copies elements: result element i takes source element map[i]. */
static void gather(Exec *x, const IrValue *src, Slot *sr, const IrValue *r, const int64_t *map, int64_t n) {
  Slot *ss = slot_of(x, src);
  switch (cat_of(r->type.dtype)) {
  case CAT_FLOAT:
    for (int64_t i = 0; i < n; i++) sr->f[i] = ss->f[map[i]];
    break;
  case CAT_INT:
    for (int64_t i = 0; i < n; i++) sr->i[i] = ss->i[map[i]];
    break;
  case CAT_PTR:
    for (int64_t i = 0; i < n; i++) {
      sr->i[i] = ss->i[map[i]];
      sr->buf[i] = ss->buf[map[i]];
    }
    break;
  default:
    break;
  }
}

/* Builds map for a result of shape rshape (rank r) whose element at index
 * idx comes from source element sum(idx[d] * sstride[d]). */
static int64_t *strided_map(Exec *x, const IrOp *op, int rank, const int *rshape, const int64_t *sstride, int64_t n) {
  int64_t *map = scratch_map(x, n);
  if (!map) {
    fail(x, op->loc, "out of memory in the interpreter");
    return NULL;
  }
  int64_t idx[FA_MAX_RANK] = {0};
  for (int64_t i = 0; i < n; i++) {
    int64_t off = 0;
    for (int d = 0; d < rank; d++)
      off += idx[d] * sstride[d];
    map[i] = off;
    for (int d = rank - 1; d >= 0; d--) {
      if (++idx[d] < rshape[d])
        break;
      idx[d] = 0;
    }
  }
  return map;
}

static void row_major_strides(IrType t, int64_t *st) {
  int64_t s = 1;
  for (int d = t.rank - 1; d >= 0; d--) {
    st[d] = s;
    s *= t.shape[d];
  }
}

static bool op_shape(Exec *x, const IrOp *op) {
  const IrValue *a = op->operands[0], *r = op->results[0];
  Slot *sr = def_slot(x, r);
  if (!sr)
    return false;
  int64_t n = type_numel(r->type);
  IrType ta = a->type, tr = r->type;
  Slot *sa = slot_of(x, a);
  if (op->kind == IR_SPLAT || (op->kind == IR_BROADCAST && ta.rank == 0)) {
    switch (cat_of(tr.dtype)) {
    case CAT_FLOAT: for (int64_t i = 0; i < n; i++) sr->f[i] = sa->f[0]; break;
    case CAT_INT: for (int64_t i = 0; i < n; i++) sr->i[i] = sa->i[0]; break;
    case CAT_PTR:
      for (int64_t i = 0; i < n; i++) {
        sr->i[i] = sa->i[0];
        sr->buf[i] = sa->buf[0];
      }
      break;
    default: return fail(x, op->loc, "the interpreter cannot splat a %s", fa_dtype_name(tr.dtype));
    }
    return true;
  }
  if (op->kind == IR_EXPAND_DIMS || op->kind == IR_RESHAPE) {   /* same elements, same order */
    int64_t *map = scratch_map(x, n);
    if (!map)
      return fail(x, op->loc, "out of memory in the interpreter");
    for (int64_t i = 0; i < n; i++)
      map[i] = i;
    gather(x, a, sr, r, map, n);
    return true;
  }
  int64_t ast[FA_MAX_RANK], sst[FA_MAX_RANK];
  row_major_strides(ta, ast);
  if (op->kind == IR_BROADCAST) {
    /* align trailing dims (numpy); size-1 source dims repeat */
    int shift = tr.rank - ta.rank;
    if (shift < 0)
      return fail(x, op->loc, "broadcast to a lower rank");
    for (int d = 0; d < tr.rank; d++) {
      int sd = d - shift;
      sst[d] = sd < 0 || ta.shape[sd] == 1 ? 0 : ast[sd];
    }
  } else if (op->kind == IR_TRANS) {
    for (int d = 0; d < tr.rank; d++)
      sst[d] = ast[op->perm[d]];
  } else {
    return fail(x, op->loc, "unexpected shape op");
  }
  int64_t *map = strided_map(x, op, tr.rank, tr.shape, sst, n);
  if (!map)
    return false;
  gather(x, a, sr, r, map, n);
  return true;
}

static bool op_arange(Exec *x, const IrOp *op) {
  const IrValue *r = op->results[0];
  Slot *sr = def_slot(x, r);
  if (!sr)
    return false;
  int64_t n = type_numel(r->type);
  for (int64_t i = 0; i < n; i++)
    sr->i[i] = wrap_int(r->type.dtype, op->ival + i);
  return true;
}

/* ---- reductions and dot ----------------------------------------------------------- */

static bool op_reduce(Exec *x, const IrOp *op) {
  const IrValue *a = op->operands[0], *r = op->results[0];
  Slot *sa = slot_of(x, a), *sr = def_slot(x, r);
  if (!sr)
    return false;
  IrType ta = a->type;
  int axis = op->axis < 0 ? op->axis + ta.rank : op->axis;
  if (axis < 0 || axis >= ta.rank)
    return fail(x, op->loc, "reduction axis %d out of range", op->axis);
  int64_t outer = 1, len = ta.shape[axis], inner = 1;
  for (int d = 0; d < axis; d++)
    outer *= ta.shape[d];
  for (int d = axis + 1; d < ta.rank; d++)
    inner *= ta.shape[d];
  IrReduceOp ro = (IrReduceOp)op->sub;
  DType dt = r->type.dtype;
  if (cat_of(dt) == CAT_FLOAT && dt != DT_F64) {
    float *acc = scratch_f(x, 0, inner);
    if (!acc)
      return fail(x, op->loc, "out of memory in the interpreter");
    for (int64_t o = 0; o < outer; o++) {
      const double *src = sa->f + o * len * inner;
      for (int64_t j = 0; j < inner; j++)
        acc[j] = (float)src[j];
      for (int64_t k = 1; k < len; k++) {
        const double *row = src + k * inner;
        switch (ro) {
        case RED_SUM:
          for (int64_t j = 0; j < inner; j++) acc[j] += (float)row[j];
          break;
        case RED_MAX:
          for (int64_t j = 0; j < inner; j++) {
            float v = (float)row[j];
            acc[j] = isnan(acc[j]) || acc[j] >= v ? acc[j] : v;
          }
          break;
        case RED_MIN:
          for (int64_t j = 0; j < inner; j++) {
            float v = (float)row[j];
            acc[j] = isnan(acc[j]) || acc[j] <= v ? acc[j] : v;
          }
          break;
        }
      }
      for (int64_t j = 0; j < inner; j++)
        sr->f[o * inner + j] = round_dt(dt, acc[j]);
    }
    return true;
  }
  for (int64_t o = 0; o < outer; o++)
    for (int64_t j = 0; j < inner; j++) {
      int64_t base = o * len * inner + j;
      if (cat_of(dt) == CAT_FLOAT) {
        double acc = sa->f[base];
        for (int64_t k = 1; k < len; k++) {
          double v = sa->f[base + k * inner];
          if (ro == RED_SUM) acc += v;
          else if (ro == RED_MAX) acc = isnan(acc) || acc >= v ? acc : v;
          else acc = isnan(acc) || acc <= v ? acc : v;
        }
        sr->f[o * inner + j] = acc;
      } else if (cat_of(dt) == CAT_INT) {
        int64_t acc = sa->i[base];
        for (int64_t k = 1; k < len; k++) {
          int64_t v = sa->i[base + k * inner];
          if (ro == RED_SUM) acc = (int64_t)((uint64_t)acc + (uint64_t)v);
          else if (ro == RED_MAX) acc = acc > v ? acc : v;
          else acc = acc < v ? acc : v;
        }
        sr->i[o * inner + j] = wrap_int(dt, acc);
      } else {
        return fail(x, op->loc, "the interpreter cannot reduce %s", fa_dtype_name(dt));
      }
    }
  return true;
}

/* c[j] += a * b[j]: the inner loop of dot, unrolled by 8 so that the
 * compiler vectorises it at -O2 (each c[j] still gets its products in k
 * order). */
static void axpy_f32(float *restrict c, const float *restrict b, float a, int64_t n) {
  int64_t j = 0;
  for (; j + 8 <= n; j += 8)
    for (int u = 0; u < 8; u++)
      c[j + u] += a * b[j + u];
  for (; j < n; j++)
    c[j] += a * b[j];
}

static bool op_dot(Exec *x, const IrOp *op) {
  const IrValue *a = op->operands[0], *b = op->operands[1], *r = op->results[0];
  const IrValue *c = op->noperands > 2 ? op->operands[2] : NULL;
  IrType ta = a->type, tb = b->type;
  if (ta.rank != 2 || tb.rank != 2 || ta.shape[1] != tb.shape[0])
    return fail(x, op->loc, "the interpreter supports dot on [M,K] x [K,N] blocks only");
  int64_t M = ta.shape[0], K = ta.shape[1], N = tb.shape[1];
  Slot *sa = slot_of(x, a), *sb = slot_of(x, b), *sr = def_slot(x, r);
  if (!sr)
    return false;
  DType in = ta.dtype, out = r->type.dtype;
  Slot *sc = c ? slot_of(x, c) : NULL;
  if (cat_of(in) == CAT_INT && cat_of(out) == CAT_INT) {
    for (int64_t i = 0; i < M; i++)
      for (int64_t j = 0; j < N; j++) {
        uint64_t acc = sc ? (uint64_t)sc->i[i * N + j] : 0;
        for (int64_t k = 0; k < K; k++)
          acc += (uint64_t)sa->i[i * K + k] * (uint64_t)sb->i[k * N + j];
        sr->i[i * N + j] = wrap_int(out, (int64_t)acc);
      }
    return true;
  }
  if (cat_of(in) != CAT_FLOAT || cat_of(out) != CAT_FLOAT)
    return fail(x, op->loc, "the interpreter does not support dot of %s into %s", fa_dtype_name(in),
                fa_dtype_name(out));
  if (in == DT_F64 || out == DT_F64) {
    for (int64_t i = 0; i < M; i++)
      for (int64_t j = 0; j < N; j++) {
        double acc = sc ? sc->f[i * N + j] : 0;
        for (int64_t k = 0; k < K; k++)
          acc += sa->f[i * K + k] * sb->f[k * N + j];
        sr->f[i * N + j] = round_dt(out, acc);
      }
    return true;
  }
  /* f16 / bf16 / f32 operands, f32 accumulation, products added in k order:
   * i-k-j loops keep that order for every (i, j) and run along rows. */
  float *fa = scratch_f(x, 0, M * K), *fb = scratch_f(x, 1, K * N), *acc = scratch_f(x, 2, M * N);
  if (!fa || !fb || !acc)
    return fail(x, op->loc, "out of memory in the interpreter");
  bool tf32 = in == DT_F32 && op->sub == DOT_TF32;
  for (int64_t i = 0; i < M * K; i++)
    fa[i] = (float)(tf32 ? round_tf32(sa->f[i]) : sa->f[i]);
  for (int64_t i = 0; i < K * N; i++)
    fb[i] = (float)(tf32 ? round_tf32(sb->f[i]) : sb->f[i]);
  for (int64_t i = 0; i < M * N; i++)
    acc[i] = sc ? (float)sc->f[i] : 0.0f;
  for (int64_t i = 0; i < M; i++) {
    const float *arow = fa + i * K;
    for (int64_t k = 0; k < K; k++)
      axpy_f32(acc + i * N, fb + k * N, arow[k], N);
  }
  for (int64_t i = 0; i < M * N; i++)
    sr->f[i] = round_dt(out, acc[i]);
  return true;
}

/* ---- pointers and memory ops ------------------------------------------------------- */

static bool op_ptr_add(Exec *x, const IrOp *op) {
  const IrValue *p = op->operands[0], *o = op->operands[1], *r = op->results[0];
  Slot *sp = slot_of(x, p), *so = slot_of(x, o), *sr = def_slot(x, r);
  if (!sr)
    return false;
  int64_t n = type_numel(r->type), tp = estride(p), to = estride(o);
  bool ofloat = cat_of(o->type.dtype) == CAT_FLOAT;
  for (int64_t i = 0; i < n; i++) {
    int64_t d = ofloat ? (int64_t)so->f[i * to] : so->i[i * to];
    sr->i[i] = (int64_t)((uint64_t)sp->i[i * tp] + (uint64_t)d);
    sr->buf[i] = sp->buf[i * tp];
  }
  return true;
}

static bool op_load(Exec *x, const IrOp *op) {
  const IrValue *p = op->operands[0], *r = op->results[0];
  const IrValue *m = op->noperands > 1 ? op->operands[1] : NULL;
  const IrValue *other = op->noperands > 2 ? op->operands[2] : NULL;
  Slot *sp = slot_of(x, p), *sr = def_slot(x, r);
  if (!sr)
    return false;
  Slot *sm = m ? slot_of(x, m) : NULL, *so = other ? slot_of(x, other) : NULL;
  int64_t n = type_numel(r->type), tm = m ? estride(m) : 0, tot = other ? estride(other) : 0;
  bool fl = cat_of(r->type.dtype) == CAT_FLOAT;
  if (!fl && cat_of(r->type.dtype) != CAT_INT)
    return fail(x, op->loc, "the interpreter cannot load %s", fa_dtype_name(r->type.dtype));
  for (int64_t i = 0; i < n; i++) {
    if (sm && !sm->i[i * tm]) {
      if (fl)
        sr->f[i] = so ? so->f[i * tot] : 0.0;
      else
        sr->i[i] = so ? so->i[i * tot] : 0;
      continue;
    }
    if (!check_access(x, op->loc, "load", sp->buf[i], sp->i[i]))
      return false;
    const Buffer *B = &x->sh->bufs[sp->buf[i]];
    if (fl)
      sr->f[i] = round_dt(r->type.dtype, mem_read_f(B, sp->i[i]));
    else
      sr->i[i] = wrap_int(r->type.dtype, mem_read_i(B, sp->i[i]));
  }
  return true;
}

static bool op_store(Exec *x, const IrOp *op) {
  const IrValue *p = op->operands[0], *v = op->operands[1];
  const IrValue *m = op->noperands > 2 ? op->operands[2] : NULL;
  Slot *sp = slot_of(x, p), *sv = slot_of(x, v), *sm = m ? slot_of(x, m) : NULL;
  int64_t n = type_numel(p->type), tv = estride(v), tm = m ? estride(m) : 0;
  bool fl = cat_of(v->type.dtype) == CAT_FLOAT;
  for (int64_t i = 0; i < n; i++) {
    if (sm && !sm->i[i * tm])
      continue;
    if (!check_access(x, op->loc, "store", sp->buf[i], sp->i[i]))
      return false;
    const Buffer *B = &x->sh->bufs[sp->buf[i]];
    if (fl == (cat_of(B->dtype) == CAT_FLOAT)) {
      if (fl)
        mem_write_f(B, sp->i[i], sv->f[i * tv]);
      else
        mem_write_i(B, sp->i[i], sv->i[i * tv]);
    } else {
      return fail(x, op->loc, "store of %s into a buffer of %s", fa_dtype_name(v->type.dtype),
                  fa_dtype_name(B->dtype));
    }
  }
  return true;
}

static bool op_atomic_add(Exec *x, const IrOp *op) {
  const IrValue *p = op->operands[0], *v = op->operands[1];
  const IrValue *m = op->noperands > 2 ? op->operands[2] : NULL;
  const IrValue *r = op->nresults ? op->results[0] : NULL;
  Slot *sp = slot_of(x, p), *sv = slot_of(x, v), *sm = m ? slot_of(x, m) : NULL;
  Slot *sr = r ? def_slot(x, r) : NULL;
  if (r && !sr)
    return false;
  int64_t n = type_numel(p->type), tv = estride(v), tm = m ? estride(m) : 0;
  DType dt = v->type.dtype;
  bool fl = cat_of(dt) == CAT_FLOAT;
  if (!fl && cat_of(dt) != CAT_INT)
    return fail(x, op->loc, "the interpreter cannot atomic_add %s", fa_dtype_name(dt));
  Shared *sh = (Shared *)x->sh;
  if (sh->threaded)
    pthread_mutex_lock(&sh->atomic_lock);
  bool ok = true;
  for (int64_t i = 0; i < n; i++) {
    if (sm && !sm->i[i * tm]) {
      if (sr) {
        if (fl) sr->f[i] = 0;
        else sr->i[i] = 0;
      }
      continue;
    }
    if (!check_access(x, op->loc, "atomic_add", sp->buf[i], sp->i[i])) {
      ok = false;
      break;
    }
    const Buffer *B = &sh->bufs[sp->buf[i]];
    if (fl != (cat_of(B->dtype) == CAT_FLOAT)) {
      ok = fail(x, op->loc, "atomic_add of %s into a buffer of %s", fa_dtype_name(dt), fa_dtype_name(B->dtype));
      break;
    }
    if (fl) {
      double old = mem_read_f(B, sp->i[i]);
      mem_write_f(B, sp->i[i], round_dt(B->dtype, old + sv->f[i * tv]));
      if (sr) sr->f[i] = old;
    } else {
      int64_t old = mem_read_i(B, sp->i[i]);
      mem_write_i(B, sp->i[i], wrap_int(B->dtype, (int64_t)((uint64_t)old + (uint64_t)sv->i[i * tv])));
      if (sr) sr->i[i] = old;
    }
  }
  if (sh->threaded)
    pthread_mutex_unlock(&sh->atomic_lock);
  return ok;
}

static bool op_make_block_ptr(Exec *x, const IrOp *op) {
  const IrValue *r = op->results[0];
  Slot *sr = def_slot(x, r);
  int rank = r->type.rank;
  if (op->noperands != 1 + 3 * rank || op->operands[0]->type.rank != 0)
    return fail(x, op->loc, "malformed make_block_ptr");
  Slot *sb = slot_of(x, op->operands[0]);
  BlockPtr bp;
  memset(&bp, 0, sizeof bp);
  bp.buf = sb->buf[0];
  bp.base = sb->i[0];
  bp.rank = rank;
  for (int d = 0; d < rank; d++) {
    bp.shape[d] = scalar_int(x, op->operands[1 + d]);
    bp.strides[d] = scalar_int(x, op->operands[1 + rank + d]);
    bp.offsets[d] = scalar_int(x, op->operands[1 + 2 * rank + d]);
  }
  sr->bp = bp;
  return true;
}

static bool op_advance(Exec *x, const IrOp *op) {
  const IrValue *r = op->results[0];
  BlockPtr bp = slot_of(x, op->operands[0])->bp;
  if (op->noperands != 1 + bp.rank)
    return fail(x, op->loc, "advance takes one offset per dimension of the block pointer");
  for (int d = 0; d < bp.rank; d++)
    bp.offsets[d] += scalar_int(x, op->operands[1 + d]);
  def_slot(x, r)->bp = bp;
  return true;
}

/* Walks the elements of a block-pointer access.  For element i (row-major in
 * the block), sets valid[i] (inside the tensor on every checked axis) and
 * addr[i] (the element offset in the buffer). */
static bool block_addresses(Exec *x, const IrOp *op, const BlockPtr *bp, const IrType *block, unsigned boundary,
                            int64_t *addr, unsigned char *valid) {
  int rank = block->rank;
  if (bp->rank != rank)
    return fail(x, op->loc, "block pointer rank %d does not match the block's rank %d", bp->rank, rank);
  int64_t n = type_numel(*block);
  int64_t idx[FA_MAX_RANK] = {0};
  for (int64_t i = 0; i < n; i++) {
    int64_t a = bp->base;
    bool ok = true;
    for (int d = 0; d < rank; d++) {
      int64_t pos = bp->offsets[d] + idx[d];
      if (((boundary >> d) & 1) && (pos < 0 || pos >= bp->shape[d]))
        ok = false;
      a += pos * bp->strides[d];
    }
    addr[i] = a;
    valid[i] = ok;
    for (int d = rank - 1; d >= 0; d--) {
      if (++idx[d] < block->shape[d])
        break;
      idx[d] = 0;
    }
  }
  return true;
}

static bool op_load_block(Exec *x, const IrOp *op) {
  const IrValue *p = op->operands[0], *r = op->results[0];
  Slot *sr = def_slot(x, r);
  if (!sr)
    return false;
  const BlockPtr *bp = &slot_of(x, p)->bp;
  int64_t n = type_numel(r->type);
  int64_t *addr = scratch_map(x, n);
  unsigned char *valid = scratch_valid(x, n);
  if (!addr || !valid)
    return fail(x, op->loc, "out of memory in the interpreter");
  bool ok = block_addresses(x, op, bp, &r->type, op->boundary, addr, valid);
  DType dt = r->type.dtype;
  bool fl = cat_of(dt) == CAT_FLOAT;
  if (ok && !fl && cat_of(dt) != CAT_INT)
    ok = fail(x, op->loc, "the interpreter cannot load %s", fa_dtype_name(dt));
  double fpad = op->padding == PAD_ZERO ? 0.0 : NAN;
  for (int64_t i = 0; ok && i < n; i++) {
    if (!valid[i]) {
      if (fl)
        sr->f[i] = fpad;
      else
        sr->i[i] = 0;
      continue;
    }
    if (!check_access(x, op->loc, "load", bp->buf, addr[i])) {
      ok = false;
      break;
    }
    const Buffer *B = &x->sh->bufs[bp->buf];
    if (fl)
      sr->f[i] = round_dt(dt, mem_read_f(B, addr[i]));
    else
      sr->i[i] = wrap_int(dt, mem_read_i(B, addr[i]));
  }
  return ok;
}

static bool op_store_block(Exec *x, const IrOp *op) {
  const IrValue *p = op->operands[0], *v = op->operands[1];
  const BlockPtr *bp = &slot_of(x, p)->bp;
  Slot *sv = slot_of(x, v);
  int64_t n = type_numel(v->type);
  int64_t *addr = scratch_map(x, n);
  unsigned char *valid = scratch_valid(x, n);
  if (!addr || !valid)
    return fail(x, op->loc, "out of memory in the interpreter");
  bool ok = block_addresses(x, op, bp, &v->type, op->boundary, addr, valid);
  bool fl = cat_of(v->type.dtype) == CAT_FLOAT;
  for (int64_t i = 0; ok && i < n; i++) {
    if (!valid[i])
      continue;
    if (!check_access(x, op->loc, "store", bp->buf, addr[i])) {
      ok = false;
      break;
    }
    const Buffer *B = &x->sh->bufs[bp->buf];
    if (fl != (cat_of(B->dtype) == CAT_FLOAT)) {
      ok = fail(x, op->loc, "store of %s into a buffer of %s", fa_dtype_name(v->type.dtype), fa_dtype_name(B->dtype));
      break;
    }
    if (fl)
      mem_write_f(B, addr[i], sv->f[i]);
    else
      mem_write_i(B, addr[i], sv->i[i]);
  }
  return ok;
}

/* atomic_add(block_ptr, value): each element inside the checked bounds is
 * added into memory in the memory's dtype, rounded once as the GPU's atom/red
 * instructions round (f32 sums are exact IEEE f32 additions: the sum of two
 * f32 in double, rounded to f32, is the correctly rounded f32 sum).  With
 * threads the whole op holds the atomic lock, so programs add in some order;
 * a test of several programs adding into one element must not depend on it
 * (integers, or floats whose sums are exact). */
static bool op_atomic_add_block(Exec *x, const IrOp *op) {
  const IrValue *p = op->operands[0], *v = op->operands[1];
  const BlockPtr *bp = &slot_of(x, p)->bp;
  Slot *sv = slot_of(x, v);
  int64_t n = type_numel(v->type);
  int64_t *addr = scratch_map(x, n);
  unsigned char *valid = scratch_valid(x, n);
  if (!addr || !valid)
    return fail(x, op->loc, "out of memory in the interpreter");
  if (!block_addresses(x, op, bp, &v->type, op->boundary, addr, valid))
    return false;
  DType dt = v->type.dtype;
  bool fl = cat_of(dt) == CAT_FLOAT;
  if (!fl && cat_of(dt) != CAT_INT)
    return fail(x, op->loc, "the interpreter cannot atomic_add %s", fa_dtype_name(dt));
  Shared *sh = (Shared *)x->sh;
  if (sh->threaded)
    pthread_mutex_lock(&sh->atomic_lock);
  bool ok = true;
  for (int64_t i = 0; ok && i < n; i++) {
    if (!valid[i])
      continue;
    if (!check_access(x, op->loc, "atomic_add", bp->buf, addr[i])) {
      ok = false;
      break;
    }
    const Buffer *B = &sh->bufs[bp->buf];
    if (fl != (cat_of(B->dtype) == CAT_FLOAT)) {
      ok = fail(x, op->loc, "atomic_add of %s into a buffer of %s", fa_dtype_name(dt), fa_dtype_name(B->dtype));
      break;
    }
    if (fl)
      mem_write_f(B, addr[i], round_dt(B->dtype, mem_read_f(B, addr[i]) + sv->f[i]));
    else
      mem_write_i(B, addr[i], wrap_int(B->dtype, (int64_t)((uint64_t)mem_read_i(B, addr[i]) + (uint64_t)sv->i[i])));
  }
  if (sh->threaded)
    pthread_mutex_unlock(&sh->atomic_lock);
  return ok;
}

static bool op_assert(Exec *x, const IrOp *op) {
  const IrValue *c = op->operands[0];
  Slot *sc = slot_of(x, c);
  int64_t n = type_numel(c->type);
  for (int64_t i = 0; i < n; i++) {
    bool holds = cat_of(c->type.dtype) == CAT_FLOAT ? sc->f[i] != 0 : sc->i[i] != 0;
    if (!holds)
      return fail(x, op->loc, "device assertion failed%s%s", op->str ? ": " : "", op->str ? op->str : "");
  }
  return true;
}

/* ---- control flow ---------------------------------------------------------------------- */

static const IrOp *exec_region(Exec *x, const IrRegion *r);

static bool op_for(Exec *x, const IrOp *op) {
  const IrRegion *body = op->regions[0];
  int64_t lb = scalar_int(x, op->operands[0]), ub = scalar_int(x, op->operands[1]);
  int64_t step = scalar_int(x, op->operands[2]);
  int niter = op->noperands - 3;
  if (op->nregions < 1 || body->nargs != niter + 1 || op->nresults != niter)
    return fail(x, op->loc, "malformed for loop");
  if (lb < ub && step <= 0)
    return fail(x, op->loc, "for loop with step %lld never ends", (long long)step);
  if (!copy_values(x, body->args + 1, op->operands + 3, niter, op->loc))
    return false;
  IrValue *iv = body->args[0];
  for (int64_t i = lb; i < ub; i += step) {
    Slot *s = def_slot(x, iv);
    if (!s)
      return false;
    if (cat_of(iv->type.dtype) == CAT_FLOAT)
      s->f[0] = (double)i;
    else
      s->i[0] = wrap_int(iv->type.dtype, i);
    const IrOp *y = exec_region(x, body);
    if (!y)
      return false;
    if (y->noperands != niter)
      return fail(x, y->loc, "yield gives %d values for %d iteration values", y->noperands, niter);
    if (!copy_values(x, body->args + 1, y->operands, niter, y->loc))
      return false;
  }
  return copy_values(x, op->results, body->args + 1, niter, op->loc);
}

static bool op_if(Exec *x, const IrOp *op) {
  bool c = scalar_int(x, op->operands[0]) != 0;
  const IrRegion *r = op->regions[c ? 0 : 1];
  if (!r) {
    if (op->nresults)
      return fail(x, op->loc, "if without an else region yields values");
    return true;
  }
  const IrOp *y = exec_region(x, r);
  if (!y)
    return false;
  if (y->noperands != op->nresults)
    return fail(x, y->loc, "yield gives %d values for %d results", y->noperands, op->nresults);
  return copy_values(x, op->results, y->operands, op->nresults, y->loc);
}

/* while: the condition region on the iteration values, then the body. */
static bool op_while(Exec *x, const IrOp *op) {
  const IrRegion *cond = op->regions[0], *body = op->regions[1];
  int n = op->noperands;
  if (op->nregions != 2 || cond->nargs != n || body->nargs != n || op->nresults != n)
    return fail(x, op->loc, "malformed while loop");
  if (!copy_values(x, cond->args, op->operands, n, op->loc))
    return false;
  for (;;) {
    const IrOp *y = exec_region(x, cond);
    if (!y)
      return false;
    if (y->noperands != 1)
      return fail(x, y->loc, "the condition of a while loop yields %d values", y->noperands);
    if (scalar_int(x, y->operands[0]) == 0)
      break;
    if (!copy_values(x, body->args, cond->args, n, op->loc))
      return false;
    y = exec_region(x, body);
    if (!y)
      return false;
    if (y->noperands != n)
      return fail(x, y->loc, "yield gives %d values for %d iteration values", y->noperands, n);
    if (!copy_values(x, cond->args, y->operands, n, y->loc))
      return false;
  }
  return copy_values(x, op->results, cond->args, n, op->loc);
}

static void scalar_set(Slot *s, const IrValue *v, const Slot *from, int64_t i) {
  if (cat_of(v->type.dtype) == CAT_FLOAT)
    s->f[0] = from->f[i];
  else
    s->i[0] = from->i[i];
}

/* One step of a scan: the combine region on (acc, element pos) for every
 * operand; acc takes the results, which are also the results at pos. */
static bool scan_step(Exec *x, const IrOp *op, Slot **src, Slot **dst, int64_t prev, int64_t pos) {
  const IrRegion *c = op->regions[0];
  int n = op->noperands;
  for (int k = 0; k < n; k++) {
    Slot *a = def_slot(x, c->args[k]), *b = def_slot(x, c->args[n + k]);
    if (!a || !b)
      return false;
    scalar_set(a, c->args[k], dst[k], prev);
    scalar_set(b, c->args[n + k], src[k], pos);
  }
  const IrOp *y = exec_region(x, c);
  if (!y)
    return false;
  if (y->noperands != n)
    return fail(x, y->loc, "the combine function gives %d values for %d operands", y->noperands, n);
  for (int k = 0; k < n; k++) {
    const Slot *v = slot_of(x, y->operands[k]);
    if (cat_of(op->results[k]->type.dtype) == CAT_FLOAT)
      dst[k]->f[pos] = round_dt(op->results[k]->type.dtype, v->f[0]);
    else
      dst[k]->i[pos] = wrap_int(op->results[k]->type.dtype, v->i[0]);
  }
  return true;
}

/* Reduction with a combine region: acc = combine(acc, x[i]) in index order. */
static bool op_reduce_fn(Exec *x, const IrOp *op) {
  int n = op->noperands;
  if (op->nregions != 1 || op->nresults != n || op->regions[0]->nargs != 2 * n || n > 64)
    return fail(x, op->loc, "malformed reduction");
  IrType t = op->operands[0]->type;
  int axis = op->axis;
  if (axis < 0 || axis >= t.rank)
    return fail(x, op->loc, "reduction axis %d out of range", op->axis);
  int64_t outer = 1, len = t.shape[axis], inner = 1;
  for (int d = 0; d < axis; d++)
    outer *= t.shape[d];
  for (int d = axis + 1; d < t.rank; d++)
    inner *= t.shape[d];
  /* a scan into scratch slots, of which the last element of each row is kept */
  Slot *src[64], *dst[64], *res[64];
  Slot tmp[64];
  memset(tmp, 0, sizeof tmp);
  bool ok = true;
  int64_t numel = type_numel(t);
  for (int k = 0; k < n && ok; k++) {
    src[k] = slot_of(x, op->operands[k]);
    dst[k] = &tmp[k];
    bool fl = cat_of(op->operands[k]->type.dtype) == CAT_FLOAT;
    if (fl ? !(tmp[k].f = malloc((size_t)numel * sizeof(double))) : !(tmp[k].i = malloc((size_t)numel * sizeof(int64_t))))
      ok = fail(x, op->loc, "out of memory in the interpreter");
    if (ok && !(res[k] = def_slot(x, op->results[k])))
      ok = false;
  }
  for (int64_t o = 0; ok && o < outer; o++)
    for (int64_t j = 0; ok && j < inner; j++) {
      int64_t base = o * len * inner + j;
      for (int k = 0; k < n; k++) {
        if (cat_of(op->operands[k]->type.dtype) == CAT_FLOAT)
          dst[k]->f[base] = src[k]->f[base];
        else
          dst[k]->i[base] = src[k]->i[base];
      }
      for (int64_t m = 1; ok && m < len; m++)
        ok = scan_step(x, op, src, dst, base + (m - 1) * inner, base + m * inner);
      for (int k = 0; ok && k < n; k++) {
        int64_t last = base + (len - 1) * inner;
        if (cat_of(op->operands[k]->type.dtype) == CAT_FLOAT)
          res[k]->f[o * inner + j] = dst[k]->f[last];
        else
          res[k]->i[o * inner + j] = dst[k]->i[last];
      }
    }
  for (int k = 0; k < n; k++) {
    free(tmp[k].f);
    free(tmp[k].i);
  }
  return ok;
}

/* Inclusive scan along an axis, element by element in index order (from the
 * last element for a reverse scan). */
static bool op_scan(Exec *x, const IrOp *op) {
  int n = op->noperands;
  if (op->nregions != 1 || op->nresults != n || op->regions[0]->nargs != 2 * n || n > 64)
    return fail(x, op->loc, "malformed scan");
  IrType t = op->operands[0]->type;
  int axis = op->axis;
  if (axis < 0 || axis >= t.rank)
    return fail(x, op->loc, "scan axis %d out of range", op->axis);
  Slot *src[64], *dst[64];
  for (int k = 0; k < n; k++) {
    src[k] = slot_of(x, op->operands[k]);
    if (!(dst[k] = def_slot(x, op->results[k])))
      return false;
  }
  int64_t outer = 1, len = t.shape[axis], inner = 1;
  for (int d = 0; d < axis; d++)
    outer *= t.shape[d];
  for (int d = axis + 1; d < t.rank; d++)
    inner *= t.shape[d];
  bool reverse = op->ival != 0;
  for (int64_t o = 0; o < outer; o++)
    for (int64_t j = 0; j < inner; j++) {
      int64_t base = o * len * inner + j;
      int64_t first = base + (reverse ? (len - 1) * inner : 0), step = reverse ? -inner : inner;
      for (int k = 0; k < n; k++) {
        if (cat_of(op->results[k]->type.dtype) == CAT_FLOAT)
          dst[k]->f[first] = src[k]->f[first];
        else
          dst[k]->i[first] = src[k]->i[first];
      }
      for (int64_t m = 1; m < len; m++)
        if (!scan_step(x, op, src, dst, first + (m - 1) * step, first + m * step))
          return false;
    }
  return true;
}

static bool exec_op(Exec *x, const IrOp *op) {
  switch (op->kind) {
  case IR_CONST: return op_const(x, op);
  case IR_PROGRAM_ID:
  case IR_NUM_PROGRAMS: {
    if (op->axis < 0 || op->axis > 2)
      return fail(x, op->loc, "program axis %d out of range (0, 1 or 2)", op->axis);
    if (!x->sh->grid[0])
      return fail(x, op->loc, "%s outside a kernel", op->kind == IR_PROGRAM_ID ? "program_id" : "num_programs");
    Slot *s = def_slot(x, op->results[0]);
    if (!s)
      return false;
    int64_t v = op->kind == IR_PROGRAM_ID ? x->pid[op->axis] : x->sh->grid[op->axis];
    s->i[0] = wrap_int(op->results[0]->type.dtype, v);
    return true;
  }
  case IR_ARANGE: return op_arange(x, op);
  case IR_SPLAT:
  case IR_BROADCAST:
  case IR_EXPAND_DIMS:
  case IR_RESHAPE:
  case IR_TRANS: return op_shape(x, op);
  case IR_CAST: return op_cast(x, op);
  case IR_UNARY: return op_unary(x, op);
  case IR_BINARY: return op_binary(x, op);
  case IR_CMP: return op_cmp(x, op);
  case IR_SELECT: return op_select(x, op);
  case IR_REDUCE: return op_reduce(x, op);
  case IR_DOT: return op_dot(x, op);
  case IR_PTR_ADD: return op_ptr_add(x, op);
  case IR_LOAD: return op_load(x, op);
  case IR_STORE: return op_store(x, op);
  case IR_ATOMIC_ADD: return op_atomic_add(x, op);
  case IR_MAKE_BLOCK_PTR: return op_make_block_ptr(x, op);
  case IR_ADVANCE: return op_advance(x, op);
  case IR_LOAD_BLOCK: return op_load_block(x, op);
  case IR_STORE_BLOCK: return op_store_block(x, op);
  case IR_ATOMIC_ADD_BLOCK: return op_atomic_add_block(x, op);
  case IR_FOR: return op_for(x, op);
  case IR_IF: return op_if(x, op);
  case IR_ASSERT: return op_assert(x, op);
  case IR_FMA: return op_fma(x, op);
  case IR_SCAN: return op_scan(x, op);
  case IR_REDUCE_FN: return op_reduce_fn(x, op);
  case IR_RAND: return op_rand(x, op);
  case IR_PRINT: return op_print(x, op);
  case IR_WHILE: return op_while(x, op);
  default:
    return fail(x, op->loc, "the interpreter does not support the '%s' op", fa_ir_op_name(op->kind));
  }
}

/* Runs a region's ops; returns its terminator (yield or return), or NULL after
 * an error. */
static const IrOp *exec_region(Exec *x, const IrRegion *r) {
  for (const IrOp *op = r->first; op; op = op->next) {
    if (op->kind == IR_YIELD || op->kind == IR_RETURN)
      return op;
    if (!exec_op(x, op))
      return NULL;
  }
  fail(x, r->parent_op ? r->parent_op->loc : fa_noloc(), "region without a terminator");
  return NULL;
}

/* ---- executors ------------------------------------------------------------------------ */

static bool exec_init(Exec *x, const Shared *sh) {
  memset(x, 0, sizeof *x);
  x->sh = sh;
  x->nslots = sh->fn->next_value_id;
  x->slots = calloc((size_t)(x->nslots > 0 ? x->nslots : 1), sizeof(Slot));
  return x->slots != NULL;
}

static void exec_free(Exec *x) {
  for (int i = 0; i < x->nslots; i++) {
    free(x->slots[i].f);
    free(x->slots[i].i);
    free(x->slots[i].buf);
  }
  free(x->slots);
  for (int i = 0; i < 3; i++)
    free(x->fs[i]);
  free(x->map);
  free(x->valid);
}

/* Sets the parameter slots: pointers to their buffer (id = parameter index),
 * scalars to their bound values. */
static bool exec_bind_params(Exec *x) {
  const IrFunction *fn = x->sh->fn;
  for (int p = 0; p < fn->nparams; p++) {
    const IrValue *v = fn->params[p].value;
    Slot *s = def_slot(x, v);
    if (!s)
      return false;
    FaHostValue hv = x->sh->scalars ? x->sh->scalars[p] : fa_host_int(DT_PTR, 0);
    switch (cat_of(v->type.dtype)) {
    case CAT_PTR:
      s->i[0] = 0;
      s->buf[0] = p < x->sh->nbufs && x->sh->bufs[p].bound ? p : -1;
      break;
    case CAT_FLOAT: s->f[0] = hv.dtype != DT_VOID && cat_of(hv.dtype) == CAT_INT ? (double)hv.i : hv.f; break;
    case CAT_INT: s->i[0] = cat_of(hv.dtype) == CAT_FLOAT ? (int64_t)hv.f : hv.i; break;
    default: return fail(x, v->loc, "parameter '%s' has a type the interpreter cannot bind", fn->params[p].name);
    }
  }
  return true;
}

static bool exec_program(Exec *x, int64_t px, int64_t py, int64_t pz) {
  x->pid[0] = px;
  x->pid[1] = py;
  x->pid[2] = pz;
  const IrOp *t = exec_region(x, x->sh->fn->body);
  return t != NULL;
}

/* ---- host values ---------------------------------------------------------------------- */

FaHostValue fa_host_int(DType dt, int64_t v) {
  FaHostValue h = {dt, v, (double)v};
  return h;
}

FaHostValue fa_host_float(DType dt, double v) {
  FaHostValue h = {dt, 0, v};
  return h;
}

/* Converts a host value to a parameter's dtype; false when it does not fit. */
static bool convert_host(FaHostValue in, DType to, FaHostValue *out, const char **why) {
  Cat ci = cat_of(in.dtype), ct = cat_of(to);
  *out = fa_host_int(to, 0);
  if (ct == CAT_PTR) {
    return true;
  }
  if (ct == CAT_FLOAT) {
    out->f = round_dt(to, ci == CAT_INT ? (double)in.i : in.f);
    out->i = 0;
    return true;
  }
  if (ct != CAT_INT) {
    *why = "a parameter of this type cannot take a scalar";
    return false;
  }
  int64_t v;
  if (ci == CAT_FLOAT) {
    if (in.f != trunc(in.f) || !(fabs(in.f) < 9.2e18)) {
      *why = "a non-integral number for an integer parameter";
      return false;
    }
    v = (int64_t)in.f;
  } else if (ci == CAT_INT || in.dtype == DT_VOID) {
    v = in.i;
  } else {
    *why = "not a scalar";
    return false;
  }
  if (to == DT_I1 ? (v != 0 && v != 1) : wrap_int(to, v) != v) {
    *why = "the value does not fit the parameter's dtype";
    return false;
  }
  out->i = v;
  out->f = (double)v;
  return true;
}

static FaHostValue host_from_slot(const IrValue *v, const Slot *s) {
  if (cat_of(v->type.dtype) == CAT_FLOAT)
    return fa_host_float(v->type.dtype, s->f[0]);
  if (cat_of(v->type.dtype) == CAT_INT)
    return fa_host_int(v->type.dtype, s->i[0]);
  return fa_host_int(v->type.dtype, 0);
}

static void report_exec_error(FaCompiler *fc, const Exec *x) {
  fa_error(&fc->diag, x->err_loc, "%s", x->err_msg);
}

bool fa_interp_host_function(FaCompiler *fc, const IrFunction *fn, const FaHostValue *args, int nargs,
                             FaHostValue *results, int nresults) {
  if (nargs != fn->nparams) {
    fa_error(&fc->diag, fn->loc, "host function '%s' takes %d arguments, not %d", fn->name, fn->nparams, nargs);
    return false;
  }
  if (!fa_ir_verify(fn, &fc->diag))
    return false;
  FaHostValue *conv = calloc((size_t)(nargs > 0 ? nargs : 1), sizeof *conv);
  if (!conv) {
    fa_error(&fc->diag, fn->loc, "out of memory");
    return false;
  }
  for (int i = 0; i < nargs; i++) {
    const char *why = "";
    DType to = fn->params[i].value->type.dtype;
    if (!convert_host(args[i], to, &conv[i], &why)) {
      fa_error(&fc->diag, fn->params[i].value->loc, "argument '%s' of host function '%s': %s", fn->params[i].name,
               fn->name, why);
      free(conv);
      return false;
    }
  }
  Shared sh;
  memset(&sh, 0, sizeof sh);
  sh.fn = fn;
  sh.scalars = conv;
  Exec x;
  bool ok = exec_init(&x, &sh);
  if (!ok) {
    fa_error(&fc->diag, fn->loc, "out of memory");
    free(conv);
    return false;
  }
  const IrOp *t = NULL;
  if (exec_bind_params(&x))
    t = exec_region(&x, fn->body);
  if (!t) {
    report_exec_error(fc, &x);
    ok = false;
  } else if (t->kind != IR_RETURN || t->noperands != nresults) {
    fa_error(&fc->diag, t->loc, "host function '%s' returns %d values where %d are expected", fn->name,
             t->noperands, nresults);
    ok = false;
  } else {
    for (int i = 0; i < nresults; i++)
      results[i] = host_from_slot(t->operands[i], slot_of(&x, t->operands[i]));
  }
  exec_free(&x);
  free(conv);
  return ok;
}

/* ---- host arrays --------------------------------------------------------------------- */

double fa_f16_bits_to_double(uint16_t h) { return half_bits_to_double(h); }
uint16_t fa_double_to_f16_bits(double x) { return double_to_half_bits(x); }
double fa_bf16_bits_to_double(uint16_t h) { return bf16_bits_to_double(h); }
uint16_t fa_double_to_bf16_bits(double x) { return double_to_bf16_bits(x); }
double fa_round_to_dtype(DType dt, double x) { return round_dt(dt, x); }

double fa_host_get(DType dt, const void *data, int64_t i) {
  Buffer B = {true, dt, (void *)data, i + 1, i + 1, NULL};
  return cat_of(dt) == CAT_FLOAT ? mem_read_f(&B, i) : (double)mem_read_i(&B, i);
}

void fa_host_set(DType dt, void *data, int64_t i, double v) {
  Buffer B = {true, dt, data, i + 1, i + 1, NULL};
  if (cat_of(dt) == CAT_FLOAT)
    mem_write_f(&B, i, round_dt(dt, v));
  else
    mem_write_i(&B, i, dt == DT_I1 ? v != 0 : float_to_int(dt, v));
}

void fa_host_convert(DType from, const void *src, DType to, void *dst, int64_t n) {
  if (from == to) {
    memcpy(dst, src, (size_t)n * (size_t)fa_dtype_size(from));
    return;
  }
  if (cat_of(from) == CAT_INT && cat_of(to) == CAT_INT) {
    Buffer S = {true, from, (void *)src, n, n, NULL}, D = {true, to, dst, n, n, NULL};
    for (int64_t i = 0; i < n; i++)
      mem_write_i(&D, i, to == DT_I1 ? mem_read_i(&S, i) != 0 : wrap_int(to, mem_read_i(&S, i)));
    return;
  }
  for (int64_t i = 0; i < n; i++)
    fa_host_set(to, dst, i, fa_host_get(from, src, i));
}

/* ---- kernels --------------------------------------------------------------------------- */

struct FaInterp {
  FaCompiler *fc;
  const IrKernel *k;
  Buffer *bufs;
  FaHostValue *scalars;
  bool *scalar_bound;
  int nparams;
  FILE *print_to;
};

void fa_interp_set_print(FaInterp *in, FILE *out) { in->print_to = out; }

FaInterp *fa_interp_new(FaCompiler *fc, const IrKernel *k) {
  /* The interpreter relies on the IR's invariants (operand types and shapes,
   * definitions dominating uses): IR that breaks them is refused here rather
   * than run. */
  if (!fa_ir_verify(k->device, &fc->diag) || (k->grid && !fa_ir_verify(k->grid, &fc->diag)) ||
      (k->extents && !fa_ir_verify(k->extents, &fc->diag)))
    return NULL;
  FaInterp *in = calloc(1, sizeof *in);
  int n = k->device->nparams;
  if (in) {
    in->fc = fc;
    in->k = k;
    in->nparams = n;
    in->bufs = calloc((size_t)(n > 0 ? n : 1), sizeof *in->bufs);
    in->scalars = calloc((size_t)(n > 0 ? n : 1), sizeof *in->scalars);
    in->scalar_bound = calloc((size_t)(n > 0 ? n : 1), sizeof *in->scalar_bound);
  }
  if (!in || !in->bufs || !in->scalars || !in->scalar_bound) {
    fa_interp_free(in);
    fa_error(&fc->diag, k->device->loc, "out of memory");
    return NULL;
  }
  for (int p = 0; p < n; p++) {
    in->bufs[p].name = k->device->params[p].name;
    in->scalars[p] = fa_host_int(DT_PTR, 0);
  }
  return in;
}

void fa_interp_free(FaInterp *in) {
  if (!in)
    return;
  free(in->bufs);
  free(in->scalars);
  free(in->scalar_bound);
  free(in);
}

int fa_interp_param_index(const FaInterp *in, const char *name) {
  for (int p = 0; p < in->nparams; p++)
    if (!strcmp(in->k->device->params[p].name, name))
      return p;
  return -1;
}

static const IrParam *param_at(FaInterp *in, int p) {
  if (p < 0 || p >= in->nparams) {
    fa_error(&in->fc->diag, in->k->device->loc, "kernel '%s' has no parameter number %d", in->k->device->name, p);
    return NULL;
  }
  return &in->k->device->params[p];
}

bool fa_interp_bind_buffer(FaInterp *in, int p, DType dtype, void *data, int64_t count) {
  const IrParam *pa = param_at(in, p);
  if (!pa)
    return false;
  IrType t = pa->value->type;
  if (t.dtype != DT_PTR) {
    fa_error(&in->fc->diag, pa->value->loc, "parameter '%s' is a %s scalar, not a pointer", pa->name,
             fa_dtype_name(t.dtype));
    return false;
  }
  if (dtype != t.pointee) {
    fa_error(&in->fc->diag, pa->value->loc, "parameter '%s' points to %s, but the buffer holds %s", pa->name,
             fa_dtype_name(t.pointee), fa_dtype_name(dtype));
    return false;
  }
  if (count < 0 || (count > 0 && !data)) {
    fa_error(&in->fc->diag, pa->value->loc, "parameter '%s': invalid buffer", pa->name);
    return false;
  }
  Buffer *B = &in->bufs[p];
  B->bound = true;
  B->dtype = dtype;
  B->data = data;
  B->count = count;
  B->limit = count;
  return true;
}

bool fa_interp_bind_scalar(FaInterp *in, int p, FaHostValue v) {
  const IrParam *pa = param_at(in, p);
  if (!pa)
    return false;
  DType to = pa->value->type.dtype;
  if (to == DT_PTR) {
    fa_error(&in->fc->diag, pa->value->loc, "parameter '%s' is a pointer: bind a buffer to it", pa->name);
    return false;
  }
  const char *why = "";
  if (!convert_host(v, to, &in->scalars[p], &why)) {
    fa_error(&in->fc->diag, pa->value->loc, "parameter '%s' (%s): %s", pa->name, fa_dtype_name(to), why);
    return false;
  }
  in->scalar_bound[p] = true;
  return true;
}

/* Arguments for a host function whose parameters mirror the kernel's (matched by name). */
static FaHostValue *host_args(FaInterp *in, const IrFunction *fn) {
  FaHostValue *args = calloc((size_t)(fn->nparams > 0 ? fn->nparams : 1), sizeof *args);
  if (!args) {
    fa_error(&in->fc->diag, fn->loc, "out of memory");
    return NULL;
  }
  for (int i = 0; i < fn->nparams; i++) {
    int p = fa_interp_param_index(in, fn->params[i].name);
    if (p < 0) {
      fa_error(&in->fc->diag, fn->params[i].value->loc, "host function '%s' has a parameter '%s' the kernel lacks",
               fn->name, fn->params[i].name);
      free(args);
      return NULL;
    }
    const IrParam *pa = &in->k->device->params[p];
    if (pa->value->type.dtype != DT_PTR && !in->scalar_bound[p]) {
      fa_error(&in->fc->diag, pa->value->loc, "parameter '%s' is not bound", pa->name);
      free(args);
      return NULL;
    }
    args[i] = pa->value->type.dtype == DT_PTR ? fa_host_int(DT_PTR, 0) : in->scalars[p];
  }
  return args;
}

bool fa_interp_grid(FaInterp *in, int64_t grid[3]) {
  const IrFunction *g = in->k->grid;
  grid[0] = grid[1] = grid[2] = 1;
  if (!g)
    return true;
  FaHostValue *args = host_args(in, g);
  if (!args)
    return false;
  FaHostValue res[3];
  bool ok = fa_interp_host_function(in->fc, g, args, g->nparams, res, 3);
  free(args);
  if (!ok)
    return false;
  for (int d = 0; d < 3; d++) {
    grid[d] = cat_of(res[d].dtype) == CAT_FLOAT ? (int64_t)res[d].f : res[d].i;
    if (grid[d] < 0) {
      fa_error(&in->fc->diag, g->loc, "grid dimension %d of kernel '%s' is negative (%lld)", d, in->k->device->name,
               (long long)grid[d]);
      return false;
    }
  }
  return true;
}

int fa_interp_extent(FaInterp *in, int p, int64_t dims[FA_MAX_RANK]) {
  const IrParam *pa = param_at(in, p);
  if (!pa)
    return -1;
  if (pa->extent_rank <= 0)
    return 0;
  const IrFunction *e = in->k->extents;
  if (!e) {
    fa_error(&in->fc->diag, pa->value->loc, "parameter '%s' declares an extent but the kernel has no extents function",
             pa->name);
    return -1;
  }
  int total = 0, first = 0;
  for (int q = 0; q < in->nparams; q++) {
    if (q == p)
      first = total;
    total += in->k->device->params[q].extent_rank > 0 ? in->k->device->params[q].extent_rank : 0;
  }
  FaHostValue *args = host_args(in, e);
  FaHostValue *res = calloc((size_t)total, sizeof *res);
  bool ok = args && res && fa_interp_host_function(in->fc, e, args, e->nparams, res, total);
  if (ok)
    for (int d = 0; d < pa->extent_rank && d < FA_MAX_RANK; d++)
      dims[d] = cat_of(res[first + d].dtype) == CAT_FLOAT ? (int64_t)res[first + d].f : res[first + d].i;
  free(args);
  free(res);
  return ok ? pa->extent_rank : -1;
}

typedef struct Worker {
  Exec x;
  Shared *sh;
  atomic_llong *next;
  atomic_bool *stop;
  int64_t total;
  int64_t failed_at;    /* linear program index of the failure, or -1 */
  pthread_t thread;
} Worker;

static void *worker_main(void *arg) {
  Worker *w = arg;
  const int64_t *g = w->sh->grid;
  for (;;) {
    if (atomic_load(w->stop))
      break;
    int64_t i = atomic_fetch_add(w->next, 1);
    if (i >= w->total)
      break;
    if (!exec_program(&w->x, i % g[0], (i / g[0]) % g[1], i / (g[0] * g[1]))) {
      w->failed_at = i;
      atomic_store(w->stop, true);
      break;
    }
  }
  return NULL;
}

bool fa_interp_run(FaInterp *in, const FaInterpOptions *opt) {
  FaCompiler *fc = in->fc;
  const IrFunction *fn = in->k->device;
  /* every parameter bound; declared extents respected */
  for (int p = 0; p < in->nparams; p++) {
    const IrParam *pa = &fn->params[p];
    bool ptr = pa->value->type.dtype == DT_PTR;
    if (ptr ? !in->bufs[p].bound : !in->scalar_bound[p]) {
      fa_error(&fc->diag, pa->value->loc, "parameter '%s' of kernel '%s' is not bound", pa->name, fn->name);
      return false;
    }
  }
  for (int p = 0; p < in->nparams; p++) {
    if (fn->params[p].value->type.dtype != DT_PTR)
      continue;
    int64_t dims[FA_MAX_RANK];
    int r = fa_interp_extent(in, p, dims);
    if (r < 0)
      return false;
    in->bufs[p].limit = in->bufs[p].count;
    if (r == 0)
      continue;
    int64_t need = 1;
    for (int d = 0; d < r; d++)
      need *= dims[d] > 0 ? dims[d] : 0;
    if (in->bufs[p].count < need) {
      fa_error(&fc->diag, fn->params[p].value->loc,
               "buffer for '%s' has %lld elements, but its declared extent needs %lld", fn->params[p].name,
               (long long)in->bufs[p].count, (long long)need);
      return false;
    }
    in->bufs[p].limit = need;
  }
  Shared sh;
  memset(&sh, 0, sizeof sh);
  sh.fn = fn;
  sh.bufs = in->bufs;
  sh.nbufs = in->nparams;
  sh.scalars = in->scalars;
  sh.print_to = in->print_to;
  if (opt && opt->grid) {
    for (int d = 0; d < 3; d++)
      sh.grid[d] = opt->grid[d];
  } else if (!fa_interp_grid(in, sh.grid)) {
    return false;
  }
  int64_t total = sh.grid[0] * sh.grid[1] * sh.grid[2];
  if (total <= 0)
    return true;
  int threads = opt && opt->threads > 1 ? opt->threads : 1;
  if (threads > total)
    threads = (int)total;
  sh.threaded = threads > 1;
  if (sh.threaded && pthread_mutex_init(&sh.atomic_lock, NULL) != 0)
    sh.threaded = false, threads = 1;

  Worker *ws = calloc((size_t)threads, sizeof *ws);
  atomic_llong next;
  atomic_bool stop;
  atomic_init(&next, 0);
  atomic_init(&stop, false);
  bool ok = ws != NULL;
  int started = 0;
  for (int t = 0; ok && t < threads; t++) {
    ws[t].sh = &sh;
    ws[t].next = &next;
    ws[t].stop = &stop;
    ws[t].total = total;
    ws[t].failed_at = -1;
    if (!exec_init(&ws[t].x, &sh)) {
      ok = false;
      break;
    }
    started++;
    if (!exec_bind_params(&ws[t].x))
      break;
  }
  if (!ok) {
    fa_error(&fc->diag, fn->loc, "out of memory in the interpreter");
  } else if (started == threads && !ws[started - 1].x.failed) {
    if (threads == 1) {
      worker_main(&ws[0]);
    } else {
      int launched = 0;
      for (int t = 0; t < threads; t++) {
        if (pthread_create(&ws[t].thread, NULL, worker_main, &ws[t]) != 0)
          break;
        launched++;
      }
      if (launched == 0)
        worker_main(&ws[0]);   /* no threads to be had: run here */
      for (int t = 0; t < launched; t++)
        pthread_join(ws[t].thread, NULL);
    }
  }
  /* report the failure of the earliest program */
  int bad = -1;
  for (int t = 0; t < started; t++)
    if (ws[t].x.failed && (bad < 0 || ws[t].failed_at < ws[bad].failed_at))
      bad = t;
  if (bad >= 0) {
    int64_t i = ws[bad].failed_at;
    report_exec_error(fc, &ws[bad].x);
    if (i >= 0)
      fa_note(&fc->diag, fa_noloc(), "in program (%lld, %lld, %lld) of kernel '%s' (grid %lld x %lld x %lld)",
              (long long)(i % sh.grid[0]), (long long)((i / sh.grid[0]) % sh.grid[1]),
              (long long)(i / (sh.grid[0] * sh.grid[1])), fn->name, (long long)sh.grid[0], (long long)sh.grid[1],
              (long long)sh.grid[2]);
    ok = false;
  }
  for (int t = 0; t < started; t++)
    exec_free(&ws[t].x);
  free(ws);
  if (sh.threaded)
    pthread_mutex_destroy(&sh.atomic_lock);
  return ok;
}
