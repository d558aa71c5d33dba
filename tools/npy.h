/* npy.h - reading and writing NumPy .npy files.
 *
 * Supported: format versions 1.0, 2.0 and 3.0 (read) / 1.0 and 2.0 (write);
 * little-endian float16, float32, float64, int32, int64 and bool arrays in C
 * order.  Fortran-ordered arrays, big-endian data and other dtypes are
 * refused with a message saying what the file holds.
 *
 * There is no bf16 in NumPy: fadsl's tools store bf16 data as float32 .npy
 * files (every bf16 value is exactly a float32) and convert to bf16 where a
 * kernel parameter or a --dtype option says so.
 */
#ifndef FADSL_NPY_H
#define FADSL_NPY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ir.h"

enum { FA_NPY_MAX_DIMS = 8 };

typedef struct FaNpy {
  DType dtype;              /* DT_F16, DT_F32, DT_F64, DT_I32, DT_I64 or DT_I1 (bool) */
  int ndim;
  int64_t shape[FA_NPY_MAX_DIMS];
  int64_t count;            /* product of the shape (1 for a 0-d array) */
  void *data;               /* malloc'ed, count elements; f16 as 16-bit patterns, bool as bytes */
} FaNpy;

/* Reads a file.  On failure returns false and writes a message (naming the
 * file) into err. */
bool fa_npy_read(const char *path, FaNpy *out, char *err, size_t errlen);

/* Writes count = product(shape) elements of dtype (one of the dtypes above)
 * in C order.  On failure returns false with a message in err. */
bool fa_npy_write(const char *path, DType dtype, int ndim, const int64_t *shape, const void *data, char *err,
                  size_t errlen);

void fa_npy_free(FaNpy *a);

/* "float16", "float32", ... for messages; NULL for dtypes .npy cannot hold. */
const char *fa_npy_dtype_name(DType dt);

#endif
