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

#ifndef FADSL_TOP_SRCDIR
#define FADSL_TOP_SRCDIR "."
#endif

/* LeakSanitizer (sanitizer builds): NVRTC and the CUDA driver keep allocations
 * for the life of the process (their caches, the C++ runtime NVRTC brings),
 * which are not leaks of fadsl's.  Only reports whose allocation stack passes
 * through those two libraries are suppressed. */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void) { return "leak:libnvrtc\nleak:libcuda\n"; }
/* In sanitizer builds: the CUDA driver maps memory where AddressSanitizer
 * protects its shadow gap by default, and cuInit would fail. */
const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "protect_shadow_gap=0"; }

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

/* ---- whole programs through the public API ------------------------------------- */

static const char *scale_fa =
    "@kernel(grid=(cdiv(n, BLOCK),))\n"
    "@autotune(BLOCK=[128, 256], warps=[4, 8], key=(n,))\n"
    "def scale(x: *f32[n], y: *f32[n], a: f32, n: i32, BLOCK: constexpr, SQUARE: constexpr = False):\n"
    "    i = program_id(0) * BLOCK + arange(0, BLOCK)\n"
    "    m = i < n\n"
    "    v = load(x + i, mask=m)\n"
    "    if SQUARE:\n"
    "        v = v * v\n"
    "    store(y + i, v * a, mask=m)\n";

START_TEST(test_launch_program) {
  enum { N = 10007 };
  fadsl_program *p;
  ck_assert_int_eq(fadsl_program_load_string(ctx, "scale.fa", scale_fa, &p), FADSL_SUCCESS);
  fadsl_kernel *k;
  ck_assert_int_eq(fadsl_program_kernel(p, "scale", &k), FADSL_SUCCESS);
  float *x = malloc(sizeof(float) * N), *r = malloc(sizeof(float) * N);
  for (int i = 0; i < N; i++) x[i] = (float)(i % 101) - 50.0f;
  uint64_t dx, dy, small;
  ck_assert_int_eq(fadsl_malloc(ctx, sizeof(float) * N, &dx), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_malloc(ctx, sizeof(float) * N, &dy), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_malloc(ctx, sizeof(float) * (N - 1), &small), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_memcpy_htod(ctx, dx, x, sizeof(float) * N), FADSL_SUCCESS);
  fadsl_args *a;
  ck_assert_int_eq(fadsl_args_create(k, &a), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_args_set_ptr(a, "x", dx), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_args_set_ptr(a, "y", dy), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_args_set_f32(a, "a", 2.5f), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_args_set_i32(a, "n", N), FADSL_SUCCESS);
  fadsl_kernel_info info;
  fadsl_status st = fadsl_launch(k, a, NULL, &info);
  ck_assert_msg(st == FADSL_SUCCESS, "%s", fadsl_context_last_error(ctx));
  ck_assert_uint_eq(info.grid[0], (N + 127) / 128);
  ck_assert_uint_eq(info.grid[1], 1);
  ck_assert_str_eq(info.config_source, "default");
  ck_assert_str_eq(info.cache, "miss");
  ck_assert_str_eq(info.arch, ctx->info.arch);
  ck_assert_int_eq(fadsl_synchronize(ctx, NULL), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_memcpy_dtoh(ctx, r, dy, sizeof(float) * N), FADSL_SUCCESS);
  for (int i = 0; i < N; i++) ck_assert_float_eq(r[i], x[i] * 2.5f);
  ck_assert_int_eq(fadsl_launch(k, a, NULL, &info), FADSL_SUCCESS);
  ck_assert_str_eq(info.cache, "memory");

  /* explicit configuration, another specialisation */
  ck_assert_int_eq(fadsl_args_set_int(a, "BLOCK", 256), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_args_set_bool(a, "SQUARE", 1), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_args_set_config(a, 8, 2), FADSL_SUCCESS);
  st = fadsl_launch(k, a, NULL, &info);
  ck_assert_msg(st == FADSL_SUCCESS, "%s", fadsl_context_last_error(ctx));
  ck_assert_str_eq(info.config_source, "explicit");
  ck_assert_int_eq(info.threads, 256);
  ck_assert_uint_eq(info.grid[0], (N + 255) / 256);
  ck_assert_int_eq(fadsl_memcpy_dtoh(ctx, r, dy, sizeof(float) * N), FADSL_SUCCESS);
  for (int i = 0; i < N; i++) ck_assert_float_eq(r[i], x[i] * x[i] * 2.5f);

  /* a buffer smaller than the kernel's declared extent is refused */
  fadsl_args_clear(a);
  ck_assert_int_eq(fadsl_args_set_ptr(a, "x", dx), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_args_set_ptr(a, "y", small), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_args_set_f32(a, "a", 1.0f), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_args_set_i32(a, "n", N), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_launch(k, a, NULL, &info), FADSL_ERROR_INVALID_ARGUMENT);
  ck_assert_ptr_nonnull(strstr(fadsl_context_last_error(ctx), "buffer 'y' is too small"));
  /* n = 0: an empty grid launches nothing, successfully */
  fadsl_args_clear(a);
  fadsl_args_set_ptr(a, "x", dx);
  fadsl_args_set_ptr(a, "y", dy);
  fadsl_args_set_f32(a, "a", 1.0f);
  fadsl_args_set_i32(a, "n", 0);
  ck_assert_int_eq(fadsl_launch(k, a, NULL, &info), FADSL_SUCCESS);
  ck_assert_uint_eq(info.grid[0], 0);
  fadsl_args_destroy(a);
  fadsl_program_destroy(p);
  fadsl_free(ctx, dx);
  fadsl_free(ctx, dy);
  fadsl_free(ctx, small);
  free(x);
  free(r);
}
END_TEST

static uint16_t to_half(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u, mant = x & 0x7fffffu;
  int exp = (int)((x >> 23) & 0xff) - 127 + 15;
  if (exp <= 0) return (uint16_t)sign;   /* the test's values are never that small */
  uint32_t h = (uint32_t)exp << 10 | mant >> 13, rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1))) h++;
  return (uint16_t)(sign | h);
}
static float from_half(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ffu;
  uint32_t x;
  if (exp == 0 && mant == 0) x = sign;
  else if (exp == 0) {   /* subnormal */
    float f = ldexpf((float)mant, -24);
    return sign ? -f : f;
  } else x = sign | (exp - 15 + 127) << 23 | mant << 13;
  float f;
  memcpy(&f, &x, 4);
  return f;
}

/* attention.fa's forward kernel on the GPU against a float64 reference
 * (small, odd length; grouped-query: 2 query heads per kv head). */
START_TEST(test_attention_forward) {
  enum { B = 1, H = 2, KVH = 1, G = H / KVH, N = 77, D = 64 };
  fadsl_program *p;
  fadsl_status st =
      fadsl_program_load_file(ctx, FADSL_TOP_SRCDIR "/examples/attention/attention.fa", &p);
  ck_assert_msg(st == FADSL_SUCCESS, "%s", fadsl_context_last_error(ctx));
  fadsl_kernel *k;
  ck_assert_int_eq(fadsl_program_kernel(p, "attn_fwd", &k), FADSL_SUCCESS);
  size_t nq = (size_t)B * H * N * D, nk = (size_t)B * KVH * N * D;
  uint16_t *q = malloc(2 * nq), *kk = malloc(2 * nk), *v = malloc(2 * nk), *o = malloc(2 * nq);
  srand(1234);
  for (size_t i = 0; i < nq; i++) q[i] = to_half((float)rand() / RAND_MAX * 2 - 1);
  for (size_t i = 0; i < nk; i++) kk[i] = to_half((float)rand() / RAND_MAX * 2 - 1);
  for (size_t i = 0; i < nk; i++) v[i] = to_half((float)rand() / RAND_MAX * 2 - 1);
  uint64_t dq, dk, dv, dlse, dout;
  ck_assert_int_eq(fadsl_malloc(ctx, 2 * nq, &dq), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_malloc(ctx, 2 * nk, &dk), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_malloc(ctx, 2 * nk, &dv), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_malloc(ctx, 2 * nq, &dout), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_malloc(ctx, 4 * (size_t)B * H * N, &dlse), FADSL_SUCCESS);
  fadsl_memcpy_htod(ctx, dq, q, 2 * nq);
  fadsl_memcpy_htod(ctx, dk, kk, 2 * nk);
  fadsl_memcpy_htod(ctx, dv, v, 2 * nk);
  float scale = 1.0f / sqrtf((float)D);
  fadsl_args *a;
  ck_assert_int_eq(fadsl_args_create(k, &a), FADSL_SUCCESS);
  fadsl_args_set_ptr(a, "t_q", dq);
  fadsl_args_set_ptr(a, "t_k", dk);
  fadsl_args_set_ptr(a, "t_v", dv);
  fadsl_args_set_f32(a, "sm_scale", scale);
  fadsl_args_set_ptr(a, "t_lse", dlse);
  fadsl_args_set_ptr(a, "t_o", dout);
  fadsl_args_set_i32(a, "n_zh", B * KVH);
  fadsl_args_set_i32(a, "q_seq_len", N);
  fadsl_args_set_i32(a, "kv_seq_len", N);
  fadsl_args_set_int(a, "n_groups", G);
  fadsl_args_set_int(a, "d_head", D);
  fadsl_args_set_bool(a, "is_causal", 0);
  ck_assert_int_eq(fadsl_args_set_dtype(a, "T", "f16"), FADSL_SUCCESS);
  fadsl_kernel_info info;
  st = fadsl_launch(k, a, NULL, &info);
  ck_assert_msg(st == FADSL_SUCCESS, "%s", fadsl_context_last_error(ctx));
  ck_assert_int_eq(fadsl_synchronize(ctx, NULL), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_memcpy_dtoh(ctx, o, dout, 2 * nq), FADSL_SUCCESS);
  double err2 = 0, ref2 = 0;
  double *s = malloc(sizeof(double) * N);
  for (int h = 0; h < B * H; h++) {
    int kvh = h / G;
    for (int i = 0; i < N; i++) {
      double m = -1e300, l = 0;
      for (int j = 0; j < N; j++) {
        double dot = 0;
        for (int d = 0; d < D; d++)
          dot += (double)from_half(q[((size_t)h * N + i) * D + d]) *
                 from_half(kk[((size_t)kvh * N + j) * D + d]);
        s[j] = dot * scale;
        if (s[j] > m) m = s[j];
      }
      for (int j = 0; j < N; j++) l += exp(s[j] - m);
      for (int d = 0; d < D; d++) {
        double ref = 0;
        for (int j = 0; j < N; j++) ref += exp(s[j] - m) / l * from_half(v[((size_t)kvh * N + j) * D + d]);
        double got = from_half(o[((size_t)h * N + i) * D + d]);
        ck_assert_msg(got == got, "NaN in the output");
        err2 += (got - ref) * (got - ref);
        ref2 += ref * ref;
      }
    }
  }
  double rel = sqrt(err2 / ref2);
  fprintf(stderr, "attn_fwd on %s [%s] warps=%d stages=%d: relative error %.3g\n", info.arch,
          info.constexprs, info.warps, info.stages, rel);
  ck_assert_msg(rel < 2e-3, "relative error %g", rel);
  free(s);
  fadsl_args_destroy(a);
  fadsl_program_destroy(p);
  fadsl_free(ctx, dq);
  fadsl_free(ctx, dk);
  fadsl_free(ctx, dv);
  fadsl_free(ctx, dout);
  fadsl_free(ctx, dlse);
  free(q);
  free(kk);
  free(v);
  free(o);
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
  tcase_add_test(tc, test_launch_program);
  tcase_add_test(tc, test_attention_forward);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  /* no fork: a CUDA context does not survive fork() */
  srunner_set_fork_status(sr, CK_NOFORK);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
