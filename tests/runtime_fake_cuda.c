/* runtime_fake_cuda.c - a stand-in for libcuda.so.1 that runs on a machine
 * without a GPU, for testing libfadsl's launch path (tests/runtime-fake-
 * driver.sh puts it first on the library path as libcuda.so.1).
 *
 * Device memory is host memory; modules must be CUDA ELF files and contain
 * the entry name asked for; a launch runs nothing but is recorded (grid,
 * block, shared memory, the first 8 bytes of each parameter) for the test to
 * inspect through fake_cuda_*(); so is every tensor map encoded (its
 * dimensions, strides, box, swizzle and fill, fake_cuda_tensor_map()).
 * FAKE_CUDA_CC (e.g. 86), FAKE_CUDA_DEVICES and FAKE_CUDA_INIT_ERROR shape
 * the device the runtime sees (132 multiprocessors); the occupancy query
 * answers FAKE_CUDA_OCCUPANCY (2) thread blocks per multiprocessor. */
#include <cuda.h>
#include <stdlib.h>
#include <string.h>

#define FAKE_API __attribute__((visibility("default")))

enum { MAX_ALLOCS = 256, MAX_PARAMS = 64 };
static struct { uintptr_t base; size_t size; } allocs[MAX_ALLOCS];
static int ctx_depth, launches, last_nparams;
static unsigned last_grid[3], last_block[3], last_shared;
static uint64_t last_params[MAX_PARAMS];
static int max_dynamic_shared, tensor_maps;
static char last_entry[256];

/* The arguments of the tensor maps encoded, the latest MAX_MAPS kept. */
enum { MAX_MAPS = 16 };
typedef struct FakeTensorMap {
  int dtype, rank, swizzle, oob;
  uint64_t addr, dims[5], strides[5];
  unsigned box[5];
} FakeTensorMap;
static FakeTensorMap maps[MAX_MAPS];

static int env_int(const char *name, int dflt) {
  const char *v = getenv(name);
  return v && *v ? atoi(v) : dflt;
}

FAKE_API CUresult cuInit(unsigned flags) { (void)flags; return (CUresult)env_int("FAKE_CUDA_INIT_ERROR", 0); }
FAKE_API CUresult cuDriverGetVersion(int *v) { *v = 13000; return CUDA_SUCCESS; }
FAKE_API CUresult cuGetErrorName(CUresult r, const char **s) {
  *s = r == CUDA_ERROR_NO_DEVICE ? "CUDA_ERROR_NO_DEVICE" : r == CUDA_ERROR_INVALID_VALUE ? "CUDA_ERROR_INVALID_VALUE" : "CUDA_ERROR_UNKNOWN";
  return CUDA_SUCCESS;
}
FAKE_API CUresult cuGetErrorString(CUresult r, const char **s) {
  *s = r == CUDA_ERROR_NO_DEVICE ? "no CUDA-capable device is detected" : "fake error";
  return CUDA_SUCCESS;
}
FAKE_API CUresult cuDeviceGetCount(int *n) { *n = env_int("FAKE_CUDA_DEVICES", 1); return CUDA_SUCCESS; }
FAKE_API CUresult cuDeviceGet(CUdevice *d, int i) { *d = i; return CUDA_SUCCESS; }
FAKE_API CUresult cuDeviceGetName(char *name, int len, CUdevice d) {
  (void)d;
  strncpy(name, "Fake GPU", (size_t)len);
  return CUDA_SUCCESS;
}
FAKE_API CUresult cuDeviceGetAttribute(int *v, CUdevice_attribute a, CUdevice d) {
  (void)d;
  int cc = env_int("FAKE_CUDA_CC", 90);
  switch (a) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *v = cc / 10; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *v = cc % 10; break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *v = 132; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: *v = 232448; break;
    default: *v = 0;
  }
  return CUDA_SUCCESS;
}
FAKE_API CUresult cuDeviceTotalMem(size_t *b, CUdevice d) { (void)d; *b = (size_t)1 << 34; return CUDA_SUCCESS; }
FAKE_API CUresult cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice d) { (void)d; *c = (CUcontext)(uintptr_t)0x1000; return CUDA_SUCCESS; }
FAKE_API CUresult cuDevicePrimaryCtxRelease(CUdevice d) { (void)d; return CUDA_SUCCESS; }
FAKE_API CUresult cuCtxPushCurrent(CUcontext c) { (void)c; ctx_depth++; return CUDA_SUCCESS; }
FAKE_API CUresult cuCtxPopCurrent(CUcontext *c) { *c = (CUcontext)(uintptr_t)0x1000; ctx_depth--; return CUDA_SUCCESS; }
FAKE_API CUresult cuCtxSynchronize(void) { return ctx_depth > 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT; }

typedef struct FakeModule { unsigned char *image; size_t size; } FakeModule;

FAKE_API CUresult cuModuleLoadData(CUmodule *m, const void *image) {
  const unsigned char *p = image;
  if (ctx_depth <= 0) return CUDA_ERROR_INVALID_CONTEXT;
  if (!(p[0] == 0x7f && p[1] == 'E' && p[2] == 'L' && p[3] == 'F' && p[18] == 190)) return CUDA_ERROR_INVALID_IMAGE;
  /* the ELF section header table ends the file: e_shoff + e_shnum * e_shentsize */
  uint64_t shoff;
  uint16_t shentsize, shnum;
  memcpy(&shoff, p + 0x28, 8);
  memcpy(&shentsize, p + 0x3a, 2);
  memcpy(&shnum, p + 0x3c, 2);
  FakeModule *fm = malloc(sizeof *fm);
  fm->size = shoff + (size_t)shentsize * shnum;
  fm->image = malloc(fm->size);
  memcpy(fm->image, p, fm->size);
  *m = (CUmodule)fm;
  return CUDA_SUCCESS;
}
FAKE_API CUresult cuModuleUnload(CUmodule m) {
  FakeModule *fm = (FakeModule *)m;
  free(fm->image);
  free(fm);
  return CUDA_SUCCESS;
}
FAKE_API CUresult cuModuleGetFunction(CUfunction *f, CUmodule m, const char *name) {
  FakeModule *fm = (FakeModule *)m;
  size_t n = strlen(name);
  for (size_t i = 0; i + n < fm->size; i++)
    if (memcmp(fm->image + i, name, n + 1) == 0) {   /* the symbol's NUL-terminated name */
      /* a function handle is its name, kept in a table that lives as long as the process */
      static char functions[64][256];
      static int nfunctions;
      for (int j = 0; j < nfunctions; j++)
        if (!strcmp(functions[j], name)) {
          *f = (CUfunction)functions[j];
          return CUDA_SUCCESS;
        }
      if (nfunctions == 64 || n >= 256) return CUDA_ERROR_OUT_OF_MEMORY;
      strcpy(functions[nfunctions], name);
      *f = (CUfunction)functions[nfunctions++];
      return CUDA_SUCCESS;
    }
  return CUDA_ERROR_NOT_FOUND;
}
FAKE_API CUresult cuFuncGetAttribute(int *v, CUfunction_attribute a, CUfunction f) {
  (void)f;
  *v = a == CU_FUNC_ATTRIBUTE_NUM_REGS ? 40 : 0;
  return CUDA_SUCCESS;
}
FAKE_API CUresult cuFuncSetAttribute(CUfunction f, CUfunction_attribute a, int v) {
  (void)f;
  if (a == CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES) max_dynamic_shared = v;
  return CUDA_SUCCESS;
}
FAKE_API CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                 unsigned by, unsigned bz, unsigned shared, CUstream s, void **params,
                                 void **extra) {
  (void)s;
  (void)extra;
  if (ctx_depth <= 0) return CUDA_ERROR_INVALID_CONTEXT;
  if (bx * by * bz > 1024 || gx == 0 || gy == 0 || gz == 0) return CUDA_ERROR_INVALID_VALUE;
  if (shared > 48 * 1024 && (int)shared > max_dynamic_shared) return CUDA_ERROR_INVALID_VALUE;
  launches++;
  strncpy(last_entry, (const char *)f, sizeof last_entry - 1);
  last_grid[0] = gx, last_grid[1] = gy, last_grid[2] = gz;
  last_block[0] = bx, last_block[1] = by, last_block[2] = bz;
  last_shared = shared;
  last_nparams = 0;
  for (int i = 0; params && params[i] && i < MAX_PARAMS; i++) {
    memcpy(&last_params[i], params[i], 8);
    last_nparams++;
  }
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuOccupancyMaxActiveBlocksPerMultiprocessor(int *n, CUfunction f, int threads, size_t shared) {
  (void)f;
  (void)shared;
  if (threads <= 0 || threads > 1024) return CUDA_ERROR_INVALID_VALUE;
  *n = env_int("FAKE_CUDA_OCCUPANCY", 2);
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuMemAlloc(CUdeviceptr *p, size_t n) {
  for (int i = 0; i < MAX_ALLOCS; i++)
    if (!allocs[i].base) {
      allocs[i].base = (uintptr_t)malloc(n);
      allocs[i].size = n;
      *p = (CUdeviceptr)allocs[i].base;
      return CUDA_SUCCESS;
    }
  return CUDA_ERROR_OUT_OF_MEMORY;
}
FAKE_API CUresult cuMemFree(CUdeviceptr p) {
  for (int i = 0; i < MAX_ALLOCS; i++)
    if (allocs[i].base == (uintptr_t)p) {
      free((void *)allocs[i].base);
      allocs[i].base = 0;
      return CUDA_SUCCESS;
    }
  return CUDA_ERROR_INVALID_VALUE;
}
FAKE_API CUresult cuMemGetAddressRange(CUdeviceptr *base, size_t *size, CUdeviceptr p) {
  for (int i = 0; i < MAX_ALLOCS; i++)
    if (allocs[i].base && (uintptr_t)p >= allocs[i].base && (uintptr_t)p < allocs[i].base + allocs[i].size) {
      *base = (CUdeviceptr)allocs[i].base;
      *size = allocs[i].size;
      return CUDA_SUCCESS;
    }
  return CUDA_ERROR_NOT_FOUND;
}
FAKE_API CUresult cuMemcpyHtoD(CUdeviceptr d, const void *s, size_t n) { memcpy((void *)(uintptr_t)d, s, n); return CUDA_SUCCESS; }
FAKE_API CUresult cuMemcpyDtoH(void *d, CUdeviceptr s, size_t n) { memcpy(d, (void *)(uintptr_t)s, n); return CUDA_SUCCESS; }
FAKE_API CUresult cuMemsetD8(CUdeviceptr d, unsigned char c, size_t n) { memset((void *)(uintptr_t)d, c, n); return CUDA_SUCCESS; }
FAKE_API CUresult cuMemsetD32Async(CUdeviceptr d, unsigned v, size_t n, CUstream s) {
  (void)s;
  for (size_t i = 0; i < n; i++) memcpy((char *)(uintptr_t)d + 4 * i, &v, 4);
  return CUDA_SUCCESS;
}
FAKE_API CUresult cuMemGetInfo(size_t *f, size_t *t) { *f = (size_t)1 << 33; *t = (size_t)1 << 34; return CUDA_SUCCESS; }
FAKE_API CUresult cuStreamSynchronize(CUstream s) { (void)s; return CUDA_SUCCESS; }
FAKE_API CUresult cuEventCreate(CUevent *e, unsigned flags) { (void)flags; *e = (CUevent)malloc(8); return CUDA_SUCCESS; }
FAKE_API CUresult cuEventDestroy(CUevent e) { free(e); return CUDA_SUCCESS; }
FAKE_API CUresult cuEventRecord(CUevent e, CUstream s) { (void)e; (void)s; return CUDA_SUCCESS; }
FAKE_API CUresult cuEventSynchronize(CUevent e) { (void)e; return CUDA_SUCCESS; }
/* FAKE_CUDA_HANG=1: work recorded never completes (a hung kernel) */
FAKE_API CUresult cuEventQuery(CUevent e) { (void)e; return env_int("FAKE_CUDA_HANG", 0) ? CUDA_ERROR_NOT_READY : CUDA_SUCCESS; }
FAKE_API CUresult cuEventElapsedTime(float *ms, CUevent a, CUevent b) { (void)a; (void)b; *ms = 1.5f; return CUDA_SUCCESS; }
FAKE_API CUresult cuTensorMapEncodeTiled(CUtensorMap *m, CUtensorMapDataType t, cuuint32_t rank, void *addr,
                                         const cuuint64_t *dim, const cuuint64_t *stride, const cuuint32_t *box,
                                         const cuuint32_t *estride, CUtensorMapInterleave il, CUtensorMapSwizzle sw,
                                         CUtensorMapL2promotion l2, CUtensorMapFloatOOBfill oob) {
  (void)il; (void)l2;
  if (ctx_depth <= 0) return CUDA_ERROR_INVALID_CONTEXT;   /* as the real driver: it needs a current context */
  if (rank < 1 || rank > 5 || ((uintptr_t)addr & 15)) return CUDA_ERROR_INVALID_VALUE;
  for (cuuint32_t i = 0; i < rank; i++)
    if (estride[i] != 1 || box[i] < 1 || box[i] > 256 || dim[i] == 0 || (i > 0 && stride[i - 1] % 16))
      return CUDA_ERROR_INVALID_VALUE;
  FakeTensorMap *f = &maps[tensor_maps % MAX_MAPS];
  memset(f, 0, sizeof *f);
  f->dtype = (int)t;
  f->rank = (int)rank;
  f->swizzle = (int)sw;
  f->oob = (int)oob;
  f->addr = (uint64_t)(uintptr_t)addr;
  for (cuuint32_t i = 0; i < rank; i++) {
    f->dims[i] = dim[i];
    f->box[i] = box[i];
    if (i > 0) f->strides[i - 1] = stride[i - 1];
  }
  memset(m, 0, sizeof *m);
  memcpy(m, &addr, sizeof addr);
  tensor_maps++;
  return CUDA_SUCCESS;
}

/* ---- for the test ---- */
FAKE_API int fake_cuda_launches(void) { return launches; }
FAKE_API int fake_cuda_context_depth(void) { return ctx_depth; }
FAKE_API int fake_cuda_max_dynamic_shared(void) { return max_dynamic_shared; }
FAKE_API int fake_cuda_tensor_maps(void) { return tensor_maps; }
/* Tensor map i (0: the first encoded; only the latest MAX_MAPS are kept):
 * dims, strides (rank - 1 of them, bytes) and box innermost first, as the
 * driver takes them.  Returns its rank, 0 when it is not kept. */
FAKE_API int fake_cuda_tensor_map(int i, uint64_t *addr, uint64_t dims[5], uint64_t strides[5], unsigned box[5],
                                  int *swizzle, int *oob, int *dtype) {
  if (i < 0 || i >= tensor_maps || i < tensor_maps - MAX_MAPS) return 0;
  const FakeTensorMap *f = &maps[i % MAX_MAPS];
  *addr = f->addr;
  memcpy(dims, f->dims, sizeof f->dims);
  memcpy(strides, f->strides, sizeof f->strides);
  memcpy(box, f->box, sizeof f->box);
  *swizzle = f->swizzle;
  *oob = f->oob;
  *dtype = f->dtype;
  return f->rank;
}
FAKE_API const char *fake_cuda_last_launch(unsigned grid[3], unsigned block[3], unsigned *shared,
                                           uint64_t *params, int *nparams) {
  memcpy(grid, last_grid, sizeof last_grid);
  memcpy(block, last_block, sizeof last_block);
  *shared = last_shared;
  memcpy(params, last_params, sizeof(uint64_t) * (size_t)last_nparams);
  *nparams = last_nparams;
  return last_entry;
}
