/* check_runtime_gpu.c - the runtime on a real GPU: a hand-written kernel
 * compiled through the cache, loaded and launched with the runtime's
 * internals, its results checked; dynamic shared memory above 48 KiB;
 * events; launch errors as statuses.  Without a driver or a device it says
 * why and exits 77 (skipped). */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt.h"

const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void) { return "leak:libnvrtc\nleak:libcuda\n"; }

static const char *source =
    "extern \"C\" __global__ void axpy(float *y, const float *x, float a, int n) {\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) y[i] = a * x[i] + y[i];\n"
    "}\n"
    "extern \"C\" __global__ void reverse_in_smem(float *out, const float *in, int n) {\n"
    "  extern __shared__ float buf[];\n"
    "  for (int i = threadIdx.x; i < n; i += blockDim.x) buf[i] = in[i];\n"
    "  __syncthreads();\n"
    "  for (int i = threadIdx.x; i < n; i += blockDim.x) out[i] = buf[n - 1 - i];\n"
    "}\n"
    "#if defined(__CUDA_ARCH_FEAT_SM90_ALL)\n"
    "extern \"C\" __global__ void hopper_fence(int *out) {\n"
    "  asm volatile(\"wgmma.fence.sync.aligned;\" ::: \"memory\");\n"
    "  out[threadIdx.x] = 90;\n"
    "}\n"
    "#endif\n";

static fadsl_context *ctx;
static char cache_dir[256];

static void setup(void) {
  ck_assert_int_eq(fadsl_context_create(0, &ctx), FADSL_SUCCESS);
  snprintf(cache_dir, sizeof cache_dir, "/tmp/fadsl-gpu-test-XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(cache_dir));
  ck_assert_int_eq(fadsl_context_set_cache_dir(ctx, cache_dir), FADSL_SUCCESS);
}
static void teardown(void) {
  fadsl_context_destroy(ctx);
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", cache_dir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", cache_dir);
}

static void load(const char *entry, size_t shared, FaRtModule *m) {
  FaRtBinary bin;
  fadsl_status st = fa_rt_build_cubin(ctx, source, "gpu_test.cu", NULL, NULL, 0, ctx->info.arch, &bin);
  ck_assert_msg(st == FADSL_SUCCESS, "%s", fadsl_context_last_error(ctx));
  st = fa_rt_module_load(ctx, bin.cubin, entry, shared, m);
  ck_assert_msg(st == FADSL_SUCCESS, "%s", fadsl_context_last_error(ctx));
  fa_rt_binary_free(&bin);
}

START_TEST(test_device_info) {
  fadsl_device_info info;
  ck_assert_int_eq(fadsl_context_device_info(ctx, &info), FADSL_SUCCESS);
  ck_assert(info.name[0]);
  ck_assert_int_ge(info.cc_major, 5);
  ck_assert_int_gt(info.multiprocessors, 0);
  ck_assert_uint_gt(info.total_memory, 0);
  ck_assert_uint_ge(info.shared_per_block_optin, 48 * 1024);
  char want[16];
  if (info.cc_major == 9 && info.cc_minor == 0)
    strcpy(want, "sm_90a");
  else
    snprintf(want, sizeof want, "sm_%d%d", info.cc_major, info.cc_minor);
  ck_assert_str_eq(info.arch, want);
  fprintf(stderr, "device 0: %s, sm %d.%d, target %s, %d SMs, driver %d\n", info.name,
          info.cc_major, info.cc_minor, info.arch, info.multiprocessors, info.driver_version);
}
END_TEST

START_TEST(test_axpy) {
  enum { N = 100003 };
  float *x = malloc(sizeof(float) * N), *y = malloc(sizeof(float) * N), *r = malloc(sizeof(float) * N);
  for (int i = 0; i < N; i++) {
    x[i] = (float)(i % 1000) * 0.5f;
    y[i] = (float)(i % 7);
  }
  uint64_t dx, dy;
  ck_assert_int_eq(fadsl_malloc(ctx, sizeof(float) * N, &dx), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_malloc(ctx, sizeof(float) * N, &dy), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_memcpy_htod(ctx, dx, x, sizeof(float) * N), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_memcpy_htod(ctx, dy, y, sizeof(float) * N), FADSL_SUCCESS);
  FaRtModule m;
  load("axpy", 0, &m);
  ck_assert_int_gt(m.registers, 0);
  float a = 3.0f;
  int n = N;
  void *params[] = {&dy, &dx, &a, &n};
  unsigned grid[3] = {(N + 255) / 256, 1, 1};
  void *start, *end;
  ck_assert_int_eq(fadsl_event_create(ctx, &start), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_event_create(ctx, &end), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_event_record(ctx, start, NULL), FADSL_SUCCESS);
  fadsl_status st = fa_rt_launch_raw(ctx, &m, grid, 256, 0, NULL, params);
  ck_assert_msg(st == FADSL_SUCCESS, "%s", fadsl_context_last_error(ctx));
  ck_assert_int_eq(fadsl_event_record(ctx, end, NULL), FADSL_SUCCESS);
  float ms = -1;
  ck_assert_int_eq(fadsl_event_elapsed_ms(ctx, start, end, &ms), FADSL_SUCCESS);
  ck_assert(ms >= 0 && ms < 10000);
  ck_assert_int_eq(fadsl_synchronize(ctx, NULL), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_memcpy_dtoh(ctx, r, dy, sizeof(float) * N), FADSL_SUCCESS);
  for (int i = 0; i < N; i++) ck_assert_float_eq(r[i], 3.0f * x[i] + y[i]);
  /* memset */
  ck_assert_int_eq(fadsl_memset(ctx, dy, 0, sizeof(float) * N), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_memcpy_dtoh(ctx, r, dy, sizeof(float) * N), FADSL_SUCCESS);
  for (int i = 0; i < N; i++) ck_assert_float_eq(r[i], 0.0f);
  size_t fr = 0, tot = 0;
  ck_assert_int_eq(fadsl_mem_info(ctx, &fr, &tot), FADSL_SUCCESS);
  ck_assert(fr > 0 && tot >= fr);
  fadsl_event_destroy(ctx, start);
  fadsl_event_destroy(ctx, end);
  fa_rt_module_unload(ctx, &m);
  fadsl_free(ctx, dx);
  fadsl_free(ctx, dy);
  free(x);
  free(y);
  free(r);
}
END_TEST

START_TEST(test_large_dynamic_shared) {
  enum { N = 16384 };   /* 64 KiB of dynamic shared memory: above the default 48 KiB */
  size_t shared = sizeof(float) * N;
  float *in = malloc(shared), *out = malloc(shared);
  for (int i = 0; i < N; i++) in[i] = (float)i;
  uint64_t din, dout;
  ck_assert_int_eq(fadsl_malloc(ctx, shared, &din), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_malloc(ctx, shared, &dout), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_memcpy_htod(ctx, din, in, shared), FADSL_SUCCESS);
  FaRtModule m;
  load("reverse_in_smem", shared, &m);
  int n = N;
  void *params[] = {&dout, &din, &n};
  unsigned grid[3] = {1, 1, 1};
  fadsl_status st = fa_rt_launch_raw(ctx, &m, grid, 256, shared, NULL, params);
  ck_assert_msg(st == FADSL_SUCCESS, "%s", fadsl_context_last_error(ctx));
  ck_assert_int_eq(fadsl_memcpy_dtoh(ctx, out, dout, shared), FADSL_SUCCESS);
  for (int i = 0; i < N; i++) ck_assert_float_eq(out[i], (float)(N - 1 - i));
  fa_rt_module_unload(ctx, &m);

  /* more than the device allows is a clear error, before any launch */
  FaRtBinary bin;
  ck_assert_int_eq(fa_rt_build_cubin(ctx, source, "gpu_test.cu", NULL, NULL, 0, ctx->info.arch, &bin),
                   FADSL_SUCCESS);
  ck_assert_int_eq(fa_rt_module_load(ctx, bin.cubin, "reverse_in_smem",
                                     ctx->info.shared_per_block_optin + 1, &m),
                   FADSL_ERROR_UNSUPPORTED);
  ck_assert_ptr_nonnull(strstr(fadsl_context_last_error(ctx), "shared memory"));
  /* an entry that does not exist */
  ck_assert_int_eq(fa_rt_module_load(ctx, bin.cubin, "no_such_kernel", 0, &m), FADSL_ERROR_CUDA);
  ck_assert_ptr_nonnull(strstr(fadsl_context_last_error(ctx), "no_such_kernel"));
  fa_rt_binary_free(&bin);
  fadsl_free(ctx, din);
  fadsl_free(ctx, dout);
  free(in);
  free(out);
}
END_TEST

START_TEST(test_launch_error_is_a_status) {
  FaRtModule m;
  load("axpy", 0, &m);
  uint64_t d;
  ck_assert_int_eq(fadsl_malloc(ctx, 1024, &d), FADSL_SUCCESS);
  float a = 1;
  int n = 0;
  void *params[] = {&d, &d, &a, &n};
  unsigned grid[3] = {1, 1, 1};
  /* 4096 threads per block is more than any GPU allows */
  ck_assert_int_eq(fa_rt_launch_raw(ctx, &m, grid, 4096, 0, NULL, params), FADSL_ERROR_CUDA);
  ck_assert_ptr_nonnull(strstr(fadsl_context_last_error(ctx), "cuLaunchKernel"));
  ck_assert_int_eq(fadsl_synchronize(ctx, NULL), FADSL_SUCCESS);   /* the context survives */
  fa_rt_module_unload(ctx, &m);
  fadsl_free(ctx, d);
  ck_assert_int_eq(fadsl_malloc(ctx, 0, &d), FADSL_ERROR_INVALID_ARGUMENT);
}
END_TEST

/* On Hopper the sm_90a target is used, and code that exists only there runs. */
START_TEST(test_hopper_target) {
  if (!(ctx->info.cc_major == 9 && ctx->info.cc_minor == 0)) {
    fprintf(stderr, "not an sm_90 device: no sm_90a check\n");
    return;
  }
  FaRtModule m;
  load("hopper_fence", 0, &m);
  uint64_t d;
  ck_assert_int_eq(fadsl_malloc(ctx, 128 * sizeof(int), &d), FADSL_SUCCESS);
  void *params[] = {&d};
  unsigned grid[3] = {1, 1, 1};
  ck_assert_int_eq(fa_rt_launch_raw(ctx, &m, grid, 128, 0, NULL, params), FADSL_SUCCESS);
  int out[128];
  ck_assert_int_eq(fadsl_memcpy_dtoh(ctx, out, d, sizeof out), FADSL_SUCCESS);
  for (int i = 0; i < 128; i++) ck_assert_int_eq(out[i], 90);
  fa_rt_module_unload(ctx, &m);
  fadsl_free(ctx, d);
}
END_TEST

int main(void) {
  if (getenv("FADSL_NO_DRIVER")) unsetenv("FADSL_NO_DRIVER");
  fadsl_context *probe = NULL;
  fadsl_status st = fadsl_context_create(0, &probe);
  if (st != FADSL_SUCCESS) {
    printf("SKIP: no usable GPU: %s (%s)\n", fadsl_context_last_error(probe),
           fadsl_status_string(st));
    fadsl_context_destroy(probe);
    return 77;
  }
  fadsl_context_destroy(probe);
  Suite *s = suite_create("runtime_gpu");
  TCase *tc = tcase_create("gpu");
  tcase_set_timeout(tc, 120);
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, test_device_info);
  tcase_add_test(tc, test_axpy);
  tcase_add_test(tc, test_large_dynamic_shared);
  tcase_add_test(tc, test_launch_error_is_a_status);
  tcase_add_test(tc, test_hopper_target);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  /* no fork: a CUDA context does not survive fork() */
  srunner_set_fork_status(sr, CK_NOFORK);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
