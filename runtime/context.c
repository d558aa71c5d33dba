/* context.c - runtime contexts: status strings, last error, lazy device
 * initialisation (driver, primary context) and NVRTC loading. */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../compiler/cuda_backend.h"
#include "rt.h"
#include "tune_db.h"

FADSL_API const char *fadsl_status_string(fadsl_status status) {
  switch (status) {
    case FADSL_SUCCESS: return "success";
    case FADSL_ERROR_INVALID_ARGUMENT: return "invalid argument";
    case FADSL_ERROR_OUT_OF_MEMORY: return "out of host memory";
    case FADSL_ERROR_NO_DRIVER: return "no CUDA driver";
    case FADSL_ERROR_NO_DEVICE: return "no CUDA device";
    case FADSL_ERROR_NO_NVRTC: return "NVRTC not available";
    case FADSL_ERROR_CUDA: return "CUDA driver error";
    case FADSL_ERROR_PROGRAM: return "program rejected by the compiler";
    case FADSL_ERROR_NVRTC: return "NVRTC compilation failed";
    case FADSL_ERROR_NOT_FOUND: return "not found";
    case FADSL_ERROR_BINDING: return "argument binding error";
    case FADSL_ERROR_IO: return "I/O error";
    case FADSL_ERROR_UNSUPPORTED: return "unsupported";
    case FADSL_ERROR_TIMEOUT: return "timed out";
  }
  return "unknown status";
}

FADSL_API const char *fadsl_version(void) { return PACKAGE_VERSION; }

fadsl_status fa_rt_fail(fadsl_context *ctx, fadsl_status st, const char *fmt, ...) {
  if (!ctx) return st;
  StrBuf sb;
  fa_sb_init(&sb);
  va_list ap;
  va_start(ap, fmt);
  fa_sb_vprintf(&sb, fmt, ap);
  va_end(ap);
  char *msg = fa_sb_take(&sb);
  pthread_mutex_lock(&ctx->lock);
  free(ctx->last_error);
  ctx->last_error = msg;   /* NULL on OOM: last_error() then says so */
  pthread_mutex_unlock(&ctx->lock);
  if (ctx->log.level >= FA_LOG_DEBUG && msg) fprintf(ctx->log.stream, "fadsl: error: %s\n", msg);
  return st;
}

fadsl_status fa_rt_cuda_fail(fadsl_context *ctx, CUresult r, const char *what) {
  char text[256];
  fa_cuda_error_text(ctx->drv, r, text, sizeof text);
  return fa_rt_fail(ctx, FADSL_ERROR_CUDA, "%s failed: %s", what, text);
}

FADSL_API const char *fadsl_context_last_error(const fadsl_context *ctx) {
  if (!ctx) return "no context";
  const char *e = ctx->last_error;
  return e ? e : "";
}

/* A copy of the last error, taken under the context's lock: another thread's
 * failure may replace (and free) the message meanwhile. */
char *fa_rt_last_error_copy(fadsl_context *ctx) {
  pthread_mutex_lock(&ctx->lock);
  char *copy = strdup(ctx->last_error ? ctx->last_error : "");
  pthread_mutex_unlock(&ctx->lock);
  return copy;
}

FADSL_API int fadsl_context_device(const fadsl_context *ctx) { return ctx ? ctx->device : -1; }

void fa_rt_arch_for_cc(int major, int minor, char *buf, size_t size) {
  /* Hopper's wgmma and setmaxnreg exist only in the arch-specific target;
   * plain sm_90 would silently fall back to slower code. */
  if (major == 9 && minor == 0)
    snprintf(buf, size, "sm_90a");
  else
    snprintf(buf, size, "sm_%d%d", major, minor);
}

/* FADSL_ARCH=sm_XY[a] compiles for an older architecture than the device's
 * own (sm_90 on an H100 runs the code without wgmma, to compare): it must be
 * one the device runs, and an arch-specific one only the device's own. */
static bool arch_override(fadsl_context *ctx, fadsl_device_info *info) {
  const char *over = getenv("FADSL_ARCH");
  if (!over || !*over)
    return true;
  FaCudaTarget t;
  int cc = info->cc_major * 10 + info->cc_minor;
  if (!fa_cuda_target_parse(over, &t) || t.sm > cc || (t.arch_specific && t.sm != cc)) {
    snprintf(ctx->device_error, sizeof ctx->device_error,
             "FADSL_ARCH=%s: not an architecture device %d (%s, compute capability %d.%d) runs", over, ctx->device,
             info->name, info->cc_major, info->cc_minor);
    return false;
  }
  fa_cuda_target_name(t, info->arch, sizeof info->arch);
  return true;
}

/* Initialises the device; called with ctx->lock held.  On failure the
 * reason goes to ctx->device_error. */
static fadsl_status init_device(fadsl_context *ctx) {
  const char *why = NULL;
  bool no_device = false;
  const FaDriverApi *d = fa_loader_driver(&ctx->loader, &why, &no_device);
  if (!d) {
    snprintf(ctx->device_error, sizeof ctx->device_error, "%s", why);
    return no_device ? FADSL_ERROR_NO_DEVICE : FADSL_ERROR_NO_DRIVER;
  }
  ctx->drv = d;
  char text[256];
  int count = 0;
  CUresult r = d->cuDeviceGetCount(&count);
  if (r != CUDA_SUCCESS) {
    snprintf(ctx->device_error, sizeof ctx->device_error, "cuDeviceGetCount failed: %s",
             fa_cuda_error_text(d, r, text, sizeof text));
    return FADSL_ERROR_CUDA;
  }
  if (ctx->device >= count) {
    snprintf(ctx->device_error, sizeof ctx->device_error,
             "no CUDA device %d (this machine has %d)", ctx->device, count);
    return FADSL_ERROR_NO_DEVICE;
  }
  r = d->cuDeviceGet(&ctx->cu_device, ctx->device);
  if (r == CUDA_SUCCESS) r = d->cuDevicePrimaryCtxRetain(&ctx->cu_context, ctx->cu_device);
  if (r != CUDA_SUCCESS) {
    snprintf(ctx->device_error, sizeof ctx->device_error,
             "CUDA device %d could not be opened: %s", ctx->device,
             fa_cuda_error_text(d, r, text, sizeof text));
    return FADSL_ERROR_CUDA;
  }
  fadsl_device_info *info = &ctx->info;
  d->cuDeviceGetName(info->name, (int)sizeof info->name, ctx->cu_device);
  d->cuDeviceGetAttribute(&info->cc_major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                          ctx->cu_device);
  d->cuDeviceGetAttribute(&info->cc_minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
                          ctx->cu_device);
  d->cuDeviceGetAttribute(&info->multiprocessors, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
                          ctx->cu_device);
  int optin = 0;
  d->cuDeviceGetAttribute(&optin, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
                          ctx->cu_device);
  info->shared_per_block_optin = (size_t)optin;
  int l2 = 0;
  d->cuDeviceGetAttribute(&l2, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, ctx->cu_device);
  info->l2_bytes = l2 > 0 ? (size_t)l2 : 0;
  d->cuDeviceTotalMem(&info->total_memory, ctx->cu_device);
  info->driver_version = d->version;
  fa_rt_arch_for_cc(info->cc_major, info->cc_minor, info->arch, sizeof info->arch);
  if (!arch_override(ctx, info))
    return FADSL_ERROR_UNSUPPORTED;
  ctx->device_ready = true;
  if (ctx->log.level >= FA_LOG_INFO)
    fprintf(ctx->log.stream, "fadsl: CUDA driver %d.%d from %s; device %d: %s (%s)\n",
            d->version / 1000, d->version % 1000 / 10, d->file, ctx->device, info->name, info->arch);
  return FADSL_SUCCESS;
}

fadsl_status fa_rt_device(fadsl_context *ctx, const FaDriverApi **drv) {
  if (!ctx) return FADSL_ERROR_INVALID_ARGUMENT;
  if (ctx->device < 0)
    return fa_rt_fail(ctx, FADSL_ERROR_NO_DEVICE,
                      "this context has no device (it was created with device -1, for "
                      "compiling only)");
  pthread_mutex_lock(&ctx->lock);
  if (!ctx->device_ready && ctx->device_status == FADSL_SUCCESS)
    ctx->device_status = init_device(ctx);   /* tried once; the outcome stays */
  fadsl_status st = ctx->device_status;
  pthread_mutex_unlock(&ctx->lock);
  if (st != FADSL_SUCCESS) return fa_rt_fail(ctx, st, "%s", ctx->device_error);
  if (drv) *drv = ctx->drv;
  return FADSL_SUCCESS;
}

fadsl_status fa_rt_enter(fadsl_context *ctx, const FaDriverApi **drv) {
  const FaDriverApi *d;
  fadsl_status st = fa_rt_device(ctx, &d);
  if (st != FADSL_SUCCESS) return st;
  CUresult r = d->cuCtxPushCurrent(ctx->cu_context);
  if (r != CUDA_SUCCESS) return fa_rt_cuda_fail(ctx, r, "cuCtxPushCurrent");
  if (drv) *drv = d;
  return FADSL_SUCCESS;
}

void fa_rt_leave(fadsl_context *ctx) {
  CUcontext popped;
  ctx->drv->cuCtxPopCurrent(&popped);
}

fadsl_status fa_rt_nvrtc(fadsl_context *ctx, const FaNvrtcApi **api) {
  const char *why = NULL;
  const FaNvrtcApi *a = fa_loader_nvrtc(&ctx->loader, &why);
  if (!a) return fa_rt_fail(ctx, FADSL_ERROR_NO_NVRTC, "%s", why);
  if (ctx->log.level >= FA_LOG_INFO) {
    pthread_mutex_lock(&ctx->lock);
    if (!ctx->nvrtc_reported)
      fprintf(ctx->log.stream, "fadsl: NVRTC %d.%d from %s\n", a->major, a->minor, a->file);
    ctx->nvrtc_reported = true;
    pthread_mutex_unlock(&ctx->lock);
  }
  *api = a;
  return FADSL_SUCCESS;
}

/* ---- creation ---------------------------------------------------------------- */

static char *join_path(const char *root, const char *leaf) {
  if (!root) return NULL;
  StrBuf sb;
  fa_sb_init(&sb);
  fa_sb_printf(&sb, "%s/%s", root, leaf);
  return fa_sb_take(&sb);
}

FADSL_API fadsl_status fadsl_context_create(int device, fadsl_context **out) {
  if (!out) return FADSL_ERROR_INVALID_ARGUMENT;
  *out = NULL;
  if (device < -1) return FADSL_ERROR_INVALID_ARGUMENT;
  fadsl_context *ctx = calloc(1, sizeof *ctx);
  if (!ctx) return FADSL_ERROR_OUT_OF_MEMORY;
  ctx->device = device;
  pthread_mutex_init(&ctx->lock, NULL);
  pthread_mutex_init(&ctx->counter_lock, NULL);
  ctx->log.stream = stderr;
  ctx->log.level = fa_log_level_from_env();
  fa_loader_init(&ctx->loader, 0);
  char *root = fa_cache_default_root();
  char *kernels = join_path(root, "kernels");
  fa_cache_init(&ctx->cache, kernels, ctx->log);
  const char *db = getenv("FADSL_TUNE_DB");
  ctx->tune_db = db && *db ? strdup(db) : join_path(root, "tune.json");
  ctx->tune_cache = fa_tune_cache_new();   /* NULL (out of memory): every launch reads the file */
  free(kernels);
  free(root);
  *out = ctx;
  if (device >= 0) return fa_rt_device(ctx, NULL);
  return FADSL_SUCCESS;
}

FADSL_API void fadsl_context_destroy(fadsl_context *ctx) {
  if (!ctx) return;
  fa_rt_free_counters(ctx);
  if (ctx->device_ready) ctx->drv->cuDevicePrimaryCtxRelease(ctx->cu_device);
  fa_cache_free(&ctx->cache);
  fa_loader_free(&ctx->loader);
  fa_tune_cache_free(ctx->tune_cache);
  pthread_mutex_destroy(&ctx->lock);
  pthread_mutex_destroy(&ctx->counter_lock);
  free(ctx->tune_db);
  free(ctx->last_error);
  free(ctx);
}

FADSL_API fadsl_status fadsl_context_set_cache_dir(fadsl_context *ctx, const char *dir) {
  if (!ctx) return FADSL_ERROR_INVALID_ARGUMENT;
  if (dir && !*dir) return fa_rt_fail(ctx, FADSL_ERROR_INVALID_ARGUMENT, "empty cache directory name");
  if (!fa_cache_set_dir(&ctx->cache, dir)) return FADSL_ERROR_OUT_OF_MEMORY;
  return FADSL_SUCCESS;
}

FADSL_API const char *fadsl_context_cache_dir(const fadsl_context *ctx) {
  if (!ctx) return NULL;
  return fa_cache_dir(&((fadsl_context *)ctx)->cache);
}

FADSL_API fadsl_status fadsl_context_set_tune_db(fadsl_context *ctx, const char *path) {
  if (!ctx) return FADSL_ERROR_INVALID_ARGUMENT;
  char *copy = NULL;
  if (path && !(copy = strdup(path))) return FADSL_ERROR_OUT_OF_MEMORY;
  pthread_mutex_lock(&ctx->lock);
  free(ctx->tune_db);
  ctx->tune_db = copy;
  pthread_mutex_unlock(&ctx->lock);
  return FADSL_SUCCESS;
}

FADSL_API fadsl_status fadsl_context_device_info(fadsl_context *ctx, fadsl_device_info *out) {
  if (!ctx || !out) return FADSL_ERROR_INVALID_ARGUMENT;
  fadsl_status st = fa_rt_device(ctx, NULL);
  if (st != FADSL_SUCCESS) return st;
  *out = ctx->info;
  return FADSL_SUCCESS;
}
