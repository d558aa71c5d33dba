/* check_runtime_program.c - libfadsl's public API on programs, without a
 * GPU: loading (syntax and semantic errors as statuses with located
 * diagnostics), kernels by name, binding errors on real kernels, the
 * configuration rule (explicit > tuned > default), compiling through the
 * kernel cache for sm_80 and sm_90a, attention.fa's kernels, and launches
 * failing cleanly where there is no device or no driver. */
#include <check.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fadsl.h"

/* LeakSanitizer (sanitizer builds): NVRTC and the CUDA driver keep allocations
 * for the life of the process (their caches, the C++ runtime NVRTC brings),
 * which are not leaks of fadsl's.  Only reports whose allocation stack passes
 * through those two libraries are suppressed. */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void) { return "leak:libnvrtc\nleak:libcuda\n"; }

#ifndef FADSL_TOP_SRCDIR
#define FADSL_TOP_SRCDIR "."
#endif

static const char *scale_fa =
    "@kernel(grid=(cdiv(n, BLOCK),))\n"
    "@autotune(BLOCK=[128, 256], warps=[4, 8], key=(n,))\n"
    "def scale(x: *f32[n], y: *f32[n], a: f32, n: i32, BLOCK: constexpr, SQUARE: constexpr = False):\n"
    "    i = program_id(0) * BLOCK + arange(0, BLOCK)\n"
    "    m = i < n\n"
    "    v = load(x + i, mask=m)\n"
    "    if SQUARE:\n"
    "        v = v * v\n"
    "    store(y + i, v * a, mask=m)\n"
    "\n"
    "@kernel(grid=(1,))\n"
    "def checked(x: *f32, N: constexpr):\n"
    "    static_assert(N % 2 == 0, \"N must be even\")\n"
    "    store(x + arange(0, N), zeros((N,), f32))\n";

static fadsl_context *ctx;
static char cache_dir[256];

static void setup(void) {
  unsetenv("FADSL_NO_DRIVER");
  unsetenv("FADSL_LOG");
  snprintf(cache_dir, sizeof cache_dir, "/tmp/fadsl-program-test-XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(cache_dir));
  setenv("FADSL_CACHE_DIR", cache_dir, 1);
  setenv("FADSL_TUNE_DB", "/nonexistent/tune.json", 1);
  ck_assert_int_eq(fadsl_context_create(-1, &ctx), FADSL_SUCCESS);
}

static void teardown(void) {
  fadsl_context_destroy(ctx);
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", cache_dir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", cache_dir);
}

static const char *err(void) { return fadsl_context_last_error(ctx); }

#define ck_error(call, status, needle)                                                        \
  do {                                                                                       \
    fadsl_status st_ = (call);                                                               \
    ck_assert_msg(st_ == (status), "status %d (%s), want %d; message: %s", st_,              \
                  fadsl_status_string(st_), (status), err());                                \
    ck_assert_msg(strstr(err(), (needle)), "message '%s' lacks '%s'", err(), (needle));       \
  } while (0)

static fadsl_program *load_scale(void) {
  fadsl_program *p = NULL;
  fadsl_status st = fadsl_program_load_string(ctx, "scale.fa", scale_fa, &p);
  ck_assert_msg(st == FADSL_SUCCESS, "%s", err());
  return p;
}

START_TEST(test_load_errors) {
  fadsl_program *p = (fadsl_program *)1;
  ck_error(fadsl_program_load_string(ctx, "bad.fa", "def f(:\n    pass\n", &p), FADSL_ERROR_PROGRAM,
           "bad.fa:1:");
  ck_assert_ptr_null(p);
  ck_assert_ptr_nonnull(strstr(err(), "error:"));
  ck_error(fadsl_program_load_string(ctx, NULL, "@kernel(grid=(1,))\ndef k(x: *f32):\n    y = nope + 1\n", &p),
           FADSL_ERROR_PROGRAM, "<string>:3:");
  ck_error(fadsl_program_load_file(ctx, "/nonexistent/prog.fa", &p), FADSL_ERROR_IO,
           "/nonexistent/prog.fa: cannot read");
  ck_assert_int_eq(fadsl_program_load_string(NULL, "x", "", &p), FADSL_ERROR_INVALID_ARGUMENT);
  ck_assert_int_eq(fadsl_program_load_string(ctx, "x", NULL, &p), FADSL_ERROR_INVALID_ARGUMENT);
  fadsl_program_destroy(NULL);
}
END_TEST

START_TEST(test_kernels_and_binding) {
  fadsl_program *p = load_scale();
  ck_assert_int_eq(fadsl_program_kernel_count(p), 2);
  ck_assert_str_eq(fadsl_program_kernel_name(p, 0), "scale");
  ck_assert_str_eq(fadsl_program_kernel_name(p, 1), "checked");
  ck_assert_ptr_null(fadsl_program_kernel_name(p, 2));
  fadsl_kernel *k = NULL;
  ck_error(fadsl_program_kernel(p, "scal", &k), FADSL_ERROR_NOT_FOUND,
           "scale.fa has no kernel 'scal' (it has: scale, checked)");
  ck_assert_ptr_null(k);
  ck_assert_int_eq(fadsl_program_kernel(p, "scale", &k), FADSL_SUCCESS);
  ck_assert_str_eq(fadsl_kernel_name(k), "scale");
  ck_assert_int_eq(fadsl_kernel_param_count(k), 6);

  fadsl_args *a;
  ck_assert_int_eq(fadsl_args_create(k, &a), FADSL_SUCCESS);
  ck_error(fadsl_args_set_i32(a, "m", 1), FADSL_ERROR_BINDING, "kernel 'scale' has no parameter 'm'");
  ck_error(fadsl_args_set_i64(a, "n", 1), FADSL_ERROR_BINDING, "takes an i32 (FADSL_ARG_I32)");
  ck_error(fadsl_args_set_i32(a, "x", 1), FADSL_ERROR_BINDING, "is a pointer");
  ck_error(fadsl_args_set_f32(a, "BLOCK", 1), FADSL_ERROR_BINDING, "is a constexpr");
  ck_assert_int_eq(fadsl_args_set_f32(a, "a", 2.0f), FADSL_SUCCESS);
  ck_error(fadsl_args_set_f32(a, "a", 3.0f), FADSL_ERROR_BINDING, "already bound");
  ck_error(fadsl_args_set_at(a, 6, fadsl_int(1)), FADSL_ERROR_BINDING, "no position 6");
  /* a launch names what is missing (before it needs a device) */
  fadsl_context *c0;
  setenv("FADSL_NO_DRIVER", "1", 1);
  fadsl_context_create(0, &c0);
  unsetenv("FADSL_NO_DRIVER");
  fadsl_program *p0;
  ck_assert_int_eq(fadsl_program_load_string(c0, "scale.fa", scale_fa, &p0), FADSL_SUCCESS);
  fadsl_kernel *k0;
  ck_assert_int_eq(fadsl_program_kernel(p0, "scale", &k0), FADSL_SUCCESS);
  fadsl_args *a0;
  ck_assert_int_eq(fadsl_args_create(k0, &a0), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_launch(k0, a0, NULL, NULL), FADSL_ERROR_NO_DRIVER);
  ck_assert_ptr_nonnull(strstr(fadsl_context_last_error(c0), "no CUDA driver found (libcuda.so.1 could not be loaded: "));
  /* arguments of another kernel */
  fadsl_kernel *other;
  ck_assert_int_eq(fadsl_program_kernel(p, "checked", &other), FADSL_SUCCESS);
  ck_error(fadsl_compile(other, a, "sm_80", NULL), FADSL_ERROR_INVALID_ARGUMENT,
           "the arguments were made for kernel 'scale', not 'checked'");
  fadsl_args_destroy(a0);
  fadsl_program_destroy(p0);
  fadsl_context_destroy(c0);
  fadsl_args_destroy(a);
  fadsl_program_destroy(p);
}
END_TEST

START_TEST(test_compile_default_explicit_cached) {
  fadsl_program *p = load_scale();
  fadsl_kernel *k;
  ck_assert_int_eq(fadsl_program_kernel(p, "scale", &k), FADSL_SUCCESS);
  fadsl_args *a;
  ck_assert_int_eq(fadsl_args_create(k, &a), FADSL_SUCCESS);
  fadsl_kernel_info info;

  /* default: first value of each @autotune list; stages 2 */
  fadsl_status st = fadsl_compile(k, a, "sm_80", &info);
  ck_assert_msg(st == FADSL_SUCCESS, "%s", err());
  ck_assert_str_eq(info.kernel, "scale");
  ck_assert_str_eq(info.arch, "sm_80");
  ck_assert_str_eq(info.config_source, "default");
  ck_assert_str_eq(info.constexprs, "BLOCK=128 SQUARE=False");
  ck_assert_int_eq(info.warps, 4);
  ck_assert_int_eq(info.stages, 2);
  ck_assert_int_eq(info.threads, 128);
  ck_assert_str_eq(info.cache, "miss");
  /* resource usage from the cubin, whether or not NVRTC's log has ptxas'
   * report: no local memory in this kernel, so no spills either */
  ck_assert_int_gt(info.registers, 0);
  ck_assert_int_eq(info.local_bytes, 0);
  ck_assert_int_eq(info.spill_bytes, 0);
  ck_assert_int_ge(info.static_shared_bytes, 0);
  int registers = info.registers;
  ck_assert_ptr_nonnull(info.entry);
  ck_assert_ptr_nonnull(strstr(info.cuda_source, info.entry));
  ck_assert_uint_eq(info.grid[0], 0);
  /* again: the compiled specialisation is kept */
  ck_assert_int_eq(fadsl_compile(k, a, "sm_80", &info), FADSL_SUCCESS);
  ck_assert_str_eq(info.cache, "memory");
  /* for Hopper */
  st = fadsl_compile(k, a, "sm_90a", &info);
  ck_assert_msg(st == FADSL_SUCCESS, "%s", err());
  ck_assert_str_eq(info.arch, "sm_90a");
  ck_assert_str_eq(info.cache, "miss");

  /* explicit: a bound axis and set_config */
  ck_assert_int_eq(fadsl_args_set_int(a, "BLOCK", 256), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_args_set_bool(a, "SQUARE", 1), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_compile(k, a, "sm_80", &info), FADSL_SUCCESS);
  ck_assert_str_eq(info.config_source, "explicit+default");
  ck_assert_str_eq(info.constexprs, "BLOCK=256 SQUARE=True");
  ck_assert_int_eq(info.warps, 4);
  ck_assert_int_eq(fadsl_args_set_config(a, 8, 3), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_compile(k, a, "sm_80", &info), FADSL_SUCCESS);
  ck_assert_str_eq(info.config_source, "explicit");
  ck_assert_int_eq(info.warps, 8);
  ck_assert_int_eq(info.stages, 3);
  ck_assert_int_eq(info.threads, 256);

  /* bad architectures */
  ck_error(fadsl_compile(k, a, "sm80", &info), FADSL_ERROR_INVALID_ARGUMENT, "sm80");
  ck_error(fadsl_compile(k, a, "sm_80a", &info), FADSL_ERROR_UNSUPPORTED, "sm_90a");
  ck_error(fadsl_compile(k, a, NULL, &info), FADSL_ERROR_NO_DEVICE, "device -1");
  fadsl_args_destroy(a);
  fadsl_program_destroy(p);

  /* a new context (a later process) finds the cubins on disk */
  fadsl_context_destroy(ctx);
  ck_assert_int_eq(fadsl_context_create(-1, &ctx), FADSL_SUCCESS);
  p = load_scale();
  ck_assert_int_eq(fadsl_program_kernel(p, "scale", &k), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_args_create(k, &a), FADSL_SUCCESS);
  ck_assert_int_eq(fadsl_compile(k, a, "sm_80", &info), FADSL_SUCCESS);
  ck_assert_str_eq(info.cache, "disk");
  ck_assert_int_eq(info.registers, registers);   /* read from the cached cubin */
  ck_assert_int_eq(info.spill_bytes, 0);
  fadsl_args_destroy(a);
  fadsl_program_destroy(p);
}
END_TEST

START_TEST(test_specialisation_errors) {
  fadsl_program *p = load_scale();
  fadsl_kernel *k;
  ck_assert_int_eq(fadsl_program_kernel(p, "checked", &k), FADSL_SUCCESS);
  fadsl_args *a;
  ck_assert_int_eq(fadsl_args_create(k, &a), FADSL_SUCCESS);
  ck_error(fadsl_compile(k, a, "sm_80", NULL), FADSL_ERROR_BINDING,
           "kernel 'checked': missing argument 'N' (constexpr)");
  ck_assert_int_eq(fadsl_args_set_int(a, "N", 3), FADSL_SUCCESS);
  ck_error(fadsl_compile(k, a, "sm_80", NULL), FADSL_ERROR_PROGRAM, "N must be even");
  ck_assert_ptr_nonnull(strstr(err(), "scale.fa:13:"));   /* located in the program */
  fadsl_args_clear(a);
  ck_assert_int_eq(fadsl_args_set_int(a, "N", 64), FADSL_SUCCESS);
  ck_assert_msg(fadsl_compile(k, a, "sm_90a", NULL) == FADSL_SUCCESS, "%s", err());
  fadsl_args_clear(a);
  ck_assert_int_eq(fadsl_args_set_dtype(a, "N", "f17"), FADSL_SUCCESS);
  ck_error(fadsl_compile(k, a, "sm_80", NULL), FADSL_ERROR_BINDING, "'f17' is not a dtype");
  fadsl_args_destroy(a);
  fadsl_program_destroy(p);
}
END_TEST

/* attention.fa: every kernel compiles for both targets with its default
 * configuration (the full autotune space is the CUDA backend's test). */
START_TEST(test_attention_compiles) {
  fadsl_program *p = NULL;
  fadsl_status st =
      fadsl_program_load_file(ctx, FADSL_TOP_SRCDIR "/examples/attention/attention.fa", &p);
  ck_assert_msg(st == FADSL_SUCCESS, "%s", err());
  ck_assert_int_eq(fadsl_program_kernel_count(p), 10);
  const char *archs[] = {"sm_80", "sm_90a"};
  for (int i = 0; i < fadsl_program_kernel_count(p); i++) {
    fadsl_kernel *k;
    ck_assert_int_eq(fadsl_program_kernel(p, fadsl_program_kernel_name(p, i), &k), FADSL_SUCCESS);
    fadsl_args *a;
    ck_assert_int_eq(fadsl_args_create(k, &a), FADSL_SUCCESS);
    const char *name = fadsl_program_kernel_name(p, i);
    int zero = !strcmp(name, "attn_bwd_dkdv_zero");    /* float32 only */
    int grouped = strcmp(name, "attn_bwd_dkdv_convert") != 0 && !zero;   /* else per kv head */
    ck_assert_int_eq(fadsl_args_set_int(a, "n_groups", 4), (grouped ? FADSL_SUCCESS : FADSL_ERROR_BINDING));
    ck_assert_int_eq(fadsl_args_set_int(a, "d_head", 64), FADSL_SUCCESS);
    ck_assert_int_eq(fadsl_args_set_dtype(a, "T", "f16"), (zero ? FADSL_ERROR_BINDING : FADSL_SUCCESS));
    fadsl_args_set_bool(a, "is_causal", 1);   /* not every kernel has it */
    for (int j = 0; j < 2; j++) {
      fadsl_kernel_info info;
      st = fadsl_compile(k, a, archs[j], &info);
      ck_assert_msg(st == FADSL_SUCCESS, "%s for %s: %s", fadsl_kernel_name(k), archs[j], err());
      ck_assert_int_gt(info.registers, 0);
      fprintf(stderr, "%s %s [%s] warps=%d stages=%d (%s): %d registers, %d spill bytes, %zu smem\n",
              info.kernel, info.arch, info.constexprs, info.warps, info.stages, info.config_source,
              info.registers, info.spill_bytes, info.shared_bytes);
    }
    fadsl_args_destroy(a);
  }
  fadsl_program_destroy(p);
}
END_TEST

int main(void) {
  Suite *s = suite_create("runtime_program");
  TCase *tc = tcase_create("program");
  tcase_set_timeout(tc, 600);
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, test_load_errors);
  tcase_add_test(tc, test_kernels_and_binding);
  tcase_add_test(tc, test_compile_default_explicit_cached);
  tcase_add_test(tc, test_specialisation_errors);
  tcase_add_test(tc, test_attention_compiles);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
