/* cuda_loader.c - dlopen of libcuda and libnvrtc, symbol tables, cuInit. */
#define _GNU_SOURCE   /* dladdr */
#include "config.h"

#include "cuda_loader.h"
#include "util.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define FA_STR_(x) #x
#define FA_STR(x) FA_STR_(x)

typedef struct FaSymbol {
  const char *name;             /* the versioned symbol, e.g. "cuMemAlloc_v2" */
  const char *fallback;         /* an older symbol of the same type, or NULL */
  size_t offset;                /* of the field in the table */
  bool optional;
} FaSymbol;

/* FA_STR(name) expands the header's macro first: "cuMemAlloc_v2". */
#define FA_DRIVER_SYMBOL(name, fallback, optional) \
  {FA_STR(name), fallback, offsetof(FaDriverApi, name), optional},
#define FA_NVRTC_SYMBOL(name, fallback, optional) \
  {FA_STR(name), fallback, offsetof(FaNvrtcApi, name), optional},

static const FaSymbol driver_symbols[] = {FA_DRIVER_FUNCS(FA_DRIVER_SYMBOL)};
static const FaSymbol nvrtc_symbols[] = {FA_NVRTC_FUNCS(FA_NVRTC_SYMBOL)};

void fa_loader_init(FaCudaLoader *l, unsigned flags) {
  memset(l, 0, sizeof *l);
  pthread_mutex_init(&l->lock, NULL);
  const char *env = getenv("FADSL_NO_DRIVER");
  if (env && *env && strcmp(env, "0") != 0) flags |= FA_LOADER_NO_DRIVER;
  l->flags = flags;
}

void fa_loader_free(FaCudaLoader *l) {
  if (l->driver_handle) dlclose(l->driver_handle);
  if (l->nvrtc_handle) dlclose(l->nvrtc_handle);
  l->driver_handle = l->nvrtc_handle = NULL;
  pthread_mutex_destroy(&l->lock);
}

/* Fills a table from a handle.  Returns the first missing required symbol,
 * or NULL when all are there. */
static const char *resolve(void *handle, const FaSymbol *syms, int n, void *table) {
  for (int i = 0; i < n; i++) {
    void *p = dlsym(handle, syms[i].name);
    if (!p && syms[i].fallback) p = dlsym(handle, syms[i].fallback);
    if (!p && !syms[i].optional) return syms[i].name;
    /* A data pointer from dlsym becomes a function pointer by copying its
     * bytes: POSIX guarantees the representations agree, ISO C has no cast. */
    memcpy((char *)table + syms[i].offset, &p, sizeof p);
  }
  return NULL;
}

/* The file a resolved function lives in (which copy of a library the
 * loader's search found), else `fallback`. */
static void library_file(const void *table_entry, const char *fallback, char *buf, size_t size) {
  void *fn = NULL;
  memcpy(&fn, table_entry, sizeof fn);
  Dl_info info;
  if (fn && dladdr(fn, &info) && info.dli_fname && *info.dli_fname)
    snprintf(buf, size, "%s", info.dli_fname);
  else
    snprintf(buf, size, "%s", fallback);
}

const char *fa_cuda_error_text(const FaDriverApi *d, CUresult r, char *buf, size_t size) {
  const char *name = NULL, *text = NULL;
  if (d && d->cuGetErrorName) d->cuGetErrorName(r, &name);
  if (d && d->cuGetErrorString) d->cuGetErrorString(r, &text);
  if (name && text)
    snprintf(buf, size, "%s (%s)", name, text);
  else
    snprintf(buf, size, "CUDA error %d", (int)r);
  return buf;
}

static void init_driver(FaCudaLoader *l, void *h, const char *name);

static void load_driver(FaCudaLoader *l) {
  if (l->flags & FA_LOADER_NO_DRIVER) {
    snprintf(l->driver_error, sizeof l->driver_error,
             "no CUDA driver found (libcuda.so.1 could not be loaded: disabled by FADSL_NO_DRIVER)");
    l->driver_state = FA_LOAD_FAILED;
    return;
  }
  const char *over = getenv("FADSL_CUDA_DRIVER_PATH");
  if (over && *over) {
    void *h = dlopen(over, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      const char *e = dlerror();
      snprintf(l->driver_error, sizeof l->driver_error,
               "no CUDA driver found (libcuda.so.1 could not be loaded: %s; from "
               "FADSL_CUDA_DRIVER_PATH)",
               e ? e : over);
      l->driver_state = FA_LOAD_FAILED;
      return;
    }
    init_driver(l, h, over);
    return;
  }
  const char *name = "libcuda.so.1";
  void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char *e = dlerror();
    char first[512];
    snprintf(first, sizeof first, "%s", e ? e : "unknown error");
    name = "libcuda.so";
    h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      snprintf(l->driver_error, sizeof l->driver_error,
               "no CUDA driver found (libcuda.so.1 could not be loaded: %s)", first);
      l->driver_state = FA_LOAD_FAILED;
      return;
    }
  }
  init_driver(l, h, name);
}

/* Resolves the driver's symbols from an opened library and initialises it. */
static void init_driver(FaCudaLoader *l, void *h, const char *name) {
  const char *missing = resolve(h, driver_symbols, FA_ARRAY_LEN(driver_symbols), &l->driver);
  library_file(&l->driver.cuInit, name, l->driver.file, sizeof l->driver.file);
  if (missing) {
    snprintf(l->driver_error, sizeof l->driver_error,
             "the CUDA driver is too old: libcuda.so.1 has no %s (fadsl was built with CUDA %d.%d headers)",
             missing, CUDA_VERSION / 1000, CUDA_VERSION % 1000 / 10);
    dlclose(h);
    memset(&l->driver, 0, sizeof l->driver);
    l->driver_state = FA_LOAD_FAILED;
    return;
  }
  CUresult r = l->driver.cuInit(0);
  if (r != CUDA_SUCCESS) {
    char text[256];
    fa_cuda_error_text(&l->driver, r, text, sizeof text);
    if (r == CUDA_ERROR_NO_DEVICE) {
      l->driver_no_device = true;
      snprintf(l->driver_error, sizeof l->driver_error, "no CUDA device found (cuInit: %s)", text);
    } else {
      snprintf(l->driver_error, sizeof l->driver_error,
               "the CUDA driver could not be initialised (cuInit: %s)", text);
    }
    l->driver_handle = h;     /* keep it: cuGetErrorString texts point into it */
    l->driver_state = FA_LOAD_FAILED;
    return;
  }
  l->driver.cuDriverGetVersion(&l->driver.version);
  l->driver_handle = h;
  l->driver_state = FA_LOAD_OK;
}

const FaDriverApi *fa_loader_driver(FaCudaLoader *l, const char **error, bool *no_device) {
  pthread_mutex_lock(&l->lock);
  if (l->driver_state == FA_LOAD_NOT_TRIED) load_driver(l);
  bool ok = l->driver_state == FA_LOAD_OK;
  pthread_mutex_unlock(&l->lock);
  if (no_device) *no_device = l->driver_no_device;
  if (!ok) {
    if (error) *error = l->driver_error;
    return NULL;
  }
  return &l->driver;
}

/* Tries one library file or soname; on failure appends the reason to `why`.
 * RTLD_NODELETE: NVRTC brings the C++ runtime into the process, which must
 * not be unmapped while the process runs (its exception-handling pool and
 * static destructors would dangle); dlclose then only drops our reference. */
static void *try_nvrtc(const char *name, char *why, size_t why_size) {
  void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (!h) {
    const char *e = dlerror();
    size_t used = strlen(why);
    if (used + 1 < why_size)
      snprintf(why + used, why_size - used, "%s%s", used ? "; " : "", e ? e : name);
  }
  return h;
}

static const char *const nvrtc_sonames[] = {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"};

static void *try_nvrtc_dir(const char *dir, char *path, size_t path_size, char *why,
                           size_t why_size) {
  for (int i = 0; i < FA_ARRAY_LEN(nvrtc_sonames); i++) {
    snprintf(path, path_size, "%s/%s", dir, nvrtc_sonames[i]);
    struct stat st;
    if (stat(path, &st) != 0) continue;   /* absent: not worth a message */
    void *h = try_nvrtc(path, why, why_size);
    if (h) return h;
  }
  return NULL;
}

static void *find_nvrtc(FaCudaLoader *l, char *path, size_t path_size) {
  char why[1024] = "";
  const char *over = getenv("FADSL_NVRTC_PATH");
  if (over && *over) {
    struct stat st;
    void *h = NULL;
    if (stat(over, &st) == 0 && S_ISDIR(st.st_mode)) {
      h = try_nvrtc_dir(over, path, path_size, why, sizeof why);
      if (!h && !why[0]) snprintf(why, sizeof why, "no libnvrtc.so* in that directory");
    } else {
      snprintf(path, path_size, "%s", over);
      h = try_nvrtc(over, why, sizeof why);
    }
    if (!h)
      snprintf(l->nvrtc_error, sizeof l->nvrtc_error,
               "NVRTC could not be loaded from FADSL_NVRTC_PATH=%s (%s)", over, why);
    return h;
  }
  for (int i = 0; i < FA_ARRAY_LEN(nvrtc_sonames); i++) {
    void *h = try_nvrtc(nvrtc_sonames[i], why, sizeof why);
    if (h) {
      snprintf(path, path_size, "%s", nvrtc_sonames[i]);
      return h;
    }
  }
  char dir[512];
  const char *cuda_home = getenv("CUDA_HOME");
  const char *dirs[3] = {NULL, FADSL_CUDA_DIR "/lib64", FADSL_CUDA_DIR "/lib"};
  if (cuda_home && *cuda_home) {
    snprintf(dir, sizeof dir, "%s/lib64", cuda_home);
    dirs[0] = dir;
  }
  for (int i = 0; i < 3; i++) {
    if (!dirs[i]) continue;
    void *h = try_nvrtc_dir(dirs[i], path, path_size, why, sizeof why);
    if (h) return h;
  }
  snprintf(l->nvrtc_error, sizeof l->nvrtc_error,
           "NVRTC not found (tried libnvrtc.so.13, libnvrtc.so.12, libnvrtc.so, then "
           "$CUDA_HOME/lib64, " FADSL_CUDA_DIR "/lib64 and " FADSL_CUDA_DIR
           "/lib; set FADSL_NVRTC_PATH to its location): %s",
           why);
  return NULL;
}

static void load_nvrtc(FaCudaLoader *l) {
  char path[512] = "";
  void *h = find_nvrtc(l, path, sizeof path);
  if (!h) {
    l->nvrtc_state = FA_LOAD_FAILED;
    return;
  }
  const char *missing = resolve(h, nvrtc_symbols, FA_ARRAY_LEN(nvrtc_symbols), &l->nvrtc);
  if (missing) {
    snprintf(l->nvrtc_error, sizeof l->nvrtc_error, "NVRTC at %s is too old: it has no %s",
             path, missing);
    dlclose(h);
    memset(&l->nvrtc, 0, sizeof l->nvrtc);
    l->nvrtc_state = FA_LOAD_FAILED;
    return;
  }
  l->nvrtc.nvrtcVersion(&l->nvrtc.major, &l->nvrtc.minor);
  snprintf(l->nvrtc.path, sizeof l->nvrtc.path, "%s", path);
  library_file(&l->nvrtc.nvrtcVersion, path, l->nvrtc.file, sizeof l->nvrtc.file);
  l->nvrtc_handle = h;
  l->nvrtc_state = FA_LOAD_OK;
}

const FaNvrtcApi *fa_loader_nvrtc(FaCudaLoader *l, const char **error) {
  pthread_mutex_lock(&l->lock);
  if (l->nvrtc_state == FA_LOAD_NOT_TRIED) load_nvrtc(l);
  bool ok = l->nvrtc_state == FA_LOAD_OK;
  pthread_mutex_unlock(&l->lock);
  if (!ok) {
    if (error) *error = l->nvrtc_error;
    return NULL;
  }
  return &l->nvrtc;
}
