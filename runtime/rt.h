/* rt.h - libfadsl's internal structures: the context, programs, kernels,
 * argument sets and compiled specialisations, and the helpers the runtime's
 * files share.  Not installed. */
#ifndef FADSL_RT_H
#define FADSL_RT_H

#include <pthread.h>
#include <stdbool.h>

#include "cache.h"
#include "cuda_loader.h"
#include "fadsl.h"
#include "nvrtc_compile.h"
#include "util.h"

/* ---- the context ---------------------------------------------------------- */

struct fadsl_context {
  int device;                   /* -1: compile only */
  FaCudaLoader loader;
  FaKernelCache cache;
  FaLogSink log;
  char *tune_db;                /* tuning database path, or NULL */
  struct FaTuneCache *tune_cache; /* the database as last read (re-read when the file changes) */
  pthread_mutex_t lock;         /* guards last_error and the device state */
  char *last_error;
  bool nvrtc_reported;          /* FADSL_LOG=info has said which NVRTC is used */
  /* the device, once initialised (fa_rt_device) */
  bool device_ready;
  fadsl_status device_status;   /* outcome of the one initialisation attempt */
  char device_error[768];       /* its message, when it failed */
  const FaDriverApi *drv;
  CUdevice cu_device;
  CUcontext cu_context;         /* the device's retained primary context */
  fadsl_device_info info;
  /* dynamic persistent kernels: a counter of programs taken per stream,
     zeroed before each launch on it (launches on one stream run in order) */
  pthread_mutex_t counter_lock; /* held from a counter's reset to its kernel's launch */
  struct FaTileCounter { void *stream; CUdeviceptr ptr; } *counters;
  int ncounters, counters_cap;
};

/* Records a failure: sets the context's last error and returns `st`. */
fadsl_status fa_rt_fail(fadsl_context *ctx, fadsl_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* For a failed driver call: FADSL_ERROR_CUDA, "WHAT failed: CUDA_ERROR_..." */
fadsl_status fa_rt_cuda_fail(fadsl_context *ctx, CUresult r, const char *what);
/* The last error's message, copied under the context's lock (another
 * thread's failure may free it meanwhile); free it.  NULL when out of memory. */
char *fa_rt_last_error_copy(fadsl_context *ctx);

/* Makes sure the device is usable (driver loaded, primary context retained)
 * and gives the driver table.  Fails with FADSL_ERROR_NO_DEVICE in a
 * compile-only context and FADSL_ERROR_NO_DRIVER without a driver. */
fadsl_status fa_rt_device(fadsl_context *ctx, const FaDriverApi **drv);

/* fa_rt_device + cuCtxPushCurrent of the device's context; every successful
 * enter is followed by fa_rt_leave. */
fadsl_status fa_rt_enter(fadsl_context *ctx, const FaDriverApi **drv);
void fa_rt_leave(fadsl_context *ctx);

/* NVRTC, loaded on first use. */
fadsl_status fa_rt_nvrtc(fadsl_context *ctx, const FaNvrtcApi **api);

/* The NVRTC target for a compute capability: sm_90 -> "sm_90a", else "sm_XY". */
void fa_rt_arch_for_cc(int major, int minor, char *buf, size_t size);

/* ---- compiling CUDA C++ through the cache ------------------------------------ */

typedef struct FaRtBinary {
  unsigned char *cubin;         /* malloc'ed */
  size_t size;
  FaCacheHit hit;               /* where it came from */
  char *log;                    /* ptxas' report (resource usage); "" when NVRTC gave none */
} FaRtBinary;

/* Compiles `source` to a cubin for `arch`, through the memory and disk
 * caches.  The key covers the source, the headers, the options, the arch,
 * the fadsl version and the NVRTC version. */
fadsl_status fa_rt_build_cubin(fadsl_context *ctx, const char *source, const char *name,
                               const char *const *header_names, const char *const *header_texts,
                               int nheaders, const char *arch, FaRtBinary *out);
void fa_rt_binary_free(FaRtBinary *b);

/* A loaded module and its kernel function. */
typedef struct FaRtModule {
  CUmodule module;
  CUfunction function;
  int registers;                /* cuFuncGetAttribute (-1: not known) */
  int local_bytes;
  int static_shared;
} FaRtModule;

/* Loads a cubin on the context's device and finds `entry`; raises the
 * dynamic shared memory limit when shared_bytes exceeds the default 48 KiB
 * (failing clearly when the device cannot give that much). */
fadsl_status fa_rt_module_load(fadsl_context *ctx, const unsigned char *cubin, const char *entry,
                               size_t shared_bytes, FaRtModule *out);
void fa_rt_module_unload(fadsl_context *ctx, FaRtModule *m);

/* cuLaunchKernel with the context's device current. */
fadsl_status fa_rt_launch_raw(fadsl_context *ctx, const FaRtModule *m, const unsigned grid[3],
                              unsigned threads, size_t shared_bytes, void *stream, void **params);
/* cuLaunchKernel of a dynamic persistent kernel: the stream's counter of
 * programs taken, zeroed on the stream, is written to *counter_slot (the
 * parameter params points to) and the kernel launched right after, under
 * the context's counter lock, so that no other launch on the stream comes
 * between the reset and the kernel. */
fadsl_status fa_rt_launch_counted(fadsl_context *ctx, const FaRtModule *m, const unsigned grid[3],
                                  unsigned threads, size_t shared_bytes, void *stream, void **params,
                                  uint64_t *counter_slot);
/* Frees the counters (at fadsl_context_destroy). */
void fa_rt_free_counters(fadsl_context *ctx);

#endif
