/* consteval.c - compile-time values (FaConst): parsing them from a command
 * line, printing them, and folding operators on them.
 *
 * Integer arithmetic is checked: overflow and division by zero are errors,
 * not wrap-around.  `//` and `%` on integers truncate toward zero like C
 * (and like the same operators at run time), so a constexpr expression has
 * the value its runtime twin would have; on floats `//` floors.
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sema_internal.h"

FaConst fa_const_int(int64_t v) {
  FaConst c = {CK_INT, v, 0, DT_VOID, NULL};
  return c;
}
FaConst fa_const_float(double v) {
  FaConst c = {CK_FLOAT, 0, v, DT_VOID, NULL};
  return c;
}
FaConst fa_const_bool(bool v) {
  FaConst c = {CK_BOOL, v ? 1 : 0, 0, DT_VOID, NULL};
  return c;
}
FaConst fa_const_dtype(DType dt) {
  FaConst c = {CK_DTYPE, 0, 0, dt, NULL};
  return c;
}
FaConst fa_const_none(void) {
  FaConst c = {CK_NONE, 0, 0, DT_VOID, NULL};
  return c;
}

bool fa_const_is_number(FaConst c) { return c.kind == CK_INT || c.kind == CK_FLOAT || c.kind == CK_BOOL; }

double fa_const_as_double(FaConst c) { return c.kind == CK_FLOAT ? c.f : (double)c.i; }

const char *fa_const_kind_name(FaConstKind k) {
  switch (k) {
  case CK_NONE: return "None";
  case CK_INT: return "int";
  case CK_FLOAT: return "float";
  case CK_BOOL: return "bool";
  case CK_DTYPE: return "dtype";
  case CK_STR: return "str";
  }
  return "?";
}

bool fa_const_equal(FaConst a, FaConst b) {
  if (fa_const_is_number(a) && fa_const_is_number(b)) {
    if (a.kind == CK_FLOAT || b.kind == CK_FLOAT)
      return fa_const_as_double(a) == fa_const_as_double(b);
    return a.i == b.i;
  }
  if (a.kind != b.kind)
    return false;
  switch (a.kind) {
  case CK_NONE: return true;
  case CK_DTYPE: return a.dtype == b.dtype;
  case CK_STR: return a.s && b.s && !strcmp(a.s, b.s);
  default: return false;
  }
}

bool fa_const_truth(FaConst c) {
  switch (c.kind) {
  case CK_NONE: return false;
  case CK_INT:
  case CK_BOOL: return c.i != 0;
  case CK_FLOAT: return c.f != 0.0;
  case CK_DTYPE: return true;
  case CK_STR: return c.s && c.s[0];
  }
  return false;
}

bool fa_const_unary(OpKind op, FaConst a, FaConst *out, const char **err) {
  if (op == OP_NOT) {
    *out = fa_const_bool(!fa_const_truth(a));
    return true;
  }
  if (!fa_const_is_number(a)) {
    *err = "bad operand type for a unary operator";
    return false;
  }
  switch (op) {
  case OP_POS:
    *out = a.kind == CK_BOOL ? fa_const_int(a.i) : a;
    return true;
  case OP_NEG:
    if (a.kind == CK_FLOAT) {
      *out = fa_const_float(-a.f);
      return true;
    }
    if (a.i == INT64_MIN) {
      *err = "integer overflow in a compile-time expression";
      return false;
    }
    *out = fa_const_int(-a.i);
    return true;
  case OP_INVERT:
    if (a.kind == CK_FLOAT) {
      *err = "'~' needs an integer operand";
      return false;
    }
    *out = fa_const_int(~a.i);
    return true;
  default:
    *err = "not a unary operator";
    return false;
  }
}

static bool int_pow(int64_t base, int64_t exp, int64_t *out) {
  int64_t r = 1;
  while (exp > 0) {
    if (exp & 1)
      if (__builtin_mul_overflow(r, base, &r))
        return false;
    exp >>= 1;
    if (exp && __builtin_mul_overflow(base, base, &base))
      return false;
  }
  *out = r;
  return true;
}

static bool fold_compare(OpKind op, FaConst a, FaConst b, FaConst *out, const char **err) {
  if (op == OP_EQ || op == OP_NE) {
    bool eq = fa_const_equal(a, b);
    *out = fa_const_bool(op == OP_EQ ? eq : !eq);
    return true;
  }
  int c;
  if (fa_const_is_number(a) && fa_const_is_number(b)) {
    if (a.kind == CK_FLOAT || b.kind == CK_FLOAT) {
      double x = fa_const_as_double(a), y = fa_const_as_double(b);
      if (isnan(x) || isnan(y)) {
        *out = fa_const_bool(false);
        return true;
      }
      c = x < y ? -1 : x > y ? 1 : 0;
    } else {
      c = a.i < b.i ? -1 : a.i > b.i ? 1 : 0;
    }
  } else if (a.kind == CK_STR && b.kind == CK_STR && a.s && b.s) {
    c = strcmp(a.s, b.s);
  } else {
    *err = "ordering comparison between values that have no order";
    return false;
  }
  bool r = false;
  switch (op) {
  case OP_LT: r = c < 0; break;
  case OP_LE: r = c <= 0; break;
  case OP_GT: r = c > 0; break;
  case OP_GE: r = c >= 0; break;
  default: break;
  }
  *out = fa_const_bool(r);
  return true;
}

static bool fold_float(OpKind op, double x, double y, FaConst *out, const char **err) {
  switch (op) {
  case OP_ADD: *out = fa_const_float(x + y); return true;
  case OP_SUB: *out = fa_const_float(x - y); return true;
  case OP_MUL: *out = fa_const_float(x * y); return true;
  case OP_DIV:
  case OP_FLOORDIV:
  case OP_MOD:
    if (y == 0.0) {
      *err = "division by zero in a compile-time expression";
      return false;
    }
    *out = fa_const_float(op == OP_DIV ? x / y : op == OP_FLOORDIV ? floor(x / y) : fmod(x, y));
    return true;
  case OP_POW:
    if (x == 0.0 && y < 0.0) {
      *err = "zero raised to a negative power in a compile-time expression";
      return false;
    }
    *out = fa_const_float(pow(x, y));
    return true;
  default:
    *err = "operator not defined on floats";
    return false;
  }
}

static bool fold_int(OpKind op, FaConst a, FaConst b, FaConst *out, const char **err) {
  int64_t x = a.i, y = b.i, r = 0;
  bool both_bool = a.kind == CK_BOOL && b.kind == CK_BOOL;
  switch (op) {
  case OP_ADD:
    if (__builtin_add_overflow(x, y, &r))
      goto overflow;
    break;
  case OP_SUB:
    if (__builtin_sub_overflow(x, y, &r))
      goto overflow;
    break;
  case OP_MUL:
    if (__builtin_mul_overflow(x, y, &r))
      goto overflow;
    break;
  case OP_DIV:
    if (y == 0)
      goto divzero;
    *out = fa_const_float((double)x / (double)y);
    return true;
  case OP_FLOORDIV:
  case OP_MOD:
    if (y == 0)
      goto divzero;
    if (x == INT64_MIN && y == -1)
      goto overflow;
    r = op == OP_FLOORDIV ? x / y : x % y;
    break;
  case OP_POW:
    if (y < 0) {
      if (x == 0) {
        *err = "zero raised to a negative power in a compile-time expression";
        return false;
      }
      *out = fa_const_float(pow((double)x, (double)y));
      return true;
    }
    if (!int_pow(x, y, &r))
      goto overflow;
    break;
  case OP_SHL:
  case OP_SHR:
    if (y < 0 || y > 63) {
      *err = "shift count out of range in a compile-time expression";
      return false;
    }
    if (op == OP_SHR) {
      r = x >> y;
    } else {
      if (x != 0 && (y >= 63 || (x > 0 ? x > (INT64_MAX >> y) : x < (INT64_MIN >> y))))
        goto overflow;
      r = (int64_t)((uint64_t)x << y);
    }
    break;
  case OP_BITAND: r = x & y; break;
  case OP_BITOR: r = x | y; break;
  case OP_BITXOR: r = x ^ y; break;
  default:
    *err = "operator not defined on integers";
    return false;
  }
  if (both_bool && (op == OP_BITAND || op == OP_BITOR || op == OP_BITXOR))
    *out = fa_const_bool(r != 0);
  else
    *out = fa_const_int(r);
  return true;
overflow:
  *err = "integer overflow in a compile-time expression";
  return false;
divzero:
  *err = "division by zero in a compile-time expression";
  return false;
}

bool fa_const_binary(OpKind op, FaConst a, FaConst b, FaConst *out, const char **err) {
  switch (op) {
  case OP_AND:
    *out = fa_const_truth(a) ? b : a;
    return true;
  case OP_OR:
    *out = fa_const_truth(a) ? a : b;
    return true;
  case OP_LT: case OP_LE: case OP_GT: case OP_GE: case OP_EQ: case OP_NE:
    return fold_compare(op, a, b, out, err);
  case OP_MATMUL:
    *err = "'@' is not defined on compile-time values";
    return false;
  default:
    break;
  }
  if (!fa_const_is_number(a) || !fa_const_is_number(b)) {
    *err = "arithmetic needs numbers";
    return false;
  }
  if (a.kind == CK_FLOAT || b.kind == CK_FLOAT) {
    if (op == OP_SHL || op == OP_SHR || op == OP_BITAND || op == OP_BITOR || op == OP_BITXOR) {
      *err = "bitwise operators need integer operands";
      return false;
    }
    return fold_float(op, fa_const_as_double(a), fa_const_as_double(b), out, err);
  }
  return fold_int(op, a, b, out, err);
}

bool fa_const_cdiv(FaConst a, FaConst b, FaConst *out, const char **err) {
  if ((a.kind != CK_INT && a.kind != CK_BOOL) || (b.kind != CK_INT && b.kind != CK_BOOL)) {
    *err = "cdiv() needs integer arguments";
    return false;
  }
  if (b.i == 0) {
    *err = "division by zero in a compile-time expression";
    return false;
  }
  int64_t t;
  if (__builtin_add_overflow(a.i, b.i - 1, &t)) {
    *err = "integer overflow in a compile-time expression";
    return false;
  }
  *out = fa_const_int(t / b.i);
  return true;
}

/* ---- text form ----------------------------------------------------------------- */

static bool parse_int(const char *s, int64_t *out) {
  bool neg = false;
  if (*s == '-' || *s == '+')
    neg = *s++ == '-';
  int base = 10;
  if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X'))
    base = 16, s += 2;
  else if (s[0] == '0' && (s[1] == 'b' || s[1] == 'B'))
    base = 2, s += 2;
  else if (s[0] == '0' && (s[1] == 'o' || s[1] == 'O'))
    base = 8, s += 2;
  if (!*s)
    return false;
  uint64_t v = 0;
  for (; *s; s++) {
    if (*s == '_')
      continue;
    int d = isdigit((unsigned char)*s) ? *s - '0'
            : isxdigit((unsigned char)*s) ? tolower((unsigned char)*s) - 'a' + 10
                                          : 99;
    if (d >= base)
      return false;
    if (v > (UINT64_MAX - (uint64_t)d) / (uint64_t)base)
      return false;
    v = v * (uint64_t)base + (uint64_t)d;
  }
  if (neg ? v > (uint64_t)INT64_MAX + 1 : v > (uint64_t)INT64_MAX)
    return false;
  *out = neg ? (int64_t)(0 - v) : (int64_t)v;
  return true;
}

bool fa_const_parse(const char *text, FaConst *out) {
  if (!text || !*text)
    return false;
  if (!strcmp(text, "True") || !strcmp(text, "False")) {
    *out = fa_const_bool(text[0] == 'T');
    return true;
  }
  if (!strcmp(text, "None")) {
    *out = fa_const_none();
    return true;
  }
  DType dt = fa_dtype_from_name(text);
  if (dt != DT_VOID) {
    *out = fa_const_dtype(dt);
    return true;
  }
  int64_t iv;
  if (parse_int(text, &iv)) {
    *out = fa_const_int(iv);
    return true;
  }
  /* a float needs a point or an exponent (or is inf / nan): an integer that
   * does not fit int64 is not quietly read as a float */
  const char *body = text + (text[0] == '-' || text[0] == '+');
  bool special = !strcmp(body, "inf") || !strcmp(body, "nan");
  if (!special && !strpbrk(text, ".eE"))
    return false;
  char *end;
  errno = 0;
  double d = strtod(text, &end);
  if (end != text && *end == '\0' && errno != ERANGE && (special || isdigit((unsigned char)body[0]) || body[0] == '.')) {
    *out = fa_const_float(d);
    return true;
  }
  return false;
}

void fa_const_print(FaConst c, StrBuf *out) {
  switch (c.kind) {
  case CK_NONE: fa_sb_puts(out, "None"); break;
  case CK_INT: fa_sb_printf(out, "%lld", (long long)c.i); break;
  case CK_BOOL: fa_sb_puts(out, c.i ? "True" : "False"); break;
  case CK_DTYPE: fa_sb_puts(out, fa_dtype_name(c.dtype)); break;
  case CK_STR: fa_sb_printf(out, "\"%s\"", c.s ? c.s : ""); break;
  case CK_FLOAT:
    if (isnan(c.f)) {
      fa_sb_puts(out, "nan");
    } else if (isinf(c.f)) {
      fa_sb_puts(out, c.f < 0 ? "-inf" : "inf");
    } else {
      char buf[64];
      snprintf(buf, sizeof buf, "%.17g", c.f);
      /* shortest spelling that reads back the same */
      for (int prec = 1; prec < 17; prec++) {
        char t[64];
        snprintf(t, sizeof t, "%.*g", prec, c.f);
        if (strtod(t, NULL) == c.f) {
          memcpy(buf, t, sizeof t);
          break;
        }
      }
      fa_sb_puts(out, buf);
      if (!strpbrk(buf, ".eE"))
        fa_sb_puts(out, ".0");
    }
    break;
  }
}

void fa_bindings_print(const FaBinding *b, int n, StrBuf *out) {
  for (int i = 0; i < n; i++) {
    fa_sb_printf(out, "%s%s=", out->len ? " " : "", b[i].name);
    fa_const_print(b[i].value, out);
  }
}

bool fa_eval_const(FaCompiler *fc, const FaProgram *p, const Node *expr, const FaBinding *binds, int nbinds,
                   FaConst *out) {
  int n = 0;
  return fa_lower_eval_const(fc, p, p ? p->module : NULL, expr, binds, nbinds, out, 1, &n);
}

int fa_eval_const_tuple(FaCompiler *fc, const FaProgram *p, const Node *expr, const FaBinding *binds, int nbinds,
                        FaConst *out, int nmax) {
  int n = 0;
  if (!fa_lower_eval_const(fc, p, p ? p->module : NULL, expr, binds, nbinds, out, nmax, &n))
    return -1;
  return n;
}
