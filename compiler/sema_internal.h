/* sema_internal.h - declarations shared by the middle of the compiler:
 * sema.c (program check), types.c (dtype and shape rules), consteval.c
 * (compile-time values) and lower.c (specialisation, inlining, lowering).
 * Nothing here is part of a contract with other stages; see sema.h for that.
 */
#ifndef FADSL_SEMA_INTERNAL_H
#define FADSL_SEMA_INTERNAL_H

#include "sema.h"

/* The largest block the language accepts (elements), as Triton's limit. */
enum { FA_MAX_BLOCK_NUMEL = 1 << 20 };
/* How deeply helpers may be inlined into each other. */
enum { FA_MAX_INLINE_DEPTH = 64 };

/* ---- types.c: dtype promotion and broadcasting ---------------------------- */

/* What an operator needs from promotion. */
typedef enum FaOpClass {
  OPC_ARITH,      /* + - * ** maximum minimum where: bool promotes to i32 */
  OPC_TRUEDIV,    /* /: ints give f32; f16/bf16 compute in f32 */
  OPC_FLOORMOD,   /* // %: f16/bf16 compute in f32 */
  OPC_BITWISE,    /* & | ^ << >>: integers (bool stays i1) */
  OPC_COMPARE,    /* < <= > >= == !=: common dtype of the operands, bool stays i1 */
  OPC_SELECT,     /* where(c, a, b): common dtype of a and b, bool stays i1 */
} FaOpClass;

bool fa_is_pow2(int64_t n);
/* The dtype a literal of kind k gets when it must become a runtime value on
 * its own: int -> i32 (i64 when it does not fit), float -> f32, bool -> i1. */
DType fa_const_default_dtype(FaConst c);
/* Common dtype of a binary operation.  `aw` / `bw` are CK_INT, CK_FLOAT or
 * CK_BOOL for an operand that is a literal (compile-time) value and adapts
 * to the other operand, CK_NONE for a typed runtime value.  `aval` / `bval`
 * are the literal values (used to widen an integer literal that does not fit
 * i32).  Returns DT_VOID when the operation is not defined on those dtypes. */
DType fa_promote(FaOpClass cls, DType a, FaConstKind aw, const FaConst *aval, DType b, FaConstKind bw,
                 const FaConst *bval);
/* numpy broadcasting of two shapes; false when they are incompatible. */
bool fa_broadcast_shapes(int ra, const int *sa, int rb, const int *sb, int *rank, int *shape);
/* "f16[64,64]" etc., allocated in the arena. */
const char *fa_type_str(Arena *a, IrType t);
const char *fa_shape_str(Arena *a, int rank, const int *shape);
/* Whether a value of dtype `from` fits `to` without changing (int literals). */
bool fa_int_fits(int64_t v, DType to);

/* ---- consteval.c: compile-time values -------------------------------------- */

FaConst fa_const_int(int64_t v);
FaConst fa_const_float(double v);
FaConst fa_const_bool(bool v);
FaConst fa_const_dtype(DType dt);
FaConst fa_const_none(void);
bool fa_const_is_number(FaConst c);   /* int, float or bool */
double fa_const_as_double(FaConst c);
bool fa_const_equal(FaConst a, FaConst b);
/* Python truthiness of a compile-time value. */
bool fa_const_truth(FaConst c);
const char *fa_const_kind_name(FaConstKind k);
/* Folds a unary / binary operator on compile-time values.  On failure
 * returns false and sets *err to a message (e.g. "division by zero"). */
bool fa_const_unary(OpKind op, FaConst a, FaConst *out, const char **err);
bool fa_const_binary(OpKind op, FaConst a, FaConst b, FaConst *out, const char **err);
/* cdiv(a, b) on integers (b > 0 not required; truncating like the runtime). */
bool fa_const_cdiv(FaConst a, FaConst b, FaConst *out, const char **err);

/* ---- lower.c: the evaluator shared by the program check and fa_eval_const ---- */

/* Evaluates `expr` at compile time with the module's constants and the given
 * bindings in scope.  `nmax` > 1 accepts a tuple of up to nmax values; the
 * count is returned through *nout.  Reports errors (located) and returns
 * false. */
bool fa_lower_eval_const(FaCompiler *fc, const FaProgram *p, const Node *module, const Node *expr,
                         const FaBinding *binds, int nbinds, FaConst *out, int nmax, int *nout);

/* Evaluates the module-level constant definitions, reporting errors. */
bool fa_lower_check_module(FaCompiler *fc, const FaProgram *p, const Node *module);

/* ---- sema.c helpers used by lower.c ----------------------------------------- */

/* Looks a helper, kernel or problem up by name; NULL when none. */
const Node *fa_program_function(const FaProgram *p, const char *name);
/* Whether `name` is a builtin function of device code (program_id, load, ...). */
bool fa_is_builtin_name(const char *name);

/* A builtin's parameters, from the table in lower.c: positional order and
 * keyword names, how many are required, and whether it also takes any number
 * of positional arguments without keywords (max(a, b, c)). */
typedef struct FaBuiltinSignature {
  const char *const *params;
  int nparams;
  int nreq;
  bool variadic;
  int vararg;               /* > 0: positional arguments from this one on are gathered into it */
} FaBuiltinSignature;
bool fa_builtin_signature(const char *name, FaBuiltinSignature *out);
/* Whether x.NAME(...) is the builtin NAME(x, ...) (x.sum(axis=1)). */
bool fa_builtin_is_method(const char *name);

/* ---- check_calls.c: the calls of the unspecialised program ------------------- */

/* Checks every call in `body` (statements) or `expr` (one expression; either
 * may be NULL) against the signature of what it calls: a builtin (by its
 * table), a dtype conversion, a helper (by its parameters) or, with
 * `launches`, a kernel (by its parameters, as a @problem launches it).
 * Unknown keywords, a keyword that repeats a positional argument, too many
 * arguments and missing required ones are reported, located at the call or
 * the keyword.  Names in `locals` and `consts` (variables, parameters,
 * module constants) shadow functions and are not checked.  Returns false
 * when it reported errors. */
bool fa_check_calls(FaCompiler *fc, const FaProgram *p, const PtrVec *locals, const PtrVec *consts,
                    const NodeList *body, const Node *expr, bool launches);

#endif
