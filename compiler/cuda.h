/* cuda.h - the CUDA backend: layout assignment (layout.c) and the CUDA C++
 * emitter (emit_cuda.c) for a specialised IrKernel, and the device-side tile
 * library that the emitted code includes.
 *
 * The emitted translation unit is self-contained: it includes only
 * "fadsl_device.cuh" (the tile library, handed to NVRTC as an embedded
 * header), never the CUDA toolkit's headers, so that a machine with only the
 * driver and libnvrtc can compile it.
 */
#ifndef FADSL_CUDA_H
#define FADSL_CUDA_H

#include "ast.h"
#include "ir.h"

typedef struct FaCudaTarget {
  int sm;                   /* compute capability * 10: 80, 86, 89, 90 ... */
  bool arch_specific;       /* sm_90a: wgmma, setmaxnreg (only with sm == 90) */
} FaCudaTarget;

/* "sm_80" / "sm_90a" -> target; false when not understood. */
bool fa_cuda_target_parse(const char *arch, FaCudaTarget *out);
/* Writes the NVRTC -arch value, e.g. "sm_90a". */
void fa_cuda_target_name(FaCudaTarget t, char *buf, size_t size);

/* How one kernel argument is passed to cuLaunchKernel. */
typedef enum FaCudaArgKind {
  CUDA_ARG_POINTER,         /* device pointer, 8 bytes: IrFunction param `param` */
  CUDA_ARG_SCALAR,          /* scalar of dtype `dtype`: IrFunction param `param` */
  CUDA_ARG_TENSOR_MAP,      /* CUtensorMap (128 bytes, __grid_constant__) built by the
                               runtime for pointer param `param` (TMA) */
} FaCudaArgKind;

typedef struct FaCudaArg {
  FaCudaArgKind kind;
  int param;                /* index into IrKernel.device->params */
  DType dtype;              /* scalar dtype, or the pointee */
  int align;                /* CUDA_ARG_POINTER: the byte alignment the generated code assumes
                               of the pointer (vectorised accesses); a launch must refuse a
                               pointer that is not a multiple of it */
  /* CUDA_ARG_TENSOR_MAP only: the tiled view the kernel expects */
  int rank;
  int64_t box[FA_MAX_RANK];
  int swizzle_bytes;        /* 0, 32, 64 or 128 */
} FaCudaArg;

typedef struct FaCudaKernel {
  char *source;             /* the CUDA C++ translation unit (arena) */
  const char *entry;        /* its extern "C" kernel name */
  int threads;              /* block size: 32 * warps (+ producer warps, if any) */
  size_t shared_bytes;      /* dynamic shared memory to request at launch */
  FaCudaArg *args;          /* the kernel's parameters, in order */
  int nargs;
} FaCudaKernel;

/* Emits one specialised kernel.  Returns false after reporting errors (for
 * constructs the backend cannot lower, with the source location). */
bool fa_emit_cuda(FaCompiler *fc, const IrKernel *k, FaCudaTarget target, FaCudaKernel *out);

/* The device-side tile library: name and text of each embedded header. */
typedef struct FaEmbeddedHeader {
  const char *name;         /* e.g. "fadsl_device.cuh" */
  const char *text;
} FaEmbeddedHeader;
const FaEmbeddedHeader *fa_device_headers(int *count);

#endif
