/* device.c - device memory, synchronisation, events, module loading and the
 * raw kernel launch, each with the context's device made current for the
 * duration of the call (the caller's current context is left as it was). */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "rt.h"

/* Runs one driver call between fa_rt_enter and fa_rt_leave. */
#define FA_DRIVER_CALL(ctx, what, call)                         \
  do {                                                          \
    const FaDriverApi *d;                                       \
    fadsl_status st_ = fa_rt_enter((ctx), &d);                  \
    if (st_ != FADSL_SUCCESS) return st_;                       \
    CUresult r_ = d->call;                                      \
    fa_rt_leave(ctx);                                           \
    if (r_ != CUDA_SUCCESS) return fa_rt_cuda_fail((ctx), r_, (what)); \
    return FADSL_SUCCESS;                                       \
  } while (0)

FADSL_API fadsl_status fadsl_malloc(fadsl_context *ctx, size_t bytes, uint64_t *ptr) {
  if (!ctx || !ptr) return FADSL_ERROR_INVALID_ARGUMENT;
  *ptr = 0;
  if (bytes == 0) return fa_rt_fail(ctx, FADSL_ERROR_INVALID_ARGUMENT, "fadsl_malloc of 0 bytes");
  CUdeviceptr p = 0;
  const FaDriverApi *d;
  fadsl_status st = fa_rt_enter(ctx, &d);
  if (st != FADSL_SUCCESS) return st;
  CUresult r = d->cuMemAlloc(&p, bytes);
  fa_rt_leave(ctx);
  if (r != CUDA_SUCCESS) {
    char what[96];
    snprintf(what, sizeof what, "cuMemAlloc of %zu bytes", bytes);
    return fa_rt_cuda_fail(ctx, r, what);
  }
  *ptr = (uint64_t)p;
  return FADSL_SUCCESS;
}

FADSL_API fadsl_status fadsl_free(fadsl_context *ctx, uint64_t ptr) {
  if (!ctx) return FADSL_ERROR_INVALID_ARGUMENT;
  if (!ptr) return FADSL_SUCCESS;
  FA_DRIVER_CALL(ctx, "cuMemFree", cuMemFree((CUdeviceptr)ptr));
}

FADSL_API fadsl_status fadsl_memcpy_htod(fadsl_context *ctx, uint64_t dst, const void *src,
                                         size_t bytes) {
  if (!ctx || (!src && bytes)) return FADSL_ERROR_INVALID_ARGUMENT;
  if (!bytes) return FADSL_SUCCESS;
  FA_DRIVER_CALL(ctx, "cuMemcpyHtoD", cuMemcpyHtoD((CUdeviceptr)dst, src, bytes));
}

FADSL_API fadsl_status fadsl_memcpy_dtoh(fadsl_context *ctx, void *dst, uint64_t src,
                                         size_t bytes) {
  if (!ctx || (!dst && bytes)) return FADSL_ERROR_INVALID_ARGUMENT;
  if (!bytes) return FADSL_SUCCESS;
  FA_DRIVER_CALL(ctx, "cuMemcpyDtoH", cuMemcpyDtoH(dst, (CUdeviceptr)src, bytes));
}

FADSL_API fadsl_status fadsl_memset(fadsl_context *ctx, uint64_t dst, unsigned char byte,
                                    size_t bytes) {
  if (!ctx) return FADSL_ERROR_INVALID_ARGUMENT;
  if (!bytes) return FADSL_SUCCESS;
  FA_DRIVER_CALL(ctx, "cuMemsetD8", cuMemsetD8((CUdeviceptr)dst, byte, bytes));
}

FADSL_API fadsl_status fadsl_synchronize(fadsl_context *ctx, void *stream) {
  if (!ctx) return FADSL_ERROR_INVALID_ARGUMENT;
  if (stream) FA_DRIVER_CALL(ctx, "cuStreamSynchronize", cuStreamSynchronize((CUstream)stream));
  FA_DRIVER_CALL(ctx, "cuCtxSynchronize", cuCtxSynchronize());
}

static double monotonic_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

FADSL_API fadsl_status fadsl_synchronize_within(fadsl_context *ctx, void *stream, double seconds) {
  if (!ctx || !(seconds > 0)) return FADSL_ERROR_INVALID_ARGUMENT;
  const FaDriverApi *d;
  fadsl_status st = fa_rt_enter(ctx, &d);
  if (st != FADSL_SUCCESS) return st;
  if (!d->cuEventQuery) {
    fa_rt_leave(ctx);
    return fadsl_synchronize(ctx, stream);
  }
  /* an event after the work, polled (every 0.1 ms to 10 ms, doubling) until done or the time is up */
  CUevent ev = NULL;
  CUresult r = d->cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING);
  const char *what = "cuEventCreate";
  if (r == CUDA_SUCCESS) {
    what = "cuEventRecord";
    r = d->cuEventRecord(ev, (CUstream)stream);
  }
  double t0 = monotonic_s(), wait_us = 100;
  bool late = false;
  while (r == CUDA_SUCCESS) {
    what = "cuEventQuery";
    r = d->cuEventQuery(ev);
    if (r != CUDA_ERROR_NOT_READY) break;
    r = CUDA_SUCCESS;
    if (monotonic_s() - t0 > seconds) {
      late = true;
      break;
    }
    struct timespec ts = {0, (long)(wait_us * 1000)};
    nanosleep(&ts, NULL);
    if (wait_us < 10000) wait_us *= 2;
  }
  if (ev) d->cuEventDestroy(ev);
  fa_rt_leave(ctx);
  if (late)
    return fa_rt_fail(ctx, FADSL_ERROR_TIMEOUT,
                      "the GPU did not finish the work queued %s within %g s (a kernel that does not end?)",
                      stream ? "on the stream" : "on the device", seconds);
  if (r != CUDA_SUCCESS) return fa_rt_cuda_fail(ctx, r, what);
  return FADSL_SUCCESS;
}

FADSL_API fadsl_status fadsl_mem_info(fadsl_context *ctx, size_t *free_bytes, size_t *total_bytes) {
  if (!ctx || !free_bytes || !total_bytes) return FADSL_ERROR_INVALID_ARGUMENT;
  FA_DRIVER_CALL(ctx, "cuMemGetInfo", cuMemGetInfo(free_bytes, total_bytes));
}

FADSL_API fadsl_status fadsl_event_create(fadsl_context *ctx, void **event) {
  if (!ctx || !event) return FADSL_ERROR_INVALID_ARGUMENT;
  *event = NULL;
  FA_DRIVER_CALL(ctx, "cuEventCreate", cuEventCreate((CUevent *)event, CU_EVENT_DEFAULT));
}

FADSL_API fadsl_status fadsl_event_destroy(fadsl_context *ctx, void *event) {
  if (!ctx) return FADSL_ERROR_INVALID_ARGUMENT;
  if (!event) return FADSL_SUCCESS;
  FA_DRIVER_CALL(ctx, "cuEventDestroy", cuEventDestroy((CUevent)event));
}

FADSL_API fadsl_status fadsl_event_record(fadsl_context *ctx, void *event, void *stream) {
  if (!ctx || !event) return FADSL_ERROR_INVALID_ARGUMENT;
  FA_DRIVER_CALL(ctx, "cuEventRecord", cuEventRecord((CUevent)event, (CUstream)stream));
}

FADSL_API fadsl_status fadsl_event_elapsed_ms(fadsl_context *ctx, void *start, void *end,
                                              float *ms) {
  if (!ctx || !start || !end || !ms) return FADSL_ERROR_INVALID_ARGUMENT;
  const FaDriverApi *d;
  fadsl_status st = fa_rt_enter(ctx, &d);
  if (st != FADSL_SUCCESS) return st;
  CUresult r = d->cuEventSynchronize((CUevent)end);
  if (r == CUDA_SUCCESS) r = d->cuEventElapsedTime(ms, (CUevent)start, (CUevent)end);
  fa_rt_leave(ctx);
  if (r != CUDA_SUCCESS) return fa_rt_cuda_fail(ctx, r, "cuEventElapsedTime");
  return FADSL_SUCCESS;
}

/* ---- modules and launches ---------------------------------------------------- */

enum { DEFAULT_SHARED_LIMIT = 48 * 1024 };

fadsl_status fa_rt_module_load(fadsl_context *ctx, const unsigned char *cubin, const char *entry,
                               size_t shared_bytes, FaRtModule *out) {
  out->module = NULL;
  out->function = NULL;
  out->registers = out->local_bytes = out->static_shared = -1;
  const FaDriverApi *d;
  fadsl_status st = fa_rt_device(ctx, &d);
  if (st != FADSL_SUCCESS) return st;
  if (shared_bytes > ctx->info.shared_per_block_optin)
    return fa_rt_fail(ctx, FADSL_ERROR_UNSUPPORTED,
                      "kernel %s needs %zu bytes of shared memory per block; %s allows at most %zu",
                      entry, shared_bytes, ctx->info.name, ctx->info.shared_per_block_optin);
  st = fa_rt_enter(ctx, &d);
  if (st != FADSL_SUCCESS) return st;
  char what[256];
  CUresult r = d->cuModuleLoadData(&out->module, cubin);
  if (r != CUDA_SUCCESS) {
    snprintf(what, sizeof what, "cuModuleLoadData (kernel %s, for %s)", entry, ctx->info.arch);
    goto fail;
  }
  r = d->cuModuleGetFunction(&out->function, out->module, entry);
  if (r != CUDA_SUCCESS) {
    snprintf(what, sizeof what, "cuModuleGetFunction(%s)", entry);
    goto fail;
  }
  if (shared_bytes > DEFAULT_SHARED_LIMIT) {
    r = d->cuFuncSetAttribute(out->function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                              (int)shared_bytes);
    if (r != CUDA_SUCCESS) {
      snprintf(what, sizeof what, "raising the dynamic shared memory of %s to %zu bytes", entry,
               shared_bytes);
      goto fail;
    }
  }
  d->cuFuncGetAttribute(&out->registers, CU_FUNC_ATTRIBUTE_NUM_REGS, out->function);
  d->cuFuncGetAttribute(&out->local_bytes, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, out->function);
  d->cuFuncGetAttribute(&out->static_shared, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, out->function);
  fa_rt_leave(ctx);
  return FADSL_SUCCESS;
fail:
  if (out->module) d->cuModuleUnload(out->module);
  out->module = NULL;
  out->function = NULL;
  fa_rt_leave(ctx);
  return fa_rt_cuda_fail(ctx, r, what);
}

void fa_rt_module_unload(fadsl_context *ctx, FaRtModule *m) {
  if (!m->module) return;
  const FaDriverApi *d;
  if (fa_rt_enter(ctx, &d) == FADSL_SUCCESS) {
    d->cuModuleUnload(m->module);
    fa_rt_leave(ctx);
  }
  m->module = NULL;
  m->function = NULL;
}

fadsl_status fa_rt_launch_raw(fadsl_context *ctx, const FaRtModule *m, const unsigned grid[3],
                              unsigned threads, size_t shared_bytes, void *stream, void **params) {
  const FaDriverApi *d;
  fadsl_status st = fa_rt_enter(ctx, &d);
  if (st != FADSL_SUCCESS) return st;
  CUresult r = d->cuLaunchKernel(m->function, grid[0], grid[1], grid[2], threads, 1, 1,
                                 (unsigned)shared_bytes, (CUstream)stream, params, NULL);
  fa_rt_leave(ctx);
  if (r != CUDA_SUCCESS) {
    char what[160];
    snprintf(what, sizeof what, "cuLaunchKernel(grid=(%u,%u,%u), block=%u, shared=%zu)", grid[0],
             grid[1], grid[2], threads, shared_bytes);
    return fa_rt_cuda_fail(ctx, r, what);
  }
  return FADSL_SUCCESS;
}

/* The stream's counter (allocated on first use); 0 after reporting. */
static CUdeviceptr stream_counter(fadsl_context *ctx, const FaDriverApi *d, void *stream) {
  for (int i = 0; i < ctx->ncounters; i++)
    if (ctx->counters[i].stream == stream) return ctx->counters[i].ptr;
  if (ctx->ncounters == ctx->counters_cap) {
    int cap = ctx->counters_cap ? 2 * ctx->counters_cap : 4;
    struct FaTileCounter *c = realloc(ctx->counters, (size_t)cap * sizeof *c);
    if (!c) {
      fa_rt_fail(ctx, FADSL_ERROR_OUT_OF_MEMORY, "out of memory for a persistent kernel's program counter");
      return 0;
    }
    ctx->counters = c;
    ctx->counters_cap = cap;
  }
  CUdeviceptr p = 0;
  CUresult r = d->cuMemAlloc(&p, 16);
  if (r != CUDA_SUCCESS) {
    fa_rt_cuda_fail(ctx, r, "cuMemAlloc of a persistent kernel's program counter");
    return 0;
  }
  ctx->counters[ctx->ncounters++] = (struct FaTileCounter){stream, p};
  return p;
}

fadsl_status fa_rt_launch_counted(fadsl_context *ctx, const FaRtModule *m, const unsigned grid[3],
                                  unsigned threads, size_t shared_bytes, void *stream, void **params,
                                  uint64_t *counter_slot) {
  const FaDriverApi *d;
  fadsl_status st = fa_rt_enter(ctx, &d);
  if (st != FADSL_SUCCESS) return st;
  if (!d->cuMemsetD32Async) {
    fa_rt_leave(ctx);
    return fa_rt_fail(ctx, FADSL_ERROR_NO_DRIVER,
                      "the CUDA driver has no cuMemsetD32Async, which a dynamic persistent kernel needs "
                      "(FADSL_SCHEDULE=grid runs one thread block per program instead)");
  }
  pthread_mutex_lock(&ctx->counter_lock);
  CUdeviceptr counter = stream_counter(ctx, d, stream);
  CUresult r = CUDA_SUCCESS;
  const char *what = "cuMemsetD32Async of a persistent kernel's program counter";
  if (counter) {
    *counter_slot = (uint64_t)counter;
    r = d->cuMemsetD32Async(counter, 0, 1, (CUstream)stream);
    if (r == CUDA_SUCCESS) {
      what = "cuLaunchKernel";
      r = d->cuLaunchKernel(m->function, grid[0], grid[1], grid[2], threads, 1, 1, (unsigned)shared_bytes,
                            (CUstream)stream, params, NULL);
    }
  }
  pthread_mutex_unlock(&ctx->counter_lock);
  fa_rt_leave(ctx);
  if (!counter) return FADSL_ERROR_CUDA;   /* reported by stream_counter */
  if (r != CUDA_SUCCESS) {
    char msg[200];
    snprintf(msg, sizeof msg, "%s (grid=(%u,%u,%u), block=%u, shared=%zu, a dynamic persistent kernel)", what, grid[0],
             grid[1], grid[2], threads, shared_bytes);
    return fa_rt_cuda_fail(ctx, r, msg);
  }
  return FADSL_SUCCESS;
}

void fa_rt_free_counters(fadsl_context *ctx) {
  const FaDriverApi *d;
  if (ctx->ncounters && fa_rt_enter(ctx, &d) == FADSL_SUCCESS) {
    for (int i = 0; i < ctx->ncounters; i++) d->cuMemFree(ctx->counters[i].ptr);
    fa_rt_leave(ctx);
  }
  free(ctx->counters);
  ctx->counters = NULL;
  ctx->ncounters = ctx->counters_cap = 0;
}
