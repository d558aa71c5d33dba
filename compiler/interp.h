/* interp.h - the CPU interpreter over a specialised kernel's tile IR.
 *
 * It runs the device function of an IrKernel over its whole grid on host
 * memory, one program after another (or on several threads), with the
 * numerics the GPU code has:
 *   - f16 and bf16 values are rounded to their format (round to nearest
 *     even, subnormals kept, overflow to infinity) wherever a value of that
 *     dtype is produced: loads, casts, arithmetic on f16/bf16 operands
 *     (computed in f32, then rounded);
 *   - f32 arithmetic rounds every result to f32; exp2, log2, exp, log, sqrt,
 *     sin, cos, tanh, pow use the C library's f32 functions (tanh_approx
 *     too: the GPU's tanh.approx differs from it by up to about 2^-11);
 *   - dot multiplies operands of their own dtype (f16/bf16 values, or f32;
 *     with precision TF32, f32 operands are first rounded to tf32) and
 *     accumulates in f32 (f64 for f64 operands; integers exactly), adding the
 *     products in the order k = 0 .. K-1 onto the accumulator operand, then
 *     rounds once to the result dtype;
 *   - reductions (sum, max, min) accumulate in f32 for f16/bf16/f32 inputs in
 *     index order and round once to the result dtype; max/min propagate NaN;
 *   - float -> int casts truncate toward zero and saturate (NaN gives 0);
 *     int -> int casts wrap; anything -> i1 is `!= 0`;
 *   - integer arithmetic wraps at the dtype's width; integer division and
 *     remainder are total, as on the GPU (fa::div, fa::mod): x // 0 is 0,
 *     x % 0 is x, MIN // -1 wraps, so lanes that a where() or a mask
 *     discards never fault; shifts by >= the width give 0 (or the sign for
 *     >> of negative signed values);
 *   - block loads: elements outside the tensor on a boundary-checked axis
 *     are the padding (zero, or NaN; without a padding option the GPU leaves
 *     them unspecified, and the interpreter gives NaN for floats and 0 for
 *     integers so that a program depending on them shows it); block stores
 *     drop those elements; pointer loads/stores skip masked-off lanes (a
 *     masked-off load gives `other`, or 0);
 *   - atomic_add adds in the dtype of the memory (rounding f16/bf16) and
 *     returns the previous values; through a block pointer it adds the
 *     elements inside the checked bounds and returns nothing;
 *   - erf is the C library's erff (erf for f64); fma is fmaf (fma for f64),
 *     one rounding, then rounded to f16/bf16; maxnum/minnum ignore a NaN;
 *   - scans apply their combine region element by element in index order
 *     (from the last element for a reverse scan), acc = combine(acc, x[i]);
 *   - rand: Philox 4x32 on the counter (offset, 0, 0, 0) and the key (low and
 *     high 32 bits of the i64 seed), the first word as int32, x < 0 folded to
 *     -x - 1, times 0x1.fffffep-32f in f32 (the GPU gives the same bits);
 *     randn: Box-Muller on the first two words with logf, cosf and sqrtf;
 *   - device_print writes one line per element to the stream set with
 *     fa_interp_set_print (stdout by default), in grid and element order.
 * Memory is only touched through the buffers bound to the kernel's pointer
 * parameters: a pointer is (buffer, element offset) and every access is
 * checked against the buffer (or against its declared extent, when the
 * parameter declares one).  An access outside is an error located at the
 * load or store, e.g.
 *   attention.fa:40:9: error: load out of bounds of buffer 't_q' (element 1234, size 1000)
 * never a stray read or write.
 */
#ifndef FADSL_INTERP_H
#define FADSL_INTERP_H

#include <stdbool.h>
#include <stdint.h>

#include "ast.h"
#include "ir.h"

/* A scalar on the host: an argument or result of a host function, or a
 * scalar kernel argument.  Integer dtypes (and i1) use `i`, float dtypes use
 * `f`.  Pointers may be passed as {DT_PTR, 0}: host functions only compute
 * with scalars. */
typedef struct FaHostValue {
  DType dtype;
  int64_t i;
  double f;
} FaHostValue;

FaHostValue fa_host_int(DType dt, int64_t v);
FaHostValue fa_host_float(DType dt, double v);

/* Evaluates a scalar-only host function (an IrKernel's grid or extents
 * function) on `nargs` arguments, one per parameter of `fn` (converted to
 * each parameter's dtype), and stores its `nresults` results.  Reports
 * errors through fc->diag and returns false. */
bool fa_interp_host_function(FaCompiler *fc, const IrFunction *fn, const FaHostValue *args, int nargs,
                             FaHostValue *results, int nresults);

/* ---- host arrays ------------------------------------------------------------------
 * Conversions the tools share with the interpreter, with its rounding (to
 * nearest even; f16 and bf16 as their 16-bit patterns; i1 as one byte). */
double fa_f16_bits_to_double(uint16_t h);
uint16_t fa_double_to_f16_bits(double x);
double fa_bf16_bits_to_double(uint16_t h);
uint16_t fa_double_to_bf16_bits(double x);
/* Rounds to the value set of a float dtype (identity for f64). */
double fa_round_to_dtype(DType dt, double x);
/* Reads element i of a host array as a double / writes it from a double
 * (rounding to the dtype; float -> int truncates and saturates). */
double fa_host_get(DType dt, const void *data, int64_t i);
void fa_host_set(DType dt, void *data, int64_t i, double v);
/* Converts n elements from one host array to another, element by element
 * through double (exact for every pair of supported dtypes but i64 values
 * beyond 2^53). */
void fa_host_convert(DType from, const void *src, DType to, void *dst, int64_t n);

/* ---- running a kernel ----------------------------------------------------- */

typedef struct FaInterp FaInterp;

/* Prepares to run `k` (which must outlive the FaInterp), after checking its
 * functions with fa_ir_verify.  Returns NULL after reporting invalid IR or
 * running out of memory. */
FaInterp *fa_interp_new(FaCompiler *fc, const IrKernel *k);
void fa_interp_free(FaInterp *in);

/* Index of the runtime parameter called `name` in k->device->params, or -1. */
int fa_interp_param_index(const FaInterp *in, const char *name);

/* Binds host memory to a pointer parameter: `count` elements of `dtype`
 * (f16 and bf16 as their 16-bit patterns, i1 as one byte per element).
 * `dtype` must be the parameter's element dtype.  The memory is the
 * caller's; the interpreter reads and writes it in place during
 * fa_interp_run. */
bool fa_interp_bind_buffer(FaInterp *in, int param, DType dtype, void *data, int64_t count);
/* Binds a scalar parameter; the value is converted to the parameter's dtype
 * (an integer that does not fit is an error). */
bool fa_interp_bind_scalar(FaInterp *in, int param, FaHostValue v);

/* After every scalar is bound: the grid from the kernel's grid function. */
bool fa_interp_grid(FaInterp *in, int64_t grid[3]);
/* After every scalar is bound: for a pointer parameter that declares its
 * extent (*T[d0, d1, ...]), stores its dims (at most FA_MAX_RANK) in dims
 * and returns the rank; returns 0 when it declares none, -1 on error. */
int fa_interp_extent(FaInterp *in, int param, int64_t dims[FA_MAX_RANK]);

typedef struct FaInterpOptions {
  int threads;              /* programs run on this many threads; <= 1: sequentially, in
                               grid order (x fastest).  With threads, atomic_add is made
                               atomic, but programs that store to the same element race. */
  const int64_t *grid;      /* 3 dims to use instead of the kernel's grid function, or NULL */
} FaInterpOptions;

/* Where device_print writes (default, or NULL: stdout). */
void fa_interp_set_print(FaInterp *in, FILE *out);

/* Runs the kernel over its grid.  Every parameter must be bound; a pointer
 * parameter with a declared extent must be bound to at least that many
 * elements (accesses are then checked against the extent).  On an error
 * (out-of-bounds access, failed device assert, unsupported construct) it
 * reports one located error, naming the program, and returns false; memory
 * written before the error stays written. */
bool fa_interp_run(FaInterp *in, const FaInterpOptions *opt);

#endif
