/* ir.h - the tile IR: the single input of the CPU interpreter and the CUDA
 * emitter.
 *
 * A specialised kernel is an IrFunction: SSA values over scalars and blocks
 * (tensors of static, power-of-two shape), organised in regions with
 * structured control flow (IR_FOR, IR_WHILE, IR_IF, each region ending in
 * IR_YIELD; the region of IR_SCAN and IR_REDUCE_FN is a combine function).
 * Every constexpr has been substituted, every helper inlined, and every
 * implicit conversion made explicit: the operands of an elementwise op have
 * the same dtype and shape (lower.c inserts IR_CAST, IR_SPLAT, IR_BROADCAST,
 * IR_EXPAND_DIMS), so a backend never re-derives typing rules.
 *
 * Each value carries its source location and a slot for a layout (which
 * thread holds which element), filled by the CUDA backend's layout pass; the
 * interpreter ignores it.
 */
#ifndef FADSL_IR_H
#define FADSL_IR_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "diag.h"
#include "util.h"

enum { FA_MAX_RANK = 4 };

typedef enum DType {
  DT_VOID,
  DT_I1,        /* bool */
  DT_I8,
  DT_I16,
  DT_I32,
  DT_I64,
  DT_U32,
  DT_F16,
  DT_BF16,
  DT_F32,
  DT_F64,
  DT_PTR,       /* pointer; IrType.pointee says to what */
  DT_BLOCKPTR,  /* block pointer (make_block_ptr); IrType.pointee = element dtype */
  DT_COUNT
} DType;

const char *fa_dtype_name(DType dt);       /* "f16", "i32", ... ("ptr", "blockptr") */
DType fa_dtype_from_name(const char *name); /* DT_VOID when unknown; accepts "bool" for i1 */
int fa_dtype_size(DType dt);               /* bytes in memory; i1 is stored as 1 byte */
bool fa_dtype_is_float(DType dt);
bool fa_dtype_is_int(DType dt);            /* i1 included */
int fa_dtype_bits(DType dt);               /* integer width: 1 for i1, 8 ... 64; 0 for the others */

typedef struct IrType {
  DType dtype;                  /* element dtype */
  DType pointee;                /* for DT_PTR / DT_BLOCKPTR */
  int rank;                     /* 0 = scalar */
  int shape[FA_MAX_RANK];       /* static extents; for DT_BLOCKPTR the block_shape */
} IrType;

IrType fa_type_scalar(DType dt);
IrType fa_type_block(DType dt, int rank, const int *shape);
IrType fa_type_ptr(DType pointee, int rank, const int *shape);   /* rank 0: a plain pointer */
IrType fa_type_blockptr(DType pointee, int rank, const int *block_shape);
bool fa_type_equal(IrType a, IrType b);
int64_t fa_type_numel(IrType t);            /* product of the shape; 1 for scalars */
/* Writes e.g. "f32[64,128]", "ptr<f16>", "blockptr<f16>[64,64]". */
void fa_type_print(IrType t, StrBuf *out);

typedef struct IrOp IrOp;
typedef struct IrRegion IrRegion;
typedef struct IrFunction IrFunction;
struct FaLayout;              /* defined by the CUDA backend (layout.h) */

typedef struct IrValue {
  int id;                     /* unique within its function; %id in dumps */
  IrType type;
  SrcLoc loc;
  const char *name;           /* source variable name, a hint for dumps and emitted code */
  IrOp *def;                  /* defining op; NULL for parameters and region arguments */
  IrRegion *region;           /* for region arguments: the region they belong to */
  struct FaLayout *layout;    /* set by the layout pass; NULL before */
  void *aux;                  /* scratch for the pass or backend at hand */
} IrValue;

typedef enum IrOpKind {
  IR_CONST,         /* -> scalar or block (splatted) constant: ival for int/bool dtypes, fval for floats */
  IR_PROGRAM_ID,    /* axis -> i32 */
  IR_NUM_PROGRAMS,  /* axis -> i32 */
  IR_ARANGE,        /* ival = start, ival2 = end -> i32[end - start] */
  IR_SPLAT,         /* scalar -> block of the result's shape */
  IR_BROADCAST,     /* block -> block of the result's shape (size-1 dims stretched) */
  IR_EXPAND_DIMS,   /* axis: insert a size-1 dim (x[:, None]) */
  IR_RESHAPE,       /* same element count, new shape */
  IR_TRANS,         /* perm[]: permute dims (trans() on 2-D: perm = {1, 0}) */
  IR_CAST,          /* -> result dtype (float<->float rounds to nearest even, float->int truncates) */
  IR_UNARY,         /* sub = IrUnaryOp */
  IR_BINARY,        /* sub = IrBinaryOp; operands of equal type */
  IR_CMP,           /* sub = IrCmpOp -> i1 of the operands' shape */
  IR_SELECT,        /* where(cond, a, b): cond i1, a and b of the result type */
  IR_REDUCE,        /* sub = IrReduceOp, axis; result drops that dim (rank-1 -> scalar) */
  IR_DOT,           /* a[M,K], b[K,N] (, acc[M,N]) -> out dtype [M,N]; sub = IrDotPrecision */
  IR_PTR_ADD,       /* pointer (scalar or block) + i32/i64 offsets (same shape) -> pointer */
  IR_LOAD,          /* ptrs (, mask (, other)) -> values; masked-off lanes give other (0 if absent) */
  IR_STORE,         /* ptrs, value (, mask) */
  IR_ATOMIC_ADD,    /* ptrs, value (, mask) -> previous values */
  IR_MAKE_BLOCK_PTR,/* base, shape[r] (i64), strides[r] (i64), offsets[r] (i32); order[] attr;
                       block shape in the result type */
  IR_ADVANCE,       /* bptr, offsets[r] (i32) -> bptr */
  IR_LOAD_BLOCK,    /* bptr; boundary (bit i: check axis i), padding -> block */
  IR_STORE_BLOCK,   /* bptr, value; boundary */
  IR_FOR,           /* lb, ub, step (i32 scalars), inits...; regions[0] args: (iv, iters...);
                       results: the final iters.  Runs for (iv = lb; iv < ub; iv += step). */
  IR_IF,            /* cond (i1 scalar); regions[0] then, regions[1] else; results */
  IR_YIELD,         /* terminator of a FOR/IF region: operands are the region's results */
  IR_RETURN,        /* terminator of a function's body: operands are its results (host functions) */
  IR_ASSERT,        /* device-side check: cond (i1 scalar or block); str = message */
  IR_FMA,           /* fma(a, b, c) = a * b + c, rounded once (floats); operands of the result type */
  IR_SCAN,          /* inclusive scan of n blocks of one shape along `axis` (ival = 1: reverse, i.e. from
                       the last element towards the first); regions[0] combines two tuples: args
                       (a_0..a_n-1, b_0..b_n-1) scalars of the operands' dtypes, a the earlier part of
                       the scan, b the later, yielding n scalars; results: n blocks of the operands' types.
                       The region is closed: it uses only its arguments and values it defines. */
  IR_REDUCE_FN,     /* reduction of n blocks of one shape along `axis` with a combine region (as IR_SCAN's,
                       in index order); results: n values of the operands' dtypes, the axis dropped */
  IR_RAND,          /* sub = IrRandKind: seed (i64 scalar), offsets (i32 scalar or block) -> f32 of the
                       offsets' shape; ival = Philox rounds (see interp.h for the exact numerics) */
  IR_PRINT,         /* device_print: str = prefix, ival = 1 for hex; operands scalars or blocks (all blocks
                       of one shape) */
  IR_WHILE,         /* inits...; regions[0] (cond) args (iters...) yields one i1 scalar; regions[1] (body)
                       args (iters...) yields the next iters; results: the iters when cond is false.
                       Runs: iters = inits; while (cond(iters)) iters = body(iters). */
  IR_ATOMIC_ADD_BLOCK, /* bptr, value; boundary: atomic_add through a block pointer, each element added
                       into memory (a reduce-store: no result); the elements of one op may be added in
                       any order relative to other programs' */
  IR_OP_COUNT
} IrOpKind;

typedef enum IrUnaryOp {
  UN_NEG, UN_NOT /* logical, i1 */, UN_INVERT /* bitwise */, UN_ABS,
  UN_EXP, UN_EXP2, UN_LOG, UN_LOG2, UN_SQRT, UN_RSQRT,
  UN_SIN, UN_COS, UN_FLOOR, UN_CEIL, UN_SIGMOID, UN_TANH, UN_TANH_APPROX, UN_ERF,
} IrUnaryOp;

typedef enum IrBinaryOp {
  BIN_ADD, BIN_SUB, BIN_MUL,
  BIN_DIV,          /* floats: true division; ints: truncating (C) division */
  BIN_MOD,          /* ints: C remainder (sign of the dividend); floats: fmod */
  BIN_MAX, BIN_MIN, /* maximum / minimum; NaN-propagating for floats */
  BIN_AND, BIN_OR, BIN_XOR, BIN_SHL, BIN_SHR,
  BIN_POW,
  BIN_MAXNUM, BIN_MINNUM, /* floats: IEEE maxNum / minNum (a NaN operand gives the other operand) */
} IrBinaryOp;

typedef enum IrCmpOp { CMP_LT, CMP_LE, CMP_GT, CMP_GE, CMP_EQ, CMP_NE } IrCmpOp;
typedef enum IrReduceOp { RED_SUM, RED_MAX, RED_MIN } IrReduceOp;
typedef enum IrDotPrecision { DOT_DEFAULT, DOT_IEEE, DOT_TF32 } IrDotPrecision;
typedef enum IrPadding { PAD_NONE, PAD_ZERO, PAD_NAN } IrPadding;
typedef enum IrRandKind { RAND_UNIFORM, RAND_NORMAL } IrRandKind;

struct IrOp {
  IrOpKind kind;
  int sub;                    /* IrUnaryOp / IrBinaryOp / IrCmpOp / IrReduceOp / IrDotPrecision / IrRandKind */
  SrcLoc loc;
  IrValue **operands;
  int noperands;
  IrValue **results;
  int nresults;
  IrRegion *regions[2];
  int nregions;
  /* attributes (meaning per kind, see IrOpKind) */
  int axis;
  int64_t ival, ival2;
  double fval;
  int perm[FA_MAX_RANK];      /* IR_TRANS permutation; IR_MAKE_BLOCK_PTR order */
  unsigned boundary;
  IrPadding padding;
  const char *str;
  /* position */
  IrRegion *parent;
  IrOp *prev, *next;
  void *aux;                  /* scratch for the pass or backend at hand */
};

struct IrRegion {
  IrValue **args;
  int nargs;
  IrOp *first, *last;         /* ends in IR_YIELD or IR_RETURN */
  IrOp *parent_op;            /* NULL for a function's body */
};

/* A runtime parameter of a specialised kernel (constexprs are gone). */
typedef struct IrParam {
  const char *name;
  int source_index;           /* position in the source signature */
  IrValue *value;             /* scalar or pointer (rank 0) */
  int extent_rank;            /* pointers: dims declared as *T[d0, d1, ...]; 0 if none */
} IrParam;

struct IrFunction {
  const char *name;
  SrcLoc loc;
  IrParam *params;
  int nparams;
  IrRegion *body;
  int next_value_id;
  Arena *arena;               /* where its nodes live (the FaCompiler's) */
};

/* A specialised kernel: the device function plus two host-side functions of
 * the same parameters, which the runtime and the interpreter evaluate with
 * the interpreter before a launch:
 *   grid:    returns 3 i32 values (grid x, y, z; missing dims are 1);
 *   extents: returns, for each pointer parameter with extent_rank > 0, in
 *            parameter order, its extent_rank dims as i64 (NULL when no
 *            parameter declares an extent). */
typedef struct IrKernel {
  IrFunction *device;
  IrFunction *grid;
  IrFunction *extents;
  int warps;                  /* threads per program = 32 * warps */
  int stages;                 /* software pipelining depth hint */
  int pipeline;               /* how loads feeding products are pipelined (FaPipelineKind, cuda_backend.h) */
  int schedule;               /* how programs map onto thread blocks (FaScheduleKind, cuda_backend.h) */
} IrKernel;

/* ---- building ---------------------------------------------------------------
 * A builder appends ops at the end of a region.  Functions return NULL only
 * when the arena is out of memory.
 */
typedef struct IrBuilder {
  IrFunction *fn;
  IrRegion *region;           /* insertion point: the end of this region */
} IrBuilder;

IrFunction *fa_ir_function_new(Arena *arena, const char *name, SrcLoc loc);
IrParam *fa_ir_add_param(IrFunction *fn, const char *name, IrType type, int source_index, SrcLoc loc);
IrRegion *fa_ir_region_new(IrFunction *fn);
IrValue *fa_ir_region_add_arg(IrFunction *fn, IrRegion *r, IrType type, const char *name, SrcLoc loc);
IrValue *fa_ir_value_new(IrFunction *fn, IrType type, SrcLoc loc);

/* Creates an op with the given operands and result types and appends it at
 * the builder's insertion point. */
IrOp *fa_ir_op(IrBuilder *b, IrOpKind kind, SrcLoc loc, IrValue **operands, int noperands,
               const IrType *result_types, int nresults);
/* Convenience for single-result ops; returns the result. */
IrValue *fa_ir_op1(IrBuilder *b, IrOpKind kind, int sub, SrcLoc loc, IrType type,
                   IrValue **operands, int noperands);
IrValue *fa_ir_const_int(IrBuilder *b, SrcLoc loc, IrType type, int64_t v);
IrValue *fa_ir_const_float(IrBuilder *b, SrcLoc loc, IrType type, double v);

/* ---- inspecting ------------------------------------------------------------------ */

/* The value of an integer scalar that is a constant, seen through integer
 * casts; false when it is not one. */
bool fa_ir_const_int_value(const IrValue *v, int64_t *out);

/* Prints the function in the textual form of `fadslc --emit=ir`. */
void fa_ir_print(const IrFunction *fn, StrBuf *out);
void fa_ir_print_kernel(const IrKernel *k, StrBuf *out);
const char *fa_ir_op_name(IrOpKind kind);

/* Checks the invariants above (types of operands and results, terminators,
 * dominance of definitions over uses in structured regions).  Reports
 * violations as errors (they are compiler bugs) and returns false. */
bool fa_ir_verify(const IrFunction *fn, Diag *diag);

#endif
