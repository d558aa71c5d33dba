/* check_runtime_nvrtc.c - compiling hand-written CUDA C++ with NVRTC on a
 * machine without a GPU: PTX and cubin for sm_80 and sm_90a (with Hopper-only
 * instructions, to prove the arch-specific target is really used), embedded
 * headers, compile errors with the log, ptxas' resource report, and the
 * resource usage read from the cubin itself (against ptxas' report, without
 * one, and on truncated and corrupted cubins). */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cubin.h"
#include "nvrtc_compile.h"

/* LeakSanitizer (sanitizer builds): NVRTC and the CUDA driver keep allocations
 * for the life of the process (their caches, the C++ runtime NVRTC brings),
 * which are not leaks of fadsl's.  Only reports whose allocation stack passes
 * through those two libraries are suppressed. */
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

/* The report where NVRTC hands it back; where it does not (some NVRTC builds
 * give it to a process's first compilation only), the same facts from the
 * cubin, so the test holds either way. */
static bool report_or_cubin(const FaNvrtcOutput *out, const char *entry, FaKernelResources *r) {
  if (fa_parse_resource_usage(out->log, entry, r)) return true;
  fprintf(stderr, "note: no ptxas report for %s in NVRTC's log; checking the cubin's values\n", entry);
  ck_assert(fa_kernel_resources(out->code, out->size, out->log, entry, r, NULL));
  return false;
}

START_TEST(test_resource_usage) {
  const char *archs[] = {"sm_80", "sm_90a"};
  for (int i = 0; i < 2; i++) {
    FaNvrtcOutput out;
    StrBuf err;
    fa_sb_init(&err);
    ck_assert_int_eq(compile(saxpy_src, archs[i], false, true, &out, &err), FADSL_SUCCESS);
    FaKernelResources r;
    bool reported = report_or_cubin(&out, "saxpy", &r);
    ck_assert_int_gt(r.registers, 0);
    ck_assert_int_le(r.registers, 255);
    ck_assert_int_eq(r.static_shared, 128 * 4);
    ck_assert_int_eq(r.spill_stores, 0);
    ck_assert_int_eq(r.spill_loads, 0);
    ck_assert_int_eq(r.barriers, 1);
    FaKernelResources r2;
    if (reported) {
      /* NULL entry: the first one */
      ck_assert(fa_parse_resource_usage(out.log, NULL, &r2));
      ck_assert_int_eq(r2.registers, r.registers);
    }
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
    report_or_cubin(&out, "pressure", &r);
    ck_assert_int_gt(r.registers, 0);
    ck_assert_int_le(r.registers, 32);
    ck_assert_msg(r.stack_frame > 0, "stack frame %d; log: %s", r.stack_frame, out.log);
    ck_assert_int_eq(r.static_shared, 0);
    fa_nvrtc_output_free(&out);
    fa_sb_free(&err);
  }
}
END_TEST

/* Compiles one of the test kernels to a cubin (with or without ptxas'
 * report in the log). */
static void cubin_of(const char *src, const char *arch, bool report, FaNvrtcOutput *out) {
  StrBuf err;
  fa_sb_init(&err);
  fadsl_status st = compile(src, arch, false, report, out, &err);
  ck_assert_msg(st == FADSL_SUCCESS, "%s", err.data ? err.data : "");
  fa_sb_free(&err);
}

/* The cubin's view against ptxas' where the log has a report; the values
 * that follow from the source (shared array, __launch_bounds__,
 * __syncthreads) must hold either way. */
START_TEST(test_cubin_resources) {
  const char *archs[] = {"sm_80", "sm_90a"};
  for (int i = 0; i < 2; i++) {
    FaNvrtcOutput out;
    cubin_of(saxpy_src, archs[i], true, &out);
    FaKernelResources c, p;
    char why[160];
    ck_assert_msg(fa_cubin_resources(out.code, out.size, "saxpy", &c, why, sizeof why), "%s: %s",
                  archs[i], why);
    ck_assert_int_gt(c.registers, 0);
    ck_assert_int_le(c.registers, 255);
    ck_assert_int_eq(c.static_shared, 128 * 4);   /* __shared__ float tile[128] */
    ck_assert_int_eq(c.barriers, 1);               /* one __syncthreads */
    ck_assert_int_eq(c.max_threads, 128);          /* __launch_bounds__(128) */
    ck_assert_int_eq(c.stack_frame, 0);
    ck_assert_int_eq(c.spill_stores, 0);           /* no stack frame: nothing spilled */
    ck_assert_int_eq(c.spill_loads, 0);
    if (fa_parse_resource_usage(out.log, "saxpy", &p)) {
      ck_assert_int_eq(c.registers, p.registers);
      ck_assert_int_eq(c.static_shared, p.static_shared);
      ck_assert_int_eq(c.stack_frame, p.stack_frame);
      ck_assert_int_eq(c.barriers, p.barriers);
    } else {
      fprintf(stderr, "note: NVRTC gave no ptxas report for saxpy on %s\n", archs[i]);
    }
    /* NULL entry: the first function */
    FaKernelResources first;
    ck_assert(fa_cubin_resources(out.code, out.size, NULL, &first, NULL, 0));
    ck_assert_int_eq(first.registers, c.registers);
    /* a function that is not there */
    ck_assert(!fa_cubin_resources(out.code, out.size, "saxp", &first, why, sizeof why));
    ck_assert_ptr_nonnull(strstr(why, "no function saxp"));
    ck_assert_int_eq(first.registers, -1);
    /* without the report in the log: the same code, the same answer */
    FaNvrtcOutput quiet;
    cubin_of(saxpy_src, archs[i], false, &quiet);
    ck_assert(!fa_parse_resource_usage(quiet.log, "saxpy", &p));
    FaKernelResources q;
    ck_assert(fa_kernel_resources(quiet.code, quiet.size, quiet.log, "saxpy", &q, NULL));
    ck_assert_int_eq(q.registers, c.registers);
    ck_assert_int_eq(q.static_shared, c.static_shared);
    ck_assert_int_eq(q.spill_stores, 0);
    fa_nvrtc_output_free(&quiet);
    fa_nvrtc_output_free(&out);

    /* local memory: a stack frame, at most 32 registers; spills unknown
     * without the report */
    cubin_of(pressure_src, archs[i], true, &out);
    ck_assert(fa_cubin_resources(out.code, out.size, "pressure", &c, why, sizeof why));
    ck_assert_int_gt(c.registers, 0);
    ck_assert_int_le(c.registers, 32);             /* __launch_bounds__(256, 8) */
    ck_assert_int_gt(c.stack_frame, 0);
    ck_assert_int_eq(c.static_shared, 0);
    ck_assert_int_eq(c.max_threads, 256);
    ck_assert_int_eq(c.barriers, 0);
    ck_assert_int_eq(c.spill_stores, -1);
    if (fa_parse_resource_usage(out.log, "pressure", &p)) {
      ck_assert_int_eq(c.registers, p.registers);
      ck_assert_int_eq(c.stack_frame, p.stack_frame);
      /* combined: the report's spill counts, no disagreement */
      StrBuf notes;
      fa_sb_init(&notes);
      FaKernelResources k;
      ck_assert(fa_kernel_resources(out.code, out.size, out.log, "pressure", &k, &notes));
      ck_assert_int_eq(k.spill_stores, p.spill_stores);
      ck_assert_int_eq(k.spill_loads, p.spill_loads);
      ck_assert_int_eq(k.registers, c.registers);
      ck_assert_msg(notes.len == 0, "%s", notes.data);
      fa_sb_free(&notes);
    }
    /* a report that disagrees is noted; the cubin's value is kept */
    char fake_log[512];
    snprintf(fake_log, sizeof fake_log,
             "ptxas info    : Compiling entry function 'pressure' for '%s'\n"
             "ptxas info    : Function properties for pressure\n"
             "ptxas         .     %d bytes stack frame, 4 bytes spill stores, 8 bytes spill loads\n"
             "ptxas info    : Used %d registers, used 0 barriers\n",
             archs[i], c.stack_frame, c.registers + 1);
    StrBuf notes;
    fa_sb_init(&notes);
    FaKernelResources k;
    ck_assert(fa_kernel_resources(out.code, out.size, fake_log, "pressure", &k, &notes));
    ck_assert_int_eq(k.registers, c.registers);
    ck_assert_int_eq(k.spill_stores, 4);
    ck_assert_int_eq(k.spill_loads, 8);
    ck_assert_ptr_nonnull(notes.data);
    ck_assert_msg(strstr(notes.data, "pressure: the cubin says") && strstr(notes.data, "registers"),
                  "%s", notes.data);
    fa_sb_free(&notes);
    /* no cubin: the report alone */
    ck_assert(fa_kernel_resources(NULL, 0, fake_log, "pressure", &k, NULL));
    ck_assert_int_eq(k.registers, c.registers + 1);
    ck_assert_int_eq(k.max_threads, -1);
    ck_assert(!fa_kernel_resources(NULL, 0, "", "pressure", &k, NULL));
    fa_nvrtc_output_free(&out);
  }
}
END_TEST

/* A copy of exactly n bytes, so that the sanitizer sees any read past it. */
static unsigned char *exact_copy(const unsigned char *p, size_t n) {
  unsigned char *c = malloc(n ? n : 1);
  ck_assert_ptr_nonnull(c);
  memcpy(c, p, n);
  return c;
}

static void put64(unsigned char *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

/* Truncated and corrupted cubins: never a crash or a read outside the
 * buffer (the sanitizer build checks that), and the verdicts that are
 * certain. */
START_TEST(test_cubin_corrupt) {
  const char *archs[] = {"sm_80", "sm_90a"};
  for (int i = 0; i < 2; i++) {
    FaNvrtcOutput out;
    cubin_of(saxpy_src, archs[i], false, &out);
    FaKernelResources r, good;
    ck_assert(fa_cubin_resources(out.code, out.size, "saxpy", &good, NULL, 0));
    uint64_t shoff = 0;
    for (int b = 7; b >= 0; b--) shoff = shoff << 8 | out.code[0x28 + b];
    uint64_t table_end = shoff + 64u * (uint64_t)(out.code[0x3c] | out.code[0x3d] << 8);
    ck_assert_uint_le(table_end, out.size);
    /* every truncation: unreadable while the section header table is cut
     * (the sections' contents lie before it); after it, only what follows
     * (program headers) is missing, and the answer is the whole file's */
    for (size_t n = 0; n < out.size; n++) {
      unsigned char *c = exact_copy(out.code, n);
      bool ok = fa_cubin_resources(c, n, "saxpy", &r, NULL, 0);
      if (n < table_end) {
        ck_assert_msg(!ok, "%s: truncated to %zu, readable", archs[i], n);
        ck_assert_int_eq(r.registers, -1);
      } else {
        ck_assert_msg(ok, "%s: truncated to %zu after the section table, unreadable", archs[i], n);
        ck_assert_mem_eq(&r, &good, sizeof r);
      }
      free(c);
    }
    char why[160];
    ck_assert(!fa_cubin_resources(NULL, 0, "saxpy", &r, why, sizeof why));
    ck_assert_str_eq(why, "not an ELF file");

    /* header fields pointing anywhere */
    struct { size_t at, width; uint64_t value; } edits[] = {
        {0x28, 8, UINT64_MAX},       {0x28, 8, out.size - 32},   {0x28, 8, 1},
        {0x3a, 2, 0},                {0x3a, 2, 0xffff},          {0x3c, 2, 0xffff},
        {0x3c, 2, 0},                {0x3e, 2, 0xfffe},          {0x3e, 2, 0xffff},
        {0x04, 1, 1},                {0x12, 2, 62},
    };
    for (size_t e = 0; e < sizeof edits / sizeof edits[0]; e++) {
      unsigned char *c = exact_copy(out.code, out.size);
      for (size_t b = 0; b < edits[e].width; b++) c[edits[e].at + b] = (unsigned char)(edits[e].value >> (8 * b));
      fa_cubin_resources(c, out.size, "saxpy", &r, NULL, 0);
      free(c);
    }
    /* each section header's offset, size, name, link and entry size set to
     * extremes */
    uint16_t shnum = (uint16_t)(out.code[0x3c] | out.code[0x3d] << 8);
    for (unsigned s = 0; s < shnum; s++) {
      static const size_t fields[] = {0, 24, 32, 40, 56};
      static const uint64_t values[] = {UINT64_MAX, UINT64_MAX - 16, 0x7fffffff, 0};
      for (size_t f = 0; f < 5; f++)
        for (size_t v = 0; v < 4; v++) {
          unsigned char *c = exact_copy(out.code, out.size);
          unsigned char *h = c + shoff + (uint64_t)s * 64 + fields[f];
          if (fields[f] == 0 || fields[f] == 40) {   /* 32-bit fields */
            for (int b = 0; b < 4; b++) h[b] = (unsigned char)(values[v] >> (8 * b));
          } else {
            put64(h, values[v]);
          }
          fa_cubin_resources(c, out.size, "saxpy", &r, NULL, 0);
          free(c);
        }
    }
    /* random byte damage anywhere, many times (a fixed seed: repeatable) */
    uint64_t seed = 0x9e3779b97f4a7c15u + (uint64_t)i;
    int readable = 0;
    for (int t = 0; t < 3000; t++) {
      unsigned char *c = exact_copy(out.code, out.size);
      int nflips = 1 + t % 8;
      for (int f = 0; f < nflips; f++) {
        seed = seed * 6364136223846793005u + 1442695040888963407u;
        size_t at = (size_t)(seed >> 33) % out.size;
        /* half of the damage in the headers and tables at the end */
        if (t % 2 && out.size > shoff) at = (size_t)(shoff + (seed >> 40) % (out.size - shoff));
        c[at] ^= (unsigned char)(1u << ((seed >> 20) & 7)) | (unsigned char)(seed >> 12);
      }
      readable += fa_cubin_resources(c, out.size, "saxpy", &r, NULL, 0);
      free(c);
    }
    fprintf(stderr, "%s: %d of 3000 damaged cubins still readable\n", archs[i], readable);
    fa_nvrtc_output_free(&out);
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
  tcase_add_test(tc, test_cubin_resources);
  tcase_add_test(tc, test_cubin_corrupt);
  tcase_add_test(tc, test_option_string);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
