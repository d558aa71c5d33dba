/* cuda_loader.h - the CUDA driver and NVRTC, loaded with dlopen on first use.
 *
 * libfadsl is never linked against libcuda or libnvrtc, so that every tool
 * starts where there is no GPU (compile, emit, interpret) and only a launch
 * there fails, with a message instead of a crash.  The function tables use
 * the types of the CUDA headers, and each entry resolves exactly the symbol
 * the headers' version macros name (cuMemAlloc -> cuMemAlloc_v2, ...), the
 * same binding an ordinary link against libcuda would make.
 *
 * A FaCudaLoader belongs to one runtime context; it holds the dlopen
 * handles (dlclose'd by fa_loader_free) and is safe to use from several
 * threads. */
#ifndef FADSL_RT_CUDA_LOADER_H
#define FADSL_RT_CUDA_LOADER_H

#include <cuda.h>
#include <nvrtc.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

/* Driver entry points: X(name, fallback symbol or NULL, optional).  `name`
 * goes through the header's macros, so a field declared as cuMemAlloc is
 * really cuMemAlloc_v2 with cuMemAlloc_v2's type, and the symbol looked up
 * is "cuMemAlloc_v2". */
#define FA_DRIVER_FUNCS(X)                                    \
  X(cuInit, NULL, false)                                      \
  X(cuDriverGetVersion, NULL, false)                          \
  X(cuGetErrorName, NULL, false)                              \
  X(cuGetErrorString, NULL, false)                            \
  X(cuDeviceGetCount, NULL, false)                            \
  X(cuDeviceGet, NULL, false)                                 \
  X(cuDeviceGetName, NULL, false)                             \
  X(cuDeviceGetAttribute, NULL, false)                        \
  X(cuDeviceTotalMem, NULL, false)                            \
  X(cuDevicePrimaryCtxRetain, NULL, false)                    \
  X(cuDevicePrimaryCtxRelease, NULL, false)                   \
  X(cuCtxPushCurrent, NULL, false)                            \
  X(cuCtxPopCurrent, NULL, false)                             \
  X(cuCtxSynchronize, NULL, false)                            \
  X(cuModuleLoadData, NULL, false)                            \
  X(cuModuleUnload, NULL, false)                              \
  X(cuModuleGetFunction, NULL, false)                         \
  X(cuFuncGetAttribute, NULL, false)                          \
  X(cuFuncSetAttribute, NULL, false)                          \
  X(cuLaunchKernel, NULL, false)                              \
  X(cuMemAlloc, NULL, false)                                  \
  X(cuMemFree, NULL, false)                                   \
  X(cuMemcpyHtoD, NULL, false)                                \
  X(cuMemcpyDtoH, NULL, false)                                \
  X(cuMemsetD8, NULL, false)                                  \
  X(cuMemsetD32Async, NULL, true)                             \
  X(cuMemGetInfo, NULL, false)                                \
  X(cuMemGetAddressRange, NULL, false)                        \
  X(cuStreamSynchronize, NULL, false)                         \
  X(cuEventCreate, NULL, false)                               \
  X(cuEventDestroy, NULL, false)                              \
  X(cuEventRecord, NULL, false)                               \
  X(cuEventSynchronize, NULL, false)                          \
  X(cuEventQuery, NULL, true)                                 \
  X(cuEventElapsedTime, "cuEventElapsedTime", false)          \
  X(cuTensorMapEncodeTiled, NULL, true)                       \
  X(cuOccupancyMaxActiveBlocksPerMultiprocessor, NULL, true)

#define FA_NVRTC_FUNCS(X)                                     \
  X(nvrtcVersion, NULL, false)                                \
  X(nvrtcGetErrorString, NULL, false)                         \
  X(nvrtcCreateProgram, NULL, false)                          \
  X(nvrtcDestroyProgram, NULL, false)                         \
  X(nvrtcCompileProgram, NULL, false)                         \
  X(nvrtcGetPTXSize, NULL, false)                             \
  X(nvrtcGetPTX, NULL, false)                                 \
  X(nvrtcGetCUBINSize, NULL, false)                           \
  X(nvrtcGetCUBIN, NULL, false)                               \
  X(nvrtcGetProgramLogSize, NULL, false)                      \
  X(nvrtcGetProgramLog, NULL, false)                          \
  X(nvrtcGetNumSupportedArchs, NULL, true)                    \
  X(nvrtcGetSupportedArchs, NULL, true)

#define FA_API_FIELD(name, fallback, optional) __typeof__(&name) name;

typedef struct FaDriverApi {
  FA_DRIVER_FUNCS(FA_API_FIELD)
  int version;                  /* cuDriverGetVersion, e.g. 13000 */
  char file[512];               /* the file it was loaded from (dladdr), or what was asked for */
} FaDriverApi;

typedef struct FaNvrtcApi {
  FA_NVRTC_FUNCS(FA_API_FIELD)
  int major, minor;             /* nvrtcVersion */
  char path[512];               /* the library that was asked for (a soname or a path) */
  char file[512];               /* the file it was loaded from (dladdr) */
} FaNvrtcApi;

enum { FA_LOADER_NO_DRIVER = 1 };   /* behave as if libcuda.so.1 were absent */

typedef enum FaLoadState { FA_LOAD_NOT_TRIED, FA_LOAD_OK, FA_LOAD_FAILED } FaLoadState;

typedef struct FaCudaLoader {
  pthread_mutex_t lock;
  unsigned flags;
  FaLoadState driver_state;
  void *driver_handle;
  FaDriverApi driver;
  bool driver_no_device;        /* loaded, but cuInit said there is no device */
  char driver_error[768];
  FaLoadState nvrtc_state;
  void *nvrtc_handle;
  FaNvrtcApi nvrtc;
  char nvrtc_error[1536];
} FaCudaLoader;

/* flags: FA_LOADER_NO_DRIVER, or 0; FADSL_NO_DRIVER=1 in the environment
 * sets it too. */
void fa_loader_init(FaCudaLoader *l, unsigned flags);
void fa_loader_free(FaCudaLoader *l);

/* Loads libcuda ($FADSL_CUDA_DRIVER_PATH if set, else libcuda.so.1, then
 * libcuda.so), resolves the table and
 * calls cuInit(0), once.  Returns the table, or NULL with *error set to a
 * message that stays valid until fa_loader_free: "no CUDA driver found
 * (libcuda.so.1 could not be loaded: ...)" when the library is missing. *no_device
 * (may be NULL) tells a driver that loaded but reports no device. */
const FaDriverApi *fa_loader_driver(FaCudaLoader *l, const char **error, bool *no_device);

/* Loads libnvrtc: $FADSL_NVRTC_PATH if set (a file or a directory), else
 * libnvrtc.so.13, .so.12, .so from the loader's search path, then the same
 * names under $CUDA_HOME/lib64, FADSL_CUDA_DIR/lib64 and FADSL_CUDA_DIR/lib. */
const FaNvrtcApi *fa_loader_nvrtc(FaCudaLoader *l, const char **error);

/* "CUDA_ERROR_OUT_OF_MEMORY (out of memory)" into buf; returns buf. */
const char *fa_cuda_error_text(const FaDriverApi *d, CUresult r, char *buf, size_t size);

#endif
