/* types.c - the dtype and shape rules of the language: promotion of the
 * operands of an operator to a common dtype, literals that adapt to the
 * other operand, and numpy broadcasting of block shapes.
 *
 * The rules follow Triton's so that kernels port unchanged; docs/language.md
 * ("Types and promotion") states them for users.
 */
#include <string.h>

#include "sema_internal.h"

bool fa_is_pow2(int64_t n) { return n > 0 && (n & (n - 1)) == 0; }

bool fa_int_fits(int64_t v, DType to) {
  switch (to) {
  case DT_I1: return v == 0 || v == 1;
  case DT_I8: return v >= INT8_MIN && v <= INT8_MAX;
  case DT_I16: return v >= INT16_MIN && v <= INT16_MAX;
  case DT_I32: return v >= INT32_MIN && v <= INT32_MAX;
  case DT_U32: return v >= 0 && v <= (int64_t)UINT32_MAX;
  default: return true;
  }
}

DType fa_const_default_dtype(FaConst c) {
  switch (c.kind) {
  case CK_INT: return fa_int_fits(c.i, DT_I32) ? DT_I32 : DT_I64;
  case CK_FLOAT: return DT_F32;
  case CK_BOOL: return DT_I1;
  default: return DT_VOID;
  }
}

/* Kinds ordered as Triton and PyTorch order them for scalar promotion:
 * bool < int < float.  A literal of a kind no higher than the typed
 * operand's does not take part in promotion. */
static int kind_rank_of_dtype(DType dt) {
  if (dt == DT_I1)
    return 0;
  if (fa_dtype_is_int(dt))
    return 1;
  if (fa_dtype_is_float(dt))
    return 2;
  return -1;
}

static int kind_rank_of_const(FaConstKind k) {
  switch (k) {
  case CK_BOOL: return 0;
  case CK_INT: return 1;
  case CK_FLOAT: return 2;
  default: return -1;
  }
}

static bool is_half(DType dt) { return dt == DT_F16 || dt == DT_BF16; }

/* Common dtype of two typed (runtime) operands. */
static DType promote_typed(FaOpClass cls, DType a, DType b) {
  bool af = fa_dtype_is_float(a), bf = fa_dtype_is_float(b);
  if (af || bf) {
    if (cls == OPC_BITWISE)
      return DT_VOID;
    DType r;
    if (a == DT_F64 || b == DT_F64)
      r = DT_F64;
    else if (a == DT_F32 || b == DT_F32)
      r = DT_F32;
    else if (is_half(a) && is_half(b) && a != b)
      r = DT_F32; /* f16 with bf16: neither holds the other */
    else
      r = af ? a : b;
    if ((cls == OPC_TRUEDIV || cls == OPC_FLOORMOD) && is_half(r))
      r = DT_F32; /* no native f16 division: computed in f32, as Triton */
    return r;
  }
  if (!fa_dtype_is_int(a) || !fa_dtype_is_int(b))
    return DT_VOID;
  if (cls == OPC_TRUEDIV)
    return DT_F32;
  if (a == DT_I1 && b == DT_I1)
    return (cls == OPC_BITWISE || cls == OPC_COMPARE || cls == OPC_SELECT) ? DT_I1 : DT_I32;
  /* integer promotion: everything narrower than 32 bits (bool included)
   * widens to i32; i64 wins over i32 */
  return fa_dtype_bits(a) == 64 || fa_dtype_bits(b) == 64 ? DT_I64 : DT_I32;
}

DType fa_promote(FaOpClass cls, DType a, FaConstKind aw, const FaConst *aval, DType b, FaConstKind bw,
                 const FaConst *bval) {
  bool a_lit = aw != CK_NONE, b_lit = bw != CK_NONE;
  if (a_lit && b_lit) {
    /* two literals meeting at run time (e.g. where(c, 1.0, 0)): the higher
     * kind's default dtype */
    FaConst ca = *aval, cb = *bval;
    DType da = fa_const_default_dtype(ca), db = fa_const_default_dtype(cb);
    return promote_typed(cls, da, db);
  }
  if (a_lit != b_lit) {
    FaConstKind lk = a_lit ? aw : bw;
    const FaConst *lv = a_lit ? aval : bval;
    DType typed = a_lit ? b : a;
    int tr = kind_rank_of_dtype(typed), lr = kind_rank_of_const(lk);
    if (tr < 0 || lr < 0)
      return DT_VOID;
    if (lr <= tr) {
      /* the literal adapts to the typed operand (x * 0.5 keeps f16) */
      DType r = typed;
      if (lk == CK_INT && lv && fa_dtype_is_int(typed) && !fa_int_fits(lv->i, typed == DT_I1 ? DT_I32 : typed))
        r = DT_I64;
      if (cls == OPC_BITWISE && fa_dtype_is_float(r))
        return DT_VOID;
      if (cls == OPC_TRUEDIV && fa_dtype_is_int(r))
        return DT_F32;
      if (r == DT_I1 && (cls == OPC_ARITH || cls == OPC_FLOORMOD))
        return DT_I32;
      if ((cls == OPC_TRUEDIV || cls == OPC_FLOORMOD) && is_half(r))
        return DT_F32;
      return r;
    }
    /* the literal is of a higher kind: its default dtype wins */
    DType ld = lv ? fa_const_default_dtype(*lv) : (lk == CK_FLOAT ? DT_F32 : DT_I32);
    return promote_typed(cls, a_lit ? ld : a, a_lit ? b : ld);
  }
  return promote_typed(cls, a, b);
}

bool fa_broadcast_shapes(int ra, const int *sa, int rb, const int *sb, int *rank, int *shape) {
  int r = ra > rb ? ra : rb;
  if (r > FA_MAX_RANK)
    return false;
  for (int i = 0; i < r; i++) {
    int da = i - (r - ra) >= 0 ? sa[i - (r - ra)] : 1;
    int db = i - (r - rb) >= 0 ? sb[i - (r - rb)] : 1;
    if (da != db && da != 1 && db != 1)
      return false;
    shape[i] = da == 1 ? db : da;
  }
  *rank = r;
  return true;
}

const char *fa_type_str(Arena *a, IrType t) {
  StrBuf sb;
  fa_sb_init(&sb);
  fa_type_print(t, &sb);
  const char *s = fa_arena_strdup(a, sb.data ? sb.data : "?");
  fa_sb_free(&sb);
  return s ? s : "?";
}

const char *fa_shape_str(Arena *a, int rank, const int *shape) {
  StrBuf sb;
  fa_sb_init(&sb);
  fa_sb_putc(&sb, '[');
  for (int i = 0; i < rank; i++)
    fa_sb_printf(&sb, "%s%d", i ? ", " : "", shape[i]);
  fa_sb_putc(&sb, ']');
  const char *s = fa_arena_strdup(a, sb.data);
  fa_sb_free(&sb);
  return s ? s : "?";
}
