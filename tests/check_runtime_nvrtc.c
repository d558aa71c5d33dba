/* check_runtime_nvrtc.c - compiling hand-written CUDA C++ with NVRTC on a
 * machine without a GPU: PTX and cubin for sm_80 and sm_90a (with Hopper-only
 * instructions, to prove the arch-specific target is really used), embedded
 * headers, compile errors with the log, and ptxas' resource report. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nvrtc_compile.h"

const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void) { return "leak:libnvrtc\nleak:libcuda\n"; }

static FaCudaLoader loader;
static const FaNvrtcApi *api;

static void setup(void) {
  fa_loader_init(&loader, 0);
  const char *why = NULL;
  api = fa_loader_nvrtc(&loader, &why);
  ck_assert_msg(api != NULL, "NVRTC not loaded: %s", why ? why : "");
}
static void teardown(void) { fa_loader_free(&loader); }

/* Uses an embedded header, shared memory, a loop and a local array. */
static const char *saxpy_src =
    "#include \"fa_test_helpers.cuh\"\n"
    "extern \"C\" __global__ void __launch_bounds__(128) saxpy(float *y, const float *x, float a, int n) {\n"
    "  __shared__ float tile[128];\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  tile[threadIdx.x] = i < n ? x[i] : 0.0f;\n"
    "  __syncthreads();\n"
    "  if (i < n) y[i] = fa_test_fma(a, tile[threadIdx.x], y[i]);\n"
    "}\n";
static const char *hdr_names[] = {"fa_test_helpers.cuh"};
static const char *hdr_texts[] = {
    "#pragma once\n"
    "static __device__ __forceinline__ float fa_test_fma(float a, float b, float c) {\n"
    "  float d; asm(\"fma.rn.f32 %0, %1, %2, %3;\" : \"=f\"(d) : \"f\"(a), \"f\"(b), \"f\"(c)); return d;\n"
    "}\n"};

/* Hopper-only PTX: a warpgroup MMA fence and a register reallocation. */
static const char *hopper_src =
    "extern \"C\" __global__ void __launch_bounds__(128) hopper_only(int *out) {\n"
    "  asm volatile(\"wgmma.fence.sync.aligned;\" ::: \"memory\");\n"
    "  asm volatile(\"setmaxnreg.inc.sync.aligned.u32 240;\");\n"
    "  asm volatile(\"wgmma.commit_group.sync.aligned;\" ::: \"memory\");\n"
    "  asm volatile(\"wgmma.wait_group.sync.aligned 0;\" ::: \"memory\");\n"
    "  out[threadIdx.x] = threadIdx.x;\n"
    "}\n";

static fadsl_status compile(const char *src, const char *arch, bool ptx, bool report,
                            FaNvrtcOutput *out, StrBuf *err) {
  FaNvrtcOptions o;
  fa_nvrtc_options_init(&o, arch);
  o.ptx = ptx;
  o.resource_usage = report;
  return fa_nvrtc_compile(api, src, "test.cu", hdr_names, hdr_texts, 1, &o, out, err);
}

static bool is_cuda_elf(const unsigned char *p, size_t n) {
  /* ELF magic, and e_machine (offset 18, little endian) = EM_CUDA (190) */
  return n > 64 && p[0] == 0x7f && p[1] == 'E' && p[2] == 'L' && p[3] == 'F' && p[18] == 190 &&
         p[19] == 0;
}

START_TEST(test_ptx_and_cubin) {
  const char *archs[] = {"sm_80", "sm_90a"};
  for (int i = 0; i < 2; i++) {
    FaNvrtcOutput out;
    StrBuf err;
    fa_sb_init(&err);
    ck_assert_int_eq(compile(saxpy_src, archs[i], true, false, &out, &err), FADSL_SUCCESS);
    ck_assert_uint_gt(out.size, 100);
    ck_assert_uint_eq(strlen((char *)out.code), out.size);
    ck_assert_ptr_nonnull(strstr((char *)out.code, ".entry saxpy"));
    char target[32];
    snprintf(target, sizeof target, ".target %s", archs[i]);
    ck_assert_msg(strstr((char *)out.code, target), "PTX lacks '%s'", target);
    ck_assert_ptr_nonnull(strstr((char *)out.code, "fma.rn.f32"));
    fa_nvrtc_output_free(&out);

    ck_assert_int_eq(compile(saxpy_src, archs[i], false, false, &out, &err), FADSL_SUCCESS);
    ck_assert_msg(is_cuda_elf(out.code, out.size), "not a CUDA ELF for %s", archs[i]);
    fa_nvrtc_output_free(&out);
    fa_sb_free(&err);
  }
}
END_TEST

START_TEST(test_arch_specific_target) {
  FaNvrtcOutput out;
  StrBuf err;
  fa_sb_init(&err);
  /* sm_90a accepts wgmma and setmaxnreg ... */
  ck_assert_int_eq(compile(hopper_src, "sm_90a", true, false, &out, &err), FADSL_SUCCESS);
  ck_assert_ptr_nonnull(strstr((char *)out.code, ".target sm_90a"));
  ck_assert_ptr_nonnull(strstr((char *)out.code, "setmaxnreg.inc.sync.aligned.u32"));
  ck_assert_ptr_nonnull(strstr((char *)out.code, "wgmma.fence.sync.aligned"));
  fa_nvrtc_output_free(&out);
  ck_assert_int_eq(compile(hopper_src, "sm_90a", false, false, &out, &err), FADSL_SUCCESS);
  ck_assert(is_cuda_elf(out.code, out.size));
  fa_nvrtc_output_free(&out);
  /* ... and plain sm_90 and sm_80 do not: the "a" really selects the target */
  ck_assert_int_eq(compile(hopper_src, "sm_90", false, false, &out, &err), FADSL_ERROR_NVRTC);
  ck_assert_ptr_null(out.code);
  fa_nvrtc_output_free(&out);
  fa_sb_free(&err);
  fa_sb_init(&err);
  ck_assert_int_eq(compile(hopper_src, "sm_80", false, false, &out, &err), FADSL_ERROR_NVRTC);
  ck_assert_ptr_nonnull(strstr(err.data, "for sm_80"));
  fa_nvrtc_output_free(&out);
  fa_sb_free(&err);
}
END_TEST

START_TEST(test_compile_error_has_log) {
  const char *bad = "extern \"C\" __global__ void broken(float *y) {\n  y[0] = undeclared_name;\n}\n";
  FaNvrtcOutput out;
  StrBuf err;
  fa_sb_init(&err);
  ck_assert_int_eq(compile(bad, "sm_80", false, false, &out, &err), FADSL_ERROR_NVRTC);
  ck_assert_ptr_null(out.code);
  ck_assert_ptr_nonnull(out.log);
  ck_assert_ptr_nonnull(strstr(out.log, "undeclared_name"));
  ck_assert_ptr_nonnull(strstr(err.data, "NVRTC could not compile test.cu for sm_80"));
  ck_assert_ptr_nonnull(strstr(err.data, "undeclared_name"));   /* the log is in the message */
  ck_assert_ptr_nonnull(strstr(err.data, "test.cu(2)"));        /* with its location */
  fa_nvrtc_output_free(&out);
  fa_sb_free(&err);

  /* an architecture that is not one */
  fa_sb_init(&err);
  ck_assert_int_eq(compile(saxpy_src, "gfx90a", false, false, &out, &err),
                   FADSL_ERROR_INVALID_ARGUMENT);
  ck_assert_ptr_nonnull(strstr(err.data, "gfx90a"));
  fa_nvrtc_output_free(&out);
  fa_sb_free(&err);
  /* one this NVRTC cannot target */
  fa_sb_init(&err);
  ck_assert_int_eq(compile(saxpy_src, "sm_20", false, false, &out, &err), FADSL_ERROR_UNSUPPORTED);
  ck_assert_ptr_nonnull(strstr(err.data, "sm_20"));
  fa_nvrtc_output_free(&out);
  fa_sb_free(&err);
}
END_TEST

/* A kernel whose per-thread array is indexed dynamically lives in local
 * memory (stack frame); __launch_bounds__(256, 8) caps it at 32 registers. */
static const char *pressure_src =
    "extern \"C\" __global__ void __launch_bounds__(256, 8) pressure(float *y, const float *x, int k) {\n"
    "  float acc[64];\n"
    "  #pragma unroll\n"
    "  for (int j = 0; j < 64; j++) acc[j] = x[threadIdx.x * 64 + j] * (j + 1);\n"
    "  float t = acc[k & 63];\n"
    "  #pragma unroll\n"
    "  for (int j = 0; j < 64; j++) t += acc[j] * acc[(j * 7) & 63];\n"
    "  y[threadIdx.x] = t;\n"
    "}\n";

START_TEST(test_resource_usage) {
  const char *archs[] = {"sm_80", "sm_90a"};
  for (int i = 0; i < 2; i++) {
    FaNvrtcOutput out;
    StrBuf err;
    fa_sb_init(&err);
    ck_assert_int_eq(compile(saxpy_src, archs[i], false, true, &out, &err), FADSL_SUCCESS);
    FaKernelResources r;
    ck_assert_msg(fa_parse_resource_usage(out.log, "saxpy", &r), "log: %s", out.log);
    ck_assert_int_gt(r.registers, 0);
    ck_assert_int_le(r.registers, 255);
    ck_assert_int_eq(r.static_shared, 128 * 4);
    ck_assert_int_eq(r.spill_stores, 0);
    ck_assert_int_eq(r.spill_loads, 0);
    ck_assert_int_eq(r.barriers, 1);
    /* NULL entry: the first one */
    FaKernelResources r2;
    ck_assert(fa_parse_resource_usage(out.log, NULL, &r2));
    ck_assert_int_eq(r2.registers, r.registers);
    /* not there */
    ck_assert(!fa_parse_resource_usage(out.log, "saxp", &r2));
    ck_assert_int_eq(r2.registers, -1);
    fa_nvrtc_output_free(&out);

    FaNvrtcOptions o;
    fa_nvrtc_options_init(&o, archs[i]);
    o.resource_usage = true;
    const char *extra[] = {"-DUNUSED_EXTRA_OPTION=1"};   /* extra options pass through */
    o.extra = extra;
    o.nextra = 1;
    ck_assert_int_eq(fa_nvrtc_compile(api, pressure_src, "p.cu", NULL, NULL, 0, &o, &out, &err),
                     FADSL_SUCCESS);
    ck_assert_msg(fa_parse_resource_usage(out.log, "pressure", &r), "log: %s", out.log);
    ck_assert_int_gt(r.registers, 0);
    ck_assert_int_le(r.registers, 32);
    ck_assert_msg(r.stack_frame > 0, "stack frame %d; log: %s", r.stack_frame, out.log);
    ck_assert_int_ge(r.spill_stores, 0);
    ck_assert_int_eq(r.static_shared, 0);
    fa_nvrtc_output_free(&out);
    fa_sb_free(&err);
  }
}
END_TEST

/* The parser on fixed reports: the format with and without the newer
 * fields, several functions, a device function's properties in between. */
START_TEST(test_parse_fixed_reports) {
  const char *log =
      "ptxas info    : 0 bytes gmem\n"
      "ptxas info    : Compiling entry function 'first' for 'sm_80'\n"
      "ptxas info    : Function properties for first\n"
      "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
      "ptxas info    : Used 12 registers, 360 bytes cmem[0]\n"
      "ptxas info    : Function properties for helper\n"
      "ptxas         .     48 bytes stack frame, 8 bytes spill stores, 8 bytes spill loads\n"
      "ptxas info    : Compiling entry function 'second' for 'sm_90a'\n"
      "ptxas info    : Function properties for second\n"
      "ptxas         .     96 bytes stack frame, 40 bytes spill stores, 36 bytes spill loads\n"
      "ptxas info    : Used 168 registers, used 2 barriers, 96 bytes cumulative stack size, 2048 bytes smem\n";
  FaKernelResources r;
  ck_assert(fa_parse_resource_usage(log, "first", &r));
  ck_assert_int_eq(r.registers, 12);
  ck_assert_int_eq(r.stack_frame, 0);
  ck_assert_int_eq(r.static_shared, 0);
  ck_assert_int_eq(r.barriers, 0);
  ck_assert(fa_parse_resource_usage(log, "second", &r));
  ck_assert_int_eq(r.registers, 168);
  ck_assert_int_eq(r.stack_frame, 96);
  ck_assert_int_eq(r.spill_stores, 40);
  ck_assert_int_eq(r.spill_loads, 36);
  ck_assert_int_eq(r.static_shared, 2048);
  ck_assert_int_eq(r.barriers, 2);
  ck_assert(fa_parse_resource_usage(log, NULL, &r));
  ck_assert_int_eq(r.registers, 12);
  ck_assert(!fa_parse_resource_usage("", "first", &r));
  ck_assert(!fa_parse_resource_usage(NULL, "first", &r));
}
END_TEST

START_TEST(test_option_string) {
  FaNvrtcOptions o;
  fa_nvrtc_options_init(&o, "sm_90a");
  StrBuf sb;
  fa_sb_init(&sb);
  ck_assert(fa_nvrtc_option_string(&o, &sb));
  ck_assert_str_eq(sb.data, "-arch=sm_90a\n-std=c++17\n-default-device\n-lineinfo\n");
  fa_sb_free(&sb);
  o.ptx = true;
  o.fast_math = true;
  fa_sb_init(&sb);
  ck_assert(fa_nvrtc_option_string(&o, &sb));
  ck_assert_str_eq(sb.data,
                   "-arch=compute_90a\n-std=c++17\n-default-device\n-lineinfo\n--use_fast_math\n");
  fa_sb_free(&sb);
  o.arch = "sm90";
  fa_sb_init(&sb);
  ck_assert(!fa_nvrtc_option_string(&o, &sb));
  fa_sb_free(&sb);
}
END_TEST

int main(void) {
  Suite *s = suite_create("runtime_nvrtc");
  TCase *tc = tcase_create("nvrtc");
  tcase_set_timeout(tc, 120);
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, test_ptx_and_cubin);
  tcase_add_test(tc, test_arch_specific_target);
  tcase_add_test(tc, test_compile_error_has_log);
  tcase_add_test(tc, test_resource_usage);
  tcase_add_test(tc, test_parse_fixed_reports);
  tcase_add_test(tc, test_option_string);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
